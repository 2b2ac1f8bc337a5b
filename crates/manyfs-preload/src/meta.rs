//! Attributes: the `stat` family (glibc's `__xstat` entry points and
//! `statx` included), `statfs`/`statvfs`, `access`, and changing mode,
//! owner and times.

use crate::table::Open;
use crate::{errno_of, mounted, on_fd, on_path, real, state};
use libc::{
    c_char, c_int, c_uint, mode_t, stat as Stat, statfs as StatFs, statvfs as StatVfs,
    statx as Statx, timespec,
};
use manyfs::lowlevel::InodeOps;
use manyfs::lowlevel::SetAttr;
use manyfs::{FileKind, Fs, Metadata};
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The device number files under the pool report (`st_dev`): one for the
/// whole pool, none the kernel hands out (major 0x6d, "m").
const DEV_MAJOR: u32 = 0x6d;
const DEV_MINOR: u32 = 0x66;
/// `f_type` of `statfs`: "MFS\0".
const MANYFS_MAGIC: i64 = 0x0053_464d;

fn type_bits(kind: FileKind) -> u32 {
    match kind {
        FileKind::File => libc::S_IFREG,
        FileKind::Dir => libc::S_IFDIR,
        FileKind::Symlink => libc::S_IFLNK,
        FileKind::Fifo => libc::S_IFIFO,
        FileKind::CharDevice => libc::S_IFCHR,
        FileKind::BlockDevice => libc::S_IFBLK,
        FileKind::Socket => libc::S_IFSOCK,
    }
}

/// The `d_type` of a kind.
pub(crate) fn dirent_type(kind: FileKind) -> u8 {
    match kind {
        FileKind::File => libc::DT_REG,
        FileKind::Dir => libc::DT_DIR,
        FileKind::Symlink => libc::DT_LNK,
        FileKind::Fifo => libc::DT_FIFO,
        FileKind::CharDevice => libc::DT_CHR,
        FileKind::BlockDevice => libc::DT_BLK,
        FileKind::Socket => libc::DT_SOCK,
    }
}

fn split_time(t: SystemTime) -> (i64, i64) {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    (d.as_secs() as i64, i64::from(d.subsec_nanos()))
}

fn fill_stat(m: &Metadata, st: *mut Stat) -> Result<c_int, c_int> {
    if st.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller's buffer, checked non-null.
    unsafe { st.write(stat_of(m)) };
    Ok(0)
}

/// The `struct stat` of a file of the pool.
pub(crate) fn stat_of(m: &Metadata) -> Stat {
    // SAFETY: an all-zero `stat` is valid.
    let mut s: Stat = unsafe { std::mem::zeroed() };
    s.st_dev = libc::makedev(DEV_MAJOR, DEV_MINOR);
    s.st_ino = m.ino;
    s.st_nlink = u64::from(m.nlink);
    s.st_mode = type_bits(m.kind) | (m.mode & 0o7777);
    s.st_uid = m.uid;
    s.st_gid = m.gid;
    s.st_rdev = m.rdev;
    s.st_size = m.size as i64;
    s.st_blksize = 4096;
    s.st_blocks = m.blocks as i64;
    (s.st_atime, s.st_atime_nsec) = split_time(m.atime);
    (s.st_mtime, s.st_mtime_nsec) = split_time(m.mtime);
    (s.st_ctime, s.st_ctime_nsec) = split_time(m.ctime);
    s
}

