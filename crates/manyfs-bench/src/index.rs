//! File-index microbenchmarks: each index kind's lookup and insert rates
//! at several thread counts, and the serial time per operation that the
//! nCACHE paper's argument rests on.
//!
//! * Lookup: thread `t` looks up page `t * stride / 4096` (all present) over
//!   and over, as DRBM and DWOM do through the file index.
//! * Insert: on a fresh tree, thread `t` of `n` inserts pages
//!   `(i * n + t) * 64` for `i` in `0..INSERTS`: every insertion makes a
//!   new leaf (and every 64th a new interior node) under nodes the threads
//!   share, like a file grown by several writers.
//! * Serial time: the tree's [`SerialProbe`] timing what excludes other
//!   threads on disjoint keys: nothing for `cas` (no lock), the
//!   write-locked insertion for `rw` (a lookup takes read locks only), the
//!   hold of the root's mutex for `cascade` (every operation passes it
//!   hand over hand): the median interval less the timer overhead, times
//!   the intervals per operation. Measured twice: with one thread (the
//!   section's own length) and with two threads pinned to two CPUs
//!   (contended: a `cascade` root holder waits there for the next node's
//!   mutex, which the thread ahead holds, and every thread behind waits
//!   for the root meanwhile; an `rw` write lock waits for nothing while
//!   held). On many cores every operation meets others, so the contended
//!   time is the one `ncache-fig7` projects with.
//!
//! Trees hold `AtomicU64` values and are called through
//! `dyn PageIndex`, the same indirection for every kind.

use crate::locks::{FsProjection, project_point, timer_overhead_ns};
use crate::sys::{Gate, allowed_cpus, pin_current_thread};
use manyfs_index::cascade::CascadeRadix;
use manyfs_index::radix::{CasRadix, FANOUT, KEY_LIMIT};
use manyfs_index::rw::RwRadix;
use manyfs_index::{IndexKind, NoProbe, PageIndex, SerialProbe};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Insertions per thread of one insert run.
pub const INSERTS: u64 = 8192;

/// What the index microbenchmarks run.
#[derive(Debug, Clone)]
pub struct IndexConfig {
    /// Index kinds, in order.
    pub kinds: Vec<IndexKind>,
    /// Lookup strides in bytes (distance between threads' pages).
    pub strides: Vec<u64>,
    /// Thread counts of the rate sweep (1 and 2 are always measured: the
    /// projection needs them).
    pub threads: Vec<usize>,
    /// Measured time of each lookup point.
    pub duration: Duration,
    /// Pin threads round-robin to the allowed CPUs.
    pub pin: bool,
    /// Cores the serial time is projected to.
    pub cores: usize,
}

impl Default for IndexConfig {
    fn default() -> Self {
        IndexConfig {
            kinds: IndexKind::ALL.to_vec(),
            strides: vec![crate::workload::REGION, crate::workload::BLOCK as u64],
            threads: vec![1, 2, 16],
            duration: Duration::from_millis(300),
            pin: true,
            cores: 120,
        }
    }
}

/// One measured rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexRate {
    /// Index kind.
    pub index: String,
    /// `lookup` or `insert`.
    pub op: String,
    /// Lookup stride in bytes (0 for inserts).
    pub stride: u64,
    /// Threads.
    pub threads: usize,
    /// Operations per second, all threads.
    pub ops_per_sec: f64,
}

/// Everything the index microbenchmarks measure.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IndexReport {
    /// Rates vs threads.
    pub rates: Vec<IndexRate>,
    /// Per index kind and operation (`workload` = `lookup 8MiB`, `insert`;
    /// `lock` = the index kind): serial time per operation with one
    /// thread, and its projection.
    pub serial: Vec<FsProjection>,
    /// The same with two threads on two CPUs (contended; see the module
    /// comment), and its projection.
    #[serde(default)]
    pub serial_contended: Vec<FsProjection>,
    /// Timer overhead subtracted per timed interval, ns.
    pub timer_ns: u64,
    /// File-system points projected with these serial times (filled by
    /// `--reproduce ncache-fig7`, see
    /// [`crate::reproduce::fig7_projection`]).
    #[serde(default)]
    pub projection: Vec<FsProjection>,
}

