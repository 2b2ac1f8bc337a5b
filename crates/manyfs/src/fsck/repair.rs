//! `fsck --repair`: salvage a damaged pool.
//!
//! Repair takes the pool's exclusive lock (a mounted pool is refused), runs
//! the check, applies every fix it proposes through the media interface
//! (store, flush, fence, then msync) and checks again, until the pool is
//! clean or no fix is left (voiding an entry can bring back an older one
//! that is damaged in turn, hence the passes). A clean result is then
//! mounted once, which completes interrupted operations as any mount does.
//!
//! The fixes: damaged entries are voided (their commit word gets the void
//! marker, so recovery skips them by slot count); chains are cut at their
//! last good page; names of damaged, foreign or missing inodes are voided; a
//! block owned twice stays with the first owner (the other's entry is
//! voided); intact inodes that only a damaged directory named are linked
//! into `/lost+found` (created if missing) as `#<ino>`; a damaged primary
//! superblock is rewritten from the backup.

use super::check::{self, Owner, Walk};
use super::problems::{Fix, Problem};
use super::{Report, check_media};
use crate::error::{Error, Result};
use crate::layout::*;
use crate::log::durable::mark_offset;
use crate::log::{VOID_MAGIC, loc_page, loc_slot};
use crate::media::{Durability, Media};
use crate::namespace::journal;
use crate::options::MountOptions;
use std::collections::HashSet;
use std::path::Path;

/// Most check-and-fix passes.
const MAX_PASSES: usize = 16;

/// Name of the directory reconnected inodes go to.
pub const LOST_FOUND: &[u8] = b"lost+found";

/// What repair did.
#[derive(Debug, Clone, Default)]
pub struct RepairReport {
    /// The check before any change.
    pub before: Report,
    /// The problems fixed, in order.
    pub fixed: Vec<Problem>,
    /// Check-and-fix passes run.
    pub passes: usize,
    /// The check after repair.
    pub after: Report,
}

impl RepairReport {
    /// Whether the pool is clean after repair.
    pub fn is_clean(&self) -> bool {
        self.after.is_clean()
    }
}

/// Repair the pool at `path`. Errors opening, locking or writing it are
/// returned as `Err`.
pub fn repair(path: &Path) -> Result<RepairReport> {
    let media = crate::media::pool::open_pool(path, Durability::File, true, None)?;
    let mut out = RepairReport {
        before: check_media(&media)?,
        ..Default::default()
    };
    while out.passes < MAX_PASSES {
        let walk = check::walk(&media)?;
        let todo: Vec<Problem> = walk
            .problems
            .iter()
            .filter(|p| p.fix.is_repairable())
            .cloned()
            .collect();
        if todo.is_empty() {
            break;
        }
        out.passes += 1;
        apply(&media, walk, &todo)?;
        out.fixed.extend(todo);
    }
    let clean = check_media(&media)?.is_clean();
    drop(media);
    if clean {
        // Complete interrupted operations (pending rename, abandoned group
        // entries) the way every mount does.
        crate::Fs::mount(path, &MountOptions::default())?.unmount()?;
    }
    out.after = super::check(path)?;
    Ok(out)
}

fn apply(media: &Media, mut walk: Walk, todo: &[Problem]) -> Result<()> {
    let mut done: HashSet<&Fix> = HashSet::new();
    let mut orphans = Vec::new();
    for p in todo {
        if !done.insert(&p.fix) {
            continue;
        }
        match &p.fix {
            Fix::None => {}
            Fix::RewritePrimarySuperblock => {
                if let Some(sb) = &walk.sb {
                    let enc = sb.encode();
                    media.store(SUPERBLOCK_BLOCK * BLOCK_SIZE, &enc)?;
                    media.flush(SUPERBLOCK_BLOCK * BLOCK_SIZE, enc.len())?;
                }
            }
            Fix::ClearJournal => journal::finish(media)?,
            Fix::VoidEntry { loc } => void(media, *loc)?,
            Fix::CutChain { link_at } => {
                media.store_u64(*link_at, 0)?;
                media.flush(*link_at, 8)?;
            }
            Fix::Reconnect {
                ino,
                generation,
                kind,
            } => orphans.push((*ino, *generation, *kind)),
        }
    }
    media.fence();
    if !orphans.is_empty() {
        reconnect(media, &mut walk, &orphans)?;
    }
    media.sync_all()
}

