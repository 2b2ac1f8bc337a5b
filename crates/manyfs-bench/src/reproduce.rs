//! `manyfs bench --reproduce NAME`: a figure of one of the papers, rerun
//! with one command on this machine, with the same tables, JSON and plot
//! as any other run.
//!
//! `numa-fig6`: the NUMA-aware NOVA paper's Figure 6 (b)-(d): DWOM, DWOL
//! and DRBL on NOVA (`lib:inode`, one log per inode, every block on node
//! 0), NOVA with a range lock (`lib:srl-tree`, the same placement) and the
//! NUMA-aware design (`lib:srl-tree`, per-CPU sub-logs, local-first
//! placement), on an emulated two-node topology (`2x1`) with a pool of one
//! member per node; once with the emulated remote-access cost model on
//! (every such figure labelled EMULATED) and once with it off, as the
//! control, in one run.

pub mod nthread;

use crate::report::{Rule, text_table};
use crate::runner::{Config, Record, Series, emulated_label, run_series};
use crate::sys::allowed_cpus;
use crate::target::{PoolConfig, Target};
use crate::{BenchError, Result, Workload};
use manyfs::{LockKind, Placement, RemoteCost, Sublogs, Topology, TopologySpec};
use std::fmt::Write as _;

/// A figure `--reproduce` can rerun.
#[derive(Debug, Clone, Copy)]
pub struct Figure {
    /// Its name on the command line.
    pub name: &'static str,
    /// What it shows.
    pub title: &'static str,
}

/// Every reproducible figure.
pub const FIGURES: &[Figure] = &[
    Figure {
        name: "numa-fig6",
        title: "NUMA-aware NOVA, Fig. 6 (b)-(d): DWOM, DWOL, DRBL on NOVA, NOVA with a range \
                lock and the NUMA-aware design, emulated 2-node topology, remote-cost model on \
                (EMULATED) and off",
    },
    Figure {
        name: "nthread-fig5",
        title: "NThread, Fig. 5: private read/write mixes at read ratios 100..0 % with data on \
                node 0, thread placement policies off/rl/cpu/nm/full (migrate), emulated \
                2-node topology, remote cost and NVMM bandwidth cap on (EMULATED) and off",
    },
    Figure {
        name: "nthread-fig2",
        title: "NThread, Fig. 2: threads on the data's node, on the other node and unpinned \
                (R, W, RW mixes, data on node 0), emulated 2-node topology, remote cost and \
                NVMM bandwidth cap on (EMULATED) and off",
    },
];

/// The `--reproduce list` text: one line per figure.
pub fn list() -> String {
    let mut out = String::new();
    for f in FIGURES {
        let _ = writeln!(out, "{:<12}  {}", f.name, f.title);
    }
    out
}

/// The figure named `name`.
pub fn find(name: &str) -> Result<&'static Figure> {
    FIGURES.iter().find(|f| f.name == name).ok_or_else(|| {
        let names: Vec<&str> = FIGURES.iter().map(|f| f.name).collect();
        BenchError::InvalidArgument(format!(
            "no reproducible figure {name:?} (known: {}; `--reproduce list`)",
            names.join(", ")
        ))
    })
}

/// The emulated topology of `numa-fig6`: two nodes of one CPU each.
pub const FIG6_TOPOLOGY: TopologySpec = TopologySpec::Emulated {
    nodes: 2,
    cpus_per_node: 1,
};

/// The workloads of `numa-fig6`, in the paper's panel order.
pub const FIG6_WORKLOADS: [Workload; 3] = [Workload::Dwom, Workload::Dwol, Workload::Drbl];

/// The three file systems of Figure 6: (label, range lock, sub-logs,
/// placement).
pub const FIG6_CONFIGS: [(&str, LockKind, Sublogs, Placement); 3] = [
    ("NOVA(V)", LockKind::Inode, Sublogs::One, Placement::Node0),
    (
        "NOVA(RL)",
        LockKind::SrlTree,
        Sublogs::One,
        Placement::Node0,
    ),
    (
        "NOVA(RL+NUMA)",
        LockKind::SrlTree,
        Sublogs::PerCpu,
        Placement::Local,
    ),
];

/// Label suffix of the series run with the model on.
const ON: &str = "EMULATED";
/// Label suffix of the control series.
const OFF: &str = "model off";

/// The six series of `numa-fig6`: each configuration with the cost model
/// `cost` on, then each with it off; pools of one member per node of
/// [`FIG6_TOPOLOGY`], made from `base` (size, durability, location).
pub fn fig6_series(base: &PoolConfig, cost: RemoteCost) -> Vec<Series> {
    let mut out = Vec::new();
    for (suffix, model) in [(ON, Some(cost)), (OFF, None)] {
        for (name, lock, sublogs, placement) in FIG6_CONFIGS {
            out.push(Series {
                label: format!("{name} {suffix}"),
                target: Target::Lib(lock),
                pool: PoolConfig {
                    sublogs,
                    placement,
                    topology: FIG6_TOPOLOGY,
                    remote_cost: model,
                    member_per_node: true,
                    ..base.clone()
                },
                pinning: crate::runner::Pinning::Config,
                prefill_cpu: None,
            });
        }
    }
    out
}

