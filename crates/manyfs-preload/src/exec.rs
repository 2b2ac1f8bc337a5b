//! The exec family: the pool synced before this image is replaced, and a
//! warning for a new program this library cannot reach.
//!
//! **Sync.** The mount lives in the process image's memory: `execve`,
//! `execv`, `execvp`, `execvpe`, `execl`, `execlp`, `execle`, `fexecve`
//! and `execveat` first write mapped files back and sync the pool
//! (`state::before_exec`), so the new image, which mounts the pool anew,
//! finds every call the old one completed. `posix_spawn` and
//! `posix_spawnp` leave the caller's image in place and sync nothing.
//!
//! **Programs out of reach.** A statically linked or Go program never
//! calls libc's functions for its files (`manyfs_exec::bypass`), so its
//! calls under the run's directory go to the kernel, which knows nothing
//! there. Refusing the exec would break programs that never touch the
//! directory (a shell running a static `busybox`), so when the new
//! program's arguments (`DIR/x`, or `--opt=DIR/x`) or the working
//! directory lead under the directory, one line on stderr names the
//! program (once per executable in a process) and the exec goes on
//! unchanged. `fexecve` and `execveat` name no file to check by path and
//! are not checked.
//!
//! **Programs in the pool.** The kernel cannot load a file it does not
//! see: `execve` or `execv` of a path under the directory (and `execvp`,
//! `execvpe` of one with a `/`) copies the program out of the pool into an
//! anonymous memory file (`memfd_create`) and executes that
//! (`execveat(fd, "", ..., AT_EMPTY_PATH)`), after the same sync as every
//! exec. It must be a regular file with an execute bit (else `EACCES`). A
//! `#!` script is run as the kernel runs one: its interpreter (followed
//! through interpreters in the pool) gets the interpreter line's argument
//! and the path the script was run by, which it opens through this
//! library, so `$0` is that path. Only a script whose interpreter this
//! library cannot reach (statically linked) is copied into a memory file,
//! kept open across the exec: the kernel hands it over as `/dev/fd/N`,
//! which is then the script's `$0`. `execvp`, `execvpe` and `posix_spawnp` of a name
//! without `/` search `PATH` in order, the directories under the run's in
//! the pool. `posix_spawn` and `posix_spawnp` of a program in the pool
//! spawn the memory file as `/proc/self/fd/N`.
//!
//! `execl`, `execlp` and `execle` are variadic, which stable Rust cannot
//! define: each is a naked function that stores the argument registers
//! beside the caller's stack arguments and hands both to
//! [`from_variadic`], which gathers the list and calls `execv`, `execvp`
//! or `execve` above (x86-64 System V: a variadic call passes its
//! arguments as a fixed one does).

