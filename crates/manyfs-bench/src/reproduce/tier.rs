//! `tier-fig6`: the F2FS range-lock + NVM node-logging paper's Figure 6
//! (b) and (c) on a tiered pool.
//!
//! The paper's four configurations, file data on the data device in all
//! four: **Baseline** (`lib:inode`, logs and inodes in a `file`-mode pool
//! on the disk's file system, as F2FS keeps its node blocks on the SSD),
//! **RL** (`lib:srl-tree`, the same pool), **NL** (`lib:inode`, the pool
//! in `dram` mode on `/dev/shm`: the paper's emulated NVM) and
//! **Integrated** (`lib:srl-tree` and the `/dev/shm` pool). Workloads:
//! DWOM direct (every thread overwrites its own 4 KiB block of one shared
//! file; the device is opened `O_DIRECT`, so every write reaches it) and
//! DWSL (every thread overwrites block 0 of its own file and `fsync`s
//! it). Each operation's `write` and `fsync` are timed apart.
//!
//! Two references run in the same pass: the data device itself (4 KiB
//! `O_DIRECT` writes to the data file, each thread its own block; with an
//! `fdatasync` after each for DWSL) and, for DWSL, the disk's own file
//! system (a directory beside the data file, buffered `pwrite` + `fsync`).

use crate::backend::{Backend, BenchFile, DirBackend, write_full};
use crate::report::{Rule, ns, persist_table, si, text_table};
use crate::runner::{
    Histogram, MEASURE, Percentiles, PersistPerOp, Record, STOP, WARMUP, add_histogram,
    join_workers, latency_histogram, median_record, persist_snapshot, record_latency, run_phases,
};
use crate::sys::{AlignedBuf, Gate, allowed_cpus, interrupted, pin_current_thread};
use crate::target::{PoolConfig, Target, TargetEnv};
use crate::workload::{BLOCK, REGION};
use crate::{BenchError, Result};
use manyfs::{Durability, LockKind};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Where the disk-side files go unless `--pool`/`--data` say otherwise: a
/// directory on a disk file system (not a tmpfs, which has no device
/// flush to measure).
pub const DEFAULT_DISK_DIR: &str = "/var/tmp";

/// Where the emulated-NVM pool goes.
pub const DEFAULT_SHM_DIR: &str = "/dev/shm";

/// The paper's four configurations: (label, range lock, pool medium; a
/// `file` pool lives on the disk, a `dram` pool on `/dev/shm`).
pub const CONFIGS: [(&str, LockKind, Durability); 4] = [
    ("Baseline", LockKind::Inode, Durability::File),
    ("RL", LockKind::SrlTree, Durability::File),
    ("NL", LockKind::Inode, Durability::Dram),
    ("Integrated", LockKind::SrlTree, Durability::Dram),
];

/// The workload names the records carry.
pub const DWOM: &str = "DWOM direct";
/// DWSL's name.
pub const DWSL: &str = "DWSL";

/// The reference line of the device's raw write bandwidth.
pub const DEVICE: &str = "device (raw O_DIRECT)";
/// The disk's own file system (DWSL only).
pub const DISK_FS: &str = "disk fs";

/// What `tier-fig6` runs.
#[derive(Debug, Clone)]
pub struct TierConfig {
    /// The `file`-mode pool of Baseline and RL (on the disk).
    pub disk_pool: PathBuf,
    /// The `dram`-mode pool of NL and Integrated (on `/dev/shm`).
    pub shm_pool: PathBuf,
    /// The data device (a file on the disk, or a block device).
    pub data: PathBuf,
    /// The directory of the disk-file-system reference, removed afterwards.
    pub disk_fs_dir: PathBuf,
    /// Pool size in bytes.
    pub pool_size: u64,
    /// Data device size in bytes.
    pub data_size: u64,
    /// Thread counts.
    pub threads: Vec<usize>,
    /// Unmeasured time per point.
    pub warmup: Duration,
    /// Measured time per point.
    pub duration: Duration,
    /// Runs per point, interleaved; the median (by ops/s) is reported.
    pub repeats: usize,
    /// Pin thread `t` to the `t`-th allowed CPU (round-robin).
    pub pin: bool,
}

