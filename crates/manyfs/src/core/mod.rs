//! The state of a mounted pool shared by every handle: media, geometry,
//! allocators, live-entry counters and the inode table.

mod alloc;
pub(crate) mod sync;

use crate::alloc::{BlockAllocator, Blocks, InodeAllocator, Purpose};
use crate::error::{Error, Result};
use crate::inode::{Attrs, FileData, Inode};
use crate::layout::*;
use crate::log::{InodeLog, LogSpace, SubLog};
use crate::media::Media;
use crate::options::MountOptions;
use crate::sync::{AtomicU32, AtomicU64, Ordering};
use crate::topology::Topology;
use parking_lot::Mutex;
use std::sync::Arc;

/// The inode table: inode number -> live inode. Every path component and
/// every FUSE request looks an inode up here, and many threads look up the
/// same few directories (the root, a shared directory), so a lookup must
/// not write a shared cache line: no reader lock word, and (through
/// [`FsCore::get_ref`]) no reference count. papaya's lookups only announce
/// the thread in its own slot of the map's reclamation scheme; an entry
/// removed while a guard is held stays readable until the guard is dropped.
type InodeTable = papaya::HashMap<u64, Arc<Inode>>;

/// Entries the inode table's reclamation retires per batch. Freeing a
/// batch costs a process-wide memory barrier (`membarrier`, an IPI to
/// every CPU running the process); seize's default of 32 made one per 32
/// unlinks. A batch holds its inodes' memory until it is freed.
const RETIRE_BATCH: usize = 1024;

/// A guard under which [`FsCore::get_ref`] hands out borrowed inodes (a
/// path walk takes one and clones only the inode it returns).
pub struct TableGuard<'a>(papaya::LocalGuard<'a>);

/// Keeps an inode's space allocated while an operation without an open
/// handle (truncate by path, chmod, readlink) works on it.
pub struct PinGuard<'a> {
    core: &'a FsCore,
    inode: &'a Inode,
}

impl<'a> PinGuard<'a> {
    /// Pin `inode`; fails if it has already been freed.
    pub fn new(core: &'a FsCore, inode: &'a Inode) -> Result<Self> {
        inode.pin()?;
        Ok(PinGuard { core, inode })
    }
}

impl Drop for PinGuard<'_> {
    fn drop(&mut self) {
        self.core.unpin(self.inode);
    }
}

/// What logs the appends an inode gathered in place, in memory only
/// (`file::log_pending_append`): the file layer, which makes them, sits
/// above this one and installs it when a mount is built; a sync calls it
/// before it snapshots an inode's log.
pub(crate) type UnloggedAppends = fn(&FsCore, &Inode) -> Result<()>;

/// Everything a mounted pool shares. Aligned to 128 bytes so that, in an
/// `Arc`, the reference count (taken by every open handle) has its line to
/// itself: a count moved between CPUs does not take the fields every
/// operation reads with it.
#[repr(align(128))]
pub struct FsCore {
    /// The pool mapping.
    pub media: Media,
    /// Geometry.
    pub sb: Superblock,
    /// Free blocks: the pool's, and the data device's on a tiered pool.
    pub blocks: Blocks,
    /// Free inode numbers.
    pub inode_numbers: InodeAllocator,
    /// Live references into each block when it is a log page.
    /// (A lazily filled radix tree: a large pool costs nothing until its
    /// blocks become log pages.)
    live: crate::index::radix::CasRadix<AtomicU32>,
    /// Mount options.
    pub opts: MountOptions,
    table: InodeTable,
    /// Serialises operations that lock two directories (rename, rmdir),
    /// as the kernel's rename mutex does.
    pub namespace_lock: Mutex<()>,
    /// Next cross-directory rename transaction id.
    pub next_txid: AtomicU64,
    /// Sub-logs per file and directory log: one per CPU of the topology
    /// (or one, [`crate::options::Sublogs::One`]).
    pub file_sublogs: usize,
    /// The topology per-CPU structures are sized by.
    pub topology: Topology,
    /// Deferred frees, dirty inodes and syncs of `file` mode.
    pub sync_engine: crate::alloc::deferred::SyncEngine,
    /// `file` mode: inodes named since the last full sync, and where.
    pub named: crate::alloc::deferred::Named,
    /// Inodes that began holding appends not logged yet since the last full
    /// sync took this list (`file::append_in_place`).
    pub(crate) pending_appends: Mutex<Vec<u64>>,
    /// Logs the appends an inode gathered in place without an entry, before
    /// a sync snapshots its log ([`UnloggedAppends`]).
    pub(crate) log_unlogged_appends: UnloggedAppends,
    /// Thread placement: per-thread I/O accounting and the planner.
    pub placement: crate::placement::Placement,
    /// With `checkpoint=blocking`: writers hold it shared, a checkpoint
    /// exclusively. Untouched with `checkpoint=background`.
    checkpoint_gate: parking_lot::RwLock<()>,
    /// Set when the mount is dropped, waking the commit thread to leave at
    /// once (it holds only a weak reference between its checks).
    pub(crate) commit_stop: std::sync::Arc<StopSignal>,
    /// Small synchronous writes staged in the pool of a tiered pool.
    pub staging: crate::inode::Staging,
    /// Bugs a test planted in this mount (besides staging's).
    #[cfg(feature = "planted-bugs")]
    pub planted: PlantedBugs,
    /// Node spills per member as of the last write of the spill records
    /// (read at mount, then what [`FsCore::persist_spills`] last wrote).
    spills: Spills,
}

