//! `manyfs run`: unmodified programs (coreutils, tar, sqlite3, fio) on a
//! pool mounted inside their own process through the preload library.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The preload library `cargo test` built for these tests (manyfs-preload
/// is a dev-dependency, so it lands in the `deps/` beside the test
/// binaries, with their profile). Named explicitly: a `libmanyfs_preload.so`
/// beside the `manyfs` binary may be an older build of another profile.
fn preload() -> PathBuf {
    let exe = Path::new(env!("CARGO_BIN_EXE_manyfs"));
    let lib = exe.parent().unwrap().join("deps/libmanyfs_preload.so");
    assert!(lib.is_file(), "{} is missing", lib.display());
    lib
}

struct Run {
    _dir: tempfile::TempDir,
    root: PathBuf,
    pool: PathBuf,
    at: PathBuf,
}

impl Run {
    fn new() -> Run {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        Run {
            pool: root.join("p.pool"),
            at: root.join("mnt"),
            root,
            _dir: dir,
        }
    }

    fn cmd(&self, program: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_manyfs"));
        c.env("MANYFS_PRELOAD", preload())
            .arg("run")
            .arg("--pool")
            .arg(&self.pool)
            .arg("--at")
            .arg(&self.at)
            .args(["--size", "256M", "--"])
            .args(program);
        c
    }

    /// Run `program` (a shell line when it is one string with spaces) and
    /// insist it succeeds.
    fn ok(&self, line: &str) -> String {
        let out = self.cmd(&["sh", "-c", line]).output().unwrap();
        check(line, &out);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn at(&self, rel: &str) -> String {
        self.at.join(rel).display().to_string()
    }

    /// bash running `script` in the run, from the test's own kernel
    /// directory (a file written by mistake to the kernel's working
    /// directory lands there, not in the source tree): its stdout and
    /// stderr, whatever its status.
    fn bash_from_root(&self, script: &str) -> (String, String) {
        let out = self
            .cmd(&["bash", "-c", script])
            .current_dir(&self.root)
            .output()
            .unwrap();
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn kernel(&self, rel: &str) -> String {
        self.root.join(rel).display().to_string()
    }
}

fn check(what: &str, out: &Output) {
    assert!(
        out.status.success(),
        "{what}: {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn coreutils_and_tar_copy_trees_in_and_out() {
    let r = Run::new();
    let src = env!("CARGO_MANIFEST_DIR");
    r.ok(&format!("cp -r {src}/src {}", r.at("tree")));
    let listing = r.ok(&format!("ls -l {}", r.at("tree")));
    assert!(listing.contains("main.rs"), "{listing}");
    // Named one by one: a shell glob under the directory would mount the
    // pool in the shell, and its children could not (docs/run.md).
    let names: Vec<String> = std::fs::read_dir(format!("{src}/src"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    let sums = |dir: &str| {
        let mut c = r.cmd(&["sha256sum"]);
        c.args(names.iter().map(|n| format!("{dir}/{n}")));
        let out = c.output().unwrap();
        check("sha256sum", &out);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.split_whitespace().next().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(sums(&format!("{src}/src")), sums(&r.at("tree")));
    assert_eq!(
        r.ok(&format!("cat {}", r.at("tree/main.rs"))),
        std::fs::read_to_string(format!("{src}/src/main.rs")).unwrap()
    );
    r.ok(&format!(
        "tar cf {} -C {} tree",
        r.kernel("t.tar"),
        r.at("")
    ));
    r.ok(&format!("mkdir {}", r.at("x")));
    r.ok(&format!("tar xf {} -C {}", r.kernel("t.tar"), r.at("x")));
    r.ok(&format!("cp -r {} {}", r.at("x/tree"), r.kernel("out")));
    let diff = Command::new("diff")
        .args(["-r", &format!("{src}/src"), &r.kernel("out")])
        .output()
        .unwrap();
    check(
        "diff -r of the tree copied in, tarred, untarred and copied out",
        &diff,
    );
    // Nothing reached the kernel's tree under the directory.
    assert!(!r.at.exists());
    fsck_clean(&r);
}

#[test]
fn sqlite_wal_database_with_exclusive_locking_is_intact() {
    if !have("sqlite3") {
        panic!("sqlite3 is not installed: run scripts/install-deps.sh");
    }
    let r = Run::new();
    let db = r.at("db");
    let sql = "PRAGMA locking_mode=EXCLUSIVE; PRAGMA journal_mode=WAL; \
        CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT); \
        WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<5000) \
        INSERT INTO t(b) SELECT hex(randomblob(40)) FROM c;";
    check(
        "sqlite3 write",
        &r.cmd(&["sqlite3", &db, sql]).output().unwrap(),
    );
    let out = r
        .cmd(&[
            "sqlite3",
            &db,
            "PRAGMA locking_mode=EXCLUSIVE; PRAGMA integrity_check; SELECT count(*) FROM t;",
        ])
        .output()
        .unwrap();
    check("sqlite3 check", &out);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "exclusive\nok\n5000\n"
    );
}

/// SQLite's WAL in its default (shared) locking mode maps the `-shm`
/// file: served through a shared-memory copy (`shadow.rs`). Many
/// transactions (the WAL checkpoints into the database on the way), then a
/// second process checks the database.
#[test]
fn sqlite_wal_in_the_default_locking_mode_is_intact() {
    if !have("sqlite3") {
        panic!("sqlite3 is not installed: run scripts/install-deps.sh");
    }
    let r = Run::new();
    let mut sql = String::from("PRAGMA journal_mode=WAL; CREATE TABLE t(a, b);");
    for i in 0..300 {
        sql.push_str(&format!(
            "BEGIN; WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<20) \
             INSERT INTO t SELECT {i} * 20 + x, randomblob(200) FROM c; COMMIT;"
        ));
    }
    sql.push_str("SELECT count(*) FROM t;");
    assert_eq!(quiet_ok(&r, &["sqlite3", &r.at("db"), &sql]), "wal\n6000\n");
    let check = "PRAGMA journal_mode; PRAGMA integrity_check; SELECT count(*), sum(a) FROM t;";
    assert_eq!(
        quiet_ok(&r, &["sqlite3", &r.at("db"), check]),
        "wal\nok\n6000|18003000\n"
    );
    fsck_clean(&r);
}

/// `mmap` of a file under the directory: shared mappings see each other
/// and writes through descriptors; their stores reach the file on
/// `msync`, before a read and at `munmap`; a private mapping keeps its
/// stores to itself.
#[test]
fn mappings_of_a_file_in_the_pool_are_coherent() {
    let r = Run::new();
    let exe = checking_c_program(
        &r,
        "maps",
        r#"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int fd = open(argv[1], O_CREAT | O_RDWR, 0644);
    if (fd < 0) { perror("open"); return 1; }
    char page[8192];
    memset(page, 'a', sizeof page);
    expect("write", pwrite(fd, page, sizeof page, 0) == sizeof page);
    char *m = mmap(0, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    expect("map", m != MAP_FAILED);
    if (m == MAP_FAILED) return 1;
    char *m2 = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 4096);
    expect("map at 4096", m2 != MAP_FAILED);
    expect("the file's bytes", m[0] == 'a' && m[8191] == 'a');
    m[4096] = 'b';
    expect("a store shows in the other mapping", m2[0] == 'b');
    expect("pwrite", pwrite(fd, "c", 1, 100) == 1);
    expect("a write shows in the mapping", m[100] == 'c');
    m[200] = 'd';
    char got = 0;
    expect("pread", pread(fd, &got, 1, 200) == 1);
    expect("a read sees the mapping's store", got == 'd');
    m[300] = 'e';
    expect("msync", msync(m, 8192, MS_SYNC) == 0);
    char *p = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    expect("private map", p != MAP_FAILED);
    p[400] = 'p';
    expect("a private store stays private", m[400] == 'a');
    expect("munmap private", munmap(p, 4096) == 0);
    m[500] = 'f';
    expect("munmap", munmap(m, 8192) == 0 && munmap(m2, 4096) == 0);
    close(fd);
    fd = open(argv[1], O_RDONLY);
    char back[8192];
    expect("read back", pread(fd, back, sizeof back, 0) == sizeof back);
    expect("every store is in the file",
           back[100] == 'c' && back[200] == 'd' && back[300] == 'e' && back[500] == 'f'
               && back[4096] == 'b' && back[400] == 'a' && back[0] == 'a');
    int ro = open(argv[1], O_RDONLY);
    expect("a read-only descriptor cannot map shared for writing",
           mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, ro, 0) == MAP_FAILED
               && errno == EACCES);
    if (!fails) printf("ok\n");
    return fails != 0;
}
"#,
    );
    assert_eq!(quiet_ok(&r, &[&exe, &r.at("f")]), "ok\n");
    // A second process reads what the first wrote through its mappings.
    let bytes = quiet_ok(
        &r,
        &[
            "sh",
            "-c",
            &format!("head -c 600 {} | tail -c 500", r.at("f")),
        ],
    );
    assert_eq!(&bytes.as_bytes()[0], &b'c');
    fsck_clean(&r);
}

#[test]
fn fio_threads_share_one_file() {
    if !have("fio") {
        panic!("fio is not installed: run scripts/install-deps.sh");
    }
    let r = Run::new();
    let dir = r.at("");
    for rw in ["randwrite", "randread"] {
        let out = r
            .cmd(&[
                "fio",
                "--name=t",
                "--directory",
                &dir,
                "--filename=shared",
                "--size=16M",
                "--bs=4k",
                &format!("--rw={rw}"),
                "--ioengine=psync",
                "--thread",
                "--numjobs=2",
                "--time_based",
                "--runtime=1",
                "--group_reporting",
                "--verify=0",
            ])
            .output()
            .unwrap();
        check(&format!("fio {rw}"), &out);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("IOPS="), "{text}");
    }
}

#[test]
fn a_program_killed_mid_write_leaves_a_pool_that_mounts_clean_with_its_synced_data() {
    let r = Run::new();
    let src = r.kernel("src");
    std::fs::write(
        &src,
        (0..1_000_000u32)
            .flat_map(|i| i.to_le_bytes())
            .collect::<Vec<u8>>(),
    )
    .unwrap();
    let marker = r.kernel("synced");
    // The synced copy, then writes forever (fio over one file), killed.
    let line = format!(
        "dd if={src} of={} bs=64k conv=fsync status=none && touch {marker} && \
         exec fio --name=k --filename={} --size=32M --bs=4k --rw=randwrite \
         --ioengine=psync --thread --time_based --runtime=60",
        r.at("a"),
        r.at("b")
    );
    let mut child = r
        .cmd(&["sh", "-c", &line])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !Path::new(&marker).exists() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the synced copy never finished"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the writer exited early"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    child.kill().unwrap();
    child.wait().unwrap();
    let fsck = Command::new(env!("CARGO_BIN_EXE_manyfs"))
        .arg("fsck")
        .arg(&r.pool)
        .output()
        .unwrap();
    check("fsck after SIGKILL", &fsck);
    r.ok(&format!("cmp {src} {}", r.at("a")));
}

#[test]
fn a_second_run_of_a_busy_pool_is_refused_naming_the_owner() {
    let r = Run::new();
    // The owner: a program that keeps the pool mounted (fio writing).
    let owner = format!(
        "exec fio --name=h --filename={} --size=4M --bs=4k --rw=randwrite --ioengine=psync --thread --time_based --runtime=30",
        r.at("f")
    );
    let mut child = r
        .cmd(&["sh", "-c", &owner])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until fio holds the pool's lock (/proc/locks: `1: FLOCK
    // ADVISORY WRITE <pid> ...`) without mounting it: checks of our own,
    // one after another, could keep fio's first mount from ever getting
    // the pool. The pid is manyfs run's until it execs (sh, then fio), and
    // manyfs run holds the lock for a moment too: only a lock seen after
    // the pid became fio is fio's.
    let pid = child.id().to_string();
    let fio_holds_the_pool = || {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        comm.trim() == "fio"
            && std::fs::read_to_string("/proc/locks")
                .unwrap()
                .lines()
                .any(|l| {
                    let f: Vec<&str> = l.split_whitespace().collect();
                    f.get(1) == Some(&"FLOCK") && f.get(4) == Some(&pid.as_str())
                })
    };
    let start = Instant::now();
    while !fio_holds_the_pool() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "fio never mounted the pool"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = r.cmd(&["true"]).output().unwrap();
    let refused = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "a second run was let in: {refused}");
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        refused.contains(&format!("in use by process {}", child.id())),
        "{refused}"
    );
}

/// Compile the C program `src` with gcc into the run's kernel directory
/// (`-Wall -Werror`); returns the executable's path.
fn c_program(r: &Run, name: &str, src: &str) -> String {
    c_program_with(r, name, src, &[])
}

/// A C program that spawns `argv[1]` with `argv[1..]` through `spawn`
/// (`posix_spawn` or `posix_spawnp`), waits for it and prints
/// `status N` (or `spawn error N`).
fn spawner_program(r: &Run, spawn: &str) -> String {
    let src = r#"
#include <spawn.h>
#include <stdio.h>
#include <sys/wait.h>
extern char **environ;
int main(int argc, char **argv) {
    pid_t pid;
    int err = SPAWN(&pid, argv[1], NULL, NULL, argv + 1, environ);
    if (err) { printf("spawn error %d\n", err); return 1; }
    int status;
    waitpid(pid, &status, 0);
    printf("status %d\n", WEXITSTATUS(status));
    return 0;
}
"#;
    c_program(r, &format!("{spawn}-spawner"), &src.replace("SPAWN", spawn))
}

/// [`c_program`] of a C source that checks with `expect(what, ok)`: a
/// failed check prints `FAIL what (errno N)` and counts in `fails`, which
/// the source's `main` returns. The harness (with `_GNU_SOURCE`,
/// `<errno.h>` and `<stdio.h>`) comes before the source.
fn checking_c_program(r: &Run, name: &str, src: &str) -> String {
    const HARNESS: &str = r#"#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
static int fails;
static void expect(const char *what, int ok) {
    if (!ok) { printf("FAIL %s (errno %d)\n", what, errno); fails++; }
}
"#;
    c_program(r, name, &format!("{HARNESS}{src}"))
}

/// [`c_program`] with more gcc options.
fn c_program_with(r: &Run, name: &str, src: &str, opts: &[&str]) -> String {
    if !have("gcc") {
        panic!("gcc is not installed: run scripts/install-deps.sh");
    }
    let c = r.kernel(&format!("{name}.c"));
    let exe = r.kernel(name);
    std::fs::write(&c, src).unwrap();
    let out = Command::new("gcc")
        .args(["-O1", "-Wall", "-Werror"])
        .args(opts)
        .args(["-o", &exe, &c])
        .output()
        .unwrap();
    check(&format!("gcc {name}.c"), &out);
    exe
}

/// Run `program` under `manyfs run`, insist it succeeds and that the
/// library complained of nothing (no `manyfs run:` line on stderr);
/// returns its stdout.
fn quiet_ok(r: &Run, program: &[&str]) -> String {
    let out = r.cmd(program).output().unwrap();
    check(&program.join(" "), &out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !err.contains("manyfs run:"),
        "{}: the library complained:\n{err}",
        program.join(" ")
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn fsck_clean(r: &Run) {
    let fsck = Command::new(env!("CARGO_BIN_EXE_manyfs"))
        .arg("fsck")
        .arg(&r.pool)
        .output()
        .unwrap();
    check("fsck", &fsck);
}

/// `flock` and `lockf` on a file of the pool (cargo `flock`s its lock
/// files; glibc's `lockf` calls `fcntl` inside libc): locks succeed
/// without locking anything, as `fcntl`'s record locks (one process owns
/// the pool); bad arguments are refused as Linux and glibc refuse them.
#[test]
fn flock_and_lockf_on_the_pools_files_succeed() {
    let r = Run::new();
    let exe = checking_c_program(
        &r,
        "locks",
        r#"
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int fd = open(argv[1], O_CREAT | O_RDWR, 0644);
    int ro = open(argv[1], O_RDONLY);
    if (fd < 0 || ro < 0) { perror("open"); return 1; }
    expect("flock exclusive", flock(fd, LOCK_EX) == 0);
    expect("flock shared, not blocking", flock(ro, LOCK_SH | LOCK_NB) == 0);
    expect("flock unlock", flock(fd, LOCK_UN) == 0);
    expect("flock of nothing is EINVAL", flock(fd, LOCK_NB) == -1 && errno == EINVAL);
    expect("flock of both is EINVAL", flock(fd, LOCK_SH | LOCK_EX) == -1 && errno == EINVAL);
    expect("lockf lock", lockf(fd, F_LOCK, 0) == 0);
    expect("lockf try", lockf(fd, F_TLOCK, 100) == 0);
    expect("lockf test", lockf(ro, F_TEST, 0) == 0);
    expect("lockf unlock", lockf(fd, F_ULOCK, 0) == 0);
    expect("lockf lock read-only is EBADF", lockf(ro, F_LOCK, 0) == -1 && errno == EBADF);
    expect("lockf bad command is EINVAL", lockf(fd, 42, 0) == -1 && errno == EINVAL);
    expect("flock of a closed descriptor is EBADF", flock(999, LOCK_EX) == -1 && errno == EBADF);
    if (!fails) printf("ok\n");
    return fails != 0;
}
"#,
    );
    assert_eq!(quiet_ok(&r, &[&exe, &r.at("lockfile")]), "ok\n");
    fsck_clean(&r);
}

/// A program whose allocator reads a file while it starts, holding its
/// own lock (jemalloc, in `rustc`, `readlink`s `/etc/malloc.conf` under
/// its init lock): the library's first call then must not allocate, or
/// the program waits for itself forever. Checked with such an allocator
/// in C, and with `rustc` itself.
#[test]
fn an_allocator_that_reads_a_file_while_it_starts_runs() {
    let r = Run::new();
    let exe = c_program(
        &r,
        "bump",
        r#"
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static int started;
static char arena[64 << 20] __attribute__((aligned(4096)));
static size_t used;
static void *take(size_t align, size_t n) {
    pthread_mutex_lock(&init_lock);
    if (!started) {
        char conf[64];
        /* As jemalloc's malloc_init_hard: a file read under the lock. */
        if (readlink("/etc/malloc.conf", conf, sizeof conf) < 0) {}
        started = 1;
    }
    size_t at = (used + align - 1) & ~(align - 1);
    void *p = at + n <= sizeof arena ? arena + at : NULL;
    if (p) used = at + n;
    pthread_mutex_unlock(&init_lock);
    return p;
}
void *malloc(size_t n) { return take(16, n); }
void free(void *p) { (void)p; }
void *calloc(size_t a, size_t b) { void *p = take(16, a * b); if (p) memset(p, 0, a * b); return p; }
void *realloc(void *old, size_t n) {
    void *p = take(16, n);
    if (p && old) {
        size_t room = (size_t)(arena + sizeof arena - (char *)old);
        memcpy(p, old, n < room ? n : room);
    }
    return p;
}
int posix_memalign(void **out, size_t align, size_t n) { *out = take(align, n); return *out ? 0 : 12; }
void *aligned_alloc(size_t align, size_t n) { return take(align, n); }
void *memalign(size_t align, size_t n) { return take(align, n); }
int main(int argc, char **argv) {
    FILE *f = fopen(argv[1], "w");
    if (!f || fputs("written\n", f) < 0 || fclose(f)) { perror("fopen"); return 1; }
    puts("started");
    return 0;
}
"#,
    );
    let f = r.at("f");
    // `timeout`: a program waiting for itself fails here instead of hanging.
    let script = format!("timeout 60 {exe} {f} && cat {f} && timeout 60 rustc -vV | head -c 5");
    assert_eq!(
        quiet_ok(&r, &["sh", "-c", &script]),
        "started\nwritten\nrustc"
    );
    fsck_clean(&r);
}

/// `fcntl`'s write-life hints (`F_SET_RW_HINT`, which RocksDB sets on its
/// files, and `F_SET_FILE_RW_HINT`): stored, read back, range-checked.
#[test]
fn write_life_hints_are_kept_and_checked() {
    let r = Run::new();
    let exe = checking_c_program(
        &r,
        "hints",
        r#"
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>
#define GET_RW 1035
#define SET_RW 1036
#define GET_FILE_RW 1037
#define SET_FILE_RW 1038
static uint64_t get(int fd, int cmd) {
    uint64_t h = 99;
    expect("get", fcntl(fd, cmd, &h) == 0);
    return h;
}
int main(int argc, char **argv) {
    int fd = open(argv[1], O_CREAT | O_RDWR, 0644);
    if (fd < 0) { perror("open"); return 1; }
    expect("unset at first", get(fd, GET_RW) == 0);
    uint64_t h = 2; /* RWH_WRITE_LIFE_SHORT */
    expect("set short", fcntl(fd, SET_RW, &h) == 0);
    expect("get short", get(fd, GET_RW) == 2);
    h = 6;
    expect("set 6 is EINVAL", fcntl(fd, SET_RW, &h) == -1 && errno == EINVAL);
    expect("still short", get(fd, GET_RW) == 2);
    expect("file hint falls back", get(fd, GET_FILE_RW) == 2);
    h = 5; /* RWH_WRITE_LIFE_EXTREME */
    expect("set file extreme", fcntl(fd, SET_FILE_RW, &h) == 0);
    expect("get file extreme", get(fd, GET_FILE_RW) == 5);
    expect("inode hint unchanged", get(fd, GET_RW) == 2);
    int fd2 = dup(fd);
    expect("a dup shares it", get(fd2, GET_RW) == 2);
    expect("null is EFAULT", fcntl(fd, SET_RW, (uint64_t *)0) == -1 && errno == EFAULT);
    if (!fails) printf("ok\n");
    return fails != 0;
}
"#,
    );
    assert_eq!(quiet_ok(&r, &[&exe, &r.at("f")]), "ok\n");
}

/// db_bench's report line of benchmark `bench` in its output
/// (`readrandom   :  1.7 micros/op 588010 ops/sec ... (12579 of 20000 found)`).
fn bench_line<'a>(out: &'a str, bench: &str) -> &'a str {
    out.lines()
        .find(|l| l.split_whitespace().next() == Some(bench) && l.contains("ops/sec"))
        .unwrap_or_else(|| panic!("no {bench} report in:\n{out}"))
}

