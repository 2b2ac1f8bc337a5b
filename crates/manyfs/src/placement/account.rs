//! Per-thread I/O accounting: what each thread read from each node, wrote,
//! and which files it touched, with no cache line shared between threads
//! on the I/O path.
//!
//! Each thread that does I/O on a mount gets one [`ThreadStats`], registered
//! once in the mount's registry, which the planner reads. Every line its
//! owner writes is its own by construction: the struct is [`CachePadded`]
//! (aligned to and a multiple of the padding), and the per-node counters
//! live in a slice of [`CachePadded`] lines, [`COUNTERS_PER_LINE`] to a
//! line, so no allocation of anyone else can share one of them. Only the
//! owning thread writes its counters (Relaxed atomics with a single
//! writer: a load and a store, no locked instructions); the planner only
//! loads them. When thread placement is off, [`Tracker::read`] and
//! [`Tracker::wrote`] cost one predictable branch.
//!
//! A thread that does I/O for another one (a FUSE daemon's worker serving
//! a request) accounts it to that thread with [`on_behalf_of`]: it then
//! owns a separate [`ThreadStats`] for each thread it serves, whose
//! [`ThreadStats::tid`] is the served thread's, so the single-writer rule
//! still holds; the planner adds up the stats of one thread id.

use super::affinity;
use crossbeam_utils::CachePadded;
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

/// Files remembered per thread and window (the first ones touched).
pub const FILES_PER_WINDOW: usize = 16;

/// Per-node counters on one padded line of a [`ThreadStats`].
pub const COUNTERS_PER_LINE: usize = 8;

/// Threads one thread keeps stats for on behalf of others, per mount: past
/// it, the stats registered first are dropped.
pub const SERVED_PER_THREAD: usize = 64;

/// One padded line of counters.
type Line = CachePadded<[AtomicU64; COUNTERS_PER_LINE]>;

/// One thread's counters on one mount, written by one thread only.
#[derive(Debug)]
pub struct ThreadStats {
    /// Kernel thread id of the thread accounted.
    pub tid: i32,
    /// When that thread started (`stat` field 22, clock ticks after boot),
    /// if it could be read: tells it from a later thread given the same id.
    pub start: Option<u64>,
    /// Whether another thread writes these counters on its behalf
    /// ([`on_behalf_of`]).
    #[cfg_attr(
        not(test),
        allow(dead_code, reason = "shown by the Debug output; tests check it")
    )]
    pub served: bool,
    /// The mask the thread declared its own with [`start_on`] before its
    /// first I/O on the mount, if it did.
    pub own_mask: Option<Box<[usize]>>,
    /// Nodes counted.
    nodes: usize,
    /// Bytes read from data on each node (counter `n`) and written to each
    /// node (counter `nodes + n`), since registration.
    lines: Box<[Line]>,
    /// The window the file set belongs to.
    files_window: AtomicU64,
    /// Files touched in `files_window` (0: empty slot).
    files: [AtomicU64; FILES_PER_WINDOW],
    /// Cleared when the thread that writes these counters stops writing
    /// them (it exited, or dropped them).
    alive: AtomicBool,
}

/// What the planner reads of one thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counters {
    /// Bytes read per node.
    pub read: Vec<u64>,
    /// Bytes written per node.
    pub written: Vec<u64>,
    /// Files touched in the window asked for.
    pub files: Vec<u64>,
}

impl ThreadStats {
    fn new(tid: i32, start: Option<u64>, served: bool, nodes: usize) -> ThreadStats {
        let lines = (2 * nodes).div_ceil(COUNTERS_PER_LINE);
        let own_mask = if served {
            None
        } else {
            OWN_MASK.try_with(|m| m.borrow().clone()).ok().flatten()
        };
        ThreadStats {
            tid,
            start,
            served,
            own_mask,
            nodes,
            lines: (0..lines)
                .map(|_| CachePadded::new(std::array::from_fn(|_| AtomicU64::new(0))))
                .collect(),
            files_window: AtomicU64::new(0),
            files: std::array::from_fn(|_| AtomicU64::new(0)),
            alive: AtomicBool::new(true),
        }
    }

    /// Counter `i` (reads of node `i`, or writes of node `i - nodes`).
    fn counter(&self, i: usize) -> &AtomicU64 {
        &self.lines[i / COUNTERS_PER_LINE][i % COUNTERS_PER_LINE]
    }

