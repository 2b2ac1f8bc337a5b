//! Options for creating and mounting a pool.

use crate::lock::LockKind;
use crate::media::Durability;

/// How to mount a pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountOptions {
    /// Range lock used for every file.
    pub lock: LockKind,
    /// Segment size of the segment range locks, in bytes (power of two >= 4 KiB).
    pub segment_size: u64,
    /// How writes become durable.
    pub durability: Durability,
    /// Refuse every change.
    pub read_only: bool,
    /// `file` mode: how often a background thread makes everything durable
    /// (like ext4's `commit=`); zero turns it off. Other modes ignore it.
    pub commit_interval: std::time::Duration,
    /// The NUMA topology per-CPU structures are sized and placed by: the
    /// machine's (or the one `MANYFS_TOPOLOGY` names), or an emulated one.
    pub topology: crate::topology::TopologySpec,
    /// Sub-logs per file and directory log: one per CPU (the design), or
    /// one (NOVA's single log per inode, a baseline for comparisons).
    pub sublogs: Sublogs,
    /// Where new blocks go: the writer's node first (the design), node 0
    /// first, or round-robin over the nodes (baselines for comparisons).
    pub placement: Placement,
    /// Thread placement (NThread): off (the default), advise (report what
    /// it would do) or migrate (move the threads doing I/O to their data).
    pub thread_placement: crate::placement::ThreadPlacement,
    /// Which of NThread's rules thread placement applies.
    pub placement_policy: crate::placement::PlacementPolicy,
    /// Thread placement's parameters (window, thresholds, calibrated
    /// bandwidths).
    pub placement_config: crate::placement::PlacementConfig,
    /// Emulated cost of remote-node memory ([`RemoteCost`]): off (`None`,
    /// the default) or extra busy-waiting per KiB a thread moves to or
    /// from a pool member on another node than its own. Only for an
    /// emulated topology ([`crate::Error::RemoteCostNeedsEmulatedTopology`]
    /// otherwise): on a real NUMA machine the hardware charges it.
    pub remote_cost: Option<RemoteCost>,
    /// Emulated per-node NVMM bandwidth ([`BandwidthCap`]): off (`None`,
    /// the default) or a cap on the weighted bytes per second (writes plus
    /// a third of reads) each node's pool member serves, all threads
    /// together; a thread over it busy-waits. Only for an emulated
    /// topology ([`crate::Error::BandwidthCapNeedsEmulatedTopology`]
    /// otherwise): a real node's memory has its own limit.
    pub bandwidth_cap: Option<BandwidthCap>,
}

/// Parse the value of an emulation option (`remote_cost=`,
/// `bandwidth_cap=`): `off` or `none` (None), `paper` or `on` (`paper`),
/// else what `parse` makes of the trimmed text; an error naming `what` and
/// the `expected` forms where it makes nothing.
fn parse_model_option<T>(
    s: &str,
    paper: T,
    what: &str,
    expected: &str,
    parse: impl FnOnce(&str) -> Option<T>,
) -> crate::Result<Option<T>> {
    let s = s.trim();
    match s {
        "off" | "none" => Ok(None),
        "paper" | "on" => Ok(Some(paper)),
        _ => parse(s).map(Some).ok_or_else(|| {
            crate::Error::InvalidArgument(format!("{what} {s:?} (expected {expected})"))
        }),
    }
}

/// The emulated per-node NVMM bandwidth cap
/// ([`MountOptions::bandwidth_cap`]): each node's pool member serves at
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

/// The emulated remote-access cost model ([`MountOptions::remote_cost`]):
/// a thread that reads (writes) a byte range of a pool member whose node
/// is not the thread's current node ([`crate::Topology::current_node`])
/// busy-waits `read_ns_per_kib` (`write_ns_per_kib`) nanoseconds per KiB
/// of it, counted in whole 64-byte cache lines. Local accesses cost
/// nothing extra.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteCost {
    /// Extra nanoseconds per KiB read from another node's member.
    pub read_ns_per_kib: u32,
    /// Extra nanoseconds per KiB written to another node's member.
    pub write_ns_per_kib: u32,
}

