//! Black-box power cuts of a real process over the real kernel page cache.
//!
//! The crash explorer sees what the engine tells its persistence observer;
//! this check sees only what the kernel shows. A random workload runs
//! through the public API on a `file`-mode pool on a disk file system, in
//! this process, on a thread the scheduler is free to move between CPUs
//! (and that is also moved at random). After every operation the pool's
//! pages are looked up in `/proc/self/pagemap` and `/proc/kpageflags`: a
//! page that is neither dirty nor under write-back holds on disk what it
//! holds in memory; a dirty page (or one under write-back) may hold on disk
//! any value it held since it was last seen clean. The kernel is also asked
//! now and then to start writing back random ranges of the pool
//! (`sync_file_range` without waiting), as its flusher threads would, so
//! stores race with write-back.
//!
//! Each crash point (the state after an operation) gives images built from
//! those values: every dirty page at its on-disk value, every one at its
//! newest, and random mixes. Each image is checked with `fsck`, mounted and
//! read back against the workload (its `Model`): a file whose `sync_all`
//! returned holds at least what it held then (each page that content or a
//! later write), names are only those of the workload, and no page holds
//! bytes no write to that name produced.
//!
//! What it cannot see: values a page held only inside one operation (the
//! pages are read between operations), and tearing inside a page (a page
//! is taken whole); the explorer's page models cover both.

use crate::Rng;
use crate::workloads::pattern_bytes;
use manyfs::diag::affinity;
use manyfs::{Durability, Fs, MkfsOptions, MountOptions, OpenOptions};
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

const PAGE: usize = 4096;
/// Names the workload uses, all in the root directory.
const NAMES: [&str; 4] = ["/f0", "/f1", "/f2", "/f3"];
/// Pages of a file a write may start at.
const FILE_PAGES: u64 = 8;

/// `/proc/kpageflags` bits (Documentation/admin-guide/mm/pagemap.rst).
const KPF_DIRTY: u64 = 1 << 4;
const KPF_WRITEBACK: u64 = 1 << 8;

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Workloads (each on a fresh pool).
    pub workloads: usize,
    /// Operations per workload.
    pub ops: usize,
    /// Random images per crash point, besides the two extremes.
    pub mixes: usize,
    /// Seed of every random choice.
    pub seed: u64,
    /// Directory on a disk file system for the pool (not tmpfs: there no
    /// page is ever clean).
    pub dir: PathBuf,
    /// Pool size in bytes.
    pub pool_size: u64,
    /// Move the workload thread to a random CPU before some operations.
    pub migrate: bool,
    /// Take the engine's durability points into account (see
    /// `SyncPoints`). Off, a page that an operation synced and then
    /// stored to again looks as if its value from before the operation
    /// could still be on disk: the check then reports states a real power
    /// cut cannot leave (kept to show what a checker blind to them says).
    pub sync_points: bool,
    /// A bug to plant in the engine (`planted-bugs` feature), to show the
    /// check finds it.
    pub planted_bug: Option<crate::PlantedBug>,
    /// Keep each workload's first violating image here, with the image of
    /// the same crash point with every page at its newest value beside it
    /// (`NAME.bad`, `NAME.newest`), for `manyfs inspect` and `fsck`.
    pub keep: Option<PathBuf>,
}

/// What a run saw.
#[derive(Debug, Default)]
pub struct Stats {
    /// Workloads run.
    pub workloads: usize,
    /// Operations run.
    pub ops: usize,
    /// Crash points (states after an operation) checked.
    pub crash_points: usize,
    /// Distinct images checked.
    pub images: usize,
    /// Crash points with at least one dirty page.
    pub dirty_points: usize,
    /// Operations that ran on another CPU than the one before.
    pub migrations: usize,
    /// Every violation, one line each (workload, operation, what).
    pub violations: Vec<String>,
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} workloads, {} operations ({} after a CPU change), {} crash points ({} with dirty pages), {} distinct images, {} violations",
            self.workloads,
            self.ops,
            self.migrations,
            self.crash_points,
            self.dirty_points,
            self.images,
            self.violations.len()
        )
    }
}

