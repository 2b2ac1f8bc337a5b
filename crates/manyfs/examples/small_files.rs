//! What a one-byte file costs: DRAM per file after a mount (resident set
//! growth of the mount, divided by the files) and pool blocks per file, for
//! a given topology, plus the mount time.
//!
//! `cargo run --release -p manyfs --example small_files [files] [topology]`
//! (topology: `system` or `NxC`, e.g. `4x16` for 64 configured CPUs)
//!
//! `SMALL_FILES_KEEP=PATH` creates the pool at `PATH` and keeps it;
//! `SMALL_FILES_POOL=PATH` only mounts (and measures) an existing pool, so
//! a profiler can watch one mount: `SMALL_FILES_POOL=PATH perf record -g
//! target/release/examples/small_files N TOPOLOGY`.

use manyfs::{Durability, Fs, MkfsOptions, MountOptions, TopologySpec};
use std::time::Instant;

/// Anonymous resident memory of this process, in bytes (the pool's own
/// mapping is file-backed and not counted).
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kib * 1024
}

/// CPU time this process has used (every thread, user and system).
fn cpu_s() -> f64 {
    // SAFETY: getrusage fills the struct it is given; a zeroed rusage is
    // a valid value of it.
    let u = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    s(u.ru_utime) + s(u.ru_stime)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().map_or(50_000, |a| a.parse().unwrap());
    let topology: TopologySpec = args
        .next()
        .map_or(TopologySpec::System, |a| a.parse().unwrap());
    // The mount is measured in a fresh process (this one, run again with
    // the pool's path): memory freed by the creating mount stays with the
    // allocator and would hide what the second mount takes.
    if let Ok(pool) = std::env::var("SMALL_FILES_POOL") {
        let opts = {
            let mut mo = MountOptions::default();
            mo.durability = Durability::Dram;
            mo.topology = topology;
            mo
        };
        return measure(std::path::Path::new(&pool), n, &opts);
    }
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let pool = std::env::var_os("SMALL_FILES_KEEP")
        .map_or_else(|| dir.path().join("pool"), std::path::PathBuf::from);
    let opts = {
        let mut mo = MountOptions::default();
        mo.durability = Durability::Dram;
        mo.topology = topology;
        mo
    };
    let fs = Fs::mkfs(
        &pool,
        &{
            let mut mk = MkfsOptions::default();
            mk.size = (n * 4 * 4096).max(64 << 20);
            mk.bytes_per_inode = 4096;
            mk
        },
        &opts,
    )
    .unwrap();
    let dirs = n.div_ceil(1000);
    for d in 0..dirs {
        fs.create_dir(format!("/d{d}")).unwrap();
    }
    for i in 0..n {
        fs.write(format!("/d{}/f{i}", i / 1000), b"x").unwrap();
    }
    let st = fs.statfs();
    println!(
        "{:.2} pool blocks per file",
        (st.total_blocks - st.free_blocks) as f64 / n as f64
    );
    fs.unmount().unwrap();
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(std::env::args().skip(1))
        .env("SMALL_FILES_POOL", &pool)
        .status()
        .unwrap();
    assert!(status.success());
}

fn measure(pool: &std::path::Path, n: u64, opts: &MountOptions) {
    // `dram` pools are in /dev/shm: reading them back costs no disk time.
    let before = rss();
    let (t, cpu) = (Instant::now(), cpu_s());
    let fs = Fs::mount(pool, opts).unwrap();
    let mount_s = t.elapsed().as_secs_f64();
    let mount_cpu_s = cpu_s() - cpu;
    // Hand memory the mount freed (recovery's scratch state) back to the
    // system, so that what remains is what the mounted files hold.
    // SAFETY: malloc_trim has no preconditions.
    unsafe { libc::malloc_trim(0) };
    let after = rss();
    // Touch each file once more (stat), as a workload would.
    for i in (0..n).step_by(97) {
        fs.metadata(format!("/d{}/f{i}", i / 1000)).unwrap();
    }
    let cpus = fs.topology().cpu_count();
    println!(
        "{n} one-byte files, {cpus} configured CPUs: {:.0} bytes of DRAM per file at mount \
         (anonymous resident memory +{:.1} MiB), mount {mount_s:.2} s \
         ({mount_cpu_s:.2} s of CPU)",
        (after.saturating_sub(before)) as f64 / n as f64,
        (after.saturating_sub(before)) as f64 / (1 << 20) as f64,
    );
}
