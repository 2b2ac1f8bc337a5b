//! libc's own definitions of the symbols this library interposes, found
//! once with `dlsym(RTLD_NEXT, name)` and kept in a static each.

use libc::{
    DIR, FILE, c_char, c_int, c_long, c_uint, c_ulong, c_void, dirent64, iovec, mode_t, off_t,
    size_t, ssize_t, stat, statfs, statx as Statx,
};

use crate::dirs::{ScanCompar, ScanFilter};
use crate::fts::{Compar as FtsCompar, Fts, FtsEnt};
use crate::ftw::{FtwFn, NftwFn};
use crate::glob::{Glob, GlobErrFn};

/// `pub fn NAME() -> unsafe extern "C" fn(ARGS) -> RET`: libc's `NAME`.
macro_rules! next {
    ($( $name:ident : fn($($t:ty),*) -> $r:ty; )*) => {$(
        #[doc = concat!("libc's `", stringify!($name), "`.")]
        pub fn $name() -> unsafe extern "C" fn($($t),*) -> $r {
            use std::sync::atomic::{AtomicUsize, Ordering};
            static ADDR: AtomicUsize = AtomicUsize::new(0);
            let mut addr = ADDR.load(Ordering::Relaxed);
            if addr == 0 {
                let name = concat!(stringify!($name), "\0");
                // SAFETY: RTLD_NEXT with a NUL-terminated symbol name.
                addr = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr().cast()) } as usize;
                if addr == 0 {
                    crate::state::die(concat!("libc has no ", stringify!($name)));
                }
                ADDR.store(addr, Ordering::Relaxed);
            }
            // SAFETY: `addr` is the non-null address of libc's function of
            // this name, whose C prototype this signature spells.
            unsafe { std::mem::transmute::<usize, unsafe extern "C" fn($($t),*) -> $r>(addr) }
        }
    )*};
}

