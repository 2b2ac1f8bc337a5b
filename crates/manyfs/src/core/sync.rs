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

use super::FsCore;
use crate::error::Result;
use crate::inode::Inode;
use crate::layout::*;
use crate::log::EntryLoc;
use crate::log::durable::{LogMarks, MarkOrder};
use std::sync::Arc;
use std::sync::atomic::Ordering;

pub(crate) use crate::alloc::deferred::Pending;

impl FsCore {
    /// Make everything done so far durable (see the module comment).
    pub fn full_sync(&self) -> Result<()> {
        // Appends gathered in place get their entries first (a failure is
        // reported after the rest is synced).
        let appends_logged = self.log_pending_appends();
        self.full_sync_entries()?;
        appends_logged
    }

    /// Log the appends every inode gathered in place since the last call
    /// ([`FsCore::log_unlogged_appends`]): a full sync's first step, and
    /// `fsck::verify`'s. An inode that failed stays listed; the first error
    /// is returned after the others were tried.
    pub(crate) fn log_pending_appends(&self) -> Result<()> {
        let listed = std::mem::take(&mut *self.pending_appends.lock());
        let mut first_err = None;
        for ino in listed {
            let Ok(inode) = self.get(ino) else { continue };
            if let Err(e) = (self.log_unlogged_appends)(self, &inode) {
                self.pending_appends.lock().push(ino);
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// [`FsCore::full_sync`] of what is logged.
    fn full_sync_entries(&self) -> Result<()> {
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
        // A sync that fails from here on loses what it took (see
        // `SyncEngine::forget_taken`); one that succeeds hands it back.
        let taken_guard = ForgetTaken(eng);
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
        // the snapshot (see `log_unlogged_mtime` for why not wait).
        for i in &inodes {
            log_unlogged_mtime(self, i, false)?;
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
        std::mem::forget(taken_guard);
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
        // The appends it gathered in place get their entry first.
        (self.log_unlogged_appends)(self, inode)?;
        self.sync_inode_entries(inode, with_metadata)
    }

    /// [`FsCore::sync_inode`] of what the inode's log holds, without first
    /// logging appends gathered in place (the caller may be logging them).
    pub(crate) fn sync_inode_entries(
        &self,
        inode: &crate::inode::Inode,
        with_metadata: bool,
    ) -> Result<()> {
        if !self.deferring() {
            return self.full_sync();
        }
        if with_metadata {
            log_unlogged_mtime(self, inode, true)?;
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
        let mut blocks: Vec<(u64, u64)> = Vec::new();
        for p in pending.iter_mut().flat_map(|l| l.drain(..)) {
            match p {
                Pending::Blocks(b, n) => blocks.push((b, n)),
                Pending::LogBlock(b) => blocks.push((b, 1)),
                Pending::Inode { ino, data, log } => {
                    blocks.extend(data.into_iter().map(|b| (b, 1)));
                    for b in log {
                        if let Some(c) = crate::log::LogSpace::live_counter(self, b) {
                            c.store(0, Ordering::Relaxed);
                        }
                        blocks.push((b, 1));
                    }
                    self.inode_numbers.free(ino);
                }
                Pending::Release { .. } => {}
            }
        }
        self.sync_engine
            .hand_back(|| self.blocks.free_batch(&mut blocks));
        self.sync_engine.recycle(pending);
    }
}

/// Clears the sync engine's taken count when dropped (a sync that
/// returned early); forgotten by a sync that hands its blocks back.
struct ForgetTaken<'a>(&'a crate::alloc::deferred::SyncEngine);

impl Drop for ForgetTaken<'_> {
    fn drop(&mut self) {
        self.0.forget_taken();
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

/// Log the mtime that writes in place left unlogged, if any
/// (`InodeLog::take_unlogged_mtime`). Without `wait`, an attribute mutex
/// held elsewhere (a full sync run by an allocator that ran dry, perhaps
/// under it) leaves the mtime for a later sync instead.
pub(crate) fn log_unlogged_mtime(core: &FsCore, inode: &Inode, wait: bool) -> Result<()> {
    if !inode.log.take_unlogged_mtime() {
        return Ok(());
    }
    let attrs = if wait {
        inode.attrs.lock()
    } else if let Some(a) = inode.attrs.try_lock() {
        a
    } else {
        inode.log.mark_mtime_unlogged();
        return Ok(());
    };
    log_mtime_locked(core, inode, attrs, 0)
}

/// Append one attribute entry with the current attributes and the larger of
/// the mtimes memory and the log show, and `mtime_ns`.
pub(crate) fn log_mtime_locked(
    core: &FsCore,
    inode: &Inode,
    mut attrs: parking_lot::MutexGuard<'_, crate::inode::Attrs>,
    mtime_ns: u64,
) -> Result<()> {
    let mtime = attrs.mtime_ns.max(inode.log.last_mtime_ns()).max(mtime_ns);
    let seq = inode.attr_seq.load(Ordering::Acquire) + 1;
    let size = inode
        .file
        .as_deref()
        .map_or(0, crate::inode::FileData::size);
    let entry = Entry::SetAttr {
        seq,
        size_set: false,
        size,
        mode: attrs.mode,
        uid: attrs.uid,
        gid: attrs.gid,
        atime_ns: attrs.atime_ns,
        mtime_ns: mtime,
        ctime_ns: attrs.ctime_ns,
    };
    inode
        .log
        .append(core, inode.log.attr_sublog(), &[(entry, 1)], 0)?;
    inode.attr_seq.store(seq, Ordering::Release);
    inode.attr_entries.fetch_add(1, Ordering::Relaxed);
    attrs.mtime_ns = mtime;
    Ok(())
}
