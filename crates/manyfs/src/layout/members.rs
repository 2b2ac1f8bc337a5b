//! Pools with several member files (one per NUMA node) behind one block
//! address space: the on-media records of the member table, the member
//! header and the spill record, and the paths members are recorded by.
//! Opening, creating and writing a pool's files is I/O and lives in
//! `crate::media::pool`.
//!
//! Member 0 is the pool file and holds blocks `[0, n0)`, member 1 blocks
//! `[n0, n0+n1)`, and so on. The member table lives in blocks 0 and 1 after
//! the superblock (both copies, written once at mkfs); a pool that has one
//! has format version 6 (4 before direct log words), or 7 with a data
//! device. Every member but 0 starts with a header block,
//! reserved (never allocated), that names the pool (uuid), the member's
//! index, node and size, so that a missing, swapped, resized or foreign
//! member is found before the pool is mapped.
//!
//! Member table, at byte [`MEMBER_TABLE_OFFSET`] of blocks 0 and 1:
//!
//! | off | size | field |
//! |----:|----:|---|
//! | 0 | 8 | magic `MFSMEMBS` |
//! | 8 | 4 | member count (member 0 included) |
//! | 12 | 4 | bytes of entries after the 24-byte head |
//! | 16 | 4 | crc32 of the head (this field zero) and the entries |
//! | 20 | 4 | zero |
//! | 24 | .. | entries, each: blocks u64, node u32, path length u16, kind u16 (0 a mapped member, 1 the data device), path bytes zero-padded to a multiple of 8 |
//!
//! Member 0's entry has an empty path (it is the pool file). A relative path
//! is relative to the pool file's directory.
//!
//! A tiered pool (format version 7) has one more entry, last, of kind 1:
//! its data device (`crate::tier`). It is not mapped: its blocks follow the
//! mapped members' (`Superblock::device_blocks` records how many), and its
//! first block holds a member header like any other member's, so that a
//! missing, foreign or short device is found at mount and fsck
//! ([`crate::Error::DataDevice`]).
//!
//! Member header, at the first byte of every member but 0:
//!
//! | off | size | field |
//! |----:|----:|---|
//! | 0 | 8 | magic `MFSMEMBR` |
//! | 8 | 4 | member index |
//! | 12 | 4 | node |
//! | 16 | 8 | the member's size in blocks (its header block included) |
//! | 24 | 8 | the member's first block in the pool |
//! | 32 | 16 | the pool's uuid |
//! | 48 | 12 | zero |
//! | 60 | 4 | crc32 of bytes 0..60 |
//!
//! Spill record, two copies per member: for member 0 at byte
//! [`POOL_SPILL_OFFSET`] of block 1 (written first) and of block 0 (between
//! the superblock and the member table); for every other mapped member at
//! bytes [`MEMBER_SPILL_OFFSET`] + 16 (written first) and
//! [`MEMBER_SPILL_OFFSET`] of its header block (after the header). Written
//! by a writable mount at every full sync and unmount when the count
//! changed; all zero (pools before the record, or a member whose node never
//! spilled) reads as 0.
//!
//! | off | size | field |
//! |----:|----:|---|
//! | 0 | 8 | blocks the member's node took from other nodes' members ([`crate::Stats::node_spills`]), summed over mounts |
//! | 8 | 4 | magic `SPIL` |
//! | 12 | 4 | crc32 of bytes 0..12 and the member index (u32) |

use super::*;
use crate::error::{Error, MemberProblem, Result};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// Byte offset of the member table in blocks 0 and 1 (after the superblock).
pub const MEMBER_TABLE_OFFSET: u64 = 128;
/// Magic of the member table.
pub const MEMBER_TABLE_MAGIC: [u8; 8] = *b"MFSMEMBS";
/// Magic of a member header.
pub const MEMBER_HEADER_MAGIC: [u8; 8] = *b"MFSMEMBR";
/// Encoded size of a member header.
pub const MEMBER_HEADER_LEN: usize = 64;
/// Byte offset of member 0's spill record in blocks 0 and 1: after the
/// superblock (at most 108 bytes), before the member table. Every pool
/// ever made has these bytes zero until a mount writes the record.
pub const POOL_SPILL_OFFSET: u64 = 112;
/// Byte offset of a member's spill record (primary copy) in its header
/// block, after the header; the second copy follows it.
pub const MEMBER_SPILL_OFFSET: u64 = MEMBER_HEADER_LEN as u64;
/// Encoded size of a spill record.
pub const SPILL_RECORD_LEN: usize = 16;
/// Magic of a spill record.
pub const SPILL_MAGIC: [u8; 4] = *b"SPIL";
const TABLE_HEAD: usize = 24;
const TABLE_MAX: usize = (BLOCK_SIZE - MEMBER_TABLE_OFFSET) as usize;

