//! The rebuild on several threads against the rebuild on one: the same
//! state from a sound pool, the same first error from a damaged one.

use super::*;
use crate::lowlevel::InodeOps;
use crate::xattr::XattrSet;
use crate::{Durability, Fs, MkfsOptions, MountOptions};
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// A pool with levels wide enough to be split among threads: directories
/// of 300 files, multi-page and truncated files, a hard link, a symlink,
/// an extended attribute, nested directories, a removed name.
fn populated() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let pool = dir.path().join("pool");
    let opts = MountOptions {
        durability: Durability::Dram,
        ..Default::default()
    };
    let mkfs = MkfsOptions {
        size: 64 << 20,
        ..Default::default()
    };
    let fs = Fs::mkfs(&pool, &mkfs, &opts).unwrap();
    for d in 0..3 {
        fs.create_dir(format!("/d{d}")).unwrap();
        for f in 0..300 {
            fs.write(format!("/d{d}/f{f}"), &vec![f as u8; 1 + f * 37])
                .unwrap();
        }
    }
    fs.create_dir("/d0/sub").unwrap();
    fs.create_dir("/d0/sub/deeper").unwrap();
    fs.write("/d0/sub/deeper/big", &vec![7u8; 3 * 4096 + 5])
        .unwrap();
    fs.set_len("/d0/sub/deeper/big", 4096 + 1).unwrap();
    fs.hard_link("/d1/f3", "/d2/also-f3").unwrap();
    fs.symlink("/d1/f4", "/d0/link").unwrap();
    fs.remove_file("/d2/f9").unwrap();
    let ino = fs.metadata("/d1/f5").unwrap().ino;
    fs.setxattr(ino, "user.k".as_ref(), b"v", XattrSet::Any)
        .unwrap();
    fs.unmount().unwrap();
    (dir, pool)
}

fn open(pool: &Path) -> Media {
    Media::open(pool, Durability::Dram, false).unwrap()
}

/// Everything a rebuild found, in a fixed order (hash maps sorted).
fn canonical(r: &Rebuilt) -> String {
    let mut s = format!(
        "{:?} {} {:?}\n",
        r.sb, r.primary_superblock_damaged, r.pending_rename
    );
    for (ino, n) in &r.inodes {
        let live: BTreeMap<_, _> = n.live.iter().collect();
        writeln!(
            s,
            "{ino}: {:?} {:?} {} {} {} {:?} {:?} {:?} {:?} {live:?}",
            n.record,
            n.attrs,
            n.attr_seq,
            n.attr_entries,
            n.parent,
            n.sublogs,
            n.dir,
            n.file,
            n.xattrs
        )
        .unwrap();
    }
    writeln!(s, "{:?}", r.free_extents()).unwrap();
    s
}

#[test]
fn several_threads_rebuild_what_one_thread_rebuilds() {
    let (_dir, pool) = populated();
    let media = open(&pool);
    let one = rebuild_on(&media, None, 1).unwrap();
    assert_eq!(one.inodes.len(), 1 + 3 + 900 + 2 + 1 + 1 - 1, "every inode");
    let one = canonical(&one);
    for threads in [2, 3, 8] {
        let many = canonical(&rebuild_threads(&media, None, threads).unwrap());
        assert!(many == one, "{threads} threads rebuilt another state");
    }
}

#[test]
fn several_threads_report_the_first_error_of_the_walk_in_order() {
    let (_dir, pool) = populated();
    let (ino_a, ino_b, ino_c) = {
        let fs = Fs::mount(
            &pool,
            &MountOptions {
                durability: Durability::Dram,
                ..Default::default()
            },
        )
        .unwrap();
        let ino = |p: &str| fs.metadata(p).unwrap().ino;
        (ino("/d0/f10"), ino("/d1/f200"), ino("/d2/f100"))
    };
    let media = Media::open(&pool, Durability::Dram, true).unwrap();
    let sb = read_superblock(&media).unwrap().0;
    // Two inodes share one log (the log word is outside the record's
    // checksum; here it names a head page directly, whose footer names the
    // other inode), and a later one has a damaged record: with threads,
    // either may be met first; the walk in order meets the shared log
    // first.
    let array_of = |ino: u64| media.load_u64(sb.inode_offset(ino) + 24).unwrap();
    media
        .store_u64(sb.inode_offset(ino_b) + 24, array_of(ino_a))
        .unwrap();
    media.store(sb.inode_offset(ino_c) + 8, &[0xff]).unwrap();
    let one = rebuild_on(&media, None, 1).unwrap_err().to_string();
    assert!(one.contains("bad log page footer"), "{one}");
    for threads in [2, 3, 8] {
        let many = rebuild_threads(&media, None, threads)
            .unwrap_err()
            .to_string();
        assert_eq!(many, one, "{threads} threads");
    }
}
