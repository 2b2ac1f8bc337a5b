//! FUSE over io_uring (`-o uring`, Linux 6.14+ with the `fuse` module
//! parameter `enable_uring`).
//!
//! After the `/dev/fuse` handshake, one queue per possible CPU registers
//! [`ENTRIES_PER_QUEUE`] ring entries with the kernel (`IORING_OP_URING_CMD`
//! on the `/dev/fuse` descriptor, 128-byte SQEs). Once every queue has an
//! entry, the kernel stops queueing requests for `read(/dev/fuse)` and hands
//! each request to the queue of the CPU its caller runs on, by completing
//! one of that queue's commands. The queue's thread rebuilds the request in
//! the `/dev/fuse` layout, dispatches it through the same fuser dispatch as
//! the `/dev/fuse` loops ([`fuser::Dispatcher`]), writes the reply into the
//! entry and sends `COMMIT_AND_FETCH`, which delivers the reply and waits
//! for the next request in one system call. `FORGET` and `INTERRUPT` still
//! come through `/dev/fuse`, whose loops keep running.
//!
//! Layout of an entry (kernel ABI 7.42, `include/uapi/linux/fuse.h`,
//! `fs/fuse/dev_uring.c`): a 288-byte header buffer, `in_out[128]`
//! (`fuse_in_header` in, `fuse_out_header` out), `op_in[128]` (the
//! operation's fixed argument, `in_args[0]`), `fuse_uring_ent_in_out`
//! (`flags`, `commit_id`, `payload_sz`); and a payload buffer for the other
//! arguments (the written data, names) in, and all reply arguments out.
//! `in_header.len` covers all three parts, so the size of `op_in` is
//! `len - 40 - payload_sz`.
//!
//! If the kernel does not offer it (`enable_uring=N`, before Linux 6.14, or
//! io_uring unavailable), the mount says so in one line and serves through
//! `/dev/fuse` ([`negotiate`]).

use std::cell::UnsafeCell;
use std::io::IoSlice;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;
use fuser::{Dispatcher, Filesystem, InitFlags, KernelConfig, ReplySink};
use io_uring::{IoUring, cqueue, opcode, squeue, types};
use parking_lot::{Condvar, Mutex};

/// `FUSE_IO_URING_CMD_REGISTER`: register an entry and wait for a request.
const CMD_REGISTER: u32 = 1;
/// `FUSE_IO_URING_CMD_COMMIT_AND_FETCH`: deliver a reply, wait for the next.
const CMD_COMMIT_AND_FETCH: u32 = 2;
/// `sizeof(struct fuse_in_header)`.
const IN_HEADER_LEN: usize = 40;
/// `sizeof(struct fuse_out_header)`.
const OUT_HEADER_LEN: usize = 16;
/// `FUSE_URING_OP_IN_OUT_SZ`: room for the operation's fixed argument.
const OP_IN_LEN: usize = 128;
/// Room before the payload where a request is rebuilt in the `/dev/fuse`
/// layout (`fuse_in_header` + fixed argument) without moving the payload.
const GAP: usize = IN_HEADER_LEN + OP_IN_LEN;
/// Ring entries each queue registers.
pub const ENTRIES_PER_QUEUE: usize = 8;
/// Largest write the kernel sends when serving over io_uring: the default
/// `fuse` `max_pages_limit` (256 pages); every entry's payload buffer is this
/// plus a page.
pub const URING_MAX_WRITE: u32 = 1 << 20;
/// `FUSE_FORGET` and `FUSE_BATCH_FORGET`: the requests that have no reply.
const NO_REPLY_OPCODES: [u32; 2] = [2, 42];

/// Requests served over io_uring: one counter per queue, each on its own
/// cache line and written only by its queue's thread.
#[derive(Debug)]
pub struct UringStats {
    per_queue: Box<[CachePadded<AtomicU64>]>,
}

impl Default for UringStats {
    fn default() -> Self {
        UringStats {
            per_queue: (0..possible_cpus())
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
        }
    }
}

