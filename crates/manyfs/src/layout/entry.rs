//! Log entries: one or more 64-byte slots, committed by an 8-byte word
//! written last.
//!
//! Header slot:
//!
//! | off | size | field |
//! |---:|---:|---|
//! | 0 | 1 | kind |
//! | 1 | 1 | slots in this entry (1..=MAX_ENTRY_SLOTS) |
//! | 2 | 2 | flags (bit 0: more entries of the same atomic group follow; bit 1: a write entry carries its data's checksum; bit 2: it carries the checksum of its data below its file end) |
//! | 4 | 4 | epoch (file entries: the inode's attribute sequence when written) |
//! | 8 | 8 | sequence (file data: page version; attributes and directories: per-inode counter) |
//! | 16 | 40 | payload |
//! | 56 | 4 | crc32 of all slots with bytes 56..64 zeroed |
//! | 60 | 4 | commit mark |
//!
//! A `FileWrite` header's payload is pgoff (16), block (24), npages (32),
//! the crc32 of its `npages` data blocks (36, only with flag bit 1; written
//! in `file` mode, see `log/durable.rs`) or, with flag bit 2 instead, of its
//! data's bytes below the file end (the entry's first
//! `file_end - pgoff * 4096` bytes, when that is fewer than its pages hold:
//! an extending write whose end falls inside its last page, whose bytes past
//! the end may later be written in place by an append), file end (40) and
//! mtime (48). A manyfs older than bit 2 reads such an entry as one without
//! a checksum.
//!
//! Bytes 56..64 form the commit word. It is stored with one failure-atomic
//! 8-byte store only after every other byte of the entry is durable, so after
//! a crash an entry is either committed with a matching checksum or ignored.

use super::*;

/// Commit mark in the high half of the commit word.
pub const COMMIT_MAGIC: u32 = 0xC0DE_C0DE;
/// Longest entry: a whole log page (an extended attribute with a long
/// value; version-2 entries had at most 10 slots, a same-directory rename
/// of two 255-byte names).
pub const MAX_ENTRY_SLOTS: usize = ENTRY_SLOTS_PER_PAGE as usize;
/// Bytes an extended-attribute entry can carry after its header slot:
/// its name and value together.
pub const MAX_XATTR_PAYLOAD: usize = (MAX_ENTRY_SLOTS - 1) * SLOT_SIZE as usize;
/// Flag: the next entry in this sub-log belongs to the same atomic group.
pub const FLAG_GROUP_CONTINUES: u16 = 1;
/// Flag of a `FileWrite` entry: bytes 36..40 hold the crc32 of the data
/// blocks it points to (all `npages` of them).
pub const FLAG_DATA_CRC: u16 = 2;
/// Flag of a `FileWrite` entry: bytes 36..40 hold the crc32 of its data's
/// bytes below its file end only ([`DataCrc::below_end`]).
pub const FLAG_DATA_CRC_BELOW_END: u16 = 4;

/// The checksum a `FileWrite` entry carries of the data it points to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataCrc {
    /// crc32 of the bytes covered.
    pub crc: u32,
    /// Whether it covers only the bytes below the entry's file end (the
    /// bytes past it belong to no file yet: an append may write them in
    /// place), rather than all its pages.
    pub below_end: bool,
}

/// A write entry's data checksum, with the file bytes it covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataCrcSpan {
    /// crc32 of file bytes `start..end` as the entry's blocks hold them.
    pub crc: u32,
    /// First file byte covered (the entry's first page).
    pub start: u64,
    /// The file offset just past the bytes covered: bytes of its blocks at
    /// and past it may change without invalidating the entry.
    pub end: u64,
}

impl DataCrc {
    /// A checksum of all the entry's pages.
    pub fn whole(crc: u32) -> DataCrc {
        DataCrc {
            crc,
            below_end: false,
        }
    }

    /// How many bytes from the entry's first block the checksum covers,
    /// for an entry of `npages` pages from file page `pgoff` that ends the
    /// file at `file_end`.
    pub fn covered(&self, pgoff: u64, npages: u32, file_end: u64) -> u64 {
        let whole = u64::from(npages) * BLOCK_SIZE;
        if self.below_end {
            file_end.saturating_sub(pgoff * BLOCK_SIZE).min(whole)
        } else {
            whole
        }
    }
}

