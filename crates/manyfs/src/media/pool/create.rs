//! Creating a pool: the pool file, every member file and the data device
//! `mkfs` names, sized, mapped and then formatted (superblocks, journal,
//! root directory, member table and headers).

use crate::error::{Error, Result};
use crate::layout::members::*;
use crate::layout::*;
use crate::media::{Durability, Media, OpenMember};
use std::path::{Path, PathBuf};

/// What [`create_pool`] makes (from `MkfsOptions`).
pub(crate) struct NewPoolOptions<'a> {
    pub size: u64,
    pub bytes_per_inode: u64,
    pub replace_existing: bool,
    pub node: u32,
    pub members: &'a [PoolMember],
    /// The data device of a tiered pool.
    pub data: Option<&'a DataDevice>,
    /// The mount's topology: members on tmpfs are bound to their node
    /// under the machine's own (see `media::numa`).
    pub topology: &'a crate::Topology,
}

/// A new pool's files, mapped: the superblock to format it with and, for a
/// pool with members, its member table.
pub(crate) struct NewPool {
    pub media: Media,
    pub sb: Superblock,
    pub table: Option<MemberTable>,
}

/// Create the pool file `pool` and every member file `mkfs` names, and map
/// them. A pool with no further member and node 0 is one file of
/// `mkfs.size` bytes (format version 5: no member table, as before members existed).
pub(crate) fn create_pool(
    pool: &Path,
    mkfs: &NewPoolOptions<'_>,
    mode: Durability,
) -> Result<NewPool> {
    if mkfs.members.is_empty() && mkfs.node == 0 && mkfs.data.is_none() {
        let sb = Superblock::for_size(mkfs.size, mkfs.bytes_per_inode)?;
        let media = crate::media::numa::create_bound(pool, 0, mkfs.topology, || {
            Media::create_with(pool, mkfs.size, mode, mkfs.replace_existing)
        })?;
        return Ok(NewPool {
            media,
            sb,
            table: None,
        });
    }
    let (table, device_size) = member_table(pool, mkfs)?;
    let sb = pool_superblock(pool, mkfs, &table, device_size)?;
    let open = create_member_files(pool, mkfs, &table)?;
    let paths: Vec<PathBuf> = open.iter().map(|m| m.path.clone()).collect();
    let mut media = Media::from_members(open, mode, true).inspect_err(|_| {
        for p in &paths {
            let _ = std::fs::remove_file(p);
        }
    })?;
    if let (Some(d), Some(size)) = (mkfs.data, device_size) {
        let device = create_device(d, size).inspect_err(|_| {
            for p in &paths {
                let _ = std::fs::remove_file(p);
            }
        })?;
        media.attach_device(device);
    }
    Ok(NewPool {
        media,
        sb,
        table: Some(table),
    })
}

/// The member table of the pool `pool` that `mkfs` describes, and the
/// size of its data device (checked and sized now, created or overwritten
/// only once the members are). Refuses a member too small, and a member or
/// device that names a file already in the pool.
fn member_table(pool: &Path, mkfs: &NewPoolOptions<'_>) -> Result<(MemberTable, Option<u64>)> {
    let mut entries = vec![MemberEntry {
        path: PathBuf::new(),
        node: mkfs.node,
        blocks: mkfs.size / BLOCK_SIZE,
        device: false,
    }];
    let mut seen = vec![resolved(pool)?];
    for (i, m) in mkfs.members.iter().enumerate() {
        let blocks = m.size / BLOCK_SIZE;
        if blocks < 2 {
            return Err(Error::InvalidArgument(format!(
                "member {} ({}): {} bytes is too small (at least {} bytes: a header block and a data block)",
                i + 1,
                m.path.display(),
                m.size,
                2 * BLOCK_SIZE
            )));
        }
        let abs = resolved(&m.path)?;
        if seen.contains(&abs) {
            return Err(Error::InvalidArgument(format!(
                "member {} ({}) names a file already in the pool",
                i + 1,
                m.path.display()
            )));
        }
        seen.push(abs);
        entries.push(MemberEntry {
            path: record_member_path(pool, &m.path)?,
            node: m.node,
            blocks,
            device: false,
        });
    }
    let device_size = match mkfs.data {
        None => None,
        Some(d) => {
            let abs = resolved(&d.path)?;
            if seen.contains(&abs) {
                return Err(Error::InvalidArgument(format!(
                    "the data device {} names a file already in the pool",
                    d.path.display()
                )));
            }
            let size = device_size(d, mkfs.replace_existing)?;
            entries.push(MemberEntry {
                path: record_member_path(pool, &d.path)?,
                node: mkfs.node,
                blocks: size / BLOCK_SIZE,
                device: true,
            });
            Some(size)
        }
    };
    Ok((MemberTable { members: entries }, device_size))
}

