//! Durability in `file` mode: deferred reuse, the dirty-inode registry and
//! the syncs that write durable marks (see `log/durable.rs`).
//!
//! A **full sync** (`Fs::sync`, unmount, the background commit thread, an
//! allocator that ran dry, a cross-directory rename):
//! 1. takes every pending deferred free recorded so far (the queue's lists
//!    whole, swapped for emptied ones an earlier sync kept);
//! 2. snapshots, per dirty inode and sub-log, the marks that would make
//!    everything appended so far count (each sub-log's mutex briefly);
//! 3. **barrier 1**: `msync` of the pool: every entry, data page, inode
//!    record and log page those marks cover is durable (on a tiered `pm`
//!    pool, where every other store was flushed when made: the device
//!    flush and the blocks the appends recorded);
//! 4. writes the marks, then **barrier 2** over the pages holding them;
//! 5. only now frees what step 1 took: the state that no longer needs those
//!    blocks, log entries and inode numbers is durable.
//!
//! Writers keep running throughout; full syncs are serialised by one mutex,
//! and hold the sync mutex of every inode they snapshot until its marks
//! are written.
//!
//! A **per-inode sync** (`File::sync_all`/`sync_data`) costs what the file
//! changed. Under each sub-log mutex, `append` records the blocks a later
//! sync of that inode must make durable before its marks (`SubLog::unsynced`:
//! a new log page, the log array when a head is linked, the data blocks a
//! write entry points to, a directory entry's target inode record and log
//! array). The entries' own pages and a linking page's `next` are not in
//! it: they share the page with the mark that counts them, which barrier 2
//! writes (a 4 KiB page reaches the disk whole). The sync, under the
//! inode's own sync mutex:
//! 1. snapshots each sub-log's marks and takes its recorded blocks (each
//!    sub-log mutex briefly);
//! 2. **barrier 1** over exactly those blocks (`Media::sync_block_ranges`),
//!    plus the inode record and log array if a compaction switched them;
//! 3. writes the marks (a mark only ever grows), **barrier 2** over their
//!    pages;
//! 4. if the inode was named since the last full sync, does the same for
//!    the directory that named it (and so on up), so its name is durable.
//!
//! **One barrier.** When every block recorded for the marks is the data of
//! a checksummed write entry or a new log page (no new head in the log
//! array, no directory target, no compaction switch), steps 2 and 3 become
//! one: the marks are written first, then a single barrier covers the
//! recorded blocks and the mark pages together (`MarkOrder::WithBarrier`).
//! A power cut inside it may leave a mark without its data; recovery
//! verifies the checksums of entries above each page's checked count and
//! ends the sub-log at a mismatch (`log/durable.rs`). That is the common
//! `write` + `fsync` of an existing file: one write-back and one device
//! cache flush, as a journaling file system's `fsync` of an overwrite.
//!
//! It releases no deferred free: the pending list does not say which
//! entries superseded what, so they wait for the next full sync (at most
//! `commit_interval` later, or at once when an allocator runs dry).
//!
//! `pm` and `dram` mounts never defer and never write marks: a commit word
//! is durable (or never is) as soon as it is flushed and fenced.

use crate::core::FsCore;
use crate::error::Result;
use crate::inode::Inode;
use crate::layout::*;
use crate::log::EntryLoc;
use crate::log::durable::{LogMarks, MarkOrder};
use std::sync::Arc;
use std::sync::atomic::Ordering;

pub(crate) use crate::alloc::deferred::Pending;

impl FsCore {
    /// Whether this mount defers reuse and keeps durable marks (`file` mode,
    /// writable).
    pub fn deferring(&self) -> bool {
        self.media.marked() && !self.opts.read_only
    }

    /// Free data blocks that durable state may still reference.
    pub fn free_later(&self, first: u64, count: u64) {
        if self.deferring() {
            self.sync_engine.defer(Pending::Blocks(first, count));
        } else {
            self.blocks.free(first, count);
        }
    }

    /// Drop live references of a superseded entry of `inode`'s log.
    pub fn release_later(&self, inode: &Inode, loc: EntryLoc, n: u32) {
        if self.deferring() {
            self.sync_engine.defer(Pending::Release {
                ino: inode.ino,
                generation: inode.generation,
                incarnation: inode.log.incarnation(),
                loc,
                n,
            });
        } else {
            inode.log.release(self, loc, n);
        }
    }