/// One further member file of a pool (`MkfsOptions::members`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolMember {
    /// The member file to create. A relative path is taken from the
    /// current directory at mkfs and recorded relative to the pool file's
    /// directory (mount finds it there, so the files move together); an
    /// absolute path is recorded as it is.
    pub path: std::path::PathBuf,
    /// The NUMA node its device belongs to.
    pub node: u32,
    /// Its size in bytes (rounded down to whole blocks).
    pub size: u64,
}

/// The data device of a tiered pool (`MkfsOptions::data`): file data goes
/// there, logs and inodes stay on the pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataDevice {
    /// A file on a disk file system (created if missing, and written whole
    /// with zeros so that later writes are overwrites) or a block device.
    /// Recorded as [`PoolMember::path`] is.
    pub path: std::path::PathBuf,
    /// Bytes of it the pool uses (rounded down to whole blocks); `None`:
    /// the size of the existing device or file.
    pub size: Option<u64>,
}

/// One member in the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberEntry {
    /// The member file's path as recorded (empty for member 0; relative
    /// paths are relative to the pool file's directory).
    pub path: PathBuf,
    /// The NUMA node of its device.
    pub node: u32,
    /// Its size in blocks.
    pub blocks: u64,
    /// Whether it is the data device (not mapped; last in the table).
    pub device: bool,
}

/// The member table: every member of the pool in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberTable {
    /// Member 0 (the pool file) first.
    pub members: Vec<MemberEntry>,
}

impl MemberTable {
    /// Encode; fails when the table does not fit its place in block 0.
    pub fn encode(&self) -> Result<Vec<u8>> {
        let mut b = vec![0u8; TABLE_HEAD];
        b[..8].copy_from_slice(&MEMBER_TABLE_MAGIC);
        let count = u32::try_from(self.members.len())
            .map_err(|_| Error::InvalidArgument("too many pool members".into()))?;
        put_u32(&mut b, 8, count);
        for m in &self.members {
            let path = m.path.as_os_str().as_bytes();
            let plen = u16::try_from(path.len()).map_err(|_| {
                Error::InvalidArgument(format!("member path {} too long", m.path.display()))
            })?;
            let mut e = [0u8; 16];
            put_u64(&mut e, 0, m.blocks);
            put_u32(&mut e, 8, m.node);
            put_u16(&mut e, 12, plen);
            put_u16(&mut e, 14, u16::from(m.device));
            b.extend_from_slice(&e);
            b.extend_from_slice(path);
            b.resize(b.len().next_multiple_of(8), 0);
        }
        if b.len() > TABLE_MAX {
            return Err(Error::InvalidArgument(format!(
                "the member table needs {} bytes, more than the {TABLE_MAX} it has \
                 (fewer members or shorter paths)",
                b.len()
            )));
        }
        let entries = (b.len() - TABLE_HEAD) as u32;
        put_u32(&mut b, 12, entries);
        let crc = crc32fast::hash(&b);
        put_u32(&mut b, 16, crc);
        Ok(b)
    }

