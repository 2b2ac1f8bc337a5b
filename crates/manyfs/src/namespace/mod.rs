//! Directories, names and paths: create, link, unlink, mkdir, rmdir,
//! rename, symlinks and path resolution.
//!
//! A directory's entries live in its log. Each operation is a single
//! committed entry, except a cross-directory rename, which goes through the
//! [`journal`]. Creating an inode writes its record first and the directory
//! entry last; an inode no entry reaches is free at the next mount. Link
//! counts are never stored: recovery counts the entries.
//!
//! A directory's names are sharded by a hash of the name, each shard under
//! its own lock ([`crate::inode::DirData`]), and entries go to the sub-log
//! of the CPU the operation runs on: operations on different names of one
//! directory run in parallel. An entry's sequence is taken from the
//! directory's counter while the shards of every name it touches are held,
//! so entries for one name replay in the order they committed.
//!
//! Lock order (deadlock freedom):
//! 1. the file system's namespace mutex (rename, exchange, rmdir);
//! 2. the shards an operation changes: ordered by (directory inode number,
//!    shard index), so rename and exchange between two directories, or
//!    between two shards of one, never wait in a cycle ([`Held::lock`]);
//! 3. every shard of a child directory whose emptiness is checked (rmdir,
//!    rename over a directory), for reading, in index order: a child after
//!    its parent, which only holders of the namespace mutex do (create,
//!    link and unlink hold one shard of one directory);
//! 4. attribute mutexes and sub-log mutexes (leaves).
//!
//! Compaction takes every shard of one directory, in index order, with no
//! other shard held: an operation that finds its shard due drops its
//! guards first ([`compact_if_due`]).

mod exchange;
pub mod journal;
mod rename;

pub use exchange::exchange;
use rename::empty_dir;
pub use rename::rename;

use crate::core::{FsCore, TableGuard};
use crate::error::{Error, Result};
use crate::inode::Inode;
use crate::inode::ShardWriteGuard as RwLockWriteGuard;
use crate::inode::{AllShardsMut, Child, DirData, DirShard, NameGuard, take_seqs};
use crate::layout::*;
use smallvec::SmallVec;
use std::sync::Arc;
use std::sync::atomic::Ordering;

const S_ISGID: u32 = 0o2000;
const S_ISVTX: u32 = 0o1000;

/// Check a single path component.
pub fn check_name(name: &[u8]) -> Result<()> {
    let shown = || String::from_utf8_lossy(name).into_owned();
    if name.is_empty() || name == b"." || name == b".." {
        return Err(Error::InvalidArgument(format!(
            "{:?} is not a valid name",
            shown()
        )));
    }
    if name.contains(&b'/') || name.contains(&0) {
        return Err(Error::InvalidArgument(format!(
            "{:?} contains '/' or NUL",
            shown()
        )));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(Error::NameTooLong(shown()));
    }
    Ok(())
}

/// A name to look up (not create): only its length can be wrong here.
fn check_lookup_name(name: &[u8]) -> Result<()> {
    if name.len() > MAX_NAME_LEN {
        return Err(Error::NameTooLong(show(name)));
    }
    Ok(())
}

fn show(name: &[u8]) -> String {
    String::from_utf8_lossy(name).into_owned()
}

/// Look `name` up in directory `dir` ("." and ".." included).
pub fn lookup(core: &FsCore, dir: &Inode, name: &[u8]) -> Result<Arc<Inode>> {
    lookup_ref(core, &core.guard(), dir, name).cloned()
}

/// [`lookup`], borrowing the inode under `guard` (no reference count taken).
fn lookup_ref<'g>(
    core: &'g FsCore,
    guard: &'g TableGuard<'_>,
    dir: &Inode,
    name: &[u8],
) -> Result<&'g Arc<Inode>> {
    let d = dir.dir()?;
    if name == b"." {
        return core.get_ref(dir.ino, guard);
    }
    if name == b".." {
        let p = dir.parent.load(Ordering::Acquire);
        return core.get_ref(if p == 0 { ROOT_INO } else { p }, guard);
    }
    if name.len() > MAX_NAME_LEN {
        return Err(Error::NameTooLong(show(name)));
    }
    let names = NameGuard::new();
    let c = d
        .get(name, &names)
        .ok_or_else(|| Error::NotFound(show(name)))?;
    inode_named(core, guard, d, &names, name, c)
}

