//! Mount options (`-o lock=...,index=...,segment=...,threads=...`).

use manyfs::MountOptions;

use crate::error::{FuseError, Result};

/// How long an idle FUSE worker thread waits for work before it ends,
/// unless `-o worker_idle=SECONDS` says otherwise.
pub const DEFAULT_WORKER_IDLE: std::time::Duration = std::time::Duration::from_secs(10);

/// Largest number of FUSE worker threads accepted by `threads=N`.
pub const MAX_THREADS: usize = 1024;

/// Everything that decides how a pool is mounted through FUSE: the library's
/// own options plus the FUSE session's.
#[derive(Debug, Clone)]
pub struct FuseConfig {
    /// Options handed to [`manyfs::Fs::mount`].
    pub fs: MountOptions,
    /// Most threads that serve FUSE requests (each reads its own requests
    /// from the kernel, so independent requests run in parallel). The mount
    /// starts with one and makes another whenever every one is busy.
    pub threads: usize,
    /// How long a serving thread with nothing to do waits before it ends
    /// (`-o worker_idle=SECONDS`; a lone caller keeps one or two).
    pub worker_idle: std::time::Duration,
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
    /// Whether the threads serving `/dev/fuse` are pinned to CPUs
    /// (`-o pin_workers=...`, see [`PinWorkers`]).
    pub pin_workers: PinWorkers,
    /// How long a serving thread that finds no request waiting polls
    /// `/dev/fuse` for one before it sleeps (`-o spin=MICROSECONDS`; zero:
    /// it sleeps at once). See [`DEFAULT_SPIN`].
    pub spin: std::time::Duration,
}

/// How long a serving thread polls for the next request before it sleeps,
/// by default. A lone caller's next request comes a few microseconds
/// after the reply; caught by a poll, it costs no wake-up of the serving
/// thread, which on an idle CPU of a virtual machine is dear. The poll
/// adapts (shorter after misses) and stops while requests come faster than
/// one at a time, when it would take a CPU callers need (the vendored
/// fuser's `workers.rs`). Measured in docs/bench/journal.md, "A lone
/// caller's round trip".
pub const DEFAULT_SPIN: std::time::Duration = std::time::Duration::from_micros(50);

/// Whether the threads that read `/dev/fuse` are pinned to CPUs
/// (`-o pin_workers=...`). Each new one goes to the CPU (of those the
/// daemon may use) with the fewest, so two busy at once run on two CPUs;
/// left free, the scheduler sometimes queues the callers and the threads
/// that serve them on one CPU while another idles, and otherwise keeps a
/// thread on its caller's CPU. Measured on 2 CPUs (docs/bench/journal.md,
/// "FUSE serving threads pinned to CPUs"): faster for two threads of one
/// process, not for one caller's metadata, so off unless asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PinWorkers {
    /// Pinned (`-o pin_workers`, `-o pin_workers=on`).
    On,
    /// Free (`-o pin_workers=off`, the default).
    #[default]
    Off,
}

impl PinWorkers {
    /// The CPUs to pin serving threads to, from the CPUs this thread may
    /// use (`allowed`): none when unpinned or when there is only one.
    pub fn cpus(self, allowed: Vec<usize>) -> Vec<usize> {
        if self == PinWorkers::On && allowed.len() > 1 {
            allowed
        } else {
            Vec::new()
        }
    }
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
            worker_idle: DEFAULT_WORKER_IDLE,
            allow_other: false,
            private: false,
            debug: false,
            ttl: crate::adapter::DEFAULT_TTL,
            writeback_cache: false,
            xattrs: true,
            uring: UringMode::Auto,
            pin_workers: PinWorkers::Off,
            spin: DEFAULT_SPIN,
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
    /// on top of the defaults. The options are those of [`OPTIONS`]. An
    /// option given twice must have the same value both times, and no
    /// option may come with one it contradicts (`ro` and `rw`,
    /// `allow_other` and `private`).
    pub fn parse_options<S: AsRef<str>>(lists: &[S]) -> Result<FuseConfig> {
        let mut cfg = FuseConfig::default();
        let mut given: Vec<(&MountOption, &str)> = Vec::new();
        for list in lists {
            for opt in list.as_ref().split(',').map(str::trim) {
                if opt.is_empty() {
                    continue;
                }
                let (option, value) = MountOption::parse(opt)?;
                if let Some(why) = given
                    .iter()
                    .find_map(|&(o, v)| option.conflict(value, o, v))
                {
                    return Err(FuseError::bad_option(opt, why));
                }
                (option.set)(&mut cfg, value)
                    .map_err(|bad| FuseError::bad_option(opt, option.reason(bad)))?;
                given.push((option, value));
            }
        }
        Ok(cfg)
    }
}

