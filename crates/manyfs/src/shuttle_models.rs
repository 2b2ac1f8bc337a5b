//! Model checking of the concurrency protocols with shuttle: the library is
//! compiled with `--features shuttle`, which swaps its atomics (and parking)
//! for shuttle's, so these run the real lock-word, radix-install and
//! big-reader code under thousands of randomised and PCT schedules.

use crate::index::PageIndex;
use crate::index::cascade::CascadeRadix;
use crate::index::radix::CasRadix;
use crate::index::rw::RwRadix;
use crate::lock::{Access, BigReaderLock, RangeGuard, RangeLock, SegmentWord, SrlTree};
use shuttle::sync::Arc;
use shuttle::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use shuttle::thread;

const ITERATIONS: usize = 3000;

/// Wall-clock bound of one model's exploration. A deadlock or livelock
/// *inside* shuttle's world is reported by shuttle itself (no runnable
/// thread, or its step limit); this catches the hangs it cannot see: a
/// blocking call on something shuttle does not control (a std or
/// parking_lot lock, a real sleep or I/O) stops every schedule for good.
const WALL_CLOCK_LIMIT: std::time::Duration = std::time::Duration::from_secs(600);

fn both(f: impl Fn() + Send + Sync + 'static) {
    let test = std::thread::current()
        .name()
        .unwrap_or("shuttle model")
        .to_string();
    let what = format!("{test}: {ITERATIONS} random and {ITERATIONS} PCT schedules");
    crate::test_support::within(WALL_CLOCK_LIMIT, &what, move || {
        let f = std::sync::Arc::new(f);
        let g = f.clone();
        shuttle::check_random(move || f(), ITERATIONS);
        shuttle::check_pct(move || g(), ITERATIONS, 3);
    });
}

#[test]
fn segment_word_excludes_writers_from_everyone() {
    both(|| {
        let word = Arc::new(SegmentWord::new());
        let inside = Arc::new(AtomicI64::new(0));
        let mut handles = vec![];
        for t in 0..3 {
            let (word, inside) = (word.clone(), inside.clone());
            handles.push(thread::spawn(move || {
                for _ in 0..2 {
                    if t == 0 {
                        word.lock_read();
                        assert!(
                            inside.fetch_add(1, Ordering::SeqCst) >= 0,
                            "reader with writer"
                        );
                        inside.fetch_sub(1, Ordering::SeqCst);
                        word.unlock_read();
                    } else {
                        word.lock_write();
                        assert_eq!(inside.swap(-1, Ordering::SeqCst), 0, "writer with others");
                        inside.store(0, Ordering::SeqCst);
                        word.unlock_write();
                    }
                }
            }));
        }
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(word.raw() & 0xdfff_ffff, 0, "word not free at the end");
    });
}

#[test]
fn srl_tree_overlapping_ranges_exclude_and_disjoint_do_not_block() {
    both(|| {
        let lock = Arc::new(SrlTree::new(4096));
        let cells: Arc<Vec<AtomicI64>> = Arc::new((0..3).map(|_| AtomicI64::new(0)).collect());
        let ranges = [
            (0u64, 2u64, Access::Write),
            (1, 3, Access::Write),
            (0, 3, Access::Read),
        ];
        let mut handles = vec![];
        for (a, b, access) in ranges {
            let (lock, cells) = (lock.clone(), cells.clone());
            handles.push(thread::spawn(move || {
                let _g = RangeGuard::new(&*lock as &dyn RangeLock, a * 4096, b * 4096, access);
                for c in &cells[a as usize..b as usize] {
                    match access {
                        Access::Write => assert_eq!(c.swap(-1, Ordering::SeqCst), 0),
                        Access::Read => assert!(c.fetch_add(1, Ordering::SeqCst) >= 0),
                    }
                }
                for c in &cells[a as usize..b as usize] {
                    match access {
                        Access::Write => c.store(0, Ordering::SeqCst),
                        Access::Read => {
                            c.fetch_sub(1, Ordering::SeqCst);
                        }
                    }
                }
            }));
        }
        for h in handles {
            h.join().unwrap();
        }
    });
}

