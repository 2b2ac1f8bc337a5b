//! Threads racing create, link, unlink, rename (within and across
//! directories, onto files and onto empty directories), mkdir and rmdir over a few
//! shared directories. Errors such as EEXIST or ENOENT are expected; what
//! must hold is that memory and media agree afterwards, before and after a
//! remount, and that fsck is clean.

mod common;

use manyfs::lowlevel::InodeOps;
use manyfs::{Fs, MountOptions};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

#[test]
fn racing_namespace_operations_stay_consistent() {
    let (_dir, pool, fs) = common::fresh(64 << 20);
    for d in ["/a", "/b", "/c"] {
        fs.create_dir(d).unwrap();
    }
    let dirs = ["/a", "/b", "/c", "/a/sub", "/b/sub"];
    std::thread::scope(|s| {
        for t in 0..6u64 {
            let fs = &fs;
            s.spawn(move || {
                let mut rng = StdRng::seed_from_u64(t + 1);
                for _ in 0..1500 {
                    let d1 = dirs[rng.random_range(0..dirs.len())];
                    let d2 = dirs[rng.random_range(0..dirs.len())];
                    let n1 = format!("{d1}/n{}", rng.random_range(0..6));
                    let n2 = format!("{d2}/n{}", rng.random_range(0..6));
                    let _ = match rng.random_range(0..9) {
                        0 | 1 => fs.write(&n1, &rng.random::<u64>().to_le_bytes()),
                        2 => fs.hard_link(&n1, &n2),
                        3 => fs.remove_file(&n1),
                        4 => fs.rename(&n1, &n2),
                        5 => fs.create_dir(format!("{d1}/sub")),
                        6 => fs.remove_dir(format!("{d1}/sub")),
                        7 => fs.rename(format!("{d1}/sub"), format!("{d2}/moved{}", t % 2)),
                        // Within one directory onto a directory (the
                        // replaced one must be empty): the one same-directory
                        // rename that locks a second directory.
                        _ => fs.rename(format!("{d1}/moved{}", t % 2), format!("{d1}/sub")),
                    };
                }
            });
        }
    });
    let diffs = manyfs::fsck::verify(&fs).unwrap();
    assert!(diffs.is_empty(), "{diffs:?}");
    fs.unmount().unwrap();
    let report = manyfs::fsck::check(&pool).unwrap();
    assert!(report.is_clean(), "{:?}", report.errors);
    let fs = Fs::mount(&pool, &MountOptions::default()).unwrap();
    assert!(manyfs::fsck::verify(&fs).unwrap().is_empty());
}

