//! manyfs: workers made on demand.
//!
//! The kernel hands each request to the reader that has waited longest in
//! `read(2)` on `/dev/fuse`, so a fixed pool of N readers serves a lone
//! caller with a different, cold worker on every request. This pool keeps
//! at most [`MAX_READERS`](manyfs_sync::worker_gate::MAX_READERS) workers
//! reading, starting with one and making more (up to `max`) when none is
//! left reading; idle ones park and retire after `idle_retire`. When a worker reads, parks, wakes another, has one
//! made or retires is decided by manyfs-sync's `worker_gate`
//! ([`WorkerGate`], [`Worker`]; its module docs describe the protocol,
//! which its shuttle model checks); this file does the I/O around it:
//! reading and dispatching requests, starting the threads (each with its
//! own cloned descriptor under `clone_fd`) and joining them.
//!
//! With [`Config::worker_cpus`](crate::Config::worker_cpus) set, each
//! worker is pinned, when made, to the listed CPU with the fewest live
//! workers. The kernel hands a request to whichever worker waited longest,
//! wherever it runs; left to the scheduler, the callers and the workers
//! that serve them at times end up queued on one CPU while another idles
//! (a wake-up runs the woken thread on the waker's CPU unless the
//! scheduler finds an idle one, and a loaded scheduler stops looking).
//! Pinned, two workers busy at once run on two CPUs.
//!
//! A worker about to wait for a request first polls for one, for up to
//! [`Config::spin_before_sleep`](crate::Config::spin_before_sleep)
//! ([`SpinWindow`]), unless requests lately came faster than one at a
//! time. A lone caller's request is a round trip of two wake-ups, the
//! worker's and then the caller's; when the worker sleeps on another CPU
//! than the caller, both cross CPUs, and waking an idle CPU is dear (an
//! inter-processor interrupt and the CPU's way out of its idle state; on a
//! virtual machine an exit to the host). On the 2-core development VM a
//! pipe ping-pong between two threads took 27.6 us across CPUs and 5.0 us
//! on one (`perf bench sched pipe`). A worker that polls finds the next
//! request with no wake-up, which leaves the caller's. Nor can the worker
//! instead move to its caller's CPU: the reply's wake-up then finds that
//! CPU busy (the worker is on it) and the scheduler runs the caller on the
//! idle one (tried: a lone writer went from 32-48k to 18-23k writes/s).
//! Under load the poll would take a CPU that callers and busy workers
//! could use, so a worker that took the last reader's place
//! ([`Worker::took_the_last_read`]) does not poll for [`CROWDED_FOR`],
//! unless it is the pool's only worker (`threads=1`), which takes the last
//! read every time.
//!
//! With two workers reading, both polling see a lone caller's request;
//! the one that does not get it sleeps in `read(2)` until the next request
//! wakes it, so some requests still cost a wake-up. Reading without
//! sleeping after a poll (a non-blocking descriptor per worker) was tried:
//! no worker then slept, but both kept their CPUs busy, and on two cores a
//! lone caller went from 64.5k to 49.5k writes/s (DWOM, three rounds).
//!
//! A worker counts itself as reading again just before it sends its reply
//! (see [`before_reply`]): the reply wakes the caller, whose next request
//! would otherwise find nobody counted as reading and wake another worker.

use std::cell::RefCell;
use std::io;
use std::rc::Rc;
use std::sync::Arc;
use std::thread;
use std::thread::JoinHandle;
use std::time::Duration;
use std::time::Instant;

use manyfs_sync::worker_gate::Took;
use manyfs_sync::worker_gate::Worker;
use manyfs_sync::worker_gate::WorkerGate;
use parking_lot::Mutex;

use std::os::fd::AsFd;

use crate::Filesystem;
use crate::ReplyEmpty;
use crate::channel::Channel;
use crate::ll::Operation;
use crate::read_buf::FuseReadBuf;
use crate::request::RequestWithSender;
use crate::session::FilesystemHolder;
use crate::session::SessionACL;
use crate::session::SessionEventLoop;
use nix::unistd::Uid;

/// How long a parked worker waits for work before it is retired, unless
/// the session's configuration says otherwise.
pub(crate) const DEFAULT_IDLE_RETIRE: Duration = Duration::from_secs(10);

thread_local! {
    /// On a worker's thread: its side of the pool's gate.
    static WORKER: RefCell<Option<Rc<Worker>>> = const { RefCell::new(None) };
}

/// Called before anything is written to `/dev/fuse`: on a worker's thread,
/// the worker counts itself as reading again (if fewer than
/// [`MAX_READERS`](manyfs_sync::worker_gate::MAX_READERS) are), since it
/// will be once this reply is sent.
pub(crate) fn before_reply() {
    WORKER.with(|w| {
        if let Some(worker) = &*w.borrow() {
            worker.before_reply();
        }
    });
}