#[test]
fn radix_install_race_yields_one_node() {
    both(|| {
        let tree: Arc<CasRadix<AtomicU64>> = Arc::new(CasRadix::new());
        let mut handles = vec![];
        for t in 0..3u64 {
            let tree = tree.clone();
            handles.push(thread::spawn(move || {
                // Same leaf for all threads; key 7 shared by all.
                tree.get_or_insert(7).fetch_add(1, Ordering::SeqCst);
                tree.get_or_insert(8 + t).store(t + 1, Ordering::SeqCst);
                tree.get_or_insert(7) as *const AtomicU64 as usize
            }));
        }
        let addrs: Vec<usize> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert!(
            addrs.windows(2).all(|w| w[0] == w[1]),
            "threads saw different nodes"
        );
        assert_eq!(
            tree.get(7).unwrap().load(Ordering::SeqCst),
            3,
            "an increment was lost"
        );
        for t in 0..3u64 {
            assert_eq!(tree.get(8 + t).unwrap().load(Ordering::SeqCst), t + 1);
        }
    });
}

#[test]
fn big_reader_lock_excludes_truncate_from_io() {
    both(|| {
        let lock = Arc::new(BigReaderLock::new(2));
        let inside = Arc::new(AtomicI64::new(0));
        let mut handles = vec![];
        for t in 0..3 {
            let (lock, inside) = (lock.clone(), inside.clone());
            handles.push(thread::spawn(move || {
                if t == 0 {
                    let _g = lock.write();
                    assert_eq!(
                        inside.swap(-1, Ordering::SeqCst),
                        0,
                        "truncate with I/O in flight"
                    );
                    inside.store(0, Ordering::SeqCst);
                } else {
                    let _g = lock.read();
                    assert!(
                        inside.fetch_add(1, Ordering::SeqCst) >= 0,
                        "I/O during truncate"
                    );
                    inside.fetch_sub(1, Ordering::SeqCst);
                }
            }));
        }
        for h in handles {
            h.join().unwrap();
        }
    });
}

mod log_append {
    use crate::layout::CommitRule;
    use crate::layout::{BLOCK_SIZE, Entry, FileKind, Superblock};
    use crate::log::scan::{ScanBuf, scan_log_buf};
    use crate::log::{InodeLog, LogSpace};
    use crate::media::{Durability, Media};
    use shuttle::sync::atomic::AtomicU32;
    use shuttle::thread;
    use std::sync::Arc;

    struct Space {
        media: Arc<Media>,
        free: std::sync::Mutex<Vec<u64>>,
        live: Vec<AtomicU32>,
        data_start: u64,
    }

    impl LogSpace for Space {
        fn media(&self) -> &Media {
            &self.media
        }
        fn alloc_meta_block(&self) -> crate::Result<u64> {
            self.free
                .lock()
                .unwrap()
                .pop()
                .ok_or(crate::Error::NoSpace("test"))
        }
        fn free_blocks(&self, first: u64, count: u64) {
            self.free.lock().unwrap().extend(first..first + count);
        }
        fn log_word_at(&self, ino: u64) -> u64 {
            use crate::layout::{INODE_LOG_ARRAY_OFFSET, INODE_SIZE, INODE_TABLE_START};
            INODE_TABLE_START * BLOCK_SIZE + ino * INODE_SIZE + INODE_LOG_ARRAY_OFFSET
        }
        fn live_counter(&self, page: u64) -> Option<&AtomicU32> {
            self.live.get(page.checked_sub(self.data_start)? as usize)
        }
    }

