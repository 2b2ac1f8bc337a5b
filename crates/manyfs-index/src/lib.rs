//! The DRAM file index: file page -> (data block, log entry, version).
//!
//! Three trees can hold it, chosen per mount ([`IndexKind`], manyfs's
//! `MountOptions::index`, `-o index=`):
//!
//! - `cas` (the product): [`radix::CasRadix`], structure changes (new nodes)
//!   are lock-free CAS installs and lookups write nothing shared;
//! - `rw`: [`rw::RwRadix`], nCACHE's reader-writer lock per node with
//!   double-checked insertion (a baseline);
//! - `cascade`: [`cascade::CascadeRadix`], F2FS's mutex per node taken
//!   hand-over-hand from the root (a baseline).
//!
//! [`PageIndex`] is the trees' common interface, [`SerialProbe`] a hook to
//! time the sections of the locked trees that exclude other threads, and
//! [`FileIndex`] the index of one file built on them (its pages'
//! [`PageSlot`]s, read and written as [`PageMapping`]s).
//!
//! ```
//! use manyfs_index::radix::CasRadix;
//! use manyfs_index::{FileIndex, IndexKind, PageIndex, PageMapping};
//! use std::sync::atomic::{AtomicU64, Ordering};
//!
//! let tree: CasRadix<AtomicU64> = CasRadix::new();
//! assert!(tree.get(42).is_none(), "lookups create nothing");
//! tree.get_or_insert(42).store(7, Ordering::Relaxed);
//! assert_eq!(PageIndex::get(&tree, 42).unwrap().load(Ordering::Relaxed), 7);
//!
//! let file = FileIndex::new("rw".parse::<IndexKind>()?);
//! let m = PageMapping { block: 9, entry: 1, version: 1 };
//! file.slot(3).set(m);
//! assert_eq!(file.lookup(3), m);
//! assert_eq!(file.mapped(), vec![(3, m)]);
//! # Ok::<(), manyfs_index::ParseIndexKindError>(())
//! ```
//!
//! # Concurrency guarantees
//!
//! - Every tree is safe to share between threads: values for keys below
//!   [`KEY_LIMIT`] are created on demand, exactly once per key however many
//!   threads race to insert it, and never moved or freed before the tree is
//!   dropped, so a `&T` stays valid as long as the tree.
//! - Lookups never create anything; with `cas` they take no lock and write
//!   nothing shared.
//! - The values themselves are not synchronised by the tree: a file's
//!   [`PageSlot`] is read and written only by threads holding the page's
//!   range in the file's range lock (write access to change it), so with
//!   `cas` lookups of different ranges share no mutex and no written cache
//!   line except where two pages' slots happen to share one.
//!
//! # Model checking
//!
//! With `--features shuttle` the atomics and node locks come from shuttle
//! (through manyfs-sync), and `cargo test -p manyfs-index --features
//! shuttle --lib shuttle_models` runs the real CAS installation,
//! double-checked insertion and hand-over-hand locking under thousands of
//! random and PCT schedules, including a planted bug (an `rw` insertion
//! without its second check) the model must catch.

#![deny(missing_docs)]

pub mod cascade;
mod locked;
pub mod radix;
pub mod rw;
#[cfg(all(test, feature = "shuttle"))]
mod shuttle_models;

use cascade::CascadeRadix;
use manyfs_sync::{AtomicU64, Ordering};
use radix::CasRadix;
pub use radix::KEY_LIMIT;
use rw::RwRadix;

/// Which tree holds the file index (`MountOptions::index`, `-o index=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum IndexKind {
    /// Lock-free radix, nodes installed by compare-and-swap (the default).
    #[default]
    Cas,
    /// nCACHE: a reader-writer lock per node, double-checked insertion.
    Rw,
    /// F2FS: a mutex per node, taken hand-over-hand from the root.
    Cascade,
}

impl IndexKind {
    /// Every kind, in the order benchmarks report them.
    pub const ALL: [IndexKind; 3] = [IndexKind::Cas, IndexKind::Rw, IndexKind::Cascade];

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            IndexKind::Cas => "cas",
            IndexKind::Rw => "rw",
            IndexKind::Cascade => "cascade",
        }
    }
}

/// A name that is not an [`IndexKind`]'s (see [`IndexKind::name`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("index kind {0:?} (expected cas, rw or cascade)")]
pub struct ParseIndexKindError(String);

