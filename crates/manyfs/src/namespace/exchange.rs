//! `renameat2(RENAME_EXCHANGE)`: two existing names swap the inodes they
//! name, atomically.
//!
//! In one directory the swap is one atomic group of two add entries (each
//! name now names the other inode). Across two directories it goes through
//! the rename [`journal`] like a cross-directory rename: the record names
//! both inodes, and recovery completes an interrupted exchange by adding
//! both names again.

use super::rename::{Held, is_ancestor, journaled, log_add_tx, rename_record};
use super::*;

/// Swap what `src_name` in `src` and `dst_name` in `dst` name. Both must
/// exist (`NotFound`); either may be a directory. Exchanging a name with
/// itself, or two names of one inode, does nothing.
pub fn exchange(
    core: &FsCore,
    (src, src_name): (&Arc<Inode>, &[u8]),
    (dst, dst_name): (&Arc<Inode>, &[u8]),
    caller_uid: Option<u32>,
) -> Result<()> {
    core.check_writable()?;
    check_name(src_name)?;
    check_name(dst_name)?;
    let _ns = core.namespace_lock.lock();
    let same = src.ino == dst.ino;
    let mut held = Held::lock(&[(src, src_name), (dst, dst_name)])?;
    let a = named(held.get(src, src_name), src_name)?;
    let b = named(held.get(dst, dst_name), dst_name)?;
    if a.ino == b.ino {
        return Ok(());
    }
    let (ai, bi) = (core.get(a.ino)?, core.get(b.ino)?);
    check_sticky(src, &ai, caller_uid)?;
    check_sticky(dst, &bi, caller_uid)?;
    if !same {
        // Neither directory may end up inside itself.
        for (moving, into) in [(a, dst), (b, src)] {
            if moving.kind == FileKind::Dir && is_ancestor(core, moving.ino, into.ino) {
                return Err(Error::InvalidArgument(format!(
                    "cannot exchange {} and {}: a directory would move into itself",
                    show(src_name),
                    show(dst_name)
                )));
            }
        }
    }

    if same {
        let sublog = src.log.home_sublog();
        let seq = held.take_seqs(src, &[src_name, dst_name], 2);
        log_dir_group(core, src, held.shard(src, src_name), sublog, seq, |seq| {
            smallvec::smallvec![
                dir_add(seq, src_name, b, 0),
                dir_add(seq + 1, dst_name, a, 0)
            ]
        })?;
        // Each name goes from one inode to the other in one store: a lookup
        // finds the old or the new one, never nothing.
        let d = src.dir()?;
        d.insert(held.shard(src, src_name), src_name, b);
        d.insert(held.shard(dst, dst_name), dst_name, a);
    } else {
        let rec = rename_record(core, (src, src_name), (dst, dst_name), a, Some(b));
        journaled(core, &rec, || {
            log_add_tx(core, dst, held.shard(dst, dst_name), dst_name, a, rec.txid)?;
            log_add_tx(core, src, held.shard(src, src_name), src_name, b, rec.txid)
        })?;
        // Subdirectories changed parents: `..` and the parents' link counts.
        for (moved, from, to) in [(&ai, src, dst), (&bi, dst, src)] {
            if moved.is_dir() {
                moved.parent.store(to.ino, Ordering::Release);
                from.attrs.lock().nlink -= 1;
                to.attrs.lock().nlink += 1;
            }
        }
    }
    let (src_due, dst_due) = (held.due(src.ino), held.due(dst.ino));
    drop(held);
    compact_if_due(core, src, src_due);
    if !same {
        compact_if_due(core, dst, dst_due);
    }
    let now = crate::time::now_ns();
    ai.attrs.lock().ctime_ns = now;
    bi.attrs.lock().ctime_ns = now;
    Ok(())
}
