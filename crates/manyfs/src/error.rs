//! The one error type of the library. Every variant maps to a POSIX errno so
//! the FUSE adapter and the command line can report it faithfully.

use std::path::PathBuf;

/// Result alias used throughout manyfs.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in manyfs, with enough context to print one
/// readable line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A path component or inode does not exist.
    #[error("{0}: no such file or directory")]
    NotFound(String),
    /// The name already exists.
    #[error("{0}: file exists")]
    Exists(String),
    /// The directory still has entries.
    #[error("{0}: directory not empty")]
    NotEmpty(String),
    /// A directory was given where a non-directory is needed.
    #[error("{0}: is a directory")]
    IsDir(String),
    /// A non-directory was given where a directory is needed.
    #[error("{0}: not a directory")]
    NotDir(String),
    /// A name longer than [`crate::layout::MAX_NAME_LEN`] bytes.
    #[error("{0}: file name too long")]
    NameTooLong(String),
    /// The pool has no free blocks or inodes left.
    #[error("no space left in pool ({0})")]
    NoSpace(&'static str),
    /// The arguments make no sense (bad offset, bad option, moving a
    /// directory into itself, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The file would exceed the largest size manyfs supports.
    #[error("file too large: {0}")]
    FileTooLarge(String),
    /// Too many symbolic links while resolving a path.
    #[error("{0}: too many levels of symbolic links")]
    Loop(String),
    /// A symlink on a path leads out of the pool (only with
    /// [`MountOptions::symlinks_leave_pool`](crate::MountOptions::symlinks_leave_pool)):
    /// `rest` is what is left to resolve outside, an absolute path, or one
    /// relative to where the pool's root is seen (starting with `..`).
    #[error("{}: a symbolic link leads out of the pool", show_bytes(rest))]
    LeavesPool {
        /// The path left to resolve outside the pool.
        rest: Vec<u8>,
    },
    /// The handle was not opened for this kind of access.
    #[error("bad file handle: {0}")]
    BadHandle(&'static str),
    /// The operation is not permitted for this caller (sticky directories,
    /// hard links to directories).
    #[error("{0}: operation not permitted")]
    NotPermitted(String),
    /// The file system is mounted read-only.
    #[error("read-only file system")]
    ReadOnly,
    /// No such extended attribute.
    #[error("{0}: no such attribute")]
    NoData(String),
    /// A result does not fit the buffer offered, or a name is too long for
    /// an extended attribute.
    #[error("{0}: out of range")]
    OutOfRange(String),
    /// The operation or name is not supported (an extended attribute
    /// namespace manyfs does not keep, a rename flag).
    #[error("{0}: operation not supported")]
    NotSupported(String),
    /// Another process has the pool mounted.
    #[error("{path}: pool is in use by {} (already mounted?)", owner_text(*owner))]
    Busy {
        /// The pool file.
        path: PathBuf,
        /// The process that holds the pool's lock, where `/proc/locks`
        /// names it.
        owner: Option<u32>,
    },
    /// [`Fs::close`](crate::Fs::close) found handles of the mount still
    /// open (files or directories) after its wait: the pool stays open.
    #[error("{}: handles of the mount are still open after {waited_ms} ms", path.display())]
    StillOpen {
        /// The pool file.
        path: PathBuf,
        /// How long the close waited for them.
        waited_ms: u64,
    },
    /// A member file of a pool with several members is missing, or is not
    /// the member the pool's member table names.
    #[error("{}: pool member {index}: {problem}", path.display())]
    Member {
        /// The member file's path, as the pool's table resolves it.
        path: PathBuf,
        /// The member's index in the pool (0 is the pool file).
        index: u32,
        /// What is wrong with it.
        problem: MemberProblem,
    },
    /// A tiered pool's data device is missing, too short, or not the
    /// device the pool recorded (`crate::MkfsOptions::data`).
    #[error("{}: data device: {problem}", path.display())]
    DataDevice {
        /// The device's path (as recorded in the pool, or as overridden).
        path: PathBuf,
        /// What is wrong with it.
        problem: MemberProblem,
    },
    /// The emulated remote-access cost model was asked for on the
    /// machine's own topology, where real remote accesses already cost
    /// what they cost ([`crate::MountOptions::remote_cost`]).
    #[error(
        "remote_cost={cost} needs an emulated topology (topology=NxC or MANYFS_TOPOLOGY); \
         this mount's is the machine's own ({topology})"
    )]
    RemoteCostNeedsEmulatedTopology {
        /// The cost asked for, as `READ/WRITE` ns per KiB.
        cost: String,
        /// The topology the mount resolved.
        topology: String,
    },
    /// The emulated NVMM bandwidth cap was asked for on the machine's own
    /// topology, whose memory has its own bandwidth
    /// ([`crate::MountOptions::bandwidth_cap`]).
    #[error(
        "bandwidth_cap={cap} needs an emulated topology (topology=NxC or MANYFS_TOPOLOGY); \
         this mount's is the machine's own ({topology}), whose memory has its own bandwidth"
    )]
    BandwidthCapNeedsEmulatedTopology {
        /// The cap asked for, in weighted bytes per second per node.
        cap: String,
        /// The topology the mount resolved.
        topology: String,
    },
    /// The pool contents fail a consistency check.
    #[error("corrupt pool: {what}: {detail}")]
    Corrupt {
        /// Which structure (superblock, inode 12, log page 0x..., ...).
        what: String,
        /// What is wrong with it.
        detail: String,
    },
    /// An operating-system call on the pool failed.
    // The OS error is part of the message rather than a `source`, so a
    // one-line report does not print it twice.
    #[error("{context}: {cause}")]
    Io {
        /// What manyfs was doing.
        context: String,
        /// The underlying error.
        cause: std::io::Error,
    },
}