impl ParseIndexKindError {
    /// The name that was not recognised.
    pub fn input(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for IndexKind {
    type Err = ParseIndexKindError;
    fn from_str(s: &str) -> Result<Self, ParseIndexKindError> {
        IndexKind::ALL
            .into_iter()
            .find(|k| k.name() == s.trim())
            .ok_or_else(|| ParseIndexKindError(s.to_string()))
    }
}

impl std::fmt::Display for IndexKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What every index tree offers: values for keys below [`KEY_LIMIT`], created on demand and never moved or freed
/// before the tree is dropped.
pub trait PageIndex<T>: Send + Sync {
    /// The value for `key` if its leaf exists (nothing is created).
    fn get(&self, key: u64) -> Option<&T>;
    /// The value for `key`, creating its leaf (and path) if needed.
    fn get_or_insert(&self, key: u64) -> &T;
    /// Every existing value with its key, in key order. `f` must not call
    /// into the tree (the locked trees hold node locks meanwhile).
    fn for_each(&self, f: &mut dyn FnMut(u64, &T));
    /// DRAM used by the tree's nodes.
    fn memory_bytes(&self) -> usize;
}

impl<T: Default + Send + Sync> PageIndex<T> for CasRadix<T> {
    fn get(&self, key: u64) -> Option<&T> {
        CasRadix::get(self, key)
    }
    fn get_or_insert(&self, key: u64) -> &T {
        CasRadix::get_or_insert(self, key)
    }
    fn for_each(&self, f: &mut dyn FnMut(u64, &T)) {
        CasRadix::for_each(self, f)
    }
    fn memory_bytes(&self) -> usize {
        CasRadix::memory_bytes(self)
    }
}

/// Hooks around the sections of a locked tree's operation that exclude
/// other threads on disjoint keys: the write-locked insertion of
/// [`rw::RwRadix`], the hold of the root's mutex in
/// [`cascade::CascadeRadix`]. `manyfs bench` sums their length per
/// operation (the serial time of Amdahl's law); the file index uses
/// [`NoProbe`], which compiles to nothing.
pub trait SerialProbe {
    /// Carried from [`SerialProbe::enter`] to [`SerialProbe::exit`].
    type Token;
    /// The calling thread starts holding something exclusive.
    fn enter() -> Self::Token;
    /// The calling thread released it.
    fn exit(token: Self::Token);
}

/// The probe that measures nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoProbe;

impl SerialProbe for NoProbe {
    type Token = ();
    #[inline(always)]
    fn enter() {}
    #[inline(always)]
    fn exit(_: ()) {}
}

/// Where one file page lives: a [`PageMapping`] in atomics, so that the
/// slot can be shared; its holder's range lock orders the accesses.
#[derive(Debug, Default)]
pub struct PageSlot {
    block: AtomicU64,
    entry: AtomicU64,
    version: AtomicU64,
}

/// A snapshot of a [`PageSlot`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PageMapping {
    /// Data block (0 = hole).
    pub block: u64,
    /// Location of the log entry that committed it (manyfs's `EntryLoc`,
    /// opaque to the index).
    pub entry: u64,
    /// Version of the page: the highest version wins at recovery. Below
    /// 2^63 (it counts the page's writes; a slot keeps a note in the top
    /// bit).
    pub version: u64,
}

/// The top bit of a slot's `version` word: the holder's note that the
/// current mapping is settled (see [`PageSlot::mark_settled`]). Versions
/// count writes of one page and never come near it.
const SETTLED: u64 = 1 << 63;

impl PageSlot {
    /// Read the slot (caller holds the page's range).
    pub fn get(&self) -> PageMapping {
        PageMapping {
            block: self.block.load(Ordering::Relaxed),
            entry: self.entry.load(Ordering::Relaxed),
            version: self.version.load(Ordering::Relaxed) & !SETTLED,
        }
    }

    /// Replace the slot (caller holds the page's range for writing). The
    /// new mapping is not settled.
    pub fn set(&self, m: PageMapping) {
        debug_assert!(
            m.version < SETTLED,
            "page version {} out of range",
            m.version
        );
        self.block.store(m.block, Ordering::Relaxed);
        self.entry.store(m.entry, Ordering::Relaxed);
        self.version.store(m.version & !SETTLED, Ordering::Relaxed);
    }

    /// Note that the current mapping is settled: for manyfs, recovery will
    /// never verify its entry's checksum, so its block may be overwritten
    /// in place without asking the log again. The note lasts until the
    /// slot is next [`set`](Self::set) (caller holds the page's range for
    /// writing).
    pub fn mark_settled(&self) {
        self.version.fetch_or(SETTLED, Ordering::Relaxed);
    }

    /// Ask the CPU to start loading the slot's cache line, so that the miss
    /// overlaps the caller's next one (a writer's range-lock word) instead
    /// of following it: a locked instruction lets no later load start
    /// before it completes, but a prefetch issued before it runs on.
    #[inline]
    pub fn prefetch(&self) {
        // SAFETY: `_mm_prefetch` needs SSE, which every x86-64 CPU has (the
        // target's baseline). A prefetch is a hint: it reads nothing into
        // the program, cannot fault, and the address is a live reference.
        #[cfg(target_arch = "x86_64")]
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                (self as *const PageSlot).cast(),
            );
        }
    }

    /// Whether [`mark_settled`](Self::mark_settled) was called since the
    /// mapping was last set.
    pub fn is_settled(&self) -> bool {
        self.version.load(Ordering::Relaxed) & SETTLED != 0
    }
}