next! {
    open: fn(*const c_char, c_int, mode_t) -> c_int;
    openat: fn(c_int, *const c_char, c_int, mode_t) -> c_int;
    close: fn(c_int) -> c_int;
    close_range: fn(c_uint, c_uint, c_int) -> c_int;
    closefrom: fn(c_int) -> ();
    read: fn(c_int, *mut c_void, size_t) -> ssize_t;
    write: fn(c_int, *const c_void, size_t) -> ssize_t;
    pread64: fn(c_int, *mut c_void, size_t, off_t) -> ssize_t;
    pwrite64: fn(c_int, *const c_void, size_t, off_t) -> ssize_t;
    readv: fn(c_int, *const iovec, c_int) -> ssize_t;
    writev: fn(c_int, *const iovec, c_int) -> ssize_t;
    preadv64: fn(c_int, *const iovec, c_int, off_t) -> ssize_t;
    pwritev64: fn(c_int, *const iovec, c_int, off_t) -> ssize_t;
    preadv2: fn(c_int, *const iovec, c_int, off_t, c_int) -> ssize_t;
    pwritev2: fn(c_int, *const iovec, c_int, off_t, c_int) -> ssize_t;
    lseek64: fn(c_int, off_t, c_int) -> off_t;
    fsync: fn(c_int) -> c_int;
    fdatasync: fn(c_int) -> c_int;
    sync_file_range: fn(c_int, off_t, off_t, c_uint) -> c_int;
    ftruncate64: fn(c_int, off_t) -> c_int;
    truncate64: fn(*const c_char, off_t) -> c_int;
    fallocate64: fn(c_int, c_int, off_t, off_t) -> c_int;
    posix_fallocate64: fn(c_int, off_t, off_t) -> c_int;
    posix_fadvise64: fn(c_int, off_t, off_t, c_int) -> c_int;
    fstat: fn(c_int, *mut stat) -> c_int;
    fstatat: fn(c_int, *const c_char, *mut stat, c_int) -> c_int;
    statx: fn(c_int, *const c_char, c_int, c_uint, *mut Statx) -> c_int;
    __xstat: fn(c_int, *const c_char, *mut stat) -> c_int;
    __lxstat: fn(c_int, *const c_char, *mut stat) -> c_int;
    __fxstat: fn(c_int, c_int, *mut stat) -> c_int;
    __fxstatat: fn(c_int, c_int, *const c_char, *mut stat, c_int) -> c_int;
    statfs64: fn(*const c_char, *mut statfs) -> c_int;
    fstatfs64: fn(c_int, *mut statfs) -> c_int;
    faccessat: fn(c_int, *const c_char, c_int, c_int) -> c_int;
    unlinkat: fn(c_int, *const c_char, c_int) -> c_int;
    renameat2: fn(c_int, *const c_char, c_int, *const c_char, c_uint) -> c_int;
    mkdirat: fn(c_int, *const c_char, mode_t) -> c_int;
    mkostemps: fn(*mut c_char, c_int, c_int) -> c_int;
    mkdtemp: fn(*mut c_char) -> *mut c_char;
    linkat: fn(c_int, *const c_char, c_int, *const c_char, c_int) -> c_int;
    symlinkat: fn(*const c_char, c_int, *const c_char) -> c_int;
    readlinkat: fn(c_int, *const c_char, *mut c_char, size_t) -> ssize_t;
    fchmodat: fn(c_int, *const c_char, mode_t, c_int) -> c_int;
    fchmod: fn(c_int, mode_t) -> c_int;
    fchownat: fn(c_int, *const c_char, c_uint, c_uint, c_int) -> c_int;
    fchown: fn(c_int, c_uint, c_uint) -> c_int;
    utimensat: fn(c_int, *const c_char, *const libc::timespec, c_int) -> c_int;
    futimens: fn(c_int, *const libc::timespec) -> c_int;
    utimes: fn(*const c_char, *const libc::timeval) -> c_int;
    lutimes: fn(*const c_char, *const libc::timeval) -> c_int;
    futimes: fn(c_int, *const libc::timeval) -> c_int;
    futimesat: fn(c_int, *const c_char, *const libc::timeval) -> c_int;
    utime: fn(*const c_char, *const libc::utimbuf) -> c_int;
    mknodat: fn(c_int, *const c_char, mode_t, libc::dev_t) -> c_int;
    __xmknodat: fn(c_int, c_int, *const c_char, mode_t, *mut libc::dev_t) -> c_int;
    dup: fn(c_int) -> c_int;
    dup2: fn(c_int, c_int) -> c_int;
    dup3: fn(c_int, c_int, c_int) -> c_int;
    fcntl64: fn(c_int, c_int, c_ulong) -> c_int;
    ioctl: fn(c_int, c_ulong, c_ulong) -> c_int;
    flock: fn(c_int, c_int) -> c_int;
    lockf: fn(c_int, c_int, off_t) -> c_int;
    getcwd: fn(*mut c_char, size_t) -> *mut c_char;
    chdir: fn(*const c_char) -> c_int;
    fchdir: fn(c_int) -> c_int;
    umask: fn(mode_t) -> mode_t;
    sendfile64: fn(c_int, c_int, *mut off_t, size_t) -> ssize_t;
    splice: fn(c_int, *mut off_t, c_int, *mut off_t, size_t, c_uint) -> ssize_t;
    // glibc's `syscall` is variadic; its x86-64 definition (assembly)
    // takes the number and six arguments where a fixed call puts them.
    syscall: fn(c_long, c_long, c_long, c_long, c_long, c_long, c_long) -> c_long;
    copy_file_range: fn(c_int, *mut i64, c_int, *mut i64, size_t, c_uint) -> ssize_t;
    mmap64: fn(*mut c_void, size_t, c_int, c_int, c_int, off_t) -> *mut c_void;
    munmap: fn(*mut c_void, size_t) -> c_int;
    msync: fn(*mut c_void, size_t, c_int) -> c_int;
    opendir: fn(*const c_char) -> *mut DIR;
    fdopendir: fn(c_int) -> *mut DIR;
    readdir64: fn(*mut DIR) -> *mut dirent64;
    closedir: fn(*mut DIR) -> c_int;
    dirfd: fn(*mut DIR) -> c_int;
    rewinddir: fn(*mut DIR) -> ();
    telldir: fn(*mut DIR) -> c_long;
    seekdir: fn(*mut DIR, c_long) -> ();
    getdents64: fn(c_int, *mut c_void, size_t) -> ssize_t;
    glob: fn(*const c_char, c_int, GlobErrFn, *mut Glob) -> c_int;
    __read_chk: fn(c_int, *mut c_void, size_t, size_t) -> ssize_t;
    __pread64_chk: fn(c_int, *mut c_void, size_t, off_t, size_t) -> ssize_t;
    __getcwd_chk: fn(*mut c_char, size_t, size_t) -> *mut c_char;
    __readlinkat_chk: fn(c_int, *const c_char, *mut c_char, size_t, size_t) -> ssize_t;
    statvfs64: fn(*const c_char, *mut libc::statvfs) -> c_int;
    fstatvfs64: fn(c_int, *mut libc::statvfs) -> c_int;
    fopen64: fn(*const c_char, *const c_char) -> *mut FILE;
    fdopen: fn(c_int, *const c_char) -> *mut FILE;
    fileno: fn(*mut FILE) -> c_int;
    fileno_unlocked: fn(*mut FILE) -> c_int;
    freopen64: fn(*const c_char, *const c_char, *mut FILE) -> *mut FILE;
    realpath: fn(*const c_char, *mut c_char) -> *mut c_char;
    nftw64: fn(*const c_char, NftwFn, c_int, c_int) -> c_int;
    ftw64: fn(*const c_char, FtwFn, c_int) -> c_int;
    scandirat64: fn(c_int, *const c_char, *mut *mut *mut dirent64, ScanFilter, ScanCompar) -> c_int;
    __realpath_chk: fn(*const c_char, *mut c_char, size_t) -> *mut c_char;
    fts_open: fn(*const *mut c_char, c_int, FtsCompar) -> *mut Fts;
    fts_read: fn(*mut Fts) -> *mut FtsEnt;
    fts_children: fn(*mut Fts, c_int) -> *mut FtsEnt;
    fts_set: fn(*mut Fts, *mut FtsEnt, c_int) -> c_int;
    fts_close: fn(*mut Fts) -> c_int;
    execve: fn(*const c_char, *const *const c_char, *const *const c_char) -> c_int;
    execv: fn(*const c_char, *const *const c_char) -> c_int;
    execvp: fn(*const c_char, *const *const c_char) -> c_int;
    execvpe: fn(*const c_char, *const *const c_char, *const *const c_char) -> c_int;
    fexecve: fn(c_int, *const *const c_char, *const *const c_char) -> c_int;
    system: fn(*const c_char) -> c_int;
    _exit: fn(c_int) -> ();
    popen: fn(*const c_char, *const c_char) -> *mut FILE;
    execveat: fn(c_int, *const c_char, *const *const c_char, *const *const c_char, c_int) -> c_int;
    posix_spawn: fn(*mut libc::pid_t, *const c_char, *const c_void, *const c_void, *const *mut c_char, *const *mut c_char) -> c_int;
    posix_spawnp: fn(*mut libc::pid_t, *const c_char, *const c_void, *const c_void, *const *mut c_char, *const *mut c_char) -> c_int;
}

/// libc's extended-attribute calls.
pub mod xattr {
    use libc::{c_char, c_int, c_void, size_t, ssize_t};

    next! {
        getxattr: fn(*const c_char, *const c_char, *mut c_void, size_t) -> ssize_t;
        lgetxattr: fn(*const c_char, *const c_char, *mut c_void, size_t) -> ssize_t;
        fgetxattr: fn(c_int, *const c_char, *mut c_void, size_t) -> ssize_t;
        listxattr: fn(*const c_char, *mut c_char, size_t) -> ssize_t;
        llistxattr: fn(*const c_char, *mut c_char, size_t) -> ssize_t;
        flistxattr: fn(c_int, *mut c_char, size_t) -> ssize_t;
        setxattr: fn(*const c_char, *const c_char, *const c_void, size_t, c_int) -> c_int;
        lsetxattr: fn(*const c_char, *const c_char, *const c_void, size_t, c_int) -> c_int;
        fsetxattr: fn(c_int, *const c_char, *const c_void, size_t, c_int) -> c_int;
        removexattr: fn(*const c_char, *const c_char) -> c_int;
        lremovexattr: fn(*const c_char, *const c_char) -> c_int;
        fremovexattr: fn(c_int, *const c_char) -> c_int;
    }
}