impl RemoteCost {
    /// Defaults derived from the NUMA-aware NOVA paper's Optane DC
    /// measurements (its Fig. 5, Intel MLC, 8 cores, the point where
    /// it states both the remote bandwidth and the local/remote ratio):
    ///
    /// - write: remote 6.5 GB/s, local 1.86x that = 12.09 GB/s; per core
    ///   0.8125 and 1.511 GB/s, so one KiB takes 1260.3 ns remote and
    ///   677.6 ns local: **+583 ns per KiB** remote;
    /// - read: remote 15 GB/s, local 1.98x that = 29.7 GB/s; per core
    ///   1.875 and 3.7125 GB/s, so one KiB takes 546.1 ns remote and
    ///   275.8 ns local: **+270 ns per KiB** remote.
    ///
    /// The extra time is the paper's absolute per-core difference, added on
    /// top of whatever the local medium costs here (DRAM, faster than
    /// Optane): remote accesses are relatively slower here than on the
    /// paper's machine. `remote_cost=R/W` sets other values.
    pub const PAPER: RemoteCost = RemoteCost {
        read_ns_per_kib: 270,
        write_ns_per_kib: 583,
    };

    /// Parse a `remote_cost=` value: `off` (None), `paper` or `on`
    /// ([`RemoteCost::PAPER`]), or `READ/WRITE` in nanoseconds per KiB
    /// (`270/583`).
    pub fn parse_option(s: &str) -> crate::Result<Option<RemoteCost>> {
        parse_model_option(
            s,
            RemoteCost::PAPER,
            "remote cost",
            "off, paper or READ/WRITE nanoseconds per KiB, e.g. 270/583, at most 1000000 each",
            |v| {
                let (r, w) = v.split_once('/')?;
                let parse = |x: &str| x.trim().parse::<u32>().ok().filter(|&n| n <= 1_000_000);
                Some(RemoteCost {
                    read_ns_per_kib: parse(r)?,
                    write_ns_per_kib: parse(w)?,
                })
            },
        )
    }
}

impl std::fmt::Display for RemoteCost {
    /// `270/583` (read/write nanoseconds per KiB), the form
    /// [`RemoteCost::parse_option`] reads back.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.read_ns_per_kib, self.write_ns_per_kib)
    }
}

/// Block placement across NUMA nodes ([`MountOptions::placement`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Placement {
    /// The allocating thread's node first, then the nearest others.
    #[default]
    Local,
    /// Node 0 first, whoever allocates (all data on one node, as a
    /// NUMA-unaware file system on one device).
    Node0,
    /// Each allocation on the next node in turn.
    Interleave,
}

impl std::str::FromStr for Placement {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<Self> {
        match s {
            "local" => Ok(Placement::Local),
            "node0" => Ok(Placement::Node0),
            "interleave" => Ok(Placement::Interleave),
            _ => Err(crate::Error::InvalidArgument(format!(
                "placement {s:?} (expected local, node0 or interleave)"
            ))),
        }
    }
}

impl std::fmt::Display for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Placement::Local => "local",
            Placement::Node0 => "node0",
            Placement::Interleave => "interleave",
        })
    }
}

/// How many sub-logs an inode's log has ([`MountOptions::sublogs`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sublogs {
    /// One per CPU of the topology: appends from different CPUs never
    /// share a tail.
    #[default]
    PerCpu,
    /// One per inode: every append to an inode shares its tail.
    One,
}

impl std::str::FromStr for Sublogs {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<Self> {
        match s {
            "cpu" => Ok(Sublogs::PerCpu),
            "one" => Ok(Sublogs::One),
            _ => Err(crate::Error::InvalidArgument(format!(
                "sublogs {s:?} (expected cpu or one)"
            ))),
        }
    }
}

impl std::fmt::Display for Sublogs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Sublogs::PerCpu => "cpu",
            Sublogs::One => "one",
        })
    }
}

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            lock: LockKind::default(),
            segment_size: 4096,
            durability: Durability::default(),
            read_only: false,
            commit_interval: std::time::Duration::from_secs(5),
            topology: crate::topology::TopologySpec::System,
            sublogs: Sublogs::PerCpu,
            placement: Placement::Local,
            thread_placement: crate::placement::ThreadPlacement::Off,
            placement_policy: crate::placement::PlacementPolicy::Full,
            placement_config: crate::placement::PlacementConfig::default(),
            remote_cost: None,
            bandwidth_cap: None,
        }
    }
}

