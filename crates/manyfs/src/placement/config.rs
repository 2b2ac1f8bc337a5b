//! What thread placement does and its parameters (mount options).

use crate::error::{Error, Result};
use std::time::Duration;

/// Whether a mount watches and moves the threads that use it
/// ([`crate::MountOptions::thread_placement`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ThreadPlacement {
    /// No accounting, no planner thread (the default: a library must be
    /// asked before it moves its caller's threads).
    #[default]
    Off,
    /// Account and plan every window; report the decisions, move nothing.
    Advise,
    /// Account, plan, and move threads with `sched_setaffinity`, each only
    /// within its own mask as first seen (the masks they had before their
    /// first move are restored when the mount goes away).
    Migrate,
}

impl std::str::FromStr for ThreadPlacement {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "off" => Ok(ThreadPlacement::Off),
            "advise" => Ok(ThreadPlacement::Advise),
            "migrate" => Ok(ThreadPlacement::Migrate),
            _ => Err(Error::InvalidArgument(format!(
                "thread_placement {s:?} (expected off, advise or migrate)"
            ))),
        }
    }
}

impl std::fmt::Display for ThreadPlacement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ThreadPlacement::Off => "off",
            ThreadPlacement::Advise => "advise",
            ThreadPlacement::Migrate => "migrate",
        })
    }
}

/// Which of NThread's rules the planner applies (the paper's ablations).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PlacementPolicy {
    /// No rule: the planner never proposes a move.
    Off,
    /// Read locality only: a thread goes to the node it reads most from.
    Rl,
    /// Read locality, then CPU contention.
    Cpu,
    /// Read locality, then NVMM contention.
    Nm,
    /// All rules: read locality, NVMM contention, and CPU contention when
    /// there is no NVMM contention (the paper's NThread).
    #[default]
    Full,
}

impl PlacementPolicy {
    /// Whether threads go to their read target node.
    pub fn read_locality(self) -> bool {
        self != PlacementPolicy::Off
    }
    /// Whether NVMM contention is balanced.
    pub fn nvmm(self) -> bool {
        matches!(self, PlacementPolicy::Nm | PlacementPolicy::Full)
    }
    /// Whether CPU contention is balanced.
    pub fn cpu(self) -> bool {
        matches!(self, PlacementPolicy::Cpu | PlacementPolicy::Full)
    }
}

impl std::str::FromStr for PlacementPolicy {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "off" => Ok(PlacementPolicy::Off),
            "rl" => Ok(PlacementPolicy::Rl),
            "cpu" => Ok(PlacementPolicy::Cpu),
            "nm" => Ok(PlacementPolicy::Nm),
            "full" => Ok(PlacementPolicy::Full),
            _ => Err(Error::InvalidArgument(format!(
                "placement policy {s:?} (expected off, rl, cpu, nm or full)"
            ))),
        }
    }
}

impl std::fmt::Display for PlacementPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PlacementPolicy::Off => "off",
            PlacementPolicy::Rl => "rl",
            PlacementPolicy::Cpu => "cpu",
            PlacementPolicy::Nm => "nm",
            PlacementPolicy::Full => "full",
        })
    }
}

/// The planner's parameters; the defaults are the NThread paper's.
///
/// Bandwidths are bytes per second. "Weighted" bandwidth is the paper's
/// Eq. 1: reads count a third (`read_weight_divisor`), writes in full.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementConfig {
    /// The planning window (`Time_W`): 1 s.
    pub window: Duration,
    /// Read dominance: a node is a thread's read target when the thread
    /// read this many bytes more from it than from any other node in a
    /// 1 s window on a node reading `reference_read_bw` (200 MB at
    /// 6.8 GB/s, one Optane DC PMM). Scaled by the window's length and by
    /// the node's calibrated read bandwidth ([`Self::dominance_bytes`]).
    pub read_dominance_bytes: u64,
    /// The read bandwidth `read_dominance_bytes` is stated for (6.8 GB/s).
    pub reference_read_bw: u64,
    /// Calibrated read bandwidth per node (`manyfs calibrate`); empty or
    /// zero for a node: `reference_read_bw`.
    pub node_read_bw: Vec<u64>,
    /// Calibrated maximum weighted bandwidth per node; empty or zero for a
    /// node: `default_node_max_bw`.
    pub node_max_bw: Vec<u64>,
    /// Maximum weighted bandwidth of a node without calibration (2.3 GB/s:
    /// one Optane DC PMM's write bandwidth, about a third of its read).
    pub default_node_max_bw: u64,
    /// Reads weigh `1 / read_weight_divisor` of a write (3).
    pub read_weight_divisor: u32,
    /// A node is NVMM-contended above this percentage of its maximum (80)...
    pub nvmm_contended_pct: u32,
    /// ...while every other node is below this percentage of its load (50).
    pub nvmm_others_below_pct: u32,
    /// `CPU_limit` of Eq. 5, percent (90).
    pub cpu_limit_pct: u32,
    /// CPU imbalance: the busiest node at least this many times the
    /// least busy (2).
    pub cpu_imbalance: u32,
    /// Hysteresis: a thread moved is not moved again for this many windows
    /// (3).
    pub hold_windows: u32,
}

