//! Mount-time rebuild of DRAM state from what recovery read: allocators,
//! inodes, indexes and directories; then, on a writable mount, voiding
//! abandoned group entries, zeroing torn tails and redoing an interrupted
//! rename.

use crate::alloc::{BlockAllocator, InodeAllocator, NodeRegion};
use crate::core::FsCore;
use crate::error::Result;
use crate::index::PageMapping;
use crate::inode::Inode;
use crate::layout::*;
use crate::log::{LogSpace, loc_page};
use crate::media::Media;
use crate::namespace;
use crate::options::MountOptions;
use crate::recovery::{Rebuilt, RebuiltInode, par};
use std::sync::Arc;
use std::sync::atomic::Ordering;

pub(crate) fn build_core(media: Media, rebuilt: Rebuilt, opts: MountOptions) -> Result<FsCore> {
    let sb = rebuilt.sb.clone();
    let writable = !opts.read_only;
    if rebuilt.primary_superblock_damaged && writable {
        let enc = sb.encode();
        media.store(0, &enc)?;
        media.persist(0, enc.len())?;
    }
    let mut sb = sb;
    if writable {
        // Page sequences of this mount start above every earlier mount's.
        sb.mount_epoch += 1;
    }
    let mut core = FsCore::new(media, sb.clone(), opts);
    core.log_unlogged_appends = crate::file::log_pending_append;
    let pools = core.topology.cpu_count();
    // Each member's blocks belong to its node: CPUs allocate there first.
    let regions: Vec<NodeRegion> = core
        .media
        .members()
        .iter()
        .map(|m| NodeRegion {
            start: m.start / BLOCK_SIZE,
            end: (m.start + m.len) / BLOCK_SIZE,
            node: m.node as usize,
        })
        .collect();
    let pool = BlockAllocator::placed(
        sb.data_start,
        sb.total_blocks,
        &regions,
        &core.topology,
        core.opts.placement,
    );
    // A data device: the same per-CPU split over its data blocks.
    let device = sb.tiered().then(|| {
        let r = sb.device_data_blocks();
        BlockAllocator::placed(
            r.start,
            r.end,
            &[],
            &core.topology,
            crate::options::Placement::Node0,
        )
    });
    let blocks = crate::alloc::Blocks { pool, device };
    for (s, n) in rebuilt.free_extents() {
        blocks.free(s, n);
    }
    core.set_allocators(
        blocks,
        InodeAllocator::from_free_ranges(rebuilt.free_inode_ranges(), pools),
    );

    // The DRAM inodes are independent of each other: built on every CPU
    // (the inode table and the live counters take concurrent inserts).
    let threads = crate::recovery::par::threads();
    let nodes: Vec<(&u64, &RebuiltInode)> = rebuilt.inodes.iter().map(|(i, n)| (i, &**n)).collect();
    core.reserve_inodes(nodes.len());
    let core = core;
    par::map_ordered(
        &nodes,
        threads,
        || (),
        |_, &(&ino, node)| load_inode(&core, ino, node),
    );
    drop(nodes);
    let mut voids = Vec::new();
    let mut tails = Vec::new();
    for s in rebuilt.inodes.values().flat_map(|n| &n.sublogs) {
        voids.extend(s.incomplete.iter().copied());
        if let Some(&last) = s.pages.last()
            && s.tail_dirty
        {
            tails.push((last, s.next_slot));
        }
    }
    if writable {
        // Void abandoned group entries so later appends cannot complete them.
        for (loc, _) in voids {
            let at = loc_page(loc) * BLOCK_SIZE + crate::log::loc_slot(loc) * SLOT_SIZE + 56;
            core.media
                .store_u64(at, u64::from(crate::log::VOID_MAGIC) << 32)?;
            core.media.flush(at, 8)?;
        }
        // Clear whatever an interrupted append left past each tail (the
        // scan found which tails have such bytes while it read them).
        for (page, next_slot) in tails {
            let off = page * BLOCK_SIZE + next_slot * SLOT_SIZE;
            let len =
                ((ENTRY_SLOTS_PER_PAGE - next_slot.min(ENTRY_SLOTS_PER_PAGE)) * SLOT_SIZE) as usize;
            if len > 0 {
                core.media.zero(off, len)?;
                core.media.flush(off, len)?;
            }
        }
        core.media.fence();
        cut_undurable_links(&core, &rebuilt)?;
        if let Some(rec) = &rebuilt.pending_rename {
            redo_rename(&core, rec, &rebuilt)?;
        }
        core.media.sync_all()?;
        finish_mount(&core, &rebuilt)?;
    }
    // Freeing what recovery read is a large part of a mount's time too.
    par::drop_map(rebuilt.inodes, threads);
    Ok(core)
}

