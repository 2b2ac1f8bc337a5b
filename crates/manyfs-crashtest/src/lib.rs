//! The crash-state explorer.
//!
//! A workload runs on a pool whose media records every store, flush and
//! fence ([`Recorder`], attached through the library's
//! [`manyfs::media::PersistObserver`] seam). Replaying the events, the explorer
//! rebuilds, at every fence and between operations, the images a power cut
//! could leave: nothing in flight persisted, all of it, every subset when few
//! lines are in flight, singletons, all-but-one and random subsets when many
//! are, and mixes of 8-byte words inside a line (only aligned 8-byte stores
//! are failure-atomic). Every image must
//! - mount (the rebuild checks checksums, commit marks, block ownership,
//!   tree shape, generations: what `fsck` checks),
//! - match its own rebuild ([`Fs::verify`]),
//! - show a state the workload could have left: every operation that returned
//!   is there, and the one in flight is all or nothing.
//!
//! A sample of images is also recovered with recording on, and every image a
//! crash *during recovery* could leave must come back to the same state.

pub mod recorder;
mod workloads;

pub use recorder::Recorder;
pub use workloads::{Op, Workload, ace_workloads, concurrent_workloads, random_workloads};

use manyfs::{Durability, Error, FileKind, Fs, MkfsOptions, MountOptions, Result};
use recorder::{Event, Line, apply};
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

/// How hard to look.
#[derive(Debug, Clone)]
pub struct Config {
    /// In-flight line counts up to this get every subset.
    pub exhaustive_lines: usize,
    /// Random subsets per crash point above that.
    pub random_subsets: usize,
    /// Random 8-byte-word mixes per crash point.
    pub word_mixes: usize,
    /// Check a crash during recovery for every this-many images (0 = never).
    pub recovery_every: usize,
    /// Seed of the random choices.
    pub seed: u64,
    /// Plant a bug: drop every flush shorter than a cache line.
    pub planted_bug: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            exhaustive_lines: 8,
            random_subsets: 24,
            word_mixes: 4,
            recovery_every: 97,
            seed: 0x5eed,
            planted_bug: false,
        }
    }
}

/// A broken guarantee, with what is needed to replay it.
#[derive(Debug, Clone)]
pub struct Violation {
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
            "workload {} crash point {} image {}: {}",
            self.workload, self.crash_point, self.image, self.detail
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
    /// What broke.
    pub violations: Vec<Violation>,
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
}

/// Read the whole tree.
pub fn snapshot(fs: &Fs) -> Result<Snapshot> {
    let mut out = Snapshot::new();
    let mut stack = vec![PathBuf::from("/")];
    while let Some(dir) = stack.pop() {
        for e in fs.read_dir(&dir)? {
            let p = dir.join(&e.name);
            let key = p.display().to_string();
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
            }
        }
    }
    Ok(out)
}