/// The superblock of a new pool with `table` (and a data device of
/// `device_size` bytes), once the pool is known to fit: within the block
/// address space, its table within block 0, and the superblocks, journal,
/// inode table and root directory within member 0.
fn pool_superblock(
    pool: &Path,
    mkfs: &NewPoolOptions<'_>,
    table: &MemberTable,
    device_size: Option<u64>,
) -> Result<Superblock> {
    let total = table
        .total_blocks()
        .ok_or_else(|| Error::InvalidArgument("pool too large".into()))?;
    let mut sb = Superblock::for_size(total.saturating_mul(BLOCK_SIZE), mkfs.bytes_per_inode)?;
    sb.member_table = true;
    sb.device_blocks = device_size.map_or(0, |s| s / BLOCK_SIZE);
    if sb.data_end() > KEY_LIMIT {
        return Err(Error::InvalidArgument(format!(
            "pool and data device together are too large (at most {} bytes)",
            KEY_LIMIT * BLOCK_SIZE
        )));
    }
    table.encode()?;
    let n0 = table.members[0].blocks;
    if n0 <= sb.data_start + 1 {
        return Err(Error::InvalidArgument(format!(
            "member 0 ({}) of {n0} blocks cannot hold the superblocks, journal, inode table and \
             root directory ({} blocks): give it a larger --size",
            pool.display(),
            sb.data_start + 2
        )));
    }
    Ok(sb)
}

/// `path` absolute and without `.` or `..`: what two names of one file
/// in a pool compare equal as.
fn resolved(path: &Path) -> Result<PathBuf> {
    std::path::absolute(path)
        .map(|p| lexical(&p))
        .map_err(|e| Error::io(format!("resolve {}", path.display()), e))
}

/// Create the pool file `pool` and every further mapped member file of
/// `table`, each bound to its node. A member that cannot be created
/// removes the ones created before it (they hold nothing yet), so a
/// failed mkfs leaves no half pool.
fn create_member_files(
    pool: &Path,
    mkfs: &NewPoolOptions<'_>,
    table: &MemberTable,
) -> Result<Vec<OpenMember>> {
    let mut open: Vec<OpenMember> = Vec::with_capacity(table.members.len());
    let undo = |open: &[OpenMember]| {
        for m in open {
            let _ = std::fs::remove_file(&m.path);
        }
    };
    for (i, entry) in table.members.iter().enumerate() {
        if entry.device {
            break;
        }
        let path = if i == 0 {
            pool.to_path_buf()
        } else {
            mkfs.members[i - 1].path.clone()
        };
        let len = entry.blocks * BLOCK_SIZE;
        let created = crate::media::numa::create_bound(&path, entry.node, mkfs.topology, || {
            Media::create_file(&path, len, mkfs.replace_existing)
        });
        match created {
            Ok(file) => open.push(OpenMember {
                file,
                path,
                len,
                node: entry.node,
            }),
            Err(e) => {
                undo(&open);
                return Err(e);
            }
        }
    }
    Ok(open)
}

