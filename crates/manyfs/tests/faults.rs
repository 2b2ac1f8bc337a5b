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
    assert!(fs.verify().unwrap().is_empty(), "{:?}", fs.verify());
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

impl manyfs::media::PersistObserver for FailingSync {
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
    let fs = Fs::mount_observed(&pool, &MountOptions::default(), failing.clone()).unwrap();
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
    let err = Fs::mkfs(
        &mnt.join("pool"),
        &MkfsOptions {
            size: 64 << 20,
            ..Default::default()
        },
        &MountOptions::default(),
    )
    .err()
    .expect("mkfs of a pool larger than the file system must fail");
    assert_eq!(err.errno(), libc::ENOSPC, "{err}");
    assert!(
        !mnt.join("pool").exists(),
        "the failed pool file is removed"
    );
    let fits = Fs::mkfs(
        &mnt.join("pool"),
        &MkfsOptions {
            size: 4 << 20,
            ..Default::default()
        },
        &MountOptions::default(),
    );
    assert!(fits.is_ok(), "{:?}", fits.err());
    drop(fits);
    let _ = std::process::Command::new("umount").arg(&mnt).status();
}
