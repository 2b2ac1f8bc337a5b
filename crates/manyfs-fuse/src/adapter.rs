//! The FUSE request handlers: each kernel request becomes one call of the
//! library's inode-level API.
//!
//! Files are opened with `FOPEN_DIRECT_IO | FOPEN_PARALLEL_DIRECT_WRITES`:
//! the kernel keeps no page cache of file data (manyfs *is* the cache: its
//! data lives in the mapped pool), and writes that do not extend a file are
//! sent to the daemon under a shared inode lock, so several processes writing
//! disjoint ranges of one file reach the library's range lock concurrently.
//!
//! Thread placement accounts the file data a `read` or `write` request
//! moves to the request's caller, not to the worker serving it
//! ([`manyfs::lowlevel::on_behalf_of`]): the planner sees the programs'
//! threads, and `thread_placement=migrate` moves them (see
//! `docs/mount.md` for what that achieves per transport). Page-cache
//! writeback (`-o writeback_cache`) is accounted to nobody.

use manyfs::lowlevel::FileExt;
use manyfs::lowlevel::InodeOps;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::Arc;
#[cfg(feature = "test-probes")]
use std::sync::atomic::AtomicU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use crossbeam_utils::CachePadded;
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, InitFlags,
    KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite,
    ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use manyfs::lowlevel::Rename;
use manyfs::lowlevel::SetAttr;
use manyfs::lowlevel::XattrSet;
use manyfs::lowlevel::on_behalf_of;
use manyfs::{DirEntry, File, FileKind, Fs, Metadata};
use parking_lot::{Mutex, RwLock};

use crate::groups::caller_in_group;
use crate::poison::{self, ErrorReply, Poison, ShutDown};

/// How long the kernel may cache attributes, directory entries and the
/// absence of names, unless [`ManyFuse::with_ttl`] says otherwise. Every
/// change made through the mount passes through the kernel, which updates or
/// invalidates its cache for it, so the TTL only bounds how long changes made
/// by other in-process users of the same [`Fs`] (a clone kept by a program
/// that mounted it) can go unseen. The `manyfs mount` daemon is the pool's
/// only user.
pub const DEFAULT_TTL: Duration = Duration::from_secs(24 * 3600);

/// Open-reply flags: no page cache, parallel non-extending direct writes.
const FOPEN_FLAGS: FopenFlags =
    FopenFlags::FOPEN_DIRECT_IO.union(FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES);

/// Open-reply flags with `-o writeback_cache`: file data goes through the
/// kernel's page cache, which the daemon's writes and truncates keep
/// coherent (the daemon is the pool's only user), so it survives a close.
const FOPEN_FLAGS_CACHED: FopenFlags = FopenFlags::FOPEN_KEEP_CACHE;

/// Largest read served in one request.
const MAX_READ: usize = 64 << 20;

/// Largest read buffer a serving thread keeps between requests (the
/// kernel's reads are at most 1 MiB); a larger read gets a buffer of its own.
const KEPT_READ_BUFFER: usize = 1 << 20;

thread_local! {
    /// The serving thread's read buffer (see `ManyFuse::do_read`).
    static READ_BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Number of shards of the open-handle table (a power of two).
const HANDLE_SHARDS: usize = 64;

/// Counters that the adapter publishes about itself. Shared between the
/// serving threads and whoever mounted the file system
/// ([`crate::MountedFs::stats`]).
#[derive(Debug, Default)]
pub struct FuseStats {
    /// Highest number of writes ever seen in flight at once on one inode.
    #[cfg(feature = "test-probes")]
    max_inflight_writes: AtomicU32,
    /// Requests whose handler panicked (answered with EIO instead).
    panics: AtomicU64,
    /// `getxattr` requests received.
    #[cfg(feature = "test-probes")]
    getxattrs: AtomicU64,
}

impl FuseStats {
    /// The largest number of `write` requests that were ever being served at
    /// the same time *for one inode*. A value above 1 proves that writes to
    /// one file from several processes ran concurrently in the daemon.
    ///
    /// Only with the `test-probes` feature (the tests' builds): counting
    /// writes in flight puts a shared cache line on the write path of every
    /// writer of a file, which product builds do not pay for.
    #[cfg(feature = "test-probes")]
    pub fn max_concurrent_writes(&self) -> u32 {
        self.max_inflight_writes.load(Ordering::Relaxed)
    }

    /// Number of `getxattr` requests the kernel sent (`test-probes` builds
    /// only: with extended attributes on, the kernel sends one before every
    /// buffered write, so the count is a shared line on that path).
    #[cfg(feature = "test-probes")]
    pub fn getxattr_requests(&self) -> u64 {
        self.getxattrs.load(Ordering::Relaxed)
    }

    /// Number of requests whose handler panicked; each was answered with
    /// `EIO`, and the first shut the mount down (see [`crate::poison`]).
    /// Should always be 0.
    pub fn handler_panics(&self) -> u64 {
        self.panics.load(Ordering::Relaxed)
    }

    #[cfg(feature = "test-probes")]
    fn observe_inflight(&self, n: u32) {
        // Read first so the common case (no new maximum) does not write the
        // shared line.
        if n > self.max_inflight_writes.load(Ordering::Relaxed) {
            self.max_inflight_writes.fetch_max(n, Ordering::Relaxed);
        }
    }
}

/// In-flight write counter of one inode, shared by all its open handles
/// (`test-probes` builds only).
#[cfg(feature = "test-probes")]
#[derive(Debug, Default)]
struct InodeIo {
    inflight: AtomicU32,
}

/// An open regular file.
struct FileHandleState {
    file: File,
    append: bool,
    #[cfg(feature = "test-probes")]
    io: Arc<InodeIo>,
}

/// An open directory: a snapshot of its entries taken at `opendir` (and
/// again on every `readdir` from offset 0, i.e. `rewinddir`), so offsets stay
/// stable while entries are added or removed during the listing.
struct DirHandleState {
    ino: u64,
    parent: u64,
    entries: Mutex<Arc<Vec<DirEntry>>>,
}

enum Handle {
    File(FileHandleState),
    Dir(DirHandleState),
}

/// One shard of the handle table, on its own cache line(s).
type Shard = CachePadded<RwLock<HashMap<u64, Arc<Handle>>>>;

/// Sharded map of open handles (`fh -> handle`), so opens and lookups from
/// different threads rarely share a lock word.
struct HandleTable {
    shards: Box<[Shard]>,
}

/// Bits of a handle number that count handles within one serving thread.
const FH_LOCAL_BITS: u32 = 40;

/// Source of per-thread handle-number prefixes (taken once per thread).
static FH_THREAD: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// (thread prefix, next local number) of this serving thread: handle
    /// numbers are allocated without touching a shared counter.
    static FH_NEXT: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
}

