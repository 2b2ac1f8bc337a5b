//! Event counters kept per thread, and the CPU the calling thread runs on.
//!
//! [`current`] lives in manyfs-sync (the range locks use it too); the
//! answer may be stale by the time it is used.

pub use manyfs_sync::cpu::{current, current_below};

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// The most counters one [`Counters`] holds.
const MAX: usize = 8;

/// One thread's values of one [`Counters`]: stored by that thread only
/// (a load and a store, no read-modify-write), loaded by readers.
#[derive(Debug, Default)]
struct Slot([AtomicU64; MAX]);

/// Every thread's slot of one [`Counters`], and what threads that exited
/// had counted.
#[derive(Debug, Default)]
struct Registry {
    slots: Vec<Arc<Slot>>,
    retired: [u64; MAX],
}

/// A thread's slots: `(registry, slot)` per [`Counters`] it has counted
/// in, found by the registry's address.
struct Local(Vec<(Weak<Mutex<Registry>>, Arc<Slot>)>);

impl Drop for Local {
    /// A thread that exits folds its counts into each registry that still
    /// lives and leaves it, so registries do not grow with every thread
    /// that ever counted.
    fn drop(&mut self) {
        forget_last();
        for (reg, slot) in self.0.drain(..) {
            if let Some(reg) = reg.upgrade() {
                let mut r = reg.lock().unwrap_or_else(|p| p.into_inner());
                for (t, v) in r.retired.iter_mut().zip(slot.0.iter()) {
                    *t += v.load(Ordering::Relaxed);
                }
                r.slots.retain(|s| !Arc::ptr_eq(s, &slot));
            }
        }
    }
}

thread_local! {
    static LOCAL: RefCell<Local> = const { RefCell::new(Local(Vec::new())) };
    /// The registry and slot of the thread's last add (null when none):
    /// a slot `LOCAL` holds, found again without searching `LOCAL`. Cleared
    /// before `LOCAL` lets go of any slot (a `Cell` of pointers has no
    /// destructor, so it stays usable while `LOCAL`'s runs).
    static LAST: Cell<(*const Mutex<Registry>, *const Slot)> =
        const { Cell::new((std::ptr::null(), std::ptr::null())) };
}

/// Forget the cached last slot (before `LOCAL` drops slots).
fn forget_last() {
    LAST.with(|l| l.set((std::ptr::null(), std::ptr::null())));
}

/// `N` event counters (at most 8) kept per thread: a thread adds to its
/// own slot with plain loads and stores, so counting on the I/O path
/// costs no atomic read-modify-write and never makes two threads share a
/// line; readers sum every slot (and what exited threads counted).
#[derive(Debug)]
pub(crate) struct Counters<const N: usize> {
    registry: Arc<Mutex<Registry>>,
    /// Adds made where the thread's slots are gone (a thread-local
    /// destructor counting while its thread exits).
    overflow: [AtomicU64; N],
}

