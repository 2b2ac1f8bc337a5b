//! glibc's `fts` walk (`fts_open`, `fts_read`, `fts_children`,
//! `fts_set`, `fts_close`, and the `fts64_` names, the same functions on
//! x86-64) over trees under the run's directory. glibc's `fts` opens,
//! reads and stats directories through internal calls this library
//! cannot see; when any root given to `fts_open` leads under the
//! directory (or through it), the walk is made here instead: glibc's
//! algorithm (BSD's `fts.c`), step for step, over this library's `lstat`,
//! `stat`, `opendir`, `readdir` and `closedir`, which serve the pool and
//! pass every other path to libc, so the roots outside the directory of
//! such a walk are walked too. Other walks are glibc's; a registry of the
//! `FTS` pointers returned here tells the two apart.
//!
//! The `FTS` and `FTSENT` structures have glibc's layout, and entries are
//! made, linked and freed as glibc makes, links and frees them: an entry
//! lives until the walk moves past it (its parent until the walk leaves
//! the directory), `fts_path` of every entry is the stream's one path
//! buffer, which holds what glibc's holds (with or without
//! `FTS_NOCHDIR`). One difference: this walk never changes the working
//! directory, as if `FTS_NOCHDIR` were given: `fts_accpath` is the path
//! from the caller's working directory (the same as `fts_path`), not the
//! name within the entry's directory, and `fts_rfd` is -1.
//!
//! A walk glibc makes while the working directory is the virtual one (in
//! the pool) is given `FTS_NOCHDIR`: glibc changes directory through
//! internal calls this library does not see, so a relative `fts_accpath`
//! would be resolved in the pool.
//!
//! # Invariant
//! Every entry pointer reachable from a stream of this module's
//! (`fts_cur`, `fts_child`, and their `fts_link`, `fts_parent` and
//! `fts_cycle` chains) is a live allocation made by [`alloc`], and the
//! stream's `fts_path` is a live buffer of [`PATH_BUF`] bytes. The
//! program reads entries and may write their `fts_number`,
//! `fts_pointer` and (through `fts_set`) `fts_instr`; one thread uses a
//! stream at a time, as with glibc's.

use crate::paths::{self, Target};
use crate::registry::Registry;
use crate::{errno, real, set_errno};
use libc::{c_char, c_int, c_long, c_void, stat as Stat};

/// glibc's `FTSENT` (and `FTSENT64`, the same on x86-64): 120 bytes, the
/// name from byte 112 on.
#[repr(C)]
pub struct FtsEnt {
    fts_cycle: *mut FtsEnt,
    fts_parent: *mut FtsEnt,
    fts_link: *mut FtsEnt,
    fts_number: c_long,
    fts_pointer: *mut c_void,
    fts_accpath: *mut c_char,
    fts_path: *mut c_char,
    fts_errno: c_int,
    fts_symfd: c_int,
    fts_pathlen: u16,
    fts_namelen: u16,
    fts_ino: u64,
    fts_dev: u64,
    fts_nlink: u64,
    fts_level: i16,
    fts_info: u16,
    fts_flags: u16,
    fts_instr: u16,
    fts_statp: *mut Stat,
    fts_name: [c_char; 1],
}

/// `fts_open`'s comparison: it orders siblings (`qsort` of `FTSENT *`s).
pub type Compar = Option<unsafe extern "C" fn(*mut *const FtsEnt, *mut *const FtsEnt) -> c_int>;

/// glibc's `FTS` (and `FTS64`): 72 bytes.
#[repr(C)]
pub struct Fts {
    fts_cur: *mut FtsEnt,
    fts_child: *mut FtsEnt,
    fts_array: *mut *mut FtsEnt,
    fts_dev: u64,
    fts_path: *mut c_char,
    fts_rfd: c_int,
    fts_pathlen: c_int,
    fts_nitems: c_int,
    fts_compar: Compar,
    fts_options: c_int,
}

// `fts_open`'s options (<fts.h>), and glibc's private bits of
// `fts_options`.
const FTS_COMFOLLOW: c_int = 0x0001;
const FTS_LOGICAL: c_int = 0x0002;
const FTS_NOCHDIR: c_int = 0x0004;
const FTS_NOSTAT: c_int = 0x0008;
const FTS_PHYSICAL: c_int = 0x0010;
const FTS_SEEDOT: c_int = 0x0020;
const FTS_XDEV: c_int = 0x0040;
const FTS_OPTIONMASK: c_int = 0x00ff;
const FTS_NAMEONLY: c_int = 0x0100;
const FTS_STOP: c_int = 0x0200;

// `fts_level`.
const FTS_ROOTPARENTLEVEL: i16 = -1;
const FTS_ROOTLEVEL: i16 = 0;

// `fts_info`.
const FTS_D: u16 = 1;
const FTS_DC: u16 = 2;
const FTS_DEFAULT: u16 = 3;
const FTS_DNR: u16 = 4;
const FTS_DOT: u16 = 5;
const FTS_DP: u16 = 6;
const FTS_ERR: u16 = 7;
const FTS_F: u16 = 8;
const FTS_INIT: u16 = 9;
const FTS_NS: u16 = 10;
const FTS_NSOK: u16 = 11;
const FTS_SL: u16 = 12;
const FTS_SLNONE: u16 = 13;

