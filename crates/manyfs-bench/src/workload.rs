//! The FxMark workloads (of the SRL-NOVA (segment range lock) paper), HACC-IO's N-to-1 checkpoint, a
//! read/write mix and the memory-bandwidth reference.
//!
//! Every data operation moves one 4 KiB block through a page-aligned buffer
//! (HACCIO moves 1 MiB records). A workload is prepared once per measured
//! point: [`Workload::prepare`] builds the files it needs and returns one
//! [`Op`] per thread; the runner then calls [`Op::run`] in a loop.

use crate::backend::{Backend, BenchFile, Open, read_full, write_full};
use crate::sys::AlignedBuf;
use crate::{BenchError, Result};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// Size of one data operation.
pub const BLOCK: usize = 4096;
/// Size of each thread's region of a shared file (DRBM, DWOM, MIX, HACCIO
/// partitions are at least this far apart).
pub const REGION: u64 = 8 << 20;
/// One HACCIO record.
pub const HACC_RECORD: usize = 1 << 20;
/// One DRFL read (and its file's size).
pub const DRFL_READ: usize = 1 << 20;
/// HACCIO partition per thread.
pub const HACC_PARTITION: u64 = 8 << 20;
/// A private append file is cut back to zero when it reaches this size.
pub const APPEND_CAP: u64 = 4 << 20;
/// Size a DWTL file is refilled to.
pub const TRUNC_FILL: usize = 1 << 20;
/// Files created (MWCL/MWCM) or removed (MWUL/MWUM) per thread before the
/// batch is cleaned up or refilled.
pub const META_BATCH: usize = 1000;
/// Entries in each directory listed by MRDL/MRDM.
pub const READDIR_ENTRIES: usize = 64;
/// Blocks of its region each MIX thread cycles over (and each PMIX
/// thread writes).
pub const MIX_BLOCKS: u64 = 16;
/// Blocks each PMIX thread reads, written once before the run (1 MiB):
/// a separate range from the blocks it writes, so that its reads stay on
/// the node the data was first written to, whatever node its writes go to.
pub const PMIX_READ_BLOCKS: u64 = 256;

/// One benchmark workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Workload {
    /// Read a block of a private file.
    Drbl,
    /// Read the first block of the thread's own region of a shared file.
    Drbm,
    /// All threads read the same block of a shared file.
    Drbh,
    /// Overwrite a block of a private file.
    Dwol,
    /// Overwrite the first block of the thread's own region of a shared file.
    Dwom,
    /// Append a block to a private file.
    Dwal,
    /// Truncate a private file by one block; refill when empty.
    Dwtl,
    /// Overwrite a block of a private file and `fsync` it (FxMark's
    /// DWSL: the journal commit of a kernel file system).
    Dwsl,
    /// Create empty files in a private directory.
    Mwcl,
    /// Create empty files in a shared directory.
    Mwcm,
    /// Unlink files in a private directory.
    Mwul,
    /// Unlink files in a shared directory.
    Mwum,
    /// Rename a file within a private directory.
    Mwrl,
    /// Rename a file within a shared directory.
    Mwrm,
    /// Resolve (stat) a path five levels deep, private per thread.
    Mrpl,
    /// Resolve (stat) the same path five levels deep from every thread.
    Mrpm,
    /// List a private directory.
    Mrdl,
    /// List a shared directory.
    Mrdm,
    /// Reads and writes in the ratio `reads:writes` on disjoint regions of a
    /// shared file.
    Mix {
        /// Reads per cycle.
        reads: u32,
        /// Writes per cycle.
        writes: u32,
    },
    /// Reads and writes in the ratio `reads:writes` on a private file per
    /// thread: reads cycle over [`PMIX_READ_BLOCKS`] blocks written before
    /// the run, writes over [`MIX_BLOCKS`] others (the NThread paper's fio
    /// mixes, Fig. 5).
    Pmix {
        /// Reads per cycle.
        reads: u32,
        /// Writes per cycle.
        writes: u32,
    },
    /// N-to-1 checkpoint: each thread writes its partition of a shared file
    /// in 1 MiB records, then reads it back and verifies it.
    HaccIo,
    /// Read a private 1 MiB file in one call, whose 4 KiB blocks were
    /// written one at a time in turn with another file's (so, on a file
    /// system that allocates in write order, none is next to the next):
    /// one large read of scattered blocks.
    Drfl,
    /// Reference: 4 KiB copies into a large memory buffer.
    MemWrite,
    /// Reference: 4 KiB copies out of a large memory buffer.
    MemRead,
    /// Reference: 4 KiB copies into one cache-resident block per thread
    /// (the upper bound for workloads that rewrite one block).
    MemWriteHot,
    /// Reference: 4 KiB copies out of one cache-resident block per thread.
    MemReadHot,
}

