//! The low-level API for file-system adapters (the FUSE adapter,
//! `manyfs-fuse`, is built on it): calls by inode number and (parent, name)
//! as the kernel's FUSE protocol asks them, extended attributes by inode
//! number, and what an adapter does for the kernel on an open file.
//! Programs using manyfs as a file system need the path-level calls of
//! [`Fs`](crate::Fs) instead.
//!
//! Bring the traits into scope to call them: `use manyfs::lowlevel::InodeOps;`.
//! Both are sealed: only manyfs implements them.

use crate::api::{DirEntry, File, Metadata};
use crate::error::Result;
use crate::layout::BLOCK_SIZE;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

pub use crate::api::{BlocksPerNode, Rename, SetAttr};
pub use crate::layout::ROOT_INO;
pub use crate::placement::on_behalf_of;
pub use crate::xattr::{XATTR_INODE_MAX, XATTR_NAME_MAX, XATTR_VALUE_MAX, XattrSet};

/// Implemented by manyfs's own types only.
pub trait Sealed {}

/// Calls by inode number, implemented for [`Fs`](crate::Fs). The root
/// directory is [`ROOT_INO`].
pub trait InodeOps: Sealed {
    /// Look `name` up in directory `parent`.
    fn lookup(&self, parent: u64, name: &OsStr) -> Result<Metadata>;

    /// Attributes of inode `ino`.
    fn stat(&self, ino: u64) -> Result<Metadata>;

    /// Create `name` in directory `parent`, as `mknod(2)` does: the
    /// `S_IFMT` bits of `mode` say what (a regular file when they are 0, a
    /// directory, a FIFO, a socket, or a character or block device whose
    /// number is `rdev`), the low 12 bits are the permissions. Fails with
    /// `Exists` if the name is taken, `InvalidArgument` for a symlink or
    /// unknown type bits (symlinks: [`InodeOps::symlink_at`]).
    fn mknod(
        &self,
        parent: u64,
        name: &OsStr,
        mode: u32,
        rdev: u64,
        uid: u32,
        gid: u32,
    ) -> Result<Metadata>;

    /// Create a symbolic link `name` -> `target`.
    fn symlink_at(
        &self,
        parent: u64,
        name: &OsStr,
        target: &Path,
        uid: u32,
        gid: u32,
    ) -> Result<Metadata>;

    /// Add the name `new_name` in `new_parent` for inode `ino`.
    fn link_at(&self, ino: u64, new_parent: u64, new_name: &OsStr) -> Result<Metadata>;

    /// Remove a non-directory name.
    fn unlink_at(&self, parent: u64, name: &OsStr) -> Result<()>;

    /// Remove an empty directory.
    fn rmdir_at(&self, parent: u64, name: &OsStr) -> Result<()>;

    /// Rename `name` in `parent` to `new_name` in `new_parent`
    /// (`renameat2(2)`): replacing a compatible target, failing with
    /// `Exists` if there is one ([`Rename::NoReplace`]), or swapping the
    /// two names ([`Rename::Exchange`]; both must exist). Atomic, also
    /// across directories and after a crash.
    fn rename_at(
        &self,
        parent: u64,
        name: &OsStr,
        new_parent: u64,
        new_name: &OsStr,
        how: Rename,
    ) -> Result<()>;

    /// Target of symlink `ino`.
    fn readlink_ino(&self, ino: u64) -> Result<PathBuf>;

    /// Entries of directory `ino` (without `.` and `..`), sorted by name.
    fn readdir_ino(&self, ino: u64) -> Result<Vec<DirEntry>>;

    /// Change attributes (chmod, chown, truncate, utimes).
    fn setattr(&self, ino: u64, attr: &SetAttr) -> Result<Metadata>;

    /// Open inode `ino` for reading and/or writing.
    fn open_ino(&self, ino: u64, read: bool, write: bool) -> Result<File>;

    /// The value of extended attribute `name` of inode `ino` (`NoData`,
    /// i.e. `ENODATA`, when it has none).
    fn getxattr(&self, ino: u64, name: &OsStr) -> Result<Vec<u8>>;

    /// Set extended attribute `name` of inode `ino` to `value`; `how`
    /// says whether it must not exist yet (`EEXIST`) or must exist
    /// (`ENODATA`). Changes the inode's ctime.
    fn setxattr(&self, ino: u64, name: &OsStr, value: &[u8], how: XattrSet) -> Result<()>;

    /// Names of the extended attributes of inode `ino`, sorted.
    fn listxattr(&self, ino: u64) -> Result<Vec<OsString>>;

    /// Remove extended attribute `name` of inode `ino` (`ENODATA` when it
    /// has none).
    fn removexattr(&self, ino: u64, name: &OsStr) -> Result<()>;
}

/// What an adapter does for the kernel on an open [`File`].
pub trait FileExt: Sealed {
    /// Clear the setuid bit, and the setgid bit when group execute is set
    /// or the writer is outside the file's group, as Linux file systems do
    /// when a process without `CAP_FSETID` writes or truncates a file (the
    /// FUSE adapter calls this when the kernel flags a write so).
    /// `writer_in_group` answers, for the file's group id, whether the
    /// writer belongs to it (its fsgid or a supplementary group); it is
    /// asked only for a setgid file without group execute. Returns whether
    /// the mode changed.
    fn clear_setid(&self, writer_in_group: impl FnOnce(u32) -> bool) -> Result<bool>;

    /// Where the file's blocks are: per NUMA node of the pool's members,
    /// how many of its data pages and of its log blocks (log array, if any, and
    /// log pages) lie on that node's member. A snapshot; for checking
    /// placement (tests, benchmarks).
    fn blocks_per_node(&self) -> BlocksPerNode;
}

impl Sealed for File {}

impl FileExt for File {
    fn clear_setid(&self, writer_in_group: impl FnOnce(u32) -> bool) -> Result<bool> {
        crate::file::kill_setid(self.core(), self.inode(), writer_in_group)
    }

    fn blocks_per_node(&self) -> BlocksPerNode {
        let core = self.core();
        let members = core.media.members();
        let nodes = members
            .iter()
            .map(|m| m.node as usize + 1)
            .max()
            .unwrap_or(1);
        let node_of = |block: u64| {
            let off = block * BLOCK_SIZE;
            members
                .iter()
                .find(|m| off >= m.start && off < m.start + m.len)
                .map(|m| m.node as usize)
        };
        let mut out = BlocksPerNode {
            data: vec![0; nodes],
            log: vec![0; nodes],
        };
        let inode = &self.inode();
        if let Some(f) = &inode.file {
            for (_, m) in f.index.mapped() {
                if let Some(n) = node_of(m.block) {
                    out.data[n] += 1;
                }
            }
        }
        for b in inode.log.owned_blocks() {
            if let Some(n) = node_of(b) {
                out.log[n] += 1;
            }
        }
        out
    }
}
