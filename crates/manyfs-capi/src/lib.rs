//! libmanyfs: the C ABI of manyfs.
//!
//! This crate builds `libmanyfs.so` and `libmanyfs.a`, which expose the
//! [manyfs](manyfs_lib) path API to C (and to anything that calls C) with
//! POSIX-shaped functions: `manyfs_mount`, `manyfs_open`, `manyfs_pwrite`,
//! `manyfs_fsync`, ... Their declarations are in `include/manyfs.h`,
//! generated from this crate by cbindgen and checked in (the test
//! `header_is_current` fails when the two differ; see `docs/c-api.md`).
//! Rust programs use the `manyfs` library directly.
//!
//! # Results and errors
//!
//! Every function returns `0` (or a count or an offset, never negative) on
//! success and `-errno` on failure: `-ENOENT`, `-ENOSPC`, ... as a kernel
//! file system would report them ([`manyfs_lib::Error::errno`]). The global
//! `errno` is not set. The failed call leaves a one-line message for its
//! thread, which [`manyfs_last_error`] copies out. Bad arguments fail
//! without touching anything: a NULL handle is `-EBADF`, a NULL path,
//! buffer or out-pointer `-EFAULT`, an unknown flag or a negative offset
//! `-EINVAL`. A panic inside the library never unwinds into C: the call
//! returns `-EIO` and the message says it was an internal error.
//!
//! # Ownership
//!
//! - [`manyfs_mount`] gives a `manyfs_fs *` that [`manyfs_unmount`] frees
//!   (it syncs everything first); [`manyfs_open`] gives a `manyfs_file *`
//!   that [`manyfs_close`] frees. Each is freed exactly once, also when
//!   the call that frees it reports an error; using a handle after freeing
//!   it is undefined behaviour, as with a `FILE *`.
//! - Close the files of a mount before unmounting it: a file left open
//!   keeps the mount (and the pool's lock) alive until it is closed.
//! - The library keeps no pointer the caller passed: paths, buffers and
//!   out-pointers are used during the call only. The name given to a
//!   [`manyfs_readdir`] callback lives until the callback returns.
//!
//! # Threads
//!
//! Every function may be called from any thread. A `manyfs_fs` is shared
//! by any number of threads; so is a `manyfs_file`: [`manyfs_pread`] and
//! [`manyfs_pwrite`] of one handle run in parallel (ranges that do not
//! overlap do not wait for each other). [`manyfs_read`], [`manyfs_write`]
//! and [`manyfs_lseek`] share the handle's file offset, as threads sharing
//! a POSIX file descriptor do; each of those calls moves it as one step.
//!
//! # Options
//!
//! [`manyfs_mkfs`] and [`manyfs_mount`] take a `struct manyfs_options *`,
//! or NULL for the defaults. Its first field is `size`, which the caller
//! sets to `sizeof(struct manyfs_options)` as its header declares it; zero
//! in any field means that option's default. A later version only appends
//! fields: this library reads the first `size` bytes the caller has, takes
//! the default for every field beyond them, and refuses with `-E2BIG` a
//! larger struct that sets fields it does not know (the scheme of Linux's
//! `openat2`). Programs built against an older header keep working.

#![deny(missing_docs)]

mod glue;
#[cfg(test)]
mod tests;

use glue::{CResult, Failure, call, call_int};
use manyfs_lib::{Error, File, Fs, OpenOptions};
use std::ffi::{CString, c_char, c_int, c_void};
use std::sync::Mutex;

