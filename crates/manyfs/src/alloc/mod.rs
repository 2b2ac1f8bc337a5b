//! Space allocation: per-CPU pools of free blocks and of free inode numbers.
//!
//! Blocks are placed local-first, as in NUMA-aware NOVA: the data region of
//! each NUMA node (the pool members on that node) is cut into one
//! contiguous range per CPU of the node. A thread allocates from its CPU's
//! pool (an uncontended mutex in the common case: user space cannot pin
//! itself to a CPU), then from the other pools of its node, and only when
//! the node is full from the other nodes, nearest first by distance; such
//! a *spill* is counted per node (since the mount: `FsCore::node_spills`
//! adds what earlier mounts recorded in the members' spill records). Freed blocks return to the pool whose
//! range holds them, so pools do not fragment into each other. There is no
//! global free counter: each pool counts its own, and `statfs` sums them.
//!
//! Each pool also keeps one *spare*: a single freed block held in an atomic
//! word beside the mutex. A copy-on-write overwrite of one page allocates
//! one block and frees one, so in the steady state the pair is a swap and a
//! compare-and-swap on the CPU's own line instead of two mutex round trips
//! and the free-set bookkeeping; the block handed out is the one freed last
//! on that CPU, still in its cache.
//!
//! Allocator state lives in DRAM only; it is rebuilt at mount from what the
//! logs reach (see `recovery`).

pub(crate) mod deferred;

use crate::error::{Error, Result};
use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// Block placement across NUMA nodes (`MountOptions::placement`; the allocator follows it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Placement {
    /// The allocating thread's node first, then the nearest others.
    #[default]
    Local,
    /// Node 0 first, whoever allocates (all data on one node, as a
    /// NUMA-unaware file system on one device).
    Node0,
    /// Each allocation on the next node in turn.
    Interleave,
}

impl std::str::FromStr for Placement {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<Self> {
        match s {
            "local" => Ok(Placement::Local),
            "node0" => Ok(Placement::Node0),
            "interleave" => Ok(Placement::Interleave),
            _ => Err(crate::Error::InvalidArgument(format!(
                "placement {s:?} (expected local, node0 or interleave)"
            ))),
        }
    }
}

impl std::fmt::Display for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Placement::Local => "local",
            Placement::Node0 => "node0",
            Placement::Interleave => "interleave",
        })
    }
}

/// What a block is for. Metadata (log pages, log arrays) may dip into a
/// small reserve, so that deleting files still works on a full pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// File data pages.
    Data,
    /// Log pages and log arrays.
    Meta,
    /// File data staged in the pool of a tiered pool (`inode/staging.rs`):
    /// never takes one of the pool's allocators below a quarter of its
    /// blocks, which stay for logs and inode records.
    Staged,
}

/// Single blocks kept out of the extent map per pool: a write that replaces
/// one page frees one block and allocates one, so a small LIFO stack turns
/// both into a push and a pop.
const SINGLES: usize = 64;

#[derive(Default)]
struct FreeExtents {
    /// One past the last block -> length of each free extent. Keyed by the
    /// end, so that taking blocks from the front of an extent (allocation
    /// goes up through the pool) shortens it in place instead of removing
    /// and re-inserting it under a new key.
    extents: BTreeMap<u64, u64>,
    /// Recently freed single blocks (also counted in `free`).
    singles: Vec<u64>,
    free: u64,
}

impl FreeExtents {
    fn insert(&mut self, start: u64, len: u64) {
        let mut start = start;
        let mut len = len;
        // The extent that ends where this one starts.
        if let Some(pl) = self.extents.remove(&start) {
            start -= pl;
            len += pl;
        }
        // The first extent ending past this one: the one that starts where
        // this one ends, if any.
        let end = start + len;
        if let Some((&ne, nl)) = self.extents.range_mut(end + 1..).next() {
            debug_assert!(ne - *nl >= end, "double free of blocks {start}..{end}");
            if ne - *nl == end {
                *nl += len;
                return;
            }
        }
        if let Some((&pe, _)) = self.extents.range(..=end).next_back() {
            debug_assert!(pe <= start, "double free of blocks {start}..{end}");
        }
        self.extents.insert(end, len);
    }