impl UringStats {
    /// Requests served over io_uring so far, all queues together (0 when the
    /// mount serves through /dev/fuse).
    pub fn requests(&self) -> u64 {
        self.per_queue
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }

    fn count(&self, qid: u16) {
        if let Some(c) = self.per_queue.get(usize::from(qid)) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// `struct fuse_uring_ent_in_out`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct EntInOut {
    flags: u64,
    commit_id: u64,
    payload_sz: u32,
    padding: u32,
    reserved: u64,
}

/// `struct fuse_uring_req_header` (288 bytes).
#[repr(C, align(8))]
struct ReqHeader {
    in_out: [u8; 128],
    op_in: [u8; OP_IN_LEN],
    ent: EntInOut,
}

/// `struct fuse_uring_cmd_req`, in the SQE's command area.
fn cmd_req(commit_id: u64, qid: u16) -> [u8; 80] {
    let mut cmd = [0u8; 80];
    cmd[8..16].copy_from_slice(&commit_id.to_ne_bytes());
    cmd[16..18].copy_from_slice(&qid.to_ne_bytes());
    cmd
}

/// What `-o uring` agreed with the kernel at `INIT`.
#[derive(Debug, Clone, Copy)]
pub struct UringParams {
    /// Bytes of every entry's payload buffer.
    pub payload_len: usize,
}

/// Ask for FUSE over io_uring in the `INIT` reply: only if the kernel offers
/// it and an io_uring with 128-byte SQEs can be created here (once the
/// kernel has agreed, every request waits for the ring until all queues are
/// registered). Limits writes to [`URING_MAX_WRITE`] (the kernel sends no
/// larger ones anyway under its default page limit) so that each entry's
/// payload buffer stays small.
///
/// # Errors
/// A one-line reason, for the fallback message, when it is not offered.
pub fn negotiate(config: &mut KernelConfig) -> Result<UringParams, String> {
    if !config
        .capabilities()
        .contains(InitFlags::FUSE_OVER_IO_URING)
    {
        return Err(
            "the kernel does not offer FUSE over io_uring (needs Linux 6.14+ and \
                    `echo Y > /sys/module/fuse/parameters/enable_uring`)"
                .into(),
        );
    }
    IoUring::<squeue::Entry128, cqueue::Entry>::builder()
        .build(2)
        .map_err(|e| format!("cannot create an io_uring with 128-byte entries: {e}"))?;
    config
        .add_capabilities(InitFlags::FUSE_OVER_IO_URING)
        .map_err(|_| "the kernel refused FUSE_OVER_IO_URING".to_string())?;
    let _ = config.set_max_write(URING_MAX_WRITE);
    // The kernel's payload size is max(max_write, max_pages * page), and
    // max_pages covers the readahead too: keep it within the same bound.
    if let Ok(ra) = config.set_max_readahead(URING_MAX_WRITE) {
        let _ = config.set_max_readahead(ra.min(URING_MAX_WRITE));
    }
    Ok(UringParams {
        payload_len: URING_MAX_WRITE as usize + page_size(),
    })
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n).unwrap_or(4096).max(4096)
}

/// Number of queues the kernel expects: one per possible CPU (the highest
/// id in `/sys/devices/system/cpu/possible`, plus one).
pub fn possible_cpus() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/possible")
        .ok()
        .and_then(|s| parse_cpu_list_max(s.trim()))
        .map_or_else(
            || std::thread::available_parallelism().map_or(1, |n| n.get()),
            |max| max + 1,
        )
}

/// The highest CPU in a list such as `0-3,5,8-11`.
fn parse_cpu_list_max(s: &str) -> Option<usize> {
    s.split(',')
        .map(|part| part.rsplit('-').next().and_then(|n| n.trim().parse().ok()))
        .try_fold(0usize, |max, n: Option<usize>| n.map(|n| max.max(n)))
}

