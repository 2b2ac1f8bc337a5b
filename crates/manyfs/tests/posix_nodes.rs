//! Special files (FIFOs, sockets, devices), extended attributes and
//! exchanging renames through the library API, across remounts, log
//! compaction and crashes in `pm` mode; and mounting a version-2 pool.

mod common;

use common::{acl, fresh};
use manyfs::lowlevel::InodeOps;
use manyfs::lowlevel::ROOT_INO;
use manyfs::lowlevel::XATTR_VALUE_MAX;
use manyfs::lowlevel::XattrSet;
use manyfs::{Error, FileKind, Fs, MountOptions};
use std::ffi::OsStr;
use std::path::Path;

fn remount(fs: Fs, pool: &Path) -> Fs {
    fs.unmount().unwrap();
    let report = manyfs::fsck::check(pool).unwrap();
    assert!(report.errors.is_empty(), "fsck: {:?}", report.errors);
    let fs = Fs::mount(pool, &MountOptions::default()).unwrap();
    assert!(
        manyfs::fsck::verify(&fs).unwrap().is_empty(),
        "{:?}",
        manyfs::fsck::verify(&fs)
    );
    fs
}

fn exchange(fs: &Fs, a: u64, an: &str, b: u64, bn: &str) -> manyfs::Result<()> {
    fs.rename_at(a, os(an), b, os(bn), manyfs::lowlevel::Rename::Exchange)
}

fn os(s: &str) -> &OsStr {
    OsStr::new(s)
}

const S_IFIFO: u32 = 0o010000;
const S_IFCHR: u32 = 0o020000;
const S_IFDIR: u32 = 0o040000;
const S_IFBLK: u32 = 0o060000;
const S_IFREG: u32 = 0o100000;
const S_IFLNK: u32 = 0o120000;
const S_IFSOCK: u32 = 0o140000;

#[test]
fn every_file_type_is_made_listed_linked_renamed_and_survives_remount() {
    let (_d, pool, fs) = fresh(64 << 20);
    let nodes = [
        ("fifo", S_IFIFO | 0o640, 0, FileKind::Fifo),
        ("chr", S_IFCHR | 0o600, (1 << 8) | 3, FileKind::CharDevice),
        ("blk", S_IFBLK | 0o660, (8 << 8) | 1, FileKind::BlockDevice),
        ("sock", S_IFSOCK | 0o755, 0, FileKind::Socket),
        ("reg", S_IFREG | 0o644, 0, FileKind::File),
        ("plain", 0o600, 0, FileKind::File),
        ("dir", S_IFDIR | 0o755, 0, FileKind::Dir),
    ];
    for (name, mode, rdev, kind) in nodes {
        let md = fs.mknod(ROOT_INO, os(name), mode, rdev, 1000, 100).unwrap();
        assert_eq!(
            (md.kind, md.mode, md.uid, md.gid),
            (kind, mode & 0o7777, 1000, 100)
        );
        assert_eq!(md.rdev, if kind.is_special() { rdev } else { 0 }, "{name}");
        assert_eq!(md.size, 0, "{name}: new and empty");
    }
    // FIFOs and sockets carry no device number whatever the caller says.
    let f2 = fs
        .mknod(ROOT_INO, os("fifo2"), S_IFIFO | 0o600, 77, 0, 0)
        .unwrap();
    assert_eq!(f2.rdev, 0);
    // A symlink is not made by mknod; unknown type bits are refused.
    for bad in [S_IFLNK | 0o777, 0o030000 | 0o644] {
        let e = fs.mknod(ROOT_INO, os("bad"), bad, 0, 0, 0).unwrap_err();
        assert_eq!(e.errno(), libc::EINVAL, "{bad:o}");
    }
    assert_eq!(
        fs.mknod(ROOT_INO, os("fifo"), S_IFIFO | 0o600, 0, 0, 0)
            .unwrap_err()
            .errno(),
        libc::EEXIST
    );
    // Special nodes cannot be opened through manyfs, nor truncated.
    let chr = fs.metadata("/chr").unwrap();
    assert_eq!(
        fs.open_ino(chr.ino, true, false).err().unwrap().errno(),
        libc::EINVAL
    );
    let trunc = manyfs::lowlevel::SetAttr {
        size: Some(0),
        ..Default::default()
    };
    assert_eq!(
        fs.setattr(chr.ino, &trunc).unwrap_err().errno(),
        libc::EINVAL
    );
    // Link, rename, chmod, chown, utimes: as for any inode.
    let fifo = fs.metadata("/fifo").unwrap();
    fs.link_at(fifo.ino, ROOT_INO, os("fifo-link")).unwrap();
    fs.rename("/sock", "/dir/sock").unwrap();
    fs.rename("/blk", "/dir/blk2").unwrap();
    fs.set_permissions("/chr", 0o604).unwrap();
    let chown = manyfs::lowlevel::SetAttr {
        uid: Some(7),
        gid: Some(8),
        ..Default::default()
    };
    fs.setattr(chr.ino, &chown).unwrap();
    let t = std::time::UNIX_EPOCH + std::time::Duration::new(1_000_000, 123_456_789);
    fs.set_times("/fifo", t, t).unwrap();
    let fs = remount(fs, &pool);
    let kinds: Vec<(String, FileKind)> = fs
        .read_dir("/")
        .unwrap()
        .into_iter()
        .map(|e| (e.name.to_string_lossy().into_owned(), e.kind))
        .collect();
    assert!(
        kinds.contains(&("fifo-link".into(), FileKind::Fifo)),
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&("chr".into(), FileKind::CharDevice)),
        "{kinds:?}"
    );
    let fifo = fs.metadata("/fifo").unwrap();
    assert_eq!(
        (fifo.kind, fifo.nlink, fifo.mode),
        (FileKind::Fifo, 2, 0o640)
    );
    assert_eq!(fifo.mtime, t, "nanosecond times survive");
    let chr = fs.metadata("/chr").unwrap();
    assert_eq!(
        (chr.kind, chr.rdev, chr.mode, chr.uid, chr.gid),
        (FileKind::CharDevice, (1 << 8) | 3, 0o604, 7, 8)
    );
    let blk = fs.metadata("/dir/blk2").unwrap();
    assert_eq!((blk.kind, blk.rdev), (FileKind::BlockDevice, (8 << 8) | 1));
    assert_eq!(fs.metadata("/dir/sock").unwrap().kind, FileKind::Socket);
    // Removing them frees them like files.
    let free = fs.statfs().free_inodes;
    fs.remove_file("/fifo").unwrap();
    fs.remove_file("/fifo-link").unwrap();
    fs.remove_file("/dir/sock").unwrap();
    fs.sync().unwrap(); // file mode: freed inode numbers wait for a sync
    assert_eq!(fs.statfs().free_inodes, free + 2);
    let fs = remount(fs, &pool);
    assert!(fs.metadata("/fifo").is_err());
    fs.unmount().unwrap();
}

