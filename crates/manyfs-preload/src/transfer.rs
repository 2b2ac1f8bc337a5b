//! `sendfile` and `splice` with a descriptor of ours at one end: the
//! bytes go through a buffer, read and written by the library on our side
//! and by the kernel on the other, with Linux's offsets, checks and
//! results.

use crate::files::{MAX_RW_COUNT, read_ours, write_ours};
use crate::table::{self, Open};
use crate::{real, ret, state};
use libc::{c_int, c_uint, off_t, size_t, ssize_t};
use std::sync::Arc;

/// The most one buffer of a transfer holds: a longer `sendfile` goes on
/// in pieces of this size.
const CHUNK: usize = 1 << 20;

/// One end of a transfer: a descriptor of ours, or the kernel's.
enum End {
    /// A manyfs descriptor.
    Ours(Arc<Open>),
    /// A kernel descriptor (a file, a pipe, a socket).
    Kernel(c_int),
}

impl End {
    /// The end `fd` names.
    fn of(fd: c_int) -> End {
        table::get(fd).map_or(End::Kernel(fd), End::Ours)
    }

    /// The kernel descriptor's `F_GETFL` (`EBADF` if none is open).
    fn kernel_flags(fd: c_int) -> Result<c_int, c_int> {
        // SAFETY: F_GETFL takes no argument; the kernel checks `fd`.
        let flags = unsafe { real::fcntl64()(fd, libc::F_GETFL, 0) };
        if flags < 0 {
            return Err(crate::errno());
        }
        Ok(flags)
    }

    /// Whether the end may be read from: `EBADF` if it is not open for
    /// reading, `EINVAL` for a directory of ours (nothing to splice from).
    fn check_source(&self) -> Result<(), c_int> {
        match self {
            End::Ours(o) if !o.read => Err(libc::EBADF),
            End::Ours(o) if o.is_dir => Err(libc::EINVAL),
            End::Ours(_) => Ok(()),
            End::Kernel(fd) => {
                let flags = End::kernel_flags(*fd)?;
                if flags & libc::O_PATH != 0 || flags & libc::O_ACCMODE == libc::O_WRONLY {
                    return Err(libc::EBADF);
                }
                Ok(())
            }
        }
    }

    /// Whether the end may be written to: `EBADF` if it is not open for
    /// writing, `EINVAL` with `O_APPEND` (Linux splices to no appending
    /// file).
    fn check_sink(&self) -> Result<(), c_int> {
        let flags = match self {
            End::Ours(o) if !o.write => return Err(libc::EBADF),
            End::Ours(o) => o.flags.load(std::sync::atomic::Ordering::Relaxed),
            End::Kernel(fd) => {
                let flags = End::kernel_flags(*fd)?;
                if flags & libc::O_PATH != 0 || flags & libc::O_ACCMODE == libc::O_RDONLY {
                    return Err(libc::EBADF);
                }
                flags
            }
        };
        if flags & libc::O_APPEND != 0 {
            return Err(libc::EINVAL);
        }
        Ok(())
    }

    /// The capacity of the pipe this end is, or `None` if it is no pipe.
    fn pipe_size(&self) -> Option<usize> {
        let End::Kernel(fd) = self else { return None };
        // SAFETY: F_GETPIPE_SZ takes no argument; it fails on a non-pipe.
        let size = unsafe { real::fcntl64()(*fd, libc::F_GETPIPE_SZ, 0) };
        usize::try_from(size).ok()
    }

    /// Read into `buf` at `at`, or at the file offset (advancing it).
    fn read(&self, buf: &mut [u8], at: Option<u64>) -> Result<usize, c_int> {
        let fd = match self {
            End::Ours(o) => return read_ours(o, buf, at),
            End::Kernel(fd) => *fd,
        };
        let (p, n) = (buf.as_mut_ptr().cast(), buf.len());
        // SAFETY: `p` has `n` writable bytes (`buf`).
        let got = unsafe {
            match at {
                Some(at) => real::pread64()(fd, p, n, at as off_t),
                None => real::read()(fd, p, n),
            }
        };
        counted(got)
    }

    /// Write `buf` at `at`, or at the file offset (advancing it). A
    /// kernel end is only written at its file offset (it is `sendfile`'s
    /// output or `splice`'s pipe).
    fn write(&self, buf: &[u8], at: Option<u64>) -> Result<usize, c_int> {
        match self {
            End::Ours(o) => write_ours(o, buf, at),
            End::Kernel(fd) => {
                debug_assert!(at.is_none(), "a kernel end written at a position");
                // SAFETY: `buf` has `buf.len()` readable bytes.
                counted(unsafe { real::write()(*fd, buf.as_ptr().cast(), buf.len()) })
            }
        }
    }

