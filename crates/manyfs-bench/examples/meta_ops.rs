//! Metadata rates of any directory, from several processes at once: each
//! process creates, stats and removes its own files, then makes and removes
//! its own directories, all in a private directory of the target.
//!
//! ```sh
//! cargo run --release -p manyfs-bench --example meta_ops -- DIR [PROCS] [FILES]
//! ```
//!
//! Prints one line per phase: `create`, `stat`, `unlink`, `mkdir`, `rmdir`,
//! with operations per second summed over the processes (total operations
//! divided by the slowest process's time for that phase). The processes are
//! forked (no threads), and start every phase together (a pipe barrier).
//! With `META_OPS_TIMES=1` each phase line also carries its start and end on
//! `CLOCK_MONOTONIC` in seconds (`mono START..END`), to match against a
//! kernel trace taken with `trace_clock` `mono` (see
//! `scripts/fuse-requests.sh`).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

const PHASES: [&str; 5] = ["create", "stat", "unlink", "mkdir", "rmdir"];

fn cpath(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).expect("path without NUL")
}

fn check(rc: libc::c_int, what: &str, p: &Path) {
    if rc < 0 {
        panic!(
            "{what} {}: {}",
            p.display(),
            std::io::Error::last_os_error()
        );
    }
}

/// One phase over `names`: the operation on every name.
fn phase(phase: &str, names: &[CString], paths: &[PathBuf]) {
    for (c, p) in names.iter().zip(paths) {
        // SAFETY: `c` is a valid NUL-terminated path; `st` is a valid
        // out-parameter for stat; the descriptor from open is closed here.
        unsafe {
            match phase {
                "create" => {
                    let fd = libc::open(
                        c.as_ptr(),
                        libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY,
                        0o644,
                    );
                    check(fd, "create", p);
                    libc::close(fd);
                }
                "stat" => {
                    let mut st: libc::stat = std::mem::zeroed();
                    check(libc::stat(c.as_ptr(), &mut st), "stat", p);
                }
                "unlink" => check(libc::unlink(c.as_ptr()), "unlink", p),
                "mkdir" => check(libc::mkdir(c.as_ptr(), 0o755), "mkdir", p),
                _ => check(libc::rmdir(c.as_ptr()), "rmdir", p),
            }
        }
    }
}

/// Body of one forked process: waits on `go` before each phase, reports
/// each phase's nanoseconds on `done`.
fn child(dir: &Path, files: usize, go: libc::c_int, done: libc::c_int) -> ! {
    std::fs::create_dir_all(dir).expect("private directory");
    let paths: Vec<PathBuf> = (0..files).map(|i| dir.join(format!("f{i:06}"))).collect();
    let names: Vec<CString> = paths.iter().map(|p| cpath(p)).collect();
    for ph in PHASES {
        let mut b = [0u8; 1];
        // SAFETY: reading one byte into a valid one-byte buffer.
        assert_eq!(unsafe { libc::read(go, b.as_mut_ptr().cast(), 1) }, 1);
        let t = Instant::now();
        phase(ph, &names, &paths);
        let ns = (t.elapsed().as_nanos() as u64).to_ne_bytes();
        // SAFETY: writing eight bytes from a valid eight-byte buffer; a pipe
        // write of at most PIPE_BUF bytes is atomic.
        assert_eq!(unsafe { libc::write(done, ns.as_ptr().cast(), 8) }, 8);
    }
    std::fs::remove_dir(dir).expect("remove private directory");
    // SAFETY: _exit ends the forked process without running the parent's
    // destructors or atexit handlers twice.
    unsafe { libc::_exit(0) }
}

fn pipe() -> (libc::c_int, libc::c_int) {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid two-element array for pipe(2).
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe");
    (fds[0], fds[1])
}

/// `CLOCK_MONOTONIC` now, in seconds.
fn mono() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-parameter for clock_gettime.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// `DIR [PROCS] [FILES]`, or one line on stderr and exit status 2.
fn parse_args() -> (PathBuf, usize, usize) {
    const USAGE: &str = "usage: meta_ops DIR [PROCS] [FILES] (PROCS, FILES: positive numbers)";
    let args: Vec<String> = std::env::args().skip(1).collect();
    let count = |i: usize, default: usize| match args.get(i) {
        None => Some(default),
        Some(s) => s.parse().ok().filter(|&n: &usize| n > 0),
    };
    match (args.first(), count(1, 2), count(2, 2000)) {
        (Some(dir), Some(procs), Some(files)) if args.len() <= 3 => {
            (PathBuf::from(dir), procs, files)
        }
        _ => {
            eprintln!("meta_ops: {USAGE}");
            std::process::exit(2);
        }
    }
}

fn main() {
    let (root, procs, files) = parse_args();
    let base = root.join(format!("meta_ops.{}", std::process::id()));
    std::fs::create_dir(&base).expect("base directory");
    let (go_r, go_w) = pipe();
    let (done_r, done_w) = pipe();
    let mut pids = Vec::new();
    for p in 0..procs {
        // SAFETY: the process is single-threaded here; the child only runs
        // `child`, which ends in _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork");
        if pid == 0 {
            child(&base.join(format!("p{p}")), files, go_r, done_w);
        }
        pids.push(pid);
    }
    let times = std::env::var_os("META_OPS_TIMES").is_some_and(|v| v == "1");
    for ph in PHASES {
        let start = mono();
        let go = vec![1u8; procs];
        // SAFETY: writing `procs` bytes from a valid buffer of that length.
        assert_eq!(
            unsafe { libc::write(go_w, go.as_ptr().cast(), procs) },
            procs as isize
        );
        let mut slowest = 0u64;
        for _ in 0..procs {
            let mut ns = [0u8; 8];
            // SAFETY: reading eight bytes into a valid eight-byte buffer.
            assert_eq!(unsafe { libc::read(done_r, ns.as_mut_ptr().cast(), 8) }, 8);
            slowest = slowest.max(u64::from_ne_bytes(ns));
        }
        let ops = (procs * files) as f64;
        let span = if times {
            format!("  mono {start:.6}..{:.6}", mono())
        } else {
            String::new()
        };
        println!(
            "{ph:<7} {:>10.0} ops/s  ({procs} processes x {files}){span}",
            ops / (slowest as f64 / 1e9)
        );
    }
    for pid in pids {
        let mut status = 0;
        // SAFETY: waiting for our own child with a valid status pointer.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "a process failed"
        );
    }
    std::fs::remove_dir(&base).expect("remove base directory");
}
