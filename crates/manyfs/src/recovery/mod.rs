//! Rebuilding DRAM state from the media alone (mount), and the same rebuild
//! used by `fsck` and by [`crate::fsck::verify`] to check a live mount.
//!
//! 1. Read the superblock (falling back to the backup copy).
//! 2. Walk the tree from the root. For each reachable inode: check its
//!    record, scan its log (every chain, every committed entry; no tail
//!    pointer is trusted) and replay it:
//!    - directories: entries in sequence order;
//!    - files: per page, the write entry with the highest version wins;
//!      writes older than the newest truncate lose pages past its size; the
//!      size is the newest truncate's, grown by later writes' ends.
//! 3. A pending cross-directory rename in the journal is applied to the
//!    replayed directories.
//! 4. Every block reached (log arrays, log pages, winning data pages) is
//!    marked; a block reached twice is corruption. Everything else is free,
//!    and every unreached inode number is free.

pub(crate) mod mount;
pub(crate) mod par;
#[cfg(test)]
mod tests;

use crate::error::{Error, Result};
use crate::inode::{Attrs, Child, DirState};
use crate::layout::*;
use crate::log::scan::{ScanBuf, ScannedSublog, scan_log_buf};
use crate::log::{EntryLoc, loc_page};
use crate::media::Media;
use crate::namespace::journal::{self, RenameRecord};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};

/// Largest sequence or page version recovery accepts: far beyond what any
/// pool can reach, far enough below `u64::MAX` that counting on from it
/// cannot overflow.
pub const MAX_SEQ: u64 = 1 << 62;
/// Largest attribute sequence recovery accepts (write entries record it in a
/// 32-bit epoch).
pub const MAX_ATTR_SEQ: u64 = 1 << 32;

/// Read the superblock, falling back to the backup. Returns it and whether
/// the primary copy was damaged.
pub fn read_superblock(media: &Media) -> Result<(Superblock, bool)> {
    let len = SUPERBLOCK_LEN.min(media.len() as usize);
    let primary = media.read_vec(SUPERBLOCK_BLOCK * BLOCK_SIZE, len)?;
    match Superblock::decode(&primary, media.len()) {
        Ok(sb) => Ok((sb, false)),
        Err(primary_err) => {
            let off = BACKUP_SUPERBLOCK_BLOCK * BLOCK_SIZE;
            if off + SUPERBLOCK_LEN as u64 > media.len() {
                return Err(primary_err);
            }
            let backup = media.read_vec(off, SUPERBLOCK_LEN)?;
            match Superblock::decode(&backup, media.len()) {
                Ok(sb) => Ok((sb, true)),
                Err(_) => Err(primary_err),
            }
        }
    }
}

/// The write that won one page of a file: its block, its entry and its
/// version.
pub type PageWinner = (u64, EntryLoc, u64);

/// What recovery learned about one file's contents.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FileState {
    /// Size in bytes.
    pub size: u64,
    /// (page, (block, entry, version)), winners only, by page.
    pub pages: Vec<(u64, PageWinner)>,
    /// Entry defining the size (holds an extra live reference).
    pub size_definer: Option<(u64, EntryLoc)>,
    /// Newest write mtime not overridden by an attribute entry.
    pub write_mtime_ns: u64,
}

/// One rebuilt inode.
#[derive(Debug)]
pub struct RebuiltInode {
    /// The record.
    pub record: InodeRecord,
    /// Permission bits, owner, times (from the newest attribute entry) and
    /// the link count (counted from the directories).
    pub attrs: Attrs,
    /// Sequence of the newest attribute entry.
    pub attr_seq: u64,
    /// Attribute entries in the log.
    pub attr_entries: u64,
    /// Parent directory (directories).
    pub parent: u64,
    /// The sub-logs as scanned (after a rebuild without their `entries`:
    /// those are replayed into the other fields and freed).
    pub sublogs: Vec<ScannedSublog>,
    /// Directory contents (directories).
    pub dir: Option<DirState>,
    /// File contents (files, symlinks).
    pub file: Option<FileState>,
    /// Live references per log page of this inode.
    pub live: HashMap<u64, u32>,
    /// Extended attributes (the newest entry per name).
    pub xattrs: crate::inode::Xattrs,
}

