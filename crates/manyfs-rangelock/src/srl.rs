//! Segment range locks: a file is cut into fixed-size segments, each with its
//! own [`SegmentWord`] on its own cache line. A range is held by taking its
//! segments' words in ascending order (so two ranges never deadlock).

use super::{Access, LockKind, RangeLock, SegmentWord};
use crossbeam_utils::CachePadded;
use manyfs_index::radix::{CasRadix, KEY_LIMIT};

type PaddedWord = CachePadded<SegmentWord>;

fn segments(start: u64, end: u64, shift: u32) -> std::ops::RangeInclusive<u64> {
    (start >> shift)..=((end - 1) >> shift)
}

fn lock_word(w: &SegmentWord, access: Access) {
    match access {
        Access::Read => w.lock_read(),
        Access::Write => w.lock_write(),
    }
}

/// The fast path of an acquisition: when `[start, end)` lies in one
/// segment, lock that segment's word (`word(segment)`) and return it.
#[inline]
fn lock_one_segment<'a>(
    start: u64,
    end: u64,
    shift: u32,
    access: Access,
    word: impl FnOnce(u64) -> &'a SegmentWord,
) -> Option<&'a SegmentWord> {
    (start >> shift == (end - 1) >> shift).then(|| {
        let w = word(start >> shift);
        lock_word(w, access);
        w
    })
}

fn unlock_word(w: &SegmentWord, access: Access) {
    match access {
        Access::Read => w.unlock_read(),
        Access::Write => w.unlock_write(),
    }
}

fn segment_shift(segment_size: u64) -> u32 {
    assert!(
        segment_size.is_power_of_two() && segment_size >= 4096,
        "segment size must be a power of two >= 4096"
    );
    segment_size.trailing_zeros()
}

/// SRL with lock words in a radix tree, allocated on first use by CAS.
pub struct SrlTree {
    words: CasRadix<PaddedWord>,
    shift: u32,
}

impl SrlTree {
    /// A lock with `segment_size`-byte segments (a power of two >= 4 KiB).
    pub fn new(segment_size: u64) -> Self {
        SrlTree {
            words: CasRadix::new(),
            shift: segment_shift(segment_size),
        }
    }

    fn word(&self, seg: u64) -> &SegmentWord {
        // Offsets past the tree's reach share its last word: still correct
        // (more exclusion, never less); files cannot grow that large anyway.
        self.words.get_or_insert(seg.min(KEY_LIMIT - 1))
    }

    /// Visit the words of `[start, end)` in ascending order, each once.
    fn for_each_word(&self, start: u64, end: u64, mut f: impl FnMut(&SegmentWord)) {
        let mut last = u64::MAX;
        for seg in segments(start, end, self.shift) {
            let key = seg.min(KEY_LIMIT - 1);
            if key == last {
                break;
            }
            last = key;
            f(self.word(seg));
        }
    }
}

impl RangeLock for SrlTree {
    fn acquire(&self, start: u64, end: u64, access: Access) -> Option<&SegmentWord> {
        if let Some(w) = lock_one_segment(start, end, self.shift, access, |s| self.word(s)) {
            return Some(w);
        }
        self.for_each_word(start, end, |w| lock_word(w, access));
        None
    }

    fn release(&self, start: u64, end: u64, access: Access) {
        self.for_each_word(start, end, |w| unlock_word(w, access));
    }

    fn memory_bytes(&self) -> usize {
        self.words.memory_bytes()
    }

    fn kind(&self) -> LockKind {
        LockKind::SrlTree
    }
}

/// SRL with lock words in one flat array covering the largest file allowed
/// (the array is zero-initialised memory from the OS, so untouched segments
/// cost address space, not RAM).
pub struct SrlArray {
    words: Box<[PaddedWord]>,
    shift: u32,
}

impl SrlArray {
    /// A lock covering `max_bytes` with `segment_size`-byte segments.
    pub fn new(segment_size: u64, max_bytes: u64) -> Self {
        let shift = segment_shift(segment_size);
        let n = (max_bytes.max(1).div_ceil(segment_size)).clamp(1, 1 << 28) as usize;
        SrlArray {
            words: zeroed_words(n),
            shift,
        }
    }

    fn word(&self, seg: u64) -> &SegmentWord {
        let i = (seg as usize).min(self.words.len() - 1);
        &self.words[i]
    }
}

/// Allocate `n` padded words with `alloc_zeroed`, which large allocations
/// satisfy with fresh zero pages instead of writing every word.
fn zeroed_words(n: usize) -> Box<[PaddedWord]> {
    let layout = std::alloc::Layout::array::<PaddedWord>(n).expect("segment array layout");
    // SAFETY: `layout` has non-zero size (n >= 1). An all-zero
    // CachePadded<SegmentWord> is a valid free word (an AtomicU32 of 0 plus
    // padding), so the zeroed memory is `n` initialised values; the pointer is
    // checked for null and then owned by the Box with the same layout.
    unsafe {
        let ptr = std::alloc::alloc_zeroed(layout) as *mut PaddedWord;
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, n))
    }
}

impl RangeLock for SrlArray {
    fn acquire(&self, start: u64, end: u64, access: Access) -> Option<&SegmentWord> {
        if let Some(w) = lock_one_segment(start, end, self.shift, access, |s| self.word(s)) {
            return Some(w);
        }
        let last_index = self.words.len() as u64 - 1;
        for seg in segments(start, end, self.shift) {
            lock_word(self.word(seg), access);
            if seg >= last_index {
                break;
            }
        }
        None
    }

    fn release(&self, start: u64, end: u64, access: Access) {
        let last_index = self.words.len() as u64 - 1;
        for seg in segments(start, end, self.shift) {
            unlock_word(self.word(seg), access);
            if seg >= last_index {
                break;
            }
        }
    }

    fn memory_bytes(&self) -> usize {
        self.words.len() * std::mem::size_of::<PaddedWord>()
    }

    fn kind(&self) -> LockKind {
        LockKind::SrlArray
    }
}
