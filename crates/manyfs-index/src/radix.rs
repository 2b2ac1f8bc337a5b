//! A fixed-depth radix tree whose nodes are allocated lazily and installed
//! with a single compare-and-swap (SRL-NOVA (segment range lock)'s SRL tree; also the file index).
//!
//! Lookups never take a lock. Inserting a missing node allocates it and
//! CASes it into the empty child pointer; the loser of a race frees its node
//! and uses the winner's. Nodes are freed only when the tree is dropped, so a
//! reference obtained from the tree stays valid for the tree's lifetime.

use manyfs_sync::{AtomicPtr, Ordering};

/// Bits of key consumed per level.
pub const FANOUT_BITS: u32 = 6;
/// Children per node.
pub const FANOUT: usize = 1 << FANOUT_BITS;
/// Levels of interior nodes above the leaves.
pub const INTERIOR_LEVELS: u32 = 4;
/// Keys must be below this bound (2^30): the reach of the tree's levels.
/// manyfs's on-media format caps block and page numbers by the same bound
/// (the library asserts at compile time that the two agree).
pub const KEY_LIMIT: u64 = 1 << (FANOUT_BITS * (INTERIOR_LEVELS + 1));
const _: () = assert!(KEY_LIMIT == 1 << 30);

struct Interior {
    children: [AtomicPtr<()>; FANOUT],
}

/// A radix tree mapping `u64` keys below [`KEY_LIMIT`] to lazily created `T`s.
/// Even the root is created by the first insertion: an unused tree is one
/// null pointer.
pub struct CasRadix<T: Default> {
    root: AtomicPtr<()>,
    _marker: std::marker::PhantomData<Box<[T; FANOUT]>>,
}

// SAFETY: the tree owns its nodes; shared access hands out `&T` only, so it
// is Send/Sync exactly when T is.
unsafe impl<T: Default + Send> Send for CasRadix<T> {}
// SAFETY: as above; concurrent installation goes through atomics.
unsafe impl<T: Default + Send + Sync> Sync for CasRadix<T> {}

fn new_interior() -> Box<Interior> {
    Box::new(Interior {
        children: std::array::from_fn(|_| AtomicPtr::new(std::ptr::null_mut())),
    })
}

impl<T: Default> Default for CasRadix<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Default> CasRadix<T> {
    /// An empty tree (no node yet).
    pub fn new() -> Self {
        CasRadix {
            root: AtomicPtr::new(std::ptr::null_mut()),
            _marker: std::marker::PhantomData,
        }
    }

    /// The root node, if any insertion made one.
    fn root(&self) -> Option<&Interior> {
        let p = self.root.load(Ordering::Acquire);
        // SAFETY: a non-null root was made by `root_or_make` from
        // Box::into_raw, published with Release, and is freed only by drop.
        (!p.is_null()).then(|| unsafe { &*(p as *const Interior) })
    }

    /// The root node, made (and CASed in) if there is none yet.
    fn root_or_make(&self) -> &Interior {
        let mut p = self.root.load(Ordering::Acquire);
        if p.is_null() {
            p = install(
                &self.root,
                || Box::into_raw(new_interior()).cast(),
                |p| {
                    // SAFETY: a root that lost the race; never published.
                    drop(unsafe { Box::from_raw(p as *mut Interior) })
                },
            );
        }
        // SAFETY: see `root`.
        unsafe { &*(p as *const Interior) }
    }

    fn slot_index(key: u64, level: u32) -> usize {
        slot_index(key, level)
    }

    /// The value for `key` if its leaf exists.
    pub fn get(&self, key: u64) -> Option<&T> {
        debug_assert!(key < KEY_LIMIT);
        let mut node: &Interior = self.root()?;
        for level in 0..INTERIOR_LEVELS {
            let child = node.children[Self::slot_index(key, level)].load(Ordering::Acquire);
            if child.is_null() {
                return None;
            }
            if level + 1 == INTERIOR_LEVELS {
                // SAFETY: at the last interior level children are leaves
                // created by `install_leaf` as Box<[T; FANOUT]>, never freed
                // before the tree, and published with Release.
                let leaf = unsafe { &*(child as *const [T; FANOUT]) };
                return Some(&leaf[Self::slot_index(key, INTERIOR_LEVELS)]);
            }
            // SAFETY: above the last level children are interior nodes
            // created by `install_interior`, alive as long as the tree.
            node = unsafe { &*(child as *const Interior) };
        }
        unreachable!("loop returns at the last interior level")
    }

    /// The value for `key`, creating its leaf (and path) if needed.
    pub fn get_or_insert(&self, key: u64) -> &T {
        debug_assert!(key < KEY_LIMIT);
        let mut node: &Interior = self.root_or_make();
        for level in 0..INTERIOR_LEVELS {
            let slot = &node.children[Self::slot_index(key, level)];
            let mut child = slot.load(Ordering::Acquire);
            if level + 1 == INTERIOR_LEVELS {
                if child.is_null() {
                    child = install(
                        slot,
                        || {
                            Box::into_raw(Box::new(std::array::from_fn::<T, FANOUT, _>(|_| {
                                T::default()
                            })))
                            .cast()
                        },
                        |p| {
                            // SAFETY: `p` came from Box::into_raw of a leaf just above
                            // and lost the race, so nobody else has seen it.
                            drop(unsafe { Box::from_raw(p as *mut [T; FANOUT]) })
                        },
                    );
                }
                // SAFETY: see `get`.
                let leaf = unsafe { &*(child as *const [T; FANOUT]) };
                return &leaf[Self::slot_index(key, INTERIOR_LEVELS)];
            }
            if child.is_null() {
                child = install(
                    slot,
                    || Box::into_raw(new_interior()).cast(),
                    |p| {
                        // SAFETY: an interior node that lost the race; unpublished.
                        drop(unsafe { Box::from_raw(p as *mut Interior) })
                    },
                );
            }
            // SAFETY: see `get`.
            node = unsafe { &*(child as *const Interior) };
        }
        unreachable!("loop returns at the last interior level")
    }

