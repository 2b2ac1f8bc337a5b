//! Tiered pools: file data on a data device, logs and inodes on the pool.
//! Data written, fsync'd and remounted reads back and checks clean in
//! every pool medium; the data really is on the device; a missing,
//! foreign or short device is a typed error at mount and at fsck; a full
//! device is `NoSpace`.
//!
//! Every test mounts with the `device_io` that `MANYFS_TEST_DEVICE_IO`
//! names (the default, `uring`, unless set: `MANYFS_TEST_DEVICE_IO=sync
//! cargo test --test tier` runs them all on pread/pwrite); the round
//! trips and the batched reads and writes also run with each explicitly.

mod common;

use manyfs::{
    DataDevice, DeviceIo, Durability, Error, File, Fs, MemberProblem, MkfsOptions, MountOptions,
    OpenOptions,
};
use std::path::{Path, PathBuf};

const MIB: u64 = 1 << 20;

/// The `device_io` of this run's mounts.
fn device_io() -> DeviceIo {
    std::env::var("MANYFS_TEST_DEVICE_IO")
        .map(|v| v.parse().expect("MANYFS_TEST_DEVICE_IO: sync or uring"))
        .unwrap_or_default()
}

fn opts(durability: Durability) -> MountOptions {
    opts_io(durability, device_io())
}

fn opts_io(durability: Durability, device_io: DeviceIo) -> MountOptions {
    {
        let mut mo = MountOptions::default();
        mo.durability = durability;
        mo.device_io = device_io;
        mo
    }
}

fn mkfs_tier(dir: &Path, data_size: u64, durability: Durability) -> (PathBuf, PathBuf, Fs) {
    mkfs_tier_io(dir, data_size, &opts(durability))
}

fn mkfs_tier_io(dir: &Path, data_size: u64, o: &MountOptions) -> (PathBuf, PathBuf, Fs) {
    let pool = dir.join("pool");
    let data = dir.join("data");
    let fs = Fs::mkfs(
        &pool,
        &{
            let mut mk = MkfsOptions::default();
            mk.size = 16 * MIB;
            mk.data = Some(DataDevice {
                path: data.clone(),
                size: Some(data_size),
            });
            mk
        },
        o,
    )
    .unwrap();
    (pool, data, fs)
}

fn content(i: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|j| (i * 31 + j * 7 + j / 4096) as u8)
        .collect()
}

fn open_rw(fs: &Fs, path: &str) -> File {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .open(fs, path)
        .unwrap()
}

fn write_read_remount_fsck(durability: Durability) {
    write_read_remount_fsck_io(durability, device_io());
}

fn write_read_remount_fsck_io(durability: Durability, io: DeviceIo) {
    let opts = |d| opts_io(d, io);
    let dir = tempfile::tempdir().unwrap();
    let (pool, data, fs) = mkfs_tier_io(dir.path(), 32 * MIB, &opts(durability));
    assert!(manyfs::diag::superblock(&fs).tiered());
    let before = std::fs::read(&data).unwrap();
    // Whole pages, a partial page, an overwrite in place, an append.
    for i in 0..8 {
        let f = open_rw(&fs, &format!("/f{i}"));
        f.write_at(&content(i, 3 * 4096 + 100), 0).unwrap();
        f.write_at(&content(i + 100, 10), 4096 + 7).unwrap();
        f.write_at(&content(i + 200, 5000), 3 * 4096 + 100).unwrap();
        f.sync_all().unwrap();
    }
    let expect = |i: usize| {
        let mut v = content(i, 3 * 4096 + 100);
        v[4096 + 7..4096 + 17].copy_from_slice(&content(i + 100, 10));
        v.extend(content(i + 200, 5000));
        v
    };
    for i in 0..8 {
        assert_eq!(fs.read(format!("/f{i}")).unwrap(), expect(i), "file {i}");
    }
    // The data is on the device: the device file changed, and the pool
    // holds none of the file's bytes.
    let after = std::fs::read(&data).unwrap();
    assert_ne!(before, after);
    let needle = &expect(3)[..4096];
    assert!(after.windows(4096).step_by(4096).any(|w| w == needle));
    let pool_bytes = std::fs::read(&pool).unwrap();
    assert!(!pool_bytes.windows(4096).step_by(4096).any(|w| w == needle));
    let stats = fs.stats().device.expect("a tiered pool has device stats");
    assert!(stats.writes > 0 && stats.flushes > 0, "{stats:?}");
    fs.unmount().unwrap();

    let report = manyfs::fsck::check(&pool).unwrap();
    assert!(report.is_clean(), "{:?}", report.errors);
    let fs = Fs::mount(&pool, &opts(durability)).unwrap();
    for i in 0..8 {
        assert_eq!(fs.read(format!("/f{i}")).unwrap(), expect(i), "file {i}");
    }
    manyfs::fsck::verify(&fs).unwrap();
    // Truncate and delete free device blocks for reuse.
    let free0 = fs.statfs().free_blocks;
    for i in 0..4 {
        fs.remove_file(format!("/f{i}")).unwrap();
    }
    fs.sync().unwrap();
    assert!(fs.statfs().free_blocks > free0);
    fs.unmount().unwrap();
    let report = manyfs::fsck::check(&pool).unwrap();
    assert!(report.is_clean(), "{:?}", report.errors);
}

