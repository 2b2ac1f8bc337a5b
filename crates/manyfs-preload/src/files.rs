//! Opening, reading, writing, seeking, syncing, sizing and closing files.

use crate::table::{self, Open};
use crate::{bytes, bytes_mut, errno_of, on_fd, on_path, real, state};
use libc::{c_char, c_int, c_uint, c_void, iovec, mode_t, off_t, size_t, ssize_t};
use manyfs::{FileKind, Fs, OpenOptions};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// Status flags `F_GETFL` reports and `F_SETFL` may change.
pub(crate) const SHOWN_FLAGS: c_int = libc::O_ACCMODE
    | libc::O_APPEND
    | libc::O_NONBLOCK
    | libc::O_DSYNC
    | libc::O_SYNC
    | libc::O_DIRECT
    | libc::O_NOATIME
    | libc::O_LARGEFILE;

/// Open `path` in the pool with `open(2)`'s flags; returns the descriptor.
pub(crate) fn open_ours(fs: &Fs, path: &Path, flags: c_int, mode: mode_t) -> Result<c_int, c_int> {
    if flags & libc::O_TMPFILE == libc::O_TMPFILE {
        state::say(&format!("O_TMPFILE in {} is not supported", path.display()));
        return Err(libc::EOPNOTSUPP);
    }
    let acc = flags & libc::O_ACCMODE;
    let path_only = flags & libc::O_PATH != 0;
    let (read, write) = (acc != libc::O_WRONLY, acc != libc::O_RDONLY && !path_only);
    let create = flags & libc::O_CREAT != 0 && !path_only;
    let trunc = flags & libc::O_TRUNC != 0 && !path_only;
    if flags & libc::O_NOFOLLOW != 0
        && let Ok(m) = fs.symlink_metadata(path)
        && m.is_symlink()
    {
        return Err(if path_only {
            libc::ENOTSUP
        } else {
            libc::ELOOP
        });
    }
    let mut oo = OpenOptions::new();
    oo.read(true)
        .write(write || create || trunc)
        .create(create)
        .create_new(create && flags & libc::O_EXCL != 0)
        .truncate(trunc)
        .mode(mode & 0o7777 & !state::umask());
    let file = oo.open(fs, path).map_err(errno_of)?;
    let meta = file.metadata().map_err(errno_of)?;
    if flags & libc::O_DIRECTORY != 0 && !meta.is_dir() {
        return Err(libc::ENOTDIR);
    }
    // A FIFO, socket or device in the pool has no pipe, socket or driver
    // behind it here (and no content of its own): opening one for I/O is
    // `ENXIO` (Linux's answer for a socket, or a device without a
    // driver), with a line on stderr; `O_PATH` opens it.
    let special = match meta.kind {
        FileKind::Fifo => Some("a FIFO"),
        FileKind::Socket => Some("a socket"),
        FileKind::CharDevice => Some("a character device"),
        FileKind::BlockDevice => Some("a block device"),
        FileKind::File | FileKind::Dir | FileKind::Symlink => None,
    };
    if let Some(what) = special
        && !path_only
    {
        let outer = crate::paths::outer(path.as_os_str().as_bytes());
        state::say(&format!(
            "{} is {what} in the pool: opening it for reading or writing is not supported (ENXIO)",
            String::from_utf8_lossy(&outer)
        ));
        return Err(libc::ENXIO);
    }
    let fd = table::reserve(0)?;
    let open = Open {
        file,
        path: crate::paths::outer(path.as_os_str().as_bytes()),
        is_dir: meta.is_dir(),
        read: read && !path_only,
        write,
        flags: (flags & SHOWN_FLAGS).into(),
        offset: table::Offset::new(0),
        listing: None.into(),
        write_hint: 0.into(),
        file_write_hint: 0.into(),
    };
    table::install(fd, Arc::new(open), flags & libc::O_CLOEXEC != 0);
    Ok(fd)
}

/// `openat` with the mode read only when the flags say it was passed.
///
/// # Safety
/// `path` is null or a NUL-terminated string.
unsafe fn do_openat(dirfd: c_int, path: *const c_char, flags: c_int, mode: mode_t) -> c_int {
    let mode = if flags & (libc::O_CREAT | libc::O_TMPFILE) != 0 {
        mode
    } else {
        0
    };
    // SAFETY: the caller's promise; the kernel gets the caller's arguments.
    unsafe {
        on_path(
            dirfd,
            path,
            |fs, p| open_ours(fs, p, flags, mode),
            // A file the mount opens for itself is moved out of the
            // program's way (`own`).
            |path| crate::own::opened(real::openat()(dirfd, path, flags, mode)),
        )
    }
}

