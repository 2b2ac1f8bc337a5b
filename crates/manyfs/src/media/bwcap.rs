//! The emulated per-node NVMM bandwidth cap ([`crate::BandwidthCap`]).
//!
//! On an emulated topology every pool member is ordinary DRAM, far faster
//! than one Optane DIMM and not limited per "node" at all, so threads
//! hammering one node's member never contend the way the NThread paper's
//! Figures 4 and 5 rely on. With the cap on, each node's member serves at
//! most `cap` weighted bytes per second (`W + R/3`), all threads together.
//!
//! # Per-CPU token buckets
//!
//! One shared counter per node would put a contended cache line on every
//! access. Instead each (node, CPU) pair has its own bucket, refilled at
//! `cap / CPUs` and holding at most [`BURST`] of that refill. An access
//! takes its cost from the bucket of the CPU the thread runs on (one
//! atomic subtraction on a line only that CPU's threads write). Only when
//! that bucket runs dry does the thread refill it from the clock, then
//! take what the same node's other CPUs' buckets hold unused, and, if that
//! is still short, busy-wait until its own bucket's refill has paid the
//! rest. All buckets of a node together are refilled at exactly `cap`, so
//! the node never serves more than `cap` (plus one burst per CPU), however
//! the threads are spread; a lone thread, taking what the idle CPUs'
//! buckets accumulate, still gets the whole `cap`.
//!
//! Costs are kept in thirds of a byte: a read byte costs 1, a written
//! byte 3, and a node's buckets are refilled at `3 * cap` together.
//!
//! The wait busy-spins (as [`super::remote`] does): a thread stalled on
//! memory occupies its CPU, so with more threads than CPUs the others
//! cannot use the time. The time waited is counted per thread
//! ([`throttled_ns`]).
//!
//! The buckets use `std` atomics directly, not the [`crate::sync`] shim:
//! they are an emulation knob, not a protocol whose interleavings matter.

use super::remote::Access;
use crate::topology::Topology;
use crossbeam_utils::CachePadded;
use std::cell::Cell;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The most a bucket holds: this long of its CPU's share of the cap. It
/// bounds how far a node can exceed the cap (by one burst per CPU) and how
/// much of the refill an idle CPU's bucket keeps for others to take.
pub(crate) const BURST: Duration = Duration::from_millis(5);

/// A written byte costs this many units, a read byte one: `W + R/3`.
const WRITE_UNITS: u64 = 3;

thread_local! {
    /// Nanoseconds this thread has waited for bandwidth in all.
    static THROTTLED_NS: Cell<u64> = const { Cell::new(0) };
}

/// Nanoseconds the calling thread has busy-waited for the emulated NVMM
/// bandwidth cap so far (under every mount with
/// [`crate::MountOptions::bandwidth_cap`] on). For tests and benchmarks:
/// the difference across an operation is what the cap added to it.
pub fn throttled_ns() -> u64 {
    THROTTLED_NS.with(|c| c.get())
}

/// Nanoseconds since a process-wide epoch (the buckets' clock).
fn now_ns() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// One (node, CPU) bucket: units available (negative: owed) and when it
/// was last refilled.
#[derive(Debug)]
struct Bucket {
    tokens: AtomicI64,
    refilled_ns: AtomicU64,
}

/// The cap of one mount: which byte ranges are on which node, and a bucket
/// per (node, CPU).
#[derive(Debug)]
pub(crate) struct BandwidthModel {
    topology: Topology,
    /// `(start, end, node)` of each member, in pool order.
    members: Box<[(u64, u64, u32)]>,
    /// `buckets[node * cpus + cpu]`.
    buckets: Box<[CachePadded<Bucket>]>,
    cpus: usize,
    /// Units per second each bucket is refilled with.
    units_per_sec_per_cpu: u64,
    /// The most units a bucket holds.
    burst: i64,
}

impl BandwidthModel {
    /// The cap `cap` for members `(start, len, node)` under `topology`.
    pub fn new(
        cap: crate::BandwidthCap,
        topology: Topology,
        members: impl Iterator<Item = (u64, u64, u32)>,
    ) -> BandwidthModel {
        let cpus = topology.cpu_count().max(1);
        let nodes = topology.node_count().max(1);
        let units_per_sec_per_cpu =
            (cap.bytes_per_sec.saturating_mul(WRITE_UNITS) / cpus as u64).max(1);
        let burst = (u128::from(units_per_sec_per_cpu) * BURST.as_nanos() / 1_000_000_000)
            .clamp(1, i64::MAX as u128) as i64;
        let now = now_ns();
        let buckets = (0..nodes * cpus)
            .map(|_| {
                CachePadded::new(Bucket {
                    tokens: AtomicI64::new(burst),
                    refilled_ns: AtomicU64::new(now),
                })
            })
            .collect();
        BandwidthModel {
            topology,
            members: members.map(|(s, l, n)| (s, s + l, n)).collect(),
            buckets,
            cpus,
            units_per_sec_per_cpu,
            burst,
        }
    }

