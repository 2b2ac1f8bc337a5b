//! The C functions called as C calls them: results, errno values, the
//! last-error message, and every NULL and bad-argument path.

use super::*;
use std::collections::BTreeMap;
use std::ffi::CStr;
use std::ptr::{null, null_mut};

const POOL: u64 = 32 << 20;

fn c(s: &[u8]) -> CString {
    CString::new(s).unwrap()
}

fn last_error() -> String {
    let mut buf = [0u8; 512];
    // SAFETY: `buf` is 512 writable bytes.
    let n = unsafe { manyfs_last_error(buf.as_mut_ptr().cast(), buf.len()) };
    assert!(n >= 0 && (n as usize) < buf.len(), "message of {n} bytes");
    CStr::from_bytes_until_nul(&buf)
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned()
}

/// Assert `rc` is `-errno` and the thread's message names `what`.
fn fails(rc: i64, errno: i32, what: &str) {
    assert_eq!(rc, -i64::from(errno), "result (message: {})", last_error());
    let msg = last_error();
    assert!(msg.contains(what), "{msg:?} does not name {what:?}");
}

/// A fresh pool in a temporary directory, mounted.
fn mounted() -> (tempfile::TempDir, CString, *mut ManyfsFs) {
    let dir = tempfile::tempdir().unwrap();
    let pool = c(dir.path().join("pool").as_os_str().as_encoded_bytes());
    let mut fs = null_mut();
    // SAFETY: `pool` is NUL-terminated, `fs` a writable out-pointer.
    unsafe {
        assert_eq!(
            manyfs_mkfs(pool.as_ptr(), POOL, null()),
            0,
            "{}",
            last_error()
        );
        assert_eq!(
            manyfs_mount(pool.as_ptr(), null(), &mut fs),
            0,
            "{}",
            last_error()
        );
    }
    assert!(!fs.is_null());
    (dir, pool, fs)
}

/// Open `path` in `fs` with `flags` (mode 0644), asserting success.
///
/// # Safety
/// `fs` is a live mount handle.
unsafe fn open(fs: *mut ManyfsFs, path: &[u8], flags: c_int) -> *mut ManyfsFile {
    let mut f = null_mut();
    let p = c(path);
    // SAFETY: `fs` is live (the caller's guarantee), `p` NUL-terminated,
    // `f` writable.
    let rc = unsafe { manyfs_open(fs, p.as_ptr(), flags, 0o644, &mut f) };
    assert_eq!(rc, 0, "open {path:?}: {}", last_error());
    f
}

/// What a `manyfs_readdir` callback saw, and after how many entries it
/// asks to stop (0: never).
#[derive(Default)]
struct Listing {
    entries: BTreeMap<Vec<u8>, (u64, u8)>,
    stop_after: usize,
}

unsafe extern "C" fn collect(ctx: *mut c_void, name: *const c_char, ino: u64, kind: u8) -> c_int {
    // SAFETY: `ctx` is the `Listing` the test passed, used by no one else
    // during the call; `name` is NUL-terminated for the callback's length.
    let (listing, name) = unsafe { (&mut *ctx.cast::<Listing>(), CStr::from_ptr(name)) };
    listing
        .entries
        .insert(name.to_bytes().to_vec(), (ino, kind));
    c_int::from(listing.entries.len() == listing.stop_after)
}

/// # Safety
/// `fs` is a live mount handle.
unsafe fn list(fs: *mut ManyfsFs, path: &[u8], stop_after: usize) -> (i64, Listing) {
    let mut listing = Listing {
        stop_after,
        ..Listing::default()
    };
    let p = c(path);
    // SAFETY: `fs` is live, `p` NUL-terminated, `collect` matches the
    // callback type and `listing` outlives the call.
    let n = unsafe { manyfs_readdir(fs, p.as_ptr(), Some(collect), (&raw mut listing).cast()) };
    (n, listing)
}

