//! Mounting a [`manyfs::Fs`] through FUSE, in this process.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use fuser::{Config, MountOption, Session, SessionACL};
use manyfs::Fs;

use crate::adapter::{FuseStats, ManyFuse, Shared};
use crate::error::{FuseError, Result};
use crate::options::FuseConfig;
use crate::uring::UringParams;

/// Build the fuser session configuration for `cfg`.
fn session_config(cfg: &FuseConfig, pool: Option<&Path>) -> Config {
    let mut c = Config::default();
    let fsname = pool.map_or_else(|| "manyfs".to_string(), |p| p.display().to_string());
    // fsname ends up in /proc/mounts, where ',' and whitespace would break
    // the option list.
    let fsname: String = fsname
        .chars()
        .map(|ch| {
            if ch == ',' || ch.is_whitespace() {
                '_'
            } else {
                ch
            }
        })
        .collect();
    c.mount_options = vec![
        MountOption::FSName(fsname),
        MountOption::Subtype("manyfs".into()),
        MountOption::DefaultPermissions,
        MountOption::NoDev,
        MountOption::NoSuid,
        if cfg.fs.read_only {
            MountOption::RO
        } else {
            MountOption::RW
        },
    ];
    c.acl = if cfg.serves_everyone() {
        SessionACL::All
    } else {
        SessionACL::Owner
    };
    // The most workers: the session starts with one, makes another when
    // every one is busy and retires those idle for `worker_idle` (see
    // vendor/fuser/src/workers.rs).
    c.n_threads = Some(cfg.threads.max(1));
    c.idle_worker_retire = Some(cfg.worker_idle);
    // One /dev/fuse descriptor per thread: threads do not queue behind one
    // another when reading requests.
    c.clone_fd = cfg.threads > 1;
    // Pinned where asked: spread over the CPUs the daemon may use now.
    c.worker_cpus = match cfg.pin_workers {
        crate::options::PinWorkers::Off => Vec::new(),
        mode => match manyfs::diag::affinity::get(0) {
            Ok(allowed) => mode.cpus(allowed),
            Err(e) => {
                tracing::debug!("serving threads left unpinned: {e}");
                Vec::new()
            }
        },
    };
    c.spin_before_sleep = Some(cfg.spin);
    c
}

/// Check that `mountpoint` exists and is a directory.
pub fn check_mountpoint(mountpoint: &Path) -> Result<()> {
    match std::fs::metadata(mountpoint) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(FuseError::MountpointNotDir(mountpoint.to_path_buf())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(FuseError::NoMountpoint(mountpoint.to_path_buf()))
        }
        Err(e) => Err(FuseError::io(format!("{}", mountpoint.display()), e)),
    }
}

/// A FUSE session that has mounted and finished its handshake with the
/// kernel, but does not serve requests yet: call [`ReadySession::run`]
/// (blocking) or [`ReadySession::spawn`] (background threads).
pub struct ReadySession {
    session: Session<ManyFuse>,
    shared: Arc<Shared>,
    mountpoint: PathBuf,
    /// The io_uring to serve over (`-o uring`, where the kernel agreed): its
    /// parameters and a descriptor of the `/dev/fuse` connection.
    uring: Option<(UringParams, OwnedFd)>,
    /// Why `-o uring` fell back to /dev/fuse.
    uring_fallback: Option<String>,
}

impl std::fmt::Debug for ReadySession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadySession")
            .field("mountpoint", &self.mountpoint)
            .finish_non_exhaustive()
    }
}

/// Something that can unmount a running session from another thread (a
/// signal handler thread, a test).
#[derive(Debug)]
pub struct Unmounter {
    inner: fuser::SessionUnmounter,
    mountpoint: PathBuf,
}

impl Unmounter {
    /// Unmount. Fails with `EBUSY` while files are in use; see
    /// [`Unmounter::unmount_lazy`].
    pub fn unmount(&mut self) -> Result<()> {
        tracing::debug!(mountpoint = %self.mountpoint.display(), "unmounting");
        self.inner.unmount().map_err(|cause| FuseError::Unmount {
            mountpoint: self.mountpoint.clone(),
            cause,
        })
    }

    /// Detach the mount now (`umount -l`); the daemon keeps serving the
    /// processes that still use it and stops when the last one is done.
    pub fn unmount_lazy(&mut self) -> Result<()> {
        tracing::info!(mountpoint = %self.mountpoint.display(), "busy: detaching lazily");
        lazy_unmount(&self.mountpoint)
    }
}

