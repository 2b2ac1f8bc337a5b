//! The data device: `O_DIRECT` reads and writes through 4 KiB-aligned
//! buffers, and flushes that are skipped when nothing was written since
//! the last one.
//!
//! Requests come in batches ([`Device::read_many`], [`Device::write_many`]):
//! the transfers of one file read or write (one per run of contiguous
//! device blocks). With [`DeviceIo::Sync`] each is one `pread`/`pwrite`;
//! with [`DeviceIo::Uring`] (the default) a batch of two or more is
//! submitted to the thread's io_uring at once and waited for with one
//! system call.

use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// Alignment of every device transfer: offset, length and buffer address
/// (the logical block size of every current disk, and the pool's block).
pub(crate) const ALIGN: usize = 4096;

/// A heap buffer aligned to [`ALIGN`], whole multiples of it long.
struct AlignedBuf {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

impl AlignedBuf {
    fn zeroed(len: usize) -> AlignedBuf {
        let len = len.max(ALIGN).next_multiple_of(ALIGN);
        let layout = std::alloc::Layout::from_size_align(len, ALIGN).expect("valid layout");
        // SAFETY: `layout` has a non-zero size.
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr =
            std::ptr::NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedBuf { ptr, len }
    }

    fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` is a live allocation of `len` initialised (zeroed)
        // bytes owned by `self`, borrowed for `self`'s lifetime.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and `&mut self` makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        let layout = std::alloc::Layout::from_size_align(self.len, ALIGN).expect("valid layout");
        // SAFETY: allocated in `zeroed` with exactly this layout, freed once.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), layout) };
    }
}

// SAFETY: the buffer is plain owned heap memory, like a `Vec<u8>`.
unsafe impl Send for AlignedBuf {}

/// Counters of one mounted data device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceStats {
    /// Write calls that reached the device.
    pub writes: u64,
    /// Bytes written (whole aligned blocks, read-modify-write included).
    pub bytes_written: u64,
    /// Read calls.
    pub reads: u64,
    /// Flushes issued (`fdatasync`).
    pub flushes: u64,
    /// Flushes asked for and skipped: nothing written since the last one.
    pub flushes_skipped: u64,
    /// Batches submitted to io_uring (`device_io=uring`, two transfers
    /// or more each).
    pub uring_batches: u64,
    /// Whether the device is open with `O_DIRECT`.
    pub direct: bool,
    /// How transfers are issued (`Sync` where `Uring` was asked for and
    /// the kernel refused it).
    pub io: DeviceIo,
}

/// How the data device's transfers are issued
/// ([`crate::MountOptions::device_io`], `-o device_io=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeviceIo {
    /// One `pread`/`pwrite` per transfer.
    Sync,
    /// The transfers of one read or write submitted together to the
    /// thread's io_uring and waited for with one system call (a lone
    /// transfer is a `pread`/`pwrite`). Where the kernel refuses io_uring
    /// the mount warns once and uses `Sync`. The default: measured 3.3x
    /// to 5.2x faster on large reads of scattered blocks, the same
    /// elsewhere (docs/benchmarks.md, "device_io").
    #[default]
    Uring,
}

impl std::str::FromStr for DeviceIo {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "sync" => Ok(DeviceIo::Sync),
            "uring" => Ok(DeviceIo::Uring),
            _ => Err(Error::InvalidArgument(format!(
                "device_io {s:?} (expected sync or uring)"
            ))),
        }
    }
}

impl std::fmt::Display for DeviceIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DeviceIo::Sync => "sync",
            DeviceIo::Uring => "uring",
        })
    }
}

/// An open data device.
#[derive(Debug)]
pub(crate) struct Device {
    file: File,
    /// How transfers are issued (after [`Device::set_io`]'s fallback).
    io: DeviceIo,
    path: PathBuf,
    /// Bytes of it the pool uses (its header block included).
    len: u64,
    direct: bool,
    /// A write completed since the last flush started.
    dirty: AtomicBool,
    /// Flushes started (each one's ticket) and those not yet completed:
    /// a flush that finds the device clean waits for every flush started
    /// before it, which together cover every write that completed before
    /// it. Flushes of different threads run at once.
    flushes_in_flight: Mutex<(u64, std::collections::BTreeSet<u64>)>,
    flush_done: parking_lot::Condvar,
    /// A flush failed: nothing written before it is known durable.
    flush_failed: AtomicBool,
    /// Per-thread counters: writes, bytes written, reads, flushes, flushes
    /// skipped, io_uring batches (the `C_*` indices).
    counters: crate::cpu::Counters<6>,
}