/// The threads, under a lock taken when one is started or joined.
struct Threads {
    /// Threads to join when the session ends.
    handles: Vec<JoinHandle<io::Result<()>>>,
    /// Number given to the next worker's thread name.
    next_id: usize,
    /// The first error a worker ended with.
    error: Option<io::Error>,
    /// Live workers pinned to each CPU of [`WorkerPool::cpus`] (same
    /// index); empty when workers are not pinned.
    pinned: Vec<usize>,
}

/// The index of the least-used CPU (the first of those with the fewest
/// live workers), or `None` if there is no CPU to pin to.
fn least_used(pinned: &[usize]) -> Option<usize> {
    pinned
        .iter()
        .enumerate()
        .min_by_key(|&(i, &n)| (n, i))
        .map(|(i, _)| i)
}

/// Pin the calling thread to `cpu`. A CPU the process may not use (an
/// affinity or cpuset changed since the mount) leaves it unpinned.
#[cfg(target_os = "linux")]
fn pin_to(cpu: usize) {
    use nix::sched::CpuSet;
    use nix::sched::sched_setaffinity;
    use nix::unistd::Pid;
    let mut set = CpuSet::new();
    let pinned = set
        .set(cpu)
        .and_then(|()| sched_setaffinity(Pid::from_raw(0), &set));
    if let Err(e) = pinned {
        log::debug!("cannot pin a FUSE worker to CPU {cpu}: {e}");
    }
}

#[cfg(not(target_os = "linux"))]
fn pin_to(_cpu: usize) {}

/// After a worker took the last reader's place (requests came faster than
/// one at a time), it does not poll for this long.
pub(crate) const CROWDED_FOR: Duration = Duration::from_millis(100);

/// A poll window below this is not worth its system calls: it becomes zero.
const MIN_SPIN: Duration = Duration::from_micros(2);

/// How long one worker polls `/dev/fuse` before it sleeps in `read(2)`.
/// The window adapts to how long the worker then sleeps, as the guest
/// kernel's halt polling does: a sleep short enough that a poll of `max`
/// would have caught it doubles the window (from [`MIN_SPIN`]); a sleep of
/// more than twice `max` halves it. (A poll that finds nothing is not a
/// reason by itself: with two workers reading, the other one may have
/// taken the request, and this one's next comes a round trip later.)
#[derive(Debug, Clone, Copy)]
struct SpinWindow {
    max: Duration,
    window: Duration,
    /// When this worker last took the last reader's place.
    crowded_at: Option<Instant>,
}

impl SpinWindow {
    fn new(max: Duration) -> Self {
        SpinWindow {
            max,
            window: max,
            crowded_at: None,
        }
    }

    /// How long to poll at `now` (zero: sleep at once).
    fn poll_for(&self, now: Instant) -> Duration {
        match self.crowded_at {
            Some(t) if now.saturating_duration_since(t) < CROWDED_FOR => Duration::ZERO,
            _ => self.window,
        }
    }

    /// The worker took the last reader's place at `now`.
    fn crowded(&mut self, now: Instant) {
        self.crowded_at = Some(now);
    }

    /// `read(2)` slept `slept` before a request came (no poll caught it).
    fn slept(&mut self, slept: Duration) {
        if slept <= self.max {
            self.window = (self.window * 2).clamp(MIN_SPIN, self.max);
        } else if slept > self.max * 2 {
            self.window /= 2;
            if self.window < MIN_SPIN {
                self.window = Duration::ZERO;
            }
        }
    }
}

/// Poll `ch` for a request for up to `window`, yielding the CPU between
/// polls to any thread waiting for it; true if one is there (or the
/// descriptor has an error, which the read then reports).
fn request_within<T: AsFd>(ch: &T, window: Duration) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let start = Instant::now();
    loop {
        let mut fds = [PollFd::new(ch.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::ZERO) {
            Ok(0) => {}
            Ok(_) => return true,
            Err(_) => return false,
        }
        if start.elapsed() >= window {
            return false;
        }
        let _ = nix::sched::sched_yield();
    }
}

/// How many workers a pool may have and how they are set up.
pub(crate) struct PoolShape {
    /// The most workers.
    pub(crate) max: usize,
    /// Each worker after the first reads its own cloned descriptor.
    pub(crate) clone_fd: bool,
    /// How long a parked worker waits for work before it is retired.
    pub(crate) idle_retire: Duration,
    /// CPUs to pin workers to (empty: not pinned).
    pub(crate) cpus: Vec<usize>,
    /// How long a worker may poll for a request before it sleeps.
    pub(crate) spin: Duration,
}

