//! The background commit thread of a `file` mount: every
//! `commit_interval` (sooner when staging fills the pool) a checkpoint makes
//! what was written durable and frees what waited for it; staged data moves
//! to the data device when a checkpoint alone frees too little.

use crate::core::FsCore;

/// Start the background commit thread of a `file` mount (every
/// `commit_interval`, while the file system lives).
pub(crate) fn start_commit_thread(core: &std::sync::Arc<FsCore>) {
    let interval = core.opts.commit_interval;
    if !core.deferring() || interval.is_zero() {
        return;
    }
    let weak = std::sync::Arc::downgrade(core);
    let _ = std::thread::Builder::new()
        .name("manyfs-commit".into())
        .spawn(move || {
            let step = interval.min(std::time::Duration::from_millis(50));
            let mut waited = std::time::Duration::ZERO;
            loop {
                std::thread::sleep(step);
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
                if waited >= interval || low {
                    waited = std::time::Duration::ZERO;
                    if core.sync_engine.has_work() {
                        let _ = core.checkpoint();
                    }
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
}