/// The live inode of `c`, which `name` of `d` named when read under
/// `names` (without a lock): if it has gone since, what `name` names now.
pub(crate) fn inode_named<'g>(
    core: &'g FsCore,
    guard: &'g TableGuard<'_>,
    d: &DirData,
    names: &NameGuard,
    name: &[u8],
    mut c: Child,
) -> Result<&'g Arc<Inode>> {
    loop {
        let err = match core.get_ref(c.ino, guard) {
            Ok(i) if i.generation == c.generation => return Ok(i),
            // The number was freed and given to a new inode after the name
            // was read (the name was removed meanwhile): not what it named.
            Ok(_) => Error::NotFound(show(name)),
            Err(e) => e,
        };
        // The inode left the table after the name was read: the name was
        // removed or renamed over meanwhile. What does it name now?
        match d.get(name, names) {
            Some(now) if now != c => c = now,
            Some(_) => return Err(err),
            None => return Err(Error::NotFound(show(name))),
        }
    }
}

/// Append a directory entry that touches names of shard `st` alone to the
/// calling CPU's sub-log; `st` counts it. The caller holds `st`.
fn log_dir(
    core: &FsCore,
    dir: &Inode,
    st: &mut DirShard,
    make: impl FnOnce(u64) -> Entry,
) -> Result<()> {
    let seq = take_seqs(&mut [&mut *st], 1);
    let sublog = dir.log.home_sublog();
    log_dir_group(core, dir, st, sublog, seq, |seq| {
        smallvec::smallvec![make(seq)]
    })
}

/// Append directory entries as one atomic group to sub-log `sublog`;
/// `make` builds them from `first`, the first of the sequences the caller
/// took for them ([`take_seqs`], one each, under the shards of every name
/// they touch). `st` is the shard that counts them. The directory's mtime
/// (and so its ctime) is kept by the sub-log, like a write's: no
/// attribute mutex on the way.
fn log_dir_group(
    core: &FsCore,
    dir: &Inode,
    st: &mut DirShard,
    sublog: usize,
    first: u64,
    make: impl FnOnce(u64) -> SmallVec<[Entry; 2]>,
) -> Result<()> {
    let group: SmallVec<[(Entry, u32); 2]> = make(first).into_iter().map(|e| (e, 1)).collect();
    dir.log
        .append(core, sublog, &group, crate::time::now_ns())?;
    st.log_entries += group.len() as u64;
    Ok(())
}

/// Whether shard `st` carries many dead entries (the shard's share of the
/// directory's compaction trigger; names hash evenly, so a directory whose
/// log is much longer than its live names has such a shard).
///
/// A compaction rewrites every live name with every shard held, so how
/// often it runs is a trade of log space for serial time: at most
/// `COMPACT_RATIO - 1` dead entries per live one (plus the slack) are
/// kept, and each compaction is paid for by that many dead entries, so it
/// rewrites at most `1 / (COMPACT_RATIO - 1)` names per directory change.
fn compact_due(st: &DirShard) -> bool {
    st.log_entries > COMPACT_RATIO * st.len() + COMPACT_SLACK
}

/// A shard's log entries per live name that make it due for compaction
/// (docs/benchmarks.md: 2 rewrote 0.65 names per create or unlink of a
/// directory whose names come and go in batches, 4 rewrites 0.26).
const COMPACT_RATIO: u64 = 4;

/// Compact `dir`'s log if an operation found one of its shards due
/// (`due`); called with no shard held. Best effort: on failure (a full
/// pool) the old log stays valid.
fn compact_if_due(core: &FsCore, dir: &Inode, due: bool) {
    if !due {
        return;
    }
    let Ok(d) = dir.dir() else { return };
    let mut all = d.write_all();
    // Another thread may have compacted meanwhile; a removed directory's
    // log is freed with it.
    if d.removed() || !all.iter().any(|s| compact_due(s)) {
        return;
    }
    let _ = compact_dir(core, dir, &mut all);
}

