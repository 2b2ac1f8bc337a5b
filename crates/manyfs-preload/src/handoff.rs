//! What an exec hands to the program it starts: the descriptors of the
//! pool the image keeps open across exec (not close-on-exec) and the
//! virtual working directory.
//!
//! Both live in the image's memory, which exec discards, so a shell's
//! `sort x > DIR/out` (the redirection is made in the forked child just
//! before it execs `sort`) gave `sort` a descriptor 1 the kernel answered
//! `EBADF` for, and `cd DIR && ls` listed the kernel's working directory.
//! The exec (after `state::before_exec` synced the pool) puts them in the
//! new program's environment, `MANYFS_RUN_FDS` (number, inode, `open`
//! flags, offset and path of each) and `MANYFS_RUN_CWD`, and keeps the
//! kernel descriptors that hold those numbers open across it. The new
//! image's library reads both when it is loaded, before the program's
//! `main`, and takes the variables out of its environment: it enters the
//! working directory, and marks each number as the pool's, *pending*. A
//! pending descriptor is opened again (the pool mounted, the file opened
//! at its path, its inode checked, its offset set) the first time the
//! program uses it; until then it holds nothing of the pool, so a shell
//! that inherited one it never touches can still let its commands mount
//! the pool, and an exec hands it on as it came. A file that is no longer
//! at its path (unlinked or replaced since: its inode differs) cannot be
//! opened again; its number then answers `EBADF`, said once.

use crate::{paths, real, state, table};
use libc::{c_char, c_int};
use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::sync::Mutex;

/// Environment: the descriptors handed over.
pub const ENV_FDS: &str = "MANYFS_RUN_FDS";
/// Environment: the virtual working directory handed over.
pub const ENV_CWD: &str = "MANYFS_RUN_CWD";

