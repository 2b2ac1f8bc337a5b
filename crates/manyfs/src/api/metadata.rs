//! The plain data types of the API: attributes, directory entries,
//! `statfs` figures and attribute changes.

use super::from_ns;
use crate::inode::Inode;
use crate::layout::FileKind;
use std::ffi::OsString;
use std::time::SystemTime;

/// Attributes of a file, directory, symlink or special node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    /// Inode number.
    pub ino: u64,
    /// Generation of the inode slot (changes when a number is reused).
    pub generation: u32,
    /// What it is.
    pub kind: FileKind,
    /// Size in bytes (directories: number of entries times 32).
    pub size: u64,
    /// Permission bits (`0o7777`).
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Hard links.
    pub nlink: u32,
    /// Last access (manyfs does not update it on reads, like `noatime`).
    pub atime: SystemTime,
    /// Last modification.
    pub mtime: SystemTime,
    /// Last status change.
    pub ctime: SystemTime,
    /// Space used, in 512-byte units.
    pub blocks: u64,
    /// Device number of a character or block device (0 otherwise).
    pub rdev: u64,
}

impl Metadata {
    /// Whether this is a directory.
    pub fn is_dir(&self) -> bool {
        self.kind == FileKind::Dir
    }
    /// Whether this is a regular file.
    pub fn is_file(&self) -> bool {
        self.kind == FileKind::File
    }
    /// Whether this is a symbolic link.
    pub fn is_symlink(&self) -> bool {
        self.kind == FileKind::Symlink
    }
    /// Size in bytes.
    pub fn len(&self) -> u64 {
        self.size
    }
    /// Whether the size is zero.
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }
}

/// One directory entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// Name.
    pub name: OsString,
    /// Inode number.
    pub ino: u64,
    /// Kind.
    pub kind: FileKind,
}

/// Space and inode usage (`statfs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatFs {
    /// Block size.
    pub block_size: u64,
    /// Blocks in the pool's data region.
    pub total_blocks: u64,
    /// Free blocks.
    pub free_blocks: u64,
    /// Inode slots.
    pub total_inodes: u64,
    /// Free inode slots.
    pub free_inodes: u64,
    /// Longest name.
    pub name_max: u64,
}

/// What [`crate::lowlevel::InodeOps::rename_at`] does with the destination name
/// (`renameat2(2)` flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Rename {
    /// Replace a compatible target (plain `rename(2)`).
    #[default]
    Replace,
    /// Fail with `EEXIST` if the target exists (`RENAME_NOREPLACE`).
    NoReplace,
    /// Swap the two names, which must both exist (`RENAME_EXCHANGE`).
    Exchange,
}

/// Attribute changes for [`crate::lowlevel::InodeOps::setattr`].
#[derive(Debug, Clone, Default)]
pub struct SetAttr {
    /// Permission bits.
    pub mode: Option<u32>,
    /// Owner.
    pub uid: Option<u32>,
    /// Group.
    pub gid: Option<u32>,
    /// Size (truncate or extend).
    pub size: Option<u64>,
    /// Access time.
    pub atime: Option<SystemTime>,
    /// Modification time.
    pub mtime: Option<SystemTime>,
}

/// The [`Metadata`] of a live inode.
pub(super) fn metadata_of(inode: &Inode) -> Metadata {
    let a = inode.attrs.lock().clone();
    let (size, blocks, mtime) = match (&inode.file, &inode.dir) {
        (Some(f), _) => (
            f.size(),
            crate::file::allocated_bytes(f) / 512,
            a.mtime_ns.max(inode.log.last_mtime_ns()),
        ),
        (None, Some(d)) => (
            d.len() as u64 * 32,
            8,
            a.mtime_ns.max(inode.log.last_mtime_ns()),
        ),
        _ => (0, 0, a.mtime_ns),
    };
    Metadata {
        ino: inode.ino,
        generation: inode.generation,
        kind: inode.kind,
        size,
        mode: a.mode,
        uid: a.uid,
        gid: a.gid,
        nlink: a.nlink,
        atime: from_ns(a.atime_ns),
        mtime: from_ns(mtime),
        ctime: from_ns(a.ctime_ns.max(mtime)),
        blocks,
        rdev: inode.rdev,
    }
}
