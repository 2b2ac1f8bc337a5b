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
    let exe = c_program(
        &r,
        "maps",
        r#"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
static int fails;
static void expect(const char *what, int ok) {
    if (!ok) { printf("FAIL %s (errno %d)\n", what, errno); fails++; }
}
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

/// `fcntl`'s write-life hints (`F_SET_RW_HINT`, which RocksDB sets on its
/// files, and `F_SET_FILE_RW_HINT`): stored, read back, range-checked.
#[test]
fn write_life_hints_are_kept_and_checked() {
    let r = Run::new();
    let exe = c_program(
        &r,
        "hints",
        r#"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>
#define GET_RW 1035
#define SET_RW 1036
#define GET_FILE_RW 1037
#define SET_FILE_RW 1038
static int fails;
static void expect(const char *what, int ok) {
    if (!ok) { printf("FAIL %s (errno %d)\n", what, errno); fails++; }
}
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
/// in the pool, `.`/`..`, a virtual working directory, the errors.
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
    if (symlink("a/b", at("/l")) || symlink("/a", at("/abs")) || symlink("loop", at("/loop"))
        || symlink("nowhere", at("/dangling")) || symlink("../..", at("/a/b/up"))) {
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
