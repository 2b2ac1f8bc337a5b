//! What a sequential workload did, file by file, and the oracles that need
//! it: the durability rule of the page models (an operation is durable only
//! once a sync covering it returned; unsynced operations are each whole or
//! absent) and, for every model, that no file holds bytes it was never given
//! (another file's data, stale blocks, metadata).
//!
//! Unsynced namespace operations are not ordered with each other
//! (docs/guarantees.md), so "whole or absent" is judged per directory: an
//! operation is the change it made to the entries of the directories it
//! touched (a directory is its inode, whatever it is called), and an image's
//! name space must be the synced entries with some subset of those changes
//! applied, read from the root. A link into `/D` and a later rename of `/D`
//! to `/E` are two changes to two directories: either may be missing.

use super::workloads::{Op, pattern};
use manyfs::lowlevel::InodeOps;
use manyfs::{FileKind, Fs, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// A file's identity: inode number and generation.
pub type Ident = (u64, u32);

/// A name's target, by identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PNode {
    /// A directory (its inode number).
    Dir(u64),
    /// A symlink and its target.
    Symlink(Vec<u8>),
    /// A file.
    File(Ident),
    /// A FIFO, socket or device node (kind and device number).
    Special(FileKind, u64),
}

/// The name space: path to target.
pub type Tree = BTreeMap<String, PNode>;

/// What the attribute oracle compares of a file or directory: mode (with
/// the setuid, setgid and sticky bits), owner, group, and every extended
/// attribute (a POSIX ACL among them). Times are not compared: a write
/// moves the mtime with the clock, and an overwrite in place logs it only
/// at the next `fsync` or full sync (docs/guarantees.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttrState {
    mode: u32,
    uid: u32,
    gid: u32,
    xattrs: BTreeMap<Vec<u8>, Vec<u8>>,
}

/// What an attribute operation writes whatever the current value is.
#[derive(Debug, Clone, Default)]
struct Forced {
    mode: bool,
    owner: bool,
    xattr: Option<Vec<u8>>,
}

/// One operation's change to one object's [`AttrState`]: the fields it
/// set, and the extended attributes it set (`Some`) or removed (`None`).
#[derive(Debug, Clone, Default)]
struct AttrDelta {
    mode: Option<u32>,
    uid: Option<u32>,
    gid: Option<u32>,
    xattrs: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl AttrDelta {
    fn between(a: &AttrState, b: &AttrState) -> AttrDelta {
        let keys: BTreeSet<&Vec<u8>> = a.xattrs.keys().chain(b.xattrs.keys()).collect();
        AttrDelta {
            mode: (a.mode != b.mode).then_some(b.mode),
            uid: (a.uid != b.uid).then_some(b.uid),
            gid: (a.gid != b.gid).then_some(b.gid),
            xattrs: keys
                .into_iter()
                .filter(|k| a.xattrs.get(*k) != b.xattrs.get(*k))
                .map(|k| (k.clone(), b.xattrs.get(k).cloned()))
                .collect(),
        }
    }

    /// Add what the operation writes whatever the value was (`after` is
    /// the object's state once it returned).
    fn force(&mut self, f: &Forced, after: &AttrState) {
        if f.mode {
            self.mode = Some(after.mode);
        }
        if f.owner {
            self.uid = Some(after.uid);
            self.gid = Some(after.gid);
        }
        if let Some(name) = &f.xattr
            && !self.xattrs.iter().any(|(k, _)| k == name)
        {
            self.xattrs
                .push((name.clone(), after.xattrs.get(name).cloned()));
        }
    }

    fn is_empty(&self) -> bool {
        self.mode.is_none() && self.uid.is_none() && self.gid.is_none() && self.xattrs.is_empty()
    }

    fn apply(&self, s: &mut AttrState) {
        s.mode = self.mode.unwrap_or(s.mode);
        s.uid = self.uid.unwrap_or(s.uid);
        s.gid = self.gid.unwrap_or(s.gid);
        for (k, v) in &self.xattrs {
            match v {
                Some(v) => s.xattrs.insert(k.clone(), v.clone()),
                None => s.xattrs.remove(k),
            };
        }
    }
}

impl std::fmt::Display for AttrState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "mode {:o} owner {}:{}", self.mode, self.uid, self.gid)?;
        for (k, v) in &self.xattrs {
            write!(f, " {}={:02x?}", String::from_utf8_lossy(k), v)?;
        }
        Ok(())
    }
}

