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
//! sequence (a head named by the inode record's direct log word: only if
//! its footer matches and its sequence gives the word's 24-bit check). Anything else ends the sub-log there (a link that reached disk
//! before its page), never corruption.
//!
//! Sequences grow per log, start each mount above anything an earlier mount
//! used (`mount_epoch << 32`), and a compaction's new array records a base
//! above every page of the old log, so stale pages left on media by a freed
//! block never match.
//!
//! **One barrier** (commit rule [`CommitRule::Checked`]). A per-inode sync
//! whose marks depend only on data blocks of checksummed write entries and
//! on new log pages writes the marks first and makes data, log pages and
//! marks durable with a single barrier ([`MarkOrder::WithBarrier`]). A
//! power cut during that barrier may leave a mark on disk without the data
//! it covers; recovery tells: every `FileWrite` entry written in `file`
//! mode carries the crc32 of its data blocks, and each footer carries a
//! **checked count**, the mark the page's previous completed sync made
//! durable. Entries below it were covered by a completed barrier; a
//! checksummed write entry from there up to the mark is verified against
//! its data at mount, and the first mismatch ends its sub-log there (as if
//! the mark had stopped before it: the sync that wrote it never returned).
//! A new log page missing from disk is already rejected by its footer
//! check. Anything else a mark depends on (a log word or array naming a new head, a
//! directory entry's target inode) cannot be verified, so such a sync keeps
//! two barriers ([`MarkOrder::AfterBarrier`]), as does every full sync;
//! both raise the checked count to the mark. A block is reused only after a
//! full sync, whose marks raise the checked count of every page of the
//! inodes it covers, so an entry whose block was reused is never verified.
//!
//! Links change in an order that keeps every write-back state acceptable:
//! a new page's sequence is stored in `next_seq` before `next`; garbage
//! collection stores `next` (to a page with a higher sequence) before
//! `next_seq`, and unlinks a page only once its successor's footer is
//! durable.

use super::page::PageMeta;
use super::{InodeLog, LogSpace, lock};
use crate::error::Result;
use crate::layout::*;
use crate::media::Media;
use std::sync::atomic::Ordering;

/// Marks a sync will write for one log: (sub-log, page, mark).
pub type LogMarks = Vec<(usize, u64, u32)>;

/// Byte offset of the durable mark of log page `page`.
pub fn mark_offset(page: u64) -> u64 {
    page * BLOCK_SIZE + LOG_FOOTER_OFFSET + FOOTER_MARK
}

/// A durability point for the footers of `pages`, log pages whose marks
/// or checked counts were stored (left sorted and deduplicated): their
/// whole pages in `file` mode, their footer line alone on a tiered `pm`
/// pool, where every other store to a log page was flushed when made (an
/// `fsync` then persists one line per marked page instead of 64).
pub fn sync_mark_pages(media: &Media, pages: &mut Vec<u64>) -> Result<()> {
    media.sync_page_lines(pages, LOG_FOOTER_OFFSET)
}

/// Byte offset of the checked count of log page `page`.
pub fn checked_offset(page: u64) -> u64 {
    page * BLOCK_SIZE + LOG_FOOTER_OFFSET + FOOTER_CHECKED
}

/// Raise the checked count of each page of `sublogs` (as recovery read
/// them under the `Checked` rule) to the slots recovery accepted. Call it
/// before blocks recovery found free are reused (a rename redone at mount,
/// repair), and make it durable first: an entry whose data block is reused
/// must never be verified. Returns whether anything was stored.
pub fn settle_checked<'a>(
    media: &Media,
    sublogs: impl IntoIterator<Item = &'a super::scan::ScannedSublog>,
) -> Result<bool> {
    let mut stored = false;
    for s in sublogs {
        for (&page, meta) in s.pages.iter().zip(&s.meta) {
            if u64::from(meta.checked) < meta.used {
                media.store(checked_offset(page), &(meta.used as u32).to_le_bytes())?;
                stored = true;
            }
        }
    }
    Ok(stored)
}