impl TierConfig {
    /// The figure's defaults with the disk-side files in `disk_dir` and
    /// the emulated-NVM pool in `shm_dir`: threads 1 and 2, 0.2 s warm-up,
    /// 2 s per point, 256 MiB pools and device.
    pub fn new(disk_dir: &Path, shm_dir: &Path) -> TierConfig {
        TierConfig {
            disk_pool: disk_dir.join("manyfs-tier-fig6.pool"),
            shm_pool: shm_dir.join("manyfs-tier-fig6.pool"),
            data: disk_dir.join("manyfs-tier-fig6.data"),
            disk_fs_dir: disk_dir.join("manyfs-tier-fig6.dir"),
            pool_size: 256 << 20,
            data_size: 256 << 20,
            threads: vec![1, 2],
            warmup: Duration::from_millis(200),
            duration: Duration::from_secs(2),
            repeats: 1,
            pin: true,
        }
    }

    /// The pool of a configuration with medium `mode`.
    fn pool_of(&self, mode: Durability) -> &Path {
        if mode == Durability::File {
            &self.disk_pool
        } else {
            &self.shm_pool
        }
    }

    fn check(&self) -> Result<()> {
        if self.threads.is_empty() || self.threads.contains(&0) {
            return Err(BenchError::InvalidArgument(
                "tier-fig6 needs positive thread counts".into(),
            ));
        }
        if self.repeats == 0 {
            return Err(BenchError::InvalidArgument(
                "tier-fig6 needs at least one run per point".into(),
            ));
        }
        let max = *self.threads.iter().max().unwrap_or(&1) as u64;
        // DWOM's blocks are REGION apart; the device reference writes the
        // same offsets.
        let need = max * REGION + 2 * BLOCK as u64;
        if self.data_size < need || self.data_size < (1 << 20) {
            return Err(BenchError::InvalidArgument(format!(
                "tier-fig6: a data device of {} bytes is too small for {max} threads (needs {need})",
                self.data_size
            )));
        }
        if self.disk_pool == self.shm_pool || self.data == self.disk_pool {
            return Err(BenchError::InvalidArgument(
                "tier-fig6: the two pools and the data device must be three paths".into(),
            ));
        }
        Ok(())
    }
}

/// Removes the figure's files when dropped (after the run, or on error).
struct Cleanup(Vec<PathBuf>, PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p);
        }
        let _ = std::fs::remove_dir_all(&self.1);
    }
}

/// One timed operation: the `write`'s time and, where it has one, the
/// `fsync`'s.
type TimedOp = Box<dyn FnMut() -> Result<(Duration, Option<Duration>)> + Send>;

/// What [`timed`] measured.
struct Timed {
    ops: u64,
    all_ops: u64,
    elapsed: Duration,
    op: Histogram,
    write: Histogram,
    fsync: Histogram,
}

