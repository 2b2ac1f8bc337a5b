//! `-o uring`: FUSE over io_uring where the kernel offers it
//! (`/sys/module/fuse/parameters/enable_uring` is `Y`), the one-line
//! fallback to /dev/fuse where it does not. The tests never change the
//! parameter (root does, with `echo Y > /sys/module/fuse/parameters/enable_uring`).

mod common;

use std::fs::{self, OpenOptions};
use std::os::unix::fs::FileExt;

use common::*;

/// Whether the kernel offers FUSE over io_uring to new mounts; if not, the
/// ring part of `test` is skipped (a property of the machine's kernel: the
/// fallback is checked instead).
fn uring_enabled(test: &str) -> bool {
    let on = fs::read_to_string("/sys/module/fuse/parameters/enable_uring")
        .is_ok_and(|s| s.trim() == "Y" || s.trim() == "1");
    if !on {
        skip(
            test,
            Lack::Machine,
            "the kernel does not offer FUSE over io_uring (fuse's enable_uring is not Y): \
             only the fallback to /dev/fuse is checked",
        );
    }
    on
}

#[test]
fn uring_posix_basics_or_clear_fallback() {
    let test = "uring_posix_basics_or_clear_fallback";
    if !fuse_available(test) {
        return;
    }
    let ring = uring_enabled(test);
    let s = Scratch::new();
    let m = s.mount(&["uring"]);
    if !ring {
        let why = m.uring_fallback().expect("a fallback reason");
        assert!(why.contains("enable_uring"), "{why}");
        assert!(why.contains("serving through /dev/fuse"), "{why}");
        assert!(!why.contains('\n'));
    } else {
        assert_eq!(m.uring_fallback(), None);
    }
    let root = s.mnt.clone();
    within(PROGRESS_LIMIT, "POSIX basics over -o uring", move || {
        let a = root.join("a.txt");
        fs::write(&a, b"hello uring").unwrap();
        assert_eq!(fs::read(&a).unwrap(), b"hello uring");
        assert_eq!(fs::metadata(&a).unwrap().len(), 11);
        // A write larger than a page, read back at an offset.
        let big = pattern(1, 300_000);
        fs::write(root.join("big"), &big).unwrap();
        let f = fs::File::open(root.join("big")).unwrap();
        let mut back = vec![0u8; 100_000];
        f.read_exact_at(&mut back, 123_456).unwrap();
        assert_eq!(back, big[123_456..223_456]);
        fs::create_dir(root.join("d")).unwrap();
        fs::rename(&a, root.join("d/b.txt")).unwrap();
        assert!(!a.exists());
        assert_eq!(fs::read(root.join("d/b.txt")).unwrap(), b"hello uring");
        let mut names: Vec<_> = fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["big", "d"]);
        xattr_roundtrip(&root.join("d/b.txt"));
        fs::remove_file(root.join("d/b.txt")).unwrap();
        fs::remove_dir(root.join("d")).unwrap();
        // A name longer than the ring's 128-byte fixed-argument area.
        let long = root.join("n".repeat(250));
        fs::write(&long, b"x").unwrap();
        assert_eq!(fs::read(&long).unwrap(), b"x");
        fs::remove_file(&long).unwrap();
    });
    if ring {
        assert!(
            m.uring_requests() > 10,
            "requests did not go over io_uring: {}",
            m.uring_requests()
        );
    } else {
        assert_eq!(m.uring_requests(), 0);
    }
    unmount(m);
    s.fsck();
}

