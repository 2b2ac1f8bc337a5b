//! Unmodified programs on a FUSE mount: fio with several processes sharing
//! one file, sqlite3 in rollback-journal and WAL mode, and proof that
//! disjoint writes from several processes run concurrently in the daemon.

mod common;

use std::fs::{self, OpenOptions};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// Start `dd` with `args` and `conv=notrunc status=none`, stdin closed.
fn spawn_dd(args: impl IntoIterator<Item = String>) -> Child {
    Command::new("dd")
        .args(args)
        .arg("conv=notrunc")
        .arg("status=none")
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn dd")
}

/// Wait for every `dd` of `children`; each must succeed.
fn wait_dd(children: Vec<Child>) {
    for mut c in children {
        assert!(c.wait().unwrap().success(), "dd failed");
    }
}

/// fio: 4 processes write disjoint 16 MiB regions of ONE file with direct
/// I/O, then read them back and verify every block's crc32c.
#[test]
fn fio_shared_file_disjoint_regions_verify() {
    if !fuse_available("fio_shared_file_disjoint_regions_verify") {
        return;
    }
    require_tool("fio");
    let s = Scratch::new();
    let m = s.mount(&["threads=4"]);
    let jobs = 4u64;
    let region = 16u64 << 20;
    let file = s.mnt.join("shared.dat");
    // Pre-size the file: writes inside it are non-extending, so the kernel
    // sends them to the daemon in parallel (FOPEN_PARALLEL_DIRECT_WRITES).
    create_sized(&file, jobs * region);
    let start = Instant::now();
    let out = run_ok(
        Command::new("fio")
            .current_dir(&s.mnt)
            .arg("--name=shared")
            .arg("--filename=shared.dat")
            .arg("--ioengine=psync")
            .arg("--direct=1")
            .arg("--rw=randwrite")
            .arg("--bs=64k")
            .arg(format!("--size={region}"))
            .arg(format!("--offset_increment={region}"))
            .arg(format!("--numjobs={jobs}"))
            .arg("--verify=crc32c")
            .arg("--verify_fatal=1")
            .arg("--do_verify=1")
            .arg("--group_reporting=1")
            .arg("--fallocate=none"),
    );
    let secs = start.elapsed().as_secs_f64();
    let bw = out
        .lines()
        .find(|l| l.trim_start().starts_with("WRITE:"))
        .unwrap_or("(no WRITE line)")
        .trim()
        .to_string();
    eprintln!(
        "fio {jobs} jobs x {} MiB, write+verify in {secs:.2}s; {bw}",
        region >> 20
    );
    assert!(!out.contains("verify: bad"), "{out}");
    assert_eq!(fs::metadata(&file).unwrap().len(), jobs * region);
    let conc = m.stats().max_concurrent_writes();
    eprintln!("fio: max concurrent writes on the shared inode = {conc}");
    assert_eq!(m.stats().handler_panics(), 0);
    unmount(m);
    s.fsck();
}

/// Several processes (dd) write disjoint ranges of one pre-sized file; the
/// daemon's per-inode in-flight counter (compiled in only with the
/// `test-probes` feature, which these tests enable) must have seen more than
/// one write at a time. A daemon that serialised writes to one file (one
/// serving thread, an exclusive inode lock) never gets above 1 and fails.
#[test]
fn disjoint_writes_from_processes_run_concurrently() {
    if !fuse_available("disjoint_writes_from_processes_run_concurrently") {
        return;
    }
    let s = Scratch::new();
    let m = s.mount(&["threads=8"]);
    let procs = 4u64;
    let chunk = 64u64 << 10;
    let count = 256u64; // 16 MiB per process
    let file = s.mnt.join("disjoint.dat");
    create_sized(&file, procs * chunk * count);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut rounds = 0;
    while m.stats().max_concurrent_writes() < 2 && Instant::now() < deadline {
        rounds += 1;
        let children: Vec<_> = (0..procs)
            .map(|i| {
                spawn_dd([
                    "if=/dev/zero".to_string(),
                    format!("of={}", file.display()),
                    format!("bs={chunk}"),
                    format!("count={count}"),
                    format!("seek={}", i * count),
                ])
            })
            .collect();
        wait_dd(children);
    }
    let conc = m.stats().max_concurrent_writes();
    eprintln!(
        "{procs} dd processes: max concurrent writes on one inode = {conc} after {rounds} round(s)"
    );
    assert!(
        conc > 1,
        "writes to disjoint ranges never overlapped in the daemon (max in flight {conc})"
    );
    assert_eq!(fs::metadata(&file).unwrap().len(), procs * chunk * count);
    unmount(m);
    s.fsck();
}

