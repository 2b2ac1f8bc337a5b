//! When the FUSE serving threads read, park, wake one another, are made
//! and retire: the coordination of the vendored fuser's worker pool
//! (`vendor/fuser/src/workers.rs`, which does the I/O: reading
//! `/dev/fuse`, dispatching, replying, starting threads and joining them).
//!
//! The kernel hands each request to the reader that has waited longest in
//! `read(2)` on `/dev/fuse` (its wait queue is FIFO for exclusive waiters),
//! so a fixed pool of N readers would serve a lone caller with a different,
//! cold worker on every request. This gate keeps at most [`MAX_READERS`]
//! workers reading:
//!
//! - the pool starts with one worker ([`WorkerGate::start_first`]);
//! - each worker counts itself in the gate's readers while in `read(2)` or
//!   on its way there; the one whose request leaves nobody counted
//!   ([`Worker::took_request`]) wakes a parked worker, the one parked last
//!   (its stack and buffer are the warmest), or has a new one made while
//!   fewer than `max` are alive ([`Took`]);
//! - a worker counts itself as reading again just before it sends its
//!   reply ([`Worker::before_reply`]): the reply wakes the caller, whose
//!   next request would otherwise find nobody counted and wake another
//!   worker;
//! - a worker done with its request ([`Worker::after_request`]) reads
//!   again unless [`MAX_READERS`] others are counted; then it parks, and a
//!   worker parked for `idle_retire` retires (its thread ends);
//! - when the session ends ([`WorkerGate::end`], called by the worker that
//!   saw the end) every parked worker wakes and retires.
//!
//! A lone caller is so served by the same one or two workers, and a burst
//! of callers grows the pool one worker per busy moment, as libfuse's
//! `fuse_loop_mt` does.
//!
//! The gate is built on this crate's primitives, so under the `shuttle`
//! feature its protocol runs under the model checker: the crate's
//! `shuttle_models` test drives it with a simulated `/dev/fuse` (FIFO
//! request queue, longest waiter first) and checks that every request is
//! served, that at most [`MAX_READERS`] workers are in `read(2)` and at
//! most `max` alive, and that every worker ends with the session.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use manyfs_sync::worker_gate::{Took, Worker, WorkerGate};
//!
//! let gate = Arc::new(WorkerGate::new(4, Duration::from_secs(10)));
//! gate.start_first();
//! // On the first worker's thread:
//! let me = Worker::new(gate.clone());
//! // ... read(2) returned a request: nobody else is reading, so the
//! // gate asks for a second worker (already counted as reading).
//! assert_eq!(me.took_request(), Took::Spawn);
//! assert!(me.took_the_last_read());
//! me.before_reply(); // counts itself back (one reader < MAX_READERS)
//! // ... reply sent.
//! assert!(me.after_request(), "it reads again");
//! assert_eq!((gate.readers(), gate.alive()), (2, 2));
//! ```

use std::cell::Cell;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use crate::thread::{self, Thread};
use crate::{AtomicBool, AtomicUsize, Mutex, MutexGuard, Ordering};

/// Most workers kept in `read(2)` at once. One would do for a lone caller,
/// but then every request would first wake a parked worker to take the
/// reader's place; two let a worker go back to reading while the other
/// waits, at the price of alternating between two warm workers.
pub const MAX_READERS: usize = 2;

/// What the worker that took the last reader's request must do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Took {
    /// Nothing: others are counted as reading, or every worker is busy
    /// (the first one done reads again), or the session has ended.
    Nothing,
    /// A parked worker was woken to read (counted as a reader already).
    Woke,
    /// Start a new worker: it is counted as alive and as a reader already
    /// (its first read is its own). If it cannot be started, call
    /// [`WorkerGate::spawn_failed`].
    Spawn,
}

/// A parked worker: woken by setting `go` and unparking its thread.
struct Parked {
    go: Arc<AtomicBool>,
    thread: Thread,
}

/// What the workers share under the gate's lock, taken only when a worker
/// parks, is woken, is made or retires (never per request when the load
/// is even).
struct GateState {
    /// Workers alive (reading, busy or parked), and those being started.
    alive: usize,
    /// Parked workers, last parked on top.
    parked: Vec<Parked>,
}

/// The coordination of a session's serving threads (see the module docs).
pub struct WorkerGate {
    state: Mutex<GateState>,
    /// Workers in `read(2)` or on their way there (woken or made for it,
    /// or about to send their reply). Only ever raised from below
    /// [`MAX_READERS`], so it never exceeds it.
    readers: AtomicUsize,
    /// Set once the session has ended: parked workers leave.
    ended: AtomicBool,
    max: usize,
    idle_retire: Duration,
}

impl WorkerGate {
    /// A gate for at most `max` workers (at least one), of which one parked
    /// for `idle_retire` retires (`Duration::MAX`: never).
    pub fn new(max: usize, idle_retire: Duration) -> Self {
        WorkerGate {
            state: Mutex::new(GateState {
                alive: 0,
                parked: Vec::new(),
            }),
            readers: AtomicUsize::new(0),
            ended: AtomicBool::new(false),
            max: max.max(1),
            idle_retire,
        }
    }

