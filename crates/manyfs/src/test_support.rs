//! Helpers shared by the library's unit tests and (through `#[path]`) its
//! integration tests.

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
