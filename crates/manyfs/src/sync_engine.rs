//! Durability in `file` mode: deferred reuse, the dirty-inode registry and
//! the sync that writes durable marks (see `log/durable.rs`).
//!
//! A sync (`Fs::sync`, `File::sync_all`/`sync_data`, unmount, the
//! background commit thread, an allocator that ran dry):
//! 1. takes every pending deferred free recorded so far;
//! 2. snapshots, per dirty inode and sub-log, the marks that would make
//!    everything appended so far count (each sub-log's mutex briefly);
//! 3. **barrier 1**: `msync` of the pool: every entry, data page, inode
//!    record and log page those marks cover is durable;
//! 4. writes the marks, then **barrier 2** over the pages holding them;
//! 5. only now frees what step 1 took: the state that no longer needs those
//!    blocks, log entries and inode numbers is durable.
//!
//! Writers keep running throughout; syncs are serialised by one mutex.
//!
//! `pm` and `dram` mounts never defer and never write marks: a commit word
//! is durable (or never is) as soon as it is flushed and fenced.

use crate::core::FsCore;
use crate::error::Result;
use crate::inode::Inode;
use crate::layout::*;
use crate::log::EntryLoc;
use std::sync::atomic::Ordering;

pub(crate) use crate::alloc::deferred::Pending;

impl FsCore {
    /// Whether this mount defers reuse and keeps durable marks (`file` mode,
    /// writable).
    pub fn deferring(&self) -> bool {
        self.media.mode() == crate::media::Durability::File && !self.opts.read_only
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
            return self.media.sync_all();
        }
        // A failed media (an earlier failed sync, a pool file that shrank)
        // makes nothing durable: say so even when there is nothing to write.
        self.media.check_alive()?;
        self.media.check_size()?;
        let eng = &self.sync_engine;
        let _serial = eng.lock.lock();
        let pending: Vec<Pending> = eng
            .pending
            .iter()
            .flat_map(|s| std::mem::take(&mut *s.lock()))
            .collect();
        let mut dirty: Vec<u64> = eng
            .dirty
            .iter()
            .flat_map(|s| std::mem::take(&mut *s.lock()))
            .collect();
        dirty.sort_unstable();
        dirty.dedup();
        let mut snaps = Vec::with_capacity(dirty.len());
        for ino in dirty {
            if let Ok(i) = self.get(ino) {
                i.log.clear_dirty();
                let marks = i.log.snapshot_marks();
                snaps.push((i, marks));
            }
        }
        if snaps.iter().all(|(_, m)| m.is_empty()) && pending.is_empty() {
            return Ok(());
        }
        // Barrier 1: everything the marks will cover.
        self.media.sync_all()?;
        let mut written = Vec::new();
        for (i, marks) in &snaps {
            i.log.apply_marks(&self.media, marks, &mut written)?;
        }
        // Barrier 2: the marks.
        self.media.sync_blocks(&mut written)?;
        self.release_pending(pending);
        Ok(())
    }

    fn release_pending(&self, pending: Vec<Pending>) {
        // References first: a page they point into is freed by a later item
        // of the same batch at the earliest.
        for p in &pending {
            if let Pending::Release {
                ino,
                generation,
                incarnation,
                loc,
                n,
            } = p
                && let Ok(i) = self.get(*ino)
                && i.generation == *generation
                && i.log.incarnation() == *incarnation
                && !i.freed.load(Ordering::Acquire)
            {
                i.log.release(self, *loc, *n);
            }
        }
        for p in pending {
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
    }

    /// First step of a writable `file`-mode mount, before anything is
    /// appended (a pending rename is redone after it): cut the links to
    /// pages that did not count and clear heads naming such pages, so that
    /// pages appended later are never cut by mistake.
    pub fn cut_undurable_links(&self, rebuilt: &crate::recovery::Rebuilt) -> Result<()> {
        if self.media.mode() != crate::media::Durability::File {
            return Ok(());
        }
        let media = &self.media;
        for node in rebuilt.inodes.values() {
            for s in &node.sublogs {
                if s.cut_head {
                    let at = node.record.log_array * BLOCK_SIZE + s.index as u64 * 8;
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
        Ok(())
    }

    /// End of a writable mount: make the recovered state durable under the
    /// rule of this mount, then record that rule (and a new mount epoch) in
    /// the superblock. Under `file` mode every page gets its mark (full
    /// pages sealed); the links to pages that did not count were already
    /// cut by [`FsCore::cut_undurable_links`].
    pub fn finish_mount(&self, rebuilt: &crate::recovery::Rebuilt) -> Result<()> {
        let media = &self.media;
        let file = self.media.mode() == crate::media::Durability::File;
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
                        meta[i].footer_durable = true;
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
            CommitRule::Marked
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
                if waited >= interval {
                    waited = std::time::Duration::ZERO;
                    if core.sync_engine.has_work() && !core.media.has_failed() {
                        let _ = core.full_sync();
                    }
                }
            }
        });
}
