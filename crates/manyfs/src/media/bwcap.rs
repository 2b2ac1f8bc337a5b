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

use super::parse_model_option;
use super::remote::Access;
use crate::topology::Topology;
use crossbeam_utils::CachePadded;
use std::cell::Cell;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The emulated per-node NVMM bandwidth cap
/// ([`crate::MountOptions::bandwidth_cap`]): each node's pool member serves at
/// most `bytes_per_sec` of *weighted* traffic, the NThread paper's Eq. 1,
/// `W + R/3` (a read byte costs a third of a written one, as on Optane DC
/// PMM), summed over every thread on every CPU. Threads that together ask
/// for more wait, so several threads hammering one node's member contend
/// as they would on one NVMM DIMM, while members on different nodes do
/// not limit each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BandwidthCap {
    /// Weighted bytes per second per node (writes + reads / 3).
    pub bytes_per_sec: u64,
}

impl BandwidthCap {
    /// 2.3 GB/s per node: one Optane DC PMM's write bandwidth (about a
    /// third of its read bandwidth), the NThread paper's device and the
    /// thread planner's default node maximum
    /// ([`crate::PlacementConfig::default_node_max_bw`]).
    pub const PAPER: BandwidthCap = BandwidthCap {
        bytes_per_sec: 2_300_000_000,
    };

    /// The smallest cap accepted (1 MB/s): below it a 4 KiB write waits
    /// milliseconds, which is a misconfiguration, not an emulation.
    pub const MIN: u64 = 1_000_000;

    /// Parse a `bandwidth_cap=` value: `off` (None), `paper` or `on`
    /// ([`BandwidthCap::PAPER`]), or weighted bytes per second with an
    /// optional decimal suffix `K`, `M` or `G` (`1500M`, `1G`), at least
    /// [`BandwidthCap::MIN`].
    pub fn parse_option(s: &str) -> crate::Result<Option<BandwidthCap>> {
        parse_model_option(
            s,
            BandwidthCap::PAPER,
            "bandwidth cap",
            "off, paper or weighted bytes per second per node, W + R/3, with an optional K, \
             M or G suffix, e.g. 1G, at least 1M",
            |v| {
                let (digits, scale) = match v.char_indices().last() {
                    Some((i, 'K' | 'k')) => (&v[..i], 1_000),
                    Some((i, 'M' | 'm')) => (&v[..i], 1_000_000),
                    Some((i, 'G' | 'g')) => (&v[..i], 1_000_000_000),
                    _ => (v, 1),
                };
                let bytes_per_sec = digits
                    .parse::<u64>()
                    .ok()?
                    .checked_mul(scale)
                    .filter(|&n| n >= Self::MIN)?;
                Some(BandwidthCap { bytes_per_sec })
            },
        )
    }
}

impl std::fmt::Display for BandwidthCap {
    /// `2300M` (weighted bytes per second per node, with the largest
    /// decimal suffix that divides it), the form
    /// [`BandwidthCap::parse_option`] reads back.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let b = self.bytes_per_sec;
        for (scale, suffix) in [(1_000_000_000, "G"), (1_000_000, "M"), (1_000, "K")] {
            if b.is_multiple_of(scale) {
                return write!(f, "{}{suffix}", b / scale);
            }
        }
        write!(f, "{b}")
    }
}

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

/// The buckets' time source and how a thread waits for a moment of it:
/// the real clock and a busy-wait, or a simulated one in tests.
#[derive(Debug, Clone, Copy)]
struct Clock {
    /// Nanoseconds since some fixed point.
    now: fn() -> u64,
    /// Return once `now` reads at least the argument.
    wait_until: fn(u64),
}

/// The real clock, waited on by spinning.
const REAL_CLOCK: Clock = Clock {
    now: now_ns,
    wait_until: spin_until,
};

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
    clock: Clock,
}

impl BandwidthModel {
    /// The cap `cap` for members `(start, len, node)` under `topology`.
    pub fn new(
        cap: BandwidthCap,
        topology: Topology,
        members: impl Iterator<Item = (u64, u64, u32)>,
    ) -> BandwidthModel {
        Self::with_clock(cap, topology, members, REAL_CLOCK)
    }