/// The persisted side of the node spill counts (`layout::members`, "Spill
/// record"): per mapped member, the count its records held at mount, the
/// count last written, and the member each topology node's spills since
/// the mount are added to (the node's first member).
struct Spills {
    at_mount: Box<[u64]>,
    written: Mutex<Box<[u64]>>,
    /// Per topology node: its first member, if any member is on it.
    home: Box<[Option<usize>]>,
    /// Per mapped member: its topology node.
    node: Box<[usize]>,
}

impl Spills {
    fn new(media: &Media, topology: &Topology) -> Spills {
        let at_mount: Box<[u64]> = crate::media::pool::read_spills(media).into();
        let nodes = topology.node_count();
        // A member on a node the topology lacks counts as node
        // `node % nodes`, as the allocator places it.
        let node: Box<[usize]> = media
            .members()
            .iter()
            .map(|m| m.node as usize % nodes)
            .collect();
        let home = (0..nodes)
            .map(|n| node.iter().position(|&m| m == n))
            .collect();
        Spills {
            written: Mutex::new(at_mount.clone()),
            at_mount,
            home,
            node,
        }
    }
}

/// The engine bugs a test build planted in one mount (`diag::plant_bug`)
/// other than staging's ([`crate::inode::EngineBug::StagedBlockFreedEarly`],
/// which `Staging` keeps).
#[cfg(feature = "planted-bugs")]
#[derive(Debug, Default)]
pub struct PlantedBugs {
    /// [`crate::inode::EngineBug::ArrayLinkedBeforeDurable`].
    array_unsynced: std::sync::atomic::AtomicBool,
    /// [`crate::inode::EngineBug::ModeAndAclApart`].
    mode_and_acl_apart: std::sync::atomic::AtomicBool,
}

#[cfg(feature = "planted-bugs")]
impl PlantedBugs {
    /// Plant `bug` (staging's is `Staging`'s, not planted here).
    pub(crate) fn plant(&self, bug: crate::inode::EngineBug) {
        use std::sync::atomic::Ordering::Relaxed;
        match bug {
            crate::inode::EngineBug::ArrayLinkedBeforeDurable => {
                self.array_unsynced.store(true, Relaxed)
            }
            crate::inode::EngineBug::ModeAndAclApart => {
                self.mode_and_acl_apart.store(true, Relaxed)
            }
            crate::inode::EngineBug::StagedBlockFreedEarly => {}
        }
    }
}

