//! Power cuts under the page-cache model of `file` mode.
//!
//! The kernel writes back any dirty 4 KiB page of the pool at any moment, in
//! any order; only a completed sync is a barrier, and only for the pages it
//! covers. A full sync (`Fs::sync`, mount, unmount) covers the whole pool;
//! `File::sync_all` covers only what that file (and, if it was just named,
//! its directory) changed. So the harness mounts with a [`PersistObserver`]
//! that copies, at every durability point, exactly the pages it covers into
//! the durable image; after a crash the pool holds, for every page, its
//! value in the durable image or a later one. Power-cut images are the
//! durable image with any subset of the pages that differ from the current
//! pool replaced by their current value (every subset up to [`EXHAUSTIVE`]
//! differing pages, a random sample of [`SAMPLES`] above).
//!
//! Each image must pass fsck, mount, match its own rebuild (`verify`), keep
//! every fsync'd and not later changed file exactly as synced, and never
//! show a file bytes written to another file (each file writes its own byte
//! values).

mod common;

use common::Durable;

use manyfs::diag::PersistObserver;
use manyfs::{Fs, MkfsOptions, MountOptions};
use rand::{RngExt, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Arc, Mutex};

const PAGE: usize = 4096;
const POOL: u64 = 4 << 20;
const EXHAUSTIVE: usize = 12;
const SAMPLES: usize = 2000;

fn opts() -> MountOptions {
    {
        let mut mo = MountOptions::default();
        mo.commit_interval = std::time::Duration::ZERO;
        mo
    }
}

/// Make a pool of [`POOL`] bytes at `pool`, left unmounted.
fn mkfs_unmounted(pool: &Path) {
    Fs::mkfs(
        pool,
        &{
            let mut mk = MkfsOptions::default();
            mk.size = POOL;
            mk
        },
        &opts(),
    )
    .unwrap()
    .unmount()
    .unwrap();
}

/// A new pool, mounted with a [`Durable`] observer (the mount's own sync
/// fills the durable image).
fn fresh_observed(dir: &Path) -> (Fs, Arc<Durable>) {
    let pool = dir.join("pool");
    mkfs_unmounted(&pool);
    mount_observed(&pool)
}

fn mount_observed(pool: &Path) -> (Fs, Arc<Durable>) {
    let obs = Arc::new(Durable::new(pool));
    let fs = manyfs::diag::mount_observed(pool, &opts(), obs.clone()).unwrap();
    (fs, obs)
}

/// What an image must show.
#[derive(Default, Clone)]
struct Expect {
    /// path -> content it must have exactly (fsync'd, not changed since).
    exact: BTreeMap<String, Vec<u8>>,
    /// path -> contents of which one must be there (e.g. synced or a later
    /// complete write).
    one_of: BTreeMap<String, Vec<Vec<u8>>>,
    /// path -> contents of which one is there, if the file is there at all
    /// (never synced).
    absent_or_one_of: BTreeMap<String, Vec<Vec<u8>>>,
    /// path -> (synced content, current content) of a file fsync'd and then
    /// overwritten in place (same length): it must be there at that
    /// length, and each byte must be the synced one or the overwriting one.
    synced_then_overwritten: BTreeMap<String, (Vec<u8>, Vec<u8>)>,
    /// path -> owners (byte value / 16) whose bytes may appear there.
    owners: BTreeMap<String, BTreeSet<u8>>,
}

fn read_pool(dir: &Path) -> Vec<u8> {
    std::fs::read(dir.join("pool")).unwrap()
}

/// Walk every file of a mounted image: path -> content.
fn contents(fs: &Fs) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![String::new()];
    while let Some(d) = stack.pop() {
        let shown = if d.is_empty() {
            "/".to_string()
        } else {
            d.clone()
        };
        for e in fs.read_dir(&shown).unwrap() {
            let p = format!("{d}/{}", e.name.to_string_lossy());
            match e.kind {
                manyfs::FileKind::Dir => stack.push(p),
                manyfs::FileKind::File => {
                    out.insert(p.clone(), fs.read(&p).unwrap());
                }
                _ => {}
            }
        }
    }
    out
}

/// Check one power-cut image; returns a description of what is wrong.
fn check_image(scratch: &Path, image: &[u8], expect: &Expect) -> Option<String> {
    let pool = scratch.join("pool");
    std::fs::write(&pool, image).unwrap();
    match manyfs::fsck::check(&pool) {
        Ok(r) if r.is_clean() => {}
        Ok(r) => return Some(format!("fsck: {:?}", r.errors)),
        Err(e) => return Some(format!("fsck: {e}")),
    }
    let fs = match Fs::mount(&pool, &opts()) {
        Ok(fs) => fs,
        Err(e) => return Some(format!("mount: {e}")),
    };
    let diffs = manyfs::fsck::verify(&fs).unwrap();
    if !diffs.is_empty() {
        return Some(format!("verify: {diffs:?}"));
    }
    let files = contents(&fs);
    for (p, want) in &expect.exact {
        match files.get(p) {
            None => return Some(format!("{p}: missing (fsync'd)")),
            Some(got) if got != want => {
                return Some(format!(
                    "{p}: {} bytes, not the {} fsync'd",
                    got.len(),
                    want.len()
                ));
            }
            _ => {}
        }
    }
    for (p, choices) in &expect.one_of {
        if let Some(got) = files.get(p)
            && !choices.contains(got)
        {
            return Some(format!("{p}: content is none of the allowed ones"));
        }
        if !files.contains_key(p) {
            return Some(format!("{p}: missing"));
        }
    }
    for (p, (synced, current)) in &expect.synced_then_overwritten {
        let Some(got) = files.get(p) else {
            return Some(format!("{p}: missing (fsync'd)"));
        };
        if got.len() != synced.len() {
            return Some(format!(
                "{p}: {} bytes, not the {} fsync'd",
                got.len(),
                synced.len()
            ));
        }
        if let Some(at) = (0..got.len()).find(|&i| got[i] != synced[i] && got[i] != current[i]) {
            return Some(format!(
                "{p}: byte {at} is {:#x}, neither the fsync'd {:#x} nor the overwriting {:#x}",
                got[at], synced[at], current[at]
            ));
        }
    }
    for (p, choices) in &expect.absent_or_one_of {
        if let Some(got) = files.get(p)
            && !choices.contains(got)
        {
            return Some(format!(
                "{p}: {} bytes, none of the allowed contents",
                got.len()
            ));
        }
    }
    for (p, got) in &files {
        let owners = expect.owners.get(p);
        for &b in got.iter().filter(|&&b| b != 0) {
            if owners.is_none_or(|o| !o.contains(&(b / 16))) {
                return Some(format!("{p}: holds byte {b:#x} written to another file"));
            }
        }
    }
    drop(fs);
    // The mount's repairs must leave a clean pool too.
    match manyfs::fsck::check(&pool) {
        Ok(r) if r.is_clean() => None,
        Ok(r) => Some(format!("fsck after mount: {:?}", r.errors)),
        Err(e) => Some(format!("fsck after mount: {e}")),
    }
}