#[test]
fn extended_attributes_follow_setxattr_semantics_and_survive_remount_and_compaction() {
    let (_d, pool, fs) = fresh(64 << 20);
    fs.write("/f", b"data").unwrap();
    fs.create_dir("/d").unwrap();
    fs.mknod(ROOT_INO, os("fifo"), S_IFIFO | 0o644, 0, 0, 0)
        .unwrap();
    let f = fs.metadata("/f").unwrap().ino;
    let d = fs.metadata("/d").unwrap().ino;
    let fifo = fs.metadata("/fifo").unwrap().ino;
    let errno = |r: manyfs::Result<()>| r.unwrap_err().errno();

    assert_eq!(
        fs.getxattr(f, os("user.a")).unwrap_err().errno(),
        libc::ENODATA
    );
    let before = fs.stat(f).unwrap().ctime;
    // Times come from the coarse clock (a few ms per tick).
    std::thread::sleep(std::time::Duration::from_millis(20));
    fs.setxattr(f, os("user.a"), b"1", XattrSet::Any).unwrap();
    assert!(fs.stat(f).unwrap().ctime > before, "setxattr changes ctime");
    let refused: [(&str, &[u8], XattrSet, i32); 6] = [
        ("user.a", b"2", XattrSet::Create, libc::EEXIST),
        ("user.b", b"2", XattrSet::Replace, libc::ENODATA),
        (
            "user.big",
            &[9; XATTR_VALUE_MAX + 1],
            XattrSet::Any,
            libc::ENOSPC,
        ),
        ("system.posix_acl_access", b"x", XattrSet::Any, libc::EINVAL),
        ("nospace", b"x", XattrSet::Any, libc::EOPNOTSUPP),
        ("system.other", b"x", XattrSet::Any, libc::EOPNOTSUPP),
    ];
    for (name, value, how, want) in refused {
        assert_eq!(errno(fs.setxattr(f, os(name), value, how)), want, "{name}");
    }
    fs.setxattr(f, os("user.a"), b"2", XattrSet::Replace)
        .unwrap();
    fs.setxattr(f, os("trusted.t"), &[0, 255, 0], XattrSet::Create)
        .unwrap();
    fs.setxattr(f, os("security.s"), b"", XattrSet::Any)
        .unwrap();
    fs.setxattr(f, os("user.max"), &vec![9; XATTR_VALUE_MAX], XattrSet::Any)
        .unwrap();
    let long = format!("user.{}", "n".repeat(251));
    assert_eq!(
        errno(fs.setxattr(f, os(&long), b"x", XattrSet::Any)),
        libc::ERANGE
    );
    fs.setxattr(f, os(&long[..255]), b"x", XattrSet::Any)
        .unwrap();
    assert_eq!(errno(fs.removexattr(f, os("user.none"))), libc::ENODATA);
    // user. attributes only on files and directories; others anywhere.
    assert_eq!(
        errno(fs.setxattr(fifo, os("user.x"), b"1", XattrSet::Any)),
        libc::EPERM
    );
    fs.setxattr(fifo, os("trusted.x"), b"1", XattrSet::Any)
        .unwrap();
    fs.setxattr(d, os("user.dir"), b"on a directory", XattrSet::Any)
        .unwrap();
    // The per-inode total is bounded.
    let mut n = 0;
    let full = loop {
        match fs.setxattr(d, os(&format!("user.fill{n}")), &[1; 3000], XattrSet::Any) {
            Ok(()) => n += 1,
            Err(e) => break e,
        }
    };
    assert_eq!(full.errno(), libc::ENOSPC);
    assert!(
        (20..=22).contains(&n),
        "{n} attributes of 3000 bytes fit in 64 KiB"
    );
    for i in 0..n {
        fs.removexattr(d, os(&format!("user.fill{i}"))).unwrap();
    }
    // Many changes: the log is compacted; the attributes stay.
    for i in 0..300u32 {
        fs.setxattr(f, os("user.counter"), &i.to_le_bytes(), XattrSet::Any)
            .unwrap();
        fs.setxattr(d, os("user.counter"), &i.to_le_bytes(), XattrSet::Any)
            .unwrap();
    }
    fs.removexattr(f, os("user.a")).unwrap();
    let expect_f: Vec<String> = {
        let mut v = vec![
            long[..255].to_string(),
            "security.s".into(),
            "trusted.t".into(),
            "user.counter".into(),
            "user.max".into(),
        ];
        v.sort();
        v
    };
    let names = |fs: &Fs, ino| -> Vec<String> {
        fs.listxattr(ino)
            .unwrap()
            .into_iter()
            .map(|n| n.to_string_lossy().into_owned())
            .collect()
    };
    assert_eq!(names(&fs, f), expect_f);
    let fs = remount(fs, &pool);
    assert_eq!(names(&fs, f), expect_f);
    assert_eq!(names(&fs, d), ["user.counter", "user.dir"]);
    assert_eq!(
        fs.getxattr(f, os("user.counter")).unwrap(),
        299u32.to_le_bytes()
    );
    assert_eq!(
        fs.getxattr(d, os("user.counter")).unwrap(),
        299u32.to_le_bytes()
    );
    assert_eq!(fs.getxattr(f, os("trusted.t")).unwrap(), [0, 255, 0]);
    assert_eq!(fs.getxattr(f, os("security.s")).unwrap(), b"");
    assert_eq!(
        fs.getxattr(f, os("user.max")).unwrap(),
        vec![9; XATTR_VALUE_MAX]
    );
    assert_eq!(fs.getxattr(fifo, os("trusted.x")).unwrap(), b"1");
    assert_eq!(
        fs.getxattr(f, os("user.a")).unwrap_err().errno(),
        libc::ENODATA
    );
    // Chmod after attributes: the attribute compaction of a file keeps them.
    for i in 0..100 {
        fs.set_permissions("/f", 0o600 | (i & 0o77)).unwrap();
    }
    let fs = remount(fs, &pool);
    assert_eq!(names(&fs, f), expect_f);
    // An unlinked inode's attributes go with it.
    fs.remove_file("/f").unwrap();
    assert!(matches!(
        fs.getxattr(f, os("user.max")),
        Err(Error::NotFound(_))
    ));
    fs.unmount().unwrap();
}

