//! The one place manyfs and its lock and index crates take their atomics,
//! locks and parking from.
//!
//! Under the `shuttle` feature every primitive here is compiled against
//! [shuttle](https://docs.rs/shuttle)'s implementation, so that the code
//! built on them (the segment lock word, the CAS-installed radix nodes, the
//! log append) runs unchanged under the model checker, which explores its
//! interleavings.
//!
//! ```
//! use manyfs_sync::wait::{park_while, unpark_all};
//! use manyfs_sync::{AtomicU32, Ordering};
//!
//! let flag = AtomicU32::new(0);
//! std::thread::scope(|s| {
//!     s.spawn(|| {
//!         flag.store(1, Ordering::Release);
//!         unpark_all(&flag);
//!     });
//!     // Sleeps only while the flag is still 0: a store and wake-up
//!     // between the check and the park is not lost.
//!     while flag.load(Ordering::Acquire) == 0 {
//!         park_while(&flag, |v| v == 0);
//!     }
//! });
//! ```
//!
//! # Concurrency guarantees
//!
//! - The atomics and [`Mutex`] are std's (shuttle's under the feature).
//! - [`futex::RwLock`] and [`node::RwLock`]/[`node::Mutex`] never poison:
//!   a holder that panics still releases on unwind, and the next `read`,
//!   `write` or `lock` gets the guard.
//! - [`node::downgrade`] turns a write guard into a read guard without
//!   letting a writer in between (parking_lot's atomic downgrade); under
//!   the model checker it releases and re-takes (shuttle has no downgrade).
//! - [`wait::park_while`] re-checks its condition under the parking lot's
//!   bucket lock, so an [`wait::unpark_all`] after the waiter's last check
//!   always wakes it; it may also return spuriously, so callers loop.
//! - [`cpu::current`] is a hint (the thread may move right after): callers
//!   use it to pick a per-CPU slot, never for exclusion.
//! - [`worker_gate`] decides when the FUSE serving threads (the vendored
//!   fuser's `workers.rs`) read, park, wake one another, are made or
//!   retire; it is built on the primitives above, so its protocol is
//!   model-checked too.
//!
//! # Model checking
//!
//! With `--features shuttle`, the types above are shuttle's and must be
//! used inside a shuttle test (`shuttle::check_random` and friends);
//! parking becomes a yield, so shuttle decides who runs next, and
//! [`cpu::current`] is always 0. The models of the crates built on this one
//! run with `cargo test -p manyfs-sync -p manyfs-rangelock -p manyfs-index
//! --features shuttle --lib shuttle_models` (this crate's own model is the
//! worker gate's); `testing::explore` (under the feature) is
//! the driver they share.

#![deny(missing_docs)]

pub mod cpu;
pub mod testing;
pub mod worker_gate;

#[cfg(all(test, feature = "shuttle"))]
mod shuttle_models;

#[cfg(not(feature = "shuttle"))]
pub use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(feature = "shuttle"))]
pub use std::sync::{Mutex, MutexGuard};

#[cfg(feature = "shuttle")]
pub use shuttle::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};
#[cfg(feature = "shuttle")]
pub use shuttle::sync::{Mutex, MutexGuard};

/// Threads' handles and parking: std's, shuttle's under the model checker
/// (where a timed park never times out: shuttle does not model time).
pub mod thread {
    #[cfg(not(feature = "shuttle"))]
    pub use std::thread::{Thread, current, park, park_timeout};

    #[cfg(feature = "shuttle")]
    pub use shuttle::thread::{Thread, current, park, park_timeout};
}

