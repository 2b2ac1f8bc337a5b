//! DRAM state of a directory (moved here from `namespace/` so the inode,
//! which embeds it, does not depend on the code that operates on it).
//!
//! A directory's names are split into shards by a hash of the name, each
//! under its own reader-writer lock, so operations on different names of
//! one directory proceed in parallel. A name lookup takes no lock: each
//! shard's names are in a table that readers follow lock-free
//! ([`super::names`]); the lock serialises the changes of a shard's names
//! and lets whole-directory operations exclude them. Entry sequences are a Lamport clock
//! kept per shard: an entry takes one more than the newest sequence of
//! every shard whose names it touches, while holding those shards, and
//! leaves its own in each of them. Entries for one name therefore get
//! ascending sequences in the order they commit, which is the order
//! recovery replays them in; entries for names of different shards may
//! share a sequence (replay order between them does not matter: they
//! touch different names). No operation writes a line that operations on
//! other shards write.
//!
//! Lock order: directories in the order `namespace` documents; within one
//! directory, shards in ascending index. An operation that needs the whole
//! directory (compaction, the emptiness check of rmdir and of a rename over
//! a directory, readdir) takes every shard in that order.

use super::names::{Child, NameGuard, NameTable, hash_name};
use crate::sync::Ordering;
pub use crate::sync::futex::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use crossbeam_utils::CachePadded;
use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;

/// A directory's entries and its entry sequence, as recovery rebuilds them
/// (one plain map; the live directory splits it into shards).
#[derive(Debug, Default)]
pub struct DirState {
    /// Name -> inode, sorted (readdir order is stable).
    pub entries: BTreeMap<Vec<u8>, Child>,
    /// Sequence of the newest entry in the directory's log.
    pub seq: u64,
    /// Entries in the directory's log, live or not (compaction trigger).
    pub log_entries: u64,
    /// Whether this directory's own entry of the rename the journal still
    /// records (stamped with its txid) counted: that side of the rename is
    /// done, and later entries for the same names stand.
    pub pending_rename_counted: bool,
}

/// The writer state of one shard of a directory (its names are in the
/// shard's [`NameTable`], which lookups read without this lock).
#[derive(Debug)]
pub struct DirShard {
    /// Names in this shard.
    live: u64,
    /// Log entries appended by operations on this shard's names since the
    /// last compaction (or, after one, this shard's live entries): the
    /// shard's share of the compaction trigger.
    pub log_entries: u64,
    /// Sequence of the newest entry that touched a name of this shard (or
    /// that every shard got: a mount, a compaction).
    seq: u64,
    /// Which directory ([`DirData::id`]) and which of its shards this is:
    /// a `&mut DirShard` is the proof that writes to that shard's names
    /// are excluded ([`DirData::insert`]).
    owner: u64,
    index: usize,
}

impl DirShard {
    /// A shard state outside any directory (tests of the sequences).
    #[cfg(test)]
    fn detached() -> Self {
        DirShard {
            live: 0,
            log_entries: 0,
            seq: 0,
            owner: 0,
            index: 0,
        }
    }

    /// Names in this shard.
    pub fn len(&self) -> u64 {
        self.live
    }

    /// Whether this shard has no names.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }
}

/// Take `n` consecutive entry sequences for an entry group that touches
/// names of the shards `touched` (each held for writing by the caller):
/// above the newest sequence of each, which each then records. Returns the
/// first.
pub fn take_seqs(touched: &mut [&mut DirShard], n: u64) -> u64 {
    let first = touched.iter().map(|s| s.seq).max().unwrap_or(0) + 1;
    for s in touched.iter_mut() {
        s.seq = first + n - 1;
    }
    first
}

/// Write guards on every shard of a directory, in index order.
pub type AllShardsMut<'a> = Vec<RwLockWriteGuard<'a, DirShard>>;

/// Read guards on every shard of a directory, in index order.
pub type AllShards<'a> = Vec<RwLockReadGuard<'a, DirShard>>;

