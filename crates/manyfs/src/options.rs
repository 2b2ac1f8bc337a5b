//! Options for creating and mounting a pool.

use crate::lock::LockKind;
use crate::media::Durability;
pub use crate::media::bwcap::BandwidthCap;
pub use crate::media::remote::RemoteCost;

/// How to mount a pool. New options may be added in later versions: start
/// from [`MountOptions::default`] and set the fields you need.
///
/// ```
/// let mut opts = manyfs::MountOptions::default();
/// opts.durability = manyfs::Durability::Dram;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MountOptions {
    /// Range lock used for every file.
    pub lock: LockKind,
    /// The tree that holds every file's page index: the lock-free CAS
    /// radix (the default), or nCACHE's RW-lock-per-node tree or F2FS's
    /// hand-over-hand mutex tree, baselines for comparisons. Recovery
    /// rebuilds the index in the kind mounted with.
    pub index: crate::index::IndexKind,
    /// Segment size of the segment range locks, in bytes (power of two >= 4 KiB).
    pub segment_size: u64,
    /// How writes become durable.
    pub durability: Durability,
    /// Refuse every change.
    pub read_only: bool,
    /// `file` mode: how often a background thread makes everything durable
    /// (like ext4's `commit=`; sooner once writes took a quarter of the
    /// pool's free blocks, or replaced 32 MiB of blocks that wait for a
    /// sync, at most ten times a second); zero turns it off. Other modes
    /// ignore it.
    pub commit_interval: std::time::Duration,
    /// Whether writers keep running while a full sync (the commit thread's
    /// checkpoint, `Fs::sync`) makes everything durable: `background` (the
    /// default), or `blocking`, F2FS's behaviour, kept as a baseline:
    /// writes, truncates and preallocations wait until it is done.
    pub checkpoint: Checkpoint,
    /// The NUMA topology per-CPU structures are sized and placed by: the
    /// machine's (or the process default a program set,
    /// [`crate::Topology::set_process_default`]), or an emulated one.
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
    /// A tiered pool's data device at another path than the one the pool
    /// records (it moved, or a block device was renamed); `None` (the
    /// default): the recorded one. Its header must still name this pool.
    pub data_device: Option<std::path::PathBuf>,
    /// How a tiered pool's data device is read and written: `uring` (the
    /// default: the transfers of one file read or write submitted
    /// together to a per-thread io_uring; where the kernel refuses
    /// io_uring the mount warns and uses `sync`) or `sync` (one
    /// `pread`/`pwrite` per transfer). Pools without a data device
    /// ignore it.
    pub device_io: crate::tier::DeviceIo,
    /// Name shards per directory made or loaded by this mount (a power of
    /// two from 1 to [`MAX_DIR_SHARDS`]): names in different shards are
    /// changed in parallel, and each shard costs 136 bytes of DRAM per
    /// directory. `None` (the default): four per CPU, from 16 to 32.
    /// More shards let threads creating and removing names in one shared
    /// directory meet less often (docs/benchmarks.md, "Creates and unlinks
    /// in one directory at 2 threads").
    pub dir_shards: Option<usize>,
    /// A tiered pool on persistent memory (`pm`, or `dram` standing in for
    /// it): writes of at most this many bytes to a file that has been
    /// `fsync`ed are staged in the pool, so that their `fsync` persists a
    /// few cache lines instead of flushing the device; they move to the
    /// device later (`inode/staging.rs`). Default 32 KiB; 0 turns staging
    /// off. Other pools ignore it.
    pub stage_max: u64,
    /// Whether a new inode inherits its directory's default POSIX ACL (as
    /// its access ACL, and its mode from it; the default). Off for a
    /// mount on which nobody enforces ACLs (the FUSE mount's `noxattr`):
    /// new inodes then take the mode they are created with, as on a file
    /// system without ACLs, and nothing unseen is stored for a later mount
    /// to enforce.
    pub inherit_acls: bool,
    /// Whether the pool is seen as one directory of a larger tree (as
    /// `manyfs run` shows it at DIR), so that a symlink can lead out of
    /// it: a followed symlink whose target is absolute, or a `..` at the
    /// root, ends the walk of a path with [`crate::Error::LeavesPool`],
    /// which holds the rest of the path for the caller to resolve in the
    /// larger tree (a kernel mount's symlinks are resolved so, by the
    /// kernel). Off (the default): the pool is its own tree, as for a
    /// program that links the library: an absolute target starts at the
    /// pool's root, and `..` at the root stays there.
    pub symlinks_leave_pool: bool,
}