/// `open(2)`.
///
/// # Safety
/// As `open(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn open(path: *const c_char, flags: c_int, mode: mode_t) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { do_openat(libc::AT_FDCWD, path, flags, mode) }
}

/// `open64(2)`.
///
/// # Safety
/// As `open(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn open64(path: *const c_char, flags: c_int, mode: mode_t) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { do_openat(libc::AT_FDCWD, path, flags, mode) }
}

/// glibc's fortified `open` (no mode).
///
/// # Safety
/// As `open(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __open_2(path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { do_openat(libc::AT_FDCWD, path, flags, 0) }
}

/// glibc's fortified `open64` (no mode).
///
/// # Safety
/// As `open(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __open64_2(path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { do_openat(libc::AT_FDCWD, path, flags, 0) }
}

/// `openat(2)`.
///
/// # Safety
/// As `openat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn openat(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mode: mode_t,
) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { do_openat(dirfd, path, flags, mode) }
}

/// `openat64(2)`.
///
/// # Safety
/// As `openat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn openat64(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mode: mode_t,
) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { do_openat(dirfd, path, flags, mode) }
}

/// glibc's fortified `openat` (no mode).
///
/// # Safety
/// As `openat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __openat_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { do_openat(dirfd, path, flags, 0) }
}

/// glibc's fortified `openat64` (no mode).
///
/// # Safety
/// As `openat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __openat64_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { do_openat(dirfd, path, flags, 0) }
}

/// `creat(2)`.
///
/// # Safety
/// As `creat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn creat(path: *const c_char, mode: mode_t) -> c_int {
    let flags = libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC;
    // SAFETY: forwarded from the caller.
    unsafe { do_openat(libc::AT_FDCWD, path, flags, mode) }
}

/// `creat64(2)`.
///
/// # Safety
/// As `creat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn creat64(path: *const c_char, mode: mode_t) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { creat(path, mode) }
}

/// Forget a manyfs descriptor (its kernel descriptor is the caller's to
/// close). In a forked child of the owner the handle is leaked rather
/// than dropped: dropping the last handle of an unlinked file frees it in
/// the pool, which is the parent's.
fn release(fd: c_int) {
    if let Some(open) = table::forget(fd)
        && state::forked()
    {
        std::mem::forget(open);
    }
}

/// Close a manyfs descriptor: forget it, then release its kernel
/// descriptor.
pub(crate) fn close_ours(fd: c_int) -> c_int {
    crate::with_live_tls(|| release(fd));
    // SAFETY: the kernel descriptor reserved for `fd`.
    unsafe { real::close()(fd) }
}

/// `close_range(2)`: the descriptors of ours in the range are forgotten
/// (or, with `CLOSE_RANGE_CLOEXEC`, marked close-on-exec) before the
/// kernel closes its reserved ones with the rest, so no later kernel
/// descriptor takes a number the table still serves. Unknown flags or
/// `first > last`: `EINVAL`, as Linux. `CLOSE_RANGE_UNSHARE` goes to the
/// kernel (the table is the process's: another thread's descriptors of
/// ours in the range are closed for it too).
#[unsafe(no_mangle)]
pub extern "C" fn close_range(first: c_uint, last: c_uint, flags: c_int) -> c_int {
    let known = (libc::CLOSE_RANGE_UNSHARE | libc::CLOSE_RANGE_CLOEXEC) as c_int;
    if flags & !known != 0 || first > last {
        return crate::ret(Err(libc::EINVAL));
    }
    if flags & libc::CLOSE_RANGE_CLOEXEC as c_int != 0 {
        table::ours_in(first, last).for_each(|fd| table::set_cloexec(fd, true));
        // The library's own descriptors are close-on-exec already.
        // SAFETY: the caller's arguments, unchanged, to libc.
        return unsafe { real::close_range()(first, last, flags) };
    }
    table::ours_in(first, last).for_each(release);
    // The runs between the library's own descriptors (`own`).
    for (a, b) in crate::own::runs_without_own(first, last) {
        // SAFETY: the caller's range, less the library's descriptors.
        let r = unsafe { real::close_range()(a, b, flags) };
        if r != 0 {
            return r;
        }
    }
    0
}