/// What is wrong with one member file of a pool ([`Error::Member`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MemberProblem {
    /// The file cannot be opened (the cause follows).
    #[error("missing: cannot open it: {0}")]
    Missing(String),
    /// Its header names another index of the same pool: member files were
    /// swapped or renamed.
    #[error("the file holds member {found} of this pool (member files swapped?)")]
    WrongIndex {
        /// The index its header names.
        found: u32,
    },
    /// Its length is not the one the member table records.
    #[error("the file is {found} bytes, the pool's member table says {expected} (resized?)")]
    Resized {
        /// Bytes the table records.
        expected: u64,
        /// Bytes the file has.
        found: u64,
    },
    /// It is shorter than the pool records (a data device may be longer).
    #[error("the device is {found} bytes, the pool records {expected} (a shorter device?)")]
    Short {
        /// Bytes the pool records.
        expected: u64,
        /// Bytes the device has.
        found: u64,
    },
    /// Its header carries another pool's uuid.
    #[error("the file belongs to another pool (uuid {found}, this pool's is {expected})")]
    Foreign {
        /// This pool's uuid, in hex.
        expected: String,
        /// The uuid in the member's header, in hex.
        found: String,
    },
    /// It has no valid member header, or one that disagrees with the table
    /// in something other than its index or its pool.
    #[error("bad member header: {0}")]
    BadHeader(String),
    /// Its persistent-memory device belongs to another NUMA node than the
    /// pool says (`pm` mode on the machine's own topology).
    #[error(
        "the pool puts it on node {given}, but its device {device} belongs to node {found} \
         (wrong `--member PATH@NODE`?)"
    )]
    WrongNode {
        /// The node in the pool's member table.
        given: u32,
        /// The device, as `/sys/dev/block` names it (`MAJOR:MINOR`).
        device: String,
        /// The node the kernel reports for the device.
        found: u32,
    },
}

