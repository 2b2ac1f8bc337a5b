//! Space allocation: per-CPU pools of free blocks and of free inode numbers.
//!
//! The data region is cut into one contiguous range per pool. A thread
//! allocates from its CPU's pool (an uncontended mutex in the common case:
//! user space cannot pin itself to a CPU), and steals from the others only
//! when its own is empty. Freed blocks return to the pool whose range holds
//! them, so pools do not fragment into each other. There is no global free
//! counter: each pool counts its own, and `statfs` sums them.
//!
//! Allocator state lives in DRAM only; it is rebuilt at mount from what the
//! logs reach (see `recovery`).

pub(crate) mod deferred;

use crate::error::{Error, Result};
use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use std::collections::BTreeMap;

/// What a block is for. Metadata (log pages, log arrays) may dip into a
/// small reserve, so that deleting files still works on a full pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// File data pages.
    Data,
    /// Log pages and log arrays.
    Meta,
}

/// Single blocks kept out of the extent map per pool: a write that replaces
/// one page frees one block and allocates one, so a small LIFO stack turns
/// both into a push and a pop.
const SINGLES: usize = 64;

#[derive(Default)]
struct FreeExtents {
    /// start -> length of each free extent.
    extents: BTreeMap<u64, u64>,
    /// Recently freed single blocks (also counted in `free`).
    singles: Vec<u64>,
    free: u64,
}

impl FreeExtents {
    fn insert(&mut self, start: u64, len: u64) {
        let mut start = start;
        let mut len = len;
        if let Some((&ps, &pl)) = self.extents.range(..start).next_back() {
            debug_assert!(ps + pl <= start, "double free of block {start}");
            if ps + pl == start {
                self.extents.remove(&ps);
                start = ps;
                len += pl;
            }
        }
        if let Some(&nl) = self.extents.get(&(start + len)) {
            self.extents.remove(&(start + len));
            len += nl;
        }
        self.extents.insert(start, len);
    }

    fn take(&mut self, want: u64) -> Option<(u64, u64)> {
        if want == 1
            && let Some(b) = self.singles.pop()
        {
            self.free -= 1;
            return Some((b, 1));
        }
        let Some((&start, &len)) = self.extents.iter().next() else {
            // Only singles left: hand one out.
            let b = self.singles.pop()?;
            self.free -= 1;
            return Some((b, 1));
        };
        let got = len.min(want);
        self.extents.remove(&start);
        if got < len {
            self.extents.insert(start + got, len - got);
        }
        self.free -= got;
        Some((start, got))
    }
}

/// Per-CPU block allocator over `[start, end)`.
pub struct BlockAllocator {
    start: u64,
    end: u64,
    per_pool: u64,
    pools: Box<[CachePadded<Mutex<FreeExtents>>]>,
    reserve_per_pool: u64,
}

impl BlockAllocator {
    /// An allocator over `[start, end)` with `pools` pools, all blocks used
    /// (call [`BlockAllocator::free`] for the free ones).
    pub fn new(start: u64, end: u64, pools: usize) -> Self {
        let total = end.saturating_sub(start);
        let pools = pools.clamp(1, 256).min(total.max(1) as usize);
        let per_pool = total.div_ceil(pools as u64).max(1);
        let reserve_per_pool = (total / 100 / pools as u64).clamp(2, 256);
        BlockAllocator {
            start,
            end,
            per_pool,
            pools: (0..pools)
                .map(|_| CachePadded::new(Mutex::default()))
                .collect(),
            reserve_per_pool,
        }
    }

    fn pool_of(&self, block: u64) -> usize {
        (((block - self.start) / self.per_pool) as usize).min(self.pools.len() - 1)
    }

    /// Allocate between 1 and `want` contiguous blocks, preferring the
    /// calling CPU's pool. Returns `(first, count)`.
    pub fn alloc(&self, want: u64, purpose: Purpose) -> Result<(u64, u64)> {
        let home = crate::cpu::current() % self.pools.len();
        let n = self.pools.len();
        for i in 0..n {
            let pool = &self.pools[(home + i) % n];
            let mut p = pool.lock();
            let floor = if purpose == Purpose::Data {
                self.reserve_per_pool
            } else {
                0
            };
            if p.free <= floor {
                continue;
            }
            let want = want.min(p.free - floor).max(1);
            if let Some(got) = p.take(want) {
                return Ok(got);
            }
        }
        Err(Error::NoSpace("no free blocks"))
    }

    /// Return `[first, first+count)` to the free pools.
    pub fn free(&self, first: u64, count: u64) {
        let mut b = first;
        let end = first + count;
        while b < end {
            if b < self.start || b >= self.end {
                debug_assert!(false, "freeing block {b} outside the data region");
                return;
            }
            let pool = self.pool_of(b);
            let pool_end = (self.start + (pool as u64 + 1) * self.per_pool).min(self.end);
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

    /// Free blocks, summed over pools.
    pub fn free_blocks(&self) -> u64 {
        self.pools.iter().map(|p| p.lock().free).sum()
    }

    /// Free extents of every pool (neighbours merged within a pool), sorted.
    pub fn free_extents(&self) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        for p in self.pools.iter() {
            let p = p.lock();
            let mut v: Vec<(u64, u64)> = p.extents.iter().map(|(&s, &l)| (s, l)).collect();
            v.extend(p.singles.iter().map(|&b| (b, 1)));
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
        let pools = pools.clamp(1, 256);
        let mut lists: Vec<InodeRuns> = (0..pools).map(|_| InodeRuns::default()).collect();
        let mut chunks = 0usize;
        let mut run: Option<(u64, u64)> = None;
        let mut deal = |r: (u64, u64)| {
            let l = &mut lists[chunks % pools];
            l.runs.push(r);
            l.count += r.1 - r.0;
            chunks += 1;
        };
        for ino in free {
            run = match run {
                Some((s, e)) if e == ino && e - s < INODE_CHUNK => Some((s, e + 1)),
                Some(r) => {
                    deal(r);
                    Some((ino, ino + 1))
                }
                None => Some((ino, ino + 1)),
            };
        }
        if let Some(r) = run {
            deal(r);
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
        let home = crate::cpu::current() % self.pools.len();
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
        let home = crate::cpu::current() % self.pools.len();
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
}
