//! Pools with several member files (one per NUMA node) behind one block
//! address space: the member table, the member header, and opening or
//! creating every member of a pool.
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
use crate::media::{Durability, Media, OpenMember};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
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

/// Every mapped member's spill count as its records hold it: the primary
/// copy, or the backup where the primary is damaged (a write torn by a
/// crash), or 0 where both are (the count is statistics: it never stops
/// a mount).
pub(crate) fn read_spills(media: &Media) -> Vec<u64> {
    media
        .members()
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let [backup, primary] = SpillRecord::offsets(i, m.start);
            [primary, backup]
                .into_iter()
                .find_map(|off| {
                    let mut b = [0u8; SPILL_RECORD_LEN];
                    media.read(off, &mut b).ok()?;
                    SpillRecord::decode(&b, i as u32)
                })
                .unwrap_or_else(|| {
                    tracing::warn!(
                        "member {i}: both spill records damaged; counting its spills from 0"
                    );
                    0
                })
        })
        .collect()
}

/// Write member `index`'s spill record (backup copy first, each made
/// durable before the next) with `spills`.
pub(crate) fn write_spills(media: &Media, index: usize, spills: u64) -> Result<()> {
    let Some(m) = media.members().into_iter().nth(index) else {
        return Err(Error::InvalidArgument(format!(
            "no pool member {index} to record spills in"
        )));
    };
    let rec = SpillRecord {
        index: index as u32,
        spills,
    }
    .encode();
    for off in SpillRecord::offsets(index, m.start) {
        media.store(off, &rec)?;
        media.persist(off, rec.len())?;
        media.sync_range(off, rec.len())?;
    }
    Ok(())
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
fn record_member_path(pool: &Path, member: &Path) -> Result<PathBuf> {
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
fn lexical(p: &Path) -> PathBuf {
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

/// Open and map the pool whose file is `pool`, with every member its
/// member table names, each checked against the table (see [`MemberHeader`])
/// before it is mapped. A pool without a member table (every pool of format
/// version 2 or 3), and a file that is no pool at all, map as one file:
/// recovery and fsck judge what it holds.
pub(crate) fn open_pool(
    pool: &Path,
    mode: Durability,
    writable: bool,
    data: Option<&Path>,
) -> Result<Media> {
    let file = Media::open_file(pool, writable)?;
    let len = file
        .metadata()
        .map_err(|e| Error::io(format!("stat pool {}", pool.display()), e))?
        .len();
    let mut head = vec![0u8; (2 * BLOCK_SIZE).min(len) as usize];
    file.read_exact_at(&mut head, 0)
        .map_err(|e| Error::io(format!("read pool {}", pool.display()), e))?;
    let Some((sb, table)) = read_table(&head)? else {
        if let Some(d) = data {
            return Err(Error::InvalidArgument(format!(
                "{}: a data device ({}) was given, but the pool has none",
                pool.display(),
                d.display()
            )));
        }
        return Media::from_members(
            vec![OpenMember {
                file,
                path: pool.to_path_buf(),
                len,
                node: 0,
            }],
            mode,
            writable,
        );
    };
    if table.total_blocks() != Some(sb.total_blocks) {
        return Err(Error::corrupt(
            "member table",
            format!(
                "members hold {:?} blocks, the superblock says {}",
                table.total_blocks(),
                sb.total_blocks
            ),
        ));
    }
    let member_len = |i: usize| table.members[i].blocks * BLOCK_SIZE;
    if len != member_len(0) {
        return Err(Error::Member {
            path: pool.to_path_buf(),
            index: 0,
            problem: MemberProblem::Resized {
                expected: member_len(0),
                found: len,
            },
        });
    }
    let mut open = vec![OpenMember {
        file,
        path: pool.to_path_buf(),
        len,
        node: table.members[0].node,
    }];
    for (i, entry) in table.members.iter().enumerate().skip(1) {
        if entry.device {
            break;
        }
        let path = resolve_member_path(pool, &entry.path);
        let fault = |problem| Error::Member {
            path: path.clone(),
            index: i as u32,
            problem,
        };
        let file = match Media::open_file(&path, writable) {
            Ok(f) => f,
            Err(Error::Io { cause, .. }) => {
                return Err(fault(MemberProblem::Missing(cause.to_string())));
            }
            Err(e) => return Err(e),
        };
        let found = file
            .metadata()
            .map_err(|e| Error::io(format!("stat pool member {}", path.display()), e))?
            .len();
        let expected = member_len(i);
        let mut hb = [0u8; MEMBER_HEADER_LEN];
        if found < MEMBER_HEADER_LEN as u64 {
            return Err(fault(MemberProblem::Resized { expected, found }));
        }
        file.read_exact_at(&mut hb, 0)
            .map_err(|e| Error::io(format!("read pool member {}", path.display()), e))?;
        let h = MemberHeader::decode(&hb).map_err(|e| fault(MemberProblem::BadHeader(e)))?;
        if h.uuid != sb.uuid {
            return Err(fault(MemberProblem::Foreign {
                expected: hex(&sb.uuid),
                found: hex(&h.uuid),
            }));
        }
        if h.index != i as u32 {
            return Err(fault(MemberProblem::WrongIndex { found: h.index }));
        }
        if h.blocks != entry.blocks || h.node != entry.node || h.start_block != table.start_block(i)
        {
            return Err(fault(MemberProblem::BadHeader(format!(
                "header says {} blocks from block {} on node {}, the table {} blocks from block {} on node {}",
                h.blocks,
                h.start_block,
                h.node,
                entry.blocks,
                table.start_block(i),
                entry.node
            ))));
        }
        if found != expected {
            return Err(fault(MemberProblem::Resized { expected, found }));
        }
        open.push(OpenMember {
            file,
            path,
            len: expected,
            node: entry.node,
        });
    }
    let mut media = Media::from_members(open, mode, writable)?;
    match (table.device(), sb.device_blocks) {
        (None, 0) => {
            if let Some(d) = data {
                return Err(Error::InvalidArgument(format!(
                    "{}: a data device ({}) was given, but the pool has none",
                    pool.display(),
                    d.display()
                )));
            }
        }
        (Some((i, entry)), n) if n == entry.blocks => {
            let path =
                data.map_or_else(|| resolve_member_path(pool, &entry.path), Path::to_path_buf);
            let device = open_device(&path, &sb, &table, i, writable)?;
            media.attach_device(device);
        }
        (entry, n) => {
            return Err(Error::corrupt(
                "member table",
                format!(
                    "the superblock records a data device of {n} blocks, the table {:?}",
                    entry.map(|(_, e)| e.blocks)
                ),
            ));
        }
    }
    Ok(media)
}

/// Open the data device at `path`, entry `index` of `table`, and check its
/// length and header against the pool.
fn open_device(
    path: &Path,
    sb: &Superblock,
    table: &MemberTable,
    index: usize,
    writable: bool,
) -> Result<crate::tier::Device> {
    let fault = |problem| Error::DataDevice {
        path: path.to_path_buf(),
        problem,
    };
    let (file, direct) = crate::tier::device::open_file(path, writable, false)
        .map_err(|e| fault(MemberProblem::Missing(e.to_string())))?;
    if writable {
        crate::media::lock_exclusive(&file, path)?;
    } else {
        crate::media::lock_shared(&file, path)?;
    }
    let expected = sb.device_blocks * BLOCK_SIZE;
    let found = crate::tier::device::byte_len(&file)
        .map_err(|e| Error::io(format!("size of data device {}", path.display()), e))?;
    if found < expected {
        return Err(fault(MemberProblem::Short { expected, found }));
    }
    let device = crate::tier::Device::new(file, path.to_path_buf(), expected, direct);
    let mut hb = [0u8; MEMBER_HEADER_LEN];
    device.read(0, &mut hb)?;
    let h = MemberHeader::decode(&hb).map_err(|e| fault(MemberProblem::BadHeader(e)))?;
    if h.uuid != sb.uuid {
        return Err(fault(MemberProblem::Foreign {
            expected: hex(&sb.uuid),
            found: hex(&h.uuid),
        }));
    }
    if h.index != index as u32 {
        return Err(fault(MemberProblem::WrongIndex { found: h.index }));
    }
    if h.blocks != sb.device_blocks || h.start_block != table.start_block(index) {
        return Err(fault(MemberProblem::BadHeader(format!(
            "header says {} blocks from block {}, the pool {} blocks from block {}",
            h.blocks,
            h.start_block,
            sb.device_blocks,
            table.start_block(index)
        ))));
    }
    Ok(device)
}

/// The superblock and member table from the first two blocks of a pool
/// file, when a superblock copy is valid and has a member table; `None`
/// for a pool without one (or no valid superblock: recovery reports that).
fn read_table(head: &[u8]) -> Result<Option<(Superblock, MemberTable)>> {
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

/// What [`create_pool`] makes (from `MkfsOptions`).
pub(crate) struct NewPoolOptions<'a> {
    pub size: u64,
    pub bytes_per_inode: u64,
    pub replace_existing: bool,
    pub node: u32,
    pub members: &'a [PoolMember],
    /// The data device of a tiered pool.
    pub data: Option<&'a DataDevice>,
    /// The mount's topology: members on tmpfs are bound to their node
    /// under the machine's own (see `media::numa`).
    pub topology: &'a crate::Topology,
}

/// A new pool's files, mapped: the superblock to format it with and, for a
/// pool with members, its member table.
pub(crate) struct NewPool {
    pub media: Media,
    pub sb: Superblock,
    pub table: Option<MemberTable>,
}

/// Create the pool file `pool` and every member file `mkfs` names, and map
/// them. A pool with no further member and node 0 is one file of
/// `mkfs.size` bytes (format version 5: no member table, as before members existed).
pub(crate) fn create_pool(
    pool: &Path,
    mkfs: &NewPoolOptions<'_>,
    mode: Durability,
) -> Result<NewPool> {
    if mkfs.members.is_empty() && mkfs.node == 0 && mkfs.data.is_none() {
        let sb = Superblock::for_size(mkfs.size, mkfs.bytes_per_inode)?;
        let media = crate::media::numa::create_bound(pool, 0, mkfs.topology, || {
            Media::create_with(pool, mkfs.size, mode, mkfs.replace_existing)
        })?;
        return Ok(NewPool {
            media,
            sb,
            table: None,
        });
    }
    let mut entries = vec![MemberEntry {
        path: PathBuf::new(),
        node: mkfs.node,
        blocks: mkfs.size / BLOCK_SIZE,
        device: false,
    }];
    let mut seen =
        vec![lexical(&std::path::absolute(pool).map_err(|e| {
            Error::io(format!("resolve {}", pool.display()), e)
        })?)];
    for (i, m) in mkfs.members.iter().enumerate() {
        let blocks = m.size / BLOCK_SIZE;
        if blocks < 2 {
            return Err(Error::InvalidArgument(format!(
                "member {} ({}): {} bytes is too small (at least {} bytes: a header block and a data block)",
                i + 1,
                m.path.display(),
                m.size,
                2 * BLOCK_SIZE
            )));
        }
        let abs = lexical(
            &std::path::absolute(&m.path)
                .map_err(|e| Error::io(format!("resolve {}", m.path.display()), e))?,
        );
        if seen.contains(&abs) {
            return Err(Error::InvalidArgument(format!(
                "member {} ({}) names a file already in the pool",
                i + 1,
                m.path.display()
            )));
        }
        seen.push(abs);
        entries.push(MemberEntry {
            path: record_member_path(pool, &m.path)?,
            node: m.node,
            blocks,
            device: false,
        });
    }
    // The data device: checked and sized now, created (or overwritten)
    // only once the members are.
    let device_size = match mkfs.data {
        None => None,
        Some(d) => {
            let abs = lexical(
                &std::path::absolute(&d.path)
                    .map_err(|e| Error::io(format!("resolve {}", d.path.display()), e))?,
            );
            if seen.contains(&abs) {
                return Err(Error::InvalidArgument(format!(
                    "the data device {} names a file already in the pool",
                    d.path.display()
                )));
            }
            let size = device_size(d, mkfs.replace_existing)?;
            entries.push(MemberEntry {
                path: record_member_path(pool, &d.path)?,
                node: mkfs.node,
                blocks: size / BLOCK_SIZE,
                device: true,
            });
            Some(size)
        }
    };
    let table = MemberTable { members: entries };
    let total = table
        .total_blocks()
        .ok_or_else(|| Error::InvalidArgument("pool too large".into()))?;
    let mut sb = Superblock::for_size(total.saturating_mul(BLOCK_SIZE), mkfs.bytes_per_inode)?;
    sb.member_table = true;
    sb.device_blocks = device_size.map_or(0, |s| s / BLOCK_SIZE);
    if sb.data_end() > KEY_LIMIT {
        return Err(Error::InvalidArgument(format!(
            "pool and data device together are too large (at most {} bytes)",
            KEY_LIMIT * BLOCK_SIZE
        )));
    }
    table.encode()?;
    let n0 = table.members[0].blocks;
    if n0 <= sb.data_start + 1 {
        return Err(Error::InvalidArgument(format!(
            "member 0 ({}) of {n0} blocks cannot hold the superblocks, journal, inode table and \
             root directory ({} blocks): give it a larger --size",
            pool.display(),
            sb.data_start + 2
        )));
    }
    let mut open: Vec<OpenMember> = Vec::with_capacity(table.members.len());
    // A member that cannot be created removes the ones created before it
    // (they hold nothing yet), so a failed mkfs leaves no half pool.
    let undo = |open: &[OpenMember]| {
        for m in open {
            let _ = std::fs::remove_file(&m.path);
        }
    };
    for (i, entry) in table.members.iter().enumerate() {
        if entry.device {
            break;
        }
        let path = if i == 0 {
            pool.to_path_buf()
        } else {
            mkfs.members[i - 1].path.clone()
        };
        let len = entry.blocks * BLOCK_SIZE;
        let created = crate::media::numa::create_bound(&path, entry.node, mkfs.topology, || {
            Media::create_file(&path, len, mkfs.replace_existing)
        });
        match created {
            Ok(file) => open.push(OpenMember {
                file,
                path,
                len,
                node: entry.node,
            }),
            Err(e) => {
                undo(&open);
                return Err(e);
            }
        }
    }
    let paths: Vec<PathBuf> = open.iter().map(|m| m.path.clone()).collect();
    let mut media = Media::from_members(open, mode, true).inspect_err(|_| {
        for p in &paths {
            let _ = std::fs::remove_file(p);
        }
    })?;
    if let (Some(d), Some(size)) = (mkfs.data, device_size) {
        let device = create_device(d, size).inspect_err(|_| {
            for p in &paths {
                let _ = std::fs::remove_file(p);
            }
        })?;
        media.attach_device(device);
    }
    Ok(NewPool {
        media,
        sb,
        table: Some(table),
    })
}

/// The bytes a new data device will have: `d.size` (checked against a
/// block device's or an existing file's size), or the size it has.
fn device_size(d: &DataDevice, replace_existing: bool) -> Result<u64> {
    use std::os::unix::fs::FileTypeExt;
    let meta = match std::fs::metadata(&d.path) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(Error::io(
                format!("stat data device {}", d.path.display()),
                e,
            ));
        }
    };
    let is_block = meta
        .as_ref()
        .is_some_and(|m| m.file_type().is_block_device());
    let has = match &meta {
        Some(_) if is_block => {
            let f = std::fs::File::open(&d.path)
                .map_err(|e| Error::io(format!("open data device {}", d.path.display()), e))?;
            crate::tier::device::byte_len(&f)
                .map_err(|e| Error::io(format!("size of data device {}", d.path.display()), e))?
        }
        Some(m) if m.is_file() => m.len(),
        Some(_) => {
            return Err(Error::InvalidArgument(format!(
                "data device {}: neither a regular file nor a block device",
                d.path.display()
            )));
        }
        None => 0,
    };
    if !is_block && has > 0 && !replace_existing {
        return Err(Error::Exists(format!("data device {}", d.path.display())));
    }
    let size = match d.size {
        Some(s) => s,
        None if has > 0 => has,
        None => {
            return Err(Error::InvalidArgument(format!(
                "data device {} does not exist yet: give its size (--data-size)",
                d.path.display()
            )));
        }
    } / BLOCK_SIZE
        * BLOCK_SIZE;
    if is_block && size > has {
        return Err(Error::InvalidArgument(format!(
            "data device {} has {has} bytes, fewer than the {size} asked for",
            d.path.display()
        )));
    }
    if size < 2 * BLOCK_SIZE {
        return Err(Error::InvalidArgument(format!(
            "data device {}: {size} bytes is too small (at least {} bytes: a header block and a \
             data block)",
            d.path.display(),
            2 * BLOCK_SIZE
        )));
    }
    Ok(size)
}

/// Create (or size) the data device file and open it: a regular file is
/// written whole with zeros and flushed, so that every later write is an
/// overwrite (a hole or an unwritten extent would make the disk file
/// system commit its journal at the first flush after each block's first
/// write).
fn create_device(d: &DataDevice, size: u64) -> Result<crate::tier::Device> {
    use std::os::unix::fs::FileTypeExt;
    let ctx = |what: &str| format!("{what} data device {}", d.path.display());
    let (file, direct) = crate::tier::device::open_file(&d.path, true, true)
        .map_err(|e| Error::io(ctx("create"), e))?;
    crate::media::lock_exclusive(&file, &d.path)?;
    let meta = file.metadata().map_err(|e| Error::io(ctx("stat"), e))?;
    let device = if meta.file_type().is_block_device() {
        crate::tier::Device::new(file, d.path.clone(), size, direct)
    } else {
        file.set_len(0)
            .and_then(|_| file.set_len(size))
            .map_err(|e| Error::io(ctx("size"), e))?;
        let device = crate::tier::Device::new(file, d.path.clone(), size, direct);
        let zeros = vec![0u8; 1 << 20];
        let mut off = 0;
        while off < size {
            let n = (size - off).min(zeros.len() as u64) as usize;
            device.write(off, &zeros[..n])?;
            off += n as u64;
        }
        device
    };
    device.flush()?;
    Ok(device)
}

/// Write the member table (both copies) and every member's header (mkfs).
pub(crate) fn write_members(media: &Media, sb: &Superblock, table: &MemberTable) -> Result<()> {
    for (i, entry) in table.members.iter().enumerate().skip(1) {
        let start = table.start_block(i);
        if entry.device {
            // Its own block 0; the device may be long, so only the header.
            let h = MemberHeader {
                index: i as u32,
                node: entry.node,
                blocks: entry.blocks,
                start_block: start,
                uuid: sb.uuid,
            };
            let mut block = vec![0u8; BLOCK_SIZE as usize];
            block[..MEMBER_HEADER_LEN].copy_from_slice(&h.encode());
            media.store(start * BLOCK_SIZE, &block)?;
            media.flush_device()?;
            continue;
        }
        let h = MemberHeader {
            index: i as u32,
            node: entry.node,
            blocks: entry.blocks,
            start_block: start,
            uuid: sb.uuid,
        };
        let off = start * BLOCK_SIZE;
        media.store(off, &vec![0u8; BLOCK_SIZE as usize])?;
        media.store(off, &h.encode())?;
        media.persist(off, BLOCK_SIZE as usize)?;
    }
    let enc = table.encode()?;
    for block in [BACKUP_SUPERBLOCK_BLOCK, SUPERBLOCK_BLOCK] {
        let off = block * BLOCK_SIZE + MEMBER_TABLE_OFFSET;
        media.store(off, &enc)?;
        media.persist(off, enc.len())?;
    }
    Ok(())
}

/// Blocks no allocator may hand out besides the superblocks, journal and
/// inode table: the header block of every member but 0.
pub(crate) fn reserved_blocks(media: &Media) -> Vec<u64> {
    media
        .members()
        .iter()
        .skip(1)
        .map(|m| m.start / BLOCK_SIZE)
        .chain(media.device().map(|_| media.len() / BLOCK_SIZE))
        .collect()
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
