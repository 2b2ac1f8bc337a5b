//! DRAM state of a directory (moved here from `namespace/` so the inode,
//! which embeds it, does not depend on the code that operates on it).

use crate::layout::FileKind;
use parking_lot::RwLock;
use std::collections::BTreeMap;

/// One name in a directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Child {
    /// Inode number.
    pub ino: u64,
    /// Inode generation.
    pub generation: u32,
    /// Inode kind.
    pub kind: FileKind,
}

/// A directory's entries and its entry sequence.
#[derive(Debug, Default)]
pub struct DirState {
    /// Name -> inode, sorted (readdir order is stable).
    pub entries: BTreeMap<Vec<u8>, Child>,
    /// Sequence of the newest entry in the directory's log.
    pub seq: u64,
    /// Entries in the directory's log, live or not (compaction trigger).
    pub log_entries: u64,
}

/// DRAM state of a directory.
#[derive(Debug, Default)]
pub struct DirData {
    /// Entries under a reader-writer lock.
    pub state: RwLock<DirState>,
}
