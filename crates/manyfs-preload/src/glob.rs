//! `glob` and `glob64` on patterns under the run's directory. glibc's
//! glob opens, reads and stats directories through internal calls this
//! library cannot see; for a pattern whose directory part leads under the
//! directory (or through it, `DIR/../x/*`) it is called with
//! `GLOB_ALTDIRFUNC` and this library's `opendir`, `readdir`, `closedir`,
//! `stat` and `lstat`, which serve the pool and pass every other path to
//! libc: the matching, the flags, the sorting and the result stay
//! glibc's own. The caller's `glob_t` gets back its own `gl_flags` bit and
//! function pointers. A caller's own `GLOB_ALTDIRFUNC`, and every other
//! pattern, go to libc's `glob` unchanged.

use crate::paths::{self, Target};
use crate::real;
use libc::{c_char, c_int, c_void, dirent64, size_t, stat as Stat};
use std::ffi::CStr;

/// glibc's `glob_t` (and `glob64_t`, the same on x86-64).
#[repr(C)]
pub struct Glob {
    gl_pathc: size_t,
    gl_pathv: *mut *mut c_char,
    gl_offs: size_t,
    gl_flags: c_int,
    gl_closedir: Option<unsafe extern "C" fn(*mut c_void)>,
    gl_readdir: Option<unsafe extern "C" fn(*mut c_void) -> *mut dirent64>,
    gl_opendir: Option<unsafe extern "C" fn(*const c_char) -> *mut c_void>,
    gl_lstat: Option<unsafe extern "C" fn(*const c_char, *mut Stat) -> c_int>,
    gl_stat: Option<unsafe extern "C" fn(*const c_char, *mut Stat) -> c_int>,
}

/// `glob`'s error callback.
pub type GlobErrFn = Option<unsafe extern "C" fn(*const c_char, c_int) -> c_int>;

// <glob.h>.
const GLOB_NOESCAPE: c_int = 1 << 6;
const GLOB_ALTDIRFUNC: c_int = 1 << 9;
const GLOB_BRACE: c_int = 1 << 10;
const GLOB_TILDE: c_int = 1 << 12;
const GLOB_TILDE_CHECK: c_int = 1 << 14;

/// The directory a pattern's matching starts from: the part before the
/// last `/` ahead of its first special character (`*`, `?`, `[`, `\`
/// unless `GLOB_NOESCAPE`, `{` with `GLOB_BRACE`, a leading `~` with
/// `GLOB_TILDE`), `/` for a root one, `.` for none; the whole pattern
/// when it has no special character.
fn start_dir(pattern: &[u8], flags: c_int) -> &[u8] {
    if flags & (GLOB_TILDE | GLOB_TILDE_CHECK) != 0 && pattern.starts_with(b"~") {
        return b".";
    }
    let special = |c: u8| match c {
        b'*' | b'?' | b'[' => true,
        b'\\' => flags & GLOB_NOESCAPE == 0,
        b'{' => flags & GLOB_BRACE != 0,
        _ => false,
    };
    let Some(first) = pattern.iter().position(|&c| special(c)) else {
        return pattern;
    };
    match pattern[..first].iter().rposition(|&c| c == b'/') {
        Some(0) => b"/",
        Some(i) => &pattern[..i],
        None => b".",
    }
}

/// `gl_opendir`: this library's `opendir`.
unsafe extern "C" fn alt_opendir(path: *const c_char) -> *mut c_void {
    // SAFETY: glob passes a NUL-terminated directory name.
    unsafe { crate::dirs::opendir(path) }.cast()
}

/// `gl_readdir`: this library's `readdir`.
unsafe extern "C" fn alt_readdir(dirp: *mut c_void) -> *mut dirent64 {
    // SAFETY: a stream `alt_opendir` returned.
    unsafe { crate::dirs::readdir64(dirp.cast()) }
}

/// `gl_closedir`: this library's `closedir`.
unsafe extern "C" fn alt_closedir(dirp: *mut c_void) {
    // SAFETY: a stream `alt_opendir` returned, closed once.
    unsafe { crate::dirs::closedir(dirp.cast()) };
}

