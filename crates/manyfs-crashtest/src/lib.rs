//! The crash-state explorer.
//!
//! A workload runs on a pool whose media records every store, flush and
//! fence ([`Recorder`], attached through the library's
//! [`manyfs::diag::PersistObserver`] seam). Replaying the events, the explorer
//! rebuilds, at every fence and between operations, the images a power cut
//! could leave: nothing in flight persisted, all of it, every subset when few
//! lines are in flight, singletons, all-but-one and random subsets when many
//! are, and mixes of 8-byte words inside a line (only aligned 8-byte stores
//! are failure-atomic). Every image must
//! - mount (the rebuild checks checksums, commit marks, block ownership,
//!   tree shape, generations: what `fsck` checks),
//! - match its own rebuild ([`manyfs::fsck::verify`]),
//! - show a state the workload could have left: every operation that returned
//!   is there, and the one in flight is all or nothing.
//!
//! A sample of images is also recovered with recording on, and every image a
//! crash *during recovery* could leave must come back to the same state.
//!
//! The medium is chosen per run ([`MediaModel`]): persistent memory (the
//! rules above), or 4 KiB pages through a page cache or a block device's
//! volatile write cache ([`pagecache`]). With pages, crash points are before
//! every durability point and between operations; an image persists any
//! subset of the pages dirtied since their last sync, each at any content it
//! held since. The allowed-state oracle then follows the medium's rule: an
//! operation is durable only once a sync covering it returned, and each
//! unsynced operation is whole or absent ([`oracle`]). In every model no file
//! may hold bytes it was never given (workloads write a pattern distinct per
//! write and offset).

pub mod blackbox;
pub mod oracle;
pub mod pagecache;
pub mod recorder;
mod workloads;

pub use pagecache::MediaModel;
pub use recorder::Recorder;
pub use workloads::{
    ACL_ACCESS, ACL_USER_1000_RW, MEMBER0_BYTES, MEMBER1_BYTES, Op, TIER_DATA_BYTES, Workload,
    ace_workloads, attr_random_workloads, concurrent_workloads, durability_workloads, member_setup,
    member_workloads, migrating_random_workloads, pattern, posix_workloads, random_workloads,
    regression_workloads, sync_tail_workloads, tier_concurrent_workloads, tier_random_workloads,
    tier_staged_random_workloads, tier_standard_workloads, tier_workloads,
};

use manyfs::lowlevel::InodeOps;
use manyfs::{Durability, Error, FileKind, Fs, MkfsOptions, MountOptions, Result};
use oracle::{History, Window};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use recorder::{Event, PAGE, PageData, apply};
use std::collections::{BTreeMap, HashSet};
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Marker: operation `i` starts.
pub const OP_START: u64 = 1 << 62;
/// Marker: operation `i` returned.
pub const OP_END: u64 = 2 << 62;
/// Marker: concurrent write with this id returned.
pub const WRITE_RETURNED: u64 = 3 << 62;

/// A bug planted to show the explorer finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlantedBug {
    /// Persistent memory: every flush shorter than a cache line (commit
    /// words, log links) is dropped.
    DroppedFlush,
    /// Page models: the first durability point of every workload is a
    /// no-op (an `fsync` that forgets its `msync`). Invisible to the pm
    /// model, which has no use for syncs.
    ForgottenSync,
    /// Tiered pools, page model: every flush of the data device is a
    /// no-op, so durable marks commit entries whose data blocks may still
    /// be in the device's volatile cache (an fsync that persists the log
    /// without flushing the device).
    SkippedDeviceFlush,
    /// Tiered `pm` pools that stage small synchronous writes: a pool block
    /// that a staged write superseded is freed at once instead of after
    /// the file's next sync, so a later write may reuse it while the
    /// superseded entry still counts after a crash. Planted in the engine
    /// (`manyfs::diag::plant_bug`): needs this crate's `planted-bugs`
    /// feature (its tests have it).
    StagedBlockFreedEarly,
    /// Page models, a file written from a second CPU: the log array its
    /// inode then gets is linked from the inode record without the barrier
    /// that makes it durable first (`manyfs::diag::EngineBug::ArrayLinkedBeforeDurable`):
    /// the record may reach the disk naming an array that did not, and the
    /// file's synced data is lost. Found by the workloads whose thread moves
    /// between CPUs. Planted in the engine (`planted-bugs` feature).
    ArrayLinkedBeforeDurable,
    /// A chmod of a file with a POSIX access ACL logs the mode and the
    /// rewritten ACL as two groups (`manyfs::diag::EngineBug::ModeAndAclApart`):
    /// a crash between them leaves the new mode with the old ACL. Found by
    /// the pm model in the random attribute workloads. Planted in the
    /// engine (`planted-bugs` feature).
    ModeAndAclApart,
    /// Recovery accepts a log entry whose checksum does not match
    /// (`manyfs::diag::RecoveryBug::EntryChecksumIgnored`, process-wide: it
    /// affects every mount of the process while the exploration runs): a
    /// log page torn inside a multi-slot entry then counts garbage. Only
    /// the page models with torn pages ([`Config::torn_pages`]) can find
    /// it. `planted-bugs` feature.
    EntryChecksumIgnored,
}

impl std::str::FromStr for PlantedBug {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        pagecache::parse_named(
            "planted bug",
            s,
            &[
                ("dropped-flush", PlantedBug::DroppedFlush),
                ("forgotten-sync", PlantedBug::ForgottenSync),
                ("skipped-device-flush", PlantedBug::SkippedDeviceFlush),
                (
                    "staged-block-freed-early",
                    PlantedBug::StagedBlockFreedEarly,
                ),
                (
                    "array-linked-before-durable",
                    PlantedBug::ArrayLinkedBeforeDurable,
                ),
                ("mode-and-acl-apart", PlantedBug::ModeAndAclApart),
                ("entry-checksum-ignored", PlantedBug::EntryChecksumIgnored),
            ],
        )
    }
}

impl PlantedBug {
    /// Whether it is planted in the engine (needs the `planted-bugs`
    /// feature) rather than in the explorer's media models.
    pub fn in_engine(self) -> bool {
        matches!(
            self,
            PlantedBug::StagedBlockFreedEarly
                | PlantedBug::ArrayLinkedBeforeDurable
                | PlantedBug::ModeAndAclApart
                | PlantedBug::EntryChecksumIgnored
        )
    }

