//! `FILE*` streams on files under the pool: glibc's `fopen` opens through
//! an internal `open` out of this library's reach, so `fopen` itself is
//! interposed and returns a `fopencookie` stream whose read, write, seek
//! and close call manyfs. `fileno` on such a stream gives the pool
//! descriptor it reads and writes (so `fstat(fileno(f))` works, as `sort`
//! does on every input).
//!
//! The standard streams: glibc's `stdout` writes descriptor 1 with an
//! internal `write`, so once descriptor 0, 1 or 2 is made one of the
//! pool's (`dup2(fd, 1)`, as a shell's `echo hi > DIR/f` does before its
//! builtin prints; or `close(1)` and an `open`), the matching `stdin`,
//! `stdout` or `stderr` variable is pointed at a cookie stream of that
//! number until it stops being the pool's (see [`std_bound`]).

use crate::table;
use crate::{files, on_path, real, ret, state};
use libc::{FILE, c_char, c_int, c_void, size_t, ssize_t};
use std::ffi::CStr;
use std::sync::atomic::{AtomicPtr, Ordering};

/// glibc's `cookie_io_functions_t`.
#[repr(C)]
struct CookieIo {
    read: Option<unsafe extern "C" fn(*mut c_void, *mut c_char, size_t) -> ssize_t>,
    write: Option<unsafe extern "C" fn(*mut c_void, *const c_char, size_t) -> ssize_t>,
    seek: Option<unsafe extern "C" fn(*mut c_void, *mut i64, c_int) -> c_int>,
    close: Option<unsafe extern "C" fn(*mut c_void) -> c_int>,
}

unsafe extern "C" {
    fn fopencookie(cookie: *mut c_void, mode: *const c_char, io: CookieIo) -> *mut FILE;
}

fn cookie_fd(cookie: *mut c_void) -> c_int {
    cookie as usize as c_int
}

unsafe extern "C" fn cookie_read(cookie: *mut c_void, buf: *mut c_char, n: size_t) -> ssize_t {
    // SAFETY: as this function's (glibc's buffer of `n` bytes).
    crate::with_live_tls(|| unsafe { cookie_read_here(cookie, buf, n) })
}

unsafe fn cookie_read_here(cookie: *mut c_void, buf: *mut c_char, n: size_t) -> ssize_t {
    let fd = cookie_fd(cookie);
    let Some(o) = table::get(fd) else {
        return ret(Err(libc::EBADF));
    };
    // SAFETY: glibc passes a buffer of `n` bytes.
    let b = unsafe { crate::bytes_mut(buf.cast(), n) };
    ret(state::fs()
        .and_then(|_| files::read_ours(&o, b?, None))
        .map(|n| n as ssize_t))
}

unsafe extern "C" fn cookie_write(cookie: *mut c_void, buf: *const c_char, n: size_t) -> ssize_t {
    // SAFETY: as this function's (glibc's `n` bytes).
    crate::with_live_tls(|| unsafe { cookie_write_here(cookie, buf, n) })
}

unsafe fn cookie_write_here(cookie: *mut c_void, buf: *const c_char, n: size_t) -> ssize_t {
    let fd = cookie_fd(cookie);
    let Some(o) = table::get(fd) else {
        return ret(Err(libc::EBADF));
    };
    // SAFETY: glibc passes `n` bytes.
    let b = unsafe { crate::bytes(buf.cast(), n) };
    ret(state::fs()
        .and_then(|_| files::write_ours(&o, b?, None))
        .map(|n| n as ssize_t))
}

unsafe extern "C" fn cookie_seek(cookie: *mut c_void, off: *mut i64, whence: c_int) -> c_int {
    // SAFETY: as this function's (glibc's offset to update).
    crate::with_live_tls(|| unsafe { cookie_seek_here(cookie, off, whence) })
}

unsafe fn cookie_seek_here(cookie: *mut c_void, off: *mut i64, whence: c_int) -> c_int {
    let fd = cookie_fd(cookie);
    let Some(o) = table::get(fd) else {
        return ret(Err(libc::EBADF));
    };
    // SAFETY: glibc passes the offset to read and update.
    let r = state::fs().and_then(|_| files::lseek_ours(&o, unsafe { *off }, whence));
    match r {
        Ok(pos) => {
            // SAFETY: as above.
            unsafe { *off = pos };
            0
        }
        Err(e) => ret(Err(e)),
    }
}