impl<const N: usize> Counters<N> {
    /// Zeroed counters.
    pub(crate) fn new() -> Counters<N> {
        const { assert!(N <= MAX, "at most MAX counters") };
        Counters {
            registry: Arc::default(),
            overflow: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// Add `values[i]` to counter `i` in the calling thread's slot.
    #[inline]
    pub(crate) fn add(&self, values: [u64; N]) {
        let me = Arc::as_ptr(&self.registry);
        let (last_registry, last_slot) = LAST.with(Cell::get);
        if std::ptr::eq(last_registry, me) {
            // SAFETY: `LAST` names a slot that this thread's `LOCAL` holds
            // (an `Arc`) for this registry: set below from `LOCAL`, and
            // cleared before `LOCAL` drops a slot (`register`, its
            // destructor). While `LOCAL` holds the registry's `Weak`, its
            // address names no other registry.
            let slot = unsafe { &*last_slot };
            Self::add_to(slot, values);
            return;
        }
        self.add_searched(values);
    }

    /// Add `values` to `slot`, the calling thread's own.
    #[inline]
    fn add_to(slot: &Slot, values: [u64; N]) {
        for (c, v) in slot.0.iter().zip(values) {
            if v != 0 {
                // Only this thread stores to its slot.
                c.store(c.load(Ordering::Relaxed) + v, Ordering::Relaxed);
            }
        }
    }

    /// [`Counters::add`] through the thread's list of slots (registering
    /// one if needed), remembering the slot in `LAST`.
    fn add_searched(&self, values: [u64; N]) {
        let added = LOCAL.try_with(|local| {
            let mut local = local.borrow_mut();
            let me = Arc::as_ptr(&self.registry);
            let i = match local
                .0
                .iter()
                .position(|(r, _)| std::ptr::eq(r.as_ptr(), me))
            {
                Some(i) => i,
                None => self.register(&mut local),
            };
            let slot = &local.0[i].1;
            Self::add_to(slot, values);
            LAST.with(|l| l.set((me, Arc::as_ptr(slot))));
        });
        if added.is_err() {
            for (c, v) in self.overflow.iter().zip(values) {
                if v != 0 {
                    c.fetch_add(v, Ordering::Relaxed);
                }
            }
        }
    }

    /// A new slot for the calling thread, listed in the registry and in
    /// the thread's slots; returns its index there. Forgets the thread's
    /// slots of registries that are gone. (A registry's address is not
    /// reused while a thread holds a weak reference to it, so the address
    /// names one registry.)
    #[cold]
    fn register(&self, local: &mut Local) -> usize {
        forget_last();
        local.0.retain(|(r, _)| r.strong_count() > 0);
        let slot = Arc::new(Slot::default());
        (self.registry.lock().unwrap_or_else(|p| p.into_inner()))
            .slots
            .push(slot.clone());
        local.0.push((Arc::downgrade(&self.registry), slot));
        local.0.len() - 1
    }

    /// Every counter, summed over the threads.
    pub(crate) fn sum(&self) -> [u64; N] {
        let r = self.registry.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: [u64; N] =
            std::array::from_fn(|i| r.retired[i] + self.overflow[i].load(Ordering::Relaxed));
        for slot in &r.slots {
            for (o, c) in out.iter_mut().zip(slot.0.iter()) {
                *o += c.load(Ordering::Relaxed);
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
        let c = Arc::new(Counters::<2>::new());
        // Joined one by one, not in a scope: a scope ends when the threads'
        // closures return, before their thread-local destructors (which
        // fold the counts and leave the registry) have run.
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let c = c.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        c.add([1, 3]);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(c.sum(), [4000, 12000]);
        // The four threads exited: their counts were folded, their slots
        // left the registry.
        assert!(c.registry.lock().unwrap().slots.is_empty());
        c.add([1, 0]);
        assert_eq!(c.sum(), [4001, 12000]);
    }

    #[test]
    fn adds_in_a_row_and_alternating_between_sets_all_count() {
        let (a, b) = (Counters::<2>::new(), Counters::<2>::new());
        // In a row: the second and later find the slot remembered by the
        // first (the unsafe path); alternating: each is searched again.
        for _ in 0..3 {
            a.add([1, 0]);
        }
        for i in 0..10 {
            b.add([0, 1]);
            a.add([i, 2]);
        }
        assert_eq!(a.sum(), [3 + 45, 20]);
        assert_eq!(b.sum(), [0, 10]);
        // A set dropped right after this thread's last add, then a new one:
        // its adds start from zero, none reach the dropped set's slot.
        let gone = Counters::<1>::new();
        gone.add([9]);
        drop(gone);
        let fresh = Counters::<1>::new();
        fresh.add([1]);
        fresh.add([1]);
        assert_eq!(fresh.sum(), [2]);
    }

    #[test]
    fn counters_of_two_sets_and_of_a_dropped_set_stay_apart() {
        let a = Counters::<1>::new();
        a.add([5]);
        {
            let gone = Counters::<1>::new();
            gone.add([7]);
            assert_eq!(gone.sum(), [7]);
        }
        // A set made after one was dropped (perhaps at its address)
        // starts at zero.
        let b = Counters::<1>::new();
        b.add([2]);
        a.add([1]);
        assert_eq!((a.sum(), b.sum()), ([6], [2]));
    }

    #[test]
    fn a_set_dropped_before_its_threads_exit_is_not_kept_alive() {
        let c = Counters::<1>::new();
        let weak = Arc::downgrade(&c.registry);
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (c_tx, c_rx) = std::sync::mpsc::channel::<Counters<1>>();
        let t = std::thread::spawn(move || {
            let c = c_rx.recv().unwrap();
            c.add([3]);
            assert_eq!(c.sum(), [3]);
            drop(c);
            rx.recv().unwrap();
        });
        c_tx.send(c).unwrap();
        // The counting thread still runs, holding only a weak reference.
        while weak.strong_count() > 0 {
            std::thread::yield_now();
        }
        tx.send(()).unwrap();
        t.join().unwrap();
    }
}
