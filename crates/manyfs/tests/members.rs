//! Pools with several member files behind one block address space: files
//! that span every member survive a remount and check clean; a missing,
//! swapped, resized or foreign member is a typed error at mount and at
//! fsck; a pool that is one file still is one member.

mod common;

use manyfs::{Durability, Error, Fs, MemberProblem, MkfsOptions, MountOptions, PoolMember};
use std::path::{Path, PathBuf};

const MIB: u64 = 1 << 20;

fn opts(durability: Durability) -> MountOptions {
    {
        let mut mo = MountOptions::default();
        mo.durability = durability;
        mo
    }
}

/// A pool at `dir/pool` (node 0, `sizes[0]` bytes) with members
/// `dir/m1`, `dir/m2`, ... of the other sizes on nodes 1, 2, ...
fn mkfs_members(dir: &Path, sizes: &[u64], durability: Durability) -> (PathBuf, Fs) {
    let pool = dir.join("pool");
    let members = sizes[1..]
        .iter()
        .enumerate()
        .map(|(i, &size)| PoolMember {
            path: dir.join(format!("m{}", i + 1)),
            node: i as u32 + 1,
            size,
        })
        .collect();
    let fs = Fs::mkfs(
        &pool,
        &{
            let mut mk = MkfsOptions::default();
            mk.size = sizes[0];
            mk.members = members;
            mk
        },
        &opts(durability),
    )
    .unwrap();
    (pool, fs)
}

fn content(i: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|j| (i * 31 + j * 7 + j / 4096) as u8)
        .collect()
}

/// Fill most of the pool with files, so that every member holds data.
fn fill(fs: &Fs, files: usize, len: usize) {
    for i in 0..files {
        fs.write(format!("/f{i}"), &content(i, len)).unwrap();
    }
    fs.sync().unwrap();
}

fn check_back(fs: &Fs, files: usize, len: usize) {
    for i in 0..files {
        assert_eq!(
            fs.read(format!("/f{i}")).unwrap(),
            content(i, len),
            "file {i}"
        );
    }
}

/// Mount and unmount the pool, then fsck it: clean.
fn mounts_and_checks_clean(pool: &Path) {
    Fs::mount(pool, &MountOptions::default())
        .unwrap()
        .unmount()
        .unwrap();
    assert_clean(pool);
}

/// Truncate or extend the file at `path` to `len` bytes.
fn set_file_len(path: &Path, len: u64) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
}

fn assert_clean(pool: &Path) {
    let report = manyfs::fsck::check(pool).unwrap();
    assert!(report.is_clean(), "{:?}", report.errors);
}

#[test]
fn two_and_three_members_hold_files_across_every_member() {
    for (sizes, durability) in [
        (vec![4 * MIB, 4 * MIB], Durability::File),
        (vec![4 * MIB, 3 * MIB, 5 * MIB], Durability::File),
        (vec![4 * MIB, 3 * MIB, 5 * MIB], Durability::Dram),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (pool, fs) = mkfs_members(dir.path(), &sizes, durability);
        let total: u64 = sizes.iter().sum();
        // About three quarters of the pool in 256 KiB files.
        let len = 256 << 10;
        let files = (total * 3 / 4 / len as u64) as usize;
        fill(&fs, files, len);
        let members = fs.stats().members;
        assert_eq!(members.len(), sizes.len());
        for (m, &size) in members.iter().zip(&sizes) {
            assert_eq!(m.blocks * 4096, size);
            assert!(m.used_blocks > 8, "member {} barely used: {m:?}", m.index);
        }
        assert_eq!(members[1].node, 1);
        assert_eq!(members[1].first_block, sizes[0] / 4096);
        assert!(manyfs::fsck::verify(&fs).unwrap().is_empty());
        check_back(&fs, files, len);
        fs.unmount().unwrap();

        assert_clean(&pool);
        let fs = Fs::mount(&pool, &opts(durability)).unwrap();
        check_back(&fs, files, len);
        assert!(manyfs::fsck::verify(&fs).unwrap().is_empty());
        // Overwrite across members and remove half: still consistent.
        for i in (0..files).step_by(2) {
            fs.remove_file(format!("/f{i}")).unwrap();
        }
        fs.write("/big", &content(99, 2 * MIB as usize)).unwrap();
        assert!(manyfs::fsck::verify(&fs).unwrap().is_empty());
        fs.unmount().unwrap();
        assert_clean(&pool);
        let fs = Fs::mount(&pool, &opts(durability)).unwrap();
        assert_eq!(fs.read("/big").unwrap(), content(99, 2 * MIB as usize));
        assert_eq!(
            manyfs::diag::superblock(&fs).version(),
            manyfs::format::MEMBER_FORMAT_VERSION
        );
        fs.unmount().unwrap();
    }
}