const KIND_FILE_WRITE: u8 = 1;
const KIND_SET_ATTR: u8 = 2;
const KIND_DIR_ADD: u8 = 3;
const KIND_DIR_REMOVE: u8 = 4;
const KIND_DIR_RENAME: u8 = 5;
const KIND_XATTR: u8 = 6;

/// A decoded log entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// File pages `pgoff..pgoff+npages` now live in blocks `block..block+npages`.
    FileWrite {
        /// Attribute sequence current when the write happened.
        epoch: u32,
        /// Version of the pages (higher wins, per page).
        version: u64,
        /// First file page.
        pgoff: u64,
        /// First data block.
        block: u64,
        /// Number of pages.
        npages: u32,
        /// Byte offset just past the written bytes (grows the file size).
        file_end: u64,
        /// Modification time of the write.
        mtime_ns: u64,
    },
    /// Attributes after a chmod/chown/utimes/truncate.
    SetAttr {
        /// Per-inode attribute sequence (higher wins).
        seq: u64,
        /// Whether this entry set the size (truncate / set_len).
        size_set: bool,
        /// The size, if `size_set`.
        size: u64,
        /// Permission bits.
        mode: u32,
        /// Owner.
        uid: u32,
        /// Group.
        gid: u32,
        /// Access time.
        atime_ns: u64,
        /// Modification time.
        mtime_ns: u64,
        /// Change time.
        ctime_ns: u64,
    },
    /// A name now refers to an inode.
    DirAdd {
        /// Per-directory sequence.
        seq: u64,
        /// Target inode.
        ino: u64,
        /// Target generation.
        generation: u32,
        /// Target kind.
        kind: FileKind,
        /// Cross-directory rename transaction, or 0.
        txid: u64,
        /// The name.
        name: Vec<u8>,
    },
    /// A name no longer exists.
    DirRemove {
        /// Per-directory sequence.
        seq: u64,
        /// The inode it referred to.
        ino: u64,
        /// Cross-directory rename transaction, or 0.
        txid: u64,
        /// The name.
        name: Vec<u8>,
    },
    /// `old` was renamed to `new` in the same directory (replacing `new`).
    DirRename {
        /// Per-directory sequence.
        seq: u64,
        /// The inode renamed.
        ino: u64,
        /// Its generation.
        generation: u32,
        /// Its kind.
        kind: FileKind,
        /// Old name.
        old: Vec<u8>,
        /// New name.
        new: Vec<u8>,
    },
    /// An extended attribute was set (`value` is `Some`) or removed.
    /// The entry with the highest `seq` per name wins.
    Xattr {
        /// Per-inode extended-attribute sequence.
        seq: u64,
        /// Change time of the inode after this change.
        ctime_ns: u64,
        /// Full name, namespace prefix included (`user.foo`).
        name: Vec<u8>,
        /// The value, or `None` for a removal.
        value: Option<Vec<u8>>,
    },
}

/// An entry ready to be written: the bytes of every slot and the commit
/// word to store last.
#[derive(Debug, Clone)]
pub struct EncodedEntry {
    /// All slots. Bytes 56..64 of the first slot are zero for the last entry
    /// of a group (its commit word is stored separately, last) and hold the
    /// commit word for earlier entries of a group.
    pub body: smallvec::SmallVec<[u8; 128]>,
    /// The 8-byte commit word (checksum and commit mark).
    pub commit_word: u64,
}

impl EncodedEntry {
    /// Number of 64-byte slots.
    pub fn slots(&self) -> u64 {
        self.body.len() as u64 / SLOT_SIZE
    }
}

impl Entry {
    /// Encode; `continues` marks that the next entry of this sub-log belongs
    /// to the same atomic group.
    pub fn encode(&self, continues: bool) -> EncodedEntry {
        self.encode_with(continues, None)
    }

