//! The two ways a workload reaches a file system: in-process manyfs
//! ([`LibBackend`]) and any directory through `std::fs` and
//! `pread`/`pwrite` ([`DirBackend`]).
//!
//! Paths given to a backend are relative to its root and use `/`.

use crate::{BenchError, Result};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How to open a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Open {
    /// Create it if missing.
    pub create: bool,
    /// Cut it to zero length.
    pub truncate: bool,
    /// Writes through [`BenchFile::append`] go to the end.
    pub append: bool,
}

impl Open {
    /// Open an existing file for reading and writing.
    pub const EXISTING: Open = Open {
        create: false,
        truncate: false,
        append: false,
    };
    /// Create (or truncate) a file for reading and writing.
    pub const CREATE: Open = Open {
        create: true,
        truncate: true,
        append: false,
    };
}

/// An open file, shareable between threads.
pub trait BenchFile: Send + Sync {
    /// Read at `off` (positional, no shared cursor).
    fn read_at(&self, buf: &mut [u8], off: u64) -> Result<usize>;
    /// Write at `off` (positional, no shared cursor).
    fn write_at(&self, buf: &[u8], off: u64) -> Result<usize>;
    /// Append `buf` to the end of the file.
    fn append(&self, buf: &[u8]) -> Result<()>;
    /// Set the file length.
    fn set_len(&self, len: u64) -> Result<()>;
    /// Make written data and the file's metadata durable (`fsync`).
    fn sync_all(&self) -> Result<()>;
    /// The current length.
    fn size(&self) -> Result<u64>;
}

/// A file system the workloads run against.
pub trait Backend: Send + Sync {
    /// Create a directory and its parents.
    fn create_dir_all(&self, path: &str) -> Result<()>;
    /// Open a file.
    fn open(&self, path: &str, how: Open) -> Result<Arc<dyn BenchFile>>;
    /// Create an empty file that must not exist yet, and close it.
    fn create_file(&self, path: &str) -> Result<()>;
    /// Remove a file.
    fn remove_file(&self, path: &str) -> Result<()>;
    /// Rename a file.
    fn rename(&self, from: &str, to: &str) -> Result<()>;
    /// Resolve a path and return the size of what it names.
    fn stat(&self, path: &str) -> Result<u64>;
    /// List a directory; returns the number of entries.
    fn read_dir(&self, path: &str) -> Result<usize>;
}

/// Write all of `buf` at `off` or fail.
pub fn write_full(f: &dyn BenchFile, buf: &[u8], off: u64) -> Result<()> {
    let n = f.write_at(buf, off)?;
    if n != buf.len() {
        return Err(BenchError::Short {
            op: "write",
            got: n,
            want: buf.len(),
            offset: off,
        });
    }
    Ok(())
}

/// Read all of `buf` at `off` or fail.
pub fn read_full(f: &dyn BenchFile, buf: &mut [u8], off: u64) -> Result<()> {
    let want = buf.len();
    let n = f.read_at(buf, off)?;
    if n != want {
        return Err(BenchError::Short {
            op: "read",
            got: n,
            want,
            offset: off,
        });
    }
    Ok(())
}

// ---------------------------------------------------------------- dir: ----

/// A directory of any file system, used through `std::fs` and positional
/// syscalls.
pub struct DirBackend {
    root: PathBuf,
}

impl DirBackend {
    /// Use `root` (which must exist) as the root of all paths.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        DirBackend { root: root.into() }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn p(&self, path: &str) -> PathBuf {
        self.root.join(path.trim_start_matches('/'))
    }
}

struct DirFile {
    file: std::fs::File,
    path: PathBuf,
}

impl BenchFile for DirFile {
    fn read_at(&self, buf: &mut [u8], off: u64) -> Result<usize> {
        self.file
            .read_at(buf, off)
            .map_err(|e| BenchError::io("pread", &self.path, e))
    }
    fn write_at(&self, buf: &[u8], off: u64) -> Result<usize> {
        self.file
            .write_at(buf, off)
            .map_err(|e| BenchError::io("pwrite", &self.path, e))
    }
    fn append(&self, buf: &[u8]) -> Result<()> {
        use std::io::Write;
        (&self.file)
            .write_all(buf)
            .map_err(|e| BenchError::io("append", &self.path, e))
    }
    fn set_len(&self, len: u64) -> Result<()> {
        self.file
            .set_len(len)
            .map_err(|e| BenchError::io("ftruncate", &self.path, e))
    }
    fn sync_all(&self) -> Result<()> {
        self.file
            .sync_all()
            .map_err(|e| BenchError::io("fsync", &self.path, e))
    }
    fn size(&self) -> Result<u64> {
        self.file
            .metadata()
            .map(|m| m.len())
            .map_err(|e| BenchError::io("fstat", &self.path, e))
    }
}