/// Options of `manyfs_mkfs()` and `manyfs_mount()` (`struct
/// manyfs_options`). Zero in a field means its default; set `size` to
/// `sizeof(struct manyfs_options)`, e.g. `struct manyfs_options o = {
/// .size = sizeof o, .durability = MANYFS_DURABILITY_DRAM };`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ManyfsOptions {
    /// `sizeof(struct manyfs_options)` as the caller's header declares it.
    pub size: u32,
    /// How writes become durable: one of `MANYFS_DURABILITY_*`.
    pub durability: u32,
    /// Mount read-only (non-zero).
    pub read_only: u32,
    /// mkfs: replace a non-empty file at the pool's path (non-zero);
    /// otherwise mkfs fails with `-EEXIST`.
    pub replace_existing: u32,
    /// `file` durability: milliseconds between background commits (0: the
    /// default, 5 s).
    pub commit_interval_ms: u32,
    /// mkfs: write zeros over the whole pool instead of reserving its
    /// space (non-zero).
    pub zero_fill: u32,
    /// mkfs: one inode slot per this many bytes of pool (0: the default,
    /// 16 KiB).
    pub bytes_per_inode: u64,
}

/// The default durability: `file` on an ordinary disk.
pub const MANYFS_DURABILITY_DEFAULT: u32 = 0;
/// The pool is DAX-mapped persistent memory: every call is durable when
/// it returns.
pub const MANYFS_DURABILITY_PM: u32 = 1;
/// The pool is an ordinary file: `manyfs_fsync` makes a file durable.
pub const MANYFS_DURABILITY_FILE: u32 = 2;
/// Nothing is durable (a pool on tmpfs, for tests and benchmarks).
pub const MANYFS_DURABILITY_DRAM: u32 = 3;

/// Attributes of a file (`struct manyfs_stat`), filled by
/// `manyfs_stat()` and `manyfs_fstat()`. Times are seconds and
/// nanoseconds (`0..999999999`) since the Unix epoch.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ManyfsStat {
    /// Inode number.
    pub ino: u64,
    /// File type (`S_IFMT` bits: `S_IFREG`, `S_IFDIR`, ...) and
    /// permission bits, as `st_mode`.
    pub mode: u32,
    /// Hard links.
    pub nlink: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Size in bytes.
    pub size: u64,
    /// Space used, in 512-byte units.
    pub blocks: u64,
    /// Device number of a character or block device (0 otherwise).
    pub rdev: u64,
    /// Last access, seconds.
    pub atime_sec: i64,
    /// Last access, nanoseconds.
    pub atime_nsec: i64,
    /// Last modification, seconds.
    pub mtime_sec: i64,
    /// Last modification, nanoseconds.
    pub mtime_nsec: i64,
    /// Last status change, seconds.
    pub ctime_sec: i64,
    /// Last status change, nanoseconds.
    pub ctime_nsec: i64,
}

/// Entry type of a FIFO (`DT_FIFO`).
pub const MANYFS_DT_FIFO: u8 = 1;
/// Entry type of a character device (`DT_CHR`).
pub const MANYFS_DT_CHR: u8 = 2;
/// Entry type of a directory (`DT_DIR`).
pub const MANYFS_DT_DIR: u8 = 4;
/// Entry type of a block device (`DT_BLK`).
pub const MANYFS_DT_BLK: u8 = 6;
/// Entry type of a regular file (`DT_REG`).
pub const MANYFS_DT_REG: u8 = 8;
/// Entry type of a symbolic link (`DT_LNK`).
pub const MANYFS_DT_LNK: u8 = 10;
/// Entry type of a socket (`DT_SOCK`).
pub const MANYFS_DT_SOCK: u8 = 12;

/// A mounted pool (`struct manyfs_fs`, opaque).
pub struct ManyfsFs {
    fs: Fs,
}

/// An open file (`struct manyfs_file`, opaque).
pub struct ManyfsFile {
    file: File,
    /// Opened with `O_APPEND`: `manyfs_write` writes at the end of file.
    append: bool,
    /// The offset of `manyfs_read`, `manyfs_write` and `manyfs_lseek`. A
    /// lock, not an atomic: a read or write and the move of the offset
    /// past it are one step, as Linux's `f_pos` lock makes them. The
    /// positioned calls do not take it.
    offset: Mutex<u64>,
}

