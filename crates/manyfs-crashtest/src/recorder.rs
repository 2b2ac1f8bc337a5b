//! The recording media mode: every store, non-temporal store, cache-line
//! flush and fence is tracked at 64-byte line granularity with x86
//! persistence semantics, so the crash explorer can rebuild every image a
//! power cut could leave.
//!
//! - A plain store makes its lines *dirty*: they may reach media at any
//!   moment (cache eviction), or never until flushed.
//! - `clwb`/`clflushopt` (our `flush`) and non-temporal stores put the lines
//!   on the calling thread's *flushed* list: they are durable once that
//!   thread fences.
//! - A fence first emits a crash point (the state just before it: every dirty
//!   and flushed line is in flight), then makes the thread's flushed lines
//!   durable with their contents at that moment.
//! - Only aligned 8-byte stores are failure-atomic: the explorer may persist
//!   any mix of an in-flight line's 8-byte words.
//!
//! Built with [`Recorder::with_model`] for a page model (page cache, block
//! device), it tracks 4 KiB pages instead
//! ([`crate::pagecache`]): stores dirty pages (each distinct
//! content is kept), flushes and fences order nothing, and only durability
//! points ([`Recorder::on_sync`]) make pages durable.

use crate::pagecache::PageTracker;
pub use crate::pagecache::{MediaModel, PAGE, PageData};
use manyfs::diag::{MediaView, PersistObserver};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;
use std::thread::ThreadId;

/// A 64-byte cache line's contents.
pub type Line = [u8; 64];

/// What happened, in order.
#[derive(Debug, Clone)]
pub enum Event {
    /// These lines became durable with these contents.
    Persist(Vec<(u64, Line)>),
    /// A power cut here could persist any subset of these lines (offset and
    /// contents at this moment) on top of what is durable.
    Crash(Vec<(u64, Line)>),
    /// A marker from the workload (operation start/end, returned writes).
    Note(u64),
    /// Page models: these pages became durable with these contents.
    PersistPages(Vec<(u64, PageData)>),
    /// A `pm` pool with a data device: a power cut here could persist any
    /// subset of these pool lines and of these device pages (each at any
    /// of its versions) on top of what is durable.
    CrashMixed(Vec<(u64, Line)>, Vec<(u64, Vec<PageData>)>),
    /// Page models: a power cut here could leave any subset of these pages,
    /// each at any of its versions (oldest first), on top of what is durable.
    CrashPages(Vec<(u64, Vec<PageData>)>),
}

#[derive(Default)]
struct State {
    events: Vec<Event>,
    dirty: BTreeSet<u64>,
    flushed: HashMap<ThreadId, BTreeSet<u64>>,
    drop_short_flushes: bool,
    /// Page models: the page state (pm: none).
    pages: Option<PageTracker>,
    /// `pm` with a data device from this offset on: the device's pages
    /// (a volatile write cache, durable at a device flush).
    device: Option<(u64, PageTracker)>,
    /// With a data device: each dirty pool line's contents at its last
    /// store (a device flush, which reads no lines, is a crash point).
    line_vals: HashMap<u64, Line>,
}

/// Records the persistence events of one mounted pool (attach it with
/// [`manyfs::diag::mount_observed`]).
#[derive(Default)]
pub struct Recorder {
    state: Mutex<State>,
}

fn lines(off: u64, len: usize) -> impl Iterator<Item = u64> {
    let first = off & !63;
    let end = off + len as u64;
    (first..end).step_by(64)
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.state();
        f.debug_struct("Recorder")
            .field("events", &s.events.len())
            .field("dirty", &s.dirty.len())
            .finish()
    }
}

impl Recorder {
    /// A recorder with no events (persistent-memory model).
    pub fn new() -> Self {
        Self::default()
    }

    /// A recorder for `model`.
    pub fn with_model(model: MediaModel) -> Self {
        let r = Self::default();
        if model.is_paged() {
            r.state().pages = Some(PageTracker::new(model));
        }
        r
    }

    /// A recorder for the `pm` model over a pool whose data device starts
    /// at offset `start`: cache lines below it, and the device's 4 KiB
    /// blocks above it under the volatile-cache model (any subset of the
    /// writes since the last device flush survives, each block at one of
    /// its values; a flush makes them all durable).
    pub fn pm_with_device(start: u64) -> Self {
        let r = Self::default();
        r.state().device = Some((start, PageTracker::new(MediaModel::PageCache)));
        r
    }