impl Backend for DirBackend {
    fn create_dir_all(&self, path: &str) -> Result<()> {
        let p = self.p(path);
        std::fs::create_dir_all(&p).map_err(|e| BenchError::io("mkdir", p, e))
    }
    fn open(&self, path: &str, how: Open) -> Result<Arc<dyn BenchFile>> {
        let p = self.p(path);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(!how.append)
            .append(how.append)
            .create(how.create)
            .truncate(how.truncate && !how.append)
            .open(&p)
            .map_err(|e| BenchError::io("open", &p, e))?;
        Ok(Arc::new(DirFile { file, path: p }))
    }
    fn create_file(&self, path: &str) -> Result<()> {
        let p = self.p(path);
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&p)
            .map(drop)
            .map_err(|e| BenchError::io("create", p, e))
    }
    fn remove_file(&self, path: &str) -> Result<()> {
        let p = self.p(path);
        std::fs::remove_file(&p).map_err(|e| BenchError::io("unlink", p, e))
    }
    fn rename(&self, from: &str, to: &str) -> Result<()> {
        let (a, b) = (self.p(from), self.p(to));
        std::fs::rename(&a, &b).map_err(|e| BenchError::io("rename", a, e))
    }
    fn stat(&self, path: &str) -> Result<u64> {
        let p = self.p(path);
        std::fs::metadata(&p)
            .map(|m| m.len())
            .map_err(|e| BenchError::io("stat", p, e))
    }
    fn read_dir(&self, path: &str) -> Result<usize> {
        let p = self.p(path);
        let rd = std::fs::read_dir(&p).map_err(|e| BenchError::io("opendir", &p, e))?;
        let mut n = 0;
        for e in rd {
            e.map_err(|e| BenchError::io("readdir", &p, e))?;
            n += 1;
        }
        Ok(n)
    }
}

// ---------------------------------------------------------------- lib: ----

/// In-process manyfs.
pub struct LibBackend {
    fs: manyfs::Fs,
}

impl LibBackend {
    /// Drive `fs`.
    pub fn new(fs: manyfs::Fs) -> Self {
        LibBackend { fs }
    }

    /// The mounted file system.
    pub fn fs(&self) -> &manyfs::Fs {
        &self.fs
    }

    /// Give the file system back (to unmount it).
    pub fn into_fs(self) -> manyfs::Fs {
        self.fs
    }
}

fn abs(path: &str) -> String {
    if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    }
}

struct LibFile {
    file: manyfs::File,
    path: String,
}

impl BenchFile for LibFile {
    fn read_at(&self, buf: &mut [u8], off: u64) -> Result<usize> {
        self.file
            .read_at(buf, off)
            .map_err(|e| BenchError::fs("read_at", &self.path, e))
    }
    fn write_at(&self, buf: &[u8], off: u64) -> Result<usize> {
        self.file
            .write_at(buf, off)
            .map_err(|e| BenchError::fs("write_at", &self.path, e))
    }
    fn append(&self, buf: &[u8]) -> Result<()> {
        self.file
            .append(buf)
            .map(drop)
            .map_err(|e| BenchError::fs("append", &self.path, e))
    }
    fn set_len(&self, len: u64) -> Result<()> {
        self.file
            .set_len(len)
            .map_err(|e| BenchError::fs("set_len", &self.path, e))
    }
    fn sync_all(&self) -> Result<()> {
        self.file
            .sync_all()
            .map_err(|e| BenchError::fs("sync_all", &self.path, e))
    }
    fn size(&self) -> Result<u64> {
        self.file
            .metadata()
            .map(|m| m.size)
            .map_err(|e| BenchError::fs("metadata", &self.path, e))
    }
}

impl Backend for LibBackend {
    fn create_dir_all(&self, path: &str) -> Result<()> {
        let p = abs(path);
        self.fs
            .create_dir_all(&p)
            .map_err(|e| BenchError::fs("create_dir_all", p, e))
    }
    fn open(&self, path: &str, how: Open) -> Result<Arc<dyn BenchFile>> {
        let p = abs(path);
        let file = manyfs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(how.create)
            .truncate(how.truncate)
            .open(&self.fs, &p)
            .map_err(|e| BenchError::fs("open", &p, e))?;
        Ok(Arc::new(LibFile { file, path: p }))
    }
    fn create_file(&self, path: &str) -> Result<()> {
        let p = abs(path);
        manyfs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&self.fs, &p)
            .map(drop)
            .map_err(|e| BenchError::fs("create", p, e))
    }
    fn remove_file(&self, path: &str) -> Result<()> {
        let p = abs(path);
        self.fs
            .remove_file(&p)
            .map_err(|e| BenchError::fs("remove_file", p, e))
    }
    fn rename(&self, from: &str, to: &str) -> Result<()> {
        let (a, b) = (abs(from), abs(to));
        self.fs
            .rename(&a, &b)
            .map_err(|e| BenchError::fs("rename", a, e))
    }
    fn stat(&self, path: &str) -> Result<u64> {
        let p = abs(path);
        self.fs
            .metadata(&p)
            .map(|m| m.size)
            .map_err(|e| BenchError::fs("metadata", p, e))
    }
    fn read_dir(&self, path: &str) -> Result<usize> {
        let p = abs(path);
        self.fs
            .read_dir(&p)
            .map(|v| v.len())
            .map_err(|e| BenchError::fs("read_dir", p, e))
    }
}