/// The attributes of every file and directory, by identity.
type Attrs = BTreeMap<Ident, AttrState>;

/// Read the attributes of every file and directory of `tree` (the root
/// too), keyed by path, with the identity of each.
fn read_attrs(fs: &Fs, tree: &Tree) -> Result<BTreeMap<String, (Ident, AttrState)>> {
    let mut out = BTreeMap::new();
    let paths = std::iter::once("/".to_string()).chain(
        tree.iter()
            .filter(|(_, n)| matches!(n, PNode::File(_) | PNode::Dir(_)))
            .map(|(p, _)| p.clone()),
    );
    for p in paths {
        let m = fs.symlink_metadata(&p)?;
        let mut xattrs = BTreeMap::new();
        for name in fs.listxattr(m.ino)? {
            let value = fs.getxattr(m.ino, &name)?;
            xattrs.insert(name.as_encoded_bytes().to_vec(), value);
        }
        let state = AttrState {
            mode: m.mode,
            uid: m.uid,
            gid: m.gid,
            xattrs,
        };
        out.insert(p, ((m.ino, m.generation), state));
    }
    Ok(out)
}

/// The name space as directory entries: (directory inode, name) to target.
pub type Entries = BTreeMap<(u64, String), PNode>;

/// One entry an operation changed: its key and new target (none: removed).
type EntryChange<'a> = (&'a (u64, String), Option<&'a PNode>);

#[derive(Debug, Clone)]
enum ContentOp {
    Write { off: u64, len: usize, tag: u8 },
    Truncate(u64),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum SyncOp {
    None,
    All,
    File(Ident),
}

/// Where the workload is at a crash point.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    /// Operations that returned.
    pub returned: usize,
    /// Whether operation `returned` had started.
    pub in_flight: bool,
}

/// A sequential workload's history: the name space and every file's
/// content before each operation, and what each operation did.
#[derive(Debug, Default)]
pub struct History {
    trees: Vec<Tree>,
    entries: Vec<Entries>,
    root: u64,
    contents: Vec<BTreeMap<Ident, Vec<u8>>>,
    attrs: Vec<Attrs>,
    ops: Vec<(Option<(Ident, ContentOp)>, SyncOp)>,
    /// Per recorded operation: the object whose attributes it sets, and
    /// what it sets whatever the value was ([`AttrDelta`] with those
    /// fields `Some`): a chmod sets the mode even to the value it had, and
    /// without an earlier unsynced change that value is a change.
    attr_ops: Vec<Option<(Ident, Forced)>>,
    tags: BTreeMap<Ident, BTreeSet<u8>>,
    tag_paths: BTreeMap<u8, String>,
}

/// Read the name space and the contents of every file.
pub fn read_tree(fs: &Fs) -> Result<(Tree, BTreeMap<String, Vec<u8>>)> {
    let (tree, _, data) = read_names(fs)?;
    Ok((tree, data))
}

/// Read the name space (by path and by directory entry) and the contents
/// of every file.
fn read_names(fs: &Fs) -> Result<(Tree, Entries, BTreeMap<String, Vec<u8>>)> {
    let mut tree = Tree::new();
    let mut entries = Entries::new();
    let mut data = BTreeMap::new();
    let mut stack = vec![(PathBuf::from("/"), fs.metadata("/")?.ino)];
    while let Some((dir, dino)) = stack.pop() {
        for e in fs.read_dir(&dir)? {
            let p = dir.join(&e.name);
            let key = p.display().to_string();
            let node = match e.kind {
                FileKind::Dir => {
                    stack.push((p, e.ino));
                    PNode::Dir(e.ino)
                }
                FileKind::File => {
                    let m = fs.symlink_metadata(&p)?;
                    data.insert(key.clone(), fs.read(&p)?);
                    PNode::File((m.ino, m.generation))
                }
                FileKind::Symlink => {
                    let t = fs.read_link(&p)?;
                    PNode::Symlink(t.as_os_str().as_encoded_bytes().to_vec())
                }
                special => {
                    let m = fs.symlink_metadata(&p)?;
                    PNode::Special(special, m.rdev)
                }
            };
            let name = e.name.to_string_lossy().into_owned();
            entries.insert((dino, name), node.clone());
            tree.insert(key, node);
        }
    }
    Ok((tree, entries, data))
}