    /// Charge the calling thread for an access of `[off, off+len)`: the
    /// weighted bytes of it on each node's member come out of that node's
    /// buckets, waiting where they are empty.
    pub fn charge(&self, off: u64, len: usize, access: Access) {
        let end = off.saturating_add(len as u64);
        let per_byte = match access {
            Access::Read => 1,
            Access::Write => WRITE_UNITS,
        };
        let mut cpu = None;
        for &(s, e, node) in self.members.iter() {
            let bytes = end.min(e).saturating_sub(off.max(s));
            if bytes == 0 {
                continue;
            }
            let cpu = *cpu.get_or_insert_with(|| self.topology.current_cpu());
            let units = i64::try_from(bytes.saturating_mul(per_byte)).unwrap_or(i64::MAX);
            self.take(node as usize, cpu, units);
        }
    }

    /// The bucket of (`node`, `cpu`); nodes past the topology's wrap.
    fn bucket(&self, node: usize, cpu: usize) -> &Bucket {
        let nodes = self.buckets.len() / self.cpus;
        &self.buckets[(node % nodes) * self.cpus + cpu % self.cpus]
    }

    /// Take `units` of `node`'s bandwidth on `cpu`: from its own bucket
    /// when that has them (the fast path), else see [`Self::take_slow`].
    fn take(&self, node: usize, cpu: usize, units: i64) {
        let own = self.bucket(node, cpu);
        let left = own.tokens.fetch_sub(units, Ordering::Relaxed) - units;
        if left < 0 {
            self.take_slow(node, cpu);
        }
    }

    /// `cpu`'s bucket of `node` is in debt: refill it, take unused units
    /// from the node's other CPUs' buckets, then wait out what is still
    /// owed at this bucket's refill rate.
    #[cold]
    fn take_slow(&self, node: usize, cpu: usize) {
        let now = now_ns();
        let own = self.bucket(node, cpu);
        self.refill(own, now);
        let mut owed = -own.tokens.load(Ordering::Relaxed).min(0);
        for other in (0..self.cpus).filter(|&c| c != cpu % self.cpus) {
            if owed == 0 {
                break;
            }
            let b = self.bucket(node, other);
            self.refill(b, now);
            let taken = b
                .tokens
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                    (t > 0).then(|| t - t.min(owed))
                })
                .map_or(0, |before| before.min(owed));
            if taken > 0 {
                own.tokens.fetch_add(taken, Ordering::Relaxed);
                owed -= taken;
            }
        }
        if owed > 0 {
            // The own bucket's refill pays the debt in this long; it is
            // refilled (and the debt cleared) by the next access that finds
            // it short.
            let wait_ns =
                u128::from(owed as u64) * 1_000_000_000 / u128::from(self.units_per_sec_per_cpu);
            let wait_ns = u64::try_from(wait_ns).unwrap_or(u64::MAX);
            spin_until(now.saturating_add(wait_ns));
            THROTTLED_NS.with(|c| c.set(c.get().saturating_add(wait_ns)));
        }
    }

    /// Add to `b` what its CPU's share of the cap brought since its last
    /// refill, up to [`BURST`]. Of racing refills only one adds.
    fn refill(&self, b: &Bucket, now: u64) {
        let last = b.refilled_ns.load(Ordering::Relaxed);
        if now <= last {
            return;
        }
        let add = u128::from(now - last) * u128::from(self.units_per_sec_per_cpu) / 1_000_000_000;
        if add == 0 {
            // Not a whole unit yet: keep the time for the next refill.
            return;
        }
        if b.refilled_ns
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return;
        }
        let add = i64::try_from(add).unwrap_or(i64::MAX);
        let burst = self.burst;
        let _ = b
            .tokens
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                Some(t.saturating_add(add).min(burst))
            });
    }
}

