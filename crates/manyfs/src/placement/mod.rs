//! Thread placement (NThread): move threads to their data, never data to
//! threads.
//!
//! - [`account`]: per-thread bytes read per node, written, and files
//!   touched, hooked where file data is read and written;
//! - [`planner`]: the paper's rules as a pure function of one window's
//!   measurements;
//! - [`Placement`]: the planner thread a mount starts when
//!   [`ThreadPlacement`] is `advise` or `migrate`; in `migrate` it moves
//!   threads with `sched_setaffinity`, only onto CPUs of their own mask as
//!   it was when the planner first saw them, and restores every moved
//!   thread's mask when the mount goes away.
//!
//! Layer: above `topology`, `media`, `layout` and `error`; below `core`
//! (which owns a [`Placement`] and lends calibration the block allocator
//! through [`calibrate::ScratchBlocks`]) and `file` (which calls its hooks).

pub mod account;
pub mod affinity;
pub mod calibrate;
pub mod config;
pub mod planner;

pub use account::{on_behalf_of, start_on};
pub use config::{PlacementConfig, PlacementPolicy, ThreadPlacement};
pub use planner::{Move, Policy, Reason, Snapshot, State, ThreadSample};

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
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Decisions kept for [`crate::diag::placement_report`], and windows for
/// [`crate::diag::placement_windows_after`] (oldest dropped).
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
    /// Why a move failed (the thread exited, say), or why it was not
    /// tried (the thread's own mask has no CPU on the target node).
    pub error: Option<String>,
}

impl PlacementDecision {
    /// Move `m` of `window`, not (yet) made, and why not.
    fn not_applied(window: u64, m: &Move, error: Option<String>) -> Self {
        PlacementDecision {
            window,
            tid: m.tid,
            from: m.from,
            to: m.to,
            reason: m.reason,
            applied: false,
            error,
        }
    }
}

/// One window of the planner: what it saw and decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementWindow {
    /// The window.
    pub window: u64,
    /// Threads that did file I/O in it.
    pub threads: usize,
    /// The node found NVMM-contended, if any.
    pub nvmm_contended: Option<usize>,
    /// The node found CPU-contended, if any.
    pub cpu_contended: Option<usize>,
    /// The decisions made at its end (also in the report).
    pub decisions: Vec<PlacementDecision>,
}

impl std::fmt::Display for PlacementWindow {
    /// One line: `window W: T threads, NVMM contended node N|none, CPU
    /// contended none; tid 12 node 0 -> 1 (read locality) moved; ...`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let node = |n: Option<usize>| n.map_or("none".to_string(), |n| format!("node {n}"));
        write!(
            f,
            "window {}: {} threads, NVMM contended {}, CPU contended {}",
            self.window,
            self.threads,
            node(self.nvmm_contended),
            node(self.cpu_contended)
        )?;
        if self.decisions.is_empty() {
            return f.write_str("; no moves");
        }
        for d in &self.decisions {
            let outcome = match (&d.error, d.applied) {
                (Some(e), _) => format!("not moved: {e}"),
                (None, true) => "moved".to_string(),
                (None, false) => "advised".to_string(),
            };
            write!(
                f,
                "; tid {} node {} -> {} ({}) {outcome}",
                d.tid, d.from, d.to, d.reason
            )?;
        }
        Ok(())
    }
}

/// A moved thread's mask before its first move, to give back.
struct Moved {
    original: Vec<usize>,
    /// When the thread started: its id may be another thread's by the
    /// time the mask is given back.
    start: Option<u64>,
}

/// What the planner thread and the mount share.
#[derive(Default)]
struct Shared {
    report: parking_lot::Mutex<VecDeque<PlacementDecision>>,
    windows: parking_lot::Mutex<VecDeque<PlacementWindow>>,
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
    /// The mounting thread's CPUs: the `cores` of each node in Eq. 6.
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