/// `closefrom(3)`: `close_range(lowfd, ~0U, 0)` (a negative `lowfd` is
/// 0, as glibc takes it).
#[unsafe(no_mangle)]
pub extern "C" fn closefrom(lowfd: c_int) {
    let first = lowfd.max(0) as c_uint;
    table::ours_in(first, c_uint::MAX).for_each(release);
    for (a, b) in crate::own::runs_without_own(first, c_uint::MAX) {
        if b == c_uint::MAX {
            // SAFETY: the caller's range from `a` on, which holds none of
            // the library's descriptors.
            unsafe { real::closefrom()(a as c_int) };
        } else {
            // SAFETY: a run of the caller's range without the library's
            // descriptors; `closefrom` reports nothing, nor does this.
            unsafe { real::close_range()(a, b, 0) };
        }
    }
}

/// `close(2)`.
#[unsafe(no_mangle)]
pub extern "C" fn close(fd: c_int) -> c_int {
    if table::is_ours(fd) {
        return close_ours(fd);
    }
    if let Some(e) = crate::own::refuse_close(fd) {
        return crate::ret(Err(e));
    }
    // SAFETY: the caller's argument, unchanged, to libc.
    unsafe { real::close()(fd) }
}

fn readable(o: &Open) -> Result<(), c_int> {
    if o.is_dir {
        return Err(libc::EISDIR);
    }
    if !o.read {
        return Err(libc::EBADF);
    }
    Ok(())
}

fn writable(o: &Open) -> Result<(), c_int> {
    if !o.write {
        return Err(libc::EBADF);
    }
    Ok(())
}

/// Read at `off`, or at the file offset (advancing it) when `off` is
/// `None`.
pub(crate) fn read_ours(o: &Open, buf: &mut [u8], off: Option<u64>) -> Result<usize, c_int> {
    readable(o)?;
    crate::shadow::before_access(o)?;
    match off {
        Some(off) => o.file.read_at(buf, off).map_err(errno_of),
        None => {
            let mut pos = o.offset.lock();
            let n = o.file.read_at(buf, *pos).map_err(errno_of)?;
            *pos += n as u64;
            Ok(n)
        }
    }
}

/// Write at `off`, or at the file offset (advancing it) when `off` is
/// `None`; at the end of file with `O_APPEND` (also for `pwrite`, whose
/// file offset stays, as Linux does); synced with `O_DSYNC`/`O_SYNC`.
pub(crate) fn write_ours(o: &Open, buf: &[u8], off: Option<u64>) -> Result<usize, c_int> {
    write_rwf(o, buf, off, 0)
}

/// `RWF_NOSIGNAL` (Linux 6.16; the `libc` crate does not name it): no
/// `SIGPIPE`, which a file never raises.
const RWF_NOSIGNAL: c_int = 0x100;

/// The `RWF_*` flags of `preadv2`/`pwritev2` served on ours, as tmpfs
/// takes them: `RWF_HIPRI` and `RWF_NOSIGNAL` change nothing,
/// `RWF_DSYNC`/`RWF_SYNC` sync after the write, `RWF_APPEND` writes at
/// the end, `RWF_NOAPPEND` at the offset despite `O_APPEND`. Others
/// (`RWF_NOWAIT`, `RWF_ATOMIC`, `RWF_DONTCACHE`, unknown bits):
/// `EOPNOTSUPP`, as tmpfs answers.
const RWF_SERVED: c_int = libc::RWF_HIPRI
    | libc::RWF_DSYNC
    | libc::RWF_SYNC
    | libc::RWF_APPEND
    | libc::RWF_NOAPPEND
    | RWF_NOSIGNAL;

/// [`write_ours`] with `pwritev2`'s `RWF_*` flags. An append (`O_APPEND`
/// without `RWF_NOAPPEND`, or `RWF_APPEND`) goes at the end of file and
/// moves the file offset only when the call writes at it (`off` `None`),
/// as Linux does.
fn write_rwf(o: &Open, buf: &[u8], off: Option<u64>, rwf: c_int) -> Result<usize, c_int> {
    writable(o)?;
    let flags = o.flags.load(Ordering::Relaxed);
    let append = rwf & libc::RWF_APPEND != 0
        || (flags & libc::O_APPEND != 0 && rwf & libc::RWF_NOAPPEND == 0);
    let (n, at) = if append {
        if off.is_some() {
            (buf.len(), o.file.append(buf).map_err(errno_of)?)
        } else {
            let mut pos = o.offset.lock();
            let at = o.file.append(buf).map_err(errno_of)?;
            *pos = at + buf.len() as u64;
            (buf.len(), at)
        }
    } else if let Some(off) = off {
        (o.file.write_at(buf, off).map_err(errno_of)?, off)
    } else {
        let mut pos = o.offset.lock();
        let at = *pos;
        let n = o.file.write_at(buf, at).map_err(errno_of)?;
        *pos += n as u64;
        (n, at)
    };
    crate::shadow::after_write(o, &buf[..n], at)?;
    if rwf & libc::RWF_SYNC != 0 {
        o.file.sync_all().map_err(errno_of)?;
    } else if flags & libc::O_DSYNC != 0 || rwf & libc::RWF_DSYNC != 0 {
        o.file.sync_data().map_err(errno_of)?;
    }
    Ok(n)
}

