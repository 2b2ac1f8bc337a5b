//! The public API, shaped like `std::fs`: an [`Fs`] handle, [`File`]s that
//! many threads share, [`OpenOptions`], [`Metadata`]; plus the inode-level
//! calls the FUSE adapter uses.

use crate::alloc::{BlockAllocator, InodeAllocator};
use crate::core::FsCore;
use crate::error::{Error, Result};
use crate::file::{self, AttrChange};
use crate::index::PageMapping;
use crate::inode::{Attrs, Inode};
use crate::layout::*;
use crate::log::{LogSpace, loc_page};
use crate::media::Media;
use crate::namespace::{self, NewNode};
use crate::options::{MkfsOptions, MountOptions};
use crate::recovery::{self, Rebuilt};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A mounted manyfs pool. Cheap to clone; `Send + Sync`.
#[derive(Clone)]
pub struct Fs {
    core: Arc<FsCore>,
}

/// Attributes of a file, directory or symlink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    /// Inode number.
    pub ino: u64,
    /// Generation of the inode slot (changes when a number is reused).
    pub generation: u32,
    /// What it is.
    pub kind: FileKind,
    /// Size in bytes (directories: number of entries times 32).
    pub size: u64,
    /// Permission bits (`0o7777`).
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Hard links.
    pub nlink: u32,
    /// Last access (manyfs does not update it on reads, like `noatime`).
    pub atime: SystemTime,
    /// Last modification.
    pub mtime: SystemTime,
    /// Last status change.
    pub ctime: SystemTime,
    /// Space used, in 512-byte units.
    pub blocks: u64,
}

impl Metadata {
    /// Whether this is a directory.
    pub fn is_dir(&self) -> bool {
        self.kind == FileKind::Dir
    }
    /// Whether this is a regular file.
    pub fn is_file(&self) -> bool {
        self.kind == FileKind::File
    }
    /// Whether this is a symbolic link.
    pub fn is_symlink(&self) -> bool {
        self.kind == FileKind::Symlink
    }
    /// Size in bytes.
    pub fn len(&self) -> u64 {
        self.size
    }
    /// Whether the size is zero.
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }
}

/// One directory entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// Name.
    pub name: OsString,
    /// Inode number.
    pub ino: u64,
    /// Kind.
    pub kind: FileKind,
}

/// Space and inode usage (`statfs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatFs {
    /// Block size.
    pub block_size: u64,
    /// Blocks in the pool's data region.
    pub total_blocks: u64,
    /// Free blocks.
    pub free_blocks: u64,
    /// Inode slots.
    pub total_inodes: u64,
    /// Free inode slots.
    pub free_inodes: u64,
    /// Longest name.
    pub name_max: u64,
}

/// Attribute changes for [`Fs::setattr`].
#[derive(Debug, Clone, Default)]
pub struct SetAttr {
    /// Permission bits.
    pub mode: Option<u32>,
    /// Owner.
    pub uid: Option<u32>,
    /// Group.
    pub gid: Option<u32>,
    /// Size (truncate or extend).
    pub size: Option<u64>,
    /// Access time.
    pub atime: Option<SystemTime>,
    /// Modification time.
    pub mtime: Option<SystemTime>,
}

