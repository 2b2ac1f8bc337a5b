//! The process's view of the run: where the pool is mounted (from the
//! environment `manyfs run` sets), the mount itself (made on first use),
//! and what happens at fork and exit.

use manyfs::{Fs, MountOptions};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Mutex, Once, OnceLock};

/// Environment: the pool file.
pub const ENV_POOL: &str = "MANYFS_RUN_POOL";
/// Environment: the absolute directory the pool appears at (a C string:
/// also read with libc's `getenv`, [`surely_outside_before_config`]).
pub const ENV_AT: &std::ffi::CStr = c"MANYFS_RUN_AT";
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
            let at = std::env::var_os(std::ffi::OsStr::from_bytes(ENV_AT.to_bytes()))?;
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

/// Whether an absolute `path` surely does not lead under the run's
/// directory, told without allocating while [`config`] is not read yet
/// (`false`: ask [`config`]). A process's first file calls may come from
/// inside its allocator's own start: jemalloc (in `rustc`, for one)
/// `readlink`s `/etc/malloc.conf` while it holds its init lock, so any
/// allocation there (reading the configuration does) waits for itself.
/// Only a normalised path and directory are compared; anything else goes
/// the long way.
pub fn surely_outside_before_config(path: &[u8]) -> bool {
    if CONFIG.get().is_some() || !is_normal(path) {
        return false;
    }
    // SAFETY: a NUL-terminated name; glibc's `getenv` neither allocates
    // nor locks.
    let at = unsafe { libc::getenv(ENV_AT.as_ptr()) };
    if at.is_null() {
        // Outside a run every call is the kernel's.
        return true;
    }
    // SAFETY: the environment's NUL-terminated value.
    let at = unsafe { std::ffi::CStr::from_ptr(at) }.to_bytes();
    if !is_normal(at) || at == b"/" {
        return false;
    }
    match path.strip_prefix(at) {
        Some(rest) => !(rest.is_empty() || rest.starts_with(b"/")),
        None => true,
    }
}

/// Whether `path` is absolute and normalised: no empty, `.` or `..`
/// component, no trailing slash (except `/` itself).
fn is_normal(path: &[u8]) -> bool {
    path == b"/"
        || (path.starts_with(b"/")
            && path[1..]
                .split(|&c| c == b'/')
                .all(|c| !c.is_empty() && c != b"." && c != b".."))
}

/// The mounted pool, a leaked box; null while none is (before the first
/// call under the directory, and after [`release_if_idle`] let it go).
static MOUNT: AtomicPtr<Fs> = AtomicPtr::new(std::ptr::null_mut());
/// Set when a mount failed (said once on stderr): calls on paths under
/// the directory fail with [`MOUNT_ERRNO`]. A forked child tries again.
static MOUNT_FAILED: AtomicBool = AtomicBool::new(false);
/// Why the mount failed, as the errno calls under the directory answer
/// then: `EBUSY` for a pool another process has in use, else the
/// error's.
static MOUNT_ERRNO: AtomicI32 = AtomicI32::new(libc::EIO);
/// Held while mounting or releasing.
static MOUNTING: Mutex<()> = Mutex::new(());
/// The fork and exit handlers, registered at the first mount.
static HANDLERS: Once = Once::new();
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
/// Walks that call the program back (`nftw`, `scandir`) while they hold
/// the mount: the program may fork from its callback.
static WALKING: AtomicUsize = AtomicUsize::new(0);

/// The mount as a reference.
///
/// # Safety
/// `p` is null or the pointer [`MOUNT`] holds.
unsafe fn as_fs(p: *mut Fs) -> Option<&'static Fs> {
    // SAFETY: a non-null `MOUNT` points at a leaked box, freed only by
    // `release_if_idle`, which runs when no reference can be held: one
    // thread of the program, inside `fork`, with nothing of the pool open
    // (no descriptor, stream, mapping or walk).
    unsafe { p.as_ref() }
}

