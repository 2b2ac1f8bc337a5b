//! Per-inode logs split into per-CPU sub-logs (from NUMA-aware NOVA), with
//! commit-marked entries (from SRL-NOVA (segment range lock)) and fast
//! garbage collection of dead log pages.
//!
//! An inode's log array (one block) holds up to [`MAX_SUBLOGS`] heads; each
//! head starts a chain of log pages linked through their footers. A thread
//! appends to the sub-log of the CPU it runs on, under that sub-log's own
//! mutex (uncontended unless threads share a CPU), so appends from different
//! CPUs never share a tail.
//!
//! Append protocol (crash consistency):
//! 1. new log pages are zeroed, footed and persisted *before* they are linked;
//! 2. every entry's bytes are stored, flushed and fenced (the data pages a
//!    write entry points to were non-temporally copied before, and the same
//!    fence orders them);
//! 3. the commit word of the group's last entry is stored, flushed, fenced.
//!
//! Entries of a group before the last carry their commit word from the start
//! and the "group continues" flag; recovery applies a group only if its last
//! entry is committed.

mod compact;
pub mod durable;
mod page;
pub mod scan;

pub use page::PageMeta;

use crate::error::Result;
use crate::layout::*;
use crate::media::Media;
use crate::sync::{AtomicU32, AtomicU64, Mutex, MutexGuard, Ordering};
use once_cell::race::OnceBox;
use smallvec::SmallVec;

/// Where an entry lives: `log page block * 64 + slot`.
pub type EntryLoc = u64;

/// The locations of one appended group.
pub type EntryLocs = SmallVec<[EntryLoc; 4]>;

/// Pack a location.
pub fn entry_loc(page: u64, slot: u64) -> EntryLoc {
    page * SLOTS_PER_PAGE + slot
}
/// The log page of a location.
pub fn loc_page(loc: EntryLoc) -> u64 {
    loc / SLOTS_PER_PAGE
}
/// The slot of a location.
pub fn loc_slot(loc: EntryLoc) -> u64 {
    loc % SLOTS_PER_PAGE
}

/// Commit word that marks an abandoned (incomplete-group) entry: recovery
/// skips it by its slot count.
pub const VOID_MAGIC: u32 = 0x0B50_1E7E;

/// Take a sub-log's mutex. A panic while holding it cannot leave the
/// media inconsistent (entries commit atomically), so poisoning is ignored.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Pages of one sub-log whose live count dropped to zero, waiting to be
/// unlinked by that sub-log's next append. Appends visit these candidates
/// only, never the whole chain, so an append costs the same however long
/// the log grows.
#[derive(Default)]
struct DeadList {
    /// Candidates added since the owner last looked.
    fresh: AtomicU64,
    /// The candidates (a page may appear twice; stale ones are dropped).
    pages: Mutex<Vec<u64>>,
}

/// Services a log needs from the mounted file system.
pub trait LogSpace {
    /// The mapping.
    fn media(&self) -> &Media;
    /// Allocate one block for a log page or log array.
    fn alloc_meta_block(&self) -> Result<u64>;
    /// Free blocks.
    fn free_blocks(&self, first: u64, count: u64);
    /// Byte offset of inode `ino`'s log word (in its inode record).
    fn log_word_at(&self, ino: u64) -> u64;
    /// Live-reference counter of a log page.
    fn live_counter(&self, page: u64) -> Option<&AtomicU32>;
    /// Whether this mount keeps durable marks (`file` mode): freed log
    /// blocks then wait for the next full sync, and dead pages are unlinked
    /// only once their successor's footer is durable.
    fn keeps_marks(&self) -> bool {
        false
    }
    /// Free a block that durable state may still reach (an unlinked or
    /// replaced log page or array): at once, or after the next full sync
    /// when [`LogSpace::keeps_marks`].
    fn retire_block(&self, block: u64) {
        self.free_blocks(block, 1)
    }
    /// The log of inode `ino` has state that is not durable yet (called
    /// once per sync period per inode).
    fn note_dirty(&self, ino: u64) {
        let _ = ino;
    }
    /// Blocks besides the entry's own log page and data that a sync of the
    /// log of `owner` must make durable before it marks `entry` (a
    /// directory entry's target inode record and log array). Called only
    /// when [`LogSpace::keeps_marks`], before the sub-log mutex is taken.
    fn sync_deps(&self, owner: u64, entry: &Entry, out: &mut Vec<(u64, u64)>) {
        let _ = (owner, entry, out);
    }
    /// `entry` of `owner`'s log was appended (called after the sub-log
    /// mutex is released; see [`LogSpace::sync_deps`]).
    fn appended(&self, owner: u64, entry: &Entry) {
        let _ = (owner, entry);
    }
    /// Whether a test build planted
    /// [`crate::EngineBug::ArrayLinkedBeforeDurable`] in this mount: a
    /// new log array is then linked without the sync that makes it
    /// durable first (`file` mode).
    #[cfg(feature = "planted-bugs")]
    fn planted_array_unsynced(&self) -> bool {
        false
    }
}

/// Whether [`InodeLog::make_array`] skips the sync of a new array before
/// linking it: never, but in a test build that planted
/// `EngineBug::ArrayLinkedBeforeDurable`.
#[inline]
fn array_sync_skipped(space: &dyn LogSpace) -> bool {
    #[cfg(feature = "planted-bugs")]
    {
        space.planted_array_unsynced()
    }
    #[cfg(not(feature = "planted-bugs"))]
    {
        let _ = space;
        false
    }
}

/// Record that half-open block range `[start, end)` must be durable before
/// the next mark of this sub-log (merging with the newest ranges).
fn note_unsynced(v: &mut Vec<(u64, u64)>, start: u64, end: u64) {
    for r in v.iter_mut().rev().take(2) {
        if start <= r.1 && end >= r.0 {
            r.0 = r.0.min(start);
            r.1 = r.1.max(end);
            return;
        }
    }
    v.push((start, end));
}

/// One sub-log's DRAM state (guarded by its mutex).
#[derive(Debug, Default)]
pub struct SubLog {
    /// Log pages of the chain, head first (most sub-logs have one page,
    /// held without an allocation of its own).
    pub pages: Vec<u64>,
    /// Next free entry slot in the last page.
    pub next_slot: u64,
    /// Modification time of the newest write appended here (keeps mtime off
    /// a shared cache line; `stat` takes the maximum over sub-logs).
    pub last_mtime_ns: u64,
    /// Per page of `pages`: sequence, final slot count, durable mark
    /// (maintained in every mode, used in `file` mode).
    pub meta: Vec<PageMeta>,
    /// Dead pages that could not be unlinked yet (the tail, or in `file`
    /// mode a page whose successor's footer is not durable yet).
    dead_held: u32,
    /// Appends to let pass before looking at held pages again (amortises
    /// the retries over the appends).
    dead_skip: u32,
    /// Leading pages of `pages` that need no mark any more: sealed, their
    /// final mark and checked count stored and their footer durable. Such
    /// a page never needs one again, so a sync's snapshot starts after
    /// them instead of walking a chain that grows with every append until
    /// a full sync lets the collector unlink dead pages.
    pub(crate) settled: u32,
    /// Recovered chain not yet searched for pages that were dead at mount
    /// (searched once, at the first release of a page of this sub-log).
    scan_all: bool,
    /// `file` mode: half-open block ranges a sync of this inode must make
    /// durable before it writes marks covering what was appended here since
    /// the last sync that snapshotted the sub-log (entries' log pages, pages
    /// whose footer links changed, the log array, data blocks, directory
    /// targets' inode records). Taken by that sync.
    pub unsynced: Vec<(u64, u64)>,
    /// `file` mode: `unsynced` holds a range that must be durable before
    /// the marks are written (a log array naming a new head, a directory
    /// entry's target). Without it every range is the data of a
    /// checksummed write entry or a new log page, which recovery tells
    /// apart when they are missing, so a sync may write them and the marks
    /// with one barrier (`durable.rs`). Taken with `unsynced`.
    pub ordered_deps: bool,
}

