//! Parameters of the emulation models for emulated NUMA topologies: the
//! remote-access cost ([`RemoteCost`], charged by `remote.rs`) and the
//! per-node NVMM bandwidth cap ([`BandwidthCap`], charged by `bwcap.rs`).
//! Mount options name them (`crate::MountOptions`); they live here, beside
//! the code that charges them, so the media depends on nothing above it.

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

/// The emulated remote-access cost model ([`crate::MountOptions::remote_cost`]):
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

impl super::Media {
    /// Charge every later access to a member on another node than the
    /// accessing thread's (by `topology`) with `cost` (see
    /// [`super::remote::RemoteModel`]).
    pub fn set_remote_cost(&mut self, cost: crate::RemoteCost, topology: crate::Topology) {
        let members = self.members.iter().map(|m| (m.start, m.len, m.node));
        self.remote = Some(Box::new(super::remote::RemoteModel::new(
            cost, topology, members,
        )));
    }

    /// Limit every later access to each node's member to `cap` weighted
    /// bytes per second, all threads together (see
    /// [`super::bwcap::BandwidthModel`]).
    pub fn set_bandwidth_cap(&mut self, cap: crate::BandwidthCap, topology: crate::Topology) {
        let members = self.members.iter().map(|m| (m.start, m.len, m.node));
        self.bwcap = Some(Box::new(super::bwcap::BandwidthModel::new(
            cap, topology, members,
        )));
    }

    /// With the remote-cost model or the bandwidth cap on: make the
    /// calling thread pay for an access of `[off, off+len)`. Off: one
    /// well-predicted branch each.
    #[inline(always)]
    pub(super) fn charge(&self, off: u64, len: usize, access: super::remote::Access) {
        if let Some(m) = &self.remote {
            m.charge(off, len, access);
        }
        if let Some(b) = &self.bwcap {
            b.charge(off, len, access);
        }
    }
}
