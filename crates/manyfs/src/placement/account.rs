//! Per-thread I/O accounting: what each thread read from each node, wrote,
//! and which files it touched, with no cache line shared between threads
//! on the I/O path.
//!
//! Each thread that does I/O on a mount gets one [`ThreadStats`] (its own
//! cache lines), registered once in the mount's registry, which the planner
//! reads. Only the owning thread writes its counters (Relaxed atomics with a
//! single writer: plain stores, no locked instructions); the planner only
//! loads them. When thread placement is off, [`Tracker::read`] and
//! [`Tracker::wrote`] cost one predictable branch.

use crossbeam_utils::CachePadded;
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

/// Files remembered per thread and window (the first ones touched).
pub const FILES_PER_WINDOW: usize = 16;

/// One thread's counters on one mount.
#[derive(Debug)]
pub struct ThreadStats {
    /// Kernel thread id.
    pub tid: i32,
    /// Bytes read from data on each node, since registration.
    read: Box<[AtomicU64]>,
    /// Bytes written to each node, since registration.
    written: Box<[AtomicU64]>,
    /// The window the file set belongs to.
    files_window: AtomicU64,
    /// Files touched in `files_window` (0: empty slot).
    files: [AtomicU64; FILES_PER_WINDOW],
    /// Cleared when the thread exits.
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
    fn new(tid: i32, nodes: usize) -> ThreadStats {
        ThreadStats {
            tid,
            read: (0..nodes).map(|_| AtomicU64::new(0)).collect(),
            written: (0..nodes).map(|_| AtomicU64::new(0)).collect(),
            files_window: AtomicU64::new(0),
            files: std::array::from_fn(|_| AtomicU64::new(0)),
            alive: AtomicBool::new(true),
        }
    }

    /// Whether the thread still runs.
    pub fn alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    /// Cumulative counters, and the files of window `window`.
    pub fn counters(&self, window: u64) -> Counters {
        let load = |v: &[AtomicU64]| v.iter().map(|a| a.load(Ordering::Relaxed)).collect();
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
            read: load(&self.read),
            written: load(&self.written),
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
    /// Every thread registered, in registration order.
    threads: parking_lot::Mutex<Vec<Arc<CachePadded<ThreadStats>>>>,
    ranges: NodeRanges,
}

impl Registry {
    /// The threads registered (those that exited are dropped from it).
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

/// A thread's slot for one mount.
struct Slot {
    mount: u64,
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

    /// Whether accounting is on.
    pub fn enabled(&self) -> bool {
        self.enabled
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
        self.with_stats(|s| {
            if block != 0 {
                let c = if write {
                    &s.written[node]
                } else {
                    &s.read[node]
                };
                ThreadStats::add(c, bytes as u64);
            }
            s.touch(ino, window);
        });
    }

    /// Run `f` on the calling thread's stats for this mount, registering
    /// it on first use.
    fn with_stats(&self, f: impl FnOnce(&ThreadStats)) {
        let r = &self.registry;
        // A thread being torn down has no slots any more: skip accounting.
        let _ = SLOTS.try_with(|slots| {
            let mut slots = slots.borrow_mut();
            if let Some(s) = slots.iter().rev().find(|s| s.mount == r.id) {
                return f(&s.stats);
            }
            // Slots of mounts gone are dropped here, not on the I/O path.
            slots.retain(|s| s.registry.strong_count() > 0);
            let stats = Arc::new(CachePadded::new(ThreadStats::new(gettid(), r.nodes)));
            r.threads.lock().push(stats.clone());
            f(&stats);
            slots.push(Slot {
                mount: r.id,
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
        assert!(t.registry().threads().is_empty());
    }
}
