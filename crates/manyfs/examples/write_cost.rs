//! What one 4 KiB overwrite costs at one thread: DWOM's operation (one
//! block of a file rewritten again and again) on an in-process `dram`
//! pool in /dev/shm, beside `pwrite` of one block on a /dev/shm file
//! (tmpfs) and a plain 4 KiB copy into a 64 MiB buffer. Prints ns per
//! operation, best of `rounds` rounds of `n` operations each, the three
//! kinds alternated so that a noisy machine slows all of them alike.
//!
//! `cargo run --release -p manyfs --example write_cost [n] [rounds] [lib|tmpfs|memcpy|all] [dram|pm|file]`
//!
//! With a kind named, only that one runs (for `perf stat` / `perf record`).
//! The last argument is the pool's durability (default `dram`).

use manyfs::{Durability, Fs, MkfsOptions, MountOptions, OpenOptions};
use std::os::unix::fs::FileExt;
use std::time::Instant;

const BLOCK: usize = 4096;
const MEM: usize = 64 << 20;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().map_or(1_000_000, |a| a.parse().unwrap());
    let rounds: usize = args.next().map_or(5, |a| a.parse().unwrap());
    let only = args.next().filter(|k| k != "all");
    let want = |k: &str| only.as_deref().is_none_or(|o| o == k);
    let durability: Durability = args.next().map_or(Durability::Dram, |a| a.parse().unwrap());
    let _ = manyfs::diag::affinity::set(0, &[0]);
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();

    let fs = Fs::mkfs(
        &dir.path().join("pool"),
        &{
            let mut mk = MkfsOptions::default();
            mk.size = 512 << 20;
            mk
        },
        &{
            let mut mo = MountOptions::default();
            mo.durability = durability;
            mo
        },
    )
    .unwrap();
    let lib = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .open(&fs, "/shared")
        .unwrap();
    let tmpfs = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(dir.path().join("shared"))
        .unwrap();
    let buf = vec![0x5au8; BLOCK];
    lib.write_at(&buf, 0).unwrap();
    tmpfs.write_at(&buf, 0).unwrap();
    // Page-aligned, as a file system's blocks are: a `Vec` this large is
    // its own mapping with the allocator's header in front, so every 4 KiB
    // copy into it would straddle two pages and split cache lines (about
    // 1.8x slower than an aligned copy).
    let mut mem_vec = vec![1u8; MEM + BLOCK];
    let skew = mem_vec.as_ptr().align_offset(BLOCK);
    let mem = &mut mem_vec[skew..skew + MEM];

    let mut best = [f64::MAX; 3];
    for _ in 0..rounds {
        if want("lib") {
            let t = Instant::now();
            for _ in 0..n {
                lib.write_at(&buf, 0).unwrap();
            }
            best[0] = best[0].min(t.elapsed().as_nanos() as f64 / n as f64);
        }
        if want("tmpfs") {
            let t = Instant::now();
            for _ in 0..n {
                tmpfs.write_at(&buf, 0).unwrap();
            }
            best[1] = best[1].min(t.elapsed().as_nanos() as f64 / n as f64);
        }
        if want("memcpy") {
            let t = Instant::now();
            for i in 0..n as usize {
                let at = (i * BLOCK) % MEM;
                mem[at..at + BLOCK].copy_from_slice(&buf);
                std::hint::black_box(&mut *mem);
            }
            best[2] = best[2].min(t.elapsed().as_nanos() as f64 / n as f64);
        }
    }
    let lib = format!("lib ({durability} pool)");
    for (name, ns) in [lib.as_str(), "tmpfs pwrite", "memcpy 64 MiB"]
        .iter()
        .zip(best)
    {
        if ns < f64::MAX {
            println!("{name:16} {ns:8.1} ns/op");
        }
    }
}