use crate::{errno, errno_of, mounted, paths, pool_path, real, set_errno, state};
use libc::{c_char, c_int, c_void, pid_t};
use std::ffi::{CStr, CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The executables warned about in this process.
static WARNED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Whether an argument leads under the directory: itself, or the value
/// of an `--option=value` one.
fn names_dir(arg: &[u8]) -> bool {
    paths::lexically_under(arg)
        || arg
            .iter()
            .position(|&c| c == b'=')
            .is_some_and(|i| paths::lexically_under(&arg[i + 1..]))
}

/// Whether the new program would work under the directory: the working
/// directory is there, or one of its arguments leads there.
///
/// # Safety
/// `argv` is null or a null-terminated array of NUL-terminated strings.
unsafe fn touches_dir(argv: *const *const c_char) -> bool {
    if paths::virtual_cwd().is_some() {
        return true;
    }
    // SAFETY: a null-terminated array (caller).
    if argv.is_null() || unsafe { *argv }.is_null() {
        return false;
    }
    // The arguments after the program's name.
    let mut i = 1;
    loop {
        // SAFETY: element `i` exists: element `i - 1` was not the
        // terminator.
        let arg = unsafe { *argv.add(i) };
        if arg.is_null() {
            return false;
        }
        // SAFETY: NUL-terminated (caller).
        if names_dir(unsafe { CStr::from_ptr(arg) }.to_bytes()) {
            return true;
        }
        i += 1;
    }
}

/// `PATH` less the directories under the run's directory (glibc's
/// `execvp` goes on past a directory where the kernel finds nothing).
fn kernel_path() -> Option<Vec<u8>> {
    // SAFETY: a NUL-terminated name; glibc's getenv takes no lock.
    let p = unsafe { libc::getenv(c"PATH".as_ptr()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: the environment's NUL-terminated value.
    let p = unsafe { CStr::from_ptr(p) }.to_bytes();
    let kept: Vec<&[u8]> = p
        .split(|&c| c == b':')
        .filter(|d| !paths::lexically_under(if d.is_empty() { b"." } else { d }))
        .collect();
    Some(kept.join(&b':'))
}

/// Warn once when the program exec'd at `program` (looked up on `PATH`
/// with `search`, as `execvp` looks) cannot be reached and works under
/// the directory. `errno` is kept.
///
/// # Safety
/// `program` is null or NUL-terminated; `argv` as for [`touches_dir`].
unsafe fn check(program: *const c_char, argv: *const *const c_char, search: bool) {
    let Some(cfg) = state::config() else {
        return;
    };
    // SAFETY: the caller's array.
    if program.is_null() || !unsafe { touches_dir(argv) } {
        return;
    }
    let saved = errno();
    // SAFETY: NUL-terminated (caller).
    let name = OsStr::from_bytes(unsafe { CStr::from_ptr(program) }.to_bytes());
    let found = if search {
        let path = kernel_path();
        manyfs_exec::find_program(name, path.as_deref().map(OsStr::from_bytes))
    } else {
        Some(PathBuf::from(name))
    };
    // A program in the pool is not the kernel's to run: its exec fails.
    if let Some(found) = found.filter(|f| !paths::lexically_under(f.as_os_str().as_bytes()))
        && let Some(u) = manyfs_exec::bypass(&found)
        && first_warning(&u.binary)
    {
        let via = if u.binary == found {
            String::new()
        } else {
            format!(": its interpreter {}", u.binary.display())
        };
        state::say(&format!(
            "{}{via} {}: its file calls under {} reach the kernel, which knows nothing there; run it on a FUSE mount of the pool (manyfs mount) instead",
            found.display(),
            u.why,
            cfg.at.display()
        ));
    }
    set_errno(saved);
}

/// Whether `binary` was not warned about before in this process.
fn first_warning(binary: &Path) -> bool {
    let mut warned = WARNED.lock().unwrap_or_else(|e| e.into_inner());
    if warned.iter().any(|w| w == binary) {
        return false;
    }
    warned.push(binary.to_path_buf());
    true
}

/// The steps of an exec that replaces this image: the pool synced
/// (`state::before_exec`; `Err` refuses the exec), the environment
/// prepared (`handoff::prepare`: what this image hands to the new
/// program), then `exec` with the environment to pass (`None`: the
/// caller's, unchanged). If the exec returns, it failed: the handed
/// descriptors go back to close-on-exec.
///
/// # Safety
/// `envp` is null (this process's environment) or a null-terminated array
/// of NUL-terminated strings.
unsafe fn replacing(
    envp: *const *const c_char,
    exec: impl FnOnce(Option<*const *const c_char>) -> c_int,
) -> c_int {
    if let Err(e) = state::before_exec() {
        set_errno(e);
        return -1;
    }
    // SAFETY: the caller's environment (contract above).
    match unsafe { crate::handoff::prepare(envp, true) } {
        None => exec(None),
        Some(env) => {
            let r = exec(Some(env.envp()));
            env.exec_failed();
            r
        }
    }
}

unsafe extern "C" {
    /// This process's environment.
    static environ: *const *const c_char;
}

/// A program of the pool, prepared to run: what the kernel executes, and
/// for a `#!` script the arguments that go before the caller's
/// `argv[1..]` (the interpreter, its argument, the script's path), as the
/// kernel builds them.
struct Prepared {
    /// What the kernel executes.
    run: Runnable,
    /// `None`: the caller's `argv` as it is; `Some(head)`: `head`, then the
    /// caller's `argv[1..]`.
    head: Option<Vec<CString>>,
}

/// What the kernel executes for a program of the pool.
enum Runnable {
    /// A memory file holding a copy of the program (close-on-exec unless
    /// it is a `#!` script, which the kernel hands its interpreter as
    /// `/dev/fd/N`).
    Memory(c_int),
    /// A program outside the pool, by path: a script's interpreter (it
    /// runs the script by the path the caller named, which it opens under
    /// the directory through this library), or where a symlink of the
    /// pool leads.
    Kernel(CString),
}

impl Prepared {
    /// The argument vector to execute with: the caller's `argv` (a
    /// null-terminated array of NUL-terminated strings), or `head` then
    /// the caller's `argv[1..]`. Points into `self.head` and `argv`.
    ///
    /// # Safety
    /// `argv` is null or a null-terminated array of NUL-terminated
    /// strings.
    unsafe fn argv(&self, argv: *const *const c_char) -> Vec<*const c_char> {
        let mut v: Vec<*const c_char> = Vec::new();
        let Some(head) = &self.head else {
            return v;
        };
        v.extend(head.iter().map(|a| a.as_ptr()));
        // SAFETY: a null-terminated array (caller): element 0 exists, and
        // element `i` does while element `i - 1` was not the terminator.
        if !argv.is_null() && !unsafe { *argv }.is_null() {
            let mut i = 1;
            loop {
                // SAFETY: as above.
                let a = unsafe { *argv.add(i) };
                if a.is_null() {
                    break;
                }
                v.push(a);
                i += 1;
            }
        }
        v.push(std::ptr::null());
        v
    }

    /// Closes the memory file, keeping `errno`.
    fn close(self) {
        if let Runnable::Memory(fd) = self.run {
            let saved = errno();
            // SAFETY: the memory file made for this exec or spawn; a
            // spawned child holds its own copy.
            unsafe { real::close()(fd) };
            set_errno(saved);
        }
    }
}

/// When `path` names a file under the directory: that program, prepared
/// to run (or why it cannot be run). `None` for a path the kernel
/// resolves.
///
/// # Safety
/// `path` is null or a NUL-terminated string.
unsafe fn pool_program(path: *const c_char) -> Option<Result<Prepared, c_int>> {
    // SAFETY: the caller's promise.
    let inner = match unsafe { paths::target_c(libc::AT_FDCWD, path) } {
        Ok(paths::Target::Ours(inner)) => inner,
        _ => return None,
    };
    // SAFETY: not null: it named a file under the directory.
    let named = unsafe { CStr::from_ptr(path) }.to_owned();
    Some(crate::with_live_tls(|| {
        mounted().and_then(|fs| prepare(fs, named, pool_path(&inner).to_path_buf()))
    }))
}

/// The program of the pool at `inner`, which the caller named `named`,
/// prepared to run. A `#!` script whose interpreter is outside the pool
/// and reached by this library runs that interpreter with the script's
/// path, as the kernel runs a script it sees: the script's `$0` is the
/// path it was run by, so a script that finds its files beside itself
/// (`dirname "$0"`, as `configure` does) finds them. An interpreter in the
/// pool is followed the same way (at most four, as the kernel's
/// `BINPRM_MAX_RECURSION`, then `ELOOP`). A symlink that leads out of the
/// pool runs what it leads to (the kernel's program, or the pool's
/// again). Any other program, and a script
/// whose interpreter the library cannot reach (statically linked), is
/// copied into a memory file.
fn prepare(fs: &manyfs::Fs, mut named: CString, mut inner: PathBuf) -> Result<Prepared, c_int> {
    let mut head: Option<Vec<CString>> = None;
    let mut interpreters = 0;
    // Each way out of the pool followed a symlink.
    for _ in 0..=crate::MAX_SYMLINKS {
        let file = match open_program(fs, &inner) {
            // A symlink led out of the pool: the program is where it led.
            Err(libc::EXDEV) => {
                let abs = crate::left_pool().ok_or(libc::EXDEV)?;
                let run = match paths::target(libc::AT_FDCWD, &abs)? {
                    paths::Target::Ours(i) => {
                        inner = pool_path(&i).to_path_buf();
                        continue;
                    }
                    paths::Target::KernelAt(a) => a,
                    paths::Target::Kernel => CString::new(abs).map_err(|_| libc::ENOENT)?,
                };
                return Ok(Prepared {
                    run: Runnable::Kernel(run),
                    head,
                });
            }
            r => r?,
        };
        let mut line = [0u8; manyfs_exec::SHEBANG_LEN];
        let n = read_head(&file, &mut line)?;
        if !line[..n].starts_with(b"#!") {
            let fd = copy_program(&file, &inner, false)?;
            return Ok(Prepared {
                run: Runnable::Memory(fd),
                head,
            });
        }
        let bang = manyfs_exec::shebang(&line[..n]).ok_or(libc::ENOEXEC)?;
        let interpreter =
            CString::new(bang.interpreter.as_os_str().as_bytes()).map_err(|_| libc::ENOEXEC)?;
        let mut next = vec![interpreter.clone()];
        if let Some(arg) = bang.arg {
            next.push(CString::new(arg.as_bytes()).map_err(|_| libc::ENOEXEC)?);
        }
        next.push(named);
        next.extend(head.iter().flat_map(|h| h.iter().skip(1).cloned()));
        match paths::target(libc::AT_FDCWD, interpreter.as_bytes()) {
            Ok(paths::Target::Ours(i)) => {
                interpreters += 1;
                if interpreters > MAX_INTERPRETERS {
                    return Err(libc::ELOOP);
                }
                named = interpreter;
                inner = pool_path(&i).to_path_buf();
                head = Some(next);
            }
            _ if manyfs_exec::bypass(&bang.interpreter).is_some() => {
                // The interpreter reads files through the kernel only:
                // hand it the script as a memory file.
                let fd = copy_program(&file, &inner, true)?;
                return Ok(Prepared {
                    run: Runnable::Memory(fd),
                    head,
                });
            }
            _ => {
                return Ok(Prepared {
                    run: Runnable::Kernel(interpreter),
                    head: Some(next),
                });
            }
        }
    }
    Err(libc::ELOOP)
}

/// How many `#!` interpreters in the pool are followed (Linux's limit of
/// nested interpreters, `BINPRM_MAX_RECURSION`, is 4).
const MAX_INTERPRETERS: usize = 4;

/// The program at `path` of the pool, opened to be read: a regular file
/// with an execute bit, else `EACCES`.
fn open_program(fs: &manyfs::Fs, path: &Path) -> Result<manyfs::File, c_int> {
    let meta = fs.metadata(path).map_err(errno_of)?;
    if !meta.is_file() || meta.mode & 0o111 == 0 {
        return Err(libc::EACCES);
    }
    manyfs::OpenOptions::new()
        .read(true)
        .open(fs, path)
        .map_err(errno_of)
}

/// Reads the start of `file` into `buf`; returns how many bytes it holds.
fn read_head(file: &manyfs::File, buf: &mut [u8]) -> Result<usize, c_int> {
    let mut n = 0;
    while n < buf.len() {
        match file.read_at(&mut buf[n..], n as u64).map_err(errno_of)? {
            0 => break,
            got => n += got,
        }
    }
    Ok(n)
}

/// `file` (the program at `path` of the pool) copied into a new memory
/// file: its descriptor, close-on-exec unless `script` (the kernel then
/// hands its interpreter the script as `/dev/fd/N`).
fn copy_program(file: &manyfs::File, path: &Path, script: bool) -> Result<c_int, c_int> {
    let name = path
        .file_name()
        .and_then(|n| CString::new(n.as_bytes()).ok())
        .unwrap_or_else(|| c"manyfs-program".into());
    let cloexec = if script { 0 } else { libc::MFD_CLOEXEC };
    // MFD_EXEC: executable even where `vm.memfd_noexec` makes memory files
    // non-executable by default; a kernel before 6.3 does not know it.
    const MFD_EXEC: libc::c_uint = 0x10;
    // SAFETY: a NUL-terminated name and valid flags.
    let mut fd = unsafe { libc::memfd_create(name.as_ptr(), cloexec | MFD_EXEC) };
    if fd < 0 && errno() == libc::EINVAL {
        // SAFETY: as above.
        fd = unsafe { libc::memfd_create(name.as_ptr(), cloexec) };
    }
    if fd < 0 {
        return Err(errno());
    }
    // Under the mmap threshold of glibc's allocator.
    let mut buf = vec![0u8; 64 << 10];
    let mut at = 0u64;
    let copied = loop {
        let n = match file.read_at(&mut buf, at) {
            Ok(0) => break Ok(()),
            Ok(n) => n,
            Err(e) => break Err(errno_of(e)),
        };
        // SAFETY: `buf[..n]` is initialised; `fd` is the new memory file.
        let w = unsafe { real::pwrite64()(fd, buf.as_ptr().cast(), n, at as libc::off_t) };
        if w != n as isize {
            break Err(if w < 0 { errno() } else { libc::EIO });
        }
        at += n as u64;
    };
    match copied {
        Ok(()) => Ok(fd),
        Err(e) => {
            // SAFETY: the descriptor made above, not handed out.
            unsafe { real::close()(fd) };
            Err(e)
        }
    }
}

/// Runs `program` (from [`pool_program`]) in place of this image, after
/// the sync of every exec; if that fails, closes its memory file and
/// returns -1 with `errno` set.
///
/// # Safety
/// `argv` and `envp` as for `execve(2)`, `envp` null for this process's
/// environment.
unsafe fn exec_program(
    program: Result<Prepared, c_int>,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    let program = match program {
        Ok(p) => p,
        Err(e) => {
            set_errno(e);
            return -1;
        }
    };
    // SAFETY: the caller's array.
    let args = unsafe { program.argv(argv) };
    let argv = if args.is_empty() { argv } else { args.as_ptr() };
    let r = match &program.run {
        // SAFETY: the caller's arguments; `environ` is this process's.
        Runnable::Memory(fd) => unsafe {
            replacing(envp, |e| {
                let env = e.unwrap_or(if envp.is_null() { environ } else { envp });
                libc::syscall(
                    libc::SYS_execveat,
                    *fd,
                    c"".as_ptr(),
                    argv,
                    env,
                    libc::AT_EMPTY_PATH,
                ) as c_int
            })
        },
        // SAFETY: as `execve`: the interpreter is the kernel's.
        Runnable::Kernel(interpreter) => unsafe {
            check(interpreter.as_ptr(), argv, false);
            replacing(envp, |e| {
                let env = e.unwrap_or(if envp.is_null() { environ } else { envp });
                real::execve()(interpreter.as_ptr(), argv, env)
            })
        },
    };
    program.close();
    r
}

/// The program `execvp` would run for `file` (no `/`) when it is stored in
/// the pool: the directories of `PATH` (glibc's default `/bin:/usr/bin`
/// when unset; an empty entry is the working directory) are searched in
/// order, those under the run's directory in the pool, the others in the
/// kernel; the first that holds an executable `file` decides. `None` when
/// that one is the kernel's, or none is: libc's `execvp` then searches
/// (past the directories under the run's, where the kernel finds nothing).
///
/// # Safety
/// `file` is a NUL-terminated string.
unsafe fn pool_program_on_path(file: *const c_char) -> Option<Result<Prepared, c_int>> {
    // SAFETY: the caller's promise.
    let name = unsafe { CStr::from_ptr(file) }.to_bytes();
    if name.is_empty() {
        return None;
    }
    // SAFETY: a NUL-terminated name; glibc's getenv takes no lock.
    let path = unsafe { libc::getenv(c"PATH".as_ptr()) };
    let path = if path.is_null() {
        &b"/bin:/usr/bin"[..]
    } else {
        // SAFETY: the environment's NUL-terminated value.
        unsafe { CStr::from_ptr(path) }.to_bytes()
    };
    for dir in path.split(|&c| c == b':') {
        let dir = if dir.is_empty() { &b"."[..] } else { dir };
        let mut full = dir.to_vec();
        full.push(b'/');
        full.extend_from_slice(name);
        match paths::target(libc::AT_FDCWD, &full) {
            Ok(paths::Target::Ours(inner)) => {
                // A symlink that leads out of the pool counts as found:
                // [`prepare`] runs what it leads to.
                let found = crate::with_live_tls(|| {
                    mounted().is_ok_and(|fs| match fs.metadata(pool_path(&inner)) {
                        Ok(m) => m.is_file() && m.mode & 0o111 != 0,
                        Err(e) => matches!(e, manyfs::Error::LeavesPool { .. }),
                    })
                });
                if found {
                    let named = CString::new(full).ok()?;
                    return Some(crate::with_live_tls(|| {
                        mounted().and_then(|fs| prepare(fs, named, pool_path(&inner).to_path_buf()))
                    }));
                }
            }
            _ => {
                let dir = OsStr::from_bytes(dir);
                if manyfs_exec::find_program(OsStr::from_bytes(name), Some(dir)).is_some() {
                    return None;
                }
            }
        }
    }
    None
}

/// The program in the pool `execvp` and `execvpe` run for `file`: by its
/// path when it has a `/`, else found through `PATH`.
///
/// # Safety
/// `file` is null or a NUL-terminated string.
unsafe fn pool_program_p(file: *const c_char) -> Option<Result<Prepared, c_int>> {
    // SAFETY: the caller's promise.
    unsafe {
        if file.is_null() {
            None
        } else if is_path(file) {
            pool_program(file)
        } else {
            pool_program_on_path(file)
        }
    }
}

/// Whether an `execvp` file name is a path (it has a `/`): no search.
///
/// # Safety
/// `file` is null or a NUL-terminated string.
unsafe fn is_path(file: *const c_char) -> bool {
    // SAFETY: the caller's promise.
    !file.is_null() && unsafe { CStr::from_ptr(file) }.to_bytes().contains(&b'/')
}

/// `execve(2)`.
///
/// # Safety
/// As `execve(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execve(
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    // SAFETY: the caller's arguments: a program of the pool run from
    // memory, any other checked, then to libc with the prepared
    // environment.
    unsafe {
        if let Some(program) = pool_program(path) {
            return exec_program(program, argv, envp);
        }
        check(path, argv, false);
        replacing(envp, |e| real::execve()(path, argv, e.unwrap_or(envp)))
    }
}

/// The program in the pool an exec of `file` runs: `execvp`'s (`search`)
/// or `execve`'s.
///
/// # Safety
/// `file` is null or a NUL-terminated string.
unsafe fn pool_program_for(file: *const c_char, search: bool) -> Option<Result<Prepared, c_int>> {
    // SAFETY: the caller's promise.
    unsafe {
        if search {
            pool_program_p(file)
        } else {
            pool_program(file)
        }
    }
}

/// `execv` (or, with `search`, `execvp`) with this process's environment:
/// a program of the pool run from memory, any other checked, then libc's
/// (`execve`/`execvpe` when the environment was prepared).
///
/// # Safety
/// As `execv(3)`.
unsafe fn exec_own_env(file: *const c_char, argv: *const *const c_char, search: bool) -> c_int {
    // SAFETY: as `execve`.
    unsafe {
        if let Some(program) = pool_program_for(file, search) {
            return exec_program(program, argv, std::ptr::null());
        }
        check(file, argv, search);
        replacing(std::ptr::null(), |e| match (e, search) {
            (Some(envp), false) => real::execve()(file, argv, envp),
            (Some(envp), true) => real::execvpe()(file, argv, envp),
            (None, false) => real::execv()(file, argv),
            (None, true) => real::execvp()(file, argv),
        })
    }
}

/// `execv(3)`.
///
/// # Safety
/// As `execv(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execv(path: *const c_char, argv: *const *const c_char) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { exec_own_env(path, argv, false) }
}

/// `execvp(3)`.
///
/// # Safety
/// As `execvp(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execvp(file: *const c_char, argv: *const *const c_char) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { exec_own_env(file, argv, true) }
}

