//! Range-lock microbenchmarks (SRL-NOVA (segment range lock) paper, Fig. 10 and 11) and the serial
//! time each lock kind imposes on threads writing disjoint ranges.
//!
//! * Acquisition latency: every thread write-locks successive 4 KiB blocks
//!   of its own 8 MiB region of one lock, copying 4 KiB while it holds the
//!   range (a stand-in for the data copy of a write). "initial" is the first
//!   pass over a fresh lock (SRL-tree allocates its radix nodes then);
//!   "overwrite" repeats passes over the same blocks for the duration.
//! * Memory: lock every segment of a file of each size once, then ask the
//!   lock for [`RangeLock::memory_bytes`].
//! * Serial time: with timestamps around the critical sections of one
//!   thread's acquire -> copy -> release loop, the part of an operation that
//!   a thread on a *disjoint* range must wait for: the whole acquire ->
//!   release span for the per-inode lock, the time inside `acquire` and
//!   `release` (which hold the list mutex) for the interval lock, and zero
//!   for SRL (disjoint ranges share no lock word). With the serial fraction
//!   `s = serial / op time`, Amdahl's law projects
//!   `X(N) = X(1) * N / (1 + s (N - 1))`, and the universal scalability law
//!   `X(N) = X(1) * N / (1 + σ (N - 1) + κ N (N - 1))` with `σ = s` and the
//!   coherence term `κ = max(0, (2 X(1) / X(2) - 1 - σ) / 2)` fitted to the
//!   measured two-thread rate.

use crate::report::{Rule, ns, si, text_table};
use crate::runner::{Histogram, add_histogram, latency_histogram, record_latency};
use crate::sys::{AlignedBuf, Gate, allowed_cpus, pin_current_thread};
use crate::workload::{BLOCK, REGION};
use manyfs_rangelock::{Access, LockKind, RangeLock};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Core count the serial-time projection is made for (the papers' machine).
pub const PROJECT_CORES: usize = 56;

/// What the lock microbenchmarks run.
#[derive(Debug, Clone)]
pub struct LockConfig {
    /// Lock kinds, in order.
    pub kinds: Vec<LockKind>,
    /// Thread counts for the latency sweep.
    pub threads: Vec<usize>,
    /// Measured time of each overwrite point and of each serial-time run.
    pub duration: Duration,
    /// Segment size of the SRL kinds.
    pub segment_size: u64,
    /// File sizes of the memory sweep.
    pub file_sizes: Vec<u64>,
    /// Pin threads round-robin to the allowed CPUs.
    pub pin: bool,
}

impl Default for LockConfig {
    fn default() -> Self {
        LockConfig {
            kinds: LockKind::ALL.to_vec(),
            threads: vec![1, 2, 64],
            duration: Duration::from_millis(500),
            segment_size: 4096,
            file_sizes: vec![1 << 20, 64 << 20, 1 << 30, 4 << 30],
            pin: true,
        }
    }
}

/// Acquisition latency at one thread count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyRecord {
    /// Lock kind.
    pub lock: String,
    /// `initial` or `overwrite`.
    pub phase: String,
    /// Threads.
    pub threads: usize,
    /// Acquisitions measured.
    pub ops: u64,
    /// Mean time inside `acquire`, ns.
    pub mean_ns: f64,
    /// Median time inside `acquire`, ns.
    pub p50_ns: u64,
    /// 99th percentile time inside `acquire`, ns.
    pub p99_ns: u64,
    /// Lock + copy + unlock cycles per second, all threads.
    pub ops_per_sec: f64,
}

/// Lock memory for one file size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryRecord {
    /// Lock kind.
    pub lock: String,
    /// File size whose every segment was locked once.
    pub file_bytes: u64,
    /// [`RangeLock::memory_bytes`] afterwards.
    pub lock_bytes: u64,
}

