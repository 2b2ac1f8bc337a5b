//! What fsck found, where, and how `fsck --repair` would fix it.

use crate::log::{EntryLoc, loc_page, loc_slot};
use std::fmt;

/// How a problem is repaired.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Fix {
    /// Nothing fsck can do (e.g. both superblocks or the root are damaged).
    None,
    /// Rewrite the primary superblock from the backup.
    RewritePrimarySuperblock,
    /// Clear the rename journal's pending record.
    ClearJournal,
    /// Void the log entry at `loc` (its commit word gets the void marker, so
    /// recovery skips it by its slot count).
    VoidEntry {
        /// The entry.
        loc: EntryLoc,
    },
    /// End a log chain at its last good page: store 0 into the 8-byte link
    /// word at byte offset `link_at` (a log array head or a page footer).
    CutChain {
        /// Byte offset of the link word.
        link_at: u64,
    },
    /// Give the intact but unreachable inode a name under `/lost+found`.
    Reconnect {
        /// The inode.
        ino: u64,
        /// Its generation.
        generation: u32,
        /// Its kind.
        kind: crate::layout::FileKind,
    },
}

impl Fix {
    /// Whether repair can do something about it.
    pub fn is_repairable(&self) -> bool {
        *self != Fix::None
    }
}

impl fmt::Display for Fix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fix::None => write!(f, "cannot be repaired"),
            Fix::RewritePrimarySuperblock => write!(f, "rewrite from the backup"),
            Fix::ClearJournal => write!(f, "clear the rename journal"),
            Fix::VoidEntry { loc } => write!(
                f,
                "void the log entry at page {} slot {}",
                loc_page(*loc),
                loc_slot(*loc)
            ),
            Fix::CutChain { .. } => write!(f, "cut the chain at the last good page"),
            Fix::Reconnect { ino, .. } => write!(f, "reconnect as /lost+found/#{ino}"),
        }
    }
}

/// One problem: where (inode, sub-log, page, slot, name), what, and the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Where, e.g. `inode 12 sub-log 0 log page 345`.
    pub place: String,
    /// What is wrong.
    pub detail: String,
    /// What repair does.
    pub fix: Fix,
}

impl Problem {
    /// A problem at `place`.
    pub fn new(place: impl Into<String>, detail: impl Into<String>, fix: Fix) -> Self {
        Problem {
            place: place.into(),
            detail: detail.into(),
            fix,
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} (repair: {})", self.place, self.detail, self.fix)
    }
}

/// Where a log location is, for messages.
pub fn at(loc: EntryLoc) -> String {
    format!("log page {} slot {}", loc_page(loc), loc_slot(loc))
}

/// A name from media, printable.
pub fn show(name: &[u8]) -> String {
    format!("{:?}", String::from_utf8_lossy(name))
}