    /// Encode, with `data_crc` (the checksum of the data a `FileWrite`
    /// points to) recorded in the header; ignored for other kinds.
    pub fn encode_with(&self, continues: bool, data_crc: Option<DataCrc>) -> EncodedEntry {
        let mut flags = if continues { FLAG_GROUP_CONTINUES } else { 0 };
        let mut extra: smallvec::SmallVec<[u8; 64]> = smallvec::SmallVec::new();
        let mut h = [0u8; 64];
        let (kind, epoch, seq) = match self {
            Entry::FileWrite {
                epoch,
                version,
                pgoff,
                block,
                npages,
                file_end,
                mtime_ns,
            } => {
                put_u64(&mut h, 16, *pgoff);
                put_u64(&mut h, 24, *block);
                put_u32(&mut h, 32, *npages);
                if let Some(c) = data_crc {
                    put_u32(&mut h, 36, c.crc);
                    flags |= if c.below_end {
                        FLAG_DATA_CRC_BELOW_END
                    } else {
                        FLAG_DATA_CRC
                    };
                }
                put_u64(&mut h, 40, *file_end);
                put_u64(&mut h, 48, *mtime_ns);
                (KIND_FILE_WRITE, *epoch, *version)
            }
            Entry::SetAttr {
                seq,
                size_set,
                size,
                mode,
                uid,
                gid,
                atime_ns,
                mtime_ns,
                ctime_ns,
            } => {
                h[16] = u8::from(*size_set);
                put_u32(&mut h, 20, *mode);
                put_u32(&mut h, 24, *uid);
                put_u32(&mut h, 28, *gid);
                put_u64(&mut h, 32, *size);
                put_u64(&mut h, 40, *atime_ns);
                put_u64(&mut h, 48, *mtime_ns);
                extra.extend_from_slice(&ctime_ns.to_le_bytes());
                (KIND_SET_ATTR, 0, *seq)
            }
            Entry::DirAdd {
                seq,
                ino,
                generation,
                kind,
                txid,
                name,
            } => {
                put_u64(&mut h, 16, *ino);
                put_u32(&mut h, 24, *generation);
                h[28] = kind.code();
                h[29] = name.len() as u8;
                put_u64(&mut h, 32, *txid);
                extra.extend_from_slice(name);
                (KIND_DIR_ADD, 0, *seq)
            }
            Entry::DirRemove {
                seq,
                ino,
                txid,
                name,
            } => {
                put_u64(&mut h, 16, *ino);
                h[29] = name.len() as u8;
                put_u64(&mut h, 32, *txid);
                extra.extend_from_slice(name);
                (KIND_DIR_REMOVE, 0, *seq)
            }
            Entry::DirRename {
                seq,
                ino,
                generation,
                kind,
                old,
                new,
            } => {
                put_u64(&mut h, 16, *ino);
                put_u32(&mut h, 24, *generation);
                h[28] = kind.code();
                h[29] = old.len() as u8;
                h[30] = new.len() as u8;
                extra.extend_from_slice(old);
                extra.extend_from_slice(new);
                (KIND_DIR_RENAME, 0, *seq)
            }
            Entry::Xattr {
                seq,
                ctime_ns,
                name,
                value,
            } => {
                h[16] = name.len() as u8;
                h[17] = u8::from(value.is_some());
                let v = value.as_deref().unwrap_or_default();
                put_u32(&mut h, 20, v.len() as u32);
                put_u64(&mut h, 24, *ctime_ns);
                extra.extend_from_slice(name);
                extra.extend_from_slice(v);
                (KIND_XATTR, 0, *seq)
            }
        };
        let nslots = 1 + extra.len().div_ceil(SLOT_SIZE as usize);
        debug_assert!(nslots <= MAX_ENTRY_SLOTS);
        h[0] = kind;
        h[1] = nslots as u8;
        put_u16(&mut h, 2, flags);
        put_u32(&mut h, 4, epoch);
        put_u64(&mut h, 8, seq);
        let len = nslots * SLOT_SIZE as usize;
        // Zeroed in place when the slots fit inline (every entry but long
        // names and values): `smallvec!` fills through an out-of-line loop.
        let mut body: smallvec::SmallVec<[u8; 128]> = if len <= 128 {
            smallvec::SmallVec::from_buf_and_len([0u8; 128], len)
        } else {
            smallvec::smallvec![0u8; len]
        };
        body[..64].copy_from_slice(&h);
        body[64..64 + extra.len()].copy_from_slice(&extra);
        let crc = crc32fast::hash(&body);
        let commit_word = u64::from(crc) | (u64::from(COMMIT_MAGIC) << 32);
        if continues {
            body[56..64].copy_from_slice(&commit_word.to_le_bytes());
        }
        EncodedEntry { body, commit_word }
    }

