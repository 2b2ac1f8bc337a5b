//! `libmanyfs_preload.so`: the library `manyfs run` preloads into a
//! program (`LD_PRELOAD`) so that the program's file calls on paths under
//! one directory, and on descriptors opened there, are served by a manyfs
//! pool mounted inside the program's own process, in the calling thread:
//! no daemon, no kernel mount, no context switch. Every other call goes to
//! libc untouched.
//!
//! # Why symbol interposition
//!
//! Rewriting the program's `syscall` instructions (pmem's
//! `syscall_intercept`) would catch every system call, those glibc makes
//! internally included; but it is not packaged here and needs building
//! from source with capstone. Symbol interposition is what can ship: this
//! library defines `open`, `read`, `stat`, ... and the dynamic linker binds
//! the program's calls to them before libc's. Its known gap is the calls
//! glibc makes internally (`fopen` opens through an internal `open` the
//! program's calls never see), which it closes by interposing those
//! higher-level entry points too: `fopen`/`fdopen` (a `FILE*` from
//! `fopencookie` whose read, write, seek and close call manyfs),
//! `opendir`/`fdopendir`/`readdir`/`closedir` (directory streams of its
//! own, known by a registry of the pointers it returned), the whole `stat`
//! family (`stat`, `fstatat`, glibc's `__xstat`-style entry points,
//! `statx`, `statfs`, `statvfs`), `glob` (given this library's directory
//! calls through `GLOB_ALTDIRFUNC`), the tree walks `nftw`, `ftw` and
//! `fts_*` (made here, over the pool) and glibc's fortified `__*_chk`
//! variants.
//!
//! `mmap` of one of its descriptors maps a shared-memory copy of the file
//! (`shadow`), written back on `msync`, `munmap`, `fsync` and before reads.
//! Raw `syscall(2)` is interposed too: its file system numbers are routed
//! to the same entry points (`syscalls`). What stays out of reach fails
//! loudly, never silently: `syscall` instructions of a program's own and
//! the numbers `syscalls` does not route reach the kernel, which knows no
//! such directory (`ENOENT`) and sees the reserved descriptors as
//! `O_PATH` ones (`EBADF`); statically linked and Go programs never call
//! libc at all: `manyfs run` refuses them, and an exec of one from inside
//! the run that names the directory says so on stderr (`exec`).
//! `docs/run.md` lists every call and each limit.
//!
//! Modules: [`state`] (configuration, the mount, letting it go before a
//! fork, exec and exit), `handoff` (what an exec hands to the next program),
//! [`paths`] (is this path ours?), [`table`] (the descriptors), `own`
//! (the library's own kernel descriptors, kept from the program), `real`
//! (libc's definitions), and the interposed calls by area: `files`
//! (open, read, write, sync, size, close, `close_range`), `exec` (the exec
//! and spawn family: the pool synced, a warning for a program this library
//! cannot reach), `meta` (stat,
//! statfs, access, mode, owner, times), `names` (unlink, rename, mkdir,
//! mknod, links, the working directory), `fds` (dup, fcntl, ioctl, mmap,
//! copy_file_range), `transfer` (sendfile, splice), `syscalls` (raw
//! `syscall(2)`), `shadow` (the mapped files' shared-memory copies),
//! `dirs` (directory streams, `getdents64`), `stdio` (`FILE*` streams),
//! `xattrs` (extended attributes), `resolve` (`realpath`), `ftw` (`nftw`,
//! `ftw`), `fts` (glibc's `fts_*` walk over this library's calls),
//! `glob` (`glob` through this library's directory calls), `registry`
//! (the C handles this library handed out).
//!
//! The variadic C functions (`open`, `openat`, `fcntl`, `ioctl`,
//! `syscall`) are defined with their optional arguments as fixed ones: on
//! x86-64 the System V calling convention passes them in the same
//! registers (and stack slots) either way; `open`'s mode is only read
//! when the flags say it was passed, and `syscall`'s six are handed on
//! unchanged when the call is not served here.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]
#![deny(missing_docs)]

mod dirs;
mod exec;
mod fds;
mod files;
mod fts;
mod ftw;
mod glob;
mod handoff;
mod meta;
mod names;
mod offsets;
mod own;
pub mod paths;
mod real;
mod registry;
mod resolve;
mod shadow;
pub mod state;
mod stdio;
mod syscalls;
pub mod table;
mod tempnames;
mod transfer;
mod xattrs;

use real::xattr as real_xattr;

use libc::c_int;

/// The calling thread's `errno`.
pub(crate) fn errno() -> c_int {
    // SAFETY: glibc's thread-local errno is always valid to read.
    unsafe { *libc::__errno_location() }
}

