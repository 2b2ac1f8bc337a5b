//! Extended attributes: names in the `user.`, `trusted.` and `security.`
//! namespaces with byte-string values, kept in the inode's log.
//!
//! Each change is one `Xattr` log entry (the name, the new value or a
//! removal, and the inode's new ctime) appended to the inode's log like an
//! attribute change, so it has the same crash guarantees: atomic, durable
//! when it returns in `pm` mode and after the next sync in `file` mode.
//! Recovery keeps, per name, the entry with the highest per-inode sequence;
//! log compaction rewrites the live attributes into the new log.
//!
//! Limits (ext4 keeps all of an inode's attributes in one 4 KiB block; a
//! manyfs attribute is one log entry of at most a log page):
//! - a name is 1 to 255 bytes, prefix included (`ERANGE` above, as Linux);
//! - a value is at most [`XATTR_VALUE_MAX`] bytes (`ENOSPC` above, as
//!   ext4 answers a value that does not fit its block);
//! - names and values of one inode add up to at most [`XATTR_INODE_MAX`]
//!   bytes (`ENOSPC`).
//!
//! POSIX ACLs are the attributes `system.posix_acl_access` and
//! `system.posix_acl_default` (directories only), kept in step with the
//! mode as Linux file systems do ([`crate::acl`]): setting an access list
//! sets the mode's permission bits from it (a list the mode says all of is
//! not stored), `chmod` rewrites the list's owner, mask and other entries,
//! and a new inode under a directory with a default list inherits it. The
//! kernel enforces them (the FUSE adapter asks for `FUSE_POSIX_ACL`), so a
//! mode and the access list it shows never reach the log apart: setfacl
//! and chmod log the attribute entry and the `Xattr` entry as one atomic
//! group, and a new inode's inherited lists are in its log before the
//! entry that names it. Every other `system.` name is refused with
//! `EOPNOTSUPP`.

use crate::acl::{self, Acl};
use crate::core::FsCore;
use crate::error::{Error, Result};
use crate::file::{AttrChange, XattrEdit};
use crate::inode::{Inode, Xattrs};
use crate::layout::*;

/// Longest extended-attribute name, namespace prefix included.
pub const XATTR_NAME_MAX: usize = 255;
/// Largest value of one extended attribute (3.5 KiB: with the longest
/// name it fits one log entry).
pub const XATTR_VALUE_MAX: usize = 3584;
/// Largest total of names and values of one inode's extended attributes.
pub const XATTR_INODE_MAX: usize = 64 << 10;

const _: () = assert!(XATTR_NAME_MAX + XATTR_VALUE_MAX <= MAX_XATTR_PAYLOAD);

/// Namespaces accepted, by prefix.
const NAMESPACES: [&[u8]; 3] = [b"user.", b"trusted.", b"security."];

/// How [`crate::lowlevel::InodeOps::setxattr`] treats an existing or missing attribute (`setxattr(2)`
/// flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XattrSet {
    /// Create or replace.
    #[default]
    Any,
    /// Fail with `EEXIST` if the attribute exists (`XATTR_CREATE`).
    Create,
    /// Fail with `ENODATA` if it does not (`XATTR_REPLACE`).
    Replace,
}

fn show(name: &[u8]) -> String {
    String::from_utf8_lossy(name).into_owned()
}

/// Check a name: its length and namespace.
pub(crate) fn check_name(name: &[u8]) -> Result<()> {
    if name.len() > XATTR_NAME_MAX {
        return Err(Error::OutOfRange(format!(
            "extended attribute name of {} bytes (at most {XATTR_NAME_MAX})",
            name.len()
        )));
    }
    if name.contains(&0) {
        return Err(Error::InvalidArgument(format!(
            "extended attribute name {:?} contains NUL",
            show(name)
        )));
    }
    if name == acl::ACCESS || name == acl::DEFAULT {
        return Ok(());
    }
    match NAMESPACES.iter().find(|p| name.starts_with(p)) {
        Some(p) if name.len() > p.len() => Ok(()),
        Some(_) => Err(Error::InvalidArgument(format!(
            "extended attribute name {:?} has nothing after its namespace",
            show(name)
        ))),
        None => Err(Error::NotSupported(format!(
            "extended attribute {:?}: only the user., trusted. and security. namespaces are supported",
            show(name)
        ))),
    }
}

/// `user.` attributes exist only on regular files and directories (as in
/// Linux, where their permission is the file's).
fn user_allowed(inode: &Inode, name: &[u8]) -> bool {
    !name.starts_with(b"user.") || matches!(inode.kind, FileKind::File | FileKind::Dir)
}

