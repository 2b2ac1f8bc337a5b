//! Thread placement on an emulated two-node machine (`topology=2x1`: real
//! CPU 0 is node 0, real CPU 1 is node 1; member 1 of the pool is node 1's
//! memory): a thread on node 0 that keeps reading data held by node 1 is
//! moved to node 1's CPU within two windows when its own mask (as the
//! planner first saw it) has that CPU, and gets the mask it had back when
//! the mount goes away; a thread whose own mask has no CPU of node 1 is
//! not moved and the report says why; `advise` only reports.
//!
//! The tests that need real CPUs 0 and 1 are skipped with the reason
//! printed where this process may not use both, except under `CI=true`,
//! where they fail.

mod common;

use common::{Lack, skip, within};
use manyfs::{
    Fs, MkfsOptions, MountOptions, PlacementConfig, PlacementPolicy, PoolMember, ThreadPlacement,
    TopologySpec,
};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;
const DATA: usize = 4 << 20;
const WINDOW: Duration = Duration::from_millis(100);

fn affinity() -> Vec<usize> {
    manyfs::diag::affinity::get(0).expect("sched_getaffinity")
}

fn pin(cpu: usize) {
    manyfs::diag::affinity::set(0, &[cpu]).expect("pin");
}

/// Whether this process may use real CPUs 0 and 1; if not, the test is
/// skipped with the reason printed, or fails under `CI=true`.
fn two_cpus(test: &str) -> bool {
    let cpus = affinity();
    let ok = cpus.contains(&0) && cpus.contains(&1);
    if !ok {
        let why = format!("this process may not use real CPUs 0 and 1, only {cpus:?}");
        skip(test, Lack::Setup, why);
    }
    ok
}

/// A pool of two members (node 0, node 1) mounted on a 2x1 topology with
/// thread placement `mode`, holding `/data` written from node 1's CPU.
fn pool_with_data_on_node1(dir: &std::path::Path, mode: ThreadPlacement) -> Fs {
    let opts = {
        let mut mo = MountOptions::default();
        mo.topology = TopologySpec::Emulated {
            nodes: 2,
            cpus_per_node: 1,
        };
        mo.thread_placement = mode;
        mo.placement_policy = PlacementPolicy::Rl;
        mo.placement_config = PlacementConfig {
            window: WINDOW,
            read_dominance_bytes: 1_000_000,
            ..PlacementConfig::default()
        };
        mo
    };
    let mkfs = {
        let mut mk = MkfsOptions::default();
        mk.size = 32 * MIB;
        mk.members = vec![PoolMember {
            path: dir.join("m1"),
            node: 1,
            size: 32 * MIB,
        }];
        mk
    };
    let fs = Fs::mkfs(&dir.join("pool"), &mkfs, &opts).unwrap();
    let before = fs.stats().members[1].used_blocks;
    let writer = fs.clone();
    std::thread::spawn(move || {
        pin(1);
        writer.write("/data", &vec![7u8; DATA]).unwrap();
        writer.sync().unwrap();
    })
    .join()
    .unwrap();
    let after = fs.stats().members[1].used_blocks;
    assert!(
        after - before >= DATA as u64 / 4096,
        "the data is on member 1 (node 1): {before} -> {after} blocks"
    );
    fs
}

/// Read all of `/data` once and check it.
fn read_all(fs: &Fs, buf: &mut [u8]) {
    let f = manyfs::OpenOptions::new()
        .read(true)
        .open(fs, "/data")
        .unwrap();
    assert_eq!(f.read_at(buf, 0).unwrap(), DATA);
    assert!(buf.iter().all(|&b| b == 7));
}

/// Read 4 KiB of `/data` with the mask the thread has (short of the
/// read dominance), and wait until the planner has seen the thread (the
/// end of the window the read was in): its own mask as first seen is
/// then the one it has now.
fn be_seen(fs: &Fs) {
    let f = manyfs::OpenOptions::new()
        .read(true)
        .open(fs, "/data")
        .unwrap();
    let first = manyfs::diag::placement_window(fs);
    assert_eq!(f.read_at(&mut [0u8; 4096], 0).unwrap(), 4096);
    let start = Instant::now();
    while manyfs::diag::placement_window(fs) <= first + 1 {
        assert!(start.elapsed() < Duration::from_secs(30), "windows stalled");
        std::thread::sleep(WINDOW / 10);
    }
}

