//! `realpath`, `canonicalize_file_name` and glibc's fortified
//! `__realpath_chk`. glibc resolves a path with internal `lstat` and
//! `readlink` calls this library cannot see, so under the run's directory
//! it would answer `ENOENT`; here a path that leads there is normalised
//! lexically (as every call here does: `DIR/sub/..` is `DIR`) and its
//! symlinks are then followed in the pool; one that leads out of it (an
//! absolute target, or `..` above the pool's root) goes on from there, as
//! the kernel follows a mount's symlinks, in the pool again or in libc's
//! `realpath`. The answer names the file `open` of the same path opens.
//! Other paths go to libc's.

use crate::paths::{self, Target};
use crate::{errno_of, mounted, pool_path, real};
use libc::{c_char, c_int, size_t};
use manyfs::Fs;
use std::collections::VecDeque;
use std::os::unix::ffi::OsStrExt;

use crate::MAX_SYMLINKS;

/// The components of `path`, empty ones included (they mark a trailing
/// slash, after which a non-directory is `ENOTDIR`).
fn components(path: &[u8]) -> impl DoubleEndedIterator<Item = Vec<u8>> + '_ {
    path.split(|&c| c == b'/').map(<[u8]>::to_vec)
}

/// Where a path of the pool leads with every symlink on the way followed.
pub(crate) enum Canonical {
    /// The canonical pool path of what it names.
    Pool(Vec<u8>),
    /// A symlink led out of the pool: the absolute path (not normalised)
    /// to go on from.
    Outside(Vec<u8>),
}

/// `inner` (a pool path) with every symlink on the way followed, the
/// last one too: the canonical pool path of what it names, which must
/// exist (`ENOENT`, `ENOTDIR`, `ELOOP` otherwise), or where a symlink
/// (an absolute target, or `..` above the root) led out of the pool.
pub(crate) fn canonical(fs: &Fs, inner: &[u8]) -> Result<Canonical, c_int> {
    let mut rest: VecDeque<Vec<u8>> = components(inner).collect();
    let mut cur = b"/".to_vec();
    let mut links = 0;
    // `head`, then the components not walked yet.
    let outside = |mut head: Vec<u8>, rest: &VecDeque<Vec<u8>>| {
        for c in rest {
            head.push(b'/');
            head.extend_from_slice(c);
        }
        Canonical::Outside(head)
    };
    while let Some(c) = rest.pop_front() {
        match &c[..] {
            b"" | b"." => continue,
            b".." if cur == b"/" => {
                let mut up = crate::state::config()
                    .ok_or(libc::ENOENT)?
                    .at
                    .as_os_str()
                    .as_bytes()
                    .to_vec();
                up.extend_from_slice(b"/..");
                return Ok(outside(up, &rest));
            }
            b".." => {
                let cut = cur.iter().rposition(|&b| b == b'/').unwrap_or(0);
                cur.truncate(cut.max(1));
                continue;
            }
            _ => {}
        }
        let mut next = cur.clone();
        if next.len() > 1 {
            next.push(b'/');
        }
        next.extend_from_slice(&c);
        let m = fs.symlink_metadata(pool_path(&next)).map_err(errno_of)?;
        if m.is_symlink() {
            links += 1;
            if links > MAX_SYMLINKS {
                return Err(libc::ELOOP);
            }
            let target = fs.read_link(pool_path(&next)).map_err(errno_of)?;
            let target = target.as_os_str().as_bytes();
            if target.is_empty() {
                return Err(libc::ENOENT);
            }
            if target.starts_with(b"/") {
                return Ok(outside(target.to_vec(), &rest));
            }
            for t in components(target).rev() {
                rest.push_front(t);
            }
        } else if !m.is_dir() && !rest.is_empty() {
            return Err(libc::ENOTDIR);
        } else {
            cur = next;
        }
    }
    Ok(Canonical::Pool(cur))
}

/// Who answers `realpath` of a path.
enum Answer {
    /// libc, given the caller's path or (`Some`) the normalised absolute
    /// one when its route went through the directory.
    Libc(Option<std::ffi::CString>),
    /// This library: the canonical absolute path under the directory.
    Ours(Vec<u8>),
}