fn fill_statx(m: &Metadata, stx: *mut Statx) -> Result<c_int, c_int> {
    if stx.is_null() {
        return Err(libc::EFAULT);
    }
    let ts = |t: SystemTime| {
        let (sec, nsec) = split_time(t);
        // SAFETY: an all-zero `statx_timestamp` is valid.
        let mut ts: libc::statx_timestamp = unsafe { std::mem::zeroed() };
        (ts.tv_sec, ts.tv_nsec) = (sec, nsec as u32);
        ts
    };
    // SAFETY: an all-zero `statx` is valid.
    let mut s: Statx = unsafe { std::mem::zeroed() };
    s.stx_mask = libc::STATX_BASIC_STATS;
    s.stx_blksize = 4096;
    s.stx_nlink = m.nlink;
    s.stx_uid = m.uid;
    s.stx_gid = m.gid;
    s.stx_mode = (type_bits(m.kind) | (m.mode & 0o7777)) as u16;
    s.stx_ino = m.ino;
    s.stx_size = m.size;
    s.stx_blocks = m.blocks;
    s.stx_atime = ts(m.atime);
    s.stx_mtime = ts(m.mtime);
    s.stx_ctime = ts(m.ctime);
    s.stx_rdev_major = libc::major(m.rdev);
    s.stx_rdev_minor = libc::minor(m.rdev);
    s.stx_dev_major = DEV_MAJOR;
    s.stx_dev_minor = DEV_MINOR;
    // SAFETY: the caller's buffer, checked non-null.
    unsafe { stx.write(s) };
    Ok(0)
}

fn meta_of(fs: &Fs, p: &Path, follow: bool) -> Result<Metadata, c_int> {
    if follow {
        fs.metadata(p)
    } else {
        fs.symlink_metadata(p)
    }
    .map_err(errno_of)
}

fn fd_meta(o: &Open) -> Result<Metadata, c_int> {
    o.file.metadata().map_err(errno_of)
}

/// `fstatat` with `AT_EMPTY_PATH` and `AT_SYMLINK_NOFOLLOW`.
///
/// # Safety
/// `path` is null or NUL-terminated; `st` is null or writable.
unsafe fn do_fstatat(dirfd: c_int, path: *const c_char, st: *mut Stat, flags: c_int) -> c_int {
    // SAFETY: `path` is null or NUL-terminated (caller).
    if flags & libc::AT_EMPTY_PATH != 0 && (path.is_null() || unsafe { *path } == 0) {
        return do_fstat(dirfd, st);
    }
    let follow = flags & libc::AT_SYMLINK_NOFOLLOW == 0;
    // SAFETY: forwarded from the caller.
    unsafe {
        on_path(
            dirfd,
            path,
            |fs, p| fill_stat(&meta_of(fs, p, follow)?, st),
            |path| real::fstatat()(dirfd, path, st, flags),
        )
    }
}

fn do_fstat(fd: c_int, st: *mut Stat) -> c_int {
    on_fd(
        fd,
        |o| fill_stat(&fd_meta(o)?, st),
        // SAFETY: the caller's arguments, unchanged, to libc.
        || unsafe { real::fstat()(fd, st) },
    )
}