// `fts_set`'s instructions (`fts_instr`).
const FTS_AGAIN: c_int = 1;
const FTS_FOLLOW: c_int = 2;
const FTS_NOINSTR: c_int = 3;
const FTS_SKIP: c_int = 4;

/// Where an entry's name starts.
const NAME_AT: usize = std::mem::offset_of!(FtsEnt, fts_name);
/// The path buffer: every path an `FTSENT` can describe (`fts_pathlen`
/// is 16 bits) and its NUL. glibc grows its buffer up to the same limit;
/// a fixed one never moves, so entries' `fts_path` never need adjusting.
const PATH_BUF: usize = 1 << 16;
/// The longest path (glibc: `ENAMETOOLONG` at `USHRT_MAX`).
const MAX_PATH: usize = u16::MAX as usize - 1;

/// What [`build`] reads a directory for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Build {
    /// `fts_read` entering it.
    Read,
    /// `fts_children`.
    Child,
    /// `fts_children(FTS_NAMEONLY)`: names only, nothing stat'ed.
    Names,
}

/// The streams handed out.
static STREAMS: Registry = Registry::new();

/// A new entry named `name` (under 64 KiB), zeroed but for its name,
/// its stat buffer (`fts_statp`), the stream's path buffer (`fts_path`)
/// and `FTS_NOINSTR`; `ENOMEM` when out of memory.
fn alloc(sp: &Fts, name: &[u8]) -> Result<*mut FtsEnt, c_int> {
    let namelen = u16::try_from(name.len()).map_err(|_| libc::ENAMETOOLONG)?;
    let stat_at = (NAME_AT + name.len() + 1).next_multiple_of(std::mem::align_of::<Stat>());
    let size = (stat_at + std::mem::size_of::<Stat>()).max(std::mem::size_of::<FtsEnt>());
    // SAFETY: calloc of a non-zero size; freed by `free_ent`.
    let p = unsafe { libc::calloc(1, size) }.cast::<FtsEnt>();
    if p.is_null() {
        return Err(libc::ENOMEM);
    }
    // SAFETY: `p` has `size` zeroed bytes, aligned for any type: an
    // `FtsEnt` (all zeroes is a valid one: null pointers, zero numbers),
    // then room for the name and its NUL from `NAME_AT`, then a `stat` at
    // `stat_at`; the name and stat pointers are derived from `p`.
    unsafe {
        let base = p.cast::<u8>();
        std::ptr::copy_nonoverlapping(name.as_ptr(), base.add(NAME_AT), name.len());
        (*p).fts_statp = base.add(stat_at).cast();
        (*p).fts_namelen = namelen;
        (*p).fts_path = sp.fts_path;
        (*p).fts_symfd = -1;
        (*p).fts_instr = FTS_NOINSTR as u16;
    }
    Ok(p)
}

/// Free an entry made by [`alloc`].
///
/// # Safety
/// `p` is an entry of [`alloc`]'s, nothing refers to it any more.
unsafe fn free_ent(p: *mut FtsEnt) {
    // SAFETY: the caller's promise: memory from calloc, freed once.
    unsafe { libc::free(p.cast()) };
}

/// Free a list of entries linked by `fts_link`.
///
/// # Safety
/// As [`free_ent`], for every entry of the list.
unsafe fn free_list(mut p: *mut FtsEnt) {
    while !p.is_null() {
        // SAFETY: a live entry of the list (caller), freed after its link
        // is read.
        unsafe {
            let next = (*p).fts_link;
            free_ent(p);
            p = next;
        }
    }
}

/// The name of entry `p`.
///
/// # Safety
/// `p` is a live entry of [`alloc`]'s; the slice does not outlive it.
unsafe fn name<'a>(p: *const FtsEnt) -> &'a [u8] {
    // SAFETY: `fts_namelen` bytes of name at `NAME_AT` (see `alloc`).
    unsafe {
        std::slice::from_raw_parts(p.cast::<u8>().add(NAME_AT), usize::from((*p).fts_namelen))
    }
}

/// The name's address (`fts_accpath` of a root before its visit).
fn name_ptr(p: *mut FtsEnt) -> *mut c_char {
    p.cast::<u8>().wrapping_add(NAME_AT).cast()
}

fn is_dot(name: &[u8]) -> bool {
    name == b"." || name == b".."
}

/// Write `bytes` and a NUL at `at` in the stream's path buffer (nothing
/// when they would not fit: the callers' lengths are checked against
/// [`MAX_PATH`] first).
///
/// # Safety
/// `sp` is a stream of this module's (see the invariant); `bytes` is not
/// in its path buffer.
unsafe fn put_path(sp: &Fts, at: usize, bytes: &[u8]) {
    if at + bytes.len() >= PATH_BUF {
        return;
    }
    // SAFETY: within the buffer's `PATH_BUF` bytes (checked), which
    // `bytes` does not overlap (caller).
    unsafe {
        let to = sp.fts_path.cast::<u8>().add(at);
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), to, bytes.len());
        *to.add(bytes.len()) = 0;
    }
}

/// Where a child's name goes in the path after entry `p`'s: its path
/// length, less a trailing slash (glibc's `NAPPEND`).
///
/// # Safety
/// `sp` is a stream of this module's, `p` a live entry of it.
unsafe fn nappend(sp: &Fts, p: *const FtsEnt) -> usize {
    // SAFETY: the caller's promise.
    let len = usize::from(unsafe { (*p).fts_pathlen });
    // SAFETY: `len - 1` is within the buffer (`fts_pathlen` < `PATH_BUF`).
    if len > 0 && unsafe { *sp.fts_path.cast::<u8>().add(len - 1) } == b'/' {
        len - 1
    } else {
        len
    }
}