impl SubLog {
    /// Bookkeeping of a sub-log recovered at mount (chain fields empty).
    pub fn recovered() -> Self {
        SubLog {
            scan_all: true,
            ..SubLog::default()
        }
    }
}

/// The log of one inode.
pub struct InodeLog {
    ino: u64,
    /// Generation of the owning inode (written in page footers).
    generation: u32,
    /// Next page sequence (touched only when a page is linked).
    next_seq: AtomicU64,
    /// Set when the log has state not yet made durable by a sync.
    dirty: std::sync::atomic::AtomicBool,
    /// Set when a write in place changed the file's mtime without an
    /// entry: the next full sync or `fsync` logs the mtime.
    mtime_unlogged: std::sync::atomic::AtomicBool,
    /// Number of compactions (deferred releases of older entries are void).
    incarnation: AtomicU64,
    /// The inode record's log word as last stored ([`LogWord`]): 0, one
    /// sub-log's head page, or a log array block. Changed under the mutex of
    /// the first slot's sub-log while the word is not an array (the first
    /// slot's sub-log is the only one then), and by compaction.
    word: AtomicU64,
    /// Number of sub-logs (one per CPU of the topology).
    nsublogs: u16,
    /// The first sub-log's slot, claimed by the first append (or by
    /// recovery), whatever its index: most inodes are written from one CPU
    /// only and never need the groups. It lives in the inode's file or
    /// directory state, which is 128-byte aligned anyway, so that it costs
    /// no allocation of its own.
    first: FirstSlot,
    /// The other sub-logs, in groups of [`SLOT_GROUP`]: the group table, a
    /// group and a slot are created by the first append from a CPU of it
    /// (or by recovery).
    groups: OnceBox<Box<[OnceBox<SlotGroup>]>>,
    /// Serialises syncs of this inode; holds the log incarnation the last
    /// sync made durable (a compaction since then switched the inode
    /// record to a new log array).
    pub(crate) sync_state: parking_lot::Mutex<u64>,
}

/// One sub-log's state, alone on its 128 bytes (the unit the CPU's
/// adjacent-line prefetch shares, as `CachePadded` uses on x86-64), and its
/// dead-page candidates, which other threads write, behind a pointer.
#[repr(align(128))]
pub(crate) struct SubLogSlot {
    log: Mutex<SubLog>,
    /// The sub-log's index ([`UNCLAIMED`] for a first slot no sub-log has
    /// claimed yet).
    index: AtomicU32,
    /// Appenders waiting for `log` ([`SubLogSlot::lock_to_append`]): a
    /// sync that holds the mutex in runs lets them in between runs.
    waiting: AtomicU32,
    /// Log pages whose live count dropped to zero and await unlinking
    /// (made by the first such page: most logs never have one).
    dead: OnceBox<crossbeam_utils::CachePadded<DeadList>>,
}

/// Checks of [`SubLogSlot::let_waiters_in`] that spin before it yields the
/// CPU between checks.
const HANDOFF_SPINS: u32 = 256;

/// Checks of [`SubLogSlot::let_waiters_in`] in all: a waiter that was
/// parked in the kernel needs a wake-up (microseconds), and a bound keeps
/// a steady stream of appenders from holding a sync up for long.
const HANDOFF_CHECKS: u32 = HANDOFF_SPINS + 64;

/// CPUs per group of sub-log slots.
const SLOT_GROUP: usize = 8;

/// A group of sub-log slots.
type SlotGroup = [OnceBox<SubLogSlot>; SLOT_GROUP];

/// Where a log's first sub-log slot lives.
enum FirstSlot {
    /// In a box of the log's own (a log made without an inode: tests).
    #[cfg(test)]
    Own(Box<SubLogSlot>),
    /// In storage the inode owns beside the log ([`InodeLog::new_in`]).
    In(std::ptr::NonNull<SubLogSlot>),
}

// SAFETY: `FirstSlot` is a shared reference to a `SubLogSlot` (owned or
// borrowed for the log's life, see `InodeLog::new_in`), and `SubLogSlot`
// is `Send` and `Sync` (mutexes and atomics), as `&SubLogSlot` is.
unsafe impl Send for FirstSlot {}
// SAFETY: as for `Send`: only `&SubLogSlot` is ever handed out.
unsafe impl Sync for FirstSlot {}

impl FirstSlot {
    fn get(&self) -> &SubLogSlot {
        match self {
            #[cfg(test)]
            FirstSlot::Own(b) => b,
            // SAFETY: `InodeLog::new_in`'s contract: the slot outlives the
            // log and does not move.
            FirstSlot::In(p) => unsafe { p.as_ref() },
        }
    }
}

impl std::fmt::Debug for SubLogSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubLogSlot")
            .field("index", &self.index.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// The index of a first slot not claimed by a sub-log yet.
const UNCLAIMED: u32 = u32::MAX;

impl Default for SubLogSlot {
    fn default() -> Self {
        SubLogSlot::empty()
    }
}

impl SubLogSlot {
    /// A first slot no sub-log has claimed.
    pub(crate) fn empty() -> Self {
        SubLogSlot {
            log: Mutex::new(SubLog::default()),
            index: AtomicU32::new(UNCLAIMED),
            waiting: AtomicU32::new(0),
            dead: OnceBox::new(),
        }
    }

    fn with(index: usize, sub: SubLog) -> Box<Self> {
        Box::new(SubLogSlot {
            log: Mutex::new(sub),
            index: AtomicU32::new(index as u32),
            waiting: AtomicU32::new(0),
            dead: OnceBox::new(),
        })
    }

    /// The sub-log's index (`UNCLAIMED as usize` if none claimed it).
    fn index(&self) -> usize {
        self.index.load(Ordering::Acquire) as usize
    }

    /// Take the sub-log's mutex to append. An appender that finds it held
    /// counts itself in `waiting` until it has it.
    fn lock_to_append(&self) -> MutexGuard<'_, SubLog> {
        match self.log.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {
                self.waiting.fetch_add(1, Ordering::Relaxed);
                let g = lock(&self.log);
                self.waiting.fetch_sub(1, Ordering::Relaxed);
                g
            }
        }
    }

    /// Called by a sync between two runs under this sub-log's mutex, with
    /// the mutex released: wait (boundedly) until the appenders that were
    /// waiting for it have had it. Without this the sync takes the mutex
    /// straight back: a waiter woken by the release finds it held again
    /// and sleeps once more, and waits out every run of the sync.
    fn let_waiters_in(&self) {
        for i in 0..HANDOFF_CHECKS {
            if self.waiting.load(Ordering::Relaxed) == 0 {
                return;
            }
            if i < HANDOFF_SPINS {
                crate::sync::wait::spin_hint();
            } else {
                crate::sync::wait::yield_cpu();
            }
        }
    }

    /// The dead-page list, made if needed.
    fn dead(&self) -> &DeadList {
        self.dead.get_or_init(Box::default)
    }
}