/// Attribute entries (chmod, chown, utimes) a directory log may collect
/// before it is compacted.
const COMPACT_AFTER_ATTR_ENTRIES: u64 = 64;

/// Compact a directory's log if attribute changes dominate it (called by
/// `set_attrs` without any lock held).
pub(crate) fn maybe_compact_dir_attrs(core: &FsCore, dir: &Inode) {
    if dir.attr_entries.load(Ordering::Relaxed) <= COMPACT_AFTER_ATTR_ENTRIES {
        return;
    }
    let Ok(d) = dir.dir() else { return };
    let mut all = d.write_all();
    // A removed directory's log is freed with it; re-check under the locks.
    if d.removed() || dir.attr_entries.load(Ordering::Relaxed) <= COMPACT_AFTER_ATTR_ENTRIES {
        return;
    }
    let _ = compact_dir(core, dir, &mut all);
}

/// Dead entries a directory shard's log may carry beyond
/// `COMPACT_RATIO - 1` per live name before it is compacted.
const COMPACT_SLACK: u64 = 64;

/// Rewrite a directory's log as its live entries (caller holds every shard
/// for writing, so nothing else appends and the names are one snapshot).
fn compact_dir(core: &FsCore, dir: &Inode, all: &mut AllShardsMut<'_>) -> Result<()> {
    // Held until the switch: a concurrent chmod appends to the old log
    // under this mutex, so the rewrite must not carry a stale snapshot.
    let a = dir.attrs.lock();
    let attr_seq = dir.attr_seq.load(Ordering::Acquire) + 1;
    let mut entries = vec![(
        Entry::SetAttr {
            seq: attr_seq,
            size_set: false,
            size: 0,
            mode: a.mode,
            uid: a.uid,
            gid: a.gid,
            atime_ns: a.atime_ns,
            mtime_ns: a.mtime_ns.max(dir.log.last_mtime_ns()),
            ctime_ns: a.ctime_ns,
        },
        1,
    )];
    // Shard by shard (a name is in one shard: the order of the names in
    // the log does not matter to recovery).
    entries.reserve(all.iter().map(|s| s.len() as usize).sum());
    let mut seq = DirData::seq(all);
    dir.dir()?.for_each(all, |name, c| {
        seq += 1;
        entries.push((
            Entry::DirAdd {
                seq,
                ino: c.ino,
                generation: c.generation,
                kind: c.kind,
                txid: 0,
                name: name.to_vec(),
            },
            1,
        ));
    });
    // Held until the switch, like the attributes.
    let xattrs = dir.xattrs.lock();
    entries.extend(xattrs.rewrite_entries(a.ctime_ns));
    dir.log.rewrite(
        core,
        core.sb.inode_offset(dir.ino) + INODE_LOG_ARRAY_OFFSET,
        &entries,
    )?;
    drop(xattrs);
    dir.attr_seq.store(attr_seq, Ordering::Release);
    dir.attr_entries.store(1, Ordering::Relaxed);
    DirData::set_seq(all, seq);
    for s in all.iter_mut() {
        s.log_entries = s.len();
    }
    Ok(())
}

/// Refuse a new `name` in `parent`, whose shard `st` holds it: the
/// directory was removed (checked under the shard's lock; rmdir marks a
/// directory removed while holding every shard, so no entry can be added
/// to a removed directory) or the name is taken.
fn check_free_name(parent: &Inode, st: &DirShard, name: &[u8]) -> Result<()> {
    let _ = st;
    check_free_name_now(parent, name)
}

/// [`check_free_name`] without the shard: what holds at this instant (a
/// create's early refusal; the answer can change before the shard is
/// taken).
fn check_free_name_now(parent: &Inode, name: &[u8]) -> Result<()> {
    let d = parent.dir()?;
    if d.removed() {
        return Err(Error::NotFound(format!(
            "directory inode {} was removed",
            parent.ino
        )));
    }
    if d.get(name, &NameGuard::new()).is_some() {
        return Err(Error::Exists(show(name)));
    }
    Ok(())
}