    /// Decode the table at the start of `b` (the bytes of block 0 or 1 from
    /// [`MEMBER_TABLE_OFFSET`] on).
    pub fn decode(b: &[u8]) -> Result<MemberTable> {
        let what = "member table";
        if b.len() < TABLE_HEAD {
            return Err(Error::corrupt(what, "truncated"));
        }
        if b[..8] != MEMBER_TABLE_MAGIC {
            return Err(Error::corrupt(what, "bad magic"));
        }
        let count = le_u32(b, 8) as usize;
        let len = TABLE_HEAD + le_u32(b, 12) as usize;
        if len > b.len().min(TABLE_MAX) {
            return Err(Error::corrupt(what, format!("length {len} too large")));
        }
        let mut copy = b[..len].to_vec();
        put_u32(&mut copy, 16, 0);
        if crc32fast::hash(&copy) != le_u32(b, 16) {
            return Err(Error::corrupt(what, "checksum mismatch"));
        }
        let mut members = Vec::new();
        let mut at = TABLE_HEAD;
        for i in 0..count {
            if at + 16 > len {
                return Err(Error::corrupt(what, format!("entry {i} truncated")));
            }
            let plen = le_u16(b, at + 12) as usize;
            let end = at + 16 + plen;
            if end > len {
                return Err(Error::corrupt(what, format!("entry {i} path truncated")));
            }
            let device = match le_u16(b, at + 14) {
                0 => false,
                1 => true,
                k => {
                    return Err(Error::corrupt(
                        what,
                        format!("entry {i} of unknown kind {k}"),
                    ));
                }
            };
            if device && i + 1 != count {
                return Err(Error::corrupt(
                    what,
                    "the data device is not the last entry",
                ));
            }
            members.push(MemberEntry {
                blocks: le_u64(b, at),
                node: le_u32(b, at + 8),
                path: PathBuf::from(OsStr::from_bytes(&b[at + 16..end])),
                device,
            });
            at = end.next_multiple_of(8);
        }
        if members.first().is_none_or(|m| m.device) {
            return Err(Error::corrupt(what, "no members"));
        }
        if members
            .iter()
            .skip(1)
            .any(|m| m.path.as_os_str().is_empty())
        {
            return Err(Error::corrupt(what, "a member other than 0 has no path"));
        }
        Ok(MemberTable { members })
    }

    /// The first block of member `index` in the pool (the data device's
    /// follows every mapped member's).
    pub fn start_block(&self, index: usize) -> u64 {
        self.members[..index].iter().map(|m| m.blocks).sum()
    }

    /// Blocks of every mapped member together (`None` on overflow): the
    /// pool's `total_blocks`.
    pub fn total_blocks(&self) -> Option<u64> {
        self.members
            .iter()
            .filter(|m| !m.device)
            .try_fold(0u64, |acc, m| acc.checked_add(m.blocks))
    }

    /// The data device's entry and index, if the pool has one.
    pub fn device(&self) -> Option<(usize, &MemberEntry)> {
        self.members.iter().enumerate().find(|(_, m)| m.device)
    }

    /// The header member `index` carries in a pool of `uuid`.
    pub fn header(&self, index: usize, uuid: [u8; 16]) -> MemberHeader {
        let entry = &self.members[index];
        MemberHeader {
            index: index as u32,
            node: entry.node,
            blocks: entry.blocks,
            start_block: self.start_block(index),
            uuid,
        }
    }
}

/// The header at the start of every member but 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberHeader {
    /// Index of the member in its pool.
    pub index: u32,
    /// NUMA node of its device.
    pub node: u32,
    /// Its size in blocks.
    pub blocks: u64,
    /// Its first block in the pool.
    pub start_block: u64,
    /// The pool's uuid.
    pub uuid: [u8; 16],
}

impl MemberHeader {
    /// Encode to bytes.
    pub fn encode(&self) -> [u8; MEMBER_HEADER_LEN] {
        let mut b = [0u8; MEMBER_HEADER_LEN];
        b[..8].copy_from_slice(&MEMBER_HEADER_MAGIC);
        put_u32(&mut b, 8, self.index);
        put_u32(&mut b, 12, self.node);
        put_u64(&mut b, 16, self.blocks);
        put_u64(&mut b, 24, self.start_block);
        b[32..48].copy_from_slice(&self.uuid);
        let crc = crc32fast::hash(&b[..60]);
        put_u32(&mut b, 60, crc);
        b
    }

    /// Decode and check the checksum; `Err` says what is wrong.
    pub fn decode(b: &[u8]) -> std::result::Result<MemberHeader, String> {
        if b.len() < MEMBER_HEADER_LEN {
            return Err("truncated".into());
        }
        if b[..8] != MEMBER_HEADER_MAGIC {
            return Err("no member header magic (not a manyfs pool member)".into());
        }
        if crc32fast::hash(&b[..60]) != le_u32(b, 60) {
            return Err("checksum mismatch".into());
        }
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(&b[32..48]);
        Ok(MemberHeader {
            index: le_u32(b, 8),
            node: le_u32(b, 12),
            blocks: le_u64(b, 16),
            start_block: le_u64(b, 24),
            uuid,
        })
    }