impl ManyfsFile {
    fn offset(&self) -> std::sync::MutexGuard<'_, u64> {
        // The lock guards a plain number: a panic while it was held left
        // nothing half-updated.
        self.offset.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The callback of `manyfs_readdir()`: called once per entry with the
/// caller's `ctx`, the entry's NUL-terminated name (valid until the
/// callback returns), inode number and type (`MANYFS_DT_*`). Returning
/// non-zero stops the listing. It must not unwind (a C++ exception).
pub type ManyfsReaddirCb = Option<
    unsafe extern "C" fn(ctx: *mut c_void, name: *const c_char, ino: u64, kind: u8) -> c_int,
>;

/// Copy the message of this thread's last failed call into `buf` (at most
/// `len` bytes, truncated and NUL-terminated; nothing is written when `buf`
/// is NULL or `len` is 0). Returns the message's full length without the
/// NUL (0: no call failed on this thread yet), as `snprintf` does.
///
/// # Safety
/// A non-NULL `buf` must point to `len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn manyfs_last_error(buf: *mut c_char, len: usize) -> i64 {
    let out: &mut [u8] = if buf.is_null() || len == 0 || isize::try_from(len).is_err() {
        &mut []
    } else {
        // SAFETY: `buf` is not NULL, `len` fits `isize`, and the caller
        // guarantees `len` writable bytes.
        unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), len) }
    };
    glue::copy_last_error(out) as i64
}

/// Fill `opts` with the defaults of this version: every field zero, `size`
/// set. Returns 0, or `-EFAULT` for NULL.
///
/// # Safety
/// A non-NULL `opts` must point to a writable `struct manyfs_options`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn manyfs_options_init(opts: *mut ManyfsOptions) -> c_int {
    let defaults = ManyfsOptions {
        size: size_of::<ManyfsOptions>() as u32,
        ..ManyfsOptions::default()
    };
    // SAFETY: the caller guarantees a non-NULL `opts` is writable; `put`
    // checks NULL.
    call_int("manyfs_options_init", || unsafe {
        glue::put(opts, defaults)
    })
}

/// Create a pool of `size_bytes` bytes in the file `path` (a new file, or
/// an empty one; see `replace_existing`) and format it. The pool is not
/// left mounted. `opts` may be NULL.
///
/// # Safety
/// `path` must be NULL or NUL-terminated; `opts` NULL or a `struct
/// manyfs_options` of at least its `size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn manyfs_mkfs(
    path: *const c_char,
    size_bytes: u64,
    opts: *const ManyfsOptions,
) -> c_int {
    call_int("manyfs_mkfs", || {
        // SAFETY: the caller's guarantees, checked for NULL inside.
        let (pool, o) = unsafe { (glue::path(path, "path")?, glue::options(opts)?) };
        let fs = Fs::mkfs(pool, &o.mkfs_options(size_bytes), &o.mount_options()?)?;
        Ok(fs.unmount()?)
    })
}

/// Mount the pool in the file `path` and store its handle in `*out_fs`
/// (freed by `manyfs_unmount()`). `opts` may be NULL. A pool mounted by
/// another process is `-EBUSY`.
///
/// # Safety
/// `path` must be NULL or NUL-terminated; `opts` NULL or a `struct
/// manyfs_options` of at least its `size` bytes; `out_fs` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn manyfs_mount(
    path: *const c_char,
    opts: *const ManyfsOptions,
    out_fs: *mut *mut ManyfsFs,
) -> c_int {
    call_int("manyfs_mount", || {
        glue::check_out(out_fs)?;
        // SAFETY: the caller's guarantees, checked for NULL inside.
        let (pool, o) = unsafe { (glue::path(path, "path")?, glue::options(opts)?) };
        let fs = Fs::mount(pool, &o.mount_options()?)?;
        let raw = Box::into_raw(Box::new(ManyfsFs { fs }));
        // SAFETY: `out_fs` is not NULL (checked first) and writable (the
        // caller's guarantee).
        unsafe { glue::put(out_fs, raw) }
    })
}

