//! The `manyfs` command: create, check, inspect, mount and benchmark pools.

mod bench;
mod crashtest;
mod demo;
mod mount;
mod run;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use manyfs::{Durability, Fs, MkfsOptions, MountOptions};
use std::path::PathBuf;
use std::process::ExitCode;

/// mimalloc instead of glibc's allocator: an inode made by one thread is
/// often freed by another (a create and an unlink of one directory, the
/// lock-free inode table's deferred frees), and glibc then takes the
/// making thread's arena lock, a shared line and a futex per free.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// manyfs: a persistent-memory file system that scales on one shared file.
#[derive(Parser)]
#[command(name = "manyfs", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create a new pool file, or a pool of several member files (one per
    /// NUMA node) behind one block address space.
    ///
    /// The pool file is member 0, on node 0 unless written POOL@NODE; each
    /// --member adds the next member. Mount finds the members through the
    /// pool file's member table: a relative member path is recorded
    /// relative to the pool file's directory (keep them together), an
    /// absolute one as it is.
    Mkfs {
        /// Pool file to create, optionally POOL@NODE (e.g. /pmem0/pool@0).
        /// An `@` in the file name starts the node number: name a file
        /// whose name contains `@` with its node (`a@b@0`). An existing
        /// non-empty file is refused unless --force is given.
        #[arg(value_parser = parse_pool_arg)]
        pool: PoolArg,
        /// Size of the pool file (member 0) and of every member given
        /// without a size, e.g. 1G, 512M, 65536.
        #[arg(long, default_value = "1G", value_parser = parse_size)]
        size: u64,
        /// A further member file: PATH@NODE (the size of --size) or
        /// PATH@NODE:SIZE, e.g. /pmem1/pool.1@1:64G. Repeat for each
        /// member, in order (member 1, 2, ...).
        #[arg(long = "member", value_name = "PATH@NODE[:SIZE]", value_parser = parse_member_arg)]
        members: Vec<MemberArg>,
        /// One inode per this many bytes: from 4096 (one inode per block)
        /// to the pool's size.
        #[arg(long, default_value = "16K", value_parser = parse_size)]
        bytes_per_inode: u64,
        /// Replace an existing file at POOL (its contents are lost; a pool
        /// mounted by another process is still refused).
        #[arg(long)]
        force: bool,
        /// Write zeros over the whole pool instead of only reserving it:
        /// first writes to its blocks then cost the disk file system no
        /// unwritten-extent conversion at `file`-mode syncs.
        #[arg(long)]
        zero_fill: bool,
        /// A data device: file data goes there, logs and inodes stay in the
        /// pool (a tiered pool). A file on a disk file system (created if
        /// missing and written whole with zeros) or a block device, opened
        /// with O_DIRECT. Recorded in the pool as members are; mount finds it.
        #[arg(long, value_name = "PATH")]
        data: Option<PathBuf>,
        /// Bytes of the data device to use (default: its size; required
        /// when PATH does not exist yet).
        #[arg(long, value_name = "SIZE", value_parser = parse_size, requires = "data")]
        data_size: Option<u64>,
    },
    /// Check a pool's consistency and list every problem found.
    ///
    /// Exit status (as e2fsck): 0 clean; 1 errors corrected (--repair);
    /// 4 errors left uncorrected; 8 operational error (the pool cannot be
    /// opened, read or locked, is no manyfs pool, or bad arguments).
    Fsck {
        /// Pool file.
        pool: PathBuf,
        /// Repair what the check finds: void damaged log entries, cut log
        /// chains at their last good page, void names of damaged or missing
        /// inodes, give a block owned twice to one owner, reconnect intact
        /// inodes only a damaged directory named under /lost+found, rewrite
        /// a damaged primary superblock from the backup; then complete
        /// interrupted operations and check again. Needs the pool's
        /// exclusive lock (a mounted pool is refused).
        #[arg(long)]
        repair: bool,
        /// A tiered pool's data device, where it is now if not at the path
        /// the pool records (checking only; --repair uses the recorded one).
        #[arg(long, value_name = "PATH", conflicts_with = "repair")]
        data: Option<PathBuf>,
    },
    /// Measure each NUMA node's read and write bandwidth at read ratios
    /// 100/80/60/40/20/0 % on free blocks of its pool member, and store it
    /// beside the pool (POOL.calibration) for thread placement's maxima.
    Calibrate {
        /// Pool file (not mounted elsewhere).
        pool: PathBuf,
        /// Seconds measured per read ratio and node.
        #[arg(long, default_value = "0.5")]
        seconds: f64,
        /// How the pool is mapped: pm (real persistent memory), file or dram.
        #[arg(long, default_value = "file")]
        durability: Durability,
    },
    /// Print a pool's layout and usage.
    ///
    /// Exit status: 0; 4 when the primary superblock is damaged (the
    /// layout shown is the backup's, a warning says so on stderr; `manyfs
    /// fsck --repair` rewrites the primary); 1 when the pool cannot be
    /// read.
    Inspect {
        /// Pool file.
        pool: PathBuf,
    },
    /// Write and read one shared file from several threads on a temporary
    /// pool, remount, verify and fsck it, and report throughput.
    Demo(demo::DemoArgs),
    /// Explore the images a power cut could leave during many workloads and
    /// check every one recovers to a state the workload allows.
    Crashtest(crashtest::CrashtestArgs),
    /// Benchmark in-process manyfs (each range lock) and directories with
    /// FxMark-style workloads, or the range locks themselves (--locks).
    Bench(Box<bench::BenchArgs>),
    /// Mount a pool through FUSE; returns once the mount is usable
    /// (`--foreground` keeps serving in this process).
    Mount(mount::MountArgs),
    /// Run a program with the pool mounted inside its own process at a
    /// directory (LD_PRELOAD; no daemon, no kernel mount; docs/run.md).
    Run(run::RunArgs),
}

