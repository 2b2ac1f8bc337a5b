//! nCACHE's file index (the nCACHE paper's Algorithm 1), a baseline of the
//! file index (`index=rw`): the radix shape of [`super::radix`] with a
//! reader-writer lock in every interior node.
//!
//! A traversal takes the root's read lock, then at each level reads the
//! child slot of the key; it takes the child's read lock before it releases
//! the parent's (lines 19-22). An insertion that finds the child missing
//! releases the read lock, takes the write lock, checks the slot *again*
//! (another writer may have filled it in between: without this second
//! check it would overwrite that writer's node, Figure 6a), fills it if
//! still empty, and turns the write lock back into a read lock (lines
//! 8-17; here with parking_lot's atomic downgrade). Lookups that find a
//! hole return `None` without writing anything.

use super::locked::{LockedNode, LockedRadix, Slots, Step, empty_array, make_child};
use super::radix::{INTERIOR_LEVELS, slot_index};
use super::{NoProbe, SerialProbe};
use manyfs_sync::node::{RwLock, RwLockReadGuard, downgrade};

/// A radix tree of `u64` keys below [`super::radix::KEY_LIMIT`] with a
/// reader-writer lock per node and double-checked insertion. `P` times the
/// write-locked sections ([`SerialProbe`]; nothing by default).
pub type RwRadix<T, P = NoProbe> = LockedRadix<RwNode<T>, T, P>;

/// An interior node: its children under a reader-writer lock.
pub struct RwNode<T>(RwLock<Slots<RwNode<T>, T>>);

impl<T: Default + Send + Sync> LockedNode<T> for RwNode<T> {
    fn empty() -> Self {
        RwNode(RwLock::new(Slots::empty()))
    }

    fn with_slots<R>(&self, f: impl FnOnce(&Slots<Self, T>) -> R) -> R {
        f(&self.0.read())
    }

    fn lookup<P: SerialProbe>(&self, key: u64) -> Option<&T> {
        let mut guard = self.0.read();
        for level in 0..INTERIOR_LEVELS {
            let child = guard.get(slot_index(key, level))?;
            // SAFETY: `child` is a slot of the tree `self` roots, borrowed
            // for the result's lifetime (see `Child::step`).
            match unsafe { child.step() } {
                Step::Leaf(leaf) => return Some(&leaf[slot_index(key, INTERIOR_LEVELS)]),
                // The child's read lock before the parent's is released.
                Step::Node(next) => guard = next.0.read(),
            }
        }
        None
    }

    fn insert<P: SerialProbe>(&self, key: u64) -> &T {
        self.insert_path::<P>(key, Recheck::Yes)
    }
}

impl<T: Default + Send + Sync, P: SerialProbe> RwRadix<T, P> {
    /// [`RwRadix::get_or_insert`] with the planted bug the model checks
    /// must catch: no second look under the write lock.
    #[cfg(all(test, feature = "shuttle"))]
    pub(crate) fn get_or_insert_without_recheck(&self, key: u64) -> &T {
        self.root.insert_path::<P>(key, Recheck::PlantedBugSkip)
    }
}

impl<T: Default + Send + Sync> RwNode<T> {
    fn insert_path<P: SerialProbe>(&self, key: u64, recheck: Recheck) -> &T {
        let mut node = self;
        let mut guard: RwLockReadGuard<'_, _> = node.0.read();
        for level in 0..INTERIOR_LEVELS {
            let i = slot_index(key, level);
            let step = match guard.get(i) {
                // SAFETY: a slot of the tree `self` roots (see `Child::step`).
                Some(child) => unsafe { child.step() },
                None => {
                    // Lines 8-17: read lock out, write lock in, look again,
                    // insert, back to a read lock. The new child (and the
                    // node's slot array, if it has none) is made before the
                    // write lock, so that what excludes the other threads
                    // is the second look and a store; one made in vain
                    // (another thread filled the slot meanwhile) is dropped
                    // after the lock is back to a read lock.
                    let array = guard.is_unallocated().then(empty_array);
                    drop(guard);
                    let fresh = make_child(level, RwNode::empty);
                    let mut w = node.0.write();
                    let held = P::enter();
                    let (child, unused) = match recheck {
                        Recheck::Yes => w.fill_prepared(i, fresh, array),
                        #[cfg(all(test, feature = "shuttle"))]
                        Recheck::PlantedBugSkip => (
                            w.fill_unchecked(i, level, RwNode::empty),
                            (Some(fresh), array),
                        ),
                    };
                    // SAFETY: a slot of the tree `self` roots (see `Child::step`).
                    let step = unsafe { child.step() };
                    P::exit(held);
                    guard = downgrade(&node.0, w);
                    drop(unused);
                    step
                }
            };
            match step {
                Step::Leaf(leaf) => return &leaf[slot_index(key, INTERIOR_LEVELS)],
                Step::Node(next) => {
                    // The child's read lock, then the parent's goes.
                    let parent = std::mem::replace(&mut guard, next.0.read());
                    drop(parent);
                    node = next;
                }
            }
        }
        unreachable!("leaves sit under the last interior level")
    }
}

#[derive(Clone, Copy)]
enum Recheck {
    Yes,
    #[cfg(all(test, feature = "shuttle"))]
    PlantedBugSkip,
}