/// `execvpe(3)`.
///
/// # Safety
/// As `execvpe(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execvpe(
    file: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    // SAFETY: as `execve`.
    unsafe {
        if let Some(program) = pool_program_p(file) {
            return exec_program(program, argv, envp);
        }
        check(file, argv, true);
        replacing(envp, |e| real::execvpe()(file, argv, e.unwrap_or(envp)))
    }
}

/// A `posix_spawn` of `program` (from [`pool_program`]): `spawn` gets
/// the path to execute and the argument vector. A memory file is
/// executed as `/proc/self/fd/N`, which the child, holding a copy of the
/// descriptor until its exec, can open; the parent's copy is closed
/// after. A script's interpreter is executed by its path. Returns what
/// `spawn` returns (an error number, or 0).
///
/// # Safety
/// `argv` is a null-terminated array of NUL-terminated strings.
unsafe fn spawn_program(
    program: Result<Prepared, c_int>,
    argv: *const *mut c_char,
    spawn: impl FnOnce(*const c_char, *const *mut c_char) -> c_int,
) -> c_int {
    let program = match program {
        Ok(p) => p,
        Err(e) => return e,
    };
    // SAFETY: the caller's array.
    let args = unsafe { program.argv(argv.cast()) };
    let argv = if args.is_empty() {
        argv
    } else {
        args.as_ptr().cast()
    };
    let r = match &program.run {
        Runnable::Memory(fd) => {
            let path = CString::new(format!("/proc/self/fd/{fd}")).expect("no NUL");
            spawn(path.as_ptr(), argv)
        }
        Runnable::Kernel(interpreter) => {
            // SAFETY: a NUL-terminated path and the array built above.
            unsafe { check(interpreter.as_ptr(), argv.cast(), false) };
            spawn(interpreter.as_ptr(), argv)
        }
    };
    program.close();
    r
}

