//! Which CPU the calling thread runs on, for picking per-CPU structures.
//!
//! User space cannot turn preemption off, so the answer may be stale by the
//! time it is used: every per-CPU structure is still protected by its own
//! (normally uncontended) lock, and guards remember which slot they used.

/// Number of CPUs this process may run on (at least 1), read once: the
/// standard library reads the affinity mask and cgroup quota files on every
/// call, which cost a create its per-file structures several system calls.
pub fn count() -> usize {
    static COUNT: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *COUNT.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The CPU the calling thread is running on now (0 if unknown).
pub fn current() -> usize {
    #[cfg(not(feature = "shuttle"))]
    {
        // SAFETY: sched_getcpu has no preconditions.
        let c = unsafe { libc::sched_getcpu() };
        if c >= 0 { c as usize } else { 0 }
    }
    #[cfg(feature = "shuttle")]
    {
        0
    }
}