    /// The data checksum a `FileWrite` entry's header slot carries, if any.
    pub fn data_crc(header: &[u8]) -> Option<DataCrc> {
        if header.len() < 64 || header[0] != KIND_FILE_WRITE {
            return None;
        }
        let flags = le_u16(header, 2);
        (flags & (FLAG_DATA_CRC | FLAG_DATA_CRC_BELOW_END) != 0).then(|| DataCrc {
            crc: le_u32(header, 36),
            below_end: flags & FLAG_DATA_CRC == 0,
        })
    }

    /// For a `FileWrite` header slot with a data checksum: that checksum
    /// and where it lies in the file.
    pub fn data_crc_span(header: &[u8]) -> Option<DataCrcSpan> {
        let c = Self::data_crc(header)?;
        let (pgoff, npages, file_end) =
            (le_u64(header, 16), le_u32(header, 32), le_u64(header, 40));
        let start = pgoff.saturating_mul(BLOCK_SIZE);
        Some(DataCrcSpan {
            crc: c.crc,
            start,
            end: start + c.covered(pgoff, npages, file_end),
        })
    }

    /// How many slots an entry whose header slot is `header` claims, if the
    /// header carries a commit mark. Used to know how much to read.
    pub fn claimed_slots(header: &[u8]) -> Option<usize> {
        if header.len() < 64 || le_u32(header, 60) != COMMIT_MAGIC {
            return None;
        }
        let n = header[1] as usize;
        (1..=MAX_ENTRY_SLOTS).contains(&n).then_some(n)
    }

    /// Decode a committed entry from its slots (`bytes.len()` must equal the
    /// claimed slot count times 64). Returns the entry and its flags, or
    /// `None` if it is not committed or fails its checksum.
    pub fn decode(bytes: &[u8]) -> Option<(Entry, u16)> {
        Self::decode_checked(bytes, checksum_ignored())
    }

    /// [`Entry::decode`], accepting an entry whose checksum does not match
    /// when `ignore_crc` (only ever true in a test build that planted
    /// `RecoveryBug::EntryChecksumIgnored`; a constant `false` without
    /// the `planted-bugs` feature).
    #[inline]
    fn decode_checked(bytes: &[u8], ignore_crc: bool) -> Option<(Entry, u16)> {
        let n = Self::claimed_slots(bytes)?;
        if bytes.len() != n * SLOT_SIZE as usize {
            return None;
        }
        let mut check = bytes.to_vec();
        check[56..64].fill(0);
        if crc32fast::hash(&check) != le_u32(bytes, 56) && !ignore_crc {
            return None;
        }
        let h = &bytes[..64];
        let extra = &bytes[64..];
        let flags = le_u16(h, 2);
        let epoch = le_u32(h, 4);
        let seq = le_u64(h, 8);
        let name = |from: usize, len: usize| -> Option<Vec<u8>> {
            let v = extra.get(from..from + len)?.to_vec();
            (!v.is_empty() && !v.contains(&0) && !v.contains(&b'/')).then_some(v)
        };
        let entry = match h[0] {
            KIND_FILE_WRITE => Entry::FileWrite {
                epoch,
                version: seq,
                pgoff: le_u64(h, 16),
                block: le_u64(h, 24),
                npages: le_u32(h, 32),
                file_end: le_u64(h, 40),
                mtime_ns: le_u64(h, 48),
            },
            KIND_SET_ATTR => Entry::SetAttr {
                seq,
                size_set: h[16] != 0,
                mode: le_u32(h, 20),
                uid: le_u32(h, 24),
                gid: le_u32(h, 28),
                size: le_u64(h, 32),
                atime_ns: le_u64(h, 40),
                mtime_ns: le_u64(h, 48),
                ctime_ns: u64::from_le_bytes(extra.get(..8)?.try_into().ok()?),
            },
            KIND_DIR_ADD => Entry::DirAdd {
                seq,
                ino: le_u64(h, 16),
                generation: le_u32(h, 24),
                kind: FileKind::from_code(h[28])?,
                txid: le_u64(h, 32),
                name: name(0, h[29] as usize)?,
            },
            KIND_DIR_REMOVE => Entry::DirRemove {
                seq,
                ino: le_u64(h, 16),
                txid: le_u64(h, 32),
                name: name(0, h[29] as usize)?,
            },
            KIND_DIR_RENAME => Entry::DirRename {
                seq,
                ino: le_u64(h, 16),
                generation: le_u32(h, 24),
                kind: FileKind::from_code(h[28])?,
                old: name(0, h[29] as usize)?,
                new: name(h[29] as usize, h[30] as usize)?,
            },
            KIND_XATTR => {
                let (nl, vl) = (h[16] as usize, le_u32(h, 20) as usize);
                let name = extra.get(..nl)?.to_vec();
                let value = extra.get(nl..nl.checked_add(vl)?)?.to_vec();
                if name.is_empty() || name.contains(&0) || h[17] > 1 || (h[17] == 0 && vl != 0) {
                    return None;
                }
                Entry::Xattr {
                    seq,
                    ctime_ns: le_u64(h, 24),
                    name,
                    value: (h[17] == 1).then_some(value),
                }
            }
            _ => return None,
        };
        Some((entry, flags))
    }
}