/// Threads racing create, unlink, rename and exchange in one directory:
/// each thread on names of its own (results checked against a model, op by
/// op) and all of them on a few shared names (results checked by what
/// they must preserve: each shared file is one some thread created and
/// none unlinked, so their number is the creates minus the unlinks, and
/// renames and exchanges only move them). Then memory and media agree, and
/// the same names with the same contents come back after a remount.
#[test]
fn one_directory_different_and_equal_names_give_checked_results() {
    use manyfs::Error;
    use manyfs::lowlevel::Rename;
    use std::collections::{BTreeMap, BTreeSet};
    use std::ffi::OsStr;

    const THREADS: u64 = 4;
    const OPS: usize = 2500;
    const SHARED: u64 = 6;
    let (_dir, pool, fs) = common::fresh(64 << 20);
    fs.create_dir("/d").unwrap();
    let d = fs.metadata("/d").unwrap().ino;
    /// What one thread saw: its own names with their contents, the contents
    /// it created under shared names, and its creates minus its unlinks.
    type ThreadResult = (BTreeMap<String, Vec<u8>>, BTreeSet<Vec<u8>>, i64);
    let results: Vec<ThreadResult> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let fs = &fs;
                s.spawn(move || {
                    let mut rng = StdRng::seed_from_u64(100 + t);
                    // Own names: name -> content.
                    let mut own: BTreeMap<String, Vec<u8>> = BTreeMap::new();
                    // Contents this thread created under shared names.
                    let mut created = BTreeSet::new();
                    let mut live: i64 = 0;
                    for i in 0..OPS {
                        let tag = format!("t{t}-{i}").into_bytes();
                        let a = format!("p{t}-{}", rng.random_range(0..12));
                        let b = format!("p{t}-{}", rng.random_range(0..12));
                        let sa = format!("s{}", rng.random_range(0..SHARED));
                        let sb = format!("s{}", rng.random_range(0..SHARED));
                        let rename = |x: &str, y: &str, how| {
                            fs.rename_at(d, OsStr::new(x), d, OsStr::new(y), how)
                        };
                        match rng.random_range(0..9) {
                            0 | 1 => {
                                let r = create_with(fs, &format!("/d/{a}"), &tag);
                                assert_eq!(r.is_ok(), !own.contains_key(&a), "create {a}: {r:?}");
                                own.entry(a).or_insert(tag);
                            }
                            2 => {
                                let r = fs.remove_file(format!("/d/{a}"));
                                assert_eq!(
                                    r.is_ok(),
                                    own.remove(&a).is_some(),
                                    "unlink {a}: {r:?}"
                                );
                            }
                            3 => {
                                let r = rename(&a, &b, Rename::Replace);
                                match own.remove(&a) {
                                    Some(v) => {
                                        r.unwrap();
                                        own.insert(b, v);
                                    }
                                    None => {
                                        assert!(matches!(r, Err(Error::NotFound(_))), "{r:?}")
                                    }
                                }
                            }
                            4 if a == b => {
                                let r = rename(&a, &b, Rename::Exchange);
                                assert_eq!(r.is_ok(), own.contains_key(&a), "exchange {a}: {r:?}");
                            }
                            4 => {
                                let r = rename(&a, &b, Rename::Exchange);
                                match (own.remove(&a), own.remove(&b)) {
                                    (Some(x), Some(y)) => {
                                        r.unwrap();
                                        own.insert(a, y);
                                        own.insert(b, x);
                                    }
                                    (x, y) => {
                                        assert!(r.is_err(), "exchange {a} {b}");
                                        own.extend(x.map(|v| (a.clone(), v)));
                                        own.extend(y.map(|v| (b.clone(), v)));
                                    }
                                }
                            }
                            5 | 6 => {
                                if create_with(fs, &format!("/d/{sa}"), &tag).is_ok() {
                                    created.insert(tag);
                                    live += 1;
                                }
                            }
                            7 => {
                                if fs.remove_file(format!("/d/{sa}")).is_ok() {
                                    live -= 1;
                                }
                            }
                            _ => {
                                let how = if i % 2 == 0 {
                                    Rename::NoReplace
                                } else {
                                    Rename::Exchange
                                };
                                let _ = rename(&sa, &sb, how);
                            }
                        }
                    }
                    (own, created, live)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });

    let check = |fs: &Fs| {
        let mut expect_own = BTreeMap::new();
        let mut created = BTreeSet::new();
        let mut live = 0;
        for (own, c, l) in &results {
            expect_own.extend(own.iter().map(|(k, v)| (k.clone(), v.clone())));
            created.extend(c.iter().cloned());
            live += l;
        }
        let names: Vec<String> = fs
            .read_dir("/d")
            .unwrap()
            .into_iter()
            .map(|e| e.name.into_string().unwrap())
            .collect();
        let mut own = BTreeMap::new();
        let mut shared = BTreeSet::new();
        for n in &names {
            let content = fs.read(format!("/d/{n}")).unwrap();
            if n.starts_with('s') {
                assert!(created.contains(&content), "{n} holds {content:?}");
                assert!(shared.insert(content), "two shared names hold one file");
            } else {
                own.insert(n.clone(), content);
            }
        }
        assert_eq!(own, expect_own);
        assert_eq!(shared.len() as i64, live);
        let diffs = manyfs::fsck::verify(fs).unwrap();
        assert!(diffs.is_empty(), "{diffs:?}");
        names
    };
    let before = check(&fs);
    fs.unmount().unwrap();
    let report = manyfs::fsck::check(&pool).unwrap();
    assert!(report.is_clean(), "{:?}", report.errors);
    let fs = Fs::mount(&pool, &MountOptions::default()).unwrap();
    assert_eq!(check(&fs), before);
}

/// Create `path` (it must not exist) holding `data`.
fn create_with(fs: &Fs, path: &str, data: &[u8]) -> manyfs::Result<()> {
    let f = manyfs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(fs, path)?;
    f.write_at(data, 0)?;
    Ok(())
}

