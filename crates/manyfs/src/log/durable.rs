//! Durable marks: which committed entries count when the media is a file in
//! the page cache (`file` mode, commit rule [`CommitRule::Marked`]).
//!
//! The page cache writes any dirty 4 KiB page back at any moment, in any
//! order; only a completed `msync` is a barrier. So a commit word being on
//! disk proves nothing about the entry's other slots, its data pages or the
//! page a `next` link points to. Instead each log page footer carries a
//! **durable mark**: the number of slots whose entries are durable, written
//! by a sync only after a barrier made those entries (and everything they
//! point to) durable, and made durable itself by a second barrier. Bit 31
//! seals a page: it is complete and its `next` page's footer was durable
//! before the seal was written.
//!
//! Recovery under the `Marked` rule (see `scan.rs`) accepts an entry only
//! below its page's mark, follows `next` only from a sealed page to a page
//! whose footer names the same inode, generation and sub-log and whose
//! sequence is at least the `next_seq` stored beside the link and above the
//! linking page's own, and accepts a head page from the log array only if
//! its footer matches and its sequence is at least the array's base
//! sequence. Anything else ends the sub-log there (a link that reached disk
//! before its page), never corruption.
//!
//! Sequences grow per log, start each mount above anything an earlier mount
//! used (`mount_epoch << 32`), and a compaction's new array records a base
//! above every page of the old log, so stale pages left on media by a freed
//! block never match.
//!
//! Links change in an order that keeps every write-back state acceptable:
//! a new page's sequence is stored in `next_seq` before `next`; garbage
//! collection stores `next` (to a page with a higher sequence) before
//! `next_seq`, and unlinks a page only once its successor's footer is
//! durable.

use super::{InodeLog, LogSpace, lock};
use crate::error::Result;
use crate::layout::*;
use crate::media::Media;
use std::sync::atomic::Ordering;

/// DRAM bookkeeping of one log page.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PageMeta {
    /// Page sequence (also in the footer).
    pub seq: u64,
    /// Slots used, final once a later page is linked.
    pub used: u64,
    /// The durable mark last written to the footer.
    pub marked: u32,
    /// Whether the page's footer is known to be durable.
    pub footer_durable: bool,
}

impl PageMeta {
    /// A freshly linked page.
    pub fn new(seq: u64) -> Self {
        PageMeta {
            seq,
            ..Default::default()
        }
    }
}

/// Marks a sync will write for one log: (sub-log, page, mark).
pub type LogMarks = Vec<(usize, u64, u32)>;

/// Byte offset of the durable mark of log page `page`.
pub fn mark_offset(page: u64) -> u64 {
    page * BLOCK_SIZE + LOG_FOOTER_OFFSET + FOOTER_MARK
}

impl InodeLog {
    /// Register the log as having undurable state, once per sync period.
    pub(crate) fn note_dirty(&self, space: &dyn LogSpace) {
        if space.keeps_marks()
            && !self.dirty.load(Ordering::Relaxed)
            && !self.dirty.swap(true, Ordering::AcqRel)
        {
            space.note_dirty(self.ino);
        }
    }

    /// Whether the log has state no sync has snapshotted yet.
    pub fn is_dirty(&self) -> bool {
        self.dirty.load(Ordering::Acquire)
    }

    /// Forget the dirty flag (a sync is about to snapshot the log).
    pub fn clear_dirty(&self) {
        self.dirty.store(false, Ordering::Release);
    }

    /// The marks that would make everything appended so far count: full
    /// pages sealed with their final count, each tail page its next slot.
    /// Takes each sub-log's mutex briefly.
    ///
    /// Also takes (into `blocks`) the block
    /// ranges recorded by appends since the last snapshot: what a barrier
    /// must make durable before those marks may be written. A sync that
    /// calls this must hold the log's `sync_state` mutex until its marks
    /// are written (or it failed), so two syncs of one log never overlap.
    pub fn snapshot_for_sync(&self, blocks: &mut Vec<(u64, u64)>) -> LogMarks {
        let mut out = Vec::new();
        for (idx, m) in self.sublogs.iter().enumerate() {
            let mut sub = lock(m);
            // Keep the sub-log's capacity: the next append reuses it.
            blocks.extend_from_slice(&sub.unsynced);
            sub.unsynced.clear();
            let n = sub.pages.len();
            for i in 0..n {
                let mark = if i + 1 < n {
                    sub.meta[i].used as u32 | MARK_SEALED
                } else {
                    sub.next_slot as u32
                };
                if sub.meta[i].marked != mark || !sub.meta[i].footer_durable {
                    out.push((idx, sub.pages[i], mark));
                }
            }
        }
        out
    }

    /// After a barrier made everything in `marks` durable: store the marks
    /// (pages unlinked meanwhile are skipped) and return the pages written.
    /// With `barrier_follows`, the caller's second barrier makes the
    /// written pages durable, so their footers count as durable from now
    /// on; without it (a log no name reaches yet, see
    /// `FsCore::premark_unnamed`) they do not.
    pub fn apply_marks(
        &self,
        media: &Media,
        marks: &LogMarks,
        barrier_follows: bool,
        written: &mut Vec<u64>,
    ) -> Result<()> {
        let mut i = 0;
        while i < marks.len() {
            let idx = marks[i].0;
            let mut sub = lock(&self.sublogs[idx]);
            let mut hint = 0;
            while i < marks.len() && marks[i].0 == idx {
                let (_, page, mark) = marks[i];
                i += 1;
                let Some(j) = (hint..sub.pages.len())
                    .chain(0..hint)
                    .find(|&j| sub.pages[j] == page)
                else {
                    continue;
                };
                hint = j;
                sub.meta[j].footer_durable |= barrier_follows;
                // Marks only grow: a page's final count, sealed, is above
                // every count it had as a tail.
                if mark > sub.meta[j].marked {
                    media.store(mark_offset(page), &mark.to_le_bytes())?;
                    sub.meta[j].marked = mark;
                    written.push(page);
                }
            }
        }
        Ok(())
    }

    /// Record that the block ranges `ranges` must be durable before the
    /// next marks of this log (as an append records its own).
    pub fn add_unsynced(&self, ranges: &[(u64, u64)]) {
        let mut sub = lock(&self.sublogs[0]);
        for &(s, e) in ranges {
            super::note_unsynced(&mut sub.unsynced, s, e);
        }
    }

    /// Sub-log states for the end of a mount: (index, pages, metas, next slot).
    pub fn for_each_sublog(&self, mut f: impl FnMut(usize, &[u64], &mut [PageMeta], u64)) {
        for (idx, m) in self.sublogs.iter().enumerate() {
            let mut sub = lock(m);
            let sub = &mut *sub;
            f(idx, &sub.pages, &mut sub.meta, sub.next_slot);
        }
    }
}
