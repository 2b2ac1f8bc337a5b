//! A reader-biased lock with one reader counter per CPU, each on its own
//! cache line. Every read and write of a file takes it shared (touching only
//! the caller's CPU line); truncate takes it exclusive. This gives truncate a
//! range that covers the whole file, including past end of file, without a
//! shared counter on the I/O path.

use crossbeam_utils::CachePadded;
use manyfs_sync::wait::{SPINS_BEFORE_PARK, park_while, spin_hint, unpark_all};
use manyfs_sync::{AtomicU32, Ordering};
use once_cell::race::OnceBox;

/// Per-CPU reader counts plus a writer flag, each on its own cache line,
/// allocated by the first `read` or `write`: a file not used since the
/// mount costs a pointer, not a cache line per CPU.
pub struct BigReaderLock {
    slots: usize,
    lines: OnceBox<Lines>,
    writer_mutex: parking_lot::Mutex<()>,
}

/// The lock's shared state.
struct Lines {
    readers: Box<[CachePadded<AtomicU32>]>,
    writer: CachePadded<AtomicU32>,
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
            slots: slots.max(1),
            lines: OnceBox::new(),
            writer_mutex: parking_lot::Mutex::new(()),
        }
    }

    /// The shared state, allocated on first use. Readers and the writer
    /// both go through here, so the writer always scans the counters
    /// readers count in (never an absent array it could miss a reader of).
    fn lines(&self) -> &Lines {
        self.lines.get_or_init(|| {
            Box::new(Lines {
                readers: (0..self.slots)
                    .map(|_| CachePadded::new(AtomicU32::new(0)))
                    .collect(),
                writer: CachePadded::new(AtomicU32::new(0)),
            })
        })
    }

    /// Take it shared.
    pub fn read(&self) -> BigReaderGuard<'_> {
        let lines = self.lines();
        let slot = manyfs_sync::cpu::current_below(lines.readers.len());
        let counter = &lines.readers[slot];
        let mut spins = 0;
        loop {
            counter.fetch_add(1, Ordering::SeqCst);
            if lines.writer.load(Ordering::SeqCst) == 0 {
                return BigReaderGuard { lock: self, slot };
            }
            // A writer is active or draining: step back and wait for it.
            if counter.fetch_sub(1, Ordering::SeqCst) == 1 {
                unpark_all(counter);
            }
            while lines.writer.load(Ordering::SeqCst) != 0 {
                if spins < SPINS_BEFORE_PARK {
                    spins += 1;
                    spin_hint();
                } else {
                    park_while(&lines.writer, |w| w != 0);
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
        let lines = self.lines();
        lines.writer.store(1, Ordering::SeqCst);
        // From here on the guard owns the flag: if anything below unwinds,
        // its drop clears the flag again.
        let guard = BigWriterGuard {
            lock: self,
            _mutex: mutex,
        };
        for counter in lines.readers.iter() {
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
        let writer = &self.lock.lines().writer;
        writer.store(0, Ordering::SeqCst);
        unpark_all(writer);
    }
}

impl Drop for BigReaderGuard<'_> {
    fn drop(&mut self) {
        let lines = self.lock.lines();
        let counter = &lines.readers[self.slot];
        if counter.fetch_sub(1, Ordering::SeqCst) == 1 && lines.writer.load(Ordering::SeqCst) != 0 {
            unpark_all(counter);
        }
    }
}