    /// Whether its writer still writes it.
    pub fn alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    /// Cumulative counters, and the files of window `window`.
    pub fn counters(&self, window: u64) -> Counters {
        let load = |from: usize| {
            (from..from + self.nodes)
                .map(|i| self.counter(i).load(Ordering::Relaxed))
                .collect()
        };
        let files = if self.files_window.load(Ordering::Acquire) == window {
            self.files
                .iter()
                .map(|f| f.load(Ordering::Relaxed))
                .filter(|&f| f != 0)
                .collect()
        } else {
            Vec::new()
        };
        Counters {
            read: load(0),
            written: load(self.nodes),
            files,
        }
    }

    /// Owner only: add `bytes` to `counter` (a load and a store: no other
    /// thread writes it).
    fn add(counter: &AtomicU64, bytes: u64) {
        counter.store(
            counter.load(Ordering::Relaxed).wrapping_add(bytes),
            Ordering::Relaxed,
        );
    }

    /// Owner only: note `ino` in the file set of `window`.
    fn touch(&self, ino: u64, window: u64) {
        if self.files_window.load(Ordering::Relaxed) != window {
            for f in &self.files {
                f.store(0, Ordering::Relaxed);
            }
            self.files_window.store(window, Ordering::Release);
        }
        for f in &self.files {
            match f.load(Ordering::Relaxed) {
                v if v == ino => return,
                0 => {
                    f.store(ino, Ordering::Relaxed);
                    return;
                }
                _ => {}
            }
        }
    }

    /// The 64-byte lines of every atomic the owner writes.
    #[cfg(test)]
    fn owner_lines(&self) -> Vec<usize> {
        let line = |a: &AtomicU64| a.as_ptr() as usize / 64;
        let mut v: Vec<usize> = (0..2 * self.nodes).map(|i| line(self.counter(i))).collect();
        v.push(line(&self.files_window));
        v.extend(self.files.iter().map(line));
        v.push(self.alive.as_ptr() as usize / 64);
        v.sort_unstable();
        v.dedup();
        v
    }
}

/// The block ranges of each node (a pool member's blocks are its node's).
#[derive(Debug, Clone, Default)]
pub struct NodeRanges {
    /// `(first block, node)`, ascending; a range ends where the next starts.
    starts: Box<[(u64, u32)]>,
}

impl NodeRanges {
    /// Ranges from `(first block, one past the last, node)` triples.
    pub fn new(mut ranges: Vec<(u64, u64, usize)>) -> NodeRanges {
        ranges.sort_by_key(|r| r.0);
        NodeRanges {
            starts: ranges.iter().map(|&(s, _, n)| (s, n as u32)).collect(),
        }
    }

    /// The node holding `block` (node 0 before the first range).
    pub fn node_of(&self, block: u64) -> usize {
        let i = self.starts.partition_point(|&(s, _)| s <= block);
        i.checked_sub(1).map_or(0, |i| self.starts[i].1 as usize)
    }
}

/// What a mount shares between its I/O paths and its planner.
#[derive(Debug)]
pub struct Registry {
    /// Identifies the mount in threads' local slots.
    id: u64,
    /// Nodes of the topology.
    nodes: usize,
    /// The current window (bumped by the planner: read-mostly).
    window: CachePadded<AtomicU64>,
    /// Every stats registered, in registration order.
    threads: parking_lot::Mutex<Vec<Arc<CachePadded<ThreadStats>>>>,
    ranges: NodeRanges,
}

impl Registry {
    /// The stats registered, in registration order (those no longer
    /// written are dropped from it). A thread served by several threads
    /// has one per server.
    pub fn threads(&self) -> Vec<Arc<CachePadded<ThreadStats>>> {
        let mut t = self.threads.lock();
        t.retain(|s| s.alive());
        t.clone()
    }

    /// The current window.
    pub fn window(&self) -> u64 {
        self.window.load(Ordering::Acquire)
    }

    /// Start the next window.
    pub fn next_window(&self) {
        self.window.fetch_add(1, Ordering::AcqRel);
    }

    /// Nodes accounted.
    pub fn nodes(&self) -> usize {
        self.nodes
    }

    /// The node of each block range.
    pub fn ranges(&self) -> &NodeRanges {
        &self.ranges
    }
}

