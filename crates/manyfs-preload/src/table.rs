//! The descriptors this library serves: one slot per descriptor number,
//! each under its own lock, so calls on different descriptors never wait
//! for each other and a call on a kernel descriptor costs one load.
//!
//! Every manyfs descriptor holds a real kernel descriptor of the same
//! number (`/dev/null` opened `O_PATH | O_CLOEXEC`), so the kernel never
//! hands that number out for anything else while it is ours; if one leaks
//! to the kernel (through a call this library does not interpose) the
//! kernel answers `EBADF`, and an `exec` closes it (except those it hands
//! to the new program, `handoff`). A descriptor an exec handed over, or
//! one parked before a fork, is ours with nothing open behind it until
//! its first use (`handoff::open_pending`).

use libc::c_int;
use manyfs::File;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// Descriptor numbers this library can serve (higher ones: `EMFILE`).
pub const MAX_FDS: usize = 1 << 16;

/// A directory's entries: name, inode, `d_type`; `.` and `..` first.
pub type Listing = Vec<(Vec<u8>, u64, u8)>;

/// One open file description: what `open` made, shared by the
/// descriptors `dup` makes of it.
pub struct Open {
    /// The manyfs handle (directories too: opened for reading).
    pub file: File,
    /// The absolute path it was opened at (under the run's directory).
    pub path: Vec<u8>,
    /// Whether it is a directory.
    pub is_dir: bool,
    /// Opened for reading.
    pub read: bool,
    /// Opened for writing.
    pub write: bool,
    /// The status flags `F_GETFL` shows (`O_APPEND`, `O_NONBLOCK`, ...).
    pub flags: AtomicI32,
    /// The file offset of `read`, `write` and `lseek` (of a directory:
    /// the index in `listing` where `getdents64` goes on).
    pub offset: Offset,
    /// A directory's entries as `getdents64` took them at offset 0: its
    /// later calls go on in the same list, so an entry there all along is
    /// given once, however the directory changes between them. Locked
    /// after `offset`.
    pub listing: Mutex<Option<Listing>>,
    /// The write-life hint of `F_SET_RW_HINT` (`RWH_WRITE_LIFE_*`). Linux
    /// keeps it with the inode; here it stays with the open file
    /// description (shared by its `dup`s) and is not stored in the pool.
    /// It changes nothing: the library places data by itself.
    pub write_hint: AtomicU64,
    /// The hint of `F_SET_FILE_RW_HINT`, of this open file description
    /// only (as Linux kept it before 5.17).
    pub file_write_hint: AtomicU64,
}

/// How many descriptors are ours.
static OPEN: AtomicUsize = AtomicUsize::new(0);
/// An open file description's offset: this image's, or a cell shared
/// with the other processes that hold the description (`offsets`), read
/// when locked and written back when the guard goes.
pub struct Offset {
    local: Mutex<u64>,
    shared: std::sync::OnceLock<(u32, &'static AtomicU64)>,
}

impl Offset {
    /// An offset of this image, at `at`.
    pub fn new(at: u64) -> Offset {
        Offset {
            local: Mutex::new(at),
            shared: std::sync::OnceLock::new(),
        }
    }

    /// The offset, locked against this image's other threads.
    pub fn lock(&self) -> OffsetGuard<'_> {
        let mut local = self.local.lock().unwrap_or_else(|e| e.into_inner());
        let shared = self.shared.get().map(|&(_, c)| c);
        if let Some(c) = shared {
            *local = c.load(Ordering::Acquire);
        }
        OffsetGuard { local, shared }
    }

    /// From now on, the offset is shared cell `i` (`offsets::cell`).
    pub fn share(&self, i: u32, cell: &'static AtomicU64) {
        let _ = self.shared.set((i, cell));
    }

    /// The shared cell this offset uses, if any.
    pub fn cell(&self) -> Option<u32> {
        self.shared.get().map(|&(i, _)| i)
    }
}

/// A locked [`Offset`]: dereferences to the value; a shared one is written
/// back to its cell when the guard goes.
pub struct OffsetGuard<'a> {
    local: std::sync::MutexGuard<'a, u64>,
    shared: Option<&'static AtomicU64>,
}

impl std::ops::Deref for OffsetGuard<'_> {
    type Target = u64;
    fn deref(&self) -> &u64 {
        &self.local
    }
}

impl std::ops::DerefMut for OffsetGuard<'_> {
    fn deref_mut(&mut self) -> &mut u64 {
        &mut self.local
    }
}

impl Drop for OffsetGuard<'_> {
    fn drop(&mut self) {
        if let Some(c) = self.shared {
            c.store(*self.local, Ordering::Release);
        }
    }
}

static OURS: [AtomicBool; MAX_FDS] = [const { AtomicBool::new(false) }; MAX_FDS];
static SLOTS: [RwLock<Option<Arc<Open>>>; MAX_FDS] = [const { RwLock::new(None) }; MAX_FDS];
/// `FD_CLOEXEC` as the program set it (the kernel's copy is always set).
static CLOEXEC: [AtomicBool; MAX_FDS] = [const { AtomicBool::new(false) }; MAX_FDS];