/// Make everything durable and free the mount handle. The handle is freed
/// even when the final sync fails (the error is returned). NULL: `-EBADF`.
///
/// # Safety
/// `fs` must be NULL or a handle from `manyfs_mount()` not yet unmounted;
/// it must not be used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn manyfs_unmount(fs: *mut ManyfsFs) -> c_int {
    call_int("manyfs_unmount", || {
        if fs.is_null() {
            return Err(Failure::new(libc::EBADF, "fs is NULL"));
        }
        // SAFETY: `fs` came from `Box::into_raw` in `manyfs_mount` and is
        // freed only here, once (the caller's guarantee).
        let owned = unsafe { Box::from_raw(fs) };
        Ok(owned.fs.unmount()?)
    })
}

/// The open flags this library knows: `O_RDONLY`, `O_WRONLY`, `O_RDWR`,
/// `O_CREAT`, `O_EXCL`, `O_TRUNC`, `O_APPEND`.
const KNOWN_FLAGS: c_int =
    libc::O_ACCMODE | libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC | libc::O_APPEND;

fn open_options(flags: c_int, mode: u32) -> CResult<OpenOptions> {
    if flags & !KNOWN_FLAGS != 0 {
        return Err(Failure::invalid(format!(
            "open flags {:#o} (known: O_RDONLY, O_WRONLY, O_RDWR, O_CREAT, O_EXCL, O_TRUNC, O_APPEND)",
            flags & !KNOWN_FLAGS
        )));
    }
    let (read, write) = match flags & libc::O_ACCMODE {
        libc::O_RDONLY => (true, false),
        libc::O_WRONLY => (false, true),
        libc::O_RDWR => (true, true),
        _ => return Err(Failure::invalid("access mode O_ACCMODE")),
    };
    let creat = flags & libc::O_CREAT != 0;
    let mut o = OpenOptions::new();
    o.read(read)
        .write(write)
        .append(flags & libc::O_APPEND != 0)
        .create(creat)
        // O_EXCL without O_CREAT is ignored, as Linux does for files.
        .create_new(creat && flags & libc::O_EXCL != 0)
        .truncate(flags & libc::O_TRUNC != 0)
        .mode(mode & 0o7777);
    Ok(o)
}

/// Open (or create) the file at `path` and store a handle in `*out_file`
/// (freed by `manyfs_close()`). `flags`: `O_RDONLY`, `O_WRONLY` or
/// `O_RDWR`, plus any of `O_CREAT`, `O_EXCL`, `O_TRUNC`, `O_APPEND` from
/// `<fcntl.h>`; any other flag is `-EINVAL`, as are `O_CREAT` and
/// `O_TRUNC` without write access. `mode`: permission bits of a created
/// file. The handle's offset starts at 0.
///
/// # Safety
/// `fs` must be NULL or a live mount handle; `path` NULL or
/// NUL-terminated; `out_file` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn manyfs_open(
    fs: *const ManyfsFs,
    path: *const c_char,
    flags: c_int,
    mode: u32,
    out_file: *mut *mut ManyfsFile,
) -> c_int {
    call_int("manyfs_open", || {
        glue::check_out(out_file)?;
        // SAFETY: the caller's guarantees, checked for NULL inside.
        let (fs, p) = unsafe { (glue::handle(fs, "fs")?, glue::path(path, "path")?) };
        let opts = open_options(flags, mode)?;
        let file = fs.fs.open(p, &opts)?;
        let raw = Box::into_raw(Box::new(ManyfsFile {
            file,
            append: flags & libc::O_APPEND != 0,
            offset: Mutex::new(0),
        }));
        // SAFETY: `out_file` is not NULL (checked first) and writable (the
        // caller's guarantee).
        unsafe { glue::put(out_file, raw) }
    })
}