impl InodeLog {
    /// Sub-log `idx`'s slot, created empty if no CPU used it yet (the
    /// first slot if no sub-log claimed it yet).
    fn slot(&self, idx: usize) -> &SubLogSlot {
        // The groups first: they are read-mostly, while the first slot's
        // line is written by its sub-log's appends (another CPU's).
        if let Some(s) = self.group_get(idx) {
            return s;
        }
        let first = self.first.get();
        let want = idx as u32;
        match first.index.load(Ordering::Acquire) {
            i if i == want => return first,
            UNCLAIMED => match first.index.compare_exchange(
                UNCLAIMED,
                want,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return first,
                Err(i) if i == want => return first,
                Err(_) => {}
            },
            _ => {}
        }
        self.group_slot(idx)
    }

    /// Sub-log `idx`'s slot in the groups, if it was made there.
    fn group_get(&self, idx: usize) -> Option<&SubLogSlot> {
        self.groups.get()?.get(idx / SLOT_GROUP)?.get()?[idx % SLOT_GROUP].get()
    }

    /// Sub-log `idx`'s slot in the groups (not the first slot's index).
    fn group_slot(&self, idx: usize) -> &SubLogSlot {
        let groups = self
            .groups
            .get_or_init(|| Box::new(Self::empty_groups(self.nsublogs.into())));
        groups[idx / SLOT_GROUP].get_or_init(Box::default)[idx % SLOT_GROUP]
            .get_or_init(|| SubLogSlot::with(idx, SubLog::default()))
    }

    fn empty_groups(n: usize) -> Box<[OnceBox<SlotGroup>]> {
        (0..n.div_ceil(SLOT_GROUP))
            .map(|_| OnceBox::new())
            .collect()
    }

    /// The first slot, claimed for sub-log 0 if no sub-log has it yet.
    fn first_slot(&self) -> &SubLogSlot {
        let first = self.first.get();
        let _ = first
            .index
            .compare_exchange(UNCLAIMED, 0, Ordering::AcqRel, Ordering::Acquire);
        first
    }

    /// Sub-log `idx`'s state (created empty if needed).
    fn sub(&self, idx: usize) -> &Mutex<SubLog> {
        &self.slot(idx).log
    }

    /// The sub-logs that exist, with their indexes: the first slot, then
    /// the others in index order (the order every walk that locks several
    /// takes them in).
    fn existing(&self) -> impl Iterator<Item = (usize, &SubLogSlot)> {
        let first = Some(self.first.get())
            .filter(|s| s.index() != UNCLAIMED as usize)
            .map(|s| (s.index(), s));
        let rest = self
            .groups
            .get()
            .into_iter()
            .flat_map(|groups| groups.iter().enumerate())
            .filter_map(|(g, group)| group.get().map(|group| (g, group)))
            .flat_map(|(g, group)| {
                group
                    .iter()
                    .enumerate()
                    .filter_map(move |(i, s)| s.get().map(|s| (g * SLOT_GROUP + i, s)))
            });
        first.into_iter().chain(rest)
    }

    /// A log whose sub-logs are as recovered (or empty).
    #[cfg(test)]
    pub fn new(ino: u64, word: u64, nsublogs: usize, recovered: Vec<(usize, SubLog)>) -> Self {
        Self::with_first(
            ino,
            word,
            nsublogs,
            recovered,
            FirstSlot::Own(Box::default()),
        )
    }

    /// [`InodeLog::new`] whose first slot is `first`, storage the caller
    /// owns (in the inode's file or directory state).
    ///
    /// # Safety
    ///
    /// `first` must point to a slot that stays where it is and lives as long
    /// as the log (the inode owns both and drops neither before the other
    /// is unreachable), that nothing else changes, and that no other log
    /// uses.
    pub(crate) unsafe fn new_in(
        ino: u64,
        word: u64,
        nsublogs: usize,
        recovered: Vec<(usize, SubLog)>,
        first: std::ptr::NonNull<SubLogSlot>,
    ) -> Self {
        Self::with_first(ino, word, nsublogs, recovered, FirstSlot::In(first))
    }

    fn with_first(
        ino: u64,
        word: u64,
        nsublogs: usize,
        recovered: Vec<(usize, SubLog)>,
        first: FirstSlot,
    ) -> Self {
        let n = nsublogs
            .clamp(1, MAX_SUBLOGS)
            .max(recovered.iter().map(|(i, _)| i + 1).max().unwrap_or(0));
        let groups = OnceBox::new();
        for (i, s) in recovered {
            let slot = first.get();
            if slot.index() == UNCLAIMED as usize {
                *lock(&slot.log) = s;
                slot.index.store(i as u32, Ordering::Release);
            } else {
                let g: &[OnceBox<SlotGroup>] =
                    groups.get_or_init(|| Box::new(Self::empty_groups(n)));
                let group = g[i / SLOT_GROUP].get_or_init(Box::default);
                let _ = group[i % SLOT_GROUP].set(SubLogSlot::with(i, s));
            }
        }
        InodeLog {
            ino,
            generation: 0,
            next_seq: AtomicU64::new(1),
            dirty: std::sync::atomic::AtomicBool::new(false),
            mtime_unlogged: std::sync::atomic::AtomicBool::new(false),
            incarnation: AtomicU64::new(0),
            word: AtomicU64::new(word),
            // At most MAX_SUBLOGS.
            nsublogs: n as u16,
            first,
            groups,
            sync_state: parking_lot::Mutex::new(0),
        }
    }

    /// Set the owner's generation and the first page sequence this mount
    /// hands out (above every sequence an earlier mount could have used).
    pub fn with_identity(mut self, generation: u32, first_seq: u64) -> Self {
        self.generation = generation;
        self.next_seq = AtomicU64::new(first_seq);
        self
    }

    /// How many times the log was compacted.
    pub fn incarnation(&self) -> u64 {
        self.incarnation.load(Ordering::Acquire)
    }

    /// A new page sequence.
    fn take_seq(&self) -> u64 {
        self.next_seq.fetch_add(1, Ordering::Relaxed)
    }

    /// The inode record's log word ([`LogWord`]).
    pub fn word(&self) -> u64 {
        self.word.load(Ordering::Acquire)
    }

    /// The log array block, if the log has one.
    pub fn array_block(&self) -> Option<u64> {
        LogWord::decode(self.word()).array()
    }

    /// The sub-log the calling thread should append to.
    pub fn home_sublog(&self) -> usize {
        crate::cpu::current_below(usize::from(self.nsublogs))
    }

    /// The sub-log every attribute entry (`SetAttr`: mode, owner, times,
    /// size) and extended-attribute entry of this inode goes to: the first
    /// slot's (claimed for the calling CPU's sub-log if no append claimed
    /// it yet). Each `SetAttr` restates every attribute, so two of them
    /// in different sub-logs could be durable one without the other: a
    /// chown logged from one CPU after a setfacl from another would carry
    /// the mode the ACL set, and a power cut that kept the chown without
    /// the setfacl would show that mode without its ACL (found by the
    /// crash explorer's random attribute workloads). In one sub-log they
    /// count in order: a later one only with every earlier one.
    pub fn attr_sublog(&self) -> usize {
        let first = self.first.get();
        let home = self.home_sublog() as u32;
        match first
            .index
            .compare_exchange(UNCLAIMED, home, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => home as usize,
            Err(claimed) => claimed as usize,
        }
    }