impl LogSpace for FsCore {
    fn media(&self) -> &Media {
        &self.media
    }
    fn alloc_meta_block(&self) -> Result<u64> {
        Ok(self.blocks.alloc(1, Purpose::Meta)?.0)
    }
    fn free_blocks(&self, first: u64, count: u64) {
        self.blocks.free(first, count)
    }
    fn log_word_at(&self, ino: u64) -> u64 {
        self.sb.inode_offset(ino) + INODE_LOG_ARRAY_OFFSET
    }
    fn live_counter(&self, page: u64) -> Option<&AtomicU32> {
        let i = page.checked_sub(self.sb.data_start)?;
        (page < self.sb.total_blocks).then(|| self.live.get_or_insert(i))
    }
    fn keeps_marks(&self) -> bool {
        self.deferring()
    }
    fn retire_block(&self, block: u64) {
        if self.deferring() {
            self.sync_engine
                .defer(crate::alloc::deferred::Pending::LogBlock(block));
        } else {
            self.blocks.free(block, 1);
        }
    }
    fn note_dirty(&self, ino: u64) {
        self.sync_engine.note_dirty(ino);
    }
    fn sync_deps(&self, _owner: u64, entry: &Entry, out: &mut Vec<(u64, u64)>) {
        // A name made durable must reach a durable inode record and the
        // log it names (written, not synced, when the inode was created).
        if let Entry::DirAdd { ino, .. } = entry {
            let off = self.sb.inode_offset(*ino);
            let rec = off / BLOCK_SIZE;
            out.push((rec, (off + INODE_SIZE - 1) / BLOCK_SIZE + 1));
            let word = self
                .media
                .load_u64(off + INODE_LOG_ARRAY_OFFSET)
                .map_or(LogWord::Empty, LogWord::decode);
            match word {
                LogWord::Array(array)
                    if array >= self.sb.data_start && array < self.sb.total_blocks =>
                {
                    // Resolved by the sync: the array and the heads it then names.
                    let tag = crate::alloc::deferred::LOG_ARRAY_TAG;
                    out.push((array | tag, (array + 1) | tag));
                }
                LogWord::Direct { head, .. }
                    if head >= self.sb.data_start && head < self.sb.total_blocks =>
                {
                    out.push((head, head + 1));
                }
                _ => {}
            }
        }
    }
    fn appended(&self, owner: u64, entry: &Entry) {
        if let Entry::DirAdd { ino, .. } = entry {
            self.named.note(*ino, owner);
        }
    }
    #[cfg(feature = "planted-bugs")]
    fn planted_array_unsynced(&self) -> bool {
        self.planted
            .array_unsynced
            .load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl FsCore {
    /// Whether a mode change of an inode with an access ACL logs the mode
    /// and the rewritten list as two groups: never, but in a test build
    /// that planted `EngineBug::ModeAndAclApart`.
    #[inline]
    pub(crate) fn mode_and_acl_apart(&self) -> bool {
        #[cfg(feature = "planted-bugs")]
        {
            self.planted
                .mode_and_acl_apart
                .load(std::sync::atomic::Ordering::Relaxed)
        }
        #[cfg(not(feature = "planted-bugs"))]
        {
            false
        }
    }

    /// A core with every data block in use and no inodes (recovery fills it).
    pub fn new(media: Media, sb: Superblock, opts: MountOptions) -> FsCore {
        let sb_epoch = sb.mount_epoch;
        // `MountOptions::validate` already reported a bad topology.
        let topology =
            Topology::resolve(opts.topology).unwrap_or_else(|_| Topology::system().clone());
        let pools = topology.cpu_count();
        let file_sublogs = match opts.sublogs {
            crate::options::Sublogs::PerCpu => pools.clamp(1, MAX_SUBLOGS),
            crate::options::Sublogs::One => 1,
        };
        // Each member's blocks are its node's.
        let ranges = media
            .members()
            .iter()
            .map(|m| {
                let (s, e) = (m.start / BLOCK_SIZE, (m.start + m.len) / BLOCK_SIZE);
                (s, e, m.node as usize)
            })
            .collect();
        let placement = crate::placement::Placement::new(opts.thread_placement, &topology, ranges);
        let staging = crate::inode::Staging::new(&opts, media.device().is_some());
        let spills = Spills::new(&media, &topology);
        FsCore {
            spills,
            placement,
            blocks: Blocks::pool_only(BlockAllocator::new(sb.data_start, sb.total_blocks, pools)),
            inode_numbers: InodeAllocator::new(std::iter::empty(), pools),
            live: crate::index::radix::CasRadix::new(),
            media,
            sb,
            opts,
            table: InodeTable::builder()
                .collector(seize::Collector::new().batch_size(RETIRE_BATCH))
                .build(),
            namespace_lock: Mutex::new(()),
            // Unique across mounts: an entry a rename of an earlier mount
            // stamped never carries a txid of this one (recovery tells
            // whether a journaled rename's own entries counted by it).
            next_txid: AtomicU64::new((sb_epoch << 32) + 1),
            file_sublogs,
            topology,
            sync_engine: Default::default(),
            named: Default::default(),
            pending_appends: Mutex::new(Vec::new()),
            log_unlogged_appends: |_, _| Ok(()),
            checkpoint_gate: parking_lot::RwLock::new(()),
            commit_stop: Default::default(),
            staging,
            #[cfg(feature = "planted-bugs")]
            planted: PlantedBugs::default(),
        }
    }

    /// The live inode `ino`.
    pub fn get(&self, ino: u64) -> Result<Arc<Inode>> {
        self.get_ref(ino, &self.guard()).cloned()
    }

    /// A guard for [`FsCore::get_ref`].
    pub fn guard(&self) -> TableGuard<'_> {
        TableGuard(self.table.guard())
    }

    /// The live inode `ino`, borrowed for as long as `guard` is held: no
    /// reference count is taken, so threads walking the same directories
    /// write nothing they share.
    pub fn get_ref<'g>(&'g self, ino: u64, guard: &'g TableGuard<'_>) -> Result<&'g Arc<Inode>> {
        self.table
            .get(&ino, &guard.0)
            .ok_or_else(|| Error::NotFound(format!("inode {ino}")))
    }

    /// Add an inode to the table.
    pub fn insert(&self, inode: Arc<Inode>) {
        let (ino, dirty) = (inode.ino, inode.log.is_dirty());
        self.table.pin().insert(ino, inode);
        if dirty {
            // A full sync that ran since the inode's first append could not
            // find it here and dropped it from the dirty registry, while its
            // dirty flag (which registers it once per sync period) stayed set.
            self.sync_engine.note_dirty(ino);
        }
    }

    /// Make room for `n` more inodes in the table (mount: the table then
    /// grows once, not step by step while recovery fills it).
    pub fn reserve_inodes(&self, n: usize) {
        self.table.pin().reserve(n);
    }

    /// Every live inode (fsck comparison, statistics).
    pub fn all_inodes(&self) -> Vec<Arc<Inode>> {
        self.table.pin().values().cloned().collect()
    }

    /// Per mapped member: blocks the CPUs of its node had to take from
    /// another node's members, over every writable mount of the pool (as
    /// its spill records held them at this mount, plus this mount's; a
    /// node's spills go to its first member, the others keep theirs).
    pub fn member_spills(&self) -> Vec<u64> {
        let since = self.blocks.spills();
        let mut out = self.spills.at_mount.to_vec();
        for (n, home) in self.spills.home.iter().enumerate() {
            if let (Some(m), Some(&s)) = (home, since.get(n)) {
                out[*m] += s;
            }
        }
        out
    }

    /// Per node of the topology: blocks its CPUs had to take from another
    /// node, over every writable mount (what the spill records of the
    /// node's members held at this mount, plus this mount's).
    pub fn node_spills(&self) -> Vec<u64> {
        let mut out = self.blocks.spills();
        for (m, &n) in self.spills.node.iter().enumerate() {
            if let Some(o) = out.get_mut(n) {
                *o += self.spills.at_mount[m];
            }
        }
        out
    }

    /// Write the spill record of every member whose count changed since
    /// it was last written (a full sync and unmount call this; a crash
    /// loses the spills counted since). Nothing on a read-only mount.
    pub fn persist_spills(&self) -> Result<()> {
        if self.opts.read_only {
            return Ok(());
        }
        let now = self.member_spills();
        let mut written = self.spills.written.lock();
        for (i, (&n, w)) in now.iter().zip(written.iter_mut()).enumerate() {
            if n != *w {
                crate::media::pool::write_spills(&self.media, i, n)?;
                *w = n;
            }
        }
        Ok(())
    }

    /// Replace the allocator contents (recovery).
    pub fn set_allocators(&mut self, blocks: Blocks, inodes: InodeAllocator) {
        self.blocks = blocks;
        self.inode_numbers = inodes;
    }

    /// Refuse changes on a read-only mount.
    pub fn check_writable(&self) -> Result<()> {
        if self.opts.read_only {
            return Err(Error::ReadOnly);
        }
        // A failed sync, a pool file that shrank, or a mount shut down
        // after a bug: the media says which.
        self.media.check_alive()
    }

    /// Build the DRAM inode for a record (new or recovered).
    pub fn make_inode(
        &self,
        ino: u64,
        rec: &InodeRecord,
        attrs: Attrs,
        sublogs: Vec<(usize, SubLog)>,
    ) -> Inode {
        // Files and directories append from many threads at once: one
        // sub-log per CPU.
        let nsub = if matches!(rec.kind, FileKind::File | FileKind::Dir) {
            self.file_sublogs
        } else {
            1
        };
        // The log's first sub-log slot lives in the file or directory box.
        let (file, dir, first) = if rec.kind == FileKind::Dir {
            let shards = (self.opts.dir_shards).unwrap_or_else(crate::inode::default_shards);
            let d = Box::new(crate::inode::DirData::with_shards(shards));
            let first = std::ptr::NonNull::from(&d.first_slot);
            (None, Some(d), first)
        } else {
            let f = Box::new(FileData::new(
                &self.opts,
                self.sb.total_blocks * BLOCK_SIZE,
                self.topology.cpu_count(),
            ));
            let first = std::ptr::NonNull::from(&f.first_slot);
            (Some(f), None, first)
        };
        // SAFETY: the slot is in the inode's file or directory box, which
        // the inode owns beside its log for its whole life and never
        // replaces (moving the box leaves the heap object in place); the
        // log is reachable only through the inode, and only this log uses
        // the slot.
        let log = unsafe { InodeLog::new_in(ino, rec.log_array, nsub, sublogs, first) };
        Inode {
            ino,
            generation: rec.generation,
            kind: rec.kind,
            rdev: rec.rdev,
            attrs: Mutex::new(attrs.clone()),
            xattrs: Mutex::new(crate::inode::Xattrs::default()),
            attr_seq: AtomicU64::new(0),
            attr_entries: AtomicU64::new(0),
            size_changes: AtomicU64::new(0),
            size_changes_synced: AtomicU64::new(0),
            size_set_entry: AtomicU64::new(0),
            log: log.with_identity(rec.generation, self.sb.mount_epoch << 32),
            file,
            dir,
            setid: std::sync::atomic::AtomicBool::new(attrs.mode & 0o6000 != 0),
            open_handles: AtomicU32::new(0),
            parent: AtomicU64::new(0),
            freed: std::sync::atomic::AtomicBool::new(false),
            staging: Default::default(),
            pending_append: Mutex::new(None),
            has_pending_append: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Create a new inode: allocate its number and log array and persist its
    /// record. It becomes reachable only when a directory entry commits.
    pub fn new_inode(
        &self,
        kind: FileKind,
        mode: u32,
        uid: u32,
        gid: u32,
        rdev: u64,
    ) -> Result<Arc<Inode>> {
        self.check_writable()?;
        let ino = self.alloc_ino()?;
        let result = (|| {
            let off = self.sb.inode_offset(ino);
            let old = self.media.read_vec(off, INODE_SIZE as usize)?;
            let now = crate::time::now_ns();
            let rec = InodeRecord {
                generation: InodeRecord::raw_generation(&old).wrapping_add(1),
                kind,
                mode: mode & 0o7777,
                uid,
                gid,
                // No log page yet: the first append names its head here.
                log_array: 0,
                atime_ns: now,
                mtime_ns: now,
                ctime_ns: now,
                rdev,
            };
            self.media.store(off, &rec.encode())?;
            self.media.flush(off, INODE_SIZE as usize)?;
            self.media.fence();
            let attrs = Attrs {
                mode: rec.mode,
                uid,
                gid,
                atime_ns: now,
                mtime_ns: now,
                ctime_ns: now,
                nlink: if kind == FileKind::Dir { 2 } else { 1 },
            };
            Ok(Arc::new(self.make_inode(ino, &rec, attrs, Vec::new())))
        })();
        if result.is_err() {
            self.inode_numbers.free(ino);
        }
        result
    }

    /// Return an unreachable inode's space (data pages, log pages, log
    /// array, inode number). Call only after winning `freed` (see
    /// [`FsCore::release_if_unused`]).
    fn free_inode_space(&self, inode: &Inode) {
        if self.deferring() {
            // The entry that removed the last name may not be durable yet:
            // nothing is reused before the next sync.
            let mut data = inode.file.as_ref().map_or_else(Vec::new, |f| {
                f.index.mapped().into_iter().map(|(_, m)| m.block).collect()
            });
            data.extend(inode.staging.take_superseded());
            let log = inode.log.owned_blocks();
            self.table.pin().remove(&inode.ino);
            self.sync_engine
                .defer(crate::alloc::deferred::Pending::Inode {
                    ino: inode.ino,
                    data,
                    log,
                });
            return;
        }
        if let Some(f) = &inode.file {
            for (_, m) in f.index.mapped() {
                self.blocks.free(m.block, 1);
            }
        }
        for b in inode.log.owned_blocks() {
            if let Some(c) = self.live_counter(b) {
                c.store(0, Ordering::Relaxed);
            }
            self.blocks.free(b, 1);
        }
        self.table.pin().remove(&inode.ino);
        self.inode_numbers.free(inode.ino);
    }

    /// Free the inode if no name and no user refers to it. The decision is
    /// taken under the inode's attribute mutex, like [`Inode::pin`], so an
    /// inode is never freed under a new user and never freed twice.
    pub fn release_if_unused(&self, inode: &Inode) {
        let free = {
            let a = inode.attrs.lock();
            a.nlink == 0
                && inode.open_handles.load(Ordering::Acquire) == 0
                && !inode.freed.swap(true, Ordering::AcqRel)
        };
        if free {
            self.free_inode_space(inode);
        }
    }

    /// Drop a user taken with [`Inode::pin`], freeing the inode if it was
    /// the last reference.
    pub fn unpin(&self, inode: &Inode) {
        let free = {
            let a = inode.attrs.lock();
            let prev = inode.open_handles.fetch_sub(1, Ordering::AcqRel);
            a.nlink == 0 && prev == 1 && !inode.freed.swap(true, Ordering::AcqRel)
        };
        if free {
            self.free_inode_space(inode);
        }
    }

    /// Persist-and-sync point for `fsync`: in file mode, a sync that writes
    /// durable marks (`sync_engine.rs`). Never waits for the checkpoint
    /// gate: an allocator that ran dry calls it inside a write.
    pub fn sync(&self) -> Result<()> {
        self.full_sync()
    }

    /// A checkpoint: a full sync (`Fs::sync`, the commit thread). With
    /// `checkpoint=blocking` it first waits for the writes in flight and
    /// holds every new one out until it is done.
    pub fn checkpoint(&self) -> Result<()> {
        let _gate = (self.opts.checkpoint == crate::options::Checkpoint::Blocking)
            .then(|| self.checkpoint_gate.write());
        self.full_sync()
    }

    /// Held by a write, truncate or preallocation for its whole run: with
    /// `checkpoint=blocking`, a share of the checkpoint gate; otherwise
    /// nothing (no shared line is touched).
    pub fn writer_gate(&self) -> Option<parking_lot::RwLockReadGuard<'_, ()>> {
        (self.opts.checkpoint == crate::options::Checkpoint::Blocking)
            .then(|| self.checkpoint_gate.read())
    }
}