/// Hold intervals kept per thread for the median (4 MiB of `u32`s).
const MAX_INTERVALS: usize = 1 << 20;

thread_local! {
    /// This thread's hold intervals (ns) since the last [`take_held`], the
    /// first [`MAX_INTERVALS`] of them.
    static HELD: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
    /// Every hold since the last [`take_held`], kept or not: the holds per
    /// operation are counted from this, not from the kept intervals.
    static HOLDS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The probe that records, per thread, how long each exclusive section
/// lasts.
pub struct HoldClock;

impl SerialProbe for HoldClock {
    type Token = Instant;
    fn enter() -> Instant {
        Instant::now()
    }
    fn exit(t: Instant) {
        let ns = t.elapsed().as_nanos().min(u32::MAX as u128) as u32;
        HOLDS.with(|n| n.set(n.get() + 1));
        HELD.with(|h| {
            let mut h = h.borrow_mut();
            if h.len() < MAX_INTERVALS {
                h.push(ns);
            }
        });
    }
}

/// This thread's kept hold intervals and its count of holds so far;
/// clears both.
fn take_held() -> (Vec<u32>, u64) {
    (
        HELD.with(|h| std::mem::take(&mut *h.borrow_mut())),
        HOLDS.with(|n| n.replace(0)),
    )
}

/// A tree of `kind` whose locked sections `P` times.
fn tree<P: SerialProbe + 'static>(kind: IndexKind) -> Box<dyn PageIndex<AtomicU64>> {
    match kind {
        IndexKind::Cas => Box::new(CasRadix::<AtomicU64>::new()),
        IndexKind::Rw => Box::new(RwRadix::<AtomicU64, P>::new()),
        IndexKind::Cascade => Box::new(CascadeRadix::<AtomicU64, P>::new()),
    }
}

/// The page thread `t` looks up at `stride` bytes.
fn lookup_key(t: usize, stride: u64) -> u64 {
    (t as u64 * (stride / crate::workload::BLOCK as u64)) % KEY_LIMIT
}

/// Totals of one run: operations, seconds, hold intervals (ns) as kept
/// (at most [`MAX_INTERVALS`] per thread) and the count of all holds.
#[derive(Debug, Default, Clone)]
struct Run {
    ops: u64,
    secs: f64,
    held: Vec<u32>,
    holds: u64,
}

impl Run {
    fn rate(&self) -> f64 {
        self.ops as f64 / self.secs.max(1e-9)
    }

    /// Holds per operation, all of them counted.
    fn holds_per_op(&self) -> f64 {
        self.holds as f64 / self.ops.max(1) as f64
    }

    /// Serial ns per operation: the median hold interval less `timer_ns`,
    /// times the holds per operation. The median, not the mean: on a
    /// shared machine a holder preempted by someone else's process would
    /// otherwise count a whole time slice.
    fn serial_ns(&self, timer_ns: u64) -> f64 {
        if self.held.is_empty() || self.ops == 0 {
            return 0.0;
        }
        let mut v = self.held.clone();
        let mid = v.len() / 2;
        let (_, median, _) = v.select_nth_unstable(mid);
        let per_op = self.holds_per_op();
        (*median as u64).saturating_sub(timer_ns) as f64 * per_op
    }
}

