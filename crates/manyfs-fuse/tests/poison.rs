//! A panic in a request handler shuts the mount down: later requests answer
//! EIO, and the next mount recovers the pool from media with everything
//! written before the panic.

mod common;

use std::io::{Read, Write};
use std::os::unix::fs::FileExt;

use common::{PROGRESS_LIMIT, Scratch, fuse_available, retry_busy, wait_until, within};
use manyfs::{Fs, MountOptions};

fn eio<T: std::fmt::Debug>(r: std::io::Result<T>, what: &str) {
    let e = r.expect_err(what);
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{what}: {e}");
}

#[test]
fn handler_panic_shuts_the_mount_down_and_remount_recovers() {
    if !fuse_available("handler_panic_shuts_the_mount_down_and_remount_recovers") {
        return;
    }
    let s = Scratch::new();
    let m = s.mount(&[]);
    let mnt = s.mnt.clone();
    let synced = vec![0x5au8; 300_000];
    let mut f = std::fs::File::create(mnt.join("synced")).unwrap();
    f.write_all(&synced).unwrap();
    f.sync_all().unwrap();
    std::fs::create_dir(mnt.join("dir")).unwrap();
    std::fs::write(mnt.join("dir/unsynced"), b"written, not fsynced").unwrap();
    let keep_open = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(mnt.join("synced"))
        .unwrap();

    // The probe (test builds only) panics inside `create`.
    eio(
        std::fs::File::create(mnt.join(manyfs_fuse::poison::TEST_PANIC_NAME)),
        "create of the panic probe",
    );
    // Shut down before the EIO went out (the panic hook does it) ...
    let why = m.poisoned().expect("mount shut down").to_string();
    assert!(why.contains("`create`"), "{why}");
    // ... and counted once the handler's unwinding is over.
    assert!(wait_until(PROGRESS_LIMIT, || m.stats().handler_panics() == 1));

    // Every later request that could change state answers EIO, and so do
    // reads (they would walk the same, possibly half-updated, DRAM state).
    eio(keep_open.write_at(b"after", 0), "write on an open file");
    eio(keep_open.sync_all(), "fsync");
    eio(std::fs::File::create(mnt.join("new")), "create");
    eio(std::fs::create_dir(mnt.join("d2")), "mkdir");
    eio(std::fs::remove_file(mnt.join("dir/unsynced")), "unlink");
    eio(
        std::fs::rename(mnt.join("synced"), mnt.join("moved")),
        "rename",
    );
    let mut buf = [0u8; 16];
    eio(keep_open.read_at(&mut buf, 0), "read on an open file");
    // Closing files still works, so the mount can go.
    drop((keep_open, f));

    let err = within(PROGRESS_LIMIT, "unmounting a shut-down mount", move || {
        m.unmount()
    })
    .expect_err("the unmount reports the shutdown");
    assert!(err.to_string().contains("panicked"), "{err}");
    assert!(!common::is_mounted(&s.mnt), "still mounted");

    // The pool is clean for fsck, and the next mount has everything that
    // was synced before the panic.
    s.fsck();
    let fs = retry_busy(|| Fs::mount(&s.pool, &MountOptions::default())).unwrap();
    assert_eq!(fs.read("/synced").unwrap(), synced);
    // Not fsynced, and the shut-down mount refused its final sync: in
    // `file` mode (docs/guarantees.md) it is there whole only if the
    // background commit made it durable before the panic, else absent.
    match fs.read("/dir/unsynced") {
        Ok(data) => assert_eq!(data, b"written, not fsynced"),
        Err(e) => assert!(matches!(e, manyfs::Error::NotFound(_)), "{e}"),
    }
    assert!(fs.metadata("/new").is_err());
    assert!(
        fs.metadata(format!("/{}", manyfs_fuse::poison::TEST_PANIC_NAME))
            .is_err()
    );
    fs.unmount().unwrap();

    // And a FUSE mount of it serves again.
    let m = s.mount(&[]);
    let mut got = Vec::new();
    std::fs::File::open(s.mnt.join("synced"))
        .unwrap()
        .read_to_end(&mut got)
        .unwrap();
    assert_eq!(got, synced);
    std::fs::write(s.mnt.join("new"), b"ok").unwrap();
    assert!(m.poisoned().is_none());
    common::unmount(m);
    s.fsck();
}

#[test]
fn pool_truncated_under_a_fuse_mount_gives_eio_and_unmounts() {
    if !fuse_available("pool_truncated_under_a_fuse_mount_gives_eio_and_unmounts") {
        return;
    }
    let s = Scratch::with_size(16 << 20);
    let m = s.mount(&[]);
    let big = vec![7u8; 11 << 20];
    std::fs::write(s.mnt.join("big"), &big).unwrap();
    std::fs::write(s.mnt.join("small"), b"small").unwrap();
    // Another process truncates the pool to half.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&s.pool)
        .unwrap()
        .set_len(8 << 20)
        .unwrap();
    // Part of /big lay in the lost half: reading it is an error, not a
    // SIGBUS that kills the serving process (this test process).
    eio(
        std::fs::read(s.mnt.join("big")),
        "read across the lost half",
    );
    eio(
        std::fs::write(s.mnt.join("small"), b"later"),
        "write after the fault",
    );
    eio(
        std::fs::File::create(s.mnt.join("new")),
        "create after the fault",
    );
    let err = within(PROGRESS_LIMIT, "unmounting", move || m.unmount())
        .expect_err("the unmount reports the failed media");
    assert!(err.to_string().contains("truncated"), "{err}");
    assert!(!common::is_mounted(&s.mnt), "still mounted");
}
