//! Blocks, log-entry references and inode numbers that wait for a sync
//! before they may be reused (`file` mode), and the registry of inodes with
//! state that is not durable yet. The sync itself lives in `sync_engine`.

use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use std::collections::HashMap;

const SHARDS: usize = 16;

/// The largest list (in items) kept for reuse by [`SyncEngine::recycle`]:
/// 16 MiB of [`Pending`]; a larger one is returned to the allocator.
const SPARE_MAX: usize = 1 << 18;

/// Something to free once the state that no longer needs it is durable.
#[derive(Debug)]
pub enum Pending {
    /// Data blocks superseded or truncated away.
    Blocks(u64, u64),
    /// A log page unlinked by garbage collection, or a log array or page
    /// replaced by compaction.
    LogBlock(u64),
    /// Live references of a superseded log entry.
    Release {
        /// Owner.
        ino: u64,
        /// Its generation.
        generation: u32,
        /// The log's incarnation (compaction count) when deferred.
        incarnation: u64,
        /// The entry.
        loc: u64,
        /// References to drop.
        n: u32,
    },
    /// Everything an unreachable inode owned.
    Inode {
        /// Inode number (freed last).
        ino: u64,
        /// Data blocks.
        data: Vec<u64>,
        /// Log array and log pages.
        log: Vec<u64>,
    },
}

/// One shard of the waiting lists: its items, and the blocks they free
/// (kept as they are queued, under the shard's mutex, so counting the
/// waiting blocks costs a look at each shard, not a walk of every item).
#[derive(Default)]
struct WaitingShard {
    items: Vec<Pending>,
    blocks: u64,
}

/// Per-mount state of the `file`-mode sync machinery.
pub struct SyncEngine {
    pub(crate) lock: Mutex<()>,
    pub(crate) dirty: Box<[CachePadded<Mutex<Vec<u64>>>]>,
    pending: Box<[CachePadded<Mutex<WaitingShard>>]>,
    /// Emptied lists of earlier syncs, kept with their capacity.
    spare: Mutex<Vec<Vec<Pending>>>,
    /// Blocks a running sync took off the waiting lists and has not freed
    /// yet. Its mutex is held while blocks move between the lists, this
    /// count and the allocator, so a count of free and waiting blocks taken
    /// under it ([`SyncEngine::free_and_waiting`]) is never short.
    taken: Mutex<u64>,
}

impl Default for SyncEngine {
    fn default() -> Self {
        SyncEngine {
            lock: Mutex::new(()),
            dirty: (0..SHARDS)
                .map(|_| CachePadded::new(Mutex::default()))
                .collect(),
            pending: (0..SHARDS)
                .map(|_| CachePadded::new(Mutex::default()))
                .collect(),
            spare: Mutex::default(),
            taken: Mutex::new(0),
        }
    }
}

impl SyncEngine {
    /// Register an inode with undurable state (once per sync period).
    pub fn note_dirty(&self, ino: u64) {
        self.dirty[ino as usize % SHARDS].lock().push(ino);
    }

    /// Queue `p` until after the next sync.
    pub fn defer(&self, p: Pending) {
        self.defer_all([p]);
    }

    /// Queue each of `items` until after the next sync, under one hold of
    /// the shard's mutex (a replaced page's block and its entry's reference).
    pub fn defer_all<const N: usize>(&self, items: [Pending; N]) {
        let mut shard = self.pending[crate::cpu::current() % SHARDS].lock();
        shard.blocks += items.iter().map(blocks_of).sum::<u64>();
        shard.items.extend(items);
    }

    /// Take everything queued so far: each non-empty shard's list whole,
    /// swapped for a spare one (empty, with the capacity of a list an
    /// earlier sync took). Nothing is copied, and neither the sync nor the
    /// writers that queue next grow a fresh list into memory the kernel
    /// must fault in and zero again: with an item queued per append, a
    /// sync every 100 ms takes tens of thousands (see `recycle`).
    /// The blocks they hold count as taken until [`SyncEngine::hand_back`]
    /// (or [`SyncEngine::forget_taken`] after a failed sync).
    pub(crate) fn take_pending(&self) -> Vec<Vec<Pending>> {
        let mut taken = self.taken.lock();
        let mut spare = self.spare.lock();
        let lists: Vec<Vec<Pending>> = self
            .pending
            .iter()
            .filter_map(|s| {
                let mut s = s.lock();
                *taken += std::mem::take(&mut s.blocks);
                (!s.items.is_empty())
                    .then(|| std::mem::replace(&mut s.items, spare.pop().unwrap_or_default()))
            })
            .collect();
        lists
    }

    /// Run `free` (which gives the blocks [`SyncEngine::take_pending`]
    /// took to the allocator) with the taken count held, then clear it.
    pub(crate) fn hand_back<R>(&self, free: impl FnOnce() -> R) -> R {
        let mut taken = self.taken.lock();
        let r = free();
        *taken = 0;
        r
    }

    /// A sync that took blocks failed before freeing them: they are lost
    /// to this mount (free again at the next one), not waiting.
    pub(crate) fn forget_taken(&self) {
        *self.taken.lock() = 0;
    }

    /// Free blocks (`free()`, the allocator's count) plus the blocks that
    /// wait for a sync or that a running sync holds: the free space the
    /// media shows. Exact against a concurrent sync; writers running
    /// meanwhile move it as they go.
    pub fn free_and_waiting(&self, free: impl FnOnce() -> u64) -> u64 {
        let taken = self.taken.lock();
        free() + *taken + self.waiting_blocks()
    }