fn isset(sp: &Fts, opt: c_int) -> bool {
    sp.fts_options & opt != 0
}

/// Stat entry `p` at its `fts_accpath` (following a symlink under
/// `FTS_LOGICAL` or with `follow`) into its `fts_statp` (a scratch
/// buffer under `FTS_NOSTAT`) and say what it is: glibc's `fts_stat`,
/// cycles found among the entry's ancestors (`FTS_DC`, `fts_cycle`).
///
/// # Safety
/// `sp` a stream of this module's, `p` a live entry of it whose
/// `fts_accpath` is NUL-terminated.
unsafe fn stat_ent(sp: &Fts, p: *mut FtsEnt, follow: bool) -> u16 {
    // SAFETY: an all-zero `stat` is valid.
    let mut scratch: Stat = unsafe { std::mem::zeroed() };
    // SAFETY: `p` is live (caller); its stat buffer is its own (`alloc`).
    let (acc, dot, own) = unsafe { ((*p).fts_accpath, is_dot(name(p)), (*p).fts_statp) };
    let sbp: *mut Stat = if isset(sp, FTS_NOSTAT) {
        &mut scratch
    } else {
        own
    };
    let fail = |err: c_int| {
        // SAFETY: `p` is live; `sbp` is its stat buffer or `scratch`.
        unsafe {
            (*p).fts_errno = err;
            sbp.write(std::mem::zeroed());
        }
        FTS_NS
    };
    if isset(sp, FTS_LOGICAL) || follow {
        // SAFETY: a NUL-terminated path (caller) and a stat buffer.
        if unsafe { crate::meta::stat(acc, sbp) } != 0 {
            let saved = errno();
            // SAFETY: as above.
            if unsafe { crate::meta::lstat(acc, sbp) } == 0 {
                set_errno(0);
                return FTS_SLNONE;
            }
            return fail(saved);
        }
    // SAFETY: as above.
    } else if unsafe { crate::meta::lstat(acc, sbp) } != 0 {
        return fail(errno());
    }
    // SAFETY: filled by the successful call above.
    let st = unsafe { &*sbp };
    match st.st_mode & libc::S_IFMT {
        libc::S_IFDIR => {
            let (dev, ino) = (st.st_dev, st.st_ino);
            // SAFETY: `p` is live.
            let parent = unsafe {
                ((*p).fts_dev, (*p).fts_ino, (*p).fts_nlink) = (dev, ino, st.st_nlink);
                (*p).fts_parent
            };
            if dot {
                return FTS_DOT;
            }
            let mut t = parent;
            // SAFETY: the parent chain of a live entry is live (the
            // invariant) and ends at the roots' parent, level -1.
            while unsafe { (*t).fts_level } >= FTS_ROOTLEVEL {
                // SAFETY: as above.
                let (t_dev, t_ino, up) = unsafe { ((*t).fts_dev, (*t).fts_ino, (*t).fts_parent) };
                if t_ino == ino && t_dev == dev {
                    // SAFETY: `p` is live.
                    unsafe { (*p).fts_cycle = t };
                    return FTS_DC;
                }
                t = up;
            }
            FTS_D
        }
        libc::S_IFLNK => FTS_SL,
        libc::S_IFREG => FTS_F,
        _ => FTS_DEFAULT,
    }
}

/// Order a list of `n` siblings with the stream's comparison (`qsort`,
/// as glibc).
///
/// # Safety
/// `head` a list of `n` live entries of `sp`; `sp.fts_compar` a C
/// function of the prototype `fts_open(3)` names.
unsafe fn sort(sp: &Fts, head: *mut FtsEnt, n: usize) -> *mut FtsEnt {
    let Some(compar) = sp.fts_compar else {
        return head;
    };
    let mut v = Vec::with_capacity(n);
    let mut p = head;
    while !p.is_null() {
        v.push(p);
        // SAFETY: a live entry of the list.
        p = unsafe { (*p).fts_link };
    }
    // SAFETY: the comparison takes two pointers to elements of the array
    // (`const FTSENT **`), which is what `qsort` passes as `const void *`:
    // the same ABI (glibc makes the same cast).
    let c = unsafe {
        std::mem::transmute::<
            unsafe extern "C" fn(*mut *const FtsEnt, *mut *const FtsEnt) -> c_int,
            unsafe extern "C" fn(*const c_void, *const c_void) -> c_int,
        >(compar)
    };
    // SAFETY: an array of `v.len()` entry pointers.
    unsafe {
        libc::qsort(
            v.as_mut_ptr().cast(),
            v.len(),
            std::mem::size_of::<*mut FtsEnt>(),
            Some(c),
        )
    };
    for w in v.windows(2) {
        // SAFETY: live entries of the list.
        unsafe { (*w[0]).fts_link = w[1] };
    }
    if let Some(&last) = v.last() {
        // SAFETY: as above.
        unsafe { (*last).fts_link = std::ptr::null_mut() };
    }
    v.first().copied().unwrap_or(head)
}

