//! Append cost against log length: 1,000,000 small appends to one file
//! whose log has two sub-logs in use (a thread pinned to another CPU
//! appended first, leaving a page at its sub-log's tail that later appends
//! make dead). Prints the append rate of the first and the last 100,000.
//!
//! `cargo run --release -p manyfs --example append_cost [records] [record bytes]`

use manyfs::{Durability, Fs, MkfsOptions, MountOptions, OpenOptions};
use std::time::Instant;

fn pin(cpu: usize) {
    // Where the kernel refuses, the thread runs unpinned: the two sub-logs
    // then depend on the scheduler.
    let _ = manyfs::diag::affinity::set(0, &[cpu]);
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().map_or(1_000_000, |a| a.parse().unwrap());
    let rec: usize = args.next().map_or(100, |a| a.parse().unwrap());
    let window = (n / 10).max(1);
    let dir = tempfile::tempdir().unwrap();
    let pool = dir.path().join("pool");
    let fs = Fs::mkfs(
        &pool,
        &{
            let mut mk = MkfsOptions::default();
            mk.size = (n * rec as u64 * 2).max(256 << 20) + (256 << 20);
            mk
        },
        &{
            let mut mo = MountOptions::default();
            mo.durability = Durability::Dram;
            mo
        },
    )
    .unwrap();
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .open(&fs, "/log")
        .unwrap();
    let cpus = std::thread::available_parallelism().map_or(1, |c| c.get());
    let record = vec![0x5au8; rec];
    // Another CPU's sub-log: a few appends whose entries the main thread's
    // appends supersede, so its tail page dies and stays (a tail is never
    // unlinked).
    if cpus > 1 {
        std::thread::scope(|s| {
            s.spawn(|| {
                pin(1);
                for _ in 0..8 {
                    f.append(&record).unwrap();
                }
            });
        });
    }
    pin(0);
    let mut rates = Vec::new();
    let mut t = Instant::now();
    for i in 1..=n {
        f.append(&record).unwrap();
        if i % window == 0 {
            let dt = t.elapsed().as_secs_f64();
            rates.push(window as f64 / dt);
            t = Instant::now();
        }
    }
    let (_, log_pages, data_pages) = {
        let s = fs.stats();
        (s.inodes, s.log_pages, s.data_pages)
    };
    println!(
        "{n} appends of {rec} bytes, {cpus} cpus: first {window}: {:.0}/s, last {window}: {:.0}/s ({:+.1}%); log pages {log_pages}, data pages {data_pages}",
        rates[0],
        rates[rates.len() - 1],
        (rates[rates.len() - 1] / rates[0] - 1.0) * 100.0
    );
    println!(
        "per-100k rates: {:?}",
        rates.iter().map(|r| *r as u64).collect::<Vec<_>>()
    );
    drop(f);
    fs.unmount().unwrap();
}
