//! The names of one directory shard, readable without a lock.
//!
//! Every path walk looks its components up, and many threads walk through
//! the same directories (the root, a shared directory): a lookup that took
//! the shard's reader lock wrote the lock word, one cache line every
//! walker shared. A [`NameTable`] is a chained hash table whose lookups
//! write nothing shared: they load the bucket array and follow the chain
//! under a guard of one process-wide reclamation scheme (seize), which
//! only announces the thread in a slot of its own.
//!
//! Writers are serialised by the shard's write lock (one writer per table,
//! the caller's duty, which [`super::DirData`] checks). Every change is one
//! pointer store that readers see whole:
//! - a new name is a new node pushed at the head of its chain;
//! - a name that names something else is a new node that takes the old
//!   node's place (the same successor), so a reader sees the old or the new
//!   target, never no name;
//! - a removed name's predecessor skips it; a reader standing on the
//!   removed node still follows its successor.
//! - growing or shrinking copies every node into a fresh bucket array and
//!   publishes it with one store; readers of the old array see it as it was.
//!
//! Unlinked nodes and old arrays are retired to the reclamation scheme and
//! freed once no guard taken before the retirement is held, so a reader
//! never follows a freed pointer.
//!
//! Why not `papaya` (the inode table's map): a directory has 16 to 32
//! shards, each with its own table, and a file system has many small
//! directories. A `papaya::HashMap` owns its reclamation collector (the
//! builder takes one by value; maps cannot share one), and an empty map
//! with its collector takes 17.7 KiB of heap (18.2 KiB holding one name;
//! measured with a counting allocator over 1,000 maps, papaya 0.2.5): 280
//! KiB or more per empty directory. A [`NameTable`] is one pointer, null
//! until the shard holds a name, and all tables share one collector.

use crate::layout::FileKind;
use crate::sync::{AtomicPtr, Ordering};
use std::hash::{BuildHasher, Hasher};
use std::sync::LazyLock;

/// One name in a directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Child {
    /// Inode number.
    pub ino: u64,
    /// Inode generation.
    pub generation: u32,
    /// Inode kind.
    pub kind: FileKind,
}

/// A name in a live directory: up to 16 bytes held in the map's own node
/// (most names are short), longer ones on the heap.
pub type Name = smallvec::SmallVec<[u8; 16]>;

/// The hash that files a name in its shard's table. Keyed (SipHash, a key
/// per process), so that names chosen to collide cannot make the chains
/// long. (The shard itself is chosen by an unkeyed hash,
/// [`super::dir_data::DirData::shard_of`], so that which names share a shard, and with it
/// when a directory's log is compacted, is the same in every run.)
pub fn hash_name(name: &[u8]) -> u64 {
    static KEY: LazyLock<std::hash::RandomState> = LazyLock::new(std::hash::RandomState::new);
    // The bytes alone (no length prefix: one name per hash, nothing to
    // tell apart from a concatenation), a block fewer for short names.
    let mut h = KEY.build_hasher();
    h.write(name);
    h.finish()
}

/// Objects the name tables retire per batch before a reclamation pass (a
/// pass costs a process-wide memory barrier, an interrupt to every CPU
/// running the process; see the inode table's). A batch holds up to this
/// many removed names (about 64 bytes each) per thread.
const RETIRE_BATCH: usize = 1024;

/// The reclamation scheme of every name table in the process (one, so that
/// a lookup takes one guard whatever directory it reads, and a table owns
/// no per-thread state).
static COLLECTOR: LazyLock<seize::Collector> =
    LazyLock::new(|| seize::Collector::new().batch_size(RETIRE_BATCH));

/// A guard under which name lookups read the tables.
pub struct NameGuard {
    _entered: seize::LocalGuard<'static>,
}

impl NameGuard {
    /// Enter: what is retired from now on stays readable until the guard
    /// is dropped.
    pub fn new() -> Self {
        NameGuard {
            _entered: COLLECTOR.enter(),
        }
    }
}

impl Default for NameGuard {
    fn default() -> Self {
        Self::new()
    }
}

/// One name.
struct Node {
    name: Name,
    child: Child,
    /// The next node of the chain, or null.
    next: AtomicPtr<Node>,
}

/// A bucket array: a power of two of chain heads.
struct Table {
    heads: Box<[AtomicPtr<Node>]>,
}

impl Table {
    fn new(len: usize) -> Box<Table> {
        debug_assert!(len.is_power_of_two());
        Box::new(Table {
            heads: (0..len)
                .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                .collect(),
        })
    }