/// Define `stat`-family entry points in terms of `do_fstatat`/`do_fstat`.
macro_rules! stat_entry_points {
    ($( $(#[$doc:meta])* fn $name:ident($($arg:ident: $t:ty),*) => $body:expr; )*) => {$(
        $(#[$doc])*
        ///
        /// # Safety
        /// As the C function: the paths are NUL-terminated, the buffers writable.
        #[unsafe(no_mangle)]
        #[allow(unused_unsafe)]
        pub unsafe extern "C" fn $name($($arg: $t),*) -> c_int {
            // SAFETY: the caller's pointers, forwarded.
            unsafe { $body }
        }
    )*};
}

stat_entry_points! {
    /// `stat(2)`.
    fn stat(path: *const c_char, st: *mut Stat) => do_fstatat(libc::AT_FDCWD, path, st, 0);
    /// `stat64(2)`.
    fn stat64(path: *const c_char, st: *mut Stat) => do_fstatat(libc::AT_FDCWD, path, st, 0);
    /// `lstat(2)`.
    fn lstat(path: *const c_char, st: *mut Stat) => do_fstatat(libc::AT_FDCWD, path, st, libc::AT_SYMLINK_NOFOLLOW);
    /// `lstat64(2)`.
    fn lstat64(path: *const c_char, st: *mut Stat) => do_fstatat(libc::AT_FDCWD, path, st, libc::AT_SYMLINK_NOFOLLOW);
    /// `fstat(2)`.
    fn fstat(fd: c_int, st: *mut Stat) => do_fstat(fd, st);
    /// `fstat64(2)`.
    fn fstat64(fd: c_int, st: *mut Stat) => do_fstat(fd, st);
    /// `fstatat(2)` (`newfstatat` is its system call).
    fn fstatat(dirfd: c_int, path: *const c_char, st: *mut Stat, flags: c_int) => do_fstatat(dirfd, path, st, flags);
    /// `fstatat64(2)`.
    fn fstatat64(dirfd: c_int, path: *const c_char, st: *mut Stat, flags: c_int) => do_fstatat(dirfd, path, st, flags);
    /// glibc's `__xstat` (programs built before glibc 2.33 call it for `stat`).
    fn __xstat(ver: c_int, path: *const c_char, st: *mut Stat) => { let _ = ver; do_fstatat(libc::AT_FDCWD, path, st, 0) };
    /// glibc's `__xstat64`.
    fn __xstat64(ver: c_int, path: *const c_char, st: *mut Stat) => { let _ = ver; do_fstatat(libc::AT_FDCWD, path, st, 0) };
    /// glibc's `__lxstat`.
    fn __lxstat(ver: c_int, path: *const c_char, st: *mut Stat) => { let _ = ver; do_fstatat(libc::AT_FDCWD, path, st, libc::AT_SYMLINK_NOFOLLOW) };
    /// glibc's `__lxstat64`.
    fn __lxstat64(ver: c_int, path: *const c_char, st: *mut Stat) => { let _ = ver; do_fstatat(libc::AT_FDCWD, path, st, libc::AT_SYMLINK_NOFOLLOW) };
    /// glibc's `__fxstat`.
    fn __fxstat(ver: c_int, fd: c_int, st: *mut Stat) => { let _ = ver; do_fstat(fd, st) };
    /// glibc's `__fxstat64`.
    fn __fxstat64(ver: c_int, fd: c_int, st: *mut Stat) => { let _ = ver; do_fstat(fd, st) };
    /// glibc's `__fxstatat`.
    fn __fxstatat(ver: c_int, dirfd: c_int, path: *const c_char, st: *mut Stat, flags: c_int) => { let _ = ver; do_fstatat(dirfd, path, st, flags) };
    /// glibc's `__fxstatat64`.
    fn __fxstatat64(ver: c_int, dirfd: c_int, path: *const c_char, st: *mut Stat, flags: c_int) => { let _ = ver; do_fstatat(dirfd, path, st, flags) };
}

/// `statx(2)`.
///
/// # Safety
/// As `statx(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn statx(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mask: c_uint,
    stx: *mut Statx,
) -> c_int {
    // SAFETY: `path` is null or NUL-terminated (caller).
    if flags & libc::AT_EMPTY_PATH != 0 && (path.is_null() || unsafe { *path } == 0) {
        return on_fd(
            dirfd,
            |o| fill_statx(&fd_meta(o)?, stx),
            // SAFETY: the caller's arguments, unchanged, to libc.
            || unsafe { real::statx()(dirfd, path, flags, mask, stx) },
        );
    }
    let follow = flags & libc::AT_SYMLINK_NOFOLLOW == 0;
    // SAFETY: forwarded from the caller.
    unsafe {
        on_path(
            dirfd,
            path,
            |fs, p| fill_statx(&meta_of(fs, p, follow)?, stx),
            |path| real::statx()(dirfd, path, flags, mask, stx),
        )
    }
}

fn fill_statfs(fs: &Fs, out: *mut StatFs) -> Result<c_int, c_int> {
    if out.is_null() {
        return Err(libc::EFAULT);
    }
    let s = fs.statfs();
    // SAFETY: an all-zero `statfs` is valid.
    let mut o: StatFs = unsafe { std::mem::zeroed() };
    o.f_type = MANYFS_MAGIC;
    o.f_bsize = s.block_size as i64;
    o.f_frsize = s.block_size as i64;
    o.f_blocks = s.total_blocks;
    o.f_bfree = s.free_blocks;
    o.f_bavail = s.free_blocks;
    o.f_files = s.total_inodes;
    o.f_ffree = s.free_inodes;
    o.f_namelen = s.name_max as i64;
    // SAFETY: the caller's buffer, checked non-null.
    unsafe { out.write(o) };
    Ok(0)
}

fn fill_statvfs(fs: &Fs, out: *mut StatVfs) -> Result<c_int, c_int> {
    if out.is_null() {
        return Err(libc::EFAULT);
    }
    let s = fs.statfs();
    // SAFETY: an all-zero `statvfs` is valid.
    let mut o: StatVfs = unsafe { std::mem::zeroed() };
    o.f_bsize = s.block_size;
    o.f_frsize = s.block_size;
    o.f_blocks = s.total_blocks;
    o.f_bfree = s.free_blocks;
    o.f_bavail = s.free_blocks;
    o.f_files = s.total_inodes;
    o.f_ffree = s.free_inodes;
    o.f_favail = s.free_inodes;
    o.f_fsid = u64::from(libc::makedev(DEV_MAJOR, DEV_MINOR) as u32);
    o.f_namemax = s.name_max;
    // SAFETY: the caller's buffer, checked non-null.
    unsafe { out.write(o) };
    Ok(0)
}

/// `statfs(2)`.
///
/// # Safety
/// As `statfs(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn statfs(path: *const c_char, out: *mut StatFs) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe {
        on_path(
            libc::AT_FDCWD,
            path,
            |fs, _| fill_statfs(fs, out),
            |path| real::statfs64()(path, out),
        )
    }
}

