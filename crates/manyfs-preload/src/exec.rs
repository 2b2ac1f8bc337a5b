//! `execve`, `execv`, `execvp`, `execvpe`, `posix_spawn`, `posix_spawnp`:
//! a warning for a new program this library cannot reach. A statically
//! linked or Go program never calls libc's functions for its files
//! (`manyfs_exec::bypass`), so its calls under the run's directory go to
//! the kernel, which knows nothing there. Refusing the exec would break
//! programs that never touch the directory (a shell running a static
//! `busybox`), so when the new program's arguments (`DIR/x`, or
//! `--opt=DIR/x`) or the working directory lead under the directory, one
//! line on stderr names the program (once per executable in a process)
//! and the exec goes on unchanged. `execl`, `execlp` and `execle` are
//! variadic (stable Rust cannot define them) and `fexecve` names no file:
//! they are not checked.

use crate::{errno, paths, real, set_errno, state};
use libc::{c_char, c_int, c_void, pid_t};
use std::ffi::{CStr, OsStr};
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

/// Exec entry points: the program checked (`check`), then libc's own
/// call with the caller's arguments.
macro_rules! checked {
    ($( $what:literal $name:ident($($arg:ident: $t:ty),*) program $prog:ident, argv $argv:ident, search $search:literal; )*) => {$(
        #[doc = concat!("`", $what, "`.")]
        ///
        /// # Safety
        #[doc = concat!("As `", $what, "`.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name($($arg: $t),*) -> c_int {
            // SAFETY: the caller's arguments: checked, then to libc
            // unchanged.
            unsafe {
                check($prog, $argv.cast(), $search);
                real::$name()($($arg),*)
            }
        }
    )*};
}

checked! {
    "execve(2)" execve(path: *const c_char, argv: *const *const c_char, envp: *const *const c_char)
        program path, argv argv, search false;
    "execv(3)" execv(path: *const c_char, argv: *const *const c_char)
        program path, argv argv, search false;
    "execvp(3)" execvp(file: *const c_char, argv: *const *const c_char)
        program file, argv argv, search true;
    "execvpe(3)" execvpe(file: *const c_char, argv: *const *const c_char, envp: *const *const c_char)
        program file, argv argv, search true;
    "posix_spawn(3)" posix_spawn(pid: *mut pid_t, path: *const c_char, actions: *const c_void,
        attr: *const c_void, argv: *const *mut c_char, envp: *const *mut c_char)
        program path, argv argv, search false;
    "posix_spawnp(3)" posix_spawnp(pid: *mut pid_t, file: *const c_char, actions: *const c_void,
        attr: *const c_void, argv: *const *mut c_char, envp: *const *mut c_char)
        program file, argv argv, search true;
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