    fn take(&mut self, want: u64) -> Option<(u64, u64)> {
        if want == 1
            && let Some(b) = self.singles.pop()
        {
            self.free -= 1;
            return Some((b, 1));
        }
        let Some(mut first) = self.extents.first_entry() else {
            // Only singles left: hand one out.
            let b = self.singles.pop()?;
            self.free -= 1;
            return Some((b, 1));
        };
        let (end, len) = (*first.key(), *first.get());
        let got = len.min(want);
        if got == len {
            first.remove();
        } else {
            *first.get_mut() -= got;
        }
        self.free -= got;
        Some((end - len, got))
    }

    /// Each free extent as `(start, length)`, ascending.
    fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.extents.iter().map(|(&end, &len)| (end - len, len))
    }
}

/// A block range of the data region on one NUMA node (a pool member's
/// part of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeRegion {
    /// First block.
    pub start: u64,
    /// One past the last block.
    pub end: u64,
    /// The node whose CPUs allocate here first.
    pub node: usize,
}

/// Per-CPU, node-local-first block allocator.
pub struct BlockAllocator {
    start: u64,
    end: u64,
    /// Start of each pool's range, ascending (pool `i` ends where `i+1`
    /// starts, the last at `end`).
    starts: Box<[u64]>,
    /// Node of each pool.
    pool_node: Box<[usize]>,
    pools: Box<[CachePadded<Mutex<FreeExtents>>]>,
    /// Per pool: one free single block outside `pools` (0: none; block 0
    /// is never in the data region). Not counted in the pool's `free`.
    spares: Box<[CachePadded<AtomicU64>]>,
    /// Per configured CPU: the pools to try, in order (its own, its node's,
    /// then the other nodes' nearest first).
    order: Box<[Box<[u32]>]>,
    /// Per node: the pools to try for [`BlockAllocator::alloc_on`].
    node_order: Box<[Box<[u32]>]>,
    /// Node of each configured CPU.
    cpu_node: Box<[usize]>,
    /// Per node: blocks its CPUs (or `alloc_on` it) had to take from
    /// another node.
    spills: Box<[CachePadded<AtomicU64>]>,
    reserve_per_pool: u64,
    placement: Placement,
    /// Next node for [`Placement::Interleave`].
    next_node: CachePadded<AtomicU64>,
}

impl BlockAllocator {
    /// An allocator over `[start, end)` on one node with `pools` pools, all
    /// blocks used (call [`BlockAllocator::free`] for the free ones).
    pub fn new(start: u64, end: u64, pools: usize) -> Self {
        let topology = crate::topology::Topology::emulated(1, pools.max(1));
        Self::for_nodes(
            start,
            end,
            &[NodeRegion {
                start,
                end,
                node: 0,
            }],
            &topology,
        )
    }

    /// An allocator over `[start, end)` whose blocks in each of `regions`
    /// belong to that region's node (a node the topology lacks counts as
    /// node `node % nodes`); each node's regions are split among its CPUs.
    /// Blocks in no region go to node 0. All blocks start used. Places
    /// blocks [`Placement::Local`](Placement::Local)ly.
    pub fn for_nodes(
        start: u64,
        end: u64,
        regions: &[NodeRegion],
        topology: &crate::topology::Topology,
    ) -> Self {
        Self::placed(start, end, regions, topology, Placement::Local)
    }

