//! POSIX behaviour through a real FUSE mount, driven with std::fs and
//! ordinary tools (`cp -a`).

mod common;

use std::collections::BTreeSet;
use std::ffi::CString;
use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

use common::*;

fn cstr(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

/// `renameat2(from, to, flags)` on absolute paths, which must fail: its errno.
fn renameat2_errno(from: &Path, to: &Path, flags: libc::c_uint) -> Option<i32> {
    let (from, to) = (cstr(from), cstr(to));
    // SAFETY: valid NUL-terminated paths; AT_FDCWD with absolute paths.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            flags,
        )
    };
    assert_eq!(rc, -1);
    std::io::Error::last_os_error().raw_os_error()
}

#[test]
fn basic_posix_operations() {
    if !fuse_available("basic_posix_operations") {
        return;
    }
    let s = Scratch::new();
    let m = s.mount(&[]);
    let root = s.mnt.as_path();

    // create + write + read
    let a = root.join("a.txt");
    fs::write(&a, b"hello manyfs").unwrap();
    assert_eq!(fs::read(&a).unwrap(), b"hello manyfs");
    assert_eq!(fs::metadata(&a).unwrap().len(), 12);
    assert!(fs::metadata(&a).unwrap().is_file());

    // positional overwrite, read with seek
    {
        let mut f = OpenOptions::new().read(true).write(true).open(&a).unwrap();
        f.seek(SeekFrom::Start(6)).unwrap();
        f.write_all(b"MANYFS").unwrap();
        f.seek(SeekFrom::Start(0)).unwrap();
        let mut s = String::new();
        f.read_to_string(&mut s).unwrap();
        assert_eq!(s, "hello MANYFS");
    }

    // O_APPEND from two handles
    {
        let mut f1 = OpenOptions::new().append(true).open(&a).unwrap();
        let mut f2 = OpenOptions::new().append(true).open(&a).unwrap();
        f1.write_all(b"-one").unwrap();
        f2.write_all(b"-two").unwrap();
        f1.write_all(b"-three").unwrap();
    }
    assert_eq!(fs::read(&a).unwrap(), b"hello MANYFS-one-two-three");

    // O_EXCL
    let err = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&a)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::AlreadyExists);

    // O_TRUNC
    {
        let mut f = OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&a)
            .unwrap();
        f.write_all(b"short").unwrap();
    }
    assert_eq!(fs::read(&a).unwrap(), b"short");

    // a larger file spanning many pages and several FUSE requests
    let big = pattern(7, 3 * 1024 * 1024 + 123);
    let bigp = root.join("big.bin");
    fs::write(&bigp, &big).unwrap();
    assert_eq!(fs::read(&bigp).unwrap(), big);

    // truncate: shrink, then grow with zeros
    {
        let f = OpenOptions::new().write(true).open(&bigp).unwrap();
        f.set_len(5000).unwrap();
        assert_eq!(fs::metadata(&bigp).unwrap().len(), 5000);
        f.set_len(9000).unwrap();
    }
    let data = fs::read(&bigp).unwrap();
    assert_eq!(data.len(), 9000);
    assert_eq!(&data[..5000], &big[..5000]);
    assert!(
        data[5000..].iter().all(|&b| b == 0),
        "grown part must read as zeros"
    );

    // sparse write far beyond the end
    {
        let f = OpenOptions::new().write(true).open(&bigp).unwrap();
        std::os::unix::fs::FileExt::write_at(&f, b"tail", 10 << 20).unwrap();
    }
    assert_eq!(fs::metadata(&bigp).unwrap().len(), (10 << 20) + 4);
    {
        let f = fs::File::open(&bigp).unwrap();
        let mut buf = [1u8; 16];
        std::os::unix::fs::FileExt::read_exact_at(&f, &mut buf, 1 << 20).unwrap();
        assert_eq!(buf, [0u8; 16], "hole must read as zeros");
    }

    // fallocate mode 0 extends
    {
        let f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(root.join("falloc"))
            .unwrap();
        // SAFETY: valid open descriptor; plain integer arguments.
        let rc = unsafe { libc::posix_fallocate(f.as_raw_fd(), 0, 1 << 20) };
        assert_eq!(
            rc,
            0,
            "posix_fallocate: {}",
            std::io::Error::from_raw_os_error(rc)
        );
        assert_eq!(f.metadata().unwrap().len(), 1 << 20);
        // within the size: no change
        // SAFETY: as above.
        let rc = unsafe { libc::posix_fallocate(f.as_raw_fd(), 4096, 4096) };
        assert_eq!(rc, 0);
        assert_eq!(f.metadata().unwrap().len(), 1 << 20);
    }

    // chmod
    fs::set_permissions(&a, fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(
        fs::metadata(&a).unwrap().permissions().mode() & 0o7777,
        0o600
    );
    fs::set_permissions(&a, fs::Permissions::from_mode(0o4755)).unwrap();
    assert_eq!(
        fs::metadata(&a).unwrap().permissions().mode() & 0o7777,
        0o4755
    );

    // create mode is honoured
    {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o640)
            .open(root.join("m640"))
            .unwrap();
        let mode = fs::metadata(root.join("m640"))
            .unwrap()
            .permissions()
            .mode();
        // the process umask may clear bits, never add them
        assert_eq!(mode & 0o7777 & !0o640, 0);
        assert!(fs::metadata(root.join("m640")).unwrap().is_file());
    }

    // utimens
    {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
        let f = OpenOptions::new().write(true).open(&a).unwrap();
        f.set_modified(t).unwrap();
        assert_eq!(fs::metadata(&a).unwrap().modified().unwrap(), t);
    }

    // directories
    fs::create_dir(root.join("d")).unwrap();
    fs::create_dir_all(root.join("d/e/f")).unwrap();
    assert!(fs::metadata(root.join("d/e/f")).unwrap().is_dir());
    assert_eq!(
        fs::create_dir(root.join("d")).unwrap_err().kind(),
        ErrorKind::AlreadyExists
    );
    let err = fs::remove_dir(root.join("d")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOTEMPTY));
    let err = fs::read(root.join("nope")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    let err = fs::remove_file(root.join("d")).unwrap_err();
    assert!(
        matches!(err.raw_os_error(), Some(libc::EISDIR) | Some(libc::EPERM)),
        "{err}"
    );

    // rename: into a subdirectory, over an existing file, NOREPLACE
    fs::rename(&a, root.join("d/e/renamed.txt")).unwrap();
    assert!(!a.exists());
    assert_eq!(fs::read(root.join("d/e/renamed.txt")).unwrap(), b"short");
    fs::write(root.join("victim"), b"old").unwrap();
    fs::write(root.join("winner"), b"new").unwrap();
    fs::rename(root.join("winner"), root.join("victim")).unwrap();
    assert_eq!(fs::read(root.join("victim")).unwrap(), b"new");
    assert!(!root.join("winner").exists());
    fs::write(root.join("x1"), b"1").unwrap();
    fs::write(root.join("x2"), b"2").unwrap();
    assert_eq!(
        renameat2_errno(&root.join("x1"), &root.join("x2"), libc::RENAME_NOREPLACE),
        Some(libc::EEXIST)
    );
    assert_eq!(fs::read(root.join("x2")).unwrap(), b"2");
    // rename a directory
    fs::rename(root.join("d/e"), root.join("e2")).unwrap();
    assert!(root.join("e2/f").is_dir());
    assert_eq!(fs::read(root.join("e2/renamed.txt")).unwrap(), b"short");

    // hard link
    fs::hard_link(root.join("victim"), root.join("victim.link")).unwrap();
    let m1 = fs::metadata(root.join("victim")).unwrap();
    let m2 = fs::metadata(root.join("victim.link")).unwrap();
    assert_eq!(m1.ino(), m2.ino());
    assert_eq!(m1.nlink(), 2);
    fs::write(root.join("victim.link"), b"via link").unwrap();
    assert_eq!(fs::read(root.join("victim")).unwrap(), b"via link");
    fs::remove_file(root.join("victim")).unwrap();
    assert_eq!(fs::metadata(root.join("victim.link")).unwrap().nlink(), 1);
    assert_eq!(fs::read(root.join("victim.link")).unwrap(), b"via link");

    // symlink
    std::os::unix::fs::symlink("e2/renamed.txt", root.join("sl")).unwrap();
    assert_eq!(
        fs::read_link(root.join("sl")).unwrap(),
        Path::new("e2/renamed.txt")
    );
    assert!(fs::symlink_metadata(root.join("sl")).unwrap().is_symlink());
    assert_eq!(fs::read(root.join("sl")).unwrap(), b"short");
    std::os::unix::fs::symlink("/nonexistent/target", root.join("dangling")).unwrap();
    assert_eq!(
        fs::read(root.join("dangling")).unwrap_err().kind(),
        ErrorKind::NotFound
    );

    // readdir
    let names: BTreeSet<String> = fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let want: BTreeSet<String> = [
        "big.bin",
        "falloc",
        "m640",
        "d",
        "e2",
        "victim.link",
        "x1",
        "x2",
        "sl",
        "dangling",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(names, want);
    // "." and ".." come from the file system too
    let out = run_ok(Command::new("ls").arg("-a").arg(root));
    assert!(out.lines().any(|l| l == "."), "{out}");
    assert!(out.lines().any(|l| l == ".."), "{out}");
    {
        // (a DirEntry keeps its directory open: scope it)
        let sl = fs::read_dir(root)
            .unwrap()
            .map(|e| e.unwrap())
            .find(|e| e.file_name() == "sl")
            .unwrap();
        assert!(sl.file_type().unwrap().is_symlink());
    }

    // unlink an open file: the handle keeps working
    {
        let p = root.join("open-unlinked");
        let mut f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&p)
            .unwrap();
        f.write_all(b"still here").unwrap();
        fs::remove_file(&p).unwrap();
        assert!(!p.exists());
        f.seek(SeekFrom::Start(0)).unwrap();
        let mut s = String::new();
        f.read_to_string(&mut s).unwrap();
        assert_eq!(s, "still here");
    }

    // statfs
    {
        let c = cstr(root);
        // SAFETY: statvfs is plain old data, fully written by the call.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: valid path and out-pointer.
        let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
        assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
        assert!(st.f_blocks > 0);
        assert!(st.f_bfree <= st.f_blocks);
        assert!(st.f_files > 0);
        assert!(st.f_bsize > 0);
    }

    // rmdir
    fs::remove_dir(root.join("e2/f")).unwrap();
    assert!(!root.join("e2/f").exists());

    assert_eq!(m.stats().handler_panics(), 0);
    unmount(m);
    assert!(!is_mounted(&s.mnt));
    s.fsck();
}