/// Run one [`TimedOp`] per thread for `warmup`, then `duration` measured
/// (extended until every thread completed one measured operation).
fn timed(ops: Vec<TimedOp>, cfg: &TierConfig) -> Result<Timed> {
    let n = ops.len();
    let cpus = cfg.pin.then(allowed_cpus).filter(|c| !c.is_empty());
    let phase = AtomicU8::new(WARMUP);
    let counted = AtomicUsize::new(0);
    let gate = Gate::new();
    std::thread::scope(|s| {
        let handles: Vec<_> = ops
            .into_iter()
            .enumerate()
            .map(|(i, mut op)| {
                let (phase, gate, counted, cpus) = (&phase, &gate, &counted, cpus.clone());
                s.spawn(
                    move || -> Result<(Histogram, Histogram, Histogram, u64, u64)> {
                        if let Some(c) = &cpus {
                            pin_current_thread(c[i % c.len()]);
                        }
                        let (mut h_op, mut h_w, mut h_f) = (
                            latency_histogram(),
                            latency_histogram(),
                            latency_histogram(),
                        );
                        let (mut count, mut all) = (0u64, 0u64);
                        gate.arrive_and_wait();
                        loop {
                            let p = phase.load(Ordering::Relaxed);
                            if p == STOP {
                                break;
                            }
                            let (w, f) = match op() {
                                Ok(t) => t,
                                Err(e) => {
                                    phase.store(STOP, Ordering::Relaxed);
                                    return Err(e);
                                }
                            };
                            all += 1;
                            if p == MEASURE {
                                record_latency(&mut h_w, w.as_nanos() as u64);
                                let mut total = w;
                                if let Some(f) = f {
                                    record_latency(&mut h_f, f.as_nanos() as u64);
                                    total += f;
                                }
                                record_latency(&mut h_op, total.as_nanos() as u64);
                                count += 1;
                                if count == 1 {
                                    counted.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                        }
                        Ok((h_op, h_w, h_f, count, all))
                    },
                )
            })
            .collect();
        gate.open_when(n);
        let elapsed = run_phases(&phase, &counted, n, cfg.warmup, cfg.duration);
        let mut t = Timed {
            ops: 0,
            all_ops: 0,
            elapsed,
            op: latency_histogram(),
            write: latency_histogram(),
            fsync: latency_histogram(),
        };
        join_workers(handles, |(o, w, f, c, a)| {
            add_histogram(&mut t.op, &o);
            add_histogram(&mut t.write, &w);
            add_histogram(&mut t.fsync, &f);
            t.ops += c;
            t.all_ops += a;
        })?;
        Ok(t)
    })
}

/// A 4 KiB page-aligned buffer filled with `byte`.
fn block(byte: u8) -> AlignedBuf {
    let mut b = AlignedBuf::new(BLOCK);
    b.fill(byte);
    b
}

/// The ops of a workload on a file system: DWOM direct (`sync` false) or
/// DWSL, prepared (every block written once and made durable) first.
fn fs_ops(be: &Arc<dyn Backend>, threads: usize, sync: bool) -> Result<Vec<TimedOp>> {
    let how = crate::backend::Open {
        create: true,
        truncate: false,
        append: false,
    };
    let mut files: Vec<(Arc<dyn BenchFile>, u64)> = Vec::new();
    if sync {
        for t in 0..threads {
            let f = be.open(&format!("/dwsl-{t}"), how)?;
            files.push((f, 0));
        }
    } else {
        let f = be.open("/dwom", how)?;
        for t in 0..threads {
            files.push((f.clone(), t as u64 * REGION));
        }
    }
    for (t, (f, off)) in files.iter().enumerate() {
        write_full(f.as_ref(), &block(t as u8), *off)?;
        f.sync_all()?;
    }
    Ok(files
        .into_iter()
        .enumerate()
        .map(|(t, (f, off))| {
            let buf = block(t as u8 ^ 0x5a);
            Box::new(move || {
                let t0 = Instant::now();
                write_full(f.as_ref(), &buf, off)?;
                let w = t0.elapsed();
                if !sync {
                    return Ok((w, None));
                }
                let t1 = Instant::now();
                f.sync_all()?;
                Ok((w, Some(t1.elapsed())))
            }) as TimedOp
        })
        .collect())
}

/// Open (or create) the data file `path` for `O_DIRECT` reads and writes,
/// as the tier opens its device: the raw-device references write it so.
pub(crate) fn open_direct(path: &Path) -> Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .map_err(|e| BenchError::io("open O_DIRECT", path, e))
}

/// The device reference's ops: `O_DIRECT` 4 KiB writes of the data file,
/// thread `t` at `(t + 1) * REGION`, with an `fdatasync` after each for
/// DWSL.
fn device_ops(path: &Path, size: u64, threads: usize, sync: bool) -> Result<Vec<TimedOp>> {
    use std::os::unix::fs::FileExt;
    let file = open_direct(path)?;
    file.set_len(size)
        .map_err(|e| BenchError::io("set_len", path, e))?;
    let file = Arc::new(file);
    let mut out: Vec<TimedOp> = Vec::new();
    for t in 0..threads {
        let off = (t as u64 + 1) * REGION;
        file.write_all_at(&block(t as u8), off)
            .map_err(|e| BenchError::io("write", path, e))?;
        file.sync_data()
            .map_err(|e| BenchError::io("fdatasync", path, e))?;
        let (f, p, buf) = (file.clone(), path.to_path_buf(), block(!(t as u8)));
        out.push(Box::new(move || {
            let t0 = Instant::now();
            f.write_all_at(&buf, off)
                .map_err(|e| BenchError::io("write", &p, e))?;
            let w = t0.elapsed();
            if !sync {
                return Ok((w, None));
            }
            let t1 = Instant::now();
            f.sync_data()
                .map_err(|e| BenchError::io("fdatasync", &p, e))?;
            Ok((w, Some(t1.elapsed())))
        }));
    }
    Ok(out)
}

/// One point of the plan.
#[derive(Debug, Clone)]
enum Point {
    /// A configuration of [`CONFIGS`] (its index).
    Config(usize),
    Device,
    DiskFs,
}

fn label(p: &Point) -> &'static str {
    match p {
        Point::Config(i) => CONFIGS[*i].0,
        Point::Device => DEVICE,
        Point::DiskFs => DISK_FS,
    }
}