    /// [`BlockAllocator::for_nodes`], placing blocks by `placement`. With
    /// [`Placement::Node0`](Placement::Node0) node 0's
    /// regions are split among *every* CPU and each CPU starts at its own
    /// share of them, as NOVA splits its one device among all CPUs: the
    /// baseline keeps per-CPU allocation and differs from the design only
    /// in where the blocks are.
    pub fn placed(
        start: u64,
        end: u64,
        regions: &[NodeRegion],
        topology: &crate::topology::Topology,
        placement: Placement,
    ) -> Self {
        let node0 = placement == Placement::Node0;
        let every_cpu: Vec<usize> = (0..topology.cpu_count()).collect();
        let nodes = topology.node_count();
        let total = end.saturating_sub(start);
        // The regions clipped to [start, end), gaps given to node 0.
        let mut parts: Vec<NodeRegion> = regions
            .iter()
            .map(|r| NodeRegion {
                start: r.start.max(start),
                end: r.end.min(end),
                node: r.node % nodes,
            })
            .filter(|r| r.end > r.start)
            .collect();
        parts.sort_by_key(|r| r.start);
        let mut covered = Vec::new();
        let mut at = start;
        for r in parts.iter().chain(std::iter::once(&NodeRegion {
            start: end,
            end,
            node: 0,
        })) {
            if r.start > at {
                covered.push(NodeRegion {
                    start: at,
                    end: r.start,
                    node: 0,
                });
            }
            if r.end > r.start {
                covered.push(*r);
            }
            at = at.max(r.end);
        }
        if covered.is_empty() {
            covered.push(NodeRegion {
                start,
                end: start + 1,
                node: 0,
            });
        }
        // Each region cut into one range per CPU of its node (at least one
        // block each, at most 256 pools overall).
        let budget = 256usize;
        let mut starts = Vec::new();
        let mut pool_node = Vec::new();
        let mut pool_cpu = Vec::new();
        for r in &covered {
            let cpus = if node0 && r.node == 0 {
                &every_cpu[..]
            } else {
                topology.cpus_of(r.node)
            };
            let n = cpus
                .len()
                .clamp(1, (budget / covered.len()).max(1))
                .min((r.end - r.start) as usize);
            let per = (r.end - r.start).div_ceil(n as u64);
            for i in 0..n {
                starts.push(r.start + i as u64 * per);
                pool_node.push(r.node);
                pool_cpu.push(cpus.get(i).copied());
            }
        }
        let pools = starts.len();
        let cpu_node: Box<[usize]> = (0..topology.cpu_count())
            .map(|c| topology.node_of(c))
            .collect();
        // Pools in the order a node's CPUs try them: that node's, then
        // the others nearest first.
        let pn = &pool_node;
        let node_order: Box<[Box<[u32]>]> = (0..nodes)
            .map(|n| {
                topology
                    .nodes_by_distance(n)
                    .into_iter()
                    .flat_map(|m| (0..pools).filter(move |&p| pn[p] == m))
                    .map(|p| p as u32)
                    .collect()
            })
            .collect();
        let order = (0..topology.cpu_count())
            .map(|c| {
                // Node0 placement: every CPU allocates on node 0.
                let home = if node0 { 0 } else { cpu_node[c] };
                let by_node = &node_order[home];
                // Its own pool (on that node) first, then the rest in node
                // order.
                let own = (0..pools).find(|&p| pool_cpu[p] == Some(c) && pool_node[p] == home);
                own.map(|o| o as u32)
                    .into_iter()
                    .chain(by_node.iter().copied().filter(|&p| Some(p as usize) != own))
                    .collect()
            })
            .collect();
        BlockAllocator {
            start,
            end,
            starts: starts.into_boxed_slice(),
            pool_node: pool_node.into_boxed_slice(),
            pools: (0..pools)
                .map(|_| CachePadded::new(Mutex::default()))
                .collect(),
            spares: (0..pools)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            order,
            node_order,
            cpu_node,
            spills: (0..nodes)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            reserve_per_pool: (total / 100 / pools as u64).clamp(2, 256),
            placement,
            next_node: CachePadded::new(AtomicU64::new(0)),
        }
    }

    fn pool_of(&self, block: u64) -> usize {
        self.starts
            .partition_point(|&s| s <= block)
            .saturating_sub(1)
    }

    fn pool_end(&self, pool: usize) -> u64 {
        self.starts.get(pool + 1).copied().unwrap_or(self.end)
    }

    /// Allocate between 1 and `want` contiguous blocks, preferring the
    /// calling CPU's pool, then its node. Returns `(first, count)`.
    pub fn alloc(&self, want: u64, purpose: Purpose) -> Result<(u64, u64)> {
        let cpu = crate::cpu::current_below(self.order.len());
        match self.placement {
            Placement::Local => {
                self.alloc_from(&self.order[cpu], self.cpu_node[cpu], want, purpose)
            }
            // `order` starts each CPU at its own share of node 0.
            Placement::Node0 => self.alloc_from(&self.order[cpu], 0, want, purpose),
            Placement::Interleave => {
                // One shared counter: a baseline, not the design.
                let node = (self.next_node.fetch_add(1, Ordering::Relaxed)
                    % self.node_order.len() as u64) as usize;
                self.alloc_from(&self.node_order[node], node, want, purpose)
            }
        }
    }

    /// Allocate as [`BlockAllocator::alloc`] does, but for node `node`:
    /// from its pools first, then the nearest other nodes' (for placing
    /// data on a node other than the caller's, e.g. by thread placement).
    pub fn alloc_on(&self, node: usize, want: u64, purpose: Purpose) -> Result<(u64, u64)> {
        let node = node % self.node_order.len();
        self.alloc_from(&self.node_order[node], node, want, purpose)
    }