/// A reader-writer lock of `$lib` with parking_lot's interface: `read` and
/// `write` hand out the guard even if a holder panicked (a panic in a
/// request is handled above the lock; the guard still releases on unwind).
macro_rules! poison_free_rwlock {
    ($($lib:ident)::+, $whose:literal) => {
        #[doc = concat!($whose, " reader-writer lock with parking_lot's interface.")]
        #[derive(Debug, Default)]
        pub struct RwLock<T>($($lib)::+::RwLock<T>);
        /// Read guard of [`RwLock`].
        pub type RwLockReadGuard<'a, T> = $($lib)::+::RwLockReadGuard<'a, T>;
        /// Write guard of [`RwLock`].
        pub type RwLockWriteGuard<'a, T> = $($lib)::+::RwLockWriteGuard<'a, T>;

        impl<T> RwLock<T> {
            /// A new lock holding `v`.
            pub fn new(v: T) -> Self {
                RwLock($($lib)::+::RwLock::new(v))
            }
            /// Shared access (a panicked holder does not poison it).
            pub fn read(&self) -> RwLockReadGuard<'_, T> {
                self.0.read().unwrap_or_else(std::sync::PoisonError::into_inner)
            }
            /// Exclusive access.
            pub fn write(&self) -> RwLockWriteGuard<'_, T> {
                self.0.write().unwrap_or_else(std::sync::PoisonError::into_inner)
            }
        }
    };
}

/// std's reader-writer lock (a futex: it waits in the kernel after a short
/// spin, where parking_lot's yields the CPU first) with parking_lot's
/// interface: manyfs's directory shards' locks. With 64 threads renaming on
/// 2 cores, parking_lot's `sched_yield`s while a preempted holder kept its
/// shard cost a third of the renames (manyfs's docs/benchmarks.md).
pub mod futex {
    poison_free_rwlock!(std::sync, "std's");
}

/// Per-node locks of the locked index trees (manyfs-index's `rw` and
/// `cascade` trees): parking_lot's (no poisoning, an atomic
/// write-to-read downgrade) normally, shuttle's under the model checker.
pub mod node {
    #[cfg(not(feature = "shuttle"))]
    pub use parking_lot::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

    /// Turn a write guard of `lock` into a read guard. parking_lot does it
    /// atomically (no writer can get in between); under the model checker,
    /// whose lock has no downgrade, it releases and re-takes the read lock,
    /// which is what nCACHE's Algorithm 1 does (lines 16-17).
    #[cfg(not(feature = "shuttle"))]
    pub fn downgrade<'a, T>(
        _lock: &'a RwLock<T>,
        guard: RwLockWriteGuard<'a, T>,
    ) -> RwLockReadGuard<'a, T> {
        RwLockWriteGuard::downgrade(guard)
    }

    #[cfg(feature = "shuttle")]
    pub use shuttle_locks::*;

    #[cfg(feature = "shuttle")]
    mod shuttle_locks {
        use std::sync::PoisonError;

        poison_free_rwlock!(shuttle::sync, "shuttle's");

        /// Release the write lock, then take the read lock (see the
        /// parking_lot version of this function).
        pub fn downgrade<'a, T>(
            lock: &'a RwLock<T>,
            guard: RwLockWriteGuard<'a, T>,
        ) -> RwLockReadGuard<'a, T> {
            drop(guard);
            lock.read()
        }

        /// shuttle's mutex with parking_lot's interface.
        #[derive(Debug, Default)]
        pub struct Mutex<T>(shuttle::sync::Mutex<T>);
        /// Guard of [`Mutex`].
        pub type MutexGuard<'a, T> = shuttle::sync::MutexGuard<'a, T>;

        impl<T> Mutex<T> {
            /// A new mutex holding `v`.
            pub fn new(v: T) -> Self {
                Mutex(shuttle::sync::Mutex::new(v))
            }
            /// Exclusive access (a panicked holder does not poison it).
            pub fn lock(&self) -> MutexGuard<'_, T> {
                self.0.lock().unwrap_or_else(PoisonError::into_inner)
            }
        }
    }
}

/// Spin-then-park waiting on a 32-bit word, keyed by its address.
pub mod wait {
    use super::{AtomicU32, Ordering};

    /// How many times a waiter re-checks before it parks. Short on purpose:
    /// with more threads than cores, spinning burns the holder's time slice.
    pub const SPINS_BEFORE_PARK: u32 = 64;

