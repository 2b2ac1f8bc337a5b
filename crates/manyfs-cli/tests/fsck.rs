//! `manyfs fsck` as a storage engineer runs it: exit statuses (0 clean,
//! 1 corrected, 4 uncorrected, 8 operational), every problem listed, and
//! `--repair` leaving a pool that checks clean and mounts.

use manyfs::{Fs, MkfsOptions, MountOptions};
use std::path::{Path, PathBuf};
use std::process::Command;

const INODE_TABLE: u64 = 3 * 4096;
const INODE_SIZE: u64 = 128;

fn fsck(pool: &Path, repair: bool) -> (i32, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_manyfs"));
    cmd.arg("fsck").arg(pool);
    if repair {
        cmd.arg("--repair");
    }
    let out = cmd.output().expect("run manyfs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().expect("exit status"), text)
}

/// A pool with /a/f (two pages), /d/x (data) and /s -> a/f, in a new
/// temporary directory; returns the directory, the pool's path and the
/// inode numbers of /a/f and /d.
fn pool() -> (tempfile::TempDir, PathBuf, u64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pool");
    let fs = Fs::mkfs(
        &path,
        &{
            let mut mk = MkfsOptions::default();
            mk.size = 8 << 20;
            mk
        },
        &MountOptions::default(),
    )
    .unwrap();
    fs.create_dir("/a").unwrap();
    fs.write("/a/f", &[7u8; 5000]).unwrap();
    fs.create_dir("/d").unwrap();
    fs.write("/d/x", b"orphaned but intact").unwrap();
    fs.symlink("a/f", "/s").unwrap();
    let file = fs.metadata("/a/f").unwrap().ino;
    let d = fs.metadata("/d").unwrap().ino;
    fs.unmount().unwrap();
    (dir, path, file, d)
}

fn flip(path: &Path, at: u64) {
    let mut img = std::fs::read(path).unwrap();
    img[at as usize] ^= 0x40;
    std::fs::write(path, img).unwrap();
}

fn inode_byte(ino: u64, off: u64) -> u64 {
    INODE_TABLE + ino * INODE_SIZE + off
}

#[test]
fn clean_pool_exits_0() {
    let (_dir, p, _, _) = pool();
    let (rc, out) = fsck(&p, false);
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("clean"), "{out}");
    let (rc, out) = fsck(&p, true);
    assert_eq!(rc, 0, "repair of a clean pool: {out}");
}

#[test]
fn two_damages_listed_then_repaired() {
    let (_dir, p, file, _) = pool();
    flip(&p, 10); // primary superblock
    flip(&p, inode_byte(file, 50)); // /a/f's record (ctime, under the CRC)
    let (rc, out) = fsck(&p, false);
    assert_eq!(rc, 4, "{out}");
    let errors: Vec<&str> = out.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 2, "{out}");
    assert!(out.contains("primary superblock"), "{out}");
    assert!(
        out.contains(&format!("\"f\" -> inode {file}")) && out.contains("checksum"),
        "{out}"
    );
    assert!(
        Fs::mount(&p, &MountOptions::default()).is_err(),
        "mount must refuse the damaged pool"
    );

    let (rc, out) = fsck(&p, true);
    assert_eq!(rc, 1, "{out}");
    let (rc, out) = fsck(&p, false);
    assert_eq!(rc, 0, "{out}");
    let fs = Fs::mount(&p, &MountOptions::default()).unwrap();
    assert!(
        fs.metadata("/a/f").is_err(),
        "the damaged file's name is gone"
    );
    assert_eq!(fs.read("/d/x").unwrap(), b"orphaned but intact");
    fs.unmount().unwrap();
}

#[test]
fn missing_pool_or_bad_arguments_exit_8() {
    let dir = tempfile::tempdir().unwrap();
    let (rc, out) = fsck(&dir.path().join("missing"), false);
    assert_eq!(rc, 8, "{out}");
    let (rc, out) = fsck(&dir.path().join("missing"), true);
    assert_eq!(rc, 8, "{out}");
    let st = Command::new(env!("CARGO_BIN_EXE_manyfs"))
        .args(["fsck", "--no-such-flag"])
        .output()
        .unwrap();
    assert_eq!(st.status.code(), Some(8));
    let junk = dir.path().join("junk");
    std::fs::write(&junk, vec![0u8; 1 << 20]).unwrap();
    let (rc, out) = fsck(&junk, false);
    assert_eq!(rc, 8, "not a pool: {out}");
}

#[test]
fn repair_refuses_a_mounted_pool() {
    let (_dir, p, _, _) = pool();
    flip(&p, 10);
    let fs = Fs::mount(&p, &MountOptions::default()).unwrap();
    let (rc, out) = fsck(&p, true);
    assert_eq!(rc, 8, "{out}");
    fs.unmount().unwrap();
}

#[test]
fn orphan_of_a_damaged_directory_lands_in_lost_found() {
    let (_dir, p, _, d) = pool();
    let x = {
        let fs = Fs::mount(&p, &MountOptions::default()).unwrap();
        let ino = fs.metadata("/d/x").unwrap().ino;
        fs.unmount().unwrap();
        ino
    };
    flip(&p, inode_byte(d, 40)); // /d's record: bad checksum, log intact
    let (rc, out) = fsck(&p, false);
    assert_eq!(rc, 4, "{out}");
    assert!(out.contains(&format!("inode {x}")), "{out}");
    let (rc, out) = fsck(&p, true);
    assert_eq!(rc, 1, "{out}");
    let (rc, out) = fsck(&p, false);
    assert_eq!(rc, 0, "{out}");
    let fs = Fs::mount(&p, &MountOptions::default()).unwrap();
    assert_eq!(
        fs.read(format!("/lost+found/#{x}")).unwrap(),
        b"orphaned but intact"
    );
    assert!(fs.metadata("/d").is_err());
    assert_eq!(fs.read("/a/f").unwrap(), vec![7u8; 5000]);
    fs.unmount().unwrap();
}

#[test]
fn truncated_pool_is_reported_as_short_with_both_sizes() {
    let (_dir, p, _, _) = pool();
    let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
    f.set_len(4 << 20).unwrap();
    drop(f);
    let (rc, out) = fsck(&p, false);
    assert_eq!(rc, 4, "{out}");
    let errors: Vec<&str> = out.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{out}");
    assert!(
        errors[0].contains("4194304 bytes") && errors[0].contains("8388608 bytes"),
        "{out}"
    );
    assert!(!out.contains("damaged"), "{out}");
}