fn ro() -> MountOptions {
    MountOptions {
        read_only: true,
        durability: Durability::Dram,
        ..Default::default()
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

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Which states an image may show.
enum Expect<'a> {
    /// One of these snapshots.
    OneOf(Vec<&'a Snapshot>),
    /// Concurrent writers: per file block, a complete write no older than
    /// the newest returned one.
    Blocks(&'a workloads::Concurrent, HashSet<u64>),
}

fn check_state(fs: &Fs, expect: &Expect<'_>) -> std::result::Result<(), String> {
    let diffs = fs.verify().map_err(|e| format!("verify: {e}"))?;
    if !diffs.is_empty() {
        return Err(format!("memory differs from media: {diffs:?}"));
    }
    match expect {
        Expect::OneOf(allowed) => {
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

/// Mount `image_path` read-only and check it.
fn check_image(image_path: &Path, expect: &Expect<'_>) -> std::result::Result<(), String> {
    let fs = Fs::mount(image_path, &ro()).map_err(|e| format!("mount failed: {e}"))?;
    check_state(&fs, expect)
}

/// Image selections for one crash point: each is a list of (line index,
/// optional word mask) to persist on top of the durable image.
fn selections(n: usize, cfg: &Config, rng: &mut Rng) -> Vec<Vec<(usize, u8)>> {
    let mut out: Vec<Vec<(usize, u8)>> = Vec::new();
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
                    .filter(|_| rng.next().is_multiple_of(2))
                    .map(|i| (i, 0xff))
                    .collect(),
            );
        }
    }
    if n > 0 {
        for _ in 0..cfg.word_mixes {
            let mut sel = Vec::new();
            for i in 0..n {
                if rng.next().is_multiple_of(2) {
                    sel.push((i, (rng.next() % 255) as u8 + 1));
                }
            }
            out.push(sel);
        }
    }
    out
}

fn mixed_line(old: &Line, new: &Line, words: u8) -> Line {
    let mut l = *old;
    for w in 0..8 {
        if words & (1 << w) != 0 {
            l[w * 8..w * 8 + 8].copy_from_slice(&new[w * 8..w * 8 + 8]);
        }
    }
    l
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

fn put_lines(path: &Path, lines: &[(u64, Line)]) -> Result<()> {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| Error::io("open image", e))?;
    for (off, l) in lines {
        f.write_all_at(l, *off)
            .map_err(|e| Error::io("patch image", e))?;
    }
    Ok(())
}

/// Replay recorded `events` from `base`, checking every image against the
/// expectation `expect_at` gives for the markers seen so far.
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
) -> Result<()> {
    let image_path = scratch.join(if recovery {
        "recovery.img"
    } else {
        "crash.img"
    });
    let mut image = base.to_vec();
    let mut notes: Vec<u64> = Vec::new();
    let mut seen: HashSet<u64> = HashSet::new();
    for (point, ev) in events.iter().enumerate() {
        match ev {
            Event::Persist(lines) => apply(&mut image, lines),
            Event::Note(t) => notes.push(*t),
            Event::Crash(inflight) => {
                stats.crash_points += u64::from(!recovery);
                let inflight: Vec<(u64, Line, Line)> = inflight
                    .iter()
                    .filter_map(|(off, new)| {
                        let o = *off as usize;
                        let old: Line = image.get(o..o + 64)?.try_into().ok()?;
                        (old != *new).then_some((*off, old, *new))
                    })
                    .collect();
                let expect = expect_at(&notes);
                write_image(&image_path, &image)?;
                // An image already checked under the same expectation (same markers
                // seen) needs no second look.
                let base_crc =
                    crc32fast::hash(&image) ^ (notes.len() as u32).wrapping_mul(0x9e37_79b9);
                let sels = if recovery {
                    // During recovery: nothing, everything, and each line alone.
                    let n = inflight.len();
                    let mut v = vec![Vec::new(), (0..n).map(|i| (i, 0xff)).collect::<Vec<_>>()];
                    v.extend((0..n).map(|i| vec![(i, 0xffu8)]));
                    v
                } else {
                    selections(inflight.len(), cfg, rng)
                };
                for (k, sel) in sels.iter().enumerate() {
                    let patch: Vec<(u64, Line)> = sel
                        .iter()
                        .map(|&(i, words)| {
                            let (off, old, new) = &inflight[i];
                            (
                                *off,
                                if words == 0xff {
                                    *new
                                } else {
                                    mixed_line(old, new, words)
                                },
                            )
                        })
                        .collect();
                    let key = image_key(base_crc, &patch);
                    if !seen.insert(key) {
                        continue;
                    }
                    put_lines(&image_path, &patch)?;
                    if recovery {
                        stats.recovery_images += 1;
                    } else {
                        stats.images += 1;
                    }
                    let outcome = check_image(&image_path, &expect);
                    if let Err(detail) = outcome {
                        stats.violations.push(Violation {
                            workload: name.to_string(),
                            crash_point: point,
                            image: k,
                            detail: if recovery {
                                format!("crash during recovery: {detail}")
                            } else {
                                detail
                            },
                        });
                        if stats.violations.len() > 20 {
                            return Ok(());
                        }
                    } else if !recovery
                        && cfg.recovery_every > 0
                        && (stats.images as usize).is_multiple_of(cfg.recovery_every)
                    {
                        check_recovery_crashes(name, &image_path, scratch, cfg, stats, rng)?;
                    }
                    let revert: Vec<(u64, Line)> = patch
                        .iter()
                        .map(|(off, _)| {
                            let o = *off as usize;
                            (*off, image[o..o + 64].try_into().expect("64 bytes"))
                        })
                        .collect();
                    put_lines(&image_path, &revert)?;
                }
            }
        }
    }
    Ok(())
}

/// Identity of an image: checksum of the durable part and of the patch.
fn image_key(base_crc: u32, patch: &[(u64, Line)]) -> u64 {
    let mut h = crc32fast::Hasher::new();
    for (off, l) in patch {
        h.update(&off.to_le_bytes());
        h.update(l);
    }
    (u64::from(base_crc) << 32) | u64::from(h.finalize())
}

/// Recover a copy of `image_path` with recording on, then check every image
/// a crash during that recovery could leave comes back to the same state.
fn check_recovery_crashes(
    name: &str,
    image_path: &Path,
    scratch: &Path,
    cfg: &Config,
    stats: &mut Stats,
    rng: &mut Rng,
) -> Result<()> {
    let copy = scratch.join("recovering.img");
    std::fs::copy(image_path, &copy).map_err(|e| Error::io("copy image", e))?;
    let base = std::fs::read(&copy).map_err(|e| Error::io("read image", e))?;
    let rec = Arc::new(Recorder::new());
    let opts = MountOptions {
        durability: Durability::Dram,
        ..Default::default()
    };
    let fs = Fs::mount_observed(&copy, &opts, rec.clone())?;
    let recovered = snapshot(&fs)?;
    drop(fs);
    let events = rec.take_events();
    if !events.iter().any(|e| matches!(e, Event::Persist(_))) {
        return Ok(()); // recovery wrote nothing durable
    }
    let mut expect = |_: &[u64]| Expect::OneOf(vec![&recovered]);
    explore_events(
        name,
        &base,
        &events,
        scratch,
        cfg,
        stats,
        rng,
        &mut expect,
        true,
    )
}

/// Every workload, ordered so that a run cut short by an image budget still
/// covers each kind: concurrent writers, every single operation and the
/// compaction workloads, random three-operation sequences, every ordered
/// pair of operations, then random six-operation sequences.
pub fn standard_workloads(seed: u64) -> Vec<Workload> {
    let (pairs, rest): (Vec<Workload>, Vec<Workload>) = ace_workloads()
        .into_iter()
        .partition(|w| w.name.starts_with("ace2-"));
    let mut out = concurrent_workloads();
    out.extend(rest);
    out.extend(random_workloads(seed, 150, 3));
    out.extend(pairs);
    out.extend(random_workloads(seed.wrapping_add(1), 2000, 6));
    out
}

/// Run one workload and check all its crash images.
pub fn explore(w: &Workload, cfg: &Config, stats: &mut Stats) -> Result<()> {
    let scratch = scratch_dir()?;
    let pool = scratch.path().join("pool");
    let opts = MountOptions {
        durability: Durability::Dram,
        ..Default::default()
    };
    {
        let fs = Fs::mkfs(
            &pool,
            &MkfsOptions {
                size: w.pool_size,
                bytes_per_inode: 16 << 10,
                ..Default::default()
            },
            &opts,
        )?;
        for op in &w.setup {
            let _ = op.apply(&fs);
        }
    }
    let base = std::fs::read(&pool).map_err(|e| Error::io("read pool", e))?;
    let rec = Arc::new(Recorder::new());
    rec.drop_short_flushes(cfg.planted_bug);
    let fs = Fs::mount_observed(&pool, &opts, rec.clone())?;
    let mut rng = Rng(cfg.seed ^ (w.name.len() as u64).wrapping_mul(0x9e37_79b9) ^ 1);
    stats.workloads += 1;
    match &w.concurrent {
        None => {
            let mut models = vec![snapshot(&fs)?];
            for (i, op) in w.ops.iter().enumerate() {
                fs.note(OP_START | i as u64);
                let _ = op.apply(&fs);
                models.push(snapshot(&fs)?);
                fs.note(OP_END | i as u64);
                stats.operations += 1;
            }
            drop(fs);
            let events = rec.take_events();
            let mut expect = |notes: &[u64]| {
                // After the last marker: op i returned (only model i+1), or
                // op i in flight (model i or i+1).
                match notes.last() {
                    None => Expect::OneOf(vec![&models[0]]),
                    Some(&t) if t & (3 << 62) == OP_START => {
                        let i = (t & !(3 << 62)) as usize;
                        Expect::OneOf(vec![&models[i], &models[i + 1]])
                    }
                    Some(&t) => {
                        let i = (t & !(3 << 62)) as usize;
                        Expect::OneOf(vec![&models[i + 1]])
                    }
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
            )
        }
        Some(c) => {
            stats.operations += c.run(&fs)?;
            drop(fs);
            let events = rec.take_events();
            let mut expect = |notes: &[u64]| {
                let returned: HashSet<u64> = notes
                    .iter()
                    .filter(|t| *t & (3 << 62) == WRITE_RETURNED)
                    .map(|t| t & !(3 << 62))
                    .collect();
                Expect::Blocks(c, returned)
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
            )
        }
    }
}

/// Explore many workloads until done or `min_images` is reached (0 = all).
pub fn explore_all(
    workloads: &[Workload],
    cfg: &Config,
    min_images: u64,
    stats: &mut Stats,
    mut progress: impl FnMut(&Stats),
) -> Result<()> {
    for w in workloads {
        explore(w, cfg, stats)?;
        progress(stats);
        if !stats.violations.is_empty() || (min_images > 0 && stats.images >= min_images) {
            break;
        }
    }
    Ok(())
}