/// What `name` of `dir` names, read by a holder of the name's shard `st`
/// (nothing changes it meanwhile).
fn held_get(dir: &Inode, st: &DirShard, name: &[u8]) -> Result<Option<Child>> {
    let _ = st;
    Ok(dir.dir()?.get(name, &NameGuard::new()))
}

/// What `name` names (`NotFound` when nothing).
fn named(child: Option<Child>, name: &[u8]) -> Result<Child> {
    child.ok_or_else(|| Error::NotFound(show(name)))
}

/// The directory-entry view of an inode.
fn child_of(inode: &Inode) -> Child {
    Child {
        ino: inode.ino,
        generation: inode.generation,
        kind: inode.kind,
    }
}

/// Log that `name` in `parent` now names `child`.
fn log_add(
    core: &FsCore,
    parent: &Inode,
    st: &mut DirShard,
    name: &[u8],
    child: Child,
) -> Result<()> {
    log_dir(core, parent, st, |seq| dir_add(seq, name, child, 0))
}

/// The entry saying that `name` names `child` (`txid`: the cross-directory
/// transaction it belongs to, or 0).
pub(crate) fn dir_add(seq: u64, name: &[u8], child: Child, txid: u64) -> Entry {
    Entry::DirAdd {
        seq,
        ino: child.ino,
        generation: child.generation,
        kind: child.kind,
        txid,
        name: name.to_vec(),
    }
}

/// Log that `name` (naming `ino`) is gone from `parent` and forget it in
/// memory (caller holds the name's shard `st`).
fn remove_name(
    core: &FsCore,
    parent: &Inode,
    st: &mut DirShard,
    name: &[u8],
    ino: u64,
) -> Result<()> {
    log_dir(core, parent, st, |seq| Entry::DirRemove {
        seq,
        ino,
        txid: 0,
        name: name.to_vec(),
    })?;
    parent.dir()?.remove(st, name);
    Ok(())
}

/// What to create.
#[derive(Debug, Clone, Copy)]
pub enum NewNode<'a> {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link with this target.
    Symlink(&'a [u8]),
    /// A FIFO, socket or device node (`kind.is_special()`), with its
    /// device number (0 for FIFOs and sockets).
    Special {
        /// Which special kind.
        kind: FileKind,
        /// Device number.
        rdev: u64,
    },
}

impl NewNode<'_> {
    /// The kind of inode this creates.
    pub fn kind(&self) -> FileKind {
        match self {
            NewNode::File => FileKind::File,
            NewNode::Dir => FileKind::Dir,
            NewNode::Symlink(_) => FileKind::Symlink,
            NewNode::Special { kind, .. } => *kind,
        }
    }
}

/// Create `name` in `parent`.
pub fn create(
    core: &FsCore,
    parent: &Arc<Inode>,
    name: &[u8],
    node: NewNode<'_>,
    mode: u32,
    uid: u32,
    gid: u32,
) -> Result<Arc<Inode>> {
    create_node(core, parent, name, node, (mode, uid, gid), false, &[])
}

/// [`create`] of an inode that starts with extended attributes `xattrs`
/// (the ACLs it inherits): logged in its own log, as one group, before
/// the entry that names it, so that no crash leaves the name (and the
/// mode the ACL decided) without them.
pub fn create_with_xattrs(
    core: &FsCore,
    parent: &Arc<Inode>,
    name: &[u8],
    node: NewNode<'_>,
    mode_uid_gid: (u32, u32, u32),
    xattrs: &[(Vec<u8>, Vec<u8>)],
) -> Result<Arc<Inode>> {
    create_node(core, parent, name, node, mode_uid_gid, false, xattrs)
}

/// [`create`] for an open: the new inode is returned pinned ([`Inode::pin`]:
/// the caller's handle owns the pin), taken before its name is visible, so
/// that a concurrent unlink of the name cannot free it before the open
/// returns.
pub fn create_pinned(
    core: &FsCore,
    parent: &Arc<Inode>,
    name: &[u8],
    node: NewNode<'_>,
    mode: u32,
    uid: u32,
    gid: u32,
) -> Result<Arc<Inode>> {
    create_node(core, parent, name, node, (mode, uid, gid), true, &[])
}

