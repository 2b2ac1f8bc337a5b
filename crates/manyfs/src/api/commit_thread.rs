//! The background commit thread of a `file` mount: every
//! `commit_interval` (sooner when writes use up the pool's free blocks or
//! replace many blocks, or staging fills the pool) a checkpoint makes what was written durable and
//! frees what waited for it; staged data moves to the data device when a
//! checkpoint alone frees too little.

use crate::core::FsCore;

/// Start the background commit thread of a `file` mount (every
/// `commit_interval`, while the file system lives).
pub(crate) fn start_commit_thread(core: &std::sync::Arc<FsCore>) {
    let interval = core.opts.commit_interval;
    if !core.deferring() || interval.is_zero() {
        return;
    }
    let weak = std::sync::Arc::downgrade(core);
    // Woken when the mount is dropped: a closed mount's thread leaves at
    // once instead of at its next check (a shell under `manyfs run`
    // mounts and closes the pool at every command).
    let stop = core.commit_stop.clone();
    // The mount returns once the thread runs under its name: a process
    // that counts its threads right after mounting (`manyfs run` before a
    // fork) tells it from its own by that name.
    let (started, running) = std::sync::mpsc::sync_channel::<()>(1);
    let spawned = std::thread::Builder::new()
        .name("manyfs-commit".into())
        .spawn(move || {
            let _ = started.send(());
            let step = interval.min(std::time::Duration::from_millis(50));
            let mut waited = std::time::Duration::ZERO;
            let mut free_after_last = None;
            let mut last_checkpoint = std::time::Instant::now();
            loop {
                if stop.sleep(step) {
                    return;
                }
                waited += step;
                let Some(core) = weak.upgrade() else { return };
                if core.media.has_failed() {
                    continue;
                }
                // A pool that staging fills is not left until the interval:
                // a checkpoint first frees what waits for a sync (superseded
                // blocks, dead log pages); staged data moves to the device
                // only if that was not enough, and the next checkpoint
                // makes the move durable and frees its pool blocks.
                let low = crate::file::pool_low(&core);
                // The most free since the last checkpoint (an `fsync` or
                // a writer's own sync may free some meanwhile).
                let free = core.blocks.pool.free_blocks();
                let most = free_after_last.map_or(free, |f: u64| f.max(free));
                free_after_last = Some(most);
                let used_up = free_used_up(most, free);
                let rewrites =
                    rewrites_waiting(core.sync_engine.waiting_blocks(), last_checkpoint.elapsed());
                if waited >= interval || low || used_up || rewrites {
                    waited = std::time::Duration::ZERO;
                    if core.sync_engine.has_work() {
                        let _ = core.checkpoint();
                    }
                    last_checkpoint = std::time::Instant::now();
                    free_after_last = Some(core.blocks.pool.free_blocks());
                    if crate::file::pool_low(&core) {
                        match crate::file::destage_listed(&core) {
                            Ok(0) => {}
                            Ok(_) => {
                                let _ = core.checkpoint();
                            }
                            // A file that failed stays listed.
                            Err(e) => tracing::warn!("destaging to the data device: {e}"),
                        }
                    }
                }
            }
        });
    if spawned.is_ok() {
        let _ = running.recv();
    }
}

/// Whether writes took a quarter of the pool blocks that were free after
/// the last checkpoint (`then`, or more if some were freed since; `now`
/// free): the next checkpoint is then
/// due at once, not at the end of the interval.
///
/// In `file` mode a block a write replaces is reusable only after a sync,
/// so between checkpoints every copy-on-write takes a block no store has
/// touched since the last one (on a fresh pool: never touched, a page fault
/// and the kernel's zeroing of the page per write), and a page written
/// since the last checkpoint cannot be overwritten in place. A writer that
/// outruns the interval would empty the pool and sync inline
/// (`FsCore::alloc_blocks`), stalled for a whole checkpoint; checkpointing
/// as a quarter goes (as a journal commits when a quarter of it is full)
/// hands the replaced blocks back, still mapped and warm, and settles the
/// pages for writes in place. Filling the pool with new data costs a
/// checkpoint per quarter of what is left: a few dozen from empty to full.
fn free_used_up(then: u64, now: u64) -> bool {
    then.saturating_sub(now) > then / 4
}

/// Blocks replaced by writes that, waiting for a checkpoint, make one due
/// (32 MiB of 4 KiB blocks).
const REWRITES_DUE: u64 = 8192;

/// The least time between two checkpoints that [`rewrites_waiting`] makes
/// due.
const REWRITES_GAP: std::time::Duration = std::time::Duration::from_millis(100);

/// Whether the blocks that writes replaced since the last checkpoint
/// (`waiting`, `since` it ended) make the next one due now.
///
/// A program that rewrites its pages (a database's pages, a benchmark's
/// blocks, a checkpoint file written again) copies each page on write until
/// a checkpoint settles it, and every copy takes a block that comes back
/// only after the next checkpoint. Waiting for a quarter of the free blocks
/// ([`free_used_up`]) leaves such a program copying into blocks no store
/// has touched since the last checkpoint (on a fresh pool: a page fault and
/// the kernel's zeroing per write) for seconds on a large pool. Due at
/// 32 MiB, the checkpoint hands the replaced blocks back still mapped and
/// warm, and settles the pages not rewritten while it ran, which are then
/// rewritten in place. (A page rewritten throughout, as DWOM's one block,
/// is written again while every checkpoint runs: it keeps copying, into
/// the warm blocks.) Appends of new data replace nothing and never make
/// this due. On a disk-backed pool a checkpoint costs the barriers of a
/// sync; one made due here has at least 32 MiB of copies to write back,
/// which a later one would write anyway. At most ten a second come from
/// this.
fn rewrites_waiting(waiting: u64, since: std::time::Duration) -> bool {
    waiting >= REWRITES_DUE && since >= REWRITES_GAP
}

#[cfg(test)]
mod tests {
    use super::{REWRITES_DUE, REWRITES_GAP, free_used_up, rewrites_waiting};
    use std::time::Duration;

    #[test]
    fn rewrites_make_a_checkpoint_due_once_enough_wait_and_not_too_often() {
        assert!(!rewrites_waiting(REWRITES_DUE - 1, Duration::from_secs(1)));
        assert!(rewrites_waiting(REWRITES_DUE, REWRITES_GAP));
        assert!(!rewrites_waiting(
            REWRITES_DUE * 100,
            REWRITES_GAP - Duration::from_millis(1)
        ));
    }

    #[test]
    fn a_checkpoint_is_due_once_writes_took_a_quarter_of_the_free_blocks() {
        assert!(!free_used_up(1000, 1000));
        assert!(!free_used_up(1000, 750));
        assert!(free_used_up(1000, 749));
        // Blocks freed meanwhile (a delete) never make one due.
        assert!(!free_used_up(1000, 5000));
        // An almost full pool checkpoints at every few blocks taken.
        assert!(free_used_up(4, 2));
        assert!(!free_used_up(0, 0));
    }
}
