//! `nftw` and `ftw` (and their `64` names) on a tree under the run's
//! directory. glibc's walk opens, reads and stats through internal calls
//! this library cannot see; a walk that starts under the directory is
//! made here instead, with the pool's own listing and attributes, in
//! glibc's order and with its callback arguments: `FTW_PHYS`,
//! `FTW_MOUNT`, `FTW_DEPTH`, `FTW_CHDIR` (the working directory is the
//! virtual one while it is in the pool) and glibc's `FTW_ACTIONRETVAL`.
//! A walk that starts elsewhere is libc's (and does not enter the
//! directory, which the kernel does not know).

use crate::paths::{self, Target};
use crate::{errno_of, mounted, pool_path, real, ret};
use libc::{c_char, c_int, stat as Stat};
use manyfs::lowlevel::InodeOps;
use manyfs::{Fs, Metadata};
use std::collections::HashSet;
use std::os::unix::ffi::OsStrExt;

/// glibc's `struct FTW`: where the name starts in the path, and the depth.
#[repr(C)]
pub struct Ftw {
    base: c_int,
    level: c_int,
}

/// `nftw`'s callback.
pub type NftwFn =
    Option<unsafe extern "C" fn(*const c_char, *const Stat, c_int, *mut Ftw) -> c_int>;
/// `ftw`'s callback.
pub type FtwFn = Option<unsafe extern "C" fn(*const c_char, *const Stat, c_int) -> c_int>;

// The type flags of the callback (<ftw.h>).
const FTW_F: c_int = 0;
const FTW_D: c_int = 1;
const FTW_DNR: c_int = 2;
const FTW_NS: c_int = 3;
const FTW_SL: c_int = 4;
const FTW_DP: c_int = 5;
const FTW_SLN: c_int = 6;
/// What `ftw`'s callback gets for each flag: it knows no symlinks and no
/// post-order directories.
const FTW_FLAGS: [c_int; 7] = [FTW_F, FTW_D, FTW_DNR, FTW_NS, FTW_F, FTW_D, FTW_NS];

// `nftw`'s flags.
const FTW_PHYS: c_int = 1;
const FTW_MOUNT: c_int = 2;
const FTW_CHDIR: c_int = 4;
const FTW_DEPTH: c_int = 8;
const FTW_ACTIONRETVAL: c_int = 16;
const ALL_FLAGS: c_int = FTW_PHYS | FTW_MOUNT | FTW_CHDIR | FTW_DEPTH | FTW_ACTIONRETVAL;

// `FTW_ACTIONRETVAL`'s answers of the callback.
const FTW_STOP: c_int = 1;
const FTW_SKIP_SUBTREE: c_int = 2;
const FTW_SKIP_SIBLINGS: c_int = 3;

/// The program's callback.
#[derive(Clone, Copy)]
enum Func {
    Nftw(unsafe extern "C" fn(*const c_char, *const Stat, c_int, *mut Ftw) -> c_int),
    Ftw(unsafe extern "C" fn(*const c_char, *const Stat, c_int) -> c_int),
}

/// One walk.
struct Walk<'a> {
    fs: &'a Fs,
    func: Func,
    flags: c_int,
    /// `st_dev` of the start (`FTW_MOUNT`).
    dev: u64,
    /// The directories entered, when symlinks are followed (a link back
    /// up the tree is not entered twice).
    seen: HashSet<(u64, u64)>,
    /// The path the callback gets (the caller's start, then `/name`s),
    /// without its NUL.
    path: Vec<u8>,
    /// The same object's pool path.
    inner: Vec<u8>,
    ftw: Ftw,
}

