//! Mount options (`-o lock=...,index=...,segment=...,threads=...`).

use manyfs::{Durability, LockKind, MountOptions};

use crate::error::{FuseError, Result};

/// Largest number of FUSE worker threads accepted by `threads=N`.
pub const MAX_THREADS: usize = 1024;

/// Everything that decides how a pool is mounted through FUSE: the library's
/// own options plus the FUSE session's.
#[derive(Debug, Clone)]
pub struct FuseConfig {
    /// Options handed to [`manyfs::Fs::mount`].
    pub fs: MountOptions,
    /// Number of threads that serve FUSE requests (each reads its own requests
    /// from the kernel, so independent requests run in parallel).
    pub threads: usize,
    /// Let users other than the one who mounted use the file system
    /// (`-o allow_other`; a non-root mounter needs `user_allow_other` in
    /// /etc/fuse.conf). A mount made by root does this unless `private`.
    pub allow_other: bool,
    /// Serve only the user who mounted (`-o private`), also when that is
    /// root.
    pub private: bool,
    /// Log the daemon's activity to stderr (`-o debug`, see [`crate::log`]).
    pub debug: bool,
    /// How long the kernel may cache attributes, names and the absence of
    /// names (`-o ttl=SECONDS`; see [`crate::adapter::DEFAULT_TTL`]).
    pub ttl: std::time::Duration,
    /// Kernel write-back caching of file data (`-o writeback_cache`; see
    /// [`crate::adapter::ManyFuse::with_writeback_cache`] for the trade).
    pub writeback_cache: bool,
    /// Serve extended attributes (`false` with `-o noxattr`; see
    /// [`crate::adapter::ManyFuse::with_xattrs`] for why one would not).
    pub xattrs: bool,
    /// Whether requests travel over io_uring (see [`crate::uring`] and
    /// [`UringMode`]).
    pub uring: UringMode,
}

/// When to serve a mount over FUSE-over-io_uring (`-o uring=...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UringMode {
    /// Where the kernel offers it, silently; otherwise through /dev/fuse
    /// (the default: measured faster for I/O, the same for metadata; see
    /// docs/benchmarks.md, "FUSE over io_uring").
    #[default]
    Auto,
    /// Where the kernel offers it; otherwise say so in one line and serve
    /// through /dev/fuse (`-o uring`, `-o uring=on`).
    On,
    /// Always through /dev/fuse (`-o uring=off`).
    Off,
}

impl Default for FuseConfig {
    fn default() -> Self {
        FuseConfig {
            fs: MountOptions::default(),
            threads: default_threads(),
            allow_other: false,
            private: false,
            debug: false,
            ttl: crate::adapter::DEFAULT_TTL,
            writeback_cache: false,
            xattrs: true,
            uring: UringMode::Auto,
        }
    }
}

/// The default number of FUSE worker threads: one per CPU, at least 2 (so a
/// request that waits, such as an `fsync`, does not stop the others), at
/// most 64. More workers than CPUs only add context switches: every request
/// is a wake-up of one worker, and on a machine whose CPUs also run the
/// programs using the mount, a surplus worker costs throughput (measured in
/// docs/benchmarks.md, "Through the FUSE mount").
pub fn default_threads() -> usize {
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    cpus.clamp(2, 64)
}

impl FuseConfig {
    /// Whether requests from every user are served: with `allow_other`,
    /// or on a mount made by root (effective uid 0) without `private`, as
    /// a kernel file system mounted by root serves every user. The
    /// kernel still checks each request against the inode's mode, owner
    /// and group (`default_permissions`).
    pub fn serves_everyone(&self) -> bool {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let root = unsafe { libc::geteuid() } == 0;
        self.allow_other || (root && !self.private)
    }

