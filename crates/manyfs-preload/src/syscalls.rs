//! Raw `syscall(2)`: a program that makes a file system call through
//! glibc's `syscall` function (not its wrapper) reaches this library too.
//! The numbers that take a path or a descriptor are served by the
//! library's own entry points (the same ones the wrappers bind to) when
//! the call is ours: a descriptor in the table, or a path under the run's
//! directory or through it. Every other number, and every call that is
//! not ours, goes to libc's `syscall` with its six arguments unchanged.
//! Either way the result keeps `syscall`'s convention: -1 with `errno`
//! on failure.
//!
//! `syscall` is variadic in C; on x86-64 the System V convention passes a
//! variadic call's integer arguments where a fixed one's go (six in
//! registers, after them the stack), so it is defined with six fixed
//! `c_long`s after the number, as `open` is with its mode. A caller that
//! passed fewer leaves unread registers and stack slots in the others;
//! they are handed back to libc as they were.

use crate::{dirs, fds, files, meta, names, own, paths, table, transfer};
use libc::{c_char, c_int, c_long, c_uint, c_ulong, c_void, size_t};

/// Whether descriptor argument `fd` is ours.
fn ours_fd(fd: c_long) -> bool {
    table::is_ours(fd as c_int)
}

/// Whether the path argument `path`, relative to `dirfd`, is ours: the
/// directory is a descriptor of ours, or the path leads under the run's
/// directory or through it (a normalised kernel path the library gives
/// the kernel), or it cannot be looked at (the library then answers its
/// error).
///
/// # Safety
/// `path` is null or a NUL-terminated string.
unsafe fn ours_at(dirfd: c_long, path: c_long) -> bool {
    // SAFETY: the caller's promise.
    ours_fd(dirfd)
        || !matches!(
            unsafe { paths::target_c(dirfd as c_int, ptr(path)) },
            Ok(paths::Target::Kernel)
        )
}

/// [`ours_at`] of a path relative to the working directory.
///
/// # Safety
/// As [`ours_at`].
unsafe fn ours_path(path: c_long) -> bool {
    // SAFETY: the caller's promise.
    unsafe { ours_at(libc::AT_FDCWD as c_long, path) }
}

/// A pointer argument.
fn ptr<T>(arg: c_long) -> *mut T {
    arg as usize as *mut T
}

