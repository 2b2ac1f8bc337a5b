//! Opening a pool: every member its member table names, each checked
//! against the table (see [`MemberHeader`]) before it is mapped, and its
//! data device.

use crate::error::{Error, MemberProblem, Result};
use crate::layout::members::*;
use crate::layout::*;
use crate::media::{Durability, Media, OpenMember};
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Open and map the pool whose file is `pool`, with every member its
/// member table names, each checked against the table (see [`MemberHeader`])
/// before it is mapped. A pool without a member table (every pool of format
/// version 2 or 3), and a file that is no pool at all, map as one file:
/// recovery and fsck judge what it holds.
pub(crate) fn open_pool(
    pool: &Path,
    mode: Durability,
    writable: bool,
    data: Option<&Path>,
) -> Result<Media> {
    let file = Media::open_file(pool, writable)?;
    let len = file
        .metadata()
        .map_err(|e| Error::io(format!("stat pool {}", pool.display()), e))?
        .len();
    let mut head = vec![0u8; (2 * BLOCK_SIZE).min(len) as usize];
    file.read_exact_at(&mut head, 0)
        .map_err(|e| Error::io(format!("read pool {}", pool.display()), e))?;
    let Some((sb, table)) = read_table(&head)? else {
        if let Some(d) = data {
            return Err(no_device_in_pool(pool, d));
        }
        return Media::from_members(
            vec![OpenMember {
                file,
                path: pool.to_path_buf(),
                len,
                node: 0,
            }],
            mode,
            writable,
        );
    };
    if table.total_blocks() != Some(sb.total_blocks) {
        return Err(Error::corrupt(
            "member table",
            format!(
                "members hold {:?} blocks, the superblock says {}",
                table.total_blocks(),
                sb.total_blocks
            ),
        ));
    }
    let member_len = table.members[0].blocks * BLOCK_SIZE;
    if len != member_len {
        return Err(Error::Member {
            path: pool.to_path_buf(),
            index: 0,
            problem: MemberProblem::Resized {
                expected: member_len,
                found: len,
            },
        });
    }
    let mut open = vec![OpenMember {
        file,
        path: pool.to_path_buf(),
        len,
        node: table.members[0].node,
    }];
    for (i, entry) in table.members.iter().enumerate().skip(1) {
        if entry.device {
            break;
        }
        open.push(open_member(pool, &sb, &table, i, writable)?);
    }
    let mut media = Media::from_members(open, mode, writable)?;
    match (table.device(), sb.device_blocks) {
        (None, 0) => {
            if let Some(d) = data {
                return Err(no_device_in_pool(pool, d));
            }
        }
        (Some((i, entry)), n) if n == entry.blocks => {
            let path =
                data.map_or_else(|| resolve_member_path(pool, &entry.path), Path::to_path_buf);
            let device = open_device(&path, &sb, &table, i, writable)?;
            media.attach_device(device);
        }
        (entry, n) => {
            return Err(Error::corrupt(
                "member table",
                format!(
                    "the superblock records a data device of {n} blocks, the table {:?}",
                    entry.map(|(_, e)| e.blocks)
                ),
            ));
        }
    }
    Ok(media)
}

/// A data device given for the pool `pool`, which has none.
fn no_device_in_pool(pool: &Path, data: &Path) -> Error {
    Error::InvalidArgument(format!(
        "{}: a data device ({}) was given, but the pool has none",
        pool.display(),
        data.display()
    ))
}

/// Open mapped member `i` (not 0) of `table` for the pool file `pool`,
/// and check its length and header against the table.
fn open_member(
    pool: &Path,
    sb: &Superblock,
    table: &MemberTable,
    i: usize,
    writable: bool,
) -> Result<OpenMember> {
    let entry = &table.members[i];
    let path = resolve_member_path(pool, &entry.path);
    let fault = |problem| Error::Member {
        path: path.clone(),
        index: i as u32,
        problem,
    };
    let file = match Media::open_file(&path, writable) {
        Ok(f) => f,
        Err(Error::Io { cause, .. }) => {
            return Err(fault(MemberProblem::Missing(cause.to_string())));
        }
        Err(e) => return Err(e),
    };
    let found = file
        .metadata()
        .map_err(|e| Error::io(format!("stat pool member {}", path.display()), e))?
        .len();
    let expected = entry.blocks * BLOCK_SIZE;
    let mut hb = [0u8; MEMBER_HEADER_LEN];
    if found < MEMBER_HEADER_LEN as u64 {
        return Err(fault(MemberProblem::Resized { expected, found }));
    }
    file.read_exact_at(&mut hb, 0)
        .map_err(|e| Error::io(format!("read pool member {}", path.display()), e))?;
    let h = MemberHeader::decode(&hb).map_err(|e| fault(MemberProblem::BadHeader(e)))?;
    h.check_identity(&sb.uuid, i).map_err(fault)?;
    if h.blocks != entry.blocks || h.node != entry.node || h.start_block != table.start_block(i) {
        return Err(fault(MemberProblem::BadHeader(format!(
            "header says {} blocks from block {} on node {}, the table {} blocks from block {} on node {}",
            h.blocks,
            h.start_block,
            h.node,
            entry.blocks,
            table.start_block(i),
            entry.node
        ))));
    }
    if found != expected {
        return Err(fault(MemberProblem::Resized { expected, found }));
    }
    Ok(OpenMember {
        file,
        path,
        len: expected,
        node: entry.node,
    })
}

/// Open the data device at `path`, entry `index` of `table`, and check its
/// length and header against the pool.
fn open_device(
    path: &Path,
    sb: &Superblock,
    table: &MemberTable,
    index: usize,
    writable: bool,
) -> Result<crate::tier::Device> {
    let fault = |problem| Error::DataDevice {
        path: path.to_path_buf(),
        problem,
    };
    let (file, direct) = crate::tier::device::open_file(path, writable, false)
        .map_err(|e| fault(MemberProblem::Missing(e.to_string())))?;
    if writable {
        crate::media::lock_exclusive(&file, path)?;
    } else {
        crate::media::lock_shared(&file, path)?;
    }
    let expected = sb.device_blocks * BLOCK_SIZE;
    let found = crate::tier::device::byte_len(&file)
        .map_err(|e| Error::io(format!("size of data device {}", path.display()), e))?;
    if found < expected {
        return Err(fault(MemberProblem::Short { expected, found }));
    }
    let device = crate::tier::Device::new(file, path.to_path_buf(), expected, direct);
    let mut hb = [0u8; MEMBER_HEADER_LEN];
    device.read(0, &mut hb)?;
    let h = MemberHeader::decode(&hb).map_err(|e| fault(MemberProblem::BadHeader(e)))?;
    h.check_identity(&sb.uuid, index).map_err(fault)?;
    if h.blocks != sb.device_blocks || h.start_block != table.start_block(index) {
        return Err(fault(MemberProblem::BadHeader(format!(
            "header says {} blocks from block {}, the pool {} blocks from block {}",
            h.blocks,
            h.start_block,
            sb.device_blocks,
            table.start_block(index)
        ))));
    }
    Ok(device)
}
