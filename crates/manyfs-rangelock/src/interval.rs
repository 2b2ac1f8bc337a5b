//! The Linux-style range lock: held and waiting ranges in one list under
//! one mutex. Requests are granted in arrival order among those that
//! overlap, so writers cannot starve.

use super::{Access, LockKind, RangeLock, SegmentWord};
use parking_lot::{Condvar, Mutex};

#[derive(Debug, Clone, Copy)]
struct Request {
    ticket: u64,
    start: u64,
    end: u64,
    access: Access,
    granted: bool,
}

impl Request {
    fn conflicts(&self, other: &Request) -> bool {
        self.start < other.end
            && other.start < self.end
            && (self.access == Access::Write || other.access == Access::Write)
    }
}

#[derive(Default)]
struct State {
    next_ticket: u64,
    requests: Vec<Request>,
}

/// A range lock whose every acquire and release passes through one mutex.
#[derive(Default)]
pub struct IntervalLock {
    state: Mutex<State>,
    changed: Condvar,
}

impl IntervalLock {
    /// A new, empty lock.
    pub fn new() -> Self {
        Self::default()
    }
}

impl RangeLock for IntervalLock {
    fn acquire(&self, start: u64, end: u64, access: Access) -> Option<&SegmentWord> {
        let mut st = self.state.lock();
        let ticket = st.next_ticket;
        st.next_ticket += 1;
        st.requests.push(Request {
            ticket,
            start,
            end,
            access,
            granted: false,
        });
        loop {
            // Granted when nothing earlier (held or waiting) overlaps it.
            let me = *st
                .requests
                .iter()
                .find(|r| r.ticket == ticket)
                .expect("own request present");
            let blocked = st
                .requests
                .iter()
                .any(|r| r.ticket < ticket && r.conflicts(&me));
            if !blocked {
                if let Some(r) = st.requests.iter_mut().find(|r| r.ticket == ticket) {
                    r.granted = true;
                }
                return None;
            }
            self.changed.wait(&mut st);
        }
    }

    fn release(&self, start: u64, end: u64, access: Access) {
        let mut st = self.state.lock();
        if let Some(pos) = st
            .requests
            .iter()
            .position(|r| r.granted && r.start == start && r.end == end && r.access == access)
        {
            st.requests.swap_remove(pos);
        }
        drop(st);
        self.changed.notify_all();
    }

    fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.state.lock().requests.capacity() * std::mem::size_of::<Request>()
    }

    fn kind(&self) -> LockKind {
        LockKind::Interval
    }
}
