//! `manyfs demo`: the end-to-end job on an embedded default.

use anyhow::{Context, Result, bail};
use clap::Args;
use manyfs::{Fs, LockKind, MkfsOptions, MountOptions, OpenOptions};
use std::process::ExitCode;
use std::time::Instant;

/// Options of `manyfs demo`.
#[derive(Args)]
pub struct DemoArgs {
    /// Writer/reader threads sharing the file.
    #[arg(long, default_value_t = 4)]
    threads: usize,
    /// Bytes each thread writes (in 4 KiB blocks, to its own region).
    #[arg(long, default_value = "32M", value_parser = crate::parse_size)]
    per_thread: u64,
    /// Range lock kind.
    #[arg(long, default_value = "srl-tree")]
    lock: LockKind,
}

fn pattern(thread: u64, block: u64) -> u8 {
    (thread.wrapping_mul(31).wrapping_add(block) % 251) as u8
}

/// Call `f(thread, block)` for blocks `0..blocks` in order on each of
/// `threads` threads at once; the first error wins.
fn each_block(threads: u64, blocks: u64, f: impl Fn(u64, u64) -> Result<()> + Sync) -> Result<()> {
    std::thread::scope(|s| -> Result<()> {
        let f = &f;
        let handles: Vec<_> = (0..threads)
            .map(|th| s.spawn(move || (0..blocks).try_for_each(|b| f(th, b))))
            .collect();
        for h in handles {
            h.join().expect("demo thread")?;
        }
        Ok(())
    })
}

/// Run the demo.
pub fn run(args: &DemoArgs) -> Result<ExitCode> {
    let dir = tempfile::tempdir().context("create a temporary directory")?;
    let pool = dir.path().join("demo.pool");
    let threads = args.threads.max(1) as u64;
    let blocks = (args.per_thread / 4096).max(1);
    let size = (threads * blocks * 4096 * 3 + (64 << 20)).next_power_of_two();
    let opts = {
        let mut mo = MountOptions::default();
        mo.lock = args.lock;
        mo
    };
    println!(
        "pool        {} ({} MiB, durability {}, lock {})",
        pool.display(),
        size >> 20,
        opts.durability,
        opts.lock
    );
    let fs = Fs::mkfs(
        &pool,
        &{
            let mut mk = MkfsOptions::default();
            mk.size = size;
            mk
        },
        &opts,
    )?;
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .open(&fs, "/shared.dat")?;
    let bytes = threads * blocks * 4096;

    let t = Instant::now();
    each_block(threads, blocks, |th, b| {
        let off = (th * blocks + b) * 4096;
        file.write_at(&[pattern(th, b); 4096], off)?;
        Ok(())
    })?;
    file.sync_all()?;
    let w = t.elapsed();
    println!(
        "write       {threads} threads x {blocks} blocks of 4 KiB into one file: {:.0} MiB/s, {:.0} ops/s",
        bytes as f64 / w.as_secs_f64() / 1048576.0,
        (threads * blocks) as f64 / w.as_secs_f64()
    );
    drop(file);
    fs.unmount()?;

    let t = Instant::now();
    let fs = Fs::mount(&pool, &opts)?;
    println!(
        "remount     {:.1} ms (log replay and index rebuild)",
        t.elapsed().as_secs_f64() * 1e3
    );
    let diffs = manyfs::fsck::verify(&fs)?;
    if !diffs.is_empty() {
        bail!("memory and media disagree after remount: {diffs:?}");
    }
    let file = OpenOptions::new().read(true).open(&fs, "/shared.dat")?;
    let t = Instant::now();
    each_block(threads, blocks, |th, b| {
        let mut buf = [0u8; 4096];
        file.read_exact_at(&mut buf, (th * blocks + b) * 4096)?;
        if buf.iter().any(|&x| x != pattern(th, b)) {
            bail!("thread {th} block {b}: wrong data after remount");
        }
        Ok(())
    })?;
    let r = t.elapsed();
    println!(
        "read+verify {threads} threads: {:.0} MiB/s, every block as written",
        bytes as f64 / r.as_secs_f64() / 1048576.0
    );
    drop(file);
    fs.unmount()?;
    let report = manyfs::fsck::check(&pool)?;
    if !report.is_clean() {
        bail!("fsck: {:?}", report.errors);
    }
    println!(
        "fsck        clean: {} inodes, {} log entries, {} blocks used",
        report.inodes, report.entries, report.used_blocks
    );
    Ok(ExitCode::SUCCESS)
}