/// How a mount option takes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value {
    /// None: the option is a flag.
    Flag,
    /// `name=VALUE`; the string shows what VALUE may be (`a|b|c` lists
    /// choices, a word in capitals stands for a number, size or path).
    Required(&'static str),
    /// `name` or `name=VALUE`; `name` alone means `name=bare`.
    Optional {
        /// What VALUE may be, as for [`Value::Required`].
        values: &'static str,
        /// The value `name` alone stands for.
        bare: &'static str,
    },
}

/// Why a value was refused.
enum Bad {
    /// It is not one of the choices the option's [`Value`] lists.
    Choice,
    /// Anything else, in words.
    Because(String),
}

/// One `-o` mount option: the one description that the parser, the
/// unknown-option error, `manyfs mount --help` and docs/mount.md's table
/// (checked by a test) are made from.
pub struct MountOption {
    /// Its name, before any `=`.
    pub name: &'static str,
    /// Whether and what value it takes.
    pub value: Value,
    /// One line of help.
    pub help: &'static str,
    /// The options it contradicts (each lists this one too).
    pub contradicts: &'static [&'static str],
    /// Set it on a configuration; the value is `""` for a flag.
    set: fn(&mut FuseConfig, &str) -> std::result::Result<(), Bad>,
}

impl MountOption {
    /// How it is written: `name`, `name=VALUE` or `name[=VALUE]`.
    pub fn syntax(&self) -> String {
        match self.value {
            Value::Flag => self.name.to_string(),
            Value::Required(v) => format!("{}={v}", self.name),
            Value::Optional { values, .. } => format!("{}[={values}]", self.name),
        }
    }

    /// The option `opt` (`name` or `name=value`) names, and its value
    /// (`""` for a flag, `bare` for an optional value left out).
    fn parse(opt: &str) -> Result<(&'static MountOption, &str)> {
        let (name, value) = match opt.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (opt, None),
        };
        let Some(option) = OPTIONS.iter().find(|o| o.name == name) else {
            let known: Vec<&str> = OPTIONS.iter().map(|o| o.name).collect();
            return Err(FuseError::bad_option(
                opt,
                format!("unknown option (known: {})", known.join(", ")),
            ));
        };
        let value = match (option.value, value) {
            (Value::Flag, None) => "",
            (Value::Flag, Some(_)) => return Err(FuseError::bad_option(opt, "takes no value")),
            (Value::Optional { bare, .. }, None) => bare,
            (Value::Required(_), None) | (_, Some("")) => {
                return Err(FuseError::bad_option(opt, "needs a value"));
            }
            (_, Some(v)) => v,
        };
        Ok((option, value))
    }

    /// Why this option with `value` cannot come with `other` given before
    /// with `other_value`, if it cannot.
    fn conflict(&self, value: &str, other: &MountOption, other_value: &str) -> Option<String> {
        if other.name == self.name && other_value != value {
            Some(format!(
                "contradicts {}={other_value} given before",
                other.name
            ))
        } else if self.contradicts.contains(&other.name) {
            Some(format!("contradicts {}", other.name))
        } else {
            None
        }
    }

    /// The words of a refusal.
    fn reason(&self, bad: Bad) -> String {
        match (bad, self.value) {
            (Bad::Because(why), _) => why,
            (Bad::Choice, Value::Required(v) | Value::Optional { values: v, .. }) => {
                let choices: Vec<&str> = v.split('|').collect();
                match choices.split_last() {
                    Some((last, [])) => format!("expected {last}"),
                    Some((last, rest)) => format!("expected {} or {last}", rest.join(", ")),
                    None => "expected a value".into(),
                }
            }
            (Bad::Choice, Value::Flag) => "takes no value".into(),
        }
    }
}

