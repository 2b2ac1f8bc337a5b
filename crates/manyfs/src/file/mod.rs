//! Reading, writing and truncating files: copy-on-write data pages
//! committed by log entries, under the file's range lock.
//!
//! Every read and write takes the file's [`BigReaderLock`] shared (a per-CPU
//! counter) and its range lock for exactly the bytes it touches. Truncate
//! takes the big-reader lock exclusive, which is the "range that covers the
//! end of file" extending operations need, without making ordinary I/O touch
//! a shared cache line.
//!
//! Ordering of overlapping writes needs no per-inode counter: a write's
//! entries carry a version one above the highest version of the pages they
//! replace, read from the index under the range lock that already serialises
//! them. Recovery keeps, per page, the highest version.

use crate::alloc::Purpose;
use crate::core::FsCore;
use crate::error::{Error, Result};
use crate::index::PageMapping;
use crate::inode::FileData;
use crate::inode::Inode;
use crate::inode::PendingAppend;
use crate::layout::*;
use crate::lock::{Access, RangeGuard};
use crate::sync::Ordering;
use smallvec::SmallVec;

const PAGE: u64 = BLOCK_SIZE;

/// The longest run of contiguous device blocks one transfer moves: a
/// longer run is several transfers (of one batch), so that no transfer
/// stages more than this in memory.
const MAX_RUN: usize = 1 << 20;

/// Read up to `buf.len()` bytes at `off`; returns bytes read (0 at EOF).
pub fn read(core: &FsCore, inode: &Inode, buf: &mut [u8], off: u64) -> Result<usize> {
    let f = inode.file()?;
    if buf.is_empty() {
        return Ok(0);
    }
    let end = off
        .checked_add(buf.len() as u64)
        .ok_or_else(|| Error::InvalidArgument(format!("read at offset {off} overflows")))?;
    let _t = f.truncate_lock.read();
    let _r = RangeGuard::new(&*f.lock, off, end, Access::Read);
    let size = f.size();
    if off >= size {
        return Ok(0);
    }
    let n = (end.min(size) - off) as usize;
    // One request per run of pages whose blocks are contiguous, all
    // issued together (one batch of data-device transfers on a tier):
    // `(media offset, start, end in buf)`.
    let mut runs: SmallVec<[(u64, usize, usize); 4]> = SmallVec::new();
    let mut done = 0usize;
    while done < n {
        let pos = off + done as u64;
        let pg = pos / PAGE;
        let in_page = (pos % PAGE) as usize;
        let take = (PAGE as usize - in_page).min(n - done);
        let m = f.index.lookup(pg);
        core.placement.tracker().read(inode.ino, m.block, take);
        if m.block == 0 {
            buf[done..done + take].fill(0);
        } else {
            let at = m.block * PAGE + in_page as u64;
            match runs.last_mut() {
                Some((start, lo, hi))
                    if *hi == done
                        && *hi - *lo < MAX_RUN
                        && *start + (*hi - *lo) as u64 == at
                        && core.media.on_data_device(at) =>
                {
                    *hi += take;
                }
                _ => runs.push((at, done, done + take)),
            }
        }
        done += take;
    }
    let mut reqs: SmallVec<[(u64, &mut [u8]); 4]> = SmallVec::new();
    let mut rest = &mut buf[..n];
    let mut cut = 0usize;
    for (at, lo, hi) in runs {
        let (_, from) = std::mem::take(&mut rest).split_at_mut(lo - cut);
        let (dst, tail) = from.split_at_mut(hi - lo);
        reqs.push((at, dst));
        rest = tail;
        cut = hi;
    }
    core.media.read_batch(&mut reqs)?;
    Ok(n)
}

/// Write `buf` at `off`; returns `buf.len()`. Durable on return in `pm`
/// mode; in `file` mode after the next sync.
pub fn write(core: &FsCore, inode: &Inode, buf: &[u8], off: u64) -> Result<usize> {
    core.check_writable()?;
    let f = inode.file()?;
    if buf.is_empty() {
        return Ok(0);
    }
    let end = off
        .checked_add(buf.len() as u64)
        .filter(|&e| e <= MAX_FILE_SIZE)
        .ok_or_else(|| Error::FileTooLarge(format!("write of {} bytes at {off}", buf.len())))?;
    let _gate = core.writer_gate();
    let _t = f.truncate_lock.read();
    if off / PAGE == (end - 1) / PAGE {
        // Its index slot, found now (the truncate lock keeps it in place),
        // loads while the range lock's word does.
        f.index.slot(off / PAGE).prefetch();
    }
    // A write past the page that holds the end of file (a hole before it)
    // makes that page's bytes past the end part of the file: they are
    // sealed to zeros first ([`seal_tail`]), under that page's range too.
    // Held, that page keeps the end of file where it is (any write that
    // moves it touches that page or is itself such a write), so the range
    // is taken again only if the end moved to a later page meanwhile.
    let mut from = off;
    let _r = loop {
        let r = RangeGuard::new(&*f.lock, from, end, Access::Write);
        match tail_to_seal(f.size(), off) {
            Some(tail) if tail * PAGE < from => from = tail * PAGE,
            Some(_) => {
                log_pending_append(core, inode)?;
                seal_tail(core, inode, f)?;
                break r;
            }
            None => break r,
        }
    };
    let n = write_locked(core, inode, f, buf, off, end, Target::Auto)?;
    // Under the range lock, the index still shows this write's block.
    (core.placement.tracker()).wrote(inode.ino, n, || f.index.lookup(off / PAGE).block);
    Ok(n)
}

/// Append `buf` at the end of file; returns the offset it was written at.
pub fn append(core: &FsCore, inode: &Inode, buf: &[u8]) -> Result<u64> {
    let f = inode.file()?;
    let _a = f.append_lock.lock();
    let off = f.size();
    write(core, inode, buf, off)?;
    Ok(off)
}

/// Where [`write_locked`] puts new data blocks.
#[derive(Clone, Copy)]
enum Target {
    /// A write's own choice: the data device on a tiered pool (or staged
    /// in the pool, `inode/staging.rs`), else the pool.
    Auto,
    /// The data device, copy-on-write, logged with no mtime (destaging
    /// rewrites bytes the file already holds: its mtime does not move, and
    /// an mtime set meanwhile by `utimes` stays).
    Device,
}

/// The pages a write covers: bytes `off..end` of the file, from `buf`.
#[derive(Clone, Copy)]
struct WriteSpan<'a> {
    buf: &'a [u8],
    off: u64,
    end: u64,
    first_pg: u64,
    last_pg: u64,
    /// The file's size when the write began.
    size_now: u64,
}

impl WriteSpan<'_> {
    /// Whether the write covers page `pg` only in part.
    #[inline]
    fn is_partial(&self, pg: u64) -> bool {
        self.off > pg * PAGE || self.end < (pg + 1) * PAGE
    }
}

/// Extents `(first block, blocks)` a write's new pages went to.
type Extents = SmallVec<[(u64, u64); 2]>;