#[test]
fn exchange_swaps_names_in_one_and_across_directories() {
    let (_d, pool, fs) = fresh(64 << 20);
    fs.create_dir_all("/a/sub").unwrap();
    fs.create_dir("/b").unwrap();
    fs.write("/a/x", b"x").unwrap();
    fs.write("/a/y", b"y").unwrap();
    fs.write("/b/z", b"z").unwrap();
    let ino = |fs: &Fs, p: &str| fs.metadata(p).unwrap().ino;
    let (a, b) = (ino(&fs, "/a"), ino(&fs, "/b"));
    // Same directory.
    exchange(&fs, a, "x", a, "y").unwrap();
    assert_eq!(fs.read("/a/x").unwrap(), b"y");
    assert_eq!(fs.read("/a/y").unwrap(), b"x");
    // Across directories, a file with a directory.
    exchange(&fs, a, "sub", b, "z").unwrap();
    assert_eq!(fs.read("/a/sub").unwrap(), b"z");
    assert!(fs.metadata("/b/z").unwrap().is_dir());
    assert_eq!(
        fs.metadata("/a").unwrap().nlink,
        2,
        "a lost its subdirectory"
    );
    assert_eq!(fs.metadata("/b").unwrap().nlink, 3, "b gained one");
    fs.write("/b/z/inside", b"i").unwrap();
    assert_eq!(fs.read("/b/z/../z/inside").unwrap(), b"i");
    // Errors: a missing name; a directory into its own subtree.
    let z = ino(&fs, "/b/z");
    assert_eq!(
        exchange(&fs, a, "x", b, "nope").unwrap_err().errno(),
        libc::ENOENT
    );
    assert_eq!(
        exchange(&fs, ROOT_INO, "b", z, "inside")
            .unwrap_err()
            .errno(),
        libc::EINVAL
    );
    // A name with itself: nothing happens.
    exchange(&fs, a, "x", a, "x").unwrap();
    let fs = remount(fs, &pool);
    assert_eq!(fs.read("/a/x").unwrap(), b"y");
    assert_eq!(fs.read("/a/y").unwrap(), b"x");
    assert_eq!(fs.read("/a/sub").unwrap(), b"z");
    assert_eq!(fs.read("/b/z/inside").unwrap(), b"i");
    assert_eq!(fs.metadata("/b").unwrap().nlink, 3);
    fs.unmount().unwrap();
}

