//! The error type of the benchmark crate.

use std::path::PathBuf;

/// Result alias of the benchmark crate.
pub type Result<T, E = BenchError> = std::result::Result<T, E>;

/// Everything that can stop a benchmark run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// An operation through `std::fs` or a syscall on a `dir:` target failed.
    // The cause is part of the message rather than a `#[source]`, so a
    // one-line report of the chain (`{:#}`) does not print it twice.
    #[error("{op} {}: {cause}", path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// On which path.
        path: PathBuf,
        /// The OS error.
        cause: std::io::Error,
    },
    /// An operation on an in-process manyfs target failed.
    #[error("manyfs {op} {path}: {cause}")]
    Fs {
        /// What was being done.
        op: &'static str,
        /// On which path (inside the file system).
        path: String,
        /// The library error.
        cause: manyfs::Error,
    },
    /// A command-line style argument could not be understood.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// Data read back differs from what was written (HACCIO verification).
    #[error("verification failed: {0}")]
    Verify(String),
    /// A short read or write where a full block was expected.
    #[error("short {op}: {got} of {want} bytes at offset {offset}")]
    Short {
        /// `read` or `write`.
        op: &'static str,
        /// Bytes transferred.
        got: usize,
        /// Bytes asked for.
        want: usize,
        /// File offset.
        offset: u64,
    },
    /// Writing the plot failed.
    #[error("plot {path}: {msg}")]
    Plot {
        /// Output file.
        path: PathBuf,
        /// What went wrong.
        msg: String,
    },
    /// Serialising results to JSON failed.
    #[error("json: {0}")]
    Json(serde_json::Error),
    /// SIGINT or SIGTERM arrived; the run stopped after cleaning up.
    #[error("interrupted")]
    Interrupted,
    /// A worker thread panicked.
    #[error("worker thread panicked")]
    Panic,
}

// By hand rather than `#[from]`, which would also make the error a
// `source` and a one-line report of the chain name it twice.
impl From<serde_json::Error> for BenchError {
    fn from(e: serde_json::Error) -> Self {
        BenchError::Json(e)
    }
}

impl BenchError {
    /// Wrap an I/O error with what was done to which path.
    pub fn io(op: &'static str, path: impl Into<PathBuf>, cause: std::io::Error) -> Self {
        BenchError::Io {
            op,
            path: path.into(),
            cause,
        }
    }

    /// Wrap a manyfs error with what was done to which path.
    pub fn fs(op: &'static str, path: impl Into<String>, cause: manyfs::Error) -> Self {
        BenchError::Fs {
            op,
            path: path.into(),
            cause,
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
        let e = BenchError::fs("create", "/f0", manyfs::Error::NoSpace("data"));
        let line = chain(e);
        assert_eq!(line.matches("no space left").count(), 1, "{line}");
        let e = BenchError::io(
            "open",
            "/x",
            std::io::Error::from_raw_os_error(libc::ENOENT),
        );
        let line = chain(e);
        assert_eq!(line.matches("No such file").count(), 1, "{line}");
    }
}
