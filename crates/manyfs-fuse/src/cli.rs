//! `manyfs mount POOL MOUNTPOINT [--foreground] [-o opt,opt]`.
//!
//! Without `--foreground` the command starts itself again in the background
//! (same executable, `--foreground`, a new process group, `/` as working
//! directory) and waits for that daemon to report on a pipe that the mount is
//! usable (or why it is not). It then checks that the mount point now shows a
//! different file system and exits 0, leaving the daemon serving.
//!
//! In the foreground, SIGINT and SIGTERM unmount cleanly: the kernel mount
//! goes away, the serving threads stop and the library is unmounted
//! (flushed) before the process exits.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use manyfs::Fs;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::error::{FuseError, Result};
use crate::options::FuseConfig;
use crate::session::{ReadySession, Unmounter, check_mountpoint};

/// Environment variable that asks a foreground mount to report readiness on
/// its standard output (one line: `ready` or `error: ...`).
pub const NOTIFY_ENV: &str = "MANYFS_MOUNT_NOTIFY";

/// How long the background parent waits for the daemon to become ready.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// Arguments of `manyfs mount`.
#[derive(Debug, Clone, clap::Args)]
pub struct MountArgs {
    /// The pool file (made by `manyfs mkfs`).
    pub pool: PathBuf,
    /// An existing directory to mount on.
    pub mountpoint: PathBuf,
    /// Serve in this process until unmounted (umount, `fusermount3 -u`) or
    /// interrupted (SIGINT/SIGTERM unmount cleanly).
    #[arg(short = 'f', long)]
    pub foreground: bool,
    /// Mount options, comma-separated, repeatable (`--help` lists them;
    /// docs/mount.md says more).
    #[arg(
        short = 'o',
        value_name = "OPT[,OPT...]",
        long_help = crate::options::options_help()
    )]
    pub options: Vec<String>,
}

/// Run `mount`. `reexec_prefix` are the arguments that select this command
/// in the running executable (`["mount"]` for `manyfs`, nothing for the
/// stand-alone `manyfs-mount`); the background mode starts the daemon with
/// them.
pub fn run(args: &MountArgs, reexec_prefix: &[&str]) -> Result<()> {
    let notify = std::env::var_os(NOTIFY_ENV).is_some_and(|v| v == "1");
    if args.foreground {
        let r = run_foreground(args, notify);
        if notify && let Err(e) = &r {
            report(&format!("error: {e}"));
        }
        r
    } else {
        run_background(args, reexec_prefix)
    }
}

/// Validate everything that can be checked without mounting.
fn precheck(args: &MountArgs) -> Result<FuseConfig> {
    let cfg = FuseConfig::parse_options(&args.options)?;
    check_mountpoint(&args.mountpoint)?;
    match std::fs::metadata(&args.pool) {
        Ok(_) => Ok(cfg),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(FuseError::NoPool(args.pool.clone()))
        }
        Err(e) => Err(FuseError::io(format!("{}", args.pool.display()), e)),
    }
}

/// Write one line to stdout (the readiness pipe) and flush it.
fn report(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn run_foreground(args: &MountArgs, notify: bool) -> Result<()> {
    let cfg = precheck(args)?;
    crate::log::init(cfg.debug);
    // Catch the termination signals before mounting: one that arrives while
    // mounting is kept and handled once the signal thread runs.
    let signals = Signals::new([SIGINT, SIGTERM])
        .map_err(|e| FuseError::io("installing the SIGINT/SIGTERM handlers", e))?;
    let fs = Fs::mount(&args.pool, &cfg.fs)?;
    let mut ready = ReadySession::mount(fs, &args.mountpoint, &cfg, Some(&args.pool))?;
    let unmounter = ready.unmounter();
    std::thread::Builder::new()
        .name("manyfs-signals".into())
        .spawn(move || signal_thread(signals, unmounter))
        .map_err(|e| FuseError::io("spawning the signal thread", e))?;
    // `-o uring` that the kernel does not offer: one line, on the
    // terminal of whoever ran `manyfs mount`.
    let note = ready.uring_fallback().map(|l| format!("manyfs: {l}"));
    if notify {
        // The parent prints what follows "ready " on the status line.
        report(&note.map_or_else(|| "ready".to_string(), |n| format!("ready {n}")));
        detach_stdout();
    } else {
        if let Some(n) = note {
            eprintln!("{n}");
        }
        eprintln!(
            "manyfs: serving {} on {} (Ctrl-C or `fusermount3 -u {}` to unmount)",
            args.pool.display(),
            args.mountpoint.display(),
            args.mountpoint.display()
        );
    }
    ready.run()
}

/// Point stdout at /dev/null so the parent's pipe sees end-of-file and the
/// daemon never writes to a closed pipe.
fn detach_stdout() {
    use std::os::fd::AsRawFd;
    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        // SAFETY: both descriptors are valid for the duration of the call;
        // dup2 atomically replaces fd 1, which Rust's stdout only uses
        // through its raw number.
        unsafe {
            libc::dup2(null.as_raw_fd(), libc::STDOUT_FILENO);
        }
    }
}

