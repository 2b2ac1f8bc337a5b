//! [`OpenOptions`]: how [`Fs::open`] opens a file, as `std::fs::OpenOptions`.

use super::Fs;
use crate::api::File;
use crate::api::path_bytes;
use crate::error::{Error, Result};
use crate::inode::Inode;
use crate::layout::*;
use crate::namespace::{self, NewNode};
use std::path::Path;
use std::sync::Arc;

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
                    if core.opts.symlinks_leave_pool && target.first() == Some(&b'/') {
                        return Err(Error::LeavesPool { rest: target });
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
        if self.truncate && f.inode().file()?.size() > 0 {
            f.set_len(0)?;
        }
        Ok(f)
    }
}