    /// The sub-log holding entry `loc` if a power cut may still drop it
    /// (its page's durable mark does not cover it yet; only with durable
    /// marks, `file` mode and tiered pools), else `None`.
    ///
    /// A write that copies bytes an unsynced entry wrote (the old part of a
    /// partial page it writes copy-on-write, a truncate's zeroed tail page)
    /// must count only together with that entry: appended to the same
    /// sub-log it does, since a sub-log's entries count in order. Appended
    /// to another, a sync cut short could keep the copy without the entry
    /// it copied from, and the earlier write would show in part (found by
    /// the crash explorer's workloads whose thread moves between CPUs: an
    /// append from one CPU, then a small append from another into the
    /// same page).
    pub fn unsynced_sublog(&self, space: &dyn LogSpace, loc: EntryLoc) -> Option<usize> {
        if !space.keeps_marks() || loc == 0 {
            return None;
        }
        let page = loc_page(loc);
        // The footer names the page's sub-log (bytes 16..20).
        let word = space
            .media()
            .load_u64(page * BLOCK_SIZE + LOG_FOOTER_OFFSET + 16)
            .ok()?;
        let idx = (word & 0xffff_ffff) as usize;
        let (_, slot) = self.existing().find(|(i, _)| *i == idx)?;
        let sub = lock(&slot.log);
        // By the footer's sequence: a scan of the chain cost every write
        // after an unsynced truncate time in the chain's length.
        let k = Self::find_page(space.media(), &sub, page)?;
        let durable = sub.meta.get(k).map_or(0, |m| m.mark_durable);
        let covered = durable & MARK_SEALED != 0 || loc_slot(loc) < u64::from(durable);
        (!covered).then_some(idx)
    }

    /// Newest write mtime over all sub-logs.
    pub fn last_mtime_ns(&self) -> u64 {
        self.existing()
            .map(|(_, s)| lock(&s.log).last_mtime_ns)
            .max()
            .unwrap_or(0)
    }

    /// Record a write in place of data block `block` (`file` mode): the
    /// next sync of this log makes the block durable, and `mtime_ns`
    /// becomes the sub-log's newest write time, to be logged by the next
    /// full sync or `fsync` ([`InodeLog::take_unlogged_mtime`]) if it is
    /// newer than the sub-log's: a sub-log's newest write time is always
    /// in a write entry or already flagged, so an overwrite within the same
    /// clock tick (the coarse clock's, 1-4 ms) leaves nothing to log, and
    /// its `fsync` writes the data block alone, as a kernel file system's
    /// does when the inode's time did not change.
    pub fn note_overwrite(&self, space: &dyn LogSpace, block: u64, mtime_ns: u64) {
        let mut sub = lock(self.sub(self.home_sublog()));
        note_unsynced(&mut sub.unsynced, block, block + 1);
        if mtime_ns > sub.last_mtime_ns {
            sub.last_mtime_ns = mtime_ns;
            self.mtime_unlogged
                .store(true, std::sync::atomic::Ordering::Release);
        }
        self.note_dirty(space);
    }

    /// A write not logged yet (an append in place waiting for its entry,
    /// `file::append_in_place`) changed the file at `mtime_ns`: the mtime
    /// memory shows moves; the entry will carry it.
    pub fn note_unlogged_write(&self, mtime_ns: u64) {
        let mut sub = lock(self.sub(self.home_sublog()));
        sub.last_mtime_ns = sub.last_mtime_ns.max(mtime_ns);
    }