unsafe extern "C" fn cookie_close(cookie: *mut c_void) -> c_int {
    let fd = cookie_fd(cookie);
    let mut streams = STREAMS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(i) = streams.iter().position(|&(_, d)| d == fd) {
        streams.swap_remove(i);
    }
    drop(streams);
    files::close_ours(fd)
}

/// The cookie streams of `fopen`/`fdopen` and their descriptors, for
/// `fileno`.
static STREAMS: std::sync::Mutex<Vec<(usize, c_int)>> = std::sync::Mutex::new(Vec::new());
/// Whether `STREAMS` ever held one: `fileno` of glibc's streams skips the
/// lock until then.
static ANY_STREAM: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The descriptor of `f` if it is a cookie stream of `fopen`/`fdopen`.
fn stream_fd(f: *mut FILE) -> Option<c_int> {
    if !ANY_STREAM.load(Ordering::Acquire) {
        return None;
    }
    let streams = STREAMS.lock().unwrap_or_else(|e| e.into_inner());
    streams
        .iter()
        .find(|&&(p, _)| p == f as usize)
        .map(|&(_, fd)| fd)
}

/// A stream on our descriptor `fd`, which it then owns.
///
/// # Safety
/// `mode` is a NUL-terminated string.
unsafe fn stream(fd: c_int, mode: *const c_char) -> Result<*mut FILE, c_int> {
    let io = CookieIo {
        read: Some(cookie_read),
        write: Some(cookie_write),
        seek: Some(cookie_seek),
        close: Some(cookie_close),
    };
    // SAFETY: the cookie is a descriptor number; `mode` (caller) is NUL-terminated.
    let f = unsafe { fopencookie(fd as usize as *mut c_void, mode, io) };
    if f.is_null() {
        Err(crate::errno())
    } else {
        STREAMS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((f as usize, fd));
        ANY_STREAM.store(true, Ordering::Release);
        Ok(f)
    }
}

unsafe extern "C" {
    static mut stdin: *mut FILE;
    static mut stdout: *mut FILE;
    static mut stderr: *mut FILE;
}

/// The cookie stream of each standard descriptor, made the first time it
/// became the pool's and kept for good: a program may have copied the
/// `stdout` pointer, so the stream stays valid, and while its descriptor
/// is the kernel's again it reads and writes the kernel's.
static STD_COOKIES: [AtomicPtr<FILE>; 3] = [const { AtomicPtr::new(std::ptr::null_mut()) }; 3];
/// The stream each standard variable held when it was pointed at the
/// cookie (glibc's own), put back when the descriptor is the kernel's.
static STD_KERNEL: [AtomicPtr<FILE>; 3] = [const { AtomicPtr::new(std::ptr::null_mut()) }; 3];

/// The standard stream variable of descriptor `fd` (0, 1 or 2).
fn std_var(fd: usize) -> *mut *mut FILE {
    match fd {
        0 => &raw mut stdin,
        1 => &raw mut stdout,
        _ => &raw mut stderr,
    }
}

unsafe extern "C" fn std_read(cookie: *mut c_void, buf: *mut c_char, n: size_t) -> ssize_t {
    let fd = cookie_fd(cookie);
    if table::is_ours(fd) {
        // SAFETY: as `cookie_read`'s contract (glibc's buffer of `n` bytes).
        return unsafe { cookie_read(cookie, buf, n) };
    }
    // SAFETY: glibc's buffer of `n` bytes, to the kernel's descriptor.
    unsafe { real::read()(fd, buf.cast(), n) }
}

unsafe extern "C" fn std_write(cookie: *mut c_void, buf: *const c_char, n: size_t) -> ssize_t {
    let fd = cookie_fd(cookie);
    if table::is_ours(fd) {
        // SAFETY: as `cookie_write`'s contract (glibc's `n` bytes).
        return unsafe { cookie_write(cookie, buf, n) };
    }
    // SAFETY: glibc's `n` bytes, to the kernel's descriptor.
    unsafe { real::write()(fd, buf.cast(), n) }
}