/// Serial time per operation and its projection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SerialRecord {
    /// Lock kind.
    pub lock: String,
    /// Mean time of one lock + 4 KiB copy + unlock operation, one thread, ns.
    pub op_ns: f64,
    /// Mean time inside `acquire` + `release`, ns.
    pub lock_call_ns: f64,
    /// Mean time per operation that a disjoint-range thread must wait out, ns.
    pub serial_ns: f64,
    /// `serial_ns / op_ns`.
    pub serial_fraction: f64,
    /// Measured operations per second with one thread.
    pub x1: f64,
    /// Measured operations per second with two threads on disjoint ranges.
    pub x2: f64,
    /// Amdahl speedup at [`PROJECT_CORES`].
    pub amdahl_speedup: f64,
    /// Fitted USL coherence coefficient κ.
    pub usl_kappa: f64,
    /// USL speedup at [`PROJECT_CORES`].
    pub usl_speedup: f64,
    /// Cores the projection is for.
    pub cores: usize,
    /// Timer overhead subtracted from each timed interval, ns.
    pub timer_ns: u64,
}

/// Everything `manyfs bench --locks` measures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LockReport {
    /// Acquisition latency vs threads.
    pub latency: Vec<LatencyRecord>,
    /// Lock memory vs file size.
    pub memory: Vec<MemoryRecord>,
    /// Serial time and projection.
    pub serial: Vec<SerialRecord>,
}

/// Amdahl speedup with serial fraction `s` on `n` cores.
pub fn amdahl(s: f64, n: usize) -> f64 {
    let n = n as f64;
    n / (1.0 + s.clamp(0.0, 1.0) * (n - 1.0))
}

/// USL speedup with contention `sigma` and coherence `kappa` on `n` cores.
pub fn usl(sigma: f64, kappa: f64, n: usize) -> f64 {
    let n = n as f64;
    n / (1.0 + sigma.max(0.0) * (n - 1.0) + kappa.max(0.0) * n * (n - 1.0))
}

/// Two-thread deficits smaller than this fraction of the USL-with-σ
/// prediction are treated as measurement noise (κ = 0): on a 2-core VM a 1%
/// wobble would otherwise read as κ ≈ 0.005 and project a collapse at 56
/// cores that nothing measured supports.
pub const KAPPA_NOISE: f64 = 0.05;

/// κ such that the USL with `sigma` reproduces the measured two-thread
/// speedup `x2 / x1` (0 when the deficit is within [`KAPPA_NOISE`]).
pub fn fit_kappa(sigma: f64, x1: f64, x2: f64) -> f64 {
    if x1 <= 0.0 || x2 <= 0.0 {
        return 0.0;
    }
    let predicted = usl(sigma, 0.0, 2);
    if x2 / x1 >= predicted * (1.0 - KAPPA_NOISE) {
        return 0.0;
    }
    ((2.0 * x1 / x2 - 1.0 - sigma) / 2.0).max(0.0)
}

/// Mean cost of one `Instant::now()` in nanoseconds, subtracted from each
/// timed interval (each interval spans one timer read).
pub fn timer_overhead_ns() -> u64 {
    let n = 20_000u32;
    let t0 = Instant::now();
    let mut last = t0;
    for _ in 0..n {
        last = std::hint::black_box(Instant::now());
    }
    ((last - t0).as_nanos() / n as u128) as u64
}

/// Blocks of the per-thread destination buffer the copies cycle over.
const DST_BLOCKS: usize = 16;

fn region(thread: usize) -> u64 {
    thread as u64 * REGION
}

fn blocks_per_thread() -> u64 {
    REGION / BLOCK as u64
}

/// One thread's timed lock-copy-unlock loop.
struct Timings {
    acquire: Histogram,
    acquire_ns: u64,
    release_ns: u64,
    serial_ns: u64,
    ops: u64,
}

struct Cycle<'a> {
    lock: &'a dyn RangeLock,
    kind: LockKind,
    timer_ns: u64,
}

