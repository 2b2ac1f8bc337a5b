//! What a benchmark runs against: in-process manyfs with one of the range
//! locks, a directory of any file system, a fresh tmpfs, or plain memory.

use crate::backend::{Backend, DirBackend, LibBackend};
use crate::{BenchError, Result};
use manyfs::LockKind;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

/// A benchmark target, as written on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `lib:KIND`: in-process manyfs using range lock `KIND`.
    Lib(LockKind),
    /// `dir:PATH`: any directory, through `std::fs` and `pread`/`pwrite`.
    Dir(PathBuf),
    /// `tmpfs`: a tmpfs mounted for the run (or `/dev/shm` when mounting is
    /// not possible).
    Tmpfs,
    /// `memory`: the memory-bandwidth reference (only MEM-W / MEM-R).
    Memory,
}

impl Target {
    /// Every in-process target, one per lock kind.
    pub fn all_lib() -> Vec<Target> {
        LockKind::ALL.into_iter().map(Target::Lib).collect()
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Lib(k) => write!(f, "lib:{k}"),
            Target::Dir(p) => write!(f, "dir:{}", p.display()),
            Target::Tmpfs => f.write_str("tmpfs"),
            Target::Memory => f.write_str("memory"),
        }
    }
}

impl FromStr for Target {
    type Err = BenchError;
    fn from_str(s: &str) -> Result<Self> {
        let s = s.trim();
        if let Some(k) = s.strip_prefix("lib:") {
            let kind = k
                .parse::<LockKind>()
                .map_err(|e| BenchError::InvalidArgument(format!("target {s:?}: {e}")))?;
            return Ok(Target::Lib(kind));
        }
        if let Some(p) = s.strip_prefix("dir:") {
            if p.is_empty() {
                return Err(BenchError::InvalidArgument(format!(
                    "target {s:?}: missing path"
                )));
            }
            return Ok(Target::Dir(PathBuf::from(p)));
        }
        match s {
            "tmpfs" => Ok(Target::Tmpfs),
            "memory" => Ok(Target::Memory),
            "lib" => Ok(Target::Lib(LockKind::default())),
            _ => Err(BenchError::InvalidArgument(format!(
                "target {s:?} (expected lib:inode, lib:interval, lib:srl-array, lib:srl-tree, \
                 dir:PATH, tmpfs or memory)"
            ))),
        }
    }
}

/// How in-process pools are created.
#[derive(Debug, Clone)]
pub struct PoolConfig {
    /// Pool file to (re)create for every point; a temporary one when `None`.
    pub pool: Option<PathBuf>,
    /// Durability mode of the media.
    pub durability: manyfs::Durability,
    /// Pool size in bytes.
    pub size: u64,
    /// Segment size of the segment range locks.
    pub segment_size: u64,
    /// Zero-fill the pool at mkfs ([`manyfs::MkfsOptions::zero_fill`]).
    pub zero_fill: bool,
    /// Sub-logs per inode ([`manyfs::MountOptions::sublogs`]).
    pub sublogs: manyfs::Sublogs,
    /// Block placement ([`manyfs::MountOptions::placement`]).
    pub placement: manyfs::Placement,
    /// Thread placement ([`manyfs::MountOptions::thread_placement`]).
    pub thread_placement: manyfs::ThreadPlacement,
    /// Its rules ([`manyfs::MountOptions::placement_policy`]).
    pub placement_policy: manyfs::PlacementPolicy,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            pool: None,
            durability: manyfs::Durability::Dram,
            size: 2 << 30,
            segment_size: 4096,
            zero_fill: false,
            sublogs: manyfs::Sublogs::PerCpu,
            placement: manyfs::Placement::Local,
            thread_placement: manyfs::ThreadPlacement::Off,
            placement_policy: manyfs::PlacementPolicy::Full,
        }
    }
}

/// A tmpfs mounted for the duration of a run, unmounted on drop.
struct TmpfsMount {
    dir: tempfile::TempDir,
    mounted: bool,
}

