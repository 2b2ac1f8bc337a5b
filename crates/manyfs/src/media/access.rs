//! Byte access to the pool: bounds-checked reads and stores (cached,
//! non-temporal, 8-byte atomic) of the mapping, and in `file` mode the
//! stores through the descriptor, one at a time or in batches. A range
//! past the mapping goes to the data device (`device.rs`); a batch sends
//! all of its device ranges as one batch of transfers.

use super::{Durability, Media, MediaView, PersistObserver, remote};
use crate::error::{Error, Result};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

impl Media {
    /// Report every persistence event from now on to `observer` (crash
    /// explorer, fault injection). The hardware flushes and fences are
    /// skipped: the observer models them.
    pub fn attach_observer(&mut self, observer: Arc<dyn PersistObserver>) {
        self.observer = Some(super::observer::Attached(observer));
    }

    /// Pass the workload marker `tag` to the attached observer, if any.
    pub fn note(&self, tag: u64) {
        if let Some(o) = &self.observer {
            o.0.on_note(tag, &MediaView::new(self));
        }
    }

    /// Length of the mapping in bytes.
    #[inline]
    pub fn len(&self) -> u64 {
        self.len as u64
    }

    /// Whether the mapping is empty (never true for an opened pool).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    pub(super) fn check(&self, off: u64, len: usize) -> Result<usize> {
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
    #[inline]
    pub fn store(&self, off: u64, data: &[u8]) -> Result<()> {
        self.check_writable()?;
        if let Some(d) = self.on_device(off, data.len()) {
            return self.device_write(d?, off, data);
        }
        let start = self.check(off, data.len())?;
        self.store_checked(start, off, data)
    }

    /// [`Media::store`] then [`Media::flush`] of the same range, with the
    /// media's state and the range checked once (a log entry's slots).
    #[inline]
    pub fn store_flushed(&self, off: u64, data: &[u8]) -> Result<()> {
        self.check_writable()?;
        if let Some(d) = self.on_device(off, data.len()) {
            self.device_write(d?, off, data)?;
            return self.flush_lines(off, data.len());
        }
        let start = self.check(off, data.len())?;
        self.store_checked(start, off, data)?;
        self.count_flushed(off, data.len());
        self.flush_lines(off, data.len())
    }

    /// The cached store of [`Media::store`] to the mapping (or through the
    /// descriptor), `[off, off+len)` already checked to lie at `start`.
    #[inline]
    fn store_checked(&self, start: usize, off: u64, data: &[u8]) -> Result<()> {
        self.charge(off, data.len(), remote::Access::Write);
        if self.writes_through_fd() {
            self.write_at(off, data)?;
            if let Some(r) = &self.observer {
                r.0.on_store(off, data.len(), &MediaView::new(self));
            }
            return self.check_faults();
        }
        // SAFETY: every caller checked (`Media::check`) that `start` and
        // `data.len()` lie inside the mapping; the source is a distinct
        // allocation, so the ranges do not overlap.
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
        if self.mode == Durability::File {
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
        // `dram`, or `pm` at an unaligned start: cached stores, flushed.
        self.store_checked(start, off, data)?;
        self.flush_lines(off, data.len())
    }

    #[inline]
    pub(super) fn atomic_u64(&self, off: u64) -> Result<&AtomicU64> {
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
    #[inline]
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

    /// Whether stores go through the file descriptor (`pwrite`) instead
    /// of the mapping: in `file` mode, unless every member is on tmpfs. A
    /// page dirtied through a shared mapping costs the disk file system a
    /// journal commit at every durability point (ext4's `page_mkwrite`
    /// path: measured 750 us against 190 us for the same 4 KiB made
    /// durable after a `pwrite`); the page cache keeps the mapping, which
    /// still serves every read, coherent with the descriptor. On tmpfs a
    /// store through the mapping skips a system call per store, and the
    /// durability points (which cover whole pages in `file` mode either
    /// way) are the same.
    #[inline]
    pub(super) fn writes_through_fd(&self) -> bool {
        self.stores_via_fd
    }

    /// `pwrite` all of `data` at `off` (bounds checked by the caller). A
    /// failure fails the media: the page cache may hold part of the write.
    /// A write that crosses from one member into the next is one `pwrite`
    /// per member.
    pub(super) fn write_at(&self, off: u64, data: &[u8]) -> Result<()> {
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
}

#[cfg(test)]
mod tests {
    use super::super::testing::pool;
    use super::super::{Durability, Media};
    use crate::error::Error;

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

    /// `file` mode stores through the descriptor on a disk file system and
    /// through the mapping on tmpfs; either way what is stored reads back
    /// through the mapping and from the file itself, before and after a
    /// durability point.
    #[test]
    fn file_mode_stores_through_the_fd_on_disk_and_the_mapping_on_tmpfs() {
        let shm = std::path::Path::new("/dev/shm");
        let mut dirs = vec![tempfile::tempdir().unwrap()];
        if super::super::numa::on_tmpfs(shm) {
            dirs.push(tempfile::tempdir_in(shm).unwrap());
        }
        for dir in &dirs {
            let path = dir.path().join("p");
            let on_disk = !super::super::numa::on_tmpfs(dir.path());
            let m = Media::create(&path, 1 << 20, Durability::File).unwrap();
            assert_eq!(m.writes_through_fd(), on_disk, "{}", dir.path().display());
            m.store(100, b"hello").unwrap();
            m.nt_copy(4096, &[7u8; 4096]).unwrap();
            m.store_u64(64, 0xdead_beef).unwrap();
            m.zero(4096, 3).unwrap();
            assert_eq!(m.read_vec(100, 5).unwrap(), b"hello");
            m.sync_range(0, 8192).unwrap();
            let file = std::fs::read(&path).unwrap();
            assert_eq!(&file[100..105], b"hello");
            assert_eq!(file[64..72], 0xdead_beef_u64.to_le_bytes());
            assert_eq!(file[4096..4100], [0, 0, 0, 7]);
        }
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
    fn read_only_mapping_refuses_stores() {
        let (d, m) = pool(Durability::File);
        drop(m);
        let ro = Media::open(&d.path().join("p"), Durability::File, false).unwrap();
        assert!(matches!(ro.store(0, b"x"), Err(Error::ReadOnly)));
        assert_eq!(ro.read_vec(0, 1).unwrap(), [0]);
    }
}
