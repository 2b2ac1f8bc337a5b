//! The narrow waist through which every persistent byte is written.
//!
//! A pool is a file mapped shared into the process. Nothing outside this
//! module touches the mapping with raw pointers: the rest of manyfs calls
//! the media's `store`, `nt_copy`, `flush`, `fence` and the 8-byte atomic
//! accessors, all bounds-checked against the mapping so a corrupt offset
//! read from the pool becomes an error instead of a wild access.
//!
//! Public here: the durability modes ([`Durability`]) and the
//! persist-observer seam ([`PersistObserver`], [`MediaView`]) through which
//! code outside the library (the crash explorer, fault-injection tests)
//! watches every persistence event of a mount.
//!
//! The parts, one concern each (each adds its methods to `Media`):
//! - `mapping.rs`: the member files mapped side by side into one reserved
//!   address range, and unmapping them;
//! - `files.rs`: creating, sizing, opening and locking the files;
//! - `pool/`: opening every member of a pool (checked against its member
//!   table) and its data device, creating and formatting a new pool, and
//!   the per-member records a mount reads and writes (the records' format
//!   is `crate::layout::members`);
//! - `access.rs`: bounds-checked reads, stores, non-temporal copies and
//!   8-byte atomics;
//! - `persist.rs`: flushes, fences and durability points, and the counts
//!   of what they made durable; `barrier.rs`: the durability points of a
//!   set of blocks (a sync's barriers); `flush.rs`: the CPU's cache-line
//!   flush instruction;
//! - `device.rs`: routing offsets past the mapping to a tiered pool's data
//!   device;
//! - `failure.rs`: failing the media (a failed durability point, a shrunk
//!   member) so that every later operation answers `EIO`; `sigbus.rs`:
//!   absorbing the faults of pages a shrunk file no longer backs;
//! - `numa.rs`: binding members to their NUMA node; `emulation.rs`,
//!   `remote.rs`, `bwcap.rs`: the emulated remote-access cost and
//!   bandwidth cap;
//! - `observer.rs`: the persist-observer seam.

mod access;
mod barrier;
pub(crate) mod bwcap;
mod device;
pub(crate) mod emulation;
mod failure;
mod files;
mod flush;
mod mapping;
pub(crate) mod numa;
mod observer;
mod persist;
pub(crate) mod pool;
pub(crate) mod remote;
mod sigbus;
#[cfg(test)]
mod testing;

pub use bwcap::throttled_ns as bandwidth_throttled_ns;
pub(crate) use files::{lock_exclusive, lock_shared};
pub(crate) use flush::FlushInstr;
use mapping::Member;
pub(crate) use mapping::OpenMember;
pub use observer::{MediaView, PersistObserver};
pub use persist::PersistStats;
pub use remote::charged_ns as remote_charged_ns;

use crate::error::{Error, Result};
use std::path::PathBuf;

/// Size of a CPU cache line, the unit of flushing and of failure atomicity
/// bookkeeping.
pub const CACHE_LINE: usize = 64;

/// How writes become durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// A DAX-mapped file on persistent memory (`MAP_SYNC`); durable after a
    /// cache-line flush and a fence.
    Pm,
    /// An ordinary file mapped shared; flushes and fences order stores and
    /// durability points add `msync`. Works on any disk.
    #[default]
    File,
    /// No durability at all (tmpfs emulation of PM, as the papers did).
    Dram,
}

impl std::str::FromStr for Durability {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "pm" => Ok(Durability::Pm),
            "file" => Ok(Durability::File),
            "dram" => Ok(Durability::Dram),
            other => Err(Error::InvalidArgument(format!(
                "durability mode {other:?} (expected pm, file or dram)"
            ))),
        }
    }
}

impl std::fmt::Display for Durability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Durability::Pm => "pm",
            Durability::File => "file",
            Durability::Dram => "dram",
        })
    }
}

/// A shared mapping of a pool: one member file, or several mapped side by
/// side into one reserved address range (member 0 first), so that a pool
/// offset is `base + offset` whichever member holds it.
#[derive(Debug)]
pub(crate) struct Media {
    base: *mut u8,
    len: usize,
    /// Bytes reserved at `base` (`len` rounded up to whole pages).
    reserved: usize,
    mode: Durability,
    /// `file` mode's stores go through the descriptor (see
    /// [`Media::writes_through_fd`]); decided once, from where the members lie.
    stores_via_fd: bool,
    flush: FlushInstr,
    writable: bool,
    /// Member 0's path (for messages about the whole pool).
    path: PathBuf,
    /// The member files, in pool order (`start` ascending, back to back).
    members: Vec<Member>,
    observer: Option<observer::Attached>,
    /// Set once a durability point failed: the media's state on disk is
    /// unknown from then on, so every later store and sync fails too.
    failed: std::sync::atomic::AtomicBool,
    /// Why the media failed (the first reason given), for error messages.
    failure: std::sync::OnceLock<String>,
    /// This mapping's entry in the SIGBUS fault table: a fault in a page
    /// the file no longer backs is absorbed and counted there.
    sigbus: sigbus::Registration,
    /// The emulated remote-access cost model, when the mount turned it on
    /// ([`crate::MountOptions::remote_cost`]); read-only once set.
    remote: Option<Box<remote::RemoteModel>>,
    /// The emulated NVMM bandwidth cap, when the mount turned it on
    /// ([`crate::MountOptions::bandwidth_cap`]); set before the mount
    /// shares the media.
    bwcap: Option<Box<bwcap::BandwidthModel>>,
    /// A tiered pool's data device, and the pool byte offset of its first
    /// byte (the end of the mapping): offsets from there on are read and
    /// written on the device (see `crate::tier`).
    device: Option<(crate::tier::Device, u64)>,
    /// What the pool medium was asked to make durable (`persist::P_*`
    /// indices).
    persisted: crate::cpu::Counters<4>,
}

// SAFETY: the mapping is plain shared memory; all access goes through methods
// that copy bytes or use atomics, and the file system's locks keep threads off
// each other's bytes. The raw pointer is never handed out.
unsafe impl Send for Media {}
// SAFETY: as above.
unsafe impl Sync for Media {}

/// Parse the value of an emulation option (`remote_cost=`,
/// `bandwidth_cap=`): `off` or `none` (None), `paper` or `on` (`paper`),
/// else what `parse` makes of the trimmed text; an error naming `what` and
/// the `expected` forms where it makes nothing.
pub(super) fn parse_model_option<T>(
    s: &str,
    paper: T,
    what: &str,
    expected: &str,
    parse: impl FnOnce(&str) -> Option<T>,
) -> crate::Result<Option<T>> {
    let s = s.trim();
    match s {
        "off" | "none" => Ok(None),
        "paper" | "on" => Ok(Some(paper)),
        _ => parse(s).map(Some).ok_or_else(|| {
            crate::Error::InvalidArgument(format!("{what} {s:?} (expected {expected})"))
        }),
    }
}