/// Every power-cut image between `durable` and `current` must pass.
/// `durable` is the observer's image taken after the last operation: an
/// operation may sync pages itself (a new log array, a raised checked
/// count), and those are on disk whatever else is.
fn power_cuts(durable: &[u8], current: &[u8], expect: &Expect, seed: u64) {
    power_cuts_n(durable, current, expect, seed, SAMPLES)
}

fn power_cuts_n(durable: &[u8], current: &[u8], expect: &Expect, seed: u64, samples: usize) {
    assert_eq!(durable.len(), current.len());
    let differing: Vec<usize> = (0..durable.len() / PAGE)
        .filter(|&p| durable[p * PAGE..(p + 1) * PAGE] != current[p * PAGE..(p + 1) * PAGE])
        .collect();
    let n = differing.len();
    let scratch = common::modelled_scratch();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let subsets: Vec<Vec<bool>> = if n <= EXHAUSTIVE {
        (0..1u64 << n)
            .map(|m| (0..n).map(|i| m & (1 << i) != 0).collect())
            .collect()
    } else {
        let mut v: Vec<Vec<bool>> = vec![vec![false; n], vec![true; n]];
        // Every single page alone and every single page missing, then random.
        for i in 0..n {
            v.push((0..n).map(|j| j == i).collect());
            v.push((0..n).map(|j| j != i).collect());
        }
        while v.len() < samples {
            let p: f64 = rng.random_range(0.05..0.95);
            v.push((0..n).map(|_| rng.random_bool(p)).collect());
        }
        v
    };
    let mut failures = Vec::new();
    for subset in &subsets {
        let mut image = durable.to_vec();
        for (i, &take) in subset.iter().enumerate() {
            if take {
                let p = differing[i];
                image[p * PAGE..(p + 1) * PAGE].copy_from_slice(&current[p * PAGE..(p + 1) * PAGE]);
            }
        }
        if let Some(why) = check_image(scratch.path(), &image, expect) {
            let pages: Vec<usize> = differing
                .iter()
                .zip(subset)
                .filter(|(_, t)| **t)
                .map(|(p, _)| *p)
                .collect();
            failures.push(format!("pages {pages:?} reached disk: {why}"));
            if failures.len() >= 5 {
                break;
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} differing pages, {} images; failures:\n{}",
        n,
        subsets.len(),
        failures.join("\n")
    );
}

fn pattern(owner: u8, version: u8, len: usize) -> Vec<u8> {
    vec![owner * 16 + (version % 15) + 1; len]
}

fn write_file(fs: &Fs, path: &str, data: &[u8], off: u64) -> manyfs::File {
    let f = common::open_rw(fs, path);
    f.write_all_at(data, off).unwrap();
    f
}

/// (a) and (c): write A, sync, overwrite A (its old block is freed), write
/// B (which may take A's old block). A must read its synced or its new
/// bytes, never B's; the pool must mount (no block owned twice).
///
/// Run once on the CPU the test starts on and, where the test may run on a
/// second CPU, with the overwrite made from that CPU: the file's second
/// sub-log gives it a log array, which the mount syncs before the record
/// names it.
#[test]
fn overwrite_then_other_file_reuses_the_block() {
    let cpus = allowed_cpus();
    let mut runs = vec![(None, None)];
    if let [first, second, ..] = cpus[..] {
        runs.push((Some(first), Some(second)));
    }
    for (first_cpu, second_cpu) in runs {
        for pages in [1usize, 3] {
            overwrite_then_reuse(pages, first_cpu, second_cpu);
        }
    }
    pin_to(&cpus);
}

/// The CPUs this thread may run on.
fn allowed_cpus() -> Vec<usize> {
    manyfs::diag::affinity::get(0).unwrap_or_default()
}

/// Let this thread run only on `cpus`.
fn pin_to(cpus: &[usize]) {
    manyfs::diag::affinity::set(0, cpus).unwrap_or_else(|e| panic!("{e}"));
}

fn overwrite_then_reuse(pages: usize, first_cpu: Option<usize>, second_cpu: Option<usize>) {
    {
        let dir = common::modelled_scratch();
        let (fs, obs) = fresh_observed(dir.path());
        let a0 = pattern(1, 0, pages * PAGE);
        let a1 = pattern(1, 1, pages * PAGE);
        let b = pattern(2, 0, pages * PAGE);
        if let Some(c) = first_cpu {
            pin_to(&[c]);
        }
        let fa = write_file(&fs, "/a", &a0, 0);
        fa.sync_all().unwrap();
        if let Some(c) = second_cpu {
            pin_to(&[c]);
        }
        let syncs = obs.syncs.load(std::sync::atomic::Ordering::Relaxed);
        fa.write_all_at(&a1, 0).unwrap();
        // From a second CPU a copy-on-write overwrite starts a second
        // sub-log, whose log array is synced before the record names it (a
        // one-page overwrite of a settled page goes in place, no entry).
        let synced_in_write = obs.syncs.load(std::sync::atomic::Ordering::Relaxed) > syncs;
        if pages > 1 && second_cpu.is_some() {
            assert!(synced_in_write, "no log array synced ({pages} pages)");
        }
        let _fb = write_file(&fs, "/b", &b, 0);
        let durable = obs.image();
        let current = read_pool(dir.path());
        let mut expect = Expect::default();
        expect.one_of.insert("/a".into(), vec![a0, a1]);
        expect.owners.insert("/a".into(), [1].into());
        expect.owners.insert("/b".into(), [2].into());
        power_cuts(&durable, &current, &expect, pages as u64);
        drop(fa);
        drop(fs);
    }
}

/// (b): one create in a fresh pool, no sync: whatever reached the disk, the
/// pool mounts (the new log page's link may arrive before the page).
#[test]
fn single_create_in_a_fresh_pool() {
    let dir = common::modelled_scratch();
    let (fs, obs) = fresh_observed(dir.path());
    fs.sync().unwrap();
    let _f = write_file(&fs, "/new", &pattern(1, 0, 100), 0);
    let durable = obs.image();
    let current = read_pool(dir.path());
    let mut expect = Expect::default();
    expect.owners.insert("/new".into(), [1].into());
    power_cuts(&durable, &current, &expect, 7);
}

/// The same after a remount (the sub-log and page sequences start from a
/// recovered state).
#[test]
fn appends_after_remount_and_sync() {
    let dir = common::modelled_scratch();
    let (fs, _) = fresh_observed(dir.path());
    let f = write_file(&fs, "/log", &pattern(1, 0, 3000), 0);
    f.sync_all().unwrap();
    drop(f);
    fs.unmount().unwrap();
    let (fs, obs) = mount_observed(&dir.path().join("pool"));
    let f = common::open_rw(&fs, "/log");
    for i in 0..70u64 {
        f.write_all_at(&pattern(1, 1, 50), 3000 + i * 50).unwrap();
    }
    f.sync_all().unwrap();
    let synced = fs.read("/log").unwrap();
    for i in 0..70u64 {
        f.write_all_at(&pattern(1, 2, 50), i * 50).unwrap();
    }
    let overwritten = fs.read("/log").unwrap();
    let _g = write_file(&fs, "/other", &pattern(2, 0, 2 * PAGE), 0);
    let durable = obs.image();
    let current = read_pool(dir.path());
    let mut expect = Expect::default();
    // Everything synced is there: the overwritten head holds, byte for
    // byte, its synced or its new content, the appended tail its synced
    // content, at the synced length.
    expect
        .synced_then_overwritten
        .insert("/log".into(), (synced, overwritten));
    expect.owners.insert("/log".into(), [1].into());
    expect.owners.insert("/other".into(), [2].into());
    power_cuts(&durable, &current, &expect, 11);
}

/// Two new files written, only one fsync'd: the fsync'd one is exactly
/// there in every image (its name too), the other is absent, empty (its
/// create made durable with the directory) or whole, never torn; and the
/// fsync did not write back the other file's pages.
#[test]
fn fsync_of_one_file_leaves_the_other_at_risk() {
    for pages in [1usize, 3] {
        let dir = common::modelled_scratch();
        let (fs, obs) = fresh_observed(dir.path());
        fs.create_dir("/d").unwrap();
        fs.sync().unwrap();
        let a = pattern(1, 0, pages * PAGE + 100);
        let b = pattern(2, 0, pages * PAGE + 100);
        let fa = write_file(&fs, "/d/a", &a, 0);
        let fb = write_file(&fs, "/d/b", &b, 0);
        let before = obs.image();
        fa.sync_all().unwrap();
        let durable = obs.image();
        let current = read_pool(dir.path());
        let newly_durable = (0..durable.len() / PAGE)
            .filter(|&p| durable[p * PAGE..(p + 1) * PAGE] != before[p * PAGE..(p + 1) * PAGE])
            .count();
        let still_at_risk = (0..durable.len() / PAGE)
            .filter(|&p| durable[p * PAGE..(p + 1) * PAGE] != current[p * PAGE..(p + 1) * PAGE])
            .count();
        assert!(
            still_at_risk >= pages,
            "the fsync of /d/a wrote back /d/b's data ({newly_durable} pages made durable)"
        );
        let mut expect = Expect::default();
        expect.exact.insert("/d/a".into(), a.clone());
        expect
            .absent_or_one_of
            .insert("/d/b".into(), vec![Vec::new(), b.clone()]);
        expect.owners.insert("/d/a".into(), [1].into());
        expect.owners.insert("/d/b".into(), [2].into());
        power_cuts(&durable, &current, &expect, 20 + pages as u64);
        // After the other file's own fsync, both are there.
        fb.sync_all().unwrap();
        let durable = obs.image();
        let current = read_pool(dir.path());
        expect.absent_or_one_of.clear();
        expect.exact.insert("/d/b".into(), b);
        power_cuts(&durable, &current, &expect, 30 + pages as u64);
        drop((fa, fb));
    }
}

/// (d): random writes, overwrites, appends, truncates, creates, unlinks,
/// renames and fsyncs; files fsync'd and not changed since keep their
/// synced content in every image.
#[test]
fn random_operations() {
    let seeds: u64 = std::env::var("MANYFS_PAGECACHE_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    for seed in 0..seeds {
        random_run(seed);
    }
}

#[derive(Clone)]
struct Model {
    owner: u8,
    content: Vec<u8>,
    /// Content at its last fsync, if not changed (or renamed) since.
    synced: Option<Vec<u8>>,
}

fn random_run(seed: u64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(1000 + seed);
    let dir = common::modelled_scratch();
    let (fs, obs) = fresh_observed(dir.path());
    fs.create_dir("/d").unwrap();
    fs.sync().unwrap();
    let mut files: BTreeMap<String, Model> = BTreeMap::new();
    let mut owners: BTreeMap<String, BTreeSet<u8>> = BTreeMap::new();
    let mut next_owner = 1u8;
    let names = ["/f1", "/f2", "/f3", "/d/g1", "/d/g2"];
    let total_ops = 24;
    // The observer keeps the durable image (what every barrier, full or
    // per-file, covered); files fsync'd and unchanged since must be exact.
    let mut exact: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for op in 0..total_ops {
        let may_sync = op < total_ops - 5;
        let name = names[rng.random_range(0..names.len())].to_string();
        let version = rng.random_range(0..15u8);
        let mut synced = false;
        match rng.random_range(0..10) {
            0..=4 => {
                // write / overwrite / append / create
                let m = files.entry(name.clone()).or_insert_with(|| {
                    let o = next_owner;
                    next_owner = (next_owner % 15) + 1;
                    Model {
                        owner: o,
                        content: Vec::new(),
                        synced: None,
                    }
                });
                owners.entry(name.clone()).or_default().insert(m.owner);
                let len = rng.random_range(1..3 * PAGE);
                let off = if rng.random_bool(0.3) {
                    m.content.len()
                } else {
                    rng.random_range(0..=m.content.len().min(3 * PAGE))
                };
                let data = pattern(m.owner, version, len);
                let f = common::open_rw(&fs, &name);
                f.write_all_at(&data, off as u64).unwrap();
                if m.content.len() < off + len {
                    m.content.resize(off + len, 0);
                }
                m.content[off..off + len].copy_from_slice(&data);
                m.synced = None;
                exact.remove(&name);
                if may_sync && rng.random_bool(0.4) {
                    f.sync_all().unwrap();
                    m.synced = Some(m.content.clone());
                    synced = true;
                }
            }
            5 => {
                if let Some(m) = files.get_mut(&name) {
                    let len = rng.random_range(0..=m.content.len());
                    fs.set_len(&name, len as u64).unwrap();
                    m.content.truncate(len);
                    m.synced = None;
                    exact.remove(&name);
                }
            }
            6 => {
                if files.remove(&name).is_some() {
                    fs.remove_file(&name).unwrap();
                    exact.remove(&name);
                }
            }
            7 => {
                let to = names[rng.random_range(0..names.len())].to_string();
                if to != name
                    && let Some(mut m) = files.remove(&name)
                {
                    fs.rename(&name, &to).unwrap();
                    // A rename across directories syncs (its journal
                    // protocol): a barrier the durable image must follow.
                    synced |= name.starts_with("/d/") != to.starts_with("/d/");
                    m.synced = None;
                    exact.remove(&name);
                    exact.remove(&to);
                    owners.entry(to.clone()).or_default().insert(m.owner);
                    files.insert(to, m);
                }
            }
            _ => {
                if may_sync && let Some(m) = files.get_mut(&name) {
                    let f = common::open_rw(&fs, &name);
                    f.sync_all().unwrap();
                    m.synced = Some(m.content.clone());
                    synced = true;
                }
            }
        }
        if synced {
            exact = files
                .iter()
                .filter(|(_, m)| m.synced.as_ref() == Some(&m.content))
                .map(|(p, m)| (p.clone(), m.content.clone()))
                .collect();
        }
    }
    let durable = obs.image();
    let current = read_pool(dir.path());
    let expect = Expect {
        exact,
        owners,
        ..Default::default()
    };
    let samples = std::env::var("MANYFS_PAGECACHE_SAMPLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    power_cuts_n(&durable, &current, &expect, seed, samples);
}

/// fsck and repair read logs under the `Marked` rule as the mount does: in a
/// power-cut image where the root directory's link to a new log page
/// reached the disk but the page did not (zeros), fsck reports no problem
/// (only a note), repair has nothing to fix, and the pool mounts with every
/// synced file.
#[test]
fn fsck_accepts_a_link_written_before_its_page() {
    use manyfs::format::{LOG_FOOTER_OFFSET, LOG_PAGE_MAGIC};
    let dir = common::modelled_scratch();
    let (fs, _durable) = fresh_observed(dir.path());
    let f = write_file(&fs, "/a", &pattern(1, 0, 3000), 0);
    f.sync_all().unwrap();
    fs.sync().unwrap();
    let durable = read_pool(dir.path());
    let mut later = Vec::new();
    for i in 0..80 {
        later.push(write_file(&fs, &format!("/n{i}"), &pattern(2, 0, 10), 0));
    }
    let mut image = read_pool(dir.path());
    let root_log_page = |img: &[u8], b: usize| {
        let f = &img[b * PAGE + LOG_FOOTER_OFFSET as usize..(b + 1) * PAGE];
        u32::from_le_bytes(f[20..24].try_into().unwrap()) == LOG_PAGE_MAGIC
            && u64::from_le_bytes(f[8..16].try_into().unwrap()) == manyfs::lowlevel::ROOT_INO
    };
    let new: Vec<usize> = (0..image.len() / PAGE)
        .filter(|&b| root_log_page(&image, b) && !root_log_page(&durable, b))
        .collect();
    assert!(!new.is_empty(), "the creates linked no new root log page");
    for b in &new {
        image[b * PAGE..(b + 1) * PAGE].fill(0);
    }
    drop(later);
    drop(f);
    drop(fs);
    let scratch = common::modelled_scratch();
    let pool = scratch.path().join("pool");
    std::fs::write(&pool, &image).unwrap();

    let report = manyfs::fsck::check(&pool).unwrap();
    assert!(report.is_clean(), "fsck: {:?}", report.errors);
    // The zeroed page was linked from a page's footer (cut at mount) or, for
    // a directory sub-log's first page, from the log array (cleared).
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.contains("cut at mount") || n.contains("cleared at mount")),
        "notes: {:?}",
        report.notes
    );
    let repaired = manyfs::fsck::repair::repair(&pool).unwrap();
    assert!(repaired.before.is_clean(), "{:?}", repaired.before.errors);
    assert!(
        repaired.fixed.is_empty(),
        "repair fixed {:?}",
        repaired.fixed
    );
    assert_eq!(repaired.passes, 0);
    assert!(repaired.is_clean(), "{:?}", repaired.after.errors);

    let fs = Fs::mount(&pool, &opts()).unwrap();
    assert_eq!(fs.read("/a").unwrap(), pattern(1, 0, 3000));
    fs.unmount().unwrap();
    let report = manyfs::fsck::check(&pool).unwrap();
    assert!(report.is_clean(), "fsck after mount: {:?}", report.errors);
    assert!(report.notes.is_empty(), "notes: {:?}", report.notes);
}