fn write_locked(
    core: &FsCore,
    inode: &Inode,
    f: &FileData,
    buf: &[u8],
    off: u64,
    end: u64,
    target: Target,
) -> Result<usize> {
    let epoch = inode.attr_seq.load(Ordering::Acquire) as u32;
    let span = WriteSpan {
        buf,
        off,
        end,
        first_pg: off / PAGE,
        last_pg: (end - 1) / PAGE,
        size_now: f.size(),
    };
    let npages = span.last_pg - span.first_pg + 1;
    let stage = matches!(target, Target::Auto) && core.staging.wants(inode, buf.len());
    let one_page = span.first_pg == span.last_pg && !stage && matches!(target, Target::Auto);
    if one_page && append_in_place(core, inode, f, &span, f.index.slot(span.first_pg), epoch)? {
        return Ok(buf.len());
    }
    // Any other write comes after the appends gathered in place.
    log_pending_append(core, inode)?;
    if span.first_pg == span.last_pg && !stage {
        return write_page(core, inode, f, &span, target, epoch);
    }

    // One walk of the index per page: the slots are reused to publish.
    // (Pushed one by one: a `collect` is an out-of-line `extend` whose
    // result is then copied, a store-forwarding stall per write.)
    let mut slots: SmallVec<[&crate::index::PageSlot; 4]> = SmallVec::new();
    let mut old: SmallVec<[PageMapping; 4]> = SmallVec::new();
    let mut version = 1;
    for p in span.first_pg..=span.last_pg {
        let slot = f.index.slot(p);
        let m = slot.get();
        version = version.max(m.version + 1);
        slots.push(slot);
        old.push(m);
    }

    let extents = alloc_write_extents(core, npages, stage)?;
    // The crc32 of each extent's pages as written (durable marks only:
    // recovery checks them), so the log need not read the blocks back.
    let want_crcs = core.deferring();
    let mut crcs: SmallVec<[DataCrc; 2]> = SmallVec::new();
    let now = crate::time::now_ns();
    let mtime_ns = match target {
        Target::Auto => now,
        Target::Device => 0,
    };
    let extends = end > span.size_now;
    // An extending write whose end falls inside its last page checksums
    // only the bytes below the end: an append may then write the rest of
    // that page in place ([`append_in_place`]).
    let below_end = extends && !end.is_multiple_of(PAGE);
    let entries = write_entries(&span, &extents, epoch, version, mtime_ns, extends);
    // Partial pages copy the bytes of the entry that maps them now, and
    // every page depends on the newest size change while it may still be
    // dropped: a page it cut off is zeros here, not its older bytes.
    let copied = std::iter::once(span.first_pg)
        .chain((span.last_pg != span.first_pg).then_some(span.last_pg))
        .filter(|&pg| span.is_partial(pg))
        .map(|pg| old[(pg - span.first_pg) as usize])
        .filter(|m| m.block != 0)
        .map(|m| m.entry)
        .chain(unsynced_size_change(inode));
    let filled = fill_extents(core, &span, &old, &extents, want_crcs, below_end, &mut crcs)
        .and_then(|_| sublog_after(core, inode, None, copied));
    let locs = filled.and_then(|sublog| {
        let crcs = want_crcs.then_some(&crcs[..]);
        inode
            .log
            .append_with_crcs(core, sublog, &entries, mtime_ns, crcs)
    });
    let locs = match locs {
        Ok(l) => l,
        Err(e) => {
            for (b, n) in extents {
                core.blocks.free(b, n);
            }
            return Err(e);
        }
    };
    let done = Committed {
        slots: &slots,
        extents: &extents,
        locs: &locs,
        version,
        old: &old,
        old_entry_released: false,
    };
    publish_committed(core, inode, f, &span, epoch, mtime_ns, &done);
    // Listed after the size covers the pages: a destaging pass that
    // unlisted the file before this reads a size that includes them.
    if stage {
        note_staged_extents(core, inode, &extents);
    }
    Ok(buf.len())
}

/// [`write_locked`] of a write inside one page, not staged: the same
/// steps for one block and one entry, without the per-extent vectors and
/// with a partial page merged on the stack (the common 4 KiB overwrite
/// spends most of its time outside the copy).
fn write_page(
    core: &FsCore,
    inode: &Inode,
    f: &FileData,
    span: &WriteSpan<'_>,
    target: Target,
    epoch: u32,
) -> Result<usize> {
    let pg = span.first_pg;
    let slot = f.index.slot(pg);
    let old = slot.get();
    if matches!(target, Target::Auto)
        && span.end <= span.size_now
        && overwrite_in_place(core, inode, span.buf, span.off, slot, old)?
    {
        return Ok(span.buf.len());
    }
    let (block, _) = core.alloc_blocks(1, Purpose::Data)?;
    let mtime_ns = match target {
        Target::Auto => crate::time::now_ns(),
        Target::Device => 0,
    };
    let extends = span.end > span.size_now;
    let below_end = extends && !span.end.is_multiple_of(PAGE);
    let partial = span.is_partial(pg);
    let logged = (|| {
        // Zeroed only when needed: a whole page is copied from the caller.
        let mut merged;
        let page: &[u8] = if partial {
            merged = [0u8; PAGE as usize];
            merge_page(core, span, pg, old, &mut merged)?;
            &merged
        } else {
            span.buf
        };
        core.media.nt_copy(block * PAGE, page)?;
        let crc = core.deferring().then(|| {
            let covered = if below_end {
                (span.end % PAGE) as usize
            } else {
                page.len()
            };
            DataCrc {
                crc: crc32fast::hash(&page[..covered]),
                below_end,
            }
        });
        // A partial page copies the bytes of the entry that maps it now.
        let copied = (partial && old.block != 0)
            .then_some(old.entry)
            .into_iter()
            .chain(unsynced_size_change(inode));
        let sublog = sublog_after(core, inode, None, copied)?;
        let entry = Entry::FileWrite {
            epoch,
            version: old.version + 1,
            pgoff: pg,
            block,
            npages: 1,
            file_end: span.end,
            mtime_ns,
        };
        let weight = 1 + u32::from(extends);
        let crcs = crc.as_ref().map(std::slice::from_ref);
        let replaced = (old.block != 0).then_some(old.entry);
        inode
            .log
            .append_replacing(core, sublog, &[(entry, weight)], mtime_ns, crcs, replaced)
    })();
    let (locs, old_entry_released) = logged.inspect_err(|_| core.blocks.free(block, 1))?;
    let done = Committed {
        slots: &[slot],
        extents: &[(block, 1)],
        locs: &locs,
        version: old.version + 1,
        old: &[old],
        old_entry_released,
    };
    publish_committed(core, inode, f, span, epoch, mtime_ns, &done);
    Ok(span.buf.len())
}

/// A write whose entries are committed: what [`publish_committed`] makes
/// visible (`slots` get the blocks of `extents`, entries at `locs`, at
/// `version`) and what it retires (`old`, the slots' mappings before).
struct Committed<'a> {
    slots: &'a [&'a crate::index::PageSlot],
    extents: &'a [(u64, u64)],
    locs: &'a [crate::log::EntryLoc],
    version: u64,
    old: &'a [PageMapping],
    /// Whether the append already released the live reference of
    /// `old[0]`'s entry (`InodeLog::append_replacing`).
    old_entry_released: bool,
}

/// The steps after a write's entries committed: an mtime logged again if
/// an attribute change raced the write, the new pages published in the
/// index, the replaced blocks and entries retired, and the size raised
/// if the write extends the file.
#[inline]
fn publish_committed(
    core: &FsCore,
    inode: &Inode,
    f: &FileData,
    span: &WriteSpan<'_>,
    epoch: u32,
    mtime_ns: u64,
    done: &Committed<'_>,
) {
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    if inode.attr_seq.load(Ordering::Acquire) as u32 != epoch && mtime_ns != 0 {
        // An attribute change was logged while this write was in flight:
        // recovery ignores this entry's mtime (its epoch is older), and the
        // attribute entry may predate it. Log the mtime the inode now shows.
        // Best effort: the data is committed either way.
        let _ = log_write_mtime(core, inode, mtime_ns);
    }
    publish_write(done.slots, done.extents, done.locs, done.version);
    retire_replaced(core, inode, done.old, done.old_entry_released);
    if span.end > span.size_now {
        let last = *done.locs.last().expect("one entry per extent");
        note_new_end(core, inode, f, span.end, last);
    }
}