#[test]
fn files_and_directories_through_the_c_functions() {
    let (_dir, pool, fs) = mounted();
    // SAFETY (whole test): every handle is live until freed once; paths
    // are NUL-terminated; buffers are as long as the counts passed.
    unsafe {
        let f = open(fs, b"/data", libc::O_RDWR | libc::O_CREAT | libc::O_EXCL);
        assert_eq!(manyfs_pwrite(f, b"hello world".as_ptr().cast(), 11, 0), 11);
        let mut buf = [0u8; 32];
        assert_eq!(manyfs_pread(f, buf.as_mut_ptr().cast(), 32, 6), 5);
        assert_eq!(&buf[..5], b"world");
        assert_eq!(
            manyfs_pread(f, buf.as_mut_ptr().cast(), 32, 11),
            0,
            "end of file"
        );

        // read/write follow the handle's offset; lseek moves it.
        assert_eq!(manyfs_read(f, buf.as_mut_ptr().cast(), 5), 5);
        assert_eq!(&buf[..5], b"hello");
        assert_eq!(manyfs_lseek(f, 0, libc::SEEK_CUR), 5);
        assert_eq!(manyfs_write(f, b"_".as_ptr().cast(), 1), 1);
        assert_eq!(manyfs_lseek(f, -2, libc::SEEK_END), 9);
        assert_eq!(manyfs_read(f, buf.as_mut_ptr().cast(), 32), 2);
        assert_eq!(&buf[..2], b"ld");
        assert_eq!(manyfs_lseek(f, 0, libc::SEEK_SET), 0);
        assert_eq!(manyfs_read(f, buf.as_mut_ptr().cast(), 32), 11);
        assert_eq!(&buf[..11], b"hello_world");

        let mut st = ManyfsStat::default();
        assert_eq!(manyfs_fstat(f, &mut st), 0);
        assert_eq!((st.size, st.mode, st.nlink), (11, libc::S_IFREG | 0o644, 1));
        assert!(st.mtime_sec > 1_600_000_000 && (0..1_000_000_000).contains(&st.mtime_nsec));
        assert_eq!(manyfs_ftruncate(f, 4), 0);
        assert_eq!(manyfs_fdatasync(f), 0);
        assert_eq!(manyfs_fsync(f), 0);
        let ino = st.ino;
        assert_eq!(manyfs_stat(fs, c(b"/data").as_ptr(), &mut st), 0);
        assert_eq!((st.ino, st.size), (ino, 4));
        assert_eq!(manyfs_close(f), 0);

        assert_eq!(manyfs_mkdir(fs, c(b"/d").as_ptr(), 0o700), 0);
        assert_eq!(manyfs_stat(fs, c(b"/d").as_ptr(), &mut st), 0);
        assert_eq!(st.mode, libc::S_IFDIR | 0o700);
        assert_eq!(manyfs_mkdir(fs, c(b"/e").as_ptr(), 0o755), 0);
        // Names are bytes, UTF-8 or not, as in POSIX.
        manyfs_close(open(fs, b"/d/\xff", libc::O_WRONLY | libc::O_CREAT));

        let (n, listing) = list(fs, b"/", 0);
        assert_eq!(n, 3);
        let kinds: Vec<_> = listing.entries.iter().map(|(k, v)| (&k[..], v.1)).collect();
        assert_eq!(
            kinds,
            [
                (&b"d"[..], MANYFS_DT_DIR),
                (b"data", MANYFS_DT_REG),
                (b"e", MANYFS_DT_DIR)
            ]
        );
        assert_eq!(listing.entries[&b"data"[..]].0, ino);
        let (n, listing) = list(fs, b"/", 1);
        assert_eq!(
            (n, listing.entries.len()),
            (1, 1),
            "the callback stopped it"
        );
        assert_eq!(
            list(fs, b"/d", 0).1.entries.keys().collect::<Vec<_>>(),
            [b"\xff"]
        );

        assert_eq!(
            manyfs_rename(fs, c(b"/data").as_ptr(), c(b"/e/moved").as_ptr()),
            0
        );
        assert_eq!(
            manyfs_rmdir(fs, c(b"/e").as_ptr()),
            -i64::from(libc::ENOTEMPTY) as c_int
        );
        assert_eq!(manyfs_unlink(fs, c(b"/e/moved").as_ptr()), 0);
        assert_eq!(manyfs_rmdir(fs, c(b"/e").as_ptr()), 0);
        fails(
            manyfs_stat(fs, c(b"/e").as_ptr(), &mut st).into(),
            libc::ENOENT,
            "manyfs_stat",
        );
        assert_eq!(manyfs_unmount(fs), 0);

        // What was written is there after a remount.
        let mut fs = null_mut();
        assert_eq!(manyfs_mount(pool.as_ptr(), null(), &mut fs), 0);
        assert_eq!(list(fs, b"/", 0).1.entries.len(), 1);
        assert_eq!(manyfs_stat(fs, c(b"/d/\xff").as_ptr(), &mut st), 0);
        assert_eq!(manyfs_unmount(fs), 0);
    }
}