impl MountOptions {
    /// Check the options make sense.
    pub fn validate(&self) -> crate::Result<()> {
        if !self.segment_size.is_power_of_two()
            || self.segment_size < 4096
            || self.segment_size > 1 << 30
        {
            return Err(crate::Error::InvalidArgument(format!(
                "segment size {} must be a power of two between 4096 and 1 GiB",
                self.segment_size
            )));
        }
        self.placement_config.validate()?;
        // A bad `MANYFS_TOPOLOGY` is an error here, not at first use.
        let topology = crate::topology::Topology::resolve(self.topology)?;
        if let Some(cost) = self.remote_cost
            && !topology.is_emulated()
        {
            return Err(crate::Error::RemoteCostNeedsEmulatedTopology {
                cost: cost.to_string(),
                topology: topology.to_string(),
            });
        }
        if let Some(cap) = self.bandwidth_cap
            && !topology.is_emulated()
        {
            return Err(crate::Error::BandwidthCapNeedsEmulatedTopology {
                cap: cap.to_string(),
                topology: topology.to_string(),
            });
        }
        Ok(())
    }

    /// Check the options suit a pool of `pool_bytes`: `srl-array` gives
    /// every file a lock word per segment of the whole pool, so it is
    /// refused where that exceeds [`SRL_ARRAY_MAX_BYTES`] per file (it
    /// would exhaust memory, or abort on an allocation that cannot be met).
    pub fn check_for_pool(&self, pool_bytes: u64) -> crate::Result<()> {
        if self.lock != LockKind::SrlArray {
            return Ok(());
        }
        let words = pool_bytes.div_ceil(self.segment_size.max(1));
        let bytes = words.saturating_mul(crate::lock::SEGMENT_WORD_BYTES);
        if bytes > SRL_ARRAY_MAX_BYTES {
            let min_segment = (pool_bytes
                / (SRL_ARRAY_MAX_BYTES / crate::lock::SEGMENT_WORD_BYTES))
                .next_power_of_two()
                .max(4096);
            return Err(crate::Error::InvalidArgument(format!(
                "lock=srl-array needs {} MiB of lock words per file for a {} MiB pool with \
                 {}-byte segments (at most {} MiB): use lock=srl-tree, or segments of at \
                 least {min_segment} bytes",
                bytes >> 20,
                pool_bytes >> 20,
                self.segment_size,
                SRL_ARRAY_MAX_BYTES >> 20
            )));
        }
        Ok(())
    }
}

/// The most memory `lock=srl-array` may reserve per file for its lock
/// words (64 MiB: a 2 GiB pool with 4 KiB segments).
pub const SRL_ARRAY_MAX_BYTES: u64 = 64 << 20;

/// How to create a pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MkfsOptions {
    /// Pool size in bytes.
    pub size: u64,
    /// One inode slot per this many bytes of pool.
    pub bytes_per_inode: u64,
    /// Replace a non-empty file already at the pool's path (its contents
    /// are lost). Off by default: [`crate::Fs::mkfs`] then fails with
    /// [`crate::Error::Exists`] instead of destroying an existing pool.
    pub replace_existing: bool,
    /// Write zeros over the whole pool instead of only reserving its space
    /// (`posix_fallocate`). A reserved block is an unwritten extent of the
    /// disk file system: its first write costs a conversion that a
    /// `file`-mode durability point must commit to the journal (ext4:
    /// about twice the cost of an fsync of a block written before). Pays
    /// one write of the whole pool at mkfs instead. Off by default.
    pub zero_fill: bool,
    /// The NUMA node of member 0, the pool file itself.
    pub node: u32,
    /// Further member files, one per persistent-memory device (one per
    /// NUMA node): member 1, 2, ... in this order. Their blocks follow
    /// member 0's in the pool's one block address space. Empty (the
    /// default): the pool is one file.
    pub members: Vec<crate::layout::members::PoolMember>,
}

impl Default for MkfsOptions {
    fn default() -> Self {
        MkfsOptions {
            size: 1 << 30,
            bytes_per_inode: 16 << 10,
            replace_existing: false,
            zero_fill: false,
            node: 0,
            members: Vec::new(),
        }
    }
}