/// On node 0's CPU, read all of `/data` again and again until `done`
/// (given the thread's id); returns that id and how long it took.
fn read_from_node0_until(fs: &Fs, what: &str, done: impl Fn(&Fs, i32) -> bool) -> (i32, Duration) {
    pin(0);
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    let mut buf = vec![0u8; DATA];
    let start = Instant::now();
    while !done(fs, tid) {
        assert!(start.elapsed() < Duration::from_secs(30), "never {what}");
        read_all(fs, &mut buf);
    }
    (tid, start.elapsed())
}

#[test]
fn a_remote_reader_moves_to_its_data_and_gets_its_mask_back() {
    if !two_cpus("a_remote_reader_moves_to_its_data_and_gets_its_mask_back") {
        return;
    }
    within(Duration::from_secs(60), "placement migrate", || {
        let dir = tempfile::tempdir().unwrap();
        let fs = pool_with_data_on_node1(dir.path(), ThreadPlacement::Migrate);
        let (moved_tx, moved_rx) = mpsc::channel();
        let (dropped_tx, dropped_rx) = mpsc::channel::<()>();
        let reader_fs = fs.clone();
        let reader = std::thread::spawn(move || {
            // First seen with both CPUs in its mask, then on node 0 only.
            be_seen(&reader_fs);
            let first_window = manyfs::diag::placement_window(&reader_fs);
            let (tid, took) = read_from_node0_until(&reader_fs, "moved", |_, _| affinity() == [1]);
            drop(reader_fs);
            moved_tx.send((tid, took, first_window)).unwrap();
            dropped_rx.recv().unwrap();
            affinity()
        });
        let (tid, took, first_window) = moved_rx.recv().unwrap();
        eprintln!("moved after {took:?} ({WINDOW:?} windows)");
        let report = manyfs::diag::placement_report(&fs);
        let d = report
            .iter()
            .find(|d| d.tid == tid)
            .unwrap_or_else(|| panic!("no decision for {tid}: {report:?}"));
        // Decided at the end of the window its reads began in, or of the
        // next one (windows, not wall-clock time: a loaded machine stretches
        // both alike).
        assert!(
            d.window <= first_window + 1,
            "moved in window {}, reads began in {first_window}",
            d.window
        );
        assert_eq!((d.from, d.to), (0, 1), "{d:?}");
        assert_eq!(d.reason, manyfs::diag::Reason::ReadLocality);
        assert!(d.applied && d.error.is_none(), "{d:?}");
        assert_eq!(
            report.iter().filter(|d| d.tid == tid).count(),
            1,
            "no bounce: {report:?}"
        );
        drop(fs);
        dropped_tx.send(()).unwrap();
        assert_eq!(reader.join().unwrap(), [0], "its own mask is back");
    });
}

#[test]
fn a_reader_whose_own_mask_has_no_cpu_of_its_data_is_not_moved_and_told_why() {
    if !two_cpus("a_reader_whose_own_mask_has_no_cpu_of_its_data_is_not_moved") {
        return;
    }
    within(Duration::from_secs(60), "placement own mask", || {
        let dir = tempfile::tempdir().unwrap();
        let fs = pool_with_data_on_node1(dir.path(), ThreadPlacement::Migrate);
        let reader_fs = fs.clone();
        let reader = std::thread::spawn(move || {
            // Pinned to node 0 before its first read: first seen so.
            let (tid, _) = read_from_node0_until(&reader_fs, "told", |fs, tid| {
                manyfs::diag::placement_report(fs)
                    .iter()
                    .any(|d| d.tid == tid)
            });
            // Some more windows of remote reads: still not moved, told once.
            let w = manyfs::diag::placement_window(&reader_fs);
            let _ = read_from_node0_until(&reader_fs, "past more windows", |fs, _| {
                manyfs::diag::placement_window(fs) > w + 3
            });
            (tid, affinity())
        });
        let (tid, mask) = reader.join().unwrap();
        assert_eq!(mask, [0], "not moved outside its own mask");
        let report = manyfs::diag::placement_report(&fs);
        let mine: Vec<_> = report.iter().filter(|d| d.tid == tid).collect();
        assert_eq!(mine.len(), 1, "told once: {report:?}");
        let d = mine[0];
        assert_eq!((d.from, d.to, d.applied), (0, 1, false), "{d:?}");
        assert_eq!(d.reason, manyfs::diag::Reason::ReadLocality);
        let why = d.error.as_deref().unwrap_or_default();
        assert!(
            why.contains("own CPU mask [0] has no CPU on node 1"),
            "{d:?}"
        );
        // The window log shows it too.
        let line = manyfs::diag::placement_windows_after(&fs, 0)
            .into_iter()
            .find(|w| w.decisions.contains(d))
            .expect("its window is kept")
            .to_string();
        assert!(
            line.contains(&format!("tid {tid} node 0 -> 1 (read locality) not moved")),
            "{line}"
        );
    });
}