/// `statfs64(2)`.
///
/// # Safety
/// As `statfs(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn statfs64(path: *const c_char, out: *mut StatFs) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { statfs(path, out) }
}

/// `fstatfs(2)`.
#[unsafe(no_mangle)]
pub extern "C" fn fstatfs(fd: c_int, out: *mut StatFs) -> c_int {
    on_fd(
        fd,
        |_| fill_statfs(mounted()?, out),
        // SAFETY: the caller's arguments, unchanged, to libc.
        || unsafe { real::fstatfs64()(fd, out) },
    )
}

/// `fstatfs64(2)`.
#[unsafe(no_mangle)]
pub extern "C" fn fstatfs64(fd: c_int, out: *mut StatFs) -> c_int {
    fstatfs(fd, out)
}

/// `statvfs(3)` (glibc's calls `statfs` internally, out of reach).
///
/// # Safety
/// As `statvfs(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn statvfs(path: *const c_char, out: *mut StatVfs) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe {
        on_path(
            libc::AT_FDCWD,
            path,
            |fs, _| fill_statvfs(fs, out),
            |path| real::statvfs64()(path, out),
        )
    }
}

/// `statvfs64(3)`.
///
/// # Safety
/// As `statvfs(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn statvfs64(path: *const c_char, out: *mut StatVfs) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { statvfs(path, out) }
}

/// `fstatvfs(3)`.
#[unsafe(no_mangle)]
pub extern "C" fn fstatvfs(fd: c_int, out: *mut StatVfs) -> c_int {
    on_fd(
        fd,
        |_| fill_statvfs(mounted()?, out),
        // SAFETY: the caller's arguments, unchanged, to libc.
        || unsafe { real::fstatvfs64()(fd, out) },
    )
}

/// `fstatvfs64(3)`.
#[unsafe(no_mangle)]
pub extern "C" fn fstatvfs64(fd: c_int, out: *mut StatVfs) -> c_int {
    fstatvfs(fd, out)
}

/// `access` on ours: the file must exist; `X_OK` needs an execute bit
/// on a non-directory. Permission bits are otherwise not checked (the
/// pool belongs to the process that mounted it).
fn access_ours(fs: &Fs, p: &Path, mode: c_int, follow: bool) -> Result<c_int, c_int> {
    let m = meta_of(fs, p, follow)?;
    if mode & libc::X_OK != 0 && !m.is_dir() && m.mode & 0o111 == 0 {
        return Err(libc::EACCES);
    }
    if mode & libc::W_OK != 0 && fs.options().read_only {
        return Err(libc::EROFS);
    }
    Ok(0)
}

