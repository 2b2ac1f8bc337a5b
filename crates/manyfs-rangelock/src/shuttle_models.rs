//! Model checking of the lock protocols with shuttle: built with
//! `--features shuttle`, which swaps manyfs-sync's atomics (and parking)
//! for shuttle's, so these run the real lock-word, SRL and big-reader code
//! under thousands of randomised and PCT schedules.

use crate::{Access, BigReaderLock, RangeGuard, RangeLock, SegmentWord, SrlTree};
use manyfs_sync::testing::explore;
use shuttle::sync::Arc;
use shuttle::sync::atomic::{AtomicI64, Ordering};
use shuttle::thread;

#[test]
fn segment_word_excludes_writers_from_everyone() {
    explore(|| {
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
    explore(|| {
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
fn big_reader_lock_excludes_truncate_from_io() {
    explore(|| {
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
