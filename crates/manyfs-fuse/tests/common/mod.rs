//! Shared fixtures of the FUSE integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use manyfs::{Fs, MkfsOptions, MountOptions};
use manyfs_fuse::{FuseConfig, MountedFs};

/// Size of the pools the tests create (sparse files).
pub const POOL_SIZE: u64 = 512 << 20;

/// Longest wait for a mount, an unmount or a daemon before a test fails
/// instead of hanging.
pub const PROGRESS_LIMIT: Duration = Duration::from_secs(60);

use manyfs_sync::testing as test_support;
#[allow(unused_imports)] // not every test binary skips
pub use test_support::{Lack, skip};

/// True when FUSE can be used here: `/dev/fuse` exists and `fusermount3` is
/// installed. Otherwise the test is skipped with the reason printed, except
/// under `CI=true`, where it fails: a CI run without FUSE must not pass
/// silently. Other missing tools always fail ([`require_tool`]).
pub fn fuse_available(test: &str) -> bool {
    let missing = if !Path::new("/dev/fuse").exists() {
        Some("/dev/fuse is absent, cannot mount FUSE file systems here")
    } else if !on_path("fusermount3") {
        Some("fusermount3 is not installed (scripts/install-deps.sh installs fuse3)")
    } else {
        None
    };
    if let Some(why) = missing {
        skip(test, Lack::Setup, why);
    }
    missing.is_none()
}

/// Whether an executable file named `tool` is on PATH.
pub fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(tool).is_file()))
}

/// Run `f` on its own thread and return its result, or fail the test with
/// "no progress after N s: `what`" when it has not finished within
/// `limit` (a hung mount or unmount would otherwise hang the whole test
/// run). A panic in `f` is passed on.
pub fn within<T: Send + 'static>(
    limit: Duration,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    let worker = std::thread::Builder::new()
        .name(format!("within: {what}"))
        .spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
            let _ = tx.send(r);
        })
        .expect("spawn a guarded thread");
    match rx.recv_timeout(limit) {
        Ok(Ok(v)) => {
            let _ = worker.join();
            v
        }
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(_) => panic!("no progress after {} s: {what}", limit.as_secs()),
    }
}

/// Unmount a test mount (failing on errors), bounded by [`PROGRESS_LIMIT`].
pub fn unmount(m: MountedFs) {
    let mnt = m.mountpoint().display().to_string();
    within(PROGRESS_LIMIT, &format!("unmounting {mnt}"), move || {
        m.unmount()
    })
    .unwrap_or_else(|e| panic!("unmounting {mnt}: {e}"));
}

/// Panic (fail the test) when `tool` is not on PATH: CI installs it with
/// `scripts/install-deps.sh`.
pub fn require_tool(tool: &str) {
    assert!(
        on_path(tool),
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
                &{
                    let mut mk = MkfsOptions::default();
                    mk.size = size;
                    mk
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

    /// Mount the pool through FUSE in this process (bounded by
    /// [`PROGRESS_LIMIT`]).
    pub fn mount(&self, options: &[&str]) -> MountedFs {
        let cfg = FuseConfig::parse_options(options).expect("options");
        let fs = retry_busy(|| Fs::mount(&self.pool, &cfg.fs)).expect("library mount");
        let mnt = self.mnt.clone();
        let what = format!("FUSE mount on {}", mnt.display());
        let m = within(PROGRESS_LIMIT, &what, move || {
            MountedFs::spawn(fs, &mnt, &cfg)
        })
        .expect("FUSE mount");
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

/// Create (or truncate) the file `path` and size it to `len` bytes, sparse.
pub fn create_sized(path: &Path, len: u64) {
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
}

/// Pseudo-random bytes from a seeded generator, so failures reproduce.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    use rand::{Rng, SeedableRng};
    let mut v = vec![0u8; len];
    rand::rngs::StdRng::seed_from_u64(seed).fill_bytes(&mut v);
    v
}

/// Unmounts (lazily) whatever is still mounted at the path when dropped,
/// so a failing test does not leave a mount behind.
pub struct Cleanup(pub PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        if is_mounted(&self.0) {
            let _ = manyfs_fuse::session::lazy_unmount(&self.0);
        }
    }
}

/// Mount through the library directly once the daemon has let go of the
/// pool, and read `name`.
pub fn read_back(pool: &Path, name: &str) -> Vec<u8> {
    let mut fs = None;
    assert!(
        wait_until(Duration::from_secs(20), || {
            fs = Fs::mount(pool, &MountOptions::default()).ok();
            fs.is_some()
        }),
        "the daemon never released the pool"
    );
    let fs = fs.unwrap();
    let data = fs.read(name).expect("read back");
    fs.unmount().unwrap();
    let report = retry_busy(|| manyfs::fsck::check(pool)).expect("fsck");
    assert!(report.errors.is_empty(), "fsck: {:?}", report.errors);
    data
}

/// A file at `path` (made empty) of `callers * blocks_each` 4 KiB blocks,
/// open for reading and writing, to share among caller threads.
pub fn shared_blocks(
    path: &Path,
    callers: usize,
    blocks_each: usize,
) -> std::sync::Arc<std::fs::File> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    file.set_len((callers * blocks_each * 4096) as u64).unwrap();
    std::sync::Arc::new(file)
}

/// This process's threads serving `/dev/fuse` (named `fuser-N`; not the
/// io_uring path's `fuser-external`), as `/proc/self/task` entries.
pub fn serving_thread_tasks() -> Vec<std::path::PathBuf> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| {
            let path = t.ok()?.path();
            let name = std::fs::read_to_string(path.join("comm")).ok()?;
            let name = name.trim_end();
            (name.starts_with("fuser-") && name != "fuser-external").then_some(path)
        })
        .collect()
}

/// Starts `callers` threads that each overwrite their own `blocks_each`
/// 4 KiB blocks of `file` `rounds` times (each block's bytes name its
/// writer and round), then check their blocks hold the last round.
pub fn spawn_block_writers(
    file: &std::sync::Arc<std::fs::File>,
    callers: usize,
    blocks_each: usize,
    rounds: u64,
) -> Vec<std::thread::JoinHandle<()>> {
    use std::os::unix::fs::FileExt;
    (0..callers)
        .map(|c| {
            let file = file.clone();
            std::thread::spawn(move || {
                for round in 1..=rounds {
                    for b in 0..blocks_each {
                        let seed = (c as u64) << 40 | round << 8 | b as u64;
                        let off = ((c * blocks_each + b) * 4096) as u64;
                        file.write_all_at(&pattern(seed, 4096), off).unwrap();
                    }
                }
                for b in 0..blocks_each {
                    let seed = (c as u64) << 40 | rounds << 8 | b as u64;
                    let off = ((c * blocks_each + b) * 4096) as u64;
                    let mut got = vec![0u8; 4096];
                    file.read_exact_at(&mut got, off).unwrap();
                    assert!(got == pattern(seed, 4096), "caller {c} block {b}");
                }
            })
        })
        .collect()
}
