//! Deciding whether a path names something under the run's directory:
//! lexical normalisation (`.`, `..`, `//`), the real or virtual working
//! directory, and the directory descriptors a relative path starts at.

use crate::state::{self, config};
use crate::table;
use libc::c_int;
use std::ffi::CStr;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;
use std::sync::RwLock;

/// The working directory while it is under the run's directory (the
/// kernel's stays where it was): absolute, normalised.
static VIRTUAL_CWD: RwLock<Option<Vec<u8>>> = RwLock::new(None);

/// Where a path leads.
#[derive(Debug, PartialEq, Eq)]
pub enum Target {
    /// Not under the directory (or the pool is not mounted): the kernel's.
    Kernel,
    /// The kernel's, but its lexical route went through the directory
    /// (`DIR/../x`): the kernel, which does not know the directory, gets
    /// the normalised absolute path instead.
    KernelAt(std::ffi::CString),
    /// Under it: the path inside the pool (`/` is the pool's root), with a
    /// trailing slash kept.
    Ours(Vec<u8>),
}

/// `path` (absolute) with `.`, `..` and repeated slashes resolved
/// lexically; `None` for a relative path. A trailing slash is dropped.
pub fn normalize(path: &[u8]) -> Option<PathBuf> {
    let mut out = Vec::new();
    join_into(&mut out, path)?;
    Some(PathBuf::from(std::ffi::OsStr::from_bytes(&out)))
}

/// Apply `path` to the normalised absolute `out` (`/` or `/a/b`): an
/// absolute `path` starts over. `None` if `out` is empty and `path` is
/// relative.
fn join_into(out: &mut Vec<u8>, path: &[u8]) -> Option<()> {
    if path.starts_with(b"/") {
        out.clear();
    }
    if out.is_empty() {
        if !path.starts_with(b"/") {
            return None;
        }
        out.push(b'/');
    }
    for comp in path.split(|&c| c == b'/') {
        match comp {
            b"" | b"." => {}
            b".." => {
                let cut = out.iter().rposition(|&c| c == b'/').unwrap_or(0);
                out.truncate(cut.max(1));
            }
            name => {
                if out.len() > 1 {
                    out.push(b'/');
                }
                out.extend_from_slice(name);
            }
        }
    }
    Some(())
}

/// `abs` (normalised) inside the pool: `/` for the directory itself,
/// `/rest` below it; `None` outside.
fn inside(abs: &[u8], at: &[u8]) -> Option<Vec<u8>> {
    let rest = abs.strip_prefix(at)?;
    if rest.is_empty() {
        return Some(b"/".to_vec());
    }
    if at == b"/" {
        return Some(abs.to_vec());
    }
    rest.starts_with(b"/").then(|| rest.to_vec())
}

/// Whether a relative path could lead under the directory from a kernel
/// directory: only through a `..` or a component named as the directory.
fn may_reach(rel: &[u8], at_name: &[u8]) -> bool {
    rel.split(|&c| c == b'/')
        .any(|c| c == b".." || (!at_name.is_empty() && c == at_name))
}

/// Whether walking `path` from `base` (normalised absolute, or empty for
/// an absolute `path`) is inside `at` after some component.
fn passes_through(base: &[u8], path: &[u8], at: &[u8]) -> bool {
    let mut cur = base.to_vec();
    if path.starts_with(b"/") {
        cur.clear();
        cur.push(b'/');
    }
    path.split(|&c| c == b'/')
        .any(|comp| join_into(&mut cur, comp).is_some() && inside(&cur, at).is_some())
}

/// Where `path`, relative to `dirfd` (`AT_FDCWD`: the working directory)
/// if it is relative, leads. `Err(EIO)` in a forked child of the pool's
/// owner; under the directory, when the pool could not be mounted,
/// `Err` of [`state::mount_errno`] (`EBUSY` for a pool in use).
pub fn target(dirfd: c_int, path: &[u8]) -> Result<Target, c_int> {
    if state::surely_outside_before_config(path) {
        return Ok(Target::Kernel);
    }
    let Some(cfg) = config() else {
        return Ok(Target::Kernel);
    };
    if path.is_empty() {
        return Ok(Target::Kernel);
    }
    let at = cfg.at.as_os_str().as_bytes();
    let mut abs: Vec<u8> = Vec::new();
    if !path.starts_with(b"/") {
        if dirfd == libc::AT_FDCWD {
            let vcwd = VIRTUAL_CWD.read().unwrap_or_else(|e| e.into_inner());
            match &*vcwd {
                Some(v) => abs.clone_from(v),
                None if !may_reach(path, cfg.at_name.as_bytes()) => return Ok(Target::Kernel),
                None => abs = real_cwd().ok_or(libc::ENOENT)?,
            }
        } else if let Some(open) = table::get(dirfd) {
            abs.clone_from(&open.path);
        } else if !may_reach(path, cfg.at_name.as_bytes()) {
            return Ok(Target::Kernel);
        } else {
            abs = fd_path(dirfd).ok_or(libc::EBADF)?;
        }
    }
    // From a base in the pool (the virtual working directory, a directory
    // of ours) the kernel knows nothing of the base: a path that leaves
    // the pool goes to it absolute.
    let through =
        inside(&abs, at).is_some() || (may_reach(path, b"") && passes_through(&abs, path, at));
    join_into(&mut abs, path).ok_or(libc::ENOENT)?;
    let Some(mut inner) = inside(&abs, at) else {
        if through {
            return Ok(std::ffi::CString::new(abs).map_or(Target::Kernel, Target::KernelAt));
        }
        return Ok(Target::Kernel);
    };
    if state::fs()?.is_none() {
        return Err(state::mount_errno());
    }
    if path.ends_with(b"/") && inner.len() > 1 {
        inner.push(b'/');
    }
    Ok(Target::Ours(inner))
}