/// Identities of directories' DRAM states ([`DirShard::owner`]).
static NEXT_DIR_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// DRAM state of a directory.
#[derive(Debug)]
pub struct DirData {
    /// The shards' locks, each on its own line: held for writing by every
    /// change of the shard's names (and of its counts); for reading by
    /// whole-directory readers (readdir, the emptiness check), never by a
    /// name lookup.
    shards: Box<[CachePadded<RwLock<DirShard>>]>,
    /// The shards' names (by [`DirData::shard_of`]): changed under the
    /// shard's lock held for writing, read by lookups without it. Apart
    /// from the locks, whose lines every change writes: a lookup reads a
    /// line that only a table's growth or shrinking writes.
    names: Box<[NameTable]>,
    /// This state's identity ([`DirShard::owner`]).
    id: u64,
    /// Set (with every shard held) when the directory is removed: no name
    /// may be added afterwards.
    removed: AtomicBool,
    /// The log's first sub-log slot ([`crate::log::InodeLog::new_in`]).
    pub(crate) first_slot: crate::log::SubLogSlot,
}

impl Default for DirData {
    fn default() -> Self {
        Self::with_shards(default_shards())
    }
}

/// Shards per directory: a few per CPU, so two threads rarely meet in one
/// (at least 16: two threads on 8 shards met in one every eighth
/// operation, and the loser parked), at most 32 (a directory's shards
/// cost 136 bytes each).
pub(crate) fn default_shards() -> usize {
    (crate::topology::Topology::system().cpu_count() * 4)
        .next_power_of_two()
        .clamp(16, 32)
}

impl DirData {
    /// An empty directory with `n` shards (a power of two).
    pub fn with_shards(n: usize) -> Self {
        assert!(n.is_power_of_two(), "shards per directory: a power of two");
        let id = NEXT_DIR_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        DirData {
            shards: (0..n)
                .map(|index| {
                    CachePadded::new(RwLock::new(DirShard {
                        live: 0,
                        log_entries: 0,
                        seq: 0,
                        owner: id,
                        index,
                    }))
                })
                .collect(),
            names: (0..n).map(|_| NameTable::default()).collect(),
            id,
            removed: AtomicBool::new(false),
            first_slot: crate::log::SubLogSlot::empty(),
        }
    }

    /// Load a recovered state (mount; nothing else holds the directory).
    pub fn load(&self, st: &DirState) {
        let mut all = self.write_all();
        for (name, c) in &st.entries {
            self.insert(&mut all[self.shard_of(name)], name, *c);
        }
        // Dead entries count against the first shard (the next compaction
        // of any shard resets every shard's count).
        let live = st.entries.len() as u64;
        for s in all.iter_mut() {
            s.log_entries = s.live;
        }
        all[0].log_entries += st.log_entries.saturating_sub(live);
        for s in all.iter_mut() {
            s.seq = st.seq;
        }
    }

    /// Which shard holds `name` (FNV-1a of the name).
    pub fn shard_of(&self, name: &[u8]) -> usize {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for &b in name {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        ((h ^ (h >> 32)) as usize) & (self.shards.len() - 1)
    }

    /// Shard `i` (see [`DirData::shard_of`]).
    pub fn shard(&self, i: usize) -> &RwLock<DirShard> {
        &self.shards[i]
    }

    /// What `name` names now, read without a lock: nothing shared is
    /// written, whatever else runs in the directory.
    pub fn get(&self, name: &[u8], guard: &NameGuard) -> Option<Child> {
        self.names[self.shard_of(name)].get(name, hash_name(name), guard)
    }

    /// The shard `st` (write-locked by the caller) after checking that it
    /// is this directory's shard of `name`, and the name's hash.
    fn held(&self, st: &DirShard, name: &[u8]) -> (&NameTable, u64) {
        let (h, i) = (hash_name(name), self.shard_of(name));
        assert!(
            st.owner == self.id && st.index == i,
            "a name changed under another shard's lock"
        );
        (&self.names[i], h)
    }

    /// Make `name` name `child` in shard `st` (the name's shard, held for
    /// writing); returns what it named before.
    pub fn insert(&self, st: &mut DirShard, name: &[u8], child: Child) -> Option<Child> {
        let (names, h) = self.held(st, name);
        // SAFETY: `st` lives in this directory's shard of `name` (checked
        // by `held`) and is borrowed mutably, so that shard's write lock
        // is held: no other thread changes its table.
        let old = unsafe { names.insert(name, h, child, st.live as usize) };
        if old.is_none() {
            st.live += 1;
        }
        old
    }

    /// Forget `name` in shard `st` (the name's shard, held for writing);
    /// returns what it named.
    pub fn remove(&self, st: &mut DirShard, name: &[u8]) -> Option<Child> {
        let (names, h) = self.held(st, name);
        // SAFETY: as in `insert`.
        let old = unsafe { names.remove(name, h, st.live as usize) };
        if old.is_some() {
            st.live -= 1;
        }
        old
    }

    /// Every shard for writing, in index order.
    pub fn write_all(&self) -> AllShardsMut<'_> {
        self.shards.iter().map(|s| s.write()).collect()
    }

