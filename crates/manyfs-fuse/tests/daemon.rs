//! The mount command (`manyfs mount`, here through the identical stand-alone
//! `manyfs-mount` binary): daemon mode, readiness, errors, signals.

mod common;

use std::fs;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;

const BIN: &str = env!("CARGO_BIN_EXE_manyfs-mount");

/// Run the mount command expecting failure; return its single stderr line.
fn mount_fails(args: &[&std::ffi::OsStr]) -> String {
    let out = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success(), "{args:?} should have failed");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr:?}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

#[test]
fn daemon_mode_returns_when_usable_then_fusermount_unmounts() {
    if !fuse_available("daemon_mode_returns_when_usable_then_fusermount_unmounts") {
        return;
    }
    require_tool("fusermount3");
    let s = Scratch::new();
    let _cleanup = Cleanup(s.mnt.clone());
    let out = Command::new(BIN)
        .arg(&s.pool)
        .arg(&s.mnt)
        .arg("-o")
        .arg("threads=2,lock=interval")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "mount failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // usable right away: no waiting
    assert!(is_mounted(&s.mnt));
    fs::write(s.mnt.join("hello.txt"), b"from the daemon").unwrap();
    assert_eq!(
        fs::read(s.mnt.join("hello.txt")).unwrap(),
        b"from the daemon"
    );

    // the pool is busy while the daemon has it
    let other = s.dir.path().join("other");
    fs::create_dir(&other).unwrap();
    let err = mount_fails(&[s.pool.as_os_str(), other.as_os_str()]);
    assert!(err.contains("in use"), "{err}");
    assert!(!is_mounted(&other));

    run_ok(Command::new("fusermount3").arg("-u").arg(&s.mnt));
    assert!(!is_mounted(&s.mnt));
    assert_eq!(read_back(&s.pool, "hello.txt"), b"from the daemon");
}

fn foreground(s: &Scratch, opts: &str) -> std::process::Child {
    let child = Command::new(BIN)
        .arg(&s.pool)
        .arg(&s.mnt)
        .arg("--foreground")
        .arg("-o")
        .arg(opts)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        wait_until(Duration::from_secs(20), || is_mounted(&s.mnt)),
        "foreground mount never appeared"
    );
    child
}

fn signal_and_wait(child: &mut std::process::Child, sig: i32) {
    let pid = i32::try_from(child.id()).unwrap();
    // SAFETY: kill(2) with a pid we spawned and a valid signal number.
    assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
    let mut status = None;
    assert!(
        wait_until(Duration::from_secs(20), || {
            status = child.try_wait().unwrap();
            status.is_some()
        }),
        "daemon did not exit after signal {sig}"
    );
    assert!(status.unwrap().success(), "exit status {status:?}");
}

#[test]
fn foreground_sigterm_and_sigint_unmount_cleanly_and_ro_refuses_writes() {
    if !fuse_available("foreground_sigterm_and_sigint_unmount_cleanly_and_ro_refuses_writes") {
        return;
    }
    let s = Scratch::new();
    let _cleanup = Cleanup(s.mnt.clone());

    let mut child = foreground(&s, "threads=3,durability=file");
    let data = pattern(3, 200_000);
    fs::write(s.mnt.join("data.bin"), &data).unwrap();
    signal_and_wait(&mut child, libc::SIGTERM);
    assert!(!is_mounted(&s.mnt));
    assert_eq!(read_back(&s.pool, "data.bin"), data);

    // read-only: reads work, every kind of change fails with EROFS
    let mut child = foreground(&s, "ro");
    assert_eq!(fs::read(s.mnt.join("data.bin")).unwrap(), data);
    for err in [
        fs::write(s.mnt.join("new"), b"x").unwrap_err(),
        fs::OpenOptions::new()
            .write(true)
            .open(s.mnt.join("data.bin"))
            .unwrap_err(),
        fs::create_dir(s.mnt.join("d")).unwrap_err(),
        fs::remove_file(s.mnt.join("data.bin")).unwrap_err(),
    ] {
        assert_eq!(err.raw_os_error(), Some(libc::EROFS), "{err}");
    }
    signal_and_wait(&mut child, libc::SIGINT);
    assert!(!is_mounted(&s.mnt));
    assert_eq!(read_back(&s.pool, "data.bin"), data);
}