/// The paths directory entries `entries` give, read from directory `root`
/// (each directory once: a subset of unsynced changes never loops, but the
/// walk does not rely on it).
fn paths_of(entries: &Entries, root: u64) -> Tree {
    let mut tree = Tree::new();
    let mut seen = BTreeSet::from([root]);
    let mut stack = vec![(String::new(), root)];
    while let Some((dir, dino)) = stack.pop() {
        let from = (dino, String::new());
        for ((_, name), node) in entries.range(from..).take_while(|((d, _), _)| *d == dino) {
            let p = format!("{dir}/{name}");
            if let PNode::Dir(child) = node
                && seen.insert(*child)
            {
                stack.push((p.clone(), *child));
            }
            tree.insert(p, node.clone());
        }
    }
    tree
}

fn apply_content(c: &mut Vec<u8>, op: &ContentOp) {
    match *op {
        ContentOp::Write { off, len, tag } => {
            let end = off as usize + len;
            if c.len() < end {
                c.resize(end, 0);
            }
            for (i, b) in c[off as usize..end].iter_mut().enumerate() {
                *b = pattern(tag, off + i as u64);
            }
        }
        ContentOp::Truncate(n) => c.resize(n as usize, 0),
    }
}

/// Namespace comparison ignores generations (an image shows what its
/// inode table holds).
fn same_tree(a: &Tree, b: &Tree) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|((ka, va), (kb, vb))| {
            ka == kb
                && match (va, vb) {
                    (PNode::File(x), PNode::File(y)) => x.0 == y.0,
                    _ => va == vb,
                }
        })
}

/// What a file's content violation says when the content is, 512-byte
/// sector by sector, a combination of whole unsynced writes over what its
/// last sync made durable, but not as a whole: an unsynced write torn at
/// device sectors (only a device that tears writes may show it).
pub const TORN_AT_SECTORS: &str = "TORN AT SECTORS";

/// What a file's content violation says when the content is, 64-byte
/// piece by piece (a cache line), a combination of whole unsynced writes
/// over what its last sync made durable, but not as a whole, nor sector by
/// sector: an unsynced write into a page that the kernel was writing back
/// at the same time (the page reached the disk with some lines of each
/// version).
pub const TORN_AT_LINES: &str = "TORN AT LINES";

/// Bytes of a device sector, the unit a tearing device writes whole.
const SECTOR: usize = 512;

/// Bytes of a cache line: a store racing the write-back of its page
/// reaches the disk line by line at worst (manyfs never relies on stores
/// below 8 bytes being seen whole across a line).
const LINE: usize = 64;

/// Whether `got` has the length of some combination of whole `pending`
/// writes over `base` and each of its `unit`-byte pieces is the same piece
/// of one such combination (not necessarily the same for every piece).
fn torn_at(unit: usize, base: &[u8], pending: &[&ContentOp], got: &[u8]) -> bool {
    let combos: Vec<Vec<u8>> = subsets(pending.len())
        .into_iter()
        .map(|mask| {
            let mut c = base.to_vec();
            for (k, op) in pending.iter().enumerate() {
                if mask & (1 << k) != 0 {
                    apply_content(&mut c, op);
                }
            }
            c
        })
        .filter(|c| c.len() == got.len())
        .collect();
    !combos.is_empty()
        && got.chunks(unit).enumerate().all(|(i, sector)| {
            let at = i * unit..i * unit + sector.len();
            combos.iter().any(|c| c[at.clone()] == *sector)
        })
}

/// Subsets of `n` items to try, as bit masks (every one up to 2^10, else
/// prefixes only).
fn subsets(n: usize) -> Vec<u32> {
    if n <= 10 {
        (0..1u32 << n).collect()
    } else {
        (0..=n).map(|k| ((1u64 << k) - 1) as u32).collect()
    }
}

impl History {
    /// An empty history.
    pub fn new() -> Self {
        Self::default()
    }

    fn ident(fs: &Fs, p: &str) -> Option<Ident> {
        fs.metadata(p)
            .ok()
            .filter(|m| m.kind == FileKind::File)
            .map(|m| (m.ino, m.generation))
    }

