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
//! kernel enforces them (the FUSE adapter asks for `FUSE_POSIX_ACL`). Every
//! other `system.` name is refused with `EOPNOTSUPP`.

use crate::acl::{self, Acl};
use crate::core::FsCore;
use crate::error::{Error, Result};
use crate::inode::Inode;
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

/// How [`crate::Fs::setxattr`] treats an existing or missing attribute (`setxattr(2)`
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
    if keep {
        change(core, inode, name, Some(value), how)?;
    } else if inode.xattrs.lock().map.contains_key(name) {
        change(core, inode, name, None, XattrSet::Replace)?;
    }
    if let (Some(a), true) = (&parsed, name == acl::ACCESS) {
        let mode = inode.attrs.lock().mode;
        let next = (mode & !0o777) | a.mode_bits();
        if next != mode {
            let change = crate::file::AttrChange {
                mode: Some(next),
                ..Default::default()
            };
            crate::file::set_attrs(core, inode, &change)?;
        }
    }
    Ok(())
}

/// After a `chmod` to `mode`: the access list's owner, mask (or group)
/// and other entries take its bits.
pub(crate) fn chmod_acl(core: &FsCore, inode: &Inode, mode: u32) -> Result<()> {
    let Some(value) = inode.xattrs.lock().map.get(acl::ACCESS).cloned() else {
        return Ok(());
    };
    let Some(mut a) = Acl::parse(&value)? else {
        return Ok(());
    };
    a.chmod(mode);
    change(core, inode, acl::ACCESS, Some(&a.encode()), XattrSet::Any)
}

/// What a new inode asked for with `mode` under directory `dir` inherits:
/// its access list and mode (`None` when `dir` has no default list).
pub(crate) fn inherited(dir: &Inode, mode: u32) -> Option<(Acl, u32)> {
    let value = dir.xattrs.lock().map.get(acl::DEFAULT).cloned()?;
    Acl::parse(&value).ok()?.map(|d| d.inherit(mode))
}

/// Store what [`inherited`] gave `child` (created in `dir`): its access
/// list unless the mode says all of it, and for a directory the default
/// list too.
pub(crate) fn inherit(core: &FsCore, dir: &Inode, child: &Inode, access: &Acl) -> Result<()> {
    if !access.is_minimal() {
        change(
            core,
            child,
            acl::ACCESS,
            Some(&access.encode()),
            XattrSet::Any,
        )?;
    }
    let default = dir.xattrs.lock().map.get(acl::DEFAULT).cloned();
    if let (FileKind::Dir, Some(d)) = (child.kind, default) {
        change(core, child, acl::DEFAULT, Some(&d), XattrSet::Any)?;
    }
    Ok(())
}

/// Remove `name`.
pub(crate) fn remove(core: &FsCore, inode: &Inode, name: &[u8]) -> Result<()> {
    check_name(name)?;
    change(core, inode, name, None, XattrSet::Replace)
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
        let seq = x.seq + 1;
        let entry = Entry::Xattr {
            seq,
            ctime_ns: now,
            name: name.to_vec(),
            value: value.map(<[u8]>::to_vec),
        };
        inode
            .log
            .append(core, inode.log.home_sublog(), &[(entry, 1)], 0)?;
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