/// The whole rebuilt file system.
#[derive(Debug)]
pub struct Rebuilt {
    /// Geometry.
    pub sb: Superblock,
    /// Whether the primary superblock was damaged (backup used).
    pub primary_superblock_damaged: bool,
    /// Reachable inodes (boxed: the walk's threads make them, the map only
    /// moves a pointer).
    pub inodes: BTreeMap<u64, Box<RebuiltInode>>,
    /// Blocks in use, indexed by `block - data_start`.
    pub used: BlockBitmap,
    /// A cross-directory rename to complete.
    pub pending_rename: Option<RenameRecord>,
}

impl Rebuilt {
    /// Free blocks as extents.
    pub fn free_extents(&self) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut run: Option<(u64, u64)> = None;
        let mut i = 0;
        while i < self.used.len() {
            // Whole words of used (or of free) blocks at a time.
            let word = self.used.words[(i / 64) as usize];
            if i % 64 == 0 && i + 64 <= self.used.len() && (word == u64::MAX || word == 0) {
                let b = self.sb.data_start + i;
                if word == u64::MAX {
                    out.extend(run.take());
                } else {
                    match &mut run {
                        Some((_, n)) => *n += 64,
                        None => run = Some((b, 64)),
                    }
                }
                i += 64;
                continue;
            }
            let (b, used) = (self.sb.data_start + i, self.used.get(i));
            i += 1;
            if used {
                if let Some(r) = run.take() {
                    out.push(r);
                }
            } else {
                match &mut run {
                    Some((_, n)) => *n += 1,
                    None => run = Some((b, 1)),
                }
            }
        }
        out.extend(run);
        out
    }

    /// The inode numbers above the root that no reachable inode uses, as
    /// ascending non-adjacent ranges `[start, end)`: the gaps between the
    /// used numbers (a walk along them, no lookups; the work is per used
    /// number, not per free one).
    pub fn free_inode_ranges(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        gaps(
            self.inodes.keys().copied(),
            ROOT_INO + 1,
            self.sb.inode_count,
        )
    }

    /// Number of used blocks in the data region.
    pub fn used_blocks(&self) -> u64 {
        self.used.count()
    }

    /// Number of blocks in the data region.
    pub fn data_blocks(&self) -> u64 {
        self.used.len()
    }
}

/// The numbers of `first..end` that `used` (ascending) does not hold, as
/// ascending non-adjacent ranges.
fn gaps(used: impl Iterator<Item = u64>, first: u64, end: u64) -> impl Iterator<Item = (u64, u64)> {
    let mut next = first;
    let mut used = used.filter(move |&u| u >= first);
    std::iter::from_fn(move || {
        while next < end {
            match used.next() {
                Some(u) if u < next => {}
                Some(u) if u == next => next += 1,
                Some(u) => {
                    let gap = (next, u.min(end));
                    next = u.saturating_add(1);
                    return Some(gap);
                }
                None => {
                    let gap = (next, end);
                    next = end;
                    return Some(gap);
                }
            }
        }
        None
    })
}

#[cfg(test)]
mod gap_tests {
    use super::gaps;

    /// The gaps hold exactly the numbers the used ones leave, number by
    /// number.
    #[test]
    fn gaps_are_the_unused_numbers() {
        let cases: [(&[u64], u64, u64); 6] = [
            (&[], 2, 10),
            (&[1, 2, 3], 2, 10),
            (&[5, 6, 9], 2, 10),
            (&[2, 4, 6, 8, 10, 12], 2, 10),
            (&[3, 3, 7], 2, 8),
            (&[100], 2, 10),
        ];
        for (used, first, end) in cases {
            let by_number: Vec<u64> = (first..end).filter(|i| !used.contains(i)).collect();
            let from_gaps: Vec<u64> = gaps(used.iter().copied(), first, end)
                .flat_map(|(s, e)| s..e)
                .collect();
            assert_eq!(from_gaps, by_number, "{used:?} {first}..{end}");
            let g: Vec<_> = gaps(used.iter().copied(), first, end).collect();
            assert!(g.iter().all(|(s, e)| s < e), "{g:?}");
            assert!(g.windows(2).all(|w| w[0].1 < w[1].0), "adjacent: {g:?}");
        }
    }
}

/// One bit per block of the data region.
#[derive(Debug, Clone)]
pub struct BlockBitmap {
    words: Vec<u64>,
    len: u64,
}

