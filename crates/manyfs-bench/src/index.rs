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
//! * Serial time: one thread, with the tree's [`SerialProbe`] timing what
//!   excludes other threads on disjoint keys: nothing for `cas` (no lock),
//!   the write-locked insertion for `rw` (a lookup takes read locks only),
//!   the hold of the root's mutex for `cascade` (every operation passes it
//!   hand over hand): the median interval less the timer overhead, times
//!   the intervals per operation.
//!
//! Trees hold `AtomicU64` values and are called through
//! `dyn PageIndex`, the same indirection for every kind.

use crate::locks::{FsProjection, project_point, timer_overhead_ns};
use crate::sys::{Gate, allowed_cpus, pin_current_thread};
use manyfs::IndexKind;
use manyfs::index::cascade::CascadeRadix;
use manyfs::index::radix::{CasRadix, FANOUT, KEY_LIMIT};
use manyfs::index::rw::RwRadix;
use manyfs::index::{NoProbe, PageIndex, SerialProbe};
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
    /// `lock` = the index kind): serial time per operation and its
    /// projection.
    pub serial: Vec<FsProjection>,
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
    /// This thread's hold intervals (ns) since the last [`take_held`].
    static HELD: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
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
        HELD.with(|h| {
            let mut h = h.borrow_mut();
            if h.len() < MAX_INTERVALS {
                h.push(ns);
            }
        });
    }
}

/// This thread's hold intervals so far; clears them.
fn take_held() -> Vec<u32> {
    HELD.with(|h| std::mem::take(&mut *h.borrow_mut()))
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

/// Totals of one run: operations, seconds, hold intervals (ns).
#[derive(Debug, Default, Clone)]
struct Run {
    ops: u64,
    secs: f64,
    held: Vec<u32>,
}

impl Run {
    fn rate(&self) -> f64 {
        self.ops as f64 / self.secs.max(1e-9)
    }

    /// Serial ns per operation: the median hold interval less `timer_ns`,
    /// times the intervals per operation. The median, not the mean: on a
    /// shared machine a holder preempted by someone else's process would
    /// otherwise count a whole time slice.
    fn serial_ns(&self, timer_ns: u64) -> f64 {
        if self.held.is_empty() || self.ops == 0 {
            return 0.0;
        }
        let mut v = self.held.clone();
        let mid = v.len() / 2;
        let (_, median, _) = v.select_nth_unstable(mid);
        let per_op = self.held.len() as f64 / self.ops as f64;
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
            if let Ok((ops, held)) = h.join() {
                run.ops += ops;
                run.held.extend(held);
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
            let timed = lookups(&*tree::<HoldClock>(kind), 1, stride, cfg);
            rep.serial.push(project_point(
                &format!("lookup {}", stride_label(stride)),
                kind.name(),
                x[0],
                x[1],
                timed.serial_ns(timer),
                cfg.cores,
            ));
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
        let timed = insert_run::<HoldClock>(kind, 1, cfg.pin);
        rep.serial.push(project_point(
            "insert",
            kind.name(),
            x[0],
            x[1],
            timed.serial_ns(timer),
            cfg.cores,
        ));
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
    /// Serial ns per lookup of `index` at `stride` (0 if not measured).
    pub fn lookup_serial_ns(&self, index: IndexKind, stride: u64) -> f64 {
        let w = format!("lookup {}", stride_label(stride));
        self.serial
            .iter()
            .find(|r| r.workload == w && r.lock == index.name())
            .map_or(0.0, |r| r.serial_ns)
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
        let serial = |w: &str, k: &str| {
            rep.serial
                .iter()
                .find(|r| r.workload == w && r.lock == k)
                .unwrap()
                .serial_ns
        };
        // No lock, no serial part; rw lookups take read locks only.
        assert_eq!(serial("lookup 8MiB", "cas"), 0.0);
        assert_eq!(serial("insert", "cas"), 0.0);
        assert_eq!(serial("lookup 8MiB", "rw"), 0.0);
        for r in &rep.serial {
            assert!(r.serial_ns >= 0.0, "{r:?}");
        }
        // Which operations hold something exclusive, counted (how long is
        // at the timer's resolution for a cascade lookup on a fast CPU, so
        // the times above may round to 0): every cascade operation holds
        // the root, every rw insert the write lock of the leaf's parent.
        let holds_per_op = |r: Run| r.held.len() as f64 / r.ops.max(1) as f64;
        let lookup = |kind| holds_per_op(lookups(&*tree::<HoldClock>(kind), 1, 4096, &cfg));
        let insert = |kind| holds_per_op(insert_run::<HoldClock>(kind, 1, false));
        assert_eq!(lookup(IndexKind::Cas), 0.0);
        assert_eq!(lookup(IndexKind::Rw), 0.0);
        assert!(lookup(IndexKind::Cascade) >= 1.0);
        assert_eq!(insert(IndexKind::Cas), 0.0);
        assert!(insert(IndexKind::Rw) > 0.0);
        assert!(insert(IndexKind::Cascade) >= 1.0);
        assert_eq!(
            rep.lookup_serial_ns(IndexKind::Cascade, 4096),
            serial("lookup 4KiB", "cascade")
        );
        let t = rep.table();
        assert!(t.contains("cascade") && t.contains("Amdahl@120"), "{t}");
        let back: IndexReport =
            serde_json::from_str(&serde_json::to_string(&rep).unwrap()).unwrap();
        assert_eq!(back.serial.len(), rep.serial.len());
    }

    #[test]
    fn stride_labels() {
        assert_eq!(stride_label(8 << 20), "8MiB");
        assert_eq!(stride_label(4096), "4KiB");
        assert_eq!(stride_label(6144), "6KiB");
        assert_eq!(stride_label(100), "100B");
    }
}