fn void(media: &Media, loc: u64) -> Result<()> {
    let at = loc_page(loc) * BLOCK_SIZE + loc_slot(loc) * SLOT_SIZE + 56;
    media.store_u64(at, u64::from(VOID_MAGIC) << 32)?;
    media.flush(at, 8)
}

/// Link `orphans` into `/lost+found`, creating it if needed.
fn reconnect(media: &Media, walk: &mut Walk, orphans: &[(u64, u32, FileKind)]) -> Result<()> {
    let mut sb = walk
        .sb
        .clone()
        .ok_or_else(|| Error::corrupt("superblock", "unreadable"))?;
    // Repair appends log pages the way a mount would, so it takes a mount
    // epoch of its own first: its page sequences ((epoch << 32) on) are
    // above every page an earlier mount wrote, and the next mount's are
    // above repair's. The new epoch is durable before any page uses it.
    sb.mount_epoch += 1;
    let enc = sb.encode();
    for block in [BACKUP_SUPERBLOCK_BLOCK, SUPERBLOCK_BLOCK] {
        media.store(block * BLOCK_SIZE, &enc)?;
        media.persist(block * BLOCK_SIZE, enc.len())?;
        media.sync_range(block * BLOCK_SIZE, enc.len())?;
    }
    // Blocks superseded write entries point to may be reused below.
    if sb.commit_rule == CommitRule::Checked
        && crate::log::durable::settle_checked(
            media,
            walk.inodes.values().flat_map(|n| &n.sublogs),
        )?
    {
        media.sync_all()?;
    }
    walk.sb = Some(sb.clone());
    let first_seq = sb.mount_epoch << 32;
    let existing = walk
        .inodes
        .get(&ROOT_INO)
        .and_then(|r| r.dir.as_ref())
        .and_then(|d| d.entries.get(LOST_FOUND))
        .filter(|c| c.kind == FileKind::Dir && walk.inodes.contains_key(&c.ino))
        .map(|c| c.ino);
    let lf = match existing {
        Some(ino) => ino,
        None => {
            let ino = (ROOT_INO + 1..sb.inode_count)
                .find(|i| !walk.inodes.contains_key(i) && !orphans.iter().any(|o| o.0 == *i))
                .ok_or(Error::NoSpace("inodes"))?;
            // A log array, as every inode had before direct log words:
            // repair does not change the pool's format version, and an
            // older manyfs must still read a repaired older pool.
            let array = alloc_block(walk, &sb, Owner::Array(ino))?;
            media.store(array * BLOCK_SIZE, &[0u8; BLOCK_SIZE as usize])?;
            media.flush(array * BLOCK_SIZE, BLOCK_SIZE as usize)?;
            let off = sb.inode_offset(ino);
            let old = media.read_vec(off, INODE_SIZE as usize)?;
            let now = crate::time::now_ns();
            let rec = InodeRecord {
                generation: InodeRecord::raw_generation(&old).wrapping_add(1),
                kind: FileKind::Dir,
                mode: 0o700,
                uid: 0,
                gid: 0,
                log_array: array,
                atime_ns: now,
                mtime_ns: now,
                ctime_ns: now,
                rdev: 0,
            };
            media.store(off, &rec.encode())?;
            media.flush(off, INODE_SIZE as usize)?;
            media.fence();
            let mut log = DirLog::empty(ROOT_INO, walk, &sb, media, first_seq)?;
            log.append(media, walk, &sb, |seq| Entry::DirAdd {
                seq,
                ino,
                generation: rec.generation,
                kind: FileKind::Dir,
                txid: 0,
                name: LOST_FOUND.to_vec(),
            })?;
            log.finish(media)?;
            let mut log = DirLog {
                ino,
                generation: rec.generation,
                array: Some(array),
                word_at: off + INODE_LOG_ARRAY_OFFSET,
                index: 0,
                tail: None,
                seq: 0,
                page_seq: first_seq,
                pages: Vec::new(),
            };
            add_all(media, walk, &sb, &mut log, orphans)?;
            return log.finish(media);
        }
    };
    let mut log = DirLog::empty(lf, walk, &sb, media, first_seq)?;
    add_all(media, walk, &sb, &mut log, orphans)?;
    log.finish(media)
}