    /// The engine bug to plant in the workload's mount, if it is one.
    #[cfg(feature = "planted-bugs")]
    pub fn engine_bug(self) -> Option<manyfs::diag::EngineBug> {
        match self {
            PlantedBug::StagedBlockFreedEarly => {
                Some(manyfs::diag::EngineBug::StagedBlockFreedEarly)
            }
            PlantedBug::ArrayLinkedBeforeDurable => {
                Some(manyfs::diag::EngineBug::ArrayLinkedBeforeDurable)
            }
            PlantedBug::ModeAndAclApart => Some(manyfs::diag::EngineBug::ModeAndAclApart),
            _ => None,
        }
    }

    /// The bug each model is shown catching.
    pub fn for_model(model: MediaModel) -> Self {
        if model.is_paged() {
            PlantedBug::ForgottenSync
        } else {
            PlantedBug::DroppedFlush
        }
    }
}

/// How hard to look.
#[derive(Debug, Clone)]
pub struct Config {
    /// In-flight line counts up to this get every subset.
    pub exhaustive_lines: usize,
    /// Random subsets per crash point above that.
    pub random_subsets: usize,
    /// Random 8-byte-word mixes per crash point (pm).
    pub word_mixes: usize,
    /// Random per-page version choices per crash point (page models).
    pub version_mixes: usize,
    /// Check a crash during recovery for every this-many images (0 = never).
    pub recovery_every: usize,
    /// Page models: also run `fsck` on every this-many images, as the power
    /// cut left them (0 = never; the mount's rebuild checks the same rules).
    pub fsck_every: usize,
    /// Seed of the random choices.
    pub seed: u64,
    /// Stop a workload's exploration after this many violations.
    pub max_violations: usize,
    /// Go on to the next workload after one with violations.
    pub keep_going: bool,
    /// Check only two images per crash point: nothing in flight persisted,
    /// and all of it (latest contents). Both are states the engine was
    /// really in, so this checks the oracles themselves (no false alarms)
    /// on any engine whose durability points are complete.
    pub extremes_only: bool,
    /// Tiered pools: a device write may tear at 512-byte sectors (a disk
    /// whose atomic write unit is one 512-byte logical block): a random
    /// choice for an in-flight device block mixes its durable and its
    /// latest contents sector by sector.
    pub torn_sectors: bool,
    /// Page models: a pool page may reach the disk torn, `unit` bytes at a
    /// time (512: a drive with 512-byte sectors; 64: a store racing the
    /// page's write-back, which the kernel does not hold stable): half the
    /// random version choices for an in-flight pool page mix two of the
    /// versions it held (its durable one included) piece by piece.
    pub torn_pages: Option<usize>,
    /// The medium.
    pub model: MediaModel,
    /// Plant a bug.
    pub planted_bug: Option<PlantedBug>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            exhaustive_lines: 8,
            random_subsets: 24,
            word_mixes: 4,
            version_mixes: 8,
            recovery_every: 97,
            fsck_every: 5,
            seed: 0x5eed,
            max_violations: 20,
            keep_going: false,
            extremes_only: false,
            torn_sectors: false,
            torn_pages: None,
            model: MediaModel::Pm,
            planted_bug: None,
        }
    }
}

/// A broken guarantee, with what is needed to replay it.
#[derive(Debug, Clone)]
pub struct Violation {
    /// The medium modelled.
    pub model: MediaModel,
    /// Workload name (replay with `manyfs crashtest --only NAME`).
    pub workload: String,
    /// Index of the crash point in the workload's event stream.
    pub crash_point: usize,
    /// Which image at that crash point.
    pub image: usize,
    /// What went wrong.
    pub detail: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "model {} workload {} crash point {} image {}: {}",
            self.model, self.workload, self.crash_point, self.image, self.detail
        )
    }
}

/// Totals of an exploration.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// Workloads run.
    pub workloads: u64,
    /// Operations executed.
    pub operations: u64,
    /// Crash points visited.
    pub crash_points: u64,
    /// Distinct images checked (different bytes at a crash point).
    pub images: u64,
    /// Images of crashes during recovery checked.
    pub recovery_images: u64,
    /// Pages the workloads staged in the pool of a tiered pool
    /// (`manyfs::StagingStats::pages_staged`; only a tiered pool under the
    /// pm model stages).
    pub staged_pages: u64,
    /// Workloads that staged at least one page.
    pub staging_workloads: u64,
    /// What broke.
    pub violations: Vec<Violation>,
}

impl std::fmt::Display for Stats {
    /// The one-line summary of a run (without the model and the time).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} workloads, {} operations, {} crash points, {} distinct images, \
             {} images of crashes during recovery, {} violations",
            self.workloads,
            self.operations,
            self.crash_points,
            self.images,
            self.recovery_images,
            self.violations.len()
        )?;
        if self.staged_pages > 0 {
            write!(
                f,
                ", {} pages staged by {} workloads",
                self.staged_pages, self.staging_workloads
            )?;
        }
        Ok(())
    }
}

/// What a file-system tree looks like, for comparing states.
pub type Snapshot = BTreeMap<String, Node>;

/// One node of a [`Snapshot`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// A directory.
    Dir,
    /// A file: its bytes and link count.
    File(Vec<u8>, u32),
    /// A symlink and its target.
    Symlink(Vec<u8>),
    /// A FIFO, socket or device node: its kind, device number and link
    /// count.
    Special(FileKind, u64, u32),
    /// An extended attribute's value (keyed `path NUL name`).
    Xattr(Vec<u8>),
    /// A file's or directory's mode, owner and group (keyed `path NUL`,
    /// which no attribute name gives: names are never empty).
    Attrs(u32, u32, u32),
}

/// Read the whole tree.
pub fn snapshot(fs: &Fs) -> Result<Snapshot> {
    let mut out = Snapshot::new();
    let mut stack = vec![PathBuf::from("/")];
    while let Some(dir) = stack.pop() {
        for e in fs.read_dir(&dir)? {
            let p = dir.join(&e.name);
            let key = p.display().to_string();
            for name in fs.listxattr(e.ino)? {
                let value = fs.getxattr(e.ino, &name)?;
                let k = format!("{key}\0{}", name.to_string_lossy());
                out.insert(k, Node::Xattr(value));
            }
            if matches!(e.kind, FileKind::Dir | FileKind::File) {
                let m = fs.symlink_metadata(&p)?;
                out.insert(format!("{key}\0"), Node::Attrs(m.mode, m.uid, m.gid));
            }
            match e.kind {
                FileKind::Dir => {
                    out.insert(key, Node::Dir);
                    stack.push(p);
                }
                FileKind::File => {
                    let m = fs.symlink_metadata(&p)?;
                    out.insert(key, Node::File(fs.read(&p)?, m.nlink));
                }
                FileKind::Symlink => {
                    let t = fs.read_link(&p)?;
                    out.insert(
                        key,
                        Node::Symlink(t.as_os_str().as_encoded_bytes().to_vec()),
                    );
                }
                special => {
                    let m = fs.symlink_metadata(&p)?;
                    out.insert(key, Node::Special(special, m.rdev, m.nlink));
                }
            }
        }
    }
    Ok(out)
}

