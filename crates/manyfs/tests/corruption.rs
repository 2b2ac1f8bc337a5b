//! Corruption robustness: real pool images are damaged on purpose (bit
//! flips, random bytes, interesting integers, and field changes with the
//! checksum recomputed so they get past the CRCs) in the superblocks, the
//! rename journal, the inode table, log arrays, log pages and anywhere in
//! the image. For every damaged image `fsck::check` and `Fs::mount` (then
//! reading every file, listing every directory and `verify`) must neither
//! panic nor hang; errors must be readable; and when fsck calls the image
//! clean and mount succeeds, reading must work, and the pool must take new
//! data (mkdir + 3-page write), stay fsck-clean and keep it across a
//! remount. Damaged pools that mount anyway also get writes, renames and
//! unlinks: errors are fine there, panics and hangs are not.
//!
//! The bugs it found are listed above [`Counts`].
//! `MANYFS_CORRUPT_ITERS=<n>` sets the iterations (default 1200),
//! `MANYFS_CORRUPT_SEED=<seed>` the seed; `MANYFS_CORRUPT_ONLY=<iteration>`
//! replays one iteration (the pristine images depend on block placement, so
//! replays are best effort: the damaged images of failing iterations are
//! kept in the temp directory, path printed).

mod common;

use manyfs::format::{
    BLOCK_SIZE, COMMIT_MAGIC, INODE_MAGIC, LOG_PAGE_MAGIC, SUPERBLOCK_LEN, Superblock,
};
use manyfs::{FileKind, Fs, MkfsOptions, MountOptions, OpenOptions};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

const POOL_SIZE: u64 = 8 << 20;
const BS: usize = BLOCK_SIZE as usize;
const INODE_SIZE: usize = manyfs::format::INODE_SIZE as usize;
const JOURNAL_PENDING: u32 = 0x5045_4e44;
const JOURNAL_COMMIT_AT: usize = 4088;
const HANG_LIMIT: Duration = Duration::from_secs(10);

// ---- small deterministic helpers ------------------------------------------

/// A seeded generator (deterministic, so a failing iteration can be
/// replayed) with the two draws the mutations use.
struct Rng(StdRng);

impl Rng {
    fn seeded(seed: u64) -> Rng {
        Rng(StdRng::seed_from_u64(seed))
    }
    fn next(&mut self) -> u64 {
        self.0.random()
    }
    /// Uniform in `0..n` (0 when `n` is 0).
    fn below(&mut self, n: u64) -> u64 {
        self.0.random_range(0..n.max(1))
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> Option<&'a T> {
        (!v.is_empty()).then(|| &v[self.below(v.len() as u64) as usize])
    }
}