#[test]
fn null_pointers_are_refused() {
    let (_dir, _pool, fs) = mounted();
    let p = c(b"/x");
    let mut st = ManyfsStat::default();
    let mut buf = [0u8; 8];
    let (ebadf, efault) = (libc::EBADF, libc::EFAULT);
    // SAFETY (whole test): the non-NULL arguments are valid; NULL is what
    // is being checked.
    unsafe {
        let mut out_fs = null_mut();
        fails(
            manyfs_mount(null(), null(), &mut out_fs).into(),
            efault,
            "manyfs_mount: path is NULL",
        );
        fails(
            manyfs_mount(p.as_ptr(), null(), null_mut()).into(),
            efault,
            "output pointer",
        );
        fails(
            manyfs_mkfs(null(), POOL, null()).into(),
            efault,
            "manyfs_mkfs",
        );
        fails(manyfs_unmount(null_mut()).into(), ebadf, "fs is NULL");
        fails(
            manyfs_options_init(null_mut()).into(),
            efault,
            "manyfs_options_init",
        );

        let mut out = null_mut();
        fails(
            manyfs_open(null(), p.as_ptr(), libc::O_RDONLY, 0, &mut out).into(),
            ebadf,
            "fs is NULL",
        );
        fails(
            manyfs_open(fs, null(), libc::O_RDONLY, 0, &mut out).into(),
            efault,
            "path is NULL",
        );
        let creat = libc::O_RDWR | libc::O_CREAT;
        fails(
            manyfs_open(fs, p.as_ptr(), creat, 0, null_mut()).into(),
            efault,
            "output pointer",
        );
        // Refused before anything happened: nothing was created.
        fails(
            manyfs_stat(fs, p.as_ptr(), &mut st).into(),
            libc::ENOENT,
            "/x",
        );

        fails(
            manyfs_close(null_mut()).into(),
            ebadf,
            "manyfs_close: file is NULL",
        );
        let nf: *const ManyfsFile = null();
        fails(
            manyfs_pread(nf, buf.as_mut_ptr().cast(), 8, 0),
            ebadf,
            "manyfs_pread",
        );
        fails(
            manyfs_pwrite(nf, buf.as_ptr().cast(), 8, 0),
            ebadf,
            "manyfs_pwrite",
        );
        fails(
            manyfs_read(nf, buf.as_mut_ptr().cast(), 8),
            ebadf,
            "manyfs_read",
        );
        fails(
            manyfs_write(nf, buf.as_ptr().cast(), 8),
            ebadf,
            "manyfs_write",
        );
        fails(manyfs_lseek(nf, 0, libc::SEEK_SET), ebadf, "manyfs_lseek");
        fails(manyfs_fsync(nf).into(), ebadf, "manyfs_fsync");
        fails(manyfs_fdatasync(nf).into(), ebadf, "manyfs_fdatasync");
        fails(manyfs_ftruncate(nf, 0).into(), ebadf, "manyfs_ftruncate");
        fails(manyfs_fstat(nf, &mut st).into(), ebadf, "manyfs_fstat");

        let f = open(fs, b"/x", creat);
        fails(manyfs_pread(f, null_mut(), 8, 0), efault, "buffer is NULL");
        fails(manyfs_pwrite(f, null(), 8, 0), efault, "buffer is NULL");
        fails(manyfs_read(f, null_mut(), 8), efault, "buffer is NULL");
        fails(manyfs_write(f, null(), 8), efault, "buffer is NULL");
        // No bytes: no buffer needed.
        assert_eq!(manyfs_pwrite(f, null(), 0, 0), 0);
        assert_eq!(manyfs_read(f, null_mut(), 0), 0);
        fails(manyfs_fstat(f, null_mut()).into(), efault, "output pointer");
        assert_eq!(manyfs_close(f), 0);

        fails(
            manyfs_stat(null(), p.as_ptr(), &mut st).into(),
            ebadf,
            "fs is NULL",
        );
        fails(
            manyfs_stat(fs, null(), &mut st).into(),
            efault,
            "path is NULL",
        );
        fails(
            manyfs_stat(fs, p.as_ptr(), null_mut()).into(),
            efault,
            "output pointer",
        );
        let root = c(b"/");
        fails(
            manyfs_readdir(null(), root.as_ptr(), Some(collect), null_mut()),
            ebadf,
            "fs is NULL",
        );
        fails(
            manyfs_readdir(fs, null(), Some(collect), null_mut()),
            efault,
            "path is NULL",
        );
        fails(
            manyfs_readdir(fs, root.as_ptr(), None, null_mut()),
            efault,
            "callback is NULL",
        );
        fails(
            manyfs_mkdir(null(), p.as_ptr(), 0o755).into(),
            ebadf,
            "manyfs_mkdir: fs is NULL",
        );
        fails(
            manyfs_mkdir(fs, null(), 0o755).into(),
            efault,
            "manyfs_mkdir: path is NULL",
        );
        fails(
            manyfs_rmdir(fs, null()).into(),
            efault,
            "manyfs_rmdir: path is NULL",
        );
        fails(
            manyfs_unlink(null(), p.as_ptr()).into(),
            ebadf,
            "manyfs_unlink: fs is NULL",
        );
        fails(
            manyfs_rename(fs, null(), p.as_ptr()).into(),
            efault,
            "manyfs_rename: path is NULL",
        );
        fails(
            manyfs_rename(fs, p.as_ptr(), null()).into(),
            efault,
            "manyfs_rename: to is NULL",
        );
        assert_eq!(manyfs_unmount(fs), 0);
    }
}