    fn alloc_from(
        &self,
        order: &[u32],
        node: usize,
        want: u64,
        purpose: Purpose,
    ) -> Result<(u64, u64)> {
        for &pool in order {
            if want == 1
                && let Some(b) = self.take_spare(pool as usize)
            {
                return Ok(self.counted_spill(pool as usize, node, (b, 1)));
            }
            let floor = match purpose {
                Purpose::Data => self.reserve_per_pool,
                Purpose::Meta => 0,
                Purpose::Staged => {
                    let size = self.pool_end(pool as usize) - self.starts[pool as usize];
                    self.reserve_per_pool.max(size / 4)
                }
            };
            let mut p = self.pools[pool as usize].lock();
            if p.free <= floor {
                continue;
            }
            let want = want.min(p.free - floor).max(1);
            if let Some(got) = p.take(want) {
                drop(p);
                return Ok(self.counted_spill(pool as usize, node, got));
            }
        }
        // Every free set short: a spare a longer request passed over.
        for &pool in order {
            if let Some(b) = self.take_spare(pool as usize) {
                return Ok(self.counted_spill(pool as usize, node, (b, 1)));
            }
        }
        Err(Error::NoSpace("no free blocks"))
    }

    /// `got`, taken from `pool` for `node`: counted as a spill if the pool
    /// is another node's.
    #[inline]
    fn counted_spill(&self, pool: usize, node: usize, got: (u64, u64)) -> (u64, u64) {
        if self.pool_node[pool] != node {
            self.spills[node].fetch_add(got.1, Ordering::Relaxed);
        }
        got
    }

    /// The spare block of `pool`, if it holds one (a load first: an empty
    /// spare costs no read-modify-write).
    #[inline]
    fn take_spare(&self, pool: usize) -> Option<u64> {
        let spare = &self.spares[pool];
        if spare.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let b = spare.swap(0, Ordering::AcqRel);
        (b != 0).then_some(b)
    }

    /// Blocks each node's allocations had to take from another node since
    /// this allocator was made (the mount).
    pub fn spills(&self) -> Vec<u64> {
        self.spills
            .iter()
            .map(|s| s.load(Ordering::Relaxed))
            .collect()
    }

    /// Return `[first, first+count)` to the free pools.
    pub fn free(&self, first: u64, count: u64) {
        if count == 1 && first >= self.start && first < self.end {
            let spare = &self.spares[self.pool_of(first)];
            if spare.load(Ordering::Relaxed) == 0
                && spare
                    .compare_exchange(0, first, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            {
                return;
            }
        }
        let mut b = first;
        let end = first + count;
        while b < end {
            if b < self.start || b >= self.end {
                debug_assert!(false, "freeing block {b} outside the data region");
                return;
            }
            let pool = self.pool_of(b);
            let pool_end = self.pool_end(pool);
            let stop = end.min(pool_end);
            let mut p = self.pools[pool].lock();
            if stop - b == 1 && p.singles.len() < SINGLES {
                p.singles.push(b);
            } else {
                p.insert(b, stop - b);
            }
            p.free += stop - b;
            b = stop;
        }
    }

    /// Blocks this allocator manages, free or not.
    pub fn data_blocks(&self) -> u64 {
        self.end - self.start
    }

    /// Free blocks, summed over pools (spares included).
    pub fn free_blocks(&self) -> u64 {
        let spares = self
            .spares
            .iter()
            .filter(|s| s.load(Ordering::Acquire) != 0);
        self.pools.iter().map(|p| p.lock().free).sum::<u64>() + spares.count() as u64
    }

    /// Free extents of every pool (neighbours merged within a pool), sorted.
    pub fn free_extents(&self) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        for (p, spare) in self.pools.iter().zip(self.spares.iter()) {
            let p = p.lock();
            let mut v: Vec<(u64, u64)> = p.iter().collect();
            v.extend(p.singles.iter().map(|&b| (b, 1)));
            v.extend(
                Some(spare.load(Ordering::Acquire))
                    .filter(|&b| b != 0)
                    .map(|b| (b, 1)),
            );
            v.sort_unstable();
            let mut merged: Vec<(u64, u64)> = Vec::with_capacity(v.len());
            for (s, l) in v {
                match merged.last_mut() {
                    Some((ms, ml)) if *ms + *ml == s => *ml += l,
                    _ => merged.push((s, l)),
                }
            }
            out.extend(merged);
        }
        out.sort_unstable();
        out
    }
}