/// `umount2(mountpoint, MNT_DETACH)`, falling back to `fusermount3 -u -z`.
pub fn lazy_unmount(mountpoint: &Path) -> Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(mountpoint.as_os_str().as_bytes())
        .map_err(|_| FuseError::MountpointNotDir(mountpoint.to_path_buf()))?;
    // SAFETY: `c` is a valid NUL-terminated path that outlives the call;
    // umount2 does not retain the pointer.
    let rc = unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
    if rc == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    let status = std::process::Command::new("fusermount3")
        .arg("-u")
        .arg("-z")
        .arg(mountpoint)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
    match status {
        Ok(s) if s.success() => Ok(()),
        _ => Err(FuseError::Unmount {
            mountpoint: mountpoint.to_path_buf(),
            cause: err,
        }),
    }
}

impl ReadySession {
    /// Mount `fs` on `mountpoint`. Returns once the kernel has accepted the
    /// mount and finished the FUSE handshake. `pool` only names the mount in
    /// `/proc/mounts`.
    pub fn mount(
        fs: Fs,
        mountpoint: &Path,
        cfg: &FuseConfig,
        pool: Option<&Path>,
    ) -> Result<ReadySession> {
        check_mountpoint(mountpoint)?;
        let fuse = ManyFuse::new(fs, cfg.fs.read_only)
            .with_ttl(cfg.ttl)
            .with_writeback_cache(cfg.writeback_cache)
            .with_xattrs(cfg.xattrs)
            .with_uring(cfg.uring != crate::options::UringMode::Off);
        let shared = fuse.shared();
        let config = session_config(cfg, pool);
        // On failure the session drops the adapter, whose `destroy`
        // unmounts the library.
        let session =
            Session::new(fuse, mountpoint, &config).map_err(|cause| FuseError::Mount {
                mountpoint: mountpoint.to_path_buf(),
                cause,
            })?;
        shared.set_notifier(session.notifier());
        tracing::info!(
            mountpoint = %mountpoint.display(),
            pool = %pool.map_or_else(String::new, |p| p.display().to_string()),
            threads = cfg.threads,
            lock = %cfg.fs.lock,
            read_only = cfg.fs.read_only,
            "mounted"
        );
        let (uring, uring_fallback) = match shared.take_uring() {
            None => (None, None),
            Some(Ok(params)) => {
                // The kernel now holds every request until the rings are
                // registered: they must be, or the mount would hang.
                let fd =
                    session
                        .as_fd()
                        .try_clone_to_owned()
                        .map_err(|cause| FuseError::Mount {
                            mountpoint: mountpoint.to_path_buf(),
                            cause,
                        })?;
                tracing::info!(
                    mountpoint = %mountpoint.display(),
                    queues = crate::uring::possible_cpus(),
                    "serving over io_uring"
                );
                (Some((params, fd)), None)
            }
            Some(Err(reason)) if cfg.uring == crate::options::UringMode::Auto => {
                tracing::debug!(mountpoint = %mountpoint.display(), "no io_uring: {reason}");
                (None, None)
            }
            Some(Err(reason)) => {
                let line = format!("-o uring: {reason}; serving through /dev/fuse");
                // `manyfs mount` prints it; see `uring_fallback`.
                tracing::warn!(mountpoint = %mountpoint.display(), "{line}");
                (None, Some(line))
            }
        };
        Ok(ReadySession {
            session,
            shared,
            mountpoint: mountpoint.to_path_buf(),
            uring,
            uring_fallback,
        })
    }

    /// A handle that unmounts this session from another thread.
    pub fn unmounter(&mut self) -> Unmounter {
        Unmounter {
            inner: self.session.unmount_callable(),
            mountpoint: self.mountpoint.clone(),
        }
    }

    /// The adapter's statistics.
    pub fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }

    /// Serve requests on this thread until the file system is unmounted,
    /// then unmount the library (flushing it) and report its outcome.
    pub fn run(self) -> Result<()> {
        let shared = self.shared.clone();
        let mountpoint = self.mountpoint.clone();
        let served = serve(self.session, self.uring, shared.clone());
        finish(&shared, &mountpoint, served)
    }

    /// Why `-o uring` fell back to /dev/fuse (`None` when it was not asked
    /// for or is in use).
    pub fn uring_fallback(&self) -> Option<&str> {
        self.uring_fallback.as_deref()
    }

    /// Serve requests on background threads.
    pub fn spawn(mut self) -> Result<MountedFs> {
        let unmounter = self.unmounter();
        let shared = self.shared.clone();
        let mountpoint = self.mountpoint.clone();
        let session = self.session;
        let uring = self.uring;
        let uring_fallback = self.uring_fallback;
        let served_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name("manyfs-fuse".into())
            .spawn(move || serve(session, uring, served_shared))
            .map_err(|e| FuseError::io("spawning the FUSE session thread", e))?;
        Ok(MountedFs {
            thread: Some(thread),
            unmounter,
            shared,
            mountpoint,
            uring_fallback,
        })
    }
}

