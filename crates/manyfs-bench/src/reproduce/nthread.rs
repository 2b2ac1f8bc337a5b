//! The NThread paper's Figures 5 and 2 on an emulated two-node topology.
//!
//! `nthread-fig5`: private-file read/write mixes (`PMIX`) at read ratios
//! 100, 80, 60, 40, 20 and 0 %, every thread's data written beforehand
//! from node 0 (so all of it is on node 0's member), threads pinned
//! round-robin over the CPUs, thread placement `migrate` with each of the
//! policies `off`, `rl`, `cpu`, `nm` and `full`, 100 ms windows so that
//! threads move within the warm-up of a point.
//!
//! `nthread-fig2`: private-file mixes at 100 % (R), 0 % (W) and 50 % (RW),
//! every block on node 0 (`placement=node0`), the threads pinned to node
//! 0's CPUs (the data's node: the paper's maximum), to node 1's (the
//! minimum) or not pinned (the scheduler's choice: its average).
//!
//! Both run every series twice: with the EMULATED remote-access cost and
//! NVMM bandwidth cap on, and with both off as the control.

use super::{OFF, ON};
use crate::report::{Rule, text_table};
use crate::runner::{
    Config, Pinning, Record, Series, emulated_cap_label, emulated_label, run_series,
};
use crate::sys::allowed_cpus;
use crate::target::{PoolConfig, Target};
use crate::{BenchError, Result, Workload};
use manyfs::{
    BandwidthCap, LockKind, Placement, PlacementConfig, PlacementPolicy, RemoteCost,
    ThreadPlacement, Topology, TopologySpec,
};
use std::fmt::Write as _;
use std::time::Duration;

/// The emulated topology of both figures: two nodes of one CPU each.
pub const TOPOLOGY: TopologySpec = TopologySpec::Emulated {
    nodes: 2,
    cpus_per_node: 1,
};

/// Figure 5's read ratios, percent.
pub const FIG5_READ_PCTS: [u32; 6] = [100, 80, 60, 40, 20, 0];

/// Figure 5's policies, in the paper's order of features.
pub const FIG5_POLICIES: [PlacementPolicy; 5] = [
    PlacementPolicy::Off,
    PlacementPolicy::Rl,
    PlacementPolicy::Cpu,
    PlacementPolicy::Nm,
    PlacementPolicy::Full,
];

/// The planning window of both figures: short, so a thread is moved (and
/// held three windows) within a point's warm-up.
pub const WINDOW: Duration = Duration::from_millis(100);

/// The default bandwidth cap of the figures (weighted bytes per second per
/// node). Lower than [`BandwidthCap::PAPER`]: on the development machines
/// one thread through the file system moves about 1 GB/s weighted, so a
/// 2.3 GB/s node would never be contended by 2 to 4 threads.
pub const DEFAULT_CAP: BandwidthCap = BandwidthCap {
    bytes_per_sec: 400_000_000,
};

/// The emulation of one run: the remote-access cost and the bandwidth cap
/// the EMULATED series run under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Models {
    /// Remote-access cost.
    pub cost: RemoteCost,
    /// NVMM bandwidth cap per node.
    pub cap: BandwidthCap,
}

/// A `PMIX` with `pct` % reads in cycles of five operations.
pub fn mix(pct: u32) -> Workload {
    let reads = pct.min(100) / 20;
    Workload::Pmix {
        reads,
        writes: 5 - reads,
    }
}

/// The planner's parameters for a node of bandwidth `cap`: 100 ms windows,
/// each node's maximum the cap and its read bandwidth three times it (what
/// `manyfs calibrate` would measure of such a node), so that the NVMM
/// contention threshold (80 %) and the read dominance are relative to the
/// emulated device.
pub fn placement_config(cap: BandwidthCap) -> PlacementConfig {
    PlacementConfig {
        window: WINDOW,
        node_read_bw: vec![cap.bytes_per_sec.saturating_mul(3); 2],
        node_max_bw: vec![cap.bytes_per_sec; 2],
        ..PlacementConfig::default()
    }
}

