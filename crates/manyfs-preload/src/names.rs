//! Names: unlink, rmdir, rename, mkdir, `mknod` and `mkfifo`, hard and
//! symbolic links, `readlink`, and the working directory (virtual while it is under the
//! run's directory).

use crate::paths::{self, Target};
use crate::{errno_of, mounted, on_fd, on_path, pool_path, real, ret, state};
use libc::{c_char, c_int, c_uint, mode_t, size_t, ssize_t};
use manyfs::Fs;
use manyfs::lowlevel::InodeOps;
use manyfs::lowlevel::Rename;
use std::ffi::{CStr, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

fn unlink_ours(fs: &Fs, p: &Path, flags: c_int) -> Result<c_int, c_int> {
    if flags & libc::AT_REMOVEDIR != 0 {
        fs.remove_dir(p)
    } else {
        fs.remove_file(p)
    }
    .map(|()| 0)
    .map_err(errno_of)
}

/// `unlinkat(2)`.
///
/// # Safety
/// As `unlinkat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unlinkat(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe {
        on_path(
            dirfd,
            path,
            |fs, p| unlink_ours(fs, p, flags),
            |path| real::unlinkat()(dirfd, path, flags),
        )
    }
}

/// `unlink(2)`.
///
/// # Safety
/// As `unlink(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unlink(path: *const c_char) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { unlinkat(libc::AT_FDCWD, path, 0) }
}

/// `rmdir(2)`.
///
/// # Safety
/// As `rmdir(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmdir(path: *const c_char) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { unlinkat(libc::AT_FDCWD, path, libc::AT_REMOVEDIR) }
}

/// `remove(3)` (glibc's calls `unlink`/`rmdir` internally).
///
/// # Safety
/// As `remove(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn remove(path: *const c_char) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe {
        on_path(
            libc::AT_FDCWD,
            path,
            |fs, p| match fs.symlink_metadata(p).map_err(errno_of)?.is_dir() {
                true => unlink_ours(fs, p, libc::AT_REMOVEDIR),
                false => unlink_ours(fs, p, 0),
            },
            |path| match real::unlinkat()(libc::AT_FDCWD, path, 0) {
                -1 if crate::errno() == libc::EISDIR => {
                    real::unlinkat()(libc::AT_FDCWD, path, libc::AT_REMOVEDIR)
                }
                r => r,
            },
        )
    }
}

/// Where two paths lead.
enum Pair {
    /// Both to the kernel: each the caller's path (`None`) or, when its
    /// route went through the directory, the normalised absolute one.
    Kernel(Option<std::ffi::CString>, Option<std::ffi::CString>),
    /// Both into the pool: the pool paths.
    Pool(Vec<u8>, Vec<u8>),
}

impl Pair {
    /// The two paths for the kernel: the normalised ones, else the
    /// caller's `p1` and `p2`.
    fn kernel_paths(
        a: &Option<std::ffi::CString>,
        b: &Option<std::ffi::CString>,
        p1: *const c_char,
        p2: *const c_char,
    ) -> (*const c_char, *const c_char) {
        (
            a.as_ref().map_or(p1, |a| a.as_ptr()),
            b.as_ref().map_or(p2, |b| b.as_ptr()),
        )
    }
}

/// Where two paths lead: both to the kernel, both into the pool, or one
/// each (`EXDEV`, as across mounts). When one leads into the pool and the
/// other to the kernel, the pool's one is followed ([`settle`]): a
/// symlink of its directory may lead it to the kernel too.
///
/// # Safety
/// The paths are null or NUL-terminated.
unsafe fn two_paths(
    dir1: c_int,
    p1: *const c_char,
    dir2: c_int,
    p2: *const c_char,
) -> Result<Pair, c_int> {
    // SAFETY: the caller's promise.
    let (a, b) = unsafe { (paths::target_c(dir1, p1)?, paths::target_c(dir2, p2)?) };
    let kernel = |t: Target| match t {
        Target::Kernel => Ok(None),
        Target::KernelAt(abs) => Ok(Some(abs)),
        Target::Ours(inner) => {
            match crate::with_live_tls(|| mounted().and_then(|fs| settle(fs, &inner)))? {
                Settled::Kernel(abs) => Ok(Some(abs)),
                Settled::Pool(_) => Err(libc::EXDEV),
            }
        }
    };
    match (a, b) {
        (Target::Ours(a), Target::Ours(b)) => Ok(Pair::Pool(a, b)),
        (a, b) => Ok(Pair::Kernel(kernel(a)?, kernel(b)?)),
    }
}