fn create_node(
    core: &FsCore,
    parent: &Arc<Inode>,
    name: &[u8],
    node: NewNode<'_>,
    (mode, uid, gid): (u32, u32, u32),
    pin: bool,
    xattrs: &[(Vec<u8>, Vec<u8>)],
) -> Result<Arc<Inode>> {
    core.check_writable()?;
    check_name(name)?;
    let d = parent.dir()?;
    let kind = node.kind();
    let rdev = match node {
        NewNode::Special { kind, rdev } if kind.is_special() => rdev,
        NewNode::Special { kind, .. } => {
            return Err(Error::InvalidArgument(format!(
                "{kind:?} is not a special file kind"
            )));
        }
        _ => 0,
    };
    // setgid directories hand their group (and, to subdirectories, the bit)
    // down. The `setid` flag spares creates in other directories the
    // parent's attribute mutex (one cache line all of them would share).
    let (pmode, pgid) = if parent.setid.load(Ordering::Acquire) {
        let a = parent.attrs.lock();
        (a.mode, a.gid)
    } else {
        (0, 0)
    };
    let (gid, mode) = if pmode & S_ISGID != 0 {
        (
            pgid,
            if kind == FileKind::Dir {
                mode | S_ISGID
            } else {
                mode
            },
        )
    } else {
        (gid, mode)
    };
    let mode = if kind == FileKind::Symlink {
        0o777
    } else {
        mode
    };
    // The inode is made before the name's shard is taken: writing and
    // persisting its record is most of a create, and nothing reaches the
    // inode before its name is logged, so creates of other names in the
    // shard need not wait for it. A name already taken is refused first
    // (read without the lock); one taken meanwhile frees the inode again.
    check_free_name_now(parent, name)?;
    let child = core.new_inode(kind, mode, uid, gid, rdev)?;
    let mut st = d.shard(d.shard_of(name)).write();
    if let Err(e) = check_free_name(parent, &st, name) {
        drop(st);
        child.attrs.lock().nlink = 0;
        core.release_if_unused(&child);
        return Err(e);
    }
    let made = (|| {
        if pin {
            // Nothing else reaches the new inode yet: it cannot be freed.
            child.pin()?;
        }
        let sublog = parent.log.home_sublog();
        // What the new inode's own log must hold before a name reaches
        // it: a symlink's target, or inherited ACLs (the mode in its
        // record was decided by them). It counts wherever the name does:
        // its blocks join the next barrier of the directory's sub-log that
        // the name goes to (a sync snapshots one sub-log at a time).
        crate::file::log_initial_xattrs(core, &child, xattrs)?;
        if let NewNode::Symlink(target) = node {
            crate::file::write(core, &child, target, 0)?;
        }
        if !xattrs.is_empty() || matches!(node, NewNode::Symlink(_)) {
            core.premark_unnamed(&child, parent, sublog)?;
        }
        let c = child_of(&child);
        let seq = take_seqs(&mut [&mut *st], 1);
        log_dir_group(core, parent, &mut st, sublog, seq, |seq| {
            smallvec::smallvec![dir_add(seq, name, c, 0)]
        })
    })();
    if let Err(e) = made {
        child.attrs.lock().nlink = 0;
        if pin && child.open_handles.load(Ordering::Acquire) > 0 {
            core.unpin(&child);
        } else {
            core.release_if_unused(&child);
        }
        return Err(e);
    }
    if kind == FileKind::Dir {
        child.parent.store(parent.ino, Ordering::Release);
    }
    // In the inode table before its name is visible: a lookup that finds
    // the name finds the inode.
    core.insert(child.clone());
    d.insert(&mut st, name, child_of(&child));
    if kind == FileKind::Dir {
        parent.attrs.lock().nlink += 1;
    }
    let due = compact_due(&st);
    drop(st);
    compact_if_due(core, parent, due);
    Ok(child)
}