/// Wait for SIGINT/SIGTERM, then unmount (lazily if the mount is busy), which
/// ends the session loop in the main thread.
fn signal_thread(mut signals: Signals, mut unmounter: Unmounter) {
    let Some(sig) = signals.forever().next() else {
        return;
    };
    tracing::info!(signal = sig, "termination signal: unmounting");
    if let Err(e) = unmounter.unmount() {
        eprintln!("manyfs: {e}; detaching lazily");
        if let Err(e) = unmounter.unmount_lazy() {
            eprintln!("manyfs: {e}");
        }
    }
}

fn absolute(p: &Path) -> Result<PathBuf> {
    std::fs::canonicalize(p).map_err(|e| FuseError::io(format!("{}", p.display()), e))
}

fn run_background(args: &MountArgs, reexec_prefix: &[&str]) -> Result<()> {
    let cfg = precheck(args)?;
    let pool = absolute(&args.pool)?;
    let mountpoint = absolute(&args.mountpoint)?;
    let dev_before = std::fs::metadata(&mountpoint)
        .map_err(|e| FuseError::io(format!("{}", mountpoint.display()), e))?
        .dev();
    let exe =
        std::env::current_exe().map_err(|e| FuseError::io("finding the manyfs executable", e))?;
    let mut cmd = Command::new(exe);
    cmd.args(reexec_prefix)
        .arg(&pool)
        .arg(&mountpoint)
        .arg("--foreground");
    for o in &args.options {
        cmd.arg("-o").arg(o);
    }
    cmd.env(NOTIFY_ENV, "1")
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        // The daemon's log (`-o debug`, RUST_LOG) goes where ours goes;
        // otherwise it has nothing to say on stderr.
        .stderr(if crate::log::wanted(cfg.debug) {
            Stdio::inherit()
        } else {
            Stdio::null()
        })
        // Its own process group: a Ctrl-C meant for the shell that ran
        // `manyfs mount` does not reach the daemon.
        .process_group(0);
    let mut child = cmd
        .spawn()
        .map_err(|e| FuseError::io("starting the mount daemon", e))?;
    let Some(stdout) = child.stdout.take() else {
        return Err(FuseError::Daemon("mount daemon has no status pipe".into()));
    };
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let r = BufReader::new(stdout).read_line(&mut line).map(|_| line);
        let _ = tx.send(r);
    });
    let line = match rx.recv_timeout(READY_TIMEOUT) {
        Ok(Ok(line)) => line,
        Ok(Err(e)) => return Err(FuseError::io("reading the mount daemon's status", e)),
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(FuseError::Daemon(format!(
                "mount daemon did not become ready within {}s",
                READY_TIMEOUT.as_secs()
            )));
        }
    };
    let line = line.trim_end();
    let (line, note) = match line.split_once(' ') {
        Some(("ready", note)) => ("ready", Some(note)),
        _ => (line, None),
    };
    if let Some(note) = note {
        eprintln!("{note}");
    }
    if line == "ready" {
        let dev_after = std::fs::metadata(&mountpoint)
            .map_err(|e| FuseError::io(format!("{}", mountpoint.display()), e))?
            .dev();
        if dev_after == dev_before {
            return Err(FuseError::Daemon(format!(
                "{}: daemon reported ready but nothing is mounted there",
                mountpoint.display()
            )));
        }
        return Ok(());
    }
    let status = child.wait();
    if let Some(msg) = line.strip_prefix("error: ") {
        return Err(FuseError::Daemon(msg.to_string()));
    }
    Err(FuseError::Daemon(match status {
        Ok(s) => format!("mount daemon exited ({s}) before the mount was ready"),
        Err(e) => format!("mount daemon vanished before the mount was ready: {e}"),
    }))
}