/// Free a file handle. Closing does not sync (as `close(2)`); returns 0,
/// or `-EBADF` for NULL.
///
/// # Safety
/// `file` must be NULL or a handle from `manyfs_open()` not yet closed,
/// which no other thread is using; it must not be used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn manyfs_close(file: *mut ManyfsFile) -> c_int {
    call_int("manyfs_close", || {
        if file.is_null() {
            return Err(Failure::new(libc::EBADF, "file is NULL"));
        }
        // SAFETY: `file` came from `Box::into_raw` in `manyfs_open` and is
        // freed only here, once, with no other user (the caller's
        // guarantee).
        drop(unsafe { Box::from_raw(file) });
        Ok(())
    })
}

/// Read up to `count` bytes at `offset` into `buf`: the number read, 0 at
/// end of file. Does not use or move the handle's offset.
///
/// # Safety
/// `file` must be NULL or a live file handle; `buf` NULL or `count`
/// writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn manyfs_pread(
    file: *const ManyfsFile,
    buf: *mut c_void,
    count: usize,
    offset: i64,
) -> i64 {
    call("manyfs_pread", || {
        // SAFETY: the caller's guarantees, checked for NULL inside.
        let (f, out) = unsafe { (glue::handle(file, "file")?, glue::bytes_mut(buf, count)?) };
        Ok(glue::count(f.file.read_at(out, glue::offset(offset)?)?))
    })
}

/// Write `count` bytes from `buf` at `offset` (at end of file if opened
/// with `O_APPEND`, as Linux's `pwrite` does): the number written. Does not
/// use or move the handle's offset.
///
/// # Safety
/// `file` must be NULL or a live file handle; `buf` NULL or `count`
/// readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn manyfs_pwrite(
    file: *const ManyfsFile,
    buf: *const c_void,
    count: usize,
    offset: i64,
) -> i64 {
    call("manyfs_pwrite", || {
        // SAFETY: the caller's guarantees, checked for NULL inside.
        let (f, data) = unsafe { (glue::handle(file, "file")?, glue::bytes(buf, count)?) };
        Ok(glue::count(f.file.write_at(data, glue::offset(offset)?)?))
    })
}

/// Read up to `count` bytes at the handle's offset and move it past them:
/// the number read, 0 at end of file.
///
/// # Safety
/// As `manyfs_pread()`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn manyfs_read(
    file: *const ManyfsFile,
    buf: *mut c_void,
    count: usize,
) -> i64 {
    call("manyfs_read", || {
        // SAFETY: the caller's guarantees, checked for NULL inside.
        let (f, out) = unsafe { (glue::handle(file, "file")?, glue::bytes_mut(buf, count)?) };
        let mut pos = f.offset();
        let n = f.file.read_at(out, *pos)?;
        *pos += n as u64;
        Ok(glue::count(n))
    })
}

/// Write `count` bytes at the handle's offset (at end of file if opened
/// with `O_APPEND`) and move the offset past them: the number written.
///
/// # Safety
/// As `manyfs_pwrite()`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn manyfs_write(
    file: *const ManyfsFile,
    buf: *const c_void,
    count: usize,
) -> i64 {
    call("manyfs_write", || {
        // SAFETY: the caller's guarantees, checked for NULL inside.
        let (f, data) = unsafe { (glue::handle(file, "file")?, glue::bytes(buf, count)?) };
        let mut pos = f.offset();
        let (at, n) = if f.append {
            (f.file.append(data)?, data.len())
        } else {
            (*pos, f.file.write_at(data, *pos)?)
        };
        *pos = at + n as u64;
        Ok(glue::count(n))
    })
}

/// Move the handle's offset: to `offset` (`SEEK_SET`), by `offset`
/// (`SEEK_CUR`) or to the end of file plus `offset` (`SEEK_END`). Returns
/// the new offset; `-EINVAL` if it would be negative or `whence` is
/// another value.
///
/// # Safety
/// `file` must be NULL or a live file handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn manyfs_lseek(file: *const ManyfsFile, offset: i64, whence: c_int) -> i64 {
    call("manyfs_lseek", || {
        // SAFETY: the caller's guarantee, checked for NULL inside.
        let f = unsafe { glue::handle(file, "file")? };
        let mut pos = f.offset();
        let base = match whence {
            libc::SEEK_SET => 0,
            libc::SEEK_CUR => *pos,
            libc::SEEK_END => f.file.metadata()?.size,
            other => return Err(Failure::invalid(format!("whence {other}"))),
        };
        let new = i64::try_from(base)
            .ok()
            .and_then(|b| b.checked_add(offset))
            .filter(|&n| n >= 0)
            .ok_or_else(|| Failure::invalid(format!("seek to {base} + {offset}")))?;
        *pos = new as u64;
        Ok(new)
    })
}