#[test]
fn file_mode_pool_with_a_data_device() {
    write_read_remount_fsck(Durability::File);
}

#[test]
fn dram_mode_pool_with_a_data_device() {
    write_read_remount_fsck(Durability::Dram);
}

#[test]
fn file_and_dram_mode_pools_with_a_data_device_on_each_device_io() {
    for io in [DeviceIo::Sync, DeviceIo::Uring] {
        if io == DeviceIo::Uring
            && !uring_available("file_and_dram_mode_pools_with_a_data_device_on_each_device_io")
        {
            return;
        }
        write_read_remount_fsck_io(Durability::File, io);
        write_read_remount_fsck_io(Durability::Dram, io);
    }
}

/// Whether a mount with `device_io=uring` gets io_uring here (a kernel or
/// container may refuse it: the mount then uses `sync`, which its own
/// tests cover); if not, `test` is skipped.
fn uring_available(test: &str) -> bool {
    let dir = tempfile::tempdir().unwrap();
    let (_, _, fs) = mkfs_tier_io(dir.path(), MIB, &opts_io(Durability::Dram, DeviceIo::Uring));
    let io = fs.stats().device.unwrap().io;
    if io != DeviceIo::Uring {
        common::skip(
            test,
            common::Lack::Machine,
            format_args!("io_uring unavailable here (the mount fell back to {io})"),
        );
    }
    io == DeviceIo::Uring
}