/// The first CPU this process may use that is on `node` of [`TOPOLOGY`].
pub fn cpu_of_node(node: usize) -> Result<usize> {
    let topo = Topology::resolve(TOPOLOGY).unwrap_or_else(|_| Topology::emulated(2, 1));
    let cpus = allowed_cpus();
    cpus.iter()
        .copied()
        .find(|&c| topo.node_of(c) == node)
        .ok_or_else(|| {
            BenchError::InvalidArgument(format!(
                "the emulated 2x1 topology needs a CPU of node {node} (an {} CPU id), and this \
                 process may use only CPUs {cpus:?}",
                if node == 0 { "even" } else { "odd" }
            ))
        })
}

/// A pool of one member per node of [`TOPOLOGY`] from `base`, with the
/// models on or off.
fn pool(base: &PoolConfig, models: Option<Models>) -> PoolConfig {
    PoolConfig {
        topology: TOPOLOGY,
        member_per_node: true,
        remote_cost: models.map(|m| m.cost),
        bandwidth_cap: models.map(|m| m.cap),
        ..base.clone()
    }
}

/// The two runs of every series: EMULATED with `models`, then the control.
fn with_and_without(models: Models) -> [(&'static str, Option<Models>); 2] {
    [(ON, Some(models)), (OFF, None)]
}

/// `nthread-fig5`'s ten series: each policy with the models on, then each
/// with them off; every thread's data written from `node0_cpu`.
pub fn fig5_series(base: &PoolConfig, models: Models, node0_cpu: usize) -> Vec<Series> {
    let mut out = Vec::new();
    for (suffix, m) in with_and_without(models) {
        for policy in FIG5_POLICIES {
            out.push(Series {
                label: format!("{policy} {suffix}"),
                target: Target::Lib(LockKind::SrlTree),
                pool: PoolConfig {
                    placement: Placement::Local,
                    thread_placement: ThreadPlacement::Migrate,
                    placement_policy: policy,
                    placement_config: placement_config(models.cap),
                    ..pool(base, m)
                },
                pinning: Pinning::Config,
                prefill_cpu: Some(node0_cpu),
            });
        }
    }
    out
}

/// Figure 2's thread placements: (label, pinning) for data on node 0.
fn fig2_placements(node0_cpu: usize, node1_cpu: usize) -> [(&'static str, Pinning); 3] {
    [
        ("data's node", Pinning::Cpus(vec![node0_cpu])),
        ("other node", Pinning::Cpus(vec![node1_cpu])),
        ("unpinned", Pinning::Unpinned),
    ]
}

/// `nthread-fig2`'s six series: each placement with the models on, then
/// off; every block on node 0, no thread placement.
pub fn fig2_series(
    base: &PoolConfig,
    models: Models,
    node0_cpu: usize,
    node1_cpu: usize,
) -> Vec<Series> {
    let mut out = Vec::new();
    for (suffix, m) in with_and_without(models) {
        for (name, pinning) in fig2_placements(node0_cpu, node1_cpu) {
            out.push(Series {
                label: format!("{name} {suffix}"),
                target: Target::Lib(LockKind::SrlTree),
                pool: PoolConfig {
                    placement: Placement::Node0,
                    thread_placement: ThreadPlacement::Off,
                    ..pool(base, m)
                },
                pinning,
                prefill_cpu: Some(node0_cpu),
            });
        }
    }
    out
}

/// Figure 2's workloads: R (all reads), W (all writes) and RW (one read
/// per write).
pub fn fig2_workloads() -> [(&'static str, Workload); 3] {
    [
        ("R", mix(100)),
        ("W", mix(0)),
        (
            "RW",
            Workload::Pmix {
                reads: 1,
                writes: 1,
            },
        ),
    ]
}

/// Run `nthread-fig5` with `cfg`'s threads, durations and repeats.
pub fn run_fig5(cfg: &Config, models: Models) -> Result<Vec<Record>> {
    if !cfg.pin {
        return Err(BenchError::InvalidArgument(
            "nthread-fig5 needs pinned threads (drop --no-pin): they start round-robin on the \
             two nodes, as the kernel would spread them"
                .into(),
        ));
    }
    let mut cfg = cfg.clone();
    cfg.workloads = FIG5_READ_PCTS.iter().map(|&p| mix(p)).collect();
    cfg.membw = false;
    run_series(&cfg, &fig5_series(&cfg.pool, models, cpu_of_node(0)?))
}

/// Run `nthread-fig2` with `cfg`'s threads, durations and repeats.
pub fn run_fig2(cfg: &Config, models: Models) -> Result<Vec<Record>> {
    let mut cfg = cfg.clone();
    cfg.workloads = fig2_workloads().iter().map(|w| w.1).collect();
    cfg.membw = false;
    let series = fig2_series(&cfg.pool, models, cpu_of_node(0)?, cpu_of_node(1)?);
    run_series(&cfg, &series)
}

/// The parameters of a run, printed above its results.
pub fn header(name: &str, models: Models, cfg: &Config) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{name}: topology 2x1 (emulated: CPU 0 = node 0, CPU 1 = node 1), pool of 2 members \
         (member 0 on node 0, member 1 on node 1), lib:srl-tree, durability {}",
        cfg.pool.durability
    );
    let _ = writeln!(
        out,
        "series marked {ON}: {}; {}",
        emulated_label(models.cost),
        emulated_cap_label(models.cap)
    );
    let _ = writeln!(
        out,
        "  (the cap: per-CPU token buckets, {} weighted B/s per node together; a read byte \
         costs a third of a written one; a thread over it busy-waits)",
        models.cap.bytes_per_sec
    );
    let _ = writeln!(out, "series marked {OFF}: both models off (the control)");
    let _ = writeln!(
        out,
        "threads {:?}; warm-up {:?}, measured {:?} per point; {} run(s) per point (median)",
        cfg.threads, cfg.warmup, cfg.duration, cfg.repeats
    );
    let cpus = allowed_cpus();
    if name == "nthread-fig5" {
        let pc = placement_config(models.cap);
        let _ = writeln!(
            out,
            "data: each thread's private file (1 MiB read + 64 KiB written) written from node 0 \
             before the run; writes during the run go to the writer's node (placement=local)"
        );
        let _ = writeln!(
            out,
            "threads start round-robin on CPUs {cpus:?} (each may move within them); thread_placement=migrate, \
             window {:?}, node maximum {} B/s weighted (NVMM-contended above {} %), read \
             dominance {} B per window, hold {} windows",
            pc.window,
            pc.node_max(0),
            pc.nvmm_contended_pct,
            pc.dominance_bytes(0),
            pc.hold_windows
        );
    } else {
        let _ = writeln!(
            out,
            "data: every block on node 0 (placement=node0), written before the run; threads \
             pinned to node 0's CPU (data's node), node 1's (other node) or not at all \
             (unpinned, over CPUs {cpus:?}); no thread placement"
        );
    }
    if cpus.len() < 4 {
        let _ = writeln!(
            out,
            "NOTE: each emulated node has one CPU: threads moved to a node share its only CPU"
        );
    }
    out
}

/// MiB/s of `r`, or `-`.
fn mib(r: Option<&Record>) -> String {
    r.map(|r| format!("{:.0}", r.bytes_per_sec / f64::from(1u32 << 20)))
        .unwrap_or_else(|| "-".into())
}

/// The record of `label` at `workload` and `threads`.
fn find<'a>(
    records: &'a [Record],
    label: &str,
    workload: &str,
    threads: usize,
) -> Option<&'a Record> {
    records
        .iter()
        .find(|r| r.target == label && r.workload == workload && r.threads == threads)
}

