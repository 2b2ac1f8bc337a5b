//! [`File`] handles shared by many threads.

use super::metadata::metadata_of;
use super::*;
use crate::core::FsCore;
use crate::error::{Error, Result};
use crate::file::{self};
use crate::inode::Inode;
use std::sync::Arc;

/// A handle to an open file. Clone it or share it by reference across
/// threads: reads and writes of disjoint ranges proceed in parallel.
#[derive(Clone)]
pub struct File {
    handle: Arc<Handle>,
}

struct Handle {
    core: Arc<FsCore>,
    inode: Arc<Inode>,
    read: bool,
    write: bool,
    append: bool,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.core.unpin(&self.inode);
    }
}

impl File {
    pub(super) fn new(
        core: Arc<FsCore>,
        inode: Arc<Inode>,
        read: bool,
        write: bool,
        append: bool,
    ) -> Result<File> {
        inode.pin()?;
        Ok(Self::pinned(core, inode, read, write, append))
    }

    /// A handle on `inode`, which the caller pinned ([`Inode::pin`]): the
    /// handle owns that pin.
    pub(super) fn pinned(
        core: Arc<FsCore>,
        inode: Arc<Inode>,
        read: bool,
        write: bool,
        append: bool,
    ) -> File {
        File {
            handle: Arc::new(Handle {
                core,
                inode,
                read,
                write,
                append,
            }),
        }
    }

    /// The mount this handle belongs to.
    pub(super) fn core(&self) -> &Arc<FsCore> {
        &self.handle.core
    }

    /// The inode this handle is open on.
    pub(super) fn inode(&self) -> &Arc<Inode> {
        &self.handle.inode
    }

    /// Inode number.
    pub fn ino(&self) -> u64 {
        self.handle.inode.ino
    }

    /// Read up to `buf.len()` bytes at `off`; 0 at end of file.
    pub fn read_at(&self, buf: &mut [u8], off: u64) -> Result<usize> {
        if !self.handle.read {
            return Err(Error::BadHandle("file not opened for reading"));
        }
        file::read(&self.handle.core, &self.handle.inode, buf, off)
    }

    /// Fill `buf` from `off`, failing at end of file.
    pub fn read_exact_at(&self, buf: &mut [u8], off: u64) -> Result<()> {
        let n = self.read_at(buf, off)?;
        if n < buf.len() {
            return Err(Error::InvalidArgument(format!(
                "read_exact_at: end of file after {n} bytes"
            )));
        }
        Ok(())
    }

    /// Write `buf` at `off` (at end of file if opened with append).
    pub fn write_at(&self, buf: &[u8], off: u64) -> Result<usize> {
        if !self.handle.write {
            return Err(Error::BadHandle("file not opened for writing"));
        }
        if self.handle.append {
            self.append(buf)?;
            return Ok(buf.len());
        }
        file::write(&self.handle.core, &self.handle.inode, buf, off)
    }

    /// Write all of `buf` at `off`.
    pub fn write_all_at(&self, buf: &[u8], off: u64) -> Result<()> {
        self.write_at(buf, off).map(|_| ())
    }

    /// Append `buf` at end of file; returns the offset written at.
    pub fn append(&self, buf: &[u8]) -> Result<u64> {
        if !self.handle.write {
            return Err(Error::BadHandle("file not opened for writing"));
        }
        file::append(&self.handle.core, &self.handle.inode, buf)
    }

    /// Truncate or extend.
    pub fn set_len(&self, len: u64) -> Result<()> {
        if !self.handle.write {
            return Err(Error::BadHandle("file not opened for writing"));
        }
        file::set_len(&self.handle.core, &self.handle.inode, len)
    }

    /// Make sure the file is at least `offset + len` bytes long, extending
    /// it with zeros if needed (what `fallocate` mode 0 guarantees about the
    /// size). Atomic with respect to concurrent writes and truncates.
    pub fn allocate(&self, offset: u64, len: u64) -> Result<()> {
        if !self.handle.write {
            return Err(Error::BadHandle("file not opened for writing"));
        }
        let end = offset
            .checked_add(len)
            .ok_or_else(|| Error::FileTooLarge(format!("allocate({offset}, {len})")))?;
        file::extend_to(&self.handle.core, &self.handle.inode, end)
    }

    /// Make the file's data and metadata durable, and its name if it was
    /// created (or linked) since the last full sync. In `file` mode this
    /// writes back only what this file changed (and, then, its directory).
    pub fn sync_all(&self) -> Result<()> {
        self.handle.core.sync_inode(&self.handle.inode, true)
    }

    /// Make the file's data durable, and its size and attributes as far
    /// as they share the data's log entries; the modification time of
    /// single-page overwrites made in place (`file` mode) may be older
    /// after a power cut, as `fdatasync` allows.
    pub fn sync_data(&self) -> Result<()> {
        self.handle.core.sync_inode(&self.handle.inode, false)
    }

    /// Attributes.
    pub fn metadata(&self) -> Result<Metadata> {
        Ok(metadata_of(&self.handle.inode))
    }
}

/// Blocks of one file per NUMA node ([`crate::lowlevel::FileExt::blocks_per_node`]); both
/// vectors are indexed by node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlocksPerNode {
    /// Data pages on each node.
    pub data: Vec<u64>,
    /// Log blocks (the log array, if any, and every sub-log's pages) on each node.
    pub log: Vec<u64>,
}

impl std::os::unix::fs::FileExt for File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        File::read_at(self, buf, offset).map_err(Into::into)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<usize> {
        File::write_at(self, buf, offset).map_err(Into::into)
    }
}