/// Where a pool path leads once the symlinks of its directory are
/// followed, its last name kept (as `rename` and `link` name it).
enum Settled {
    /// A pool path whose directory has no symlink left.
    Pool(Vec<u8>),
    /// A kernel path.
    Kernel(std::ffi::CString),
}

/// [`Settled`] of pool path `inner`: its directory followed as `realpath`
/// follows it ([`crate::resolve::canonical`]), out of the pool and back
/// if a symlink leads so.
fn settle(fs: &Fs, inner: &[u8]) -> Result<Settled, c_int> {
    let trimmed = match inner.iter().rposition(|&c| c != b'/') {
        Some(end) => &inner[..=end],
        None => return Ok(Settled::Pool(inner.to_vec())),
    };
    let cut = trimmed.iter().rposition(|&c| c == b'/').unwrap_or(0);
    let name = &trimmed[cut + 1..];
    let joined = |mut dir: Vec<u8>| {
        if !dir.ends_with(b"/") {
            dir.push(b'/');
        }
        dir.extend_from_slice(name);
        dir
    };
    let mut dir = trimmed[..cut.max(1)].to_vec();
    // Each way out of the pool followed a symlink.
    for _ in 0..=crate::MAX_SYMLINKS {
        let abs = match crate::resolve::canonical(fs, &dir)? {
            crate::resolve::Canonical::Pool(p) => return Ok(Settled::Pool(joined(p))),
            crate::resolve::Canonical::Outside(abs) => abs,
        };
        let kernel = match paths::target(libc::AT_FDCWD, &abs)? {
            Target::Ours(i) => {
                dir = i;
                continue;
            }
            Target::KernelAt(a) => a.into_bytes(),
            Target::Kernel => abs,
        };
        return std::ffi::CString::new(joined(kernel))
            .map(Settled::Kernel)
            .map_err(|_| libc::ENOENT);
    }
    Err(libc::ELOOP)
}

/// `ours` on pool paths `a` and `b`. When a symlink on the way led out of
/// the pool (`EXDEV`, [`crate::left_pool`] set), their directories are
/// followed ([`settle`]) and the call is made again where both lead: in
/// the pool, in the kernel (`kernel` with two absolute paths), or `EXDEV`
/// when one leads to each, as across mounts.
fn on_pool_pair(
    a: &[u8],
    b: &[u8],
    ours: impl Fn(&Fs, &Path, &Path) -> Result<c_int, c_int>,
    kernel: impl FnOnce(*const c_char, *const c_char) -> c_int,
) -> c_int {
    crate::with_live_tls(|| {
        let fs = match mounted() {
            Ok(fs) => fs,
            Err(e) => return ret(Err(e)),
        };
        let _stale = crate::left_pool();
        match ours(fs, pool_path(a), pool_path(b)) {
            Err(libc::EXDEV) if crate::left_pool().is_some() => {}
            r => return ret(r),
        }
        match (settle(fs, a), settle(fs, b)) {
            (Err(e), _) | (_, Err(e)) => ret(Err(e)),
            (Ok(Settled::Pool(a)), Ok(Settled::Pool(b))) => {
                ret(ours(fs, pool_path(&a), pool_path(&b)))
            }
            (Ok(Settled::Kernel(a)), Ok(Settled::Kernel(b))) => kernel(a.as_ptr(), b.as_ptr()),
            _ => ret(Err(libc::EXDEV)),
        }
    })
}