    /// Allocate blocks; in `file` mode a dry allocator first runs a sync
    /// (which frees deferred blocks) and tries once more. Never call with a
    /// sub-log mutex held.
    pub fn alloc_blocks(&self, want: u64, purpose: crate::alloc::Purpose) -> Result<(u64, u64)> {
        match self.blocks.alloc(want, purpose) {
            Err(crate::Error::NoSpace(_)) if self.deferring() => {
                self.sync()?;
                self.blocks.alloc(want, purpose)
            }
            r => r,
        }
    }

    /// Allocate an inode number, syncing once in `file` mode if none is free.
    pub fn alloc_ino(&self) -> Result<u64> {
        match self.inode_numbers.alloc() {
            Err(crate::Error::NoSpace(_)) if self.deferring() => {
                self.sync()?;
                self.inode_numbers.alloc()
            }
            r => r,
        }
    }

    /// Make everything done so far durable (see the module comment).
    pub fn full_sync(&self) -> Result<()> {
        if !self.deferring() {
            if self.media.check_alive().is_ok() {
                self.persist_spills()?;
            }
            return self.media.sync_all();
        }
        // A failed media (an earlier failed sync, a pool file that shrank)
        // makes nothing durable: say so even when there is nothing to write.
        self.media.check_alive()?;
        self.media.check_size()?;
        self.persist_spills()?;
        let eng = &self.sync_engine;
        let _serial = eng.lock.lock();
        let mut pending = eng.take_pending();
        // Every name appended so far is covered by this sync's snapshot.
        self.named.clear();
        let mut dirty: Vec<u64> = eng
            .dirty
            .iter()
            .flat_map(|s| std::mem::take(&mut *s.lock()))
            .collect();
        dirty.sort_unstable();
        dirty.dedup();
        let inodes: Vec<_> = dirty.into_iter().filter_map(|i| self.get(i).ok()).collect();
        // Writes in place left their mtime unlogged: log it now, before
        // the snapshot (see `file::log_unlogged_mtime` for why not wait).
        for i in &inodes {
            crate::file::log_unlogged_mtime(self, i, false)?;
        }
        // In inode order; a per-inode sync holds at most one of these.
        let mut guards: Vec<_> = inodes.iter().map(|i| i.log.sync_state.lock()).collect();
        // Size changes counted now have their entries in the snapshots.
        let sizes: Vec<u64> = inodes
            .iter()
            .map(|i| i.size_changes.load(Ordering::Acquire))
            .collect();
        let mut snaps = Vec::with_capacity(inodes.len());
        let mut taken = Vec::new();
        let mut superseded = Vec::new();
        for i in &inodes {
            // Taken before the snapshot: the writes that superseded them
            // are in it.
            let blocks = i.staging.take_superseded();
            superseded.extend(blocks.into_iter().map(|b| Pending::Blocks(b, 1)));
            i.log.clear_dirty();
            let incarnation = i.log.incarnation();
            let marks = i.log.snapshot_for_sync(&mut taken, &mut false);
            snaps.push((marks, incarnation));
        }
        if !superseded.is_empty() {
            pending.push(superseded);
        }
        // `taken` holds data written in place even where no mark changes.
        if snaps.iter().all(|(m, _)| m.is_empty()) && pending.is_empty() && taken.is_empty() {
            return Ok(());
        }
        // Barrier 1: everything the marks will cover (the whole pool in
        // `file` mode; what the appends recorded on a tiered pm pool).
        self.resolve_log_arrays(&mut taken);
        self.media.sync_for_full_sync(&mut taken)?;
        let mut written = Vec::new();
        for (i, (marks, _)) in inodes.iter().zip(&snaps) {
            i.log
                .apply_marks(&self.media, marks, MarkOrder::AfterBarrier, &mut written)?;
        }
        // Barrier 2: the marks.
        crate::log::durable::sync_mark_pages(&self.media, &mut written)?;
        // `sync_mark_pages` left `written` sorted.
        for (i, (marks, _)) in inodes.iter().zip(&snaps) {
            let confirmed: LogMarks = marks
                .iter()
                .filter(|m| written.binary_search(&m.1).is_ok())
                .copied()
                .collect();
            i.log.confirm_footers(&confirmed);
        }
        for (g, (_, incarnation)) in guards.iter_mut().zip(&snaps) {
            **g = (**g).max(*incarnation);
        }
        for (i, n) in inodes.iter().zip(sizes) {
            i.size_changes_synced.fetch_max(n, Ordering::AcqRel);
        }
        drop(guards);
        self.release_pending(pending);
        Ok(())
    }

