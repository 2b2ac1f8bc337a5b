//! The crash-state explorer over ACE-style, random and concurrent workloads.

use manyfs::crashtest::{self, Config, MediaModel, PlantedBug, Stats};
use std::time::Instant;

fn min_images() -> u64 {
    std::env::var("MANYFS_CRASH_IMAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000)
}

#[test]
fn every_crash_image_recovers_to_an_allowed_state() {
    let cfg = Config::default();
    let mut stats = Stats::default();
    let t = Instant::now();
    let workloads = crashtest::standard_workloads(7);
    crashtest::explore_all(&workloads, &cfg, min_images(), &mut stats, |_| {}).unwrap();
    println!(
        "{} workloads, {} operations, {} crash points, {} images, {} recovery-crash images in {:.1}s",
        stats.workloads,
        stats.operations,
        stats.crash_points,
        stats.images,
        stats.recovery_images,
        t.elapsed().as_secs_f64()
    );
    for v in stats.violations.iter().take(10) {
        println!("violation: {v}");
    }
    assert!(
        stats.violations.is_empty(),
        "{} violations, first: {}",
        stats.violations.len(),
        stats.violations[0]
    );
    assert!(stats.images >= min_images(), "only {} images", stats.images);
}

#[test]
fn a_dropped_flush_is_found() {
    // Planted bug: every flush shorter than a cache line (commit words, log
    // links) is silently dropped, so a write can return while its commit
    // mark is still only in the CPU cache.
    let cfg = Config {
        planted_bug: Some(PlantedBug::DroppedFlush),
        recovery_every: 0,
        ..Config::default()
    };
    let mut stats = Stats::default();
    let t = Instant::now();
    let workloads = crashtest::ace_workloads();
    crashtest::explore_all(&workloads[..4], &cfg, 0, &mut stats, |_| {}).unwrap();
    println!(
        "found {} violations in {:.2}s ({} images, {} crash points); first: {}",
        stats.violations.len(),
        t.elapsed().as_secs_f64(),
        stats.images,
        stats.crash_points,
        stats
            .violations
            .first()
            .map(|v| v.to_string())
            .unwrap_or_default()
    );
    assert!(
        !stats.violations.is_empty(),
        "the explorer missed a dropped flush ({} images)",
        stats.images
    );
}
