//! `tier-checkpoint`: the write latency of a tiered pool traced through
//! its checkpoints (the F2FS node-logging paper's claim that a checkpoint
//! with node logs on NVM never stalls writers).
//!
//! A manyfs checkpoint is a full sync (`Fs::sync`, the commit thread every
//! `commit_interval`): the data device is flushed, the pool made durable,
//! every dirty log's durable marks written, and only then are superseded
//! blocks reused. The tier here is the paper's NL/Integrated one: file data
//! on the data device (`O_DIRECT`), logs and inodes in a `dram` pool on
//! `/dev/shm` (emulated NVM), `lib:srl-tree`.
//!
//! Each thread appends 4 KiB blocks to a file of its own (every write a
//! new device block, a log entry and a size change, so each checkpoint has
//! marks to write and a device flush to wait for); every write's start and
//! latency are kept. Three runs per thread count, side by side:
//! - `none`: no checkpoint during the measured time (the reference p99);
//! - `background`: a checkpoint every `interval` (the default mount);
//! - `blocking`: the same with `checkpoint=blocking`, where every write
//!   waits for a checkpoint in progress, as F2FS's checkpoint holds every
//!   operation out: the paper's baseline stall.
//!
//! The checkpoints are started by the benchmark (`Fs::sync`, the call the
//! commit thread makes), so their start and end are known exactly.
//!
//! A fourth run is the device's own behaviour, the floor of what a
//! checkpoint can cost writers: `device`, the same appends as 4 KiB
//! `O_DIRECT` writes straight to the data file (each thread its own
//! region) with an `fdatasync` of it every `interval` in place of the
//! checkpoint. A device that delays writes behind a cache flush stalls
//! them there too.

