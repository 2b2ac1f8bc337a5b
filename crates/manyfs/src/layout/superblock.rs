//! The superblock (and its backup): identity and geometry of a pool.

use super::*;
use crate::error::{Error, Result};

/// Magic bytes at offset 0 of a pool.
pub const SUPER_MAGIC: [u8; 8] = *b"MANYFS\0\x01";
/// Newest on-media format version this manyfs reads and writes: version 7
/// is version 6 plus a data device (see [`Superblock::device_blocks`]),
/// written only for tiered pools, so that an older manyfs refuses one
/// ("unsupported format version 7") instead of calling its device blocks
/// out of range.
pub const FORMAT_VERSION: u32 = 7;
/// Format version written for a pool with a member table and no data
/// device. Version 4 is version 3 plus a member table (blocks 0 and 1,
/// after the superblock): it is written only for pools with a member
/// table, so that an older manyfs refuses such a pool ("unsupported format
/// version 4") instead of failing on a geometry larger than the pool file.
/// Version 6 is version 4 plus direct log words, as 5 is 3 plus them. A
/// pool without a member table is written as
/// [`SINGLE_FILE_FORMAT_VERSION`].
pub const MEMBER_FORMAT_VERSION: u32 = 6;
/// Format version written for a pool that is one file (no member table).
/// Version 3 added FIFOs, sockets and device nodes (inode kinds 4..=7 and
/// the record's `rdev`), extended-attribute log entries and exchange
/// records in the rename journal; everything of version 2 means the same
/// in version 3. Version 5 added direct log words (an inode record's log
/// word naming its one sub-log's head page, bit 63: [`LogWord`]);
/// everything of version 3 means the same in version 5.
pub const SINGLE_FILE_FORMAT_VERSION: u32 = 5;
/// Oldest format version this manyfs mounts: a pool of version 2, 3 or 4
/// mounts as it is, and its first writable mount records version 5 (6 with
/// a member table), so that an older manyfs refuses it ("unsupported
/// format version 5") instead of misreading what only the newer version
/// can hold.
pub const OLDEST_FORMAT_VERSION: u32 = 2;
/// Encoded size of the superblock (the rest of block 0 is zero, or the
/// member table from byte 128). Bytes 96..108 are used by version 7.
pub const SUPERBLOCK_LEN: usize = 108;

/// Geometry and identity of a pool. Encoded little-endian:
///
/// | off | size | field |
/// |----:|----:|---|
/// | 0 | 8 | magic |
/// | 8 | 4 | version (5; 6 with a member table; 7 with a data device; 2, 3 and 4 are read) |
/// | 12 | 4 | block size |
/// | 16 | 8 | total blocks |
/// | 24 | 8 | inode count |
/// | 32 | 8 | inode table start block |
/// | 40 | 8 | inode table blocks |
/// | 48 | 8 | first data block |
/// | 56 | 8 | creation time (ns since epoch) |
/// | 64 | 16 | uuid |
/// | 80 | 4 | commit rule written by the last writable mount: 0 immediate, 1 marked |
/// | 84 | 8 | mount epoch (grows with every writable mount; seeds page sequences) |
/// | 92 | 4 | crc32 of bytes 0..92 |
/// | 96 | 8 | version 7: blocks of the data device (its header included) |
/// | 104 | 4 | version 7: crc32 of bytes 0..104 |
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Superblock {
    /// Blocks in the pool (pool size / BLOCK_SIZE).
    pub total_blocks: u64,
    /// Inode slots in the inode table (inode 0 is never used).
    pub inode_count: u64,
    /// First block of the inode table.
    pub inode_table_start: u64,
    /// Blocks of the inode table.
    pub inode_table_blocks: u64,
    /// First block managed by the block allocator.
    pub data_start: u64,
    /// When the pool was created.
    pub created_ns: u64,
    /// Random identity of this pool.
    pub uuid: [u8; 16],
    /// Which committed entries count (set by the last writable mount).
    pub commit_rule: CommitRule,
    /// Writable mounts so far.
    pub mount_epoch: u64,
    /// Whether blocks 0 and 1 hold a member table after the superblock
    /// (format version 4, 6 or 7; see `layout/members.rs`).
    pub member_table: bool,
    /// Blocks of the data device, its header block included (0: no data
    /// device). They follow the pool's: blocks `[total_blocks,
    /// total_blocks + device_blocks)`, the first of them the device's
    /// header. Version 7 (a tiered pool always has a member table, which
    /// records the device's path).
    pub device_blocks: u64,
}