#[test]
fn bad_arguments_are_refused_with_einval() {
    let (_dir, _pool, fs) = mounted();
    let p = c(b"/f");
    let mut out = null_mut();
    let einval = libc::EINVAL;
    // SAFETY (whole test): all pointers are valid; the other arguments
    // are what is being checked.
    unsafe {
        for (flags, what) in [
            (
                libc::O_RDWR | libc::O_CREAT | libc::O_NONBLOCK,
                "open flags",
            ),
            (
                libc::O_RDWR | libc::O_CREAT | libc::O_DIRECTORY,
                "open flags",
            ),
            (libc::O_ACCMODE | libc::O_CREAT, "access mode"),
            (libc::O_RDONLY | libc::O_CREAT, "write access"),
            (libc::O_RDONLY | libc::O_TRUNC, "write access"),
        ] {
            fails(
                manyfs_open(fs, p.as_ptr(), flags, 0o644, &mut out).into(),
                einval,
                what,
            );
        }
        let f = open(fs, b"/f", libc::O_RDWR | libc::O_CREAT);
        fails(
            manyfs_open(
                fs,
                p.as_ptr(),
                libc::O_RDWR | libc::O_CREAT | libc::O_EXCL,
                0,
                &mut out,
            )
            .into(),
            libc::EEXIST,
            "/f",
        );
        fails(
            manyfs_open(fs, c(b"/missing").as_ptr(), libc::O_RDONLY, 0, &mut out).into(),
            libc::ENOENT,
            "/missing",
        );
        let mut buf = [0u8; 4];
        fails(
            manyfs_pread(f, buf.as_mut_ptr().cast(), 4, -1),
            einval,
            "negative offset",
        );
        fails(
            manyfs_pwrite(f, buf.as_ptr().cast(), 4, -4096),
            einval,
            "negative offset",
        );
        fails(manyfs_ftruncate(f, -1).into(), einval, "negative offset");
        fails(manyfs_lseek(f, 0, 7), einval, "whence 7");
        fails(manyfs_lseek(f, -1, libc::SEEK_SET), einval, "seek");
        assert_eq!(manyfs_pwrite(f, buf.as_ptr().cast(), 4, 0), 4);
        fails(
            manyfs_lseek(f, i64::MAX, libc::SEEK_END),
            einval,
            "seek to 4 + ",
        );
        assert_eq!(manyfs_lseek(f, i64::MAX, libc::SEEK_SET), i64::MAX);
        fails(manyfs_lseek(f, 1, libc::SEEK_CUR), einval, "seek");
        assert_eq!(manyfs_close(f), 0);

        // A read-only handle refuses writes, as a POSIX fd does.
        let r = open(fs, b"/f", libc::O_RDONLY);
        fails(
            manyfs_pwrite(r, buf.as_ptr().cast(), 4, 0),
            libc::EBADF,
            "not opened for writing",
        );
        fails(
            manyfs_write(r, buf.as_ptr().cast(), 4),
            libc::EBADF,
            "not opened for writing",
        );
        assert_eq!(
            manyfs_lseek(r, 0, libc::SEEK_CUR),
            0,
            "a failed write moves nothing"
        );
        assert_eq!(manyfs_close(r), 0);
        assert_eq!(manyfs_unmount(fs), 0);
    }
}

