//! The inode-level API: calls by inode number and (parent, name), as the
//! kernel's FUSE protocol asks them. The FUSE adapter (`manyfs-fuse`) is
//! built on these; programs linking manyfs normally use the path-level
//! calls of [`Fs`] instead.

use super::*;
use crate::error::{Error, Result};
use crate::file::{self, AttrChange};
use crate::layout::*;
use crate::namespace::{self, NewNode};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

impl Fs {
    /// Look `name` up in directory `parent`.
    pub fn lookup(&self, parent: u64, name: &OsStr) -> Result<Metadata> {
        let dir = self.core.get(parent)?;
        let child = namespace::lookup(&self.core, &dir, name.as_bytes())?;
        Ok(self.meta(&child))
    }

    /// Attributes of inode `ino`.
    pub fn stat(&self, ino: u64) -> Result<Metadata> {
        let i = self.core.get(ino)?;
        Ok(self.meta(&i))
    }

    /// Create `name` in directory `parent`, as `mknod(2)` does: the
    /// `S_IFMT` bits of `mode` say what (a regular file when they are 0, a
    /// directory, a FIFO, a socket, or a character or block device whose
    /// number is `rdev`), the low 12 bits are the permissions. Fails with
    /// `Exists` if the name is taken, `InvalidArgument` for a symlink or
    /// unknown type bits (symlinks: [`Fs::symlink_at`]).
    pub fn mknod(
        &self,
        parent: u64,
        name: &OsStr,
        mode: u32,
        rdev: u64,
        uid: u32,
        gid: u32,
    ) -> Result<Metadata> {
        let kind = match mode & 0o170000 {
            0 => FileKind::File,
            bits => FileKind::from_format_bits(bits)
                .filter(|k| *k != FileKind::Symlink)
                .ok_or_else(|| Error::InvalidArgument(format!("mknod of file type {bits:#o}")))?,
        };
        let node = match kind {
            FileKind::File => NewNode::File,
            FileKind::Dir => NewNode::Dir,
            k => NewNode::Special {
                kind: k,
                rdev: if matches!(k, FileKind::CharDevice | FileKind::BlockDevice) {
                    rdev
                } else {
                    0
                },
            },
        };
        self.make(parent, name, node, mode & 0o7777, uid, gid)
    }

    fn make(
        &self,
        parent: u64,
        name: &OsStr,
        node: NewNode<'_>,
        mode: u32,
        uid: u32,
        gid: u32,
    ) -> Result<Metadata> {
        let dir = self.core.get(parent)?;
        // A directory's default ACL decides the new inode's mode (the
        // umask does not apply then) and becomes its access ACL.
        let (mode, xattrs) = match node {
            NewNode::Symlink(_) => None,
            _ if !self.core.opts.inherit_acls => None,
            _ => crate::xattr::inherited(&dir, node.kind(), mode),
        }
        .unwrap_or((mode, Vec::new()));
        let i = namespace::create_with_xattrs(
            &self.core,
            &dir,
            name.as_bytes(),
            node,
            (mode, uid, gid),
            &xattrs,
        )?;
        Ok(self.meta(&i))
    }

    /// Create a symbolic link `name` -> `target`.
    pub fn symlink_at(
        &self,
        parent: u64,
        name: &OsStr,
        target: &Path,
        uid: u32,
        gid: u32,
    ) -> Result<Metadata> {
        let t = path_bytes(target);
        check_symlink_target(t)?;
        self.make(parent, name, NewNode::Symlink(t), 0o777, uid, gid)
    }

    /// Add the name `new_name` in `new_parent` for inode `ino`.
    pub fn link_at(&self, ino: u64, new_parent: u64, new_name: &OsStr) -> Result<Metadata> {
        let inode = self.core.get(ino)?;
        let dir = self.core.get(new_parent)?;
        namespace::link(&self.core, &inode, &dir, new_name.as_bytes())?;
        Ok(self.meta(&inode))
    }

    /// Remove a non-directory name.
    pub fn unlink_at(&self, parent: u64, name: &OsStr) -> Result<()> {
        let dir = self.core.get(parent)?;
        namespace::remove(&self.core, &dir, name.as_bytes(), false, None)
    }