/// Which committed log entries recovery accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitRule {
    /// Every committed entry counts (`pm` and `dram` mounts: a commit word
    /// is durable once flushed and fenced).
    Immediate,
    /// Only entries below their page's durable mark count, and chains are
    /// followed only through sealed pages (`file` mounts: the page cache
    /// writes pages back in any order). Checked counts and data checksums
    /// are not read: a pool with this rule has neither (or only ones a
    /// full sync made durable before their marks).
    Marked,
    /// As `Marked`, and a checksummed write entry at or above its page's
    /// checked count must match its data, or its sub-log ends before it
    /// (`file` mounts that sync data and marks with one barrier; see
    /// `log/durable.rs`). Older manyfs does not know this rule and refuses
    /// the pool instead of trusting data it cannot verify.
    Checked,
}

impl CommitRule {
    fn code(self) -> u32 {
        match self {
            CommitRule::Immediate => 0,
            CommitRule::Marked => 1,
            CommitRule::Checked => 2,
        }
    }

    /// Whether entries count only below their page's durable mark.
    pub fn marked(self) -> bool {
        self != CommitRule::Immediate
    }
}

/// The fewest bytes per inode a pool may be made with: one inode per
/// block.
pub const MIN_BYTES_PER_INODE: u64 = BLOCK_SIZE;

/// What [`Superblock::decode`]'s error names when the superblock is intact
/// but the pool file is shorter than the pool it describes (truncated).
pub const SHORT_POOL: &str = "pool file";

impl Superblock {
    /// Geometry for a pool of `size` bytes with one inode per
    /// `bytes_per_inode` (from [`MIN_BYTES_PER_INODE`] to `size`).
    pub fn for_size(size: u64, bytes_per_inode: u64) -> Result<Superblock> {
        let total_blocks = size / BLOCK_SIZE;
        if total_blocks < 64 {
            return Err(Error::InvalidArgument(format!(
                "pool size {size} is too small (at least {} bytes)",
                64 * BLOCK_SIZE
            )));
        }
        if total_blocks > KEY_LIMIT {
            return Err(Error::InvalidArgument(format!(
                "pool size {size} is too large (at most {} bytes)",
                KEY_LIMIT * BLOCK_SIZE
            )));
        }
        // The format allots at most one inode per block; more inodes than
        // the pool has bytes per inode would be 0, which the 64-inode
        // minimum below would hide.
        if !(MIN_BYTES_PER_INODE..=size).contains(&bytes_per_inode) {
            return Err(Error::InvalidArgument(format!(
                "{bytes_per_inode} bytes per inode is out of range: from {MIN_BYTES_PER_INODE} \
                 (one inode per block) to the pool's size, {size}"
            )));
        }
        let per_block = BLOCK_SIZE / INODE_SIZE;
        let wanted = (size / bytes_per_inode).clamp(64, 1 << 24);
        let inode_table_blocks = wanted.div_ceil(per_block).min(total_blocks / 4);
        let inode_count = inode_table_blocks * per_block;
        let mut uuid = [0u8; 16];
        let now = crate::time::now_ns();
        uuid[..8].copy_from_slice(&now.to_le_bytes());
        uuid[8..].copy_from_slice(&(std::process::id() as u64 ^ size).to_le_bytes());
        Ok(Superblock {
            total_blocks,
            inode_count,
            inode_table_start: INODE_TABLE_START,
            inode_table_blocks,
            data_start: INODE_TABLE_START + inode_table_blocks,
            created_ns: now,
            uuid,
            commit_rule: CommitRule::Immediate,
            mount_epoch: 1,
            member_table: false,
            device_blocks: 0,
        })
    }

    /// One past the last block a file's data may be in: the end of the
    /// data device on a tiered pool, of the pool otherwise.
    pub fn data_end(&self) -> u64 {
        self.total_blocks + self.device_blocks
    }

    /// Whether the pool has a data device.
    pub fn tiered(&self) -> bool {
        self.device_blocks != 0
    }

    /// The blocks of the data device that hold file data (its header
    /// block excluded); empty without one.
    pub fn device_data_blocks(&self) -> std::ops::Range<u64> {
        if self.tiered() {
            self.total_blocks + 1..self.data_end()
        } else {
            self.total_blocks..self.total_blocks
        }
    }