/// `posix_spawn(3)` and `posix_spawnp(3)`: a program of the pool spawned
/// from memory (as `execve` runs one), any other checked, the pool let go if
/// this process has nothing of it in use (`state::release_if_idle`: the
/// new program can then mount it), the working directory passed on in the
/// environment (`handoff::prepare`, without descriptors: this process
/// keeps its own), then libc's.
macro_rules! spawn_checked {
    ($( $what:literal $name:ident(program $prog:ident, search $search:literal); )*) => {$(
        #[doc = concat!("`", $what, "`.")]
        ///
        /// # Safety
        #[doc = concat!("As `", $what, "`.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(
            pid: *mut pid_t,
            $prog: *const c_char,
            actions: *const c_void,
            attr: *const c_void,
            argv: *const *mut c_char,
            envp: *const *mut c_char,
        ) -> c_int {
            // SAFETY: the caller's arguments: checked, then to libc with
            // the prepared environment.
            unsafe {
                if let Some(program) = pool_program_for($prog, $search) {
                    // The path is resolved: no search.
                    return spawn_program(program, argv, |path, argv| {
                        state::release_if_idle();
                        let spawn = real::posix_spawn();
                        match crate::handoff::prepare(envp.cast(), false) {
                            Some(env) => spawn(pid, path, actions, attr, argv, env.envp().cast()),
                            None => spawn(pid, path, actions, attr, argv, envp),
                        }
                    });
                }
                check($prog, argv.cast(), $search);
                state::release_if_idle();
                match crate::handoff::prepare(envp.cast(), false) {
                    Some(env) => real::$name()(pid, $prog, actions, attr, argv, env.envp().cast()),
                    None => real::$name()(pid, $prog, actions, attr, argv, envp),
                }
            }
        }
    )*};
}