/// The result of a rebuilt request: where it lies.
#[derive(Debug, PartialEq, Eq)]
enum Rebuilt {
    /// In the entry's buffer, from this offset, for this many bytes.
    InPlace { start: usize, len: usize },
    /// Copied into the queue's aligned scratch buffer (an odd-sized fixed
    /// argument would leave the header unaligned in place).
    Scratch { len: usize },
}

/// Why a request from the ring could not be rebuilt: every length comes from
/// the kernel and is checked before use.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
enum RebuildError {
    #[error("payload_sz {payload} exceeds the {cap}-byte payload buffer")]
    Payload { payload: usize, cap: usize },
    #[error("in_header.len {len} is shorter than header {IN_HEADER_LEN} + payload {payload}")]
    Short { len: usize, payload: usize },
    #[error("fixed argument of {0} bytes exceeds op_in ({OP_IN_LEN} bytes)")]
    OpIn(usize),
}

/// Lay out a request in the `/dev/fuse` layout (`fuse_in_header`, fixed
/// argument, payload) in `buf`, whose payload already sits at `GAP`:
/// header and fixed argument are copied just before it. `buf` is
/// `GAP + cap` bytes, 8-byte aligned.
fn rebuild(
    in_header: &[u8; IN_HEADER_LEN],
    op_in: &[u8; OP_IN_LEN],
    payload_sz: usize,
    buf: &mut [u8],
    scratch: &mut Vec<u64>,
) -> Result<Rebuilt, RebuildError> {
    let cap = buf.len().saturating_sub(GAP);
    if payload_sz > cap {
        return Err(RebuildError::Payload {
            payload: payload_sz,
            cap,
        });
    }
    let len = u32::from_ne_bytes([in_header[0], in_header[1], in_header[2], in_header[3]]) as usize;
    let op_len = len
        .checked_sub(IN_HEADER_LEN + payload_sz)
        .ok_or(RebuildError::Short {
            len,
            payload: payload_sz,
        })?;
    if op_len > OP_IN_LEN {
        return Err(RebuildError::OpIn(op_len));
    }
    let start = GAP - IN_HEADER_LEN - op_len;
    if start.is_multiple_of(8) {
        buf[start..start + IN_HEADER_LEN].copy_from_slice(in_header);
        buf[start + IN_HEADER_LEN..GAP].copy_from_slice(&op_in[..op_len]);
        return Ok(Rebuilt::InPlace { start, len });
    }
    scratch.clear();
    scratch.resize(len.div_ceil(8), 0);
    // SAFETY: `scratch` owns `len.div_ceil(8) * 8 >= len` initialised bytes;
    // u8 has no alignment or validity requirement; the slice ends before
    // `scratch` is used again.
    let out = unsafe { std::slice::from_raw_parts_mut(scratch.as_mut_ptr().cast::<u8>(), len) };
    out[..IN_HEADER_LEN].copy_from_slice(in_header);
    out[IN_HEADER_LEN..IN_HEADER_LEN + op_len].copy_from_slice(&op_in[..op_len]);
    out[IN_HEADER_LEN + op_len..].copy_from_slice(&buf[GAP..GAP + payload_sz]);
    Ok(Rebuilt::Scratch { len })
}

/// The reply of the request an entry is serving: fuser hands it over
/// (possibly from another thread) and the queue's thread copies it into
/// the entry once the request's buffer is no longer borrowed.
#[derive(Debug, Default)]
struct Slot {
    state: Mutex<SlotState>,
    ready: Condvar,
}

#[derive(Debug, Default)]
struct SlotState {
    replied: bool,
    /// `fuse_out_header` followed by the reply's arguments.
    bytes: Vec<u8>,
}

