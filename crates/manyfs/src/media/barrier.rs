//! Ranged durability points for `file` mode.

use super::{Durability, Media};
use crate::error::{Error, Result};
use std::os::fd::AsRawFd;

/// The unit `sync_blocks` counts in: one pool block.
pub(crate) const SYNC_UNIT: u64 = crate::layout::BLOCK_SIZE;

/// Runs of neighbouring block numbers in a sorted, deduplicated list, as
/// half-open `(start, end)` ranges.
fn runs(blocks: &[u64]) -> impl Iterator<Item = (u64, u64)> + '_ {
    let mut i = 0;
    std::iter::from_fn(move || {
        let start = *blocks.get(i)?;
        let mut end = start + 1;
        i += 1;
        while i < blocks.len() && blocks[i] == end {
            end += 1;
            i += 1;
        }
        Some((start, end))
    })
}

/// Sort half-open block ranges and merge the ones that touch or overlap.
pub(crate) fn merge_ranges(ranges: &mut Vec<(u64, u64)>) {
    ranges.retain(|&(s, e)| e > s);
    ranges.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for &(s, e) in ranges.iter() {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    *ranges = out;
}

impl Media {
    /// A durability point for the given blocks only (sorted and deduplicated
    /// in place); see [`Media::sync_block_ranges`]. A no-op outside `file`
    /// mode.
    pub fn sync_blocks(&self, blocks: &mut Vec<u64>) -> Result<()> {
        if !self.marked() || !self.writable || blocks.is_empty() {
            return Ok(());
        }
        self.check_alive()?;
        self.check_size()?;
        blocks.sort_unstable();
        blocks.dedup();
        let mut ranges: Vec<(u64, u64)> = runs(blocks).collect();
        self.sync_block_ranges(&mut ranges)
    }

    /// A durability point for the cache line at `line_offset` of each of
    /// `pages` (left sorted and deduplicated), the only line of each page
    /// stored without a flush (a log page's footer: `log::durable`). In
    /// `file` mode the pages whole ([`Media::sync_blocks`]: the page cache
    /// writes a page back whole). On a tiered `pm` (or `dram`) pool only
    /// that line of each page: every other store was flushed when it was
    /// made, as in `pm` mode. A no-op outside `file` mode and tiered pools.
    pub fn sync_page_lines(&self, pages: &mut Vec<u64>, line_offset: u64) -> Result<()> {
        if self.mode == Durability::File {
            return self.sync_blocks(pages);
        }
        if !self.marked() || !self.writable || pages.is_empty() {
            return Ok(());
        }
        self.check_alive()?;
        pages.sort_unstable();
        pages.dedup();
        for &page in pages.iter() {
            self.flush(page * SYNC_UNIT + line_offset, super::CACHE_LINE)?;
        }
        self.fence();
        Ok(())
    }

    /// A full sync's first barrier. In `file` mode the whole pool
    /// ([`Media::sync_all`]: the page cache keeps no order, and not every
    /// store is recorded). On a tiered `pm`/`dram` pool the device, then
    /// only `ranges`, the blocks the appends since the last sync recorded:
    /// every other store to the pool was flushed when it was made (as in
    /// `pm` mode), so a full sync costs what changed, not a flush of every
    /// line of the pool. Counted as one full sync either way.
    pub fn sync_for_full_sync(&self, ranges: &mut Vec<(u64, u64)>) -> Result<()> {
        if self.mode == Durability::File || self.device.is_none() {
            return self.sync_all();
        }
        self.flush_device()?;
        self.persisted.add([0, 0, 0, 1]);
        self.sync_block_ranges(ranges)?;
        self.fence();
        Ok(())
    }

    /// Whether a durability point must cover whole pages: `file` mode,
    /// where the page cache is the medium.
    pub(crate) fn syncs_whole_pages(&self) -> bool {
        self.mode == Durability::File
    }

    /// A durability point for the given half-open block ranges only (merged
    /// in place). Every run is started with `sync_file_range(WRITE)`, then
    /// waited for; the last run goes through `msync(MS_SYNC)` of that range
    /// alone, which (ext4, xfs: a ranged `fsync`) also commits the journal
    /// and flushes the device cache. That is the whole cost of a small
    /// fsync: an `fdatasync` of the pool file would also write back every
    /// other dirty page of the pool (other files' unsynced writes).
    /// A no-op outside `file` mode.
    pub fn sync_block_ranges(&self, ranges: &mut Vec<(u64, u64)>) -> Result<()> {
        if !self.marked() || !self.writable || ranges.is_empty() {
            return Ok(());
        }
        merge_ranges(ranges);
        if let Some((_, dev_start)) = &self.device {
            // A tiered pool: the data device's blocks first (one flush, if
            // it was written since the last), then the pool's own.
            let first_dev = dev_start / SYNC_UNIT;
            if ranges.iter().any(|&(_, e)| e > first_dev) {
                self.flush_device()?;
                ranges.retain_mut(|r| {
                    r.1 = r.1.min(first_dev);
                    r.1 > r.0
                });
            }
            if self.mode != Durability::File {
                // `pm`: flush and fence; `dram`: the same calls cost
                // nothing and show an observer what `pm` mode would do,
                // and count the flushes `pm` does here.
                for &(s, e) in ranges.iter() {
                    self.count_flushed(s * SYNC_UNIT, ((e - s) * SYNC_UNIT) as usize);
                }
                for &(s, e) in ranges.iter() {
                    self.flush_lines(s * SYNC_UNIT, ((e - s) * SYNC_UNIT) as usize)?;
                }
                self.fence();
                return Ok(());
            }
        }
        let Some(&(last_start, last_end)) = ranges.last() else {
            return Ok(());
        };
        if self.has_failed() {
            return Err(self.failure_error());
        }
        self.check_size()?;
        if let Some(o) = &self.observer {
            for &(start, end) in ranges.iter() {
                if let Err(e) =
                    o.0.on_sync(start * SYNC_UNIT, ((end - start) * SYNC_UNIT) as usize)
                {
                    self.fail(format!("msync failed: {e}"));
                    return Err(Error::io(format!("msync {}", self.path.display()), e));
                }
            }
        }
        let fail = |what: &str, path: &std::path::Path| {
            let err = std::io::Error::last_os_error();
            self.fail(format!("an earlier sync failed ({err})"));
            Err(Error::io(format!("{what} {}", path.display()), err))
        };
        // `sync_file_range` of pool blocks `[start, end)`: one call per
        // member the range touches, on that member's descriptor and at its
        // own offsets.
        let sfr = |start: u64, end: u64, flags: libc::c_uint| -> Result<()> {
            let (off, len) = (start * SYNC_UNIT, (end - start) * SYNC_UNIT);
            for (m, local, _, n) in self.pieces(off, len) {
                // SAFETY: sync_file_range on a descriptor we own; no memory
                // involved.
                let rc = unsafe {
                    libc::sync_file_range(
                        m.file.as_raw_fd(),
                        local as libc::off64_t,
                        n as libc::off64_t,
                        flags,
                    )
                };
                if rc != 0 {
                    return fail("sync_file_range", &m.path);
                }
            }
            Ok(())
        };
        let n = ranges.len();
        for &(start, end) in ranges.iter() {
            self.count_synced(start * SYNC_UNIT, (end - start) * SYNC_UNIT, 0);
        }
        self.persisted
            .add([0, 0, if n > 1 { 2 * n as u64 } else { 1 }, 0]);
        if n > 1 {
            // Start the write-back of every run, the last one too, so that
            // the device has all of them in flight at once; then wait for
            // each but the last, which the `msync` below waits for.
            for &(start, end) in ranges.iter() {
                sfr(start, end, libc::SYNC_FILE_RANGE_WRITE)?;
            }
            for &(start, end) in &ranges[..n - 1] {
                let flags = libc::SYNC_FILE_RANGE_WAIT_BEFORE
                    | libc::SYNC_FILE_RANGE_WRITE
                    | libc::SYNC_FILE_RANGE_WAIT_AFTER;
                sfr(start, end, flags)?;
            }
        }
        let off = (last_start * SYNC_UNIT) as usize;
        let len = ((last_end - last_start) * SYNC_UNIT) as usize;
        let start = self.check(off as u64, len)?;
        // SAFETY: [start, start+len) lies inside the mapping (checked above)
        // and is page aligned (block multiples of the mapping's base). A
        // range that crosses members spans their mappings, which lie back
        // to back: `msync` syncs each mapping's own file.
        let rc = unsafe { libc::msync(self.base.add(start).cast(), len, libc::MS_SYNC) };
        if rc != 0 {
            return fail("msync", &self.path);
        }
        Ok(())
    }
}
