//! [`File`] handles shared by many threads, and [`OpenOptions`].

use super::*;
use crate::core::FsCore;
use crate::error::{Error, Result};
use crate::file::{self};
use crate::inode::Inode;
use crate::layout::*;
use crate::namespace::{self, NewNode};
use std::path::Path;
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
    fn pinned(core: Arc<FsCore>, inode: Arc<Inode>, read: bool, write: bool, append: bool) -> File {
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

    /// Inode number.
    pub fn ino(&self) -> u64 {
        self.handle.inode.ino
    }

    /// Clear the setuid bit, and the setgid bit when group execute is set,
    /// as kernel file systems do when a process without `CAP_FSETID`
    /// writes or truncates a file (the FUSE adapter calls this when the
    /// kernel flags a write so). Returns whether the mode changed.
    pub fn clear_setid(&self) -> Result<bool> {
        file::kill_setid(&self.handle.core, &self.handle.inode)
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
        Ok(Fs {
            core: self.handle.core.clone(),
        }
        .meta(&self.handle.inode))
    }

    /// Where the file's blocks are: per NUMA node of the pool's members,
    /// how many of its data pages and of its log blocks (log array, if any, and
    /// log pages) lie on that node's member. A snapshot; for checking
    /// placement (tests, benchmarks).
    pub fn blocks_per_node(&self) -> BlocksPerNode {
        let core = &self.handle.core;
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
        let inode = &self.handle.inode;
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

/// Blocks of one file per NUMA node ([`File::blocks_per_node`]); both
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

/// Options for opening a file, as in `std::fs::OpenOptions`.
#[derive(Debug, Clone)]
pub struct OpenOptions {
    read: bool,
    write: bool,
    append: bool,
    create: bool,
    create_new: bool,
    truncate: bool,
    mode: u32,
}

impl Default for OpenOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl OpenOptions {
    /// All options off; mode 0o644 for created files.
    pub fn new() -> Self {
        OpenOptions {
            read: false,
            write: false,
            append: false,
            create: false,
            create_new: false,
            truncate: false,
            mode: 0o644,
        }
    }
    /// Open for reading.
    pub fn read(&mut self, v: bool) -> &mut Self {
        self.read = v;
        self
    }
    /// Open for writing.
    pub fn write(&mut self, v: bool) -> &mut Self {
        self.write = v;
        self
    }
    /// Every write goes to the end of file.
    pub fn append(&mut self, v: bool) -> &mut Self {
        self.append = v;
        if v {
            self.write = true;
        }
        self
    }
    /// Create the file if missing.
    pub fn create(&mut self, v: bool) -> &mut Self {
        self.create = v;
        self
    }
    /// Create the file, failing if it exists.
    pub fn create_new(&mut self, v: bool) -> &mut Self {
        self.create_new = v;
        self
    }
    /// Truncate to zero length.
    pub fn truncate(&mut self, v: bool) -> &mut Self {
        self.truncate = v;
        self
    }
    /// Permission bits for a created file.
    pub fn mode(&mut self, mode: u32) -> &mut Self {
        self.mode = mode;
        self
    }

    /// Open `path` in `fs`. A final symlink is followed, also when it
    /// dangles and the file is to be created: the file is created where the
    /// link points, as `open(2)` does.
    pub fn open(&self, fs: &Fs, path: impl AsRef<Path>) -> Result<File> {
        let p = path.as_ref();
        let core = &fs.core;
        if (self.truncate || self.create || self.create_new) && !self.write {
            return Err(Error::InvalidArgument(
                "create/truncate need write access".into(),
            ));
        }
        let shown = || p.display().to_string();
        let mut budget = namespace::MAX_SYMLINKS;
        // The walk starts at the root, borrowed (no reference count on the
        // inode every open of every thread passes through), or at the
        // directory of a symlink being followed.
        let guard = core.guard();
        let root = core.get_ref(ROOT_INO, &guard)?;
        let mut followed: Option<Arc<Inode>> = None;
        let mut cur: Vec<u8> = path_bytes(p).to_vec();
        // Whether this open made the file (then it holds the inode pinned).
        let mut created = false;
        let inode = loop {
            let creating = self.create || self.create_new;
            let start = followed.as_ref().unwrap_or(root);
            // The directory is borrowed: creates in one directory write
            // no line of its inode.
            let split = match namespace::resolve_parent_in(core, &guard, start, &cur, &mut budget) {
                // O_CREAT with a trailing slash: a directory was named, and
                // open(2) does not make directories.
                Ok(s) if creating && s.trailing_slash => return Err(Error::IsDir(shown())),
                Err(Error::NameTooLong(_)) if creating && cur.ends_with(b"/") => {
                    return Err(Error::IsDir(shown()));
                }
                Ok(s) => s,
                // "/" names no entry of a parent: it is the root itself.
                Err(Error::InvalidArgument(_))
                    if cur.iter().all(|&c| c == b'/') && !cur.is_empty() =>
                {
                    if self.create_new {
                        return Err(Error::Exists(shown()));
                    }
                    break core.get(ROOT_INO)?;
                }
                Err(e) => return Err(Fs::ctx(e, p)),
            };
            match namespace::lookup(core, split.dir, &split.name) {
                Ok(i) if i.kind == FileKind::Symlink => {
                    if self.create_new {
                        return Err(Error::Exists(shown()));
                    }
                    if budget == 0 {
                        return Err(Error::Loop(shown()));
                    }
                    budget -= 1;
                    let mut target = namespace::read_link(core, &i)?;
                    if split.trailing_slash {
                        target.push(b'/');
                    }
                    followed = Some(split.dir.clone());
                    cur = target;
                }
                Ok(i) => {
                    if self.create_new {
                        return Err(Error::Exists(shown()));
                    }
                    if split.trailing_slash && !i.is_dir() {
                        return Err(Error::NotDir(shown()));
                    }
                    // Pinned here: an inode freed since the lookup (its
                    // last name was removed, or renamed over, meanwhile) is
                    // not what the name names now: look again.
                    if i.pin().is_err() {
                        continue;
                    }
                    break i;
                }
                Err(Error::NotFound(_)) if self.create || self.create_new => {
                    if split.trailing_slash {
                        return Err(Error::IsDir(shown()));
                    }
                    match namespace::create_pinned(
                        core,
                        split.dir,
                        &split.name,
                        NewNode::File,
                        self.mode,
                        0,
                        0,
                    ) {
                        Ok(i) => {
                            created = true;
                            break i;
                        }
                        // Someone else created it meanwhile: look again.
                        Err(Error::Exists(_)) if !self.create_new => {}
                        Err(e) => return Err(Fs::ctx(e, p)),
                    }
                }
                Err(e) => return Err(Fs::ctx(e, p)),
            }
        };
        let (read, write, append) = (self.read || !self.write, self.write, self.append);
        // Pinned by the create, before any other thread could find (and
        // unlink) the name, or by the lookup; the handle owns the pin.
        let is_dir = inode.is_dir();
        let f = File::pinned(core.clone(), inode, read, write, append);
        if created {
            // A regular file, on a writable mount.
            return Ok(f);
        }
        if is_dir && (self.write || self.append) {
            return Err(Error::IsDir(p.display().to_string()));
        }
        if self.write {
            core.check_writable()?;
        }
        if self.truncate && f.handle.inode.file()?.size() > 0 {
            f.set_len(0)?;
        }
        Ok(f)
    }
}
