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
    /// The file index's tree ([`manyfs::MountOptions::index`]).
    pub index: manyfs::IndexKind,
    /// Name shards per directory ([`manyfs::MountOptions::dir_shards`];
    /// `None`: the mount's default).
    pub dir_shards: Option<usize>,
    /// Largest write staged in the pool of a tiered `pm`/`dram` pool
    /// ([`manyfs::MountOptions::stage_max`]; 0: none).
    pub stage_max: u64,
    /// Block placement ([`manyfs::MountOptions::placement`]).
    pub placement: manyfs::Placement,
    /// Thread placement ([`manyfs::MountOptions::thread_placement`]).
    pub thread_placement: manyfs::ThreadPlacement,
    /// Its rules ([`manyfs::MountOptions::placement_policy`]).
    pub placement_policy: manyfs::PlacementPolicy,
    /// NUMA topology of the mounts ([`manyfs::MountOptions::topology`]).
    pub topology: manyfs::TopologySpec,
    /// The emulated remote-access cost ([`manyfs::MountOptions::remote_cost`]).
    pub remote_cost: Option<manyfs::RemoteCost>,
    /// The emulated per-node NVMM bandwidth cap
    /// ([`manyfs::MountOptions::bandwidth_cap`]).
    pub bandwidth_cap: Option<manyfs::BandwidthCap>,
    /// Thread placement's parameters
    /// ([`manyfs::MountOptions::placement_config`]).
    pub placement_config: manyfs::PlacementConfig,
    /// Make the pool of one member file per node of the topology (member
    /// `i` on node `i`), `size` split evenly among them, instead of one
    /// file on node 0.
    pub member_per_node: bool,
    /// A data device for file data (a tiered pool: logs and inodes stay in
    /// the pool), re-created with the pool for every point; `None`: none.
    pub data: Option<PathBuf>,
    /// Bytes of the data device.
    pub data_size: u64,
    /// How the data device is read and written
    /// ([`manyfs::MountOptions::device_io`]).
    pub device_io: manyfs::DeviceIo,
    /// Name `lib:` series on a data device `lib:LOCK device_io=IO` even
    /// with the default [`PoolConfig::device_io`] (when runs with each
    /// are compared side by side).
    pub label_device_io: bool,
}

impl PoolConfig {
    /// The mount options of a `lib:` point with range lock `lock`.
    pub fn mount_options(&self, lock: LockKind) -> manyfs::MountOptions {
        {
            let mut mo = manyfs::MountOptions::default();
            mo.lock = lock;
            mo.segment_size = self.segment_size;
            mo.durability = self.durability;
            mo.sublogs = self.sublogs;
            mo.index = self.index;
            mo.dir_shards = self.dir_shards;
            mo.stage_max = self.stage_max;
            mo.placement = self.placement;
            mo.topology = self.topology;
            mo.remote_cost = self.remote_cost;
            mo.bandwidth_cap = self.bandwidth_cap;
            mo.placement_config = self.placement_config.clone();
            mo.thread_placement = self.thread_placement;
            mo.placement_policy = self.placement_policy;
            mo.device_io = self.device_io;
            mo
        }
    }

    /// The mkfs options of a pool at `path`: one file, or one member per
    /// node ([`PoolConfig::member_per_node`]) beside it (`PATH.mN`).
    pub fn mkfs_options(&self, path: &Path) -> Result<manyfs::MkfsOptions> {
        let nodes = if self.member_per_node {
            manyfs::Topology::resolve(self.topology)
                .map_err(|e| BenchError::fs("topology", path.display().to_string(), e))?
                .node_count()
        } else {
            1
        };
        let each = (self.size / nodes as u64) & !((1 << 20) - 1);
        let members = (1..nodes)
            .map(|n| manyfs::PoolMember {
                path: member_path(path, n),
                node: n as u32,
                size: each,
            })
            .collect();
        Ok({
            let mut mk = manyfs::MkfsOptions::default();
            mk.size = if nodes > 1 { each } else { self.size };
            // A user-given pool is deliberately re-created for every point.
            mk.replace_existing = true;
            mk.zero_fill = self.zero_fill;
            mk.members = members;
            mk.data = self.data.as_ref().map(|p| manyfs::DataDevice {
                path: p.clone(),
                size: Some(self.data_size),
            });
            mk
        })
    }
}