fn to_ns(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn from_ns(ns: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(ns)
}

/// Symlink targets as `symlink(2)` takes them: 1 to 4095 bytes.
fn check_symlink_target(t: &[u8]) -> Result<()> {
    if t.is_empty() {
        return Err(Error::NotFound("empty symlink target".into()));
    }
    if t.len() > namespace::MAX_SYMLINK_TARGET {
        return Err(Error::NameTooLong(format!(
            "symlink target of {} bytes (at most {})",
            t.len(),
            namespace::MAX_SYMLINK_TARGET
        )));
    }
    Ok(())
}

fn path_bytes(p: &Path) -> &[u8] {
    p.as_os_str().as_bytes()
}

impl Fs {
    /// Create a pool file at `pool` and mount it.
    ///
    /// A non-empty file already at `pool` is left untouched and the call
    /// fails with [`Error::Exists`], unless `mkfs.replace_existing` is set:
    /// then it is replaced (its contents are lost). A pool mounted by
    /// another process is never replaced (`Busy`).
    pub fn mkfs(pool: &Path, mkfs: &MkfsOptions, mount: &MountOptions) -> Result<Fs> {
        mount.validate()?;
        let sb = Superblock::for_size(mkfs.size, mkfs.bytes_per_inode)?;
        {
            let media =
                Media::create_with(pool, mkfs.size, mount.durability, mkfs.replace_existing)?;
            format(&media, &sb)?;
        }
        Fs::mount(pool, mount)
    }

    /// Mount an existing pool, rebuilding DRAM state from the media.
    pub fn mount(pool: &Path, opts: &MountOptions) -> Result<Fs> {
        Self::mount_recorded(pool, opts, None)
    }

    /// Mount with every persistence event (recovery's included) recorded by
    /// `recorder`, for the crash explorer.
    pub fn mount_recorded(
        pool: &Path,
        opts: &MountOptions,
        recorder: Option<Arc<crate::media::Recorder>>,
    ) -> Result<Fs> {
        opts.validate()?;
        let mut media = Media::open(pool, opts.durability, !opts.read_only)?;
        if let Some(r) = recorder {
            media.attach_recorder(r);
        }
        let rebuilt = recovery::rebuild(&media)?;
        let core = build_core(media, rebuilt, opts.clone())?;
        Ok(Fs {
            core: Arc::new(core),
        })
    }

    /// Make everything durable and unmount (also happens when the last
    /// handle is dropped, without the error report).
    pub fn unmount(self) -> Result<()> {
        self.core.sync()
    }

    /// With a recorder attached: record the marker `tag`, then a crash point
    /// (the state a power cut right after the marker leaves). Without one:
    /// nothing.
    pub fn record_marker(&self, tag: u64) {
        if let Some(r) = self.core.media.recorder() {
            r.note(tag);
            r.crash_point(|off| {
                let mut l = [0u8; 64];
                let _ = self.core.media.read(off, &mut l);
                l
            });
        }
    }

    /// Make every later durability point fail as a failing `msync` would
    /// (for testing how errors surface). After the first failure the file
    /// system refuses changes with EIO.
    pub fn inject_sync_failure(&self) {
        self.core.media.inject_sync_failure();
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

    /// Make all written data durable (a durability point in `file` mode).
    pub fn sync(&self) -> Result<()> {
        self.core.sync()
    }

    /// Space and inode usage.
    pub fn statfs(&self) -> StatFs {
        let sb = &self.core.sb;
        StatFs {
            block_size: BLOCK_SIZE,
            total_blocks: sb.total_blocks - sb.data_start,
            free_blocks: self.core.blocks.free_blocks(),
            total_inodes: sb.inode_count - 2,
            free_inodes: self.core.inode_numbers.free_count(),
            name_max: MAX_NAME_LEN as u64,
        }
    }

    fn meta(&self, inode: &Inode) -> Metadata {
        let a = inode.attrs.lock().clone();
        let (size, blocks, mtime) = match (&inode.file, &inode.dir) {
            (Some(f), _) => (
                f.size(),
                file::allocated_bytes(f) / 512,
                a.mtime_ns.max(inode.log.last_mtime_ns()),
            ),
            (None, Some(d)) => (d.state.read().entries.len() as u64 * 32, 8, a.mtime_ns),
            _ => (0, 0, a.mtime_ns),
        };
        Metadata {
            ino: inode.ino,
            generation: inode.generation,
            kind: inode.kind,
            size,
            mode: a.mode,
            uid: a.uid,
            gid: a.gid,
            nlink: a.nlink,
            atime: from_ns(a.atime_ns),
            mtime: from_ns(mtime),
            ctime: from_ns(a.ctime_ns.max(mtime)),
            blocks,
        }
    }

    // ---- inode-level API -------------------------------------------------

    /// Look `name` up in directory `parent`.
    pub fn lookup(&self, parent: u64, name: &OsStr) -> Result<Metadata> {
        let dir = self.core.get(parent)?;
        let child = namespace::lookup(&self.core, &dir, name.as_bytes())?;
        Ok(self.meta(&child))
    }

    /// Attributes of inode `ino`.
    pub fn stat(&self, ino: u64) -> Result<Metadata> {
        let i = self.core.get(ino)?;
        Ok(self.meta(&i))
    }

    /// Create a regular file (fails with `Exists` if the name is taken).
    pub fn create(
        &self,
        parent: u64,
        name: &OsStr,
        mode: u32,
        uid: u32,
        gid: u32,
    ) -> Result<Metadata> {
        self.make(parent, name, NewNode::File, mode, uid, gid)
    }

    /// Create a directory.
    pub fn mkdir(
        &self,
        parent: u64,
        name: &OsStr,
        mode: u32,
        uid: u32,
        gid: u32,
    ) -> Result<Metadata> {
        self.make(parent, name, NewNode::Dir, mode, uid, gid)
    }

    fn make(
        &self,
        parent: u64,
        name: &OsStr,
        node: NewNode<'_>,
        mode: u32,
        uid: u32,
        gid: u32,
    ) -> Result<Metadata> {
        let dir = self.core.get(parent)?;
        let i = namespace::create(&self.core, &dir, name.as_bytes(), node, mode, uid, gid)?;
        Ok(self.meta(&i))
    }

    /// Create a symbolic link `name` -> `target`.
    pub fn symlink_at(
        &self,
        parent: u64,
        name: &OsStr,
        target: &Path,
        uid: u32,
        gid: u32,
    ) -> Result<Metadata> {
        let t = path_bytes(target);
        check_symlink_target(t)?;
        self.make(parent, name, NewNode::Symlink(t), 0o777, uid, gid)
    }

    /// Add the name `new_name` in `new_parent` for inode `ino`.
    pub fn link_at(&self, ino: u64, new_parent: u64, new_name: &OsStr) -> Result<Metadata> {
        let inode = self.core.get(ino)?;
        let dir = self.core.get(new_parent)?;
        namespace::link(&self.core, &inode, &dir, new_name.as_bytes())?;
        Ok(self.meta(&inode))
    }

    /// Remove a non-directory name.
    pub fn unlink_at(&self, parent: u64, name: &OsStr) -> Result<()> {
        let dir = self.core.get(parent)?;
        namespace::unlink(&self.core, &dir, name.as_bytes(), None)
    }

    /// Remove an empty directory.
    pub fn rmdir_at(&self, parent: u64, name: &OsStr) -> Result<()> {
        let dir = self.core.get(parent)?;
        namespace::rmdir(&self.core, &dir, name.as_bytes(), None)
    }

    /// Rename, replacing a compatible target unless `no_replace`.
    pub fn rename_at(
        &self,
        parent: u64,
        name: &OsStr,
        new_parent: u64,
        new_name: &OsStr,
        no_replace: bool,
    ) -> Result<()> {
        let src = self.core.get(parent)?;
        let dst = self.core.get(new_parent)?;
        namespace::rename(
            &self.core,
            &src,
            name.as_bytes(),
            &dst,
            new_name.as_bytes(),
            no_replace,
            None,
        )
    }

    /// Target of symlink `ino`.
    pub fn readlink_ino(&self, ino: u64) -> Result<PathBuf> {
        let inode = self.core.get(ino)?;
        let _pin = crate::core::PinGuard::new(&self.core, &inode)?;
        Ok(PathBuf::from(OsString::from_vec(namespace::read_link(
            &self.core, &inode,
        )?)))
    }

    /// Entries of directory `ino` (without `.` and `..`), sorted by name.
    pub fn readdir_ino(&self, ino: u64) -> Result<Vec<DirEntry>> {
        let dir = self.core.get(ino)?;
        Ok(namespace::list(&dir)?
            .into_iter()
            .map(|(name, c)| DirEntry {
                name: OsString::from_vec(name),
                ino: c.ino,
                kind: c.kind,
            })
            .collect())
    }

    /// Change attributes (chmod, chown, truncate, utimes).
    pub fn setattr(&self, ino: u64, attr: &SetAttr) -> Result<Metadata> {
        let inode = self.core.get(ino)?;
        let _pin = crate::core::PinGuard::new(&self.core, &inode)?;
        if let Some(size) = attr.size {
            if inode.kind == FileKind::Dir {
                return Err(Error::IsDir(format!("inode {ino}")));
            }
            file::set_len(&self.core, &inode, size)?;
        }
        let change = AttrChange {
            mode: attr.mode,
            uid: attr.uid,
            gid: attr.gid,
            atime_ns: attr.atime.map(to_ns),
            mtime_ns: attr.mtime.map(to_ns),
        };
        if change.mode.is_some()
            || change.uid.is_some()
            || change.gid.is_some()
            || change.atime_ns.is_some()
            || change.mtime_ns.is_some()
        {
            file::set_attrs(&self.core, &inode, &change)?;
        }
        Ok(self.meta(&inode))
    }

    /// Open inode `ino` for reading and/or writing.
    pub fn open_ino(&self, ino: u64, read: bool, write: bool) -> Result<File> {
        let inode = self.core.get(ino)?;
        if inode.kind == FileKind::Dir && write {
            return Err(Error::IsDir(format!("inode {ino}")));
        }
        if write {
            self.core.check_writable()?;
        }
        File::new(self.core.clone(), inode, read, write, false)
    }

    // ---- path API ----------------------------------------------------------

    /// Open a file by path.
    pub fn open(&self, path: impl AsRef<Path>, opts: &OpenOptions) -> Result<File> {
        opts.open(self, path)
    }

    /// Attributes, following a final symlink.
    pub fn metadata(&self, path: impl AsRef<Path>) -> Result<Metadata> {
        let i = namespace::resolve(&self.core, path_bytes(path.as_ref()), true)?;
        Ok(self.meta(&i))
    }

    /// Attributes, not following a final symlink.
    pub fn symlink_metadata(&self, path: impl AsRef<Path>) -> Result<Metadata> {
        let i = namespace::resolve(&self.core, path_bytes(path.as_ref()), false)?;
        Ok(self.meta(&i))
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

    fn ctx(e: Error, path: &Path) -> Error {
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
        namespace::rmdir(&self.core, &split.dir, &split.name, None).map_err(|e| Self::ctx(e, p))
    }

    /// Remove a file or symlink.
    pub fn remove_file(&self, path: impl AsRef<Path>) -> Result<()> {
        let p = path.as_ref();
        let split = self.parent_of(p)?;
        if split.is_dot() {
            return Err(Error::IsDir(p.display().to_string()));
        }
        if split.trailing_slash {
            // "name/" means the directory `name` resolves to: unlink refuses
            // a directory, and anything else is not one.
            let target = namespace::resolve(&self.core, path_bytes(p), true);
            return Err(match target {
                Ok(i) if i.is_dir() => Error::IsDir(p.display().to_string()),
                Ok(_) => Error::NotDir(p.display().to_string()),
                Err(e) => e,
            });
        }
        namespace::unlink(&self.core, &split.dir, &split.name, None).map_err(|e| Self::ctx(e, p))
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

    /// Change permission bits.
    pub fn set_permissions(&self, path: impl AsRef<Path>, mode: u32) -> Result<()> {
        let i = namespace::resolve(&self.core, path_bytes(path.as_ref()), true)?;
        self.setattr(
            i.ino,
            &SetAttr {
                mode: Some(mode),
                ..Default::default()
            },
        )
        .map(|_| ())
    }

    /// Change access and modification times.
    pub fn set_times(
        &self,
        path: impl AsRef<Path>,
        atime: SystemTime,
        mtime: SystemTime,
    ) -> Result<()> {
        let i = namespace::resolve(&self.core, path_bytes(path.as_ref()), true)?;
        self.setattr(
            i.ino,
            &SetAttr {
                atime: Some(atime),
                mtime: Some(mtime),
                ..Default::default()
            },
        )
        .map(|_| ())
    }

    /// Truncate or extend the file at `path`.
    pub fn set_len(&self, path: impl AsRef<Path>, len: u64) -> Result<()> {
        let i = namespace::resolve(&self.core, path_bytes(path.as_ref()), true)?;
        self.setattr(
            i.ino,
            &SetAttr {
                size: Some(len),
                ..Default::default()
            },
        )
        .map(|_| ())
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

    /// Rebuild the file system from the media, as a fresh mount would, and
    /// compare it with the live DRAM state: same names, sizes, link counts,
    /// page mappings and free space. Returns the differences (empty when
    /// consistent). Quiesce writers first for an exact comparison.
    pub fn verify(&self) -> Result<Vec<String>> {
        let rebuilt = recovery::rebuild(&self.core.media)?;
        Ok(compare(&self.core, &rebuilt))
    }

    /// Statistics for `manyfs inspect`: (inodes, log pages, data pages).
    pub fn usage(&self) -> (u64, u64, u64) {
        let mut logs = 0;
        let mut data = 0;
        let inodes = self.core.all_inodes();
        for i in &inodes {
            logs += i.log.page_count() as u64;
            if let Some(f) = &i.file {
                data += f.index.mapped().len() as u64;
            }
        }
        (inodes.len() as u64, logs, data)
    }
}

/// Write a fresh superblock, backup, journal and root directory.
fn format(media: &Media, sb: &Superblock) -> Result<()> {
    let zero = vec![0u8; BLOCK_SIZE as usize];
    for b in 0..sb.data_start + 1 {
        media.store(b * BLOCK_SIZE, &zero)?;
    }
    let now = crate::time::now_ns();
    // The root directory belongs to whoever creates the pool, so a user can
    // mount a pool they made without root.
    // SAFETY: getuid/getgid have no preconditions and cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let root = InodeRecord {
        generation: 1,
        kind: FileKind::Dir,
        mode: 0o755,
        uid,
        gid,
        log_array: sb.data_start,
        atime_ns: now,
        mtime_ns: now,
        ctime_ns: now,
    };
    media.store(sb.inode_offset(ROOT_INO), &root.encode())?;
    media.persist(0, ((sb.data_start + 1) * BLOCK_SIZE) as usize)?;
    let enc = sb.encode();
    media.store(BACKUP_SUPERBLOCK_BLOCK * BLOCK_SIZE, &enc)?;
    media.persist(BACKUP_SUPERBLOCK_BLOCK * BLOCK_SIZE, enc.len())?;
    // The primary superblock goes last: a pool whose mkfs was interrupted
    // has no valid primary.
    media.store(SUPERBLOCK_BLOCK * BLOCK_SIZE, &enc)?;
    media.persist(0, enc.len())?;
    media.sync_all()
}

fn build_core(media: Media, rebuilt: Rebuilt, opts: MountOptions) -> Result<FsCore> {
    let sb = rebuilt.sb.clone();
    let writable = !opts.read_only;
    if rebuilt.primary_superblock_damaged && writable {
        let enc = sb.encode();
        media.store(0, &enc)?;
        media.persist(0, enc.len())?;
    }
    let mut core = FsCore::new(media, sb.clone(), opts);
    let pools = crate::cpu::count();
    let blocks = BlockAllocator::new(sb.data_start, sb.total_blocks, pools);
    for (s, n) in rebuilt.free_extents() {
        blocks.free(s, n);
    }
    let free_inos = (ROOT_INO + 1..sb.inode_count).filter(|i| !rebuilt.inodes.contains_key(i));
    core.set_allocators(blocks, InodeAllocator::new(free_inos, pools));

    let mut voids = Vec::new();
    let mut tails = Vec::new();
    for (&ino, node) in &rebuilt.inodes {
        let sublogs = node
            .sublogs
            .iter()
            .map(|s| {
                voids.extend(s.incomplete.iter().copied());
                if let Some(&last) = s.pages.last() {
                    tails.push((last, s.next_slot));
                }
                (s.index, s.to_sublog())
            })
            .collect();
        let attrs = Attrs {
            mode: node.mode,
            uid: node.uid,
            gid: node.gid,
            atime_ns: node.atime_ns,
            mtime_ns: node.mtime_ns,
            ctime_ns: node.ctime_ns,
            nlink: node.nlink,
        };
        let inode = core.make_inode(ino, &node.record, attrs, sublogs);
        inode.attr_seq.store(node.attr_seq, Ordering::Release);
        inode
            .attr_entries
            .store(node.attr_entries, Ordering::Relaxed);
        inode.parent.store(node.parent, Ordering::Release);
        for (&page, &n) in &node.live {
            if let Some(c) = core.live_counter(page) {
                c.store(n, Ordering::Relaxed);
            }
        }
        if let (Some(f), Some(fs)) = (&inode.file, &node.file) {
            for (&pg, &(block, entry, version)) in &fs.pages {
                f.index.slot(pg).set(PageMapping {
                    block,
                    entry,
                    version,
                });
            }
            f.size.store(fs.size, Ordering::Release);
            *f.size_definer.lock() = fs.size_definer;
        }
        if let (Some(d), Some(ds)) = (&inode.dir, &node.dir) {
            let mut st = d.state.write();
            st.entries = ds.entries.clone();
            st.seq = ds.seq;
            st.log_entries = ds.log_entries;
        }
        core.insert(Arc::new(inode));
    }
    if writable {
        // Void abandoned group entries so later appends cannot complete them.
        for (loc, _) in voids {
            let at = loc_page(loc) * BLOCK_SIZE + crate::log::loc_slot(loc) * SLOT_SIZE + 56;
            core.media
                .store_u64(at, u64::from(crate::log::VOID_MAGIC) << 32)?;
            core.media.flush(at, 8)?;
        }
        // Clear whatever an interrupted append left past each tail.
        for (page, next_slot) in tails {
            let off = page * BLOCK_SIZE + next_slot * SLOT_SIZE;
            let len =
                ((ENTRY_SLOTS_PER_PAGE - next_slot.min(ENTRY_SLOTS_PER_PAGE)) * SLOT_SIZE) as usize;
            if len > 0 && core.media.read_vec(off, len)?.iter().any(|&b| b != 0) {
                core.media.zero(off, len)?;
                core.media.flush(off, len)?;
            }
        }
        core.media.fence();
        if let Some(rec) = &rebuilt.pending_rename {
            redo_rename(&core, rec)?;
        }
        core.media.sync_all()?;
    }
    Ok(core)
}

fn redo_rename(core: &FsCore, rec: &namespace::journal::RenameRecord) -> Result<()> {
    // Both entries are idempotent: adding a name that is there replaces it
    // with itself; removing a name that is gone (or names another inode) is
    // ignored by replay.
    // The replay applied the rename to whichever of the two directories is
    // reachable; persist exactly that.
    if let Ok(dst) = core.get(rec.dst_dir)
        && dst.is_dir()
    {
        append_dir_entry(core, &dst, &|seq| Entry::DirAdd {
            seq,
            ino: rec.ino,
            generation: rec.generation,
            kind: rec.kind,
            txid: rec.txid,
            name: rec.dst_name.clone(),
        })?;
    }
    if let Ok(src) = core.get(rec.src_dir)
        && src.is_dir()
    {
        append_dir_entry(core, &src, &|seq| Entry::DirRemove {
            seq,
            ino: rec.ino,
            txid: rec.txid,
            name: rec.src_name.clone(),
        })?;
    }
    namespace::journal::finish(&core.media)
}

fn append_dir_entry(core: &FsCore, dir: &Inode, make: &dyn Fn(u64) -> Entry) -> Result<()> {
    let d = dir.dir()?;
    let mut st = d.state.write();
    let seq = st.seq + 1;
    dir.log.append(core, 0, &[(make(seq), 1)], 0)?;
    st.seq = seq;
    Ok(())
}

fn compare(core: &FsCore, rebuilt: &Rebuilt) -> Vec<String> {
    let mut diffs = Vec::new();
    let live = core.all_inodes();
    let live_reachable: Vec<_> = live.iter().filter(|i| i.nlink() > 0).collect();
    if live_reachable.len() != rebuilt.inodes.len() {
        diffs.push(format!(
            "{} reachable inodes in memory, {} rebuilt from media",
            live_reachable.len(),
            rebuilt.inodes.len()
        ));
    }
    for inode in live_reachable {
        let Some(node) = rebuilt.inodes.get(&inode.ino) else {
            diffs.push(format!("inode {} missing from media", inode.ino));
            continue;
        };
        if node.nlink != inode.nlink() {
            diffs.push(format!(
                "inode {}: nlink {} in memory, {} on media",
                inode.ino,
                inode.nlink(),
                node.nlink
            ));
        }
        if let (Some(f), Some(fs)) = (&inode.file, &node.file) {
            if f.size() != fs.size {
                diffs.push(format!(
                    "inode {}: size {} in memory, {} on media",
                    inode.ino,
                    f.size(),
                    fs.size
                ));
            }
            let mem: Vec<(u64, u64)> = f
                .index
                .mapped()
                .into_iter()
                .map(|(p, m)| (p, m.block))
                .collect();
            let media: Vec<(u64, u64)> = fs.pages.iter().map(|(&p, &(b, _, _))| (p, b)).collect();
            if mem != media {
                diffs.push(format!(
                    "inode {}: page map differs ({} pages in memory, {} on media)",
                    inode.ino,
                    mem.len(),
                    media.len()
                ));
            }
        }
        if let (Some(d), Some(ds)) = (&inode.dir, &node.dir)
            && d.state.read().entries != ds.entries
        {
            diffs.push(format!("directory {}: entries differ", inode.ino));
        }
    }
    // Orphans still open in memory hold space the media no longer reaches.
    let open_orphans: u64 = live
        .iter()
        .filter(|i| i.nlink() == 0 && !i.freed.load(Ordering::Acquire))
        .map(|i| {
            i.log.owned_blocks().len() as u64
                + i.file.as_ref().map_or(0, |f| f.index.mapped().len() as u64)
        })
        .sum();
    let free_mem = core.blocks.free_blocks();
    let free_media = (rebuilt.data_blocks() - rebuilt.used_blocks()).saturating_sub(open_orphans);
    if free_mem != free_media {
        diffs.push(format!(
            "free blocks: {free_mem} in memory, {free_media} rebuilt from media"
        ));
    }
    diffs
}

/// A handle to an open file. Clone it or share it by reference across
/// threads: reads and writes of disjoint ranges proceed in parallel.
#[derive(Clone)]
pub struct File {
    handle: Arc<Handle>,
}

struct Handle {
    core: Arc<FsCore>,
    inode: Arc<Inode>,
    read: bool,
    write: bool,
    append: bool,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.core.unpin(&self.inode);
    }
}

impl File {
    fn new(
        core: Arc<FsCore>,
        inode: Arc<Inode>,
        read: bool,
        write: bool,
        append: bool,
    ) -> Result<File> {
        inode.pin()?;
        Ok(File {
            handle: Arc::new(Handle {
                core,
                inode,
                read,
                write,
                append,
            }),
        })
    }

    /// Inode number.
    pub fn ino(&self) -> u64 {
        self.handle.inode.ino
    }

    /// Read up to `buf.len()` bytes at `off`; 0 at end of file.
    pub fn read_at(&self, buf: &mut [u8], off: u64) -> Result<usize> {
        if !self.handle.read {
            return Err(Error::BadHandle("file not opened for reading"));
        }
        file::read(&self.handle.core, &self.handle.inode, buf, off)
    }

    /// Fill `buf` from `off`, failing at end of file.
    pub fn read_exact_at(&self, buf: &mut [u8], off: u64) -> Result<()> {
        let n = self.read_at(buf, off)?;
        if n < buf.len() {
            return Err(Error::InvalidArgument(format!(
                "read_exact_at: end of file after {n} bytes"
            )));
        }
        Ok(())
    }

    /// Write `buf` at `off` (at end of file if opened with append).
    pub fn write_at(&self, buf: &[u8], off: u64) -> Result<usize> {
        if !self.handle.write {
            return Err(Error::BadHandle("file not opened for writing"));
        }
        if self.handle.append {
            self.append(buf)?;
            return Ok(buf.len());
        }
        file::write(&self.handle.core, &self.handle.inode, buf, off)
    }

    /// Write all of `buf` at `off`.
    pub fn write_all_at(&self, buf: &[u8], off: u64) -> Result<()> {
        self.write_at(buf, off).map(|_| ())
    }

    /// Append `buf` at end of file; returns the offset written at.
    pub fn append(&self, buf: &[u8]) -> Result<u64> {
        if !self.handle.write {
            return Err(Error::BadHandle("file not opened for writing"));
        }
        file::append(&self.handle.core, &self.handle.inode, buf)
    }

    /// Truncate or extend.
    pub fn set_len(&self, len: u64) -> Result<()> {
        if !self.handle.write {
            return Err(Error::BadHandle("file not opened for writing"));
        }
        file::set_len(&self.handle.core, &self.handle.inode, len)
    }

    /// Make sure the file is at least `offset + len` bytes long, extending
    /// it with zeros if needed (what `fallocate` mode 0 guarantees about the
    /// size). Atomic with respect to concurrent writes and truncates.
    pub fn allocate(&self, offset: u64, len: u64) -> Result<()> {
        if !self.handle.write {
            return Err(Error::BadHandle("file not opened for writing"));
        }
        let end = offset
            .checked_add(len)
            .ok_or_else(|| Error::FileTooLarge(format!("allocate({offset}, {len})")))?;
        file::extend_to(&self.handle.core, &self.handle.inode, end)
    }

    /// Make the file's data and metadata durable.
    pub fn sync_all(&self) -> Result<()> {
        self.handle.core.sync()
    }

    /// Make the file's data durable.
    pub fn sync_data(&self) -> Result<()> {
        self.handle.core.sync()
    }

    /// Attributes.
    pub fn metadata(&self) -> Result<Metadata> {
        Ok(Fs {
            core: self.handle.core.clone(),
        }
        .meta(&self.handle.inode))
    }
}

impl std::os::unix::fs::FileExt for File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        File::read_at(self, buf, offset).map_err(Into::into)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<usize> {
        File::write_at(self, buf, offset).map_err(Into::into)
    }
}

/// Options for opening a file, as in `std::fs::OpenOptions`.
#[derive(Debug, Clone)]
pub struct OpenOptions {
    read: bool,
    write: bool,
    append: bool,
    create: bool,
    create_new: bool,
    truncate: bool,
    mode: u32,
}

impl Default for OpenOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl OpenOptions {
    /// All options off; mode 0o644 for created files.
    pub fn new() -> Self {
        OpenOptions {
            read: false,
            write: false,
            append: false,
            create: false,
            create_new: false,
            truncate: false,
            mode: 0o644,
        }
    }
    /// Open for reading.
    pub fn read(&mut self, v: bool) -> &mut Self {
        self.read = v;
        self
    }
    /// Open for writing.
    pub fn write(&mut self, v: bool) -> &mut Self {
        self.write = v;
        self
    }
    /// Every write goes to the end of file.
    pub fn append(&mut self, v: bool) -> &mut Self {
        self.append = v;
        if v {
            self.write = true;
        }
        self
    }
    /// Create the file if missing.
    pub fn create(&mut self, v: bool) -> &mut Self {
        self.create = v;
        self
    }
    /// Create the file, failing if it exists.
    pub fn create_new(&mut self, v: bool) -> &mut Self {
        self.create_new = v;
        self
    }
    /// Truncate to zero length.
    pub fn truncate(&mut self, v: bool) -> &mut Self {
        self.truncate = v;
        self
    }
    /// Permission bits for a created file.
    pub fn mode(&mut self, mode: u32) -> &mut Self {
        self.mode = mode;
        self
    }

    /// Open `path` in `fs`. A final symlink is followed, also when it
    /// dangles and the file is to be created: the file is created where the
    /// link points, as `open(2)` does.
    pub fn open(&self, fs: &Fs, path: impl AsRef<Path>) -> Result<File> {
        let p = path.as_ref();
        let core = &fs.core;
        if (self.truncate || self.create || self.create_new) && !self.write {
            return Err(Error::InvalidArgument(
                "create/truncate need write access".into(),
            ));
        }
        let shown = || p.display().to_string();
        let mut budget = namespace::MAX_SYMLINKS;
        let mut start = core.get(ROOT_INO)?;
        let mut cur: Vec<u8> = path_bytes(p).to_vec();
        let inode = loop {
            let creating = self.create || self.create_new;
            let split = match namespace::resolve_parent_at(core, start.clone(), &cur, &mut budget) {
                // O_CREAT with a trailing slash: a directory was named, and
                // open(2) does not make directories.
                Ok(s) if creating && s.trailing_slash => return Err(Error::IsDir(shown())),
                Err(Error::NameTooLong(_)) if creating && cur.ends_with(b"/") => {
                    return Err(Error::IsDir(shown()));
                }
                Ok(s) => s,
                // "/" names no entry of a parent: it is the root itself.
                Err(Error::InvalidArgument(_))
                    if cur.iter().all(|&c| c == b'/') && !cur.is_empty() =>
                {
                    if self.create_new {
                        return Err(Error::Exists(shown()));
                    }
                    break core.get(ROOT_INO)?;
                }
                Err(e) => return Err(Fs::ctx(e, p)),
            };
            match namespace::lookup(core, &split.dir, &split.name) {
                Ok(i) if i.kind == FileKind::Symlink => {
                    if self.create_new {
                        return Err(Error::Exists(shown()));
                    }
                    if budget == 0 {
                        return Err(Error::Loop(shown()));
                    }
                    budget -= 1;
                    let mut target = namespace::read_link(core, &i)?;
                    if split.trailing_slash {
                        target.push(b'/');
                    }
                    start = split.dir.clone();
                    cur = target;
                }
                Ok(i) => {
                    if self.create_new {
                        return Err(Error::Exists(shown()));
                    }
                    if split.trailing_slash && !i.is_dir() {
                        return Err(Error::NotDir(shown()));
                    }
                    break i;
                }
                Err(Error::NotFound(_)) if self.create || self.create_new => {
                    if split.trailing_slash {
                        return Err(Error::IsDir(shown()));
                    }
                    match namespace::create(
                        core,
                        &split.dir,
                        &split.name,
                        NewNode::File,
                        self.mode,
                        0,
                        0,
                    ) {
                        Ok(i) => break i,
                        // Someone else created it meanwhile: look again.
                        Err(Error::Exists(_)) if !self.create_new => {}
                        Err(e) => return Err(Fs::ctx(e, p)),
                    }
                }
                Err(e) => return Err(Fs::ctx(e, p)),
            }
        };
        if inode.is_dir() && (self.write || self.append) {
            return Err(Error::IsDir(p.display().to_string()));
        }
        if self.write {
            core.check_writable()?;
        }
        let f = File::new(
            core.clone(),
            inode,
            self.read || !self.write,
            self.write,
            self.append,
        )
        .map_err(|e| Fs::ctx(e, p))?;
        if self.truncate && f.handle.inode.file()?.size() > 0 {
            f.set_len(0)?;
        }
        Ok(f)
    }
}
