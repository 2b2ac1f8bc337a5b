//! Runs workloads on targets at several thread counts and collects one
//! [`Record`] per point.

use crate::sys::{allowed_cpus, pin_current_thread};
use crate::target::{PoolConfig, Target, TargetEnv};
use crate::workload::{Op, Workload};
use crate::{BenchError, Result};
use serde::{Deserialize, Serialize};
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The result of one (workload, target, threads) point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Workload name (`DWOM`, `MIX:3:1`, `MEM-W`, ...).
    pub workload: String,
    /// Target label (`lib:srl-tree`, `tmpfs`, `dir:/mnt/x`, `memory`).
    pub target: String,
    /// Worker threads.
    pub threads: usize,
    /// Completed operations per second, all threads together.
    pub ops_per_sec: f64,
    /// Bytes moved per second, all threads together (0 for metadata ops).
    pub bytes_per_sec: f64,
    /// Median operation latency in nanoseconds.
    pub p50_ns: u64,
    /// 99th percentile operation latency in nanoseconds.
    pub p99_ns: u64,
    /// Operations counted.
    pub ops: u64,
    /// Length of the measured window in seconds.
    pub seconds: f64,
    /// Runs of this point; the record is the run with the median ops/s.
    #[serde(default = "one")]
    pub runs: usize,
    /// Lowest ops/s over the runs.
    #[serde(default)]
    pub ops_per_sec_min: f64,
    /// Highest ops/s over the runs.
    #[serde(default)]
    pub ops_per_sec_max: f64,
    /// Set when the point ran under the EMULATED remote-access cost model
    /// ([`manyfs::MountOptions::remote_cost`]) or the EMULATED NVMM
    /// bandwidth cap ([`manyfs::MountOptions::bandwidth_cap`]): their
    /// parameters ([`emulated_label`], [`emulated_cap_label`], joined by
    /// `; `). Such a figure is not a measurement of remote memory or of
    /// NVMM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulated: Option<String>,
    /// The threads thread placement moved during the point, warm-up
    /// included ([`manyfs::diag::placement_report`]), as `N` or `N (REASON
    /// n, ...)`; `None` where thread placement was off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moves: Option<String>,
    /// What a `lib:` point made durable per operation (pool bytes and
    /// cache lines, device bytes and flushes); `None` for other targets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persist: Option<PersistPerOp>,
    /// Latency of the `write` of each operation alone, where the point
    /// timed it apart from its `fsync` (`--reproduce tier-fig6`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_latency: Option<Percentiles>,
    /// Latency of the `fsync` of each operation alone, where it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fsync_latency: Option<Percentiles>,
    /// The share of the machine's CPU time the host (hypervisor) stole
    /// while the point ran, warm-up included (0 to 1, from `/proc/stat`):
    /// on a shared virtual machine, the noise a ratio cannot see.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal: Option<f64>,
}

/// Points of a latency distribution, in nanoseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    /// Latencies recorded.
    pub count: u64,
    /// Median.
    pub p50_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// Largest.
    pub max_ns: u64,
    /// The cumulative distribution: `[latency_ns, fraction]` pairs, the
    /// fraction of the latencies at or below `latency_ns`, at about
    /// [`CDF_POINTS`] log-spaced latencies from the smallest to the
    /// largest (`[max_ns, 1.0]` last); empty in records written before it
    /// was kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cdf: Vec<(u64, f64)>,
}

/// About how many points [`Percentiles::cdf`] keeps.
pub const CDF_POINTS: usize = 100;

impl Percentiles {
    /// The percentiles of `h`; `None` when it is empty.
    pub fn of(h: &Histogram) -> Option<Percentiles> {
        (!h.is_empty()).then(|| Percentiles {
            count: h.len(),
            p50_ns: h.value_at_quantile(0.50),
            p90_ns: h.value_at_quantile(0.90),
            p99_ns: h.value_at_quantile(0.99),
            p999_ns: h.value_at_quantile(0.999),
            max_ns: h.max(),
            cdf: cdf_of(h),
        })
    }
}

