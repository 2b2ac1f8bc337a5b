//! `manyfs bench`: a thin command-line layer over the `manyfs-bench` crate.

use anyhow::{Result, bail};
use manyfs_bench::locks::{LockConfig, run_locks};
use manyfs_bench::report::{headline, table, write_json};
use manyfs_bench::sys::{parse_duration, parse_size};
use manyfs_bench::{Config, Target, Workload};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Run FxMark-style workloads against in-process manyfs (each range lock)
/// and directories, or the range-lock microbenchmarks.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Workloads, comma-separated: DWOM DRBM DWOL DRBL HACCIO MIX:R:W DRBH
    /// DWAL DWTL DWSL MWCL MWCM MWUL MWUM MWRL MWRM MRPL MRPM MRDL MRDM DRFL, or
    /// `all` [default: DWOM,DRBM,DWOL,DRBL,HACCIO,MIX:3:1]
    #[arg(long, short = 'w', value_delimiter = ',', visible_alias = "workload", value_parser = parse_workloads)]
    workloads: Vec<Workloads>,
    /// Targets, comma-separated: lib:inode lib:interval lib:srl-array
    /// lib:srl-tree lib:all dir:PATH tmpfs [default: lib:all,tmpfs]
    #[arg(long, short = 't', value_delimiter = ',', visible_alias = "target", value_parser = parse_targets)]
    targets: Vec<Targets>,
    /// Thread counts, comma-separated [default: 1,2; 1,2,64 with --quick
    /// and --locks]
    #[arg(long, value_delimiter = ',')]
    threads: Option<Vec<usize>>,
    /// Measured time per point, e.g. 2s, 500ms [default: 2s; 0.5s with
    /// --quick and --locks]
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Unmeasured warm-up per point [default: 200ms; 100ms with --quick]
    #[arg(long, value_parser = parse_duration)]
    warmup: Option<Duration>,
    /// Write the results as JSON (one record per point).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write a throughput-vs-threads plot (.svg or .png)
    /// [default with --quick: manyfs-bench-quick.svg].
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Pool file for lib: targets, re-created for every point (its contents
    /// are destroyed) [default: a temporary pool in /dev/shm].
    #[arg(long)]
    pool: Option<PathBuf>,
    /// Durability of lib: pools: pm, file or dram.
    #[arg(long, default_value = "dram")]
    durability: manyfs::Durability,
    /// Size of lib: pools [default: 2G; 512M with --quick]
    #[arg(long, value_parser = parse_size)]
    pool_size: Option<u64>,
    /// Zero-fill lib: pools at mkfs (`manyfs mkfs --zero-fill`) instead of
    /// only reserving their space.
    #[arg(long)]
    zero_fill: bool,
    /// Segment size of the segment range locks.
    #[arg(long, default_value = "4096", value_parser = parse_size)]
    segment_size: u64,
    /// Sub-logs per inode of lib: pools: `cpu` (one per CPU) or `one`
    /// (NOVA's single log per inode, a baseline).
    #[arg(long, default_value = "cpu")]
    sublogs: manyfs::Sublogs,
    /// File index of lib: mounts: `cas` (lock-free radix, the default),
    /// `rw` (nCACHE: a reader-writer lock per node) or `cascade` (F2FS: a
    /// mutex per node, hand over hand). Results of a non-default index are
    /// labelled `lib:LOCK index=KIND`.
    #[arg(long, default_value = "cas")]
    index: manyfs::IndexKind,
    /// Name shards per directory of lib: mounts (a power of two from 1 to
    /// 1024) [default: the mount's, four per CPU from 16 to 32]. Results
    /// are labelled `lib:LOCK dir_shards=N`.
    #[arg(long)]
    dir_shards: Option<usize>,
    /// On a tiered pool whose pool is `pm` or `dram`: the largest write to
    /// an fsync'd file that is staged in the pool instead of written to
    /// the data device (e.g. 32K; 0 turns staging off) [default: 32K].
    /// Other values label results `lib:LOCK stage_max=N`.
    #[arg(long, value_parser = parse_size)]
    stage_max: Option<u64>,
    /// Distance between the blocks of neighbouring threads in DRBM and
    /// DWOM, e.g. 4K (the nCACHE paper's other stride) [default: 8M, FxMark's
    /// private region].
    #[arg(long, value_parser = parse_stride)]
    stride: Option<u64>,
    /// Block placement of lib: pools: `local` (the writer's node first),
    /// `node0` or `interleave` (baselines).
    #[arg(long, default_value = "local")]
    placement: manyfs::Placement,
    /// Thread placement (NThread) of lib: pools: `off`, `advise` (report
    /// only) or `migrate` (move the worker threads to their data, within
    /// the process's CPUs: the bench starts each thread on its CPU without
    /// making that CPU its own mask).
    #[arg(long, default_value = "off")]
    thread_placement: manyfs::ThreadPlacement,
    /// Rules of thread placement: `off`, `rl` (read locality), `cpu` (+ CPU
    /// contention), `nm` (+ NVMM contention) or `full` (all).
    #[arg(long, default_value = "full")]
    placement_policy: manyfs::PlacementPolicy,
    /// NUMA topology of lib: mounts: `system` or an emulated NODESxCPUS
    /// (e.g. 2x1) [default: system, or what MANYFS_TOPOLOGY names].
    #[arg(long)]
    topology: Option<manyfs::TopologySpec>,
    /// Make each lib: pool of one member file per node of the topology
    /// (member i on node i) instead of one file.
    #[arg(long)]
    member_per_node: bool,
    /// A data device for lib: pools (a tiered pool: file data there, logs
    /// and inodes in the pool): a file on a disk file system or a block
    /// device, re-created with the pool for every point (its contents are
    /// destroyed).
    #[arg(long, value_name = "PATH")]
    data: Option<PathBuf>,
    /// Size of the data device [default: 256M].
    #[arg(long, value_name = "SIZE", requires = "data", value_parser = parse_size)]
    data_size: Option<u64>,
    /// How lib: mounts read and write the data device, comma-separated:
    /// `uring` (io_uring batches) and/or `sync` (pread/pwrite); with both,
    /// every point runs with each in turn, labelled `device_io=IO`
    /// [default: uring].
    #[arg(long, value_delimiter = ',', requires = "data")]
    device_io: Vec<manyfs::DeviceIo>,
    /// Emulated remote-access cost of lib: mounts: `off`, `paper`
    /// (270/583) or READ/WRITE ns per KiB; emulated topologies only.
    /// Results are labelled EMULATED.
    #[arg(long, default_value = "off", value_parser = parse_remote_cost)]
    remote_cost: Model<manyfs::RemoteCost>,
    /// Emulated NVMM bandwidth cap of lib: mounts, per node: `off`,
    /// `paper` (2.3 GB/s) or weighted bytes per second (writes + reads/3)
    /// with an optional K, M or G suffix; emulated topologies only.
    /// Results are labelled EMULATED.
    #[arg(long, default_value = "off", value_parser = parse_bandwidth_cap)]
    bandwidth_cap: Model<manyfs::BandwidthCap>,
    /// Rerun a figure of the papers: `list` names them; `numa-fig6` (the
    /// NUMA-aware NOVA paper's Fig. 6, with --remote-cost as the model,
    /// `paper` unless given) [threads 1,2,8; 1 s per point]; `ncache-fig7`
    /// (the nCACHE paper's Fig. 7/8: DWOM, DRBM at 8 MiB and 4 KiB strides,
    /// each index kind x srl-tree/inode, index serial time projected to 120
    /// cores; its index microbenchmarks go to NAME.index.json) [threads
    /// 1,2,16; 0.5 s per point]; `nthread-fig5`, `nthread-fig2` (the
    /// NThread paper's, with --remote-cost and --bandwidth-cap, `paper` and
    /// 400M unless given) [threads 2,4; 0.5 s warm-up, 1 s per point].
    /// `tier-fig6` (the F2FS node-logging paper's Fig. 6: DWOM direct and
    /// DWSL, Baseline/RL/NL/Integrated, data on --data [default
    /// /var/tmp/manyfs-tier-fig6.data], the file-mode pool at --pool
    /// [default /var/tmp/manyfs-tier-fig6.pool], the dram pool in /dev/shm;
    /// all removed afterwards; the write and fsync latency CDFs go to
    /// NAME.cdf.svg beside the plot) [threads 1,2; 2 s per point].
    /// `numa-fig6 --topology system` runs its four configurations on the
    /// machine's own NUMA nodes instead (one member per node, bound to it,
    /// threads spread over the nodes, no model; refused on a machine of
    /// one node).
    /// `tier-checkpoint` (the same paper's checkpoint without stalls: 4 KiB
    /// appends on the tier, data on --data [default
    /// /var/tmp/manyfs-tier-checkpoint.data], logs in a dram pool in
    /// /dev/shm, write latency traced through a checkpoint every 100 ms:
    /// none, background, blocking) [threads 1,2; 3 s per run].
    /// JSON and plot to manyfs-NAME.json/.svg unless --json/--plot.
    #[arg(long, conflicts_with_all = ["quick", "locks", "with_locks"], value_parser = parse_reproduce)]
    reproduce: Option<Reproduce>,
    /// Headline run: DWOM and DRBM on every lock kind and tmpfs at 1, 2 and
    /// 64 threads, 0.5 s per point, table and plot.
    #[arg(long)]
    quick: bool,
    /// Range-lock microbenchmarks only: acquisition latency vs threads, lock
    /// memory vs file size, serial time per operation projected to 56 cores.
    #[arg(long, conflicts_with_all = ["quick", "with_locks"])]
    locks: bool,
    /// Run the workloads, then the range-lock microbenchmarks in the same
    /// run (their JSON goes to FILE.locks.json beside --json FILE).
    #[arg(long)]
    with_locks: bool,
    /// Runs per point, interleaved over the whole plan; the median run (by
    /// ops/s) is reported with the min..max spread in the JSON.
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Skip the memory-bandwidth reference rows.
    #[arg(long)]
    no_membw: bool,
    /// Do not pin threads to CPUs.
    #[arg(long)]
    no_pin: bool,
    /// While a point runs with thread placement on, print one line per
    /// placement window to stderr: threads seen, contended nodes, and each
    /// decision (moved, advised, or not moved and why).
    #[arg(long, short = 'v')]
    verbose: bool,
}

