//! The rename journal: makes a cross-directory rename atomic.
//!
//! A cross-directory rename changes two directory logs. Under the namespace
//! lock (one cross-directory rename at a time, like the kernel's rename
//! mutex) manyfs
//! 1. writes a journal record describing the rename and commits it,
//! 2. appends the add entry to the destination and the remove entry to the
//!    source directory,
//! 3. clears the record.
//!
//! A record still committed at mount means step 2 may be half done; recovery
//! applies the rename to the replayed directories and re-appends both entries
//! (adding and removing are idempotent), then clears the record.
//!
//! An exchange (`RENAME_EXCHANGE`) is journalled the same way: the record
//! also names the destination's inode, and step 2 appends an add entry to
//! each directory (each name now names the other inode).
//!
//! Block layout: 0 txid, 8 source dir, 16 destination dir, 24 inode, 32
//! generation (u32), 36 kind, 37 source name length, 38 destination name
//! length, 39 exchange flag (1: an exchange; 0 in version-2 pools), 40 the
//! destination's inode, 48 its generation (u32), 52 its kind, 64.. source
//! name, 320.. destination name, 4088 commit word (crc32 of bytes 0..4088 |
//! PENDING << 32).

use crate::error::Result;
use crate::inode::Child;
use crate::layout::*;
use crate::media::Media;

const PENDING: u32 = 0x5045_4e44; // "PEND"
const COMMIT_AT: usize = 4088;

/// A cross-directory rename in flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenameRecord {
    /// Transaction id (also stamped on the two directory entries).
    pub txid: u64,
    /// Source directory.
    pub src_dir: u64,
    /// Destination directory.
    pub dst_dir: u64,
    /// The inode moved.
    pub moving: Child,
    /// Name in the source directory.
    pub src_name: Vec<u8>,
    /// Name in the destination directory.
    pub dst_name: Vec<u8>,
    /// For an exchange: the inode the destination name named, which the
    /// source name names afterwards.
    pub exchange: Option<Child>,
}

impl RenameRecord {
    fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; BLOCK_SIZE as usize];
        put_u64(&mut b, 0, self.txid);
        put_u64(&mut b, 8, self.src_dir);
        put_u64(&mut b, 16, self.dst_dir);
        put_child(&mut b, 24, self.moving);
        b[37] = self.src_name.len() as u8;
        b[38] = self.dst_name.len() as u8;
        if let Some(x) = self.exchange {
            b[39] = 1;
            put_child(&mut b, 40, x);
        }
        b[64..64 + self.src_name.len()].copy_from_slice(&self.src_name);
        b[320..320 + self.dst_name.len()].copy_from_slice(&self.dst_name);
        b
    }
}

/// An inode reference in a record: number at `at`, generation at `at + 8`,
/// kind at `at + 12`.
fn put_child(b: &mut [u8], at: usize, c: Child) {
    put_u64(b, at, c.ino);
    put_u32(b, at + 8, c.generation);
    b[at + 12] = c.kind.code();
}

/// The inode reference [`put_child`] wrote (`None` for an unknown kind).
fn get_child(b: &[u8], at: usize) -> Option<Child> {
    Some(Child {
        ino: le_u64(b, at),
        generation: le_u32(b, at + 8),
        kind: FileKind::from_code(b[at + 12])?,
    })
}

/// Write and commit a record (step 1).
pub fn begin(media: &Media, rec: &RenameRecord) -> Result<()> {
    let off = JOURNAL_BLOCK * BLOCK_SIZE;
    let body = rec.encode();
    media.store(off, &body[..COMMIT_AT])?;
    media.persist(off, COMMIT_AT)?;
    let crc = crc32fast::hash(&body[..COMMIT_AT]);
    media.store_u64(
        off + COMMIT_AT as u64,
        u64::from(crc) | (u64::from(PENDING) << 32),
    )?;
    media.persist(off + COMMIT_AT as u64, 8)
}

/// Clear the record (step 3).
pub fn finish(media: &Media) -> Result<()> {
    let at = JOURNAL_BLOCK * BLOCK_SIZE + COMMIT_AT as u64;
    media.store_u64(at, 0)?;
    media.persist(at, 8)
}

/// The committed record, if a rename was in flight at the crash.
pub fn pending(media: &Media) -> Result<Option<RenameRecord>> {
    let b = media.read_vec(JOURNAL_BLOCK * BLOCK_SIZE, BLOCK_SIZE as usize)?;
    let word = le_u64(&b, COMMIT_AT);
    if (word >> 32) as u32 != PENDING || word as u32 != crc32fast::hash(&b[..COMMIT_AT]) {
        return Ok(None);
    }
    let (sl, dl) = (b[37] as usize, b[38] as usize);
    let Some(moving) = get_child(&b, 24) else {
        return Ok(None);
    };
    if sl == 0 || dl == 0 {
        return Ok(None);
    }
    let exchange = match b[39] {
        0 => None,
        1 => match get_child(&b, 40) {
            Some(x) => Some(x),
            None => return Ok(None),
        },
        _ => return Ok(None),
    };
    Ok(Some(RenameRecord {
        txid: le_u64(&b, 0),
        src_dir: le_u64(&b, 8),
        dst_dir: le_u64(&b, 16),
        moving,
        src_name: b[64..64 + sl].to_vec(),
        dst_name: b[320..320 + dl].to_vec(),
        exchange,
    }))
}