/// Several processes append fixed-size records with O_APPEND (dd
/// oflag=append): every record must land whole, none lost or overwritten,
/// each process's records in its own order.
#[test]
fn concurrent_o_append_from_processes_is_atomic() {
    if !fuse_available("concurrent_o_append_from_processes_is_atomic") {
        return;
    }
    let s = Scratch::new();
    let m = s.mount(&[]);
    let procs = 4usize;
    let records = 500usize;
    let rec = 128usize;
    let log = s.mnt.join("append.log");
    fs::write(&log, b"").unwrap();
    let mut children = Vec::new();
    for p in 0..procs {
        let mut input = Vec::with_capacity(records * rec);
        for i in 0..records {
            let mut r = format!("proc={p} seq={i:06} ").into_bytes();
            r.resize(rec - 1, b'a' + p as u8);
            r.push(b'\n');
            input.extend_from_slice(&r);
        }
        let src = s.dir.path().join(format!("in{p}"));
        fs::write(&src, &input).unwrap();
        children.push(spawn_dd([
            format!("if={}", src.display()),
            format!("of={}", log.display()),
            format!("bs={rec}"),
            "oflag=append".to_string(),
        ]));
    }
    wait_dd(children);
    let data = fs::read(&log).unwrap();
    assert_eq!(
        data.len(),
        procs * records * rec,
        "appends lost or overwritten"
    );
    let mut next = vec![0usize; procs];
    for chunk in data.chunks(rec) {
        let line = std::str::from_utf8(chunk).expect("torn record");
        let p: usize = line[5..line.find(' ').unwrap()].parse().expect("record");
        let seq: usize = line[line.find("seq=").unwrap() + 4..][..6].parse().unwrap();
        assert_eq!(seq, next[p], "process {p} records out of order");
        next[p] += 1;
        let pad = b'a' + p as u8;
        assert!(
            chunk[..rec - 1].ends_with(&[pad; 8]),
            "torn record {line:?}"
        );
    }
    assert!(next.iter().all(|&n| n == records));
    unmount(m);
    s.fsck();
}

/// Whether a writable shared mapping of a file on the mount works, and a
/// store through it reaches the file.
fn shared_mmap_works(path: &std::path::Path) -> bool {
    use std::os::fd::AsRawFd;
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .unwrap();
    f.set_len(4096).unwrap();
    // SAFETY: mapping a 4096-byte file we own; the result is checked
    // before use and unmapped below.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return false;
    }
    // SAFETY: `p` is a live 4096-byte read-write mapping.
    unsafe {
        std::ptr::write_volatile(p.cast::<u8>(), 0x42);
        libc::msync(p, 4096, libc::MS_SYNC);
        libc::munmap(p, 4096);
    }
    drop(f);
    let ok = fs::read(path).unwrap().first() == Some(&0x42);
    fs::remove_file(path).unwrap();
    assert!(
        ok,
        "a store through a shared mapping did not reach the file"
    );
    ok
}

fn sqlite(db: &std::path::Path, sql: &str) -> String {
    use std::io::Write;
    let mut child = Command::new("sqlite3")
        .arg("-batch")
        .arg("-bail")
        .arg(db)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sqlite3");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(sql.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success() && stderr.trim().is_empty(),
        "sqlite3 {} failed ({}):\n{stdout}\n{stderr}",
        db.display(),
        out.status
    );
    stdout
}