/// One descriptor handed over.
#[derive(Debug, PartialEq, Eq)]
struct Handed {
    fd: c_int,
    ino: u64,
    /// `open(2)` flags to open it again with (access mode, `O_APPEND`,
    /// `O_DIRECTORY`, ...; never `O_CREAT` or `O_TRUNC`).
    flags: c_int,
    offset: u64,
    /// The absolute path it was opened at.
    path: Vec<u8>,
    /// The shared cell of its offset (`offsets`), 0 for none.
    cell: u32,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// `fd,ino,flags,offset,cell,hexpath` joined by `;`.
fn encode(handed: &[Handed]) -> String {
    handed
        .iter()
        .map(|h| {
            format!(
                "{},{},{},{},{},{}",
                h.fd,
                h.ino,
                h.flags,
                h.offset,
                h.cell,
                hex(&h.path)
            )
        })
        .collect::<Vec<_>>()
        .join(";")
}

fn decode(s: &str) -> Option<Vec<Handed>> {
    s.split(';')
        .filter(|e| !e.is_empty())
        .map(|e| {
            let mut f = e.split(',');
            let h = Handed {
                fd: f.next()?.parse().ok()?,
                ino: f.next()?.parse().ok()?,
                flags: f.next()?.parse().ok()?,
                offset: f.next()?.parse().ok()?,
                cell: f.next()?.parse().ok()?,
                path: unhex(f.next()?)?,
            };
            f.next().is_none().then_some(h)
        })
        .collect()
}

/// Descriptors handed over by the exec that started this image, not
/// opened yet.
static PENDING: Mutex<Vec<Handed>> = Mutex::new(Vec::new());

fn pending() -> std::sync::MutexGuard<'static, Vec<Handed>> {
    PENDING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Forget a pending descriptor (closed or replaced before its first use).
pub(crate) fn forget_pending(fd: c_int) {
    let mut p = pending();
    if !p.is_empty() {
        p.retain(|h| h.fd != fd);
    }
}

/// The first use of pending descriptor `fd`: the pool mounted and the file
/// opened again at that number. `None` if `fd` is not pending or cannot
/// be opened (said on stderr).
pub(crate) fn open_pending(fd: c_int) -> Option<std::sync::Arc<table::Open>> {
    let h = {
        let mut p = pending();
        let i = p.iter().position(|h| h.fd == fd)?;
        p.swap_remove(i)
    };
    match state::fs() {
        Ok(Some(fs)) => adopt_one(fs, &h),
        _ => state::say(&format!(
            "descriptor {fd} ({}) could not be handed to this program: the pool is not mounted; it answers EBADF",
            String::from_utf8_lossy(&h.path)
        )),
    }
    table::get(fd)
}

/// Before a fork that lets the pool go (`state::release_if_idle`): every
/// descriptor of the pool open here becomes pending, as if an exec had
/// handed it over, with its offset in a shared cell (`offsets`), so that
/// it holds nothing of the pool and the child (a shell's command, whose
/// redirection dash makes before it forks) can mount the pool and use the
/// descriptor, and this process opens it again on its next use. `false`,
/// and nothing changed, when one cannot be: a directory part way through
/// its `getdents64` listing (it would be lost), a file no longer at the
/// path it was opened at
/// (unlinked or renamed: it could not be opened again), a description
/// something else holds, or no cell to be had.
pub(crate) fn park_all(fs: &manyfs::Fs) -> bool {
    let mut plan: Vec<(c_int, std::sync::Arc<table::Open>, u64)> = Vec::new();
    for fd in table::ours_in(0, u32::MAX) {
        if pending().iter().any(|h| h.fd == fd) {
            continue;
        }
        let Some(o) = table::get(fd) else {
            return false;
        };
        // A directory whose `getdents64` listing is part read would lose
        // it; one with none taken (a stream's, whose listing the stream
        // holds) or at its start loses nothing.
        if o.is_dir && *o.offset.lock() != 0 && o.listing.lock().is_ok_and(|l| l.is_some()) {
            return false;
        }
        let Ok(meta) = o.file.metadata() else {
            return false;
        };
        let here = match paths::target(libc::AT_FDCWD, &o.path) {
            Ok(paths::Target::Ours(inner)) => {
                let p = std::path::Path::new(std::ffi::OsStr::from_bytes(&inner));
                // Followed, as opening it again follows it.
                fs.metadata(p).ok().map(|m| m.ino)
            }
            _ => None,
        };
        if meta.nlink == 0 || here != Some(meta.ino) {
            return false;
        }
        plan.push((fd, o, meta.ino));
    }
    // Every holder of each description is one of the descriptors above
    // (and this plan): no stream or call of the library's holds one.
    for (_, o, _) in &plan {
        let fds = plan
            .iter()
            .filter(|(_, p, _)| std::sync::Arc::ptr_eq(p, o))
            .count();
        if std::sync::Arc::strong_count(o) != 2 * fds {
            return false;
        }
    }
    for (_, o, _) in &plan {
        if o.offset.cell().is_none() {
            let at = *o.offset.lock();
            let Some(i) = crate::offsets::alloc(at) else {
                return false;
            };
            let Some(c) = crate::offsets::cell(i) else {
                return false;
            };
            o.offset.share(i, c);
        }
    }
    for (fd, o, ino) in plan {
        let access = match (o.read, o.write) {
            (true, true) => libc::O_RDWR,
            (false, true) => libc::O_WRONLY,
            _ => libc::O_RDONLY,
        };
        let shown = o.flags.load(std::sync::atomic::Ordering::Relaxed) & !libc::O_ACCMODE;
        let offset = *o.offset.lock();
        pending().push(Handed {
            fd,
            ino,
            flags: access | shown,
            offset,
            path: o.path.clone(),
            cell: o.offset.cell().unwrap_or(0),
        });
        drop(o);
        table::park(fd);
    }
    true
}

/// The descriptors of the pool this image keeps across exec (not
/// close-on-exec): those still pending as they came, and, if this image
/// mounted the pool (`owner`), those open here.
fn handed(owner: bool) -> Vec<Handed> {
    let mut out: Vec<Handed> = pending()
        .iter()
        .filter(|h| !table::cloexec(h.fd))
        .map(|h| Handed {
            path: h.path.clone(),
            ..*h
        })
        .collect();
    // Open ones only from the image that mounted the pool (a forked
    // child's copies are its parent's).
    for fd in table::ours_in(0, u32::MAX).filter(|_| owner) {
        if table::cloexec(fd) || pending().iter().any(|h| h.fd == fd) {
            continue;
        }
        let Some(o) = table::get(fd) else {
            continue;
        };
        let Ok(meta) = o.file.metadata() else {
            continue;
        };
        let access = match (o.read, o.write) {
            (true, true) => libc::O_RDWR,
            (false, true) => libc::O_WRONLY,
            _ => libc::O_RDONLY,
        };
        let dir = if o.is_dir { libc::O_DIRECTORY } else { 0 };
        let shown = o.flags.load(std::sync::atomic::Ordering::Relaxed) & !libc::O_ACCMODE;
        let offset = *o.offset.lock();
        out.push(Handed {
            fd,
            ino: meta.ino,
            flags: access | dir | shown,
            offset,
            path: o.path.clone(),
            cell: o.offset.cell().unwrap_or(0),
        });
    }
    out
}

/// The environment an exec passes on, and the kernel descriptors it keeps
/// open across the exec.
pub(crate) struct ExecEnv {
    _strings: Vec<CString>,
    ptrs: Vec<*const c_char>,
    kept: Vec<c_int>,
}

impl ExecEnv {
    /// The new program's `envp`.
    pub(crate) fn envp(&self) -> *const *const c_char {
        self.ptrs.as_ptr()
    }