fn offset(off: off_t) -> Result<u64, c_int> {
    u64::try_from(off).map_err(|_| libc::EINVAL)
}

/// `read`/`pread` on ours into the caller's `n` bytes at `buf`: the
/// descriptor's checks first, then the buffer's (`EFAULT` for a null
/// one with bytes to read; 0 at or past the end of file), as Linux orders
/// them.
///
/// # Safety
/// `buf` is null or has `n` writable bytes.
unsafe fn read_into(
    o: &Open,
    buf: *mut c_void,
    n: size_t,
    off: Option<u64>,
) -> Result<ssize_t, c_int> {
    readable(o)?;
    if buf.is_null() && n > 0 {
        // Linux copies nothing at or past the end of file: 0 there, and
        // `EFAULT` only where there were bytes to copy.
        let at = match off {
            Some(at) => at,
            None => *o.offset.lock(),
        };
        let size = o.file.metadata().map_err(errno_of)?.size;
        return if at >= size { Ok(0) } else { Err(libc::EFAULT) };
    }
    // SAFETY: the caller's promise.
    let buf = unsafe { bytes_mut(buf, n)? };
    read_ours(o, buf, off).map(|n| n as ssize_t)
}

/// `write`/`pwrite` on ours from the caller's `n` bytes at `buf`: the
/// descriptor's checks first, then the buffer's (`EFAULT` for a null
/// one with bytes to write).
///
/// # Safety
/// `buf` is null or has `n` readable bytes.
unsafe fn write_from(
    o: &Open,
    buf: *const c_void,
    n: size_t,
    off: Option<u64>,
) -> Result<ssize_t, c_int> {
    writable(o)?;
    // SAFETY: the caller's promise.
    let buf = unsafe { bytes(buf, n)? };
    write_ours(o, buf, off).map(|n| n as ssize_t)
}

/// `read(2)`.
///
/// # Safety
/// As `read(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t {
    on_fd(
        fd,
        // SAFETY: the caller passes `n` writable bytes at `buf`.
        |o| unsafe { read_into(o, buf, n, None) },
        // SAFETY: the caller's arguments, unchanged, to libc.
        || unsafe { real::read()(fd, buf, n) },
    )
}

/// glibc's fortified `read`.
///
/// # Safety
/// As `read(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __read_chk(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    buflen: size_t,
) -> ssize_t {
    if n > buflen {
        // SAFETY: libc's check reports the overflow.
        return unsafe { real::__read_chk()(fd, buf, n, buflen) };
    }
    // SAFETY: forwarded from the caller.
    unsafe { read(fd, buf, n) }
}

/// `write(2)`.
///
/// # Safety
/// As `write(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t {
    on_fd(
        fd,
        // SAFETY: the caller passes `n` readable bytes at `buf`.
        |o| unsafe { write_from(o, buf, n, None) },
        // SAFETY: the caller's arguments, unchanged, to libc.
        || unsafe { real::write()(fd, buf, n) },
    )
}

/// `pread(2)`.
///
/// # Safety
/// As `pread(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pread(fd: c_int, buf: *mut c_void, n: size_t, off: off_t) -> ssize_t {
    on_fd(
        fd,
        // SAFETY: the caller passes `n` writable bytes at `buf`.
        |o| unsafe { read_into(o, buf, n, Some(offset(off)?)) },
        // SAFETY: the caller's arguments, unchanged, to libc.
        || unsafe { real::pread64()(fd, buf, n, off) },
    )
}

/// `pread64(2)`.
///
/// # Safety
/// As `pread(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pread64(fd: c_int, buf: *mut c_void, n: size_t, off: off_t) -> ssize_t {
    // SAFETY: forwarded from the caller.
    unsafe { pread(fd, buf, n, off) }
}

/// glibc's fortified `pread64` (also `__pread_chk`: the same on x86-64).
///
/// # Safety
/// As `pread(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __pread64_chk(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    off: off_t,
    buflen: size_t,
) -> ssize_t {
    if n > buflen {
        // SAFETY: libc's check reports the overflow.
        return unsafe { real::__pread64_chk()(fd, buf, n, off, buflen) };
    }
    // SAFETY: forwarded from the caller.
    unsafe { pread(fd, buf, n, off) }
}