    /// [`Self::new`] on `clock`.
    fn with_clock(
        cap: BandwidthCap,
        topology: Topology,
        members: impl Iterator<Item = (u64, u64, u32)>,
        clock: Clock,
    ) -> BandwidthModel {
        let cpus = topology.cpu_count().max(1);
        let nodes = topology.node_count().max(1);
        let units_per_sec_per_cpu =
            (cap.bytes_per_sec.saturating_mul(WRITE_UNITS) / cpus as u64).max(1);
        let burst = (u128::from(units_per_sec_per_cpu) * BURST.as_nanos() / 1_000_000_000)
            .clamp(1, i64::MAX as u128) as i64;
        let now = (clock.now)();
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
            clock,
        }
    }

    /// Charge the calling thread for an access of `[off, off+len)`: the
    /// weighted bytes of it on each node's member come out of that node's
    /// buckets, waiting where they are empty.
    pub fn charge(&self, off: u64, len: usize, access: Access) {
        let mut cpu = None;
        for (node, units) in self.units_by_node(off, len, access) {
            let cpu = *cpu.get_or_insert_with(|| self.topology.current_cpu());
            self.take(node, cpu, units);
        }
    }

    /// What an access of `[off, off+len)` costs each node whose member it
    /// touches: `(node, units)`, units being a third of a byte read.
    fn units_by_node(
        &self,
        off: u64,
        len: usize,
        access: Access,
    ) -> impl Iterator<Item = (usize, i64)> + '_ {
        let end = off.saturating_add(len as u64);
        let per_byte = match access {
            Access::Read => 1,
            Access::Write => WRITE_UNITS,
        };
        self.members.iter().filter_map(move |&(s, e, node)| {
            let bytes = end.min(e).saturating_sub(off.max(s));
            (bytes > 0).then(|| {
                let units = i64::try_from(bytes.saturating_mul(per_byte)).unwrap_or(i64::MAX);
                (node as usize, units)
            })
        })
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
        let now = (self.clock.now)();
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
            (self.clock.wait_until)(now.saturating_add(wait_ns));
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
    use crate::media::bwcap::BandwidthCap;

    /// The cap the tests set: 40 MB/s weighted per node.
    const CAP: u64 = 40_000_000;
    /// One access.
    const CHUNK: usize = 4096;

    /// Members of 1 GiB: node 0's at 0, node 1's at 1 GiB.
    fn members() -> impl Iterator<Item = (u64, u64, u32)> {
        [(0, 1 << 30, 0), (1 << 30, 1 << 30, 1)].into_iter()
    }

    fn cap() -> BandwidthCap {
        BandwidthCap { bytes_per_sec: CAP }
    }

    thread_local! {
        /// The simulated clock of this test thread.
        static SIM_NOW: Cell<u64> = const { Cell::new(0) };
        /// Where the last simulated wait ended.
        static SIM_WAITED_UNTIL: Cell<u64> = const { Cell::new(0) };
    }

    /// A clock that only moves when the simulation says: a wait records
    /// its end instead of spinning.
    const SIM: Clock = Clock {
        now: || SIM_NOW.with(Cell::get),
        wait_until: |t| SIM_WAITED_UNTIL.with(|w| w.set(t)),
    };

    /// Simulate threads `(cpu, node)` of an emulated 2x1, each making
    /// `access`es of [`CHUNK`] to its node's member back to back (each
    /// taking 1 us of its own besides any wait) for one simulated second,
    /// always advancing the thread that is free first: the bytes served
    /// per second, all threads together, and the nanoseconds they waited.
    fn simulate(threads: &[(usize, usize)], access: Access) -> (f64, u64) {
        const RUN_NS: u64 = 1_000_000_000;
        const OP_NS: u64 = 1_000;
        SIM_NOW.with(|c| c.set(0));
        let m = BandwidthModel::with_clock(cap(), Topology::emulated(2, 1), members(), SIM);
        let units = match access {
            Access::Read => CHUNK as i64,
            Access::Write => CHUNK as i64 * WRITE_UNITS as i64,
        };
        let before = throttled_ns();
        let mut free_at = vec![0u64; threads.len()];
        let mut bytes = 0u64;
        loop {
            let (i, t) = free_at
                .iter()
                .copied()
                .enumerate()
                .min_by_key(|&(_, t)| t)
                .unwrap();
            if t >= RUN_NS {
                break;
            }
            SIM_NOW.with(|c| c.set(t));
            SIM_WAITED_UNTIL.with(|c| c.set(t));
            let (cpu, node) = threads[i];
            m.take(node, cpu, units);
            free_at[i] = SIM_WAITED_UNTIL.with(Cell::get) + OP_NS;
            bytes += CHUNK as u64;
        }
        (bytes as f64, throttled_ns() - before)
    }

    /// Whether `got` bytes/s is `want` to within 2 % (the buckets start
    /// full: one burst per CPU, 1 % of the second, comes on top).
    fn near(got: f64, want: f64) -> bool {
        (want * 0.98..=want * 1.02).contains(&got)
    }

    #[test]
    fn threads_on_one_node_share_its_cap() {
        // Two threads on the two CPUs, and two on one CPU.
        for threads in [[(0, 0), (1, 0)], [(1, 1), (1, 1)]] {
            let (w, _) = simulate(&threads, Access::Write);
            assert!(near(w, CAP as f64), "{threads:?}: writes {w:.0} B/s");
            // Reads cost a third: three times the bytes.
            let (r, _) = simulate(&threads, Access::Read);
            assert!(near(r, 3.0 * CAP as f64), "{threads:?}: reads {r:.0} B/s");
        }
    }

    #[test]
    fn two_nodes_serve_twice_one_node() {
        let (w, _) = simulate(&[(0, 0), (1, 1)], Access::Write);
        assert!(near(w, 2.0 * CAP as f64), "writes {w:.0} B/s");
        // Where each thread runs does not matter, only whose member.
        let (w, _) = simulate(&[(0, 1), (1, 0)], Access::Write);
        assert!(near(w, 2.0 * CAP as f64), "writes {w:.0} B/s");
    }

    #[test]
    fn a_lone_thread_gets_the_whole_cap_and_its_waits_are_counted() {
        let (w, waited) = simulate(&[(1, 0)], Access::Write);
        assert!(near(w, CAP as f64), "one thread {w:.0} B/s");
        // 1 us per access of its own, the rest of the second waited.
        let busy = (w / CHUNK as f64) as u64 * 1_000;
        assert!(
            (1_000_000_000 - busy).abs_diff(waited) < 20_000_000,
            "waited {waited} ns, busy {busy} ns"
        );
    }

    /// Real threads spinning on the real clock: however they are
    /// scheduled, they never get more than the cap (plus the bursts).
    #[test]
    fn real_threads_on_one_node_stay_under_the_cap() {
        const RUN: Duration = Duration::from_millis(200);
        let m = BandwidthModel::new(cap(), Topology::emulated(2, 1), members());
        let start = Instant::now();
        let bytes: u64 = std::thread::scope(|s| {
            let hs: Vec<_> = (0..3)
                .map(|_| {
                    s.spawn(|| {
                        let mut done = 0u64;
                        while start.elapsed() < RUN {
                            m.charge(0, CHUNK, Access::Write);
                            done += CHUNK as u64;
                        }
                        done
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum()
        });
        let secs = start.elapsed().as_secs_f64();
        // The cap, one burst per CPU, one access per thread in flight.
        let most = CAP as f64 * (secs + BURST.as_secs_f64()) + 3.0 * CHUNK as f64;
        assert!(bytes as f64 <= most * 1.01, "{bytes} B in {secs:.3} s");
        assert!(bytes > 0);
    }

    #[test]
    fn an_access_is_charged_to_each_node_it_touches_writes_thrice() {
        let m = BandwidthModel::new(cap(), Topology::emulated(2, 1), members());
        assert_eq!(m.units_per_sec_per_cpu, CAP * 3 / 2);
        let by_node = |off, len, access| m.units_by_node(off, len, access).collect::<Vec<_>>();
        // 1 KiB on node 0's member, 2 KiB on node 1's.
        assert_eq!(
            by_node((1 << 30) - 1024, 3072, Access::Read),
            [(0, 1024), (1, 2048)]
        );
        assert_eq!(by_node(0, 100, Access::Write), [(0, 300)]);
        // Bytes past the pool cost nothing.
        assert_eq!(by_node(4 << 30, 4096, Access::Write), []);
        // A charge comes out of the calling CPU's bucket of that node.
        let total = |node| -> i64 {
            (0..2)
                .map(|c| m.bucket(node, c).tokens.load(Ordering::Relaxed))
                .sum()
        };
        let (a, b) = (total(0), total(1));
        m.charge((1 << 30) - 1024, 3072, Access::Write);
        assert_eq!((a - total(0), b - total(1)), (3072, 6144));
    }
}