/// Set the calling thread's `errno`.
pub(crate) fn set_errno(e: c_int) {
    // SAFETY: glibc's thread-local errno is always valid to write.
    unsafe { *libc::__errno_location() = e };
}

/// What a C call returns on failure (with `errno` set).
pub(crate) trait Fail {
    /// `-1`, or `MAP_FAILED`, or a null pointer.
    const FAIL: Self;
}
impl Fail for c_int {
    const FAIL: Self = -1;
}
impl Fail for isize {
    const FAIL: Self = -1;
}
impl Fail for i64 {
    const FAIL: Self = -1;
}

/// The C return of a result: the value, or `FAIL` with `errno` set.
pub(crate) fn ret<T: Fail>(r: Result<T, c_int>) -> T {
    r.unwrap_or_else(|e| {
        set_errno(e);
        T::FAIL
    })
}

/// The errno of a library error.
pub(crate) fn errno_of(e: manyfs::Error) -> c_int {
    if let manyfs::Error::LeavesPool { rest } = &e {
        let _ = LEFT_POOL.try_with(|l| l.replace(Some(rest.clone())));
    }
    e.errno()
}

thread_local! {
    /// The rest of the path of this thread's last call that a symlink led
    /// out of the pool ([`errno_of`] of `manyfs::Error::LeavesPool`, whose
    /// errno is `EXDEV`), for [`on_path`] to resolve outside.
    static LEFT_POOL: std::cell::RefCell<Option<Vec<u8>>> =
        const { std::cell::RefCell::new(None) };
}

/// The path outside the pool where this thread's last call was led by a
/// symlink ([`LEFT_POOL`]): absolute, or from the run's directory. Taken:
/// a second call answers `None`.
pub(crate) fn left_pool() -> Option<Vec<u8>> {
    let rest = LEFT_POOL.try_with(|l| l.take()).ok()??;
    if rest.starts_with(b"/") {
        return Some(rest);
    }
    let mut abs = state::config()?.at.as_os_str().as_encoded_bytes().to_vec();
    abs.push(b'/');
    abs.extend_from_slice(&rest);
    Some(abs)
}

thread_local! {
    /// Touched by every call that may reach the pool (and by the library's
    /// constructor on the main thread): once glibc has destroyed this
    /// thread's thread-locals it answers `Err`, and so would the pool's own
    /// (its epoch guards), which would panic.
    static LIVE: LiveTls = const { LiveTls };
}

/// [`LIVE`]'s value; its destructor is what marks the thread-locals gone.
struct LiveTls;

impl Drop for LiveTls {
    fn drop(&mut self) {}
}

/// Whether this thread's thread-locals still work.
pub(crate) fn tls_live() -> bool {
    LIVE.try_with(|_| ()).is_ok()
}

/// A value moved to the helper thread of [`with_live_tls`] and back.
struct Carried<T>(T);
// SAFETY: the calling thread waits, blocked in `pthread_join`, while the
// helper thread uses the value: the two never touch it at once.
unsafe impl<T> Send for Carried<T> {}

/// Run `f` where thread-locals work: here, or, on a thread whose
/// thread-locals glibc has already destroyed (`exit` runs the `atexit`
/// handlers after that, and a program's handler may close or seek a
/// descriptor of the pool: coreutils' `close_stdin`), on a fresh thread,
/// joined.
pub(crate) fn with_live_tls<T>(f: impl FnOnce() -> T) -> T {
    if tls_live() {
        return f();
    }
    extern "C" fn run(arg: *mut libc::c_void) -> *mut libc::c_void {
        // SAFETY: `arg` is the `&mut dyn FnMut()` below, alive until joined.
        let f = unsafe { &mut *arg.cast::<&mut dyn FnMut()>() };
        f();
        std::ptr::null_mut()
    }
    let mut f = Some(Carried(f));
    let mut out: Option<Carried<T>> = None;
    let mut call = || {
        if let Some(Carried(f)) = f.take() {
            out = Some(Carried(f()));
        }
    };
    let mut dynf: &mut dyn FnMut() = &mut call;
    let mut thread: libc::pthread_t = 0;
    // SAFETY: a plain thread running `run` on `dynf`, joined at once, so
    // the closure outlives it.
    let started = unsafe {
        libc::pthread_create(&mut thread, std::ptr::null(), run, (&raw mut dynf).cast()) == 0
            && libc::pthread_join(thread, std::ptr::null_mut()) == 0
    };
    if !started {
        state::die("cannot start a thread for a call made while the process exits");
    }
    match out {
        Some(Carried(v)) => v,
        None => state::die("a call made while the process exits did not return"),
    }
}

