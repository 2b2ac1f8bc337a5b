//! Range locks: who may read or write which bytes of a file.
//!
//! Four implementations share one interface, [`RangeLock`], so they can be
//! compared on the same workload (as in SRL-NOVA (segment range lock)): a
//! per-file RW lock (NOVA's baseline, [`PerInodeLock`]), an interval list
//! under one mutex (the Linux range-lock baseline, [`IntervalLock`]), and
//! the segment range lock (SRL) with its lock words ([`SegmentWord`]) in a
//! flat array ([`SrlArray`]) or in a radix tree installed by CAS
//! ([`SrlTree`]). [`LockKind`] names them and builds one; [`RangeGuard`]
//! holds a range until dropped. manyfs's `docs/locking.md` describes the
//! protocol. [`BigReaderLock`] is the per-file lock that every read and
//! write takes shared and truncate takes exclusive.
//!
//! ```
//! use manyfs_rangelock::{Access, LockKind, RangeGuard};
//!
//! // 4 KiB segments, for a file of at most 1 MiB.
//! let lock = LockKind::SrlTree.build(4096, 1 << 20);
//! std::thread::scope(|s| {
//!     // Disjoint ranges: the two writers hold theirs at the same time.
//!     s.spawn(|| drop(RangeGuard::new(&*lock, 0, 4096, Access::Write)));
//!     s.spawn(|| drop(RangeGuard::new(&*lock, 8192, 16384, Access::Write)));
//! });
//! let _shared = RangeGuard::new(&*lock, 0, 1 << 20, Access::Read);
//! assert_eq!("srl-tree".parse::<LockKind>(), Ok(LockKind::SrlTree));
//! ```
//!
//! # Concurrency guarantees
//!
//! - Exclusion: holders of overlapping ranges where one of them writes
//!   never hold at the same time; readers of overlapping ranges may.
//! - Disjoint ranges never wait for each other, except under
//!   [`PerInodeLock`] (the baseline that shows what that costs) and at the
//!   far end of [`SrlArray`] and [`SrlTree`], whose last word covers every
//!   offset past their reach (more exclusion, never less).
//! - No deadlock between ranges: a multi-segment range takes its words in
//!   ascending order.
//! - Writers do not starve: a waiting writer keeps new readers out of a
//!   segment word; [`IntervalLock`] grants overlapping requests in arrival
//!   order; [`BigReaderLock`]'s writer holds new readers off while it
//!   drains them.
//! - Waiters spin briefly, then park (more threads than cores do not burn
//!   the holder's time slice); a release wakes them.
//! - Guards release on drop, also when the holder unwinds from a panic.
//!
//! # Model checking
//!
//! With `--features shuttle` the atomics and parking come from shuttle
//! (through manyfs-sync), and `cargo test -p manyfs-rangelock --features
//! shuttle --lib shuttle_models` runs the real [`SegmentWord`], [`SrlTree`]
//! and [`BigReaderLock`] code under thousands of random and PCT schedules.
//! The stress tests in `tests/` run without the feature.

#![deny(missing_docs)]

mod big_reader;
mod interval;
mod per_inode;
mod segment_word;
mod srl;

pub use big_reader::{BigReaderGuard, BigReaderLock, BigWriterGuard};
pub use interval::IntervalLock;
pub use per_inode::PerInodeLock;
pub use segment_word::SegmentWord;
pub use srl::{SrlArray, SrlTree};

/// Bytes one segment lock word takes in `srl-array` (a word on its own
/// cache-line pair).
pub const SEGMENT_WORD_BYTES: u64 =
    std::mem::size_of::<crossbeam_utils::CachePadded<SegmentWord>>() as u64;

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

/// A name that is not a [`LockKind`]'s (see [`LockKind::name`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("lock kind {0:?} (expected inode, interval, srl-array or srl-tree)")]
pub struct ParseLockKindError(String);

impl ParseLockKindError {
    /// The name that was not recognised.
    pub fn input(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for LockKind {
    type Err = ParseLockKindError;
    fn from_str(s: &str) -> Result<Self, ParseLockKindError> {
        LockKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| ParseLockKindError(s.to_string()))
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

#[cfg(all(test, feature = "shuttle"))]
mod shuttle_models;
