//! Surviving a pool file that shrinks under its mapping.
//!
//! A load or store to a page of a shared file mapping that lies past the
//! file's end raises `SIGBUS`, whose default action kills the process. That
//! happens when another process truncates a mounted pool (`truncate -s`,
//! a careless `cp` over it), or when a store into a hole of a file system
//! that has run out of space cannot allocate a page.
//!
//! Every pool mapping is registered here. The process-wide `SIGBUS` handler
//! looks the fault address up; for an address inside a pool mapping it maps
//! an anonymous zero page over the faulting page (`MAP_FIXED`), counts the
//! fault in the mapping's slot and returns, so the interrupted copy finishes
//! (reading zeros, or writing into a private page that is thrown away).
//! [`super::Media`] checks the count after every copy out of the mapping and
//! before every store, turning the fault into `EIO` and failing the media:
//! no later change reaches the pool, whose file is left for `fsck` and the
//! next mount's recovery. A `SIGBUS` at any other address goes to the
//! handler that was installed before (Rust's own stack-overflow handler, or
//! the default action, which kills the process as before).
//!
//! Only async-signal-safe work happens in the handler: atomic loads and
//! stores on a fixed static table, and the `mmap`/`sigaction` system calls
//! (thin wrappers of the kernel calls on Linux; no locks, no allocation).
//!
//! The handler is installed the first time a pool is mapped and stays
//! installed for the life of the process.

use std::sync::Once;
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};

/// How many pools one process can have mapped with protection at once;
/// a mapping beyond that works, unprotected (a shrink then kills the
/// process, as without this module).
const SLOTS: usize = 64;

const FREE: u8 = 0;
const CLAIMED: u8 = 1;
const LIVE: u8 = 2;

struct Slot {
    state: AtomicU8,
    base: AtomicUsize,
    len: AtomicUsize,
    faults: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Slot = Slot {
    state: AtomicU8::new(FREE),
    base: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    faults: AtomicU64::new(0),
};

static TABLE: [Slot; SLOTS] = [EMPTY; SLOTS];

/// The page size, read once before the handler is installed (`sysconf` is
/// not async-signal-safe).
static PAGE: AtomicUsize = AtomicUsize::new(4096);

/// The `SIGBUS` action that was in place before ours: its handler address
/// and flags (0 = default action).
static PREV_HANDLER: AtomicUsize = AtomicUsize::new(libc::SIG_DFL);
static PREV_FLAGS: AtomicUsize = AtomicUsize::new(0);

static INSTALL: Once = Once::new();
static INSTALLED: AtomicU8 = AtomicU8::new(0);

/// A pool mapping's entry in the fault table; removed on drop.
#[derive(Debug)]
pub struct Registration {
    slot: Option<usize>,
}

impl Registration {
    /// Register `[base, base+len)` (a pool mapping) and make sure the
    /// handler is installed. Without a free slot, or if the handler cannot
    /// be installed, the mapping is simply not protected.
    pub fn new(base: *mut u8, len: usize) -> Registration {
        install();
        if INSTALLED.load(Ordering::Acquire) == 0 {
            return Registration { slot: None };
        }
        for (i, s) in TABLE.iter().enumerate() {
            if s.state
                .compare_exchange(FREE, CLAIMED, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                s.base.store(base as usize, Ordering::Relaxed);
                s.len.store(len, Ordering::Relaxed);
                s.faults.store(0, Ordering::Relaxed);
                s.state.store(LIVE, Ordering::Release);
                return Registration { slot: Some(i) };
            }
        }
        Registration { slot: None }
    }

    /// Whether the mapping is protected (has a slot).
    #[cfg(test)]
    pub fn is_protected(&self) -> bool {
        self.slot.is_some()
    }

    /// How many `SIGBUS` faults the handler has absorbed in this mapping.
    #[inline]
    pub fn faults(&self) -> u64 {
        self.slot
            .map_or(0, |i| TABLE[i].faults.load(Ordering::Acquire))
    }

