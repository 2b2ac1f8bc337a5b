//! Attribute changes: bounded log space under chmod loops, and chmod/chown
//! racing with directory compaction and with file writes and truncates.

mod common;

use common::fresh_with;
use manyfs::lowlevel::InodeOps;
use manyfs::lowlevel::SetAttr;
use manyfs::{Durability, Fs, MountOptions};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

fn opts(durability: Durability) -> MountOptions {
    {
        let mut mo = MountOptions::default();
        mo.durability = durability;
        mo
    }
}

fn chmod(fs: &Fs, ino: u64, mode: u32, uid: Option<u32>) {
    fs.setattr(
        ino,
        &SetAttr {
            mode: Some(mode),
            uid,
            ..Default::default()
        },
    )
    .unwrap();
}

/// Log pages of the whole file system (`Fs::stats`).
fn log_pages(fs: &Fs) -> u64 {
    {
        let s = fs.stats();
        (s.inodes, s.log_pages, s.data_pages)
    }
    .1
}

fn chmod_loop_is_bounded(durability: Durability) {
    let o = opts(durability);
    let (_d, pool, fs) = fresh_with(64 << 20, &o);
    fs.write("/f", b"data").unwrap();
    fs.create_dir("/d").unwrap();
    fs.write("/d/x", b"x").unwrap();
    let f = fs.metadata("/f").unwrap().ino;
    let d = fs.metadata("/d").unwrap().ino;
    fs.sync().unwrap();
    let base_pages = log_pages(&fs);
    let base_free = fs.statfs().free_blocks;
    let run = |fs: &Fs, n: u32| {
        for i in 0..n {
            chmod(fs, f, 0o600 | (i & 0o77), None);
            fs.setattr(
                d,
                &SetAttr {
                    mode: Some(0o700 | (i & 0o77)),
                    uid: Some(i % 7),
                    mtime: Some(
                        std::time::UNIX_EPOCH + std::time::Duration::from_secs(u64::from(i)),
                    ),
                    ..Default::default()
                },
            )
            .unwrap();
            if i % 10_000 == 9_999 {
                fs.sync().unwrap();
                let pages = log_pages(fs);
                assert!(
                    pages < base_pages + 16,
                    "{durability:?}: {pages} log pages after {} chmods (started with {base_pages})",
                    i + 1
                );
            }
        }
    };
    // After a sync the pool holds at most 16 blocks more than at the start,
    // and memory and media agree.
    let check_reclaimed = |fs: &Fs, after: &str| {
        fs.sync().unwrap();
        let free = fs.statfs().free_blocks;
        assert!(
            free + 16 > base_free,
            "{durability:?}: {} blocks not reclaimed after {after}",
            base_free.saturating_sub(free)
        );
        assert!(
            manyfs::fsck::verify(fs).unwrap().is_empty(),
            "{:?}",
            manyfs::fsck::verify(fs)
        );
    };
    run(&fs, 100_000);
    check_reclaimed(&fs, "100,000 chmods");
    fs.unmount().unwrap();
    let fs = Fs::mount(&pool, &o).unwrap();
    assert!(
        manyfs::fsck::verify(&fs).unwrap().is_empty(),
        "{:?}",
        manyfs::fsck::verify(&fs)
    );
    assert_eq!(fs.stat(f).unwrap().mode & 0o7777, 0o600 | (99_999 & 0o77));
    assert_eq!(fs.stat(d).unwrap().mode & 0o7777, 0o700 | (99_999 & 0o77));
    assert_eq!(fs.stat(d).unwrap().uid, 99_999 % 7);
    run(&fs, 20_000);
    check_reclaimed(&fs, "a remount and 20,000 more chmods");
    fs.unmount().unwrap();
}

#[test]
fn chmod_loop_log_space_is_bounded_dram() {
    chmod_loop_is_bounded(Durability::Dram);
}

#[test]
fn chmod_loop_log_space_is_bounded_file() {
    chmod_loop_is_bounded(Durability::File);
}

const FILES: usize = 3;
/// Rounds per trial: each ends with every thread joined and checked.
const ROUNDS: u32 = 10;