/// The block allocators of a mount: the pool's, and on a tiered pool the
/// data device's (the same per-CPU design over the device's blocks, one
/// range per CPU). File data comes from the device when there is one;
/// log pages, log arrays and everything else from the pool. A block is
/// freed to the allocator whose range holds it.
pub struct Blocks {
    /// The pool's blocks.
    pub pool: BlockAllocator,
    /// The data device's blocks, on a tiered pool.
    pub device: Option<BlockAllocator>,
}

impl Blocks {
    /// Allocators over the pool only.
    pub fn pool_only(pool: BlockAllocator) -> Blocks {
        Blocks { pool, device: None }
    }

    /// Allocate between 1 and `want` contiguous blocks for `purpose`:
    /// file data on the data device if there is one (a full device is
    /// `NoSpace`, never a spill onto the pool), everything else (staged
    /// data included) on the pool.
    pub fn alloc(&self, want: u64, purpose: Purpose) -> Result<(u64, u64)> {
        match (&self.device, purpose) {
            (Some(d), Purpose::Data) => d
                .alloc(want, purpose)
                .map_err(|_| Error::NoSpace("no free blocks on the data device")),
            _ => self.pool.alloc(want, purpose),
        }
    }

    /// [`BlockAllocator::alloc_on`] of the pool (calibration scratch).
    pub fn alloc_on(&self, node: usize, want: u64, purpose: Purpose) -> Result<(u64, u64)> {
        self.pool.alloc_on(node, want, purpose)
    }

    /// Return `[first, first+count)` to the allocator whose range holds it.
    pub fn free(&self, first: u64, count: u64) {
        match &self.device {
            Some(d) if first >= d.start => d.free(first, count),
            _ => self.pool.free(first, count),
        }
    }

    /// [`Blocks::free`] of every `(first, count)` of `runs` (emptied):
    /// sorted and neighbours merged first, so that the blocks a sync
    /// releases in a burst (the old copies of pages written one after
    /// another, themselves allocated one after another) go back as a few
    /// extents instead of one insertion each.
    pub fn free_batch(&self, runs: &mut Vec<(u64, u64)>) {
        runs.sort_unstable();
        let mut merged: Option<(u64, u64)> = None;
        for (first, count) in runs.drain(..) {
            match &mut merged {
                Some((s, n)) if *s + *n == first && !self.splits_at(first) => *n += count,
                _ => {
                    if let Some((s, n)) = merged.replace((first, count)) {
                        self.free(s, n);
                    }
                }
            }
        }
        if let Some((s, n)) = merged {
            self.free(s, n);
        }
    }

    /// Whether `block` starts the data device's range (a run of blocks
    /// must not span the two allocators).
    fn splits_at(&self, block: u64) -> bool {
        self.device.as_ref().is_some_and(|d| d.start == block)
    }

    /// Free blocks of both allocators.
    pub fn free_blocks(&self) -> u64 {
        self.pool.free_blocks() + self.device.as_ref().map_or(0, BlockAllocator::free_blocks)
    }

    /// Free extents of both, sorted.
    pub fn free_extents(&self) -> Vec<(u64, u64)> {
        let mut v = self.pool.free_extents();
        if let Some(d) = &self.device {
            v.extend(d.free_extents());
        }
        v
    }

    /// Per node: blocks that had to be taken from another node (pool).
    pub fn spills(&self) -> Vec<u64> {
        self.pool.spills()
    }
}

/// Free inode numbers of one pool: half-open runs, the next to hand out
/// last (its lowest number first), and how many numbers they hold.
#[derive(Default)]
struct InodeRuns {
    runs: Vec<(u64, u64)>,
    count: u64,
}

/// Numbers dealt to each pool at a time at mount: pools get runs, not
/// single numbers, so a pool of a million free inodes is a few hundred
/// runs, not a million-entry list.
const INODE_CHUNK: u64 = 1024;

/// Per-CPU pools of free inode numbers, each a list of runs.
pub struct InodeAllocator {
    pools: Box<[CachePadded<Mutex<InodeRuns>>]>,
}

impl InodeAllocator {
    /// Pools holding the given free inode numbers (ascending), dealt
    /// round-robin in runs of up to [`INODE_CHUNK`].
    pub fn new(free: impl IntoIterator<Item = u64>, pools: usize) -> Self {
        let mut ranges: Vec<(u64, u64)> = Vec::new();
        for ino in free {
            match ranges.last_mut() {
                Some(r) if r.1 == ino => r.1 += 1,
                _ => ranges.push((ino, ino + 1)),
            }
        }
        Self::from_free_ranges(ranges, pools)
    }