fn timed_cycle(c: &Cycle<'_>, start: u64, src: &[u8], dst: &mut [u8], t: &mut Timings) {
    let (lock, kind, timer) = (c.lock, c.kind, c.timer_ns);
    let end = start + BLOCK as u64;
    let t0 = Instant::now();
    lock.acquire(start, end, Access::Write);
    let t1 = Instant::now();
    dst.copy_from_slice(src);
    std::hint::black_box(&mut *dst);
    let t2 = Instant::now();
    lock.release(start, end, Access::Write);
    let t3 = Instant::now();
    let acq = ((t1 - t0).as_nanos() as u64).saturating_sub(timer);
    let rel = ((t3 - t2).as_nanos() as u64).saturating_sub(timer);
    record_latency(&mut t.acquire, acq);
    t.acquire_ns += acq;
    t.release_ns += rel;
    t.serial_ns += match kind {
        LockKind::Inode => ((t3 - t0).as_nanos() as u64).saturating_sub(timer),
        LockKind::Interval => acq + rel,
        LockKind::SrlArray | LockKind::SrlTree => 0,
    };
    t.ops += 1;
}

/// Run `threads` threads on `lock`: an optional first pass over each
/// thread's blocks (measured as "initial"), then passes for `duration`.
fn run_threads(
    lock: &dyn RangeLock,
    threads: usize,
    duration: Duration,
    pin: bool,
    timer_ns: u64,
) -> (Timings, Timings, Duration) {
    let cpus = allowed_cpus();
    let start = Gate::new();
    let initial_done = Gate::new();
    let stop = AtomicBool::new(false);
    let cycle = Cycle {
        lock,
        kind: lock.kind(),
        timer_ns,
    };
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (start, initial_done, stop, cpus, cycle) =
                    (&start, &initial_done, &stop, &cpus, &cycle);
                s.spawn(move || {
                    if pin {
                        pin_current_thread(cpus[i % cpus.len()]);
                    }
                    let src = AlignedBuf::new(BLOCK);
                    let mut dst = AlignedBuf::new(DST_BLOCKS * BLOCK);
                    let new_t = || Timings {
                        acquire: latency_histogram(),
                        acquire_ns: 0,
                        release_ns: 0,
                        serial_ns: 0,
                        ops: 0,
                    };
                    let (mut first, mut again) = (new_t(), new_t());
                    // One timed cycle on block `b` of this thread's region.
                    let mut block = |b: u64, t: &mut Timings| {
                        let o = (b as usize % DST_BLOCKS) * BLOCK;
                        let off = region(i) + b * BLOCK as u64;
                        timed_cycle(cycle, off, &src, &mut dst[o..o + BLOCK], t);
                    };
                    start.arrive_and_wait();
                    let n = blocks_per_thread();
                    for b in 0..n {
                        block(b, &mut first);
                    }
                    initial_done.arrive_and_wait();
                    let mut b = 0;
                    while !stop.load(Ordering::Relaxed) {
                        block(b, &mut again);
                        b = (b + 1) % n;
                    }
                    (first, again)
                })
            })
            .collect();
        start.open_when(threads);
        initial_done.open_when(threads);
        let start = Instant::now();
        std::thread::sleep(duration);
        stop.store(true, Ordering::Relaxed);
        let elapsed = start.elapsed();
        let mut first = Timings {
            acquire: latency_histogram(),
            acquire_ns: 0,
            release_ns: 0,
            serial_ns: 0,
            ops: 0,
        };
        let mut again = Timings {
            acquire: latency_histogram(),
            acquire_ns: 0,
            release_ns: 0,
            serial_ns: 0,
            ops: 0,
        };
        for h in handles {
            let (f, a) = h.join().expect("lock bench thread");
            for (into, from) in [(&mut first, f), (&mut again, a)] {
                add_histogram(&mut into.acquire, &from.acquire);
                into.acquire_ns += from.acquire_ns;
                into.release_ns += from.release_ns;
                into.serial_ns += from.serial_ns;
                into.ops += from.ops;
            }
        }
        (first, again, elapsed)
    })
}

/// Operations per second of a timed run (`elapsed` floored at 1 ns).
fn rate(t: &Timings, elapsed: Duration) -> f64 {
    t.ops as f64 / elapsed.as_secs_f64().max(1e-9)
}