    /// Whether the header belongs to member `index` of the pool of `uuid`:
    /// [`MemberProblem::Foreign`] or [`MemberProblem::WrongIndex`] if not.
    pub fn check_identity(
        &self,
        uuid: &[u8; 16],
        index: usize,
    ) -> std::result::Result<(), MemberProblem> {
        if self.uuid != *uuid {
            return Err(MemberProblem::Foreign {
                expected: hex(uuid),
                found: hex(&self.uuid),
            });
        }
        if self.index != index as u32 {
            return Err(MemberProblem::WrongIndex { found: self.index });
        }
        Ok(())
    }
}

/// A member's spill count as stored in its spill records: how many blocks
/// the CPUs of the member's node had to take from other nodes' members,
/// as of the last full sync or unmount (see the module comment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpillRecord {
    /// Index of the member the record belongs to (part of its checksum,
    /// so a copy of another member's record does not pass).
    pub index: u32,
    /// The count.
    pub spills: u64,
}

impl SpillRecord {
    fn crc(&self, b: &[u8]) -> u32 {
        let mut h = crc32fast::Hasher::new();
        h.update(&b[..12]);
        h.update(&self.index.to_le_bytes());
        h.finalize()
    }

    /// Encode to bytes.
    pub fn encode(&self) -> [u8; SPILL_RECORD_LEN] {
        let mut b = [0u8; SPILL_RECORD_LEN];
        put_u64(&mut b, 0, self.spills);
        b[8..12].copy_from_slice(&SPILL_MAGIC);
        let crc = self.crc(&b);
        put_u32(&mut b, 12, crc);
        b
    }

    /// The count in `b`, a record of member `index`: `Some(0)` when all of
    /// it is zero (never written), `None` when it is damaged (torn or
    /// overwritten).
    pub fn decode(b: &[u8], index: u32) -> Option<u64> {
        let b = b.get(..SPILL_RECORD_LEN)?;
        if b.iter().all(|&x| x == 0) {
            return Some(0);
        }
        let rec = SpillRecord {
            index,
            spills: le_u64(b, 0),
        };
        (b[8..12] == SPILL_MAGIC && rec.crc(b) == le_u32(b, 12)).then_some(rec.spills)
    }

    /// Pool offsets of the two copies of member `index`'s record, the one
    /// to write first (the backup) first; `member_start` is the member's
    /// first byte in the pool.
    pub fn offsets(index: usize, member_start: u64) -> [u64; 2] {
        if index == 0 {
            [
                BACKUP_SUPERBLOCK_BLOCK * BLOCK_SIZE + POOL_SPILL_OFFSET,
                SUPERBLOCK_BLOCK * BLOCK_SIZE + POOL_SPILL_OFFSET,
            ]
        } else {
            [
                member_start + MEMBER_SPILL_OFFSET + SPILL_RECORD_LEN as u64,
                member_start + MEMBER_SPILL_OFFSET,
            ]
        }
    }
}

/// The path a member's recorded `path` names for the pool file `pool`.
pub fn resolve_member_path(pool: &Path, recorded: &Path) -> PathBuf {
    if recorded.is_absolute() {
        return recorded.to_path_buf();
    }
    pool.parent().unwrap_or(Path::new("")).join(recorded)
}

/// The path to record for a member at `member` (as given at mkfs, relative
/// to the current directory) of the pool file `pool`: absolute paths as
/// they are, relative ones relative to the pool file's directory.
pub(crate) fn record_member_path(pool: &Path, member: &Path) -> Result<PathBuf> {
    if member.is_absolute() {
        return Ok(member.to_path_buf());
    }
    let abs = |p: &Path| {
        std::path::absolute(p)
            .map_err(|e| Error::io(format!("resolve path {}", p.display()), e))
            .map(|p| lexical(&p))
    };
    let dir = abs(pool.parent().unwrap_or(Path::new("")).join(".").as_path())?;
    let target = abs(member)?;
    let d: Vec<Component> = dir.components().collect();
    let t: Vec<Component> = target.components().collect();
    let common = d.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..d.len() {
        out.push("..");
    }
    for c in &t[common..] {
        out.push(c);
    }
    Ok(out)
}

