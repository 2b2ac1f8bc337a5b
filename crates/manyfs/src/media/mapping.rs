//! The mapping: a pool's member files mapped side by side into one
//! reserved address range, and what is known of each member.

use super::{Durability, FlushInstr, Media, sigbus};
use crate::error::{Error, Result};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// One member file of a pool and where it lies in the pool's address
/// space.
#[derive(Debug)]
pub(super) struct Member {
    /// Held open for the lifetime of the mapping: it carries the flock that
    /// keeps a second process from mounting the same pool.
    pub(super) file: File,
    pub(super) path: PathBuf,
    /// Byte offset of the member's first byte in the pool.
    pub(super) start: u64,
    /// Bytes of the member mapped (its file may be longer: a single-file
    /// pool maps its whole file, a member of a multi-member pool its
    /// blocks).
    pub(super) len: u64,
    /// The NUMA node the member's device belongs to.
    pub(super) node: u32,
}

/// A member file opened (and locked) for [`Media::from_members`].
#[derive(Debug)]
pub(crate) struct OpenMember {
    /// The open, locked file.
    pub file: File,
    /// Its path (for messages).
    pub path: PathBuf,
    /// Bytes of it to map.
    pub len: u64,
    /// Its NUMA node.
    pub node: u32,
}

/// What `Media::members` tells about one member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MemberInfo {
    /// The member file's path.
    pub path: PathBuf,
    /// Byte offset of its first byte in the pool.
    pub start: u64,
    /// Its mapped length in bytes.
    pub len: u64,
    /// Its NUMA node.
    pub node: u32,
}

impl Media {
    /// Create the pool file at `path` with `size` bytes and map it,
    /// replacing an existing file (tests).
    #[cfg(test)]
    pub fn create(path: &Path, size: u64, mode: Durability) -> Result<Media> {
        Self::create_with(path, size, mode, true)
    }

    /// Create the pool file at `path` with `size` bytes and map it; an
    /// existing non-empty file at `path` is only
    /// replaced when `replace_existing`; otherwise the call fails with
    /// [`Error::Exists`] and leaves the file untouched. (The check is made
    /// under the pool's exclusive lock, so it cannot race with a mount.)
    pub fn create_with(
        path: &Path,
        size: u64,
        mode: Durability,
        replace_existing: bool,
    ) -> Result<Media> {
        let file = Self::create_file(path, size, replace_existing)?;
        Self::from_members(
            vec![OpenMember {
                file,
                path: path.to_path_buf(),
                len: size,
                node: 0,
            }],
            mode,
            true,
        )
    }

    /// Map an existing single-file pool. `writable == false` maps it
    /// read-only (fsck).
    #[cfg(test)]
    pub fn open(path: &Path, mode: Durability, writable: bool) -> Result<Media> {
        let file = Self::open_file(path, writable)?;
        let len = file
            .metadata()
            .map_err(|e| Error::io(format!("stat pool {}", path.display()), e))?
            .len();
        Self::from_members(
            vec![OpenMember {
                file,
                path: path.to_path_buf(),
                len,
                node: 0,
            }],
            mode,
            writable,
        )
    }

