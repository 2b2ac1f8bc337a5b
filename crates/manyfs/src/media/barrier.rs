//! Ranged durability points for `file` mode.

use super::{Durability, Media};
use crate::error::{Error, Result};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;

/// The unit `sync_blocks` counts in: one pool block (`layout::BLOCK_SIZE`,
/// which checks at compile time that the two agree).
pub(crate) const SYNC_UNIT: u64 = 4096;

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

impl Media {
    /// A durability point for the given blocks only (sorted and deduplicated
    /// in place): each run of neighbouring blocks is written and waited for
    /// with `sync_file_range`, then one `fdatasync` flushes the device cache.
    /// A no-op outside `file` mode.
    pub fn sync_blocks(&self, blocks: &mut Vec<u64>) -> Result<()> {
        if self.mode != Durability::File || !self.writable || blocks.is_empty() {
            return Ok(());
        }
        self.check_alive()?;
        self.check_size()?;
        blocks.sort_unstable();
        blocks.dedup();
        if let Some(o) = &self.observer {
            for (start, end) in runs(blocks) {
                if let Err(e) =
                    o.0.on_sync(start * SYNC_UNIT, ((end - start) * SYNC_UNIT) as usize)
                {
                    self.failed.store(true, Ordering::Relaxed);
                    return Err(Error::io(format!("sync {}", self.path.display()), e));
                }
            }
        }
        let fd = self._file.as_raw_fd();
        let fail = |what: &str| {
            self.failed.store(true, Ordering::Relaxed);
            Err(Error::io(
                format!("{what} {}", self.path.display()),
                std::io::Error::last_os_error(),
            ))
        };
        for (start, end) in runs(blocks) {
            // SAFETY: sync_file_range on a descriptor we own; no memory involved.
            let rc = unsafe {
                libc::sync_file_range(
                    fd,
                    (start * SYNC_UNIT) as libc::off64_t,
                    ((end - start) * SYNC_UNIT) as libc::off64_t,
                    libc::SYNC_FILE_RANGE_WAIT_BEFORE
                        | libc::SYNC_FILE_RANGE_WRITE
                        | libc::SYNC_FILE_RANGE_WAIT_AFTER,
                )
            };
            if rc != 0 {
                return fail("sync_file_range");
            }
        }
        // SAFETY: fdatasync on a descriptor we own.
        if unsafe { libc::fdatasync(fd) } != 0 {
            return fail("fdatasync");
        }
        Ok(())
    }
}
