//! The kernel descriptors the library holds for itself: the pool's files
//! the mount opened (whose `flock` says who owns the pool, and through
//! which a pool on a disk file system is written) and the shared-memory
//! copies of mapped files.
//!
//! A program knows nothing of them, yet may name their numbers: a daemon
//! closes every descriptor it did not open (`closefrom(3)`, a loop of
//! `close`), a shell redirects `exec 3>file`. Closing the pool's file would
//! drop the pool's lock, and the next `open` would take its number: writes
//! meant for the pool would land in that file. So the library's own
//! descriptors are moved to [`OWN_FLOOR`] or above when made, above the
//! numbers programs pick for themselves, and the program's `close`,
//! `close_range`, `closefrom`, `dup2` and `dup3` leave them alone: `close`
//! of one is `EBADF` (as if it were not open), `dup2`/`dup3` onto one is
//! `EBUSY` with a message, and a range closes around them.

use libc::{c_int, c_uint};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// The lowest number the library's own descriptors are moved to.
pub(crate) const OWN_FLOOR: c_int = 256;

/// Descriptors below this are tracked (the table's bound).
const TRACKED: usize = 1 << 16;

/// One bit per descriptor number: set while it is the library's own.
static OWN: [AtomicU64; TRACKED / 64] = [const { AtomicU64::new(0) }; TRACKED / 64];

thread_local! {
    /// Set on the thread that is mounting the pool: the kernel files it
    /// opens meanwhile are the mount's.
    static MOUNTING: Cell<bool> = const { Cell::new(false) };
}

fn bit(fd: c_int) -> Option<(&'static AtomicU64, u64)> {
    let i = usize::try_from(fd).ok().filter(|&i| i < TRACKED)?;
    Some((&OWN[i / 64], 1u64 << (i % 64)))
}

/// Whether `fd` is one of the library's own descriptors.
#[inline]
pub(crate) fn is_own(fd: c_int) -> bool {
    bit(fd).is_some_and(|(w, b)| w.load(Ordering::Relaxed) & b != 0)
}

/// Run `mount` with the kernel files this thread opens meanwhile taken as
/// the mount's own ([`opened`]).
pub(crate) fn mounting<T>(mount: impl FnOnce() -> T) -> T {
    struct Done;
    impl Drop for Done {
        fn drop(&mut self) {
            MOUNTING.with(|m| m.set(false));
        }
    }
    MOUNTING.with(|m| m.set(true));
    let _done = Done;
    mount()
}

/// Set while the mount is being closed (`state::release_if_idle`): its
/// own descriptors are then closed by whichever of its threads drops it
/// last, and those closes are the library's, not the program's.
static RELEASING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Run `close` (the mount being closed) with the library's own
/// descriptors' closes let through on every thread.
pub(crate) fn releasing<T>(close: impl FnOnce() -> T) -> T {
    RELEASING.store(true, Ordering::SeqCst);
    let r = close();
    RELEASING.store(false, Ordering::SeqCst);
    r
}

/// A kernel `open` returned `fd`: while this thread mounts the pool, the
/// descriptor is the mount's, moved to [`OWN_FLOOR`] or above
/// ([`adopt`]); otherwise it is the program's, unchanged.
pub(crate) fn opened(fd: c_int) -> c_int {
    if fd < 0 || !MOUNTING.with(Cell::get) {
        return fd;
    }
    adopt(fd)
}

/// Make `fd` (a descriptor the library just made for itself) one of its
/// own: moved to [`OWN_FLOOR`] or above, close-on-exec, and kept from the
/// program's close calls. Returns the number to use. Where it cannot be
/// moved (the descriptor limit is below the floor), it stays where it is,
/// still kept.
pub(crate) fn adopt(fd: c_int) -> c_int {
    // SAFETY: F_DUPFD_CLOEXEC of a descriptor the caller holds.
    let high = unsafe { crate::real::fcntl64()(fd, libc::F_DUPFD_CLOEXEC, OWN_FLOOR as _) };
    let kept = if high >= 0 {
        // SAFETY: the caller's descriptor, replaced by `high`.
        unsafe { crate::real::close()(fd) };
        high
    } else {
        fd
    };
    if let Some((w, b)) = bit(kept) {
        w.fetch_or(b, Ordering::Relaxed);
    }
    kept
}

/// Close one of the library's own descriptors (the library's own close,
/// not the program's).
pub(crate) fn close_own(fd: c_int) {
    if let Some((w, b)) = bit(fd) {
        w.fetch_and(!b, Ordering::Relaxed);
    }
    // SAFETY: the library's own descriptor, closed once by its owner.
    unsafe { crate::real::close()(fd) };
}

/// The program's `close` of `fd`: `None` when `fd` is not the library's
/// own (close it as usual); `Some(EBADF)` when it is, except while this
/// thread mounts the pool (the mount closing a file it opened).
pub(crate) fn refuse_close(fd: c_int) -> Option<c_int> {
    if !is_own(fd) {
        return None;
    }
    if MOUNTING.with(Cell::get) || RELEASING.load(Ordering::SeqCst) {
        if let Some((w, b)) = bit(fd) {
            w.fetch_and(!b, Ordering::Relaxed);
        }
        return None;
    }
    Some(libc::EBADF)
}

/// The runs of `first..=last` that hold none of the library's own
/// descriptors, in order: what a program's `close_range` may close.
pub(crate) fn runs_without_own(first: c_uint, last: c_uint) -> Vec<(c_uint, c_uint)> {
    let mut runs = Vec::new();
    let mut start = first;
    let tracked_last = last.min(TRACKED as c_uint - 1);
    if first <= tracked_last {
        // A word (64 numbers) at a time: most hold none of ours.
        let words = (first as usize / 64)..=(tracked_last as usize / 64);
        for (w, word) in OWN
            .iter()
            .enumerate()
            .take(*words.end() + 1)
            .skip(*words.start())
        {
            let mut bits = word.load(Ordering::Relaxed);
            while bits != 0 {
                let fd = (w * 64) as c_uint + bits.trailing_zeros();
                bits &= bits - 1;
                if fd < first || fd > tracked_last {
                    continue;
                }
                if fd > start {
                    runs.push((start, fd - 1));
                }
                start = fd + 1;
            }
        }
    }
    if start <= last {
        runs.push((start, last));
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(fd: c_int) {
        let (w, b) = bit(fd).unwrap();
        w.fetch_or(b, Ordering::Relaxed);
    }

    fn unmark(fd: c_int) {
        let (w, b) = bit(fd).unwrap();
        w.fetch_and(!b, Ordering::Relaxed);
    }

    #[test]
    fn ranges_close_around_the_library_descriptors() {
        // Numbers no other test marks.
        mark(60_000);
        mark(60_002);
        assert_eq!(
            runs_without_own(59_990, 60_010),
            vec![(59_990, 59_999), (60_001, 60_001), (60_003, 60_010)]
        );
        assert_eq!(runs_without_own(60_000, 60_000), vec![]);
        assert_eq!(
            runs_without_own(60_003, c_uint::MAX),
            vec![(60_003, c_uint::MAX)]
        );
        assert_eq!(runs_without_own(5, 9), vec![(5, 9)]);
        unmark(60_000);
        unmark(60_002);
        assert!(!is_own(60_000) && !is_own(-1) && !is_own(1 << 20));
    }
}
