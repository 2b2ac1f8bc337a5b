//! What a small file costs on media, and the two forms of an inode's log
//! word: a one-sub-log file's head page named by the inode record itself,
//! and a log array once a second CPU's sub-log starts.

mod common;

use manyfs::format::{
    BLOCK_SIZE, INODE_LOG_ARRAY_OFFSET, LogWord, SINGLE_FILE_FORMAT_VERSION, Superblock,
};
use manyfs::{Durability, Fs, MountOptions};
use std::path::Path;

fn opts(durability: Durability) -> MountOptions {
    {
        let mut mo = MountOptions::default();
        mo.durability = durability;
        mo
    }
}

fn used_blocks(fs: &Fs) -> u64 {
    let st = fs.statfs();
    st.total_blocks - st.free_blocks
}

/// The log word of `path`'s inode, read from the (unmounted) pool file.
fn log_word(pool: &Path, ino: u64) -> LogWord {
    let img = std::fs::read(pool).unwrap();
    let sb = Superblock::decode(&img[..96], img.len() as u64).unwrap();
    let at = (sb.inode_offset(ino) + INODE_LOG_ARRAY_OFFSET) as usize;
    LogWord::decode(u64::from_le_bytes(img[at..at + 8].try_into().unwrap()))
}

/// Set the format version in both superblocks of the image `img`.
fn set_version(img: &mut [u8], v: u32) {
    for block in [0, 1] {
        let sb = &mut img[block * BLOCK_SIZE as usize..][..96];
        sb[8..12].copy_from_slice(&v.to_le_bytes());
        let crc = crc32fast::hash(&sb[..92]);
        sb[92..96].copy_from_slice(&crc.to_le_bytes());
    }
}

fn version(pool: &Path) -> u32 {
    let b = std::fs::read(pool).unwrap();
    u32::from_le_bytes(b[8..12].try_into().unwrap())
}

fn assert_clean(pool: &Path) {
    let report = manyfs::fsck::check(pool).unwrap();
    assert!(report.is_clean(), "{:?}", report.errors);
}

/// Whether this process may run on two CPUs; if not, `test` is skipped
/// (one CPU: no second sub-log to start).
fn two_cpus(test: &str) -> bool {
    let two = std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2;
    if !two {
        common::skip(
            test,
            common::Lack::Machine,
            "one CPU: no second sub-log to start",
        );
    }
    two
}

#[test]
fn a_one_byte_file_takes_two_blocks() {
    for durability in [Durability::Dram, Durability::File] {
        let (_dir, pool, fs) = common::fresh_with(8 << 20, &opts(durability));
        // On one CPU: the root's names go to one sub-log, whose page the
        // first name makes.
        let n = 20u64;
        let before = manyfs::diag::run_on_cpu(0, || {
            fs.write("/first", b"x").unwrap();
            let before = used_blocks(&fs);
            for i in 0..n {
                fs.write(format!("/f{i}"), b"y").unwrap();
            }
            before
        })
        .unwrap();
        // A log page and a data block each (the root's page has room for
        // every name).
        assert_eq!(used_blocks(&fs) - before, 2 * n, "{durability:?}");
        let ino = fs.metadata("/f3").unwrap().ino;
        fs.unmount().unwrap();
        assert!(
            matches!(log_word(&pool, ino), LogWord::Direct { .. }),
            "{:?}",
            log_word(&pool, ino)
        );
        let fs = Fs::mount(&pool, &opts(durability)).unwrap();
        assert_eq!(
            used_blocks(&fs) - before,
            2 * n,
            "{durability:?} after mount"
        );
        assert_eq!(fs.read("/f3").unwrap(), b"y");
        // The root's, made with the pool; none of the files has one.
        assert_eq!(fs.stats().log_arrays, 1);
        fs.unmount().unwrap();
        assert_clean(&pool);
    }
}

