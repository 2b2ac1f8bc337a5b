//! F2FS's node-tree locking, a baseline of the file index
//! (`index=cascade`): the radix shape of [`super::radix`] with a mutex in
//! every interior node, taken hand-over-hand from the root (the child's
//! mutex before the parent's is released), for lookups and insertions
//! alike. This is the nCACHE paper's "cascading tree lock": every
//! operation holds the root's mutex until it holds the next one, so
//! operations on disjoint ranges still pass the root one at a time.
//! Insertion needs no second check: the node is held exclusively.

use super::locked::{LockedNode, LockedRadix, Slots, Step};
use super::radix::{INTERIOR_LEVELS, slot_index};
use super::{NoProbe, SerialProbe};
use manyfs_sync::node::{Mutex, MutexGuard};

/// A radix tree of `u64` keys below [`super::radix::KEY_LIMIT`] whose
/// nodes are locked hand-over-hand with mutexes. `P` times the hold of the
/// root's mutex, the part every operation serialises on ([`SerialProbe`];
/// nothing by default).
pub type CascadeRadix<T, P = NoProbe> = LockedRadix<CascadeNode<T>, T, P>;

/// An interior node: its children under a mutex.
pub struct CascadeNode<T>(Mutex<Slots<CascadeNode<T>, T>>);

impl<T: Default + Send + Sync> LockedNode<T> for CascadeNode<T> {
    fn empty() -> Self {
        CascadeNode(Mutex::new(Slots::empty()))
    }

    fn with_slots<R>(&self, f: impl FnOnce(&Slots<Self, T>) -> R) -> R {
        f(&self.0.lock())
    }

    fn lookup<P: SerialProbe>(&self, key: u64) -> Option<&T> {
        self.walk::<P>(key, false)
    }

    fn insert<P: SerialProbe>(&self, key: u64) -> &T {
        match self.walk::<P>(key, true) {
            Some(v) => v,
            None => unreachable!("an inserting walk always reaches a leaf"),
        }
    }
}

impl<T: Default + Send + Sync> CascadeNode<T> {
    fn walk<P: SerialProbe>(&self, key: u64, insert: bool) -> Option<&T> {
        let mut guard: MutexGuard<'_, _> = self.0.lock();
        let mut root_held = Some(P::enter());
        let mut result = None;
        for level in 0..INTERIOR_LEVELS {
            let i = slot_index(key, level);
            let child = if insert {
                Some(guard.fill(i, level, CascadeNode::empty))
            } else {
                guard.get(i)
            };
            let Some(child) = child else { break };
            // SAFETY: a slot of the tree `self` roots, borrowed for the
            // result's lifetime (see `Child::step`).
            match unsafe { child.step() } {
                Step::Leaf(leaf) => {
                    result = Some(&leaf[slot_index(key, INTERIOR_LEVELS)]);
                    break;
                }
                Step::Node(next) => {
                    // Hand over hand: the child's mutex, then the parent's
                    // is released (the old guard drops on assignment).
                    guard = next.0.lock();
                    if let Some(t) = root_held.take() {
                        P::exit(t);
                    }
                }
            }
        }
        drop(guard);
        if let Some(t) = root_held.take() {
            P::exit(t);
        }
        result
    }
}