    /// Note again that the mtime is not logged (a sync that took the flag
    /// could not log it).
    pub fn mark_mtime_unlogged(&self) {
        self.mtime_unlogged
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// Whether a write in place changed the mtime since it was last logged
    /// (clears the flag: the caller logs it).
    pub fn take_unlogged_mtime(&self) -> bool {
        use std::sync::atomic::Ordering::{AcqRel, Relaxed};
        self.mtime_unlogged.load(Relaxed) && self.mtime_unlogged.swap(false, AcqRel)
    }

    /// Forget write mtimes (after utimes set an explicit time).
    pub fn reset_mtime(&self) {
        for (_, s) in self.existing() {
            lock(&s.log).last_mtime_ns = 0;
        }
    }

    /// Every block the log owns (array, pages), for freeing the inode.
    pub fn owned_blocks(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.array_block().into_iter().collect();
        for (_, s) in self.existing() {
            v.extend_from_slice(&lock(&s.log).pages);
        }
        v
    }

    /// Log pages in use, summed over sub-logs.
    pub fn page_count(&self) -> usize {
        self.existing().map(|(_, s)| lock(&s.log).pages.len()).sum()
    }

    /// Append `entries` (each with the number of live references it starts
    /// with) as one atomic group to sub-log `sublog`. Returns their locations.
    /// `mtime_ns`, if non-zero, becomes the sub-log's newest write time.
    pub fn append(
        &self,
        space: &dyn LogSpace,
        sublog: usize,
        entries: &[(Entry, u32)],
        mtime_ns: u64,
    ) -> Result<EntryLocs> {
        self.append_with_crcs(space, sublog, entries, mtime_ns, None)
    }

    /// [`InodeLog::append`], with the checksum of the data of each
    /// `FileWrite` entry, in order, when the caller computed them from the
    /// bytes it wrote (saves reading the blocks back: on a data device, a
    /// read of the device per write). Only these can cover the bytes below
    /// the file end alone ([`DataCrc::below_end`]); a checksum computed
    /// here covers all the entry's pages.
    pub fn append_with_crcs(
        &self,
        space: &dyn LogSpace,
        sublog: usize,
        entries: &[(Entry, u32)],
        mtime_ns: u64,
        data_crcs: Option<&[DataCrc]>,
    ) -> Result<EntryLocs> {
        self.append_replacing(space, sublog, entries, mtime_ns, data_crcs, None)
            .map(|(locs, _)| locs)
    }

    /// [`InodeLog::append_with_crcs`] of entries that supersede one live
    /// reference of the entry at `replaced` (a copy-on-write page's old
    /// entry). Where releases are not deferred (no durable marks) and the
    /// first new entry lands on the same log page, that reference is
    /// released here, folded into the new entry's count: the page's counter
    /// takes one addition instead of an addition and a subtraction (never
    /// reaching zero between them: the replaced reference was live).
    /// Returns the places and whether the reference was released; if not,
    /// the caller releases it as before.
    pub fn append_replacing(
        &self,
        space: &dyn LogSpace,
        sublog: usize,
        entries: &[(Entry, u32)],
        mtime_ns: u64,
        data_crcs: Option<&[DataCrc]>,
        replaced: Option<EntryLoc>,
    ) -> Result<(EntryLocs, bool)> {
        let media = space.media();
        let marks = space.keeps_marks();
        let deps = if marks {
            self.marked_append_deps(space, entries, data_crcs)?
        } else {
            MarkedDeps::default()
        };
        let crc_of = |i: usize| deps.crcs.get(i).copied().flatten();
        // A lone entry (most writes) is encoded into an array: a small
        // vector of encoded entries costs a move and a spill check per use.
        let lone;
        let mut group: SmallVec<[EncodedEntry; 2]> = SmallVec::new();
        let encoded: &[EncodedEntry] = if let [(e, _)] = entries {
            lone = [e.encode_with(false, crc_of(0))];
            &lone
        } else {
            for (i, (e, _)) in entries.iter().enumerate() {
                group.push(e.encode_with(i + 1 < entries.len(), crc_of(i)));
            }
            &group
        };
        let idx = sublog % usize::from(self.nsublogs);
        let mut sub = self.lock_sublog_for_append(space, idx)?;

        // Place every entry first, linking new pages as needed, so that a
        // full pool fails before any entry byte is written.
        let mut places: EntryLocs = SmallVec::new();
        let mut new_pages: NewPages = SmallVec::new();
        place_entries(space, &sub, encoded, &mut places, &mut new_pages)?;
        if marks && !new_pages.is_empty() {
            self.note_new_pages_unsynced(space, &mut sub, &new_pages);
        }
        for (page, prev_used) in new_pages {
            self.link_new_page(space, idx, &mut sub, page, prev_used)?;
        }
        let last_loc = write_and_commit(media, encoded, &places)?;

        let mut released = false;
        for ((_, weight), loc) in entries.iter().zip(&places) {
            let mut add = *weight;
            if let Some(r) = replaced
                && !marks
                && !released
                && add > 0
                && loc_page(r) == loc_page(*loc)
            {
                add -= 1;
                released = true;
            }
            if add > 0
                && let Some(c) = space.live_counter(loc_page(*loc))
            {
                c.fetch_add(add, Ordering::Relaxed);
            }
        }
        let last_loc_slot = loc_slot(last_loc) + encoded.last().expect("entry").slots();
        sub.next_slot = last_loc_slot;
        if marks {
            // The entries' own pages need no barrier before their marks: a
            // mark counts only entries of its own page, and a 4 KiB page
            // reaches the disk whole (docs/guarantees.md), so the sync's
            // second barrier writes them with the mark.
            for (s, e) in deps.blocks {
                note_unsynced(&mut sub.unsynced, s, e);
            }
            sub.ordered_deps |= deps.ordered;
        }
        self.note_dirty(space);
        if mtime_ns != 0 {
            sub.last_mtime_ns = sub.last_mtime_ns.max(mtime_ns);
        }
        drop(sub);
        if marks {
            for (e, _) in entries {
                space.appended(self.ino, e);
            }
        }
        Ok((places, released))
    }

    /// With durable marks: the data checksum each entry carries and the
    /// blocks a sync must make durable before a mark counts the entries.
    ///
    /// A write entry carries its data's checksum: recovery can then tell a
    /// mark that reached the disk without the data (a sync with one
    /// barrier, see durable.rs).
    #[inline]
    fn marked_append_deps(
        &self,
        space: &dyn LogSpace,
        entries: &[(Entry, u32)],
        data_crcs: Option<&[DataCrc]>,
    ) -> Result<MarkedDeps> {
        let media = space.media();
        let mut known = data_crcs.map(|c| c.iter().copied());
        let mut deps = MarkedDeps::default();
        for (e, _) in entries {
            let mut crc = None;
            if let Entry::FileWrite {
                block,
                npages,
                pgoff,
                file_end,
                ..
            } = e
            {
                // The data must be durable before a mark counts the
                // entry: on the page cache or the data device, by the
                // sync's first barrier. A pool block of a tiered
                // `pm`/`dram` pool (staged data) needs none: its
                // writer copied it non-temporally (or stored and
                // flushed it) before appending the entry, and that
                // append's fence made it durable (step 2 above), so
                // the barrier would only write its lines back again.
                if media.syncs_whole_pages() || media.on_data_device(*block * BLOCK_SIZE) {
                    deps.blocks.push((*block, *block + *npages as u64));
                }
                crc = match known.as_mut().and_then(Iterator::next) {
                    Some(c) => {
                        debug_assert_eq!(
                            media
                                .crc32(*block * BLOCK_SIZE, c.covered(*pgoff, *npages, *file_end))
                                .ok(),
                            Some(c.crc),
                            "the caller's checksum of blocks {block}+{npages} ({c:?})"
                        );
                        Some(c)
                    }
                    None => Some(DataCrc::whole(
                        media.crc32(*block * BLOCK_SIZE, u64::from(*npages) * BLOCK_SIZE)?,
                    )),
                };
            }
            deps.crcs.push(crc);
            let n = deps.blocks.len();
            space.sync_deps(self.ino, e, &mut deps.blocks);
            deps.ordered |= deps.blocks.len() > n;
        }
        Ok(deps)
    }

    /// Locks sub-log `idx` for an append, after making the log array its
    /// first page needs and collecting its dead pages.
    #[inline]
    fn lock_sublog_for_append(
        &self,
        space: &dyn LogSpace,
        idx: usize,
    ) -> Result<MutexGuard<'_, SubLog>> {
        let slot = self.slot(idx);
        let mut sub = slot.lock_to_append();
        if sub.pages.is_empty()
            && !std::ptr::eq(slot, self.first.get())
            && self.array_block().is_none()
        {
            // A second sub-log's first page: the word must name a log
            // array first (made under the first sub-log's mutex, with this
            // one's released; an array, once made, stays while appends
            // run).
            drop(sub);
            self.make_array(space)?;
            sub = lock(&slot.log);
        }
        if sub.dead_held > 0
            || slot
                .dead
                .get()
                .is_some_and(|d| d.fresh.load(Ordering::Relaxed) > 0)
        {
            self.collect_dead_pages(space, idx, &mut sub)?;
        }
        Ok(sub)
    }

    /// Records the blocks a sync must make durable before the first of
    /// `new_pages` is linked: a new page's footer must be durable before
    /// the page linking it is sealed, and a new head before the log array
    /// names it. The linking page itself needs no barrier: its link and
    /// its seal are on one page, written whole with the mark.
    fn note_new_pages_unsynced(
        &self,
        space: &dyn LogSpace,
        sub: &mut SubLog,
        new_pages: &NewPages,
    ) {
        if sub.pages.is_empty() {
            // The record's word (direct, or naming the array, which
            // may be new) and the array.
            let r = space.log_word_at(self.ino) / BLOCK_SIZE;
            note_unsynced(&mut sub.unsynced, r, r + 1);
            if let Some(a) = self.array_block() {
                note_unsynced(&mut sub.unsynced, a, a + 1);
            }
            sub.ordered_deps = true;
        }
        for &(page, _) in new_pages {
            note_unsynced(&mut sub.unsynced, page, page + 1);
        }
    }

    fn link_new_page(
        &self,
        space: &dyn LogSpace,
        idx: usize,
        sub: &mut SubLog,
        page: u64,
        prev_used: u64,
    ) -> Result<()> {
        let media = space.media();
        let off = page * BLOCK_SIZE;
        let seq = self.take_seq();
        media.nt_copy(off, &[0u8; BLOCK_SIZE as usize - 64])?;
        media.nt_copy(
            off + LOG_FOOTER_OFFSET,
            &encode_log_footer(self.ino, idx as u32, self.generation, seq),
        )?;
        media.fence();
        match sub.pages.last() {
            Some(prev) => {
                // The expected sequence goes first: a page written back with
                // the new `next` always carries it (durable.rs).
                let at = prev * BLOCK_SIZE + LOG_FOOTER_OFFSET;
                media.store_u64(at + FOOTER_NEXT_SEQ, seq)?;
                media.flush(at + FOOTER_NEXT_SEQ, 8)?;
                media.store_u64(at, page)?;
                media.persist(at, 8)?;
            }
            None => self.set_head(space, idx, page, seq)?,
        }
        if let Some(last) = sub.meta.last_mut() {
            last.used = prev_used;
        }
        sub.pages.push(page);
        sub.meta.push(PageMeta::new(seq));
        sub.next_slot = 0;
        Ok(())
    }