/// Make the file's data, attributes and name durable (`fsync`).
///
/// # Safety
/// `file` must be NULL or a live file handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn manyfs_fsync(file: *const ManyfsFile) -> c_int {
    // SAFETY: the caller's guarantee, checked for NULL inside.
    call_int("manyfs_fsync", || {
        Ok(unsafe { glue::handle(file, "file")? }.file.sync_all()?)
    })
}

/// Make the file's data durable, and its attributes as far as reading the
/// data needs them (`fdatasync`).
///
/// # Safety
/// `file` must be NULL or a live file handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn manyfs_fdatasync(file: *const ManyfsFile) -> c_int {
    // SAFETY: the caller's guarantee, checked for NULL inside.
    call_int("manyfs_fdatasync", || {
        Ok(unsafe { glue::handle(file, "file")? }.file.sync_data()?)
    })
}

/// Cut or extend (with zeros) the file to `length` bytes; the handle's
/// offset stays where it is.
///
/// # Safety
/// `file` must be NULL or a live file handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn manyfs_ftruncate(file: *const ManyfsFile, length: i64) -> c_int {
    call_int("manyfs_ftruncate", || {
        // SAFETY: the caller's guarantee, checked for NULL inside.
        let f = unsafe { glue::handle(file, "file")? };
        Ok(f.file.set_len(glue::offset(length)?)?)
    })
}

/// Fill `*out` with the attributes of the open file.
///
/// # Safety
/// `file` must be NULL or a live file handle; `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn manyfs_fstat(file: *const ManyfsFile, out: *mut ManyfsStat) -> c_int {
    call_int("manyfs_fstat", || {
        // SAFETY: the caller's guarantee, checked for NULL inside.
        let f = unsafe { glue::handle(file, "file")? };
        glue::check_out(out)?;
        let st = ManyfsStat::from(&f.file.metadata()?);
        // SAFETY: `out` is writable (the caller's guarantee; NULL checked).
        unsafe { glue::put(out, st) }
    })
}

/// Fill `*out` with the attributes of what `path` names (a final symlink
/// is followed, as `stat(2)` does).
///
/// # Safety
/// `fs` must be NULL or a live mount handle; `path` NULL or
/// NUL-terminated; `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn manyfs_stat(
    fs: *const ManyfsFs,
    path: *const c_char,
    out: *mut ManyfsStat,
) -> c_int {
    call_int("manyfs_stat", || {
        // SAFETY: the caller's guarantees, checked for NULL inside.
        let (fs, p) = unsafe { (glue::handle(fs, "fs")?, glue::path(path, "path")?) };
        glue::check_out(out)?;
        let st = ManyfsStat::from(&fs.fs.metadata(p)?);
        // SAFETY: `out` is writable (the caller's guarantee; NULL checked).
        unsafe { glue::put(out, st) }
    })
}