impl Workload {
    /// Every file-system workload (MIX with 3:1 and 1:3), in report order.
    pub const FS_ALL: [Workload; 22] = [
        Workload::Dwom,
        Workload::Drbm,
        Workload::Dwol,
        Workload::Drbl,
        Workload::HaccIo,
        Workload::Mix {
            reads: 3,
            writes: 1,
        },
        Workload::Mix {
            reads: 1,
            writes: 3,
        },
        Workload::Drbh,
        Workload::Dwal,
        Workload::Dwtl,
        Workload::Dwsl,
        Workload::Mwcl,
        Workload::Mwcm,
        Workload::Mwul,
        Workload::Mwum,
        Workload::Mwrl,
        Workload::Mwrm,
        Workload::Mrpl,
        Workload::Mrpm,
        Workload::Mrdl,
        Workload::Mrdm,
        Workload::Drfl,
    ];

    /// The default set of `manyfs bench`: the six headline workloads (the
    /// first six of [`Workload::FS_ALL`]).
    pub fn headline() -> Vec<Workload> {
        Self::FS_ALL[..6].to_vec()
    }

    /// Every file-system workload.
    pub fn all_fs() -> Vec<Workload> {
        Self::FS_ALL.to_vec()
    }

    /// True for the memory-bandwidth reference workloads.
    pub fn is_memory(self) -> bool {
        matches!(
            self,
            Workload::MemWrite | Workload::MemRead | Workload::MemWriteHot | Workload::MemReadHot
        )
    }

    /// The memory-reference workloads, in report order.
    pub const MEMORY: [Workload; 4] = [
        Workload::MemWrite,
        Workload::MemRead,
        Workload::MemWriteHot,
        Workload::MemReadHot,
    ];

    /// True when the workload moves data (so bytes/s is meaningful).
    pub fn moves_data(self) -> bool {
        !matches!(
            self,
            Workload::Mwcl
                | Workload::Mwcm
                | Workload::Mwul
                | Workload::Mwum
                | Workload::Mwrl
                | Workload::Mwrm
                | Workload::Mrpl
                | Workload::Mrpm
                | Workload::Mrdl
                | Workload::Mrdm
                | Workload::Dwtl
        )
    }

    /// True when the operation writes (for matching against the memory
    /// write or read row).
    pub fn writes(self) -> bool {
        matches!(
            self,
            Workload::Dwol
                | Workload::Dwom
                | Workload::Dwal
                | Workload::Dwsl
                | Workload::MemWrite
                | Workload::MemWriteHot
        )
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Workload::Drbl => "DRBL",
            Workload::Drbm => "DRBM",
            Workload::Drbh => "DRBH",
            Workload::Dwol => "DWOL",
            Workload::Dwom => "DWOM",
            Workload::Dwal => "DWAL",
            Workload::Dwtl => "DWTL",
            Workload::Dwsl => "DWSL",
            Workload::Mwcl => "MWCL",
            Workload::Mwcm => "MWCM",
            Workload::Mwul => "MWUL",
            Workload::Mwum => "MWUM",
            Workload::Mwrl => "MWRL",
            Workload::Mwrm => "MWRM",
            Workload::Mrpl => "MRPL",
            Workload::Mrpm => "MRPM",
            Workload::Mrdl => "MRDL",
            Workload::Mrdm => "MRDM",
            Workload::Mix { reads, writes } => return write!(f, "MIX:{reads}:{writes}"),
            Workload::Pmix { reads, writes } => return write!(f, "PMIX:{reads}:{writes}"),
            Workload::HaccIo => "HACCIO",
            Workload::Drfl => "DRFL",
            Workload::MemWrite => "MEM-W",
            Workload::MemRead => "MEM-R",
            Workload::MemWriteHot => "MEMHOT-W",
            Workload::MemReadHot => "MEMHOT-R",
        };
        f.write_str(s)
    }
}

