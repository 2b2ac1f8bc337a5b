//! Staging small synchronous writes in the pool.
//!
//! On a tiered pool, file data goes to the data device, and an `fsync` of
//! a file that wrote there costs a device cache flush (about 100 us on a
//! virtual disk, milliseconds on a SATA SSD) however few bytes it wrote.
//! When the pool itself is persistent memory (`pm`, or `dram` on
//! `/dev/shm` standing in for it), a small write that an `fsync` is about
//! to follow is better placed in the pool: its `fsync` then persists a few
//! cache lines of data and log and never touches the device, which is the
//! node-logging paper's point (metadata on NVM so that `fsync` persists
//! bytes, not device blocks) carried over to the data of small
//! synchronous writes. The data moves to the device later, in the
//! background, when the pool needs the space.
//!
//! **Which writes.** A write of at most [`MountOptions::stage_max`] bytes
//! to a file whose last `fsync` (or `fdatasync`) was small, up to four
//! such writes' worth of bytes between two syncs of the file. A file
//! synced in small steps (a log, a database's commits, FxMark's DWSL) is
//! likely synced again soon; bulk writes (checkpoints, copies) are large,
//! or many between two syncs, or never synced, so they go to the device
//! as before: a write larger than `stage_max` is never staged, a file
//! whose sync made more than the budget durable (its data and log pages,
//! two pages of slack) stops staging until a small sync, and a file that
//! is written much and synced rarely stages at most the budget after each
//! sync. The first writes of a file after its load go to the device. A
//! staged write is copy-on-write into pool blocks,
//! never in place: persistent memory does not write 4 KiB atomically,
//! so an overwrite in place could tear (a device or a page-cache file
//! writes a page whole).
//!
//! **How much.** Staged data never takes a pool allocator below a quarter
//! of its blocks (the rest stays for logs and inode records); past that a
//! write goes to the device. Each block a staged write supersedes is
//! freed as soon as the file's next sync (or a full sync) made the
//! superseding entry durable ([`FileStaging::superseded`]), not only at
//! the next full sync: a loop of `write` + `fsync` reuses its few pool
//! blocks instead of filling the pool between two commits.
//!
//! **Destaging.** When the pool's free blocks fall below half of its data
//! blocks, the commit thread rewrites every staged page of the files that
//! staged any onto the device (`file::destage`: under the page's
//! range lock, the same bytes written as a device write, the file's mtime
//! unchanged), just before its full sync, which makes the device copies
//! and their entries durable and then frees the pool blocks. Staged data
//! left in the pool is as durable as the rest of the pool: nothing needs
//! destaging for an unmount, and a remount finds it where it was.
//!
//! [`MountOptions::stage_max`]: crate::MountOptions::stage_max

use super::Inode;
use crate::media::Durability;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// A mount's staging state: whether small synchronous writes are staged,
/// and which files have staged pages to destage.
pub struct Staging {
    /// Largest write staged, in bytes; 0 when staging is off (no data
    /// device, a `file`-mode pool, a read-only mount, `stage_max=0`).
    max_bytes: u64,
    /// Files that staged pages since the last destaging pass.
    files: Mutex<Vec<u64>>,
    /// Pages staged and pages destaged since the mount, per thread
    /// ([`StagingStats`]).
    counts: crate::cpu::Counters<2>,
    /// Planted bug ([`crate::EngineBug::StagedBlockFreedEarly`]).
    #[cfg(feature = "planted-bugs")]
    free_superseded_at_once: AtomicBool,
}

/// What staging did since the mount (`Stats::staging`): how many pages
/// small synchronous writes placed in pool blocks, and how many staged
/// pages destaging moved onto the data device. Both 0 where staging is
/// off.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StagingStats {
    /// Pages written into pool blocks by staged writes (a page written
    /// twice counts twice).
    pub pages_staged: u64,
    /// Staged pages rewritten onto the data device by destaging.
    pub pages_destaged: u64,
}

impl Staging {
    /// Staging for a mount: on only for a tiered pool whose pool is
    /// persistent memory (`pm`, or `dram` standing in for it), writable.
    pub(crate) fn new(opts: &crate::MountOptions, tiered: bool) -> Staging {
        let on = tiered && opts.durability != Durability::File && !opts.read_only;
        Staging {
            max_bytes: if on { opts.stage_max } else { 0 },
            files: Mutex::new(Vec::new()),
            counts: crate::cpu::Counters::new(),
            #[cfg(feature = "planted-bugs")]
            free_superseded_at_once: AtomicBool::new(false),
        }
    }

