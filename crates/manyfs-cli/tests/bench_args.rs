//! `manyfs bench` refuses a bad argument value while parsing the command
//! line: clap's usage error (exit 2) naming the flag and the value, before
//! any benchmark runs or file is written.

use std::process::Command;

#[test]
fn bad_bench_values_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    for (flag, bad) in [
        ("--durability", "disk"),
        ("--segment-size", "12Q"),
        ("--pool-size", "lots"),
        ("--duration", "soon"),
        ("--warmup", "1fortnight"),
        ("--sublogs", "two"),
        ("--index", "btree"),
        ("--placement", "far"),
        ("--thread-placement", "on"),
        ("--placement-policy", "all"),
        ("--topology", "0x1"),
        ("--stride", "3"),
        ("--stage-max", "x"),
        ("--remote-cost", "fast"),
        ("--bandwidth-cap", "10"),
        ("--workloads", "NOPE"),
        ("--targets", "lib:nope"),
        ("--reproduce", "fig99"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_manyfs"))
            .args(["bench", flag, bad, "--no-membw"])
            .current_dir(dir.path())
            .output()
            .expect("run manyfs");
        assert_eq!(out.status.code(), Some(2), "{flag} {bad}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let first = stderr.lines().next().unwrap_or_default();
        assert!(
            first.contains("invalid value") && first.contains(flag) && first.contains(bad),
            "{flag} {bad}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{flag} {bad}: {out:?}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_manyfs"))
        .args(["bench", "--data", "d", "--device-io", "aio"])
        .current_dir(dir.path())
        .output()
        .expect("run manyfs");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
