//! Stress tests of every range lock and the big-reader lock: exclusion,
//! progress with more threads than cores, release on unwind.

// Under `shuttle` the locks' atomics only work inside a shuttle model (see
// `src/shuttle_models.rs`).
#![cfg(not(feature = "shuttle"))]

use manyfs_rangelock::*;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

/// How long a liveness test may go without finishing before it fails.
const PROGRESS_LIMIT: Duration = Duration::from_secs(60);

/// Run `body` on its own thread and fail with "no progress after 60 s:
/// `what`" if it has not finished by then: a lost wake-up or a deadlock in
/// a lock fails the test with a message instead of hanging the run. A
/// panic in `body` (an exclusion violation) is passed on.
fn within(what: &str, body: impl FnOnce() + Send + 'static) {
    manyfs_sync::testing::within(PROGRESS_LIMIT, what, body)
}

/// Threads lock random ranges over 64 cells; a writer marks its cells -1
/// while holding, readers count themselves in. Any overlap of a writer with
/// anyone else is caught.
fn exclusion_holds(kind: LockKind, threads: usize) {
    const CELLS: u64 = 64;
    let lock = kind.build(4096, CELLS * 4096);
    let cells: Vec<AtomicI64> = (0..CELLS).map(|_| AtomicI64::new(0)).collect();
    std::thread::scope(|s| {
        for t in 0..threads {
            let (lock, cells) = (&*lock, &cells);
            s.spawn(move || {
                // Seeded per thread, so a failing interleaving's ranges
                // reproduce.
                let mut rng = StdRng::seed_from_u64(t as u64 + 1);
                for _ in 0..2000 {
                    let a = rng.random_range(0..CELLS);
                    let b = (a + 1 + rng.random_range(0..4)).min(CELLS);
                    let write = rng.random_ratio(1, 3);
                    let access = if write { Access::Write } else { Access::Read };
                    let _g = RangeGuard::new(lock, a * 4096, b * 4096, access);
                    for c in &cells[a as usize..b as usize] {
                        if write {
                            assert_eq!(c.swap(-1, Ordering::SeqCst), 0, "{kind}: writer overlap");
                        } else {
                            assert!(
                                c.fetch_add(1, Ordering::SeqCst) >= 0,
                                "{kind}: reader saw writer"
                            );
                        }
                    }
                    std::hint::spin_loop();
                    for c in &cells[a as usize..b as usize] {
                        if write {
                            c.store(0, Ordering::SeqCst);
                        } else {
                            c.fetch_sub(1, Ordering::SeqCst);
                        }
                    }
                }
            });
        }
    });
    assert!(cells.iter().all(|c| c.load(Ordering::SeqCst) == 0));
}

#[test]
fn every_kind_excludes_overlapping_writers() {
    for kind in LockKind::ALL {
        within(
            &format!("{kind}: 8 threads locking random ranges"),
            move || exclusion_holds(kind, 8),
        );
    }
}

#[test]
fn oversubscribed_threads_make_progress() {
    // Many more threads than cores: waiters must park rather than spin forever.
    for kind in [LockKind::SrlTree, LockKind::SrlArray] {
        within(
            &format!("{kind}: 48 threads locking random ranges"),
            move || exclusion_holds(kind, 48),
        );
    }
}

#[test]
fn disjoint_writers_hold_at_the_same_time() {
    for kind in [LockKind::Interval, LockKind::SrlArray, LockKind::SrlTree] {
        within(
            &format!("{kind}: a range disjoint from held ones waits for them"),
            move || {
                let lock = kind.build(4096, 1 << 20);
                let _a = RangeGuard::new(&*lock, 0, 4096, Access::Write);
                // Would deadlock if the second range waited on the first.
                let _b = RangeGuard::new(&*lock, 8192, 16384, Access::Write);
                let _c = RangeGuard::new(&*lock, 4096, 8192, Access::Read);
            },
        );
    }
}

#[test]
fn lock_kind_names_parse_back() {
    for kind in LockKind::ALL {
        assert_eq!(kind.name().parse::<LockKind>().unwrap(), kind);
    }
    assert!("nope".parse::<LockKind>().is_err());
}