    /// Run `op`, noting what it did to which file.
    fn run(&mut self, op: &Op, fs: &Fs) -> (Option<(Ident, ContentOp)>, SyncOp) {
        let (path, content) = match *op.inner() {
            Op::Write(p, off, len, tag) => (Some(p), Some(ContentOp::Write { off, len, tag })),
            Op::Append(p, len, tag) => {
                let off = fs.metadata(p).map(|m| m.size).unwrap_or(0);
                (Some(p), Some(ContentOp::Write { off, len, tag }))
            }
            Op::Truncate(p, n) => (Some(p), Some(ContentOp::Truncate(n))),
            Op::Fsync(p) | Op::FsyncData(p) => (Some(p), None),
            _ => (None, None),
        };
        let id = path.and_then(|p| Self::ident(fs, p));
        if op.apply(fs).is_err() {
            return (None, SyncOp::None);
        }
        if let (Some(id), Some(ContentOp::Write { tag, .. })) = (id, &content) {
            self.tags.entry(id).or_default().insert(*tag);
            self.tag_paths
                .entry(*tag)
                .or_insert_with(|| path.unwrap_or_default().to_string());
        }
        let sync = match (op.inner(), id) {
            (Op::Sync | Op::Destage, _) => SyncOp::All,
            (Op::Fsync(_) | Op::FsyncData(_), Some(id)) => SyncOp::File(id),
            _ => SyncOp::None,
        };
        (id.zip(content), sync)
    }

    /// Run a setup operation (its writes' tags are remembered).
    pub fn setup(&mut self, op: &Op, fs: &Fs) {
        self.run(op, fs);
    }

    fn push_state(&mut self, fs: &Fs) -> Result<()> {
        let (tree, entries, data) = read_names(fs)?;
        let contents = tree
            .iter()
            .filter_map(|(p, n)| match n {
                PNode::File(id) => Some((*id, data.get(p).cloned().unwrap_or_default())),
                _ => None,
            })
            .collect();
        let attrs = read_attrs(fs, &tree)?.into_values().collect();
        self.trees.push(tree);
        self.entries.push(entries);
        self.contents.push(contents);
        self.attrs.push(attrs);
        Ok(())
    }

    /// The state before the first recorded operation.
    pub fn start(&mut self, fs: &Fs) -> Result<()> {
        self.root = fs.metadata("/")?.ino;
        self.push_state(fs)
    }

    /// Run a recorded operation.
    pub fn op(&mut self, op: &Op, fs: &Fs) -> Result<()> {
        let forced = match *op.inner() {
            Op::Chmod(p, _) => Some((
                p,
                Forced {
                    mode: true,
                    ..Default::default()
                },
            )),
            Op::Chown(p, ..) => Some((
                p,
                Forced {
                    owner: true,
                    ..Default::default()
                },
            )),
            Op::SetXattr(p, name, _) | Op::RemoveXattr(p, name) => Some((
                p,
                Forced {
                    xattr: Some(name.as_bytes().to_vec()),
                    ..Default::default()
                },
            )),
            _ => None,
        }
        .and_then(|(p, f)| {
            fs.symlink_metadata(p)
                .ok()
                .map(|m| ((m.ino, m.generation), f))
        });
        let r = self.run(op, fs);
        self.ops.push(r);
        self.attr_ops.push(forced);
        self.push_state(fs)
    }

    /// Number of recorded operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether no operation was recorded.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Every byte of every file is zero or was written to that file at that
    /// offset by some write.
    pub fn check_foreign_bytes(&self, fs: &Fs) -> std::result::Result<(), String> {
        let (tree, data) = read_tree(fs).map_err(|e| format!("reading the tree: {e}"))?;
        for (p, n) in &tree {
            let PNode::File(id) = n else { continue };
            let own: Vec<u8> = match self.tags.get(id) {
                Some(t) => t.iter().copied().collect(),
                // Identity unknown (stale generation): any write to that
                // inode number.
                None => self
                    .tags
                    .iter()
                    .filter(|(k, _)| k.0 == id.0)
                    .flat_map(|(_, t)| t.iter().copied())
                    .collect(),
            };
            let c = &data[p];
            // A write's bytes are contiguous: the tag that matched the byte
            // before is tried first (most images hold a few long writes).
            let mut last = None;
            let bad = c.iter().enumerate().position(|(x, &b)| {
                if b == 0 || last.is_some_and(|t| pattern(t, x as u64) == b) {
                    return false;
                }
                last = own.iter().copied().find(|&t| pattern(t, x as u64) == b);
                last.is_none()
            });
            if let Some(x) = bad {
                let end = (x + 64).min(c.len());
                let whose = self
                    .tag_paths
                    .iter()
                    .find(|(t, _)| (x..end).all(|i| c[i] == 0 || pattern(**t, i as u64) == c[i]));
                return Err(match whose {
                    Some((t, q)) => format!(
                        "SECURITY: {p} (inode {}) holds at offset {x} bytes of write {t:#x} to {q}",
                        id.0
                    ),
                    None => format!(
                        "SECURITY: {p} (inode {}) holds at offset {x} bytes no write produced ({:02x?})",
                        id.0,
                        &c[x..end.min(x + 8)]
                    ),
                });
            }
        }
        Ok(())
    }