/// The thread counts of `records`, ascending.
fn thread_counts(records: &[Record]) -> Vec<usize> {
    let mut t: Vec<usize> = records.iter().map(|r| r.threads).collect();
    t.sort_unstable();
    t.dedup();
    t
}

/// A table's header: the two key columns `keys`, then `per_run(suffix)`
/// for the EMULATED run and for the control.
fn columns(keys: [&str; 2], per_run: impl Fn(&str) -> Vec<String>) -> Vec<String> {
    let mut h: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
    for suffix in [ON, OFF] {
        h.extend(per_run(suffix));
    }
    h
}

/// `rows` under `header`, the two key columns left-aligned.
fn render(header: &[String], rows: &[Vec<String>]) -> String {
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    text_table(&header, rows, 2, Rule::Columns)
}

/// Whether `values` (policies in [`FIG5_POLICIES`] order) never fall by
/// more than `tolerance` from one policy to the next (the paper's `full >=
/// nm >= cpu >= rl >= off`).
pub fn ordered(values: &[f64], tolerance: f64) -> bool {
    values.windows(2).all(|w| w[1] >= w[0] * (1.0 - tolerance))
}

/// The Figure 5 table: per thread count and read ratio, each policy's MiB/s
/// with the models on and off, `full / off` with them on, and whether the
/// policies are in the paper's order with them on (within 5 %).
pub fn fig5_table(records: &[Record]) -> String {
    let mut header = columns(["threads", "read%"], |suffix| {
        FIG5_POLICIES
            .iter()
            .map(|p| format!("{p} {suffix}"))
            .collect()
    });
    header.push(format!("full/off {ON}"));
    header.push(format!("ordered {ON}"));
    let mut rows = Vec::new();
    for n in thread_counts(records) {
        for pct in FIG5_READ_PCTS {
            let w = mix(pct).to_string();
            let mut row = vec![n.to_string(), pct.to_string()];
            let mut on = Vec::new();
            for suffix in [ON, OFF] {
                for p in FIG5_POLICIES {
                    let r = find(records, &format!("{p} {suffix}"), &w, n);
                    if suffix == ON {
                        on.push(r.map_or(0.0, |r| r.bytes_per_sec));
                    }
                    row.push(mib(r));
                }
            }
            row.push(match (on.first(), on.last()) {
                (Some(&off), Some(&full)) if off > 0.0 => format!("{:.2}x", full / off),
                _ => "-".into(),
            });
            row.push(if ordered(&on, 0.05) { "yes" } else { "no" }.into());
            rows.push(row);
        }
    }
    render(&header, &rows)
}