/// A handle number unique in this process: a per-thread prefix and a
/// per-thread count.
fn next_fh() -> u64 {
    FH_NEXT.with(|c| {
        let (mut prefix, mut n) = c.get();
        if prefix == 0 || n >= (1 << FH_LOCAL_BITS) {
            prefix = FH_THREAD.fetch_add(1, Ordering::Relaxed);
            n = 0;
        }
        c.set((prefix, n + 1));
        (prefix << FH_LOCAL_BITS) | n
    })
}

impl HandleTable {
    fn new() -> HandleTable {
        HandleTable {
            shards: (0..HANDLE_SHARDS)
                .map(|_| CachePadded::new(RwLock::new(HashMap::new())))
                .collect(),
        }
    }

    fn shard(&self, fh: u64) -> &Shard {
        // Mix the thread prefix in, so each thread's handles spread over
        // all shards.
        let h = fh ^ (fh >> FH_LOCAL_BITS);
        &self.shards[(h as usize) & (HANDLE_SHARDS - 1)]
    }

    fn insert(&self, h: Handle) -> u64 {
        let fh = next_fh();
        self.shard(fh).write().insert(fh, Arc::new(h));
        fh
    }

    fn get(&self, fh: u64) -> Option<Arc<Handle>> {
        self.shard(fh).read().get(&fh).cloned()
    }

    fn remove(&self, fh: u64) -> Option<Arc<Handle>> {
        self.shard(fh).write().remove(&fh)
    }

    fn clear(&self) {
        for s in self.shards.iter() {
            s.write().clear();
        }
    }

    fn len(&self) -> usize {
        self.shards.iter().map(|s| s.read().len()).sum()
    }
}

/// What the adapter hands back to the code that mounted it once the session
/// ends: the statistics and the outcome of the library's unmount.
#[derive(Debug, Default)]
pub struct Shared {
    /// Live counters.
    pub stats: FuseStats,
    unmount: Mutex<Option<manyfs::Result<()>>>,
    poison: Poison,
    /// What `-o uring` agreed with the kernel at `INIT` (`None` without it).
    uring: Mutex<Option<Result<crate::uring::UringParams, String>>>,
    /// Requests served over io_uring, per queue.
    pub uring_stats: crate::uring::UringStats,
    /// Tells the kernel about changes it did not ask for (set once the
    /// session exists).
    notifier: std::sync::OnceLock<fuser::Notifier>,
}

impl Shared {
    /// The result of [`Fs::unmount`], once the session has ended
    /// (`None` while still mounted).
    pub fn take_unmount_result(&self) -> Option<manyfs::Result<()>> {
        self.unmount.lock().take()
    }

    /// Why the mount was shut down after a handler panicked (`None` while
    /// it is healthy). See [`crate::poison`].
    pub fn poisoned(&self) -> Option<&str> {
        self.poison.reason()
    }

    /// Let the adapter tell the kernel about attribute changes it made on
    /// its own (see [`Shared::attributes_changed`]).
    pub(crate) fn set_notifier(&self, notifier: fuser::Notifier) {
        let _ = self.notifier.set(notifier);
    }

    /// `ino`'s attributes changed without a request that returns them (a
    /// write that cleared setuid/setgid): drop the kernel's cached copy, or
    /// `stat` would show the old mode for as long as the TTL (a day by
    /// default). Sent before the request's reply, so a caller that waits
    /// for its write sees the new mode. Only attributes are invalidated
    /// (offset -1), which takes no lock a request in flight may hold.
    fn attributes_changed(&self, ino: u64) {
        if let Some(n) = self.notifier.get()
            && let Err(e) = n.inval_inode(fuser::INodeNo(ino), -1, 0)
            // ENOENT: the kernel has no inode to invalidate.
            && e.raw_os_error() != Some(libc::ENOENT)
        {
            tracing::debug!(ino, "invalidating attributes: {e}");
        }
    }

    /// The outcome of `-o uring`'s negotiation at `INIT`, once.
    pub fn take_uring(&self) -> Option<Result<crate::uring::UringParams, String>> {
        self.uring.lock().take()
    }
}

/// A [`fuser::Filesystem`] over a mounted manyfs [`Fs`].
pub struct ManyFuse {
    fs: Option<Fs>,
    read_only: bool,
    ttl: Duration,
    /// Kernel write-back caching of file data (`-o writeback_cache`).
    writeback_cache: bool,
    /// Extended attributes served (`false` with `-o noxattr`).
    xattrs: bool,
    /// Ask for FUSE over io_uring at `INIT` (`-o uring`).
    uring: bool,
    handles: HandleTable,
    #[cfg(feature = "test-probes")]
    inode_io: Box<[IoShard]>,
    shared: Arc<Shared>,
}

/// One shard of the per-inode I/O counter map (`test-probes` builds only).
#[cfg(feature = "test-probes")]
type IoShard = CachePadded<Mutex<HashMap<u64, std::sync::Weak<InodeIo>>>>;

impl std::fmt::Debug for ManyFuse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManyFuse")
            .field("read_only", &self.read_only)
            .field("open_handles", &self.handles.len())
            .finish_non_exhaustive()
    }
}

impl ManyFuse {
    /// Serve `fs`. `read_only` makes every modifying request fail with
    /// `EROFS` before it reaches the library.
    pub fn new(fs: Fs, read_only: bool) -> ManyFuse {
        poison::install_hook();
        ManyFuse {
            fs: Some(fs),
            read_only,
            ttl: DEFAULT_TTL,
            writeback_cache: false,
            xattrs: true,
            uring: false,
            handles: HandleTable::new(),
            #[cfg(feature = "test-probes")]
            inode_io: (0..HANDLE_SHARDS)
                .map(|_| CachePadded::new(Mutex::new(HashMap::new())))
                .collect(),
            shared: Arc::new(Shared::default()),
        }
    }

