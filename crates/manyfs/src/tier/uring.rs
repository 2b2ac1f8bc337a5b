//! io_uring submission of data-device transfers (`device_io=uring`).
//!
//! One ring per thread (created at the thread's first batch, dropped with
//! the thread): a ring is not shared, so submitting takes no lock and
//! touches no line another thread writes. A batch of transfers is pushed
//! whole (in chunks of [`RING_ENTRIES`]) and waited for with one
//! `io_uring_enter` per chunk; nothing is left in flight when [`run`]
//! returns, except after a failure of the wait itself, which [`run`]
//! reports so that the caller keeps the buffers alive (leaks them).

use io_uring::{IoUring, opcode, types};
use std::cell::RefCell;
use std::os::fd::RawFd;

/// Submission queue entries of each thread's ring: the most transfers in
/// flight at once per thread (a batch with more goes in chunks).
pub(crate) const RING_ENTRIES: u32 = 64;

thread_local! {
    static RING: RefCell<Option<IoUring>> = const { RefCell::new(None) };
}

/// One transfer of a batch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Op {
    /// Write `len` bytes from `ptr` (else read `len` bytes into it).
    pub(crate) write: bool,
    /// The buffer (4 KiB aligned for `O_DIRECT`).
    pub(crate) ptr: *mut u8,
    /// Its length.
    pub(crate) len: u32,
    /// The device byte offset.
    pub(crate) off: u64,
}

/// Why a batch failed as a whole.
#[derive(Debug)]
pub(crate) enum RunError {
    /// No ring could be made for this thread (nothing was submitted): the
    /// caller does the transfers itself.
    NoRing(std::io::Error),
    /// Waiting for completions failed with transfers still in flight: the
    /// kernel may still use their buffers, which must never be freed.
    InFlight(std::io::Error),
}

/// Whether this process may use io_uring for reads and writes: `Err` with
/// the kernel's reason (a container or sysctl that disables io_uring
/// refuses `io_uring_setup`; a kernel older than 5.6 lacks the opcodes).
/// A ring made here becomes the calling thread's.
pub(crate) fn probe() -> Result<(), String> {
    let ring = IoUring::new(RING_ENTRIES).map_err(|e| format!("io_uring_setup: {e}"))?;
    let mut probe = io_uring::Probe::new();
    ring.submitter()
        .register_probe(&mut probe)
        .map_err(|e| format!("io_uring probe: {e}"))?;
    for (code, name) in [(opcode::Read::CODE, "READ"), (opcode::Write::CODE, "WRITE")] {
        if !probe.is_supported(code) {
            return Err(format!("the kernel's io_uring lacks IORING_OP_{name}"));
        }
    }
    RING.with(|r| {
        let mut r = r.borrow_mut();
        if r.is_none() {
            *r = Some(ring);
        }
    });
    Ok(())
}

