//! Routing to a tiered pool's data device (`crate::tier`): pool offsets
//! from the end of the mapping on are the device's bytes, read and
//! written by transfers instead of through the mapping.

use super::{Durability, Media, MediaView};
use crate::error::{Error, Result};

impl Media {
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
    #[inline]
    pub(crate) fn on_data_device(&self, off: u64) -> bool {
        self.device.as_ref().is_some_and(|(_, start)| off >= *start)
    }

    /// The data device, if the pool has one.
    #[inline]
    pub(crate) fn device(&self) -> Option<&crate::tier::Device> {
        self.device.as_ref().map(|(d, _)| d)
    }

    /// Whether durability needs durable marks: the page cache (`file`
    /// mode) or a data device can make a later write durable before an
    /// earlier one, so a commit counts only once a barrier covered it.
    #[inline]
    pub(crate) fn marked(&self) -> bool {
        self.mode == Durability::File || self.device.is_some()
    }

    /// `Some(device offset)` when `[off, off+len)` is on the data device
    /// (an error when it starts there but does not fit); `None` for an
    /// offset in the mapping.
    #[inline]
    pub(super) fn on_device(
        &self,
        off: u64,
        len: usize,
    ) -> Option<Result<(&crate::tier::Device, u64)>> {
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

    /// Write `data` at pool offset `off`, device offset `local`, and tell
    /// the observer (as a store: not durable before a barrier). A failure
    /// fails the media: the device may hold part of the write.
    pub(super) fn device_write(
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
}