/// glibc's fortified `pread`.
///
/// # Safety
/// As `pread(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __pread_chk(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    off: off_t,
    buflen: size_t,
) -> ssize_t {
    // SAFETY: forwarded from the caller.
    unsafe { __pread64_chk(fd, buf, n, off, buflen) }
}

/// `pwrite(2)`.
///
/// # Safety
/// As `pwrite(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pwrite(fd: c_int, buf: *const c_void, n: size_t, off: off_t) -> ssize_t {
    on_fd(
        fd,
        // SAFETY: the caller passes `n` readable bytes at `buf`.
        |o| unsafe { write_from(o, buf, n, Some(offset(off)?)) },
        // SAFETY: the caller's arguments, unchanged, to libc.
        || unsafe { real::pwrite64()(fd, buf, n, off) },
    )
}

/// `pwrite64(2)`.
///
/// # Safety
/// As `pwrite(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pwrite64(fd: c_int, buf: *const c_void, n: size_t, off: off_t) -> ssize_t {
    // SAFETY: forwarded from the caller.
    unsafe { pwrite(fd, buf, n, off) }
}

/// The most one read or write moves (Linux's `MAX_RW_COUNT`): a vectored
/// call asking for more is cut there, as Linux cuts it.
pub(crate) const MAX_RW_COUNT: usize = 0x7fff_f000;

/// The iovec array of a vectored call, checked as Linux checks it: a
/// count below 0 or above `UIO_MAXIOV`, or a length past `SSIZE_MAX`, is
/// `EINVAL`; a null array or buffer with bytes to move is `EFAULT`.
///
/// # Safety
/// `iov` is null or points at `cnt` iovecs.
unsafe fn iovecs<'a>(iov: *const iovec, cnt: c_int) -> Result<&'a [iovec], c_int> {
    let cnt = usize::try_from(cnt).map_err(|_| libc::EINVAL)?;
    if cnt > libc::UIO_MAXIOV as usize {
        return Err(libc::EINVAL);
    }
    if cnt == 0 {
        return Ok(&[]);
    }
    if iov.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller's promise, checked non-null.
    let v = unsafe { std::slice::from_raw_parts(iov, cnt) };
    for x in v {
        if x.iov_len > isize::MAX as usize {
            return Err(libc::EINVAL);
        }
        if x.iov_len > 0 && x.iov_base.is_null() {
            return Err(libc::EFAULT);
        }
    }
    Ok(v)
}

/// How many bytes a vectored call moves (at most `MAX_RW_COUNT`).
fn iov_total(iov: &[iovec]) -> usize {
    iov.iter()
        .fold(0usize, |t, v| t.saturating_add(v.iov_len))
        .min(MAX_RW_COUNT)
}

/// Vectored read: one read of the total length, scattered.
///
/// # Safety
/// Each iovec of `iov` (checked by [`iovecs`]) names writable bytes.
unsafe fn readv_ours(o: &Open, iov: &[iovec], off: Option<u64>) -> Result<ssize_t, c_int> {
    let mut tmp = vec![0u8; iov_total(iov)];
    let n = read_ours(o, &mut tmp, off)?;
    let mut done = 0;
    for v in iov {
        let take = v.iov_len.min(n - done);
        // SAFETY: each iovec names `iov_len` writable bytes, non-null when
        // `iov_len` is not 0 (checked by `iovecs`).
        unsafe { bytes_mut(v.iov_base, take) }?.copy_from_slice(&tmp[done..done + take]);
        done += take;
    }
    Ok(n as ssize_t)
}

/// Vectored write: gathered into one write, so it stays atomic.
///
/// # Safety
/// Each iovec of `iov` (checked by [`iovecs`]) names readable bytes.
unsafe fn writev_ours(
    o: &Open,
    iov: &[iovec],
    off: Option<u64>,
    rwf: c_int,
) -> Result<ssize_t, c_int> {
    let total = iov_total(iov);
    let mut tmp = Vec::with_capacity(total);
    for v in iov {
        let take = v.iov_len.min(total - tmp.len());
        // SAFETY: each iovec names `iov_len` readable bytes, non-null when
        // `iov_len` is not 0 (checked by `iovecs`).
        tmp.extend_from_slice(unsafe { bytes(v.iov_base, take) }?);
    }
    write_rwf(o, &tmp, off, rwf).map(|n| n as ssize_t)
}

