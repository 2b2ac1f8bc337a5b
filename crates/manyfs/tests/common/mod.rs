//! Helpers shared by the integration tests.
#![allow(dead_code)]

use manyfs::{File, Fs, MkfsOptions, MountOptions, OpenOptions};
use std::path::{Path, PathBuf};

/// A fresh pool of `size` bytes in a temporary directory, mounted with the
/// default options. Keep the directory alive as long as the pool is used.
pub fn fresh(size: u64) -> (tempfile::TempDir, PathBuf, Fs) {
    fresh_with(size, &MountOptions::default())
}

/// [`fresh`] with chosen mount options.
pub fn fresh_with(size: u64, opts: &MountOptions) -> (tempfile::TempDir, PathBuf, Fs) {
    let dir = tempfile::tempdir().unwrap();
    let pool = dir.path().join("pool");
    let fs = mkfs(&pool, size, opts);
    (dir, pool, fs)
}

/// Make a pool of `size` bytes (default format options) at `pool` and mount
/// it with `opts`.
pub fn mkfs(pool: &Path, size: u64, opts: &MountOptions) -> Fs {
    Fs::mkfs(
        pool,
        &{
            let mut mk = MkfsOptions::default();
            mk.size = size;
            mk
        },
        opts,
    )
    .unwrap()
}

/// Open `path` for reading and writing, creating it if missing.
pub fn open_rw(fs: &Fs, path: &str) -> File {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .open(fs, path)
        .unwrap()
}

use manyfs_sync::testing as test_support;
#[allow(unused_imports)] // not every test binary waits on progress or skips
pub use test_support::{Lack, in_ci, skip, within};

/// The names in directory `dir`, in the order `read_dir` gives them.
pub fn dir_names(fs: &Fs, dir: &str) -> Vec<std::ffi::OsString> {
    fs.read_dir(dir)
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect()
}

/// Pin the calling thread to one CPU it may run on; returns that CPU.
pub fn pin_to_an_allowed_cpu() -> usize {
    use manyfs::diag::affinity;
    let cpu = *affinity::get(0)
        .unwrap_or_else(|e| panic!("{e}"))
        .last()
        .expect("an allowed CPU");
    affinity::set(0, &[cpu]).unwrap_or_else(|e| panic!("{e}"));
    cpu
}

/// Make a pool with `opts` (which turn an emulation option on) moved to
/// the machine's own topology: it must be refused with `EINVAL` and a
/// message naming the emulated topology it needs, before the pool file is
/// created. Returns the error.
pub fn refused_on_system_topology(mut opts: MountOptions) -> manyfs::Error {
    opts.topology = manyfs::TopologySpec::System;
    let dir = tempfile::tempdir().unwrap();
    let pool = dir.path().join("pool");
    let err = Fs::mkfs(&pool, &MkfsOptions::default(), &opts)
        .err()
        .expect("an emulation option on the machine's topology mounted");
    assert_eq!(err.errno(), libc::EINVAL);
    assert!(err.to_string().contains("emulated topology"), "{err}");
    assert!(!pool.exists(), "refused before mkfs");
    err
}

/// A pool at `pool` for a thread of emulated node `node` (of a `2x1`
/// topology, in `opts`) to spill from: member 0, the pool file (24 MiB),
/// on the other node, and member 1 (`m1` beside it, 8 MiB) on `node`, so
/// that the thread fills member 1 first and then takes blocks of member 0.
pub fn mkfs_spilling_pair(pool: &Path, node: usize, opts: &MountOptions) -> Fs {
    const MIB: u64 = 1 << 20;
    Fs::mkfs(
        pool,
        &{
            let mut mk = MkfsOptions::default();
            mk.size = 24 * MIB;
            mk.node = (1 - node) as u32;
            mk.members = vec![manyfs::PoolMember {
                path: pool.with_file_name("m1"),
                node: node as u32,
                size: 8 * MIB,
            }];
            mk
        },
        opts,
    )
    .unwrap()
}

/// The durable image of a `file`-mode pool: at every durability point the
/// engine reports (before its `msync`), the pages it covers are copied
/// from the pool file (the page cache) into it. What a power cut right
/// after the last completed sync leaves on disk.
pub struct Durable {
    pool: std::fs::File,
    image: std::sync::Mutex<Vec<u8>>,
    /// Durability points seen so far.
    pub syncs: std::sync::atomic::AtomicUsize,
}

impl Durable {
    /// Start from the pool file at `pool` as it is (unmounted, synced).
    pub fn new(pool: &Path) -> Durable {
        Durable {
            pool: std::fs::File::open(pool).unwrap(),
            image: std::sync::Mutex::new(std::fs::read(pool).unwrap()),
            syncs: Default::default(),
        }
    }

    /// The durable image now.
    pub fn image(&self) -> Vec<u8> {
        self.image.lock().unwrap().clone()
    }
}

impl manyfs::diag::PersistObserver for Durable {
    fn on_sync(&self, off: u64, len: usize) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        self.syncs
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut image = self.image.lock().unwrap();
        let end = (off as usize + len).min(image.len());
        self.pool.read_exact_at(&mut image[off as usize..end], off)
    }
}

/// A POSIX ACL in attribute form from `setfacl`'s short text, e.g.
/// `"u::rw-,u:1000:r-x,g::---,m::r-x,o::---"` (entries in sorted order):
/// version 2, then (tag, perm, id) entries; the id of other than named
/// user and group entries is -1, as Linux writes it.
pub fn acl(text: &str) -> Vec<u8> {
    let mut b = 2u32.to_le_bytes().to_vec();
    for entry in text.split(',') {
        let parts: Vec<&str> = entry.split(':').collect();
        let (tag, id): (u16, u32) = match (parts[0], parts[1]) {
            ("u", "") => (1, u32::MAX),
            ("u", id) => (2, id.parse().unwrap()),
            ("g", "") => (4, u32::MAX),
            ("g", id) => (8, id.parse().unwrap()),
            ("m", _) => (0x10, u32::MAX),
            _ => (0x20, u32::MAX),
        };
        let perm = parts[2]
            .chars()
            .zip([4u16, 2, 1])
            .filter(|(c, _)| *c != '-')
            .map(|(_, bit)| bit)
            .sum::<u16>();
        b.extend_from_slice(&tag.to_le_bytes());
        b.extend_from_slice(&perm.to_le_bytes());
        b.extend_from_slice(&id.to_le_bytes());
    }
    b
}

/// A scratch directory for a test that models durability itself (a
/// persistence observer decides what a power cut keeps, not the disk): on
/// tmpfs (`/dev/shm`) where there is one, where the pool's real syncs
/// cost nothing; they made such tests wait on the disk for most of their
/// time.
pub fn modelled_scratch() -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir()
        && let Ok(dir) = tempfile::Builder::new()
            .prefix("manyfs-test")
            .tempdir_in(shm)
    {
        return dir;
    }
    tempfile::tempdir().unwrap()
}