/// Lookups take no lock: while a writer renames fresh files over a name,
/// exchanges two names, and other threads create and unlink hundreds of
/// names in the same directory (its name tables grow and shrink, its log
/// is compacted), readers looking the stable names up by path must always
/// find them, with contents one of the writers wrote, and never find a
/// churned name the churning thread knows is gone. Then memory and media
/// agree, and the last contents come back after a remount.
#[test]
fn lock_free_lookups_never_miss_a_name_that_stays() {
    use std::sync::atomic::{AtomicBool, Ordering};
    const CHURNERS: u64 = 2;
    const ROUNDS: usize = 6;
    const BATCH: usize = 300;
    let (_dir, pool, fs) = common::fresh(128 << 20);
    fs.create_dir("/d").unwrap();
    fs.write("/d/target", b"r0").unwrap();
    fs.write("/d/x", b"x").unwrap();
    fs.write("/d/y", b"y").unwrap();
    let done = AtomicBool::new(false);
    let last = std::thread::scope(|s| {
        let (fs, done) = (&fs, &done);
        // Readers: the stable names are always there.
        let readers: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(move || {
                    let mut n = 0u64;
                    while !done.load(Ordering::Acquire) || n < 100 {
                        let t = fs.read("/d/target").expect("target missing");
                        assert!(t.starts_with(b"r"), "{t:?}");
                        let (x, y) = (fs.read("/d/x").unwrap(), fs.read("/d/y").unwrap());
                        assert!(matches!(&x[..], b"x" | b"y"), "{x:?}");
                        assert!(matches!(&y[..], b"x" | b"y"), "{y:?}");
                        n += 1;
                    }
                })
            })
            .collect();
        // Churners: a batch of creates, each checked by a lookup, then
        // the unlinks, each checked gone.
        let churners: Vec<_> = (0..CHURNERS)
            .map(|t| {
                s.spawn(move || {
                    for _ in 0..ROUNDS {
                        for i in 0..BATCH {
                            let p = format!("/d/c{t}-{i}");
                            fs.write(&p, p.as_bytes()).unwrap();
                            assert_eq!(fs.read(&p).unwrap(), p.as_bytes());
                        }
                        for i in 0..BATCH {
                            let p = format!("/d/c{t}-{i}");
                            fs.remove_file(&p).unwrap();
                            assert!(fs.metadata(&p).is_err(), "{p} still found");
                        }
                    }
                })
            })
            .collect();
        // The renamer and exchanger.
        let mut r = 0u64;
        while churners.iter().any(|c| !c.is_finished()) || r < 200 {
            r += 1;
            fs.write("/d/tmp", format!("r{r}").as_bytes()).unwrap();
            fs.rename("/d/tmp", "/d/target").unwrap();
            fs.rename_at(
                fs.metadata("/d").unwrap().ino,
                std::ffi::OsStr::new("x"),
                fs.metadata("/d").unwrap().ino,
                std::ffi::OsStr::new("y"),
                manyfs::lowlevel::Rename::Exchange,
            )
            .unwrap();
        }
        for c in churners {
            c.join().unwrap();
        }
        done.store(true, Ordering::Release);
        for rd in readers {
            rd.join().unwrap();
        }
        r
    });
    let names = |fs: &Fs| {
        let mut v: Vec<_> = fs
            .read_dir("/d")
            .unwrap()
            .into_iter()
            .map(|e| e.name.to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names(&fs), ["target", "x", "y"]);
    let xy = |fs: &Fs| (fs.read("/d/x").unwrap(), fs.read("/d/y").unwrap());
    let want = if last % 2 == 0 {
        (b"x".to_vec(), b"y".to_vec())
    } else {
        (b"y".to_vec(), b"x".to_vec())
    };
    assert_eq!(xy(&fs), want);
    assert_eq!(fs.read("/d/target").unwrap(), format!("r{last}").as_bytes());
    assert!(manyfs::fsck::verify(&fs).unwrap().is_empty());
    fs.unmount().unwrap();
    let report = manyfs::fsck::check(&pool).unwrap();
    assert!(report.is_clean(), "{:?}", report.errors);
    let fs = Fs::mount(&pool, &MountOptions::default()).unwrap();
    assert!(manyfs::fsck::verify(&fs).unwrap().is_empty());
    assert_eq!(names(&fs), ["target", "x", "y"]);
    assert_eq!(xy(&fs), want);
    assert_eq!(fs.read("/d/target").unwrap(), format!("r{last}").as_bytes());
}