/// Footer of a log page (its last slot).
///
/// | off | size | field |
/// |---:|---:|---|
/// | 0 | 8 | next log page block (0 = end of chain) |
/// | 8 | 8 | owning inode |
/// | 16 | 4 | sub-log index |
/// | 20 | 4 | footer magic |
/// | 24 | 4 | durable mark: entries in slots below `mark & 0x7fff_ffff` are durable; bit 31 = sealed (the page is complete and `next` may be followed) |
/// | 28 | 4 | generation of the owning inode |
/// | 32 | 8 | page sequence (grows with every page a log links) |
/// | 40 | 8 | page sequence of the page `next` points to |
/// | 48 | 4 | checked count: entries in slots below it had everything they point to durable before an earlier sync completed; a checksummed write entry from there up to the mark is verified against its data at mount |
/// | 52 | 12 | zero |
///
/// The durable mark, generation and sequences are only read under the
/// `Marked` and `Checked` commit rules (pools last mounted in `file` mode),
/// the checked count only under `Checked`; see `log/durable.rs`.
pub const LOG_FOOTER_OFFSET: u64 = ENTRY_SLOTS_PER_PAGE * SLOT_SIZE;
/// Magic in a log page footer.
pub const LOG_PAGE_MAGIC: u32 = 0x4c4f_4750; // "LOGP"
/// Offset of the durable mark inside the footer.
pub const FOOTER_MARK: u64 = 24;
/// Offset of the owner's generation inside the footer.
pub const FOOTER_GENERATION: u64 = 28;
/// Offset of the checked count inside the footer.
pub const FOOTER_CHECKED: u64 = 48;
/// Offset of the page sequence inside the footer.
pub const FOOTER_SEQ: u64 = 32;
/// Offset of the next page's sequence inside the footer.
pub const FOOTER_NEXT_SEQ: u64 = 40;
/// Durable-mark bit: the page is complete and its `next` may be followed.
pub const MARK_SEALED: u32 = 1 << 31;
/// Word of a log array (after the sub-log heads) holding the lowest page
/// sequence any page of this log may carry: pages left on media by an older
/// log of the same inode carry lower ones.
pub const ARRAY_BASE_SEQ_WORD: usize = MAX_SUBLOGS;