/// The bytes a new data device will have: `d.size` (checked against a
/// block device's or an existing file's size), or the size it has.
fn device_size(d: &DataDevice, replace_existing: bool) -> Result<u64> {
    use std::os::unix::fs::FileTypeExt;
    let meta = match std::fs::metadata(&d.path) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(Error::io(
                format!("stat data device {}", d.path.display()),
                e,
            ));
        }
    };
    let is_block = meta
        .as_ref()
        .is_some_and(|m| m.file_type().is_block_device());
    let has = match &meta {
        Some(_) if is_block => {
            let f = std::fs::File::open(&d.path)
                .map_err(|e| Error::io(format!("open data device {}", d.path.display()), e))?;
            crate::tier::device::byte_len(&f)
                .map_err(|e| Error::io(format!("size of data device {}", d.path.display()), e))?
        }
        Some(m) if m.is_file() => m.len(),
        Some(_) => {
            return Err(Error::InvalidArgument(format!(
                "data device {}: neither a regular file nor a block device",
                d.path.display()
            )));
        }
        None => 0,
    };
    if !is_block && has > 0 && !replace_existing {
        return Err(Error::Exists(format!("data device {}", d.path.display())));
    }
    let size = match d.size {
        Some(s) => s,
        None if has > 0 => has,
        None => {
            return Err(Error::InvalidArgument(format!(
                "data device {} does not exist yet: give its size (--data-size)",
                d.path.display()
            )));
        }
    } / BLOCK_SIZE
        * BLOCK_SIZE;
    if is_block && size > has {
        return Err(Error::InvalidArgument(format!(
            "data device {} has {has} bytes, fewer than the {size} asked for",
            d.path.display()
        )));
    }
    if size < 2 * BLOCK_SIZE {
        return Err(Error::InvalidArgument(format!(
            "data device {}: {size} bytes is too small (at least {} bytes: a header block and a \
             data block)",
            d.path.display(),
            2 * BLOCK_SIZE
        )));
    }
    Ok(size)
}

/// Create (or size) the data device file and open it: a regular file is
/// written whole with zeros and flushed, so that every later write is an
/// overwrite (a hole or an unwritten extent would make the disk file
/// system commit its journal at the first flush after each block's first
/// write).
fn create_device(d: &DataDevice, size: u64) -> Result<crate::tier::Device> {
    use std::os::unix::fs::FileTypeExt;
    let ctx = |what: &str| format!("{what} data device {}", d.path.display());
    let (file, direct) = crate::tier::device::open_file(&d.path, true, true)
        .map_err(|e| Error::io(ctx("create"), e))?;
    crate::media::lock_exclusive(&file, &d.path)?;
    let meta = file.metadata().map_err(|e| Error::io(ctx("stat"), e))?;
    let device = if meta.file_type().is_block_device() {
        crate::tier::Device::new(file, d.path.clone(), size, direct)
    } else {
        file.set_len(0)
            .and_then(|_| file.set_len(size))
            .map_err(|e| Error::io(ctx("size"), e))?;
        let device = crate::tier::Device::new(file, d.path.clone(), size, direct);
        let zeros = vec![0u8; 1 << 20];
        let mut off = 0;
        while off < size {
            let n = (size - off).min(zeros.len() as u64) as usize;
            device.write(off, &zeros[..n])?;
            off += n as u64;
        }
        device
    };
    device.flush()?;
    Ok(device)
}

/// Write a fresh superblock, backup, journal and root directory, and for a
/// pool with members its member table and every member's header.
pub(crate) fn format(media: &Media, sb: &Superblock, table: Option<&MemberTable>) -> Result<()> {
    let zero = vec![0u8; BLOCK_SIZE as usize];
    for b in 0..sb.data_start + 1 {
        media.store(b * BLOCK_SIZE, &zero)?;
    }
    if let Some(t) = table {
        write_members(media, sb, t)?;
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

/// Write the member table (both copies) and every member's header (mkfs).
fn write_members(media: &Media, sb: &Superblock, table: &MemberTable) -> Result<()> {
    for (i, entry) in table.members.iter().enumerate().skip(1) {
        let off = table.start_block(i) * BLOCK_SIZE;
        let h = table.header(i, sb.uuid).encode();
        if entry.device {
            // Its own block 0; the device may be long, so only the header.
            let mut block = vec![0u8; BLOCK_SIZE as usize];
            block[..MEMBER_HEADER_LEN].copy_from_slice(&h);
            media.store(off, &block)?;
            media.flush_device()?;
            continue;
        }
        media.store(off, &vec![0u8; BLOCK_SIZE as usize])?;
        media.store(off, &h)?;
        media.persist(off, BLOCK_SIZE as usize)?;
    }
    let enc = table.encode()?;
    for block in [BACKUP_SUPERBLOCK_BLOCK, SUPERBLOCK_BLOCK] {
        let off = block * BLOCK_SIZE + MEMBER_TABLE_OFFSET;
        media.store(off, &enc)?;
        media.persist(off, enc.len())?;
    }
    Ok(())
}