    /// Count the session's first worker, alive and reading; the caller
    /// then starts it (or calls [`spawn_failed`](Self::spawn_failed)).
    pub fn start_first(&self) {
        let mut st = self.lock();
        st.alive += 1;
        self.readers.fetch_add(1, Ordering::AcqRel);
    }

    /// A worker the gate asked for ([`Took::Spawn`]) could not be started:
    /// uncount it. The worker that asked reads again once done (readers
    /// are below [`MAX_READERS`] again).
    pub fn spawn_failed(&self) {
        let mut st = self.lock();
        st.alive -= 1;
        self.readers.fetch_sub(1, Ordering::AcqRel);
    }

    /// The session is over: wake every parked worker so that it retires.
    pub fn end(&self) {
        self.ended.store(true, Ordering::Release);
        let st = self.lock();
        for p in &st.parked {
            p.thread.unpark();
        }
    }

    /// Whether [`end`](Self::end) was called.
    pub fn ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }

    /// Workers counted as reading (a snapshot).
    pub fn readers(&self) -> usize {
        self.readers.load(Ordering::Acquire)
    }

    /// Workers alive (a snapshot).
    pub fn alive(&self) -> usize {
        self.lock().alive
    }

    /// Workers parked (a snapshot).
    pub fn parked(&self) -> usize {
        self.lock().parked.len()
    }

    fn lock(&self) -> MutexGuard<'_, GateState> {
        // Nothing under the lock panics but an arithmetic overflow, which
        // is a bug the state does not outlive in any useful way.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Count one more reader if fewer than [`MAX_READERS`] are counted.
    fn count_reader_below_max(&self) -> bool {
        self.readers
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |r| {
                (r < MAX_READERS).then_some(r + 1)
            })
            .is_ok()
    }

    /// Nobody is counted as reading: put a parked worker, or a new one, in
    /// the last reader's place.
    fn add_reader(&self) -> Took {
        let mut st = self.lock();
        if self.ended() || (st.parked.is_empty() && st.alive >= self.max) {
            // Every worker is busy: the first one done reads again.
            return Took::Nothing;
        }
        // From 0 only: a worker that counted itself back meanwhile (before
        // its reply) is on its way to reading.
        if self
            .readers
            .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Took::Nothing;
        }
        if let Some(p) = st.parked.pop() {
            p.go.store(true, Ordering::Release);
            p.thread.unpark();
            return Took::Woke;
        }
        st.alive += 1;
        Took::Spawn
    }
}

/// One worker's side of the gate, made on its own thread (it parks that
/// thread). Not `Sync`: it remembers whether the worker counted itself
/// back as a reader before its reply.
pub struct Worker {
    gate: Arc<WorkerGate>,
    counted_back: Cell<bool>,
    took_last: Cell<bool>,
}

impl Worker {
    /// The calling thread's worker of `gate` (counted by the gate before
    /// its thread was started: [`WorkerGate::start_first`], [`Took::Spawn`]).
    pub fn new(gate: Arc<WorkerGate>) -> Self {
        Worker {
            gate,
            counted_back: Cell::new(false),
            took_last: Cell::new(false),
        }
    }

    /// The gate.
    pub fn gate(&self) -> &Arc<WorkerGate> {
        &self.gate
    }

    /// `read(2)` returned a request: the worker is no longer reading. If
    /// it was the last reader, the gate wakes or asks for another.
    pub fn took_request(&self) -> Took {
        let last = self.gate.readers.fetch_sub(1, Ordering::AcqRel) == 1;
        self.took_last.set(last);
        if last {
            self.gate.add_reader()
        } else {
            Took::Nothing
        }
    }

    /// Whether this worker's latest request left nobody counted as
    /// reading: every other worker was busy or parked, so requests came
    /// faster than one at a time. (A lone caller's requests never do: the
    /// worker that replies counts itself back before the next can come.)
    pub fn took_the_last_read(&self) -> bool {
        self.took_last.get()
    }

    /// Called before anything is written to `/dev/fuse` for the request
    /// being served: the worker counts itself as reading again (if fewer
    /// than [`MAX_READERS`] are counted), since it will be once the reply
    /// is sent. Any further calls for the same request do nothing.
    pub fn before_reply(&self) {
        if !self.counted_back.get() && self.gate.count_reader_below_max() {
            self.counted_back.set(true);
        }
    }