/// Busy-wait until the buckets' clock reads `deadline`.
fn spin_until(deadline: u64) {
    while now_ns() < deadline {
        for _ in 0..32 {
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BandwidthCap;

    /// A cap small enough that waiting, not copying, sets the pace.
    const CAP: u64 = 40_000_000;
    /// How long each measurement charges.
    const RUN: Duration = Duration::from_millis(300);
    /// One access.
    const CHUNK: usize = 64 << 10;

    /// Two members of 1 GiB: node 0 then node 1, on an emulated 2x1.
    fn model(cap: u64) -> BandwidthModel {
        BandwidthModel::new(
            BandwidthCap { bytes_per_sec: cap },
            Topology::emulated(2, 1),
            [(0, 1 << 30, 0), (1 << 30, 1 << 30, 1)].into_iter(),
        )
    }

    /// `nodes.len()` threads, thread `i` charging `access`es of node
    /// `nodes[i]`'s member for [`RUN`]: the bytes charged per second, all
    /// threads together.
    fn throughput(m: &BandwidthModel, nodes: &[u64], access: Access) -> f64 {
        throughput_and_wait(m, nodes, access).0
    }

    /// [`throughput`], and the nanoseconds the threads waited together.
    fn throughput_and_wait(m: &BandwidthModel, nodes: &[u64], access: Access) -> (f64, u64) {
        let start = Instant::now();
        let (bytes, waited) = std::thread::scope(|s| {
            let hs: Vec<_> = nodes
                .iter()
                .map(|&n| {
                    s.spawn(move || {
                        let mut done = 0u64;
                        while start.elapsed() < RUN {
                            m.charge(n << 30, CHUNK, access);
                            done += CHUNK as u64;
                        }
                        (done, throttled_ns())
                    })
                })
                .collect();
            hs.into_iter()
                .map(|h| h.join().unwrap())
                .fold((0, 0), |(b, w), (x, y)| (b + x, w + y))
        });
        (bytes as f64 / start.elapsed().as_secs_f64(), waited)
    }

    /// The most a node may serve in `RUN`: the cap, plus one burst per
    /// CPU, plus one access per thread in flight when the time ran out.
    fn bound(units_per_byte: u64, threads: u64) -> f64 {
        let cap = CAP as f64 / units_per_byte as f64 * WRITE_UNITS as f64;
        let slack = 2.0 * cap * BURST.as_secs_f64() + (threads * CHUNK as u64) as f64;
        cap + slack / RUN.as_secs_f64()
    }

    #[test]
    fn threads_on_one_node_are_bounded_by_the_cap() {
        let m = model(CAP);
        let w = throughput(&m, &[0, 0], Access::Write);
        assert!(
            w <= bound(WRITE_UNITS, 2) * 1.05,
            "writes {w:.0} B/s over {CAP}"
        );
        assert!(w >= CAP as f64 * 0.5, "writes {w:.0} B/s, far under {CAP}");
        // Reads cost a third: three times the bytes.
        let r = throughput(&m, &[1, 1, 1], Access::Read);
        assert!(r <= bound(1, 3) * 1.05, "reads {r:.0} B/s over 3 x {CAP}");
        assert!(r >= w * 2.0, "reads {r:.0} B/s not ~3x writes {w:.0} B/s");
    }

    #[test]
    fn two_nodes_serve_twice_one_node() {
        let m = model(CAP);
        let one = throughput(&m, &[0, 0], Access::Write);
        let two = throughput(&m, &[0, 1], Access::Write);
        let ratio = two / one;
        assert!(
            (1.6..=2.4).contains(&ratio),
            "two nodes {two:.0} B/s vs one node {one:.0} B/s: {ratio:.2}x"
        );
    }

    #[test]
    fn a_lone_thread_gets_the_whole_cap_and_waits_are_counted() {
        let m = model(CAP);
        let (w, waited) = throughput_and_wait(&m, &[0], Access::Write);
        assert!(w >= CAP as f64 * 0.7, "one thread {w:.0} B/s of {CAP}");
        assert!(w <= bound(WRITE_UNITS, 1) * 1.05, "one thread {w:.0} B/s");
        // Most of RUN was spent waiting (the charges themselves are cheap).
        assert!(
            waited as f64 >= RUN.as_nanos() as f64 * 0.5,
            "waited {waited} ns of {RUN:?}"
        );
    }

    #[test]
    fn an_access_across_members_charges_each_node() {
        let m = model(CAP);
        let per_cpu = m.units_per_sec_per_cpu;
        assert_eq!(per_cpu, CAP * 3 / 2);
        let cpu = m.topology.current_cpu();
        let t = |node| m.bucket(node, cpu).tokens.load(Ordering::Relaxed);
        let (a, b) = (t(0), t(1));
        // 1 KiB read on node 0's member, 2 KiB on node 1's.
        m.charge((1 << 30) - 1024, 3072, Access::Read);
        assert_eq!(a - t(0), 1024);
        assert_eq!(b - t(1), 2048);
        // Writes cost three units a byte; bytes past the pool none.
        m.charge(0, 100, Access::Write);
        assert_eq!(a - t(0), 1024 + 300);
        m.charge(4 << 30, 4096, Access::Write);
        assert_eq!((a - t(0), b - t(1)), (1324, 2048));
    }
}
