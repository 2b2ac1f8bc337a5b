//! Range locks: who may read or write which bytes of a file.
//!
//! Four implementations share one interface so they can be compared on the
//! same workload (as in SRL-NOVA (segment range lock)): a per-file RW lock (NOVA's baseline), an interval
//! list under one mutex (the Linux range-lock baseline), and the segment
//! range lock (SRL) with its lock words in a flat array or in a radix tree
//! installed by CAS. `docs/locking.md` describes the protocol.

mod big_reader;
mod interval;
mod per_inode;
mod segment_word;
mod srl;

pub(crate) use big_reader::BigReaderLock;
pub(crate) use interval::IntervalLock;
pub(crate) use per_inode::PerInodeLock;
pub use segment_word::SegmentWord;
pub(crate) use srl::{SrlArray, SrlTree};

/// Bytes one segment lock word takes in `srl-array` (a word on its own
/// cache-line pair).
pub(crate) const SEGMENT_WORD_BYTES: u64 =
    std::mem::size_of::<crossbeam_utils::CachePadded<SegmentWord>>() as u64;

use crate::error::{Error, Result};

/// Which range lock a mount uses for its files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum LockKind {
    /// One RW lock per file.
    Inode,
    /// A list of held ranges under one mutex.
    Interval,
    /// Segment lock words in a flat array sized for the largest file.
    SrlArray,
    /// Segment lock words in a lazily allocated radix tree (the default).
    #[default]
    SrlTree,
}

impl LockKind {
    /// Every kind, in the order benchmarks report them.
    pub const ALL: [LockKind; 4] = [
        LockKind::Inode,
        LockKind::Interval,
        LockKind::SrlArray,
        LockKind::SrlTree,
    ];

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            LockKind::Inode => "inode",
            LockKind::Interval => "interval",
            LockKind::SrlArray => "srl-array",
            LockKind::SrlTree => "srl-tree",
        }
    }

    /// Build a lock for one file. `max_bytes` bounds the offsets it will be
    /// asked about (the array variant sizes itself by it).
    pub fn build(self, segment_size: u64, max_bytes: u64) -> Box<dyn RangeLock> {
        match self {
            LockKind::Inode => Box::new(PerInodeLock::new()),
            LockKind::Interval => Box::new(IntervalLock::new()),
            LockKind::SrlArray => Box::new(SrlArray::new(segment_size, max_bytes)),
            LockKind::SrlTree => Box::new(SrlTree::new(segment_size)),
        }
    }
}

impl std::str::FromStr for LockKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        LockKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "lock kind {s:?} (expected inode, interval, srl-array or srl-tree)"
                ))
            })
    }
}

impl std::fmt::Display for LockKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Shared (read) or exclusive (write) access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Many holders of overlapping ranges at once.
    Read,
    /// No other holder of an overlapping range.
    Write,
}

/// A lock over byte ranges `[start, end)` of one file.
///
/// Holders of overlapping ranges where one of them writes exclude each
/// other; holders of disjoint ranges never wait for each other (except in the
/// per-inode baseline, which exists to show the cost of doing so).
pub trait RangeLock: Send + Sync {
    /// Block until `[start, end)` is held with `access`. `end > start`.
    ///
    /// When one lock word covers the whole range, it is returned: the holder
    /// may then release by unlocking that word with the same access instead
    /// of calling [`RangeLock::release`], which saves looking it up again
    /// (the common case: a 4 KiB operation in one segment).
    fn acquire(&self, start: u64, end: u64, access: Access) -> Option<&SegmentWord>;
    /// Release a range acquired with the same arguments.
    fn release(&self, start: u64, end: u64, access: Access);
    /// Bytes of DRAM the lock uses now (for the lock-memory benchmark).
    fn memory_bytes(&self) -> usize;
    /// Which kind this is.
    fn kind(&self) -> LockKind;
}

/// Holds a range until dropped.
pub struct RangeGuard<'a> {
    lock: &'a dyn RangeLock,
    word: Option<&'a SegmentWord>,
    start: u64,
    end: u64,
    access: Access,
}

impl<'a> RangeGuard<'a> {
    /// Acquire `[start, end)` of `lock` (an empty range locks one byte so
    /// that zero-length operations still order against writers).
    pub fn new(lock: &'a dyn RangeLock, start: u64, end: u64, access: Access) -> Self {
        let end = end.max(start.saturating_add(1));
        let word = lock.acquire(start, end, access);
        RangeGuard {
            lock,
            word,
            start,
            end,
            access,
        }
    }
}

impl Drop for RangeGuard<'_> {
    fn drop(&mut self) {
        match (self.word, self.access) {
            (Some(w), Access::Read) => w.unlock_read(),
            (Some(w), Access::Write) => w.unlock_write(),
            (None, _) => self.lock.release(self.start, self.end, self.access),
        }
    }
}

#[cfg(test)]
mod tests;