/// A call on two paths (`rename`, `link`): `ours` on the pool paths when
/// both lead into the pool ([`on_pool_pair`]), `kernel` with each
/// directory descriptor and path (the caller's, or absolute ones) when
/// both lead to the kernel, `EXDEV` when they part.
///
/// # Safety
/// The paths are null or NUL-terminated; `kernel` is called with paths
/// that are.
unsafe fn on_two_paths(
    (d1, p1, d2, p2): (c_int, *const c_char, c_int, *const c_char),
    ours: impl Fn(&Fs, &Path, &Path) -> Result<c_int, c_int>,
    kernel: impl Fn(c_int, *const c_char, c_int, *const c_char) -> c_int,
) -> c_int {
    // SAFETY: the caller's promise.
    match unsafe { two_paths(d1, p1, d2, p2) } {
        Ok(Pair::Kernel(a, b)) => {
            let (p1, p2) = Pair::kernel_paths(&a, &b, p1, p2);
            kernel(d1, p1, d2, p2)
        }
        Ok(Pair::Pool(a, b)) => on_pool_pair(&a, &b, ours, |a, b| {
            kernel(libc::AT_FDCWD, a, libc::AT_FDCWD, b)
        }),
        Err(e) => ret(Err(e)),
    }
}

/// The parent directory's inode and the last name of a pool path.
fn parent_and_name<'a>(fs: &Fs, p: &'a Path) -> Result<(u64, &'a OsStr), c_int> {
    let name = p.file_name().ok_or(libc::EINVAL)?;
    let parent = p.parent().ok_or(libc::EINVAL)?;
    Ok((fs.metadata(parent).map_err(errno_of)?.ino, name))
}

fn rename_ours(fs: &Fs, from: &Path, to: &Path, flags: c_uint) -> Result<c_int, c_int> {
    let how = match flags {
        0 => return fs.rename(from, to).map(|()| 0).map_err(errno_of),
        libc::RENAME_NOREPLACE => Rename::NoReplace,
        libc::RENAME_EXCHANGE => Rename::Exchange,
        _ => return Err(libc::EINVAL),
    };
    let (p1, n1) = parent_and_name(fs, from)?;
    let (p2, n2) = parent_and_name(fs, to)?;
    fs.rename_at(p1, n1, p2, n2, how)
        .map(|()| 0)
        .map_err(errno_of)
}

/// `renameat2(2)`.
///
/// # Safety
/// As `renameat2(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn renameat2(
    d1: c_int,
    p1: *const c_char,
    d2: c_int,
    p2: *const c_char,
    flags: c_uint,
) -> c_int {
    // SAFETY: forwarded from the caller; the kernel gets the caller's
    // arguments or absolute paths.
    unsafe {
        on_two_paths(
            (d1, p1, d2, p2),
            |fs, a, b| rename_ours(fs, a, b, flags),
            |d1, p1, d2, p2| real::renameat2()(d1, p1, d2, p2, flags),
        )
    }
}

/// `renameat(2)`.
///
/// # Safety
/// As `renameat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn renameat(
    d1: c_int,
    p1: *const c_char,
    d2: c_int,
    p2: *const c_char,
) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { renameat2(d1, p1, d2, p2, 0) }
}

/// `rename(2)`.
///
/// # Safety
/// As `rename(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rename(p1: *const c_char, p2: *const c_char) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { renameat2(libc::AT_FDCWD, p1, libc::AT_FDCWD, p2, 0) }
}

/// `linkat(2)` (`AT_SYMLINK_FOLLOW` is not followed under the pool: the
/// link names what the path names).
///
/// # Safety
/// As `linkat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn linkat(
    d1: c_int,
    p1: *const c_char,
    d2: c_int,
    p2: *const c_char,
    flags: c_int,
) -> c_int {
    // SAFETY: forwarded from the caller; the kernel gets the caller's
    // arguments or absolute paths.
    unsafe {
        on_two_paths(
            (d1, p1, d2, p2),
            |fs, a, b| fs.hard_link(a, b).map(|()| 0).map_err(errno_of),
            |d1, p1, d2, p2| real::linkat()(d1, p1, d2, p2, flags),
        )
    }
}

