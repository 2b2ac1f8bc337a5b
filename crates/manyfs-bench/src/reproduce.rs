//! `manyfs bench --reproduce NAME`: a figure of one of the papers, rerun
//! with one command on this machine, with the same tables, JSON and plot
//! as any other run.
//!
//! `numa-fig6`: the NUMA-aware NOVA paper's Figure 6 (b)-(d): DWOM, DWOL
//! and DRBL on NOVA (`lib:inode`, one log per inode, every block on node
//! 0), NOVA with a range lock (`lib:srl-tree`, the same placement) and the
//! NUMA-aware design (`lib:srl-tree`, per-CPU sub-logs, local-first
//! placement), and a control (the NUMA-aware design with every block on
//! node 0: placement alone differs), on an emulated two-node topology
//! (`2x1`) with a pool of one member per node; once with the emulated remote-access cost model on
//! (every such figure labelled EMULATED) and once with it off, as the
//! control, in one run. With `--topology system` ([`run_fig6_system`]) the
//! same four configurations run on the machine's own nodes instead: one
//! member per real node, bound to it, threads spread over the nodes, no
//! model (the remote accesses are real); a machine of one node is refused.
//!
//! `ncache-fig7`: the nCACHE paper's Figures 7 and 8 (DirectIO DWOM and
//! DRBM): both workloads with FxMark's 8 MiB stride and with 4 KiB, on each
//! file-index kind (`cas`, `rw` = nCACHE, `cascade` = F2FS's node tree)
//! times two range locks (`srl-tree`, `inode`), then the index
//! microbenchmarks ([`crate::index`]) for each kind's serial time per
//! lookup and insert, and every point's serial fraction (range lock +
//! index) projected to the paper's 120 cores.
//!
//! `tier-fig6`: the F2FS range-lock + NVM node-logging paper's Figure 6
//! (DWOM direct and DWSL) on a tiered pool, its four configurations
//! (Baseline, RL, NL, Integrated) with the data device's raw write rate as
//! the reference line ([`tier`]).
//!
//! `tier-checkpoint`: the same paper's claim that a checkpoint never
//! stalls writers: 4 KiB appends on the tier traced through checkpoints,
//! none / background / `checkpoint=blocking` (F2FS's stall) side by side
//! ([`checkpoint`]).

pub mod checkpoint;
pub mod nthread;
pub mod tier;

use crate::index::{IndexConfig, IndexReport, run_index, stride_label};
use crate::locks::{FsProjection, project_point};
use crate::report::{Rule, si, text_table};
use crate::runner::{Config, Pinning, Record, Series, emulated_label, run_series};
use crate::sys::allowed_cpus;
use crate::target::{PoolConfig, Target};
use crate::workload::{BLOCK, REGION};
use crate::{BenchError, Result, Workload};
use manyfs::{IndexKind, LockKind, Placement, RemoteCost, Sublogs, Topology, TopologySpec};
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
        title: "NUMA-aware NOVA, Fig. 6 (b)-(d): DWOM, DWOL, DRBL on NOVA, NOVA with a range lock \
                and the NUMA-aware design (plus a placement-only control), emulated 2-node \
                topology, remote-cost model on (EMULATED) and off; `--topology system`: the \
                machine's own nodes, no model",
    },
    Figure {
        name: "ncache-fig7",
        title: "nCACHE, Fig. 7/8: DWOM and DRBM at 8 MiB and 4 KiB strides on each file index \
                (cas, rw = nCACHE, cascade = F2FS) x range lock (srl-tree, inode), index serial \
                time per operation projected to 120 cores",
    },
    Figure {
        name: "tier-fig6",
        title: "F2FS range lock + NVM node logging, Fig. 6 (b)(c): DWOM direct and DWSL on a \
                tiered pool (data on the disk) as Baseline/RL (logs in a file pool on the disk) \
                and NL/Integrated (logs on /dev/shm), inode vs srl-tree, the device's raw \
                O_DIRECT write rate as reference",
    },
    Figure {
        name: "tier-checkpoint",
        title: "F2FS NVM node logging: write latency traced through checkpoints on a tiered \
                pool (logs on /dev/shm, data on the disk): none, background and blocking \
                (F2FS's stall), 1 and 2 threads",
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

/// The three file systems of Figure 6, then a control that is the
/// NUMA-aware design with every block on node 0 (it differs from the
/// design in placement only): (label, range lock, sub-logs, placement).
pub const FIG6_CONFIGS: [(&str, LockKind, Sublogs, Placement); 4] = [
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
    (
        "control:node0",
        LockKind::SrlTree,
        Sublogs::PerCpu,
        Placement::Node0,
    ),
];

/// Label suffix of the series run with the model on.
const ON: &str = "EMULATED";
/// Label suffix of the control series.
const OFF: &str = "model off";
/// Label suffix of the series run on the machine's own topology.
const SYSTEM: &str = "system";

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
                pinning: Pinning::Config,
                prefill_cpu: None,
            });
        }
    }
    out
}