/// Every (point, workload is DWSL, threads) of the figure, in run order:
/// the device reference first, then each configuration, then the disk's
/// file system.
fn plan(cfg: &TierConfig) -> Vec<(Point, bool, usize)> {
    let mut out = Vec::new();
    for sync in [false, true] {
        for &t in &cfg.threads {
            out.push((Point::Device, sync, t));
            for i in 0..CONFIGS.len() {
                out.push((Point::Config(i), sync, t));
            }
            if sync {
                out.push((Point::DiskFs, sync, t));
            }
        }
    }
    out
}

fn record(
    point: &Point,
    sync: bool,
    threads: usize,
    t: &Timed,
    persist: Option<PersistPerOp>,
) -> Record {
    let secs = t.elapsed.as_secs_f64().max(1e-9);
    Record {
        workload: if sync { DWSL } else { DWOM }.into(),
        target: label(point).into(),
        threads,
        ops_per_sec: t.ops as f64 / secs,
        bytes_per_sec: (t.ops * BLOCK as u64) as f64 / secs,
        p50_ns: t.op.value_at_quantile(0.50),
        p99_ns: t.op.value_at_quantile(0.99),
        ops: t.ops,
        seconds: secs,
        runs: 1,
        ops_per_sec_min: t.ops as f64 / secs,
        ops_per_sec_max: t.ops as f64 / secs,
        emulated: None,
        moves: None,
        persist,
        write_latency: Percentiles::of(&t.write),
        fsync_latency: Percentiles::of(&t.fsync),
        steal: None,
    }
}