/// The durability mode the engine runs in under `model`: `file` for the
/// page models (its durability points are what they model), else `dram`
/// (the recorder models persistent memory; no hardware flushes needed).
fn durability(model: MediaModel) -> Durability {
    if model.is_paged() {
        Durability::File
    } else {
        Durability::Dram
    }
}

fn ro() -> MountOptions {
    {
        let mut mo = MountOptions::default();
        mo.read_only = true;
        mo.durability = Durability::Dram;
        mo
    }
}

fn scratch_dir() -> Result<tempfile::TempDir> {
    let shm = Path::new("/dev/shm");
    let d = if shm.is_dir() {
        tempfile::Builder::new()
            .prefix("manyfs-crash")
            .tempdir_in(shm)
    } else {
        tempfile::Builder::new().prefix("manyfs-crash").tempdir()
    };
    d.map_err(|e| Error::io("create scratch directory", e))
}

/// The explorer's random choices: rand's [`StdRng`], so that every choice
/// of a run follows from its seed.
pub(crate) struct Rng(StdRng);

impl Rng {
    /// A generator whose choices follow from `seed`.
    pub(crate) fn seeded(seed: u64) -> Rng {
        Rng(StdRng::seed_from_u64(seed))
    }

    /// A number below `n` (0 when `n` is 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.0.random_range(0..n) }
    }
}

