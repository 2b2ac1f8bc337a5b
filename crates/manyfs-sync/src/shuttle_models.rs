//! Model checking of the worker gate (`worker_gate`, the FUSE serving
//! threads' coordination) with shuttle: the crate is compiled with
//! `--features shuttle`, so the gate's atomics, lock and parking are
//! shuttle's and the real gate runs under thousands of randomised and PCT
//! schedules.
//!
//! The model's `/dev/fuse` is a FIFO queue of requests whose readers wait
//! in a FIFO too: a request goes to the reader that has waited longest, as
//! the kernel's exclusive wait queue does, and reads fail once the session
//! is unmounted. Callers issue requests one at a time and wait for each
//! reply (some requests, like `FORGET`, have none). The workers run the
//! same steps as fuser's `WorkerPool::work` around the gate.
//!
//! Checked: every request is served (a stall leaves the session waiting
//! for it with every thread blocked, which shuttle reports as a deadlock);
//! at most `MAX_READERS` workers are in `read(2)` at once and at most `max`
//! serve requests; the gate never counts more than `MAX_READERS` readers
//! or `max` workers; at the end every worker has ended (none left parked:
//! a lost wake-up is a deadlock) and the gate counts none.
//!
//! Shuttle does not model time: a parked worker's timeout never fires.
//! The models use an `idle_retire` of zero (a worker retires as soon as it
//! looks, racing the worker that would wake it) or of an hour (parked
//! workers leave only when woken or at the session's end).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use shuttle::sync::{Condvar, Mutex};
use shuttle::thread;

use crate::testing::{explore, finds_a_failure};
use crate::worker_gate::{MAX_READERS, Took, Worker, WorkerGate};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A request with a reply, which its caller waits for.
    Reply,
    /// A request without a reply (`FORGET`): its caller goes on at once.
    NoReply,
    /// The session's `DESTROY`: its worker replies and ends the session.
    Destroy,
    /// A request whose handler blocks until a `Release` has been served
    /// (a lock waiting for its holder's unlock), then replies.
    Wait,
    /// Unblocks the `Wait` handler, then replies.
    Release,
}

#[derive(Clone, Copy, Debug)]
struct Request {
    id: usize,
    kind: Kind,
}

/// The simulated `/dev/fuse`.
#[derive(Default)]
struct Kernel {
    queue: VecDeque<Request>,
    /// Readers blocked in `read(2)`, longest waiting first.
    waiting: VecDeque<usize>,
    /// Requests handed to a waiting reader, by its ticket.
    handed: HashMap<usize, Request>,
    next_ticket: usize,
    replies: HashSet<usize>,
    /// Requests a worker has taken.
    served: usize,
    /// Workers between taking a request and being done with it.
    serving: usize,
    unmounted: bool,
    released: bool,
}

#[derive(Clone, Copy)]
struct Setup {
    max: usize,
    idle_retire: Duration,
    callers: usize,
    requests_each: usize,
    /// Every other request of odd callers has no reply.
    no_reply: bool,
    /// The session ends with a `DESTROY` before the unmount.
    destroy: bool,
    /// How many of the gate's requests for a new worker fail to start one.
    failed_spawns: usize,
    /// Caller 0's first request waits for caller 1's first to be served:
    /// a second worker must serve it while the first is blocked.
    blocking: bool,
    /// The planted bug: workers do not tell the gate they took a request.
    skip_took_request: bool,
}

struct Session {
    setup: Setup,
    gate: Arc<WorkerGate>,
    kernel: Mutex<Kernel>,
    /// Signalled on every change of `kernel`.
    changed: Condvar,
    workers: Mutex<Vec<thread::JoinHandle<()>>>,
    spawns_to_fail: Mutex<usize>,
}