/// `p` with `.` dropped and `..` applied to the components before it.
pub(crate) fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The superblock and member table from the first two blocks of a pool
/// file, when a superblock copy is valid and has a member table; `None`
/// for a pool without one (or no valid superblock: recovery reports that).
pub(crate) fn read_table(head: &[u8]) -> Result<Option<(Superblock, MemberTable)>> {
    let copy = |block: u64| {
        let at = (block * BLOCK_SIZE) as usize;
        head.get(at..(at + BLOCK_SIZE as usize).min(head.len()))
    };
    let mut sb = None;
    for block in [SUPERBLOCK_BLOCK, BACKUP_SUPERBLOCK_BLOCK] {
        if let Some(b) = copy(block)
            && let Ok(s) = Superblock::decode(b, u64::MAX)
        {
            sb = Some(s);
            break;
        }
    }
    let Some(sb) = sb.filter(|s| s.member_table) else {
        return Ok(None);
    };
    let mut first_err = None;
    for block in [SUPERBLOCK_BLOCK, BACKUP_SUPERBLOCK_BLOCK] {
        let Some(b) = copy(block).and_then(|b| b.get(MEMBER_TABLE_OFFSET as usize..)) else {
            continue;
        };
        match MemberTable::decode(b) {
            Ok(t) => return Ok(Some((sb, t))),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    Err(first_err.unwrap_or_else(|| Error::corrupt("member table", "missing")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_and_header_roundtrip_and_reject_damage() {
        let t = MemberTable {
            members: vec![
                MemberEntry {
                    path: PathBuf::new(),
                    node: 0,
                    blocks: 1000,
                    device: false,
                },
                MemberEntry {
                    path: PathBuf::from("m1"),
                    node: 1,
                    blocks: 77,
                    device: false,
                },
                MemberEntry {
                    path: PathBuf::from("/abs/m2"),
                    node: 2,
                    blocks: 5,
                    device: true,
                },
            ],
        };
        let enc = t.encode().unwrap();
        assert_eq!(MemberTable::decode(&enc).unwrap(), t);
        assert_eq!(t.start_block(2), 1077);
        for i in 0..enc.len() {
            let mut bad = enc.clone();
            bad[i] ^= 0x04;
            assert!(MemberTable::decode(&bad).is_err(), "byte {i}");
        }
        let h = MemberHeader {
            index: 2,
            node: 2,
            blocks: 5,
            start_block: 1077,
            uuid: [9; 16],
        };
        assert_eq!(MemberHeader::decode(&h.encode()).unwrap(), h);
        for i in 0..MEMBER_HEADER_LEN {
            let mut bad = h.encode();
            bad[i] ^= 0x01;
            assert!(MemberHeader::decode(&bad).is_err(), "byte {i}");
        }
    }

    #[test]
    fn a_table_too_large_for_block_0_is_refused() {
        let long = PathBuf::from("x".repeat(1000));
        let t = MemberTable {
            members: (0..5)
                .map(|_| MemberEntry {
                    path: long.clone(),
                    node: 0,
                    blocks: 8,
                    device: false,
                })
                .collect(),
        };
        assert!(matches!(t.encode(), Err(Error::InvalidArgument(_))));
    }

    #[test]
    fn member_paths_are_recorded_relative_to_the_pool_directory() {
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(
            record_member_path(Path::new("d/pool"), Path::new("d/m1")).unwrap(),
            PathBuf::from("m1")
        );
        assert_eq!(
            record_member_path(Path::new("d/pool"), Path::new("e/m1")).unwrap(),
            PathBuf::from("../e/m1")
        );
        assert_eq!(
            record_member_path(Path::new("pool"), Path::new("./m1")).unwrap(),
            PathBuf::from("m1")
        );
        assert_eq!(
            record_member_path(Path::new("/x/pool"), Path::new("/y/m1")).unwrap(),
            PathBuf::from("/y/m1")
        );
        let rel = record_member_path(&cwd.join("sub/pool"), Path::new("m1")).unwrap();
        assert_eq!(rel, PathBuf::from("../m1"));
        assert_eq!(
            resolve_member_path(Path::new("d/pool"), Path::new("m1")),
            PathBuf::from("d/m1")
        );
        assert_eq!(
            resolve_member_path(Path::new("pool"), Path::new("m1")),
            PathBuf::from("m1")
        );
    }
}
