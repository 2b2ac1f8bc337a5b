//! `--reproduce tier-fig6` on tiny sizes and durations: every series of the
//! figure (the four configurations and the device reference for both
//! workloads, the disk file system for DWSL, at each thread count) is in
//! the JSON with its latencies (their CDFs too, which the CDF plot draws)
//! and, for the manyfs configurations, what it made durable; the pools,
//! the data device and the reference directory are gone afterwards.

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
                let wl = r.write_latency.as_ref().expect("write latency");
                assert!(wl.count > 0 && wl.p50_ns <= wl.p999_ns, "{r:?}");
                assert_eq!(r.fsync_latency.is_some(), w == DWSL, "{r:?}");
                for l in [Some(wl), r.fsync_latency.as_ref()].into_iter().flatten() {
                    check_cdf(&l.cdf, l.max_ns, &format!("{w} {t} x{n}"));
                }
                let lib = CONFIGS.iter().find(|c| c.0 == t);
                assert_eq!(r.persist.is_some(), lib.is_some(), "{r:?}");
                if let (Some(p), Some(c)) = (&r.persist, lib) {
                    assert_eq!(p.pool_mode, c.2.to_string());
                    let staging = c.2 != manyfs::Durability::File;
                    if !staging {
                        // Every operation wrote its 4 KiB to the data device.
                        assert!(p.device_bytes >= 4096.0, "{r:?}");
                        if w == DWSL {
                            assert!(p.device_flushes > 0.0, "{r:?}");
                        }
                    } else if w == DWSL {
                        // On an emulated-PM pool DWSL's writes are staged in
                        // the pool: its fsyncs neither write nor flush the
                        // device.
                        assert_eq!((p.device_bytes, p.device_flushes), (0.0, 0.0), "{r:?}");
                    } else {
                        // DWOM: after the setup's small fsync, the first 32
                        // writes (the staging budget) are staged, and every
                        // later one goes to the device.
                        let on_device = p.device_bytes * r.ops as f64;
                        assert!(on_device >= 4096.0 * (r.ops as f64 - 32.0), "{r:?}");
                    }
                }
            }
        }
    }
    assert_eq!(back.len(), 2 * 5 + 2 * 6);
    let table = tier::table(&back);
    assert!(table.contains("NL/Baseline") && table.contains(DEVICE));
    assert!(tier::latency_table(&back).contains("fsync p50"));
    // The CDF plot beside the figure's: a panel per (workload, write or
    // fsync) and thread count, one line per target.
    let plot = disk.path().join("fig.svg");
    let cdf = manyfs_bench::plot::cdf_path(&plot);
    assert_eq!(cdf, disk.path().join("fig.cdf.svg"));
    manyfs_bench::plot::write_cdf_plot(&cdf, &back).unwrap();
    let svg = std::fs::read_to_string(&cdf).unwrap();
    for panel in ["DWOM direct write x1", "DWSL write x2", "DWSL fsync x1"] {
        assert!(svg.contains(panel), "no panel {panel}");
    }
    assert!(svg.contains("Integrated") && svg.contains(DISK_FS));
    assert!(!svg.contains("DWOM direct fsync"));
    assert!(
        svg.matches("<polyline").count() >= 2 * 5 + 2 * 2 * 6,
        "{svg}"
    );
    for p in [&cfg.disk_pool, &cfg.shm_pool, &cfg.data, &cfg.disk_fs_dir] {
        assert!(!p.exists(), "{} left behind", p.display());
    }
}

/// A CDF as the JSON keeps it: a few hundred points at most, latencies
/// strictly increasing, fractions in [0, 1] and never falling, the last
/// `[max, 1.0]`.
fn check_cdf(cdf: &[(u64, f64)], max_ns: u64, what: &str) {
    assert!(!cdf.is_empty() && cdf.len() <= 200, "{what}: {cdf:?}");
    for w in cdf.windows(2) {
        assert!(w[0].0 < w[1].0 && w[0].1 <= w[1].1, "{what}: {cdf:?}");
    }
    assert!(cdf.iter().all(|p| (0.0..=1.0).contains(&p.1)), "{what}");
    assert_eq!(cdf.last(), Some(&(max_ns, 1.0)), "{what}: {cdf:?}");
}