    /// Start the planner thread (nothing when off). The calling thread's
    /// CPUs count as each node's cores; a thread is only ever moved onto
    /// CPUs of its own mask.
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
        // Returns once the thread runs under its name (as the commit
        // thread, `api/commit_thread.rs`).
        let (started, running) = std::sync::mpsc::sync_channel::<()>(1);
        match std::thread::Builder::new()
            .name("manyfs-placement".into())
            .spawn(move || {
                let _ = started.send(());
                w.run()
            }) {
            Ok(h) => {
                let _ = running.recv();
                *self.worker.lock() = Some(h);
            }
            Err(e) => {
                tracing::warn!(target: "manyfs::placement", error = %e, "no planner thread")
            }
        }
    }

    /// The decisions made so far (the last [`REPORT_LEN`]).
    pub fn report(&self) -> Vec<PlacementDecision> {
        self.shared.report.lock().iter().cloned().collect()
    }

    /// The windows planned after window `after` (of the last
    /// [`REPORT_LEN`]), oldest first.
    pub fn windows_after(&self, after: u64) -> Vec<PlacementWindow> {
        let w = self.shared.windows.lock();
        let first = w.partition_point(|x| x.window <= after);
        w.range(first..).cloned().collect()
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
            let restored = if m.start.is_some() && affinity::start_time(tid) == m.start {
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

/// One [`ThreadStats`]'s counters at the start of the window (kept with
/// the stats, so that its address is not reused while remembered).
struct Previous {
    stats: Arc<CachePadded<ThreadStats>>,
    read: Vec<u64>,
    written: Vec<u64>,
}

/// One thread id's stats added up over a window.
struct Sum {
    start: u64,
    cpu: usize,
    own_mask: Option<Vec<usize>>,
    sample: ThreadSample,
}

/// What the planner knows of a thread since it first saw it.
struct Seen {
    /// When it started (tells it from a later thread with its id).
    start: u64,
    /// Its own CPU mask when first seen: it is only moved within it.
    mask: Vec<usize>,
    /// Its CPU time at the start of the window.
    cpu_ns: Option<u64>,
    /// Blocked moves already reported (reported once).
    told: HashSet<(usize, Reason)>,
}

/// What the planner thread carries from window to window.
#[derive(Default)]
struct Book {
    /// By address of the [`ThreadStats`].
    prev: HashMap<usize, Previous>,
    /// By thread id.
    seen: HashMap<i32, Seen>,
}

impl Worker {
    fn run(self) {
        let mut state = State::default();
        let mut book = Book::default();
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
            let snap = self.snapshot(length, &mut book);
            let plan = planner::plan(&snap, &self.policy, &state);
            let mut decisions = Vec::new();
            for m in &plan.moves {
                let mask = book.seen.get(&m.tid).map_or(&[][..], |s| &s.mask);
                decisions.push(self.carry_out(plan.window, m, mask));
            }
            for b in &plan.blocked {
                let Some(seen) = book.seen.get_mut(&b.tid) else {
                    continue;
                };
                if seen.told.insert((b.to, b.reason)) {
                    decisions.push(self.not_moved(plan.window, b, &seen.mask));
                }
            }
            state.record(&plan);
            state.retain(|t| book.seen.contains_key(&t));
            let mut windows = self.shared.windows.lock();
            if windows.len() == REPORT_LEN {
                windows.pop_front();
            }
            windows.push_back(PlacementWindow {
                window: plan.window,
                threads: snap.threads.len(),
                nvmm_contended: plan.nvmm_contended,
                cpu_contended: plan.cpu_contended,
                decisions,
            });
        }
    }

    /// This window's measurements; starts the next window. The stats of
    /// one thread id (a thread served by several FUSE workers has one per
    /// worker) are added up; stats left by an earlier thread with the same
    /// id, and threads gone, are left out.
    fn snapshot(&self, length: Duration, book: &mut Book) -> Snapshot {
        let nodes = self.registry.nodes();
        let window = self.registry.window();
        let stats = self.registry.threads();
        self.registry.next_window();
        let node_of = |cpu: usize| self.topology.node_of(cpu).min(nodes - 1);
        let node_cpus: Vec<usize> = (0..nodes)
            .map(|n| cpus_on_node(&self.cpus, &self.topology, n).len())
            .collect();
        // Per thread id, in the order their first stats registered.
        let mut order: Vec<i32> = Vec::new();
        let mut sums: HashMap<i32, Sum> = HashMap::new();
        let mut gone: HashSet<i32> = HashSet::new();
        let mut prev = HashMap::new();
        for s in &stats {
            if gone.contains(&s.tid) {
                continue;
            }
            let (start, cpu) = match sums.get(&s.tid) {
                Some(sum) => (sum.start, sum.cpu),
                None => match affinity::start_and_cpu(s.tid) {
                    Some(x) => x,
                    None => {
                        gone.insert(s.tid);
                        continue;
                    }
                },
            };
            if s.start.is_some_and(|t| t != start) {
                continue;
            }
            let c = s.counters(window);
            let key = Arc::as_ptr(s) as usize;
            let (pr, pw) = book
                .prev
                .remove(&key)
                .map_or((Vec::new(), Vec::new()), |p| (p.read, p.written));
            let entry = sums.entry(s.tid).or_insert_with(|| {
                order.push(s.tid);
                let t = ThreadSample {
                    tid: s.tid,
                    node: node_of(cpu),
                    allowed: Vec::new(),
                    read: vec![0; nodes],
                    written: vec![0; nodes],
                    cpu_ns: 0,
                    files: Vec::new(),
                };
                Sum {
                    start,
                    cpu,
                    own_mask: None,
                    sample: t,
                }
            });
            if entry.own_mask.is_none() {
                entry.own_mask = s.own_mask.as_deref().map(<[usize]>::to_vec);
            }
            let t = &mut entry.sample;
            add_delta(&mut t.read, &c.read, &pr);
            add_delta(&mut t.written, &c.written, &pw);
            for f in &c.files {
                if !t.files.contains(f) {
                    t.files.push(*f);
                }
            }
            prev.insert(
                key,
                Previous {
                    stats: s.clone(),
                    read: c.read,
                    written: c.written,
                },
            );
        }
        book.prev = prev;
        // Threads that did no I/O in the window are left out, as NThread
        // skips threads that read and write little: they have no data to
        // move to, and their CPU time is not the file system's to balance.
        let mut threads = Vec::new();
        for tid in order {
            let Some(Sum {
                start,
                own_mask,
                sample: mut t,
                ..
            }) = sums.remove(&tid)
            else {
                continue;
            };
            let seen = match book.seen.get_mut(&tid) {
                Some(s) if s.start == start => s,
                _ => {
                    // A new thread (or a new one with an old id: its mask
                    // to give back is not this one's).
                    self.shared.moved.lock().remove(&tid);
                    // The mask it declared its own, else the one it has.
                    let mask = own_mask.unwrap_or_else(|| affinity::get(tid).unwrap_or_default());
                    book.seen.insert(
                        tid,
                        Seen {
                            start,
                            mask,
                            cpu_ns: None,
                            told: HashSet::new(),
                        },
                    );
                    book.seen.get_mut(&tid).expect("just inserted")
                }
            };
            let cpu_now = affinity::cpu_ns(tid);
            t.cpu_ns = match (cpu_now, seen.cpu_ns) {
                (Some(a), Some(b)) => a.saturating_sub(b),
                _ => 0,
            };
            seen.cpu_ns = cpu_now;
            t.allowed = mask_nodes(&seen.mask, &self.topology);
            if t.read.iter().chain(&t.written).any(|&b| b > 0) {
                threads.push(t);
            }
        }
        // Threads moved are remembered until the mount gives their masks
        // back, whether they still do I/O or not.
        let moved = self.shared.moved.lock();
        let live: HashSet<i32> = book.prev.values().map(|p| p.stats.tid).collect();
        book.seen
            .retain(|t, _| live.contains(t) || moved.contains_key(t));
        Snapshot {
            window,
            length,
            node_cpus: node_cpus.iter().map(|&n| n.max(1)).collect(),
            threads,
        }
    }

    /// Move (or only report) one thread, within its own `mask`.
    fn carry_out(&self, window: u64, m: &Move, mask: &[usize]) -> PlacementDecision {
        let mut d = PlacementDecision::not_applied(window, m, None);
        // Held across the move: whoever sees the new mask finds the
        // decision in the report.
        let mut report = self.shared.report.lock();
        if self.mode == ThreadPlacement::Migrate {
            match self.migrate(m, mask) {
                Ok(()) => d.applied = true,
                Err(e) => d.error = Some(e.to_string()),
            }
        }
        self.record(&mut report, &d);
        d
    }

    /// Report a move the thread's own `mask` forbids.
    fn not_moved(&self, window: u64, m: &Move, mask: &[usize]) -> PlacementDecision {
        let why = format!("its own CPU mask {mask:?} has no CPU on node {}", m.to);
        let d = PlacementDecision::not_applied(window, m, Some(why));
        self.record(&mut self.shared.report.lock(), &d);
        d
    }

    fn record(&self, report: &mut VecDeque<PlacementDecision>, d: &PlacementDecision) {
        tracing::info!(
            target: "manyfs::placement",
            window = d.window, tid = d.tid, from = d.from, to = d.to, reason = %d.reason,
            applied = d.applied, error = d.error.as_deref().unwrap_or(""),
            "thread placement"
        );
        if report.len() == REPORT_LEN {
            report.pop_front();
        }
        report.push_back(d.clone());
    }

    fn migrate(&self, m: &Move, mask: &[usize]) -> crate::Result<()> {
        let cpus = cpus_on_node(mask, &self.topology, m.to);
        if cpus.is_empty() {
            return Err(crate::Error::InvalidArgument(format!(
                "its own CPU mask {mask:?} has no CPU on node {}",
                m.to
            )));
        }
        let mut moved = self.shared.moved.lock();
        if let std::collections::hash_map::Entry::Vacant(e) = moved.entry(m.tid) {
            let start = affinity::start_time(m.tid)
                .ok_or_else(|| crate::Error::NotFound(format!("thread {} exited", m.tid)))?;
            e.insert(Moved {
                original: affinity::get(m.tid)?,
                start: Some(start),
            });
        }
        affinity::set(m.tid, &cpus)
    }
}

/// `into[i] += now[i] - before[i]` (counters wrap).
fn add_delta(into: &mut [u64], now: &[u64], before: &[u64]) {
    for (i, (sum, &v)) in into.iter_mut().zip(now).enumerate() {
        let d = v.wrapping_sub(before.get(i).copied().unwrap_or(0));
        *sum = sum.wrapping_add(d);
    }
}

/// The nodes of `topology` with a CPU in `mask`.
fn mask_nodes(mask: &[usize], topology: &Topology) -> Vec<usize> {
    let last = topology.node_count().max(1) - 1;
    let mut nodes: Vec<usize> = mask
        .iter()
        .map(|&c| topology.node_of(c).min(last))
        .collect();
    nodes.sort_unstable();
    nodes.dedup();
    nodes
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