/// Allocates `npages` blocks for a write's new pages (possibly in several
/// extents); staged data that finds the pool too full goes to the device.
/// On failure nothing stays allocated.
#[inline]
fn alloc_write_extents(core: &FsCore, npages: u64, stage: bool) -> Result<Extents> {
    let mut extents: Extents = SmallVec::new();
    let mut got = 0;
    while got < npages {
        let staged = stage.then(|| core.blocks.alloc(npages - got, Purpose::Staged).ok());
        match staged
            .flatten()
            .map_or_else(|| core.alloc_blocks(npages - got, Purpose::Data), Ok)
        {
            Ok(x) => {
                got += x.1;
                extents.push(x);
            }
            Err(e) => {
                for (b, n) in extents {
                    core.blocks.free(b, n);
                }
                return Err(e);
            }
        }
    }
    Ok(extents)
}

/// Fills a write's new blocks: whole pages straight from the caller's
/// buffer, partial pages merged with the old contents (`old`: the pages'
/// mappings before the write; bytes past EOF read as zero). With
/// `want_crcs`, pushes the checksum of each extent's pages as written: of
/// the last extent's bytes below the write's end only if `below_end`.
#[inline]
fn fill_extents(
    core: &FsCore,
    span: &WriteSpan<'_>,
    old: &[PageMapping],
    extents: &[(u64, u64)],
    want_crcs: bool,
    below_end: bool,
    crcs: &mut SmallVec<[DataCrc; 2]>,
) -> Result<()> {
    let staged = merge_partial_pages(core, span, old)?;
    let (buf, off) = (span.buf, span.off);
    // One request per staged page, one per run of whole pages of an
    // extent (contiguous on the data device; a page each on a pool,
    // as before): `(block offset, staged page or buf range)`.
    enum Src {
        Staged(usize),
        Buf(usize, usize),
    }
    let mut reqs: SmallVec<[(u64, Src); 4]> = SmallVec::new();
    let mut pg = span.first_pg;
    for &(block, n) in extents {
        // Only when asked: a new hasher detects the CPU's features.
        let mut h = want_crcs.then(crc32fast::Hasher::new);
        let mut extent_run = false;
        for i in 0..n {
            let dst = (block + i) * PAGE;
            if let Some(k) = staged.iter().position(|(p, _)| *p == pg) {
                if let Some(h) = &mut h {
                    let covered = if below_end && pg == span.last_pg {
                        (span.end % PAGE) as usize
                    } else {
                        PAGE as usize
                    };
                    h.update(&staged[k].1[..covered]);
                }
                reqs.push((dst, Src::Staged(k)));
                extent_run = false;
            } else {
                let lo = (pg * PAGE - off) as usize;
                let src = &buf[lo..lo + PAGE as usize];
                if let Some(h) = &mut h {
                    h.update(src);
                }
                match reqs.last_mut() {
                    Some((_, Src::Buf(l, hi)))
                        if extent_run
                            && *hi == lo
                            && *hi - *l < MAX_RUN
                            && core.media.on_data_device(dst) =>
                    {
                        *hi += PAGE as usize;
                    }
                    _ => reqs.push((dst, Src::Buf(lo, lo + PAGE as usize))),
                }
                extent_run = true;
            }
            pg += 1;
        }
        if let Some(h) = h {
            crcs.push(DataCrc {
                crc: h.finalize(),
                below_end: below_end && pg > span.last_pg,
            });
        }
    }
    let reqs: SmallVec<[(u64, &[u8]); 4]> = reqs
        .iter()
        .map(|(dst, src)| match *src {
            Src::Staged(k) => (*dst, &staged[k].1[..]),
            Src::Buf(lo, hi) => (*dst, &buf[lo..hi]),
        })
        .collect();
    core.media.nt_copy_batch(&reqs)
}

/// A partial page of a write, merged in memory: `(page, contents)`.
type MergedPages = SmallVec<[(u64, Box<[u8; PAGE as usize]>); 2]>;

/// The partial pages of a write (the first and the last at most), each
/// merged: the old contents, bytes past EOF as zero, under the new bytes.
/// Their old blocks are read together.
#[inline]
fn merge_partial_pages(
    core: &FsCore,
    span: &WriteSpan<'_>,
    old: &[PageMapping],
) -> Result<MergedPages> {
    let mut staged: MergedPages = SmallVec::new();
    for pg in [span.first_pg, span.last_pg] {
        if span.is_partial(pg) && staged.iter().all(|(p, _)| *p != pg) {
            staged.push((pg, Box::new([0u8; PAGE as usize])));
        }
    }
    let mut old_reads: SmallVec<[(u64, &mut [u8]); 2]> = SmallVec::new();
    for (pg, page) in staged.iter_mut() {
        let prev = old[(*pg - span.first_pg) as usize];
        if prev.block != 0 {
            old_reads.push((prev.block * PAGE, &mut page[..]));
        }
    }
    core.media.read_batch(&mut old_reads)?;
    drop(old_reads);
    for (pg, page) in staged.iter_mut() {
        overlay_page(span, *pg, page);
    }
    Ok(staged)
}

/// Page `pg` of a write merged into `page`: the bytes of `prev` (its
/// mapping before the write; none reads as zeros) under the new bytes.
#[inline]
fn merge_page(
    core: &FsCore,
    span: &WriteSpan<'_>,
    pg: u64,
    prev: PageMapping,
    page: &mut [u8; PAGE as usize],
) -> Result<()> {
    if prev.block != 0 {
        core.media.read(prev.block * PAGE, page)?;
    }
    overlay_page(span, pg, page);
    Ok(())
}

/// Zeros past the end of file in `page` (page `pg` holding its old
/// bytes), then the write's bytes over it.
#[inline]
fn overlay_page(span: &WriteSpan<'_>, pg: u64, page: &mut [u8; PAGE as usize]) {
    let page_start = pg * PAGE;
    let valid = span.size_now.saturating_sub(page_start).min(PAGE) as usize;
    page[valid..].fill(0);
    let lo = span.off.max(page_start);
    let hi = span.end.min(page_start + PAGE);
    page[(lo - page_start) as usize..(hi - page_start) as usize]
        .copy_from_slice(&span.buf[(lo - span.off) as usize..(hi - span.off) as usize]);
}

/// One `FileWrite` entry per extent, with its live references (one per
/// page, and one more on the last when the write `extends` the file).
#[inline]
fn write_entries(
    span: &WriteSpan<'_>,
    extents: &[(u64, u64)],
    epoch: u32,
    version: u64,
    mtime_ns: u64,
    extends: bool,
) -> SmallVec<[(Entry, u32); 2]> {
    let mut entries: SmallVec<[(Entry, u32); 2]> = SmallVec::new();
    let mut pg = span.first_pg;
    for (i, &(block, n)) in extents.iter().enumerate() {
        let weight = n as u32 + u32::from(extends && i + 1 == extents.len());
        entries.push((
            Entry::FileWrite {
                epoch,
                version,
                pgoff: pg,
                block,
                npages: n as u32,
                file_end: span.end,
                mtime_ns,
            },
            weight,
        ));
        pg += n;
    }
    entries
}

/// Publishes a committed write in the index: one slot per page, in order.
#[inline]
fn publish_write(
    slots: &[&crate::index::PageSlot],
    extents: &[(u64, u64)],
    locs: &[crate::log::EntryLoc],
    version: u64,
) {
    let mut slot_iter = slots.iter();
    for (&(block, n), &loc) in extents.iter().zip(locs) {
        for i in 0..n {
            slot_iter
                .next()
                .expect("one slot per page")
                .set(PageMapping {
                    block: block + i,
                    entry: loc,
                    version,
                });
        }
    }
}

/// Retires what a published write replaced (`old`): its entry is
/// superseded by a committed one, so its block may be reused (and the
/// entry's reference released, unless `first_released` says the append
/// released `old[0]`'s already).
#[inline]
fn retire_replaced(core: &FsCore, inode: &Inode, old: &[PageMapping], first_released: bool) {
    for (i, m) in old.iter().enumerate().filter(|(_, m)| m.block != 0) {
        // The first one's entry reference may have gone with the append.
        let release_entry = !(i == 0 && first_released);
        if core.staging.enabled() && !core.media.on_data_device(m.block * PAGE) {
            if core.staging.frees_superseded_at_once() {
                // Planted bug (test builds only): reusable while the entry
                // that superseded it may still not count after a crash.
                core.blocks.free(m.block, 1);
            } else {
                // A pool block (staged): free once this file's next sync
                // made this write durable, not only at the next full sync.
                inode.staging.supersede(m.block);
            }
            if release_entry {
                core.release_later(inode, m.entry, 1);
            }
        } else if release_entry {
            core.retire_later(inode, m.block, m.entry);
        } else {
            core.free_later(m.block, 1);
        }
    }
}

