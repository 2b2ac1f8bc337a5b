//! The error type of the benchmark crate.

use std::path::PathBuf;

/// Result alias of the benchmark crate.
pub type Result<T, E = BenchError> = std::result::Result<T, E>;

/// Everything that can stop a benchmark run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// An operation through `std::fs` or a syscall on a `dir:` target failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// On which path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// An operation on an in-process manyfs target failed.
    #[error("manyfs {op} {path}: {source}")]
    Fs {
        /// What was being done.
        op: &'static str,
        /// On which path (inside the file system).
        path: String,
        /// The library error.
        #[source]
        source: manyfs::Error,
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
    Json(#[from] serde_json::Error),
    /// SIGINT or SIGTERM arrived; the run stopped after cleaning up.
    #[error("interrupted")]
    Interrupted,
    /// A worker thread panicked.
    #[error("worker thread panicked")]
    Panic,
}

impl BenchError {
    /// Wrap an I/O error with what was done to which path.
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        BenchError::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// Wrap a manyfs error with what was done to which path.
    pub fn fs(op: &'static str, path: impl Into<String>, source: manyfs::Error) -> Self {
        BenchError::Fs {
            op,
            path: path.into(),
            source,
        }
    }
}