/// Serve system call `n` with arguments `a` if it is one of ours; `None`
/// when libc's `syscall` should make it.
///
/// # Safety
/// The arguments are what system call `n` takes.
unsafe fn route(n: c_long, a: [c_long; 6]) -> Option<c_long> {
    let fd = |i: usize| a[i] as c_int;
    let uint = |i: usize| a[i] as c_uint;
    let size = |i: usize| a[i] as size_t;
    // SAFETY (for every arm): the arguments are those of system call `n`
    // (the caller's promise), given to the entry point of the same call.
    let r = unsafe {
        match n {
            libc::SYS_read if ours_fd(a[0]) => files::read(fd(0), ptr(a[1]), size(2)) as c_long,
            libc::SYS_write if ours_fd(a[0]) => {
                files::write(fd(0), ptr::<c_void>(a[1]), size(2)) as c_long
            }
            libc::SYS_pread64 if ours_fd(a[0]) => {
                files::pread(fd(0), ptr(a[1]), size(2), a[3]) as c_long
            }
            libc::SYS_pwrite64 if ours_fd(a[0]) => {
                files::pwrite(fd(0), ptr::<c_void>(a[1]), size(2), a[3]) as c_long
            }
            libc::SYS_readv if ours_fd(a[0]) => files::readv(fd(0), ptr(a[1]), fd(2)) as c_long,
            libc::SYS_writev if ours_fd(a[0]) => files::writev(fd(0), ptr(a[1]), fd(2)) as c_long,
            // The offset's low and high halves: on x86-64 the low one is all of it.
            libc::SYS_preadv if ours_fd(a[0]) => {
                files::preadv(fd(0), ptr(a[1]), fd(2), a[3]) as c_long
            }
            libc::SYS_pwritev if ours_fd(a[0]) => {
                files::pwritev(fd(0), ptr(a[1]), fd(2), a[3]) as c_long
            }
            libc::SYS_preadv2 if ours_fd(a[0]) => {
                files::preadv2(fd(0), ptr(a[1]), fd(2), a[3], fd(5)) as c_long
            }
            libc::SYS_pwritev2 if ours_fd(a[0]) => {
                files::pwritev2(fd(0), ptr(a[1]), fd(2), a[3], fd(5)) as c_long
            }
            libc::SYS_open if ours_path(a[0]) => files::open(ptr(a[0]), fd(1), uint(2)) as c_long,
            libc::SYS_creat if ours_path(a[0]) => files::creat(ptr(a[0]), uint(1)) as c_long,
            libc::SYS_openat if ours_at(a[0], a[1]) => {
                files::openat(fd(0), ptr(a[1]), fd(2), uint(3)) as c_long
            }
            libc::SYS_close if ours_fd(a[0]) || own::is_own(fd(0)) => files::close(fd(0)) as c_long,
            libc::SYS_close_range => files::close_range(uint(0), uint(1), fd(2)) as c_long,
            libc::SYS_lseek if ours_fd(a[0]) => files::lseek(fd(0), a[1], fd(2)),
            libc::SYS_fsync if ours_fd(a[0]) => files::fsync(fd(0)) as c_long,
            libc::SYS_fdatasync if ours_fd(a[0]) => files::fdatasync(fd(0)) as c_long,
            libc::SYS_ftruncate if ours_fd(a[0]) => files::ftruncate(fd(0), a[1]) as c_long,
            libc::SYS_truncate if ours_path(a[0]) => files::truncate(ptr(a[0]), a[1]) as c_long,
            libc::SYS_fallocate if ours_fd(a[0]) => {
                files::fallocate(fd(0), fd(1), a[2], a[3]) as c_long
            }
            libc::SYS_fstat if ours_fd(a[0]) => meta::fstat(fd(0), ptr(a[1])) as c_long,
            libc::SYS_stat if ours_path(a[0]) => meta::stat(ptr(a[0]), ptr(a[1])) as c_long,
            libc::SYS_lstat if ours_path(a[0]) => meta::lstat(ptr(a[0]), ptr(a[1])) as c_long,
            libc::SYS_newfstatat if ours_at(a[0], a[1]) => {
                meta::fstatat(fd(0), ptr(a[1]), ptr(a[2]), fd(3)) as c_long
            }
            libc::SYS_statx if ours_at(a[0], a[1]) => {
                meta::statx(fd(0), ptr(a[1]), fd(2), uint(3), ptr(a[4])) as c_long
            }
            libc::SYS_fstatfs if ours_fd(a[0]) => meta::fstatfs(fd(0), ptr(a[1])) as c_long,
            libc::SYS_statfs if ours_path(a[0]) => meta::statfs(ptr(a[0]), ptr(a[1])) as c_long,
            libc::SYS_access if ours_path(a[0]) => meta::access(ptr(a[0]), fd(1)) as c_long,
            libc::SYS_faccessat if ours_at(a[0], a[1]) => {
                meta::faccessat(fd(0), ptr(a[1]), fd(2), 0) as c_long
            }
            libc::SYS_faccessat2 if ours_at(a[0], a[1]) => {
                meta::faccessat(fd(0), ptr(a[1]), fd(2), fd(3)) as c_long
            }
            libc::SYS_fchmod if ours_fd(a[0]) => meta::fchmod(fd(0), uint(1)) as c_long,
            libc::SYS_fchmodat if ours_at(a[0], a[1]) => {
                meta::fchmodat(fd(0), ptr(a[1]), uint(2), 0) as c_long
            }
            libc::SYS_fchown if ours_fd(a[0]) => meta::fchown(fd(0), uint(1), uint(2)) as c_long,
            libc::SYS_fchownat if ours_at(a[0], a[1]) => {
                meta::fchownat(fd(0), ptr(a[1]), uint(2), uint(3), fd(4)) as c_long
            }
            // A null path is `futimens` of the descriptor.
            libc::SYS_utimensat if ours_at(a[0], a[1]) => {
                meta::utimensat(fd(0), ptr(a[1]), ptr(a[2]), fd(3)) as c_long
            }
            libc::SYS_getdents64 if ours_fd(a[0]) => {
                dirs::getdents64(fd(0), ptr(a[1]), size(2)) as c_long
            }
            libc::SYS_unlink if ours_path(a[0]) => names::unlink(ptr(a[0])) as c_long,
            libc::SYS_rmdir if ours_path(a[0]) => names::rmdir(ptr(a[0])) as c_long,
            libc::SYS_unlinkat if ours_at(a[0], a[1]) => {
                names::unlinkat(fd(0), ptr(a[1]), fd(2)) as c_long
            }
            libc::SYS_rename if ours_path(a[0]) || ours_path(a[1]) => {
                names::rename(ptr(a[0]), ptr(a[1])) as c_long
            }
            libc::SYS_renameat if ours_at(a[0], a[1]) || ours_at(a[2], a[3]) => {
                names::renameat(fd(0), ptr(a[1]), fd(2), ptr(a[3])) as c_long
            }
            libc::SYS_renameat2 if ours_at(a[0], a[1]) || ours_at(a[2], a[3]) => {
                names::renameat2(fd(0), ptr(a[1]), fd(2), ptr(a[3]), uint(4)) as c_long
            }
            libc::SYS_link if ours_path(a[0]) || ours_path(a[1]) => {
                names::link(ptr(a[0]), ptr(a[1])) as c_long
            }
            libc::SYS_linkat if ours_at(a[0], a[1]) || ours_at(a[2], a[3]) => {
                names::linkat(fd(0), ptr(a[1]), fd(2), ptr(a[3]), fd(4)) as c_long
            }
            libc::SYS_symlink if ours_path(a[1]) => names::symlink(ptr(a[0]), ptr(a[1])) as c_long,
            libc::SYS_symlinkat if ours_at(a[1], a[2]) => {
                names::symlinkat(ptr(a[0]), fd(1), ptr(a[2])) as c_long
            }
            libc::SYS_readlink if ours_path(a[0]) => {
                names::readlink(ptr(a[0]), ptr::<c_char>(a[1]), size(2)) as c_long
            }
            libc::SYS_readlinkat if ours_at(a[0], a[1]) => {
                names::readlinkat(fd(0), ptr(a[1]), ptr::<c_char>(a[2]), size(3)) as c_long
            }
            libc::SYS_mkdir if ours_path(a[0]) => names::mkdir(ptr(a[0]), uint(1)) as c_long,
            libc::SYS_mkdirat if ours_at(a[0], a[1]) => {
                names::mkdirat(fd(0), ptr(a[1]), uint(2)) as c_long
            }
            libc::SYS_mknodat if ours_at(a[0], a[1]) => {
                names::mknodat(fd(0), ptr(a[1]), uint(2), a[3] as libc::dev_t) as c_long
            }
            libc::SYS_chdir if ours_path(a[0]) => names::chdir(ptr(a[0])) as c_long,
            libc::SYS_fchdir if ours_fd(a[0]) => names::fchdir(fd(0)) as c_long,
            libc::SYS_dup if ours_fd(a[0]) => fds::dup(fd(0)) as c_long,
            libc::SYS_dup2 if ours_fd(a[0]) || ours_fd(a[1]) || own::is_own(fd(1)) => {
                fds::dup2(fd(0), fd(1)) as c_long
            }
            libc::SYS_dup3 if ours_fd(a[0]) || ours_fd(a[1]) || own::is_own(fd(1)) => {
                fds::dup3(fd(0), fd(1), fd(2)) as c_long
            }
            libc::SYS_fcntl if ours_fd(a[0]) => fds::fcntl(fd(0), fd(1), a[2] as c_ulong) as c_long,
            libc::SYS_ioctl if ours_fd(a[0]) => {
                fds::ioctl(fd(0), a[1] as c_ulong, a[2] as c_ulong) as c_long
            }
            libc::SYS_copy_file_range if ours_fd(a[0]) || ours_fd(a[2]) => {
                fds::copy_file_range(fd(0), ptr(a[1]), fd(2), ptr(a[3]), size(4), uint(5)) as c_long
            }
            libc::SYS_sendfile if ours_fd(a[0]) || ours_fd(a[1]) => {
                transfer::sendfile(fd(0), fd(1), ptr(a[2]), size(3)) as c_long
            }
            libc::SYS_splice if ours_fd(a[0]) || ours_fd(a[2]) => {
                transfer::splice(fd(0), ptr(a[1]), fd(2), ptr(a[3]), size(4), uint(5)) as c_long
            }
            _ => return None,
        }
    };
    Some(r)
}

/// `syscall(2)` (see the module's documentation).
///
/// # Safety
/// As `syscall(2)`: the arguments are what system call `n` takes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn syscall(
    n: c_long,
    a1: c_long,
    a2: c_long,
    a3: c_long,
    a4: c_long,
    a5: c_long,
    a6: c_long,
) -> c_long {
    // SAFETY: the caller's promise.
    match unsafe { route(n, [a1, a2, a3, a4, a5, a6]) } {
        Some(r) => r,
        // SAFETY: the caller's arguments, unchanged, to libc.
        None => unsafe { crate::real::syscall()(n, a1, a2, a3, a4, a5, a6) },
    }
}
