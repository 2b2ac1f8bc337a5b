//! Unique temporary names: `mkstemp`, `mkostemp`, `mkstemps`, `mkostemps`
//! (and their `64` names) and `mkdtemp`.
//!
//! glibc makes the name and then creates the file or directory with its
//! own internal `open` and `mkdir`, which no interposition sees: under the
//! directory the kernel would answer `ENOENT` (git's first `git init`
//! failed so). For a template under the directory the name is made here,
//! as glibc makes it (the six `X`s before the suffix replaced by letters
//! and digits, up to `TMP_MAX` tries while the name exists), and created
//! through this library's `openat` (`O_RDWR | O_CREAT | O_EXCL`, mode
//! 0600) or `mkdirat` (mode 0700). Every other template goes to libc.

use crate::{files, names, paths, real, set_errno};
use libc::{c_char, c_int};

/// Tries before giving up with `EEXIST` (glibc's `TMP_MAX`).
const TRIES: u32 = 238_328;
/// The characters a name is made of (glibc's).
const LETTERS: &[u8; 62] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/// Whether `template` (NUL-terminated) names a path under the directory.
///
/// # Safety
/// `template` is null or a NUL-terminated string.
unsafe fn under_dir(template: *const c_char) -> bool {
    // SAFETY: the caller's promise.
    matches!(
        unsafe { paths::target_c(libc::AT_FDCWD, template) },
        Ok(paths::Target::Ours(_))
    )
}

/// Random bits for a name: the kernel's, or the clock's if it has none to
/// give without blocking.
fn random_bits() -> u64 {
    let mut v = 0u64;
    // SAFETY: 8 writable bytes of `v`.
    let n = unsafe { libc::getrandom((&raw mut v).cast(), 8, libc::GRND_NONBLOCK) };
    if n != 8 {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        v = (t.as_nanos() as u64) ^ (u64::from(std::process::id()) << 32);
    }
    v
}

/// The six `X`s of `name` (a template's bytes, the last `suffix` of them
/// kept) replaced with letters and digits drawn from `bits`; `EINVAL`
/// when there are no six `X`s right before the suffix.
fn fill(name: &mut [u8], suffix: usize, mut bits: u64) -> Result<(), c_int> {
    let end = name.len().checked_sub(suffix).ok_or(libc::EINVAL)?;
    let start = end.checked_sub(6).ok_or(libc::EINVAL)?;
    let xs = &mut name[start..end];
    for c in xs {
        *c = LETTERS[(bits % 62) as usize];
        bits /= 62;
    }
    Ok(())
}

/// Makes a unique name in `template` (under the directory) and creates it
/// with `create(name, arg)`, which returns a non-negative value on success and -1
/// with `errno` set on failure; -1 and `EEXIST` after [`TRIES`] names
/// that existed.
///
/// # Safety
/// `template` is a writable NUL-terminated string.
unsafe fn make(
    template: *mut c_char,
    suffix: c_int,
    create: unsafe fn(*const c_char, c_int) -> c_int,
    arg: c_int,
) -> c_int {
    // SAFETY: the caller's promise.
    let len = unsafe { libc::strlen(template) };
    // SAFETY: `len` bytes before the NUL, writable (the caller's promise).
    let name = unsafe { std::slice::from_raw_parts_mut(template.cast::<u8>(), len) };
    let Ok(suffix) = usize::try_from(suffix) else {
        set_errno(libc::EINVAL);
        return -1;
    };
    let valid = len
        .checked_sub(suffix)
        .and_then(|end| end.checked_sub(6).map(|start| &name[start..end]))
        .is_some_and(|xs| xs == b"XXXXXX");
    if !valid {
        set_errno(libc::EINVAL);
        return -1;
    }
    for _ in 0..TRIES {
        if let Err(e) = fill(name, suffix, random_bits()) {
            set_errno(e);
            return -1;
        }
        // SAFETY: `template` holds a NUL-terminated name.
        let r = unsafe { create(template, arg) };
        if r >= 0 || crate::errno() != libc::EEXIST {
            return r;
        }
    }
    set_errno(libc::EEXIST);
    -1
}

/// Creates file `path` for the `mkstemp` family: `flags` as `openat`
/// takes them, mode 0600.
///
/// # Safety
/// `path` is a NUL-terminated string.
unsafe fn create_file(path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: the caller's promise.
    unsafe { files::openat(libc::AT_FDCWD, path, flags, 0o600) }
}

