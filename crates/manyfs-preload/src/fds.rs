//! Descriptor calls: `dup`, `dup2`, `dup3`, `fcntl`, and the calls that
//! refuse a manyfs descriptor (`ioctl`, `mmap`, `copy_file_range`).

use crate::files::SHOWN_FLAGS;
use crate::table::{self, Open};
use crate::{on_fd, real, ret, state};
use libc::{c_int, c_uint, c_ulong, c_void, off_t, size_t, ssize_t};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A new descriptor, at least `min`, for the open file behind `fd`.
fn dup_ours(fd: c_int, min: c_int, cloexec: bool) -> Result<c_int, c_int> {
    let open = table::get(fd).ok_or(libc::EBADF)?;
    let new = table::reserve(min)?;
    table::install(new, open, cloexec);
    Ok(new)
}

/// Make `new` a copy of `old` (either may be ours).
fn dup_onto(old: c_int, new: c_int, cloexec: bool) -> Result<c_int, c_int> {
    if old == new {
        return Err(libc::EINVAL);
    }
    let open: Option<Arc<Open>> = table::get(old);
    // The kernel's copy keeps close-on-exec set for ours (see `table`).
    let kflags = if cloexec || open.is_some() {
        libc::O_CLOEXEC
    } else {
        0
    };
    if table::is_ours(new) {
        crate::files::close_ours(new);
    }
    // SAFETY: two descriptor numbers; the kernel checks them.
    let r = unsafe { real::dup3()(old, new, kflags) };
    if r < 0 {
        return Err(crate::errno());
    }
    if let Some(open) = open {
        table::install(new, open, cloexec);
    }
    Ok(new)
}

/// `dup2`/`dup3` onto one of the library's own descriptors (the pool's
/// file, see `own`) would close it under the library: `EBUSY`, said once.
fn not_onto_own(new: c_int) -> Result<(), c_int> {
    if !crate::own::is_own(new) {
        return Ok(());
    }
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !SAID.swap(true, Ordering::Relaxed) {
        state::say(&format!(
            "descriptor {new} holds the pool's file: dup2/dup3 onto it is refused (EBUSY)"
        ));
    }
    Err(libc::EBUSY)
}

/// `dup(2)`.
#[unsafe(no_mangle)]
pub extern "C" fn dup(fd: c_int) -> c_int {
    on_fd(
        fd,
        |_| dup_ours(fd, 0, false),
        // SAFETY: the caller's argument, unchanged, to libc.
        || unsafe { real::dup()(fd) },
    )
}

/// `dup2(2)`.
#[unsafe(no_mangle)]
pub extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    if old == new {
        return on_fd(
            old,
            |_| Ok(new),
            // SAFETY: the caller's arguments, unchanged, to libc.
            || unsafe { real::dup2()(old, new) },
        );
    }
    if let Err(e) = not_onto_own(new) {
        return ret(Err(e));
    }
    if !table::is_ours(old) && !table::is_ours(new) {
        // SAFETY: the caller's arguments, unchanged, to libc.
        return unsafe { real::dup2()(old, new) };
    }
    ret(state::fs().and_then(|_| dup_onto(old, new, false)))
}

/// `dup3(2)`.
#[unsafe(no_mangle)]
pub extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    if let Err(e) = not_onto_own(new) {
        return ret(Err(e));
    }
    if !table::is_ours(old) && !table::is_ours(new) {
        // SAFETY: the caller's arguments, unchanged, to libc.
        return unsafe { real::dup3()(old, new, flags) };
    }
    if flags & !libc::O_CLOEXEC != 0 {
        return ret(Err(libc::EINVAL));
    }
    ret(state::fs().and_then(|_| dup_onto(old, new, flags & libc::O_CLOEXEC != 0)))
}

/// `fcntl` commands of Linux's write-life hints (`F_LINUX_SPECIFIC_BASE`
/// 1024 + 11 ... 14; the `libc` crate does not name them).
const F_GET_RW_HINT: c_int = 1035;
const F_SET_RW_HINT: c_int = 1036;
const F_GET_FILE_RW_HINT: c_int = 1037;
const F_SET_FILE_RW_HINT: c_int = 1038;
/// The highest valid hint, `RWH_WRITE_LIFE_EXTREME` (`RWH_WRITE_LIFE_NOT_SET`
/// is 0).
const RWH_WRITE_LIFE_EXTREME: u64 = 5;

/// The `u64` a hint command's argument points at (`EFAULT` for null).
fn hint_arg(arg: c_ulong) -> Result<*mut u64, c_int> {
    let p = arg as *mut u64;
    if p.is_null() {
        return Err(libc::EFAULT);
    }
    Ok(p)
}