/// `threads` threads run `body(t, stop)` after a common start; returns the
/// summed (ops, held ns, held intervals) and the seconds from start to the
/// last join.
fn run_threads(
    threads: usize,
    pin: bool,
    stop_after: Option<Duration>,
    body: &(dyn Fn(usize, &AtomicBool) -> u64 + Sync),
) -> Run {
    let cpus = allowed_cpus();
    let gate = Gate::new();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (gate, stop, cpus) = (&gate, &stop, &cpus);
                s.spawn(move || {
                    if pin {
                        pin_current_thread(cpus[t % cpus.len()]);
                    }
                    take_held();
                    gate.arrive_and_wait();
                    let ops = body(t, stop);
                    (ops, take_held())
                })
            })
            .collect();
        gate.open_when(threads);
        let t0 = Instant::now();
        if let Some(d) = stop_after {
            std::thread::sleep(d);
            stop.store(true, Ordering::Relaxed);
        }
        let mut run = Run::default();
        for h in handles {
            // A panicking worker is a bug in the bench: count nothing.
            if let Ok((ops, (held, holds))) = h.join() {
                run.ops += ops;
                run.held.extend(held);
                run.holds += holds;
            }
        }
        run.secs = t0.elapsed().as_secs_f64();
        run
    })
}

/// Lookups of each thread's page at `stride` for `duration`.
fn lookups(tree: &dyn PageIndex<AtomicU64>, threads: usize, stride: u64, cfg: &IndexConfig) -> Run {
    for t in 0..threads {
        tree.get_or_insert(lookup_key(t, stride))
            .store(t as u64 + 1, Ordering::Relaxed);
    }
    // The setup's insertions are not part of the measurement.
    take_held();
    run_threads(threads, cfg.pin, Some(cfg.duration), &|t, stop| {
        let key = lookup_key(t, stride);
        let mut ops = 0u64;
        while !stop.load(Ordering::Relaxed) {
            for _ in 0..256 {
                let v = tree.get(std::hint::black_box(key));
                std::hint::black_box(v.map(|v| v.load(Ordering::Relaxed)));
            }
            ops += 256;
        }
        ops
    })
}

/// [`INSERTS`] new leaves per thread into a fresh tree.
fn inserts(tree: &dyn PageIndex<AtomicU64>, threads: usize, pin: bool) -> Run {
    let n = threads as u64;
    run_threads(threads, pin, None, &|t, _| {
        for i in 0..INSERTS {
            let key = ((i * n + t as u64) * FANOUT as u64) % KEY_LIMIT;
            std::hint::black_box(tree.get_or_insert(key));
        }
        INSERTS
    })
}

/// The median-rate run of three insert runs on fresh trees of `kind`,
/// after one unmeasured run (so every kind finds the allocator warm, not
/// only those measured after the first).
fn insert_run<P: SerialProbe + 'static>(kind: IndexKind, threads: usize, pin: bool) -> Run {
    let mut runs: Vec<Run> = (0..4)
        .map(|_| inserts(&*tree::<P>(kind), threads, pin))
        .skip(1)
        .collect();
    runs.sort_by(|a, b| a.rate().total_cmp(&b.rate()));
    runs.swap_remove(1)
}

/// Run the index microbenchmarks; `progress` is called before each step.
pub fn run_index(cfg: &IndexConfig, mut progress: impl FnMut(&str)) -> IndexReport {
    let timer = timer_overhead_ns();
    let mut rep = IndexReport {
        timer_ns: timer,
        ..Default::default()
    };
    let mut threads = cfg.threads.clone();
    for must in [1, 2] {
        if !threads.contains(&must) {
            threads.push(must);
        }
    }
    threads.sort_unstable();
    for &kind in &cfg.kinds {
        for &stride in &cfg.strides {
            let mut x = [0.0f64; 2];
            for &n in &threads {
                progress(&format!("index {kind} lookup stride {stride} {n} threads"));
                let r = lookups(&*tree::<NoProbe>(kind), n, stride, cfg);
                if n <= 2 {
                    x[n - 1] = r.rate();
                }
                rep.rates.push(IndexRate {
                    index: kind.to_string(),
                    op: "lookup".into(),
                    stride,
                    threads: n,
                    ops_per_sec: r.rate(),
                });
            }
            progress(&format!("index {kind} lookup stride {stride} serial time"));
            let workload = format!("lookup {}", stride_label(stride));
            for (n, out) in [(1, &mut rep.serial), (2, &mut rep.serial_contended)] {
                let timed = lookups(&*tree::<HoldClock>(kind), n, stride, cfg);
                let serial = timed.serial_ns(timer);
                out.push(project_point(
                    &workload,
                    kind.name(),
                    x[0],
                    x[1],
                    serial,
                    cfg.cores,
                ));
            }
        }
        let mut x = [0.0f64; 2];
        for &n in &threads {
            progress(&format!("index {kind} insert {n} threads"));
            let r = insert_run::<NoProbe>(kind, n, cfg.pin);
            if n <= 2 {
                x[n - 1] = r.rate();
            }
            rep.rates.push(IndexRate {
                index: kind.to_string(),
                op: "insert".into(),
                stride: 0,
                threads: n,
                ops_per_sec: r.rate(),
            });
        }
        progress(&format!("index {kind} insert serial time"));
        for (n, out) in [(1, &mut rep.serial), (2, &mut rep.serial_contended)] {
            let serial = insert_run::<HoldClock>(kind, n, cfg.pin).serial_ns(timer);
            out.push(project_point(
                "insert",
                kind.name(),
                x[0],
                x[1],
                serial,
                cfg.cores,
            ));
        }
    }
    rep
}