    /// Remove an empty directory.
    pub fn rmdir_at(&self, parent: u64, name: &OsStr) -> Result<()> {
        let dir = self.core.get(parent)?;
        namespace::remove(&self.core, &dir, name.as_bytes(), true, None)
    }

    /// Rename `name` in `parent` to `new_name` in `new_parent`
    /// (`renameat2(2)`): replacing a compatible target, failing with
    /// `Exists` if there is one ([`Rename::NoReplace`]), or swapping the
    /// two names ([`Rename::Exchange`]; both must exist). Atomic, also
    /// across directories and after a crash.
    pub fn rename_at(
        &self,
        parent: u64,
        name: &OsStr,
        new_parent: u64,
        new_name: &OsStr,
        how: Rename,
    ) -> Result<()> {
        let src = self.core.get(parent)?;
        let dst = self.core.get(new_parent)?;
        let (from, to) = (name.as_bytes(), new_name.as_bytes());
        match how {
            Rename::Exchange => namespace::exchange(&self.core, (&src, from), (&dst, to), None),
            Rename::Replace | Rename::NoReplace => {
                let no_replace = how == Rename::NoReplace;
                namespace::rename(&self.core, &src, from, &dst, to, no_replace, None)
            }
        }
    }

    /// Target of symlink `ino`.
    pub fn readlink_ino(&self, ino: u64) -> Result<PathBuf> {
        let inode = self.core.get(ino)?;
        let _pin = crate::core::PinGuard::new(&self.core, &inode)?;
        Ok(PathBuf::from(OsString::from_vec(namespace::read_link(
            &self.core, &inode,
        )?)))
    }

    /// Entries of directory `ino` (without `.` and `..`), sorted by name.
    pub fn readdir_ino(&self, ino: u64) -> Result<Vec<DirEntry>> {
        let dir = self.core.get(ino)?;
        Ok(namespace::list(&dir)?
            .into_iter()
            .map(|(name, c)| DirEntry {
                name: OsString::from_vec(name),
                ino: c.ino,
                kind: c.kind,
            })
            .collect())
    }

    /// Change attributes (chmod, chown, truncate, utimes).
    pub fn setattr(&self, ino: u64, attr: &SetAttr) -> Result<Metadata> {
        let inode = self.core.get(ino)?;
        let _pin = crate::core::PinGuard::new(&self.core, &inode)?;
        if let Some(size) = attr.size {
            if inode.kind == FileKind::Dir {
                return Err(Error::IsDir(format!("inode {ino}")));
            }
            if inode.kind.is_special() {
                return Err(Error::InvalidArgument(format!(
                    "inode {ino} is a {:?}: it has no size to set",
                    inode.kind
                )));
            }
            file::set_len(&self.core, &inode, size)?;
        }
        let change = AttrChange {
            mode: attr.mode,
            uid: attr.uid,
            gid: attr.gid,
            atime_ns: attr.atime.map(to_ns),
            mtime_ns: attr.mtime.map(to_ns),
        };
        if change.mode.is_some()
            || change.uid.is_some()
            || change.gid.is_some()
            || change.atime_ns.is_some()
            || change.mtime_ns.is_some()
        {
            // With the access ACL the mode shows, in one atomic group.
            crate::xattr::set_attrs(&self.core, &inode, &change)?;
            if inode.dir.is_some() {
                namespace::maybe_compact_dir_attrs(&self.core, &inode);
            }
        }
        Ok(self.meta(&inode))
    }

    /// Open inode `ino` for reading and/or writing.
    pub fn open_ino(&self, ino: u64, read: bool, write: bool) -> Result<File> {
        let inode = self.core.get(ino)?;
        if inode.kind == FileKind::Dir && write {
            return Err(Error::IsDir(format!("inode {ino}")));
        }
        if inode.kind.is_special() {
            // The kernel serves FIFOs, sockets and devices itself.
            return Err(Error::InvalidArgument(format!(
                "inode {ino} is a {:?}: it has no content to open",
                inode.kind
            )));
        }
        if write {
            self.core.check_writable()?;
        }
        File::new(self.core.clone(), inode, read, write, false)
    }
}