/// The index of one file. With `cas`, page 0 has its slot inline, so a
/// file of one page needs no tree node at all (most files are small); the
/// tree holds the other pages. The baselines keep every page in their
/// tree, as F2FS's node tree is rooted at the inode, whose lock every
/// mapping takes.
pub struct FileIndex {
    first: PageSlot,
    pages: Pages,
}

/// The tree of a [`FileIndex`]: one predictable branch per call selects it.
///
/// The locked trees keep their root node inline, so they are boxed: every
/// file's index stays two words whichever kind the mount uses (it shares a
/// cache line of `FileData` with the truncate lock).
enum Pages {
    Cas(CasRadix<PageSlot>),
    Rw(Box<RwRadix<PageSlot>>),
    Cascade(Box<CascadeRadix<PageSlot>>),
}

impl Default for FileIndex {
    fn default() -> Self {
        Self::new(IndexKind::default())
    }
}

impl FileIndex {
    /// An empty index held by a tree of `kind`.
    pub fn new(kind: IndexKind) -> Self {
        FileIndex {
            first: PageSlot::default(),
            pages: match kind {
                IndexKind::Cas => Pages::Cas(CasRadix::new()),
                IndexKind::Rw => Pages::Rw(Box::default()),
                IndexKind::Cascade => Pages::Cascade(Box::default()),
            },
        }
    }

    /// The kind of tree that holds this index.
    pub fn kind(&self) -> IndexKind {
        match self.pages {
            Pages::Cas(_) => IndexKind::Cas,
            Pages::Rw(_) => IndexKind::Rw,
            Pages::Cascade(_) => IndexKind::Cascade,
        }
    }

    /// The mapping of page `pgoff` (a hole if never written).
    #[inline]
    pub fn lookup(&self, pgoff: u64) -> PageMapping {
        let slot = match &self.pages {
            Pages::Cas(t) => {
                if pgoff == 0 {
                    return self.first.get();
                }
                t.get(pgoff)
            }
            Pages::Rw(t) => t.get(pgoff),
            Pages::Cascade(t) => t.get(pgoff),
        };
        slot.map(PageSlot::get).unwrap_or_default()
    }

    /// The slot of page `pgoff`, created if needed.
    #[inline]
    pub fn slot(&self, pgoff: u64) -> &PageSlot {
        match &self.pages {
            Pages::Cas(t) => {
                if pgoff == 0 {
                    return &self.first;
                }
                t.get_or_insert(pgoff)
            }
            Pages::Rw(t) => t.get_or_insert(pgoff),
            Pages::Cascade(t) => t.get_or_insert(pgoff),
        }
    }

    /// Every mapped page, in order.
    pub fn mapped(&self) -> Vec<(u64, PageMapping)> {
        let mut out = Vec::new();
        let first = self.first.get();
        if first.block != 0 {
            out.push((0, first));
        }
        let mut visit = |k: u64, s: &PageSlot| {
            let m = s.get();
            if m.block != 0 && (k != 0 || !matches!(self.pages, Pages::Cas(_))) {
                out.push((k, m));
            }
        };
        match &self.pages {
            Pages::Cas(t) => t.for_each(&mut visit),
            Pages::Rw(t) => t.for_each(&mut visit),
            Pages::Cascade(t) => t.for_each(&mut visit),
        }
        out
    }
}