impl ReplySink for Slot {
    fn send(&self, data: &[IoSlice<'_>]) -> std::io::Result<()> {
        let mut st = self.state.lock();
        st.bytes.clear();
        for part in data {
            st.bytes.extend_from_slice(part);
        }
        st.replied = true;
        self.ready.notify_one();
        Ok(())
    }
}

impl Slot {
    /// Wait for the reply (fuser always replies, if only with `EIO` when a
    /// reply object is dropped unanswered) and hand it out.
    fn take(&self, out: &mut Vec<u8>) {
        let mut st = self.state.lock();
        let mut waited = 0u32;
        while !st.replied {
            if self
                .ready
                .wait_for(&mut st, std::time::Duration::from_secs(10))
                .timed_out()
            {
                // A reply that went elsewhere (to /dev/fuse) would leave the
                // entry waiting forever: say so rather than hang silently.
                waited += 10;
                tracing::warn!("io_uring entry: no reply after {waited} s");
            }
        }
        st.replied = false;
        std::mem::swap(out, &mut st.bytes);
    }
}

/// One registered ring entry: buffers the kernel reads and writes while it
/// owns the entry (between a submitted command and its completion).
struct Entry {
    header: Box<UnsafeCell<ReqHeader>>,
    /// `GAP` bytes for rebuilding, then the registered payload buffer.
    buf: Box<[UnsafeCell<u64>]>,
    iov: Box<[libc::iovec; 2]>,
    slot: Arc<Slot>,
}

// SAFETY: the iovec pointers point into the entry's own heap buffers, which
// move with it; only the queue's thread (the entry's owner) dereferences
// them, and the kernel uses them only while the entry's command is pending.
unsafe impl Send for Entry {}

impl Entry {
    fn new(payload_len: usize) -> Entry {
        let words = (GAP + payload_len).div_ceil(8);
        let header = Box::new(UnsafeCell::new(ReqHeader {
            in_out: [0; 128],
            op_in: [0; OP_IN_LEN],
            ent: EntInOut::default(),
        }));
        let buf: Box<[UnsafeCell<u64>]> = (0..words).map(|_| UnsafeCell::new(0)).collect();
        let base = UnsafeCell::raw_get(buf.as_ptr()).cast::<u8>();
        let iov = Box::new([
            libc::iovec {
                iov_base: header.get().cast(),
                iov_len: std::mem::size_of::<ReqHeader>(),
            },
            libc::iovec {
                // SAFETY: `GAP < words * 8`: the offset stays inside `buf`.
                iov_base: unsafe { base.add(GAP) }.cast(),
                iov_len: payload_len,
            },
        ]);
        Entry {
            header,
            buf,
            iov,
            slot: Arc::new(Slot::default()),
        }
    }

    /// The whole buffer (gap and payload) as bytes.
    ///
    /// # Safety
    /// Only while the kernel does not own the entry (after its command
    /// completed, before the next is submitted), and no other reference
    /// into the buffer is alive.
    #[allow(clippy::mut_from_ref)]
    unsafe fn bytes(&self) -> &mut [u8] {
        let base = UnsafeCell::raw_get(self.buf.as_ptr()).cast::<u8>();
        // SAFETY: `buf` owns `len * 8` initialised bytes; the caller
        // guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(base, self.buf.len() * 8) }
    }