    /// The exec failed: the descriptors kept open go back to
    /// close-on-exec.
    pub(crate) fn exec_failed(self) {
        let saved = crate::errno();
        for &fd in &self.kept {
            // SAFETY: a kernel descriptor this library reserved.
            unsafe { real::fcntl64()(fd, libc::F_SETFD, libc::FD_CLOEXEC as libc::c_ulong) };
        }
        crate::set_errno(saved);
    }
}

/// The environment for an exec whose caller passed `envp` (null: this
/// process's `environ`): without any `MANYFS_RUN_FDS`/`MANYFS_RUN_CWD` it
/// held, plus this image's when it has descriptors or a working directory
/// to hand over, whose kernel descriptors are then left open across the
/// exec. `None` outside a run (the exec goes on with the caller's).
/// Without `with_fds` (a spawn: this process keeps its descriptors) only
/// the working directory is passed on.
///
/// # Safety
/// `envp` is null or a null-terminated array of NUL-terminated strings.
pub(crate) unsafe fn prepare(envp: *const *const c_char, with_fds: bool) -> Option<ExecEnv> {
    state::config()?;
    let envp = if envp.is_null() {
        // SAFETY: glibc's `environ`, read once.
        unsafe { environ }
    } else {
        envp
    };
    let mut strings = Vec::new();
    let mut kept = Vec::new();
    if let Some(cwd) = paths::virtual_cwd() {
        strings.push(CString::new(format!("{ENV_CWD}={}", hex(&cwd))).ok()?);
    }
    let handed = if with_fds {
        handed(state::owns_mount())
    } else {
        Vec::new()
    };
    if !handed.is_empty() {
        strings.push(CString::new(format!("{ENV_FDS}={}", encode(&handed))).ok()?);
        if let Some(fd) = crate::offsets::region_fd().filter(|_| handed.iter().any(|h| h.cell != 0))
        {
            strings.push(CString::new(format!("{}={fd}", crate::offsets::ENV_OFFSETS)).ok()?);
            // SAFETY: the library's own descriptor of the offsets region.
            if unsafe { real::fcntl64()(fd, libc::F_SETFD, 0) } == 0 {
                kept.push(fd);
            }
        }
        for h in &handed {
            // SAFETY: the kernel descriptor reserved for `h.fd`.
            if unsafe { real::fcntl64()(h.fd, libc::F_SETFD, 0) } == 0 {
                kept.push(h.fd);
            }
        }
    }
    let mut ptrs: Vec<*const c_char> = Vec::new();
    let mut i = 0;
    while !envp.is_null() {
        // SAFETY: a null-terminated array (caller); `i` is at most its
        // terminator's index.
        let e = unsafe { *envp.add(i) };
        if e.is_null() {
            break;
        }
        // SAFETY: NUL-terminated (caller).
        let b = unsafe { CStr::from_ptr(e) }.to_bytes();
        let ours = [ENV_FDS, ENV_CWD, crate::offsets::ENV_OFFSETS]
            .iter()
            .any(|v| b.starts_with(v.as_bytes()) && b.get(v.len()) == Some(&b'='));
        if !ours {
            ptrs.push(e);
        }
        i += 1;
    }
    ptrs.extend(strings.iter().map(|s| s.as_ptr()));
    ptrs.push(std::ptr::null());
    Some(ExecEnv {
        _strings: strings,
        ptrs,
        kept,
    })
}

unsafe extern "C" {
    static mut environ: *const *const c_char;
}

/// Take `name` out of the environment; its value, if it was set.
fn take_env(name: &str) -> Option<String> {
    let v = std::env::var(name).ok();
    if v.is_some() {
        let c = CString::new(name).ok()?;
        // SAFETY: a NUL-terminated name; the library's constructor runs
        // before the program's `main` and its threads.
        unsafe { libc::unsetenv(c.as_ptr()) };
    }
    v
}

/// Open `h` again at its number in this new image; a line on stderr when
/// it cannot be.
fn adopt_one(fs: &manyfs::Fs, h: &Handed) {
    let lost = |why: String| {
        state::say(&format!(
            "descriptor {} ({}) could not be handed to this program: {why}; it answers EBADF",
            h.fd,
            String::from_utf8_lossy(&h.path)
        ));
    };
    let inner = match paths::target(libc::AT_FDCWD, &h.path) {
        Ok(paths::Target::Ours(inner)) => inner,
        _ => return lost("its path is not under the directory".into()),
    };
    let p = std::path::Path::new(std::ffi::OsStr::from_bytes(&inner));
    let fd = match crate::files::open_ours(fs, p, h.flags, 0) {
        Ok(fd) => fd,
        Err(e) => return lost(std::io::Error::from_raw_os_error(e).to_string()),
    };
    let same = table::get(fd)
        .and_then(|o| o.file.metadata().ok())
        .is_some_and(|m| m.ino == h.ino);
    if !same {
        crate::files::close_ours(fd);
        return lost("another file is at its path now".into());
    }
    let Some(open) = table::get(fd) else {
        return lost("it closed while being opened".into());
    };
    // A shared offset is the cell's (where the other holders moved it).
    match crate::offsets::cell(h.cell) {
        Some(c) => open.offset.share(h.cell, c),
        None => *open.offset.lock() = h.offset,
    }
    // Straight into the pending number (not `dup2`, which would first
    // close it as the program's and flush its standard stream meanwhile):
    // the kernel's copy replaces the one that held the number.
    // SAFETY: two descriptor numbers this library reserved.
    if unsafe { real::dup3()(fd, h.fd, libc::O_CLOEXEC) } < 0 {
        lost(std::io::Error::last_os_error().to_string());
    } else {
        table::install(h.fd, open, false);
    }
    crate::files::close_ours(fd);
}

/// The library's constructor: takes what the exec that started this image
/// handed over (see the module's text).
extern "C" fn adopt() {
    if state::config().is_none() {
        return;
    }
    // Marks the main thread's thread-locals live (see `tls_live`).
    crate::tls_live();
    if let Some(cwd) = take_env(ENV_CWD).and_then(|v| unhex(&v)) {
        paths::set_virtual_cwd(Some(cwd));
    }
    if let Some(fd) = take_env(crate::offsets::ENV_OFFSETS).and_then(|v| v.parse().ok()) {
        crate::offsets::adopt_region(fd);
    }
    let Some(list) = take_env(ENV_FDS) else {
        return;
    };
    let Some(handed) = decode(&list) else {
        state::say(&format!(
            "{ENV_FDS} is malformed; descriptors handed over are lost"
        ));
        return;
    };
    for h in handed {
        // The kernel descriptor that kept the number across the exec goes
        // back to close-on-exec, as every one of the library's.
        // SAFETY: F_SETFD on a descriptor number; the kernel checks it.
        if unsafe { real::fcntl64()(h.fd, libc::F_SETFD, libc::FD_CLOEXEC as libc::c_ulong) } != 0 {
            continue;
        }
        let fd = h.fd;
        pending().push(h);
        table::reserve_pending(fd);
    }
}

#[used]
#[unsafe(link_section = ".init_array")]
static ADOPT: extern "C" fn() = adopt;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handed_descriptors_round_trip_through_their_text() {
        let list = vec![
            Handed {
                fd: 1,
                ino: 7,
                flags: libc::O_WRONLY | libc::O_APPEND,
                offset: 12,
                path: b"/mnt/a;b,c".to_vec(),
                cell: 3,
            },
            Handed {
                fd: 9,
                ino: 1,
                flags: libc::O_RDONLY | libc::O_DIRECTORY,
                offset: 0,
                path: "/mnt/\u{e9}t\u{e9}".as_bytes().to_vec(),
                cell: 0,
            },
        ];
        assert_eq!(decode(&encode(&list)), Some(list));
        assert_eq!(decode(""), Some(vec![]));
        assert_eq!(decode("1,2,3"), None);
        assert_eq!(decode("1,2,3,4,0,zz"), None);
        assert_eq!(decode("1,2,3,4,0,66,7"), None);
    }
}