spawn_checked! {
    "posix_spawn(3)" posix_spawn(program path, search false);
    "posix_spawnp(3)" posix_spawnp(program file, search true);
}

/// `vfork(2)` as `fork`: a `vfork` child runs in its parent's memory and
/// runs no fork handlers, so the pool could be neither let go before it
/// (`state::release_if_idle`) nor told apart in it. `fork` gives the child
/// a copy, which is all a `vfork` caller may rely on (the child only execs
/// or exits); shells that `vfork` (dash) then run their commands on the
/// pool as forking ones do.
#[unsafe(no_mangle)]
pub extern "C" fn vfork() -> pid_t {
    // SAFETY: fork; its fork handlers are this library's and glibc's.
    unsafe { libc::fork() }
}

/// `system(3)` and `popen(3)`: the pool let go first if this process has
/// nothing of it in use, so that the shell they start can mount it.
///
/// # Safety
/// As `system(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn system(command: *const c_char) -> c_int {
    state::release_if_idle();
    // SAFETY: the caller's argument, unchanged, to libc.
    unsafe { real::system()(command) }
}

/// `popen(3)`: as [`system`].
///
/// # Safety
/// As `popen(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn popen(command: *const c_char, mode: *const c_char) -> *mut libc::FILE {
    state::release_if_idle();
    // SAFETY: the caller's arguments, unchanged, to libc.
    unsafe { real::popen()(command, mode) }
}