    /// The header buffer.
    ///
    /// # Safety
    /// As for [`Entry::bytes`].
    #[allow(clippy::mut_from_ref)]
    unsafe fn header(&self) -> &mut ReqHeader {
        // SAFETY: see the caller's guarantee.
        unsafe { &mut *self.header.get() }
    }
}

/// Give `sqe` the `len` field the kernel reads for `REGISTER` (2 iovecs);
/// the io-uring crate's `UringCmd80` sets `addr` but not `len`.
fn with_len(sqe: squeue::Entry128, len: u32) -> squeue::Entry128 {
    const _: () = assert!(std::mem::size_of::<squeue::Entry128>() == 128);
    // SAFETY: `Entry128` is `#[repr(C)]`: a 64-byte `io_uring_sqe` (plain
    // integers and unions of them, valid for any bytes) followed by
    // `[u8; 64]`; 128 bytes both ways (checked above).
    let mut raw: [u8; 128] = unsafe { std::mem::transmute(sqe) };
    // `io_uring_sqe.len` is the u32 at offset 24.
    raw[24..28].copy_from_slice(&len.to_ne_bytes());
    // SAFETY: as above, back to the same type.
    unsafe { std::mem::transmute::<[u8; 128], squeue::Entry128>(raw) }
}

/// One queue: its ring, entries and thread.
struct Queue {
    qid: u16,
    ring: IoUring<squeue::Entry128, cqueue::Entry>,
    entries: Vec<Entry>,
}

impl Queue {
    fn new(qid: u16, params: UringParams) -> std::io::Result<Queue> {
        let ring = IoUring::<squeue::Entry128, cqueue::Entry>::builder()
            .build((ENTRIES_PER_QUEUE * 2) as u32)?;
        let entries = (0..ENTRIES_PER_QUEUE)
            .map(|_| Entry::new(params.payload_len))
            .collect();
        Ok(Queue { qid, ring, entries })
    }

    fn push(&mut self, sqe: squeue::Entry128) -> std::io::Result<()> {
        // SAFETY: every buffer the command names (the iovec array, the
        // header and payload buffers) belongs to `self.entries`, which
        // outlive the ring: the thread returns only after every entry's
        // command completed (or the ring, dropped first, cancelled it).
        unsafe { self.ring.submission().push(&sqe) }
            .map_err(|_| std::io::Error::other("io_uring submission queue full"))
    }

    /// Register every entry with the kernel.
    fn register(&mut self, fd: i32) -> std::io::Result<()> {
        for i in 0..self.entries.len() {
            let iov = self.entries[i].iov.as_ptr() as u64;
            let sqe = opcode::UringCmd80::new(types::Fd(fd), CMD_REGISTER)
                .cmd(cmd_req(0, self.qid))
                .addr(Some(iov))
                .build()
                .user_data(i as u64);
            self.push(with_len(sqe, 2))?;
        }
        self.ring.submit()?;
        Ok(())
    }

    /// Serve until the kernel has ended every entry (unmount, abort).
    fn serve<FS: Filesystem>(
        &mut self,
        fd: i32,
        dispatcher: &Dispatcher<FS>,
        stats: &UringStats,
    ) -> std::io::Result<()> {
        let mut live = self.entries.len();
        let mut scratch = Vec::new();
        let mut reply = Vec::new();
        let mut done = Vec::with_capacity(self.entries.len());
        while live > 0 {
            match self.ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) => return Err(e),
            }
            done.clear();
            done.extend(self.ring.completion().map(|c| (c.user_data(), c.result())));
            for &(idx, res) in &done {
                let Some(entry) = usize::try_from(idx).ok().and_then(|i| self.entries.get(i))
                else {
                    continue;
                };
                if res < 0 {
                    // The kernel ended this entry (ENOTCONN at unmount,
                    // ECANCELED, or a refused command).
                    if res != -libc::ENOTCONN && res != -libc::ECANCELED {
                        tracing::warn!(
                            qid = self.qid,
                            "io_uring entry ended: {}",
                            std::io::Error::from_raw_os_error(-res)
                        );
                    }
                    live -= 1;
                    continue;
                }
                let commit_id = serve_one(entry, dispatcher, &mut scratch, &mut reply);
                stats.count(self.qid);
                let sqe = opcode::UringCmd80::new(types::Fd(fd), CMD_COMMIT_AND_FETCH)
                    .cmd(cmd_req(commit_id, self.qid))
                    .build()
                    .user_data(idx);
                self.push(sqe)?;
            }
        }
        Ok(())
    }
}