/// 100k rows in 10 transactions of 10k.
fn load_sql(journal: &str) -> String {
    let mut sql = format!(
        "PRAGMA journal_mode={journal};\n\
         PRAGMA synchronous=FULL;\n\
         CREATE TABLE t(id INTEGER PRIMARY KEY, k TEXT, v INTEGER, pad BLOB);\n\
         CREATE INDEX t_k ON t(k);\n"
    );
    for tx in 0..10 {
        sql.push_str(&format!(
            "BEGIN;\n\
             WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<10000)\n\
             INSERT INTO t(k, v, pad) SELECT printf('k%d-%d', {tx}, x), x, randomblob(100) FROM c;\n\
             COMMIT;\n"
        ));
    }
    sql.push_str("SELECT count(*), sum(v) FROM t;\nPRAGMA integrity_check;\n");
    sql
}

#[test]
fn sqlite_rollback_journal_and_wal() {
    if !fuse_available("sqlite_rollback_journal_and_wal") {
        return;
    }
    require_tool("sqlite3");
    let s = Scratch::new();
    let m = s.mount(&[]);

    // rollback journal
    let start = Instant::now();
    let db = s.mnt.join("rollback.db");
    let out = sqlite(&db, &load_sql("DELETE"));
    eprintln!(
        "sqlite rollback journal: 100k rows in 10 transactions in {:.2}s",
        start.elapsed().as_secs_f64()
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.first(), Some(&"delete"), "{out}");
    assert!(lines.contains(&"100000|500050000"), "{out}");
    assert_eq!(lines.last(), Some(&"ok"), "integrity_check: {out}");
    assert!(!s.mnt.join("rollback.db-journal").exists());

    // WAL: the WAL index (-shm) is shared-mmapped; the daemon asks the
    // kernel for FUSE_DIRECT_IO_ALLOW_MMAP (Linux 6.6+) so this works with
    // direct I/O. On an older kernel shared mmap of a direct-I/O file fails,
    // and SQLite then needs locking_mode=EXCLUSIVE (WAL index in heap memory).
    let shared_mmap = shared_mmap_works(&s.mnt.join("mmap-probe"));
    let prefix = if shared_mmap {
        ""
    } else {
        eprintln!("shared mmap unsupported by this kernel's FUSE: WAL with locking_mode=EXCLUSIVE");
        "PRAGMA locking_mode=EXCLUSIVE;\n"
    };
    let start = Instant::now();
    let wal = s.mnt.join("wal.db");
    let out = sqlite(&wal, &format!("{prefix}{}", load_sql("WAL")));
    eprintln!(
        "sqlite WAL: 100k rows in 10 transactions in {:.2}s",
        start.elapsed().as_secs_f64()
    );
    let lines: Vec<&str> = out.lines().filter(|l| *l != "exclusive").collect();
    assert_eq!(lines.first(), Some(&"wal"), "{out}");
    assert!(lines.contains(&"100000|500050000"), "{out}");
    assert_eq!(lines.last(), Some(&"ok"), "integrity_check: {out}");
    if shared_mmap {
        // a second connection reads what the first committed (WAL + -shm)
        let out = sqlite(&wal, "SELECT count(*) FROM t WHERE k LIKE 'k9-%';\n");
        assert_eq!(out.trim(), "10000");
    }
    assert_eq!(m.stats().handler_panics(), 0);
    unmount(m);

    // both databases survive an unmount of the pool
    let m = s.mount(&[]);
    let out = sqlite(&db, "PRAGMA integrity_check;\nSELECT count(*) FROM t;\n");
    assert_eq!(out, "ok\n100000\n");
    let out = sqlite(&wal, "PRAGMA integrity_check;\nSELECT count(*) FROM t;\n");
    assert_eq!(out, "ok\n100000\n");
    unmount(m);
    s.fsck();
}