/// RocksDB's db_bench (Debian's rocksdb-tools) with its database under the
/// directory: random fills and reads, then a second run reopening the
/// database and reading every key in order; the pool checks clean.
#[test]
fn rocksdb_db_bench_writes_reads_and_reopens_its_database() {
    if !have("db_bench") {
        panic!("db_bench is not installed: run scripts/install-deps.sh (rocksdb-tools)");
    }
    let r = Run::new();
    let db = format!("--db={}", r.at("db"));
    let num = 20_000;
    let args = |benchmarks: &str, existing: bool| {
        vec![
            "db_bench".to_string(),
            db.clone(),
            format!("--benchmarks={benchmarks}"),
            format!("--num={num}"),
            "--value_size=100".into(),
            "--threads=1".into(),
            format!("--use_existing_db={}", u8::from(existing)),
        ]
    };
    let run = |a: Vec<String>| quiet_ok(&r, &a.iter().map(String::as_str).collect::<Vec<_>>());
    let out = run(args("fillrandom,readrandom", false));
    bench_line(&out, "fillrandom");
    // `(N of M found)`: fillrandom draws its keys at random, so about
    // 1 - 1/e of them are distinct and found.
    let read = bench_line(&out, "readrandom");
    let found: u64 = read
        .rsplit_once('(')
        .and_then(|(_, f)| f.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no `(N of M found)` in {read}"));
    assert!(found > 0, "{read}");
    let out = run(args("readseq", true));
    let seq = bench_line(&out, "readseq");
    // `... seconds N operations;`: the keys the reopened database holds.
    let keys: u64 = seq
        .split_whitespace()
        .collect::<Vec<_>>()
        .windows(2)
        .find(|w| w[1].starts_with("operations"))
        .and_then(|w| w[0].parse().ok())
        .unwrap_or_else(|| panic!("no operation count in {seq}"));
    assert!(keys >= num / 2 && keys <= num, "{seq}");
    assert!(!r.at.exists());
    fsck_clean(&r);
}

/// `realpath`, its fortified `__realpath_chk` (a `PATH_MAX` buffer under
/// `_FORTIFY_SOURCE`) and `canonicalize_file_name`, which glibc answers
/// with internal `lstat`/`readlink` calls: relative and absolute symlinks
/// in the pool, symlinks that lead out of it, `.`/`..`, a virtual working
/// directory, the errors.
#[test]
fn realpath_resolves_symlinks_in_the_pool() {
    let r = Run::new();
    let exe = c_program_with(
        &r,
        "realpath",
        r#"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
static const char *dir;
static int fails;
static const char *at(const char *rel) {
    static char bufs[4][PATH_MAX];
    static int n;
    char *b = bufs[n++ % 4];
    snprintf(b, PATH_MAX, "%s%s", dir, rel);
    return b;
}
static void expect(const char *in, const char *want) {
    char buf[PATH_MAX];
    char *got = realpath(in, buf);
    if (!got || strcmp(got, want)) {
        printf("FAIL realpath(%s) = %s (errno %d), want %s\n", in, got ? got : "NULL", errno, want);
        fails++;
    }
}
static void expect_err(const char *in, int err) {
    char buf[PATH_MAX];
    errno = 0;
    char *got = realpath(in, buf);
    if (got || errno != err) {
        printf("FAIL realpath(%s) = %s (errno %d), want errno %d\n", in, got ? got : "NULL", errno, err);
        fails++;
    }
}
int main(int argc, char **argv) {
    dir = argv[1];
    if (mkdir(at("/a"), 0755) || mkdir(at("/a/b"), 0755)) { perror("mkdir"); return 1; }
    int fd = creat(at("/a/b/f"), 0644);
    if (fd < 0) { perror("creat"); return 1; }
    close(fd);
    if (symlink("a/b", at("/l")) || symlink(at("/a"), at("/abs")) || symlink("loop", at("/loop"))
        || symlink("nowhere", at("/dangling")) || symlink("../..", at("/a/b/up"))
        || symlink("/", at("/slash")) || symlink("../../..", at("/a/b/over"))) {
        perror("symlink");
        return 1;
    }
    expect(at(""), dir);
    expect(at("/"), dir);
    expect(at("/l/f"), at("/a/b/f"));
    expect(at("/./a//b/"), at("/a/b"));
    expect(at("/abs/b/../b/f"), at("/a/b/f"));
    expect(at("/l/up/l"), at("/a/b"));
    expect(at("/a/b/up/../../.."), dir);
    // Out of the pool, as on a mount: an absolute target outside the
    // directory, and `..` above its root.
    expect(at("/slash/tmp"), "/tmp");
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s", dir);
    *strrchr(parent, '/') = 0;
    expect(at("/a/b/over"), parent);
    expect_err(at("/loop"), ELOOP);
    expect_err(at("/dangling"), ENOENT);
    expect_err(at("/nope"), ENOENT);
    expect_err(at("/a/b/f/"), ENOTDIR);
    expect_err(at("/l/f/x"), ENOTDIR);
    expect("/", "/");
    if (chdir(at("/a"))) { perror("chdir"); return 1; }
    expect(".", at("/a"));
    expect("../l/f", at("/a/b/f"));
    expect("b/up/abs", at("/a"));
    char *c = canonicalize_file_name(at("/l"));
    if (!c || strcmp(c, at("/a/b"))) { printf("FAIL canonicalize_file_name = %s\n", c); fails++; }
    free(c);
    c = realpath("b/f", NULL);
    if (!c || strcmp(c, at("/a/b/f"))) { printf("FAIL realpath(NULL) = %s\n", c); fails++; }
    free(c);
    if (!fails) printf("ok\n");
    return fails != 0;
}
"#,
        &["-O2", "-D_FORTIFY_SOURCE=2"],
    );
    let nm = Command::new("nm").args(["-D", &exe]).output().unwrap();
    let syms = String::from_utf8_lossy(&nm.stdout);
    assert!(syms.contains("__realpath_chk"), "not fortified:\n{syms}");
    let dir = r.at.display().to_string();
    assert_eq!(quiet_ok(&r, &[&exe, &dir]), "ok\n");
    fsck_clean(&r);
}

/// GNU make's `$(realpath ...)` (glibc's fortified `realpath`) on names
/// under the directory: symlinks followed, a missing name left out.
#[test]
fn make_realpath_function_follows_symlinks_in_the_pool() {
    if !have("make") {
        panic!("make is not installed: run scripts/install-deps.sh");
    }
    let r = Run::new();
    r.ok(&format!("mkdir -p {}", r.at("a/b")));
    r.ok(&format!("ln -s a/b {}", r.at("l")));
    r.ok(&format!("touch {}", r.at("a/b/f")));
    let mk = r.kernel("Makefile");
    std::fs::write(
        &mk,
        format!(
            "$(info $(realpath {} {} {}))\nall: ;\n",
            r.at("l/f"),
            r.at("l/../l"),
            r.at("nope")
        ),
    )
    .unwrap();
    assert_eq!(
        quiet_ok(&r, &["make", "-s", "-f", &mk]),
        format!("{} {}\n", r.at("a/b/f"), r.at("a/b"))
    );
}

/// run-parts (debianutils) lists a directory with `scandir` and
/// `alphasort`, then keeps valid names (and, with `--test`, executables).
#[test]
fn run_parts_lists_a_directory_in_the_pool() {
    let r = Run::new();
    let k = r.kernel("parts");
    std::fs::create_dir(&k).unwrap();
    for (name, mode) in [
        ("20-b", 0o755),
        ("10-a", 0o755),
        ("15-x", 0o644),
        ("bad.name", 0o755),
    ] {
        let f = format!("{k}/{name}");
        std::fs::write(&f, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    std::fs::create_dir(format!("{k}/sub")).unwrap();
    r.ok(&format!("cp -r {k} {}", r.at("parts")));
    let p = r.at("parts");
    assert_eq!(
        quiet_ok(&r, &["run-parts", "--test", &p]),
        format!("{p}/10-a\n{p}/20-b\n")
    );
    assert_eq!(
        quiet_ok(&r, &["run-parts", "--list", "--reverse", &p]),
        format!("{p}/20-b\n{p}/15-x\n{p}/10-a\n")
    );
}

/// `scandir`, `scandir64` and `scandirat` (from a directory descriptor of
/// the pool) with a filter and with `alphasort` and a comparison of the
/// program's own; a kernel directory still goes to libc.
#[test]
fn scandir_filters_and_sorts_entries_in_the_pool() {
    let r = Run::new();
    let exe = c_program(
        &r,
        "scandir",
        r#"
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
static int no_dots(const struct dirent *e) { return e->d_name[0] != '.'; }
static int files_only(const struct dirent64 *e) { return e->d_type == DT_REG; }
static int reverse(const struct dirent **a, const struct dirent **b) {
    return -strcmp((*a)->d_name, (*b)->d_name);
}
static void show(const char *what, struct dirent **l, int n) {
    printf("%s:", what);
    for (int i = 0; i < n; i++) { printf(" %s", l[i]->d_name); free(l[i]); }
    printf("\n");
    free(l);
}
int main(int argc, char **argv) {
    char p[4096];
    const char *names[] = {"b", "c", "a"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", argv[1], names[i]);
        int fd = creat(p, 0644);
        if (fd < 0) { perror(p); return 1; }
        close(fd);
    }
    snprintf(p, sizeof p, "%s/d", argv[1]);
    if (mkdir(p, 0755)) { perror(p); return 1; }
    struct dirent **l;
    int n = scandir(argv[1], &l, NULL, alphasort);
    if (n < 0) { perror("scandir"); return 1; }
    show("all", l, n);
    n = scandir(argv[1], &l, no_dots, reverse);
    if (n < 0) { perror("scandir"); return 1; }
    show("reverse", l, n);
    struct dirent64 **l64;
    n = scandir64(argv[1], &l64, files_only, alphasort64);
    if (n < 0) { perror("scandir64"); return 1; }
    show("files", (struct dirent **)l64, n);
    int dfd = open(argv[1], O_RDONLY | O_DIRECTORY);
    if (dfd < 0) { perror("open"); return 1; }
    n = scandirat(dfd, "d", &l, no_dots, alphasort);
    if (n < 0) { perror("scandirat"); return 1; }
    show("empty", l, n);
    n = scandirat(dfd, "nope", &l, NULL, NULL);
    printf("missing: %d %s\n", n, n < 0 ? strerror(errno) : "");
    n = scandir("/", &l, no_dots, NULL);
    printf("kernel: %s\n", n > 0 ? "some" : "none");
    for (int i = 0; i < n; i++) free(l[i]);
    if (n > 0) free(l);
    return 0;
}
"#,
    );
    let dir = r.at.display().to_string();
    assert_eq!(
        quiet_ok(&r, &[&exe, &dir]),
        "all: . .. a b c d\nreverse: d c b a\nfiles: a b c\nempty:\n\
         missing: -1 No such file or directory\nkernel: some\n"
    );
}

/// hardlink (util-linux) walks a tree with `nftw` and links identical
/// files: two equal files in the pool become one inode.
#[test]
fn hardlink_walks_the_pool_with_nftw_and_links_equal_files() {
    let r = Run::new();
    let k = r.kernel("t");
    std::fs::create_dir_all(format!("{k}/sub")).unwrap();
    std::fs::write(format!("{k}/a"), "same\n").unwrap();
    std::fs::write(format!("{k}/sub/b"), "same\n").unwrap();
    std::fs::write(format!("{k}/c"), "other\n").unwrap();
    r.ok(&format!("cp -r {k} {}", r.at("t")));
    let out = quiet_ok(&r, &["hardlink", &r.at("t")]);
    assert!(out.contains("Linked:") && out.contains("1 files"), "{out}");
    let links = quiet_ok(
        &r,
        &[
            "stat",
            "-c",
            "%h %i",
            &r.at("t/a"),
            &r.at("t/sub/b"),
            &r.at("t/c"),
        ],
    );
    let l: Vec<&str> = links.lines().collect();
    assert_eq!(l.len(), 3, "{links}");
    assert!(l[0].starts_with("2 ") && l[0] == l[1], "{links}");
    assert!(l[2].starts_with("1 "), "{links}");
    fsck_clean(&r);
}

/// Check one walk's events (`FLAG LEVEL PATH NAME` lines, in the order
/// the callback saw them) against the expected set: a directory comes
/// before what it holds, or after it with `post_order` (`FTW_DEPTH`).
fn check_walk(what: &str, got: &[&str], want: &[&str], post_order: bool) {
    let mut g: Vec<&str> = got.to_vec();
    let mut w: Vec<&str> = want.to_vec();
    g.sort_unstable();
    w.sort_unstable();
    assert_eq!(g, w, "{what}: {got:#?}");
    let path = |l: &str| l.split(' ').nth(2).unwrap().to_string();
    for (i, l) in got.iter().enumerate() {
        let p = path(l);
        let Some((parent, _)) = p.rsplit_once('/') else {
            continue;
        };
        let Some(j) = got.iter().position(|x| path(x) == parent) else {
            continue;
        };
        assert!(
            if post_order { j > i } else { j < i },
            "{what}: {parent} and {p} out of order: {got:#?}"
        );
    }
}

/// `nftw` (`FTW_PHYS`, following symlinks, `FTW_DEPTH`, `FTW_MOUNT`,
/// `FTW_CHDIR`, `FTW_ACTIONRETVAL`, a callback that stops the walk) and
/// `ftw` on a tree in the pool with symlinks, one of them dangling and
/// one leading back up.
#[test]
fn nftw_and_ftw_walk_a_tree_in_the_pool() {
    let r = Run::new();
    let exe = c_program(
        &r,
        "walk",
        r#"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
static const char *names[] = {"F", "D", "DNR", "NS", "SL", "DP", "SLN"};
static const char *prefix = "";
static char start_cwd[PATH_MAX];
static int chdir_fails, stop_at_d, skip_d;
static const char *rel(const char *p) {
    size_t n = strlen(prefix);
    return strncmp(p, prefix, n) ? p : p + n;
}
static int cb(const char *p, const struct stat *st, int flag, struct FTW *f) {
    printf("%s %d %s %s\n", names[flag], f->level, rel(p), p + f->base);
    if (stop_at_d && !strcmp(p + f->base, "d")) return 7;
    if (skip_d && !strcmp(p + f->base, "d")) return FTW_SKIP_SUBTREE;
    return 0;
}
static int cb_chdir(const char *p, const struct stat *st, int flag, struct FTW *f) {
    /* The working directory holds the entry: its name alone reaches it. */
    struct stat s;
    char cwd[PATH_MAX], want[2 * PATH_MAX];
    if (lstat(p + f->base, &s) || s.st_ino != st->st_ino) chdir_fails++;
    size_t n = strlen(start_cwd);
    memcpy(want, start_cwd, n + 1);
    if (f->base) {
        want[n] = '/';
        memcpy(want + n + 1, p, f->base - 1);
        want[n + f->base] = 0;
    }
    if (!getcwd(cwd, sizeof cwd) || strcmp(cwd, want)) {
        printf("cwd %s for %s, want %s\n", cwd, p, want);
        chdir_fails++;
    }
    return cb(p, st, flag, f);
}
static int cb_old(const char *p, const struct stat *st, int flag) {
    printf("%s - %s -\n", names[flag], p);
    return 0;
}
static void mk(const char *p, int dir) {
    int r = dir ? mkdir(p, 0755) : close(creat(p, 0644));
    if (r) { perror(p); exit(1); }
}
static void ln(const char *t, const char *p) {
    if (symlink(t, p)) { perror(p); exit(1); }
}
int main(int argc, char **argv) {
    if (chdir(argv[1])) { perror("chdir"); return 1; }
    mk("t", 1); mk("t/a", 0); mk("t/d", 1); mk("t/d/x", 0);
    mk("e", 1); mk("e/y", 0);
    ln("../e", "t/l"); ln("nope", "t/dangling"); ln("..", "t/d/up");
    if (!getcwd(start_cwd, sizeof start_cwd)) return 1;
    printf("== phys\n");
    printf("= %d\n", nftw("t", cb, 4, FTW_PHYS));
    printf("== follow\n");
    printf("= %d\n", nftw("t", cb, 4, 0));
    printf("== depth\n");
    printf("= %d\n", nftw("t", cb, 1, FTW_PHYS | FTW_DEPTH));
    printf("== mount\n");
    printf("= %d\n", nftw64("t", (__nftw64_func_t)cb, 4, FTW_PHYS | FTW_MOUNT));
    printf("== absolute\n");
    char abs[PATH_MAX];
    snprintf(abs, sizeof abs, "%s/t/d//", argv[1]);
    prefix = argv[1];
    printf("= %d\n", nftw(abs, cb, 4, FTW_PHYS));
    prefix = "";
    printf("== chdir\n");
    printf("= %d\n", nftw("t", cb_chdir, 4, FTW_PHYS | FTW_CHDIR));
    char cwd[PATH_MAX];
    printf("== chdir back %s %d\n", getcwd(cwd, sizeof cwd) && !strcmp(cwd, start_cwd) ? "yes" : "no", chdir_fails);
    printf("== stop\n");
    stop_at_d = 1;
    printf("= %d\n", nftw("t/d", cb, 4, FTW_PHYS));
    stop_at_d = 0;
    printf("== skip\n");
    skip_d = 1;
    printf("= %d\n", nftw("t", cb, 4, FTW_PHYS | FTW_ACTIONRETVAL));
    skip_d = 0;
    printf("== ftw\n");
    printf("= %d\n", ftw("t", cb_old, 4));
    printf("== file\n");
    printf("= %d\n", nftw("t/a", cb, 4, 0));
    printf("== errors\n");
    errno = 0;
    int r = nftw("t/nope", cb, 4, 0);
    printf("= %d %d\n", r, errno == ENOENT);
    errno = 0;
    r = nftw("t", cb, 4, 1 << 10);
    printf("= %d %d\n", r, errno == EINVAL);
    return 0;
}
"#,
    );
    let dir = r.at.display().to_string();
    let out = quiet_ok(&r, &[&exe, &dir]);
    let parse = |out: &str| {
        let mut blocks = std::collections::BTreeMap::new();
        let mut name = String::new();
        for l in out.lines() {
            if let Some(n) = l.strip_prefix("== ") {
                name = n.to_string();
                blocks.insert(name.clone(), Vec::new());
            } else {
                blocks.get_mut(&name).unwrap().push(l.to_string());
            }
        }
        blocks
    };
    let blocks = parse(&out);
    // glibc's own walk of the same tree in the kernel's: the same events.
    let kdir = r.kernel("k");
    std::fs::create_dir(&kdir).unwrap();
    let kout = Command::new(&exe).arg(&kdir).output().unwrap();
    check("the walk in the kernel's tree", &kout);
    let sorted = |b: &std::collections::BTreeMap<String, Vec<String>>| {
        b.iter()
            .map(|(k, v)| {
                let mut v = v.clone();
                v.sort_unstable();
                (k.clone(), v)
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        sorted(&blocks),
        sorted(&parse(&String::from_utf8_lossy(&kout.stdout))),
        "the pool's walk and glibc's differ"
    );
    let blocks: std::collections::BTreeMap<String, Vec<&str>> = blocks
        .iter()
        .map(|(k, v)| (k.clone(), v.iter().map(String::as_str).collect()))
        .collect();
    let block = |n: &str| -> Vec<&str> {
        let b = &blocks[n];
        assert_eq!(b.last(), Some(&"= 0"), "{n}: {b:#?}");
        b[..b.len() - 1].to_vec()
    };
    let phys = [
        "D 0 t t",
        "F 1 t/a a",
        "D 1 t/d d",
        "F 2 t/d/x x",
        "SL 2 t/d/up up",
        "SL 1 t/l l",
        "SL 1 t/dangling dangling",
    ];
    check_walk("phys", &block("phys"), &phys, false);
    check_walk("mount", &block("mount"), &phys, false);
    // Symlinks followed: `l` is `e`, `up` leads back to `t`
    // (seen: not entered again), `dangling` leads nowhere.
    check_walk(
        "follow",
        &block("follow"),
        &[
            "D 0 t t",
            "F 1 t/a a",
            "D 1 t/d d",
            "F 2 t/d/x x",
            "D 1 t/l l",
            "F 2 t/l/y y",
            "SLN 1 t/dangling dangling",
        ],
        false,
    );
    let depth: Vec<String> = phys.iter().map(|l| l.replace("D ", "DP ")).collect();
    let depth: Vec<&str> = depth.iter().map(String::as_str).collect();
    check_walk("depth", &block("depth"), &depth, true);
    check_walk("chdir", &block("chdir"), &phys, false);
    assert_eq!(blocks["chdir back yes 0"], Vec::<&str>::new());
    check_walk(
        "absolute",
        &block("absolute"),
        &["D 0 /t/d d", "F 1 /t/d/x x", "SL 1 /t/d/up up"],
        false,
    );
    assert_eq!(blocks["stop"], ["D 0 t/d d", "= 7"]);
    check_walk(
        "skip",
        &block("skip"),
        &[
            "D 0 t t",
            "F 1 t/a a",
            "D 1 t/d d",
            "SL 1 t/l l",
            "SL 1 t/dangling dangling",
        ],
        false,
    );
    // `ftw`'s callback: no symlink flags (followed; dangling: NS).
    let ftw: Vec<&str> = block("ftw");
    let mut ftw_sorted = ftw.clone();
    ftw_sorted.sort_unstable();
    assert_eq!(
        ftw_sorted,
        [
            "D - t -",
            "D - t/d -",
            "D - t/l -",
            "F - t/a -",
            "F - t/d/x -",
            "F - t/l/y -",
            "NS - t/dangling -"
        ],
        "{ftw:#?}"
    );
    assert_eq!(block("file"), ["F 0 t/a a"]);
    assert_eq!(blocks["errors"], ["= -1 1", "= -1 1"]);
    fsck_clean(&r);
}

/// Run the C program `exe` with a directory as its argument twice: on
/// the run's directory under `manyfs run`, and on a tmpfs directory
/// (`/dev/shm`) in the kernel without the library. Insists both succeed
/// and print the same; returns what they printed.
fn same_as_tmpfs(r: &Run, exe: &str) -> String {
    same_as_tmpfs_with(r, exe, &[])
}

/// [`same_as_tmpfs`] with more arguments after the directory.
fn same_as_tmpfs_with(r: &Run, exe: &str, more: &[&str]) -> String {
    let at = r.at.display().to_string();
    let ours = quiet_ok(r, &[&[exe, &at][..], more].concat());
    let shm = Path::new("/dev/shm");
    let tmp = if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap()
    } else {
        tempfile::tempdir().unwrap()
    };
    let out = Command::new(exe)
        .arg(tmp.path())
        .args(more)
        .output()
        .unwrap();
    check(&format!("{exe} on tmpfs"), &out);
    let theirs = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        ours, theirs,
        "{exe}: the pool (left) and tmpfs (right) differ"
    );
    ours
}

/// `utimes`, `lutimes`, `futimes`, `futimesat` (a path, and a null one on
/// a descriptor) and `utime`: the times `stat` then shows, null times as
/// now, the errors, as on tmpfs.
#[test]
fn utimes_family_sets_the_times_stat_shows() {
    let r = Run::new();
    let exe = c_program(
        &r,
        "utimes",
        r#"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <utime.h>
static void show(const char *what, int r, const char *path, int follow) {
    struct stat st;
    int e = errno;
    if (r) { printf("%s: %s\n", what, strerror(e)); return; }
    if ((follow ? stat : lstat)(path, &st)) { perror(path); return; }
    printf("%s: a %lld.%09ld m %lld.%09ld\n", what,
           (long long)st.st_atim.tv_sec, st.st_atim.tv_nsec,
           (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
}
static void now(const char *what, int r, const char *path, time_t t0) {
    struct stat st;
    if (r || stat(path, &st)) { printf("%s: %s\n", what, strerror(errno)); return; }
    time_t t1 = time(NULL);
    /* A second either side: the coarse clock of time() and the file
       system's finer one may stand on either side of a second's turn. */
    int ok = st.st_atime >= t0 - 1 && st.st_atime <= t1 + 1
          && st.st_mtime >= t0 - 1 && st.st_mtime <= t1 + 1;
    printf("%s: %s\n", what, ok ? "now" : "not now");
}
int main(int argc, char **argv) {
    char f[4096], l[4096], d[4096];
    snprintf(f, sizeof f, "%s/f", argv[1]);
    snprintf(l, sizeof l, "%s/l", argv[1]);
    snprintf(d, sizeof d, "%s/d", argv[1]);
    int fd = open(f, O_RDWR | O_CREAT, 0644);
    if (fd < 0 || symlink("f", l) || mkdir(d, 0755)) { perror("setup"); return 1; }
    struct timeval tv[2] = {{1000000000, 123456}, {1100000000, 654321}};
    show("utimes", utimes(f, tv), f, 1);
    tv[0].tv_sec += 7; tv[1].tv_usec = 1;
    show("utimes dir", utimes(d, tv), d, 1);
    tv[0].tv_sec = 1200000000; tv[1].tv_sec = 1300000000;
    show("lutimes link", lutimes(l, tv), l, 0);
    show("lutimes target untouched", 0, f, 1);
    tv[0].tv_usec = 999999; tv[1].tv_sec = 1400000000;
    show("futimes", futimes(fd, tv), f, 1);
    int dfd = open(argv[1], O_RDONLY | O_DIRECTORY);
    tv[1].tv_sec = 1500000000;
    show("futimesat", futimesat(dfd, "f", tv), f, 1);
    tv[1].tv_sec = 1600000000;
    show("futimesat null path", futimesat(fd, NULL, tv), f, 1);
    struct utimbuf ub = {1700000000, 1710000000};
    show("utime", utime(f, &ub), f, 1);
    time_t t0 = time(NULL);
    now("utimes null", utimes(f, NULL), f, t0);
    show("utime back", utime(f, &ub), f, 1);
    now("utime null", utime(f, NULL), f, t0);
    show("utime back", utime(f, &ub), f, 1);
    now("futimes null", futimes(fd, NULL), f, t0);
    tv[0].tv_usec = 1000000;
    show("utimes usec out of range", utimes(f, tv), f, 1);
    tv[0].tv_usec = -1;
    show("futimes usec negative", futimes(fd, tv), f, 1);
    tv[0].tv_usec = 0;
    char missing[4096];
    snprintf(missing, sizeof missing, "%s/missing", argv[1]);
    show("utimes missing", utimes(missing, tv), missing, 1);
    show("utime missing", utime(missing, &ub), missing, 1);
    show("lutimes missing", lutimes(missing, tv), missing, 0);
    show("futimesat missing", futimesat(dfd, "missing", tv), missing, 1);
    return 0;
}
"#,
    );
    let out = same_as_tmpfs(&r, &exe);
    assert!(
        out.contains("utimes: a 1000000000.123456000 m 1100000000.654321000\n")
            && out.contains("lutimes link: a 1200000000.123456000 m 1300000000.000001000\n")
            && out.contains("futimes: a 1200000000.999999000 m 1400000000.000001000\n")
            && out.contains("utime: a 1700000000.000000000 m 1710000000.000000000\n")
            && out.contains("utimes null: now\n")
            && out.contains("utimes usec out of range: Invalid argument\n")
            && out.contains("utimes missing: No such file or directory\n"),
        "{out}"
    );
    fsck_clean(&r);
}

/// `mkfifo`, `mkfifoat`, `mknod` and `mknodat` make FIFOs, sockets,
/// regular files (and, for root, a character device) that `stat` and
/// `readdir` report with their type and the mode less the umask; taken
/// names, a directory's type, unknown type bits, missing parents and
/// trailing slashes fail as on tmpfs.
#[test]
fn mknod_and_mkfifo_create_nodes_stat_reports() {
    let r = Run::new();
    let exe = c_program(
        &r,
        "mknod",
        r#"
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
static char base[2048];
static const char *p(const char *name) {
    static char buf[4][4096];
    static int i;
    i = (i + 1) % 4;
    snprintf(buf[i], sizeof buf[i], "%s/%s", base, name);
    return buf[i];
}
static char kind(mode_t m) {
    return S_ISFIFO(m) ? 'p' : S_ISSOCK(m) ? 's' : S_ISREG(m) ? 'f' : S_ISCHR(m) ? 'c'
         : S_ISBLK(m) ? 'b' : S_ISDIR(m) ? 'd' : '?';
}
static void res(const char *what, int r) {
    printf("%s: %s\n", what, r ? strerror(errno) : "ok");
}
static void show(const char *name) {
    struct stat st;
    if (lstat(p(name), &st)) { printf("%s: %s\n", name, strerror(errno)); return; }
    printf("%s: %c %04o size %lld nlink %lu", name, kind(st.st_mode), st.st_mode & 07777,
           (long long)st.st_size, (unsigned long)st.st_nlink);
    if (S_ISCHR(st.st_mode)) printf(" rdev %u,%u", major(st.st_rdev), minor(st.st_rdev));
    printf("\n");
}
static int by_name(const void *a, const void *b) { return strcmp(*(char **)a, *(char **)b); }
int main(int argc, char **argv) {
    snprintf(base, sizeof base, "%s", argv[1]);
    umask(022);
    res("mkfifo", mkfifo(p("fifo"), 0666));
    int dfd = open(base, O_RDONLY | O_DIRECTORY);
    res("mkfifoat", mkfifoat(dfd, "fifo2", 0600));
    res("mknod sock", mknod(p("sock"), S_IFSOCK | 0644, 0));
    res("mknod reg", mknod(p("reg"), S_IFREG | 0640, 0));
    res("mknod type 0", mknod(p("reg0"), 0777, 0));
    res("mknodat fifo", mknodat(dfd, "fifo3", S_IFIFO | 0700, 0));
    if (geteuid() == 0) res("mknodat chr", mknodat(dfd, "chr", S_IFCHR | 0600, makedev(1, 3)));
    else printf("mknodat chr: ok\n");
    res("mkdir", mkdir(p("d"), 0755));
    show("fifo"); show("fifo2"); show("sock"); show("reg"); show("reg0"); show("fifo3");
    if (geteuid() == 0) show("chr");
    else printf("chr: c 0600 size 0 nlink 1 rdev 1,3\n");
    res("mkfifo taken", mkfifo(p("fifo"), 0644));
    res("mknod over a file", mknod(p("reg"), S_IFIFO | 0644, 0));
    res("mknod dir type", mknod(p("newdir"), S_IFDIR | 0755, 0));
    res("mknod dir type taken", mknod(p("fifo"), S_IFDIR | 0755, 0));
    res("mknod link type", mknod(p("newlink"), S_IFLNK | 0755, 0));
    res("mkfifo missing parent", mkfifo(p("nope/x"), 0644));
    res("mkfifo under a file", mkfifo(p("reg/x"), 0644));
    res("mkfifo trailing slash", mkfifo(p("new/"), 0644));
    res("mkfifo trailing slash taken", mkfifo(p("fifo/"), 0644));
    res("mkfifo in a subdirectory", mkfifoat(dfd, "d/inner", 0644));
    show("d/inner");
    DIR *dir = opendir(base);
    if (!dir) { perror("opendir"); return 1; }
    char *names[64];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dir)) && n < 64) {
        char t = e->d_type == DT_FIFO ? 'p' : e->d_type == DT_SOCK ? 's' : e->d_type == DT_REG ? 'f'
               : e->d_type == DT_CHR ? 'c' : e->d_type == DT_DIR ? 'd' : '?';
        if (asprintf(&names[n++], "%s %c", e->d_name, t) < 0) return 1;
    }
    closedir(dir);
    qsort(names, n, sizeof names[0], by_name);
    printf("listing:");
    for (int i = 0; i < n; i++) printf(" [%s]", names[i]);
    printf("\n");
    res("unlink fifo", unlink(p("fifo")));
    show("fifo");
    return 0;
}
"#,
    );
    let out = same_as_tmpfs(&r, &exe);
    assert!(
        out.contains("fifo: p 0644 size 0 nlink 1\n")
            && out.contains("fifo2: p 0600 ")
            && out.contains("sock: s 0644 ")
            && out.contains("reg: f 0640 ")
            && out.contains("reg0: f 0755 ")
            && out.contains("chr: c 0600 size 0 nlink 1 rdev 1,3\n")
            && out.contains("mkfifo taken: File exists\n")
            && out.contains("mknod dir type: Operation not permitted\n")
            && out.contains("mknod link type: Invalid argument\n")
            && out.contains("mkfifo trailing slash: No such file or directory\n")
            && out.contains("[fifo p]")
            && out.contains("[sock s]")
            && out.contains("fifo: No such file or directory\n"),
        "{out}"
    );
    // Opened for I/O, a FIFO in the pool (no pipe behind it) fails loudly;
    // `O_PATH` opens it.
    let open = c_program(
        &r,
        "open_fifo",
        r#"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
int main(int argc, char **argv) {
    char p[4096];
    snprintf(p, sizeof p, "%s/fifo2", argv[1]);
    int fd = open(p, O_RDWR | O_NONBLOCK);
    printf("open: %d %s\n", fd, fd < 0 ? strerror(errno) : "");
    fd = open(p, O_PATH);
    struct stat st;
    printf("O_PATH: %s\n", fd >= 0 && !fstat(fd, &st) && S_ISFIFO(st.st_mode) ? "a FIFO" : "?");
    return 0;
}
"#,
    );
    let out = r
        .cmd(&[&open, &r.at.display().to_string()])
        .output()
        .unwrap();
    check("open_fifo", &out);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "open: -1 No such device or address\nO_PATH: a FIFO\n"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "{} is a FIFO in the pool: opening it for reading or writing is not supported (ENXIO)",
            r.at("fifo2")
        )),
        "{err}"
    );
    fsck_clean(&r);
}