/// The kernel caches attributes, names and absences for a day (`ttl`):
/// every change made through the mount must still show at once.
#[test]
fn cached_names_absences_and_attributes_follow_every_change() {
    if !fuse_available("cached_names_absences_and_attributes_follow_every_change") {
        return;
    }
    let s = Scratch::new();
    let m = s.mount(&[]);
    let (a, b, d) = (s.mnt.join("a"), s.mnt.join("b"), s.mnt.join("d"));
    let missing = |p: &Path| fs::symlink_metadata(p).unwrap_err().kind() == ErrorKind::NotFound;
    // Looked up while missing (a negative entry), then made in every way.
    for p in [&a, &b, &d] {
        assert!(missing(p));
    }
    fs::write(&a, b"1").unwrap();
    fs::create_dir(&d).unwrap();
    fs::hard_link(&a, &b).unwrap();
    assert_eq!(fs::metadata(&a).unwrap().nlink(), 2);
    assert_eq!(
        fs::metadata(&b).unwrap().ino(),
        fs::metadata(&a).unwrap().ino()
    );
    // Removing one link changes the other's link count.
    fs::remove_file(&b).unwrap();
    assert!(missing(&b));
    assert_eq!(fs::metadata(&a).unwrap().nlink(), 1);
    // Rename: the old name is gone, the new one (looked up while missing)
    // is there; renaming over a name replaces its inode.
    let c = s.mnt.join("c");
    assert!(missing(&c));
    fs::rename(&a, &c).unwrap();
    assert!(missing(&a));
    assert_eq!(fs::read(&c).unwrap(), b"1");
    fs::write(&a, b"22").unwrap();
    fs::rename(&a, &c).unwrap();
    assert!(missing(&a));
    assert_eq!(fs::metadata(&c).unwrap().len(), 2);
    // Size, mode and times after writes, truncates and chmod.
    fs::OpenOptions::new()
        .append(true)
        .open(&c)
        .unwrap()
        .write_all(b"333")
        .unwrap();
    assert_eq!(fs::metadata(&c).unwrap().len(), 5);
    fs::set_permissions(&c, fs::Permissions::from_mode(0o4755)).unwrap();
    assert_eq!(fs::metadata(&c).unwrap().mode() & 0o7777, 0o4755);
    fs::OpenOptions::new()
        .write(true)
        .open(&c)
        .unwrap()
        .set_len(1)
        .unwrap();
    assert_eq!(fs::metadata(&c).unwrap().len(), 1);
    // A directory's link count and emptiness follow its entries.
    fs::create_dir(d.join("sub")).unwrap();
    assert_eq!(fs::metadata(&d).unwrap().nlink(), 3);
    fs::remove_dir(d.join("sub")).unwrap();
    assert_eq!(fs::metadata(&d).unwrap().nlink(), 2);
    fs::remove_dir(&d).unwrap();
    assert!(missing(&d));
    // A removed name can be made again, as another kind.
    fs::create_dir(&b).unwrap();
    assert!(fs::metadata(&b).unwrap().is_dir());
    unmount(m);
    s.fsck();
}

