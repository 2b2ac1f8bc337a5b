//! Directory streams of directories under the pool: `DIR*` handles of
//! this library's own, told apart from glibc's by a registry of the
//! pointers it handed out; `scandir`; and `getdents64` on a directory
//! descriptor.

use crate::registry::Registry;
use crate::table::{self, Listing, Open};
use crate::{errno_of, mounted, on_fd, on_path, real, ret, state};
use libc::{DIR, c_char, c_int, c_long, c_void, dirent64, size_t, ssize_t};
use manyfs::lowlevel::InodeOps;

/// One stream: the entries as they were when opened (or rewound), and
/// the `dirent64` that `readdir` returns, reused by the next call.
struct Stream {
    fd: c_int,
    entries: Listing,
    pos: usize,
    ent: dirent64,
}

/// The streams handed out.
static STREAMS: Registry = Registry::new();

fn ours(dirp: *mut DIR) -> Option<*mut Stream> {
    STREAMS.contains(dirp).then_some(dirp.cast())
}

/// The entries of the directory open at `fd`, `.` and `..` first.
fn entries(fd: c_int) -> Result<Listing, c_int> {
    entries_of(&*table::get(fd).ok_or(libc::EBADF)?)
}

/// The entries of directory `open`, `.` and `..` (with the parent's
/// inode) first.
fn entries_of(open: &Open) -> Result<Listing, c_int> {
    use std::os::unix::ffi::OsStrExt;
    if !open.is_dir {
        return Err(libc::ENOTDIR);
    }
    let ino = open.file.ino();
    let fs = mounted()?;
    let list = fs.readdir_ino(ino).map_err(errno_of)?;
    // The parent's inode (the pool's root is its own parent, as a mount's
    // root is in the kernel's listings).
    let parent = fs
        .lookup(ino, std::ffi::OsStr::new(".."))
        .map_err(errno_of)?
        .ino;
    let mut out = vec![
        (b".".to_vec(), ino, libc::DT_DIR),
        (b"..".to_vec(), parent, libc::DT_DIR),
    ];
    out.extend(list.into_iter().map(|e| {
        (
            e.name.as_bytes().to_vec(),
            e.ino,
            crate::meta::dirent_type(e.kind),
        )
    }));
    Ok(out)
}

/// A stream over our directory descriptor `fd`, which it then owns.
fn stream_of(fd: c_int) -> Result<*mut DIR, c_int> {
    let s = Box::new(Stream {
        fd,
        entries: entries(fd)?,
        pos: 0,
        // SAFETY: an all-zero dirent64 is valid.
        ent: unsafe { std::mem::zeroed() },
    });
    let p = Box::into_raw(s);
    STREAMS.add(p);
    Ok(p.cast())
}

/// `opendir(3)`.
///
/// # Safety
/// As `opendir(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn opendir(path: *const c_char) -> *mut DIR {
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
    // SAFETY: forwarded from the caller.
    unsafe {
        on_path(
            libc::AT_FDCWD,
            path,
            |fs, p| {
                let fd = crate::files::open_ours(fs, p, flags, 0)?;
                stream_of(fd).inspect_err(|_| {
                    crate::files::close_ours(fd);
                })
            },
            |path| real::opendir()(path),
        )
    }
}

/// `fdopendir(3)`.
#[unsafe(no_mangle)]
pub extern "C" fn fdopendir(fd: c_int) -> *mut DIR {
    if !table::is_ours(fd) {
        // SAFETY: the caller's argument, unchanged, to libc.
        return unsafe { real::fdopendir()(fd) };
    }
    ret(state::fs().and_then(|_| stream_of(fd)))
}

/// `readdir64(3)`.
///
/// # Safety
/// As `readdir(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn readdir64(dirp: *mut DIR) -> *mut dirent64 {
    let Some(s) = ours(dirp) else {
        // SAFETY: the caller's argument, unchanged, to libc.
        return unsafe { real::readdir64()(dirp) };
    };
    // SAFETY: a live stream of ours; one thread reads a stream at a time.
    let s = unsafe { &mut *s };
    let Some((name, ino, kind)) = s.entries.get(s.pos) else {
        return std::ptr::null_mut();
    };
    s.pos += 1;
    fill_dirent(&mut s.ent, name, *ino, *kind, s.pos);
    &mut s.ent
}