/// `faccessat(2)`.
///
/// # Safety
/// As `faccessat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn faccessat(
    dirfd: c_int,
    path: *const c_char,
    mode: c_int,
    flags: c_int,
) -> c_int {
    let follow = flags & libc::AT_SYMLINK_NOFOLLOW == 0;
    // SAFETY: forwarded from the caller.
    unsafe {
        on_path(
            dirfd,
            path,
            |fs, p| access_ours(fs, p, mode, follow),
            |path| real::faccessat()(dirfd, path, mode, flags),
        )
    }
}

/// `access(2)`.
///
/// # Safety
/// As `access(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn access(path: *const c_char, mode: c_int) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { faccessat(libc::AT_FDCWD, path, mode, 0) }
}

/// `euidaccess(3)`.
///
/// # Safety
/// As `access(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn euidaccess(path: *const c_char, mode: c_int) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { faccessat(libc::AT_FDCWD, path, mode, libc::AT_EACCESS) }
}

/// `eaccess(3)`.
///
/// # Safety
/// As `access(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn eaccess(path: *const c_char, mode: c_int) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { euidaccess(path, mode) }
}

/// Apply `attr` to the inode `p` names.
fn setattr_path(fs: &Fs, p: &Path, follow: bool, attr: &SetAttr) -> Result<c_int, c_int> {
    let ino = meta_of(fs, p, follow)?.ino;
    fs.setattr(ino, attr).map(|_| 0).map_err(errno_of)
}

fn setattr_fd(o: &Open, attr: &SetAttr) -> Result<c_int, c_int> {
    mounted()?
        .setattr(o.file.ino(), attr)
        .map(|_| 0)
        .map_err(errno_of)
}

fn mode_attr(mode: mode_t) -> SetAttr {
    SetAttr {
        mode: Some(mode & 0o7777),
        ..Default::default()
    }
}

/// `(uid_t)-1` and `(gid_t)-1` leave the owner or group as they are.
fn owner_attr(uid: c_uint, gid: c_uint) -> SetAttr {
    SetAttr {
        uid: (uid != u32::MAX).then_some(uid),
        gid: (gid != u32::MAX).then_some(gid),
        ..Default::default()
    }
}

/// `fchmodat(2)`.
///
/// # Safety
/// As `fchmodat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fchmodat(
    dirfd: c_int,
    path: *const c_char,
    mode: mode_t,
    flags: c_int,
) -> c_int {
    let follow = flags & libc::AT_SYMLINK_NOFOLLOW == 0;
    // SAFETY: forwarded from the caller.
    unsafe {
        on_path(
            dirfd,
            path,
            |fs, p| setattr_path(fs, p, follow, &mode_attr(mode)),
            |path| real::fchmodat()(dirfd, path, mode, flags),
        )
    }
}

/// `chmod(2)`.
///
/// # Safety
/// As `chmod(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn chmod(path: *const c_char, mode: mode_t) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { fchmodat(libc::AT_FDCWD, path, mode, 0) }
}

/// `fchmod(2)`.
#[unsafe(no_mangle)]
pub extern "C" fn fchmod(fd: c_int, mode: mode_t) -> c_int {
    on_fd(
        fd,
        |o| setattr_fd(o, &mode_attr(mode)),
        // SAFETY: the caller's arguments, unchanged, to libc.
        || unsafe { real::fchmod()(fd, mode) },
    )
}

/// `fchownat(2)`.
///
/// # Safety
/// As `fchownat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fchownat(
    dirfd: c_int,
    path: *const c_char,
    uid: c_uint,
    gid: c_uint,
    flags: c_int,
) -> c_int {
    let follow = flags & libc::AT_SYMLINK_NOFOLLOW == 0;
    // SAFETY: forwarded from the caller.
    unsafe {
        on_path(
            dirfd,
            path,
            |fs, p| setattr_path(fs, p, follow, &owner_attr(uid, gid)),
            |path| real::fchownat()(dirfd, path, uid, gid, flags),
        )
    }
}