impl BlockBitmap {
    /// Number of bits.
    pub fn len(&self) -> u64 {
        self.len
    }
    /// Bit `i`.
    pub fn get(&self, i: u64) -> bool {
        self.words[(i / 64) as usize] & (1 << (i % 64)) != 0
    }
    /// Number of set bits.
    pub fn count(&self) -> u64 {
        self.words.iter().map(|w| u64::from(w.count_ones())).sum()
    }
}

/// Marks blocks as used; from any number of threads at once. A block
/// marked twice is corruption (which of its two owners is named depends on
/// the order of the marks: a walk on several threads that finds an error
/// walks again on one, see [`rebuild_with`]).
struct Marker<'a> {
    sb: &'a Superblock,
    used: Vec<AtomicU64>,
    /// Header blocks of pool members (marked used from the start).
    reserved: Vec<u64>,
}

impl Marker<'_> {
    fn new<'a>(sb: &'a Superblock, media: &Media) -> Marker<'a> {
        // A tiered pool's data device continues the block space.
        let len = sb.data_end() - sb.data_start;
        let used = (0..len.div_ceil(64)).map(|_| AtomicU64::new(0)).collect();
        let reserved: Vec<u64> = crate::media::pool::reserved_blocks(media)
            .into_iter()
            .filter(|b| (sb.data_start..sb.data_end()).contains(b))
            .collect();
        let marker = Marker { sb, used, reserved };
        for &b in &marker.reserved {
            marker.set(b - sb.data_start);
        }
        marker
    }

    /// Set bit `i`, returning its old value.
    fn set(&self, i: u64) -> bool {
        let bit = 1u64 << (i % 64);
        self.used[(i / 64) as usize].fetch_or(bit, Ordering::Relaxed) & bit != 0
    }

    fn mark(&self, block: u64, what: impl Fn() -> String) -> Result<()> {
        if block < self.sb.data_start || block >= self.sb.data_end() {
            return Err(Error::corrupt(
                what(),
                format!("block {block} outside the data region"),
            ));
        }
        if self.reserved.contains(&block) {
            return Err(Error::corrupt(
                what(),
                format!("block {block} is the header block of a pool member"),
            ));
        }
        if self.set(block - self.sb.data_start) {
            return Err(Error::corrupt(
                what(),
                format!("block {block} is used twice"),
            ));
        }
        Ok(())
    }

    /// The marks as a plain bitmap (every thread has finished marking).
    fn into_bitmap(self) -> BlockBitmap {
        BlockBitmap {
            words: self.used.into_iter().map(AtomicU64::into_inner).collect(),
            len: self.sb.data_end() - self.sb.data_start,
        }
    }
}

/// Rebuild everything reachable from the root, under the commit rule the
/// last writable mount recorded in the superblock.
pub fn rebuild(media: &Media) -> Result<Rebuilt> {
    rebuild_with(media, None)
}

/// Rebuild, under `rule` instead of the recorded one when given
/// (`fsck::verify` compares the live mapping with memory: every committed
/// entry counts there). Runs on every CPU the process may use; a walk on
/// several threads that meets any error walks the pool again on one
/// thread, so that the error reported is the one the walk in order meets
/// first, whatever the number of CPUs.
pub fn rebuild_with(media: &Media, rule: Option<CommitRule>) -> Result<Rebuilt> {
    rebuild_threads(media, rule, par::threads())
}

/// [`rebuild_with`] on `threads` threads.
fn rebuild_threads(media: &Media, rule: Option<CommitRule>, threads: usize) -> Result<Rebuilt> {
    match rebuild_on(media, rule, threads) {
        Err(_) if threads > 1 => rebuild_on(media, rule, 1),
        done => done,
    }
}

/// What every visit of one walk shares.
struct Walk<'a> {
    media: &'a Media,
    sb: &'a Superblock,
    rule: CommitRule,
    pending: Option<&'a RenameRecord>,
    marker: Marker<'a>,
}