fn latency(kind: LockKind, phase: &str, threads: usize, t: &Timings, secs: f64) -> LatencyRecord {
    LatencyRecord {
        lock: kind.to_string(),
        phase: phase.to_string(),
        threads,
        ops: t.ops,
        mean_ns: t.acquire_ns as f64 / t.ops.max(1) as f64,
        p50_ns: t.acquire.value_at_quantile(0.5),
        p99_ns: t.acquire.value_at_quantile(0.99),
        ops_per_sec: if secs > 0.0 { t.ops as f64 / secs } else { 0.0 },
    }
}

/// Run the lock microbenchmarks; `progress` is called with a message
/// before each step.
pub fn run_locks(cfg: &LockConfig, mut progress: impl FnMut(&str)) -> LockReport {
    let mut rep = LockReport::default();
    let timer = timer_overhead_ns();
    let max_threads = cfg.threads.iter().copied().max().unwrap_or(1).max(2);
    for &kind in &cfg.kinds {
        let mut x = [0.0f64; 2];
        let mut serial = None;
        for &n in &cfg.threads {
            progress(&format!("lock latency {kind} {n} threads"));
            let lock = kind.build(cfg.segment_size, max_threads as u64 * REGION);
            let t0 = Instant::now();
            let (first, again, elapsed) = run_threads(&*lock, n, cfg.duration, cfg.pin, timer);
            // The initial pass ends when the slowest thread finishes it.
            let initial_secs = (t0.elapsed() - elapsed).as_secs_f64();
            rep.latency
                .push(latency(kind, "initial", n, &first, initial_secs));
            rep.latency
                .push(latency(kind, "overwrite", n, &again, elapsed.as_secs_f64()));
            let per_sec = rate(&again, elapsed);
            if n == 1 {
                x[0] = per_sec;
                serial = Some(again);
            } else if n == 2 {
                x[1] = per_sec;
            }
        }
        if x[1] == 0.0 {
            progress(&format!("lock serial time {kind} 2 threads"));
            let lock = kind.build(cfg.segment_size, 2 * REGION);
            let (_, again, elapsed) = run_threads(&*lock, 2, cfg.duration, cfg.pin, timer);
            x[1] = rate(&again, elapsed);
        }
        let one = match serial {
            Some(t) => t,
            None => {
                progress(&format!("lock serial time {kind} 1 thread"));
                let lock = kind.build(cfg.segment_size, REGION);
                let (_, again, elapsed) = run_threads(&*lock, 1, cfg.duration, cfg.pin, timer);
                x[0] = rate(&again, elapsed);
                again
            }
        };
        let ops = one.ops.max(1) as f64;
        let op_ns = if x[0] > 0.0 { 1e9 / x[0] } else { 0.0 };
        let serial_ns = one.serial_ns as f64 / ops;
        let s = if op_ns > 0.0 {
            (serial_ns / op_ns).min(1.0)
        } else {
            0.0
        };
        let kappa = fit_kappa(s, x[0], x[1]);
        rep.serial.push(SerialRecord {
            lock: kind.to_string(),
            op_ns,
            lock_call_ns: (one.acquire_ns + one.release_ns) as f64 / ops,
            serial_ns,
            serial_fraction: s,
            x1: x[0],
            x2: x[1],
            amdahl_speedup: amdahl(s, PROJECT_CORES),
            usl_kappa: kappa,
            usl_speedup: usl(s, kappa, PROJECT_CORES),
            cores: PROJECT_CORES,
            timer_ns: timer,
        });
        for &size in &cfg.file_sizes {
            progress(&format!("lock memory {kind} {size} bytes"));
            let lock = kind.build(cfg.segment_size, size);
            let mut off = 0;
            while off < size {
                let end = (off + cfg.segment_size).min(size);
                lock.acquire(off, end, Access::Write);
                lock.release(off, end, Access::Write);
                off = end;
            }
            rep.memory.push(MemoryRecord {
                lock: kind.to_string(),
                file_bytes: size,
                lock_bytes: lock.memory_bytes() as u64,
            });
        }
    }
    rep
}