/// `preadv2` and `pwritev2` (and their `64` names): scattered and
/// gathered contents round-trip, offset -1 uses and moves the file
/// offset, `RWF_APPEND` writes at the end, `RWF_DSYNC`/`RWF_SYNC`/
/// `RWF_HIPRI` are taken, `RWF_NOAPPEND` writes at the offset of an
/// `O_APPEND` descriptor (where the kernel knows it), and the flags and
/// arguments tmpfs refuses are refused alike.
#[test]
fn preadv2_and_pwritev2_round_trip_with_their_flags() {
    let r = Run::new();
    let exe = c_program(
        &r,
        "rwv2",
        r#"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
static void res(const char *what, ssize_t r, int fd) {
    int e = errno;
    long pos = lseek(fd, 0, SEEK_CUR);
    if (r < 0) printf("%s: %s pos %ld\n", what, strerror(e), pos);
    else printf("%s: %zd pos %ld\n", what, r, pos);
}
static void whole(const char *what, int fd) {
    char buf[256];
    ssize_t n = pread(fd, buf, sizeof buf, 0);
    printf("%s: [%.*s]\n", what, (int)(n < 0 ? 0 : n), buf);
}
int main(int argc, char **argv) {
    char f[4096];
    snprintf(f, sizeof f, "%s/f", argv[1]);
    int fd = open(f, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) { perror(f); return 1; }
    char a[] = "Hello, ", b[] = "vectored ", c[] = "world";
    struct iovec w[3] = {{a, 7}, {b, 9}, {c, 5}};
    res("pwritev2 at 0", pwritev2(fd, w, 3, 0, 0), fd);
    char x[10] = {0}, y[30] = {0};
    struct iovec rv[2] = {{x, 6}, {y, 20}};
    res("preadv2 at 0", preadv2(fd, rv, 2, 0, 0), fd);
    printf("scattered: [%s] [%s]\n", x, y);
    memset(x, 0, sizeof x); memset(y, 0, sizeof y);
    res("preadv2 at 7", preadv2(fd, rv, 2, 7, 0), fd);
    printf("scattered: [%s] [%s]\n", x, y);
    lseek(fd, 7, SEEK_SET);
    struct iovec one = {"VECTORED ", 9};
    res("pwritev2 at -1", pwritev2(fd, &one, 1, -1, 0), fd);
    memset(x, 0, sizeof x);
    struct iovec rx = {x, 5};
    res("preadv2 at -1", preadv2(fd, &rx, 1, -1, 0), fd);
    printf("read: [%s]\n", x);
    whole("after -1", fd);
    struct iovec d = {"D", 1}, s = {"S", 1}, h = {"H", 1};
    res("RWF_DSYNC", pwritev2(fd, &d, 1, 0, RWF_DSYNC), fd);
    res("RWF_SYNC", pwritev2(fd, &s, 1, 1, RWF_SYNC), fd);
    res("RWF_HIPRI", pwritev2(fd, &h, 1, 2, RWF_HIPRI), fd);
    res("RWF_HIPRI read", preadv2(fd, &rx, 1, 0, RWF_HIPRI), fd);
    lseek(fd, 3, SEEK_SET);
    struct iovec ap = {"<end>", 5};
    res("RWF_APPEND at 0", pwritev2(fd, &ap, 1, 0, RWF_APPEND), fd);
    res("RWF_APPEND at -1", pwritev2(fd, &ap, 1, -1, RWF_APPEND), fd);
    whole("after appends", fd);
    int fa = open(f, O_RDWR | O_APPEND);
    lseek(fa, 1, SEEK_SET);
    struct iovec o = {"(a)", 3};
    res("O_APPEND pwritev2 at 0", pwritev2(fa, &o, 1, 0, 0), fa);
    res("O_APPEND pwrite at 0", pwrite(fa, "(b)", 3, 0), fa);
    res("O_APPEND pwritev2 at -1", pwritev2(fa, &o, 1, -1, 0), fa);
    whole("after O_APPEND", fa);
    errno = 0;
    int probe = open(argv[2], O_RDWR | O_CREAT | O_APPEND, 0644);
    if (pwritev2(probe, &o, 1, 0, RWF_NOAPPEND) < 0 && errno == EOPNOTSUPP) {
        printf("RWF_NOAPPEND: not in this kernel\n");
    } else {
        lseek(fa, 2, SEEK_SET);
        struct iovec na = {"na", 2};
        res("RWF_NOAPPEND at 0", pwritev2(fa, &na, 1, 0, RWF_NOAPPEND), fa);
        res("RWF_NOAPPEND at -1", pwritev2(fa, &na, 1, -1, RWF_NOAPPEND), fa);
        whole("after RWF_NOAPPEND", fa);
    }
    close(probe);
    res("RWF_NOWAIT write", pwritev2(fd, &o, 1, 0, RWF_NOWAIT), fd);
    res("RWF_NOWAIT read", preadv2(fd, &rx, 1, 0, RWF_NOWAIT), fd);
    res("unknown flag write", pwritev2(fd, &o, 1, 0, 1 << 30), fd);
    res("unknown flag read", preadv2(fd, &rx, 1, 0, 1 << 30), fd);
    struct iovec empty = {x, 0};
    res("unknown flag, nothing to read", preadv2(fd, &empty, 1, 0, 1 << 30), fd);
    res("offset -2", preadv2(fd, &rx, 1, -2, 0), fd);
    volatile int minus = -1;
    res("count -1", preadv2(fd, &rx, minus, 0, 0), fd);
    struct iovec *volatile none = NULL;
    res("null iovec", preadv2(fd, none, 1, 0, 0), fd);
    struct iovec nullbuf = {NULL, 4};
    res("null buffer", pwritev2(fd, &nullbuf, 1, 0, 0), fd);
    int ro = open(f, O_RDONLY);
    res("write on O_RDONLY", pwritev2(ro, &o, 1, 0, 0), ro);
    int dir = open(argv[1], O_RDONLY | O_DIRECTORY);
    res("read a directory", preadv2(dir, &rx, 1, 0, 0), dir);
    struct iovec tail = {"64", 2};
    res("pwritev64v2", pwritev64v2(fd, &tail, 1, 0, 0), fd);
    memset(x, 0, sizeof x);
    res("preadv64v2", preadv64v2(fd, &rx, 1, 0, 0), fd);
    printf("read: [%s]\n", x);
    whole("final", fd);
    return 0;
}
"#,
    );
    // The kernel file that tells whether the kernel knows RWF_NOAPPEND.
    let probe = r.kernel("noappend-probe");
    let ours = quiet_ok(&r, &[&exe, &r.at.display().to_string(), &probe]);
    let shm = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let out = Command::new(&exe)
        .arg(shm.path())
        .arg(&probe)
        .output()
        .unwrap();
    check("rwv2 on tmpfs", &out);
    assert_eq!(
        ours,
        String::from_utf8_lossy(&out.stdout),
        "the pool (left) and tmpfs (right) differ"
    );
    assert!(
        ours.contains("scattered: [Hello,] [ vectored world]\n")
            && ours.contains("pwritev2 at -1: 9 pos 16\n")
            && ours.contains("read: [world]\n")
            && ours.contains("RWF_APPEND at 0: 5 pos 3\n")
            && ours.contains("RWF_APPEND at -1: 5 pos 31\n")
            && ours.contains("after appends: [DSHlo, VECTORED world<end><end>]\n")
            && ours.contains("RWF_NOWAIT write: Operation not supported")
            && ours.contains("unknown flag read: Operation not supported")
            && ours.contains("unknown flag, nothing to read: 0 ")
            && ours.contains("offset -2: Invalid argument")
            && ours.contains("null iovec: Bad address")
            && ours.contains("write on O_RDONLY: Bad file descriptor")
            && ours.contains("read a directory: Is a directory"),
        "{ours}"
    );
    fsck_clean(&r);
}

