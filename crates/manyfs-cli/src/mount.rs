//! `manyfs mount POOL MOUNTPOINT [--foreground] [-o opt,opt]`: mount a pool
//! through FUSE. The implementation (daemon mode, signals, options) lives in
//! the `manyfs-fuse` crate so its tests exercise exactly this code path.

pub use manyfs_fuse::cli::MountArgs;

/// Run `manyfs mount`. Errors are flattened to one line (the adapter's
/// messages already include their cause).
pub fn run(args: &MountArgs) -> anyhow::Result<()> {
    manyfs_fuse::cli::run(args, &["mount"]).map_err(|e| anyhow::anyhow!("{e}"))
}
