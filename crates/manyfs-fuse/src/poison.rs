//! What the mount does after a request handler panicked: it shuts down.
//!
//! A panic in a handler is a bug in the library or the adapter, and it may
//! have left the DRAM state (indexes, allocator, directory maps) half
//! updated. The pool on media is the source of truth and is always in a
//! state that recovery accepts (it is built to survive a crash at any
//! store), so the safe course is the one XFS takes on a forced shutdown:
//!
//! * the panicking request answers `EIO`;
//! * the library is told to fail ([`manyfs::Fs::fail`]): no later store or
//!   sync reaches the pool;
//! * every later request answers `EIO`, reads included — a read walks the
//!   same DRAM index that may be half updated, and could return another
//!   file's bytes or stale data; no answer is better than a wrong one, and
//!   the cure (unmount and mount again) is cheap. Only `release`,
//!   `releasedir`, `flush` and `forget`-like bookkeeping still succeed, so
//!   programs can close their files and the mount can be unmounted;
//! * one line naming the failed operation is logged with `tracing::error`
//!   and, when no subscriber shows errors, printed to stderr;
//! * unmounting reports the failure (the session ends with an error), and
//!   the next mount's recovery rebuilds everything from the media.

use std::sync::OnceLock;

use fuser::{
    Errno, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr,
};

/// Whether (and why) the mount was shut down.
#[derive(Debug, Default)]
pub struct Poison {
    reason: OnceLock<String>,
}

impl Poison {
    /// Why the mount was shut down, if it was.
    pub fn reason(&self) -> Option<&str> {
        self.reason.get().map(String::as_str)
    }

    /// Shut the mount down (the first reason is kept). Returns whether
    /// this call did it.
    pub fn set(&self, reason: String) -> bool {
        self.reason.set(reason).is_ok()
    }
}

/// The requests still served on a shut-down mount: they only drop the
/// adapter's own bookkeeping, so that programs can close their files and
/// the file system can be unmounted.
pub fn served_when_poisoned(op: &str) -> bool {
    matches!(op, "release" | "releasedir" | "flush")
}

/// The message logged (and reported at unmount) when `op` panicked.
pub fn message(op: &str, panic: &str) -> String {
    format!(
        "FUSE handler `{op}` panicked ({panic}); the mount is shut down: every later \
         request answers EIO; unmount it, and the next mount recovers the pool from media"
    )
}

/// Log a shutdown: `tracing::error`, and stderr when no subscriber would
/// show it (a daemon without `-o debug`, an embedding program).
pub fn report(msg: &str) {
    tracing::error!("{msg}");
    if !tracing::enabled!(tracing::Level::ERROR) {
        eprintln!("manyfs: {msg}");
    }
}

/// Something that can be shut down when a handler of it panics.
pub trait ShutDown {
    /// Shut down because the handler of `op` panicked with `panic`.
    /// Idempotent: only the first call acts.
    fn shut_down(&self, op: &str, panic: &str);
}

thread_local! {
    /// The handler this thread is running: its operation and the adapter.
    static SERVING: std::cell::Cell<Option<(&'static str, *const (dyn ShutDown + 'static))>> =
        const { std::cell::Cell::new(None) };
}

static HOOK: std::sync::Once = std::sync::Once::new();

/// Install (once per process) a panic hook that shuts the adapter down at
/// the moment one of its handlers panics, before unwinding drops the
/// request's reply and so sends its `EIO`: no request that arrives after
/// that answer can still see the half-updated state. The previous hook
/// runs after it (if a program replaces the hook later, the shutdown still
/// happens, just after the unwinding, in [`crate::ManyFuse`]'s catch).
pub fn install_hook() {
    HOOK.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if let Some((op, target)) = SERVING.get() {
                // SAFETY: SERVING holds a pointer only while `serving`'s
                // caller (the adapter's `serve`, which borrows the adapter
                // for the whole call) runs the handler on this thread; a
                // panic hook runs on the panicking thread before unwinding,
                // so the adapter is alive and borrowed here.
                let target = unsafe { &*target };
                target.shut_down(op, panic_text(info.payload()));
            }
            prev(info);
        }));
    });
}

/// Run `f` as the handler of `op` of `target` (for the panic hook).
pub fn serving<T>(op: &'static str, target: &(dyn ShutDown + 'static), f: impl FnOnce() -> T) -> T {
    struct Clear;
    impl Drop for Clear {
        fn drop(&mut self) {
            SERVING.set(None);
        }
    }
    SERVING.set(Some((op, target as *const _)));
    let _clear = Clear;
    f()
}

/// The text of a panic payload.
pub fn panic_text(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

/// Test builds only (`test-probes`): creating a file of this name panics
/// inside the `create` handler, to test the shutdown.
#[cfg(feature = "test-probes")]
pub const TEST_PANIC_NAME: &str = ".manyfs-test-panic";

/// Test builds only: panic when `name` is [`TEST_PANIC_NAME`].
#[cfg(feature = "test-probes")]
pub fn test_panic_probe(name: &std::ffi::OsStr) {
    if name == TEST_PANIC_NAME {
        panic!("test probe: create of {TEST_PANIC_NAME}");
    }
}

/// A FUSE reply that can carry an error.
pub trait ErrorReply {
    /// Answer with `e`.
    fn error(self, e: Errno);
}

macro_rules! error_reply {
    ($($t:ty),*) => {$(
        impl ErrorReply for $t {
            fn error(self, e: Errno) {
                <$t>::error(self, e)
            }
        }
    )*};
}

error_reply!(
    ReplyAttr,
    ReplyCreate,
    ReplyData,
    ReplyDirectory,
    ReplyDirectoryPlus,
    ReplyEmpty,
    ReplyEntry,
    ReplyOpen,
    ReplyStatfs,
    ReplyWrite,
    ReplyXattr
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_reason_is_kept_and_only_cleanup_is_served() {
        let p = Poison::default();
        assert!(p.reason().is_none());
        assert!(p.set(message("create", "boom")));
        assert!(!p.set(message("write", "again")));
        assert!(p.reason().unwrap().contains("`create`"));
        assert!(served_when_poisoned("release"));
        assert!(!served_when_poisoned("read"));
        assert!(!served_when_poisoned("write"));
    }
}