/// Large reads and writes over fragmented device space: a read of blocks
/// that are not contiguous is one transfer per run of contiguous ones, a
/// write that gets several extents one per extent, all of a call in one
/// batch; the data round-trips and survives a remount, with either
/// `device_io`.
fn batched_transfers(io: DeviceIo) {
    let dir = tempfile::tempdir().unwrap();
    let (pool, _data, fs) = mkfs_tier_io(dir.path(), 16 * MIB, &opts_io(Durability::Dram, io));
    assert_eq!(fs.stats().device.unwrap().io, io);
    // Two files written page by page in turn: their blocks interleave.
    let (a, b) = (open_rw(&fs, "/a"), open_rw(&fs, "/b"));
    for p in 0..64u64 {
        a.write_at(&content(p as usize, 4096), p * 4096).unwrap();
        b.write_at(&content(1000 + p as usize, 4096), p * 4096)
            .unwrap();
    }
    let want_a: Vec<u8> = (0..64).flat_map(|p| content(p, 4096)).collect();
    // A 256 KiB read of `a`, unaligned at both ends: several transfers
    // (its blocks are not all contiguous), all issued in one batch.
    let s0 = fs.stats().device.unwrap();
    let mut got = vec![0u8; 64 * 4096 - 300];
    assert_eq!(a.read_at(&mut got, 100).unwrap(), got.len());
    assert_eq!(got[..], want_a[100..64 * 4096 - 200]);
    let reads = fs.stats().device.unwrap().reads - s0.reads;
    assert!(
        (2..=64).contains(&reads),
        "{io}: {reads} transfers for 64 interleaved pages"
    );
    // Fragment the free space: remove `b` and let its blocks come back.
    drop(b);
    fs.remove_file("/b").unwrap();
    fs.sync().unwrap();
    // A 1 MiB write with partial first and last pages, which probably
    // gets several extents: one transfer per extent or staged page.
    let c = open_rw(&fs, "/c");
    c.write_at(&content(7, 10), 0).unwrap();
    let big = content(9, 256 * 4096);
    let s1 = fs.stats().device.unwrap();
    c.write_at(&big, 5).unwrap();
    let writes = fs.stats().device.unwrap().writes - s1.writes;
    assert!(
        (2..=257).contains(&writes),
        "{io}: {writes} transfers for 257 pages"
    );
    // Through the ring with `uring` (a lone transfer never is).
    let batches = fs.stats().device.unwrap().uring_batches;
    assert_eq!(
        batches > 0,
        io == DeviceIo::Uring,
        "{io}: {batches} batches"
    );
    let mut want_c = content(7, 5);
    want_c.extend_from_slice(&big);
    assert_eq!(fs.read("/c").unwrap(), want_c);
    // Overwrite `a` whole (copy on write into fresh extents).
    let new_a: Vec<u8> = (0..64).flat_map(|p| content(500 + p, 4096)).collect();
    a.write_at(&new_a, 0).unwrap();
    drop((a, c));
    fs.unmount().unwrap();
    let report = manyfs::fsck::check(&pool).unwrap();
    assert!(report.is_clean(), "{:?}", report.errors);
    let fs = Fs::mount(&pool, &opts_io(Durability::Dram, io)).unwrap();
    assert_eq!(fs.read("/a").unwrap(), new_a);
    assert_eq!(fs.read("/c").unwrap(), want_c);
    manyfs::fsck::verify(&fs).unwrap();
}

#[test]
fn batched_transfers_with_pread_pwrite() {
    batched_transfers(DeviceIo::Sync);
}

#[test]
fn batched_transfers_on_io_uring() {
    if uring_available("batched_transfers_on_io_uring") {
        batched_transfers(DeviceIo::Uring);
    }
}

/// Options that send every write to the device (no staging in the pool).
fn unstaged(durability: Durability) -> MountOptions {
    {
        let mut mo = opts(durability);
        mo.stage_max = 0;
        mo
    }
}

#[test]
fn fsync_flushes_the_device_only_when_it_was_written() {
    let dir = tempfile::tempdir().unwrap();
    let (_pool, _data, fs) = mkfs_tier_io(dir.path(), 8 * MIB, &unstaged(Durability::Dram));
    let f = open_rw(&fs, "/a");
    f.write_at(&[1u8; 4096], 0).unwrap();
    f.sync_all().unwrap();
    let s0 = fs.stats().device.unwrap();
    f.sync_all().unwrap();
    let s1 = fs.stats().device.unwrap();
    assert_eq!(s1.flushes, s0.flushes, "nothing written: no flush");
    f.write_at(&[2u8; 4096], 4096).unwrap();
    f.sync_data().unwrap();
    let s2 = fs.stats().device.unwrap();
    assert_eq!(s2.flushes, s1.flushes + 1);
}

fn mount_err(pool: &Path, o: &MountOptions) -> Error {
    match Fs::mount(pool, o) {
        Ok(_) => panic!("mount succeeded"),
        Err(e) => e,
    }
}