#[test]
fn big_reader_excludes_writer() {
    within(
        "big-reader lock: 6 threads reading and writing",
        big_reader_body,
    );
}

fn big_reader_body() {
    let l = BigReaderLock::new(4);
    let inside = AtomicI64::new(0);
    std::thread::scope(|s| {
        for t in 0..6 {
            let (l, inside) = (&l, &inside);
            s.spawn(move || {
                for i in 0..3000 {
                    if (i + t) % 50 == 0 {
                        let _g = l.write();
                        assert_eq!(inside.swap(-1000, Ordering::SeqCst), 0);
                        inside.store(0, Ordering::SeqCst);
                    } else {
                        let _g = l.read();
                        assert!(inside.fetch_add(1, Ordering::SeqCst) >= 0);
                        inside.fetch_sub(1, Ordering::SeqCst);
                    }
                }
            });
        }
    });
}

/// Run `body`, which must panic, without printing the panic message (the
/// default hook would make an expected panic look like a failure in the
/// test output).
fn expect_panic(body: impl FnOnce()) {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body));
    assert!(r.is_err(), "body was expected to panic");
}

#[test]
fn big_reader_writer_panic_releases_the_lock() {
    within(
        "big-reader lock: a reader and a writer after a writer panicked",
        || {
            let l = std::sync::Arc::new(BigReaderLock::new(4));
            // A truncate that panics while holding the lock exclusive.
            let l2 = l.clone();
            std::thread::spawn(move || {
                expect_panic(|| {
                    let _g = l2.write();
                    panic!("injected panic while holding the write guard");
                })
            })
            .join()
            .unwrap();
            // Readers on every slot and another writer still get in.
            let reader = {
                let l = l.clone();
                std::thread::spawn(move || drop(l.read()))
            };
            let writer = {
                let l = l.clone();
                std::thread::spawn(move || drop(l.write()))
            };
            reader.join().unwrap();
            writer.join().unwrap();
            drop(l.read());
            drop(l.write());
        },
    );
}

#[test]
fn big_reader_waiting_readers_wake_after_writer_panic() {
    within(
        "big-reader lock: readers parked behind a writer that panics",
        || {
            let l = std::sync::Arc::new(BigReaderLock::new(4));
            let (held_tx, held_rx) = std::sync::mpsc::channel();
            let l2 = l.clone();
            let writer = std::thread::spawn(move || {
                expect_panic(|| {
                    let _g = l2.write();
                    held_tx.send(()).unwrap();
                    // Give the readers time to park behind us.
                    std::thread::sleep(Duration::from_millis(100));
                    panic!("injected panic while readers wait");
                })
            });
            held_rx.recv().unwrap();
            let readers: Vec<_> = (0..4)
                .map(|_| {
                    let l = l.clone();
                    std::thread::spawn(move || drop(l.read()))
                })
                .collect();
            writer.join().unwrap();
            for r in readers {
                r.join().unwrap();
            }
        },
    );
}

#[test]
fn range_guard_releases_on_unwind() {
    for kind in LockKind::ALL {
        within(
            &format!("{kind}: range held by a panicking thread is released"),
            move || {
                let lock: std::sync::Arc<dyn RangeLock> = kind.build(4096, 1 << 20).into();
                for access in [Access::Write, Access::Read] {
                    let l2 = lock.clone();
                    std::thread::spawn(move || {
                        expect_panic(|| {
                            // Spans two segments so SRL takes the
                            // multi-word path; and one single word (not
                            // for the per-inode lock, where the second
                            // range would wait on the first).
                            let _a = RangeGuard::new(&*l2, 0, 8192, access);
                            let _b = (kind != LockKind::Inode)
                                .then(|| RangeGuard::new(&*l2, 16384, 16385, access));
                            panic!("injected panic while holding ranges");
                        })
                    })
                    .join()
                    .unwrap();
                    // Exclusive access to everything must be free again.
                    drop(RangeGuard::new(&*lock, 0, 1 << 20, Access::Write));
                    drop(RangeGuard::new(&*lock, 0, 8192, Access::Read));
                }
            },
        );
    }
}
