//! Shared fixtures of the FUSE integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use manyfs::{Fs, MkfsOptions, MountOptions};
use manyfs_fuse::{FuseConfig, MountedFs};

/// Size of the pools the tests create (sparse files).
pub const POOL_SIZE: u64 = 512 << 20;

/// True when FUSE can be used here. Prints why a test is skipped otherwise.
/// Only a missing `/dev/fuse` skips: missing tools make the tests fail.
pub fn fuse_available(test: &str) -> bool {
    if Path::new("/dev/fuse").exists() {
        true
    } else {
        eprintln!("SKIPPED {test}: /dev/fuse is absent, cannot mount FUSE file systems here");
        false
    }
}

/// Panic (fail the test) when `tool` is not on PATH: CI installs it with
/// `scripts/install-deps.sh`.
pub fn require_tool(tool: &str) {
    let found = std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|dir| {
            let p = dir.join(tool);
            p.is_file()
        })
    });
    assert!(
        found,
        "`{tool}` is not installed: run scripts/install-deps.sh (Debian packages fuse3 fio sqlite3)"
    );
}

/// A temporary directory holding a pool and a mount point.
pub struct Scratch {
    pub dir: tempfile::TempDir,
    pub pool: PathBuf,
    pub mnt: PathBuf,
}

impl Scratch {
    /// Create the directory, make a fresh pool (left unmounted) and an
    /// empty mount point.
    pub fn new() -> Scratch {
        Scratch::with_size(POOL_SIZE)
    }

    /// Like [`Scratch::new`] with a pool of `size` bytes.
    pub fn with_size(size: u64) -> Scratch {
        let dir = tempfile::Builder::new()
            .prefix("manyfs-fuse-test")
            .tempdir()
            .expect("tempdir");
        let pool = dir.path().join("test.pool");
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).expect("mkdir mnt");
        let fs = retry_busy(|| {
            Fs::mkfs(
                &pool,
                &MkfsOptions {
                    size,
                    ..MkfsOptions::default()
                },
                &MountOptions::default(),
            )
        })
        .expect("mkfs");
        fs.unmount().expect("unmount after mkfs");
        Scratch { dir, pool, mnt }
    }

    /// Check the (unmounted) pool with the library's fsck; fail on errors.
    pub fn fsck(&self) {
        let report = retry_busy(|| manyfs::fsck::check(&self.pool)).expect("fsck");
        assert!(report.errors.is_empty(), "fsck: {:?}", report.errors);
    }

    /// Mount the pool through FUSE in this process.
    pub fn mount(&self, options: &[&str]) -> MountedFs {
        let cfg = FuseConfig::parse_options(options).expect("options");
        let fs = retry_busy(|| Fs::mount(&self.pool, &cfg.fs)).expect("library mount");
        let m = MountedFs::spawn(fs, &self.mnt, &cfg).expect("FUSE mount");
        assert!(is_mounted(&self.mnt), "mount point not in mountinfo");
        m
    }
}

/// Retry `f` while it reports a busy pool, for up to 2 s.
///
/// The library's pool lock is an `flock` on the pool's open file
/// description. When another thread of this (multi-threaded) test process
/// spawns a child (cp, fio, ...) while a pool descriptor is open, the child
/// holds a duplicate of that descriptor until its `exec`, so the lock
/// outlives the library's unmount by a few microseconds and an immediate
/// re-mount sees `Busy`. A real second mounter keeps it busy for longer.
pub fn retry_busy<T>(mut f: impl FnMut() -> manyfs::Result<T>) -> manyfs::Result<T> {
    let start = Instant::now();
    loop {
        match f() {
            Err(manyfs::Error::Busy { .. }) if start.elapsed() < Duration::from_secs(2) => {
                std::thread::sleep(Duration::from_millis(10));
            }
            r => return r,
        }
    }
}

/// Whether `dir` is a mount point listed in /proc/self/mountinfo.
pub fn is_mounted(dir: &Path) -> bool {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let want = dir.to_string_lossy().replace(' ', "\\040");
    std::fs::read_to_string("/proc/self/mountinfo")
        .map(|s| {
            s.lines()
                .any(|l| l.split(' ').nth(4).is_some_and(|mp| mp == want))
        })
        .unwrap_or(false)
}

/// Poll `cond` every 20 ms until it holds or `timeout` passes.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if cond() {
            return true;
        }
        if start.elapsed() > timeout {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Run a command, fail the test with its output if it fails, return stdout.
pub fn run_ok(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    stdout
}

/// Deterministic pseudo-random bytes (xorshift), so failures reproduce.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut v = Vec::with_capacity(len);
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        for b in x.to_le_bytes() {
            if v.len() < len {
                v.push(b);
            }
        }
    }
    v
}
