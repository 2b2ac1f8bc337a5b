//! Black-box power cuts of this process over the real kernel page cache
//! (`manyfs_crashtest::blackbox`): a random workload through the public
//! API on a `file`-mode pool on a disk file system, its thread moved
//! between CPUs, every image the dirty pages allow at each crash point
//! checked with fsck, a mount and the workload's oracle.
//!
//! Needs root (page frame numbers and `/proc/kpageflags`) and a directory
//! on a disk file system (`MANYFS_BLACKBOX_DIR`, default Cargo's scratch
//! directory for tests, under `target/`). Elsewhere it says why and passes, except under
//! `CI=true`, where it fails. Size it with `MANYFS_BLACKBOX_WORKLOADS`
//! (default 6) and `MANYFS_BLACKBOX_OPS` (default 60); the release run
//! recorded in docs/guarantees.md is
//! `MANYFS_BLACKBOX_WORKLOADS=20 MANYFS_BLACKBOX_OPS=150 cargo test --release -p manyfs-crashtest --test blackbox_powercut -- --nocapture`.
//! `MANYFS_BLACKBOX_KEEP=DIR` keeps each workload's first violating image;
//! `MANYFS_BLACKBOX_PINNED=1` never moves the thread (run it under
//! `taskset -c 0` to pin it), and `MANYFS_BLACKBOX_IGNORE_SYNC_POINTS=1`
//! shows what a check blind to the engine's durability points reports
//! (states a real power cut cannot leave: the test then fails).

use manyfs_crashtest::PlantedBug;
use manyfs_crashtest::blackbox::{self, Config, Stats};
use std::path::PathBuf;

use manyfs_sync::testing as test_support;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn config() -> Config {
    let dir = std::env::var_os("MANYFS_BLACKBOX_DIR")
        .map(PathBuf::from)
        // Cargo's scratch directory beside the build: on the checkout's
        // disk, where `/tmp` may be tmpfs.
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")));
    Config {
        workloads: env_or("MANYFS_BLACKBOX_WORKLOADS", 6),
        ops: env_or("MANYFS_BLACKBOX_OPS", 60),
        mixes: 4,
        seed: env_or("MANYFS_BLACKBOX_SEED", 1) as u64,
        dir,
        pool_size: 4 << 20,
        migrate: std::env::var_os("MANYFS_BLACKBOX_PINNED").is_none(),
        sync_points: std::env::var_os("MANYFS_BLACKBOX_IGNORE_SYNC_POINTS").is_none(),
        keep: std::env::var_os("MANYFS_BLACKBOX_KEEP").map(PathBuf::from),
        planted_bug: None,
    }
}

/// Run `cfg`, or `None` where the check cannot run here (`test` is
/// skipped; under `CI=true` it fails).
fn run(test: &str, cfg: &Config) -> Option<Stats> {
    match blackbox::run(cfg, |s| eprintln!("black box: {s}")) {
        Ok(s) => Some(s),
        Err(why) => {
            test_support::skip(test, test_support::Lack::Setup, why);
            None
        }
    }
}

#[test]
fn fsynced_data_survives_black_box_power_cuts_with_cpu_migration() {
    let cfg = config();
    let t = std::time::Instant::now();
    let Some(stats) = run("fsynced_data_survives_black_box_power_cuts", &cfg) else {
        return;
    };
    println!("black box: {stats} in {:.1}s", t.elapsed().as_secs_f64());
    for v in stats.violations.iter().take(10) {
        println!("violation: {v}");
    }
    assert!(
        stats.violations.is_empty(),
        "{} violations, first: {}",
        stats.violations.len(),
        stats.violations[0]
    );
    assert!(stats.dirty_points > 0, "no crash point had a dirty page");
    assert!(stats.migrations > 0, "the thread never changed CPU");
    assert!(
        stats.images >= cfg.workloads * cfg.ops,
        "only {} images",
        stats.images
    );
}

/// The black box finds the migration dimension's planted bug (a log array
/// linked before it is durable) within a few workloads: its sync points
/// come from the engine's own barriers, so a barrier the engine skips
/// leaves the array's page dirty at its older value.
#[test]
fn a_log_array_linked_before_it_is_durable_is_found_by_the_black_box() {
    let cfg = Config {
        workloads: 6,
        planted_bug: Some(PlantedBug::ArrayLinkedBeforeDurable),
        ..config()
    };
    let t = std::time::Instant::now();
    let Some(stats) = run("a_log_array_linked_before_it_is_durable_is_found", &cfg) else {
        return;
    };
    println!(
        "black box, planted: {stats} in {:.1}s",
        t.elapsed().as_secs_f64()
    );
    assert!(stats.migrations > 0, "the thread never changed CPU");
    assert!(!stats.violations.is_empty(), "the planted bug went unseen");
}