/// `link(2)`.
///
/// # Safety
/// As `link(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn link(p1: *const c_char, p2: *const c_char) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { linkat(libc::AT_FDCWD, p1, libc::AT_FDCWD, p2, 0) }
}

/// `symlinkat(2)`: the target is stored as given.
///
/// # Safety
/// As `symlinkat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn symlinkat(
    target: *const c_char,
    dirfd: c_int,
    path: *const c_char,
) -> c_int {
    if target.is_null() {
        return ret(Err(libc::EFAULT));
    }
    // SAFETY: a NUL-terminated string (caller).
    let t = Path::new(OsStr::from_bytes(
        unsafe { CStr::from_ptr(target) }.to_bytes(),
    ));
    // SAFETY: forwarded from the caller.
    unsafe {
        on_path(
            dirfd,
            path,
            |fs, p| fs.symlink(t, p).map(|()| 0).map_err(errno_of),
            |path| real::symlinkat()(target, dirfd, path),
        )
    }
}

/// `symlink(2)`.
///
/// # Safety
/// As `symlink(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn symlink(target: *const c_char, path: *const c_char) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { symlinkat(target, libc::AT_FDCWD, path) }
}

/// `readlinkat(2)`.
///
/// # Safety
/// As `readlinkat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn readlinkat(
    dirfd: c_int,
    path: *const c_char,
    buf: *mut c_char,
    size: size_t,
) -> ssize_t {
    // SAFETY: forwarded from the caller.
    unsafe {
        on_path(
            dirfd,
            path,
            |fs, p| {
                let t = fs.read_link(p).map_err(errno_of)?;
                let t = t.as_os_str().as_bytes();
                let n = t.len().min(size);
                // SAFETY: the caller's buffer of `size` bytes.
                crate::bytes_mut(buf.cast(), n)?.copy_from_slice(&t[..n]);
                Ok(n as ssize_t)
            },
            |path| real::readlinkat()(dirfd, path, buf, size),
        )
    }
}

/// `readlink(2)`.
///
/// # Safety
/// As `readlink(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn readlink(path: *const c_char, buf: *mut c_char, size: size_t) -> ssize_t {
    // SAFETY: forwarded from the caller.
    unsafe { readlinkat(libc::AT_FDCWD, path, buf, size) }
}

/// glibc's fortified `readlinkat`.
///
/// # Safety
/// As `readlinkat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __readlinkat_chk(
    dirfd: c_int,
    path: *const c_char,
    buf: *mut c_char,
    size: size_t,
    buflen: size_t,
) -> ssize_t {
    if size > buflen {
        // SAFETY: libc's check reports the overflow.
        return unsafe { real::__readlinkat_chk()(dirfd, path, buf, size, buflen) };
    }
    // SAFETY: forwarded from the caller.
    unsafe { readlinkat(dirfd, path, buf, size) }
}

/// glibc's fortified `readlink`.
///
/// # Safety
/// As `readlink(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __readlink_chk(
    path: *const c_char,
    buf: *mut c_char,
    size: size_t,
    buflen: size_t,
) -> ssize_t {
    // SAFETY: forwarded from the caller.
    unsafe { __readlinkat_chk(libc::AT_FDCWD, path, buf, size, buflen) }
}

fn mkdir_ours(fs: &Fs, p: &Path, mode: mode_t) -> Result<c_int, c_int> {
    if p == Path::new("/") {
        // The directory itself (fio makes its --directory).
        return Err(libc::EEXIST);
    }
    fs.create_dir(p).map_err(errno_of)?;
    let mode = mode & 0o7777 & !state::umask();
    if mode != 0o755 {
        fs.set_permissions(p, mode).map_err(errno_of)?;
    }
    Ok(0)
}

/// `mkdirat(2)`.
///
/// # Safety
/// As `mkdirat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkdirat(dirfd: c_int, path: *const c_char, mode: mode_t) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe {
        on_path(
            dirfd,
            path,
            |fs, p| mkdir_ours(fs, p, mode),
            |path| real::mkdirat()(dirfd, path, mode),
        )
    }
}

