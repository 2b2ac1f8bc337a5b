//! Thread placement (NThread): move threads to their data, never data to
//! threads.
//!
//! - [`account`]: per-thread bytes read per node, written, and files
//!   touched, hooked where file data is read and written;
//! - [`planner`]: the paper's rules as a pure function of one window's
//!   measurements;
//! - [`Placement`]: the planner thread a mount starts when
//!   [`ThreadPlacement`] is `advise` or `migrate`; in `migrate` it moves
//!   threads with `sched_setaffinity`, within the CPUs the mounting thread
//!   was allowed, and restores every moved thread's own mask when the
//!   mount goes away.
//!
//! Layer: above `topology`, `media`, `layout` and `error`; below `core`
//! (which owns a [`Placement`] and lends calibration the block allocator
//! through [`calibrate::ScratchBlocks`]) and `file` (which calls its hooks).

pub mod account;
pub(crate) mod affinity;
pub mod calibrate;
pub mod config;
pub mod planner;

pub use config::{PlacementConfig, PlacementPolicy, ThreadPlacement};
pub use planner::{Move, Plan, Policy, Reason, Snapshot, State, ThreadSample};

/// Run `f` on a new thread bound to one of the CPUs the calling thread may
/// use: the `cpu`-th of them, counted modulo their number (tests and tools
/// that need appends from a given CPU's sub-logs). Returns what `f`
/// returns, or the error of binding the thread.
pub fn run_on_cpu<R: Send>(cpu: usize, f: impl FnOnce() -> R + Send) -> crate::Result<R> {
    let cpus = affinity::get(0)?;
    let target = *cpus
        .get(cpu % cpus.len().max(1))
        .ok_or_else(|| crate::Error::InvalidArgument("no CPU to run on".into()))?;
    std::thread::scope(|s| {
        s.spawn(|| {
            affinity::set(0, &[target])?;
            Ok(f())
        })
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}

use crate::topology::Topology;
use account::{NodeRanges, ThreadStats, Tracker};
use crossbeam_utils::CachePadded;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Decisions kept for [`crate::Fs::placement_report`] (oldest dropped).
pub const REPORT_LEN: usize = 1024;

/// One decision of the planner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementDecision {
    /// The window it was made in.
    pub window: u64,
    /// The thread (kernel id).
    pub tid: i32,
    /// The node it ran on.
    pub from: usize,
    /// The node the planner chose.
    pub to: usize,
    /// Why.
    pub reason: Reason,
    /// Whether the thread was moved (`migrate`) or only advised.
    pub applied: bool,
    /// Why a move failed (the thread exited, say).
    pub error: Option<String>,
}

/// A moved thread's own mask, to give back.
struct Moved {
    original: Vec<usize>,
    stats: Arc<CachePadded<ThreadStats>>,
}

/// What the planner thread and the mount share.
#[derive(Default)]
struct Shared {
    report: parking_lot::Mutex<VecDeque<PlacementDecision>>,
    moved: parking_lot::Mutex<HashMap<i32, Moved>>,
    stop: parking_lot::Mutex<bool>,
    wake: parking_lot::Condvar,
}

/// A mount's thread placement: the accounting hooks and, when asked for,
/// the planner thread.
pub struct Placement {
    mode: ThreadPlacement,
    tracker: Tracker,
    shared: Arc<Shared>,
    worker: parking_lot::Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl std::fmt::Debug for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Placement")
            .field("mode", &self.mode)
            .finish()
    }
}

/// Everything the planner thread needs.
struct Worker {
    mode: ThreadPlacement,
    policy: Policy,
    topology: Topology,
    registry: Arc<account::Registry>,
    shared: Arc<Shared>,
    /// Real CPUs threads may be moved onto (the mounting thread's mask).
    cpus: Vec<usize>,
}

impl Placement {
    /// Placement for a mount whose blocks lie in `ranges` (`(first, end,
    /// node)`); accounting is on unless `mode` is off.
    pub fn new(mode: ThreadPlacement, topology: &Topology, ranges: Vec<(u64, u64, usize)>) -> Self {
        Placement {
            mode,
            tracker: Tracker::new(
                mode != ThreadPlacement::Off,
                topology.node_count(),
                NodeRanges::new(ranges),
            ),
            shared: Arc::default(),
            worker: parking_lot::Mutex::new(None),
        }
    }

