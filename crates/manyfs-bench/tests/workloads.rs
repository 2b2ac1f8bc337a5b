//! Every workload runs briefly against in-process manyfs and a plain
//! directory and returns sane records; HACCIO catches corruption; JSON and
//! plots are written and contain what they should. No timing assertions.

use manyfs::LockKind;
use manyfs_bench::backend::{Backend, DirBackend, Open, write_full};
use manyfs_bench::report::{read_json, table, write_json};
use manyfs_bench::{BenchError, Config, PoolConfig, Record, Target, Workload};
use std::sync::Arc;
use std::time::Duration;

fn tiny(workloads: Vec<Workload>, targets: Vec<Target>, threads: Vec<usize>) -> Config {
    Config {
        workloads,
        targets,
        threads,
        duration: Duration::from_millis(30),
        warmup: Duration::from_millis(5),
        pool: PoolConfig {
            size: 256 << 20,
            ..PoolConfig::default()
        },
        membw: false,
        progress: false,
        pin: true,
        repeats: 1,
        stride: manyfs_bench::workload::REGION,
        placement_log: None,
    }
}

fn sane(r: &Record) {
    assert!(r.ops > 0, "no operations: {r:?}");
    assert!(r.ops_per_sec > 0.0 && r.ops_per_sec.is_finite(), "{r:?}");
    assert!(r.seconds > 0.0, "{r:?}");
    assert!(r.p50_ns > 0 && r.p50_ns <= r.p99_ns, "{r:?}");
    let w: Workload = r.workload.parse().unwrap();
    if w.moves_data() {
        assert!(r.bytes_per_sec > 0.0, "{r:?}");
    } else {
        assert_eq!(r.bytes_per_sec, 0.0, "{r:?}");
    }
}

#[test]
fn every_workload_on_lib_and_dir() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = tiny(
        Workload::all_fs(),
        vec![
            Target::Lib(LockKind::SrlTree),
            Target::Dir(dir.path().to_path_buf()),
        ],
        vec![2],
    );
    let recs = manyfs_bench::run(&cfg).unwrap();
    assert_eq!(recs.len(), Workload::all_fs().len() * 2);
    for r in &recs {
        sane(r);
        assert_eq!(r.threads, 2);
    }
    assert!(recs.iter().any(|r| r.target == "lib:srl-tree"));
    // dir: targets clean up after themselves.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn headline_workloads_on_every_lock_kind() {
    let cfg = tiny(
        vec![Workload::Dwom, Workload::Drbm],
        Target::all_lib(),
        vec![1, 3],
    );
    let recs = manyfs_bench::run(&cfg).unwrap();
    assert_eq!(recs.len(), 2 * 4 * 2);
    recs.iter().for_each(sane);
}

/// `--index` and `--stride`: DWOM/DRBM on every index kind at a 4 KiB
/// stride run and are labelled by index; the stride puts thread `t`'s
/// block at `t * stride`.
#[test]
fn index_kinds_and_strides() {
    for index in manyfs::IndexKind::ALL {
        let mut cfg = tiny(
            vec![Workload::Dwom, Workload::Drbm],
            vec![Target::Lib(LockKind::SrlTree), Target::Lib(LockKind::Inode)],
            vec![1, 3],
        );
        cfg.pool.index = index;
        cfg.stride = 4096;
        let recs = manyfs_bench::run(&cfg).unwrap();
        assert_eq!(recs.len(), 2 * 2 * 2);
        recs.iter().for_each(sane);
        let want = if index == manyfs::IndexKind::Cas {
            "lib:srl-tree".to_string()
        } else {
            format!("lib:srl-tree index={index}")
        };
        assert!(recs.iter().any(|r| r.target == want), "{want}");
    }
    for (stride, size) in [(4096u64, 3 * 4096u64), (8 << 20, 2 * (8 << 20) + 4096)] {
        let dir = tempfile::tempdir().unwrap();
        let be: Arc<dyn Backend> = Arc::new(DirBackend::new(dir.path().to_path_buf()));
        let ops = Workload::Dwom
            .prepare_strided(&be, 3, stride, &|_| {})
            .unwrap();
        assert_eq!(ops.len(), 3);
        let len = std::fs::metadata(dir.path().join("shared")).unwrap().len();
        assert_eq!(len, size, "stride {stride}");
    }
    let dir = tempfile::tempdir().unwrap();
    let be: Arc<dyn Backend> = Arc::new(DirBackend::new(dir.path().to_path_buf()));
    let e = Workload::Dwom
        .prepare_strided(&be, 2, 1000, &|_| {})
        .err()
        .unwrap();
    assert!(matches!(e, BenchError::InvalidArgument(_)), "{e}");
}

