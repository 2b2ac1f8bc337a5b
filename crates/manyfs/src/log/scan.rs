//! Reading an inode's log back from media (mount, fsck).
//!
//! The scan trusts no tail pointer: it walks every chain from the inode's
//! log word (one head page named directly, or a log array of heads),
//! checks each page's footer, and accepts an entry only if its commit mark
//! and checksum are valid. Within a page it stops at the first slot that is
//! neither a committed entry nor a voided one; that is where the sub-log's
//! next append goes. Under the `Checked` rule it also stops at the first
//! checksummed write entry at or above its page's checked count whose data
//! does not match (`durable.rs`), and ends the sub-log there.

use super::page::PageMeta;
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
    /// Per page: sequence, slots used (where the scan stopped), durable mark.
    pub meta: Vec<PageMeta>,
    /// `Marked` rule: the last accepted page links on to a page that does
    /// not count (its `next` must be cut at mount).
    pub cut_next: bool,
    /// `Marked` rule: the array names a head page that does not count (the
    /// head must be cleared at mount).
    pub cut_head: bool,
    /// `Checked` rule: the write entry whose data did not match its
    /// checksum, where the sub-log ends (its sync never completed).
    pub torn: Option<EntryLoc>,
    /// Whether the last page read has bytes other than zero past
    /// `next_slot` (what an interrupted append left there: a writable
    /// mount clears them). Found while the page's bytes are at hand, so
    /// the mount need not read the tail page again.
    pub tail_dirty: bool,
}

impl ScannedSublog {
    /// Sub-log `index` whose head does not count: empty, its head to cut.
    pub fn cut(index: usize) -> Self {
        ScannedSublog {
            index,
            cut_head: true,
            ..Default::default()
        }
    }

    /// The DRAM state a mounted log starts from.
    pub fn to_sublog(&self) -> SubLog {
        SubLog {
            pages: self.pages.clone(),
            next_slot: self.next_slot,
            last_mtime_ns: 0,
            meta: self.meta.clone(),
            ..SubLog::recovered()
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

/// What one thread's scans reuse from inode to inode: the copies of a log
/// array and of a log page, the set of pages seen (cycle check) and the
/// entries of an open group. Recovery reads every inode's array and pages;
/// with these, that costs two 4 KiB copies into buffers already in the
/// cache and no allocation of its own.
pub struct ScanBuf {
    array: Box<[u8]>,
    /// The array's words.
    heads: Box<[u64]>,
    page: Box<[u8]>,
    seen: HashSet<u64>,
    pending: Vec<PendingEntry>,
}

impl Default for ScanBuf {
    fn default() -> Self {
        ScanBuf {
            array: vec![0; BLOCK_SIZE as usize].into_boxed_slice(),
            heads: vec![0; (BLOCK_SIZE / 8) as usize].into_boxed_slice(),
            page: vec![0; BLOCK_SIZE as usize].into_boxed_slice(),
            seen: HashSet::new(),
            pending: Vec::new(),
        }
    }
}

/// How a head page named by an inode's log word must identify itself under
/// the `Marked` and `Checked` rules (besides owner, generation and sub-log).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadCheck {
    /// Named by a log array: a sequence at least the array's base.
    BaseSeq(u64),
    /// Named by the record's direct word: a sequence with this
    /// [`seq_check`].
    SeqCheck(u32),
}

/// Check a direct log word's sub-log index.
pub fn check_direct_index(ino: u64, index: usize) -> Result<()> {
    if index >= MAX_SUBLOGS {
        return Err(Error::corrupt(
            format!("inode {ino} log word"),
            format!("sub-log index {index} out of range"),
        ));
    }
    Ok(())
}

/// Scan the log of inode `ino` (generation `generation`, log word `word`,
/// see [`LogWord`]) under `rule`, reading through `buf` (reused across
/// inodes).
pub fn scan_log_buf(
    media: &Media,
    sb: &Superblock,
    ino: u64,
    generation: u32,
    word: u64,
    rule: CommitRule,
    buf: &mut ScanBuf,
) -> Result<Vec<ScannedSublog>> {
    buf.seen.clear();
    let chain = Chain {
        media,
        sb,
        ino,
        generation,
        rule,
    };
    let array_block = match LogWord::decode(word) {
        LogWord::Empty => return Ok(Vec::new()),
        LogWord::Direct { index, head, check } => {
            // One sub-log, its head in the record: no array to read.
            check_direct_index(ino, index)?;
            return Ok(vec![chain.scan(
                index,
                head,
                HeadCheck::SeqCheck(check),
                &mut buf.seen,
                &mut buf.page,
                &mut buf.pending,
            )?]);
        }
        LogWord::Array(a) => a,
    };
    check_block(sb, array_block, || format!("inode {ino} log array"))?;
    media.read(array_block * BLOCK_SIZE, &mut buf.array)?;
    let heads = &buf.array[..];
    let base_seq = le_u64(heads, ARRAY_BASE_SEQ_WORD * 8);
    // Most heads are zero (a log uses the sub-logs of the CPUs that wrote
    // it). The array is read as words once, into a buffer whose zero words
    // the compiler checks many at a time: every inode's array is read at
    // mount.
    for (w, b) in buf.heads.iter_mut().zip(heads.chunks_exact(8)) {
        *w = le_u64(b, 0);
    }
    let words = &buf.heads[..MAX_SUBLOGS];
    let used = || {
        words
            .iter()
            .enumerate()
            .filter(|&(_, &head)| head != 0)
            .map(|(index, &head)| (index, head))
    };
    // Sized for the heads in use: most inodes have one sub-log, and the
    // result lives until the mount has built its DRAM inode.
    let mut out = Vec::with_capacity(used().count());
    for (index, head) in used() {
        out.push(chain.scan(
            index,
            head,
            HeadCheck::BaseSeq(base_seq),
            &mut buf.seen,
            &mut buf.page,
            &mut buf.pending,
        )?);
    }
    Ok(out)
}

/// An entry read from a page, waiting for the end of its group.
pub(crate) type PendingEntry = (EntryLoc, Entry, usize);

/// How recovery reads one inode's log chains under a commit rule. `fsck`'s
/// tolerant walk uses the same pieces (head and link acceptance, the slot
/// walk of a page), so both agree on what counts.
pub(crate) struct Chain<'a> {
    pub media: &'a Media,
    pub sb: &'a Superblock,
    pub ino: u64,
    pub generation: u32,
    pub rule: CommitRule,
}

impl Chain<'_> {
    fn marked(&self) -> bool {
        self.rule.marked()
    }