/// `gl_stat`: this library's `stat`.
unsafe extern "C" fn alt_stat(path: *const c_char, st: *mut Stat) -> c_int {
    // SAFETY: glob passes a NUL-terminated path and a `stat` buffer.
    unsafe { crate::meta::stat(path, st) }
}

/// `gl_lstat`: this library's `lstat`.
unsafe extern "C" fn alt_lstat(path: *const c_char, st: *mut Stat) -> c_int {
    // SAFETY: glob passes a NUL-terminated path and a `stat` buffer.
    unsafe { crate::meta::lstat(path, st) }
}

/// `glob(3)`.
///
/// # Safety
/// As `glob(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn glob(
    pattern: *const c_char,
    flags: c_int,
    errfunc: GlobErrFn,
    pglob: *mut Glob,
) -> c_int {
    // libc answers a null pattern or `glob_t` (`EINVAL`) and the caller's
    // own directory functions.
    if pattern.is_null() || pglob.is_null() || flags & GLOB_ALTDIRFUNC != 0 {
        // SAFETY: the caller's arguments, unchanged, to libc.
        return unsafe { real::glob()(pattern, flags, errfunc, pglob) };
    }
    // SAFETY: a NUL-terminated pattern (caller), checked non-null.
    let pat = unsafe { CStr::from_ptr(pattern) }.to_bytes();
    let start = start_dir(pat, flags);
    // A pattern that starts above the directory may match into it
    // (`/parent/*/x`): glibc's own calls would not enter it.
    if matches!(paths::target(libc::AT_FDCWD, start), Ok(Target::Kernel))
        && !paths::holds_dir(start)
    {
        // SAFETY: the caller's arguments, unchanged, to libc.
        return unsafe { real::glob()(pattern, flags, errfunc, pglob) };
    }
    // SAFETY: `pglob` is the caller's `glob_t`, checked non-null; its
    // fields are read and written only while libc's glob is not running.
    unsafe {
        let g = &mut *pglob;
        let saved = (
            g.gl_closedir,
            g.gl_readdir,
            g.gl_opendir,
            g.gl_lstat,
            g.gl_stat,
        );
        g.gl_closedir = Some(alt_closedir);
        g.gl_readdir = Some(alt_readdir);
        g.gl_opendir = Some(alt_opendir);
        g.gl_lstat = Some(alt_lstat);
        g.gl_stat = Some(alt_stat);
        let r = real::glob()(pattern, flags | GLOB_ALTDIRFUNC, errfunc, pglob);
        let g = &mut *pglob;
        (
            g.gl_closedir,
            g.gl_readdir,
            g.gl_opendir,
            g.gl_lstat,
            g.gl_stat,
        ) = saved;
        g.gl_flags &= !GLOB_ALTDIRFUNC;
        r
    }
}

/// `glob64(3)` (the same call on x86-64).
///
/// # Safety
/// As `glob(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn glob64(
    pattern: *const c_char,
    flags: c_int,
    errfunc: GlobErrFn,
    pglob: *mut Glob,
) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { glob(pattern, flags, errfunc, pglob) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_is_the_directory_before_the_first_special_character() {
        assert_eq!(start_dir(b"/mnt/a/*.c", 0), b"/mnt/a");
        assert_eq!(start_dir(b"/mnt/x*/y", 0), b"/mnt");
        assert_eq!(start_dir(b"/*", 0), b"/");
        assert_eq!(start_dir(b"*.c", 0), b".");
        assert_eq!(start_dir(b"/mnt/f", 0), b"/mnt/f");
        assert_eq!(start_dir(b"/mnt/{a,b}", 0), b"/mnt/{a,b}");
        assert_eq!(start_dir(b"/mnt/{a,b}", GLOB_BRACE), b"/mnt");
        assert_eq!(start_dir(b"/mnt/a\\*", 0), b"/mnt");
        assert_eq!(start_dir(b"/mnt/a\\b", GLOB_NOESCAPE), b"/mnt/a\\b");
        assert_eq!(start_dir(b"~/x/*", GLOB_TILDE), b".");
    }
}