/// The log pages of inode `ino` in `image`: (block, sequence, durable mark,
/// checked count), oldest first.
fn log_pages(image: &[u8], ino: u64) -> Vec<(usize, u64, u32, u32)> {
    use manyfs::format::*;
    let word = |f: &[u8], at: u64, n: usize| {
        let mut b = [0u8; 8];
        b[..n].copy_from_slice(&f[at as usize..at as usize + n]);
        u64::from_le_bytes(b)
    };
    let mut out: Vec<_> = (0..image.len() / PAGE)
        .filter_map(|b| {
            let f = &image[b * PAGE + LOG_FOOTER_OFFSET as usize..(b + 1) * PAGE];
            (word(f, 20, 4) == u64::from(LOG_PAGE_MAGIC) && word(f, 8, 8) == ino).then(|| {
                (
                    b,
                    word(f, FOOTER_SEQ, 8),
                    word(f, FOOTER_MARK, 4) as u32,
                    word(f, FOOTER_CHECKED, 4) as u32,
                )
            })
        })
        .collect();
    out.sort_by_key(|p| p.1);
    out
}

/// Whether the sync of inode `ino` that turned durable image `before` into
/// `after` wrote its marks with one barrier: a page whose mark it raised
/// has a checked count below the mark (two barriers raise it to the mark).
fn synced_with_one_barrier(before: &[u8], after: &[u8], ino: u64) -> bool {
    let old = log_pages(before, ino);
    log_pages(after, ino)
        .iter()
        .any(|&(b, seq, mark, checked)| {
            !old.iter().any(|&o| o.0 == b && o.1 == seq && o.2 == mark)
                && checked < mark & !manyfs::format::MARK_SEALED
        })
}