#[test]
fn small_files_fill_small_members_up_to_their_boundaries() {
    // One-block files (a log page and a data block each) in a
    // pool whose members are small enough that blocks on both sides of
    // every boundary are allocated; syncs merge neighbouring blocks into
    // ranges that cross members.
    let dir = tempfile::tempdir().unwrap();
    let pool = dir.path().join("pool");
    let members = (1..3)
        .map(|i| PoolMember {
            path: dir.path().join(format!("m{i}")),
            node: i,
            size: MIB / 2,
        })
        .collect();
    let mkfs = {
        let mut mk = MkfsOptions::default();
        mk.size = 2 * MIB;
        mk.bytes_per_inode = 4096;
        mk.members = members;
        mk
    };
    let fs = Fs::mkfs(&pool, &mkfs, &MountOptions::default()).unwrap();
    // Until every member holds blocks (where the allocator's per-CPU pools
    // take blocks from depends on the CPUs the test runs on).
    let mut n = 0;
    while n < 150 || !fs.stats().members.iter().all(|m| m.used_blocks > 1) {
        assert!(n < 360, "{:?}", fs.stats().members);
        fs.write(format!("/s{n}"), &content(n, 3000)).unwrap();
        n += 1;
    }
    fs.unmount().unwrap();
    let fs = Fs::mount(&pool, &opts(Durability::File)).unwrap();
    for i in 0..n {
        assert_eq!(fs.read(format!("/s{i}")).unwrap(), content(i, 3000));
    }
    assert!(fs.stats().members.iter().all(|m| m.used_blocks > 1));
    fs.unmount().unwrap();
    assert_clean(&pool);
}

/// The error mount and fsck give for the pool at `pool`, both checked to be
/// the same `Error::Member` for member `index`.
fn member_error(pool: &Path, index: u32) -> (PathBuf, MemberProblem) {
    let at_mount = Fs::mount(pool, &MountOptions::default())
        .err()
        .expect("mount fails");
    let at_fsck = manyfs::fsck::check(pool).expect_err("fsck fails");
    let ro = {
        let mut mo = MountOptions::default();
        mo.read_only = true;
        mo
    };
    let at_ro_mount = Fs::mount(pool, &ro).err().expect("read-only mount fails");
    let mut out = None;
    for err in [at_mount, at_fsck, at_ro_mount] {
        match err {
            Error::Member {
                path,
                index: i,
                problem,
            } => {
                assert_eq!(i, index, "{problem}");
                if let Some((p, q)) = &out {
                    assert_eq!((p, q), (&path, &problem));
                }
                out = Some((path, problem));
            }
            other => panic!("expected a member error, got {other}"),
        }
    }
    out.unwrap()
}

fn three_member_pool() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let (pool, fs) = mkfs_members(dir.path(), &[4 * MIB, 2 * MIB, 2 * MIB], Durability::File);
    fill(&fs, 4, 1 << 20);
    fs.unmount().unwrap();
    (dir, pool)
}

#[test]
fn a_missing_member_is_named() {
    let (dir, pool) = three_member_pool();
    let m2 = dir.path().join("m2");
    std::fs::rename(&m2, dir.path().join("elsewhere")).unwrap();
    let (path, problem) = member_error(&pool, 2);
    assert_eq!(path, m2);
    assert!(matches!(problem, MemberProblem::Missing(_)), "{problem}");
    let err = Fs::mount(&pool, &MountOptions::default()).err().unwrap();
    assert_eq!(err.errno(), libc::ENOENT);
    let msg = err.to_string();
    assert!(
        msg.contains("m2") && msg.contains("member 2") && msg.contains("missing"),
        "{msg}"
    );
    std::fs::rename(dir.path().join("elsewhere"), &m2).unwrap();
    mounts_and_checks_clean(&pool);
}