/// `-o writeback_cache`: the kernel combines small writes in its page cache
/// and writes them back page-wise. What programs write (small appends, an
/// overwrite inside a page, a truncate, a shared-mmap store, a SQLite WAL
/// database) is all in the pool once the files are closed, after a remount
/// without the option, and the pool checks clean.
#[test]
fn writeback_cache_small_writes_reach_the_pool() {
    if !fuse_available("writeback_cache_small_writes_reach_the_pool") {
        return;
    }
    require_tool("sqlite3");
    use std::io::{Seek, SeekFrom, Write};
    let s = Scratch::new();
    let m = s.mount(&["writeback_cache"]);

    // 20,000 appends of 100 bytes, the shape of a database's log.
    let log = s.mnt.join("log");
    let mut expect = Vec::new();
    {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap();
        for i in 0..20_000u32 {
            let rec = format!("{i:09}-{}\n", "x".repeat(89));
            f.write_all(rec.as_bytes()).unwrap();
            expect.extend_from_slice(rec.as_bytes());
        }
    }
    // An overwrite inside one page and a truncate that cuts a page.
    {
        let mut f = std::fs::OpenOptions::new().write(true).open(&log).unwrap();
        f.seek(SeekFrom::Start(5_000)).unwrap();
        f.write_all(b"OVERWRITTEN").unwrap();
        expect[5_000..5_011].copy_from_slice(b"OVERWRITTEN");
        f.set_len(1_500_123).unwrap();
        expect.truncate(1_500_123);
    }
    assert_eq!(std::fs::read(&log).unwrap(), expect);
    // The kernel combined the appends: far fewer writes reached the
    // library than the 20,000 the program made (one log entry each).
    unmount(m);
    let report = retry_busy(|| manyfs::fsck::check(&s.pool)).expect("fsck");
    assert!(report.errors.is_empty(), "fsck: {:?}", report.errors);
    assert!(
        report.entries < 2_000,
        "{} log entries for 20,000 small appends: the kernel did not combine them",
        report.entries
    );
    let m = s.mount(&["writeback_cache"]);

    // A store through a shared mapping, written back at msync.
    let mapped = s.mnt.join("mapped");
    create_sized(&mapped, 8192);
    {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&mapped)
            .unwrap();
        // SAFETY: an 8 KiB shared read-write mapping of a file this test
        // created and nobody else opens; unmapped below before the file is
        // closed, and only accessed through the returned pointer in range.
        unsafe {
            use std::os::fd::AsRawFd;
            let p = libc::mmap(
                std::ptr::null_mut(),
                8192,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            );
            assert_ne!(p, libc::MAP_FAILED, "mmap");
            std::ptr::copy_nonoverlapping(b"mapped!".as_ptr(), (p as *mut u8).add(4100), 7);
            assert_eq!(libc::msync(p, 8192, libc::MS_SYNC), 0, "msync");
            assert_eq!(libc::munmap(p, 8192), 0, "munmap");
        }
    }

    let wal = s.mnt.join("wal.db");
    let out = sqlite(&wal, &load_sql("WAL"));
    assert!(out.lines().any(|l| l == "100000|500050000"), "{out}");
    assert_eq!(out.lines().last(), Some("ok"), "integrity_check: {out}");
    assert_eq!(m.stats().handler_panics(), 0);
    unmount(m);
    s.fsck();

    // Everything is in the pool: read it back without the kernel's cache.
    let m = s.mount(&[]);
    assert_eq!(std::fs::read(&log).unwrap(), expect);
    let back = std::fs::read(&mapped).unwrap();
    assert_eq!(&back[4100..4107], b"mapped!");
    assert_eq!(back.len(), 8192);
    let out = sqlite(&wal, "PRAGMA integrity_check;\nSELECT count(*) FROM t;\n");
    assert_eq!(out, "ok\n100000\n");
    unmount(m);
    s.fsck();
}