/// `manyfs mount -o`'s `--help`: every option's syntax and help line.
pub fn options_help() -> String {
    let width = OPTIONS.iter().map(|o| o.syntax().len()).max().unwrap_or(0);
    let mut out = String::from(
        "Mount options, comma-separated, repeatable (an option given twice must have one \
         value; ro/rw and allow_other/private contradict each other):",
    );
    for o in OPTIONS {
        out.push_str(&format!("\n  {:<width$}  {}", o.syntax(), o.help));
    }
    out
}

/// One of the choices of the option's [`Value`], by `T`'s `FromStr`.
fn pick<T: std::str::FromStr>(v: &str) -> std::result::Result<T, Bad> {
    v.parse().map_err(|_| Bad::Choice)
}

/// A size (see [`parse_size()`]).
fn size(v: &str) -> std::result::Result<u64, Bad> {
    parse_size(v)
        .map_err(|e| Bad::Because(format!("expected a size, e.g. 4096, 64k, 2M, 1GiB ({e})")))
}

/// Seconds from 0 to `max`, fractions allowed; `zero` says what 0 means.
fn seconds(v: &str, max: f64, zero: &str) -> std::result::Result<std::time::Duration, Bad> {
    v.parse()
        .ok()
        .filter(|s: &f64| s.is_finite() && *s >= 0.0 && *s <= max)
        .map(std::time::Duration::from_secs_f64)
        .ok_or_else(|| {
            Bad::Because(format!(
                "expected seconds from 0{zero} to {max:e}, e.g. 5 or 0.5"
            ))
        })
}