/// The cumulative distribution of `h` at about [`CDF_POINTS`] log-spaced
/// latencies (the histogram's log iterator, from its smallest value to its
/// largest): `(latency_ns, fraction at or below it)`, latencies strictly
/// increasing, fractions (to 1e-6) non-decreasing, the last
/// `(h.max(), 1.0)`.
pub fn cdf_of(h: &Histogram) -> Vec<(u64, f64)> {
    let n = h.len();
    if n == 0 {
        return Vec::new();
    }
    let (lo, hi) = (h.min().max(1), h.max().max(1));
    // A step of at least 1 % keeps a narrow distribution to ~100 points
    // too (and the iterator moving).
    let step = (hi as f64 / lo as f64)
        .powf(1.0 / (CDF_POINTS - 2) as f64)
        .max(1.01);
    let mut out: Vec<(u64, f64)> = Vec::with_capacity(CDF_POINTS + 2);
    let mut counted = 0u64;
    for v in h.iter_log(lo, step) {
        counted += v.count_since_last_iteration();
        // The last step reports the top of its range, past the largest
        // value recorded.
        // Rounded to 1e-6: the JSON keeps ~100 of them per distribution.
        let p = (
            v.value_iterated_to().min(hi),
            (counted as f64 / n as f64 * 1e6).round() / 1e6,
        );
        match out.last_mut() {
            Some(last) if last.0 >= p.0 => last.1 = p.1,
            _ => out.push(p),
        }
    }
    // The last step may report the bottom of the largest value's bucket:
    // name it as `max` does (its top).
    if let Some(last) = out.last_mut() {
        last.0 = last.0.max(hi);
    }
    out
}

/// What one operation of a `lib:` point made durable, on average over
/// every operation its threads ran while measured (warm-up included:
/// the counters bracket the whole measurement). For DWSL one operation is
/// one 4 KiB write and one `fsync`, so these are per `fsync`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PersistPerOp {
    /// The pool's medium (`pm`, `dram`, `file`).
    pub pool_mode: String,
    /// Bytes the pool's medium was asked to make durable
    /// ([`manyfs::PersistStats::bytes`]).
    pub pool_bytes: f64,
    /// 64-byte cache lines those bytes cover.
    pub pool_cache_lines: f64,
    /// Full syncs of the pool during the measurement (the background
    /// commit), not counted in `pool_bytes`; a total, not per operation.
    pub pool_full_syncs: u64,
    /// Bytes written to the data device (0 without one).
    pub device_bytes: f64,
    /// Device flushes issued.
    pub device_flushes: f64,
    /// Device transfers (reads and writes) issued.
    #[serde(default)]
    pub device_transfers: f64,
    /// Batches of transfers submitted to io_uring (`device_io=uring`).
    #[serde(default)]
    pub device_uring_batches: f64,
}

impl PersistPerOp {
    /// The counts between two snapshots of one mount, over `ops` operations.
    pub fn between(
        before: (manyfs::PersistStats, Option<manyfs::DeviceStats>),
        after: (manyfs::PersistStats, Option<manyfs::DeviceStats>),
        ops: u64,
    ) -> PersistPerOp {
        let p = after.0.since(&before.0);
        let n = ops.max(1) as f64;
        let (dev_bytes, dev_flushes, dev_transfers, dev_batches) = match (before.1, after.1) {
            (Some(b), Some(a)) => (
                a.bytes_written.saturating_sub(b.bytes_written),
                a.flushes.saturating_sub(b.flushes),
                (a.reads + a.writes).saturating_sub(b.reads + b.writes),
                a.uring_batches.saturating_sub(b.uring_batches),
            ),
            _ => (0, 0, 0, 0),
        };
        PersistPerOp {
            pool_mode: p.mode.to_string(),
            pool_bytes: p.bytes as f64 / n,
            pool_cache_lines: p.cache_lines as f64 / n,
            pool_full_syncs: p.full_syncs,
            device_bytes: dev_bytes as f64 / n,
            device_flushes: dev_flushes as f64 / n,
            device_transfers: dev_transfers as f64 / n,
            device_uring_batches: dev_batches as f64 / n,
        }
    }
}

/// A mount's persistence counters now (see [`PersistPerOp::between`]).
pub fn persist_snapshot(fs: &manyfs::Fs) -> (manyfs::PersistStats, Option<manyfs::DeviceStats>) {
    (fs.stats().persist, fs.stats().device)
}

/// [`Record::moves`] of `report`: the moves applied, by reason.
pub fn moves_summary(report: &[manyfs::diag::PlacementDecision]) -> String {
    let mut by_reason: Vec<(String, usize)> = Vec::new();
    for d in report.iter().filter(|d| d.applied) {
        let reason = d.reason.to_string();
        match by_reason.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, n)) => *n += 1,
            None => by_reason.push((reason, 1)),
        }
    }
    let total: usize = by_reason.iter().map(|(_, n)| n).sum();
    if total == 0 {
        return "0".into();
    }
    let parts: Vec<String> = by_reason.iter().map(|(r, n)| format!("{r} {n}")).collect();
    format!("{total} ({})", parts.join(", "))
}

/// How an emulated remote cost is described in [`Record::emulated`].
pub fn emulated_label(cost: manyfs::RemoteCost) -> String {
    format!(
        "EMULATED remote access +{}/+{} ns per KiB read/write",
        cost.read_ns_per_kib, cost.write_ns_per_kib
    )
}

