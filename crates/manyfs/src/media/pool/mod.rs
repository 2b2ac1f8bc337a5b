//! A pool's files and the records a mount reads and writes in them:
//! opening every member a pool's member table names and checking it
//! against the table (`open.rs`), creating and formatting a new pool
//! (`create.rs`), and the per-member records a mounted pool keeps (the
//! spill counts, the reserved header blocks).
//!
//! It lives in the media, not in `crate::layout`: the layout is the
//! on-media format only (encodings, constants, validation, no I/O), and
//! everything here opens, sizes, locks, maps, reads or writes files and
//! devices, as the rest of the media does. The layout's records are
//! encoded and decoded there ([`MemberTable`], [`MemberHeader`],
//! [`SpillRecord`]); this module moves their bytes.

mod create;
mod open;

pub(crate) use create::{NewPoolOptions, create_pool, format};
pub(crate) use open::open_pool;

use super::Media;
use crate::error::{Error, Result};
use crate::layout::members::*;
use crate::layout::*;

/// Every mapped member's spill count as its records hold it: the primary
/// copy, or the backup where the primary is damaged (a write torn by a
/// crash), or 0 where both are (the count is statistics: it never stops
/// a mount).
pub(crate) fn read_spills(media: &Media) -> Vec<u64> {
    media
        .members()
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let [backup, primary] = SpillRecord::offsets(i, m.start);
            [primary, backup]
                .into_iter()
                .find_map(|off| {
                    let mut b = [0u8; SPILL_RECORD_LEN];
                    media.read(off, &mut b).ok()?;
                    SpillRecord::decode(&b, i as u32)
                })
                .unwrap_or_else(|| {
                    tracing::warn!(
                        "member {i}: both spill records damaged; counting its spills from 0"
                    );
                    0
                })
        })
        .collect()
}

/// Write member `index`'s spill record (backup copy first, each made
/// durable before the next) with `spills`.
pub(crate) fn write_spills(media: &Media, index: usize, spills: u64) -> Result<()> {
    let Some(m) = media.members().into_iter().nth(index) else {
        return Err(Error::InvalidArgument(format!(
            "no pool member {index} to record spills in"
        )));
    };
    let rec = SpillRecord {
        index: index as u32,
        spills,
    }
    .encode();
    for off in SpillRecord::offsets(index, m.start) {
        media.store(off, &rec)?;
        media.persist(off, rec.len())?;
        media.sync_range(off, rec.len())?;
    }
    Ok(())
}

/// Blocks no allocator may hand out besides the superblocks, journal and
/// inode table: the header block of every member but 0.
pub(crate) fn reserved_blocks(media: &Media) -> Vec<u64> {
    media
        .members()
        .iter()
        .skip(1)
        .map(|m| m.start / BLOCK_SIZE)
        .chain(media.device().map(|_| media.len() / BLOCK_SIZE))
        .collect()
}
