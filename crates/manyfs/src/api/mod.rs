//! The public API, shaped like `std::fs`: an [`Fs`] handle, [`File`]s that
//! many threads share, [`OpenOptions`], [`Metadata`], one [`Stats`] report;
//! plus two modules for those who need more.
//!
//! - [`fs`]: [`Fs`] itself, mounting, the path-level calls, [`OpenOptions`]
//!   and [`Stats`];
//! - [`file`]: [`File`] handles;
//! - [`metadata`]: [`Metadata`], [`DirEntry`], [`StatFs`], [`SetAttr`];
//! - [`lowlevel`]: the inode-number API for file-system adapters;
//! - [`diag`]: diagnostics for tools, benchmarks and tests;
//! - `commit_thread`: the background commit of a `file` mount.

mod commit_thread;
pub mod diag;
mod file;
mod fs;
pub mod lowlevel;
mod metadata;

pub use file::{BlocksPerNode, File};
pub use fs::{Fs, MemberUsage, OpenOptions, Stats};
pub use metadata::{DirEntry, Metadata, Rename, SetAttr, StatFs};

use crate::error::{Error, Result};
use crate::namespace;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub(super) fn to_ns(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

pub(super) fn from_ns(ns: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(ns)
}

/// Symlink targets as `symlink(2)` takes them: 1 to 4095 bytes.
pub(super) fn check_symlink_target(t: &[u8]) -> Result<()> {
    if t.is_empty() {
        return Err(Error::NotFound("empty symlink target".into()));
    }
    if t.len() > namespace::MAX_SYMLINK_TARGET {
        return Err(Error::NameTooLong(format!(
            "symlink target of {} bytes (at most {})",
            t.len(),
            namespace::MAX_SYMLINK_TARGET
        )));
    }
    Ok(())
}

pub(super) fn path_bytes(p: &Path) -> &[u8] {
    p.as_os_str().as_bytes()
}
