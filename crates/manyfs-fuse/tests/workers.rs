//! The mount's serving threads are made as callers need them: a lone
//! caller is served by one or two, concurrent callers grow the pool up to
//! `threads=N` and never past it, idle threads end after `worker_idle`,
//! and every byte the callers wrote reads back.
//!
//! The mount is served from this test process, whose serving threads are
//! named `fuser-N`; they are counted in `/proc/self/task`. This binary has
//! one test so that no other mount's threads are counted.

mod common;

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use common::*;

const BLOCK: usize = 4096;

/// Serving threads of this process now.
fn serving_threads() -> usize {
    serving_thread_tasks().len()
}

/// `callers` threads each overwrite their own 4 KiB blocks of one shared
/// file (each block's bytes name its writer and round) until `stop`, then
/// each checks its blocks hold its last round. Returns the most serving
/// threads seen meanwhile.
fn shared_file_writers(path: &Path, callers: usize, run_for: Duration) -> usize {
    let blocks_each = 8;
    let file = shared_blocks(path, callers, blocks_each);
    let stop = Arc::new(AtomicBool::new(false));
    let most = Arc::new(AtomicUsize::new(serving_threads()));
    let writers: Vec<_> = (0..callers)
        .map(|c| {
            let (file, stop) = (file.clone(), stop.clone());
            thread::spawn(move || {
                let mut round = 0u64;
                while !stop.load(Ordering::Relaxed) || round == 0 {
                    round += 1;
                    for b in 0..blocks_each {
                        let seed = (c as u64) << 40 | round << 8 | b as u64;
                        let off = ((c * blocks_each + b) * BLOCK) as u64;
                        file.write_all_at(&pattern(seed, BLOCK), off).unwrap();
                    }
                }
                for b in 0..blocks_each {
                    let seed = (c as u64) << 40 | round << 8 | b as u64;
                    let off = ((c * blocks_each + b) * BLOCK) as u64;
                    let mut got = vec![0u8; BLOCK];
                    file.read_exact_at(&mut got, off).unwrap();
                    assert!(got == pattern(seed, BLOCK), "caller {c} block {b}");
                }
                round
            })
        })
        .collect();
    let end = Instant::now() + run_for;
    while Instant::now() < end {
        most.fetch_max(serving_threads(), Ordering::Relaxed);
        thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        assert!(w.join().unwrap() > 0);
    }
    most.load(Ordering::Relaxed)
}

#[test]
fn serving_threads_follow_the_callers_within_the_limit() {
    let test = "serving_threads_follow_the_callers_within_the_limit";
    if !fuse_available(test) {
        return;
    }
    let s = Scratch::new();
    // Through /dev/fuse: over io_uring (where the kernel offers it) the
    // requests go to per-CPU queue threads instead.
    let m = s.mount(&["threads=6", "worker_idle=0.5", "uring=off"]);
    let file = s.mnt.join("shared");
    assert!(serving_threads() <= 2, "{} at the start", serving_threads());

    // A lone caller: the one or two threads kept reading serve it.
    let most = shared_file_writers(&file, 1, Duration::from_millis(600));
    assert!(most <= 2, "a lone caller was served by {most} threads");

    // Twelve callers: the pool grows (a caller finds every thread busy),
    // never past threads=6.
    let mut grew = 0;
    for _ in 0..5 {
        grew = grew.max(shared_file_writers(&file, 12, Duration::from_millis(800)));
        if grew > 2 {
            break;
        }
    }
    assert!(
        grew > 2 && grew <= 6,
        "12 callers saw {grew} threads (limit 6)"
    );
    assert!(serving_threads() <= 6);

    // Idle again: the threads beyond the two kept reading end.
    assert!(
        wait_until(Duration::from_secs(10), || serving_threads() <= 2),
        "{} threads 10 s after the callers stopped (worker_idle=0.5)",
        serving_threads()
    );
    // And the pool grows again when needed.
    let again = shared_file_writers(&file, 12, Duration::from_millis(800));
    assert!(again <= 6);
    let len = File::open(&file).unwrap().metadata().unwrap().len();
    assert_eq!(len, (12 * 8 * BLOCK) as u64);

    unmount(m);
    assert!(
        wait_until(Duration::from_secs(10), || serving_threads() == 0),
        "{} serving threads left after unmount",
        serving_threads()
    );
    s.fsck();
}
