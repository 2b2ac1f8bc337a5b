//! Allocation through a mount: blocks and inode numbers from the per-CPU
//! allocators (`crate::alloc`), and frees that wait for a sync in `file`
//! mode. A dry allocator in `file` mode first runs a full sync
//! (`core/sync.rs`), which returns what deferred frees held back.

use super::FsCore;
use crate::alloc::deferred::Pending;
use crate::error::Result;
use crate::inode::Inode;
use crate::log::EntryLoc;

impl FsCore {
    /// Whether this mount defers reuse and keeps durable marks (`file` mode,
    /// writable).
    pub fn deferring(&self) -> bool {
        self.media.marked() && !self.opts.read_only
    }

    /// Free data blocks that durable state may still reference.
    pub fn free_later(&self, first: u64, count: u64) {
        if self.deferring() {
            self.sync_engine.defer(Pending::Blocks(first, count));
        } else {
            self.blocks.free(first, count);
        }
    }

    /// [`FsCore::free_later`] of one block and [`FsCore::release_later`]
    /// of one reference of `inode`'s entry at `loc`: what a page replaced
    /// by a committed write leaves behind (queued together when deferred).
    pub fn retire_later(&self, inode: &Inode, block: u64, loc: EntryLoc) {
        if self.deferring() {
            self.sync_engine.defer_all([
                Pending::Blocks(block, 1),
                Pending::Release {
                    ino: inode.ino,
                    generation: inode.generation,
                    incarnation: inode.log.incarnation(),
                    loc,
                    n: 1,
                },
            ]);
        } else {
            self.blocks.free(block, 1);
            inode.log.release(self, loc, 1);
        }
    }

    /// Drop live references of a superseded entry of `inode`'s log.
    pub fn release_later(&self, inode: &Inode, loc: EntryLoc, n: u32) {
        if self.deferring() {
            self.sync_engine.defer(Pending::Release {
                ino: inode.ino,
                generation: inode.generation,
                incarnation: inode.log.incarnation(),
                loc,
                n,
            });
        } else {
            inode.log.release(self, loc, n);
        }
    }

    /// Allocate blocks; in `file` mode a dry allocator first runs a sync
    /// (which frees deferred blocks) and tries once more. Never call with a
    /// sub-log mutex held.
    pub fn alloc_blocks(&self, want: u64, purpose: crate::alloc::Purpose) -> Result<(u64, u64)> {
        match self.blocks.alloc(want, purpose) {
            Err(crate::Error::NoSpace(_)) if self.deferring() => {
                self.sync()?;
                self.blocks.alloc(want, purpose)
            }
            r => r,
        }
    }

    /// Allocate an inode number, syncing once in `file` mode if none is free.
    pub fn alloc_ino(&self) -> Result<u64> {
        match self.inode_numbers.alloc() {
            Err(crate::Error::NoSpace(_)) if self.deferring() => {
                self.sync()?;
                self.inode_numbers.alloc()
            }
            r => r,
        }
    }
}