    fn head(&self, hash: u64) -> &AtomicPtr<Node> {
        &self.heads[(hash as usize) & (self.heads.len() - 1)]
    }
}

/// Free a table and every node still on its chains: the table is
/// unreachable for readers that enter after it was unpublished, and its
/// chains no longer change (nodes unlinked before were retired on their
/// own, and are no longer on any chain).
///
/// # Safety
/// `t` came from `Box::into_raw` of a [`Table`] whose nodes came from
/// `Box::into_raw` of [`Node`]s, and nothing reads them any more.
unsafe fn free_table(t: *mut Table, _: &seize::Collector) {
    // SAFETY: the caller hands the table over (the contract above).
    let t = unsafe { Box::from_raw(t) };
    for head in t.heads.iter() {
        let mut p = head.load(Ordering::Relaxed);
        while !p.is_null() {
            // SAFETY: a node on a chain of a table being freed is owned by
            // it alone (the contract above).
            let node = unsafe { Box::from_raw(p) };
            p = node.next.load(Ordering::Relaxed);
        }
    }
}

/// Free one unlinked node.
///
/// # Safety
/// As [`seize::reclaim::boxed`]: `n` came from `Box::into_raw`.
unsafe fn free_node(n: *mut Node, c: &seize::Collector) {
    // SAFETY: the caller's contract.
    unsafe { seize::reclaim::boxed(n, c) }
}

/// The names of one shard: lock-free lookups, one writer at a time.
pub struct NameTable {
    /// The bucket array, or null while the table never held a name.
    table: AtomicPtr<Table>,
}

impl std::fmt::Debug for NameTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NameTable").finish_non_exhaustive()
    }
}

/// Chains per name a table keeps at least (it grows when it holds more
/// names than chains, and shrinks when it holds under a quarter).
const MIN_CHAINS: usize = 4;

impl Default for NameTable {
    fn default() -> Self {
        NameTable {
            table: AtomicPtr::new(std::ptr::null_mut()),
        }
    }
}

impl NameTable {
    /// What `name` (of hash `hash`) names. Writes nothing shared.
    pub fn get(&self, name: &[u8], hash: u64, _guard: &NameGuard) -> Option<Child> {
        // Loads of what may be retired: the ordering seize asks for.
        let t = self.table.load(Ordering::SeqCst);
        if t.is_null() {
            return None;
        }
        // SAFETY: `t` was published with a release store after it was
        // filled; it is freed only after every guard that could have
        // loaded it (such as `_guard`) is dropped.
        let mut p = unsafe { &*t }.head(hash).load(Ordering::SeqCst);
        while !p.is_null() {
            // SAFETY: as the table: a node reached from a published table
            // or node is retired, never freed, while `_guard` is held.
            let n = unsafe { &*p };
            if n.name.as_slice() == name {
                return Some(n.child);
            }
            p = n.next.load(Ordering::SeqCst);
        }
        None
    }

    /// Make `name` name `child`; returns what it named before.
    ///
    /// # Safety
    /// No other thread changes this table meanwhile (the caller holds the
    /// shard's write lock); `live` is the number of names it holds.
    pub unsafe fn insert(
        &self,
        name: &[u8],
        hash: u64,
        child: Child,
        live: usize,
    ) -> Option<Child> {
        let mut t = self.table.load(Ordering::Relaxed);
        if t.is_null() {
            t = Box::into_raw(Table::new(MIN_CHAINS));
            self.table.store(t, Ordering::Release);
        }
        // SAFETY: only this writer replaces or frees the table.
        let table = unsafe { &*t };
        let head = table.head(hash);
        let (link, old) = find(head, name);
        let new = Box::into_raw(Box::new(Node {
            name: Name::from_slice(name),
            child,
            next: AtomicPtr::new(std::ptr::null_mut()),
        }));
        if old.is_null() {
            // SAFETY: `new` is not published yet: this thread owns it.
            unsafe { &*new }
                .next
                .store(head.load(Ordering::Relaxed), Ordering::Relaxed);
            head.store(new, Ordering::Release);
            if live + 1 > table.heads.len() {
                // SAFETY: the caller's contract (one writer).
                unsafe { self.resize((live + 1).next_power_of_two() * 2) };
            }
            return None;
        }
        // SAFETY: `old` is on a chain of the table and only this writer
        // unlinks or frees nodes.
        let was = unsafe { &*old };
        // SAFETY: `new` is not published yet: this thread owns it.
        unsafe { &*new }
            .next
            .store(was.next.load(Ordering::Relaxed), Ordering::Relaxed);
        link.store(new, Ordering::Release);
        let child_was = was.child;
        // SAFETY: `old` is unlinked: readers that enter from now on cannot
        // reach it; earlier ones hold guards that keep it.
        unsafe { COLLECTOR.retire(old, free_node) };
        Some(child_was)
    }

