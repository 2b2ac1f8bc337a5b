//! `manyfs crashtest`: run the crash-state explorer and report.

use anyhow::{Result, bail};
use clap::Args;
use manyfs_crashtest::{self as crashtest, Config, Stats};
use std::process::ExitCode;
use std::time::Instant;

/// Options of `manyfs crashtest`.
#[derive(Args)]
pub struct CrashtestArgs {
    /// Stop once this many distinct images were checked (0 = run every workload).
    #[arg(long, default_value_t = 100_000)]
    min_images: u64,
    /// Run only the workload with this name (as printed with a violation).
    #[arg(long)]
    only: Option<String>,
    /// Seed of the random workloads and random subsets.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Plant a bug (drop every sub-cache-line flush) to see the explorer catch it.
    #[arg(long)]
    planted_bug: bool,
}

/// Run the explorer.
pub fn run(args: &CrashtestArgs) -> Result<ExitCode> {
    let cfg = Config {
        seed: args.seed,
        planted_bug: args.planted_bug,
        ..Config::default()
    };
    let mut workloads = crashtest::standard_workloads(args.seed);
    if let Some(name) = &args.only {
        workloads.retain(|w| &w.name == name);
        if workloads.is_empty() {
            bail!("no workload named {name:?}");
        }
    }
    let mut stats = Stats::default();
    let t = Instant::now();
    let min = if args.only.is_some() {
        0
    } else {
        args.min_images
    };
    crashtest::explore_all(&workloads, &cfg, min, &mut stats, |s| {
        eprint!("\r{} workloads, {} images", s.workloads, s.images);
    })?;
    eprintln!();
    println!(
        "{} workloads, {} operations, {} crash points, {} distinct images, {} images of crashes during recovery, {:.1}s",
        stats.workloads,
        stats.operations,
        stats.crash_points,
        stats.images,
        stats.recovery_images,
        t.elapsed().as_secs_f64()
    );
    for v in &stats.violations {
        println!("VIOLATION {v}");
    }
    if stats.violations.is_empty() {
        println!("no violations");
        Ok(ExitCode::SUCCESS)
    } else {
        println!(
            "replay with: manyfs crashtest --only {} --seed {}",
            stats.violations[0].workload, args.seed
        );
        Ok(ExitCode::from(5))
    }
}