    /// Whether `block` (`count` of them) may hold file data: in the pool's
    /// data region or in the data device's data blocks.
    pub fn data_range_ok(&self, block: u64, count: u64) -> bool {
        let Some(end) = block.checked_add(count) else {
            return false;
        };
        (block >= self.data_start && end <= self.total_blocks)
            || (block > self.total_blocks && self.tiered() && end <= self.data_end())
    }

    /// The format version this superblock is written with.
    pub fn version(&self) -> u32 {
        if self.tiered() {
            FORMAT_VERSION
        } else if self.member_table {
            MEMBER_FORMAT_VERSION
        } else {
            SINGLE_FILE_FORMAT_VERSION
        }
    }

    /// Encode to bytes.
    pub fn encode(&self) -> [u8; SUPERBLOCK_LEN] {
        let mut b = [0u8; SUPERBLOCK_LEN];
        b[..8].copy_from_slice(&SUPER_MAGIC);
        put_u32(&mut b, 8, self.version());
        put_u32(&mut b, 12, BLOCK_SIZE as u32);
        put_u64(&mut b, 16, self.total_blocks);
        put_u64(&mut b, 24, self.inode_count);
        put_u64(&mut b, 32, self.inode_table_start);
        put_u64(&mut b, 40, self.inode_table_blocks);
        put_u64(&mut b, 48, self.data_start);
        put_u64(&mut b, 56, self.created_ns);
        b[64..80].copy_from_slice(&self.uuid);
        put_u32(&mut b, 80, self.commit_rule.code());
        put_u64(&mut b, 84, self.mount_epoch);
        let crc = crc32fast::hash(&b[..92]);
        put_u32(&mut b, 92, crc);
        if self.tiered() {
            put_u64(&mut b, 96, self.device_blocks);
            let crc = crc32fast::hash(&b[..104]);
            put_u32(&mut b, 104, crc);
        }
        b
    }

    /// Decode and validate against the pool length.
    pub fn decode(b: &[u8], pool_len: u64) -> Result<Superblock> {
        let what = "superblock";
        if b.len() < 96 {
            return Err(Error::corrupt(what, "truncated"));
        }
        if b[..8] != SUPER_MAGIC {
            return Err(Error::corrupt(what, "bad magic (not a manyfs pool)"));
        }
        if crc32fast::hash(&b[..92]) != le_u32(b, 92) {
            return Err(Error::corrupt(what, "checksum mismatch"));
        }
        let version = le_u32(b, 8);
        if !(OLDEST_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(Error::corrupt(
                what,
                format!("unsupported format version {version}"),
            ));
        }
        let device_blocks = if version == FORMAT_VERSION {
            if b.len() < SUPERBLOCK_LEN {
                return Err(Error::corrupt(what, "truncated"));
            }
            if crc32fast::hash(&b[..104]) != le_u32(b, 104) {
                return Err(Error::corrupt(what, "checksum mismatch (data device)"));
            }
            let n = le_u64(b, 96);
            if n < 2 {
                return Err(Error::corrupt(
                    what,
                    format!("data device of {n} blocks (at least a header and a data block)"),
                ));
            }
            n
        } else {
            0
        };
        if le_u32(b, 12) as u64 != BLOCK_SIZE {
            return Err(Error::corrupt(what, "unsupported block size"));
        }
        let sb = Superblock {
            total_blocks: le_u64(b, 16),
            inode_count: le_u64(b, 24),
            inode_table_start: le_u64(b, 32),
            inode_table_blocks: le_u64(b, 40),
            data_start: le_u64(b, 48),
            created_ns: le_u64(b, 56),
            uuid: b[64..80].try_into().expect("16 bytes"),
            commit_rule: match le_u32(b, 80) {
                0 => CommitRule::Immediate,
                1 => CommitRule::Marked,
                2 => CommitRule::Checked,
                r => return Err(Error::corrupt(what, format!("unknown commit rule {r}"))),
            },
            mount_epoch: le_u64(b, 84),
            member_table: matches!(version, 4 | 6 | 7),
            device_blocks,
        };
        let per_block = BLOCK_SIZE / INODE_SIZE;
        let geometry_ok = sb.total_blocks <= KEY_LIMIT
            && sb.inode_table_start == INODE_TABLE_START
            && sb.inode_table_blocks.checked_mul(per_block) == Some(sb.inode_count)
            && sb.inode_table_start.checked_add(sb.inode_table_blocks) == Some(sb.data_start)
            && sb.data_start < sb.total_blocks
            && sb.inode_count > ROOT_INO
            && sb.data_end() <= KEY_LIMIT;
        if !geometry_ok {
            return Err(Error::corrupt(
                what,
                format!("inconsistent geometry {sb:?}"),
            ));
        }
        // KEY_LIMIT above keeps this product in range.
        let need = sb.total_blocks * BLOCK_SIZE;
        if need > pool_len {
            return Err(Error::corrupt(
                SHORT_POOL,
                format!(
                    "the file is {pool_len} bytes, shorter than the pool's {need} bytes (truncated?)"
                ),
            ));
        }
        Ok(sb)
    }