impl FromStr for Workload {
    type Err = BenchError;
    fn from_str(s: &str) -> Result<Self> {
        let u = s.trim().to_ascii_uppercase();
        if let Some(rest) = u.strip_prefix("PMIX") {
            let (reads, writes) = parse_ratio(s, "PMIX", rest)?;
            return Ok(Workload::Pmix { reads, writes });
        }
        if let Some(rest) = u.strip_prefix("MIX") {
            let (reads, writes) = parse_ratio(s, "MIX", rest)?;
            return Ok(Workload::Mix { reads, writes });
        }
        let all = Workload::all_fs().into_iter().chain(Workload::MEMORY);
        for w in all {
            if w.to_string() == u {
                return Ok(w);
            }
        }
        if u == "HACC" || u == "HACC-IO" {
            return Ok(Workload::HaccIo);
        }
        Err(BenchError::InvalidArgument(format!(
            "unknown workload {s:?} (DRBL DRBM DRBH DWOL DWOM DWAL DWTL DWSL MWCL MWCM MWUL MWUM \
             MWRL MWRM MRPL MRPM MRDL MRDM DRFL MIX:R:W PMIX:R:W HACCIO)"
        )))
    }
}

/// The largest `--stride`: 64 threads' blocks stay below 1 TiB.
pub const MAX_STRIDE: u64 = 16 << 30;

/// A DRBM/DWOM stride must be a positive multiple of [`BLOCK`] (threads'
/// blocks never overlap and stay page-aligned) and at most
/// [`MAX_STRIDE`].
pub fn check_stride(stride: u64) -> Result<()> {
    if stride == 0 || !stride.is_multiple_of(BLOCK as u64) || stride > MAX_STRIDE {
        return Err(BenchError::InvalidArgument(format!(
            "stride {stride} bytes: must be a positive multiple of {BLOCK} and at most {MAX_STRIDE}"
        )));
    }
    Ok(())
}

/// The `READS:WRITES` ratio after a `MIX` or `PMIX` (`name`) in workload
/// `s`: `rest` is what follows the name; empty means 3:1.
fn parse_ratio(s: &str, name: &str, rest: &str) -> Result<(u32, u32)> {
    let bad = |why: &str| BenchError::InvalidArgument(format!("workload {s:?}{why}"));
    let parts: Vec<&str> = rest.trim_start_matches(':').split(':').collect();
    let (reads, writes): (u32, u32) = match parts.as_slice() {
        [""] => (3, 1),
        [r, w] => (
            r.parse().map_err(|_| bad(""))?,
            w.parse().map_err(|_| bad(""))?,
        ),
        _ => return Err(bad(&format!(" (expected {name}:READS:WRITES)"))),
    };
    if reads.checked_add(writes).is_none_or(|n| n == 0) {
        return Err(bad(": ratio must not be 0:0"));
    }
    Ok((reads, writes))
}

/// One thread's share of a workload.
pub trait Op: Send {
    /// Do one operation; returns the bytes it moved.
    fn run(&mut self) -> Result<u64>;
}

/// A per-thread fill pattern: every 8-byte word of a block says who wrote it.
fn stamp(buf: &mut [u8], thread: usize, record: u64, round: u64) {
    let tag = ((thread as u64) << 48) ^ (record << 24) ^ round ^ 0x5a5a_0000_0000_0000;
    for (i, w) in buf.chunks_exact_mut(8).enumerate() {
        w.copy_from_slice(&(tag.wrapping_add(i as u64 / 512)).to_le_bytes());
    }
}

fn block_buf(thread: usize) -> AlignedBuf {
    let mut b = AlignedBuf::new(BLOCK);
    stamp(&mut b, thread, 0, 0);
    b
}

/// What a [`BlockIo`] does with its block.
#[derive(Clone, Copy, PartialEq, Eq)]
enum BlockOp {
    Read,
    Write,
    /// Write, then `fsync` (DWSL).
    WriteSync,
}

/// One 4 KiB read or write at a fixed offset of a file.
struct BlockIo {
    file: Arc<dyn BenchFile>,
    off: u64,
    buf: AlignedBuf,
    op: BlockOp,
}

impl BlockIo {
    fn boxed(file: Arc<dyn BenchFile>, off: u64, buf: AlignedBuf, op: BlockOp) -> Box<dyn Op> {
        Box::new(BlockIo { file, off, buf, op })
    }
}

impl Op for BlockIo {
    fn run(&mut self) -> Result<u64> {
        if self.op == BlockOp::Read {
            read_full(&*self.file, &mut self.buf, self.off)?;
        } else {
            write_full(&*self.file, &self.buf, self.off)?;
            if self.op == BlockOp::WriteSync {
                self.file.sync_all()?;
            }
        }
        Ok(BLOCK as u64)
    }
}

