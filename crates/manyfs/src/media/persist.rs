//! Making bytes durable: cache-line flushes, fences, ranged and full
//! durability points (`msync` in `file` mode), and the counts of what the
//! pool's medium was asked to make durable ([`PersistStats`]).

use super::mapping::page_size;
use super::{CACHE_LINE, Durability, Media, MediaView};
use crate::error::{Error, Result};

pub(super) const P_BYTES: usize = 0;
pub(super) const P_LINES: usize = 1;
pub(super) const P_SYNCS: usize = 2;
pub(super) const P_FULL: usize = 3;

/// What a pool's medium was asked to make durable since the mount: the
/// metadata cost of the file system's durability points, in bytes and in
/// cache lines. Counted per thread (no shared line and no atomic
/// read-modify-write on the I/O path) and summed when read.
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

impl Media {
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
    pub(super) fn count_flushed(&self, off: u64, len: usize) {
        if self.mode != Durability::File && len != 0 {
            self.persisted
                .add([len as u64, lines_covered(off, len as u64), 0, 0]);
        }
    }

    /// Count a ranged durability point of the pool file over
    /// `[off, off+len)`, rounded out to whole pages.
    pub(super) fn count_synced(&self, off: u64, len: u64, calls: u64) {
        let page = page_size() as u64;
        let a0 = off / page * page;
        let a1 = (off + len).next_multiple_of(page);
        self.persisted
            .add([a1 - a0, lines_covered(a0, a1 - a0), calls, 0]);
    }

    /// Write back every cache line overlapping `[off, off+len)`.
    #[inline]
    pub fn flush(&self, off: u64, len: usize) -> Result<()> {
        if self.on_device(off, len).is_none() {
            self.count_flushed(off, len);
        }
        self.flush_lines(off, len)
    }

    /// [`Media::flush`] without counting (for callers that counted).
    #[inline]
    pub(super) fn flush_lines(&self, off: u64, len: usize) -> Result<()> {
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
    #[inline]
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
    #[inline]
    pub fn persist(&self, off: u64, len: usize) -> Result<()> {
        self.flush(off, len)?;
        self.fence();
        Ok(())
    }

    /// A durability point: in `file` mode, `msync` the range so it reaches
    /// the disk; in `pm` mode flushed data already is durable; in `dram`
    /// mode nothing is.
    pub fn sync_range(&self, off: u64, len: usize) -> Result<()> {
        self.sync_range_counted(off, len, true)
    }

    /// [`Media::sync_range`], counted in [`Media::persist_stats`] or not
    /// (a full sync is counted as one).
    pub(super) fn sync_range_counted(&self, off: u64, len: usize, count: bool) -> Result<()> {
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

#[cfg(test)]
mod tests {
    use super::super::FlushInstr;
    use super::super::testing::pool;
    use super::*;

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
}
