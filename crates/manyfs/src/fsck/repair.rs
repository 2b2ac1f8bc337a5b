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
    let media = Media::open(path, Durability::File, true)?;
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
    let sb = walk
        .sb
        .clone()
        .ok_or_else(|| Error::corrupt("superblock", "unreadable"))?;
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
            };
            media.store(off, &rec.encode())?;
            media.flush(off, INODE_SIZE as usize)?;
            media.fence();
            let mut log = DirLog::empty(ROOT_INO, walk, media)?;
            log.append(media, walk, &sb, |seq| Entry::DirAdd {
                seq,
                ino,
                generation: rec.generation,
                kind: FileKind::Dir,
                txid: 0,
                name: LOST_FOUND.to_vec(),
            })?;
            let mut log = DirLog {
                ino,
                array,
                index: 0,
                tail: None,
                seq: 0,
                generation: rec.generation,
            };
            return add_all(media, walk, &sb, &mut log, orphans);
        }
    };
    let mut log = DirLog::empty(lf, walk, media)?;
    add_all(media, walk, &sb, &mut log, orphans)
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
struct DirLog {
    ino: u64,
    array: u64,
    index: usize,
    /// (tail page, next free slot).
    tail: Option<(u64, u64)>,
    seq: u64,
    /// The directory's generation (format-2 footers name it).
    generation: u32,
}

impl DirLog {
    /// The first sub-log of a checked directory, its abandoned group
    /// entries voided and its tail page cleared past the last entry (what
    /// a mount does before it appends).
    fn empty(ino: u64, walk: &Walk, media: &Media) -> Result<DirLog> {
        let node = walk
            .inodes
            .get(&ino)
            .ok_or_else(|| Error::corrupt(format!("inode {ino}"), "not found by the check"))?;
        let seq = node.dir.as_ref().map_or(0, |d| d.seq);
        let mut log = DirLog {
            ino,
            array: node.record.log_array,
            index: 0,
            tail: None,
            seq,
            generation: node.record.generation,
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
        }
        Ok(log)
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
            // Format-2 footer: a sequence above the page it follows (or the
            // log array's base for a head), so the `Marked` commit rule of a
            // file-mode pool follows the link (see log/durable.rs).
            let page_seq = match self.tail {
                Some((prev, _)) => {
                    media.load_u64(prev * BLOCK_SIZE + LOG_FOOTER_OFFSET + FOOTER_SEQ)? + 1
                }
                None => media.load_u64(self.array * BLOCK_SIZE + ARRAY_BASE_SEQ_WORD as u64 * 8)?,
            };
            let off = page * BLOCK_SIZE;
            media.store(off, &[0u8; BLOCK_SIZE as usize - 64])?;
            media.store(
                off + LOG_FOOTER_OFFSET,
                &encode_log_footer(self.ino, self.index as u32, self.generation, page_seq),
            )?;
            media.flush(off, BLOCK_SIZE as usize)?;
            media.fence();
            let link_at = match self.tail {
                Some((prev, used)) => {
                    let footer = prev * BLOCK_SIZE + LOG_FOOTER_OFFSET;
                    media.store_u64(footer + FOOTER_NEXT_SEQ, page_seq)?;
                    media.store(
                        footer + FOOTER_MARK,
                        &(MARK_SEALED | used as u32).to_le_bytes(),
                    )?;
                    media.flush(footer + FOOTER_MARK, 24)?;
                    footer
                }
                None => self.array * BLOCK_SIZE + self.index as u64 * 8,
            };
            media.store_u64(link_at, page)?;
            media.persist(link_at, 8)?;
            self.tail = Some((page, 0));
        }
        let (page, slot) = self.tail.expect("a tail page");
        let off = page * BLOCK_SIZE + slot * SLOT_SIZE;
        media.store(off, &enc.body)?;
        media.flush(off, enc.body.len())?;
        media.fence();
        media.store_u64(off + 56, enc.commit_word)?;
        media.persist(off + 56, 8)?;
        let used = slot + enc.slots();
        // The durable mark (file-mode pools): repair msyncs everything it
        // wrote before it returns, so the entry counts under either rule.
        let mark_at = page * BLOCK_SIZE + LOG_FOOTER_OFFSET + FOOTER_MARK;
        media.store(mark_at, &(used as u32).to_le_bytes())?;
        media.persist(mark_at, 4)?;
        self.tail = Some((page, used));
        Ok(())
    }
}
