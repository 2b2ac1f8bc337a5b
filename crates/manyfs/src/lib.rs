//! manyfs: a user-space file system for persistent memory that keeps scaling
//! when many threads share one file.
//!
//! ```no_run
//! use manyfs::{Fs, MkfsOptions, MountOptions, OpenOptions};
//! let fs = Fs::mkfs("/tmp/demo.pool".as_ref(), &MkfsOptions::default(), &MountOptions::default())?;
//! let f = OpenOptions::new().read(true).write(true).create(true).open(&fs, "/shared")?;
//! std::thread::scope(|s| {
//!     for t in 0..4u64 {
//!         let f = &f;
//!         s.spawn(move || f.write_at(&[t as u8; 4096], t * 4096));
//!     }
//! });
//! f.sync_all()?;
//! # Ok::<(), manyfs::Error>(())
//! ```

pub mod alloc;
mod api;
pub mod core;
pub mod cpu;
pub mod crashtest;
pub mod error;
pub mod file;
pub mod fsck;
pub mod index;
pub mod inode;
pub mod layout;
pub mod lock;
pub mod log;
pub mod media;
pub mod namespace;
pub mod options;
pub mod recovery;
pub mod sync;
pub mod sync_engine;
pub mod time;

pub use api::{DirEntry, File, Fs, Metadata, OpenOptions, SetAttr, StatFs};
pub use error::{Error, Result};
pub use layout::FileKind;
pub use lock::LockKind;
pub use media::Durability;
pub use options::{MkfsOptions, MountOptions};