    /// Move the file offset back by `n` bytes read but not written on
    /// (a kernel pipe or socket cannot: what it gave is gone).
    fn unread(&self, n: usize) {
        match self {
            End::Ours(o) => {
                let mut pos = o.offset.lock();
                *pos = pos.saturating_sub(n as u64);
            }
            End::Kernel(fd) => {
                // SAFETY: a seek on the caller's descriptor; its failure
                // (a pipe) leaves things as they are.
                unsafe { real::lseek64()(*fd, -(n as off_t), libc::SEEK_CUR) };
            }
        }
    }
}

/// The byte count a kernel read or write returned, or its `errno`.
fn counted(n: ssize_t) -> Result<usize, c_int> {
    usize::try_from(n).map_err(|_| crate::errno())
}

/// Move up to `count` bytes from `src` to `dst`, each at its position
/// (`Some`: there, and the position advances by what moved; `None`: at
/// its file offset). Stops at the end of `src`, at a short read or write,
/// or at an error; returns the bytes moved (the error only when none
/// did). `src` goes on from exactly what `dst` took.
fn pump(
    src: &End,
    src_at: &mut Option<u64>,
    dst: &End,
    dst_at: &mut Option<u64>,
    count: usize,
) -> Result<usize, c_int> {
    let mut buf = vec![0u8; count.min(CHUNK)];
    let mut done = 0;
    while done < count {
        let want = (count - done).min(buf.len());
        let read = match src.read(&mut buf[..want], *src_at) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if done == 0 => return Err(e),
            Err(_) => break,
        };
        let written = match dst.write(&buf[..read], *dst_at) {
            Ok(n) => n,
            Err(e) => {
                if src_at.is_none() {
                    src.unread(read);
                }
                if done == 0 {
                    return Err(e);
                }
                break;
            }
        };
        if written < read && src_at.is_none() {
            src.unread(read - written);
        }
        for at in [&mut *src_at, &mut *dst_at].into_iter().flatten() {
            *at += written as u64;
        }
        done += written;
        if written < read || read < want {
            break;
        }
    }
    Ok(done)
}

/// The position an offset pointer gives: `None` for a null pointer,
/// `EINVAL` for a negative offset.
///
/// # Safety
/// `p` is null or points at an `off_t`.
unsafe fn position(p: *const off_t) -> Result<Option<u64>, c_int> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller's promise, checked non-null.
    let off = unsafe { p.read_unaligned() };
    u64::try_from(off).map(Some).map_err(|_| libc::EINVAL)
}

/// Store `at` back where the offset pointer `p` points (when both are
/// there).
///
/// # Safety
/// `p` is null or points at a writable `off_t`.
unsafe fn store_position(p: *mut off_t, at: Option<u64>) {
    if let Some(at) = at
        && !p.is_null()
    {
        // SAFETY: the caller's promise, checked non-null.
        unsafe { p.write_unaligned(at as off_t) };
    }
}

/// `sendfile` with a descriptor of ours at one end, checked in Linux's
/// order: the input (`EBADF` unless readable), the offset (`EINVAL` if
/// negative), the output (`EBADF` unless writable, `EINVAL` with
/// `O_APPEND`). A non-null `offset` is where reading starts and is
/// moved on; the input's file offset then stays.
///
/// # Safety
/// As `sendfile(2)`.
unsafe fn sendfile_ours(
    out_fd: c_int,
    in_fd: c_int,
    offset: *mut off_t,
    count: size_t,
) -> Result<ssize_t, c_int> {
    let (src, dst) = (End::of(in_fd), End::of(out_fd));
    src.check_source()?;
    // SAFETY: the caller's promise about `offset`.
    let mut src_at = unsafe { position(offset)? };
    dst.check_sink()?;
    let moved = pump(&src, &mut src_at, &dst, &mut None, count.min(MAX_RW_COUNT));
    // SAFETY: as above; the position moved by what was sent.
    unsafe { store_position(offset, src_at) };
    moved.map(|n| n as ssize_t)
}

/// `sendfile(2)`: served by the library when either descriptor is ours.
///
/// # Safety
/// As `sendfile(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sendfile(
    out_fd: c_int,
    in_fd: c_int,
    offset: *mut off_t,
    count: size_t,
) -> ssize_t {
    if !table::is_ours(in_fd) && !table::is_ours(out_fd) {
        // SAFETY: the caller's arguments, unchanged, to libc.
        return unsafe { real::sendfile64()(out_fd, in_fd, offset, count) };
    }
    // SAFETY: forwarded from the caller.
    ret(state::fs().and_then(|_| unsafe { sendfile_ours(out_fd, in_fd, offset, count) }))
}

/// `sendfile64(2)` (the same call on x86-64).
///
/// # Safety
/// As `sendfile(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sendfile64(
    out_fd: c_int,
    in_fd: c_int,
    offset: *mut off_t,
    count: size_t,
) -> ssize_t {
    // SAFETY: forwarded from the caller.
    unsafe { sendfile(out_fd, in_fd, offset, count) }
}

