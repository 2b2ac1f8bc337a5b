//! Diagnostics for tools, benchmarks and tests: a mount that reports
//! every persistence event to an observer (the crash explorer), thread
//! placement's reports, workload markers, the superblock as mounted, and
//! (test builds) planted bugs. Programs using manyfs as a file system do not
//! need any of this.

use super::Fs;
use crate::error::Result;
use crate::options::MountOptions;
use std::path::Path;
use std::sync::Arc;

#[cfg(feature = "planted-bugs")]
pub use crate::inode::EngineBug;
pub use crate::layout::Superblock;
#[cfg(feature = "planted-bugs")]
pub use crate::layout::{RecoveryBug, clear_recovery_bugs, plant_recovery_bug};
pub use crate::media::{MediaView, PersistObserver, bandwidth_throttled_ns, remote_charged_ns};
pub use crate::placement::account::gettid;
pub use crate::placement::affinity;
pub use crate::placement::calibrate::{Calibration, READ_RATIOS, config_for_pool};
pub use crate::placement::{
    PlacementDecision, PlacementWindow, REPORT_LEN, Reason, run_on_cpu, start_on,
};

/// Mount with every persistence event (recovery's included) reported to
/// `observer` (see [`PersistObserver`]): the crash explorer and
/// fault-injection tests use this.
pub fn mount_observed(
    pool: &Path,
    opts: &MountOptions,
    observer: Arc<dyn PersistObserver>,
) -> Result<Fs> {
    Fs::mount_with(pool, opts, Some(observer))
}

/// Measure each NUMA node's read and write bandwidth at read ratios 100,
/// 80, 60, 40, 20 and 0 %, `per_point` each, on free blocks of that node's
/// pool member (overwritten, then freed again). Save the result with
/// [`Calibration::save`] at [`Calibration::path_for`] the pool and later
/// mounts with thread placement use it for the nodes' maxima.
pub fn calibrate(fs: &Fs, per_point: std::time::Duration) -> Result<Calibration> {
    fs.core.check_writable()?;
    let c = &fs.core;
    c.placement
        .calibrate(&c.media, &c.blocks, &c.topology, per_point)
}

/// The number of the current thread-placement window (each
/// [`PlacementDecision`] names the window it was made in, at that window's
/// end).
pub fn placement_window(fs: &Fs) -> u64 {
    fs.core.placement.tracker().registry().window()
}

/// Thread placement's decisions so far (the last [`REPORT_LEN`]); empty
/// when `MountOptions::thread_placement` is off.
pub fn placement_report(fs: &Fs) -> Vec<PlacementDecision> {
    fs.core.placement.report()
}

/// The thread-placement windows planned after window `after` (0: all kept,
/// the last [`REPORT_LEN`]), oldest first: what each saw and decided, one
/// [`std::fmt::Display`] line each.
pub fn placement_windows_after(fs: &Fs, after: u64) -> Vec<PlacementWindow> {
    fs.core.placement.windows_after(after)
}

/// With an observer attached ([`mount_observed`]): pass it the workload
/// marker `tag` ([`PersistObserver::on_note`]). Without one: nothing.
pub fn note(fs: &Fs, tag: u64) {
    fs.core.media.note(tag);
}

/// The pool's superblock as mounted (geometry and format, for
/// `manyfs inspect`).
pub fn superblock(fs: &Fs) -> Superblock {
    fs.core.sb.clone()
}

/// Plant `bug` in this mount (test builds with the `planted-bugs` feature
/// only): the crash explorer's tests show that it finds it.
#[cfg(feature = "planted-bugs")]
pub fn plant_bug(fs: &Fs, bug: crate::inode::EngineBug) {
    match bug {
        crate::inode::EngineBug::StagedBlockFreedEarly => {
            fs.core.staging.plant_free_superseded_at_once()
        }
        crate::inode::EngineBug::ArrayLinkedBeforeDurable
        | crate::inode::EngineBug::ModeAndAclApart => fs.core.planted.plant(bug),
    }
}