unsafe extern "C" fn std_seek(cookie: *mut c_void, off: *mut i64, whence: c_int) -> c_int {
    let fd = cookie_fd(cookie);
    if table::is_ours(fd) {
        // SAFETY: as `cookie_seek`'s contract (glibc's offset to update).
        return unsafe { cookie_seek(cookie, off, whence) };
    }
    // SAFETY: glibc passes the offset to read and update.
    let pos = unsafe { real::lseek64()(fd, *off, whence) };
    if pos < 0 {
        return -1;
    }
    // SAFETY: as above.
    unsafe { *off = pos };
    0
}

/// Descriptor `fd` was just made the pool's: if it is 0, 1 or 2, the
/// standard stream of that number becomes its cookie stream (made on the
/// first call; `stderr`'s unbuffered, as glibc's). The stream glibc had is
/// kept to be put back.
pub(crate) fn std_bound(fd: c_int) {
    let Ok(i @ 0..=2) = usize::try_from(fd) else {
        return;
    };
    let mut cookie = STD_COOKIES[i].load(Ordering::Acquire);
    if cookie.is_null() {
        let io = CookieIo {
            read: Some(std_read),
            write: Some(std_write),
            seek: Some(std_seek),
            // Closing the stream leaves the descriptor open (it is the
            // program's to close).
            close: None,
        };
        let mode = if i == 0 { c"r" } else { c"w" };
        // SAFETY: the cookie is a descriptor number; the mode is a
        // NUL-terminated constant.
        cookie = unsafe { fopencookie(fd as usize as *mut c_void, mode.as_ptr(), io) };
        if cookie.is_null() {
            return;
        }
        if i == 2 {
            // SAFETY: a stream just made, before any I/O on it.
            unsafe { libc::setvbuf(cookie, std::ptr::null_mut(), libc::_IONBF, 0) };
        }
        STD_COOKIES[i].store(cookie, Ordering::Release);
    }
    // SAFETY: the standard stream variables are plain pointers glibc and
    // the program read; this library writes them only here and in
    // `std_unbound`, for the descriptor the caller is changing.
    unsafe {
        let var = std_var(i);
        let now = *var;
        if now != cookie {
            STD_KERNEL[i].store(now, Ordering::Release);
            *var = cookie;
        }
    }
}

/// Descriptor `fd` is about to stop being the pool's (closed, or replaced
/// by a kernel one): if it is 0, 1 or 2 and its standard stream is the
/// cookie, what the cookie holds is written out while the descriptor is
/// still the pool's, and glibc's stream is put back.
pub(crate) fn std_unbound(fd: c_int) {
    let Ok(i @ 0..=2) = usize::try_from(fd) else {
        return;
    };
    let cookie = STD_COOKIES[i].load(Ordering::Acquire);
    if cookie.is_null() {
        return;
    }
    // SAFETY: as in `std_bound`; `cookie` is a live stream of this library.
    unsafe {
        libc::fflush(cookie);
        let var = std_var(i);
        let kernel = STD_KERNEL[i].load(Ordering::Acquire);
        if *var == cookie && !kernel.is_null() {
            *var = kernel;
        }
    }
}

/// `fileno(3)`: a standard cookie stream's descriptor is its number; a
/// stream of `fopen`/`fdopen` on the pool gives its descriptor.
///
/// # Safety
/// As `fileno(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fileno(f: *mut FILE) -> c_int {
    if let Some(i) = std_cookie_fd(f).or_else(|| stream_fd(f)) {
        return i;
    }
    // SAFETY: the caller's stream, unchanged, to libc.
    unsafe { real::fileno()(f) }
}

/// `fileno_unlocked(3)`: as [`fileno`].
///
/// # Safety
/// As `fileno_unlocked(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fileno_unlocked(f: *mut FILE) -> c_int {
    if let Some(i) = std_cookie_fd(f).or_else(|| stream_fd(f)) {
        return i;
    }
    // SAFETY: the caller's stream, unchanged, to libc.
    unsafe { real::fileno_unlocked()(f) }
}

/// The descriptor of `f` if it is one of the standard cookie streams.
fn std_cookie_fd(f: *mut FILE) -> Option<c_int> {
    if f.is_null() {
        return None;
    }
    (0..3)
        .find(|&i| STD_COOKIES[i].load(Ordering::Relaxed) == f)
        .map(|i| i as c_int)
}

