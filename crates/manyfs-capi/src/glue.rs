//! The plumbing every C entry point shares: the thread's last error, the
//! panic guard, and checked conversions of C pointers into Rust values.

use crate::{ManyfsOptions, ManyfsStat};
use manyfs_lib::{Durability, Error, FileKind, Metadata, MkfsOptions, MountOptions};
use std::cell::RefCell;
use std::ffi::{CStr, OsStr, c_char, c_void};
use std::os::unix::ffi::OsStrExt;
use std::panic::{self, AssertUnwindSafe};
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

thread_local! {
    /// The one-line message of this thread's last failed call.
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

/// A failed call: the errno it returns (negated) and the message
/// `manyfs_last_error` gives.
#[derive(Debug)]
pub(crate) struct Failure {
    errno: i32,
    message: String,
}

impl Failure {
    pub(crate) fn new(errno: i32, message: impl Into<String>) -> Failure {
        Failure {
            errno,
            message: message.into(),
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Failure {
        Failure::new(libc::EINVAL, message)
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure::new(e.errno(), e.to_string())
    }
}

pub(crate) type CResult<T> = std::result::Result<T, Failure>;

/// Run the body of the C function `name`: its value on success, `-errno`
/// on failure (with the message kept for `manyfs_last_error`), `-EIO` if
/// it panicked, since a panic must not unwind into C.
pub(crate) fn call(name: &str, body: impl FnOnce() -> CResult<i64>) -> i64 {
    let failure = match panic::catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(v)) => return v,
        Ok(Err(f)) => f,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown cause".into());
            Failure::new(libc::EIO, format!("internal error (panic): {what}"))
        }
    };
    set_last_error(format!("{name}: {}", failure.message));
    -i64::from(failure.errno)
}

/// [`call`] for the functions whose C result is an `int` (0 or `-errno`).
pub(crate) fn call_int(name: &str, body: impl FnOnce() -> CResult<()>) -> i32 {
    // 0 or a negated errno: always within `int`.
    call(name, || body().map(|()| 0)) as i32
}

fn set_last_error(message: String) {
    LAST_ERROR.with(|e| *e.borrow_mut() = message);
}

/// Copy this thread's last error message into `out` (truncated, always
/// NUL-terminated when `out` is not empty); the message's full length.
pub(crate) fn copy_last_error(out: &mut [u8]) -> usize {
    LAST_ERROR.with(|e| {
        let msg = e.borrow();
        if let Some(room) = out.len().checked_sub(1) {
            let n = msg.len().min(room);
            out[..n].copy_from_slice(&msg.as_bytes()[..n]);
            out[n] = 0;
        }
        msg.len()
    })
}

/// The object a handle pointer names; `EBADF` for NULL.
///
/// # Safety
/// A non-NULL `p` must point to a live `T` (one this library handed out and
/// that was not freed) for as long as the reference is used.
pub(crate) unsafe fn handle<'a, T>(p: *const T, what: &str) -> CResult<&'a T> {
    // SAFETY: the caller guarantees a non-NULL `p` points to a live `T`;
    // `as_ref` maps NULL to `None`.
    unsafe { p.as_ref() }.ok_or_else(|| Failure::new(libc::EBADF, format!("{what} is NULL")))
}

/// A C path: the bytes before its NUL, as a path (names are byte strings,
/// as in POSIX: any bytes but `/` and NUL, UTF-8 or not). `EFAULT` for
/// NULL.
///
/// # Safety
/// A non-NULL `p` must point to a NUL-terminated string that stays
/// unchanged while the path is used.
pub(crate) unsafe fn path<'a>(p: *const c_char, what: &str) -> CResult<&'a Path> {
    if p.is_null() {
        return Err(Failure::new(libc::EFAULT, format!("{what} is NULL")));
    }
    // SAFETY: `p` is not NULL, and the caller guarantees it is
    // NUL-terminated and unchanged meanwhile.
    let bytes = unsafe { CStr::from_ptr(p) }.to_bytes();
    Ok(Path::new(OsStr::from_bytes(bytes)))
}