    /// Parse `-o` option lists such as `["lock=srl-tree,threads=8", "ro"]`
    /// on top of the defaults.
    ///
    /// Known options: `lock=inode|interval|srl-array|srl-tree`,
    /// `index=cas|rw|cascade` (the file index's tree),
    /// `segment=BYTES` (see [`parse_size()`]), `threads=N`, `ttl=SECONDS`,
    /// `durability=pm|file|dram`, `topology=system|NODESxCPUS`,
    /// `sublogs=cpu|one`, `placement=local|node0|interleave`,
    /// `thread_placement=off|advise|migrate`,
    /// `placement_policy=off|rl|cpu|nm|full`,
    /// `remote_cost=off|paper|READ/WRITE` and
    /// `bandwidth_cap=off|paper|BYTES_PER_SEC` (emulated topologies only),
    /// `data=PATH` (a tiered pool's data device, if not at the recorded path),
    /// `commit=SECONDS` (how often the commit thread makes everything
    /// durable in `file` mode and on a tiered pool; 0 turns it off),
    /// `checkpoint=background|blocking` (whether writers wait for it),
    /// `device_io=sync|uring` (how the data device is read and written),
    /// `dir_shards=N` (name shards per directory, a power of two),
    /// `stage_max=BYTES` (a tiered `pm`/`dram` pool: the largest write to an
    /// fsync'd file staged in the pool; 0 turns staging off), `ro`, `rw`,
    /// `allow_other`, `private`, `debug`, `writeback_cache`, `noxattr`, `uring[=on|off|auto]`. `allow_other` and
    /// `private` exclude each other.
    pub fn parse_options<S: AsRef<str>>(lists: &[S]) -> Result<FuseConfig> {
        let mut cfg = FuseConfig::default();
        for list in lists {
            for opt in list.as_ref().split(',') {
                let opt = opt.trim();
                if opt.is_empty() {
                    continue;
                }
                cfg.apply(opt)?;
            }
        }
        Ok(cfg)
    }

