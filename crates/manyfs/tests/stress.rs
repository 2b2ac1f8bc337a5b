//! Many threads reading and writing overlapping and disjoint ranges of one
//! file, for every lock kind. Every block carries the id of the write that
//! produced it; the checks are:
//! - no torn block: all 4096 bytes of a block come from one write;
//! - reads and the final content are serialisable: if a read (or the final
//!   file) shows write A in block x and write B in block y, and both A and B
//!   covered both x and y, then A == B.

mod common;

use manyfs::{Fs, LockKind, MountOptions};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::collections::HashMap;
use std::sync::Mutex;

const BLOCK: usize = 4096;
const BLOCKS: u64 = 48;

fn fill(id: u64, buf: &mut [u8]) {
    for blk in buf.chunks_mut(BLOCK) {
        blk[..8].copy_from_slice(&id.to_le_bytes());
        for (i, b) in blk[8..].iter_mut().enumerate() {
            *b = (id as usize).wrapping_mul(131).wrapping_add(i) as u8;
        }
    }
}

/// The write id a block holds (0 for never written), or a panic if torn.
fn block_id(blk: &[u8]) -> u64 {
    let id = u64::from_le_bytes(blk[..8].try_into().unwrap());
    if id == 0 {
        assert!(blk.iter().all(|&b| b == 0), "torn block: zero id with data");
        return 0;
    }
    for (i, b) in blk[8..].iter().enumerate() {
        assert_eq!(
            *b,
            (id as usize).wrapping_mul(131).wrapping_add(i) as u8,
            "torn block of write {id}"
        );
    }
    id
}

fn check_serialisable(first: u64, ids: &[u64], ranges: &HashMap<u64, (u64, u64)>) {
    for (i, &a) in ids.iter().enumerate() {
        for (j, &b) in ids.iter().enumerate() {
            if a == b || a == 0 || b == 0 {
                continue;
            }
            let (x, y) = (first + i as u64, first + j as u64);
            let (Some(&ra), Some(&rb)) = (ranges.get(&a), ranges.get(&b)) else {
                continue;
            };
            let covers = |r: (u64, u64), blk: u64| r.0 <= blk && blk < r.1;
            assert!(
                !(covers(ra, x) && covers(ra, y) && covers(rb, x) && covers(rb, y)),
                "blocks {x},{y} show writes {a},{b} that both covered both: not serialisable"
            );
        }
    }
}

fn run(kind: LockKind, threads: u64, ops: u64) {
    run_with(
        {
            let mut mo = MountOptions::default();
            mo.lock = kind;
            mo
        },
        threads,
        ops,
    )
}

fn run_with(opts: MountOptions, threads: u64, ops: u64) {
    let kind = format!("{}/{}", opts.lock, opts.index);
    let (_dir, pool, fs) = common::fresh_with(64 << 20, &opts);
    let file = common::open_rw(&fs, "/shared");
    file.set_len(BLOCKS * BLOCK as u64).unwrap();
    let ranges: Mutex<HashMap<u64, (u64, u64)>> = Mutex::new(HashMap::new());
    std::thread::scope(|s| {
        for t in 0..threads {
            let (file, ranges) = (&file, &ranges);
            s.spawn(move || {
                // Seeded per thread, so a failing run's operations
                // reproduce.
                let mut rng = StdRng::seed_from_u64(t + 1);
                let mut buf = vec![0u8; 4 * BLOCK];
                for op in 0..ops {
                    // Half the threads stay in their own region (disjoint),
                    // the rest roam the whole file (overlapping).
                    let (lo, span) = if t % 2 == 0 {
                        ((t / 2) * 4 % BLOCKS, 4)
                    } else {
                        (0, BLOCKS)
                    };
                    let first = lo + rng.random_range(0..span);
                    let n = rng
                        .random_range(1..=4)
                        .min(lo + span - first)
                        .min(BLOCKS - first);
                    let bytes = &mut buf[..n as usize * BLOCK];
                    if rng.random_ratio(1, 3) {
                        let n = file.read_at(bytes, first * BLOCK as u64).unwrap();
                        assert_eq!(n, bytes.len());
                        let ids: Vec<u64> = bytes.chunks(BLOCK).map(block_id).collect();
                        check_serialisable(first, &ids, &ranges.lock().unwrap());
                    } else {
                        let id = (t << 32) | (op + 1);
                        ranges.lock().unwrap().insert(id, (first, first + n));
                        fill(id, bytes);
                        file.write_at(bytes, first * BLOCK as u64).unwrap();
                    }
                }
            });
        }
    });
    let mut all = vec![0u8; BLOCKS as usize * BLOCK];
    assert_eq!(file.read_at(&mut all, 0).unwrap(), all.len());
    let ids: Vec<u64> = all.chunks(BLOCK).map(block_id).collect();
    check_serialisable(0, &ids, &ranges.lock().unwrap());
    assert!(
        manyfs::fsck::verify(&fs).unwrap().is_empty(),
        "{kind}: {:?}",
        manyfs::fsck::verify(&fs)
    );
    drop(file);
    fs.unmount().unwrap();
    // The same content after a remount.
    let fs = Fs::mount(&pool, &opts).unwrap();
    assert_eq!(
        fs.read("/shared").unwrap(),
        all,
        "{kind}: content changed across remount"
    );
}

#[test]
fn eight_threads_every_lock_kind() {
    for kind in LockKind::ALL {
        run(kind, 8, 1500);
    }
}

/// Every file-index kind (`index=cas|rw|cascade`) under the same
/// concurrent reads and writes and a remount, with the per-inode lock and
/// with SRL.
#[test]
fn eight_threads_every_index_kind() {
    for index in manyfs::IndexKind::ALL {
        for lock in [LockKind::Inode, LockKind::SrlTree] {
            run_with(
                {
                    let mut mo = MountOptions::default();
                    mo.lock = lock;
                    mo.index = index;
                    mo
                },
                8,
                300,
            );
        }
    }
}

#[test]
fn oversubscribed_srl() {
    run(LockKind::SrlTree, 32, 300);
}
