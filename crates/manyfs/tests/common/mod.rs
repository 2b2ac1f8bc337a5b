//! Helpers shared by the integration tests.
#![allow(dead_code)]

use manyfs::{File, Fs, MkfsOptions, MountOptions, OpenOptions};
use std::path::{Path, PathBuf};

/// A fresh pool of `size` bytes in a temporary directory, mounted with the
/// default options. Keep the directory alive as long as the pool is used.
pub fn fresh(size: u64) -> (tempfile::TempDir, PathBuf, Fs) {
    fresh_with(size, &MountOptions::default())
}

/// [`fresh`] with chosen mount options.
pub fn fresh_with(size: u64, opts: &MountOptions) -> (tempfile::TempDir, PathBuf, Fs) {
    let dir = tempfile::tempdir().unwrap();
    let pool = dir.path().join("pool");
    let fs = mkfs(&pool, size, opts);
    (dir, pool, fs)
}

/// Make a pool of `size` bytes (default format options) at `pool` and mount
/// it with `opts`.
pub fn mkfs(pool: &Path, size: u64, opts: &MountOptions) -> Fs {
    Fs::mkfs(
        pool,
        &MkfsOptions {
            size,
            ..Default::default()
        },
        opts,
    )
    .unwrap()
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

#[path = "../../src/test_support.rs"]
mod test_support;
#[allow(unused_imports)] // not every test binary waits on progress
pub use test_support::within;

/// The names in directory `dir`, in the order `read_dir` gives them.
pub fn dir_names(fs: &Fs, dir: &str) -> Vec<std::ffi::OsString> {
    fs.read_dir(dir)
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect()
}