/// `manyfs calibrate`: measure, print, store beside the pool.
fn calibrate(pool: &std::path::Path, seconds: f64, durability: Durability) -> Result<ExitCode> {
    if !(seconds > 0.0 && seconds <= 600.0) {
        anyhow::bail!("--seconds must be above 0 and at most 600");
    }
    let opts = {
        let mut mo = MountOptions::default();
        mo.durability = durability;
        mo
    };
    let fs = Fs::mount(pool, &opts).with_context(|| format!("calibrate {}", pool.display()))?;
    let c = manyfs::diag::calibrate(&fs, std::time::Duration::from_secs_f64(seconds))
        .with_context(|| format!("calibrate {}", pool.display()))?;
    fs.unmount()
        .with_context(|| format!("unmount {}", pool.display()))?;
    println!("node  read%   read MB/s  write MB/s  reads/3+writes MB/s");
    for p in &c.points {
        println!(
            "{:>4}  {:>5}  {:>10.1}  {:>10.1}  {:>19.1}",
            p.node,
            p.read_pct,
            p.read_bw as f64 / 1e6,
            p.write_bw as f64 / 1e6,
            (p.read_bw / 3 + p.write_bw) as f64 / 1e6
        );
    }
    let path = manyfs::diag::Calibration::path_for(pool);
    c.save(&path)?;
    println!("saved {}", path.display());
    Ok(ExitCode::SUCCESS)
}

/// The pool argument of `mkfs`: a path, with an optional `@NODE` suffix.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PoolArg {
    path: PathBuf,
    node: u32,
}

/// A `--member PATH@NODE[:SIZE]` argument.
#[derive(Debug, Clone, PartialEq, Eq)]
struct MemberArg {
    path: PathBuf,
    node: u32,
    size: Option<u64>,
}

fn parse_node(s: &str) -> std::result::Result<u32, String> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("node {s:?} is not a number"));
    }
    s.parse().map_err(|_| format!("node {s:?} is out of range"))
}