/// A bug a test build plants in the whole process ([`plant_recovery_bug`],
/// the `planted-bugs` feature) to show that the crash explorer finds it.
///
/// Unlike [`crate::EngineBug`], which is planted in one mount, a recovery
/// bug must reach the mounts the explorer makes itself to check each crash
/// image, so it is **process-wide**: every decode of a log entry in the
/// process (every mount's recovery, `fsck`, a live mount's log scans) sees
/// it until [`clear_recovery_bugs`]. A test that plants one must run in a
/// test binary of its own (an integration-test file), not beside tests
/// that decode entries in parallel threads.
#[cfg(feature = "planted-bugs")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecoveryBug {
    /// [`Entry::decode`] accepts an entry whose CRC32 does not match its
    /// slots as long as its commit mark (and claimed slot count) is right.
    ///
    /// The commit word is stored only after every other byte of the entry
    /// is durable, so neither persistent memory's rules (the `pm` model,
    /// flushed lines, 8-byte atomic words) nor whole-page versions (the
    /// `pagecache` and `blockdev` models without tearing) leave a commit
    /// mark over old slots. Only a page that reaches the disk torn does:
    /// the explorer's page models with `Config::torn_pages` set (64 or
    /// 512 bytes) can leave a multi-slot entry (an extended attribute, a
    /// long name) with its header slot new and some later slot old, and
    /// recovery then takes those bytes as a name or value that was never
    /// written instead of ending the sub-log there.
    EntryChecksumIgnored,
}

