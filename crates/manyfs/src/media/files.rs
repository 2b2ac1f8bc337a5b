//! The files behind a pool: creating, sizing, opening and locking a pool
//! or member file, and zero-filling them through the descriptor.

use super::Media;
use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::Path;

impl Media {
    /// Create (or replace, see [`Media::create_with`]) the file at `path`
    /// with `size` bytes reserved, locked exclusively: a pool file or one
    /// member of a pool.
    pub fn create_file(path: &Path, size: u64, replace_existing: bool) -> Result<File> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io(format!("create pool {}", path.display()), e))?;
        lock_exclusive(&file, path)?;
        if !replace_existing {
            let len = file
                .metadata()
                .map_err(|e| Error::io(format!("stat pool {}", path.display()), e))?
                .len();
            if len > 0 {
                return Err(Error::Exists(format!("pool {}", path.display())));
            }
        }
        file.set_len(0)
            .and_then(|_| file.set_len(size))
            .map_err(|e| Error::io(format!("size pool {}", path.display()), e))?;
        // Reserve the space now: a store into a hole the file system cannot
        // fill would kill the process with SIGBUS instead of returning ENOSPC.
        let len = libc::off_t::try_from(size)
            .map_err(|_| Error::InvalidArgument(format!("pool size {size} too large")))?;
        // SAFETY: posix_fallocate on a descriptor we own; no memory involved.
        let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len) };
        if rc != 0 && rc != libc::EOPNOTSUPP && rc != libc::EINVAL {
            let _ = std::fs::remove_file(path);
            return Err(Error::io(
                format!("reserve {size} bytes for pool {}", path.display()),
                std::io::Error::from_raw_os_error(rc),
            ));
        }
        Ok(file)
    }

    /// Write zeros over the whole pool file and make them durable (see
    /// `MkfsOptions::zero_fill`); through the descriptor in every mode.
    pub fn zero_fill(&self) -> Result<()> {
        use std::os::unix::fs::FileExt;
        const CHUNK: u64 = 1 << 20;
        let zeros = vec![0u8; CHUNK as usize];
        for m in &self.members {
            let mut off = 0;
            while off < m.len {
                let n = (m.len - off).min(CHUNK) as usize;
                m.file
                    .write_all_at(&zeros[..n], off)
                    .map_err(|e| Error::io(format!("zero-fill {}", m.path.display()), e))?;
                off += n as u64;
            }
            m.file
                .sync_data()
                .map_err(|e| Error::io(format!("zero-fill {}", m.path.display()), e))?;
        }
        Ok(())
    }

    /// Open the pool (or member) file at `path` and take its lock:
    /// exclusive when `writable`, shared otherwise (fsck).
    pub fn open_file(path: &Path, writable: bool) -> Result<File> {
        let file = OpenOptions::new()
            .read(true)
            .write(writable)
            .open(path)
            .map_err(|e| Error::io(format!("open pool {}", path.display()), e))?;
        if writable {
            lock_exclusive(&file, path)?;
        } else {
            lock_shared(&file, path)?;
        }
        Ok(file)
    }
}

pub(crate) fn lock_exclusive(file: &File, path: &Path) -> Result<()> {
    flock(file, path, libc::LOCK_EX | libc::LOCK_NB)
}

pub(crate) fn lock_shared(file: &File, path: &Path) -> Result<()> {
    flock(file, path, libc::LOCK_SH | libc::LOCK_NB)
}

fn flock(file: &File, path: &Path, op: libc::c_int) -> Result<()> {
    // A process that forks (to exec a program) holds a copy of our pool
    // descriptor until its exec closes it, and with it the lock of a pool
    // that was just unmounted. Retry for a moment before calling it busy.
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(500);
    loop {
        // SAFETY: flock on a descriptor we own.
        let rc = unsafe { libc::flock(file.as_raw_fd(), op) };
        if rc == 0 {
            return Ok(());
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(Error::io(format!("lock pool {}", path.display()), err));
        }
        if std::time::Instant::now() >= deadline {
            return Err(Error::Busy {
                path: path.to_path_buf(),
                owner: lock_owner(file),
            });
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// The process holding a `flock` on `file`, as `/proc/locks` lists it
/// (`1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF`: pid, then
/// major:minor:inode in hex, hex, decimal), other than this one.
fn lock_owner(file: &File) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let meta = file.metadata().ok()?;
    let (major, minor) = (libc::major(meta.dev()), libc::minor(meta.dev()));
    let id = format!("{major:02x}:{minor:02x}:{}", meta.ino());
    let me = std::process::id();
    std::fs::read_to_string("/proc/locks")
        .ok()?
        .lines()
        .map(|l| {
            l.split_whitespace()
                .filter(|f| *f != "->")
                .collect::<Vec<_>>()
        })
        .filter(|f| f.len() > 5 && f[1] == "FLOCK" && f[5] == id)
        .filter_map(|f| f[4].parse::<u32>().ok())
        .find(|&pid| pid != me)
}

#[cfg(test)]
mod tests {
    use super::super::Durability;
    use super::super::testing::pool;
    use super::*;

    #[test]
    fn second_writer_is_refused() {
        let (d, m) = pool(Durability::File);
        let err = Media::open(&d.path().join("p"), Durability::File, true).unwrap_err();
        assert!(matches!(err, Error::Busy { .. }), "{err}");
        // The holder is this process, which the message does not name.
        assert!(err.to_string().contains("another process"), "{err}");
        drop(m);
        Media::open(&d.path().join("p"), Durability::File, true).unwrap();
    }
}