/// The `len` bytes at `p` to read from; `EFAULT` for NULL with `len > 0`.
///
/// # Safety
/// A non-NULL `p` must point to `len` readable bytes that no one writes
/// while the slice is used.
pub(crate) unsafe fn bytes<'a>(p: *const c_void, len: usize) -> CResult<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    check_buffer(p, len)?;
    // SAFETY: `p` is not NULL and `len` fits `isize` (checked above); the
    // caller guarantees `len` readable bytes that no one writes meanwhile.
    Ok(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) })
}

/// The `len` bytes at `p` to write into; `EFAULT` for NULL with `len > 0`.
///
/// # Safety
/// A non-NULL `p` must point to `len` writable bytes that no one else
/// reads or writes while the slice is used.
pub(crate) unsafe fn bytes_mut<'a>(p: *mut c_void, len: usize) -> CResult<&'a mut [u8]> {
    if len == 0 {
        return Ok(&mut []);
    }
    check_buffer(p, len)?;
    // SAFETY: `p` is not NULL and `len` fits `isize` (checked above); the
    // caller guarantees `len` writable bytes no one else touches meanwhile.
    Ok(unsafe { std::slice::from_raw_parts_mut(p.cast::<u8>(), len) })
}

fn check_buffer(p: *const c_void, len: usize) -> CResult<()> {
    if p.is_null() {
        return Err(Failure::new(libc::EFAULT, "buffer is NULL"));
    }
    if isize::try_from(len).is_err() {
        return Err(Failure::invalid(format!("count {len} exceeds SSIZE_MAX")));
    }
    Ok(())
}

/// Store `value` through the out-pointer `out`; `EFAULT` for NULL.
///
/// # Safety
/// A non-NULL `out` must be valid for a write of a `T`, suitably aligned.
pub(crate) unsafe fn put<T>(out: *mut T, value: T) -> CResult<()> {
    check_out(out)?;
    // SAFETY: `out` is not NULL; the caller guarantees it is aligned and
    // valid for writes. `write` does not drop the old (uninitialized) value.
    unsafe { out.write(value) };
    Ok(())
}

/// `EFAULT` for a NULL out-pointer: checked before the work whose result
/// it is to receive is done (a mount, an open), so nothing leaks.
pub(crate) fn check_out<T>(out: *mut T) -> CResult<()> {
    if out.is_null() {
        return Err(Failure::new(libc::EFAULT, "output pointer is NULL"));
    }
    Ok(())
}

/// A file offset or length from C: `EINVAL` when negative.
pub(crate) fn offset(v: i64) -> CResult<u64> {
    u64::try_from(v).map_err(|_| Failure::invalid(format!("negative offset or length {v}")))
}

/// A byte count as the `int64_t` result of a read or write.
pub(crate) fn count(n: usize) -> i64 {
    // Counts are at most the caller's buffer, which fits `isize`.
    n as i64
}

/// The caller's options, read as far as its `size` says: fields it does
/// not know keep their zero (default) value, and bytes beyond the fields
/// this library knows must be zero (`E2BIG` otherwise), as Linux reads
/// `struct open_how` and `struct clone_args`. NULL: all defaults.
///
/// # Safety
/// A non-NULL `p` must point to at least `size` readable bytes, `size`
/// being its first field.
pub(crate) unsafe fn options(p: *const ManyfsOptions) -> CResult<ManyfsOptions> {
    let ours = size_of::<ManyfsOptions>();
    let mut o = ManyfsOptions::default();
    if p.is_null() {
        return Ok(o);
    }
    // SAFETY: `p` is not NULL and points to at least the `size` field (the
    // caller's guarantee); `read_unaligned` asks nothing of its alignment.
    let theirs = unsafe { std::ptr::addr_of!((*p).size).read_unaligned() } as usize;
    if theirs < size_of::<u32>() {
        return Err(Failure::invalid(format!(
            "options size {theirs} (set it to sizeof(struct manyfs_options))"
        )));
    }
    let base = p.cast::<u8>();
    if theirs > ours {
        // SAFETY: the caller guarantees `theirs` readable bytes at `p`.
        let tail = unsafe { std::slice::from_raw_parts(base.add(ours), theirs - ours) };
        if tail.iter().any(|&b| b != 0) {
            return Err(Failure::new(
                libc::E2BIG,
                format!(
                    "options of {theirs} bytes set fields this library ({ours} bytes) does not know"
                ),
            ));
        }
    }
    // SAFETY: `min(theirs, ours)` bytes are readable at `p` (the caller's
    // guarantee) and writable in `o`; every bit pattern is a valid
    // `ManyfsOptions` (integers only); the two do not overlap.
    unsafe {
        std::ptr::copy_nonoverlapping(base, (&raw mut o).cast::<u8>(), theirs.min(ours));
    }
    o.size = ours as u32;
    Ok(o)
}