/// Serve a call on descriptor `fd`: `ours` if it is a manyfs descriptor
/// (`EIO` in a forked child of the pool's owner), else `kernel`.
pub(crate) fn on_fd<T: Fail>(
    fd: c_int,
    ours: impl FnOnce(&table::Open) -> Result<T, c_int>,
    kernel: impl FnOnce() -> T,
) -> T {
    if !table::is_ours(fd) {
        return kernel();
    }
    with_live_tls(|| match table::get(fd) {
        None => kernel(),
        Some(open) => ret(state::fs().and_then(|_| ours(&open))),
    })
}

/// Serve a call on `path` (relative to `dirfd`): `ours` with the mount and
/// the path inside the pool if it leads under the run's directory, else
/// `kernel` with the path to give the kernel (normalised when its route
/// went through the directory; then absolute, so the kernel ignores
/// `dirfd`). A symlink of the pool that leads out of it (an absolute
/// target, or `..` above the pool's root) makes the call again on where
/// it leads, as the kernel follows a mount's symlinks: in the kernel, or
/// in the pool again.
///
/// # Safety
/// `path` is null or a NUL-terminated string.
pub(crate) unsafe fn on_path<T: Fail>(
    dirfd: c_int,
    path: *const libc::c_char,
    mut ours: impl FnMut(&manyfs::Fs, &std::path::Path) -> Result<T, c_int>,
    kernel: impl FnOnce(*const libc::c_char) -> T,
) -> T {
    // SAFETY: the caller's promise about `path`.
    let mut target = unsafe { paths::target_c(dirfd, path) };
    let mut outside: Option<std::ffi::CString> = None;
    // Each way out of the pool followed a symlink: the kernel's limit.
    for _ in 0..=MAX_SYMLINKS {
        match target {
            Ok(paths::Target::Kernel) => {
                return kernel(outside.as_ref().map_or(path, |o| o.as_ptr()));
            }
            Ok(paths::Target::KernelAt(abs)) => return kernel(abs.as_ptr()),
            Ok(paths::Target::Ours(inner)) => {
                // `Err(abs)`: a symlink led out of the pool, to `abs`.
                let served: Result<T, Vec<u8>> = with_live_tls(|| {
                    let _stale = left_pool();
                    match mounted().and_then(|fs| ours(fs, pool_path(&inner))) {
                        Err(libc::EXDEV) => {
                            left_pool().map_or_else(|| Ok(ret(Err(libc::EXDEV))), Err)
                        }
                        r => Ok(ret(r)),
                    }
                });
                let abs = match served {
                    Ok(done) => return done,
                    Err(abs) => abs,
                };
                target = paths::target(libc::AT_FDCWD, &abs);
                outside = std::ffi::CString::new(abs).ok();
                if outside.is_none() {
                    return ret(Err(libc::ENOENT));
                }
            }
            Err(e) => return ret(Err(e)),
        }
    }
    ret(Err(libc::ELOOP))
}

/// Symlinks followed in one resolution before `ELOOP` (Linux's limit).
pub(crate) const MAX_SYMLINKS: usize = 40;

/// The mount, which a path or descriptor of ours implies.
pub(crate) fn mounted() -> Result<&'static manyfs::Fs, c_int> {
    state::fs()?.ok_or(libc::EIO)
}

/// A pool path from its bytes.
pub(crate) fn pool_path(inner: &[u8]) -> &std::path::Path {
    use std::os::unix::ffi::OsStrExt;
    std::path::Path::new(std::ffi::OsStr::from_bytes(inner))
}

/// `n` bytes at `p` (none when `n` is 0, whatever `p` is); `EFAULT` when
/// `p` is null with bytes to move, as the kernel answers a null buffer.
///
/// # Safety
/// When `n > 0`, `p` is null or points at `n` readable bytes that stay
/// valid for `'a`.
pub(crate) unsafe fn bytes<'a>(p: *const libc::c_void, n: usize) -> Result<&'a [u8], c_int> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller's promise, checked non-null.
    Ok(unsafe { std::slice::from_raw_parts(p.cast(), n) })
}

/// `n` writable bytes at `p` (none when `n` is 0); `EFAULT` when `p` is
/// null with bytes to move.
///
/// # Safety
/// When `n > 0`, `p` is null or points at `n` writable bytes, not aliased,
/// valid for `'a`.
pub(crate) unsafe fn bytes_mut<'a>(p: *mut libc::c_void, n: usize) -> Result<&'a mut [u8], c_int> {
    if n == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller's promise, checked non-null.
    Ok(unsafe { std::slice::from_raw_parts_mut(p.cast(), n) })
}

impl<T> Fail for *mut T {
    const FAIL: Self = std::ptr::null_mut();
}