/// CRC-32 (IEEE), the checksum manyfs uses on media (the library computes
/// it with the same crate; `crc32_is_the_checksum_on_media` checks the
/// stored values against it).
fn crc32(data: &[u8]) -> u32 {
    crc32fast::hash(data)
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

// ---- pristine images ---------------------------------------------------------

/// A pool of [`POOL_SIZE`] bytes at `pool`, default options, mounted.
fn mkfs_plain(pool: &Path) -> Fs {
    Fs::mkfs(
        pool,
        &{
            let mut mk = MkfsOptions::default();
            mk.size = POOL_SIZE;
            mk
        },
        &MountOptions::default(),
    )
    .unwrap()
}

/// Build a pool with directories, files of many shapes, symlinks, hard
/// links, renames (same and cross directory), truncations and overwrites
/// (several log pages), unmount it and return its bytes.
fn build_image(dir: &Path, variant: u64) -> Vec<u8> {
    let pool = dir.join(format!("pristine{variant}"));
    let fs = mkfs_plain(&pool);
    populate(&fs, variant);
    fs.unmount().unwrap();
    let report = manyfs::fsck::check(&pool).unwrap();
    assert!(report.is_clean(), "pristine image: {:?}", report.errors);
    let bytes = std::fs::read(&pool).unwrap();
    std::fs::remove_file(&pool).unwrap();
    bytes
}

/// The tree of [`build_image`]'s pools, written into `fs`.
fn populate(fs: &Fs, variant: u64) {
    let mut rng = Rng::seeded(variant);
    fs.create_dir_all("/a/b/c").unwrap();
    fs.create_dir("/d").unwrap();
    fs.create_dir("/d/e").unwrap();
    fs.write("/a/small", b"hello, corrupted world").unwrap();
    fs.write("/a/b/pages", &vec![0x5a; 3 * BS + 123]).unwrap();
    fs.write("/empty", b"").unwrap();
    // A sparse file: data at the start and far beyond it.
    let f = OpenOptions::new()
        .write(true)
        .create(true)
        .open(fs, "/d/sparse")
        .unwrap();
    f.write_at(b"head", 0).unwrap();
    f.write_at(b"tail", 40 * BLOCK_SIZE + 5).unwrap();
    drop(f);
    // Many small overwrites: a long file log over several log pages.
    let f = OpenOptions::new()
        .write(true)
        .create(true)
        .open(fs, "/d/e/churn")
        .unwrap();
    for i in 0..(150 + variant * 40) {
        let off = rng.below(6 * BLOCK_SIZE);
        let len = 1 + rng.below(700) as usize;
        f.write_at(&vec![(i % 250) as u8 + 1; len], off).unwrap();
    }
    drop(f);
    // Many directory entries: a long directory log.
    for i in 0..(60 + variant * 20) {
        fs.write(format!("/a/b/c/n{i}"), &[i as u8; 10]).unwrap();
    }
    for i in (0..(60 + variant * 20)).step_by(3) {
        fs.remove_file(format!("/a/b/c/n{i}")).unwrap();
    }
    fs.hard_link("/a/small", "/d/small-link").unwrap();
    fs.hard_link("/a/b/pages", "/a/b/c/pages-link").unwrap();
    fs.symlink("../a/small", "/d/sym").unwrap();
    fs.symlink("/nowhere", "/dangling").unwrap();
    fs.rename("/a/b/c/n1", "/a/b/c/renamed").unwrap();
    fs.rename("/a/b/c/n2", "/d/e/moved").unwrap();
    fs.rename("/d/e", "/a/e-moved").unwrap();
    fs.set_len("/a/b/pages", BLOCK_SIZE + 7).unwrap();
    fs.set_len("/d/sparse", 3 * BLOCK_SIZE).unwrap();
    fs.write("/a/b/c/n4", b"rewritten").unwrap();
    assert!(manyfs::fsck::verify(fs).unwrap().is_empty());
}

/// Make the last cross-directory rename look interrupted: the journal block
/// still holds its record, only the commit word was cleared. Mount must
/// redo it (both halves are already applied, so it is idempotent).
fn with_pending_rename(mut img: Vec<u8>) -> Vec<u8> {
    let j = 2 * BS;
    assert!(img[j + 37] != 0, "journal holds the last rename's record");
    let crc = crc32(&img[j..j + JOURNAL_COMMIT_AT]);
    put_u64(
        &mut img,
        j + JOURNAL_COMMIT_AT,
        u64::from(crc) | (u64::from(JOURNAL_PENDING) << 32),
    );
    img
}

/// Where the metadata of an image lives.
#[derive(Default)]
struct Regions {
    data_start: usize,
    /// Bytes of an inode record zeroed for its checksum (the log-array word
    /// in newer formats, none in older ones).
    inode_crc_zero: std::ops::Range<usize>,
    /// Byte offsets of initialised inode records.
    inodes: Vec<usize>,
    /// Block numbers of log arrays (from the inode records' log words).
    log_arrays: Vec<usize>,
    /// The inode records' log words (log arrays, or head pages named
    /// directly).
    log_words: Vec<u64>,
    /// Block numbers of log pages (footer magic).
    log_pages: Vec<usize>,
    /// Committed log entries: (byte offset, length).
    entries: Vec<(usize, usize)>,
}

/// CRC-32 of an inode record's first 124 bytes with `zero` zeroed.
fn inode_crc(rec: &[u8], zero: &std::ops::Range<usize>) -> u32 {
    let mut check = rec[..124].to_vec();
    check[zero.clone()].fill(0);
    crc32(&check)
}

fn regions(img: &[u8]) -> Regions {
    let sb = Superblock::decode(&img[..SUPERBLOCK_LEN], img.len() as u64).unwrap();
    let table = sb.inode_table_start as usize * BS;
    let root = &img[table + INODE_SIZE..table + 2 * INODE_SIZE];
    let stored = le_u32(root, 124);
    let inode_crc_zero = [0..0, 24..32]
        .into_iter()
        .find(|z| inode_crc(root, z) == stored)
        .expect("root inode checksum in a known format");
    let mut r = Regions {
        data_start: sb.data_start as usize,
        inode_crc_zero,
        ..Default::default()
    };
    for ino in 1..sb.inode_count as usize {
        let off = table + ino * INODE_SIZE;
        let rec = &img[off..off + INODE_SIZE];
        if le_u32(rec, 0) == INODE_MAGIC {
            r.inodes.push(off);
            let word = le_u64(rec, 24);
            r.log_words.push(word);
            // Bit 63: the word names a head page itself, not an array.
            if word != 0 && word & (1 << 63) == 0 {
                r.log_arrays.push(word as usize);
            }
        }
    }
    for block in r.data_start..sb.total_blocks as usize {
        let page = &img[block * BS..(block + 1) * BS];
        if le_u32(page, BS - 64 + 20) != LOG_PAGE_MAGIC {
            continue;
        }
        r.log_pages.push(block);
        let mut slot = 0;
        while slot < 63 {
            let h = &page[slot * 64..];
            let n = h[1] as usize;
            if le_u32(h, 60) == COMMIT_MAGIC && (1..=10).contains(&n) && slot + n <= 63 {
                r.entries.push((block * BS + slot * 64, n * 64));
                slot += n;
            } else {
                slot += 1;
            }
        }
    }
    assert!(r.inodes.len() > 20, "inodes found: {}", r.inodes.len());
    assert!(
        r.log_pages.len() > 20,
        "log pages found: {}",
        r.log_pages.len()
    );
    assert!(r.entries.len() > 100, "entries found: {}", r.entries.len());
    r
}

// ---- mutations ------------------------------------------------------------------

/// Values that tend to hit edge cases when written into integer fields.
fn interesting(rng: &mut Rng, r: &Regions, total_blocks: u64) -> u64 {
    match rng.below(14) {
        // Inode numbers (directory entries, journal, footers name inodes).
        12 | 13 => rng.below(80),
        0 => 0,
        1 => 1,
        2 => u64::MAX,
        3 => u64::MAX / 2 + 1,
        4 => u64::from(u32::MAX),
        5 => total_blocks,
        6 => total_blocks - 1,
        7 => r.data_start as u64,
        8 => *rng.pick(&r.log_pages).unwrap() as u64,
        9 if rng.below(2) == 0 => *rng.pick(&r.log_arrays).unwrap() as u64,
        9 => *rng.pick(&r.log_words).unwrap(),
        10 => rng.below(total_blocks),
        _ => 1u64 << rng.below(64),
    }
}

/// One raw change at a random place of `range` (bit flip, random byte, or an
/// interesting u64 at an 8-byte aligned offset). Returns a description.
fn raw_change(img: &mut [u8], range: std::ops::Range<usize>, rng: &mut Rng, r: &Regions) -> String {
    let total_blocks = (img.len() / BS) as u64;
    let at = range.start + rng.below((range.end - range.start) as u64) as usize;
    match rng.below(3) {
        0 => {
            let bit = rng.below(8);
            img[at] ^= 1 << bit;
            format!("flip bit {bit} at {at:#x}")
        }
        1 => {
            let v = rng.next() as u8;
            img[at] = v;
            format!("byte {v:#04x} at {at:#x}")
        }
        _ => {
            let at = (at & !7).max(range.start & !7);
            let at = at.min(img.len() - 8);
            let v = interesting(rng, r, total_blocks);
            put_u64(img, at, v);
            format!("u64 {v:#x} at {at:#x}")
        }
    }
}

/// A checksummed structure of `len` bytes at `start`: its CRC-32 is stored
/// at `crc_at`; `protect` (magic or commit words) is left alone. Entries
/// checksum all their bytes with `protect` zeroed, the others the bytes
/// before `crc_at`.
struct Checked {
    what: &'static str,
    start: usize,
    len: usize,
    crc_at: usize,
    protect: std::ops::Range<usize>,
    zeroed_window: bool,
    /// Bytes zeroed for the checksum without being the window (the inode
    /// log-array word in newer formats).
    also_zero: std::ops::Range<usize>,
}

/// A log entry of `len` bytes at `start`: its CRC-32 covers all its slots
/// with bytes 56..64 (the CRC and the commit word) zeroed.
fn entry_checked(what: &'static str, start: usize, len: usize) -> Checked {
    Checked {
        what,
        start,
        len,
        crc_at: 56,
        protect: 56..64,
        zeroed_window: true,
        also_zero: 0..0,
    }
}

/// Recompute the checksum of `c`.
fn fix_crc(img: &mut [u8], c: &Checked) {
    let mut check = img[c.start..c.start + c.len].to_vec();
    let crc = if c.zeroed_window {
        check[c.protect.clone()].fill(0);
        crc32(&check)
    } else {
        check[c.also_zero.clone()].fill(0);
        crc32(&check[..c.crc_at])
    };
    put_u32(img, c.start + c.crc_at, crc);
}

/// Change bytes inside a checksummed structure and recompute the checksum,
/// so the damage passes the CRC and reaches the semantic checks.
fn crc_fixed_change(img: &mut [u8], c: Checked, rng: &mut Rng, r: &Regions) -> String {
    let untouchable = |a: usize, b: usize| {
        (c.protect.start < b && a < c.protect.end) || (c.crc_at < b && a < c.crc_at + 4)
    };
    let mut d = String::new();
    for _ in 0..1 + rng.below(3) {
        // Half the time aim at the first 64 bytes (headers, fields), not
        // the names that fill the rest of long entries.
        let span = if rng.below(2) == 0 {
            c.len.min(64)
        } else {
            c.len
        };
        let at = rng.below(span as u64) as usize;
        if rng.below(2) == 0 {
            if untouchable(at, at + 1) {
                continue;
            }
            let v = rng.next() as u8;
            img[c.start + at] = v;
            let _ = write!(d, " byte {v:#04x}@+{at}");
        } else {
            let at = (at & !3).min(c.len - 8);
            if untouchable(at, at + 8) {
                continue;
            }
            let v = interesting(rng, r, (img.len() / BS) as u64);
            put_u64(img, c.start + at, v);
            let _ = write!(d, " u64 {v:#x}@+{at}");
        }
    }
    fix_crc(img, &c);
    format!("crc-fixed {} at {:#x}:{d}", c.what, c.start)
}

/// Damage `img`; returns what was done.
fn corrupt(img: &mut [u8], r: &Regions, rng: &mut Rng, pending: bool) -> String {
    let mut what = Vec::new();
    let n = 1 + rng.below(8);
    for _ in 0..n {
        let d = match rng.below(22) {
            // Raw damage, by region.
            0..=1 => {
                let end = if rng.below(4) == 0 { BS } else { 96 };
                format!("superblock {}", raw_change(img, 0..end, rng, r))
            }
            2 => {
                let end = if rng.below(4) == 0 { 2 * BS } else { BS + 96 };
                format!("backup {}", raw_change(img, BS..end, rng, r))
            }
            3 => format!("journal {}", raw_change(img, 2 * BS..3 * BS, rng, r)),
            4..=5 => {
                let off = *rng.pick(&r.inodes).unwrap();
                format!("inode {}", raw_change(img, off..off + INODE_SIZE, rng, r))
            }
            6 => format!(
                "inode table {}",
                raw_change(img, 3 * BS..r.data_start * BS, rng, r)
            ),
            7 => {
                let b = *rng.pick(&r.log_arrays).unwrap();
                // Sub-log heads sit at the start of the block.
                let end = if rng.below(2) == 0 { 64 } else { BS };
                format!(
                    "log array {}",
                    raw_change(img, b * BS..b * BS + end, rng, r)
                )
            }
            8..=9 => {
                let b = *rng.pick(&r.log_pages).unwrap();
                format!("log page {}", raw_change(img, b * BS..(b + 1) * BS, rng, r))
            }
            10 => {
                let b = *rng.pick(&r.log_pages).unwrap() * BS + BS - 64;
                format!("log footer {}", raw_change(img, b..b + 24, rng, r))
            }
            11 => {
                let len = img.len();
                format!("anywhere {}", raw_change(img, 0..len, rng, r))
            }
            // Damage that passes the checksums.
            12..=13 => {
                let off = *rng.pick(&r.inodes).unwrap();
                let c = Checked {
                    what: "inode",
                    start: off,
                    len: INODE_SIZE,
                    crc_at: 124,
                    protect: 0..4,
                    zeroed_window: false,
                    also_zero: r.inode_crc_zero.clone(),
                };
                crc_fixed_change(img, c, rng, r)
            }
            14..=17 => {
                let &(off, len) = rng.pick(&r.entries).unwrap();
                // The entry CRC covers all its slots with bytes 56..64
                // zeroed; byte 0 (kind) and 1 (slots) are fair game too.
                let c = entry_checked("entry", off, len);
                crc_fixed_change(img, c, rng, r)
            }
            18 => {
                let primary = rng.below(2) == 0;
                let base = if primary { 0 } else { BS };
                let c = Checked {
                    what: if primary { "superblock" } else { "backup" },
                    start: base,
                    len: 96,
                    crc_at: 92,
                    protect: 0..8,
                    zeroed_window: false,
                    also_zero: 0..0,
                };
                crc_fixed_change(img, c, rng, r)
            }
            // Retype an entry: another kind and/or slot count, checksum
            // recomputed over the new length (decoders meet every shape).
            20..=21 => {
                let &(off, _) = rng.pick(&r.entries).unwrap();
                let slot = off % BS / 64;
                let kind = 1 + rng.below(5) as u8;
                let max = 10.min(63 - slot) as u64;
                let n = if rng.below(2) == 0 {
                    usize::from(img[off + 1])
                } else {
                    1 + rng.below(max) as usize
                };
                img[off] = kind;
                img[off + 1] = n as u8;
                let c = entry_checked("retyped entry", off, n * 64);
                // A committed entry needs its commit mark in the header.
                put_u32(img, off + 60, COMMIT_MAGIC);
                fix_crc(img, &c);
                format!("retyped entry at {off:#x}: kind {kind} slots {n}")
            }
            _ if pending => {
                let c = Checked {
                    what: "journal",
                    start: 2 * BS,
                    len: BS,
                    crc_at: JOURNAL_COMMIT_AT,
                    protect: JOURNAL_COMMIT_AT + 4..BS,
                    zeroed_window: false,
                    also_zero: 0..0,
                };
                crc_fixed_change(img, c, rng, r)
            }
            _ => format!("journal {}", raw_change(img, 2 * BS..2 * BS + 512, rng, r)),
        };
        what.push(d);
    }
    what.join("; ")
}

// ---- exercising a damaged image ------------------------------------------------

#[derive(Debug, Default, Clone)]
struct Outcome {
    /// The first error met while reading, with the path.
    first_read_error: Option<String>,
    fsck_err: bool,
    fsck_clean: bool,
    mount_ok: bool,
    /// Errors met while reading the tree of a mounted image.
    read_errors: usize,
    verify_diffs: usize,
    verify_err: bool,
    nodes: usize,
    /// Files whose size is beyond anything the pristine image had.
    huge: usize,
    mount_error: Option<String>,
    /// Some files and directories met by the walk.
    files: Vec<PathBuf>,
    dirs: Vec<PathBuf>,
}

fn check_display(e: &manyfs::Error, problems: &mut Vec<String>) {
    if e.to_string().trim().is_empty() {
        problems.push(format!("error with empty Display: {e:?}"));
    }
}

/// fsck, mount with `opts`, read everything, verify. `problems` collects
/// violations that are not panics (empty error messages).
fn exercise(pool: &Path, opts: &MountOptions, problems: &mut Vec<String>) -> Outcome {
    let mut out = Outcome::default();
    match manyfs::fsck::check(pool) {
        Ok(report) => {
            out.fsck_clean = report.is_clean();
            for e in &report.errors {
                if e.trim().is_empty() {
                    problems.push("fsck report with an empty error line".into());
                }
            }
        }
        Err(e) => {
            out.fsck_err = true;
            check_display(&e, problems);
        }
    }
    let fs = match Fs::mount(pool, opts) {
        Ok(fs) => fs,
        Err(e) => {
            out.mount_error = Some(e.to_string());
            check_display(&e, problems);
            return out;
        }
    };
    out.mount_ok = true;
    let mut seen = HashSet::new();
    walk(&fs, Path::new("/"), 0, &mut seen, &mut out, problems);
    match manyfs::fsck::verify(&fs) {
        Ok(d) => out.verify_diffs = d.len(),
        Err(e) => {
            out.verify_err = true;
            check_display(&e, problems);
        }
    }
    // A pool that fsck calls clean must also take new data and stay clean.
    let clean_and_readable = out.fsck_clean && out.read_errors == 0 && !out.verify_err;
    if clean_and_readable {
        let data: Vec<u8> = (0..3 * BS + 100).map(|i| (i % 241) as u8).collect();
        let wrote = fs
            .create_dir("/zz-new")
            .and_then(|_| fs.write("/zz-new/f", &data))
            .and_then(|_| manyfs::fsck::verify(&fs));
        match wrote {
            Ok(d) if d.is_empty() => {}
            other => problems.push(format!(
                "clean pool: writing failed or verify differs: {other:?}"
            )),
        }
    }
    if !clean_and_readable {
        damaged_writes(&fs, &out.files.clone(), &out.dirs.clone(), problems);
    }
    if let Err(e) = fs.unmount() {
        out.read_errors += 1;
        check_display(&e, problems);
    }
    if clean_and_readable && problems.is_empty() {
        match manyfs::fsck::check(pool) {
            Ok(r) if r.is_clean() => {}
            other => problems.push(format!("clean pool unclean after writing: {other:?}")),
        }
        match Fs::mount(pool, opts).and_then(|fs| fs.read("/zz-new/f")) {
            Ok(d)
                if d.len() == 3 * BS + 100
                    && d.iter().enumerate().all(|(i, &b)| b == (i % 241) as u8) => {}
            other => problems.push(format!(
                "clean pool: data written lost after remount: {:?}",
                other.map(|d| d.len())
            )),
        }
    }
    out
}

/// Changes on a damaged but mounted pool: errors are fine, panics are not.
fn damaged_writes(fs: &Fs, files: &[PathBuf], dirs: &[PathBuf], problems: &mut Vec<String>) {
    let mut errs = Vec::new();
    let mut e = |r: manyfs::Result<()>| {
        if let Err(x) = r {
            errs.push(x);
        }
    };
    e(fs.create_dir("/zz-new"));
    e(fs.write("/zz-new/f", &[7u8; 3 * BS + 5]));
    for f in files.iter().take(6) {
        e(OpenOptions::new().write(true).open(fs, f).and_then(|h| {
            h.write_at(b"xyz", 10)?;
            h.write_at(&[1u8; 5000], 3 * BLOCK_SIZE - 7)?;
            h.append(b"tail")?;
            h.set_len(BLOCK_SIZE + 1)
        }));
    }
    for d in dirs.iter().take(4) {
        e(fs.write(d.join("zz"), b"1"));
        e(fs.create_dir(d.join("zzd")));
    }
    for f in files.iter().skip(6).take(3) {
        e(fs.remove_file(f));
    }
    if let Some(f) = files.get(10) {
        e(fs.rename(f, "/zz-renamed"));
    }
    e(manyfs::fsck::verify(fs).map(|_| ()));
    for x in &errs {
        check_display(x, problems);
    }
}

fn note<T>(
    r: manyfs::Result<T>,
    path: &Path,
    out: &mut Outcome,
    problems: &mut Vec<String>,
) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(e) => {
            out.read_errors += 1;
            out.first_read_error
                .get_or_insert_with(|| format!("{}: {e}", path.display()));
            check_display(&e, problems);
            None
        }
    }
}

