//! The kernel's view of a thread, of this process or another: its CPU
//! mask (`sched_getaffinity`, `sched_setaffinity`), the CPU it last ran
//! on, when it started and its CPU time (`/proc/TID/task/TID/{stat,
//! schedstat}`).

use crate::error::{Error, Result};

/// The CPUs thread `tid` may run on (0: the calling thread).
pub fn get(tid: i32) -> Result<Vec<usize>> {
    // SAFETY: cpu_set_t is a plain bit array; all zeros is a valid (empty) set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a live cpu_set_t and the size passed is its size.
    let rc = unsafe { libc::sched_getaffinity(tid, std::mem::size_of_val(&set), &mut set) };
    if rc != 0 {
        return Err(io_error(format!("sched_getaffinity of thread {tid}")));
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: `c` is below CPU_SETSIZE, the set's capacity.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// Let thread `tid` (0: the calling thread) run only on `cpus`.
pub fn set(tid: i32, cpus: &[usize]) -> Result<()> {
    // SAFETY: as in `get`: all zeros is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        if c >= libc::CPU_SETSIZE as usize {
            return Err(Error::InvalidArgument(format!(
                "CPU {c} is past the {} a CPU set holds",
                libc::CPU_SETSIZE
            )));
        }
        // SAFETY: `c` was checked to be below CPU_SETSIZE just above.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: `set` is a live, initialised cpu_set_t of the size passed.
    let rc = unsafe { libc::sched_setaffinity(tid, std::mem::size_of_val(&set), &set) };
    if rc != 0 {
        return Err(io_error(format!(
            "sched_setaffinity of thread {tid} to {cpus:?}"
        )));
    }
    Ok(())
}

fn io_error(context: String) -> Error {
    Error::Io {
        context,
        cause: std::io::Error::last_os_error(),
    }
}

/// The `/proc` file `name` of thread `tid`, of this process or another:
/// `/proc/TID/task/TID` names a thread whatever its process.
fn read_task(tid: i32, name: &str) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{tid}/task/{tid}/{name}")).ok()
}

/// Nanoseconds thread `tid` has run (first field of its `schedstat`), or
/// None if it is gone.
pub fn cpu_ns(tid: i32) -> Option<u64> {
    read_task(tid, "schedstat")?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// When thread `tid` started (field 22 of its `stat`, clock ticks after
/// boot), or None if it is gone: a thread id reused later gets another.
pub fn start_time(tid: i32) -> Option<u64> {
    stat_field(&read_task(tid, "stat")?, 22)
}

/// When thread `tid` started and the CPU it last ran on, from one read of
/// its `stat`; None if it is gone.
pub fn start_and_cpu(tid: i32) -> Option<(u64, usize)> {
    let stat = read_task(tid, "stat")?;
    Some((stat_field(&stat, 22)?, stat_field(&stat, 39)?))
}

/// Field `n` (from 3) of a `stat` line; the command name (field 2) may
/// hold spaces and parentheses, so counting starts after its last `)`.
fn stat_field<T: std::str::FromStr>(stat: &str, n: usize) -> Option<T> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(n.checked_sub(3)?)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mask_of_a_thread_can_be_narrowed_and_restored() {
        crate::test_support::within(std::time::Duration::from_secs(20), "affinity", || {
            let tid = crate::placement::account::gettid();
            let all = get(0).unwrap();
            assert!(!all.is_empty());
            assert_eq!(get(tid).unwrap(), all);
            set(tid, &all[..1]).unwrap();
            assert_eq!(get(0).unwrap(), &all[..1]);
            assert_eq!(start_and_cpu(tid).map(|s| s.1), Some(all[0]));
            set(0, &all).unwrap();
            assert_eq!(get(0).unwrap(), all);
            assert!(set(0, &[1 << 20]).is_err());
            assert!(set(0, &[]).is_err(), "an empty mask is refused");
            assert!(get(-5).is_err());
            assert!(cpu_ns(tid).is_some());
            assert_eq!(cpu_ns(-1), None);
            // Another thread's start time is its own, and stays put.
            let other = std::thread::spawn(|| {
                let tid = crate::placement::account::gettid();
                (tid, start_time(tid))
            });
            let me = start_time(tid);
            assert!(me.is_some() && me == start_time(tid));
            let (other, at) = other.join().unwrap();
            assert!(at.is_some());
            assert_ne!(other, tid);
            assert_eq!(start_time(-1), None);
        });
    }

    #[test]
    fn stat_lines_with_odd_names_parse() {
        let fields: Vec<String> = (3..=52).map(|i| i.to_string()).collect();
        let line = format!("123 (a) b (c) {}", fields.join(" "));
        assert_eq!(stat_field(&line, 39), Some(39u64));
        assert_eq!(stat_field(&line, 22), Some(22u64));
        assert_eq!(stat_field::<u64>("123 (x) 1 2", 39), None);
        assert_eq!(stat_field::<u64>("garbage", 39), None);
        assert_eq!(stat_field::<u64>(&line, 2), None);
    }
}