/// `errno` of an xattr call on `path` through libc (`op`: get, set,
/// list, remove), or `None` when it succeeded.
fn xattr_errno(path: &std::path::Path, op: &str) -> Option<i32> {
    use std::os::unix::ffi::OsStrExt;
    let p = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    let name = c"user.kept";
    let mut buf = [0u8; 64];
    // SAFETY: NUL-terminated path and name; `buf` is live and as long as
    // the size passed; the value passed is a 2-byte literal.
    let rc = unsafe {
        match op {
            "get" => libc::getxattr(p.as_ptr(), name.as_ptr(), buf.as_mut_ptr().cast(), 64),
            "set" => {
                libc::setxattr(p.as_ptr(), name.as_ptr(), b"v1".as_ptr().cast(), 2, 0) as isize
            }
            "list" => libc::listxattr(p.as_ptr(), buf.as_mut_ptr().cast(), 64),
            "remove" => libc::removexattr(p.as_ptr(), name.as_ptr()) as isize,
            _ => unreachable!("xattr op {op}"),
        }
    };
    (rc < 0).then(|| std::io::Error::last_os_error().raw_os_error().unwrap())
}

/// `-o noxattr`: with kernel write-back caching, small buffered writes
/// reach the daemon with no `getxattr` (the kernel's `security.capability`
/// check, one round trip per write with xattrs on); xattr calls fail with
/// `EOPNOTSUPP` as on a file system without them; an attribute set before
/// survives in the pool and is served again by a mount without the option.
#[test]
fn noxattr_buffered_writes_ask_no_getxattr_and_xattrs_are_unsupported() {
    if !fuse_available("noxattr_buffered_writes_ask_no_getxattr_and_xattrs_are_unsupported") {
        return;
    }
    use std::io::Write;
    let s = Scratch::new();
    let appends = 1_000u32;
    // `appends` records of 100 bytes, appended one `write` each; returns
    // the getxattr requests the daemon received meanwhile.
    let append_log = |m: &manyfs_fuse::MountedFs, name: &str| -> (u64, Vec<u8>) {
        let before = m.stats().getxattr_requests();
        let mut expect = Vec::new();
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(s.mnt.join(name))
            .unwrap();
        for i in 0..appends {
            let rec = format!("{i:09}-{}\n", "y".repeat(89));
            f.write_all(rec.as_bytes()).unwrap();
            expect.extend_from_slice(rec.as_bytes());
        }
        drop(f);
        (m.stats().getxattr_requests() - before, expect)
    };

    // xattrs on (the default): an attribute set, and a directory whose
    // default ACL would give new files mode 0640 and an access ACL; the
    // kernel asks before
    // every buffered write, which is what the option removes.
    let m = s.mount(&["writeback_cache"]);
    let kept = s.mnt.join("kept");
    fs::write(&kept, b"data").unwrap();
    assert_eq!(xattr_errno(&kept, "set"), None);
    let acl_dir = s.mnt.join("acl-dir");
    fs::create_dir(&acl_dir).unwrap();
    run_ok(
        Command::new("setfacl")
            .args(["-d", "-m", "u::rw,u:1234:r,g::-,o::-"])
            .arg(&acl_dir),
    );
    let (asked_with_xattrs, expect) = append_log(&m, "log-with");
    assert_eq!(fs::read(s.mnt.join("log-with")).unwrap(), expect);
    assert!(
        asked_with_xattrs >= u64::from(appends),
        "{asked_with_xattrs} getxattr requests for {appends} buffered writes with xattrs on"
    );
    unmount(m);

    let m = s.mount(&["writeback_cache,noxattr"]);
    let (asked_without, expect) = append_log(&m, "log-without");
    assert_eq!(fs::read(s.mnt.join("log-without")).unwrap(), expect);
    // The first one may still come (answered ENOSYS); none after it.
    assert!(
        asked_without <= 1,
        "{asked_without} getxattr requests for {appends} buffered writes with noxattr"
    );
    for op in ["get", "set", "list", "remove"] {
        assert_eq!(
            xattr_errno(&kept, op),
            Some(libc::EOPNOTSUPP),
            "{op}xattr with noxattr"
        );
    }
    // No ACL is inherited where none is enforced: the new file's mode is
    // the one asked for less the umask, as on a file system without ACLs.
    let umask = fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Umask:"))
        .map(|v| u32::from_str_radix(v.trim(), 8).unwrap())
        .unwrap();
    let new_file = acl_dir.join("new");
    fs::write(&new_file, b"x").unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        fs::metadata(&new_file).unwrap().permissions().mode() & 0o777,
        0o666 & !umask
    );
    assert_eq!(m.stats().handler_panics(), 0);
    unmount(m);

    // The attribute is still in the pool; the file made under noxattr
    // has no ACL there.
    let m = s.mount(&[]);
    assert_eq!(xattr_errno(&kept, "get"), None);
    let acl = run_ok(Command::new("getfacl").args(["-c", "-E"]).arg(&new_file));
    assert!(
        !acl.contains("mask::"),
        "an ACL was inherited under noxattr: {acl}"
    );
    unmount(m);
    s.fsck();
}

