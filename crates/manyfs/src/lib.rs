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
//!
//! # Layering
//!
//! Modules depend only on modules below them (`scripts/module-graph.sh`
//! checks there is no cycle), bottom to top, all above three crates of
//! their own: manyfs-sync (atomics, locks, parking; used as `sync`),
//! manyfs-index (the file page index and its radix trees; `index`) and
//! manyfs-rangelock (range locks; `lock`):
//!
//! 1. leaves: `error`, `cpu`, `time`;
//! 2. `tier` (the data device of a tiered pool: `O_DIRECT` I/O and
//!    flushes; the media routes device blocks to it), then `media` (the narrow waist to the mapping, and the [`media::PersistObserver`] seam);
//!    `alloc` (per-CPU block and inode allocators, and the frees that wait
//!    for a sync in `file` mode);
//! 3. `layout` (the on-media format, mkfs);
//! 4. `log` (per-inode logs), `placement` (NThread: per-thread I/O accounting, the
//!    planner, the thread that moves threads, calibration; it needs only
//!    `topology`, `media`, `layout` and `error`, and sits below `core` and
//!    `file` because the read and write paths call its accounting hooks),
//!    `options`;
//! 5. `inode` (DRAM inode state: attributes, log, file and directory data);
//! 6. `core` (the inode table, allocators and media of one mount);
//! 7. `file` (read, write, truncate), then `namespace` (directories, paths,
//!    rename), then `xattr` (extended attributes) and `acl` (POSIX ACLs in
//!    their attribute form, a leaf);
//! 8. `recovery` (rebuild from media; mount-time repair), then `fsck`
//!    (checking, repair, verify) and `sync_engine` (`file`-mode syncs:
//!    barriers, durable marks, the background commit);
//! 9. `api` (the public [`Fs`], [`File`] and friends).

#![deny(missing_docs)]

pub mod acl;
mod alloc;
mod api;
mod core;
mod cpu;
mod error;
mod file;
pub mod fsck;
use manyfs_index as index;
mod inode;
pub mod layout;
use manyfs_rangelock as lock;
mod log;
pub mod media;
mod namespace;
mod options;
pub mod placement;
mod recovery;
#[cfg(all(test, feature = "shuttle"))]
mod shuttle_models;
use manyfs_sync as sync;
mod sync_engine;
#[cfg(test)]
use manyfs_sync::testing as test_support;
mod tier;
mod time;
mod topology;
mod xattr;

pub use api::{
    BlocksPerNode, DirEntry, File, Fs, MemberUsage, Metadata, OpenOptions, Rename, SetAttr, StatFs,
};
pub use error::{Error, MemberProblem, Result};
pub use index::IndexKind;
// The file index's radix trees reach exactly as far as the format's block
// and page numbers go.
const _: () = assert!(layout::KEY_LIMIT == index::KEY_LIMIT);
#[cfg(feature = "planted-bugs")]
pub use inode::EngineBug;
pub use inode::StagingStats;
pub use layout::members::{DataDevice, PoolMember};
pub use layout::{FileKind, ROOT_INO};
#[cfg(feature = "planted-bugs")]
pub use layout::{RecoveryBug, clear_recovery_bugs, plant_recovery_bug};
pub use lock::LockKind;
pub use media::{Durability, PersistStats};
pub use options::{
    BandwidthCap, Checkpoint, DEFAULT_STAGE_MAX, MAX_DIR_SHARDS, MAX_STAGE_MAX, MkfsOptions,
    MountOptions, Placement, RemoteCost, SRL_ARRAY_MAX_BYTES, Sublogs,
};
pub use placement::{
    PlacementConfig, PlacementDecision, PlacementPolicy, PlacementWindow, ThreadPlacement,
};
pub use tier::{DeviceIo, DeviceStats};
pub use topology::{Topology, TopologySpec};
pub use xattr::{XATTR_INODE_MAX, XATTR_NAME_MAX, XATTR_VALUE_MAX, XattrSet};