/// Read the directory of the current entry into a list of entries, each
/// stat'ed unless not needed (glibc's `fts_build`): null for none, with
/// `FTS_DNR` (the directory cannot be opened) or `FTS_DP` (it is empty)
/// on the current entry when reading for `fts_read`, or `FTS_ERR` and the
/// stream stopped on a path too long or memory short.
///
/// # Safety
/// `sp` is a stream of this module's whose `fts_cur` is a directory.
unsafe fn build(sp: &mut Fts, kind: Build) -> *mut FtsEnt {
    let cur = sp.fts_cur;
    // SAFETY: the current entry is live, its access path NUL-terminated;
    // this library's `opendir` (the pool's or libc's).
    let (dirp, cur_nlink, level) = unsafe {
        (
            crate::dirs::opendir((*cur).fts_accpath),
            (*cur).fts_nlink,
            (*cur).fts_level + 1,
        )
    };
    if dirp.is_null() {
        if kind == Build::Read {
            // SAFETY: the current entry is live.
            unsafe {
                (*cur).fts_info = FTS_DNR;
                (*cur).fts_errno = errno();
            }
        }
        return std::ptr::null_mut();
    }
    // `nlinks`: how many of the entries may still be directories when
    // stats are spared (`FTS_NOSTAT` with `FTS_PHYSICAL`: only entries
    // whose type is a directory or unknown are stat'ed, until the link
    // count says every subdirectory was seen), 0 when nothing is stat'ed,
    // -1 when everything is.
    let (mut nlinks, nostat): (i64, bool) = if kind == Build::Names {
        (0, false)
    } else if isset(sp, FTS_NOSTAT) && isset(sp, FTS_PHYSICAL) {
        let dots = if isset(sp, FTS_SEEDOT) { 0 } else { 2 };
        (i64::try_from(cur_nlink).unwrap_or(i64::MAX) - dots, true)
    } else {
        (-1, false)
    };
    // SAFETY: `sp` is ours, `cur` live.
    let len = unsafe { nappend(sp, cur) } + 1;
    // Under `FTS_NOCHDIR` glibc stats each entry at its path written
    // after the directory's in the path buffer, which it leaves changed
    // (the programs that asked for it see that); otherwise it stats the
    // name in the directory it changed to, the buffer untouched: the
    // path to stat is then made on the side.
    let nochdir = isset(sp, FTS_NOCHDIR);
    let mut aside = Vec::new();
    if nochdir {
        // SAFETY: as above.
        unsafe { put_path(sp, len - 1, b"/") };
    } else {
        // SAFETY: the directory's path, `len - 1` bytes of the buffer.
        aside.extend_from_slice(unsafe {
            std::slice::from_raw_parts(sp.fts_path.cast::<u8>(), len - 1)
        });
        aside.push(b'/');
    }
    let (mut head, mut tail): (*mut FtsEnt, *mut FtsEnt) =
        (std::ptr::null_mut(), std::ptr::null_mut());
    let mut nitems = 0usize;
    let mut failed = None;
    loop {
        // SAFETY: a stream of this library's `opendir`, not yet closed.
        let dp = unsafe { crate::dirs::readdir64(dirp) };
        if dp.is_null() {
            break;
        }
        // SAFETY: `readdir` returned a live entry with a NUL-terminated
        // name, valid until the next `readdir`.
        let (dname, dtype) = unsafe {
            (
                std::ffi::CStr::from_ptr((*dp).d_name.as_ptr()).to_bytes(),
                (*dp).d_type,
            )
        };
        if !isset(sp, FTS_SEEDOT) && is_dot(dname) {
            continue;
        }
        if len + dname.len() >= MAX_PATH {
            failed = Some(libc::ENAMETOOLONG);
            break;
        }
        let p = match alloc(sp, dname) {
            Ok(p) => p,
            Err(e) => {
                failed = Some(e);
                break;
            }
        };
        let stat = !(nlinks == 0 || (nostat && dtype != libc::DT_DIR && dtype != libc::DT_UNKNOWN));
        // SAFETY: just made.
        unsafe {
            (*p).fts_level = level;
            (*p).fts_parent = cur;
            (*p).fts_pathlen = (len + dname.len()) as u16;
            (*p).fts_accpath = (*p).fts_path;
            (*p).fts_info = FTS_NSOK;
        }
        if stat {
            // The entry's path, for the stat.
            if nochdir {
                // SAFETY: `sp` is ours; the name is `readdir`'s.
                unsafe { put_path(sp, len, dname) };
            } else {
                aside.truncate(len);
                aside.extend_from_slice(dname);
                aside.push(0);
                // SAFETY: `p` is live; its access path is put back below,
                // before `aside` changes.
                unsafe { (*p).fts_accpath = aside.as_mut_ptr().cast() };
            }
            // SAFETY: `p` is live, its access path the NUL-terminated
            // path just written.
            let info = unsafe { stat_ent(sp, p, false) };
            // SAFETY: `p` is live.
            unsafe {
                (*p).fts_info = info;
                (*p).fts_accpath = (*p).fts_path;
            }
            if nlinks > 0 && matches!(info, FTS_D | FTS_DC | FTS_DOT) {
                nlinks -= 1;
            }
        }
        if head.is_null() {
            head = p;
        } else {
            // SAFETY: the list's last entry, live.
            unsafe { (*tail).fts_link = p };
        }
        tail = p;
        nitems += 1;
    }
    // SAFETY: the stream opened above, closed once.
    unsafe { crate::dirs::closedir(dirp) };
    if let Some(err) = failed {
        // SAFETY: the entries made above, referred to by nothing else; the
        // current entry is live.
        unsafe {
            free_list(head);
            (*cur).fts_info = FTS_ERR;
        }
        sp.fts_options |= FTS_STOP;
        set_errno(err);
        return std::ptr::null_mut();
    }
    // Under `FTS_NOCHDIR`, the path back to the directory's (with a
    // trailing slash when it has entries, as glibc leaves it).
    if nochdir {
        // SAFETY: `sp` is ours.
        unsafe { put_path(sp, if nitems == 0 { len - 1 } else { len }, b"") };
    }
    if nitems == 0 {
        if kind == Build::Read {
            // SAFETY: the current entry is live.
            unsafe { (*cur).fts_info = FTS_DP };
        }
        return std::ptr::null_mut();
    }
    if nitems > 1 {
        // SAFETY: a list of `nitems` live entries; the caller's comparison.
        head = unsafe { sort(sp, head, nitems) };
    }
    head
}