    /// Measure each node's bandwidth on its own free blocks (see
    /// [`calibrate`]), with threads on the CPUs the caller may use.
    pub(crate) fn calibrate(
        &self,
        media: &crate::media::Media,
        blocks: &dyn calibrate::ScratchBlocks,
        topology: &Topology,
        per_point: Duration,
    ) -> crate::Result<calibrate::Calibration> {
        let cpus = affinity::get(0)?;
        calibrate::measure(
            media,
            blocks,
            self.tracker.registry().ranges(),
            topology,
            &cpus,
            per_point,
        )
    }

    /// The I/O hooks.
    #[inline]
    pub fn tracker(&self) -> &Tracker {
        &self.tracker
    }

    /// Start the planner thread (nothing when off). Threads may later be
    /// moved onto any CPU the calling thread may run on now.
    pub fn start(&self, rules: PlacementPolicy, config: PlacementConfig, topology: &Topology) {
        if self.mode == ThreadPlacement::Off {
            return;
        }
        let cpus = affinity::get(0).unwrap_or_else(|e| {
            tracing::warn!(target: "manyfs::placement", error = %e, "no CPU mask; not moving threads");
            Vec::new()
        });
        let w = Worker {
            mode: self.mode,
            policy: Policy { rules, config },
            topology: topology.clone(),
            registry: self.tracker.registry().clone(),
            shared: self.shared.clone(),
            cpus,
        };
        match std::thread::Builder::new()
            .name("manyfs-placement".into())
            .spawn(move || w.run())
        {
            Ok(h) => *self.worker.lock() = Some(h),
            Err(e) => {
                tracing::warn!(target: "manyfs::placement", error = %e, "no planner thread")
            }
        }
    }

    /// The decisions made so far (the last [`REPORT_LEN`]).
    pub fn report(&self) -> Vec<PlacementDecision> {
        self.shared.report.lock().iter().cloned().collect()
    }

    /// Stop the planner and give every moved thread its own mask back.
    pub fn stop(&self) {
        *self.shared.stop.lock() = true;
        self.shared.wake.notify_all();
        if let Some(h) = self.worker.lock().take() {
            let _ = h.join();
        }
        for (tid, m) in self.shared.moved.lock().drain() {
            // A thread that exited has no mask to restore (and its id may
            // belong to another thread by now).
            let restored = if m.stats.alive() {
                affinity::set(tid, &m.original)
            } else {
                Ok(())
            };
            if let Err(e) = restored {
                tracing::warn!(target: "manyfs::placement", tid, error = %e, "mask not restored");
            }
        }
    }
}

impl Drop for Placement {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A thread's counters at the start of the window.
#[derive(Default)]
struct Previous {
    read: Vec<u64>,
    written: Vec<u64>,
    cpu_ns: Option<u64>,
}

impl Worker {
    fn run(self) {
        let mut state = State::default();
        let mut prev: HashMap<i32, Previous> = HashMap::new();
        let mut started = Instant::now();
        loop {
            {
                let mut stop = self.shared.stop.lock();
                let deadline = started + self.policy.config.window;
                while !*stop && Instant::now() < deadline {
                    self.shared.wake.wait_until(&mut stop, deadline);
                }
                if *stop {
                    return;
                }
            }
            let length = started.elapsed();
            started = Instant::now();
            let snap = self.snapshot(length, &mut prev);
            let plan = planner::plan(&snap, &self.policy, &state);
            for m in &plan.moves {
                self.carry_out(plan.window, m);
            }
            state.record(&plan);
            state.retain(|t| prev.contains_key(&t));
        }
    }

