//! The kernel's view of a thread: its CPU mask (`sched_getaffinity`,
//! `sched_setaffinity`), the CPU it last ran on and its CPU time
//! (`/proc/self/task/TID/{stat,schedstat}`).

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

/// Nanoseconds thread `tid` of this process has run (first field of its
/// `schedstat`), or None if it is gone.
pub fn cpu_ns(tid: i32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// The CPU thread `tid` of this process last ran on (field 39 of its
/// `stat`), or None if it is gone.
pub fn last_cpu(tid: i32) -> Option<usize> {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    parse_last_cpu(&s)
}

/// Field 39 of a `stat` line; the command name (field 2) may hold spaces
/// and parentheses, so counting starts after its last `)`.
fn parse_last_cpu(stat: &str) -> Option<usize> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(39 - 3)?.parse().ok()
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
            assert_eq!(last_cpu(tid), Some(all[0]));
            set(0, &all).unwrap();
            assert_eq!(get(0).unwrap(), all);
            assert!(set(0, &[1 << 20]).is_err());
            assert!(set(0, &[]).is_err(), "an empty mask is refused");
            assert!(get(-5).is_err());
            assert!(cpu_ns(tid).is_some());
            assert_eq!(cpu_ns(-1), None);
        });
    }

    #[test]
    fn stat_lines_with_odd_names_parse() {
        let fields: Vec<String> = (3..=52).map(|i| i.to_string()).collect();
        let line = format!("123 (a) b (c) {}", fields.join(" "));
        assert_eq!(parse_last_cpu(&line), Some(39));
        assert_eq!(parse_last_cpu("123 (x) 1 2"), None);
        assert_eq!(parse_last_cpu("garbage"), None);
    }
}