impl Default for PlacementConfig {
    fn default() -> Self {
        PlacementConfig {
            window: Duration::from_secs(1),
            read_dominance_bytes: 200_000_000,
            reference_read_bw: 6_800_000_000,
            node_read_bw: Vec::new(),
            node_max_bw: Vec::new(),
            default_node_max_bw: 2_300_000_000,
            read_weight_divisor: 3,
            nvmm_contended_pct: 80,
            nvmm_others_below_pct: 50,
            cpu_limit_pct: 90,
            cpu_imbalance: 2,
            hold_windows: 3,
        }
    }
}

impl PlacementConfig {
    /// Check the parameters make sense.
    pub fn validate(&self) -> Result<()> {
        let bad = |what: &str| Err(Error::InvalidArgument(format!("thread placement: {what}")));
        if self.window < Duration::from_millis(1) || self.window > Duration::from_secs(3600) {
            return bad("window must be between 1 ms and 1 hour");
        }
        if self.reference_read_bw == 0 || self.default_node_max_bw == 0 {
            return bad("reference and default bandwidths must be positive");
        }
        if self.read_weight_divisor == 0 || self.cpu_imbalance == 0 {
            return bad("read weight divisor and CPU imbalance must be positive");
        }
        if self.nvmm_contended_pct == 0 || self.cpu_limit_pct == 0 {
            return bad("contention limits must be positive");
        }
        Ok(())
    }

    /// The read dominance in bytes for a window on `node`: the configured
    /// bytes times the window in seconds times the node's read bandwidth
    /// over the reference one. A shorter window or a slower device needs
    /// proportionally less surplus to show the same rate of remote reads.
    pub fn dominance_bytes(&self, node: usize) -> u64 {
        let bw = self
            .node_read_bw
            .get(node)
            .copied()
            .filter(|&b| b > 0)
            .unwrap_or(self.reference_read_bw);
        let scaled = self.read_dominance_bytes as f64
            * self.window.as_secs_f64()
            * (bw as f64 / self.reference_read_bw as f64);
        scaled.max(1.0) as u64
    }

    /// Maximum weighted bandwidth of `node`.
    pub fn node_max(&self, node: usize) -> u64 {
        self.node_max_bw
            .get(node)
            .copied()
            .filter(|&b| b > 0)
            .unwrap_or(self.default_node_max_bw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_and_policies_parse_and_print() {
        for s in ["off", "advise", "migrate"] {
            assert_eq!(s.parse::<ThreadPlacement>().unwrap().to_string(), s);
        }
        for s in ["off", "rl", "cpu", "nm", "full"] {
            assert_eq!(s.parse::<PlacementPolicy>().unwrap().to_string(), s);
        }
        assert!("on".parse::<ThreadPlacement>().is_err());
        assert!("all".parse::<PlacementPolicy>().is_err());
    }

    #[test]
    fn dominance_scales_with_window_and_bandwidth() {
        let mut c = PlacementConfig::default();
        assert_eq!(c.dominance_bytes(0), 200_000_000);
        c.window = Duration::from_millis(100);
        assert_eq!(c.dominance_bytes(0), 20_000_000);
        c.node_read_bw = vec![0, 3_400_000_000];
        assert_eq!(c.dominance_bytes(1), 10_000_000);
        assert_eq!(c.dominance_bytes(0), 20_000_000);
        assert!(c.validate().is_ok());
        c.window = Duration::ZERO;
        assert!(c.validate().is_err());
    }
}