/// The session's workers.
pub(crate) struct WorkerPool<FS: Filesystem> {
    gate: Arc<WorkerGate>,
    threads: Mutex<Threads>,
    clone_fd: bool,
    /// More than one worker may be alive, so a worker that took the last
    /// reader's place saw requests come faster than one at a time. (The
    /// only worker of a pool of one always takes the last read.)
    crowding_shows: bool,
    /// The session's own descriptor (the first worker's; others clone it).
    base: Channel,
    /// CPUs to pin workers to (empty: not pinned).
    cpus: Vec<usize>,
    /// How long a worker may poll for a request before it sleeps.
    spin: Duration,
    filesystem: Arc<FilesystemHolder<FS>>,
    allowed: SessionACL,
    session_owner: Uid,
}

impl<FS: Filesystem> WorkerPool<FS> {
    /// A pool of workers serving `base`, shaped by `shape`.
    pub(crate) fn new(
        base: Channel,
        filesystem: Arc<FilesystemHolder<FS>>,
        shape: PoolShape,
        allowed: SessionACL,
        session_owner: Uid,
    ) -> Arc<Self> {
        let PoolShape {
            max,
            clone_fd,
            idle_retire,
            cpus,
            spin,
        } = shape;
        Arc::new(WorkerPool {
            gate: Arc::new(WorkerGate::new(max, idle_retire)),
            threads: Mutex::new(Threads {
                handles: Vec::new(),
                next_id: 0,
                error: None,
                pinned: vec![0; cpus.len()],
            }),
            clone_fd,
            crowding_shows: max > 1,
            base,
            cpus,
            spin,
            filesystem,
            allowed,
            session_owner,
        })
    }

    /// Start the first worker, wait until every worker has ended and
    /// return the first error one ended with.
    pub(crate) fn run(self: &Arc<Self>) -> io::Result<()> {
        self.gate.start_first();
        if let Err(e) = self.spawn(self.base.clone()) {
            self.gate.spawn_failed();
            return Err(e);
        }
        // Every unfinished worker's handle is in `handles` or being joined
        // here: a worker pushes the handle of one it makes before it can
        // itself end. So an empty list after a join means all have ended.
        loop {
            let next = self.threads.lock().handles.pop();
            let Some(handle) = next else { break };
            if let Ok(Err(e)) | Err(e) = handle
                .join()
                .map_err(|_| io::Error::other("event loop thread panicked"))
            {
                let mut threads = self.threads.lock();
                if threads.error.is_none() {
                    threads.error = Some(e);
                }
            }
        }
        match self.threads.lock().error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Start a worker the gate has counted, reading `ch`.
    fn spawn(self: &Arc<Self>, ch: Channel) -> io::Result<()> {
        let mut threads = self.threads.lock();
        let name = format!("fuser-{}", threads.next_id);
        let event_loop = SessionEventLoop {
            thread_name: name.clone(),
            filesystem: self.filesystem.clone(),
            ch,
            allowed: self.allowed,
            session_owner: self.session_owner,
        };
        let pool = self.clone();
        let slot = least_used(&threads.pinned);
        let cpu = slot.map(|i| self.cpus[i]);
        let handle = thread::Builder::new().name(name).spawn(move || {
            if let Some(cpu) = cpu {
                pin_to(cpu);
            }
            let ended = pool.clone().work(&event_loop);
            if let Some(i) = slot {
                pool.threads.lock().pinned[i] -= 1;
            }
            ended
        })?;
        if let Some(i) = slot {
            threads.pinned[i] += 1;
        }
        threads.next_id += 1;
        threads.handles.push(handle);
        Ok(())
    }

    /// Start the new worker the gate asked for ([`Took::Spawn`]).
    fn add_worker(self: &Arc<Self>) {
        let ch = if self.clone_fd {
            match self.base.clone_fd() {
                Ok(ch) => ch,
                Err(e) => {
                    log::warn!("cloning /dev/fuse for a new worker: {e}");
                    self.base.clone()
                }
            }
        } else {
            self.base.clone()
        };
        if let Err(e) = self.spawn(ch) {
            self.gate.spawn_failed();
            log::warn!("starting a FUSE worker: {e}");
        }
    }

    /// One worker's loop. The gate counted it as alive and reading before
    /// its thread was started.
    fn work(self: Arc<Self>, se: &SessionEventLoop<FS>) -> io::Result<()> {
        let worker = Rc::new(Worker::new(self.gate.clone()));
        WORKER.with(|w| *w.borrow_mut() = Some(worker.clone()));
        // One buffer per worker, reused for each of its requests.
        let mut buf = FuseReadBuf::new();
        let buf = buf.as_mut();
        let mut spin = SpinWindow::new(self.spin);
        let result = loop {
            let window = spin.poll_for(Instant::now());
            let caught = !window.is_zero() && request_within(&se.ch, window);
            let sleep_start = (!caught).then(Instant::now);
            let size = match se.ch.receive_retrying(buf) {
                Ok(size) => size,
                Err(err) => {
                    worker.read_failed();
                    return match err {
                        nix::errno::Errno::ENODEV => Ok(()),
                        err => Err(err.into()),
                    };
                }
            };
            if let Some(t) = sleep_start {
                spin.slept(t.elapsed());
            }
            if worker.took_request() == Took::Spawn {
                self.add_worker();
            }
            if self.crowding_shows && worker.took_the_last_read() {
                spin.crowded(Instant::now());
            }
            // The kernel driver makes sure that we get exactly one request
            // per read.
            let Some(req) = RequestWithSender::new(se.ch.sender(), &buf[..size]) else {
                break Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "Invalid request",
                ));
            };
            if let Ok(Operation::Destroy(_)) = req.request.operation() {
                req.reply::<ReplyEmpty>().ok();
                break Ok(());
            }
            req.dispatch(se);
            if !worker.after_request() {
                return Ok(());
            }
        };
        worker.end_session();
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_workers_go_to_the_least_used_cpu() {
        assert_eq!(least_used(&[]), None);
        assert_eq!(least_used(&[0, 0]), Some(0));
        assert_eq!(least_used(&[1, 0]), Some(1));
        assert_eq!(least_used(&[1, 1, 1]), Some(0));
        assert_eq!(least_used(&[2, 1, 1]), Some(1));
    }

