//! Reading an inode's log back from media (mount, fsck).
//!
//! The scan trusts no tail pointer: it walks every chain from the log array,
//! checks each page's footer, and accepts an entry only if its commit mark
//! and checksum are valid. Within a page it stops at the first slot that is
//! neither a committed entry nor a voided one; that is where the sub-log's
//! next append goes.

use super::{EntryLoc, SubLog, VOID_MAGIC, entry_loc};
use crate::error::{Error, Result};
use crate::layout::*;
use crate::media::Media;
use std::collections::HashSet;

/// One sub-log as found on media.
#[derive(Debug, Default)]
pub struct ScannedSublog {
    /// Index in the log array.
    pub index: usize,
    /// Pages, head first.
    pub pages: Vec<u64>,
    /// First free slot in the last page.
    pub next_slot: u64,
    /// Committed entries in log order, with their locations.
    pub entries: Vec<(EntryLoc, Entry)>,
    /// Entries of an incomplete group at the tail (to be voided at mount).
    pub incomplete: Vec<(EntryLoc, usize)>,
}

impl ScannedSublog {
    /// The DRAM state a mounted log starts from.
    pub fn to_sublog(&self) -> SubLog {
        SubLog {
            pages: self.pages.clone(),
            next_slot: self.next_slot,
            last_mtime_ns: 0,
        }
    }
}

/// Check that `block` may hold log structures.
pub fn check_block(sb: &Superblock, block: u64, what: impl Fn() -> String) -> Result<()> {
    if block < sb.data_start || block >= sb.total_blocks {
        return Err(Error::corrupt(
            what(),
            format!("block {block} outside the data region"),
        ));
    }
    Ok(())
}

/// Scan the log of inode `ino` whose log array is `array_block`.
pub fn scan_log(
    media: &Media,
    sb: &Superblock,
    ino: u64,
    array_block: u64,
) -> Result<Vec<ScannedSublog>> {
    check_block(sb, array_block, || format!("inode {ino} log array"))?;
    let heads = media.read_vec(array_block * BLOCK_SIZE, BLOCK_SIZE as usize)?;
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for index in 0..MAX_SUBLOGS {
        let head = le_u64(&heads, index * 8);
        if head == 0 {
            continue;
        }
        out.push(scan_chain(media, sb, ino, index, head, &mut seen)?);
    }
    Ok(out)
}

fn scan_chain(
    media: &Media,
    sb: &Superblock,
    ino: u64,
    index: usize,
    head: u64,
    seen: &mut HashSet<u64>,
) -> Result<ScannedSublog> {
    let mut sub = ScannedSublog {
        index,
        ..Default::default()
    };
    let mut pending: Vec<(EntryLoc, Entry, usize)> = Vec::new();
    let mut page = head;
    while page != 0 {
        let what = || format!("inode {ino} sub-log {index} log page {page}");
        check_block(sb, page, what)?;
        if !seen.insert(page) {
            return Err(Error::corrupt(what(), "log page linked twice (cycle)"));
        }
        let bytes = media.read_vec(page * BLOCK_SIZE, BLOCK_SIZE as usize)?;
        let footer = &bytes[LOG_FOOTER_OFFSET as usize..];
        if le_u32(footer, 20) != LOG_PAGE_MAGIC || le_u64(footer, 8) != ino {
            return Err(Error::corrupt(what(), "bad log page footer"));
        }
        sub.pages.push(page);
        let mut slot = 0u64;
        while slot < ENTRY_SLOTS_PER_PAGE {
            let at = (slot * SLOT_SIZE) as usize;
            let header = &bytes[at..at + 64];
            let n = header[1] as usize;
            if le_u32(header, 60) == VOID_MAGIC && (1..=MAX_ENTRY_SLOTS).contains(&n) {
                slot += n as u64;
                continue;
            }
            let Some(n) = Entry::claimed_slots(header) else {
                break;
            };
            if slot + n as u64 > ENTRY_SLOTS_PER_PAGE {
                break;
            }
            let Some((entry, flags)) = Entry::decode(&bytes[at..at + n * SLOT_SIZE as usize])
            else {
                break;
            };
            pending.push((entry_loc(page, slot), entry, n));
            if flags & FLAG_GROUP_CONTINUES == 0 {
                sub.entries
                    .extend(pending.drain(..).map(|(l, e, _)| (l, e)));
            }
            slot += n as u64;
        }
        sub.next_slot = slot;
        page = le_u64(footer, 0);
    }
    sub.incomplete = pending.into_iter().map(|(l, _, n)| (l, n)).collect();
    Ok(sub)
}