/// `readv(2)`.
///
/// # Safety
/// As `readv(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t {
    on_fd(
        fd,
        // SAFETY: forwarded from the caller.
        |o| unsafe { readv_ours(o, iovecs(iov, cnt)?, None) },
        // SAFETY: the caller's arguments, unchanged, to libc.
        || unsafe { real::readv()(fd, iov, cnt) },
    )
}

/// `writev(2)`.
///
/// # Safety
/// As `writev(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t {
    on_fd(
        fd,
        // SAFETY: forwarded from the caller.
        |o| unsafe { writev_ours(o, iovecs(iov, cnt)?, None, 0) },
        // SAFETY: the caller's arguments, unchanged, to libc.
        || unsafe { real::writev()(fd, iov, cnt) },
    )
}

/// `preadv(2)`.
///
/// # Safety
/// As `preadv(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preadv(fd: c_int, iov: *const iovec, cnt: c_int, off: off_t) -> ssize_t {
    on_fd(
        fd,
        // SAFETY: forwarded from the caller.
        |o| unsafe { readv_ours(o, iovecs(iov, cnt)?, Some(offset(off)?)) },
        // SAFETY: the caller's arguments, unchanged, to libc.
        || unsafe { real::preadv64()(fd, iov, cnt, off) },
    )
}

/// `preadv64(2)`.
///
/// # Safety
/// As `preadv(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preadv64(fd: c_int, iov: *const iovec, cnt: c_int, off: off_t) -> ssize_t {
    // SAFETY: forwarded from the caller.
    unsafe { preadv(fd, iov, cnt, off) }
}

/// `pwritev(2)`.
///
/// # Safety
/// As `pwritev(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pwritev(fd: c_int, iov: *const iovec, cnt: c_int, off: off_t) -> ssize_t {
    on_fd(
        fd,
        // SAFETY: forwarded from the caller.
        |o| unsafe { writev_ours(o, iovecs(iov, cnt)?, Some(offset(off)?), 0) },
        // SAFETY: the caller's arguments, unchanged, to libc.
        || unsafe { real::pwritev64()(fd, iov, cnt, off) },
    )
}

/// `pwritev64(2)`.
///
/// # Safety
/// As `pwritev(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pwritev64(
    fd: c_int,
    iov: *const iovec,
    cnt: c_int,
    off: off_t,
) -> ssize_t {
    // SAFETY: forwarded from the caller.
    unsafe { pwritev(fd, iov, cnt, off) }
}

/// The offset of `preadv2`/`pwritev2`: -1 is the file offset (used and
/// advanced), below that `EINVAL`.
fn offset2(off: off_t) -> Result<Option<u64>, c_int> {
    match off {
        -1 => Ok(None),
        off => offset(off).map(Some),
    }
}

/// `preadv2` on ours, its checks in Linux's order: the offset, the
/// descriptor, the iovecs; nothing to read is 0 whatever the flags;
/// then the flags.
///
/// # Safety
/// As `preadv2(2)`.
unsafe fn preadv2_ours(
    o: &Open,
    iov: *const iovec,
    cnt: c_int,
    off: off_t,
    rwf: c_int,
) -> Result<ssize_t, c_int> {
    let off = offset2(off)?;
    readable(o)?;
    // SAFETY: the caller's promise.
    let iov = unsafe { iovecs(iov, cnt)? };
    if iov_total(iov) == 0 {
        return Ok(0);
    }
    if rwf & !RWF_SERVED != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    // SAFETY: checked by `iovecs`; the buffers are the caller's.
    unsafe { readv_ours(o, iov, off) }
}

/// `pwritev2` on ours (see [`preadv2_ours`] and [`RWF_SERVED`]).
///
/// # Safety
/// As `pwritev2(2)`.
unsafe fn pwritev2_ours(
    o: &Open,
    iov: *const iovec,
    cnt: c_int,
    off: off_t,
    rwf: c_int,
) -> Result<ssize_t, c_int> {
    let off = offset2(off)?;
    writable(o)?;
    // SAFETY: the caller's promise.
    let iov = unsafe { iovecs(iov, cnt)? };
    if iov_total(iov) == 0 {
        return Ok(0);
    }
    if rwf & !RWF_SERVED != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    // SAFETY: checked by `iovecs`; the buffers are the caller's.
    unsafe { writev_ours(o, iov, off, rwf) }
}