/// Call `callback(ctx, name, ino, type)` for each entry of the directory
/// `path`, in name order, without `.` and `..`. Returns the number of
/// entries passed to the callback; a callback that returns non-zero is
/// not called again (the entry it was given counts).
///
/// # Safety
/// `fs` must be NULL or a live mount handle; `path` NULL or
/// NUL-terminated; `callback` NULL or a function that does not unwind.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn manyfs_readdir(
    fs: *const ManyfsFs,
    path: *const c_char,
    callback: ManyfsReaddirCb,
    ctx: *mut c_void,
) -> i64 {
    call("manyfs_readdir", || {
        // SAFETY: the caller's guarantees, checked for NULL inside.
        let (fs, p) = unsafe { (glue::handle(fs, "fs")?, glue::path(path, "path")?) };
        let cb = callback.ok_or_else(|| Failure::new(libc::EFAULT, "callback is NULL"))?;
        let mut calls = 0;
        for e in fs.fs.read_dir(p)? {
            use std::os::unix::ffi::OsStrExt;
            // Names hold no NUL byte: the directory code refuses them.
            let name = CString::new(e.name.as_bytes()).map_err(|_| {
                Failure::from(Error::corrupt("directory entry", "name with a NUL byte"))
            })?;
            calls += 1;
            // SAFETY: `cb` is a valid function (the caller's guarantee);
            // `name` outlives the call.
            if unsafe { cb(ctx, name.as_ptr(), e.ino, glue::dirent_type(e.kind)) } != 0 {
                break;
            }
        }
        Ok(calls)
    })
}

/// Run `op` on the mount `fs` and the path `path`, for the functions that
/// take nothing else.
///
/// # Safety
/// As the callers': `fs` NULL or live, `path` NULL or NUL-terminated.
unsafe fn path_op(
    name: &str,
    fs: *const ManyfsFs,
    path: *const c_char,
    op: impl FnOnce(&Fs, &std::path::Path) -> CResult<()>,
) -> c_int {
    call_int(name, || {
        // SAFETY: the caller's guarantees, checked for NULL inside.
        let (fs, p) = unsafe { (glue::handle(fs, "fs")?, glue::path(path, "path")?) };
        op(&fs.fs, p)
    })
}

/// Create the directory `path` with permission bits `mode` (applied right
/// after it is made, with mode 0755).
///
/// # Safety
/// `fs` must be NULL or a live mount handle; `path` NULL or
/// NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn manyfs_mkdir(
    fs: *const ManyfsFs,
    path: *const c_char,
    mode: u32,
) -> c_int {
    // SAFETY: the caller's guarantees, passed on.
    unsafe {
        path_op("manyfs_mkdir", fs, path, |fs, p| {
            fs.create_dir(p)?;
            match mode & 0o7777 {
                0o755 => Ok(()),
                m => Ok(fs.set_permissions(p, m)?),
            }
        })
    }
}

/// Remove the empty directory `path`.
///
/// # Safety
/// `fs` must be NULL or a live mount handle; `path` NULL or
/// NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn manyfs_rmdir(fs: *const ManyfsFs, path: *const c_char) -> c_int {
    // SAFETY: the caller's guarantees, passed on.
    unsafe { path_op("manyfs_rmdir", fs, path, |fs, p| Ok(fs.remove_dir(p)?)) }
}

/// Remove the name `path` (a file, symlink or special node; an open file
/// stays readable through its handles until they are closed).
///
/// # Safety
/// `fs` must be NULL or a live mount handle; `path` NULL or
/// NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn manyfs_unlink(fs: *const ManyfsFs, path: *const c_char) -> c_int {
    // SAFETY: the caller's guarantees, passed on.
    unsafe { path_op("manyfs_unlink", fs, path, |fs, p| Ok(fs.remove_file(p)?)) }
}

/// Rename `from` to `to`, replacing a compatible `to` atomically, as
/// `rename(2)` does.
///
/// # Safety
/// `fs` must be NULL or a live mount handle; `from` and `to` NULL or
/// NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn manyfs_rename(
    fs: *const ManyfsFs,
    from: *const c_char,
    to: *const c_char,
) -> c_int {
    let op = |fs: &Fs, p: &std::path::Path| {
        // SAFETY: the caller guarantees a non-NULL `to` is NUL-terminated;
        // NULL is checked inside.
        let to = unsafe { glue::path(to, "to")? };
        Ok(fs.rename(p, to)?)
    };
    // SAFETY: the caller's guarantees, passed on.
    unsafe { path_op("manyfs_rename", fs, from, op) }
}
