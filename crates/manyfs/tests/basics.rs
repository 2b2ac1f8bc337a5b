//! Namespace and file behaviour through the public API, and across remounts.

mod common;

use common::{fresh, open_rw};
use manyfs::{Error, Fs, MountOptions, OpenOptions};
use std::path::PathBuf;

fn remount(fs: Fs, pool: &std::path::Path) -> Fs {
    fs.unmount().unwrap();
    Fs::mount(pool, &MountOptions::default()).unwrap()
}

#[test]
fn files_and_directories_survive_remount() {
    let (_d, pool, fs) = fresh(64 << 20);
    fs.create_dir_all("/a/b/c").unwrap();
    fs.write("/a/b/c/hello", b"hello world").unwrap();
    fs.write("/a/top", &vec![7u8; 100_000]).unwrap();
    fs.hard_link("/a/top", "/a/b/link").unwrap();
    fs.symlink("/a/b/c/hello", "/sym").unwrap();
    fs.rename("/a/b/c", "/moved").unwrap();
    let f = OpenOptions::new().write(true).open(&fs, "/a/top").unwrap();
    f.set_len(5000).unwrap();
    f.write_at(b"tail", 9000).unwrap();
    drop(f);
    assert!(
        manyfs::fsck::verify(&fs).unwrap().is_empty(),
        "{:?}",
        manyfs::fsck::verify(&fs)
    );
    let fs = remount(fs, &pool);
    assert!(
        manyfs::fsck::verify(&fs).unwrap().is_empty(),
        "{:?}",
        manyfs::fsck::verify(&fs)
    );
    assert_eq!(fs.read("/moved/hello").unwrap(), b"hello world");
    let top = fs.read("/a/top").unwrap();
    assert_eq!(top.len(), 9004);
    assert!(top[..5000].iter().all(|&b| b == 7));
    assert!(top[5000..9000].iter().all(|&b| b == 0));
    assert_eq!(&top[9000..], b"tail");
    assert_eq!(fs.metadata("/a/b/link").unwrap().nlink, 2);
    assert_eq!(fs.read_link("/sym").unwrap(), PathBuf::from("/a/b/c/hello"));
    assert!(matches!(fs.read("/sym"), Err(Error::NotFound(_))));
    let names = common::dir_names(&fs, "/");
    assert_eq!(names, ["a", "moved", "sym"]);
    assert_eq!(fs.metadata("/a").unwrap().nlink, 3);
    assert!(
        matches!(manyfs::fsck::check(&pool), Err(Error::Busy { .. })),
        "fsck refuses a mounted pool"
    );
    drop(fs);
    let report = manyfs::fsck::check(&pool).unwrap();
    assert!(report.is_clean(), "{:?}", report.errors);
}

#[test]
fn posix_errors() {
    let (_d, _pool, fs) = fresh(16 << 20);
    fs.create_dir("/d").unwrap();
    fs.write("/d/f", b"x").unwrap();
    assert!(matches!(fs.create_dir("/d"), Err(Error::Exists(_))));
    assert!(matches!(fs.remove_dir("/d"), Err(Error::NotEmpty(_))));
    assert!(matches!(fs.remove_file("/d"), Err(Error::IsDir(_))));
    assert!(matches!(fs.remove_dir("/d/f"), Err(Error::NotDir(_))));
    assert!(matches!(fs.create_dir("/d/f/x"), Err(Error::NotDir(_))));
    assert!(matches!(fs.read("/nope"), Err(Error::NotFound(_))));
    let long = format!("/{}", "n".repeat(256));
    assert!(matches!(fs.write(&long, b""), Err(Error::NameTooLong(_))));
    assert!(matches!(
        fs.rename("/d", "/d/sub"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&fs, "/d/f"),
        Err(Error::Exists(_))
    ));
    fs.remove_file("/d/f").unwrap();
    fs.remove_dir("/d").unwrap();
    assert!(fs.read_dir("/").unwrap().is_empty());
}