#[test]
fn readdir_offsets_with_many_entries_and_removal() {
    if !fuse_available("readdir_offsets_with_many_entries_and_removal") {
        return;
    }
    let s = Scratch::new();
    let m = s.mount(&[]);
    let dir = s.mnt.join("many");
    fs::create_dir(&dir).unwrap();
    let n = 600;
    for i in 0..n {
        // long names so the listing needs several readdir requests
        fs::write(
            dir.join(format!("entry-with-a-rather-long-name-{i:05}")),
            b"x",
        )
        .unwrap();
    }
    let names: Vec<String> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), n, "every entry exactly once");
    let set: BTreeSet<&String> = names.iter().collect();
    assert_eq!(set.len(), n, "no duplicates");

    // remove while listing (what `rm -rf` does)
    for e in fs::read_dir(&dir).unwrap() {
        fs::remove_file(e.unwrap().path()).unwrap();
    }
    assert_eq!(fs::read_dir(&dir).unwrap().count(), 0);
    fs::remove_dir(&dir).unwrap();

    // and with a real rm -rf
    fs::create_dir_all(s.mnt.join("t/a/b")).unwrap();
    for i in 0..50 {
        fs::write(s.mnt.join(format!("t/a/b/f{i}")), b"y").unwrap();
    }
    run_ok(Command::new("rm").arg("-rf").arg(s.mnt.join("t")));
    assert!(!s.mnt.join("t").exists());
    unmount(m);
    s.fsck();
}