    /// This window's measurements; starts the next window.
    fn snapshot(&self, length: Duration, prev: &mut HashMap<i32, Previous>) -> Snapshot {
        let nodes = self.registry.nodes();
        let window = self.registry.window();
        let stats = self.registry.threads();
        self.registry.next_window();
        let node_of = |cpu: usize| self.topology.node_of(cpu).min(nodes - 1);
        let node_cpus: Vec<usize> = (0..nodes)
            .map(|n| cpus_on_node(&self.cpus, &self.topology, n).len())
            .collect();
        let allowed: Vec<usize> = (0..nodes).filter(|&n| node_cpus[n] > 0).collect();
        let mut threads = Vec::new();
        let mut seen = HashMap::new();
        // Threads that did no I/O in the window are left out, as NThread
        // skips threads that read and write little: they have no data to
        // move to, and their CPU time is not the file system's to balance.
        for s in &stats {
            let c = s.counters(window);
            let cpu_now = affinity::cpu_ns(s.tid);
            let p = prev.remove(&s.tid).unwrap_or_default();
            let delta = |now: &[u64], before: &[u64]| -> Vec<u64> {
                now.iter()
                    .enumerate()
                    .map(|(i, &v)| v.wrapping_sub(before.get(i).copied().unwrap_or(0)))
                    .collect()
            };
            let read = delta(&c.read, &p.read);
            let written = delta(&c.written, &p.written);
            let cpu_ns = match (cpu_now, p.cpu_ns) {
                (Some(a), Some(b)) => a.saturating_sub(b),
                _ => 0,
            };
            let io = read.iter().chain(&written).any(|&b| b > 0);
            let node = affinity::last_cpu(s.tid).map(node_of);
            if let (true, Some(node)) = (io, node) {
                threads.push(ThreadSample {
                    tid: s.tid,
                    node,
                    allowed: allowed.clone(),
                    read,
                    written,
                    cpu_ns,
                    files: c.files,
                });
            }
            seen.insert(
                s.tid,
                Previous {
                    read: c.read,
                    written: c.written,
                    cpu_ns: cpu_now,
                },
            );
        }
        *prev = seen;
        Snapshot {
            window,
            length,
            node_cpus: node_cpus.iter().map(|&n| n.max(1)).collect(),
            threads,
        }
    }

    /// Move (or only report) one thread.
    fn carry_out(&self, window: u64, m: &Move) {
        let mut d = PlacementDecision {
            window,
            tid: m.tid,
            from: m.from,
            to: m.to,
            reason: m.reason,
            applied: false,
            error: None,
        };
        // Held across the move: whoever sees the new mask finds the
        // decision in the report.
        let mut report = self.shared.report.lock();
        if self.mode == ThreadPlacement::Migrate {
            match self.migrate(m) {
                Ok(()) => d.applied = true,
                Err(e) => d.error = Some(e.to_string()),
            }
        }
        tracing::info!(
            target: "manyfs::placement",
            window, tid = m.tid, from = m.from, to = m.to, reason = %m.reason,
            applied = d.applied, error = d.error.as_deref().unwrap_or(""),
            "thread placement"
        );
        if report.len() == REPORT_LEN {
            report.pop_front();
        }
        report.push_back(d);
    }

    fn migrate(&self, m: &Move) -> crate::Result<()> {
        let cpus = cpus_on_node(&self.cpus, &self.topology, m.to);
        if cpus.is_empty() {
            return Err(crate::Error::InvalidArgument(format!(
                "node {} has no CPU this process may use",
                m.to
            )));
        }
        let stats = self
            .registry
            .threads()
            .into_iter()
            .find(|s| s.tid == m.tid)
            .ok_or_else(|| crate::Error::NotFound(format!("thread {} exited", m.tid)))?;
        let mut moved = self.shared.moved.lock();
        if let std::collections::hash_map::Entry::Vacant(e) = moved.entry(m.tid) {
            e.insert(Moved {
                original: affinity::get(m.tid)?,
                stats,
            });
        }
        affinity::set(m.tid, &cpus)
    }
}

/// The CPUs of `allowed` (real ids) that are on `node` of `topology`: the
/// only CPUs a thread moved to `node` may get.
fn cpus_on_node(allowed: &[usize], topology: &Topology, node: usize) -> Vec<usize> {
    let last = topology.node_count().max(1) - 1;
    allowed
        .iter()
        .copied()
        .filter(|&c| topology.node_of(c).min(last) == node)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn a_moved_thread_only_gets_allowed_cpus_of_its_target_node(
            nodes in 1usize..5,
            per in 1usize..5,
            allowed in proptest::collection::btree_set(0usize..40, 0..20),
            node in 0usize..5,
        ) {
            let t = Topology::emulated(nodes, per);
            let allowed: Vec<usize> = allowed.into_iter().collect();
            let got = cpus_on_node(&allowed, &t, node);
            for c in &got {
                prop_assert!(allowed.contains(c));
                prop_assert_eq!(t.node_of(*c), node);
            }
            let total: usize = (0..nodes).map(|n| cpus_on_node(&allowed, &t, n).len()).sum();
            prop_assert_eq!(total, allowed.len(), "every allowed CPU is on one node");
        }
    }
}