/// How an emulated bandwidth cap is described in [`Record::emulated`].
pub fn emulated_cap_label(cap: manyfs::BandwidthCap) -> String {
    format!(
        "EMULATED NVMM bandwidth cap {} B/s per node (W + R/3)",
        cap.bytes_per_sec
    )
}

/// [`Record::emulated`] for a point with `cost` and `cap`: `None` when
/// both are off.
pub fn emulated_labels(
    cost: Option<manyfs::RemoteCost>,
    cap: Option<manyfs::BandwidthCap>,
) -> Option<String> {
    let parts: Vec<String> = cost
        .map(emulated_label)
        .into_iter()
        .chain(cap.map(emulated_cap_label))
        .collect();
    (!parts.is_empty()).then(|| parts.join("; "))
}

fn one() -> usize {
    1
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Workloads, in order.
    pub workloads: Vec<Workload>,
    /// Targets, in order.
    pub targets: Vec<Target>,
    /// Thread counts, in order.
    pub threads: Vec<usize>,
    /// Measured time per point.
    pub duration: Duration,
    /// Unmeasured time per point before measuring.
    pub warmup: Duration,
    /// How in-process pools are made.
    pub pool: PoolConfig,
    /// Also run the memory-bandwidth reference rows.
    pub membw: bool,
    /// Show a progress bar when stderr is a terminal.
    pub progress: bool,
    /// Pin threads round-robin to the allowed CPUs.
    pub pin: bool,
    /// Runs per point (interleaved rounds over the whole plan); each
    /// reported record is the run with the median ops/s.
    pub repeats: usize,
    /// Bytes between the blocks of neighbouring threads in DRBM and DWOM
    /// (FxMark's 8 MiB [`crate::workload::REGION`] by default; the nCACHE
    /// paper also runs 4 KiB). See [`crate::workload::check_stride`].
    pub stride: u64,
    /// Where a line per thread-placement window goes while a point with
    /// thread placement on runs (`--verbose`); `None`: nowhere.
    pub placement_log: Option<PlacementLog>,
}

/// Where [`Config::placement_log`] sends its lines.
#[derive(Clone)]
pub struct PlacementLog(Arc<dyn Fn(&str) + Send + Sync>);

impl PlacementLog {
    /// Lines go to `f`.
    pub fn new(f: impl Fn(&str) + Send + Sync + 'static) -> PlacementLog {
        PlacementLog(Arc::new(f))
    }

    /// Lines go to standard error.
    pub fn stderr() -> PlacementLog {
        PlacementLog::new(|line| eprintln!("{line}"))
    }
}

impl std::fmt::Debug for PlacementLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PlacementLog")
    }
}

/// How often a [`PlacementLog`] is fed the windows planned.
const PLACEMENT_POLL: Duration = Duration::from_millis(20);

/// Run `f`, meanwhile sending `log` one line per thread-placement window
/// of `fs` (`prefix` first), from the mount's first window on.
fn with_placement_log<T>(
    fs: &manyfs::Fs,
    log: &PlacementLog,
    prefix: &str,
    f: impl FnOnce() -> T,
) -> T {
    let (done, stop) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|s| {
        s.spawn(move || {
            let mut last = 0;
            loop {
                let finished = !matches!(
                    stop.recv_timeout(PLACEMENT_POLL),
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout)
                );
                for w in manyfs::diag::placement_windows_after(fs, last) {
                    last = w.window;
                    (log.0)(&format!("{prefix} placement {w}"));
                }
                if finished {
                    return;
                }
            }
        });
        let out = f();
        drop(done);
        out
    })
}

impl Default for Config {
    fn default() -> Self {
        Config {
            workloads: Workload::headline(),
            targets: Target::all_lib(),
            threads: vec![1, 2],
            duration: Duration::from_secs(2),
            warmup: Duration::from_millis(200),
            pool: PoolConfig::default(),
            membw: true,
            progress: true,
            pin: true,
            repeats: 1,
            stride: crate::workload::REGION,
            placement_log: None,
        }
    }
}

impl Config {
    /// The `--quick` headline: DWOM and DRBM on every lock kind and tmpfs at
    /// 1, 2 and 64 threads, 0.5 s per point.
    pub fn quick() -> Self {
        let mut targets = Target::all_lib();
        targets.push(Target::Tmpfs);
        Config {
            workloads: vec![Workload::Dwom, Workload::Drbm],
            targets,
            threads: vec![1, 2, 64],
            duration: Duration::from_millis(500),
            warmup: Duration::from_millis(100),
            // DWOM/DRBM touch a few blocks; a smaller pool is quicker to make.
            pool: PoolConfig {
                size: 512 << 20,
                ..PoolConfig::default()
            },
            ..Config::default()
        }
    }
}