/// `mkdir(2)`.
///
/// # Safety
/// As `mkdir(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkdir(path: *const c_char, mode: mode_t) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { mkdirat(libc::AT_FDCWD, path, mode) }
}

/// `umask(2)`: recorded, so files created in the pool get it.
#[unsafe(no_mangle)]
pub extern "C" fn umask(mask: mode_t) -> mode_t {
    state::set_umask(mask);
    // SAFETY: the caller's argument, unchanged, to libc.
    unsafe { real::umask()(mask) }
}

/// Enter directory `inner` of the pool as the working directory.
fn enter(fs: &Fs, inner: &[u8]) -> Result<c_int, c_int> {
    if !fs.metadata(pool_path(inner)).map_err(errno_of)?.is_dir() {
        return Err(libc::ENOTDIR);
    }
    paths::set_virtual_cwd(Some(paths::outer(inner)));
    Ok(0)
}

/// `chdir(2)`: into the pool, the working directory becomes virtual.
///
/// # Safety
/// As `chdir(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn chdir(path: *const c_char) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe {
        on_path(
            libc::AT_FDCWD,
            path,
            |fs, p| enter(fs, p.as_os_str().as_bytes()),
            |path| {
                let r = real::chdir()(path);
                if r == 0 {
                    paths::set_virtual_cwd(None);
                }
                r
            },
        )
    }
}

/// `fchdir(2)`.
#[unsafe(no_mangle)]
pub extern "C" fn fchdir(fd: c_int) -> c_int {
    on_fd(
        fd,
        |o| {
            if !o.is_dir {
                return Err(libc::ENOTDIR);
            }
            paths::set_virtual_cwd(Some(o.path.clone()));
            Ok(0)
        },
        || {
            // SAFETY: the caller's argument, unchanged, to libc.
            let r = unsafe { real::fchdir()(fd) };
            if r == 0 {
                paths::set_virtual_cwd(None);
            }
            r
        },
    )
}

/// `getcwd(3)`, virtual under the pool (a null `buf` allocates, as
/// glibc's does).
///
/// # Safety
/// As `getcwd(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getcwd(buf: *mut c_char, size: size_t) -> *mut c_char {
    let Some(cwd) = paths::virtual_cwd() else {
        // SAFETY: the caller's arguments, unchanged, to libc.
        return unsafe { real::getcwd()(buf, size) };
    };
    let need = cwd.len() + 1;
    let out = if buf.is_null() {
        let len = if size == 0 { need } else { size };
        if len < need {
            crate::set_errno(libc::ERANGE);
            return std::ptr::null_mut();
        }
        // SAFETY: malloc of a non-zero size; the caller frees it.
        let p = unsafe { libc::malloc(len) }.cast::<c_char>();
        if p.is_null() {
            crate::set_errno(libc::ENOMEM);
            return p;
        }
        p
    } else {
        if size < need {
            crate::set_errno(libc::ERANGE);
            return std::ptr::null_mut();
        }
        buf
    };
    // SAFETY: `out` has at least `need` bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(cwd.as_ptr(), out.cast::<u8>(), cwd.len());
        *out.add(cwd.len()) = 0;
    }
    out
}

/// glibc's fortified `getcwd`.
///
/// # Safety
/// As `getcwd(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __getcwd_chk(
    buf: *mut c_char,
    size: size_t,
    buflen: size_t,
) -> *mut c_char {
    if size > buflen {
        // SAFETY: libc's check reports the overflow.
        return unsafe { real::__getcwd_chk()(buf, size, buflen) };
    }
    // SAFETY: forwarded from the caller.
    unsafe { getcwd(buf, size) }
}

