//! [`Fs`]: mounting, unmounting and the path-level calls, shaped like
//! `std::fs`.

use super::*;
use crate::api::lowlevel::InodeOps;
use crate::api::metadata::metadata_of;

mod inode_ops;
mod open_options;
mod stats;

pub use open_options::OpenOptions;
pub use stats::{MemberUsage, Stats};

use crate::core::FsCore;
use crate::error::{Error, Result};
use crate::layout::*;
use crate::namespace::{self, NewNode};
use crate::options::{MkfsOptions, MountOptions};
use crate::recovery::{self};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

/// A mounted manyfs pool. Cheap to clone; `Send + Sync`.
#[derive(Clone)]
pub struct Fs {
    pub(super) core: Arc<FsCore>,
}

impl Fs {
    /// The mount's shared state, for the crate's own tools (`fsck`).
    pub(crate) fn core(&self) -> &Arc<FsCore> {
        &self.core
    }

    /// Create a pool file at `pool` and mount it.
    ///
    /// A non-empty file already at `pool` is left untouched and the call
    /// fails with [`Error::Exists`], unless `mkfs.replace_existing` is set:
    /// then it is replaced (its contents are lost). A pool mounted by
    /// another process is never replaced (`Busy`).
    pub fn mkfs(pool: &Path, mkfs: &MkfsOptions, mount: &MountOptions) -> Result<Fs> {
        mount.validate()?;
        let members_bytes: u64 = mkfs.members.iter().map(|m| m.size).sum();
        mount.check_for_pool(mkfs.size.saturating_add(members_bytes))?;
        {
            let topology = crate::Topology::resolve(mount.topology)?;
            let opts = crate::media::pool::NewPoolOptions {
                size: mkfs.size,
                bytes_per_inode: mkfs.bytes_per_inode,
                replace_existing: mkfs.replace_existing,
                node: mkfs.node,
                members: &mkfs.members,
                data: mkfs.data.as_ref(),
                topology: &topology,
            };
            let new = crate::media::pool::create_pool(pool, &opts, mount.durability)?;
            if mkfs.zero_fill {
                new.media.zero_fill()?;
            }
            crate::media::pool::format(&new.media, &new.sb, new.table.as_ref())?;
        }
        Fs::mount(pool, mount)
    }

    /// Mount an existing pool, rebuilding DRAM state from the media.
    pub fn mount(pool: &Path, opts: &MountOptions) -> Result<Fs> {
        Self::mount_with(pool, opts, None)
    }

    pub(super) fn mount_with(
        pool: &Path,
        opts: &MountOptions,
        observer: Option<Arc<dyn crate::media::PersistObserver>>,
    ) -> Result<Fs> {
        opts.validate()?;
        let mut media = crate::media::pool::open_pool(
            pool,
            opts.durability,
            !opts.read_only,
            opts.data_device.as_deref(),
        )?;
        media.set_device_io(opts.device_io);
        let topology = crate::Topology::resolve(opts.topology)?;
        media.check_member_nodes(&topology)?;
        // Before recovery's first touch of the mapping.
        media.bind_members(&topology)?;
        opts.check_for_pool(media.len())?;
        if let Some(o) = observer {
            media.attach_observer(o);
        }
        if let Some(cost) = opts.remote_cost {
            // `validate` checked the topology is an emulated one.
            media.set_remote_cost(cost, topology.clone());
        }
        if let Some(cap) = opts.bandwidth_cap {
            // `validate` checked the topology is an emulated one.
            media.set_bandwidth_cap(cap, topology.clone());
        }
        let rebuilt = recovery::rebuild(&media)?;
        let core = Arc::new(recovery::mount::build_core(media, rebuilt, opts.clone())?);
        super::commit_thread::start_commit_thread(&core);
        let config = crate::placement::calibrate::config_for_pool(
            pool,
            &opts.placement_config,
            core.topology.node_count(),
        );
        core.placement
            .start(opts.placement_policy, config, &core.topology);
        Ok(Fs { core })
    }

    /// Make everything durable and unmount (also happens when the last
    /// handle is dropped, without the error report). Thread placement
    /// stops and every thread it moved gets its own CPU mask back when the
    /// last handle goes.
    pub fn unmount(self) -> Result<()> {
        self.core.sync()
    }