/// Make root `p` the current path (glibc's `fts_load`): the path buffer
/// holds the root as given, its name becomes the last component.
///
/// # Safety
/// `sp` a stream of this module's, `p` one of its live roots.
unsafe fn load(sp: &mut Fts, p: *mut FtsEnt) {
    // SAFETY: `p` is live; its name is copied out before it is changed.
    let given = unsafe { name(p) }.to_vec();
    // SAFETY: `sp` is ours; `given` is a copy.
    unsafe { put_path(sp, 0, &given) };
    let last = match given.iter().rposition(|&c| c == b'/') {
        Some(slash) if slash != 0 || given.len() > 1 => &given[slash + 1..],
        _ => &given[..],
    };
    // SAFETY: `p` is live; its name shrinks (or stays) within its
    // allocation, written from the copy.
    unsafe {
        let at = name_ptr(p).cast::<u8>();
        std::ptr::copy_nonoverlapping(last.as_ptr(), at, last.len());
        *at.add(last.len()) = 0;
        (*p).fts_namelen = last.len() as u16;
        (*p).fts_pathlen = given.len() as u16;
        (*p).fts_path = sp.fts_path;
        (*p).fts_accpath = sp.fts_path;
        sp.fts_dev = (*p).fts_dev;
    }
}

/// Write entry `p`'s path into the buffer after its parent's.
///
/// # Safety
/// `sp` a stream of this module's, `p` a live entry below a root.
unsafe fn set_path(sp: &Fts, p: *mut FtsEnt) {
    // SAFETY: `p` and its parent are live; the name is in `p`, not in the
    // path buffer.
    unsafe {
        let at = nappend(sp, (*p).fts_parent);
        put_path(sp, at, b"/");
        put_path(sp, at + 1, name(p));
    }
}

/// `fts_open` over this library's calls.
///
/// # Safety
/// `argv` is a null-terminated array of NUL-terminated paths; `compar`
/// null or a C function of the prototype `fts_open(3)` names.
unsafe fn open_ours(
    argv: *const *mut c_char,
    options: c_int,
    compar: Compar,
) -> Result<*mut Fts, c_int> {
    if options & !FTS_OPTIONMASK != 0 {
        return Err(libc::EINVAL);
    }
    // SAFETY: malloc of a non-zero size; freed in `close_ours`.
    let path = unsafe { libc::malloc(PATH_BUF) }.cast::<c_char>();
    if path.is_null() {
        return Err(libc::ENOMEM);
    }
    // Logical walks imply `FTS_NOCHDIR`, as in glibc. Without it, this
    // walk still never changes directory (the module's doc).
    let options = if options & FTS_LOGICAL != 0 {
        options | FTS_NOCHDIR
    } else {
        options
    };
    let sp = Box::into_raw(Box::new(Fts {
        fts_cur: std::ptr::null_mut(),
        fts_child: std::ptr::null_mut(),
        fts_array: std::ptr::null_mut(),
        fts_dev: 0,
        fts_path: path,
        fts_rfd: -1,
        fts_pathlen: PATH_BUF as c_int,
        fts_nitems: 0,
        fts_compar: compar,
        fts_options: options,
    }));
    // SAFETY: just made; the path buffer is `PATH_BUF` bytes.
    let s = unsafe { &mut *sp };
    // SAFETY: `argv`, as the caller promised; the entries are made here.
    match unsafe { roots(s, argv) } {
        Ok(()) => {
            STREAMS.add(sp);
            Ok(sp)
        }
        Err(e) => {
            // SAFETY: a stream of this module's, not registered, not yet
            // returned.
            unsafe { free_stream(sp) };
            Err(e)
        }
    }
}