impl Walk<'_> {
    /// Read, scan and replay inode `ino` (named with generation `want_gen`;
    /// `None` for the root) and mark its log array, log pages and data
    /// pages.
    fn visit(
        &self,
        buf: &mut ScanBuf,
        ino: u64,
        want_gen: Option<u32>,
        parent: u64,
    ) -> Result<Box<RebuiltInode>> {
        let (media, sb, marker) = (self.media, self.sb, &self.marker);
        let mut raw = [0u8; INODE_SIZE as usize];
        media.read(sb.inode_offset(ino), &mut raw)?;
        let record = InodeRecord::decode(ino, &raw)?;
        if let Some(g) = want_gen {
            if g != record.generation {
                return Err(Error::corrupt(
                    format!("inode {ino}"),
                    format!(
                        "directory entry expects generation {g}, record has {}",
                        record.generation
                    ),
                ));
            }
        } else if record.kind != FileKind::Dir {
            return Err(Error::corrupt("root inode", "is not a directory"));
        }
        if let Some(array) = record.log_word().array() {
            marker.mark(array, || format!("inode {ino} log array"))?;
        }
        let sublogs = scan_log_buf(
            media,
            sb,
            ino,
            record.generation,
            record.log_array,
            self.rule,
            buf,
        )?;
        for s in &sublogs {
            for &p in &s.pages {
                marker.mark(p, || format!("inode {ino} log page"))?;
            }
        }
        let mut node = replay(ino, record, parent, sublogs, self.pending, sb)?;
        // The entries are replayed: free them now (this thread's next
        // inode reuses the memory) rather than when the mount is done.
        for s in &mut node.sublogs {
            s.entries = Vec::new();
        }
        if let Some(f) = &node.file {
            for &(pg, (block, _, _)) in &f.pages {
                marker.mark(block, || format!("inode {ino} page {pg}"))?;
            }
        }
        Ok(Box::new(node))
    }
}

/// The rebuild on `threads` threads: breadth first from the root, one
/// level of the tree at a time. The inodes of a level are visited in
/// parallel ([`Walk::visit`]); their names are then taken in the level's
/// order, which makes the next level. On one thread this is exactly the
/// walk in order, errors included.
pub(crate) fn rebuild_on(
    media: &Media,
    rule: Option<CommitRule>,
    threads: usize,
) -> Result<Rebuilt> {
    let (sb, damaged) = read_superblock(media)?;
    let rule = rule.unwrap_or(sb.commit_rule);
    let pending_rename = journal::pending(media)?;
    let walk = Walk {
        media,
        sb: &sb,
        rule,
        pending: pending_rename.as_ref(),
        marker: Marker::new(&sb, media),
    };
    let mut inodes: BTreeMap<u64, Box<RebuiltInode>> = BTreeMap::new();
    let mut level: Vec<(u64, Option<u32>, u64)> = vec![(ROOT_INO, None, 0)];
    // Names per inode; an inode is queued when its first name is taken
    // (the root has none and is queued from the start; no entry may name it).
    let mut links: HashMap<u64, u32> = HashMap::new();
    let mut subdirs: HashMap<u64, u32> = HashMap::new();

    while !level.is_empty() {
        let visited = par::map_ordered(
            &level,
            threads,
            ScanBuf::default,
            |buf, &(ino, want_gen, parent)| walk.visit(buf, ino, want_gen, parent),
        );
        let mut next = Vec::new();
        for (&(ino, _, _), node) in level.iter().zip(visited) {
            let node = node?;
            if let Some(d) = &node.dir {
                for (name, child) in &d.entries {
                    let what =
                        || format!("directory {ino} entry {:?}", String::from_utf8_lossy(name));
                    if child.ino <= ROOT_INO || child.ino >= sb.inode_count {
                        return Err(Error::corrupt(
                            what(),
                            format!("inode number {} out of range", child.ino),
                        ));
                    }
                    let names = links.entry(child.ino).or_default();
                    *names += 1;
                    let first = *names == 1;
                    if child.kind == FileKind::Dir {
                        *subdirs.entry(ino).or_default() += 1;
                        if !first {
                            return Err(Error::corrupt(
                                what(),
                                "directory reachable twice (cycle or hard link)",
                            ));
                        }
                    }
                    if first {
                        next.push((child.ino, Some(child.generation), ino));
                    }
                }
            }
            inodes.insert(ino, node);
        }
        level = next;
    }
    for (ino, node) in inodes.iter_mut() {
        node.attrs.nlink = if node.record.kind == FileKind::Dir {
            2 + subdirs.get(ino).copied().unwrap_or(0)
        } else {
            links.get(ino).copied().unwrap_or(0)
        };
    }
    // Kinds named by entries must match the records.
    for node in inodes.values() {
        if let Some(d) = &node.dir {
            for (name, c) in &d.entries {
                if inodes.get(&c.ino).is_some_and(|n| n.record.kind != c.kind) {
                    return Err(Error::corrupt(
                        format!("entry {:?}", String::from_utf8_lossy(name)),
                        "kind differs from the inode record",
                    ));
                }
            }
        }
    }
    Ok(Rebuilt {
        used: walk.marker.into_bitmap(),
        sb,
        primary_superblock_damaged: damaged,
        inodes,
        pending_rename,
    })
}

