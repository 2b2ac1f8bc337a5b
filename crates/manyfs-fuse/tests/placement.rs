//! Thread placement through a FUSE mount: the file data a request moves is
//! accounted to the thread that made the request (the kernel's request
//! header names it), so `thread_placement=migrate` moves the program's
//! thread, not the daemon's worker, and gives its mask back at unmount.
//!
//! On an emulated two-node machine (`topology=2x1`: real CPU 0 is node 0,
//! real CPU 1 is node 1), `/data` is on node 1's member. A thread of this
//! process, first seen with both CPUs in its mask and then pinned to CPU 0,
//! reads it through the mount until the planner moves it to CPU 1. Needs
//! FUSE and real CPUs 0 and 1: skipped with the reason printed otherwise,
//! except under `CI=true`, where it fails.

mod common;

use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use common::*;
use manyfs::diag::affinity;
use manyfs::{Fs, MkfsOptions, PlacementConfig, PoolMember};
use manyfs_fuse::{FuseConfig, MountedFs};

const DATA: usize = 4 << 20;
const WINDOW: Duration = Duration::from_millis(100);

#[test]
fn migrate_moves_the_callers_thread_and_gives_its_mask_back() {
    let test = "migrate_moves_the_callers_thread";
    if !fuse_available(test) {
        return;
    }
    let cpus = affinity::get(0).unwrap();
    if !(cpus.contains(&0) && cpus.contains(&1)) {
        skip(
            test,
            Lack::Setup,
            format_args!("this process may not use real CPUs 0 and 1, only {cpus:?}"),
        );
        return;
    }
    within(PROGRESS_LIMIT, test, move || {
        let dir = tempfile::tempdir().unwrap();
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        let mut cfg = FuseConfig::parse_options(&[
            "topology=2x1,thread_placement=migrate,placement_policy=rl",
        ])
        .unwrap();
        cfg.fs.placement_config = PlacementConfig {
            window: WINDOW,
            // 1 MB per second: 100 KB in a window (a pass reads 4 MiB).
            read_dominance_bytes: 1_000_000,
            ..PlacementConfig::default()
        };
        let mkfs = {
            let mut mk = MkfsOptions::default();
            mk.size = 32 << 20;
            mk.members = vec![PoolMember {
                path: dir.path().join("m1"),
                node: 1,
                size: 32 << 20,
            }];
            mk
        };
        let fs = Fs::mkfs(&dir.path().join("pool"), &mkfs, &cfg.fs).unwrap();
        let writer = fs.clone();
        manyfs::diag::run_on_cpu(1, move || writer.write("/data", &vec![7u8; DATA]))
            .unwrap()
            .unwrap();
        assert!(
            fs.stats().members[1].used_blocks >= DATA as u64 / 4096,
            "data on node 1"
        );
        let report_fs = fs.clone();
        let m = MountedFs::spawn(fs, &mnt, &cfg).unwrap();
        let path = mnt.join("data");
        let (moved_tx, moved_rx) = std::sync::mpsc::channel();
        let (unmounted_tx, unmounted_rx) = std::sync::mpsc::channel::<()>();
        let seen_fs = report_fs.clone();
        let reader = std::thread::spawn(move || {
            let tid = manyfs::diag::gettid();
            let f = std::fs::File::open(&path).unwrap();
            // First seen with both CPUs: 4 KiB, short of the dominance.
            let first = manyfs::diag::placement_window(&seen_fs);
            f.read_exact_at(&mut [0u8; 4096], 0).unwrap();
            while manyfs::diag::placement_window(&seen_fs) <= first + 1 {
                std::thread::sleep(WINDOW / 10);
            }
            affinity::set(0, &[0]).unwrap();
            let mut buf = vec![0u8; DATA];
            let start = Instant::now();
            while affinity::get(0).unwrap() != [1] {
                assert!(start.elapsed() < Duration::from_secs(30), "never moved");
                f.read_exact_at(&mut buf, 0).unwrap();
                assert!(buf.iter().all(|&b| b == 7));
            }
            drop((f, seen_fs));
            moved_tx.send(tid).unwrap();
            unmounted_rx.recv().unwrap();
            affinity::get(0).unwrap()
        });
        let tid = moved_rx.recv().unwrap();
        let report = manyfs::diag::placement_report(&report_fs);
        let mine: Vec<_> = report.iter().filter(|d| d.tid == tid).collect();
        assert_eq!(mine.len(), 1, "one move of the caller: {report:?}");
        let d = mine[0];
        assert_eq!((d.from, d.to), (0, 1), "{d:?}");
        assert!(d.applied && d.error.is_none(), "{d:?}");
        assert_eq!(d.reason, manyfs::diag::Reason::ReadLocality);
        // No daemon thread was accounted (or moved): only callers are.
        let workers: Vec<i32> = std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .filter(|&t| t != tid)
            .collect();
        assert!(
            report.iter().all(|d| !workers.contains(&d.tid)),
            "{report:?}"
        );
        unmount(m);
        drop(report_fs);
        unmounted_tx.send(()).unwrap();
        assert_eq!(reader.join().unwrap(), [0], "its own mask is back");
    });
}