/// The serial-time projection applied to a measured file-system workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FsProjection {
    /// Workload (e.g. `DWOM`).
    pub workload: String,
    /// Lock kind of the `lib:` target (or the series label, for figures
    /// that vary more than the lock).
    pub lock: String,
    /// Measured time per operation with one thread, ns (1e9 / ops/s).
    pub op_ns: f64,
    /// Serial time per operation, ns (see [`project_fs`]).
    pub serial_ns: f64,
    /// `serial_ns / op_ns`.
    pub serial_fraction: f64,
    /// Measured two-thread over one-thread throughput.
    pub speedup_2: f64,
    /// Amdahl speedup at `cores`.
    pub amdahl_speedup: f64,
    /// USL κ fitted to `speedup_2`.
    pub usl_kappa: f64,
    /// USL speedup at `cores`.
    pub usl_speedup: f64,
    /// Cores the projection is for ([`PROJECT_CORES`] unless a figure says
    /// otherwise).
    #[serde(default = "project_cores")]
    pub cores: usize,
}

fn project_cores() -> usize {
    PROJECT_CORES
}

/// Project one measured point to `cores` cores: `x1`, `x2` the one- and
/// two-thread rates (ops/s), `serial_ns` the serial time per operation
/// (capped at the operation's time).
pub fn project_point(
    workload: &str,
    label: &str,
    x1: f64,
    x2: f64,
    serial_ns: f64,
    cores: usize,
) -> FsProjection {
    let op_ns = if x1 > 0.0 { 1e9 / x1 } else { 0.0 };
    let serial_ns = serial_ns.clamp(0.0, op_ns);
    let s = if op_ns > 0.0 { serial_ns / op_ns } else { 0.0 };
    let kappa = fit_kappa(s, x1, x2);
    FsProjection {
        workload: workload.to_string(),
        lock: label.to_string(),
        op_ns,
        serial_ns,
        serial_fraction: s,
        speedup_2: if x1 > 0.0 { x2 / x1 } else { 0.0 },
        amdahl_speedup: amdahl(s, cores),
        usl_kappa: kappa,
        usl_speedup: usl(s, kappa, cores),
        cores,
    }
}

/// Project a measured in-process *write* workload (DWOM, DWOL) to
/// [`PROJECT_CORES`] cores.
///
/// The serial time per operation is taken from what the file system holds
/// while it writes: manyfs keeps a write's range locked for the whole copy
/// and log append, so with the per-inode lock the whole operation is serial
/// (`s = 1`); with the interval lock the serial part is the time inside its
/// `acquire` + `release` (measured by the lock microbenchmark); with SRL it
/// is zero for disjoint ranges. X(1) and X(2) are the measured one- and
/// two-thread rates of `workload` on `lib:KIND`.
pub fn project_fs(
    rep: &LockReport,
    records: &[crate::Record],
    workload: &str,
) -> Vec<FsProjection> {
    let mut out = Vec::new();
    for sr in &rep.serial {
        let target = format!("lib:{}", sr.lock);
        let rate = |n: usize| {
            records
                .iter()
                .find(|r| r.workload == workload && r.target == target && r.threads == n)
                .map(|r| r.ops_per_sec)
        };
        let (Some(x1), Some(x2)) = (rate(1), rate(2)) else {
            continue;
        };
        if x1 <= 0.0 {
            continue;
        }
        let op_ns = 1e9 / x1;
        let serial_ns = match sr.lock.as_str() {
            "inode" => op_ns,
            "interval" => sr.lock_call_ns.min(op_ns),
            _ => 0.0,
        };
        out.push(project_point(
            workload,
            &sr.lock,
            x1,
            x2,
            serial_ns,
            PROJECT_CORES,
        ));
    }
    out
}

/// Titles of the projection columns ([`projection_cells`]) for `cores`.
fn projection_header(cores: usize) -> Vec<String> {
    vec![
        "serial".into(),
        "s".into(),
        "X(2)/X(1)".into(),
        format!("Amdahl@{cores}"),
        "USL k".into(),
        format!("USL@{cores}"),
    ]
}