    /// Visit every existing value with its key, in key order.
    pub fn for_each(&self, mut f: impl FnMut(u64, &T)) {
        fn walk<T>(node: &Interior, level: u32, prefix: u64, f: &mut dyn FnMut(u64, &T)) {
            for (i, c) in node.children.iter().enumerate() {
                let child = c.load(Ordering::Acquire);
                if child.is_null() {
                    continue;
                }
                let prefix = (prefix << FANOUT_BITS) | i as u64;
                if level + 1 == INTERIOR_LEVELS {
                    // SAFETY: see `CasRadix::get`.
                    let leaf = unsafe { &*(child as *const [T; FANOUT]) };
                    for (j, v) in leaf.iter().enumerate() {
                        f((prefix << FANOUT_BITS) | j as u64, v);
                    }
                } else {
                    // SAFETY: see `CasRadix::get`.
                    walk(
                        unsafe { &*(child as *const Interior) },
                        level + 1,
                        prefix,
                        f,
                    );
                }
            }
        }
        if let Some(root) = self.root() {
            walk(root, 0, 0, &mut f);
        }
    }

    /// DRAM used by the tree's nodes.
    pub fn memory_bytes(&self) -> usize {
        fn walk<T>(node: &Interior, level: u32) -> usize {
            let mut total = std::mem::size_of::<Interior>();
            for c in node.children.iter() {
                let child = c.load(Ordering::Acquire);
                if child.is_null() {
                    continue;
                }
                total += if level + 1 == INTERIOR_LEVELS {
                    std::mem::size_of::<[T; FANOUT]>()
                } else {
                    // SAFETY: see `CasRadix::get`.
                    walk::<T>(unsafe { &*(child as *const Interior) }, level + 1)
                };
            }
            total
        }
        self.root().map_or(0, |root| walk::<T>(root, 0))
    }
}

/// The child slot of `key` in a node at `level` (level 0 is the root,
/// level [`INTERIOR_LEVELS`] the leaf; leaves use the lowest bits).
pub(super) fn slot_index(key: u64, level: u32) -> usize {
    let shift = FANOUT_BITS * (INTERIOR_LEVELS - level);
    ((key >> shift) as usize) & (FANOUT - 1)
}

/// CAS a freshly made node into an empty slot; returns whichever node won.
fn install(
    slot: &AtomicPtr<()>,
    make: impl FnOnce() -> *mut (),
    discard: impl FnOnce(*mut ()),
) -> *mut () {
    let fresh = make();
    match slot.compare_exchange(
        std::ptr::null_mut(),
        fresh,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        Ok(_) => fresh,
        Err(winner) => {
            discard(fresh);
            winner
        }
    }
}

impl<T: Default> Drop for CasRadix<T> {
    fn drop(&mut self) {
        fn free<T>(node: &Interior, level: u32) {
            for c in node.children.iter() {
                let child = c.load(Ordering::Acquire);
                if child.is_null() {
                    continue;
                }
                if level + 1 == INTERIOR_LEVELS {
                    // SAFETY: we own the tree exclusively (drop); each leaf
                    // pointer was produced by Box::into_raw exactly once.
                    drop(unsafe { Box::from_raw(child as *mut [T; FANOUT]) });
                } else {
                    // SAFETY: as above, for interior nodes; children first.
                    let boxed = unsafe { Box::from_raw(child as *mut Interior) };
                    free::<T>(&boxed, level + 1);
                }
            }
        }
        let root = self.root.load(Ordering::Acquire);
        if !root.is_null() {
            // SAFETY: we own the tree exclusively (drop); the root was made
            // by Box::into_raw once (see `root_or_make`).
            let boxed = unsafe { Box::from_raw(root as *mut Interior) };
            free::<T>(&boxed, 0);
        }
    }
}

#[cfg(all(test, not(feature = "shuttle")))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn sparse_keys_and_iteration() {
        let t: CasRadix<AtomicU64> = CasRadix::new();
        assert!(t.get(5).is_none());
        assert_eq!(t.memory_bytes(), 0, "an unused tree has no node");
        t.for_each(|_, _| panic!("an empty tree has no values"));
        for k in [0u64, 1, 63, 64, 4095, 1 << 20, KEY_LIMIT - 1] {
            t.get_or_insert(k).store(k + 1, Ordering::Relaxed);
        }
        assert_eq!(
            t.get(KEY_LIMIT - 1).unwrap().load(Ordering::Relaxed),
            KEY_LIMIT
        );
        assert_eq!(
            t.get(2).unwrap().load(Ordering::Relaxed),
            0,
            "same leaf as 1"
        );
        let mut seen = vec![];
        t.for_each(|k, v| {
            if v.load(Ordering::Relaxed) != 0 {
                seen.push(k)
            }
        });
        assert_eq!(seen, vec![0, 1, 63, 64, 4095, 1 << 20, KEY_LIMIT - 1]);
        assert!(t.memory_bytes() > 0);
    }

    #[test]
    fn racing_inserts_share_one_node() {
        let t: CasRadix<AtomicU64> = CasRadix::new();
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for k in 0..2000u64 {
                        t.get_or_insert(k * 37).fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
        });
        for k in 0..2000u64 {
            assert_eq!(t.get(k * 37).unwrap().load(Ordering::Relaxed), 8);
        }
    }
}