    /// `fsync` of one inode: make what it changed durable, and its name if
    /// it was named since the last full sync (see the module comment).
    /// `with_metadata` false is `fdatasync`: the mtime of writes made in
    /// place is not logged (their data is made durable).
    pub fn sync_inode(&self, inode: &crate::inode::Inode, with_metadata: bool) -> Result<()> {
        if !self.deferring() {
            return self.full_sync();
        }
        if with_metadata {
            crate::file::log_unlogged_mtime(self, inode, true)?;
        }
        // A durability point reports a failed media or a shrunken pool
        // file even when this inode has nothing to sync.
        self.media.check_alive()?;
        self.media.check_size()?;
        let synced_blocks = self.sync_one(inode)?;
        self.staging.note_sync(inode, synced_blocks);
        let mut child = inode.ino;
        // Each step goes to a directory named since the last full sync;
        // the bound only guards against a cycle left by concurrent renames.
        for _ in 0..64 {
            let Some((parent, seq)) = self.named.get(child) else {
                break;
            };
            let Ok(dir) = self.get(parent) else { break };
            self.sync_one(&dir)?;
            self.named.forget(child, seq);
            child = parent;
        }
        Ok(())
    }

    /// Sync one inode; returns the blocks its first barrier covered (its
    /// data and log pages).
    fn sync_one(&self, inode: &crate::inode::Inode) -> Result<u64> {
        let mut synced_incarnation = inode.log.sync_state.lock();
        // Pool blocks this file's writes superseded: taken before the
        // snapshot (the writes are in it), free once its marks are durable.
        let superseded = inode.staging.take_superseded();
        let result = self.sync_one_locked(inode, &mut synced_incarnation, !superseded.is_empty());
        for b in superseded {
            match result {
                Ok(_) => self.blocks.free(b, 1),
                Err(_) => self.free_later(b, 1),
            }
        }
        result
    }

    fn sync_one_locked(
        &self,
        inode: &crate::inode::Inode,
        synced_incarnation: &mut u64,
        frees_blocks: bool,
    ) -> Result<u64> {
        let incarnation = inode.log.incarnation();
        // Size changes counted now have their entries in the snapshot.
        let sizes = inode.size_changes.load(Ordering::Acquire);
        let mut blocks = Vec::new();
        // Freeing superseded blocks needs the checked counts raised too
        // (only the two-barrier order does that): recovery verifies the
        // data of an entry above its page's checked count, and a reused
        // block would fail it and end the sub-log there, dropping every
        // later entry, synced ones included.
        let mut ordered = frees_blocks;
        let marks = inode.log.snapshot_for_sync(&mut blocks, &mut ordered);
        self.resolve_log_arrays(&mut blocks);
        let covered = blocks.iter().map(|&(s, e)| e - s).sum();
        if incarnation != *synced_incarnation {
            ordered = true;
            // A compaction switched the inode record to a new log.
            let off = self.sb.inode_offset(inode.ino);
            blocks.push((off / BLOCK_SIZE, (off + INODE_SIZE - 1) / BLOCK_SIZE + 1));
            if let Some(array) = inode.log.array_block() {
                blocks.push((array, array + 1));
            }
        }
        if marks.is_empty() && blocks.is_empty() {
            inode.size_changes_synced.fetch_max(sizes, Ordering::AcqRel);
            return Ok(0);
        }
        let mut written = Vec::new();
        if ordered {
            // Barrier 1: what the marks cover.
            self.media.sync_block_ranges(&mut blocks)?;
            let order = MarkOrder::AfterBarrier;
            inode
                .log
                .apply_marks(&self.media, &marks, order, &mut written)?;
            // Barrier 2: the marks.
            crate::log::durable::sync_mark_pages(&self.media, &mut written)?;
            let confirmed: LogMarks = marks
                .into_iter()
                .filter(|m| written.binary_search(&m.1).is_ok())
                .collect();
            inode.log.confirm_footers(&confirmed);
        } else {
            // One barrier: what the marks cover, and the marks.
            let order = MarkOrder::WithBarrier;
            inode
                .log
                .apply_marks(&self.media, &marks, order, &mut written)?;
            if self.media.syncs_whole_pages() {
                blocks.extend(written.iter().map(|&p| (p, p + 1)));
                self.media.sync_block_ranges(&mut blocks)?;
            } else {
                // Flushes and a fence each: in one order or the other,
                // what the marks cover and the marks are both durable
                // when this returns.
                self.media.sync_block_ranges(&mut blocks)?;
                crate::log::durable::sync_mark_pages(&self.media, &mut written)?;
            }
            // Only the footers this barrier wrote are known durable now.
            let confirmed: LogMarks = marks
                .into_iter()
                .filter(|m| written.contains(&m.1))
                .collect();
            inode.log.confirm_footers(&confirmed);
        }
        *synced_incarnation = incarnation;
        inode.size_changes_synced.fetch_max(sizes, Ordering::AcqRel);
        Ok(covered)
    }

