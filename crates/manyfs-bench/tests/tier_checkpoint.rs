//! `--reproduce tier-checkpoint` on tiny sizes and durations: every run
//! (none, background, blocking, device, at each thread count) traced, the
//! checkpoints of every run but `none` recorded, JSON and plot written, and
//! the pool and the data device gone afterwards.

use manyfs_bench::reproduce::checkpoint::{self, CheckpointConfig, DEVICE, MODES};
use std::path::Path;
use std::time::Duration;

#[test]
fn tier_checkpoint_traces_every_run() {
    assert!(manyfs_bench::reproduce::list().contains("tier-checkpoint"));
    // The data device must take O_DIRECT: a directory on the build's disk.
    let disk = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let shm = if Path::new("/dev/shm").is_dir() {
        tempfile::tempdir_in("/dev/shm").unwrap()
    } else {
        tempfile::tempdir().unwrap()
    };
    let mut cfg = CheckpointConfig::new(disk.path(), shm.path());
    cfg.pool_size = 16 << 20;
    cfg.data_size = 64 << 20;
    cfg.threads = vec![1, 2];
    cfg.warmup = Duration::from_millis(10);
    cfg.duration = Duration::from_millis(120);
    cfg.interval = Duration::from_millis(20);
    cfg.pin = false;
    let runs = checkpoint::run_tier_checkpoint(&cfg, |_| {}).unwrap();
    let mut labels: Vec<&str> = MODES.iter().map(|m| m.0).collect();
    labels.push(DEVICE);
    for n in [1, 2] {
        for l in &labels {
            let r = runs
                .iter()
                .find(|r| r.mode == *l && r.threads == n)
                .unwrap_or_else(|| panic!("no {l} x{n}"));
            assert!(r.writes > 0, "{l} x{n}: no writes");
            assert!(r.p50_ns > 0 && r.p50_ns <= r.p99_ns && r.p99_ns <= r.max_ns);
            // A checkpoint every 20 ms from 10 ms: 6 in 120 ms (fewer if
            // one ran long on a loaded machine, never none).
            if *l == "none" {
                assert!(r.checkpoints.is_empty());
            } else {
                assert!(!r.checkpoints.is_empty(), "{l} x{n}: no checkpoint");
                assert!(r.checkpoints.len() <= 6, "{l} x{n}: {:?}", r.checkpoints);
                assert!(r.checkpoints.iter().all(|&(s, e)| s <= e));
            }
            let traced: u64 = r.trace.iter().map(|b| b.2).sum();
            assert_eq!(traced, r.writes, "{l} x{n}: every write is in the trace");
        }
    }
    let json = disk.path().join("ckpt.json");
    checkpoint::write_json(&json, &runs).unwrap();
    let back: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(back.as_array().map(Vec::len), Some(runs.len()));
    let plot = disk.path().join("ckpt.svg");
    match manyfs_bench::plot::write_checkpoint_plot(&plot, &runs) {
        Ok(()) => assert!(std::fs::metadata(&plot).unwrap().len() > 1000),
        // No font on this machine: the plot says so instead.
        Err(e) => assert!(e.to_string().contains("font"), "{e}"),
    }
    let table = checkpoint::table(&runs);
    assert!(table.contains("blocking") && table.contains(DEVICE));
    assert!(!cfg.pool.exists() && !cfg.data.exists());
}
