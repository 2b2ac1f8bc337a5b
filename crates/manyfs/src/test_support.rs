//! Helpers shared by the library's unit tests and (through `#[path]`) the
//! integration tests of the workspace's crates.
//!
//! Skipping a test that cannot run here is never silent. A test that
//! cannot run calls [`skip`] and returns; that prints `SKIPPED: <test>:
//! <reason>` to stderr. Under `CI=true` (or `CI=1`) a skip is a failure
//! instead, unless its reason is a property of the machine that CI cannot
//! change ([`Lack::Machine`]: a kernel without io_uring or without FUSE
//! over io_uring, a single NUMA node, a single CPU). What CI's own setup
//! provides ([`Lack::Setup`]: an installed tool, a device node, root, CPUs
//! in the process's mask, an environment variable left unset) may not be
//! missing there: a CI run without it must not pass without running the
//! test.
#![allow(dead_code)] // each includer uses a part

/// What a test that cannot run here lacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lack {
    /// A property of the machine that CI cannot change: skipped, in CI too.
    Machine,
    /// Something CI's setup provides: under `CI=true` the test fails.
    Setup,
}

/// Whether the tests run in CI (`CI=true` or `CI=1`, as GitHub Actions and
/// most CI systems set it).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

/// Skip `test`, which cannot run here for want of `lack` (`reason` says
/// what): prints `SKIPPED: <test>: <reason>` to stderr, or panics under
/// `CI=true` when what is missing is CI's own setup. The caller returns.
#[track_caller]
pub fn skip(test: &str, lack: Lack, reason: impl std::fmt::Display) {
    if lack == Lack::Setup && in_ci() {
        panic!("{test}: {reason} (CI=true: may not be skipped)");
    }
    eprintln!("SKIPPED: {test}: {reason}");
}

/// Run `body` on its own thread and return its result, or fail the test with
/// "no progress after N s: `what`" when it has not finished within `limit`:
/// a deadlock or lost wake-up then fails with a message instead of hanging
/// the test run. A panic in `body` is passed on unchanged.
pub fn within<T: Send + 'static>(
    limit: std::time::Duration,
    what: &str,
    body: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    let worker = std::thread::spawn(move || {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body));
        let _ = tx.send(r);
    });
    match rx.recv_timeout(limit) {
        Ok(Ok(v)) => {
            let _ = worker.join();
            v
        }
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(_) => panic!("no progress after {} s: {what}", limit.as_secs()),
    }
}