    /// Let the kernel cache attributes and names for `ttl` instead of
    /// [`DEFAULT_TTL`].
    pub fn with_ttl(mut self, ttl: Duration) -> ManyFuse {
        self.ttl = ttl;
        self
    }

    /// Let the kernel cache file data and combine small writes in its page
    /// cache (FUSE write-back caching) instead of sending every `write` to
    /// the daemon as it happens. A program making many small writes (a
    /// database's log) then pays one request per page or more instead of one
    /// per call; in exchange the kernel serialises writers of one file (its
    /// buffered-write path takes the inode lock), so parallel writes to one
    /// shared file no longer reach the range lock together, and data not
    /// yet written back (at `fsync`, `close`, or by the kernel's flusher)
    /// is lost if the daemon is killed, as after a power cut.
    pub fn with_writeback_cache(mut self, on: bool) -> ManyFuse {
        self.writeback_cache = on;
        self
    }

    /// Serve extended attributes (the default), or answer every xattr
    /// request `ENOSYS` (`-o noxattr`): the kernel then fails `getxattr`,
    /// `setxattr`, `listxattr` and `removexattr` on the mount with
    /// `EOPNOTSUPP` without asking again, as a file system without xattr
    /// support does. Attributes already in the pool stay there, unseen.
    ///
    /// Why: before every buffered write the kernel asks a FUSE file system
    /// for the file's `security.capability` (the check whether a write must
    /// drop file capabilities; FUSE inodes never remember that they have
    /// none). With `writeback_cache` that question is the only round trip a
    /// small write makes, and without xattrs it is not asked at all.
    ///
    /// POSIX ACLs go with them (`FUSE_POSIX_ACL` is not asked for, so the
    /// kernel checks mode bits only, as ext4 with `noacl`); mount the
    /// library with [`manyfs::MountOptions::inherit_acls`] off to match, so
    /// that new inodes inherit no ACL that nobody would enforce (`-o
    /// noxattr` does both).
    pub fn with_xattrs(mut self, on: bool) -> ManyFuse {
        self.xattrs = on;
        self
    }

    /// The mode to create with: `mode` less `umask`, unless directory
    /// `parent` has a default ACL that new inodes inherit, which then
    /// decides (the kernel leaves the umask to the file system:
    /// `FUSE_DONT_MASK`). With `-o noxattr` nothing is inherited and the
    /// umask always applies.
    fn creation_mode(&self, parent: u64, mode: u32, umask: u32) -> Result<u32, Errno> {
        let fs = self.fs()?;
        let default_acl = std::os::unix::ffi::OsStrExt::from_bytes(manyfs::acl::DEFAULT);
        if self.xattrs && fs.getxattr(parent, default_acl).is_ok() {
            Ok(mode)
        } else {
            Ok(mode & !(umask & 0o777))
        }
    }

    /// `Err(ENOSYS)` when extended attributes are off (`-o noxattr`).
    fn xattrs_served(&self) -> Result<(), Errno> {
        if self.xattrs {
            Ok(())
        } else {
            Err(Errno::ENOSYS)
        }
    }

    /// Ask the kernel at `INIT` for FUSE over io_uring (see
    /// [`crate::uring::negotiate`]); the outcome is left in
    /// [`Shared::take_uring`] for the session to start the rings.
    pub fn with_uring(mut self, on: bool) -> ManyFuse {
        self.uring = on;
        self
    }

    /// The flags an open or create reply carries.
    fn fopen_flags(&self) -> FopenFlags {
        if self.writeback_cache {
            FOPEN_FLAGS_CACHED
        } else {
            FOPEN_FLAGS
        }
    }