#[test]
fn library_errors_reach_programs_as_errno() {
    if !fuse_available("library_errors_reach_programs_as_errno") {
        return;
    }
    let s = Scratch::with_size(32 << 20);
    let m = s.mount(&[]);
    let root = s.mnt.as_path();

    // ENAMETOOLONG
    let long = "n".repeat(300);
    let err = fs::write(root.join(&long), b"x").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENAMETOOLONG), "{err}");

    // ENOTDIR
    fs::write(root.join("plain"), b"x").unwrap();
    let err = fs::create_dir(root.join("plain/sub")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOTDIR), "{err}");

    // ENOSPC: fill the 32 MiB pool, then free the space again
    let chunk = vec![0x5Au8; 1 << 20];
    let mut written = 0usize;
    let err = {
        let mut f = fs::File::create(root.join("filler")).unwrap();
        loop {
            match f.write_all(&chunk) {
                Ok(()) => written += chunk.len(),
                Err(e) => break e,
            }
            assert!(
                written <= 64 << 20,
                "a 32 MiB pool accepted {written} bytes"
            );
        }
    };
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{err}");
    assert!(written >= 8 << 20, "only {written} bytes fit");
    fs::remove_file(root.join("filler")).unwrap();
    fs::write(root.join("after"), &chunk).expect("space is reusable after unlink");
    assert_eq!(fs::read(root.join("after")).unwrap(), chunk);

    // FIFOs exist; an exchange needs both names; whiteouts (overlayfs)
    // are not supported
    let fifo = cstr(&root.join("fifo"));
    // SAFETY: valid NUL-terminated path.
    let rc = unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) };
    assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
    assert_eq!(
        renameat2_errno(
            &root.join("plain"),
            &root.join("missing"),
            libc::RENAME_EXCHANGE
        ),
        Some(libc::ENOENT)
    );
    assert_eq!(
        renameat2_errno(
            &root.join("plain"),
            &root.join("after"),
            libc::RENAME_WHITEOUT
        ),
        Some(libc::EINVAL)
    );
    // an xattr that is not there; a buffer too small for one that is
    let plain = cstr(&root.join("plain"));
    let name = c"user.k";
    let mut buf = [0u8; 2];
    // SAFETY: valid NUL-terminated strings and a buffer of the given size.
    let rc = unsafe { libc::getxattr(plain.as_ptr(), name.as_ptr(), buf.as_mut_ptr().cast(), 2) };
    assert_eq!(rc, -1);
    assert_eq!(
        std::io::Error::last_os_error().raw_os_error(),
        Some(libc::ENODATA)
    );
    // SAFETY: as above.
    let rc = unsafe {
        libc::setxattr(
            plain.as_ptr(),
            name.as_ptr(),
            b"value".as_ptr().cast(),
            5,
            0,
        )
    };
    assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
    // SAFETY: as above.
    let rc = unsafe { libc::getxattr(plain.as_ptr(), name.as_ptr(), buf.as_mut_ptr().cast(), 2) };
    assert_eq!(rc, -1);
    assert_eq!(
        std::io::Error::last_os_error().raw_os_error(),
        Some(libc::ERANGE)
    );

    assert_eq!(m.stats().handler_panics(), 0);
    unmount(m);
    s.fsck();
}