    /// Keep lists [`SyncEngine::take_pending`] returned, emptied, for the
    /// next sync to hand the shards (one per shard at most, none above
    /// `SPARE_MAX` items).
    pub(crate) fn recycle(&self, lists: Vec<Vec<Pending>>) {
        let mut spare = self.spare.lock();
        for mut l in lists {
            l.clear();
            if spare.len() < SHARDS && l.capacity() <= SPARE_MAX {
                spare.push(l);
            }
        }
    }

    /// Blocks on the waiting lists (not those a running sync took).
    pub(crate) fn waiting_blocks(&self) -> u64 {
        self.pending.iter().map(|s| s.lock().blocks).sum()
    }

    /// Whether anything waits for a sync.
    pub fn has_work(&self) -> bool {
        self.dirty.iter().any(|s| !s.lock().is_empty())
            || self.pending.iter().any(|s| !s.lock().items.is_empty())
    }
}

/// Blocks an item frees.
fn blocks_of(p: &Pending) -> u64 {
    match p {
        Pending::Blocks(_, n) => *n,
        Pending::LogBlock(_) => 1,
        Pending::Inode { data, log, .. } => (data.len() + log.len()) as u64,
        Pending::Release { .. } => 0,
    }
}

/// Marks a recorded range as log arrays of inodes a directory entry names
/// (resolved by the sync engine's `resolve_log_arrays`).
pub(crate) const LOG_ARRAY_TAG: u64 = 1 << 63;

/// Inodes named (a directory entry appended) since the last full sync:
/// child -> (directory, a sequence that tells a later naming apart).
#[derive(Default)]
pub struct Named {
    shards: [crossbeam_utils::CachePadded<NamedShard>; NAMED_SHARDS],
}

const NAMED_SHARDS: usize = 16;

/// (last sequence handed out, child -> (directory, sequence)).
type NamedShard = parking_lot::Mutex<(u64, HashMap<u64, (u64, u64)>)>;

impl Named {
    fn shard(&self, ino: u64) -> &NamedShard {
        &self.shards[ino as usize % NAMED_SHARDS]
    }

    /// `child` was named in `dir` (called after the entry was appended).
    pub fn note(&self, child: u64, dir: u64) {
        let mut s = self.shard(child).lock();
        s.0 += 1;
        let seq = s.0;
        s.1.insert(child, (dir, seq));
    }

    pub(crate) fn get(&self, child: u64) -> Option<(u64, u64)> {
        let s = self.shard(child).lock();
        if s.1.is_empty() {
            return None;
        }
        s.1.get(&child).copied()
    }

    /// The directory of `child`'s naming `seq` was synced: forget it unless
    /// it was named again since.
    pub(crate) fn forget(&self, child: u64, seq: u64) {
        let mut s = self.shard(child).lock();
        if s.1.get(&child).is_some_and(|&(_, q)| q == seq) {
            s.1.remove(&child);
        }
    }

    pub(crate) fn clear(&self) {
        for s in &self.shards {
            s.lock().1.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn free_and_waiting_blocks_count_the_same_through_a_sync() {
        let eng = SyncEngine::default();
        let free = std::sync::atomic::AtomicU64::new(100);
        let count = || eng.free_and_waiting(|| free.load(Ordering::Relaxed));
        eng.defer(Pending::Blocks(10, 3));
        eng.defer(Pending::LogBlock(20));
        eng.defer(Pending::Release {
            ino: 1,
            generation: 0,
            incarnation: 0,
            loc: 0,
            n: 1,
        });
        eng.defer(Pending::Inode {
            ino: 5,
            data: vec![30, 31],
            log: vec![40],
        });
        assert_eq!(count(), 107);
        assert_eq!(eng.waiting_blocks(), 7);
        // Taken by a sync: off the lists, still counted.
        let lists = eng.take_pending();
        assert_eq!(eng.waiting_blocks(), 0);
        assert_eq!(count(), 107);
        // Handed to the allocator: counted once.
        eng.hand_back(|| free.fetch_add(7, Ordering::Relaxed));
        assert_eq!(count(), 107);
        eng.recycle(lists);
        // A failed sync loses what it took.
        eng.defer(Pending::Blocks(50, 2));
        let _lost = eng.take_pending();
        assert_eq!(count(), 109);
        eng.forget_taken();
        assert_eq!(count(), 107);
    }

    #[test]
    fn a_sync_takes_every_queued_item_and_hands_its_lists_back_emptied() {
        let eng = SyncEngine::default();
        assert!(eng.take_pending().is_empty());
        for b in 0..1000 {
            eng.pending[b as usize % 3]
                .lock()
                .items
                .push(Pending::Blocks(b, 1));
        }
        let lists = eng.take_pending();
        assert_eq!(lists.len(), 3);
        let mut got: Vec<u64> = lists
            .iter()
            .flatten()
            .map(|p| match p {
                Pending::Blocks(b, _) => *b,
                _ => unreachable!(),
            })
            .collect();
        got.sort_unstable();
        assert_eq!(got, (0..1000).collect::<Vec<_>>());
        assert!(!eng.has_work());
        eng.recycle(lists);
        // The next sync hands the shard it takes from one of those lists,
        // emptied, its room kept.
        eng.pending[0].lock().items.push(Pending::LogBlock(7));
        let again = eng.take_pending();
        assert_eq!(again.len(), 1);
        assert!(matches!(again[0][..], [Pending::LogBlock(7)]));
        assert!(eng.pending[0].lock().items.is_empty());
        assert!(eng.pending[0].lock().items.capacity() >= 333);
        // A list grown past SPARE_MAX is not kept.
        eng.recycle(vec![Vec::with_capacity(SPARE_MAX + 1)]);
        assert!(eng.spare.lock().iter().all(|l| l.capacity() <= SPARE_MAX));
    }
}
