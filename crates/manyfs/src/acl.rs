//! POSIX access control lists in their extended-attribute form
//! (`system.posix_acl_access`, `system.posix_acl_default`), and the rules
//! that tie them to the mode bits: what `setfacl` does to the mode, what
//! `chmod` does to the list, and what a new inode inherits from its
//! directory's default list (as Linux's `posix_acl_*` helpers).
//!
//! Format: a 4-byte version (2), then 8-byte entries: tag (u16), permission
//! bits (u16), id (u32; unused for the owner, owning group, mask and other
//! entries), little-endian, sorted by tag and then id.

use crate::error::{Error, Result};

/// The access list's attribute name.
pub const ACCESS: &[u8] = b"system.posix_acl_access";
/// A directory's default list's attribute name.
pub const DEFAULT: &[u8] = b"system.posix_acl_default";

const VERSION: u32 = 2;
const USER_OBJ: u16 = 0x01;
const USER: u16 = 0x02;
const GROUP_OBJ: u16 = 0x04;
const GROUP: u16 = 0x08;
const MASK: u16 = 0x10;
const OTHER: u16 = 0x20;
const UNDEFINED_ID: u32 = u32::MAX;

/// One entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct AclEntry {
    tag: u16,
    perm: u16,
    id: u32,
}

/// A valid access control list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acl(Vec<AclEntry>);

fn bad(why: &str) -> Error {
    Error::InvalidArgument(format!("POSIX ACL: {why}"))
}

impl Acl {
    /// Parse and check an attribute value (`None`: a header alone, which
    /// removes the list).
    pub fn parse(b: &[u8]) -> Result<Option<Acl>> {
        if b.len() < 4 || (b.len() - 4) % 8 != 0 {
            return Err(bad("not a version-2 list of 8-byte entries"));
        }
        if u32::from_le_bytes(b[..4].try_into().expect("4 bytes")) != VERSION {
            return Err(bad("unknown version"));
        }
        let entries: Vec<AclEntry> = b[4..]
            .chunks_exact(8)
            .map(|c| AclEntry {
                tag: u16::from_le_bytes([c[0], c[1]]),
                perm: u16::from_le_bytes([c[2], c[3]]),
                id: u32::from_le_bytes([c[4], c[5], c[6], c[7]]),
            })
            .collect();
        if entries.is_empty() {
            return Ok(None);
        }
        let acl = Acl(entries);
        acl.check()?;
        Ok(Some(acl))
    }

    /// What `posix_acl_valid` checks: one owner, owning group and other
    /// entry; a mask when there are named entries; sorted, no id twice.
    fn check(&self) -> Result<()> {
        let mut prev: Option<(u16, u32)> = None;
        let count = |t| self.0.iter().filter(|e| e.tag == t).count();
        for e in &self.0 {
            if e.perm & !7 != 0 {
                return Err(bad("permission bits beyond rwx"));
            }
            let id = match e.tag {
                USER | GROUP => e.id,
                USER_OBJ | GROUP_OBJ | MASK | OTHER => 0,
                _ => return Err(bad("unknown tag")),
            };
            if prev.is_some_and(|p| p >= (e.tag, id)) {
                return Err(bad("entries not sorted, or one given twice"));
            }
            prev = Some((e.tag, id));
        }
        let named = count(USER) + count(GROUP);
        if count(USER_OBJ) != 1 || count(GROUP_OBJ) != 1 || count(OTHER) != 1 {
            return Err(bad("needs exactly one owner, owning group and other entry"));
        }
        if named > 0 && count(MASK) != 1 {
            return Err(bad("named entries need a mask"));
        }
        Ok(())
    }

