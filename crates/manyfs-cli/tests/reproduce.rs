//! `manyfs bench --reproduce numa-fig6 --topology system` on a machine of
//! one NUMA node: a one-line refusal that says so, before any pool is made.

use std::process::Command;

use manyfs_sync::testing as test_support;

#[test]
fn numa_fig6_on_the_system_topology_of_one_node_is_refused_in_one_line() {
    let topology = manyfs::Topology::system();
    if topology.node_count() > 1 {
        test_support::skip(
            "numa_fig6_on_the_system_topology_of_one_node_is_refused_in_one_line",
            test_support::Lack::Machine,
            format_args!("this machine has {topology}; the figure would run"),
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_manyfs"))
        .args(["bench", "--reproduce", "numa-fig6", "--topology", "system"])
        .current_dir(dir.path())
        .env_remove("MANYFS_TOPOLOGY")
        .output()
        .expect("run manyfs");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("manyfs: ") && stderr.contains("one NUMA node"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    // Nothing was run or written.
    assert!(
        String::from_utf8_lossy(&out.stdout).trim().is_empty(),
        "{out:?}"
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);

    // Another emulated topology than the figure's: refused too.
    let out = Command::new(env!("CARGO_BIN_EXE_manyfs"))
        .args(["bench", "--reproduce", "numa-fig6", "--topology", "4x1"])
        .current_dir(dir.path())
        .output()
        .expect("run manyfs");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("2x1"),
        "{out:?}"
    );
}
