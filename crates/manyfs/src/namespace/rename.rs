//! Renames within and across directories (the journaled part of the name
//! space), and the locking helpers exchanges share with them.

use super::*;

/// Every shard of directory `d` (named `name` in its parent) for reading,
/// if it has no names: held, they keep it empty until it is marked
/// removed. The caller holds the namespace mutex and the parent's shard.
pub(super) fn empty_dir<'a>(d: &'a DirData, name: &[u8]) -> Result<crate::inode::AllShards<'a>> {
    let all = d.read_all();
    if all.iter().any(|s| !s.is_empty()) {
        return Err(Error::NotEmpty(show(name)));
    }
    Ok(all)
}

/// Write guards on the directory shards an operation changes, taken in
/// lock order: by (directory inode number, shard index), each once.
pub(super) struct Held<'a> {
    guards: SmallVec<[(u64, usize, RwLockWriteGuard<'a, DirShard>); 2]>,
}

impl<'a> Held<'a> {
    /// Lock the shards of `names` (directory, name), refusing removed
    /// directories.
    pub(super) fn lock(names: &[(&'a Inode, &[u8])]) -> Result<Self> {
        let mut keys: SmallVec<[(u64, usize, &'a DirData); 2]> = SmallVec::new();
        for &(dir, name) in names {
            let d = dir.dir()?;
            keys.push((dir.ino, d.shard_of(name), d));
        }
        keys.sort_unstable_by_key(|k| (k.0, k.1));
        keys.dedup_by_key(|k| (k.0, k.1));
        let guards = keys
            .into_iter()
            .map(|(ino, i, d)| (ino, i, d.shard(i).write()))
            .collect();
        for &(dir, _) in names {
            if dir.dir()?.removed() {
                return Err(Error::NotFound("directory was removed".into()));
            }
        }
        Ok(Held { guards })
    }

    /// The held shard of `name` in `dir`.
    pub(super) fn shard(&mut self, dir: &Inode, name: &[u8]) -> &mut DirShard {
        let i = dir.dir().expect("a locked directory").shard_of(name);
        self.guards
            .iter_mut()
            .find(|g| g.0 == dir.ino && g.1 == i)
            .map(|g| &mut *g.2)
            .expect("shard is held")
    }

    /// What `name` in `dir` names.
    pub(super) fn get(&mut self, dir: &Inode, name: &[u8]) -> Option<Child> {
        let st = self.shard(dir, name);
        held_get(dir, st, name).ok().flatten()
    }

    /// Take `n` consecutive entry sequences for an entry group that touches
    /// `names` of `dir` (their shards are held); returns the first.
    pub(super) fn take_seqs(&mut self, dir: &Inode, names: &[&[u8]], n: u64) -> u64 {
        let d = dir.dir().expect("a locked directory");
        let mut idx: SmallVec<[usize; 2]> = names.iter().map(|name| d.shard_of(name)).collect();
        let mut touched: SmallVec<[&mut DirShard; 2]> = self
            .guards
            .iter_mut()
            .filter(|g| g.0 == dir.ino && idx.contains(&g.1))
            .map(|g| &mut *g.2)
            .collect();
        idx.sort_unstable();
        idx.dedup();
        assert_eq!(touched.len(), idx.len(), "the shard of every name is held");
        take_seqs(&mut touched, n)
    }

    /// Whether a held shard of directory `ino` is due for compaction.
    pub(super) fn due(&self, ino: u64) -> bool {
        self.guards.iter().any(|g| g.0 == ino && compact_due(&g.2))
    }
}

/// Log (as part of cross-directory transaction `txid`) that `name` in
/// `dir` names `child`, and record it in memory.
pub(super) fn log_add_tx(
    core: &FsCore,
    dir: &Inode,
    st: &mut DirShard,
    name: &[u8],
    child: Child,
    txid: u64,
) -> Result<()> {
    log_dir(core, dir, st, |seq| dir_add(seq, name, child, txid))?;
    dir.dir()?.insert(st, name, child);
    Ok(())
}

/// The journal record of a cross-directory rename of `moving` (or, with
/// `exchange`, of an exchange with that inode).
pub(super) fn rename_record(
    core: &FsCore,
    (src, src_name): (&Inode, &[u8]),
    (dst, dst_name): (&Inode, &[u8]),
    moving: Child,
    exchange: Option<Child>,
) -> journal::RenameRecord {
    journal::RenameRecord {
        txid: core.next_txid.fetch_add(1, Ordering::Relaxed),
        src_dir: src.ino,
        dst_dir: dst.ino,
        moving,
        src_name: src_name.to_vec(),
        dst_name: dst_name.to_vec(),
        exchange,
    }
}

/// Run `apply` (the two directory entries of a cross-directory rename or
/// exchange) under the journal record `rec`: the record is committed (and
/// in `file` mode durable) before either entry, and cleared only once both
/// are durable.
pub(super) fn journaled(
    core: &FsCore,
    rec: &journal::RenameRecord,
    apply: impl FnOnce() -> Result<()>,
) -> Result<()> {
    let deferring = core.deferring();
    if deferring && journal::pending(&core.media)?.is_some() {
        // An earlier rename failed half way: its record must survive
        // until a mount completes it.
        return Err(Error::io(
            "an interrupted cross-directory rename is pending; remount to complete it",
            std::io::Error::from_raw_os_error(libc::EIO),
        ));
    }
    if deferring {
        // Page cache: the redo at mount trusts what the record names (both
        // directories and the moving inodes, perhaps created since the last
        // sync), so all of it must be durable before the record can be.
        core.sync()?;
    }
    journal::begin(&core.media, rec)?;
    if deferring {
        // Page cache: the record must be durable before either entry
        // can be.
        core.media
            .sync_range(JOURNAL_BLOCK * BLOCK_SIZE, BLOCK_SIZE as usize)?;
    }
    apply()?;
    if deferring {
        // Both entries durable (marked) before the record goes away.
        core.sync()?;
    }
    journal::finish(&core.media)
}

pub(super) fn is_ancestor(core: &FsCore, ancestor: u64, mut dir: u64) -> bool {
    for _ in 0..100_000 {
        if dir == ancestor {
            return true;
        }
        if dir == ROOT_INO || dir == 0 {
            return false;
        }
        dir = match core.get(dir) {
            Ok(i) => i.parent.load(Ordering::Acquire),
            Err(_) => return false,
        };
    }
    true
}

/// Rename `src_name` in `src` to `dst_name` in `dst`, replacing a
/// compatible target unless `no_replace`.
///
/// Longer than 150 lines on purpose: its steps run under one set of
/// directory and inode locks taken in the documented order, and reading
/// the whole lock scope in one place is what makes that order checkable.
pub fn rename(
    core: &FsCore,
    src: &Arc<Inode>,
    src_name: &[u8],
    dst: &Arc<Inode>,
    dst_name: &[u8],
    no_replace: bool,
    caller_uid: Option<u32>,
) -> Result<()> {
    core.check_writable()?;
    check_lookup_name(src_name)?;
    check_name(dst_name)?;
    if src_name == b"." || src_name == b".." {
        return Err(Error::InvalidArgument(
            "cannot rename \".\" or \"..\"".into(),
        ));
    }
    let same = src.ino == dst.ino;
    let names: [(&Inode, &[u8]); 2] = [(src, src_name), (dst, dst_name)];
    // A rename within one directory that replaces no directory locks that
    // directory's shards only and changes no directory's ancestry, so it
    // runs without the namespace mutex (the kernel, too, takes its rename
    // mutex for cross-directory renames only): renames in one shared
    // directory then scale like creates. Replacing a directory also locks
    // the replaced one (to keep it empty), which is a second directory:
    // that takes the mutex like every other two-directory operation.
    // (The target, when already looked up under the held shards.)
    let (_ns, mut held, seen_target) = if same {
        let mut held = Held::lock(&names)?;
        let target = held.get(dst, dst_name);
        if target.is_some_and(|t| t.kind == FileKind::Dir) {
            drop(held);
            let ns = core.namespace_lock.lock();
            (Some(ns), Held::lock(&names)?, None)
        } else {
            (None, held, Some(target))
        }
    } else {
        let ns = core.namespace_lock.lock();
        (Some(ns), Held::lock(&names)?, None)
    };
    let moving = named(held.get(src, src_name), src_name)?;
    let moving_inode = core.get(moving.ino)?;
    check_sticky(src, &moving_inode, caller_uid)?;
    let target = seen_target.unwrap_or_else(|| held.get(dst, dst_name));
    let target_inode = target.map(|t| core.get(t.ino)).transpose()?;
    // A directory replaced must stay empty until it is marked removed.
    let target_keep = target_inode.clone();
    let mut target_dir = None;
    if let Some(t) = target {
        if t.ino == src.ino || t.ino == dst.ino {
            // Renaming onto a directory that contains the source: it is not
            // empty (and we hold its lock already).
            return Err(Error::NotEmpty(show(dst_name)));
        }
        if t.ino == moving.ino {
            return Ok(()); // same inode: POSIX says do nothing
        }
        if no_replace {
            return Err(Error::Exists(show(dst_name)));
        }
        match (moving.kind == FileKind::Dir, t.kind == FileKind::Dir) {
            (true, false) => return Err(Error::NotDir(show(dst_name))),
            (false, true) => return Err(Error::IsDir(show(dst_name))),
            (true, true) => {
                // Held since the target was seen to be a directory (it
                // cannot have changed: its shard is held).
                debug_assert!(
                    _ns.is_some(),
                    "a replaced directory is locked under the mutex"
                );
                let td = target_keep.as_ref().expect("target inode").dir()?;
                target_dir = Some((td, empty_dir(td, dst_name)?));
            }
            (false, false) => {}
        }
    }
    if moving.kind == FileKind::Dir && !same && is_ancestor(core, moving.ino, dst.ino) {
        return Err(Error::InvalidArgument(format!(
            "cannot move directory {} into itself",
            show(src_name)
        )));
    }
    if let Some(ti) = &target_inode {
        check_sticky(dst, ti, caller_uid)?;
    }

    if same {
        // The entry touches both names: its sequence is above both shards'.
        let seq = held.take_seqs(src, &[src_name, dst_name], 1);
        let sublog = src.log.home_sublog();
        log_dir_group(core, src, held.shard(src, dst_name), sublog, seq, |seq| {
            smallvec::smallvec![Entry::DirRename {
                seq,
                ino: moving.ino,
                generation: moving.generation,
                kind: moving.kind,
                old: src_name.to_vec(),
                new: dst_name.to_vec(),
            }]
        })?;
        // The new name first: a lookup that runs meanwhile finds the
        // inode under both names (as Linux allows), never under neither,
        // and a replaced target is never missing.
        let d = src.dir()?;
        d.insert(held.shard(src, dst_name), dst_name, moving);
        d.remove(held.shard(src, src_name), src_name);
    } else {
        let rec = rename_record(core, (src, src_name), (dst, dst_name), moving, None);
        journaled(core, &rec, || {
            log_add_tx(
                core,
                dst,
                held.shard(dst, dst_name),
                dst_name,
                moving,
                rec.txid,
            )?;
            let st = held.shard(src, src_name);
            log_dir(core, src, st, |seq| Entry::DirRemove {
                seq,
                ino: moving.ino,
                txid: rec.txid,
                name: src_name.to_vec(),
            })?;
            src.dir()?.remove(st, src_name);
            Ok(())
        })?;
        if moving.kind == FileKind::Dir {
            moving_inode.parent.store(dst.ino, Ordering::Release);
            src.attrs.lock().nlink -= 1;
            dst.attrs.lock().nlink += 1;
        }
    }
    if let Some((td, guards)) = target_dir {
        td.mark_removed(&guards);
    }
    let (src_due, dst_due) = (held.due(src.ino), held.due(dst.ino));
    drop(held);
    compact_if_due(core, src, src_due);
    if !same {
        compact_if_due(core, dst, dst_due);
    }
    moving_inode.attrs.lock().ctime_ns = crate::time::now_ns();
    if let Some(ti) = target_inode {
        if ti.is_dir() {
            ti.attrs.lock().nlink = 0;
            dst.attrs.lock().nlink -= 1;
        } else {
            // Its link count changed: so does its ctime (as unlink).
            let mut a = ti.attrs.lock();
            a.nlink = a.nlink.saturating_sub(1);
            a.ctime_ns = crate::time::now_ns();
        }
        core.release_if_unused(&ti);
    }
    Ok(())
}
