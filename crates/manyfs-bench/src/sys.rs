//! Thread pinning, page-aligned buffers and other thin OS helpers.

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// The machine's CPU time so far, from the first line of `/proc/stat`
/// (in clock ticks, all CPUs together).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuTimes {
    /// Time the hypervisor ran something else while a virtual CPU wanted
    /// to run (`steal`).
    pub steal: u64,
    /// Every state together (user, nice, system, idle, iowait, irq,
    /// softirq, steal).
    pub total: u64,
}

impl CpuTimes {
    /// Now, where `/proc/stat` is readable.
    pub fn now() -> Option<CpuTimes> {
        CpuTimes::parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    /// The `cpu` line of a `/proc/stat` text.
    pub fn parse(stat: &str) -> Option<CpuTimes> {
        let line = stat.lines().find(|l| l.starts_with("cpu "))?;
        let v: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .take(8)
            .map(|x| x.parse().ok())
            .collect::<Option<_>>()?;
        (v.len() == 8).then(|| CpuTimes {
            steal: v[7],
            total: v.iter().sum(),
        })
    }

    /// The share of the CPU time between `self` and `later` that the host
    /// stole (0 to 1); `None` when no time passed.
    pub fn steal_since(&self, later: &CpuTimes) -> Option<f64> {
        let total = later.total.checked_sub(self.total).filter(|&t| t > 0)?;
        Some(later.steal.saturating_sub(self.steal) as f64 / total as f64)
    }
}

/// The CPUs this process may run on, in ascending order (at least one).
pub fn allowed_cpus() -> Vec<usize> {
    let mut cpus = manyfs::diag::affinity::get(0).unwrap_or_default();
    if cpus.is_empty() {
        cpus = (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect();
    }
    cpus
}

/// A start line for many threads that does not convoy: `std::sync::Barrier`
/// hands its mutex from one woken thread to the next, and with 64 CPU-bound
/// threads on 2 cores each handoff can wait a whole scheduling round, so the
/// last threads would start seconds late. Here each thread announces itself
/// with an atomic increment and polls an atomic flag with short sleeps.
#[derive(Default)]
pub struct Gate {
    arrived: std::sync::atomic::AtomicUsize,
    open: std::sync::atomic::AtomicBool,
}

impl Gate {
    /// A closed gate.
    pub fn new() -> Self {
        Self::default()
    }

    /// Called by each worker: count in, then wait until the gate opens.
    pub fn arrive_and_wait(&self) {
        use std::sync::atomic::Ordering;
        self.arrived.fetch_add(1, Ordering::AcqRel);
        while !self.open.load(Ordering::Acquire) {
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
    }

    /// Called by the coordinator: wait until `n` workers arrived, then open.
    pub fn open_when(&self, n: usize) {
        use std::sync::atomic::Ordering;
        while self.arrived.load(Ordering::Acquire) < n {
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
        self.open.store(true, Ordering::Release);
    }
}

/// Set by the SIGINT/SIGTERM handlers of [`install_interrupt_handler`].
static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Make SIGINT and SIGTERM stop the benchmark at the end of the current
/// point (so tmpfs mounts and pool files are cleaned up) instead of killing
/// the process. A second signal kills as usual.
pub fn install_interrupt_handler() {
    use signal_hook::consts::{SIGINT, SIGTERM};
    for sig in [SIGINT, SIGTERM] {
        // The order matters: the default action (kill) is registered first
        // and only runs once the flag is already set, i.e. on the second
        // signal; the first one just sets the flag.
        let _ = signal_hook::flag::register_conditional_default(sig, &INTERRUPTED);
        let _ = signal_hook::flag::register(sig, &INTERRUPTED);
    }
}

/// True once SIGINT/SIGTERM arrived after [`install_interrupt_handler`].
pub fn interrupted() -> bool {
    INTERRUPTED.load(std::sync::atomic::Ordering::Relaxed)
}

/// CPU time the calling thread has used, in nanoseconds (0 where the
/// clock cannot be read).
pub fn thread_cpu_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only the timespec it is given.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) } != 0 {
        return 0;
    }
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Pin the calling thread to `cpu`. Returns false when the kernel refused.
pub fn pin_current_thread(cpu: usize) -> bool {
    manyfs::diag::affinity::set(0, &[cpu]).is_ok()
}

/// A zero-initialised heap buffer aligned to 4096 bytes (FxMark issues its
/// I/O through a page-aligned buffer).
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: AlignedBuf owns its allocation exclusively, like Vec<u8>.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only hands out &[u8], like Vec<u8>.
unsafe impl Sync for AlignedBuf {}

/// Page alignment of [`AlignedBuf`].
pub const PAGE: usize = 4096;

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes (rounded up to at least one page).
    pub fn new(len: usize) -> Self {
        let cap = len.max(1).next_multiple_of(PAGE);
        let layout = Layout::from_size_align(cap, PAGE).expect("valid layout");
        // SAFETY: layout has non-zero size.
        let raw = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedBuf { ptr, len }
    }

    fn layout(&self) -> Layout {
        Layout::from_size_align(self.len.max(1).next_multiple_of(PAGE), PAGE).expect("valid layout")
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr points to an initialised (zeroed) allocation of at least
        // len bytes that lives as long as self.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in deref, and &mut self guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: ptr was allocated with exactly this layout in new().
        unsafe { dealloc(self.ptr.as_ptr(), self.layout()) }
    }
}

/// Parse a duration such as `2s`, `500ms`, `1.5s`, `100us` or `1m` (the
/// grammar of [`humantime::parse_duration`]).
pub fn parse_duration(s: &str) -> crate::Result<std::time::Duration> {
    humantime::parse_duration(s.trim()).map_err(|e| {
        crate::BenchError::InvalidArgument(format!("duration {s:?}: {e} (use e.g. 2s, 500ms)"))
    })
}

/// The one size grammar of the `manyfs` tools: a number with an optional
/// binary multiple, `K`, `M`, `G`, `T`, `P`, `E` (powers of 1024, any case,
/// with or without `B`/`iB`), e.g. `4096`, `64k`, `512M`, `1G`, `1GiB`.
/// `manyfs-fuse` parses `-o segment=` with the same configuration.
pub const SIZE_GRAMMAR: parse_size::Config = parse_size::Config::new().with_binary();

/// Parse a size such as `4096`, `64K`, `512M`, `1G`, `1GiB` (see
/// [`SIZE_GRAMMAR`]).
pub fn parse_size(s: &str) -> crate::Result<u64> {
    SIZE_GRAMMAR.parse_size(s.trim()).map_err(|e| {
        crate::BenchError::InvalidArgument(format!(
            "size {s:?}: {e} (use e.g. 4096, 64K, 512M, 1GiB)"
        ))
    })
}

/// The 1-minute load average of the machine (`/proc/loadavg`), if it can
/// be read: printed beside results that other work on the machine skews.
pub fn load_average() -> Option<f64> {
    parse_loadavg(&std::fs::read_to_string("/proc/loadavg").ok()?)
}

/// The first field of a `/proc/loadavg` line.
fn parse_loadavg(s: &str) -> Option<f64> {
    s.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn cpu_times_read_steal_from_the_cpu_line() {
        let stat = "cpu  100 5 50 800 10 1 2 30 0 0\ncpu0 50 2 25 400 5 0 1 15 0 0\n";
        let a = CpuTimes::parse(stat).unwrap();
        assert_eq!(
            a,
            CpuTimes {
                steal: 30,
                total: 998
            }
        );
        let b = CpuTimes::parse("cpu  150 5 60 900 10 1 2 130 0 0\n").unwrap();
        let share = a.steal_since(&b).unwrap();
        assert!((share - 100.0 / 260.0).abs() < 1e-9, "{share}");
        assert_eq!(a.steal_since(&a), None);
        assert_eq!(CpuTimes::parse("intr 5\n"), None);
        assert_eq!(CpuTimes::parse("cpu  1 2 3\n"), None);
        assert!(CpuTimes::now().is_some(), "/proc/stat on Linux");
    }

    use super::*;

    #[test]
    fn load_average_is_the_first_field() {
        assert_eq!(parse_loadavg("1.06 2.68 3.11 2/301 10412\n"), Some(1.06));
        assert_eq!(parse_loadavg(""), None);
        assert_eq!(parse_loadavg("x 1 2"), None);
        assert!(load_average().is_none_or(|l| l >= 0.0));
    }

    #[test]
    fn aligned() {
        let mut b = AlignedBuf::new(4096);
        assert_eq!(b.as_ptr() as usize % PAGE, 0);
        b[4095] = 7;
        assert_eq!(b.len(), 4096);
    }

    #[test]
    fn durations() {
        for (s, ms) in [
            ("2s", 2000),
            ("500ms", 500),
            ("1.5s", 1500),
            ("1m", 60_000),
            ("1min", 60_000),
            (" 200ms ", 200),
        ] {
            assert_eq!(parse_duration(s).unwrap().as_millis(), ms, "{s}");
        }
        assert_eq!(parse_duration("100us").unwrap().as_micros(), 100);
        for bad in ["x", "", "2", "5parsecs", "-1s"] {
            let err = parse_duration(bad).unwrap_err().to_string();
            assert!(
                err.contains("duration") && err.contains("e.g. 2s"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn sizes() {
        for (s, v) in [
            ("4096", 4096u64),
            ("0", 0),
            ("64k", 64 << 10),
            ("64K", 64 << 10),
            ("64KB", 64 << 10),
            ("8M", 8 << 20),
            ("512M", 512 << 20),
            ("2MiB", 2 << 20),
            ("1G", 1 << 30),
            ("1g", 1 << 30),
            ("1GB", 1 << 30),
            ("1GiB", 1 << 30),
            ("1 GiB", 1 << 30),
            ("2T", 2 << 40),
            ("100B", 100),
            (" 16K ", 16 << 10),
        ] {
            assert_eq!(parse_size(s).unwrap(), v, "{s}");
        }
        for bad in ["", "x", "k", "12Q", "1.2.3G", "99999999999T", "-1M"] {
            let err = parse_size(bad).unwrap_err().to_string();
            assert!(
                err.contains("size") && err.contains("e.g. 4096"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn cpus() {
        let c = allowed_cpus();
        assert!(!c.is_empty());
        assert!(pin_current_thread(c[0]));
    }
}