/// On this CPU ([`stay_on_this_cpu`]), a fresh observed pool in `dir`
/// with `/a` of three pages written and fsync'd: the mount, its observer,
/// the open file, its inode number and its content.
fn three_synced_pages(dir: &Path) -> (Fs, Arc<Durable>, manyfs::File, u64, Vec<u8>) {
    stay_on_this_cpu();
    let (fs, obs) = fresh_observed(dir);
    let f = write_file(&fs, "/a", &pattern(1, 0, 3 * PAGE), 0);
    f.sync_all().unwrap();
    let ino = f.metadata().unwrap().ino;
    (fs, obs, f, ino, pattern(1, 0, 3 * PAGE))
}

/// (a) A one-barrier fsync (an overwrite of a synced file, some of them
/// linking a new log page) keeps its data in every image a later power cut
/// can leave.
#[test]
fn one_barrier_fsync_keeps_its_data() {
    let dir = common::modelled_scratch();
    let (fs, obs, f, ino, mut want) = three_synced_pages(dir.path());
    // 70 fsync'd overwrites of two pages each (copy-on-write: only
    // single-page writes go in place): the log's tail page fills and a new
    // one is linked on the way. Only the first append to a sub-log (a new
    // head in the log array, one per CPU the thread runs on) needs two
    // barriers.
    let mut one_barrier = 0;
    for i in 0..70usize {
        let data = pattern(1, 1 + (i % 14) as u8, 2 * PAGE);
        let off = (i % 2) * PAGE;
        let before = obs.image();
        f.write_all_at(&data, off as u64).unwrap();
        f.sync_all().unwrap();
        want[off..off + 2 * PAGE].copy_from_slice(&data);
        one_barrier += usize::from(synced_with_one_barrier(&before, &obs.image(), ino));
    }
    assert!(
        one_barrier >= 60,
        "{one_barrier} of 70 fsyncs took one barrier"
    );
    assert!(log_pages(&obs.image(), ino).len() >= 2);
    // Unsynced changes after it, to /a and to another file.
    f.write_all_at(&pattern(1, 2, 100), 10).unwrap();
    let _g = write_file(&fs, "/g", &pattern(2, 0, PAGE), 0);
    let durable = obs.image();
    let current = read_pool(dir.path());
    let mut later = want.clone();
    later[10..110].copy_from_slice(&pattern(1, 2, 100));
    let mut expect = Expect::default();
    expect.one_of.insert("/a".into(), vec![want, later]);
    expect.owners.insert("/a".into(), [1].into());
    expect.owners.insert("/g".into(), [2].into());
    power_cuts(&durable, &current, &expect, 41);
}