/// A committed write that extended the file to `end`: raises the size and
/// makes its entry at `last` the size's definer unless a longer one is.
fn note_new_end(core: &FsCore, inode: &Inode, f: &FileData, end: u64, last: crate::log::EntryLoc) {
    f.size.fetch_max(end, Ordering::AcqRel);
    inode.size_changes.fetch_add(1, Ordering::AcqRel);
    let mut definer = f.size_definer.lock();
    match *definer {
        Some((old_end, old_loc)) if old_end >= end => {
            drop(definer);
            core.release_later(inode, last, 1);
            let _ = old_loc;
        }
        prev => {
            *definer = Some((end, last));
            drop(definer);
            if let Some((_, old_loc)) = prev {
                core.release_later(inode, old_loc, 1);
            }
        }
    }
}

/// Counts a staged write's pool pages and lists the file for destaging.
fn note_staged_extents(core: &FsCore, inode: &Inode, extents: &[(u64, u64)]) {
    let staged_pages: u64 = extents
        .iter()
        .filter(|&&(b, _)| !core.media.on_data_device(b * PAGE))
        .map(|&(_, n)| n)
        .sum();
    if staged_pages > 0 {
        core.staging.count_staged(staged_pages);
        core.staging.note_staged(inode);
    }
}

/// Whether staging has the pool less than half free: the commit thread
/// then checkpoints, and destages ([`destage_listed`]) if that was not
/// enough (`inode/staging.rs`).
pub(crate) fn pool_low(core: &FsCore) -> bool {
    let pool = &core.blocks.pool;
    core.staging.enabled() && pool.free_blocks() * 2 < pool.data_blocks()
}

