//! Threads racing create, link, unlink, rename, mkdir and rmdir over a few
//! shared directories. Errors such as EEXIST or ENOENT are expected; what
//! must hold is that memory and media agree afterwards, before and after a
//! remount, and that fsck is clean.

mod common;

use manyfs::{Fs, MountOptions};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

#[test]
fn racing_namespace_operations_stay_consistent() {
    let (_dir, pool, fs) = common::fresh(64 << 20);
    for d in ["/a", "/b", "/c"] {
        fs.create_dir(d).unwrap();
    }
    let dirs = ["/a", "/b", "/c", "/a/sub", "/b/sub"];
    std::thread::scope(|s| {
        for t in 0..6u64 {
            let fs = &fs;
            s.spawn(move || {
                let mut rng = StdRng::seed_from_u64(t + 1);
                for _ in 0..1500 {
                    let d1 = dirs[rng.random_range(0..dirs.len())];
                    let d2 = dirs[rng.random_range(0..dirs.len())];
                    let n1 = format!("{d1}/n{}", rng.random_range(0..6));
                    let n2 = format!("{d2}/n{}", rng.random_range(0..6));
                    let _ = match rng.random_range(0..8) {
                        0 | 1 => fs.write(&n1, &rng.random::<u64>().to_le_bytes()),
                        2 => fs.hard_link(&n1, &n2),
                        3 => fs.remove_file(&n1),
                        4 => fs.rename(&n1, &n2),
                        5 => fs.create_dir(format!("{d1}/sub")),
                        6 => fs.remove_dir(format!("{d1}/sub")),
                        _ => fs.rename(format!("{d1}/sub"), format!("{d2}/moved{}", t % 2)),
                    };
                }
            });
        }
    });
    let diffs = fs.verify().unwrap();
    assert!(diffs.is_empty(), "{diffs:?}");
    fs.unmount().unwrap();
    let report = manyfs::fsck::check(&pool).unwrap();
    assert!(report.is_clean(), "{:?}", report.errors);
    let fs = Fs::mount(&pool, &MountOptions::default()).unwrap();
    assert!(fs.verify().unwrap().is_empty());
}