/// Why the check cannot run here (not root, no `/proc/kpageflags`, the
/// directory on tmpfs), or an I/O error.
#[derive(Debug)]
pub struct Unavailable(pub String);

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn io(what: &str, e: impl std::fmt::Display) -> Unavailable {
    Unavailable(format!("{what}: {e}"))
}

/// Whether this machine lets the check read page flags in `dir`: `Err`
/// says why not.
pub fn available(dir: &Path) -> Result<(), Unavailable> {
    // SAFETY: statfs writes into the zeroed struct we pass; the path is a
    // NUL-terminated copy.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|e| io("directory name", e))?;
    // SAFETY: see above.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io(
            &format!("statfs {}", dir.display()),
            std::io::Error::last_os_error(),
        ));
    }
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    if st.f_type as i64 == TMPFS_MAGIC {
        return Err(Unavailable(format!(
            "{} is on tmpfs, where no page is ever clean: use a directory on a disk file system",
            dir.display()
        )));
    }
    let flags = File::open("/proc/kpageflags").map_err(|e| io("open /proc/kpageflags", e))?;
    let mut b = [0u8; 8];
    flags
        .read_at(&mut b, 0)
        .map_err(|e| io("read /proc/kpageflags (needs root)", e))?;
    // Without CAP_SYS_ADMIN pagemap reads succeed with every PFN zero.
    let probe = vec![1u8; PAGE];
    let pfn = {
        let pm = File::open("/proc/self/pagemap").map_err(|e| io("open /proc/self/pagemap", e))?;
        let mut e = [0u8; 8];
        pm.read_at(&mut e, (probe.as_ptr() as u64 / PAGE as u64) * 8)
            .map_err(|e| io("read /proc/self/pagemap", e))?;
        u64::from_le_bytes(e) & ((1 << 55) - 1)
    };
    std::hint::black_box(&probe);
    if pfn == 0 {
        return Err(Unavailable(
            "/proc/self/pagemap hides page frame numbers (needs CAP_SYS_ADMIN: run as root)".into(),
        ));
    }
    Ok(())
}

/// A read-only shared mapping of the pool file (the same page-cache pages
/// the engine writes) and the files that tell each page's flags.
struct PageWatch {
    base: *const u8,
    len: usize,
    pagemap: File,
    kpageflags: File,
}

impl PageWatch {
    fn new(pool: &File, len: usize) -> Result<PageWatch, Unavailable> {
        // SAFETY: a fresh read-only shared mapping of `len` bytes of an open
        // file; unmapped in Drop, and only read through `page`.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                pool.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io("mmap the pool", std::io::Error::last_os_error()));
        }
        Ok(PageWatch {
            base: base as *const u8,
            len,
            pagemap: File::open("/proc/self/pagemap").map_err(|e| io("pagemap", e))?,
            kpageflags: File::open("/proc/kpageflags").map_err(|e| io("kpageflags", e))?,
        })
    }

    fn pages(&self) -> usize {
        self.len / PAGE
    }

    /// Page `i`'s bytes as the page cache holds them now.
    fn page(&self, i: usize) -> &[u8] {
        assert!(i < self.pages());
        // SAFETY: `i` is below the page count, so the page lies inside the
        // mapping, which lives as long as `self`. The engine may store into
        // it concurrently only while an operation runs; pages are read
        // between operations, on the thread that runs them.
        unsafe { std::slice::from_raw_parts(self.base.add(i * PAGE), PAGE) }
    }

    /// Which pages are dirty or under write-back (faulting every page in
    /// first, so that each has a frame to look up).
    fn dirty(&self) -> Result<Vec<bool>, Unavailable> {
        let n = self.pages();
        for i in 0..n {
            std::hint::black_box(self.page(i)[0]);
        }
        let mut map = vec![0u8; n * 8];
        self.pagemap
            .read_exact_at(&mut map, (self.base as u64 / PAGE as u64) * 8)
            .map_err(|e| io("read pagemap", e))?;
        let mut out = Vec::with_capacity(n);
        let mut f = [0u8; 8];
        for e in map.chunks_exact(8) {
            let e = u64::from_le_bytes(e.try_into().expect("8 bytes"));
            let present = e >> 63 == 1;
            let pfn = e & ((1 << 55) - 1);
            if !present || pfn == 0 {
                // Not in the page cache: on disk as it is.
                out.push(false);
                continue;
            }
            self.kpageflags
                .read_exact_at(&mut f, pfn * 8)
                .map_err(|e| io("read kpageflags", e))?;
            out.push(u64::from_le_bytes(f) & (KPF_DIRTY | KPF_WRITEBACK) != 0);
        }
        Ok(out)
    }
}