#[test]
fn a_file_written_from_two_cpus_gets_a_log_array() {
    if !two_cpus("a_file_written_from_two_cpus_gets_a_log_array") {
        return;
    }
    for durability in [Durability::Dram, Durability::File] {
        let (_dir, pool, fs) = common::fresh_with(8 << 20, &opts(durability));
        fs.write("/first", b"x").unwrap();
        let on = |cpu: usize, f: &(dyn Fn() + Sync)| manyfs::diag::run_on_cpu(cpu, f).unwrap();
        on(0, &|| fs.write("/f", b"a").unwrap());
        on(0, &|| fs.create_dir("/d").unwrap());
        on(0, &|| fs.write("/d/a", b"a").unwrap());
        // Synced, so that the second CPU's partial-page write below copies
        // no unsynced bytes: in `file` mode it would otherwise go to the
        // sub-log of the write it copies (docs/guarantees.md, "What is
        // atomic") and start no second sub-log.
        fs.sync().unwrap();
        let before = used_blocks(&fs);
        let (ino, dir) = (
            fs.metadata("/f").unwrap().ino,
            fs.metadata("/d").unwrap().ino,
        );
        // A second CPU: its sub-log needs the array (one block) and a page.
        // Each append is synced from the CPU that made it: in `file` mode
        // appends into the end's page are logged by the sync that follows
        // (`append_in_place`), from the thread that runs it.
        on(1, &|| {
            let f = common::open_rw(&fs, "/f");
            f.write_at(b"bc", 1).unwrap();
            f.sync_data().unwrap();
            fs.write("/d/b", b"b").unwrap();
        });
        on(0, &|| {
            let f = common::open_rw(&fs, "/f");
            f.write_at(b"d", 3).unwrap();
            f.sync_data().unwrap();
        });
        // /f: array + page; /d: array + page; /d/b: page + data.
        assert_eq!(used_blocks(&fs) - before, 6, "{durability:?}");
        assert_eq!(fs.read("/f").unwrap(), b"abcd");
        assert!(manyfs::fsck::verify(&fs).unwrap().is_empty());
        // The root's, /f's and /d's.
        assert_eq!(fs.stats().log_arrays, 3);
        fs.unmount().unwrap();
        for i in [ino, dir] {
            assert!(
                matches!(log_word(&pool, i), LogWord::Array(_)),
                "{durability:?} inode {i}: {:?}",
                log_word(&pool, i)
            );
        }
        assert_clean(&pool);
        let fs = Fs::mount(&pool, &opts(durability)).unwrap();
        assert_eq!(fs.read("/f").unwrap(), b"abcd");
        assert_eq!(fs.read("/d/a").unwrap(), b"a");
        assert_eq!(fs.read("/d/b").unwrap(), b"b");
        let v = manyfs::fsck::verify(&fs).unwrap();
        assert!(v.is_empty(), "{v:?}");
        // Both sub-logs go on after the mount.
        on(1, &|| fs.write("/d/c", b"c").unwrap());
        on(0, &|| fs.write("/d/e", b"e").unwrap());
        fs.unmount().unwrap();
        assert_clean(&pool);
        let fs = Fs::mount(&pool, &opts(durability)).unwrap();
        assert_eq!(fs.read("/d/c").unwrap(), b"c");
        assert_eq!(fs.read("/d/e").unwrap(), b"e");
        assert!(manyfs::fsck::verify(&fs).unwrap().is_empty());
        fs.unmount().unwrap();
    }
}

/// A pool made before the direct form (format 3) names a log array from
/// every inode, a one-sub-log file's too: it mounts and checks clean, its
/// files go on growing, and a writable mount records the newer version.
#[test]
fn a_one_sub_log_file_with_a_log_array_still_mounts() {
    for durability in [Durability::Dram, Durability::File] {
        let (_dir, pool, fs) = common::fresh_with(8 << 20, &opts(durability));
        fs.write("/old", b"old").unwrap();
        let ino = fs.metadata("/old").unwrap().ino;
        fs.unmount().unwrap();
        // Rewrite the record as the older format had it: the word names an
        // array (here the pool's last block, free in this small pool)
        // whose head of the sub-log names the page.
        let LogWord::Direct { index, head, .. } = log_word(&pool, ino) else {
            panic!("a direct word")
        };
        let mut img = std::fs::read(&pool).unwrap();
        let sb = Superblock::decode(&img[..96], img.len() as u64).unwrap();
        let array = sb.total_blocks - 1;
        let a = (array * BLOCK_SIZE) as usize;
        assert!(img[a..a + BLOCK_SIZE as usize].iter().all(|&b| b == 0));
        img[a + index * 8..a + index * 8 + 8].copy_from_slice(&head.to_le_bytes());
        let at = (sb.inode_offset(ino) + INODE_LOG_ARRAY_OFFSET) as usize;
        img[at..at + 8].copy_from_slice(&array.to_le_bytes());
        // Every record now names an array: the pool is what format 3
        // allowed (the root's array came from mkfs).
        set_version(&mut img, 3);
        std::fs::write(&pool, &img).unwrap();
        assert_clean(&pool);
        let ro = {
            let mut mo = opts(durability);
            mo.read_only = true;
            mo
        };
        let fs = Fs::mount(&pool, &ro).unwrap();
        assert_eq!(fs.read("/old").unwrap(), b"old");
        fs.unmount().unwrap();
        assert_eq!(version(&pool), 3, "a read-only mount writes nothing");

        let fs = Fs::mount(&pool, &opts(durability)).unwrap();
        assert_eq!(fs.read("/old").unwrap(), b"old");
        let f = common::open_rw(&fs, "/old");
        f.write_at(b"er", 3).unwrap();
        drop(f);
        assert!(manyfs::fsck::verify(&fs).unwrap().is_empty());
        fs.unmount().unwrap();
        assert_eq!(log_word(&pool, ino), LogWord::Array(array));
        assert_eq!(version(&pool), SINGLE_FILE_FORMAT_VERSION);
        assert_clean(&pool);
        let fs = Fs::mount(&pool, &opts(durability)).unwrap();
        assert_eq!(fs.read("/old").unwrap(), b"older");
        fs.unmount().unwrap();
    }
}

