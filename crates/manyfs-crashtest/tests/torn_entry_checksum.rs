//! The torn-page dimension's planted bug, in a test binary of its own: it
//! is planted in recovery for the whole process
//! (`manyfs::diag::RecoveryBug::EntryChecksumIgnored`), so no other test may run
//! beside it.
//!
//! A log entry over several 64-byte slots, appended to a log page an
//! earlier sync made durable and committed by a one-barrier fsync, can
//! reach the disk with its header slot (and commit word) new and a later
//! slot old only if the page tears. Recovery rejects such an entry by its
//! checksum; with the check planted away, the explorer's torn-page model
//! finds an extended attribute holding bytes never written, and the
//! whole-page model does not.

use manyfs_crashtest::oracle::{TORN_AT_LINES, TORN_AT_SECTORS};
use manyfs_crashtest::{self as crashtest, Config, MediaModel, PlantedBug, Stats};

fn explore(torn_pages: Option<usize>, planted: bool) -> Stats {
    let workloads: Vec<_> = crashtest::durability_workloads()
        .into_iter()
        .filter(|w| w.name == "dur-long-xattr-fsync")
        .collect();
    assert_eq!(workloads.len(), 1);
    let cfg = Config {
        model: MediaModel::PageCache,
        torn_pages,
        planted_bug: planted.then_some(PlantedBug::EntryChecksumIgnored),
        keep_going: true,
        max_violations: 1000,
        version_mixes: 2000,
        ..Config::default()
    };
    let mut stats = Stats::default();
    crashtest::explore_all(&workloads, &cfg, 0, &mut stats, |_| {}).unwrap();
    stats
}

fn not_torn(stats: &Stats) -> Vec<String> {
    stats
        .violations
        .iter()
        .filter(|v| !v.detail.contains(TORN_AT_LINES) && !v.detail.contains(TORN_AT_SECTORS))
        .map(|v| v.to_string())
        .collect()
}

#[test]
fn an_ignored_entry_checksum_is_found_only_with_torn_pages() {
    let t = std::time::Instant::now();
    let found = explore(Some(64), true);
    let bad = not_torn(&found);
    assert!(
        bad.iter().any(|v| v.contains("user.big")),
        "the planted bug went unseen in {} images: {bad:?}",
        found.images
    );
    println!(
        "torn pages: found in {:.2}s ({} images, {} violations)",
        t.elapsed().as_secs_f64(),
        found.images,
        bad.len()
    );
    // Whole pages cannot split an entry: the same bug is invisible.
    let whole = explore(None, true);
    assert!(
        whole.violations.is_empty(),
        "{:?}",
        whole.violations.first()
    );
    // And without the bug, torn pages break nothing but unsynced overwrites
    // in place.
    let clean = explore(Some(64), false);
    assert!(not_torn(&clean).is_empty(), "{:?}", not_torn(&clean));
}