/// The value of `name`.
pub(crate) fn get(inode: &Inode, name: &[u8]) -> Result<Vec<u8>> {
    check_name(name)?;
    inode
        .xattrs
        .lock()
        .map
        .get(name)
        .cloned()
        .ok_or_else(|| Error::NoData(format!("inode {}: {}", inode.ino, show(name))))
}

/// Every name, sorted.
pub(crate) fn list(inode: &Inode) -> Vec<Vec<u8>> {
    inode.xattrs.lock().map.keys().cloned().collect()
}

/// Set `name` to `value`.
pub(crate) fn set(
    core: &FsCore,
    inode: &Inode,
    name: &[u8],
    value: &[u8],
    how: XattrSet,
) -> Result<()> {
    check_name(name)?;
    if value.len() > XATTR_VALUE_MAX {
        return Err(Error::NoSpace(
            "extended attribute value larger than 3584 bytes",
        ));
    }
    if !user_allowed(inode, name) {
        return Err(Error::NotPermitted(format!(
            "inode {}: user. attributes only on regular files and directories",
            inode.ino
        )));
    }
    if name == acl::ACCESS || name == acl::DEFAULT {
        return set_acl(core, inode, name, value, how);
    }
    change(core, inode, name, Some(value), how)
}

/// Set (or, with a header-only value, remove) a POSIX ACL. An access list
/// sets the mode's permission bits; one the mode says all of is not kept.
fn set_acl(core: &FsCore, inode: &Inode, name: &[u8], value: &[u8], how: XattrSet) -> Result<()> {
    if name == acl::DEFAULT && inode.kind != FileKind::Dir {
        return Err(Error::NotPermitted(format!(
            "inode {}: default ACLs only on directories",
            inode.ino
        )));
    }
    let parsed = Acl::parse(value)?;
    let keep = parsed
        .as_ref()
        .is_some_and(|a| name == acl::DEFAULT || !a.is_minimal());
    if name == acl::DEFAULT {
        // A default list says nothing about the mode: one entry.
        if keep {
            return change(core, inode, name, Some(value), how);
        }
        if inode.xattrs.lock().map.contains_key(name) {
            return change(core, inode, name, None, XattrSet::Replace);
        }
        return Ok(());
    }
    // The access list and the mode bits it sets are one atomic group: a
    // crash between two entries would leave a list the mode disagrees with.
    let _pin = crate::core::PinGuard::new(core, inode)?;
    crate::file::set_attrs_and_xattr(core, inode, |attrs, x| {
        let edit = if keep {
            check_change(inode, x, name, Some(value), how)?;
            Some(XattrEdit {
                name: name.to_vec(),
                value: Some(value.to_vec()),
            })
        } else {
            x.map.contains_key(name).then(|| XattrEdit {
                name: name.to_vec(),
                value: None,
            })
        };
        let mode = parsed
            .as_ref()
            .map(|a| (attrs.mode & !0o777) | a.mode_bits())
            .filter(|&m| m != attrs.mode)
            .map(|m| AttrChange {
                mode: Some(m),
                ..Default::default()
            });
        Ok((mode, edit))
    })?;
    if inode.dir.is_some() {
        crate::namespace::maybe_compact_dir_attrs(core, inode);
    }
    Ok(())
}

/// chmod, chown, utimes: log `attr` and, when it sets the mode of an
/// inode with an access list, the list's owner, mask (or owning group)
/// and other entries taking the new bits, as one atomic group (a crash
/// between two entries would leave the new mode with the old list, which
/// the kernel enforces: access `ls -l` shows closed would stay open).
pub(crate) fn set_attrs(core: &FsCore, inode: &Inode, attr: &AttrChange) -> Result<()> {
    if core.mode_and_acl_apart() {
        // Planted bug (test builds only): the attributes, then the list,
        // as two groups.
        crate::file::set_attrs_and_xattr(core, inode, |_, _| Ok((Some(attr.clone()), None)))?;
        return crate::file::set_attrs_and_xattr(core, inode, |_, x| {
            let edit = match attr.mode {
                Some(mode) => chmod_acl(x, mode)?,
                None => None,
            };
            Ok((None, edit))
        });
    }
    crate::file::set_attrs_and_xattr(core, inode, |_, x| {
        let edit = match attr.mode {
            Some(mode) => chmod_acl(x, mode)?,
            None => None,
        };
        Ok((Some(attr.clone()), edit))
    })
}

/// The access list after a `chmod` to `mode` (`None`: there is none, or
/// it already agrees).
fn chmod_acl(x: &Xattrs, mode: u32) -> Result<Option<XattrEdit>> {
    let Some(value) = x.map.get(acl::ACCESS) else {
        return Ok(None);
    };
    let Some(mut a) = Acl::parse(value)? else {
        return Ok(None);
    };
    a.chmod(mode);
    let next = a.encode();
    Ok((next != *value).then(|| XattrEdit {
        name: acl::ACCESS.to_vec(),
        value: Some(next),
    }))
}

