//! A real pool image with fuzzer-chosen bytes overwritten (mostly in its
//! metadata: superblocks, journal, inode table, log pages) must mount and be
//! read without a panic, or be refused with an error.
#![no_main]
use libfuzzer_sys::fuzz_target;
use manyfs::{Durability, Fs, MkfsOptions, MountOptions, OpenOptions};
use std::path::PathBuf;
use std::sync::OnceLock;

struct Base {
    _dir: tempfile::TempDir,
    image: Vec<u8>,
    path: PathBuf,
}

fn base() -> &'static Base {
    static BASE: OnceLock<Base> = OnceLock::new();
    BASE.get_or_init(|| {
        let dir = tempfile::tempdir_in("/dev/shm")
            .or_else(|_| tempfile::tempdir())
            .unwrap();
        let pool = dir.path().join("base");
        let opts = {
            let mut mo = MountOptions::default();
            mo.durability = Durability::Dram;
            mo
        };
        let fs = Fs::mkfs(
            &pool,
            &{
                let mut mk = MkfsOptions::default();
                mk.size = 512 << 10;
                mk
            },
            &opts,
        )
        .unwrap();
        fs.create_dir_all("/d/e").unwrap();
        fs.write("/d/f", &vec![3u8; 9000]).unwrap();
        fs.write("/g", b"hello").unwrap();
        fs.hard_link("/g", "/d/e/h").unwrap();
        fs.symlink("/d/f", "/s").unwrap();
        fs.rename("/d/f", "/d/e/f2").unwrap();
        let f = OpenOptions::new().write(true).open(&fs, "/d/e/f2").unwrap();
        f.set_len(5000).unwrap();
        drop(f);
        drop(fs);
        let image = std::fs::read(&pool).unwrap();
        Base {
            path: dir.path().join("fuzzed"),
            _dir: dir,
            image,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let b = base();
    let mut image = b.image.clone();
    // Each 6-byte chunk: a 4-byte offset (folded into the image) and 2 bytes
    // to write there.
    for chunk in data.chunks_exact(6) {
        let off =
            u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]) as usize % image.len();
        image[off] = chunk[4];
        if off + 1 < image.len() {
            image[off + 1] = chunk[5];
        }
    }
    std::fs::write(&b.path, &image).unwrap();
    let _ = manyfs::fsck::check(&b.path);
    let opts = {
        let mut mo = MountOptions::default();
        mo.durability = Durability::Dram;
        mo.read_only = true;
        mo
    };
    if let Ok(fs) = Fs::mount(&b.path, &opts) {
        let _ = manyfs::fsck::verify(&fs);
        let mut stack = vec![PathBuf::from("/")];
        while let Some(d) = stack.pop() {
            let Ok(entries) = fs.read_dir(&d) else {
                continue;
            };
            for e in entries {
                let p = d.join(&e.name);
                match e.kind {
                    manyfs::FileKind::Dir => stack.push(p),
                    manyfs::FileKind::File => {
                        // Bounded reads: a crafted size may be huge and sparse.
                        if let Ok(f) = OpenOptions::new().read(true).open(&fs, &p) {
                            let mut buf = vec![0u8; 64 << 10];
                            let _ = f.read_at(&mut buf, 0);
                        }
                    }
                    manyfs::FileKind::Symlink => {
                        let _ = fs.read_link(&p);
                    }
                    // No content: their attributes are all there is to read.
                    manyfs::FileKind::Fifo
                    | manyfs::FileKind::CharDevice
                    | manyfs::FileKind::BlockDevice
                    | manyfs::FileKind::Socket => {
                        let _ = fs.metadata(&p);
                    }
                }
            }
        }
    }
});
