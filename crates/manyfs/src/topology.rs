//! The machine's NUMA topology as manyfs sees it: nodes, the CPUs of each,
//! the distances between nodes, and which CPU and node the calling thread
//! is on.
//!
//! Per-CPU structures (sub-logs, allocator pools, big-reader slots) are
//! sized by [`Topology::cpu_count`] and indexed by [`Topology::current_cpu`].
//! The system topology counts every *possible* CPU (`/sys/devices/system/
//! cpu/possible`), not the ones this process may run on: a thread can be
//! moved to any of them, and two CPUs must never share a "per-CPU" slot
//! because an affinity mask or a cgroup quota made the count small.
//!
//! An emulated topology (`topology=NxC`: N nodes of C CPUs each) lets a
//! small machine behave as a NUMA one: configured CPU `i` is real CPU
//! `i mod (N*C)`'s stand-in, on node `i / C`; local distance 10, remote 20.

use crate::error::{Error, Result};
use std::fmt;
use std::path::Path;
use std::str::FromStr;

/// What [`TopologySpec::System`] resolves to in this process, when a
/// program set it ([`Topology::set_process_default`]).
static PROCESS_DEFAULT: std::sync::OnceLock<TopologySpec> = std::sync::OnceLock::new();

/// The most CPUs a topology may have (the sub-log array holds 511 heads).
pub const MAX_CPUS: usize = 511;

/// Which topology a mount uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TopologySpec {
    /// The machine's own (sysfs), unless the program set another
    /// ([`Topology::set_process_default`]).
    #[default]
    System,
    /// `nodes` nodes of `cpus_per_node` CPUs each.
    Emulated {
        /// Number of nodes.
        nodes: usize,
        /// CPUs on each node.
        cpus_per_node: usize,
    },
}

impl FromStr for TopologySpec {
    type Err = Error;

    /// `system`, or `NxC` (`2x1`: 2 nodes of 1 CPU each).
    fn from_str(s: &str) -> Result<Self> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("system") {
            return Ok(TopologySpec::System);
        }
        let bad = || {
            Error::InvalidArgument(format!(
                "topology {s:?}: expected `system` or NODESxCPUS (e.g. 2x1), at most {MAX_CPUS} CPUs"
            ))
        };
        let (n, c) = s.split_once(['x', 'X']).ok_or_else(bad)?;
        let nodes: usize = n.trim().parse().map_err(|_| bad())?;
        let cpus_per_node: usize = c.trim().parse().map_err(|_| bad())?;
        if nodes == 0 || cpus_per_node == 0 || nodes.saturating_mul(cpus_per_node) > MAX_CPUS {
            return Err(bad());
        }
        Ok(TopologySpec::Emulated {
            nodes,
            cpus_per_node,
        })
    }
}

impl fmt::Display for TopologySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TopologySpec::System => write!(f, "system"),
            TopologySpec::Emulated {
                nodes,
                cpus_per_node,
            } => write!(f, "{nodes}x{cpus_per_node}"),
        }
    }
}

/// Nodes, their CPUs and distances.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    /// Node of each CPU id (`cpu_count` entries; CPUs sysfs lists on no
    /// node count as node 0's).
    node_of_cpu: Vec<u32>,
    /// CPU ids of each node.
    node_cpus: Vec<Vec<usize>>,
    /// `distance[a][b]`, as `/sys/devices/system/node/nodeA/distance`.
    distance: Vec<Vec<u32>>,
    /// The kernel's id of each node (`/sys/devices/system/node/nodeN`):
    /// manyfs numbers nodes densely, the kernel's ids may have holes.
    /// The dense numbers themselves in an emulated topology.
    os_ids: Vec<u32>,
    /// Whether this is an emulated topology.
    emulated: bool,
}

impl Topology {
    /// The topology `spec` names; for [`TopologySpec::System`], the one a
    /// program set with [`Topology::set_process_default`] (the `manyfs`
    /// command sets what `MANYFS_TOPOLOGY` names), else the machine's. The
    /// library itself never reads the environment.
    pub fn resolve(spec: TopologySpec) -> Result<Topology> {
        let spec = match (spec, PROCESS_DEFAULT.get()) {
            (TopologySpec::System, Some(&d)) => d,
            (s, _) => s,
        };
        Ok(match spec {
            TopologySpec::System => Topology::system().clone(),
            TopologySpec::Emulated {
                nodes,
                cpus_per_node,
            } => Topology::emulated(nodes, cpus_per_node),
        })
    }

    /// `nodes` nodes of `cpus_per_node` CPUs each: CPU `i` on node
    /// `i / cpus_per_node`; distance 10 to itself, 20 to every other node.
    pub fn emulated(nodes: usize, cpus_per_node: usize) -> Topology {
        let nodes = nodes.max(1);
        let per = cpus_per_node.max(1).min(MAX_CPUS / nodes).max(1);
        Topology {
            node_of_cpu: (0..nodes * per).map(|c| (c / per) as u32).collect(),
            node_cpus: (0..nodes)
                .map(|n| (n * per..(n + 1) * per).collect())
                .collect(),
            distance: (0..nodes)
                .map(|a| (0..nodes).map(|b| if a == b { 10 } else { 20 }).collect())
                .collect(),
            os_ids: (0..nodes as u32).collect(),
            emulated: true,
        }
    }

