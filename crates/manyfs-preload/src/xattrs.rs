//! Extended attributes (`ls -l` asks for ACLs, `cp -a` and `tar` copy
//! them): served by the pool's own.

use crate::table::Open;
use crate::{errno_of, mounted, on_fd, on_path, real_xattr};
use libc::{c_char, c_int, c_void, size_t, ssize_t};
use manyfs::Fs;
use manyfs::lowlevel::{InodeOps, XattrSet};
use std::ffi::{CStr, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

fn ino_of(fs: &Fs, p: &Path, follow: bool) -> Result<u64, c_int> {
    if follow {
        fs.metadata(p)
    } else {
        fs.symlink_metadata(p)
    }
    .map(|m| m.ino)
    .map_err(errno_of)
}

/// # Safety
/// `name` is null or NUL-terminated.
unsafe fn name_of<'a>(name: *const c_char) -> Result<&'a OsStr, c_int> {
    if name.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller's promise.
    Ok(OsStr::from_bytes(
        unsafe { CStr::from_ptr(name) }.to_bytes(),
    ))
}

/// Copy `data` out as the xattr calls do: size 0 asks for the length.
fn copy_out(data: &[u8], buf: *mut c_void, size: size_t) -> Result<ssize_t, c_int> {
    if size == 0 {
        return Ok(data.len() as ssize_t);
    }
    if data.len() > size {
        return Err(libc::ERANGE);
    }
    // SAFETY: the caller's buffer of `size` bytes.
    unsafe { crate::bytes_mut(buf, data.len()) }?.copy_from_slice(data);
    Ok(data.len() as ssize_t)
}

fn get(ino: u64, name: &OsStr, buf: *mut c_void, size: size_t) -> Result<ssize_t, c_int> {
    let v = mounted()?.getxattr(ino, name).map_err(errno_of)?;
    copy_out(&v, buf, size)
}

fn list(ino: u64, buf: *mut c_char, size: size_t) -> Result<ssize_t, c_int> {
    let names = mounted()?.listxattr(ino).map_err(errno_of)?;
    let mut out = Vec::new();
    for n in names {
        out.extend_from_slice(n.as_bytes());
        out.push(0);
    }
    copy_out(&out, buf.cast(), size)
}

fn set(
    ino: u64,
    name: &OsStr,
    value: *const c_void,
    size: size_t,
    flags: c_int,
) -> Result<c_int, c_int> {
    let how = match flags {
        0 => XattrSet::Any,
        libc::XATTR_CREATE => XattrSet::Create,
        libc::XATTR_REPLACE => XattrSet::Replace,
        _ => return Err(libc::EINVAL),
    };
    // SAFETY: the caller's value of `size` bytes.
    let v = unsafe { crate::bytes(value, size) }?;
    mounted()?
        .setxattr(ino, name, v, how)
        .map(|()| 0)
        .map_err(errno_of)
}

fn remove(ino: u64, name: &OsStr) -> Result<c_int, c_int> {
    mounted()?
        .removexattr(ino, name)
        .map(|()| 0)
        .map_err(errno_of)
}

fn fd_ino(o: &Open) -> u64 {
    o.file.ino()
}

/// Define the path (`follow`), `l` (no follow) and `f` (descriptor)
/// variants of one xattr call.
macro_rules! xattr_calls {
    ($path:ident, $lpath:ident, $fd:ident, ($($a:ident: $t:ty),*) -> $r:ty, |$ino:ident| $body:expr) => {
        xattr_calls!(@path $path, true, ($($a: $t),*) -> $r, |$ino| $body);
        xattr_calls!(@path $lpath, false, ($($a: $t),*) -> $r, |$ino| $body);
        #[doc = concat!("`", stringify!($fd), "(2)`.")]
        ///
        /// # Safety
        /// As the C function.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $fd(fd: c_int, $($a: $t),*) -> $r {
            on_fd(
                fd,
                // SAFETY: the caller's pointers.
                |o| {
                    let $ino = fd_ino(o);
                    #[allow(unused_unsafe)]
                    let r = unsafe { $body };
                    r
                },
                // SAFETY: the caller's arguments, unchanged, to libc.
                || unsafe { real_xattr::$fd()(fd, $($a),*) },
            )
        }
    };
    (@path $name:ident, $follow:expr, ($($a:ident: $t:ty),*) -> $r:ty, |$ino:ident| $body:expr) => {
        #[doc = concat!("`", stringify!($name), "(2)`.")]
        ///
        /// # Safety
        /// As the C function.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(path: *const c_char, $($a: $t),*) -> $r {
            // SAFETY: forwarded from the caller.
            unsafe {
                on_path(
                    libc::AT_FDCWD,
                    path,
                    |fs, p| {
                        let $ino = ino_of(fs, p, $follow)?;
                        $body
                    },
                    |path| real_xattr::$name()(path, $($a),*),
                )
            }
        }
    };
}

xattr_calls!(getxattr, lgetxattr, fgetxattr, (name: *const c_char, buf: *mut c_void, size: size_t) -> ssize_t,
    |ino| get(ino, name_of(name)?, buf, size));
xattr_calls!(listxattr, llistxattr, flistxattr, (buf: *mut c_char, size: size_t) -> ssize_t,
    |ino| list(ino, buf, size));
xattr_calls!(setxattr, lsetxattr, fsetxattr, (name: *const c_char, value: *const c_void, size: size_t, flags: c_int) -> c_int,
    |ino| set(ino, name_of(name)?, value, size, flags));
xattr_calls!(removexattr, lremovexattr, fremovexattr, (name: *const c_char) -> c_int,
    |ino| remove(ino, name_of(name)?));
