//! The checking walk behind `fsck`: the mount's rebuild, but tolerant. Where
//! the rebuild returns at the first inconsistency, this walk records a
//! [`Problem`] (with where it is and how to repair it), skips the damaged
//! object (an inode, the rest of a log chain, one entry, one name) and goes
//! on, so that one run lists every problem.
//!
//! Order of the walk: breadth first from the root, like the rebuild. Log
//! arrays and log pages are claimed while the walk visits their inode (log
//! pages carry their owner in the footer, so a page claimed twice is a bad
//! link); data pages are claimed after the walk, so a write entry pointing
//! into a log page loses. Inodes named only by a damaged directory whose
//! log can still be read are reconnected under `/lost+found`.

use super::problems::{Fix, Problem, at, show};
use crate::error::{Error, Result};
use crate::layout::*;
use crate::log::scan::{
    Chain, HeadCheck, PendingEntry, ScannedSublog, check_direct_index, next_entry,
};
use crate::log::{EntryLoc, entry_loc};
use crate::media::Media;
use crate::namespace::journal::{self, RenameRecord};
use crate::recovery::{self, MAX_ATTR_SEQ, MAX_SEQ, RebuiltInode};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

/// Who holds a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    Array(u64),
    LogPage(u64),
    Data(u64, u64),
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Owner::Array(i) => write!(f, "inode {i}'s log array"),
            Owner::LogPage(i) => write!(f, "a log page of inode {i}"),
            Owner::Data(i, p) => write!(f, "page {p} of inode {i}"),
        }
    }
}

/// What names an inode the walk visits (and what to void if it is bad).
#[derive(Debug, Clone)]
enum Source {
    Root,
    /// A directory entry: (directory, name, winning log entry).
    Entry(u64, Vec<u8>, EntryLoc),
    /// The pending rename in the journal.
    Journal(u64, Vec<u8>),
    /// Named only by a damaged directory.
    Orphan(u64),
}

impl Source {
    fn place(&self, ino: u64) -> String {
        match self {
            Source::Root => format!("root inode {ino}"),
            Source::Entry(d, n, _) | Source::Journal(d, n) => {
                format!("directory {d} entry {} -> inode {ino}", show(n))
            }
            Source::Orphan(d) => format!("inode {ino} (named by damaged directory {d})"),
        }
    }
    fn fix(&self) -> Fix {
        match self {
            Source::Root | Source::Orphan(_) => Fix::None,
            Source::Entry(_, _, loc) => Fix::VoidEntry { loc: *loc },
            Source::Journal(..) => Fix::ClearJournal,
        }
    }
}

/// The result of the walk: what a rebuild would hold, and the problems.
pub(crate) struct Walk {
    pub sb: Option<Superblock>,
    pub problems: Vec<Problem>,
    pub notes: Vec<String>,
    pub inodes: BTreeMap<u64, RebuiltInode>,
    pub owners: HashMap<u64, Owner>,
}

/// An inode to visit: number, (generation, kind) its name expects (none for
/// the root), parent, and what names it.
type Visit = (u64, Option<(u32, FileKind)>, u64, Source);

struct Walker<'a> {
    media: &'a Media,
    sb: Superblock,
    owners: HashMap<u64, Owner>,
    problems: Vec<Problem>,
    pending: Option<RenameRecord>,
    inodes: BTreeMap<u64, RebuiltInode>,
    queued: HashSet<u64>,
    queue: VecDeque<Visit>,
    orphans: VecDeque<(u64, u32, FileKind, u64)>,
    /// Header blocks of pool members: never owned by anything.
    reserved: Vec<u64>,
}

