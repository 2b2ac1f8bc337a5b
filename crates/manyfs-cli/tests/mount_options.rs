//! `manyfs mount -o` refuses contradicting options before mounting
//! anything, in one line and a non-zero exit.

use std::process::Command;

#[test]
fn contradicting_mount_options_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let pool = dir.path().join("pool");
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_manyfs"))
        .args(["mkfs", "--size", "8M"])
        .arg(&pool)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    for (opts, says) in [
        (&["ro,rw"][..], "`rw`: contradicts ro"),
        (&["rw", "ro"][..], "`ro`: contradicts rw"),
        (
            &["private,allow_other"][..],
            "`allow_other`: contradicts private",
        ),
        (
            &["lock=inode", "lock=srl-tree"][..],
            "contradicts lock=inode given before",
        ),
    ] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_manyfs"));
        cmd.arg("mount").arg(&pool).arg(&mnt);
        for o in opts {
            cmd.arg("-o").arg(o);
        }
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{opts:?}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
        assert!(stderr.contains(says), "{opts:?}: {stderr}");
    }
}

/// `manyfs mount --help` lists every `-o` option with its help line.
#[test]
fn mount_help_lists_every_option() {
    let out = Command::new(env!("CARGO_BIN_EXE_manyfs"))
        .args(["mount", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    for o in manyfs_fuse::options::OPTIONS {
        assert!(
            text.contains(&o.syntax()) && text.contains(o.help),
            "{} missing from:\n{text}",
            o.name
        );
    }
}