/// Fill `ent` with one entry; `next` is the position after it (`d_off`).
fn fill_dirent(ent: &mut dirent64, name: &[u8], ino: u64, kind: u8, next: usize) {
    let n = name.len().min(ent.d_name.len() - 1);
    ent.d_ino = ino;
    ent.d_off = next as i64;
    ent.d_reclen = std::mem::size_of::<dirent64>() as u16;
    ent.d_type = kind;
    for (d, &c) in ent.d_name.iter_mut().zip(&name[..n]) {
        *d = c as c_char;
    }
    ent.d_name[n] = 0;
}

/// `readdir(3)` (the same structure on x86-64).
///
/// # Safety
/// As `readdir(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn readdir(dirp: *mut DIR) -> *mut dirent64 {
    // SAFETY: forwarded from the caller.
    unsafe { readdir64(dirp) }
}

/// `closedir(3)`.
///
/// # Safety
/// As `closedir(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn closedir(dirp: *mut DIR) -> c_int {
    let Some(s) = ours(dirp) else {
        // SAFETY: the caller's argument, unchanged, to libc.
        return unsafe { real::closedir()(dirp) };
    };
    STREAMS.remove(dirp);
    // SAFETY: made by `Box::into_raw` in `stream_of`, now unregistered.
    let s = unsafe { Box::from_raw(s) };
    crate::files::close_ours(s.fd)
}

/// `dirfd(3)`.
///
/// # Safety
/// As `dirfd(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dirfd(dirp: *mut DIR) -> c_int {
    match ours(dirp) {
        // SAFETY: a live stream of ours.
        Some(s) => unsafe { (*s).fd },
        // SAFETY: the caller's argument, unchanged, to libc.
        None => unsafe { real::dirfd()(dirp) },
    }
}

/// `rewinddir(3)`: the entries are read again.
///
/// # Safety
/// As `rewinddir(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rewinddir(dirp: *mut DIR) {
    match ours(dirp) {
        Some(s) => {
            // SAFETY: a live stream of ours.
            let s = unsafe { &mut *s };
            if let Ok(e) = entries(s.fd) {
                s.entries = e;
            }
            s.pos = 0;
        }
        // SAFETY: the caller's argument, unchanged, to libc.
        None => unsafe { real::rewinddir()(dirp) },
    }
}

/// `telldir(3)`.
///
/// # Safety
/// As `telldir(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn telldir(dirp: *mut DIR) -> c_long {
    match ours(dirp) {
        // SAFETY: a live stream of ours.
        Some(s) => unsafe { (*s).pos as c_long },
        // SAFETY: the caller's argument, unchanged, to libc.
        None => unsafe { real::telldir()(dirp) },
    }
}

/// `seekdir(3)`.
///
/// # Safety
/// As `seekdir(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn seekdir(dirp: *mut DIR, loc: c_long) {
    match ours(dirp) {
        // SAFETY: a live stream of ours.
        Some(s) => unsafe { (*s).pos = loc.max(0) as usize },
        // SAFETY: the caller's argument, unchanged, to libc.
        None => unsafe { real::seekdir()(dirp, loc) },
    }
}

/// The fixed part of a `struct linux_dirent64`: `d_ino` (8 bytes),
/// `d_off` (8), `d_reclen` (2), `d_type` (1); the name follows.
const DIRENT64_HEAD: usize = 19;