/// `chown(2)`.
///
/// # Safety
/// As `chown(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn chown(path: *const c_char, uid: c_uint, gid: c_uint) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { fchownat(libc::AT_FDCWD, path, uid, gid, 0) }
}

/// `lchown(2)`.
///
/// # Safety
/// As `lchown(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lchown(path: *const c_char, uid: c_uint, gid: c_uint) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { fchownat(libc::AT_FDCWD, path, uid, gid, libc::AT_SYMLINK_NOFOLLOW) }
}

/// `fchown(2)`.
#[unsafe(no_mangle)]
pub extern "C" fn fchown(fd: c_int, uid: c_uint, gid: c_uint) -> c_int {
    on_fd(
        fd,
        |o| setattr_fd(o, &owner_attr(uid, gid)),
        // SAFETY: the caller's arguments, unchanged, to libc.
        || unsafe { real::fchown()(fd, uid, gid) },
    )
}

/// A time the pool can store: it keeps nanoseconds since 1970 in 64
/// bits (1970 to 2554). Outside that, `EOVERFLOW` with a line on stderr
/// (tmpfs takes times before 1970; the pool's format cannot hold them).
fn pool_time(sec: libc::time_t, nsec: libc::c_long) -> Result<SystemTime, c_int> {
    let ns = u64::try_from(sec)
        .ok()
        .and_then(|s| s.checked_mul(1_000_000_000))
        .and_then(|ns| ns.checked_add(nsec as u64));
    match ns {
        Some(ns) => Ok(UNIX_EPOCH + Duration::from_nanos(ns)),
        None => {
            state::say(&format!(
                "time {sec}.{nsec:09} is outside what the pool stores (1970 to 2554): EOVERFLOW"
            ));
            Err(libc::EOVERFLOW)
        }
    }
}

/// The times of `utimensat`: null for now, `UTIME_NOW`, `UTIME_OMIT`.
///
/// # Safety
/// `times` is null or points at two timespecs.
unsafe fn times_attr(times: *const timespec) -> Result<SetAttr, c_int> {
    let now = SystemTime::now();
    let one = |t: &timespec| -> Result<Option<SystemTime>, c_int> {
        match t.tv_nsec {
            libc::UTIME_OMIT => Ok(None),
            libc::UTIME_NOW => Ok(Some(now)),
            ns if (0..1_000_000_000).contains(&ns) => pool_time(t.tv_sec, ns).map(Some),
            _ => Err(libc::EINVAL),
        }
    };
    let (atime, mtime) = if times.is_null() {
        (Some(now), Some(now))
    } else {
        // SAFETY: the caller's promise: two timespecs.
        let t = unsafe { std::slice::from_raw_parts(times, 2) };
        (one(&t[0])?, one(&t[1])?)
    };
    Ok(SetAttr {
        atime,
        mtime,
        ..Default::default()
    })
}

/// `utimensat(2)`.
///
/// # Safety
/// As `utimensat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn utimensat(
    dirfd: c_int,
    path: *const c_char,
    times: *const timespec,
    flags: c_int,
) -> c_int {
    if path.is_null() {
        // Linux's `futimens` form.
        // SAFETY: forwarded from the caller.
        return unsafe { futimens(dirfd, times) };
    }
    let follow = flags & libc::AT_SYMLINK_NOFOLLOW == 0;
    // SAFETY: forwarded from the caller.
    unsafe {
        on_path(
            dirfd,
            path,
            |fs, p| setattr_path(fs, p, follow, &times_attr(times)?),
            |path| real::utimensat()(dirfd, path, times, flags),
        )
    }
}

/// `futimens(3)`.
///
/// # Safety
/// As `futimens(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn futimens(fd: c_int, times: *const timespec) -> c_int {
    on_fd(
        fd,
        // SAFETY: `times` is null or two timespecs (caller).
        |o| setattr_fd(o, &unsafe { times_attr(times) }?),
        // SAFETY: the caller's arguments, unchanged, to libc.
        || unsafe { real::futimens()(fd, times) },
    )
}