use crate::report::{Rule, ns, si, text_table};
use crate::sys::{AlignedBuf, Gate, allowed_cpus, interrupted, pin_current_thread, thread_cpu_ns};
use crate::workload::BLOCK;
use crate::{BenchError, Result};
use manyfs::{Checkpoint, Durability, LockKind};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The three runs per thread count: (label, checkpoint mode; `None`: no
/// checkpoint while measuring).
pub const MODES: [(&str, Option<Checkpoint>); 3] = [
    ("none", None),
    ("background", Some(Checkpoint::Background)),
    ("blocking", Some(Checkpoint::Blocking)),
];

/// The label of the raw-device run.
pub const DEVICE: &str = "device";

/// Width of the trace's time buckets (the plot's resolution).
pub const BUCKET: Duration = Duration::from_millis(10);

/// What `tier-checkpoint` runs.
#[derive(Debug, Clone)]
pub struct CheckpointConfig {
    /// The `dram` pool (emulated NVM).
    pub pool: PathBuf,
    /// The data device (a file on a disk file system, or a block device).
    pub data: PathBuf,
    /// Pool size in bytes.
    pub pool_size: u64,
    /// Data device size in bytes.
    pub data_size: u64,
    /// Thread counts.
    pub threads: Vec<usize>,
    /// Unmeasured time per run (no checkpoints in it).
    pub warmup: Duration,
    /// Measured time per run.
    pub duration: Duration,
    /// Time between the starts of two checkpoints.
    pub interval: Duration,
    /// Pin thread `t` to the `t`-th allowed CPU (round-robin).
    pub pin: bool,
}

impl CheckpointConfig {
    /// The defaults: the pool in `shm_dir`, the device in `disk_dir`,
    /// threads 1 and 2, 0.2 s warm-up, 3 s measured, a checkpoint every
    /// 100 ms, 256 MiB pool, 2 GiB device (mkfs writes it whole).
    pub fn new(disk_dir: &Path, shm_dir: &Path) -> CheckpointConfig {
        CheckpointConfig {
            pool: shm_dir.join("manyfs-tier-checkpoint.pool"),
            data: disk_dir.join("manyfs-tier-checkpoint.data"),
            pool_size: 256 << 20,
            data_size: 2 << 30,
            threads: vec![1, 2],
            warmup: Duration::from_millis(200),
            duration: Duration::from_secs(3),
            interval: Duration::from_millis(100),
            pin: true,
        }
    }

    fn check(&self) -> Result<()> {
        if self.threads.is_empty() || self.threads.contains(&0) {
            return Err(BenchError::InvalidArgument(
                "tier-checkpoint needs positive thread counts".into(),
            ));
        }
        if self.interval.is_zero() || self.duration.is_zero() {
            return Err(BenchError::InvalidArgument(
                "tier-checkpoint needs a positive duration and checkpoint interval".into(),
            ));
        }
        if self.pool == self.data {
            return Err(BenchError::InvalidArgument(
                "tier-checkpoint: the pool and the data device must be two paths".into(),
            ));
        }
        Ok(())
    }
}

/// One run's trace and summary.
#[derive(Debug, Clone, Serialize)]
pub struct CheckpointRun {
    /// `none`, `background` or `blocking`.
    pub mode: String,
    /// Writer threads.
    pub threads: usize,
    /// Measured seconds.
    pub seconds: f64,
    /// Writes measured (all threads).
    pub writes: u64,
    /// Write latency percentiles and maximum, nanoseconds.
    pub p50_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// The slowest write.
    pub max_ns: u64,
    /// Checkpoints in the measured time: (start, end) in seconds from its
    /// start.
    pub checkpoints: Vec<(f64, f64)>,
    /// CPU time of each checkpoint (of the thread that ran it), in
    /// nanoseconds: what it cost apart from waiting for the CPU, a lock or
    /// the device.
    pub checkpoint_cpu_ns: Vec<u64>,
    /// Writes that overlapped a checkpoint, and their p99 and maximum.
    pub during_writes: u64,
    /// p99 of the writes that overlapped a checkpoint.
    pub during_p99_ns: u64,
    /// Slowest write that overlapped a checkpoint.
    pub during_max_ns: u64,
    /// Per [`BUCKET`] of the measured time: (bucket start in seconds,
    /// slowest write started in it in ns, writes started in it).
    pub trace: Vec<(f64, u64, u64)>,
}

impl CheckpointRun {
    /// Writes per second.
    pub fn writes_per_sec(&self) -> f64 {
        self.writes as f64 / self.seconds.max(1e-9)
    }

    /// Median checkpoint duration in nanoseconds (0 without any).
    pub fn checkpoint_median_ns(&self) -> u64 {
        median(
            self.checkpoints
                .iter()
                .map(|(s, e)| ((e - s) * 1e9).round() as u64)
                .collect(),
        )
    }

    /// Median CPU time of a checkpoint in nanoseconds (0 without any).
    pub fn checkpoint_cpu_median_ns(&self) -> u64 {
        median(self.checkpoint_cpu_ns.clone())
    }
}

/// The median of `v` (the upper one of an even count; 0 when empty).
fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// A write: (start in ns from the measured start, latency in ns).
type Sample = (u64, u64);

/// Checkpoints: (start, end) in seconds from the measured start.
type Windows = Vec<(f64, f64)>;

/// Removes the run's files when dropped (after the run, or on error).
struct Cleanup(Vec<PathBuf>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

fn fs_err(op: &'static str, path: impl Into<String>) -> impl FnOnce(manyfs::Error) -> BenchError {
    let path = path.into();
    move |cause| BenchError::Fs { op, path, cause }
}

/// Quantile `q` of sorted `v` (0 when empty).
fn quantile(v: &[u64], q: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    let i = ((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1;
    v[i]
}

/// One run: a fresh tiered pool, `threads` appenders, checkpoints as
/// `mode` says.
fn run_one(
    cfg: &CheckpointConfig,
    label: &str,
    mode: Option<Checkpoint>,
    threads: usize,
) -> Result<CheckpointRun> {
    let pool_cfg = crate::target::PoolConfig {
        pool: Some(cfg.pool.clone()),
        durability: Durability::Dram,
        size: cfg.pool_size,
        data: Some(cfg.data.clone()),
        data_size: cfg.data_size,
        ..Default::default()
    };
    let mut opts = pool_cfg.mount_options(LockKind::SrlTree);
    // Only the checkpoints this run starts itself.
    opts.commit_interval = Duration::ZERO;
    opts.checkpoint = mode.unwrap_or_default();
    let mkfs = pool_cfg.mkfs_options(&cfg.pool)?;
    let fs = manyfs::Fs::mkfs(&cfg.pool, &mkfs, &opts)
        .map_err(fs_err("mkfs", cfg.pool.display().to_string()))?;
    let files = (0..threads)
        .map(|t| {
            let path = format!("/append-{t}");
            manyfs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .open(&fs, &path)
                .map_err(fs_err("open", path))
        })
        .collect::<Result<Vec<_>>>()?;
    fs.sync().map_err(fs_err("sync", "/"))?;
    let (samples, checkpoints, cpu) = traced(
        cfg,
        threads,
        mode,
        |t, buf, n| {
            files[t]
                .write_all_at(buf, n * BLOCK as u64)
                .map_err(fs_err("write", format!("/append-{t}")))
        },
        || fs.sync().map_err(fs_err("sync", "/")),
    )?;
    drop(files);
    fs.unmount().map_err(fs_err("unmount", "/"))?;
    Ok(summarise(
        label,
        threads,
        cfg.duration,
        samples,
        (checkpoints, cpu),
    ))
}

/// The `device` run: `O_DIRECT` appends to the data file, thread `t` from
/// `t * size / threads`, an `fdatasync` every `interval`.
fn run_device(cfg: &CheckpointConfig, threads: usize) -> Result<CheckpointRun> {
    use std::os::unix::fs::FileExt;
    let path = &cfg.data;
    let file = super::tier::open_direct(path)?;
    // Written whole first, as mkfs writes the data device: the appends
    // overwrite written blocks, none allocates.
    let zeros = AlignedBuf::new(1 << 20);
    let mut off = 0;
    while off < cfg.data_size {
        file.write_all_at(&zeros, off)
            .map_err(|e| BenchError::io("write", path, e))?;
        off += zeros.len() as u64;
    }
    file.sync_data()
        .map_err(|e| BenchError::io("fdatasync", path, e))?;
    let region = (cfg.data_size / threads as u64) & !(BLOCK as u64 - 1);
    let (samples, checkpoints, cpu) = traced(
        cfg,
        threads,
        Some(Checkpoint::Background),
        |t, buf, n| {
            let off = t as u64 * region + (n * BLOCK as u64) % region.max(BLOCK as u64);
            file.write_all_at(buf, off)
                .map_err(|e| BenchError::io("write", path, e))
        },
        || {
            file.sync_data()
                .map_err(|e| BenchError::io("fdatasync", path, e))
        },
    )?;
    Ok(summarise(
        DEVICE,
        threads,
        cfg.duration,
        samples,
        (checkpoints, cpu),
    ))
}

/// Run `threads` writers (`write(thread, buf, n)` writes thread's `n`-th
/// 4 KiB block) for the warm-up, then trace every write for the measured
/// time while `checkpoint` runs every `interval` (never if `mode` is
/// `None`): the samples and the checkpoints' (start, end).
fn traced(
    cfg: &CheckpointConfig,
    threads: usize,
    mode: Option<Checkpoint>,
    write: impl Fn(usize, &[u8], u64) -> Result<()> + Sync,
    checkpoint: impl Fn() -> Result<()>,
) -> Result<(Vec<Sample>, Windows, Vec<u64>)> {
    let cpus = cfg.pin.then(allowed_cpus).filter(|c| !c.is_empty());
    let measuring = AtomicBool::new(false);
    let stop = AtomicBool::new(false);
    let gate = Gate::new();
    let start = std::sync::OnceLock::<Instant>::new();
    std::thread::scope(|s| -> Result<_> {
        let writers: Vec<_> = (0..threads)
            .map(|t| {
                let (measuring, stop, gate, start, cpus, write) =
                    (&measuring, &stop, &gate, &start, cpus.clone(), &write);
                s.spawn(move || -> Result<Vec<Sample>> {
                    if let Some(c) = &cpus {
                        pin_current_thread(c[t % c.len()]);
                    }
                    let mut buf = AlignedBuf::new(BLOCK);
                    buf.fill(t as u8 + 1);
                    let mut n = 0u64;
                    let mut out = Vec::with_capacity(1 << 16);
                    gate.arrive_and_wait();
                    while !stop.load(Ordering::Relaxed) {
                        let t0 = Instant::now();
                        let r = write(t, &buf, n);
                        let lat = t0.elapsed();
                        if let Err(e) = r {
                            stop.store(true, Ordering::Relaxed);
                            return Err(e);
                        }
                        n += 1;
                        if measuring.load(Ordering::Relaxed)
                            && let Some(&s0) = start.get()
                            && t0 >= s0
                        {
                            out.push(((t0 - s0).as_nanos() as u64, lat.as_nanos() as u64));
                        }
                    }
                    Ok(out)
                })
            })
            .collect();
        gate.open_when(threads);
        std::thread::sleep(cfg.warmup);
        let s0 = Instant::now();
        let _ = start.set(s0);
        measuring.store(true, Ordering::Relaxed);
        let (mut checkpoints, mut cpu) = (Vec::new(), Vec::new());
        let mut failed = None;
        let end = s0 + cfg.duration;
        let mut next = s0 + cfg.interval / 2;
        loop {
            let now = Instant::now();
            if now >= end || interrupted() || stop.load(Ordering::Relaxed) {
                break;
            }
            if mode.is_none() || now < next {
                std::thread::sleep(next.min(end).saturating_duration_since(now));
                continue;
            }
            let (c0, cpu0) = (Instant::now(), thread_cpu_ns());
            if let Err(e) = checkpoint() {
                failed = Some(e);
                break;
            }
            let (c1, cpu1) = (Instant::now(), thread_cpu_ns());
            checkpoints.push(((c0 - s0).as_secs_f64(), (c1 - s0).as_secs_f64()));
            cpu.push(cpu1.saturating_sub(cpu0));
            next += cfg.interval;
        }
        measuring.store(false, Ordering::Relaxed);
        stop.store(true, Ordering::Relaxed);
        let mut samples = Vec::new();
        let mut first_err = failed;
        for w in writers {
            match w.join() {
                Ok(Ok(got)) => samples.extend(got),
                Ok(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                Err(_) => {
                    first_err.get_or_insert(BenchError::InvalidArgument(
                        "a writer thread panicked".into(),
                    ));
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok((samples, checkpoints, cpu)),
        }
    })
}

/// The summary and trace of one run's samples.
fn summarise(
    label: &str,
    threads: usize,
    duration: Duration,
    mut samples: Vec<Sample>,
    (checkpoints, checkpoint_cpu_ns): (Windows, Vec<u64>),
) -> CheckpointRun {
    // Writes that started after the measured time (before the writers
    // saw the stop) are not part of it.
    samples.retain(|s| u128::from(s.0) < duration.as_nanos());
    samples.sort_unstable();
    let mut lat: Vec<u64> = samples.iter().map(|s| s.1).collect();
    lat.sort_unstable();
    // A write overlaps a checkpoint if it started before the checkpoint
    // ended and ended after it started.
    let overlaps = |&(start, l): &Sample| {
        let (a, b) = (start as f64 / 1e9, (start + l) as f64 / 1e9);
        checkpoints.iter().any(|&(s, e)| a < e && b > s)
    };
    let mut during: Vec<u64> = samples
        .iter()
        .filter(|s| overlaps(s))
        .map(|s| s.1)
        .collect();
    during.sort_unstable();
    let buckets = duration.as_nanos().div_ceil(BUCKET.as_nanos()) as usize;
    let mut trace: Vec<(f64, u64, u64)> = (0..buckets)
        .map(|i| ((i as u128 * BUCKET.as_nanos()) as f64 / 1e9, 0, 0))
        .collect();
    for &(start, l) in &samples {
        let i = (start / BUCKET.as_nanos() as u64) as usize;
        if let Some(b) = trace.get_mut(i) {
            b.1 = b.1.max(l);
            b.2 += 1;
        }
    }
    CheckpointRun {
        mode: label.to_string(),
        threads,
        seconds: duration.as_secs_f64(),
        writes: samples.len() as u64,
        p50_ns: quantile(&lat, 0.50),
        p99_ns: quantile(&lat, 0.99),
        p999_ns: quantile(&lat, 0.999),
        max_ns: lat.last().copied().unwrap_or(0),
        checkpoints,
        checkpoint_cpu_ns,
        during_writes: during.len() as u64,
        during_p99_ns: quantile(&during, 0.99),
        during_max_ns: during.last().copied().unwrap_or(0),
        trace,
    }
}

/// Run `tier-checkpoint`: per thread count, the three modes side by side;
/// `progress` hears what runs next. The pool and the device are removed
/// afterwards (also on error).
pub fn run_tier_checkpoint(
    cfg: &CheckpointConfig,
    mut progress: impl FnMut(&str),
) -> Result<Vec<CheckpointRun>> {
    cfg.check()?;
    let _cleanup = Cleanup(vec![cfg.pool.clone(), cfg.data.clone()]);
    let mut out = Vec::new();
    for &threads in &cfg.threads {
        for (label, mode) in MODES {
            if interrupted() {
                return Err(BenchError::InvalidArgument("interrupted".into()));
            }
            progress(&format!("{label} x{threads}"));
            out.push(run_one(cfg, label, mode, threads)?);
        }
        progress(&format!("{DEVICE} x{threads}"));
        out.push(run_device(cfg, threads)?);
    }
    Ok(out)
}

/// Every run, trace included, as JSON.
pub fn write_json(path: &Path, runs: &[CheckpointRun]) -> Result<()> {
    let text = serde_json::to_string_pretty(runs)?;
    std::fs::write(path, text + "\n").map_err(|e| BenchError::io("write", path, e))
}

/// The parameters of a run, printed above its results.
pub fn header(cfg: &CheckpointConfig) -> String {
    format!(
        "tier-checkpoint: lib:srl-tree, data device {} ({} MiB, O_DIRECT), logs in a `dram` \
         pool {} (emulated NVM)\nper thread: 4 KiB appends to a file of its own; a checkpoint \
         (Fs::sync) every {} ms for {:.1} s after {:.1} s of warm-up\n",
        cfg.data.display(),
        cfg.data_size >> 20,
        cfg.pool.display(),
        cfg.interval.as_millis(),
        cfg.duration.as_secs_f64(),
        cfg.warmup.as_secs_f64()
    )
}

/// One row per run: throughput, latency, checkpoints, and the writes that
/// overlapped a checkpoint against the p99 of the `none` run with the same
/// thread count (the `device` run's "checkpoints" are its `fdatasync`s).
pub fn table(runs: &[CheckpointRun]) -> String {
    let header = [
        "mode",
        "threads",
        "writes/s",
        "p50",
        "p99",
        "p99.9",
        "max",
        "checkpoints",
        "ckpt p50",
        "ckpt cpu p50",
        "writes in ckpt",
        "their p99",
        "their max",
        "max / ref p99",
    ];
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|r| {
            let reference = runs
                .iter()
                .find(|n| n.mode == "none" && n.threads == r.threads)
                .map(|n| n.p99_ns)
                .filter(|&p| p > 0);
            let vs = match (reference, r.during_writes) {
                (Some(p), n) if n > 0 => format!("{:.1}x", r.during_max_ns as f64 / p as f64),
                _ => "-".into(),
            };
            vec![
                r.mode.clone(),
                r.threads.to_string(),
                si(r.writes_per_sec()),
                ns(r.p50_ns),
                ns(r.p99_ns),
                ns(r.p999_ns),
                ns(r.max_ns),
                r.checkpoints.len().to_string(),
                if r.checkpoints.is_empty() {
                    "-".into()
                } else {
                    ns(r.checkpoint_median_ns())
                },
                if r.checkpoint_cpu_ns.is_empty() {
                    "-".into()
                } else {
                    ns(r.checkpoint_cpu_median_ns())
                },
                r.during_writes.to_string(),
                if r.during_writes > 0 {
                    ns(r.during_p99_ns)
                } else {
                    "-".into()
                },
                if r.during_writes > 0 {
                    ns(r.during_max_ns)
                } else {
                    "-".into()
                },
                vs,
            ]
        })
        .collect();
    let mut out = text_table(&header, &rows, 2, Rule::Full);
    let _ = writeln!(
        out,
        "(ckpt cpu: CPU time of the thread running the checkpoint; writes in ckpt: writes that \
         overlapped a checkpoint; max / ref p99: the slowest of them over the p99 of the `none` \
         run)"
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_separates_writes_during_checkpoints() {
        // Writes every 1 ms of 10 us, one of 5 ms inside the checkpoint
        // at [0.0205, 0.0215] s.
        let mut samples: Vec<Sample> = (0..50u64).map(|i| (i * 1_000_000, 10_000)).collect();
        samples.push((20_000_000, 5_000_000));
        let run = summarise(
            "blocking",
            1,
            Duration::from_millis(50),
            samples,
            (vec![(0.0205, 0.0215)], vec![400_000]),
        );
        assert_eq!(run.writes, 51);
        assert_eq!(run.max_ns, 5_000_000);
        // The long write (20 ms .. 25 ms) and the one starting at 21 ms.
        assert_eq!(run.during_writes, 2);
        assert_eq!(run.during_max_ns, 5_000_000);
        assert_eq!(run.p50_ns, 10_000);
        assert_eq!(run.trace.len(), 5);
        assert_eq!(run.trace[2], (0.02, 5_000_000, 11));
        assert_eq!(run.checkpoint_median_ns(), 1_000_000);
        assert_eq!(run.checkpoint_cpu_median_ns(), 400_000);
        assert!(table(&[run]).contains("400.00us"));
    }

    #[test]
    fn bad_configurations_are_refused() {
        let mut cfg = CheckpointConfig::new(Path::new("/d"), Path::new("/s"));
        assert!(cfg.check().is_ok());
        cfg.threads = vec![0];
        assert!(cfg.check().is_err());
        cfg.threads = vec![1];
        cfg.interval = Duration::ZERO;
        assert!(cfg.check().is_err());
    }
}