/// (b) A one-barrier fsync cut by a power loss: its log page (with the
/// mark) reached the disk, its new data block did not and still holds
/// another file's old bytes. The file reads its previous durable content,
/// never the foreign bytes; fsck is clean and says why the entry did not
/// count. Every other subset of the fsync's pages passes too.
#[test]
fn torn_one_barrier_fsync_never_shows_foreign_bytes() {
    stay_on_this_cpu();
    let dir = common::modelled_scratch();
    let (fs, obs) = fresh_observed(dir.path());
    // Two pages each: a multi-page write is always copy-on-write (a
    // single page written before would be overwritten in place).
    let a0 = pattern(1, 0, 2 * PAGE);
    let a1 = pattern(1, 1, 2 * PAGE);
    let fa = write_file(&fs, "/a", &a0, 0);
    fa.sync_all().unwrap();
    // Fill every free block with /b's bytes, make that durable, free it.
    let fb = common::open_rw(&fs, "/b");
    let chunk = pattern(2, 0, 16 * PAGE);
    let mut off = 0u64;
    while fb.write_all_at(&chunk, off).is_ok() {
        off += chunk.len() as u64;
    }
    while fb.write_all_at(&chunk[..PAGE], off).is_ok() {
        off += PAGE as u64;
    }
    drop(fb);
    fs.sync().unwrap();
    fs.remove_file("/b").unwrap();
    fs.sync().unwrap();
    // One overwrite first: the log's tail page has a synced mark to keep.
    fa.write_all_at(&a0, 0).unwrap();
    fa.sync_all().unwrap();
    let before = obs.image();
    fa.write_all_at(&a1, 0).unwrap();
    fa.sync_all().unwrap();
    let after = obs.image();
    let ino = fa.metadata().unwrap().ino;
    assert!(
        synced_with_one_barrier(&before, &after, ino),
        "the fsync took two barriers"
    );
    let page = |img: &[u8], p: usize| img[p * PAGE..(p + 1) * PAGE].to_vec();
    let differing: Vec<usize> = (0..before.len() / PAGE)
        .filter(|&p| page(&before, p) != page(&after, p))
        .collect();
    let data: Vec<usize> = differing
        .iter()
        .copied()
        .filter(|&p| page(&after, p) == a1[..PAGE])
        .collect();
    assert_eq!(data.len(), 2, "differing pages {differing:?}");
    let foreign = data
        .iter()
        .copied()
        .find(|&d| page(&before, d).iter().all(|&b| b == chunk[0]))
        .unwrap_or_else(|| {
            panic!(
                "no new data block held /b's old bytes: {:?}",
                data.iter()
                    .map(|&d| page(&before, d)[0])
                    .collect::<Vec<_>>()
            )
        });
    // The torn image: everything of the fsync but that data block.
    let mut torn = after.clone();
    torn[foreign * PAGE..(foreign + 1) * PAGE].copy_from_slice(&page(&before, foreign));
    let scratch = common::modelled_scratch();
    let pool = scratch.path().join("pool");
    std::fs::write(&pool, &torn).unwrap();
    let report = manyfs::fsck::check(&pool).unwrap();
    assert!(report.is_clean(), "fsck: {:?}", report.errors);
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.contains("does not match its checksum")),
        "notes: {:?}",
        report.notes
    );
    let fs2 = Fs::mount(&pool, &opts()).unwrap();
    assert_eq!(fs2.read("/a").unwrap(), a0);
    assert!(manyfs::fsck::verify(&fs2).unwrap().is_empty());
    fs2.unmount().unwrap();
    let report = manyfs::fsck::check(&pool).unwrap();
    assert!(report.is_clean(), "fsck after mount: {:?}", report.errors);
    assert!(report.notes.is_empty(), "notes: {:?}", report.notes);
    // Every subset of the fsync's pages.
    let mut expect = Expect::default();
    expect.one_of.insert("/a".into(), vec![a0, a1]);
    expect.owners.insert("/a".into(), [1].into());
    power_cuts(&before, &after, &expect, 42);
    drop(fa);
}