#[test]
fn swapped_members_are_named() {
    let (dir, pool) = three_member_pool();
    let (m1, m2) = (dir.path().join("m1"), dir.path().join("m2"));
    let tmp = dir.path().join("tmp");
    std::fs::rename(&m1, &tmp).unwrap();
    std::fs::rename(&m2, &m1).unwrap();
    std::fs::rename(&tmp, &m2).unwrap();
    let (path, problem) = member_error(&pool, 1);
    assert_eq!(path, m1);
    assert_eq!(problem, MemberProblem::WrongIndex { found: 2 });
    assert!(
        Fs::mount(&pool, &MountOptions::default())
            .err()
            .unwrap()
            .to_string()
            .contains("swapped"),
    );
}

#[test]
fn a_resized_member_is_named() {
    for (index, new_len) in [(1u64, MIB), (2, 3 * MIB), (0, 5 * MIB), (1, 100)] {
        let (dir, pool) = three_member_pool();
        let path = if index == 0 {
            pool.clone()
        } else {
            dir.path().join(format!("m{index}"))
        };
        let old = std::fs::metadata(&path).unwrap().len();
        set_file_len(&path, new_len);
        let (p, problem) = member_error(&pool, index as u32);
        assert_eq!(p, path);
        assert_eq!(
            problem,
            MemberProblem::Resized {
                expected: old,
                found: new_len
            }
        );
        set_file_len(&path, old);
        if new_len > old {
            // Grown and shrunk back: nothing was lost.
            mounts_and_checks_clean(&pool);
        }
    }
}

#[test]
fn a_member_of_another_pool_is_named() {
    let (dir, pool) = three_member_pool();
    let other = tempfile::tempdir().unwrap();
    let (_, fs) = mkfs_members(other.path(), &[4 * MIB, 2 * MIB, 2 * MIB], Durability::File);
    fs.unmount().unwrap();
    std::fs::copy(other.path().join("m2"), dir.path().join("m2")).unwrap();
    let (_, problem) = member_error(&pool, 2);
    assert!(
        matches!(problem, MemberProblem::Foreign { .. }),
        "{problem}"
    );
    // And a file that is no member at all.
    std::fs::write(dir.path().join("m1"), vec![7u8; 2 * MIB as usize]).unwrap();
    let (_, problem) = member_error(&pool, 1);
    assert!(matches!(problem, MemberProblem::BadHeader(_)), "{problem}");
}

/// `to` relative to the current directory (for a relative member path).
fn relative_from_cwd(to: &Path) -> PathBuf {
    let cwd = std::env::current_dir().unwrap();
    let common = cwd
        .components()
        .zip(to.components())
        .take_while(|(a, b)| a == b)
        .count();
    let mut out = PathBuf::new();
    for _ in common..cwd.components().count() {
        out.push("..");
    }
    for c in to.components().skip(common) {
        out.push(c);
    }
    out
}

#[test]
fn relative_member_paths_move_with_the_pool() {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("a");
    std::fs::create_dir(&dir).unwrap();
    let pool = dir.join("pool");
    let member = relative_from_cwd(&dir.join("m1"));
    assert!(member.is_relative());
    let fs = Fs::mkfs(
        &pool,
        &{
            let mut mk = MkfsOptions::default();
            mk.size = 4 * MIB;
            mk.node = 3;
            mk.members = vec![PoolMember {
                path: member,
                node: 5,
                size: 2 * MIB,
            }];
            mk
        },
        &MountOptions::default(),
    )
    .unwrap();
    fill(&fs, 4, 1 << 20);
    fs.unmount().unwrap();
    let moved = base.path().join("b");
    std::fs::rename(&dir, &moved).unwrap();
    let fs = Fs::mount(&moved.join("pool"), &MountOptions::default()).unwrap();
    check_back(&fs, 4, 1 << 20);
    let m = fs.stats().members;
    assert_eq!((m[0].node, m[1].node), (3, 5));
    assert_eq!(m[1].path, moved.join("m1"));
    fs.unmount().unwrap();
    assert_clean(&moved.join("pool"));
}

