//! `--reproduce nthread-fig5` and `nthread-fig2` lay data out as the paper
//! does: every thread's data written from node 0 lands on member 0 even
//! though the threads then run round-robin on both nodes, and the writes
//! of a thread on node 1 go to member 1. A short run of Figure 2 labels
//! exactly the model-on results EMULATED, naming both models.

use manyfs::lowlevel::FileExt;
use manyfs::{OpenOptions, RemoteCost};
use manyfs_bench::reproduce::nthread::{DEFAULT_CAP, Models, cpu_of_node, fig5_series, mix};
use manyfs_bench::runner::{measure_on, prepare_on};
use manyfs_bench::{Config, PoolConfig, TargetEnv};
use std::time::Duration;

use manyfs_sync::testing as test_support;
use test_support::{Lack, skip};

const MODELS: Models = Models {
    cost: RemoteCost::PAPER,
    cap: DEFAULT_CAP,
};

/// A CPU of emulated node 0 and one of node 1 that this process may use;
/// `None` (and `test` skipped) where it may not use both.
fn cpus_of_both_nodes(test: &str) -> Option<(usize, usize)> {
    match (cpu_of_node(0), cpu_of_node(1)) {
        (Ok(cpu0), Ok(cpu1)) => Some((cpu0, cpu1)),
        (a, b) => {
            let why = a
                .err()
                .or(b.err())
                .map(|e| e.to_string())
                .unwrap_or_default();
            skip(
                test,
                Lack::Setup,
                format_args!("this process may not use a CPU of each emulated node: {why}"),
            );
            None
        }
    }
}

fn base() -> PoolConfig {
    PoolConfig {
        size: 64 << 20,
        ..PoolConfig::default()
    }
}

#[test]
fn fig5_data_starts_on_node_0_and_writes_follow_the_writer() {
    let Some((cpu0, cpu1)) = cpus_of_both_nodes("fig5_data_starts_on_node_0") else {
        return;
    };
    let series = fig5_series(&base(), MODELS, cpu0)
        .into_iter()
        .find(|s| s.label == "off model off")
        .unwrap();
    let mut env = TargetEnv::new(&series.target, &series.pool).unwrap();
    let point = env.point().unwrap();
    let be = point.backend();
    let cpus = [cpu0, cpu1];
    let ops = prepare_on(
        mix(60),
        &be,
        2,
        Some(&cpus),
        series.prefill_cpu,
        manyfs_bench::workload::REGION,
    )
    .unwrap();
    let fs = point.fs().unwrap();
    let blocks = |t: usize| {
        OpenOptions::new()
            .read(true)
            .open(fs, format!("/private-{t}"))
            .unwrap()
            .blocks_per_node()
    };
    for t in 0..2 {
        assert_eq!(blocks(t).data[1], 0, "thread {t}'s data not all on node 0");
    }
    measure_on(ops, Duration::ZERO, Duration::from_millis(50), Some(&cpus)).unwrap();
    // Thread 1 ran on node 1 (policy off: nothing moved it): its
    // copy-on-write blocks are on member 1; its read blocks stayed.
    let b1 = blocks(1);
    assert!(b1.data[1] > 0, "thread 1's writes not on node 1: {b1:?}");
    assert!(b1.data[0] >= 256, "thread 1's read blocks moved: {b1:?}");
    assert_eq!(blocks(0).data[1], 0, "thread 0 wrote on node 1");
    drop(be);
    point.finish().unwrap();
}

