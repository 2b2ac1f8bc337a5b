//! A tiered pool (file data on a data device, logs and inodes in the pool)
//! through a real FUSE mount: files written, overwritten, appended and
//! fsync'd with std::fs read back the same, their bytes are on the device,
//! the unmounted pool checks clean, and a remount (at the recorded device
//! path, and with the device moved and named by `-o data=`) reads them
//! back.

mod common;

use std::fs::{self, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;

use common::*;
use manyfs::{DataDevice, Fs, MkfsOptions, MountOptions};

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i / 4096) as u8)
        .collect()
}

/// A scratch directory with a tiered pool (64 MiB pool, 64 MiB device).
fn tiered_scratch() -> (Scratch, std::path::PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix("manyfs-fuse-tier")
        .tempdir()
        .expect("tempdir");
    let pool = dir.path().join("test.pool");
    let data = dir.path().join("test.data");
    let mnt = dir.path().join("mnt");
    fs::create_dir(&mnt).unwrap();
    let fs = retry_busy(|| {
        Fs::mkfs(
            &pool,
            &{
                let mut mk = MkfsOptions::default();
                mk.size = 64 << 20;
                mk.data = Some(DataDevice {
                    path: data.clone(),
                    size: Some(64 << 20),
                });
                mk
            },
            &MountOptions::default(),
        )
    })
    .expect("mkfs --data");
    assert!(manyfs::diag::superblock(&fs).tiered());
    fs.unmount().unwrap();
    (Scratch { dir, pool, mnt }, data)
}

#[test]
fn tiered_pool_through_a_real_mount() {
    if !fuse_available("tiered_pool_through_a_real_mount") {
        return;
    }
    let (s, data) = tiered_scratch();
    let big = pattern(7, (1 << 20) + 1000);
    let mut small = pattern(9, 6000);
    {
        let m = s.mount(&["durability=file"]);
        let root = s.mnt.as_path();
        fs::create_dir(root.join("d")).unwrap();
        // A whole file written and fsync'd.
        let mut f = fs::File::create(root.join("d/big")).unwrap();
        f.write_all(&big).unwrap();
        f.sync_all().unwrap();
        drop(f);
        // A small file: written, overwritten in the middle, appended to,
        // fdatasync'd.
        let mut f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(root.join("small"))
            .unwrap();
        f.write_all(&small).unwrap();
        f.write_all_at(b"OVERWRITTEN", 4090).unwrap();
        small[4090..4101].copy_from_slice(b"OVERWRITTEN");
        f.seek(SeekFrom::End(0)).unwrap();
        f.write_all(b"tail").unwrap();
        small.extend_from_slice(b"tail");
        f.sync_data().unwrap();
        drop(f);
        assert_eq!(fs::read(root.join("d/big")).unwrap(), big);
        assert_eq!(fs::read(root.join("small")).unwrap(), small);
        assert_eq!(
            fs::metadata(root.join("d/big")).unwrap().len(),
            big.len() as u64
        );
        unmount(m);
    }
    // The file data is on the device, not in the pool.
    let dev = fs::read(&data).unwrap();
    let page = &big[8192..12288];
    assert!(
        dev.chunks(4096).any(|c| c == page),
        "data not on the device"
    );
    let pool = fs::read(&s.pool).unwrap();
    assert!(!pool.chunks(4096).any(|c| c == page), "data in the pool");
    drop((dev, pool));
    s.fsck();

    // Remount where the pool recorded the device, its transfers through
    // io_uring (or, where the kernel refuses it, pread/pwrite).
    {
        let m = s.mount(&["durability=file", "device_io=uring"]);
        assert_eq!(fs::read(s.mnt.join("d/big")).unwrap(), big);
        assert_eq!(fs::read(s.mnt.join("small")).unwrap(), small);
        fs::write(s.mnt.join("after"), b"second mount").unwrap();
        unmount(m);
    }
    s.fsck();

    // The device moved: `-o data=` names it.
    let moved = s.dir.path().join("moved.data");
    fs::rename(&data, &moved).unwrap();
    let opt = format!("data={}", moved.display());
    {
        let m = s.mount(&["durability=file", &opt]);
        assert_eq!(fs::read(s.mnt.join("d/big")).unwrap(), big);
        assert_eq!(fs::read(s.mnt.join("small")).unwrap(), small);
        assert_eq!(fs::read(s.mnt.join("after")).unwrap(), b"second mount");
        unmount(m);
    }
    // Without it the mount is refused with a typed error, not a panic.
    let cfg = manyfs_fuse::FuseConfig::parse_options(&["durability=file"]).unwrap();
    match retry_busy(|| Fs::mount(&s.pool, &cfg.fs)) {
        Err(manyfs::Error::DataDevice { .. }) => {}
        Err(e) => panic!("expected a data-device error, got {e}"),
        Ok(_) => panic!("mounted without its device"),
    }
}
