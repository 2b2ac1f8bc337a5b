//! The process's view of the run: where the pool is mounted (from the
//! environment `manyfs run` sets), the mount itself (made on first use),
//! and what happens at fork and exit.

use manyfs::{Fs, MountOptions};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};

/// Environment: the pool file.
pub const ENV_POOL: &str = "MANYFS_RUN_POOL";
/// Environment: the absolute directory the pool appears at.
pub const ENV_AT: &str = "MANYFS_RUN_AT";
/// Environment: `-o` mount options, as `manyfs mount` takes them.
pub const ENV_OPTIONS: &str = "MANYFS_RUN_OPTIONS";

/// Where the pool appears and how it is mounted.
pub struct Config {
    /// The directory (absolute, normalised) the pool's root appears at.
    pub at: PathBuf,
    /// Its last component: a relative path that names none of it, and no
    /// `..`, cannot reach under `at` (so it needs no cwd look-up).
    pub at_name: OsString,
    /// The pool file.
    pub pool: PathBuf,
    /// The `-o` string.
    pub options: String,
}

static CONFIG: OnceLock<Option<Config>> = OnceLock::new();

/// The run's configuration; `None` outside `manyfs run` (every call then
/// goes to the kernel).
pub fn config() -> Option<&'static Config> {
    CONFIG
        .get_or_init(|| {
            let at = std::env::var_os(ENV_AT)?;
            let pool = std::env::var_os(ENV_POOL)?;
            let at = crate::paths::normalize(at.as_bytes())?;
            let at_name = at.file_name().map(OsString::from).unwrap_or_default();
            Some(Config {
                at,
                at_name,
                pool: PathBuf::from(pool),
                options: std::env::var(ENV_OPTIONS).unwrap_or_default(),
            })
        })
        .as_ref()
}

static MOUNT: OnceLock<Option<Fs>> = OnceLock::new();
/// Set in the child of a fork made while this process had the pool
/// mounted: the mount's memory is a copy the child must not write.
static FORKED: AtomicBool = AtomicBool::new(false);
static FORK_WARNED: AtomicBool = AtomicBool::new(false);
/// The process that mounted the pool: a `vfork` child runs in its memory
/// (no fork handler marks it) but has a pid of its own.
static MOUNT_PID: AtomicI32 = AtomicI32::new(0);
/// The umask, as this process last set it through `umask(2)` (read at
/// mount): created files' modes are masked with it.
static UMASK: AtomicU32 = AtomicU32::new(0o022);

/// The mounted pool, mounting it on first use. `Ok(None)`: it could not
/// be mounted (busy, say; said once on stderr): paths under the directory
/// go to the kernel. `Err(EIO)`: this is the child of a fork of the owner.
pub fn fs() -> Result<Option<&'static Fs>, libc::c_int> {
    if FORKED.load(Ordering::Relaxed) {
        if !FORK_WARNED.swap(true, Ordering::Relaxed) {
            say(&format!(
                "a forked child cannot use the pool its parent mounted at {} (EIO); exec a program to mount it anew",
                config().map_or_else(String::new, |c| c.at.display().to_string())
            ));
        }
        return Err(libc::EIO);
    }
    Ok(MOUNT.get_or_init(mount).as_ref())
}

fn mount() -> Option<Fs> {
    let cfg = config()?;
    let opts = match mount_options(&cfg.options) {
        Ok(o) => o,
        Err(e) => {
            say(&format!(
                "{e}; paths under {} go to the kernel",
                cfg.at.display()
            ));
            return None;
        }
    };
    match crate::own::mounting(|| mount_waiting_out_checks(&cfg.pool, &opts)) {
        Ok(fs) => {
            // SAFETY: umask only swaps the process's mask; it is put back
            // at once.
            let old = unsafe {
                let old = crate::real::umask()(0o022);
                crate::real::umask()(old);
                old
            };
            UMASK.store(old, Ordering::Relaxed);
            // SAFETY: getpid has no preconditions.
            MOUNT_PID.store(unsafe { libc::getpid() }, Ordering::Relaxed);
            // SAFETY: registering handlers that are plain `extern "C"`
            // functions of this library, which stays loaded.
            unsafe {
                libc::pthread_atfork(None, None, Some(after_fork_in_child));
                libc::atexit(at_exit);
            }
            Some(fs)
        }
        Err(e) => {
            say(&format!(
                "{e}; paths under {} go to the kernel",
                cfg.at.display()
            ));
            None
        }
    }
}

/// Mount `pool`; a pool that is busy for a moment is tried again for up
/// to two seconds. `manyfs run` itself mounts the pool briefly to see
/// whether another process owns it, and a program it started may reach
/// its first call under the directory while that check still holds the
/// pool; a real owner holds it longer and is then reported.
fn mount_waiting_out_checks(
    pool: &std::path::Path,
    opts: &manyfs::MountOptions,
) -> manyfs::Result<Fs> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        match Fs::mount(pool, opts) {
            Err(manyfs::Error::Busy { .. }) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            r => return r,
        }
    }
}