/// One item of `--workloads`: a workload, or `all` (every file-system one).
#[derive(Debug, Clone)]
struct Workloads(Vec<Workload>);

fn parse_workloads(s: &str) -> manyfs_bench::Result<Workloads> {
    Ok(Workloads(if s.trim().eq_ignore_ascii_case("all") {
        Workload::all_fs()
    } else {
        vec![s.parse()?]
    }))
}

/// One item of `--targets`: a target, or `lib:all` (every lock kind).
#[derive(Debug, Clone)]
struct Targets(Vec<Target>);

fn parse_targets(s: &str) -> manyfs_bench::Result<Targets> {
    Ok(Targets(if s.trim() == "lib:all" {
        Target::all_lib()
    } else {
        vec![s.parse()?]
    }))
}

/// `--stride`: a size that DRBM and DWOM can use.
fn parse_stride(s: &str) -> manyfs_bench::Result<u64> {
    let stride = parse_size(s)?;
    manyfs_bench::workload::check_stride(stride)?;
    Ok(stride)
}

/// `--reproduce`: `list`, or a figure.
#[derive(Debug, Clone, Copy)]
enum Reproduce {
    List,
    Figure(manyfs_bench::reproduce::Figure),
}

fn parse_reproduce(s: &str) -> manyfs_bench::Result<Reproduce> {
    if s == "list" {
        return Ok(Reproduce::List);
    }
    manyfs_bench::reproduce::find(s).map(|f| Reproduce::Figure(*f))
}