#[test]
fn advise_reports_and_moves_nothing() {
    if !two_cpus("advise_reports_and_moves_nothing") {
        return;
    }
    within(Duration::from_secs(60), "placement advise", || {
        let dir = tempfile::tempdir().unwrap();
        let fs = pool_with_data_on_node1(dir.path(), ThreadPlacement::Advise);
        let reader_fs = fs.clone();
        let reader = std::thread::spawn(move || {
            be_seen(&reader_fs);
            let (tid, _) = read_from_node0_until(&reader_fs, "advised", |fs, tid| {
                manyfs::diag::placement_report(fs)
                    .iter()
                    .any(|d| d.tid == tid)
            });
            (tid, affinity())
        });
        let (tid, mask) = reader.join().unwrap();
        assert_eq!(mask, [0], "advise moves nothing");
        let report = manyfs::diag::placement_report(&fs);
        let d = report.iter().find(|d| d.tid == tid).unwrap();
        assert_eq!((d.from, d.to, d.applied), (0, 1, false), "{d:?}");
    });
}

#[test]
fn off_accounts_and_reports_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Fs::mkfs(
        &dir.path().join("pool"),
        &{
            let mut mk = MkfsOptions::default();
            mk.size = 16 * MIB;
            mk
        },
        &MountOptions::default(),
    )
    .unwrap();
    assert_eq!(fs.options().thread_placement, ThreadPlacement::Off);
    fs.write("/f", &[1u8; 8192]).unwrap();
    assert_eq!(fs.read("/f").unwrap().len(), 8192);
    std::thread::sleep(WINDOW);
    assert!(manyfs::diag::placement_report(&fs).is_empty());
}

#[test]
fn bad_placement_windows_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let opts = {
        let mut mo = MountOptions::default();
        mo.placement_config = PlacementConfig {
            window: Duration::ZERO,
            ..PlacementConfig::default()
        };
        mo
    };
    let err = Fs::mkfs(&dir.path().join("pool"), &MkfsOptions::default(), &opts)
        .err()
        .expect("a zero window is refused");
    assert!(matches!(err, manyfs::Error::InvalidArgument(_)), "{err}");
}

#[test]
fn calibration_measures_every_node_at_every_ratio_and_frees_its_blocks() {
    within(Duration::from_secs(60), "calibrate", || {
        let dir = tempfile::tempdir().unwrap();
        let fs = pool_with_data_on_node1(dir.path(), ThreadPlacement::Off);
        let free = fs.statfs().free_blocks;
        let c = manyfs::diag::calibrate(&fs, Duration::from_millis(20)).unwrap();
        assert_eq!(fs.statfs().free_blocks, free, "scratch blocks freed");
        let ratios = manyfs::diag::READ_RATIOS;
        assert_eq!(c.points.len(), 2 * ratios.len(), "{c:?}");
        for p in &c.points {
            assert_eq!(p.read_bw > 0, p.read_pct > 0, "{p:?}");
            assert_eq!(p.write_bw > 0, p.read_pct < 100, "{p:?}");
        }
        assert_eq!(fs.read("/data").unwrap(), vec![7u8; DATA], "data untouched");
        // Stored beside the pool, a later mount's planner uses it.
        let pool = dir.path().join("pool");
        let path = manyfs::diag::Calibration::path_for(&pool);
        c.save(&path).unwrap();
        let cfg = manyfs::diag::config_for_pool(&pool, &PlacementConfig::default(), 2);
        assert!(cfg.node_max_bw.iter().all(|&b| b > 0), "{cfg:?}");
        drop(fs);
        let ro = {
            let mut mo = MountOptions::default();
            mo.read_only = true;
            mo
        };
        let fs = Fs::mount(&pool, &ro).unwrap();
        assert!(
            manyfs::diag::calibrate(&fs, Duration::from_millis(1)).is_err(),
            "read-only"
        );
    });
}
