//! The emulated remote-NUMA access cost ([`crate::RemoteCost`]).
//!
//! On an emulated topology every pool member is ordinary local memory, so
//! a thread that touches "another node's" member pays nothing. With the
//! model on, the media charges such an access: the calling thread
//! busy-waits, spinning on the clock, for the remote bytes (in whole cache
//! lines) times the configured nanoseconds per KiB. (On the clock, not a
//! calibrated count of `pause` iterations: an iteration's time follows the
//! core's frequency, which may rise after any calibration and make every
//! wait short.)
//! It busy-waits rather than sleeps so that, as with a real memory stall,
//! the CPU is occupied for the time: with more threads than cores, the
//! others cannot use it meanwhile.
//!
//! Nothing here writes memory another thread reads: the model is read-only
//! after the mount, and what a thread still owes (less than
//! [`MIN_WAIT_PS`]) and has been charged live in thread-locals. With the model
//! off the media tests one `Option` and calls nothing.

use super::parse_model_option;
use crate::topology::Topology;
use std::cell::Cell;

/// The emulated remote-access cost model ([`crate::MountOptions::remote_cost`]):
/// a thread that reads (writes) a byte range of a pool member whose node
/// is not the thread's current node ([`crate::Topology::current_node`])
/// busy-waits `read_ns_per_kib` (`write_ns_per_kib`) nanoseconds per KiB
/// of it, counted in whole 64-byte cache lines. Local accesses cost
/// nothing extra.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteCost {
    /// Extra nanoseconds per KiB read from another node's member.
    pub read_ns_per_kib: u32,
    /// Extra nanoseconds per KiB written to another node's member.
    pub write_ns_per_kib: u32,
}

impl RemoteCost {
    /// Defaults derived from the NUMA-aware NOVA paper's Optane DC
    /// measurements (its Fig. 5, Intel MLC, 8 cores, the point where
    /// it states both the remote bandwidth and the local/remote ratio):
    ///
    /// - write: remote 6.5 GB/s, local 1.86x that = 12.09 GB/s; per core
    ///   0.8125 and 1.511 GB/s, so one KiB takes 1260.3 ns remote and
    ///   677.6 ns local: **+583 ns per KiB** remote;
    /// - read: remote 15 GB/s, local 1.98x that = 29.7 GB/s; per core
    ///   1.875 and 3.7125 GB/s, so one KiB takes 546.1 ns remote and
    ///   275.8 ns local: **+270 ns per KiB** remote.
    ///
    /// The extra time is the paper's absolute per-core difference, added on
    /// top of whatever the local medium costs here (DRAM, faster than
    /// Optane): remote accesses are relatively slower here than on the
    /// paper's machine. `remote_cost=R/W` sets other values.
    pub const PAPER: RemoteCost = RemoteCost {
        read_ns_per_kib: 270,
        write_ns_per_kib: 583,
    };

    /// Parse a `remote_cost=` value: `off` (None), `paper` or `on`
    /// ([`RemoteCost::PAPER`]), or `READ/WRITE` in nanoseconds per KiB
    /// (`270/583`).
    pub fn parse_option(s: &str) -> crate::Result<Option<RemoteCost>> {
        parse_model_option(
            s,
            RemoteCost::PAPER,
            "remote cost",
            "off, paper or READ/WRITE nanoseconds per KiB, e.g. 270/583, at most 1000000 each",
            |v| {
                let (r, w) = v.split_once('/')?;
                let parse = |x: &str| x.trim().parse::<u32>().ok().filter(|&n| n <= 1_000_000);
                Some(RemoteCost {
                    read_ns_per_kib: parse(r)?,
                    write_ns_per_kib: parse(w)?,
                })
            },
        )
    }
}

impl std::fmt::Display for RemoteCost {
    /// `270/583` (read/write nanoseconds per KiB), the form
    /// [`RemoteCost::parse_option`] reads back.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.read_ns_per_kib, self.write_ns_per_kib)
    }
}

/// The unit accesses are charged in: a cache line.
const LINE: u64 = 64;

thread_local! {
    /// Picoseconds charged to this thread but not yet waited out (less
    /// than [`MIN_WAIT_PS`]).
    static DEBT_PS: Cell<u64> = const { Cell::new(0) };
    /// Picoseconds charged to this thread in all.
    static CHARGED_PS: Cell<u64> = const { Cell::new(0) };
}

/// Nanoseconds of emulated remote-access cost charged to the calling
/// thread so far (by every mount with [`crate::MountOptions::remote_cost`]
/// on). For tests and benchmarks: the difference across an operation is
/// what the model added to it.
pub fn charged_ns() -> u64 {
    CHARGED_PS.with(|c| c.get() / 1000)
}

/// The cost model of one mount: which byte ranges are on which node, and
/// the price of a remote KiB.
#[derive(Debug)]
pub(crate) struct RemoteModel {
    cost: RemoteCost,
    topology: Topology,
    /// `(start, end, node)` of each member, in pool order.
    members: Box<[(u64, u64, u32)]>,
}