/// `8MiB`, `4KiB`, or bytes.
pub fn stride_label(stride: u64) -> String {
    if stride >= 1 << 20 && stride.is_multiple_of(1 << 20) {
        format!("{}MiB", stride >> 20)
    } else if stride >= 1 << 10 && stride.is_multiple_of(1 << 10) {
        format!("{}KiB", stride >> 10)
    } else {
        format!("{stride}B")
    }
}

impl IndexReport {
    /// Serial ns per lookup of `index` at `stride`: the contended time
    /// (two threads), or the one-thread time where a report has none (0 if
    /// neither was measured).
    pub fn lookup_serial_ns(&self, index: IndexKind, stride: u64) -> f64 {
        let w = format!("lookup {}", stride_label(stride));
        let find = |v: &[FsProjection]| {
            v.iter()
                .find(|r| r.workload == w && r.lock == index.name())
                .map(|r| r.serial_ns)
        };
        find(&self.serial_contended)
            .or_else(|| find(&self.serial))
            .unwrap_or(0.0)
    }

    /// Render the rates and the serial-time table.
    pub fn table(&self) -> String {
        let mut out = String::from(
            "File-index operations per second (lookup: one present page per thread at the \
             stride; insert: a new leaf per operation)\n",
        );
        let rows: Vec<Vec<String>> = self
            .rates
            .iter()
            .map(|r| {
                vec![
                    r.index.clone(),
                    r.op.clone(),
                    if r.op == "lookup" {
                        stride_label(r.stride)
                    } else {
                        "-".into()
                    },
                    r.threads.to_string(),
                    crate::report::si(r.ops_per_sec),
                ]
            })
            .collect();
        out += &crate::report::text_table(
            &["index", "op", "stride", "threads", "ops/s"],
            &rows,
            1,
            crate::report::Rule::Columns,
        );
        let cores = self.serial.first().map_or(120, |r| r.cores);
        out += &format!(
            "\nSerial time per index operation (inside exclusive locks: none for cas, write-locked \
             insertion for rw, the root mutex for cascade; median interval less the timer \
             overhead of {} ns, times intervals per operation), projected to {cores} cores\n",
            self.timer_ns
        );
        out += &crate::locks::projection_rows(&self.serial, "index");
        if !self.serial_contended.is_empty() {
            out += "\nThe same with two threads pinned to two CPUs (contended: a cascade root \
                    holder waits for the next node's mutex; ncache-fig7 projects with these)\n";
            out += &crate::locks::projection_rows(&self.serial_contended, "index");
        }
        out
    }