/// Operations faster than this are timed one in [`SAMPLE_STRIDE`].
pub const SAMPLE_BELOW_NS: u64 = 5_000;
/// Sampling stride for latency of fast operations.
pub const SAMPLE_STRIDE: u64 = 16;

/// A measurement's phases, as its workers see them in one shared byte:
/// warming up (not counted), measuring, stopped.
pub(crate) const WARMUP: u8 = 0;
/// See [`WARMUP`].
pub(crate) const MEASURE: u8 = 1;
/// See [`WARMUP`].
pub(crate) const STOP: u8 = 2;

/// Raw result of [`measure`].
#[derive(Debug, Clone)]
pub struct Measurement {
    /// Operations completed inside the window.
    pub ops: u64,
    /// Bytes those operations moved.
    pub bytes: u64,
    /// Window length.
    pub elapsed: Duration,
    /// Per-operation latencies.
    pub hist: Histogram,
    /// Operations completed in any phase (warm-up and the ones that
    /// ended after the window included).
    pub all_ops: u64,
}

/// Latency histogram, in nanoseconds (HdrHistogram: 3 significant digits,
/// growing to whatever range is recorded).
pub type Histogram = hdrhistogram::Histogram<u64>;

/// An empty [`Histogram`].
pub fn latency_histogram() -> Histogram {
    Histogram::new(3).expect("3 significant digits is a valid precision")
}

/// Count one latency of `ns` nanoseconds (the histogram grows to fit it).
#[inline]
pub fn record_latency(h: &mut Histogram, ns: u64) {
    if h.record(ns).is_err() {
        // Only values near u64::MAX cannot be tracked: clamp them.
        h.saturating_record(ns);
    }
}

/// Add `from`'s counts to `into` (per-thread histograms merged at the end).
pub fn add_histogram(into: &mut Histogram, from: &Histogram) {
    into.add(from)
        .expect("auto-resizing histograms of the same precision always merge");
}

/// Run one [`Op`] per thread: all start together, run `warmup` unmeasured,
/// then `duration` measured. Operations are counted when they *started*
/// inside the window. Latency is recorded for every operation slower than
/// [`SAMPLE_BELOW_NS`] and for one in [`SAMPLE_STRIDE`] of the faster ones
/// (the clock reads would otherwise be a large part of a 300 ns operation).
/// The window is extended until every thread has
/// completed at least one counted operation (so a descheduled thread or a
/// slow refill never yields an empty point). The first error stops every
/// thread and is returned.
pub fn measure(
    ops: Vec<Box<dyn Op>>,
    warmup: Duration,
    duration: Duration,
    pin: bool,
) -> Result<Measurement> {
    measure_on(ops, warmup, duration, pin.then(allowed_cpus).as_deref())
}

/// [`measure`] with thread `i` pinned to `cpus[i % cpus.len()]`, or not
/// pinned at all (`None`).
pub fn measure_on(
    ops: Vec<Box<dyn Op>>,
    warmup: Duration,
    duration: Duration,
    cpus: Option<&[usize]>,
) -> Result<Measurement> {
    let n = ops.len();
    let cpus: Option<Arc<[usize]>> = cpus.filter(|c| !c.is_empty()).map(Arc::from);
    let phase = AtomicU8::new(WARMUP);
    let counted = AtomicUsize::new(0);
    let gate = crate::sys::Gate::new();
    std::thread::scope(|s| {
        let handles: Vec<_> = ops
            .into_iter()
            .enumerate()
            .map(|(i, mut op)| {
                let (phase, gate, counted, cpus) = (&phase, &gate, &counted, cpus.clone());
                s.spawn(move || -> Result<(Histogram, u64, u64, u64)> {
                    if let Some(cpus) = &cpus {
                        // Started there, not pinned: thread placement may
                        // move it within the process's CPUs.
                        let cpu = cpus[i % cpus.len()];
                        if manyfs::diag::start_on(cpu).is_err() {
                            pin_current_thread(cpu);
                        }
                    }
                    let mut hist = latency_histogram();
                    let (mut count, mut bytes, mut all) = (0u64, 0u64, 0u64);
                    gate.arrive_and_wait();
                    let mut stride = 1u64;
                    loop {
                        let p = phase.load(Ordering::Relaxed);
                        if p == STOP {
                            break;
                        }
                        // Two clock reads cost ~50 ns, a large share of a
                        // 300 ns operation: short operations are timed one
                        // in SAMPLE_STRIDE (all are counted).
                        let t0 = (count % stride == 0).then(Instant::now);
                        match op.run() {
                            Ok(b) => {
                                all += 1;
                                if p == MEASURE {
                                    if let Some(t0) = t0 {
                                        let dt = t0.elapsed().as_nanos() as u64;
                                        record_latency(&mut hist, dt);
                                        stride = if dt < SAMPLE_BELOW_NS {
                                            SAMPLE_STRIDE
                                        } else {
                                            1
                                        };
                                    }
                                    count += 1;
                                    bytes += b;
                                    if count == 1 {
                                        counted.fetch_add(1, Ordering::Relaxed);
                                    }
                                }
                            }
                            Err(e) => {
                                phase.store(STOP, Ordering::Relaxed);
                                return Err(e);
                            }
                        }
                    }
                    Ok((hist, count, bytes, all))
                })
            })
            .collect();
        gate.open_when(n);
        let elapsed = run_phases(&phase, &counted, n, warmup, duration);
        let mut m = Measurement {
            ops: 0,
            bytes: 0,
            elapsed,
            hist: latency_histogram(),
            all_ops: 0,
        };
        join_workers(handles, |(hist, c, b, all)| {
            add_histogram(&mut m.hist, &hist);
            m.all_ops += all;
            m.ops += c;
            m.bytes += b;
        })?;
        Ok(m)
    })
}

