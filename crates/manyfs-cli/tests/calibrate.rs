//! `manyfs calibrate POOL`: one line per node and read ratio, the result
//! stored beside the pool; bad arguments are errors, not panics.

use manyfs::{Fs, MkfsOptions, MountOptions};
use std::process::Command;

fn calibrate(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_manyfs"))
        .arg("calibrate")
        .args(args)
        .output()
        .expect("run manyfs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().expect("exit status"), text)
}

#[test]
fn calibrate_prints_and_stores_every_ratio() {
    let dir = tempfile::tempdir().unwrap();
    let pool = dir.path().join("pool");
    Fs::mkfs(
        &pool,
        &{
            let mut mk = MkfsOptions::default();
            mk.size = 32 << 20;
            mk
        },
        &MountOptions::default(),
    )
    .unwrap();
    let p = pool.to_str().unwrap();
    let (code, text) = calibrate(&[p, "--seconds", "0.02"]);
    assert_eq!(code, 0, "{text}");
    let stored = manyfs::diag::Calibration::load(&manyfs::diag::Calibration::path_for(&pool))
        .unwrap()
        .expect("stored beside the pool");
    assert_eq!(stored.points.len(), 6, "{text}");
    assert!(text.contains("saved"), "{text}");
    for bad in [
        vec![p, "--seconds", "0"],
        vec![p, "--durability", "disk"],
        vec!["/no/such/pool"],
    ] {
        let (code, text) = calibrate(&bad);
        assert_ne!(code, 0, "{bad:?}: {text}");
        assert!(!text.contains("panicked"), "{bad:?}: {text}");
    }
}
