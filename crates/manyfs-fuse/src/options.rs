//! Mount options (`-o lock=...,segment=...,threads=...`).

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
    /// Let users other than the one who mounted use the file system.
    pub allow_other: bool,
}

impl Default for FuseConfig {
    fn default() -> Self {
        FuseConfig {
            fs: MountOptions::default(),
            threads: default_threads(),
            allow_other: false,
        }
    }
}

/// The default number of FUSE worker threads: twice the CPUs, at least 4, so
/// that requests that wait (fsync, a contended range) do not idle the CPUs.
pub fn default_threads() -> usize {
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    (cpus * 2).clamp(4, 64)
}

impl FuseConfig {
    /// Parse `-o` option lists such as `["lock=srl-tree,threads=8", "ro"]`
    /// on top of the defaults.
    ///
    /// Known options: `lock=inode|interval|srl-array|srl-tree`,
    /// `segment=BYTES` (suffixes k, m, g accepted), `threads=N`,
    /// `durability=pm|file|dram`, `ro`, `rw`, `allow_other`.
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
            "segment" => {
                let v = need(opt, value)?;
                let bytes = parse_size(v).ok_or_else(|| {
                    FuseError::bad_option(opt, "expected a size in bytes (e.g. 4096, 64k, 2m)")
                })?;
                if bytes == 0 {
                    return Err(FuseError::bad_option(opt, "must be greater than 0"));
                }
                self.fs.segment_size = bytes;
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
                self.allow_other = true;
            }
            _ => {
                return Err(FuseError::bad_option(
                    opt,
                    "unknown option (known: lock, segment, threads, durability, ro, rw, allow_other)",
                ));
            }
        }
        Ok(())
    }
}

/// Parse a byte count with an optional binary suffix (`k`, `m`, `g`, `t`,
/// case-insensitive, an optional trailing `b`/`ib`). Returns `None` on
/// garbage or overflow.
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let lower = s.to_ascii_lowercase();
    let trimmed = lower
        .strip_suffix("ib")
        .or_else(|| lower.strip_suffix('b'))
        .unwrap_or(&lower);
    let (digits, shift) = match trimmed.chars().last()? {
        'k' => (&trimmed[..trimmed.len() - 1], 10),
        'm' => (&trimmed[..trimmed.len() - 1], 20),
        'g' => (&trimmed[..trimmed.len() - 1], 30),
        't' => (&trimmed[..trimmed.len() - 1], 40),
        _ => (trimmed, 0),
    };
    let n: u64 = digits.trim().parse().ok()?;
    n.checked_mul(1u64 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("64k"), Some(65536));
        assert_eq!(parse_size("2M"), Some(2 << 20));
        assert_eq!(parse_size("1GiB"), Some(1 << 30));
        assert_eq!(parse_size("k"), None);
        assert_eq!(parse_size("x"), None);
        assert_eq!(parse_size(""), None);
        assert_eq!(parse_size("99999999999999999999t"), None);
    }

    #[test]
    fn options() {
        let cfg = FuseConfig::parse_options(&[
            "lock=interval,segment=64k",
            "threads=3,durability=dram,ro,allow_other",
        ])
        .unwrap();
        assert_eq!(cfg.fs.lock.to_string(), LockKind::Interval.to_string());
        assert_eq!(cfg.fs.segment_size, 65536);
        assert_eq!(cfg.threads, 3);
        assert!(cfg.fs.read_only);
        assert!(cfg.allow_other);
        assert!(matches!(cfg.fs.durability, Durability::Dram));
    }

    #[test]
    fn bad_options_are_typed_errors() {
        for bad in [
            "lock=nope",
            "segment=0",
            "segment=abc",
            "threads=0",
            "threads=x",
            "durability=disk",
            "ro=1",
            "frobnicate",
            "lock",
        ] {
            let err = FuseConfig::parse_options(&[bad]).unwrap_err();
            assert!(matches!(err, FuseError::BadOption { .. }), "{bad}: {err}");
            assert!(!err.to_string().contains('\n'));
        }
    }
}