/// Drive a measurement's `phase` once its `n` workers are released: warm
/// up for `warmup`, measure for `duration` and until every worker counted
/// an operation (`counted`), then stop them. Returns how long the
/// measuring phase lasted. Ends early when a worker stopped (an error) or
/// the run was interrupted.
pub(crate) fn run_phases(
    phase: &AtomicU8,
    counted: &AtomicUsize,
    n: usize,
    warmup: Duration,
    duration: Duration,
) -> Duration {
    sleep_unless_stopped(phase, warmup);
    let start = Instant::now();
    let _ = phase.compare_exchange(WARMUP, MEASURE, Ordering::Relaxed, Ordering::Relaxed);
    sleep_unless_stopped(phase, duration);
    while counted.load(Ordering::Relaxed) < n
        && phase.load(Ordering::Relaxed) != STOP
        && !crate::sys::interrupted()
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    phase.store(STOP, Ordering::Relaxed);
    start.elapsed()
}

/// Join every worker, folding each one's result into the caller's totals
/// with `fold`; after all are joined, the first error (a panic counts as
/// one) is returned.
pub(crate) fn join_workers<T>(
    handles: Vec<std::thread::ScopedJoinHandle<'_, Result<T>>>,
    mut fold: impl FnMut(T),
) -> Result<()> {
    let mut first_err = None;
    for h in handles {
        match h.join() {
            Ok(Ok(v)) => fold(v),
            Ok(Err(e)) => {
                first_err.get_or_insert(e);
            }
            Err(_) => {
                first_err.get_or_insert(BenchError::Panic);
            }
        }
    }
    first_err.map_or(Ok(()), Err)
}

fn sleep_unless_stopped(phase: &AtomicU8, d: Duration) {
    let end = Instant::now() + d;
    loop {
        let now = Instant::now();
        if now >= end || phase.load(Ordering::Relaxed) == STOP || crate::sys::interrupted() {
            return;
        }
        std::thread::sleep((end - now).min(Duration::from_millis(10)));
    }
}

/// Prepare `workload` for `threads` threads on `be`. With `pin`, on a
/// helper thread that moves to thread `t`'s CPU (the one [`measure`] pins
/// it to) before it creates and writes what thread `t` owns: a NUMA
/// placement policy then puts each thread's data on its own node.
pub fn prepare_pinned(
    workload: Workload,
    be: &Arc<dyn crate::backend::Backend>,
    threads: usize,
    pin: bool,
    stride: u64,
) -> Result<Vec<Box<dyn Op>>> {
    prepare_on(
        workload,
        be,
        threads,
        pin.then(allowed_cpus).as_deref(),
        None,
        stride,
    )
}

/// Prepare `workload` for `threads` threads on `be`, on a helper thread
/// that first moves to `prefill_cpu` where given (every thread's data is
/// written from there: one node's, under local placement), else to thread
/// `t`'s CPU of `cpus` (round-robin, as [`measure_on`] pins them) before
/// what thread `t` owns; with neither, where the scheduler puts it.
/// Thread `t`'s DRBM/DWOM block is at byte `t * stride`.
pub fn prepare_on(
    workload: Workload,
    be: &Arc<dyn crate::backend::Backend>,
    threads: usize,
    cpus: Option<&[usize]>,
    prefill_cpu: Option<usize>,
    stride: u64,
) -> Result<Vec<Box<dyn Op>>> {
    let cpus = cpus.filter(|c| !c.is_empty());
    if cpus.is_none() && prefill_cpu.is_none() {
        return workload.prepare_strided(be, threads, stride, &|_| {});
    }
    let place = |t: usize| {
        let cpu = prefill_cpu.or_else(|| cpus.map(|c| c[t % c.len()]));
        if let Some(cpu) = cpu {
            pin_current_thread(cpu);
        }
    };
    std::thread::scope(|s| {
        s.spawn(|| {
            place(0);
            workload.prepare_strided(be, threads, stride, &place)
        })
        .join()
        .map_err(|_| BenchError::Panic)?
    })
}