    /// Map `members` side by side, member 0 at offset 0: one anonymous
    /// `PROT_NONE` reservation of the whole pool, each member mapped over
    /// its part with `MAP_FIXED`. Every member but the last must have a
    /// whole number of pages.
    pub fn from_members(
        members: Vec<OpenMember>,
        mode: Durability,
        writable: bool,
    ) -> Result<Media> {
        let page = page_size() as u64;
        let Some(first) = members.first() else {
            return Err(Error::InvalidArgument("a pool needs a member".into()));
        };
        let path = first.path.clone();
        let mut total: u64 = 0;
        for (i, m) in members.iter().enumerate() {
            if m.len == 0 {
                return Err(Error::corrupt(
                    m.path.display().to_string(),
                    "pool file is empty",
                ));
            }
            if i + 1 < members.len() && m.len % page != 0 {
                return Err(Error::InvalidArgument(format!(
                    "{}: member of {} bytes is not a whole number of pages",
                    m.path.display(),
                    m.len
                )));
            }
            total = total.checked_add(m.len).ok_or_else(|| {
                Error::InvalidArgument(format!("{}: pool too large", path.display()))
            })?;
        }
        let too_large = || Error::InvalidArgument(format!("{}: pool too large", path.display()));
        let len = usize::try_from(total).map_err(|_| too_large())?;
        let reserved = usize::try_from(total.div_ceil(page) * page).map_err(|_| too_large())?;
        // SAFETY: an anonymous PROT_NONE mapping at an address of the
        // kernel's choice touches no existing memory; the result is checked
        // against MAP_FAILED.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                reserved,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(Error::io(
                format!(
                    "reserve {total} bytes of address space for pool {}",
                    path.display()
                ),
                std::io::Error::last_os_error(),
            ));
        }
        let prot = if writable {
            libc::PROT_READ | libc::PROT_WRITE
        } else {
            libc::PROT_READ
        };
        let flags = if mode == Durability::Pm && writable {
            libc::MAP_SHARED_VALIDATE | libc::MAP_SYNC
        } else {
            libc::MAP_SHARED
        };
        let mut mapped = Vec::with_capacity(members.len());
        let mut start = 0u64;
        for m in members {
            // SAFETY: `base + start .. + m.len` lies inside the reservation
            // made above (the lengths sum to `total` <= `reserved`), which
            // this function owns, so MAP_FIXED replaces only our own
            // PROT_NONE pages; the descriptor is ours; the result is
            // checked against MAP_FAILED.
            let ptr = unsafe {
                libc::mmap(
                    base.cast::<u8>().add(start as usize).cast(),
                    m.len as usize,
                    prot,
                    flags | libc::MAP_FIXED,
                    m.file.as_raw_fd(),
                    0,
                )
            };
            if ptr == libc::MAP_FAILED {
                let err = std::io::Error::last_os_error();
                // SAFETY: `base`/`reserved` is the reservation made above,
                // unmapped once here (members already mapped into it go
                // with it); nothing refers into it yet.
                unsafe { libc::munmap(base, reserved) };
                let hint = if mode == Durability::Pm {
                    " (pm mode needs a DAX file system; use --durability file otherwise)"
                } else {
                    ""
                };
                return Err(Error::io(
                    format!("map pool {}{hint}", m.path.display()),
                    err,
                ));
            }
            mapped.push(Member {
                file: m.file,
                path: m.path,
                start,
                len: m.len,
                node: m.node,
            });
            start += m.len;
        }
        // A page dirtied through the mapping costs a journaling file
        // system a commit at each durability point; tmpfs has no journal
        // and no write-back, so there the mapping's plain copy is cheaper
        // than a system call per store, and durable exactly as well.
        let stores_via_fd =
            mode == Durability::File && !mapped.iter().all(|m| super::numa::on_tmpfs(&m.path));
        Ok(Media {
            base: base.cast(),
            len,
            reserved,
            mode,
            stores_via_fd,
            flush: FlushInstr::detect(),
            writable,
            path,
            members: mapped,
            observer: None,
            failed: std::sync::atomic::AtomicBool::new(false),
            failure: std::sync::OnceLock::new(),
            sigbus: sigbus::Registration::new(base.cast(), len),
            remote: None,
            bwcap: None,
            device: None,
            persisted: crate::cpu::Counters::new(),
        })
    }

    /// The member files, in pool order.
    pub fn members(&self) -> Vec<MemberInfo> {
        self.members
            .iter()
            .map(|m| MemberInfo {
                path: m.path.clone(),
                start: m.start,
                len: m.len,
                node: m.node,
            })
            .collect()
    }

    /// The pieces of `[off, off+len)` (already bounds-checked) per member:
    /// `(member, offset in the member's file, offset in the pool, length)`.
    #[inline]
    pub(super) fn pieces(
        &self,
        off: u64,
        len: u64,
    ) -> impl Iterator<Item = (&Member, u64, u64, u64)> + '_ {
        let end = off + len;
        let first = self.members.partition_point(|m| m.start + m.len <= off);
        self.members[first.min(self.members.len())..]
            .iter()
            .take_while(move |m| m.start < end)
            .filter_map(move |m| {
                let s = off.max(m.start);
                let e = end.min(m.start + m.len);
                (e > s).then(|| (m, s - m.start, s, e - s))
            })
    }
}

