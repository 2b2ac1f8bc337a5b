//! Which CPU the calling thread runs on, for picking per-CPU structures.
//!
//! User space cannot turn preemption off, so the answer may be stale by the
//! time it is used: every per-CPU structure is still protected by its own
//! (normally uncontended) lock, and guards remember which slot they used.

/// The CPU the calling thread is running on now (0 if unknown, and always
/// 0 under the model checker).
#[inline]
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

/// [`current`] folded into `0..n` (`n > 0`): one slot per CPU of `n`
/// slots. Skips the division when the CPU is below `n`, as it is when
/// there is a slot per CPU (a division costs tens of cycles on the I/O
/// path).
#[inline]
pub fn current_below(n: usize) -> usize {
    let c = current();
    if c < n { c } else { c % n }
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

    #[test]
    fn current_below_folds_into_the_range() {
        for n in 1..=5 {
            assert!(super::current_below(n) < n);
        }
        let c = super::current();
        assert_eq!(super::current_below(c + 1), c);
    }
}