fn walk(
    fs: &Fs,
    dir: &Path,
    depth: usize,
    seen: &mut HashSet<u64>,
    out: &mut Outcome,
    problems: &mut Vec<String>,
) {
    // Damage may create directory cycles; visit each directory once.
    if depth > 64 || out.nodes > 20_000 {
        return;
    }
    let Some(entries) = note(fs.read_dir(dir), dir, out, problems) else {
        return;
    };
    for e in entries {
        out.nodes += 1;
        // Names may be any bytes; keep them exact.
        let path = dir.join(&e.name);
        let Some(md) = note(fs.symlink_metadata(&path), &path, out, problems) else {
            continue;
        };
        match md.kind {
            FileKind::Dir => {
                if out.dirs.len() < 20 {
                    out.dirs.push(path.clone());
                }
                if seen.insert(md.ino) {
                    walk(fs, &path, depth + 1, seen, out, problems);
                }
            }
            FileKind::Symlink => {
                note(fs.read_link(&path), &path, out, problems);
            }
            FileKind::File => {
                if out.files.len() < 20 {
                    out.files.push(path.clone());
                }
                read_file(fs, &path, md.size, out, problems)
            }
            // FIFOs, sockets and devices: their metadata was all there is.
            _ => {}
        }
    }
}

/// Read a file in chunks (its size may be damaged to something enormous, so
/// never allocate it whole): all of it when plausible, else both ends.
fn read_file(fs: &Fs, path: &Path, size: u64, out: &mut Outcome, problems: &mut Vec<String>) {
    let Some(f) = note(
        OpenOptions::new().read(true).open(fs, path),
        path,
        out,
        problems,
    ) else {
        return;
    };
    let mut buf = vec![0u8; 64 << 10];
    let plausible = size <= 4 * POOL_SIZE;
    if !plausible {
        out.huge += 1;
    }
    // (start, end) byte ranges to read.
    let ranges = if plausible {
        vec![(0, size)]
    } else {
        vec![(0, 1 << 20), (size - (1 << 20), size)]
    };
    for (start, end) in ranges {
        let mut off = start;
        while off < end {
            let want = ((end - off) as usize).min(buf.len());
            match f.read_at(&mut buf[..want], off) {
                Ok(0) => {
                    problems.push(format!(
                        "{}: read_at({off}) hit EOF before size {size}",
                        path.display()
                    ));
                    break;
                }
                Ok(n) => off += n as u64,
                Err(e) => {
                    out.read_errors += 1;
                    out.first_read_error
                        .get_or_insert_with(|| format!("{}: read_at({off}): {e}", path.display()));
                    check_display(&e, problems);
                    break;
                }
            }
        }
    }
}