#[test]
fn options_grow_compatibly() {
    let dir = tempfile::tempdir().unwrap();
    let pool = c(dir.path().join("pool").as_os_str().as_encoded_bytes());
    // SAFETY (whole test): every options pointer covers at least its
    // `size` bytes; `pool` is NUL-terminated.
    unsafe {
        let mut o = ManyfsOptions::default();
        assert_eq!(manyfs_options_init(&mut o), 0);
        assert_eq!(o.size as usize, size_of::<ManyfsOptions>());
        assert_eq!(ManyfsOptions { size: 0, ..o }, ManyfsOptions::default());

        let bad = ManyfsOptions { durability: 9, ..o };
        fails(
            manyfs_mkfs(pool.as_ptr(), POOL, &bad).into(),
            libc::EINVAL,
            "durability 9",
        );
        let zero = ManyfsOptions::default();
        fails(
            manyfs_mkfs(pool.as_ptr(), POOL, &zero).into(),
            libc::EINVAL,
            "options size 0",
        );

        // An older caller's struct: only `size` and `durability`. The
        // fields after them read as their defaults, not as whatever
        // follows in memory.
        let older = ManyfsOptions {
            size: 8,
            durability: MANYFS_DURABILITY_FILE,
            read_only: 1,
            ..o
        };
        assert_eq!(
            manyfs_mkfs(pool.as_ptr(), POOL, &older),
            0,
            "{}",
            last_error()
        );
        fails(
            manyfs_mkfs(pool.as_ptr(), POOL, &older).into(),
            libc::EEXIST,
            "manyfs_mkfs",
        );
        let mut fs = null_mut();
        assert_eq!(manyfs_mount(pool.as_ptr(), &older, &mut fs), 0);
        let mut f = null_mut();
        let flags = libc::O_RDWR | libc::O_CREAT;
        assert_eq!(
            manyfs_open(fs, c(b"/w").as_ptr(), flags, 0o600, &mut f),
            0,
            "not read-only"
        );
        assert_eq!(manyfs_close(f), 0);
        assert_eq!(manyfs_unmount(fs), 0);

        // A newer caller's struct: more bytes, which must be zero.
        #[repr(C)]
        struct Newer {
            base: ManyfsOptions,
            future: u64,
        }
        let mut newer = Newer {
            base: ManyfsOptions {
                size: size_of::<Newer>() as u32,
                read_only: 1,
                ..o
            },
            future: 0,
        };
        assert_eq!(
            manyfs_mount(pool.as_ptr(), &newer.base, &mut fs),
            0,
            "{}",
            last_error()
        );
        fails(
            manyfs_open(fs, c(b"/w").as_ptr(), libc::O_WRONLY, 0, &mut f).into(),
            libc::EROFS,
            "manyfs_open",
        );
        assert_eq!(manyfs_unmount(fs), 0);
        newer.future = 1;
        fails(
            manyfs_mount(pool.as_ptr(), &newer.base, &mut fs).into(),
            libc::E2BIG,
            "does not know",
        );
        let replace = ManyfsOptions {
            replace_existing: 1,
            ..o
        };
        assert_eq!(manyfs_mkfs(pool.as_ptr(), POOL, &replace), 0);
    }
}

#[test]
fn last_error_truncates_and_reports_the_full_length() {
    // SAFETY (whole test): the buffers are as long as the lengths passed.
    unsafe {
        fails(
            manyfs_unmount(null_mut()).into(),
            libc::EBADF,
            "manyfs_unmount",
        );
        let full = "manyfs_unmount: fs is NULL";
        assert_eq!(manyfs_last_error(null_mut(), 0), full.len() as i64);
        let mut small = [0x55u8; 8];
        assert_eq!(
            manyfs_last_error(small.as_mut_ptr().cast(), 8),
            full.len() as i64
        );
        assert_eq!(&small, b"manyfs_\0");
        assert_eq!(
            manyfs_last_error(small.as_mut_ptr().cast(), 0),
            full.len() as i64
        );
        assert_eq!(&small, b"manyfs_\0", "len 0 writes nothing");
    }
    // Per thread: another thread has no message.
    let other = std::thread::spawn(|| {
        // SAFETY: NULL with length 0 writes nothing.
        unsafe { manyfs_last_error(null_mut(), 0) }
    });
    assert_eq!(other.join().unwrap(), 0);
}