/// Walk the pool behind `media`.
pub(crate) fn walk(media: &Media) -> Result<Walk> {
    let mut problems = Vec::new();
    let (sb, damaged) = match recovery::read_superblock(media) {
        Ok(x) => x,
        Err(e @ Error::Corrupt { .. }) => {
            if !looks_like_pool(media)? {
                return Err(Error::InvalidArgument(format!(
                    "{}: not a manyfs pool (no superblock magic)",
                    media.path().display()
                )));
            }
            // A short file fails both copies alike: say that, not damage.
            let detail = match &e {
                Error::Corrupt { what, .. } if what == SHORT_POOL => e.to_string(),
                _ => format!("{e}; the backup is damaged too"),
            };
            problems.push(Problem::new("superblock", detail, Fix::None));
            return Ok(Walk {
                sb: None,
                problems,
                notes: Vec::new(),
                inodes: BTreeMap::new(),
                owners: HashMap::new(),
            });
        }
        Err(e) => return Err(e),
    };
    if damaged {
        problems.push(Problem::new(
            "primary superblock",
            "damaged (the backup is intact)",
            Fix::RewritePrimarySuperblock,
        ));
    }
    let pending = journal::pending(media)?;
    let mut w = Walker {
        media,
        sb,
        owners: HashMap::new(),
        problems,
        pending,
        inodes: BTreeMap::new(),
        queued: HashSet::from([ROOT_INO]),
        queue: VecDeque::from([(ROOT_INO, None, 0, Source::Root)]),
        orphans: VecDeque::new(),
        reserved: crate::media::pool::reserved_blocks(media),
    };
    loop {
        while let Some((ino, want, parent, src)) = w.queue.pop_front() {
            w.visit(ino, want, parent, src)?;
        }
        // Then the inodes only a damaged directory named (their own
        // subtrees follow through the queue).
        let Some((ino, generation, kind, dir)) = w.orphans.pop_front() else {
            break;
        };
        if w.queued.insert(ino) {
            w.visit(ino, Some((generation, kind)), 0, Source::Orphan(dir))?;
        }
    }
    w.claim_data();
    w.link_counts();
    let mut notes = Vec::new();
    if let Some(p) = &w.pending {
        notes.push(format!(
            "rename transaction {} will be completed at mount",
            p.txid
        ));
    }
    for (ino, n) in &w.inodes {
        for s in &n.sublogs {
            // What the `Marked` rule ends silently: normal after a power
            // cut, and cleaned up by the next writable mount.
            if s.cut_head {
                notes.push(format!(
                    "inode {ino} sub-log {}: the head page is not durable (its link reached disk first); the sub-log will be cleared at mount",
                    s.index
                ));
            }
            if s.cut_next {
                notes.push(format!(
                    "inode {ino} sub-log {}: the link after log page {} names a page that is not durable; it will be cut at mount",
                    s.index,
                    s.pages.last().copied().unwrap_or(0)
                ));
            }
            if let Some(loc) = s.torn {
                notes.push(format!(
                    "inode {ino} sub-log {}: the data of the write entry at log page {} slot {} does not match its checksum (its fsync did not complete); the sub-log ends there at mount",
                    s.index,
                    crate::log::loc_page(loc),
                    crate::log::loc_slot(loc)
                ));
            }
            if !s.incomplete.is_empty() {
                notes.push(format!(
                    "inode {ino} sub-log {}: {} entries of an interrupted write will be discarded at mount",
                    s.index,
                    s.incomplete.len()
                ));
            }
        }
    }
    Ok(Walk {
        sb: Some(w.sb),
        problems: w.problems,
        notes,
        inodes: w.inodes,
        owners: w.owners,
    })
}

/// Whether either superblock copy starts with the magic.
fn looks_like_pool(media: &Media) -> Result<bool> {
    for block in [SUPERBLOCK_BLOCK, BACKUP_SUPERBLOCK_BLOCK] {
        let off = block * BLOCK_SIZE;
        if off + SUPER_MAGIC.len() as u64 <= media.len()
            && media.read_vec(off, SUPER_MAGIC.len())? == SUPER_MAGIC
        {
            return Ok(true);
        }
    }
    Ok(false)
}