fn add_all(
    media: &Media,
    walk: &mut Walk,
    sb: &Superblock,
    log: &mut DirLog,
    orphans: &[(u64, u32, FileKind)],
) -> Result<()> {
    for &(ino, generation, kind) in orphans {
        log.append(media, walk, sb, |seq| Entry::DirAdd {
            seq,
            ino,
            generation,
            kind,
            txid: 0,
            name: format!("#{ino}").into_bytes(),
        })?;
    }
    Ok(())
}

/// A free block: in the data region and owned by nothing the check found.
fn alloc_block(walk: &mut Walk, sb: &Superblock, who: Owner) -> Result<u64> {
    let b = (sb.data_start..sb.total_blocks)
        .find(|b| !walk.owners.contains_key(b))
        .ok_or(Error::NoSpace("blocks"))?;
    walk.owners.insert(b, who);
    Ok(b)
}

/// Where the next entry of a directory goes.
///
/// Repair writes format-2 log pages the way the engine does (rather than
/// normalising the pool and switching it to the `Immediate` rule, which
/// would have to rewrite every log's marks and links, not only the ones it
/// touches): each new page's footer carries the inode's generation and a
/// page sequence above every one the log used (the repair's own mount
/// epoch, see [`reconnect`]); `next_seq` is stored before `next`; and
/// [`DirLog::finish`] writes durable marks after a barrier (completed
/// pages sealed, the tail marked with its slots used) and a second barrier
/// after them. So what repair appends counts under the `Marked` rule, and
/// under `Immediate` the footers and marks are simply unused.
struct DirLog {
    ino: u64,
    generation: u32,
    /// The log array, if the directory has one.
    array: Option<u64>,
    /// Byte offset of the record's log word.
    word_at: u64,
    index: usize,
    /// (tail page, next free slot).
    tail: Option<(u64, u64)>,
    seq: u64,
    /// Sequence of the next page linked.
    page_seq: u64,
    /// Pages whose marks `finish` writes, in chain order: (page, slots
    /// used); all but the last are complete.
    pages: Vec<(u64, u64)>,
}

impl DirLog {
    /// The first sub-log of a checked directory, its abandoned group
    /// entries voided and its tail page cleared past the last entry (what
    /// a mount does before it appends).
    fn empty(
        ino: u64,
        walk: &Walk,
        sb: &Superblock,
        media: &Media,
        first_seq: u64,
    ) -> Result<DirLog> {
        let node = walk
            .inodes
            .get(&ino)
            .ok_or_else(|| Error::corrupt(format!("inode {ino}"), "not found by the check"))?;
        let seq = node.dir.as_ref().map_or(0, |d| d.seq);
        let mut log = DirLog {
            ino,
            generation: node.record.generation,
            array: node.record.log_word().array(),
            word_at: sb.inode_offset(ino) + INODE_LOG_ARRAY_OFFSET,
            index: 0,
            tail: None,
            seq,
            page_seq: first_seq,
            pages: Vec::new(),
        };
        if let Some(s) = node.sublogs.iter().find(|s| !s.pages.is_empty()) {
            for &(loc, _) in &s.incomplete {
                void(media, loc)?;
            }
            let page = *s.pages.last().expect("a page");
            let off = page * BLOCK_SIZE + s.next_slot * SLOT_SIZE;
            let len = ((ENTRY_SLOTS_PER_PAGE - s.next_slot.min(ENTRY_SLOTS_PER_PAGE)) * SLOT_SIZE)
                as usize;
            if len > 0 {
                media.zero(off, len)?;
                media.flush(off, len)?;
            }
            media.fence();
            log.index = s.index;
            log.tail = Some((page, s.next_slot));
            log.pages.push((page, s.next_slot));
            let last_seq = s.meta.last().map_or(0, |m| m.seq);
            log.page_seq = log.page_seq.max(last_seq.saturating_add(1));
        }
        Ok(log)
    }