    /// Block until `word` may have changed from `seen` (or spuriously).
    /// `still_blocked` is re-checked under the parking lot's bucket lock, so a
    /// wake-up between the check and the park is never lost.
    #[cfg(not(feature = "shuttle"))]
    pub fn park_while(word: &AtomicU32, still_blocked: impl Fn(u32) -> bool) {
        let key = word as *const AtomicU32 as usize;
        // SAFETY: `park` requires that the validate and timed-out callbacks do
        // not panic or call into the parking lot; ours only load an atomic.
        unsafe {
            parking_lot_core::park(
                key,
                || still_blocked(word.load(Ordering::Acquire)),
                || {},
                |_, _| {},
                parking_lot_core::DEFAULT_PARK_TOKEN,
                None,
            );
        }
    }

    /// Wake every thread parked on `word`.
    #[cfg(not(feature = "shuttle"))]
    pub fn unpark_all(word: &AtomicU32) {
        let key = word as *const AtomicU32 as usize;
        // SAFETY: the key is only used as an address-derived identifier; no
        // callback is involved.
        unsafe {
            parking_lot_core::unpark_all(key, parking_lot_core::DEFAULT_UNPARK_TOKEN);
        }
    }

    /// Under the model checker, parking is a yield: shuttle explores who runs
    /// next, which is what the protocol's correctness depends on.
    #[cfg(feature = "shuttle")]
    pub fn park_while(word: &AtomicU32, still_blocked: impl Fn(u32) -> bool) {
        if still_blocked(word.load(Ordering::Acquire)) {
            shuttle::thread::yield_now();
        }
    }

    /// No-op under the model checker (waiters yield instead of parking).
    #[cfg(feature = "shuttle")]
    pub fn unpark_all(_word: &AtomicU32) {}

    /// Give the CPU to another runnable thread, if any.
    pub fn yield_cpu() {
        #[cfg(feature = "shuttle")]
        shuttle::thread::yield_now();
        #[cfg(not(feature = "shuttle"))]
        std::thread::yield_now();
    }

    /// Pause between spins.
    pub fn spin_hint() {
        #[cfg(feature = "shuttle")]
        shuttle::thread::yield_now();
        #[cfg(not(feature = "shuttle"))]
        std::hint::spin_loop();
    }
}

#[cfg(all(test, not(feature = "shuttle")))]
mod tests {
    use super::*;
    use std::time::Duration;

    const LIMIT: Duration = Duration::from_secs(60);

    #[test]
    fn rwlocks_are_not_poisoned_by_a_panicking_holder() {
        let futex = std::sync::Arc::new(futex::RwLock::new(1));
        let node = std::sync::Arc::new(node::RwLock::new(1));
        let mutex = std::sync::Arc::new(node::Mutex::new(1));
        let (f, n, m) = (futex.clone(), node.clone(), mutex.clone());
        let r = std::thread::spawn(move || {
            let _f = f.write();
            let _n = n.write();
            let _m = m.lock();
            panic!("injected panic while holding the locks");
        })
        .join();
        assert!(r.is_err());
        *futex.write() += 1;
        *node.write() += 1;
        *mutex.lock() += 1;
        assert_eq!((*futex.read(), *node.read(), *mutex.lock()), (2, 2, 2));
    }

    #[test]
    fn downgrade_keeps_the_value_and_lets_readers_in() {
        let lock = node::RwLock::new(0);
        let mut w = lock.write();
        *w = 5;
        let r = node::downgrade(&lock, w);
        assert_eq!(*r, 5);
        assert_eq!(*lock.read(), 5, "a second reader gets in");
    }

    #[test]
    fn parked_waiters_wake_on_unpark_all() {
        testing::within(LIMIT, "waiters parked on a word", || {
            let word = AtomicU32::new(0);
            std::thread::scope(|s| {
                for _ in 0..4 {
                    s.spawn(|| {
                        while word.load(Ordering::Acquire) == 0 {
                            wait::park_while(&word, |v| v == 0);
                        }
                    });
                }
                std::thread::sleep(Duration::from_millis(20));
                word.store(1, Ordering::Release);
                wait::unpark_all(&word);
            });
        });
    }

    #[test]
    fn park_while_returns_at_once_when_not_blocked() {
        let word = AtomicU32::new(3);
        wait::park_while(&word, |v| v == 0);
        wait::yield_cpu();
        wait::spin_hint();
    }
}