impl Drop for PageWatch {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once; no slice from
        // `page` outlives `self`.
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.len);
        }
    }
}

/// One operation of a workload.
#[derive(Debug, Clone, Copy)]
enum Op {
    Create(usize),
    /// `npages` whole pages at page `page`, tag `tag`.
    Write(usize, u64, u64, u8),
    SyncAll(usize),
    Remove(usize),
    FullSync,
}

impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Op::Create(n) => write!(f, "create {}", NAMES[n]),
            Op::Write(n, p, k, t) => {
                write!(f, "write {} pages {p}..{} tag {t:#x}", NAMES[n], p + k)
            }
            Op::SyncAll(n) => write!(f, "sync_all {}", NAMES[n]),
            Op::Remove(n) => write!(f, "remove {}", NAMES[n]),
            Op::FullSync => f.write_str("Fs::sync"),
        }
    }
}

/// What one name may show after a power cut.
#[derive(Debug, Clone, Default)]
struct NameModel {
    /// The incarnation the name holds now (a new one per create).
    current: Option<usize>,
    /// The state the last sync covering this name made durable: the
    /// incarnation and its content then, or `None` (absent, or never
    /// synced: then see `synced_absent`).
    synced: Option<(usize, Vec<u8>)>,
    /// Removed since that sync.
    removed_since_sync: bool,
    /// Writes of each incarnation: (first page, pages, tag).
    writes: Vec<Vec<(u64, u64, u8)>>,
    /// Content of each incarnation (what a reader sees now).
    content: Vec<Vec<u8>>,
}

/// What the workload did, to judge an image against.
#[derive(Debug, Clone, Default)]
struct Model {
    names: [NameModel; 4],
}

impl Model {
    fn apply(&mut self, op: Op) {
        match op {
            Op::Create(n) => {
                let m = &mut self.names[n];
                m.writes.push(Vec::new());
                m.content.push(Vec::new());
                m.current = Some(m.writes.len() - 1);
            }
            Op::Write(n, p, k, t) => {
                let m = &mut self.names[n];
                let inc = m.current.expect("write to an existing name");
                m.writes[inc].push((p, k, t));
                let c = &mut m.content[inc];
                let (off, len) = ((p as usize) * PAGE, (k as usize) * PAGE);
                if c.len() < off + len {
                    c.resize(off + len, 0);
                }
                c[off..off + len].copy_from_slice(&pattern_bytes(t, off as u64, len));
            }
            Op::SyncAll(n) => {
                let m = &mut self.names[n];
                let inc = m.current.expect("sync of an existing name");
                m.synced = Some((inc, m.content[inc].clone()));
                m.removed_since_sync = false;
            }
            Op::Remove(n) => {
                let m = &mut self.names[n];
                m.current = None;
                m.removed_since_sync = true;
            }
            Op::FullSync => {
                for m in &mut self.names {
                    match m.current {
                        Some(inc) => m.synced = Some((inc, m.content[inc].clone())),
                        // Absent for good, until a later create.
                        None => m.synced = None,
                    }
                    m.removed_since_sync = false;
                }
            }
        }
    }