/// SIGKILL the daemon while a writer is busy: the mount goes dead, is
/// unmounted, and the library's recovery brings back every file that was
/// fsynced, with a clean fsck.
#[test]
fn sigkill_mid_write_then_recovery_keeps_synced_data() {
    if !fuse_available("sigkill_mid_write_then_recovery_keeps_synced_data") {
        return;
    }
    let s = Scratch::new();
    let _cleanup = Cleanup(s.mnt.clone());
    let mut child = foreground(&s, "threads=2");
    let files: Vec<(String, Vec<u8>)> = (0..12)
        .map(|i| {
            (
                format!("synced-{i}"),
                pattern(100 + i, 50_000 + 4099 * i as usize),
            )
        })
        .collect();
    for (name, data) in &files {
        let mut f = fs::File::create(s.mnt.join(name)).unwrap();
        std::io::Write::write_all(&mut f, data).unwrap();
        f.sync_all().unwrap();
    }
    // a writer that is still going when the daemon dies
    let mut dd = Command::new("dd")
        .arg("if=/dev/zero")
        .arg(format!("of={}", s.mnt.join("in-flight").display()))
        .arg("bs=64k")
        .arg("count=100000")
        .arg("status=none")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let pid = i32::try_from(child.id()).unwrap();
    // SAFETY: kill(2) with a pid we spawned.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    child.wait().unwrap();
    let _ = dd.wait();
    // the dead mount must be removed by hand, as with any FUSE daemon
    manyfs_fuse::session::lazy_unmount(&s.mnt).unwrap();
    assert!(!is_mounted(&s.mnt));
    for (name, data) in &files {
        assert!(read_back(&s.pool, name) == *data, "{name} lost or damaged");
    }
}

#[test]
fn mount_errors_are_one_readable_line() {
    let s = Scratch::new();
    let missing = s.dir.path().join("no-such-dir");
    let err = mount_fails(&[s.pool.as_os_str(), missing.as_os_str()]);
    assert!(err.contains("mount point does not exist"), "{err}");

    let file = s.dir.path().join("a-file");
    fs::write(&file, b"").unwrap();
    let err = mount_fails(&[s.pool.as_os_str(), file.as_os_str()]);
    assert!(err.contains("not a directory"), "{err}");

    let nopool = s.dir.path().join("nope.pool");
    let err = mount_fails(&[nopool.as_os_str(), s.mnt.as_os_str()]);
    assert!(err.contains("pool does not exist"), "{err}");

    for bad in [
        "lock=spin",
        "threads=0",
        "segment=xyz",
        "durability=tape",
        "bogus",
    ] {
        let err = mount_fails(&[
            s.pool.as_os_str(),
            s.mnt.as_os_str(),
            "-o".as_ref(),
            bad.as_ref(),
        ]);
        assert!(err.contains("bad mount option"), "{bad}: {err}");
    }

    // a file that is not a pool
    let junk = s.dir.path().join("junk.pool");
    fs::write(&junk, vec![0xA5u8; 1 << 20]).unwrap();
    if fuse_available("mount_errors_are_one_readable_line (junk pool)") {
        let err = mount_fails(&[junk.as_os_str(), s.mnt.as_os_str()]);
        assert!(!err.is_empty());
        assert!(!is_mounted(&s.mnt));
    }
}

/// A session the kernel has already ended (`umount` from outside) must not
/// unmount its mount point by path when it winds down: by then another
/// file system may be mounted there. Scripts do exactly this (umount, then
/// mount a fresh pool on the same directory), and the old session's late
/// umount(2) used to take the new mount away.
#[test]
fn an_ended_session_leaves_the_next_mount_on_its_directory_alone() {
    if !fuse_available("an_ended_session_leaves_the_next_mount_on_its_directory_alone") {
        return;
    }
    let first = Scratch::new();
    let second = Scratch::new();
    let mnt = first.mnt.clone();
    let _cleanup = Cleanup(mnt.clone());
    let cfg = manyfs_fuse::FuseConfig::parse_options::<&str>(&[]).unwrap();

    let fs = manyfs::Fs::mount(&first.pool, &cfg.fs).unwrap();
    let ended = manyfs_fuse::ReadySession::mount(fs, &mnt, &cfg, None).unwrap();
    // umount(2) itself: umount(8) would first look at the directory, a
    // request this session, not yet serving, would never answer.
    let path = std::ffi::CString::new(mnt.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: umount(2) with a NUL-terminated path that outlives the call.
    let rc = within(PROGRESS_LIMIT, "umount(2)", move || unsafe {
        libc::umount(path.as_ptr())
    });
    assert_eq!(rc, 0, "umount: {}", std::io::Error::last_os_error());
    assert!(!is_mounted(&mnt));

    // The next file system on the same directory, mounted before the first
    // session has noticed that it ended.
    let fs = manyfs::Fs::mount(&second.pool, &cfg.fs).unwrap();
    let next = manyfs_fuse::MountedFs::spawn(fs, &mnt, &cfg).unwrap();
    fs::write(mnt.join("next.txt"), b"second pool").unwrap();

    // The first session now sees the end and winds down.
    within(
        PROGRESS_LIMIT,
        "the ended session winding down",
        move || ended.run(),
    )
    .unwrap();

    assert!(
        is_mounted(&mnt),
        "the ended session unmounted the next mount"
    );
    assert_eq!(fs::read(mnt.join("next.txt")).unwrap(), b"second pool");
    unmount(next);
    assert_eq!(read_back(&second.pool, "next.txt"), b"second pool");
}