struct Append {
    file: Arc<dyn BenchFile>,
    len: u64,
    buf: AlignedBuf,
}

impl Op for Append {
    fn run(&mut self) -> Result<u64> {
        if self.len >= APPEND_CAP {
            self.file.set_len(0)?;
            self.len = 0;
        }
        self.file.append(&self.buf)?;
        self.len += BLOCK as u64;
        Ok(BLOCK as u64)
    }
}

struct Truncate {
    file: Arc<dyn BenchFile>,
    len: u64,
    fill: AlignedBuf,
}

impl Op for Truncate {
    fn run(&mut self) -> Result<u64> {
        if self.len == 0 {
            write_full(&*self.file, &self.fill, 0)?;
            self.len = TRUNC_FILL as u64;
        }
        self.len -= BLOCK as u64;
        self.file.set_len(self.len)?;
        Ok(0)
    }
}

/// MWC*/MWU*: create (or remove) the files `prefix0..prefixN` one per op;
/// after a batch of [`META_BATCH`], remove (or recreate) them all.
struct CreateOrUnlink {
    be: Arc<dyn Backend>,
    prefix: String,
    next: usize,
    create: bool,
}

impl CreateOrUnlink {
    /// Create (`create` true) or remove file `i` of the batch.
    fn touch(&self, i: usize, create: bool) -> Result<()> {
        let name = format!("{}{i}", self.prefix);
        if create {
            self.be.create_file(&name)
        } else {
            self.be.remove_file(&name)
        }
    }

    /// Undo the whole batch: the state the next batch starts from.
    fn reset(&mut self) -> Result<()> {
        for i in 0..META_BATCH {
            self.touch(i, !self.create)?;
        }
        self.next = 0;
        Ok(())
    }
}

impl Op for CreateOrUnlink {
    fn run(&mut self) -> Result<u64> {
        if self.next == META_BATCH {
            self.reset()?;
        }
        self.touch(self.next, self.create)?;
        self.next += 1;
        Ok(0)
    }
}

struct Rename {
    be: Arc<dyn Backend>,
    prefix: String,
    generation: u64,
}

impl Op for Rename {
    fn run(&mut self) -> Result<u64> {
        let from = format!("{}{}", self.prefix, self.generation);
        let to = format!("{}{}", self.prefix, self.generation + 1);
        self.be.rename(&from, &to)?;
        self.generation += 1;
        Ok(0)
    }
}

struct Stat {
    be: Arc<dyn Backend>,
    path: String,
}

impl Op for Stat {
    fn run(&mut self) -> Result<u64> {
        self.be.stat(&self.path)?;
        Ok(0)
    }
}

struct ReadDir {
    be: Arc<dyn Backend>,
    path: String,
    expect: usize,
}

impl Op for ReadDir {
    fn run(&mut self) -> Result<u64> {
        let n = self.be.read_dir(&self.path)?;
        if n < self.expect {
            return Err(BenchError::Verify(format!(
                "{} lists {n} entries, expected at least {}",
                self.path, self.expect
            )));
        }
        Ok(0)
    }
}

struct Mix {
    file: Arc<dyn BenchFile>,
    base: u64,
    reads: u32,
    cycle: u32,
    k: u64,
    buf: AlignedBuf,
}

impl Op for Mix {
    fn run(&mut self) -> Result<u64> {
        let off = self.base + (self.k % MIX_BLOCKS) * BLOCK as u64;
        let read = (self.k % self.cycle as u64) < self.reads as u64;
        self.k += 1;
        if read {
            read_full(&*self.file, &mut self.buf, off)?;
        } else {
            write_full(&*self.file, &self.buf, off)?;
        }
        Ok(BLOCK as u64)
    }
}

/// A private-file mix: reads over the read blocks, writes over the others.
struct PrivateMix {
    file: Arc<dyn BenchFile>,
    reads: u32,
    cycle: u32,
    /// Operations so far, reads so far, writes so far.
    k: u64,
    kr: u64,
    kw: u64,
    buf: AlignedBuf,
}

impl Op for PrivateMix {
    fn run(&mut self) -> Result<u64> {
        let read = (self.k % self.cycle as u64) < self.reads as u64;
        self.k += 1;
        if read {
            let off = (self.kr % PMIX_READ_BLOCKS) * BLOCK as u64;
            self.kr += 1;
            read_full(&*self.file, &mut self.buf, off)?;
        } else {
            let off = (PMIX_READ_BLOCKS + self.kw % MIX_BLOCKS) * BLOCK as u64;
            self.kw += 1;
            write_full(&*self.file, &self.buf, off)?;
        }
        Ok(BLOCK as u64)
    }
}