/// `mknod` in the pool: a regular file (type bits 0 or `S_IFREG`), a FIFO,
/// a socket, or a character or block device numbered `dev`, with the
/// permission bits less the umask, as Linux's `mknodat`: a directory's
/// type is `EPERM`, other type bits `EINVAL` (both before the path is
/// looked at), a taken name `EEXIST`, a trailing slash on a new name
/// `ENOENT`. Devices need no privilege here (the pool belongs to the
/// process that mounted it).
fn mknod_ours(fs: &Fs, p: &Path, mode: mode_t, dev: libc::dev_t) -> Result<c_int, c_int> {
    match mode & libc::S_IFMT {
        0 | libc::S_IFREG | libc::S_IFIFO | libc::S_IFSOCK | libc::S_IFCHR | libc::S_IFBLK => {}
        libc::S_IFDIR => return Err(libc::EPERM),
        _ => return Err(libc::EINVAL),
    }
    if p == Path::new("/") {
        return Err(libc::EEXIST);
    }
    let (parent, name) = parent_and_name(fs, p)?;
    if let Some(name_only) = p.as_os_str().as_bytes().strip_suffix(b"/") {
        return Err(match fs.symlink_metadata(pool_path(name_only)) {
            Ok(_) => libc::EEXIST,
            Err(e) => errno_of(e),
        });
    }
    let perm = mode & 0o7777 & !state::umask();
    fs.mknod(parent, name, (mode & libc::S_IFMT) | perm, dev, 0, 0)
        .map(|_| 0)
        .map_err(errno_of)
}

/// `mknodat(2)`. glibc refuses a device number the kernel's 32-bit one
/// cannot hold (`EINVAL`) before the call.
///
/// # Safety
/// As `mknodat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mknodat(
    dirfd: c_int,
    path: *const c_char,
    mode: mode_t,
    dev: libc::dev_t,
) -> c_int {
    if u32::try_from(dev).is_err() {
        return ret(Err(libc::EINVAL));
    }
    // SAFETY: forwarded from the caller.
    unsafe {
        on_path(
            dirfd,
            path,
            |fs, p| mknod_ours(fs, p, mode, dev),
            |path| real::mknodat()(dirfd, path, mode, dev),
        )
    }
}

/// `mknod(2)`.
///
/// # Safety
/// As `mknod(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mknod(path: *const c_char, mode: mode_t, dev: libc::dev_t) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { mknodat(libc::AT_FDCWD, path, mode, dev) }
}

/// `mkfifoat(3)`: `mknodat` of a FIFO, as glibc's.
///
/// # Safety
/// As `mkfifoat(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkfifoat(dirfd: c_int, path: *const c_char, mode: mode_t) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { mknodat(dirfd, path, mode | libc::S_IFIFO, 0) }
}

/// `mkfifo(3)`.
///
/// # Safety
/// As `mkfifo(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkfifo(path: *const c_char, mode: mode_t) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { mknodat(libc::AT_FDCWD, path, mode | libc::S_IFIFO, 0) }
}

/// glibc's `__xmknodat` (programs built before glibc 2.33 call it for
/// `mknodat`): the device number by pointer (null: `EFAULT`).
///
/// # Safety
/// As `mknodat(2)`; `dev` is null or readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __xmknodat(
    ver: c_int,
    dirfd: c_int,
    path: *const c_char,
    mode: mode_t,
    dev: *mut libc::dev_t,
) -> c_int {
    // SAFETY: the caller's promise about `path`.
    match unsafe { paths::target_c(dirfd, path) } {
        // SAFETY: the caller's arguments, unchanged, to libc.
        Ok(Target::Kernel) => unsafe { real::__xmknodat()(ver, dirfd, path, mode, dev) },
        // SAFETY: as above, with the normalised absolute path.
        Ok(Target::KernelAt(abs)) => unsafe {
            real::__xmknodat()(ver, dirfd, abs.as_ptr(), mode, dev)
        },
        Ok(Target::Ours(_)) if dev.is_null() => ret(Err(libc::EFAULT)),
        // SAFETY: `dev` checked non-null; `path` as the caller promised.
        Ok(Target::Ours(_)) => unsafe { mknodat(dirfd, path, mode, *dev) },
        Err(e) => ret(Err(e)),
    }
}

/// glibc's `__xmknod`.
///
/// # Safety
/// As `mknod(2)`; `dev` is null or readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __xmknod(
    ver: c_int,
    path: *const c_char,
    mode: mode_t,
    dev: *mut libc::dev_t,
) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { __xmknodat(ver, libc::AT_FDCWD, path, mode, dev) }
}