    /// Pools holding the free inode numbers of `free`, ascending
    /// non-adjacent ranges `[start, end)`, dealt as [`InodeAllocator::new`]
    /// deals them; the work is per range and run, not per number (a
    /// mount of a pool with a million free numbers and a few files walks
    /// a few files' gaps).
    pub fn from_free_ranges(free: impl IntoIterator<Item = (u64, u64)>, pools: usize) -> Self {
        let pools = pools.clamp(1, 256);
        let mut lists: Vec<InodeRuns> = (0..pools).map(|_| InodeRuns::default()).collect();
        let mut chunks = 0usize;
        for (mut start, end) in free {
            while start < end {
                let stop = end.min(start + INODE_CHUNK);
                let l = &mut lists[chunks % pools];
                l.runs.push((start, stop));
                l.count += stop - start;
                chunks += 1;
                start = stop;
            }
        }
        for l in &mut lists {
            l.runs.reverse(); // the lowest run is handed out first
        }
        InodeAllocator {
            pools: lists
                .into_iter()
                .map(|l| CachePadded::new(Mutex::new(l)))
                .collect(),
        }
    }

    /// Take a free inode number.
    pub fn alloc(&self) -> Result<u64> {
        let home = crate::cpu::current_below(self.pools.len());
        let n = self.pools.len();
        for i in 0..n {
            let mut pool = self.pools[(home + i) % n].lock();
            if let Some(last) = pool.runs.last_mut() {
                let ino = last.0;
                last.0 += 1;
                if last.0 == last.1 {
                    pool.runs.pop();
                }
                pool.count -= 1;
                return Ok(ino);
            }
        }
        Err(Error::NoSpace("no free inodes"))
    }

    /// Return an inode number (handed out again first).
    pub fn free(&self, ino: u64) {
        let home = crate::cpu::current_below(self.pools.len());
        let mut pool = self.pools[home].lock();
        match pool.runs.last_mut() {
            Some(last) if last.0 == ino + 1 => last.0 = ino,
            _ => pool.runs.push((ino, ino + 1)),
        }
        pool.count += 1;
    }

