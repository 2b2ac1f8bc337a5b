//! Per-CPU event counters, indexed by the CPU the calling thread runs on.
//!
//! [`current`] lives in manyfs-sync (the range locks use it too); the
//! answer may be stale by the time it is used, which a counter tolerates.

pub use manyfs_sync::cpu::current;

/// `N` event counters kept per CPU, each CPU's on its own cache line, so
/// that counting on the I/O path never makes two CPUs share a line. A
/// thread adds to the slot of the CPU it runs on (or ran on a moment ago:
/// the add is atomic, so a stale slot only costs a shared line once);
/// readers sum every slot.
#[derive(Debug)]
pub(crate) struct Counters<const N: usize> {
    slots: Box<[crossbeam_utils::CachePadded<[std::sync::atomic::AtomicU64; N]>]>,
}

impl<const N: usize> Counters<N> {
    /// Counters with one slot per possible CPU of this machine.
    pub(crate) fn new() -> Counters<N> {
        // SAFETY: sysconf has no preconditions.
        let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
        let cpus = usize::try_from(cpus).unwrap_or(1).max(1);
        Counters {
            slots: (0..cpus)
                .map(|_| {
                    crossbeam_utils::CachePadded::new(std::array::from_fn(|_| {
                        std::sync::atomic::AtomicU64::new(0)
                    }))
                })
                .collect(),
        }
    }

    /// Add `values[i]` to counter `i` in the calling CPU's slot.
    #[inline]
    pub(crate) fn add(&self, values: [u64; N]) {
        let slot = &self.slots[current() % self.slots.len()];
        for (c, v) in slot.iter().zip(values) {
            if v != 0 {
                c.fetch_add(v, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }

    /// Every counter, summed over the slots.
    pub(crate) fn sum(&self) -> [u64; N] {
        let mut out = [0u64; N];
        for slot in self.slots.iter() {
            for (o, c) in out.iter_mut().zip(slot.iter()) {
                *o += c.load(std::sync::atomic::Ordering::Relaxed);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_sum_every_threads_adds() {
        let c = Counters::<2>::new();
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        c.add([1, 3]);
                    }
                });
            }
        });
        assert_eq!(c.sum(), [4000, 12000]);
    }
}