#[test]
fn memory_reference_rows_with_repeats() {
    let mut cfg = tiny(vec![], vec![], vec![1, 2]);
    cfg.membw = true;
    cfg.repeats = 3;
    let recs = manyfs_bench::run(&cfg).unwrap();
    assert_eq!(recs.len(), 8);
    for r in &recs {
        sane(r);
        assert_eq!(r.target, "memory");
        assert_eq!(r.runs, 3);
        assert!(r.ops_per_sec_min <= r.ops_per_sec && r.ops_per_sec <= r.ops_per_sec_max);
    }
}

fn hacc_ops(be: &Arc<dyn Backend>, threads: usize) -> Vec<Box<dyn manyfs_bench::workload::Op>> {
    Workload::HaccIo.prepare(be, threads).unwrap()
}

#[test]
fn haccio_verifies_its_data() {
    let records = (manyfs_bench::workload::HACC_PARTITION
        / manyfs_bench::workload::HACC_RECORD as u64) as usize;
    // A clean write + read-back cycle passes on both kinds of target.
    let dir = tempfile::tempdir().unwrap();
    let pool_dir = tempfile::tempdir().unwrap();
    let fs = manyfs::Fs::mkfs(
        &pool_dir.path().join("pool"),
        &{
            let mut mk = manyfs::MkfsOptions::default();
            mk.size = 256 << 20;
            mk
        },
        &{
            let mut mo = manyfs::MountOptions::default();
            mo.durability = manyfs::Durability::Dram;
            mo
        },
    )
    .unwrap();
    let backends: Vec<Arc<dyn Backend>> = vec![
        Arc::new(DirBackend::new(dir.path())),
        Arc::new(manyfs_bench::backend::LibBackend::new(fs.clone())),
    ];
    for be in &backends {
        let mut ops = hacc_ops(be, 2);
        for _ in 0..2 * records + 1 {
            for op in ops.iter_mut() {
                assert_eq!(op.run().unwrap(), 1 << 20);
            }
        }
        // Corrupt thread 1's first record after it was rewritten, then read
        // it back: verification must fail.
        let mut ops = hacc_ops(be, 2);
        for _ in 0..records {
            for op in ops.iter_mut() {
                op.run().unwrap();
            }
        }
        let f = be.open("/checkpoint", Open::EXISTING).unwrap();
        write_full(
            &*f,
            &[0xEEu8; 16],
            manyfs_bench::workload::HACC_PARTITION + 100,
        )
        .unwrap();
        ops[0].run().unwrap();
        match ops[1].run() {
            Err(BenchError::Verify(msg)) => assert!(msg.contains("thread 1"), "{msg}"),
            other => panic!("expected a verification error, got {other:?}"),
        }
    }
    drop(backends);
    fs.unmount().unwrap();
}

#[test]
fn json_table_and_plots() {
    let dir = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let mut cfg = tiny(
        vec![
            Workload::Dwom,
            Workload::Mix {
                reads: 1,
                writes: 3,
            },
        ],
        vec![
            Target::Lib(LockKind::Inode),
            Target::Dir(data.path().to_path_buf()),
        ],
        vec![1, 2],
    );
    cfg.membw = true;
    let recs = manyfs_bench::run(&cfg).unwrap();
    let json = dir.path().join("out.json");
    write_json(&json, &recs).unwrap();
    let back = read_json(&json).unwrap();
    assert_eq!(back, recs);
    let raw: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let first = &raw.as_array().unwrap()[0];
    for key in [
        "workload",
        "target",
        "threads",
        "ops_per_sec",
        "bytes_per_sec",
        "p50_ns",
        "p99_ns",
    ] {
        assert!(first.get(key).is_some(), "missing {key}");
    }
    let t = table(&recs);
    assert!(t.contains("MIX:1:3") && t.contains("lib:inode") && t.contains("MEM-W"));

    let svg = dir.path().join("plot.svg");
    manyfs_bench::plot::write_plot(&svg, &recs).unwrap();
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg") || text.contains("<svg"));
    let dir_label = format!("dir:{}", data.path().display());
    for series in [
        "lib:inode",
        dir_label.as_str(),
        "MEM-W",
        "MEMHOT-R",
        "memory reference",
        "DWOM",
        "MIX:1:3",
        "threads",
    ] {
        assert!(text.contains(series), "plot lacks {series}");
    }
    let png = dir.path().join("plot.png");
    manyfs_bench::plot::write_plot(&png, &recs).unwrap();
    let bytes = std::fs::read(&png).unwrap();
    assert!(bytes.starts_with(b"\x89PNG"));
    assert!(manyfs_bench::plot::write_plot(&dir.path().join("x.bmpx"), &recs).is_err());
}
