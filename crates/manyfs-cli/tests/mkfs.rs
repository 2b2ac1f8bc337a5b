//! `manyfs mkfs` does not destroy an existing pool unless told to.

use std::path::Path;
use std::process::{Command, Output};

fn manyfs(args: &[&str], pool: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_manyfs"))
        .args(args)
        .arg(pool)
        .output()
        .expect("run manyfs")
}

#[test]
fn mkfs_refuses_an_existing_pool_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let pool = dir.path().join("pool");
    let out = manyfs(&["mkfs", "--size", "8M"], &pool);
    assert!(out.status.success(), "{out:?}");
    let before = std::fs::read(&pool).unwrap();

    // A second mkfs on the same path: one clear line, exit 1, pool intact.
    let out = manyfs(&["mkfs", "--size", "16M"], &pool);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.trim_end(),
        format!(
            "manyfs: {} exists; use --force to replace it",
            pool.display()
        )
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(std::fs::read(&pool).unwrap() == before, "pool changed");
    let out = manyfs(&["fsck"], &pool);
    assert!(out.status.success(), "{out:?}");

    // Any other non-empty file is protected the same way.
    let other = dir.path().join("notes.txt");
    std::fs::write(&other, b"precious").unwrap();
    let out = manyfs(&["mkfs", "--size", "8M"], &other);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(std::fs::read(&other).unwrap(), b"precious");

    // An empty file is fine (nothing to lose), and --force replaces.
    let empty = dir.path().join("empty");
    std::fs::write(&empty, b"").unwrap();
    assert!(manyfs(&["mkfs", "--size", "8M"], &empty).status.success());
    let out = manyfs(&["mkfs", "--size", "16M", "--force"], &pool);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(std::fs::metadata(&pool).unwrap().len(), 16 << 20);
    assert!(manyfs(&["fsck"], &pool).status.success());
}

#[test]
fn library_mkfs_refuses_an_existing_file_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let pool = dir.path().join("pool");
    std::fs::write(&pool, b"not a pool, but someone's data").unwrap();
    let opts = {
        let mut mk = manyfs::MkfsOptions::default();
        mk.size = 8 << 20;
        mk
    };
    let err = manyfs::Fs::mkfs(&pool, &opts, &manyfs::MountOptions::default())
        .err()
        .expect("an existing file must not be replaced by default");
    assert!(matches!(err, manyfs::Error::Exists(_)), "{err}");
    assert_eq!(
        std::io::Error::from_raw_os_error(err.errno()).kind(),
        std::io::ErrorKind::AlreadyExists
    );
    assert_eq!(
        std::fs::read(&pool).unwrap(),
        b"not a pool, but someone's data"
    );
    let fs = manyfs::Fs::mkfs(
        &pool,
        &{
            let mut mk = opts;
            mk.replace_existing = true;
            mk
        },
        &manyfs::MountOptions::default(),
    )
    .unwrap();
    fs.unmount().unwrap();
}

#[test]
fn mkfs_with_members_inspect_and_fsck() {
    let dir = tempfile::tempdir().unwrap();
    let pool = dir.path().join("pool");
    let m1 = dir.path().join("m1");
    let m2 = dir.path().join("m2");
    // Nodes 1 and 2 of an emulated topology: the machine may have one.
    let out = Command::new(env!("CARGO_BIN_EXE_manyfs"))
        .env("MANYFS_TOPOLOGY", "3x1")
        .arg("mkfs")
        .arg(format!("{}@0", pool.display()))
        .args(["--size", "8M", "--member"])
        .arg(format!("{}@1", m1.display()))
        .arg("--member")
        .arg(format!("{}@2:4M", m2.display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("in 3 member files"));
    assert_eq!(std::fs::metadata(&m1).unwrap().len(), 8 << 20);
    assert_eq!(std::fs::metadata(&m2).unwrap().len(), 4 << 20);
    let out = manyfs(&["inspect"], &pool);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("format          manyfs v6"), "{text}");
    assert!(text.contains("members         3"), "{text}");
    let line = text
        .lines()
        .find(|l| l.contains("member 2 "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains("node 2")
            && line.contains("blocks 4096..5120")
            && line.contains(&m2.display().to_string()),
        "{line}"
    );
    assert!(manyfs(&["fsck"], &pool).status.success());

    // A missing member: fsck's operational-error status and one line.
    std::fs::remove_file(&m2).unwrap();
    let out = manyfs(&["fsck"], &pool);
    assert_eq!(out.status.code(), Some(8), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("pool member 2") && stderr.contains("missing"),
        "{stderr}"
    );

    // Bad --member syntax: clap's usage error, naming the argument.
    let out = Command::new(env!("CARGO_BIN_EXE_manyfs"))
        .args(["mkfs", "x", "--member", "nonode"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.lines().next().unwrap().contains("PATH@NODE"),
        "{stderr}"
    );
    assert!(!dir.path().join("x").exists());
}

#[test]
fn mkfs_with_a_data_device_then_fsck_finds_it_or_says_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let pool = dir.path().join("pool");
    let data = dir.path().join("data");
    let data_arg = data.to_str().unwrap();
    let out = manyfs(
        &[
            "mkfs",
            "--size",
            "8M",
            "--data",
            data_arg,
            "--data-size",
            "4M",
        ],
        &pool,
    );
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("data device: 4194304 bytes"), "{stdout}");
    assert_eq!(std::fs::metadata(&data).unwrap().len(), 4 << 20);
    assert!(manyfs(&["fsck"], &pool).status.success());
    let out = manyfs(&["inspect"], &pool);
    assert!(String::from_utf8_lossy(&out.stdout).contains("data device"));

    // Moved: fsck says so in one line (exit 8), and finds it with --data.
    let moved = dir.path().join("moved");
    std::fs::rename(&data, &moved).unwrap();
    let out = manyfs(&["fsck"], &pool);
    assert_eq!(out.status.code(), Some(8), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("data device") && stderr.contains("missing"),
        "{stderr}"
    );
    let out = manyfs(&["fsck", "--data", moved.to_str().unwrap()], &pool);
    assert!(out.status.success(), "{out:?}");

    // A second mkfs over an existing data file needs --force.
    let pool2 = dir.path().join("pool2");
    let out = manyfs(
        &["mkfs", "--size", "8M", "--data", moved.to_str().unwrap()],
        &pool2,
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("exists; use --force"),
        "{out:?}"
    );
}