/// The flags `splice` knows (`SPLICE_F_MOVE`, `_NONBLOCK`, `_MORE`,
/// `_GIFT`); others are `EINVAL`.
const SPLICE_F_ALL: c_uint =
    libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK | libc::SPLICE_F_MORE | libc::SPLICE_F_GIFT;

/// Whether the pipe `fd` has something to read (or its writers are
/// gone: the read then says end of file).
fn pipe_readable(fd: c_int) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd, no waiting.
    unsafe { libc::poll(&mut p, 1, 0) > 0 }
}

/// How many more bytes the pipe `fd` of capacity `size` takes now.
fn pipe_room(fd: c_int, size: usize) -> usize {
    let mut held: c_int = 0;
    // SAFETY: FIONREAD writes one int; on a pipe it counts what is held.
    let r = unsafe { real::ioctl()(fd, libc::FIONREAD, &raw mut held as usize as libc::c_ulong) };
    if r < 0 {
        return size;
    }
    size.saturating_sub(held.max(0) as usize)
}

/// `splice` with a descriptor of ours at one end; the other must be a
/// pipe (else `EINVAL`, as Linux answers two non-pipes). Nothing asked
/// is 0; unknown flags `EINVAL`; an offset pointer for the pipe
/// `ESPIPE`; then the ends' checks as `sendfile`'s. The file side's
/// offset pointer is used and moved on as `sendfile`'s; without one its
/// file offset moves. One call moves at most what the pipe holds (from
/// a pipe) or has room for (to a pipe); `SPLICE_F_NONBLOCK` makes an
/// empty (from) or full (to) pipe `EAGAIN` instead of a wait.
///
/// The input and output come as `splice` passes them: each descriptor
/// with its offset pointer.
///
/// # Safety
/// As `splice(2)`.
unsafe fn splice_ours(
    (fd_in, off_in): (c_int, *mut off_t),
    (fd_out, off_out): (c_int, *mut off_t),
    len: size_t,
    flags: c_uint,
) -> Result<ssize_t, c_int> {
    if len == 0 {
        return Ok(0);
    }
    if flags & !SPLICE_F_ALL != 0 {
        return Err(libc::EINVAL);
    }
    let (src, dst) = (End::of(fd_in), End::of(fd_out));
    let (in_pipe, out_pipe) = (src.pipe_size(), dst.pipe_size());
    if (in_pipe.is_some() && !off_in.is_null()) || (out_pipe.is_some() && !off_out.is_null()) {
        return Err(libc::ESPIPE);
    }
    src.check_source()?;
    dst.check_sink()?;
    let nonblock = flags & libc::SPLICE_F_NONBLOCK != 0;
    let (file_off, count) = match (in_pipe, out_pipe, &src, &dst) {
        (Some(size), None, End::Kernel(pipe), End::Ours(_)) => {
            if nonblock && !pipe_readable(*pipe) {
                return Err(libc::EAGAIN);
            }
            (off_out, size)
        }
        (None, Some(size), End::Ours(_), End::Kernel(pipe)) => {
            let room = if nonblock {
                pipe_room(*pipe, size)
            } else {
                size
            };
            if room == 0 {
                return Err(libc::EAGAIN);
            }
            (off_in, room)
        }
        _ => return Err(libc::EINVAL),
    };
    // SAFETY: the caller's promise about the offset pointers.
    let mut at = unsafe { position(file_off)? };
    // One buffer at most: a second read from a pipe would wait for more.
    let count = len.min(count).min(CHUNK).min(MAX_RW_COUNT);
    let moved = if in_pipe.is_some() {
        pump(&src, &mut None, &dst, &mut at, count)
    } else {
        pump(&src, &mut at, &dst, &mut None, count)
    };
    // SAFETY: as above; the position moved by what was spliced.
    unsafe { store_position(file_off, at) };
    moved.map(|n| n as ssize_t)
}

/// `splice(2)`: served by the library when either descriptor is ours.
///
/// # Safety
/// As `splice(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn splice(
    fd_in: c_int,
    off_in: *mut off_t,
    fd_out: c_int,
    off_out: *mut off_t,
    len: size_t,
    flags: c_uint,
) -> ssize_t {
    if !table::is_ours(fd_in) && !table::is_ours(fd_out) {
        // SAFETY: the caller's arguments, unchanged, to libc.
        return unsafe { real::splice()(fd_in, off_in, fd_out, off_out, len, flags) };
    }
    ret(state::fs().and_then(|_| {
        // SAFETY: forwarded from the caller.
        unsafe { splice_ours((fd_in, off_in), (fd_out, off_out), len, flags) }
    }))
}
