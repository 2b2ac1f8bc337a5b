//! The DRAM side of an inode: attributes, log, and file or directory state.

mod dir_data;
mod file_data;
mod names;
mod staging;

pub(crate) use dir_data::RwLockWriteGuard as ShardWriteGuard;
pub(crate) use dir_data::{
    AllShards, AllShardsMut, DirData, DirShard, DirState, default_shards, take_seqs,
};
pub(crate) use file_data::FileData;
pub(crate) use names::Child;
pub(crate) use names::NameGuard;
#[cfg(all(test, feature = "shuttle"))]
pub(crate) use names::NameTable;
#[cfg(all(test, feature = "shuttle"))]
pub(crate) use names::hash_name;
#[cfg(feature = "planted-bugs")]
pub use staging::EngineBug;
pub use staging::StagingStats;
pub(crate) use staging::{LazyStaging, Staging};

use crate::layout::FileKind;
use crate::log::InodeLog;
use crate::sync::{AtomicU32, AtomicU64, Ordering};
use parking_lot::Mutex;

/// Attributes that change rarely (chmod, chown, utimes, link count).
#[derive(Debug, Clone)]
pub struct Attrs {
    /// Permission bits.
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Access time.
    pub atime_ns: u64,
    /// Modification time set by the last attribute change (writes keep
    /// theirs in their sub-logs).
    pub mtime_ns: u64,
    /// Change time.
    pub ctime_ns: u64,
    /// Hard links (directories: 2 + subdirectories).
    pub nlink: u32,
}

/// Extended attributes of one inode (the DRAM view of its `Xattr` log
/// entries).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Xattrs {
    /// Sequence of the newest extended-attribute entry.
    pub seq: u64,
    /// Name (with its namespace prefix) -> value.
    pub map: std::collections::BTreeMap<Vec<u8>, Vec<u8>>,
}

impl Xattrs {
    /// Bytes of names and values together (what the per-inode limit counts).
    pub fn bytes(&self) -> usize {
        self.map.iter().map(|(k, v)| k.len() + v.len()).sum()
    }

    /// One entry per attribute, for a log rewrite (compaction): they keep
    /// their values and the current sequence.
    pub fn rewrite_entries(&self, ctime_ns: u64) -> Vec<(crate::layout::Entry, u32)> {
        self.map
            .iter()
            .map(|(name, value)| {
                let e = crate::layout::Entry::Xattr {
                    seq: self.seq,
                    ctime_ns,
                    name: name.clone(),
                    value: Some(value.clone()),
                };
                (e, 1)
            })
            .collect()
    }
}

/// One live inode.
pub struct Inode {
    /// Inode number.
    pub ino: u64,
    /// Generation of the inode record.
    pub generation: u32,
    /// File, directory, symlink or special node.
    pub kind: FileKind,
    /// Device number (character and block devices; fixed at creation).
    pub rdev: u64,
    /// Attributes.
    pub attrs: Mutex<Attrs>,
    /// Extended attributes. Lock order: `attrs` before `xattrs` (log
    /// compaction holds both, and so does an attribute change logged
    /// with the access ACL it must agree with: chmod, setfacl); any
    /// other change of extended attributes takes `xattrs` alone and
    /// updates `attrs` (the ctime) after dropping it.
    pub xattrs: Mutex<Xattrs>,
    /// Sequence of the newest attribute entry (writes record it as their epoch).
    pub attr_seq: AtomicU64,
    /// Attribute entries in the log (they are never individually
    /// collected; the log is compacted when there are many).
    pub attr_entries: AtomicU64,
    /// Size changes made (extending writes, truncates), each counted once
    /// its entry is in the log.
    pub size_changes: AtomicU64,
    /// Of [`Inode::size_changes`], how many a completed sync made durable.
    /// While they differ, a power cut may leave the file at a size other
    /// than its current one, so no write goes in place (it could show in
    /// part, cut at that other size).
    pub size_changes_synced: AtomicU64,
    /// The log entry of the newest truncate or `set_len` (0: none since
    /// the load, or known durable). A write after it must count only
    /// together with it: the pages it cut off are zeros in the write's
    /// copy-on-write page, so the write kept without it would show the
    /// truncate in part (the file's other pages at their old contents).
    /// See [`crate::log::InodeLog::unsynced_sublog`].
    pub size_set_entry: AtomicU64,
    /// The inode's log.
    pub log: InodeLog,
    /// Regular-file and symlink state (boxed: its cache-line-aligned
    /// parts would otherwise pad every inode, directories included).
    pub file: Option<Box<FileData>>,
    /// Directory state (boxed, likewise).
    pub dir: Option<Box<DirData>>,
    /// Open handles (an unlinked inode is freed when the last one closes).
    pub open_handles: AtomicU32,
    /// Parent directory (directories only; for `..` and rename loop checks).
    pub parent: AtomicU64,
    /// Whether the mode has the setuid or setgid bit: lets a write check
    /// without the attribute mutex whether it has bits to clear.
    pub setid: std::sync::atomic::AtomicBool,
    /// Set once the inode's space has been returned.
    pub freed: std::sync::atomic::AtomicBool,
    /// Staging of small synchronous writes on a tiered pool
    /// (`inode/staging.rs`), made on first use.
    pub staging: LazyStaging,
    /// Appends written in place but not logged yet (`file` mode).
    pub(crate) pending_append: Mutex<Option<PendingAppend>>,
    /// Whether `pending_append` holds one: lets every other write check
    /// without the mutex.
    pub(crate) has_pending_append: std::sync::atomic::AtomicBool,
}

/// Appends that went into the block of the page holding the end of file
/// and are not logged yet (`file::append_in_place`, `file` mode): the
/// bytes are in the block and the size in memory; the entry that makes
/// them count is appended by the next sync of the file or of the pool, or
/// before any other change to the file (`file::log_pending_append`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PendingAppend {
    /// The file page.
    pub page: u64,
    /// Its block (the one the logged entry maps).
    pub block: u64,
    /// The logged entry that maps the page.
    pub entry: crate::log::EntryLoc,
    /// That entry's version.
    pub version: u64,
    /// The end of file the appends reached.
    pub end: u64,
    /// crc32 of the page's bytes below `end`, where it could be carried on
    /// from the logged entry's checksum (else computed when logged).
    pub crc: Option<u32>,
    /// The newest append's mtime.
    pub mtime_ns: u64,
}

impl Inode {
    /// Whether this is a directory.
    pub fn is_dir(&self) -> bool {
        self.kind == FileKind::Dir
    }

    /// The file state, or an error naming the inode.
    pub fn file(&self) -> crate::Result<&FileData> {
        self.file
            .as_deref()
            .ok_or_else(|| crate::Error::IsDir(format!("inode {}", self.ino)))
    }

    /// The directory state, or an error naming the inode.
    pub fn dir(&self) -> crate::Result<&DirData> {
        self.dir
            .as_deref()
            .ok_or_else(|| crate::Error::NotDir(format!("inode {}", self.ino)))
    }

    /// Link count now.
    pub fn nlink(&self) -> u32 {
        self.attrs.lock().nlink
    }

    /// Count a new user (an open handle, or an operation in progress that
    /// needs the inode's space to stay allocated). Fails once the inode has
    /// been freed: a lookup that raced with the last unlink finds nothing.
    pub fn pin(&self) -> crate::Result<()> {
        let _a = self.attrs.lock();
        if self.freed.load(Ordering::Acquire) {
            return Err(crate::Error::NotFound(format!(
                "inode {} was removed",
                self.ino
            )));
        }
        self.open_handles.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }
}
