//! Model checking of the index trees with shuttle: built with
//! `--features shuttle`, which swaps manyfs-sync's atomics and node locks
//! for shuttle's, so these run the real CAS installation, double-checked
//! insertion and hand-over-hand locking under thousands of randomised and
//! PCT schedules.

use crate::PageIndex;
use crate::cascade::CascadeRadix;
use crate::radix::CasRadix;
use crate::rw::RwRadix;
use manyfs_sync::testing::{explore, finds_a_failure};
use shuttle::sync::Arc;
use shuttle::sync::atomic::{AtomicU64, Ordering};
use shuttle::thread;

#[test]
fn radix_install_race_yields_one_node() {
    explore(|| {
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
    explore(|| same_child_race(RwRadix::<AtomicU64>::new, |t, k| t.get_or_insert(k)));
}

#[test]
fn cascade_tree_hand_over_hand_insert_leaves_one_node() {
    explore(|| same_child_race(CascadeRadix::<AtomicU64>::new, |t, k| t.get_or_insert(k)));
}

/// The planted bug: an `rw` insertion that skips the second check under
/// the write lock overwrites the other writer's node (the paper's Figure
/// 6a). The model must find a schedule where that happens.
#[test]
fn rw_tree_without_second_check_is_caught() {
    let caught = finds_a_failure("planted bug", || {
        same_child_race(RwRadix::<AtomicU64>::new, |t, k| {
            t.get_or_insert_without_recheck(k)
        })
    });
    assert!(
        caught,
        "shuttle did not catch an insertion without the second check"
    );
}
