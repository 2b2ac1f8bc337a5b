//! `checkpoint=background` vs `checkpoint=blocking`: whether a write waits
//! for a full sync (a checkpoint) that is in progress.
//!
//! An observer holds the checkpoint inside its first barrier (the `msync`
//! of the pool) until the test lets it go; meanwhile another thread writes.

mod common;

use manyfs::diag::PersistObserver;
use manyfs::{Checkpoint, Fs, MountOptions};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Blocks the first durability point it sees after `armed` until `release`
/// has a message; says on `entered` that it got there.
struct HoldSync {
    armed: std::sync::atomic::AtomicBool,
    entered: Mutex<mpsc::Sender<()>>,
    release: Mutex<mpsc::Receiver<()>>,
}

impl PersistObserver for HoldSync {
    fn on_sync(&self, _off: u64, _len: usize) -> std::io::Result<()> {
        if self.armed.swap(false, std::sync::atomic::Ordering::AcqRel) {
            self.entered.lock().unwrap().send(()).unwrap();
            self.release.lock().unwrap().recv().unwrap();
        }
        Ok(())
    }
}

/// Whether a write made while a checkpoint is held inside its barrier
/// finishes before the checkpoint is released; the write's data is there
/// afterwards either way.
fn write_finishes_during_checkpoint(mode: Checkpoint) -> bool {
    let dir = tempfile::tempdir().unwrap();
    let pool = dir.path().join("pool");
    let opts = {
        let mut mo = MountOptions::default();
        mo.commit_interval = Duration::ZERO;
        mo.checkpoint = mode;
        mo
    };
    common::mkfs(&pool, 8 << 20, &opts).unmount().unwrap();
    let (entered_tx, entered_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel();
    let hold = Arc::new(HoldSync {
        armed: false.into(),
        entered: Mutex::new(entered_tx),
        release: Mutex::new(release_rx),
    });
    let fs = Arc::new(manyfs::diag::mount_observed(&pool, &opts, hold.clone()).unwrap());
    let f = common::open_rw(&fs, "/f");
    f.write_all_at(&[1u8; 4096], 0).unwrap();
    hold.armed.store(true, std::sync::atomic::Ordering::Release);
    let checkpoint = {
        let fs = fs.clone();
        std::thread::spawn(move || fs.sync())
    };
    entered_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the checkpoint reached its barrier");
    let (done_tx, done_rx) = mpsc::channel();
    let writer = std::thread::spawn(move || {
        f.write_all_at(&[2u8; 4096], 4096).unwrap();
        done_tx.send(()).unwrap();
        f
    });
    let finished = done_rx.recv_timeout(Duration::from_secs(2)).is_ok();
    release_tx.send(()).unwrap();
    checkpoint.join().unwrap().unwrap();
    let f = writer.join().unwrap();
    let mut back = vec![0u8; 8192];
    f.read_exact_at(&mut back, 0).unwrap();
    assert!(back[..4096].iter().all(|&b| b == 1));
    assert!(back[4096..].iter().all(|&b| b == 2));
    drop(f);
    Arc::try_unwrap(fs).ok().unwrap().unmount().unwrap();
    finished
}

#[test]
fn background_checkpoints_do_not_stop_writers() {
    assert!(write_finishes_during_checkpoint(Checkpoint::Background));
}

#[test]
fn blocking_checkpoints_hold_writers_until_done() {
    assert!(!write_finishes_during_checkpoint(Checkpoint::Blocking));
}

/// Appends to one sub-log racing checkpoints that each mark many of its
/// pages (a checkpoint lets the appender in between runs of marked pages):
/// every record is there after a remount, in order, and fsck is clean.
#[test]
fn appends_racing_checkpoints_that_mark_many_pages_survive_remount() {
    const RECORDS: u64 = 20_000;
    const RECORD: usize = 100;
    let opts = {
        let mut mo = MountOptions::default();
        mo.commit_interval = Duration::ZERO;
        mo
    };
    let (_dir, pool, fs) = common::fresh_with(64 << 20, &opts);
    let record = |i: u64| {
        let mut r = [0u8; RECORD];
        for (j, b) in r.iter_mut().enumerate() {
            *b = (i as usize * 31 + j) as u8;
        }
        r
    };
    let done = std::sync::atomic::AtomicBool::new(false);
    let syncs = std::thread::scope(|s| {
        let syncer = s.spawn(|| {
            let mut n = 0u32;
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                // Long enough between checkpoints for a thousand appends
                // or more, i.e. dozens of log pages to mark.
                std::thread::sleep(Duration::from_millis(20));
                fs.sync().unwrap();
                n += 1;
            }
            n
        });
        // One CPU: every append goes to one sub-log.
        common::pin_to_an_allowed_cpu();
        let f = common::open_rw(&fs, "/appended");
        for i in 0..RECORDS {
            f.write_all_at(&record(i), i * RECORD as u64).unwrap();
        }
        f.sync_all().unwrap();
        done.store(true, std::sync::atomic::Ordering::Release);
        syncer.join().unwrap()
    });
    assert!(syncs > 0, "no checkpoint ran during the appends");
    assert!(manyfs::fsck::verify(&fs).unwrap().is_empty());
    fs.unmount().unwrap();
    let report = manyfs::fsck::check(&pool).unwrap();
    assert!(report.is_clean(), "{:?}", report.errors);
    let fs = Fs::mount(&pool, &opts).unwrap();
    let back = fs.read("/appended").unwrap();
    assert_eq!(back.len() as u64, RECORDS * RECORD as u64);
    for (i, chunk) in back.chunks(RECORD).enumerate() {
        assert_eq!(chunk, &record(i as u64)[..], "record {i}");
    }
    fs.unmount().unwrap();
}