impl Walk<'_> {
    fn has(&self, flag: c_int) -> bool {
        self.flags & flag != 0
    }

    /// Call the program's callback on the current path.
    fn call(&mut self, st: &Stat, flag: c_int) -> c_int {
        self.path.push(0);
        let p = self.path.as_ptr().cast::<c_char>();
        let r = match self.func {
            // SAFETY: the program's callback, with a NUL-terminated path,
            // a `stat` and a `struct FTW` that outlive the call.
            Func::Nftw(f) => unsafe { f(p, st, flag, &mut self.ftw) },
            // SAFETY: as above (`ftw`'s callback takes no `struct FTW`).
            Func::Ftw(f) => unsafe {
                f(p, st, FTW_FLAGS.get(flag as usize).copied().unwrap_or(flag))
            },
        };
        self.path.pop();
        r
    }

    /// The attributes of the current object (symlinks followed or not).
    fn lookup(&self, follow: bool) -> Result<(Metadata, Stat), c_int> {
        let p = pool_path(&self.inner);
        let m = if follow {
            self.fs.metadata(p)
        } else {
            self.fs.symlink_metadata(p)
        }
        .map_err(errno_of)?;
        let st = crate::meta::stat_of(&m);
        Ok((m, st))
    }

    /// The working directory becomes pool directory `inner` (`FTW_CHDIR`).
    fn enter(inner: &[u8]) {
        paths::set_virtual_cwd(Some(paths::outer(inner)));
    }

    /// The start: a directory is walked, anything else reported.
    fn start(&mut self) -> Result<c_int, c_int> {
        let phys = self.has(FTW_PHYS);
        let r = match self.lookup(!phys) {
            Err(libc::ENOENT) if !phys => match self.lookup(false) {
                Ok((m, st)) if m.is_symlink() => self.call(&st, FTW_SLN),
                _ => return Err(libc::ENOENT),
            },
            Err(e) => return Err(e),
            Ok((m, st)) if m.is_dir() => {
                self.dev = st.st_dev;
                if !phys {
                    self.seen.insert((st.st_dev, st.st_ino));
                }
                self.dir(&m, &st, true)?
            }
            Ok((m, st)) => self.call(&st, if m.is_symlink() { FTW_SL } else { FTW_F }),
        };
        if self.has(FTW_ACTIONRETVAL) && (r == FTW_SKIP_SUBTREE || r == FTW_SKIP_SIBLINGS) {
            return Ok(0);
        }
        Ok(r)
    }

    /// A directory: reported before its entries (after with
    /// `FTW_DEPTH`), its entries walked.
    fn dir(&mut self, m: &Metadata, st: &Stat, top: bool) -> Result<c_int, c_int> {
        let list = match self.fs.readdir_ino(m.ino).map_err(errno_of) {
            Ok(l) => l,
            Err(libc::EACCES) => return Ok(self.call(st, FTW_DNR)),
            Err(e) => return Err(e),
        };
        if !self.has(FTW_DEPTH) {
            let r = self.call(st, FTW_D);
            if r != 0 {
                return Ok(r);
            }
        }
        if self.has(FTW_CHDIR) {
            Self::enter(&self.inner);
        }
        let (path_len, inner_len, base) = (self.path.len(), self.inner.len(), self.ftw.base);
        self.ftw.level += 1;
        if !self.path.ends_with(b"/") {
            self.path.push(b'/');
        }
        self.ftw.base = c_int::try_from(self.path.len()).map_err(|_| libc::ENAMETOOLONG)?;
        if self.inner.len() > 1 {
            self.inner.push(b'/');
        }
        let (path_start, inner_start) = (self.path.len(), self.inner.len());
        let mut r = 0;
        for e in &list {
            let name = e.name.as_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            self.path.truncate(path_start);
            self.path.extend_from_slice(name);
            self.inner.truncate(inner_start);
            self.inner.extend_from_slice(name);
            r = self.entry()?;
            if r != 0 {
                break;
            }
        }
        if self.has(FTW_ACTIONRETVAL) && r == FTW_SKIP_SIBLINGS {
            r = 0;
        }
        self.path.truncate(path_len);
        self.inner.truncate(inner_len);
        self.ftw.base = base;
        self.ftw.level -= 1;
        if r == 0 && self.has(FTW_DEPTH) {
            r = self.call(st, FTW_DP);
        }
        let go_back = r == 0 || (self.has(FTW_ACTIONRETVAL) && r != -1 && r != FTW_STOP);
        if !top && self.has(FTW_CHDIR) && go_back {
            // Back to the parent, a directory of the pool too.
            let cut = self.inner.iter().rposition(|&c| c == b'/').unwrap_or(0);
            Self::enter(&self.inner[..cut.max(1)]);
        }
        Ok(r)
    }

    /// An entry of a directory.
    fn entry(&mut self) -> Result<c_int, c_int> {
        let phys = self.has(FTW_PHYS);
        // SAFETY: an all-zero `stat` is valid (what `FTW_NS` reports).
        let none: Stat = unsafe { std::mem::zeroed() };
        let (flag, found) = match self.lookup(!phys) {
            Ok((m, st)) => {
                let flag = if m.is_dir() {
                    FTW_D
                } else if m.is_symlink() {
                    FTW_SL
                } else {
                    FTW_F
                };
                (flag, Some((m, st)))
            }
            Err(e) if e != libc::ENOENT && e != libc::EACCES => return Err(e),
            Err(_) if phys => (FTW_NS, None),
            // A dangling symlink, or nothing there any more.
            Err(_) => match self.lookup(false) {
                Ok((m, st)) if m.is_symlink() => (FTW_SLN, Some((m, st))),
                _ => (FTW_NS, None),
            },
        };
        let st = found.as_ref().map_or(none, |(_, st)| *st);
        let mut r = 0;
        if flag == FTW_NS || !self.has(FTW_MOUNT) || st.st_dev == self.dev {
            match found {
                Some((m, st)) if flag == FTW_D => {
                    if phys || self.seen.insert((st.st_dev, st.st_ino)) {
                        r = self.dir(&m, &st, false)?;
                    }
                }
                _ => r = self.call(&st, flag),
            }
        }
        if self.has(FTW_ACTIONRETVAL) && r == FTW_SKIP_SUBTREE {
            r = 0;
        }
        Ok(r)
    }
}

/// The working directory before an `FTW_CHDIR` walk: the virtual one and
/// the kernel's.
struct SavedCwd {
    virtual_cwd: Option<Vec<u8>>,
    kernel: Option<std::ffi::CString>,
}

