//! Compaction: rewriting an inode's log as one fresh chain of its live
//! entries and switching the inode to it with one failure-atomic store.

use super::{
    EntryLocs, InodeLog, LogSpace, MutexGuard, Ordering, PageMeta, SubLog, entry_loc, loc_page,
    loc_slot, lock,
};
use crate::error::Result;
use crate::layout::*;
use smallvec::SmallVec;

impl InodeLog {
    /// Compact the log: write `entries` (each with its starting live
    /// references) as one fresh chain under a new log array, switch the
    /// inode to it with one failure-atomic store of the 8-byte word at
    /// `record_word` (the inode record's log array field), then free the old
    /// array and every old log page.
    ///
    /// Until the switch is durable the old log is the inode's log and the new
    /// blocks are unreachable (free at the next mount); after it, the new log
    /// is. The caller must keep every other append to this inode out.
    pub fn rewrite(
        &self,
        space: &dyn LogSpace,
        record_word: u64,
        entries: &[(Entry, u32)],
    ) -> Result<EntryLocs> {
        let media = space.media();
        // The new chain is the first slot's sub-log's; a log with an array
        // keeps one (its other sub-logs start again in it).
        let idx = self.first_slot().index();
        let encoded: Vec<EncodedEntry> = entries.iter().map(|(e, _)| e.encode(false)).collect();
        let chain = self.place_new_chain(space, idx, &encoded)?;
        if let Err(e) = self.write_new_chain_and_switch(space, record_word, idx, &chain, &encoded) {
            // The switch may or may not have reached the record: only free
            // the new blocks if the record still names the old log.
            if media.load_u64(record_word).ok() != Some(chain.word) {
                chain.free(space);
            }
            return Err(e);
        }
        self.switch_to_new_chain(
            space,
            chain.word,
            chain.meta(space),
            chain.pages,
            chain.next_slot,
        );
        for ((_, w), loc) in entries.iter().zip(&chain.places) {
            if let Some(c) = space.live_counter(loc_page(*loc)) {
                c.fetch_add(*w, Ordering::Relaxed);
            }
        }
        Ok(chain.places)
    }

    /// Allocates the blocks of a rewritten log (a new array if the log has
    /// one, and its pages), places `encoded` in them and numbers the pages.
    /// Nothing is written yet; on failure every block taken is freed again.
    fn place_new_chain(
        &self,
        space: &dyn LogSpace,
        idx: usize,
        encoded: &[EncodedEntry],
    ) -> Result<NewChain> {
        let mut chain = NewChain {
            array: None,
            pages: Vec::new(),
            used: Vec::new(),
            places: SmallVec::new(),
            next_slot: ENTRY_SLOTS_PER_PAGE,
            base_seq: 0,
            seqs: Vec::new(),
            marks: Vec::new(),
            word: 0,
        };
        if self.array_block().is_some() {
            chain.array = Some(space.alloc_meta_block()?);
        }
        for e in encoded {
            if chain.next_slot + e.slots() > ENTRY_SLOTS_PER_PAGE {
                match space.alloc_meta_block() {
                    Ok(b) => {
                        chain.pages.push(b);
                        chain.used.push(0);
                    }
                    Err(err) => {
                        chain.free(space);
                        return Err(err);
                    }
                }
                chain.next_slot = 0;
            }
            let page = *chain.pages.last().expect("page");
            chain.places.push(entry_loc(page, chain.next_slot));
            chain.next_slot += e.slots();
            *chain.used.last_mut().expect("page") = chain.next_slot;
        }
        // Every page of the new log carries a sequence above the base
        // recorded in its array; pages of the old log carry lower ones.
        chain.base_seq = self.take_seq();
        chain.seqs = chain.pages.iter().map(|_| self.take_seq()).collect();
        let n = chain.used.len();
        chain.marks = chain
            .used
            .iter()
            .enumerate()
            .map(|(i, &u)| u as u32 | if i + 1 < n { MARK_SEALED } else { 0 })
            .collect();
        chain.word = match (chain.array, chain.pages.first()) {
            (Some(a), _) => a,
            (None, Some(&head)) => LogWord::direct(idx, head, chain.seqs[0]),
            (None, None) => 0,
        };
        Ok(chain)
    }