    /// Whether `got` (the name's content in an image, `None` if absent) is
    /// a state name `n` may be in; `Err` says why not.
    fn judge(&self, n: usize, got: Option<&[u8]>) -> Result<(), String> {
        let m = &self.names[n];
        let Some(data) = got else {
            return match &m.synced {
                Some((_, c)) if !m.removed_since_sync => Err(format!(
                    "missing: its sync_all returned with {} bytes and no remove followed",
                    c.len()
                )),
                _ => Ok(()),
            };
        };
        if data.len() % PAGE != 0 {
            return Err(format!("{} bytes: not a whole number of pages", data.len()));
        }
        // Incarnations it may be: the synced one (its synced content as a
        // floor), and, unless the synced state is final, any later one.
        let first_allowed = m.synced.as_ref().map_or(0, |(inc, _)| *inc);
        let mut why = Vec::new();
        for inc in first_allowed..m.writes.len() {
            let floor = match &m.synced {
                Some((s, c)) if *s == inc => Some(c.as_slice()),
                _ => None,
            };
            if floor.is_none() && m.synced.is_some() && !m.removed_since_sync {
                // A later incarnation needs the remove that followed the
                // sync to be on disk.
                continue;
            }
            match Self::fits(data, floor, &m.writes[inc]) {
                Ok(()) => return Ok(()),
                Err(e) => why.push(format!("as incarnation {inc}: {e}")),
            }
        }
        Err(if why.is_empty() {
            format!("{} bytes, and no incarnation may show here", data.len())
        } else {
            why.join("; ")
        })
    }

    /// Whether `data` is `floor` (synced content, if any) with some of
    /// `writes` applied: each page the floor's, a write's, or zeros past
    /// the floor; no shorter than the floor.
    fn fits(data: &[u8], floor: Option<&[u8]>, writes: &[(u64, u64, u8)]) -> Result<(), String> {
        let floor_len = floor.map_or(0, <[u8]>::len);
        if data.len() < floor_len {
            return Err(format!("{} bytes, but {floor_len} were synced", data.len()));
        }
        for (p, page) in data.chunks(PAGE).enumerate() {
            let off = p * PAGE;
            if floor.is_some_and(|f| off < f.len() && &f[off..off + PAGE] == page) {
                continue;
            }
            let by_write = writes.iter().any(|&(first, k, t)| {
                (first..first + k).contains(&(p as u64))
                    && pattern_bytes(t, off as u64, PAGE) == page
            });
            if by_write {
                continue;
            }
            if off >= floor_len && page.iter().all(|&b| b == 0) {
                continue;
            }
            let what = if page.iter().all(|&b| b == 0) {
                "zeros".to_string()
            } else {
                format!(
                    "bytes no write of this name produced (first {:02x?})",
                    &page[..8]
                )
            };
            return Err(format!("page {p} holds {what}"));
        }
        Ok(())
    }
}

/// The next operation: mostly writes of existing names, sync_all, and
/// now and then a remove, a create or a full sync.
fn next_op(rng: &mut Rng, model: &Model, tag: &mut u8) -> Op {
    let n = rng.below(NAMES.len() as u64) as usize;
    if model.names[n].current.is_none() {
        return Op::Create(n);
    }
    match rng.below(20) {
        0..=10 if *tag < u8::MAX => {
            *tag += 1;
            let k = 1 + rng.below(3);
            Op::Write(n, rng.below(FILE_PAGES), k, *tag)
        }
        0..=15 => Op::SyncAll(n),
        16 | 17 => Op::Remove(n),
        18 => Op::FullSync,
        _ => Op::SyncAll(n),
    }
}

fn run_op(fs: &Fs, op: Op) -> manyfs::Result<()> {
    match op {
        Op::Create(n) => OpenOptions::new()
            .write(true)
            .create(true)
            .open(fs, NAMES[n])
            .map(|_| ()),
        Op::Write(n, p, k, t) => {
            let f = OpenOptions::new().write(true).open(fs, NAMES[n])?;
            let off = p * PAGE as u64;
            f.write_at(&pattern_bytes(t, off, (k as usize) * PAGE), off)
                .map(|_| ())
        }
        Op::SyncAll(n) => OpenOptions::new()
            .write(true)
            .open(fs, NAMES[n])?
            .sync_all(),
        Op::Remove(n) => fs.remove_file(NAMES[n]),
        Op::FullSync => fs.sync(),
    }
}