    /// Apply one `key` or `key=value` option.
    pub fn apply(&mut self, opt: &str) -> Result<()> {
        let (key, value) = match opt.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (opt, None),
        };
        fn need<'a>(opt: &str, v: Option<&'a str>) -> Result<&'a str> {
            v.filter(|v| !v.is_empty())
                .ok_or_else(|| FuseError::bad_option(opt, "needs a value"))
        }
        fn flag(opt: &str, v: Option<&str>) -> Result<()> {
            match v {
                None => Ok(()),
                Some(_) => Err(FuseError::bad_option(opt, "takes no value")),
            }
        }
        match key {
            "lock" => {
                let v = need(opt, value)?;
                self.fs.lock = v.parse::<LockKind>().map_err(|_| {
                    FuseError::bad_option(opt, "expected inode, interval, srl-array or srl-tree")
                })?;
            }
            "index" => {
                let v = need(opt, value)?;
                self.fs.index = v
                    .parse()
                    .map_err(|_| FuseError::bad_option(opt, "expected cas, rw or cascade"))?;
            }
            "segment" => {
                let v = need(opt, value)?;
                let bytes = parse_size(v).map_err(|e| {
                    FuseError::bad_option(
                        opt,
                        format!("expected a size, e.g. 4096, 64k, 2M, 1GiB ({e})"),
                    )
                })?;
                if bytes == 0 {
                    return Err(FuseError::bad_option(opt, "must be greater than 0"));
                }
                self.fs.segment_size = bytes;
            }
            "placement" => {
                let v = need(opt, value)?;
                self.fs.placement = v.parse().map_err(|_| {
                    FuseError::bad_option(opt, "expected local, node0 or interleave")
                })?;
            }
            "thread_placement" => {
                let v = need(opt, value)?;
                self.fs.thread_placement = v
                    .parse()
                    .map_err(|_| FuseError::bad_option(opt, "expected off, advise or migrate"))?;
            }
            "placement_policy" => {
                let v = need(opt, value)?;
                self.fs.placement_policy = v
                    .parse()
                    .map_err(|_| FuseError::bad_option(opt, "expected off, rl, cpu, nm or full"))?;
            }
            "sublogs" => {
                let v = need(opt, value)?;
                self.fs.sublogs = v
                    .parse()
                    .map_err(|_| FuseError::bad_option(opt, "expected cpu or one"))?;
            }
            "remote_cost" => {
                let v = need(opt, value)?;
                self.fs.remote_cost = manyfs::RemoteCost::parse_option(v).map_err(|_| {
                    FuseError::bad_option(
                        opt,
                        "expected off, paper or READ/WRITE nanoseconds per KiB, e.g. 270/583",
                    )
                })?;
            }
            "dir_shards" => {
                let v = need(opt, value)?;
                let n = v
                    .parse::<usize>()
                    .ok()
                    .filter(|n| n.is_power_of_two() && *n <= manyfs::MAX_DIR_SHARDS)
                    .ok_or_else(|| {
                        FuseError::bad_option(opt, "expected a power of two from 1 to 1024")
                    })?;
                self.fs.dir_shards = Some(n);
            }
            "stage_max" => {
                let v = need(opt, value)?;
                self.fs.stage_max = parse_size(v)
                    .map_err(|_| FuseError::bad_option(opt, "expected a size, e.g. 32K or 0"))?;
            }
            "checkpoint" => {
                let v = need(opt, value)?;
                self.fs.checkpoint = v
                    .parse()
                    .map_err(|_| FuseError::bad_option(opt, "expected background or blocking"))?;
            }
            "commit" => {
                let v = need(opt, value)?;
                let secs: f64 = v
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s >= 0.0 && *s <= 1e6)
                    .ok_or_else(|| {
                        FuseError::bad_option(
                            opt,
                            "expected seconds from 0 (off) to 1e6, e.g. 5 or 0.5",
                        )
                    })?;
                self.fs.commit_interval = std::time::Duration::from_secs_f64(secs);
            }
            "device_io" => {
                let v = need(opt, value)?;
                self.fs.device_io = v
                    .parse()
                    .map_err(|_| FuseError::bad_option(opt, "expected sync or uring"))?;
            }
            "data" => {
                let v = need(opt, value)?;
                self.fs.data_device = Some(std::path::PathBuf::from(v));
            }
            "bandwidth_cap" => {
                let v = need(opt, value)?;
                self.fs.bandwidth_cap = manyfs::BandwidthCap::parse_option(v).map_err(|_| {
                    FuseError::bad_option(
                        opt,
                        "expected off, paper or weighted bytes per second per node (W + R/3), \
                         e.g. 1G, at least 1M",
                    )
                })?;
            }
            "topology" => {
                let v = need(opt, value)?;
                self.fs.topology = v.parse().map_err(|_| {
                    FuseError::bad_option(opt, "expected `system` or NODESxCPUS, e.g. 2x1")
                })?;
            }
            "threads" => {
                let v = need(opt, value)?;
                let n: usize = v
                    .parse()
                    .map_err(|_| FuseError::bad_option(opt, "expected a number of threads"))?;
                if n == 0 || n > MAX_THREADS {
                    return Err(FuseError::bad_option(
                        opt,
                        format!("must be between 1 and {MAX_THREADS}"),
                    ));
                }
                self.threads = n;
            }
            "ttl" => {
                let v = need(opt, value)?;
                let secs: f64 = v
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s >= 0.0 && *s <= 1e9)
                    .ok_or_else(|| {
                        FuseError::bad_option(opt, "expected seconds from 0 to 1e9, e.g. 1 or 0.5")
                    })?;
                self.ttl = std::time::Duration::from_secs_f64(secs);
            }
            "durability" => {
                let v = need(opt, value)?;
                self.fs.durability = v
                    .parse::<Durability>()
                    .map_err(|_| FuseError::bad_option(opt, "expected pm, file or dram"))?;
            }
            "ro" => {
                flag(opt, value)?;
                self.fs.read_only = true;
            }
            "rw" => {
                flag(opt, value)?;
                self.fs.read_only = false;
            }
            "allow_other" => {
                flag(opt, value)?;
                if self.private {
                    return Err(FuseError::bad_option(opt, "contradicts private"));
                }
                self.allow_other = true;
            }
            "private" => {
                flag(opt, value)?;
                if self.allow_other {
                    return Err(FuseError::bad_option(opt, "contradicts allow_other"));
                }
                self.private = true;
            }
            "debug" => {
                flag(opt, value)?;
                self.debug = true;
            }
            "writeback_cache" => {
                flag(opt, value)?;
                self.writeback_cache = true;
            }
            "noxattr" => {
                flag(opt, value)?;
                self.xattrs = false;
                // Nobody enforces ACLs without xattrs: none are inherited.
                self.fs.inherit_acls = false;
            }
            "uring" => {
                self.uring = match value {
                    None | Some("on") => UringMode::On,
                    Some("auto") => UringMode::Auto,
                    Some("off") => UringMode::Off,
                    Some(_) => return Err(FuseError::bad_option(opt, "expected on, off or auto")),
                };
            }
            _ => {
                return Err(FuseError::bad_option(
                    opt,
                    "unknown option (known: lock, index, segment, threads, ttl, durability, topology, sublogs, placement, thread_placement, placement_policy, remote_cost, bandwidth_cap, data, ro, rw, allow_other, private, debug, writeback_cache, noxattr, uring)",
                ));
            }
        }
        Ok(())
    }
}

