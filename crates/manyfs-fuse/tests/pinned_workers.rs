//! `-o pin_workers`: each thread serving `/dev/fuse` is pinned to one of
//! the CPUs the process may use, new ones to the least used, so threads
//! made for concurrent callers spread over the CPUs; `pin_workers=off`
//! leaves them free. Every byte the callers wrote reads back either way.
//!
//! The mount is served from this test process, whose serving threads are
//! named `fuser-N`; their CPUs are read from `/proc/self/task`. This binary
//! has one test that mounts, so that no other mount's threads are seen.

mod common;

use std::collections::BTreeSet;
use std::fs;
use std::thread;
use std::time::Duration;

use common::*;

/// The CPUs in a `Cpus_allowed_list` value such as `0-3,6`.
fn parse_cpu_list(list: &str) -> BTreeSet<usize> {
    let mut cpus = BTreeSet::new();
    for part in list.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => cpus.extend(a.parse::<usize>().unwrap()..=b.parse().unwrap()),
            None => {
                cpus.insert(part.parse().unwrap());
            }
        }
    }
    cpus
}

/// The CPUs thread `task` (a `/proc/self/task` entry) may run on.
fn allowed_cpus(task: &std::path::Path) -> Option<BTreeSet<usize>> {
    let status = fs::read_to_string(task.join("status")).ok()?;
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?;
    Some(parse_cpu_list(line))
}

/// The CPUs each serving thread of this process may run on.
fn serving_thread_cpus() -> Vec<BTreeSet<usize>> {
    serving_thread_tasks()
        .iter()
        .filter_map(|task| allowed_cpus(task))
        .collect()
}

/// `callers` threads overwrite their own blocks of one file and read them
/// back; meanwhile the serving threads' CPUs are sampled. Returns every
/// sample.
fn write_and_sample(path: &std::path::Path, callers: usize) -> Vec<Vec<BTreeSet<usize>>> {
    let file = shared_blocks(path, callers, 8);
    let writers = spawn_block_writers(&file, callers, 8, 200);
    let mut samples = Vec::new();
    while !writers.iter().all(|w| w.is_finished()) {
        samples.push(serving_thread_cpus());
        thread::sleep(Duration::from_millis(2));
    }
    for w in writers {
        w.join().unwrap();
    }
    samples.push(serving_thread_cpus());
    samples
}

#[test]
fn serving_threads_are_pinned_and_spread_when_asked() {
    let test = "serving_threads_are_pinned_and_spread_when_asked";
    if !fuse_available(test) {
        return;
    }
    let process_cpus = allowed_cpus(std::path::Path::new("/proc/self")).unwrap();
    let s = Scratch::new();

    // Pinned: every serving thread on one CPU the process may use, and
    // once there are at least as many threads as CPUs (up to two), two
    // threads are never on the same CPU while another has none.
    let m = s.mount(&["threads=6", "uring=off", "pin_workers=on"]);
    let samples = write_and_sample(&s.mnt.join("pinned"), 8);
    let mut most_cpus = 0;
    for threads in &samples {
        let mut used = BTreeSet::new();
        for cpus in threads {
            if process_cpus.len() > 1 {
                assert_eq!(cpus.len(), 1, "a serving thread may run on {cpus:?}");
                assert!(cpus.is_subset(&process_cpus), "{cpus:?} / {process_cpus:?}");
            }
            used.extend(cpus.iter().copied());
        }
        most_cpus = most_cpus.max(used.len());
    }
    if process_cpus.len() > 1 {
        let most_threads = samples.iter().map(Vec::len).max().unwrap();
        if most_threads >= 2 {
            assert!(
                most_cpus >= 2,
                "{most_threads} serving threads, all on one CPU"
            );
        }
    }
    unmount(m);

    // Free: the serving threads may run wherever the process may.
    let m = s.mount(&["threads=6", "uring=off", "pin_workers=off"]);
    for threads in write_and_sample(&s.mnt.join("free"), 4) {
        for cpus in threads {
            assert_eq!(cpus, process_cpus);
        }
    }
    unmount(m);
    s.fsck();
}

#[test]
fn cpu_lists_parse() {
    assert_eq!(parse_cpu_list("0-1\n"), BTreeSet::from([0, 1]));
    assert_eq!(parse_cpu_list("0-2,5"), BTreeSet::from([0, 1, 2, 5]));
    assert_eq!(parse_cpu_list("7"), BTreeSet::from([7]));
}
