//! File offsets shared between the processes of a run.
//!
//! On a kernel file system the offset belongs to the open file
//! description, which a fork and an exec share: after
//! `exec 3>log; cmd >&3; echo x >&3` the shell's `echo` writes after what
//! `cmd` wrote. Here a description lives in one process image's memory.
//! When one is parked at a fork or handed over by an exec (`handoff`), its
//! offset moves into a *cell*: a word of a shared-memory file
//! (`memfd_create`) that every process of the run maps, created by the
//! first process that needs one and handed on by fork (the mapping is
//! shared) and exec (its descriptor number in `MANYFS_RUN_OFFSETS`). Every
//! descriptor opened again for that description uses the same cell, in
//! whichever process.
//!
//! Cells are never reused (a run parks few descriptions); once the
//! region's [`CELLS`] are taken, further descriptions keep offsets of
//! their own per image (said once).

use libc::c_int;
use std::sync::Mutex;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

/// Environment: the descriptor of the offsets region, handed on by exec.
pub const ENV_OFFSETS: &str = "MANYFS_RUN_OFFSETS";

/// Cells in the region; cell 0 counts the cells taken.
const CELLS: usize = 8192;
const REGION_BYTES: usize = CELLS * 8;

/// The mapped region (null until made or inherited) and its descriptor.
static REGION: AtomicPtr<AtomicU64> = AtomicPtr::new(std::ptr::null_mut());
static REGION_FD: Mutex<Option<c_int>> = Mutex::new(None);

/// Map the region behind `fd` (the library's own descriptor).
fn map(fd: c_int) -> Option<*mut AtomicU64> {
    // SAFETY: a fresh shared mapping of a descriptor the library holds;
    // the kernel checks the arguments.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            REGION_BYTES,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    (p != libc::MAP_FAILED).then_some(p.cast())
}

/// The region, made on first use.
fn region() -> Option<&'static [AtomicU64]> {
    let mut p = REGION.load(Ordering::Acquire);
    if p.is_null() {
        let mut fd_slot = REGION_FD.lock().unwrap_or_else(|e| e.into_inner());
        p = REGION.load(Ordering::Acquire);
        if p.is_null() {
            // SAFETY: a constant NUL-terminated name; valid flags.
            let fd = unsafe { libc::memfd_create(c"manyfs-offsets".as_ptr(), libc::MFD_CLOEXEC) };
            if fd < 0 {
                return None;
            }
            let fd = crate::own::adopt(fd);
            // SAFETY: the descriptor just made.
            let grown = unsafe { libc::ftruncate(fd, REGION_BYTES as libc::off_t) } == 0;
            let Some(mapped) = grown.then(|| map(fd)).flatten() else {
                crate::own::close_own(fd);
                return None;
            };
            *fd_slot = Some(fd);
            REGION.store(mapped, Ordering::Release);
            p = mapped;
        }
    }
    // SAFETY: `p` maps `REGION_BYTES` of shared memory for the life of
    // the process (never unmapped), read and written only as atomics.
    Some(unsafe { std::slice::from_raw_parts(p, CELLS) })
}

/// A new cell holding `value`; `None` when none is left (said once) or the
/// region cannot be made.
pub(crate) fn alloc(value: u64) -> Option<u32> {
    let cells = region()?;
    let i = cells[0].fetch_add(1, Ordering::AcqRel) + 1;
    if i as usize >= CELLS {
        static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        if !SAID.swap(true, Ordering::Relaxed) {
            crate::state::say(
                "no more shared file offsets: later descriptors handed between processes keep offsets of their own",
            );
        }
        return None;
    }
    cells[i as usize].store(value, Ordering::Release);
    Some(i as u32)
}

/// Cell `i` (from [`alloc`], here or in the process that handed it over).
pub(crate) fn cell(i: u32) -> Option<&'static AtomicU64> {
    if i == 0 || i as usize >= CELLS || REGION.load(Ordering::Acquire).is_null() {
        return None;
    }
    region().map(|cells| &cells[i as usize])
}

/// The region's descriptor for an exec to keep open and name in the new
/// program's environment (`None` if none was made).
pub(crate) fn region_fd() -> Option<c_int> {
    *REGION_FD.lock().unwrap_or_else(|e| e.into_inner())
}

/// The region an exec handed over at `fd`: mapped, and kept as the
/// library's own (close-on-exec again).
pub(crate) fn adopt_region(fd: c_int) {
    // SAFETY: F_SETFD on the inherited descriptor; the kernel checks it.
    if unsafe { crate::real::fcntl64()(fd, libc::F_SETFD, libc::FD_CLOEXEC as libc::c_ulong) } != 0
    {
        return;
    }
    let fd = crate::own::adopt(fd);
    if let Some(p) = map(fd) {
        *REGION_FD.lock().unwrap_or_else(|e| e.into_inner()) = Some(fd);
        REGION.store(p, Ordering::Release);
    } else {
        crate::own::close_own(fd);
    }
}
