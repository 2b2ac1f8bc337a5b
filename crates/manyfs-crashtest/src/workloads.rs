//! Workloads for the crash explorer: every single operation and pairs of
//! operations on a small populated tree (ACE-style), random longer
//! sequences, and concurrent writers to one file.

use super::{Rng, WRITE_RETURNED};
use manyfs::lowlevel::InodeOps;
use manyfs::lowlevel::{SetAttr, XattrSet};
use manyfs::{Fs, OpenOptions, Result};
use std::ffi::OsStr;
use std::path::Path;

/// One file-system operation of a workload.
#[derive(Debug, Clone)]
pub enum Op {
    /// Create an empty file.
    Create(&'static str),
    /// Write `len` bytes at `off`: write tag `tag`'s pattern
    /// ([`pattern`]), distinct for every write and file offset.
    Write(&'static str, u64, usize, u8),
    /// Append `len` bytes of write tag `tag`'s pattern.
    Append(&'static str, usize, u8),
    /// Set the size.
    Truncate(&'static str, u64),
    /// Hard link.
    Link(&'static str, &'static str),
    /// Remove a file.
    Unlink(&'static str),
    /// Rename (over an existing target where there is one).
    Rename(&'static str, &'static str),
    /// Create a directory.
    Mkdir(&'static str),
    /// Remove a directory.
    Rmdir(&'static str),
    /// Create a symlink.
    Symlink(&'static str, &'static str),
    /// Change permissions.
    Chmod(&'static str, u32),
    /// `chown(path, uid, gid)`.
    Chown(&'static str, u32, u32),
    /// Set the access and modification times to this many seconds after
    /// the epoch (`utimes`).
    Utimes(&'static str, u64),
    /// fsync a file.
    Fsync(&'static str),
    /// fdatasync a file.
    FsyncData(&'static str),
    /// Sync the whole file system.
    Sync,
    /// Move the data staged in the pool of a tiered pool onto the data
    /// device, and sync everything (`Fs::destage`).
    Destage,
    /// `mknod(path, mode, rdev)`: a FIFO, socket or device node.
    Mknod(&'static str, u32, u64),
    /// Swap two names (`renameat2(RENAME_EXCHANGE)`).
    Exchange(&'static str, &'static str),
    /// Set an extended attribute.
    SetXattr(&'static str, &'static str, &'static [u8]),
    /// Remove an extended attribute.
    RemoveXattr(&'static str, &'static str),
    /// Run an operation on a thread bound to the `n`-th CPU this process
    /// may use (modulo their number): its appends go to that CPU's
    /// sub-logs.
    OnCpu(usize, &'static Op),
}

/// The directory inode and last name of `p`, for the inode-level calls.
fn parent_and_name(fs: &Fs, p: &'static str) -> Result<(u64, &'static OsStr)> {
    let path = Path::new(p);
    let dir = path.parent().unwrap_or(Path::new("/"));
    let name = path.file_name().unwrap_or(OsStr::new("."));
    Ok((fs.metadata(dir)?.ino, name))
}

/// The byte a write with tag `tag` puts at file offset `off`: every write
/// tag goes to one file only, so bytes of one file found in another (or
/// bytes no write produced) are detectable.
pub fn pattern(tag: u8, off: u64) -> u8 {
    let mut x = (u64::from(tag) << 48) ^ off ^ 0x5bd1_e995;
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (x ^ (x >> 31)) as u8
}

/// `len` bytes of tag `tag`'s pattern starting at file offset `off`.
pub fn pattern_bytes(tag: u8, off: u64, len: usize) -> Vec<u8> {
    (0..len as u64).map(|i| pattern(tag, off + i)).collect()
}

impl Op {
    /// The operation itself (the one [`Op::OnCpu`] runs).
    pub fn inner(&self) -> &Op {
        match self {
            Op::OnCpu(_, op) => op.inner(),
            op => op,
        }
    }

    /// `op` on the `cpu`-th CPU ([`Op::OnCpu`]).
    pub fn on_cpu(cpu: usize, op: Op) -> Op {
        Op::OnCpu(cpu, Box::leak(Box::new(op)))
    }

    /// Run it (errors such as "not empty" are part of the workload).
    pub fn apply(&self, fs: &Fs) -> Result<()> {
        match *self {
            Op::OnCpu(cpu, op) => manyfs::diag::run_on_cpu(cpu, || op.apply(fs))?,
            Op::Create(p) => OpenOptions::new()
                .write(true)
                .create(true)
                .open(fs, p)
                .map(|_| ()),
            // Writes open without O_CREAT: creating is its own operation,
            // so each op is one atomic step.
            Op::Write(p, off, len, b) => {
                let f = OpenOptions::new().write(true).open(fs, p)?;
                f.write_at(&pattern_bytes(b, off, len), off).map(|_| ())
            }
            Op::Append(p, len, b) => {
                let f = OpenOptions::new().append(true).open(fs, p)?;
                // Single-threaded workloads: the end does not move between.
                let off = f.metadata()?.size;
                f.append(&pattern_bytes(b, off, len)).map(|_| ())
            }
            Op::Truncate(p, len) => fs.set_len(p, len),
            Op::Link(a, b) => fs.hard_link(a, b),
            Op::Unlink(p) => fs.remove_file(p),
            Op::Rename(a, b) => fs.rename(a, b),
            Op::Mkdir(p) => fs.create_dir(p),
            Op::Rmdir(p) => fs.remove_dir(p),
            Op::Symlink(t, l) => fs.symlink(t, l),
            Op::Chmod(p, m) => fs.set_permissions(p, m),
            Op::Chown(p, uid, gid) => {
                let ino = fs.symlink_metadata(p)?.ino;
                let change = SetAttr {
                    uid: Some(uid),
                    gid: Some(gid),
                    ..Default::default()
                };
                fs.setattr(ino, &change).map(|_| ())
            }
            Op::Utimes(p, secs) => {
                let ino = fs.symlink_metadata(p)?.ino;
                let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
                let change = SetAttr {
                    atime: Some(t),
                    mtime: Some(t),
                    ..Default::default()
                };
                fs.setattr(ino, &change).map(|_| ())
            }
            Op::Fsync(p) => OpenOptions::new().write(true).open(fs, p)?.sync_all(),
            Op::FsyncData(p) => OpenOptions::new().write(true).open(fs, p)?.sync_data(),
            Op::Sync => fs.sync(),
            Op::Destage => fs.destage().map(|_| ()),
            Op::Mknod(p, mode, rdev) => {
                let (dir, name) = parent_and_name(fs, p)?;
                fs.mknod(dir, name, mode, rdev, 0, 0).map(|_| ())
            }
            Op::Exchange(a, b) => {
                let ((da, na), (db, nb)) = (parent_and_name(fs, a)?, parent_and_name(fs, b)?);
                fs.rename_at(da, na, db, nb, manyfs::lowlevel::Rename::Exchange)
            }
            Op::SetXattr(p, name, value) => {
                let ino = fs.symlink_metadata(p)?.ino;
                fs.setxattr(ino, OsStr::new(name), value, XattrSet::Any)
            }
            Op::RemoveXattr(p, name) => {
                let ino = fs.symlink_metadata(p)?.ino;
                fs.removexattr(ino, OsStr::new(name))
            }
        }
    }
}

/// A workload: a tree to start from, then operations to crash in.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Name (for replaying a violation).
    pub name: String,
    /// Pool size.
    pub pool_size: u64,
    /// Operations run before recording starts.
    pub setup: Vec<Op>,
    /// Operations whose every crash state is checked.
    pub ops: Vec<Op>,
    /// Or: concurrent writers.
    pub concurrent: Option<Concurrent>,
    /// Bytes of a second pool member (file `m1` beside the pool, on node
    /// 1); 0: the pool is one file. `pool_size` is then member 0's size.
    pub member_bytes: u64,
    /// Bytes of a data device (file `data` beside the pool): a tiered
    /// pool, its file data on the device; 0: none.
    pub data_bytes: u64,
    /// The workload exists to stage small synchronous writes in the pool
    /// (`inode/staging.rs`): where the pool stages (a tiered pool under
    /// the pm model), a run that staged no page is a violation.
    pub must_stage: bool,
}

fn populated() -> Vec<Op> {
    vec![
        Op::Create("/A"),
        Op::Write("/A", 0, 8192, 0xA1),
        Op::Create("/B"),
        Op::Write("/B", 0, 100, 0xB1),
        Op::Mkdir("/D"),
        Op::Create("/D/x"),
        Op::Write("/D/x", 0, 5000, 0xD1),
        Op::Symlink("/A", "/S"),
    ]
}

/// The single operations explored in every state.
pub fn single_ops() -> Vec<Op> {
    vec![
        Op::Create("/C"),
        Op::Write("/A", 100, 5000, 0x11),
        Op::Write("/A", 0, 4096, 0x12),
        Op::Write("/B", 20000, 3000, 0x13),
        Op::Append("/B", 3000, 0x14),
        Op::Truncate("/A", 1000),
        Op::Truncate("/B", 20000),
        Op::Link("/A", "/D/alink"),
        Op::Unlink("/A"),
        Op::Rename("/B", "/A"),
        Op::Rename("/D/x", "/y"),
        Op::Rename("/D", "/E"),
        Op::Mkdir("/F"),
        Op::Rmdir("/D"),
        Op::Symlink("/D/x", "/T"),
        Op::Chmod("/A", 0o600),
        Op::Fsync("/A"),
        Op::Write("/D/x", 4000, 200, 0x15),
        Op::Sync,
        Op::Fsync("/B"),
        Op::FsyncData("/A"),
        Op::Write("/A", 200, 300, 0x24),
    ]
}

fn seq(name: &str, ops: Vec<Op>) -> Workload {
    Workload {
        name: name.into(),
        pool_size: 512 << 10,
        setup: populated(),
        ops,
        concurrent: None,
        member_bytes: 0,
        data_bytes: 0,
        must_stage: false,
    }
}

/// Special files, extended attributes and exchanges (same directory and
/// across directories, files with directories): every crash state of each
/// must show it wholly or not at all.
pub fn posix_workloads() -> Vec<Workload> {
    const FIFO: u32 = 0o010644;
    const CHR: u32 = 0o020600;
    let big: &'static [u8] = &[0x5a; 3000];
    vec![
        seq(
            "posix-nodes",
            vec![
                Op::Mknod("/P", FIFO, 0),
                Op::Mknod("/D/c", CHR, 0x0103),
                Op::Link("/P", "/D/p2"),
                Op::Rename("/D/c", "/c"),
                Op::Chmod("/c", 0o640),
                Op::Unlink("/P"),
            ],
        ),
        seq(
            "posix-xattr",
            vec![
                Op::SetXattr("/A", "user.a", b"one"),
                Op::SetXattr("/A", "user.a", b"two"),
                Op::SetXattr("/D", "trusted.big", big),
                Op::RemoveXattr("/A", "user.a"),
                Op::SetXattr("/B", "security.s", b""),
            ],
        ),
        seq(
            "posix-exchange",
            vec![
                Op::Exchange("/A", "/B"),
                Op::Exchange("/B", "/D/x"),
                Op::Exchange("/D", "/A"),
                Op::Mkdir("/E"),
                Op::Exchange("/A/x", "/E"),
            ],
        ),
    ]
}

/// One operation followed by a sync of everything: after the sync returned
/// the operation must be there (the page models' planted bug shows here).
pub fn sync_tail_workloads() -> Vec<Workload> {
    [
        Op::Create("/C"),
        Op::Write("/A", 0, 4096, 0x12),
        Op::Append("/B", 3000, 0x14),
        Op::Truncate("/A", 1000),
        Op::Rename("/B", "/A"),
        Op::Unlink("/A"),
        Op::Mkdir("/F"),
    ]
    .into_iter()
    .enumerate()
    .map(|(i, op)| seq(&format!("synctail-{i}"), vec![op, Op::Sync]))
    .collect()
}

/// Writes, overwrites, creates and renames around fsyncs and syncs: what
/// a page cache may reorder.
pub fn durability_workloads() -> Vec<Workload> {
    let mut out = vec![
        // An extended attribute over several log slots, appended to a log
        // page an earlier sync made durable and committed by a one-barrier
        // fsync: a page torn in that barrier may hold part of the entry
        // under the new mark, which only the entry's checksum rejects.
        seq(
            "dur-long-xattr-fsync",
            vec![
                Op::SetXattr("/A", "user.big", LONG_VALUES[0]),
                Op::Fsync("/A"),
                Op::SetXattr("/A", "user.big", LONG_VALUES[1]),
                Op::Write("/A", 0, 100, 0x18),
                Op::Fsync("/A"),
            ],
        ),
        seq(
            "dur-overwrite",
            vec![
                Op::Write("/A", 0, 4096, 0x12),
                Op::Fsync("/A"),
                Op::Write("/A", 0, 4096, 0x16),
                Op::Write("/B", 0, 4096, 0x17),
            ],
        ),
        seq(
            "dur-create",
            vec![
                Op::Create("/C"),
                Op::Write("/C", 0, 6000, 0x18),
                Op::Fsync("/C"),
                Op::Append("/C", 3000, 0x18),
            ],
        ),
        seq(
            "dur-namespace",
            vec![
                Op::Create("/C"),
                Op::Rename("/B", "/A"),
                Op::Sync,
                Op::Unlink("/A"),
                Op::Mkdir("/F"),
            ],
        ),
        seq(
            "dur-truncate",
            vec![
                Op::Truncate("/A", 1000),
                Op::Fsync("/A"),
                Op::Write("/A", 100, 5000, 0x11),
                Op::Sync,
            ],
        ),
        seq(
            "dur-append",
            vec![
                Op::Append("/B", 3000, 0x14),
                Op::Fsync("/B"),
                Op::Append("/B", 5000, 0x17),
                Op::Truncate("/B", 20000),
                Op::Fsync("/B"),
            ],
        ),
        // Single-page overwrites of pages written before go in place once
        // the page's entry is settled; partial and whole pages, fdatasync
        // and fsync, then a new page and a full sync.
        seq(
            "dur-overwrite-in-place",
            vec![
                Op::Write("/A", 0, 4096, 0x12),
                Op::FsyncData("/A"),
                Op::Write("/A", 0, 4096, 0x16),
                Op::FsyncData("/A"),
                Op::Write("/A", 0, 4096, 0x1a),
                Op::FsyncData("/A"),
                Op::Write("/A", 300, 700, 0x1b),
                Op::Write("/B", 0, 4096, 0x17),
                Op::Fsync("/A"),
                Op::Write("/A", 0, 4096, 0x1c),
                Op::Sync,
                Op::Write("/A", 4096, 4096, 0x1d),
            ],
        ),
        // Pages first written copy-on-write after the setup's sync: an
        // overwrite of a page written twice settles its entry (a barrier
        // over the log page) before going in place; a page written once
        // stays copy-on-write.
        seq(
            "dur-settle-then-in-place",
            vec![
                Op::Write("/A", 4096, 8192, 0x1e),
                Op::FsyncData("/A"),
                Op::Write("/A", 4096, 4096, 0x1f),
                Op::Write("/A", 8192, 4096, 0x20),
                Op::FsyncData("/A"),
                Op::Write("/A", 8192, 100, 0x22),
                Op::Write("/A", 5000, 50, 0x23),
                Op::FsyncData("/A"),
            ],
        ),
        // Appends inside the page that holds the end go into that page's
        // block (`append_in_place`); a write past that page, a shrink into
        // it and a growing truncate copy it with its bytes past the end
        // zeroed. A power cut may drop an append whose bytes reached the
        // block: the explorer then also grows each file (`grow_files`).
        seq(
            "dur-append-in-place",
            vec![
                Op::Create("/C"),
                Op::Append("/C", 100, 0x30),
                Op::Fsync("/C"),
                Op::Append("/C", 200, 0x31),
                Op::Append("/C", 300, 0x32),
                Op::FsyncData("/C"),
                // An overwrite in place of the end's page, then an append
                // whose checksum must be of the bytes the page holds now.
                Op::Write("/C", 50, 20, 0x3b),
                Op::Write("/C", 60, 30, 0x3c),
                Op::Append("/C", 40, 0x3d),
                Op::Fsync("/C"),
                Op::Append("/C", 400, 0x33),
                Op::Write("/C", 9000, 10, 0x34),
                Op::Append("/C", 50, 0x35),
                Op::Fsync("/C"),
                Op::Truncate("/C", 1000),
                Op::Append("/C", 30, 0x36),
                Op::Truncate("/C", 20000),
                Op::Append("/B", 500, 0x37),
                Op::Fsync("/B"),
            ],
        ),
        // An append in place must not touch bytes a checksum recovery may
        // verify covers: a write into the middle of the end's page and a
        // shrink's copy of that page checksum all of it, and an fsync of
        // one barrier leaves them durable but unchecked (the append copies
        // the page instead).
        seq(
            "dur-append-after-checksummed-page",
            vec![
                Op::Truncate("/A", 1000),
                Op::Sync,
                Op::Write("/A", 0, 100, 0x38),
                Op::Fsync("/A"),
                Op::Append("/A", 50, 0x39),
                Op::Truncate("/A", 500),
                Op::Fsync("/A"),
                Op::Append("/A", 60, 0x3a),
            ],
        ),
        seq(
            "dur-unlink-reuse",
            vec![
                Op::Sync,
                Op::Unlink("/D/x"),
                Op::Create("/C"),
                Op::Write("/C", 0, 8192, 0x18),
                Op::Fsync("/C"),
            ],
        ),
    ];
    out.extend(regression_workloads());
    out.extend(sync_tail_workloads());
    out
}

/// Scenarios in which the page models once found engine bugs (each is also
/// among the durability workloads).
pub fn regression_workloads() -> Vec<Workload> {
    vec![
        // A long append from one CPU, then a small one into the same page
        // from another, then an fsync: the second copies the first's bytes
        // of the page it shares, and must not count without the first (it
        // goes to the first's sub-log; a power cut inside the fsync could
        // otherwise keep it alone and show the first write in part).
        seq(
            "dur-partial-page-from-two-cpus",
            vec![
                Op::on_cpu(0, Op::Append("/D/x", 5280, 0x40)),
                Op::on_cpu(1, Op::Append("/D/x", 190, 0x41)),
                Op::on_cpu(1, Op::Truncate("/D/x", 10000)),
                Op::Fsync("/D/x"),
            ],
        ),
        // A truncate from one CPU, then a write from another into a page
        // the truncate cut off, then an fsync: the write's page is zeros
        // where the truncate cut, so it must not count without the
        // truncate (it goes to the truncate's sub-log; a power cut inside
        // the fsync could otherwise keep it alone and show the file's
        // other pages at their old contents beside it: found by the random
        // tier workloads once their thread changed CPU). Both ways round,
        // since which sub-log takes attribute entries depends on the CPU
        // that loaded the inode.
        seq(
            "dur-write-after-truncate-from-another-cpu",
            vec![
                Op::on_cpu(0, Op::Truncate("/D/x", 0)),
                Op::on_cpu(1, Op::Write("/D/x", 5903, 1750, 0x42)),
                Op::Fsync("/D/x"),
                Op::on_cpu(1, Op::Truncate("/D/x", 100)),
                Op::on_cpu(0, Op::Write("/D/x", 4100, 300, 0x43)),
                Op::Fsync("/D/x"),
            ],
        ),
        // A setfacl from one CPU, then a chown from another, then an fsync:
        // the chown's attribute entry restates the mode the ACL set, so it
        // must not count without the ACL (every attribute entry goes to one
        // sub-log of the inode; a power cut inside the fsync could
        // otherwise show that mode without its ACL).
        seq(
            "dur-setfacl-then-chown-from-two-cpus",
            vec![
                Op::on_cpu(0, Op::SetXattr("/D/x", ACL_ACCESS, ACL_USER_1000_RW)),
                Op::on_cpu(1, Op::Chown("/D/x", 1001, 1001)),
                Op::Fsync("/D/x"),
            ],
        ),
        // A symlink's target is in its own log, its name in the directory's:
        // a sync must never make the name count without the target.
        seq(
            "dur-symlink-sync",
            vec![Op::Symlink("/D/x", "/D/s"), Op::Sync],
        ),
        // The same when only the directory is synced, by the fsync of a
        // file created next to the symlink.
        seq(
            "dur-symlink-fsync-sibling",
            vec![
                Op::Symlink("/A", "/D/s"),
                Op::Create("/D/n"),
                Op::Write("/D/n", 0, 100, 0x19),
                Op::Fsync("/D/n"),
            ],
        ),
        // A link into a directory, then a rename of that directory: two
        // unsynced changes to two directories, each whole or absent.
        seq(
            "dur-link-rename-dir",
            vec![Op::Link("/A", "/D/alink"), Op::Rename("/D", "/E"), Op::Sync],
        ),
        // A file and a directory written from a second CPU: their logs get
        // a log array naming the first sub-log's head (the record's word
        // named it directly), switched in with one store.
        seq(
            "dur-second-sublog",
            vec![
                Op::on_cpu(0, Op::Create("/N")),
                Op::on_cpu(0, Op::Write("/N", 0, 1, 0x1a)),
                Op::Fsync("/N"),
                Op::on_cpu(1, Op::Write("/N", 1, 100, 0x1b)),
                Op::on_cpu(1, Op::Create("/D/c1")),
                Op::Fsync("/N"),
                Op::on_cpu(0, Op::Write("/N", 4096, 10, 0x1c)),
                Op::Sync,
            ],
        ),
        // Cross-directory renames are redone at mount from the rename
        // journal: the record must never be durable before what it names
        // (a directory and a file created since the last sync).
        // A write past the end (a hole before it), then a whole-page write
        // below the new end into a settled page: in place only once the
        // extension is durable, else a power cut without it shows the
        // write cut at the old end (found by the random tier workloads).
        seq(
            "dur-in-place-below-unsynced-end",
            vec![
                Op::Write("/D/x", 11562, 79, 0x50),
                Op::Write("/D/x", 4096, 4096, 0x51),
                Op::Truncate("/D/x", 6000),
                Op::Write("/D/x", 0, 4096, 0x52),
            ],
        ),
        // A cross-directory rename over /A, then a rename in the root over
        // /A again, then a create synced by fdatasync (which syncs the root,
        // where the new name is): the journal still holds the first rename,
        // whose own root entry counted, so recovery must not redo it over
        // the newer rename (found by the random tier workloads).
        seq(
            "dur-rename-over-renamed-then-fdatasync-new",
            vec![
                Op::Rename("/D/x", "/A"),
                Op::Append("/B", 2871, 0x31),
                Op::Rename("/B", "/A"),
                Op::Create("/C"),
                Op::FsyncData("/C"),
            ],
        ),
        seq(
            "dur-rename-into-new-dir",
            vec![
                Op::Mkdir("/E"),
                Op::Rename("/A", "/E/a"),
                Op::Create("/D/n"),
                Op::Rename("/D/n", "/E/n"),
            ],
        ),
    ]
}

/// ACE-style workloads: each single operation, and each ordered pair, on
/// the populated tree; plus a few three-operation sequences.
pub fn ace_workloads() -> Vec<Workload> {
    let ops = single_ops();
    let mut out = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        out.push(Workload {
            name: format!("ace1-{i}"),
            pool_size: 512 << 10,
            setup: populated(),
            ops: vec![op.clone()],
            concurrent: None,
            member_bytes: 0,
            data_bytes: 0,
            must_stage: false,
        });
    }
    for (i, a) in ops.iter().enumerate() {
        for (j, b) in ops.iter().enumerate() {
            out.push(Workload {
                name: format!("ace2-{i}-{j}"),
                pool_size: 512 << 10,
                setup: populated(),
                ops: vec![a.clone(), b.clone()],
                concurrent: None,
                member_bytes: 0,
                data_bytes: 0,
                must_stage: false,
            });
        }
    }
    // Operations that trigger log compaction: the 65th attribute entry of a
    // file, and a directory whose log is mostly dead entries.
    let mut chmods = populated();
    for i in 0..64 {
        chmods.push(Op::Chmod("/A", 0o600 + (i % 8)));
    }
    out.push(Workload {
        name: "compact-file".into(),
        pool_size: 512 << 10,
        setup: chmods,
        ops: vec![
            Op::Chmod("/A", 0o640),
            Op::Write("/A", 4096, 100, 0x21),
            Op::Truncate("/A", 3000),
        ],
        concurrent: None,
        member_bytes: 0,
        data_bytes: 0,
        must_stage: false,
    });
    let mut churn = populated();
    // The shard of `k` (alone in it) then counts 65 log entries for its one
    // live name: not due (more than 4 x live + 64), but the removal of `k`
    // makes it 66 for none, and the first operation compacts /D's log.
    for _ in 0..32 {
        churn.push(Op::Create("/D/k"));
        churn.push(Op::Unlink("/D/k"));
    }
    churn.push(Op::Create("/D/k"));
    out.push(Workload {
        name: "compact-dir".into(),
        pool_size: 512 << 10,
        setup: churn,
        ops: vec![
            Op::Unlink("/D/k"),
            Op::Create("/D/u"),
            Op::Rename("/D/u", "/D/v"),
        ],
        concurrent: None,
        member_bytes: 0,
        data_bytes: 0,
        must_stage: false,
    });
    // From an empty pool: create, write, rename over, unlink.
    out.push(Workload {
        name: "ace3-empty".into(),
        pool_size: 512 << 10,
        setup: vec![],
        ops: vec![
            Op::Create("/n"),
            Op::Write("/n", 0, 6000, 1),
            Op::Mkdir("/d"),
            Op::Rename("/n", "/d/n"),
        ],
        concurrent: None,
        member_bytes: 0,
        data_bytes: 0,
        must_stage: false,
    });
    out
}

/// Random sequences of `len` operations over a small name space, each on
/// one of two CPUs drawn from a generator of its own (so which sub-log an
/// entry reaches follows from the workload, not from the scheduler).
pub fn random_workloads(seed: u64, count: usize, len: usize) -> Vec<Workload> {
    let ops = single_ops();
    let mut next = below(seed);
    let mut cpu = below(seed ^ 0x6370_7573);
    (0..count)
        .map(|k| {
            let seq = (0..len)
                .map(|_| ops[next(ops.len() as u64) as usize].clone())
                .map(|op| Op::on_cpu(cpu(2) as usize, op))
                .collect();
            Workload {
                name: format!("random{len}-{seed}-{k}"),
                pool_size: 512 << 10,
                setup: populated(),
                ops: seq,
                concurrent: None,
                member_bytes: 0,
                data_bytes: 0,
                must_stage: false,
            }
        })
        .collect()
}

/// Random sequences of `len` operations whose thread moves between CPUs:
/// each operation runs on a CPU drawn at random (modulo the CPUs this
/// process may use), so a write after a sync often comes from a CPU the
/// file's log has not seen yet (a new sub-log, a log array, a new slot
/// group) or from one whose sub-log holds synced entries. Four files of
/// the populated tree are created, written in whole pages (1 to 3) and in
/// part, truncated (to 0, 3000 or 6000 bytes: a write after a truncate
/// from another CPU), synced, unlinked and re-created; every write has a
/// tag of its own.
pub fn migrating_random_workloads(seed: u64, count: usize, len: usize) -> Vec<Workload> {
    let mut next = below(seed ^ 0x6d69_6772);
    on_random_cpus(
        "migrating",
        seed,
        count,
        len,
        8,
        0x30,
        &mut next,
        |next, tag| {
            let f = TIER_FILES[next(TIER_FILES.len() as u64) as usize];
            let op = match next(13) {
                0..=3 => Op::Write(f, next(4) * 4096, 4096 * (1 + next(3) as usize), *tag),
                4 => {
                    let page = next(4) * 4096;
                    small_write(&mut &mut *next, f, page, *tag)
                }
                5 => Op::Append(f, 1 + next(6000) as usize, *tag),
                6 | 7 => Op::Fsync(f),
                8 => Op::FsyncData(f),
                9 => Op::Unlink(f),
                10 => Op::Create(f),
                11 => Op::Truncate(f, next(3) * 3000),
                _ => Op::Sync,
            };
            if matches!(op, Op::Write(..) | Op::Append(..)) {
                *tag += 1;
            }
            op
        },
    )
}

/// `count` workloads named `{kind}{len}-{seed}-{k}` of `len` operations
/// each from `pick` (given the generator and the workload's next write
/// tag, from `first_tag`), each run on one of `cpus` CPUs drawn after it.
#[allow(clippy::too_many_arguments)]
fn on_random_cpus(
    kind: &str,
    seed: u64,
    count: usize,
    len: usize,
    cpus: u64,
    first_tag: u8,
    next: &mut impl FnMut(u64) -> u64,
    mut pick: impl FnMut(&mut dyn FnMut(u64) -> u64, &mut u8) -> Op,
) -> Vec<Workload> {
    (0..count)
        .map(|k| {
            let mut tag = first_tag;
            let ops = (0..len)
                .map(|_| {
                    let op = pick(next, &mut tag);
                    Op::on_cpu(next(cpus) as usize, op)
                })
                .collect();
            seq(&format!("{kind}{len}-{seed}-{k}"), ops)
        })
        .collect()
}

/// The POSIX access ACL attribute's name.
pub const ACL_ACCESS: &str = "system.posix_acl_access";

/// An access ACL (its `system.posix_acl_access` form: version 2, then
/// tag, permissions and id per entry): owner rw, user 1000 rw, owning
/// group r, mask rw, others nothing. Setting it sets the mode's group
/// bits to the mask (rw); a chmod then rewrites the mask.
pub const ACL_USER_1000_RW: &[u8] = &[
    2, 0, 0, 0, // version
    0x01, 0, 6, 0, 0xff, 0xff, 0xff, 0xff, // owner: rw
    0x02, 0, 6, 0, 0xe8, 0x03, 0, 0, // user 1000: rw
    0x04, 0, 4, 0, 0xff, 0xff, 0xff, 0xff, // owning group: r
    0x10, 0, 6, 0, 0xff, 0xff, 0xff, 0xff, // mask: rw
    0x20, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, // others: none
];

/// Two extended-attribute values of 300 bytes (an entry of several log
/// slots, which a torn page can split).
const LONG_VALUES: [&[u8]; 2] = [&[0x5a; 300], &[0xa5; 300]];

/// Random sequences of `len` attribute changes (mode, setuid and setgid
/// bits, owner, POSIX ACL set and removed, user xattrs, times) mixed with
/// small writes, `fsync`s and full syncs, over a file, a directory and a
/// file in it, each on a random CPU. The oracles compare every file's and
/// directory's mode, owner and extended attributes (the ACL among them)
/// with what the syncs made durable, each later change whole or absent.
pub fn attr_random_workloads(seed: u64, count: usize, len: usize) -> Vec<Workload> {
    const PATHS: [&str; 3] = ["/A", "/D", "/D/x"];
    const MODES: [u32; 6] = [0o600, 0o640, 0o4755, 0o2775, 0o755, 0o660];
    let mut next = below(seed ^ 0x6174_7472);
    on_random_cpus("attr", seed, count, len, 4, 0x60, &mut next, |next, tag| {
        let p = PATHS[next(PATHS.len() as u64) as usize];
        match next(14) {
            0..=2 => Op::Chmod(p, MODES[next(MODES.len() as u64) as usize]),
            3 => Op::Chown(p, 1000 + next(2) as u32, 1000 + next(2) as u32),
            4 | 5 => Op::SetXattr(p, ACL_ACCESS, ACL_USER_1000_RW),
            6 => Op::RemoveXattr(p, ACL_ACCESS),
            7 => Op::SetXattr(p, "user.k", if next(2) == 0 { b"v1" } else { b"v2" }),
            // A value over several 64-byte log slots.
            8 if next(2) == 0 => Op::SetXattr(p, "user.big", LONG_VALUES[next(2) as usize]),
            8 => Op::Utimes(p, 1_000_000 + next(1000)),
            9 if p != "/D" => {
                *tag += 1;
                Op::Write(p, next(8000), 1 + next(200) as usize, *tag)
            }
            9 | 10 => Op::Sync,
            _ if p == "/D" => Op::Sync,
            _ => Op::Fsync(p),
        }
    })
}

/// Concurrent writers on one file, each in its own region of blocks.
#[derive(Debug, Clone)]
pub struct Concurrent {
    /// Writer threads.
    pub threads: u64,
    /// Writes per thread.
    pub writes: u64,
    /// Blocks per thread's region.
    pub region: u64,
}

const BLOCK: usize = 4096;

impl Concurrent {
    fn plan(&self, t: u64, seq: u64) -> (u64, u64) {
        let h =
            (t + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ seq.wrapping_mul(0xbf58_476d_1ce4_e5b9);
        let n = 1 + (h >> 7) % 2;
        let first = (h >> 17) % (self.region - n + 1);
        (first, n)
    }

    fn fill(t: u64, seq: u64, first: u64, buf: &mut [u8]) {
        for (i, b) in buf.chunks_mut(BLOCK).enumerate() {
            b[..8].copy_from_slice(&(t + 1).to_le_bytes());
            b[8..16].copy_from_slice(&seq.to_le_bytes());
            b[16..24].copy_from_slice(&(first + i as u64).to_le_bytes());
            for (j, x) in b[24..].iter_mut().enumerate() {
                *x = (seq as usize * 3 + j + t as usize) as u8;
            }
        }
    }

    /// Run the writers; returns the number of writes.
    pub fn run(&self, fs: &Fs) -> Result<u64> {
        let f = OpenOptions::new().read(true).write(true).open(fs, "/c")?;
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..self.threads)
                .map(|t| {
                    let f = &f;
                    s.spawn(move || -> Result<()> {
                        for seq in 1..=self.writes {
                            let (first, n) = self.plan(t, seq);
                            let mut buf = vec![0u8; n as usize * BLOCK];
                            Self::fill(t, seq, first, &mut buf);
                            f.write_at(&buf, (t * self.region + first) * BLOCK as u64)?;
                            manyfs::diag::note(fs, WRITE_RETURNED | (t << 32) | seq);
                        }
                        Ok(())
                    })
                })
                .collect();
            for h in handles {
                h.join().expect("writer")?;
            }
            Ok::<(), manyfs::Error>(())
        })?;
        Ok(self.threads * self.writes)
    }

    /// Every block is a whole write (or never written), no older than the
    /// newest write that had returned.
    pub fn check(
        &self,
        fs: &Fs,
        returned: &std::collections::HashSet<u64>,
    ) -> std::result::Result<(), String> {
        let data = fs.read("/c").map_err(|e| format!("read: {e}"))?;
        for t in 0..self.threads {
            let mut newest = vec![0u64; self.region as usize];
            for seq in 1..=self.writes {
                if returned.contains(&((t << 32) | seq)) {
                    let (first, n) = self.plan(t, seq);
                    for b in first..first + n {
                        newest[b as usize] = newest[b as usize].max(seq);
                    }
                }
            }
            for b in 0..self.region {
                let at = ((t * self.region + b) as usize) * BLOCK;
                let blk = data.get(at..at + BLOCK).ok_or("file too short")?;
                let w = |k: usize| u64::from_le_bytes(blk[k * 8..k * 8 + 8].try_into().expect("8"));
                if w(0) == 0 {
                    if blk.iter().any(|&x| x != 0) {
                        return Err(format!("thread {t} block {b}: torn (no header, data)"));
                    }
                    if newest[b as usize] != 0 {
                        return Err(format!(
                            "thread {t} block {b}: returned write {} lost",
                            newest[b as usize]
                        ));
                    }
                    continue;
                }
                let (th, seq, idx) = (w(0) - 1, w(1), w(2));
                if th != t || idx != b {
                    return Err(format!(
                        "thread {t} block {b}: holds block {idx} of thread {th}"
                    ));
                }
                if blk[24..]
                    .iter()
                    .enumerate()
                    .any(|(j, &x)| x != (seq as usize * 3 + j + t as usize) as u8)
                {
                    return Err(format!("thread {t} block {b}: torn write {seq}"));
                }
                if seq < newest[b as usize] {
                    return Err(format!(
                        "thread {t} block {b}: has write {seq}, write {} had returned",
                        newest[b as usize]
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Concurrent-writer workloads.
pub fn concurrent_workloads() -> Vec<Workload> {
    (0..3)
        .map(|k| Workload {
            name: format!("concurrent-{k}"),
            pool_size: 1 << 20,
            setup: vec![Op::Create("/c"), Op::Truncate("/c", 3 * 6 * 4096)],
            ops: vec![],
            concurrent: Some(Concurrent {
                threads: 3,
                writes: 4 + k,
                region: 6,
            }),
            member_bytes: 0,
            data_bytes: 0,
            must_stage: false,
        })
        .collect()
}

/// Member 0's size in [`member_workloads`].
pub const MEMBER0_BYTES: u64 = 192 << 10;
/// Member 1's size in [`member_workloads`].
pub const MEMBER1_BYTES: u64 = 256 << 10;

/// The setup of [`member_workloads`]: the populated tree and a file as
/// large as member 0, so that member 0 fills and later blocks (data and
/// log pages of the operation under test) come from member 1.
pub fn member_setup() -> Vec<Op> {
    let mut v = populated();
    v.push(Op::Create("/M"));
    v.push(Op::Write("/M", 0, MEMBER0_BYTES as usize, 0xE1));
    v
}

/// Workloads on a pool of two members (the pool file of
/// [`MEMBER0_BYTES`] and `m1` of [`MEMBER1_BYTES`]): every single
/// operation after [`member_setup`].
pub fn member_workloads() -> Vec<Workload> {
    single_ops()
        .into_iter()
        .enumerate()
        .map(|(i, op)| Workload {
            name: format!("members-ace1-{i}"),
            pool_size: MEMBER0_BYTES,
            setup: member_setup(),
            ops: vec![op],
            concurrent: None,
            member_bytes: MEMBER1_BYTES,
            data_bytes: 0,
            must_stage: false,
        })
        .collect()
}

/// Bytes of the data device of [`tier_workloads`] (a header and 127 data
/// blocks).
pub const TIER_DATA_BYTES: u64 = 512 << 10;

/// Tiered pools (file data on a data device beside the pool): every single
/// operation and the durability workloads (writes, overwrites in place,
/// appends and truncates around fsyncs and syncs), for the page-cache
/// model over the pool and the volatile-cache model over the device.
pub fn tier_workloads() -> Vec<Workload> {
    let tiered = |mut w: Workload| {
        w.name = format!("tier-{}", w.name);
        w.data_bytes = TIER_DATA_BYTES;
        w
    };
    let mut out: Vec<Workload> = durability_workloads().into_iter().map(tiered).collect();
    out.extend(sync_tail_workloads().into_iter().map(tiered));
    out.push(tiered(Workload {
        must_stage: true,
        ..staged_workload()
    }));
    out.extend(
        single_ops()
            .into_iter()
            .enumerate()
            .map(|(i, op)| tiered(seq(&format!("ace1-{i}"), vec![op, Op::Fsync("/A")]))),
    );
    out
}

/// Small writes to a synced file, staged in the pool of a tiered `pm`
/// pool (`inode/staging.rs`; the page model's `file`-mode pool writes them to
/// the device): overwrites and a sub-page write, each `fsync`ed, unsynced
/// overwrites (the second one's new block may be one the first superseded,
/// were that freed before a sync), a destaging pass that moves them all to
/// the device, then staged writes again over destaged pages.
fn staged_workload() -> Workload {
    seq(
        "staged",
        vec![
            Op::Write("/A", 0, 4096, 0x31),
            Op::Fsync("/A"),
            Op::Write("/A", 0, 4096, 0x32),
            Op::Fsync("/A"),
            Op::Write("/A", 4096 + 100, 300, 0x33),
            Op::FsyncData("/A"),
            Op::Write("/A", 0, 8192, 0x34),
            Op::Write("/A", 100, 200, 0x37),
            Op::Destage,
            Op::Write("/A", 2048, 4096, 0x35),
            Op::Fsync("/A"),
            Op::Write("/A", 0, 100, 0x36),
        ],
    )
}

/// Every tiered workload, ordered so that a run cut short by an image
/// budget still covers each kind: [`tier_workloads`], concurrent writers,
/// then random sequences of six operations alternating with random
/// sequences of eight that stage ([`tier_staged_random_workloads`]), then
/// random sequences of ten operations ([`tier_random_workloads`]).
pub fn tier_standard_workloads(seed: u64) -> Vec<Workload> {
    let mut out = tier_workloads();
    out.extend(tier_concurrent_workloads());
    let plain = tier_random_workloads(seed, 400, 6);
    let staged = tier_staged_random_workloads(seed.wrapping_add(2), 400, 8);
    for (a, b) in plain.into_iter().zip(staged) {
        out.push(a);
        out.push(b);
    }
    out.extend(tier_random_workloads(seed.wrapping_add(1), 2000, 10));
    out
}

/// The files of the random tiered workloads.
const TIER_FILES: [&str; 4] = ["/A", "/B", "/C", "/D/x"];

/// Random tiered workloads: `count` sequences of `len` operations over four
/// files of the populated tree (`/A`, `/B`, `/C`, `/D/x`), mixing
/// single-page overwrites (in place once a page is settled), multi-page
/// writes, writes past the end (holes), appends, truncates, `fsync`,
/// `fdatasync`, unlinks and re-creates (whose freed device blocks later
/// writes reuse after a full sync) and full syncs. Every write has a tag
/// of its own, so bytes of any other write, of any file, are foreign.
/// Each operation runs on one of two CPUs drawn from a generator of its
/// own, as in [`tier_staged_random_workloads`].
pub fn tier_random_workloads(seed: u64, count: usize, len: usize) -> Vec<Workload> {
    const SIZES: [u64; 6] = [0, 100, 1000, 4096, 5000, 12288];
    let mut next = below(seed);
    let mut cpu = below(seed ^ 0x6370_7573);
    (0..count)
        .map(|k| {
            // Tags 0x30.. are this workload's own: the setup uses 0xA1,
            // 0xB1 and 0xD1.
            let mut tag = 0x30u8;
            let mut ops = Vec::with_capacity(len);
            while ops.len() < len {
                let f = TIER_FILES[next(TIER_FILES.len() as u64) as usize];
                let page = next(4) * 4096;
                let op = match next(16) {
                    // A small overwrite inside one page (in place where
                    // the page is settled), or a whole page.
                    0..=2 => small_write(&mut next, f, page, tag),
                    3 => Op::Write(f, page, 4096, tag),
                    // Across pages, or past the end (a hole before it).
                    4 => Op::Write(f, page + next(4096), 4096 + next(8192) as usize, tag),
                    5 => Op::Write(f, 16384 + next(8192), 1 + next(6000) as usize, tag),
                    6 | 7 => Op::Append(f, 1 + next(6000) as usize, tag),
                    8 => Op::Truncate(f, SIZES[next(SIZES.len() as u64) as usize]),
                    9 | 10 => Op::Fsync(f),
                    11 => Op::FsyncData(f),
                    12 => Op::Unlink(f),
                    13 => Op::Create(f),
                    14 if next(2) == 0 => Op::Sync,
                    14 => Op::Destage,
                    _ => Op::Rename(f, TIER_FILES[next(TIER_FILES.len() as u64) as usize]),
                };
                if matches!(op, Op::Write(..) | Op::Append(..)) {
                    tag += 1;
                }
                ops.push(op);
            }
            let ops = ops
                .into_iter()
                .map(|op| Op::on_cpu(cpu(2) as usize, op))
                .collect();
            tier_random(format!("tier-random{len}-{seed}-{k}"), ops)
        })
        .collect()
}

/// Random tiered workloads that stage: `count` sequences of `len`
/// operations over the three files of the populated tree (`/A`, `/B`,
/// `/D/x`; renames may also name `/C`). Each starts with a small write
/// and an `fsync` of one file (after which its small writes are staged in
/// the pool of a `pm` pool, `inode/staging.rs`), then stays on the file of
/// the operation before three times in four, so that small writes,
/// `fsync`s and `fdatasync`s of one file follow each other: staged writes
/// over staged and over device pages, their superseded pool blocks freed
/// by the next sync and reused, destaging, and between them appends,
/// truncates, unlinks, re-creates, renames and full syncs. Each operation
/// runs on one of two CPUs drawn from a generator of its own (the
/// sequences are those of the seed either way): which sub-log an entry
/// goes to then follows from the workload, not from where the scheduler
/// happened to run the explorer's thread.
pub fn tier_staged_random_workloads(seed: u64, count: usize, len: usize) -> Vec<Workload> {
    // The files of the populated tree (`/C` only after a create or a
    // rename).
    const FILES: [&str; 3] = ["/A", "/B", "/D/x"];
    let mut next = below(seed);
    let mut cpu = below(seed ^ 0x6370_7573);
    (0..count)
        .map(|k| {
            let mut tag = 0x30u8;
            let mut f = FILES[next(FILES.len() as u64) as usize];
            let page = next(2) * 4096;
            let mut ops = vec![small_write(&mut next, f, page, tag), Op::Fsync(f)];
            tag += 1;
            while ops.len() < len {
                if next(4) == 0 {
                    f = FILES[next(FILES.len() as u64) as usize];
                }
                let page = next(3) * 4096;
                let op = match next(16) {
                    0..=3 => small_write(&mut next, f, page, tag),
                    4 => Op::Write(f, page, 4096, tag),
                    5 => Op::Write(f, page + next(4096), 4096 + next(4096) as usize, tag),
                    6 => Op::Append(f, 1 + next(3000) as usize, tag),
                    7..=9 => Op::Fsync(f),
                    10 => Op::FsyncData(f),
                    11 => Op::Truncate(f, next(3) * 2000),
                    12 => Op::Destage,
                    13 if next(2) == 0 => Op::Sync,
                    13 => Op::Unlink(f),
                    14 => Op::Create(f),
                    _ => Op::Rename(f, TIER_FILES[next(TIER_FILES.len() as u64) as usize]),
                };
                if matches!(op, Op::Write(..) | Op::Append(..)) {
                    tag += 1;
                }
                ops.push(op);
            }
            let ops = ops
                .into_iter()
                .map(|op| Op::on_cpu(cpu(2) as usize, op))
                .collect();
            tier_random(format!("tier-staged-random{len}-{seed}-{k}"), ops)
        })
        .collect()
}

/// A generator of random numbers below `n` whose choices follow from
/// `seed` ([`Rng`]).
fn below(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut rng = Rng::seeded(seed);
    move |n: u64| rng.below(n)
}

/// A write of 1 to 4096 bytes inside the page at `page` of `f`.
fn small_write(next: &mut impl FnMut(u64) -> u64, f: &'static str, page: u64, tag: u8) -> Op {
    let off = page + next(4000);
    Op::Write(f, off, 1 + next(4096 - off % 4096) as usize, tag)
}

/// A random tiered workload on the populated tree.
fn tier_random(name: String, ops: Vec<Op>) -> Workload {
    Workload {
        name,
        pool_size: 512 << 10,
        setup: populated(),
        ops,
        concurrent: None,
        member_bytes: 0,
        data_bytes: TIER_DATA_BYTES,
        must_stage: false,
    }
}

/// Concurrent writers on a tiered pool: the writers of
/// [`concurrent_workloads`], their blocks on the data device.
pub fn tier_concurrent_workloads() -> Vec<Workload> {
    concurrent_workloads()
        .into_iter()
        .map(|mut w| {
            w.name = format!("tier-{}", w.name);
            w.data_bytes = TIER_DATA_BYTES;
            w
        })
        .collect()
}