/// Prepare and measure one point on an already set-up target.
/// Its threads run where `series` says ([`Series::cpus`]), and their data
/// is written from [`Series::prefill_cpu`] where given.
pub fn run_point(
    env: &mut TargetEnv,
    workload: Workload,
    threads: usize,
    cfg: &Config,
    series: &Series,
) -> Result<Record> {
    let prefix = format!("{workload} {} {threads} threads:", env.label());
    let point = env.point()?;
    let be = point.backend();
    let cpus = series.cpus(cfg);
    let ops = prepare_on(
        workload,
        &be,
        threads,
        cpus.as_deref(),
        series.prefill_cpu,
        cfg.stride,
    )?;
    drop(be);
    let before = point.fs().map(persist_snapshot);
    let cpu_before = crate::sys::CpuTimes::now();
    let measure = || measure_on(ops, cfg.warmup, cfg.duration, cpus.as_deref());
    let placement = series.pool.thread_placement != manyfs::ThreadPlacement::Off;
    let m = match (point.fs(), &cfg.placement_log) {
        (Some(fs), Some(log)) if placement => with_placement_log(fs, log, &prefix, measure)?,
        _ => measure()?,
    };
    let steal = cpu_before
        .zip(crate::sys::CpuTimes::now())
        .and_then(|(a, b)| a.steal_since(&b));
    let persist = point
        .fs()
        .zip(before)
        .map(|(fs, before)| PersistPerOp::between(before, persist_snapshot(fs), m.all_ops));
    let moves = point
        .fs()
        .filter(|_| series.pool.thread_placement != manyfs::ThreadPlacement::Off)
        .map(|fs| moves_summary(&manyfs::diag::placement_report(fs)));
    point.finish()?;
    let secs = m.elapsed.as_secs_f64().max(1e-9);
    Ok(Record {
        workload: workload.to_string(),
        target: env.label().to_string(),
        threads,
        ops_per_sec: m.ops as f64 / secs,
        bytes_per_sec: m.bytes as f64 / secs,
        p50_ns: m.hist.value_at_quantile(0.50),
        p99_ns: m.hist.value_at_quantile(0.99),
        ops: m.ops,
        seconds: secs,
        runs: 1,
        ops_per_sec_min: m.ops as f64 / secs,
        ops_per_sec_max: m.ops as f64 / secs,
        emulated: emulated_labels(env.remote_cost(), env.bandwidth_cap()),
        moves,
        persist,
        write_latency: None,
        fsync_latency: None,
        steal,
    })
}

/// The run with the median ops/s (the lower middle one for an even count),
/// carrying the spread of all runs.
pub fn median_record(mut runs: Vec<Record>) -> Option<Record> {
    if runs.is_empty() {
        return None;
    }
    runs.sort_by(|a, b| a.ops_per_sec.total_cmp(&b.ops_per_sec));
    let min = runs[0].ops_per_sec;
    let max = runs[runs.len() - 1].ops_per_sec;
    let n = runs.len();
    let mut m = runs.swap_remove((n - 1) / 2);
    m.runs = n;
    m.ops_per_sec_min = min;
    m.ops_per_sec_max = max;
    Some(m)
}

/// One line of a comparison: a target with its own pool settings, its
/// records labelled `label`.
#[derive(Debug, Clone)]
pub struct Series {
    /// What the records carry as their target.
    pub label: String,
    /// What is measured.
    pub target: Target,
    /// How its pools are made and mounted (`lib:` targets).
    pub pool: PoolConfig,
    /// Where its threads run.
    pub pinning: Pinning,
    /// The CPU every thread's data is written from before the run (all of
    /// it on that CPU's node, under local placement); `None`: each
    /// thread's from the CPU it will run on (where it is pinned).
    pub prefill_cpu: Option<usize>,
}

/// Where a series' threads run ([`Series::pinning`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Pinning {
    /// As [`Config::pin`] says: round-robin over the allowed CPUs, or not
    /// pinned.
    #[default]
    Config,
    /// Round-robin over these CPUs.
    Cpus(Vec<usize>),
    /// Not pinned: the kernel's scheduler places them.
    Unpinned,
}

