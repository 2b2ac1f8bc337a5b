//! manyfs: workers made on demand.
//!
//! The kernel hands each request to the reader that has waited longest in
//! `read(2)` on `/dev/fuse` (its wait queue is FIFO for exclusive waiters).
//! A fixed pool of N readers therefore serves a lone caller with a
//! different, cold worker on every request, and N grows the rotation. This
//! pool keeps at most [`MAX_READERS`] workers reading:
//!
//! - it starts with one worker;
//! - a worker that takes the last reader's place (nobody else is reading)
//!   wakes a parked worker, the one parked last (its stack and buffer are
//!   the warmest), or makes a new one while fewer than `max` exist;
//! - a worker done with its request reads again unless [`MAX_READERS`]
//!   others already do; then it parks, and a worker parked for
//!   `idle_retire` is retired (its thread ends, its cloned descriptor
//!   closes once its replies are sent).
//!
//! A worker counts itself as reading again just before it sends its reply
//! (see [`before_reply`]): the reply wakes the caller, whose next request
//! would otherwise find nobody counted as reading and wake a third worker.
//!
//! A lone caller is so served by the same one or two workers, and a burst
//! of callers grows the pool one worker per busy moment, as libfuse's
//! `fuse_loop_mt` does.

use std::cell::Cell;
use std::cell::RefCell;
use std::io;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::thread;
use std::thread::JoinHandle;
use std::time::Duration;
use std::time::Instant;

use parking_lot::Mutex;

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

/// Most workers kept blocked in `read(2)` at once. One would do for a lone
/// caller, but then every request would first wake a parked worker to take
/// the reader's place; two let a worker go back to reading while the other
/// waits, at the price of alternating between two warm workers.
pub(crate) const MAX_READERS: usize = 2;

/// How long a parked worker waits for work before it is retired, unless
/// the session's configuration says otherwise.
pub(crate) const DEFAULT_IDLE_RETIRE: Duration = Duration::from_secs(10);

thread_local! {
    /// On a worker's thread: its pool's reader count, and whether the
    /// worker has counted itself back as a reader for the request it serves.
    static WORKER: RefCell<Option<(Arc<AtomicUsize>, Cell<bool>)>> = const { RefCell::new(None) };
}

/// Called before anything is written to `/dev/fuse`: on a worker's thread,
/// the worker counts itself as reading again (if fewer than
/// [`MAX_READERS`] are), since it will be once this reply is sent.
pub(crate) fn before_reply() {
    WORKER.with(|w| {
        if let Some((readers, back)) = &*w.borrow()
            && !back.get()
            && readers
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |r| {
                    (r < MAX_READERS).then_some(r + 1)
                })
                .is_ok()
        {
            back.set(true);
        }
    });
}

/// Whether this worker counted itself back in [`before_reply`] (and forget
/// it, for the next request).
fn counted_back() -> bool {
    WORKER.with(|w| w.borrow().as_ref().is_some_and(|(_, back)| back.replace(false)))
}

/// A parked worker: woken by setting `go` and unparking its thread.
struct Parked {
    go: Arc<AtomicBool>,
    thread: thread::Thread,
}

/// What the workers share, under one lock taken only when a worker parks,
/// is woken, is made or retires (never per request when the load is even).
struct PoolState {
    /// Workers alive (reading, busy or parked).
    alive: usize,
    /// Parked workers, last parked on top.
    parked: Vec<Parked>,
    /// Threads to join when the session ends.
    handles: Vec<JoinHandle<io::Result<()>>>,
    /// Number given to the next worker's thread name.
    next_id: usize,
    /// The first error a worker ended with.
    error: Option<io::Error>,
}

/// The session's workers.
pub(crate) struct WorkerPool<FS: Filesystem> {
    state: Mutex<PoolState>,
    /// Workers in `read(2)` or on their way there (woken or made for it,
    /// or about to send their reply).
    readers: Arc<AtomicUsize>,
    /// Set once the session has ended: parked workers leave.
    ended: AtomicBool,
    max: usize,
    idle_retire: Duration,
    clone_fd: bool,
    /// The session's own descriptor (the first worker's; others clone it).
    base: Channel,
    filesystem: Arc<FilesystemHolder<FS>>,
    allowed: SessionACL,
    session_owner: Uid,
}

impl<FS: Filesystem> WorkerPool<FS> {
    /// A pool of at most `max` workers serving `base`.
    pub(crate) fn new(
        base: Channel,
        filesystem: Arc<FilesystemHolder<FS>>,
        max: usize,
        clone_fd: bool,
        idle_retire: Duration,
        allowed: SessionACL,
        session_owner: Uid,
    ) -> Arc<Self> {
        Arc::new(WorkerPool {
            state: Mutex::new(PoolState {
                alive: 0,
                parked: Vec::new(),
                handles: Vec::new(),
                next_id: 0,
                error: None,
            }),
            readers: Arc::new(AtomicUsize::new(0)),
            ended: AtomicBool::new(false),
            max: max.max(1),
            idle_retire,
            clone_fd,
            base,
            filesystem,
            allowed,
            session_owner,
        })
    }