fn run_one(cfg: &TierConfig, point: &Point, sync: bool, threads: usize) -> Result<Record> {
    match point {
        Point::Device => {
            let ops = device_ops(&cfg.data, cfg.data_size, threads, sync)?;
            let t = timed(ops, cfg)?;
            Ok(record(point, sync, threads, &t, None))
        }
        Point::DiskFs => {
            let _ = std::fs::remove_dir_all(&cfg.disk_fs_dir);
            std::fs::create_dir_all(&cfg.disk_fs_dir)
                .map_err(|e| BenchError::io("mkdir", &cfg.disk_fs_dir, e))?;
            let be: Arc<dyn Backend> = Arc::new(DirBackend::new(cfg.disk_fs_dir.clone()));
            let ops = fs_ops(&be, threads, sync)?;
            let t = timed(ops, cfg)?;
            drop(be);
            let _ = std::fs::remove_dir_all(&cfg.disk_fs_dir);
            Ok(record(point, sync, threads, &t, None))
        }
        Point::Config(i) => {
            let (_, lock, mode) = CONFIGS[*i];
            let pool = PoolConfig {
                pool: Some(cfg.pool_of(mode).to_path_buf()),
                durability: mode,
                size: cfg.pool_size,
                data: Some(cfg.data.clone()),
                data_size: cfg.data_size,
                ..PoolConfig::default()
            };
            let mut env = TargetEnv::new(&Target::Lib(lock), &pool)?;
            let p = env.point()?;
            let be = p.backend();
            let ops = fs_ops(&be, threads, sync)?;
            drop(be);
            let fs = p.fs().ok_or_else(|| {
                BenchError::InvalidArgument("a lib: point has a file system".into())
            })?;
            let before = persist_snapshot(fs);
            let t = timed(ops, cfg)?;
            let persist = PersistPerOp::between(before, persist_snapshot(fs), t.all_ops);
            p.finish()?;
            Ok(record(point, sync, threads, &t, Some(persist)))
        }
    }
}

/// Run `tier-fig6`: every point of the plan, `cfg.repeats` interleaved
/// rounds, the median run of each; `progress` hears what runs next. The
/// pools, the data device and the reference directory are removed
/// afterwards (also on error).
pub fn run_tier_fig6(cfg: &TierConfig, mut progress: impl FnMut(&str)) -> Result<Vec<Record>> {
    cfg.check()?;
    let _cleanup = Cleanup(
        vec![
            cfg.disk_pool.clone(),
            cfg.shm_pool.clone(),
            cfg.data.clone(),
        ],
        cfg.disk_fs_dir.clone(),
    );
    let plan = plan(cfg);
    let mut runs: Vec<Vec<Record>> = vec![Vec::new(); plan.len()];
    for round in 0..cfg.repeats {
        for (i, (point, sync, threads)) in plan.iter().enumerate() {
            if interrupted() {
                return Err(BenchError::InvalidArgument("interrupted".into()));
            }
            progress(&format!(
                "round {}/{}: {} {} x{threads}",
                round + 1,
                cfg.repeats,
                if *sync { DWSL } else { DWOM },
                label(point)
            ));
            runs[i].push(run_one(cfg, point, *sync, *threads)?);
        }
    }
    Ok(runs.into_iter().filter_map(median_record).collect())
}

/// The parameters of a run, printed above its results.
pub fn header(cfg: &TierConfig) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "tier-fig6: data device {} ({} MiB, O_DIRECT) in every configuration",
        cfg.data.display(),
        cfg.data_size >> 20
    );
    let _ = writeln!(
        out,
        "Baseline = lib:inode, RL = lib:srl-tree: logs in a `file` pool {} (the disk's file \
         system)",
        cfg.disk_pool.display()
    );
    let _ = writeln!(
        out,
        "NL = lib:inode, Integrated = lib:srl-tree: logs in a `dram` pool {} (emulated NVM)",
        cfg.shm_pool.display()
    );
    let _ = writeln!(
        out,
        "references: {DEVICE} = 4 KiB O_DIRECT writes of the data file (+ fdatasync for DWSL); \
         {DISK_FS} = DWSL in {} (buffered pwrite + fsync)",
        cfg.disk_fs_dir.display()
    );
    out
}