/// `POOL` or `POOL@NODE`. The last `@` of the file name (the last path
/// component) starts the node number, so a file whose name contains `@` is
/// written with its node (`a@b@0`); an `@` in a directory name is part of
/// the path.
fn parse_pool_arg(s: &str) -> std::result::Result<PoolArg, String> {
    if s.is_empty() {
        return Err("empty pool path".into());
    }
    let name_start = s.rfind('/').map_or(0, |i| i + 1);
    let Some(at) = s[name_start..].rfind('@').map(|i| name_start + i) else {
        return Ok(PoolArg {
            path: s.into(),
            node: 0,
        });
    };
    let (path, node) = (&s[..at], &s[at + 1..]);
    if path.len() == name_start {
        return Err(format!("{s:?}: expected POOL or POOL@NODE"));
    }
    let node = parse_node(node).map_err(|e| {
        format!(
            "{s:?}: {e}: an @ in the pool's file name starts its NUMA node (POOL@NODE); \
             name a file that contains @ with its node, e.g. \"{s}@0\""
        )
    })?;
    Ok(PoolArg {
        path: path.into(),
        node,
    })
}

/// `PATH@NODE` or `PATH@NODE:SIZE`.
fn parse_member_arg(s: &str) -> std::result::Result<MemberArg, String> {
    let bad = |why: String| {
        format!("{s:?}: {why}; expected PATH@NODE or PATH@NODE:SIZE, e.g. /pmem1/pool.1@1:64G")
    };
    let (path, rest) = s.rsplit_once('@').ok_or_else(|| bad("no @NODE".into()))?;
    if path.is_empty() {
        return Err(bad("empty path".into()));
    }
    let (node, size) = match rest.split_once(':') {
        Some((node, size)) => (
            node,
            Some(parse_size(size).map_err(|e| bad(e.to_string()))?),
        ),
        None => (rest, None),
    };
    Ok(MemberArg {
        path: path.into(),
        node: parse_node(node).map_err(bad)?,
        size,
    })
}

/// Refuse a node the topology `mount` resolves to (the machine's, or the
/// emulated one `MANYFS_TOPOLOGY` names) does not have, for a new pool's
/// `member` (0 is the pool file). The library records any node, and a
/// mount counts a node its topology lacks as `node % nodes`, so that a
/// pool made on a larger or emulated topology mounts anywhere (inspect,
/// fsck, a smaller machine); a node typed at mkfs must exist.
fn check_node(topology: &manyfs::Topology, member: usize, node: u32) -> Result<()> {
    let nodes = topology.node_count();
    if (node as usize) < nodes {
        return Ok(());
    }
    let hint = if topology.is_emulated() {
        ""
    } else {
        "; an emulated topology (MANYFS_TOPOLOGY=NxC) may have more"
    };
    anyhow::bail!(
        "pool member {member}: NUMA node {node} does not exist (the topology in use, {topology}, \
         has nodes 0 to {}){hint}",
        nodes - 1
    )
}

/// Sizes on the command line (`--size 1G`, `--bytes-per-inode 16K`): the
/// one size grammar shared by all `manyfs` tools, see
/// [`manyfs_bench::sys::parse_size`].
pub use manyfs_bench::sys::parse_size;

/// fsck exit status: clean.
const FSCK_OK: u8 = 0;
/// fsck exit status: errors corrected.
const FSCK_CORRECTED: u8 = 1;
/// fsck exit status: errors left uncorrected.
const FSCK_UNCORRECTED: u8 = 4;
/// fsck exit status: operational error.
const FSCK_OPERATIONAL: u8 = 8;

