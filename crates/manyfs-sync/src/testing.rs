//! Helpers for tests and benchmarks of concurrent code: a deadline for code
//! that may hang, a two-thread timing for benchmarks, and
//! (under the `shuttle` feature) the exploration every model check runs.
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

/// How long `iters` calls of `op` take on the calling thread while a
/// second thread calls `contend` over and over (it stops when they are
/// done): the two-thread benchmark of a lock whose `op` and `contend` take
/// and release it (the same range, or disjoint ones).
pub fn timed_with_contender(
    iters: u64,
    mut op: impl FnMut(),
    contend: impl Fn() + Sync,
) -> std::time::Duration {
    use std::sync::atomic::{AtomicBool, Ordering};
    /// Stops the second thread when dropped, also if `op` panics (the
    /// scope would otherwise wait for it forever).
    struct Stop<'a>(&'a AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                contend();
            }
        });
        let _stop = Stop(&stop);
        let start = std::time::Instant::now();
        for _ in 0..iters {
            op();
        }
        start.elapsed()
    })
}

/// Schedules each model runs under [`explore`], per scheduler.
#[cfg(feature = "shuttle")]
pub const ITERATIONS: usize = 3000;

/// Wall-clock bound of one model's exploration. A deadlock or livelock
/// *inside* shuttle's world is reported by shuttle itself (no runnable
/// thread, or its step limit); this catches the hangs it cannot see: a
/// blocking call on something shuttle does not control (a std or
/// parking_lot lock, a real sleep or I/O) stops every schedule for good.
#[cfg(feature = "shuttle")]
pub const WALL_CLOCK_LIMIT: std::time::Duration = std::time::Duration::from_secs(600);

/// Model-check `f`: run it under [`ITERATIONS`] random and [`ITERATIONS`]
/// PCT (depth 3) schedules, failing if any schedule panics, deadlocks or
/// exceeds [`WALL_CLOCK_LIMIT`] in all.
#[cfg(feature = "shuttle")]
pub fn explore(f: impl Fn() + Send + Sync + 'static) {
    let test = std::thread::current()
        .name()
        .unwrap_or("shuttle model")
        .to_string();
    let what = format!("{test}: {ITERATIONS} random and {ITERATIONS} PCT schedules");
    within(WALL_CLOCK_LIMIT, &what, move || {
        let f = std::sync::Arc::new(f);
        let g = f.clone();
        shuttle::check_random(move || f(), ITERATIONS);
        shuttle::check_pct(move || g(), ITERATIONS, 3);
    });
}

/// Whether shuttle finds a schedule under which `f` panics, within
/// [`ITERATIONS`] random schedules: the check that a model catches a
/// planted bug.
#[cfg(feature = "shuttle")]
pub fn finds_a_failure(what: &str, f: impl Fn() + Send + Sync + 'static) -> bool {
    within(WALL_CLOCK_LIMIT, what, move || {
        let check = std::panic::AssertUnwindSafe(move || shuttle::check_random(f, ITERATIONS));
        std::panic::catch_unwind(check).is_err()
    })
}

#[cfg(all(test, not(feature = "shuttle")))]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn within_returns_the_result() {
        assert_eq!(within(Duration::from_secs(60), "add", || 2 + 2), 4);
    }

    #[test]
    fn timed_with_contender_runs_op_on_two_threads() {
        let calls = std::sync::atomic::AtomicU64::new(0);
        let threads = std::sync::Mutex::new(std::collections::HashSet::new());
        let op = || {
            calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            threads.lock().unwrap().insert(std::thread::current().id());
            std::thread::yield_now();
        };
        timed_with_contender(10_000, op, op);
        assert!(calls.load(std::sync::atomic::Ordering::Relaxed) >= 10_000);
        assert_eq!(threads.lock().unwrap().len(), 2, "the contender ran");
    }

    #[test]
    fn within_fails_a_body_that_does_not_finish() {
        let r = std::panic::catch_unwind(|| {
            within(Duration::from_millis(50), "a sleep", || {
                std::thread::sleep(Duration::from_secs(2))
            })
        });
        let msg = r.unwrap_err();
        let msg = msg.downcast_ref::<String>().expect("a formatted message");
        assert_eq!(msg, "no progress after 0 s: a sleep");
    }
}