    /// Make `page` (sequence `seq`) the head of sub-log `idx`: in the log
    /// array, or in the record's word while the log has none (then `idx` is
    /// the first slot's sub-log, whose mutex the caller holds).
    fn set_head(&self, space: &dyn LogSpace, idx: usize, page: u64, seq: u64) -> Result<()> {
        let media = space.media();
        match self.array_block() {
            Some(a) => {
                let at = a * BLOCK_SIZE + idx as u64 * 8;
                media.store_u64(at, page)?;
                media.persist(at, 8)
            }
            None => {
                debug_assert_eq!(self.first.get().index(), idx);
                let w = LogWord::direct(idx, page, seq);
                let at = space.log_word_at(self.ino);
                media.store_u64(at, w)?;
                media.persist(at, 8)?;
                self.word.store(w, Ordering::Release);
                Ok(())
            }
        }
    }

    /// Give the log a log array (a second sub-log is about to start): a
    /// fresh array naming the first sub-log's head is made durable, then
    /// the record's word is switched to it with one 8-byte store, as a
    /// compaction switches logs. Until the switch is durable the record
    /// names the first sub-log's head directly, which the array also names.
    fn make_array(&self, space: &dyn LogSpace) -> Result<()> {
        let first = self.first_slot();
        let mut sub = lock(&first.log);
        if self.array_block().is_some() {
            return Ok(());
        }
        let media = space.media();
        let idx = first.index();
        let array = space.alloc_meta_block()?;
        // Every page this log may name from now on carries a sequence at
        // least the first sub-log's head's (its chain ascends) or the next
        // one handed out.
        let next = self.next_seq.load(Ordering::Relaxed);
        let base_seq = sub.meta.first().map_or(next, |m| m.seq.min(next));
        let at = space.log_word_at(self.ino);
        let written = (|| -> Result<()> {
            media.nt_copy(array * BLOCK_SIZE, &[0u8; BLOCK_SIZE as usize])?;
            let base_at = array * BLOCK_SIZE + ARRAY_BASE_SEQ_WORD as u64 * 8;
            media.store_u64(base_at, base_seq)?;
            media.flush(base_at, 8)?;
            if let Some(&head) = sub.pages.first() {
                let head_at = array * BLOCK_SIZE + idx as u64 * 8;
                media.store_u64(head_at, head)?;
                media.flush(head_at, 8)?;
            }
            media.fence();
            if space.keeps_marks() && !array_sync_skipped(space) {
                // Page cache: only a completed sync orders the array before
                // the record that names it.
                media.sync_range(array * BLOCK_SIZE, BLOCK_SIZE as usize)?;
            }
            media.store_u64(at, array)?;
            media.persist(at, 8)
        })();
        if let Err(e) = written {
            if media.load_u64(at).ok() != Some(array) {
                space.free_blocks(array, 1);
            } else {
                self.word.store(array, Ordering::Release);
            }
            return Err(e);
        }
        self.word.store(array, Ordering::Release);
        if space.keeps_marks() {
            // The record must be durable before marks of the new sub-log's
            // entries (recovery would follow the direct word otherwise).
            let r = at / BLOCK_SIZE;
            note_unsynced(&mut sub.unsynced, r, r + 1);
            sub.ordered_deps = true;
        }
        self.note_dirty(space);
        Ok(())
    }

    /// The data checksum the write entry at `loc` carries, and the file
    /// bytes it covers ([`Entry::data_crc_span`]); `None` if it carries
    /// none. One 64-byte read of its header slot.
    pub fn data_crc_span(
        &self,
        space: &dyn LogSpace,
        loc: EntryLoc,
    ) -> Result<Option<DataCrcSpan>> {
        let mut header = [0u8; SLOT_SIZE as usize];
        space.media().read(
            loc_page(loc) * BLOCK_SIZE + loc_slot(loc) * SLOT_SIZE,
            &mut header,
        )?;
        Ok(Entry::data_crc_span(&header))
    }

    /// Drop `n` live references of the entry at `loc` (its pages were
    /// superseded or truncated away).
    pub fn release(&self, space: &dyn LogSpace, loc: EntryLoc, n: u32) {
        if let Some(c) = space.live_counter(loc_page(loc)) {
            let prev = c.fetch_sub(n, Ordering::Relaxed);
            debug_assert!(prev >= n, "live count underflow on page {}", loc_page(loc));
            if prev == n
                && let Some(idx) = self.sublog_of(space.media(), loc_page(loc))
            {
                let d = self.slot(idx).dead();
                lock(&d.pages).push(loc_page(loc));
                d.fresh.fetch_add(1, Ordering::Release);
            }
        }
    }

    /// The sub-log a log page of this inode belongs to, from its footer
    /// (`None` if the block is not one of this inode's log pages).
    fn sublog_of(&self, media: &Media, page: u64) -> Option<usize> {
        let at = page * BLOCK_SIZE + LOG_FOOTER_OFFSET;
        let ino = media.load_u64(at + 8).ok()?;
        let w = media.load_u64(at + 16).ok()?;
        let (idx, magic) = (w as u32 as usize, (w >> 32) as u32);
        (ino == self.ino && magic == LOG_PAGE_MAGIC && idx < self.nsublogs.into()).then_some(idx)
    }

    /// Where `page` is in `sub`'s chain: by its footer's sequence (the
    /// chain's sequences ascend), checked against the chain.
    fn find_page(media: &Media, sub: &SubLog, page: u64) -> Option<usize> {
        let seq = media
            .load_u64(page * BLOCK_SIZE + LOG_FOOTER_OFFSET + FOOTER_SEQ)
            .ok()?;
        let i = sub.meta.binary_search_by_key(&seq, |m| m.seq).ok()?;
        (sub.pages.get(i) == Some(&page)).then_some(i)
    }

    /// Unlink and free this sub-log's dead pages: the candidates its
    /// releases queued (never the tail page, which still receives appends).
    /// Called under the sub-log's mutex. The predecessor's link is persisted
    /// before the page is freed, so recovery can never follow a pointer into
    /// a reused page.
    fn collect_dead_pages(&self, space: &dyn LogSpace, idx: usize, sub: &mut SubLog) -> Result<()> {
        let list = self.slot(idx).dead();
        if list.fresh.swap(0, Ordering::Acquire) == 0 && sub.dead_skip > 0 {
            sub.dead_skip -= 1;
            return Ok(());
        }
        let media = space.media();
        let mut candidates = std::mem::take(&mut *lock(&list.pages));
        if std::mem::take(&mut sub.scan_all) {
            candidates.extend(sub.pages.iter().copied().filter(|&p| {
                space
                    .live_counter(p)
                    .is_some_and(|c| c.load(Ordering::Relaxed) == 0)
            }));
        }
        let mut held: Vec<u64> = Vec::new();
        let mut result = Ok(());
        for page in candidates {
            if result.is_err() {
                held.push(page);
                continue;
            }
            let dead = space
                .live_counter(page)
                .is_some_and(|c| c.load(Ordering::Relaxed) == 0);
            if !dead {
                // Live again (the tail took new entries): a later release
                // queues it anew.
                continue;
            }
            let Some(i) = Self::find_page(media, sub, page) else {
                // Already unlinked (queued twice) or not this sub-log's.
                continue;
            };
            // With durable marks, a page is unlinked only when its
            // successor's footer is durable: the new link may reach the disk
            // at any moment (durable.rs).
            if i + 1 >= sub.pages.len() || (space.keeps_marks() && !sub.meta[i + 1].footer_durable)
            {
                held.push(page);
                continue;
            }
            result = self.unlink_page(space, idx, sub, i);
        }
        sub.dead_held = held.len() as u32;
        sub.dead_skip = held.len() as u32;
        if !held.is_empty() {
            lock(&list.pages).extend(held);
        }
        result
    }

