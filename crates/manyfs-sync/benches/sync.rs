//! Acquire/release of each lock of manyfs-sync, uncontended and with a
//! second thread taking the same lock.

use criterion::{Criterion, criterion_group, criterion_main};
use manyfs_sync::testing::timed_with_contender;
use manyfs_sync::{futex, node};
use std::hint::black_box;

/// Time `op` alone and with a second thread running it too.
fn alone_and_contended(c: &mut Criterion, name: &str, op: impl Fn() + Sync) {
    c.bench_function(&format!("{name}/uncontended"), |b| b.iter(&op));
    c.bench_function(&format!("{name}/2 threads"), |b| {
        b.iter_custom(|iters| timed_with_contender(iters, &op, &op))
    });
}

fn locks(c: &mut Criterion) {
    let rw = futex::RwLock::new(0u64);
    alone_and_contended(c, "futex rwlock read", || drop(black_box(rw.read())));
    alone_and_contended(c, "futex rwlock write", || *rw.write() += 1);
    let node_rw = node::RwLock::new(0u64);
    alone_and_contended(c, "node rwlock write+downgrade", || {
        let w = node_rw.write();
        drop(black_box(node::downgrade(&node_rw, w)))
    });
    let m = node::Mutex::new(0u64);
    alone_and_contended(c, "node mutex", || *m.lock() += 1);
}

criterion_group!(benches, locks);
criterion_main!(benches);