    fn durable_points(&self, w: Window) -> (usize, BTreeMap<Ident, usize>) {
        let mut ns = 0;
        let mut files = BTreeMap::new();
        for (i, (_, s)) in self.ops.iter().enumerate().take(w.returned) {
            match s {
                SyncOp::All => ns = i + 1,
                SyncOp::File(id) => {
                    files.insert(*id, i + 1);
                }
                SyncOp::None => {}
            }
        }
        for v in files.values_mut() {
            *v = (*v).max(ns);
        }
        (ns, files)
    }

    /// The name space must be the one at the last completed sync with each
    /// later operation whole or absent; each file's content the one at its
    /// last completed sync with each later write or truncation whole or
    /// absent. With `ignore_syncs`, as if nothing had been synced.
    fn check_window(
        &self,
        tree: &Tree,
        data: &BTreeMap<String, Vec<u8>>,
        attrs: &BTreeMap<String, (Ident, AttrState)>,
        w: Window,
        ignore_syncs: bool,
    ) -> std::result::Result<(), String> {
        let hi = (w.returned + usize::from(w.in_flight)).min(self.ops.len());
        let (mut ns, mut files) = self.durable_points(w);
        if ignore_syncs {
            ns = 0;
            files.clear();
        }
        // Name space: apply each subset of the unsynced operations' changes
        // to directory entries, then read the paths from the root.
        let deltas: Vec<Vec<EntryChange<'_>>> = (ns..hi)
            .map(|i| {
                let (a, b) = (&self.entries[i], &self.entries[i + 1]);
                a.keys()
                    .chain(b.keys())
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .filter(|k| a.get(*k) != b.get(*k))
                    .map(|k| (k, b.get(k)))
                    .collect()
            })
            .filter(|d: &Vec<_>| !d.is_empty())
            .collect();
        let mut matched = None;
        for mask in subsets(deltas.len()) {
            let mut e = self.entries[ns].clone();
            for (k, d) in deltas.iter().enumerate() {
                if mask & (1 << k) != 0 {
                    for (key, n) in d {
                        match n {
                            Some(n) => e.insert((*key).clone(), (*n).clone()),
                            None => e.remove(*key),
                        };
                    }
                }
            }
            let t = paths_of(&e, self.root);
            if same_tree(&t, tree) {
                matched = Some(t);
                break;
            }
        }
        let Some(model) = matched else {
            let want = &self.trees[hi];
            let diff = want
                .iter()
                .find(|(k, v)| tree.get(*k).is_none_or(|g| !same_tree_node(v, g)))
                .map(|(k, v)| format!("{k}: {v:?} expected, {:?} found", tree.get(k)))
                .or_else(|| {
                    tree.iter()
                        .find(|(k, _)| !want.contains_key(*k))
                        .map(|(k, v)| format!("{k} ({v:?}) should not exist"))
                })
                .unwrap_or_default();
            return Err(format!(
                "name space is no combination of whole operations since the last sync ({} unsynced); vs the latest state: {diff}",
                deltas.len()
            ));
        };
        // Contents.
        for (p, n) in &model {
            let PNode::File(id) = n else { continue };
            let d = files.get(id).copied().unwrap_or(ns);
            let base = self.contents[d].get(id).cloned().unwrap_or_default();
            let pending: Vec<&ContentOp> = (d..hi)
                .filter_map(|i| match &self.ops[i].0 {
                    Some((oid, c)) if oid == id => Some(c),
                    _ => None,
                })
                .collect();
            let got = &data[p];
            let ok = subsets(pending.len()).into_iter().any(|mask| {
                let mut c = base.clone();
                for (k, op) in pending.iter().enumerate() {
                    if mask & (1 << k) != 0 {
                        apply_content(&mut c, op);
                    }
                }
                c == *got
            });
            if !ok && torn_at(SECTOR, &base, &pending, got) {
                return Err(format!(
                    "{p}: {TORN_AT_SECTORS}: content is no combination of whole writes since its last sync, but each 512-byte sector is the same sector of one ({} bytes, {} pending writes)",
                    got.len(),
                    pending.len()
                ));
            }
            if !ok && torn_at(LINE, &base, &pending, got) {
                return Err(format!(
                    "{p}: {TORN_AT_LINES}: content is no combination of whole writes since its last sync, nor sector by sector, but each 64-byte line is the same line of one ({} bytes, {} pending writes)",
                    got.len(),
                    pending.len()
                ));
            }
            if !ok {
                let mut latest = base.clone();
                for op in &pending {
                    apply_content(&mut latest, op);
                }
                let first = latest
                    .iter()
                    .zip(got)
                    .position(|(a, b)| a != b)
                    .unwrap_or(latest.len().min(got.len()));
                let found = match got.get(first) {
                    None => "the file ends there".to_string(),
                    Some(0) => "zeros there".to_string(),
                    Some(_) => self
                        .tag_paths
                        .keys()
                        .find(|t| pattern(**t, first as u64) == got[first])
                        .map_or("unknown bytes there".into(), |t| {
                            format!("bytes of write {t:#x} there")
                        }),
                };
                return Err(format!(
                    "{p}: content is no combination of whole writes since its last sync ({} bytes, {} pending writes; latest state has {} bytes; first difference at {first}: {found})",
                    got.len(),
                    pending.len(),
                    latest.len()
                ));
            }
        }
        self.check_attrs(attrs, ns, &files, hi)
    }