impl Session {
    fn kernel(&self) -> shuttle::sync::MutexGuard<'_, Kernel> {
        self.kernel.lock().unwrap()
    }

    fn submit(&self, req: Request) {
        let mut k = self.kernel();
        assert!(!k.unmounted);
        match k.waiting.pop_front() {
            Some(ticket) => {
                k.handed.insert(ticket, req);
            }
            None => k.queue.push_back(req),
        }
        self.changed.notify_all();
    }

    /// `read(2)`: the next request, or `None` once unmounted.
    fn read(&self) -> Option<Request> {
        let mut k = self.kernel();
        if k.unmounted {
            return None;
        }
        let req = match k.queue.pop_front() {
            Some(req) => req,
            None => {
                let ticket = k.next_ticket;
                k.next_ticket += 1;
                k.waiting.push_back(ticket);
                assert!(
                    k.waiting.len() <= MAX_READERS,
                    "{} workers in read(2)",
                    k.waiting.len()
                );
                loop {
                    if let Some(req) = k.handed.remove(&ticket) {
                        break req;
                    }
                    if k.unmounted {
                        k.waiting.retain(|&t| t != ticket);
                        return None;
                    }
                    k = self.changed.wait(k).unwrap();
                }
            }
        };
        k.served += 1;
        k.serving += 1;
        assert!(k.serving <= self.setup.max, "{} workers serving", k.serving);
        self.changed.notify_all();
        Some(req)
    }

    fn reply(&self, req: Request) {
        self.kernel().replies.insert(req.id);
        self.changed.notify_all();
    }

    fn wait_reply(&self, id: usize) {
        let mut k = self.kernel();
        while !k.replies.remove(&id) {
            k = self.changed.wait(k).unwrap();
        }
    }

    fn done_serving(&self) {
        self.kernel().serving -= 1;
    }

    /// Start a worker the gate counted, as fuser's pool does.
    fn spawn_worker(self: &Arc<Self>) {
        {
            let mut fail = self.spawns_to_fail.lock().unwrap();
            if *fail > 0 {
                *fail -= 1;
                self.gate.spawn_failed();
                return;
            }
        }
        let s = self.clone();
        let handle = thread::spawn(move || s.work());
        self.workers.lock().unwrap().push(handle);
    }

    /// fuser's `WorkerPool::work`, with the model's kernel.
    fn work(self: Arc<Self>) {
        let me = Worker::new(self.gate.clone());
        loop {
            let Some(req) = self.read() else {
                me.read_failed();
                return;
            };
            self.check_counts();
            if !self.setup.skip_took_request && me.took_request() == Took::Spawn {
                self.spawn_worker();
            }
            match req.kind {
                Kind::Destroy => {
                    me.before_reply();
                    self.reply(req);
                    self.done_serving();
                    me.end_session();
                    return;
                }
                Kind::Wait => {
                    let mut k = self.kernel();
                    while !k.released {
                        k = self.changed.wait(k).unwrap();
                    }
                    drop(k);
                    me.before_reply();
                    self.reply(req);
                }
                Kind::Release => {
                    self.kernel().released = true;
                    me.before_reply();
                    self.reply(req);
                }
                Kind::Reply => {
                    // The reply path counts the worker back, then writes.
                    me.before_reply();
                    self.reply(req);
                }
                Kind::NoReply => {}
            }
            self.done_serving();
            if !me.after_request() {
                return;
            }
        }
    }

    fn check_counts(&self) {
        assert!(self.gate.readers() <= MAX_READERS, "readers over the max");
        assert!(self.gate.alive() <= self.setup.max, "workers over the max");
    }
}