/// `path` made absolute and normalised, lexically: a relative one from
/// the virtual working directory, else from the kernel's, whose look-up
/// (a `/proc` read) is made only if `worth_cwd` says the answer may
/// depend on it. `None` outside a run, for an empty path, or when the
/// path cannot be made absolute (or is not worth it).
fn lexical_abs(
    path: &[u8],
    worth_cwd: impl FnOnce(&state::Config) -> bool,
) -> Option<(Vec<u8>, &'static state::Config)> {
    let cfg = config()?;
    if path.is_empty() {
        return None;
    }
    let mut abs = Vec::new();
    if !path.starts_with(b"/") {
        abs = match virtual_cwd() {
            Some(v) => v,
            None if !worth_cwd(cfg) => return None,
            None => real_cwd()?,
        };
    }
    join_into(&mut abs, path)?;
    Some((abs, cfg))
}

/// Whether the run's directory lies below `path` (a kernel directory
/// above it: a walk from there reaches it), lexically, from the working
/// directory when relative.
pub fn holds_dir(path: &[u8]) -> bool {
    lexical_abs(path, |_| true).is_some_and(|(abs, cfg)| {
        let at = cfg.at.as_os_str().as_bytes();
        at != abs.as_slice() && inside(at, &abs).is_some()
    })
}

/// Whether `path` leads under the run's directory, from the (virtual or
/// kernel's) working directory when relative: lexically only, without
/// mounting the pool, and without failing in a forked child (for checks
/// that only warn).
pub fn lexically_under(path: &[u8]) -> bool {
    // From a kernel directory only a `..` or the directory's own name can
    // lead under it.
    lexical_abs(path, |cfg| may_reach(path, cfg.at_name.as_bytes()))
        .is_some_and(|(abs, cfg)| inside(&abs, cfg.at.as_os_str().as_bytes()).is_some())
}

/// [`target`] of a C string.
///
/// # Safety
/// `path` is null or points at a NUL-terminated string.
pub unsafe fn target_c(dirfd: c_int, path: *const libc::c_char) -> Result<Target, c_int> {
    if path.is_null() {
        return Ok(Target::Kernel);
    }
    // SAFETY: the caller's promise.
    let bytes = unsafe { CStr::from_ptr(path) }.to_bytes();
    target(dirfd, bytes)
}

/// The absolute path (under the directory) of pool path `inner`.
pub fn outer(inner: &[u8]) -> Vec<u8> {
    let at = config().map_or(&b"/"[..], |c| c.at.as_os_str().as_bytes());
    let mut out = at.to_vec();
    join_into(&mut out, &inner[1.min(inner.len())..]);
    out
}

/// The kernel's working directory.
pub fn real_cwd() -> Option<Vec<u8>> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: a buffer of the length given.
    let p = unsafe { crate::real::getcwd()(buf.as_mut_ptr().cast(), buf.len()) };
    if p.is_null() {
        return None;
    }
    let n = buf.iter().position(|&c| c == 0)?;
    buf.truncate(n);
    Some(buf)
}

/// The path a kernel descriptor was opened at (`/proc/self/fd/N`).
fn fd_path(fd: c_int) -> Option<Vec<u8>> {
    std::fs::read_link(format!("/proc/self/fd/{fd}"))
        .ok()
        .map(|p| p.into_os_string().into_vec())
}

/// The virtual working directory, if the working directory is under the
/// run's directory.
pub fn virtual_cwd() -> Option<Vec<u8>> {
    VIRTUAL_CWD
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
}

/// Enter (`Some`, absolute under the directory) or leave (`None`) the
/// virtual working directory.
pub fn set_virtual_cwd(dir: Option<Vec<u8>>) {
    *VIRTUAL_CWD.write().unwrap_or_else(|e| e.into_inner()) = dir;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(p: &str) -> String {
        normalize(p.as_bytes()).unwrap().display().to_string()
    }

    #[test]
    fn normalisation_is_lexical() {
        assert_eq!(norm("/a//b/./c/"), "/a/b/c");
        assert_eq!(norm("/a/b/../../.."), "/");
        assert_eq!(norm("/a/../b"), "/b");
        assert_eq!(norm("//"), "/");
        assert!(normalize(b"a/b").is_none());
    }

    #[test]
    fn inside_matches_whole_components() {
        assert_eq!(inside(b"/mnt/x", b"/mnt"), Some(b"/x".to_vec()));
        assert_eq!(inside(b"/mnt", b"/mnt"), Some(b"/".to_vec()));
        assert_eq!(inside(b"/mntx", b"/mnt"), None);
        assert_eq!(inside(b"/other", b"/mnt"), None);
    }

    #[test]
    fn a_route_through_the_directory_is_seen() {
        assert!(passes_through(b"", b"/mnt/../etc", b"/mnt"));
        assert!(!passes_through(b"", b"/etc/../tmp", b"/mnt"));
        assert!(passes_through(b"/", b"mnt/..", b"/mnt"));
    }

    #[test]
    fn only_dotdot_or_the_name_may_reach_the_directory() {
        assert!(!may_reach(b"a/b", b"mnt"));
        assert!(may_reach(b"a/../b", b"mnt"));
        assert!(may_reach(b"mnt/f", b"mnt"));
    }

    #[test]
    fn pool_paths_map_back_under_the_directory() {
        let mut out = b"/mnt".to_vec();
        join_into(&mut out, b"a/b").unwrap();
        assert_eq!(out, b"/mnt/a/b");
    }
}