#[test]
fn a_version_2_pool_mounts_and_is_marked_version_3_by_a_writable_mount() {
    let (_d, pool, fs) = fresh(64 << 20);
    fs.write("/old", b"from version 2").unwrap();
    fs.unmount().unwrap();
    let set_version = |v: u32| {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&pool)
            .unwrap();
        for block in [0u64, 1] {
            let mut sb = [0u8; 96];
            f.read_exact_at(&mut sb, block * 4096).unwrap();
            sb[8..12].copy_from_slice(&v.to_le_bytes());
            let crc = crc32fast::hash(&sb[..92]);
            sb[92..96].copy_from_slice(&crc.to_le_bytes());
            f.write_all_at(&sb, block * 4096).unwrap();
        }
    };
    let version = || {
        let b = std::fs::read(&pool).unwrap();
        u32::from_le_bytes(b[8..12].try_into().unwrap())
    };
    set_version(2);
    let ro = {
        let mut mo = MountOptions::default();
        mo.read_only = true;
        mo
    };
    let fs = Fs::mount(&pool, &ro).unwrap();
    assert_eq!(fs.read("/old").unwrap(), b"from version 2");
    fs.unmount().unwrap();
    assert_eq!(version(), 2, "a read-only mount writes nothing");
    let fs = Fs::mount(&pool, &MountOptions::default()).unwrap();
    assert_eq!(fs.read("/old").unwrap(), b"from version 2");
    fs.unmount().unwrap();
    assert_eq!(version(), manyfs::format::SINGLE_FILE_FORMAT_VERSION);
    set_version(manyfs::format::FORMAT_VERSION + 1);
    let err = Fs::mount(&pool, &MountOptions::default()).err().unwrap();
    assert!(
        err.to_string().contains("unsupported format version"),
        "{err}"
    );
}