/// The default [`MountOptions::stage_max`].
pub const DEFAULT_STAGE_MAX: u64 = 32 << 10;

/// The largest [`MountOptions::stage_max`]: staging is for small writes.
pub const MAX_STAGE_MAX: u64 = 64 << 20;

/// The most name shards a directory may have ([`MountOptions::dir_shards`]).
pub const MAX_DIR_SHARDS: usize = 1024;

pub use crate::alloc::Placement;

/// What a full sync does to writers ([`MountOptions::checkpoint`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Checkpoint {
    /// Writers keep running: the sync takes each sub-log's mutex only to
    /// snapshot and to write its marks.
    #[default]
    Background,
    /// Writes, truncates and preallocations wait for the whole sync, as
    /// F2FS's checkpoint holds every operation out (`f2fs_lock_all`): a
    /// baseline, whose stalls `manyfs bench --reproduce tier-checkpoint`
    /// shows.
    Blocking,
}

impl std::str::FromStr for Checkpoint {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<Self> {
        match s {
            "background" => Ok(Checkpoint::Background),
            "blocking" => Ok(Checkpoint::Blocking),
            _ => Err(crate::Error::InvalidArgument(format!(
                "checkpoint {s:?} (expected background or blocking)"
            ))),
        }
    }
}

impl std::fmt::Display for Checkpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Checkpoint::Background => "background",
            Checkpoint::Blocking => "blocking",
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
            index: crate::index::IndexKind::Cas,
            segment_size: 4096,
            durability: Durability::default(),
            read_only: false,
            commit_interval: std::time::Duration::from_secs(5),
            checkpoint: Checkpoint::Background,
            topology: crate::topology::TopologySpec::System,
            sublogs: Sublogs::PerCpu,
            placement: Placement::Local,
            thread_placement: crate::placement::ThreadPlacement::Off,
            placement_policy: crate::placement::PlacementPolicy::Full,
            placement_config: crate::placement::PlacementConfig::default(),
            remote_cost: None,
            bandwidth_cap: None,
            data_device: None,
            device_io: crate::tier::DeviceIo::Uring,
            dir_shards: None,
            stage_max: DEFAULT_STAGE_MAX,
            inherit_acls: true,
            symlinks_leave_pool: false,
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
        if let Some(n) = self.dir_shards
            && (!n.is_power_of_two() || n > MAX_DIR_SHARDS)
        {
            return Err(crate::Error::InvalidArgument(format!(
                "{n} shards per directory: must be a power of two from 1 to {MAX_DIR_SHARDS}"
            )));
        }
        if self.stage_max > MAX_STAGE_MAX {
            return Err(crate::Error::InvalidArgument(format!(
                "stage_max {} bytes: at most {MAX_STAGE_MAX}",
                self.stage_max
            )));
        }
        self.placement_config.validate()?;
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
    /// refused where that exceeds `SRL_ARRAY_MAX_BYTES` (64 MiB) per file (it
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

/// How to create a pool. New options may be added in later versions: start
/// from [`MkfsOptions::default`] and set the fields you need.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
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
    /// A data device: file data goes there, logs and inodes stay on the
    /// pool (a tiered pool; see `docs/guarantees.md`). `None` (the
    /// default): file data stays on the pool.
    pub data: Option<crate::layout::members::DataDevice>,
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
            data: None,
        }
    }
}
