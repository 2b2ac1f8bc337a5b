//! The tier: file data on a block device (or a file on a disk file
//! system), logs and inodes on the pool.
//!
//! A tiered pool has one *data device* besides its mapped members. Its
//! blocks continue the pool's block address space: the pool maps blocks
//! `[0, total_blocks)`, the device holds blocks `[total_blocks,
//! total_blocks + device_blocks)`, the first of them its header (the same
//! [`MemberHeader`](crate::layout::members::MemberHeader) every further
//! member carries: the pool's uuid, its index in the member table, its
//! size and first block). So a write entry, the page index, recovery's
//! block bitmap and fsck name a device block exactly as a pool block; only
//! the media, which owns every persistent byte, tells them apart by number
//! and reads or writes the device with `pread`/`pwrite` instead of through
//! the mapping. Nothing above the media changes except allocation (data
//! blocks come from the device's own per-CPU allocator) and durability (a
//! tiered pool keeps durable marks whatever its pool's medium, because a
//! device write is durable only after a flush: see `docs/guarantees.md`).
//!
//! The device is opened with `O_DIRECT` (no page cache between manyfs and
//! the disk: a write reaches the device's own cache, a flush makes it
//! durable); where the file system refuses `O_DIRECT` (tmpfs) it is opened
//! buffered instead, with a warning, and the same flushes keep the same
//! promises (they then also write back the page cache).
//!
//! Transfers go through a per-thread io_uring (`device_io=uring`, the
//! default), which submits the transfers of one file read or write (one
//! per run of contiguous device blocks) together, or are each a
//! `pread`/`pwrite` (`device_io=sync`, and where the kernel refuses
//! io_uring).
//!
//! On a pool of persistent memory, small writes to files that are synced
//! are staged in the pool and moved to the device later
//! (`inode/staging.rs`), so that their `fsync` needs no device flush.

pub(crate) mod device;
mod uring;

pub(crate) use device::Device;
pub use device::{DeviceIo, DeviceStats};