    /// Whether a superseded staged block is freed when the write that
    /// superseded it returns instead of after the file's next sync: never,
    /// but in a test build that planted that bug.
    #[inline]
    pub(crate) fn frees_superseded_at_once(&self) -> bool {
        #[cfg(feature = "planted-bugs")]
        {
            self.free_superseded_at_once.load(Ordering::Relaxed)
        }
        #[cfg(not(feature = "planted-bugs"))]
        {
            false
        }
    }

    /// Plant [`crate::EngineBug::StagedBlockFreedEarly`] (test builds).
    #[cfg(feature = "planted-bugs")]
    pub(crate) fn plant_free_superseded_at_once(&self) {
        self.free_superseded_at_once.store(true, Ordering::Relaxed);
    }

    /// What staging did since the mount.
    pub fn stats(&self) -> StagingStats {
        let [pages_staged, pages_destaged] = self.counts.sum();
        StagingStats {
            pages_staged,
            pages_destaged,
        }
    }

    /// Count `pages` pages written into pool blocks by a staged write.
    pub(crate) fn count_staged(&self, pages: u64) {
        self.counts.add([pages, 0]);
    }

    /// Count `pages` staged pages moved onto the data device.
    pub(crate) fn count_destaged(&self, pages: u64) {
        self.counts.add([0, pages]);
    }

    /// Whether this mount stages writes at all.
    pub fn enabled(&self) -> bool {
        self.max_bytes > 0
    }

    /// Bytes staged per file between two of its syncs, at most.
    fn budget(&self) -> u64 {
        self.max_bytes * SYNC_BUDGET_WRITES
    }

    /// Whether a write of `len` bytes to `inode` should be staged; if so,
    /// it is counted against the file's budget until its next sync.
    pub(crate) fn wants(&self, inode: &Inode, len: usize) -> bool {
        let len = len as u64;
        if len > self.max_bytes {
            return false;
        }
        // A file that never synced has no staging state, and no small syncs.
        let Some(s) = inode.staging.get() else {
            return false;
        };
        if !s.small_syncs.load(Ordering::Relaxed)
            || s.staged_since_sync.load(Ordering::Relaxed) + len > self.budget()
        {
            return false;
        }
        s.staged_since_sync.fetch_add(len, Ordering::Relaxed);
        true
    }

    /// Note an `fsync`/`fdatasync` of `inode` whose barrier covered
    /// `blocks` blocks (its device data and log pages): the file stages
    /// its small writes from now on if this sync was small, counting the
    /// bytes staged since its last sync too (they were made durable when
    /// written, so no barrier covers them), and its budget starts over.
    pub(crate) fn note_sync(&self, inode: &Inode, blocks: u64) {
        if !self.enabled() {
            return;
        }
        let s = inode.staging.get_or_init();
        let made_durable =
            blocks * crate::layout::BLOCK_SIZE + s.staged_since_sync.load(Ordering::Relaxed);
        if made_durable > 0 {
            // Two blocks of slack: the log page and a linked new one.
            let small = made_durable <= self.budget() + 2 * crate::layout::BLOCK_SIZE;
            if s.small_syncs.load(Ordering::Relaxed) != small {
                s.small_syncs.store(small, Ordering::Relaxed);
            }
        }
        if s.staged_since_sync.load(Ordering::Relaxed) != 0 {
            s.staged_since_sync.store(0, Ordering::Relaxed);
        }
    }

    /// Record that `inode` has staged pages (once until the next
    /// destaging pass takes it).
    pub(crate) fn note_staged(&self, inode: &Inode) {
        let s = inode.staging.get_or_init();
        if !s.listed.load(Ordering::Relaxed) && !s.listed.swap(true, Ordering::AcqRel) {
            self.files.lock().push(inode.ino);
        }
    }

    /// Take the list of files with staged pages (a destaging pass); each
    /// is unlisted, so that a write staging after this lists it again.
    pub(crate) fn take_listed(&self) -> Vec<u64> {
        std::mem::take(&mut *self.files.lock())
    }

    /// Unlist `inode` (its pass is about to run).
    pub(crate) fn unlist(&self, inode: &Inode) {
        if let Some(s) = inode.staging.get() {
            s.listed.store(false, Ordering::Release);
        }
    }
}

