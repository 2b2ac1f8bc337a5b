//! Failure of the media: once a durability point failed, or the pool
//! file shrank under the mapping (a SIGBUS absorbed, a member shorter
//! than its mapping), every later store, sync and read answers `EIO` with
//! the first reason given.

use super::Media;
use crate::error::{Error, Result};
use std::fs::File;
use std::sync::atomic::Ordering;

impl Media {
    #[inline]
    pub(super) fn check_writable(&self) -> Result<()> {
        if !self.writable {
            return Err(Error::ReadOnly);
        }
        if self.has_failed() {
            return Err(self.failure_error());
        }
        Ok(())
    }

    /// The EIO error every operation on a failed media returns.
    pub(super) fn failure_error(&self) -> Error {
        let why = self
            .failure
            .get()
            .map_or("an earlier sync failed", String::as_str);
        Error::io(
            format!("{}: {why}; refusing further changes", self.path.display()),
            std::io::Error::from_raw_os_error(libc::EIO),
        )
    }

    /// Err(EIO), with the reason, once the media has failed.
    #[inline]
    pub fn check_alive(&self) -> Result<()> {
        if self.has_failed() {
            return Err(self.failure_error());
        }
        Ok(())
    }

    /// Fail the media: every later store, sync and read answers `EIO`
    /// with `reason` in the message. What is in the pool file stays as it
    /// is, for `fsck` and the next mount's recovery. The first reason
    /// given is kept.
    pub fn fail(&self, reason: impl Into<String>) {
        let _ = self.failure.set(reason.into());
        self.failed.store(true, Ordering::Release);
    }

    /// Err(EIO) when a SIGBUS was absorbed in this mapping (the pool file
    /// shrank, or lost pages, under it): the bytes just copied may be the
    /// handler's zeros. Fails the media on the first such report.
    #[inline]
    pub(super) fn check_faults(&self) -> Result<()> {
        if self.sigbus.faults() != 0 {
            self.fail_shrunk();
            return Err(self.failure_error());
        }
        Ok(())
    }

    pub(super) fn fail_shrunk(&self) {
        let mut now = Vec::new();
        for m in &self.members {
            match file_len(&m.file) {
                Ok(len) if len >= m.len => {}
                Ok(len) => now.push(format!("{}: {len} bytes now", m.path.display())),
                Err(e) => now.push(format!("{}: cannot stat it: {e}", m.path.display())),
            }
        }
        let now = if now.is_empty() {
            "every member file still has its length".to_string()
        } else {
            now.join(", ")
        };
        self.fail(format!(
            "the pool file lost pages under its mapping of {} bytes ({now}); \
             was it truncated while mounted?",
            self.len
        ));
    }

    /// Err(EIO) when a member file is now shorter than its mapping (another
    /// process truncated it): fails the media. One `lseek` per member (see
    /// [`file_len`]).
    pub fn check_size(&self) -> Result<()> {
        for m in &self.members {
            match file_len(&m.file) {
                Ok(len) if len >= m.len => {}
                Ok(len) => {
                    let which = if self.members.len() == 1 {
                        "the pool file".to_string()
                    } else {
                        format!("pool member {}", m.path.display())
                    };
                    self.fail(format!(
                        "{which} shrank from {} to {len} bytes while mounted",
                        m.len,
                    ));
                    return Err(self.failure_error());
                }
                Err(e) => return Err(Error::io(format!("stat pool {}", m.path.display()), e)),
            }
        }
        Ok(())
    }

    /// Whether the media has failed: a durability point failed, the pool
    /// file shrank under the mapping, or [`Media::fail`] was called.
    #[inline]
    pub fn has_failed(&self) -> bool {
        if self.failed.load(Ordering::Acquire) {
            return true;
        }
        if self.sigbus.faults() != 0 {
            self.fail_shrunk();
            return true;
        }
        false
    }
}

/// A file's current length. `lseek(SEEK_END)`, not `fstat`: a `stat` of
/// the file marks its change counter as queried, and the next write then
/// dirties the inode so that every later `msync` also writes the inode
/// (measured: +40 us per `fdatasync`-like sync on ext4).
fn file_len(file: &File) -> std::io::Result<u64> {
    use std::io::Seek;
    let mut f = file;
    f.seek(std::io::SeekFrom::End(0))
}

#[cfg(test)]
mod tests {
    use super::super::testing::new_member;
    use super::super::{Durability, Media};

    /// A member shorter than its mapping fails the media at the next sync,
    /// naming that member.
    #[test]
    fn a_shrunk_member_fails_the_media() {
        let dir = tempfile::tempdir().unwrap();
        let (p0, p1) = (dir.path().join("m0"), dir.path().join("m1"));
        let open = new_member;
        let m = Media::from_members(
            vec![open(&p0, 8192), open(&p1, 8192)],
            Durability::File,
            true,
        )
        .unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p1)
            .unwrap()
            .set_len(4096)
            .unwrap();
        let err = m.sync_all().unwrap_err().to_string();
        assert!(err.contains("m1") && err.contains("shrank"), "{err}");
        assert!(m.has_failed());
    }
}