    /// Unlink page `i` (not the tail) of `sub`'s chain and retire it.
    fn unlink_page(
        &self,
        space: &dyn LogSpace,
        idx: usize,
        sub: &mut SubLog,
        i: usize,
    ) -> Result<()> {
        let media = space.media();
        let page = sub.pages[i];
        let next = sub.pages[i + 1];
        if i == 0 {
            self.set_head(space, idx, next, sub.meta[1].seq)?;
        } else {
            let link_at = sub.pages[i - 1] * BLOCK_SIZE + LOG_FOOTER_OFFSET;
            media.store_u64(link_at, next)?;
            media.persist(link_at, 8)?;
        }
        if i > 0 {
            let link_at = sub.pages[i - 1] * BLOCK_SIZE + LOG_FOOTER_OFFSET;
            // `next` first, then its sequence: either mix the page cache
            // may write back is accepted (the successor's sequence is
            // above the old one).
            let at = link_at + FOOTER_NEXT_SEQ;
            media.store_u64(at, sub.meta[i + 1].seq)?;
            media.persist(at, 8)?;
        }
        sub.pages.remove(i);
        sub.meta.remove(i);
        if i < sub.settled as usize {
            sub.settled -= 1;
        }
        space.retire_block(page);
        self.note_dirty(space);
        Ok(())
    }
}

/// What a marked append must have durable before its marks count.
#[derive(Default)]
struct MarkedDeps {
    /// Per entry: the checksum of a write entry's data.
    crcs: SmallVec<[Option<DataCrc>; 2]>,
    /// Block ranges `[start, end)` to make durable.
    blocks: Vec<(u64, u64)>,
    /// Whether some of them must be durable before the log's own pages.
    ordered: bool,
}

/// Pages an append links: (new page, final slot count of the page before it).
type NewPages = SmallVec<[(u64, u64); 2]>;

/// Where each of `encoded` goes in `sub` (pushed to `places`, empty), and
/// the new pages that takes (pushed to `new_pages`, empty; allocated here,
/// all freed again if one allocation fails). Out-parameters, not a
/// returned pair: the pair was copied once more on every append.
#[inline]
fn place_entries(
    space: &dyn LogSpace,
    sub: &SubLog,
    encoded: &[EncodedEntry],
    places: &mut EntryLocs,
    new_pages: &mut NewPages,
) -> Result<()> {
    let (mut page_idx, mut slot) = (sub.pages.len(), sub.next_slot);
    for e in encoded {
        if page_idx == 0 || slot + e.slots() > ENTRY_SLOTS_PER_PAGE {
            match space.alloc_meta_block() {
                Ok(b) => new_pages.push((b, slot)),
                Err(err) => {
                    for (b, _) in new_pages.drain(..) {
                        space.free_blocks(b, 1);
                    }
                    return Err(err);
                }
            }
            page_idx += 1;
            slot = 0;
        }
        let page = if page_idx > sub.pages.len() {
            new_pages[page_idx - sub.pages.len() - 1].0
        } else {
            sub.pages[page_idx - 1]
        };
        places.push(entry_loc(page, slot));
        slot += e.slots();
    }
    Ok(())
}

/// Steps 2 and 3 of the append protocol: stores, flushes and fences every
/// entry's bytes at its place, then stores and persists the commit word of
/// the last. Returns the last entry's place.
#[inline]
fn write_and_commit(
    media: &Media,
    encoded: &[EncodedEntry],
    places: &[EntryLoc],
) -> Result<EntryLoc> {
    for (e, loc) in encoded.iter().zip(places) {
        let off = loc_page(*loc) * BLOCK_SIZE + loc_slot(*loc) * SLOT_SIZE;
        media.store_flushed(off, &e.body)?;
    }
    media.fence();
    let last_loc = *places.last().expect("at least one entry");
    let commit_off = loc_page(last_loc) * BLOCK_SIZE + loc_slot(last_loc) * SLOT_SIZE + 56;
    media.store_u64(commit_off, encoded.last().expect("entry").commit_word)?;
    media.persist(commit_off, 8)?;
    Ok(last_loc)
}

#[cfg(test)]
mod tests {
    use super::scan::{ScanBuf, scan_log_buf};
    use super::*;
    use crate::media::Durability;

    struct Space {
        media: Media,
        free: std::sync::Mutex<Vec<u64>>,
        live: Vec<AtomicU32>,
        sb: Superblock,
    }

    impl Space {
        /// A 1 MiB `dram` pool in `dir` with 16 free metadata blocks and a
        /// live-entry counter per block.
        fn in_dir(dir: &std::path::Path) -> Space {
            let size = 1u64 << 20;
            let media = Media::create(&dir.join("p"), size, Durability::Dram).unwrap();
            let sb = Superblock::for_size(size, 16 << 10).unwrap();
            Space {
                media,
                free: std::sync::Mutex::new((sb.data_start..sb.data_start + 16).rev().collect()),
                live: (sb.data_start..sb.total_blocks)
                    .map(|_| AtomicU32::new(0))
                    .collect(),
                sb,
            }
        }
    }

    impl LogSpace for Space {
        fn media(&self) -> &Media {
            &self.media
        }
        fn alloc_meta_block(&self) -> Result<u64> {
            self.free
                .lock()
                .unwrap()
                .pop()
                .ok_or(crate::Error::NoSpace("test"))
        }
        fn free_blocks(&self, first: u64, count: u64) {
            self.free.lock().unwrap().extend(first..first + count);
        }
        fn log_word_at(&self, ino: u64) -> u64 {
            self.sb.inode_offset(ino) + INODE_LOG_ARRAY_OFFSET
        }
        fn live_counter(&self, page: u64) -> Option<&AtomicU32> {
            self.live
                .get(page.checked_sub(self.sb.data_start)? as usize)
        }
    }

    fn add(seq: u64) -> Entry {
        Entry::DirAdd {
            seq,
            ino: 5,
            generation: 1,
            kind: FileKind::File,
            txid: 0,
            name: format!("n{seq}").into_bytes(),
        }
    }

    fn scan(space: &Space, log: &InodeLog) -> Vec<(usize, usize)> {
        let mut subs = scan_log_buf(
            &space.media,
            &space.sb,
            9,
            0,
            log.word(),
            CommitRule::Immediate,
            &mut ScanBuf::default(),
        )
        .unwrap();
        subs.sort_by_key(|s| s.index);
        subs.iter().map(|s| (s.index, s.entries.len())).collect()
    }

