//! The planner: NThread's what-if analysis as a pure function of one
//! window's measurements ([`plan`]).
//!
//! 1. **Read locality.** A thread's initial target is the node it read at
//!    least [`PlacementConfig::dominance_bytes`] more from than from any
//!    other node; without one it stays where it is. Under the contention
//!    rules in force, the move is made only if the target would not be
//!    contended after it (by CPU; by NVMM, for a thread that writes):
//!    otherwise a contention move would undo it (this thread, or another
//!    sent away in its place) and read locality would redo it once the
//!    hold expires, window after window (the what-if check).
//! 2. **NVMM contention** (policies `nm`, `full`). With every thread on its
//!    initial target, a node's load is Eq. 1, `BW = reads / 3 + writes`,
//!    where reads stay on the node holding the data and a thread's writes
//!    go to the node it runs on (allocation is local-first). A node is
//!    contended above 80 % of its maximum while every other node is below
//!    half of its load. Threads on it move to the least loaded node, the
//!    highest write ratio (Eq. 2) first, each only if the target can take
//!    its writes (Eq. 3-4: `D_migrate_M + D_write_i <= 0`), until the node
//!    is no longer above the average.
//! 3. **CPU contention** (policies `cpu`, `full`), only when there is no
//!    NVMM contention: a node whose CPU use (Eq. 6 summed) exceeds 90 %
//!    and is at least twice the least busy node's sends threads there,
//!    busiest first, each only if the target stays within the limit
//!    (Eq. 5).
//!
//!    *Stop rule.* Eq. 5 alone moves threads while the target has room: 8
//!    threads sharing 4 CPUs each show 12.5 % of a 4-CPU node, so it would
//!    move 7 of them and leave the contention on the other side (a thread
//!    starved on a crowded node uses more once it runs alone). The planner
//!    also requires that a move does not invert the imbalance: after it,
//!    the source must still be at least as busy as the target. The nodes
//!    then end balanced (4 and 4), and the next window, measured after the
//!    move, starts from the real demand.
//! 4. **Sharers stay together.** A thread that touched a file another
//!    thread touched in the same window is never moved for contention
//!    (it still goes to its read target: sharers reading the same data
//!    then meet on the node that holds it).
//! 5. **Own masks.** A thread is only sent to a node on which its own
//!    CPU mask ([`ThreadSample::allowed`]) has a CPU. A move a rule wants
//!    but the thread's mask forbids is not made and is listed in
//!    [`Plan::blocked`] instead (read locality: its data's node; a
//!    contention rule: the node it would have gone to, when its mask has
//!    no other node to go to), so a report can say why it stayed.
//! 6. **Hysteresis.** A thread moved is not moved again for
//!    [`PlacementConfig::hold_windows`] windows, so a thread near the
//!    dominance threshold or a contention limit does not bounce; the
//!    dominance threshold itself is the other half of it (a thread
//!    reading evenly from two nodes has no target).

use super::config::{PlacementConfig, PlacementPolicy};
use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// One thread's measurements over a window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadSample {
    /// Its kernel thread id.
    pub tid: i32,
    /// The node it runs on now.
    pub node: usize,
    /// The nodes it may be moved to: those with a CPU in its own CPU mask
    /// (as it was when first seen).
    pub allowed: Vec<usize>,
    /// Bytes it read from data on each node.
    pub read: Vec<u64>,
    /// Bytes it wrote to each node.
    pub written: Vec<u64>,
    /// Nanoseconds it ran (`Time_i`).
    pub cpu_ns: u64,
    /// Files (inode numbers) it touched.
    pub files: Vec<u64>,
}

impl ThreadSample {
    fn reads(&self) -> u64 {
        self.read.iter().sum()
    }
    fn writes(&self) -> u64 {
        self.written.iter().sum()
    }
}

/// A window's measurements of every thread that did I/O in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The window's number (increasing).
    pub window: u64,
    /// Its length.
    pub length: Duration,
    /// CPUs on each node (`cores` of Eq. 6).
    pub node_cpus: Vec<usize>,
    /// The threads.
    pub threads: Vec<ThreadSample>,
}

/// Which rules the planner applies, with which parameters.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Policy {
    /// The rules.
    pub rules: PlacementPolicy,
    /// Their parameters.
    pub config: PlacementConfig,
}

/// What the planner remembers between windows: when each thread was last
/// moved (for hysteresis).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct State {
    moved_in: HashMap<i32, u64>,
}

impl State {
    /// The state after `plan`'s moves were made in its window.
    pub fn record(&mut self, plan: &Plan) {
        for m in &plan.moves {
            self.moved_in.insert(m.tid, plan.window);
        }
    }

    /// Forget threads not in `live` (exited).
    pub fn retain(&mut self, live: impl Fn(i32) -> bool) {
        self.moved_in.retain(|&t, _| live(t));
    }

