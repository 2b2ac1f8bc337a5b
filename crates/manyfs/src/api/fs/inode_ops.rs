//! The low-level API implemented for [`Fs`]: calls by inode number and
//! (parent, name), as the kernel's FUSE protocol asks them (see
//! [`crate::lowlevel`]).

use super::Fs;
use crate::api::lowlevel::{InodeOps, Sealed};
use crate::api::metadata::metadata_of;
use crate::api::to_ns;
use crate::api::{DirEntry, File, Metadata, Rename, SetAttr, check_symlink_target, path_bytes};
use crate::error::{Error, Result};
use crate::file::{self, AttrChange};
use crate::layout::*;
use crate::namespace::{self, NewNode};
use crate::xattr::{self, XattrSet};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

impl Sealed for Fs {}

impl InodeOps for Fs {
    fn lookup(&self, parent: u64, name: &OsStr) -> Result<Metadata> {
        let dir = self.core.get(parent)?;
        let child = namespace::lookup(&self.core, &dir, name.as_bytes())?;
        Ok(metadata_of(&child))
    }

    fn stat(&self, ino: u64) -> Result<Metadata> {
        let i = self.core.get(ino)?;
        Ok(metadata_of(&i))
    }

    fn mknod(
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
        make(self, parent, name, node, mode & 0o7777, uid, gid)
    }

    fn symlink_at(
        &self,
        parent: u64,
        name: &OsStr,
        target: &Path,
        uid: u32,
        gid: u32,
    ) -> Result<Metadata> {
        let t = path_bytes(target);
        check_symlink_target(t)?;
        make(self, parent, name, NewNode::Symlink(t), 0o777, uid, gid)
    }

    fn link_at(&self, ino: u64, new_parent: u64, new_name: &OsStr) -> Result<Metadata> {
        let inode = self.core.get(ino)?;
        let dir = self.core.get(new_parent)?;
        namespace::link(&self.core, &inode, &dir, new_name.as_bytes())?;
        Ok(metadata_of(&inode))
    }

    fn unlink_at(&self, parent: u64, name: &OsStr) -> Result<()> {
        let dir = self.core.get(parent)?;
        namespace::remove(&self.core, &dir, name.as_bytes(), false, None)
    }

    fn rmdir_at(&self, parent: u64, name: &OsStr) -> Result<()> {
        let dir = self.core.get(parent)?;
        namespace::remove(&self.core, &dir, name.as_bytes(), true, None)
    }

    fn rename_at(
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

    fn readlink_ino(&self, ino: u64) -> Result<PathBuf> {
        let inode = self.core.get(ino)?;
        let _pin = crate::core::PinGuard::new(&self.core, &inode)?;
        Ok(PathBuf::from(OsString::from_vec(namespace::read_link(
            &self.core, &inode,
        )?)))
    }

    fn readdir_ino(&self, ino: u64) -> Result<Vec<DirEntry>> {
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

    fn setattr(&self, ino: u64, attr: &SetAttr) -> Result<Metadata> {
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
        Ok(metadata_of(&inode))
    }

    fn open_ino(&self, ino: u64, read: bool, write: bool) -> Result<File> {
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

    fn getxattr(&self, ino: u64, name: &OsStr) -> Result<Vec<u8>> {
        xattr::get(&*self.core.get(ino)?, name.as_bytes())
    }

    fn setxattr(&self, ino: u64, name: &OsStr, value: &[u8], how: XattrSet) -> Result<()> {
        let inode = self.core.get(ino)?;
        xattr::set(&self.core, &inode, name.as_bytes(), value, how)
    }

    fn listxattr(&self, ino: u64) -> Result<Vec<OsString>> {
        let inode = self.core.get(ino)?;
        Ok(xattr::list(&inode)
            .into_iter()
            .map(OsString::from_vec)
            .collect())
    }

    fn removexattr(&self, ino: u64, name: &OsStr) -> Result<()> {
        let inode = self.core.get(ino)?;
        xattr::remove(&self.core, &inode, name.as_bytes())
    }
}

fn make(
    fs: &Fs,
    parent: u64,
    name: &OsStr,
    node: NewNode<'_>,
    mode: u32,
    uid: u32,
    gid: u32,
) -> Result<Metadata> {
    let dir = fs.core.get(parent)?;
    // A directory's default ACL decides the new inode's mode (the
    // umask does not apply then) and becomes its access ACL.
    let (mode, xattrs) = match node {
        NewNode::Symlink(_) => None,
        _ if !fs.core.opts.inherit_acls => None,
        _ => crate::xattr::inherited(&dir, node.kind(), mode),
    }
    .unwrap_or((mode, Vec::new()));
    let i = namespace::create_with_xattrs(
        &fs.core,
        &dir,
        name.as_bytes(),
        node,
        (mode, uid, gid),
        &xattrs,
    )?;
    Ok(metadata_of(&i))
}