/// Creates directory `path` for `mkdtemp`, mode 0700.
///
/// # Safety
/// `path` is a NUL-terminated string.
unsafe fn create_dir(path: *const c_char, _: c_int) -> c_int {
    // SAFETY: the caller's promise.
    unsafe { names::mkdirat(libc::AT_FDCWD, path, 0o700) }
}

/// A file made by the `mkstemp` family under the directory.
///
/// # Safety
/// `template` is a writable NUL-terminated string.
unsafe fn make_file(template: *mut c_char, suffix: c_int, flags: c_int) -> c_int {
    let flags = (flags & !libc::O_ACCMODE) | libc::O_RDWR | libc::O_CREAT | libc::O_EXCL;
    // SAFETY: the caller's promise.
    unsafe { make(template, suffix, create_file, flags) }
}

/// `mkostemps(3)`, and through it the rest of the family.
///
/// # Safety
/// As `mkostemps(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkostemps(template: *mut c_char, suffix: c_int, flags: c_int) -> c_int {
    // SAFETY: the caller's promise about `template`.
    if unsafe { under_dir(template) } {
        // SAFETY: as above.
        return unsafe { make_file(template, suffix, flags) };
    }
    // SAFETY: the caller's arguments, unchanged, to libc.
    unsafe { real::mkostemps()(template, suffix, flags) }
}

/// `mkostemps64(3)`.
///
/// # Safety
/// As `mkostemps(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkostemps64(template: *mut c_char, suffix: c_int, flags: c_int) -> c_int {
    // SAFETY: forwarded from the caller (the same call on 64-bit).
    unsafe { mkostemps(template, suffix, flags) }
}

/// `mkstemp(3)`.
///
/// # Safety
/// As `mkstemp(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkstemp(template: *mut c_char) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { mkostemps(template, 0, 0) }
}

/// `mkstemp64(3)`.
///
/// # Safety
/// As `mkstemp(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkstemp64(template: *mut c_char) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { mkostemps(template, 0, 0) }
}

/// `mkostemp(3)`.
///
/// # Safety
/// As `mkostemp(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkostemp(template: *mut c_char, flags: c_int) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { mkostemps(template, 0, flags) }
}

/// `mkostemp64(3)`.
///
/// # Safety
/// As `mkostemp(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkostemp64(template: *mut c_char, flags: c_int) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { mkostemps(template, 0, flags) }
}

/// `mkstemps(3)`.
///
/// # Safety
/// As `mkstemps(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkstemps(template: *mut c_char, suffix: c_int) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { mkostemps(template, suffix, 0) }
}

/// `mkstemps64(3)`.
///
/// # Safety
/// As `mkstemps(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkstemps64(template: *mut c_char, suffix: c_int) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { mkostemps(template, suffix, 0) }
}

/// `mkdtemp(3)`.
///
/// # Safety
/// As `mkdtemp(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkdtemp(template: *mut c_char) -> *mut c_char {
    // SAFETY: the caller's promise about `template`.
    if !unsafe { under_dir(template) } {
        // SAFETY: the caller's argument, unchanged, to libc.
        return unsafe { real::mkdtemp()(template) };
    }
    // SAFETY: as above.
    let r = unsafe { make(template, 0, create_dir, 0) };
    if r < 0 {
        std::ptr::null_mut()
    } else {
        template
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_six_xs_before_the_suffix_become_letters_and_digits() {
        let mut name = b"/d/tmp.XXXXXX.log".to_vec();
        fill(&mut name, 4, u64::MAX).unwrap();
        assert!(name.starts_with(b"/d/tmp."));
        assert!(name.ends_with(b".log"));
        assert!(name[7..13].iter().all(|c| c.is_ascii_alphanumeric()));
        let mut other = b"/d/tmp.XXXXXX.log".to_vec();
        fill(&mut other, 4, 12345).unwrap();
        assert_ne!(name, other, "other bits, another name");
        assert_eq!(fill(&mut b"XXXXX".to_vec(), 0, 1), Err(libc::EINVAL));
        assert_eq!(fill(&mut b"XXXXXX".to_vec(), 7, 1), Err(libc::EINVAL));
    }
}