/// Name of the threads whose panics are counted.
const GUARDED: &str = "guarded-exercise";

thread_local! {
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

enum Run {
    Done(Outcome, Vec<String>),
    Panicked(String),
}

/// Run `exercise` on its own thread, catching panics; `None` if it hangs.
fn run_guarded(pool: PathBuf, opts: MountOptions) -> Option<Run> {
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::Builder::new().name(GUARDED.into());
    let spawned = worker.spawn(move || {
        let r = std::panic::catch_unwind(|| {
            let mut problems = Vec::new();
            let o = exercise(&pool, &opts, &mut problems);
            (o, problems)
        });
        let run = match r {
            Ok((o, p)) => Run::Done(o, p),
            Err(payload) => Run::Panicked(
                LAST_PANIC
                    .with(|c| c.borrow_mut().take())
                    .unwrap_or_else(|| {
                        payload
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                            .unwrap_or_default()
                    }),
            ),
        };
        let _ = tx.send(run);
    });
    spawned.expect("spawn a guarded thread");
    rx.recv_timeout(HANG_LIMIT).ok()
}

// Bugs this test found (all fixed in 3af690a unless noted); the damage
// generated keeps covering them:
//
// 5. `Superblock::decode` computed `total_blocks * BLOCK_SIZE` unchecked: a
//    superblock with a valid CRC and `total_blocks > u64::MAX / 4096`
//    panicked ("attempt to multiply with overflow") in mount and fsck.
// 7. Recovery accepted a SetAttr size above `MAX_FILE_SIZE`; `read_at` past
//    it then panicked in the file index ("key < KEY_LIMIT").
// 8. `read_link` allocated the symlink's size from media: a damaged size
//    aborted the process ("memory allocation of N bytes failed").
// 9. A directory entry with `seq = u64::MAX` made the next change in that
//    directory panic ("attempt to add with overflow").
// 10. `Entry::decode` read a SetAttr's second slot without checking it
//     exists: a one-slot entry of kind 2 panicked fsck and mount.
// 11. A pending rename naming a missing source directory was applied in
//     memory but not persisted (verify differed; the name vanished after
//     the next mount) while fsck called the pool clean.
// 16. fsck and mount accepted a symlink whose size exceeds 4095 bytes
//     (valid CRC) while `read_link` refused it as corrupt.

#[derive(Default, Debug)]
struct Counts {
    iterations: usize,
    panics: usize,
    hangs: usize,
    fsck_errors: usize,
    fsck_reported_damage: usize,
    fsck_clean: usize,
    mount_errors: usize,
    mounted: usize,
    clean_and_mounted: usize,
    mounted_with_read_errors: usize,
    mounted_with_verify_diffs: usize,
    fsck_clean_but_mount_failed: usize,
    fsck_damage_but_mounted: usize,
    huge_files: usize,
    fsck_clean_with_huge_files: usize,
    nodes_read: usize,
}

/// Record panics inside the guarded threads instead of printing them;
/// others (the tests' own assertions) go to the default hook. Installed
/// once per process (the tests run side by side).
fn record_guarded_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if std::thread::current().name() == Some(GUARDED) {
                LAST_PANIC.with(|c| *c.borrow_mut() = Some(info.to_string()));
            } else {
                default_hook(info);
            }
        }));
    });
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// The test's CRC (crc32fast) is the one the pool stores: the superblock
/// and its backup, every initialised inode and every committed log entry of
/// a pristine image check out. Without this, "CRC-fixed" damage would be
/// rejected by the checksum and never reach the semantic checks.
#[test]
fn crc32_is_the_checksum_on_media() {
    let dir = common::modelled_scratch();
    let img = build_image(dir.path(), 0);
    let r = regions(&img);
    for base in [0, BS] {
        assert_eq!(
            crc32(&img[base..base + 92]),
            le_u32(&img, base + 92),
            "superblock at {base}"
        );
    }
    for &off in &r.inodes {
        let rec = &img[off..off + INODE_SIZE];
        assert_eq!(
            inode_crc(rec, &r.inode_crc_zero),
            le_u32(rec, 124),
            "inode at {off}"
        );
    }
    for &(off, len) in &r.entries {
        let mut e = img[off..off + len].to_vec();
        let stored = le_u32(&e, 56);
        e[56..64].fill(0);
        assert_eq!(crc32(&e), stored, "log entry at {off}");
    }
    // And it is the standard CRC-32 (IEEE): the check value of "123456789".
    assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
}

