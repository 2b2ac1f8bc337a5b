//! The segment lock word (SRL-NOVA (segment range lock)'s "slv"): one 32-bit word per segment.
//!
//! ```text
//! bit 31      writer holds the segment
//! bit 30      a writer is waiting (new readers stay out: writers cannot starve)
//! bit 29      some thread is parked on this word (release must wake it)
//! bits 0..29  number of readers holding the segment
//! ```
//! Acquire spins briefly and then parks on the word's address, so more
//! threads than cores do not burn the holder's time slice.

use manyfs_sync::wait::{SPINS_BEFORE_PARK, park_while, spin_hint, unpark_all};
use manyfs_sync::{AtomicU32, Ordering};

const WRITER: u32 = 1 << 31;
const WRITER_WAITING: u32 = 1 << 30;
const PARKED: u32 = 1 << 29;
const READERS: u32 = PARKED - 1;

/// One segment's reader-writer word.
#[derive(Debug, Default)]
pub struct SegmentWord {
    word: AtomicU32,
}

impl SegmentWord {
    /// A free word.
    pub const fn new() -> Self {
        SegmentWord {
            word: AtomicU32::new(0),
        }
    }

    /// The raw value (for tests and statistics).
    pub fn raw(&self) -> u32 {
        self.word.load(Ordering::Relaxed)
    }

    /// Take the segment shared.
    pub fn lock_read(&self) {
        let mut spins = 0;
        loop {
            let w = self.word.load(Ordering::Relaxed);
            if w & (WRITER | WRITER_WAITING) == 0 {
                debug_assert!(w & READERS < READERS, "reader count overflow");
                if self
                    .word
                    .compare_exchange_weak(w, w + 1, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    return;
                }
                continue;
            }
            if spins < SPINS_BEFORE_PARK {
                spins += 1;
                spin_hint();
                continue;
            }
            self.park_until(|w| w & (WRITER | WRITER_WAITING) != 0);
        }
    }

    /// Release a shared hold.
    pub fn unlock_read(&self) {
        let prev = self.word.fetch_sub(1, Ordering::Release);
        debug_assert!(prev & READERS > 0, "unlock_read without readers");
        // The last reader wakes anyone parked (a waiting writer).
        if prev & READERS == 1 && prev & PARKED != 0 {
            self.wake();
        }
    }

    /// Take the segment exclusive.
    pub fn lock_write(&self) {
        let mut spins = 0;
        loop {
            let w = self.word.load(Ordering::Relaxed);
            if w & (WRITER | READERS) == 0 {
                // Free: take it (clearing our own waiting mark; other waiting
                // writers set it again on their next round).
                if self
                    .word
                    .compare_exchange_weak(
                        w,
                        (w | WRITER) & !WRITER_WAITING,
                        Ordering::Acquire,
                        Ordering::Relaxed,
                    )
                    .is_ok()
                {
                    return;
                }
                continue;
            }
            if w & WRITER_WAITING == 0 {
                // Announce ourselves so new readers hold off.
                let _ = self.word.compare_exchange_weak(
                    w,
                    w | WRITER_WAITING,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
                continue;
            }
            if spins < SPINS_BEFORE_PARK {
                spins += 1;
                spin_hint();
                continue;
            }
            self.park_until(|w| w & (WRITER | READERS) != 0);
        }
    }

    /// Release an exclusive hold.
    pub fn unlock_write(&self) {
        let prev = self.word.fetch_and(!(WRITER | PARKED), Ordering::Release);
        debug_assert!(prev & WRITER != 0, "unlock_write without writer");
        if prev & PARKED != 0 {
            self.wake();
        }
    }

    /// Set the parked bit and sleep while `blocked` holds.
    fn park_until(&self, blocked: impl Fn(u32) -> bool) {
        let w = self.word.load(Ordering::Relaxed);
        if !blocked(w) {
            return;
        }
        if w & PARKED == 0
            && self
                .word
                .compare_exchange(w, w | PARKED, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        park_while(&self.word, |w| blocked(w) && w & PARKED != 0);
    }

    fn wake(&self) {
        // Clear PARKED: everyone woken re-registers if still blocked.
        self.word.fetch_and(!PARKED, Ordering::Relaxed);
        unpark_all(&self.word);
    }
}
