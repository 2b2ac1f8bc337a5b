//! `mmap` of a file under the directory: a shared-memory copy the kernel
//! can map.
//!
//! The pool is not a kernel file system, so the kernel cannot fault a
//! mapping in from it. A file's first mapping gets a *shadow*: an anonymous
//! shared-memory file (`memfd_create`) holding the file's bytes, which every
//! mapping of that file then maps (so mappings of one file see each other's
//! stores, as on any file system). While the file is mapped:
//! - a write through a descriptor goes to the pool and to the shadow, so the
//!   mappings see it;
//! - the mappings' stores go to the pool (written back) on `msync`, on
//!   `munmap`, before a read, a truncate or an `fsync` of the file through a
//!   descriptor, when its last mapping goes, and when the process image
//!   goes (exit, exec);
//! - a truncate resizes the shadow too.
//!
//! What the shadow does not give: stores through a mapping reach the pool
//! only at those points (a power cut loses what no `msync`/`fsync` wrote
//! back, as with any file system's dirty pages), and a mapping past the end
//! of file reads zeros instead of raising `SIGBUS`. `MAP_PRIVATE` mappings
//! map the same copy privately (later writes through descriptors may or may
//! not show in them, as POSIX allows). This is what SQLite's WAL index
//! (`-shm`, mapped shared in its default locking mode) needs.

use crate::real;
use crate::table::Open;
use libc::{c_int, c_void, off_t, size_t};
use manyfs::File;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// A mapped file's shadow.
struct Shadow {
    /// The shared-memory file every mapping of the file maps.
    memfd: c_int,
    /// Its length.
    len: u64,
    /// A handle to the file, to write mappings back through.
    file: File,
    /// Live mappings of it.
    maps: usize,
}

/// One mapping: where it is, and what of which file it maps.
struct Mapping {
    addr: usize,
    len: usize,
    ino: u64,
    off: u64,
    shared: bool,
}

struct Shadows {
    by_ino: BTreeMap<u64, Shadow>,
    maps: Vec<Mapping>,
}

static SHADOWS: Mutex<Shadows> = Mutex::new(Shadows {
    by_ino: BTreeMap::new(),
    maps: Vec::new(),
});

/// Whether any file was ever mapped: calls on descriptors skip the lock
/// until one is.
static ANY: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// Set while this thread holds the registry: a `munmap` or `msync` it
    /// makes meanwhile is the allocator's or the library's own (glibc
    /// returns large blocks with `munmap`), never a mapping of ours, and
    /// must not wait for the lock this thread holds.
    static HOLDING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The registry, locked; the guard also marks this thread as holding it.