#[cfg(all(test, not(feature = "shuttle")))]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn trees() -> Vec<(IndexKind, Box<dyn PageIndex<AtomicU64>>)> {
        vec![
            (IndexKind::Cas, Box::new(CasRadix::<AtomicU64>::new())),
            (IndexKind::Rw, Box::new(RwRadix::<AtomicU64>::new())),
            (
                IndexKind::Cascade,
                Box::new(CascadeRadix::<AtomicU64>::new()),
            ),
        ]
    }

    #[test]
    fn a_settled_note_lasts_until_the_slot_is_set_and_hides_from_the_mapping() {
        let index = FileIndex::new(IndexKind::Cas);
        for page in [0, 7] {
            let slot = index.slot(page);
            let m = PageMapping {
                block: 9,
                entry: 3,
                version: 2,
            };
            slot.set(m);
            assert!(!slot.is_settled());
            slot.mark_settled();
            assert!(slot.is_settled());
            // A prefetch changes nothing.
            slot.prefetch();
            assert!(slot.is_settled());
            // The note is not part of the mapping.
            assert_eq!(slot.get(), m);
            assert_eq!(index.lookup(page), m);
            // A new mapping, even with the same fields, is not settled.
            slot.set(PageMapping { version: 3, ..m });
            assert!(!slot.is_settled());
            assert_eq!(slot.get().version, 3);
            slot.mark_settled();
            slot.set(m);
            assert!(!slot.is_settled());
        }
    }

    #[test]
    fn kinds_parse_and_print() {
        for k in IndexKind::ALL {
            assert_eq!(k.to_string().parse::<IndexKind>().unwrap(), k);
            assert_eq!(FileIndex::new(k).kind(), k);
        }
        assert_eq!(IndexKind::default(), IndexKind::Cas);
        let e = "btree".parse::<IndexKind>().unwrap_err().to_string();
        assert!(e.contains("cas, rw or cascade"), "{e}");
    }

    #[test]
    fn every_tree_sparse_keys_and_bounded_memory() {
        for (kind, t) in trees() {
            assert!(t.get(5).is_none(), "{kind}");
            let empty = t.memory_bytes();
            assert!(
                empty <= 64,
                "{kind}: an unused tree allocates nothing ({empty})"
            );
            let keys = [0u64, 1, 63, 64, 4095, 1 << 20, KEY_LIMIT - 1];
            for k in keys {
                t.get_or_insert(k).store(k + 1, Ordering::Relaxed);
            }
            for k in keys {
                assert_eq!(t.get(k).unwrap().load(Ordering::Relaxed), k + 1, "{kind}");
            }
            assert_eq!(
                t.get(2).unwrap().load(Ordering::Relaxed),
                0,
                "{kind}: leaf of 1"
            );
            assert!(t.get(1 << 21).is_none(), "{kind}: lookups create nothing");
            let mut seen = vec![];
            t.for_each(&mut |k, v| {
                if v.load(Ordering::Relaxed) != 0 {
                    seen.push(k)
                }
            });
            assert_eq!(seen, keys, "{kind}");
            // Seven keys in five distinct leaves: a few KiB, never more
            // than one full path (4 nodes + leaf) per key.
            let path = 4 * (64 * 16 + 64) + 64 * 8;
            let used = t.memory_bytes();
            assert!(used > empty && used <= keys.len() * path, "{kind}: {used}");
            // Re-inserting makes nothing new.
            for k in keys {
                t.get_or_insert(k);
            }
            assert_eq!(t.memory_bytes(), used, "{kind}");
        }
    }

    #[test]
    fn every_tree_racing_inserts_share_one_node() {
        for (kind, t) in trees() {
            let t = &*t;
            std::thread::scope(|s| {
                for _ in 0..4 {
                    s.spawn(|| {
                        for k in 0..1500u64 {
                            t.get_or_insert(k * 37).fetch_add(1, Ordering::Relaxed);
                            let _ = t.get(k * 41);
                        }
                    });
                }
            });
            for k in 0..1500u64 {
                assert_eq!(t.get(k * 37).unwrap().load(Ordering::Relaxed), 4, "{kind}");
            }
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u64, PageMapping),
        Remove(u64),
        Lookup(u64),
    }

    fn page() -> impl Strategy<Value = u64> {
        prop_oneof![0u64..200, 0u64..KEY_LIMIT, Just(KEY_LIMIT - 1)]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (page(), 1u64..1 << 40, any::<u64>(), 0u64..SETTLED).prop_map(
                |(p, block, entry, version)| Op::Insert(
                    p,
                    PageMapping {
                        block,
                        entry,
                        version
                    }
                )
            ),
            page().prop_map(Op::Remove),
            page().prop_map(Op::Lookup),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Every index kind answers like a `BTreeMap` (a removed page is a
        /// hole, as truncate leaves it).
        #[test]
        fn file_index_matches_btreemap(ops in prop::collection::vec(op(), 1..120)) {
            for kind in IndexKind::ALL {
                let ix = FileIndex::new(kind);
                let mut model: BTreeMap<u64, PageMapping> = BTreeMap::new();
                for op in &ops {
                    match *op {
                        Op::Insert(p, m) => {
                            ix.slot(p).set(m);
                            model.insert(p, m);
                        }
                        Op::Remove(p) => {
                            if model.remove(&p).is_some() {
                                ix.slot(p).set(PageMapping::default());
                            }
                        }
                        Op::Lookup(p) => {
                            let want = model.get(&p).copied().unwrap_or_default();
                            prop_assert_eq!(ix.lookup(p), want, "{} page {}", kind, p);
                        }
                    }
                }
                let want: Vec<(u64, PageMapping)> = model.into_iter().collect();
                prop_assert_eq!(ix.mapped(), want, "{}", kind);
            }
        }
    }
}