    /// Make everything appended count: barrier, durable marks (complete
    /// pages sealed, the tail its slots used), barrier.
    fn finish(&mut self, media: &Media) -> Result<()> {
        if self.pages.is_empty() {
            return Ok(());
        }
        media.sync_all()?;
        let n = self.pages.len();
        for (i, &(page, used)) in self.pages.iter().enumerate() {
            let mark = if i + 1 < n {
                used as u32 | MARK_SEALED
            } else {
                used as u32
            };
            media.store(mark_offset(page), &mark.to_le_bytes())?;
        }
        media.sync_all()
    }

    /// Append one committed entry (a new page linked first if needed).
    fn append(
        &mut self,
        media: &Media,
        walk: &mut Walk,
        sb: &Superblock,
        make: impl FnOnce(u64) -> Entry,
    ) -> Result<()> {
        self.seq += 1;
        let enc = make(self.seq).encode(false);
        let fits = self
            .tail
            .is_some_and(|(_, slot)| slot + enc.slots() <= ENTRY_SLOTS_PER_PAGE);
        if !fits {
            let page = alloc_block(walk, sb, Owner::LogPage(self.ino))?;
            let off = page * BLOCK_SIZE;
            media.store(off, &[0u8; BLOCK_SIZE as usize - 64])?;
            let seq = self.page_seq;
            self.page_seq += 1;
            media.store(
                off + LOG_FOOTER_OFFSET,
                &encode_log_footer(self.ino, self.index as u32, self.generation, seq),
            )?;
            media.flush(off, BLOCK_SIZE as usize)?;
            media.fence();
            let (link_at, link) = match (self.tail, self.array) {
                (Some((prev, _)), _) => {
                    // The expected sequence before the link (durable.rs).
                    let at = prev * BLOCK_SIZE + LOG_FOOTER_OFFSET;
                    media.store_u64(at + FOOTER_NEXT_SEQ, seq)?;
                    media.flush(at + FOOTER_NEXT_SEQ, 8)?;
                    media.fence();
                    (at, page)
                }
                (None, Some(array)) => (array * BLOCK_SIZE + self.index as u64 * 8, page),
                // A directory without an array has one sub-log at most:
                // its head goes in the record's word.
                (None, None) => (self.word_at, LogWord::direct(self.index, page, seq)),
            };
            media.store_u64(link_at, link)?;
            media.persist(link_at, 8)?;
            self.tail = Some((page, 0));
            self.pages.push((page, 0));
        }
        let (page, slot) = self.tail.expect("a tail page");
        let off = page * BLOCK_SIZE + slot * SLOT_SIZE;
        media.store(off, &enc.body)?;
        media.flush(off, enc.body.len())?;
        media.fence();
        media.store_u64(off + 56, enc.commit_word)?;
        media.persist(off + 56, 8)?;
        self.tail = Some((page, slot + enc.slots()));
        if let Some(last) = self.pages.last_mut() {
            last.1 = slot + enc.slots();
        }
        Ok(())
    }
}