/// A thread's stats for one mount and one thread it accounts for.
struct Slot {
    mount: u64,
    /// The thread served ([`on_behalf_of`]); 0: the slot's own thread.
    served: i32,
    /// The window a served thread's identity was last checked in.
    checked: u64,
    registry: Weak<Registry>,
    stats: Arc<CachePadded<ThreadStats>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.stats.alive.store(false, Ordering::Release);
    }
}

thread_local! {
    static SLOTS: RefCell<Vec<Slot>> = const { RefCell::new(Vec::new()) };
    /// Whom the calling thread's I/O is accounted to: 0 itself, a thread
    /// id another thread, -1 nobody.
    static SERVING: Cell<i32> = const { Cell::new(0) };
    /// The mask the thread declared its own ([`start_on`]).
    static OWN_MASK: RefCell<Option<Box<[usize]>>> = const { RefCell::new(None) };
}

/// Run the calling thread on CPU `cpu` alone for now, while thread
/// placement keeps taking the mask it had before the first such call as
/// its own: a move may take it to any CPU of that mask (a program that
/// places its threads to start with, as `manyfs bench` does, says so with
/// this instead of pinning them). Returns the error of reading or setting
/// the mask.
pub fn start_on(cpu: usize) -> crate::Result<()> {
    let mask = affinity::get(0)?;
    affinity::set(0, &[cpu])?;
    OWN_MASK.with(|m| {
        m.borrow_mut().get_or_insert_with(|| mask.into());
    });
    Ok(())
}

/// Account the file I/O the calling thread does in `f` to thread `caller`
/// instead of itself (a FUSE worker serving a request of `caller`), or to
/// nobody when `caller` is `None` or not a thread id (a request the kernel
/// makes on its own). Nests; the previous accounting is back when `f`
/// returns or unwinds.
pub fn on_behalf_of<R>(caller: Option<i32>, f: impl FnOnce() -> R) -> R {
    struct Restore(i32);
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = SERVING.try_with(|s| s.set(self.0));
        }
    }
    let who = caller.filter(|&t| t > 0).unwrap_or(-1);
    let _restore = Restore(SERVING.try_with(|s| s.replace(who)).unwrap_or(0));
    f()
}

/// The calling thread's kernel id.
pub fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::gettid() }
}

/// The I/O paths' end of the accounting (one per mount).
#[derive(Debug)]
pub struct Tracker {
    enabled: bool,
    registry: Arc<Registry>,
}

impl Tracker {
    /// A tracker over `nodes` nodes whose blocks lie in `ranges`; disabled
    /// ones only pay a branch per call.
    pub fn new(enabled: bool, nodes: usize, ranges: NodeRanges) -> Tracker {
        static MOUNTS: AtomicU64 = AtomicU64::new(1);
        Tracker {
            enabled,
            registry: Arc::new(Registry {
                id: MOUNTS.fetch_add(1, Ordering::Relaxed),
                nodes: nodes.max(1),
                window: CachePadded::new(AtomicU64::new(1)),
                threads: parking_lot::Mutex::new(Vec::new()),
                ranges,
            }),
        }
    }

    /// The registry the planner reads.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// The calling thread read `bytes` of file `ino` from `block` (0: a
    /// hole, which reads no node).
    #[inline]
    pub fn read(&self, ino: u64, block: u64, bytes: usize) {
        if self.enabled {
            self.account(ino, block, bytes, false);
        }
    }

    /// The calling thread wrote `bytes` of file `ino`, the first of them
    /// now in the block `first_block` returns (asked only when on).
    #[inline]
    pub fn wrote(&self, ino: u64, bytes: usize, first_block: impl FnOnce() -> u64) {
        if self.enabled {
            self.account(ino, first_block(), bytes, true);
        }
    }

    // Out of line: the hooks inline to a branch and a call.
    #[inline(never)]
    fn account(&self, ino: u64, block: u64, bytes: usize, write: bool) {
        let r = &self.registry;
        let node = r.ranges.node_of(block).min(r.nodes - 1);
        let window = r.window();
        self.with_stats(window, |s| {
            if block != 0 {
                let i = if write { s.nodes + node } else { node };
                ThreadStats::add(s.counter(i), bytes as u64);
            }
            s.touch(ino, window);
        });
    }