/// HACC-IO style checkpoint/restart of one partition of a shared file.
/// DRFL: one read of a whole scattered file.
struct ScatteredRead {
    file: Arc<dyn BenchFile>,
    buf: AlignedBuf,
}

impl Op for ScatteredRead {
    fn run(&mut self) -> Result<u64> {
        read_full(&*self.file, &mut self.buf, 0)?;
        Ok(DRFL_READ as u64)
    }
}

struct Hacc {
    file: Arc<dyn BenchFile>,
    thread: usize,
    base: u64,
    records: u64,
    /// 0..records: writing record i; records..2*records: reading back.
    step: u64,
    round: u64,
    buf: AlignedBuf,
    expect: AlignedBuf,
}

impl Op for Hacc {
    fn run(&mut self) -> Result<u64> {
        if self.step < self.records {
            let r = self.step;
            stamp(&mut self.buf, self.thread, r, self.round);
            write_full(&*self.file, &self.buf, self.base + r * HACC_RECORD as u64)?;
        } else {
            let r = self.step - self.records;
            let off = self.base + r * HACC_RECORD as u64;
            read_full(&*self.file, &mut self.buf, off)?;
            stamp(&mut self.expect, self.thread, r, self.round);
            if self.buf[..] != self.expect[..] {
                let at = self
                    .buf
                    .iter()
                    .zip(self.expect.iter())
                    .position(|(a, b)| a != b)
                    .unwrap_or(0);
                return Err(BenchError::Verify(format!(
                    "HACCIO thread {} record {r} round {}: byte {at} of the record at offset {off} differs",
                    self.thread, self.round
                )));
            }
        }
        self.step += 1;
        if self.step == 2 * self.records {
            self.step = 0;
            self.round += 1;
        }
        Ok(HACC_RECORD as u64)
    }
}

struct MemCopy {
    mem: Arc<SharedMem>,
    start: usize,
    blocks: usize,
    k: usize,
    write: bool,
    buf: AlignedBuf,
}

/// A large buffer the memory-bandwidth threads copy into and out of, each in
/// its own slice.
pub struct SharedMem {
    buf: std::cell::UnsafeCell<AlignedBuf>,
}

// SAFETY: each MemCopy touches only its own disjoint block range
// [start, start + blocks) of the buffer (see prepare_memory), so no two
// threads access the same bytes.
unsafe impl Sync for SharedMem {}

impl Op for MemCopy {
    fn run(&mut self) -> Result<u64> {
        let off = (self.start + self.k % self.blocks) * BLOCK;
        self.k += 1;
        let base = self.mem.buf.get();
        // SAFETY: off..off+BLOCK lies inside this thread's disjoint slice of
        // the buffer (start + blocks <= total blocks), which no other thread
        // touches, and the buffer outlives the op through the Arc.
        unsafe {
            let p = (*base).as_ptr().add(off) as *mut u8;
            if self.write {
                std::ptr::copy_nonoverlapping(self.buf.as_ptr(), p, BLOCK);
            } else {
                std::ptr::copy_nonoverlapping(p, self.buf.as_mut_ptr(), BLOCK);
            }
        }
        std::hint::black_box(&mut self.buf);
        Ok(BLOCK as u64)
    }
}

/// Size of the memory-bandwidth buffer (larger than any last-level cache).
pub const MEM_BYTES: usize = 256 << 20;

/// Name prefix of thread `t`'s files for a metadata workload: in its own
/// directory `/p{t}` (created here) when `private`, else in `/shared-dir`.
fn meta_prefix(be: &Arc<dyn Backend>, private: bool, t: usize, leaf: &str) -> Result<String> {
    if private {
        be.create_dir_all(&format!("/p{t}"))?;
        Ok(format!("/p{t}/{leaf}"))
    } else {
        Ok(format!("/shared-dir/t{t}-{leaf}"))
    }
}