/// Run the session: its /dev/fuse loops, and the io_uring queues where
/// `-o uring` was agreed. A failure of the rings is logged, not returned:
/// the kernel then serves through /dev/fuse (see [`crate::uring::serve`]).
fn serve(
    session: Session<ManyFuse>,
    uring: Option<(UringParams, OwnedFd)>,
    shared: Arc<Shared>,
) -> std::io::Result<()> {
    match uring {
        None => session.run(),
        Some((params, fd)) => session.run_with(move |dispatcher| {
            if let Err(e) = crate::uring::serve(dispatcher, fd, params, &shared.uring_stats) {
                tracing::error!("io_uring: {e}; serving through /dev/fuse");
                eprintln!("manyfs: io_uring: {e}; serving through /dev/fuse");
            }
            Ok(())
        }),
    }
}

fn finish(shared: &Shared, mountpoint: &Path, served: std::io::Result<()>) -> Result<()> {
    let fs_result = shared.take_unmount_result();
    match (&served, &fs_result) {
        (Err(e), _) => tracing::error!(mountpoint = %mountpoint.display(), "serving failed: {e}"),
        (Ok(()), Some(Err(e))) => {
            tracing::error!(mountpoint = %mountpoint.display(), "unmounting the pool failed: {e}")
        }
        _ => tracing::info!(mountpoint = %mountpoint.display(), "unmounted"),
    }
    served.map_err(|e| FuseError::io(format!("serving {}", mountpoint.display()), e))?;
    match fs_result {
        Some(r) => r.map_err(FuseError::Fs),
        None => Ok(()),
    }
}

/// A manyfs pool mounted through FUSE and served by background threads of
/// this process. Unmounts when dropped (errors are then ignored: call
/// [`MountedFs::unmount`] to see them).
#[derive(Debug)]
pub struct MountedFs {
    thread: Option<std::thread::JoinHandle<std::io::Result<()>>>,
    unmounter: Unmounter,
    shared: Arc<Shared>,
    mountpoint: PathBuf,
    uring_fallback: Option<String>,
}

impl MountedFs {
    /// Mount `fs` on `mountpoint` and serve it from background threads.
    pub fn spawn(fs: Fs, mountpoint: &Path, cfg: &FuseConfig) -> Result<MountedFs> {
        ReadySession::mount(fs, mountpoint, cfg, None)?.spawn()
    }

    /// The mount point.
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// Live statistics of the adapter.
    pub fn stats(&self) -> &FuseStats {
        &self.shared.stats
    }

    /// Why `-o uring` fell back to /dev/fuse (`None` when it was not asked
    /// for or is in use).
    pub fn uring_fallback(&self) -> Option<&str> {
        self.uring_fallback.as_deref()
    }

    /// Requests served over io_uring so far (0 through /dev/fuse).
    pub fn uring_requests(&self) -> u64 {
        self.shared.uring_stats.requests()
    }

    /// Why the mount was shut down after a handler panicked, if it was
    /// (see [`crate::poison`]).
    pub fn poisoned(&self) -> Option<&str> {
        self.shared.poisoned()
    }

    /// Unmount, wait for the serving threads, unmount the library and report
    /// the first error.
    ///
    /// If the mount is busy (a process, possibly this one, still has a file
    /// or directory open in it), it is detached lazily instead: the serving
    /// threads go on until the last user is gone and then unmount the
    /// library, and this returns the `EBUSY` error without waiting.
    pub fn unmount(mut self) -> Result<()> {
        self.do_unmount()
    }

    fn do_unmount(&mut self) -> Result<()> {
        let Some(thread) = self.thread.take() else {
            return Ok(());
        };
        if let Err(e) = self.unmounter.unmount() {
            // Busy: detach so the serving threads end once unused; waiting
            // for them here could wait forever on our own open files.
            let _ = self.unmounter.unmount_lazy();
            return Err(e);
        }
        let served = thread
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("FUSE session thread panicked")));
        finish(&self.shared, &self.mountpoint, served)
    }
}

impl Drop for MountedFs {
    fn drop(&mut self) {
        let _ = self.do_unmount();
    }
}