    /// `file` mode: make what was appended so far to `child`, an inode no
    /// name reaches yet, count as soon as a name for it does (a symlink's
    /// target is written to the symlink's own log before the directory
    /// entry that names it). The two logs' marks are written by one second
    /// barrier, in no order the medium keeps, so a sync could otherwise
    /// leave the name counted and the target not. Here the child's marks
    /// are stored at once, with no barrier: until a counted name reaches
    /// the inode, whatever of it reaches the disk is freed at the next
    /// mount. The blocks those marks cover (the child's data, log pages,
    /// record and log array) join the unsynced ranges of `dir`'s sub-log
    /// `sublog`, the one the naming entry is appended to, so the sync that
    /// marks that entry (a full sync's `msync`, or a per-inode sync of
    /// `dir`) makes them durable in its first barrier, before its mark.
    pub fn premark_unnamed(&self, child: &Inode, dir: &Inode, sublog: usize) -> Result<()> {
        if !self.deferring() {
            return Ok(());
        }
        let _serial = child.log.sync_state.lock();
        let mut blocks = Vec::new();
        let marks = child.log.snapshot_for_sync(&mut blocks, &mut false);
        child
            .log
            .apply_marks(&self.media, &marks, MarkOrder::Unnamed, &mut Vec::new())?;
        dir.log.add_unsynced(sublog, &blocks);
        Ok(())
    }

    /// Free what a full sync took from the queue (`SyncEngine::take_pending`)
    /// and give the lists back for reuse.
    fn release_pending(&self, mut pending: Vec<Vec<Pending>>) {
        // References first: a page they point into is freed by a later item
        // of the same batch at the earliest. Items of one inode come in
        // runs (an append queues one): one look-up per run. Consecutive
        // items of one inode's log page are released together, one atomic
        // subtraction for the run: its counter is the one that inode's
        // appender increments, so each subtraction is a cache line taken
        // from that writer. The sum reaches zero exactly when the last
        // of the run's items would have: every item is a live reference.
        let mut owner: Option<Arc<Inode>> = None;
        // (inode, generation, incarnation, an entry of the page, references)
        let mut run: Option<(u64, u32, u64, EntryLoc, u32)> = None;
        let release_run = |owner: &mut Option<Arc<Inode>>, run: (u64, u32, u64, EntryLoc, u32)| {
            let (ino, generation, incarnation, loc, n) = run;
            if owner.as_ref().is_none_or(|i| i.ino != ino) {
                *owner = self.get(ino).ok();
            }
            if let Some(i) = owner
                && i.ino == ino
                && i.generation == generation
                && i.log.incarnation() == incarnation
                && !i.freed.load(Ordering::Acquire)
            {
                i.log.release(self, loc, n);
            }
        };
        for p in pending.iter().flatten() {
            let &Pending::Release {
                ino,
                generation,
                incarnation,
                loc,
                n,
            } = p
            else {
                continue;
            };
            match &mut run {
                Some(r)
                    if (r.0, r.1, r.2) == (ino, generation, incarnation)
                        && crate::log::loc_page(r.3) == crate::log::loc_page(loc) =>
                {
                    r.4 += n;
                }
                _ => {
                    if let Some(done) = run.replace((ino, generation, incarnation, loc, n)) {
                        release_run(&mut owner, done);
                    }
                }
            }
        }
        if let Some(done) = run {
            release_run(&mut owner, done);
        }
        drop(owner);
        for p in pending.iter_mut().flat_map(|l| l.drain(..)) {
            match p {
                Pending::Blocks(b, n) => self.blocks.free(b, n),
                Pending::LogBlock(b) => self.blocks.free(b, 1),
                Pending::Inode { ino, data, log } => {
                    for b in data {
                        self.blocks.free(b, 1);
                    }
                    for b in log {
                        if let Some(c) = crate::log::LogSpace::live_counter(self, b) {
                            c.store(0, Ordering::Relaxed);
                        }
                        self.blocks.free(b, 1);
                    }
                    self.inode_numbers.free(ino);
                }
                Pending::Release { .. } => {}
            }
        }
        self.sync_engine.recycle(pending);
    }