/// `getdents64` on a directory descriptor in the pool: every entry once,
/// with its `d_type`, across many calls with a small buffer, records
/// aligned to 8 bytes, `EINVAL` for a buffer too small for the next
/// record, 0 at the end, `lseek` to 0 or to a record's `d_off`, and
/// entries removed after they were read (as `rm -r` does) not disturbing
/// the rest, as on tmpfs.
#[test]
fn getdents64_lists_each_entry_once_with_its_type() {
    let r = Run::new();
    let exe = c_program(
        &r,
        "getdents",
        r#"
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
struct rec { unsigned long long ino; long long off; unsigned short reclen; unsigned char type; char name[]; };
static char *seen[256];
static long long offs[256];
static int nseen, calls, bad;
static char tc(unsigned char t) {
    return t == DT_REG ? 'f' : t == DT_DIR ? 'd' : t == DT_LNK ? 'l' : t == DT_FIFO ? 'p' : '?';
}
/* One getdents64 call; records appended to `seen`; returns its result. */
static long one(int fd, size_t size) {
    char buf[4096] __attribute__((aligned(8)));
    long n = getdents64(fd, buf, size);
    if (n <= 0) return n;
    calls++;
    for (long at = 0; at < n;) {
        struct rec *e = (struct rec *)(buf + at);
        size_t len = strnlen(e->name, e->reclen - 19);
        if (e->reclen % 8 || len == (size_t)(e->reclen - 19) || e->ino == 0) bad++;
        if (asprintf(&seen[nseen], "%s %c", e->name, tc(e->type)) < 0) exit(1);
        offs[nseen++] = e->off;
        at += e->reclen;
    }
    return n;
}
static int by_name(const void *a, const void *b) { return strcmp(*(char **)a, *(char **)b); }
static void report(const char *what) {
    qsort(seen, nseen, sizeof seen[0], by_name);
    int dup = 0;
    for (int i = 1; i < nseen; i++) dup += !strcmp(seen[i], seen[i - 1]);
    printf("%s: %d entries, %d twice, %d bad records, %s calls:", what, nseen, dup, bad,
           calls > 1 ? "several" : "one");
    for (int i = 0; i < nseen; i++) { printf(" [%s]", seen[i]); free(seen[i]); }
    printf("\n");
    nseen = calls = bad = 0;
}
int main(int argc, char **argv) {
    char p[4096];
    snprintf(p, sizeof p, "%s/g", argv[1]);
    if (mkdir(p, 0755) || chdir(p)) { perror(p); return 1; }
    for (int i = 0; i < 40; i++) {
        char name[64];
        snprintf(name, sizeof name, "file-%0*d", 1 + i % 20, i);
        int fd = creat(name, 0644);
        if (fd < 0) { perror(name); return 1; }
        close(fd);
    }
    if (mkdir("sub", 0755) || symlink("file-0", "link") || mkfifo("pipe", 0644)) { perror("setup"); return 1; }
    int fd = open(".", O_RDONLY | O_DIRECTORY);
    if (fd < 0) { perror("open"); return 1; }
    errno = 0;
    long tiny = one(fd, 8);
    printf("tiny buffer: %ld %s\n", tiny, strerror(errno));
    long n;
    while ((n = one(fd, 200)) > 0) {}
    printf("end: %ld\n", n);
    printf("after end: %ld\n", one(fd, 4096));
    report("small buffer");
    printf("rewind: %ld\n", (long)lseek(fd, 0, SEEK_SET));
    while (one(fd, 4096) > 0) {}
    report("large buffer");
    lseek(fd, 0, SEEK_SET);
    one(fd, 80);
    char first[2][300];
    int got = nseen;
    long long resume = offs[0];
    snprintf(first[0], sizeof first[0], "%s", got > 1 ? seen[1] : "(none)");
    for (int i = 0; i < nseen; i++) free(seen[i]);
    nseen = 0;
    lseek(fd, resume, SEEK_SET);
    one(fd, 4096);
    snprintf(first[1], sizeof first[1], "%s", nseen ? seen[0] : "(none)");
    printf("resume at the first record's d_off: %s\n",
           got > 1 && !strcmp(first[0], first[1]) ? "the second record" : "elsewhere");
    for (int i = 0; i < nseen; i++) free(seen[i]);
    nseen = calls = 0;
    /* rm -r: read a batch, remove what it named, read on. */
    lseek(fd, 0, SEEK_SET);
    int removed = 0;
    for (;;) {
        int from = nseen;
        if (one(fd, 256) <= 0) break;
        for (int i = from; i < nseen; i++) {
            char name[300];
            snprintf(name, sizeof name, "%s", seen[i]);
            char type = name[strlen(name) - 1];
            name[strlen(name) - 2] = 0;
            if (!strcmp(name, ".") || !strcmp(name, "..")) continue;
            if ((type == 'd' ? rmdir : unlink)(name)) { perror(name); return 1; }
            removed++;
        }
    }
    printf("removed %d\n", removed);
    report("removing");
    lseek(fd, 0, SEEK_SET);
    while (one(fd, 4096) > 0) {}
    report("left");
    int reg = creat("regular", 0644);
    errno = 0;
    long notdir = one(reg, 4096);
    printf("regular file: %ld %s\n", notdir, strerror(errno));
    return 0;
}
"#,
    );
    let out = same_as_tmpfs(&r, &exe);
    assert!(
        out.contains("tiny buffer: -1 Invalid argument\n")
            && out.contains("end: 0\nafter end: 0\n")
            && out.contains("small buffer: 45 entries, 0 twice, 0 bad records, several calls:")
            && out.contains("large buffer: 45 entries, 0 twice, 0 bad records, one calls:")
            && out.contains(" [. d] [.. d] ")
            && out.contains(" [link l] ")
            && out.contains(" [pipe p] ")
            && out.contains(" [sub d]")
            && out.contains(" [file-00000000000000000019 f] ")
            && out.contains("resume at the first record's d_off: the second record\n")
            && out.contains("removed 43\nremoving: 45 entries, 0 twice")
            && out.contains("left: 2 entries, 0 twice, 0 bad records, one calls: [. d] [.. d]\n")
            && out.contains("regular file: -1 Not a directory\n"),
        "{out}"
    );
    fsck_clean(&r);
}

/// `glob` and `glob64` of patterns in the pool, absolute and relative to
/// a working directory there, with `GLOB_MARK`, `GLOB_NOCHECK`,
/// `GLOB_ONLYDIR`, `GLOB_PERIOD`, `GLOB_BRACE`, `GLOB_DOOFFS`,
/// `GLOB_APPEND`, `GLOB_NOSORT` and a caller's own `GLOB_ALTDIRFUNC`:
/// the same paths, order, flags and results as glibc's on tmpfs.
#[test]
fn glob_matches_patterns_in_the_pool_as_on_tmpfs() {
    let r = Run::new();
    let exe = c_program(
        &r,
        "glob",
        r#"
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
static size_t cut;
static int by_name(const void *a, const void *b) { return strcmp(*(char **)a, *(char **)b); }
static void run(const char *what, const char *pat, int flags, int rel) {
    glob_t g;
    memset(&g, 0, sizeof g);
    int r = glob(pat, flags, NULL, &g);
    printf("%s: %d count %zu flags %#x untouched %d:", what, r, g.gl_pathc,
           g.gl_flags & ~GLOB_MAGCHAR, !g.gl_opendir && !g.gl_readdir && !g.gl_stat);
    if (flags & GLOB_NOSORT) qsort(g.gl_pathv, g.gl_pathc, sizeof(char *), by_name);
    for (size_t i = 0; i < g.gl_pathc; i++) {
        const char *s = g.gl_pathv[i];
        printf(" %s", rel || strncmp(s, pat, cut) ? s : s + cut);
    }
    printf("\n");
    if (r == 0 || r == GLOB_NOMATCH) globfree(&g);
}
static void mk(const char *p, int dir) {
    int r = dir ? mkdir(p, 0755) : close(creat(p, 0644));
    if (r) { perror(p); exit(1); }
}
int main(int argc, char **argv) {
    if (chdir(argv[1])) { perror("chdir"); return 1; }
    mk("a.c", 0); mk("b.c", 0); mk("c.h", 0); mk(".hidden.c", 0); mk("weird[1].c", 0);
    mk("dir1", 1); mk("dir1/x.c", 0); mk("dir2", 1); mk("dir2/y.c", 0); mk("dir2/z.h", 0);
    mk("sub", 1); mk("sub/deep", 1); mk("sub/deep/w.c", 0);
    if (symlink("dir1", "link") || symlink("nowhere", "dangling")) { perror("symlink"); return 1; }
    char pat[4096];
    cut = strlen(argv[1]) + 1;
#define P(s) (snprintf(pat, sizeof pat, "%s/%s", argv[1], s), pat)
    run("*.c", P("*.c"), 0, 0);
    run("* mark", P("*"), GLOB_MARK, 0);
    run("* onlydir", P("*"), GLOB_ONLYDIR, 0);
    run("* period", P("*"), GLOB_PERIOD, 0);
    run(".*", P(".*"), 0, 0);
    run("*/*.c", P("*/*.c"), 0, 0);
    run("*/*/*", P("*/*/*"), GLOB_MARK, 0);
    run("?.[ch]", P("?.[ch]"), 0, 0);
    run("escaped", P("weird\\[1\\].c"), 0, 0);
    run("noescape", P("weird\\[1\\].c"), GLOB_NOESCAPE, 0);
    run("nomatch", P("nomatch*"), 0, 0);
    run("nocheck", P("nomatch*"), GLOB_NOCHECK, 0);
    run("literal", P("a.c"), 0, 0);
    run("literal dir mark", P("dir1"), GLOB_MARK, 0);
    run("literal missing", P("missing"), 0, 0);
    run("literal dangling", P("dangling"), 0, 0);
    run("brace", P("{a,b,nope}.c"), GLOB_BRACE, 0);
    run("nosort", P("dir*/*"), GLOB_NOSORT, 0);
    run("in a file", P("a.c/*"), 0, 0);
    run("relative", "*.c", 0, 1);
    run("relative dirs", "d*/*", GLOB_MARK, 1);
    run("relative ..", "dir1/../*.h", 0, 1);
    glob_t g;
    memset(&g, 0, sizeof g);
    g.gl_offs = 2;
    int r1 = glob(P("*.h"), GLOB_DOOFFS, NULL, &g);
    int r2 = glob(P("dir2/*.h"), GLOB_DOOFFS | GLOB_APPEND, NULL, &g);
    printf("offs append: %d %d count %zu:", r1, r2, g.gl_pathc);
    for (size_t i = 0; i < g.gl_pathc + 2; i++)
        printf(" %s", g.gl_pathv[i] ? g.gl_pathv[i] + cut : "(null)");
    printf("\n");
    globfree(&g);
    glob64_t g64;
    memset(&g64, 0, sizeof g64);
    int r = glob64(P("*.c"), 0, NULL, &g64);
    printf("glob64: %d count %zu\n", r, g64.gl_pathc);
    globfree64(&g64);
    memset(&g, 0, sizeof g);
    g.gl_opendir = (void *(*)(const char *))opendir;
    g.gl_readdir = (struct dirent *(*)(void *))readdir;
    g.gl_closedir = (void (*)(void *))closedir;
    g.gl_stat = stat;
    g.gl_lstat = lstat;
    r = glob(P("dir*/*.c"), GLOB_ALTDIRFUNC, NULL, &g);
    printf("own altdirfunc: %d count %zu:", r, g.gl_pathc);
    for (size_t i = 0; i < g.gl_pathc; i++) printf(" %s", g.gl_pathv[i] + cut);
    printf("\n");
    globfree(&g);
    return 0;
}
"#,
    );
    let out = same_as_tmpfs(&r, &exe);
    assert!(
        out.contains("*.c: 0 count 3 flags 0 untouched 1: a.c b.c weird[1].c\n")
            && out.contains("* mark: 0 count 9 flags 0x2 untouched 1: a.c b.c c.h dangling dir1/ dir2/ link/ sub/ weird[1].c\n")
            && out.contains("*/*.c: 0 count 3 flags 0x20 untouched 1: dir1/x.c dir2/y.c link/x.c\n")
            && out.contains("nomatch: 3 count 0")
            && out.contains("nocheck: 0 count 1 flags 0x10 untouched 1: nomatch*\n")
            && out.contains("brace: 0 count 2 flags 0x430 untouched 1: a.c b.c\n")
            && out.contains("relative: 0 count 3 flags 0 untouched 1: a.c b.c weird[1].c\n")
            && out.contains("relative ..: 0 count 1 flags 0 untouched 1: dir1/../c.h\n")
            && out.contains("* onlydir: 0 count 4 flags 0x2000 untouched 1: dir1 dir2 link sub\n")
            && out.contains("offs append: 0 0 count 2: (null) (null) c.h dir2/z.h\n")
            && out.contains("own altdirfunc: 0 count 2: dir1/x.c dir2/y.c\n"),
        "{out}"
    );
}

