//! [`Stats`]: what a mount did and holds, in one report
//! ([`Fs::stats`]) for `manyfs inspect`, benchmarks and tests.

use super::Fs;
use crate::layout::BLOCK_SIZE;
use crate::{DeviceStats, PersistStats, StagingStats};
use std::path::PathBuf;

/// One member file of a mounted pool ([`Stats::members`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberUsage {
    /// Its index (0 is the pool file).
    pub index: u32,
    /// Its path, as mount found it.
    pub path: PathBuf,
    /// The NUMA node of its device.
    pub node: u32,
    /// Its first block in the pool's address space.
    pub first_block: u64,
    /// Its size in blocks.
    pub blocks: u64,
    /// Its blocks in use.
    pub used_blocks: u64,
    /// Blocks the CPUs of its node had to take from other nodes' members
    /// because the node's were full, over every writable mount of the
    /// pool: on disk as of the last full sync or unmount (a crash loses
    /// the spills counted since), plus this mount's. A node's spills are
    /// counted on its first member; a node without a member has none.
    pub spills: u64,
}

/// A snapshot of a mount's counters and usage ([`Fs::stats`]). More fields
/// may come in later versions.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Stats {
    /// What the pool's medium was asked to make durable since the mount,
    /// in bytes and cache lines (see [`PersistStats`] for what counts on
    /// each medium): divided by the number of `fsync`s of a run, the
    /// metadata cost of one.
    pub persist: PersistStats,
    /// What staging did since the mount (`MountOptions::stage_max`): pages
    /// small synchronous writes placed in the pool, and staged pages moved
    /// onto the data device. Both 0 where nothing is staged.
    pub staging: StagingStats,
    /// The data device's counters (writes, flushes issued and skipped,
    /// whether it is direct), on a tiered pool.
    pub device: Option<DeviceStats>,
    /// The pool's member files and how many of each one's blocks are in
    /// use. A pool that is one file has one member. Blocks waiting for a
    /// sync before reuse count as in use; the superblocks, journal and
    /// inode table (member 0) and each other member's header block count
    /// too.
    pub members: Vec<MemberUsage>,
    /// Per NUMA node of the mount's topology: blocks its CPUs had to
    /// allocate on another node because theirs was full, over every
    /// writable mount of the pool (see [`MemberUsage::spills`]).
    pub node_spills: Vec<u64>,
    /// Live inodes.
    pub inodes: u64,
    /// Log pages of all inodes.
    pub log_pages: u64,
    /// Data pages mapped by all files.
    pub data_pages: u64,
    /// Inodes whose log has a log array (a log with one sub-log has its
    /// head named by the inode record instead).
    pub log_arrays: u64,
}

impl Fs {
    /// A snapshot of the mount's counters and usage. It walks every live
    /// inode: cheap enough for a report, not for a hot loop.
    pub fn stats(&self) -> Stats {
        let (inodes, log_pages, data_pages) = self.usage();
        Stats {
            persist: self.core.media.persist_stats(),
            staging: self.core.staging.stats(),
            device: self.core.media.device().map(crate::tier::Device::stats),
            members: self.member_usage(),
            node_spills: self.core.node_spills(),
            inodes,
            log_pages,
            data_pages,
            log_arrays: self.log_arrays(),
        }
    }

    /// The pool's member files and how many of each one's blocks are in
    /// use (for `manyfs inspect`). A pool that is one file has one member.
    /// Blocks waiting for a sync before reuse count as in use; the
    /// superblocks, journal and inode table (member 0) and each other
    /// member's header block count too.
    fn member_usage(&self) -> Vec<MemberUsage> {
        let members = self.core.media.members();
        let mut free = self.core.blocks.free_extents();
        free.sort_unstable();
        let spills = self.core.member_spills();
        members
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let first = m.start / BLOCK_SIZE;
                let blocks = m.len / BLOCK_SIZE;
                let end = first + blocks;
                let free_here: u64 = free
                    .iter()
                    .map(|&(s, n)| (s + n).min(end).saturating_sub(s.max(first)))
                    .sum();
                MemberUsage {
                    index: i as u32,
                    path: m.path.clone(),
                    node: m.node,
                    first_block: first,
                    blocks,
                    used_blocks: blocks - free_here.min(blocks),
                    spills: spills.get(i).copied().unwrap_or(0),
                }
            })
            .collect()
    }

    /// (inodes, log pages, data pages).
    fn usage(&self) -> (u64, u64, u64) {
        let mut logs = 0;
        let mut data = 0;
        let inodes = self.core.all_inodes();
        for i in &inodes {
            logs += i.log.page_count() as u64;
            if let Some(f) = &i.file {
                data += f.index.mapped().len() as u64;
            }
        }
        (inodes.len() as u64, logs, data)
    }

    /// Inodes whose log has a log array (a log with one sub-log has its
    /// head named by the inode record instead), for `manyfs inspect`.
    fn log_arrays(&self) -> u64 {
        let inodes = self.core.all_inodes();
        inodes
            .iter()
            .filter(|i| i.log.array_block().is_some())
            .count() as u64
    }
}