/// Extended attributes: per name, the entry with the highest sequence wins
/// (a removal hides the name). Every such entry stays referenced until
/// the log is compacted, like attribute entries.
fn replay_xattrs(
    node: &mut RebuiltInode,
    all: &[(EntryLoc, &Entry)],
    live: &mut HashMap<u64, u32>,
) {
    let mut newest: BTreeMap<&[u8], (u64, Option<&Vec<u8>>)> = BTreeMap::new();
    for (loc, e) in all {
        let Entry::Xattr {
            seq,
            ctime_ns,
            name,
            value,
        } = e
        else {
            continue;
        };
        *live.entry(loc_page(*loc)).or_default() += 1;
        node.attr_entries += 1;
        node.xattrs.seq = node.xattrs.seq.max(*seq);
        node.attrs.ctime_ns = node.attrs.ctime_ns.max(*ctime_ns);
        if newest.get(name.as_slice()).is_none_or(|(s, _)| seq >= s) {
            newest.insert(name, (*seq, value.as_ref()));
        }
    }
    node.xattrs.map = newest
        .into_iter()
        .filter_map(|(name, (_, v))| Some((name.to_vec(), v?.clone())))
        .collect();
}

pub(crate) fn replay(
    ino: u64,
    record: InodeRecord,
    parent: u64,
    sublogs: Vec<ScannedSublog>,
    pending: Option<&RenameRecord>,
    sb: &Superblock,
) -> Result<RebuiltInode> {
    let mut live: HashMap<u64, u32> = HashMap::new();
    let mut node = RebuiltInode {
        attrs: Attrs {
            mode: record.mode,
            uid: record.uid,
            gid: record.gid,
            atime_ns: record.atime_ns,
            mtime_ns: record.mtime_ns,
            ctime_ns: record.ctime_ns,
            nlink: 0,
        },
        attr_seq: 0,
        attr_entries: 0,
        parent,
        dir: None,
        file: None,
        live: HashMap::new(),
        sublogs: Vec::new(),
        xattrs: Default::default(),
        record,
    };
    let all: Vec<(EntryLoc, &Entry)> = sublogs
        .iter()
        .flat_map(|s| s.entries.iter().map(|(l, e)| (*l, e)))
        .collect();

    let truncs = replay_attrs(ino, &mut node, &all, &mut live)?;
    replay_xattrs(&mut node, &all, &mut live);
    if node.record.kind == FileKind::Dir {
        node.dir = Some(replay_dir(ino, &all, pending, &mut live)?);
    } else {
        let f = replay_file(ino, node.attr_seq, truncs, &all, sb, &mut live)?;
        if node.record.kind == FileKind::Symlink
            && f.size > crate::namespace::MAX_SYMLINK_TARGET as u64
        {
            return Err(Error::corrupt(
                format!("symlink inode {ino}"),
                format!(
                    "target of {} bytes (at most {})",
                    f.size,
                    crate::namespace::MAX_SYMLINK_TARGET
                ),
            ));
        }
        node.attrs.mtime_ns = node.attrs.mtime_ns.max(f.write_mtime_ns);
        node.file = Some(f);
    }
    node.live = live;
    node.sublogs = sublogs;
    Ok(node)
}

/// The size-setting attribute entries of one inode's log.
#[derive(Default)]
struct Truncations {
    /// The newest: (sequence, size in bytes). It bounds older writes.
    newest: Option<(u64, u64)>,
    /// Every one, (sequence, pages kept): each one cancels the pages at or
    /// beyond its size written before it, so all of them count, not only
    /// the newest (an extend after a shrink must not bring back what the
    /// shrink cut off).
    all: Vec<(u64, u64)>,
}