    /// The statistics and unmount outcome, shared with the serving threads.
    pub fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }

    /// Run the handler of `op` with its `reply`. On a shut-down mount
    /// (see [`crate::poison`]) answer `EIO` without running it, unless `op`
    /// only frees adapter bookkeeping. A panic in the handler answers
    /// `EIO` (the reply, dropped while unwinding, sends it) and shuts the
    /// mount down.
    fn serve<R: ErrorReply>(&self, op: &'static str, reply: R, f: impl FnOnce(R)) {
        if self.shared.poison.reason().is_some() && !poison::served_when_poisoned(op) {
            reply.error(Errno::EIO);
            return;
        }
        let run = || poison::serving(op, self, || f(reply));
        if let Err(payload) = std::panic::catch_unwind(AssertUnwindSafe(run)) {
            self.shared.stats.panics.fetch_add(1, Ordering::Relaxed);
            // Normally done already by the panic hook, before the reply
            // went out; this covers a program that replaced the hook.
            self.shut_down(op, poison::panic_text(&*payload));
        }
    }

    fn fs(&self) -> Result<&Fs, Errno> {
        self.fs.as_ref().ok_or(Errno::EIO)
    }

    fn writable(&self) -> Result<(), Errno> {
        if self.read_only {
            Err(Errno::EROFS)
        } else {
            Ok(())
        }
    }

    #[cfg(feature = "test-probes")]
    fn io_for(&self, ino: u64) -> Arc<InodeIo> {
        let mut map = self.inode_io[(ino as usize) & (HANDLE_SHARDS - 1)].lock();
        if let Some(io) = map.get(&ino).and_then(std::sync::Weak::upgrade) {
            return io;
        }
        let io = Arc::new(InodeIo::default());
        map.insert(ino, Arc::downgrade(&io));
        // Keep the map from growing without bound: drop dead entries now
        // and then (amortised O(1) per open).
        if map.len() > 256 && map.len().is_power_of_two() {
            map.retain(|_, w| w.strong_count() > 0);
        }
        io
    }

    fn file_handle(&self, fh: FileHandle) -> Result<Arc<Handle>, Errno> {
        match self.handles.get(fh.0) {
            Some(h) if matches!(*h, Handle::File(_)) => Ok(h),
            _ => Err(Errno::EBADF),
        }
    }

    /// Run `f` on the open file of handle `fh` (`EBADF` when there is none).
    fn with_file<T>(
        &self,
        fh: FileHandle,
        f: impl FnOnce(&FileHandleState) -> Result<T, Errno>,
    ) -> Result<T, Errno> {
        let h = self.file_handle(fh)?;
        let Handle::File(h) = &*h else {
            return Err(Errno::EBADF);
        };
        f(h)
    }

    /// Open `ino` and register a handle; returns the handle number. An
    /// `O_TRUNC` open by a user other than root also clears setuid/setgid
    /// (the kernel leaves that to the file system when the truncation is
    /// part of the open).
    fn open_handle(&self, ino: u64, flags: i32, req: &Request) -> Result<u64, Errno> {
        let fs = self.fs()?;
        let (read, write) = match flags & libc::O_ACCMODE {
            libc::O_RDONLY => (true, false),
            // With `writeback_cache` the kernel fills a page it is about to
            // write partly by reading it through whatever handle the
            // writer has, a write-only one included: without read access
            // that READ failed with EBADF and the write with it (`echo >>`
            // after a remount, a 6,000-byte `pwrite` returning 4,096). The
            // kernel checked the caller's access at open; the handle's
            // reads serve only its page cache.
            libc::O_WRONLY => (self.writeback_cache, true),
            _ => (true, true),
        };
        if write {
            self.writable()?;
        }
        let file = fs.open_ino(ino, read, write).map_err(errno)?;
        if write && flags & libc::O_TRUNC != 0 {
            file.set_len(0).map_err(errno)?;
            if req.uid() != 0
                && file
                    .clear_setid(|gid| caller_in_group(req.pid(), req.gid(), gid))
                    .map_err(errno)?
            {
                self.shared.attributes_changed(ino);
            }
        }
        let h = FileHandleState {
            file,
            append: flags & libc::O_APPEND != 0,
            #[cfg(feature = "test-probes")]
            io: self.io_for(ino),
        };
        Ok(self.handles.insert(Handle::File(h)))
    }

    fn do_write(
        &self,
        req: &Request,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        flags: WriteFlags,
    ) -> Result<u32, Errno> {
        self.with_file(fh, |h| {
            let len = u32::try_from(data.len()).map_err(|_| Errno::EINVAL)?;
            #[cfg(feature = "test-probes")]
            {
                let now = h.io.inflight.fetch_add(1, Ordering::AcqRel) + 1;
                self.shared.stats.observe_inflight(now);
            }
            // Page-cache writeback (shared mmap) may come through any writable
            // handle of the inode, an O_APPEND one included: it is positional.
            let res = if h.append && !flags.contains(WriteFlags::FUSE_WRITE_CACHE) {
                h.file.append(data).map(|_| ())
            } else {
                write_all_at(&h.file, data, offset)
            };
            #[cfg(feature = "test-probes")]
            h.io.inflight.fetch_sub(1, Ordering::AcqRel);
            res.map_err(errno)?;
            if flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID) {
                // The writer lacks CAP_FSETID: drop setuid/setgid as
                // kernel file systems do (one relaxed load when unset).
                if h.file
                    .clear_setid(|gid| caller_in_group(req.pid(), req.gid(), gid))
                    .map_err(errno)?
                {
                    self.shared.attributes_changed(h.file.ino());
                }
            }
            Ok(len)
        })
    }

    /// Read up to `size` bytes at `offset` and hand them to `reply` (which
    /// sends them). The bytes are read into the serving thread's own
    /// buffer, kept between requests: a read neither allocates nor faults
    /// in fresh pages (a `calloc` of 1 MiB is a fresh `mmap`).
    fn do_read<T>(
        &self,
        fh: FileHandle,
        offset: u64,
        size: u32,
        reply: impl FnOnce(&[u8]) -> T,
    ) -> Result<T, Errno> {
        self.with_file(fh, |h| {
            // The kernel never asks for more than max_read (about 1 MiB); cap
            // it anyway so a bogus request cannot make us allocate gigabytes.
            let want = (size as usize).min(MAX_READ);
            let fill = |buf: &mut [u8]| -> Result<usize, Errno> {
                let mut done = 0usize;
                while done < buf.len() {
                    let off = offset.checked_add(done as u64).ok_or(Errno::EINVAL)?;
                    let n = h.file.read_at(&mut buf[done..], off).map_err(errno)?;
                    if n == 0 {
                        break;
                    }
                    done += n;
                }
                Ok(done)
            };
            if want > KEPT_READ_BUFFER {
                let mut buf = vec![0u8; want];
                let done = fill(&mut buf)?;
                return Ok(reply(&buf[..done]));
            }
            READ_BUFFER.with(|b| {
                let mut buf = b.borrow_mut();
                if buf.len() < want {
                    buf.resize(want, 0);
                }
                let done = fill(&mut buf[..want])?;
                Ok(reply(&buf[..done]))
            })
        })
    }

    /// `mknod`, `mkdir` and (without the open) `create`: `mode` carries the
    /// file type bits as `mknod(2)` takes them.
    fn make_node(
        &self,
        req: &Request,
        parent: u64,
        name: &OsStr,
        (mode, umask): (u32, u32),
        rdev: u32,
    ) -> Result<Metadata, Errno> {
        self.writable()?;
        let fs = self.fs()?;
        let mode = self.creation_mode(parent, mode, umask)?;
        fs.mknod(parent, name, mode, u64::from(rdev), req.uid(), req.gid())
            .map_err(errno)
    }

    fn reply_entry(&self, reply: ReplyEntry, r: Result<Metadata, Errno>) {
        reply_with(reply, r, |reply, md| {
            reply.entry(
                &self.ttl,
                &to_attr(&md),
                Generation(u64::from(md.generation)),
            )
        });
    }

    fn reply_attr(&self, reply: ReplyAttr, r: Result<FileAttr, Errno>) {
        reply_with(reply, r, |reply, a| reply.attr(&self.ttl, &a));
    }

    /// After a truncate or preallocation by a user other than root, clear
    /// what such a write clears (setuid, setgid by the writer's groups; see
    /// [`manyfs::lowlevel::FileExt::clear_setid`]) and tell the kernel.
    /// Where the kernel does not flag the request itself, uid 0 stands for
    /// `CAP_FSETID`. Returns whether the mode changed.
    fn drop_setid(&self, ino: u64, req: &Request) -> Result<bool, Errno> {
        if req.uid() == 0 {
            return Ok(false);
        }
        let file = self.fs()?.open_ino(ino, false, false).map_err(errno)?;
        let changed = file
            .clear_setid(|gid| caller_in_group(req.pid(), req.gid(), gid))
            .map_err(errno)?;
        if changed {
            self.shared.attributes_changed(ino);
        }
        Ok(changed)
    }

    fn do_setattr(&self, ino: u64, attr: &SetAttr) -> Result<FileAttr, Errno> {
        self.writable()?;
        let md = self.fs()?.setattr(ino, attr).map_err(errno)?;
        Ok(to_attr(&md))
    }

    /// The directory handle `fh` of `ino` and its entry snapshot, refreshed
    /// when a listing (re)starts at offset 0.
    fn dir_snapshot(
        &self,
        fh: FileHandle,
        ino: u64,
        offset: u64,
    ) -> Result<(Arc<Handle>, Arc<Vec<DirEntry>>), Errno> {
        let fs = self.fs()?;
        let h = self.handles.get(fh.0).ok_or(Errno::EBADF)?;
        let Handle::Dir(d) = &*h else {
            return Err(Errno::EBADF);
        };
        if d.ino != ino {
            return Err(Errno::EBADF);
        }
        let entries = {
            let mut snap = d.entries.lock();
            if offset == 0 {
                *snap = Arc::new(fs.readdir_ino(ino).map_err(errno)?);
            }
            snap.clone()
        };
        Ok((h, entries))
    }

    fn do_readdir(
        &self,
        fh: FileHandle,
        ino: u64,
        offset: u64,
        reply: &mut ReplyDirectory,
    ) -> Result<(), Errno> {
        let (h, entries) = self.dir_snapshot(fh, ino, offset)?;
        let Handle::Dir(d) = &*h else {
            return Err(Errno::EBADF);
        };
        // Index 0 is ".", 1 is "..", then the entries; an entry's offset is
        // its index + 1, i.e. where the next call resumes.
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        let total = entries.len().saturating_add(2);
        for idx in start..total {
            let next = idx as u64 + 1;
            let full = match idx {
                0 => reply.add(INodeNo(d.ino), next, FileType::Directory, "."),
                1 => reply.add(INodeNo(d.parent), next, FileType::Directory, ".."),
                i => {
                    let e = &entries[i - 2];
                    reply.add(INodeNo(e.ino), next, file_type(e.kind), &e.name)
                }
            };
            if full {
                break;
            }
        }
        Ok(())
    }

    fn do_readdirplus(
        &self,
        fh: FileHandle,
        ino: u64,
        offset: u64,
        reply: &mut ReplyDirectoryPlus,
    ) -> Result<(), Errno> {
        let fs = self.fs()?;
        let (h, entries) = self.dir_snapshot(fh, ino, offset)?;
        let Handle::Dir(d) = &*h else {
            return Err(Errno::EBADF);
        };
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        let total = entries.len().saturating_add(2);
        for idx in start..total {
            let next = idx as u64 + 1;
            let (name, target): (&OsStr, u64) = match idx {
                0 => (OsStr::new("."), d.ino),
                1 => (OsStr::new(".."), d.parent),
                i => (entries[i - 2].name.as_os_str(), entries[i - 2].ino),
            };
            // An entry removed since the snapshot is left out (POSIX lets a
            // listing miss entries removed during it).
            let Ok(md) = fs.stat(target) else {
                continue;
            };
            let generation = Generation(u64::from(md.generation));
            if reply.add(
                INodeNo(target),
                next,
                name,
                &self.ttl,
                &to_attr(&md),
                generation,
            ) {
                break;
            }
        }
        Ok(())
    }
}