/// Whether an access reads or writes (they cost differently).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    Write,
}

impl RemoteModel {
    /// The model for members `(start, len, node)` under `topology`.
    pub fn new(
        cost: RemoteCost,
        topology: Topology,
        members: impl Iterator<Item = (u64, u64, u32)>,
    ) -> RemoteModel {
        RemoteModel {
            cost,
            topology,
            members: members.map(|(s, l, n)| (s, s + l, n)).collect(),
        }
    }

    /// Extra picoseconds an access of `[off, off+len)` by a thread on
    /// `node` costs: the bytes of it on other nodes' members, rounded up
    /// to whole cache lines, times the price per KiB.
    pub fn cost_ps(&self, node: usize, off: u64, len: u64, access: Access) -> u64 {
        let end = off.saturating_add(len);
        let remote: u64 = self
            .members
            .iter()
            .filter(|&&(_, _, n)| n as usize != node)
            .map(|&(s, e, _)| end.min(e).saturating_sub(off.max(s)))
            .sum();
        if remote == 0 {
            return 0;
        }
        let per_kib = u64::from(match access {
            Access::Read => self.cost.read_ns_per_kib,
            Access::Write => self.cost.write_ns_per_kib,
        });
        // ns/KiB * bytes / 1024 * 1000 ps/ns.
        remote.div_ceil(LINE) * LINE * per_kib * 1000 / 1024
    }

    /// Charge the calling thread for an access of `[off, off+len)`: spin
    /// out its cost if any of it is on another node than the thread's.
    pub fn charge(&self, off: u64, len: usize, access: Access) {
        let ps = self.cost_ps(self.topology.current_node(), off, len as u64, access);
        if ps != 0 {
            spin_ps(ps);
        }
    }
}

/// The shortest wait spun out at once: a few clock reads' worth. Smaller
/// charges (a remote cache line costs tens of nanoseconds) add up in the
/// thread's debt until they reach it.
const MIN_WAIT_PS: u64 = 100_000;

/// Busy-wait `ps` picoseconds (plus what this thread still owed) on the
/// clock, once the total reaches [`MIN_WAIT_PS`]; less is owed to the next
/// charge. A wait lasts at least what it owes (time spun beyond it is not
/// credited).
fn spin_ps(ps: u64) {
    CHARGED_PS.with(|c| c.set(c.get().wrapping_add(ps)));
    let owed = DEBT_PS.with(|d| d.get()) + ps;
    if owed < MIN_WAIT_PS {
        DEBT_PS.with(|d| d.set(owed));
        return;
    }
    DEBT_PS.with(|d| d.set(owed % 1000));
    let wait = std::time::Duration::from_nanos(owed / 1000);
    let start = std::time::Instant::now();
    while start.elapsed() < wait {
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two members of 1 MiB: node 0 then node 1, on an emulated 2x1.
    fn model() -> RemoteModel {
        RemoteModel::new(
            RemoteCost::PAPER,
            Topology::emulated(2, 1),
            [(0, 1 << 20, 0), (1 << 20, 1 << 20, 1)].into_iter(),
        )
    }

    #[test]
    fn only_bytes_on_other_nodes_cost() {
        let m = model();
        assert_eq!(m.cost_ps(0, 4096, 4096, Access::Read), 0);
        assert_eq!(m.cost_ps(1, (1 << 20) + 8192, 4096, Access::Write), 0);
        // 4 KiB remote: 4 x 270 ns read, 4 x 583 ns write.
        assert_eq!(m.cost_ps(1, 4096, 4096, Access::Read), 4 * 270_000);
        assert_eq!(m.cost_ps(0, 1 << 20, 4096, Access::Write), 4 * 583_000);
        // A range across the boundary pays for its remote part only.
        assert_eq!(
            m.cost_ps(0, (1 << 20) - 2048, 4096, Access::Read),
            2 * 270_000
        );
        // Small accesses pay a whole cache line.
        assert_eq!(m.cost_ps(0, 1 << 20, 8, Access::Read), 64 * 270_000 / 1024);
        // A node no member is on finds every member remote.
        assert_eq!(m.cost_ps(5, 0, 1024, Access::Read), 270_000);
    }

    #[test]
    fn the_wait_is_at_least_the_cost_and_is_counted() {
        let before = charged_ns();
        let t = std::time::Instant::now();
        // 2 ms of cost in 1000 small charges: the remainders add up.
        for _ in 0..1000 {
            spin_ps(2_000_000);
        }
        let waited = t.elapsed();
        assert_eq!(charged_ns() - before, 2_000_000);
        // Every charge is waited out on the clock, at least in full.
        assert!(
            waited.as_nanos() as u64 >= 2_000_000,
            "waited {waited:?} for 2 ms of cost"
        );
        // Charges below the shortest wait are owed, then waited together.
        let t = std::time::Instant::now();
        for _ in 0..100 {
            spin_ps(MIN_WAIT_PS / 10);
        }
        assert!(t.elapsed().as_nanos() as u64 >= 9 * MIN_WAIT_PS / 1000);
    }
}