/// Serve the request an entry holds and leave the reply in the entry;
/// returns the commit id.
fn serve_one<FS: Filesystem>(
    entry: &Entry,
    dispatcher: &Dispatcher<FS>,
    scratch: &mut Vec<u64>,
    reply: &mut Vec<u8>,
) -> u64 {
    // SAFETY: the entry's command completed: the kernel does not touch its
    // buffers until the commit is submitted, after this function; the
    // references end before it returns.
    let (header, buf) = unsafe { (entry.header(), entry.bytes()) };
    let commit_id = header.ent.commit_id;
    let mut in_header = [0u8; IN_HEADER_LEN];
    in_header.copy_from_slice(&header.in_out[..IN_HEADER_LEN]);
    let opcode = u32::from_ne_bytes([in_header[4], in_header[5], in_header[6], in_header[7]]);
    let rebuilt = rebuild(
        &in_header,
        &header.op_in,
        header.ent.payload_sz as usize,
        buf,
        scratch,
    );
    let sink: Arc<dyn ReplySink> = entry.slot.clone();
    let dispatched = match rebuilt {
        Ok(Rebuilt::InPlace { start, len }) => dispatcher
            .dispatch(&buf[start..start + len], sink)
            .map_err(|e| e.to_string()),
        Ok(Rebuilt::Scratch { len }) => {
            // SAFETY: `rebuild` filled the first `len` bytes of `scratch`.
            let bytes = unsafe { std::slice::from_raw_parts(scratch.as_ptr().cast::<u8>(), len) };
            dispatcher.dispatch(bytes, sink).map_err(|e| e.to_string())
        }
        Err(e) => Err(e.to_string()),
    };
    // FORGET and BATCH_FORGET have no reply (the kernel sends them through
    // /dev/fuse, never here): answer so the entry is not lost.
    let no_reply = NO_REPLY_OPCODES.contains(&opcode);
    let errno = match dispatched {
        Ok(()) if !no_reply => {
            entry.slot.take(reply);
            None
        }
        Ok(()) => Some(libc::ENOSYS),
        Err(e) => {
            tracing::warn!(opcode, "bad request from the io_uring: {e}");
            Some(libc::EIO)
        }
    };
    let (out_header, data): (&[u8], &[u8]) = match errno {
        None if reply.len() >= OUT_HEADER_LEN
            && reply.len() - OUT_HEADER_LEN <= buf.len() - GAP =>
        {
            reply.split_at(OUT_HEADER_LEN)
        }
        None => {
            tracing::warn!(
                opcode,
                len = reply.len(),
                "reply does not fit the ring entry"
            );
            (&[][..], &[][..])
        }
        Some(_) => (&[][..], &[][..]),
    };
    if out_header.len() == OUT_HEADER_LEN {
        header.in_out[..OUT_HEADER_LEN].copy_from_slice(out_header);
        buf[GAP..GAP + data.len()].copy_from_slice(data);
        header.ent.payload_sz = data.len() as u32;
    } else {
        let err = errno.unwrap_or(libc::EIO);
        header.in_out[..OUT_HEADER_LEN].fill(0);
        header.in_out[0..4].copy_from_slice(&(OUT_HEADER_LEN as u32).to_ne_bytes());
        header.in_out[4..8].copy_from_slice(&(-err).to_ne_bytes());
        header.in_out[8..16].copy_from_slice(&commit_id.to_ne_bytes());
        header.ent.payload_sz = 0;
    }
    commit_id
}