fn prepare_memory(write: bool, hot: bool, threads: usize) -> Vec<Box<dyn Op>> {
    let bytes = if hot { threads * BLOCK } else { MEM_BYTES };
    let total_blocks = bytes / BLOCK;
    let mut big = AlignedBuf::new(bytes);
    // Touch every page so page faults are not measured.
    for page in big.chunks_mut(BLOCK) {
        page[0] = 1;
    }
    let mem = Arc::new(SharedMem {
        buf: std::cell::UnsafeCell::new(big),
    });
    let per = (total_blocks / threads).max(1);
    (0..threads)
        .map(|t| {
            let start = (t * per) % total_blocks;
            let blocks = per.min(total_blocks - start);
            Box::new(MemCopy {
                mem: mem.clone(),
                start,
                blocks,
                k: 0,
                write,
                buf: block_buf(t),
            }) as Box<dyn Op>
        })
        .collect()
}

impl Workload {
    /// Create the files this workload needs on `be` and return one [`Op`]
    /// per thread. Memory workloads ignore `be`.
    pub fn prepare(self, be: &Arc<dyn Backend>, threads: usize) -> Result<Vec<Box<dyn Op>>> {
        self.prepare_placed(be, threads, &|_| {})
    }

    /// [`Workload::prepare`], calling `place(t)` before creating or writing
    /// what thread `t` owns (its private files, its region of a shared
    /// file), so the caller can move to thread `t`'s CPU first: a NUMA
    /// placement policy then puts that data where thread `t` will run.
    pub fn prepare_placed(
        self,
        be: &Arc<dyn Backend>,
        threads: usize,
        place: &dyn Fn(usize),
    ) -> Result<Vec<Box<dyn Op>>> {
        self.prepare_strided(be, threads, REGION, place)
    }

    /// [`Workload::prepare_placed`] with thread `t`'s DRBM/DWOM block at
    /// byte `t * stride` of the shared file instead of `t * REGION`
    /// (`stride` checked by [`check_stride`]).
    pub fn prepare_strided(
        self,
        be: &Arc<dyn Backend>,
        threads: usize,
        stride: u64,
        place: &dyn Fn(usize),
    ) -> Result<Vec<Box<dyn Op>>> {
        assert!(threads > 0);
        check_stride(stride)?;
        let p = Prep { be, threads, place };
        match self {
            Workload::MemWrite
            | Workload::MemRead
            | Workload::MemWriteHot
            | Workload::MemReadHot => Ok(prepare_memory(
                self.writes(),
                matches!(self, Workload::MemWriteHot | Workload::MemReadHot),
                threads,
            )),
            Workload::Drbl | Workload::Dwol | Workload::Dwsl => p.private_blocks(self),
            Workload::Drbm | Workload::Dwom | Workload::Drbh => p.shared_blocks(self, stride),
            Workload::Dwal => p.appends(),
            Workload::Dwtl => p.truncates(),
            Workload::Mwcl | Workload::Mwcm | Workload::Mwul | Workload::Mwum => {
                p.creates_or_unlinks(self)
            }
            Workload::Mwrl | Workload::Mwrm => p.renames(self == Workload::Mwrl),
            Workload::Mrpl | Workload::Mrpm => p.stats(self == Workload::Mrpl),
            Workload::Mrdl | Workload::Mrdm => p.readdirs(self == Workload::Mrdl),
            Workload::Mix { reads, writes } => p.shared_mix(reads, writes),
            Workload::Pmix { reads, writes } => p.private_mix(reads, writes),
            Workload::Drfl => p.scattered_reads(),
            Workload::HaccIo => p.checkpoints(),
        }
    }
}

/// The ops of a workload's threads, one each.
type Ops = Vec<Box<dyn Op>>;

/// Preparing a workload's files and ops ([`Workload::prepare_strided`]),
/// one method per family of workloads.
struct Prep<'a> {
    be: &'a Arc<dyn Backend>,
    threads: usize,
    /// Called with `t` before creating or writing what thread `t` owns.
    place: &'a dyn Fn(usize),
}