    /// Forget `name`; returns what it named.
    ///
    /// # Safety
    /// As [`NameTable::insert`].
    pub unsafe fn remove(&self, name: &[u8], hash: u64, live: usize) -> Option<Child> {
        let t = self.table.load(Ordering::Relaxed);
        if t.is_null() {
            return None;
        }
        // SAFETY: only this writer replaces or frees the table.
        let table = unsafe { &*t };
        let (link, old) = find(table.head(hash), name);
        if old.is_null() {
            return None;
        }
        // SAFETY: `old` is on a chain and only this writer unlinks nodes.
        let was = unsafe { &*old };
        link.store(was.next.load(Ordering::Relaxed), Ordering::Release);
        let child = was.child;
        // SAFETY: unlinked above (see `insert`).
        unsafe { COLLECTOR.retire(old, free_node) };
        let left = live.saturating_sub(1);
        if table.heads.len() > MIN_CHAINS && left * 4 < table.heads.len() {
            // SAFETY: the caller's contract (one writer).
            unsafe { self.resize((left.max(1)).next_power_of_two() * 2) };
        }
        Some(child)
    }

    /// Copy every name into a bucket array of `len` chains (at least
    /// [`MIN_CHAINS`]) and publish it.
    ///
    /// # Safety
    /// As [`NameTable::insert`].
    unsafe fn resize(&self, len: usize) {
        let old = self.table.load(Ordering::Relaxed);
        let new = Table::new(len.max(MIN_CHAINS));
        // SAFETY: only this writer replaces or frees the table.
        for head in unsafe { &*old }.heads.iter() {
            let mut p = head.load(Ordering::Relaxed);
            while !p.is_null() {
                // SAFETY: a node on a chain (only this writer frees nodes).
                let n = unsafe { &*p };
                let h = new.head(hash_of_node(n));
                let copy = Box::into_raw(Box::new(Node {
                    name: n.name.clone(),
                    child: n.child,
                    next: AtomicPtr::new(h.load(Ordering::Relaxed)),
                }));
                h.store(copy, Ordering::Relaxed);
                p = n.next.load(Ordering::Relaxed);
            }
        }
        self.table.store(Box::into_raw(new), Ordering::Release);
        // SAFETY: unpublished above; its chains no longer change.
        unsafe { COLLECTOR.retire(old, free_table) };
    }

    /// Every name and what it names, in no order.
    ///
    /// # Safety
    /// No thread changes the table meanwhile (the caller holds the shard's
    /// lock, for reading at least).
    pub unsafe fn for_each(&self, mut f: impl FnMut(&[u8], Child)) {
        let t = self.table.load(Ordering::Acquire);
        if t.is_null() {
            return;
        }
        // SAFETY: the table and its nodes do not change or go away while
        // the caller's lock excludes writers.
        for head in unsafe { &*t }.heads.iter() {
            let mut p = head.load(Ordering::Acquire);
            while !p.is_null() {
                // SAFETY: as the table.
                let n = unsafe { &*p };
                f(&n.name, n.child);
                p = n.next.load(Ordering::Acquire);
            }
        }
    }
}

/// The hash a node's name was filed under.
fn hash_of_node(n: &Node) -> u64 {
    hash_name(&n.name)
}

/// The link that points at `name`'s node in the chain from `head`, and
/// the node (null, with the last link, when the name is absent).
fn find<'a>(head: &'a AtomicPtr<Node>, name: &[u8]) -> (&'a AtomicPtr<Node>, *mut Node) {
    let mut link = head;
    loop {
        let p = link.load(Ordering::Relaxed);
        if p.is_null() {
            return (link, p);
        }
        // SAFETY: the caller is the table's one writer: a node on a chain
        // is neither unlinked nor freed while it runs.
        let n = unsafe { &*p };
        if n.name.as_slice() == name {
            return (link, p);
        }
        link = &n.next;
    }
}

