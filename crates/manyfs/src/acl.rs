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
const UNDEFINED_ID: u32 = u32::MAX;

/// What an entry is about, in the order entries are sorted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u16)]
enum Tag {
    /// The owner.
    UserObj = 0x01,
    /// A named user.
    User = 0x02,
    /// The owning group.
    GroupObj = 0x04,
    /// A named group.
    Group = 0x08,
    /// The most the named entries and the owning group may have.
    Mask = 0x10,
    /// Everyone else.
    Other = 0x20,
}

impl Tag {
    fn from_code(c: u16) -> Option<Tag> {
        [
            Tag::UserObj,
            Tag::User,
            Tag::GroupObj,
            Tag::Group,
            Tag::Mask,
            Tag::Other,
        ]
        .into_iter()
        .find(|t| *t as u16 == c)
    }

    /// Whether entries of this tag name a user or group by id.
    fn named(self) -> bool {
        matches!(self, Tag::User | Tag::Group)
    }
}

/// One entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct AclEntry {
    tag: Tag,
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
        if b.len() < 4 || !(b.len() - 4).is_multiple_of(8) {
            return Err(bad("not a version-2 list of 8-byte entries"));
        }
        if u32::from_le_bytes(b[..4].try_into().expect("4 bytes")) != VERSION {
            return Err(bad("unknown version"));
        }
        let entries = b[4..]
            .chunks_exact(8)
            .map(|c| {
                Ok(AclEntry {
                    tag: Tag::from_code(u16::from_le_bytes([c[0], c[1]]))
                        .ok_or_else(|| bad("unknown tag"))?,
                    perm: u16::from_le_bytes([c[2], c[3]]),
                    id: u32::from_le_bytes([c[4], c[5], c[6], c[7]]),
                })
            })
            .collect::<Result<Vec<AclEntry>>>()?;
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
        let mut prev: Option<(Tag, u32)> = None;
        let count = |t| self.0.iter().filter(|e| e.tag == t).count();
        for e in &self.0 {
            if e.perm & !7 != 0 {
                return Err(bad("permission bits beyond rwx"));
            }
            let id = if e.tag.named() { e.id } else { 0 };
            if prev.is_some_and(|p| p >= (e.tag, id)) {
                return Err(bad("entries not sorted, or one given twice"));
            }
            prev = Some((e.tag, id));
        }
        let named = count(Tag::User) + count(Tag::Group);
        if count(Tag::UserObj) != 1 || count(Tag::GroupObj) != 1 || count(Tag::Other) != 1 {
            return Err(bad("needs exactly one owner, owning group and other entry"));
        }
        if named > 0 && count(Tag::Mask) != 1 {
            return Err(bad("named entries need a mask"));
        }
        Ok(())
    }

    /// The attribute value.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = VERSION.to_le_bytes().to_vec();
        for e in &self.0 {
            b.extend_from_slice(&(e.tag as u16).to_le_bytes());
            b.extend_from_slice(&e.perm.to_le_bytes());
            let id = if e.tag.named() { e.id } else { UNDEFINED_ID };
            b.extend_from_slice(&id.to_le_bytes());
        }
        b
    }

    fn perm(&self, tag: Tag) -> Option<u32> {
        self.0
            .iter()
            .find(|e| e.tag == tag)
            .map(|e| u32::from(e.perm))
    }

    /// The permission bits (`0o777`) the list shows in the mode: the
    /// owner's, the mask's (the owning group's without a mask), other's.
    pub fn mode_bits(&self) -> u32 {
        let group = self.perm(Tag::Mask).or(self.perm(Tag::GroupObj));
        let (user, other) = (self.perm(Tag::UserObj), self.perm(Tag::Other));
        (user.unwrap_or(0) << 6) | (group.unwrap_or(0) << 3) | other.unwrap_or(0)
    }

    /// Whether the mode bits say all of it (owner, owning group and other
    /// entries only): then no list is stored.
    pub fn is_minimal(&self) -> bool {
        self.0.len() == 3
    }

    /// Apply `f(entry's permission bits, the mode's bits for its class)` to
    /// the entries the mode shows: the owner, the mask (the owning group
    /// without one) and other.
    fn with_mode(&mut self, mode: u32, f: impl Fn(u16, u16) -> u16) {
        let has_mask = self.perm(Tag::Mask).is_some();
        for e in &mut self.0 {
            let shift = match e.tag {
                Tag::UserObj => 6,
                Tag::Mask => 3,
                Tag::GroupObj if !has_mask => 3,
                Tag::Other => 0,
                _ => continue,
            };
            e.perm = f(e.perm, ((mode >> shift) & 7) as u16);
        }
    }

    /// `chmod`: the owner, mask (or owning group) and other entries take
    /// the new mode's bits.
    pub fn chmod(&mut self, mode: u32) {
        self.with_mode(mode, |_, bits| bits);
    }

    /// A new inode under a directory whose default list is `self`, asked
    /// for with `mode` (`posix_acl_create_masq`; the umask does not apply):
    /// its access list and its mode.
    pub fn inherit(&self, mode: u32) -> (Acl, u32) {
        let mut acl = self.clone();
        acl.with_mode(mode, |perm, bits| perm & bits);
        let mode = (mode & !0o777) | acl.mode_bits();
        (acl, mode)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use Tag::*;

    fn acl(entries: &[(Tag, u16, u32)]) -> Vec<u8> {
        Acl(entries
            .iter()
            .map(|&(tag, perm, id)| AclEntry { tag, perm, id })
            .collect())
        .encode()
    }

    #[test]
    fn parse_check_and_mode() {
        let full = acl(&[
            (UserObj, 6, 0),
            (User, 7, 1000),
            (GroupObj, 4, 0),
            (Mask, 5, 0),
            (Other, 0, 0),
        ]);
        let a = Acl::parse(&full).unwrap().unwrap();
        assert_eq!(a.encode(), full);
        assert_eq!(a.mode_bits(), 0o650);
        assert!(!a.is_minimal());
        let mut c = a.clone();
        c.chmod(0o4741);
        assert_eq!(c.mode_bits(), 0o741);
        assert_eq!(c.perm(GroupObj), Some(4), "the mask moves, not the group");
        let (child, mode) = a.inherit(0o100666);
        assert_eq!(mode, 0o100640);
        assert_eq!(
            child.perm(User),
            Some(7),
            "named entries are kept (the mask limits them)"
        );
        let min = acl(&[(UserObj, 7, 0), (GroupObj, 5, 0), (Other, 1, 0)]);
        let m = Acl::parse(&min).unwrap().unwrap();
        assert!(m.is_minimal());
        assert_eq!(m.mode_bits(), 0o751);
        assert_eq!(Acl::parse(&VERSION.to_le_bytes()).unwrap(), None);
        for bad in [
            acl(&[(UserObj, 7, 0), (Other, 1, 0)]),
            acl(&[
                (UserObj, 7, 0),
                (User, 7, 5),
                (GroupObj, 5, 0),
                (Other, 1, 0),
            ]),
            acl(&[(GroupObj, 5, 0), (UserObj, 7, 0), (Other, 1, 0)]),
            acl(&[(UserObj, 9, 0), (GroupObj, 5, 0), (Other, 1, 0)]),
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