impl TmpfsMount {
    fn new() -> Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("manyfs-bench-tmpfs-")
            .tempdir()
            .map_err(|e| BenchError::io("mkdtemp", std::env::temp_dir(), e))?;
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let mounted = root
            && std::process::Command::new("mount")
                .args(["-t", "tmpfs", "-o", "size=8g", "tmpfs"])
                .arg(dir.path())
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
        Ok(TmpfsMount { dir, mounted })
    }
}

impl Drop for TmpfsMount {
    fn drop(&mut self) {
        if self.mounted {
            let _ = std::process::Command::new("umount")
                .arg(self.dir.path())
                .stdin(std::process::Stdio::null())
                .status();
        }
    }
}

/// A temporary directory on RAM when possible (`/dev/shm`), else in the
/// system temp dir.
fn ram_tempdir(prefix: &str) -> Result<tempfile::TempDir> {
    let shm = Path::new("/dev/shm");
    let mut b = tempfile::Builder::new();
    b.prefix(prefix);
    if shm.is_dir()
        && let Ok(d) = b.tempdir_in(shm)
    {
        return Ok(d);
    }
    b.tempdir()
        .map_err(|e| BenchError::io("mkdtemp", std::env::temp_dir(), e))
}

/// A target made ready for a run: pools are created and tmpfs mounted once,
/// and [`TargetEnv::point`] hands out a fresh file system per point.
pub struct TargetEnv {
    target: Target,
    label: String,
    kind: EnvKind,
    points: usize,
}

enum EnvKind {
    Lib {
        lock: LockKind,
        dir: Option<tempfile::TempDir>,
        pool: Option<PathBuf>,
        cfg: PoolConfig,
    },
    Dir {
        root: PathBuf,
        _mount: Option<TmpfsMount>,
        _tmp: Option<tempfile::TempDir>,
    },
    Memory,
}

/// One point's file system: dropped (unmounted, deleted) after the point.
pub struct PointFs {
    backend: Option<Arc<dyn Backend>>,
    fs: Option<manyfs::Fs>,
    cleanup: Option<PathBuf>,
    remove_file: bool,
}

impl PointFs {
    /// The backend to hand to [`crate::Workload::prepare`].
    pub fn backend(&self) -> Arc<dyn Backend> {
        self.backend
            .clone()
            .unwrap_or_else(|| Arc::new(DirBackend::new(std::env::temp_dir())))
    }

    /// Unmount and delete what the point created.
    pub fn finish(mut self) -> Result<()> {
        self.backend = None;
        if let Some(fs) = self.fs.take() {
            fs.unmount()
                .map_err(|e| BenchError::fs("unmount", "/", e))?;
        }
        self.remove();
        Ok(())
    }

    fn remove(&mut self) {
        if let Some(p) = self.cleanup.take() {
            if self.remove_file {
                let _ = std::fs::remove_file(&p);
            } else {
                let _ = std::fs::remove_dir_all(&p);
            }
        }
    }
}

impl Drop for PointFs {
    fn drop(&mut self) {
        self.backend = None;
        if let Some(fs) = self.fs.take() {
            let _ = fs.unmount();
        }
        self.remove();
    }
}

impl TargetEnv {
    /// Prepare `target` (mount tmpfs, pick the pool location).
    pub fn new(target: &Target, pool: &PoolConfig) -> Result<Self> {
        let (label, kind) = match target {
            Target::Lib(lock) => {
                let (dir, p) = match &pool.pool {
                    Some(p) => (None, Some(p.clone())),
                    None => (Some(ram_tempdir("manyfs-bench-pool-")?), None),
                };
                (
                    target.to_string(),
                    EnvKind::Lib {
                        lock: *lock,
                        dir,
                        pool: p,
                        cfg: pool.clone(),
                    },
                )
            }
            Target::Dir(root) => {
                if !root.is_dir() {
                    return Err(BenchError::io(
                        "target",
                        root,
                        std::io::Error::from(std::io::ErrorKind::NotFound),
                    ));
                }
                (
                    target.to_string(),
                    EnvKind::Dir {
                        root: root.clone(),
                        _mount: None,
                        _tmp: None,
                    },
                )
            }
            Target::Tmpfs => {
                let m = TmpfsMount::new()?;
                if m.mounted {
                    (
                        "tmpfs".to_string(),
                        EnvKind::Dir {
                            root: m.dir.path().to_path_buf(),
                            _mount: Some(m),
                            _tmp: None,
                        },
                    )
                } else {
                    drop(m);
                    let t = ram_tempdir("manyfs-bench-shm-")?;
                    (
                        "tmpfs".to_string(),
                        EnvKind::Dir {
                            root: t.path().to_path_buf(),
                            _mount: None,
                            _tmp: Some(t),
                        },
                    )
                }
            }
            Target::Memory => ("memory".to_string(), EnvKind::Memory),
        };
        Ok(TargetEnv {
            target: target.clone(),
            label,
            kind,
            points: 0,
        })
    }

