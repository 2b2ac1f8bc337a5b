//! `manyfs inspect` shows each member's node spills as of the last unmount.

#[path = "../../manyfs/tests/common/mod.rs"]
mod common;

use manyfs::{Durability, Fs, MkfsOptions, MountOptions, TopologySpec};
use std::path::Path;
use std::process::Command;

const MIB: u64 = 1 << 20;

/// `manyfs inspect POOL`'s stdout (it must succeed).
fn inspect(pool: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_manyfs"))
        .arg("inspect")
        .arg(pool)
        .output()
        .expect("run manyfs");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The spill count on `member N`'s line of `text`.
fn spills_of(text: &str, member: usize) -> u64 {
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("member {member} ")))
        .unwrap_or_else(|| panic!("no member {member} in:\n{text}"));
    let (before, _) = line
        .split_once(" spills")
        .unwrap_or_else(|| panic!("no spills on {line:?}"));
    before
        .rsplit(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count before `spills` on {line:?}"))
}

/// Write `files` files of 1 MiB from the calling thread.
fn write_files(fs: &Fs, from: usize, files: usize) {
    for i in from..from + files {
        fs.write(format!("/f{i}"), &vec![i as u8; MIB as usize])
            .unwrap();
    }
}

/// On an emulated 2x1 topology, a thread fills its node's 8 MiB member
/// and spills onto the other; after the unmount, `inspect` (a read-only
/// mount on the machine's own topology) shows the spills on the member of
/// the thread's node and none on the other, and a later mount adds to the
/// count rather than starting again.
#[test]
fn inspect_shows_the_spills_of_the_last_unmount_and_remounts_add_to_them() {
    let dir = tempfile::tempdir().unwrap();
    let pool = dir.path().join("pool");
    let opts = {
        let mut mo = MountOptions::default();
        mo.durability = Durability::File;
        mo.topology = TopologySpec::Emulated {
            nodes: 2,
            cpus_per_node: 1,
        };
        mo
    };
    let (node, first) = std::thread::scope(|s| {
        s.spawn(|| {
            // Configured CPU = real CPU mod 2, and node = configured CPU.
            let node = common::pin_to_an_allowed_cpu() % 2;
            // Member 0 (the pool file) on the other node, member 1 on ours.
            let fs = common::mkfs_spilling_pair(&pool, node, &opts);
            write_files(&fs, 0, 10);
            let spills = fs.stats().node_spills[node];
            assert!(spills > 0, "10 MiB did not spill out of an 8 MiB member");
            fs.unmount().unwrap();
            (node, spills)
        })
        .join()
        .unwrap()
    });
    let text = inspect(&pool);
    assert_eq!(spills_of(&text, 1), first, "{text}");
    assert_eq!(spills_of(&text, 0), 0, "{text}");

    // A second mount on the same node starts from the recorded count.
    let second = std::thread::scope(|s| {
        s.spawn(|| {
            common::pin_to_an_allowed_cpu();
            let fs = Fs::mount(&pool, &opts).unwrap();
            assert_eq!(fs.stats().members[1].spills, first);
            assert_eq!(fs.stats().node_spills[node], first);
            write_files(&fs, 10, 2);
            let spills = fs.stats().members[1].spills;
            assert!(spills > first, "{spills} after {first}");
            fs.unmount().unwrap();
            spills
        })
        .join()
        .unwrap()
    });
    let text = inspect(&pool);
    assert_eq!(spills_of(&text, 1), second, "{text}");
    assert_eq!(spills_of(&text, 0), 0, "{text}");
    let out = Command::new(env!("CARGO_BIN_EXE_manyfs"))
        .arg("fsck")
        .arg(&pool)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

/// A new, empty 8 MiB pool in `dir`.
fn empty_pool(dir: &Path) -> std::path::PathBuf {
    let pool = dir.join("pool");
    Fs::mkfs(
        &pool,
        &{
            let mut mk = MkfsOptions::default();
            mk.size = 8 * MIB;
            mk
        },
        &MountOptions::default(),
    )
    .unwrap()
    .unmount()
    .unwrap();
    pool
}

/// A reader that goes away (`manyfs inspect POOL | head -1`) ends the
/// command by `SIGPIPE`, as it ends `ls`, not by a panic.
#[test]
fn inspect_into_a_closed_pipe_ends_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let pool = empty_pool(dir.path());
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_manyfs"))
        .arg("inspect")
        .arg(&pool)
        .stdout(writer)
        .output()
        .expect("run manyfs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{out:?}");
}

/// A damaged primary superblock: `inspect` still shows the layout (the
/// backup's), warns on stderr and exits 4; a clean pool exits 0.
#[test]
fn inspect_of_a_damaged_primary_superblock_warns_and_exits_4() {
    let dir = tempfile::tempdir().unwrap();
    let pool = empty_pool(dir.path());
    inspect(&pool);
    let mut img = std::fs::read(&pool).unwrap();
    img[20] ^= 0x40; // total_blocks, under the primary's checksum
    std::fs::write(&pool, img).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_manyfs"))
        .arg("inspect")
        .arg(&pool)
        .output()
        .expect("run manyfs");
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("primary superblock is damaged") && stderr.contains("backup"),
        "{stderr}"
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("total blocks    2048"),
        "{out:?}"
    );
}