impl Walker<'_> {
    fn claim(
        &mut self,
        block: u64,
        who: Owner,
        claims: &mut Vec<u64>,
    ) -> std::result::Result<(), String> {
        if block < self.sb.data_start || block >= self.sb.data_end() {
            return Err(format!("block {block} outside the data region"));
        }
        if self.reserved.contains(&block) {
            return Err(format!(
                "block {block} is the header block of a pool member"
            ));
        }
        if let Some(o) = self.owners.get(&block) {
            return Err(format!("block {block} is already used by {o}"));
        }
        self.owners.insert(block, who);
        claims.push(block);
        Ok(())
    }

    fn unclaim(&mut self, claims: &[u64]) {
        for b in claims {
            self.owners.remove(b);
        }
    }

    /// Visit one inode; on a problem with the inode itself, record it
    /// against whatever names it and drop the inode.
    fn visit(
        &mut self,
        ino: u64,
        want: Option<(u32, FileKind)>,
        parent: u64,
        src: Source,
    ) -> Result<()> {
        let mut claims = Vec::new();
        match self.inspect(ino, want, parent, &src, &mut claims)? {
            Ok(node) => {
                if let Source::Orphan(d) = &src {
                    self.problems.push(Problem::new(
                        format!("inode {ino}"),
                        format!("intact but unreachable (only damaged directory {d} named it)"),
                        Fix::Reconnect {
                            ino,
                            generation: node.record.generation,
                            kind: node.record.kind,
                        },
                    ));
                }
                self.children(ino, &node);
                self.inodes.insert(ino, node);
            }
            Err(detail) => {
                self.unclaim(&claims);
                if !matches!(src, Source::Orphan(_)) {
                    self.problems
                        .push(Problem::new(src.place(ino), detail, src.fix()));
                }
            }
        }
        Ok(())
    }

    /// Check an inode's record, log and replay. `Ok(Err(detail))`: the
    /// inode is damaged as a whole. Problems inside its log (a bad page, a
    /// bad entry) are recorded and skipped.
    fn inspect(
        &mut self,
        ino: u64,
        want: Option<(u32, FileKind)>,
        parent: u64,
        src: &Source,
        claims: &mut Vec<u64>,
    ) -> Result<std::result::Result<RebuiltInode, String>> {
        if ino <= ROOT_INO && !matches!(src, Source::Root) || ino >= self.sb.inode_count {
            return Ok(Err(format!("inode number {ino} out of range")));
        }
        let raw = self
            .media
            .read_vec(self.sb.inode_offset(ino), INODE_SIZE as usize)?;
        let record = match InodeRecord::decode(ino, &raw) {
            Ok(r) => r,
            Err(e) => {
                if want.is_some_and(|(_, k)| k == FileKind::Dir) {
                    let word = le_u64(&raw, INODE_LOG_ARRAY_OFFSET as usize);
                    self.salvage_children(ino, LogWord::decode(word))?;
                }
                return Ok(Err(e.to_string()));
            }
        };
        match want {
            Some((g, _)) if g != record.generation => {
                return Ok(Err(format!(
                    "the entry expects generation {g}, the record has {}",
                    record.generation
                )));
            }
            Some((_, k)) if k != record.kind => {
                return Ok(Err(format!(
                    "the entry says {k:?}, the record says {:?}",
                    record.kind
                )));
            }
            None if record.kind != FileKind::Dir => {
                return Ok(Err("the root is not a directory".into()));
            }
            _ => {}
        }
        let word = record.log_word();
        if let LogWord::Array(array) = word
            && let Err(e) = self.claim(array, Owner::Array(ino), claims)
        {
            return Ok(Err(format!("log array: {e}")));
        }
        if let LogWord::Direct { index, .. } = word
            && let Err(e) = check_direct_index(ino, index)
        {
            return Ok(Err(e.to_string()));
        }
        let mut sublogs = self.scan_log(ino, record.generation, word, claims)?;
        for s in &mut sublogs {
            let kind = record.kind;
            let sb = &self.sb;
            let problems = &mut self.problems;
            s.entries
                .retain(|(loc, e)| match entry_problem(sb, kind, e) {
                    None => true,
                    Some(d) => {
                        problems.push(Problem::new(
                            format!("inode {ino} sub-log {} {}", s.index, at(*loc)),
                            d,
                            Fix::VoidEntry { loc: *loc },
                        ));
                        false
                    }
                });
        }
        let node = match recovery::replay(
            ino,
            record,
            parent,
            sublogs,
            self.pending.as_ref(),
            &self.sb,
        ) {
            Ok(n) => n,
            Err(e) => return Ok(Err(e.to_string())),
        };
        Ok(Ok(node))
    }

    /// Why a name expecting `generation` of inode `ino` does not name the
    /// inode its record holds (another generation), if it does not. A
    /// record that cannot be read or decoded is left to [`Self::inspect`].
    fn stale_generation(&self, ino: u64, generation: u32) -> Option<String> {
        let raw = self
            .media
            .read_vec(self.sb.inode_offset(ino), INODE_SIZE as usize)
            .ok()?;
        let record = InodeRecord::decode(ino, &raw).ok()?;
        (record.generation != generation).then(|| {
            format!(
                "the entry expects generation {generation}, the record has {}",
                record.generation
            )
        })
    }

    /// Queue the children of a directory, checking each name.
    fn children(&mut self, ino: u64, node: &RebuiltInode) {
        let Some(d) = &node.dir else { return };
        for (name, c) in &d.entries {
            let src = match winning_entry(node, name, c.ino) {
                Some(loc) => Source::Entry(ino, name.clone(), loc),
                None => Source::Journal(ino, name.clone()),
            };
            if c.ino <= ROOT_INO || c.ino >= self.sb.inode_count {
                self.problems.push(Problem::new(
                    src.place(c.ino),
                    "inode number out of range",
                    src.fix(),
                ));
                continue;
            }
            // Checked for every name, not only the one that queues the
            // inode: a name left from before its number was freed and
            // reused (the entry that removed it lost) names another file,
            // which a current name may reach first.
            if let Some(detail) = self.stale_generation(c.ino, c.generation) {
                self.problems
                    .push(Problem::new(src.place(c.ino), detail, src.fix()));
                continue;
            }
            if !self.queued.insert(c.ino) {
                if c.kind == FileKind::Dir {
                    self.problems.push(Problem::new(
                        src.place(c.ino),
                        "directory reachable twice (cycle or hard link)",
                        src.fix(),
                    ));
                }
                continue;
            }
            self.queue
                .push_back((c.ino, Some((c.generation, c.kind)), ino, src));
        }
    }

    /// Tolerant scan of every chain of an inode's log, under the pool's
    /// commit rule: the same head and link acceptance and the same slot walk
    /// as the mount's scan ([`Chain`]), so what the `Marked` rule ends
    /// silently (a link that reached disk before its page) is no problem
    /// here either; it only gets a note (see [`walk`]).
    fn scan_log(
        &mut self,
        ino: u64,
        generation: u32,
        word: LogWord,
        claims: &mut Vec<u64>,
    ) -> Result<Vec<ScannedSublog>> {
        let array = match word {
            LogWord::Empty => return Ok(Vec::new()),
            LogWord::Direct { index, head, check } => {
                let link = self.sb.inode_offset(ino) + INODE_LOG_ARRAY_OFFSET;
                let check = HeadCheck::SeqCheck(check);
                let sub = self.scan_chain(ino, generation, index, (head, check), link, claims)?;
                return Ok(vec![sub]);
            }
            LogWord::Array(a) => a,
        };
        let heads = self
            .media
            .read_vec(array * BLOCK_SIZE, BLOCK_SIZE as usize)?;
        let base_seq = le_u64(&heads, ARRAY_BASE_SEQ_WORD * 8);
        let mut out = Vec::new();
        for index in 0..MAX_SUBLOGS {
            let head = le_u64(&heads, index * 8);
            if head != 0 {
                let link = array * BLOCK_SIZE + index as u64 * 8;
                out.push(self.scan_chain(
                    ino,
                    generation,
                    index,
                    (head, HeadCheck::BaseSeq(base_seq)),
                    link,
                    claims,
                )?);
            }
        }
        Ok(out)
    }

    fn scan_chain(
        &mut self,
        ino: u64,
        generation: u32,
        index: usize,
        (head, check): (u64, HeadCheck),
        mut link_at: u64,
        claims: &mut Vec<u64>,
    ) -> Result<ScannedSublog> {
        let sb = self.sb.clone();
        let chain = Chain {
            media: self.media,
            sb: &sb,
            ino,
            generation,
            rule: sb.commit_rule,
        };
        let Some(mut sub) = chain.start(index, head, check)? else {
            return Ok(ScannedSublog::cut(index));
        };
        let mut pending: Vec<PendingEntry> = Vec::new();
        let mut page = head;
        while page != 0 {
            let place = || format!("inode {ino} sub-log {index} log page {page}");
            if let Err(e) = self.claim(page, Owner::LogPage(ino), claims) {
                self.problems
                    .push(Problem::new(place(), e, Fix::CutChain { link_at }));
                break;
            }
            let Some(bytes) = self.read_log_page(page, ino)? else {
                self.owners.remove(&page);
                claims.pop();
                self.problems.push(Problem::new(
                    place(),
                    "bad log page footer (magic or owner)",
                    Fix::CutChain { link_at },
                ));
                break;
            };
            link_at = page * BLOCK_SIZE + LOG_FOOTER_OFFSET;
            page = chain.read_page(index, page, &bytes, &mut sub, &mut pending)?;
        }
        sub.incomplete = pending.into_iter().map(|(l, _, n)| (l, n)).collect();
        Ok(sub)
    }

    /// The bytes of block `page` if its footer says it is a log page of
    /// inode `ino` (magic and owner).
    fn read_log_page(&self, page: u64, ino: u64) -> Result<Option<Vec<u8>>> {
        let bytes = self
            .media
            .read_vec(page * BLOCK_SIZE, BLOCK_SIZE as usize)?;
        let footer = &bytes[LOG_FOOTER_OFFSET as usize..];
        let ours = le_u32(footer, 20) == LOG_PAGE_MAGIC && le_u64(footer, 8) == ino;
        Ok(ours.then_some(bytes))
    }

    /// A directory whose record is damaged: if its log can still be read
    /// (the log array word is outside the record's checksum), the inodes it
    /// names become reconnection candidates. Nothing is claimed.
    fn salvage_children(&mut self, ino: u64, word: LogWord) -> Result<()> {
        let heads: Vec<u64> = match word {
            LogWord::Empty => return Ok(()),
            LogWord::Direct { head, .. } => vec![head],
            LogWord::Array(array) => {
                if array < self.sb.data_start
                    || array >= self.sb.total_blocks
                    || self.owners.contains_key(&array)
                {
                    return Ok(());
                }
                let heads = self
                    .media
                    .read_vec(array * BLOCK_SIZE, BLOCK_SIZE as usize)?;
                (0..MAX_SUBLOGS).map(|i| le_u64(&heads, i * 8)).collect()
            }
        };
        let mut entries = Vec::new();
        let mut seen = HashSet::new();
        for mut page in heads {
            while page != 0 {
                if page < self.sb.data_start
                    || page >= self.sb.total_blocks
                    || self.owners.contains_key(&page)
                    || !seen.insert(page)
                {
                    break;
                }
                let Some(bytes) = self.read_log_page(page, ino)? else {
                    break;
                };
                let footer = &bytes[LOG_FOOTER_OFFSET as usize..];
                let mut slot = 0u64;
                while let Some((entry, _, n)) = next_entry(&bytes, &mut slot, ENTRY_SLOTS_PER_PAGE)
                {
                    if entry_problem(&self.sb, FileKind::Dir, &entry).is_none() {
                        entries.push((entry_loc(page, slot), entry));
                    }
                    slot += n as u64;
                }
                page = le_u64(footer, 0);
            }
        }
        let record = InodeRecord {
            generation: 0,
            kind: FileKind::Dir,
            mode: 0,
            uid: 0,
            gid: 0,
            log_array: 0,
            atime_ns: 0,
            mtime_ns: 0,
            ctime_ns: 0,
            rdev: 0,
        };
        let sub = ScannedSublog {
            entries,
            ..Default::default()
        };
        if let Ok(node) = recovery::replay(ino, record, 0, vec![sub], None, &self.sb)
            && let Some(d) = &node.dir
        {
            for c in d.entries.values() {
                if c.ino > ROOT_INO && c.ino < self.sb.inode_count {
                    self.orphans.push_back((c.ino, c.generation, c.kind, ino));
                }
            }
        }
        Ok(())
    }

    /// Claim the winning data pages of every file; a page whose block is
    /// taken (by a log structure or an earlier file page) voids its entry.
    fn claim_data(&mut self) {
        let mut voided: HashSet<EntryLoc> = HashSet::new();
        let mut claims = Vec::new();
        let mut found = Vec::new();
        let pages: Vec<(u64, u64, u64, EntryLoc)> = self
            .inodes
            .iter()
            .filter_map(|(&ino, n)| n.file.as_ref().map(|f| (ino, f)))
            .flat_map(|(ino, f)| {
                f.pages
                    .iter()
                    .map(move |&(pg, (block, loc, _))| (ino, pg, block, loc))
            })
            .collect();
        for (ino, pg, block, loc) in pages {
            if let Err(e) = self.claim(block, Owner::Data(ino, pg), &mut claims)
                && voided.insert(loc)
            {
                found.push(Problem::new(
                    format!("inode {ino} page {pg} (write entry at {})", at(loc)),
                    e,
                    Fix::VoidEntry { loc },
                ));
            }
        }
        self.problems.extend(found);
    }

    fn link_counts(&mut self) {
        let mut links: HashMap<u64, u32> = HashMap::new();
        let mut subdirs: HashMap<u64, u32> = HashMap::new();
        for (&ino, n) in &self.inodes {
            if let Some(d) = &n.dir {
                for c in d.entries.values() {
                    *links.entry(c.ino).or_default() += 1;
                    if c.kind == FileKind::Dir {
                        *subdirs.entry(ino).or_default() += 1;
                    }
                }
            }
        }
        for (ino, n) in self.inodes.iter_mut() {
            n.attrs.nlink = if n.record.kind == FileKind::Dir {
                2 + subdirs.get(ino).copied().unwrap_or(0)
            } else {
                links.get(ino).copied().unwrap_or(0)
            };
        }
    }
}