/// The CPUs this thread may run on.
fn allowed_cpus() -> Vec<usize> {
    affinity::get(0).unwrap_or_else(|_| vec![0])
}

/// Bind the calling thread to `cpus` (where the kernel refuses, the thread
/// keeps its mask: the run only migrates less).
fn bind(cpus: &[usize]) {
    let _ = affinity::set(0, cpus);
}

fn current_cpu() -> usize {
    // SAFETY: sched_getcpu has no preconditions.
    usize::try_from(unsafe { libc::sched_getcpu() }).unwrap_or(0)
}

/// The ranges the engine made durable inside an operation, with each
/// page's content at that moment. The engine reports each durability
/// point to its persistence observer just before it issues the `msync` (or
/// `sync_file_range` runs and `msync`) over that range, with the
/// operation's thread holding every page in it still: once that call
/// returns, those contents are on disk. Without this, a page synced and
/// then stored to again inside one operation would look as if its
/// pre-operation value could still be on disk.
struct SyncPoints {
    pool: File,
    synced: std::sync::Mutex<Vec<(usize, Vec<u8>)>>,
}

impl manyfs::diag::PersistObserver for SyncPoints {
    fn on_sync(&self, off: u64, len: usize) -> std::io::Result<()> {
        let first = off as usize / PAGE;
        let end = (off as usize + len).div_ceil(PAGE);
        let mut synced = self.synced.lock().unwrap_or_else(|p| p.into_inner());
        for p in first..end {
            let mut page = vec![0u8; PAGE];
            self.pool.read_exact_at(&mut page, (p * PAGE) as u64)?;
            synced.push((p, page));
        }
        Ok(())
    }
}

/// Each page's possible on-disk values since it was last seen clean
/// (oldest first), with the newest at the end.
struct History {
    versions: Vec<Vec<Vec<u8>>>,
}

impl History {
    /// Pages the engine synced (in order): each on disk as it was then.
    fn synced(&mut self, points: &SyncPoints) {
        let mut synced = points.synced.lock().unwrap_or_else(|p| p.into_inner());
        for (p, page) in synced.drain(..) {
            if let Some(h) = self.versions.get_mut(p) {
                h.clear();
                h.push(page);
            }
        }
    }

    fn observe(&mut self, watch: &PageWatch, dirty: &[bool]) {
        for (i, &d) in dirty.iter().enumerate() {
            let now = watch.page(i);
            let h = &mut self.versions[i];
            if !d {
                if h.len() != 1 || h[0] != now {
                    h.clear();
                    h.push(now.to_vec());
                }
            } else if h.last().is_none_or(|l| l != now) {
                h.push(now.to_vec());
            }
        }
    }
}

fn mount_opts() -> MountOptions {
    {
        let mut mo = MountOptions::default();
        mo.durability = Durability::File;
        // No background commit: what is durable is what the workload synced.
        mo.commit_interval = std::time::Duration::ZERO;
        mo
    }
}

/// Judge one image (the pool file at `image`): fsck clean, mounts, and
/// every name in a state the model allows.
fn check_image(image: &Path, model: &Model) -> Result<(), String> {
    let report = manyfs::fsck::check(image).map_err(|e| format!("fsck: {e}"))?;
    if !report.is_clean() {
        return Err(format!("fsck: {:?}", report.problems));
    }
    let fs = Fs::mount(image, &mount_opts()).map_err(|e| format!("mount: {e}"))?;
    let result = (|| {
        let listed = fs.read_dir("/").map_err(|e| format!("readdir /: {e}"))?;
        for e in &listed {
            let name = format!("/{}", e.name.to_string_lossy());
            if !NAMES.contains(&name.as_str()) {
                return Err(format!("a name the workload never made: {name}"));
            }
        }
        for (n, name) in NAMES.iter().enumerate() {
            let got = match fs.read(name) {
                Ok(d) => Some(d),
                Err(manyfs::Error::NotFound(_)) => None,
                Err(e) => return Err(format!("read {name}: {e}")),
            };
            model
                .judge(n, got.as_deref())
                .map_err(|e| format!("{name}: {e}"))?;
        }
        Ok(())
    })();
    let _ = fs.unmount();
    result
}