    fn held(&self, tid: i32, window: u64, hold: u32) -> bool {
        self.moved_in
            .get(&tid)
            .is_some_and(|&w| window.saturating_sub(w) <= u64::from(hold))
    }
}

/// Why a thread is moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// To the node it reads most from.
    ReadLocality,
    /// Away from a node whose NVMM is contended.
    NvmmContention,
    /// Away from a node whose CPUs are contended.
    CpuContention,
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Reason::ReadLocality => "read locality",
            Reason::NvmmContention => "NVMM contention",
            Reason::CpuContention => "CPU contention",
        })
    }
}

/// One proposed move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Move {
    /// The thread.
    pub tid: i32,
    /// The node it runs on.
    pub from: usize,
    /// The node it should run on.
    pub to: usize,
    /// Why.
    pub reason: Reason,
}

/// The planner's answer for one window.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// The window planned.
    pub window: u64,
    /// The moves, at most one per thread.
    pub moves: Vec<Move>,
    /// Moves a rule wanted that the thread's own mask forbids (no CPU of
    /// its mask on the target node): not made.
    pub blocked: Vec<Move>,
    /// The node found NVMM-contended, if any.
    pub nvmm_contended: Option<usize>,
    /// The node found CPU-contended, if any.
    pub cpu_contended: Option<usize>,
}

/// Plan one window: where each thread of `snap` should run.
pub fn plan(snap: &Snapshot, policy: &Policy, state: &State) -> Plan {
    let mut out = Plan {
        window: snap.window,
        ..Plan::default()
    };
    let nodes = snap.node_cpus.len();
    if policy.rules == PlacementPolicy::Off || nodes < 2 {
        return out;
    }
    let cfg = &policy.config;
    let threads = &snap.threads;
    let may_move: Vec<bool> = threads
        .iter()
        .map(|t| !state.held(t.tid, snap.window, cfg.hold_windows))
        .collect();
    let allowed = |i: usize, n: usize| threads[i].allowed.contains(&n) && n < nodes;
    // Where each thread would run, and why it moved there.
    let mut at: Vec<(usize, Option<Reason>)> = threads.iter().map(|t| (t.node, None)).collect();

    let sharer = sharers(threads);
    if policy.rules.read_locality() {
        let mut what_if = WhatIf::new(snap, policy);
        for (i, t) in threads.iter().enumerate() {
            let target = read_target(t, cfg).filter(|&n| may_move[i] && n < nodes);
            let Some(n) = target.filter(|&n| n != t.node) else {
                continue;
            };
            if !allowed(i, n) {
                out.blocked.push(Move {
                    tid: t.tid,
                    from: t.node,
                    to: n,
                    reason: Reason::ReadLocality,
                });
                continue;
            }
            // A move the contention rules would undo is not made (sharers
            // are never moved for contention, so they always go).
            if sharer[i] || what_if.admits(i, n) {
                what_if.apply(i, n);
                at[i] = (n, Some(Reason::ReadLocality));
            }
        }
    }
    let movable = |i: usize| may_move[i] && !sharer[i];

    if policy.rules.nvmm() {
        out.nvmm_contended = balance_nvmm(snap, cfg, &mut at, &movable, &allowed, &mut out.blocked);
    }
    if policy.rules.cpu() && out.nvmm_contended.is_none() {
        let nvmm_rule = policy.rules.nvmm();
        out.cpu_contended = balance_cpu(
            snap,
            cfg,
            nvmm_rule,
            &mut at,
            &movable,
            &allowed,
            &mut out.blocked,
        );
    }
    out.moves = threads
        .iter()
        .zip(&at)
        .filter_map(|(t, &(to, reason))| {
            Some(Move {
                tid: t.tid,
                from: t.node,
                to,
                reason: reason?,
            })
        })
        .filter(|m| m.to != m.from)
        .collect();
    out
}

/// The node loads the contention rules of `policy` would see, as read
/// locality moves threads: a read-locality move is made only if it leaves
/// its target uncontended by the rules in force, so that it is not undone
/// by a contention move (of this thread or of another on the target) and
/// redone once the hold expires, over and over. On nodes of one CPU, two
/// busy threads on one node are CPU-contended: without this check, read
/// locality brings a thread to its data, the CPU rule sends one away, and
/// the two alternate every few windows.
struct WhatIf<'a> {
    snap: &'a Snapshot,
    cfg: &'a PlacementConfig,
    /// Eq. 6 summed per node, if the CPU rule is in force.
    cpu: Option<Vec<f64>>,
    /// Eq. 1 per node (weighted bytes), if the NVMM rule is in force.
    nvmm: Option<Vec<f64>>,
}

impl<'a> WhatIf<'a> {
    fn new(snap: &'a Snapshot, policy: &'a Policy) -> Self {
        let cfg = &policy.config;
        let now = |i: usize| snap.threads[i].node;
        let cpu = policy.rules.cpu().then(|| cpu_use(snap, now));
        let nvmm = policy.rules.nvmm().then(|| nvmm_load(snap, cfg, now));
        WhatIf {
            snap,
            cfg: &policy.config,
            cpu,
            nvmm,
        }
    }

