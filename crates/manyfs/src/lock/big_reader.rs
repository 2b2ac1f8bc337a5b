//! A reader-biased lock with one reader counter per CPU, each on its own
//! cache line. Every read and write of a file takes it shared (touching only
//! the caller's CPU line); truncate takes it exclusive. This gives truncate a
//! range that covers the whole file, including past end of file, without a
//! shared counter on the I/O path.

use crate::sync::wait::{SPINS_BEFORE_PARK, park_while, spin_hint, unpark_all};
use crate::sync::{AtomicU32, Ordering};
use crossbeam_utils::CachePadded;

/// Per-CPU reader counts plus a writer flag.
pub struct BigReaderLock {
    readers: Box<[CachePadded<AtomicU32>]>,
    writer: CachePadded<AtomicU32>,
    writer_mutex: parking_lot::Mutex<()>,
}

/// A shared hold on a [`BigReaderLock`]; releases on drop.
pub struct BigReaderGuard<'a> {
    lock: &'a BigReaderLock,
    slot: usize,
}

impl BigReaderLock {
    /// A lock with `slots` reader counters (normally the CPU count).
    pub fn new(slots: usize) -> Self {
        BigReaderLock {
            readers: (0..slots.max(1))
                .map(|_| CachePadded::new(AtomicU32::new(0)))
                .collect(),
            writer: CachePadded::new(AtomicU32::new(0)),
            writer_mutex: parking_lot::Mutex::new(()),
        }
    }

    /// Take it shared.
    pub fn read(&self) -> BigReaderGuard<'_> {
        let slot = crate::cpu::current() % self.readers.len();
        let counter = &self.readers[slot];
        let mut spins = 0;
        loop {
            counter.fetch_add(1, Ordering::SeqCst);
            if self.writer.load(Ordering::SeqCst) == 0 {
                return BigReaderGuard { lock: self, slot };
            }
            // A writer is active or draining: step back and wait for it.
            if counter.fetch_sub(1, Ordering::SeqCst) == 1 {
                unpark_all(counter);
            }
            while self.writer.load(Ordering::SeqCst) != 0 {
                if spins < SPINS_BEFORE_PARK {
                    spins += 1;
                    spin_hint();
                } else {
                    park_while(&self.writer, |w| w != 0);
                }
            }
        }
    }

    /// Take it exclusive: waits for every reader on every CPU to leave.
    ///
    /// The hold ends when the returned guard is dropped, including when the
    /// holder unwinds from a panic: the writer flag is cleared and parked
    /// readers are woken, so a failed truncate cannot wedge the file.
    pub fn write(&self) -> BigWriterGuard<'_> {
        let mutex = self.writer_mutex.lock();
        self.writer.store(1, Ordering::SeqCst);
        // From here on the guard owns the flag: if anything below unwinds,
        // its drop clears the flag again.
        let guard = BigWriterGuard {
            lock: self,
            _mutex: mutex,
        };
        for counter in self.readers.iter() {
            let mut spins = 0;
            while counter.load(Ordering::SeqCst) != 0 {
                if spins < SPINS_BEFORE_PARK {
                    spins += 1;
                    spin_hint();
                } else {
                    park_while(counter, |c| c != 0);
                }
            }
        }
        guard
    }
}

/// An exclusive hold on a [`BigReaderLock`]; releases on drop (also when
/// the holder panics).
pub struct BigWriterGuard<'a> {
    lock: &'a BigReaderLock,
    // Dropped after `drop` below has cleared the flag, so the next writer
    // cannot set the flag before this one has cleared it.
    _mutex: parking_lot::MutexGuard<'a, ()>,
}

impl Drop for BigWriterGuard<'_> {
    fn drop(&mut self) {
        self.lock.writer.store(0, Ordering::SeqCst);
        unpark_all(&self.lock.writer);
    }
}

impl Drop for BigReaderGuard<'_> {
    fn drop(&mut self) {
        let counter = &self.lock.readers[self.slot];
        if counter.fetch_sub(1, Ordering::SeqCst) == 1
            && self.lock.writer.load(Ordering::SeqCst) != 0
        {
            unpark_all(counter);
        }
    }
}