/// `open(2)` flags of an `fopen` mode (`r`, `w+`, `ae`, `wx`, ...).
fn mode_flags(mode: &[u8]) -> Result<c_int, c_int> {
    let rest = mode.get(1..).unwrap_or_default();
    let rest = &rest[..rest.iter().position(|&c| c == b',').unwrap_or(rest.len())];
    let plus = rest.contains(&b'+');
    let mut flags = match (mode.first(), plus) {
        (Some(b'r'), false) => libc::O_RDONLY,
        (Some(b'r'), true) => libc::O_RDWR,
        (Some(b'w'), p) => {
            libc::O_CREAT | libc::O_TRUNC | if p { libc::O_RDWR } else { libc::O_WRONLY }
        }
        (Some(b'a'), p) => {
            libc::O_CREAT | libc::O_APPEND | if p { libc::O_RDWR } else { libc::O_WRONLY }
        }
        _ => return Err(libc::EINVAL),
    };
    if rest.contains(&b'e') {
        flags |= libc::O_CLOEXEC;
    }
    if rest.contains(&b'x') {
        flags |= libc::O_EXCL;
    }
    Ok(flags)
}

/// `fopen(3)`.
///
/// # Safety
/// As `fopen(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fopen(path: *const c_char, mode: *const c_char) -> *mut FILE {
    // SAFETY: forwarded from the caller.
    unsafe {
        on_path(
            libc::AT_FDCWD,
            path,
            |fs, p| {
                if mode.is_null() {
                    return Err(libc::EINVAL);
                }
                let flags = mode_flags(CStr::from_ptr(mode).to_bytes())?;
                let fd = files::open_ours(fs, p, flags, 0o666)?;
                stream(fd, mode).inspect_err(|_| {
                    files::close_ours(fd);
                })
            },
            |path| real::fopen64()(path, mode),
        )
    }
}

/// `fopen64(3)`.
///
/// # Safety
/// As `fopen(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fopen64(path: *const c_char, mode: *const c_char) -> *mut FILE {
    // SAFETY: forwarded from the caller.
    unsafe { fopen(path, mode) }
}

/// `fdopen(3)`.
///
/// # Safety
/// As `fdopen(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fdopen(fd: c_int, mode: *const c_char) -> *mut FILE {
    if !table::is_ours(fd) {
        // SAFETY: the caller's arguments, unchanged, to libc.
        return unsafe { real::fdopen()(fd, mode) };
    }
    if mode.is_null() {
        return ret(Err(libc::EINVAL));
    }
    // SAFETY: `mode` is NUL-terminated (caller).
    ret(state::fs().and_then(|_| unsafe { stream(fd, mode) }))
}

/// `freopen(3)`: onto a path under the pool it is not supported (the
/// stream would have to become a cookie stream in place); `ENOTSUP`,
/// said on stderr.
///
/// # Safety
/// As `freopen(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn freopen(
    path: *const c_char,
    mode: *const c_char,
    f: *mut FILE,
) -> *mut FILE {
    // SAFETY: forwarded from the caller.
    unsafe {
        on_path(
            libc::AT_FDCWD,
            path,
            |_, p| {
                state::say(&format!(
                    "freopen onto {} under the pool is not supported",
                    p.display()
                ));
                Err(libc::ENOTSUP)
            },
            |path| real::freopen64()(path, mode, f),
        )
    }
}

/// `freopen64(3)`.
///
/// # Safety
/// As `freopen(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn freopen64(
    path: *const c_char,
    mode: *const c_char,
    f: *mut FILE,
) -> *mut FILE {
    // SAFETY: forwarded from the caller.
    unsafe { freopen(path, mode, f) }
}

#[cfg(test)]
mod tests {
    use super::mode_flags;

    #[test]
    fn fopen_modes_map_to_open_flags() {
        assert_eq!(mode_flags(b"r"), Ok(libc::O_RDONLY));
        assert_eq!(mode_flags(b"rb+"), Ok(libc::O_RDWR));
        assert_eq!(
            mode_flags(b"w"),
            Ok(libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC)
        );
        assert_eq!(
            mode_flags(b"ae"),
            Ok(libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND | libc::O_CLOEXEC)
        );
        assert_eq!(
            mode_flags(b"wx"),
            Ok(libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_EXCL)
        );
        assert_eq!(mode_flags(b"q"), Err(libc::EINVAL));
    }
}