    /// Remove the entry (before the mapping is unmapped, so that the address
    /// range, once reused by someone else, is not treated as a pool's).
    pub fn unregister(&mut self) {
        if let Some(i) = self.slot.take() {
            let s = &TABLE[i];
            s.state.store(CLAIMED, Ordering::Release);
            s.base.store(0, Ordering::Relaxed);
            s.len.store(0, Ordering::Relaxed);
            s.state.store(FREE, Ordering::Release);
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.unregister();
    }
}

fn install() {
    INSTALL.call_once(|| {
        // SAFETY: sysconf has no preconditions.
        let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if p > 0 {
            PAGE.store(p as usize, Ordering::Relaxed);
        }
        // SAFETY: both structs are plain data, fully initialised by zeroing
        // (an empty mask, no flags) and then by the fields set below.
        let mut new: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: as above; `old` is filled in by the kernel.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        new.sa_sigaction = on_sigbus as *const () as usize;
        // SA_ONSTACK: run on the alternate stack where one is set up (Rust
        // sets one for its stack-overflow handler on the threads it starts).
        new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        // SAFETY: `new` is a valid action whose handler has the SA_SIGINFO
        // signature; `old` receives the previous action. sigemptyset only
        // writes the mask inside `new`.
        let rc = unsafe {
            libc::sigemptyset(&mut new.sa_mask);
            libc::sigaction(libc::SIGBUS, &new, &mut old)
        };
        if rc == 0 {
            PREV_HANDLER.store(old.sa_sigaction, Ordering::Relaxed);
            PREV_FLAGS.store(old.sa_flags as usize, Ordering::Relaxed);
            INSTALLED.store(1, Ordering::Release);
        }
    });
}

/// The slot whose mapping holds `addr`, if any.
fn slot_of(addr: usize) -> Option<&'static Slot> {
    TABLE.iter().find(|s| {
        if s.state.load(Ordering::Acquire) != LIVE {
            return false;
        }
        let base = s.base.load(Ordering::Relaxed);
        let len = s.len.load(Ordering::Relaxed);
        addr >= base && addr - base < len
    })
}

extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler;
    // si_addr is the faulting address for SIGBUS.
    let addr = unsafe { (*info).si_addr() } as usize;
    if let Some(slot) = slot_of(addr) {
        let page = PAGE.load(Ordering::Relaxed);
        let start = addr & !(page - 1);
        // SAFETY: `start` is a page inside a live pool mapping (checked
        // above; the mapping is unregistered before it is unmapped), so
        // MAP_FIXED replaces one page of our own mapping and nothing else.
        // mmap is a plain system call, safe to make in a signal handler.
        let p = unsafe {
            libc::mmap(
                start as *mut libc::c_void,
                page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if p != libc::MAP_FAILED {
            slot.faults.fetch_add(1, Ordering::AcqRel);
            // Returning re-runs the access, which now hits the zero page.
            return;
        }
    }
    chain(sig, info, ctx);
}

/// Hand a fault that is not ours to the action installed before.
fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let prev = PREV_HANDLER.load(Ordering::Relaxed);
    let flags = PREV_FLAGS.load(Ordering::Relaxed) as libc::c_int;
    if prev == libc::SIG_DFL || prev == libc::SIG_IGN {
        // Restore the default action and return: the access faults again
        // and the kernel kills the process with SIGBUS, as if we had never
        // been installed. (Ignoring a fault SIGBUS is not possible either.)
        // SAFETY: resetting a disposition with sigaction is
        // async-signal-safe; the struct is zeroed plain data.
        unsafe {
            let mut dfl: libc::sigaction = std::mem::zeroed();
            dfl.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(libc::SIGBUS, &dfl, std::ptr::null_mut());
        }
        return;
    }
    if flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the previous action was installed with SA_SIGINFO, so its
        // handler has this signature; we pass on the kernel's arguments.
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(prev) };
        f(sig, info, ctx);
    } else {
        // SAFETY: a plain (non-SA_SIGINFO) handler takes the signal number.
        let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(prev) };
        f(sig);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_find_only_registered_ranges() {
        let mut buf = vec![0u8; 8192];
        let base = buf.as_mut_ptr();
        let mut r = Registration::new(base, buf.len());
        assert!(r.is_protected(), "handler installed and a slot free");
        assert!(slot_of(base as usize).is_some());
        assert!(slot_of(base as usize + 8191).is_some());
        assert!(slot_of(base as usize + 8192).is_none());
        assert_eq!(r.faults(), 0);
        r.unregister();
        assert!(slot_of(base as usize).is_none());
        assert!(!r.is_protected());
    }
}
