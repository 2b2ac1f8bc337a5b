//! Which CPU the calling thread runs on, for picking per-CPU structures.
//!
//! User space cannot turn preemption off, so the answer may be stale by the
//! time it is used: every per-CPU structure is still protected by its own
//! (normally uncontended) lock, and guards remember which slot they used.

/// The CPU the calling thread is running on now (0 if unknown, and always
/// 0 under the model checker).
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

#[cfg(all(test, not(feature = "shuttle")))]
mod tests {
    #[test]
    fn current_is_below_the_configured_cpu_count() {
        // SAFETY: sysconf has no preconditions.
        let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
        let cpus = usize::try_from(cpus).unwrap_or(1).max(1);
        assert!(super::current() < cpus);
    }
}