/// `preadv2(2)` and `pwritev2(2)` under both of glibc's names (`preadv2`
/// and `preadv64v2` are the same call on x86-64): served by `$ours` on a
/// manyfs descriptor, by libc's `$real` otherwise.
macro_rules! vectored_v2_entry_points {
    ($($name:ident, $alias:ident, $ours:ident, $real:ident;)*) => {$(
        #[doc = concat!("`", stringify!($name), "(2)`.")]
        ///
        /// # Safety
        #[doc = concat!("As `", stringify!($name), "(2)`.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(
            fd: c_int,
            iov: *const iovec,
            cnt: c_int,
            off: off_t,
            flags: c_int,
        ) -> ssize_t {
            on_fd(
                fd,
                // SAFETY: forwarded from the caller.
                |o| unsafe { $ours(o, iov, cnt, off, flags) },
                // SAFETY: the caller's arguments, unchanged, to libc.
                || unsafe { real::$real()(fd, iov, cnt, off, flags) },
            )
        }

        #[doc = concat!("`", stringify!($alias), "(2)` (the same call on x86-64).")]
        ///
        /// # Safety
        #[doc = concat!("As `", stringify!($name), "(2)`.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $alias(
            fd: c_int,
            iov: *const iovec,
            cnt: c_int,
            off: off_t,
            flags: c_int,
        ) -> ssize_t {
            // SAFETY: forwarded from the caller.
            unsafe { $name(fd, iov, cnt, off, flags) }
        }
    )*};
}

vectored_v2_entry_points! {
    preadv2, preadv64v2, preadv2_ours, preadv2;
    pwritev2, pwritev64v2, pwritev2_ours, pwritev2;
}

/// `lseek` on a manyfs descriptor (`SEEK_DATA`/`SEEK_HOLE` see one data
/// extent: the whole file).
pub(crate) fn lseek_ours(o: &Open, off: off_t, whence: c_int) -> Result<off_t, c_int> {
    let mut pos = o.offset.lock();
    let size = || o.file.metadata().map(|m| m.size as i64).map_err(errno_of);
    let new = match whence {
        libc::SEEK_SET => off,
        libc::SEEK_CUR => (*pos as i64).checked_add(off).ok_or(libc::EOVERFLOW)?,
        libc::SEEK_END => size()?.checked_add(off).ok_or(libc::EOVERFLOW)?,
        libc::SEEK_DATA | libc::SEEK_HOLE => {
            let size = size()?;
            if off < 0 {
                return Err(libc::EINVAL);
            }
            if off >= size {
                return Err(libc::ENXIO);
            }
            if whence == libc::SEEK_DATA { off } else { size }
        }
        _ => return Err(libc::EINVAL),
    };
    *pos = u64::try_from(new).map_err(|_| libc::EINVAL)?;
    Ok(new)
}

/// `lseek(2)`.
#[unsafe(no_mangle)]
pub extern "C" fn lseek(fd: c_int, off: off_t, whence: c_int) -> off_t {
    on_fd(
        fd,
        |o| lseek_ours(o, off, whence),
        // SAFETY: the caller's arguments, unchanged, to libc.
        || unsafe { real::lseek64()(fd, off, whence) },
    )
}

/// `lseek64(2)`.
#[unsafe(no_mangle)]
pub extern "C" fn lseek64(fd: c_int, off: off_t, whence: c_int) -> off_t {
    lseek(fd, off, whence)
}

/// `fsync(2)`.
#[unsafe(no_mangle)]
pub extern "C" fn fsync(fd: c_int) -> c_int {
    on_fd(
        fd,
        |o| {
            crate::shadow::before_access(o)?;
            o.file.sync_all().map(|()| 0).map_err(errno_of)
        },
        // SAFETY: the caller's argument, unchanged, to libc.
        || unsafe { real::fsync()(fd) },
    )
}

/// `fdatasync(2)`.
#[unsafe(no_mangle)]
pub extern "C" fn fdatasync(fd: c_int) -> c_int {
    on_fd(
        fd,
        |o| {
            crate::shadow::before_access(o)?;
            o.file.sync_data().map(|()| 0).map_err(errno_of)
        },
        // SAFETY: the caller's argument, unchanged, to libc.
        || unsafe { real::fdatasync()(fd) },
    )
}

/// `sync_file_range(2)`: the file's data made durable (more than asked).
#[unsafe(no_mangle)]
pub extern "C" fn sync_file_range(fd: c_int, off: off_t, n: off_t, flags: c_uint) -> c_int {
    on_fd(
        fd,
        |o| {
            crate::shadow::before_access(o)?;
            o.file.sync_data().map(|()| 0).map_err(errno_of)
        },
        // SAFETY: the caller's arguments, unchanged, to libc.
        || unsafe { real::sync_file_range()(fd, off, n, flags) },
    )
}