/// Attributes: the newest attribute entry wins. Every attribute entry stays
/// referenced (`live`) until the log is compacted. Returns the log's
/// size-setting entries.
fn replay_attrs(
    ino: u64,
    node: &mut RebuiltInode,
    all: &[(EntryLoc, &Entry)],
    live: &mut HashMap<u64, u32>,
) -> Result<Truncations> {
    let mut newest_attr: Option<&Entry> = None;
    let mut truncs = Truncations::default();
    for (loc, e) in all {
        if let Entry::SetAttr {
            seq,
            size_set,
            size,
            ..
        } = e
        {
            if *seq >= MAX_ATTR_SEQ || *size > MAX_FILE_SIZE {
                return Err(Error::corrupt(
                    format!("inode {ino} attribute entry at {loc}"),
                    format!("sequence {seq} or size {size} out of range"),
                ));
            }
            if *size_set {
                truncs.all.push((*seq, size.div_ceil(BLOCK_SIZE)));
            }
            *live.entry(loc_page(*loc)).or_default() += 1;
            node.attr_entries += 1;
            if newest_attr.is_none_or(|a| matches!(a, Entry::SetAttr { seq: s, .. } if seq > s)) {
                newest_attr = Some(e);
            }
            if *size_set && truncs.newest.is_none_or(|(s, _)| *seq > s) {
                truncs.newest = Some((*seq, *size));
            }
        }
    }
    if let Some(Entry::SetAttr {
        seq,
        mode,
        uid,
        gid,
        atime_ns,
        mtime_ns,
        ctime_ns,
        ..
    }) = newest_attr
    {
        node.attr_seq = *seq;
        node.attrs.mode = *mode;
        node.attrs.uid = *uid;
        node.attrs.gid = *gid;
        node.attrs.atime_ns = *atime_ns;
        node.attrs.mtime_ns = *mtime_ns;
        node.attrs.ctime_ns = *ctime_ns;
    }
    Ok(truncs)
}

/// A directory's entries: its add, remove and rename entries applied in
/// sequence order, then the rename record `pending` (if it names this
/// directory) completed.
fn replay_dir(
    ino: u64,
    all: &[(EntryLoc, &Entry)],
    pending: Option<&RenameRecord>,
    live: &mut HashMap<u64, u32>,
) -> Result<DirState> {
    let mut dir_entries: Vec<(u64, EntryLoc, &Entry)> = all
        .iter()
        .filter_map(|(l, e)| match e {
            Entry::DirAdd { seq, .. }
            | Entry::DirRemove { seq, .. }
            | Entry::DirRename { seq, .. } => Some((*seq, *l, *e)),
            _ => None,
        })
        .collect();
    if let Some((seq, loc, _)) = dir_entries.iter().find(|(s, _, _)| *s >= MAX_SEQ) {
        return Err(Error::corrupt(
            format!("directory {ino} entry at {loc}"),
            format!("sequence {seq} out of range"),
        ));
    }
    dir_entries.sort_by_key(|(s, _, _)| *s);
    let mut st = DirState {
        log_entries: dir_entries.len() as u64,
        ..Default::default()
    };
    for (seq, loc, e) in dir_entries {
        *live.entry(loc_page(loc)).or_default() += 1;
        st.seq = st.seq.max(seq);
        apply_dir_entry(&mut st, e);
        if let (Some(r), Entry::DirAdd { txid, .. } | Entry::DirRemove { txid, .. }) = (pending, e)
            && *txid == r.txid
        {
            st.pending_rename_counted = true;
        }
    }
    // Complete the journaled rename only where its own entry did not count:
    // where it did, entries after it (a later rename over the same name,
    // say) are newer and stand.
    if let Some(r) = pending
        && !st.pending_rename_counted
    {
        apply_pending_rename(&mut st, ino, r);
    }
    Ok(st)
}

/// Applies one directory entry (add, remove or rename) to `st`.
fn apply_dir_entry(st: &mut DirState, e: &Entry) {
    match e {
        Entry::DirAdd {
            ino: c,
            generation,
            kind,
            name,
            ..
        } => {
            st.entries.insert(
                name.clone(),
                Child {
                    ino: *c,
                    generation: *generation,
                    kind: *kind,
                },
            );
        }
        Entry::DirRemove { ino: c, name, .. }
            if st.entries.get(name).is_some_and(|x| x.ino == *c) =>
        {
            st.entries.remove(name);
        }
        Entry::DirRename {
            ino: c,
            generation,
            kind,
            old,
            new,
            ..
        } => {
            if st.entries.get(old).is_some_and(|x| x.ino == *c) {
                st.entries.remove(old);
            }
            st.entries.insert(
                new.clone(),
                Child {
                    ino: *c,
                    generation: *generation,
                    kind: *kind,
                },
            );
        }
        _ => {}
    }
}

