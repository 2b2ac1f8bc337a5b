//! Inode records in the inode table.

use super::*;
use crate::error::{Error, Result};

/// Size of an inode record.
pub const INODE_SIZE: u64 = 128;
/// Magic of an initialised inode record.
pub const INODE_MAGIC: u32 = 0x444f_4e49; // "INOD"

/// Offset of the log word inside a record (see [`LogWord`]).
pub const INODE_LOG_ARRAY_OFFSET: u64 = 24;

/// Bit 63 of a log word: the word names one sub-log's head page itself.
pub const LOG_WORD_DIRECT: u64 = 1 << 63;
const DIRECT_BLOCK_BITS: u32 = 30;
const DIRECT_CHECK_BITS: u32 = 24;
const DIRECT_INDEX_SHIFT: u32 = DIRECT_BLOCK_BITS + DIRECT_CHECK_BITS;
const _: () = assert!(KEY_LIMIT == 1 << DIRECT_BLOCK_BITS);
const _: () = assert!(MAX_SUBLOGS < 1 << (63 - DIRECT_INDEX_SHIFT));

/// Where an inode's log starts: the 8-byte word at offset 24 of its record,
/// outside the record's checksum so that one failure-atomic store switches
/// it.
///
/// | word | meaning |
/// |---|---|
/// | 0 | no log page yet |
/// | bit 63 clear, else non-zero | block of a log array (one head per sub-log) |
/// | bit 63 set | one sub-log only: bits 0..30 its head page (0: none yet), bits 30..54 the head's sequence check ([`seq_check`]), bits 54..63 the sub-log's index |
///
/// A new inode starts with 0; its first log page makes the word direct,
/// and a page of a second sub-log replaces it by a log array that names the
/// first sub-log's head too. Pools written before the direct form have an
/// array for every inode, which stays valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogWord {
    /// No sub-log has a page (a direct word whose head is 0 reads the same).
    Empty,
    /// One sub-log, its head page named in the record.
    Direct {
        /// The sub-log's index.
        index: usize,
        /// Its head page.
        head: u64,
        /// [`seq_check`] of the head page's sequence.
        check: u32,
    },
    /// A log array block.
    Array(u64),
}

impl LogWord {
    /// Decode a record's word.
    pub fn decode(w: u64) -> LogWord {
        if w == 0 {
            LogWord::Empty
        } else if w & LOG_WORD_DIRECT == 0 {
            LogWord::Array(w)
        } else {
            let head = w & ((1 << DIRECT_BLOCK_BITS) - 1);
            if head == 0 {
                return LogWord::Empty;
            }
            LogWord::Direct {
                index: ((w & !LOG_WORD_DIRECT) >> DIRECT_INDEX_SHIFT) as usize,
                head,
                check: ((w >> DIRECT_BLOCK_BITS) & ((1 << DIRECT_CHECK_BITS) - 1)) as u32,
            }
        }
    }

    /// The word naming head page `head` (sequence `seq`) of sub-log
    /// `index` directly.
    pub fn direct(index: usize, head: u64, seq: u64) -> u64 {
        debug_assert!(head < KEY_LIMIT && index < MAX_SUBLOGS);
        LOG_WORD_DIRECT
            | (index as u64) << DIRECT_INDEX_SHIFT
            | u64::from(seq_check(seq)) << DIRECT_BLOCK_BITS
            | head
    }

    /// The log array block, if the word names one.
    pub fn array(self) -> Option<u64> {
        match self {
            LogWord::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// The 24-bit check of a page sequence kept in a direct log word: under the
/// `Marked` and `Checked` rules the head page counts only if its footer's
/// sequence gives the same check (a page left by an older log of the inode
/// carries another sequence).
pub fn seq_check(seq: u64) -> u32 {
    let mut x = seq ^ 0x9e37_79b9_7f4a_7c15;
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    (x & ((1 << DIRECT_CHECK_BITS) - 1)) as u32
}

fn record_crc(b: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&b[..24]);
    h.update(&[0u8; 8]);
    h.update(&b[32..124]);
    h.finalize()
}

/// What an inode is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileKind {
    /// Regular file.
    File,
    /// Directory.
    Dir,
    /// Symbolic link (its target is the file content).
    Symlink,
    /// Named pipe (FIFO). No content: the kernel serves the pipe.
    Fifo,
    /// Character device; its number is the inode's `rdev`.
    CharDevice,
    /// Block device; its number is the inode's `rdev`.
    BlockDevice,
    /// UNIX domain socket (a name `bind(2)` made). No content.
    Socket,
}

impl FileKind {
    /// Encoding on media.
    pub fn code(self) -> u8 {
        match self {
            FileKind::File => 1,
            FileKind::Dir => 2,
            FileKind::Symlink => 3,
            FileKind::Fifo => 4,
            FileKind::CharDevice => 5,
            FileKind::BlockDevice => 6,
            FileKind::Socket => 7,
        }
    }
    /// Decode from media.
    pub fn from_code(c: u8) -> Option<FileKind> {
        match c {
            1 => Some(FileKind::File),
            2 => Some(FileKind::Dir),
            3 => Some(FileKind::Symlink),
            4 => Some(FileKind::Fifo),
            5 => Some(FileKind::CharDevice),
            6 => Some(FileKind::BlockDevice),
            7 => Some(FileKind::Socket),
            _ => None,
        }
    }

    /// Whether this is a node without content of its own (FIFO, device,
    /// socket): it has attributes, names and extended attributes, but no
    /// data pages and cannot be opened through manyfs.
    pub fn is_special(self) -> bool {
        matches!(
            self,
            FileKind::Fifo | FileKind::CharDevice | FileKind::BlockDevice | FileKind::Socket
        )
    }

