//! Several users on one mount made by root, as on a kernel file system:
//! every user is served, the kernel checks permissions against the stored
//! mode and owner (`default_permissions`), sticky and setgid directories
//! behave, writes by unprivileged users clear setuid/setgid; `-o private`
//! keeps other users out. Also: trees with FIFOs, device nodes, sockets,
//! hard links, extended attributes and POSIX ACLs copied in and out with
//! `cp -a` and `rsync -aHAX` come back identical.
//!
//! The other user is uid/gid 65534 (`nobody`), reached with `setpriv`
//! (util-linux). These tests need root; without it they are skipped with
//! the reason printed, except under `CI=true`.

mod common;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

use common::*;

const NOBODY: u32 = 65534;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A fresh pool mounted with default options, when the test can run:
/// FUSE is there and we are root.
fn mounted_as_root(test: &str) -> Option<(Scratch, manyfs_fuse::MountedFs)> {
    if !fuse_available(test) {
        return None;
    }
    if !is_root() {
        skip(test, Lack::Setup, "needs root to act as another user");
        return None;
    }
    for tool in ["setpriv", "rsync", "setfattr", "setfacl"] {
        require_tool(tool);
    }
    let s = Scratch::new();
    let m = s.mount(&[]);
    Some((s, m))
}

/// Run the shell script `script` as uid/gid 65534 in `dir`; returns its
/// exit status and output. `$M` is the mount point in the script.
fn as_nobody(dir: &Path, mnt: &Path, script: &str) -> (bool, String) {
    let out = Command::new("setpriv")
        .args([
            &format!("--reuid={NOBODY}"),
            &format!("--regid={NOBODY}"),
            "--clear-groups",
            "--",
            "sh",
            "-c",
            script,
        ])
        .current_dir(dir)
        .env("M", mnt)
        .output()
        .expect("run setpriv");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn mode(p: &Path) -> u32 {
    fs::symlink_metadata(p).unwrap().mode() & 0o7777
}

#[test]
fn another_user_on_a_root_mount_works_where_ext4_allows_and_is_denied_where_it_denies() {
    let Some((s, m)) = mounted_as_root("another_user_on_a_root_mount") else {
        return;
    };
    let pubd = s.mnt.join("pub");
    fs::create_dir(&pubd).unwrap();
    fs::set_permissions(&pubd, fs::Permissions::from_mode(0o1777)).unwrap();
    fs::write(pubd.join("rootfile"), b"root's").unwrap();
    fs::set_permissions(pubd.join("rootfile"), fs::Permissions::from_mode(0o644)).unwrap();
    run_ok(
        Command::new("setfattr")
            .args(["-n", "user.u", "-v", "1"])
            .arg(pubd.join("rootfile")),
    );
    run_ok(
        Command::new("setfattr")
            .args(["-n", "trusted.t", "-v", "1"])
            .arg(pubd.join("rootfile")),
    );
    // Writable by everyone, but setuid root / setgid with group execute.
    for (name, m) in [("suid", 0o4777), ("sgid", 0o2777), ("sgid-noexec", 0o2767)] {
        fs::write(pubd.join(name), b"#!/bin/sh\n").unwrap();
        fs::set_permissions(pubd.join(name), fs::Permissions::from_mode(m)).unwrap();
    }
    // A root file readable by the other user through an ACL alone, and a
    // directory whose default ACL lets that user write what it creates.
    fs::write(s.mnt.join("acl-file"), b"by acl").unwrap();
    fs::set_permissions(s.mnt.join("acl-file"), fs::Permissions::from_mode(0o600)).unwrap();
    run_ok(
        Command::new("setfacl")
            .args(["-m", "u:65534:r"])
            .arg(s.mnt.join("acl-file")),
    );
    fs::create_dir(s.mnt.join("acl-dir")).unwrap();
    run_ok(
        Command::new("setfacl")
            .args(["-m", "u:65534:rwx", "-d", "-m", "u:65534:rwx"])
            .arg(s.mnt.join("acl-dir")),
    );
    fs::write(s.mnt.join("acl-dir/inherits"), b"x").unwrap();
    // A setgid directory owned by group 100.
    let sg = s.mnt.join("sgdir");
    fs::create_dir(&sg).unwrap();
    std::os::unix::fs::chown(&sg, Some(0), Some(100)).unwrap();
    fs::set_permissions(&sg, fs::Permissions::from_mode(0o2777)).unwrap();

    let script = r#"
set -u
fail() { echo "FAIL: $*"; exit 1; }
deny() { if "$@" 2>/dev/null; then fail "allowed: $*"; fi; }
cd "$M/pub" || fail "cd"
# create, write, chmod, rename, link, symlink, mkdir, remove: own files
echo mine > mine || fail "create"
chmod 600 mine || fail "chmod"
[ "$(stat -c %a:%u:%g mine)" = "600:65534:65534" ] || fail "owner/mode $(stat -c %a:%u:%g mine)"
mv mine mine2 || fail "rename"
[ "$(cat mine2)" = mine ] || fail "read back"
ln mine2 hard || fail "link"
ln -s mine2 soft || fail "symlink"
mkdir d && mkdir d/e || fail "mkdir"
mkfifo d/fifo || fail "mkfifo"
touch -d @1000000000 mine2 || fail "utimes on own file"
rm -r d hard soft || fail "remove own"
# denied as on ext4
deny rm rootfile                      # sticky directory, another owner
deny mv rootfile stolen               # same
deny sh -c 'echo x >> rootfile'       # 0644 root file
deny chmod 777 rootfile               # not the owner
deny chown 0 mine2                    # giving a file away needs CAP_CHOWN
deny touch -d @1000000000 rootfile    # explicit times: owner only
deny touch rootfile                   # "now" needs write permission
deny mknod d2 c 1 3                   # devices need CAP_MKNOD
deny mkdir "$M/not-in-root"           # root directory is 0755 root
[ "$(cat rootfile)" = "root's" ] || fail "rootfile changed"
# extended attributes: user. ones by the file's permissions; trusted. ones
# are neither listed nor readable without CAP_SYS_ADMIN
[ "$(getfattr --only-values -n user.u rootfile)" = 1 ] || fail "read user.u"
deny setfattr -n user.v -v 2 rootfile
getfattr -d -m - rootfile | grep -q trusted && fail "trusted. listed"
deny getfattr -n trusted.t rootfile
setfattr -n user.mine -v 3 mine2 || fail "setfattr on own file"
# writes by an unprivileged user clear setuid, and setgid with g+x
echo x >> suid || fail "write suid"
echo x >> sgid || fail "write sgid"
echo x >> sgid-noexec || fail "write sgid-noexec"
# POSIX ACLs grant what the mode does not
[ "$(cat "$M/acl-file")" = "by acl" ] || fail "read through an ACL"
deny sh -c 'echo x >> "$M/acl-file"'
echo more >> "$M/acl-dir/inherits" || fail "write through an inherited ACL"
echo new > "$M/acl-dir/mine" || fail "create through a directory ACL"
# setgid directory: new entries get its group, subdirectories its bit
cd "$M/sgdir" || fail "cd sgdir"
echo f > f && mkdir sub || fail "create in sgdir"
[ "$(stat -c %g f)" = 100 ] || fail "file group $(stat -c %g f)"
[ "$(stat -c %g:%a sub)" = "100:2755" ] || fail "subdir $(stat -c %g:%a sub)"
echo ok
"#;
    let (ok, out) = as_nobody(s.dir.path(), &s.mnt, script);
    assert!(ok && out.trim_end().ends_with("ok"), "as uid 65534:\n{out}");
    assert_eq!(
        mode(&pubd.join("suid")),
        0o777,
        "setuid cleared by the write"
    );
    assert_eq!(mode(&pubd.join("sgid")), 0o777, "setgid (with g+x) cleared");
    assert_eq!(
        mode(&pubd.join("sgid-noexec")),
        0o767,
        "setgid without g+x cleared too: the writer is outside the file's group (Linux 6.2+)"
    );
    // Root writing keeps the bits (CAP_FSETID), and truncation by another
    // user clears them.
    fs::set_permissions(pubd.join("suid"), fs::Permissions::from_mode(0o4777)).unwrap();
    fs::write(pubd.join("suid"), b"root rewrites").unwrap();
    assert_eq!(mode(&pubd.join("suid")), 0o4777);
    let (ok, out) = as_nobody(s.dir.path(), &s.mnt, "truncate -s 0 \"$M/pub/suid\"");
    assert!(ok, "{out}");
    assert_eq!(
        mode(&pubd.join("suid")),
        0o777,
        "setuid cleared by truncate"
    );
    fs::set_permissions(pubd.join("suid"), fs::Permissions::from_mode(0o4777)).unwrap();
    let (ok, out) = as_nobody(s.dir.path(), &s.mnt, ": > \"$M/pub/suid\"");
    assert!(ok, "{out}");
    assert_eq!(mode(&pubd.join("suid")), 0o777, "setuid cleared by O_TRUNC");
    // chmod narrows the ACL's mask: the other user loses access.
    fs::set_permissions(s.mnt.join("acl-file"), fs::Permissions::from_mode(0o600)).unwrap();
    let (ok, _) = as_nobody(s.dir.path(), &s.mnt, "cat \"$M/acl-file\"");
    assert!(!ok, "the ACL entry is masked out after chmod 600");
    // chown clears setuid even for root.
    fs::set_permissions(pubd.join("suid"), fs::Permissions::from_mode(0o4755)).unwrap();
    std::os::unix::fs::chown(pubd.join("suid"), Some(NOBODY), None).unwrap();
    assert_eq!(mode(&pubd.join("suid")), 0o755, "setuid cleared by chown");
    // The owner may delete in the sticky directory; root may delete anything.
    let (ok, out) = as_nobody(s.dir.path(), &s.mnt, "rm \"$M/pub/mine2\"");
    assert!(ok, "{out}");
    fs::remove_file(pubd.join("rootfile")).unwrap();
    assert_eq!(m.stats().handler_panics(), 0);
    unmount(m);
    s.fsck();

    // -o private: only the mounting user.
    let m = s.mount(&["private"]);
    let (ok, out) = as_nobody(s.dir.path(), &s.mnt, "ls \"$M/pub\"");
    assert!(!ok, "a private mount served another user: {out}");
    assert!(out.contains("Permission denied"), "{out}");
    assert!(fs::read_dir(&pubd).is_ok(), "root still uses it");
    unmount(m);
}

/// A tree with every file type, hard links, extended attributes, odd modes
/// and owners.
fn make_special_tree(root: &Path) {
    fs::create_dir_all(root.join("dir/sub")).unwrap();
    fs::write(root.join("file"), pattern(1, 10_000)).unwrap();
    fs::write(root.join("dir/other"), pattern(2, 5000)).unwrap();
    fs::hard_link(root.join("file"), root.join("dir/hardlink")).unwrap();
    std::os::unix::fs::symlink("../file", root.join("dir/symlink")).unwrap();
    let sh = |cmd: &str| run_ok(Command::new("sh").arg("-c").arg(cmd).current_dir(root));
    sh("mkfifo fifo && mknod chr c 1 3 && mknod blk b 7 200 && mknod dir/sub/fifo2 p");
    sh("chmod 4755 file && chmod 2750 dir && chmod 1777 dir/sub && chown 1234:5678 dir/other");
    sh("setfacl -m u:1234:rw,g:5678:r dir/other && setfacl -d -m u:1234:rx dir/sub");
    sh("setfattr -n user.color -v blue file \
        && setfattr -n user.empty dir \
        && setfattr -n trusted.t -v 0x00ff00 dir/other \
        && setfattr -n user.long -v \"$(head -c 3000 /dev/zero | tr '\\0' x)\" dir/sub");
    // A socket (bound by a short-lived process, left behind like any socket).
    sh(
        "python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('sock')\" 2>/dev/null \
        || mknod sock p",
    );
}

/// `rsync -n -aHAX --checksum --itemize-changes` from `a/` to `b/`: what it
/// would change (nothing when the trees are identical).
fn rsync_differences(a: &Path, b: &Path) -> String {
    run_ok(
        Command::new("rsync")
            .args(["-n", "-aHAX", "--checksum", "--itemize-changes", "--delete"])
            .arg(format!("{}/", a.display()))
            .arg(format!("{}/", b.display())),
    )
}

#[test]
fn cp_a_and_rsync_ax_copy_every_file_type_links_and_xattrs_in_and_out() {
    let Some((s, m)) = mounted_as_root("cp_a_and_rsync_ax_copy_every_file_type") else {
        return;
    };
    let src = s.dir.path().join("src");
    make_special_tree(&src);
    run_ok(Command::new("cp").arg("-a").arg(&src).arg(s.mnt.join("cp")));
    run_ok(
        Command::new("rsync")
            .arg("-aHAX")
            .arg(format!("{}/", src.display()))
            .arg(s.mnt.join("rsync")),
    );
    for copy in ["cp", "rsync"] {
        let diff = rsync_differences(&src, &s.mnt.join(copy));
        assert!(diff.trim().is_empty(), "{copy} -> mount differs:\n{diff}");
    }
    let file = fs::metadata(s.mnt.join("rsync/file")).unwrap();
    assert_eq!((file.nlink(), file.mode() & 0o7777), (2, 0o4755));
    let chr = fs::symlink_metadata(s.mnt.join("cp/chr")).unwrap();
    assert_eq!(chr.rdev(), libc::makedev(1, 3));
    unmount(m);
    s.fsck();

    // After a remount, copy both back out.
    let m = s.mount(&[]);
    for copy in ["cp", "rsync"] {
        let back = s.dir.path().join(format!("back-{copy}"));
        if copy == "cp" {
            run_ok(
                Command::new("cp")
                    .arg("-a")
                    .arg(s.mnt.join(copy))
                    .arg(&back),
            );
        } else {
            run_ok(
                Command::new("rsync")
                    .arg("-aHAX")
                    .arg(format!("{}/", s.mnt.join(copy).display()))
                    .arg(&back),
            );
        }
        let diff = rsync_differences(&src, &back);
        assert!(diff.trim().is_empty(), "{copy} round trip differs:\n{diff}");
    }
    let out = run_ok(
        Command::new("getfattr")
            .args(["-d", "-e", "hex", "-m", "-", "--absolute-names"])
            .arg(s.mnt.join("rsync/dir/other")),
    );
    assert!(out.contains("trusted.t=0x00ff00"), "{out}");
    assert_eq!(m.stats().handler_panics(), 0);
    unmount(m);
    s.fsck();
}

/// Every way a user without CAP_FSETID changes a file's data, on a file
/// whose setuid/setgid bits the kernel has cached (root wrote it and looked
/// at it first): the modes `stat` shows afterwards through the mount are
/// tmpfs's for the same script, with and without `writeback_cache`. The
/// kernel caches attributes for a day by default, so a bit cleared by the
/// daemon alone stayed visible (4777 after `dd conv=notrunc` by another
/// user, where tmpfs shows 777).
#[test]
fn writes_by_another_user_clear_setuid_and_setgid_as_on_tmpfs() {
    let test = "writes_by_another_user_clear_setuid_and_setgid_as_on_tmpfs";
    if !fuse_available(test) {
        return;
    }
    if !is_root() {
        skip(test, Lack::Setup, "needs root to act as another user");
        return;
    }
    require_tool("setpriv");
    // Run as root: each file is written and stat'ed by root, then changed
    // by uid 65534 in one of six ways, then stat'ed by root again.
    let script = r#"
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups -- sh -c "$1" _ "$2"; }
for kind in notrunc append rdwr otrunc truncate fallocate; do
  for m in 4777 2777 2767 6777 0777; do
    f="$D/$kind-$m"
    echo root > "$f"; chmod "$m" "$f"; stat -c %a "$f" > /dev/null
    case $kind in
      notrunc) as_nobody 'echo zz | dd of="$1" conv=notrunc 2> /dev/null' "$f" ;;
      append) as_nobody 'echo zz >> "$1"' "$f" ;;
      rdwr) as_nobody 'exec 3<> "$1"; echo zz >&3' "$f" ;;
      otrunc) as_nobody ': > "$1"' "$f" ;;
      truncate) as_nobody 'truncate -s 1 "$1"' "$f" ;;
      fallocate) as_nobody 'fallocate -l 8192 "$1"' "$f" ;;
    esac || echo "$kind $m failed"
    echo "$kind $m -> $(stat -c %a "$f")"
  done
