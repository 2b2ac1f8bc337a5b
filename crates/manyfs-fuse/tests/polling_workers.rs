//! `-o spin=MICROSECONDS`: a thread serving `/dev/fuse` that finds no
//! request waiting polls for one before it sleeps, so a lone caller's next
//! request is taken without waking a sleeping thread. Seen from here as
//! the serving threads' voluntary context switches (sleeps) per request;
//! every byte the callers wrote reads back, with one caller and with two.
//!
//! The mount is served from this test process, whose serving threads are
//! named `fuser-N` and read from `/proc/self/task`. This binary has one
//! test that mounts, so that no other mount's threads are counted.

mod common;

use std::fs;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use common::*;

const BLOCK: usize = 4096;

/// The voluntary context switches (sleeps) of this process's serving
/// threads so far.
fn serving_thread_sleeps() -> u64 {
    serving_thread_tasks()
        .iter()
        .filter_map(|task| {
            let status = fs::read_to_string(task.join("status")).ok()?;
            status
                .lines()
                .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))?
                .trim()
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// `callers` threads overwrite their own blocks of `path` `rounds` times
/// each and read the last round back.
fn overwrite_and_check(path: &std::path::Path, callers: usize, rounds: u64) {
    let file = shared_blocks(path, callers, 8);
    for w in spawn_block_writers(&file, callers, 8, rounds) {
        w.join().unwrap();
    }
}

/// Sleeps of the serving threads per request while one caller writes
/// `writes` blocks of `path` (after a warm-up longer than a worker's pause
/// after a crowded moment, 100 ms), reading each tenth back.
fn sleeps_per_write(path: &std::path::Path, writes: u64) -> f64 {
    let file = shared_blocks(path, 1, 16);
    let warm = Instant::now();
    let mut i = 0u64;
    while warm.elapsed() < Duration::from_millis(300) {
        file.write_all_at(&pattern(i, BLOCK), 0).unwrap();
        i += 1;
    }
    let before = serving_thread_sleeps();
    for w in 0..writes {
        let data = pattern(w, BLOCK);
        file.write_all_at(&data, (w % 16) * BLOCK as u64).unwrap();
        if w % 10 == 0 {
            let mut got = vec![0u8; BLOCK];
            file.read_exact_at(&mut got, (w % 16) * BLOCK as u64)
                .unwrap();
            assert!(got == data, "write {w}");
        }
    }
    let requests = writes + writes.div_ceil(10);
    (serving_thread_sleeps() - before) as f64 / requests as f64
}

#[test]
fn a_polling_serving_thread_takes_a_lone_callers_requests_without_sleeping() {
    let test = "a_polling_serving_thread_takes_a_lone_callers_requests_without_sleeping";
    if !fuse_available(test) {
        return;
    }
    let s = Scratch::new();

    // One serving thread (`threads=1`), so that what is measured is the
    // poll alone. (With the default pool two threads read; both polling
    // see each request and the one that does not get it sleeps until the
    // next, so the count there depends on how the two race.)
    //
    // No poll: every request wakes the sleeping serving thread.
    let m = s.mount(&["uring=off", "threads=1", "spin=0"]);
    let sleeping = sleeps_per_write(&s.mnt.join("sleeping"), 3000);
    overwrite_and_check(&s.mnt.join("two-sleeping"), 2, 100);
    unmount(m);

    // A poll long enough for any lone caller (one second): the thread
    // finds each request by polling and never sleeps in read(2), also
    // though it is the pool's only thread and so always takes the last
    // read (which in a larger pool stops the poll for a while).
    let m = s.mount(&["uring=off", "threads=1", "spin=1000000"]);
    let polling = sleeps_per_write(&s.mnt.join("polling"), 3000);
    overwrite_and_check(&s.mnt.join("two-polling"), 2, 100);
    unmount(m);

    // The default pool with the same poll: every byte of one and of two
    // callers reads back.
    let m = s.mount(&["uring=off", "spin=1000000"]);
    let pooled = sleeps_per_write(&s.mnt.join("pooled"), 3000);
    overwrite_and_check(&s.mnt.join("two-pooled"), 2, 100);
    unmount(m);
    s.fsck();

    eprintln!(
        "serving-thread sleeps per request: one thread, spin=0 {sleeping:.2}, \
         spin=1s {polling:.2}; default pool, spin=1s {pooled:.2}"
    );
    // Without the poll a quiet machine shows 1.00. A thread preempted
    // between its reply and its next read finds the next request queued
    // and does not sleep, so a loaded one shows fewer (0.45-0.67 with
    // three busy loops on two CPUs, against 0.00-0.02 with the poll).
    assert!(
        sleeping >= 0.3,
        "without polling: {sleeping:.2} sleeps per request"
    );
    assert!(
        polling <= 0.1 && polling <= sleeping / 4.0,
        "polling: {polling:.2} sleeps per request (without: {sleeping:.2})"
    );
}
