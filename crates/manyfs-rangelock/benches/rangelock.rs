//! Acquire/release of one 4 KiB range under each lock kind, uncontended and
//! with a second thread locking the same segment or a disjoint one; and the
//! big-reader lock's shared and exclusive holds.

use criterion::{Criterion, criterion_group, criterion_main};
use manyfs_rangelock::{Access, BigReaderLock, LockKind, RangeGuard, RangeLock};
use manyfs_sync::testing::timed_with_contender;
use std::hint::black_box;

const SEGMENT: u64 = 4096;

/// Write-lock `[start, start + 4 KiB)` and release it.
fn write_page(lock: &dyn RangeLock, start: u64) {
    drop(black_box(RangeGuard::new(
        lock,
        start,
        start + SEGMENT,
        Access::Write,
    )));
}

fn range_locks(c: &mut Criterion) {
    for kind in LockKind::ALL {
        let lock = kind.build(SEGMENT, 1 << 20);
        let lock = &*lock;
        c.bench_function(&format!("{kind}/write 4KiB/uncontended"), |b| {
            b.iter(|| write_page(lock, 0))
        });
        c.bench_function(&format!("{kind}/read 4KiB/uncontended"), |b| {
            b.iter(|| drop(black_box(RangeGuard::new(lock, 0, SEGMENT, Access::Read))))
        });
        for (other, name) in [(0, "same segment"), (2 * SEGMENT, "disjoint segments")] {
            c.bench_function(&format!("{kind}/write 4KiB/2 threads, {name}"), |b| {
                b.iter_custom(|iters| {
                    timed_with_contender(iters, || write_page(lock, 0), || write_page(lock, other))
                })
            });
        }
    }
}

fn big_reader(c: &mut Criterion) {
    let lock = BigReaderLock::new(std::thread::available_parallelism().map_or(1, |n| n.get()));
    let read = || drop(black_box(lock.read()));
    let write = || drop(black_box(lock.write()));
    c.bench_function("big-reader/read/uncontended", |b| b.iter(read));
    c.bench_function("big-reader/write/uncontended", |b| b.iter(write));
    c.bench_function("big-reader/read/2 threads", |b| {
        b.iter_custom(|iters| timed_with_contender(iters, read, read))
    });
    c.bench_function("big-reader/write/2 threads", |b| {
        b.iter_custom(|iters| timed_with_contender(iters, write, write))
    });
}

criterion_group!(benches, range_locks, big_reader);
criterion_main!(benches);
