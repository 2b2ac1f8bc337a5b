//! DRAM state of a regular file (moved here from `file/` so the inode,
//! which embeds it, does not depend on the code that operates on it).

use crate::index::FileIndex;
use crate::lock::{BigReaderLock, RangeLock};
use crate::log::{EntryLoc, SubLogSlot};
use crate::options::MountOptions;
use crate::sync::{AtomicU64, Ordering};
use parking_lot::Mutex;

/// DRAM state of a regular file (or symlink): two cache lines.
///
/// The first holds what an extending write changes (the size, the entry
/// defining it, the `O_APPEND` lock) and the range lock's pointer; the
/// second the index (its inline page-0 slot changes with every write of
/// page 0) and the truncate lock. Every read and write loads the size, so
/// an extending write costs the other threads of the file one line (the
/// size's, with the lock pointer they load too) and leaves the second line
/// alone. (Before: the size alone on 128 bytes and the rest on another 128
/// in the compiler's order, so an extending write dirtied the size's line
/// and, through the size definer, one of the other two, possibly the lock
/// pointers': 256 bytes per file, now 128.)
///
/// The next 128 bytes hold the first sub-log slot of the file's log
/// ([`crate::log::InodeLog::new_in`]): in this allocation, which is
/// aligned anyway, it costs no aligned allocation of its own.
#[repr(C, align(128))]
pub struct FileData {
    /// Size in bytes; published after the data it covers is in the index.
    pub size: AtomicU64,
    /// The entry whose `file_end` defines the size since the last truncate;
    /// it holds one extra live reference so log GC keeps it.
    pub size_definer: Mutex<Option<(u64, EntryLoc)>>,
    /// Serialises O_APPEND writers choosing their offset.
    pub append_lock: Mutex<()>,
    /// The range lock.
    pub lock: Box<dyn RangeLock>,
    /// Page index (second cache line).
    pub index: FileIndex,
    /// Shared by all I/O, exclusive for truncate.
    pub truncate_lock: BigReaderLock,
    /// The log's first sub-log slot (its own 128 bytes).
    pub(crate) first_slot: SubLogSlot,
}

// The layout the comment above describes: two lines, the index starting
// the second, then the sub-log slot (shuttle's atomics are larger: not
// checked under it).
#[cfg(not(feature = "shuttle"))]
const _: () = assert!(
    std::mem::offset_of!(FileData, index) == 64
        && std::mem::offset_of!(FileData, first_slot) == 128
        && std::mem::size_of::<FileData>() == 256
);

impl FileData {
    /// Empty file state for a mount with `opts` whose topology has `cpus`
    /// CPUs; `max_bytes` bounds offsets.
    pub fn new(opts: &MountOptions, max_bytes: u64, cpus: usize) -> FileData {
        FileData {
            size: AtomicU64::new(0),
            index: FileIndex::new(opts.index),
            lock: opts.lock.build(opts.segment_size, max_bytes),
            truncate_lock: BigReaderLock::new(cpus),
            append_lock: Mutex::new(()),
            size_definer: Mutex::new(None),
            first_slot: SubLogSlot::empty(),
        }
    }

    /// Current size.
    pub fn size(&self) -> u64 {
        self.size.load(Ordering::Acquire)
    }
}