/// The (name, value) pairs a new inode starts with.
pub(crate) type Initial = Vec<(Vec<u8>, Vec<u8>)>;

/// What a new inode of `kind` asked for with `mode` under directory `dir`
/// inherits (`None` when `dir` has no default list): its mode, and the
/// attributes it starts with: its access list unless the mode says all of
/// it, and for a directory the default list too.
pub(crate) fn inherited(dir: &Inode, kind: FileKind, mode: u32) -> Option<(u32, Initial)> {
    let default = dir.xattrs.lock().map.get(acl::DEFAULT).cloned()?;
    let (access, mode) = Acl::parse(&default).ok()??.inherit(mode);
    let mut xattrs = Vec::new();
    if !access.is_minimal() {
        xattrs.push((acl::ACCESS.to_vec(), access.encode()));
    }
    if kind == FileKind::Dir {
        xattrs.push((acl::DEFAULT.to_vec(), default));
    }
    Some((mode, xattrs))
}

/// Remove `name`.
pub(crate) fn remove(core: &FsCore, inode: &Inode, name: &[u8]) -> Result<()> {
    check_name(name)?;
    change(core, inode, name, None, XattrSet::Replace)
}

/// Whether `name` may become `value` (`None`: be removed) as `how` asks,
/// with the inode's attributes `x`: `EEXIST`, `ENODATA`, or `ENOSPC` past
/// [`XATTR_INODE_MAX`].
fn check_change(
    inode: &Inode,
    x: &Xattrs,
    name: &[u8],
    value: Option<&[u8]>,
    how: XattrSet,
) -> Result<()> {
    let old = x.map.get(name);
    match (how, old) {
        (XattrSet::Create, Some(_)) => {
            return Err(Error::Exists(format!(
                "inode {}: {}",
                inode.ino,
                show(name)
            )));
        }
        (XattrSet::Replace, None) => {
            return Err(Error::NoData(format!(
                "inode {}: {}",
                inode.ino,
                show(name)
            )));
        }
        _ => {}
    }
    if let Some(v) = value {
        let old_len = old.map_or(0, |o| name.len() + o.len());
        if x.bytes() - old_len + name.len() + v.len() > XATTR_INODE_MAX {
            return Err(Error::NoSpace(
                "extended attributes of one inode exceed 64 KiB",
            ));
        }
    }
    Ok(())
}

fn change(
    core: &FsCore,
    inode: &Inode,
    name: &[u8],
    value: Option<&[u8]>,
    how: XattrSet,
) -> Result<()> {
    core.check_writable()?;
    let _pin = crate::core::PinGuard::new(core, inode)?;
    let now = crate::time::now_ns();
    {
        let mut x = inode.xattrs.lock();
        check_change(inode, &x, name, value, how)?;
        let seq = x.seq + 1;
        let entry = Entry::Xattr {
            seq,
            ctime_ns: now,
            name: name.to_vec(),
            value: value.map(<[u8]>::to_vec),
        };
        inode
            .log
            .append(core, inode.log.attr_sublog(), &[(entry, 1)], 0)?;
        inode
            .attr_entries
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        x.seq = seq;
        match value {
            Some(v) => x.map.insert(name.to_vec(), v.to_vec()),
            None => x.map.remove(name),
        };
    }
    {
        let mut a = inode.attrs.lock();
        a.ctime_ns = a.ctime_ns.max(now);
    }
    // Superseded entries stay until the log is rewritten: compact once
    // they dominate, as for attribute changes.
    if inode.dir.is_some() {
        crate::namespace::maybe_compact_dir_attrs(core, inode);
    } else {
        crate::file::maybe_compact(core, inode);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in [&b"user.a"[..], b"trusted.x", b"security.selinux"] {
            check_name(ok).unwrap();
        }
        let errno = |n: &[u8]| check_name(n).unwrap_err().errno();
        assert_eq!(errno(b"user."), libc::EINVAL);
        assert_eq!(errno(b"system.other"), libc::EOPNOTSUPP);
        check_name(b"system.posix_acl_access").unwrap();
        check_name(b"system.posix_acl_default").unwrap();
        assert_eq!(errno(b"os2.x"), libc::EOPNOTSUPP);
        assert_eq!(errno(&[b'u'; 256]), libc::ERANGE);
        let mut long = b"user.".to_vec();
        long.resize(255, b'n');
        check_name(&long).unwrap();
    }
}