    /// First step of a writable `file`-mode mount, before anything is
    /// appended (a pending rename is redone after it): cut the links to
    /// pages that did not count and clear heads naming such pages, so that
    /// pages appended later are never cut by mistake. Before a rename is
    /// redone (which may allocate blocks that superseded write entries
    /// point to), the checked counts of the recovered pages are raised to
    /// what recovery accepted and made durable: such an entry is never
    /// verified against a reused block.
    pub fn cut_undurable_links(&self, rebuilt: &crate::recovery::Rebuilt) -> Result<()> {
        if !self.media.marked() {
            return Ok(());
        }
        let media = &self.media;
        let settle = rebuilt.pending_rename.is_some()
            && rebuilt.sb.commit_rule == CommitRule::Checked
            && crate::log::durable::settle_checked(
                media,
                rebuilt.inodes.values().flat_map(|n| &n.sublogs),
            )?;
        for (&ino, node) in rebuilt.inodes.iter() {
            for s in &node.sublogs {
                if s.cut_head {
                    let at = match node.record.log_word().array() {
                        Some(array) => array * BLOCK_SIZE + s.index as u64 * 8,
                        // A direct head that does not count: no page yet.
                        None => self.sb.inode_offset(ino) + INODE_LOG_ARRAY_OFFSET,
                    };
                    media.store_u64(at, 0)?;
                }
                if s.cut_next
                    && let Some(&last) = s.pages.last()
                {
                    let at = last * BLOCK_SIZE + LOG_FOOTER_OFFSET;
                    media.store_u64(at, 0)?;
                    media.store_u64(at + FOOTER_NEXT_SEQ, 0)?;
                }
            }
        }
        media.fence();
        if settle {
            media.sync_all()?;
        }
        Ok(())
    }