    /// Writes the new chain (array, zeroed pages with their footers, the
    /// entries), makes it durable, then switches the inode to it with one
    /// failure-atomic store of the word at `record_word`.
    fn write_new_chain_and_switch(
        &self,
        space: &dyn LogSpace,
        record_word: u64,
        idx: usize,
        chain: &NewChain,
        encoded: &[EncodedEntry],
    ) -> Result<()> {
        let media = space.media();
        if let Some(new_array) = chain.array {
            media.nt_copy(new_array * BLOCK_SIZE, &[0u8; BLOCK_SIZE as usize])?;
            let base_at = new_array * BLOCK_SIZE + ARRAY_BASE_SEQ_WORD as u64 * 8;
            media.store_u64(base_at, chain.base_seq)?;
            media.flush(base_at, 8)?;
        }
        let (pages, seqs, marks) = (&chain.pages, &chain.seqs, &chain.marks);
        for (i, &p) in pages.iter().enumerate() {
            media.nt_copy(p * BLOCK_SIZE, &[0u8; BLOCK_SIZE as usize - 64])?;
            let mut footer = encode_log_footer(self.ino, idx as u32, self.generation, seqs[i]);
            footer[..8].copy_from_slice(&pages.get(i + 1).copied().unwrap_or(0).to_le_bytes());
            footer[FOOTER_NEXT_SEQ as usize..FOOTER_NEXT_SEQ as usize + 8]
                .copy_from_slice(&seqs.get(i + 1).copied().unwrap_or(0).to_le_bytes());
            // The whole new log is made durable before the switch (below),
            // so its marks may say so from the start.
            footer[FOOTER_MARK as usize..FOOTER_MARK as usize + 4]
                .copy_from_slice(&marks[i].to_le_bytes());
            footer[FOOTER_CHECKED as usize..FOOTER_CHECKED as usize + 4]
                .copy_from_slice(&(marks[i] & !MARK_SEALED).to_le_bytes());
            media.nt_copy(p * BLOCK_SIZE + LOG_FOOTER_OFFSET, &footer)?;
        }
        for (e, loc) in encoded.iter().zip(&chain.places) {
            let off = loc_page(*loc) * BLOCK_SIZE + loc_slot(*loc) * SLOT_SIZE;
            let mut body = e.body.clone();
            body[56..64].copy_from_slice(&e.commit_word.to_le_bytes());
            media.nt_copy(off, &body)?;
        }
        if let (Some(a), Some(&first)) = (chain.array, pages.first()) {
            let at = a * BLOCK_SIZE + idx as u64 * 8;
            media.store_u64(at, first)?;
            media.flush(at, 8)?;
        }
        media.fence();
        if space.keeps_marks() {
            // Page cache: only a completed sync orders the new log
            // before the switch that makes it the inode's log.
            media.sync_all()?;
        }
        media.store_u64(record_word, chain.word)?;
        media.persist(record_word, 8)
    }

    /// After a rewrite's switch is durable: makes the new chain (`word`,
    /// `pages` with their `meta`, next free slot `next_slot`) the DRAM
    /// state of the first slot's sub-log, empties the others, and retires
    /// the old array and every old log page.
    fn switch_to_new_chain(
        &self,
        space: &dyn LogSpace,
        word: u64,
        meta: Vec<PageMeta>,
        pages: Vec<u64>,
        next_slot: u64,
    ) {
        // The new chain is the first slot's (`existing` yields it first).
        let mut guards: Vec<MutexGuard<'_, SubLog>> =
            self.existing().map(|(_, s)| lock(&s.log)).collect();
        let mut old: Vec<u64> = self.array_block().into_iter().collect();
        for g in guards.iter_mut() {
            old.append(&mut g.pages);
            g.meta.clear();
            g.settled = 0;
            g.next_slot = 0;
            g.dead_held = 0;
            g.dead_skip = 0;
        }
        for (_, s) in self.existing() {
            if let Some(d) = s.dead.get() {
                lock(&d.pages).clear();
                d.fresh.store(0, Ordering::Relaxed);
            }
        }
        guards[0].meta = meta;
        guards[0].pages = pages;
        guards[0].next_slot = if guards[0].pages.is_empty() {
            0
        } else {
            next_slot
        };
        self.word.store(word, Ordering::Release);
        self.incarnation.fetch_add(1, Ordering::AcqRel);
        drop(guards);
        for b in old {
            if let Some(c) = space.live_counter(b) {
                c.store(0, Ordering::Relaxed);
            }
            space.retire_block(b);
        }
        self.note_dirty(space);
    }
}

/// A rewritten log before it replaces the old one (see [`InodeLog::rewrite`]).
struct NewChain {
    /// The new log array (when the old log had one).
    array: Option<u64>,
    /// The new pages, in chain order.
    pages: Vec<u64>,
    /// Per page: slots used.
    used: Vec<u64>,
    /// Where each entry goes.
    places: EntryLocs,
    /// The next free slot of the last page.
    next_slot: u64,
    /// The sequence base recorded in the new array.
    base_seq: u64,
    /// Per page: its sequence.
    seqs: Vec<u64>,
    /// Per page: its durable mark (sealed but for the last).
    marks: Vec<u32>,
    /// The log word naming the new log.
    word: u64,
}

impl NewChain {
    /// Frees every block the chain took (it never became the inode's log).
    fn free(&self, space: &dyn LogSpace) {
        for &b in self.array.iter().chain(&self.pages) {
            space.free_blocks(b, 1);
        }
    }

    /// The DRAM bookkeeping of the new pages.
    fn meta(&self, space: &dyn LogSpace) -> Vec<PageMeta> {
        self.seqs
            .iter()
            .zip(&self.used)
            .zip(&self.marks)
            .map(|((&seq, &u), &m)| PageMeta {
                seq,
                used: u,
                marked: m,
                checked: m & !MARK_SEALED,
                footer_durable: space.keeps_marks(),
                // Not durable until the switch to this log is: the old
                // log's entries are what recovery would read.
                mark_durable: 0,
                checked_durable: 0,
            })
            .collect()
    }
}