/// `F_SET_RW_HINT`/`F_SET_FILE_RW_HINT`: store the hint `arg` points at
/// (`EINVAL` past `RWH_WRITE_LIFE_EXTREME`).
fn set_hint(slot: &AtomicU64, arg: c_ulong) -> Result<c_int, c_int> {
    // SAFETY: the caller passes a pointer to a `u64` for these commands;
    // checked non-null, read unaligned as the kernel's copy would.
    let hint = unsafe { hint_arg(arg)?.read_unaligned() };
    if hint > RWH_WRITE_LIFE_EXTREME {
        return Err(libc::EINVAL);
    }
    slot.store(hint, Ordering::Relaxed);
    Ok(0)
}

/// `F_GET_RW_HINT`/`F_GET_FILE_RW_HINT`: write `hint` where `arg` points.
fn get_hint(hint: u64, arg: c_ulong) -> Result<c_int, c_int> {
    // SAFETY: the caller passes a pointer to a `u64` for these commands;
    // checked non-null, written unaligned as the kernel's copy would.
    unsafe { hint_arg(arg)?.write_unaligned(hint) };
    Ok(0)
}

/// `fcntl` on ours. Record locks (`F_SETLK`, `F_SETLKW`, `F_OFD_*`)
/// succeed without locking anything: one process owns the pool, and its
/// threads' locks on one another are not kept (`F_GETLK` reports the
/// range unlocked).
fn fcntl_ours(fd: c_int, o: &Open, cmd: c_int, arg: c_ulong) -> Result<c_int, c_int> {
    match cmd {
        libc::F_DUPFD => dup_ours(fd, arg as c_int, false),
        libc::F_DUPFD_CLOEXEC => dup_ours(fd, arg as c_int, true),
        libc::F_GETFD => Ok(if table::cloexec(fd) {
            libc::FD_CLOEXEC
        } else {
            0
        }),
        libc::F_SETFD => {
            table::set_cloexec(fd, arg as c_int & libc::FD_CLOEXEC != 0);
            Ok(0)
        }
        libc::F_GETFL => Ok(o.flags.load(Ordering::Relaxed)),
        libc::F_SETFL => {
            let settable = libc::O_APPEND | libc::O_NONBLOCK | libc::O_NOATIME | libc::O_DIRECT;
            let _ = o
                .flags
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |f| {
                    Some((f & !settable) | (arg as c_int & settable & SHOWN_FLAGS))
                });
            Ok(0)
        }
        libc::F_SETLK | libc::F_SETLKW | libc::F_OFD_SETLK | libc::F_OFD_SETLKW => Ok(0),
        // Write-life hints are kept (with the open file, see `Open`) and
        // read back; they do not change where data goes.
        F_SET_RW_HINT => set_hint(&o.write_hint, arg),
        F_GET_RW_HINT => get_hint(o.write_hint.load(Ordering::Relaxed), arg),
        F_SET_FILE_RW_HINT => set_hint(&o.file_write_hint, arg),
        // The file's own hint, else the one `F_SET_RW_HINT` set (as Linux's
        // `file_write_hint()`).
        F_GET_FILE_RW_HINT => get_hint(
            match o.file_write_hint.load(Ordering::Relaxed) {
                0 => o.write_hint.load(Ordering::Relaxed),
                h => h,
            },
            arg,
        ),
        libc::F_GETLK | libc::F_OFD_GETLK => {
            let lock = arg as *mut libc::flock;
            if lock.is_null() {
                return Err(libc::EFAULT);
            }
            // SAFETY: the caller passes a `struct flock` for F_GETLK.
            unsafe { (*lock).l_type = libc::F_UNLCK as i16 };
            Ok(0)
        }
        _ => {
            state::say(&format!(
                "fcntl command {cmd} is not supported on a file under the pool"
            ));
            Err(libc::EINVAL)
        }
    }
}

/// `fcntl(2)`.
#[unsafe(no_mangle)]
pub extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    on_fd(
        fd,
        |o| fcntl_ours(fd, o, cmd, arg),
        // SAFETY: the caller's arguments, unchanged, to libc.
        || unsafe { real::fcntl64()(fd, cmd, arg) },
    )
}

/// `fcntl64(2)`.
#[unsafe(no_mangle)]
pub extern "C" fn fcntl64(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    fcntl(fd, cmd, arg)
}