    /// Two threads append multi-slot entries to the same sub-log (crossing
    /// into a second log page); every entry is found once by a recovery scan,
    /// each thread's in its order, and no two entries overlap.
    #[test]
    fn concurrent_appends_to_one_sublog_all_recover() {
        let dir = tempfile::tempdir().unwrap();
        let size = 1u64 << 20;
        let media = Arc::new(Media::create(&dir.path().join("p"), size, Durability::Dram).unwrap());
        let sb = Superblock::for_size(size, 16 << 10).unwrap();
        super::both(move || {
            let array = sb.data_start;
            media.zero(0, size as usize).unwrap();
            let space = Arc::new(Space {
                media: media.clone(),
                free: std::sync::Mutex::new(
                    (sb.data_start + 1..sb.data_start + 16).rev().collect(),
                ),
                live: (sb.data_start..sb.total_blocks)
                    .map(|_| AtomicU32::new(0))
                    .collect(),
                data_start: sb.data_start,
            });
            let log = Arc::new(InodeLog::new(9, array, 1, Vec::new()));
            let handles: Vec<_> = (0..2u64)
                .map(|t| {
                    let (log, space) = (log.clone(), space.clone());
                    thread::spawn(move || {
                        for i in 0..8u64 {
                            let e = Entry::DirAdd {
                                seq: t * 100 + i,
                                ino: 2 + t,
                                generation: 1,
                                kind: FileKind::File,
                                txid: 0,
                                name: vec![b'a' + t as u8; 250],
                            };
                            log.append(&*space, 0, &[(e, 1)], 0).unwrap();
                        }
                    })
                })
                .collect();
            for h in handles {
                h.join().unwrap();
            }
            let subs = scan_log_buf(
                &media,
                &sb,
                9,
                0,
                array,
                CommitRule::Immediate,
                &mut ScanBuf::default(),
            )
            .unwrap();
            assert_eq!(subs.len(), 1);
            assert_eq!(
                subs[0].pages.len(),
                2,
                "16 entries of 5 slots span two pages"
            );
            let seqs: Vec<u64> = subs[0]
                .entries
                .iter()
                .map(|(_, e)| match e {
                    Entry::DirAdd { seq, .. } => *seq,
                    other => panic!("unexpected {other:?}"),
                })
                .collect();
            for t in 0..2u64 {
                let mine: Vec<u64> = seqs.iter().copied().filter(|s| s / 100 == t).collect();
                assert_eq!(mine, (0..8).map(|i| t * 100 + i).collect::<Vec<_>>());
            }
            assert!(subs[0].incomplete.is_empty());
            let _ = BLOCK_SIZE;
        });
    }
}

/// Two writers add the same missing child (key 5's path, all four levels
/// missing) while a third inserts a neighbour in the same leaf and a
/// reader looks: exactly one node is reachable per slot, both writers got
/// the same value, and no write is lost. `insert` is the insertion under
/// test, so the planted-bug check below reuses the model.
fn same_child_race<I: PageIndex<AtomicU64> + 'static>(
    make: fn() -> I,
    insert: fn(&I, u64) -> &AtomicU64,
) {
    let tree = Arc::new(make());
    let mut handles = vec![];
    for t in 0..2u64 {
        let tree = tree.clone();
        handles.push(thread::spawn(move || {
            let v = insert(&tree, 5);
            v.fetch_add(1, Ordering::SeqCst);
            insert(&tree, 6 + t).store(t + 1, Ordering::SeqCst);
            v as *const AtomicU64 as usize
        }));
    }
    let reader = {
        let tree = tree.clone();
        thread::spawn(move || {
            // A lookup sees a hole or the one node, never a torn path.
            if let Some(v) = tree.get(5) {
                assert!(v.load(Ordering::SeqCst) <= 2);
            }
        })
    };
    let addrs: Vec<usize> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    reader.join().unwrap();
    assert_eq!(addrs[0], addrs[1], "the two writers saw different nodes");
    let reachable = tree.get(5).map(|v| v as *const AtomicU64 as usize);
    assert_eq!(reachable, Some(addrs[0]), "a writer's node is unreachable");
    assert_eq!(
        tree.get(5).unwrap().load(Ordering::SeqCst),
        2,
        "an increment was lost"
    );
    for t in 0..2u64 {
        assert_eq!(tree.get(6 + t).unwrap().load(Ordering::SeqCst), t + 1);
    }
    let mut keys = vec![];
    tree.for_each(&mut |k, v| {
        if v.load(Ordering::SeqCst) != 0 {
            keys.push(k)
        }
    });
    assert_eq!(keys, vec![5, 6, 7], "exactly one reachable leaf");
}

#[test]
fn rw_tree_double_checked_insert_leaves_one_node() {
    both(|| same_child_race(RwRadix::<AtomicU64>::new, |t, k| t.get_or_insert(k)));
}

#[test]
fn cascade_tree_hand_over_hand_insert_leaves_one_node() {
    both(|| same_child_race(CascadeRadix::<AtomicU64>::new, |t, k| t.get_or_insert(k)));
}

/// The planted bug: an `rw` insertion that skips the second check under
/// the write lock overwrites the other writer's node (the paper's Figure
/// 6a). The model must find a schedule where that happens.
#[test]
fn rw_tree_without_second_check_is_caught() {
    let caught = crate::test_support::within(WALL_CLOCK_LIMIT, "planted bug", || {
        std::panic::catch_unwind(|| {
            shuttle::check_random(
                || {
                    same_child_race(RwRadix::<AtomicU64>::new, |t, k| {
                        t.get_or_insert_without_recheck(k)
                    })
                },
                ITERATIONS,
            )
        })
        .is_err()
    });
    assert!(
        caught,
        "shuttle did not catch an insertion without the second check"
    );
}