const C_WRITES: usize = 0;
const C_BYTES: usize = 1;
const C_READS: usize = 2;
const C_FLUSHES: usize = 3;
const C_SKIPPED: usize = 4;
const C_BATCHES: usize = 5;

/// A counter increment of `v` at index `i`.
fn one(i: usize, v: u64) -> [u64; 6] {
    let mut a = [0; 6];
    a[i] = v;
    a
}

/// The most bytes one batch stages: a longer list of requests goes in
/// several batches, so that a large read or write never doubles its
/// memory (a request longer than this is a batch of its own).
const BATCH_BYTES: usize = 8 << 20;

/// Where to cut requests whose aligned spans are `spans` (`total` bytes
/// together) so that the first batch stays within [`BATCH_BYTES`]:
/// `None` when they all fit (or there is one request).
fn group_end(spans: &[(u64, u64)], total: usize) -> Option<usize> {
    if total <= BATCH_BYTES || spans.len() < 2 {
        return None;
    }
    let mut sum = 0usize;
    for (i, &(a0, a1)) in spans.iter().enumerate() {
        sum += (a1 - a0) as usize;
        if sum > BATCH_BYTES {
            return Some(i.max(1));
        }
    }
    None
}

/// A failed transfer batch.
struct Failed {
    err: Error,
    /// Transfers may still be in flight: their buffer must never be freed.
    in_flight: bool,
}

impl Failed {
    /// A failure after which nothing is in flight.
    fn done(err: Error) -> Failed {
        Failed {
            err,
            in_flight: false,
        }
    }

    /// The error, after leaking `buf` if the kernel may still use it.
    fn leaking(self, buf: AlignedBuf) -> Error {
        if self.in_flight {
            std::mem::forget(buf);
        }
        self.err
    }
}

/// Whether `err` says the file system does not do `O_DIRECT`.
fn direct_unsupported(err: &std::io::Error) -> bool {
    err.raw_os_error() == Some(libc::EINVAL)
}

/// Open `path` read-write (or read-only), with `O_DIRECT` when the file
/// system allows it; returns the file and whether it is direct.
pub(crate) fn open_file(
    path: &Path,
    writable: bool,
    create: bool,
) -> std::io::Result<(File, bool)> {
    let open = |direct: bool| {
        let mut o = std::fs::OpenOptions::new();
        o.read(true).write(writable).create(create && writable);
        if direct {
            o.custom_flags(libc::O_DIRECT);
        }
        o.open(path)
    };
    match open(true) {
        Ok(f) => Ok((f, true)),
        Err(e) if direct_unsupported(&e) => {
            tracing::warn!(
                target: "manyfs::tier",
                "{}: the file system refuses O_DIRECT; the data device is used through the page \
                 cache (flushes still make it durable, but every write is also copied there)",
                path.display()
            );
            Ok((open(false)?, false))
        }
        Err(e) => Err(e),
    }
}

/// The size of the file or block device `file` in bytes (`lseek` to its
/// end works for both; `metadata().len()` is 0 for a block device).
pub(crate) fn byte_len(file: &File) -> std::io::Result<u64> {
    use std::io::Seek;
    let mut f = file;
    f.seek(std::io::SeekFrom::End(0))
}

impl Device {
    /// A device over `file` (opened by [`open_file`]), of which the pool
    /// uses the first `len` bytes.
    pub(crate) fn new(file: File, path: PathBuf, len: u64, direct: bool) -> Device {
        Device {
            file,
            io: DeviceIo::Sync,
            path,
            len,
            direct,
            dirty: AtomicBool::new(false),
            flushes_in_flight: Mutex::new((0, std::collections::BTreeSet::new())),
            flush_done: parking_lot::Condvar::new(),
            flush_failed: AtomicBool::new(false),
            counters: crate::cpu::Counters::new(),
        }
    }

