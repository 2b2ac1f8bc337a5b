//! Blocks, log-entry references and inode numbers that wait for a sync
//! before they may be reused (`file` mode), and the registry of inodes with
//! state that is not durable yet. The sync itself lives in `sync_engine`.

use crossbeam_utils::CachePadded;
use parking_lot::Mutex;

const SHARDS: usize = 16;

/// Something to free once the state that no longer needs it is durable.
#[derive(Debug)]
pub enum Pending {
    /// Data blocks superseded or truncated away.
    Blocks(u64, u64),
    /// A log page unlinked by garbage collection, or a log array or page
    /// replaced by compaction.
    LogBlock(u64),
    /// Live references of a superseded log entry.
    Release {
        /// Owner.
        ino: u64,
        /// Its generation.
        generation: u32,
        /// The log's incarnation (compaction count) when deferred.
        incarnation: u64,
        /// The entry.
        loc: u64,
        /// References to drop.
        n: u32,
    },
    /// Everything an unreachable inode owned.
    Inode {
        /// Inode number (freed last).
        ino: u64,
        /// Data blocks.
        data: Vec<u64>,
        /// Log array and log pages.
        log: Vec<u64>,
    },
}

/// Per-mount state of the `file`-mode sync machinery.
pub struct SyncEngine {
    pub(crate) lock: Mutex<()>,
    pub(crate) dirty: Box<[CachePadded<Mutex<Vec<u64>>>]>,
    pub(crate) pending: Box<[CachePadded<Mutex<Vec<Pending>>>]>,
}

impl Default for SyncEngine {
    fn default() -> Self {
        SyncEngine {
            lock: Mutex::new(()),
            dirty: (0..SHARDS)
                .map(|_| CachePadded::new(Mutex::default()))
                .collect(),
            pending: (0..SHARDS)
                .map(|_| CachePadded::new(Mutex::default()))
                .collect(),
        }
    }
}

impl SyncEngine {
    /// Register an inode with undurable state (once per sync period).
    pub fn note_dirty(&self, ino: u64) {
        self.dirty[ino as usize % SHARDS].lock().push(ino);
    }

    /// Queue `p` until after the next sync.
    pub fn defer(&self, p: Pending) {
        self.pending[crate::cpu::current() % SHARDS].lock().push(p);
    }

    /// Blocks waiting for a sync before they become free.
    pub fn pending_blocks(&self) -> u64 {
        self.pending
            .iter()
            .map(|s| {
                s.lock()
                    .iter()
                    .map(|p| match p {
                        Pending::Blocks(_, n) => *n,
                        Pending::LogBlock(_) => 1,
                        Pending::Inode { data, log, .. } => (data.len() + log.len()) as u64,
                        Pending::Release { .. } => 0,
                    })
                    .sum::<u64>()
            })
            .sum()
    }

    /// Whether anything waits for a sync.
    pub fn has_work(&self) -> bool {
        self.dirty.iter().any(|s| !s.lock().is_empty())
            || self.pending.iter().any(|s| !s.lock().is_empty())
    }
}