/// Many client threads (more than the daemon's serving threads) doing mixed
/// namespace and data operations at once, in private and shared
/// directories: every operation succeeds, every read matches, the final
/// tree is exactly what the threads left, and fsck is clean.
#[test]
fn concurrent_mixed_operations_stress() {
    if !fuse_available("concurrent_mixed_operations_stress") {
        return;
    }
    let s = Scratch::new();
    let m = s.mount(&["threads=3"]);
    let root = s.mnt.clone();
    fs::create_dir(root.join("shared")).unwrap();
    let workers = 8usize;
    let iters = 150usize;
    std::thread::scope(|sc| {
        for t in 0..workers {
            let root = root.clone();
            sc.spawn(move || {
                let own = root.join(format!("w{t}"));
                fs::create_dir(&own).unwrap();
                for i in 0..iters {
                    let size = (t * 7919 + i * 104_729) % 300_000;
                    let data = pattern((t * 1000 + i) as u64, size);
                    let p = own.join(format!("f{i}"));
                    fs::write(&p, &data).unwrap();
                    assert!(fs::read(&p).unwrap() == data, "t{t} i{i}: read mismatch");
                    let shared = root.join(format!("shared/t{t}-{i}"));
                    fs::rename(&p, &shared).unwrap();
                    fs::hard_link(&shared, &p).unwrap();
                    assert_eq!(fs::metadata(&p).unwrap().nlink(), 2);
                    // everyone lists the shared directory while it changes
                    let n = fs::read_dir(root.join("shared")).unwrap().count();
                    assert!(n >= 1);
                    if i % 3 == 0 {
                        fs::remove_file(&shared).unwrap();
                        let f = OpenOptions::new().write(true).open(&p).unwrap();
                        f.set_len((size / 2) as u64).unwrap();
                        drop(f);
                        assert!(fs::read(&p).unwrap() == data[..size / 2]);
                    } else {
                        fs::remove_file(&p).unwrap();
                    }
                    if i % 10 == 0 {
                        let d = root.join(format!("shared/dir-{t}-{i}"));
                        fs::create_dir(&d).unwrap();
                        fs::write(d.join("x"), b"x").unwrap();
                        fs::remove_file(d.join("x")).unwrap();
                        fs::remove_dir(&d).unwrap();
                    }
                }
            });
        }
    });
    // survivors: w{t}/f{i} for i % 3 == 0, shared/t{t}-{i} otherwise
    let shared: BTreeSet<String> = fs::read_dir(root.join("shared"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let want: BTreeSet<String> = (0..workers)
        .flat_map(|t| {
            (0..iters)
                .filter(|i| i % 3 != 0)
                .map(move |i| format!("t{t}-{i}"))
        })
        .collect();
    assert_eq!(shared, want);
    for t in 0..workers {
        let own: BTreeSet<String> = fs::read_dir(root.join(format!("w{t}")))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        let want: BTreeSet<String> = (0..iters)
            .filter(|i| i % 3 == 0)
            .map(|i| format!("f{i}"))
            .collect();
        assert_eq!(own, want);
    }
    assert_eq!(m.stats().handler_panics(), 0);
    unmount(m);
    s.fsck();
}

/// Build a tree with files of awkward sizes, nested directories and symlinks.
fn make_tree(root: &Path) {
    let sizes = [
        0usize,
        1,
        511,
        4095,
        4096,
        4097,
        65_536,
        100_000,
        (1 << 20) + 3,
        3 * (1 << 20) + 17,
    ];
    for (d, dir) in ["", "sub", "sub/deeper", "other/x/y/z"].iter().enumerate() {
        let dp = root.join(dir);
        fs::create_dir_all(&dp).unwrap();
        for (i, &size) in sizes.iter().enumerate() {
            let seed = (d * 100 + i) as u64;
            let p = dp.join(format!("file-{i}-{size}.bin"));
            fs::write(&p, pattern(seed, size)).unwrap();
            let mode = [0o644, 0o600, 0o755, 0o444][i % 4];
            fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
        }
    }
    fs::create_dir_all(root.join("empty-dir")).unwrap();
    std::os::unix::fs::symlink("sub/file-3-4095.bin", root.join("link-to-file")).unwrap();
    std::os::unix::fs::symlink("sub/deeper", root.join("link-to-dir")).unwrap();
    std::os::unix::fs::symlink("does/not/exist", root.join("dangling")).unwrap();
}

/// Compare two trees: same names, kinds, permission bits, contents and
/// symlink targets.
fn compare_trees(a: &Path, b: &Path) -> usize {
    let mut count = 0;
    let mut names_a: Vec<_> = fs::read_dir(a)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    let mut names_b: Vec<_> = fs::read_dir(b)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names_a.sort();
    names_b.sort();
    assert_eq!(
        names_a,
        names_b,
        "entries of {} vs {}",
        a.display(),
        b.display()
    );
    for name in names_a {
        let (pa, pb) = (a.join(&name), b.join(&name));
        let (ma, mb) = (
            fs::symlink_metadata(&pa).unwrap(),
            fs::symlink_metadata(&pb).unwrap(),
        );
        assert_eq!(ma.file_type(), mb.file_type(), "{}", pa.display());
        count += 1;
        if ma.is_symlink() {
            assert_eq!(fs::read_link(&pa).unwrap(), fs::read_link(&pb).unwrap());
        } else if ma.is_dir() {
            count += compare_trees(&pa, &pb);
        } else {
            assert_eq!(ma.mode() & 0o7777, mb.mode() & 0o7777, "{}", pa.display());
            assert_eq!(ma.len(), mb.len(), "{}", pa.display());
            assert!(
                fs::read(&pa).unwrap() == fs::read(&pb).unwrap(),
                "contents of {} differ",
                pa.display()
            );
        }
    }
    count
}

#[test]
fn copy_tree_in_and_out_byte_for_byte() {
    if !fuse_available("copy_tree_in_and_out_byte_for_byte") {
        return;
    }
    let s = Scratch::new();
    let src = s.dir.path().join("src");
    let back = s.dir.path().join("back");
    make_tree(&src);

    let m = s.mount(&[]);
    run_ok(
        Command::new("cp")
            .arg("-a")
            .arg(&src)
            .arg(s.mnt.join("tree")),
    );
    let n = compare_trees(&src, &s.mnt.join("tree"));
    assert!(n > 40, "compared only {n} entries");
    unmount(m);

    // remount: the tree survived the unmount
    let m = s.mount(&[]);
    run_ok(
        Command::new("cp")
            .arg("-a")
            .arg(s.mnt.join("tree"))
            .arg(&back),
    );
    compare_trees(&src, &back);
    // the modification times were preserved by cp -a through setattr
    let t_src = fs::metadata(src.join("sub/file-9-3145745.bin")).unwrap();
    let t_mnt = fs::metadata(s.mnt.join("tree/sub/file-9-3145745.bin")).unwrap();
    assert_eq!(t_src.mtime(), t_mnt.mtime());
    assert_eq!(m.stats().handler_panics(), 0);
    unmount(m);
    s.fsck();
}