/// Add another name for a non-directory inode.
pub fn link(core: &FsCore, inode: &Arc<Inode>, parent: &Arc<Inode>, name: &[u8]) -> Result<()> {
    core.check_writable()?;
    check_name(name)?;
    let d = parent.dir()?;
    let mut st = d.shard(d.shard_of(name)).write();
    // As Linux: a taken name is reported before a directory source.
    check_free_name(parent, &st, name)?;
    if inode.is_dir() {
        return Err(Error::NotPermitted(
            "hard links to directories are not allowed".into(),
        ));
    }
    // Take the new link first, so a concurrent unlink of the last other
    // name cannot free the inode while its entry is being written.
    {
        let mut a = inode.attrs.lock();
        if a.nlink == 0 {
            return Err(Error::NotFound(format!("inode {} was removed", inode.ino)));
        }
        a.nlink += 1;
    }
    let logged = log_add(core, parent, &mut st, name, child_of(inode));
    if let Err(e) = logged {
        inode.attrs.lock().nlink -= 1;
        drop(st);
        core.release_if_unused(inode);
        return Err(e);
    }
    d.insert(&mut st, name, child_of(inode));
    let due = compact_due(&st);
    drop(st);
    inode.attrs.lock().ctime_ns = crate::time::now_ns();
    compact_if_due(core, parent, due);
    Ok(())
}

fn check_sticky(parent: &Inode, child: &Inode, caller_uid: Option<u32>) -> Result<()> {
    let Some(uid) = caller_uid else { return Ok(()) };
    let pa = parent.attrs.lock().clone();
    if pa.mode & S_ISVTX != 0 && uid != 0 && uid != pa.uid && uid != child.attrs.lock().uid {
        return Err(Error::NotPermitted(format!(
            "sticky directory {}: only the owner may remove or rename entries",
            parent.ino
        )));
    }
    Ok(())
}

/// The entry `name` of `parent` that an unlink (`dir == false`) or an
/// rmdir (`dir == true`) by `caller_uid` may remove, and its inode.
fn removal_target(
    core: &FsCore,
    parent: &Inode,
    st: &DirShard,
    name: &[u8],
    dir: bool,
    caller_uid: Option<u32>,
) -> Result<(Child, Arc<Inode>)> {
    let child = held_get(parent, st, name)?.ok_or_else(|| Error::NotFound(show(name)))?;
    match (dir, child.kind == FileKind::Dir) {
        (false, true) => return Err(Error::IsDir(show(name))),
        (true, false) => return Err(Error::NotDir(show(name))),
        _ => {}
    }
    let inode = core.get(child.ino)?;
    check_sticky(parent, &inode, caller_uid)?;
    Ok((child, inode))
}

/// Remove a name: a non-directory (`unlink`, `dir == false`) or an empty
/// directory (`rmdir`, `dir == true`).
pub fn remove(
    core: &FsCore,
    parent: &Arc<Inode>,
    name: &[u8],
    dir: bool,
    caller_uid: Option<u32>,
) -> Result<()> {
    core.check_writable()?;
    check_lookup_name(name)?;
    if dir && name == b"." {
        return Err(Error::InvalidArgument("rmdir of \".\"".into()));
    }
    if dir && name == b".." {
        return Err(Error::NotEmpty(show(name)));
    }
    // Removing a directory changes the tree's shape (rename's ancestor
    // check must not race with it); removing a file does not.
    let _ns = dir.then(|| core.namespace_lock.lock());
    let d = parent.dir()?;
    let mut st = d.shard(d.shard_of(name)).write();
    let (child, inode) = removal_target(core, parent, &st, name, dir, caller_uid)?;
    if dir {
        let cd = inode.dir()?;
        let child_state = empty_dir(cd, name)?;
        remove_name(core, parent, &mut st, name, child.ino)?;
        cd.mark_removed(&child_state);
        inode.attrs.lock().nlink = 0;
        drop(child_state);
        let due = compact_due(&st);
        drop(st);
        parent.attrs.lock().nlink -= 1;
        compact_if_due(core, parent, due);
    } else {
        remove_name(core, parent, &mut st, name, child.ino)?;
        let due = compact_due(&st);
        drop(st);
        {
            let mut a = inode.attrs.lock();
            a.nlink = a.nlink.saturating_sub(1);
            a.ctime_ns = crate::time::now_ns();
        }
        compact_if_due(core, parent, due);
    }
    core.release_if_unused(&inode);
    Ok(())
}

