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
    #[error(transparent)]
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
    // Here and below the OS error is part of the message rather than a
    // `#[source]`, so a one-line report of the chain names it once.
    #[error("cannot mount FUSE file system on {}: {cause}", mountpoint.display())]
    Mount {
        /// Where the mount was attempted.
        mountpoint: PathBuf,
        /// The underlying error.
        cause: std::io::Error,
    },
    /// Unmounting failed.
    #[error("cannot unmount {}: {cause}", mountpoint.display())]
    Unmount {
        /// The mount point.
        mountpoint: PathBuf,
        /// The underlying error.
        cause: std::io::Error,
    },
    /// Some other operating-system call failed.
    #[error("{context}: {cause}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        cause: std::io::Error,
    },
    /// The background daemon failed before the mount became usable.
    #[error("{0}")]
    Daemon(String),
}

impl FuseError {
    /// Shorthand for an I/O error with context.
    pub fn io(context: impl Into<String>, cause: std::io::Error) -> FuseError {
        FuseError::Io {
            context: context.into(),
            cause,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The one-line report the CLI prints for an error (`anyhow`'s `{:#}`:
    /// the error and its sources joined by `: `).
    fn chain(e: impl std::error::Error + Send + Sync + 'static) -> String {
        format!("{:#}", anyhow::Error::new(e))
    }

    #[test]
    fn a_report_names_the_cause_once() {
        let enoent = || std::io::Error::from_raw_os_error(libc::ENOENT);
        for e in [
            FuseError::io("open /dev/fuse", enoent()),
            FuseError::Mount {
                mountpoint: "/mnt".into(),
                cause: enoent(),
            },
            FuseError::Unmount {
                mountpoint: "/mnt".into(),
                cause: enoent(),
            },
        ] {
            let line = chain(e);
            assert_eq!(line.matches("No such file").count(), 1, "{line}");
        }
        let line = chain(FuseError::from(manyfs::Error::NoSpace("data")));
        assert_eq!(line.matches("no space left").count(), 1, "{line}");
    }
}
