//! Ranged durability points for `file` mode.

use super::{Durability, Media};
use crate::error::{Error, Result};
use crate::layout::BLOCK_SIZE;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;

impl Media {
    /// A durability point for the given blocks only (sorted and deduplicated
    /// in place): each run of neighbouring blocks is written and waited for
    /// with `sync_file_range`, then one `fdatasync` flushes the device cache.
    /// A no-op outside `file` mode.
    pub fn sync_blocks(&self, blocks: &mut Vec<u64>) -> Result<()> {
        if self.mode != Durability::File || !self.writable || blocks.is_empty() {
            return Ok(());
        }
        if self.recorder.is_some() {
            return Ok(());
        }
        if self.inject_sync_failure.load(Ordering::Relaxed) {
            self.failed.store(true, Ordering::Relaxed);
            return Err(Error::io(
                format!("sync {} (injected)", self.path.display()),
                std::io::Error::from_raw_os_error(libc::EIO),
            ));
        }
        blocks.sort_unstable();
        blocks.dedup();
        let fd = self._file.as_raw_fd();
        let fail = |what: &str| {
            self.failed.store(true, Ordering::Relaxed);
            Err(Error::io(
                format!("{what} {}", self.path.display()),
                std::io::Error::last_os_error(),
            ))
        };
        let mut i = 0;
        while i < blocks.len() {
            let start = blocks[i];
            let mut end = start + 1;
            i += 1;
            while i < blocks.len() && blocks[i] == end {
                end += 1;
                i += 1;
            }
            // SAFETY: sync_file_range on a descriptor we own; no memory involved.
            let rc = unsafe {
                libc::sync_file_range(
                    fd,
                    (start * BLOCK_SIZE) as libc::off64_t,
                    ((end - start) * BLOCK_SIZE) as libc::off64_t,
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
