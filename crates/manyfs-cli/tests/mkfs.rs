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
    let opts = manyfs::MkfsOptions {
        size: 8 << 20,
        ..Default::default()
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
        &manyfs::MkfsOptions {
            replace_existing: true,
            ..opts
        },
        &manyfs::MountOptions::default(),
    )
    .unwrap();
    fs.unmount().unwrap();
}