impl ManyfsOptions {
    pub(crate) fn mount_options(&self) -> CResult<MountOptions> {
        let mut m = MountOptions::default();
        m.durability = match self.durability {
            crate::MANYFS_DURABILITY_DEFAULT => m.durability,
            crate::MANYFS_DURABILITY_PM => Durability::Pm,
            crate::MANYFS_DURABILITY_FILE => Durability::File,
            crate::MANYFS_DURABILITY_DRAM => Durability::Dram,
            other => return Err(Failure::invalid(format!("durability {other}"))),
        };
        m.read_only = self.read_only != 0;
        if self.commit_interval_ms != 0 {
            m.commit_interval = Duration::from_millis(self.commit_interval_ms.into());
        }
        Ok(m)
    }

    pub(crate) fn mkfs_options(&self, size: u64) -> MkfsOptions {
        let mut m = MkfsOptions::default();
        m.size = size;
        if self.bytes_per_inode != 0 {
            m.bytes_per_inode = self.bytes_per_inode;
        }
        m.replace_existing = self.replace_existing != 0;
        m.zero_fill = self.zero_fill != 0;
        m
    }
}

/// Seconds and nanoseconds since the epoch (negative seconds before it,
/// nanoseconds always in `0..1e9`).
fn timespec(t: SystemTime) -> (i64, i64) {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (d.as_secs() as i64, i64::from(d.subsec_nanos())),
        Err(e) => {
            let d = e.duration();
            let (s, n) = (d.as_secs() as i64, i64::from(d.subsec_nanos()));
            if n == 0 {
                (-s, 0)
            } else {
                (-s - 1, 1_000_000_000 - n)
            }
        }
    }
}

impl From<&Metadata> for ManyfsStat {
    fn from(m: &Metadata) -> ManyfsStat {
        let (atime_sec, atime_nsec) = timespec(m.atime);
        let (mtime_sec, mtime_nsec) = timespec(m.mtime);
        let (ctime_sec, ctime_nsec) = timespec(m.ctime);
        ManyfsStat {
            ino: m.ino,
            mode: m.kind.format_bits() | (m.mode & 0o7777),
            nlink: m.nlink,
            uid: m.uid,
            gid: m.gid,
            size: m.size,
            blocks: m.blocks,
            rdev: m.rdev,
            atime_sec,
            atime_nsec,
            mtime_sec,
            mtime_nsec,
            ctime_sec,
            ctime_nsec,
        }
    }
}

/// The `MANYFS_DT_*` value of a kind (the `DT_*` of `<dirent.h>`).
pub(crate) fn dirent_type(k: FileKind) -> u8 {
    match k {
        FileKind::File => crate::MANYFS_DT_REG,
        FileKind::Dir => crate::MANYFS_DT_DIR,
        FileKind::Symlink => crate::MANYFS_DT_LNK,
        FileKind::Fifo => crate::MANYFS_DT_FIFO,
        FileKind::CharDevice => crate::MANYFS_DT_CHR,
        FileKind::BlockDevice => crate::MANYFS_DT_BLK,
        FileKind::Socket => crate::MANYFS_DT_SOCK,
    }
}