/// `getdents64` on our directory `o`: records from the listing taken
/// at offset 0 (see [`Open::listing`]), from the entry at the file
/// offset on, as many as `count` bytes hold, each `d_reclen` a multiple
/// of 8 with the name's NUL and padding zeroed, `d_off` the offset of the
/// next (for `lseek`). 0 at the end; `EINVAL` when the next record does
/// not fit in an empty buffer; `EFAULT` for a null one; `ENOTDIR` on a
/// file, `EBADF` on an `O_PATH` descriptor, as Linux.
///
/// # Safety
/// `buf` is null or has `count` writable bytes.
unsafe fn getdents_ours(o: &Open, buf: *mut c_void, count: size_t) -> Result<ssize_t, c_int> {
    // Opened with `O_PATH` (a directory cannot be opened for writing).
    if !o.read && !o.write {
        return Err(libc::EBADF);
    }
    if !o.is_dir {
        return Err(libc::ENOTDIR);
    }
    let count = count.min(c_int::MAX as usize);
    let mut pos = o.offset.lock();
    let mut listing = o.listing.lock().unwrap_or_else(|e| e.into_inner());
    if *pos == 0 || listing.is_none() {
        *listing = Some(entries_of(o)?);
    }
    let list = listing.as_deref().unwrap_or_default();
    let mut out: Vec<u8> = Vec::new();
    let mut next = usize::try_from(*pos).unwrap_or(usize::MAX);
    while let Some((name, ino, kind)) = list.get(next) {
        let reclen = (DIRENT64_HEAD + name.len() + 1).next_multiple_of(8);
        if out.len() + reclen > count {
            if out.is_empty() {
                return Err(libc::EINVAL);
            }
            break;
        }
        next += 1;
        out.extend_from_slice(&ino.to_ne_bytes());
        out.extend_from_slice(&(next as i64).to_ne_bytes());
        out.extend_from_slice(&(reclen as u16).to_ne_bytes());
        out.push(*kind);
        out.extend_from_slice(name);
        out.resize(out.len() + reclen - DIRENT64_HEAD - name.len(), 0);
    }
    if out.is_empty() {
        return Ok(0);
    }
    if buf.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: `buf` has `count` writable bytes (caller), `out` is no
    // longer than `count`.
    unsafe { std::ptr::copy_nonoverlapping(out.as_ptr(), buf.cast::<u8>(), out.len()) };
    *pos = next as u64;
    Ok(out.len() as ssize_t)
}

/// `getdents64(2)` (glibc's since 2.30).
///
/// # Safety
/// As `getdents64(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getdents64(fd: c_int, buf: *mut c_void, count: size_t) -> ssize_t {
    on_fd(
        fd,
        // SAFETY: forwarded from the caller.
        |o| unsafe { getdents_ours(o, buf, count) },
        // SAFETY: the caller's arguments, unchanged, to libc.
        || unsafe { real::getdents64()(fd, buf, count) },
    )
}

/// `scandir`'s filter: keep the entry when it returns non-zero.
pub type ScanFilter = Option<unsafe extern "C" fn(*const dirent64) -> c_int>;
/// `scandir`'s comparison, for `qsort` of the array of entries.
pub type ScanCompar =
    Option<unsafe extern "C" fn(*mut *const dirent64, *mut *const dirent64) -> c_int>;

/// Free `n` entries of `scandir` and then the array itself.
///
/// # Safety
/// `list` holds `n` pointers from `malloc` (or is null with `n` 0).
unsafe fn free_list(list: &[*mut dirent64]) {
    for &e in list {
        // SAFETY: each entry came from `malloc` and is freed once.
        unsafe { libc::free(e.cast()) };
    }
}

