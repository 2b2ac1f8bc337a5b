//! Offline consistency check of a pool (`manyfs fsck`).
//!
//! It maps the pool read-only and walks it as a mount's rebuild would
//! (checksums, commit marks, bounds, block ownership, directory tree shape,
//! generations, entry kinds), but records every problem and skips the
//! damaged object instead of stopping at the first ([`check`]). `repair`
//! applies the fixes the check proposes ([`repair::repair`]).

mod check;
pub mod problems;
pub mod repair;

pub use problems::{Fix, Problem};
pub use verify::verify;

mod verify;

use crate::error::Result;
use crate::layout::*;
use crate::media::{Durability, Media};
use crate::recovery;
use std::path::Path;

/// What fsck found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Problems that make the pool unmountable or inconsistent, one line
    /// each (the [`Report::problems`] printed).
    pub errors: Vec<String>,
    /// The same problems, with where they are and their fix.
    pub problems: Vec<Problem>,
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
        self.problems.is_empty()
    }

    /// Whether `repair` can fix everything found.
    pub fn is_repairable(&self) -> bool {
        self.problems.iter().all(|p| p.fix.is_repairable())
    }
}

/// Check the pool at `path`. Errors opening or reading it (or a file that is
/// no manyfs pool) are returned as `Err`; inconsistencies are listed in the
/// report, every one of them, each with where it is and how `repair` fixes it.
pub fn check(path: &Path) -> Result<Report> {
    check_with_device(path, None)
}

/// [`check`] a tiered pool whose data device is at `data` instead of the
/// path the pool records (`None`: the recorded one).
pub fn check_with_device(path: &Path, data: Option<&Path>) -> Result<Report> {
    let media = crate::media::pool::open_pool(path, Durability::File, false, data)?;
    check_media(&media)
}

/// [`check`] on an open mapping.
pub(crate) fn check_media(media: &Media) -> Result<Report> {
    let w = check::walk(media)?;
    let mut report = Report {
        problems: w.problems,
        notes: w.notes,
        ..Default::default()
    };
    report.inodes = w.inodes.len() as u64;
    report.directories = w
        .inodes
        .values()
        .filter(|n| n.record.kind == FileKind::Dir)
        .count() as u64;
    if let Some(sb) = &w.sb {
        report.data_blocks = sb.total_blocks - sb.data_start
            + (sb.device_data_blocks().end - sb.device_data_blocks().start);
    }
    report.used_blocks = w.owners.len() as u64;
    for n in w.inodes.values() {
        for s in &n.sublogs {
            report.entries += s.entries.len() as u64;
            report.log_pages += s.pages.len() as u64;
        }
    }
    // The mount's own rebuild has the last word: a pool the walk finds
    // clean must mount.
    if report.problems.is_empty()
        && let Err(e) = recovery::rebuild(media)
    {
        report
            .problems
            .push(Problem::new("pool", e.to_string(), Fix::None));
    }
    report.errors = report.problems.iter().map(|p| p.to_string()).collect();
    Ok(report)
}