/// The roots of a new stream, stat'ed and ordered, behind a first
/// current entry (`FTS_INIT`) whose link is the first root.
///
/// # Safety
/// As [`open_ours`]; `sp` a stream of this module's without entries.
unsafe fn roots(sp: &mut Fts, mut argv: *const *mut c_char) -> Result<(), c_int> {
    let parent = alloc(sp, b"")?;
    // The first current entry is made now, so that from here on every
    // entry made is reachable from it (`free_stream` frees them all).
    let first = alloc(sp, b"").inspect_err(|_| {
        // SAFETY: the parent just made, referred to by nothing.
        unsafe { free_ent(parent) }
    })?;
    // SAFETY: both just made.
    unsafe {
        (*parent).fts_level = FTS_ROOTPARENTLEVEL;
        (*first).fts_info = FTS_INIT;
        (*first).fts_parent = parent;
    }
    sp.fts_cur = first;
    let (mut head, mut tail): (*mut FtsEnt, *mut FtsEnt) =
        (std::ptr::null_mut(), std::ptr::null_mut());
    let mut nitems = 0;
    let by_compar = sp.fts_compar.is_some();
    loop {
        // SAFETY: a null-terminated array (caller).
        let arg = unsafe { *argv };
        if arg.is_null() {
            break;
        }
        // SAFETY: NUL-terminated (caller).
        let given = unsafe { std::ffi::CStr::from_ptr(arg) }.to_bytes();
        if given.is_empty() {
            return Err(libc::ENOENT);
        }
        if given.len() >= MAX_PATH {
            return Err(libc::ENAMETOOLONG);
        }
        let p = alloc(sp, given)?;
        // Linked in before it is stat'ed, so that a failure frees it.
        // SAFETY: `p` just made, `tail` the list's last entry, `first`
        // live.
        unsafe {
            (*p).fts_level = FTS_ROOTLEVEL;
            (*p).fts_parent = parent;
            (*p).fts_accpath = name_ptr(p);
            if by_compar {
                (*p).fts_link = head;
                head = p;
            } else {
                if head.is_null() {
                    head = p;
                } else {
                    (*tail).fts_link = p;
                }
                tail = p;
            }
            (*first).fts_link = head;
        }
        // SAFETY: `p` is live, its access path its NUL-terminated name.
        let info = unsafe { stat_ent(sp, p, isset(sp, FTS_COMFOLLOW)) };
        // A "." or ".." given is a directory like any other.
        // SAFETY: `p` is live.
        unsafe { (*p).fts_info = if info == FTS_DOT { FTS_D } else { info } };
        nitems += 1;
        // SAFETY: the next element of the array.
        argv = unsafe { argv.add(1) };
    }
    if by_compar && nitems > 1 {
        // SAFETY: a list of `nitems` live roots; the caller's comparison;
        // `first` live.
        unsafe { (*first).fts_link = sort(sp, head, nitems) };
    }
    Ok(())
}

/// Free every entry of stream `sp`, its path buffer and itself (glibc's
/// `fts_close`, which walks from the current entry along the links and
/// up the parents to the roots' parent).
///
/// # Safety
/// `sp` is a stream of this module's, not registered any more (or
/// never), used no more.
unsafe fn free_stream(sp: *mut Fts) {
    // SAFETY: made by `Box::into_raw` in `open_ours`, freed once here.
    let s = unsafe { Box::from_raw(sp) };
    let mut p = s.fts_cur;
    if !p.is_null() {
        // SAFETY: the invariant: the chain from the current entry is live
        // and ends at the roots' parent (level -1); each entry is freed
        // after its links are read, and only once (the links and parents
        // followed lead forward and up, never back).
        unsafe {
            while (*p).fts_level >= FTS_ROOTLEVEL {
                let next = if (*p).fts_link.is_null() {
                    (*p).fts_parent
                } else {
                    (*p).fts_link
                };
                free_ent(p);
                p = next;
            }
            free_ent(p);
        }
    }
    // SAFETY: the child list, live and referred to by nothing else; the
    // path buffer from malloc.
    unsafe {
        free_list(s.fts_child);
        libc::free(s.fts_path.cast());
    }
}