/// setxattr / getxattr / listxattr / removexattr through libc.
fn xattr_roundtrip(path: &std::path::Path) {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let p = CString::new(path.as_os_str().as_bytes()).unwrap();
    let name = c"user.uring";
    let value = b"over the ring";
    // SAFETY: valid NUL-terminated strings and a buffer of the given length.
    let rc = unsafe {
        libc::setxattr(
            p.as_ptr(),
            name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    assert_eq!(rc, 0, "setxattr: {}", std::io::Error::last_os_error());
    let mut buf = [0u8; 64];
    // SAFETY: as above; `buf` has room for 64 bytes.
    let n = unsafe {
        libc::getxattr(
            p.as_ptr(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    assert_eq!(n, value.len() as isize);
    assert_eq!(&buf[..value.len()], value);
    // SAFETY: as above.
    let n = unsafe { libc::listxattr(p.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    assert!(n > 0);
    assert!(
        buf[..n as usize]
            .split(|&b| b == 0)
            .any(|s| s == b"user.uring")
    );
    // SAFETY: as above.
    let rc = unsafe { libc::removexattr(p.as_ptr(), name.as_ptr()) };
    assert_eq!(rc, 0);
}

#[test]
fn uring_parallel_read_write_stress() {
    let test = "uring_parallel_read_write_stress";
    if !fuse_available(test) {
        return;
    }
    let ring = uring_enabled(test);
    const THREADS: usize = 4;
    const BLOCK: usize = 4096;
    const BLOCKS: usize = 256;
    const ROUNDS: usize = 6;
    let s = Scratch::new();
    let m = s.mount(&["uring"]);
    let shared = s.mnt.join("shared");
    create_sized(&shared, (THREADS * BLOCKS * BLOCK) as u64);
    let mnt = s.mnt.clone();
    within(
        PROGRESS_LIMIT,
        "parallel read/write over -o uring",
        move || {
            let workers: Vec<_> = (0..THREADS)
                .map(|t| {
                    let shared = shared.clone();
                    let own = mnt.join(format!("own-{t}"));
                    std::thread::spawn(move || {
                        let f = OpenOptions::new()
                            .read(true)
                            .write(true)
                            .open(&shared)
                            .unwrap();
                        let mut back = vec![0u8; BLOCK];
                        for round in 0..ROUNDS {
                            // Disjoint blocks of one shared file.
                            for b in 0..BLOCKS {
                                let seed = (round * 1_000_000 + t * 10_000 + b) as u64;
                                let off = ((t * BLOCKS + b) * BLOCK) as u64;
                                f.write_all_at(&pattern(seed, BLOCK), off).unwrap();
                            }
                            for b in 0..BLOCKS {
                                let seed = (round * 1_000_000 + t * 10_000 + b) as u64;
                                let off = ((t * BLOCKS + b) * BLOCK) as u64;
                                f.read_exact_at(&mut back, off).unwrap();
                                assert_eq!(back, pattern(seed, BLOCK), "thread {t} block {b}");
                            }
                            // And a file of its own, created and replaced.
                            let data = pattern((t * 100 + round) as u64, 70_000);
                            fs::write(&own, &data).unwrap();
                            assert_eq!(fs::read(&own).unwrap(), data);
                        }
                    })
                })
                .collect();
            for w in workers {
                w.join().unwrap();
            }
        },
    );
    if ring {
        assert!(m.uring_requests() > (THREADS * BLOCKS * ROUNDS) as u64);
    }
    unmount(m);
    s.fsck();
    // Everything written is still there after a remount without the ring.
    let m = s.mount(&[]);
    let f = fs::File::open(s.mnt.join("shared")).unwrap();
    let mut back = vec![0u8; BLOCK];
    for t in 0..THREADS {
        for b in 0..BLOCKS {
            let seed = ((ROUNDS - 1) * 1_000_000 + t * 10_000 + b) as u64;
            f.read_exact_at(&mut back, ((t * BLOCKS + b) * BLOCK) as u64)
                .unwrap();
            assert_eq!(back, pattern(seed, BLOCK));
        }
    }
    drop(f);
    unmount(m);
    s.fsck();
}

/// `manyfs mount -o uring` in daemon mode: usable when it returns, the
/// fallback line on its stderr exactly when the kernel does not offer
/// io_uring, and the daemon lets go of the pool after `fusermount3 -u`.
#[test]
fn uring_daemon_mode_reports_its_transport() {
    let test = "uring_daemon_mode_reports_its_transport";
    if !fuse_available(test) {
        return;
    }
    let ring = uring_enabled(test);
    require_tool("fusermount3");
    let s = Scratch::new();
    let _cleanup = Cleanup(s.mnt.clone());
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_manyfs-mount"))
        .arg(&s.pool)
        .arg(&s.mnt)
        .arg("-o")
        .arg("uring")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "mount failed: {stderr}");
    if ring {
        assert!(stderr.is_empty(), "{stderr}");
    } else {
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.starts_with("manyfs: -o uring: "), "{stderr}");
        assert!(stderr.contains("serving through /dev/fuse"), "{stderr}");
    }
    assert!(is_mounted(&s.mnt));
    fs::write(s.mnt.join("d.txt"), b"from the daemon").unwrap();
    assert_eq!(fs::read(s.mnt.join("d.txt")).unwrap(), b"from the daemon");
    run_ok(
        std::process::Command::new("fusermount3")
            .arg("-u")
            .arg(&s.mnt),
    );
    assert_eq!(read_back(&s.pool, "d.txt"), b"from the daemon");
}

/// The default (`uring=auto`) serves over the ring exactly when the kernel
/// offers it, and says nothing either way; `uring=off` never does.
#[test]
fn uring_is_the_default_where_offered_and_off_when_asked() {
    let test = "uring_is_the_default_where_offered_and_off_when_asked";
    if !fuse_available(test) {
        return;
    }
    let s = Scratch::new();
    for (opts, ring) in [(&[][..], uring_enabled(test)), (&["uring=off"][..], false)] {
        let m = s.mount(opts);
        assert_eq!(m.uring_fallback(), None, "{opts:?}");
        let f = s.mnt.join("f");
        fs::write(&f, vec![7u8; 100_000]).unwrap();
        assert_eq!(fs::read(&f).unwrap(), vec![7u8; 100_000]);
        fs::remove_file(&f).unwrap();
        if ring {
            assert!(
                m.uring_requests() > 0,
                "{opts:?}: nothing went over the ring"
            );
        } else {
            assert_eq!(m.uring_requests(), 0, "{opts:?}");
        }
        unmount(m);
    }
    s.fsck();
}
