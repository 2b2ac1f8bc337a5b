//! mkfs: writing a fresh pool.

use super::*;
use crate::error::Result;
use crate::media::Media;
use members::MemberTable;

/// Write a fresh superblock, backup, journal and root directory, and for a
/// pool with members its member table and every member's header.
pub(crate) fn format(media: &Media, sb: &Superblock, table: Option<&MemberTable>) -> Result<()> {
    let zero = vec![0u8; BLOCK_SIZE as usize];
    for b in 0..sb.data_start + 1 {
        media.store(b * BLOCK_SIZE, &zero)?;
    }
    if let Some(t) = table {
        members::write_members(media, sb, t)?;
    }
    let now = crate::time::now_ns();
    // The root directory belongs to whoever creates the pool, so a user can
    // mount a pool they made without root.
    // SAFETY: getuid/getgid have no preconditions and cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let root = InodeRecord {
        generation: 1,
        kind: FileKind::Dir,
        mode: 0o755,
        uid,
        gid,
        log_array: sb.data_start,
        atime_ns: now,
        mtime_ns: now,
        ctime_ns: now,
        rdev: 0,
    };
    media.store(sb.inode_offset(ROOT_INO), &root.encode())?;
    media.persist(0, ((sb.data_start + 1) * BLOCK_SIZE) as usize)?;
    let enc = sb.encode();
    media.store(BACKUP_SUPERBLOCK_BLOCK * BLOCK_SIZE, &enc)?;
    media.persist(BACKUP_SUPERBLOCK_BLOCK * BLOCK_SIZE, enc.len())?;
    // The primary superblock goes last: a pool whose mkfs was interrupted
    // has no valid primary.
    media.store(SUPERBLOCK_BLOCK * BLOCK_SIZE, &enc)?;
    media.persist(0, enc.len())?;
    media.sync_all()
}