/// Where member `n` (> 0) of the pool at `pool` lives.
fn member_path(pool: &Path, n: usize) -> PathBuf {
    let mut p = pool.as_os_str().to_owned();
    p.push(format!(".m{n}"));
    PathBuf::from(p)
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
            index: manyfs::IndexKind::Cas,
            dir_shards: None,
            stage_max: manyfs::DEFAULT_STAGE_MAX,
            placement: manyfs::Placement::Local,
            thread_placement: manyfs::ThreadPlacement::Off,
            placement_policy: manyfs::PlacementPolicy::Full,
            topology: manyfs::TopologySpec::System,
            remote_cost: None,
            bandwidth_cap: None,
            placement_config: manyfs::PlacementConfig::default(),
            member_per_node: false,
            data: None,
            data_size: 256 << 20,
            device_io: manyfs::DeviceIo::Uring,
            label_device_io: false,
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
        cfg: Box<PoolConfig>,
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
    /// Files (pool and members) or one directory to remove afterwards.
    cleanup: Vec<PathBuf>,
    remove_file: bool,
}

impl PointFs {
    /// The backend to hand to [`crate::Workload::prepare`].
    pub fn backend(&self) -> Arc<dyn Backend> {
        self.backend
            .clone()
            .unwrap_or_else(|| Arc::new(DirBackend::new(std::env::temp_dir())))
    }

    /// The in-process file system of a `lib:` point.
    pub fn fs(&self) -> Option<&manyfs::Fs> {
        self.fs.as_ref()
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
        for p in std::mem::take(&mut self.cleanup) {
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
                        cfg: Box::new(pool.clone()),
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

    /// Carry `label` in the results instead of the target's name (to tell
    /// apart series of one target with different pool settings).
    pub fn with_label(mut self, label: impl Into<String>) -> Self {
        self.label = label.into();
        self
    }

    /// The emulated remote-access cost of this target's mounts, if on.
    pub fn remote_cost(&self) -> Option<manyfs::RemoteCost> {
        match &self.kind {
            EnvKind::Lib { cfg, .. } => cfg.remote_cost,
            _ => None,
        }
    }

    /// The emulated NVMM bandwidth cap of this target's mounts, if on.
    pub fn bandwidth_cap(&self) -> Option<manyfs::BandwidthCap> {
        match &self.kind {
            EnvKind::Lib { cfg, .. } => cfg.bandwidth_cap,
            _ => None,
        }
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
                let mkfs = cfg.mkfs_options(&path)?;
                let mut files = vec![path.clone()];
                files.extend(mkfs.members.iter().map(|m| m.path.clone()));
                for f in &files {
                    let _ = std::fs::remove_file(f);
                }
                let fs = manyfs::Fs::mkfs(&path, &mkfs, &cfg.mount_options(*lock))
                    .map_err(|e| BenchError::fs("mkfs", path.display().to_string(), e))?;
                Ok(PointFs {
                    backend: Some(Arc::new(LibBackend::new(fs.clone()))),
                    fs: Some(fs),
                    // A user-given pool is kept (it is re-created next
                    // point); its members go.
                    cleanup: if pool.is_some() {
                        files.split_off(1)
                    } else {
                        files
                    },
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
                    cleanup: vec![d],
                    remove_file: false,
                })
            }
            EnvKind::Memory => Ok(PointFs {
                backend: None,
                fs: None,
                cleanup: Vec::new(),
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