/// glibc's `fts_open`, `fts_read`, `fts_children`, `fts_set` and
/// `fts_close` on a tree in the pool (files, nested and empty
/// directories, symlinks, one dangling, one back up): physical and
/// logical walks, `FTS_NOCHDIR`, `FTS_COMFOLLOW`, `FTS_NOSTAT`,
/// `FTS_SEEDOT`, `FTS_XDEV`, orders by comparison and without one,
/// `FTS_SKIP`, `FTS_AGAIN` and `FTS_FOLLOW` (on visits and on
/// `fts_children`'s list), names only, several roots (a missing one, a
/// trailing slash), an absolute root, errors: each visit as glibc's walk
/// of the same tree on tmpfs. A tree outside the directory is walked by
/// glibc itself, alone or as a root beside one in the pool.
#[test]
fn fts_walks_a_tree_in_the_pool_as_glibc_on_tmpfs() {
    let r = Run::new();
    let exe = c_program(
        &r,
        "fts",
        r#"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <fts.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
static const char *infos[] = {"?", "D", "DC", "DEFAULT", "DNR", "DOT", "DP", "ERR",
                              "F", "INIT", "NS", "NSOK", "SL", "SLNONE", "W"};
static const char *prefix = "";
static int nostat, counter;
static const char *rel(const char *p) {
    size_t n = strlen(prefix);
    return n && !strncmp(p, prefix, n) ? p + n : p;
}
static int by_name(const FTSENT **a, const FTSENT **b) {
    return strcmp((*a)->fts_name, (*b)->fts_name);
}
static int by_name_desc(const FTSENT **a, const FTSENT **b) {
    return strcmp((*b)->fts_name, (*a)->fts_name);
}
/* One visit: kind, level, path, name, and what must hold of it. */
static void show(const FTSENT *e) {
    printf("%s %d %s %s", infos[e->fts_info], e->fts_level, rel(e->fts_path), e->fts_name);
    if (e->fts_pathlen != strlen(e->fts_path) || e->fts_namelen != strlen(e->fts_name))
        printf(" BADLEN %d %d", e->fts_pathlen, e->fts_namelen);
    if (e->fts_level > 0 && e->fts_parent->fts_level != e->fts_level - 1)
        printf(" BADPARENT");
    if (e->fts_info == FTS_F && !nostat) printf(" size %ld", (long)e->fts_statp->st_size);
    if (e->fts_info == FTS_DC) printf(" cycle %s", e->fts_cycle->fts_name);
    if (e->fts_info == FTS_NS || e->fts_info == FTS_DNR || e->fts_info == FTS_ERR)
        printf(" %s", strerror(e->fts_errno));
    /* The access path reaches the entry (from the working directory, or
       from the one glibc's walk changed to). */
    if (!nostat && e->fts_info != FTS_NS && e->fts_info != FTS_NSOK) {
        struct stat s;
        int ok = (!lstat(e->fts_accpath, &s) && s.st_ino == e->fts_statp->st_ino) ||
                 (!stat(e->fts_accpath, &s) && s.st_ino == e->fts_statp->st_ino);
        if (!ok) printf(" BADACC %s", e->fts_accpath);
    }
    printf("\n");
}
/* Walk `roots` to the end, printing each visit; `skip` a directory not to
   enter, `again` a file to visit twice, `follow` a symlink to follow. */
static void walk(const char *what, char **roots, int opts,
                 int (*cmp)(const FTSENT **, const FTSENT **),
                 const char *skip, const char *again, const char *follow) {
    printf("== %s\n", what);
    nostat = opts & FTS_NOSTAT;
    FTS *f = fts_open(roots, opts, cmp);
    if (!f) { printf("open: %s\n", strerror(errno)); return; }
    FTSENT *e;
    int agained = 0;
    while ((e = fts_read(f))) {
        show(e);
        if (e->fts_info == FTS_D) {
            e->fts_number = ++counter;
            e->fts_pointer = strdup(e->fts_name);
            if (skip && !strcmp(e->fts_name, skip)) fts_set(f, e, FTS_SKIP);
        }
        if (e->fts_info == FTS_DP && e->fts_pointer) {
            /* Kept from the pre-order visit. */
            printf("  kept %s\n", e->fts_number > 0 && !strcmp(e->fts_pointer, e->fts_name) ? "yes" : "no");
            free(e->fts_pointer);
        }
        if (again && !agained && !strcmp(e->fts_name, again)) { fts_set(f, e, FTS_AGAIN); agained = 1; }
        if (follow && e->fts_info == FTS_SL && !strcmp(e->fts_name, follow)) fts_set(f, e, FTS_FOLLOW);
    }
    printf("end %s\n", errno ? strerror(errno) : "0");
    printf("close %d\n", fts_close(f));
}
static void mk(const char *p, int dir, const char *data) {
    if (dir) { if (mkdir(p, 0755)) { perror(p); exit(1); } return; }
    int fd = creat(p, 0644);
    if (fd < 0 || write(fd, data, strlen(data)) != (ssize_t)strlen(data) || close(fd)) { perror(p); exit(1); }
}
static void ln(const char *t, const char *p) {
    if (symlink(t, p)) { perror(p); exit(1); }
}
int main(int argc, char **argv) {
    if (chdir(argv[1])) { perror("chdir"); return 1; }
    mk("t", 1, 0); mk("t/a", 0, "hello"); mk("t/z", 0, "zz");
    mk("t/d", 1, 0); mk("t/d/x", 0, "x"); mk("t/d/deep", 1, 0); mk("t/d/deep/y", 0, "yyy");
    mk("t/e", 1, 0);
    ln("d", "t/l"); ln("nope", "t/dangling"); ln("..", "t/d/up");
    char *t[] = {"t", NULL};
    walk("physical", t, FTS_PHYSICAL, by_name, 0, 0, 0);
    walk("physical nochdir", t, FTS_PHYSICAL | FTS_NOCHDIR, by_name_desc, 0, 0, 0);
    walk("logical", t, FTS_LOGICAL, by_name, 0, 0, 0);
    walk("skip d", t, FTS_PHYSICAL, by_name, "d", 0, 0);
    walk("again a", t, FTS_PHYSICAL, by_name, 0, "a", 0);
    walk("follow l", t, FTS_PHYSICAL, by_name, 0, 0, "l");
    walk("nostat", t, FTS_PHYSICAL | FTS_NOSTAT, by_name, 0, 0, 0);
    walk("seedot", (char *[]){"t/d", NULL}, FTS_PHYSICAL | FTS_SEEDOT, by_name, 0, 0, 0);
    walk("xdev", t, FTS_PHYSICAL | FTS_XDEV, by_name, 0, 0, 0);
    walk("no compar", (char *[]){"t/d/deep", NULL}, FTS_PHYSICAL, NULL, 0, 0, 0);
    walk("comfollow", (char *[]){"t/l", NULL}, FTS_PHYSICAL | FTS_COMFOLLOW, by_name, 0, 0, 0);
    walk("symlink root", (char *[]){"t/l", NULL}, FTS_PHYSICAL, by_name, 0, 0, 0);
    walk("roots", (char *[]){"t/z", "t/e/", "missing", "t/a", "./t/d/deep", NULL}, FTS_PHYSICAL, by_name, 0, 0, 0);
    walk("roots unsorted", (char *[]){"t/z", "t/a", "t/e", NULL}, FTS_PHYSICAL, NULL, 0, 0, 0);
    char abs[4096];
    snprintf(abs, sizeof abs, "%s/t/d", argv[1]);
    prefix = argv[1];
    walk("absolute", (char *[]){abs, NULL}, FTS_PHYSICAL, by_name, 0, 0, 0);
    prefix = "";
    /* fts_children: the roots before the first read, a directory's list
       (an entry skipped there is not visited; numbers set there stay), a
       file's (none), names only. */
    printf("== children\n");
    FTS *f = fts_open(t, FTS_PHYSICAL, by_name);
    FTSENT *c = fts_children(f, 0);
    printf("roots:");
    for (; c; c = c->fts_link) printf(" %s/%d", c->fts_name, c->fts_level);
    printf("\n");
    FTSENT *e;
    while ((e = fts_read(f))) {
        show(e);
        if (e->fts_info == FTS_D && !strcmp(e->fts_name, "t")) {
            printf("list:");
            for (c = fts_children(f, 0); c; c = c->fts_link) {
                printf(" %s/%s/%d", c->fts_name, infos[c->fts_info], c->fts_level);
                if (c->fts_parent != e) printf("/BADPARENT");
                c->fts_number = 100 + c->fts_namelen;
                if (!strcmp(c->fts_name, "d")) fts_set(f, c, FTS_SKIP);
                if (!strcmp(c->fts_name, "l")) fts_set(f, c, FTS_FOLLOW);
            }
            printf("\n");
        } else if (e->fts_level == 1) {
            printf("  number %ld\n", e->fts_number);
        }
        if (e->fts_info == FTS_F) {
            errno = 0;
            c = fts_children(f, 0);
            printf("  file children %p %d\n", (void *)c, errno);
        }
        if (e->fts_info == FTS_D && !strcmp(e->fts_name, "e")) {
            errno = 0;
            c = fts_children(f, 0);
            printf("  empty children %p %d\n", (void *)c, errno);
        }
    }
    printf("close %d\n", fts_close(f));
    /* Names only: then read again, stat'ed, when the walk goes on. */
    f = fts_open(t, FTS_PHYSICAL, by_name);
    while ((e = fts_read(f))) {
        show(e);
        if (e->fts_info == FTS_D && !strcmp(e->fts_name, "d")) {
            printf("names:");
            for (c = fts_children(f, FTS_NAMEONLY); c; c = c->fts_link)
                printf(" %s/%s", c->fts_name, infos[c->fts_info]);
            printf("\n");
        }
    }
    printf("close %d\n", fts_close(f));
    /* Closed half-way. */
    f = fts_open(t, FTS_PHYSICAL, by_name);
    fts_read(f); fts_read(f);
    printf("close early %d\n", fts_close(f));
    f = fts_open(t, FTS_PHYSICAL, by_name);
    printf("close unread %d\n", fts_close(f));
    printf("== errors\n");
    errno = 0;
    f = fts_open(t, 0x400, by_name);
    printf("options %p %s\n", (void *)f, strerror(errno));
    f = fts_open((char *[]){"t", "", NULL}, FTS_PHYSICAL, by_name);
    printf("empty %p %s\n", (void *)f, strerror(errno));
    f = fts_open(t, FTS_PHYSICAL, by_name);
    e = fts_read(f);
    int r = fts_set(f, e, 99);
    printf("set %d %s\n", r, strerror(errno));
    c = fts_children(f, 7);
    printf("children %p %s\n", (void *)c, strerror(errno));
    fts_close(f);
    if (argc > 2) {
        /* A tree outside: glibc's own walk (it changes directory unless
           told not to), alone or beside a root in the pool. */
        char k[4096];
        snprintf(k, sizeof k, "%s/k", argv[2]);
        mkdir(k, 0755);
        snprintf(k, sizeof k, "%s/k/f", argv[2]);
        mk(k, 0, "kkkk");
        snprintf(k, sizeof k, "%s/k", argv[2]);
        printf("== outside\n");
        f = fts_open((char *[]){k, NULL}, FTS_PHYSICAL, by_name);
        printf("glibc's %s\n", f->fts_rfd >= 0 ? "yes" : "no");
        prefix = argv[2];
        while ((e = fts_read(f))) show(e);
        fts_close(f);
        walk("outside and in", (char *[]){k, "t/d/deep", NULL}, FTS_PHYSICAL | FTS_NOCHDIR, by_name, 0, 0, 0);
        prefix = "";
    }
    return 0;
}
"#,
    );
    let outside = r.kernel("outside");
    std::fs::create_dir(&outside).unwrap();
    let out = same_as_tmpfs_with(&r, &exe, &[&outside]);
    for want in [
        "== physical\nD 0 t t\nF 1 t/a a size 5\nD 1 t/d d\nD 2 t/d/deep deep\n",
        "DC 2 t/l/up up cycle t\n",
        "SLNONE 1 t/dangling dangling\n",
        "D 1 t/d d\nDP 1 t/d d\n  kept yes\n",
        "F 1 t/a a size 5\nF 1 t/a a size 5\n",
        "SL 1 t/l l\nD 1 t/l l\nD 2 t/l/deep deep\n",
        "NSOK 1 t/a a\n",
        "DOT 1 t/d/. .\n",
        "NS 0 missing missing No such file or directory\n",
        "list: a/F/1 d/D/1 dangling/SL/1 e/D/1 l/SL/1 z/F/1\nF 1 t/a a size 5\n  number 101\n",
        "names: deep/NSOK up/NSOK x/NSOK\n",
        "== errors\noptions (nil) Invalid argument\nempty (nil) No such file or directory\n",
        "== outside\nglibc's yes\nD 0 /k k\nF 1 /k/f f size 4\nDP 0 /k k\n",
        "D 0 /k k\nF 1 /k/f f size 4\nDP 0 /k k\n  kept yes\nD 0 t/d/deep deep\n",
    ] {
        assert!(out.contains(want), "{want:?} is missing:\n{out}");
    }
    assert!(!out.contains("BAD"), "{out}");
    fsck_clean(&r);
}

/// The C headers and helpers the tests below share: `res` prints what a
/// call returned (and its error), `make` opens a file of a directory,
/// creating it; an alarm ends a program that waits a minute (a pipe read
/// that a failed transfer left empty) so its test fails instead.
const C_HELPERS: &str = r#"
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
__attribute__((constructor)) static void deadline(void) { alarm(60); }
__attribute__((unused)) static void res(const char *what, long r) {
    printf("%s: %ld%s%s\n", what, r, r < 0 ? " " : "", r < 0 ? strerror(errno) : "");
}
__attribute__((unused)) static int make(const char *dir, const char *name, int flags) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    int fd = open(p, flags | O_CREAT, 0644);
    if (fd < 0) { perror(p); exit(1); }
    return fd;
}
"#;

/// [`c_program`] of `src` after [`C_HELPERS`].
fn c_program_with_helpers(r: &Run, name: &str, src: &str) -> String {
    c_program(r, name, &[C_HELPERS, src].concat())
}

/// `close_range` and `closefrom` over descriptors in the pool: closed
/// for the library too (a read is `EBADF`, and a kernel file opened next
/// takes the number and works as a kernel file), `CLOSE_RANGE_CLOEXEC`
/// marks them close-on-exec and keeps them open, a range mixing the
/// pool's and the kernel's closes both, errors as on tmpfs.
#[test]
fn close_range_and_closefrom_close_descriptors_in_the_pool() {
    let r = Run::new();
    let exe = c_program_with_helpers(
        &r,
        "close_range",
        r#"
int main(int argc, char **argv) {
    char p[4096], buf[8], elf[4];
    snprintf(p, sizeof p, "%s/f", argv[1]);
    int fd = open(p, O_RDWR | O_CREAT, 0644);
    if (fd < 0 || write(fd, "pool", 4) != 4) { perror(p); return 1; }
    /* A pool descriptor closed by close_range, its number then the kernel's. */
    res("close_range", close_range(fd, fd, 0));
    res("read closed", read(fd, buf, 4));
    res("fcntl closed", fcntl(fd, F_GETFD));
    int k = open(argv[0], O_RDONLY);
    printf("kernel file takes the number: %s\n", k == fd ? "yes" : "no");
    res("kernel read", read(k, elf, 4));
    printf("kernel file is the program: %s\n", memcmp(elf, "\177ELF", 4) ? "no" : "yes");
    struct stat st;
    res("kernel fstat", fstat(k, &st));
    printf("kernel lseek to the end: %s\n", lseek(k, 0, SEEK_END) == st.st_size ? "its size" : "elsewhere");
    res("kernel close", close(k));
    /* CLOSE_RANGE_CLOEXEC: kept open, marked close-on-exec. */
    fd = open(p, O_RDONLY);
    res("cloexec", close_range(fd, fd, CLOSE_RANGE_CLOEXEC));
    printf("FD_CLOEXEC: %d\n", fcntl(fd, F_GETFD) & FD_CLOEXEC);
    res("still reads", pread(fd, buf, 4, 0));
    res("close", close(fd));
    /* A range of pool and kernel descriptors. */
    int a = open(p, O_RDONLY), b = open(argv[0], O_RDONLY), c = open(p, O_RDONLY);
    printf("three in a row: %s\n", b == a + 1 && c == a + 2 ? "yes" : "no");
    res("close_range span", close_range(a, c, 0));
    res("first", fcntl(a, F_GETFD));
    res("kernel between", fcntl(b, F_GETFD));
    res("last", fcntl(c, F_GETFD));
    /* closefrom. */
    a = open(p, O_RDONLY);
    b = open(p, O_RDONLY);
    closefrom(a);
    res("closefrom first", fcntl(a, F_GETFD));
    res("closefrom second", fcntl(b, F_GETFD));
    k = open(argv[0], O_RDONLY);
    printf("kernel file after closefrom takes the number: %s\n", k == a ? "yes" : "no");
    res("kernel read after closefrom", read(k, elf, 4));
    res("first > last", close_range(9, 3, 0));
    res("unknown flag", close_range(k, k, 1 << 8));
    res("kernel still open", fcntl(k, F_GETFD));
    close(k);
    fd = open(p, O_RDONLY);
    memset(buf, 0, sizeof buf);
    res("reopen read", read(fd, buf, 4));
    printf("contents: %s\n", buf);
    return 0;
}
"#,
    );
    let out = same_as_tmpfs(&r, &exe);
    assert!(
        out.contains("read closed: -1 Bad file descriptor\n")
            && out.contains("kernel file takes the number: yes\nkernel read: 4\nkernel file is the program: yes\n")
            && out.contains("kernel lseek to the end: its size\n")
            && out.contains("FD_CLOEXEC: 1\nstill reads: 4\n")
            && out.contains("first: -1 Bad file descriptor\nkernel between: -1 Bad file descriptor\nlast: -1 Bad file descriptor\n")
            && out.contains("closefrom second: -1 Bad file descriptor\n")
            && out.contains("kernel file after closefrom takes the number: yes\nkernel read after closefrom: 4\n")
            && out.contains("first > last: -1 Invalid argument\n")
            && out.contains("contents: pool\n"),
        "{out}"
    );
    fsck_clean(&r);
}

/// `sendfile` with the pool at either end or both: from the file offset
/// or an offset pointer (which moves while the file offset stays), to
/// and from kernel files, to a pipe, capped at the end of file, and the
/// errors (`EBADF` for descriptors not open for it, `EINVAL` for a
/// negative offset, an `O_APPEND` output or a directory), as on tmpfs.
#[test]
fn sendfile_moves_bytes_in_and_out_of_the_pool() {
    let r = Run::new();
    let exe = c_program_with_helpers(
        &r,
        "sendfile",
        r#"
/* A checksum of the file at `fd` (read from 0) and its size. */
static void sum(const char *what, int fd) {
    unsigned long h = 5381, n = 0;
    unsigned char b[4096];
    long got;
    for (off_t at = 0; (got = pread(fd, b, sizeof b, at)) > 0; at += got)
        for (long i = 0; i < got; i++, n++) h = h * 33 + b[i];
    printf("%s: %lu bytes, sum %lx\n", what, n, h);
}
int main(int argc, char **argv) {
    static unsigned char data[100000];
    for (int i = 0; i < (int)sizeof data; i++) data[i] = i * 7 % 251;
    int src = make(argv[1], "src", O_RDWR);
    if (write(src, data, sizeof data) != sizeof data) { perror("write"); return 1; }
    char kpath[] = "/tmp/manyfs-sendfile-XXXXXX";
    int kfd = mkstemp(kpath);
    if (kfd < 0) { perror("mkstemp"); return 1; }
    unlink(kpath);
    sum("source", src);
    /* From the pool to a kernel file, at the file offset. */
    lseek(src, 0, SEEK_SET);
    res("pool to kernel", sendfile(kfd, src, NULL, 1 << 20));
    res("source offset", lseek(src, 0, SEEK_CUR));
    res("kernel offset", lseek(kfd, 0, SEEK_CUR));
    sum("kernel copy", kfd);
    /* With an offset pointer: it moves, the file offset stays. */
    off_t off = 10;
    lseek(src, 3, SEEK_SET);
    int part = make(argv[1], "part", O_RDWR);
    res("pool to pool at 10", sendfile(part, src, &off, 5000));
    printf("offset now %ld, file offset %ld\n", (long)off, (long)lseek(src, 0, SEEK_CUR));
    sum("part", part);
    unsigned char back[5000];
    printf("part is bytes 10..5010: %s\n",
           pread(part, back, sizeof back, 0) == sizeof back && !memcmp(back, data + 10, sizeof back) ? "yes" : "no");
    /* From a kernel file into the pool (capped by its end). */
    int dst = make(argv[1], "dst", O_WRONLY);
    lseek(kfd, 0, SEEK_SET);
    res("kernel to pool", sendfile(dst, kfd, NULL, 1 << 20));
    res("destination offset", lseek(dst, 0, SEEK_CUR));
    res("kernel source offset", lseek(kfd, 0, SEEK_CUR));
    int dr = make(argv[1], "dst", O_RDONLY);
    sum("pool copy", dr);
    off = 4000;
    res("kernel to pool at 4000", sendfile(dst, kfd, &off, 300));
    printf("offset now %ld, kernel file offset %ld, destination offset %ld\n", (long)off,
           (long)lseek(kfd, 0, SEEK_CUR), (long)lseek(dst, 0, SEEK_CUR));
    sum("pool copy after", dr);
    /* The end of the source. */
    off = 99990;
    res("past the end", sendfile(part, src, &off, 100));
    printf("offset now %ld\n", (long)off);
    res("at the end", sendfile(part, src, &off, 100));
    res("nothing asked", sendfile(part, src, NULL, 0));
    /* To a pipe. */
    int p[2];
    if (pipe(p)) { perror("pipe"); return 1; }
    off = 20;
    res("pool to pipe", sendfile(p[1], src, &off, 100));
    unsigned char b[200];
    res("pipe read", read(p[0], b, sizeof b));
    printf("pipe has bytes 20..120: %s\n", memcmp(b, data + 20, 100) ? "no" : "yes");
    /* Errors. */
    int wo = make(argv[1], "src", O_WRONLY);
    int ap = make(argv[1], "app", O_WRONLY | O_APPEND);
    int dir = open(argv[1], O_RDONLY | O_DIRECTORY);
    int path = open(argv[1], O_PATH);
    res("write-only input", sendfile(kfd, wo, NULL, 10));
    res("read-only output", sendfile(dr, src, NULL, 10));
    res("closed input", sendfile(dst, 999, NULL, 10));
    res("closed output", sendfile(999, src, NULL, 10));
    off = -1;
    res("negative offset", sendfile(kfd, src, &off, 10));
    res("append output", sendfile(ap, src, NULL, 10));
    res("directory input", sendfile(kfd, dir, NULL, 10));
    res("O_PATH input", sendfile(kfd, path, NULL, 10));
    res("to itself", sendfile(part, part, NULL, 10));
    sum("part at the end", part);
    return 0;
}
"#,
    );
    let out = same_as_tmpfs(&r, &exe);
    assert!(
        out.contains("pool to kernel: 100000\nsource offset: 100000\n")
            && out.contains("kernel copy: 100000 bytes, sum ef86682b316ac7b0\n")
            && out.contains("offset now 5010, file offset 3\n")
            && out.contains("part is bytes 10..5010: yes\n")
            && out.contains("pool copy: 100000 bytes, sum ef86682b316ac7b0\n")
            && out.contains(
                "offset now 4300, kernel file offset 100000, destination offset 100300\n"
            )
            && out.contains("past the end: 10\n")
            && out.contains("pipe has bytes 20..120: yes\n")
            && out.contains("write-only input: -1 Bad file descriptor\n")
            && out.contains("append output: -1 Invalid argument\n")
            && out.contains("directory input: -1 Invalid argument\n"),
        "{out}"
    );
    fsck_clean(&r);
}

