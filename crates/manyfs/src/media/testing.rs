//! Pools for the media's unit tests.

use super::{Durability, Media, OpenMember};
use std::path::Path;

/// A fresh single-file pool of 1 MiB in `mode`, in a temporary directory.
pub(super) fn pool(mode: Durability) -> (tempfile::TempDir, Media) {
    let dir = tempfile::tempdir().unwrap();
    let m = Media::create(&dir.path().join("p"), 1 << 20, mode).unwrap();
    (dir, m)
}

/// A new member file of `len` bytes at `p`, on node 0.
pub(super) fn new_member(p: &Path, len: u64) -> OpenMember {
    OpenMember {
        file: Media::create_file(p, len, false).unwrap(),
        path: p.to_path_buf(),
        len,
        node: 0,
    }
}
