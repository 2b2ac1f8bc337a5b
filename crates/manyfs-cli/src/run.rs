//! `manyfs run [--pool POOL] [--at DIR] [-o OPTIONS] -- PROGRAM ARGS...`:
//! run an unmodified program with the pool mounted inside its own process
//! at DIR. This command mounts nothing: it checks the arguments, creates
//! the pool if it is missing, and execs PROGRAM with
//! `LD_PRELOAD=libmanyfs_preload.so` and the pool, directory and options
//! in the environment; the library mounts on the program's first call
//! under DIR (see `docs/run.md`). A PROGRAM the library cannot reach (a
//! statically linked or Go program: its file calls never pass through
//! libc's functions) is refused, pointing at `manyfs mount`.

use anyhow::{Context, Result, bail};
use manyfs::{Fs, MkfsOptions};
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

/// Arguments of `manyfs run`.
#[derive(clap::Args)]
pub struct RunArgs {
    /// The pool file; created (of --size) if it does not exist.
    #[arg(long, default_value = "manyfs.pool")]
    pub pool: PathBuf,
    /// The directory the pool appears at (it need not exist in the
    /// kernel's tree, and hides what does).
    #[arg(long, default_value = "manyfs")]
    pub at: PathBuf,
    /// Size of a pool this command creates.
    #[arg(long, default_value = "1G", value_parser = crate::parse_size)]
    pub size: u64,
    /// Mount options, as `manyfs mount -o` takes them (the FUSE-only ones
    /// mean nothing here).
    #[arg(short = 'o', value_name = "OPTIONS")]
    pub options: Vec<String>,
    /// The program and its arguments.
    #[arg(required = true, last = true, value_name = "PROGRAM")]
    pub command: Vec<OsString>,
}

/// Why `manyfs run` refuses its PROGRAM.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Its file calls would bypass the library and reach the kernel,
    /// which knows no DIR.
    #[error(
        "{program}{via} {why}: its file calls under {at} would reach the kernel, which knows nothing there; mount the pool with FUSE instead (manyfs mount POOL DIR) and run it on the mount"
    )]
    Unreachable {
        /// PROGRAM as found on `PATH`.
        program: String,
        /// `: its interpreter BINARY` when a `#!` line leads to it.
        via: String,
        /// Why.
        why: manyfs_exec::Bypass,
        /// The directory the pool would appear at.
        at: String,
    },
}

/// Refuse `program` when the library cannot reach it: found on `PATH` as
/// exec finds it (a program that cannot be found or read is left to exec
/// to report).
fn check_reachable(program: &std::ffi::OsStr, at: &Path) -> Result<(), RunError> {
    let path = std::env::var_os("PATH");
    let Some(found) = manyfs_exec::find_program(program, path.as_deref()) else {
        return Ok(());
    };
    match manyfs_exec::bypass(&found) {
        None => Ok(()),
        Some(u) => Err(RunError::Unreachable {
            program: found.display().to_string(),
            via: if u.binary == found {
                String::new()
            } else {
                format!(": its interpreter {}", u.binary.display())
            },
            why: u.why,
            at: at.display().to_string(),
        }),
    }
}

/// The preload library: `$MANYFS_PRELOAD`, else beside this executable
/// (where `cargo build` and an install put it), else in its `deps/`.
fn preload_library() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("MANYFS_PRELOAD") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().context("cannot find the manyfs executable")?;
    let dir = exe.parent().unwrap_or(Path::new("/"));
    [dir.join("libmanyfs_preload.so"), dir.join("deps/libmanyfs_preload.so")]
        .into_iter()
        .find(|p| p.is_file())
        .with_context(|| {
            format!(
                "libmanyfs_preload.so is not beside {} (build it: cargo build -p manyfs-preload; or set MANYFS_PRELOAD)",
                exe.display()
            )
        })
}

fn absolute(p: &Path) -> Result<PathBuf> {
    std::path::absolute(p).with_context(|| format!("{}: cannot make it absolute", p.display()))
}

/// Run `manyfs run`: returns only on failure (the program replaces this
/// process).
pub fn run(args: &RunArgs) -> Result<()> {
    let options = args.options.join(",");
    let mount = manyfs_fuse::FuseConfig::parse_options(&[&options])
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .fs;
    let pool = absolute(&args.pool)?;
    let at = absolute(&args.at)?;
    if at == Path::new("/") {
        bail!("--at /: the pool cannot hide the whole tree");
    }
    if pool.starts_with(&at) {
        bail!(
            "{}: the pool file cannot be under --at {}",
            pool.display(),
            at.display()
        );
    }
    check_reachable(&args.command[0], &at)?;
    let lib = preload_library()?;
    if pool.exists() {
        // Mounted by another process: refuse here, naming it, rather than
        // in the program.
        Fs::mount(&pool, &mount)
            .and_then(Fs::unmount)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    } else {
        let mut mkfs = MkfsOptions::default();
        mkfs.size = args.size;
        Fs::mkfs(&pool, &mkfs, &mount)
            .and_then(Fs::unmount)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    let mut preload = OsString::from(&lib);
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|o| !o.is_empty()) {
        preload.push(":");
        preload.push(old);
    }
    let err = std::process::Command::new(&args.command[0])
        .args(&args.command[1..])
        .env("LD_PRELOAD", preload)
        .env("MANYFS_RUN_POOL", &pool)
        .env("MANYFS_RUN_AT", &at)
        .env("MANYFS_RUN_OPTIONS", &options)
        .exec();
    bail!("{}: {err}", Path::new(&args.command[0]).display())
}