impl SavedCwd {
    fn save() -> SavedCwd {
        SavedCwd {
            virtual_cwd: paths::virtual_cwd(),
            kernel: paths::real_cwd().and_then(|c| std::ffi::CString::new(c).ok()),
        }
    }

    fn restore(self) {
        let errno = crate::errno();
        if let Some(k) = &self.kernel {
            // SAFETY: a NUL-terminated path.
            unsafe { real::chdir()(k.as_ptr()) };
        }
        paths::set_virtual_cwd(self.virtual_cwd);
        crate::set_errno(errno);
    }
}

/// Walk the tree at `given` (the caller's path), pool path `inner`.
fn walk_ours(
    fs: &Fs,
    given: &[u8],
    inner: &[u8],
    func: Func,
    flags: c_int,
) -> Result<c_int, c_int> {
    if flags & !ALL_FLAGS != 0 {
        return Err(libc::EINVAL);
    }
    // The callback may fork: the mount `fs` stays while the walk holds it.
    let _walking = crate::state::Walking::start();
    // The caller's path without trailing slashes; the name after the last.
    let mut path = given.to_vec();
    while path.len() > 1 && path.ends_with(b"/") {
        path.pop();
    }
    let base = path.iter().rposition(|&c| c == b'/').map_or(0, |i| i + 1);
    let mut inner = inner.to_vec();
    if inner.len() > 1 && inner.ends_with(b"/") {
        inner.pop();
    }
    let mut walk = Walk {
        fs,
        func,
        flags,
        dev: 0,
        seen: HashSet::new(),
        path,
        inner,
        ftw: Ftw {
            base: c_int::try_from(base).map_err(|_| libc::ENAMETOOLONG)?,
            level: 0,
        },
    };
    if flags & FTW_CHDIR == 0 {
        return walk.start();
    }
    // Into the directory holding the start (the kernel's when the start
    // is the run's directory itself), as glibc does.
    let saved = SavedCwd::save();
    if base > 0 {
        let parent = if base == 1 {
            b"/".to_vec()
        } else {
            walk.path[..base - 1].to_vec()
        };
        let parent = std::ffi::CString::new(parent).map_err(|_| libc::EINVAL)?;
        // SAFETY: a NUL-terminated path, to this library's `chdir`.
        if unsafe { crate::names::chdir(parent.as_ptr()) } != 0 {
            let e = crate::errno();
            saved.restore();
            return Err(e);
        }
    }
    let r = walk.start();
    saved.restore();
    r
}

/// Walk the tree at `path`: here when it leads under the directory,
/// else with `libc_walk` (given the caller's path, or the normalised
/// absolute one when its route went through the directory).
///
/// # Safety
/// `path` is null or NUL-terminated; `func` a C function of the prototype
/// its kind names.
unsafe fn walk(
    path: *const c_char,
    func: Option<Func>,
    flags: c_int,
    libc_walk: impl FnOnce(*const c_char) -> c_int,
) -> c_int {
    // SAFETY: the caller's promise.
    match unsafe { paths::target_c(libc::AT_FDCWD, path) } {
        Ok(Target::Kernel) => libc_walk(path),
        Ok(Target::KernelAt(abs)) => libc_walk(abs.as_ptr()),
        Ok(Target::Ours(inner)) => {
            // SAFETY: non-null (the path led somewhere) and NUL-terminated.
            let given = unsafe { std::ffi::CStr::from_ptr(path) }.to_bytes();
            ret(mounted()
                .and_then(|fs| walk_ours(fs, given, &inner, func.ok_or(libc::EINVAL)?, flags)))
        }
        Err(e) => ret(Err(e)),
    }
}

/// `nftw(3)`.
///
/// # Safety
/// As `nftw(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nftw(
    path: *const c_char,
    func: NftwFn,
    nopenfd: c_int,
    flags: c_int,
) -> c_int {
    // SAFETY: forwarded from the caller; libc gets its arguments.
    unsafe {
        walk(path, func.map(Func::Nftw), flags, |p| {
            real::nftw64()(p, func, nopenfd, flags)
        })
    }
}

/// `nftw64(3)` (the same structure on x86-64).
///
/// # Safety
/// As `nftw(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nftw64(
    path: *const c_char,
    func: NftwFn,
    nopenfd: c_int,
    flags: c_int,
) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { nftw(path, func, nopenfd, flags) }
}

/// `ftw(3)`: `nftw` without flags, with the older callback.
///
/// # Safety
/// As `ftw(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ftw(path: *const c_char, func: FtwFn, nopenfd: c_int) -> c_int {
    // SAFETY: forwarded from the caller; libc gets its arguments.
    unsafe {
        walk(path, func.map(Func::Ftw), 0, |p| {
            real::ftw64()(p, func, nopenfd)
        })
    }
}

/// `ftw64(3)`.
///
/// # Safety
/// As `ftw(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ftw64(path: *const c_char, func: FtwFn, nopenfd: c_int) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { ftw(path, func, nopenfd) }
}
