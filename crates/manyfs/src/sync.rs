//! The one place the library takes its atomics and locks from.
//!
//! Under the `shuttle` feature the lock-word protocol, the CAS-installed radix
//! nodes and the log append are compiled against shuttle's implementations so
//! the model checker can explore their interleavings with the real code.

#[cfg(not(feature = "shuttle"))]
pub use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};
#[cfg(not(feature = "shuttle"))]
pub use std::sync::{Mutex, MutexGuard};

#[cfg(feature = "shuttle")]
pub use shuttle::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};
#[cfg(feature = "shuttle")]
pub use shuttle::sync::{Mutex, MutexGuard};

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

    /// Pause between spins.
    pub fn spin_hint() {
        #[cfg(feature = "shuttle")]
        shuttle::thread::yield_now();
        #[cfg(not(feature = "shuttle"))]
        std::hint::spin_loop();
    }
}
