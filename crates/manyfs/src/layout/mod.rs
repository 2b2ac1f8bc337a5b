//! On-media layout: every persistent structure, its size and its encoding.
//! `docs/layout.md` walks through the same structures for a newcomer.
//!
//! ```text
//! block 0            superblock
//! block 1            backup superblock
//! block 2            rename journal
//! block 3..          inode table (INODE_SIZE bytes per inode)
//! data_start..end    log arrays, log pages and data pages (block allocator)
//! ```
//!
//! A pool with several member files has a member table in blocks 0 and 1
//! after the superblock, and a reserved header block at the start of every
//! member but 0 (see [`members`]).

mod entry;
mod inode;
pub mod members;
mod superblock;

pub use entry::*;
pub use inode::*;
pub use superblock::*;

/// Size of a block: data pages, log pages and log arrays are one block each.
pub const BLOCK_SIZE: u64 = 4096;
/// Size of a log slot; entries are one or more consecutive slots.
pub const SLOT_SIZE: u64 = 64;
/// Slots in a log page; the last one is the page footer.
pub const SLOTS_PER_PAGE: u64 = BLOCK_SIZE / SLOT_SIZE;
/// Slots of a log page usable by entries.
pub const ENTRY_SLOTS_PER_PAGE: u64 = SLOTS_PER_PAGE - 1;
/// Sub-log heads in an inode's log array (one block of u64 words: the heads,
/// then the log's base page sequence in the last word).
pub const MAX_SUBLOGS: usize = (BLOCK_SIZE / 8) as usize - 1;
/// Longest file name, as on Linux.
pub const MAX_NAME_LEN: usize = 255;
/// Largest file: 2^30 pages of 4 KiB (4 TiB), the reach of the file index.
pub const MAX_FILE_SIZE: u64 = (1 << 30) * BLOCK_SIZE;
/// Inode number of the root directory.
pub const ROOT_INO: u64 = 1;
/// Keys of the in-memory radix trees (block, page and segment numbers) must
/// be below this bound (2^30); the format caps a pool's block count by it.
/// The index's radix tree is built to reach exactly this far.
pub const KEY_LIMIT: u64 = 1 << 30;

/// Block number of the primary superblock.
pub const SUPERBLOCK_BLOCK: u64 = 0;
/// Block number of the backup superblock.
pub const BACKUP_SUPERBLOCK_BLOCK: u64 = 1;
/// Block number of the rename journal.
pub const JOURNAL_BLOCK: u64 = 2;
/// First block of the inode table.
pub const INODE_TABLE_START: u64 = 3;

pub(crate) fn le_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
pub(crate) fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
pub(crate) fn le_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}
pub(crate) fn put_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}
pub(crate) fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
pub(crate) fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}