/// The mounted pool, mounting it on first use (and again after it was
/// released before a fork). `Ok(None)`: it could not be mounted (busy,
/// say; said once on stderr): calls on paths under the directory fail
/// with [`mount_errno`]. `Err(EIO)`: this is the child of a fork of the
/// owner.
pub fn fs() -> Result<Option<&'static Fs>, libc::c_int> {
    if FORKED.load(Ordering::Relaxed) {
        if !FORK_WARNED.swap(true, Ordering::Relaxed) {
            say(&format!(
                "a forked child cannot use the pool its parent has in use at {} (EIO: the parent had files of it open, or other threads, when it forked)",
                config().map_or_else(String::new, |c| c.at.display().to_string())
            ));
        }
        return Err(libc::EIO);
    }
    // SAFETY: the pointer `MOUNT` holds.
    if let Some(fs) = unsafe { as_fs(MOUNT.load(Ordering::Acquire)) } {
        return Ok(Some(fs));
    }
    if MOUNT_FAILED.load(Ordering::Relaxed) {
        return Ok(None);
    }
    let _m = MOUNTING.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: as above.
    if let Some(fs) = unsafe { as_fs(MOUNT.load(Ordering::Acquire)) } {
        return Ok(Some(fs));
    }
    if MOUNT_FAILED.load(Ordering::Relaxed) {
        return Ok(None);
    }
    match mount() {
        Some(fs) => {
            let p = Box::into_raw(Box::new(fs));
            MOUNT.store(p, Ordering::Release);
            // SAFETY: the pointer just stored.
            Ok(unsafe { as_fs(p) })
        }
        None => {
            MOUNT_FAILED.store(true, Ordering::Relaxed);
            Ok(None)
        }
    }
}

/// The errno a call on a path under the directory answers when the pool
/// could not be mounted ([`fs`] answered `Ok(None)`): `EBUSY` when
/// another process has it in use. Never the kernel's answer: the kernel
/// knows nothing under the directory, and a relative path from the
/// virtual working directory would name a file of the kernel's own
/// working directory, somewhere else entirely.
pub fn mount_errno() -> libc::c_int {
    MOUNT_ERRNO.load(Ordering::Relaxed)
}

/// A walk that calls the program back while it holds the mount: the
/// mount is not released before a fork meanwhile.
pub(crate) struct Walking(());

impl Walking {
    /// Count a walk in.
    pub(crate) fn start() -> Walking {
        WALKING.fetch_add(1, Ordering::AcqRel);
        Walking(())
    }
}