/// (d) Single-page overwrites in place: once a page was overwritten and
/// that overwrite synced, later overwrites write the page's data block
/// itself. Each `fdatasync` then changes exactly that block in the durable
/// image (no log page), 300 of them link no log page, every power cut
/// after an unsynced overwrite shows one whole version with no foreign
/// bytes, `fsync` makes the mtime durable, and a remount reads the newest
/// data.
#[test]
fn single_page_overwrites_go_in_place() {
    stay_on_this_cpu();
    let dir = common::modelled_scratch();
    let (fs, obs) = fresh_observed(dir.path());
    let f = write_file(&fs, "/a", &pattern(1, 0, 2 * PAGE), 0);
    f.sync_data().unwrap();
    let mut want = pattern(1, 0, 2 * PAGE);
    // The page's second version: copy-on-write, synced with one barrier.
    f.write_all_at(&pattern(1, 1, PAGE), 0).unwrap();
    f.sync_data().unwrap();
    want[..PAGE].copy_from_slice(&pattern(1, 1, PAGE));
    let ino = f.metadata().unwrap().ino;
    let log_before = log_pages(&obs.image(), ino);
    let page = |img: &[u8], p: usize| img[p * PAGE..(p + 1) * PAGE].to_vec();
    for i in 0..300usize {
        let data = pattern(1, 2 + (i % 13) as u8, PAGE);
        let before = obs.image();
        f.write_all_at(&data, 0).unwrap();
        f.sync_data().unwrap();
        want[..PAGE].copy_from_slice(&data);
        let after = obs.image();
        let differing: Vec<usize> = (0..after.len() / PAGE)
            .filter(|&p| page(&before, p) != page(&after, p))
            .collect();
        // The first one also settles the page's entry (its log page's
        // checked count); the pattern repeats every 13, so a later one may
        // write the bytes the block already held.
        if i > 0 && i % 13 != 0 {
            assert_eq!(
                differing.len(),
                1,
                "overwrite {i}: pages {differing:?} changed"
            );
            assert_eq!(page(&after, differing[0]), data, "overwrite {i}");
        }
    }
    let log_after = log_pages(&obs.image(), ino);
    assert_eq!(
        log_after.iter().map(|p| p.0).collect::<Vec<_>>(),
        log_before.iter().map(|p| p.0).collect::<Vec<_>>(),
        "in-place overwrites changed the log's pages"
    );
    // An unsynced partial overwrite, and a new file that may take freed
    // blocks: every power cut shows the synced or the new version of /a.
    f.write_all_at(&pattern(1, 9, 100), 50).unwrap();
    let mut later = want.clone();
    later[50..150].copy_from_slice(&pattern(1, 9, 100));
    let _g = write_file(&fs, "/g", &pattern(2, 0, PAGE), 0);
    let durable = obs.image();
    let current = read_pool(dir.path());
    let mut expect = Expect::default();
    expect.one_of.insert("/a".into(), vec![want, later.clone()]);
    expect.owners.insert("/a".into(), [1].into());
    expect.owners.insert("/g".into(), [2].into());
    power_cuts(&durable, &current, &expect, 43);
    // fsync (not fdatasync) logs the mtime the overwrites left.
    let mtime = f.metadata().unwrap().mtime;
    f.sync_all().unwrap();
    let scratch = common::modelled_scratch();
    let pool = scratch.path().join("pool");
    std::fs::write(&pool, obs.image()).unwrap();
    let cut = Fs::mount(&pool, &opts()).unwrap();
    assert_eq!(cut.read("/a").unwrap(), later);
    assert_eq!(cut.metadata("/a").unwrap().mtime, mtime);
    cut.unmount().unwrap();
    drop((f, _g));
    fs.unmount().unwrap();
    let fs = Fs::mount(&dir.path().join("pool"), &opts()).unwrap();
    assert_eq!(fs.read("/a").unwrap(), later);
    assert_eq!(fs.metadata("/a").unwrap().mtime, mtime);
    assert!(manyfs::fsck::verify(&fs).unwrap().is_empty());
}

/// A page whose overwrites went in place and is then rewritten by
/// copy-on-write (a write over two pages) has a new entry that no sync has
/// settled: the next overwrite of it must not go in place (the engine notes
/// a settled page in its index slot; the note must go with the old
/// mapping), or a power cut that kept the new bytes would fail the synced
/// entry's checksum and lose the synced write.
#[test]
fn a_page_copied_on_write_again_is_not_overwritten_in_place_before_it_settles() {
    stay_on_this_cpu();
    let dir = common::modelled_scratch();
    let (fs, obs) = fresh_observed(dir.path());
    let f = write_file(&fs, "/a", &pattern(1, 0, 2 * PAGE), 0);
    f.sync_data().unwrap();
    // Settled, then in place.
    for v in 1..5u8 {
        f.write_all_at(&pattern(1, v, PAGE), 0).unwrap();
        f.sync_data().unwrap();
    }
    // Copy-on-write of both pages, synced with one barrier (its entry is
    // durable but not settled).
    let synced = pattern(1, 7, 2 * PAGE);
    f.write_all_at(&synced, 0).unwrap();
    f.sync_data().unwrap();
    // Unsynced overwrite of page 0 (which may first make the entry's
    // settling durable, one barrier: the durable image is taken after it).
    let mut later = synced.clone();
    later[..PAGE].copy_from_slice(&pattern(1, 8, PAGE));
    f.write_all_at(&later[..PAGE], 0).unwrap();
    let durable = obs.image();
    let current = read_pool(dir.path());
    let mut expect = Expect::default();
    expect
        .one_of
        .insert("/a".into(), vec![synced, later.clone()]);
    expect.owners.insert("/a".into(), [1].into());
    power_cuts(&durable, &current, &expect, 44);
    drop(f);
    fs.unmount().unwrap();
    let fs = Fs::mount(&dir.path().join("pool"), &opts()).unwrap();
    assert_eq!(fs.read("/a").unwrap(), later);
    assert!(manyfs::fsck::verify(&fs).unwrap().is_empty());
}

