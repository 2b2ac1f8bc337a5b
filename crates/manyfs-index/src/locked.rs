//! What the two lock-per-node baseline trees ([`super::rw::RwRadix`],
//! [`super::cascade::CascadeRadix`]) share: the shape of [`super::radix`]
//! (64-way interior nodes, four interior levels, leaves of 64 values), with
//! each node's child array behind the node's own lock instead of atomics.
//!
//! Nodes are boxed and only ever added: a child slot goes from empty to
//! filled once, under the node's exclusive lock, and nothing is freed or
//! moved before the tree is dropped. A reference to a node or a value can
//! therefore outlive the guard it was found under (hand-over-hand locking
//! needs that for the child's lock; the file index hands out `&T` like the
//! CAS radix does): [`Child::step`] is the one place that extends it.

use super::radix::{FANOUT, FANOUT_BITS, INTERIOR_LEVELS};
use super::{PageIndex, SerialProbe};

/// A filled child slot of an interior node.
pub enum Child<N, T> {
    /// An interior node one level down.
    Node(Box<N>),
    /// A leaf of values (the children of the last interior level).
    Leaf(Box<[T; FANOUT]>),
}

/// Where a traversal goes next, borrowed for the whole tree's borrow.
pub enum Step<'t, N, T> {
    /// Lock this node next.
    Node(&'t N),
    /// The values below the last interior level.
    Leaf(&'t [T; FANOUT]),
}

impl<N, T> Child<N, T> {
    /// The node or leaf this slot holds, no longer tied to the guard of the
    /// parent it was read under.
    ///
    /// # Safety
    /// `self` must be a slot of a tree that outlives `'t`. Sound because a
    /// filled slot is never emptied or replaced, boxes are freed only when
    /// the tree is dropped (which needs `&mut`), and what is returned points
    /// into the box's heap allocation, not into the parent's slot array
    /// that later insertions write.
    pub(super) unsafe fn step<'t>(&self) -> Step<'t, N, T> {
        match self {
            // SAFETY: see the function's contract.
            Child::Node(n) => Step::Node(unsafe { &*(&**n as *const N) }),
            // SAFETY: as above, for a leaf.
            Child::Leaf(l) => Step::Leaf(unsafe { &*(&**l as *const [T; FANOUT]) }),
        }
    }
}

/// The children of one interior node: no allocation until the first
/// insertion below it, then [`FANOUT`] slots.
pub struct Slots<N, T>(Box<[Option<Child<N, T>>]>);

impl<N, T: Default> Slots<N, T> {
    /// No child yet (and no allocation).
    pub(super) fn empty() -> Self {
        Slots(Vec::new().into_boxed_slice())
    }

    /// The child at `i`, if there is one.
    pub(super) fn get(&self, i: usize) -> Option<&Child<N, T>> {
        self.0.get(i).and_then(Option::as_ref)
    }

    /// The child at `i` of a node at `level`, made if the slot is empty (a
    /// leaf under the last interior level, else `node()`): the check
    /// *under the exclusive lock* of double-checked insertion.
    pub(super) fn fill(&mut self, i: usize, level: u32, node: impl FnOnce() -> N) -> &Child<N, T> {
        if self.0.is_empty() {
            self.0 = (0..FANOUT).map(|_| None).collect();
        }
        let i = i & (FANOUT - 1);
        self.0[i].get_or_insert_with(|| make_child(level, node))
    }

    /// Whether the slot array is still unallocated (no child yet).
    pub(super) fn is_unallocated(&self) -> bool {
        self.0.is_empty()
    }

    /// [`Slots::fill`] with what it may need made beforehand, outside the
    /// exclusive lock: `child` for the slot and, if this node has no slot
    /// array yet, `array`. Returns the slot's child and whatever was not
    /// used (the slot was filled meanwhile), for the caller to drop after
    /// it releases the lock.
    pub(super) fn fill_prepared(
        &mut self,
        i: usize,
        child: Child<N, T>,
        array: Option<SlotArray<N, T>>,
    ) -> (&Child<N, T>, Unused<N, T>) {
        let mut unused_array = None;
        if self.0.is_empty() {
            self.0 = array.unwrap_or_else(empty_array);
        } else {
            unused_array = array;
        }
        let slot = &mut self.0[i & (FANOUT - 1)];
        let unused_child = if slot.is_none() {
            *slot = Some(child);
            None
        } else {
            Some(child)
        };
        (
            slot.as_ref().expect("filled above"),
            (unused_child, unused_array),
        )
    }

    /// The planted bug of the model checks: insert at `i` without looking
    /// again, as a thread that skipped the second check would. The child it
    /// replaces is leaked, not freed (another thread may still be inside
    /// it): it is unreachable, as in the paper's Figure 6a.
    #[cfg(all(test, feature = "shuttle"))]
    pub(super) fn fill_unchecked(
        &mut self,
        i: usize,
        level: u32,
        node: impl FnOnce() -> N,
    ) -> &Child<N, T> {
        if self.0.is_empty() {
            self.0 = (0..FANOUT).map(|_| None).collect();
        }
        let i = i & (FANOUT - 1);
        if let Some(old) = self.0[i].take() {
            std::mem::forget(old);
        }
        self.0[i].insert(make_child(level, node))
    }

    /// Bytes of the slot array.
    fn bytes(&self) -> usize {
        std::mem::size_of_val(&*self.0)
    }
}

/// A node's array of [`FANOUT`] child slots.
pub(super) type SlotArray<N, T> = Box<[Option<Child<N, T>>]>;

/// What [`Slots::fill_prepared`] did not use: a child, a slot array.
pub(super) type Unused<N, T> = (Option<Child<N, T>>, Option<SlotArray<N, T>>);

/// A slot array with every slot empty.
pub(super) fn empty_array<N, T>() -> SlotArray<N, T> {
    (0..FANOUT).map(|_| None).collect()
}

/// The child a node at `level` gets in an empty slot: a leaf under the last
/// interior level, else `node()`.
pub(super) fn make_child<N, T: Default>(level: u32, node: impl FnOnce() -> N) -> Child<N, T> {
    if level + 1 == INTERIOR_LEVELS {
        Child::Leaf(Box::new(std::array::from_fn(|_| T::default())))
    } else {
        Child::Node(Box::new(node()))
    }
}

/// An interior node of a locked tree: a lock around its [`Slots`], and
/// the locking protocol that walks the tree from it. Implemented by
/// [`super::rw::RwNode`] and [`super::cascade::CascadeNode`] only.
pub trait LockedNode<T>: Sized + Send + Sync {
    /// A node without children.
    fn empty() -> Self;
    /// Run `f` on the children while holding the node's lock (shared where
    /// the lock has a shared mode).
    fn with_slots<R>(&self, f: impl FnOnce(&Slots<Self, T>) -> R) -> R;
    /// The value for `key` below this root, if its leaf exists.
    fn lookup<P: SerialProbe>(&self, key: u64) -> Option<&T>;
    /// The value for `key` below this root, its path made if missing.
    fn insert<P: SerialProbe>(&self, key: u64) -> &T;
}

/// A radix tree of `u64` keys below [`super::radix::KEY_LIMIT`] whose
/// interior nodes are `N`s (see [`super::rw::RwRadix`],
/// [`super::cascade::CascadeRadix`]); `P` times what excludes other
/// threads ([`SerialProbe`]). The root's child array is made by the
/// first insertion: an unused tree allocates nothing.
pub struct LockedRadix<N, T, P> {
    pub(super) root: N,
    _marker: std::marker::PhantomData<fn() -> (P, T)>,
}

impl<N: LockedNode<T>, T: Default, P: SerialProbe> Default for LockedRadix<N, T, P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<N: LockedNode<T>, T: Default, P: SerialProbe> LockedRadix<N, T, P> {
    /// An empty tree.
    pub fn new() -> Self {
        LockedRadix {
            root: N::empty(),
            _marker: std::marker::PhantomData,
        }
    }

    /// The value for `key` if its leaf exists.
    pub fn get(&self, key: u64) -> Option<&T> {
        debug_assert!(key < super::radix::KEY_LIMIT);
        self.root.lookup::<P>(key)
    }

    /// The value for `key`, creating its leaf (and path) if needed.
    pub fn get_or_insert(&self, key: u64) -> &T {
        debug_assert!(key < super::radix::KEY_LIMIT);
        self.root.insert::<P>(key)
    }

    /// Visit every existing value with its key, in key order (node locks
    /// held on the path; `f` must not call into the tree).
    pub fn for_each(&self, mut f: impl FnMut(u64, &T)) {
        for_each(&self.root, 0, &mut f);
    }

    /// DRAM used by the tree's nodes.
    pub fn memory_bytes(&self) -> usize {
        memory_bytes(&self.root)
    }
}

impl<N: LockedNode<T>, T: Default + Send + Sync, P: SerialProbe> PageIndex<T>
    for LockedRadix<N, T, P>
{
    fn get(&self, key: u64) -> Option<&T> {
        LockedRadix::get(self, key)
    }
    fn get_or_insert(&self, key: u64) -> &T {
        LockedRadix::get_or_insert(self, key)
    }
    fn for_each(&self, f: &mut dyn FnMut(u64, &T)) {
        for_each(&self.root, 0, f);
    }
    fn memory_bytes(&self) -> usize {
        LockedRadix::memory_bytes(self)
    }
}

/// Visit every value under `node` (keys starting with `prefix`) in key order, holding each node's lock while its subtree is
/// visited. `f` must not call into the tree.
fn for_each<N: LockedNode<T>, T: Default>(node: &N, prefix: u64, f: &mut dyn FnMut(u64, &T)) {
    node.with_slots(|slots| {
        for (i, c) in slots.0.iter().enumerate() {
            let prefix = (prefix << FANOUT_BITS) | i as u64;
            match c {
                None => {}
                Some(Child::Leaf(leaf)) => {
                    for (j, v) in leaf.iter().enumerate() {
                        f((prefix << FANOUT_BITS) | j as u64, v);
                    }
                }
                Some(Child::Node(n)) => for_each(&**n, prefix, f),
            }
        }
    })
}

/// DRAM used by `node` and everything below it.
fn memory_bytes<N: LockedNode<T>, T: Default>(node: &N) -> usize {
    node.with_slots(|slots| {
        let mut total = std::mem::size_of::<N>() + slots.bytes();
        for c in slots.0.iter().flatten() {
            total += match c {
                Child::Leaf(_) => std::mem::size_of::<[T; FANOUT]>(),
                Child::Node(n) => memory_bytes(&**n),
            };
        }
        total
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A slot of the last interior level: leaves, so no node type is made.
    const LEAF_LEVEL: u32 = INTERIOR_LEVELS - 1;

    fn leaf(v: u64) -> Child<(), u64> {
        Child::Leaf(Box::new([v; FANOUT]))
    }

    fn value(c: &Child<(), u64>) -> u64 {
        match c {
            Child::Leaf(l) => l[0],
            Child::Node(_) => unreachable!("leaves only"),
        }
    }

    #[test]
    fn a_prepared_fill_uses_what_it_needs_and_hands_back_the_rest() {
        let mut slots: Slots<(), u64> = Slots::empty();
        assert!(slots.is_unallocated());
        // First child of the node: the prepared array and child are used.
        let (c, unused) = slots.fill_prepared(3, leaf(1), Some(empty_array()));
        assert_eq!(value(c), 1);
        assert!(unused.0.is_none() && unused.1.is_none());
        assert!(!slots.is_unallocated());
        // The slot was filled meanwhile: the existing child stays, and both
        // prepared parts come back to be dropped outside the lock.
        let (c, unused) = slots.fill_prepared(3, leaf(2), Some(empty_array()));
        assert_eq!(value(c), 1);
        assert!(matches!(unused.0, Some(Child::Leaf(ref l)) if l[0] == 2));
        assert!(unused.1.is_some());
        // Another slot of an allocated node: the child is used, no array
        // is needed.
        let (c, unused) = slots.fill_prepared(4, leaf(3), None);
        assert_eq!(value(c), 3);
        assert!(unused.0.is_none() && unused.1.is_none());
        // And the plain fill agrees with what is there.
        assert_eq!(value(slots.fill(3, LEAF_LEVEL, || ())), 1);
    }
}
