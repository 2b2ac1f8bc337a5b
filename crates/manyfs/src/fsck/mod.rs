//! Offline consistency check of a pool (`manyfs fsck`).
//!
//! It maps the pool read-only and rebuilds the file system exactly as a
//! mount would (checksums, commit marks, bounds, block ownership, directory
//! tree shape, generations, entry kinds), then reports what it found.

pub(crate) mod verify;

use crate::error::Result;
use crate::layout::*;
use crate::media::{Durability, Media};
use crate::recovery;
use std::path::Path;

/// What fsck found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Problems that make the pool unmountable or inconsistent.
    pub errors: Vec<String>,
    /// Notes that need no action (e.g. a rename to be completed at mount).
    pub notes: Vec<String>,
    /// Reachable inodes.
    pub inodes: u64,
    /// Directories among them.
    pub directories: u64,
    /// Blocks in use in the data region.
    pub used_blocks: u64,
    /// Blocks in the data region.
    pub data_blocks: u64,
    /// Committed log entries.
    pub entries: u64,
    /// Log pages.
    pub log_pages: u64,
}

impl Report {
    /// Whether the pool is consistent.
    pub fn is_clean(&self) -> bool {
        self.errors.is_empty()
    }
}

/// Check the pool at `path`. I/O errors opening it are returned as `Err`;
/// inconsistencies are listed in the report.
pub fn check(path: &Path) -> Result<Report> {
    let media = Media::open(path, Durability::File, false)?;
    let mut report = Report::default();
    match recovery::rebuild(&media) {
        Ok(r) => {
            if r.primary_superblock_damaged {
                report.errors.push("primary superblock damaged (backup is intact; mount or fsck --repair rewrites it)".into());
            }
            if let Some(p) = &r.pending_rename {
                report.notes.push(format!(
                    "rename transaction {} will be completed at mount",
                    p.txid
                ));
            }
            report.inodes = r.inodes.len() as u64;
            report.directories = r
                .inodes
                .values()
                .filter(|n| n.record.kind == FileKind::Dir)
                .count() as u64;
            report.used_blocks = r.used_blocks();
            report.data_blocks = r.data_blocks();
            for n in r.inodes.values() {
                for s in &n.sublogs {
                    report.entries += s.entries.len() as u64;
                    report.log_pages += s.pages.len() as u64;
                    if !s.incomplete.is_empty() {
                        report.notes.push(format!(
                            "inode {}: {} entries of an interrupted write will be discarded at mount",
                            n.record.kind.code(),
                            s.incomplete.len()
                        ));
                    }
                }
                if n.record.kind != FileKind::Dir && n.nlink == 0 {
                    report.errors.push("reachable file with no links".into());
                }
            }
        }
        Err(e) => report.errors.push(e.to_string()),
    }
    Ok(report)
}
