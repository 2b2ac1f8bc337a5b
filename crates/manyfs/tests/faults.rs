//! Faults: a full pool under concurrent writers, and failing durability points.

mod common;

use common::{fresh, open_rw};
use manyfs::{Error, Fs, MkfsOptions, MountOptions, OpenOptions};

#[test]
fn full_pool_under_concurrent_writers() {
    let (_dir, pool, fs) = fresh(8 << 20);
    let shared = open_rw(&fs, "/shared");
    let nospc = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let (fs, shared, nospc) = (&fs, &shared, &nospc);
            s.spawn(move || {
                let own = OpenOptions::new()
                    .write(true)
                    .create(true)
                    .open(fs, format!("/t{t}"))
                    .unwrap();
                for i in 0..4000u64 {
                    let r = if i % 2 == 0 {
                        own.write_at(&[t as u8; 8192], i * 8192)
                    } else {
                        shared.write_at(&[t as u8; 4096], (t * 4000 + i) * 4096)
                    };
                    match r {
                        Ok(_) => {}
                        Err(e) => {
                            assert_eq!(e.errno(), libc::ENOSPC, "{e}");
                            nospc.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                }
            });
        }
    });
    assert!(
        nospc.load(std::sync::atomic::Ordering::Relaxed) > 0,
        "the pool never filled"
    );
    assert!(
        manyfs::fsck::verify(&fs).unwrap().is_empty(),
        "{:?}",
        manyfs::fsck::verify(&fs)
    );
    let free_full = fs.statfs().free_blocks;
    for t in 0..8 {
        fs.remove_file(format!("/t{t}")).unwrap();
    }
    assert!(
        fs.statfs().free_blocks > free_full + 512,
        "delete freed space"
    );
    // Writing works again, and everything is consistent after a remount.
    shared.write_at(&[9u8; 65536], 0).unwrap();
    drop(shared);
    fs.unmount().unwrap();
    let report = manyfs::fsck::check(&pool).unwrap();
    assert!(report.is_clean(), "{:?}", report.errors);
    let fs = Fs::mount(&pool, &MountOptions::default()).unwrap();
    assert_eq!(&fs.read("/shared").unwrap()[..65536], &[9u8; 65536][..]);
}

/// Makes every durability point fail, as a failing `msync` would, once
/// armed.
#[derive(Default)]
struct FailingSync(std::sync::atomic::AtomicBool);

impl manyfs::diag::PersistObserver for FailingSync {
    fn on_sync(&self, _off: u64, _len: usize) -> std::io::Result<()> {
        if self.0.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(std::io::Error::from_raw_os_error(libc::EIO));
        }
        Ok(())
    }
}

#[test]
fn failed_sync_is_reported_and_later_writes_refused() {
    let (_dir, pool, fs) = fresh(8 << 20);
    drop(fs);
    let failing = std::sync::Arc::new(FailingSync::default());
    let fs =
        manyfs::diag::mount_observed(&pool, &MountOptions::default(), failing.clone()).unwrap();
    let f = open_rw(&fs, "/f");
    f.write_at(b"before", 0).unwrap();
    f.sync_all().unwrap();
    failing.0.store(true, std::sync::atomic::Ordering::Relaxed);
    f.write_at(b"during", 0).unwrap();
    let err = f.sync_all().unwrap_err();
    assert_eq!(err.errno(), libc::EIO, "{err}");
    assert!(err.to_string().contains("msync"), "{err}");
    let err = f.write_at(b"after", 0).unwrap_err();
    assert_eq!(err.errno(), libc::EIO, "{err}");
    assert!(matches!(fs.create_dir("/d"), Err(Error::Io { .. })));
    // Reads still work.
    let mut buf = [0u8; 6];
    f.read_exact_at(&mut buf, 0).unwrap();
}

#[test]
fn mkfs_on_a_full_file_system_fails_cleanly() {
    // A pool larger than the space under it must be refused at mkfs, not
    // crash later with SIGBUS when a store hits an unbacked page. The test
    // mounts its own 8 MiB tmpfs (it needs root, as CI has).
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("small");
    std::fs::create_dir(&mnt).unwrap();
    let status = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=8m", "manyfs-test"])
        .arg(&mnt)
        .status()
        .unwrap();
    assert!(status.success(), "mounting a small tmpfs needs root");
    let mkfs = |size: u64| {
        Fs::mkfs(
            &mnt.join("pool"),
            &{
                let mut mk = MkfsOptions::default();
                mk.size = size;
                mk
            },
            &MountOptions::default(),
        )
    };
    let err = mkfs(64 << 20)
        .err()
        .expect("mkfs of a pool larger than the file system must fail");
    assert_eq!(err.errno(), libc::ENOSPC, "{err}");
    assert!(
        !mnt.join("pool").exists(),
        "the failed pool file is removed"
    );
    let fits = mkfs(4 << 20);
    assert!(fits.is_ok(), "{:?}", fits.err());
    drop(fits);
    let _ = std::process::Command::new("umount").arg(&mnt).status();
}