/// `flock(2)`. On ours, as record locks ([`fcntl_ours`]): a lock
/// succeeds without locking anything (one process owns the pool);
/// an operation other than `LOCK_SH`, `LOCK_EX` or `LOCK_UN` (each
/// with `LOCK_NB` or not) is `EINVAL`, as Linux answers.
#[unsafe(no_mangle)]
pub extern "C" fn flock(fd: c_int, op: c_int) -> c_int {
    on_fd(
        fd,
        |_| match op & !libc::LOCK_NB {
            libc::LOCK_SH | libc::LOCK_EX | libc::LOCK_UN => Ok(0),
            _ => Err(libc::EINVAL),
        },
        // SAFETY: the caller's arguments, unchanged, to libc.
        || unsafe { real::flock()(fd, op) },
    )
}

/// `lockf(3)` on ours (glibc's calls `fcntl` inside libc, where this
/// library does not see it): `F_LOCK`, `F_TLOCK` and `F_ULOCK` succeed
/// without locking anything, `F_TEST` finds the range unlocked (one
/// process owns the pool); a descriptor not open for writing is
/// `EBADF` for the locking commands, and another command `EINVAL`, as
/// glibc answers.
fn lockf_ours(o: &Open, cmd: c_int) -> Result<c_int, c_int> {
    let writable = o.flags.load(Ordering::Relaxed) & libc::O_ACCMODE != libc::O_RDONLY;
    match cmd {
        libc::F_TEST => Ok(0),
        libc::F_LOCK | libc::F_TLOCK | libc::F_ULOCK if writable => Ok(0),
        libc::F_LOCK | libc::F_TLOCK | libc::F_ULOCK => Err(libc::EBADF),
        _ => Err(libc::EINVAL),
    }
}

/// `lockf(3)`.
#[unsafe(no_mangle)]
pub extern "C" fn lockf(fd: c_int, cmd: c_int, len: off_t) -> c_int {
    on_fd(
        fd,
        |o| lockf_ours(o, cmd),
        // SAFETY: the caller's arguments, unchanged, to libc.
        || unsafe { real::lockf()(fd, cmd, len) },
    )
}

/// `lockf64(3)`: `lockf` (`off_t` is 64 bits here).
#[unsafe(no_mangle)]
pub extern "C" fn lockf64(fd: c_int, cmd: c_int, len: off_t) -> c_int {
    lockf(fd, cmd, len)
}

/// `ioctl(2)`: none on ours (`ENOTTY`, as for a file without any).
#[unsafe(no_mangle)]
pub extern "C" fn ioctl(fd: c_int, req: c_ulong, arg: c_ulong) -> c_int {
    on_fd(
        fd,
        |_| Err(libc::ENOTTY),
        // SAFETY: the caller's arguments, unchanged, to libc.
        || unsafe { real::ioctl()(fd, req, arg) },
    )
}

/// `mmap(2)`: a file under the pool is mapped through a shared-memory copy
/// (`shadow.rs`).
///
/// # Safety
/// As `mmap(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mmap(
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: off_t,
) -> *mut c_void {
    if flags & libc::MAP_ANONYMOUS == 0
        && let Some(o) = table::get(fd)
    {
        return match state::fs().and_then(|_| crate::shadow::map(&o, addr, len, prot, flags, off)) {
            Ok(p) => p,
            Err(e) => {
                crate::set_errno(e);
                libc::MAP_FAILED
            }
        };
    }
    // SAFETY: the caller's arguments, unchanged, to libc.
    unsafe { real::mmap64()(addr, len, prot, flags, fd, off) }
}

/// `munmap(2)`: a mapping of a file under the pool is written back first.
///
/// # Safety
/// As `munmap(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn munmap(addr: *mut c_void, len: size_t) -> c_int {
    crate::shadow::unmap(addr, len)
}

/// `msync(2)`: a mapping of a file under the pool is written back to it.
///
/// # Safety
/// As `msync(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn msync(addr: *mut c_void, len: size_t, flags: c_int) -> c_int {
    crate::shadow::sync(addr, len, flags)
}

/// `mmap64(2)`.
///
/// # Safety
/// As `mmap(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mmap64(
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: off_t,
) -> *mut c_void {
    // SAFETY: forwarded from the caller.
    unsafe { mmap(addr, len, prot, flags, fd, off) }
}

/// `copy_file_range(2)`: `EXDEV` when either side is ours, so programs
/// fall back to reading and writing.
///
/// # Safety
/// As `copy_file_range(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn copy_file_range(
    fd_in: c_int,
    off_in: *mut i64,
    fd_out: c_int,
    off_out: *mut i64,
    len: size_t,
    flags: c_uint,
) -> ssize_t {
    if table::is_ours(fd_in) || table::is_ours(fd_out) {
        return ret(Err(libc::EXDEV));
    }
    // SAFETY: the caller's arguments, unchanged, to libc.
    unsafe { real::copy_file_range()(fd_in, off_in, fd_out, off_out, len, flags) }
}