/// Which node each of the first `threads` bench threads runs on under
/// [`FIG6_TOPOLOGY`] (threads are pinned round-robin to the allowed
/// CPUs): `(thread, cpu, node)`.
pub fn fig6_thread_nodes(threads: usize) -> Vec<(usize, usize, usize)> {
    let cpus = allowed_cpus();
    let topo = Topology::resolve(FIG6_TOPOLOGY).unwrap_or_else(|_| Topology::emulated(2, 1));
    (0..threads)
        .map(|t| {
            let cpu = cpus[t % cpus.len()];
            (t, cpu, topo.node_of(cpu))
        })
        .collect()
}

/// Run `numa-fig6` with `cfg`'s threads, durations and repeats (its
/// workloads, targets and pool settings are replaced). Returns the
/// records: the model-on series first.
pub fn run_fig6(cfg: &Config, cost: RemoteCost) -> Result<Vec<Record>> {
    let mut cfg = cfg.clone();
    cfg.workloads = FIG6_WORKLOADS.to_vec();
    cfg.membw = false;
    if !cfg.pin {
        return Err(BenchError::InvalidArgument(
            "numa-fig6 needs pinned threads (drop --no-pin): placement follows the node a \
             thread runs on"
                .into(),
        ));
    }
    run_series(&cfg, &fig6_series(&cfg.pool, cost))
}

/// The parameters of a `numa-fig6` run, printed above its results.
pub fn fig6_header(cost: RemoteCost, threads: &[usize]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "numa-fig6: topology 2x1 (emulated), pool of 2 members (member 0 on node 0, member 1 on node 1)"
    );
    let _ = writeln!(
        out,
        "remote-cost model (series marked {ON}): {}; a thread pays it for every 64-byte line \
         it reads or writes on the other node's member",
        emulated_label(cost)
    );
    if cost == RemoteCost::PAPER {
        let _ = writeln!(
            out,
            "  (paper defaults: Optane DC per core at 8 cores, read 15 GB/s remote vs 1.98x local, \
             write 6.5 GB/s remote vs 1.86x local; see docs/benchmarks.md)"
        );
    }
    let max = threads.iter().copied().max().unwrap_or(1);
    let nodes = fig6_thread_nodes(max.min(4));
    let desc: Vec<String> = nodes
        .iter()
        .map(|(t, c, n)| format!("thread {t} -> CPU {c} -> node {n}"))
        .collect();
    let _ = writeln!(out, "pinning: {} (round-robin)", desc.join(", "));
    if max > 1 && nodes.iter().all(|n| n.2 == nodes[0].2) {
        let _ = writeln!(
            out,
            "WARNING: every thread runs on node {}: this machine lets the bench use one CPU of \
             the emulated topology only, so nothing is remote for local placement either",
            nodes[0].2
        );
    }
    out
}

/// The Figure 6 comparison: per workload and thread count, each
/// configuration's throughput (GiB/s) with the model on and off, and the
/// NUMA-aware design over the better of the two node-0 configurations.
pub fn fig6_table(records: &[Record]) -> String {
    let gib = |r: Option<&Record>| {
        r.map(|r| format!("{:.2}", r.bytes_per_sec / (1u64 << 30) as f64))
            .unwrap_or_else(|| "-".into())
    };
    let mut header: Vec<String> = vec!["workload".into(), "threads".into()];
    for suffix in [ON, OFF] {
        for (name, ..) in FIG6_CONFIGS {
            header.push(format!("{name} {suffix}"));
        }
        header.push(format!("NUMA / best node0 ({suffix})"));
    }
    let mut threads: Vec<usize> = records.iter().map(|r| r.threads).collect();
    threads.sort_unstable();
    threads.dedup();
    let mut rows = Vec::new();
    for w in FIG6_WORKLOADS {
        let w = w.to_string();
        for &n in &threads {
            let mut row = vec![w.clone(), n.to_string()];
            for suffix in [ON, OFF] {
                let find = |name: &str| {
                    let label = format!("{name} {suffix}");
                    records
                        .iter()
                        .find(|r| r.workload == w && r.threads == n && r.target == label)
                };
                let found: Vec<Option<&Record>> = FIG6_CONFIGS.iter().map(|c| find(c.0)).collect();
                row.extend(found.iter().map(|r| gib(*r)));
                let best_node0 = found[..2]
                    .iter()
                    .flatten()
                    .map(|r| r.bytes_per_sec)
                    .fold(0.0, f64::max);
                row.push(match found[2] {
                    Some(numa) if best_node0 > 0.0 => {
                        format!("{:.2}x", numa.bytes_per_sec / best_node0)
                    }
                    _ => "-".into(),
                });
            }
            rows.push(row);
        }
    }
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    text_table(&header, &rows, 2, Rule::Columns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_figure_is_listed_and_found() {
        let l = list();
        for f in FIGURES {
            assert!(l.contains(f.name));
            assert_eq!(find(f.name).unwrap().name, f.name);
        }
        let e = find("fig99").unwrap_err().to_string();
        assert!(e.contains("numa-fig6"), "{e}");
    }

    #[test]
    fn six_series_and_only_model_on_ones_are_emulated() {
        let s = fig6_series(&PoolConfig::default(), RemoteCost::PAPER);
        assert_eq!(s.len(), 6);
        for x in &s {
            assert_eq!(x.label.contains(ON), x.pool.remote_cost.is_some());
            assert!(x.pool.member_per_node);
            assert_eq!(x.pool.topology, FIG6_TOPOLOGY);
        }
        let numa = &s[2];
        assert_eq!(
            (numa.target.clone(), numa.pool.sublogs, numa.pool.placement),
            (
                Target::Lib(LockKind::SrlTree),
                Sublogs::PerCpu,
                Placement::Local
            )
        );
    }
}