/// The library's options from the `-o` string, with the parser of
/// `manyfs mount` (options that only concern FUSE are accepted and mean
/// nothing here).
pub fn mount_options(list: &str) -> Result<MountOptions, String> {
    manyfs_fuse::FuseConfig::parse_options(&[list])
        .map(|c| c.fs)
        .map_err(|e| e.to_string())
}

/// The mask created files' modes go through.
pub fn umask() -> u32 {
    UMASK.load(Ordering::Relaxed)
}

/// Record a new umask (the interposed `umask`).
pub fn set_umask(mask: u32) {
    UMASK.store(mask & 0o777, Ordering::Relaxed);
}

extern "C" fn after_fork_in_child() {
    FORKED.store(true, Ordering::Relaxed);
}

/// The pool this process mounted, if it did and may write it: not in the
/// child of a fork, nor in a `vfork` child running in the owner's memory.
fn owned_mount() -> Option<&'static Fs> {
    if FORKED.load(Ordering::Relaxed) {
        return None;
    }
    let fs = MOUNT.get()?.as_ref()?;
    // SAFETY: getpid has no preconditions.
    (unsafe { libc::getpid() } == MOUNT_PID.load(Ordering::Relaxed)).then_some(fs)
}

/// Before `exec` replaces this process image: the stores of mapped files
/// written back and the pool synced, as at exit. The mount lives in the
/// image's memory, so without this every call since the last sync would be
/// lost with it, and the next image's mount (or the next run's) would
/// recover the pool to that sync: a file a shell wrote before `exec cat`
/// was not there for `cat`. `Err` (said on stderr): the pool could not be
/// synced, and the exec must not go on.
pub fn before_exec() -> Result<(), libc::c_int> {
    let Some(fs) = owned_mount() else {
        return Ok(());
    };
    let written = crate::shadow::write_back_all();
    let synced = written.and_then(|_| fs.sync().map_err(crate::errno_of));
    synced.inspect_err(|&e| {
        say(&format!(
            "the pool could not be synced before exec ({}); the exec is refused",
            std::io::Error::from_raw_os_error(e)
        ));
    })
}

/// Sync the pool at exit. glibc runs the exiting thread's thread-local
/// destructors before the `atexit` handlers, and the library's epoch
/// guards need thread-locals: a fresh thread does the sync.
extern "C" fn at_exit() {
    if FORKED.load(Ordering::Relaxed) || !matches!(MOUNT.get(), Some(Some(_))) {
        return;
    }
    let mut thread: libc::pthread_t = 0;
    // SAFETY: a plain thread running `sync_thread`, joined at once.
    unsafe {
        if libc::pthread_create(
            &mut thread,
            std::ptr::null(),
            sync_thread,
            std::ptr::null_mut(),
        ) == 0
        {
            libc::pthread_join(thread, std::ptr::null_mut());
        } else {
            say("cannot start the thread that syncs the pool at exit");
        }
    }
}

extern "C" fn sync_thread(_: *mut libc::c_void) -> *mut libc::c_void {
    if let Some(Some(fs)) = MOUNT.get() {
        // glibc flushes the streams after the `atexit` handlers: what the
        // program left in a stream of a file of the pool (`fopen`, or a
        // standard stream bound to one) would reach the pool after this
        // sync, and be lost. Flushed here first.
        // SAFETY: fflush(NULL) flushes every output stream; each is
        // locked by glibc while it is flushed.
        unsafe { libc::fflush(std::ptr::null_mut()) };
        if let Err(e) = crate::shadow::write_back_all() {
            say(&format!(
                "writing mapped files back at exit failed: {}",
                std::io::Error::from_raw_os_error(e)
            ));
        }
        if let Err(e) = fs.sync() {
            say(&format!("sync at exit failed: {e}"));
        }
    }
    std::ptr::null_mut()
}

/// One line on stderr, `manyfs run: MSG`.
pub fn say(msg: &str) {
    let line = format!("manyfs run: {msg}\n");
    // SAFETY: writes the bytes of a live buffer to stderr.
    unsafe { crate::real::write()(2, line.as_ptr().cast(), line.len()) };
}

/// A state the library cannot work in (libc lacks a symbol it forwards
/// to): say so and abort.
pub fn die(msg: &str) -> ! {
    let line = format!("manyfs run: {msg}\n");
    // SAFETY: the raw syscall, since forwarding itself failed.
    unsafe { libc::syscall(libc::SYS_write, 2, line.as_ptr(), line.len()) };
    std::process::abort()
}