    /// Whether thread `i` may move to node `n`: the CPU rule would not
    /// find `n` contended after it, and, if it writes, neither would the
    /// NVMM rule (which moves only writers).
    fn admits(&self, i: usize, n: usize) -> bool {
        let t = &self.snap.threads[i];
        let cpu_ok = self.cpu.as_ref().is_none_or(|used| {
            let mut after = used.clone();
            after[t.node] -= cpu_share(self.snap, i, t.node);
            after[n] += cpu_share(self.snap, i, n);
            !cpu_hot(self.cfg, &after, n)
        });
        let nvmm_ok = t.writes() == 0
            || self.nvmm.as_ref().is_none_or(|load| {
                let mut after = load.clone();
                after[t.node] -= t.writes() as f64;
                after[n] += t.writes() as f64;
                !nvmm_hot(self.snap, self.cfg, &after, n)
            });
        cpu_ok && nvmm_ok
    }

    /// Thread `i` moves to node `n`.
    fn apply(&mut self, i: usize, n: usize) {
        let t = &self.snap.threads[i];
        if let Some(used) = &mut self.cpu {
            used[t.node] -= cpu_share(self.snap, i, t.node);
            used[n] += cpu_share(self.snap, i, n);
        }
        if let Some(load) = &mut self.nvmm {
            load[t.node] -= t.writes() as f64;
            load[n] += t.writes() as f64;
        }
    }
}

/// Eq. 6 summed per node, with thread `i` on node `node_of(i)`.
fn cpu_use(snap: &Snapshot, node_of: impl Fn(usize) -> usize) -> Vec<f64> {
    let mut used = vec![0f64; snap.node_cpus.len()];
    for i in 0..snap.threads.len() {
        let n = node_of(i);
        used[n] += cpu_share(snap, i, n);
    }
    used
}

/// Eq. 1 per node over the window (weighted bytes), with thread `i` on
/// node `node_of(i)`: reads load the node holding the data, writes the
/// node the writer runs on.
fn nvmm_load(snap: &Snapshot, cfg: &PlacementConfig, node_of: impl Fn(usize) -> usize) -> Vec<f64> {
    let nodes = snap.node_cpus.len();
    let mut load = vec![0f64; nodes];
    for (i, t) in snap.threads.iter().enumerate() {
        for (node, &r) in t.read.iter().enumerate().take(nodes) {
            load[node] += r as f64 / f64::from(cfg.read_weight_divisor);
        }
        load[node_of(i)] += t.writes() as f64;
    }
    load
}

/// Eq. 6: thread `i`'s share of node `n`'s CPUs over the window.
fn cpu_share(snap: &Snapshot, i: usize, n: usize) -> f64 {
    let window_ns = snap.length.as_nanos().max(1) as f64;
    snap.threads[i].cpu_ns as f64 / (window_ns * snap.node_cpus[n].max(1) as f64)
}

/// Whether the CPU rule finds node `n` contended at CPU use `used`: above
/// the limit and at least the imbalance factor times the least busy other
/// node.
fn cpu_hot(cfg: &PlacementConfig, used: &[f64], n: usize) -> bool {
    let coolest = (0..used.len())
        .filter(|&m| m != n)
        .map(|m| used[m])
        .fold(f64::INFINITY, f64::min);
    used[n] > f64::from(cfg.cpu_limit_pct) / 100.0
        && used[n] >= f64::from(cfg.cpu_imbalance) * coolest
}

/// Whether the NVMM rule finds node `n` contended at weighted loads `load`
/// (bytes over the window): above the contended share of its maximum
/// while every other node is below the given share of its load.
fn nvmm_hot(snap: &Snapshot, cfg: &PlacementConfig, load: &[f64], n: usize) -> bool {
    let secs = snap.length.as_secs_f64().max(1e-9);
    let max = cfg.node_max(n) as f64 * secs;
    load[n] > max * f64::from(cfg.nvmm_contended_pct) / 100.0
        && (0..load.len())
            .filter(|&m| m != n)
            .all(|m| load[m] < load[n] * f64::from(cfg.nvmm_others_below_pct) / 100.0)
}

/// The node `t` read at least the dominance more from than from any other.
fn read_target(t: &ThreadSample, cfg: &PlacementConfig) -> Option<usize> {
    let (best, &most) = t.read.iter().enumerate().max_by_key(|&(n, &b)| (b, n))?;
    let next = t
        .read
        .iter()
        .enumerate()
        .filter(|&(n, _)| n != best)
        .map(|(_, &b)| b)
        .max()
        .unwrap_or(0);
    (most.saturating_sub(next) >= cfg.dominance_bytes(best)).then_some(best)
}