    /// Every shard for reading, in index order.
    pub fn read_all(&self) -> AllShards<'_> {
        self.shards.iter().map(|s| s.read()).collect()
    }

    /// Every name and what it names, in no order, while the caller holds
    /// every shard (`_all`, for reading or writing).
    pub fn for_each<G: std::ops::Deref<Target = DirShard>>(
        &self,
        all: &[G],
        mut f: impl FnMut(&[u8], Child),
    ) {
        for (t, g) in self.names.iter().zip(all) {
            assert!(g.owner == self.id, "another directory's shards");
            // SAFETY: `g` guards this table's shard lock (checked above),
            // held for reading at least: no writer changes the table.
            unsafe { t.for_each(&mut f) };
        }
    }

    /// Live names (takes every shard in turn).
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.read().live as usize).sum()
    }

    /// Every name, sorted, from one consistent snapshot.
    pub fn snapshot(&self) -> BTreeMap<Vec<u8>, Child> {
        let all = self.read_all();
        let mut out = BTreeMap::new();
        self.for_each(&all, |name, c| {
            out.insert(name.to_vec(), c);
        });
        out
    }

    /// The newest sequence of every shard (compaction, with every shard
    /// held): the log's rewrite takes sequences above it.
    pub fn seq(all: &AllShardsMut<'_>) -> u64 {
        all.iter().map(|s| s.seq).max().unwrap_or(0)
    }

    /// Give every shard `seq` as its newest sequence (compaction, with
    /// every shard held; `seq` at least [`DirData::seq`]).
    pub fn set_seq(all: &mut AllShardsMut<'_>, seq: u64) {
        for s in all.iter_mut() {
            s.seq = seq;
        }
    }

    /// Whether the directory was removed (read under a shard lock, it
    /// stays true or false until that lock is dropped).
    pub fn removed(&self) -> bool {
        self.removed.load(Ordering::Acquire)
    }

    /// Mark the directory removed; the caller holds every shard (for
    /// reading at least), so no add is in progress.
    pub fn mark_removed(&self, _all: &AllShards<'_>) {
        self.removed.store(true, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_touching_two_shards_is_sequenced_after_both() {
        let (mut a, mut b) = (DirShard::detached(), DirShard::detached());
        assert_eq!(take_seqs(&mut [&mut a], 1), 1);
        assert_eq!(take_seqs(&mut [&mut a], 1), 2);
        // Another shard's names need not wait for this one's sequence.
        assert_eq!(take_seqs(&mut [&mut b], 1), 1);
        // A rename from a name of `b` to one of `a`: after both histories,
        // and each shard's next entry after it.
        assert_eq!(take_seqs(&mut [&mut b, &mut a], 2), 3);
        assert_eq!(take_seqs(&mut [&mut b], 1), 5);
        assert_eq!(take_seqs(&mut [&mut a], 1), 5);
    }

    #[test]
    fn a_loaded_directory_sequences_above_every_recovered_entry() {
        let d = DirData::with_shards(8);
        d.load(&DirState {
            seq: 41,
            ..Default::default()
        });
        let mut all = d.write_all();
        assert_eq!(DirData::seq(&all), 41);
        assert!(all.iter_mut().all(|s| take_seqs(&mut [&mut **s], 1) == 42));
    }
}