#[test]
fn damaged_pools_never_panic_or_hang() {
    let dir = common::modelled_scratch();
    let seed = env_u64("MANYFS_CORRUPT_SEED").unwrap_or(0x6d61_6e79_6673);
    let iterations = env_u64("MANYFS_CORRUPT_ITERS").unwrap_or(1200) as usize;
    let only = env_u64("MANYFS_CORRUPT_ONLY").map(|v| v as usize);

    let base = [build_image(dir.path(), 0), build_image(dir.path(), 1)];
    let pending = with_pending_rename(base[1].clone());
    let images: Vec<(&str, Vec<u8>, bool)> = vec![
        ("plain", base[0].clone(), false),
        ("larger-logs", base[1].clone(), false),
        ("pending-rename", pending, true),
    ];
    let maps: Vec<Regions> = images.iter().map(|(_, img, _)| regions(img)).collect();

    // The pristine images themselves: clean, mountable, fully readable.
    for (name, img, _) in &images {
        let pool = dir.path().join(format!("check-{name}"));
        std::fs::write(&pool, img).unwrap();
        let mut problems = Vec::new();
        let o = exercise(&pool, &MountOptions::default(), &mut problems);
        assert!(
            o.fsck_clean && o.mount_ok && o.read_errors == 0 && o.verify_diffs == 0,
            "pristine {name}: {o:?} {problems:?}"
        );
        assert!(o.nodes >= 40, "pristine {name}: only {} nodes", o.nodes);
        std::fs::remove_file(&pool).unwrap();
    }

    record_guarded_panics();

    let mut c = Counts::default();
    let mut failures: Vec<String> = Vec::new();
    // Suspicious but allowed outcomes, printed for the record.
    let mut notes: Vec<String> = Vec::new();
    let mut hang = None;
    let mut kept = 0;
    let mut repairs = Repairs::default();
    for i in 0..iterations * 2 {
        if c.iterations >= iterations && only.is_none() {
            break;
        }
        if only.is_some_and(|o| o != i) {
            continue;
        }
        let mut rng = Rng::seeded(seed ^ (i as u64).wrapping_mul(0x2545_f491_4f6c_dd1d));
        let which = i % images.len();
        let (name, pristine, pending) = &images[which];
        let mut img = pristine.clone();
        let what = format!(
            "[{name}] {}",
            corrupt(&mut img, &maps[which], &mut rng, *pending)
        );
        let pool = dir.path().join(format!("pool-{i}"));
        std::fs::write(&pool, &img).unwrap();
        c.iterations += 1;
        let mut keep = false;
        match run_guarded(pool.clone(), MountOptions::default()) {
            None => {
                c.hangs += 1;
                hang = Some(format!("iteration {i}: hang (> {HANG_LIMIT:?}): {what}"));
                keep = true;
            }
            Some(Run::Panicked(msg)) => {
                c.panics += 1;
                failures.push(format!("iteration {i}: PANIC {msg}\n    damage: {what}"));
                keep = true;
            }
            Some(Run::Done(o, problems)) => {
                c.fsck_errors += usize::from(o.fsck_err);
                c.fsck_clean += usize::from(o.fsck_clean);
                c.fsck_reported_damage += usize::from(!o.fsck_err && !o.fsck_clean);
                c.mounted += usize::from(o.mount_ok);
                c.mount_errors += usize::from(!o.mount_ok);
                if o.fsck_clean && !o.mount_ok {
                    c.fsck_clean_but_mount_failed += 1;
                    notes.push(format!(
                        "iteration {i}: fsck clean but mount failed: {}: {what}",
                        o.mount_error.as_deref().unwrap_or("?")
                    ));
                }
                c.fsck_damage_but_mounted += usize::from(!o.fsck_clean && o.mount_ok);
                c.mounted_with_read_errors += usize::from(o.mount_ok && o.read_errors > 0);
                c.mounted_with_verify_diffs +=
                    usize::from(o.mount_ok && (o.verify_diffs > 0 || o.verify_err));
                c.huge_files += o.huge;
                if o.huge > 0 && o.fsck_clean {
                    c.fsck_clean_with_huge_files += 1;
                    notes.push(format!(
                        "iteration {i}: fsck clean, file size > {} MiB: {what}",
                        (4 * POOL_SIZE) >> 20
                    ));
                }
                c.nodes_read += o.nodes;
                if o.fsck_clean && o.mount_ok {
                    c.clean_and_mounted += 1;
                    if o.read_errors > 0 {
                        failures.push(format!(
                            "iteration {i}: fsck clean and mounted, but {} read errors ({})\n    damage: {what}",
                            o.read_errors,
                            o.first_read_error.as_deref().unwrap_or("?")
                        ));
                        keep = true;
                    }
                }
                for p in problems {
                    failures.push(format!("iteration {i}: {p}\n    damage: {what}"));
                    keep = true;
                }
            }
        }
        repairs.run(i, &img, dir.path(), &what, &mut failures);
        if keep && kept < 5 {
            let saved = std::env::temp_dir().join(format!("manyfs-corrupt-{seed:x}-{i}.pool"));
            if std::fs::write(&saved, &img).is_ok() {
                kept += 1;
                failures.push(format!("    image kept at {}", saved.display()));
            }
        }
        if hang.is_some() {
            break;
        }
        let _ = std::fs::remove_file(&pool);
    }

    println!("seed {seed:#x}: {c:#?}");
    println!(
        "repair: {}/{} damaged pools clean after --repair",
        repairs.clean, repairs.damaged
    );
    for n in notes.iter().take(5) {
        println!("note: {n}");
    }
    for f in failures.iter().take(40) {
        println!("{f}");
    }
    assert!(hang.is_none(), "{}", hang.unwrap());
    assert_eq!(c.panics, 0, "panics: {failures:#?}");
    assert!(
        failures.is_empty(),
        "{} failures (first ones above), e.g. {}",
        failures.len(),
        failures[0]
    );
    if only.is_none() {
        assert!(c.iterations >= 1000, "only {} iterations", c.iterations);
        // The damage must actually be noticed, and some images must survive.
        assert!(
            c.fsck_errors + c.fsck_reported_damage > c.iterations / 4,
            "{c:?}"
        );
        assert!(c.mounted > 0 && c.mount_errors > 0, "{c:?}");
    }
}

// ---- fsck --repair on every damaged image ---------------------------------------

/// Repair outcomes over the damaged images.
#[derive(Default)]
struct Repairs {
    /// Images fsck found damaged.
    damaged: usize,
    /// Of those, images repair left clean.
    clean: usize,
}