#[test]
fn posix_acls_keep_the_mode_in_step_and_are_inherited() {
    const ACCESS: &str = "system.posix_acl_access";
    const DEFAULT: &str = "system.posix_acl_default";
    let (_d, pool, fs) = fresh(64 << 20);
    let f = fs
        .mknod(ROOT_INO, os("f"), S_IFREG | 0o600, 0, 0, 0)
        .unwrap()
        .ino;
    // user::rw- user:1000:r-x group::--- mask::r-x other::---
    let named = acl("u::rw-,u:1000:r-x,g::---,m::r-x,o::---");
    fs.setxattr(f, os(ACCESS), &named, XattrSet::Any).unwrap();
    assert_eq!(
        fs.stat(f).unwrap().mode,
        0o650,
        "the mask shows as the group bits"
    );
    // chmod moves the mask (not the owning group's entry).
    fs.set_permissions("/f", 0o4640).unwrap();
    let now = fs.getxattr(f, os(ACCESS)).unwrap();
    assert_eq!(now, acl("u::rw-,u:1000:r-x,g::---,m::r--,o::---"));
    // A list the mode says all of is not kept: it only sets the mode.
    let minimal = acl("u::rwx,g::r-x,o::--x");
    fs.setxattr(f, os(ACCESS), &minimal, XattrSet::Any).unwrap();
    assert_eq!(fs.stat(f).unwrap().mode, 0o4751);
    assert_eq!(
        fs.getxattr(f, os(ACCESS)).unwrap_err().errno(),
        libc::ENODATA
    );
    // Default lists: directories only; inherited by new inodes.
    assert_eq!(
        fs.setxattr(f, os(DEFAULT), &named, XattrSet::Any)
            .unwrap_err()
            .errno(),
        libc::EPERM
    );
    let d = fs
        .mknod(ROOT_INO, os("d"), S_IFDIR | 0o755, 0, 0, 0)
        .unwrap()
        .ino;
    // default: user::rwx user:1000:rwx group::r-x mask::rwx other::r-x
    let default = acl("u::rwx,u:1000:rwx,g::r-x,m::rwx,o::r-x");
    fs.setxattr(d, os(DEFAULT), &default, XattrSet::Any)
        .unwrap();
    let child = fs.mknod(d, os("new"), S_IFREG | 0o666, 0, 0, 0).unwrap();
    assert_eq!(child.mode, 0o664, "mode masked by the default list");
    assert_eq!(
        fs.getxattr(child.ino, os(ACCESS)).unwrap(),
        acl("u::rw-,u:1000:rwx,g::r-x,m::rw-,o::r--")
    );
    let sub = fs.mknod(d, os("sub"), S_IFDIR | 0o777, 0, 0, 0).unwrap();
    assert_eq!(sub.mode, 0o775);
    assert_eq!(fs.getxattr(sub.ino, os(DEFAULT)).unwrap(), default);
    let link = fs.symlink_at(d, os("l"), Path::new("new"), 0, 0).unwrap();
    assert!(
        fs.listxattr(link.ino).unwrap().is_empty(),
        "symlinks get no ACL"
    );
    let fs = remount(fs, &pool);
    assert_eq!(fs.metadata("/d/new").unwrap().mode, 0o664);
    assert_eq!(fs.getxattr(sub.ino, os(DEFAULT)).unwrap(), default);
    assert_eq!(fs.stat(f).unwrap().mode, 0o4751);
    fs.unmount().unwrap();

    // A mount that inherits no ACLs (nobody enforces them there): the
    // mode asked for, no access list, no default list on a subdirectory.
    let opts = {
        let mut mo = MountOptions::default();
        mo.inherit_acls = false;
        mo
    };
    let fs = Fs::mount(&pool, &opts).unwrap();
    let plain = fs.mknod(d, os("plain"), S_IFREG | 0o666, 0, 0, 0).unwrap();
    assert_eq!(plain.mode & 0o7777, 0o666);
    assert_eq!(
        fs.getxattr(plain.ino, os(ACCESS)).unwrap_err().errno(),
        libc::ENODATA
    );
    let plain_sub = fs
        .mknod(d, os("plain-sub"), S_IFDIR | 0o700, 0, 0, 0)
        .unwrap();
    assert_eq!(plain_sub.mode & 0o7777, 0o700);
    assert_eq!(
        fs.getxattr(plain_sub.ino, os(DEFAULT)).unwrap_err().errno(),
        libc::ENODATA
    );
    // The directory's own default list is untouched.
    assert_eq!(fs.getxattr(d, os(DEFAULT)).unwrap(), default);
    fs.unmount().unwrap();
}
