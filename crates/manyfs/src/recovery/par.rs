//! Running recovery's per-inode work on several threads.
//!
//! Recovery reads and replays every inode's log and builds every DRAM
//! inode; each of those is independent of the others, so it runs on as
//! many threads as the process has CPUs. What depends on order (marking
//! blocks, counting links, finding a directory reached twice) is merged on
//! the calling thread in the walk's order, so that the result does not
//! depend on how the work was split.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Items a thread takes at a time: enough to make taking them cheap, few
/// enough that threads finish together.
const CHUNK: usize = 64;

/// Threads recovery uses: the CPUs this process may run on, at least 1,
/// read once per process (asking costs several reads of `/proc` and the
/// cgroup files at every mount, measured as 9% of the crash explorer's
/// time, which mounts small pools many thousand times).
pub(crate) fn threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS
        .get_or_init(|| std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get))
}

/// `f` applied to every item of `items`, results in the items' order,
/// computed on up to `threads` threads (scoped: all have finished when this
/// returns). Each thread makes its own scratch state with `init` and hands
/// it to every call it makes. With one thread, or too few items to share,
/// everything runs on the calling thread, in order.
pub(crate) fn map_ordered<T, S, R>(
    items: &[T],
    threads: usize,
    init: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, &T) -> R + Sync,
) -> Vec<R>
where
    T: Sync,
    R: Send,
{
    let threads = threads.min(items.len().div_ceil(CHUNK));
    if threads <= 1 {
        let mut s = init();
        return items.iter().map(|x| f(&mut s, x)).collect();
    }
    let next = AtomicUsize::new(0);
    let work = || {
        let mut s = init();
        let mut done: Vec<(usize, Vec<R>)> = Vec::new();
        loop {
            let start = next.fetch_add(CHUNK, Ordering::Relaxed);
            if start >= items.len() {
                return done;
            }
            let end = (start + CHUNK).min(items.len());
            done.push((
                start,
                items[start..end].iter().map(|x| f(&mut s, x)).collect(),
            ));
        }
    };
    let mut pieces: Vec<(usize, Vec<R>)> = std::thread::scope(|scope| {
        // A thread that cannot be made leaves its share to the others.
        let others: Vec<_> = (1..threads)
            .filter_map(|_| named().spawn_scoped(scope, work).ok())
            .collect();
        let mut all = work();
        for t in others {
            // A panic in a worker is a bug: pass it on.
            all.extend(t.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        }
        all
    });
    pieces.sort_unstable_by_key(|(start, _)| *start);
    let mut out = Vec::with_capacity(items.len());
    for (_, v) in pieces {
        out.extend(v);
    }
    out
}

/// Drop `map` on up to `threads` threads (freeing a million rebuilt inodes
/// one by one is a large part of a mount otherwise): it is split at
/// `threads - 1` keys (each split walks one path of the tree) and the parts
/// are dropped side by side.
pub(crate) fn drop_map<K: Ord + Clone + Send, V: Send>(mut map: BTreeMap<K, V>, threads: usize) {
    let threads = threads.min(map.len().div_ceil(CHUNK)).max(1);
    let per = map.len().div_ceil(threads);
    let splits: Vec<K> = map.keys().skip(per).step_by(per.max(1)).cloned().collect();
    std::thread::scope(|scope| {
        let mut parts = Vec::new();
        for key in splits.iter().rev() {
            let part = map.split_off(key);
            // A part no thread takes is dropped here.
            if let Ok(t) = named().spawn_scoped(scope, move || drop(part)) {
                parts.push(t);
            }
        }
        drop(map);
        // Joined, not left to the scope: the scope returns when the
        // closures have run, while their threads may still be exiting.
        for t in parts {
            if let Err(p) = t.join() {
                std::panic::resume_unwind(p);
            }
        }
    });
}

/// Recovery's worker threads: named, so that a process that counts its
/// threads (`manyfs run` before a fork) tells them from its own, and
/// joined before recovery returns.
fn named() -> std::thread::Builder {
    std::thread::Builder::new().name("manyfs-recovery".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_keep_the_order_of_the_items_on_any_number_of_threads() {
        let items: Vec<u64> = (0..10_000).collect();
        for threads in [1, 2, 3, 8] {
            let out = map_ordered(
                &items,
                threads,
                || 0u64,
                |calls, &x| {
                    *calls += 1;
                    x * 2
                },
            );
            assert_eq!(out, items.iter().map(|x| x * 2).collect::<Vec<_>>());
        }
    }

    #[test]
    fn few_items_and_no_items() {
        assert!(map_ordered(&[] as &[u8], 4, || (), |_, &x| x).is_empty());
        assert_eq!(map_ordered(&[7u8], 4, || (), |_, &x| x + 1), vec![8]);
        drop_map(BTreeMap::<u64, String>::new(), 4);
        drop_map((0..1000).map(|i| (i, i.to_string())).collect(), 3);
        drop_map((0..10).map(|i| (i, i.to_string())).collect(), 3);
    }
}