/// The projection columns of one row: serial time, serial fraction,
/// measured two-thread speedup, Amdahl and USL projections.
fn projection_cells(
    serial_ns: f64,
    s: f64,
    speedup_2: f64,
    amdahl: f64,
    kappa: f64,
    usl: f64,
) -> [String; 6] {
    [
        format!("{serial_ns:.0}ns"),
        format!("{s:.3}"),
        format!("{speedup_2:.2}"),
        format!("{amdahl:.2}x"),
        format!("{kappa:.2e}"),
        format!("{usl:.2}x"),
    ]
}

/// Render [`project_fs`] results as a table.
pub fn projection_table(p: &[FsProjection]) -> String {
    let cores = p.first().map_or(PROJECT_CORES, |r| r.cores);
    let mut out = format!(
        "In-process workload projected to {cores} cores (serial part: whole write for inode, \
         lock calls for interval, 0 for SRL)\n"
    );
    out += &projection_rows(p, "lock");
    out
}

/// The rows of a projection table (`label` titles the second column),
/// without a title.
pub fn projection_rows(p: &[FsProjection], label: &str) -> String {
    let cores = p.first().map_or(PROJECT_CORES, |r| r.cores);
    let rows: Vec<Vec<String>> = p
        .iter()
        .map(|r| {
            let mut row = vec![
                r.workload.clone(),
                r.lock.clone(),
                format!("{:.0}ns", r.op_ns),
            ];
            row.extend(projection_cells(
                r.serial_ns,
                r.serial_fraction,
                r.speedup_2,
                r.amdahl_speedup,
                r.usl_kappa,
                r.usl_speedup,
            ));
            row
        })
        .collect();
    let mut header: Vec<String> = vec!["workload".into(), label.into(), "op (1t)".into()];
    header.extend(projection_header(cores));
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    aligned(&header, &rows)
}

fn bytes(v: u64) -> String {
    let f = v as f64;
    if v >= 1 << 30 {
        format!("{:.2} GiB", f / (1u64 << 30) as f64)
    } else if v >= 1 << 20 {
        format!("{:.2} MiB", f / (1u64 << 20) as f64)
    } else if v >= 1 << 10 {
        format!("{:.1} KiB", f / 1024.0)
    } else {
        format!("{v} B")
    }
}

fn aligned(header: &[&str], rows: &[Vec<String>]) -> String {
    text_table(header, rows, 1, Rule::Columns)
}

impl LockReport {
    /// Write the report as one JSON object (`latency`, `memory`, `serial`).
    pub fn write_json(&self, path: &std::path::Path) -> crate::Result<()> {
        let text = serde_json::to_string_pretty(self)?;
        std::fs::write(path, text + "\n").map_err(|e| crate::BenchError::io("write", path, e))
    }