/// Records the ranges each durability point covers.
#[derive(Default)]
struct SyncRanges(Mutex<Vec<(u64, usize)>>);

impl PersistObserver for SyncRanges {
    fn on_sync(&self, off: u64, len: usize) -> std::io::Result<()> {
        self.0.lock().unwrap().push((off, len));
        Ok(())
    }
}

/// An `fsync` after an overwrite in place logs the mtime only when the
/// write advanced it: within one tick of the coarse clock, the sync writes
/// back the data block alone (as a kernel file system's fsync writes no
/// inode when its time did not change), and the mtime after a remount is
/// the one the file showed.
#[test]
fn fsync_within_one_clock_tick_writes_the_data_block_alone() {
    stay_on_this_cpu();
    let dir = common::modelled_scratch();
    let pool = dir.path().join("pool");
    mkfs_unmounted(&pool);
    let obs = Arc::new(SyncRanges::default());
    let fs = manyfs::diag::mount_observed(&pool, &opts(), obs.clone()).unwrap();
    let f = write_file(&fs, "/a", &pattern(1, 0, PAGE), 0);
    f.sync_all().unwrap();
    // The second version is copy-on-write and settles the page; from the
    // third on, overwrites go in place.
    f.write_all_at(&pattern(1, 1, PAGE), 0).unwrap();
    f.sync_all().unwrap();
    f.write_all_at(&pattern(1, 2, PAGE), 0).unwrap();
    f.sync_all().unwrap();
    let raw = std::fs::File::open(&pool).unwrap();
    let (mut same_tick, mut advanced) = (0, 0);
    let mut mtime = f.metadata().unwrap().mtime;
    for i in 0..5000usize {
        let data = pattern(1, 3 + (i % 11) as u8, PAGE);
        obs.0.lock().unwrap().clear();
        f.write_all_at(&data, 0).unwrap();
        f.sync_all().unwrap();
        let now = f.metadata().unwrap().mtime;
        let synced = obs.0.lock().unwrap().clone();
        let bytes: usize = synced.iter().map(|r| r.1).sum();
        if now == mtime {
            same_tick += 1;
            assert_eq!(bytes, PAGE, "overwrite {i}: synced {synced:?}");
            let mut block = vec![0; PAGE];
            raw.read_exact_at(&mut block, synced[0].0).unwrap();
            assert_eq!(
                block, data,
                "overwrite {i}: the synced block is not the data"
            );
        } else {
            advanced += 1;
            assert!(bytes > PAGE, "overwrite {i}: a new mtime left unlogged");
        }
        mtime = now;
        if same_tick >= 50 && advanced >= 1 {
            break;
        }
    }
    assert!(same_tick > 0, "no two overwrites fell in one clock tick");
    drop(f);
    // The pool as the last fsync left it (a crash of the process: the page
    // cache survives) shows that mtime.
    let image = std::fs::read(&pool).unwrap();
    let scratch = common::modelled_scratch();
    let copy = scratch.path().join("pool");
    std::fs::write(&copy, image).unwrap();
    let cut = Fs::mount(&copy, &opts()).unwrap();
    assert_eq!(cut.metadata("/a").unwrap().mtime, mtime);
    assert!(manyfs::fsck::verify(&cut).unwrap().is_empty());
    cut.unmount().unwrap();
    fs.unmount().unwrap();
}

/// (c) A pool written before data checksums and checked counts (commit
/// rule `Marked`, no checksum flags, checked counts zero) mounts as before,
/// with every file; the mount moves it to the `Checked` rule.
#[test]
fn a_pool_of_the_marked_rule_still_mounts() {
    use manyfs::format::*;
    let dir = common::modelled_scratch();
    let (fs, _obs) = fresh_observed(dir.path());
    let mut want = BTreeMap::new();
    for i in 0..4u8 {
        let p = format!("/f{i}");
        let f = write_file(&fs, &p, &pattern(i + 1, 0, PAGE + 300 * i as usize), 0);
        f.write_all_at(&pattern(i + 1, 1, 700), 50).unwrap();
        f.sync_all().unwrap();
        want.insert(p.clone(), fs.read(&p).unwrap());
    }
    fs.unmount().unwrap();
    let mut image = read_pool(dir.path());
    let len = image.len() as u64;
    let mut flagged = 0;
    for b in 0..image.len() / PAGE {
        let pg = &mut image[b * PAGE..(b + 1) * PAGE];
        let f = LOG_FOOTER_OFFSET as usize;
        if u32::from_le_bytes(pg[f + 20..f + 24].try_into().unwrap()) != LOG_PAGE_MAGIC {
            continue;
        }
        pg[f + FOOTER_CHECKED as usize..f + FOOTER_CHECKED as usize + 4].fill(0);
        let mut slot = 0;
        while slot < ENTRY_SLOTS_PER_PAGE as usize {
            let at = slot * 64;
            let Some(n) = Entry::claimed_slots(&pg[at..at + 64]) else {
                break;
            };
            let Some((e, flags)) = Entry::decode(&pg[at..at + n * 64]) else {
                break;
            };
            if Entry::data_crc(&pg[at..at + 64]).is_some() {
                // Re-encoded exactly as before data checksums.
                let enc = e.encode(flags & FLAG_GROUP_CONTINUES != 0);
                pg[at..at + n * 64].copy_from_slice(&enc.body);
                pg[at + 56..at + 64].copy_from_slice(&enc.commit_word.to_le_bytes());
                flagged += 1;
            }
            slot += n;
        }
    }
    assert!(flagged > 0, "no write entry carried a data checksum");
    let mut sb = Superblock::decode(&image, len).unwrap();
    assert_eq!(sb.commit_rule, CommitRule::Checked);
    sb.commit_rule = CommitRule::Marked;
    for block in [SUPERBLOCK_BLOCK, BACKUP_SUPERBLOCK_BLOCK] {
        let at = block as usize * PAGE;
        let enc = sb.encode();
        image[at..at + enc.len()].copy_from_slice(&enc);
    }
    let scratch = common::modelled_scratch();
    let pool = scratch.path().join("pool");
    std::fs::write(&pool, &image).unwrap();
    let report = manyfs::fsck::check(&pool).unwrap();
    assert!(report.is_clean(), "fsck: {:?}", report.errors);
    let fs = Fs::mount(&pool, &opts()).unwrap();
    assert_eq!(contents(&fs), want);
    assert!(manyfs::fsck::verify(&fs).unwrap().is_empty());
    fs.unmount().unwrap();
    let image = std::fs::read(&pool).unwrap();
    let sb = Superblock::decode(&image, len).unwrap();
    assert_eq!(sb.commit_rule, CommitRule::Checked);
    let fs = Fs::mount(&pool, &opts()).unwrap();
    assert_eq!(contents(&fs), want);
}