#[test]
fn bad_member_options_are_refused_and_leave_no_files() {
    let dir = tempfile::tempdir().unwrap();
    let pool = dir.path().join("pool");
    let mk = |members: Vec<PoolMember>, size: u64| {
        Fs::mkfs(
            &pool,
            &{
                let mut mk = MkfsOptions::default();
                mk.size = size;
                mk.members = members;
                mk
            },
            &MountOptions::default(),
        )
        .err()
        .expect("refused")
    };
    let m = |name: &str, size| PoolMember {
        path: dir.path().join(name),
        node: 1,
        size,
    };
    // Too small a member, the pool file twice, one member twice.
    assert!(matches!(
        mk(vec![m("m1", 4096)], 4 * MIB),
        Error::InvalidArgument(_)
    ));
    assert!(matches!(
        mk(vec![m("pool", MIB)], 4 * MIB),
        Error::InvalidArgument(_)
    ));
    assert!(matches!(
        mk(vec![m("m1", MIB), m("m1", MIB)], 4 * MIB),
        Error::InvalidArgument(_)
    ));
    // Member 0 too small for the metadata of the whole pool.
    assert!(matches!(
        mk(vec![m("m1", 1 << 30)], 64 * 4096),
        Error::InvalidArgument(_)
    ));
    // A member that cannot be created: nothing is left behind.
    let err = mk(vec![m("m1", MIB), m("no/such/dir/m2", MIB)], 4 * MIB);
    assert!(matches!(err, Error::Io { .. }), "{err}");
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
    // An existing member is not replaced without replace_existing.
    std::fs::write(dir.path().join("m1"), b"precious").unwrap();
    assert!(matches!(mk(vec![m("m1", MIB)], 4 * MIB), Error::Exists(_)));
    assert_eq!(std::fs::read(dir.path().join("m1")).unwrap(), b"precious");
}

#[test]
fn a_single_file_pool_is_one_member_of_the_single_file_format() {
    let (_d, pool, fs) = common::fresh(8 * MIB);
    let m = fs.stats().members;
    assert_eq!(m.len(), 1);
    assert_eq!((m[0].index, m[0].node, m[0].blocks), (0, 0, 2048));
    assert_eq!(m[0].path, pool);
    assert_eq!(
        manyfs::diag::superblock(&fs).version(),
        manyfs::format::SINGLE_FILE_FORMAT_VERSION
    );
    fs.unmount().unwrap();
    let b = std::fs::read(&pool).unwrap();
    assert_eq!(u32::from_le_bytes(b[8..12].try_into().unwrap()), 5);
}

#[test]
fn a_damaged_primary_member_table_falls_back_to_the_backup() {
    let (dir, pool) = three_member_pool();
    let _keep = &dir;
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(&pool).unwrap();
    f.write_all_at(&[0xffu8; 64], 128 + 24).unwrap();
    drop(f);
    let fs = Fs::mount(&pool, &MountOptions::default()).unwrap();
    check_back(&fs, 4, 1 << 20);
    fs.unmount().unwrap();
    // Both copies damaged: a clear corruption error.
    let f = std::fs::OpenOptions::new().write(true).open(&pool).unwrap();
    f.write_all_at(&[0xffu8; 64], 4096 + 128 + 24).unwrap();
    drop(f);
    let err = Fs::mount(&pool, &MountOptions::default()).err().unwrap();
    assert!(err.to_string().contains("member table"), "{err}");
    assert!(manyfs::fsck::check(&pool).is_err());
}