/// `fexecve(3)`: as `execve`, unchecked (it names no file).
///
/// # Safety
/// As `fexecve(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fexecve(
    fd: c_int,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    // SAFETY: the caller's arguments to libc with the prepared environment.
    unsafe { replacing(envp, |e| real::fexecve()(fd, argv, e.unwrap_or(envp))) }
}

/// `execveat(2)`: as `execve`, unchecked.
///
/// # Safety
/// As `execveat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execveat(
    dirfd: c_int,
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
    flags: c_int,
) -> c_int {
    // SAFETY: the caller's arguments to libc with the prepared environment.
    unsafe {
        replacing(envp, |e| {
            real::execveat()(dirfd, path, argv, e.unwrap_or(envp), flags)
        })
    }
}

/// Which list-taking exec a naked entry point stands for (its fourth
/// argument to [`from_variadic`]): `execl(path, arg, ..., NULL)`, served
/// by `execv`.
const LIST_L: u32 = 0;
/// `execlp(file, arg, ..., NULL)`: `execvp`.
const LIST_LP: u32 = 1;
/// `execle(path, arg, ..., NULL, envp)`: `execve`.
const LIST_LE: u32 = 2;

/// The arguments of a variadic exec call after its first: five from
/// registers (`regs`, in order), then the caller's stack (`stack`), read
/// up to the terminating null (and, for `execle`, the environment after
/// it).
///
/// # Safety
/// `regs` holds five words; `stack` is where the caller put its stack
/// arguments, and the caller passed a null-terminated list (plus `envp`
/// for `execle`), so every word read up to there is one it passed.
unsafe fn gather(
    regs: *const *const c_char,
    stack: *const *const c_char,
    with_env: bool,
) -> (Vec<*const c_char>, *const *const c_char) {
    let word = |i: usize| -> *const c_char {
        // SAFETY: `i` is at most one past the terminator (caller).
        unsafe {
            if i < 5 {
                *regs.add(i)
            } else {
                *stack.add(i - 5)
            }
        }
    };
    let mut argv = Vec::new();
    let mut i = 0;
    loop {
        let a = word(i);
        argv.push(a);
        i += 1;
        if a.is_null() {
            break;
        }
    }
    let envp = if with_env {
        word(i).cast::<*const c_char>()
    } else {
        std::ptr::null()
    };
    (argv, envp)
}