    /// The `S_IFMT` bits of this kind (as in `st_mode`).
    pub fn format_bits(self) -> u32 {
        match self {
            FileKind::File => 0o100000,
            FileKind::Dir => 0o040000,
            FileKind::Symlink => 0o120000,
            FileKind::Fifo => 0o010000,
            FileKind::CharDevice => 0o020000,
            FileKind::BlockDevice => 0o060000,
            FileKind::Socket => 0o140000,
        }
    }

    /// The kind named by the `S_IFMT` bits of `mode` (`None` for bits that
    /// name no file type).
    pub fn from_format_bits(mode: u32) -> Option<FileKind> {
        [
            FileKind::File,
            FileKind::Dir,
            FileKind::Symlink,
            FileKind::Fifo,
            FileKind::CharDevice,
            FileKind::BlockDevice,
            FileKind::Socket,
        ]
        .into_iter()
        .find(|k| k.format_bits() == mode & 0o170000)
    }
}

/// The persistent part of an inode that does not live in its log: identity,
/// kind, attributes at creation and where its log starts.
///
/// | off | size | field |
/// |---:|---:|---|
/// | 0 | 4 | magic |
/// | 4 | 4 | generation |
/// | 8 | 1 | kind |
/// | 12 | 4 | mode |
/// | 16 | 4 | uid |
/// | 20 | 4 | gid |
/// | 24 | 8 | log word ([`LogWord`]: a log array block, or one sub-log's head page) |
/// | 32 | 8 | atime ns |
/// | 40 | 8 | mtime ns |
/// | 48 | 8 | ctime ns |
/// | 56 | 8 | device number (`rdev`) of a character or block device, else 0 |
/// | 124 | 4 | crc32 of bytes 0..124, with the log array word (24..32) zeroed |
///
/// The log word is outside the checksum so that log compaction (and the
/// change to a log array when a second sub-log starts) can switch an inode
/// to a new log with one failure-atomic 8-byte store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InodeRecord {
    /// Bumped every time the slot is reused, so stale references are caught.
    pub generation: u32,
    /// File, directory or symlink.
    pub kind: FileKind,
    /// Permission bits (and setuid/setgid/sticky).
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// The log word ([`LogWord`]): a log array block, or one sub-log's head.
    pub log_array: u64,
    /// Access time at creation.
    pub atime_ns: u64,
    /// Modification time at creation.
    pub mtime_ns: u64,
    /// Change time at creation.
    pub ctime_ns: u64,
    /// Device number of a character or block device (0 otherwise). Pools
    /// written before device nodes existed hold zero here.
    pub rdev: u64,
}

impl InodeRecord {
    /// Encode to bytes.
    pub fn encode(&self) -> [u8; INODE_SIZE as usize] {
        let mut b = [0u8; INODE_SIZE as usize];
        put_u32(&mut b, 0, INODE_MAGIC);
        put_u32(&mut b, 4, self.generation);
        b[8] = self.kind.code();
        put_u32(&mut b, 12, self.mode);
        put_u32(&mut b, 16, self.uid);
        put_u32(&mut b, 20, self.gid);
        put_u64(&mut b, 24, self.log_array);
        put_u64(&mut b, 32, self.atime_ns);
        put_u64(&mut b, 40, self.mtime_ns);
        put_u64(&mut b, 48, self.ctime_ns);
        put_u64(&mut b, 56, self.rdev);
        let crc = record_crc(&b);
        put_u32(&mut b, 124, crc);
        b
    }

    /// Decode and validate.
    pub fn decode(ino: u64, b: &[u8]) -> Result<InodeRecord> {
        let what = || format!("inode {ino}");
        if b.len() < INODE_SIZE as usize || le_u32(b, 0) != INODE_MAGIC {
            return Err(Error::corrupt(what(), "not an initialised inode record"));
        }
        if record_crc(b) != le_u32(b, 124) {
            return Err(Error::corrupt(what(), "checksum mismatch"));
        }
        let kind = FileKind::from_code(b[8])
            .ok_or_else(|| Error::corrupt(what(), format!("unknown kind {}", b[8])))?;
        Ok(InodeRecord {
            generation: le_u32(b, 4),
            kind,
            mode: le_u32(b, 12),
            uid: le_u32(b, 16),
            gid: le_u32(b, 20),
            log_array: le_u64(b, 24),
            atime_ns: le_u64(b, 32),
            mtime_ns: le_u64(b, 40),
            ctime_ns: le_u64(b, 48),
            rdev: le_u64(b, 56),
        })
    }

    /// The record's log word, decoded.
    pub fn log_word(&self) -> LogWord {
        LogWord::decode(self.log_array)
    }

    /// The generation stored in a raw record, if it looks initialised (used
    /// when reusing a slot, so the new generation differs from the old).
    pub fn raw_generation(b: &[u8]) -> u32 {
        if b.len() >= 8 && le_u32(b, 0) == INODE_MAGIC {
            le_u32(b, 4)
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_words_round_trip() {
        assert_eq!(LogWord::decode(0), LogWord::Empty);
        assert_eq!(LogWord::decode(LOG_WORD_DIRECT), LogWord::Empty);
        assert_eq!(LogWord::decode(77), LogWord::Array(77));
        for (index, head, seq) in [
            (0, 1, 0),
            (5, KEY_LIMIT - 1, u64::MAX),
            (MAX_SUBLOGS - 1, 9, 1 << 33),
        ] {
            let w = LogWord::direct(index, head, seq);
            assert_eq!(
                LogWord::decode(w),
                LogWord::Direct {
                    index,
                    head,
                    check: seq_check(seq)
                }
            );
        }
        assert_ne!(seq_check(1 << 32 | 1), seq_check(3 << 32 | 1));
    }
}