/// A directory shard's name table: two writers (serialised by a mutex,
/// the shard lock's part) replace a name, remove one, and add enough to
/// grow the bucket array, while a reader looks up without a lock. The
/// reader must always find the name that stays and the replaced one (old
/// or new target), see the removed name go and the added one come once
/// and for good, and the table must hold exactly the expected names.
#[test]
fn name_table_lookups_without_a_lock_see_every_name_whole() {
    both(|| name_table_race(false));
}

/// The planted bug: a replace done as a removal and then an insertion
/// (each under the writers' lock, as a rename that dropped the old name
/// first would) leaves a moment with no name. The model must find it.
#[test]
fn name_table_replace_with_a_gap_is_caught() {
    let caught = crate::test_support::within(WALL_CLOCK_LIMIT, "planted bug", || {
        std::panic::catch_unwind(|| shuttle::check_random(|| name_table_race(true), ITERATIONS))
            .is_err()
    });
    assert!(caught, "shuttle did not catch a replace with a gap");
}

fn name_table_race(gap: bool) {
    use crate::inode::{Child, NameGuard, NameTable, hash_name};
    use crate::layout::FileKind;
    type Live = shuttle::sync::Mutex<usize>;
    fn child(ino: u64) -> Child {
        Child {
            ino,
            generation: 1,
            kind: FileKind::File,
        }
    }
    fn put(t: &NameTable, live: &Live, name: &str, ino: u64) {
        let mut n = live.lock().unwrap();
        // SAFETY: `live`'s mutex is held: one writer at a time.
        let old = unsafe { t.insert(name.as_bytes(), hash_name(name.as_bytes()), child(ino), *n) };
        *n += usize::from(old.is_none());
    }
    fn del(t: &NameTable, live: &Live, name: &str) {
        let mut n = live.lock().unwrap();
        // SAFETY: as `put`.
        let old = unsafe { t.remove(name.as_bytes(), hash_name(name.as_bytes()), *n) };
        *n -= usize::from(old.is_some());
    }
    fn get(t: &NameTable, name: &str) -> Option<u64> {
        t.get(
            name.as_bytes(),
            hash_name(name.as_bytes()),
            &NameGuard::new(),
        )
        .map(|c| c.ino)
    }
    let t = Arc::new(NameTable::default());
    let live = Arc::new(Live::new(0));
    put(&t, &live, "keep", 1);
    put(&t, &live, "swap", 10);
    put(&t, &live, "gone", 3);
    let w1 = {
        let (t, live) = (t.clone(), live.clone());
        thread::spawn(move || {
            if gap {
                del(&t, &live, "swap");
            }
            put(&t, &live, "swap", 11);
            del(&t, &live, "gone");
        })
    };
    let w2 = {
        let (t, live) = (t.clone(), live.clone());
        thread::spawn(move || {
            // Past four names the table grows (a copy of every node).
            for (i, n) in ["n1", "n2", "new"].into_iter().enumerate() {
                put(&t, &live, n, 20 + i as u64);
            }
        })
    };
    let r = {
        let t = t.clone();
        thread::spawn(move || {
            let (mut gone_seen_absent, mut new_seen) = (false, false);
            for _ in 0..3 {
                assert_eq!(get(&t, "keep"), Some(1), "a name that stays was missed");
                let s = get(&t, "swap");
                assert!(matches!(s, Some(10 | 11)), "replaced name read as {s:?}");
                match get(&t, "gone") {
                    Some(3) => assert!(!gone_seen_absent, "a removed name came back"),
                    None => gone_seen_absent = true,
                    other => panic!("removed name read as {other:?}"),
                }
                match get(&t, "new") {
                    Some(22) => new_seen = true,
                    None => assert!(!new_seen, "an added name went away"),
                    other => panic!("added name read as {other:?}"),
                }
            }
        })
    };
    for h in [w1, w2, r] {
        h.join().unwrap();
    }
    assert_eq!(*live.lock().unwrap(), 5);
    for (n, ino) in [
        ("keep", 1),
        ("swap", 11),
        ("n1", 20),
        ("n2", 21),
        ("new", 22),
    ] {
        assert_eq!(get(&t, n), Some(ino), "{n}");
    }
    assert_eq!(get(&t, "gone"), None);
}