/// The log entry that gave directory `node` its name `name` for `ino` (the
/// newest add or rename naming it); `None` if the pending rename did.
fn winning_entry(node: &RebuiltInode, name: &[u8], ino: u64) -> Option<EntryLoc> {
    let mut best: Option<(u64, EntryLoc)> = None;
    for s in &node.sublogs {
        for (loc, e) in &s.entries {
            let seq = match e {
                Entry::DirAdd {
                    seq,
                    ino: c,
                    name: n,
                    ..
                } if n == name && *c == ino => *seq,
                Entry::DirRename {
                    seq, ino: c, new, ..
                } if new == name && *c == ino => *seq,
                _ => continue,
            };
            if best.is_none_or(|(s, _)| seq > s) {
                best = Some((seq, *loc));
            }
        }
    }
    best.map(|(_, l)| l)
}

/// Why the rebuild would refuse entry `e` in the log of an inode of kind
/// `kind` (the same bounds as `recovery::replay`), if it would.
fn entry_problem(sb: &Superblock, kind: FileKind, e: &Entry) -> Option<String> {
    match e {
        Entry::SetAttr { seq, size, .. } if *seq >= MAX_ATTR_SEQ || *size > MAX_FILE_SIZE => Some(
            format!("attribute entry: sequence {seq} or size {size} out of range"),
        ),
        Entry::DirAdd { seq, .. } | Entry::DirRemove { seq, .. } | Entry::DirRename { seq, .. }
            if kind == FileKind::Dir && *seq >= MAX_SEQ =>
        {
            Some(format!("directory entry: sequence {seq} out of range"))
        }
        Entry::FileWrite {
            version,
            pgoff,
            block,
            npages,
            file_end,
            ..
        } if kind != FileKind::Dir => {
            let n = u64::from(*npages);
            let bad_range = n == 0
                || pgoff
                    .checked_add(n)
                    .is_none_or(|e| e > MAX_FILE_SIZE / BLOCK_SIZE)
                || !sb.data_range_ok(*block, n)
                || *file_end > MAX_FILE_SIZE;
            if bad_range {
                Some("write entry: page or block range out of bounds".into())
            } else if *version >= MAX_SEQ {
                Some(format!("write entry: version {version} out of range"))
            } else {
                None
            }
        }
        _ => None,
    }
}