/// Entries of a directory, sorted by name.
pub fn list(dir: &Inode) -> Result<Vec<(Vec<u8>, Child)>> {
    Ok(dir.dir()?.snapshot().into_iter().collect())
}

/// The target of a symlink.
pub fn read_link(core: &FsCore, inode: &Inode) -> Result<Vec<u8>> {
    if inode.kind != FileKind::Symlink {
        return Err(Error::InvalidArgument(format!(
            "inode {} is not a symlink",
            inode.ino
        )));
    }
    let _pin = crate::core::PinGuard::new(core, inode)?;
    let len = inode.file()?.size();
    if len > MAX_SYMLINK_TARGET as u64 {
        return Err(Error::corrupt(
            format!("symlink inode {}", inode.ino),
            format!("target of {len} bytes (at most {MAX_SYMLINK_TARGET})"),
        ));
    }
    let len = len as usize;
    let mut buf = vec![0u8; len];
    let n = crate::file::read(core, inode, &mut buf, 0)?;
    buf.truncate(n);
    Ok(buf)
}

/// Symlinks followed while resolving one path before giving up (ELOOP).
pub const MAX_SYMLINKS: usize = 40;

/// Longest symlink target (Linux: PATH_MAX including the terminating NUL).
pub const MAX_SYMLINK_TARGET: usize = 4095;

/// Resolve `path` from the root. With `follow_last`, a final symlink is
/// followed too. A trailing slash means the path must name a directory (a
/// final symlink is then followed whatever `follow_last` says).
pub fn resolve(core: &FsCore, path: &[u8], follow_last: bool) -> Result<Arc<Inode>> {
    let mut budget = MAX_SYMLINKS;
    let trailing = path.len() > 1 && path.ends_with(b"/");
    let guard = core.guard();
    let inode = walk(
        core,
        &guard,
        core.get_ref(ROOT_INO, &guard)?,
        path,
        follow_last || trailing,
        &mut budget,
    )
    .map_err(|e| e.with_subject(&show(path)))?;
    if trailing && !inode.is_dir() {
        return Err(Error::NotDir(show(path)));
    }
    Ok(inode.clone())
}

/// Walk `path` from `start` (from the root if it is absolute). Every
/// inode on the way is borrowed under `guard`: threads resolving paths
/// through the same directories take no reference count and no table lock,
/// so they share no written cache line; the caller clones only the result.
fn walk<'a>(
    core: &'a FsCore,
    guard: &'a TableGuard<'_>,
    start: &'a Arc<Inode>,
    path: &[u8],
    follow_last: bool,
    budget: &mut usize,
) -> Result<&'a Arc<Inode>> {
    let mut cur = if path.first() == Some(&b'/') {
        core.get_ref(ROOT_INO, guard)?
    } else {
        start
    };
    let leave = core.opts.symlinks_leave_pool;
    let mut parts = path
        .split(|&c| c == b'/')
        .filter(|p| !p.is_empty())
        .peekable();
    while let Some(part) = parts.next() {
        let last = parts.peek().is_none();
        if !cur.is_dir() {
            return Err(Error::NotDir(show(path)));
        }
        if leave && part == b".." && cur.ino == ROOT_INO {
            return Err(leaves_pool(b"..", parts, path));
        }
        let next = lookup_ref(core, guard, cur, part)?;
        if next.kind == FileKind::Symlink && (!last || follow_last) {
            if *budget == 0 {
                return Err(Error::Loop(show(path)));
            }
            *budget -= 1;
            let target = read_link(core, next)?;
            if leave && target.first() == Some(&b'/') {
                return Err(leaves_pool(&target, parts, path));
            }
            cur = match walk(core, guard, cur, &target, true, budget) {
                Err(Error::LeavesPool { rest }) => return Err(leaves_pool(&rest, parts, path)),
                walked => walked?,
            };
        } else {
            cur = next;
        }
    }
    Ok(cur)
}