#[test]
fn a_panic_becomes_eio_and_does_not_unwind() {
    let rc = glue::call("manyfs_test", || panic!("boom {}", 42));
    fails(
        rc,
        libc::EIO,
        "manyfs_test: internal error (panic): boom 42",
    );
    let rc = glue::call_int("manyfs_test", || std::panic::panic_any(7u8));
    fails(rc.into(), libc::EIO, "unknown cause");
}

#[test]
fn threads_share_a_handle() {
    let (_dir, _pool, fs) = mounted();
    const THREADS: u64 = 4;
    const CHUNKS: u64 = 64;
    // `step(t, i)` for chunk `i` of thread `t`, the threads at once.
    let each_thread = |step: &(dyn Fn(u64, u64) + Sync)| {
        std::thread::scope(|s| {
            for t in 0..THREADS {
                s.spawn(move || (0..CHUNKS).for_each(|i| step(t, i)));
            }
        })
    };
    // SAFETY (whole test): the handles stay live until the threads are
    // joined; every buffer is as long as the count passed.
    unsafe {
        // pwrite from many threads: each its own blocks.
        let f = open(fs, b"/shared", libc::O_RDWR | libc::O_CREAT);
        let file = &*f;
        each_thread(&|t, i| {
            let block = [(t * CHUNKS + i) as u8; 4096];
            let off = ((i * THREADS + t) * 4096) as i64;
            assert_eq!(manyfs_pwrite(file, block.as_ptr().cast(), 4096, off), 4096);
        });
        let mut block = [0u8; 4096];
        for t in 0..THREADS {
            for i in 0..CHUNKS {
                let off = ((i * THREADS + t) * 4096) as i64;
                assert_eq!(manyfs_pread(f, block.as_mut_ptr().cast(), 4096, off), 4096);
                assert!(block.iter().all(|&b| b == (t * CHUNKS + i) as u8));
            }
        }
        assert_eq!(manyfs_close(f), 0);

        // write from many threads on one offset: no record lost or
        // overlapped, as with a shared POSIX descriptor.
        let f = open(fs, b"/log", libc::O_RDWR | libc::O_CREAT);
        let file = &*f;
        each_thread(&|t, i| {
            let rec = (t * CHUNKS + i).to_le_bytes();
            assert_eq!(manyfs_write(file, rec.as_ptr().cast(), 8), 8);
        });
        let total = THREADS * CHUNKS;
        assert_eq!(manyfs_lseek(f, 0, libc::SEEK_CUR), (total * 8) as i64);
        let mut all = vec![0u8; (total * 8) as usize];
        assert_eq!(
            manyfs_pread(f, all.as_mut_ptr().cast(), all.len(), 0),
            all.len() as i64
        );
        let mut seen: Vec<u64> = all
            .chunks(8)
            .map(|r| u64::from_le_bytes(r.try_into().unwrap()))
            .collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..total).collect::<Vec<_>>());
        assert_eq!(manyfs_close(f), 0);

        // O_APPEND: writes go to the end, and the offset follows them.
        let f = open(fs, b"/log", libc::O_WRONLY | libc::O_APPEND);
        assert_eq!(manyfs_write(f, b"tail".as_ptr().cast(), 4), 4);
        assert_eq!(manyfs_lseek(f, 0, libc::SEEK_CUR), (total * 8 + 4) as i64);
        assert_eq!(manyfs_pwrite(f, b"more".as_ptr().cast(), 4, 0), 4);
        let mut st = ManyfsStat::default();
        assert_eq!(manyfs_fstat(f, &mut st), 0);
        assert_eq!(
            st.size,
            total * 8 + 8,
            "pwrite with O_APPEND appends, as on Linux"
        );
        assert_eq!(manyfs_close(f), 0);
        assert_eq!(manyfs_unmount(fs), 0);
    }
}