/// Local-first placement (NUMA-aware NOVA): on an emulated 2-node
/// topology, a thread on one node gets blocks of that node's member only,
/// data and log pages alike, until the member is full; then it spills to
/// the other member, and the spill is counted. The pool then remounts,
/// verifies and checks clean.
#[test]
fn a_thread_fills_its_own_nodes_member_first_then_spills() {
    let dir = tempfile::tempdir().unwrap();
    let pool = dir.path().join("pool");
    let topology = manyfs::TopologySpec::Emulated {
        nodes: 2,
        cpus_per_node: 1,
    };
    let opts = {
        let mut mo = MountOptions::default();
        mo.durability = Durability::Dram;
        mo.topology = topology;
        mo
    };
    std::thread::scope(|s| {
        s.spawn(|| {
            // Configured CPU = real CPU mod 2, and node = configured CPU.
            let node = common::pin_to_an_allowed_cpu() % 2;
            let other = 1 - node;
            // Member 0 (the pool file) on the other node, member 1 on ours.
            let fs = common::mkfs_spilling_pair(&pool, node, &opts);
            let start = fs.stats().members;
            let mut spilled_at = None;
            for i in 0..12 {
                fs.write(format!("/f{i}"), &content(i, MIB as usize))
                    .unwrap();
                let now = fs.stats().members;
                if fs.stats().node_spills[node] == 0 {
                    assert_eq!(
                        now[0].used_blocks, start[0].used_blocks,
                        "file {i}: the other node's member grew before ours was full"
                    );
                } else if spilled_at.is_none() {
                    spilled_at = Some(i);
                    // Ours is full but for the reserve kept for metadata.
                    let free1 = now[1].blocks - now[1].used_blocks;
                    assert!(
                        free1 * 100 <= now[1].blocks * 5,
                        "spilled with {free1} blocks free"
                    );
                }
            }
            let spilled_at = spilled_at.expect("12 MiB never spilled out of an 8 MiB member");
            assert!(spilled_at >= 6, "spilled at file {spilled_at}");
            assert!(fs.stats().members[0].used_blocks > start[0].used_blocks);
            assert!(manyfs::fsck::verify(&fs).unwrap().is_empty());
            // The spills are our node's, counted on its member (1).
            let spills = fs.stats().node_spills[node];
            assert_eq!(fs.stats().node_spills[other], 0);
            let m = fs.stats().members;
            assert_eq!((m[0].spills, m[1].spills), (0, spills));
            fs.unmount().unwrap();
            spills
        })
        .join()
        .map(|spills| {
            assert_clean(&pool);
            // The count is in member 1's spill record: a remount starts
            // from it.
            let fs = Fs::mount(&pool, &opts).unwrap();
            check_back(&fs, 12, MIB as usize);
            assert!(manyfs::fsck::verify(&fs).unwrap().is_empty());
            let m = fs.stats().members;
            assert_eq!((m[0].spills, m[1].spills), (0, spills));
            assert_eq!(fs.stats().node_spills.iter().sum::<u64>(), spills);
        })
        .unwrap();
    });
}

/// A spill record torn by a crash (its primary copy damaged) falls back
/// to the backup copy; both damaged count from 0 and never stop a mount.
#[test]
fn a_damaged_spill_record_falls_back_to_its_copy_then_to_zero() {
    use manyfs::format::{MEMBER_SPILL_OFFSET, SPILL_RECORD_LEN, SpillRecord};
    use std::os::unix::fs::FileExt;
    let (dir, pool) = three_member_pool();
    let _keep = &dir;
    let m1 = dir.path().join("m1");
    // Records as a mount writes them: member 1 has 7 spills.
    let rec = SpillRecord {
        index: 1,
        spills: 7,
    }
    .encode();
    let f = std::fs::OpenOptions::new().write(true).open(&m1).unwrap();
    f.write_all_at(&rec, MEMBER_SPILL_OFFSET).unwrap();
    f.write_all_at(&rec, MEMBER_SPILL_OFFSET + SPILL_RECORD_LEN as u64)
        .unwrap();
    let spills = |pool: &std::path::Path| {
        let fs = Fs::mount(pool, &MountOptions::default()).unwrap();
        let s: Vec<u64> = fs.stats().members.iter().map(|m| m.spills).collect();
        fs.unmount().unwrap();
        s
    };
    assert_eq!(spills(&pool), vec![0, 7, 0]);
    // Member 2's record in member 1's place fails its checksum.
    let other = SpillRecord {
        index: 2,
        spills: 9,
    }
    .encode();
    f.write_all_at(&other, MEMBER_SPILL_OFFSET).unwrap();
    assert_eq!(spills(&pool), vec![0, 7, 0]);
    f.write_all_at(&[0xff; 4], MEMBER_SPILL_OFFSET + SPILL_RECORD_LEN as u64)
        .unwrap();
    assert_eq!(spills(&pool), vec![0, 0, 0]);
    assert!(manyfs::fsck::check(&pool).is_ok());
}
