//! Mounts with an emulated topology: per-CPU structures follow the
//! configured CPUs, not the machine's, and the file system works the same.

mod common;

use manyfs::{Fs, MkfsOptions, MountOptions, TopologySpec};

fn mount_with(dir: &std::path::Path, spec: TopologySpec) -> Fs {
    let opts = {
        let mut mo = MountOptions::default();
        mo.topology = spec;
        mo
    };
    Fs::mkfs(
        &dir.join("pool"),
        &{
            let mut mk = MkfsOptions::default();
            mk.size = 64 << 20;
            mk
        },
        &opts,
    )
    .unwrap()
}

#[test]
fn an_emulated_topology_is_what_the_mount_uses() {
    let dir = tempfile::tempdir().unwrap();
    let fs = mount_with(
        dir.path(),
        TopologySpec::Emulated {
            nodes: 2,
            cpus_per_node: 1,
        },
    );
    let t = fs.topology();
    assert_eq!((t.node_count(), t.cpu_count()), (2, 2));
    assert!(t.is_emulated());
    assert_eq!(t.nodes_by_distance(1), vec![1, 0]);
}

#[test]
fn sixty_four_configured_cpus_on_a_small_machine_keep_every_write() {
    let dir = tempfile::tempdir().unwrap();
    let spec = TopologySpec::Emulated {
        nodes: 4,
        cpus_per_node: 16,
    };
    let fs = mount_with(dir.path(), spec);
    assert_eq!(fs.topology().cpu_count(), 64);
    std::thread::scope(|s| {
        for t in 0..8u8 {
            let fs = &fs;
            s.spawn(move || {
                let f = common::open_rw(fs, &format!("/f{t}"));
                for i in 0..64u64 {
                    f.write_all_at(&[t; 4096], i * 4096).unwrap();
                }
            });
        }
    });
    assert!(manyfs::fsck::verify(&fs).unwrap().is_empty());
    fs.unmount().unwrap();
    let opts = {
        let mut mo = MountOptions::default();
        mo.topology = spec;
        mo
    };
    let fs = Fs::mount(&dir.path().join("pool"), &opts).unwrap();
    for t in 0..8u8 {
        assert_eq!(fs.read(format!("/f{t}")).unwrap(), vec![t; 64 * 4096]);
    }
    assert!(manyfs::fsck::verify(&fs).unwrap().is_empty());
}

/// The sub-log index of every log page in the pool image at `pool`.
fn sublog_indexes(pool: &std::path::Path) -> std::collections::BTreeSet<u32> {
    use manyfs::format::{BLOCK_SIZE, LOG_FOOTER_OFFSET, LOG_PAGE_MAGIC};
    let image = std::fs::read(pool).unwrap();
    let word = |at: usize| u32::from_le_bytes(image[at..at + 4].try_into().unwrap());
    (0..image.len() / BLOCK_SIZE as usize)
        .map(|b| b * BLOCK_SIZE as usize + LOG_FOOTER_OFFSET as usize)
        .filter(|&f| word(f + 20) == LOG_PAGE_MAGIC)
        .map(|f| word(f + 16))
        .collect()
}

/// `sublogs=one` (the single-log baseline): writers on 16 configured CPUs
/// share one sub-log per inode, every write is kept, and no log page of
/// another sub-log exists. The default mode runs the same writes as a
/// control (which sub-logs it uses depends on where the scheduler ran
/// the threads).
#[test]
fn one_sublog_per_inode_when_asked() {
    for (sublogs, want_one) in [
        (manyfs::Sublogs::One, true),
        (manyfs::Sublogs::PerCpu, false),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let pool = dir.path().join("pool");
        let opts = {
            let mut mo = MountOptions::default();
            mo.topology = TopologySpec::Emulated {
                nodes: 1,
                cpus_per_node: 16,
            };
            mo.sublogs = sublogs;
            mo.durability = manyfs::Durability::Dram;
            mo
        };
        let mkfs = {
            let mut mk = MkfsOptions::default();
            mk.size = 64 << 20;
            mk
        };
        let fs = Fs::mkfs(&pool, &mkfs, &opts).unwrap();
        let f = common::open_rw(&fs, "/shared");
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let f = &f;
                s.spawn(move || {
                    for i in 0..200u64 {
                        let page = t * 200 + i;
                        f.write_all_at(&[t as u8 + 1; 4096], page * 4096).unwrap();
                    }
                });
            }
        });
        drop(f);
        assert!(manyfs::fsck::verify(&fs).unwrap().is_empty());
        fs.unmount().unwrap();
        let indexes = sublog_indexes(&pool);
        if want_one {
            assert_eq!(indexes, [0].into(), "sublogs=one used {indexes:?}");
        }
        let fs = Fs::mount(&pool, &opts).unwrap();
        let data = fs.read("/shared").unwrap();
        for t in 0..4usize {
            assert!(
                data[t * 200 * 4096..(t + 1) * 200 * 4096]
                    .iter()
                    .all(|&b| b == t as u8 + 1)
            );
        }
    }
}