/// The CPUs `numa-fig6 --topology system` pins its threads to, round-robin:
/// the first allowed CPU of each node in node order, then the second of
/// each, and so on, so that thread `t` runs on node `t mod nodes` (while
/// that node has allowed CPUs left). Refused, with a one-line reason,
/// unless `topology` is the machine's own with at least two nodes on which
/// this process may run.
pub fn fig6_system_cpus(topology: &Topology, allowed: &[usize]) -> Result<Vec<usize>> {
    let refuse = |why: String| {
        BenchError::InvalidArgument(format!(
            "numa-fig6 --topology system: {why}; run it without --topology for the emulated \
             2-node figure"
        ))
    };
    if topology.is_emulated() {
        return Err(refuse(format!(
            "MANYFS_TOPOLOGY names an emulated topology ({topology}), not the machine's"
        )));
    }
    if topology.node_count() < 2 {
        return Err(refuse(format!(
            "this machine has one NUMA node ({} CPUs), so no access is remote",
            topology.cpu_count()
        )));
    }
    let per_node: Vec<Vec<usize>> = (0..topology.node_count())
        .map(|n| {
            topology
                .cpus_of(n)
                .iter()
                .copied()
                .filter(|c| allowed.contains(c))
                .collect()
        })
        .filter(|cpus: &Vec<usize>| !cpus.is_empty())
        .collect();
    if per_node.len() < 2 {
        return Err(refuse(format!(
            "this process may run on the CPUs of one of the {} NUMA nodes only (allowed: {allowed:?})",
            topology.node_count()
        )));
    }
    let deepest = per_node.iter().map(Vec::len).max().unwrap_or(0);
    Ok((0..deepest)
        .flat_map(|i| per_node.iter().filter_map(move |cpus| cpus.get(i).copied()))
        .collect())
}

/// The four series of `numa-fig6 --topology system`: each configuration
/// of [`FIG6_CONFIGS`] on the machine's own topology, with a pool of one
/// member per node (bound to it: `docs/layout.md`, "Binding to the node"),
/// no remote-cost model, threads pinned round-robin to `cpus`
/// ([`fig6_system_cpus`]), each thread's data written from its own CPU.
pub fn fig6_system_series(base: &PoolConfig, cpus: &[usize]) -> Vec<Series> {
    FIG6_CONFIGS
        .iter()
        .map(|&(name, lock, sublogs, placement)| Series {
            label: format!("{name} {SYSTEM}"),
            target: Target::Lib(lock),
            pool: PoolConfig {
                sublogs,
                placement,
                topology: TopologySpec::System,
                remote_cost: None,
                bandwidth_cap: None,
                member_per_node: true,
                ..base.clone()
            },
            pinning: Pinning::Cpus(cpus.to_vec()),
            prefill_cpu: None,
        })
        .collect()
}