/// Who answers `realpath` of `path`, and, when it is ours, the answer.
///
/// # Safety
/// `path` is a NUL-terminated string.
unsafe fn answer(path: *const c_char) -> Result<Answer, c_int> {
    // SAFETY: the caller's promise.
    match unsafe { paths::target_c(libc::AT_FDCWD, path) }? {
        Target::Kernel => Ok(Answer::Libc(None)),
        Target::KernelAt(abs) => Ok(Answer::Libc(Some(abs))),
        Target::Ours(mut inner) => {
            let fs = mounted()?;
            // Each way out of the pool followed a symlink.
            for _ in 0..=MAX_SYMLINKS {
                let abs = match canonical(fs, &inner)? {
                    Canonical::Pool(p) => return Ok(Answer::Ours(paths::outer(&p))),
                    Canonical::Outside(abs) => abs,
                };
                match paths::target(libc::AT_FDCWD, &abs)? {
                    Target::Ours(i) => inner = i,
                    Target::KernelAt(a) => return Ok(Answer::Libc(Some(a))),
                    Target::Kernel => {
                        let abs = std::ffi::CString::new(abs).map_err(|_| libc::ENOENT)?;
                        return Ok(Answer::Libc(Some(abs)));
                    }
                }
            }
            Err(libc::ELOOP)
        }
    }
}

/// Copy `abs` with its NUL into `resolved`, or into memory from `malloc`
/// when it is null (`ENAMETOOLONG` at `PATH_MAX` bytes or more).
///
/// # Safety
/// `resolved` is null or has room for `PATH_MAX` bytes.
unsafe fn put(abs: &[u8], resolved: *mut c_char) -> Result<*mut c_char, c_int> {
    if abs.len() >= libc::PATH_MAX as usize {
        return Err(libc::ENAMETOOLONG);
    }
    let out = if resolved.is_null() {
        // SAFETY: malloc of a non-zero size; the caller frees it.
        let p = unsafe { libc::malloc(abs.len() + 1) }.cast::<c_char>();
        if p.is_null() {
            return Err(libc::ENOMEM);
        }
        p
    } else {
        resolved
    };
    // SAFETY: `out` has room for `abs.len() + 1` bytes (checked above or
    // just allocated).
    unsafe {
        std::ptr::copy_nonoverlapping(abs.as_ptr(), out.cast::<u8>(), abs.len());
        *out.add(abs.len()) = 0;
    }
    Ok(out)
}

/// `realpath(3)`.
///
/// # Safety
/// As `realpath(3)`: `path` is NUL-terminated, `resolved` null or
/// `PATH_MAX` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn realpath(path: *const c_char, resolved: *mut c_char) -> *mut c_char {
    if path.is_null() {
        return crate::ret(Err(libc::EINVAL));
    }
    // SAFETY: forwarded from the caller.
    let r = unsafe { answer(path) }.and_then(|a| match a {
        // SAFETY: the caller's arguments (or the normalised path) to libc.
        Answer::Libc(None) => Ok(unsafe { real::realpath()(path, resolved) }),
        // SAFETY: as above.
        Answer::Libc(Some(abs)) => Ok(unsafe { real::realpath()(abs.as_ptr(), resolved) }),
        // SAFETY: `resolved` is null or `PATH_MAX` bytes (caller).
        Answer::Ours(abs) => unsafe { put(&abs, resolved) },
    });
    crate::ret(r)
}

/// `canonicalize_file_name(3)`: `realpath` into fresh memory.
///
/// # Safety
/// As `realpath(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn canonicalize_file_name(path: *const c_char) -> *mut c_char {
    // SAFETY: forwarded from the caller.
    unsafe { realpath(path, std::ptr::null_mut()) }
}

/// glibc's fortified `realpath` (`resolvedlen` is the size of the
/// caller's buffer; under `PATH_MAX` glibc reports the overflow).
///
/// # Safety
/// As `realpath(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __realpath_chk(
    path: *const c_char,
    resolved: *mut c_char,
    resolvedlen: size_t,
) -> *mut c_char {
    if resolvedlen < libc::PATH_MAX as size_t {
        // SAFETY: libc's check reports the overflow.
        return unsafe { real::__realpath_chk()(path, resolved, resolvedlen) };
    }
    // SAFETY: forwarded from the caller.
    unsafe { realpath(path, resolved) }
}

#[cfg(test)]
mod tests {
    use super::components;

    #[test]
    fn components_keep_a_trailing_slash() {
        let c: Vec<Vec<u8>> = components(b"/a/b/").collect();
        assert_eq!(
            c,
            vec![b"".to_vec(), b"a".to_vec(), b"b".to_vec(), b"".to_vec()]
        );
    }
}