    /// The device's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes of the device the pool uses.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    fn check(&self, off: u64, len: usize) -> Result<()> {
        match off.checked_add(len as u64) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(Error::corrupt(
                "data device offset",
                format!(
                    "range {off:#x}+{len:#x} outside a device of {:#x} bytes",
                    self.len
                ),
            )),
        }
    }

    fn io_error(&self, what: &str, e: std::io::Error) -> Error {
        Error::io(format!("{what} data device {}", self.path.display()), e)
    }

    /// The aligned span `[a0, a1)` covering `[off, off+len)`.
    fn span(off: u64, len: usize) -> (u64, u64) {
        let a0 = off / ALIGN as u64 * ALIGN as u64;
        let a1 = (off + len as u64).next_multiple_of(ALIGN as u64);
        (a0, a1)
    }

    /// Use `io` for transfers from now on. `Uring` where the kernel
    /// refuses io_uring warns once and keeps `Sync` (never an error: the
    /// device works either way). Returns what is used.
    pub(crate) fn set_io(&mut self, io: DeviceIo) -> DeviceIo {
        self.io = match io {
            DeviceIo::Sync => DeviceIo::Sync,
            DeviceIo::Uring => match super::uring::probe() {
                Ok(()) => DeviceIo::Uring,
                Err(why) => {
                    tracing::warn!(
                        target: "manyfs::tier",
                        "device_io=uring: io_uring unavailable ({why}); the data device {} uses \
                         pread/pwrite",
                        self.path.display()
                    );
                    DeviceIo::Sync
                }
            },
        };
        self.io
    }

    /// Transfer every `(device offset, buffer, write)` of `ops` (aligned
    /// offsets and lengths, disjoint buffers): one `pread`/`pwrite` each,
    /// or, with `Uring` and two or more, one io_uring batch. A lone
    /// transfer is a `pread`/`pwrite` either way: one system call is all
    /// it needs, and a lone 4 KiB write through the ring was measured
    /// slower than `pwrite` (docs/benchmarks.md, "device_io"). A transfer
    /// that came back short is finished with `pread`/`pwrite`.
    fn transfer(&self, ops: &mut [(u64, &mut [u8], bool)]) -> std::result::Result<(), Failed> {
        let what = |w: bool| if w { "write" } else { "read" };
        if self.io == DeviceIo::Uring && ops.len() > 1 {
            let batch: Vec<super::uring::Op> = ops
                .iter_mut()
                .map(|(off, buf, write)| super::uring::Op {
                    write: *write,
                    ptr: buf.as_mut_ptr(),
                    // A longer one comes back short and is finished below.
                    len: buf.len().min(1 << 30) as u32,
                    off: *off,
                })
                .collect();
            // SAFETY: every op's buffer is a distinct `&mut` borrow held in
            // `ops` (so used by nobody else) for the whole call; after an
            // `InFlight` failure the callers forget the `AlignedBuf` the
            // borrows come from, so the kernel never writes freed memory.
            match unsafe { super::uring::run(self.file.as_raw_fd(), &batch) } {
                Ok(results) => {
                    self.counters.add(one(C_BATCHES, 1));
                    for ((off, buf, write), r) in ops.iter_mut().zip(results) {
                        let n = r.map_err(|e| Failed::done(self.io_error(what(*write), e)))?;
                        if n < buf.len() {
                            self.transfer_sync(*off + n as u64, &mut buf[n..], *write)
                                .map_err(Failed::done)?;
                        }
                    }
                    return Ok(());
                }
                Err(super::uring::RunError::NoRing(e)) => {
                    static WARNED: AtomicBool = AtomicBool::new(false);
                    if !WARNED.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            target: "manyfs::tier",
                            "device_io=uring: no io_uring for a thread ({e}); its transfers use \
                             pread/pwrite"
                        );
                    }
                }
                Err(super::uring::RunError::InFlight(e)) => {
                    return Err(Failed {
                        err: self.io_error("wait for transfers of", e),
                        in_flight: true,
                    });
                }
            }
        }
        for (off, buf, write) in ops.iter_mut() {
            self.transfer_sync(*off, buf, *write)
                .map_err(Failed::done)?;
        }
        Ok(())
    }

    fn transfer_sync(&self, off: u64, buf: &mut [u8], write: bool) -> Result<()> {
        if write {
            self.file
                .write_all_at(buf, off)
                .map_err(|e| self.io_error("write", e))
        } else {
            self.file
                .read_exact_at(buf, off)
                .map_err(|e| self.io_error("read", e))
        }
    }

    /// Copy `buf.len()` bytes at device byte `off` into `buf`.
    pub(crate) fn read(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        self.read_many(&mut [(off, buf)])
    }

    /// Fill each `(device byte offset, buffer)` of `reqs` from the device:
    /// one transfer per request, all issued together.
    pub(crate) fn read_many(&self, reqs: &mut [(u64, &mut [u8])]) -> Result<()> {
        let mut spans = Vec::with_capacity(reqs.len());
        let mut total = 0usize;
        for (off, buf) in reqs.iter() {
            if buf.is_empty() {
                spans.push((0, 0));
                continue;
            }
            self.check(*off, buf.len())?;
            let (a0, a1) = Self::span(*off, buf.len());
            spans.push((a0, a1));
            total += (a1 - a0) as usize;
        }
        if total == 0 {
            return Ok(());
        }
        if let Some(k) = group_end(&spans, total) {
            let (head, tail) = reqs.split_at_mut(k);
            self.read_many(head)?;
            return self.read_many(tail);
        }
        let mut b = AlignedBuf::zeroed(total);
        {
            let mut rest = b.as_mut_slice();
            let mut ops = Vec::with_capacity(reqs.len());
            for &(a0, a1) in spans.iter().filter(|(a0, a1)| a1 > a0) {
                let (cur, tail) = rest.split_at_mut((a1 - a0) as usize);
                rest = tail;
                ops.push((a0, cur, false));
            }
            self.counters.add(one(C_READS, ops.len() as u64));
            if let Err(f) = self.transfer(&mut ops) {
                drop(ops);
                return Err(f.leaking(b));
            }
        }
        let mut at = 0usize;
        for ((off, buf), &(a0, a1)) in reqs.iter_mut().zip(&spans) {
            if a1 == a0 {
                continue;
            }
            let from = at + (*off - a0) as usize;
            buf.copy_from_slice(&b.as_slice()[from..from + buf.len()]);
            at += (a1 - a0) as usize;
        }
        Ok(())
    }

    /// Write `data` at device byte `off`. A write that does not cover whole
    /// aligned blocks reads them first (the caller's range lock keeps
    /// other writers off the page). Not durable until [`Device::flush`].
    pub(crate) fn write(&self, off: u64, data: &[u8]) -> Result<()> {
        self.write_many(&[(off, data)])
    }

    /// Write each `(device byte offset, data)` of `reqs`, as
    /// [`Device::write`] does: one transfer per request, all issued
    /// together (the partial blocks' reads first, also together).
    /// Requests that share an aligned block are written one after the
    /// other, in order.
    pub(crate) fn write_many(&self, reqs: &[(u64, &[u8])]) -> Result<()> {
        let mut spans = Vec::with_capacity(reqs.len());
        let mut total = 0usize;
        for &(off, data) in reqs {
            if data.is_empty() {
                spans.push((0, 0));
                continue;
            }
            self.check(off, data.len())?;
            let (a0, a1) = Self::span(off, data.len());
            spans.push((a0, a1));
            total += (a1 - a0) as usize;
        }
        if total == 0 {
            return Ok(());
        }
        if reqs.len() > 1 {
            let mut sorted: Vec<(u64, u64)> =
                spans.iter().copied().filter(|(a0, a1)| a1 > a0).collect();
            sorted.sort_unstable();
            if sorted.windows(2).any(|w| w[1].0 < w[0].1) {
                for &(off, data) in reqs {
                    self.write_many(&[(off, data)])?;
                }
                return Ok(());
            }
        }
        if let Some(k) = group_end(&spans, total) {
            self.write_many(&reqs[..k])?;
            return self.write_many(&reqs[k..]);
        }
        let mut b = AlignedBuf::zeroed(total);
        if let Err(f) = self.write_spans(reqs, &spans, &mut b) {
            return Err(f.leaking(b));
        }
        let mut c = one(
            C_WRITES,
            spans.iter().filter(|(a0, a1)| a1 > a0).count() as u64,
        );
        c[C_BYTES] = total as u64;
        self.counters.add(c);
        // Published after the writes completed: a flush that sees it clear
        // started after this store, or runs one that covers the writes.
        if !self.dirty.load(Ordering::Acquire) {
            self.dirty.store(true, Ordering::Release);
        }
        Ok(())
    }

    /// [`Device::write_many`]'s transfers through `b`, one aligned span of
    /// it per request.
    fn write_spans(
        &self,
        reqs: &[(u64, &[u8])],
        spans: &[(u64, u64)],
        b: &mut AlignedBuf,
    ) -> std::result::Result<(), Failed> {
        // The partial first and last blocks of each span, read together.
        let mut edges: Vec<(u64, &mut [u8], bool)> = Vec::new();
        let mut rest = b.as_mut_slice();
        let mut pieces = Vec::with_capacity(reqs.len());
        for (&(off, data), &(a0, a1)) in reqs.iter().zip(spans) {
            if a1 == a0 {
                continue;
            }
            let (cur, tail) = rest.split_at_mut((a1 - a0) as usize);
            rest = tail;
            pieces.push((a0, off, data, cur));
        }
        for (a0, off, data, cur) in pieces.iter_mut() {
            let a1 = *a0 + cur.len() as u64;
            let head = *off != *a0;
            let tail = *off + data.len() as u64 != a1;
            let single = cur.len() == ALIGN;
            let (first, others) = cur.split_at_mut(ALIGN);
            if head || (tail && single) {
                edges.push((*a0, first, false));
            }
            if tail && !single {
                let n = others.len();
                edges.push((a1 - ALIGN as u64, &mut others[n - ALIGN..], false));
            }
        }
        if !edges.is_empty() {
            self.counters.add(one(C_READS, edges.len() as u64));
            self.transfer(&mut edges)?;
        }
        drop(edges);
        let mut ops = Vec::with_capacity(pieces.len());
        for (a0, off, data, cur) in pieces {
            let from = (off - a0) as usize;
            cur[from..from + data.len()].copy_from_slice(data);
            ops.push((a0, cur, true));
        }
        self.transfer(&mut ops)
    }

    /// Whether a write completed since the last flush started.
    pub(crate) fn is_dirty(&self) -> bool {
        self.dirty.load(Ordering::Acquire)
    }

    /// Make every completed write durable: `fdatasync`, skipped when
    /// nothing was written since the last flush started. A caller that
    /// finds the device clean returns only once every flush started
    /// before it completed (one of them cleared the flag after the
    /// caller's writes completed, so covers them); flushes of different
    /// callers overlap, as two `fdatasync`s of one file do.
    pub(crate) fn flush(&self) -> Result<()> {
        let mut g = self.flushes_in_flight.lock();
        if !self.dirty.swap(false, Ordering::AcqRel) {
            self.counters.add(one(C_SKIPPED, 1));
            let last = g.0;
            while g.1.first().is_some_and(|&t| t <= last) {
                self.flush_done.wait(&mut g);
            }
            drop(g);
            if self.flush_failed.load(Ordering::Acquire) {
                return Err(self.io_error(
                    "flush",
                    std::io::Error::other("an earlier flush of the device failed"),
                ));
            }
            return Ok(());
        }
        g.0 += 1;
        let ticket = g.0;
        g.1.insert(ticket);
        drop(g);
        self.counters.add(one(C_FLUSHES, 1));
        let result = self.file.sync_data();
        if result.is_err() {
            self.flush_failed.store(true, Ordering::Release);
            self.dirty.store(true, Ordering::Release);
        }
        self.flushes_in_flight.lock().1.remove(&ticket);
        self.flush_done.notify_all();
        result.map_err(|e| self.io_error("flush", e))
    }

    /// The device's counters.
    pub(crate) fn stats(&self) -> DeviceStats {
        let c = self.counters.sum();
        DeviceStats {
            writes: c[C_WRITES],
            bytes_written: c[C_BYTES],
            reads: c[C_READS],
            flushes: c[C_FLUSHES],
            flushes_skipped: c[C_SKIPPED],
            uring_batches: c[C_BATCHES],
            direct: self.direct,
            io: self.io,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_buffers_are_aligned_zeroed_and_whole_blocks() {
        for len in [1, 4096, 5000, 3 * 4096] {
            let mut b = AlignedBuf::zeroed(len);
            assert_eq!(b.as_slice().as_ptr() as usize % ALIGN, 0);
            assert_eq!(b.as_slice().len() % ALIGN, 0);
            assert!(b.as_slice().len() >= len);
            assert!(b.as_slice().iter().all(|&x| x == 0));
            b.as_mut_slice()[len - 1] = 7;
            assert_eq!(b.as_slice()[len - 1], 7);
        }
    }

    /// A 16-block device in `dir` issuing transfers as `io` says; `None`
    /// when `io` is `Uring` and this kernel refuses io_uring (the test
    /// then has nothing to check).
    fn device(dir: &tempfile::TempDir, io: DeviceIo) -> Option<Device> {
        let path = dir.path().join("dev");
        let (file, direct) = open_file(&path, true, true).unwrap();
        file.set_len(16 * 4096).unwrap();
        let mut dev = Device::new(file, path, 16 * 4096, direct);
        if dev.set_io(io) != io {
            use crate::test_support::{Lack, skip};
            let test = std::thread::current().name().unwrap_or("device").to_owned();
            skip(&test, Lack::Machine, "io_uring unavailable here");
            return None;
        }
        assert_eq!(dev.stats().io, io);
        Some(dev)
    }

    #[test]
    fn unaligned_reads_and_writes_round_trip_and_flushes_skip_when_clean() {
        round_trip(DeviceIo::Sync);
    }

    #[test]
    fn uring_unaligned_reads_and_writes_round_trip_and_flushes_skip_when_clean() {
        round_trip(DeviceIo::Uring);
    }

    fn round_trip(io: DeviceIo) {
        let dir = tempfile::tempdir().unwrap();
        let Some(dev) = device(&dir, io) else { return };
        dev.write(4096, &[1u8; 4096]).unwrap();
        dev.write(4096 + 100, &[2u8; 5000]).unwrap();
        let mut got = vec![0u8; 3 * 4096];
        dev.read(4096, &mut got).unwrap();
        assert!(got[..100].iter().all(|&x| x == 1));
        assert!(got[100..5100].iter().all(|&x| x == 2));
        assert!(got[5100..4096 * 2].iter().all(|&x| x == 0));
        assert!(dev.is_dirty());
        dev.flush().unwrap();
        assert!(!dev.is_dirty());
        dev.flush().unwrap();
        let s = dev.stats();
        assert_eq!((s.flushes, s.flushes_skipped), (1, 1));
        // Concurrent writers and flushers: every flush returns, each
        // write is covered by a flush that started after it completed.
        std::thread::scope(|sc| {
            for t in 0..4u64 {
                let dev = &dev;
                sc.spawn(move || {
                    for i in 0..50u64 {
                        dev.write(((t * 50 + i) % 16) * 4096, &[t as u8; 4096])
                            .unwrap();
                        dev.flush().unwrap();
                        assert!(dev.flushes_in_flight.lock().1.len() <= 4);
                    }
                });
            }
        });
        assert!(dev.flushes_in_flight.lock().1.is_empty());
        let s = dev.stats();
        assert_eq!(s.flushes + s.flushes_skipped, 2 + 200);
        assert!(dev.read(16 * 4096 - 10, &mut [0u8; 11]).is_err());
        assert!(dev.write(16 * 4096, &[0u8; 1]).is_err());
    }

    #[test]
    fn batches_of_runs_round_trip_on_both_backends_alike() {
        let dir = tempfile::tempdir().unwrap();
        for io in [DeviceIo::Sync, DeviceIo::Uring] {
            let Some(dev) = device(&dir, io) else { return };
            // Three runs, not contiguous, two of them not block aligned
            // (their edge blocks are read first, in one batch).
            let a = vec![0xa1u8; 3 * 4096];
            let b = vec![0xb2u8; 100];
            let c = vec![0xc3u8; 4096 + 10];
            dev.write(0, &[0x11u8; 16 * 4096]).unwrap();
            let before = dev.stats();
            dev.write_many(&[(4096, &a), (8 * 4096 + 50, &b), (12 * 4096 - 5, &c)])
                .unwrap();
            let after = dev.stats();
            assert_eq!(after.writes - before.writes, 3);
            // Two batches through the ring: the edge reads, the writes.
            let ring = u64::from(io == DeviceIo::Uring) * 2;
            assert_eq!(after.uring_batches - before.uring_batches, ring);
            assert_eq!(
                after.reads - before.reads,
                3,
                "{io}: edge blocks read once each"
            );
            let mut want = vec![0x11u8; 16 * 4096];
            want[4096..4 * 4096].fill(0xa1);
            want[8 * 4096 + 50..8 * 4096 + 150].fill(0xb2);
            want[12 * 4096 - 5..13 * 4096 + 5].fill(0xc3);
            let mut whole = vec![0u8; 16 * 4096];
            dev.read(0, &mut whole).unwrap();
            assert!(whole == want, "{io}: contents after the batch");
            // Reads of several runs, unaligned, and an empty one.
            let (mut x, mut y, mut z) = (vec![0u8; 5000], vec![0u8; 0], vec![0u8; 7]);
            dev.read_many(&mut [
                (4096 - 100, &mut x[..]),
                (3, &mut y[..]),
                (13 * 4096 + 1, &mut z[..]),
            ])
            .unwrap();
            assert!(x[..] == want[4096 - 100..4096 - 100 + 5000]);
            assert!(z[..] == want[13 * 4096 + 1..13 * 4096 + 8]);
            // Requests that share a block are written in order.
            dev.write_many(&[(2 * 4096, &[1u8; 10]), (2 * 4096 + 5, &[2u8; 10])])
                .unwrap();
            let mut got = [0u8; 16];
            dev.read(2 * 4096, &mut got).unwrap();
            assert_eq!(&got[..15], &[1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2]);
            // A batch of eight single blocks, every other one.
            let pages: Vec<Vec<u8>> = (0..8).map(|i| vec![i as u8 + 1; 4096]).collect();
            let reqs: Vec<(u64, &[u8])> = pages
                .iter()
                .enumerate()
                .map(|(i, p)| ((2 * i as u64) * 4096, &p[..]))
                .collect();
            dev.write_many(&reqs).unwrap();
            let mut backs: Vec<Vec<u8>> = (0..8).map(|_| vec![0u8; 4096]).collect();
            let mut rreqs: Vec<(u64, &mut [u8])> = backs
                .iter_mut()
                .enumerate()
                .map(|(i, p)| ((2 * i as u64) * 4096, &mut p[..]))
                .collect();
            dev.read_many(&mut rreqs).unwrap();
            assert!(backs == pages, "{io}: every other block");
            // Past the end: refused before any transfer, nothing changes.
            let s0 = dev.stats();
            assert!(matches!(
                dev.read_many(&mut [(0, &mut [0u8; 1][..]), (16 * 4096 - 1, &mut [0u8; 2][..])]),
                Err(Error::Corrupt { .. })
            ));
            assert!(
                dev.write_many(&[(0, &[9u8][..]), (16 * 4096, &[9u8][..])])
                    .is_err()
            );
            assert_eq!(dev.stats(), s0);
            let mut one = [0u8; 1];
            dev.read(0, &mut one).unwrap();
            assert_eq!(one[0], 1);
        }
    }

    #[test]
    fn device_io_parses_and_prints() {
        for io in [DeviceIo::Sync, DeviceIo::Uring] {
            assert_eq!(io.to_string().parse::<DeviceIo>().unwrap(), io);
        }
        assert!("aio".parse::<DeviceIo>().is_err());
        assert_eq!(DeviceIo::default(), DeviceIo::Uring);
    }

    #[test]
    fn uring_errors_are_typed_with_the_device_path() {
        // A file shorter than the device the pool expects: a read past its
        // end comes back short, and is an I/O error naming the device.
        let dir = tempfile::tempdir().unwrap();
        for io in [DeviceIo::Sync, DeviceIo::Uring] {
            let path = dir.path().join("short");
            let (file, direct) = open_file(&path, true, true).unwrap();
            file.set_len(4096).unwrap();
            let mut dev = Device::new(file, path.clone(), 4 * 4096, direct);
            if dev.set_io(io) != io {
                return;
            }
            let e = dev.read(2 * 4096, &mut [0u8; 10]).unwrap_err();
            assert!(matches!(e, Error::Io { .. }), "{io}: {e}");
            assert!(e.to_string().contains("short"), "{io}: {e}");
            // In a batch (through the ring with `Uring`): the first
            // transfer reads, the second comes back empty and fails.
            let (mut a, mut b) = ([0u8; 10], [0u8; 10]);
            let e = dev
                .read_many(&mut [(0, &mut a[..]), (2 * 4096, &mut b[..])])
                .unwrap_err();
            assert!(matches!(e, Error::Io { .. }), "{io}: {e}");
            // A device opened read-only refuses writes, per transfer.
            let (ro, direct) = open_file(&path, false, false).unwrap();
            let mut dev = Device::new(ro, path.clone(), 4 * 4096, direct);
            dev.set_io(io);
            let e = dev.write(0, &[1u8; 4096]).unwrap_err();
            assert!(matches!(e, Error::Io { .. }), "{io}: {e}");
            let e = dev
                .write_many(&[(0, &[1u8; 4096][..]), (2 * 4096, &[2u8; 4096][..])])
                .unwrap_err();
            assert!(matches!(e, Error::Io { .. }), "{io}: {e}");
            assert_eq!(
                dev.stats().uring_batches,
                u64::from(io == DeviceIo::Uring),
                "{io}: the failed write batch went through the ring"
            );
        }
    }

    #[test]
    fn batches_over_the_staging_limit_go_in_several() {
        let dir = tempfile::tempdir().unwrap();
        for io in [DeviceIo::Sync, DeviceIo::Uring] {
            let path = dir.path().join(format!("big-{io}"));
            let (file, direct) = open_file(&path, true, true).unwrap();
            let len = 3 * BATCH_BYTES as u64;
            file.set_len(len).unwrap();
            let mut dev = Device::new(file, path, len, direct);
            if dev.set_io(io) != io {
                return;
            }
            // Four requests of half the limit, 4 KiB apart: two batches.
            let half = BATCH_BYTES / 2;
            let parts: Vec<Vec<u8>> = (0..4u8).map(|i| vec![i + 1; half]).collect();
            let at = |i: usize| (i * (half + ALIGN)) as u64;
            let reqs: Vec<(u64, &[u8])> = parts
                .iter()
                .enumerate()
                .map(|(i, p)| (at(i), &p[..]))
                .collect();
            dev.write_many(&reqs).unwrap();
            let mut back: Vec<Vec<u8>> = (0..4).map(|_| vec![0u8; half]).collect();
            let mut rreqs: Vec<(u64, &mut [u8])> = back
                .iter_mut()
                .enumerate()
                .map(|(i, p)| (at(i), &mut p[..]))
                .collect();
            dev.read_many(&mut rreqs).unwrap();
            assert!(back == parts, "{io}");
            let s = dev.stats();
            assert_eq!((s.writes, s.reads), (4, 4), "{io}");
            let ring = u64::from(io == DeviceIo::Uring) * 4;
            assert_eq!(s.uring_batches, ring, "{io}: two batches each way");
        }
        assert_eq!(group_end(&[(0, 4096)], 1 << 40), None);
        let spans = [(0, 6 << 20), (8 << 20, 14 << 20), (16 << 20, 17 << 20)];
        assert_eq!(group_end(&spans, 13 << 20), Some(1));
        let spans = [(0, 9 << 20), (16 << 20, 17 << 20)];
        assert_eq!(group_end(&spans, 10 << 20), Some(1));
    }
}