#[test]
fn missing_foreign_and_short_devices_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (pool, data, fs) = mkfs_tier(dir.path(), 8 * MIB, Durability::File);
    fs.write("/x", &content(1, 10000)).unwrap();
    fs.unmount().unwrap();
    let o = opts(Durability::File);

    // Missing.
    let moved = dir.path().join("moved");
    std::fs::rename(&data, &moved).unwrap();
    let e = mount_err(&pool, &o);
    assert!(
        matches!(&e, Error::DataDevice { problem: MemberProblem::Missing(_), path } if *path == data),
        "{e}"
    );
    assert_eq!(e.errno(), libc::ENOENT);
    assert!(matches!(
        manyfs::fsck::check(&pool),
        Err(Error::DataDevice {
            problem: MemberProblem::Missing(_),
            ..
        })
    ));
    // The override finds it where it is now.
    let fs = Fs::mount(&pool, &{
        let mut mo = o.clone();
        mo.data_device = Some(moved.clone());
        mo
    })
    .unwrap();
    assert_eq!(fs.read("/x").unwrap(), content(1, 10000));
    drop(fs);
    std::fs::rename(&moved, &data).unwrap();

    // Foreign: another pool's device.
    let other = tempfile::tempdir().unwrap();
    let (_p2, data2, fs2) = mkfs_tier(other.path(), 8 * MIB, Durability::File);
    drop(fs2);
    let e = mount_err(&pool, &{
        let mut mo = o.clone();
        mo.data_device = Some(data2);
        mo
    });
    assert!(
        matches!(
            &e,
            Error::DataDevice {
                problem: MemberProblem::Foreign { .. },
                ..
            }
        ),
        "{e}"
    );
    // Not a device at all.
    let junk = dir.path().join("junk");
    std::fs::write(&junk, vec![0u8; 8 * MIB as usize]).unwrap();
    let e = mount_err(&pool, &{
        let mut mo = o.clone();
        mo.data_device = Some(junk);
        mo
    });
    assert!(
        matches!(
            &e,
            Error::DataDevice {
                problem: MemberProblem::BadHeader(_),
                ..
            }
        ),
        "{e}"
    );

    // Short.
    let full = std::fs::read(&data).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&data)
        .unwrap()
        .set_len(4 * MIB)
        .unwrap();
    let e = mount_err(&pool, &o);
    assert!(
        matches!(&e, Error::DataDevice { problem: MemberProblem::Short { expected, found }, .. }
            if *expected == 8 * MIB && *found == 4 * MIB),
        "{e}"
    );
    assert!(e.to_string().contains("data device"), "{e}");
    assert!(matches!(
        manyfs::fsck::check(&pool),
        Err(Error::DataDevice {
            problem: MemberProblem::Short { .. },
            ..
        })
    ));
    std::fs::write(&data, &full).unwrap();
    let fs = Fs::mount(&pool, &o).unwrap();
    assert_eq!(fs.read("/x").unwrap(), content(1, 10000));
}

#[test]
fn a_full_device_is_no_space_and_recovers_after_deletes() {
    let dir = tempfile::tempdir().unwrap();
    // 1 MiB device: a header and 255 data blocks.
    let (pool, _data, fs) = mkfs_tier(dir.path(), MIB, Durability::File);
    let f = open_rw(&fs, "/big");
    let mut off = 0u64;
    let err = loop {
        match f.write_at(&[7u8; 65536], off) {
            Ok(_) => off += 65536,
            Err(e) => break e,
        }
        assert!(off < 2 * MIB, "the device never filled");
    };
    assert!(matches!(err, Error::NoSpace(_)), "{err}");
    assert_eq!(err.errno(), libc::ENOSPC);
    // The pool (logs, inodes) still has room: metadata works.
    fs.create_dir("/d").unwrap();
    drop(f);
    fs.remove_file("/big").unwrap();
    fs.write("/again", &[1u8; 65536]).unwrap();
    fs.unmount().unwrap();
    let report = manyfs::fsck::check(&pool).unwrap();
    assert!(report.is_clean(), "{:?}", report.errors);
}

#[test]
fn mkfs_refuses_an_existing_file_and_needs_a_size() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::write(&data, b"precious").unwrap();
    let mk = |size, replace| {
        Fs::mkfs(
            &dir.path().join("pool"),
            &{
                let mut mk = MkfsOptions::default();
                mk.size = 16 * MIB;
                mk.replace_existing = replace;
                mk.data = Some(DataDevice {
                    path: data.clone(),
                    size,
                });
                mk
            },
            &opts(Durability::File),
        )
    };
    assert!(matches!(mk(Some(4 * MIB), false), Err(Error::Exists(_))));
    assert_eq!(std::fs::read(&data).unwrap(), b"precious");
    let missing = dir.path().join("nope");
    let e = Fs::mkfs(
        &dir.path().join("pool2"),
        &{
            let mut mk = MkfsOptions::default();
            mk.size = 16 * MIB;
            mk.data = Some(DataDevice {
                path: missing,
                size: None,
            });
            mk
        },
        &opts(Durability::File),
    );
    assert!(matches!(e, Err(Error::InvalidArgument(_))));
    let fs = mk(Some(4 * MIB), true).unwrap();
    assert_eq!(std::fs::metadata(&data).unwrap().len(), 4 * MIB);
    drop(fs);
}