#[test]
fn overwrites_run_in_bounded_space() {
    let (_d, pool, fs) = fresh(32 << 20);
    let f = open_rw(&fs, "/f");
    let free_before = fs.statfs().free_blocks;
    // 20k overwrites of 16 pages would need far more log pages than the pool
    // holds unless dead log pages are collected.
    for i in 0..20_000u64 {
        f.write_at(&[(i % 251) as u8; 4096], (i % 16) * 4096)
            .unwrap();
        // In file mode superseded entries are released by syncs (the
        // background commit, here explicit).
        if i % 1000 == 999 {
            fs.sync().unwrap();
        }
    }
    fs.sync().unwrap();
    let free_after = fs.statfs().free_blocks;
    assert!(
        free_before - free_after < 64,
        "used {} blocks",
        free_before - free_after
    );
    assert!(manyfs::fsck::verify(&fs).unwrap().is_empty());
    drop(f);
    let fs = remount(fs, &pool);
    let data = fs.read("/f").unwrap();
    for p in 0..16u64 {
        let last = (0..20_000u64).filter(|i| i % 16 == p).max().unwrap();
        assert!(
            data[(p * 4096) as usize..][..4096]
                .iter()
                .all(|&b| b == (last % 251) as u8)
        );
    }
}

#[test]
fn small_appends_write_into_the_page_they_end_in() {
    let (_d, pool, fs) = fresh(32 << 20);
    let f = open_rw(&fs, "/log");
    let mut want = Vec::new();
    let record = |i: u64| vec![(i % 251) as u8 + 1; 100];
    f.append(&record(0)).unwrap();
    want.extend(record(0));
    // Blocks waiting for a sync before reuse count as used here.
    let used_blocks = || {
        fs.stats()
            .members
            .iter()
            .map(|m| m.used_blocks)
            .sum::<u64>()
    };
    let used_before = used_blocks();
    // 39 more records fill the page to 4000 bytes. Copied on write, each
    // would take a new block (the old ones free only at the next sync);
    // in place they take none, their entries at most a log page.
    for i in 1..40u64 {
        f.append(&record(i)).unwrap();
        want.extend(record(i));
    }
    let used = used_blocks() - used_before;
    assert!(used <= 1, "40 appends into one page used {used} blocks");
    assert_eq!(fs.read("/log").unwrap(), want);
    // Past the page: a new block, the old page's end stays.
    f.append(&[0xee; 300]).unwrap();
    want.extend([0xee; 300]);
    assert_eq!(fs.read("/log").unwrap(), want);
    assert!(manyfs::fsck::verify(&fs).unwrap().is_empty());
    // Growing past the end shows zeros, by set_len and by a write past a
    // hole, before and after a remount.
    f.set_len(want.len() as u64 + 5000).unwrap();
    want.resize(want.len() + 5000, 0);
    f.append(&[0x11; 10]).unwrap();
    want.extend([0x11; 10]);
    let hole_at = want.len() as u64 + 9000;
    f.write_at(&[0x22; 5], hole_at).unwrap();
    want.resize(hole_at as usize, 0);
    want.extend([0x22; 5]);
    assert_eq!(fs.read("/log").unwrap(), want);
    drop(f);
    let fs = remount(fs, &pool);
    assert_eq!(fs.read("/log").unwrap(), want);
    assert!(manyfs::fsck::verify(&fs).unwrap().is_empty());
    drop(fs);
    let report = manyfs::fsck::check(&pool).unwrap();
    assert!(report.is_clean(), "{:?}", report.errors);
}