/// The times of `utimes`/`futimes` as `utimensat`'s: microseconds become
/// nanoseconds (out of range, `EINVAL`, as glibc's `utimes` gets from the
/// kernel's `utimensat`); null for now.
///
/// # Safety
/// `tv` is null or points at two timevals.
unsafe fn timevals_attr(tv: *const libc::timeval) -> Result<SetAttr, c_int> {
    if tv.is_null() {
        // SAFETY: null is `times_attr`'s "now".
        return unsafe { times_attr(std::ptr::null()) };
    }
    // SAFETY: the caller's promise: two timevals.
    let tv = unsafe { std::slice::from_raw_parts(tv, 2) };
    let one = |t: &libc::timeval| -> Result<timespec, c_int> {
        Ok(timespec {
            tv_sec: t.tv_sec,
            tv_nsec: t.tv_usec.checked_mul(1000).ok_or(libc::EINVAL)?,
        })
    };
    let ts = [one(&tv[0])?, one(&tv[1])?];
    // SAFETY: two timespecs that outlive the call.
    unsafe { times_attr(ts.as_ptr()) }
}

/// `utimes(2)`: `utimensat` with microseconds.
///
/// # Safety
/// As `utimes(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn utimes(path: *const c_char, tv: *const libc::timeval) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe {
        on_path(
            libc::AT_FDCWD,
            path,
            |fs, p| setattr_path(fs, p, true, &timevals_attr(tv)?),
            |path| real::utimes()(path, tv),
        )
    }
}

/// `lutimes(3)`: `utimes` of a symlink itself.
///
/// # Safety
/// As `lutimes(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lutimes(path: *const c_char, tv: *const libc::timeval) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe {
        on_path(
            libc::AT_FDCWD,
            path,
            |fs, p| setattr_path(fs, p, false, &timevals_attr(tv)?),
            |path| real::lutimes()(path, tv),
        )
    }
}

/// `futimes(3)`.
///
/// # Safety
/// As `futimes(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn futimes(fd: c_int, tv: *const libc::timeval) -> c_int {
    on_fd(
        fd,
        // SAFETY: `tv` is null or two timevals (caller).
        |o| setattr_fd(o, &unsafe { timevals_attr(tv) }?),
        // SAFETY: the caller's arguments, unchanged, to libc.
        || unsafe { real::futimes()(fd, tv) },
    )
}

/// `futimesat(2)`: a null path means `dirfd` itself (glibc's goes
/// through `utimensat`, whose null path is Linux's `futimens` form).
///
/// # Safety
/// As `futimesat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn futimesat(
    dirfd: c_int,
    path: *const c_char,
    tv: *const libc::timeval,
) -> c_int {
    if path.is_null() {
        // SAFETY: forwarded from the caller.
        return unsafe { futimes(dirfd, tv) };
    }
    // SAFETY: forwarded from the caller.
    unsafe {
        on_path(
            dirfd,
            path,
            |fs, p| setattr_path(fs, p, true, &timevals_attr(tv)?),
            |path| real::futimesat()(dirfd, path, tv),
        )
    }
}

/// `utime(2)`: whole seconds; a null `times` is now.
///
/// # Safety
/// As `utime(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn utime(path: *const c_char, times: *const libc::utimbuf) -> c_int {
    let attr = || -> Result<SetAttr, c_int> {
        if times.is_null() {
            // SAFETY: null is `times_attr`'s "now".
            return unsafe { times_attr(std::ptr::null()) };
        }
        // SAFETY: the caller's `utimbuf`, checked non-null.
        let t = unsafe { times.read() };
        let ts = [
            timespec {
                tv_sec: t.actime,
                tv_nsec: 0,
            },
            timespec {
                tv_sec: t.modtime,
                tv_nsec: 0,
            },
        ];
        // SAFETY: two timespecs that outlive the call.
        unsafe { times_attr(ts.as_ptr()) }
    };
    // SAFETY: forwarded from the caller.
    unsafe {
        on_path(
            libc::AT_FDCWD,
            path,
            |fs, p| setattr_path(fs, p, true, &attr()?),
            |path| real::utime()(path, times),
        )
    }
}