#[test]
fn a_device_on_tmpfs_works_direct_or_buffered() {
    let shm = Path::new("/dev/shm");
    if !shm.is_dir() {
        common::skip(
            "a_device_on_tmpfs_works_direct_or_buffered",
            common::Lack::Setup,
            "no /dev/shm",
        );
        return;
    }
    let dir = tempfile::tempdir_in(shm).unwrap();
    let (pool, _data, fs) = mkfs_tier(dir.path(), 8 * MIB, Durability::Dram);
    fs.write("/x", &content(5, 20000)).unwrap();
    // Older tmpfs refuses O_DIRECT (the device is then used buffered),
    // newer kernels accept it: either way the data reads back.
    let _direct = fs.stats().device.unwrap().direct;
    fs.unmount().unwrap();
    let fs = Fs::mount(&pool, &opts(Durability::Dram)).unwrap();
    assert_eq!(fs.read("/x").unwrap(), content(5, 20000));
}

/// Rewrite the block of the one-slot write entry at `off` of `img` (and
/// its checksum, so that only the block number is wrong).
fn set_entry_block(img: &mut [u8], off: usize, block: u64) {
    let e = &mut img[off..off + 64];
    e[24..32].copy_from_slice(&block.to_le_bytes());
    e[56..60].fill(0);
    let magic: [u8; 4] = e[60..64].try_into().unwrap();
    e[60..64].fill(0);
    let crc = crc32fast::hash(e);
    e[56..60].copy_from_slice(&crc.to_le_bytes());
    e[60..64].copy_from_slice(&magic);
}

#[test]
fn fsck_and_mount_catch_device_blocks_used_twice_or_out_of_range() {
    use manyfs::format::{BLOCK_SIZE, Entry, LOG_PAGE_MAGIC, Superblock};
    let dir = tempfile::tempdir().unwrap();
    let (pool, _data, fs) = mkfs_tier(dir.path(), 8 * MIB, Durability::File);
    fs.write("/a", &content(1, 4096)).unwrap();
    fs.write("/b", &content(2, 4096)).unwrap();
    fs.unmount().unwrap();
    let img = std::fs::read(&pool).unwrap();
    let sb = Superblock::decode(&img[..manyfs::format::SUPERBLOCK_LEN], img.len() as u64).unwrap();
    let bs = BLOCK_SIZE as usize;
    // Every one-slot write entry naming a device block: (offset, block).
    let mut writes = Vec::new();
    for b in sb.data_start as usize..sb.total_blocks as usize {
        let page = &img[b * bs..(b + 1) * bs];
        let magic = u32::from_le_bytes(page[bs - 64 + 20..bs - 64 + 24].try_into().unwrap());
        if magic != LOG_PAGE_MAGIC {
            continue;
        }
        for slot in 0..63 {
            let off = b * bs + slot * 64;
            if let Some((Entry::FileWrite { block, .. }, _)) = Entry::decode(&img[off..off + 64])
                && block > sb.total_blocks
            {
                writes.push((off, block));
            }
        }
    }
    assert!(writes.len() >= 2, "{writes:?}");
    let (victim, own) = writes[1];
    let other = writes.iter().map(|w| w.1).find(|&b| b != own).unwrap();
    let ro = {
        let mut mo = opts(Durability::File);
        mo.read_only = true;
        mo
    };
    for (what, block) in [
        ("used twice", other),
        ("past the device", sb.data_end()),
        ("the device header", sb.total_blocks),
    ] {
        let mut bad = img.clone();
        set_entry_block(&mut bad, victim, block);
        std::fs::write(&pool, &bad).unwrap();
        match manyfs::fsck::check(&pool) {
            Ok(r) => assert!(!r.is_clean(), "{what}: fsck found nothing"),
            Err(e) => assert!(matches!(e, Error::Corrupt { .. }), "{what}: {e}"),
        }
        match Fs::mount(&pool, &ro) {
            Ok(_) => panic!("{what}: mounted"),
            Err(e) => assert!(matches!(e, Error::Corrupt { .. }), "{what}: {e}"),
        }
    }
    std::fs::write(&pool, &img).unwrap();
    assert!(manyfs::fsck::check(&pool).unwrap().is_clean());
}