/// Run `cfg.workloads` workloads; `progress` sees the stats after each.
pub fn run(cfg: &Config, mut progress: impl FnMut(&Stats)) -> Result<Stats, Unavailable> {
    available(&cfg.dir)?;
    if let Some(bug) = cfg.planted_bug
        && (!bug.in_engine() || !cfg!(feature = "planted-bugs"))
    {
        return Err(Unavailable(format!(
            "the planted bug {bug:?} is not one of the engine's, or this build lacks the planted-bugs feature"
        )));
    }
    let scratch = tempfile::Builder::new()
        .prefix("manyfs-blackbox")
        .tempdir_in(&cfg.dir)
        .map_err(|e| io("scratch directory", e))?;
    let images = crate::scratch_dir().map_err(|e| io("image directory", e))?;
    let mut stats = Stats::default();
    let cpus = allowed_cpus();
    for w in 0..cfg.workloads {
        let seed = cfg
            .seed
            .wrapping_add(w as u64)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            | 1;
        let pool = scratch.path().join(format!("pool{w}"));
        workload(cfg, seed, w, &pool, images.path(), &cpus, &mut stats)?;
        let _ = std::fs::remove_file(&pool);
        stats.workloads += 1;
        progress(&stats);
    }
    bind(&cpus);
    Ok(stats)
}

