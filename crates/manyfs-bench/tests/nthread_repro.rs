//! `--reproduce nthread-fig5` and `nthread-fig2` lay data out as the paper
//! does: every thread's data written from node 0 lands on member 0 even
//! though the threads then run round-robin on both nodes, and the writes
//! of a thread on node 1 go to member 1. A short run of Figure 2 labels
//! exactly the model-on results EMULATED, naming both models.

use manyfs::{OpenOptions, RemoteCost};
use manyfs_bench::reproduce::nthread::{DEFAULT_CAP, Models, cpu_of_node, fig5_series, mix};
use manyfs_bench::runner::{measure_on, prepare_on};
use manyfs_bench::{Config, PoolConfig, TargetEnv};
use std::time::Duration;

const MODELS: Models = Models {
    cost: RemoteCost::PAPER,
    cap: DEFAULT_CAP,
};

fn base() -> PoolConfig {
    PoolConfig {
        size: 64 << 20,
        ..PoolConfig::default()
    }
}

#[test]
fn fig5_data_starts_on_node_0_and_writes_follow_the_writer() {
    let (Ok(cpu0), Ok(cpu1)) = (cpu_of_node(0), cpu_of_node(1)) else {
        return; // this process may not use a CPU of each emulated node
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
    if cpu_of_node(0).is_err() || cpu_of_node(1).is_err() {
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