    /// Free inode numbers, summed over pools.
    pub fn free_count(&self) -> u64 {
        self.pools.iter().map(|p| p.lock().count).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_free_coalesce_and_exhaust() {
        let a = BlockAllocator::new(100, 1100, 4);
        a.free(100, 1000);
        assert_eq!(a.free_blocks(), 1000);
        assert_eq!(a.free_extents().len(), 4, "one extent per pool");
        let mut got = vec![];
        while let Ok(x) = a.alloc(7, Purpose::Meta) {
            got.push(x);
        }
        assert_eq!(got.iter().map(|g| g.1).sum::<u64>(), 1000);
        assert!(matches!(a.alloc(1, Purpose::Data), Err(Error::NoSpace(_))));
        for (s, l) in got {
            a.free(s, l);
        }
        assert_eq!(a.free_blocks(), 1000);
        assert_eq!(a.free_extents().len(), 4, "frees coalesce back");
    }

    #[test]
    fn a_single_freed_block_is_the_pools_spare_and_counts_as_free() {
        let a = BlockAllocator::new(100, 200, 1);
        a.free(100, 100);
        let (b, n) = a.alloc(1, Purpose::Data).unwrap();
        assert_eq!((b, n), (100, 1), "from the front of the pool");
        a.free(b, 1);
        assert_eq!(a.free_blocks(), 100, "the spare counts as free");
        assert_eq!(
            a.free_extents(),
            vec![(100, 100)],
            "and merges into the extents"
        );
        // The next single block is the spare, the one freed last (still
        // in the cache): copy-on-write overwrites alternate two blocks.
        let (c, _) = a.alloc(1, Purpose::Data).unwrap();
        assert_eq!(c, 100);
        let (d, _) = a.alloc(1, Purpose::Data).unwrap();
        a.free(c, 1);
        assert_eq!(a.alloc(1, Purpose::Data).unwrap(), (c, 1));
        a.free(c, 1);
        a.free(d, 1);
        // A longer request skips the spare while the pool has extents,
        // and takes it when nothing else is left.
        let mut got = 0;
        while let Ok((_, n)) = a.alloc(50, Purpose::Meta) {
            got += n;
        }
        assert_eq!(got, 100);
        assert_eq!(a.free_blocks(), 0);
    }

    #[test]
    fn data_leaves_a_reserve_for_metadata() {
        let a = BlockAllocator::new(0, 64, 1);
        a.free(0, 64);
        let mut data = 0;
        while let Ok((_, n)) = a.alloc(1, Purpose::Data) {
            data += n;
        }
        assert!(data < 64);
        assert!(a.alloc(1, Purpose::Meta).is_ok());
    }

    /// Node `i` owns blocks `[100 (i+1), 100 (i+2))`.
    fn hundred_block_regions(nodes: u64) -> Vec<NodeRegion> {
        (0..nodes)
            .map(|i| NodeRegion {
                start: 100 * (i + 1),
                end: 100 * (i + 2),
                node: i as usize,
            })
            .collect()
    }

    #[test]
    fn nodes_allocate_locally_then_spill_to_the_nearest() {
        // 3 nodes of 2 CPUs; node 2 is nearer to node 1 than node 0 is.
        let mut t = crate::topology::Topology::emulated(3, 2);
        t = t.with_distances(vec![vec![10, 30, 20], vec![30, 10, 20], vec![20, 20, 10]]);
        let regions = hundred_block_regions(3);
        let a = BlockAllocator::for_nodes(100, 400, &regions, &t);
        a.free(100, 300);
        let node_of = |b: u64| (b - 100) / 100;
        // Node 1 takes its own 100 blocks (less the data reserve of its
        // pools, left for metadata), then node 2's, then node 0's.
        let mut got = Vec::new();
        while let Ok((b, n)) = a.alloc_on(1, 1, Purpose::Meta) {
            assert_eq!(n, 1);
            got.push(b);
        }
        assert_eq!(got.len(), 300);
        let first_other = got.iter().position(|&b| node_of(b) != 1).unwrap();
        assert_eq!(first_other, 100, "node 1's own blocks first");
        assert!(
            got[100..200].iter().all(|&b| node_of(b) == 2),
            "then the nearest node"
        );
        assert!(got[200..].iter().all(|&b| node_of(b) == 0));
        assert_eq!(a.spills(), vec![0, 200, 0]);
        // Freed blocks go back to their own node's pools.
        for &b in &got {
            a.free(b, 1);
        }
        assert_eq!(a.free_blocks(), 300);
        let (b, _) = a.alloc_on(2, 1, Purpose::Data).unwrap();
        assert_eq!(node_of(b), 2);
    }

    #[test]
    fn a_node_without_blocks_spills_and_gaps_belong_to_node_0() {
        let t = crate::topology::Topology::emulated(2, 1);
        // Only node 0 has a region; [150, 160) is in none.
        let regions = [
            NodeRegion {
                start: 100,
                end: 150,
                node: 0,
            },
            NodeRegion {
                start: 160,
                end: 200,
                node: 0,
            },
        ];
        let a = BlockAllocator::for_nodes(100, 200, &regions, &t);
        a.free(100, 100);
        let (b, _) = a.alloc_on(1, 5, Purpose::Meta).unwrap();
        assert!((100..200).contains(&b));
        assert_eq!(a.spills()[1], 5);
        a.free(b, 5);
        assert_eq!(a.free_blocks(), 100);
    }

    #[test]
    fn node0_and_interleaved_placement_for_baselines() {
        let t = crate::topology::Topology::emulated(2, 1);
        let regions = hundred_block_regions(2);
        let node0 = BlockAllocator::placed(100, 300, &regions, &t, Placement::Node0);
        node0.free(100, 200);
        // Each CPU has its own share of node 0 (as NOVA's per-CPU
        // allocators on one device): the two CPUs' first blocks come from
        // different halves of it.
        let firsts: Vec<u64> = (0..2)
            .map(|cpu| {
                let (b, _) = node0
                    .alloc_from(&node0.order[cpu], 0, 1, Purpose::Data)
                    .unwrap();
                b
            })
            .collect();
        assert!(
            firsts[0] < 150 && (150..200).contains(&firsts[1]),
            "{firsts:?}"
        );
        for _ in 0..50 {
            let (b, _) = node0.alloc(1, Purpose::Data).unwrap();
            assert!(b < 200, "node0 placement gave block {b}");
        }
        let inter = BlockAllocator::placed(100, 300, &regions, &t, Placement::Interleave);
        inter.free(100, 200);
        let nodes: Vec<u64> = (0..6)
            .map(|_| (inter.alloc(1, Purpose::Data).unwrap().0 - 100) / 100)
            .collect();
        assert_eq!(nodes, vec![0, 1, 0, 1, 0, 1]);
    }

    #[test]
    fn inode_numbers_are_unique() {
        let a = InodeAllocator::new(2..1000, 3);
        let mut seen = std::collections::HashSet::new();
        while let Ok(i) = a.alloc() {
            assert!(seen.insert(i));
        }
        assert_eq!(seen.len(), 998);
        a.free(5);
        assert_eq!(a.alloc().unwrap(), 5);
    }

    /// Dealt from ranges, the pools hold what dealing the same numbers
    /// one by one gives.
    #[test]
    fn ranges_deal_as_single_numbers_do() {
        let numbers: Vec<u64> = (2..5000u64)
            .filter(|i| i % 777 != 0 && !(1500..1600).contains(i))
            .collect();
        let mut ranges: Vec<(u64, u64)> = Vec::new();
        for &i in &numbers {
            match ranges.last_mut() {
                Some(r) if r.1 == i => r.1 += 1,
                _ => ranges.push((i, i + 1)),
            }
        }
        for pools in [1, 2, 3] {
            let a = InodeAllocator::new(numbers.iter().copied(), pools);
            let b = InodeAllocator::from_free_ranges(ranges.iter().copied(), pools);
            for (pa, pb) in a.pools.iter().zip(b.pools.iter()) {
                let (pa, pb) = (pa.lock(), pb.lock());
                assert_eq!(pa.runs, pb.runs);
                assert_eq!(pa.count, pb.count);
            }
        }
    }

    #[test]
    fn free_inode_numbers_are_kept_as_runs() {
        let a = InodeAllocator::new((2..1_000_002).filter(|i| i % 5000 != 0), 2);
        let runs: usize = a.pools.iter().map(|p| p.lock().runs.len()).sum();
        assert!(runs < 1_500, "{runs} runs for a million numbers");
        assert_eq!(a.free_count(), 1_000_000 - 200);
        let first = a.alloc().unwrap();
        assert!(
            first < 2 + 2 * INODE_CHUNK,
            "low numbers first, got {first}"
        );
        assert_eq!(a.free_count(), 1_000_000 - 201);
        a.free(first);
        assert_eq!(a.alloc().unwrap(), first);
    }

    proptest::proptest! {
        /// Any sequence of allocations and frees (single blocks, runs, and
        /// batches a sync releases) leaves exactly the model's free blocks:
        /// none handed out twice, none lost, extents merged.
        #[test]
        fn allocations_and_frees_match_a_model(
            ops in proptest::collection::vec((0u8..4, 1u64..9, proptest::num::u64::ANY), 1..200),
            pools in 1usize..4,
        ) {
            use std::collections::BTreeSet;
            let blocks = Blocks::pool_only(BlockAllocator::new(10, 210, pools));
            blocks.free(10, 200);
            let mut free: BTreeSet<u64> = (10..210).collect();
            let mut held: Vec<(u64, u64)> = Vec::new();
            for (kind, want, pick) in ops {
                match kind {
                    0 | 1 => {
                        let purpose = if kind == 0 { Purpose::Data } else { Purpose::Meta };
                        if let Ok((b, n)) = blocks.alloc(want, purpose) {
                            proptest::prop_assert!(n >= 1 && n <= want);
                            for x in b..b + n {
                                proptest::prop_assert!(free.remove(&x), "block {} handed out twice", x);
                            }
                            held.push((b, n));
                        }
                    }
                    2 if !held.is_empty() => {
                        let (b, n) = held.swap_remove((pick % held.len() as u64) as usize);
                        blocks.free(b, n);
                        free.extend(b..b + n);
                    }
                    _ => {
                        // A batch: up to `want` held runs, freed together.
                        let mut batch = Vec::new();
                        for _ in 0..want.min(held.len() as u64) {
                            let (b, n) = held.swap_remove((pick % held.len() as u64) as usize);
                            free.extend(b..b + n);
                            batch.push((b, n));
                        }
                        blocks.free_batch(&mut batch);
                        proptest::prop_assert!(batch.is_empty());
                    }
                }
                proptest::prop_assert_eq!(blocks.free_blocks(), free.len() as u64);
            }
            let listed: BTreeSet<u64> = blocks
                .free_extents()
                .into_iter()
                .flat_map(|(s, n)| s..s + n)
                .collect();
            proptest::prop_assert_eq!(listed, free);
        }
    }
}