/// `-o writeback_cache` through write-only descriptors: the kernel reads
/// the page a write only partly covers through the writer's own handle,
/// so an `O_WRONLY` open must still serve reads. An append with `>>` after
/// a remount (the page not cached) and a 6,000-byte `pwrite` at an
/// unaligned offset both write everything; without the fix they failed
/// with EBADF and wrote 4,096 bytes.
#[test]
fn writeback_cache_writes_through_write_only_descriptors() {
    if !fuse_available("writeback_cache_writes_through_write_only_descriptors") {
        return;
    }
    use std::io::Write;
    use std::os::unix::fs::FileExt;
    let s = Scratch::new();
    let m = s.mount(&["writeback_cache"]);
    let g = s.mnt.join("g");
    fs::write(&g, b"line1\n").unwrap();
    unmount(m);
    let m = s.mount(&["writeback_cache"]);
    {
        let mut f = OpenOptions::new().append(true).open(&g).unwrap();
        f.write_all(b"line2\n").unwrap();
    }
    let h = s.mnt.join("h");
    {
        let f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&h)
            .unwrap();
        assert_eq!(f.write_at(&[b'x'; 6000], 100).unwrap(), 6000);
    }
    unmount(m);
    let m = s.mount(&["writeback_cache"]);
    {
        let f = OpenOptions::new().write(true).open(&h).unwrap();
        assert_eq!(f.write_at(&[b'y'; 6000], 50).unwrap(), 6000);
    }
    assert_eq!(fs::read(&g).unwrap(), b"line1\nline2\n");
    let mut want = vec![0u8; 100];
    want.extend_from_slice(&[b'x'; 6000]);
    want[50..6050].fill(b'y');
    assert_eq!(fs::read(&h).unwrap(), want);
    unmount(m);
    s.fsck();
}

/// The mount shows in /proc/mounts with the type `fuse.manyfs`, as
/// docs/mount.md says (the subtype went to fusermount only, and a mount
/// made directly by the daemon showed `fuse`).
#[test]
fn proc_mounts_names_the_file_system_type() {
    if !fuse_available("proc_mounts_names_the_file_system_type") {
        return;
    }
    let s = Scratch::new();
    let m = s.mount(&[]);
    let mounts = fs::read_to_string("/proc/mounts").unwrap();
    let mnt = s.mnt.canonicalize().unwrap();
    let line = mounts
        .lines()
        .find(|l| l.split(' ').nth(1) == Some(mnt.to_str().unwrap()))
        .unwrap_or_else(|| panic!("{} not in /proc/mounts", mnt.display()));
    assert_eq!(line.split(' ').nth(2), Some("fuse.manyfs"), "{line}");
    unmount(m);
}
