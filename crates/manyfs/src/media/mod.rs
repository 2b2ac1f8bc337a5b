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

mod barrier;
pub(crate) mod bwcap;
pub(crate) mod emulation;
mod flush;
pub(crate) mod numa;
mod observer;
pub(crate) mod remote;
mod sigbus;

pub(crate) use barrier::SYNC_UNIT;
pub use bwcap::throttled_ns as bandwidth_throttled_ns;
pub(crate) use flush::FlushInstr;
pub use observer::{MediaView, PersistObserver};
pub use remote::charged_ns as remote_charged_ns;

use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

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

/// One member file of a pool and where it lies in the pool's address
/// space.
#[derive(Debug)]
struct Member {
    /// Held open for the lifetime of the mapping: it carries the flock that
    /// keeps a second process from mounting the same pool.
    file: File,
    path: PathBuf,
    /// Byte offset of the member's first byte in the pool.
    start: u64,
    /// Bytes of the member mapped (its file may be longer: a single-file
    /// pool maps its whole file, a member of a multi-member pool its
    /// blocks).
    len: u64,
    /// The NUMA node the member's device belongs to.
    node: u32,
}

/// A member file opened (and locked) for [`Media::from_members`].
#[derive(Debug)]
pub(crate) struct OpenMember {
    /// The open, locked file.
    pub file: File,
    /// Its path (for messages).
    pub path: PathBuf,
    /// Bytes of it to map.
    pub len: u64,
    /// Its NUMA node.
    pub node: u32,
}

/// What `Media::members` tells about one member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MemberInfo {
    /// The member file's path.
    pub path: PathBuf,
    /// Byte offset of its first byte in the pool.
    pub start: u64,
    /// Its mapped length in bytes.
    pub len: u64,
    /// Its NUMA node.
    pub node: u32,
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
    /// What the pool medium was asked to make durable (`P_*` indices).
    persisted: crate::cpu::Counters<4>,
}

const P_BYTES: usize = 0;
const P_LINES: usize = 1;
const P_SYNCS: usize = 2;
const P_FULL: usize = 3;

/// What a pool's medium was asked to make durable since the mount: the
/// metadata cost of the file system's durability points, in bytes and in
/// cache lines. Counted per CPU (no shared line on the I/O path) and
/// summed when read.
///
/// What counts, by medium:
/// - `pm`: every range written back by cache-line flushes (and every
///   non-temporal copy), as the lines it covers;
/// - `dram` (emulated persistent memory): the same ranges `pm` would
///   flush, although nothing is written back;
/// - `file`: every range a ranged durability point (`msync`,
///   `sync_file_range`) hands the kernel, rounded out to whole pages: the
///   unit the kernel writes back, so an upper bound of what reached the
///   disk (only the dirty pages of a range are written).
///
/// A full sync of the whole pool (`Fs::sync`, the background commit,
/// unmount) is counted in [`PersistStats::full_syncs`] only: its bytes
/// are whatever the pool had dirty, which the file system does not know.
/// The data device's own writes and flushes are in
/// [`DeviceStats`](crate::DeviceStats).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PersistStats {
    /// The pool's medium.
    pub mode: Durability,
    /// Bytes made durable (see above for what counts per medium).
    pub bytes: u64,
    /// 64-byte cache lines those bytes cover.
    pub cache_lines: u64,
    /// Ranged durability points on the pool file (`msync` and
    /// `sync_file_range` calls, `file` mode only).
    pub syncs: u64,
    /// Full syncs of the pool, not counted in `bytes`.
    pub full_syncs: u64,
}

impl PersistStats {
    /// The counts accumulated since `earlier` (a snapshot of the same mount).
    pub fn since(&self, earlier: &PersistStats) -> PersistStats {
        PersistStats {
            mode: self.mode,
            bytes: self.bytes.saturating_sub(earlier.bytes),
            cache_lines: self.cache_lines.saturating_sub(earlier.cache_lines),
            syncs: self.syncs.saturating_sub(earlier.syncs),
            full_syncs: self.full_syncs.saturating_sub(earlier.full_syncs),
        }
    }
}

/// The 64-byte cache lines `[off, off+len)` overlaps.
fn lines_covered(off: u64, len: u64) -> u64 {
    if len == 0 {
        return 0;
    }
    let line = CACHE_LINE as u64;
    (off + len).div_ceil(line) - off / line
}

// SAFETY: the mapping is plain shared memory; all access goes through methods
// that copy bytes or use atomics, and the file system's locks keep threads off
// each other's bytes. The raw pointer is never handed out.
unsafe impl Send for Media {}
// SAFETY: as above.
unsafe impl Sync for Media {}

impl Media {
    /// Create the pool file at `path` with `size` bytes and map it,
    /// replacing an existing file (tests).
    #[cfg(test)]
    pub fn create(path: &Path, size: u64, mode: Durability) -> Result<Media> {
        Self::create_with(path, size, mode, true)
    }

    /// Create the pool file at `path` with `size` bytes and map it; an
    /// existing non-empty file at `path` is only
    /// replaced when `replace_existing`; otherwise the call fails with
    /// [`Error::Exists`] and leaves the file untouched. (The check is made
    /// under the pool's exclusive lock, so it cannot race with a mount.)
    pub fn create_with(
        path: &Path,
        size: u64,
        mode: Durability,
        replace_existing: bool,
    ) -> Result<Media> {
        let file = Self::create_file(path, size, replace_existing)?;
        Self::from_members(
            vec![OpenMember {
                file,
                path: path.to_path_buf(),
                len: size,
                node: 0,
            }],
            mode,
            true,
        )
    }