/// Map a library error to its errno (and log it: `-o debug`).
/// The thread a request's file I/O is accounted to for thread placement:
/// its caller (a request header's `pid` is the calling thread's id, in
/// the daemon's pid namespace), or nobody for a request without one (the
/// kernel's own, or from a pid namespace the daemon cannot see: 0).
fn caller(req: &Request) -> Option<i32> {
    i32::try_from(req.pid()).ok().filter(|&tid| tid > 0)
}

fn errno(e: manyfs::Error) -> Errno {
    let n = e.errno();
    tracing::debug!(errno = n, "request failed: {e}");
    Errno::from_i32(n)
}

fn write_all_at(file: &File, mut data: &[u8], mut offset: u64) -> manyfs::Result<()> {
    while !data.is_empty() {
        let n = file.write_at(data, offset)?;
        if n == 0 {
            return Err(manyfs::Error::NoSpace("short write"));
        }
        data = &data[n.min(data.len())..];
        offset = offset.saturating_add(n as u64);
    }
    Ok(())
}

fn file_type(kind: FileKind) -> FileType {
    match kind {
        FileKind::File => FileType::RegularFile,
        FileKind::Dir => FileType::Directory,
        FileKind::Symlink => FileType::Symlink,
        FileKind::Fifo => FileType::NamedPipe,
        FileKind::CharDevice => FileType::CharDevice,
        FileKind::BlockDevice => FileType::BlockDevice,
        FileKind::Socket => FileType::Socket,
    }
}