    /// Byte offset of inode `ino`'s record.
    pub fn inode_offset(&self, ino: u64) -> u64 {
        self.inode_table_start * BLOCK_SIZE + ino * INODE_SIZE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_every_flipped_byte_is_rejected() {
        let sb = Superblock::for_size(64 << 20, 16 << 10).unwrap();
        let enc = sb.encode();
        assert_eq!(Superblock::decode(&enc, 64 << 20).unwrap(), sb);
        for i in 0..96 {
            let mut bad = enc;
            bad[i] ^= 0x10;
            assert!(Superblock::decode(&bad, 64 << 20).is_err(), "byte {i}");
        }
        assert!(
            Superblock::decode(&enc, 1 << 20).is_err(),
            "pool shorter than geometry"
        );
    }

    #[test]
    fn version_2_pools_are_read_and_others_refused() {
        let sb = Superblock::for_size(64 << 20, 16 << 10).unwrap();
        let with_version = |v: u32| {
            let mut b = sb.encode();
            put_u32(&mut b, 8, v);
            let crc = crc32fast::hash(&b[..92]);
            put_u32(&mut b, 92, crc);
            b
        };
        for v in [2, 3, 5] {
            assert_eq!(Superblock::decode(&with_version(v), 64 << 20).unwrap(), sb);
        }
        assert_eq!(le_u32(&sb.encode(), 8), SINGLE_FILE_FORMAT_VERSION);
        for v in [4, 6] {
            let with_table = Superblock::decode(&with_version(v), 64 << 20).unwrap();
            assert!(with_table.member_table);
            assert_eq!(le_u32(&with_table.encode(), 8), MEMBER_FORMAT_VERSION);
        }
        let with_table = Superblock::decode(&with_version(6), 64 << 20).unwrap();
        // Version 7 needs the data device's words and their checksum.
        assert!(Superblock::decode(&with_version(7), 64 << 20).is_err());
        let mut tiered = with_table.clone();
        tiered.device_blocks = 100;
        let enc = tiered.encode();
        assert_eq!(le_u32(&enc, 8), FORMAT_VERSION);
        assert_eq!(Superblock::decode(&enc, 64 << 20).unwrap(), tiered);
        for i in 0..SUPERBLOCK_LEN {
            let mut bad = enc;
            bad[i] ^= 0x10;
            assert!(Superblock::decode(&bad, 64 << 20).is_err(), "byte {i}");
        }
        assert!(tiered.data_range_ok(tiered.total_blocks + 1, 99));
        assert!(
            !tiered.data_range_ok(tiered.total_blocks, 1),
            "the device header"
        );
        assert!(!tiered.data_range_ok(tiered.total_blocks + 1, 100));
        assert!(
            !tiered.data_range_ok(tiered.total_blocks - 1, 2),
            "across the boundary"
        );
        for v in [0, 1, FORMAT_VERSION + 1] {
            let err = Superblock::decode(&with_version(v), 64 << 20).unwrap_err();
            assert!(
                err.to_string().contains("unsupported format version"),
                "{err}"
            );
        }
    }

    #[test]
    fn every_commit_rule_roundtrips() {
        for rule in [
            CommitRule::Immediate,
            CommitRule::Marked,
            CommitRule::Checked,
        ] {
            let mut sb = Superblock::for_size(64 << 20, 16 << 10).unwrap();
            sb.commit_rule = rule;
            assert_eq!(Superblock::decode(&sb.encode(), 64 << 20).unwrap(), sb);
        }
    }
}