    /// Write the report as one JSON object.
    pub fn write_json(&self, path: &std::path::Path) -> crate::Result<()> {
        let text = serde_json::to_string_pretty(self)?;
        std::fs::write(path, text + "\n").map_err(|e| crate::BenchError::io("write", path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_index_run_measures_the_expected_serial_parts() {
        let cfg = IndexConfig {
            threads: vec![1, 2, 3],
            duration: Duration::from_millis(20),
            ..Default::default()
        };
        let rep = run_index(&cfg, |_| {});
        // 3 kinds x (2 strides + insert) x 3 thread counts.
        assert_eq!(rep.rates.len(), 3 * 3 * 3);
        assert!(rep.rates.iter().all(|r| r.ops_per_sec > 0.0), "{rep:?}");
        assert_eq!(rep.serial.len(), 3 * 3);
        assert_eq!(rep.serial_contended.len(), 3 * 3);
        let find = |v: &[FsProjection], w: &str, k: &str| {
            v.iter()
                .find(|r| r.workload == w && r.lock == k)
                .unwrap()
                .serial_ns
        };
        let contended = |w: &str, k: &str| find(&rep.serial_contended, w, k);
        // No lock, no serial part; rw lookups take read locks only.
        for v in [&rep.serial, &rep.serial_contended] {
            assert_eq!(find(v, "lookup 8MiB", "cas"), 0.0);
            assert_eq!(find(v, "insert", "cas"), 0.0);
            assert_eq!(find(v, "lookup 8MiB", "rw"), 0.0);
        }
        for r in rep.serial.iter().chain(&rep.serial_contended) {
            assert!(r.serial_ns >= 0.0, "{r:?}");
        }
        // Which operations hold something exclusive, counted (how long is
        // at the timer's resolution for a cascade lookup on a fast CPU, so
        // the times above may round to 0): every cascade operation holds
        // the root, every rw insert the write lock of the leaf's parent.
        let lookup = |kind| lookups(&*tree::<HoldClock>(kind), 1, 4096, &cfg).holds_per_op();
        let insert = |kind| insert_run::<HoldClock>(kind, 1, false).holds_per_op();
        assert_eq!(lookup(IndexKind::Cas), 0.0);
        assert_eq!(lookup(IndexKind::Rw), 0.0);
        assert!(lookup(IndexKind::Cascade) >= 1.0);
        assert_eq!(insert(IndexKind::Cas), 0.0);
        assert!(insert(IndexKind::Rw) > 0.0);
        assert!(insert(IndexKind::Cascade) >= 1.0);
        // The file-system projection takes the contended time.
        assert_eq!(
            rep.lookup_serial_ns(IndexKind::Cascade, 4096),
            contended("lookup 4KiB", "cascade")
        );
        let t = rep.table();
        assert!(t.contains("cascade") && t.contains("Amdahl@120"), "{t}");
        assert!(t.contains("two threads pinned"), "{t}");
        let back: IndexReport =
            serde_json::from_str(&serde_json::to_string(&rep).unwrap()).unwrap();
        assert_eq!(back.serial.len(), rep.serial.len());
    }

    #[test]
    fn holds_past_the_kept_intervals_still_count_per_operation() {
        // A long lookup run keeps the first MAX_INTERVALS intervals per
        // thread; the holds per operation must count every hold.
        let held_run = || {
            take_held();
            for _ in 0..MAX_INTERVALS + 1000 {
                HoldClock::exit(HoldClock::enter());
            }
            take_held()
        };
        let (held, holds) = held_run();
        assert_eq!(held.len(), MAX_INTERVALS);
        assert_eq!(holds, MAX_INTERVALS as u64 + 1000);
        let run = Run {
            ops: holds,
            secs: 1.0,
            held,
            holds,
        };
        assert_eq!(run.holds_per_op(), 1.0);
        // Intervals of at least 0 ns: the serial time is the median times
        // one hold per operation, never scaled down by the cap.
        let median = {
            let mut v = run.held.clone();
            v.sort_unstable();
            v[v.len() / 2] as f64
        };
        assert_eq!(run.serial_ns(0), median);
        assert_eq!(take_held().1, 0, "take_held clears the count");
    }

    #[test]
    fn stride_labels() {
        assert_eq!(stride_label(8 << 20), "8MiB");
        assert_eq!(stride_label(4096), "4KiB");
        assert_eq!(stride_label(6144), "6KiB");
        assert_eq!(stride_label(100), "100B");
    }
}