    /// Make `spec` what [`TopologySpec::System`] resolves to in this
    /// process, for every mount and mkfs that follows (a program's
    /// configuration, such as an emulated topology for tests and
    /// benchmarks). Once per process: a second call with another value is
    /// refused.
    pub fn set_process_default(spec: TopologySpec) -> Result<()> {
        match PROCESS_DEFAULT.get_or_init(|| spec) {
            &d if d == spec => Ok(()),
            d => Err(Error::InvalidArgument(format!(
                "the process's topology is already {d:?}, not {spec:?}"
            ))),
        }
    }

    /// The machine's topology from sysfs, or one node holding every CPU
    /// where sysfs says nothing usable (no NUMA support, a sandbox).
    /// Read once per process.
    pub fn system() -> &'static Topology {
        static SYSTEM: std::sync::OnceLock<Topology> = std::sync::OnceLock::new();
        SYSTEM.get_or_init(|| Topology::from_sysfs(Path::new("/sys/devices/system")))
    }

    /// The topology described under `root` (a `/sys/devices/system`).
    pub fn from_sysfs(root: &Path) -> Topology {
        let read = |p: &Path| std::fs::read_to_string(p).ok();
        let possible = read(&root.join("cpu/possible"))
            .and_then(|s| parse_cpu_list(&s))
            .and_then(|v| v.iter().max().map(|m| m + 1))
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .clamp(1, MAX_CPUS);
        let mut nodes: Vec<(u32, Vec<usize>, Vec<u32>)> = Vec::new();
        if let Ok(dir) = std::fs::read_dir(root.join("node")) {
            for e in dir.flatten() {
                let name = e.file_name();
                let Some(id) = name
                    .to_str()
                    .and_then(|n| n.strip_prefix("node"))
                    .and_then(|n| n.parse::<u32>().ok())
                else {
                    continue;
                };
                let cpus = read(&e.path().join("cpulist"))
                    .and_then(|s| parse_cpu_list(&s))
                    .unwrap_or_default();
                let dist: Vec<u32> = read(&e.path().join("distance"))
                    .map(|s| {
                        s.split_whitespace()
                            .filter_map(|d| d.parse().ok())
                            .collect()
                    })
                    .unwrap_or_default();
                nodes.push((id, cpus, dist));
            }
        }
        nodes.sort_by_key(|n| n.0);
        // Node ids may have holes (a node without memory or CPUs offline):
        // manyfs numbers the nodes it found densely, in id order.
        if nodes.is_empty() {
            let mut t = Topology::emulated(1, possible);
            t.emulated = false;
            return t;
        }
        let ids: Vec<u32> = nodes.iter().map(|n| n.0).collect();
        let mut node_of_cpu = vec![0u32; possible];
        let mut node_cpus = vec![Vec::new(); nodes.len()];
        for (dense, (_, cpus, _)) in nodes.iter().enumerate() {
            for &c in cpus.iter().filter(|&&c| c < possible) {
                node_of_cpu[c] = dense as u32;
                node_cpus[dense].push(c);
            }
        }
        let distance = nodes
            .iter()
            .map(|(me, _, d)| {
                // The columns of the nodes found, in the same order; a
                // missing one as Linux's defaults.
                ids.iter()
                    .map(|&id| {
                        let default = if id == *me { 10 } else { 20 };
                        d.get(id as usize).copied().unwrap_or(default)
                    })
                    .collect()
            })
            .collect();
        Topology {
            node_of_cpu,
            node_cpus,
            distance,
            os_ids: ids,
            emulated: false,
        }
    }

    /// The same nodes with other distances (`distances[a][b]`, one row and
    /// column per node): for emulating machines whose nodes are not all
    /// equally far apart.
    pub fn with_distances(mut self, distances: Vec<Vec<u32>>) -> Topology {
        let n = self.node_count();
        if distances.len() == n && distances.iter().all(|row| row.len() == n) {
            self.distance = distances;
        }
        self
    }

    /// CPUs that per-CPU structures are sized for.
    pub fn cpu_count(&self) -> usize {
        self.node_of_cpu.len()
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.node_cpus.len()
    }

    /// Whether the topology is emulated.
    pub fn is_emulated(&self) -> bool {
        self.emulated
    }

    /// The kernel's id of node `node` (what `mbind` and sysfs name; equal
    /// to `node` unless the machine's node ids have holes).
    pub fn os_node_id(&self, node: usize) -> u32 {
        self.os_ids.get(node).copied().unwrap_or(node as u32)
    }

    /// manyfs's number of the node the kernel calls `os_id`, if it is one
    /// of this topology's.
    pub fn node_of_os_id(&self, os_id: u32) -> Option<usize> {
        self.os_ids.iter().position(|&id| id == os_id)
    }

    /// The node of CPU `cpu` (ids past the count wrap, as
    /// [`Topology::current_cpu`] does).
    pub fn node_of(&self, cpu: usize) -> usize {
        self.node_of_cpu[cpu % self.cpu_count()] as usize
    }

    /// The CPUs of node `node`.
    pub fn cpus_of(&self, node: usize) -> &[usize] {
        &self.node_cpus[node]
    }

    /// Distance from node `a` to node `b` (10 = local).
    pub fn distance(&self, a: usize, b: usize) -> u32 {
        self.distance[a][b]
    }

    /// Every node, nearest to `from` first (itself first; ties by number).
    pub fn nodes_by_distance(&self, from: usize) -> Vec<usize> {
        let mut v: Vec<usize> = (0..self.node_count()).collect();
        v.sort_by_key(|&n| (n != from, self.distance(from, n), n));
        v
    }

    /// The configured CPU the calling thread runs on now: its real CPU
    /// id, wrapped into the configured count (an emulated topology with
    /// fewer CPUs than the machine folds them; with more, some stay
    /// unused).
    pub fn current_cpu(&self) -> usize {
        crate::cpu::current_below(self.cpu_count())
    }

    /// The node of the CPU the calling thread runs on now.
    pub fn current_node(&self) -> usize {
        self.node_of(self.current_cpu())
    }
}

impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = |n: usize| if n == 1 { "" } else { "s" };
        write!(
            f,
            "{} node{}, {} CPU{}",
            self.node_count(),
            s(self.node_count()),
            self.cpu_count(),
            s(self.cpu_count())
        )?;
        if self.emulated {
            write!(f, " (emulated)")?;
        }
        Ok(())
    }
}

/// Parse a kernel CPU list such as `0-3,8,10-11` (None if malformed).
pub fn parse_cpu_list(s: &str) -> Option<Vec<usize>> {
    let s = s.trim();
    let mut out = Vec::new();
    if s.is_empty() {
        return Some(out);
    }
    for part in s.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if b < a || b >= 1 << 16 {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.trim().parse().ok()?),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_as_the_kernel_writes_them() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11\n"),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpu_list(""), Some(vec![]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("a"), None);
    }

    #[test]
    fn specs_parse_and_print() {
        assert_eq!(
            "system".parse::<TopologySpec>().unwrap(),
            TopologySpec::System
        );
        let t: TopologySpec = "2x1".parse().unwrap();
        assert_eq!(
            t,
            TopologySpec::Emulated {
                nodes: 2,
                cpus_per_node: 1
            }
        );
        assert_eq!(t.to_string(), "2x1");
        for bad in ["0x4", "2x0", "2", "x", "600x1", "2x-1"] {
            assert!(bad.parse::<TopologySpec>().is_err(), "{bad}");
        }
    }

    #[test]
    fn emulated_topology_places_cpus_on_nodes_in_order() {
        let t = Topology::emulated(4, 2);
        assert_eq!((t.node_count(), t.cpu_count()), (4, 8));
        assert_eq!(t.node_of(5), 2);
        assert_eq!(t.node_of(13), 2, "ids past the count wrap");
        assert_eq!(t.cpus_of(3), &[6, 7]);
        assert_eq!((t.distance(1, 1), t.distance(1, 2)), (10, 20));
        assert_eq!(t.nodes_by_distance(2), vec![2, 0, 1, 3]);
        assert!(t.current_cpu() < 8);
        assert_eq!(t.to_string(), "4 nodes, 8 CPUs (emulated)");
    }

    #[test]
    fn sysfs_with_two_nodes_and_a_hole() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let w = |p: &str, s: &str| {
            let p = root.join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, s).unwrap();
        };
        w("cpu/possible", "0-7\n");
        w("node/node0/cpulist", "0-3\n");
        w("node/node0/distance", "10 99 21\n");
        // node1 has no CPUs and is not listed; node2 holds 4-7.
        w("node/node2/cpulist", "4-7\n");
        w("node/node2/distance", "21 99 10\n");
        let t = Topology::from_sysfs(root);
        assert_eq!((t.node_count(), t.cpu_count()), (2, 8));
        assert_eq!((t.node_of(2), t.node_of(6)), (0, 1));
        assert_eq!((t.distance(0, 1), t.distance(1, 1)), (21, 10));
        // The kernel calls the second node 2: that is what mbind needs.
        assert_eq!((t.os_node_id(0), t.os_node_id(1)), (0, 2));
        assert_eq!(
            (t.node_of_os_id(2), t.node_of_os_id(1), t.node_of_os_id(0)),
            (Some(1), None, Some(0))
        );
        assert!(!t.is_emulated());
    }

    #[test]
    fn sysfs_without_nodes_is_one_node_of_every_possible_cpu() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("cpu")).unwrap();
        std::fs::write(dir.path().join("cpu/possible"), "0-63\n").unwrap();
        let t = Topology::from_sysfs(dir.path());
        assert_eq!((t.node_count(), t.cpu_count()), (1, 64));
        assert_eq!(t.to_string(), "1 node, 64 CPUs");
    }
}