impl Drop for NameTable {
    fn drop(&mut self) {
        let t = self.table.load(Ordering::Relaxed);
        if !t.is_null() {
            // SAFETY: `&mut self`: no reader is inside this table (a lookup
            // borrows the directory, which outlives it); earlier readers'
            // guards may still see the array, so it goes through the
            // reclamation scheme like any retired one.
            unsafe { COLLECTOR.retire(t, free_table) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::hash_name;
    use super::*;
    use crate::layout::FileKind;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;

    fn child(ino: u64) -> Child {
        Child {
            ino,
            generation: 1,
            kind: FileKind::File,
        }
    }

    /// The table's writer side, as one writer uses it (the shard lock's
    /// job is done by `&mut self`).
    #[derive(Default)]
    struct Writer {
        t: NameTable,
        live: usize,
    }

    impl Writer {
        fn insert(&mut self, name: &[u8], c: Child) -> Option<Child> {
            // SAFETY: `&mut self`: the one writer.
            let old = unsafe { self.t.insert(name, hash_name(name), c, self.live) };
            self.live += usize::from(old.is_none());
            old
        }
        fn remove(&mut self, name: &[u8]) -> Option<Child> {
            // SAFETY: `&mut self`: the one writer.
            let old = unsafe { self.t.remove(name, hash_name(name), self.live) };
            self.live -= usize::from(old.is_some());
            old
        }
        fn get(&self, name: &[u8]) -> Option<Child> {
            self.t.get(name, hash_name(name), &NameGuard::new())
        }
        fn all(&self) -> BTreeMap<Vec<u8>, Child> {
            let mut m = BTreeMap::new();
            // SAFETY: `&self`: no writer meanwhile.
            unsafe {
                self.t
                    .for_each(|n, c| assert!(m.insert(n.to_vec(), c).is_none()))
            };
            m
        }
    }

    #[test]
    fn inserts_replaces_and_removes_agree_with_a_map_through_growth_and_shrinking() {
        let mut w = Writer::default();
        let mut model = BTreeMap::new();
        let mut rng = StdRng::seed_from_u64(1);
        for i in 0..20_000u64 {
            let x = rng.next_u64();
            // Grow to ~600 names, then shrink back to a few, twice.
            let phase = (i / 5_000) % 2 == 0;
            let name = format!("name-{}-with-a-longer-tail", x % 700).into_bytes();
            if phase != x.is_multiple_of(4) {
                assert_eq!(
                    w.insert(&name, child(i)),
                    model.insert(name.clone(), child(i))
                );
            } else {
                assert_eq!(w.remove(&name), model.remove(&name));
            }
            assert_eq!(w.get(&name), model.get(&name).copied());
            assert_eq!(w.live, model.len());
        }
        assert_eq!(w.all(), model);
        for name in model.keys() {
            assert!(w.remove(name).is_some());
        }
        assert!(w.all().is_empty());
        assert_eq!(w.get(b"name-1-with-a-longer-tail"), None);
    }

    /// Readers on other threads, lock-free, while writers serialised by a
    /// mutex (the shard lock's part) replace, churn and resize: a name that
    /// stays is always found, with one of the values it had.
    #[test]
    fn concurrent_readers_always_find_the_names_that_stay() {
        use std::sync::atomic::{AtomicBool, Ordering as O};
        let t = NameTable::default();
        // The writers' lock, and the live count it guards.
        let live = std::sync::Mutex::new(0usize);
        let put = |name: &str, c: Child| {
            let mut n = live.lock().unwrap();
            // SAFETY: `live`'s mutex is held: one writer.
            if unsafe { t.insert(name.as_bytes(), hash_name(name.as_bytes()), c, *n) }.is_none() {
                *n += 1;
            }
        };
        let del = |name: &str| {
            let mut n = live.lock().unwrap();
            // SAFETY: as `put`.
            if unsafe { t.remove(name.as_bytes(), hash_name(name.as_bytes()), *n) }.is_some() {
                *n -= 1;
            }
        };
        for k in 0..8u64 {
            put(&format!("stay{k}"), child(k));
        }
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    while !stop.load(O::Acquire) {
                        for k in 0..8u64 {
                            let n = format!("stay{k}");
                            let c = t.get(n.as_bytes(), hash_name(n.as_bytes()), &NameGuard::new());
                            assert_eq!(c.map(|c| c.ino % 8), Some(k), "{n} missing");
                        }
                    }
                });
            }
            let churn = |lo: u64| {
                for round in 0..20u64 {
                    for i in lo..lo + 300 {
                        put(&format!("churn{i}"), child(i));
                        let k = i % 8;
                        put(&format!("stay{k}"), child(k + 8 * (round + 1)));
                    }
                    for i in lo..lo + 300 {
                        del(&format!("churn{i}"));
                    }
                }
            };
            let other = s.spawn(move || churn(1000));
            churn(0);
            other.join().unwrap();
            stop.store(true, O::Release);
        });
        assert_eq!(*live.lock().unwrap(), 8);
    }
}