/// Pool bytes and cache lines persisted per fsync, and device bytes per
/// fsync, over `n` rounds of `op` (each one write and one `fsync`).
fn per_fsync(fs: &Fs, n: u64, mut op: impl FnMut(u64)) -> (f64, f64, f64, f64) {
    let (p0, d0) = (fs.stats().persist, fs.stats().device.unwrap());
    for i in 0..n {
        op(i);
    }
    let (p1, d1) = (fs.stats().persist, fs.stats().device.unwrap());
    let p = p1.since(&p0);
    let n = n as f64;
    (
        p.bytes as f64 / n,
        p.cache_lines as f64 / n,
        (d1.bytes_written - d0.bytes_written) as f64 / n,
        (d1.flushes - d0.flushes) as f64 / n,
    )
}

#[test]
fn persisted_bytes_per_fsync_file_pool_vs_emulated_pm_pool() {
    let mut seen = Vec::new();
    for durability in [Durability::File, Durability::Dram] {
        let dir = tempfile::tempdir().unwrap();
        let (_pool, _data, fs) = mkfs_tier_io(dir.path(), 16 * MIB, &unstaged(durability));
        assert_eq!(fs.stats().persist.mode, durability);
        let f = open_rw(&fs, "/dwsl");
        f.write_at(&[0u8; 4096], 0).unwrap();
        f.sync_data().unwrap();
        // DWSL: the same page overwritten and fsync'd.
        let over = per_fsync(&fs, 64, |i| {
            f.write_at(&[i as u8; 4096], 0).unwrap();
            f.sync_data().unwrap();
        });
        // Appends: every fsync commits a new block's entry.
        let append = per_fsync(&fs, 64, |i| {
            f.write_at(&[i as u8; 4096], (i + 1) * 4096).unwrap();
            f.sync_data().unwrap();
        });
        eprintln!("{durability}: overwrite {over:?}, append {append:?}");
        // Every fsync wrote its 4 KiB to the device and flushed it.
        for (_, _, dev_bytes, flushes) in [over, append] {
            assert!(dev_bytes >= 4096.0, "{durability}: {dev_bytes}");
            assert!(flushes >= 1.0, "{durability}: {flushes}");
        }
        seen.push((durability, over, append));
        fs.unmount().unwrap();
    }
    for (durability, over, append) in seen {
        // An overwrite in place persists nothing on the pool: its fsync is
        // the device write and flush alone.
        assert_eq!((over.0, over.1), (0.0, 0.0), "{durability}: {over:?}");
        // An appending fsync commits the new block's entry and its mark.
        assert!(append.0 > 0.0 && append.1 > 0.0, "{durability}: {append:?}");
        if durability == Durability::File {
            // The kernel writes back whole pages.
            assert_eq!((append.0 * 64.0) % 4096.0, 0.0, "{append:?}");
        }
    }
}