    /// The worker is done with its request: true if it is to read again,
    /// false if it is to end (retired after `idle_retire` parked, or the
    /// session ended). It may park in between, until woken to read.
    pub fn after_request(&self) -> bool {
        if self.counted_back.replace(false) {
            return true;
        }
        let gate = &*self.gate;
        let go = {
            let mut st = gate.lock();
            if gate.ended() {
                st.alive -= 1;
                return false;
            }
            if gate.count_reader_below_max() {
                return true;
            }
            let go = Arc::new(AtomicBool::new(false));
            st.parked.push(Parked {
                go: go.clone(),
                thread: thread::current(),
            });
            go
        };
        let deadline = Instant::now().checked_add(gate.idle_retire);
        loop {
            if go.load(Ordering::Acquire) {
                // The waker counted this worker as a reader already.
                return true;
            }
            let now = Instant::now();
            if gate.ended() || deadline.is_some_and(|d| now >= d) {
                let mut st = gate.lock();
                if go.load(Ordering::Acquire) {
                    return true;
                }
                st.parked.retain(|p| !Arc::ptr_eq(&p.go, &go));
                st.alive -= 1;
                return false;
            }
            match deadline {
                Some(d) => thread::park_timeout(d - now),
                None => thread::park(),
            }
        }
    }

    /// `read(2)` failed (the session is unmounted, or an error): the
    /// worker ends, and with it the session.
    pub fn read_failed(&self) {
        self.gate.readers.fetch_sub(1, Ordering::AcqRel);
        self.leave();
    }

    /// The worker ends the session after taking a request (the session's
    /// `DESTROY`, or a request it could not parse), replied or not.
    pub fn end_session(&self) {
        // A reply to it counted the worker back as a reader; it will not be.
        if self.counted_back.replace(false) {
            self.gate.readers.fetch_sub(1, Ordering::AcqRel);
        }
        self.leave();
    }

    fn leave(&self) {
        self.gate.lock().alive -= 1;
        self.gate.end();
    }
}

#[cfg(all(test, not(feature = "shuttle")))]
mod tests {
    use super::*;

    const LONG: Duration = Duration::from_secs(3600);

    #[test]
    fn the_last_reader_wakes_the_last_parked_worker() {
        let gate = Arc::new(WorkerGate::new(3, LONG));
        gate.start_first();
        let (parked_tx, parked_rx) = std::sync::mpsc::channel();
        // Two workers counted as reading: a third done with a request parks.
        gate.readers.store(MAX_READERS, Ordering::Release);
        gate.lock().alive = 2;
        let g = gate.clone();
        let t = std::thread::spawn(move || {
            let me = Worker::new(g);
            parked_tx.send(()).unwrap();
            me.after_request()
        });
        parked_rx.recv().unwrap();
        while gate.parked() == 0 {
            std::thread::yield_now();
        }
        let me = Worker::new(gate.clone());
        assert_eq!(me.took_request(), Took::Nothing, "one still reading");
        assert_eq!(me.took_request(), Took::Woke, "the last reader left");
        assert!(t.join().unwrap(), "the woken worker reads");
        assert_eq!((gate.readers(), gate.parked(), gate.alive()), (1, 0, 2));
    }

    #[test]
    fn a_parked_worker_retires_after_idle_retire_or_at_the_end() {
        for (idle, end) in [(Duration::ZERO, false), (LONG, true)] {
            let gate = Arc::new(WorkerGate::new(2, idle));
            gate.start_first();
            gate.readers.store(MAX_READERS, Ordering::Release);
            let g = gate.clone();
            let t = std::thread::spawn(move || Worker::new(g).after_request());
            if end {
                while gate.parked() == 0 {
                    std::thread::yield_now();
                }
                gate.end();
            }
            assert!(!t.join().unwrap(), "the parked worker retires");
            assert_eq!((gate.parked(), gate.alive()), (0, 0));
        }
    }

    #[test]
    fn spawns_up_to_max_then_the_first_done_reads_again() {
        let gate = Arc::new(WorkerGate::new(2, LONG));
        gate.start_first();
        let a = Worker::new(gate.clone());
        assert_eq!(a.took_request(), Took::Spawn);
        gate.spawn_failed();
        assert_eq!((gate.readers(), gate.alive()), (0, 1));
        assert!(a.after_request(), "nobody reading: it reads again");
        assert_eq!(a.took_request(), Took::Spawn, "asked again");
        let b = Worker::new(gate.clone());
        assert_eq!(b.took_request(), Took::Nothing, "two alive: the max");
        assert_eq!((gate.readers(), gate.alive()), (0, 2));
        assert!(a.after_request(), "nobody reading: it reads again");
        assert_eq!(gate.readers(), 1);
    }

    #[test]
    fn a_reply_counts_the_worker_back_once_and_an_ending_one_uncounts() {
        let gate = Arc::new(WorkerGate::new(1, LONG));
        gate.start_first();
        let me = Worker::new(gate.clone());
        assert_eq!(me.took_request(), Took::Nothing, "max 1: none to add");
        me.before_reply();
        me.before_reply();
        assert_eq!(gate.readers(), 1);
        me.end_session();
        assert_eq!((gate.readers(), gate.alive()), (0, 0));
        assert!(gate.ended());
        let other = Worker::new(gate.clone());
        gate.lock().alive += 1;
        assert!(!other.after_request(), "ended: it retires");
    }
}