/// Why `pool`'s primary superblock does not decode, where it does not: a
/// mount then used the backup (`sb`, what it found), and a read-only mount
/// leaves the primary as it is.
fn primary_superblock_damage(
    pool: &std::path::Path,
    sb: &manyfs::format::Superblock,
) -> Result<Option<String>> {
    use manyfs::format::{BLOCK_SIZE, SUPERBLOCK_BLOCK, SUPERBLOCK_LEN, Superblock};
    use std::os::unix::fs::FileExt;
    let mut buf = [0u8; SUPERBLOCK_LEN];
    std::fs::File::open(pool)
        .and_then(|f| f.read_exact_at(&mut buf, SUPERBLOCK_BLOCK * BLOCK_SIZE))
        .with_context(|| format!("read {}", pool.display()))?;
    Ok(Superblock::decode(&buf, sb.total_blocks * BLOCK_SIZE)
        .err()
        .map(|e| e.to_string()))
}

/// Let a closed stdout end the process quietly, as it ends `ls | head`:
/// Rust ignores `SIGPIPE`, so the next `println!` after the reader went
/// away would panic instead. Not for `mount`, whose daemon must outlive
/// the terminal or pipe it was started from.
fn die_on_closed_stdout() {
    // SAFETY: resetting a signal's disposition to its default touches no
    // memory of this process; it runs before any thread is started.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() -> ExitCode {
    // fsck reports operational errors (bad arguments included) as 8, like
    // e2fsck; other commands keep clap's and anyhow's statuses.
    let first = std::env::args_os().nth(1);
    let is_fsck = first.as_deref().is_some_and(|a| a == "fsck");
    if first.as_deref().is_none_or(|a| a != "mount") {
        die_on_closed_stdout();
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if is_fsck && e.use_stderr() => {
            let _ = e.print();
            return ExitCode::from(FSCK_OPERATIONAL);
        }
        Err(e) => e.exit(),
    };
    match set_topology_from_env().and_then(|()| run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("manyfs: {e:#}");
            if is_fsck {
                ExitCode::from(FSCK_OPERATIONAL)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// `MANYFS_TOPOLOGY=NxC` runs every mount, mkfs and benchmark of this
/// process on an emulated topology of N nodes with C CPUs each (the
/// library reads no environment; the command passes it in).
fn set_topology_from_env() -> Result<()> {
    match std::env::var("MANYFS_TOPOLOGY") {
        Ok(v) if !v.trim().is_empty() => {
            let spec: manyfs::TopologySpec = v
                .parse()
                .map_err(|e| anyhow::anyhow!("MANYFS_TOPOLOGY: {e}"))?;
            manyfs::Topology::set_process_default(spec)?;
            Ok(())
        }
        _ => Ok(()),
    }
}

fn print_report(pool: &std::path::Path, report: &manyfs::fsck::Report) {
    println!(
        "{}: {} inodes ({} directories), {} log entries in {} log pages, {}/{} data blocks used",
        pool.display(),
        report.inodes,
        report.directories,
        report.entries,
        report.log_pages,
        report.used_blocks,
        report.data_blocks
    );
    for n in &report.notes {
        println!("note: {n}");
    }
    for p in &report.problems {
        println!("error: {p}");
    }
}

fn fsck(pool: &std::path::Path, repair: bool, data: Option<&std::path::Path>) -> Result<ExitCode> {
    if !repair {
        let report = manyfs::fsck::check_with_device(pool, data)
            .with_context(|| format!("fsck {}", pool.display()))?;
        print_report(pool, &report);
        if report.is_clean() {
            println!("clean");
            return Ok(ExitCode::from(FSCK_OK));
        }
        println!(
            "NOT CLEAN: {} problem(s){}",
            report.problems.len(),
            if report.is_repairable() {
                "; run fsck --repair"
            } else {
                ""
            }
        );
        return Ok(ExitCode::from(FSCK_UNCORRECTED));
    }
    let r =
        manyfs::fsck::repair::repair(pool).with_context(|| format!("repair {}", pool.display()))?;
    for p in &r.fixed {
        println!("fixed: {p}");
    }
    if !r.fixed.is_empty() {
        println!(
            "{} fix(es) in {} pass(es); checking again",
            r.fixed.len(),
            r.passes
        );
    }
    print_report(pool, &r.after);
    if !r.is_clean() {
        println!(
            "NOT CLEAN after repair: {} problem(s) left",
            r.after.problems.len()
        );
        Ok(ExitCode::from(FSCK_UNCORRECTED))
    } else if r.before.is_clean() {
        println!("clean");
        Ok(ExitCode::from(FSCK_OK))
    } else {
        println!("clean after repair");
        Ok(ExitCode::from(FSCK_CORRECTED))
    }
}

/// `manyfs inspect POOL`: geometry, members, usage; exit 4 with a warning
/// when the primary superblock is damaged (shown from the backup).
fn inspect(pool: &std::path::Path) -> Result<ExitCode> {
    let opts = {
        let mut mo = MountOptions::default();
        mo.read_only = true;
        mo.durability = Durability::File;
        mo
    };
    let fs = Fs::mount(pool, &opts).with_context(|| format!("inspect {}", pool.display()))?;
    let damage = primary_superblock_damage(pool, &manyfs::diag::superblock(&fs))?;
    {
        let sb = manyfs::diag::superblock(&fs);
        println!("pool            {}", pool.display());
        println!("format          manyfs v{}", sb.version());
        println!("block size      {}", manyfs::format::BLOCK_SIZE);
        println!("total blocks    {}", sb.total_blocks);
        println!(
            "inode table     blocks {}..{} ({} inodes)",
            sb.inode_table_start, sb.data_start, sb.inode_count
        );
        println!(
            "data region     blocks {}..{}",
            sb.data_start, sb.total_blocks
        );
        if sb.tiered() {
            let r = sb.device_data_blocks();
            println!(
                "data device     blocks {}..{} (header at block {})",
                r.start, r.end, sb.total_blocks
            );
        }
    }
    let stats = fs.stats();
    let members = &stats.members;
    println!("members         {}", members.len());
    for m in members {
        println!(
            "  member {:<3} node {:<3} blocks {}..{} ({} blocks, {} bytes), {} used, {} spills  {}",
            m.index,
            m.node,
            m.first_block,
            m.first_block + m.blocks,
            m.blocks,
            m.blocks * manyfs::format::BLOCK_SIZE,
            m.used_blocks,
            m.spills,
            m.path.display()
        );
    }
    let st = fs.statfs();
    let (inodes, log_pages, data_pages) = {
        let s = fs.stats();
        (s.inodes, s.log_pages, s.data_pages)
    };
    println!("inodes in use   {inodes} (free {})", st.free_inodes);
    println!("log pages       {log_pages}");
    println!("log arrays      {}", stats.log_arrays);
    println!("data pages      {data_pages}");
    println!(
        "free space      {} of {} blocks ({:.1}%)",
        st.free_blocks,
        st.total_blocks,
        100.0 * st.free_blocks as f64 / st.total_blocks.max(1) as f64
    );
    if let Some(why) = damage {
        eprintln!(
            "manyfs: warning: {}: the primary superblock is damaged ({why}); \
                 shown from the backup; `manyfs fsck --repair` rewrites it",
            pool.display()
        );
        return Ok(ExitCode::from(FSCK_UNCORRECTED));
    }
    Ok(ExitCode::SUCCESS)
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Mkfs {
            pool: PoolArg { path: pool, node },
            size,
            members,
            bytes_per_inode,
            force,
            zero_fill,
            data,
            data_size,
        } => {
            let members: Vec<manyfs::PoolMember> = members
                .into_iter()
                .map(|m| manyfs::PoolMember {
                    path: m.path,
                    node: m.node,
                    size: m.size.unwrap_or(size),
                })
                .collect();
            let total: u64 = size + members.iter().map(|m| m.size).sum::<u64>();
            let mount = MountOptions::default();
            let topology = manyfs::Topology::resolve(mount.topology)?;
            check_node(&topology, 0, node)?;
            for (i, m) in members.iter().enumerate() {
                check_node(&topology, i + 1, m.node)?;
            }
            let fs = match Fs::mkfs(
                &pool,
                &{
                    let mut mk = MkfsOptions::default();
                    mk.size = size;
                    mk.bytes_per_inode = bytes_per_inode;
                    mk.replace_existing = force;
                    mk.zero_fill = zero_fill;
                    mk.node = node;
                    mk.members = members;
                    mk.data = data.map(|path| manyfs::DataDevice {
                        path,
                        size: data_size,
                    });
                    mk
                },
                &mount,
            ) {
                Err(manyfs::Error::Exists(what)) => {
                    let what = what.strip_prefix("pool ").unwrap_or(&what).to_string();
                    anyhow::bail!("{what} exists; use --force to replace it")
                }
                r => r.with_context(|| format!("mkfs {}", pool.display()))?,
            };
            let st = fs.statfs();
            let n = fs.stats().members.len();
            let device = manyfs::diag::superblock(&fs).device_blocks * manyfs::format::BLOCK_SIZE;
            let direct = fs.stats().device.map(|s| s.direct);
            fs.unmount()?;
            let of = if n > 1 {
                format!(" in {n} member files")
            } else {
                String::new()
            };
            println!(
                "created {}: {} bytes{of}, {} data blocks of {} bytes, {} inodes",
                pool.display(),
                total,
                st.total_blocks,
                st.block_size,
                st.total_inodes
            );
            if let Some(direct) = direct {
                let how = if direct {
                    "O_DIRECT"
                } else {
                    "buffered: its file system refuses O_DIRECT"
                };
                println!("data device: {device} bytes ({how})");
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Fsck { pool, repair, data } => fsck(&pool, repair, data.as_deref()),
        Command::Calibrate {
            pool,
            seconds,
            durability,
        } => calibrate(&pool, seconds, durability),
        Command::Inspect { pool } => inspect(&pool),
        Command::Demo(args) => demo::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Mount(args) => mount::run(&args).map(|()| ExitCode::SUCCESS),
        Command::Run(args) => run::run(&args).map(|()| ExitCode::SUCCESS),
        Command::Crashtest(args) => crashtest::run(&args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("64K").unwrap(), 64 << 10);
        assert_eq!(parse_size("512M").unwrap(), 512 << 20);
        assert_eq!(parse_size("1G").unwrap(), 1 << 30);
        assert_eq!(parse_size("2MiB").unwrap(), 2 << 20);
        assert!(parse_size("12Q").is_err());
        assert!(parse_size("x").is_err());
        assert!(parse_size("99999999999T").is_err());
    }

    /// `-o segment=` (manyfs-fuse) and the command-line sizes (manyfs-bench,
    /// used here) are one grammar.
    #[test]
    fn mount_and_command_line_sizes_agree() {
        for s in [
            "4096",
            "64k",
            "64K",
            "64KiB",
            "512M",
            "1G",
            "1GiB",
            "2t",
            "0",
            "x",
            "",
            "12Q",
            "1.5M",
            "99999999999T",
        ] {
            assert_eq!(
                parse_size(s).ok(),
                manyfs_fuse::options::parse_size(s).ok(),
                "{s:?}"
            );
        }
    }

    #[test]
    fn pool_and_member_arguments_parse() {
        let cli = Cli::try_parse_from([
            "manyfs",
            "mkfs",
            "/pmem0/pool@2",
            "--size",
            "64M",
            "--member",
            "/pmem1/m1@1",
            "--member",
            "rel/m@2@3:128M",
        ])
        .unwrap();
        let Command::Mkfs {
            pool,
            members,
            size,
            ..
        } = cli.command
        else {
            panic!("mkfs");
        };
        assert_eq!(size, 64 << 20);
        assert_eq!(
            pool,
            PoolArg {
                path: "/pmem0/pool".into(),
                node: 2
            }
        );
        assert_eq!(
            members,
            [
                MemberArg {
                    path: "/pmem1/m1".into(),
                    node: 1,
                    size: None
                },
                MemberArg {
                    path: "rel/m@2".into(),
                    node: 3,
                    size: Some(128 << 20)
                },
            ]
        );
        assert_eq!(parse_pool_arg("plain").unwrap().node, 0);
        let err = parse_pool_arg("a@b").unwrap_err();
        assert!(err.contains("\"a@b@0\""), "{err}");
        assert_eq!(
            parse_pool_arg("a@b@0").unwrap(),
            PoolArg {
                path: "a@b".into(),
                node: 0
            },
            "a file whose name contains @ is written with its node"
        );
        assert_eq!(
            parse_pool_arg("/u@h/pool").unwrap(),
            PoolArg {
                path: "/u@h/pool".into(),
                node: 0
            },
            "an @ in a directory name is part of the path"
        );
        assert!(parse_pool_arg("/u@h/@1").is_err());
        for bad in [
            "m1",
            "m1@",
            "@1",
            "m1@x",
            "m1@1:",
            "m1@1:12Q",
            "m1@-1",
            "m1@99999999999",
            "m1@1:64M:3",
        ] {
            let err = Cli::try_parse_from(["manyfs", "mkfs", "p", "--member", bad])
                .err()
                .unwrap_or_else(|| panic!("{bad:?} should be refused"))
                .to_string();
            assert!(err.contains("PATH@NODE"), "{bad:?}: {err}");
            assert_eq!(
                err.trim_end().lines().next().map(|l| l.contains(bad)),
                Some(true),
                "{err}"
            );
        }
        assert!(parse_pool_arg("").is_err());
        assert!(parse_pool_arg("@3").is_err());
    }

    #[test]
    fn bad_sizes_are_clear_clap_errors() {
        let err = Cli::try_parse_from(["manyfs", "mkfs", "p", "--size", "12Q"])
            .err()
            .expect("12Q is not a size")
            .to_string();
        assert!(err.contains("12Q") && err.contains("e.g. 4096"), "{err}");
        match Cli::try_parse_from(["manyfs", "mkfs", "p", "--size", "512M"]) {
            Ok(Cli {
                command: Command::Mkfs { size, .. },
            }) => assert_eq!(size, 512 << 20),
            _ => panic!("512M should parse"),
        }
    }

    /// Every spelling of `manyfs bench` arguments that scripts/ and the docs
    /// use parses (the values are typed now).
    #[test]
    fn documented_bench_spellings_parse() {
        for line in [
            "-w DRBM,DWOM -t lib:srl-tree --threads 1,2 --duration 1s --repeat 3 --no-membw \
             --thread-placement advise",
            "-w DWOM,DRBM,DWOL,DRBL,HACCIO,MIX:3:1 -t lib:all,tmpfs,dir:/mnt/x --workload all",
            "-w DRBL -t lib:srl-tree --topology 2x1 --member-per-node --placement node0 \
             --placement-policy rl --sublogs one --index cascade --dir-shards 64",
            "-w DWSL -t lib:srl-tree --durability dram --pool /dev/shm/p --pool-size 256M \
             --data /var/tmp/d --data-size 512M --device-io sync,uring --stage-max 32K",
            "--segment-size 64K --stride 4K --warmup 100ms --durability pm",
            "--reproduce nthread-fig2 --bandwidth-cap paper --remote-cost 270/583",
            "--reproduce nthread-fig5 --bandwidth-cap 400M --remote-cost off --topology system",
            "--reproduce numa-fig6 --threads 1,2 --duration 300ms --stage-max 0",
        ] {
            let args = ["manyfs", "bench"]
                .into_iter()
                .chain(line.split_whitespace());
            if let Err(e) = Cli::try_parse_from(args) {
                panic!("{line}: {e}");
            }
        }
    }
}