/// Run `numa-fig6` on the machine's own topology with `cfg`'s threads,
/// durations and repeats (see [`fig6_system_series`]); refused as
/// [`fig6_system_cpus`] says.
pub fn run_fig6_system(cfg: &Config) -> Result<Vec<Record>> {
    let topology = Topology::resolve(TopologySpec::System)
        .map_err(|e| BenchError::InvalidArgument(format!("numa-fig6 --topology system: {e}")))?;
    let cpus = fig6_system_cpus(&topology, &allowed_cpus())?;
    let mut cfg = cfg.clone();
    cfg.workloads = FIG6_WORKLOADS.to_vec();
    cfg.membw = false;
    run_series(&cfg, &fig6_system_series(&cfg.pool, &cpus))
}

/// The parameters of a `numa-fig6 --topology system` run, printed above its
/// results; refused as [`fig6_system_cpus`] says.
pub fn fig6_system_header(threads: &[usize]) -> Result<String> {
    let topology = Topology::resolve(TopologySpec::System)
        .map_err(|e| BenchError::InvalidArgument(format!("numa-fig6 --topology system: {e}")))?;
    let cpus = fig6_system_cpus(&topology, &allowed_cpus())?;
    let nodes = topology.node_count();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "numa-fig6: topology system ({topology}), pool of {nodes} members (member i on node i, \
         bound to it where it is on tmpfs), no remote-cost model: remote accesses are real"
    );
    let _ = writeln!(
        out,
        "configurations: NOVA(V) = lib:inode, sublogs=one, placement=node0; NOVA(RL) = \
         lib:srl-tree, sublogs=one, placement=node0; NOVA(RL+NUMA) = lib:srl-tree, sublogs=cpu, \
         placement=local; control:node0 = lib:srl-tree, sublogs=cpu, placement=node0"
    );
    let max = threads.iter().copied().max().unwrap_or(1);
    let desc: Vec<String> = (0..max.min(2 * nodes))
        .map(|t| {
            let c = cpus[t % cpus.len()];
            format!("thread {t} -> CPU {c} -> node {}", topology.node_of(c))
        })
        .collect();
    let _ = writeln!(
        out,
        "pinning: {} (round-robin over the nodes)",
        desc.join(", ")
    );
    out.push_str(&load_line("start"));
    Ok(out)
}