/// Whether each thread touched a file another thread touched too.
fn sharers(threads: &[ThreadSample]) -> Vec<bool> {
    let mut users: HashMap<u64, usize> = HashMap::new();
    for t in threads {
        let mine: HashSet<u64> = t.files.iter().copied().collect();
        for f in mine {
            *users.entry(f).or_default() += 1;
        }
    }
    threads
        .iter()
        .map(|t| t.files.iter().any(|f| users.get(f).is_some_and(|&u| u > 1)))
        .collect()
}

/// A contention move of `t` to `to` (if any) that its own mask forbids.
fn note_blocked(blocked: &mut Vec<Move>, t: &ThreadSample, to: Option<usize>, reason: Reason) {
    if let Some(to) = to {
        blocked.push(Move {
            tid: t.tid,
            from: t.node,
            to,
            reason,
        });
    }
}

/// Eq. 1-4: move writers off an NVMM-contended node; returns that node.
fn balance_nvmm(
    snap: &Snapshot,
    cfg: &PlacementConfig,
    at: &mut [(usize, Option<Reason>)],
    movable: &impl Fn(usize) -> bool,
    allowed: &impl Fn(usize, usize) -> bool,
    blocked: &mut Vec<Move>,
) -> Option<usize> {
    let nodes = snap.node_cpus.len();
    let threads = &snap.threads;
    // Weighted bytes per node over the window (`BW_N * Time_W`).
    let mut load = nvmm_load(snap, cfg, |i| at[i].0);
    let hot = (0..nodes).find(|&n| nvmm_hot(snap, cfg, &load, n))?;
    let average = load.iter().sum::<f64>() / nodes as f64;
    let mut candidates: Vec<usize> = (0..threads.len())
        .filter(|&i| at[i].0 == hot && movable(i) && threads[i].writes() > 0)
        .collect();
    // Highest write ratio first (Eq. 2); ties by thread id for determinism.
    let ratio = |i: usize| {
        let t = &threads[i];
        t.writes() as f64 / (t.writes() + t.reads()).max(1) as f64
    };
    candidates.sort_by(|&a, &b| {
        ratio(b)
            .total_cmp(&ratio(a))
            .then(threads[a].tid.cmp(&threads[b].tid))
    });
    for i in candidates {
        // Eq. 3 for the source: nothing more to move out.
        if load[hot] - average <= 0.0 {
            break;
        }
        let w = threads[i].writes() as f64;
        let target = |mask: bool| {
            (0..nodes)
                .filter(|&m| m != hot && (!mask || allowed(i, m)))
                .min_by(|&a, &b| load[a].total_cmp(&load[b]))
        };
        // Eq. 3-4 for the target: D_migrate_M + D_write_i <= 0.
        let fits = |m: &usize| (load[*m] - average) + w <= 0.0;
        match target(true) {
            Some(m) => {
                if fits(&m) {
                    at[i] = (m, Some(Reason::NvmmContention));
                    load[m] += w;
                    load[hot] -= w;
                }
            }
            None => note_blocked(
                blocked,
                &threads[i],
                target(false).filter(fits),
                Reason::NvmmContention,
            ),
        }
    }
    Some(hot)
}

