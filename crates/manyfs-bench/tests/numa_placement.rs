//! `--reproduce numa-fig6` lays data out as the paper's configurations
//! do: with node-0 placement every block of every file is on member 0,
//! with local placement each thread's data (and its private files' logs)
//! on the member of the node its pinned CPU is on. Checked on the pools
//! the bench itself makes, prepared and run the way the bench runs them;
//! and a short run of the whole figure labels exactly the model-on
//! results EMULATED.

use manyfs::lowlevel::FileExt;
use manyfs::{OpenOptions, RemoteCost};
use manyfs_bench::reproduce::{FIG6_WORKLOADS, fig6_series, fig6_table, fig6_thread_nodes};
use manyfs_bench::runner::{measure, prepare_pinned};
use manyfs_bench::{Config, PoolConfig, TargetEnv, Workload};
use std::time::Duration;

const THREADS: usize = 3;

fn base() -> PoolConfig {
    PoolConfig {
        size: 64 << 20,
        ..PoolConfig::default()
    }
}

/// Prepare and briefly run `w` on a fresh pool of the series `label`;
/// return per file the data and log blocks per node.
fn placed(label: &str, w: Workload) -> Vec<(String, manyfs::lowlevel::BlocksPerNode)> {
    let series = fig6_series(&base(), RemoteCost::PAPER)
        .into_iter()
        .find(|s| s.label == label)
        .unwrap();
    let mut env = TargetEnv::new(&series.target, &series.pool).unwrap();
    let point = env.point().unwrap();
    let be = point.backend();
    let ops = prepare_pinned(w, &be, THREADS, true, manyfs_bench::workload::REGION).unwrap();
    measure(ops, Duration::ZERO, Duration::from_millis(30), true).unwrap();
    let fs = point.fs().unwrap();
    assert_eq!(fs.stats().members.len(), 2, "one member per node");
    assert!(
        fs.stats().node_spills.iter().all(|&n| n == 0),
        "a node spilled"
    );
    let files: Vec<String> = match w {
        Workload::Dwom => vec!["/shared".into()],
        _ => (0..THREADS).map(|t| format!("/private-{t}")).collect(),
    };
    let out = files
        .iter()
        .map(|p| {
            let f = OpenOptions::new().read(true).open(fs, p).unwrap();
            (p.clone(), f.blocks_per_node())
        })
        .collect();
    drop(be);
    point.finish().unwrap();
    out
}

#[test]
fn node0_placement_puts_every_block_on_member_0() {
    for label in [
        "NOVA(V) EMULATED",
        "NOVA(RL) EMULATED",
        "control:node0 EMULATED",
    ] {
        for w in FIG6_WORKLOADS {
            for (path, b) in placed(label, w) {
                assert_eq!(b.data[1], 0, "{label} {w} {path}: {b:?}");
                assert_eq!(b.log[1], 0, "{label} {w} {path}: {b:?}");
                assert!(b.data[0] > 0, "{label} {w} {path}: {b:?}");
            }
        }
    }
}

#[test]
fn local_placement_puts_each_threads_data_on_its_node() {
    let nodes = fig6_thread_nodes(THREADS);
    for w in FIG6_WORKLOADS {
        let files = placed("NOVA(RL+NUMA) EMULATED", w);
        if w == Workload::Dwom {
            // One page per thread's region: as many on each node as
            // threads run there.
            let b = &files[0].1;
            for node in 0..2 {
                let want = nodes.iter().filter(|n| n.2 == node).count() as u64;
                assert_eq!(b.data[node], want, "{w}: {b:?} for threads on {nodes:?}");
            }
            continue;
        }
        for (t, (path, b)) in files.iter().enumerate() {
            let (mine, other) = (nodes[t].2, 1 - nodes[t].2);
            assert_eq!(b.data[other], 0, "{w} {path} (thread {t}): {b:?}");
            assert!(b.data[mine] > 0, "{w} {path}: {b:?}");
            assert_eq!(b.log[other], 0, "{w} {path} (thread {t}): {b:?}");
        }
    }
}

#[test]
fn a_short_fig6_run_labels_model_on_results_emulated() {
    let cfg = Config {
        threads: vec![1, 2],
        duration: Duration::from_millis(20),
        warmup: Duration::ZERO,
        pool: base(),
        progress: false,
        ..Config::default()
    };
    let recs = manyfs_bench::reproduce::run_fig6(&cfg, RemoteCost::PAPER).unwrap();
    assert_eq!(recs.len(), 3 * 8 * 2);
    for r in &recs {
        assert!(r.ops > 0, "{r:?}");
        assert_eq!(r.target.contains("EMULATED"), r.emulated.is_some(), "{r:?}");
    }
    assert_eq!(recs.iter().filter(|r| r.emulated.is_some()).count(), 24);
    let json = serde_json::to_string(&recs).unwrap();
    assert_eq!(json.matches("\"emulated\":\"EMULATED").count(), 24);
    let t = fig6_table(&recs);
    assert_eq!(t.lines().count(), 2 + 3 * 2, "{t}");
    assert!(t.contains("NUMA / best NOVA (EMULATED)"), "{t}");
    assert!(t.contains("NUMA / control (model off)"), "{t}");
    let no_pin = Config { pin: false, ..cfg };
    assert!(manyfs_bench::reproduce::run_fig6(&no_pin, RemoteCost::PAPER).is_err());
}

/// Any run with `--remote-cost` labels its `lib:` records EMULATED (table
/// and JSON) and leaves other targets alone.
#[test]
fn a_plain_run_with_the_model_labels_lib_records_emulated() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config {
        workloads: vec![Workload::Drbl],
        targets: vec![
            manyfs_bench::Target::Lib(manyfs::LockKind::SrlTree),
            manyfs_bench::Target::Dir(dir.path().to_path_buf()),
        ],
        threads: vec![2],
        duration: Duration::from_millis(20),
        warmup: Duration::ZERO,
        pool: PoolConfig {
            topology: manyfs_bench::reproduce::FIG6_TOPOLOGY,
            remote_cost: Some(RemoteCost::PAPER),
            member_per_node: true,
            ..base()
        },
        membw: false,
        progress: false,
        ..Config::default()
    };
    let recs = manyfs_bench::run(&cfg).unwrap();
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[0].target, "lib:srl-tree EMULATED");
    assert!(recs[0].emulated.as_deref().unwrap().contains("+270/+583"));
    assert!(!recs[1].target.contains("EMULATED") && recs[1].emulated.is_none());
    assert!(manyfs_bench::report::table(&recs).contains("lib:srl-tree EMULATED"));
}
