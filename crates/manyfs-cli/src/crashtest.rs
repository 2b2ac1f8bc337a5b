//! `manyfs crashtest`: run the crash-state explorer and report.

use anyhow::{Result, bail};
use clap::Args;
use manyfs_crashtest::{self as crashtest, Config, MediaModel, PlantedBug, Stats};
use std::process::ExitCode;
use std::time::Instant;

/// Options of `manyfs crashtest`.
#[derive(Args)]
pub struct CrashtestArgs {
    /// Stop once this many distinct images were checked, per model (0 = run
    /// every workload).
    #[arg(long, default_value_t = 100_000)]
    min_images: u64,
    /// Run only the workload with this name (as printed with a violation).
    #[arg(long)]
    only: Option<String>,
    /// Seed of the random workloads and random subsets.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// The medium: pm (x86 cache lines), pagecache (a file mapped through
    /// the page cache: 4 KiB pages, durable at msync), blockdev (a disk with
    /// a volatile write cache: durable at a flush), or all.
    #[arg(long, default_value = "pm", value_parser = parse_models)]
    model: Models,
    /// Plant a bug to see the explorer catch it: dropped-flush (pm: every
    /// sub-cache-line flush is dropped), forgotten-sync (page models: the
    /// first sync of each workload does nothing), skipped-device-flush
    /// (tiered pools: the data device is never flushed) or
    /// staged-block-freed-early (tiered pm pools; builds with the
    /// `planted-bugs` feature only). Without a value, the model's own.
    #[arg(long, num_args = 0..=1, default_missing_value = "", value_parser = parse_planted_bug)]
    planted_bug: Option<PlantedBugArg>,
    /// Page models: let a pool page reach the disk torn, in pieces of this
    /// many bytes (512: a drive with 512-byte sectors; 64: a store racing
    /// the page's write-back). Unsynced in-place overwrites may then show
    /// torn (reported as TORN AT SECTORS / TORN AT LINES); nothing else may.
    #[arg(long, value_parser = parse_torn_unit)]
    torn_pages: Option<usize>,
    /// Random page-version choices per crash point (page models; more
    /// finds rarer mixes, at more images per crash point).
    #[arg(long, default_value_t = Config::default().version_mixes)]
    version_mixes: usize,
    /// Keep exploring after a workload with violations (to survey them).
    #[arg(long)]
    keep_going: bool,
    /// Violations to report per workload before moving on.
    #[arg(long, default_value_t = 20)]
    max_violations: usize,
}

/// `--model`: one medium, or `all`.
#[derive(Debug, Clone)]
struct Models(Vec<MediaModel>);

fn parse_models(s: &str) -> std::result::Result<Models, String> {
    Ok(Models(if s == "all" {
        MediaModel::ALL.to_vec()
    } else {
        vec![s.parse().map_err(|e: String| format!("{e}, or all"))?]
    }))
}

/// `--planted-bug [KIND]`: a kind, or the model's own (no value).
#[derive(Debug, Clone, Copy)]
enum PlantedBugArg {
    ModelsOwn,
    Kind(PlantedBug),
}

fn parse_planted_bug(s: &str) -> std::result::Result<PlantedBugArg, String> {
    if s.is_empty() {
        Ok(PlantedBugArg::ModelsOwn)
    } else {
        s.parse().map(PlantedBugArg::Kind)
    }
}

/// A tear unit: 64 or 512 bytes.
fn parse_torn_unit(s: &str) -> std::result::Result<usize, String> {
    match s {
        "64" => Ok(64),
        "512" => Ok(512),
        _ => Err(format!("{s:?}: a page tears in pieces of 64 or 512 bytes")),
    }
}

/// Run the explorer.
pub fn run(args: &CrashtestArgs) -> Result<ExitCode> {
    let mut workloads = crashtest::standard_workloads(args.seed);
    if let Some(name) = &args.only {
        workloads.retain(|w| &w.name == name);
        if workloads.is_empty() {
            bail!("no workload named {name:?}");
        }
        for w in &workloads {
            println!("workload {}: setup {:?}", w.name, w.setup);
            for (i, op) in w.ops.iter().enumerate() {
                println!("  op {i}: {op:?}");
            }
        }
    }
    let min = if args.only.is_some() {
        0
    } else {
        args.min_images
    };
    let mut failed = None;
    for &model in &args.model.0 {
        let planted_bug = args.planted_bug.map(|b| match b {
            PlantedBugArg::ModelsOwn => PlantedBug::for_model(model),
            PlantedBugArg::Kind(k) => k,
        });
        let cfg = Config {
            seed: args.seed,
            model,
            planted_bug,
            keep_going: args.keep_going,
            torn_pages: args.torn_pages,
            version_mixes: args.version_mixes,
            max_violations: args.max_violations,
            ..Config::default()
        };
        let mut stats = Stats::default();
        let t = Instant::now();
        crashtest::explore_all(&workloads, &cfg, min, &mut stats, |s| {
            eprint!(
                "\r{model}: {} workloads, {} images, {} violations",
                s.workloads,
                s.images,
                s.violations.len()
            );
        })?;
        eprintln!();
        println!("model {model}: {stats}, {:.1}s", t.elapsed().as_secs_f64());
        for v in &stats.violations {
            println!("VIOLATION {v}");
        }
        if let Some(v) = stats.violations.first() {
            failed.get_or_insert((model, v.workload.clone()));
        }
    }
    match failed {
        None => {
            println!("no violations");
            Ok(ExitCode::SUCCESS)
        }
        Some((model, workload)) => {
            println!(
                "replay with: manyfs crashtest --model {model} --only {workload} --seed {}",
                args.seed
            );
            Ok(ExitCode::from(5))
        }
    }
}