/// One session: the callers' requests, then the unmount; every request
/// must be served and every worker must end with the gate counting none.
fn session(setup: Setup) {
    let s = Arc::new(Session {
        setup,
        gate: Arc::new(WorkerGate::new(setup.max, setup.idle_retire)),
        kernel: Mutex::new(Kernel::default()),
        changed: Condvar::new(),
        workers: Mutex::new(Vec::new()),
        spawns_to_fail: Mutex::new(setup.failed_spawns),
    });
    s.gate.start_first();
    let first = {
        let s = s.clone();
        thread::spawn(move || s.work())
    };
    s.workers.lock().unwrap().push(first);

    let callers: Vec<_> = (0..setup.callers)
        .map(|c| {
            let s = s.clone();
            thread::spawn(move || {
                for i in 0..setup.requests_each {
                    let id = c * setup.requests_each + i;
                    let kind = if setup.blocking && i == 0 && c < 2 {
                        [Kind::Wait, Kind::Release][c]
                    } else if setup.no_reply && c % 2 == 1 && i % 2 == 0 {
                        Kind::NoReply
                    } else {
                        Kind::Reply
                    };
                    s.submit(Request { id, kind });
                    if kind != Kind::NoReply {
                        s.wait_reply(id);
                    }
                }
            })
        })
        .collect();
    for c in callers {
        c.join().unwrap();
    }
    let mut total = setup.callers * setup.requests_each;
    if setup.destroy {
        s.submit(Request {
            id: total,
            kind: Kind::Destroy,
        });
        s.wait_reply(total);
        total += 1;
    }
    // Every request is served (those without a reply too) before the
    // unmount; a stall blocks here.
    {
        let mut k = s.kernel();
        while k.served < total {
            k = s.changed.wait(k).unwrap();
        }
        assert!(k.queue.is_empty());
        k.unmounted = true;
        s.changed.notify_all();
    }
    // As fuser's `WorkerPool::run`: a worker pushes the handle of one it
    // starts before it ends, so an empty list after a join means all ended.
    loop {
        let next = s.workers.lock().unwrap().pop();
        let Some(handle) = next else { break };
        handle.join().unwrap();
    }
    assert!(s.gate.ended());
    assert_eq!(
        (s.gate.readers(), s.gate.alive(), s.gate.parked()),
        (0, 0, 0),
        "readers, alive and parked after the session"
    );
}

const LONG: Duration = Duration::from_secs(3600);

/// Three workers at most for three callers of two requests each, every
/// request answered, a blocked handler, no planted bug: what each model
/// below starts from.
const BASE: Setup = Setup {
    max: 3,
    idle_retire: LONG,
    callers: 3,
    requests_each: 2,
    no_reply: false,
    destroy: false,
    failed_spawns: 0,
    blocking: true,
    skip_took_request: false,
};

/// Three workers at most, three callers: workers are made, park (two
/// others counted as reading) and are woken; a handler blocked until
/// another caller's request is served does not stall the mount; at the
/// unmount the parked workers must be woken to end.
#[test]
fn three_workers_three_callers_serve_every_request_and_end() {
    explore(|| session(BASE));
}

/// Three workers, three callers, some requests without a reply (nothing
/// counts the worker back before a reply), parked workers retiring as soon
/// as they look (racing the worker that wakes them), and the session
/// ended by `DESTROY` (whose reply counts its worker back).
#[test]
fn three_workers_retiring_at_once_with_destroy_serve_every_request() {
    explore(|| {
        session(Setup {
            idle_retire: Duration::ZERO,
            no_reply: true,
            destroy: true,
            ..BASE
        })
    });
}

/// A new worker that cannot be started: the one that asked for it reads
/// again when done, and the next one asked for is started.
#[test]
fn a_failed_spawn_still_serves_every_request() {
    explore(|| {
        session(Setup {
            no_reply: true,
            failed_spawns: 1,
            // A blocked handler would wait for good if no worker could be
            // started: the gate asks for one only when a reader leaves.
            blocking: false,
            ..BASE
        })
    });
}

/// The planted bug: workers that do not tell the gate they took a request
/// (nor wake or make another reader) stay counted as reading, so one done
/// with a request parks with nobody reading. The model must find it.
#[test]
fn a_worker_that_skips_took_request_is_caught() {
    let caught = finds_a_failure("planted bug", || {
        session(Setup {
            max: 2,
            callers: 2,
            skip_took_request: true,
            ..BASE
        })
    });
    assert!(
        caught,
        "shuttle did not catch a worker skipping took_request"
    );
}

/// Bursts of requests without a reply (their callers go on at once, and
/// nothing counts the worker back): workers park often and are woken by
/// the last reader; a wake-up that does not unpark is a deadlock here.
#[test]
fn bursts_without_replies_park_and_wake_workers() {
    explore(|| {
        session(Setup {
            callers: 2,
            requests_each: 4,
            no_reply: true,
            blocking: false,
            ..BASE
        })
    });
}