struct Held(std::sync::MutexGuard<'static, Shadows>);

impl std::ops::Deref for Held {
    type Target = Shadows;
    fn deref(&self) -> &Shadows {
        &self.0
    }
}

impl std::ops::DerefMut for Held {
    fn deref_mut(&mut self) -> &mut Shadows {
        &mut self.0
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        HOLDING.with(|h| h.set(false));
    }
}

fn shadows() -> Held {
    let g = SHADOWS.lock().unwrap_or_else(|e| e.into_inner());
    HOLDING.with(|h| h.set(true));
    Held(g)
}

/// Whether a `munmap`/`msync` may concern a mapping of ours: something was
/// mapped, and this thread is not inside this module already.
fn may_be_ours() -> bool {
    ANY.load(Ordering::Acquire) && !HOLDING.with(|h| h.get())
}

fn errno() -> c_int {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

fn ino_of(o: &Open) -> Result<u64, c_int> {
    o.file.metadata().map(|m| m.ino).map_err(crate::errno_of)
}

/// Grow (or shrink) the shadow to `len` bytes.
fn resize(s: &mut Shadow, len: u64) -> Result<(), c_int> {
    let l = off_t::try_from(len).map_err(|_| libc::EFBIG)?;
    // SAFETY: `memfd` is the shadow's own descriptor.
    if unsafe { libc::ftruncate(s.memfd, l) } != 0 {
        return Err(errno());
    }
    s.len = len;
    Ok(())
}

/// Make the shadow of the file `o` is open on, holding its bytes.
fn make_shadow(o: &Open) -> Result<Shadow, c_int> {
    let size = o.file.metadata().map_err(crate::errno_of)?.size;
    // SAFETY: a constant NUL-terminated name; the flags are valid.
    let memfd = unsafe { libc::memfd_create(c"manyfs-map".as_ptr(), libc::MFD_CLOEXEC) };
    if memfd < 0 {
        return Err(errno());
    }
    let memfd = crate::own::adopt(memfd);
    let mut s = Shadow {
        memfd,
        len: 0,
        file: o.file.clone(),
        maps: 0,
    };
    let filled = resize(&mut s, size).and_then(|_| {
        // Under the mmap threshold of glibc's allocator.
        let mut buf = vec![0u8; 64 << 10];
        let mut at = 0u64;
        while at < size {
            let n = s.file.read_at(&mut buf, at).map_err(crate::errno_of)?;
            if n == 0 {
                break;
            }
            // SAFETY: `buf[..n]` is initialised; `memfd` is ours.
            let w = unsafe { libc::pwrite(s.memfd, buf.as_ptr().cast(), n, at as off_t) };
            if w != n as isize {
                return Err(errno());
            }
            at += n as u64;
        }
        Ok(())
    });
    if let Err(e) = filled {
        crate::own::close_own(memfd);
        return Err(e);
    }
    Ok(s)
}

/// `mmap` of `len` bytes at `off` of the file `o` is open on.
pub(crate) fn map(
    o: &Open,
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    off: off_t,
) -> Result<*mut c_void, c_int> {
    if o.is_dir {
        return Err(libc::ENODEV);
    }
    if prot & libc::PROT_WRITE != 0 && flags & libc::MAP_SHARED != 0 && !o.write {
        return Err(libc::EACCES);
    }
    let start = u64::try_from(off).map_err(|_| libc::EINVAL)?;
    let ino = ino_of(o)?;
    let mut g = shadows();
    if let std::collections::btree_map::Entry::Vacant(v) = g.by_ino.entry(ino) {
        v.insert(make_shadow(o)?);
        ANY.store(true, Ordering::Release);
    }
    let s = g.by_ino.get_mut(&ino).expect("made above");
    let end = start.checked_add(len as u64).ok_or(libc::EINVAL)?;
    if end > s.len {
        resize(s, end)?;
    }
    // SAFETY: the caller's arguments, the descriptor swapped for the
    // shadow's, which holds at least `off + len` bytes.
    let p = unsafe { real::mmap64()(addr, len, prot, flags, s.memfd, off) };
    if p == libc::MAP_FAILED {
        let e = errno();
        if s.maps == 0 {
            drop_shadow(&mut g, ino);
        }
        return Err(e);
    }
    s.maps += 1;
    g.maps.push(Mapping {
        addr: p as usize,
        len,
        ino,
        off: start,
        shared: flags & libc::MAP_SHARED != 0,
    });
    Ok(p)
}

fn drop_shadow(g: &mut Held, ino: u64) {
    if let Some(s) = g.by_ino.remove(&ino) {
        // The shadow's own descriptor, closed once.
        crate::own::close_own(s.memfd);
    }
}

/// Copy the stores of shared mapping `m` (its bytes `lo..hi`, offsets
/// within the mapping) below the end of file into the pool.
fn write_back(s: &Shadow, m: &Mapping, lo: usize, hi: usize) -> Result<(), c_int> {
    let size = s.file.metadata().map_err(crate::errno_of)?.size;
    let file_lo = m.off + lo as u64;
    if !m.shared || file_lo >= size {
        return Ok(());
    }
    let hi = hi.min(lo + (size - file_lo) as usize);
    // SAFETY: `addr + lo .. addr + hi` lies inside a live mapping of ours
    // (the registry's entries are removed before their memory is unmapped).
    let bytes = unsafe { std::slice::from_raw_parts((m.addr + lo) as *const u8, hi - lo) };
    // Written only where it differs: most of a mapping is usually unchanged.
    let mut old = vec![0u8; bytes.len()];
    let n = s.file.read_at(&mut old, file_lo).map_err(crate::errno_of)?;
    if n == bytes.len() && old == bytes {
        return Ok(());
    }
    s.file
        .write_at(bytes, file_lo)
        .map(|_| ())
        .map_err(crate::errno_of)
}

/// Write back every shared mapping of `ino` (before the file is read,
/// truncated or synced through a descriptor).
fn write_back_ino(g: &Held, ino: u64) -> Result<(), c_int> {
    let Some(s) = g.by_ino.get(&ino) else {
        return Ok(());
    };
    for m in g.maps.iter().filter(|m| m.ino == ino) {
        write_back(s, m, 0, m.len)?;
    }
    Ok(())
}

/// Whether any file of the pool is mapped.
pub(crate) fn any_mapped() -> bool {
    ANY.load(Ordering::Acquire) && !shadows().by_ino.is_empty()
}

/// Write back every shared mapping of every file (before the process image
/// goes: at exit and at `exec`).
pub(crate) fn write_back_all() -> Result<(), c_int> {
    if !ANY.load(Ordering::Acquire) {
        return Ok(());
    }
    let g = shadows();
    for m in &g.maps {
        if let Some(s) = g.by_ino.get(&m.ino) {
            write_back(s, m, 0, m.len)?;
        }
    }
    Ok(())
}

/// Before a read, truncate or sync of `o`'s file: its mappings' stores go
/// to the pool. Nothing to do (one load) while nothing was ever mapped.
pub(crate) fn before_access(o: &Open) -> Result<(), c_int> {
    if !ANY.load(Ordering::Acquire) {
        return Ok(());
    }
    let ino = ino_of(o)?;
    write_back_ino(&shadows(), ino)
}

/// After `buf` was written at `at` of `o`'s file through a descriptor: the
/// mappings see it.
pub(crate) fn after_write(o: &Open, buf: &[u8], at: u64) -> Result<(), c_int> {
    if !ANY.load(Ordering::Acquire) {
        return Ok(());
    }
    let ino = ino_of(o)?;
    let mut g = shadows();
    let Some(s) = g.by_ino.get_mut(&ino) else {
        return Ok(());
    };
    let end = at + buf.len() as u64;
    if end > s.len {
        resize(s, end)?;
    }
    // SAFETY: `buf` is the caller's; `memfd` is the shadow's.
    let w = unsafe { libc::pwrite(s.memfd, buf.as_ptr().cast(), buf.len(), at as off_t) };
    if w != buf.len() as isize {
        return Err(errno());
    }
    Ok(())
}

/// After `o`'s file was truncated to `len` (or grown): the shadow follows,
/// never below what its mappings cover.
pub(crate) fn after_set_len(o: &Open, len: u64) -> Result<(), c_int> {
    if !ANY.load(Ordering::Acquire) {
        return Ok(());
    }
    let ino = ino_of(o)?;
    let mut g = shadows();
    let mapped = g
        .maps
        .iter()
        .filter(|m| m.ino == ino)
        .map(|m| m.off + m.len as u64)
        .max()
        .unwrap_or(0);
    let Some(s) = g.by_ino.get_mut(&ino) else {
        return Ok(());
    };
    // Bytes past the new end read as zeros if the file grows again.
    let keep = len.min(s.len);
    resize(s, keep)?;
    resize(s, len.max(mapped))
}

/// `munmap`: mappings of ours in `addr..addr + len` are written back and
/// forgotten (a shadow goes with its last mapping); then libc unmaps.
pub(crate) fn unmap(addr: *mut c_void, len: size_t) -> c_int {
    if may_be_ours() {
        let (lo, hi) = (addr as usize, (addr as usize).saturating_add(len));
        let mut g = shadows();
        let mut i = 0;
        while i < g.maps.len() {
            let m = &g.maps[i];
            let (mlo, mhi) = (m.addr, m.addr + m.len);
            if mhi <= lo || mlo >= hi {
                i += 1;
                continue;
            }
            if let Some(s) = g.by_ino.get(&m.ino)
                && let Err(e) = write_back(s, m, lo.max(mlo) - mlo, hi.min(mhi) - mlo)
            {
                crate::set_errno(e);
                return -1;
            }
            if lo <= mlo && mhi <= hi {
                let m = g.maps.swap_remove(i);
                if let Some(s) = g.by_ino.get_mut(&m.ino) {
                    s.maps -= 1;
                    if s.maps == 0 {
                        drop_shadow(&mut g, m.ino);
                    }
                }
            } else {
                // Part of it: the rest stays registered (written back again
                // later, which is harmless).
                i += 1;
            }
        }
    }
    // SAFETY: the caller's arguments, unchanged, to libc.
    unsafe { real::munmap()(addr, len) }
}

/// `msync`: mappings of ours in `addr..addr + len` are written back to the
/// pool (and synced with `MS_SYNC`).
pub(crate) fn sync(addr: *mut c_void, len: size_t, flags: c_int) -> c_int {
    if may_be_ours() {
        let (lo, hi) = (addr as usize, (addr as usize).saturating_add(len));
        let g = shadows();
        for m in g.maps.iter().filter(|m| m.addr < hi && lo < m.addr + m.len) {
            let Some(s) = g.by_ino.get(&m.ino) else {
                continue;
            };
            let written = write_back(
                s,
                m,
                lo.max(m.addr) - m.addr,
                hi.min(m.addr + m.len) - m.addr,
            )
            .and_then(|_| {
                if flags & libc::MS_SYNC != 0 {
                    s.file.sync_data().map_err(crate::errno_of)
                } else {
                    Ok(())
                }
            });
            if let Err(e) = written {
                crate::set_errno(e);
                return -1;
            }
        }
    }
    // SAFETY: the caller's arguments, unchanged, to libc.
    unsafe { real::msync()(addr, len, flags) }
}