// Longer than 150 lines on purpose: one workload's loop of operation,
// page-flag reading and image checks shares the pool, the sync points and
// the oracle; each phase is one commented block.
fn workload(
    cfg: &Config,
    seed: u64,
    w: usize,
    pool: &Path,
    image_dir: &Path,
    cpus: &[usize],
    stats: &mut Stats,
) -> Result<(), Unavailable> {
    let mkfs = {
        let mut mk = MkfsOptions::default();
        mk.size = cfg.pool_size;
        mk.replace_existing = true;
        mk
    };
    Fs::mkfs(pool, &mkfs, &mount_opts())
        .and_then(Fs::unmount)
        .map_err(|e| io("mkfs", e))?;
    let points = std::sync::Arc::new(SyncPoints {
        pool: File::open(pool).map_err(|e| io("open pool", e))?,
        synced: Default::default(),
    });
    let fs = manyfs::diag::mount_observed(pool, &mount_opts(), points.clone())
        .map_err(|e| io("mount", e))?;
    #[cfg(feature = "planted-bugs")]
    if let Some(bug) = cfg.planted_bug.and_then(crate::PlantedBug::engine_bug) {
        manyfs::diag::plant_bug(&fs, bug);
    }
    fs.sync().map_err(|e| io("sync", e))?;
    let file = File::open(pool).map_err(|e| io("open pool", e))?;
    file.sync_all().map_err(|e| io("fsync pool", e))?;
    let len = file.metadata().map_err(|e| io("stat pool", e))?.len() as usize;
    let watch = PageWatch::new(&file, len)?;
    let mut history = History {
        versions: (0..watch.pages())
            .map(|i| vec![watch.page(i).to_vec()])
            .collect(),
    };
    let mut rng = Rng::seeded(seed);
    let mut model = Model::default();
    let mut tag = 0u8;
    let image = image_dir.join(format!("image{w}"));
    let mut seen = std::collections::HashSet::new();
    let mut last_cpu = current_cpu();
    let mut violations_here = 0;
    for i in 0..cfg.ops {
        let op = next_op(&mut rng, &model, &mut tag);
        if cfg.migrate {
            match rng.below(4) {
                0 => bind(&[cpus[rng.below(cpus.len() as u64) as usize]]),
                1 => bind(cpus),
                _ => {}
            }
        }
        if rng.below(8) == 0 {
            // Start write-back of a random range, as the flusher would.
            let pages = (len / PAGE) as u64;
            let first = rng.below(pages);
            let count = 1 + rng.below(pages - first);
            // SAFETY: sync_file_range on a descriptor we own.
            unsafe {
                libc::sync_file_range(
                    file.as_raw_fd(),
                    (first as usize * PAGE) as i64,
                    (count as usize * PAGE) as i64,
                    libc::SYNC_FILE_RANGE_WRITE,
                );
            }
        }
        let cpu = current_cpu();
        stats.migrations += usize::from(cpu != last_cpu);
        last_cpu = cpu;
        run_op(&fs, op).map_err(|e| io(&format!("workload {w} op {i} ({op})"), e))?;
        model.apply(op);
        stats.ops += 1;
        if cfg.sync_points {
            history.synced(&points);
        } else {
            points
                .synced
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clear();
        }
        let dirty = watch.dirty()?;
        history.observe(&watch, &dirty);
        stats.crash_points += 1;
        let dirty_pages: Vec<usize> = (0..dirty.len())
            .filter(|&p| history.versions[p].len() > 1)
            .collect();
        if !dirty_pages.is_empty() {
            stats.dirty_points += 1;
        }
        // Choices: all at their on-disk value, all at their newest, random.
        let mut choices: Vec<HashMap<usize, usize>> = vec![
            dirty_pages.iter().map(|&p| (p, 0)).collect(),
            dirty_pages
                .iter()
                .map(|&p| (p, history.versions[p].len() - 1))
                .collect(),
        ];
        for _ in 0..cfg.mixes {
            choices.push(
                dirty_pages
                    .iter()
                    .map(|&p| (p, rng.below(history.versions[p].len() as u64) as usize))
                    .collect(),
            );
        }
        for choice in choices {
            let mut key: Vec<(usize, usize)> = choice.iter().map(|(&p, &v)| (p, v)).collect();
            key.sort_unstable();
            if !seen.insert((i, key)) {
                continue;
            }
            let mut bytes = Vec::with_capacity(len);
            for p in 0..watch.pages() {
                let h = &history.versions[p];
                bytes.extend_from_slice(&h[choice.get(&p).copied().unwrap_or(h.len() - 1)]);
            }
            std::fs::write(&image, &bytes).map_err(|e| io("write image", e))?;
            stats.images += 1;
            if let Err(e) = check_image(&image, &model) {
                // (The check mounted the image: rebuild it as the power cut
                // left it before keeping it.)
                std::fs::write(&image, &bytes).map_err(|e| io("write image", e))?;
                violations_here += 1;
                let changed: Vec<String> = choice
                    .iter()
                    .filter(|&(&p, &v)| v + 1 != history.versions[p].len())
                    .map(|(&p, &v)| format!("{p}@v{v}/{}", history.versions[p].len() - 1))
                    .collect();
                if let (Some(dir), 1) = (&cfg.keep, violations_here) {
                    let base = dir.join(format!("blackbox-w{w}-op{i}"));
                    let _ = std::fs::copy(&image, base.with_extension("bad"));
                    let newest: Vec<u8> = history
                        .versions
                        .iter()
                        .flat_map(|h| h[h.len() - 1].iter().copied())
                        .collect();
                    let _ = std::fs::write(base.with_extension("newest"), newest);
                }
                stats.violations.push(format!(
                    "workload {w} (seed {}) after op {i} ({op}), older pages {}: {e}",
                    cfg.seed,
                    changed.join(" ")
                ));
                if violations_here >= 3 {
                    break;
                }
            }
        }
        if violations_here >= 3 {
            break;
        }
    }
    drop(watch);
    fs.unmount().map_err(|e| io("unmount", e))?;
    let _ = std::fs::remove_file(&image);
    Ok(())
}
