//! The data device: `O_DIRECT` reads and writes through 4 KiB-aligned
//! buffers, and flushes that are skipped when nothing was written since
//! the last one.

use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::fs::File;
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
    /// Whether the device is open with `O_DIRECT`.
    pub direct: bool,
}

/// An open data device.
#[derive(Debug)]
pub(crate) struct Device {
    file: File,
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
    /// Per-CPU counters: writes, bytes written, reads, flushes, flushes
    /// skipped (the `C_*` indices).
    counters: crate::cpu::Counters<5>,
}

const C_WRITES: usize = 0;
const C_BYTES: usize = 1;
const C_READS: usize = 2;
const C_FLUSHES: usize = 3;
const C_SKIPPED: usize = 4;

/// A counter increment of `v` at index `i`.
fn one(i: usize, v: u64) -> [u64; 5] {
    let mut a = [0; 5];
    a[i] = v;
    a
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

    fn read_aligned(&self, a0: u64, buf: &mut AlignedBuf) -> Result<()> {
        self.counters.add(one(C_READS, 1));
        self.file
            .read_exact_at(buf.as_mut_slice(), a0)
            .map_err(|e| self.io_error("read", e))
    }

    /// Copy `buf.len()` bytes at device byte `off` into `buf`.
    pub(crate) fn read(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        self.check(off, buf.len())?;
        let (a0, a1) = Self::span(off, buf.len());
        let mut b = AlignedBuf::zeroed((a1 - a0) as usize);
        self.read_aligned(a0, &mut b)?;
        let from = (off - a0) as usize;
        buf.copy_from_slice(&b.as_slice()[from..from + buf.len()]);
        Ok(())
    }

    /// Write `data` at device byte `off`. A write that does not cover whole
    /// aligned blocks reads them first (the caller's range lock keeps
    /// other writers off the page). Not durable until [`Device::flush`].
    pub(crate) fn write(&self, off: u64, data: &[u8]) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        self.check(off, data.len())?;
        let (a0, a1) = Self::span(off, data.len());
        let mut b = AlignedBuf::zeroed((a1 - a0) as usize);
        if a0 != off || a1 != off + data.len() as u64 {
            self.read_aligned(a0, &mut b)?;
        }
        let from = (off - a0) as usize;
        b.as_mut_slice()[from..from + data.len()].copy_from_slice(data);
        self.file
            .write_all_at(b.as_slice(), a0)
            .map_err(|e| self.io_error("write", e))?;
        let mut c = one(C_WRITES, 1);
        c[C_BYTES] = a1 - a0;
        self.counters.add(c);
        // Published after the write completed: a flush that sees it clear
        // started after this store, or runs one that covers the write.
        if !self.dirty.load(Ordering::Acquire) {
            self.dirty.store(true, Ordering::Release);
        }
        Ok(())
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
            direct: self.direct,
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

    #[test]
    fn unaligned_reads_and_writes_round_trip_and_flushes_skip_when_clean() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dev");
        let (file, direct) = open_file(&path, true, true).unwrap();
        file.set_len(16 * 4096).unwrap();
        let dev = Device::new(file, path, 16 * 4096, direct);
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
}