/// Write a file of `len` bytes of `byte` (most of a small pool, so part of
/// it lies in the pool's second half).
fn fill(fs: &Fs, path: &str, len: usize, byte: u8) {
    let f = open_rw(fs, path);
    for off in (0..len).step_by(1 << 20) {
        f.write_all_at(&vec![byte; (1 << 20).min(len - off)], off as u64)
            .unwrap();
    }
    f.sync_all().unwrap();
}

fn truncate_pool(pool: &std::path::Path, len: u64) {
    // Another process would do the same: the pool's flock does not stop
    // truncate(2).
    std::fs::OpenOptions::new()
        .write(true)
        .open(pool)
        .unwrap()
        .set_len(len)
        .unwrap();
}

#[test]
fn pool_truncated_under_the_mount_gives_eio_not_sigbus() {
    let (_dir, pool, fs) = fresh(16 << 20);
    fill(&fs, "/big", 11 << 20, 7);
    let small = open_rw(&fs, "/small");
    small.write_all_at(b"kept", 0).unwrap();
    truncate_pool(&pool, 8 << 20);
    // Reading the part of /big that lay in the lost half faults; the
    // SIGBUS is absorbed and the read fails instead of killing us.
    let big = open_rw(&fs, "/big");
    let mut buf = vec![0u8; 1 << 20];
    let mut failed = None;
    for off in (0..11u64 << 20).step_by(1 << 20) {
        if let Err(e) = big.read_exact_at(&mut buf, off) {
            failed = Some(e);
            break;
        }
        assert!(buf.iter().all(|&b| b == 7), "read zeros as data at {off}");
    }
    let err = failed.expect("some of /big lay in the truncated half");
    assert_eq!(err.errno(), libc::EIO, "{err}");
    assert!(err.to_string().contains("truncated"), "{err}");
    assert!(fs.has_failed());
    // From now on: no changes, no syncs.
    let err = small.write_at(b"later", 0).unwrap_err();
    assert_eq!(err.errno(), libc::EIO, "{err}");
    assert!(matches!(fs.create_dir("/d"), Err(Error::Io { .. })));
    assert_eq!(small.sync_all().unwrap_err().errno(), libc::EIO);
    drop((big, small));
    assert_eq!(fs.unmount().unwrap_err().errno(), libc::EIO);
    // The shrunken pool is refused at the next mount, not mounted half.
    let err = Fs::mount(&pool, &MountOptions::default())
        .err()
        .expect("a pool shorter than its geometry must not mount");
    assert!(err.to_string().contains("shorter than the pool's"), "{err}");
}

#[test]
fn pool_truncated_is_found_at_the_next_sync() {
    let (_dir, pool, fs) = fresh(16 << 20);
    let f = open_rw(&fs, "/f");
    f.write_all_at(b"before", 0).unwrap();
    f.sync_all().unwrap();
    truncate_pool(&pool, 8 << 20);
    // No access faulted yet (the file's page is in the first half), but
    // the durability point checks the file's size.
    let err = f.sync_all().unwrap_err();
    assert_eq!(err.errno(), libc::EIO, "{err}");
    assert!(err.to_string().contains("shrank"), "{err}");
    assert_eq!(f.write_at(b"after", 0).unwrap_err().errno(), libc::EIO);
}

/// A SIGBUS at an address outside every pool mapping still kills the
/// process (the handler passes it on): checked in a child process, this
/// test's own executable started again.
#[test]
fn sigbus_outside_a_pool_still_kills() {
    const CHILD: &str = "MANYFS_TEST_FOREIGN_SIGBUS";
    if std::env::var_os(CHILD).is_some() {
        // A mounted pool, so the handler is installed.
        let (_dir, _pool, _fs) = fresh(8 << 20);
        let dir = tempfile::tempdir().unwrap();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.path().join("other"))
            .unwrap();
        file.set_len(8192).unwrap();
        use std::os::fd::AsRawFd;
        // SAFETY: a fresh shared mapping of a file we own; checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                8192,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        file.set_len(0).unwrap();
        // SAFETY: `p` is a live 8 KiB mapping; the file behind it is gone,
        // so this load raises SIGBUS, which is the point.
        let v = unsafe { std::ptr::read_volatile(p.cast::<u8>()) };
        panic!("the load past end of file returned {v} instead of SIGBUS");
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "sigbus_outside_a_pool_still_kills",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .output()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGBUS),
        "child: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}