#[test]
fn full_pool_gives_enospc_and_recovers_after_delete() {
    let (_d, pool, fs) = fresh(4 << 20);
    let mut n = 0;
    let err = loop {
        match fs.write(format!("/f{n}"), &vec![1u8; 64 << 10]) {
            Ok(()) => n += 1,
            Err(e) => break e,
        }
    };
    assert_eq!(err.errno(), libc::ENOSPC, "{err}");
    for i in 0..n {
        fs.remove_file(format!("/f{i}")).unwrap();
    }
    let _ = fs.remove_file(format!("/f{n}"));
    fs.write("/again", &vec![2u8; 64 << 10]).unwrap();
    assert!(
        manyfs::fsck::verify(&fs).unwrap().is_empty(),
        "{:?}",
        manyfs::fsck::verify(&fs)
    );
    let fs = remount(fs, &pool);
    assert_eq!(fs.read("/again").unwrap(), vec![2u8; 64 << 10]);
}

#[test]
fn unlinked_open_file_lives_until_closed() {
    let (_d, _pool, fs) = fresh(16 << 20);
    let f = open_rw(&fs, "/tmp");
    f.write_at(b"still here", 0).unwrap();
    let free = fs.statfs().free_blocks;
    fs.remove_file("/tmp").unwrap();
    let mut buf = [0u8; 10];
    f.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"still here");
    drop(f);
    assert!(fs.statfs().free_blocks > free);
}

#[test]
fn second_mount_is_refused() {
    let (_d, pool, fs) = fresh(16 << 20);
    let err = Fs::mount(&pool, &MountOptions::default()).err().unwrap();
    assert!(matches!(err, Error::Busy { .. }), "{err}");
    drop(fs);
}

/// `Fs::close` returns with the pool's lock released, even while the
/// commit thread is checkpointing (a short commit interval keeps it busy);
/// with a handle still open it waits, then says so, and the pool stays
/// locked until that handle goes.
#[test]
fn close_releases_the_pool_at_once_unless_a_handle_is_open() {
    let mut opts = MountOptions::default();
    opts.commit_interval = std::time::Duration::from_millis(1);
    let (_d, pool, mut fs) = common::fresh_with(32 << 20, &opts);
    for round in 0..20u8 {
        let f = open_rw(&fs, "/f");
        for i in 0..64u64 {
            f.write_at(&[round; 4096], i * 4096).unwrap();
        }
        drop(f);
        let wait = std::time::Duration::from_secs(10);
        fs.close(wait).unwrap();
        let again = Fs::mount(&pool, &opts).unwrap();
        assert_eq!(again.read("/f").unwrap(), vec![round; 64 * 4096]);
        fs = again;
    }
    let f = open_rw(&fs, "/f");
    let err = fs.close(std::time::Duration::from_millis(50)).unwrap_err();
    assert!(matches!(err, Error::StillOpen { .. }), "{err}");
    assert_eq!(err.errno(), libc::EBUSY);
    assert!(matches!(Fs::mount(&pool, &opts), Err(Error::Busy { .. })));
    drop(f);
    Fs::mount(&pool, &opts).unwrap();
}

#[test]
fn truncate_chmod_and_create_unlink_loops_run_in_bounded_space() {
    let (_d, pool, fs) = fresh(32 << 20);
    fs.create_dir("/dir").unwrap();
    let f = open_rw(&fs, "/f");
    f.write_at(&vec![5u8; 64 << 10], 0).unwrap();
    let free_before = fs.statfs().free_blocks;
    for i in 0..3000u64 {
        f.set_len(64 << 10).unwrap();
        f.set_len((64 << 10) - 100 - (i % 4000)).unwrap();
        fs.set_permissions("/f", 0o600 + (i % 8) as u32).unwrap();
        fs.write(format!("/dir/n{}", i % 7), b"x").unwrap();
        fs.remove_file(format!("/dir/n{}", (i + 3) % 7)).ok();
    }
    let used = free_before - fs.statfs().free_blocks;
    assert!(used < 200, "logs grew by {used} blocks");
    assert!(
        manyfs::fsck::verify(&fs).unwrap().is_empty(),
        "{:?}",
        manyfs::fsck::verify(&fs)
    );
    let size = f.metadata().unwrap().size;
    let names = common::dir_names(&fs, "/dir");
    drop(f);
    let fs = remount(fs, &pool);
    assert_eq!(fs.metadata("/f").unwrap().size, size);
    assert_eq!(fs.metadata("/f").unwrap().mode, 0o600 + (2999 % 8));
    let data = fs.read("/f").unwrap();
    assert!(data.iter().all(|&b| b == 5));
    let again = common::dir_names(&fs, "/dir");
    assert_eq!(names, again);
}

