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
//! # The model
//!
//! - **A pool** is one file (or one file plus member files on other NUMA
//!   nodes, [`MkfsOptions::members`], and optionally a data device behind
//!   it, [`MkfsOptions::data`]) holding a whole file system: superblock,
//!   inode table, per-inode logs and data blocks. [`Fs::mkfs`] creates one;
//!   `manyfs fsck` ([`fsck`]) checks and repairs one.
//! - **A mount** ([`Fs::mount`]) maps the pool into this process and
//!   rebuilds the in-memory state from it (recovery runs on every mount). One
//!   process mounts a pool at a time; a second mount is refused with `Busy`.
//!   [`Fs`] is cheap to clone, `Send + Sync`; dropping the last handle (or
//!   [`Fs::unmount`]) syncs.
//! - **The path API** is shaped like `std::fs`: [`Fs::open`] /
//!   [`OpenOptions`] give a [`File`] that any number of threads share by
//!   reference; reads and writes of different ranges of one file run in
//!   parallel (segment range locks), as do operations in one directory.
//! - **Durability modes** ([`MountOptions::durability`], [`Durability`]):
//!   - `pm`: the pool is DAX-mapped persistent memory; every operation is
//!     durable when it returns (cache-line flush and fence), `sync_all` has
//!     nothing left to do.
//!   - `file` (the default on an ordinary disk): stores go to the page
//!     cache. [`File::sync_all`] / [`File::sync_data`] make that file's
//!     writes and its name durable (what `fsync` promises), [`Fs::sync`]
//!     makes everything durable; a background commit does the same every
//!     `commit_interval`. After a crash a file shows, per write, all of it
//!     or none of it, except an unsynced overwrite in place, which may mix
//!     old and new bytes of that file as on ext4.
//!   - `dram`: nothing is durable (the papers' emulation of PM on tmpfs).
//! - **A namespace operation** (create, link, unlink, rename, mkdir) is
//!   atomic in every mode: after a crash it happened whole or not at all;
//!   in `file` mode it is durable once a sync of the directory or of the
//!   file it names ran.
//! - **Errors** are [`Error`]; [`Error::errno`] maps each to the `errno` a
//!   kernel file system would return (`ENOENT`, `ENOSPC`, ...).
//! - **Features**: `shuttle` compiles the concurrency primitives against
//!   the shuttle model checker; `planted-bugs` (tests only) lets the crash
//!   explorer plant known bugs ([`diag`]).
//!
//! What else is public, and for whom:
//!
//! | item | for |
//! |---|---|
//! | [`Fs`], [`File`], [`OpenOptions`], [`Metadata`], [`DirEntry`], [`StatFs`], [`Error`] | every user: the file system |
//! | [`MkfsOptions`], [`MountOptions`] and their value types | creating and mounting pools |
//! | [`Stats`] ([`Fs::stats`]) | one report of counters and usage |
//! | [`lowlevel`] | file-system adapters (FUSE): the inode-number API |
//! | [`fsck`] | checking and repairing a pool that is not mounted |
//! | [`format`](mod@format) | tools, fuzzers and tests that read or craft pool images |
//! | [`acl`] | the POSIX ACL extended-attribute encoding |
//! | [`diag`] | the crash explorer, benchmarks and tests: observers, placement reports |
//!
//! Guides: the README (getting started), `docs/guarantees.md` (what each
//! mode promises after a crash, and how that is checked), `docs/mount.md`
//! (the FUSE mount), `docs/design.md` (the map of the code),
//! `docs/benchmarks.md` (current results).
//!
//! # Layering
//!
//! Modules depend only on modules below them; `cargo run -p xtask --
//! layers` (run by CI) checks that no module's children form a cycle,
//! following re-exports, and that every inherent `impl` lives in its type's
//! module. Beneath all of them are three crates of their own:
//! `manyfs-sync` (atomics, locks, parking; used as `sync`), `manyfs-index`
//! (the file page index and its radix trees; `index`) and
//! `manyfs-rangelock` (range locks; `lock`). Bottom to top:
//!
//! 1. leaves: `error`, `cpu`, `time`, `topology`;
//! 2. `tier` (the data device of a tiered pool: `O_DIRECT` I/O and
//!    flushes), then `media` (the narrow waist to the mapping, and the
//!    persistence observer seam);
//! 3. `layout` (the on-media format), `alloc` (per-CPU block and inode
//!    allocators, and the queue of frees that wait for a sync);
//! 4. `log` (per-inode logs), `placement` (NThread: per-thread I/O accounting, the planner, the
//!    thread that moves threads, calibration), `options`;
//! 5. `inode` (DRAM inode state: attributes, log, file and directory data);
//! 6. `core` (one mount's inode table, allocators and media; `core/alloc.rs`
//!    allocates through the mount, `core/sync.rs` runs the `file`-mode
//!    syncs: barriers, durable marks, deferred frees);
//! 7. `file` (read, write, truncate), then `namespace` (directories, paths,
//!    rename), then `xattr` (extended attributes) and `acl` (POSIX ACLs in
//!    their attribute form, a leaf);
//! 8. `recovery` (rebuild from media; mount-time repair);
//! 9. `api` (the public [`Fs`], [`File`] and friends, [`lowlevel`],
//!    [`diag`]), then `fsck` (checking, repair, verify), which mounts
//!    through [`Fs`].

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
mod layout;
use manyfs_rangelock as lock;
mod log;
mod media;
mod namespace;
mod options;
mod placement;
mod recovery;
#[cfg(all(test, feature = "shuttle"))]
mod shuttle_models;
use manyfs_sync as sync;
#[cfg(test)]
use manyfs_sync::testing as test_support;
mod tier;
mod time;
mod topology;
mod xattr;

pub use api::{
    DirEntry, File, Fs, MemberUsage, Metadata, OpenOptions, StatFs, Stats, diag, lowlevel,
};
pub use error::{Error, MemberProblem, Result};
pub use index::IndexKind;
// The file index's radix trees reach exactly as far as the format's block
// and page numbers go.
const _: () = assert!(layout::KEY_LIMIT == index::KEY_LIMIT);
pub use inode::StagingStats;
pub use layout::FileKind;
pub use layout::members::{DataDevice, PoolMember};
pub use lock::LockKind;
pub use media::{Durability, PersistStats};
pub use options::{
    BandwidthCap, Checkpoint, DEFAULT_STAGE_MAX, MAX_DIR_SHARDS, MAX_STAGE_MAX, MkfsOptions,
    MountOptions, Placement, RemoteCost, Sublogs,
};
pub use placement::{PlacementConfig, PlacementPolicy, ThreadPlacement};
pub use tier::{DeviceIo, DeviceStats};
pub use topology::{Topology, TopologySpec};

/// The on-media format, for tools, fuzzers and tests that read or craft
/// pool images: block and record sizes, magic numbers, and the codecs of
/// the superblock, inode records, log entries and member headers. A file
/// system user never needs it; `docs/design/format.md` describes the
/// layout.
pub mod format {
    pub use crate::layout::members::{MEMBER_SPILL_OFFSET, SPILL_RECORD_LEN, SpillRecord};
    pub use crate::layout::*;
}