/// Small writes to a synced file on an emulated-PM pool are staged in the
/// pool: their `fsync` persists a page and a few lines of log on the pool
/// and neither writes nor flushes the device, for as long as the loop
/// runs (each fsync frees the block the previous write superseded, so
/// 40 MiB of fsync'd 4 KiB writes fit a 16 MiB pool). The data reads back
/// after a remount, and `destage` then moves it to the device, mtime
/// unchanged, fsck clean.
#[test]
fn small_synced_writes_are_staged_in_a_pm_pool_and_destaged_later() {
    let dir = tempfile::tempdir().unwrap();
    let o = opts(Durability::Dram);
    let (pool, _data, fs) = mkfs_tier_io(dir.path(), 16 * MIB, &o);
    let f = open_rw(&fs, "/dwsl");
    // Not yet synced: the first write goes to the device.
    f.write_at(&content(0, 4096), 0).unwrap();
    let d0 = fs.stats().device.unwrap();
    assert!(d0.bytes_written >= 4096, "{d0:?}");
    f.sync_data().unwrap();
    let over = per_fsync(&fs, 10_000, |i| {
        f.write_at(&content(i as usize, 4096), 0).unwrap();
        f.sync_data().unwrap();
    });
    eprintln!("staged overwrite + fsync: {over:?}");
    assert_eq!((over.2, over.3), (0.0, 0.0), "device untouched: {over:?}");
    // The data page once (its non-temporal copy, made durable by the
    // append's fence: the sync's barrier does not write it back again),
    // the entry's line and commit word, the mark's footer line.
    assert!(over.1 >= 64.0 && over.1 <= 64.0 + 8.0, "{over:?}");
    // A 32 KiB write is staged too, a 64 KiB one is not.
    let before = fs.stats().device.unwrap();
    f.write_at(&content(7, 32 << 10), 4096).unwrap();
    f.sync_data().unwrap();
    let mid = fs.stats().device.unwrap();
    assert_eq!(mid.bytes_written, before.bytes_written, "{mid:?}");
    f.write_at(&content(8, 64 << 10), 1 << 20).unwrap();
    f.sync_data().unwrap();
    let after = fs.stats().device.unwrap();
    assert!(
        after.bytes_written >= mid.bytes_written + (64 << 10),
        "{after:?}"
    );
    assert!(after.flushes > mid.flushes, "{after:?}");
    let mut want = vec![0u8; (1 << 20) + (64 << 10)];
    want[..4096].copy_from_slice(&content(9_999, 4096));
    want[4096..4096 + (32 << 10)].copy_from_slice(&content(7, 32 << 10));
    want[1 << 20..].copy_from_slice(&content(8, 64 << 10));
    let mtime = fs.metadata("/dwsl").unwrap().mtime;
    drop(f);
    fs.unmount().unwrap();

    let fs = Fs::mount(&pool, &o).unwrap();
    let read_all = |fs: &Fs| fs.read("/dwsl").unwrap();
    assert!(read_all(&fs) == want, "staged data after a remount");
    let d1 = fs.stats().device.unwrap();
    // One page at 0, eight at 4 KiB: nine pages moved, one device flush.
    assert_eq!(fs.destage().unwrap(), 9);
    let d2 = fs.stats().device.unwrap();
    assert_eq!(d2.bytes_written - d1.bytes_written, 9 * 4096, "{d2:?}");
    assert_eq!(fs.destage().unwrap(), 0, "nothing left staged");
    assert!(read_all(&fs) == want, "destaged data");
    assert_eq!(fs.metadata("/dwsl").unwrap().mtime, mtime);
    fs.unmount().unwrap();
    let report = manyfs::fsck::check(&pool).unwrap();
    assert!(report.is_clean(), "{:?}", report.errors);
    let fs = Fs::mount(&pool, &o).unwrap();
    assert!(read_all(&fs) == want, "destaged data after a remount");
    assert_eq!(fs.metadata("/dwsl").unwrap().mtime, mtime);
    fs.unmount().unwrap();
}