/// An emulation model argument (`--remote-cost`, `--bandwidth-cap`):
/// the model (`None`: off) and how it was written, since a figure tells
/// its default `off` (the figure's own model) from `none`.
#[derive(Debug, Clone)]
struct Model<T> {
    value: Option<T>,
    spelled: String,
}

impl<T> std::fmt::Display for Model<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.spelled)
    }
}

impl<T> Model<T> {
    /// Whether it was left at (or written as) `off`.
    fn is_off(&self) -> bool {
        self.spelled == "off"
    }
}

fn parse_remote_cost(s: &str) -> manyfs::Result<Model<manyfs::RemoteCost>> {
    Ok(Model {
        value: manyfs::RemoteCost::parse_option(s)?,
        spelled: s.trim().into(),
    })
}

fn parse_bandwidth_cap(s: &str) -> manyfs::Result<Model<manyfs::BandwidthCap>> {
    Ok(Model {
        value: manyfs::BandwidthCap::parse_option(s)?,
        spelled: s.trim().into(),
    })
}

/// Run `manyfs bench`.
pub fn run(args: &BenchArgs) -> Result<ExitCode> {
    manyfs_bench::sys::install_interrupt_handler();
    let tty = std::io::stderr().is_terminal();
    let segment_size = args.segment_size;
    if args.locks {
        let rep = run_lock_bench(args, segment_size, tty)?;
        if let Some(p) = &args.json {
            rep.write_json(p)?;
            eprintln!("wrote {}", p.display());
        }
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(what) = args.reproduce {
        return run_reproduce(args, what);
    }
    let mut cfg = if args.quick {
        Config::quick()
    } else {
        Config::default()
    };
    if !args.workloads.is_empty() {
        cfg.workloads = args.workloads.iter().flat_map(|w| w.0.clone()).collect();
    }
    if !args.targets.is_empty() {
        cfg.targets = args.targets.iter().flat_map(|t| t.0.clone()).collect();
    } else if !args.quick {
        cfg.targets.push(Target::Tmpfs);
    }
    cfg.pool.pool = args.pool.clone();
    cfg.pool.durability = args.durability;
    if let Some(size) = args.pool_size {
        cfg.pool.size = size;
    }
    cfg.pool.segment_size = segment_size;
    cfg.pool.member_per_node = args.member_per_node;
    cfg.pool.data = args.data.clone();
    if let Some(size) = args.data_size {
        cfg.pool.data_size = size;
    }
    if let Some(t) = args.topology {
        cfg.pool.topology = t;
    }
    cfg.pool.zero_fill = args.zero_fill;
    cfg.pool.sublogs = args.sublogs;
    cfg.pool.placement = args.placement;
    cfg.pool.thread_placement = args.thread_placement;
    cfg.pool.placement_policy = args.placement_policy;
    cfg.pool.index = args.index;
    cfg.pool.dir_shards = args.dir_shards;
    if let Some(s) = args.stage_max {
        cfg.pool.stage_max = s;
    }
    apply_common(&mut cfg, args)?;
    cfg.pool.remote_cost = args.remote_cost.value;
    cfg.pool.bandwidth_cap = args.bandwidth_cap.value;
    // Refuse what every lib: mount would refuse (an emulation on the
    // machine's own topology, say) once, before making any pool.
    cfg.pool
        .mount_options(manyfs::LockKind::default())
        .validate()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    cfg.membw = !args.no_membw;
    let device_ios = &args.device_io;
    let records = if device_ios.len() <= 1 {
        cfg.pool.device_io = device_ios.first().copied().unwrap_or_default();
        manyfs_bench::run(&cfg)?
    } else {
        // One series per target and device_io, interleaved point by point
        // (and round by round with --repeat) so that each sees the same disk.
        cfg.pool.label_device_io = true;
        let mut series = Vec::new();
        for t in &cfg.targets {
            for &io in device_ios {
                let mut c = cfg.clone();
                c.pool.device_io = io;
                let s = manyfs_bench::Series::plain(t, &c);
                if !series
                    .iter()
                    .any(|x: &manyfs_bench::Series| x.label == s.label)
                {
                    series.push(s);
                }
            }
        }
        manyfs_bench::run_series(&cfg, &series)?
    };
    print!("{}", table(&records));
    println!();
    print!("{}", headline(&records));
    if let Some(p) = &args.json {
        write_json(p, &records)?;
        eprintln!("wrote {}", p.display());
    }
    if let Some(p) = &args.plot {
        manyfs_bench::plot::write_plot(p, &records)?;
        eprintln!("wrote {}", p.display());
    } else if args.quick {
        // The plot --quick adds on its own is a bonus: without a font (a
        // fresh machine before scripts/install-deps.sh) say so and carry on.
        let p = PathBuf::from("manyfs-bench-quick.svg");
        report_plot(&p, "plot", manyfs_bench::plot::write_plot(&p, &records));
    }
    if args.with_locks {
        println!();
        let rep = run_lock_bench(args, segment_size, tty)?;
        // Writes only: the serial-part rules of project_fs are for writers.
        let proj = manyfs_bench::locks::project_fs(&rep, &records, "DWOM");
        if !proj.is_empty() {
            println!();
            print!("{}", manyfs_bench::locks::projection_table(&proj));
        }
        if let Some(p) = &args.json {
            let p = p.with_extension("locks.json");
            rep.write_json(&p)?;
            eprintln!("wrote {}", p.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The options every workload run takes: threads, durations, repeats,
/// pinning.
fn apply_common(cfg: &mut Config, args: &BenchArgs) -> Result<()> {
    if let Some(t) = &args.threads {
        if t.is_empty() || t.contains(&0) {
            bail!("--threads needs positive counts");
        }
        cfg.threads = t.clone();
    }
    if let Some(d) = args.duration {
        cfg.duration = d;
    }
    if let Some(d) = args.warmup {
        cfg.warmup = d;
    }
    cfg.pin = !args.no_pin;
    if let Some(s) = args.stride {
        cfg.stride = s;
    }
    if args.repeat == 0 {
        bail!("--repeat must be at least 1");
    }
    cfg.repeats = args.repeat;
    cfg.placement_log = args
        .verbose
        .then(manyfs_bench::runner::PlacementLog::stderr);
    Ok(())
}

/// `--reproduce NAME`.
fn run_reproduce(args: &BenchArgs, what: Reproduce) -> Result<ExitCode> {
    use manyfs_bench::reproduce;
    let fig = match what {
        Reproduce::List => {
            print!("{}", reproduce::list());
            return Ok(ExitCode::SUCCESS);
        }
        Reproduce::Figure(fig) => fig,
    };
    if fig.name == "tier-fig6" {
        return run_tier_fig6(args);
    }
    if fig.name == "tier-checkpoint" {
        return run_tier_checkpoint(args);
    }
    let fig7 = fig.name == "ncache-fig7";
    let mut cfg = Config {
        threads: if fig7 { vec![1, 2, 16] } else { vec![1, 2, 8] },
        duration: std::time::Duration::from_millis(if fig7 { 500 } else { 1000 }),
        ..Config::default()
    };
    apply_common(&mut cfg, args)?;
    cfg.pool.pool = args.pool.clone();
    cfg.pool.durability = args.durability;
    cfg.pool.size = args.pool_size.unwrap_or(512 << 20);
    cfg.pool.segment_size = args.segment_size;
    let records = match fig.name {
        "numa-fig6" => run_fig6(&cfg, args)?,
        "ncache-fig7" => run_fig7(&cfg, fig.name, args)?,
        "nthread-fig5" | "nthread-fig2" => {
            // `off` (the flag's default) means the figure's model: a figure
            // is about the emulation; its control series run with the
            // models off.
            let cost = match args.remote_cost.value {
                Some(c) => c,
                None if args.remote_cost.is_off() => manyfs::RemoteCost::PAPER,
                None => bail!(
                    "--remote-cost {}: {} needs a model (its control series run without)",
                    args.remote_cost,
                    fig.name
                ),
            };
            run_nthread(args, &mut cfg, fig.name, cost)?
        }
        other => bail!("--reproduce {other}: no runner for this figure"),
    };
    let (json, plot) = figure_outputs(args, fig.name);
    write_json(&json, &records)?;
    eprintln!("wrote {}", json.display());
    report_plot(
        &plot,
        "plot",
        manyfs_bench::plot::write_plot(&plot, &records),
    );
    Ok(ExitCode::SUCCESS)
}

/// The options the tier figures share, applied to a figure's defaults:
/// `--pool-size`/`--data-size`, then the common run options (threads,
/// duration, warm-up, pinning); returns them all (with `--repeat`).
fn tier_common(
    args: &BenchArgs,
    sizes: (&mut u64, &mut u64),
    run: (
        &mut Vec<usize>,
        &mut std::time::Duration,
        &mut std::time::Duration,
        &mut bool,
    ),
) -> Result<Config> {
    if let Some(s) = args.pool_size {
        *sizes.0 = s;
    }
    if let Some(s) = args.data_size {
        *sizes.1 = s;
    }
    let mut common = Config {
        threads: run.0.clone(),
        duration: *run.1,
        warmup: *run.2,
        ..Config::default()
    };
    apply_common(&mut common, args)?;
    run.0.clone_from(&common.threads);
    *run.1 = common.duration;
    *run.2 = common.warmup;
    *run.3 = common.pin;
    Ok(common)
}

/// Where `--reproduce NAME` writes its JSON and plot: `--json`/`--plot`,
/// else `manyfs-NAME.json` and `manyfs-NAME.svg`.
fn figure_outputs(args: &BenchArgs, name: &str) -> (PathBuf, PathBuf) {
    (
        args.json
            .clone()
            .unwrap_or_else(|| PathBuf::from(format!("manyfs-{name}.json"))),
        args.plot
            .clone()
            .unwrap_or_else(|| PathBuf::from(format!("manyfs-{name}.svg"))),
    )
}

/// Run `f` with a progress callback that rewrites one stderr line when
/// stderr is a terminal, and clear the line afterwards.
fn with_progress<T>(
    f: impl FnOnce(&mut dyn FnMut(&str)) -> manyfs_bench::Result<T>,
) -> manyfs_bench::Result<T> {
    let tty = std::io::stderr().is_terminal();
    let mut progress = |m: &str| {
        if tty {
            eprint!("\r\x1b[K{m}");
        }
    };
    let out = f(&mut progress);
    if tty {
        eprint!("\r\x1b[K");
    }
    out
}

/// `--reproduce tier-fig6`: header, throughput table, latency and
/// persistence tables, JSON and plot.
fn run_tier_fig6(args: &BenchArgs) -> Result<ExitCode> {
    use manyfs_bench::reproduce::tier;
    let disk = std::path::Path::new(tier::DEFAULT_DISK_DIR);
    let mut cfg = tier::TierConfig::new(disk, std::path::Path::new(tier::DEFAULT_SHM_DIR));
    if let Some(p) = &args.pool {
        cfg.disk_pool = p.clone();
    }
    if let Some(p) = &args.data {
        cfg.data = p.clone();
        let dir = p.parent().filter(|d| !d.as_os_str().is_empty());
        cfg.disk_fs_dir = dir.unwrap_or(disk).join("manyfs-tier-fig6.dir");
    }
    cfg.repeats = tier_common(
        args,
        (&mut cfg.pool_size, &mut cfg.data_size),
        (
            &mut cfg.threads,
            &mut cfg.duration,
            &mut cfg.warmup,
            &mut cfg.pin,
        ),
    )?
    .repeats;
    print!("{}", tier::header(&cfg));
    let records = with_progress(|p| tier::run_tier_fig6(&cfg, p))?;
    println!();
    println!("ops/s (DWOM direct: 4 KiB overwrites, no fsync; DWSL: 4 KiB overwrite + fsync):");
    print!("{}", tier::table(&records));
    println!();
    println!("latency of each operation's write and fsync:");
    print!("{}", tier::latency_table(&records));
    let (json, plot) = figure_outputs(args, "tier-fig6");
    write_json(&json, &records)?;
    eprintln!("wrote {}", json.display());
    report_plot(
        &plot,
        "plot",
        manyfs_bench::plot::write_plot(&plot, &records),
    );
    let cdf = manyfs_bench::plot::cdf_path(&plot);
    report_plot(
        &cdf,
        "CDF plot",
        manyfs_bench::plot::write_cdf_plot(&cdf, &records),
    );
    Ok(ExitCode::SUCCESS)
}

/// `--reproduce tier-checkpoint`: header, table, JSON and trace plot.
fn run_tier_checkpoint(args: &BenchArgs) -> Result<ExitCode> {
    use manyfs_bench::reproduce::{checkpoint, tier};
    let mut cfg = checkpoint::CheckpointConfig::new(
        std::path::Path::new(tier::DEFAULT_DISK_DIR),
        std::path::Path::new(tier::DEFAULT_SHM_DIR),
    );
    if let Some(p) = &args.pool {
        cfg.pool = p.clone();
    }
    if let Some(p) = &args.data {
        cfg.data = p.clone();
    }
    tier_common(
        args,
        (&mut cfg.pool_size, &mut cfg.data_size),
        (
            &mut cfg.threads,
            &mut cfg.duration,
            &mut cfg.warmup,
            &mut cfg.pin,
        ),
    )?;
    print!("{}", checkpoint::header(&cfg));
    let runs = with_progress(|p| checkpoint::run_tier_checkpoint(&cfg, p))?;
    println!();
    print!("{}", checkpoint::table(&runs));
    let (json, plot) = figure_outputs(args, "tier-checkpoint");
    checkpoint::write_json(&json, &runs)?;
    eprintln!("wrote {}", json.display());
    report_plot(
        &plot,
        "plot",
        manyfs_bench::plot::write_checkpoint_plot(&plot, &runs),
    );
    Ok(ExitCode::SUCCESS)
}

/// `--reproduce numa-fig6`: its header, records and comparison table.
fn run_fig6(cfg: &Config, args: &BenchArgs) -> Result<Vec<manyfs_bench::Record>> {
    use manyfs_bench::reproduce;
    let topology = args.topology.unwrap_or(reproduce::FIG6_TOPOLOGY);
    if topology == manyfs::TopologySpec::System {
        if !args.remote_cost.is_off() {
            bail!(
                "--remote-cost {}: numa-fig6 --topology system runs without the model (the \
                 machine's remote accesses are real)",
                args.remote_cost
            );
        }
        print!("{}", reproduce::fig6_system_header(&cfg.threads)?);
        let records = reproduce::run_fig6_system(cfg)?;
        println!();
        print!("{}", table(&records));
        println!();
        println!("GiB/s per configuration (system: the machine's own nodes, no model):");
        print!("{}", reproduce::fig6_table(&records));
        print!("{}", reproduce::load_line("end"));
        return Ok(records);
    }
    if topology != reproduce::FIG6_TOPOLOGY {
        bail!(
            "--topology {topology}: numa-fig6 runs on the emulated {} topology (the default) or \
             on `system`, the machine's own",
            reproduce::FIG6_TOPOLOGY
        );
    }
    let cost = match args.remote_cost.value {
        Some(c) => c,
        None if args.remote_cost.is_off() => manyfs::RemoteCost::PAPER,
        None => bail!(
            "--remote-cost {}: numa-fig6 needs a model",
            args.remote_cost
        ),
    };
    print!("{}", reproduce::fig6_header(cost, &cfg.threads));
    let records = reproduce::run_fig6(cfg, cost)?;
    println!();
    print!("{}", table(&records));
    println!();
    println!("GiB/s per configuration (EMULATED: remote-cost model on; model off: control):");
    print!("{}", reproduce::fig6_table(&records));
    print!("{}", reproduce::load_line("end"));
    Ok(records)
}

/// `--reproduce ncache-fig7`: records, comparison table, the index
/// microbenchmarks (JSON beside the records') and the projection.
fn run_fig7(cfg: &Config, name: &str, args: &BenchArgs) -> Result<Vec<manyfs_bench::Record>> {
    use manyfs_bench::reproduce;
    let tty = std::io::stderr().is_terminal();
    let (records, mut idx) = reproduce::run_fig7(cfg, |m| {
        if tty {
            eprint!("\r\x1b[K{m}");
        }
    })?;
    if tty {
        eprint!("\r\x1b[K");
    }
    print!("{}", table(&records));
    println!();
    println!("ops/s per index kind + range lock (Fig. 7 = DWOM, Fig. 8 = DRBM):");
    print!("{}", reproduce::fig7_table(&records));
    println!();
    print!("{}", idx.table());
    println!();
    println!(
        "File-system points projected to {} cores (serial part: the whole operation for inode, \
         0 for srl-tree, plus the index's serial time per lookup at that stride)",
        reproduce::FIG7_CORES
    );
    let proj = reproduce::fig7_projection(&records, &idx);
    print!(
        "{}",
        manyfs_bench::locks::projection_rows(&proj, "index+lock stride")
    );
    let (base, _) = figure_outputs(args, name);
    let p = base.with_extension("index.json");
    idx.projection = proj;
    idx.write_json(&p)?;
    eprintln!("wrote {}", p.display());
    Ok(records)
}

/// `--reproduce nthread-fig5|nthread-fig2`: threads 2 and 4, 0.5 s warm-up
/// (threads move within it) and 1 s per point unless given; the cap from
/// `--bandwidth-cap` (`off`: the figure's default).
fn run_nthread(
    args: &BenchArgs,
    cfg: &mut Config,
    name: &str,
    cost: manyfs::RemoteCost,
) -> Result<Vec<manyfs_bench::Record>> {
    use manyfs_bench::reproduce::nthread;
    if args.threads.is_none() {
        cfg.threads = vec![2, 4];
    }
    if args.warmup.is_none() {
        cfg.warmup = std::time::Duration::from_millis(500);
    }
    let cap = match args.bandwidth_cap.value {
        Some(c) => c,
        None if args.bandwidth_cap.is_off() => nthread::DEFAULT_CAP,
        None => bail!(
            "--bandwidth-cap {}: {name} needs a cap (its control series run without)",
            args.bandwidth_cap
        ),
    };
    let models = nthread::Models { cost, cap };
    let fig5 = name == "nthread-fig5";
    if fig5 && !cfg.pin {
        bail!(
            "nthread-fig5 needs pinned threads (drop --no-pin): they start round-robin on the two nodes, as the kernel would spread them"
        );
    }
    print!("{}", nthread::header(name, models, cfg));
    let records = if fig5 {
        nthread::run_fig5(cfg, models)?
    } else {
        nthread::run_fig2(cfg, models)?
    };
    println!();
    print!("{}", table(&records));
    println!();
    if fig5 {
        println!(
            "MiB/s per policy (EMULATED: remote cost and bandwidth cap on; model off: control; \
             ordered: full >= nm >= cpu >= rl >= off within 5 %):"
        );
        print!("{}", nthread::fig5_table(&records));
        println!();
        println!(
            "threads moved per point (the median run's, warm-up included; by the planner's \
             reason):"
        );
        print!("{}", nthread::fig5_moves_table(&records));
    } else {
        println!(
            "MiB/s per thread placement, data on node 0 (EMULATED: remote cost and bandwidth \
             cap on; model off: control):"
        );
        print!("{}", nthread::fig2_table(&records));
    }
    Ok(records)
}

fn run_lock_bench(
    args: &BenchArgs,
    segment_size: u64,
    tty: bool,
) -> Result<manyfs_bench::locks::LockReport> {
    let mut cfg = LockConfig {
        segment_size,
        pin: !args.no_pin,
        ..LockConfig::default()
    };
    if let Some(t) = &args.threads {
        cfg.threads = t.clone();
    }
    if let Some(d) = args.duration {
        cfg.duration = d;
    }
    let rep = run_locks(&cfg, |m| {
        if tty {
            eprint!("\r\x1b[K{m}");
        }
    });
    if tty {
        eprint!("\r\x1b[K");
    }
    print!("{}", rep.table());
    Ok(rep)
}

/// Say where a figure went, or in one line why there is none (a figure
/// is a by-product: the run's table and JSON stand without it).
fn report_plot<E: std::fmt::Display>(
    path: &std::path::Path,
    what: &str,
    r: std::result::Result<(), E>,
) {
    match r {
        Ok(()) => eprintln!("wrote {}", path.display()),
        Err(e) => eprintln!("manyfs bench: no {what}: {e}"),
    }
}
