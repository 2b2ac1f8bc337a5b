//! The persist-observer seam: the one way code outside the library watches
//! (and perturbs) what reaches persistence.
//!
//! With an observer attached ([`crate::diag::mount_observed`]), every store,
//! non-temporal store, cache-line flush, fence and durability point of the
//! pool's media is reported to it, in program order per thread. The media
//! then issues no hardware flushes or fences of its own: the observer models
//! persistence (the crash explorer in `manyfs-crashtest` replays the events
//! with x86 semantics). Without an observer the media pays one branch per
//! call and nothing else.

use super::{CACHE_LINE, Media};
use crate::error::Result;
use std::sync::Arc;

/// Receives the persistence events of one mounted pool.
///
/// Offsets are byte offsets into the pool. Callbacks run on the thread that
/// issued the event, inside the file system's operation, so they must not
/// call back into the [`crate::Fs`]. Every method has a default that does
/// nothing, so an observer implements only what it needs.
pub trait PersistObserver: Send + Sync {
    /// A cached store to `[off, off+len)`: not durable until flushed and
    /// fenced (the bytes are already in the mapping; `media` reads them, and
    /// their neighbours, e.g. the whole page for a page-granular model).
    fn on_store(&self, off: u64, len: usize, media: &MediaView<'_>) {
        let _ = (off, len, media);
    }

    /// A non-temporal store to `[off, off+len)`: durable at the calling
    /// thread's next fence (the bytes are already in the mapping; `media`
    /// reads them).
    fn on_nt_store(&self, off: u64, len: usize, media: &MediaView<'_>) {
        let _ = (off, len, media);
    }

    /// A write-back of every cache line overlapping `[off, off+len)`.
    fn on_flush(&self, off: u64, len: usize) {
        let _ = (off, len);
    }

    /// A store fence by the calling thread; `media` reads the lines' current
    /// contents.
    fn on_fence(&self, media: &MediaView<'_>) {
        let _ = media;
    }

    /// A durability point over `[off, off+len)`: where `file` mode issues
    /// `msync` (called only in that mode, before the `msync`). An `Err`
    /// makes the media fail exactly as a failed `msync` does: the call
    /// returns EIO-style [`crate::Error::Io`] and every later change is
    /// refused.
    fn on_sync(&self, off: u64, len: usize) -> std::io::Result<()> {
        let _ = (off, len);
        Ok(())
    }

    /// A marker from the workload ([`crate::diag::note`]); `media` reads the
    /// lines' current contents.
    fn on_note(&self, tag: u64, media: &MediaView<'_>) {
        let _ = (tag, media);
    }
}

/// Read access to the current (volatile) contents of a pool's mapping,
/// handed to [`PersistObserver`] callbacks.
pub struct MediaView<'a> {
    media: &'a Media,
}

impl<'a> MediaView<'a> {
    pub(super) fn new(media: &'a Media) -> Self {
        MediaView { media }
    }

    /// Copy `buf.len()` bytes at `off` into `buf`.
    pub fn read(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        self.media.read(off, buf)
    }

    /// The 64-byte cache line starting at `off` (zeros if out of bounds).
    pub fn line(&self, off: u64) -> [u8; CACHE_LINE] {
        let mut l = [0u8; CACHE_LINE];
        // Lines come from offsets already bounds-checked by the store that
        // dirtied them.
        let _ = self.media.read(off, &mut l);
        l
    }

    /// Length of the pool in bytes: the mapping, and on a tiered pool the
    /// data device after it (its offsets read the device).
    pub fn len(&self) -> u64 {
        self.media.len() + self.media.device().map_or(0, crate::tier::Device::len)
    }

    /// Whether the pool is empty (never true for a mounted pool).
    pub fn is_empty(&self) -> bool {
        self.media.is_empty()
    }
}

/// The observer attached to a [`Media`].
pub(super) struct Attached(pub(super) Arc<dyn PersistObserver>);

impl std::fmt::Debug for Attached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PersistObserver")
    }
}