impl Error {
    /// The POSIX errno that best describes this error.
    pub fn errno(&self) -> i32 {
        match self {
            Error::NotFound(_) => libc::ENOENT,
            Error::Exists(_) => libc::EEXIST,
            Error::NotEmpty(_) => libc::ENOTEMPTY,
            Error::IsDir(_) => libc::EISDIR,
            Error::NotDir(_) => libc::ENOTDIR,
            Error::NameTooLong(_) => libc::ENAMETOOLONG,
            Error::NoSpace(_) => libc::ENOSPC,
            Error::InvalidArgument(_) => libc::EINVAL,
            Error::FileTooLarge(_) => libc::EFBIG,
            Error::Loop(_) => libc::ELOOP,
            // Another file system: as the kernel answers a rename or link
            // across mounts.
            Error::LeavesPool { .. } => libc::EXDEV,
            Error::BadHandle(_) => libc::EBADF,
            Error::NotPermitted(_) => libc::EPERM,
            Error::ReadOnly => libc::EROFS,
            Error::NoData(_) => libc::ENODATA,
            Error::OutOfRange(_) => libc::ERANGE,
            Error::NotSupported(_) => libc::EOPNOTSUPP,
            Error::Busy { .. } | Error::StillOpen { .. } => libc::EBUSY,
            Error::RemoteCostNeedsEmulatedTopology { .. }
            | Error::BandwidthCapNeedsEmulatedTopology { .. } => libc::EINVAL,
            Error::Member {
                problem: MemberProblem::Missing(_),
                ..
            } => libc::ENOENT,
            Error::Member { .. } => libc::EIO,
            Error::DataDevice {
                problem: MemberProblem::Missing(_),
                ..
            } => libc::ENOENT,
            Error::DataDevice { .. } => libc::EIO,
            Error::Corrupt { .. } => libc::EIO,
            Error::Io { cause, .. } => cause.raw_os_error().unwrap_or(libc::EIO),
        }
    }

    /// Shorthand for a corruption report.
    pub fn corrupt(what: impl Into<String>, detail: impl Into<String>) -> Error {
        Error::Corrupt {
            what: what.into(),
            detail: detail.into(),
        }
    }

    /// Shorthand for an I/O error with context.
    pub fn io(context: impl Into<String>, cause: std::io::Error) -> Error {
        Error::Io {
            context: context.into(),
            cause,
        }
    }

    /// Replace the subject (path or name) that the error mentions.
    pub fn with_subject(self, subject: &str) -> Error {
        match self {
            Error::NotFound(_) => Error::NotFound(subject.into()),
            Error::Exists(_) => Error::Exists(subject.into()),
            Error::NotEmpty(_) => Error::NotEmpty(subject.into()),
            Error::IsDir(_) => Error::IsDir(subject.into()),
            Error::NotDir(_) => Error::NotDir(subject.into()),
            Error::NameTooLong(_) => Error::NameTooLong(subject.into()),
            Error::Loop(_) => Error::Loop(subject.into()),
            other => other,
        }
    }
}

/// A path's bytes for a message.
fn show_bytes(path: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(path)
}

/// Who holds a busy pool, for [`Error::Busy`]'s message.
fn owner_text(owner: Option<u32>) -> String {
    owner.map_or_else(
        || "another process".to_string(),
        |pid| format!("process {pid}"),
    )
}

impl From<Error> for std::io::Error {
    fn from(e: Error) -> Self {
        std::io::Error::from_raw_os_error(e.errno())
    }
}

impl From<manyfs_rangelock::ParseLockKindError> for Error {
    fn from(e: manyfs_rangelock::ParseLockKindError) -> Self {
        Error::InvalidArgument(e.to_string())
    }
}

impl From<manyfs_index::ParseIndexKindError> for Error {
    fn from(e: manyfs_index::ParseIndexKindError) -> Self {
        Error::InvalidArgument(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_parse_errors_are_invalid_arguments() {
        let e = Error::from("nope".parse::<crate::LockKind>().unwrap_err());
        assert_eq!(e.errno(), libc::EINVAL);
        assert_eq!(
            e.to_string(),
            "invalid argument: lock kind \"nope\" (expected inode, interval, srl-array or srl-tree)"
        );
        let e = Error::from("btree".parse::<crate::IndexKind>().unwrap_err());
        assert_eq!(e.errno(), libc::EINVAL);
        assert_eq!(
            e.to_string(),
            "invalid argument: index kind \"btree\" (expected cas, rw or cascade)"
        );
    }
}