/// [`Error::LeavesPool`] of a walk of `path` that left the pool: `head`
/// (where it went), then the components of `path` not walked yet, and
/// `path`'s trailing slash.
fn leaves_pool<'p>(head: &[u8], unwalked: impl Iterator<Item = &'p [u8]>, path: &[u8]) -> Error {
    let mut rest = head.to_vec();
    for part in unwalked {
        if !rest.ends_with(b"/") {
            rest.push(b'/');
        }
        rest.extend_from_slice(part);
    }
    if path.ends_with(b"/") && !rest.ends_with(b"/") {
        rest.push(b'/');
    }
    Error::LeavesPool { rest }
}

/// A path split for an operation on its last component; `D` holds the
/// directory: an `Arc`, or a reference borrowed under a table guard
/// ([`resolve_parent_in`]).
pub struct Split<D = Arc<Inode>> {
    /// The directory holding the last component.
    pub dir: D,
    /// The last component (may be `.` or `..`; callers decide).
    pub name: Vec<u8>,
    /// Whether the path ended in `/` (the last component must then be a
    /// directory).
    pub trailing_slash: bool,
}

impl<D> Split<D> {
    /// Whether the last component is `.` or `..`.
    pub fn is_dot(&self) -> bool {
        self.name == b"." || self.name == b".."
    }
}

/// Resolve all but the last component of `path` (relative paths start at
/// `start`), following symlinks on the way.
pub fn resolve_parent_at(
    core: &FsCore,
    start: &Arc<Inode>,
    path: &[u8],
    budget: &mut usize,
) -> Result<Split> {
    let guard = core.guard();
    let s = resolve_parent_in(core, &guard, start, path, budget)?;
    Ok(Split {
        dir: s.dir.clone(),
        name: s.name,
        trailing_slash: s.trailing_slash,
    })
}

/// [`resolve_parent_at`], with the directory borrowed under `guard`: no
/// reference count is taken on it, so threads creating and removing names
/// in one directory write no line of its inode.
pub fn resolve_parent_in<'a>(
    core: &'a FsCore,
    guard: &'a TableGuard<'_>,
    start: &'a Arc<Inode>,
    path: &[u8],
    budget: &mut usize,
) -> Result<Split<&'a Arc<Inode>>> {
    let trailing_slash = path.len() > 1 && path.ends_with(b"/");
    let mut trimmed = path;
    while trimmed.len() > 1 && trimmed.last() == Some(&b'/') {
        trimmed = &trimmed[..trimmed.len() - 1];
    }
    let (dir, name) = match trimmed.iter().rposition(|&c| c == b'/') {
        Some(i) => (&trimmed[..i.max(1)], &trimmed[i + 1..]),
        None => (&b""[..], trimmed),
    };
    if name.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "{:?} names no entry",
            show(path)
        )));
    }
    let dir = walk(core, guard, start, dir, true, budget).map_err(|e| match e {
        Error::LeavesPool { rest } => leaves_pool(&rest, std::iter::once(name), path),
        e => e.with_subject(&show(path)),
    })?;
    if !dir.is_dir() {
        return Err(Error::NotDir(show(path)));
    }
    Ok(Split {
        dir,
        name: name.to_vec(),
        trailing_slash,
    })
}

/// [`resolve_parent_at`] from the root.
pub fn resolve_parent(core: &FsCore, path: &[u8]) -> Result<Split> {
    let mut budget = MAX_SYMLINKS;
    let guard = core.guard();
    resolve_parent_at(core, core.get_ref(ROOT_INO, &guard)?, path, &mut budget)
}

/// [`resolve_parent`], with the directory borrowed under `guard`
/// ([`resolve_parent_in`]).
pub fn resolve_parent_ref<'a>(
    core: &'a FsCore,
    guard: &'a TableGuard<'_>,
    path: &[u8],
) -> Result<Split<&'a Arc<Inode>>> {
    let mut budget = MAX_SYMLINKS;
    resolve_parent_in(
        core,
        guard,
        core.get_ref(ROOT_INO, guard)?,
        path,
        &mut budget,
    )
}