impl crate::placement::calibrate::ScratchBlocks for Blocks {
    fn take(&self, node: usize, want: u64) -> Result<(u64, u64)> {
        self.alloc_on(node, want, Purpose::Data)
    }
    fn give_back(&self, first: u64, count: u64) {
        self.free(first, count);
    }
}

impl Drop for FsCore {
    fn drop(&mut self) {
        if self.deferring() && !self.media.has_failed() {
            let _ = self.full_sync();
        } else if !self.media.has_failed() {
            let _ = self.persist_spills();
        }
        self.commit_stop.stop();
    }
}

/// A flag a sleeping thread waits on with a timeout, woken when it is set.
#[derive(Default)]
pub(crate) struct StopSignal {
    stopped: std::sync::Mutex<bool>,
    wake: std::sync::Condvar,
}

impl StopSignal {
    /// Set the flag and wake the waiter.
    pub(crate) fn stop(&self) {
        *self.stopped.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.wake.notify_all();
    }

    /// Sleep up to `d`; `true` once the flag is set.
    pub(crate) fn sleep(&self, d: std::time::Duration) -> bool {
        let g = self.stopped.lock().unwrap_or_else(|e| e.into_inner());
        // Waits out `d` whatever spurious wake-ups come.
        let (g, _) = self
            .wake
            .wait_timeout_while(g, d, |stopped| !*stopped)
            .unwrap_or_else(|e| e.into_inner());
        *g
    }
}

#[cfg(test)]
mod tests {
    use super::StopSignal;
    use std::time::{Duration, Instant};

    /// A sleeper sleeps its time out unless stopped, and a stop wakes it
    /// at once (and every later sleep returns at once).
    #[test]
    fn a_stop_wakes_the_sleeper() {
        let s = std::sync::Arc::new(StopSignal::default());
        let t0 = Instant::now();
        assert!(!s.sleep(Duration::from_millis(30)));
        assert!(t0.elapsed() >= Duration::from_millis(30));
        let sleeper = {
            let s = s.clone();
            std::thread::spawn(move || {
                let t = Instant::now();
                (s.sleep(Duration::from_secs(600)), t.elapsed())
            })
        };
        std::thread::sleep(Duration::from_millis(20));
        s.stop();
        let (stopped, slept) = sleeper.join().unwrap();
        assert!(stopped);
        assert!(slept < Duration::from_secs(60), "slept {slept:?}");
        assert!(s.sleep(Duration::from_secs(600)));
    }
}
