//! Model checking of the library's own concurrency protocols with shuttle:
//! the library is compiled with `--features shuttle`, which swaps its
//! atomics (manyfs-sync's) for shuttle's, so these run the real log-append
//! and name-table code under thousands of randomised and PCT schedules.
//! The lock word, the range locks and the index trees are model-checked in
//! their own crates (manyfs-rangelock, manyfs-index).

use manyfs_sync::testing::{explore, finds_a_failure};
use shuttle::sync::Arc;
use shuttle::thread;

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
        super::explore(move || {
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

/// A directory shard's name table: two writers (serialised by a mutex,
/// the shard lock's part) replace a name, remove one, and add enough to
/// grow the bucket array, while a reader looks up without a lock. The
/// reader must always find the name that stays and the replaced one (old
/// or new target), see the removed name go and the added one come once
/// and for good, and the table must hold exactly the expected names.
#[test]
fn name_table_lookups_without_a_lock_see_every_name_whole() {
    explore(|| name_table_race(false));
}

/// The planted bug: a replace done as a removal and then an insertion
/// (each under the writers' lock, as a rename that dropped the old name
/// first would) leaves a moment with no name. The model must find it.
#[test]
fn name_table_replace_with_a_gap_is_caught() {
    let caught = finds_a_failure("planted bug", || name_table_race(true));
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