    /// The name the results carry (`lib:srl-tree`, `tmpfs`, `dir:/mnt/x`).
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The target this environment was made for.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Where files of a `dir:`/`tmpfs` target live (for messages).
    pub fn root(&self) -> Option<&Path> {
        match &self.kind {
            EnvKind::Dir { root, .. } => Some(root),
            _ => None,
        }
    }

    /// A fresh, empty file system for one measured point.
    pub fn point(&mut self) -> Result<PointFs> {
        self.points += 1;
        let n = self.points;
        match &self.kind {
            EnvKind::Lib {
                lock,
                dir,
                pool,
                cfg,
            } => {
                let path = match (pool, dir) {
                    (Some(p), _) => p.clone(),
                    (None, Some(d)) => d.path().join(format!("pool-{n}")),
                    (None, None) => unreachable!("lib target has a pool or a temp dir"),
                };
                let _ = std::fs::remove_file(&path);
                let mkfs = manyfs::MkfsOptions {
                    size: cfg.size,
                    // A user-given pool is deliberately re-created for
                    // every point.
                    replace_existing: true,
                    zero_fill: cfg.zero_fill,
                    ..Default::default()
                };
                let mount = manyfs::MountOptions {
                    lock: *lock,
                    segment_size: cfg.segment_size,
                    durability: cfg.durability,
                    sublogs: cfg.sublogs,
                    placement: cfg.placement,
                    thread_placement: cfg.thread_placement,
                    placement_policy: cfg.placement_policy,
                    ..Default::default()
                };
                let fs = manyfs::Fs::mkfs(&path, &mkfs, &mount)
                    .map_err(|e| BenchError::fs("mkfs", path.display().to_string(), e))?;
                Ok(PointFs {
                    backend: Some(Arc::new(LibBackend::new(fs.clone()))),
                    fs: Some(fs),
                    // A user-given pool is kept (it is re-created next point).
                    cleanup: if pool.is_some() { None } else { Some(path) },
                    remove_file: true,
                })
            }
            EnvKind::Dir { root, .. } => {
                let d = root.join(format!("manyfs-bench-{}-{n}", std::process::id()));
                let _ = std::fs::remove_dir_all(&d);
                std::fs::create_dir_all(&d).map_err(|e| BenchError::io("mkdir", &d, e))?;
                Ok(PointFs {
                    backend: Some(Arc::new(DirBackend::new(d.clone()))),
                    fs: None,
                    cleanup: Some(d),
                    remove_file: false,
                })
            }
            EnvKind::Memory => Ok(PointFs {
                backend: None,
                fs: None,
                cleanup: None,
                remove_file: false,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_targets() {
        assert_eq!(
            "lib:srl-tree".parse::<Target>().unwrap(),
            Target::Lib(LockKind::SrlTree)
        );
        assert_eq!(
            "dir:/tmp".parse::<Target>().unwrap(),
            Target::Dir("/tmp".into())
        );
        assert_eq!("tmpfs".parse::<Target>().unwrap(), Target::Tmpfs);
        assert!("lib:nope".parse::<Target>().is_err());
        assert!("dir:".parse::<Target>().is_err());
        for t in Target::all_lib() {
            assert_eq!(t.to_string().parse::<Target>().unwrap(), t);
        }
    }
}