/// Keep the calling (test) thread on the CPU it runs on: appends go to the
/// sub-log of the current CPU, and the first append to a sub-log links a
/// new head (a two-barrier sync), so a thread the scheduler moves would
/// make the one-barrier counts depend on the machine's load.
fn stay_on_this_cpu() {
    // SAFETY: sched_getcpu has no preconditions.
    let cpu = unsafe { libc::sched_getcpu() }.max(0) as usize;
    pin_to(&[cpu % libc::CPU_SETSIZE as usize]);
}

/// The log pages of inode `ino` in `image` that its log reaches (from the
/// record's log word, through each sub-log's chain of links), as
/// [`log_pages`] gives them, oldest first: pages unlinked earlier keep
/// their footers until reused, so [`log_pages`] may still list them.
fn linked_log_pages(image: &[u8], ino: u64) -> Vec<(usize, u64, u32, u32)> {
    use manyfs::format::*;
    let u64_at = |at: usize| u64::from_le_bytes(image[at..at + 8].try_into().unwrap());
    let sb = Superblock::decode(&image[..96], image.len() as u64).unwrap();
    let record = (sb.inode_table_start * BLOCK_SIZE + ino * INODE_SIZE) as usize;
    let heads: Vec<u64> = match LogWord::decode(u64_at(record + INODE_LOG_ARRAY_OFFSET as usize)) {
        LogWord::Empty => Vec::new(),
        LogWord::Direct { head, .. } => vec![head],
        LogWord::Array(a) => (0..MAX_SUBLOGS)
            .map(|i| u64_at(a as usize * PAGE + i * 8))
            .filter(|&h| h != 0)
            .collect(),
    };
    let mut linked = BTreeSet::new();
    for head in heads {
        let mut page = head as usize;
        while page != 0 && page < image.len() / PAGE && linked.insert(page) {
            page = u64_at(page * PAGE + LOG_FOOTER_OFFSET as usize) as usize;
        }
    }
    log_pages(image, ino)
        .into_iter()
        .filter(|p| linked.contains(&p.0))
        .collect()
}

/// Whether a log page (from [`log_pages`]) is settled: sealed with its final
/// mark, and its checked count raised to it, both durable in the image.
fn settled(page: &(usize, u64, u32, u32)) -> bool {
    let (_, _, mark, checked) = *page;
    mark & manyfs::format::MARK_SEALED != 0 && checked == mark & !manyfs::format::MARK_SEALED
}

/// A sync's snapshot starts after each sub-log's settled prefix (its
/// leading pages sealed, their final marks and checked counts durable:
/// `InodeLog::snapshot_for_sync`), and the collector may unlink dead pages
/// of that prefix after a full sync (`settled` shrinks with them). A file
/// whose log has several settled pages, then loses some of them, then
/// takes more fsync'd overwrites and appends (new pages linked after the
/// prefix) keeps every fsync'd byte in every image a power cut leaves
/// after each of those fsyncs.
#[test]
fn fsyncs_after_a_settled_prefix_keep_their_data() {
    let dir = common::modelled_scratch();
    let (fs, obs, f, ino, mut want) = three_synced_pages(dir.path());
    // fsync'd two-page overwrites (copy-on-write, one entry each): the log
    // grows a page every 63 of them, and each page that fills is sealed and
    // settled by the syncs after it.
    let overwrite = |i: usize, want: &mut Vec<u8>| {
        let data = pattern(1, 1 + (i % 14) as u8, 2 * PAGE);
        let off = (i % 2) * PAGE;
        f.write_all_at(&data, off as u64).unwrap();
        f.sync_data().unwrap();
        want[off..off + 2 * PAGE].copy_from_slice(&data);
    };
    for i in 0..260 {
        overwrite(i, &mut want);
    }
    let before = linked_log_pages(&obs.image(), ino);
    let prefix: Vec<usize> = before
        .iter()
        .take_while(|p| settled(p))
        .map(|p| p.0)
        .collect();
    assert!(
        prefix.len() >= 3 && prefix.len() < before.len(),
        "settled prefix of {} pages in a log of {}",
        prefix.len(),
        before.len()
    );
    // A full sync releases the superseded entries: the collector then
    // unlinks the dead pages of the prefix as later appends pass.
    fs.sync().unwrap();
    let mut expect = Expect::default();
    expect.owners.insert("/a".into(), [1].into());
    for round in 0..4 {
        for i in 0..40 {
            if i % 5 == 4 {
                // An append: a new page of data past the end.
                let data = pattern(1, (round * 40 + i) as u8, PAGE);
                let end = want.len();
                f.write_all_at(&data, end as u64).unwrap();
                f.sync_data().unwrap();
                want.extend_from_slice(&data);
            } else {
                overwrite(round * 40 + i, &mut want);
            }
        }
        expect.exact.insert("/a".into(), want.clone());
        power_cuts_n(
            &obs.image(),
            &read_pool(dir.path()),
            &expect,
            60 + round as u64,
            300,
        );
    }
    // The pool as written (the unlinks' new links reach the durable image
    // with the next sync of their pages; until then the old chain, whose
    // pages wait for a full sync before reuse, is what recovery follows).
    let after = linked_log_pages(&read_pool(dir.path()), ino);
    let gone = prefix
        .iter()
        .filter(|b| !after.iter().any(|p| p.0 == **b))
        .count();
    let newest = before.iter().map(|p| p.1).max().unwrap_or(0);
    let linked = after.iter().filter(|p| p.1 > newest).count();
    assert!(
        gone > 0 && linked > 0,
        "{gone} of the {} settled pages unlinked, {linked} linked; log of {} pages, then {}",
        prefix.len(),
        before.len(),
        after.len()
    );
    // An unsynced overwrite after the last fsync: old or new.
    let mut later = want.clone();
    f.write_all_at(&pattern(1, 3, 100), 10).unwrap();
    later[10..110].copy_from_slice(&pattern(1, 3, 100));
    expect.exact.clear();
    expect.one_of.insert("/a".into(), vec![want, later]);
    power_cuts(&obs.image(), &read_pool(dir.path()), &expect, 64);
}