/// Every `-o` option, in the order `--help` and docs/mount.md list them.
pub static OPTIONS: &[MountOption] = &[
    MountOption {
        name: "lock",
        value: Value::Required("inode|interval|srl-array|srl-tree"),
        help: "range lock used for every file (docs/locking.md)",
        contradicts: &[],
        set: |c, v| {
            c.fs.lock = pick(v)?;
            Ok(())
        },
    },
    MountOption {
        name: "index",
        value: Value::Required("cas|rw|cascade"),
        help: "tree of every file's page index (lock-free, nCACHE's or F2FS's)",
        contradicts: &[],
        set: |c, v| {
            c.fs.index = pick(v)?;
            Ok(())
        },
    },
    MountOption {
        name: "segment",
        value: Value::Required("BYTES"),
        help: "segment size of the SRL locks: a power of two, 4K to 1G",
        contradicts: &[],
        set: |c, v| match size(v)? {
            0 => Err(Bad::Because("must be greater than 0".into())),
            bytes => {
                c.fs.segment_size = bytes;
                Ok(())
            }
        },
    },
    MountOption {
        name: "threads",
        value: Value::Required("N"),
        help: "most threads serving FUSE requests, made as callers need them, 1 to 1024 [one per CPU, 2 to 64]",
        contradicts: &[],
        set: |c, v| {
            let n: usize = v
                .parse()
                .map_err(|_| Bad::Because("expected a number of threads".into()))?;
            if n == 0 || n > MAX_THREADS {
                return Err(Bad::Because(format!("must be between 1 and {MAX_THREADS}")));
            }
            {
                c.threads = n;
                Ok(())
            }
        },
    },
    MountOption {
        name: "worker_idle",
        value: Value::Required("SECONDS"),
        help: "how long a serving thread with no work waits before it ends [10]",
        contradicts: &[],
        set: |c, v| {
            c.worker_idle = seconds(v, 86_400.0, "")?;
            Ok(())
        },
    },
    MountOption {
        name: "pin_workers",
        value: Value::Optional {
            values: "on|off",
            bare: "on",
        },
        help: "pin the threads serving /dev/fuse to CPUs, spread over them [off]",
        contradicts: &[],
        set: |c, v| {
            c.pin_workers = match v {
                "on" => PinWorkers::On,
                "off" => PinWorkers::Off,
                _ => return Err(Bad::Choice),
            };
            Ok(())
        },
    },
    MountOption {
        name: "spin",
        value: Value::Required("MICROSECONDS"),
        help: "how long a serving thread polls /dev/fuse for a request before it sleeps (0: at once) [50]",
        contradicts: &[],
        set: |c, v| {
            c.spin = v
                .parse::<u64>()
                .ok()
                .filter(|&us| us <= 1_000_000)
                .map(std::time::Duration::from_micros)
                .ok_or_else(|| {
                    Bad::Because("expected whole microseconds from 0 to 1000000, e.g. 50".into())
                })?;
            Ok(())
        },
    },
    MountOption {
        name: "ttl",
        value: Value::Required("SECONDS"),
        help: "how long the kernel caches attributes and names (0: ask every time)",
        contradicts: &[],
        set: |c, v| {
            c.ttl = seconds(v, 1e9, "")?;
            Ok(())
        },
    },
    MountOption {
        name: "durability",
        value: Value::Required("pm|file|dram"),
        help: "media durability mode [file]",
        contradicts: &[],
        set: |c, v| {
            c.fs.durability = pick(v)?;
            Ok(())
        },
    },
    MountOption {
        name: "data",
        value: Value::Required("PATH"),
        help: "a tiered pool's data device, if not at the path the pool records",
        contradicts: &[],
        set: |c, v| {
            c.fs.data_device = Some(v.into());
            Ok(())
        },
    },
    MountOption {
        name: "commit",
        value: Value::Required("SECONDS"),
        help: "interval of the commit thread's checkpoints in file mode and on a tier (0: off) [5]",
        contradicts: &[],
        set: |c, v| {
            c.fs.commit_interval = seconds(v, 1e6, " (off)")?;
            Ok(())
        },
    },
    MountOption {
        name: "dir_shards",
        value: Value::Required("N"),
        help: "name shards per directory: a power of two, 1 to 1024",
        contradicts: &[],
        set: |c, v| {
            let n = v
                .parse::<usize>()
                .ok()
                .filter(|n| n.is_power_of_two() && *n <= manyfs::MAX_DIR_SHARDS)
                .ok_or_else(|| {
                    Bad::Because(format!(
                        "expected a power of two from 1 to {}",
                        manyfs::MAX_DIR_SHARDS
                    ))
                })?;
            {
                c.fs.dir_shards = Some(n);
                Ok(())
            }
        },
    },
    MountOption {
        name: "stage_max",
        value: Value::Required("BYTES"),
        help: "largest fsync'd write staged in a pm/dram tiered pool (0: no staging) [32K]",
        contradicts: &[],
        set: |c, v| {
            c.fs.stage_max = size(v)?;
            Ok(())
        },
    },
    MountOption {
        name: "device_io",
        value: Value::Required("sync|uring"),
        help: "how a tiered pool's data device is read and written [uring]",
        contradicts: &[],
        set: |c, v| {
            c.fs.device_io = pick(v)?;
            Ok(())
        },
    },
    MountOption {
        name: "checkpoint",
        value: Value::Required("background|blocking"),
        help: "whether writes wait for a checkpoint in progress [background]",
        contradicts: &[],
        set: |c, v| {
            c.fs.checkpoint = pick(v)?;
            Ok(())
        },
    },
    MountOption {
        name: "sublogs",
        value: Value::Required("cpu|one"),
        help: "sub-logs per inode: one per CPU, or one (NOVA's) [cpu]",
        contradicts: &[],
        set: |c, v| {
            c.fs.sublogs = pick(v)?;
            Ok(())
        },
    },
    MountOption {
        name: "placement",
        value: Value::Required("local|node0|interleave"),
        help: "where new blocks go in a pool of several members [local]",
        contradicts: &[],
        set: |c, v| {
            c.fs.placement = pick(v)?;
            Ok(())
        },
    },
    MountOption {
        name: "thread_placement",
        value: Value::Required("off|advise|migrate"),
        help: "NThread's thread placement: report, or also move the threads [off]",
        contradicts: &[],
        set: |c, v| {
            c.fs.thread_placement = pick(v)?;
            Ok(())
        },
    },
    MountOption {
        name: "placement_policy",
        value: Value::Required("off|rl|cpu|nm|full"),
        help: "which of NThread's rules apply [full]",
        contradicts: &[],
        set: |c, v| {
            c.fs.placement_policy = pick(v)?;
            Ok(())
        },
    },
    MountOption {
        name: "remote_cost",
        value: Value::Required("off|paper|READ/WRITE"),
        help: "emulated remote-memory cost, ns per KiB (emulated topology only) [off]",
        contradicts: &[],
        set: |c, v| {
            c.fs.remote_cost = manyfs::RemoteCost::parse_option(v).map_err(|_| {
                Bad::Because(
                    "expected off, paper or READ/WRITE nanoseconds per KiB, e.g. 270/583".into(),
                )
            })?;
            Ok(())
        },
    },
    MountOption {
        name: "bandwidth_cap",
        value: Value::Required("off|paper|BYTES_PER_SEC"),
        help: "emulated NVMM bandwidth per node, W + R/3 (emulated topology only) [off]",
        contradicts: &[],
        set: |c, v| {
            c.fs.bandwidth_cap = manyfs::BandwidthCap::parse_option(v).map_err(|_| {
                Bad::Because(
                    "expected off, paper or weighted bytes per second per node (W + R/3), \
                     e.g. 1G, at least 1M"
                        .into(),
                )
            })?;
            Ok(())
        },
    },
    MountOption {
        name: "topology",
        value: Value::Required("system|NxC"),
        help: "NUMA topology: the machine's, or N emulated nodes of C CPUs [system]",
        contradicts: &[],
        set: |c, v| {
            c.fs.topology = v
                .parse()
                .map_err(|_| Bad::Because("expected `system` or NODESxCPUS, e.g. 2x1".into()))?;
            Ok(())
        },
    },
    MountOption {
        name: "ro",
        value: Value::Flag,
        help: "read-only mount",
        contradicts: &["rw"],
        set: |c, _| {
            c.fs.read_only = true;
            Ok(())
        },
    },
    MountOption {
        name: "rw",
        value: Value::Flag,
        help: "read-write mount (the default)",
        contradicts: &["ro"],
        set: |c, _| {
            c.fs.read_only = false;
            Ok(())
        },
    },
    MountOption {
        name: "allow_other",
        value: Value::Flag,
        help: "serve every user (a mount made by root does unless private)",
        contradicts: &["private"],
        set: |c, _| {
            c.allow_other = true;
            Ok(())
        },
    },
    MountOption {
        name: "private",
        value: Value::Flag,
        help: "serve only the user who mounted, also when that is root",
        contradicts: &["allow_other"],
        set: |c, _| {
            c.private = true;
            Ok(())
        },
    },
    MountOption {
        name: "debug",
        value: Value::Flag,
        help: "log to stderr (RUST_LOG also turns logging on and chooses the levels)",
        contradicts: &[],
        set: |c, _| {
            c.debug = true;
            Ok(())
        },
    },
    MountOption {
        name: "writeback_cache",
        value: Value::Flag,
        help: "kernel write-back caching of file data (combines small writes)",
        contradicts: &[],
        set: |c, _| {
            c.writeback_cache = true;
            Ok(())
        },
    },
    MountOption {
        name: "noxattr",
        value: Value::Flag,
        help: "serve no extended attributes (and so no POSIX ACLs)",
        contradicts: &[],
        set: |c, _| {
            c.xattrs = false;
            // Nobody enforces ACLs without xattrs: none are inherited.
            c.fs.inherit_acls = false;
            Ok(())
        },
    },
    MountOption {
        name: "uring",
        value: Value::Optional {
            values: "auto|on|off",
            bare: "on",
        },
        help: "serve over FUSE-over-io_uring where offered; on: say when not [auto]",
        contradicts: &[],
        set: |c, v| {
            c.uring = match v {
                "on" => UringMode::On,
                "auto" => UringMode::Auto,
                "off" => UringMode::Off,
                _ => return Err(Bad::Choice),
            };
            Ok(())
        },
    },
];

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
    use manyfs::{Durability, LockKind};

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
        assert_eq!(FuseConfig::default().pin_workers, PinWorkers::Off);
        for (v, mode) in [
            ("pin_workers", PinWorkers::On),
            ("pin_workers=on", PinWorkers::On),
            ("pin_workers=off", PinWorkers::Off),
        ] {
            assert_eq!(
                FuseConfig::parse_options(&[v]).unwrap().pin_workers,
                mode,
                "{v}"
            );
        }
        assert_eq!(FuseConfig::default().spin, DEFAULT_SPIN);
        for (v, us) in [
            ("spin=0", 0),
            ("spin=200", 200),
            ("spin=1000000", 1_000_000),
        ] {
            assert_eq!(
                FuseConfig::parse_options(&[v]).unwrap().spin,
                std::time::Duration::from_micros(us),
                "{v}"
            );
        }
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
            "uring=",
            "ro,rw",
            "rw,ro",
            "lock=inode,lock=interval",
            "uring,uring=off",
            "pin_workers=yes",
            "pin_workers=auto",
            "pin_workers=",
            "pin_workers,pin_workers=off",
            "spin",
            "spin=",
            "spin=-1",
            "spin=0.5",
            "spin=1000001",
            "spin=50us",
        ] {
            let err = FuseConfig::parse_options(&[bad]).unwrap_err();
            assert!(matches!(err, FuseError::BadOption { .. }), "{bad}: {err}");
            assert!(!err.to_string().contains('\n'));
        }
    }

    #[test]
    fn contradictions_name_both_options_and_repeats_of_one_value_pass() {
        let err = FuseConfig::parse_options(&["ro", "rw"]).unwrap_err();
        assert_eq!(err.to_string(), "bad mount option `rw`: contradicts ro");
        let err = FuseConfig::parse_options(&["threads=2,threads=4"]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "bad mount option `threads=4`: contradicts threads=2 given before"
        );
        for same in ["ro,ro", "uring,uring=on", "lock=inode,lock=inode", "rw,rw"] {
            assert!(FuseConfig::parse_options(&[same]).is_ok(), "{same}");
        }
        assert!(!FuseConfig::parse_options(&["rw"]).unwrap().fs.read_only);
    }

    #[test]
    fn pinned_cpus() {
        let few = vec![0, 1];
        let many: Vec<usize> = (0..16).collect();
        assert_eq!(PinWorkers::On.cpus(few.clone()), few);
        assert_eq!(PinWorkers::On.cpus(many.clone()), many);
        assert!(PinWorkers::Off.cpus(few).is_empty());
        assert!(PinWorkers::Off.cpus(many).is_empty());
        // One CPU: nothing to spread over.
        assert!(PinWorkers::On.cpus(vec![3]).is_empty());
        assert!(PinWorkers::On.cpus(Vec::new()).is_empty());
    }

    #[test]
    fn the_table_is_consistent() {
        for (i, o) in OPTIONS.iter().enumerate() {
            assert!(
                OPTIONS[..i].iter().all(|p| p.name != o.name),
                "{} twice",
                o.name
            );
            assert!(!o.help.contains('\n'), "{}", o.name);
            for c in o.contradicts {
                let other = OPTIONS.iter().find(|p| p.name == *c).expect(c);
                assert!(other.contradicts.contains(&o.name), "{c} / {}", o.name);
            }
            // Each option's help line is in --help, and the unknown-option
            // error names it.
            let line = format!("{}  ", o.syntax());
            assert!(options_help().contains(&line), "{line}");
            let err = FuseConfig::parse_options(&["nope"])
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(&format!(" {},", o.name)) || err.contains(&format!(" {})", o.name)),
                "{err}"
            );
        }
    }

    /// docs/mount.md's option table lists exactly the options of
    /// [`OPTIONS`], in its order, each written as [`MountOption::syntax`].
    #[test]
    fn docs_mount_md_lists_the_table() {
        let doc = include_str!("../../../docs/mount.md");
        let section = doc
            .split("## Options (`-o`)")
            .nth(1)
            .and_then(|s| s.split("\n## ").next())
            .expect("docs/mount.md has an Options (`-o`) section");
        let documented: Vec<String> = section
            .lines()
            .filter_map(|l| l.strip_prefix("| `"))
            .filter_map(|l| l.split_once("` |"))
            .map(|(cell, _)| cell.replace("\\|", "|"))
            .collect();
        let table: Vec<String> = OPTIONS.iter().map(MountOption::syntax).collect();
        assert_eq!(documented, table);
    }
}
