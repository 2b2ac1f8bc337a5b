//! `--reproduce tier-fig6` on tiny sizes and durations: every series of the
//! figure (the four configurations and the device reference for both
//! workloads, the disk file system for DWSL, at each thread count) is in
//! the JSON with its latencies and, for the manyfs configurations, what it
//! made durable; the pools, the data device and the reference directory
//! are gone afterwards.

use manyfs_bench::report::{read_json, write_json};
use manyfs_bench::reproduce::tier::{self, CONFIGS, DEVICE, DISK_FS, DWOM, DWSL, TierConfig};
use std::path::Path;
use std::time::Duration;

#[test]
fn tier_fig6_json_has_every_series() {
    assert!(manyfs_bench::reproduce::list().contains("tier-fig6"));
    // The data device must take O_DIRECT: a directory on the build's disk.
    let disk = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let shm = if Path::new("/dev/shm").is_dir() {
        tempfile::tempdir_in("/dev/shm").unwrap()
    } else {
        tempfile::tempdir().unwrap()
    };
    let mut cfg = TierConfig::new(disk.path(), shm.path());
    cfg.pool_size = 16 << 20;
    cfg.data_size = 20 << 20;
    cfg.threads = vec![1, 2];
    cfg.warmup = Duration::ZERO;
    cfg.duration = Duration::from_millis(30);
    cfg.pin = false;
    let records = tier::run_tier_fig6(&cfg, |_| {}).unwrap();
    let json = disk.path().join("fig.json");
    write_json(&json, &records).unwrap();
    let back = read_json(&json).unwrap();
    assert_eq!(back, records);

    for w in [DWOM, DWSL] {
        let mut targets: Vec<&str> = vec![DEVICE];
        targets.extend(CONFIGS.iter().map(|c| c.0));
        if w == DWSL {
            targets.push(DISK_FS);
        }
        for t in targets {
            for n in [1, 2] {
                let r = back
                    .iter()
                    .find(|r| r.workload == w && r.target == t && r.threads == n)
                    .unwrap_or_else(|| panic!("no {w} {t} x{n}"));
                assert!(r.ops > 0 && r.ops_per_sec > 0.0, "{r:?}");
                let wl = r.write_latency.expect("write latency");
                assert!(wl.count > 0 && wl.p50_ns <= wl.p999_ns, "{r:?}");
                assert_eq!(r.fsync_latency.is_some(), w == DWSL, "{r:?}");
                let lib = CONFIGS.iter().find(|c| c.0 == t);
                assert_eq!(r.persist.is_some(), lib.is_some(), "{r:?}");
                if let (Some(p), Some(c)) = (&r.persist, lib) {
                    assert_eq!(p.pool_mode, c.2.to_string());
                    // Every operation wrote its 4 KiB to the data device.
                    assert!(p.device_bytes >= 4096.0, "{r:?}");
                    if w == DWSL {
                        assert!(p.device_flushes > 0.0, "{r:?}");
                    }
                }
            }
        }
    }
    assert_eq!(back.len(), 2 * 5 + 2 * 6);
    let table = tier::table(&back);
    assert!(table.contains("NL/Baseline") && table.contains(DEVICE));
    assert!(tier::latency_table(&back).contains("fsync p50"));
    for p in [&cfg.disk_pool, &cfg.shm_pool, &cfg.data, &cfg.disk_fs_dir] {
        assert!(!p.exists(), "{} left behind", p.display());
    }
}
