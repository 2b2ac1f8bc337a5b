//! Media models with 4 KiB pages as the unit of persistence: an ordinary
//! file mapped through the page cache, and a block device with a volatile
//! write cache.
//!
//! Both follow one rule, parameterised by what a durability point covers:
//!
//! - A store dirties its page. Flushes and fences order nothing.
//! - Until a durability point covers it, a dirty page may reach the medium
//!   at any moment (writeback, cache eviction) with any content it held
//!   since it was last made durable, or never. A page is written whole
//!   (4 KiB writes are assumed atomic).
//! - [`MediaModel::PageCache`]: a completed `msync`/`sync_file_range` of a
//!   range (`Media::sync_range` in `file` mode) makes the pages of that
//!   range durable with their contents at that moment.
//! - [`MediaModel::BlockDev`]: every store is a completed write in the
//!   device's volatile cache; a flush (any durability point, whatever its
//!   range) makes every completed write durable.
//!
//! The tracker keeps, per dirty page, the distinct contents it held since it
//! was last made durable: the first, the last, and up to six in between
//! (preferring the contents it had at operation boundaries).

use std::collections::BTreeMap;
use std::sync::Arc;

/// The unit of persistence of the page models.
pub const PAGE: usize = 4096;

/// A page's contents (shared between crash points).
pub type PageData = Arc<[u8]>;

/// Versions kept per dirty page: first, last and up to six in between.
pub const MAX_VERSIONS: usize = 8;

/// Which medium the explorer models.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MediaModel {
    /// Persistent memory, x86 rules: flushed lines persist at the fence;
    /// 64-byte lines, 8-byte failure atomicity.
    #[default]
    Pm,
    /// A file mapped through the page cache (durability mode `file`).
    PageCache,
    /// A block device with a volatile write cache.
    BlockDev,
}

impl MediaModel {
    /// Every model.
    pub const ALL: [MediaModel; 3] = [MediaModel::Pm, MediaModel::PageCache, MediaModel::BlockDev];

    /// Whether the unit is a 4 KiB page and durability needs a sync.
    pub fn is_paged(self) -> bool {
        self != MediaModel::Pm
    }
}

impl MediaModel {
    /// Each model with its name on the command line.
    const NAMES: [(&'static str, MediaModel); 3] = [
        ("pm", MediaModel::Pm),
        ("pagecache", MediaModel::PageCache),
        ("blockdev", MediaModel::BlockDev),
    ];
}

impl std::str::FromStr for MediaModel {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        parse_named("media model", s, &Self::NAMES)
    }
}

impl std::fmt::Display for MediaModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = Self::NAMES.iter().find(|(_, m)| m == self).map(|(n, _)| *n);
        f.write_str(name.unwrap_or("?"))
    }
}

/// The value named `s` in `choices`, or an error that lists the names
/// (`what` says what is being named).
pub(crate) fn parse_named<T: Copy>(
    what: &str,
    s: &str,
    choices: &[(&str, T)],
) -> std::result::Result<T, String> {
    match choices.iter().find(|(name, _)| *name == s) {
        Some((_, v)) => Ok(*v),
        None => {
            let names: Vec<&str> = choices.iter().map(|(n, _)| *n).collect();
            Err(format!(
                "{what} {s:?} (expected one of: {})",
                names.join(", ")
            ))
        }
    }
}

#[derive(Default)]
struct Dirty {
    /// Distinct contents since the page was last durable, oldest first.
    versions: Vec<PageData>,
    /// Whether each version was the page's content at a crash point
    /// (operation boundary); those are dropped last.
    pinned: Vec<bool>,
}

impl Dirty {
    fn push(&mut self, v: PageData) {
        if self.versions.len() >= MAX_VERSIONS {
            // Drop an intermediate version (never the first): the oldest
            // unpinned one, else the oldest.
            let n = self.versions.len();
            let k = (1..n).find(|&i| !self.pinned[i]).unwrap_or(1);
            self.versions.remove(k);
            self.pinned.remove(k);
        }
        self.versions.push(v);
        self.pinned.push(false);
    }
}

/// Page-granular persistence state of one recording.
pub struct PageTracker {
    model: MediaModel,
    dirty: BTreeMap<u64, Dirty>,
    /// Planted bug: durability points still to ignore.
    forget_syncs: usize,
    /// Planted bug: durability points at or after this offset are ignored.
    forget_from: Option<u64>,
}

fn pages(off: u64, len: usize) -> impl Iterator<Item = u64> {
    let first = off & !(PAGE as u64 - 1);
    let end = off + len as u64;
    (first..end).step_by(PAGE)
}

impl PageTracker {
    /// A tracker for a page model.
    pub fn new(model: MediaModel) -> Self {
        PageTracker {
            model,
            dirty: BTreeMap::new(),
            forget_syncs: 0,
            forget_from: None,
        }
    }

    /// Planted bug: treat the next `n` durability points as no-ops.
    pub fn forget_syncs(&mut self, n: usize) {
        self.forget_syncs = n;
    }

    /// Planted bug: ignore every durability point at or after `off`.
    pub fn forget_syncs_from(&mut self, off: u64) {
        self.forget_from = Some(off);
    }

    /// A store (cached or not: the page cache does not care) to
    /// `[off, off+len)`; `read` fills a buffer with the bytes at an offset.
    pub fn on_store(&mut self, off: u64, len: usize, read: &dyn Fn(u64, &mut [u8])) {
        for p in pages(off, len) {
            let mut buf = vec![0u8; PAGE];
            read(p, &mut buf);
            let d = self.dirty.entry(p).or_default();
            if d.versions.last().is_some_and(|v| **v == buf[..]) {
                continue;
            }
            d.push(PageData::from(buf));
        }
    }

    /// A crash point: every dirty page with every version it may show.
    pub fn crash(&mut self) -> Vec<(u64, Vec<PageData>)> {
        self.dirty
            .iter_mut()
            .map(|(&p, d)| {
                if let Some(last) = d.pinned.last_mut() {
                    *last = true;
                }
                (p, d.versions.clone())
            })
            .collect()
    }

    /// A completed durability point over `[off, off+len)`: the pages it
    /// makes durable, with their contents now.
    pub fn on_sync(&mut self, off: u64, len: usize) -> Vec<(u64, PageData)> {
        if self.forget_syncs > 0 {
            self.forget_syncs -= 1;
            return Vec::new();
        }
        if self.forget_from.is_some_and(|f| off >= f) {
            return Vec::new();
        }
        let covered: Vec<u64> = match self.model {
            MediaModel::BlockDev => self.dirty.keys().copied().collect(),
            _ => pages(off, len)
                .filter(|p| self.dirty.contains_key(p))
                .collect(),
        };
        covered
            .into_iter()
            .filter_map(|p| {
                let d = self.dirty.remove(&p)?;
                Some((p, d.versions.last()?.clone()))
            })
            .collect()
    }

    /// Pages dirty now.
    pub fn dirty_pages(&self) -> usize {
        self.dirty.len()
    }
}