impl Repairs {
    /// Repair a fresh copy of damaged image `img`: it must not panic or
    /// hang, and when it reports the pool clean, fsck must agree and the
    /// pool must mount.
    fn run(&mut self, i: usize, img: &[u8], dir: &Path, what: &str, failures: &mut Vec<String>) {
        let pool = dir.join(format!("repair-{i}"));
        std::fs::write(&pool, img).unwrap();
        let (tx, rx) = mpsc::channel();
        let p = pool.clone();
        let worker = std::thread::Builder::new().name(GUARDED.into());
        worker
            .spawn(move || {
                let r = std::panic::catch_unwind(|| -> Result<Option<bool>, String> {
                    let r = match manyfs::fsck::repair::repair(&p) {
                        Ok(r) => r,
                        Err(e) if e.to_string().trim().is_empty() => {
                            return Err(format!("repair error with empty Display: {e:?}"));
                        }
                        Err(_) => return Ok(None),
                    };
                    if r.before.is_clean() {
                        return Ok(None);
                    }
                    if !r.is_clean() {
                        return Ok(Some(false));
                    }
                    match manyfs::fsck::check(&p) {
                        Ok(c) if c.is_clean() => {}
                        other => return Err(format!("repair said clean, fsck: {other:?}")),
                    }
                    Fs::mount(&p, &MountOptions::default())
                        .and_then(|fs| fs.unmount())
                        .map_err(|e| format!("repair said clean, mount failed: {e}"))?;
                    Ok(Some(true))
                });
                let _ = tx.send(r.map_err(|_| {
                    LAST_PANIC
                        .with(|c| c.borrow_mut().take())
                        .unwrap_or_default()
                }));
            })
            .expect("spawn a guarded thread");
        match rx.recv_timeout(HANG_LIMIT) {
            Err(_) => failures.push(format!("iteration {i}: repair hangs\n    damage: {what}")),
            Ok(Err(panic)) => failures.push(format!(
                "iteration {i}: repair PANIC {panic}\n    damage: {what}"
            )),
            Ok(Ok(Err(p))) => failures.push(format!("iteration {i}: {p}\n    damage: {what}")),
            Ok(Ok(Ok(None))) => {}
            Ok(Ok(Ok(Some(clean)))) => {
                self.damaged += 1;
                self.clean += usize::from(clean);
            }
        }
        let _ = std::fs::remove_file(&pool);
    }
}

/// Exercise damaged pool `pool` (iteration `i`, damaged by `what`) on a
/// guarded thread ([`run_guarded`]) and add to `failures` what must never
/// happen: a hang, a panic, fsck calling the pool clean while reading the
/// mounted pool fails, a problem `exercise` met. `Err(())` after a hang
/// (stop there); else the outcome, if the exercise ran to its end.
fn exercise_damaged(
    i: usize,
    pool: PathBuf,
    opts: MountOptions,
    what: &str,
    failures: &mut Vec<String>,
) -> Result<Option<Outcome>, ()> {
    match run_guarded(pool, opts) {
        None => {
            failures.push(format!("iteration {i}: hang: {what}"));
            Err(())
        }
        Some(Run::Panicked(msg)) => {
            failures.push(format!("iteration {i}: PANIC {msg}: {what}"));
            Ok(None)
        }
        Some(Run::Done(o, problems)) => {
            if o.fsck_clean && o.mount_ok && o.read_errors > 0 {
                failures.push(format!(
                    "iteration {i}: fsck clean, {} read errors ({}): {what}",
                    o.read_errors,
                    o.first_read_error.as_deref().unwrap_or("?")
                ));
            }
            failures.extend(
                problems
                    .into_iter()
                    .map(|p| format!("iteration {i}: {p}: {what}")),
            );
            Ok(Some(o))
        }
    }
}

/// Print the first failures and fail if there is any.
fn assert_no_failures(failures: &[String]) {
    for f in failures.iter().take(20) {
        println!("{f}");
    }
    assert!(
        failures.is_empty(),
        "{} failures, e.g. {}",
        failures.len(),
        failures[0]
    );
}

// ---- pools of several members: damaged member tables and headers -------------

/// Byte offset of the member table in blocks 0 and 1.
const TABLE_AT: usize = 128;
/// Bytes of the table's head (magic, count, entry bytes, CRC, zero).
const TABLE_HEAD: usize = 24;

/// A pool of two members (`dir/pristine-members`, 8 MiB on node 0;
/// `dir/m1`, 4 MiB on node 1) holding a few files, unmounted: the bytes of
/// both files. The table names `dir/m1`: each damaged copy is written
/// back over these two paths.
fn build_two_member_image(dir: &Path) -> (Vec<u8>, Vec<u8>) {
    let pool = dir.join("pristine-members");
    let m1 = dir.join("m1");
    let fs = Fs::mkfs(
        &pool,
        &{
            let mut mk = MkfsOptions::default();
            mk.size = POOL_SIZE;
            mk.members = vec![manyfs::PoolMember {
                path: m1.clone(),
                node: 1,
                size: 4 << 20,
            }];
            mk
        },
        &MountOptions::default(),
    )
    .unwrap();
    fs.create_dir_all("/a/b").unwrap();
    for i in 0..12 {
        // Large enough that both members hold data.
        fs.write(format!("/a/b/f{i}"), &vec![i as u8 + 1; 200 * BS])
            .unwrap();
    }
    assert!(
        fs.stats().members[1].used_blocks > 0,
        "member 1 holds no data"
    );
    assert!(manyfs::fsck::verify(&fs).unwrap().is_empty());
    fs.unmount().unwrap();
    assert!(manyfs::fsck::check(&pool).unwrap().is_clean());
    (std::fs::read(&pool).unwrap(), std::fs::read(&m1).unwrap())
}

/// Recompute the CRC of the member table at `at` (head CRC field zeroed,
/// over head and entries), when its entry length is plausible.
fn fix_table_crc(img: &mut [u8], at: usize) {
    let len = le_u32(img, at + 12) as usize;
    if at + TABLE_HEAD + len > img.len() || len > BS {
        return;
    }
    let mut t = img[at..at + TABLE_HEAD + len].to_vec();
    t[16..20].fill(0);
    put_u32(img, at + 16, crc32(&t));
}

/// Damage one or both member tables of `pool` or member 1's header.
fn corrupt_members(pool: &mut [u8], m1: &mut [u8], rng: &mut Rng) -> String {
    let table_len = TABLE_HEAD + le_u32(pool, TABLE_AT + 12) as usize;
    let both = rng.below(3) == 0;
    let which = rng.below(4);
    let interesting = |rng: &mut Rng| -> u64 {
        *rng.pick(&[
            0,
            1,
            2,
            3,
            0xff,
            0xffff,
            u32::MAX as u64,
            u64::MAX,
            1 << 40,
            2047,
            2049,
            3072,
        ])
        .unwrap()
    };
    match which {
        // Raw bytes of a table copy (or of both, alike).
        0 => {
            let off = rng.below(table_len as u64) as usize;
            let v = rng.next() as u8;
            let mut desc = format!("table byte {off} := {v:#x}");
            for base in [0, BS].into_iter().take(if both { 2 } else { 1 }) {
                pool[base + TABLE_AT + off] = v;
            }
            if both {
                desc.push_str(" (both copies)");
            }
            desc
        }
        // A field of a table copy changed, its CRC recomputed.
        1 => {
            // Count, entry bytes, member 0's blocks, node and path length
            // (its path is empty), member 1's blocks, node and path length.
            let fields: [(usize, usize); 8] = [
                (8, 4),
                (12, 4),
                (24, 8),
                (32, 4),
                (36, 2),
                (40, 8),
                (48, 4),
                (52, 2),
            ];
            let (off, len) = *rng.pick(&fields).unwrap();
            let v = interesting(rng);
            for base in [0, BS].into_iter().take(if both { 2 } else { 1 }) {
                let at = base + TABLE_AT;
                if off + len > table_len {
                    continue;
                }
                pool[at + off..at + off + len].copy_from_slice(&v.to_le_bytes()[..len]);
                fix_table_crc(pool, at);
            }
            format!(
                "table field {off}+{len} := {v:#x}, CRC fixed{}",
                if both { " (both copies)" } else { "" }
            )
        }
        // Raw bytes of member 1's header.
        2 => {
            let off = rng.below(64) as usize;
            let v = rng.next() as u8;
            m1[off] = v;
            format!("member header byte {off} := {v:#x}")
        }
        // A field of member 1's header changed, its CRC recomputed.
        _ => {
            let fields: [(usize, usize); 5] = [(8, 4), (12, 4), (16, 8), (24, 8), (32, 8)];
            let (off, len) = *rng.pick(&fields).unwrap();
            let v = interesting(rng);
            m1[off..off + len].copy_from_slice(&v.to_le_bytes()[..len]);
            let crc = crc32(&m1[..60]);
            put_u32(m1, 60, crc);
            format!("member header field {off}+{len} := {v:#x}, CRC fixed")
        }
    }
}