#[test]
fn allocate_extends_but_never_shrinks() {
    let (_d, _pool, fs) = fresh(16 << 20);
    let f = open_rw(&fs, "/f");
    f.write_at(b"abc", 0).unwrap();
    f.allocate(0, 10_000).unwrap();
    assert_eq!(f.metadata().unwrap().size, 10_000);
    f.allocate(0, 5).unwrap();
    assert_eq!(f.metadata().unwrap().size, 10_000);
    let mut buf = vec![1u8; 10_000];
    f.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf[..3], b"abc");
    assert!(buf[3..].iter().all(|&b| b == 0));
    // The root belongs to the user who made the pool.
    // SAFETY: getuid has no preconditions.
    assert_eq!(fs.metadata("/").unwrap().uid, unsafe { libc::getuid() });
}

/// A zero-filled pool (`MkfsOptions::zero_fill`) is an ordinary pool: it
/// has no hole, mounts, keeps files across a remount and checks clean.
#[test]
fn zero_filled_pool_works_like_any_other() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let pool = dir.path().join("pool");
    let fs = Fs::mkfs(
        &pool,
        &{
            let mut mk = manyfs::MkfsOptions::default();
            mk.size = 16 << 20;
            mk.zero_fill = true;
            mk
        },
        &MountOptions::default(),
    )
    .unwrap();
    let md = std::fs::metadata(&pool).unwrap();
    assert_eq!(md.len(), 16 << 20);
    assert!(md.blocks() * 512 >= md.len(), "the pool has holes");
    fs.write("/f", &[5u8; 10_000]).unwrap();
    let fs = remount(fs, &pool);
    assert_eq!(fs.read("/f").unwrap(), vec![5u8; 10_000]);
    fs.unmount().unwrap();
    assert!(manyfs::fsck::check(&pool).unwrap().is_clean());
}

/// `srl-array` reserves a lock word per segment of the whole pool for
/// every file: a pool too large for that is refused with a clear error at
/// mkfs and at mount, never an aborted allocation; larger segments or
/// `srl-tree` work.
#[test]
fn srl_array_is_refused_where_its_lock_words_would_not_fit() {
    use manyfs::{LockKind, MkfsOptions};
    let dir = tempfile::tempdir().unwrap();
    let pool = dir.path().join("pool");
    let mkfs = {
        let mut mk = MkfsOptions::default();
        mk.size = 4 << 30;
        mk
    };
    let array = {
        let mut mo = MountOptions::default();
        mo.lock = LockKind::SrlArray;
        mo
    };
    match Fs::mkfs(&pool, &mkfs, &array) {
        Err(Error::InvalidArgument(m)) => {
            assert!(m.contains("srl-tree") && m.contains("8192"), "{m}")
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("a 4 GiB pool with 4 KiB srl-array segments was accepted"),
    }
    assert!(!pool.exists(), "a refused mkfs leaves no pool behind");
    // The same pool made with the default lock, then mounted with srl-array.
    Fs::mkfs(&pool, &mkfs, &MountOptions::default())
        .unwrap()
        .unmount()
        .unwrap();
    assert!(matches!(
        Fs::mount(&pool, &array),
        Err(Error::InvalidArgument(_))
    ));
    let wide = {
        let mut mo = array;
        mo.segment_size = 8192;
        mo
    };
    let fs = Fs::mount(&pool, &wide).unwrap();
    fs.write("/f", b"ok").unwrap();
    assert_eq!(fs.read("/f").unwrap(), b"ok");
}