impl Series {
    /// `target` under its own name with `cfg.pool` (a `lib:` target with
    /// an index other than the default is named `lib:KIND index=INDEX`,
    /// one with a shard count per directory `... dir_shards=N`,
    /// one on a data device with another staging limit `... stage_max=N`,
    /// one on a data device with another `device_io` than the default
    /// (or [`crate::target::PoolConfig::label_device_io`]) `... device_io=IO`;
    /// `... EMULATED` when `cfg.pool` turns the remote-cost model on).
    pub fn plain(target: &Target, cfg: &Config) -> Series {
        let mut label = match target {
            Target::Lib(_) if cfg.pool.index != manyfs::IndexKind::default() => {
                format!("{target} index={}", cfg.pool.index)
            }
            _ => target.to_string(),
        };
        if let (Target::Lib(_), Some(n)) = (target, cfg.pool.dir_shards) {
            label.push_str(&format!(" dir_shards={n}"));
        }
        if matches!(target, Target::Lib(_))
            && cfg.pool.data.is_some()
            && cfg.pool.stage_max != manyfs::DEFAULT_STAGE_MAX
        {
            label.push_str(&format!(" stage_max={}", cfg.pool.stage_max));
        }
        if matches!(target, Target::Lib(_))
            && cfg.pool.data.is_some()
            && (cfg.pool.label_device_io || cfg.pool.device_io != manyfs::DeviceIo::default())
        {
            label.push_str(&format!(" device_io={}", cfg.pool.device_io));
        }
        if matches!(target, Target::Lib(_)) && cfg.pool.remote_cost.is_some() {
            label.push_str(" EMULATED");
        }
        Series {
            label,
            target: target.clone(),
            pool: cfg.pool.clone(),
            pinning: Pinning::Config,
            prefill_cpu: None,
        }
    }

    /// The CPUs its threads are pinned to round-robin under `cfg`; `None`:
    /// not pinned.
    pub fn cpus(&self, cfg: &Config) -> Option<Vec<usize>> {
        match &self.pinning {
            Pinning::Config => cfg.pin.then(allowed_cpus),
            Pinning::Cpus(c) => Some(c.clone()),
            Pinning::Unpinned => None,
        }
    }
}

/// Run every point of `cfg` (memory reference first, then each workload on
/// each target at each thread count) and return the records in that order.
pub fn run(cfg: &Config) -> Result<Vec<Record>> {
    let series: Vec<Series> = cfg.targets.iter().map(|t| Series::plain(t, cfg)).collect();
    run_series(cfg, &series)
}