    /// A log whose first slot is storage outside it (`new_in`, as in an
    /// inode's file state): the first sub-log to append claims it and its
    /// head goes in the record's word; a second sub-log gets its own slot
    /// and makes a log array naming both heads; compaction keeps the array.
    /// The storage is dropped after the log.
    #[test]
    fn an_appender_waiting_for_the_sublog_is_counted_until_it_has_it() {
        let slot = SubLogSlot::empty();
        let held = lock(&slot.log);
        let got = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                let _g = slot.lock_to_append();
                got.store(true, Ordering::SeqCst);
            });
            let t0 = std::time::Instant::now();
            while slot.waiting.load(Ordering::SeqCst) == 0 {
                assert!(t0.elapsed().as_secs() < 10, "the appender never waited");
                std::thread::yield_now();
            }
            assert!(!got.load(Ordering::SeqCst));
            drop(held);
            // What a sync does between two runs: wait for the appender.
            while !got.load(Ordering::SeqCst) {
                slot.let_waiters_in();
                assert!(t0.elapsed().as_secs() < 10, "the appender never got in");
            }
        });
        assert_eq!(slot.waiting.load(Ordering::SeqCst), 0);
        // Uncontended, nothing is counted.
        drop(slot.lock_to_append());
        assert_eq!(slot.waiting.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn letting_waiters_in_is_bounded_when_they_cannot_get_in() {
        // A waiter that another holder keeps out: the sync goes on after
        // its bounded checks instead of waiting for it.
        let slot = SubLogSlot::empty();
        let _other = lock(&slot.log);
        slot.waiting.store(1, Ordering::SeqCst);
        let t0 = std::time::Instant::now();
        slot.let_waiters_in();
        assert!(t0.elapsed().as_secs() < 5);
        assert_eq!(slot.waiting.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_first_slot_outside_the_log_and_the_change_to_an_array() {
        let dir = tempfile::tempdir().unwrap();
        let space = Space::in_dir(dir.path());
        let storage = Box::new(SubLogSlot::empty());
        // SAFETY: `storage` is a box that outlives `log` (dropped after
        // it, below) and is not moved or used by anything else meanwhile.
        let log =
            unsafe { InodeLog::new_in(9, 0, 4, Vec::new(), std::ptr::NonNull::from(&*storage)) };
        assert!(log.existing().next().is_none());
        log.append(&space, 3, &[(add(1), 1)], 0).unwrap();
        assert_eq!(storage.index(), 3, "the first append claims the slot");
        let LogWord::Direct { index: 3, head, .. } = LogWord::decode(log.word()) else {
            panic!("direct word expected: {:?}", LogWord::decode(log.word()))
        };
        let at = space.log_word_at(9);
        assert_eq!(space.media.load_u64(at).unwrap(), log.word());
        assert_eq!(log.owned_blocks(), vec![head]);
        assert_eq!(scan(&space, &log), vec![(3, 1)]);

        log.append(&space, 1, &[(add(2), 1)], 0).unwrap();
        log.append(&space, 3, &[(add(3), 1)], 0).unwrap();
        let array = log.array_block().expect("an array for two sub-logs");
        assert_eq!(space.media.load_u64(at).unwrap(), array);
        assert_eq!(
            space.media.load_u64(array * BLOCK_SIZE + 3 * 8).unwrap(),
            head
        );
        assert_eq!(
            log.existing().map(|(i, _)| i).collect::<Vec<_>>(),
            vec![3, 1],
            "the first slot, then the groups"
        );
        assert_eq!(scan(&space, &log), vec![(1, 1), (3, 2)]);
        assert_eq!(log.owned_blocks().len(), 3);

        let entries: Vec<(Entry, u32)> = (1..=3).map(|s| (add(s), 1)).collect();
        log.rewrite(&space, at, &entries).unwrap();
        let new_array = log.array_block().expect("compaction keeps the array");
        assert_ne!(new_array, array);
        assert_eq!(scan(&space, &log), vec![(3, 3)]);
        drop(log);
        drop(storage);
    }

    /// An append that replaces a live reference on its own log page folds
    /// the release into its count (one addition of `weight - 1`); on
    /// another page it leaves the release to the caller. Either way the
    /// counts end where an append and a separate release leave them.
    #[test]
    fn a_replacing_append_folds_the_release_on_the_same_page() {
        let dir = tempfile::tempdir().unwrap();
        let space = Space::in_dir(dir.path());
        let count = |loc: EntryLoc| {
            space
                .live_counter(loc_page(loc))
                .unwrap()
                .load(Ordering::Relaxed)
        };
        let log = InodeLog::new(9, 0, 1, Vec::new());
        let first = log.append(&space, 0, &[(add(0), 2)], 0).unwrap()[0];
        assert_eq!(count(first), 2);
        // Same page: the replaced reference is released in the append.
        let (locs, released) = log
            .append_replacing(&space, 0, &[(add(1), 1)], 0, None, Some(first))
            .unwrap();
        assert!(released);
        assert_eq!(loc_page(locs[0]), loc_page(first));
        assert_eq!(count(first), 2, "2 + 1 - 1");
        // Until the page is full; the first append on the next page leaves
        // the release of a reference on the old page to the caller.
        let mut last = locs[0];
        loop {
            let (locs, released) = log
                .append_replacing(&space, 0, &[(add(2), 1)], 0, None, Some(last))
                .unwrap();
            if loc_page(locs[0]) != loc_page(last) {
                assert!(!released);
                assert_eq!(count(locs[0]), 1);
                assert_eq!(count(last), 2, "not released: the caller does it");
                log.release(&space, last, 1);
                assert_eq!(count(last), 1);
                break;
            }
            assert!(released);
            last = locs[0];
        }
    }

    /// Compaction of a log without an array names the new chain's head in
    /// the word; a head page that is unlinked leaves its successor there.
    #[test]
    fn compaction_of_a_direct_log_stays_direct() {
        let dir = tempfile::tempdir().unwrap();
        let space = Space::in_dir(dir.path());
        let log = InodeLog::new(9, 0, 2, Vec::new());
        let mut first = None;
        for s in 0..80 {
            let locs = log.append(&space, 0, &[(add(s), 1)], 0).unwrap();
            first.get_or_insert(locs[0]);
        }
        let pages = log.page_count();
        assert!(pages >= 2, "{pages}");
        // Every entry of the head page dies: the next append unlinks it.
        let head = loc_page(first.unwrap());
        for loc in (0..ENTRY_SLOTS_PER_PAGE).map(|s| entry_loc(head, s)) {
            if space.live_counter(head).unwrap().load(Ordering::Relaxed) > 0 {
                log.release(&space, loc, 1);
            }
        }
        log.append(&space, 0, &[(add(80), 1)], 0).unwrap();
        assert_eq!(log.page_count(), pages - 1);
        let LogWord::Direct { head: h, .. } = LogWord::decode(log.word()) else {
            panic!("direct")
        };
        assert_ne!(h, head);
        let at = space.log_word_at(9);
        log.rewrite(&space, at, &[(add(81), 1)]).unwrap();
        assert!(matches!(
            LogWord::decode(log.word()),
            LogWord::Direct { index: 0, .. }
        ));
        assert_eq!(space.media.load_u64(at).unwrap(), log.word());
        assert_eq!(scan(&space, &log), vec![(0, 1)]);
    }
}