impl Prep<'_> {
    /// One op per thread: `make(t)`, after `place(t)`.
    fn each(&self, mut make: impl FnMut(usize) -> Result<Box<dyn Op>>) -> Result<Ops> {
        let mut ops: Ops = Vec::with_capacity(self.threads);
        for t in 0..self.threads {
            (self.place)(t);
            ops.push(make(t)?);
        }
        Ok(ops)
    }

    /// DRBL, DWOL, DWSL: one block of a private file per thread.
    fn private_blocks(&self, w: Workload) -> Result<Ops> {
        let op = match w {
            Workload::Drbl => BlockOp::Read,
            Workload::Dwsl => BlockOp::WriteSync,
            _ => BlockOp::Write,
        };
        self.each(|t| {
            let f = self.be.open(&format!("/private-{t}"), Open::CREATE)?;
            let buf = block_buf(t);
            write_full(&*f, &buf, 0)?;
            Ok(BlockIo::boxed(f, 0, buf, op))
        })
    }

    /// DRBM, DWOM, DRBH: one block per thread of a shared file, thread
    /// `t`'s at `t * stride` (DRBH's threads all read block 0).
    fn shared_blocks(&self, w: Workload, stride: u64) -> Result<Ops> {
        let f = self.be.open("/shared", Open::CREATE)?;
        self.each(|t| {
            let buf = block_buf(t);
            let off = t as u64 * stride;
            write_full(&*f, &buf, off)?;
            let off = if w == Workload::Drbh { 0 } else { off };
            let op = if w == Workload::Dwom {
                BlockOp::Write
            } else {
                BlockOp::Read
            };
            Ok(BlockIo::boxed(f.clone(), off, buf, op))
        })
    }

    /// DWAL: appends to a private file per thread.
    fn appends(&self) -> Result<Ops> {
        self.each(|t| {
            let f = self.be.open(
                &format!("/private-{t}"),
                Open {
                    create: true,
                    truncate: true,
                    append: true,
                },
            )?;
            Ok(Box::new(Append {
                file: f,
                len: 0,
                buf: block_buf(t),
            }))
        })
    }

    /// DWTL: truncates of a private file per thread.
    fn truncates(&self) -> Result<Ops> {
        self.each(|t| {
            let f = self.be.open(&format!("/private-{t}"), Open::CREATE)?;
            let mut fill = AlignedBuf::new(TRUNC_FILL);
            stamp(&mut fill, t, 0, 0);
            write_full(&*f, &fill, 0)?;
            Ok(Box::new(Truncate {
                file: f,
                len: TRUNC_FILL as u64,
                fill,
            }))
        })
    }

    /// MWCL, MWCM, MWUL, MWUM: creates or unlinks of files in a private
    /// directory per thread or in a shared one.
    fn creates_or_unlinks(&self, w: Workload) -> Result<Ops> {
        let private = matches!(w, Workload::Mwcl | Workload::Mwul);
        let create = matches!(w, Workload::Mwcl | Workload::Mwcm);
        if !private {
            self.be.create_dir_all("/shared-dir")?;
        }
        self.each(|t| {
            let mut op = CreateOrUnlink {
                be: self.be.clone(),
                prefix: meta_prefix(self.be, private, t, "f")?,
                next: 0,
                create,
            };
            if !create {
                // Unlinking starts from a full batch.
                op.reset()?;
            }
            Ok(Box::new(op))
        })
    }

    /// MWRL, MWRM: renames in a private directory per thread or in a
    /// shared one.
    fn renames(&self, private: bool) -> Result<Ops> {
        if !private {
            self.be.create_dir_all("/shared-dir")?;
        }
        self.each(|t| {
            let prefix = meta_prefix(self.be, private, t, "r")?;
            self.be.create_file(&format!("{prefix}0"))?;
            Ok(Box::new(Rename {
                be: self.be.clone(),
                prefix,
                generation: 0,
            }))
        })
    }

    /// MRPL, MRPM: path lookups of a deep file per thread or of a shared one.
    fn stats(&self, private: bool) -> Result<Ops> {
        let shared = "/shared-dir/a/b/c/d";
        if !private {
            self.be.create_dir_all(shared)?;
            let f = self.be.open(&format!("{shared}/file"), Open::CREATE)?;
            write_full(&*f, &block_buf(0), 0)?;
        }
        self.each(|t| {
            let path = if private {
                let d = format!("/p{t}/a/b/c/d");
                self.be.create_dir_all(&d)?;
                let f = self.be.open(&format!("{d}/file"), Open::CREATE)?;
                write_full(&*f, &block_buf(t), 0)?;
                format!("{d}/file")
            } else {
                format!("{shared}/file")
            };
            Ok(Box::new(Stat {
                be: self.be.clone(),
                path,
            }))
        })
    }

    /// MRDL, MRDM: listings of a directory per thread or of a shared one.
    fn readdirs(&self, private: bool) -> Result<Ops> {
        if !private {
            self.be.create_dir_all("/shared-dir")?;
            for i in 0..READDIR_ENTRIES {
                self.be.create_file(&format!("/shared-dir/e{i}"))?;
            }
        }
        self.each(|t| {
            let path = if private {
                let d = format!("/p{t}");
                self.be.create_dir_all(&d)?;
                for i in 0..READDIR_ENTRIES {
                    self.be.create_file(&format!("{d}/e{i}"))?;
                }
                d
            } else {
                "/shared-dir".to_string()
            };
            Ok(Box::new(ReadDir {
                be: self.be.clone(),
                path,
                expect: READDIR_ENTRIES,
            }))
        })
    }

    /// MIX: reads and writes of the blocks of a region per thread of a
    /// shared file.
    fn shared_mix(&self, reads: u32, writes: u32) -> Result<Ops> {
        let f = self.be.open("/shared", Open::CREATE)?;
        self.each(|t| {
            let buf = block_buf(t);
            let base = t as u64 * REGION;
            for b in 0..MIX_BLOCKS {
                write_full(&*f, &buf, base + b * BLOCK as u64)?;
            }
            Ok(Box::new(Mix {
                file: f.clone(),
                base,
                reads,
                cycle: reads + writes,
                k: 0,
                buf,
            }))
        })
    }

    /// PMIX: reads and writes of a private file per thread.
    fn private_mix(&self, reads: u32, writes: u32) -> Result<Ops> {
        self.each(|t| {
            let f = self.be.open(&format!("/private-{t}"), Open::CREATE)?;
            let buf = block_buf(t);
            for b in 0..PMIX_READ_BLOCKS + MIX_BLOCKS {
                write_full(&*f, &buf, b * BLOCK as u64)?;
            }
            Ok(Box::new(PrivateMix {
                file: f,
                reads,
                cycle: reads + writes,
                k: 0,
                kr: 0,
                kw: 0,
                buf,
            }))
        })
    }

    /// DRFL: large reads of a private file per thread whose blocks are
    /// scattered (interleaved with a padding file's).
    fn scattered_reads(&self) -> Result<Ops> {
        self.each(|t| {
            let f = self.be.open(&format!("/scattered-{t}"), Open::CREATE)?;
            let pad = self.be.open(&format!("/scattered-pad-{t}"), Open::CREATE)?;
            let buf = block_buf(t);
            for b in 0..(DRFL_READ / BLOCK) as u64 {
                write_full(&*f, &buf, b * BLOCK as u64)?;
                write_full(&*pad, &buf, b * BLOCK as u64)?;
            }
            Ok(Box::new(ScatteredRead {
                file: f,
                buf: AlignedBuf::new(DRFL_READ),
            }))
        })
    }

    /// HACC-IO: checkpoint records in a partition per thread of a shared
    /// file.
    fn checkpoints(&self) -> Result<Ops> {
        let f = self.be.open("/checkpoint", Open::CREATE)?;
        self.each(|t| {
            Ok(Box::new(Hacc {
                file: f.clone(),
                thread: t,
                base: t as u64 * HACC_PARTITION,
                records: HACC_PARTITION / HACC_RECORD as u64,
                step: 0,
                round: 0,
                buf: AlignedBuf::new(HACC_RECORD),
                expect: AlignedBuf::new(HACC_RECORD),
            }))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strides_are_checked() {
        for ok in [4096u64, 8 << 20, MAX_STRIDE] {
            assert!(check_stride(ok).is_ok(), "{ok}");
        }
        for bad in [0u64, 1, 4095, 6000, MAX_STRIDE + 4096] {
            let e = check_stride(bad).unwrap_err().to_string();
            assert!(e.contains("stride"), "{bad}: {e}");
        }
    }

    #[test]
    fn names_round_trip() {
        for w in Workload::all_fs().into_iter().chain(Workload::MEMORY) {
            assert_eq!(w.to_string().parse::<Workload>().unwrap(), w);
        }
        assert_eq!(
            "mix:1:3".parse::<Workload>().unwrap(),
            Workload::Mix {
                reads: 1,
                writes: 3
            }
        );
        assert!("nope".parse::<Workload>().is_err());
        assert!("MIX:0:0".parse::<Workload>().is_err());
        for w in ["PMIX:4:1", "PMIX:0:5", "PMIX:5:0"] {
            assert_eq!(w.parse::<Workload>().unwrap().to_string(), w);
        }
        assert_eq!(
            "pmix".parse::<Workload>().unwrap(),
            Workload::Pmix {
                reads: 3,
                writes: 1
            }
        );
        for bad in ["PMIX:0:0", "PMIX:1", "PMIX:a:b", "PMIX:4294967295:1"] {
            assert!(bad.parse::<Workload>().is_err(), "{bad}");
        }
    }
}