/// Run every transfer of `ops` on `fd`: all pushed before the wait (per
/// chunk of [`RING_ENTRIES`]). Returns, per op, the bytes transferred (a
/// short count is possible; the caller finishes it) or its error.
///
/// # Safety
///
/// For each op, `[ptr, ptr + len)` must be valid for writes (a read) or
/// reads (a write) and must not be accessed or freed by anyone else until
/// this returns; after [`RunError::InFlight`] it must never be freed.
pub(crate) unsafe fn run(fd: RawFd, ops: &[Op]) -> Result<Vec<std::io::Result<usize>>, RunError> {
    RING.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(IoUring::new(RING_ENTRIES).map_err(RunError::NoRing)?);
        }
        let ring = slot.as_mut().expect("made above");
        let mut results: Vec<std::io::Result<usize>> = Vec::with_capacity(ops.len());
        for (c, chunk) in ops.chunks(RING_ENTRIES as usize).enumerate() {
            let base = c * RING_ENTRIES as usize;
            {
                let mut sq = ring.submission();
                for (i, op) in chunk.iter().enumerate() {
                    let fd = types::Fd(fd);
                    let entry = if op.write {
                        opcode::Write::new(fd, op.ptr, op.len)
                            .offset(op.off)
                            .build()
                    } else {
                        opcode::Read::new(fd, op.ptr, op.len).offset(op.off).build()
                    };
                    // SAFETY: the caller keeps each buffer valid and
                    // otherwise untouched until this function returns, and
                    // it returns only once every pushed entry completed
                    // (or reports `InFlight`, when the caller leaks them).
                    // The queue was empty and a chunk fits it, so the push
                    // cannot fail (checked all the same).
                    let pushed = unsafe { sq.push(&entry.user_data((base + i) as u64)) };
                    debug_assert!(pushed.is_ok(), "a chunk fits an empty ring");
                }
                sq.sync();
            }
            let mut done: Vec<Option<std::io::Result<usize>>> =
                (0..chunk.len()).map(|_| None).collect();
            let mut left = chunk.len();
            while left > 0 {
                if let Err(e) = ring.submit_and_wait(left) {
                    match e.raw_os_error() {
                        Some(libc::EINTR | libc::EAGAIN | libc::EBUSY) => {}
                        _ => {
                            // The ring still holds requests: never reuse it
                            // (nor free it under them).
                            std::mem::forget(slot.take());
                            return Err(RunError::InFlight(e));
                        }
                    }
                }
                for cqe in ring.completion() {
                    let i = cqe.user_data() as usize - base;
                    let r = cqe.result();
                    let slot = done.get_mut(i).expect("user data names an op of the chunk");
                    if slot.is_none() {
                        left -= 1;
                    }
                    *slot = Some(if r < 0 {
                        Err(std::io::Error::from_raw_os_error(-r))
                    } else {
                        Ok(r as usize)
                    });
                }
            }
            results.extend(done.into_iter().map(|r| r.expect("every op completed")));
        }
        Ok(results)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_batch_larger_than_the_ring_runs_in_chunks_and_reports_each_result() {
        if let Err(why) = probe() {
            crate::test_support::skip(
                "a_batch_larger_than_the_ring_runs_in_chunks_and_reports_each_result",
                crate::test_support::Lack::Machine,
                format_args!("io_uring unavailable here ({why})"),
            );
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.path().join("f"))
            .unwrap();
        let n = RING_ENTRIES as usize * 2 + 3;
        let mut data: Vec<Vec<u8>> = (0..n).map(|i| vec![i as u8; 512]).collect();
        let ops: Vec<Op> = data
            .iter_mut()
            .enumerate()
            .map(|(i, d)| Op {
                write: true,
                ptr: d.as_mut_ptr(),
                len: 512,
                off: i as u64 * 512,
            })
            .collect();
        // SAFETY: each buffer is a live Vec untouched until `run` returns.
        let r = unsafe { run(f.as_raw_fd(), &ops) }.unwrap();
        assert!(r.iter().all(|r| matches!(r, Ok(512))));
        let mut back: Vec<Vec<u8>> = (0..n + 1).map(|_| vec![0xee; 512]).collect();
        let ops: Vec<Op> = back
            .iter_mut()
            .enumerate()
            .map(|(i, d)| Op {
                write: false,
                ptr: d.as_mut_ptr(),
                len: 512,
                off: i as u64 * 512,
            })
            .collect();
        // SAFETY: as above.
        let r = unsafe { run(f.as_raw_fd(), &ops) }.unwrap();
        for (i, res) in r.iter().enumerate().take(n) {
            assert_eq!(*res.as_ref().unwrap(), 512);
            assert!(back[i].iter().all(|&b| b == i as u8));
        }
        // Past the end of the file: a read of nothing.
        assert_eq!(*r[n].as_ref().unwrap(), 0);
        // A descriptor opened read-only refuses the write: the op's error.
        let ro = std::fs::File::open(dir.path().join("f")).unwrap();
        let mut b = vec![0u8; 512];
        let op = Op {
            write: true,
            ptr: b.as_mut_ptr(),
            len: 512,
            off: 0,
        };
        // SAFETY: as above.
        let r = unsafe { run(ro.as_raw_fd(), &[op]) }.unwrap();
        assert_eq!(r[0].as_ref().unwrap_err().raw_os_error(), Some(libc::EBADF));
    }
}