/// `load average (1 min) at WHEN: L`, with a warning when other work was
/// running (1 or more: the configurations then differ by the CPU each
/// point got, at 2 threads most; docs/benchmarks.md); empty where the
/// load cannot be read.
pub fn load_line(when: &str) -> String {
    match crate::sys::load_average() {
        Some(l) if l >= 1.0 => format!(
            "load average (1 min) at {when}: {l:.2}: other work is running; points may differ by \
             the CPU they got rather than by configuration\n"
        ),
        Some(l) => format!("load average (1 min) at {when}: {l:.2}\n"),
        None => String::new(),
    }
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
    let _ = writeln!(
        out,
        "configurations: NOVA(V) = lib:inode, sublogs=one, placement=node0; NOVA(RL) = \
         lib:srl-tree, sublogs=one, placement=node0; NOVA(RL+NUMA) = lib:srl-tree, sublogs=cpu, \
         placement=local; control:node0 = lib:srl-tree, sublogs=cpu, placement=node0 (the design \
         but for placement)"
    );
    let max = threads.iter().copied().max().unwrap_or(1);
    let nodes = fig6_thread_nodes(max.min(4));
    let desc: Vec<String> = nodes
        .iter()
        .map(|(t, c, n)| format!("thread {t} -> CPU {c} -> node {n}"))
        .collect();
    let _ = writeln!(out, "pinning: {} (round-robin)", desc.join(", "));
    out.push_str(&load_line("start"));
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
/// configuration's throughput (GiB/s) with the model on and off, the
/// NUMA-aware design over the better of the paper's two node-0
/// configurations, and over the control (placement alone).
pub fn fig6_table(records: &[Record]) -> String {
    let gib = |r: Option<&Record>| {
        r.map(|r| format!("{:.2}", r.bytes_per_sec / (1u64 << 30) as f64))
            .unwrap_or_else(|| "-".into())
    };
    let mut header: Vec<String> = vec!["workload".into(), "threads".into()];
    // The emulated run's two halves, or the system run's one.
    let suffixes: Vec<&str> = [ON, OFF, SYSTEM]
        .into_iter()
        .filter(|s| records.iter().any(|r| r.target.ends_with(&format!(" {s}"))))
        .collect();
    for &suffix in &suffixes {
        for (name, ..) in FIG6_CONFIGS {
            header.push(format!("{name} {suffix}"));
        }
        header.push(format!("NUMA / best NOVA ({suffix})"));
        header.push(format!("NUMA / control ({suffix})"));
    }
    let mut threads: Vec<usize> = records.iter().map(|r| r.threads).collect();
    threads.sort_unstable();
    threads.dedup();
    let mut rows = Vec::new();
    for w in FIG6_WORKLOADS {
        let w = w.to_string();
        for &n in &threads {
            let mut row = vec![w.clone(), n.to_string()];
            for &suffix in &suffixes {
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
                let ratio = |over: f64| match found[2] {
                    Some(numa) if over > 0.0 => format!("{:.2}x", numa.bytes_per_sec / over),
                    _ => "-".into(),
                };
                row.push(ratio(best_node0));
                row.push(ratio(found[3].map_or(0.0, |r| r.bytes_per_sec)));
            }
            rows.push(row);
        }
    }
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    text_table(&header, &rows, 2, Rule::Columns)
}

/// The workloads of `ncache-fig7` (Fig. 7: DWOM, Fig. 8: DRBM).
pub const FIG7_WORKLOADS: [Workload; 2] = [Workload::Dwom, Workload::Drbm];

/// The strides of `ncache-fig7`: FxMark's 8 MiB region, and 4 KiB.
pub const FIG7_STRIDES: [u64; 2] = [REGION, BLOCK as u64];

/// The range locks of `ncache-fig7`: the paper's atomic range lock (here
/// SRL) and the per-inode lock of the baseline F2FS.
pub const FIG7_LOCKS: [LockKind; 2] = [LockKind::SrlTree, LockKind::Inode];

/// Cores of the nCACHE paper's machine, the projection's target.
pub const FIG7_CORES: usize = 120;

/// The label of one `ncache-fig7` series.
pub fn fig7_label(index: IndexKind, lock: LockKind, stride: u64) -> String {
    format!("{index}+{lock} {}", stride_label(stride))
}

/// The six series of `ncache-fig7` at `stride`: every index kind with
/// every lock of [`FIG7_LOCKS`], pools made from `base`.
pub fn fig7_series(base: &PoolConfig, stride: u64) -> Vec<Series> {
    let mut out = Vec::new();
    for index in IndexKind::ALL {
        for lock in FIG7_LOCKS {
            out.push(Series {
                label: fig7_label(index, lock, stride),
                target: Target::Lib(lock),
                pool: PoolConfig {
                    index,
                    ..base.clone()
                },
                pinning: Pinning::Config,
                prefill_cpu: None,
            });
        }
    }
    out
}

/// Run `ncache-fig7` with `cfg`'s threads, durations, repeats and pool
/// (its workloads, targets and stride are replaced), then the index
/// microbenchmarks at the same thread counts. `progress` is called before
/// each microbenchmark step.
pub fn run_fig7(cfg: &Config, progress: impl FnMut(&str)) -> Result<(Vec<Record>, IndexReport)> {
    let mut cfg = cfg.clone();
    cfg.workloads = FIG7_WORKLOADS.to_vec();
    cfg.membw = false;
    let mut records = Vec::new();
    for stride in FIG7_STRIDES {
        cfg.stride = stride;
        records.extend(run_series(&cfg, &fig7_series(&cfg.pool, stride))?);
    }
    let icfg = IndexConfig {
        kinds: IndexKind::ALL.to_vec(),
        strides: FIG7_STRIDES.to_vec(),
        threads: cfg.threads.clone(),
        duration: cfg.duration.min(std::time::Duration::from_millis(500)),
        pin: cfg.pin,
        cores: FIG7_CORES,
    };
    Ok((records, run_index(&icfg, progress)))
}

/// Every `ncache-fig7` series projected to [`FIG7_CORES`]: X(1), X(2)
/// measured on the file system, serial time per operation = the range
/// lock's (the whole operation for `inode`, none for `srl-tree` on
/// disjoint ranges) + the index's per lookup at that stride (from `idx`).
pub fn fig7_projection(records: &[Record], idx: &IndexReport) -> Vec<FsProjection> {
    let mut out = Vec::new();
    for w in FIG7_WORKLOADS {
        let w = w.to_string();
        for stride in FIG7_STRIDES {
            for index in IndexKind::ALL {
                for lock in FIG7_LOCKS {
                    let label = fig7_label(index, lock, stride);
                    let rate = |n: usize| {
                        records
                            .iter()
                            .find(|r| r.workload == w && r.target == label && r.threads == n)
                            .map(|r| r.ops_per_sec)
                    };
                    let (Some(x1), Some(x2)) = (rate(1), rate(2)) else {
                        continue;
                    };
                    let lock_ns = match lock {
                        LockKind::Inode if x1 > 0.0 => 1e9 / x1,
                        _ => 0.0,
                    };
                    let serial = lock_ns + idx.lookup_serial_ns(index, stride);
                    out.push(project_point(&w, &label, x1, x2, serial, FIG7_CORES));
                }
            }
        }
    }
    out
}

/// The Figure 7/8 comparison: per workload, stride and thread count, the
/// operations per second of each index kind with each lock.
pub fn fig7_table(records: &[Record]) -> String {
    let mut header: Vec<String> = vec!["workload".into(), "stride".into(), "threads".into()];
    for index in IndexKind::ALL {
        for lock in FIG7_LOCKS {
            header.push(format!("{index}+{lock}"));
        }
    }
    let mut threads: Vec<usize> = records.iter().map(|r| r.threads).collect();
    threads.sort_unstable();
    threads.dedup();
    let mut rows = Vec::new();
    for w in FIG7_WORKLOADS {
        let w = w.to_string();
        for stride in FIG7_STRIDES {
            for &n in &threads {
                let mut row = vec![w.clone(), stride_label(stride), n.to_string()];
                for index in IndexKind::ALL {
                    for lock in FIG7_LOCKS {
                        let label = fig7_label(index, lock, stride);
                        row.push(
                            records
                                .iter()
                                .find(|r| r.workload == w && r.target == label && r.threads == n)
                                .map_or_else(|| "-".into(), |r| si(r.ops_per_sec)),
                        );
                    }
                }
                rows.push(row);
            }
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
        assert!(e.contains("numa-fig6") && e.contains("ncache-fig7"), "{e}");
    }

    #[test]
    fn fig7_series_cover_every_index_and_lock_and_project() {
        let s = fig7_series(&PoolConfig::default(), 4096);
        assert_eq!(s.len(), 6);
        for x in &s {
            assert!(x.label.ends_with("4KiB"), "{}", x.label);
            assert_eq!(
                x.label,
                fig7_label(
                    x.pool.index,
                    match x.target {
                        Target::Lib(l) => l,
                        _ => unreachable!(),
                    },
                    4096
                )
            );
        }
        let rec =
            |label: &str, n: usize, ops: f64| crate::runner::test_record("DWOM", label, n, ops);
        let cas = fig7_label(IndexKind::Cas, LockKind::SrlTree, REGION);
        let casc = fig7_label(IndexKind::Cascade, LockKind::SrlTree, REGION);
        let inode = fig7_label(IndexKind::Cas, LockKind::Inode, REGION);
        let recs = vec![
            rec(&cas, 1, 1e6),
            rec(&cas, 2, 2e6),
            rec(&casc, 1, 1e6),
            rec(&casc, 2, 1.2e6),
            rec(&inode, 1, 1e6),
            rec(&inode, 2, 1e6),
        ];
        let idx = IndexReport {
            serial: vec![project_point(
                "lookup 8MiB",
                "cascade",
                1e6,
                1e6,
                250.0,
                120,
            )],
            ..Default::default()
        };
        let p = fig7_projection(&recs, &idx);
        assert_eq!(p.len(), 3);
        let get = |l: &str| p.iter().find(|r| r.lock == l).unwrap();
        assert_eq!(get(&cas).serial_fraction, 0.0);
        assert!((get(&cas).usl_speedup - 120.0).abs() < 1e-6);
        // 250 ns of a 1000 ns operation inside the cascade's root mutex.
        assert!((get(&casc).serial_fraction - 0.25).abs() < 1e-9);
        assert!((get(&inode).serial_fraction - 1.0).abs() < 1e-9);
        assert_eq!(get(&inode).cores, FIG7_CORES);
        let t = fig7_table(&recs);
        assert!(t.contains("cascade+srl-tree") && t.contains("8MiB"), "{t}");
    }

    /// A sysfs tree (`/sys/devices/system`) of nodes with these CPU lists.
    fn sysfs(nodes: &[&str]) -> (tempfile::TempDir, Topology) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("cpu")).unwrap();
        std::fs::write(dir.path().join("cpu/possible"), "0-7\n").unwrap();
        for (i, cpus) in nodes.iter().enumerate() {
            let n = dir.path().join(format!("node/node{i}"));
            std::fs::create_dir_all(&n).unwrap();
            std::fs::write(n.join("cpulist"), format!("{cpus}\n")).unwrap();
        }
        let t = Topology::from_sysfs(dir.path());
        (dir, t)
    }

    #[test]
    fn the_system_figure_refuses_one_node_and_spreads_threads_over_nodes() {
        let (_d, one) = sysfs(&["0-7"]);
        let e = fig6_system_cpus(&one, &[0, 1]).unwrap_err().to_string();
        assert!(e.contains("one NUMA node") && !e.contains('\n'), "{e}");
        let e = fig6_system_cpus(&Topology::emulated(2, 1), &[0, 1])
            .unwrap_err()
            .to_string();
        assert!(e.contains("emulated"), "{e}");
        let (_d, two) = sysfs(&["0-3", "4-7"]);
        // Thread t on node t mod 2 while both have CPUs left.
        assert_eq!(
            fig6_system_cpus(&two, &[0, 1, 2, 4, 5]).unwrap(),
            vec![0, 4, 1, 5, 2]
        );
        // Allowed on one node only: nothing would be remote either.
        let e = fig6_system_cpus(&two, &[0, 1]).unwrap_err().to_string();
        assert!(e.contains("one of the 2 NUMA nodes"), "{e}");
        let s = fig6_system_series(&PoolConfig::default(), &[0, 4]);
        assert_eq!(s.len(), FIG6_CONFIGS.len());
        for x in &s {
            assert!(x.label.ends_with(SYSTEM), "{}", x.label);
            assert_eq!(x.pool.topology, TopologySpec::System);
            assert!(x.pool.remote_cost.is_none() && x.pool.member_per_node);
            assert_eq!(x.pinning, Pinning::Cpus(vec![0, 4]));
        }
        // Its table has the system columns only.
        let recs = vec![
            crate::runner::test_record("DRBL", "NOVA(RL) system", 2, 1e6),
            crate::runner::test_record("DRBL", "NOVA(RL+NUMA) system", 2, 2e6),
        ];
        let t = fig6_table(&recs);
        assert!(t.contains("NOVA(RL+NUMA) system") && !t.contains(ON), "{t}");
        assert!(t.contains("2.00x"), "{t}");
    }

    #[test]
    fn six_series_and_only_model_on_ones_are_emulated() {
        let s = fig6_series(&PoolConfig::default(), RemoteCost::PAPER);
        assert_eq!(s.len(), 8);
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