    /// Create (or replace, see [`Media::create_with`]) the file at `path`
    /// with `size` bytes reserved, locked exclusively: a pool file or one
    /// member of a pool.
    pub fn create_file(path: &Path, size: u64, replace_existing: bool) -> Result<File> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io(format!("create pool {}", path.display()), e))?;
        lock_exclusive(&file, path)?;
        if !replace_existing {
            let len = file
                .metadata()
                .map_err(|e| Error::io(format!("stat pool {}", path.display()), e))?
                .len();
            if len > 0 {
                return Err(Error::Exists(format!("pool {}", path.display())));
            }
        }
        file.set_len(0)
            .and_then(|_| file.set_len(size))
            .map_err(|e| Error::io(format!("size pool {}", path.display()), e))?;
        // Reserve the space now: a store into a hole the file system cannot
        // fill would kill the process with SIGBUS instead of returning ENOSPC.
        let len = libc::off_t::try_from(size)
            .map_err(|_| Error::InvalidArgument(format!("pool size {size} too large")))?;
        // SAFETY: posix_fallocate on a descriptor we own; no memory involved.
        let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len) };
        if rc != 0 && rc != libc::EOPNOTSUPP && rc != libc::EINVAL {
            let _ = std::fs::remove_file(path);
            return Err(Error::io(
                format!("reserve {size} bytes for pool {}", path.display()),
                std::io::Error::from_raw_os_error(rc),
            ));
        }
        Ok(file)
    }

    /// Write zeros over the whole pool file and make them durable (see
    /// `MkfsOptions::zero_fill`); through the descriptor in every mode.
    pub fn zero_fill(&self) -> Result<()> {
        use std::os::unix::fs::FileExt;
        const CHUNK: u64 = 1 << 20;
        let zeros = vec![0u8; CHUNK as usize];
        for m in &self.members {
            let mut off = 0;
            while off < m.len {
                let n = (m.len - off).min(CHUNK) as usize;
                m.file
                    .write_all_at(&zeros[..n], off)
                    .map_err(|e| Error::io(format!("zero-fill {}", m.path.display()), e))?;
                off += n as u64;
            }
            m.file
                .sync_data()
                .map_err(|e| Error::io(format!("zero-fill {}", m.path.display()), e))?;
        }
        Ok(())
    }

    /// Map an existing single-file pool. `writable == false` maps it
    /// read-only (fsck).
    #[cfg(test)]
    pub fn open(path: &Path, mode: Durability, writable: bool) -> Result<Media> {
        let file = Self::open_file(path, writable)?;
        let len = file
            .metadata()
            .map_err(|e| Error::io(format!("stat pool {}", path.display()), e))?
            .len();
        Self::from_members(
            vec![OpenMember {
                file,
                path: path.to_path_buf(),
                len,
                node: 0,
            }],
            mode,
            writable,
        )
    }

    /// Open the pool (or member) file at `path` and take its lock:
    /// exclusive when `writable`, shared otherwise (fsck).
    pub fn open_file(path: &Path, writable: bool) -> Result<File> {
        let file = OpenOptions::new()
            .read(true)
            .write(writable)
            .open(path)
            .map_err(|e| Error::io(format!("open pool {}", path.display()), e))?;
        if writable {
            lock_exclusive(&file, path)?;
        } else {
            lock_shared(&file, path)?;
        }
        Ok(file)
    }

    /// Map `members` side by side, member 0 at offset 0: one anonymous
    /// `PROT_NONE` reservation of the whole pool, each member mapped over
    /// its part with `MAP_FIXED`. Every member but the last must have a
    /// whole number of pages.
    pub fn from_members(
        members: Vec<OpenMember>,
        mode: Durability,
        writable: bool,
    ) -> Result<Media> {
        let page = page_size() as u64;
        let Some(first) = members.first() else {
            return Err(Error::InvalidArgument("a pool needs a member".into()));
        };
        let path = first.path.clone();
        let mut total: u64 = 0;
        for (i, m) in members.iter().enumerate() {
            if m.len == 0 {
                return Err(Error::corrupt(
                    m.path.display().to_string(),
                    "pool file is empty",
                ));
            }
            if i + 1 < members.len() && m.len % page != 0 {
                return Err(Error::InvalidArgument(format!(
                    "{}: member of {} bytes is not a whole number of pages",
                    m.path.display(),
                    m.len
                )));
            }
            total = total.checked_add(m.len).ok_or_else(|| {
                Error::InvalidArgument(format!("{}: pool too large", path.display()))
            })?;
        }
        let too_large = || Error::InvalidArgument(format!("{}: pool too large", path.display()));
        let len = usize::try_from(total).map_err(|_| too_large())?;
        let reserved = usize::try_from(total.div_ceil(page) * page).map_err(|_| too_large())?;
        // SAFETY: an anonymous PROT_NONE mapping at an address of the
        // kernel's choice touches no existing memory; the result is checked
        // against MAP_FAILED.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                reserved,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(Error::io(
                format!(
                    "reserve {total} bytes of address space for pool {}",
                    path.display()
                ),
                std::io::Error::last_os_error(),
            ));
        }
        let prot = if writable {
            libc::PROT_READ | libc::PROT_WRITE
        } else {
            libc::PROT_READ
        };
        let flags = if mode == Durability::Pm && writable {
            libc::MAP_SHARED_VALIDATE | libc::MAP_SYNC
        } else {
            libc::MAP_SHARED
        };
        let mut mapped = Vec::with_capacity(members.len());
        let mut start = 0u64;
        for m in members {
            // SAFETY: `base + start .. + m.len` lies inside the reservation
            // made above (the lengths sum to `total` <= `reserved`), which
            // this function owns, so MAP_FIXED replaces only our own
            // PROT_NONE pages; the descriptor is ours; the result is
            // checked against MAP_FAILED.
            let ptr = unsafe {
                libc::mmap(
                    base.cast::<u8>().add(start as usize).cast(),
                    m.len as usize,
                    prot,
                    flags | libc::MAP_FIXED,
                    m.file.as_raw_fd(),
                    0,
                )
            };
            if ptr == libc::MAP_FAILED {
                let err = std::io::Error::last_os_error();
                // SAFETY: `base`/`reserved` is the reservation made above,
                // unmapped once here (members already mapped into it go
                // with it); nothing refers into it yet.
                unsafe { libc::munmap(base, reserved) };
                let hint = if mode == Durability::Pm {
                    " (pm mode needs a DAX file system; use --durability file otherwise)"
                } else {
                    ""
                };
                return Err(Error::io(
                    format!("map pool {}{hint}", m.path.display()),
                    err,
                ));
            }
            mapped.push(Member {
                file: m.file,
                path: m.path,
                start,
                len: m.len,
                node: m.node,
            });
            start += m.len;
        }
        Ok(Media {
            base: base.cast(),
            len,
            reserved,
            mode,
            flush: FlushInstr::detect(),
            writable,
            path,
            members: mapped,
            observer: None,
            failed: std::sync::atomic::AtomicBool::new(false),
            failure: std::sync::OnceLock::new(),
            sigbus: sigbus::Registration::new(base.cast(), len),
            remote: None,
            bwcap: None,
            device: None,
            persisted: crate::cpu::Counters::new(),
        })
    }

    /// Charge every later access to a member on another node than the
    /// accessing thread's (by `topology`) with `cost` (see
    /// [`remote::RemoteModel`]).
    pub fn set_remote_cost(&mut self, cost: crate::RemoteCost, topology: crate::Topology) {
        let members = self.members.iter().map(|m| (m.start, m.len, m.node));
        self.remote = Some(Box::new(remote::RemoteModel::new(cost, topology, members)));
    }

    /// Limit every later access to each node's member to `cap` weighted
    /// bytes per second, all threads together (see
    /// [`bwcap::BandwidthModel`]).
    pub fn set_bandwidth_cap(&mut self, cap: crate::BandwidthCap, topology: crate::Topology) {
        let members = self.members.iter().map(|m| (m.start, m.len, m.node));
        self.bwcap = Some(Box::new(bwcap::BandwidthModel::new(cap, topology, members)));
    }

    /// Bind each member on tmpfs to its NUMA node's memory (`mbind`), where
    /// `topology` is the machine's and has the node; skip the others (see
    /// [`numa`]). Call before the mapping is touched. An `mbind` the kernel
    /// refuses for a real node is an error naming the member.
    pub fn bind_members(&self, topology: &crate::Topology) -> Result<()> {
        for m in &self.members {
            if let numa::Plan::Bind(node) = numa::bind_plan(&m.path, m.node, topology) {
                // SAFETY: `base + start .. + len` is this member's part of
                // the mapping `self` owns; mbind changes only its policy.
                unsafe {
                    numa::mbind(
                        self.base.add(m.start as usize),
                        m.len as usize,
                        &m.path,
                        node,
                    )?
                };
            }
        }
        Ok(())
    }

    /// In `pm` mode, check that each member's persistent-memory device is
    /// on the node the pool gives it, where the kernel reports the
    /// device's node and `topology` is the machine's own (see
    /// [`numa::check_device_node`]): a mismatch is
    /// [`crate::MemberProblem::WrongNode`].
    pub fn check_member_nodes(&self, topology: &crate::Topology) -> Result<()> {
        if self.mode != Durability::Pm {
            return Ok(());
        }
        for (index, m) in self.members.iter().enumerate() {
            numa::check_device_node(
                Path::new("/sys"),
                &m.file,
                &m.path,
                index as u32,
                m.node,
                topology,
            )?;
        }
        Ok(())
    }

    /// With the remote-cost model or the bandwidth cap on: make the
    /// calling thread pay for an access of `[off, off+len)`. Off: one
    /// well-predicted branch each.
    #[inline(always)]
    fn charge(&self, off: u64, len: usize, access: remote::Access) {
        if let Some(m) = &self.remote {
            m.charge(off, len, access);
        }
        if let Some(b) = &self.bwcap {
            b.charge(off, len, access);
        }
    }

    /// The member files, in pool order.
    pub fn members(&self) -> Vec<MemberInfo> {
        self.members
            .iter()
            .map(|m| MemberInfo {
                path: m.path.clone(),
                start: m.start,
                len: m.len,
                node: m.node,
            })
            .collect()
    }

    /// The pieces of `[off, off+len)` (already bounds-checked) per member:
    /// `(member, offset in the member's file, offset in the pool, length)`.
    fn pieces(&self, off: u64, len: u64) -> impl Iterator<Item = (&Member, u64, u64, u64)> + '_ {
        let end = off + len;
        let first = self.members.partition_point(|m| m.start + m.len <= off);
        self.members[first.min(self.members.len())..]
            .iter()
            .take_while(move |m| m.start < end)
            .filter_map(move |m| {
                let s = off.max(m.start);
                let e = end.min(m.start + m.len);
                (e > s).then(|| (m, s - m.start, s, e - s))
            })
    }

    /// Report every persistence event from now on to `observer` (crash
    /// explorer, fault injection). The hardware flushes and fences are
    /// skipped: the observer models them.
    pub fn attach_observer(&mut self, observer: Arc<dyn PersistObserver>) {
        self.observer = Some(observer::Attached(observer));
    }

    /// Attach a tiered pool's data device: pool offsets from the end of
    /// the mapping on are its bytes.
    pub(crate) fn attach_device(&mut self, device: crate::tier::Device) {
        self.device = Some((device, self.len as u64));
    }

    /// Issue the data device's transfers as `io` says (if the pool has
    /// one; see [`crate::tier::Device::set_io`]).
    pub(crate) fn set_device_io(&mut self, io: crate::tier::DeviceIo) {
        if let Some((dev, _)) = &mut self.device {
            dev.set_io(io);
        }
    }

    /// Whether pool offset `off` is on the data device (past the
    /// mapping): a range of device blocks is one transfer, however many
    /// blocks it spans.
    pub(crate) fn on_data_device(&self, off: u64) -> bool {
        self.device.as_ref().is_some_and(|(_, start)| off >= *start)
    }

    /// The data device, if the pool has one.
    pub(crate) fn device(&self) -> Option<&crate::tier::Device> {
        self.device.as_ref().map(|(d, _)| d)
    }

    /// Whether durability needs durable marks: the page cache (`file`
    /// mode) or a data device can make a later write durable before an
    /// earlier one, so a commit counts only once a barrier covered it.
    pub(crate) fn marked(&self) -> bool {
        self.mode == Durability::File || self.device.is_some()
    }

    /// `Some(device offset)` when `[off, off+len)` is on the data device
    /// (an error when it starts there but does not fit); `None` for an
    /// offset in the mapping.
    fn on_device(&self, off: u64, len: usize) -> Option<Result<(&crate::tier::Device, u64)>> {
        let (dev, start) = self.device.as_ref()?;
        if off < *start {
            return None;
        }
        let local = off - start;
        Some(match local.checked_add(len as u64) {
            Some(end) if end <= dev.len() => Ok((dev, local)),
            _ => Err(Error::corrupt(
                "pool offset",
                format!(
                    "range {off:#x}+{len:#x} outside the data device ({:#x} bytes from {start:#x})",
                    dev.len()
                ),
            )),
        })
    }

    /// Flush the data device if it was written since its last flush
    /// (a no-op without one). A failure fails the media.
    pub(crate) fn flush_device(&self) -> Result<()> {
        let Some((dev, start)) = &self.device else {
            return Ok(());
        };
        if !self.writable {
            return Ok(());
        }
        if self.has_failed() {
            return Err(self.failure_error());
        }
        if let Some(o) = &self.observer
            && dev.is_dirty()
            && let Err(e) = o.0.on_sync(*start, dev.len() as usize)
        {
            self.fail(format!("a flush of the data device failed ({e})"));
            return Err(Error::io(format!("flush {}", dev.path().display()), e));
        }
        dev.flush().inspect_err(|e| {
            self.fail(format!("a flush of the data device failed ({e})"));
        })
    }

    /// Pass the workload marker `tag` to the attached observer, if any.
    pub fn note(&self, tag: u64) {
        if let Some(o) = &self.observer {
            o.0.on_note(tag, &MediaView::new(self));
        }
    }

    /// Length of the mapping in bytes.
    pub fn len(&self) -> u64 {
        self.len as u64
    }

    /// Whether the mapping is empty (never true for an opened pool).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn check(&self, off: u64, len: usize) -> Result<usize> {
        let end = off.checked_add(len as u64);
        match end {
            Some(end) if end <= self.len as u64 => Ok(off as usize),
            _ => Err(Error::corrupt(
                "pool offset",
                format!(
                    "range {off:#x}+{len:#x} outside pool of {:#x} bytes",
                    self.len
                ),
            )),
        }
    }

    fn check_writable(&self) -> Result<()> {
        if !self.writable {
            return Err(Error::ReadOnly);
        }
        if self.has_failed() {
            return Err(self.failure_error());
        }
        Ok(())
    }

    /// The EIO error every operation on a failed media returns.
    fn failure_error(&self) -> Error {
        let why = self
            .failure
            .get()
            .map_or("an earlier sync failed", String::as_str);
        Error::io(
            format!("{}: {why}; refusing further changes", self.path.display()),
            std::io::Error::from_raw_os_error(libc::EIO),
        )
    }

    /// Err(EIO), with the reason, once the media has failed.
    pub fn check_alive(&self) -> Result<()> {
        if self.has_failed() {
            return Err(self.failure_error());
        }
        Ok(())
    }

    /// Fail the media: every later store, sync and read answers `EIO`
    /// with `reason` in the message. What is in the pool file stays as it
    /// is, for `fsck` and the next mount's recovery. The first reason
    /// given is kept.
    pub fn fail(&self, reason: impl Into<String>) {
        let _ = self.failure.set(reason.into());
        self.failed.store(true, Ordering::Release);
    }

    /// Err(EIO) when a SIGBUS was absorbed in this mapping (the pool file
    /// shrank, or lost pages, under it): the bytes just copied may be the
    /// handler's zeros. Fails the media on the first such report.
    fn check_faults(&self) -> Result<()> {
        if self.sigbus.faults() != 0 {
            self.fail_shrunk();
            return Err(self.failure_error());
        }
        Ok(())
    }

    fn fail_shrunk(&self) {
        let mut now = Vec::new();
        for m in &self.members {
            match file_len(&m.file) {
                Ok(len) if len >= m.len => {}
                Ok(len) => now.push(format!("{}: {len} bytes now", m.path.display())),
                Err(e) => now.push(format!("{}: cannot stat it: {e}", m.path.display())),
            }
        }
        let now = if now.is_empty() {
            "every member file still has its length".to_string()
        } else {
            now.join(", ")
        };
        self.fail(format!(
            "the pool file lost pages under its mapping of {} bytes ({now}); \
             was it truncated while mounted?",
            self.len
        ));
    }

    /// Err(EIO) when a member file is now shorter than its mapping (another
    /// process truncated it): fails the media. One `lseek` per member (see
    /// [`file_len`]).
    pub fn check_size(&self) -> Result<()> {
        for m in &self.members {
            match file_len(&m.file) {
                Ok(len) if len >= m.len => {}
                Ok(len) => {
                    let which = if self.members.len() == 1 {
                        "the pool file".to_string()
                    } else {
                        format!("pool member {}", m.path.display())
                    };
                    self.fail(format!(
                        "{which} shrank from {} to {len} bytes while mounted",
                        m.len,
                    ));
                    return Err(self.failure_error());
                }
                Err(e) => return Err(Error::io(format!("stat pool {}", m.path.display()), e)),
            }
        }
        Ok(())
    }

    /// Whether the media has failed: a durability point failed, the pool
    /// file shrank under the mapping, or [`Media::fail`] was called.
    pub fn has_failed(&self) -> bool {
        if self.failed.load(Ordering::Acquire) {
            return true;
        }
        if self.sigbus.faults() != 0 {
            self.fail_shrunk();
            return true;
        }
        false
    }

    /// Copy `buf.len()` bytes at `off` into `buf`.
    pub fn read(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        if let Some(d) = self.on_device(off, buf.len()) {
            let (dev, local) = d?;
            return dev.read(local, buf);
        }
        let start = self.check(off, buf.len())?;
        self.charge(off, buf.len(), remote::Access::Read);
        // SAFETY: `check` proved [start, start+len) lies inside the mapping;
        // `buf` is a distinct Rust allocation, so the ranges do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(self.base.add(start), buf.as_mut_ptr(), buf.len());
        }
        // A page the file no longer backs reads as the SIGBUS handler's
        // zeros: never hand those out as data.
        self.check_faults()
    }

    /// [`Media::read`] of each `(offset, buffer)` of `reqs`: those on the
    /// data device are read as one batch of device transfers (one
    /// io_uring submission with `device_io=uring`), the others from the
    /// mapping.
    pub fn read_batch(&self, reqs: &mut [(u64, &mut [u8])]) -> Result<()> {
        let mut on_dev: smallvec::SmallVec<[(u64, &mut [u8]); 4]> = smallvec::SmallVec::new();
        for (off, buf) in reqs.iter_mut() {
            match self.on_device(*off, buf.len()) {
                Some(d) => on_dev.push((d?.1, &mut **buf)),
                None => self.read(*off, buf)?,
            }
        }
        match (&self.device, on_dev.is_empty()) {
            (Some((dev, _)), false) => dev.read_many(&mut on_dev),
            _ => Ok(()),
        }
    }

    /// [`Media::nt_copy`] of each `(offset, data)` of `reqs`: those on the
    /// data device are written as one batch of device transfers (one
    /// io_uring submission with `device_io=uring`), the others into the
    /// mapping.
    pub fn nt_copy_batch(&self, reqs: &[(u64, &[u8])]) -> Result<()> {
        self.check_writable()?;
        let mut on_dev: smallvec::SmallVec<[(u64, &[u8]); 4]> = smallvec::SmallVec::new();
        for &(off, data) in reqs {
            match self.on_device(off, data.len()) {
                Some(d) => on_dev.push((d?.1, data)),
                None => self.nt_copy(off, data)?,
            }
        }
        let Some((dev, _)) = &self.device else {
            return Ok(());
        };
        if on_dev.is_empty() {
            return Ok(());
        }
        dev.write_many(&on_dev).inspect_err(|e| {
            self.fail(format!("a write to the data device failed ({e})"));
        })?;
        if let Some(r) = &self.observer {
            for &(off, data) in reqs {
                if self.on_device(off, data.len()).is_some() {
                    r.0.on_store(off, data.len(), &MediaView::new(self));
                }
            }
        }
        Ok(())
    }

    /// Read `len` bytes at `off` into a new vector.
    pub fn read_vec(&self, off: u64, len: usize) -> Result<Vec<u8>> {
        let mut v = vec![0u8; len];
        self.read(off, &mut v)?;
        Ok(v)
    }

    /// The crc32 of the `len` bytes at `off` (read through a small buffer).
    pub fn crc32(&self, off: u64, len: u64) -> Result<u32> {
        let n = usize::try_from(len).map_err(|_| Error::corrupt("pool range", "too long"))?;
        match self.on_device(off, n) {
            Some(d) => drop(d?),
            None => drop(self.check(off, n)?),
        }
        let mut h = crc32fast::Hasher::new();
        let mut buf = [0u8; 4096];
        let mut done = 0;
        while done < len {
            let n = (len - done).min(buf.len() as u64) as usize;
            self.read(off + done, &mut buf[..n])?;
            h.update(&buf[..n]);
            done += n as u64;
        }
        Ok(h.finalize())
    }

    /// Ordinary (cached) store of `data` at `off`. Not durable until flushed
    /// and fenced.
    pub fn store(&self, off: u64, data: &[u8]) -> Result<()> {
        self.check_writable()?;
        if let Some(d) = self.on_device(off, data.len()) {
            return self.device_write(d?, off, data);
        }
        let start = self.check(off, data.len())?;
        self.charge(off, data.len(), remote::Access::Write);
        if self.writes_through_fd() {
            self.write_at(off, data)?;
            if let Some(r) = &self.observer {
                r.0.on_store(off, data.len(), &MediaView::new(self));
            }
            return self.check_faults();
        }
        // SAFETY: bounds checked above; source is a distinct allocation.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.base.add(start), data.len());
        }
        if let Some(r) = &self.observer {
            r.0.on_store(off, data.len(), &MediaView::new(self));
        }
        // A store into a page the file no longer backs went to the SIGBUS
        // handler's private zero page: it is lost, so it must not succeed.
        self.check_faults()
    }

    /// Fill `len` bytes at `off` with zeros (cached stores).
    pub fn zero(&self, off: u64, len: usize) -> Result<()> {
        self.check_writable()?;
        if let Some(d) = self.on_device(off, len) {
            return self.device_write(d?, off, &vec![0u8; len]);
        }
        let start = self.check(off, len)?;
        self.charge(off, len, remote::Access::Write);
        if self.writes_through_fd() {
            const ZEROS: [u8; 4096] = [0; 4096];
            let mut done = 0;
            while done < len {
                let n = (len - done).min(ZEROS.len());
                self.write_at(off + done as u64, &ZEROS[..n])?;
                done += n;
            }
        } else {
            // SAFETY: bounds checked above.
            unsafe { std::ptr::write_bytes(self.base.add(start), 0, len) };
        }
        if let Some(r) = &self.observer {
            r.0.on_store(off, len, &MediaView::new(self));
        }
        self.check_faults()
    }

    /// Non-temporal copy of `data` to `off`: bypasses the cache, so in `pm`
    /// mode it is durable after the next [`Media::fence`] without a flush.
    /// In the other modes it is a plain copy followed by a flush of the range.
    pub fn nt_copy(&self, off: u64, data: &[u8]) -> Result<()> {
        self.check_writable()?;
        if let Some(d) = self.on_device(off, data.len()) {
            return self.device_write(d?, off, data);
        }
        let start = self.check(off, data.len())?;
        if self.writes_through_fd() {
            // No cache to bypass: the page cache is the medium.
            return self.store(off, data);
        }
        self.count_flushed(off, data.len());
        if let Some(r) = &self.observer {
            self.charge(off, data.len(), remote::Access::Write);
            // SAFETY: bounds checked above; source is a distinct allocation.
            unsafe {
                std::ptr::copy_nonoverlapping(data.as_ptr(), self.base.add(start), data.len());
            }
            r.0.on_nt_store(off, data.len(), &MediaView::new(self));
            return Ok(());
        }
        #[cfg(target_arch = "x86_64")]
        if self.mode == Durability::Pm && start % 8 == 0 {
            let words = data.len() / 8;
            // The tail, if any, is charged by its `store`.
            self.charge(off, words * 8, remote::Access::Write);
            for i in 0..words {
                let mut w = [0u8; 8];
                w.copy_from_slice(&data[i * 8..i * 8 + 8]);
                // SAFETY: `start + 8*i .. +8` is inside the checked range and
                // 8-byte aligned (mapping base is page aligned, start % 8 == 0).
                unsafe {
                    std::arch::x86_64::_mm_stream_si64(
                        self.base.add(start + i * 8).cast::<i64>(),
                        i64::from_ne_bytes(w),
                    );
                }
            }
            let tail = words * 8;
            if tail < data.len() {
                self.store(off + tail as u64, &data[tail..])?;
                self.flush_lines(off + tail as u64, data.len() - tail)?;
            }
            return self.check_faults();
        }
        self.store(off, data)?;
        self.flush_lines(off, data.len())
    }

    /// What the pool medium was asked to make durable since the mount.
    pub fn persist_stats(&self) -> PersistStats {
        let c = self.persisted.sum();
        PersistStats {
            mode: self.mode,
            bytes: c[P_BYTES],
            cache_lines: c[P_LINES],
            syncs: c[P_SYNCS],
            full_syncs: c[P_FULL],
        }
    }

    /// Count `[off, off+len)` as made durable by cache-line write-back
    /// (`pm`, and `dram` as the persistent memory it emulates).
    #[inline]
    fn count_flushed(&self, off: u64, len: usize) {
        if self.mode != Durability::File && len != 0 {
            self.persisted
                .add([len as u64, lines_covered(off, len as u64), 0, 0]);
        }
    }

    /// Count a ranged durability point of the pool file over
    /// `[off, off+len)`, rounded out to whole pages.
    fn count_synced(&self, off: u64, len: u64, calls: u64) {
        let page = page_size() as u64;
        let a0 = off / page * page;
        let a1 = (off + len).next_multiple_of(page);
        self.persisted
            .add([a1 - a0, lines_covered(a0, a1 - a0), calls, 0]);
    }

    /// Write back every cache line overlapping `[off, off+len)`.
    pub fn flush(&self, off: u64, len: usize) -> Result<()> {
        if self.on_device(off, len).is_none() {
            self.count_flushed(off, len);
        }
        self.flush_lines(off, len)
    }

    /// [`Media::flush`] without counting (for callers that counted).
    fn flush_lines(&self, off: u64, len: usize) -> Result<()> {
        if let Some(d) = self.on_device(off, len) {
            // No cache lines: only a device flush (a barrier) counts.
            return d.map(|_| ());
        }
        let start = self.check(off, len)?;
        if let Some(r) = &self.observer {
            r.0.on_flush(off, len);
            return Ok(());
        }
        // Only persistent memory is made durable by cache-line flushes; in
        // `file` mode the page cache is the medium and only a sync counts.
        if self.mode != Durability::Pm || len == 0 {
            return Ok(());
        }
        let first = start & !(CACHE_LINE - 1);
        let mut line = first;
        while line < start + len {
            // SAFETY: `line` is inside the mapping: it is at or after the
            // line holding `start` and before `start + len`.
            unsafe { self.flush.flush_line(self.base.add(line)) };
            line += CACHE_LINE;
        }
        Ok(())
    }

    /// Order earlier flushes and non-temporal stores before later stores.
    pub fn fence(&self) {
        if let Some(r) = &self.observer {
            r.0.on_fence(&MediaView::new(self));
            return;
        }
        if self.mode == Durability::Pm {
            self.flush.store_fence();
        }
    }

    /// Flush `[off, off+len)` and fence.
    pub fn persist(&self, off: u64, len: usize) -> Result<()> {
        self.flush(off, len)?;
        self.fence();
        Ok(())
    }

    fn atomic_u64(&self, off: u64) -> Result<&AtomicU64> {
        let start = self.check(off, 8)?;
        if start % 8 != 0 {
            return Err(Error::corrupt(
                "pool offset",
                format!("{off:#x} is not 8-byte aligned"),
            ));
        }
        // SAFETY: in bounds and 8-byte aligned (the mapping is page aligned);
        // AtomicU64 has the same layout as u64 and the mapping lives as long
        // as `self`, which bounds the returned reference.
        Ok(unsafe { &*(self.base.add(start) as *const AtomicU64) })
    }

    /// Atomic 8-byte load (for words other threads may store concurrently).
    pub fn load_u64(&self, off: u64) -> Result<u64> {
        let word = self.atomic_u64(off)?;
        self.charge(off, 8, remote::Access::Read);
        let v = word.load(Ordering::Acquire);
        self.check_faults()?;
        Ok(v)
    }

    /// Failure-atomic, aligned 8-byte store; not durable until flushed and
    /// fenced.
    pub fn store_u64(&self, off: u64, value: u64) -> Result<()> {
        self.check_writable()?;
        let word = self.atomic_u64(off)?;
        self.charge(off, 8, remote::Access::Write);
        if self.writes_through_fd() {
            // Words other threads read while it is written (log array
            // heads, footers' links) are read only as hints that a sync
            // re-checks, so a write that is not one 8-byte store is safe.
            self.write_at(off, &value.to_le_bytes())?;
        } else {
            word.store(value, Ordering::Release);
        }
        if let Some(r) = &self.observer {
            r.0.on_store(off, 8, &MediaView::new(self));
        }
        self.check_faults()
    }

    /// Write `data` at pool offset `off`, device offset `local`, and tell
    /// the observer (as a store: not durable before a barrier). A failure
    /// fails the media: the device may hold part of the write.
    fn device_write(
        &self,
        (dev, local): (&crate::tier::Device, u64),
        off: u64,
        data: &[u8],
    ) -> Result<()> {
        dev.write(local, data).inspect_err(|e| {
            self.fail(format!("a write to the data device failed ({e})"));
        })?;
        if let Some(r) = &self.observer {
            r.0.on_store(off, data.len(), &MediaView::new(self));
        }
        Ok(())
    }

    /// Whether stores go through the file descriptor (`pwrite`) instead
    /// of the mapping: in `file` mode. A page dirtied through a shared
    /// mapping costs the disk file system a journal commit at every
    /// durability point (ext4's `page_mkwrite` path: measured 750 us
    /// against 190 us for the same 4 KiB made durable after a `pwrite`);
    /// the page cache keeps the mapping, which still serves every read,
    /// coherent with the descriptor.
    fn writes_through_fd(&self) -> bool {
        self.mode == Durability::File
    }

    /// `pwrite` all of `data` at `off` (bounds checked by the caller). A
    /// failure fails the media: the page cache may hold part of the write.
    /// A write that crosses from one member into the next is one `pwrite`
    /// per member.
    fn write_at(&self, off: u64, data: &[u8]) -> Result<()> {
        use std::os::unix::fs::FileExt;
        for (m, local, global, len) in self.pieces(off, data.len() as u64) {
            let from = (global - off) as usize;
            let part = &data[from..from + len as usize];
            m.file.write_all_at(part, local).map_err(|e| {
                self.fail(format!("a write to the pool failed ({e})"));
                Error::io(format!("write {}", m.path.display()), e)
            })?;
        }
        Ok(())
    }

    /// The pool file's path (for messages).
    pub(crate) fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// A durability point: in `file` mode, `msync` the range so it reaches
    /// the disk; in `pm` mode flushed data already is durable; in `dram`
    /// mode nothing is.
    pub fn sync_range(&self, off: u64, len: usize) -> Result<()> {
        self.sync_range_counted(off, len, true)
    }

    /// [`Media::sync_range`], counted in [`Media::persist_stats`] or not
    /// (a full sync is counted as one).
    fn sync_range_counted(&self, off: u64, len: usize, count: bool) -> Result<()> {
        if !self.writable || len == 0 {
            return Ok(());
        }
        if let Some(d) = self.on_device(off, len) {
            d?;
            return self.flush_device();
        }
        if self.mode != Durability::File {
            if self.device.is_some() {
                // A tiered pool's marks are written with plain stores, and
                // a barrier over them must make them durable (`pm`; in
                // `dram` mode the flush and fence cost nothing, show an
                // observer what `pm` mode would do, and are counted as the
                // flush `pm` would do).
                if count {
                    self.count_flushed(off, len);
                }
                self.flush_lines(off, len)?;
                self.fence();
            }
            return Ok(());
        }
        let start = self.check(off, len)?;
        // Nothing is durable on a failed media (a failed msync, a pool file
        // that shrank): say so at every durability point.
        if self.has_failed() {
            return Err(self.failure_error());
        }
        self.check_size()?;
        if let Some(Err(e)) = self.observer.as_ref().map(|o| o.0.on_sync(off, len)) {
            self.fail(format!("msync failed: {e}"));
            return Err(Error::io(format!("msync {}", self.path.display()), e));
        }
        let page = page_size();
        let aligned = start & !(page - 1);
        let end = start + len;
        if count {
            self.count_synced(off, len as u64, 1);
        }
        // SAFETY: [aligned, end) lies inside the mapping (aligned rounds down
        // to the mapping's page-aligned base at worst).
        let rc =
            unsafe { libc::msync(self.base.add(aligned).cast(), end - aligned, libc::MS_SYNC) };
        if rc != 0 {
            self.fail(format!(
                "an earlier sync failed ({})",
                std::io::Error::last_os_error()
            ));
            return Err(Error::io(
                format!("msync {}", self.path.display()),
                std::io::Error::last_os_error(),
            ));
        }
        Ok(())
    }

    /// A durability point for the whole pool.
    pub fn sync_all(&self) -> Result<()> {
        self.flush_device()?;
        self.persisted.add([0, 0, 0, 1]);
        self.sync_range_counted(0, self.len, false)
    }
}