/// Python's `shutil.copyfile` (which copies with `sendfile`) into the
/// pool and back out, and `os.sendfile` from one file of the pool to
/// another at an offset: the bytes arrive intact.
#[test]
fn python_copyfile_copies_in_and_out_of_the_pool() {
    if !have("python3") {
        eprintln!("python3 is not installed: skipped");
        return;
    }
    let r = Run::new();
    let big = r.kernel("big");
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let data: Vec<u8> = (0..3_000_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(&big, &data).unwrap();
    let script = "import os, shutil, sys
shutil.copyfile(sys.argv[1], sys.argv[2])
shutil.copyfile(sys.argv[2], sys.argv[3])
with open(sys.argv[2], 'rb') as i, open(sys.argv[4], 'wb') as o:
    print(os.sendfile(o.fileno(), i.fileno(), 5, 1000))
with open(sys.argv[4], 'rb') as part, open(sys.argv[1], 'rb') as src:
    print(part.read() == src.read()[5:1005])
";
    let out = quiet_ok(
        &r,
        &[
            "python3",
            "-c",
            script,
            &big,
            &r.at("big"),
            &r.kernel("out"),
            &r.at("part"),
        ],
    );
    assert_eq!(out, "1000\nTrue\n");
    assert!(
        std::fs::read(r.kernel("out")).unwrap() == data,
        "the copy out differs"
    );
    fsck_clean(&r);
}

/// `splice` between a pipe and a file in the pool, both ways: at the file
/// offset or an offset pointer, at most a pipe-full, `SPLICE_F_NONBLOCK`
/// on an empty pipe, end of file and a pipe without writers, and the
/// errors (`ESPIPE` for an offset on the pipe, `EINVAL` for two files,
/// unknown flags, a negative offset or an `O_APPEND` output, `EBADF`), as
/// on tmpfs.
#[test]
fn splice_moves_bytes_between_a_pipe_and_the_pool() {
    let r = Run::new();
    let exe = c_program_with_helpers(
        &r,
        "splice",
        r#"
int main(int argc, char **argv) {
    static unsigned char data[100000], b[100000];
    for (int i = 0; i < (int)sizeof data; i++) data[i] = i * 13 % 253;
    int src = make(argv[1], "src", O_RDWR);
    if (write(src, data, sizeof data) != sizeof data) { perror("write"); return 1; }
    lseek(src, 0, SEEK_SET);
    int p[2];
    if (pipe(p)) { perror("pipe"); return 1; }
    /* File to pipe at the file offset. */
    res("file to pipe", splice(src, NULL, p[1], NULL, 4096, 0));
    res("file offset", lseek(src, 0, SEEK_CUR));
    res("pipe read", read(p[0], b, sizeof b));
    printf("bytes 0..4096: %s\n", memcmp(b, data, 4096) ? "no" : "yes");
    /* File to pipe at an offset pointer: it moves, the file offset stays. */
    loff_t off = 100;
    res("file at 100 to pipe", splice(src, &off, p[1], NULL, 50, 0));
    printf("offset now %lld, file offset %ld\n", (long long)off, (long)lseek(src, 0, SEEK_CUR));
    res("pipe read", read(p[0], b, sizeof b));
    printf("bytes 100..150: %s\n", memcmp(b, data + 100, 50) ? "no" : "yes");
    /* More than the pipe holds: one pipe-full. */
    int cap = fcntl(p[1], F_GETPIPE_SZ);
    off = 0;
    long big = splice(src, &off, p[1], NULL, 1 << 20, 0);
    printf("a pipe-full at most: %s\n", big > 0 && big <= cap ? "yes" : "no");
    for (long left = big, n; left > 0; left -= n)
        if ((n = read(p[0], b, left)) <= 0) { perror("drain"); return 1; }
    /* Pipe to file at the file offset, then at an offset pointer. */
    int dst = make(argv[1], "dst", O_RDWR);
    if (write(p[1], "abcdefghijklmnopqrstuvwxyz0123", 30) != 30) { perror("write pipe"); return 1; }
    res("pipe to file", splice(p[0], NULL, dst, NULL, 1000, 0));
    res("destination offset", lseek(dst, 0, SEEK_CUR));
    if (write(p[1], "0123456789", 10) != 10) { perror("write pipe"); return 1; }
    off = 100;
    res("pipe to file at 100", splice(p[0], NULL, dst, &off, 4, 0));
    printf("offset now %lld, file offset %ld\n", (long long)off, (long)lseek(dst, 0, SEEK_CUR));
    res("the rest to the offset", splice(p[0], NULL, dst, NULL, 100, SPLICE_F_MOVE | SPLICE_F_MORE));
    struct stat st;
    fstat(dst, &st);
    memset(b, 0, sizeof b);
    res("destination read", pread(dst, b, sizeof b, 0));
    printf("size %ld, at 0 [%.36s], at 100 [%.4s], between zeros: %s\n", (long)st.st_size, b, b + 100,
           b[36] == 0 && b[99] == 0 ? "yes" : "no");
    /* The end of the file, an empty pipe. */
    off = sizeof data;
    res("at the end", splice(src, &off, p[1], NULL, 10, 0));
    res("empty pipe, no wait", splice(p[0], NULL, dst, NULL, 10, SPLICE_F_NONBLOCK));
    /* Errors. */
    off = 0;
    res("offset for the pipe", splice(p[0], &off, dst, NULL, 10, 0));
    res("offset for the pipe out", splice(src, NULL, p[1], &off, 10, 0));
    res("file to file", splice(src, NULL, dst, NULL, 10, 0));
    res("nothing asked", splice(src, NULL, dst, NULL, 0, 0));
    res("unknown flag", splice(src, NULL, p[1], NULL, 10, 1 << 6));
    off = -5;
    res("negative offset", splice(src, &off, p[1], NULL, 10, 0));
    int wo = make(argv[1], "src", O_WRONLY);
    res("write-only input", splice(wo, NULL, p[1], NULL, 10, 0));
    int ro = make(argv[1], "dst", O_RDONLY);
    if (write(p[1], "x", 1) != 1) return 1;
    res("read-only output", splice(p[0], NULL, ro, NULL, 10, 0));
    int ap = make(argv[1], "dst", O_WRONLY | O_APPEND);
    res("append output", splice(p[0], NULL, ap, NULL, 10, 0));
    res("wrong pipe end", splice(src, NULL, p[0], NULL, 10, 0));
    res("closed descriptor", splice(999, NULL, dst, NULL, 10, 0));
    /* A pipe whose writers are gone: end of file. */
    int q[2];
    if (pipe(q)) return 1;
    close(q[1]);
    res("pipe without writers", splice(q[0], NULL, dst, NULL, 10, 0));
    return 0;
}
"#,
    );
    let out = same_as_tmpfs(&r, &exe);
    assert!(
        out.contains("file to pipe: 4096\nfile offset: 4096\npipe read: 4096\nbytes 0..4096: yes\n")
            && out.contains("offset now 150, file offset 4096\n")
            && out.contains("a pipe-full at most: yes\n")
            && out.contains("pipe to file: 30\ndestination offset: 30\n")
            && out.contains("offset now 104, file offset 30\n")
            && out.contains("size 104, at 0 [abcdefghijklmnopqrstuvwxyz0123456789], at 100 [0123], between zeros: yes\n")
            && out.contains("empty pipe, no wait: -1 Resource temporarily unavailable\n")
            && out.contains("offset for the pipe: -1 Illegal seek\n")
            && out.contains("file to file: -1 Invalid argument\n")
            && out.contains("append output: -1 Invalid argument\n")
            && out.contains("pipe without writers: 0\n"),
        "{out}"
    );
    fsck_clean(&r);
}

/// File calls made through `syscall(SYS_...)` instead of glibc's
/// wrappers: served in the pool (the directory never appears in the
/// kernel's tree), with the results and errors tmpfs gives; calls outside
/// the directory, and other numbers, reach the kernel unchanged.
#[test]
fn raw_syscalls_on_the_pool_are_served_as_on_tmpfs() {
    let r = Run::new();
    let exe = c_program_with_helpers(
        &r,
        "raw_syscalls",
        r#"
/* The names getdents64 gives for the directory at `fd`, sorted. */
static void names(const char *what, int fd) {
    char buf[4096] __attribute__((aligned(8)));
    char *seen[64];
    int n = 0;
    long got;
    while ((got = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0)
        for (long at = 0; at < got && n < 64;) {
            struct dirent64 *e = (struct dirent64 *)(buf + at);
            seen[n++] = strdup(e->d_name);
            at += e->d_reclen;
        }
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (strcmp(seen[j], seen[i]) < 0) { char *t = seen[i]; seen[i] = seen[j]; seen[j] = t; }
    printf("%s:", what);
    for (int i = 0; i < n; i++) { printf(" %s", seen[i]); free(seen[i]); }
    printf("\n");
}
int main(int argc, char **argv) {
    char p[4096], q[4096], buf[64];
    struct stat st;
    if (syscall(SYS_chdir, argv[1])) { perror("chdir"); return 1; }
    snprintf(p, sizeof p, "%s/f", argv[1]);
    long fd = syscall(SYS_openat, AT_FDCWD, p, O_RDWR | O_CREAT | O_TRUNC, 0644);
    res("openat", fd < 0 ? fd : 0);
    res("write", syscall(SYS_write, fd, "hello, world", 12));
    res("pwrite64", syscall(SYS_pwrite64, fd, "W", 1, 7));
    res("lseek", syscall(SYS_lseek, fd, 0, SEEK_SET));
    memset(buf, 0, sizeof buf);
    res("read", syscall(SYS_read, fd, buf, sizeof buf));
    printf("contents: %s\n", buf);
    memset(buf, 0, sizeof buf);
    res("pread64", syscall(SYS_pread64, fd, buf, 5, 7));
    printf("at 7: %s\n", buf);
    struct iovec iv[2] = {{"ab", 2}, {"cd", 2}};
    res("writev", syscall(SYS_writev, fd, iv, 2));
    char x[3] = {0}, y[3] = {0};
    struct iovec rv[2] = {{x, 2}, {y, 2}};
    syscall(SYS_lseek, fd, 12, SEEK_SET);
    res("readv", syscall(SYS_readv, fd, rv, 2));
    printf("readv: %s %s\n", x, y);
    res("fsync", syscall(SYS_fsync, fd));
    res("fdatasync", syscall(SYS_fdatasync, fd));
    res("fstat", syscall(SYS_fstat, fd, &st));
    printf("size %ld regular %d\n", (long)st.st_size, S_ISREG(st.st_mode));
    res("ftruncate", syscall(SYS_ftruncate, fd, 5));
    res("fallocate", syscall(SYS_fallocate, fd, 0, 0, 100));
    res("newfstatat", syscall(SYS_newfstatat, AT_FDCWD, "f", &st, 0));
    printf("size %ld\n", (long)st.st_size);
    struct statx sx;
    res("statx", syscall(SYS_statx, AT_FDCWD, p, 0, STATX_SIZE, &sx));
    printf("statx size %llu\n", (unsigned long long)sx.stx_size);
    res("statx of the descriptor", syscall(SYS_statx, fd, "", AT_EMPTY_PATH, STATX_SIZE, &sx));
    printf("statx size %llu\n", (unsigned long long)sx.stx_size);
    long flags = syscall(SYS_fcntl, fd, F_GETFL);
    printf("F_GETFL access mode read-write: %d\n", (int)(flags & O_ACCMODE) == O_RDWR);
    long d = syscall(SYS_dup, fd);
    res("dup read at 0", syscall(SYS_pread64, d, buf, 5, 0));
    long d3 = syscall(SYS_dup3, fd, 40, O_CLOEXEC);
    res("dup3", d3);
    res("dup3 FD_CLOEXEC", syscall(SYS_fcntl, 40, F_GETFD));
    res("mkdirat", syscall(SYS_mkdirat, AT_FDCWD, "sub", 0755));
    res("symlinkat", syscall(SYS_symlinkat, "f", AT_FDCWD, "link"));
    memset(buf, 0, sizeof buf);
    res("readlinkat", syscall(SYS_readlinkat, AT_FDCWD, "link", buf, sizeof buf));
    printf("link: %s\n", buf);
    res("renameat2", syscall(SYS_renameat2, AT_FDCWD, "f", AT_FDCWD, "sub/g", 0));
    res("renameat2 NOREPLACE taken", syscall(SYS_renameat2, AT_FDCWD, "link", AT_FDCWD, "sub/g", 1));
    res("faccessat", syscall(SYS_faccessat, AT_FDCWD, "sub/g", R_OK));
    res("faccessat missing", syscall(SYS_faccessat, AT_FDCWD, "f", F_OK));
    res("faccessat2", syscall(SYS_faccessat2, AT_FDCWD, "link", F_OK, AT_SYMLINK_NOFOLLOW));
    long dir = syscall(SYS_open, argv[1], O_RDONLY | O_DIRECTORY);
    names("entries", dir);
    long sub = syscall(SYS_openat, dir, "sub", O_RDONLY | O_DIRECTORY);
    names("sub entries", sub);
    snprintf(q, sizeof q, "%s/copy", argv[1]);
    long cp = syscall(SYS_open, q, O_WRONLY | O_CREAT, 0600);
    off_t off = 0;
    res("sendfile", syscall(SYS_sendfile, cp, fd, &off, 100));
    printf("offset now %ld\n", (long)off);
    res("unlinkat", syscall(SYS_unlinkat, AT_FDCWD, "link", 0));
    res("unlinkat a directory", syscall(SYS_unlinkat, dir, "sub", AT_REMOVEDIR));
    res("unlinkat missing", syscall(SYS_unlinkat, AT_FDCWD, "link", 0));
    res("close", syscall(SYS_close, d));
    res("close again", syscall(SYS_close, d));
    res("read closed", syscall(SYS_read, d, buf, 1));
    res("close_range", syscall(SYS_close_range, d3, d3, 0));
    res("fstat closed", syscall(SYS_fstat, d3, &st));
    /* Kernel calls through syscall: unchanged. */
    res("getpid", syscall(SYS_getpid) == getpid() ? 0 : -1);
    fflush(stdout);
    res("write to stdout", syscall(SYS_write, 1, "kernel line\n", 12));
    res("stat outside", syscall(SYS_stat, "/", &st));
    printf("outside is a directory: %d\n", S_ISDIR(st.st_mode));
    res("open missing outside", syscall(SYS_open, "/nonexistent-manyfs", O_RDONLY));
    return 0;
}
"#,
    );
    let out = same_as_tmpfs(&r, &exe);
    assert!(
        out.contains("contents: hello, World\n")
            && out.contains("readv: ab cd\n")
            && out.contains("statx of the descriptor: 0\nstatx size 100\n")
            && out.contains("dup3 FD_CLOEXEC: 1\n")
            && out.contains("link: f\n")
            && out.contains("renameat2 NOREPLACE taken: -1 File exists\n")
            && out.contains("entries: . .. link sub\nsub entries: . .. g\n")
            && out.contains("sendfile: 100\n")
            && out.contains("unlinkat a directory: -1 Directory not empty\n")
            && out.contains("read closed: -1 Bad file descriptor\n")
            && out.contains("fstat closed: -1 Bad file descriptor\n")
            && out.contains("kernel line\nwrite to stdout: 12\n")
            && out.contains("open missing outside: -1 No such file or directory\n"),
        "{out}"
    );
    assert!(!r.at.exists(), "the calls reached the kernel's tree");
    let copy = quiet_ok(&r, &["cat", &r.at("sub/g"), &r.at("copy")]);
    assert_eq!(copy.len(), 200, "{copy:?}");
    fsck_clean(&r);
}

/// `read`, `write`, `pread` and `pwrite` on a file in the pool with a
/// null buffer: `EFAULT` when there are bytes to move (after the
/// descriptor's own checks), 0 for none (a length of 0, a read at or past
/// the end of file), as on tmpfs.
#[test]
fn null_buffers_are_efault_as_on_tmpfs() {
    let r = Run::new();
    let exe = c_program_with_helpers(
        &r,
        "null_buffers",
        r#"
int main(int argc, char **argv) {
    char p[4096];
    snprintf(p, sizeof p, "%s/f", argv[1]);
    int fd = open(p, O_RDWR | O_CREAT, 0644);
    if (fd < 0 || write(fd, "some bytes", 10) != 10) { perror(p); return 1; }
    lseek(fd, 0, SEEK_SET);
    /* Null, out of the compiler's sight (it refuses a literal one). */
    void *volatile null_source = NULL;
    void *null = null_source;
    res("read", read(fd, null, 4));
    res("write", write(fd, null, 4));
    res("pread", pread(fd, null, 4, 0));
    res("pwrite", pwrite(fd, null, 4, 0));
    res("read nothing", read(fd, null, 0));
    res("write nothing", write(fd, null, 0));
    res("offset unmoved", lseek(fd, 0, SEEK_CUR));
    int ro = open(p, O_RDONLY);
    res("write on read-only", write(ro, null, 4));
    int dir = open(argv[1], O_RDONLY | O_DIRECTORY);
    res("read a directory", read(dir, null, 4));
    /* At or past the end of file nothing is copied: 0. */
    res("pread at the end", pread(fd, null, 4, 10));
    res("pread past the end", pread(fd, null, 4, 100));
    lseek(fd, 0, SEEK_END);
    res("read at the end", read(fd, null, 4));
    char buf[16] = {0};
    res("contents", pread(fd, buf, sizeof buf, 0));
    printf("%s\n", buf);
    return 0;
}
"#,
    );
    let out = same_as_tmpfs(&r, &exe);
    assert!(
        out.contains("read: -1 Bad address\nwrite: -1 Bad address\n")
            && out.contains("pread: -1 Bad address\npwrite: -1 Bad address\n")
            && out.contains("read nothing: 0\nwrite nothing: 0\noffset unmoved: 0\n")
            && out.contains("write on read-only: -1 Bad file descriptor\n")
            && out.contains("pread at the end: 0\npread past the end: 0\nread at the end: 0\n")
            && out.contains("some bytes\n"),
        "{out}"
    );
}

/// `getdents64` gives `..` the parent directory's inode (as `stat` of
/// the parent shows it), also after the directory moved, as on tmpfs.
#[test]
fn getdents64_gives_dotdot_the_parent_inode() {
    let r = Run::new();
    let exe = c_program_with_helpers(
        &r,
        "dotdot",
        r#"
/* The inode getdents64 gives `name` in the directory `dir`. */
static unsigned long long ino_of(const char *dir, const char *name) {
    char buf[4096] __attribute__((aligned(8)));
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    long n = getdents64(fd, buf, sizeof buf);
    close(fd);
    for (long at = 0; at < n;) {
        struct dirent64 *e = (struct dirent64 *)(buf + at);
        if (!strcmp(e->d_name, name)) return e->d_ino;
        at += e->d_reclen;
    }
    return 0;
}
static void check(const char *dir, const char *parent) {
    struct stat self, up;
    if (stat(dir, &self) || stat(parent, &up)) { perror(dir); return; }
    printf("%s: . is itself %s, .. is its parent %s\n", dir + strlen(dir) - 1,
           ino_of(dir, ".") == self.st_ino ? "yes" : "no",
           ino_of(dir, "..") == up.st_ino ? "yes" : "no");
}
int main(int argc, char **argv) {
    char a[4096], b[4096];
    snprintf(a, sizeof a, "%s/a", argv[1]);
    snprintf(b, sizeof b, "%s/a/b", argv[1]);
    if (mkdir(a, 0755) || mkdir(b, 0755)) { perror("mkdir"); return 1; }
    check(a, argv[1]);
    check(b, a);
    char c[4096];
    snprintf(c, sizeof c, "%s/c", argv[1]);
    if (rename(b, c)) { perror("rename"); return 1; }
    check(c, argv[1]);
    return 0;
}
"#,
    );
    let out = same_as_tmpfs(&r, &exe);
    assert_eq!(
        out,
        "a: . is itself yes, .. is its parent yes\n\
         b: . is itself yes, .. is its parent yes\n\
         c: . is itself yes, .. is its parent yes\n"
    );
}

/// Times before 1970 (which tmpfs takes) cannot be stored in the pool:
/// `utimensat` and `utimes` refuse them with `EOVERFLOW` and a line on
/// stderr, and leave the file's times as they were.
#[test]
fn times_before_1970_are_refused_with_eoverflow() {
    let r = Run::new();
    let f = r.at("f");
    let out = r
        .cmd(&[
            "sh",
            "-c",
            &format!(
                "touch -d @981158400 {f} && ! touch -d @-315619200 {f} && \
                 ! touch -m -d @-1 {f} && stat -c '%X %Y' {f}"
            ),
        ])
        .output()
        .unwrap();
    check("touch before 1970", &out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "981158400 981158400\n"
    );
    assert!(
        err.contains("manyfs run: time -315619200.000000000 is outside what the pool stores")
            && err.contains("manyfs run: time -1.000000000 is outside")
            && err.contains("Value too large for defined data type"),
        "{err}"
    );
}

/// A program that closes every descriptor it did not open (a daemon's
/// start: `closefrom`, a `close` loop, the raw `close_range`), then fills
/// the low numbers with kernel files and `dup2`s onto every number, keeps
/// a working pool: the library's own descriptors (the pool's file, on a
/// disk file system here, written through its descriptor) sit at 256 or
/// above, are not closed, and `dup2` onto one is `EBUSY`. No kernel file
/// gets a byte of the pool's, and the pool holds what was written before
/// and after, `fsck` clean.
#[test]
fn closing_every_descriptor_leaves_the_pool_its_own() {
    let r = Run::new();
    let exe = c_program_with_helpers(
        &r,
        "close_all",
        r#"
#define KFILES 300
int main(int argc, char **argv) {
    static char big[8192], back[8192];
    char p[4096], q[4096];
    memset(big, 'A', sizeof big);
    int fd = make(argv[1], "before", O_RDWR);
    if (write(fd, big, sizeof big) != sizeof big || fsync(fd)) { perror("before"); return 1; }
    close(fd);
    closefrom(3);
    for (int i = 3; i < 1024; i++) close(i);
    syscall(SYS_close_range, 3, ~0U, 0);
    int kfd[KFILES];
    for (int i = 0; i < KFILES; i++) {
        snprintf(q, sizeof q, "k%d", i);
        kfd[i] = make(argv[2], q, O_RDWR);
    }
    int busy = 0;
    for (int i = 3; i < 1024; i++)
        if (dup2(kfd[0], i) < 0 && errno == EBUSY) busy++;
    printf("dup2 refused: %s\n", busy > 0 ? "some" : "none");
    memset(big, 'B', sizeof big);
    fd = make(argv[1], "after", O_RDWR);
    res("write after", write(fd, big, sizeof big));
    res("fsync after", fsync(fd));
    close(fd);
    snprintf(p, sizeof p, "%s/before", argv[1]);
    fd = open(p, O_RDONLY);
    res("read before", read(fd, back, sizeof back));
    int intact = 1;
    for (size_t i = 0; i < sizeof back; i++) intact &= back[i] == 'A';
    printf("before: %s\n", intact ? "intact" : "damaged");
    long bytes = 0;
    for (int i = 0; i < KFILES; i++) {
        struct stat st;
        snprintf(q, sizeof q, "%s/k%d", argv[2], i);
        if (stat(q, &st) == 0) bytes += st.st_size;
    }
    printf("bytes in kernel files: %ld\n", bytes);
    return 0;
}
"#,
    );
    let kdir = r.kernel("kfiles");
    std::fs::create_dir_all(&kdir).unwrap();
    let run = r
        .cmd(&[&exe, &r.at.display().to_string(), &kdir])
        .output()
        .unwrap();
    check("close_all", &run);
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(
        err.contains("holds the pool's file: dup2/dup3 onto it is refused (EBUSY)"),
        "{err}"
    );
    let out = String::from_utf8_lossy(&run.stdout);
    assert_eq!(
        out,
        "dup2 refused: some\nwrite after: 8192\nfsync after: 0\nread before: 8192\n\
         before: intact\nbytes in kernel files: 0\n",
        "{out}"
    );
    fsck_clean(&r);
    let after = r.ok(&format!(
        "cat {f} | tr -d B | wc -c; cat {f} | wc -c",
        f = r.at("after")
    ));
    assert_eq!(after, "0\n8192\n", "the file written after the closes");
}

/// A statically linked C program that says whether it could open its
/// argument; `None` (with the reason printed) when the static libc is
/// not installed (`libc6-dev`, scripts/install-deps.sh).
fn static_program(r: &Run) -> Option<String> {
    if !Path::new("/usr/lib/x86_64-linux-gnu/libc.a").exists() {
        eprintln!("skipped: no static libc (libc.a; install libc6-dev)");
        return None;
    }
    Some(c_program_with(
        r,
        "static",
        r#"
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int fd = argc > 1 ? open(argv[1], O_RDONLY) : -1;
    printf("%s\n", fd >= 0 ? "opened" : "missing");
    return 0;
}
"#,
        &["-static"],
    ))
}

/// `manyfs run`'s one line refusing `program` (run with `path` as
/// `PATH`): it names `names`, says why and points at `manyfs mount`; no
/// pool is made.
fn refused(r: &Run, program: &[&str], path: &str, names: &str, why: &str) {
    let out = r.cmd(program).env("PATH", path).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{program:?} ran: {err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(names) && err.contains(why) && err.contains("manyfs mount"),
        "{err}"
    );
    assert!(!r.pool.exists(), "a refused run made the pool");
}

/// `manyfs run` refuses a program its library cannot reach: a
/// statically linked one (by path, through `PATH`, or as the interpreter
/// of a script) and a Go one (when Go is installed); a script whose
/// interpreter is dynamic runs, its shell serving the pool.
#[test]
fn run_refuses_statically_linked_and_go_programs() {
    let r = Run::new();
    let path = std::env::var("PATH").unwrap_or_default();
    if let Some(st) = static_program(&r) {
        let x = r.at("x");
        refused(&r, &[&st, &x], &path, &st, "statically linked");
        let in_path = format!("{}:{path}", r.kernel(""));
        refused(&r, &["static", &x], &in_path, &st, "statically linked");
        let script = r.kernel("via-static");
        std::fs::write(&script, format!("#!{st}\n")).unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        refused(
            &r,
            &[&script],
            &path,
            &format!("{script}: its interpreter {st}"),
            "statically linked",
        );
    }
    if have("go") {
        let src = r.kernel("hello.go");
        std::fs::write(
            &src,
            "package main\nimport \"os\"\nfunc main() { _, err := os.ReadFile(os.Args[1]); println(err == nil) }\n",
        )
        .unwrap();
        let exe = r.kernel("hello");
        let out = Command::new("go")
            .args(["build", "-o", &exe, &src])
            .env("GOCACHE", r.kernel("gocache"))
            .env("GOPATH", r.kernel("gopath"))
            .env("HOME", r.kernel(""))
            .output()
            .unwrap();
        check("go build", &out);
        refused(&r, &[&exe, &r.at("x")], &path, &exe, "Go program");
    } else {
        eprintln!("skipped the Go program: go is not installed");
    }
    let script = r.kernel("script");
    std::fs::write(
        &script,
        "#!/bin/sh\necho hello > \"$1/f\"; read l < \"$1/f\"; echo \"$l\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(quiet_ok(&r, &[&script, &r.at("")]), "hello\n");
}

/// glibc's `mkstemp` family and `mkdtemp` create with calls of their
/// own that no interposition sees; under the directory they are served
/// here: unique names made from the template (suffix kept), the file
/// opened read-write with the flags asked for and mode 0600, the
/// directory mode 0700, `EINVAL` for a template without six `X`s. Then
/// git, whose first `git init` failed on its temporary files, makes a
/// repository and commits in the pool.
#[test]
fn temporary_names_are_made_in_the_pool() {
    let r = Run::new();
    let prog = checking_c_program(
        &r,
        "tempnames",
        r#"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
int main(int argc, char **argv) {
    char a[256], b[256], s[256], o[256], d[256], bad[256];
    snprintf(a, sizeof a, "%s/a.XXXXXX", argv[1]);
    snprintf(b, sizeof b, "%s/a.XXXXXX", argv[1]);
    snprintf(s, sizeof s, "%s/s.XXXXXX.log", argv[1]);
    snprintf(o, sizeof o, "%s/o.XXXXXX", argv[1]);
    snprintf(d, sizeof d, "%s/d.XXXXXX", argv[1]);
    snprintf(bad, sizeof bad, "%s/bad.XXXXX", argv[1]);
    int fa = mkstemp(a), fb = mkstemp(b);
    expect("mkstemp", fa >= 0 && fb >= 0 && strcmp(a, b) != 0);
    expect("the Xs replaced", strstr(a, "XXXXXX") == NULL);
    struct stat st;
    expect("mode 0600", fstat(fa, &st) == 0 && (st.st_mode & 0777) == 0600);
    expect("read-write", write(fa, "temp", 4) == 4 && pread(fa, bad, 4, 0) == 4
           && memcmp(bad, "temp", 4) == 0);
    int fs = mkstemps(s, 4);
    expect("mkstemps keeps the suffix", fs >= 0 && strcmp(s + strlen(s) - 4, ".log") == 0
           && strstr(s, "XXXXXX") == NULL);
    int fo = mkostemp(o, O_CLOEXEC | O_APPEND);
    expect("mkostemp", fo >= 0 && (fcntl(fo, F_GETFD) & FD_CLOEXEC)
           && (fcntl(fo, F_GETFL) & O_APPEND) && (fcntl(fo, F_GETFL) & O_ACCMODE) == O_RDWR);
    expect("mkdtemp", mkdtemp(d) == d && stat(d, &st) == 0 && S_ISDIR(st.st_mode)
           && (st.st_mode & 0777) == 0700);
    snprintf(bad, sizeof bad, "%s/bad.XXXXX", argv[1]);
    errno = 0;
    expect("EINVAL", mkstemp(bad) == -1 && errno == EINVAL);
    expect("EINVAL for mkdtemp", mkdtemp(bad) == NULL && errno == EINVAL);
    printf("%s\n%s\n", a, d);
    return fails != 0;
}
"#,
    );
    let out = quiet_ok(&r, &[&prog, &r.at("")]);
    let made: Vec<&str> = out.lines().collect();
    assert_eq!(made.len(), 2, "{out}");
    for path in &made {
        assert!(!Path::new(path).exists(), "{path} was made in the kernel");
    }
    // In the pool, seen by the next program of the run.
    let listed = quiet_ok(
        &r,
        &["sh", "-c", &format!("cat {}; ls -d {}", made[0], made[1])],
    );
    assert_eq!(listed, format!("temp{}\n", made[1]));
    if have("git") {
        let repo = r.at("repo");
        let script = format!(
            "git init -q {repo} && cd {repo} && echo one > f && git add f && \
             git -c user.email=u@h -c user.name=u commit -qm first && echo two >> f && \
             git -c user.email=u@h -c user.name=u commit -qam second && \
             git log --format=%s && git show HEAD:f"
        );
        assert_eq!(
            quiet_ok(&r, &["sh", "-c", &script]),
            "second\nfirst\none\ntwo\n"
        );
    } else {
        eprintln!("skipped git: not installed");
    }
    fsck_clean(&r);
}

/// A program stored in the pool runs: the kernel cannot load a file it
/// does not see, so an exec (by a shell's `execve`, `posix_spawn`, `make`)
/// of a path under the directory, or of a name `execvp` finds in a `PATH`
/// directory there, runs a memory copy of it, with its arguments and exit
/// status; a `#!` script too; without an execute bit it is `EACCES` (a
/// shell's 126), as on any file system.
#[test]
fn a_program_in_the_pool_runs() {
    let r = Run::new();
    let prog = c_program(
        &r,
        "args",
        r#"
#include <stdio.h>
int main(int argc, char **argv) {
    printf("args %d", argc);
    for (int i = 1; i < argc; i++) printf(" %s", argv[i]);
    printf("\n");
    return 7;
}
"#,
    );
    let spawner = spawner_program(&r, "posix_spawn");
    let (p, script) = (r.at("bin/args"), r.at("bin/hello.sh"));
    let setup = format!(
        "mkdir {bin} && cp {prog} {p} && printf '#!/bin/sh\necho script $1\n' > {script} && \
         chmod +x {script}",
        bin = r.at("bin")
    );
    quiet_ok(&r, &["sh", "-c", &setup]);
    let out = quiet_ok(
        &r,
        &[
            "sh",
            "-c",
            &format!("{p} a b; echo rc=$?; {script} z; {spawner} {p} c"),
        ],
    );
    assert_eq!(out, "args 3 a b\nrc=7\nscript z\nargs 2 c\nstatus 7\n");
    // Found through PATH by `execvp` (env, xargs): a directory of the
    // pool before the kernel's.
    let search = format!(
        "PATH={bin}:/usr/bin:/bin; export PATH; env args p; echo q | xargs hello.sh",
        bin = r.at("bin")
    );
    assert_eq!(quiet_ok(&r, &["sh", "-c", &search]), "args 2 p\nscript q\n");
    if have("make") {
        let mk = format!(
            "cd {bin} && printf 'all:\\n\\t./hello.sh n\\n\\t./args m\\n' > Makefile && make -s",
            bin = r.at("bin")
        );
        let out = r.cmd(&["sh", "-c", &mk]).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "script n\nargs 2 m\n");
        assert!(!out.status.success(), "args exits 7: make stops there");
    }
    let denied = r
        .cmd(&["sh", "-c", &format!("chmod -x {p}; {p}; echo rc=$?")])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&denied.stdout), "rc=126\n");
    assert!(
        String::from_utf8_lossy(&denied.stderr).contains("ermission denied"),
        "{}",
        String::from_utf8_lossy(&denied.stderr)
    );
    fsck_clean(&r);
}