/// Serve the mount over io_uring: one thread per queue (pinned to its CPU
/// where allowed), until the kernel ends the ring at unmount. `fd` is a
/// descriptor of the session's `/dev/fuse` connection. If the queues cannot
/// be set up, the kernel is told (a refused registration makes it fall back
/// to `/dev/fuse`) and the error returned.
///
/// # Errors
/// Setting up a queue or waiting on its ring failed.
pub fn serve<FS: Filesystem>(
    dispatcher: Dispatcher<FS>,
    fd: OwnedFd,
    params: UringParams,
    stats: &UringStats,
) -> std::io::Result<()> {
    let raw = fd.as_raw_fd();
    let n = possible_cpus();
    let mut queues = Vec::with_capacity(n);
    for qid in 0..n {
        let q = u16::try_from(qid)
            .map_err(|_| std::io::Error::other("too many CPUs for io_uring queue ids"))
            .and_then(|qid| Queue::new(qid, params));
        match q {
            Ok(q) => queues.push(q),
            Err(e) => {
                tracing::error!("io_uring queue {qid}: {e}; serving through /dev/fuse");
                if let Some(q) = queues.first_mut() {
                    give_up(q, raw);
                }
                return Err(e);
            }
        }
    }
    std::thread::scope(|s| {
        let handles: Vec<_> = queues
            .into_iter()
            .map(|mut q| {
                let d = dispatcher.clone();
                std::thread::Builder::new()
                    .name(format!("manyfs-uring-{}", q.qid))
                    .spawn_scoped(s, move || {
                        pin_to_cpu(usize::from(q.qid));
                        q.register(raw)?;
                        q.serve(raw, &d, stats)
                    })
            })
            .collect();
        let mut first = Ok(());
        for h in handles {
            let r = match h {
                Ok(h) => h.join().unwrap_or_else(|_| {
                    Err(std::io::Error::other("io_uring queue thread panicked"))
                }),
                Err(e) => Err(e),
            };
            if let Err(e) = r {
                tracing::error!("io_uring queue: {e}");
                if first.is_ok() {
                    first = Err(e);
                }
            }
        }
        first
    })
}

/// Make the kernel give up on the ring: a registration with a bad iovec
/// count is refused, which clears the connection's io_uring mode so that
/// requests go to `/dev/fuse` again.
fn give_up(q: &mut Queue, fd: i32) {
    let sqe = opcode::UringCmd80::new(types::Fd(fd), CMD_REGISTER)
        .cmd(cmd_req(0, q.qid))
        .build()
        .user_data(u64::MAX);
    if q.push(with_len(sqe, 0)).is_ok() {
        let _ = q.ring.submit_and_wait(1);
    }
}