/// Pools of two members with a damaged member table (either copy or both,
/// raw or with the CRC recomputed) or a damaged member header: fsck and
/// mount give a readable error or a pool that reads back, never a panic
/// or a hang; a pool fsck calls clean mounts and reads without errors.
#[test]
fn damaged_member_tables_and_headers_never_panic_or_hang() {
    let dir = common::modelled_scratch();
    let (pool0, m10) = build_two_member_image(dir.path());
    let iterations = env_u64("MANYFS_CORRUPT_MEMBER_ITERS").unwrap_or(200) as usize;
    record_guarded_panics();
    let (mut failures, mut mounted, mut refused) = (Vec::new(), 0, 0);
    for i in 0..iterations {
        let mut rng = Rng::seeded(0x6d65_6d62 ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let (mut pool, mut m1) = (pool0.clone(), m10.clone());
        let what = corrupt_members(&mut pool, &mut m1, &mut rng);
        let path = dir.path().join("pristine-members");
        std::fs::write(&path, &pool).unwrap();
        std::fs::write(dir.path().join("m1"), &m1).unwrap();
        let Ok(outcome) = exercise_damaged(i, path, MountOptions::default(), &what, &mut failures)
        else {
            break;
        };
        if let Some(o) = outcome {
            if o.mount_ok {
                mounted += 1;
            } else {
                refused += 1;
                if refused == 1 {
                    println!("first refusal: {:?}: {what}", o.mount_error);
                }
            }
        }
    }
    println!("member damage: {iterations} pools, {mounted} mounted, {refused} refused");
    assert_no_failures(&failures);
    // The damage is noticed, and damage to one copy of the table alone is
    // survived (the other copy).
    assert!(
        refused > 0 && mounted > 0,
        "{mounted} mounted, {refused} refused"
    );
}

// ---- tiered pools: a data device, and small synced writes staged in the pool --

/// Bytes of the data device of [`build_tiered_image`].
const TIER_DEVICE_SIZE: u64 = 4 << 20;

/// Mount options of the tiered pools: a `dram` pool (persistent memory
/// emulated), which stages small synchronous writes.
fn tier_opts() -> MountOptions {
    {
        let mut mo = MountOptions::default();
        mo.durability = manyfs::Durability::Dram;
        mo
    }
}

/// A tiered pool left unmounted with pages still staged in it.
struct TieredImage {
    /// The pool file (`dir/pristine-tier`) and its bytes.
    pool_path: PathBuf,
    pool: Vec<u8>,
    /// The data device (`dir/tier-data`, recorded by its absolute path, so
    /// a copy of the pool anywhere in `dir` uses it) and its bytes.
    data_path: PathBuf,
    device: Vec<u8>,
    /// Files with staged pages and their contents.
    staged: Vec<(String, Vec<u8>)>,
}

/// A tiered pool on a `dram` pool holding the tree of [`build_image`]
/// (its file data on the device), then six files each written to the
/// device, synced, and overwritten five times by small synced writes,
/// which are staged in the pool (each superseding the last); unmounted
/// without destaging, so the pool still holds the staged pages and their
/// entries.
fn build_tiered_image(dir: &Path) -> TieredImage {
    let pool_path = dir.join("pristine-tier");
    let data_path = dir.join("tier-data");
    assert!(data_path.is_absolute());
    let fs = Fs::mkfs(
        &pool_path,
        &{
            let mut mk = MkfsOptions::default();
            mk.size = POOL_SIZE;
            mk.data = Some(manyfs::DataDevice {
                path: data_path.clone(),
                size: Some(TIER_DEVICE_SIZE),
            });
            mk
        },
        &tier_opts(),
    )
    .unwrap();
    populate(&fs, 0);
    let mut staged = Vec::new();
    for k in 0..6usize {
        let path = format!("/staged{k}");
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .open(&fs, &path)
            .unwrap();
        let mut want = vec![k as u8 + 1; 2 * BS];
        f.write_at(&want, 0).unwrap();
        f.sync_data().unwrap();
        for j in 0..5 {
            let off = (j * 1500 + k * 37) % (2 * BS - 500);
            let bytes = vec![0x40 + (k * 8 + j) as u8; 500];
            f.write_at(&bytes, off as u64).unwrap();
            want[off..off + 500].copy_from_slice(&bytes);
            f.sync_data().unwrap();
        }
        staged.push((path, want));
    }
    let st = fs.stats().staging;
    assert!(st.pages_staged >= 30 && st.pages_destaged == 0, "{st:?}");
    assert!(manyfs::fsck::verify(&fs).unwrap().is_empty());
    fs.unmount().unwrap();
    TieredImage {
        pool: std::fs::read(&pool_path).unwrap(),
        device: std::fs::read(&data_path).unwrap(),
        pool_path,
        data_path,
        staged,
    }
}

/// The committed write entries of `img` whose data block is in the pool
/// (staged pages), as (byte offset, length) of the entry.
fn staged_entries(img: &[u8], r: &Regions) -> Vec<(usize, usize)> {
    let sb = Superblock::decode(&img[..SUPERBLOCK_LEN], img.len() as u64).unwrap();
    r.entries
        .iter()
        .copied()
        .filter(|&(off, len)| {
            matches!(
                manyfs::format::Entry::decode(&img[off..off + len]),
                Some((manyfs::format::Entry::FileWrite { block, .. }, _))
                    if (r.data_start as u64..sb.total_blocks).contains(&block)
            )
        })
        .collect()
}

/// fsck (check, and `--repair`, which finds nothing to do) on a tiered
/// pool whose staged pages were never destaged: clean; the staged files
/// read back after a mount that stages, and destaging them then moves
/// pages (they were still staged); the pool stays clean.
#[test]
fn fsck_and_repair_find_a_tiered_pool_with_staged_pages_clean() {
    let dir = common::modelled_scratch();
    let t = build_tiered_image(dir.path());
    let staged = staged_entries(&t.pool, &regions(&t.pool));
    assert!(staged.len() >= 6, "{} staged entries", staged.len());
    let report = manyfs::fsck::check(&t.pool_path).unwrap();
    assert!(report.is_clean(), "{:?}", report.errors);
    let rep = manyfs::fsck::repair::repair(&t.pool_path).unwrap();
    assert!(
        rep.before.is_clean() && rep.is_clean() && rep.fixed.is_empty(),
        "{:?} {:?}",
        rep.before.errors,
        rep.fixed
    );
    let after = std::fs::read(&t.pool_path).unwrap();
    assert_eq!(
        staged_entries(&after, &regions(&after)).len(),
        staged.len(),
        "the repair's mount left the staged pages where they were"
    );
    let fs = Fs::mount(&t.pool_path, &tier_opts()).unwrap();
    for (path, want) in &t.staged {
        assert!(fs.read(path).unwrap() == *want, "{path}");
    }
    assert!(manyfs::fsck::verify(&fs).unwrap().is_empty());
    assert!(fs.destage().unwrap() >= 6, "staged pages to move");
    for (path, want) in &t.staged {
        assert!(fs.read(path).unwrap() == *want, "{path} destaged");
    }
    fs.unmount().unwrap();
    let report = manyfs::fsck::check(&t.pool_path).unwrap();
    assert!(report.is_clean(), "{:?}", report.errors);
    // The whole exercise of the damaged pools, on the pristine one.
    std::fs::write(&t.pool_path, &t.pool).unwrap();
    std::fs::write(&t.data_path, &t.device).unwrap();
    let mut problems = Vec::new();
    let o = exercise(&t.pool_path, &tier_opts(), &mut problems);
    assert!(
        o.fsck_clean && o.mount_ok && o.read_errors == 0 && o.verify_diffs == 0,
        "{o:?} {problems:?}"
    );
    assert!(problems.is_empty(), "{problems:?}");
}

/// Damage a tiered image: the pool anywhere (as [`corrupt`] does), a staged
/// page's write entry (its block, page, count or size changed with the
/// CRC recomputed, or raw bytes), a staged data block, the device's header
/// or data blocks, or a device cut short. Returns what was done.
fn corrupt_tiered(
    pool: &mut [u8],
    device: &mut Vec<u8>,
    r: &Regions,
    staged: &[(usize, usize)],
    rng: &mut Rng,
) -> String {
    let sb = Superblock::decode(&pool[..SUPERBLOCK_LEN], pool.len() as u64).unwrap();
    let &(off, len) = rng.pick(staged).unwrap();
    let entry = entry_checked("staged entry", off, len);
    match rng.below(12) {
        0..=3 => corrupt(pool, r, rng, false),
        4..=5 => {
            // A field of the entry: page offset, block, page count, size.
            let (field, at) = *rng
                .pick(&[
                    ("pgoff", 16),
                    ("block", 24),
                    ("npages", 32),
                    ("file_end", 40),
                ])
                .unwrap();
            let device_blocks = sb.device_data_blocks();
            let other = rng.pick(staged).unwrap().0;
            let v = match rng.below(6) {
                // Another staged page's block: two entries, one block.
                0 => le_u64(pool, other + 24),
                // A device block (perhaps another file's).
                1 => device_blocks.start + rng.below(device_blocks.end - device_blocks.start),
                // The device's header block, or just past its end.
                2 => sb.total_blocks,
                3 => device_blocks.end,
                _ => interesting(rng, r, sb.total_blocks),
            };
            let v = if field == "npages" {
                v & 0xffff_ffff
            } else {
                v
            };
            if field == "npages" {
                put_u32(pool, off + at, v as u32);
            } else {
                put_u64(pool, off + at, v);
            }
            fix_crc(pool, &entry);
            format!("staged entry at {off:#x}: {field} := {v:#x}, CRC fixed")
        }
        6 => crc_fixed_change(pool, entry, rng, r),
        7 => format!("staged entry {}", raw_change(pool, off..off + len, rng, r)),
        8 => {
            let b = le_u64(pool, off + 24) as usize;
            format!(
                "staged data {}",
                raw_change(pool, b * BS..(b + 1) * BS, rng, r)
            )
        }
        9 => format!("device header {}", raw_change(device, 0..BS, rng, r)),
        10 => {
            let end = device.len();
            format!("device {}", raw_change(device, BS..end, rng, r))
        }
        _ => {
            let keep = rng.below((device.len() / BS) as u64) as usize * BS;
            device.truncate(keep);
            format!("device cut to {keep} bytes")
        }
    }
}

/// Damaged tiered pools that hold staged pages (the pool anywhere, the
/// staged pages' entries and data, the data device): fsck and a mount
/// that stages give a readable error or a pool that reads back, never a
/// panic or a hang; a pool fsck calls clean mounts, reads without errors
/// and takes new data; `fsck --repair` never panics or hangs, and a pool it
/// calls clean checks clean and mounts (counted like the untiered images).
#[test]
fn damaged_tiered_pools_never_panic_or_hang() {
    let dir = common::modelled_scratch();
    let t = build_tiered_image(dir.path());
    let map = regions(&t.pool);
    let staged = staged_entries(&t.pool, &map);
    let iterations = env_u64("MANYFS_CORRUPT_TIER_ITERS").unwrap_or(300) as usize;
    record_guarded_panics();
    let mut failures = Vec::new();
    let (mut noticed, mut mounted, mut refused, mut clean) = (0, 0, 0, 0);
    let mut repairs = Repairs::default();
    for i in 0..iterations {
        let mut rng = Rng::seeded(0x7469_6572 ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let (mut pool, mut device) = (t.pool.clone(), t.device.clone());
        let what = corrupt_tiered(&mut pool, &mut device, &map, &staged, &mut rng);
        std::fs::write(&t.pool_path, &pool).unwrap();
        std::fs::write(&t.data_path, &device).unwrap();
        let Ok(outcome) =
            exercise_damaged(i, t.pool_path.clone(), tier_opts(), &what, &mut failures)
        else {
            break;
        };
        if let Some(o) = outcome {
            noticed += usize::from(o.fsck_err || !o.fsck_clean);
            clean += usize::from(o.fsck_clean);
            mounted += usize::from(o.mount_ok);
            refused += usize::from(!o.mount_ok);
        }
        // The repair runs on a copy of the damaged pool, with the damaged
        // device (the exercise may have written to it).
        std::fs::write(&t.data_path, &device).unwrap();
        repairs.run(i, &pool, dir.path(), &what, &mut failures);
    }
    println!(
        "tiered damage: {iterations} pools, fsck noticed {noticed}, clean {clean}; \
         {mounted} mounted, {refused} refused; repair: {}/{} damaged pools clean after --repair",
        repairs.clean, repairs.damaged
    );
    assert_no_failures(&failures);
    // The damage is noticed, and some of it is survived.
    assert!(noticed > iterations / 4, "fsck noticed {noticed}");
    assert!(
        mounted > 0 && refused > 0,
        "{mounted} mounted, {refused} refused"
    );
    assert!(repairs.damaged > 0, "nothing for the repair to do");
}

/// A directory entry left from before its inode number was freed and
/// reused (the entry that removed the name is lost: its kind damaged, its
/// CRC recomputed) names another file, which its current name reaches
/// first: fsck reports the stale name (whatever the order of the walk)
/// instead of taking it for a hard link, and `--repair` leaves a clean pool
/// whose directory lists only names that resolve.
#[test]
fn a_stale_name_of_a_reused_inode_number_is_found() {
    let dir = common::modelled_scratch();
    let pool = dir.path().join("stale");
    let fs = mkfs_plain(&pool);
    fs.create_dir("/d").unwrap();
    fs.write("/d/old", b"old").unwrap();
    let old = fs.metadata("/d/old").unwrap().ino;
    fs.remove_file("/d/old").unwrap();
    fs.sync().unwrap();
    let reused = (0..200)
        .find(|i| {
            fs.write(format!("/new{i}"), b"new").unwrap();
            fs.metadata(format!("/new{i}")).unwrap().ino == old
        })
        .expect("the freed inode number is reused");
    fs.unmount().unwrap();
    let mut img = std::fs::read(&pool).unwrap();
    // The removal's entry: a DirRemove of `old`, retyped to no known kind.
    let at = (0..img.len() / 64)
        .map(|s| s * 64)
        .find(|&off| {
            le_u32(&img, off + 60) == COMMIT_MAGIC
                && matches!(
                    manyfs::format::Entry::decode(&img[off..off + 64 * usize::from(img[off + 1]).clamp(1, 10)]),
                    Some((manyfs::format::Entry::DirRemove { ref name, .. }, _)) if name == b"old"
                )
        })
        .expect("the removal's entry");
    let len = 64 * usize::from(img[at + 1]);
    img[at] = 0x13;
    fix_crc(&mut img, &entry_checked("entry", at, len));
    std::fs::write(&pool, &img).unwrap();
    let report = manyfs::fsck::check(&pool).unwrap();
    assert!(
        report
            .errors
            .iter()
            .any(|e| e.contains("expects generation")),
        "new{reused} and the stale /d/old both name inode {old}: {:?}",
        report.errors
    );
    let rep = manyfs::fsck::repair::repair(&pool).unwrap();
    assert!(rep.is_clean(), "{:?}", rep.after.errors);
    let fs = Fs::mount(&pool, &MountOptions::default()).unwrap();
    for e in fs.read_dir("/d").unwrap() {
        let p = Path::new("/d").join(&e.name);
        assert!(
            fs.symlink_metadata(&p).is_ok(),
            "{} listed, not found",
            p.display()
        );
    }
    assert_eq!(fs.read(format!("/new{reused}")).unwrap(), b"new");
}