    /// Render the three result tables and the projection formula.
    pub fn table(&self) -> String {
        let mut out = String::from(
            "Range-lock acquisition latency (4 KiB write lock + 4 KiB copy + unlock, disjoint 8 MiB regions)\n",
        );
        let rows: Vec<Vec<String>> = self
            .latency
            .iter()
            .map(|r| {
                vec![
                    r.lock.clone(),
                    r.phase.clone(),
                    r.threads.to_string(),
                    format!("{:.0}ns", r.mean_ns),
                    ns(r.p50_ns),
                    ns(r.p99_ns),
                    si(r.ops_per_sec),
                ]
            })
            .collect();
        out += &aligned(
            &[
                "lock",
                "phase",
                "threads",
                "mean acquire",
                "p50",
                "p99",
                "cycles/s",
            ],
            &rows,
        );
        out += "\nRange-lock memory after locking every segment of a file once\n";
        let rows: Vec<Vec<String>> = self
            .memory
            .iter()
            .map(|r| vec![r.lock.clone(), bytes(r.file_bytes), bytes(r.lock_bytes)])
            .collect();
        out += &aligned(&["lock", "file size", "lock memory"], &rows);
        out += &format!(
            "\nSerial time per operation for threads on disjoint ranges, projected to {PROJECT_CORES} cores\n\
             Amdahl: X(N) = X(1)*N / (1 + s*(N-1)),  s = serial/op\n\
             USL:    X(N) = X(1)*N / (1 + s*(N-1) + k*N*(N-1)),  k fitted so that X(2) matches the measurement\n\
             (two-thread deficits under {:.0}% are taken as noise, k = 0; timer overhead of {} ns subtracted per interval)\n",
            KAPPA_NOISE * 100.0,
            self.serial.first().map_or(0, |r| r.timer_ns)
        );
        let rows: Vec<Vec<String>> = self
            .serial
            .iter()
            .map(|r| {
                let mut row = vec![
                    r.lock.clone(),
                    format!("{:.0}ns", r.op_ns),
                    format!("{:.0}ns", r.lock_call_ns),
                ];
                row.extend(projection_cells(
                    r.serial_ns,
                    r.serial_fraction,
                    if r.x1 > 0.0 { r.x2 / r.x1 } else { 0.0 },
                    r.amdahl_speedup,
                    r.usl_kappa,
                    r.usl_speedup,
                ));
                row
            })
            .collect();
        let mut header: Vec<String> = vec!["lock".into(), "op".into(), "in lock calls".into()];
        header.extend(projection_header(PROJECT_CORES));
        let header: Vec<&str> = header.iter().map(String::as_str).collect();
        out += &aligned(&header, &rows);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn laws() {
        assert!((amdahl(0.0, 56) - 56.0).abs() < 1e-9);
        assert!((amdahl(1.0, 56) - 1.0).abs() < 1e-9);
        assert!((usl(0.0, 0.0, 56) - 56.0).abs() < 1e-9);
        // kappa reproduces the two-thread measurement.
        let k = fit_kappa(0.1, 100.0, 150.0);
        assert!((usl(0.1, k, 2) - 1.5).abs() < 1e-9);
        assert_eq!(fit_kappa(0.5, 100.0, 200.0), 0.0);
    }

    #[test]
    fn tiny_lock_run() {
        let cfg = LockConfig {
            threads: vec![1, 2, 3],
            duration: Duration::from_millis(20),
            file_sizes: vec![1 << 20, 16 << 20],
            ..Default::default()
        };
        let rep = run_locks(&cfg, |_| {});
        assert_eq!(rep.latency.len(), 4 * 3 * 2);
        assert_eq!(rep.memory.len(), 4 * 2);
        assert_eq!(rep.serial.len(), 4);
        for r in &rep.latency {
            assert!(r.ops > 0, "{r:?}");
        }
        for r in &rep.serial {
            assert!(r.serial_fraction >= 0.0 && r.serial_fraction <= 1.0);
            assert!(r.usl_speedup > 0.0 && r.amdahl_speedup >= 1.0 - 1e-9);
        }
        let t = rep.table();
        assert!(t.contains("srl-tree") && t.contains("Amdahl"));
        let json = serde_json::to_string(&rep).unwrap();
        let back: LockReport = serde_json::from_str(&json).unwrap();
        assert_eq!(back.serial.len(), 4);

        let rec = |t: &str, n: usize, ops: f64| crate::runner::test_record("DWOM", t, n, ops);
        let recs = vec![
            rec("lib:inode", 1, 1e6),
            rec("lib:inode", 2, 0.8e6),
            rec("lib:srl-tree", 1, 1e6),
            rec("lib:srl-tree", 2, 2e6),
        ];
        let p = project_fs(&rep, &recs, "DWOM");
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].lock, "inode");
        assert!((p[0].serial_fraction - 1.0).abs() < 1e-9);
        assert!((p[0].amdahl_speedup - 1.0).abs() < 1e-9);
        assert_eq!(p[1].serial_fraction, 0.0);
        assert!((p[1].usl_speedup - 56.0).abs() < 1e-9);
        assert!(projection_table(&p).contains("srl-tree"));
    }
}