/// Move every staged page of the files that staged any onto the device
/// ([`destage`] each; the entries written become durable with the next
/// sync). A file that fails stays listed for the next pass; the first
/// error is returned after the others were tried.
pub(crate) fn destage_listed(core: &FsCore) -> Result<u64> {
    let mut moved = 0;
    let mut first_err = None;
    for ino in core.staging.take_listed() {
        // A number freed (and perhaps reused by a directory) since it was
        // listed has nothing staged to move.
        let Ok(inode) = core.get(ino) else { continue };
        if inode.file.is_none() {
            continue;
        }
        core.staging.unlist(&inode);
        match destage(core, &inode) {
            Ok(n) => moved += n,
            Err(crate::Error::NotFound(_)) => {}
            Err(e) => {
                core.staging.note_staged(&inode);
                first_err.get_or_insert(e);
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(moved),
    }
}

/// Move every page of `inode` whose data is staged in the pool onto the
/// data device (`inode/staging.rs`): each run of such pages is read and
/// written again as a device write, under its range lock, with the file's
/// mtime unchanged. The new entries become durable with the next sync,
/// which then frees the pool blocks. Returns the pages moved.
pub(crate) fn destage(core: &FsCore, inode: &Inode) -> Result<u64> {
    /// The most pages one rewrite moves (one device transfer).
    const RUN_PAGES: u64 = MAX_RUN as u64 / PAGE;
    let f = inode.file()?;
    // A user of the inode, as an open file is: its last close cannot free
    // its blocks and log under the rewrite.
    inode.pin()?;
    struct Unpin<'a>(&'a FsCore, &'a Inode);
    impl Drop for Unpin<'_> {
        fn drop(&mut self) {
            self.0.unpin(self.1);
        }
    }
    let _pin = Unpin(core, inode);
    if inode.attrs.lock().nlink == 0 {
        return Ok(0);
    }
    let _gate = core.writer_gate();
    let _t = f.truncate_lock.read();
    let on_pool = |b: u64| b != 0 && !core.media.on_data_device(b * PAGE);
    // The staged pages (in page order), in runs of neighbours: the index's
    // mapped pages, not every page up to the size (a sparse file).
    let staged: Vec<u64> = (f.index.mapped().into_iter())
        .filter(|&(_, m)| on_pool(m.block))
        .map(|(pg, _)| pg)
        .collect();
    let mut moved = 0;
    let mut i = 0;
    while i < staged.len() {
        let first = staged[i];
        let mut next = first;
        while i < staged.len() && staged[i] == next && next - first < RUN_PAGES {
            next += 1;
            i += 1;
        }
        // Whole pages locked (a byte-range lock must keep an append into
        // the last page out); the size read under the lock (it only grows
        // while the truncate lock is held shared).
        let _r = RangeGuard::new(&*f.lock, first * PAGE, next * PAGE, Access::Write);
        let (off, end) = (first * PAGE, (next * PAGE).min(f.size()));
        if off >= end {
            continue;
        }
        // Under the lock the pages cannot change; one may have been
        // rewritten (to the device or the pool) since the scan.
        let mut buf = vec![0u8; (end - off) as usize];
        let mut reads: SmallVec<[(u64, &mut [u8]); 4]> = SmallVec::new();
        for (k, chunk) in buf.chunks_mut(PAGE as usize).enumerate() {
            let b = f.index.lookup(first + k as u64).block;
            if b != 0 {
                reads.push((b * PAGE, chunk));
            }
        }
        core.media.read_batch(&mut reads)?;
        drop(reads);
        write_locked(core, inode, f, &buf, off, end, Target::Device)?;
        core.staging.count_destaged(next - first);
        moved += next - first;
    }
    Ok(moved)
}

/// `file` mode: write `buf` (inside one page, below the end of file) into
/// the page's current data block instead of a copy, if that is safe;
/// returns whether it did.
///
/// The page cache writes a 4 KiB page back whole, so after a power cut the
/// page holds the old bytes or the new ones, like a copy-on-write page whose
/// entry did or did not count; the block already belongs to this file in
/// every state recovery can return to, so no other file's bytes can show.
/// What stands in the way is the checksum the page's write entry carries:
/// recovery verifies it unless a durable checked count covers the entry
/// (`InodeLog::settle_for_overwrite`). A page overwritten before (version 2
/// or more) is worth one barrier to settle its entry, after which every
/// overwrite and `fdatasync` costs one 4 KiB write instead of two (the data
/// copy and the log page); a page written once stays copy-on-write until a
/// full sync settles it. No entry is appended: the sync makes the block
/// durable, and the mtime is logged by the next full sync or `fsync`.
///
/// A settled entry stays settled (a page's durable checked count only
/// grows, and the entry leaves the page only with a new mapping), so the
/// answer is noted in the page's index slot until the slot is next set:
/// later overwrites of the page skip the log (its sub-log search and the
/// cold read of the log page's footer were a fifth of a random overwrite).
fn overwrite_in_place(
    core: &FsCore,
    inode: &Inode,
    buf: &[u8],
    off: u64,
    slot: &crate::index::PageSlot,
    current: PageMapping,
) -> Result<bool> {
    // Every size change durable: in every state a power cut can leave,
    // the file is as long as now, so the whole write shows (a write in
    // place below an unsynced extension, or after an unsynced truncate,
    // would show cut at the older size: found by the crash explorer's
    // random tier workloads).
    let sizes_durable = inode.size_changes_synced.load(Ordering::Acquire)
        >= inode.size_changes.load(Ordering::Acquire);
    if !core.deferring()
        || !sizes_durable
        || current.block == 0
        // Persistent memory does not write a page atomically: a pool block
        // of a tiered `pm`/`dram` pool (staged data) is only copied.
        || (core.opts.durability != crate::Durability::File
            && !core.media.on_data_device(current.block * PAGE))
    {
        return Ok(false);
    }
    if slot.is_settled() {
        debug_assert!(
            inode
                .log
                .settle_for_overwrite(core, current.entry, false)
                .unwrap_or(true),
            "a page noted settled whose entry the log does not call settled"
        );
    } else if inode
        .log
        .settle_for_overwrite(core, current.entry, current.version >= 2)?
    {
        slot.mark_settled();
    } else {
        return Ok(false);
    }
    core.media.nt_copy(current.block * PAGE + off % PAGE, buf)?;
    inode
        .log
        .note_overwrite(core, current.block, crate::time::now_ns());
    Ok(true)
}

/// Write `span` (inside the page that holds the end of file, at or past
/// the end) into that page's current block instead of a copy, if that is
/// safe; returns whether it did. The entry that makes it count maps the
/// page to the same block, one version up, with the new end.
///
/// The bytes of the block at and past the end of file are no file's
/// content: reads stop at the end, and whatever makes them part of the file
/// first writes them (a write merges zeros there, [`seal_tail`] and
/// `set_len` copy the page with them zeroed). So they may be written before
/// the entry that makes them count, as the bytes of a fresh block are, and
/// a power cut that drops the entry leaves the file as it was. The one
/// thing that must hold is that no checksum recovery may verify covers
/// them: the entry that maps the page now must carry none, or one of its
/// bytes below an end no further than the current one (an extending write
/// checksums only those, see [`fill_extents`]), or be settled
/// (`InodeLog::settle_for_overwrite`). The new entry checksums the page's
/// bytes below the new end only, so the next append finds the same.
///
/// In `file` mode the entry is not appended now: the appends to the page
/// gather in the inode's [`PendingAppend`] (bytes in the block, size in
/// memory), and one entry is logged for all of them by the next sync of the
/// file or the pool, or before anything else changes the file
/// ([`log_pending_append`]). Until a sync, `file` mode promises nothing
/// durable, and the gathered appends count or not as one (each is whole or
/// absent, as docs/guarantees.md promises for unsynced operations). An
/// append of a few hundred bytes then costs a copy of those bytes, where a
/// copy-on-write page cost a fresh block (a page fault on new pool memory),
/// a 4 KiB copy, an entry, and a block to free later.
fn append_in_place(
    core: &FsCore,
    inode: &Inode,
    f: &FileData,
    span: &WriteSpan<'_>,
    slot: &crate::index::PageSlot,
    epoch: u32,
) -> Result<bool> {
    let page_start = span.first_pg * PAGE;
    if span.off < span.size_now || span.size_now <= page_start || core.staging.enabled() {
        return Ok(false);
    }
    let usable = |m: &PageMapping| m.block != 0 && !core.media.on_data_device(m.block * PAGE);
    let now = crate::time::now_ns();
    if !core.deferring() {
        // `pm` and `dram`: logged now (durable on return in `pm` mode).
        let current = slot.get();
        if !usable(&current) {
            return Ok(false);
        }
        let sublog = sublog_keeping(core, inode, current.entry)?;
        write_past_end(core, current.block, span)?;
        let appended = PendingAppend {
            page: span.first_pg,
            block: current.block,
            entry: current.entry,
            version: current.version,
            end: span.end,
            crc: None,
            mtime_ns: now,
        };
        log_append(core, inode, f, slot, &appended, sublog, epoch)?;
        return Ok(true);
    }
    let mut pending = inode.pending_append.lock();
    // Read under the mutex: a pending append is logged under it.
    let current = slot.get();
    if !usable(&current) {
        return Ok(false);
    }
    let continues = pending
        .as_ref()
        .map(|p| p.page == span.first_pg && p.block == current.block && p.end == span.size_now);
    match continues {
        Some(true) => {}
        // Another page's (the end moved without logging it: never, as
        // every other change logs it first); copy on write.
        Some(false) => return Ok(false),
        None => {
            let current_crc = inode.log.data_crc_span(core, current.entry)?;
            let settled = match current_crc {
                Some(_) => inode.log.settle_for_overwrite(core, current.entry, false)?,
                None => false,
            };
            if current_crc.is_some_and(|c| c.end > span.size_now) && !settled {
                return Ok(false);
            }
            // Where the entry mapping the page checksums exactly its bytes
            // below the end, go on from its checksum (not from a settled
            // one: an overwrite in place, which settles the entry first,
            // may have changed the bytes it checksummed).
            let crc = current_crc
                .filter(|c| c.start == page_start && c.end == span.size_now && !settled)
                .map(|c| c.crc);
            *pending = Some(PendingAppend {
                page: span.first_pg,
                block: current.block,
                entry: current.entry,
                version: current.version,
                end: span.size_now,
                crc,
                mtime_ns: now,
            });
            if !inode.has_pending_append.swap(true, Ordering::AcqRel) {
                core.pending_appends.lock().push(inode.ino);
            }
        }
    }
    let p = pending.as_mut().expect("a pending append");
    write_past_end(core, p.block, span)?;
    if let Some(crc) = p.crc.as_mut() {
        let mut h = crc32fast::Hasher::new_with_initial_len(*crc, p.end - page_start);
        h.update(&ZERO_PAGE[..(span.off - span.size_now) as usize]);
        h.update(span.buf);
        *crc = h.finalize();
    }
    p.end = span.end;
    p.mtime_ns = now;
    // The bytes are in the block: readers may see them.
    f.size.fetch_max(span.end, Ordering::AcqRel);
    drop(pending);
    inode.log.note_unlogged_write(now);
    Ok(true)
}

/// Store a write at or past the end of file into `block`, the block of the
/// page holding the end, with zeros for the gap between.
fn write_past_end(core: &FsCore, block: u64, span: &WriteSpan<'_>) -> Result<()> {
    let at = block * PAGE;
    let gap = (span.off - span.size_now) as usize;
    if gap > 0 {
        core.media
            .nt_copy(at + span.size_now % PAGE, &ZERO_PAGE[..gap])?;
    }
    core.media.nt_copy(at + span.off % PAGE, span.buf)
}

/// Log the entry of appends written in place (`appended`) into sub-log
/// `sublog` and publish it: the page maps the same block one version up,
/// the entry that mapped it is superseded, and the new end is defined.
fn log_append(
    core: &FsCore,
    inode: &Inode,
    f: &FileData,
    slot: &crate::index::PageSlot,
    appended: &PendingAppend,
    sublog: usize,
    epoch: u32,
) -> Result<()> {
    let covered = appended.end - appended.page * PAGE;
    let crc = if core.deferring() {
        let crc = match appended.crc {
            Some(c) => c,
            None => core.media.crc32(appended.block * PAGE, covered)?,
        };
        Some(DataCrc {
            crc,
            below_end: covered < PAGE,
        })
    } else {
        None
    };
    let version = appended.version + 1;
    let entry = Entry::FileWrite {
        epoch,
        version,
        pgoff: appended.page,
        block: appended.block,
        npages: 1,
        file_end: appended.end,
        mtime_ns: appended.mtime_ns,
    };
    // One reference for the page, one for the size it defines.
    let locs = inode.log.append_with_crcs(
        core,
        sublog,
        &[(entry, 2)],
        appended.mtime_ns,
        crc.as_ref().map(std::slice::from_ref),
    )?;
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    if inode.attr_seq.load(Ordering::Acquire) as u32 != epoch {
        // As in `write_locked`: an attribute change raced with this write.
        let _ = log_write_mtime(core, inode, appended.mtime_ns);
    }
    slot.set(PageMapping {
        block: appended.block,
        entry: locs[0],
        version,
    });
    // The block stays: only the entry that mapped it before is superseded.
    core.release_later(inode, appended.entry, 1);
    note_new_end(core, inode, f, appended.end, locs[0]);
    Ok(())
}

/// Log the appends `inode` gathered in place ([`append_in_place`]), if it
/// holds any: before a sync snapshots the file's log, and before anything
/// else changes the file (a write, a truncate, a compaction), whose
/// entries must come after it.
pub(crate) fn log_pending_append(core: &FsCore, inode: &Inode) -> Result<()> {
    if !inode.has_pending_append.load(Ordering::Acquire) {
        return Ok(());
    }
    let Some(f) = inode.file.as_deref() else {
        return Ok(());
    };
    let mut pending = inode.pending_append.lock();
    let Some(appended) = *pending else {
        return Ok(());
    };
    if inode.freed.load(Ordering::Acquire) {
        // Unlinked and closed: its blocks went back with it.
        *pending = None;
        inode.has_pending_append.store(false, Ordering::Release);
        return Ok(());
    }
    let slot = f.index.slot(appended.page);
    let sublog = sublog_keeping(core, inode, appended.entry)?;
    let epoch = inode.attr_seq.load(Ordering::Acquire) as u32;
    log_append(core, inode, f, slot, &appended, sublog, epoch)?;
    *pending = None;
    inode.has_pending_append.store(false, Ordering::Release);
    Ok(())
}

/// The sub-log for an entry that keeps the bytes of the page `entry` maps:
/// it counts only with that entry (and with an unsynced truncate), as a
/// copy of the page would ([`sublog_after`]).
fn sublog_keeping(core: &FsCore, inode: &Inode, entry: crate::log::EntryLoc) -> Result<usize> {
    let copied = std::iter::once(entry).chain(unsynced_size_change(inode));
    sublog_after(core, inode, None, copied)
}

/// A page of zeros to copy from.
static ZERO_PAGE: [u8; PAGE as usize] = [0; PAGE as usize];

/// The page holding the end of file `size` if a write at `off` starts past
/// it (a hole between) and the end is inside it: that page's bytes past
/// the end are about to become file content ([`seal_tail`]).
fn tail_to_seal(size: u64, off: u64) -> Option<u64> {
    (off / PAGE > size / PAGE && !size.is_multiple_of(PAGE)).then_some(size / PAGE)
}

/// Copy the page holding the end of file with its bytes past the end
/// zeroed, under a checksum of the whole page, before a write past that
/// page makes those bytes part of the file. They may hold anything: an
/// append in place that a power cut dropped, or a fresh block's old bytes
/// where a page reached the disk torn past the bytes its entry checksums
/// ([`append_in_place`]). The caller holds the page's range. The write
/// that follows counts only with this entry (`sublog_after`), and this one
/// alone changes nothing a reader sees.
fn seal_tail(core: &FsCore, inode: &Inode, f: &FileData) -> Result<()> {
    let size = f.size();
    let Some(pg) = tail_to_seal(size, u64::MAX) else {
        return Ok(());
    };
    let slot = f.index.slot(pg);
    let prev = slot.get();
    if prev.block == 0 {
        return Ok(());
    }
    let sublog = sublog_keeping(core, inode, prev.entry)?;
    let (block, _) = core.alloc_blocks(1, Purpose::Data)?;
    let mut page = [0u8; PAGE as usize];
    let keep = (size % PAGE) as usize;
    let filled = core
        .media
        .read(prev.block * PAGE, &mut page[..keep])
        .and_then(|_| core.media.nt_copy(block * PAGE, &page));
    let crc = DataCrc::whole(crc32fast::hash(&page));
    let entry = Entry::FileWrite {
        epoch: inode.attr_seq.load(Ordering::Acquire) as u32,
        version: prev.version + 1,
        pgoff: pg,
        block,
        npages: 1,
        file_end: size,
        // The file's bytes do not change: its mtime does not move.
        mtime_ns: 0,
    };
    let locs = filled.and_then(|_| {
        let crcs = core.deferring().then_some(std::slice::from_ref(&crc));
        inode
            .log
            .append_with_crcs(core, sublog, &[(entry, 1)], 0, crcs)
    });
    let locs = match locs {
        Ok(l) => l,
        Err(e) => {
            core.blocks.free(block, 1);
            return Err(e);
        }
    };
    slot.set(PageMapping {
        block,
        entry: locs[0],
        version: prev.version + 1,
    });
    core.free_later(prev.block, 1);
    core.release_later(inode, prev.entry, 1);
    Ok(())
}

/// The entry of the inode's newest truncate or `set_len` if a sync may
/// not have made it durable yet ([`Inode::size_set_entry`]); two loads
/// when every size change is synced.
fn unsynced_size_change(inode: &Inode) -> Option<crate::log::EntryLoc> {
    let synced = inode.size_changes_synced.load(Ordering::Acquire)
        >= inode.size_changes.load(Ordering::Acquire);
    let loc = inode.size_set_entry.load(Ordering::Acquire);
    (!synced && loc != 0).then_some(loc)
}

/// The sub-log a write or truncate appends to, given the entries whose
/// bytes it copies (`copied`): it must count only with every one of them
/// that a power cut may still drop ([`crate::log::InodeLog::unsynced_sublog`]).
/// `fixed` is the sub-log the caller must use (a truncate's: the inode's
/// attribute sub-log); `None` lets a write take the one it depends on, or
/// its CPU's. Where the dependencies and the sub-log disagree (two unsynced
/// entries in different sub-logs, or one outside the fixed sub-log: a
/// thread that wrote a page from one CPU and comes back to it from
/// another with nothing synced between), the inode is synced first, so
/// nothing it copies can be dropped any more.
fn sublog_after(
    core: &FsCore,
    inode: &Inode,
    fixed: Option<usize>,
    copied: impl Iterator<Item = crate::log::EntryLoc>,
) -> Result<usize> {
    let mut deps: SmallVec<[usize; 2]> = SmallVec::new();
    for loc in copied {
        if let Some(s) = inode.log.unsynced_sublog(core, loc)
            && !deps.contains(&s)
        {
            deps.push(s);
        }
    }
    let want = fixed.unwrap_or_else(|| deps.first().copied().unwrap_or(inode.log.home_sublog()));
    if deps.iter().any(|&s| s != want) {
        core.sync_inode_entries(inode, false)?;
    }
    Ok(want)
}

/// Attribute changes for [`set_attrs`].
#[derive(Debug, Clone, Default)]
pub struct AttrChange {
    /// New permission bits.
    pub mode: Option<u32>,
    /// New owner.
    pub uid: Option<u32>,
    /// New group.
    pub gid: Option<u32>,
    /// New access time (ns).
    pub atime_ns: Option<u64>,
    /// New modification time (ns).
    pub mtime_ns: Option<u64>,
}

/// An extended-attribute change logged in the same atomic group as an
/// attribute change ([`set_attrs_and_xattr`]): `name` set to `value`, or
/// removed (`None`).
pub(crate) struct XattrEdit {
    /// The attribute's name, namespace prefix included.
    pub name: Vec<u8>,
    /// Its new value; `None` removes it.
    pub value: Option<Vec<u8>>,
}

/// Log and apply an attribute change (chmod, chown, utimes).
pub fn set_attrs(core: &FsCore, inode: &Inode, change: &AttrChange) -> Result<()> {
    set_attrs_and_xattr(core, inode, |_, _| Ok((Some(change.clone()), None)))
}

/// Log and apply an attribute change and an extended-attribute change
/// that must agree with it (a mode and the POSIX ACL it shows) as one
/// atomic group, so that no crash, and no sync between two appends,
/// leaves one without the other. `plan` decides both from the current
/// attributes and extended attributes; it runs with both mutexes held
/// (`attrs` before `xattrs`, as compaction takes them) until both are
/// logged and applied. Either part may be `None`; an `Err` from `plan`
/// changes nothing. Files are compacted here when due; directories by
/// the caller (`namespace::maybe_compact_dir_attrs`), as for
/// [`set_attrs`].
pub(crate) fn set_attrs_and_xattr(
    core: &FsCore,
    inode: &Inode,
    plan: impl FnOnce(
        &crate::inode::Attrs,
        &crate::inode::Xattrs,
    ) -> Result<(Option<AttrChange>, Option<XattrEdit>)>,
) -> Result<()> {
    core.check_writable()?;
    let mut attrs = inode.attrs.lock();
    let mut xattrs = inode.xattrs.lock();
    let (change, edit) = plan(&attrs, &xattrs)?;
    if change.is_none() && edit.is_none() {
        return Ok(());
    }
    let now = crate::time::now_ns();
    let mut entries: SmallVec<[(Entry, u32); 2]> = SmallVec::new();
    let mut next = attrs.clone();
    let seq = inode.attr_seq.load(Ordering::Acquire) + 1;
    if let Some(change) = &change {
        if let Some(m) = change.mode {
            next.mode = m & 0o7777;
        }
        if let Some(u) = change.uid {
            next.uid = u;
        }
        if let Some(g) = change.gid {
            next.gid = g;
        }
        if let Some(a) = change.atime_ns {
            next.atime_ns = a;
        }
        // Without an explicit mtime, publish the new sequence before reading
        // the writes' mtimes: a racing write whose mtime this misses sees the
        // sequence change after its append and logs its mtime itself
        // (`write_locked`). With one, the sequence is published after the
        // sub-logs' mtimes are reset, so a write that starts from it keeps
        // its mtime in memory exactly when recovery counts it.
        if change.mtime_ns.is_none() {
            inode.attr_seq.store(seq, Ordering::Release);
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        }
        next.mtime_ns = match change.mtime_ns {
            Some(m) => m,
            None => next.mtime_ns.max(inode.log.last_mtime_ns()),
        };
        next.ctime_ns = now;
        let size = inode.file.as_deref().map_or(0, FileData::size);
        entries.push((
            Entry::SetAttr {
                seq,
                size_set: false,
                size,
                mode: next.mode,
                uid: next.uid,
                gid: next.gid,
                atime_ns: next.atime_ns,
                mtime_ns: next.mtime_ns,
                ctime_ns: next.ctime_ns,
            },
            1,
        ));
    } else {
        next.ctime_ns = next.ctime_ns.max(now);
    }
    if let Some(e) = &edit {
        entries.push((
            Entry::Xattr {
                seq: xattrs.seq + 1,
                ctime_ns: now,
                name: e.name.clone(),
                value: e.value.clone(),
            },
            1,
        ));
    }
    inode
        .log
        .append(core, inode.log.attr_sublog(), &entries, 0)?;
    if let Some(change) = &change {
        if change.mtime_ns.is_some() {
            inode.log.reset_mtime();
        }
        inode.attr_seq.store(seq, Ordering::Release);
        inode
            .setid
            .store(next.mode & (S_ISUID | S_ISGID) != 0, Ordering::Relaxed);
    }
    inode
        .attr_entries
        .fetch_add(entries.len() as u64, Ordering::Relaxed);
    if let Some(e) = edit {
        xattrs.seq += 1;
        match e.value {
            Some(v) => xattrs.map.insert(e.name, v),
            None => xattrs.map.remove(&e.name),
        };
    }
    *attrs = next;
    drop(xattrs);
    drop(attrs);
    // Each attribute change leaves an entry recovery needs until the log is
    // rewritten: compact once they dominate, so chmod loops stay bounded
    // (directories: the caller, see `namespace::maybe_compact_dir_attrs`).
    if inode.dir.is_none() {
        maybe_compact(core, inode);
    }
    Ok(())
}

const S_ISUID: u32 = 0o4000;
const S_ISGID: u32 = 0o2000;
const S_IXGRP: u32 = 0o0010;

/// `mode` after a write or truncate by a process without `CAP_FSETID`, as
/// Linux (6.2 and later) does it on its own file systems: setuid cleared;
/// setgid cleared when group execute is set, and also without it unless
/// the writer belongs to the file's group (`writer_in_group`).
pub fn mode_without_setid(mode: u32, writer_in_group: bool) -> u32 {
    let mut m = mode & !S_ISUID;
    if m & S_ISGID != 0 && (m & S_IXGRP != 0 || !writer_in_group) {
        m &= !S_ISGID;
    }
    m
}

/// Clear the setuid/setgid bits a write by an unprivileged process clears
/// ([`mode_without_setid`]); `writer_in_group` is asked, with the file's
/// group, only when the answer matters. Costs one relaxed load when there
/// are no such bits. Returns whether the mode changed.
pub fn kill_setid(
    core: &FsCore,
    inode: &Inode,
    writer_in_group: impl FnOnce(u32) -> bool,
) -> Result<bool> {
    if !inode.setid.load(Ordering::Relaxed) {
        return Ok(false);
    }
    let (mode, gid) = {
        let attrs = inode.attrs.lock();
        (attrs.mode, attrs.gid)
    };
    let in_group = mode & (S_ISGID | S_IXGRP) == S_ISGID && writer_in_group(gid);
    let next = mode_without_setid(mode, in_group);
    if next == mode {
        return Ok(false);
    }
    let change = AttrChange {
        mode: Some(next),
        ..AttrChange::default()
    };
    set_attrs(core, inode, &change)?;
    Ok(true)
}

/// Make a write's mtime `mtime_ns` durable after an attribute change raced
/// with it: one attribute entry carrying the current attributes and the
/// mtime memory shows (the maximum over the sub-logs).
fn log_write_mtime(core: &FsCore, inode: &Inode, mtime_ns: u64) -> Result<()> {
    crate::core::sync::log_mtime_locked(core, inode, inode.attrs.lock(), mtime_ns)
}

/// Set the file's size (truncate or extend with zeros).
pub fn set_len(core: &FsCore, inode: &Inode, len: u64) -> Result<()> {
    core.check_writable()?;
    let f = inode.file()?;
    if len > MAX_FILE_SIZE {
        return Err(Error::FileTooLarge(format!("set_len({len})")));
    }
    let gate = core.writer_gate();
    let guard = f.truncate_lock.write();
    let result =
        log_pending_append(core, inode).and_then(|_| set_len_exclusive(core, inode, f, len));
    drop(guard);
    drop(gate);
    result?;
    maybe_compact(core, inode);
    Ok(())
}

/// Grow the file to `len` bytes if it is shorter (`fallocate` mode 0).
pub fn extend_to(core: &FsCore, inode: &Inode, len: u64) -> Result<()> {
    core.check_writable()?;
    let f = inode.file()?;
    if len > MAX_FILE_SIZE {
        return Err(Error::FileTooLarge(format!("allocate to {len} bytes")));
    }
    if f.size() >= len {
        return Ok(());
    }
    let _gate = core.writer_gate();
    let _guard = f.truncate_lock.write();
    if f.size() < len {
        log_pending_append(core, inode)?;
        set_len_exclusive(core, inode, f, len)
    } else {
        Ok(())
    }
}

fn set_len_exclusive(core: &FsCore, inode: &Inode, f: &FileData, len: u64) -> Result<()> {
    let old_size = f.size();
    // The page whose tail is copied zeroed: where a shrink cuts into a
    // page, or where the end of a growing file is (its bytes past the old
    // end may hold anything, see `append_in_place`, and are about to be
    // file content). Bytes below `keep` of it stay.
    let keep = len.min(old_size);
    let tail_pg = (len != old_size && !keep.is_multiple_of(PAGE)).then_some(keep / PAGE);
    // The size goes to the attribute sub-log; a zeroed tail page copies
    // the bytes of the entry that maps that page (before the attribute
    // mutex: the sync this may take logs the mtime under it).
    let copied = tail_pg
        .map(|pg| f.index.lookup(pg))
        .filter(|m| m.block != 0)
        .map(|m| m.entry);
    let sublog = sublog_after(
        core,
        inode,
        Some(inode.log.attr_sublog()),
        copied.into_iter(),
    )?;
    let mut attrs = inode.attrs.lock();
    let now = crate::time::now_ns();
    let seq = inode.attr_seq.load(Ordering::Acquire) + 1;
    let mut entries = vec![(
        Entry::SetAttr {
            seq,
            size_set: true,
            size: len,
            mode: attrs.mode,
            uid: attrs.uid,
            gid: attrs.gid,
            atime_ns: attrs.atime_ns,
            mtime_ns: now,
            ctime_ns: now,
        },
        1,
    )];
    // Copy the tail page with its bytes past `keep` zeroed, in the same
    // atomic group, so that what the old end of file hid stays hidden.
    let mut tail = None;
    if let Some(tail_pg) = tail_pg {
        let prev = f.index.lookup(tail_pg);
        if prev.block != 0 {
            let (block, _) = core.alloc_blocks(1, Purpose::Meta)?;
            let mut page = [0u8; PAGE as usize];
            let filled = core.media.read(prev.block * PAGE, &mut page).and_then(|_| {
                page[(keep % PAGE) as usize..].fill(0);
                core.media.nt_copy(block * PAGE, &page)
            });
            if let Err(e) = filled {
                core.blocks.free(block, 1);
                return Err(e);
            }
            entries.push((
                Entry::FileWrite {
                    epoch: seq as u32,
                    version: prev.version + 1,
                    pgoff: tail_pg,
                    block,
                    npages: 1,
                    file_end: len,
                    mtime_ns: now,
                },
                1,
            ));
            tail = Some((tail_pg, prev, block));
        }
    }
    let locs = match inode.log.append(core, sublog, &entries, now) {
        Ok(l) => l,
        Err(e) => {
            if let Some((_, _, b)) = tail {
                core.blocks.free(b, 1);
            }
            return Err(e);
        }
    };
    inode.attr_seq.store(seq, Ordering::Release);
    inode.attr_entries.fetch_add(1, Ordering::Relaxed);
    inode.size_set_entry.store(locs[0], Ordering::Release);

    let keep_pages = len.div_ceil(PAGE);
    for (pg, m) in f.index.mapped() {
        if pg >= keep_pages {
            f.index.slot(pg).set(PageMapping {
                block: 0,
                entry: 0,
                version: m.version,
            });
            core.free_later(m.block, 1);
            core.release_later(inode, m.entry, 1);
        }
    }
    if let Some((tail_pg, prev, block)) = tail {
        f.index.slot(tail_pg).set(PageMapping {
            block,
            entry: locs[1],
            version: prev.version + 1,
        });
        core.free_later(prev.block, 1);
        core.release_later(inode, prev.entry, 1);
    }
    if let Some((_, loc)) = f.size_definer.lock().take() {
        core.release_later(inode, loc, 1);
    }
    f.size.store(len, Ordering::Release);
    inode.size_changes.fetch_add(1, Ordering::AcqRel);
    attrs.mtime_ns = now;
    attrs.ctime_ns = now;
    Ok(())
}

/// Attribute entries a file's log may collect before it is compacted.
const COMPACT_AFTER_ATTR_ENTRIES: u64 = 64;

/// Compact the log of a file with many attribute entries (each truncate or
/// chmod leaves one that recovery needs until the log is rewritten).
pub(crate) fn maybe_compact(core: &FsCore, inode: &Inode) {
    if inode.attr_entries.load(Ordering::Relaxed) <= COMPACT_AFTER_ATTR_ENTRIES {
        return;
    }
    let Some(f) = inode.file.as_ref() else { return };
    let _guard = f.truncate_lock.write();
    // The rewrite takes the index and size as memory has them: the
    // appends gathered in place are logged first.
    if log_pending_append(core, inode).is_err() {
        return;
    }
    let attrs = inode.attrs.lock();
    // Best effort: on failure (a full pool) the old log stays valid.
    let _ = compact_file(core, inode, f, &attrs);
    drop(attrs);
}

/// Rewrite a file's log as: one attribute entry with the current size and
/// attributes, then one write entry per run of pages in the index. Caller
/// holds the truncate lock exclusively and the attribute mutex.
fn compact_file(core: &FsCore, inode: &Inode, f: &FileData, a: &crate::inode::Attrs) -> Result<()> {
    let seq = inode.attr_seq.load(Ordering::Acquire) + 1;
    let size = f.size();
    let mut entries = vec![(
        Entry::SetAttr {
            seq,
            size_set: true,
            size,
            mode: a.mode,
            uid: a.uid,
            gid: a.gid,
            atime_ns: a.atime_ns,
            mtime_ns: a.mtime_ns.max(inode.log.last_mtime_ns()),
            ctime_ns: a.ctime_ns,
        },
        1,
    )];
    // Runs of pages that are contiguous in the file and on media, with one version.
    let mut runs: Vec<(u64, u64, u64, u64)> = Vec::new();
    for (pg, m) in f.index.mapped() {
        match runs.last_mut() {
            Some((p0, b0, n, v))
                if *p0 + *n == pg
                    && *b0 + *n == m.block
                    && *v == m.version
                    && *n < u32::MAX as u64 =>
            {
                *n += 1
            }
            _ => runs.push((pg, m.block, 1, m.version)),
        }
    }
    for &(pg, block, n, version) in &runs {
        entries.push((
            Entry::FileWrite {
                epoch: seq as u32,
                version,
                pgoff: pg,
                block,
                npages: n as u32,
                file_end: ((pg + n) * PAGE).min(size),
                mtime_ns: 0,
            },
            n as u32,
        ));
    }
    // Extended attributes last (the write runs' locations are indexed
    // above); held until the switch, so no change lands in the old log.
    let xattrs = inode.xattrs.lock();
    entries.extend(xattrs.rewrite_entries(a.ctime_ns));
    let locs = inode.log.rewrite(
        core,
        core.sb.inode_offset(inode.ino) + INODE_LOG_ARRAY_OFFSET,
        &entries,
    )?;
    drop(xattrs);
    for (&(pg, block, n, version), &loc) in runs.iter().zip(&locs[1..]) {
        for i in 0..n {
            f.index.slot(pg + i).set(PageMapping {
                block: block + i,
                entry: loc,
                version,
            });
        }
    }
    inode.attr_seq.store(seq, Ordering::Release);
    inode.attr_entries.store(1, Ordering::Relaxed);
    // The rewritten log's attribute entry sets the size now.
    inode.size_set_entry.store(locs[0], Ordering::Release);
    *f.size_definer.lock() = None;
    Ok(())
}

/// Bytes of data pages the file occupies.
pub fn allocated_bytes(f: &FileData) -> u64 {
    f.index.mapped().len() as u64 * PAGE
}

/// Log the extended attributes a new inode starts with (the ACLs it
/// inherits, `xattr::inherited`) as one atomic group. Called before any
/// name reaches `child` (`namespace::create`), so the name never counts
/// without them: in
/// `pm` mode they are durable first; in `file` mode the caller has them
/// marked with the name (`FsCore::premark_unnamed`).
pub(crate) fn log_initial_xattrs(
    core: &FsCore,
    child: &Inode,
    xattrs: &[(Vec<u8>, Vec<u8>)],
) -> Result<()> {
    if xattrs.is_empty() {
        return Ok(());
    }
    let now = crate::time::now_ns();
    let mut x = child.xattrs.lock();
    let entries: Vec<(Entry, u32)> = (1..)
        .zip(xattrs)
        .map(|(i, (name, value))| {
            let e = Entry::Xattr {
                seq: x.seq + i,
                ctime_ns: now,
                name: name.clone(),
                value: Some(value.clone()),
            };
            (e, 1)
        })
        .collect();
    child
        .log
        .append(core, child.log.attr_sublog(), &entries, 0)?;
    child
        .attr_entries
        .fetch_add(entries.len() as u64, std::sync::atomic::Ordering::Relaxed);
    x.seq += entries.len() as u64;
    x.map.extend(xattrs.iter().cloned());
    drop(x);
    let mut a = child.attrs.lock();
    a.ctime_ns = a.ctime_ns.max(now);
    Ok(())
}