    /// Start the first worker, wait until every worker has ended and
    /// return the first error one ended with.
    pub(crate) fn run(self: &Arc<Self>) -> io::Result<()> {
        self.readers.fetch_add(1, Ordering::AcqRel);
        {
            let mut st = self.state.lock();
            self.spawn_locked(&mut st, self.base.clone())?;
        }
        // Every unfinished worker's handle is in `handles` or being joined
        // here: a worker pushes the handle of one it makes before it can
        // itself end. So an empty list after a join means all have ended.
        loop {
            let next = self.state.lock().handles.pop();
            let Some(handle) = next else { break };
            if let Ok(Err(e)) | Err(e) = handle
                .join()
                .map_err(|_| io::Error::other("event loop thread panicked"))
            {
                let mut st = self.state.lock();
                if st.error.is_none() {
                    st.error = Some(e);
                }
            }
        }
        match self.state.lock().error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn spawn_locked(self: &Arc<Self>, st: &mut PoolState, ch: Channel) -> io::Result<()> {
        let id = st.next_id;
        let name = format!("fuser-{id}");
        let event_loop = SessionEventLoop {
            thread_name: name.clone(),
            filesystem: self.filesystem.clone(),
            ch,
            allowed: self.allowed,
            session_owner: self.session_owner,
        };
        let pool = self.clone();
        let handle = thread::Builder::new()
            .name(name)
            .spawn(move || pool.work(&event_loop))?;
        st.next_id += 1;
        st.alive += 1;
        st.handles.push(handle);
        Ok(())
    }

    /// Called by the worker that left nobody reading: put a parked worker,
    /// or a new one, in its place.
    fn add_reader(self: &Arc<Self>) {
        let mut st = self.state.lock();
        if self.ended.load(Ordering::Acquire) || self.readers.load(Ordering::Acquire) > 0 {
            return;
        }
        if let Some(p) = st.parked.pop() {
            self.readers.fetch_add(1, Ordering::AcqRel);
            p.go.store(true, Ordering::Release);
            p.thread.unpark();
            return;
        }
        if st.alive >= self.max {
            // Every worker is busy: the first one done reads again.
            return;
        }
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
        self.readers.fetch_add(1, Ordering::AcqRel);
        if let Err(e) = self.spawn_locked(&mut st, ch) {
            self.readers.fetch_sub(1, Ordering::AcqRel);
            log::warn!("starting a FUSE worker: {e}");
        }
    }

    /// A worker done with a request: true if it should read again, false
    /// if it is to end (retired, or the session ended while it was parked).
    fn after_request(&self) -> bool {
        if counted_back() {
            return true;
        }
        let go = {
            let mut st = self.state.lock();
            if self.ended.load(Ordering::Acquire) {
                st.alive -= 1;
                return false;
            }
            if self.readers.load(Ordering::Acquire) < MAX_READERS {
                self.readers.fetch_add(1, Ordering::AcqRel);
                return true;
            }
            let go = Arc::new(AtomicBool::new(false));
            st.parked.push(Parked {
                go: go.clone(),
                thread: thread::current(),
            });
            go
        };
        let deadline = Instant::now() + self.idle_retire;
        loop {
            if go.load(Ordering::Acquire) {
                // The waker counted this worker as a reader already.
                return true;
            }
            let now = Instant::now();
            if self.ended.load(Ordering::Acquire) || now >= deadline {
                let mut st = self.state.lock();
                if go.load(Ordering::Acquire) {
                    return true;
                }
                st.parked.retain(|p| !Arc::ptr_eq(&p.go, &go));
                st.alive -= 1;
                return false;
            }
            thread::park_timeout(deadline - now);
        }
    }

    /// The session is over: wake every parked worker so that it ends.
    fn end(&self) {
        self.ended.store(true, Ordering::Release);
        let st = self.state.lock();
        for p in &st.parked {
            p.thread.unpark();
        }
    }

    /// One worker's loop. It is counted in `readers` when it starts.
    fn work(self: Arc<Self>, se: &SessionEventLoop<FS>) -> io::Result<()> {
        WORKER.with(|w| *w.borrow_mut() = Some((self.readers.clone(), Cell::new(false))));
        // One buffer per worker, reused for each of its requests.
        let mut buf = FuseReadBuf::new();
        let buf = buf.as_mut();
        let result = loop {
            let received = se.ch.receive_retrying(buf);
            if self.readers.fetch_sub(1, Ordering::AcqRel) == 1 && received.is_ok() {
                self.add_reader();
            }
            let size = match received {
                Ok(size) => size,
                Err(nix::errno::Errno::ENODEV) => break Ok(()),
                Err(err) => break Err(err.into()),
            };
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
            if !self.after_request() {
                return Ok(());
            }
        };
        self.state.lock().alive -= 1;
        self.end();
        result
    }
}