/// [`run`] over `series` instead of `cfg.targets` (whose pool settings may
/// differ from `cfg.pool`): memory reference first (when `cfg.membw`),
/// then each workload of `cfg` on each series at each thread count, the
/// rounds of `cfg.repeats` interleaved over the whole plan.
pub fn run_series(cfg: &Config, series: &[Series]) -> Result<Vec<Record>> {
    let memory = Series::plain(&Target::Memory, cfg);
    let mut plan: Vec<(&Series, Workload)> = Vec::new();
    if cfg.membw {
        for w in Workload::MEMORY {
            plan.push((&memory, w));
        }
    }
    for w in &cfg.workloads {
        for t in series {
            if t.target != Target::Memory && !w.is_memory() {
                plan.push((t, *w));
            }
        }
    }
    let repeats = cfg.repeats.max(1);
    let total = (plan.len() * cfg.threads.len() * repeats) as u64;
    let bar = if cfg.progress && std::io::stderr().is_terminal() {
        let b = indicatif::ProgressBar::new(total);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{elapsed_precise} [{bar:30}] {pos}/{len} {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        b
    } else {
        indicatif::ProgressBar::hidden()
    };
    // One environment per series, made once (tmpfs is mounted once).
    let mut envs: Vec<(&str, TargetEnv)> = Vec::new();
    let points: Vec<(&Series, Workload, usize)> = plan
        .iter()
        .flat_map(|&(t, w)| cfg.threads.iter().map(move |&n| (t, w, n)))
        .collect();
    let mut runs: Vec<Vec<Record>> = vec![Vec::new(); points.len()];
    for round in 0..repeats {
        for (i, (t, w, n)) in points.iter().enumerate() {
            let idx = match envs.iter().position(|(x, _)| *x == t.label) {
                Some(i) => i,
                None => {
                    let env = TargetEnv::new(&t.target, &t.pool)?.with_label(&t.label);
                    envs.push((&t.label, env));
                    envs.len() - 1
                }
            };
            let env = &mut envs[idx].1;
            let r = if repeats > 1 {
                format!(" (run {}/{repeats})", round + 1)
            } else {
                String::new()
            };
            if crate::sys::interrupted() {
                bar.finish_and_clear();
                return Err(BenchError::Interrupted);
            }
            bar.set_message(format!("{w} {} {n} threads{r}", env.label()));
            runs[i].push(run_point(env, *w, *n, cfg, t)?);
            bar.inc(1);
        }
    }
    let records = runs.into_iter().filter_map(median_record).collect();
    bar.finish_and_clear();
    Ok(records)
}

/// A record of `ops_per_sec` 4 KiB operations per second, for tests of
/// what is computed from records.
#[cfg(test)]
pub(crate) fn test_record(
    workload: &str,
    target: &str,
    threads: usize,
    ops_per_sec: f64,
) -> Record {
    Record {
        workload: workload.into(),
        target: target.into(),
        threads,
        ops_per_sec,
        bytes_per_sec: ops_per_sec * 4096.0,
        p50_ns: 1,
        p99_ns: 1,
        ops: 1,
        seconds: 1.0,
        runs: 1,
        ops_per_sec_min: ops_per_sec,
        ops_per_sec_max: ops_per_sec,
        emulated: None,
        moves: None,
        persist: None,
        write_latency: None,
        fsync_latency: None,
        steal: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_are_counted_by_reason_applied_only() {
        use manyfs::diag::Reason;
        let d = |reason, applied| manyfs::diag::PlacementDecision {
            window: 1,
            tid: 7,
            from: 1,
            to: 0,
            reason,
            applied,
            error: None,
        };
        assert_eq!(moves_summary(&[]), "0");
        assert_eq!(moves_summary(&[d(Reason::ReadLocality, false)]), "0");
        let report = [
            d(Reason::ReadLocality, true),
            d(Reason::NvmmContention, true),
            d(Reason::ReadLocality, true),
            d(Reason::CpuContention, false),
        ];
        assert_eq!(
            moves_summary(&report),
            "3 (read locality 2, NVMM contention 1)"
        );
    }

    #[test]
    fn latency_quantiles_merge_across_threads() {
        let (mut a, mut b) = (latency_histogram(), latency_histogram());
        for v in 1..=1000u64 {
            let h = if v % 2 == 0 { &mut a } else { &mut b };
            record_latency(h, v);
        }
        let mut all = latency_histogram();
        add_histogram(&mut all, &a);
        add_histogram(&mut all, &b);
        assert_eq!(all.len(), 1000);
        let p50 = all.value_at_quantile(0.5);
        assert!((499..=501).contains(&p50), "{p50}");
        let p99 = all.value_at_quantile(0.99);
        assert!((989..=991).contains(&p99), "{p99}");
        // seconds-long outliers and zero fit too
        record_latency(&mut all, 0);
        record_latency(&mut all, 30_000_000_000);
        assert!(all.value_at_quantile(1.0) >= 29_000_000_000);
        assert_eq!(latency_histogram().value_at_quantile(0.99), 0);
    }

    #[test]
    fn cdf_is_log_spaced_monotone_and_ends_at_one() {
        assert!(cdf_of(&latency_histogram()).is_empty());
        // 1 us to 10 ms, a tenth of them 1000x slower than the rest.
        let mut h = latency_histogram();
        for v in 1..=9000u64 {
            record_latency(&mut h, 1_000 + v);
        }
        for v in 1..=1000u64 {
            record_latency(&mut h, 10_000 * v);
        }
        let cdf = cdf_of(&h);
        assert!(
            (CDF_POINTS / 2..=CDF_POINTS + 2).contains(&cdf.len()),
            "{}",
            cdf.len()
        );
        assert!(cdf.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        assert_eq!(*cdf.last().unwrap(), (h.max(), 1.0));
        assert!(cdf[0].0 <= 1_001 && cdf[0].1 < 0.01, "{:?}", cdf[0]);
        // The step from the fast 90 % to the slow tail is where it lies.
        let at = |ns: u64| cdf.iter().rev().find(|p| p.0 <= ns).map_or(0.0, |p| p.1);
        assert!((0.89..=0.91).contains(&at(100_000)), "{}", at(100_000));
        assert!(at(5_000_000) < 0.96);
        // One value only: still ends at (max, 1.0), with a few points.
        let mut one = latency_histogram();
        record_latency(&mut one, 5_000);
        let cdf = cdf_of(&one);
        assert!(!cdf.is_empty() && cdf.len() <= 3, "{cdf:?}");
        assert_eq!(*cdf.last().unwrap(), (one.max(), 1.0));
        let p = Percentiles::of(&h).unwrap();
        assert_eq!(p.cdf, cdf_of(&h));
    }
}