/// `manyfs mkfs` with `args` then `pool` and `extra` in `dir`, with
/// `MANYFS_TOPOLOGY` set to `topology` (or removed).
fn mkfs_in(dir: &Path, topology: Option<&str>, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_manyfs"));
    cmd.arg("mkfs").args(args).current_dir(dir);
    match topology {
        Some(t) => cmd.env("MANYFS_TOPOLOGY", t),
        None => cmd.env_remove("MANYFS_TOPOLOGY"),
    };
    cmd.output().expect("run manyfs")
}

/// A refused mkfs: non-zero exit, one line on stderr holding every
/// `needle`, and no file left in `dir`.
fn assert_refused(dir: &Path, out: &Output, needles: &[&str]) {
    assert!(!out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    for n in needles {
        assert!(stderr.contains(n), "{n:?} not in {stderr}");
    }
    let left: Vec<_> = std::fs::read_dir(dir).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn bytes_per_inode_out_of_range_is_refused_with_the_range() {
    let dir = tempfile::tempdir().unwrap();
    for bad in ["0", "1", "4095", "16M"] {
        let out = mkfs_in(
            dir.path(),
            None,
            &["p", "--size", "8M", "--bytes-per-inode", bad],
        );
        assert_refused(dir.path(), &out, &["out of range", "4096", "8388608"]);
    }
    for good in ["4096", "8M"] {
        let out = mkfs_in(
            dir.path(),
            None,
            &["p", "--size", "8M", "--force", "--bytes-per-inode", good],
        );
        assert!(out.status.success(), "{good}: {out:?}");
    }
}

#[test]
fn nodes_the_topology_lacks_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    // No machine has node 99999 (the kernel's limit is 1024).
    let out = mkfs_in(dir.path(), None, &["p@99999", "--size", "8M"]);
    assert_refused(dir.path(), &out, &["NUMA node 99999 does not exist"]);
    let out = mkfs_in(
        dir.path(),
        None,
        &["p", "--size", "8M", "--member", "m1@99999"],
    );
    assert_refused(dir.path(), &out, &["pool member 1", "node 99999"]);

    // The topology mkfs uses is the emulated one MANYFS_TOPOLOGY names:
    // its nodes are accepted whatever the machine has, others refused.
    let out = mkfs_in(
        dir.path(),
        Some("2x1"),
        &["p", "--size", "8M", "--member", "m1@5"],
    );
    assert_refused(dir.path(), &out, &["node 5", "nodes 0 to 1"]);
    let out = mkfs_in(
        dir.path(),
        Some("2x1"),
        &["p@1", "--size", "8M", "--member", "m1@0"],
    );
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn an_at_sign_in_the_file_name_must_start_a_node_number() {
    let dir = tempfile::tempdir().unwrap();
    let out = mkfs_in(dir.path(), None, &["p@abc", "--size", "8M"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.lines().next().unwrap().contains("\"p@abc@0\""),
        "{stderr}"
    );
    assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
    // The documented way to name such a file.
    let out = mkfs_in(dir.path(), None, &["p@abc@0", "--size", "8M"]);
    assert!(out.status.success(), "{out:?}");
    assert!(dir.path().join("p@abc").exists());
}