    /// Each file's and directory's attributes must be the ones at its last
    /// completed sync (a full sync, or for a file its own `fsync`) with
    /// each later change of them whole or absent (a chmod and the ACL it
    /// rewrites are one change).
    fn check_attrs(
        &self,
        attrs: &BTreeMap<String, (Ident, AttrState)>,
        ns: usize,
        files: &BTreeMap<Ident, usize>,
        hi: usize,
    ) -> std::result::Result<(), String> {
        for (p, (id, got)) in attrs {
            let d = files.get(id).copied().unwrap_or(ns);
            // The object's states from its durable point on (it may have
            // been created since: then from its first).
            let states: Vec<&AttrState> = (d..=hi)
                .filter_map(|i| self.attrs.get(i).and_then(|a| a.get(id)))
                .collect();
            let Some(base) = states.first() else {
                // An identity no recorded state has (a stale generation):
                // the name space check judges it.
                continue;
            };
            // Each operation's change: what differs, and what it writes
            // whatever the value was.
            let deltas: Vec<AttrDelta> = (d..hi)
                .filter_map(|i| {
                    let (a, b) = (self.attrs.get(i)?.get(id)?, self.attrs.get(i + 1)?.get(id)?);
                    let mut delta = AttrDelta::between(a, b);
                    if let Some(Some((target, f))) = self.attr_ops.get(i)
                        && target == id
                    {
                        delta.force(f, b);
                    }
                    (!delta.is_empty()).then_some(delta)
                })
                .collect();
            let ok = subsets(deltas.len()).into_iter().any(|mask| {
                let mut s = (*base).clone();
                for (k, delta) in deltas.iter().enumerate() {
                    if mask & (1 << k) != 0 {
                        delta.apply(&mut s);
                    }
                }
                s == *got
            });
            if !ok {
                return Err(format!(
                    "{p}: attributes are no combination of whole changes since its last sync ({} unsynced): found {got}, synced {base}, latest {}",
                    deltas.len(),
                    states.last().expect("a state")
                ));
            }
        }
        Ok(())
    }

    /// The durability oracle of the page models.
    pub fn check_durable(&self, fs: &Fs, w: Window) -> std::result::Result<(), String> {
        let (tree, data) = read_tree(fs).map_err(|e| format!("reading the tree: {e}"))?;
        let attrs = read_attrs(fs, &tree).map_err(|e| format!("reading attributes: {e}"))?;
        match self.check_window(&tree, &data, &attrs, w, false) {
            Ok(()) => Ok(()),
            Err(e) => {
                if self.check_window(&tree, &data, &attrs, w, true).is_ok() {
                    Err(format!("SYNCED CHANGE LOST: {e}"))
                } else {
                    Err(e)
                }
            }
        }
    }
}

fn same_tree_node(a: &PNode, b: &PNode) -> bool {
    match (a, b) {
        (PNode::File(x), PNode::File(y)) => x.0 == y.0,
        _ => a == b,
    }
}
