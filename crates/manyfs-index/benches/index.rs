//! Lookup and insertion in a file index of each kind, uncontended and with a
//! second thread working on other pages of the same file.

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use manyfs_index::{FileIndex, IndexKind, PageMapping};
use manyfs_sync::testing::timed_with_contender;
use std::hint::black_box;

/// Pages 4096 apart: each insertion into a fresh index makes a new leaf.
const SPREAD: u64 = 4096;
const PAGES: u64 = 64;

fn filled(kind: IndexKind) -> FileIndex {
    let ix = FileIndex::new(kind);
    for p in 0..PAGES {
        ix.slot(p * SPREAD + 1).set(PageMapping {
            block: p + 1,
            entry: 0,
            version: 1,
        });
    }
    ix
}

fn index(c: &mut Criterion) {
    for kind in IndexKind::ALL {
        let ix = filled(kind);
        let ix = &ix;
        let lookup = || {
            black_box(ix.lookup(black_box(5 * SPREAD + 1)));
        };
        let existing = || {
            black_box(ix.slot(black_box(7 * SPREAD + 1)).get());
        };
        c.bench_function(&format!("{kind}/lookup/uncontended"), |b| b.iter(lookup));
        c.bench_function(&format!("{kind}/get_or_insert existing/uncontended"), |b| {
            b.iter(existing)
        });
        c.bench_function(&format!("{kind}/lookup/2 threads"), |b| {
            b.iter_custom(|iters| timed_with_contender(iters, lookup, existing))
        });
        c.bench_function(&format!("{kind}/insert {PAGES} new pages"), |b| {
            b.iter_batched(
                || FileIndex::new(kind),
                |ix| {
                    for p in 0..PAGES {
                        black_box(ix.slot(p * SPREAD + 1));
                    }
                    ix
                },
                BatchSize::SmallInput,
            )
        });
    }
}

criterion_group!(benches, index);
criterion_main!(benches);