/// Eq. 5-6 with the stop rule: move threads off a CPU-contended node;
/// returns that node. With the NVMM rule in force (`nvmm_rule`), a writer
/// is not moved to a node the NVMM rule would then find contended: that
/// rule takes precedence (the CPU rule runs only when no node is
/// NVMM-contended), so such a move would be undone by an NVMM move in a
/// later window and redone once its hold expired, over and over (on nodes
/// of one CPU: an NVMM move puts two threads on one CPU, the CPU rule sends
/// one back into the contention the NVMM move relieved).
fn balance_cpu(
    snap: &Snapshot,
    cfg: &PlacementConfig,
    nvmm_rule: bool,
    at: &mut [(usize, Option<Reason>)],
    movable: &impl Fn(usize) -> bool,
    allowed: &impl Fn(usize, usize) -> bool,
    blocked: &mut Vec<Move>,
) -> Option<usize> {
    let nodes = snap.node_cpus.len();
    let threads = &snap.threads;
    // Eq. 6 on node n: Time_i / (Time_W * cores_n).
    let share = |i: usize, n: usize| cpu_share(snap, i, n);
    let mut used = cpu_use(snap, |i| at[i].0);
    let mut load = nvmm_rule.then(|| nvmm_load(snap, cfg, |i| at[i].0));
    let limit = f64::from(cfg.cpu_limit_pct) / 100.0;
    let hot = (0..nodes)
        .filter(|&n| used[n] > limit)
        .max_by(|&a, &b| used[a].total_cmp(&used[b]))?;
    if !cpu_hot(cfg, &used, hot) {
        return None;
    }
    let mut candidates: Vec<usize> = (0..threads.len())
        .filter(|&i| at[i].0 == hot && movable(i))
        .collect();
    candidates.sort_by(|&a, &b| {
        threads[b]
            .cpu_ns
            .cmp(&threads[a].cpu_ns)
            .then(threads[a].tid.cmp(&threads[b].tid))
    });
    for i in candidates {
        let target = |mask: bool| {
            (0..nodes)
                .filter(|&m| m != hot && (!mask || allowed(i, m)))
                .min_by(|&a, &b| used[a].total_cmp(&used[b]))
        };
        // Eq. 5, and the stop rule: the move must not invert the imbalance;
        // nor may it make the target NVMM-contended (see above).
        let w = threads[i].writes() as f64;
        let fits = |m: &usize| {
            let (out, inn) = (share(i, hot), share(i, *m));
            let nvmm_ok = w == 0.0
                || load.as_ref().is_none_or(|l| {
                    let mut after = l.clone();
                    after[hot] -= w;
                    after[*m] += w;
                    !nvmm_hot(snap, cfg, &after, *m)
                });
            used[*m] + inn <= limit && used[hot] - out >= used[*m] + inn && nvmm_ok
        };
        let Some(m) = target(true) else {
            note_blocked(
                blocked,
                &threads[i],
                target(false).filter(fits),
                Reason::CpuContention,
            );
            continue;
        };
        let (out, inn) = (share(i, hot), share(i, m));
        if fits(&m) {
            at[i] = (m, Some(Reason::CpuContention));
            used[hot] -= out;
            used[m] += inn;
            if let Some(l) = &mut load {
                l[hot] -= w;
                l[m] += w;
            }
        }
    }
    Some(hot)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MB: u64 = 1_000_000;

    fn thread(tid: i32, node: usize) -> ThreadSample {
        ThreadSample {
            tid,
            node,
            allowed: vec![0, 1],
            read: vec![0, 0],
            written: vec![0, 0],
            cpu_ns: 0,
            files: vec![tid as u64 + 1000],
        }
    }

    fn snap(window: u64, node_cpus: Vec<usize>, threads: Vec<ThreadSample>) -> Snapshot {
        Snapshot {
            window,
            length: Duration::from_secs(1),
            node_cpus,
            threads,
        }
    }

    fn policy(rules: PlacementPolicy) -> Policy {
        Policy {
            rules,
            config: PlacementConfig::default(),
        }
    }

    #[test]
    fn a_reader_goes_to_the_node_it_reads_from() {
        let mut t = thread(1, 0);
        t.read = vec![10 * MB, 300 * MB];
        let p = plan(
            &snap(1, vec![4, 4], vec![t]),
            &policy(PlacementPolicy::Rl),
            &State::default(),
        );
        assert_eq!(
            p.moves,
            vec![Move {
                tid: 1,
                from: 0,
                to: 1,
                reason: Reason::ReadLocality
            }]
        );
        let off = plan(
            &snap(1, vec![4, 4], vec![p_thread(300)]),
            &policy(PlacementPolicy::Off),
            &State::default(),
        );
        assert!(off.moves.is_empty());
    }

    fn p_thread(remote_mb: u64) -> ThreadSample {
        let mut t = thread(1, 0);
        t.read = vec![0, remote_mb * MB];
        t
    }

    #[test]
    fn no_read_target_below_the_dominance() {
        let mut t = thread(1, 0);
        // 199 MB more from node 1: short of 200 MB.
        t.read = vec![100 * MB, 299 * MB];
        let p = plan(
            &snap(1, vec![4, 4], vec![t.clone()]),
            &policy(PlacementPolicy::Full),
            &State::default(),
        );
        assert!(p.moves.is_empty(), "{p:?}");
        t.read = vec![100 * MB, 300 * MB];
        let p = plan(
            &snap(1, vec![4, 4], vec![t]),
            &policy(PlacementPolicy::Full),
            &State::default(),
        );
        assert_eq!(p.moves.len(), 1);
        // A short window needs proportionally less.
        let mut s = snap(1, vec![4, 4], vec![p_thread(25)]);
        s.length = Duration::from_millis(100);
        let mut pol = policy(PlacementPolicy::Rl);
        pol.config.window = s.length;
        assert_eq!(plan(&s, &pol, &State::default()).moves.len(), 1);
    }

    #[test]
    fn eight_busy_threads_on_four_cpus_move_four() {
        // Eight threads share node 0's four CPUs: each runs half the time.
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let mut t = thread(i, 0);
                t.cpu_ns = 500_000_000;
                t.read = vec![MB, 0];
                t
            })
            .collect();
        let s = snap(1, vec![4, 4], threads);
        let p = plan(&s, &policy(PlacementPolicy::Cpu), &State::default());
        assert_eq!(p.cpu_contended, Some(0));
        assert_eq!(p.moves.len(), 4, "{p:?}");
        assert!(
            p.moves
                .iter()
                .all(|m| m.to == 1 && m.reason == Reason::CpuContention)
        );
        // Read locality alone does not see it.
        assert!(
            plan(&s, &policy(PlacementPolicy::Rl), &State::default())
                .moves
                .is_empty()
        );
        // Four busy threads on four CPUs are no contention.
        let four = snap(1, vec![4, 4], s.threads[..4].to_vec());
        let mut four = four;
        for t in &mut four.threads {
            t.cpu_ns = 800_000_000;
        }
        assert!(
            plan(&four, &policy(PlacementPolicy::Cpu), &State::default())
                .moves
                .is_empty()
        );
    }

    /// rw80 on node 0: eight writers of data on node 0, two node-1 idle.
    fn rw80(write_heavy: &[i32]) -> Snapshot {
        let threads = (0..8)
            .map(|i| {
                let mut t = thread(i, 0);
                if write_heavy.contains(&i) {
                    t.read = vec![400 * MB, 0];
                    t.written = vec![600 * MB, 0];
                } else {
                    t.read = vec![800 * MB, 0];
                    t.written = vec![200 * MB, 0];
                }
                t
            })
            .collect();
        snap(1, vec![4, 4], threads)
    }

    #[test]
    fn nvmm_contention_moves_the_highest_write_ratio_first_within_eq4() {
        let s = rw80(&[5, 6]);
        let p = plan(&s, &policy(PlacementPolicy::Nm), &State::default());
        assert_eq!(p.nvmm_contended, Some(0));
        // Node 0: reads 5.6 GB / 3 + writes 2.4 GB = 4.27 GB weighted, node
        // 1 none; average 2.13 GB. The two 600 MB writers (write ratio 0.6)
        // go first, then 200 MB writers (0.2) while Eq. 4 holds: 1.2 GB +
        // 4 x 200 MB = 2 GB; a fifth would take node 1 past the average.
        let mut moved: Vec<i32> = p.moves.iter().map(|m| m.tid).collect();
        moved.sort();
        assert_eq!(moved, [0, 1, 2, 3, 5, 6], "{p:?}");
        let moved_writes: u64 = p
            .moves
            .iter()
            .map(|m| s.threads[m.tid as usize].writes())
            .sum();
        assert!(moved_writes <= 2000 * MB, "Eq. 4 exceeded: {moved_writes}");
        assert!(
            p.moves
                .iter()
                .all(|m| m.reason == Reason::NvmmContention && m.to == 1)
        );
        // CPU contention is not handled while NVMM is contended.
        let mut busy = s.clone();
        for t in &mut busy.threads {
            t.cpu_ns = 1_000_000_000;
        }
        let p = plan(&busy, &policy(PlacementPolicy::Full), &State::default());
        assert!(p.cpu_contended.is_none());
        assert!(p.moves.iter().all(|m| m.reason == Reason::NvmmContention));
        // A load below 80 % of the maximum is no contention.
        let mut light = policy(PlacementPolicy::Nm);
        light.config.default_node_max_bw = 10_000 * MB;
        assert!(plan(&s, &light, &State::default()).moves.is_empty());
    }

    #[test]
    fn eq4_refuses_a_writer_the_target_cannot_absorb() {
        // One huge writer: moving it would overload node 1.
        let mut t = thread(1, 0);
        t.written = vec![3000 * MB, 0];
        let mut r = thread(2, 0);
        r.read = vec![3000 * MB, 0];
        let p = plan(
            &snap(1, vec![4, 4], vec![t, r]),
            &policy(PlacementPolicy::Nm),
            &State::default(),
        );
        assert_eq!(p.nvmm_contended, Some(0));
        assert!(p.moves.is_empty(), "{p:?}");
    }

    #[test]
    fn sharers_never_move_for_contention() {
        let mut s = rw80(&[5, 6]);
        for t in &mut s.threads {
            t.files = vec![42];
            t.cpu_ns = 1_000_000_000;
        }
        for rules in [
            PlacementPolicy::Nm,
            PlacementPolicy::Cpu,
            PlacementPolicy::Full,
        ] {
            let p = plan(&s, &policy(rules), &State::default());
            assert!(p.moves.is_empty(), "{rules}: {p:?}");
        }
    }

    #[test]
    fn a_moved_thread_does_not_bounce_back() {
        let mut pol = policy(PlacementPolicy::Rl);
        pol.config.hold_windows = 2;
        let mut state = State::default();
        let p = plan(&snap(1, vec![4, 4], vec![p_thread(300)]), &pol, &state);
        assert_eq!(p.moves.len(), 1);
        state.record(&p);
        // Next window it reads node 0's data: no move back yet.
        let mut back = thread(1, 1);
        back.read = vec![300 * MB, 0];
        for w in 2..=3 {
            let p = plan(&snap(w, vec![4, 4], vec![back.clone()]), &pol, &state);
            assert!(p.moves.is_empty(), "window {w}: {p:?}");
        }
        let p = plan(&snap(4, vec![4, 4], vec![back]), &pol, &state);
        assert_eq!(p.moves.len(), 1, "held only for hold_windows");
        state.retain(|_| false);
        assert_eq!(state, State::default());
    }

    /// Windows of two busy threads on nodes of one CPU each, both reading
    /// node 0's data (thread 1 runs on node 1): each window's CPU time is
    /// what sharing its node's CPU leaves it, and the plan's moves are made
    /// before the next. Returns every move made.
    fn one_cpu_nodes(rules: PlacementPolicy, windows: u64) -> Vec<Move> {
        let pol = policy(rules);
        let mut state = State::default();
        let mut nodes = [0usize, 1];
        let mut moves = Vec::new();
        for w in 1..=windows {
            let threads = (0..2)
                .map(|i| {
                    let mut t = thread(i as i32, nodes[i]);
                    let sharing = nodes.iter().filter(|&&n| n == nodes[i]).count() as u64;
                    t.cpu_ns = 1_000_000_000 / sharing;
                    t.read = vec![400 * MB, 0];
                    t
                })
                .collect();
            let p = plan(&snap(w, vec![1, 1], threads), &pol, &state);
            state.record(&p);
            for m in &p.moves {
                nodes[m.tid as usize] = m.to;
            }
            moves.extend(p.moves);
        }
        moves
    }

    #[test]
    fn read_locality_does_not_move_a_thread_into_cpu_contention() {
        // Read locality alone brings thread 1 to its data once, for good.
        let rl = one_cpu_nodes(PlacementPolicy::Rl, 12);
        assert_eq!(
            rl,
            vec![Move {
                tid: 1,
                from: 1,
                to: 0,
                reason: Reason::ReadLocality
            }]
        );
        // With the CPU rule, that move would leave node 0's one CPU to
        // two busy threads, and the rule would send one of them away each
        // time: the move is not made at all.
        for rules in [PlacementPolicy::Cpu, PlacementPolicy::Full] {
            let moves = one_cpu_nodes(rules, 12);
            assert!(moves.is_empty(), "{rules}: {moves:?}");
        }
    }

    #[test]
    fn the_cpu_rule_does_not_move_a_writer_back_into_nvmm_contention() {
        // Two busy writers share node 1's one CPU (an NVMM move put the
        // second there) and read node 0's data. Node 0 carries their reads
        // (1,800 / 3 = 600 MB) and node 1 their writes (600 MB): neither
        // is NVMM-contended (800 of a 1,000 MB maximum), node 1's CPU is.
        // Moving a writer back would put its 300 MB of writes on node 0
        // (900 MB, node 1 at 300): contended again, so under `full` the
        // CPU rule leaves both where they are; the CPU rule alone moves
        // one. (Read locality is kept out of it: no read target.)
        let two_on_node_1 = || {
            (0..2)
                .map(|i| {
                    let mut t = thread(i, 1);
                    t.cpu_ns = 500_000_000;
                    t.read = vec![900 * MB, 0];
                    t.written = vec![0, 300 * MB];
                    t
                })
                .collect::<Vec<_>>()
        };
        for rules in [PlacementPolicy::Full, PlacementPolicy::Cpu] {
            let mut pol = policy(rules);
            pol.config.node_max_bw = vec![1_000 * MB, 1_000 * MB];
            pol.config.read_dominance_bytes = u64::MAX / 4;
            let p = plan(
                &snap(1, vec![1, 1], two_on_node_1()),
                &pol,
                &State::default(),
            );
            assert_eq!(p.nvmm_contended, None, "{rules}: {p:?}");
            assert_eq!(p.cpu_contended, Some(1), "{rules}: {p:?}");
            let expected = usize::from(rules == PlacementPolicy::Cpu);
            assert_eq!(p.moves.len(), expected, "{rules}: {p:?}");
            if let Some(m) = p.moves.first() {
                assert_eq!((m.to, m.reason), (0, Reason::CpuContention));
            }
        }
    }

    #[test]
    fn read_locality_does_not_move_a_writer_into_nvmm_contention() {
        // Node 0 (maximum 1,000 MB/s, contended above 800) holds the data
        // both threads read and thread 0's writes: 200 + 200 + 390 = 790.
        // Moving thread 1 there would add its 200 MB of writes (990, node
        // 1 idle): the NVMM rule would then send the heavier writer,
        // thread 0, to node 1, and read locality would bring it back once
        // its hold expires. Under `nm` thread 1 stays; a pure reader goes.
        let mut pol = policy(PlacementPolicy::Nm);
        pol.config.node_max_bw = vec![1_000 * MB, 1_000 * MB];
        let mut t0 = thread(0, 0);
        t0.read = vec![600 * MB, 0];
        t0.written = vec![390 * MB, 0];
        let mut writer = thread(1, 1);
        writer.read = vec![600 * MB, 0];
        writer.written = vec![0, 200 * MB];
        let s = snap(1, vec![4, 4], vec![t0.clone(), writer.clone()]);
        let p = plan(&s, &pol, &State::default());
        assert!(p.moves.is_empty(), "{p:?}");
        // Read locality alone swaps nothing either: it just moves thread 1.
        let p = plan(&s, &policy(PlacementPolicy::Rl), &State::default());
        assert_eq!(p.moves.len(), 1, "{p:?}");
        let mut reader = writer;
        reader.written = vec![0, 0];
        let p = plan(
            &snap(1, vec![4, 4], vec![t0, reader]),
            &pol,
            &State::default(),
        );
        assert_eq!(p.moves.len(), 1, "{p:?}");
        assert_eq!(p.moves[0].reason, Reason::ReadLocality);
    }

    #[test]
    fn a_thread_whose_own_mask_has_no_cpu_there_is_not_moved_and_the_plan_says_so() {
        // Its data is on node 1, its own mask only has node 0's CPUs.
        let mut t = p_thread(300);
        t.allowed = vec![0];
        for rules in [PlacementPolicy::Rl, PlacementPolicy::Full] {
            let p = plan(
                &snap(1, vec![4, 4], vec![t.clone()]),
                &policy(rules),
                &State::default(),
            );
            assert!(p.moves.is_empty(), "{rules}: {p:?}");
            assert_eq!(
                p.blocked,
                vec![Move {
                    tid: 1,
                    from: 0,
                    to: 1,
                    reason: Reason::ReadLocality
                }],
                "{rules}"
            );
        }
        // Eight busy threads on node 0, four of which may only run there:
        // the other four move, and the four held by their masks are
        // named (the stop rule would have let each go while the nodes
        // were unbalanced).
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let mut t = thread(i, 0);
                t.cpu_ns = 500_000_000;
                t.read = vec![MB, 0];
                if i < 4 {
                    t.allowed = vec![0];
                }
                t
            })
            .collect();
        let p = plan(
            &snap(1, vec![4, 4], threads),
            &policy(PlacementPolicy::Cpu),
            &State::default(),
        );
        let mut moved: Vec<i32> = p.moves.iter().map(|m| m.tid).collect();
        moved.sort();
        assert_eq!(moved, [4, 5, 6, 7], "{p:?}");
        let mut blocked: Vec<i32> = p.blocked.iter().map(|m| m.tid).collect();
        blocked.sort();
        assert_eq!(blocked, [0, 1, 2, 3], "{p:?}");
        assert!(
            p.blocked
                .iter()
                .all(|b| b.to == 1 && b.reason == Reason::CpuContention)
        );
        // A thread that may run on the target is never listed.
        let p = plan(
            &snap(1, vec![4, 4], vec![p_thread(300)]),
            &policy(PlacementPolicy::Full),
            &State::default(),
        );
        assert!(p.blocked.is_empty() && p.moves.len() == 1, "{p:?}");
    }

    proptest! {
        #[test]
        fn never_outside_allowed_nodes_and_never_sharers_for_contention(
            spec in proptest::collection::vec(
                (0usize..3, 1u8..8, 0u64..2000, 0u64..2000, 0u64..2000, 0u64..2_000_000_000, 0u64..4),
                1..12),
            rules in prop_oneof![
                Just(PlacementPolicy::Rl), Just(PlacementPolicy::Cpu),
                Just(PlacementPolicy::Nm), Just(PlacementPolicy::Full)],
        ) {
            let threads: Vec<ThreadSample> = spec
                .iter()
                .enumerate()
                .map(|(i, &(node, mask, r0, r1, w, cpu, file))| {
                    let mut allowed: Vec<usize> = (0..3).filter(|n| mask & (1 << n) != 0).collect();
                    if !allowed.contains(&node) {
                        allowed.push(node);
                    }
                    ThreadSample {
                        tid: i as i32,
                        node,
                        allowed,
                        read: vec![r0 * MB, r1 * MB, (r0 + r1) / 2 * MB],
                        written: vec![0, w * MB, 0],
                        cpu_ns: cpu,
                        // File 0 is shared by everyone who has it.
                        files: vec![if file == 0 { 0 } else { 100 + i as u64 }],
                    }
                })
                .collect();
            let s = snap(1, vec![2, 2, 2], threads);
            let p = plan(&s, &policy(rules), &State::default());
            let shared = s.threads.iter().filter(|t| t.files == [0]).count() > 1;
            for b in &p.blocked {
                let t = &s.threads[b.tid as usize];
                prop_assert!(!t.allowed.contains(&b.to), "{b:?} was allowed: {:?}", t.allowed);
                prop_assert_eq!(b.from, t.node);
            }
            for m in &p.moves {
                let t = &s.threads[m.tid as usize];
                prop_assert!(t.allowed.contains(&m.to), "{m:?} outside {:?}", t.allowed);
                prop_assert_eq!(m.from, t.node);
                if shared && t.files == [0] {
                    prop_assert_eq!(m.reason, Reason::ReadLocality);
                }
            }
        }
    }
}