    /// Run `f` on the stats the calling thread keeps for whom it serves
    /// ([`on_behalf_of`]) on this mount, registering them on first use.
    fn with_stats(&self, window: u64, f: impl FnOnce(&ThreadStats)) {
        let r = &self.registry;
        // A thread being torn down has no slots any more: skip accounting.
        let served = SERVING.try_with(Cell::get).unwrap_or(-1);
        if served < 0 {
            return;
        }
        let _ = SLOTS.try_with(|slots| {
            let mut slots = slots.borrow_mut();
            let found = slots
                .iter()
                .rposition(|s| s.mount == r.id && s.served == served);
            if let Some(i) = found {
                let s = &mut slots[i];
                if served == 0 || s.checked == window {
                    return f(&s.stats);
                }
                // Once a window, a served thread is checked to be the one
                // its stats were made for: its id may have been reused.
                s.checked = window;
                if affinity::start_time(served) == s.stats.start {
                    return f(&s.stats);
                }
                slots.remove(i);
            }
            // Slots of mounts gone are dropped here, not on the I/O path.
            slots.retain(|s| s.registry.strong_count() > 0);
            if served != 0 {
                let mine = |s: &Slot| s.mount == r.id && s.served != 0;
                if slots.iter().filter(|s| mine(s)).count() >= SERVED_PER_THREAD
                    && let Some(oldest) = slots.iter().position(mine)
                {
                    slots.remove(oldest);
                }
            }
            let tid = if served == 0 { gettid() } else { served };
            let stats = Arc::new(CachePadded::new(ThreadStats::new(
                tid,
                affinity::start_time(tid),
                served != 0,
                r.nodes,
            )));
            r.threads.lock().push(stats.clone());
            f(&stats);
            slots.push(Slot {
                mount: r.id,
                served,
                checked: window,
                registry: Arc::downgrade(r),
                stats,
            });
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_map_to_the_node_of_their_range() {
        let r = NodeRanges::new(vec![(1000, 2000, 1), (10, 1000, 0)]);
        assert_eq!(r.node_of(5), 0);
        assert_eq!(r.node_of(10), 0);
        assert_eq!(r.node_of(999), 0);
        assert_eq!(r.node_of(1000), 1);
        assert_eq!(r.node_of(5000), 1);
        assert_eq!(NodeRanges::default().node_of(7), 0);
    }

    #[test]
    fn each_thread_counts_its_own_reads_writes_and_files() {
        let t = Tracker::new(true, 2, NodeRanges::new(vec![(0, 100, 0), (100, 200, 1)]));
        t.read(7, 150, 4096);
        t.read(7, 5, 100);
        t.read(8, 0, 4096); // a hole: no node, but the file counts
        t.wrote(9, 10, || 20);
        std::thread::scope(|s| {
            s.spawn(|| t.read(7, 120, 1));
        });
        // The scoped thread registered too (it may not have exited yet).
        let threads = t.registry().threads();
        assert!((1..=2).contains(&threads.len()));
        let me = threads.iter().find(|s| s.tid == gettid()).unwrap();
        assert!(!me.served);
        assert_eq!(me.start, affinity::start_time(gettid()));
        assert!(me.start.is_some());
        let w = t.registry().window();
        let c = me.counters(w);
        assert_eq!((c.read, c.written), (vec![100, 4096], vec![10, 0]));
        assert_eq!(c.files, vec![7, 8, 9]);
        // A new window starts an empty file set, counters keep counting.
        t.registry().next_window();
        assert!(me.counters(w + 1).files.is_empty());
        t.read(7, 150, 1);
        assert_eq!(me.counters(w + 1).files, vec![7]);
        assert_eq!(me.counters(w + 1).read, vec![100, 4097]);
    }

    #[test]
    fn no_two_threads_write_one_cache_line() {
        // Nine nodes: the counters span three padded lines.
        let t = Tracker::new(true, 9, NodeRanges::default());
        std::thread::scope(|s| {
            for i in 0..32 {
                let t = &t;
                s.spawn(move || t.read(i + 1, 0, 1));
            }
        });
        // Served stats are separate from the server's own.
        t.read(100, 0, 1);
        on_behalf_of(Some(1), || t.read(100, 0, 1));
        let all = t.registry.threads.lock().clone();
        assert_eq!(all.len(), 34);
        let mut owner = std::collections::HashMap::new();
        for (i, s) in all.iter().enumerate() {
            assert!(s.lines.len() >= 3);
            for l in s.owner_lines() {
                if let Some(j) = owner.insert(l, i) {
                    panic!("stats {i} and {j} write line {l:#x}");
                }
            }
        }
        // Nor does the planner's side of an Arc (its reference counts).
        let align = std::mem::align_of::<CachePadded<ThreadStats>>();
        for s in &all {
            let counts = (Arc::as_ptr(s) as usize - align) / 64;
            assert!(!s.owner_lines().contains(&counts));
        }
    }

    #[test]
    fn served_threads_are_accounted_apart_and_nobody_is_not() {
        let t = Tracker::new(true, 2, NodeRanges::new(vec![(0, 100, 0), (100, 200, 1)]));
        let me = gettid();
        // Our own process's id stands in for a caller: a live thread.
        let caller = std::process::id() as i32;
        on_behalf_of(Some(caller), || {
            t.read(5, 150, 1000);
            // Nested: back to ourselves, then to the caller again.
            on_behalf_of(Some(me), || t.read(6, 150, 1));
            t.wrote(5, 10, || 150);
        });
        on_behalf_of(None, || t.read(5, 150, 1 << 20));
        on_behalf_of(Some(0), || t.read(5, 150, 1 << 20));
        let r = std::panic::catch_unwind(|| on_behalf_of(Some(caller), || panic!("in a request")));
        assert!(r.is_err());
        t.read(7, 150, 2);
        let w = t.registry().window();
        let stats = t.registry().threads();
        let of = |tid: i32, served: bool| {
            let s: Vec<_> = stats
                .iter()
                .filter(|s| s.tid == tid && s.served == served)
                .collect();
            assert_eq!(s.len(), 1, "{tid} served={served}: {stats:?}");
            s[0].counters(w)
        };
        let c = of(caller, true);
        assert_eq!(
            (c.read, c.written, c.files),
            (vec![0, 1000], vec![0, 10], vec![5])
        );
        // The nested call and the call after the unwinding were ours.
        if caller != me {
            let own = of(me, false);
            assert_eq!((own.read, own.files), (vec![0, 2], vec![7]));
            assert_eq!(of(me, true).read, vec![0, 1]);
        }
        assert_eq!(stats.len(), if caller == me { 2 } else { 3 });
    }

    #[test]
    fn a_server_keeps_a_bounded_number_of_served_threads() {
        let t = Tracker::new(true, 1, NodeRanges::default());
        // Ids of no live thread: their start time is unknown (None), as is
        // the one recorded, so the stats stay usable.
        let ids: Vec<i32> = (0..SERVED_PER_THREAD as i32 + 5)
            .map(|i| i32::MAX - i)
            .collect();
        for &id in &ids {
            on_behalf_of(Some(id), || t.read(1, 0, 1));
        }
        let live = t.registry().threads();
        assert_eq!(live.len(), SERVED_PER_THREAD);
        let kept: Vec<i32> = live.iter().map(|s| s.tid).collect();
        assert_eq!(kept, ids[5..], "the first registered are dropped");
    }

    #[test]
    fn a_thread_started_on_a_cpu_keeps_its_mask_as_its_own() {
        let all = affinity::get(0).unwrap();
        let t = Tracker::new(true, 1, NodeRanges::default());
        let (mask, own) = std::thread::spawn(move || {
            start_on(all[0]).unwrap();
            start_on(all[all.len() - 1]).unwrap();
            t.read(1, 0, 1);
            let own = t.registry().threads()[0].own_mask.clone();
            (affinity::get(0).unwrap(), own)
        })
        .join()
        .unwrap();
        let all = affinity::get(0).unwrap();
        assert_eq!(mask, [all[all.len() - 1]]);
        assert_eq!(own.as_deref(), Some(&all[..]), "the first call's mask");
        // Others declare nothing.
        let t = Tracker::new(true, 1, NodeRanges::default());
        t.read(1, 0, 1);
        assert_eq!(t.registry().threads()[0].own_mask, None);
    }

    #[test]
    fn the_file_set_is_bounded() {
        let t = Tracker::new(true, 1, NodeRanges::default());
        for ino in 1..100 {
            t.read(ino, 0, 1);
        }
        let c = t.registry().threads()[0].counters(t.registry().window());
        assert_eq!(c.files, (1..=FILES_PER_WINDOW as u64).collect::<Vec<_>>());
    }

    #[test]
    fn off_registers_nothing() {
        let t = Tracker::new(false, 2, NodeRanges::default());
        t.read(1, 5, 10);
        t.wrote(1, 10, || panic!("not asked when off"));
        on_behalf_of(Some(1), || t.read(1, 5, 10));
        assert!(t.registry().threads().is_empty());
    }
}