    /// End of a writable mount: make the recovered state durable under the
    /// rule of this mount, then record that rule (and a new mount epoch) in
    /// the superblock. Under `file` mode every page gets its mark (full
    /// pages sealed); the links to pages that did not count were already
    /// cut by [`FsCore::cut_undurable_links`].
    pub fn finish_mount(&self, rebuilt: &crate::recovery::Rebuilt) -> Result<()> {
        let media = &self.media;
        let file = self.media.marked();
        if file {
            for inode in self.all_inodes() {
                inode.log.clear_dirty();
                inode.log.for_each_sublog(|_, pages, meta, next_slot| {
                    let n = pages.len();
                    for i in 0..n {
                        let mark = if i + 1 < n {
                            meta[i].used as u32 | MARK_SEALED
                        } else {
                            next_slot as u32
                        };
                        if meta[i].marked != mark {
                            let _ = media.store(
                                crate::log::durable::mark_offset(pages[i]),
                                &mark.to_le_bytes(),
                            );
                            meta[i].marked = mark;
                        }
                        // The sync below makes everything below the mark
                        // durable: nothing of this page needs verifying.
                        let checked = mark & !MARK_SEALED;
                        if meta[i].checked != checked {
                            let _ = media.store(
                                crate::log::durable::checked_offset(pages[i]),
                                &checked.to_le_bytes(),
                            );
                            meta[i].checked = checked;
                        }
                        // The mount fails unless the sync below completes.
                        meta[i].footer_durable = true;
                        meta[i].mark_durable = checked;
                        meta[i].checked_durable = checked;
                    }
                });
            }
            for s in self.sync_engine.dirty.iter() {
                s.lock().clear();
            }
            media.sync_all()?;
        }
        if rebuilt.pending_rename.is_some() {
            crate::namespace::journal::finish(media)?;
            media.sync_range(JOURNAL_BLOCK * BLOCK_SIZE, BLOCK_SIZE as usize)?;
        }
        let mut sb = self.sb.clone();
        sb.commit_rule = if file {
            CommitRule::Checked
        } else {
            CommitRule::Immediate
        };
        let enc = sb.encode();
        for block in [BACKUP_SUPERBLOCK_BLOCK, SUPERBLOCK_BLOCK] {
            media.store(block * BLOCK_SIZE, &enc)?;
            media.persist(block * BLOCK_SIZE, enc.len())?;
            media.sync_range(block * BLOCK_SIZE, enc.len())?;
        }
        Ok(())
    }
}

impl FsCore {
    /// Replace each tagged log-array range by the arrays and the head pages
    /// they name now: an array made durable must not name a page whose
    /// footer is not (fsck would call the head bad). As with the full
    /// sync's `msync`, a head linked by a concurrent append after this read
    /// is recovered by cutting it.
    fn resolve_log_arrays(&self, blocks: &mut Vec<(u64, u64)>) {
        if !blocks
            .iter()
            .any(|&(s, _)| s & crate::alloc::deferred::LOG_ARRAY_TAG != 0)
        {
            return;
        }
        let mut heads = Vec::new();
        for r in blocks.iter_mut() {
            if r.0 & crate::alloc::deferred::LOG_ARRAY_TAG == 0 {
                continue;
            }
            *r = (
                r.0 & !crate::alloc::deferred::LOG_ARRAY_TAG,
                r.1 & !crate::alloc::deferred::LOG_ARRAY_TAG,
            );
            for array in r.0..r.1 {
                for i in 0..MAX_SUBLOGS as u64 {
                    if let Ok(h) = self.media.load_u64(array * BLOCK_SIZE + i * 8)
                        && h >= self.sb.data_start
                        && h < self.sb.total_blocks
                    {
                        heads.push((h, h + 1));
                    }
                }
            }
        }
        blocks.extend(heads);
    }
}

/// Start the background commit thread of a `file` mount (every
/// `commit_interval`, while the file system lives).
pub fn start_commit_thread(core: &std::sync::Arc<FsCore>) {
    let interval = core.opts.commit_interval;
    if !core.deferring() || interval.is_zero() {
        return;
    }
    let weak = std::sync::Arc::downgrade(core);
    let _ = std::thread::Builder::new()
        .name("manyfs-commit".into())
        .spawn(move || {
            let step = interval.min(std::time::Duration::from_millis(50));
            let mut waited = std::time::Duration::ZERO;
            loop {
                std::thread::sleep(step);
                waited += step;
                let Some(core) = weak.upgrade() else { return };
                if core.media.has_failed() {
                    continue;
                }
                // A pool that staging fills is not left until the interval:
                // a checkpoint first frees what waits for a sync (superseded
                // blocks, dead log pages); staged data moves to the device
                // only if that was not enough, and the next checkpoint
                // makes the move durable and frees its pool blocks.
                let low = crate::file::pool_low(&core);
                if waited >= interval || low {
                    waited = std::time::Duration::ZERO;
                    if core.sync_engine.has_work() {
                        let _ = core.checkpoint();
                    }
                    if crate::file::pool_low(&core) {
                        match crate::file::destage_listed(&core) {
                            Ok(0) => {}
                            Ok(_) => {
                                let _ = core.checkpoint();
                            }
                            // A file that failed stays listed.
                            Err(e) => tracing::warn!("destaging to the data device: {e}"),
                        }
                    }
                }
            }
        });
}