impl Drop for Media {
    fn drop(&mut self) {
        // Out of the fault table before the range can be reused.
        self.sigbus.unregister();
        // SAFETY: `base`/`reserved` is the reservation made by a successful
        // mmap, with every member mapped inside it; unmapped exactly once,
        // here (the members' mappings go with it); no references into the
        // mapping outlive `self`.
        unsafe {
            libc::munmap(self.base.cast(), self.reserved);
        }
    }
}

/// A file's current length. `lseek(SEEK_END)`, not `fstat`: a `stat` of
/// the file marks its change counter as queried, and the next write then
/// dirties the inode so that every later `msync` also writes the inode
/// (measured: +40 us per `fdatasync`-like sync on ext4).
fn file_len(file: &File) -> std::io::Result<u64> {
    use std::io::Seek;
    let mut f = file;
    f.seek(std::io::SeekFrom::End(0))
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as usize } else { 4096 }
}

pub(crate) fn lock_exclusive(file: &File, path: &Path) -> Result<()> {
    flock(file, path, libc::LOCK_EX | libc::LOCK_NB)
}

pub(crate) fn lock_shared(file: &File, path: &Path) -> Result<()> {
    flock(file, path, libc::LOCK_SH | libc::LOCK_NB)
}

fn flock(file: &File, path: &Path, op: libc::c_int) -> Result<()> {
    // A process that forks (to exec a program) holds a copy of our pool
    // descriptor until its exec closes it, and with it the lock of a pool
    // that was just unmounted. Retry for a moment before calling it busy.
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(500);
    loop {
        // SAFETY: flock on a descriptor we own.
        let rc = unsafe { libc::flock(file.as_raw_fd(), op) };
        if rc == 0 {
            return Ok(());
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(Error::io(format!("lock pool {}", path.display()), err));
        }
        if std::time::Instant::now() >= deadline {
            return Err(Error::Busy {
                path: path.to_path_buf(),
            });
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(mode: Durability) -> (tempfile::TempDir, Media) {
        let dir = tempfile::tempdir().unwrap();
        let m = Media::create(&dir.path().join("p"), 1 << 20, mode).unwrap();
        (dir, m)
    }

    #[test]
    fn persist_stats_count_what_each_medium_makes_durable() {
        assert_eq!(lines_covered(10, 100), 2);
        assert_eq!(lines_covered(64, 64), 1);
        assert_eq!(lines_covered(63, 2), 2);
        assert_eq!(lines_covered(0, 0), 0);
        // `pm` needs a DAX file system; `dram` counts what `pm` flushes.
        {
            let mode = Durability::Dram;
            let (_d, m) = pool(mode);
            m.store(10, &[1u8; 100]).unwrap();
            m.persist(10, 100).unwrap();
            m.nt_copy(4096, &[2u8; 256]).unwrap();
            m.sync_range(0, 8192).unwrap();
            let s = m.persist_stats();
            assert_eq!((s.mode, s.bytes, s.cache_lines, s.syncs), (mode, 356, 6, 0));
        }
        let (_d, m) = pool(Durability::File);
        m.store(10, &[1u8; 100]).unwrap();
        m.persist(10, 100).unwrap();
        assert_eq!(m.persist_stats().bytes, 0, "a flush is no durability point");
        m.sync_range(10, 100).unwrap();
        m.sync_blocks(&mut vec![3, 4, 9]).unwrap();
        let s = m.persist_stats();
        // One page by `msync`; two runs (3..5, 9..10) by `sync_file_range`
        // and `msync`: 2 + 2 calls.
        assert_eq!((s.bytes, s.cache_lines, s.syncs), (4 * 4096, 4 * 64, 5));
        m.sync_all().unwrap();
        let t = m.persist_stats();
        assert_eq!((t.bytes, t.full_syncs), (s.bytes, 1));
        assert_eq!(t.since(&s).full_syncs, 1);
        assert_eq!(t.since(&s).bytes, 0);
    }

    #[test]
    fn store_read_roundtrip_in_every_mode() {
        for mode in [Durability::File, Durability::Dram] {
            let (_d, m) = pool(mode);
            m.store(100, b"hello").unwrap();
            m.nt_copy(4096, &[7u8; 4096]).unwrap();
            m.nt_copy(8193, &[9u8; 13]).unwrap();
            m.persist(0, 8192).unwrap();
            m.store_u64(64, 0xdead_beef).unwrap();
            m.flush(64, 8).unwrap();
            m.fence();
            m.sync_all().unwrap();
            assert_eq!(m.read_vec(100, 5).unwrap(), b"hello");
            assert_eq!(m.read_vec(4096, 4096).unwrap(), vec![7u8; 4096]);
            assert_eq!(m.read_vec(8193, 13).unwrap(), vec![9u8; 13]);
            assert_eq!(m.load_u64(64).unwrap(), 0xdead_beef);
            m.zero(4096, 10).unwrap();
            assert_eq!(
                m.read_vec(4096, 11).unwrap()[..11],
                [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7]
            );
        }
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn detect_picks_the_best_listed_flush_and_every_listed_one_runs() {
        // The kernel's own reading of CPUID: the instructions this CPU has.
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap();
        let flags: Vec<&str> = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("flags"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, f)| f.split_whitespace().collect())
            .expect("/proc/cpuinfo has a flags line");
        let listed: Vec<FlushInstr> = [
            ("clwb", FlushInstr::Clwb),
            ("clflushopt", FlushInstr::ClflushOpt),
            ("clflush", FlushInstr::Clflush),
        ]
        .into_iter()
        .filter(|(flag, _)| flags.contains(flag))
        .map(|(_, instr)| instr)
        .collect();
        // Best first: the one the media uses, and only one the CPU has.
        assert_eq!(
            Some(&FlushInstr::detect()),
            listed.first(),
            "the CPU lists {listed:?}"
        );
        let (_d, m) = pool(Durability::File);
        assert_eq!(m.flush, FlushInstr::detect(), "the media's flush");
        // Each one the CPU lists executes (a missing one would fault) and
        // leaves the line's contents as they were.
        m.store(0, &[1u8; 256]).unwrap();
        for instr in listed {
            // SAFETY: offset 0 of a live mapping.
            unsafe { instr.flush_line(m.base) };
            instr.store_fence();
        }
        assert_eq!(m.read_vec(0, 256).unwrap(), vec![1u8; 256]);
    }

    #[test]
    fn out_of_bounds_and_misaligned_are_errors() {
        let (_d, m) = pool(Durability::File);
        assert!(m.read_vec(m.len() - 4, 8).is_err());
        assert!(m.store(u64::MAX - 2, b"abc").is_err());
        assert!(m.load_u64(3).is_err());
        assert!(m.store_u64(m.len(), 1).is_err());
    }

    #[test]
    fn second_writer_is_refused() {
        let (d, m) = pool(Durability::File);
        let err = Media::open(&d.path().join("p"), Durability::File, true).unwrap_err();
        assert!(matches!(err, Error::Busy { .. }), "{err}");
        drop(m);
        Media::open(&d.path().join("p"), Durability::File, true).unwrap();
    }

    /// A new member file of `len` bytes at `p`, on node 0.
    fn new_member(p: &Path, len: u64) -> OpenMember {
        OpenMember {
            file: Media::create_file(p, len, false).unwrap(),
            path: p.to_path_buf(),
            len,
            node: 0,
        }
    }

    /// Two member files mapped back to back: stores, reads, atomics and
    /// ranged syncs that cross the boundary reach each file at its own
    /// offsets, in every mode.
    #[test]
    fn members_are_one_address_space() {
        for mode in [Durability::File, Durability::Dram] {
            let dir = tempfile::tempdir().unwrap();
            let (p0, p1) = (dir.path().join("m0"), dir.path().join("m1"));
            let open = new_member;
            let m =
                Media::from_members(vec![open(&p0, 8192), open(&p1, 16384)], mode, true).unwrap();
            assert_eq!(m.len(), 8192 + 16384);
            let data: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
            m.store(8192 - 500, &data).unwrap();
            m.nt_copy(8192 - 3, &[9u8; 6]).unwrap();
            m.store_u64(8192 + 4096 + 64, 0x1234).unwrap();
            m.persist(0, m.len() as usize).unwrap();
            m.sync_blocks(&mut vec![1, 2, 3]).unwrap();
            m.sync_block_ranges(&mut vec![(0, 1), (1, 3), (4, 6)])
                .unwrap();
            m.sync_all().unwrap();
            let mut want = data.clone();
            want[497..503].copy_from_slice(&[9u8; 6]);
            assert_eq!(m.read_vec(8192 - 500, 1000).unwrap(), want);
            assert_eq!(m.load_u64(8192 + 4096 + 64).unwrap(), 0x1234);
            drop(m);
            let (f0, f1) = (std::fs::read(&p0).unwrap(), std::fs::read(&p1).unwrap());
            assert_eq!(f0[8192 - 500..], want[..500]);
            assert_eq!(f1[..500], want[500..]);
            assert_eq!(f1[4096 + 64..4096 + 72], 0x1234u64.to_le_bytes());
            assert!(m_out_of_bounds(&p0, &p1));
        }
    }

    /// Reopened read-only, the pair refuses a range past the last member.
    fn m_out_of_bounds(p0: &Path, p1: &Path) -> bool {
        let open = |p: &Path| OpenMember {
            file: Media::open_file(p, false).unwrap(),
            path: p.to_path_buf(),
            len: std::fs::metadata(p).unwrap().len(),
            node: 1,
        };
        let m = Media::from_members(vec![open(p0), open(p1)], Durability::File, false).unwrap();
        assert_eq!(m.members()[1].start, 8192);
        assert_eq!(m.members()[1].node, 1);
        m.read_vec(m.len() - 4, 8).is_err() && m.read_vec(m.len() - 8, 8).is_ok()
    }

    /// A member shorter than its mapping fails the media at the next sync,
    /// naming that member.
    #[test]
    fn a_shrunk_member_fails_the_media() {
        let dir = tempfile::tempdir().unwrap();
        let (p0, p1) = (dir.path().join("m0"), dir.path().join("m1"));
        let open = new_member;
        let m = Media::from_members(
            vec![open(&p0, 8192), open(&p1, 8192)],
            Durability::File,
            true,
        )
        .unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p1)
            .unwrap()
            .set_len(4096)
            .unwrap();
        let err = m.sync_all().unwrap_err().to_string();
        assert!(err.contains("m1") && err.contains("shrank"), "{err}");
        assert!(m.has_failed());
    }

    /// A member that is not a whole number of pages cannot be followed by
    /// another.
    #[test]
    fn a_member_must_end_on_a_page() {
        let dir = tempfile::tempdir().unwrap();
        let (p0, p1) = (dir.path().join("m0"), dir.path().join("m1"));
        let open = new_member;
        let err = Media::from_members(
            vec![open(&p0, 5000), open(&p1, 8192)],
            Durability::File,
            true,
        )
        .unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        assert!(matches!(
            Media::from_members(Vec::new(), Durability::File, true),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn read_only_mapping_refuses_stores() {
        let (d, m) = pool(Durability::File);
        drop(m);
        let ro = Media::open(&d.path().join("p"), Durability::File, false).unwrap();
        assert!(matches!(ro.store(0, b"x"), Err(Error::ReadOnly)));
        assert_eq!(ro.read_vec(0, 1).unwrap(), [0]);
    }
}