impl Drop for Walking {
    fn drop(&mut self) {
        WALKING.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Before a fork: if this process mounted the pool and nothing of it is in
/// use, the pool is synced and closed, so that the child (a shell's
/// command, typically) can mount it itself; this process mounts it again
/// on its next call under the directory. Nothing of it in use: this is the
/// program's only thread (the mount's own commit and placement threads
/// aside), no `fts` stream, mapping or walk of the pool is open, and every
/// descriptor of it can be parked (`handoff::park_all`; a directory
/// stream's too: the stream holds its listing). Otherwise the pool stays
/// mounted here and the
/// child cannot use it (`FORKED`).
pub(crate) fn release_if_idle() {
    let _m = MOUNTING.lock().unwrap_or_else(|e| e.into_inner());
    let p = MOUNT.load(Ordering::Acquire);
    let Some(fs) = owned_mount() else {
        return;
    };
    // Directory streams hold their listings in memory: their descriptors
    // are parked as files are (`handoff::park_all`). An `fts` walk holds
    // nothing of the pool between calls (it reads each directory whole).
    if crate::shadow::any_mapped()
        || WALKING.load(Ordering::Acquire) > 0
        || !only_program_thread()
        || (crate::table::open_count() > 0 && !crate::handoff::park_all(fs))
    {
        return;
    }
    MOUNT.store(std::ptr::null_mut(), Ordering::Release);
    // SAFETY: `p` came from `Box::into_raw` in `fs` and, taken out of
    // `MOUNT` above, is freed once; nothing holds a reference (the checks
    // above: see `as_fs`).
    let fs = unsafe { Box::from_raw(p) };
    // The mount's own descriptors are closed by its threads (the commit
    // thread may drop it last), which the program's `close` would refuse.
    let closed = crate::own::releasing(|| fs.close(std::time::Duration::from_secs(10)));
    if let Err(e) = closed {
        say(&format!("closing the pool before a fork failed: {e}"));
    }
}

/// Whether the calling thread is the program's only one (the mount's own
/// threads, named `manyfs-*`, aside). `false` when `/proc` cannot tell.
fn only_program_thread() -> bool {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return false;
    };
    let mut program = 0;
    for t in tasks {
        let Ok(t) = t else {
            return false;
        };
        // A task whose name cannot be read has exited meanwhile (the
        // commit threads of earlier mounts leave within 50 ms).
        let Ok(comm) = std::fs::read(t.path().join("comm")) else {
            continue;
        };
        if !comm.starts_with(b"manyfs-") {
            program += 1;
        }
    }
    program == 1
}

fn mount() -> Option<Fs> {
    let cfg = config()?;
    let opts = match mount_options(&cfg.options) {
        Ok(o) => o,
        Err(e) => {
            MOUNT_ERRNO.store(libc::EINVAL, Ordering::Relaxed);
            say(&format!(
                "{e}; calls under {} fail (EINVAL)",
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
            // functions of this library, which stays loaded; once per
            // process image (a child inherits its parent's).
            HANDLERS.call_once(|| unsafe {
                libc::pthread_atfork(Some(before_fork), None, Some(after_fork_in_child));
                libc::atexit(at_exit);
            });
            Some(fs)
        }
        Err(e) => {
            let errno = match e {
                manyfs::Error::Busy { .. } => libc::EBUSY,
                ref e => e.errno(),
            };
            MOUNT_ERRNO.store(errno, Ordering::Relaxed);
            let why = if errno == libc::EBUSY {
                "EBUSY".to_string()
            } else {
                format!("errno {errno}")
            };
            say(&format!(
                "{e}; calls under {} fail ({why})",
                cfg.at.display()
            ));
            None
        }
    }
}

/// How long a busy pool is tried again while the process that holds it
/// spends no CPU time: `manyfs run`'s own check holds it for a moment,
/// and a holder that is blocked (on a pipe this process should read, or
/// on a child that waits for this one) would otherwise never let it go.
const STALLED_HOLDER: std::time::Duration = std::time::Duration::from_secs(2);
/// The longest wait for a busy pool whose holder keeps running.
const LONGEST_WAIT: std::time::Duration = std::time::Duration::from_secs(600);
/// After this long a waiting process says whom it waits for.
const SAY_WAITING: std::time::Duration = std::time::Duration::from_secs(2);

/// Mount `pool`, waiting for another process of the run that holds it as
/// long as that process runs (its CPU time grows) and has not held it
/// past [`LONGEST_WAIT`] since this wait began: processes that work on
/// DIR side by side (the compilers of `make -j`) then take turns. A
/// holder that stalls for [`STALLED_HOLDER`] (blocked on something, maybe
/// on this very process) ends the wait with `Busy`; so does a holder
/// `/proc/locks` cannot name, after the same time.
fn mount_waiting_out_checks(
    pool: &std::path::Path,
    opts: &manyfs::MountOptions,
) -> manyfs::Result<Fs> {
    use std::time::{Duration, Instant};
    let start = Instant::now();
    // The holder and its CPU time when last seen, and when that changed.
    let mut seen: Option<(u32, u64)> = None;
    let mut moved = start;
    let mut said = false;
    loop {
        let owner = match Fs::mount(pool, opts) {
            Err(manyfs::Error::Busy { owner, .. }) => owner,
            r => return r,
        };
        let now = Instant::now();
        let holder = owner.and_then(|pid| cpu_ticks(pid).map(|t| (pid, t)));
        if holder.is_some() && holder != seen {
            seen = holder;
            moved = now;
        }
        if now - moved >= STALLED_HOLDER || now - start >= LONGEST_WAIT {
            return Fs::mount(pool, opts);
        }
        if let Some(pid) = owner
            && !said
            && now - start >= SAY_WAITING
        {
            say(&format!(
                "waiting for process {pid}, which has the pool in use and is running"
            ));
            said = true;
        }
        std::thread::sleep(Duration::from_millis(if said { 50 } else { 20 }));
    }
}

/// The CPU time process `pid` has spent (user and system, all its
/// threads, in clock ticks), from `/proc/PID/stat`; `None` when it is
/// gone or cannot be read.
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name, which may hold spaces and `)`.
    let after = stat.iter().rposition(|&c| c == b')')?;
    let mut fields = stat[after + 1..]
        .split(|&c| c == b' ')
        .filter(|f| !f.is_empty());
    // `utime` and `stime` are fields 14 and 15; `state` (3) comes first.
    let utime = fields.nth(11)?;
    let stime = fields.next()?;
    let parse = |f: &[u8]| std::str::from_utf8(f).ok()?.parse::<u64>().ok();
    Some(parse(utime)? + parse(stime)?)
}

/// The library's options from the `-o` string, with the parser of
/// `manyfs mount` (options that only concern FUSE are accepted and mean
/// nothing here).
/// The pool is seen at the run's directory, so its symlinks may lead out
/// of it, as a kernel mount's do ([`MountOptions::symlinks_leave_pool`]).
pub fn mount_options(list: &str) -> Result<MountOptions, String> {
    manyfs_fuse::FuseConfig::parse_options(&[list])
        .map(|c| {
            let mut fs = c.fs;
            fs.symlinks_leave_pool = true;
            fs
        })
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

extern "C" fn before_fork() {
    release_if_idle();
}

extern "C" fn after_fork_in_child() {
    // Marked only if the parent kept the pool mounted: after a release
    // the child mounts the pool itself (and a child whose parent could
    // not mount it tries again).
    FORKED.store(!MOUNT.load(Ordering::Relaxed).is_null(), Ordering::Relaxed);
    MOUNT_FAILED.store(false, Ordering::Relaxed);
}

/// The pool this process mounted, if it did and may write it: not in the
/// child of a fork, nor in a `vfork` child running in the owner's memory.
fn owned_mount() -> Option<&'static Fs> {
    if FORKED.load(Ordering::Relaxed) {
        return None;
    }
    // SAFETY: the pointer `MOUNT` holds.
    let fs = unsafe { as_fs(MOUNT.load(Ordering::Acquire)) }?;
    // SAFETY: getpid has no preconditions.
    (unsafe { libc::getpid() } == MOUNT_PID.load(Ordering::Relaxed)).then_some(fs)
}

/// Whether this is the child of a fork made while the parent had the pool
/// in use (it must not write the copy of the mount it holds).
pub fn forked() -> bool {
    FORKED.load(Ordering::Relaxed)
}

/// Whether this process mounted the pool and may write it (see
/// `owned_mount`).
pub fn owns_mount() -> bool {
    owned_mount().is_some()
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

/// `_exit(2)`: the pool synced first (not the streams: `_exit` leaves what
/// they buffer unwritten, as everywhere). On a kernel file system what a
/// process wrote reaches the page cache and outlives an `_exit`; here it
/// lives in the process image until a sync. dash leaves with `_exit`, so
/// `sh -c 'echo hi > DIR/f'` lost `f`; forked children that fail to exec
/// leave with it too.
#[unsafe(no_mangle)]
pub extern "C" fn _exit(status: libc::c_int) -> ! {
    sync_before_leaving();
    // SAFETY: libc's `_exit`, which does not return.
    unsafe { crate::real::_exit()(status) };
    unreachable!("_exit returned")
}

/// `_Exit(3)`: as [`_exit`].
#[unsafe(no_mangle)]
pub extern "C" fn _Exit(status: libc::c_int) -> ! {
    _exit(status)
}

/// The pool synced (mapped files written back first) before the process
/// leaves without the `atexit` handlers; a failure is said on stderr.
fn sync_before_leaving() {
    let Some(fs) = owned_mount() else {
        return;
    };
    let synced = crate::with_live_tls(|| {
        crate::shadow::write_back_all().and_then(|_| fs.sync().map_err(crate::errno_of))
    });
    if let Err(e) = synced {
        say(&format!(
            "the pool could not be synced at _exit ({})",
            std::io::Error::from_raw_os_error(e)
        ));
    }
}

/// Sync the pool at exit. glibc runs the exiting thread's thread-local
/// destructors before the `atexit` handlers, and the library's epoch
/// guards need thread-locals: a fresh thread does the sync.
extern "C" fn at_exit() {
    if owned_mount().is_none() {
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
    if let Some(fs) = owned_mount() {
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

#[cfg(test)]
mod tests {
    use super::cpu_ticks;
    use std::time::{Duration, Instant};

    /// The CPU time a busy-waiting process reads for a holder grows while
    /// that process runs; a process that is gone reads `None`.
    #[test]
    fn cpu_ticks_grow_while_a_process_runs() {
        let me = std::process::id();
        let before = cpu_ticks(me).expect("this process's stat");
        let start = Instant::now();
        let mut spun = 0u64;
        while cpu_ticks(me) == Some(before) && start.elapsed() < Duration::from_secs(10) {
            spun = std::hint::black_box(spun.wrapping_add(1));
        }
        assert!(
            cpu_ticks(me).unwrap() > before,
            "no tick after {spun} rounds"
        );
        assert_eq!(cpu_ticks(u32::MAX), None);
    }
}
