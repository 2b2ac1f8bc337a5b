//! Which CPU the calling thread runs on, for picking per-CPU structures.
//!
//! User space cannot turn preemption off, so the answer may be stale by the
//! time it is used: every per-CPU structure is still protected by its own
//! (normally uncontended) lock, and guards remember which slot they used.

/// Number of CPUs configured on this machine (at least 1), asked once per
/// process: the answer reads cgroup files, and every file inode sizes its
/// per-CPU truncate lock by it.
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