/// The attributes of a negative entry: only the node number 0 matters.
fn negative_attr() -> FileAttr {
    FileAttr {
        ino: INodeNo(0),
        size: 0,
        blocks: 0,
        atime: SystemTime::UNIX_EPOCH,
        mtime: SystemTime::UNIX_EPOCH,
        ctime: SystemTime::UNIX_EPOCH,
        crtime: SystemTime::UNIX_EPOCH,
        kind: FileType::RegularFile,
        perm: 0,
        nlink: 0,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

fn to_attr(md: &Metadata) -> FileAttr {
    FileAttr {
        ino: INodeNo(md.ino),
        size: md.size,
        blocks: md.blocks,
        atime: md.atime,
        mtime: md.mtime,
        ctime: md.ctime,
        crtime: md.ctime,
        kind: file_type(md.kind),
        perm: (md.mode & 0o7777) as u16,
        nlink: md.nlink,
        uid: md.uid,
        gid: md.gid,
        // FUSE carries the old 32-bit encoding (major << 8 | minor for
        // small numbers, the kernel's new_encode_dev above).
        rdev: u32::try_from(md.rdev).unwrap_or(0),
        blksize: 4096,
        flags: 0,
    }
}

/// Answer `reply` through `ok` with the value of `r`, or with its errno.
fn reply_with<R: ErrorReply, T>(reply: R, r: Result<T, Errno>, ok: impl FnOnce(R, T)) {
    match r {
        Ok(v) => ok(reply, v),
        Err(e) => reply.error(e),
    }
}

fn reply_empty(reply: ReplyEmpty, r: Result<(), Errno>) {
    reply_with(reply, r, |reply, ()| reply.ok());
}

/// Answer a `getxattr`/`listxattr` whose result is `bytes`: its size when
/// the caller asked for the size (`size` 0), the bytes when they fit,
/// `ERANGE` when they do not.
fn reply_xattr(reply: ReplyXattr, size: u32, r: Result<Vec<u8>, Errno>) {
    reply_with(reply, r, |reply, bytes| {
        let Ok(len) = u32::try_from(bytes.len()) else {
            return reply.error(Errno::E2BIG);
        };
        if size == 0 {
            reply.size(len);
        } else if len > size {
            reply.error(Errno::ERANGE);
        } else {
            reply.data(&bytes);
        }
    });
}

impl ShutDown for ManyFuse {
    fn shut_down(&self, op: &str, panic: &str) {
        let msg = poison::message(op, panic);
        if self.shared.poison.set(msg.clone()) {
            if let Some(fs) = &self.fs {
                fs.fail(&msg);
            }
            poison::report(&msg);
        }
    }
}

/// `readdir` and `readdirplus`: the same handler around their own fill
/// function and reply type.
macro_rules! listing_handler {
    ($op:ident, $reply:ty, $fill:ident) => {
        fn $op(&self, _req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, reply: $reply) {
            self.serve(stringify!($op), reply, |mut reply| {
                let r = self.$fill(fh, ino.0, offset, &mut reply);
                reply_with(reply, r, |reply, ()| reply.ok());
            });
        }
    };
}

impl Filesystem for ManyFuse {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // Each capability is optional: a kernel without it just ignores it.
        for cap in [
            // Shared mmap of direct-io files (SQLite's WAL index, ...).
            InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP,
            // Lookups and readdir of one directory in parallel.
            InitFlags::FUSE_PARALLEL_DIROPS,
            // O_TRUNC handled in `open` instead of a separate setattr.
            InitFlags::FUSE_ATOMIC_O_TRUNC,
            // Asynchronous direct I/O (libaio, io_uring) stays asynchronous.
            InitFlags::FUSE_ASYNC_DIO,
            // Names and attributes in one reply when a listing is followed
            // by lookups (`ls -l`, `cp -a`, `find`); the kernel decides.
            InitFlags::FUSE_DO_READDIRPLUS,
            InitFlags::FUSE_READDIRPLUS_AUTO,
            // The umask is ours to apply: not where a default ACL decides.
            InitFlags::FUSE_DONT_MASK,
        ] {
            let _ = config.add_capabilities(cap);
        }
        if self.xattrs {
            // POSIX ACLs (kept as attributes): the kernel caches and
            // enforces them; the library keeps them in step with the mode.
            let _ = config.add_capabilities(InitFlags::FUSE_POSIX_ACL);
        }
        if self.writeback_cache {
            // The kernel buffers writes and sends them page-wise; with it
            // the kernel keeps size and mtime itself and reports them back
            // through setattr.
            config
                .add_capabilities(InitFlags::FUSE_WRITEBACK_CACHE)
                .map_err(|_| {
                    std::io::Error::other("writeback_cache: this kernel does not offer it")
                })?;
        }
        if self.uring {
            *self.shared.uring.lock() = Some(crate::uring::negotiate(config));
        }
        Ok(())
    }

    fn destroy(&mut self) {
        self.handles.clear();
        #[cfg(feature = "test-probes")]
        for shard in self.inode_io.iter() {
            shard.lock().clear();
        }
        if let Some(fs) = self.fs.take() {
            // On a shut-down mount the library refuses the final sync and
            // says why; the pool is left for the next mount's recovery.
            let r = fs.unmount();
            *self.shared.unmount.lock() = Some(r);
        }
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.serve("lookup", reply, |reply| {
            let r = self.fs().and_then(|fs| match fs.lookup(parent.0, name) {
                Ok(md) => Ok(Some(md)),
                // Quietly: a missing name is the common answer, not a
                // failure worth a log line.
                Err(e) if e.errno() == libc::ENOENT => Ok(None),
                Err(e) => Err(errno(e)),
            });
            reply_with(reply, r, |reply, md| match md {
                Some(md) => reply.entry(
                    &self.ttl,
                    &to_attr(&md),
                    Generation(u64::from(md.generation)),
                ),
                // A negative entry (node 0) with a timeout: the kernel
                // remembers that the name does not exist, so a repeated
                // lookup of it (a `stat` of a missing file, the lookup
                // before a create) is answered without a request. Creating
                // the name through the mount replaces the negative entry.
                None => reply.entry(&self.ttl, &negative_attr(), Generation(0)),
            });
        });
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        self.serve("getattr", reply, |reply| {
            let r = (|| {
                if let Some(fh) = fh
                    && let Some(h) = self.handles.get(fh.0)
                    && let Handle::File(f) = &*h
                    && f.file.ino() == ino.0
                {
                    return f.file.metadata().map_err(errno).map(|m| to_attr(&m));
                }
                let fs = self.fs()?;
                fs.stat(ino.0).map_err(errno).map(|m| to_attr(&m))
            })();
            self.reply_attr(reply, r);
        });
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        self.serve("setattr", reply, |reply| {
            let to_time = |t: TimeOrNow| match t {
                TimeOrNow::SpecificTime(t) => t,
                TimeOrNow::Now => SystemTime::now(),
            };
            let attr = SetAttr {
                mode: mode.map(|m| m & 0o7777),
                uid,
                gid,
                size,
                atime: atime.map(to_time),
                mtime: mtime.map(to_time),
            };
            let r = self.do_setattr(ino.0, &attr).and_then(|a| {
                // A truncate by another user: the kernel sends the mode only
                // when setuid, or setgid with group execute, goes; a setgid
                // file without group execute loses the bit too when the
                // writer is outside its group (see `drop_setid`).
                if size.is_some() && mode.is_none() && self.drop_setid(ino.0, req)? {
                    return self.fs()?.stat(ino.0).map(|m| to_attr(&m)).map_err(errno);
                }
                Ok(a)
            });
            self.reply_attr(reply, r);
        });
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        self.serve("readlink", reply, |reply| {
            let r = self
                .fs()
                .and_then(|fs| fs.readlink_ino(ino.0).map_err(errno));
            reply_with(reply, r, |reply, p| {
                reply.data(std::os::unix::ffi::OsStrExt::as_bytes(p.as_os_str()))
            });
        });
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        self.serve("mknod", reply, |reply| {
            let r = self.make_node(req, parent.0, name, (mode, umask), rdev);
            self.reply_entry(reply, r);
        });
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        self.serve("mkdir", reply, |reply| {
            let mode = libc::S_IFDIR | (mode & 0o7777);
            self.reply_entry(reply, self.make_node(req, parent.0, name, (mode, umask), 0));
        });
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.serve("unlink", reply, |reply| {
            let r = self
                .writable()
                .and_then(|()| self.fs()?.unlink_at(parent.0, name).map_err(errno));
            reply_empty(reply, r);
        });
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.serve("rmdir", reply, |reply| {
            let r = self
                .writable()
                .and_then(|()| self.fs()?.rmdir_at(parent.0, name).map_err(errno));
            reply_empty(reply, r);
        });
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        self.serve("symlink", reply, |reply| {
            let r = self.writable().and_then(|()| {
                self.fs()?
                    .symlink_at(parent.0, link_name, target, req.uid(), req.gid())
                    .map_err(errno)
            });
            self.reply_entry(reply, r);
        });
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        self.serve("rename", reply, |reply| {
            let r = (|| {
                self.writable()?;
                let fs = self.fs()?;
                let how = if flags.is_empty() {
                    Rename::Replace
                } else if flags == RenameFlags::RENAME_NOREPLACE {
                    Rename::NoReplace
                } else if flags == RenameFlags::RENAME_EXCHANGE {
                    Rename::Exchange
                } else {
                    // RENAME_WHITEOUT (overlayfs), or flags that exclude
                    // each other.
                    return Err(Errno::EINVAL);
                };
                fs.rename_at(parent.0, name, newparent.0, newname, how)
                    .map_err(errno)
            })();
            reply_empty(reply, r);
        });
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        self.serve("link", reply, |reply| {
            let r = self.writable().and_then(|()| {
                self.fs()?
                    .link_at(ino.0, newparent.0, newname)
                    .map_err(errno)
            });
            self.reply_entry(reply, r);
        });
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        self.serve("open", reply, |reply| {
            reply_with(reply, self.open_handle(ino.0, flags.0, req), |reply, fh| {
                reply.opened(FileHandle(fh), self.fopen_flags())
            });
        });
    }

    fn read(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        self.serve("read", reply, |reply| {
            on_behalf_of(caller(req), || {
                // The reply goes out from inside the read, from the
                // thread's buffer; only an error is left to answer.
                let mut reply = Some(reply);
                let r = self.do_read(fh, offset, size, |buf| {
                    if let Some(reply) = reply.take() {
                        reply.data(buf);
                    }
                });
                if let (Err(e), Some(reply)) = (r, reply) {
                    reply.error(e);
                }
            });
        });
    }

    fn write(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        self.serve("write", reply, |reply| {
            // Page-cache writeback is the kernel's, not the caller's I/O.
            let caller =
                caller(req).filter(|_| !write_flags.contains(WriteFlags::FUSE_WRITE_CACHE));
            let r = on_behalf_of(caller, || self.do_write(req, fh, offset, data, write_flags));
            reply_with(reply, r, |reply, n| reply.written(n));
        });
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // Data is in the pool as soon as `write` returns; nothing to push.
        // ENOSYS tells the kernel so once: it then sends no FLUSH on any
        // later close (one round trip less per close), and still writes
        // dirty mmap pages back before a close returns.
        self.serve("flush", reply, |reply| {
            reply_empty(reply, self.file_handle(fh).and(Err(Errno::ENOSYS)));
        });
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.serve("release", reply, |reply| {
            let r = self.handles.remove(fh.0).map(|_| ()).ok_or(Errno::EBADF);
            reply_empty(reply, r);
        });
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.serve("fsync", reply, |reply| {
            let r = self.with_file(fh, |h| {
                if datasync {
                    h.file.sync_data().map_err(errno)
                } else {
                    h.file.sync_all().map_err(errno)
                }
            });
            reply_empty(reply, r);
        });
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        self.serve("opendir", reply, |reply| {
            let r = (|| {
                let fs = self.fs()?;
                let entries = fs.readdir_ino(ino.0).map_err(errno)?;
                let parent = if ino.0 == manyfs::lowlevel::ROOT_INO {
                    ino.0
                } else {
                    fs.lookup(ino.0, OsStr::new(".."))
                        .map(|m| m.ino)
                        .unwrap_or(ino.0)
                };
                Ok(self.handles.insert(Handle::Dir(DirHandleState {
                    ino: ino.0,
                    parent,
                    entries: Mutex::new(Arc::new(entries)),
                })))
            })();
            reply_with(reply, r, |reply, fh| {
                reply.opened(FileHandle(fh), FopenFlags::empty())
            });
        });
    }

    listing_handler!(readdir, ReplyDirectory, do_readdir);
    listing_handler!(readdirplus, ReplyDirectoryPlus, do_readdirplus);

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.serve("releasedir", reply, |reply| {
            let r = self.handles.remove(fh.0).map(|_| ()).ok_or(Errno::EBADF);
            reply_empty(reply, r);
        });
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.serve("fsyncdir", reply, |reply| {
            let r = self.fs().and_then(|fs| fs.sync().map_err(errno));
            reply_empty(reply, r);
        });
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        self.serve("statfs", reply, |reply| {
            reply_with(reply, self.fs(), |reply, fs| {
                let s = fs.statfs();
                let bsize = u32::try_from(s.block_size).unwrap_or(4096);
                let namelen = u32::try_from(s.name_max).unwrap_or(255);
                reply.statfs(
                    s.total_blocks,
                    s.free_blocks,
                    s.free_blocks,
                    s.total_inodes,
                    s.free_inodes,
                    bsize,
                    namelen,
                    bsize,
                );
            });
        });
    }

    fn setxattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        position: u32,
        reply: ReplyEmpty,
    ) {
        self.serve("setxattr", reply, |reply| {
            let r = (|| {
                if position != 0 {
                    // Only macOS resource forks have a position.
                    return Err(Errno::EINVAL);
                }
                let how = match flags {
                    0 => XattrSet::Any,
                    libc::XATTR_CREATE => XattrSet::Create,
                    libc::XATTR_REPLACE => XattrSet::Replace,
                    _ => return Err(Errno::EINVAL),
                };
                self.xattrs_served()?;
                self.writable()?;
                self.fs()?.setxattr(ino.0, name, value, how).map_err(errno)
            })();
            reply_empty(reply, r);
        });
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        #[cfg(feature = "test-probes")]
        self.shared.stats.getxattrs.fetch_add(1, Ordering::Relaxed);
        self.serve("getxattr", reply, |reply| {
            let r = self
                .xattrs_served()
                .and_then(|()| self.fs())
                .and_then(|fs| fs.getxattr(ino.0, name).map_err(errno));
            reply_xattr(reply, size, r);
        });
    }

    fn listxattr(&self, req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        self.serve("listxattr", reply, |reply| {
            // NUL-terminated names, one after another. As ext4, `trusted.`
            // names are listed only to the privileged (root here).
            let r = self.xattrs_served().and_then(|()| {
                let names = self.fs()?.listxattr(ino.0).map_err(errno)?;
                let mut out = Vec::new();
                let shown = |n: &std::ffi::OsString| {
                    req.uid() == 0 || !n.as_encoded_bytes().starts_with(b"trusted.")
                };
                for n in names.iter().filter(|n| shown(n)) {
                    out.extend_from_slice(std::os::unix::ffi::OsStrExt::as_bytes(n.as_os_str()));
                    out.push(0);
                }
                Ok(out)
            });
            reply_xattr(reply, size, r);
        });
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.serve("removexattr", reply, |reply| {
            let r = self
                .xattrs_served()
                .and_then(|()| self.writable())
                .and_then(|()| self.fs()?.removexattr(ino.0, name).map_err(errno));
            reply_empty(reply, r);
        });
    }

    fn access(&self, _req: &Request, ino: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        // Permission checks are done by the kernel (`default_permissions`);
        // this is only reached without it: report whether the inode exists.
        self.serve("access", reply, |reply| {
            let r = self
                .fs()
                .and_then(|fs| fs.stat(ino.0).map(|_| ()).map_err(errno));
            reply_empty(reply, r);
        });
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        self.serve("create", reply, |reply| {
            let r = (|| {
                self.writable()?;
                #[cfg(feature = "test-probes")]
                poison::test_panic_probe(name);
                let fs = self.fs()?;
                let mode = self.creation_mode(parent.0, libc::S_IFREG | (mode & 0o7777), umask)?;
                let md = match fs.mknod(parent.0, name, mode, 0, req.uid(), req.gid()) {
                    Ok(md) => md,
                    // Lost a race with another creator: without O_EXCL,
                    // open what is there (open(2) semantics).
                    Err(e) if e.errno() == libc::EEXIST && flags & libc::O_EXCL == 0 => {
                        fs.lookup(parent.0, name).map_err(errno)?
                    }
                    Err(e) => return Err(errno(e)),
                };
                if md.kind == FileKind::Dir {
                    return Err(Errno::EISDIR);
                }
                let fh = self.open_handle(md.ino, flags, req)?;
                // O_TRUNC may have changed the size.
                let md = if flags & libc::O_TRUNC != 0 {
                    fs.stat(md.ino).map_err(errno)?
                } else {
                    md
                };
                Ok((md, fh))
            })();
            reply_with(reply, r, |reply, (md, fh)| {
                reply.created(
                    &self.ttl,
                    &to_attr(&md),
                    Generation(u64::from(md.generation)),
                    FileHandle(fh),
                    self.fopen_flags(),
                )
            });
        });
    }

    fn fallocate(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        self.serve("fallocate", reply, |reply| {
            let r = (|| {
                if mode != 0 {
                    // Only plain preallocation (which may extend the file).
                    return Err(Errno::EOPNOTSUPP);
                }
                self.writable()?;
                // Extends atomically with respect to concurrent writers.
                self.with_file(fh, |h| h.file.allocate(offset, length).map_err(errno))?;
                self.drop_setid(ino.0, req).map(|_| ())
            })();
            reply_empty(reply, r);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handle_numbers_are_unique_across_threads() {
        let all: Vec<u64> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| s.spawn(|| (0..1000).map(|_| next_fh()).collect::<Vec<_>>()))
                .collect();
            hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
        });
        let set: std::collections::HashSet<_> = all.iter().copied().collect();
        assert_eq!(set.len(), all.len());
        assert!(all.iter().all(|&fh| fh != 0));
    }

    #[test]
    fn handle_table_insert_get_remove() {
        let t = HandleTable::new();
        let mk = |ino| {
            Handle::Dir(DirHandleState {
                ino,
                parent: 1,
                entries: Mutex::new(Arc::new(Vec::new())),
            })
        };
        let fhs: Vec<u64> = (0..300).map(|i| t.insert(mk(i))).collect();
        assert_eq!(t.len(), 300);
        for (i, &fh) in fhs.iter().enumerate() {
            match t.get(fh).as_deref() {
                Some(Handle::Dir(d)) => assert_eq!(d.ino, i as u64),
                _ => panic!("handle {fh} lost"),
            }
        }
        assert!(t.get(12345).is_none());
        assert!(t.remove(fhs[7]).is_some());
        assert!(t.remove(fhs[7]).is_none());
        assert!(t.get(fhs[7]).is_none());
        t.clear();
        assert_eq!(t.len(), 0);
    }
}
