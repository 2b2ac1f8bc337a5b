//! The DRAM file index: file page -> (data block, log entry, version).
//!
//! Structure changes (new nodes) are lock-free CAS installs in a
//! [`radix::CasRadix`]. A slot's contents are read and written only by
//! threads holding the page's range in the file's range lock (write access to
//! change it), so lookups of different ranges share no mutex and no written
//! cache line except where two pages' slots happen to share one.
//!
//! Public: only [`radix`], the CAS-installed radix tree, so the index
//! comparison example (`examples/index_compare.rs`) can measure it; the file
//! index built on it is internal.

pub mod radix;

use crate::sync::{AtomicU64, Ordering};
use radix::CasRadix;

/// Where one file page lives.
#[derive(Debug, Default)]
pub(crate) struct PageSlot {
    block: AtomicU64,
    entry: AtomicU64,
    version: AtomicU64,
}

/// A snapshot of a [`PageSlot`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct PageMapping {
    /// Data block (0 = hole).
    pub block: u64,
    /// Location of the log entry that committed it (see [`crate::log::EntryLoc`]).
    pub entry: u64,
    /// Version of the page: the highest version wins at recovery.
    pub version: u64,
}

impl PageSlot {
    /// Read the slot (caller holds the page's range).
    pub fn get(&self) -> PageMapping {
        PageMapping {
            block: self.block.load(Ordering::Relaxed),
            entry: self.entry.load(Ordering::Relaxed),
            version: self.version.load(Ordering::Relaxed),
        }
    }

    /// Replace the slot (caller holds the page's range for writing).
    pub fn set(&self, m: PageMapping) {
        self.block.store(m.block, Ordering::Relaxed);
        self.entry.store(m.entry, Ordering::Relaxed);
        self.version.store(m.version, Ordering::Relaxed);
    }
}

/// The index of one file. Page 0 has its slot inline, so a file of one
/// page needs no tree node at all (most files are small); the tree holds
/// the other pages.
#[derive(Default)]
pub(crate) struct FileIndex {
    first: PageSlot,
    pages: CasRadix<PageSlot>,
}

impl FileIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// The mapping of page `pgoff` (a hole if never written).
    pub fn lookup(&self, pgoff: u64) -> PageMapping {
        if pgoff == 0 {
            return self.first.get();
        }
        self.pages.get(pgoff).map(PageSlot::get).unwrap_or_default()
    }

    /// The slot of page `pgoff`, created if needed.
    pub fn slot(&self, pgoff: u64) -> &PageSlot {
        if pgoff == 0 {
            return &self.first;
        }
        self.pages.get_or_insert(pgoff)
    }

    /// Every mapped page, in order.
    pub fn mapped(&self) -> Vec<(u64, PageMapping)> {
        let mut out = Vec::new();
        let first = self.first.get();
        if first.block != 0 {
            out.push((0, first));
        }
        self.pages.for_each(|k, s| {
            let m = s.get();
            if k != 0 && m.block != 0 {
                out.push((k, m));
            }
        });
        out
    }
}