/// The threads moved in each Figure 5 point with the models on and off
/// ([`Record::moves`]: the median run's, warm-up included), per thread
/// count, read ratio and policy.
pub fn fig5_moves_table(records: &[Record]) -> String {
    let header = columns(["threads", "read%"], |suffix| {
        FIG5_POLICIES
            .iter()
            .map(|p| format!("{p} {suffix}"))
            .collect()
    });
    let mut rows = Vec::new();
    for n in thread_counts(records) {
        for pct in FIG5_READ_PCTS {
            let w = mix(pct).to_string();
            let mut row = vec![n.to_string(), pct.to_string()];
            for suffix in [ON, OFF] {
                row.extend(FIG5_POLICIES.iter().map(|p| {
                    find(records, &format!("{p} {suffix}"), &w, n)
                        .and_then(|r| r.moves.clone())
                        .unwrap_or_else(|| "-".into())
                }));
            }
            rows.push(row);
        }
    }
    render(&header, &rows)
}

/// The Figure 2 table: per workload and thread count, each placement's
/// MiB/s with the models on and off, and the other node and unpinned as a
/// fraction of the data's node (the paper's normalisation to the maximum).
pub fn fig2_table(records: &[Record]) -> String {
    let names = fig2_placements(0, 0).map(|p| p.0);
    let header = columns(["workload", "threads"], |suffix| {
        let mut h: Vec<String> = names.iter().map(|n| format!("{n} {suffix}")).collect();
        h.push(format!("other/data's {suffix}"));
        h.push(format!("unpinned/data's {suffix}"));
        h
    });
    let mut rows = Vec::new();
    for (short, w) in fig2_workloads() {
        let w = w.to_string();
        for n in thread_counts(records) {
            let mut row = vec![format!("{short} ({w})"), n.to_string()];
            for suffix in [ON, OFF] {
                let found: Vec<Option<&Record>> = names
                    .iter()
                    .map(|name| find(records, &format!("{name} {suffix}"), &w, n))
                    .collect();
                row.extend(found.iter().map(|r| mib(*r)));
                let ratio = |r: Option<&Record>| match (r, found[0]) {
                    (Some(r), Some(max)) if max.bytes_per_sec > 0.0 => {
                        format!("{:.2}", r.bytes_per_sec / max.bytes_per_sec)
                    }
                    _ => "-".into(),
                };
                row.push(ratio(found[1]));
                row.push(ratio(found[2]));
            }
            rows.push(row);
        }
    }
    render(&header, &rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The read percentage of a `PMIX` workload name, if it is one.
    fn read_pct(workload: &str) -> Option<u32> {
        match workload.parse().ok()? {
            Workload::Pmix { reads, writes } => Some(reads * 100 / (reads + writes)),
            _ => None,
        }
    }

    const MODELS: Models = Models {
        cost: RemoteCost::PAPER,
        cap: DEFAULT_CAP,
    };

    #[test]
    fn mixes_have_the_papers_read_ratios() {
        let pcts: Vec<u32> = FIG5_READ_PCTS
            .iter()
            .map(|&p| read_pct(&mix(p).to_string()).unwrap())
            .collect();
        assert_eq!(pcts, FIG5_READ_PCTS);
        assert_eq!(read_pct("DWOL"), None);
    }

    #[test]
    fn fig5_series_are_emulated_exactly_when_labelled_so() {
        let s = fig5_series(&PoolConfig::default(), MODELS, 0);
        assert_eq!(s.len(), 10);
        for x in &s {
            assert_eq!(x.label.contains(ON), x.pool.remote_cost.is_some());
            assert_eq!(x.label.contains(ON), x.pool.bandwidth_cap.is_some());
            assert_eq!(x.pool.thread_placement, ThreadPlacement::Migrate);
            assert_eq!(x.pool.placement, Placement::Local);
            assert_eq!(x.pool.placement_config.window, WINDOW);
            assert_eq!(x.prefill_cpu, Some(0));
            assert!(x.pool.member_per_node);
            assert!(x.label.starts_with(&x.pool.placement_policy.to_string()));
        }
    }

    #[test]
    fn fig2_series_pin_to_the_data_the_other_node_or_nothing() {
        let s = fig2_series(&PoolConfig::default(), MODELS, 0, 1);
        assert_eq!(s.len(), 6);
        let pins: Vec<&Pinning> = s[..3].iter().map(|x| &x.pinning).collect();
        assert_eq!(
            pins,
            [
                &Pinning::Cpus(vec![0]),
                &Pinning::Cpus(vec![1]),
                &Pinning::Unpinned
            ]
        );
        for x in &s {
            assert_eq!(x.label.contains(ON), x.pool.bandwidth_cap.is_some());
            assert_eq!(x.pool.placement, Placement::Node0);
            assert_eq!(x.pool.thread_placement, ThreadPlacement::Off);
        }
    }

    #[test]
    fn order_check_allows_the_tolerance_only() {
        assert!(ordered(&[1.0, 1.0, 1.2, 1.3, 1.3], 0.05));
        assert!(ordered(&[1.0, 0.97, 1.2], 0.05));
        assert!(!ordered(&[1.0, 0.9, 1.2], 0.05));
    }

    fn record(label: &str, pct: u32, threads: usize, bps: f64) -> Record {
        Record {
            workload: mix(pct).to_string(),
            target: label.into(),
            threads,
            ops_per_sec: bps / 4096.0,
            bytes_per_sec: bps,
            p50_ns: 0,
            p99_ns: 0,
            ops: 1,
            seconds: 1.0,
            runs: 1,
            ops_per_sec_min: 0.0,
            ops_per_sec_max: 0.0,
            emulated: None,
            moves: None,
            persist: None,
            write_latency: None,
            fsync_latency: None,
            steal: None,
        }
    }

    #[test]
    fn fig5_table_has_a_row_per_threads_and_ratio_and_checks_the_order() {
        let mut rs = Vec::new();
        for (i, p) in FIG5_POLICIES.iter().enumerate() {
            rs.push(record(
                &format!("{p} {ON}"),
                80,
                2,
                (i as f64 + 1.0) * 1048576.0,
            ));
            rs.push(record(
                &format!("{p} {ON}"),
                60,
                2,
                (5.0 - i as f64) * 1048576.0,
            ));
        }
        let t = fig5_table(&rs);
        let row = |pct: &str| {
            t.lines()
                .find(|l| l.split_whitespace().take(2).eq(["2", pct]))
                .unwrap()
                .to_string()
        };
        assert!(
            row("80").contains("5.00x") && row("80").ends_with("yes"),
            "{t}"
        );
        assert!(
            row("60").contains("0.20x") && row("60").ends_with("no"),
            "{t}"
        );
        assert_eq!(t.lines().count(), 2 + FIG5_READ_PCTS.len());
    }
}