/// `fts_read` over this library's calls (glibc's, without changing
/// directory).
///
/// # Safety
/// `sp` is a registered stream of this module's.
unsafe fn read_ours(sp: &mut Fts) -> *mut FtsEnt {
    if sp.fts_cur.is_null() || isset(sp, FTS_STOP) {
        return std::ptr::null_mut();
    }
    let p = sp.fts_cur;
    // SAFETY: the current entry is live.
    let (instr, info, dev) = unsafe {
        let instr = c_int::from((*p).fts_instr);
        (*p).fts_instr = FTS_NOINSTR as u16;
        (instr, (*p).fts_info, (*p).fts_dev)
    };
    // Any entry may be visited again, stat'ed anew; a symlink to follow
    // is stat'ed through (a directory is then entered on the next call).
    let again = instr == FTS_AGAIN;
    if again || (instr == FTS_FOLLOW && matches!(info, FTS_SL | FTS_SLNONE)) {
        // SAFETY: `p` is live, its access path the current path.
        let info = unsafe { stat_ent(sp, p, !again) };
        // SAFETY: as above.
        unsafe { (*p).fts_info = info };
        return p;
    }
    if info == FTS_D {
        // Skipped, or on another device under `FTS_XDEV`: its post-order
        // visit now.
        if instr == FTS_SKIP || (isset(sp, FTS_XDEV) && dev != sp.fts_dev) {
            // SAFETY: the child list, referred to by nothing else; `p`
            // live.
            unsafe {
                free_list(sp.fts_child);
                (*p).fts_info = FTS_DP;
            }
            sp.fts_child = std::ptr::null_mut();
            return p;
        }
        // Names only were read (`FTS_NAMEONLY`): read again, stat'ed.
        if !sp.fts_child.is_null() && isset(sp, FTS_NAMEONLY) {
            sp.fts_options &= !FTS_NAMEONLY;
            // SAFETY: as above.
            unsafe { free_list(sp.fts_child) };
            sp.fts_child = std::ptr::null_mut();
        }
        if sp.fts_child.is_null() {
            // SAFETY: the current entry is a directory.
            sp.fts_child = unsafe { build(sp, Build::Read) };
            if sp.fts_child.is_null() {
                return if isset(sp, FTS_STOP) {
                    std::ptr::null_mut()
                } else {
                    p
                };
            }
        }
        let child = sp.fts_child;
        sp.fts_child = std::ptr::null_mut();
        sp.fts_cur = child;
        // SAFETY: a live entry below the directory.
        unsafe { set_path(sp, child) };
        return child;
    }
    // The next sibling; after the last, the directory again.
    let mut tmp = p;
    loop {
        // SAFETY: `tmp` is live.
        let next = unsafe { (*tmp).fts_link };
        if next.is_null() {
            break;
        }
        sp.fts_cur = next;
        // SAFETY: `tmp` is done with: the entries still needed are reached
        // from `sp.fts_cur`, which no longer leads to `tmp`.
        unsafe { free_ent(tmp) };
        // SAFETY: `next` is live.
        let (level, instr) = unsafe { ((*next).fts_level, c_int::from((*next).fts_instr)) };
        if level == FTS_ROOTLEVEL {
            // SAFETY: a root of the stream.
            unsafe { load(sp, next) };
            return next;
        }
        // Instructions given through `fts_children`'s list.
        if instr == FTS_SKIP {
            tmp = next;
            continue;
        }
        // SAFETY: a live entry below a directory.
        unsafe { set_path(sp, next) };
        if instr == FTS_FOLLOW {
            // SAFETY: live, its access path the path just written.
            let info = unsafe { stat_ent(sp, next, true) };
            // SAFETY: as above.
            unsafe {
                (*next).fts_info = info;
                (*next).fts_instr = FTS_NOINSTR as u16;
            }
        }
        return next;
    }
    // SAFETY: the last sibling is live; so is its parent.
    let parent = unsafe { (*tmp).fts_parent };
    sp.fts_cur = parent;
    // SAFETY: the last sibling, done with.
    unsafe { free_ent(tmp) };
    // SAFETY: `parent` is live.
    let (level, pathlen, err) = unsafe {
        (
            (*parent).fts_level,
            (*parent).fts_pathlen,
            (*parent).fts_errno,
        )
    };
    if level == FTS_ROOTPARENTLEVEL {
        // SAFETY: the roots' parent, the last entry of the stream.
        unsafe { free_ent(parent) };
        sp.fts_cur = std::ptr::null_mut();
        set_errno(0);
        return std::ptr::null_mut();
    }
    // SAFETY: `sp` is ours; `parent` live.
    unsafe {
        put_path(sp, usize::from(pathlen), b"");
        (*parent).fts_info = if err != 0 { FTS_ERR } else { FTS_DP };
    }
    parent
}

/// `fts_children` over this library's calls.
///
/// # Safety
/// `sp` is a registered stream of this module's.
unsafe fn children_ours(sp: &mut Fts, instr: c_int) -> *mut FtsEnt {
    if instr != 0 && instr != FTS_NAMEONLY {
        set_errno(libc::EINVAL);
        return std::ptr::null_mut();
    }
    // 0: an empty directory, not an error.
    set_errno(0);
    let p = sp.fts_cur;
    if isset(sp, FTS_STOP) || p.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: the current entry is live.
    let e = unsafe { &*p };
    if e.fts_info == FTS_INIT {
        return e.fts_link;
    }
    if e.fts_info != FTS_D {
        return std::ptr::null_mut();
    }
    // SAFETY: the previous child list, referred to by nothing else.
    unsafe { free_list(sp.fts_child) };
    let kind = if instr == FTS_NAMEONLY {
        sp.fts_options |= FTS_NAMEONLY;
        Build::Names
    } else {
        Build::Child
    };
    // SAFETY: the current entry is a directory.
    sp.fts_child = unsafe { build(sp, kind) };
    sp.fts_child
}

/// Whether `fts_open` of these roots is this library's: one of them
/// leads under the run's directory or through it (or cannot be told,
/// the answer of this library's calls on it), or lies above it.
///
/// # Safety
/// `argv` is null or a null-terminated array of NUL-terminated paths.
unsafe fn any_root_ours(mut argv: *const *mut c_char) -> bool {
    if argv.is_null() {
        return false;
    }
    loop {
        // SAFETY: a null-terminated array (caller).
        let arg = unsafe { *argv };
        if arg.is_null() {
            return false;
        }
        // SAFETY: NUL-terminated (caller).
        if !matches!(
            unsafe { paths::target_c(libc::AT_FDCWD, arg) },
            Ok(Target::Kernel)
        ) {
            return true;
        }
        // A root above the directory: the walk reaches it.
        // SAFETY: NUL-terminated (caller).
        if paths::holds_dir(unsafe { std::ffi::CStr::from_ptr(arg) }.to_bytes()) {
            return true;
        }
        // SAFETY: the next element of the array.
        argv = unsafe { argv.add(1) };
    }
}