/// Pin this thread to `cpu`; where not allowed, it stays unpinned.
fn pin_to_cpu(cpu: usize) {
    if let Err(e) = manyfs::diag::affinity::set(0, &[cpu]) {
        tracing::debug!(cpu, "cannot pin io_uring queue thread: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abi_sizes() {
        assert_eq!(std::mem::size_of::<EntInOut>(), 32);
        assert_eq!(std::mem::size_of::<ReqHeader>(), 288);
        assert_eq!(std::mem::offset_of!(ReqHeader, ent), 256);
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list_max("0"), Some(0));
        assert_eq!(parse_cpu_list_max("0-1"), Some(1));
        assert_eq!(parse_cpu_list_max("0-3,5,8-11"), Some(11));
        assert_eq!(parse_cpu_list_max("x"), None);
        assert!(possible_cpus() >= 1);
    }

    #[test]
    fn register_sqe_has_len_addr_and_command() {
        let sqe = opcode::UringCmd80::new(types::Fd(7), CMD_REGISTER)
            .cmd(cmd_req(0x1122, 3))
            .addr(Some(0xdead_beef))
            .build()
            .user_data(42);
        let sqe = with_len(sqe, 2);
        assert_eq!(sqe.get_user_data(), 42);
        assert_eq!(sqe.get_opcode(), u32::from(opcode::UringCmd80::CODE));
        // SAFETY: as in `with_len`.
        let raw: [u8; 128] = unsafe { std::mem::transmute(sqe) };
        assert_eq!(raw[0], opcode::UringCmd80::CODE);
        assert_eq!(i32::from_ne_bytes(raw[4..8].try_into().unwrap()), 7);
        assert_eq!(
            u32::from_ne_bytes(raw[8..12].try_into().unwrap()),
            CMD_REGISTER
        );
        assert_eq!(
            u64::from_ne_bytes(raw[16..24].try_into().unwrap()),
            0xdead_beef
        );
        assert_eq!(u32::from_ne_bytes(raw[24..28].try_into().unwrap()), 2);
        assert_eq!(u64::from_ne_bytes(raw[32..40].try_into().unwrap()), 42);
        // fuse_uring_cmd_req at the command area (offset 48).
        assert_eq!(u64::from_ne_bytes(raw[56..64].try_into().unwrap()), 0x1122);
        assert_eq!(u16::from_ne_bytes(raw[64..66].try_into().unwrap()), 3);
    }

    fn header(len: u32, opcode: u32) -> [u8; IN_HEADER_LEN] {
        let mut h = [0u8; IN_HEADER_LEN];
        h[0..4].copy_from_slice(&len.to_ne_bytes());
        h[4..8].copy_from_slice(&opcode.to_ne_bytes());
        h[8..16].copy_from_slice(&77u64.to_ne_bytes());
        h
    }

    #[test]
    fn rebuild_in_place_and_in_scratch() {
        let entry = Entry::new(64);
        // SAFETY: the entry was never registered: nothing else uses it.
        let buf = unsafe { entry.bytes() };
        buf[GAP..GAP + 5].copy_from_slice(b"hello");
        let mut op_in = [0u8; OP_IN_LEN];
        op_in[..16].copy_from_slice(&[9; 16]);
        let mut scratch = Vec::new();
        // A write-like request: 16-byte fixed argument, 5 bytes of payload.
        let h = header(40 + 16 + 5, 16);
        let r = rebuild(&h, &op_in, 5, buf, &mut scratch).unwrap();
        let Rebuilt::InPlace { start, len } = r else {
            panic!("{r:?}")
        };
        assert_eq!(len, 61);
        assert_eq!(start % 8, 0);
        assert_eq!(&buf[start..start + 40], &h);
        assert_eq!(&buf[start + 40..start + 56], &[9; 16]);
        assert_eq!(&buf[start + 56..start + 61], b"hello");
        // An odd-sized fixed argument goes through the aligned scratch.
        let h = header(40 + 12 + 5, 16);
        let r = rebuild(&h, &op_in, 5, buf, &mut scratch).unwrap();
        assert_eq!(r, Rebuilt::Scratch { len: 57 });
        // SAFETY: `rebuild` filled 57 bytes.
        let s = unsafe { std::slice::from_raw_parts(scratch.as_ptr().cast::<u8>(), 57) };
        assert_eq!(&s[..40], &h);
        assert_eq!(&s[40..52], &[9; 12]);
        assert_eq!(&s[52..], b"hello");
    }

    #[test]
    fn rebuild_refuses_hostile_lengths() {
        let entry = Entry::new(64);
        // SAFETY: the entry was never registered: nothing else uses it.
        let buf = unsafe { entry.bytes() };
        let op_in = [0u8; OP_IN_LEN];
        let mut scratch = Vec::new();
        let cap = buf.len() - GAP;
        assert_eq!(
            rebuild(&header(40, 1), &op_in, cap + 1, buf, &mut scratch),
            Err(RebuildError::Payload {
                payload: cap + 1,
                cap
            })
        );
        assert_eq!(
            rebuild(&header(41, 1), &op_in, 8, buf, &mut scratch),
            Err(RebuildError::Short {
                len: 41,
                payload: 8
            })
        );
        assert_eq!(
            rebuild(&header(40 + 200, 1), &op_in, 0, buf, &mut scratch),
            Err(RebuildError::OpIn(200))
        );
        assert_eq!(
            rebuild(&header(0, 1), &op_in, 0, buf, &mut scratch),
            Err(RebuildError::Short { len: 0, payload: 0 })
        );
    }

    #[test]
    fn slot_hands_over_the_reply() {
        let slot = Arc::new(Slot::default());
        let s2 = slot.clone();
        let t = std::thread::spawn(move || {
            s2.send(&[IoSlice::new(b"0123456789abcdef"), IoSlice::new(b"xyz")])
                .unwrap();
        });
        let mut out = Vec::new();
        slot.take(&mut out);
        t.join().unwrap();
        assert_eq!(out, b"0123456789abcdefxyz");
    }
}
