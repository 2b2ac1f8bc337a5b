//! FUSE adapter for manyfs: mount a manyfs pool so that unmodified programs
//! (`cp`, `fio`, `sqlite3`, ...) can use it.
//!
//! * [`ManyFuse`] implements [`fuser::Filesystem`] over the library's
//!   inode-level API ([`manyfs::lowlevel::InodeOps`]: `lookup`, `open_ino`, ...).
//! * [`MountedFs`] mounts an [`manyfs::Fs`] and serves it from background
//!   threads of the calling process (tests, embedding).
//! * [`cli`] is `manyfs mount`: foreground or daemon, with clean unmount on
//!   SIGINT/SIGTERM.
//! * [`poison`]: the mount shuts down (answers `EIO`) after a handler
//!   panicked; the next mount recovers from media.
//! * [`log`]: `-o debug` / `RUST_LOG` diagnostics of the daemon on stderr.
//!
//! See `docs/mount.md` for the options and the POSIX differences.

pub mod adapter;
pub mod cli;
pub mod error;
mod groups;
pub mod log;
pub mod options;
pub mod poison;
pub mod session;
pub mod uring;

pub use adapter::{FuseStats, ManyFuse};
pub use error::{FuseError, Result};
pub use options::FuseConfig;
pub use session::{MountedFs, ReadySession, Unmounter};