/// `fts_open(3)`.
///
/// # Safety
/// As `fts_open(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fts_open(
    argv: *const *mut c_char,
    options: c_int,
    compar: Compar,
) -> *mut Fts {
    // SAFETY: the caller's array.
    if !unsafe { any_root_ours(argv) } {
        // glibc's walk changes the kernel's working directory through
        // internal calls; while the working directory is the virtual one,
        // relative paths are resolved there instead, and the walk's
        // relative `fts_accpath`s would lead into the pool. Its roots are
        // absolute then (relative ones would lead under the directory):
        // with `FTS_NOCHDIR` its access paths are too.
        let options = if paths::virtual_cwd().is_some() {
            options | FTS_NOCHDIR
        } else {
            options
        };
        // SAFETY: the caller's arguments to libc.
        return unsafe { real::fts_open()(argv, options, compar) };
    }
    // SAFETY: the caller's promise.
    crate::ret(unsafe { open_ours(argv, options, compar) })
}

/// The stream `sp` when it is this module's.
fn ours(sp: *mut Fts) -> Option<&'static mut Fts> {
    // SAFETY: a registered stream is live until `fts_close` unregisters
    // it; one thread uses it at a time (as glibc's).
    STREAMS.contains(sp).then(|| unsafe { &mut *sp })
}

/// `fts_read(3)`.
///
/// # Safety
/// As `fts_read(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fts_read(sp: *mut Fts) -> *mut FtsEnt {
    match ours(sp) {
        // SAFETY: a registered stream.
        Some(s) => unsafe { read_ours(s) },
        // SAFETY: the caller's argument, unchanged, to libc.
        None => unsafe { real::fts_read()(sp) },
    }
}

/// `fts_children(3)`.
///
/// # Safety
/// As `fts_children(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fts_children(sp: *mut Fts, instr: c_int) -> *mut FtsEnt {
    match ours(sp) {
        // SAFETY: a registered stream.
        Some(s) => unsafe { children_ours(s, instr) },
        // SAFETY: the caller's arguments, unchanged, to libc.
        None => unsafe { real::fts_children()(sp, instr) },
    }
}

/// `fts_set(3)`: the instruction for the entry's next `fts_read`.
///
/// # Safety
/// As `fts_set(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fts_set(sp: *mut Fts, p: *mut FtsEnt, instr: c_int) -> c_int {
    if ours(sp).is_none() {
        // SAFETY: the caller's arguments, unchanged, to libc.
        return unsafe { real::fts_set()(sp, p, instr) };
    }
    if !matches!(instr, 0 | FTS_AGAIN | FTS_FOLLOW | FTS_NOINSTR | FTS_SKIP) {
        set_errno(libc::EINVAL);
        return 1;
    }
    // SAFETY: an entry of the stream's (caller), live.
    unsafe { (*p).fts_instr = instr as u16 };
    0
}

/// `fts_close(3)`.
///
/// # Safety
/// As `fts_close(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fts_close(sp: *mut Fts) -> c_int {
    if ours(sp).is_none() {
        // SAFETY: the caller's argument, unchanged, to libc.
        return unsafe { real::fts_close()(sp) };
    }
    STREAMS.remove(sp);
    // SAFETY: a stream of this module's, now unregistered; the caller
    // uses it no more.
    unsafe { free_stream(sp) };
    0
}

/// The `fts64_` names glibc exports (the same functions on x86-64).
macro_rules! fts64 {
    ($( $name:ident => $to:ident ($($arg:ident: $t:ty),*) -> $r:ty; )*) => {$(
        #[doc = concat!("`", stringify!($name), "`: `", stringify!($to), "` (the same structures on x86-64).")]
        ///
        /// # Safety
        #[doc = concat!("As `", stringify!($to), "(3)`.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name($($arg: $t),*) -> $r {
            // SAFETY: forwarded from the caller.
            unsafe { $to($($arg),*) }
        }
    )*};
}

fts64! {
    fts64_open => fts_open(argv: *const *mut c_char, options: c_int, compar: Compar) -> *mut Fts;
    fts64_read => fts_read(sp: *mut Fts) -> *mut FtsEnt;
    fts64_children => fts_children(sp: *mut Fts, instr: c_int) -> *mut FtsEnt;
    fts64_set => fts_set(sp: *mut Fts, p: *mut FtsEnt, instr: c_int) -> c_int;
    fts64_close => fts_close(sp: *mut Fts) -> c_int;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// The offsets of glibc 2.36's `<fts.h>` on x86-64 (`offsetof`).
    #[test]
    fn the_structures_have_glibcs_layout() {
        assert_eq!(size_of::<FtsEnt>(), 120);
        assert_eq!(offset_of!(FtsEnt, fts_accpath), 40);
        assert_eq!(offset_of!(FtsEnt, fts_errno), 56);
        assert_eq!(offset_of!(FtsEnt, fts_pathlen), 64);
        assert_eq!(offset_of!(FtsEnt, fts_ino), 72);
        assert_eq!(offset_of!(FtsEnt, fts_nlink), 88);
        assert_eq!(offset_of!(FtsEnt, fts_level), 96);
        assert_eq!(offset_of!(FtsEnt, fts_info), 98);
        assert_eq!(offset_of!(FtsEnt, fts_instr), 102);
        assert_eq!(offset_of!(FtsEnt, fts_statp), 104);
        assert_eq!(NAME_AT, 112);
        assert_eq!(size_of::<Fts>(), 72);
        assert_eq!(offset_of!(Fts, fts_path), 32);
        assert_eq!(offset_of!(Fts, fts_rfd), 40);
        assert_eq!(offset_of!(Fts, fts_compar), 56);
        assert_eq!(offset_of!(Fts, fts_options), 64);
    }
}
