//! The baseline: one reader-writer lock per file, whatever the range.
//!
//! It uses the same lock word as SRL, so a comparison between the two
//! measures granularity alone, not two different lock implementations.

use super::{Access, LockKind, RangeLock, SegmentWord};
use crossbeam_utils::CachePadded;

/// NOVA's per-inode lock: every writer excludes every other access, and all
/// readers increment one shared counter.
#[derive(Default)]
pub struct PerInodeLock {
    word: CachePadded<SegmentWord>,
}

impl PerInodeLock {
    /// A new unlocked lock.
    pub fn new() -> Self {
        Self::default()
    }
}

impl RangeLock for PerInodeLock {
    fn acquire(&self, _start: u64, _end: u64, access: Access) -> Option<&SegmentWord> {
        match access {
            Access::Read => self.word.lock_read(),
            Access::Write => self.word.lock_write(),
        }
        Some(&self.word)
    }

    fn release(&self, _start: u64, _end: u64, access: Access) {
        match access {
            Access::Read => self.word.unlock_read(),
            Access::Write => self.word.unlock_write(),
        }
    }

    fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
    }

    fn kind(&self) -> LockKind {
        LockKind::Inode
    }
}