/// Throughput per configuration and the ratios the paper reports.
pub fn table(records: &[Record]) -> String {
    let find = |w: &str, t: &str, n: usize| {
        records
            .iter()
            .find(|r| r.workload == w && r.target == t && r.threads == n)
    };
    let mut threads: Vec<usize> = records.iter().map(|r| r.threads).collect();
    threads.sort_unstable();
    threads.dedup();
    let mut header: Vec<String> = vec!["workload".into(), "threads".into(), DEVICE.into()];
    header.extend(CONFIGS.iter().map(|c| c.0.to_string()));
    header.extend(
        [
            "RL/Baseline",
            "NL/Baseline",
            "Integrated/Baseline",
            "NL/disk fs",
        ]
        .map(String::from),
    );
    let ops = |r: Option<&Record>| r.map(|r| si(r.ops_per_sec)).unwrap_or_else(|| "-".into());
    let ratio = |a: Option<&Record>, b: Option<&Record>| match (a, b) {
        (Some(a), Some(b)) if b.ops_per_sec > 0.0 => {
            format!("{:.2}x", a.ops_per_sec / b.ops_per_sec)
        }
        _ => "-".into(),
    };
    let mut rows = Vec::new();
    for w in [DWOM, DWSL] {
        for &n in &threads {
            let base = find(w, "Baseline", n);
            let mut row = vec![w.to_string(), n.to_string(), ops(find(w, DEVICE, n))];
            row.extend(CONFIGS.iter().map(|c| ops(find(w, c.0, n))));
            row.push(ratio(find(w, "RL", n), base));
            row.push(ratio(find(w, "NL", n), base));
            row.push(ratio(find(w, "Integrated", n), base));
            row.push(ratio(find(w, "NL", n), find(w, DISK_FS, n)));
            rows.push(row);
        }
    }
    let h: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut out = text_table(&h, &rows, 2, Rule::Full);
    if let Some(rows) = disk_fs_rows(records) {
        let _ = write!(out, "{rows}");
    }
    out
}

fn disk_fs_rows(records: &[Record]) -> Option<String> {
    let rs: Vec<&Record> = records.iter().filter(|r| r.target == DISK_FS).collect();
    if rs.is_empty() {
        return None;
    }
    let mut out = String::new();
    for r in rs {
        let _ = writeln!(
            out,
            "{DISK_FS} {} x{}: {} ops/s",
            r.workload,
            r.threads,
            si(r.ops_per_sec)
        );
    }
    Some(out)
}

/// Write and `fsync` latency percentiles of every record, then what each
/// configuration made durable per operation.
pub fn latency_table(records: &[Record]) -> String {
    let pct = |p: Option<&Percentiles>| match p {
        Some(p) => [p.p50_ns, p.p90_ns, p.p99_ns, p.p999_ns].map(ns),
        None => ["-".to_string(), "-".into(), "-".into(), "-".into()],
    };
    let rows: Vec<Vec<String>> = records
        .iter()
        .map(|r| {
            let mut row = vec![r.workload.clone(), r.target.clone(), r.threads.to_string()];
            row.extend(pct(r.write_latency.as_ref()));
            row.extend(pct(r.fsync_latency.as_ref()));
            row
        })
        .collect();
    let header = [
        "workload",
        "target",
        "threads",
        "write p50",
        "p90",
        "p99",
        "p99.9",
        "fsync p50",
        "p90",
        "p99",
        "p99.9",
    ];
    let mut out = text_table(&header, &rows, 3, Rule::Full);
    out.push_str(&persist_table(records));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_has_every_configuration_and_both_references() {
        let mut cfg = TierConfig::new(Path::new("/d"), Path::new("/s"));
        cfg.threads = vec![1, 2];
        let p = plan(&cfg);
        // Per thread count: DWOM = device + 4, DWSL = device + 4 + disk fs.
        assert_eq!(p.len(), 2 * 5 + 2 * 6);
        assert_eq!(
            cfg.pool_of(Durability::File),
            Path::new("/d/manyfs-tier-fig6.pool")
        );
        assert_eq!(
            cfg.pool_of(Durability::Dram),
            Path::new("/s/manyfs-tier-fig6.pool")
        );
        assert!(cfg.check().is_ok());
        cfg.data_size = 4 << 20;
        assert!(cfg.check().is_err(), "DWOM's second block is 8 MiB in");
        cfg.data_size = 256 << 20;
        cfg.threads = vec![0];
        assert!(cfg.check().is_err());
    }
}