/// Every inode in `expected` has the (mode, uid) set last.
fn check(fs: &Fs, expected: &[(u64, (u32, u32))], when: &str) {
    for &(ino, (mode, uid)) in expected {
        let m = fs.stat(ino).unwrap();
        assert_eq!((m.mode & 0o7777, m.uid), (mode, uid), "{when}: inode {ino}");
    }
}

fn one_trial(durability: Durability, trial: u32) {
    let o = opts(durability);
    let (_d, pool, fs) = fresh_with(64 << 20, &o);
    let fs = Arc::new(fs);
    fs.create_dir("/d").unwrap();
    let d = fs.metadata("/d").unwrap().ino;
    let files: Vec<u64> = (0..FILES)
        .map(|i| {
            let p = format!("/d/f{i}");
            fs.write(&p, &[1u8; 5000]).unwrap();
            fs.metadata(&p).unwrap().ino
        })
        .collect();
    // Many names make each directory compaction long (a wide window for a
    // racing chmod).
    for i in 0..200 {
        fs.write(format!("/d/static{i}"), b"s").unwrap();
    }
    let mut expected: Vec<(u64, (u32, u32))> = Vec::new();
    for round in 0..ROUNDS {
        let stop = Arc::new(AtomicBool::new(false));
        let mut handles = Vec::new();
        // Churn: creates and unlinks in /d compact its log often.
        for t in 0..2u32 {
            let (fs, stop) = (fs.clone(), stop.clone());
            handles.push(std::thread::spawn(move || {
                let mut i = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    let p = format!("/d/churn{t}_{}", i % 40);
                    if fs.write(&p, b"c").is_ok() {
                        let _ = fs.remove_file(&p);
                    }
                    i += 1;
                }
            }));
        }
        // Writes and truncates of the files whose mode is changed below.
        {
            let (fs, stop) = (fs.clone(), stop.clone());
            handles.push(std::thread::spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let p = format!("/d/f{}", i as usize % FILES);
                    let f = manyfs::OpenOptions::new()
                        .write(true)
                        .open(&fs, &p)
                        .unwrap();
                    if i.is_multiple_of(3) {
                        f.set_len(i % 9000).unwrap();
                    } else {
                        f.write_all_at(&[i as u8; 3000], (i * 1000) % 12_000)
                            .unwrap();
                    }
                    i += 1;
                }
            }));
        }
        // The attribute changers: one per inode, so the last value set is known.
        let mut changers = Vec::new();
        for (k, &ino) in std::iter::once(&d).chain(&files).enumerate() {
            let fs = fs.clone();
            changers.push(std::thread::spawn(move || {
                let n = 100 + trial * 7 + round * 5 + k as u32 * 13;
                let mut last = (0, 0);
                for i in 0..n {
                    let mode = 0o700 | ((i + k as u32) & 0o77);
                    let uid = 1000 + i;
                    chmod(&fs, ino, mode, Some(uid));
                    last = (mode, uid);
                }
                (ino, last)
            }));
        }
        expected = changers.into_iter().map(|h| h.join().unwrap()).collect();
        stop.store(true, Ordering::Relaxed);
        for h in handles {
            h.join().unwrap();
        }
        check(
            &fs,
            &expected,
            &format!("{durability:?} trial {trial} round {round} in memory"),
        );
        let diffs = manyfs::fsck::verify(&fs).unwrap();
        assert!(
            diffs.is_empty(),
            "{durability:?} trial {trial} round {round}: verify: {diffs:?}"
        );
    }
    let fs = Arc::into_inner(fs).expect("threads joined");
    fs.unmount().unwrap();
    let fs = Fs::mount(&pool, &o).unwrap();
    check(
        &fs,
        &expected,
        &format!("{durability:?} trial {trial} after remount"),
    );
    assert!(
        manyfs::fsck::verify(&fs).unwrap().is_empty(),
        "{:?}",
        manyfs::fsck::verify(&fs)
    );
    fs.unmount().unwrap();
}

#[test]
fn chmod_races_with_compaction_and_writes_dram() {
    for trial in 0..20 {
        one_trial(Durability::Dram, trial);
    }
}

#[test]
fn chmod_races_with_compaction_and_writes_file() {
    for trial in 0..20 {
        one_trial(Durability::File, trial);
    }
}
