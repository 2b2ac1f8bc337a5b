//! `FILE*` streams on files under the pool: glibc's `fopen` opens through
//! an internal `open` out of this library's reach, so `fopen` itself is
//! interposed and returns a `fopencookie` stream whose read, write, seek
//! and close call manyfs. Such a stream has no descriptor: `fileno` on it
//! fails with `EBADF`.

use crate::table;
use crate::{files, on_path, real, ret, state};
use libc::{FILE, c_char, c_int, c_void, size_t, ssize_t};
use std::ffi::CStr;

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
    files::close_ours(cookie_fd(cookie))
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
        Ok(f)
    }
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
