//! The error type of the FUSE adapter and of `manyfs mount`.

use std::path::PathBuf;

/// Result alias used by the adapter.
pub type Result<T, E = FuseError> = std::result::Result<T, E>;

/// Everything that can go wrong while mounting or serving a manyfs pool
/// through FUSE. Each variant prints as one readable line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FuseError {
    /// The library refused (busy pool, corrupt pool, bad options, ...).
    #[error("{0}")]
    Fs(#[from] manyfs::Error),
    /// The mount point does not exist.
    #[error("{0}: mount point does not exist")]
    NoMountpoint(PathBuf),
    /// The mount point is not a directory.
    #[error("{0}: mount point is not a directory")]
    MountpointNotDir(PathBuf),
    /// The pool file does not exist.
    #[error("{0}: pool does not exist (create it with `manyfs mkfs`)")]
    NoPool(PathBuf),
    /// A `-o` option is unknown or has a bad value.
    #[error("bad mount option `{option}`: {reason}")]
    BadOption {
        /// The option as given.
        option: String,
        /// Why it was refused.
        reason: String,
    },
    /// The kernel (or fusermount3) refused the FUSE mount.
    #[error("cannot mount FUSE file system on {mountpoint}: {source}")]
    Mount {
        /// Where the mount was attempted.
        mountpoint: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Unmounting failed.
    #[error("cannot unmount {mountpoint}: {source}")]
    Unmount {
        /// The mount point.
        mountpoint: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Some other operating-system call failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The background daemon failed before the mount became usable.
    #[error("{0}")]
    Daemon(String),
}

impl FuseError {
    /// Shorthand for an I/O error with context.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> FuseError {
        FuseError::Io {
            context: context.into(),
            source,
        }
    }

    /// Shorthand for a refused `-o` option.
    pub fn bad_option(option: impl Into<String>, reason: impl Into<String>) -> FuseError {
        FuseError::BadOption {
            option: option.into(),
            reason: reason.into(),
        }
    }
}
