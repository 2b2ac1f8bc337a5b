use super::*;
use std::sync::atomic::{AtomicI64, Ordering};

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
                let mut x = 0x9e37_79b9_u64.wrapping_mul(t as u64 + 1);
                for _ in 0..2000 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let a = x % CELLS;
                    let b = (a + 1 + (x >> 20) % 4).min(CELLS);
                    let write = (x >> 40).is_multiple_of(3);
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
        exclusion_holds(kind, 8);
    }
}

#[test]
fn oversubscribed_threads_make_progress() {
    // Many more threads than cores: waiters must park rather than spin forever.
    for kind in [LockKind::SrlTree, LockKind::SrlArray] {
        exclusion_holds(kind, 48);
    }
}

#[test]
fn disjoint_writers_hold_at_the_same_time() {
    for kind in [LockKind::Interval, LockKind::SrlArray, LockKind::SrlTree] {
        let lock = kind.build(4096, 1 << 20);
        let _a = RangeGuard::new(&*lock, 0, 4096, Access::Write);
        // Would deadlock if the second range waited on the first.
        let _b = RangeGuard::new(&*lock, 8192, 16384, Access::Write);
        let _c = RangeGuard::new(&*lock, 4096, 8192, Access::Read);
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
    let l = BigReaderLock::new(4);
    let inside = AtomicI64::new(0);
    std::thread::scope(|s| {
        for t in 0..6 {
            let (l, inside) = (&l, &inside);
            s.spawn(move || {
                for i in 0..3000 {
                    if (i + t) % 50 == 0 {
                        let g = l.write();
                        assert_eq!(inside.swap(-1000, Ordering::SeqCst), 0);
                        inside.store(0, Ordering::SeqCst);
                        l.write_unlock(g);
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
