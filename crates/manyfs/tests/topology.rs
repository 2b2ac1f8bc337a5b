//! Mounts with an emulated topology: per-CPU structures follow the
//! configured CPUs, not the machine's, and the file system works the same.

mod common;

use manyfs::{Fs, MkfsOptions, MountOptions, TopologySpec};

fn mount_with(dir: &std::path::Path, spec: TopologySpec) -> Fs {
    let opts = MountOptions {
        topology: spec,
        ..Default::default()
    };
    Fs::mkfs(
        &dir.join("pool"),
        &MkfsOptions {
            size: 64 << 20,
            ..Default::default()
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
    assert!(fs.verify().unwrap().is_empty());
    fs.unmount().unwrap();
    let opts = MountOptions {
        topology: spec,
        ..Default::default()
    };
    let fs = Fs::mount(&dir.path().join("pool"), &opts).unwrap();
    for t in 0..8u8 {
        assert_eq!(fs.read(format!("/f{t}")).unwrap(), vec![t; 64 * 4096]);
    }
    assert!(fs.verify().unwrap().is_empty());
}