/// A `#!` script in the pool runs as the kernel runs one: its
/// interpreter gets the interpreter line's argument and the path the
/// script was run by, so `$0` is that path (a script that finds its files
/// beside itself, as `configure` does, finds them), through `execve`,
/// `posix_spawn` and `PATH`; an interpreter that is itself a script in
/// the pool is followed, and one that names itself fails with `ELOOP`.
#[test]
fn a_script_in_the_pool_is_run_by_its_path() {
    let r = Run::new();
    let spawner = spawner_program(&r, "posix_spawnp");
    let (tool, bin) = (r.at("tool"), r.at("bin"));
    let setup = format!(
        "mkdir {tool} {bin} && cd {tool} && echo beside > data.txt && \
         printf '#!/bin/sh\necho \"me=$0 args=$*\"\ncat \"$(dirname \"$0\")/data.txt\"\n' > configure && \
         printf '#! /bin/sh  -e \nfalse\necho not reached\n' > strict && \
         printf '#!/usr/bin/env sh\necho env-run $1\n' > via-env && \
         printf '#!/bin/sh\necho wrap \"$@\"\n' > {bin}/wrap && \
         printf '#!{bin}/wrap -w\n' > wrapped && \
         printf '#!{tool}/loop\n' > loop && \
         chmod +x configure strict via-env {bin}/wrap wrapped loop"
    );
    quiet_ok(&r, &["sh", "-c", &setup]);
    let script = format!(
        "cd {tool} && ./configure a 'b c'; echo rc=$?; ./strict; echo rc=$?; ./via-env e; \
         ./wrapped x; ./loop; echo rc=$?; {spawner} {tool}/configure s"
    );
    let out = r.cmd(&["sh", "-c", &script]).output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    // The shell's status for a script whose interpreter names itself, as
    // the kernel fails it (dash says 127, bash 126).
    let native = tempfile::tempdir().unwrap();
    let native_loop = native.path().join("loop");
    std::fs::write(&native_loop, format!("#!{}\n", native_loop.display())).unwrap();
    std::fs::set_permissions(&native_loop, std::fs::Permissions::from_mode(0o755)).unwrap();
    let native_rc = Command::new("sh")
        .args([
            "-c",
            &format!("{} 2>/dev/null; echo rc=$?", native_loop.display()),
        ])
        .output()
        .unwrap();
    let native_rc = String::from_utf8_lossy(&native_rc.stdout);
    assert_eq!(
        stdout,
        format!(
            "me=./configure args=a b c\nbeside\nrc=0\nrc=1\nenv-run e\n\
             wrap -w ./wrapped x\n{native_rc}\
             me={tool}/configure args=s\nbeside\nstatus 0\n"
        ),
        "stderr: {stderr}"
    );
    assert!(stderr.contains("symbolic links"), "ELOOP: {stderr}");
    // Found through PATH by `execvp` and `posix_spawnp`.
    let search =
        format!("PATH={tool}:/usr/bin:/bin; export PATH; env configure p; {spawner} configure q");
    assert_eq!(
        quiet_ok(&r, &["sh", "-c", &search]),
        format!(
            "me={tool}/configure args=p\nbeside\nme={tool}/configure args=q\nbeside\nstatus 0\n"
        )
    );
    fsck_clean(&r);
}

/// A symlink in the pool leads where the kernel would take it on a mount:
/// an absolute target outside DIR to the kernel's file (read, listed,
/// created through, run), one inside DIR back into the pool, and a
/// relative one that climbs above DIR to DIR's parent; `realpath` names
/// where each leads. Python's `venv` (whose `bin/python3` is such a
/// symlink) works.
#[test]
fn symlinks_in_the_pool_lead_where_a_mounts_would() {
    let r = Run::new();
    let outside = r.kernel("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(format!("{outside}/o.txt"), "outside-data\n").unwrap();
    let at = r.at("");
    let at = at.trim_end_matches('/');
    let script = format!(
        "cd {at} && ln -s {outside} od && ln -s {outside}/made made && ln -s /bin/echo ech && \
         echo inpool > data && ln -s {at}/data self && mkdir sub && ln -s ../../outside sub/up && \
         cat od/o.txt && ls od && echo new > made && cat self && echo more >> self && cat data && \
         cat sub/up/o.txt && ./ech run-through-link && \
         realpath od/o.txt sub/up self && cd od && /bin/pwd && cat made"
    );
    let out = quiet_ok(&r, &["sh", "-c", &script]);
    assert_eq!(
        out,
        format!(
            "outside-data\no.txt\ninpool\ninpool\nmore\noutside-data\n\
             run-through-link\n{outside}/o.txt\n{outside}\n{at}/data\n{outside}\nnew\n"
        )
    );
    assert_eq!(
        std::fs::read_to_string(format!("{outside}/made")).unwrap(),
        "new\n"
    );
    assert!(
        !Path::new(&format!("{at}/data")).exists(),
        "the pool's file"
    );
    // Rename and link through symlinks: through an absolute link back into
    // the pool they stay in the pool; both sides in the kernel, the
    // kernel's; one on each side, EXDEV.
    let names = checking_c_program(
        &r,
        "names",
        r#"
#include <fcntl.h>
#include <unistd.h>
int main(void) {
    expect("rename through a link into the pool", rename("back/x", "back/y") == 0);
    expect("renamed in the pool", access("real/y", F_OK) == 0 && access("real/x", F_OK) == -1);
    expect("link through a link into the pool", link("back/y", "real/z") == 0);
    expect("rename in the kernel", rename("od/o.txt", "od/o2.txt") == 0);
    expect("link in the kernel", link("od/o2.txt", "od/o3.txt") == 0);
    expect("rename out of the pool is EXDEV", rename("real/y", "od/y") == -1 && errno == EXDEV);
    expect("rename into the pool is EXDEV", rename("od/o3.txt", "back/o3") == -1 && errno == EXDEV);
    expect("rename through DIR/.. is the kernel's",
           rename("../outside/o3.txt", "../outside/o4.txt") == 0);
    expect("link through DIR/.. is the kernel's", link("../outside/o4.txt", "od/o5.txt") == 0);
    if (!fails) printf("ok\n");
    return fails != 0;
}
"#,
    );
    let script =
        format!("cd {at} && mkdir real && echo x > real/x && ln -s {at}/real back && {names}");
    assert_eq!(quiet_ok(&r, &["sh", "-c", &script]), "ok\n");
    assert!(Path::new(&format!("{outside}/o2.txt")).exists());
    assert!(Path::new(&format!("{outside}/o4.txt")).exists());
    assert!(Path::new(&format!("{outside}/o5.txt")).exists());
    let venv = format!(
        "cd {at} && python3 -m venv --without-pip env && env/bin/python3 -c 'import sys; print(sys.prefix)'"
    );
    if have("python3") {
        assert_eq!(quiet_ok(&r, &["sh", "-c", &venv]), format!("{at}/env\n"));
    }
    fsck_clean(&r);
}

/// A C program that opens `argv[1]` (creating it), holds it four seconds,
/// asleep (`argv[2]` is `sleep`: its CPU time stands still) or running
/// (`spin`), then writes `done` into it.
fn holder_program(r: &Run) -> String {
    c_program(
        r,
        "hold",
        r#"
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int fd = open(argv[1], O_CREAT | O_WRONLY, 0644);
    if (fd < 0 || argc < 3) return 1;
    if (strcmp(argv[2], "sleep") == 0) {
        sleep(4);
    } else {
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do clock_gettime(CLOCK_MONOTONIC, &t); while (t.tv_sec - t0.tv_sec < 4);
    }
    return write(fd, "done\n", 5) != 5 || close(fd);
}
"#,
    )
}