/// Extending writes each supersede the entry that set the size before
/// them, and a truncate to zero supersedes them all: each full sync
/// releases those references (many per log page, released together), and
/// the pages they kept are unlinked and freed again. What stays is the
/// truncates' own attribute entries, one per truncate, each keeping its
/// page until the file's log is compacted after 64 of them.
#[test]
fn extending_writes_and_truncates_give_their_log_pages_back_in_file_mode() {
    let opts = {
        let mut mo = MountOptions::default();
        mo.durability = manyfs::Durability::File;
        mo.commit_interval = Duration::ZERO;
        mo
    };
    let (_d, pool, fs) = common::fresh_with(64 << 20, &opts);
    let f = manyfs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .open(&fs, "/grown")
        .unwrap();
    fs.sync().unwrap();
    let base_pages = {
        let s = fs.stats();
        (s.inodes, s.log_pages, s.data_pages)
    }
    .1;
    let base_free = fs.statfs().free_blocks;
    // 64 attribute entries' pages, and slack.
    let bound = base_pages + 64 + 16;
    let mut most = 0;
    for round in 0..100u64 {
        for i in 0..500u64 {
            f.write_at(&[round as u8 + 1; 100], i * 100).unwrap();
        }
        assert_eq!(f.metadata().unwrap().len(), 50_000);
        f.set_len(0).unwrap();
        fs.sync().unwrap();
        // An append after the sync unlinks the pages its releases left
        // dead (their successors' footers are durable by then).
        f.write_at(b"x", 0).unwrap();
        fs.sync().unwrap();
        let pages = {
            let s = fs.stats();
            (s.inodes, s.log_pages, s.data_pages)
        }
        .1;
        most = most.max(pages);
        assert!(
            pages < bound,
            "round {round}: {pages} log pages (started with {base_pages})"
        );
        f.set_len(0).unwrap();
    }
    // 1,000 truncates were compacted away as they came: nothing grew.
    assert!(most < bound, "{most} log pages at most");
    fs.sync().unwrap();
    let free = fs.statfs().free_blocks;
    assert!(
        free + bound > base_free,
        "{} blocks not given back",
        base_free.saturating_sub(free)
    );
    assert!(
        manyfs::fsck::verify(&fs).unwrap().is_empty(),
        "{:?}",
        manyfs::fsck::verify(&fs)
    );
    drop(f);
    fs.unmount().unwrap();
    let fs = Fs::mount(&pool, &opts).unwrap();
    assert!(
        manyfs::fsck::verify(&fs).unwrap().is_empty(),
        "{:?}",
        manyfs::fsck::verify(&fs)
    );
    assert_eq!(fs.metadata("/grown").unwrap().len(), 0);
    fs.unmount().unwrap();
}

/// A page rewritten many times in `file` mode, with a commit interval far
/// longer than the test: the blocks its copies replaced make a checkpoint
/// due by themselves (`api/commit_thread.rs`), which frees them.
#[test]
fn rewrites_make_the_commit_thread_checkpoint_early() {
    let opts = {
        let mut mo = MountOptions::default();
        mo.durability = manyfs::Durability::File;
        mo.commit_interval = Duration::from_secs(600);
        mo
    };
    // 256 MiB: 9,000 rewrites are far from a quarter of the free blocks.
    let (_d, _pool, fs) = common::fresh_with(256 << 20, &opts);
    let f = common::open_rw(&fs, "/rewritten");
    // Not synced: until a checkpoint settles the page, each rewrite is a
    // copy into a new block, and the block it replaces waits for a sync.
    f.write_all_at(&[0u8; 4096], 0).unwrap();
    let used = |fs: &Fs| fs.stats().members[0].used_blocks;
    let syncs = |fs: &Fs| fs.stats().persist.full_syncs;
    let (used_before, syncs_before) = (used(&fs), syncs(&fs));
    for i in 0..9_000u32 {
        f.write_all_at(&[i as u8; 4096], 0).unwrap();
    }
    let start = std::time::Instant::now();
    while syncs(&fs) == syncs_before || used(&fs) >= used_before + 8_192 {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no checkpoint freed the replaced blocks ({} in use, {} before)",
            used(&fs),
            used_before
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut back = vec![0u8; 4096];
    f.read_exact_at(&mut back, 0).unwrap();
    assert!(back.iter().all(|&b| b == (8_999u32 as u8)));
    fs.unmount().unwrap();
}