/// The common body of `execl`, `execlp` and `execle`: the list gathered
/// (see [`gather`]), then `execv`, `execvp` or `execve` of this library.
///
/// # Safety
/// As [`gather`]; `path` as the exec call's first argument.
unsafe extern "C" fn from_variadic(
    path: *const c_char,
    regs: *const *const c_char,
    stack: *const *const c_char,
    kind: u32,
) -> c_int {
    // SAFETY: forwarded from the naked entry point (caller's contract).
    let (argv, envp) = unsafe { gather(regs, stack, kind == LIST_LE) };
    // SAFETY: `argv` is a null-terminated array of the caller's strings.
    unsafe {
        match kind {
            LIST_L => execv(path, argv.as_ptr()),
            LIST_LP => execvp(path, argv.as_ptr()),
            _ => execve(path, argv.as_ptr(), envp),
        }
    }
}

/// A naked variadic exec entry point: the five argument registers after
/// the first are stored in order on the stack, then [`from_variadic`] is
/// called with the path (`rdi`, untouched), their address, the address of
/// the caller's stack arguments and `$kind`.
macro_rules! list_exec {
    ($( $what:literal $name:ident $kind:ident; )*) => {$(
        #[doc = concat!("`", $what, "` (variadic: see the module's text).")]
        ///
        /// # Safety
        #[doc = concat!("As `", $what, "`: a null-terminated list of NUL-terminated strings.")]
        #[cfg(target_arch = "x86_64")]
        #[unsafe(naked)]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name() -> c_int {
            // Entry: rsp + 8 is the caller's first stack argument, and
            // rsp is 8 past a 16-byte boundary; 56 bytes keep the call
            // below aligned.
            core::arch::naked_asm!(
                "sub rsp, 56",
                "mov [rsp], rsi",
                "mov [rsp + 8], rdx",
                "mov [rsp + 16], rcx",
                "mov [rsp + 24], r8",
                "mov [rsp + 32], r9",
                "mov rsi, rsp",
                "lea rdx, [rsp + 64]",
                "mov ecx, {kind}",
                "call {gather}",
                "add rsp, 56",
                "ret",
                gather = sym from_variadic,
                kind = const $kind,
            )
        }
    )*};
}

list_exec! {
    "execl(3)" execl LIST_L;
    "execlp(3)" execlp LIST_LP;
    "execle(3)" execle LIST_LE;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_a_run_nothing_names_the_directory() {
        assert!(!names_dir(b"/x/y"));
        assert!(!names_dir(b"--out=/x/y"));
    }
}