/// Completes the rename record `r` in directory `ino`'s entries.
fn apply_pending_rename(st: &mut DirState, ino: u64, r: &RenameRecord) {
    if let (Some(x), true) = (r.exchange, r.src_dir == ino) {
        // An exchange: the source name names the other inode.
        st.entries.insert(r.src_name.clone(), x);
    } else if r.src_dir == ino
        && st
            .entries
            .get(&r.src_name)
            .is_some_and(|x| x.ino == r.moving.ino)
    {
        st.entries.remove(&r.src_name);
    }
    if r.dst_dir == ino {
        st.entries.insert(r.dst_name.clone(), r.moving);
    }
}

/// A file's contents: per page the write entry of the highest version
/// (pages a later size-setting entry cut off left out), its size and the
/// newest write's mtime that counts (`attr_seq`: the inode's newest
/// attribute entry's sequence).
fn replay_file(
    ino: u64,
    attr_seq: u64,
    mut truncs: Truncations,
    all: &[(EntryLoc, &Entry)],
    sb: &Superblock,
    live: &mut HashMap<u64, u32>,
) -> Result<FileState> {
    let mut f = FileState::default();
    let newest_trunc = truncs.newest;
    let mut newest_end: Option<(u64, EntryLoc)> = None;
    let truncations = &mut truncs.all;
    truncations.sort_unstable();
    let mut keep_suffix_min = vec![u64::MAX; truncations.len()];
    let mut m = u64::MAX;
    for (i, &(_, pages)) in truncations.iter().enumerate().rev() {
        m = m.min(pages);
        keep_suffix_min[i] = m;
    }
    // Every (page, block, entry, version) a write entry offers; sorted
    // by page, highest version first, the first of each page wins.
    // Sized for a small file's few pages (a sorted vector, not a tree:
    // most files rebuilt at a mount are one page).
    let offered: u64 = all
        .iter()
        .filter_map(|(_, e)| match e {
            Entry::FileWrite { npages, .. } => Some(u64::from(*npages)),
            _ => None,
        })
        .sum();
    let mut pages: Vec<(u64, PageWinner)> = Vec::with_capacity(offered.min(1024) as usize);
    for (loc, e) in all {
        let Entry::FileWrite {
            epoch,
            version,
            pgoff,
            block,
            npages,
            file_end,
            mtime_ns,
        } = e
        else {
            continue;
        };
        let what = || format!("inode {ino} write entry at {loc}");
        let n = u64::from(*npages);
        if n == 0
            || pgoff
                .checked_add(n)
                .is_none_or(|e| e > MAX_FILE_SIZE / BLOCK_SIZE)
            || !sb.data_range_ok(*block, n)
            || *file_end > MAX_FILE_SIZE
        {
            return Err(Error::corrupt(what(), "page or block range out of bounds"));
        }
        if *version >= MAX_SEQ {
            return Err(Error::corrupt(
                what(),
                format!("version {version} out of range"),
            ));
        }
        let before_trunc = newest_trunc.is_some_and(|(s, _)| u64::from(*epoch) < s);
        let first_later = truncations.partition_point(|&(s, _)| s <= u64::from(*epoch));
        let keep_below = keep_suffix_min
            .get(first_later)
            .copied()
            .unwrap_or(u64::MAX);
        let kept = n.min(keep_below.saturating_sub(*pgoff));
        pages.extend((0..kept).map(|i| (pgoff + i, (block + i, *loc, *version))));
        if !before_trunc {
            if newest_end.is_none_or(|(end, _)| *file_end > end) {
                newest_end = Some((*file_end, *loc));
            }
            if u64::from(*epoch) >= attr_seq {
                f.write_mtime_ns = f.write_mtime_ns.max(*mtime_ns);
            }
        }
    }
    // Stable: of equal versions of a page, the first offered wins.
    pages.sort_by_key(|&(pg, (_, _, version))| (pg, std::cmp::Reverse(version)));
    pages.dedup_by_key(|(pg, _)| *pg);
    f.pages = pages;
    let trunc_size = newest_trunc.map_or(0, |(_, s)| s);
    f.size = trunc_size;
    if let Some((end, loc)) = newest_end
        && end > trunc_size
    {
        f.size = end;
        f.size_definer = Some((end, loc));
        *live.entry(loc_page(loc)).or_default() += 1;
    }
    for &(_, (_, loc, _)) in &f.pages {
        *live.entry(loc_page(loc)).or_default() += 1;
    }
    Ok(f)
}
