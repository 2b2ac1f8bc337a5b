//! Compares the file index's lock-free radix tree (nodes installed by CAS)
//! with the design of nCACHE (concurrent file index): a reader-writer lock
//! per node and double-checked insertion. Measured on the operation the data
//! path does: many threads looking up pages of one file, each thread in its
//! own range, with occasional inserts.
//!
//! Run: `cargo run --release -p manyfs --example index_compare`

use manyfs::index::radix::{CasRadix, FANOUT, INTERIOR_LEVELS};
use parking_lot::RwLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// nCACHE (concurrent file index)'s index: every node under its own reader-writer lock.
struct RwRadix {
    root: RwNode,
}

enum Child {
    Interior(Box<RwNode>),
    Leaf(Box<[AtomicU64; FANOUT]>),
}

struct RwNode {
    children: RwLock<Vec<Option<Child>>>,
}

impl RwNode {
    fn new() -> Self {
        RwNode {
            children: RwLock::new((0..FANOUT).map(|_| None).collect()),
        }
    }
}

fn idx(key: u64, level: u32) -> usize {
    ((key >> (6 * (INTERIOR_LEVELS - level))) as usize) & (FANOUT - 1)
}

impl RwRadix {
    /// Look up (and create if missing) the value for `key`, applying `f`.
    fn with(&self, key: u64, f: &dyn Fn(&AtomicU64)) {
        fn walk(node: &RwNode, key: u64, level: u32, f: &dyn Fn(&AtomicU64)) {
            let i = idx(key, level);
            {
                let g = node.children.read();
                match &g[i] {
                    Some(Child::Leaf(l)) => return f(&l[idx(key, INTERIOR_LEVELS)]),
                    Some(Child::Interior(n)) => return walk(n, key, level + 1, f),
                    None => {}
                }
            }
            {
                // Double-checked insertion under the write lock.
                let mut g = node.children.write();
                if g[i].is_none() {
                    g[i] = Some(if level + 1 == INTERIOR_LEVELS {
                        Child::Leaf(Box::new(std::array::from_fn(|_| AtomicU64::new(0))))
                    } else {
                        Child::Interior(Box::new(RwNode::new()))
                    });
                }
            }
            walk(node, key, level, f)
        }
        walk(&self.root, key, 0, f)
    }
}

fn run(threads: u64, op: &(dyn Fn(u64, u64) + Sync)) -> f64 {
    let stop = AtomicBool::new(false);
    let total = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (stop, total) = (&stop, &total);
            s.spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..256 {
                        op(t, n);
                        n += 1;
                    }
                }
                total.fetch_add(n, Ordering::Relaxed);
            });
        }
        let t0 = Instant::now();
        std::thread::sleep(Duration::from_millis(400));
        stop.store(true, Ordering::Relaxed);
        let _ = t0;
    });
    total.load(Ordering::Relaxed) as f64 / 0.4
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    v[v.len() / 2]
}

fn main() {
    let cas: CasRadix<AtomicU64> = CasRadix::new();
    let rw = RwRadix {
        root: RwNode::new(),
    };
    // Each thread works in its own 2048-page region (8 MiB of file), one
    // insert (a new page) every 64 operations.
    let region = |t: u64, n: u64| {
        t * 2048
            + if n.is_multiple_of(64) {
                2048 * 64 + n % 100_000
            } else {
                n % 2048
            }
    };
    let cas_op = |t: u64, n: u64| {
        cas.get_or_insert(region(t, n))
            .fetch_add(1, Ordering::Relaxed);
    };
    let rw_op = |t: u64, n: u64| {
        rw.with(region(t, n), &|v| {
            v.fetch_add(1, Ordering::Relaxed);
        });
    };
    println!(
        "{:>8} {:>16} {:>16} {:>7}",
        "threads", "cas Mops/s", "rw-lock Mops/s", "ratio"
    );
    for threads in [1u64, 2, 4, 16, 64] {
        let c = median((0..5).map(|_| run(threads, &cas_op)).collect());
        let r = median((0..5).map(|_| run(threads, &rw_op)).collect());
        println!(
            "{threads:>8} {:>16.2} {:>16.2} {:>7.2}",
            c / 1e6,
            r / 1e6,
            c / r
        );
    }
}