impl Drop for Media {
    fn drop(&mut self) {
        // Out of the fault table before the range can be reused.
        self.sigbus.unregister();
        // SAFETY: `base`/`reserved` is the reservation made by a successful
        // mmap, with every member mapped inside it; unmapped exactly once,
        // here (the members' mappings go with it); no references into the
        // mapping outlive `self`.
        unsafe {
            libc::munmap(self.base.cast(), self.reserved);
        }
    }
}

pub(super) fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as usize } else { 4096 }
}

#[cfg(test)]
mod tests {
    use super::super::testing::new_member;
    use super::*;

    /// Two member files mapped back to back: stores, reads, atomics and
    /// ranged syncs that cross the boundary reach each file at its own
    /// offsets, in every mode.
    #[test]
    fn members_are_one_address_space() {
        for mode in [Durability::File, Durability::Dram] {
            let dir = tempfile::tempdir().unwrap();
            let (p0, p1) = (dir.path().join("m0"), dir.path().join("m1"));
            let open = new_member;
            let m =
                Media::from_members(vec![open(&p0, 8192), open(&p1, 16384)], mode, true).unwrap();
            assert_eq!(m.len(), 8192 + 16384);
            let data: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
            m.store(8192 - 500, &data).unwrap();
            m.nt_copy(8192 - 3, &[9u8; 6]).unwrap();
            m.store_u64(8192 + 4096 + 64, 0x1234).unwrap();
            m.persist(0, m.len() as usize).unwrap();
            m.sync_blocks(&mut vec![1, 2, 3]).unwrap();
            m.sync_block_ranges(&mut vec![(0, 1), (1, 3), (4, 6)])
                .unwrap();
            m.sync_all().unwrap();
            let mut want = data.clone();
            want[497..503].copy_from_slice(&[9u8; 6]);
            assert_eq!(m.read_vec(8192 - 500, 1000).unwrap(), want);
            assert_eq!(m.load_u64(8192 + 4096 + 64).unwrap(), 0x1234);
            drop(m);
            let (f0, f1) = (std::fs::read(&p0).unwrap(), std::fs::read(&p1).unwrap());
            assert_eq!(f0[8192 - 500..], want[..500]);
            assert_eq!(f1[..500], want[500..]);
            assert_eq!(f1[4096 + 64..4096 + 72], 0x1234u64.to_le_bytes());
            assert!(m_out_of_bounds(&p0, &p1));
        }
    }

    /// Reopened read-only, the pair refuses a range past the last member.
    fn m_out_of_bounds(p0: &Path, p1: &Path) -> bool {
        let open = |p: &Path| OpenMember {
            file: Media::open_file(p, false).unwrap(),
            path: p.to_path_buf(),
            len: std::fs::metadata(p).unwrap().len(),
            node: 1,
        };
        let m = Media::from_members(vec![open(p0), open(p1)], Durability::File, false).unwrap();
        assert_eq!(m.members()[1].start, 8192);
        assert_eq!(m.members()[1].node, 1);
        m.read_vec(m.len() - 4, 8).is_err() && m.read_vec(m.len() - 8, 8).is_ok()
    }

    /// A member that is not a whole number of pages cannot be followed by
    /// another.
    #[test]
    fn a_member_must_end_on_a_page() {
        let dir = tempfile::tempdir().unwrap();
        let (p0, p1) = (dir.path().join("m0"), dir.path().join("m1"));
        let open = new_member;
        let err = Media::from_members(
            vec![open(&p0, 5000), open(&p1, 8192)],
            Durability::File,
            true,
        )
        .unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        assert!(matches!(
            Media::from_members(Vec::new(), Durability::File, true),
            Err(Error::InvalidArgument(_))
        ));
    }
}