    #[test]
    fn the_poll_window_halves_on_long_sleeps_and_doubles_on_short_ones() {
        let max = Duration::from_micros(50);
        let mut s = SpinWindow::new(max);
        let t = Instant::now();
        assert_eq!(s.poll_for(t), max);
        // Between max and twice max: left as it is.
        s.slept(max + max / 2);
        assert_eq!(s.poll_for(t), max);
        s.slept(Duration::from_millis(1));
        assert_eq!(s.poll_for(t), max / 2);
        for _ in 0..10 {
            s.slept(Duration::from_millis(1));
        }
        assert_eq!(s.poll_for(t), Duration::ZERO, "a tiny window becomes none");
        // A short sleep would have been caught: back on, growing to max.
        s.slept(Duration::from_micros(10));
        assert_eq!(s.poll_for(t), MIN_SPIN);
        for _ in 0..10 {
            s.slept(Duration::from_micros(10));
        }
        assert_eq!(s.poll_for(t), max);
    }

    #[test]
    fn a_crowded_worker_does_not_poll_for_a_while() {
        let mut s = SpinWindow::new(Duration::from_micros(50));
        let t = Instant::now();
        s.crowded(t);
        assert_eq!(s.poll_for(t), Duration::ZERO);
        assert_eq!(s.poll_for(t + CROWDED_FOR / 2), Duration::ZERO);
        assert_eq!(s.poll_for(t + CROWDED_FOR), Duration::from_micros(50));
        assert_eq!(SpinWindow::new(Duration::ZERO).poll_for(t), Duration::ZERO);
    }

    #[test]
    fn a_poll_finds_a_waiting_request_and_gives_up_on_none() {
        let (r, mut w) = std::io::pipe().unwrap();
        let started = Instant::now();
        assert!(!request_within(&r, Duration::from_millis(2)));
        assert!(started.elapsed() >= Duration::from_millis(2));
        std::io::Write::write_all(&mut w, b"x").unwrap();
        assert!(
            request_within(&r, Duration::from_secs(60)),
            "returns at once"
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_pinned_thread_runs_on_its_cpu_only() {
        use nix::sched::sched_getaffinity;
        use nix::unistd::Pid;
        let allowed = sched_getaffinity(Pid::from_raw(0)).unwrap();
        let cpu = (0..nix::sched::CpuSet::count())
            .rev()
            .find(|&c| allowed.is_set(c).unwrap_or(false))
            .unwrap();
        let seen = thread::spawn(move || {
            pin_to(cpu);
            let set = sched_getaffinity(Pid::from_raw(0)).unwrap();
            (0..nix::sched::CpuSet::count())
                .filter(|&c| set.is_set(c).unwrap_or(false))
                .collect::<Vec<_>>()
        })
        .join()
        .unwrap();
        assert_eq!(seen, vec![cpu]);
        // A CPU past any set stays unpinned rather than failing.
        thread::spawn(|| pin_to(usize::MAX)).join().unwrap();
    }
}