/// The commit thread destages on its own once staged data fills half the
/// pool, and staging never takes the pool below a quarter free: 12 MiB of
/// synced 32 KiB writes on a 16 MiB pool all land, read back, and the
/// pool keeps room for metadata.
#[test]
fn the_commit_thread_destages_when_the_pool_fills() {
    let dir = tempfile::tempdir().unwrap();
    let o = {
        let mut mo = opts(Durability::Dram);
        mo.commit_interval = std::time::Duration::from_millis(50);
        mo
    };
    let (_pool, _data, fs) = mkfs_tier_io(dir.path(), 32 * MIB, &o);
    let f = open_rw(&fs, "/log");
    f.sync_all().unwrap();
    let chunk = 32 << 10;
    let total = 12 * MIB as usize;
    for (i, off) in (0..total).step_by(chunk).enumerate() {
        f.write_at(&content(i, chunk), off as u64).unwrap();
        f.sync_data().unwrap();
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let free_share = |fs: &Fs| {
        let s = fs.statfs();
        let dev = fs.stats().device.unwrap();
        (s, dev)
    };
    // Staged data moves to the device until the pool is at least half free.
    loop {
        let (_, dev) = free_share(&fs);
        if dev.bytes_written >= 8 * MIB {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no destaging: {dev:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let mut got = vec![0u8; total];
    assert_eq!(f.read_at(&mut got, 0).unwrap(), total);
    for (i, off) in (0..total).step_by(chunk).enumerate() {
        assert!(got[off..off + chunk] == content(i, chunk)[..], "chunk {i}");
    }
    drop(f);
    fs.unmount().unwrap();
}

/// Which writes are staged: only after a small sync of the file, at most
/// four `stage_max` writes' worth between two syncs, never a write larger
/// than `stage_max`; a sync that made much durable stops staging until a
/// small one.
#[test]
fn staging_follows_the_files_sync_pattern() {
    let dir = tempfile::tempdir().unwrap();
    let (_pool, _data, fs) = mkfs_tier(dir.path(), 16 * MIB, Durability::Dram);
    let f = open_rw(&fs, "/f");
    let written = || fs.stats().device.unwrap().bytes_written;
    let page = |i: u64| content(i as usize, 4096);
    // Never synced: to the device.
    let d = written();
    f.write_at(&page(0), 0).unwrap();
    assert_eq!(written() - d, 4096);
    f.sync_data().unwrap();
    // After a small sync: 32 writes of 4 KiB staged (128 KiB), then the
    // device.
    let d = written();
    for i in 0..50 {
        f.write_at(&page(i), i * 4096).unwrap();
    }
    assert_eq!(written() - d, 18 * 4096, "the 18 writes past the budget");
    // That sync covered 50 pages: staging stops...
    f.sync_data().unwrap();
    let d = written();
    f.write_at(&page(1), 0).unwrap();
    assert_eq!(written() - d, 4096);
    // ...until a small sync.
    f.sync_data().unwrap();
    let d = written();
    f.write_at(&page(2), 0).unwrap();
    f.write_at(&content(3, 40 << 10), 8192).unwrap();
    assert_eq!(written() - d, 40 << 10, "the 4 KiB staged, the 40 KiB not");
    f.sync_data().unwrap();
    let mut want = vec![0u8; 50 * 4096];
    for i in 0..50 {
        want[i * 4096..(i + 1) * 4096].copy_from_slice(&page(i as u64));
    }
    want[..4096].copy_from_slice(&page(2));
    want[8192..8192 + (40 << 10)].copy_from_slice(&content(3, 40 << 10));
    assert!(fs.read("/f").unwrap() == want);
    drop(f);
    fs.unmount().unwrap();
}

/// Destaging skips a file that is unlinked but still open (its space is
/// freed at the last close, not moved), and a `stage_max` beyond the
/// bound is refused.
#[test]
fn destage_skips_unlinked_files_and_stage_max_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let (pool, _data, fs) = mkfs_tier(dir.path(), 16 * MIB, Durability::Dram);
    // A page written to the device, synced, then staged and synced.
    let staged_page = |path: &str, first: usize| {
        let f = open_rw(&fs, path);
        for i in [first, first + 1] {
            f.write_at(&content(i, 4096), 0).unwrap();
            f.sync_data().unwrap();
        }
        f
    };
    let f = staged_page("/gone", 1);
    let kept = staged_page("/kept", 3);
    fs.remove_file("/gone").unwrap();
    // Only the linked file's staged page moves.
    assert_eq!(fs.destage().unwrap(), 1);
    let mut got = vec![0u8; 4096];
    f.read_at(&mut got, 0).unwrap();
    assert!(
        got == content(2, 4096),
        "the open, unlinked file still reads"
    );
    drop(f);
    drop(kept);
    fs.unmount().unwrap();
    let report = manyfs::fsck::check(&pool).unwrap();
    assert!(report.is_clean(), "{:?}", report.errors);
    let too_big = {
        let mut mo = opts(Durability::Dram);
        mo.stage_max = manyfs::MAX_STAGE_MAX + 1;
        mo
    };
    assert!(matches!(too_big.validate(), Err(Error::InvalidArgument(_))));
}