/// First step of a writable `file`-mode mount, before anything is
/// appended (a pending rename is redone after it): cut the links to
/// pages that did not count and clear heads naming such pages, so that
/// pages appended later are never cut by mistake. Before a rename is
/// redone (which may allocate blocks that superseded write entries
/// point to), the checked counts of the recovered pages are raised to
/// what recovery accepted and made durable: such an entry is never
/// verified against a reused block.
fn cut_undurable_links(core: &FsCore, rebuilt: &Rebuilt) -> Result<()> {
    if !core.media.marked() {
        return Ok(());
    }
    let media = &core.media;
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
                    None => core.sb.inode_offset(ino) + INODE_LOG_ARRAY_OFFSET,
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
/// cut by [`cut_undurable_links`].
fn finish_mount(core: &FsCore, rebuilt: &Rebuilt) -> Result<()> {
    let media = &core.media;
    let file = core.media.marked();
    if file {
        for inode in core.all_inodes() {
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
        for s in core.sync_engine.dirty.iter() {
            s.lock().clear();
        }
        media.sync_all()?;
    }
    if rebuilt.pending_rename.is_some() {
        namespace::journal::finish(media)?;
        media.sync_range(JOURNAL_BLOCK * BLOCK_SIZE, BLOCK_SIZE as usize)?;
    }
    let mut sb = core.sb.clone();
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

/// Make the DRAM inode for `node` and put it in the table: attributes,
/// sub-logs, live counters of its log pages, its page index and size, or
/// its names.
fn load_inode(core: &FsCore, ino: u64, node: &RebuiltInode) {
    let sublogs = node
        .sublogs
        .iter()
        .map(|s| (s.index, s.to_sublog()))
        .collect();
    let attrs = node.attrs.clone();
    let inode = core.make_inode(ino, &node.record, attrs, sublogs);
    inode.attr_seq.store(node.attr_seq, Ordering::Release);
    inode
        .attr_entries
        .store(node.attr_entries, Ordering::Relaxed);
    inode.parent.store(node.parent, Ordering::Release);
    if !node.xattrs.map.is_empty() || node.xattrs.seq != 0 {
        *inode.xattrs.lock() = node.xattrs.clone();
    }
    for (&page, &n) in &node.live {
        if let Some(c) = core.live_counter(page) {
            c.store(n, Ordering::Relaxed);
        }
    }
    if let (Some(f), Some(fs)) = (&inode.file, &node.file) {
        for &(pg, (block, entry, version)) in &fs.pages {
            f.index.slot(pg).set(PageMapping {
                block,
                entry,
                version,
            });
        }
        f.size.store(fs.size, Ordering::Release);
        *f.size_definer.lock() = fs.size_definer;
        // Data staged in the pool of a tiered pool: listed for destaging.
        if core.staging.enabled()
            && (fs.pages.iter()).any(|&(_, (b, _, _))| !core.media.on_data_device(b * BLOCK_SIZE))
        {
            core.staging.note_staged(&inode);
        }
    }
    if let (Some(d), Some(ds)) = (&inode.dir, &node.dir) {
        d.load(ds);
    }
    core.insert(Arc::new(inode));
}

fn redo_rename(
    core: &FsCore,
    rec: &namespace::journal::RenameRecord,
    rebuilt: &Rebuilt,
) -> Result<()> {
    // A directory whose own entry of the rename counted needs nothing: its
    // later entries stand (see `replay_dir`).
    let counted = |dir: u64| {
        rebuilt
            .inodes
            .get(&dir)
            .and_then(|n| n.dir.as_ref())
            .is_some_and(|d| d.pending_rename_counted)
    };
    // Both entries are idempotent: adding a name that is there replaces it
    // with itself; removing a name that is gone (or names another inode) is
    // ignored by replay.
    // The replay applied the rename to whichever of the two directories is
    // reachable; persist exactly that.
    if let Ok(dst) = core.get(rec.dst_dir)
        && dst.is_dir()
        && !counted(rec.dst_dir)
    {
        append_dir_entry(core, &dst, &|seq| {
            namespace::dir_add(seq, &rec.dst_name, rec.moving, rec.txid)
        })?;
    }
    if let Ok(src) = core.get(rec.src_dir)
        && src.is_dir()
        && !counted(rec.src_dir)
    {
        append_dir_entry(core, &src, &|seq| match rec.exchange {
            // An exchange: the source name names the other inode.
            Some(x) => namespace::dir_add(seq, &rec.src_name, x, rec.txid),
            None => Entry::DirRemove {
                seq,
                ino: rec.moving.ino,
                txid: rec.txid,
                name: rec.src_name.clone(),
            },
        })?;
    }
    // The journal is cleared by `finish_mount`, once both entries are
    // durable under this mount's rule.
    Ok(())
}

fn append_dir_entry(core: &FsCore, dir: &Inode, make: &dyn Fn(u64) -> Entry) -> Result<()> {
    let d = dir.dir()?;
    let mut all = d.write_all();
    let seq = crate::inode::DirData::seq(&all) + 1;
    crate::inode::DirData::set_seq(&mut all, seq);
    dir.log.append(core, 0, &[(make(seq), 1)], 0)?;
    Ok(())
}