/// A directory whose record is damaged: `fsck --repair` reconnects its
/// files under a new `/lost+found`, read from the directory's log through
/// its direct word, and gives `/lost+found` a log array as older formats
/// did (repair keeps the pool's version).
#[test]
fn repair_reconnects_the_files_of_a_directory_with_a_direct_word() {
    let (_dir, pool, fs) = common::fresh_with(8 << 20, &opts(Durability::File));
    fs.create_dir("/d").unwrap();
    fs.write("/d/a", b"in d").unwrap();
    let (d, a) = (
        fs.metadata("/d").unwrap().ino,
        fs.metadata("/d/a").unwrap().ino,
    );
    fs.unmount().unwrap();
    assert!(matches!(log_word(&pool, d), LogWord::Direct { .. }));
    let mut img = std::fs::read(&pool).unwrap();
    let sb = Superblock::decode(&img[..96], img.len() as u64).unwrap();
    // The mode, under the record's checksum.
    img[sb.inode_offset(d) as usize + 12] ^= 0x40;
    std::fs::write(&pool, &img).unwrap();
    assert!(!manyfs::fsck::check(&pool).unwrap().is_clean());
    manyfs::fsck::repair::repair(&pool).unwrap();
    assert_clean(&pool);
    let fs = Fs::mount(&pool, &opts(Durability::File)).unwrap();
    assert_eq!(fs.read(format!("/lost+found/#{a}")).unwrap(), b"in d");
    let lf = fs.metadata("/lost+found").unwrap().ino;
    fs.unmount().unwrap();
    assert!(matches!(log_word(&pool, lf), LogWord::Array(_)));
}

/// In `file` mode a partial-page write copies the page's other bytes from
/// the entry that wrote them; while that entry is unsynced, the write goes
/// to that entry's sub-log (it must never count without it), even from
/// another CPU. Once the entry is durable, the other CPU's own sub-log.
#[test]
fn a_partial_page_write_joins_the_unsynced_write_it_copies() {
    if !two_cpus("a_partial_page_write_joins_the_unsynced_write_it_copies") {
        return;
    }
    let (_dir, _pool, fs) = common::fresh_with(8 << 20, &opts(Durability::File));
    let on = |cpu: usize, f: &(dyn Fn() + Sync)| manyfs::diag::run_on_cpu(cpu, f).unwrap();
    let arrays = fs.stats().log_arrays;
    on(0, &|| fs.write("/f", b"aaaa").unwrap());
    on(1, &|| {
        common::open_rw(&fs, "/f")
            .write_at(b"b", 1)
            .map(|_| ())
            .unwrap()
    });
    assert_eq!(
        fs.stats().log_arrays,
        arrays,
        "the copy joined the first CPU's sub-log"
    );
    fs.sync().unwrap();
    // Past the end: copy-on-write (an overwrite inside the file of a
    // settled page would go in place and append nothing).
    on(1, &|| {
        common::open_rw(&fs, "/f")
            .write_at(b"cc", 3)
            .map(|_| ())
            .unwrap()
    });
    assert_eq!(
        fs.stats().log_arrays,
        arrays + 1,
        "synced: the second CPU's own sub-log"
    );
    assert_eq!(fs.read("/f").unwrap(), b"abacc");
    assert!(manyfs::fsck::verify(&fs).unwrap().is_empty());
}