/// A process that finds the pool in use by another one of the run fails
/// its calls under DIR with `EBUSY` (said once), and never sends them to
/// the kernel: a relative path from its working directory in the pool
/// would otherwise name a file of the kernel's working directory,
/// somewhere else entirely (tar's compressor wrote its archive there).
#[test]
fn a_process_that_finds_the_pool_busy_fails_its_calls_under_dir() {
    let r = Run::new();
    let at = r.at("");
    let at = at.trim_end_matches('/');
    let hold = holder_program(&r);
    // The background job holds the pool (an open file, no fork, asleep)
    // while the shell writes a file relative to its working directory in
    // DIR.
    let script = format!(
        "cd {at} && {{ {hold} held sleep & }}; sleep 0.5; echo x > rel.txt; echo rc=$?; wait"
    );
    let (stdout, stderr) = r.bash_from_root(&script);
    assert_eq!(stdout, "rc=1\n", "stderr: {stderr}");
    assert!(stderr.contains("pool is in use by process"), "{stderr}");
    assert!(stderr.contains("fail (EBUSY)"), "{stderr}");
    assert!(
        stderr.contains("Device or resource busy"),
        "the shell's: {stderr}"
    );
    assert!(
        !r.root.join("rel.txt").exists(),
        "written in the kernel's working directory"
    );
    assert!(
        !Path::new(&format!("{at}/rel.txt")).exists(),
        "written in the kernel's DIR"
    );
    // The pool has the job's file, not the shell's.
    assert_eq!(r.ok(&format!("ls {at}")), "held\n");
    fsck_clean(&r);
}

/// Two processes that use DIR side by side (the compilers of `make -j`)
/// take turns: the one that finds the pool in use waits while its holder
/// runs, says once whom it waits for, and goes on when the holder is
/// done. (A holder that stalls ends the wait: the test above.)
#[test]
fn processes_that_use_dir_side_by_side_take_turns() {
    let r = Run::new();
    let at = r.at("");
    let at = at.trim_end_matches('/');
    let hold = holder_program(&r);
    // `b` starts once `a` holds the pool, and waits about 3.5 s for it.
    let script = format!(
        "cd {at} || exit 1; {hold} a spin & sleep 0.5; {hold} b spin & wait; cat {at}/a {at}/b"
    );
    let (stdout, stderr) = r.bash_from_root(&script);
    assert_eq!(stdout, "done\ndone\n", "stderr: {stderr}");
    assert!(
        stderr.contains("which has the pool in use and is running"),
        "{stderr}"
    );
    assert!(!stderr.contains("fail (EBUSY)"), "{stderr}");
    fsck_clean(&r);
}

/// A process reading a directory of the pool (`opendir`, Python's
/// `scandir`) lets the pool go when it runs a command meanwhile: the
/// stream holds its listing, and its descriptor is parked as a file's is,
/// so the command (here `cat` through `system`) can use the pool; the
/// stream then goes on, and its descriptor works again (`fstat`). So
/// does `find -exec`.
#[test]
fn a_command_run_while_a_directory_is_read_or_walked_can_use_the_pool() {
    let r = Run::new();
    let exe = checking_c_program(
        &r,
        "readdir-system",
        r#"
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
int main(int argc, char **argv) {
    DIR *d = opendir(argv[1]);
    if (!d) { perror("opendir"); return 1; }
    struct dirent *e;
    int files = 0, all = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "cat %s/%s", argv[1], e->d_name);
        fflush(stdout);
        expect("cat in the pool", system(cmd) == 0);
        files++;
    }
    expect("two files", files == 2);
    rewinddir(d);
    while (readdir(d)) all++;
    expect("four entries after rewinddir", all == 4);
    struct stat st;
    expect("fstat of its descriptor", fstat(dirfd(d), &st) == 0 && S_ISDIR(st.st_mode));
    expect("closedir", closedir(d) == 0);
    if (!fails) printf("ok\n");
    return fails != 0;
}
"#,
    );
    let dir = r.at("sc");
    let script = format!("mkdir {dir} && echo x > {dir}/a && echo x > {dir}/b && {exe} {dir}");
    assert_eq!(quiet_ok(&r, &["sh", "-c", &script]), "x\nx\nok\n");
    // `find -exec`: find's walk (served by this library's `fts`) holds
    // nothing of the pool between its calls, so the commands it runs
    // per file can use it.
    let find = format!(
        "find {dir} -type f -exec cat {{}} \\; && cd {dir} && find . -name a -exec wc -c {{}} +"
    );
    assert_eq!(quiet_ok(&r, &["sh", "-c", &find]), "x\nx\n2 ./a\n");
    fsck_clean(&r);
}

/// A program started through the dynamic loader (`ld.so PROGRAM`, as
/// bundled or relocated programs are) is served: the loader has no
/// program interpreter of its own, but it loads LD_PRELOAD into the
/// program it runs, so neither `manyfs run` nor an exec inside the run
/// takes it for a statically linked program.
#[test]
fn a_program_started_through_the_dynamic_loader_is_served() {
    let loader = "/lib64/ld-linux-x86-64.so.2";
    if !Path::new(loader).exists() {
        eprintln!("skipped: no {loader}");
        return;
    }
    let r = Run::new();
    let f = r.at("f");
    let printed = quiet_ok(
        &r,
        &[
            loader,
            "/bin/sh",
            "-c",
            &format!("echo loaded > {f}; cat {f}"),
        ],
    );
    assert_eq!(printed, "loaded\n");
    let printed = quiet_ok(&r, &["sh", "-c", &format!("{loader} /bin/cat {f}")]);
    assert_eq!(printed, "loaded\n", "the file is in the pool");
    assert!(!Path::new(&f).exists(), "the write reached the kernel");
    fsck_clean(&r);
}

/// Inside a run, an exec of a statically linked program is not refused:
/// when its arguments name a path under the directory, one line on
/// stderr says it cannot be served there (once per program in a
/// process), and it runs (the kernel knows nothing there); without such
/// an argument nothing is said.
#[test]
fn an_exec_of_a_static_program_naming_the_directory_warns_once() {
    let r = Run::new();
    let Some(st) = static_program(&r) else {
        return;
    };
    let warnings = |err: &str| {
        err.lines()
            .filter(|l| l.starts_with("manyfs run:") && l.contains(&st))
            .count()
    };
    // A shell runs it with an argument under the directory (itself, or
    // an option's value), or with none.
    let cases = [
        (r.at("x"), "missing\n", 1),
        (format!("--in={}", r.at("y")), "missing\n", 1),
        ("/etc/hostname".to_string(), "opened\n", 0),
    ];
    for (arg, printed, warned) in cases {
        let out = r
            .cmd(&["sh", "-c", &format!("{st} {arg}")])
            .output()
            .unwrap();
        check(&arg, &out);
        assert_eq!(String::from_utf8_lossy(&out.stdout), printed, "{arg}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(warnings(&err), warned, "{arg}: {err}");
        assert!(
            warned == 0 || (err.contains("statically linked") && err.contains("manyfs mount")),
            "{err}"
        );
    }
    // One process spawning it twice (and through PATH) warns once.
    let spawner = c_program(
        &r,
        "spawner",
        r#"
#include <spawn.h>
#include <stdio.h>
#include <sys/wait.h>
int main(int argc, char **argv) {
    char *args[] = {"static", argv[2], NULL};
    for (int i = 0; i < 2; i++) {
        pid_t pid;
        int st;
        int r = i ? posix_spawnp(&pid, "static", NULL, NULL, args, NULL)
                  : posix_spawn(&pid, argv[1], NULL, NULL, args, NULL);
        if (r || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) return 1;
    }
    return 0;
}
"#,
    );
    let out = r
        .cmd(&[&spawner, &st, &r.at("x")])
        .env(
            "PATH",
            format!(
                "{}:{}",
                r.kernel(""),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .output()
        .unwrap();
    check("spawner", &out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(warnings(&err), 1, "{err}");
}

/// Every exec replaces a process image whose memory holds the mount: what
/// the image wrote (through a descriptor, or stored in a shared mapping
/// and never synced) is there for the program it execs, and for a later
/// run. Each exec of the family is tried, the variadic ones with more
/// arguments than registers.
#[test]
fn an_exec_keeps_what_the_image_before_it_wrote() {
    let r = Run::new();
    // A shell's redirection, then `exec`.
    let out = quiet_ok(
        &r,
        &[
            "sh",
            "-c",
            &format!("echo hi > {0}; exec cat {0}", r.at("shell")),
        ],
    );
    assert_eq!(out, "hi\n");
    let writer = c_program(
        &r,
        "writer",
        r#"
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
extern char **environ;
int execveat(int, const char *, char *const[], char *const[], int);
/* argv: DIR KIND. Writes DIR/KIND through a descriptor and DIR/KIND.map
   through a shared mapping (no msync, no munmap), then execs cat of both
   (or echo of twelve words for "many"). */
int main(int argc, char **argv) {
    char p[512], m[512];
    snprintf(p, sizeof p, "%s/%s", argv[1], argv[2]);
    snprintf(m, sizeof m, "%s/%s.map", argv[1], argv[2]);
    int fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd < 0 || write(fd, "by descriptor\n", 14) != 14 || close(fd)) return 10;
    int mfd = open(m, O_CREAT | O_RDWR | O_TRUNC, 0644);
    if (mfd < 0 || ftruncate(mfd, 10)) return 11;
    char *map = mmap(NULL, 10, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
    if (map == MAP_FAILED) return 12;
    memcpy(map, "by mapping", 10);
    char *args[] = {"cat", p, m, NULL};
    const char *k = argv[2];
    if (!strcmp(k, "execl")) execl("/bin/cat", "cat", p, m, (char *)0);
    if (!strcmp(k, "execlp")) execlp("cat", "cat", p, m, (char *)0);
    if (!strcmp(k, "execle")) {
        /* The environment after the list reaches the new program. */
        int n = 0;
        while (environ[n]) n++;
        char **env = calloc(n + 2, sizeof *env);
        memcpy(env, environ, n * sizeof *env);
        env[n] = "FROM_EXECLE=yes";
        execle("/bin/sh", "sh", "-c", "cat \"$0\" \"$1\"; echo \"$FROM_EXECLE\"", p, m,
               (char *)0, env);
    }
    if (!strcmp(k, "execv")) execv("/bin/cat", args);
    if (!strcmp(k, "execvp")) execvp("cat", args);
    if (!strcmp(k, "execve")) execve("/bin/cat", args, environ);
    if (!strcmp(k, "execvpe")) execvpe("cat", args, environ);
    if (!strcmp(k, "fexecve")) {
        int cat = open("/bin/cat", O_RDONLY | O_CLOEXEC);
        fexecve(cat, args, environ);
    }
    if (!strcmp(k, "execveat")) execveat(AT_FDCWD, "/bin/cat", args, environ, 0);
    if (!strcmp(k, "many"))
        execl("/bin/echo", "echo", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11",
              "12", (char *)0);
    perror(k);
    return 1;
}
"#,
    );
    let both = "by descriptor\nby mapping";
    let kinds = [
        "execl", "execlp", "execle", "execv", "execvp", "execve", "execvpe", "fexecve", "execveat",
    ];
    for kind in kinds {
        let out = quiet_ok(&r, &[&writer, &r.at(""), kind]);
        let want = if kind == "execle" {
            format!("{both}yes\n")
        } else {
            both.to_string()
        };
        assert_eq!(out, want, "{kind}");
    }
    let out = quiet_ok(&r, &[&writer, &r.at(""), "many"]);
    assert_eq!(out, "1 2 3 4 5 6 7 8 9 10 11 12\n");
    // A later run finds every file as the exec'd programs did.
    for kind in kinds {
        let out = quiet_ok(&r, &["cat", &r.at(kind), &r.at(&format!("{kind}.map"))]);
        assert_eq!(out, both, "{kind}, read again");
    }
    fsck_clean(&r);
}

/// A shell's builtins print through glibc's `stdout`, whose writes are
/// glibc's own: with descriptor 1 (or 2) redirected into the pool they
/// reach it, and the shell's output goes back to the terminal after.
#[test]
fn shell_builtins_redirected_into_the_pool_write_there() {
    let r = Run::new();
    if !have("bash") {
        panic!("bash is not installed");
    }
    let (g, h, i) = (r.at("g"), r.at("h"), r.at("i"));
    let script = format!(
        "echo hi > {g}; printf '%s-%d\\n' x 5 >> {g}; read l < {g}; echo \"read: $l\"; \
         exec 3>{h}; echo to3 >&3; exec 3>&-; \
         {{ echo out; echo err >&2; }} > {i} 2>&1; echo back"
    );
    let out = quiet_ok(&r, &["bash", "-c", &script]);
    assert_eq!(out, "read: hi\nback\n");
    let out = quiet_ok(&r, &["cat", &g, &h, &i]);
    assert_eq!(out, "hi\nx-5\nto3\nout\nerr\n");

    // A C program: stdout onto a file of the pool by dup2 and by close and
    // open, a stream of fopen, each left for exit to flush; then stdout
    // back on the kernel's descriptor.
    let prog = c_program(
        &r,
        "std_streams",
        r#"
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
    char p[512];
    int saved = dup(1);
    snprintf(p, sizeof p, "%s/dup2", argv[1]);
    int fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (saved < 0 || fd < 0 || dup2(fd, 1) != 1 || close(fd)) return 2;
    printf("dup2 fileno %d\n", fileno(stdout));
    fflush(stdout);
    if (dup2(saved, 1) != 1) return 3;
    printf("on the terminal\n");
    fflush(stdout);
    snprintf(p, sizeof p, "%s/reopened", argv[1]);
    close(1);
    if (open(p, O_CREAT | O_WRONLY | O_TRUNC, 0644) != 1) return 4;
    printf("close and open\n");
    snprintf(p, sizeof p, "%s/fopen", argv[1]);
    FILE *f = fopen(p, "w");
    if (!f) return 5;
    fprintf(f, "via fopen\n");
    return 0;
}
"#,
    );
    let out = quiet_ok(&r, &[&prog, &r.at("")]);
    assert_eq!(out, "on the terminal\n");
    let out = quiet_ok(
        &r,
        &["cat", &r.at("dup2"), &r.at("reopened"), &r.at("fopen")],
    );
    assert_eq!(out, "dup2 fileno 1\nclose and open\nvia fopen\n");
    fsck_clean(&r);
}

/// A shell's commands on the pool: the shell lets the pool go before it
/// forks when it has nothing of it open, so each command mounts it in
/// turn; a command's redirection made in the child (bash) and the working
/// directory reach the program it execs; dash's `vfork` is a fork here.
#[test]
fn a_shell_runs_commands_that_each_use_the_pool() {
    let r = Run::new();
    let d = r.at.display().to_string();
    let script = format!(
        "printf 'b\\na\\nc\\n' > {d}/in; sort {d}/in > {d}/sorted; cat {d}/sorted; \
         cd {d} && ls; pwd; sort in >> sorted; wc -l < sorted; \
         mkdir -p t/u && cd t && echo deep > u/x && cat u/x && ls -R; \
         cd {d}; cat in | tr a-c A-C; grep -c . sorted; sort -o in2 in; xargs echo < in2"
    );
    let want = format!("a\nb\nc\nin\nsorted\n{d}\n6\ndeep\n.:\nu\n\n./u:\nx\nB\nA\nC\n6\na b c\n");
    let out = quiet_ok(&r, &["bash", "-c", &script]);
    assert_eq!(out, want);
    // dash: its builtins, the commands it forks, and their redirections,
    // which dash makes itself before it forks (the descriptor is parked:
    // the command opens it again, and a descriptor both use, `exec 3>`,
    // keeps one offset). Then dash leaves with `_exit`: what it wrote last
    // is there for the next run.
    let r2 = Run::new();
    let d2 = r2.at.display().to_string();
    let out = quiet_ok(
        &r2,
        &[
            "sh",
            "-c",
            &format!(
                "echo hi > {d2}/f; cat {d2}/f; cd {d2}; ls; wc -c f; cat f | tr h H; \
                 sort f > g; printf 'z\\ny\\n' | sort > h; sort h >> g; cat g; \
                 exec 3>log; echo one >&3; cat f >&3; echo two >&3; exec 3>&-; cat log; \
                 echo last > {d2}/last"
            ),
        ],
    );
    assert_eq!(out, "hi\nf\n3 f\nHi\nhi\ny\nz\none\nhi\ntwo\n");
    let out = quiet_ok(&r2, &["cat", &r2.at("last")]);
    assert_eq!(out, "last\n");
    // make runs each recipe line with sh (redirections into the pool).
    std::fs::write(
        r2.kernel("Makefile"),
        format!("all:\n\tprintf 'b\\na\\n' > {d2}/in\n\tsort {d2}/in > {d2}/out\n\tcat {d2}/out\n"),
    )
    .unwrap();
    let out = quiet_ok(&r2, &["make", "-s", "-f", &r2.kernel("Makefile")]);
    assert_eq!(out, "a\nb\n");
    // A descriptor inherited across exec and never used does not keep the
    // pool from the shell's commands.
    let out = quiet_ok(
        &r2,
        &[
            "bash",
            "-c",
            &format!("exec 7>{d2}/unused; sh -c 'cat {d2}/f; ls {d2}'"),
        ],
    );
    assert_eq!(out, "hi\nf\ng\nh\nin\nlast\nlog\nout\nunused\n");
    // Many turns in a row: each command mounts the pool after the shell
    // let it go (a pool file still open when the close returned, or a
    // thread counted as the program's while it exited, made one command
    // in a few hundred find the pool busy).
    for shell in ["bash", "sh"] {
        let out = quiet_ok(
            &r,
            &[
                shell,
                "-c",
                &format!("for i in $(seq 150); do echo $i > {d}/n$i; cat {d}/n$i; done"),
            ],
        );
        let want: String = (1..=150).map(|i| format!("{i}\n")).collect();
        assert_eq!(out, want, "{shell}");
    }
    // Everything is there for a later run, and the pool is clean.
    let out = quiet_ok(&r, &["cat", &r.at("sorted"), &r.at("in2"), &r.at("t/u/x")]);
    assert_eq!(out, "a\nb\nc\na\nb\nc\na\nb\nc\ndeep\n");
    fsck_clean(&r);
    fsck_clean(&r2);
}

/// glibc's `glob` and `fts` started above the directory (a kernel
/// directory that holds it, as a mount point) enter it: both are made with
/// this library's calls, which serve each path where it lives.
#[test]
fn glob_and_fts_from_above_the_directory_enter_it() {
    let r = Run::new();
    std::fs::create_dir(&r.at).unwrap();
    std::fs::create_dir(r.kernel("k")).unwrap();
    std::fs::write(r.kernel("k/x"), "k\n").unwrap();
    let prog = c_program(
        &r,
        "above",
        r#"
#include <sys/stat.h>
#include <fts.h>
#include <glob.h>
#include <stdio.h>
#include <string.h>
static int by_name(const FTSENT **a, const FTSENT **b) {
    return strcmp((*a)->fts_name, (*b)->fts_name);
}
int main(int argc, char **argv) {
    size_t n = strlen(argv[1]);
    char pat[4096];
    snprintf(pat, sizeof pat, "%s/*/x", argv[1]);
    glob_t g;
    if (glob(pat, 0, NULL, &g) != 0) return 2;
    for (size_t i = 0; i < g.gl_pathc; i++) printf("glob %s\n", g.gl_pathv[i] + n);
    globfree(&g);
    char *roots[] = {argv[1], NULL};
    FTS *f = fts_open(roots, FTS_PHYSICAL, by_name);
    if (!f) return 3;
    FTSENT *e;
    while ((e = fts_read(f)))
        if (e->fts_info == FTS_F && strcmp(e->fts_name, "x") == 0)
            printf("fts %s %lld\n", e->fts_path + n, (long long)e->fts_statp->st_size);
    return fts_close(f);
}
"#,
    );
    let root = r.kernel("");
    let root = root.trim_end_matches('/');
    let out = quiet_ok(
        &r,
        &[
            "sh",
            "-c",
            &format!(
                "echo pool > {0}/x; mkdir {0}/s; echo deep > {0}/s/x; {prog} {root}",
                r.at.display()
            ),
        ],
    );
    assert_eq!(
        out,
        "glob /k/x\nglob /mnt/x\nfts /k/x 2\nfts /mnt/s/x 5\nfts /mnt/x 5\n"
    );
}