fn set_len_ours(o: &Open, len: off_t) -> Result<c_int, c_int> {
    if o.is_dir {
        return Err(libc::EISDIR);
    }
    if !o.write {
        return Err(libc::EINVAL);
    }
    let len = offset(len)?;
    crate::shadow::before_access(o)?;
    o.file.set_len(len).map_err(errno_of)?;
    crate::shadow::after_set_len(o, len)?;
    Ok(0)
}

/// `ftruncate(2)`.
#[unsafe(no_mangle)]
pub extern "C" fn ftruncate(fd: c_int, len: off_t) -> c_int {
    on_fd(
        fd,
        |o| set_len_ours(o, len),
        // SAFETY: the caller's arguments, unchanged, to libc.
        || unsafe { real::ftruncate64()(fd, len) },
    )
}

/// `ftruncate64(2)`.
#[unsafe(no_mangle)]
pub extern "C" fn ftruncate64(fd: c_int, len: off_t) -> c_int {
    ftruncate(fd, len)
}

/// `truncate(2)`.
///
/// # Safety
/// As `truncate(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn truncate(path: *const c_char, len: off_t) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe {
        on_path(
            libc::AT_FDCWD,
            path,
            |fs, p| fs.set_len(p, offset(len)?).map(|()| 0).map_err(errno_of),
            |path| real::truncate64()(path, len),
        )
    }
}

/// `truncate64(2)`.
///
/// # Safety
/// As `truncate(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn truncate64(path: *const c_char, len: off_t) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { truncate(path, len) }
}

/// `fallocate` on ours: mode 0 extends the size; `FALLOC_FL_KEEP_SIZE`
/// succeeds with nothing to do (blocks are allocated when written);
/// other modes (punching holes, zeroing, collapsing) are not supported.
fn fallocate_ours(o: &Open, mode: c_int, off: off_t, len: off_t) -> Result<c_int, c_int> {
    writable(o)?;
    let (off, len) = (offset(off)?, offset(len)?);
    if len == 0 {
        return Err(libc::EINVAL);
    }
    match mode {
        0 => {
            o.file.allocate(off, len).map_err(errno_of)?;
            let size = o.file.metadata().map_err(errno_of)?.size;
            crate::shadow::after_set_len(o, size)?;
            Ok(0)
        }
        libc::FALLOC_FL_KEEP_SIZE => Ok(0),
        _ => {
            state::say(&format!(
                "fallocate mode {mode:#x} is not supported under the pool"
            ));
            Err(libc::EOPNOTSUPP)
        }
    }
}

/// `fallocate(2)`.
#[unsafe(no_mangle)]
pub extern "C" fn fallocate(fd: c_int, mode: c_int, off: off_t, len: off_t) -> c_int {
    on_fd(
        fd,
        |o| fallocate_ours(o, mode, off, len),
        // SAFETY: the caller's arguments, unchanged, to libc.
        || unsafe { real::fallocate64()(fd, mode, off, len) },
    )
}

/// `fallocate64(2)`.
#[unsafe(no_mangle)]
pub extern "C" fn fallocate64(fd: c_int, mode: c_int, off: off_t, len: off_t) -> c_int {
    fallocate(fd, mode, off, len)
}

/// `posix_fallocate(3)`: returns the error number instead of setting
/// `errno`.
#[unsafe(no_mangle)]
pub extern "C" fn posix_fallocate(fd: c_int, off: off_t, len: off_t) -> c_int {
    match table::get(fd) {
        // SAFETY: the caller's arguments, unchanged, to libc.
        None => unsafe { real::posix_fallocate64()(fd, off, len) },
        Some(o) => match state::fs().and_then(|_| fallocate_ours(&o, 0, off, len)) {
            Ok(_) => 0,
            Err(e) => e,
        },
    }
}

/// `posix_fallocate64(3)`.
#[unsafe(no_mangle)]
pub extern "C" fn posix_fallocate64(fd: c_int, off: off_t, len: off_t) -> c_int {
    posix_fallocate(fd, off, len)
}

/// `posix_fadvise(3)`: advice on ours is taken and ignored.
#[unsafe(no_mangle)]
pub extern "C" fn posix_fadvise(fd: c_int, off: off_t, len: off_t, advice: c_int) -> c_int {
    if table::is_ours(fd) {
        return 0;
    }
    // SAFETY: the caller's arguments, unchanged, to libc.
    unsafe { real::posix_fadvise64()(fd, off, len, advice) }
}

/// `posix_fadvise64(3)`.
#[unsafe(no_mangle)]
pub extern "C" fn posix_fadvise64(fd: c_int, off: off_t, len: off_t, advice: c_int) -> c_int {
    posix_fadvise(fd, off, len, advice)
}