    /// The attribute value.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = VERSION.to_le_bytes().to_vec();
        for e in &self.0 {
            b.extend_from_slice(&e.tag.to_le_bytes());
            b.extend_from_slice(&e.perm.to_le_bytes());
            let id = if matches!(e.tag, USER | GROUP) {
                e.id
            } else {
                UNDEFINED_ID
            };
            b.extend_from_slice(&id.to_le_bytes());
        }
        b
    }

    fn perm(&self, tag: u16) -> Option<u32> {
        self.0
            .iter()
            .find(|e| e.tag == tag)
            .map(|e| u32::from(e.perm))
    }

    /// The permission bits (`0o777`) the list shows in the mode: the
    /// owner's, the mask's (the owning group's without a mask), other's.
    pub fn mode_bits(&self) -> u32 {
        let group = self.perm(MASK).or(self.perm(GROUP_OBJ)).unwrap_or(0);
        (self.perm(USER_OBJ).unwrap_or(0) << 6) | (group << 3) | self.perm(OTHER).unwrap_or(0)
    }

    /// Whether the mode bits say all of it (owner, owning group and other
    /// entries only): then no list is stored.
    pub fn is_minimal(&self) -> bool {
        self.0.len() == 3
    }

    /// `chmod`: the owner, mask (or owning group) and other entries take
    /// the new mode's bits.
    pub fn chmod(&mut self, mode: u32) {
        let has_mask = self.perm(MASK).is_some();
        for e in &mut self.0 {
            let shift = match e.tag {
                USER_OBJ => 6,
                MASK => 3,
                GROUP_OBJ if !has_mask => 3,
                OTHER => 0,
                _ => continue,
            };
            e.perm = ((mode >> shift) & 7) as u16;
        }
    }

    /// A new inode under a directory whose default list is `self`, asked
    /// for with `mode` (`posix_acl_create_masq`; the umask does not apply):
    /// its access list and its mode.
    pub fn inherit(&self, mode: u32) -> (Acl, u32) {
        let mut acl = self.clone();
        let has_mask = acl.perm(MASK).is_some();
        for e in &mut acl.0 {
            let shift = match e.tag {
                USER_OBJ => 6,
                MASK => 3,
                GROUP_OBJ if !has_mask => 3,
                OTHER => 0,
                _ => continue,
            };
            e.perm &= ((mode >> shift) & 7) as u16;
        }
        let mode = (mode & !0o777) | acl.mode_bits();
        (acl, mode)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(entries: &[(u16, u16, u32)]) -> Vec<u8> {
        Acl(entries
            .iter()
            .map(|&(tag, perm, id)| AclEntry { tag, perm, id })
            .collect())
        .encode()
    }

    #[test]
    fn parse_check_and_mode() {
        let full = acl(&[
            (USER_OBJ, 6, 0),
            (USER, 7, 1000),
            (GROUP_OBJ, 4, 0),
            (MASK, 5, 0),
            (OTHER, 0, 0),
        ]);
        let a = Acl::parse(&full).unwrap().unwrap();
        assert_eq!(a.encode(), full);
        assert_eq!(a.mode_bits(), 0o650);
        assert!(!a.is_minimal());
        let mut c = a.clone();
        c.chmod(0o4741);
        assert_eq!(c.mode_bits(), 0o741);
        assert_eq!(c.perm(GROUP_OBJ), Some(4), "the mask moves, not the group");
        let (child, mode) = a.inherit(0o100666);
        assert_eq!(mode, 0o100640);
        assert_eq!(
            child.perm(USER),
            Some(7),
            "named entries are kept (the mask limits them)"
        );
        let min = acl(&[(USER_OBJ, 7, 0), (GROUP_OBJ, 5, 0), (OTHER, 1, 0)]);
        let m = Acl::parse(&min).unwrap().unwrap();
        assert!(m.is_minimal());
        assert_eq!(m.mode_bits(), 0o751);
        assert_eq!(Acl::parse(&VERSION.to_le_bytes()).unwrap(), None);
        for bad in [
            acl(&[(USER_OBJ, 7, 0), (OTHER, 1, 0)]),
            acl(&[
                (USER_OBJ, 7, 0),
                (USER, 7, 5),
                (GROUP_OBJ, 5, 0),
                (OTHER, 1, 0),
            ]),
            acl(&[(GROUP_OBJ, 5, 0), (USER_OBJ, 7, 0), (OTHER, 1, 0)]),
            acl(&[(USER_OBJ, 9, 0), (GROUP_OBJ, 5, 0), (OTHER, 1, 0)]),
            vec![1, 0, 0, 0],
            vec![2, 0, 0],
        ] {
            assert_eq!(
                Acl::parse(&bad).unwrap_err().errno(),
                libc::EINVAL,
                "{bad:?}"
            );
        }
    }
}
