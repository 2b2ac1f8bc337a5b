//! DRAM state of a regular file (moved here from `file/` so the inode,
//! which embeds it, does not depend on the code that operates on it).

use crate::index::FileIndex;
use crate::lock::{BigReaderLock, RangeLock};
use crate::log::EntryLoc;
use crate::options::MountOptions;
use crate::sync::{AtomicU64, Ordering};
use crossbeam_utils::CachePadded;
use parking_lot::Mutex;

/// DRAM state of a regular file (or symlink).
pub struct FileData {
    /// Size in bytes; published after the data it covers is in the index.
    pub size: CachePadded<AtomicU64>,
    /// Page index.
    pub index: FileIndex,
    /// The range lock.
    pub lock: Box<dyn RangeLock>,
    /// Shared by all I/O, exclusive for truncate.
    pub truncate_lock: BigReaderLock,
    /// Serialises O_APPEND writers choosing their offset.
    pub append_lock: Mutex<()>,
    /// The entry whose `file_end` defines the size since the last truncate;
    /// it holds one extra live reference so log GC keeps it.
    pub size_definer: Mutex<Option<(u64, EntryLoc)>>,
}

impl FileData {
    /// Empty file state for a mount with `opts` whose topology has `cpus`
    /// CPUs; `max_bytes` bounds offsets.
    pub fn new(opts: &MountOptions, max_bytes: u64, cpus: usize) -> FileData {
        FileData {
            size: CachePadded::new(AtomicU64::new(0)),
            index: FileIndex::new(opts.index),
            lock: opts.lock.build(opts.segment_size, max_bytes),
            truncate_lock: BigReaderLock::new(cpus),
            append_lock: Mutex::new(()),
            size_definer: Mutex::new(None),
        }
    }

    /// Current size.
    pub fn size(&self) -> u64 {
        self.size.load(Ordering::Acquire)
    }
}
