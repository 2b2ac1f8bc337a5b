//! Comparing live DRAM state with a fresh rebuild from the media
//! ([`verify`]).

use crate::core::FsCore;
use crate::error::Result;
use crate::recovery::Rebuilt;
use std::sync::atomic::Ordering;

/// Rebuild the file system from the media, as a fresh mount would, and
/// compare it with the live DRAM state: same names, sizes, link counts,
/// page mappings and free space. Returns the differences (empty when
/// consistent). Quiesce writers first for an exact comparison. Logs the
/// mtimes that overwrites in place left in memory only, and the appends
/// gathered in place (what the next sync would log), so that the two are
/// comparable.
pub fn verify(fs: &crate::Fs) -> Result<Vec<String>> {
    let core = fs.core();
    if core.deferring() {
        core.log_pending_appends()?;
        for inode in core.all_inodes() {
            crate::core::sync::log_unlogged_mtime(core, &inode, true)?;
        }
    }
    // No checkpoint of the commit thread meanwhile: one holds the blocks it
    // took off the waiting list and has not freed yet, counted nowhere.
    let _no_sync = core.sync_engine.lock.lock();
    let rebuilt =
        crate::recovery::rebuild_with(&core.media, Some(crate::layout::CommitRule::Immediate))?;
    Ok(compare(core, &rebuilt))
}

pub(crate) fn compare(core: &FsCore, rebuilt: &Rebuilt) -> Vec<String> {
    let mut diffs = Vec::new();
    let live = core.all_inodes();
    let live_reachable: Vec<_> = live.iter().filter(|i| i.nlink() > 0).collect();
    if live_reachable.len() != rebuilt.inodes.len() {
        diffs.push(format!(
            "{} reachable inodes in memory, {} rebuilt from media",
            live_reachable.len(),
            rebuilt.inodes.len()
        ));
    }
    for inode in live_reachable {
        let Some(node) = rebuilt.inodes.get(&inode.ino) else {
            diffs.push(format!("inode {} missing from media", inode.ino));
            continue;
        };
        if node.attrs.nlink != inode.nlink() {
            diffs.push(format!(
                "inode {}: nlink {} in memory, {} on media",
                inode.ino,
                inode.nlink(),
                node.attrs.nlink
            ));
        }
        let a = inode.attrs.lock().clone();
        let mut attr_diff = |what: &str, mem: u64, media: u64| {
            if mem != media {
                diffs.push(format!(
                    "inode {}: {what} {mem} in memory, {media} on media",
                    inode.ino
                ));
            }
        };
        attr_diff("mode", u64::from(a.mode), u64::from(node.attrs.mode));
        attr_diff("uid", u64::from(a.uid), u64::from(node.attrs.uid));
        attr_diff("gid", u64::from(a.gid), u64::from(node.attrs.gid));
        attr_diff("atime", a.atime_ns, node.attrs.atime_ns);
        // A directory's mtime and ctime change with its entries and are
        // persisted only with its next attribute change (docs/guarantees.md).
        if inode.dir.is_none() {
            let mtime = a.mtime_ns.max(inode.log.last_mtime_ns());
            attr_diff("mtime", mtime, node.attrs.mtime_ns);
        }
        if inode.xattrs.lock().map != node.xattrs.map {
            diffs.push(format!(
                "inode {}: extended attributes differ between memory and media",
                inode.ino
            ));
        }
        // link, unlink and rename change a ctime in memory only; it is
        // persisted with the next attribute change (docs/guarantees.md), so
        // the media's may be older, never newer.
        if node.attrs.ctime_ns > a.ctime_ns {
            diffs.push(format!(
                "inode {}: ctime {} in memory, newer {} on media",
                inode.ino, a.ctime_ns, node.attrs.ctime_ns
            ));
        }
        if let (Some(f), Some(fs)) = (&inode.file, &node.file) {
            if f.size() != fs.size {
                diffs.push(format!(
                    "inode {}: size {} in memory, {} on media",
                    inode.ino,
                    f.size(),
                    fs.size
                ));
            }
            let mem: Vec<(u64, u64)> = f
                .index
                .mapped()
                .into_iter()
                .map(|(p, m)| (p, m.block))
                .collect();
            let media: Vec<(u64, u64)> = fs.pages.iter().map(|&(p, (b, _, _))| (p, b)).collect();
            if mem != media {
                diffs.push(format!(
                    "inode {}: page map differs ({} pages in memory, {} on media)",
                    inode.ino,
                    mem.len(),
                    media.len()
                ));
            }
        }
        if let (Some(d), Some(ds)) = (&inode.dir, &node.dir)
            && d.snapshot() != ds.entries
        {
            diffs.push(format!("directory {}: entries differ", inode.ino));
        }
    }
    // Orphans still open in memory hold space the media no longer reaches.
    let open_orphans: u64 = live
        .iter()
        .filter(|i| i.nlink() == 0 && !i.freed.load(Ordering::Acquire))
        .map(|i| {
            i.log.owned_blocks().len() as u64
                + i.file.as_ref().map_or(0, |f| f.index.mapped().len() as u64)
        })
        .sum();
    // Blocks waiting for a sync (file mode) are free on media already.
    let free_mem = (core.sync_engine).free_and_waiting(|| core.blocks.free_blocks());
    let free_media = (rebuilt.data_blocks() - rebuilt.used_blocks()).saturating_sub(open_orphans);
    if free_mem != free_media {
        diffs.push(format!(
            "free blocks: {free_mem} in memory, {free_media} rebuilt from media"
        ));
    }
    diffs
}