done
"#;
    let run = |dir: &Path| {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o777)).unwrap();
        run_ok(Command::new("sh").args(["-c", script]).env("D", dir))
    };
    let reference = tempfile::tempdir_in("/dev/shm").unwrap();
    let expected = run(reference.path());
    assert!(
        expected.contains("notrunc 4777 -> 777") && !expected.contains("failed"),
        "tmpfs is the reference:\n{expected}"
    );
    // With writeback_cache the kernel's FUSE module strips the bits of a
    // buffered write itself, by the rule before Linux 6.2: a setgid file
    // without group execute keeps its bit (docs/mount.md).
    let buffered_rule: String = expected
        .lines()
        .map(|l| match l.split_once(" 2767 -> ") {
            Some((kind, _)) if ["notrunc", "append", "rdwr"].contains(&kind) => {
                format!("{kind} 2767 -> 2767\n")
            }
            _ => format!("{l}\n"),
        })
        .collect();
    for (options, want) in [
        (&[][..], &expected),
        (&["writeback_cache"][..], &buffered_rule),
    ] {
        let s = Scratch::new();
        let m = s.mount(options);
        let dir = s.mnt.join("d");
        fs::create_dir(&dir).unwrap();
        let got = run(&dir);
        unmount(m);
        assert_eq!(&got, want, "with -o {options:?} (left: manyfs)");
    }
}