/// Parse a byte count: a number with an optional binary multiple (`K`, `M`,
/// `G`, `T`, ... = powers of 1024, any case, with or without `B`/`iB`), e.g.
/// `4096`, `64k`, `2M`, `1GiB`. The same grammar and configuration as every
/// other size the `manyfs` tools accept (`manyfs_bench::sys::parse_size`).
pub fn parse_size(s: &str) -> std::result::Result<u64, parse_size::Error> {
    parse_size::Config::new().with_binary().parse_size(s.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        for (s, v) in [
            ("4096", 4096u64),
            ("64k", 65536),
            ("64K", 65536),
            ("64kb", 65536),
            ("2M", 2 << 20),
            ("2m", 2 << 20),
            ("512M", 512 << 20),
            ("1G", 1 << 30),
            ("1GiB", 1 << 30),
            ("1gib", 1 << 30),
            ("1t", 1 << 40),
        ] {
            assert_eq!(parse_size(s), Ok(v), "{s}");
        }
        for bad in ["k", "x", "", "12Q", "99999999999999999999t"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn options() {
        let cfg = FuseConfig::parse_options(&[
            "lock=interval,segment=64k,index=rw",
            "threads=3,durability=dram,ro,allow_other,debug,ttl=0.5,topology=2x1,sublogs=one",
            "placement=interleave,thread_placement=advise,placement_policy=rl,remote_cost=paper,uring",
        ])
        .unwrap();
        assert_eq!(cfg.fs.thread_placement, manyfs::ThreadPlacement::Advise);
        assert_eq!(cfg.fs.placement_policy, manyfs::PlacementPolicy::Rl);
        assert_eq!(
            FuseConfig::default().fs.thread_placement,
            manyfs::ThreadPlacement::Off
        );
        assert_eq!(cfg.fs.remote_cost, Some(manyfs::RemoteCost::PAPER));
        assert_eq!(cfg.fs.index, manyfs::IndexKind::Rw);
        assert_eq!(FuseConfig::default().fs.index, manyfs::IndexKind::Cas);
        let cascade = FuseConfig::parse_options(&["index=cascade"]).unwrap();
        assert_eq!(cascade.fs.index, manyfs::IndexKind::Cascade);
        assert_eq!(cfg.fs.bandwidth_cap, None);
        let custom =
            FuseConfig::parse_options(&["remote_cost=10/20,bandwidth_cap=1500M,data=/dev/sdb"])
                .unwrap();
        assert_eq!(
            custom.fs.data_device.as_deref(),
            Some(std::path::Path::new("/dev/sdb"))
        );
        assert_eq!(
            custom.fs.bandwidth_cap.unwrap().bytes_per_sec,
            1_500_000_000
        );
        assert_eq!(custom.fs.remote_cost.unwrap().to_string(), "10/20");
        let cp = FuseConfig::parse_options(&["checkpoint=blocking,commit=0.25"]).unwrap();
        assert_eq!(cp.fs.checkpoint, manyfs::Checkpoint::Blocking);
        assert_eq!(cp.fs.commit_interval, std::time::Duration::from_millis(250));
        assert_eq!(
            FuseConfig::default().fs.checkpoint,
            manyfs::Checkpoint::Background
        );
        let io = FuseConfig::parse_options(&["device_io=sync"]).unwrap();
        assert_eq!(io.fs.device_io, manyfs::DeviceIo::Sync);
        assert_eq!(FuseConfig::default().fs.device_io, manyfs::DeviceIo::Uring);
        assert_eq!(cfg.fs.placement, manyfs::Placement::Interleave);
        assert_eq!(cfg.fs.topology.to_string(), "2x1");
        assert_eq!(cfg.fs.sublogs, manyfs::Sublogs::One);
        assert_eq!(cfg.ttl, std::time::Duration::from_millis(500));
        assert_eq!(FuseConfig::default().ttl, crate::adapter::DEFAULT_TTL);
        assert_eq!(cfg.fs.lock.to_string(), LockKind::Interval.to_string());
        assert_eq!(cfg.fs.segment_size, 65536);
        assert_eq!(cfg.threads, 3);
        assert!(cfg.fs.read_only);
        assert!(cfg.allow_other);
        assert!(cfg.debug);
        assert!(!FuseConfig::default().debug);
        assert_eq!(cfg.uring, UringMode::On);
        assert_eq!(FuseConfig::default().uring, UringMode::Auto);
        for (v, mode) in [
            ("uring=off", UringMode::Off),
            ("uring=auto", UringMode::Auto),
            ("uring=on", UringMode::On),
        ] {
            assert_eq!(FuseConfig::parse_options(&[v]).unwrap().uring, mode, "{v}");
        }
        assert!(FuseConfig::parse_options(&["uring=maybe"]).is_err());
        assert!(matches!(cfg.fs.durability, Durability::Dram));
        assert!(cfg.serves_everyone());
        assert_eq!(cfg.fs.dir_shards, None);
        let shards = FuseConfig::parse_options(&["dir_shards=64"]).unwrap();
        assert_eq!(shards.fs.dir_shards, Some(64));
        assert_eq!(cfg.fs.stage_max, manyfs::DEFAULT_STAGE_MAX);
        let staged = FuseConfig::parse_options(&["stage_max=64K"]).unwrap();
        assert_eq!(staged.fs.stage_max, 64 << 10);
        assert_eq!(
            FuseConfig::parse_options(&["stage_max=0"])
                .unwrap()
                .fs
                .stage_max,
            0
        );
        let private = FuseConfig::parse_options(&["private"]).unwrap();
        assert!(private.private && !private.serves_everyone());
        // SAFETY: geteuid has no preconditions and cannot fail.
        let root = unsafe { libc::geteuid() } == 0;
        assert_eq!(FuseConfig::default().serves_everyone(), root);
    }

    #[test]
    fn bad_options_are_typed_errors() {
        for bad in [
            "lock=nope",
            "index=btree",
            "index",
            "segment=0",
            "segment=abc",
            "threads=0",
            "threads=x",
            "ttl=-1",
            "ttl=x",
            "ttl=inf",
            "checkpoint=never",
            "device_io=aio",
            "device_io",
            "dir_shards=48",
            "dir_shards=2048",
            "dir_shards=0",
            "stage_max=lots",
            "dir_shards",
            "checkpoint",
            "commit=-1",
            "commit=soon",
            "durability=disk",
            "topology=2",
            "sublogs=two",
            "placement=far",
            "thread_placement=on",
            "thread_placement",
            "placement_policy=all",
            "remote_cost=fast",
            "remote_cost",
            "bandwidth_cap=fast",
            "bandwidth_cap=10",
            "bandwidth_cap",
            "topology=0x1",
            "ro=1",
            "debug=yes",
            "uring=1",
            "private=1",
            "private,allow_other",
            "allow_other,private",
            "frobnicate",
            "lock",
        ] {
            let err = FuseConfig::parse_options(&[bad]).unwrap_err();
            assert!(matches!(err, FuseError::BadOption { .. }), "{bad}: {err}");
            assert!(!err.to_string().contains('\n'));
        }
    }
}