    /// [`Fs::unmount`], then wait up to `wait` until nothing holds the
    /// mount any more, so that on return the pool file is closed and its
    /// lock released: another process can mount the pool at once. The
    /// commit thread holds the mount while it checkpoints; a [`File`] or
    /// directory handle of this mount holds it until dropped, and one still
    /// alive after `wait` is [`Error::StillOpen`] (the pool then stays
    /// open until the last handle goes).
    pub fn close(self, wait: std::time::Duration) -> Result<()> {
        let Fs { mut core } = self;
        core.sync()?;
        let start = std::time::Instant::now();
        // The mount is taken back whole (the commit thread's upgrades fail
        // from then on) and dropped here, so the pool file is closed when
        // this returns: waiting for the count to reach zero would return
        // while the thread that dropped the last handle was still closing.
        loop {
            match Arc::try_unwrap(core) {
                Ok(last) => {
                    drop(last);
                    return Ok(());
                }
                Err(held) => core = held,
            }
            if start.elapsed() >= wait {
                return Err(Error::StillOpen {
                    path: core.media.path().to_path_buf(),
                    waited_ms: wait.as_millis() as u64,
                });
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Shut the mount down after a fault its user detected (a panic in a
    /// request handler, say): from now on every change and every sync fails
    /// with `EIO` naming `reason`, and nothing more is written to the pool,
    /// which stays as it is for `fsck` and the next mount's recovery (that
    /// rebuilds all DRAM state from the media, so a half-done change in
    /// DRAM is forgotten).
    pub fn fail(&self, reason: &str) {
        self.core.media.fail(reason);
    }

    /// Whether the mount has failed ([`Fs::fail`], a failed sync, or a
    /// pool file that shrank under the mapping) and refuses changes.
    pub fn has_failed(&self) -> bool {
        self.core.media.has_failed()
    }

    /// Mount options in force.
    pub fn options(&self) -> &MountOptions {
        &self.core.opts
    }

    /// The topology this mount sizes its per-CPU structures by (the
    /// machine's, or the emulated one the options or `MANYFS_TOPOLOGY`
    /// named).
    pub fn topology(&self) -> &crate::Topology {
        &self.core.topology
    }

    /// Make all written data durable (a durability point in `file` mode):
    /// a checkpoint, as the commit thread's (writers wait for it only with
    /// `checkpoint=blocking`).
    pub fn sync(&self) -> Result<()> {
        self.core.checkpoint()
    }

    /// On a tiered pool that stages small synchronous writes
    /// ([`MountOptions::stage_max`]): move every page staged in the pool
    /// onto the data device and make the move durable; returns the pages
    /// moved. The commit thread does the same on its own when the pool is
    /// less than half free. Elsewhere nothing to do (0).
    pub fn destage(&self) -> Result<u64> {
        self.core.check_writable()?;
        let moved = crate::file::destage_listed(&self.core)?;
        self.core.checkpoint()?;
        Ok(moved)
    }

    /// Space and inode usage.
    pub fn statfs(&self) -> StatFs {
        let sb = &self.core.sb;
        StatFs {
            block_size: BLOCK_SIZE,
            total_blocks: sb.total_blocks - sb.data_start + sb.device_data_blocks().count() as u64,
            free_blocks: (self.core.sync_engine)
                .free_and_waiting(|| self.core.blocks.free_blocks()),
            total_inodes: sb.inode_count - 2,
            free_inodes: self.core.inode_numbers.free_count(),
            name_max: MAX_NAME_LEN as u64,
        }
    }

    // ---- path API ----------------------------------------------------------

    /// Open a file by path.
    pub fn open(&self, path: impl AsRef<Path>, opts: &OpenOptions) -> Result<File> {
        opts.open(self, path)
    }

    /// Attributes, following a final symlink.
    pub fn metadata(&self, path: impl AsRef<Path>) -> Result<Metadata> {
        let i = namespace::resolve(&self.core, path_bytes(path.as_ref()), true)?;
        Ok(metadata_of(&i))
    }

    /// Attributes, not following a final symlink.
    pub fn symlink_metadata(&self, path: impl AsRef<Path>) -> Result<Metadata> {
        let i = namespace::resolve(&self.core, path_bytes(path.as_ref()), false)?;
        Ok(metadata_of(&i))
    }

    fn parent_of(&self, path: &Path) -> Result<namespace::Split> {
        namespace::resolve_parent(&self.core, path_bytes(path))
    }

    /// Split `path` for creating a non-directory under its last name:
    /// `.`/`..` exist already, and a trailing slash promises a directory
    /// that will not be made.
    fn parent_for_new_file(&self, path: &Path) -> Result<namespace::Split> {
        let split = self.parent_of(path)?;
        let shown = || path.display().to_string();
        if split.is_dot() {
            return Err(Error::Exists(shown()));
        }
        if split.trailing_slash {
            return Err(
                match namespace::lookup(&self.core, &split.dir, &split.name) {
                    Ok(_) => Error::Exists(shown()),
                    Err(Error::NotFound(_)) => Error::NotFound(shown()),
                    Err(e) => e,
                },
            );
        }
        Ok(split)
    }

    pub(super) fn ctx(e: Error, path: &Path) -> Error {
        e.with_subject(&path.display().to_string())
    }

    /// Create a directory (mode 0o755).
    pub fn create_dir(&self, path: impl AsRef<Path>) -> Result<()> {
        let p = path.as_ref();
        let split = self.parent_of(p)?;
        if split.is_dot() {
            return Err(Error::Exists(p.display().to_string()));
        }
        namespace::create(
            &self.core,
            &split.dir,
            &split.name,
            NewNode::Dir,
            0o755,
            0,
            0,
        )
        .map(|_| ())
        .map_err(|e| Self::ctx(e, p))
    }

    /// Create a directory and any missing parents.
    pub fn create_dir_all(&self, path: impl AsRef<Path>) -> Result<()> {
        let p = path.as_ref();
        let mut cur = PathBuf::from("/");
        for comp in p.components() {
            if let std::path::Component::Normal(c) = comp {
                cur.push(c);
                match self.create_dir(&cur) {
                    Ok(()) => {}
                    Err(Error::Exists(_)) if self.metadata(&cur)?.is_dir() => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }

    /// Remove an empty directory.
    pub fn remove_dir(&self, path: impl AsRef<Path>) -> Result<()> {
        let p = path.as_ref();
        let split = self.parent_of(p)?;
        namespace::remove(&self.core, &split.dir, &split.name, true, None)
            .map_err(|e| Self::ctx(e, p))
    }

    /// Remove a file or symlink.
    pub fn remove_file(&self, path: impl AsRef<Path>) -> Result<()> {
        let p = path.as_ref();
        // The directory is borrowed: unlinks in one directory write no
        // line of its inode.
        let guard = self.core.guard();
        let split = namespace::resolve_parent_ref(&self.core, &guard, path_bytes(p))?;
        if split.is_dot() {
            return Err(Error::IsDir(p.display().to_string()));
        }
        if split.trailing_slash {
            // "name/": unlink refuses a directory, and anything else,
            // a symlink to a directory included (the last name is not
            // followed, as the kernel's unlink does not), is not one.
            let mut last = path_bytes(p);
            while last.len() > 1 && last.ends_with(b"/") {
                last = &last[..last.len() - 1];
            }
            let target = namespace::resolve(&self.core, last, false);
            return Err(match target {
                Ok(i) if i.is_dir() => Error::IsDir(p.display().to_string()),
                Ok(_) => Error::NotDir(p.display().to_string()),
                Err(e) => e,
            });
        }
        namespace::remove(&self.core, split.dir, &split.name, false, None)
            .map_err(|e| Self::ctx(e, p))
    }

    /// Rename, replacing a compatible target.
    pub fn rename(&self, from: impl AsRef<Path>, to: impl AsRef<Path>) -> Result<()> {
        let (f, t) = (from.as_ref(), to.as_ref());
        let src = self.parent_of(f)?;
        let dst = self.parent_of(t)?;
        if src.is_dot() || dst.is_dot() {
            return Err(Error::InvalidArgument(format!(
                "cannot rename {} to {}: \".\" and \"..\" cannot be renamed",
                f.display(),
                t.display()
            )));
        }
        if src.trailing_slash || dst.trailing_slash {
            // A trailing slash on either name says the source is a directory.
            let moving =
                namespace::lookup(&self.core, &src.dir, &src.name).map_err(|e| Self::ctx(e, f))?;
            if !moving.is_dir() {
                return Err(Error::NotDir(f.display().to_string()));
            }
        }
        namespace::rename(
            &self.core, &src.dir, &src.name, &dst.dir, &dst.name, false, None,
        )
        .map_err(|e| Self::ctx(e, f))
    }

    /// Create a hard link `dst` to `src`.
    pub fn hard_link(&self, src: impl AsRef<Path>, dst: impl AsRef<Path>) -> Result<()> {
        let (s, d) = (src.as_ref(), dst.as_ref());
        let inode = namespace::resolve(&self.core, path_bytes(s), false)?;
        let split = self.parent_for_new_file(d)?;
        namespace::link(&self.core, &inode, &split.dir, &split.name).map_err(|e| Self::ctx(e, d))
    }

    /// Create a symlink `link` pointing at `target`.
    pub fn symlink(&self, target: impl AsRef<Path>, link: impl AsRef<Path>) -> Result<()> {
        let l = link.as_ref();
        check_symlink_target(path_bytes(target.as_ref()))?;
        let split = self.parent_for_new_file(l)?;
        self.symlink_at(
            split.dir.ino,
            OsStr::from_bytes(&split.name),
            target.as_ref(),
            0,
            0,
        )
        .map(|_| ())
        .map_err(|e| Self::ctx(e, l))
    }

    /// Target of a symlink.
    pub fn read_link(&self, path: impl AsRef<Path>) -> Result<PathBuf> {
        let i = namespace::resolve(&self.core, path_bytes(path.as_ref()), false)?;
        self.readlink_ino(i.ino)
    }

    /// Entries of a directory, sorted by name.
    pub fn read_dir(&self, path: impl AsRef<Path>) -> Result<Vec<DirEntry>> {
        let i = namespace::resolve(&self.core, path_bytes(path.as_ref()), true)?;
        if !i.is_dir() {
            return Err(Error::NotDir(path.as_ref().display().to_string()));
        }
        self.readdir_ino(i.ino)
    }

    /// Apply `attr` to the inode `path` resolves to (following symlinks).
    fn setattr_path(&self, path: &Path, attr: &SetAttr) -> Result<()> {
        let i = namespace::resolve(&self.core, path_bytes(path), true)?;
        self.setattr(i.ino, attr).map(|_| ())
    }

    /// Change permission bits.
    pub fn set_permissions(&self, path: impl AsRef<Path>, mode: u32) -> Result<()> {
        self.setattr_path(
            path.as_ref(),
            &SetAttr {
                mode: Some(mode),
                ..Default::default()
            },
        )
    }

    /// Change access and modification times.
    pub fn set_times(
        &self,
        path: impl AsRef<Path>,
        atime: SystemTime,
        mtime: SystemTime,
    ) -> Result<()> {
        self.setattr_path(
            path.as_ref(),
            &SetAttr {
                atime: Some(atime),
                mtime: Some(mtime),
                ..Default::default()
            },
        )
    }

    /// Truncate or extend the file at `path`.
    pub fn set_len(&self, path: impl AsRef<Path>, len: u64) -> Result<()> {
        self.setattr_path(
            path.as_ref(),
            &SetAttr {
                size: Some(len),
                ..Default::default()
            },
        )
    }

    /// Read a whole file.
    pub fn read(&self, path: impl AsRef<Path>) -> Result<Vec<u8>> {
        let f = OpenOptions::new().read(true).open(self, path)?;
        let len = f.metadata()?.size as usize;
        let mut buf = vec![0u8; len];
        let n = f.read_at(&mut buf, 0)?;
        buf.truncate(n);
        Ok(buf)
    }

    /// Create or replace a file with `data`.
    pub fn write(&self, path: impl AsRef<Path>, data: &[u8]) -> Result<()> {
        let f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(self, path)?;
        f.write_all_at(data, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file;

    /// A pool of `size` bytes made in a fresh temporary directory (keep it
    /// alive while the pool is used) and mounted with `opts`.
    fn fresh(size: u64, opts: &MountOptions) -> (tempfile::TempDir, Fs) {
        let dir = tempfile::tempdir().unwrap();
        let mkfs = MkfsOptions {
            size,
            ..Default::default()
        };
        let fs = Fs::mkfs(&dir.path().join("pool"), &mkfs, opts).unwrap();
        (dir, fs)
    }

    /// Every index kind: files written across the pages the CAS index
    /// keeps inline (0) and in its tree, then a remount: recovery builds
    /// every file's index in the kind mounted with, with the same content
    /// (also when the pool was written under another kind: the index is
    /// DRAM only).
    #[cfg(not(feature = "shuttle"))]
    #[test]
    fn recovery_builds_the_index_of_the_mounted_kind() {
        use crate::index::IndexKind;
        let dir = tempfile::tempdir().unwrap();
        let pool = dir.path().join("pool");
        let mkfs = MkfsOptions {
            size: 16 << 20,
            ..Default::default()
        };
        let opts = |index| MountOptions {
            index,
            ..Default::default()
        };
        let fs = Fs::mkfs(&pool, &mkfs, &opts(IndexKind::Cas)).unwrap();
        let offsets = [0u64, 4096, 5 << 20, 262_144 - 1];
        let mut want = Vec::new();
        for (i, off) in offsets.iter().enumerate() {
            let data = vec![i as u8 + 1; 3000];
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .open(&fs, format!("/f{i}"))
                .unwrap();
            f.write_at(&data, *off).unwrap();
            want.push(fs.read(format!("/f{i}")).unwrap());
        }
        fs.unmount().unwrap();
        for kind in IndexKind::ALL {
            let fs = Fs::mount(&pool, &opts(kind)).unwrap();
            for f in fs.core.all_inodes().iter().filter_map(|i| i.file.as_ref()) {
                assert_eq!(f.index.kind(), kind);
            }
            for (i, w) in want.iter().enumerate() {
                assert_eq!(&fs.read(format!("/f{i}")).unwrap(), w, "{kind} /f{i}");
            }
            // Truncate and rewrite under this kind, then check after remount.
            fs.set_len("/f0", 2)
                .unwrap_or_else(|e| panic!("{kind}: {e}"));
            want[0] = vec![1u8; 2];
            assert_eq!(fs.read("/f0").unwrap(), want[0], "{kind}");
            assert!(crate::fsck::verify(&fs).unwrap().is_empty(), "{kind}");
            fs.unmount().unwrap();
        }
        let fs = Fs::mount(&pool, &opts(IndexKind::Rw)).unwrap();
        assert_eq!(fs.read("/f0").unwrap(), vec![1u8; 2]);
        fs.unmount().unwrap();
    }

    /// `file` mode: an inode whose log was appended to before it joined
    /// the inode table (a symlink's target) and that a full sync could not
    /// find then is still covered by the next full sync.
    #[test]
    fn an_inode_a_full_sync_missed_is_synced_by_the_next() {
        let (_dir, fs) = fresh(
            4 << 20,
            &MountOptions {
                commit_interval: std::time::Duration::ZERO,
                ..Default::default()
            },
        );
        let core = &fs.core;
        let child = core.new_inode(FileKind::Symlink, 0o777, 0, 0, 0).unwrap();
        file::write(core, &child, b"/target", 0).unwrap();
        // Not in the table yet: this sync cannot find it.
        core.full_sync().unwrap();
        core.insert(child.clone());
        core.full_sync().unwrap();
        assert!(
            child
                .log
                .snapshot_for_sync(&mut Vec::new(), &mut false)
                .is_empty(),
            "the second full sync left the inode's log unmarked"
        );
    }

    /// A lookup reads a name without a lock, then finds its inode: if the
    /// name was removed meanwhile, its inode freed and the number given to
    /// a new file, the lookup must not return that new file (another
    /// file's data, perhaps another user's) for the old name.
    #[cfg(not(feature = "shuttle"))]
    #[test]
    fn a_name_read_before_its_inode_number_was_reused_does_not_find_the_new_file() {
        use crate::inode::NameGuard;
        // `dram`: an unreachable inode's number is free again at once.
        let opts = MountOptions {
            durability: crate::Durability::Dram,
            ..Default::default()
        };
        let (_dir, fs) = fresh(16 << 20, &opts);
        fs.create_dir("/d").unwrap();
        fs.write("/d/a", b"old").unwrap();
        let core = &fs.core;
        let d = crate::namespace::resolve(core, b"/d", true).unwrap();
        let names = NameGuard::new();
        let read_before = d.dir().unwrap().get(b"a", &names).unwrap();
        fs.remove_file("/d/a").unwrap();
        let reused = (0..1000).find(|i| {
            let p = format!("/d/new{i}");
            fs.write(&p, b"new").unwrap();
            fs.metadata(&p).unwrap().ino == read_before.ino
        });
        assert!(reused.is_some(), "inode {} never reused", read_before.ino);
        let guard = core.guard();
        let found = crate::namespace::inode_named(
            core,
            &guard,
            d.dir().unwrap(),
            &names,
            b"a",
            read_before,
        );
        assert!(
            matches!(found, Err(Error::NotFound(_))),
            "the old name found inode {:?}",
            found.map(|i| (i.ino, i.generation))
        );
    }

    /// With `symlinks_leave_pool`, a walk that a symlink takes out of the
    /// pool (an absolute target, or `..` above the root) stops with
    /// `LeavesPool` and the rest of the path; without it the pool is its
    /// own tree.
    #[test]
    fn symlinks_lead_out_of_the_pool_only_when_it_is_part_of_a_larger_tree() {
        let leaves = |r: Result<Metadata>| match r {
            Err(Error::LeavesPool { rest }) => String::from_utf8(rest).unwrap(),
            other => panic!("expected LeavesPool, got {other:?}"),
        };
        for leave in [false, true] {
            let opts = MountOptions {
                symlinks_leave_pool: leave,
                ..Default::default()
            };
            let (_dir, fs) = fresh(16 << 20, &opts);
            fs.create_dir("/d").unwrap();
            fs.create_dir("/etc").unwrap();
            fs.write("/etc/hostname", b"in the pool").unwrap();
            fs.symlink("/etc/hostname", "/abs").unwrap();
            fs.symlink("/etc", "/etc-link").unwrap();
            fs.symlink("../../up/x", "/d/climb").unwrap();
            fs.symlink("climb", "/d/via").unwrap();
            fs.symlink("../etc/hostname", "/d/rel").unwrap();
            // Relative targets inside the pool stay inside it either way.
            assert_eq!(fs.read("/d/rel").unwrap(), b"in the pool");
            // Not followed: the link itself.
            assert!(fs.symlink_metadata("/abs").unwrap().is_symlink());
            if !leave {
                assert_eq!(fs.read("/abs").unwrap(), b"in the pool");
                assert_eq!(fs.metadata("/etc-link/hostname").unwrap().size, 11);
                assert!(matches!(fs.metadata("/d/climb"), Err(Error::NotFound(_))));
                continue;
            }
            assert_eq!(leaves(fs.metadata("/abs")), "/etc/hostname");
            assert_eq!(leaves(fs.metadata("/etc-link/hostname/")), "/etc/hostname/");
            assert_eq!(leaves(fs.metadata("/d/climb")), "../up/x");
            assert_eq!(leaves(fs.metadata("/d/via/more")), "../up/x/more");
            // A file opened (or created) through a final symlink.
            let opened = |path: &str, create: bool| match crate::OpenOptions::new()
                .read(true)
                .write(create)
                .create(create)
                .open(&fs, path)
            {
                Err(Error::LeavesPool { rest }) => String::from_utf8(rest).unwrap(),
                other => panic!("expected LeavesPool, got {:?}", other.map(|_| ())),
            };
            assert_eq!(opened("/abs", false), "/etc/hostname");
            assert_eq!(opened("/abs", true), "/etc/hostname");
            assert_eq!(opened("/d/climb", false), "../up/x");
            // The parent of a new name.
            match fs.create_dir("/etc-link/new") {
                Err(Error::LeavesPool { rest }) => assert_eq!(rest, b"/etc/new"),
                other => panic!("expected LeavesPool, got {other:?}"),
            }
            assert!(matches!(fs.metadata("/etc/new"), Err(Error::NotFound(_))));
            assert_eq!(
                Error::LeavesPool { rest: vec![] }.errno(),
                libc::EXDEV,
                "as a rename across mounts"
            );
        }
    }
}

/// The planted engine bugs (`diag::plant_bug`) do what they say, seen where
/// they act; the crash explorer's tests show it finds them.
#[cfg(all(test, feature = "planted-bugs"))]
mod planted_bug_tests {
    use super::*;
    use crate::log::LogSpace;
    use std::sync::Mutex;

    /// The ranges of the durability points (`file` mode) since the last
    /// `take`.
    #[derive(Default)]
    struct Syncs(Mutex<Vec<(u64, usize)>>);

    impl crate::media::PersistObserver for Syncs {
        fn on_sync(&self, off: u64, len: usize) -> std::io::Result<()> {
            self.0.lock().unwrap().push((off, len));
            Ok(())
        }
    }

    impl Syncs {
        fn take(&self) -> Vec<(u64, usize)> {
            std::mem::take(&mut *self.0.lock().unwrap())
        }
    }

    fn opts(sublogs: crate::Sublogs) -> MountOptions {
        MountOptions {
            durability: crate::Durability::File,
            // No commit thread: only the calls below sync anything.
            commit_interval: std::time::Duration::ZERO,
            sublogs,
            ..Default::default()
        }
    }

    /// A fresh `file`-mode pool in `dir`, mounted with `observer`.
    fn mount_observed(
        dir: &Path,
        opts: &MountOptions,
        observer: Arc<dyn crate::media::PersistObserver>,
    ) -> Fs {
        let pool = dir.join("pool");
        let mkfs = MkfsOptions {
            size: 8 << 20,
            ..Default::default()
        };
        Fs::mkfs(&pool, &mkfs, opts).unwrap().unmount().unwrap();
        crate::diag::mount_observed(&pool, opts, observer).unwrap()
    }

    /// Whether a durability point covered `/f`'s new log array while a
    /// write from a second CPU made it (the record's word names it after
    /// the write either way).
    fn array_synced_when_made(planted: bool) -> bool {
        let dir = tempfile::tempdir().unwrap();
        let syncs = Arc::new(Syncs::default());
        let fs = mount_observed(dir.path(), &opts(crate::Sublogs::PerCpu), syncs.clone());
        if planted {
            crate::diag::plant_bug(&fs, crate::inode::EngineBug::ArrayLinkedBeforeDurable);
        }
        let write = |at: u64| {
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .open(&fs, "/f")
                .unwrap();
            f.write_at(b"x", at).unwrap();
        };
        crate::placement::run_on_cpu(0, || write(0)).unwrap();
        let ino = fs.metadata("/f").unwrap().ino;
        let inode = fs.core.get(ino).unwrap();
        assert_eq!(inode.log.array_block(), None, "one CPU, one sub-log");
        syncs.take();
        // A page of its own: a write into the first CPU's unsynced page
        // would join that CPU's sub-log (it copies that write's bytes).
        crate::placement::run_on_cpu(1, || write(BLOCK_SIZE)).unwrap();
        let array = inode
            .log
            .array_block()
            .expect("a second CPU's sub-log needs a log array");
        let word = fs.core.media.load_u64(fs.core.log_word_at(ino)).unwrap();
        assert_eq!(word, array, "the record names the array");
        let (start, end) = (array * BLOCK_SIZE, (array + 1) * BLOCK_SIZE);
        let covered = syncs
            .take()
            .iter()
            .any(|&(off, len)| off <= start && end <= off + len as u64);
        drop(inode);
        fs.unmount().unwrap();
        covered
    }

    /// [`crate::EngineBug::ArrayLinkedBeforeDurable`]: a `file`-mode log
    /// array is synced before the record names it, but not with the bug.
    #[test]
    fn a_planted_unsynced_array_is_linked_without_a_sync() {
        if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
            eprintln!("one CPU: no second sub-log, no log array to make");
            return;
        }
        assert!(array_synced_when_made(false), "the array is synced first");
        assert!(
            !array_synced_when_made(true),
            "with the bug planted no sync covers the array"
        );
    }

    /// A POSIX ACL in attribute form: `(tag, perm, id)` entries.
    fn acl(entries: &[(u16, u16, u32)]) -> Vec<u8> {
        let mut b = 2u32.to_le_bytes().to_vec();
        for &(tag, perm, id) in entries {
            b.extend_from_slice(&tag.to_le_bytes());
            b.extend_from_slice(&perm.to_le_bytes());
            b.extend_from_slice(&id.to_le_bytes());
        }
        b
    }

    /// The entries of inode `ino`'s log pages, in log order, with their
    /// flags.
    fn logged(fs: &Fs, ino: u64) -> Vec<(Entry, u16)> {
        let inode = fs.core.get(ino).unwrap();
        let mut out = Vec::new();
        for block in inode.log.owned_blocks() {
            let page = fs
                .core
                .media
                .read_vec(block * BLOCK_SIZE, BLOCK_SIZE as usize)
                .unwrap();
            let mut slot = 0;
            while let Some((e, flags, n)) =
                crate::log::scan::next_entry(&page, &mut slot, ENTRY_SLOTS_PER_PAGE)
            {
                out.push((e, flags));
                slot += n as u64;
            }
        }
        out
    }

    /// The flags of the `SetAttr` entry a chmod to 0o600 of a file with an
    /// access ACL logged, and whether the rewritten list's entry follows.
    fn chmod_with_acl(planted: bool) -> (u16, bool) {
        let dir = tempfile::tempdir().unwrap();
        let fs = mount_observed(
            dir.path(),
            &opts(crate::Sublogs::One),
            Arc::new(Syncs::default()),
        );
        let ino = fs
            .mknod(ROOT_INO, OsStr::new("f"), 0o100644, 0, 0, 0)
            .unwrap()
            .ino;
        // u::rw-, u:1000:rwx, g::r--, m::rwx, o::---
        let list = acl(&[
            (1, 6, u32::MAX),
            (2, 7, 1000),
            (4, 4, u32::MAX),
            (0x10, 7, u32::MAX),
            (0x20, 0, u32::MAX),
        ]);
        let access = OsStr::from_bytes(crate::acl::ACCESS);
        fs.setxattr(ino, access, &list, crate::xattr::XattrSet::Any)
            .unwrap();
        if planted {
            crate::diag::plant_bug(&fs, crate::inode::EngineBug::ModeAndAclApart);
        }
        let md = fs
            .setattr(
                ino,
                &SetAttr {
                    mode: Some(0o600),
                    ..Default::default()
                },
            )
            .unwrap();
        // The same end state either way: the mask closed with the mode.
        assert_eq!(md.mode & 0o7777, 0o600);
        let now = fs.getxattr(ino, access).unwrap();
        assert_eq!(now[4 + 3 * 8 + 2], 0, "the mask follows the mode");
        let entries = logged(&fs, ino);
        let at = entries
            .iter()
            .rposition(|(e, _)| matches!(e, Entry::SetAttr { mode: 0o600, .. }))
            .expect("the chmod's attribute entry");
        let list_follows = matches!(
            entries.get(at + 1),
            Some((Entry::Xattr { name, value: Some(v), .. }, _))
                if name == crate::acl::ACCESS && *v == now
        );
        fs.unmount().unwrap();
        (entries[at].1, list_follows)
    }

    /// [`crate::EngineBug::ModeAndAclApart`]: a chmod logs the mode and
    /// the rewritten ACL as one group (the attribute entry says the group
    /// continues), but as two with the bug.
    #[test]
    fn a_planted_chmod_logs_the_mode_and_the_acl_apart() {
        let (flags, follows) = chmod_with_acl(false);
        assert!(follows, "the list's entry follows the mode's");
        assert_ne!(flags & FLAG_GROUP_CONTINUES, 0, "one group");
        let (flags, follows) = chmod_with_acl(true);
        assert!(follows, "the list's entry follows the mode's");
        assert_eq!(flags & FLAG_GROUP_CONTINUES, 0, "two groups");
    }
}