/// Which states an image may show.
enum Expect<'a> {
    /// One of these snapshots; no file holds bytes it was never given.
    OneOf(Vec<&'a Snapshot>, Option<&'a History>),
    /// Concurrent writers: per file block, a complete write no older than
    /// the newest returned one.
    Blocks(&'a workloads::Concurrent, HashSet<u64>),
    /// Page models: what was synced is there, the rest whole or absent; no
    /// file holds bytes it was never given.
    Durable(&'a History, Window),
}

fn check_state(fs: &Fs, expect: &Expect<'_>) -> std::result::Result<(), String> {
    let diffs = manyfs::fsck::verify(fs).map_err(|e| format!("verify: {e}"))?;
    if !diffs.is_empty() {
        return Err(format!("memory differs from media: {diffs:?}"));
    }
    match expect {
        Expect::OneOf(allowed, hist) => {
            if let Some(h) = hist {
                h.check_foreign_bytes(fs)?;
            }
            let snap = snapshot(fs).map_err(|e| format!("reading the tree: {e}"))?;
            if allowed.iter().any(|a| **a == snap) {
                Ok(())
            } else {
                Err(format!(
                    "state matches neither the state before nor after the operation in flight: {}",
                    describe_diff(allowed[0], &snap)
                ))
            }
        }
        Expect::Blocks(c, returned) => c.check(fs, returned),
        Expect::Durable(h, w) => {
            h.check_foreign_bytes(fs)?;
            h.check_durable(fs, *w)
        }
    }
}

fn describe_diff(want: &Snapshot, got: &Snapshot) -> String {
    for (k, v) in want {
        match got.get(k) {
            None => return format!("{k} missing"),
            Some(g) if g != v => {
                return match (v, g) {
                    (Node::File(a, la), Node::File(b, lb)) => {
                        format!(
                            "{k}: {} bytes nlink {la} expected, {} bytes nlink {lb} found",
                            a.len(),
                            b.len()
                        )
                    }
                    _ => format!("{k}: {v:?} expected, {g:?} found"),
                };
            }
            _ => {}
        }
    }
    for k in got.keys() {
        if !want.contains_key(k) {
            return format!("{k} should not exist");
        }
    }
    "no difference to the first allowed state".into()
}

/// Mount `image_path` and check it (persistent memory: read-only, the
/// image as it is).
fn check_image_pm(image_path: &Path, expect: &Expect<'_>) -> std::result::Result<(), String> {
    let fs = Fs::mount(image_path, &ro()).map_err(|e| format!("mount failed: {e}"))?;
    check_state(&fs, expect)
}

/// Records which pages a mount wrote (pool and data device alike): every
/// write of the media reaches its observer.
#[derive(Default)]
struct WrittenPages(std::sync::Mutex<HashSet<u64>>);

impl manyfs::diag::PersistObserver for WrittenPages {
    fn on_store(&self, off: u64, len: usize, _: &manyfs::diag::MediaView<'_>) {
        let mut set = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let first = off / PAGE as u64;
        let end = (off + len as u64).div_ceil(PAGE as u64);
        set.extend(first..end);
    }

    fn on_nt_store(&self, off: u64, len: usize, media: &manyfs::diag::MediaView<'_>) {
        self.on_store(off, len, media);
    }
}

/// Page models: the copy an image is checked on, mounted writable in
/// `file` mode as after a real power cut (that mount cuts what its durable
/// marks do not cover). It is kept, with what it holds, from one image to
/// the next: loading an image rewrites only the pages that differ from the
/// last image loaded and the pages the last check's mount wrote (an
/// observer on that mount names them), instead of copying whole images.
/// Every [`PagedCopy::AUDIT_EVERY`]th load reads the copy back and checks
/// it holds what it should.
struct PagedCopy {
    path: PathBuf,
    files: Files,
    /// What the copy holds, but for `written`.
    held: Vec<u8>,
    written: Arc<WrittenPages>,
    loads: u64,
    /// The mode of the check's mount: `file` for the page models, `dram`
    /// (standing in for `pm`) for a tiered `pm` pool.
    durability: Durability,
}

impl PagedCopy {
    const AUDIT_EVERY: u64 = 64;

    fn new(scratch: &Path, files: Files, durability: Durability) -> Result<PagedCopy> {
        let path = match files.split {
            None => scratch.join("check.img"),
            Some(_) => files.image_path(scratch, "check")?,
        };
        Ok(PagedCopy {
            path,
            files,
            held: Vec::new(),
            written: Arc::default(),
            loads: 0,
            durability,
        })
    }

    /// Make the copy's files hold `image`.
    fn load(&mut self, image: &[u8]) -> Result<()> {
        self.loads += 1;
        let written =
            std::mem::take(&mut *self.written.0.lock().unwrap_or_else(|p| p.into_inner()));
        if self.held.len() != image.len() {
            self.files.write(&self.path, image)?;
            self.held = image.to_vec();
            return Ok(());
        }
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for (i, (have, want)) in self.held.chunks(PAGE).zip(image.chunks(PAGE)).enumerate() {
            if have != want || written.contains(&(i as u64)) {
                let (s, e) = (i * PAGE, i * PAGE + want.len());
                match runs.last_mut() {
                    Some(r) if r.1 == s => r.1 = e,
                    _ => runs.push((s, e)),
                }
            }
        }
        for &(s, e) in &runs {
            self.held[s..e].copy_from_slice(&image[s..e]);
        }
        self.files.put_runs(&self.path, image, &runs)?;
        if self.loads.is_multiple_of(Self::AUDIT_EVERY) && self.files.read(&self.path)? != image {
            return Err(Error::InvalidArgument(
                "crash explorer: the check copy does not hold the image (a write of a check's \
                 mount was not seen by its observer)"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Load `image`, `fsck` it as the power cut left it when `fsck` is
    /// set, then mount it writable in `file` mode and check it.
    fn check(
        &mut self,
        image: &[u8],
        expect: &Expect<'_>,
        fsck: bool,
    ) -> std::result::Result<(), String> {
        self.load(image).map_err(|e| format!("copy image: {e}"))?;
        if fsck {
            match manyfs::fsck::check(&self.path) {
                Ok(r) if r.is_clean() => {}
                Ok(r) => return Err(format!("fsck: {:?}", r.errors)),
                Err(e) => return Err(format!("fsck: {e}")),
            }
        }
        let opts = {
            let mut mo = MountOptions::default();
            mo.durability = self.durability;
            mo.commit_interval = std::time::Duration::ZERO;
            mo
        };
        let fs = manyfs::diag::mount_observed(&self.path, &opts, self.written.clone())
            .map_err(|e| format!("mount failed: {e}"))?;
        check_state(&fs, expect)?;
        grow_files(&fs)
    }
}

/// Grow every file whose end is inside a page, and check that the bytes
/// the old end hid read as zeros: alternately by `set_len` to a page
/// further and by a one-byte write a page past the end (a hole between).
/// The state a power cut left must stay safe to use: a block's bytes past
/// the end may hold an append in place the cut dropped, or a fresh block's
/// old bytes, and must never become file content.
fn grow_files(fs: &Fs) -> std::result::Result<(), String> {
    let snap = snapshot(fs).map_err(|e| format!("reading the tree: {e}"))?;
    let files = snap.iter().filter_map(|(k, v)| match v {
        Node::File(bytes, _) if bytes.len() % PAGE != 0 => Some((k, bytes.len() as u64)),
        _ => None,
    });
    for (i, (path, size)) in files.enumerate() {
        let p = Path::new(path.as_str());
        let page = PAGE as u64;
        let written = if i % 2 == 0 {
            fs.set_len(p, size + page)
                .map_err(|e| format!("growing {path} from {size} with set_len: {e}"))?;
            None
        } else {
            let at = (size / page + 1) * page + 7;
            let f = manyfs::OpenOptions::new()
                .write(true)
                .open(fs, p)
                .map_err(|e| format!("opening {path}: {e}"))?;
            f.write_at(&[0x5a], at)
                .map_err(|e| format!("writing {path} at {at}: {e}"))?;
            Some(at)
        };
        let bytes = fs.read(p).map_err(|e| format!("reading {path}: {e}"))?;
        let hidden = bytes[size as usize..]
            .iter()
            .enumerate()
            .map(|(k, &b)| (size + k as u64, b))
            .find(|&(at, b)| b != 0 && Some(at) != written);
        if let Some((at, b)) = hidden {
            let how = if written.is_some() {
                "a write past it"
            } else {
                "set_len"
            };
            return Err(format!(
                "{path}: grown from {size} bytes by {how}, byte {at} reads {b:#04x}, not zero"
            ));
        }
    }
    Ok(())
}

/// Image selections for one crash point: each is a list of (unit index,
/// choice) to persist on top of the durable image. Choice `0xff` is the
/// unit's latest contents; any other value a mix of 8-byte words (pm) or
/// one of the page's earlier versions (page models).
fn selections(n: usize, cfg: &Config, rng: &mut Rng) -> Vec<Vec<(usize, u8)>> {
    let mut out: Vec<Vec<(usize, u8)>> = Vec::new();
    if cfg.extremes_only {
        out.push(Vec::new());
        out.push((0..n).map(|i| (i, 0xff)).collect());
        return out;
    }
    if n <= cfg.exhaustive_lines {
        for mask in 0u32..(1 << n) {
            out.push(
                (0..n)
                    .filter(|i| mask & (1 << i) != 0)
                    .map(|i| (i, 0xff))
                    .collect(),
            );
        }
    } else {
        out.push(Vec::new());
        out.push((0..n).map(|i| (i, 0xff)).collect());
        for i in 0..n {
            out.push(vec![(i, 0xff)]);
            out.push((0..n).filter(|&j| j != i).map(|j| (j, 0xff)).collect());
        }
        for _ in 0..cfg.random_subsets {
            out.push(
                (0..n)
                    .filter(|_| rng.below(2) == 0)
                    .map(|i| (i, 0xff))
                    .collect(),
            );
        }
    }
    let mixes = if cfg.model.is_paged() {
        cfg.version_mixes
    } else {
        cfg.word_mixes
    };
    if n > 0 {
        for _ in 0..mixes {
            let mut sel = Vec::new();
            for i in 0..n {
                if rng.below(2) == 0 {
                    sel.push((i, rng.below(255) as u8));
                }
            }
            out.push(sel);
        }
    }
    out
}

/// A 4 KiB block torn at 512-byte sectors: sector `i` from `new` where
/// bit `i` of `sectors` is set, else from `old`.
fn mixed_sectors(old: &[u8], new: &[u8], sectors: u8) -> Vec<u8> {
    let mut b = old.to_vec();
    let n = b.len().min(new.len());
    for (i, (o, s)) in b[..n].chunks_mut(512).zip(new[..n].chunks(512)).enumerate() {
        if sectors & (1 << (i % 8)) != 0 {
            o.copy_from_slice(s);
        }
    }
    b
}

/// A page torn by write-back racing stores: two of the versions it held
/// (`old`, the durable one, then `versions`), chosen by `choice`, mixed
/// `unit` bytes at a time (each piece from one of the two, by a hash of
/// `choice`, the page's offset and the piece).
fn torn_page(old: &[u8], versions: &[PageData], choice: u8, off: u64, unit: usize) -> Vec<u8> {
    let chain: Vec<&[u8]> = std::iter::once(old)
        .chain(versions.iter().map(|v| &v[..]))
        .collect();
    let mut rng = Rng::seeded(u64::from(choice).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ off);
    let n = chain.len() as u64;
    let a = rng.below(n - 1);
    let b = (a + 1 + rng.below(n - a - 1)) as usize;
    let a = a as usize;
    let (older, newer) = (chain[a], chain[b]);
    let mut page = older.to_vec();
    let len = page.len().min(newer.len());
    for (piece, src) in page[..len].chunks_mut(unit).zip(newer[..len].chunks(unit)) {
        if rng.below(2) == 1 {
            piece.copy_from_slice(src);
        }
    }
    page
}

fn mixed_line(old: &[u8], new: &[u8], words: u8) -> Vec<u8> {
    let mut l = old.to_vec();
    for w in 0..8 {
        if words & (1 << w) != 0 {
            l[w * 8..w * 8 + 8].copy_from_slice(&new[w * 8..w * 8 + 8]);
        }
    }
    l
}

/// Where a crash image's bytes go: one pool file, or (`split` set) the
/// pool file with bytes `..split` and its second member `m1` beside it
/// with the rest, each image in its own directory (the member table names
/// `m1` relative to the pool file's directory).
#[derive(Debug, Clone, Copy)]
struct Files {
    split: Option<u64>,
    /// The second file's name: `m1` (a second member) or `data` (a data
    /// device).
    second: &'static str,
}

impl Files {
    /// The pool file of image `name` in `scratch`.
    fn image_path(self, scratch: &Path, name: &str) -> Result<PathBuf> {
        if self.split.is_none() {
            return Ok(scratch.join(format!("{name}.img")));
        }
        let dir = scratch.join(name);
        std::fs::create_dir_all(&dir).map_err(|e| Error::io("create image directory", e))?;
        Ok(dir.join("pool"))
    }

    /// Whether image offset `off` is on the data device.
    fn is_device(self, off: u64) -> bool {
        self.tiered() && self.split.is_some_and(|s| off >= s)
    }

    /// Whether the second file is a data device.
    fn tiered(self) -> bool {
        self.split.is_some() && self.second == "data"
    }

    /// A recorder for `model` over these files: `pm` with a data device
    /// models the device's blocks as a volatile write cache.
    fn recorder(self, model: MediaModel) -> Recorder {
        match self.split {
            Some(start) if self.tiered() && !model.is_paged() => Recorder::pm_with_device(start),
            _ => Recorder::with_model(model),
        }
    }

    /// Write `image` over the files of the image at `path`.
    fn write(self, path: &Path, image: &[u8]) -> Result<()> {
        match self.split {
            None => write_image(path, image),
            Some(n0) => {
                let n0 = n0 as usize;
                write_image(path, &image[..n0])?;
                write_image(&path.with_file_name(self.second), &image[n0..])
            }
        }
    }

    /// Patch the image at `path` (a unit never straddles the members:
    /// both are whole pages).
    fn put(self, path: &Path, units: &[(u64, PageData)]) -> Result<()> {
        let Some(n0) = self.split else {
            return put_units(path, units);
        };
        let (first, second): (Vec<_>, Vec<_>) = units.iter().cloned().partition(|u| u.0 < n0);
        let second: Vec<_> = second.into_iter().map(|(o, d)| (o - n0, d)).collect();
        put_units(path, &first)?;
        put_units(&path.with_file_name(self.second), &second)
    }

    /// Write the byte ranges `runs` of `image` over the image at `path`.
    fn put_runs(self, path: &Path, image: &[u8], runs: &[(usize, usize)]) -> Result<()> {
        let units: Vec<(u64, &[u8])> = runs
            .iter()
            .map(|&(s, e)| (s as u64, &image[s..e]))
            .collect();
        let Some(n0) = self.split else {
            return put_slices(path, &units);
        };
        let n0 = n0 as usize;
        let mut first = Vec::new();
        let mut second = Vec::new();
        for &(s, e) in runs {
            if s < n0 {
                first.push((s as u64, &image[s..e.min(n0)]));
            }
            if e > n0 {
                let s2 = s.max(n0);
                second.push(((s2 - n0) as u64, &image[s2..e]));
            }
        }
        put_slices(path, &first)?;
        put_slices(&path.with_file_name(self.second), &second)
    }

    /// The bytes of the image at `path`.
    fn read(self, path: &Path) -> Result<Vec<u8>> {
        let mut v = std::fs::read(path).map_err(|e| Error::io("read image", e))?;
        if self.split.is_some() {
            let m = std::fs::read(path.with_file_name(self.second))
                .map_err(|e| Error::io("read image member", e))?;
            v.extend_from_slice(&m);
        }
        Ok(v)
    }
}

/// Write `image` to `path` (same length as before).
fn write_image(path: &Path, image: &[u8]) -> Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| Error::io("open image", e))?;
    f.seek(SeekFrom::Start(0))
        .map_err(|e| Error::io("seek image", e))?;
    f.write_all(image).map_err(|e| Error::io("write image", e))
}

fn put_slices(path: &Path, units: &[(u64, &[u8])]) -> Result<()> {
    if units.is_empty() {
        return Ok(());
    }
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| Error::io("open image", e))?;
    for (off, l) in units {
        f.write_all_at(l, *off)
            .map_err(|e| Error::io("patch image", e))?;
    }
    Ok(())
}

fn put_units(path: &Path, units: &[(u64, PageData)]) -> Result<()> {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| Error::io("open image", e))?;
    for (off, l) in units {
        f.write_all_at(l, *off)
            .map_err(|e| Error::io("patch image", e))?;
    }
    Ok(())
}

fn apply_units(image: &mut [u8], units: &[(u64, PageData)]) {
    for (off, data) in units {
        let o = *off as usize;
        if o + data.len() <= image.len() {
            image[o..o + data.len()].copy_from_slice(data);
        }
    }
}

/// One unit (line or page) in flight at a crash point: its durable
/// contents and the contents it may persist with (distinct from durable,
/// oldest first; the last is the current one).
struct Unit {
    off: u64,
    /// A 64-byte line (its choices mix 8-byte words), else a 4 KiB page
    /// (its choices pick a version).
    line: bool,
    old: PageData,
    versions: Vec<PageData>,
}

fn in_flight(image: &[u8], ev: &Event) -> Option<Vec<Unit>> {
    let old = |off: u64, len: usize| -> Option<PageData> {
        let o = off as usize;
        image.get(o..o + len).map(PageData::from)
    };
    let line_units = |lines: &[(u64, recorder::Line)]| -> Vec<Unit> {
        lines
            .iter()
            .filter_map(|(off, new)| {
                let old = old(*off, 64)?;
                (*old != new[..]).then(|| Unit {
                    off: *off,
                    line: true,
                    old,
                    versions: vec![PageData::from(&new[..])],
                })
            })
            .collect()
    };
    match ev {
        Event::Crash(lines) => Some(line_units(lines)),
        Event::CrashMixed(lines, pages) => {
            let mut units = line_units(lines);
            units.extend(in_flight(image, &Event::CrashPages(pages.clone()))?);
            Some(units)
        }
        Event::CrashPages(pages) => Some(
            pages
                .iter()
                .filter_map(|(off, versions)| {
                    let old = old(*off, versions.first()?.len())?;
                    let mut vs: Vec<PageData> = Vec::new();
                    for v in versions {
                        if **v != *old && !vs.iter().any(|x| x == v) {
                            vs.push(v.clone());
                        }
                    }
                    // The current contents last, even if an earlier
                    // version had the same bytes.
                    if let Some(last) = versions.last()
                        && **last != *old
                        && vs.last() != Some(last)
                    {
                        vs.retain(|x| x != last);
                        vs.push(last.clone());
                    }
                    (!vs.is_empty()).then_some(Unit {
                        off: *off,
                        line: false,
                        old,
                        versions: vs,
                    })
                })
                .collect(),
        ),
        _ => None,
    }
}

/// Replay recorded `events` from `base`, checking every image against the
/// expectation `expect_at` gives for the markers seen so far. Page models
/// check on `copy`; persistent memory mounts a file of the image itself
/// read-only.
#[allow(clippy::too_many_arguments)]
fn explore_events<'m>(
    name: &str,
    base: &[u8],
    events: &[Event],
    scratch: &Path,
    cfg: &Config,
    stats: &mut Stats,
    rng: &mut Rng,
    expect_at: &mut dyn FnMut(&[u64]) -> Expect<'m>,
    recovery: bool,
    files: Files,
    copy: &mut Option<PagedCopy>,
) -> Result<()> {
    let image_path = files.image_path(scratch, if recovery { "recovery" } else { "crash" })?;
    let mut image = base.to_vec();
    let found_before = stats.violations.len();
    let mut notes: Vec<u64> = Vec::new();
    let mut seen: HashSet<u64> = HashSet::new();
    for (point, ev) in events.iter().enumerate() {
        match ev {
            Event::Persist(lines) => apply(&mut image, lines),
            Event::PersistPages(pages) => apply_units(&mut image, pages),
            Event::Note(t) => notes.push(*t),
            Event::Crash(_) | Event::CrashPages(_) | Event::CrashMixed(..) => {
                stats.crash_points += u64::from(!recovery);
                let units = in_flight(&image, ev).unwrap_or_default();
                let expect = expect_at(&notes);
                if copy.is_none() {
                    files.write(&image_path, &image)?;
                }
                // An image already checked under the same expectation (same markers
                // seen) needs no second look.
                let base_crc =
                    crc32fast::hash(&image) ^ (notes.len() as u32).wrapping_mul(0x9e37_79b9);
                let sels = if recovery {
                    // During recovery: nothing, everything, and each unit alone.
                    let n = units.len();
                    let mut v = vec![Vec::new(), (0..n).map(|i| (i, 0xff)).collect::<Vec<_>>()];
                    v.extend((0..n).map(|i| vec![(i, 0xffu8)]));
                    v
                } else {
                    selections(units.len(), cfg, rng)
                };
                for (k, sel) in sels.iter().enumerate() {
                    let patch: Vec<(u64, PageData)> = sel
                        .iter()
                        .map(|&(i, choice)| {
                            let u = &units[i];
                            let last = u.versions.last().expect("a version");
                            let data = if choice == 0xff {
                                last.clone()
                            } else if u.line {
                                PageData::from(mixed_line(&u.old, last, choice))
                            } else if cfg.torn_sectors && files.is_device(u.off) {
                                PageData::from(mixed_sectors(&u.old, last, choice))
                            } else if let Some(unit) = cfg.torn_pages
                                && choice % 2 == 1
                                && !files.is_device(u.off)
                            {
                                PageData::from(torn_page(&u.old, &u.versions, choice, u.off, unit))
                            } else {
                                u.versions[choice as usize % u.versions.len()].clone()
                            };
                            (u.off, data)
                        })
                        .collect();
                    let key = image_key(base_crc, &patch);
                    if !seen.insert(key) {
                        continue;
                    }
                    // The image is `image` with the patch applied (in
                    // memory, and on the pm model's file), reverted after.
                    let revert: Vec<(u64, PageData)> = patch
                        .iter()
                        .map(|(off, d)| {
                            let o = *off as usize;
                            (*off, PageData::from(&image[o..o + d.len()]))
                        })
                        .collect();
                    apply_units(&mut image, &patch);
                    if copy.is_none() {
                        files.put(&image_path, &patch)?;
                    }
                    if recovery {
                        stats.recovery_images += 1;
                    } else {
                        stats.images += 1;
                    }
                    // As before tiers: the pm model mounts, verifies and
                    // checks states, without fsck (a power cut inside the
                    // mount's superblock update may leave the primary copy
                    // torn, which fsck reports and the mount reads from the
                    // backup).
                    let fsck = cfg.model.is_paged()
                        && cfg.fsck_every > 0
                        && (stats.images + stats.recovery_images)
                            .is_multiple_of(cfg.fsck_every as u64);
                    let outcome = match copy.as_mut() {
                        Some(c) => c.check(&image, &expect, fsck),
                        None => check_image_pm(&image_path, &expect),
                    };
                    if let Err(detail) = outcome {
                        stats.violations.push(Violation {
                            model: cfg.model,
                            workload: name.to_string(),
                            crash_point: point,
                            image: k,
                            detail: if recovery {
                                format!("crash during recovery: {detail}")
                            } else {
                                detail
                            },
                        });
                        if stats.violations.len() - found_before >= cfg.max_violations {
                            return Ok(());
                        }
                    } else if !recovery
                        && cfg.recovery_every > 0
                        && (stats.images as usize).is_multiple_of(cfg.recovery_every)
                    {
                        check_recovery_crashes(
                            name, &image, scratch, cfg, stats, rng, files, copy,
                        )?;
                    }
                    apply_units(&mut image, &revert);
                    if copy.is_none() {
                        files.put(&image_path, &revert)?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// Identity of an image: checksum of the durable part and of the patch.
fn image_key(base_crc: u32, patch: &[(u64, PageData)]) -> u64 {
    let mut h = crc32fast::Hasher::new();
    for (off, l) in patch {
        h.update(&off.to_le_bytes());
        h.update(l);
    }
    (u64::from(base_crc) << 32) | u64::from(h.finalize())
}

/// Recover a copy of `image` with recording on, then check every image
/// a crash during that recovery could leave comes back to the same state.
#[allow(clippy::too_many_arguments)]
fn check_recovery_crashes(
    name: &str,
    image: &[u8],
    scratch: &Path,
    cfg: &Config,
    stats: &mut Stats,
    rng: &mut Rng,
    files: Files,
    copy: &mut Option<PagedCopy>,
) -> Result<()> {
    let path = files.image_path(scratch, "recovering")?;
    files.write(&path, image)?;
    let rec = Arc::new(files.recorder(cfg.model));
    let opts = {
        let mut mo = MountOptions::default();
        mo.durability = durability(cfg.model);
        mo.commit_interval = std::time::Duration::ZERO;
        mo
    };
    let fs = manyfs::diag::mount_observed(&path, &opts, rec.clone())?;
    let recovered = snapshot(&fs)?;
    drop(fs);
    let events = rec.take_events();
    if !events
        .iter()
        .any(|e| matches!(e, Event::Persist(_) | Event::PersistPages(_)))
    {
        return Ok(()); // recovery wrote nothing durable
    }
    let mut expect = |_: &[u64]| Expect::OneOf(vec![&recovered], None);
    explore_events(
        name,
        image,
        &events,
        scratch,
        cfg,
        stats,
        rng,
        &mut expect,
        true,
        files,
        copy,
    )
}

/// Clears the process-wide recovery bugs when dropped.
#[cfg(feature = "planted-bugs")]
struct RecoveryBugGuard;

#[cfg(feature = "planted-bugs")]
impl Drop for RecoveryBugGuard {
    fn drop(&mut self) {
        manyfs::diag::clear_recovery_bugs();
    }
}

/// Every workload, ordered so that a run cut short by an image budget still
/// covers each kind: concurrent writers, the durability workloads (writes,
/// overwrites and creates around fsyncs), every single operation and the
/// compaction workloads, random three-operation sequences, every ordered
/// pair of operations, random sequences whose thread moves between CPUs,
/// random attribute changes, then random six-operation sequences (the
/// migrating and attribute workloads also have tests of their own).
pub fn standard_workloads(seed: u64) -> Vec<Workload> {
    let (pairs, rest): (Vec<Workload>, Vec<Workload>) = ace_workloads()
        .into_iter()
        .partition(|w| w.name.starts_with("ace2-"));
    let mut out = concurrent_workloads();
    out.extend(durability_workloads());
    out.extend(rest);
    out.extend(random_workloads(seed, 150, 3));
    out.extend(pairs);
    out.extend(migrating_random_workloads(seed, 40, 10));
    out.extend(attr_random_workloads(seed, 30, 8));
    out.extend(random_workloads(seed.wrapping_add(1), 2000, 6));
    out
}

fn expect_sequential<'m>(
    cfg: &Config,
    tiered: bool,
    models: &'m [Snapshot],
    hist: &'m History,
    notes: &[u64],
) -> Expect<'m> {
    // After the last marker: op i returned (only model i+1), or op i in
    // flight (model i or i+1).
    let w = match notes.last() {
        None => Window {
            returned: 0,
            in_flight: false,
        },
        Some(&t) if t & (3 << 62) == OP_START => Window {
            returned: (t & !(3 << 62)) as usize,
            in_flight: true,
        },
        Some(&t) => Window {
            returned: (t & !(3 << 62)) as usize + 1,
            in_flight: false,
        },
    };
    // A tiered pool promises in every mode what `file` mode promises.
    if cfg.model.is_paged() || tiered {
        return Expect::Durable(hist, w);
    }
    let i = w.returned;
    if w.in_flight {
        Expect::OneOf(vec![&models[i], &models[i + 1]], Some(hist))
    } else {
        Expect::OneOf(vec![&models[i]], Some(hist))
    }
}

/// `to` relative to the current directory: a member path given so to mkfs
/// is recorded relative to the pool file's directory, so a copy of the
/// pool directory is a pool of its own.
fn relative_from_cwd(to: &Path) -> Result<PathBuf> {
    let cwd = std::env::current_dir().map_err(|e| Error::io("current directory", e))?;
    let common = cwd
        .components()
        .zip(to.components())
        .take_while(|(a, b)| a == b)
        .count();
    let mut out: PathBuf = (common..cwd.components().count()).map(|_| "..").collect();
    out.extend(to.components().skip(common));
    Ok(out)
}

/// Run one workload and check all its crash images.
///
/// Longer than 150 lines on purpose: the loop over crash points, images and
/// recovery crashes shares the recorder, the oracle's state and the
/// counters; each phase is one commented block.
pub fn explore(w: &Workload, cfg: &Config, stats: &mut Stats) -> Result<()> {
    let scratch = scratch_dir()?;
    let files = Files {
        split: (w.member_bytes > 0 || w.data_bytes > 0).then_some(w.pool_size),
        second: if w.data_bytes > 0 { "data" } else { "m1" },
    };
    if w.data_bytes > 0 && cfg.model == MediaModel::BlockDev {
        // The pool's medium is the page cache (`file` mode: the pagecache
        // model) or persistent memory (`pm`: cache lines); the data
        // device's volatile cache is a page model with its flush covering
        // the whole device in both. The block-device model would let a
        // pool sync flush the device too: a different system.
        return Err(Error::InvalidArgument(format!(
            "{}: tiered pools are explored under the pagecache and pm models only",
            w.name
        )));
    }
    if let Some(bug) = cfg.planted_bug
        && bug.in_engine()
        && !cfg!(feature = "planted-bugs")
    {
        return Err(Error::InvalidArgument(format!(
            "the planted bug {bug:?} needs manyfs-crashtest's planted-bugs feature"
        )));
    }
    if w.member_bytes > 0 && cfg.model.is_paged() {
        return Err(Error::InvalidArgument(format!(
            "{}: pools of several members are explored under the pm model only",
            w.name
        )));
    }
    let pool = files.image_path(scratch.path(), "base")?;
    let members = if w.member_bytes > 0 {
        vec![manyfs::PoolMember {
            path: relative_from_cwd(&pool.with_file_name("m1"))?,
            node: 1,
            size: w.member_bytes,
        }]
    } else {
        Vec::new()
    };
    let opts = {
        let mut mo = MountOptions::default();
        mo.durability = durability(cfg.model);
        mo.commit_interval = std::time::Duration::ZERO;
        mo
    };
    let data = if w.data_bytes > 0 {
        Some(manyfs::DataDevice {
            path: relative_from_cwd(&pool.with_file_name("data"))?,
            size: Some(w.data_bytes),
        })
    } else {
        None
    };
    let mut hist = History::new();
    // Making the pool, the setup, the mount and every operation without a
    // CPU of its own run on the first CPU, not wherever the scheduler had
    // the explorer's thread: which sub-log an entry reaches (a new inode's
    // attribute sub-log among them) then follows from the workload, and a
    // violation found in CI is found again on any machine.
    manyfs::diag::run_on_cpu(0, || -> Result<()> {
        let fs = Fs::mkfs(
            &pool,
            &{
                let mut mk = MkfsOptions::default();
                mk.size = w.pool_size;
                mk.bytes_per_inode = 16 << 10;
                mk.members = members;
                mk.data = data;
                mk
            },
            &opts,
        )?;
        for op in &w.setup {
            hist.setup(op, &fs);
        }
        Ok(())
    })??;
    let base = files.read(&pool)?;
    let rec = Arc::new(files.recorder(cfg.model));
    rec.drop_short_flushes(cfg.planted_bug == Some(PlantedBug::DroppedFlush));
    let fs = manyfs::diag::run_on_cpu(0, || {
        manyfs::diag::mount_observed(&pool, &opts, rec.clone())
    })??;
    if cfg.planted_bug == Some(PlantedBug::ForgottenSync) {
        // The first sync of the workload (not the mount's) is forgotten.
        rec.forget_syncs(1);
    }
    if cfg.planted_bug == Some(PlantedBug::SkippedDeviceFlush) {
        // Every flush of the data device is a no-op: marks commit entries
        // whose data may still be in the device's cache.
        rec.forget_syncs_from(w.pool_size);
    }
    #[cfg(feature = "planted-bugs")]
    if let Some(bug) = cfg.planted_bug.and_then(PlantedBug::engine_bug) {
        manyfs::diag::plant_bug(&fs, bug);
    }
    let mut rng = Rng::seeded(cfg.seed ^ (w.name.len() as u64).wrapping_mul(0x9e37_79b9));
    stats.workloads += 1;
    let mut models = Vec::new();
    if w.concurrent.is_none() {
        hist.start(&fs)?;
        models.push(snapshot(&fs)?);
        for (i, op) in w.ops.iter().enumerate() {
            manyfs::diag::note(&fs, OP_START | i as u64);
            // An operation with a CPU of its own is moved there from this
            // thread (a thread already pinned could not reach it).
            match op {
                Op::OnCpu(..) => hist.op(op, &fs)?,
                _ => manyfs::diag::run_on_cpu(0, || hist.op(op, &fs))??,
            }
            models.push(snapshot(&fs)?);
            manyfs::diag::note(&fs, OP_END | i as u64);
            stats.operations += 1;
        }
    }
    if let Some(c) = &w.concurrent {
        stats.operations += c.run(&fs)?;
    }
    let staged = fs.stats().staging.pages_staged;
    drop(fs);
    stats.staged_pages += staged;
    stats.staging_workloads += u64::from(staged > 0);
    // A tiered pool stages under the pm model only (the page model's
    // `file`-mode pool writes every page to the device).
    if w.must_stage && w.data_bytes > 0 && !cfg.model.is_paged() && staged == 0 {
        stats.violations.push(Violation {
            model: cfg.model,
            workload: w.name.clone(),
            crash_point: 0,
            image: 0,
            detail: "no page was staged in the pool: the workload's crash states \
                     do not cover staging"
                .into(),
        });
    }
    let events = rec.take_events();
    // A tiered pool's writes are durable only once synced, in every mode.
    let paged = cfg.model.is_paged() || w.data_bytes > 0;
    // Page models and tiered pools: checked as after a real power cut, on
    // a copy mounted writable (that mount cuts what durable marks do not
    // cover; a read-only mount would only hide it in memory).
    let mut copy = if paged {
        Some(PagedCopy::new(
            scratch.path(),
            files,
            durability(cfg.model),
        )?)
    } else {
        None
    };
    let mut expect = |notes: &[u64]| match &w.concurrent {
        None => expect_sequential(cfg, w.data_bytes > 0, &models, &hist, notes),
        Some(c) => {
            // Page models: nothing is synced, so no write must be there;
            // each block still is a whole write or never written.
            let returned: HashSet<u64> = notes
                .iter()
                .filter(|t| !paged && *t & (3 << 62) == WRITE_RETURNED)
                .map(|t| t & !(3 << 62))
                .collect();
            Expect::Blocks(c, returned)
        }
    };
    explore_events(
        &w.name,
        &base,
        &events,
        scratch.path(),
        cfg,
        stats,
        &mut rng,
        &mut expect,
        false,
        files,
        &mut copy,
    )
}

/// Explore many workloads until done or `min_images` is reached (0 = all).
/// With [`Config::keep_going`], a violation does not stop the run.
pub fn explore_all(
    workloads: &[Workload],
    cfg: &Config,
    min_images: u64,
    stats: &mut Stats,
    mut progress: impl FnMut(&Stats),
) -> Result<()> {
    // Recovery bugs are process-wide: planted for this exploration only.
    #[cfg(feature = "planted-bugs")]
    let _recovery_bug = (cfg.planted_bug == Some(PlantedBug::EntryChecksumIgnored)).then(|| {
        manyfs::diag::plant_recovery_bug(manyfs::diag::RecoveryBug::EntryChecksumIgnored);
        RecoveryBugGuard
    });
    for w in workloads {
        explore(w, cfg, stats)?;
        progress(stats);
        let stop_on_violation = !cfg.keep_going && !stats.violations.is_empty();
        if stop_on_violation || (min_images > 0 && stats.images >= min_images) {
            break;
        }
    }
    Ok(())
}
