//! The addresses of the C handles this library handed out (directory
//! streams, `fts` streams): a call given a handle tells the library's
//! own from libc's by looking it up here.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A set of handle addresses.
pub(crate) struct Registry {
    addrs: Mutex<Vec<usize>>,
    /// How many: 0 lets libc's handles skip the lock.
    count: AtomicUsize,
}

impl Registry {
    /// An empty registry.
    pub(crate) const fn new() -> Registry {
        Registry {
            addrs: Mutex::new(Vec::new()),
            count: AtomicUsize::new(0),
        }
    }

    /// Whether `p` is a handle of the library's.
    pub(crate) fn contains<T>(&self, p: *mut T) -> bool {
        if self.count.load(Ordering::Acquire) == 0 || p.is_null() {
            return false;
        }
        let addrs = self.addrs.lock().unwrap_or_else(|e| e.into_inner());
        addrs.contains(&(p as usize))
    }

    /// Record a handle just made.
    pub(crate) fn add<T>(&self, p: *mut T) {
        let mut addrs = self.addrs.lock().unwrap_or_else(|e| e.into_inner());
        addrs.push(p as usize);
        self.count.fetch_add(1, Ordering::Release);
    }

    /// Forget a handle about to be freed.
    pub(crate) fn remove<T>(&self, p: *mut T) {
        let mut addrs = self.addrs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = addrs.iter().position(|&a| a == p as usize) {
            addrs.swap_remove(i);
            self.count.fetch_sub(1, Ordering::Release);
        }
    }
}