/// `scandir` of our directory `p`: its entries (`.` and `..` with them,
/// as glibc's `readdir` gives them), each in memory of its own from
/// `malloc`, kept by `filter`, sorted by `compar`, into a `malloc`'d
/// array at `*namelist`.
///
/// # Safety
/// `namelist` is null or writable; `filter` and `compar` are C functions
/// of the prototypes `scandir(3)` names.
unsafe fn scandir_ours(
    fs: &manyfs::Fs,
    p: &std::path::Path,
    namelist: *mut *mut *mut dirent64,
    filter: ScanFilter,
    compar: ScanCompar,
) -> Result<c_int, c_int> {
    if namelist.is_null() {
        return Err(libc::EFAULT);
    }
    // The filter and the comparison may fork: the mount `fs` stays.
    let _walking = crate::state::Walking::start();
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
    let fd = crate::files::open_ours(fs, p, flags, 0)?;
    let listed = entries(fd);
    crate::files::close_ours(fd);
    let mut kept: Vec<*mut dirent64> = Vec::new();
    for (i, (name, ino, kind)) in listed?.iter().enumerate() {
        // SAFETY: malloc of a dirent64's size; freed by the caller or below.
        let e = unsafe { libc::malloc(std::mem::size_of::<dirent64>()) }.cast::<dirent64>();
        if e.is_null() {
            // SAFETY: the entries allocated so far.
            unsafe { free_list(&kept) };
            return Err(libc::ENOMEM);
        }
        // SAFETY: an all-zero dirent64 is valid; `e` has room for one.
        unsafe { e.write(std::mem::zeroed()) };
        // SAFETY: `e` was just initialised and is not aliased.
        fill_dirent(unsafe { &mut *e }, name, *ino, *kind, i + 1);
        // SAFETY: the caller's filter, on an entry it may read.
        if filter.is_some_and(|f| unsafe { f(e) } == 0) {
            // SAFETY: the entry just allocated, not kept.
            unsafe { libc::free(e.cast()) };
            continue;
        }
        kept.push(e);
    }
    let array = if kept.is_empty() {
        std::ptr::null_mut()
    } else {
        let bytes = kept.len() * std::mem::size_of::<*mut dirent64>();
        // SAFETY: malloc of a non-zero size; the caller frees it.
        let a = unsafe { libc::malloc(bytes) }.cast::<*mut dirent64>();
        if a.is_null() {
            // SAFETY: the entries allocated above.
            unsafe { free_list(&kept) };
            return Err(libc::ENOMEM);
        }
        // SAFETY: `a` has room for `kept.len()` pointers.
        unsafe { std::ptr::copy_nonoverlapping(kept.as_ptr(), a, kept.len()) };
        if let Some(c) = compar {
            // SAFETY: `compar` takes two pointers to elements of the array
            // (`const struct dirent **`), which is what `qsort` passes as
            // `const void *`: the same ABI (glibc's scandir makes the same
            // cast).
            let c = unsafe {
                std::mem::transmute::<
                    unsafe extern "C" fn(*mut *const dirent64, *mut *const dirent64) -> c_int,
                    unsafe extern "C" fn(*const libc::c_void, *const libc::c_void) -> c_int,
                >(c)
            };
            // SAFETY: an array of `kept.len()` pointers.
            unsafe {
                libc::qsort(
                    a.cast(),
                    kept.len(),
                    std::mem::size_of::<*mut dirent64>(),
                    Some(c),
                )
            };
        }
        a
    };
    // SAFETY: checked non-null above.
    unsafe { *namelist = array };
    c_int::try_from(kept.len()).map_err(|_| libc::EOVERFLOW)
}

/// `scandirat(3)`.
///
/// # Safety
/// As `scandirat(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scandirat(
    dirfd: c_int,
    path: *const c_char,
    namelist: *mut *mut *mut dirent64,
    filter: ScanFilter,
    compar: ScanCompar,
) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe {
        on_path(
            dirfd,
            path,
            |fs, p| scandir_ours(fs, p, namelist, filter, compar),
            |path| real::scandirat64()(dirfd, path, namelist, filter, compar),
        )
    }
}

/// `scandirat64(3)` (the same structure on x86-64).
///
/// # Safety
/// As `scandirat(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scandirat64(
    dirfd: c_int,
    path: *const c_char,
    namelist: *mut *mut *mut dirent64,
    filter: ScanFilter,
    compar: ScanCompar,
) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { scandirat(dirfd, path, namelist, filter, compar) }
}

/// `scandir(3)`.
///
/// # Safety
/// As `scandir(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scandir(
    path: *const c_char,
    namelist: *mut *mut *mut dirent64,
    filter: ScanFilter,
    compar: ScanCompar,
) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { scandirat(libc::AT_FDCWD, path, namelist, filter, compar) }
}

/// `scandir64(3)`.
///
/// # Safety
/// As `scandir(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scandir64(
    path: *const c_char,
    namelist: *mut *mut *mut dirent64,
    filter: ScanFilter,
    compar: ScanCompar,
) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { scandir(path, namelist, filter, compar) }
}