    /// The in-flight lines and, with a data device, a crash event.
    fn crash_event(s: &mut State, read_line: &dyn Fn(u64) -> Line) -> Event {
        let inflight: Vec<(u64, Line)> = s.dirty.iter().map(|&l| (l, read_line(l))).collect();
        match &mut s.device {
            Some((_, t)) => Event::CrashMixed(inflight, t.crash()),
            None => Event::Crash(inflight),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Plant a bug for testing the explorer: ignore every flush of fewer
    /// than 64 bytes (commit words and chain links are flushed that way).
    pub fn drop_short_flushes(&self, on: bool) {
        self.state().drop_short_flushes = on;
    }

    /// Plant a bug for testing the page models: treat the next `n`
    /// durability points as no-ops (the medium keeps the pages dirty).
    pub fn forget_syncs(&self, n: usize) {
        if let Some(t) = &mut self.state().pages {
            t.forget_syncs(n);
        }
    }

    /// Plant a bug for testing tiered pools: treat every durability point
    /// at or after offset `off` (the data device's flushes) as a no-op.
    pub fn forget_syncs_from(&self, off: u64) {
        let mut s = self.state();
        if let Some(t) = &mut s.pages {
            t.forget_syncs_from(off);
        }
        if let Some((_, t)) = &mut s.device {
            t.forget_syncs_from(off);
        }
    }

    /// A cached store to `[off, off+len)`; `read` copies the bytes at an
    /// offset (the page models keep each page's contents).
    pub fn on_store(&self, off: u64, len: usize, read: impl Fn(u64, &mut [u8])) {
        self.record_store(off, len, read, false);
    }

    /// A non-temporal store: durable at this thread's next fence.
    pub fn on_nt_store(&self, off: u64, len: usize, read: impl Fn(u64, &mut [u8])) {
        self.record_store(off, len, read, true);
    }

    /// A store; a non-temporal one (`nt`) counts as already flushed by
    /// this thread (cache-line model; the page models keep pages only).
    fn record_store(&self, off: u64, len: usize, read: impl Fn(u64, &mut [u8]), nt: bool) {
        if len == 0 {
            return;
        }
        let mut s = self.state();
        if let Some(t) = &mut s.pages {
            t.on_store(off, len, &read);
            return;
        }
        if let Some((start, t)) = &mut s.device
            && off >= *start
        {
            t.on_store(off, len, &read);
            return;
        }
        let me = std::thread::current().id();
        let track = s.device.is_some();
        for l in lines(off, len) {
            if track {
                let mut v = [0u8; 64];
                read(l, &mut v);
                s.line_vals.insert(l, v);
            }
            s.dirty.insert(l);
            if nt {
                s.flushed.entry(me).or_default().insert(l);
            }
        }
    }

    /// A cache-line flush of `[off, off+len)`.
    pub fn on_flush(&self, off: u64, len: usize) {
        let mut s = self.state();
        if s.pages.is_some() || len == 0 || (s.drop_short_flushes && len < 64) {
            return;
        }
        let me = std::thread::current().id();
        for l in lines(off, len) {
            if s.dirty.contains(&l) {
                s.flushed.entry(me).or_default().insert(l);
            }
        }
    }

    /// A fence by the calling thread. `read_line` returns a line's current
    /// contents.
    pub fn on_fence(&self, read_line: impl Fn(u64) -> Line) {
        let mut s = self.state();
        if s.pages.is_some() {
            return; // a fence orders nothing on a page cache or a disk
        }
        let ev = Self::crash_event(&mut s, &read_line);
        s.events.push(ev);
        let me = std::thread::current().id();
        let mine = s.flushed.remove(&me).unwrap_or_default();
        if mine.is_empty() {
            return;
        }
        let mut persisted = Vec::with_capacity(mine.len());
        for l in mine {
            s.dirty.remove(&l);
            for set in s.flushed.values_mut() {
                set.remove(&l);
            }
            persisted.push((l, read_line(l)));
        }
        s.events.push(Event::Persist(persisted));
    }

    /// A crash point outside any fence (e.g. between operations).
    pub fn crash_point(&self, read_line: impl Fn(u64) -> Line) {
        let mut s = self.state();
        if let Some(t) = &mut s.pages {
            let pages = t.crash();
            s.events.push(Event::CrashPages(pages));
            return;
        }
        let ev = Self::crash_event(&mut s, &read_line);
        s.events.push(ev);
    }

    /// A completed durability point (`msync`, `sync_file_range` plus a
    /// flush, `fdatasync`) over `[off, off+len)`. Persistent memory: nothing
    /// (flushed and fenced lines already are durable). Page models: a crash
    /// point (the state just before), then the covered pages are durable.
    pub fn on_sync(&self, off: u64, len: usize) {
        let mut s = self.state();
        if s.pages.is_none()
            && let Some((start, _)) = s.device
            && off >= start
        {
            // `pm` with a data device: a device flush is a crash point of
            // both media.
            let vals = s.line_vals.clone();
            let before = Self::crash_event(&mut s, &|l| vals.get(&l).copied().unwrap_or([0; 64]));
            let persisted = s.device.as_mut().map(|(_, t)| t.on_sync(off, len));
            s.events.push(before);
            if let Some(p) = persisted.filter(|p| !p.is_empty()) {
                s.events.push(Event::PersistPages(p));
            }
            return;
        }
        let Some(t) = &mut s.pages else {
            return;
        };
        let before = t.crash();
        let persisted = t.on_sync(off, len);
        s.events.push(Event::CrashPages(before));
        if !persisted.is_empty() {
            s.events.push(Event::PersistPages(persisted));
        }
    }

    /// Record a workload marker.
    pub fn note(&self, tag: u64) {
        self.state().events.push(Event::Note(tag));
    }

    /// Take the events recorded so far.
    pub fn take_events(&self) -> Vec<Event> {
        std::mem::take(&mut self.state().events)
    }

    /// Lines still dirty (never made durable) and their count, for reports.
    pub fn dirty_lines(&self) -> usize {
        let s = self.state();
        s.pages
            .as_ref()
            .map_or(s.dirty.len(), PageTracker::dirty_pages)
    }
}

/// Apply persisted lines to an image.
pub fn apply(image: &mut [u8], lines: &[(u64, Line)]) {
    for (off, data) in lines {
        let o = *off as usize;
        if o + 64 <= image.len() {
            image[o..o + 64].copy_from_slice(data);
        }
    }
}

/// Group lines by the 4 KiB block they fall in (for reports).
pub fn by_block(lines: &[(u64, Line)]) -> BTreeMap<u64, usize> {
    let mut m = BTreeMap::new();
    for (off, _) in lines {
        *m.entry(off / 4096).or_default() += 1;
    }
    m
}

/// Copy the bytes at `off` from the mapping; a page model's last page is
/// cut at the end of the pool (the rest of `buf` is left as it was).
fn read_view(media: &MediaView<'_>, off: u64, buf: &mut [u8]) {
    let n = (buf.len() as u64).min(media.len().saturating_sub(off)) as usize;
    // Offsets come from a store the media already bounds-checked.
    let _ = media.read(off, &mut buf[..n]);
}

impl PersistObserver for Recorder {
    fn on_store(&self, off: u64, len: usize, media: &MediaView<'_>) {
        Recorder::on_store(self, off, len, |o, b| read_view(media, o, b));
    }

    fn on_nt_store(&self, off: u64, len: usize, media: &MediaView<'_>) {
        Recorder::on_nt_store(self, off, len, |o, b| read_view(media, o, b));
    }

    fn on_flush(&self, off: u64, len: usize) {
        Recorder::on_flush(self, off, len);
    }

    fn on_fence(&self, media: &MediaView<'_>) {
        Recorder::on_fence(self, |l| media.line(l));
    }

    /// A durability point (`file` mode: before its `msync` or
    /// `sync_file_range`; the modelled sync completes here).
    fn on_sync(&self, off: u64, len: usize) -> std::io::Result<()> {
        Recorder::on_sync(self, off, len);
        Ok(())
    }

    /// Record the marker `tag`, then a crash point (the state a power cut
    /// right after the marker leaves).
    fn on_note(&self, tag: u64, media: &MediaView<'_>) {
        self.note(tag);
        self.crash_point(|l| media.line(l));
    }
}