/// Whether [`RecoveryBug::EntryChecksumIgnored`] is planted.
#[cfg(feature = "planted-bugs")]
static ENTRY_CHECKSUM_IGNORED: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Plant `bug` in the whole process (test builds with the `planted-bugs`
/// feature only) until [`clear_recovery_bugs`]: see [`RecoveryBug`] for
/// why it is process-wide and what that asks of the test planting it.
#[cfg(feature = "planted-bugs")]
pub fn plant_recovery_bug(bug: RecoveryBug) {
    match bug {
        RecoveryBug::EntryChecksumIgnored => {
            ENTRY_CHECKSUM_IGNORED.store(true, std::sync::atomic::Ordering::SeqCst)
        }
    }
}

/// Clear every bug [`plant_recovery_bug`] planted in this process.
#[cfg(feature = "planted-bugs")]
pub fn clear_recovery_bugs() {
    ENTRY_CHECKSUM_IGNORED.store(false, std::sync::atomic::Ordering::SeqCst);
}

/// Whether [`Entry::decode`] ignores entry checksums: never, but in a test
/// build that planted `RecoveryBug::EntryChecksumIgnored`.
#[inline]
fn checksum_ignored() -> bool {
    #[cfg(feature = "planted-bugs")]
    {
        ENTRY_CHECKSUM_IGNORED.load(std::sync::atomic::Ordering::Relaxed)
    }
    #[cfg(not(feature = "planted-bugs"))]
    {
        false
    }
}

/// Encode a fresh log page footer (next = 0, no durable entries).
pub fn encode_log_footer(ino: u64, sublog: u32, generation: u32, seq: u64) -> [u8; 64] {
    let mut f = [0u8; 64];
    put_u64(&mut f, 8, ino);
    put_u32(&mut f, 16, sublog);
    put_u32(&mut f, 20, LOG_PAGE_MAGIC);
    put_u32(&mut f, FOOTER_GENERATION as usize, generation);
    put_u64(&mut f, FOOTER_SEQ as usize, seq);
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples() -> Vec<Entry> {
        vec![
            Entry::FileWrite {
                epoch: 3,
                version: 9,
                pgoff: 12,
                block: 4000,
                npages: 2,
                file_end: 53248,
                mtime_ns: 77,
            },
            Entry::SetAttr {
                seq: 4,
                size_set: true,
                size: 100,
                mode: 0o644,
                uid: 1,
                gid: 2,
                atime_ns: 5,
                mtime_ns: 6,
                ctime_ns: 7,
            },
            Entry::DirAdd {
                seq: 1,
                ino: 5,
                generation: 2,
                kind: FileKind::Dir,
                txid: 0,
                name: vec![b'a'; 255],
            },
            Entry::DirRemove {
                seq: 2,
                ino: 5,
                txid: 8,
                name: b"x".to_vec(),
            },
            Entry::DirRename {
                seq: 3,
                ino: 5,
                generation: 2,
                kind: FileKind::File,
                old: vec![b'o'; 255],
                new: vec![b'n'; 255],
            },
            Entry::Xattr {
                seq: 7,
                ctime_ns: 99,
                name: b"user.big".to_vec(),
                value: Some(vec![0xa5; MAX_XATTR_PAYLOAD - 8]),
            },
            Entry::Xattr {
                seq: 8,
                ctime_ns: 100,
                name: vec![b'n'; 255],
                value: Some(Vec::new()),
            },
            Entry::Xattr {
                seq: 9,
                ctime_ns: 101,
                name: b"trusted.x".to_vec(),
                value: None,
            },
        ]
    }

    fn committed(e: &EncodedEntry) -> Vec<u8> {
        let mut b = e.body.to_vec();
        b[56..64].copy_from_slice(&e.commit_word.to_le_bytes());
        b
    }

    #[test]
    fn roundtrip() {
        for e in samples() {
            let enc = e.encode(true);
            assert!(enc.slots() as usize <= MAX_ENTRY_SLOTS);
            let (back, flags) = Entry::decode(&committed(&enc)).unwrap();
            assert_eq!(back, e);
            assert_eq!(flags, FLAG_GROUP_CONTINUES);
        }
    }

    #[test]
    fn a_checksum_below_the_end_covers_the_bytes_of_the_file_only() {
        let below = DataCrc {
            crc: 1,
            below_end: true,
        };
        // Two pages from page 3, the file ending 100 bytes into the second.
        let end = 4 * BLOCK_SIZE + 100;
        assert_eq!(below.covered(3, 2, end), BLOCK_SIZE + 100);
        assert_eq!(DataCrc::whole(1).covered(3, 2, end), 2 * BLOCK_SIZE);
        // An end past the entry's pages, or before them, stays inside them.
        assert_eq!(below.covered(3, 2, 9 * BLOCK_SIZE), 2 * BLOCK_SIZE);
        assert_eq!(below.covered(3, 2, 0), 0);
    }

    #[test]
    fn a_write_entry_carries_its_data_checksum() {
        for e in samples() {
            for below_end in [false, true] {
                let c = DataCrc {
                    crc: 0xDEAD_BEEF,
                    below_end,
                };
                let enc = e.encode_with(false, Some(c));
                let bytes = committed(&enc);
                let (back, flags) = Entry::decode(&bytes).unwrap();
                assert_eq!(back, e);
                assert_eq!(flags & FLAG_GROUP_CONTINUES, 0);
                let want = matches!(e, Entry::FileWrite { .. }).then_some(c);
                assert_eq!(Entry::data_crc(&bytes), want);
            }
            assert_eq!(Entry::data_crc(&committed(&e.encode(false))), None);
            assert_eq!(Entry::data_crc_span(&committed(&e.encode(false))), None);
        }
    }

    #[test]
    fn uncommitted_or_damaged_entries_are_ignored() {
        for e in samples() {
            let enc = e.encode(false);
            assert!(Entry::decode(&enc.body).is_none(), "no commit word");
            let good = committed(&enc);
            for i in (0..good.len()).step_by(7) {
                let mut bad = good.clone();
                bad[i] ^= 1;
                assert!(Entry::decode(&bad).is_none(), "flip at {i}");
            }
        }
    }

    /// [`RecoveryBug::EntryChecksumIgnored`] at the level of one decode
    /// (the process-wide switch itself is tested in its own process,
    /// `tests/planted_recovery_bug.rs`): an entry with a body byte
    /// flipped is taken when checksums are ignored, and refused when they
    /// are not; an entry without its commit mark is refused either way.
    #[cfg(feature = "planted-bugs")]
    #[test]
    fn an_ignored_checksum_accepts_a_damaged_committed_entry() {
        for e in samples() {
            let enc = e.encode(false);
            let mut bad = committed(&enc);
            // A byte of the payload: the last slot's first (a torn later
            // slot), or the header's payload for one-slot entries.
            let at = if bad.len() > 64 { bad.len() - 64 } else { 20 };
            bad[at] ^= 0x40;
            assert!(Entry::decode_checked(&bad, false).is_none(), "{e:?}");
            let (back, _) = Entry::decode_checked(&bad, true)
                .unwrap_or_else(|| panic!("taken with checksums ignored: {e:?}"));
            assert_ne!(back, e, "the damaged bytes are in the entry");
            assert!(Entry::decode_checked(&enc.body, true).is_none(), "no mark");
        }
    }
}