/// How a sync's marks are ordered with the barrier that makes what they
/// cover durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkOrder {
    /// A completed barrier already made everything the marks cover
    /// durable: the checked count rises to the mark.
    AfterBarrier,
    /// The marks reach the disk in the same barrier as what they cover:
    /// the checked count rises only to the mark the previous completed
    /// sync wrote, and footers count as durable only once that barrier
    /// completed ([`InodeLog::confirm_footers`]).
    WithBarrier,
    /// No barrier orders these marks: the log is not reachable by any name
    /// yet (`FsCore::premark_unnamed`); the sync that makes its name count
    /// orders what they cover first. Footers do not count as durable and
    /// checked counts stay.
    Unnamed,
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
    /// must make durable before those marks may be written (sets `ordered`
    /// if one of them cannot share the marks' barrier, see
    /// [`super::SubLog::ordered_deps`]). A sync that
    /// calls this must hold the log's `sync_state` mutex until its marks
    /// are written (or it failed), so two syncs of one log never overlap.
    pub fn snapshot_for_sync(&self, blocks: &mut Vec<(u64, u64)>, ordered: &mut bool) -> LogMarks {
        let mut out = Vec::new();
        for (idx, slot) in self.existing() {
            // Sealed pages in runs, the mutex released between runs (a
            // checkpoint under a steady appender has hundreds to look at):
            // a sealed page's count never changes, so its mark read in an
            // earlier run is final. The tail's mark and the block ranges
            // the marks depend on are read last, in one hold: every entry
            // a mark read earlier covers was appended before, so its
            // ranges are in `unsynced` by then. Runs resume after the last
            // page seen, by sequence: pages unlinked meanwhile shift the
            // indices, and new pages only come after.
            // Vectors grow outside the mutex, never under it: a grown
            // vector's fresh memory is faulted in (and zeroed, up to a 2 MiB
            // huge page at a time) on its first store, hundreds of
            // microseconds an appender would wait.
            let mut seen: Option<u64> = None;
            loop {
                // A run pushes at most MARKS_PER_HOLD + 1 marks (below).
                out.reserve(MARKS_PER_HOLD + 1);
                let mut sub = lock(&slot.log);
                let n = sub.pages.len();
                // Skip the settled prefix, and extend it (never to the tail).
                while (sub.settled as usize) + 1 < n && {
                    let m = &sub.meta[sub.settled as usize];
                    m.marked == m.used as u32 | MARK_SEALED
                        && m.footer_durable
                        && m.checked == m.used as u32
                } {
                    sub.settled += 1;
                }
                let first = (sub.settled as usize).min(n);
                let start = seen
                    .map_or(first, |seq| sub.meta.partition_point(|m| m.seq <= seq))
                    .max(first);
                let sealed = n.saturating_sub(1);
                let last = if sealed > start + MARKS_PER_HOLD {
                    start + MARKS_PER_HOLD
                } else {
                    n
                };
                let unsynced = sub.unsynced.len();
                if last == n && blocks.capacity() - blocks.len() < unsynced {
                    // The final run takes the recorded ranges: make room
                    // first, then run it again (nothing was taken yet).
                    drop(sub);
                    blocks.reserve(unsynced);
                    continue;
                }
                for i in start..last {
                    let mark = if i + 1 < n {
                        sub.meta[i].used as u32 | MARK_SEALED
                    } else {
                        sub.next_slot as u32
                    };
                    if sub.meta[i].marked != mark
                        || !sub.meta[i].footer_durable
                        || sub.meta[i].checked != mark & !MARK_SEALED
                    {
                        out.push((idx, sub.pages[i], mark));
                    }
                }
                if last < n {
                    seen = Some(sub.meta[last - 1].seq);
                    drop(sub);
                    slot.let_waiters_in();
                    continue;
                }
                // Keep the sub-log's capacity: the next append reuses it.
                blocks.extend_from_slice(&sub.unsynced);
                sub.unsynced.clear();
                *ordered |= std::mem::take(&mut sub.ordered_deps);
                break;
            }
        }
        out
    }

    /// Store the marks (pages unlinked meanwhile are skipped) and their
    /// checked counts as `order` allows, and return the pages written.
    /// Under [`MarkOrder::AfterBarrier`] a barrier made everything in
    /// `marks` durable before this call.
    pub fn apply_marks(
        &self,
        media: &Media,
        marks: &LogMarks,
        order: MarkOrder,
        written: &mut Vec<u64>,
    ) -> Result<()> {
        // Grown here, not under a sub-log's mutex (see `snapshot_for_sync`).
        written.reserve(marks.len());
        self.each_marked_page(marks, |meta, page, mark| {
            let before = meta.marked;
            // Marks only grow: a page's final count, sealed, is above
            // every count it had as a tail.
            let grows = mark > before;
            let checked = match order {
                MarkOrder::AfterBarrier => {
                    meta.footer_durable = true;
                    mark & !MARK_SEALED
                }
                // What the previous completed sync of the page made
                // durable; raised only with the mark (a checked-only
                // update waits for a sync that orders).
                MarkOrder::WithBarrier if grows => before & !MARK_SEALED,
                MarkOrder::WithBarrier | MarkOrder::Unnamed => meta.checked,
            };
            // The mark first: a page written back between the two stores
            // verifies more, never less.
            let mut wrote = false;
            if grows {
                media.store(mark_offset(page), &mark.to_le_bytes())?;
                meta.marked = mark;
                wrote = true;
            }
            if checked > meta.checked {
                media.store(checked_offset(page), &checked.to_le_bytes())?;
                meta.checked = checked;
                wrote = true;
            }
            if wrote {
                written.push(page);
            }
            Ok(())
        })
    }

    /// After a barrier that wrote the footers of the pages in `marks`
    /// completed: those footers, with the mark and checked count stored in
    /// them, are durable.
    pub fn confirm_footers(&self, marks: &LogMarks) {
        let _ = self.each_marked_page(marks, |meta, _, _| {
            meta.footer_durable = true;
            meta.mark_durable = meta.marked & !MARK_SEALED;
            meta.checked_durable = meta.checked;
            Ok(())
        });
    }

    /// Whether the data block of the entry at `loc` may be overwritten in
    /// place, in `file` mode: only if recovery will never verify that
    /// entry's checksum (its slot is below a durable checked count), since
    /// an overwritten block no longer matches it. If the entry is not there
    /// yet but a completed sync made it durable, and `raise` is set, this
    /// stores the page's checked count up to its durable mark and makes it
    /// durable (one barrier over that page) first. Holds the log's sync
    /// mutex for that, so no sync of this log runs meanwhile.
    pub fn settle_for_overwrite(
        &self,
        space: &dyn LogSpace,
        loc: super::EntryLoc,
        raise: bool,
    ) -> Result<bool> {
        let media = space.media();
        let (page, slot) = (super::loc_page(loc), super::loc_slot(loc) as u32);
        let Some(idx) = self.sublog_of(media, page) else {
            return Ok(false);
        };
        let meta_of = |sub: &super::SubLog| Self::find_page(media, sub, page).map(|i| sub.meta[i]);
        match meta_of(&lock(self.sub(idx))) {
            Some(m) if m.checked_durable > slot => return Ok(true),
            Some(m) if raise && m.mark_durable > slot => {}
            _ => return Ok(false),
        }
        let _sync = self.sync_state.lock();
        let target = {
            let mut sub = lock(self.sub(idx));
            let Some(i) = Self::find_page(media, &sub, page) else {
                return Ok(false);
            };
            let meta = &mut sub.meta[i];
            if meta.checked_durable > slot {
                return Ok(true);
            }
            if meta.mark_durable <= slot {
                return Ok(false);
            }
            let target = meta.mark_durable;
            if meta.checked < target {
                media.store(checked_offset(page), &target.to_le_bytes())?;
                meta.checked = target;
            }
            target
        };
        sync_mark_pages(media, &mut vec![page])?;
        let mut sub = lock(self.sub(idx));
        if let Some(i) = Self::find_page(media, &sub, page) {
            let meta = &mut sub.meta[i];
            meta.checked_durable = meta.checked_durable.max(target);
        }
        Ok(true)
    }

    /// Call `f(meta, page, mark)` for each page of `marks` still in its
    /// sub-log, under that sub-log's mutex.
    fn each_marked_page(
        &self,
        marks: &LogMarks,
        mut f: impl FnMut(&mut PageMeta, u64, u32) -> Result<()>,
    ) -> Result<()> {
        let mut i = 0;
        while i < marks.len() {
            let idx = marks[i].0;
            let mut sub = lock(self.sub(idx));
            // Marks name pages after the settled prefix (the snapshot
            // skipped it): search from there, wrapping around.
            let mut hint = (sub.settled as usize).min(sub.pages.len());
            let mut done_here = 0;
            while i < marks.len() && marks[i].0 == idx {
                if done_here == MARKS_PER_HOLD {
                    // A checkpoint marks every page appended since the
                    // last one (hundreds under a steady appender): let the
                    // appender of this sub-log in between. Each page's
                    // mark is applied whole under the mutex, which is all
                    // an append needs; pages unlinked meanwhile are not
                    // found and skipped, as below.
                    drop(sub);
                    self.slot(idx).let_waiters_in();
                    sub = lock(self.sub(idx));
                    hint = hint.min(sub.pages.len());
                    done_here = 0;
                }
                let (_, page, mark) = marks[i];
                i += 1;
                done_here += 1;
                let Some(j) = (hint..sub.pages.len())
                    .chain(0..hint)
                    .find(|&j| sub.pages[j] == page)
                else {
                    continue;
                };
                hint = j;
                f(&mut sub.meta[j], page, mark)?;
            }
        }
        Ok(())
    }

    /// Record that the block ranges `ranges` must be durable before the
    /// next marks of sub-log `sublog` of this log (as an append records its
    /// own; the caller appends what depends on them to that sub-log).
    pub fn add_unsynced(&self, sublog: usize, ranges: &[(u64, u64)]) {
        let mut sub = lock(self.sub(sublog % usize::from(self.nsublogs)));
        // Another log's blocks: checksums cannot verify them at mount.
        sub.ordered_deps |= !ranges.is_empty();
        for &(s, e) in ranges {
            super::note_unsynced(&mut sub.unsynced, s, e);
        }
    }

    /// Sub-log states for the end of a mount: (index, pages, metas, next slot).
    pub fn for_each_sublog(&self, mut f: impl FnMut(usize, &[u64], &mut [PageMeta], u64)) {
        for (idx, slot) in self.existing() {
            let mut sub = lock(&slot.log);
            let sub = &mut *sub;
            f(idx, &sub.pages, &mut sub.meta, sub.next_slot);
        }
    }
}

/// Pages a sync marks (or confirms) per hold of a sub-log's mutex before it
/// lets that sub-log's appenders in: the most an appender waits for. Four
/// pages hold it for 0.5-0.7 us at the 90th percentile, 16 for 1.4-1.8 us
/// (docs/benchmarks.md); more runs cost the sync a lock round trip each.
const MARKS_PER_HOLD: usize = 4;
