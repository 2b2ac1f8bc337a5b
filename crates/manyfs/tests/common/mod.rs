//! Helpers shared by the integration tests.
#![allow(dead_code)]

use manyfs::{File, Fs, MkfsOptions, MountOptions, OpenOptions};
use std::path::PathBuf;

/// A fresh pool of `size` bytes in a temporary directory, mounted with the
/// default options. Keep the directory alive as long as the pool is used.
pub fn fresh(size: u64) -> (tempfile::TempDir, PathBuf, Fs) {
    fresh_with(size, &MountOptions::default())
}

/// [`fresh`] with chosen mount options.
pub fn fresh_with(size: u64, opts: &MountOptions) -> (tempfile::TempDir, PathBuf, Fs) {
    let dir = tempfile::tempdir().unwrap();
    let pool = dir.path().join("pool");
    let fs = Fs::mkfs(
        &pool,
        &MkfsOptions {
            size,
            ..Default::default()
        },
        opts,
    )
    .unwrap();
    (dir, pool, fs)
}

/// Open `path` for reading and writing, creating it if missing.
pub fn open_rw(fs: &Fs, path: &str) -> File {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .open(fs, path)
        .unwrap()
}

/// Run `body` on its own thread and return its result, or fail the test with
/// "no progress after N s: `what`" when it has not finished within `limit`:
/// a deadlock or lost wake-up then fails with a message instead of hanging
/// the test run. A panic in `body` is passed on unchanged.
pub fn within<T: Send + 'static>(
    limit: std::time::Duration,
    what: &str,
    body: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    let worker = std::thread::spawn(move || {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body));
        let _ = tx.send(r);
    });
    match rx.recv_timeout(limit) {
        Ok(Ok(v)) => {
            let _ = worker.join();
            v
        }
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(_) => panic!("no progress after {} s: {what}", limit.as_secs()),
    }
}