fn index(fd: c_int) -> Option<usize> {
    usize::try_from(fd).ok().filter(|&i| i < MAX_FDS)
}

/// The open file behind `fd`, if it is ours. A descriptor an exec handed
/// over and not yet opened in this image is opened now
/// (`handoff::open_pending`).
pub fn get(fd: c_int) -> Option<Arc<Open>> {
    let i = index(fd)?;
    if !OURS[i].load(Ordering::Acquire) {
        return None;
    }
    let open = SLOTS[i].read().unwrap_or_else(|e| e.into_inner()).clone();
    open.or_else(|| crate::handoff::open_pending(fd))
}

/// Mark `fd` ours with nothing open behind it yet: a descriptor an exec
/// handed over, opened on first use (see `handoff`).
pub fn reserve_pending(fd: c_int) {
    if let Some(i) = index(fd) {
        CLOEXEC[i].store(false, Ordering::Relaxed);
        OURS[i].store(true, Ordering::Release);
        crate::stdio::std_bound(fd);
    }
}

/// Let go of the file open behind `fd`, which stays ours, pending
/// (`handoff::park_all` recorded how to open it again).
pub fn park(fd: c_int) {
    if let Some(i) = index(fd)
        && SLOTS[i]
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .is_some()
    {
        OPEN.fetch_sub(1, Ordering::AcqRel);
    }
}

/// How many descriptors of ours have a file open behind them (handed over
/// ones not yet opened hold nothing of the pool).
pub fn open_count() -> usize {
    OPEN.load(Ordering::Acquire)
}

/// Whether `fd` is ours.
pub fn is_ours(fd: c_int) -> bool {
    index(fd).is_some_and(|i| OURS[i].load(Ordering::Acquire))
}

/// Make `fd` (a kernel descriptor this library reserved) serve `open`.
pub fn install(fd: c_int, open: Arc<Open>, cloexec: bool) {
    if let Some(i) = index(fd) {
        let before = SLOTS[i]
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .replace(open);
        if before.is_none() {
            OPEN.fetch_add(1, Ordering::AcqRel);
        }
        CLOEXEC[i].store(cloexec, Ordering::Relaxed);
        OURS[i].store(true, Ordering::Release);
        crate::stdio::std_bound(fd);
    }
}

/// Forget `fd` (before its kernel descriptor is closed or replaced).
pub fn forget(fd: c_int) -> Option<Arc<Open>> {
    let i = index(fd)?;
    if !OURS[i].load(Ordering::Acquire) {
        return None;
    }
    crate::stdio::std_unbound(fd);
    if !OURS[i].swap(false, Ordering::AcqRel) {
        return None;
    }
    crate::handoff::forget_pending(fd);
    let open = SLOTS[i].write().unwrap_or_else(|e| e.into_inner()).take();
    if open.is_some() {
        OPEN.fetch_sub(1, Ordering::AcqRel);
    }
    open
}

/// The descriptors of ours numbered `first` to `last` (both included).
pub fn ours_in(first: u32, last: u32) -> impl Iterator<Item = c_int> {
    let end = (last as usize).min(MAX_FDS - 1);
    (first as usize..=end)
        .filter(|&i| OURS[i].load(Ordering::Acquire))
        .map(|i| i as c_int)
}

/// The program's `FD_CLOEXEC` of `fd`.
pub fn cloexec(fd: c_int) -> bool {
    index(fd).is_some_and(|i| CLOEXEC[i].load(Ordering::Relaxed))
}

/// Set the program's `FD_CLOEXEC` of `fd`.
pub fn set_cloexec(fd: c_int, on: bool) {
    if let Some(i) = index(fd) {
        CLOEXEC[i].store(on, Ordering::Relaxed);
    }
}

/// A fresh kernel descriptor to stand for a manyfs one (`min`: the
/// lowest number it may have, as `F_DUPFD` asks).
pub fn reserve(min: c_int) -> Result<c_int, c_int> {
    let fd = if min > 0 {
        let base = reserve(0)?;
        // SAFETY: F_DUPFD_CLOEXEC on a descriptor this function opened.
        let fd =
            unsafe { crate::real::fcntl64()(base, libc::F_DUPFD_CLOEXEC, min as libc::c_ulong) };
        // SAFETY: closing the descriptor opened above.
        unsafe { crate::real::close()(base) };
        fd
    } else {
        // SAFETY: a NUL-terminated path.
        unsafe { crate::real::open()(c"/dev/null".as_ptr(), libc::O_PATH | libc::O_CLOEXEC, 0) }
    };
    if fd < 0 {
        return Err(crate::errno());
    }
    if index(fd).is_none() {
        // SAFETY: closing the descriptor just opened.
        unsafe { crate::real::close()(fd) };
        return Err(libc::EMFILE);
    }
    Ok(fd)
}