    /// Whether the data a write entry (header slot `header`) points to
    /// matches the checksum it carries (true if it carries none).
    fn data_intact(&self, entry: &Entry, header: &[u8]) -> Result<bool> {
        let (
            Some(crc),
            Entry::FileWrite {
                block,
                npages,
                pgoff,
                file_end,
                ..
            },
        ) = (Entry::data_crc(header), entry)
        else {
            return Ok(true);
        };
        let n = u64::from(*npages);
        if !self.sb.data_range_ok(*block, n) {
            return Ok(false);
        }
        let len = crc.covered(*pgoff, *npages, *file_end);
        Ok(self.media.crc32(block * BLOCK_SIZE, len)? == crc.crc)
    }

    /// Under the `Marked` rule: whether `page` is the page a link with
    /// expected sequence `min_seq` means (footer of this inode, generation
    /// and sub-log, sequence at least `min_seq`).
    fn accepts(&self, page: u64, index: usize, min_seq: u64) -> Result<bool> {
        self.accepts_if(page, index, |seq| seq >= min_seq)
    }

    /// Whether `page` is a log page of this inode, generation and sub-log
    /// whose sequence passes `seq_ok`.
    fn accepts_if(&self, page: u64, index: usize, seq_ok: impl Fn(u64) -> bool) -> Result<bool> {
        if page < self.sb.data_start || page >= self.sb.total_blocks {
            return Ok(false);
        }
        let f = self
            .media
            .read_vec(page * BLOCK_SIZE + LOG_FOOTER_OFFSET, 64)?;
        Ok(le_u32(&f, 20) == LOG_PAGE_MAGIC
            && le_u64(&f, 8) == self.ino
            && le_u32(&f, 16) as usize == index
            && le_u32(&f, FOOTER_GENERATION as usize) == self.generation
            && seq_ok(le_u64(&f, FOOTER_SEQ as usize)))
    }

    /// Whether the head page `head` named by the log word or array counts.
    /// Always under the `Immediate` rule.
    pub fn head_counts(&self, index: usize, head: u64, check: HeadCheck) -> Result<bool> {
        Ok(!self.marked()
            || match check {
                HeadCheck::BaseSeq(base) => self.accepts(head, index, base)?,
                HeadCheck::SeqCheck(c) => self.accepts_if(head, index, |s| seq_check(s) == c)?,
            })
    }

    /// A scan of sub-log `index` from `head`, or `None` when the head does
    /// not count under the rule (the sub-log is then
    /// [`ScannedSublog::cut`]).
    pub fn start(
        &self,
        index: usize,
        head: u64,
        check: HeadCheck,
    ) -> Result<Option<ScannedSublog>> {
        // Most sub-logs of an inode rebuilt at mount are one page.
        Ok(self
            .head_counts(index, head, check)?
            .then(|| ScannedSublog {
                index,
                pages: Vec::with_capacity(1),
                meta: Vec::with_capacity(1),
                ..Default::default()
            }))
    }