/// The shard count per directory is a mount option of DRAM state only:
/// threads creating and unlinking in one directory get the same names
/// with one shard or 64, and the directory reads back the same when the
/// pool is mounted again with another count. A count that is not a power
/// of two is refused.
#[test]
fn any_shard_count_gives_the_same_names_and_remounts_with_another() {
    for (shards, remount_with) in [(1usize, 64usize), (64, 1), (1024, 16)] {
        let opts = {
            let mut mo = MountOptions::default();
            mo.dir_shards = Some(shards);
            mo
        };
        let (_dir, pool, fs) = common::fresh_with(64 << 20, &opts);
        fs.create_dir("/d").unwrap();
        std::thread::scope(|s| {
            for t in 0..2 {
                let fs = &fs;
                s.spawn(move || {
                    for i in 0..400 {
                        fs.write(format!("/d/t{t}-{i}"), format!("{t}:{i}").as_bytes())
                            .unwrap();
                        if i % 3 == 0 {
                            fs.remove_file(format!("/d/t{t}-{}", i / 2)).unwrap();
                        }
                    }
                });
            }
        });
        let mut want = std::collections::BTreeSet::new();
        for t in 0..2 {
            let mut live: std::collections::BTreeSet<usize> = std::collections::BTreeSet::new();
            for i in 0..400 {
                live.insert(i);
                if i % 3 == 0 {
                    assert!(live.remove(&(i / 2)), "t{t}-{} was live", i / 2);
                }
            }
            want.extend(live.into_iter().map(|i| format!("t{t}-{i}")));
        }
        let names = |fs: &Fs| -> std::collections::BTreeSet<String> {
            common::dir_names(fs, "/d")
                .into_iter()
                .map(|n| n.into_string().unwrap())
                .collect()
        };
        assert_eq!(names(&fs), want, "{shards} shards");
        assert!(manyfs::fsck::verify(&fs).unwrap().is_empty());
        fs.unmount().unwrap();
        let again = {
            let mut mo = MountOptions::default();
            mo.dir_shards = Some(remount_with);
            mo
        };
        let fs = Fs::mount(&pool, &again).unwrap();
        assert_eq!(names(&fs), want, "{shards} then {remount_with} shards");
        for n in want.iter().take(20) {
            let (t, i) = n[1..].split_once('-').unwrap();
            assert_eq!(
                fs.read(format!("/d/{n}")).unwrap(),
                format!("{t}:{i}").as_bytes()
            );
        }
        fs.unmount().unwrap();
        let report = manyfs::fsck::check(&pool).unwrap();
        assert!(report.is_clean(), "{:?}", report.errors);
        let bad = {
            let mut mo = MountOptions::default();
            mo.dir_shards = Some(48);
            mo
        };
        assert!(matches!(
            Fs::mount(&pool, &bad),
            Err(manyfs::Error::InvalidArgument(_))
        ));
    }
}

/// Threads racing to create the same names (`O_CREAT | O_EXCL`): each name
/// is created by exactly one of them, the others get `EEXIST`, and the
/// inodes the losers made before they saw the name taken are freed again:
/// once every name is removed and a sync has run, as many inodes are free
/// as before, memory and media agree, and fsck is clean.
#[test]
fn racing_exclusive_creates_of_one_name_make_one_file_and_leak_no_inode() {
    use manyfs::Error;
    const THREADS: usize = 4;
    const NAMES: usize = 64;
    const ROUNDS: usize = 40;
    let (_dir, pool, fs) = common::fresh(64 << 20);
    fs.create_dir("/d").unwrap();
    fs.sync().unwrap();
    let free_before = fs.statfs().free_inodes;
    for round in 0..ROUNDS {
        let won: Vec<Vec<usize>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..THREADS)
                .map(|t| {
                    let fs = &fs;
                    s.spawn(move || {
                        let mut won = Vec::new();
                        // Each thread walks the names from its own start,
                        // so that every name is contended at some point.
                        for i in 0..NAMES {
                            let k = (i + t * NAMES / THREADS) % NAMES;
                            let tag = [t as u8, round as u8];
                            match create_with(fs, &format!("/d/x{k}"), &tag) {
                                Ok(()) => won.push(k),
                                Err(Error::Exists(_)) => {}
                                Err(e) => panic!("create /d/x{k}: {e}"),
                            }
                        }
                        won
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut winners = vec![0usize; NAMES];
        for (t, names) in won.iter().enumerate() {
            for &k in names {
                winners[k] += 1;
                assert_eq!(
                    fs.read(format!("/d/x{k}")).unwrap(),
                    [t as u8, round as u8],
                    "/d/x{k} holds what its creator wrote"
                );
            }
        }
        assert!(
            winners.iter().all(|&n| n == 1),
            "round {round}: {winners:?}"
        );
        for k in 0..NAMES {
            fs.remove_file(format!("/d/x{k}")).unwrap();
        }
    }
    // Freed inode numbers come back once a sync made their removal durable.
    fs.sync().unwrap();
    assert_eq!(fs.statfs().free_inodes, free_before);
    let diffs = manyfs::fsck::verify(&fs).unwrap();
    assert!(diffs.is_empty(), "{diffs:?}");
    fs.unmount().unwrap();
    let report = manyfs::fsck::check(&pool).unwrap();
    assert!(report.is_clean(), "{:?}", report.errors);
}