/// A bug a test build plants in a mount (`diag::plant_bug`, the
/// `planted-bugs` feature) to show that the crash explorer finds it.
#[cfg(feature = "planted-bugs")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EngineBug {
    /// A pool block that a staged write superseded is freed (and may be
    /// reused) as soon as that write returns, instead of after the file's
    /// next sync made the superseding entry durable: a crash before that
    /// sync leaves the old entry counting with its block reused.
    StagedBlockFreedEarly,
    /// `file` durability mode: when a log gets its log array (a file or
    /// directory first appended to from a second CPU, so a second sub-log
    /// starts), `InodeLog::make_array` skips the `sync_range` over the
    /// fresh array block that must complete before the inode record's log
    /// word is switched to name it. Through the page cache the record's
    /// page may then reach the disk before the array's: a crash leaves the
    /// record naming a block that is zeros (or an older log's array), and
    /// the inode loses its log, or recovery follows stale heads.
    ///
    /// Found by the explorer's page models (`pagecache`, `blockdev`: they
    /// persist any subset of the pages dirtied since their last sync)
    /// with a workload that writes one file from two CPUs (`Op::OnCpu`),
    /// at a crash point after that write and before the next sync of the
    /// array. Invisible to the `pm` model: other modes never take this
    /// barrier (their flushes and fences order the array first).
    ArrayLinkedBeforeDurable,
    /// A chmod (or any mode change) of an inode with a POSIX access ACL
    /// logs the new mode and the ACL rewritten to agree with it as two
    /// atomic groups, the attribute entry first, instead of one: a crash,
    /// or a sync, between the two leaves the new mode with the old list,
    /// which the kernel enforces (a named user keeps access that `ls -l`
    /// shows closed).
    ///
    /// Found by the explorer's `pm` model (a crash point at every fence,
    /// one of them between the two appends) with a workload that sets an
    /// access ACL and then changes the mode so that its mask changes (the
    /// attribute workloads, `ACL_ACCESS`): the image shows a state no
    /// prefix of the operations left. The page models see it only if a
    /// sync lands between the two appends.
    ModeAndAclApart,
}

/// Writes of [`MountOptions::stage_max`](crate::MountOptions::stage_max)
/// bytes a file may stage between two of its syncs.
const SYNC_BUDGET_WRITES: u64 = 4;

/// Per-file staging state ([`Inode::staging`](super::Inode::staging)),
/// made on the file's first use of it: a file of a mount that never
/// stages (every pool but a tiered `pm`/`dram` one) holds 16 bytes for it
/// instead of 48, none of them on a line a read or a write touches.
#[derive(Default)]
pub struct LazyStaging(std::sync::OnceLock<Box<FileStaging>>);

impl LazyStaging {
    /// The state, if the file has used it.
    pub(crate) fn get(&self) -> Option<&FileStaging> {
        self.0.get().map(|b| &**b)
    }

    /// The state, made now if the file had none.
    pub(crate) fn get_or_init(&self) -> &FileStaging {
        self.0.get_or_init(Box::default)
    }

    /// Queue a pool block a committed write of this file superseded.
    pub(crate) fn supersede(&self, block: u64) {
        self.get_or_init().supersede(block);
    }

    /// Take the queued blocks (before a sync's snapshot of the log).
    pub(crate) fn take_superseded(&self) -> Vec<u64> {
        self.get()
            .map_or_else(Vec::new, FileStaging::take_superseded)
    }
}

/// Per-file staging state ([`LazyStaging`]).
#[derive(Default)]
pub struct FileStaging {
    /// The file's last sync that had anything to persist was small (at
    /// most the staging budget): its small writes are staged.
    pub(crate) small_syncs: AtomicBool,
    /// Bytes staged since the file's last sync.
    pub(crate) staged_since_sync: AtomicU64,
    /// The file is on the mount's list of files to destage.
    pub(crate) listed: AtomicBool,
    /// Pool blocks of this file's pages that later writes of this file
    /// superseded: free once this file's log up to those writes is
    /// durable (taken before a sync's snapshot, freed after its marks).
    superseded: Mutex<Vec<u64>>,
}

impl FileStaging {
    /// Queue a pool block a committed write of this file superseded.
    pub(crate) fn supersede(&self, block: u64) {
        self.superseded.lock().push(block);
    }

    /// Take the queued blocks (before a sync's snapshot of the log).
    pub(crate) fn take_superseded(&self) -> Vec<u64> {
        std::mem::take(&mut *self.superseded.lock())
    }
}