    /// Read the entries of log page `page` (its bytes `bytes`, footer
    /// already checked for magic and owner) into `sub`: the page is
    /// appended to `sub.pages` and `sub.meta`, complete groups to
    /// `sub.entries`, a group still open stays in `pending`. Returns the
    /// page to go on with: its `next`, or 0 at the end of the chain or where
    /// the rule ends it (then `sub.cut_next` is set).
    pub fn read_page(
        &self,
        index: usize,
        page: u64,
        bytes: &[u8],
        sub: &mut ScannedSublog,
        pending: &mut Vec<PendingEntry>,
    ) -> Result<u64> {
        let marked = self.marked();
        let footer = &bytes[LOG_FOOTER_OFFSET as usize..];
        sub.pages.push(page);
        let mark = le_u32(footer, FOOTER_MARK as usize);
        let seq = le_u64(footer, FOOTER_SEQ as usize);
        let limit = if marked {
            u64::from(mark & !MARK_SEALED).min(ENTRY_SLOTS_PER_PAGE)
        } else {
            ENTRY_SLOTS_PER_PAGE
        };
        let checked_raw = le_u32(footer, FOOTER_CHECKED as usize);
        // Entries from here up to the mark may have been marked by a sync
        // that did not complete: their data is verified.
        let checked = if self.rule == CommitRule::Checked {
            u64::from(checked_raw)
        } else {
            limit
        };
        let mut torn = false;
        let mut slot = 0u64;
        while let Some((entry, flags, n)) = next_entry(bytes, &mut slot, limit) {
            let at = (slot * SLOT_SIZE) as usize;
            let header = &bytes[at..at + 64];
            if slot >= checked && !self.data_intact(&entry, header)? {
                torn = true;
                sub.torn = Some(entry_loc(page, slot));
                break;
            }
            pending.push((entry_loc(page, slot), entry, n));
            if flags & FLAG_GROUP_CONTINUES == 0 {
                sub.entries
                    .extend(pending.drain(..).map(|(l, e, _)| (l, e)));
            }
            slot += n as u64;
        }
        sub.next_slot = slot;
        // Compared with a zero page (one vectorised memcmp), not byte by
        // byte: this runs for every page of every inode at mount.
        const ZERO: [u8; LOG_FOOTER_OFFSET as usize] = [0; LOG_FOOTER_OFFSET as usize];
        let tail = ((slot.min(ENTRY_SLOTS_PER_PAGE)) * SLOT_SIZE) as usize;
        sub.tail_dirty = bytes[tail..LOG_FOOTER_OFFSET as usize] != ZERO[tail..];
        sub.meta.push(PageMeta {
            seq,
            used: slot,
            marked: mark,
            checked: checked_raw,
            footer_durable: true,
            mark_durable: checked_raw,
            checked_durable: checked_raw,
        });
        let next = le_u64(footer, 0);
        if torn {
            // As if the mark stopped before the torn entry: nothing after
            // it in this sub-log counts.
            sub.cut_next = next != 0;
            return Ok(0);
        }
        if marked && next != 0 {
            let next_seq = le_u64(footer, FOOTER_NEXT_SEQ as usize);
            if mark & MARK_SEALED == 0
                || !self.accepts(next, index, next_seq.max(seq.saturating_add(1)))?
            {
                sub.cut_next = true;
                return Ok(0);
            }
        }
        Ok(next)
    }

    fn scan(
        &self,
        index: usize,
        head: u64,
        check: HeadCheck,
        seen: &mut HashSet<u64>,
        bytes: &mut [u8],
        pending: &mut Vec<PendingEntry>,
    ) -> Result<ScannedSublog> {
        let (media, sb, ino) = (self.media, self.sb, self.ino);
        let Some(mut sub) = self.start(index, head, check)? else {
            return Ok(ScannedSublog::cut(index));
        };
        pending.clear();
        let mut page = head;
        while page != 0 {
            let what = || format!("inode {ino} sub-log {index} log page {page}");
            check_block(sb, page, what)?;
            if !seen.insert(page) {
                return Err(Error::corrupt(what(), "log page linked twice (cycle)"));
            }
            media.read(page * BLOCK_SIZE, bytes)?;
            let footer = &bytes[LOG_FOOTER_OFFSET as usize..];
            if le_u32(footer, 20) != LOG_PAGE_MAGIC || le_u64(footer, 8) != ino {
                return Err(Error::corrupt(what(), "bad log page footer"));
            }
            page = self.read_page(index, page, bytes, &mut sub, pending)?;
        }
        sub.incomplete = pending.drain(..).map(|(l, _, n)| (l, n)).collect();
        Ok(sub)
    }
}

/// The next entry of a log page's `bytes` at or after `*slot` and below
/// `limit`, skipping voided entries: the entry, its flags and its slot
/// count, with `*slot` at its first slot. `None` where the entries end (at
/// bytes that are not an entry, or one that would cross `limit`), with
/// `*slot` just past the last voided entry.
pub fn next_entry(bytes: &[u8], slot: &mut u64, limit: u64) -> Option<(Entry, u16, usize)> {
    while *slot < limit {
        let at = (*slot * SLOT_SIZE) as usize;
        let header = &bytes[at..at + 64];
        let n = header[1] as usize;
        if le_u32(header, 60) == VOID_MAGIC && (1..=MAX_ENTRY_SLOTS).contains(&n) {
            *slot += n as u64;
            continue;
        }
        let n = Entry::claimed_slots(header)?;
        if *slot + n as u64 > limit {
            return None;
        }
        let (entry, flags) = Entry::decode(&bytes[at..at + n * SLOT_SIZE as usize])?;
        return Some((entry, flags, n));
    }
    None
}