#[test]
fn fig2_labels_exactly_the_model_on_results_emulated() {
    if cpus_of_both_nodes("fig2_labels_exactly_the_model_on_results_emulated").is_none() {
        return;
    }
    let cfg = Config {
        threads: vec![2],
        duration: Duration::from_millis(20),
        warmup: Duration::from_millis(5),
        pool: base(),
        progress: false,
        repeats: 1,
        ..Config::default()
    };
    let recs = manyfs_bench::reproduce::nthread::run_fig2(&cfg, MODELS).unwrap();
    assert_eq!(recs.len(), 3 * 6);
    for r in &recs {
        assert!(r.ops > 0, "{r:?}");
        let label = r.emulated.as_deref().unwrap_or("");
        assert_eq!(r.target.contains("EMULATED"), !label.is_empty(), "{r:?}");
        if !label.is_empty() {
            assert!(
                label.contains("+270/+583") && label.contains("400000000 B/s per node"),
                "{label}"
            );
        }
        assert_eq!(r.moves, None, "fig2 runs without thread placement");
    }
    let table = manyfs_bench::reproduce::nthread::fig2_table(&recs);
    assert!(table.contains("RW (PMIX:1:1)"), "{table}");
}

/// `--verbose`: while a point with thread placement runs, one line per
/// placement window, each naming the point, the window (counting up) and
/// what the planner saw and did; none for a point without placement.
#[test]
fn the_placement_log_has_a_line_per_window_while_a_point_runs() {
    let Some((cpu0, _)) = cpus_of_both_nodes("the_placement_log_has_a_line_per_window") else {
        return;
    };
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let sink = lines.clone();
    let cfg = Config {
        workloads: vec![mix(100)],
        threads: vec![2],
        duration: Duration::from_millis(400),
        warmup: Duration::from_millis(50),
        pool: base(),
        progress: false,
        membw: false,
        placement_log: Some(manyfs_bench::PlacementLog::new(move |l| {
            sink.lock().unwrap().push(l.to_string())
        })),
        ..Config::default()
    };
    let rl = fig5_series(&cfg.pool, MODELS, cpu0)
        .into_iter()
        .find(|s| s.label == "rl model off")
        .unwrap();
    let recs = manyfs_bench::run_series(&cfg, &[rl]).unwrap();
    let lines = lines.lock().unwrap().clone();
    // 450 ms of 100 ms windows (and the preparation before).
    assert!(lines.len() >= 3, "{lines:?}");
    let prefix = "PMIX:5:0 rl model off 2 threads: placement window ";
    let mut windows = Vec::new();
    for l in &lines {
        let rest = l.strip_prefix(prefix).unwrap_or_else(|| panic!("{l}"));
        let (n, rest) = rest.split_once(": ").unwrap();
        windows.push(n.parse::<u64>().unwrap());
        assert!(rest.contains(" threads, NVMM contended "), "{l}");
    }
    assert!(windows.windows(2).all(|w| w[0] < w[1]), "{windows:?}");
    assert!(
        lines.iter().any(|l| l.contains(": 2 threads, ")),
        "both workers seen in a window: {lines:?}"
    );
    // Every move the point counted is on a line.
    let moved = recs[0].moves.as_deref().unwrap();
    let n: usize = moved.split(' ').next().unwrap().parse().unwrap();
    assert_eq!(
        lines
            .iter()
            .map(|l| l.matches(") moved").count())
            .sum::<usize>(),
        n,
        "{moved}: {lines:?}"
    );
    // No placement, no lines.
    let quiet = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let q = quiet.clone();
    let cfg = Config {
        duration: Duration::from_millis(50),
        placement_log: Some(manyfs_bench::PlacementLog::new(move |_| {
            q.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        })),
        ..cfg
    };
    let off = fig2_series_off(&cfg.pool, cpu0);
    manyfs_bench::run_series(&cfg, &[off]).unwrap();
    assert_eq!(quiet.load(std::sync::atomic::Ordering::Relaxed), 0);
}

/// Figure 2's "data's node" series without the models: no thread placement.
fn fig2_series_off(base: &PoolConfig, cpu0: usize) -> manyfs_bench::Series {
    let cpu1 = cpu_of_node(1).unwrap();
    manyfs_bench::reproduce::nthread::fig2_series(base, MODELS, cpu0, cpu1)
        .into_iter()
        .find(|s| s.label == "data's node model off")
        .unwrap()
}
