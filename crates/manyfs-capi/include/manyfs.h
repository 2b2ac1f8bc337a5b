/*
 * libmanyfs: the C ABI of manyfs, a user-space file system for persistent
 * memory. Generated from crates/manyfs-capi by cbindgen; do not edit.
 *
 * Results: 0 (or a count or offset, never negative) on success, -errno on
 * failure (-ENOENT, -ENOSPC, ...). errno itself is not set; after a failure
 * manyfs_last_error() gives this thread a one-line message. A NULL handle
 * is -EBADF; a NULL path, buffer or out-pointer -EFAULT.
 *
 * Ownership: manyfs_unmount frees what manyfs_mount gives, manyfs_close
 * what manyfs_open gives; nothing the caller passes is kept. Threads: all
 * functions are thread-safe; manyfs_pread/manyfs_pwrite of one manyfs_file
 * run in parallel; manyfs_read/manyfs_write/manyfs_lseek share its offset.
 * Open flags and SEEK_* values are those of <fcntl.h> and <stdio.h>.
 */

#ifndef MANYFS_H
#define MANYFS_H

#include <stddef.h>
#include <stdint.h>

// The default durability: `file` on an ordinary disk.
#define MANYFS_DURABILITY_DEFAULT 0

// The pool is DAX-mapped persistent memory: every call is durable when
// it returns.
#define MANYFS_DURABILITY_PM 1

// The pool is an ordinary file: `manyfs_fsync` makes a file durable.
#define MANYFS_DURABILITY_FILE 2

// Nothing is durable (a pool on tmpfs, for tests and benchmarks).
#define MANYFS_DURABILITY_DRAM 3

// Entry type of a FIFO (`DT_FIFO`).
#define MANYFS_DT_FIFO 1

// Entry type of a character device (`DT_CHR`).
#define MANYFS_DT_CHR 2

// Entry type of a directory (`DT_DIR`).
#define MANYFS_DT_DIR 4

// Entry type of a block device (`DT_BLK`).
#define MANYFS_DT_BLK 6

// Entry type of a regular file (`DT_REG`).
#define MANYFS_DT_REG 8

// Entry type of a symbolic link (`DT_LNK`).
#define MANYFS_DT_LNK 10

// Entry type of a socket (`DT_SOCK`).
#define MANYFS_DT_SOCK 12

// An open file (`struct manyfs_file`, opaque).
struct manyfs_file;

// A mounted pool (`struct manyfs_fs`, opaque).
struct manyfs_fs;

// Options of `manyfs_mkfs()` and `manyfs_mount()` (`struct
// manyfs_options`). Zero in a field means its default; set `size` to
// `sizeof(struct manyfs_options)`, e.g. `struct manyfs_options o = {
// .size = sizeof o, .durability = MANYFS_DURABILITY_DRAM };`.
struct manyfs_options {
  // `sizeof(struct manyfs_options)` as the caller's header declares it.
  uint32_t size;
  // How writes become durable: one of `MANYFS_DURABILITY_*`.
  uint32_t durability;
  // Mount read-only (non-zero).
  uint32_t read_only;
  // mkfs: replace a non-empty file at the pool's path (non-zero);
  // otherwise mkfs fails with `-EEXIST`.
  uint32_t replace_existing;
  // `file` durability: milliseconds between background commits (0: the
  // default, 5 s).
  uint32_t commit_interval_ms;
  // mkfs: write zeros over the whole pool instead of reserving its
  // space (non-zero).
  uint32_t zero_fill;
  // mkfs: one inode slot per this many bytes of pool (0: the default,
  // 16 KiB).
  uint64_t bytes_per_inode;
};

// Attributes of a file (`struct manyfs_stat`), filled by
// `manyfs_stat()` and `manyfs_fstat()`. Times are seconds and
// nanoseconds (`0..999999999`) since the Unix epoch.
struct manyfs_stat {
  // Inode number.
  uint64_t ino;
  // File type (`S_IFMT` bits: `S_IFREG`, `S_IFDIR`, ...) and
  // permission bits, as `st_mode`.
  uint32_t mode;
  // Hard links.
  uint32_t nlink;
  // Owner.
  uint32_t uid;
  // Group.
  uint32_t gid;
  // Size in bytes.
  uint64_t size;
  // Space used, in 512-byte units.
  uint64_t blocks;
  // Device number of a character or block device (0 otherwise).
  uint64_t rdev;
  // Last access, seconds.
  int64_t atime_sec;
  // Last access, nanoseconds.
  int64_t atime_nsec;
  // Last modification, seconds.
  int64_t mtime_sec;
  // Last modification, nanoseconds.
  int64_t mtime_nsec;
  // Last status change, seconds.
  int64_t ctime_sec;
  // Last status change, nanoseconds.
  int64_t ctime_nsec;
};

// The callback of `manyfs_readdir()`: called once per entry with the
// caller's `ctx`, the entry's NUL-terminated name (valid until the
// callback returns), inode number and type (`MANYFS_DT_*`). Returning
// non-zero stops the listing. It must not unwind (a C++ exception).
typedef int (*manyfs_readdir_cb)(void *ctx, const char *name, uint64_t ino, uint8_t kind);

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

// Copy the message of this thread's last failed call into `buf` (at most
// `len` bytes, truncated and NUL-terminated; nothing is written when `buf`
// is NULL or `len` is 0). Returns the message's full length without the
// NUL (0: no call failed on this thread yet), as `snprintf` does.
//
// # Safety
// A non-NULL `buf` must point to `len` writable bytes.
int64_t manyfs_last_error(char *buf, size_t len);

// Fill `opts` with the defaults of this version: every field zero, `size`
// set. Returns 0, or `-EFAULT` for NULL.
//
// # Safety
// A non-NULL `opts` must point to a writable `struct manyfs_options`.
int manyfs_options_init(struct manyfs_options *opts);

// Create a pool of `size_bytes` bytes in the file `path` (a new file, or
// an empty one; see `replace_existing`) and format it. The pool is not
// left mounted. `opts` may be NULL.
//
// # Safety
// `path` must be NULL or NUL-terminated; `opts` NULL or a `struct
// manyfs_options` of at least its `size` bytes.
int manyfs_mkfs(const char *path, uint64_t size_bytes, const struct manyfs_options *opts);

// Mount the pool in the file `path` and store its handle in `*out_fs`
// (freed by `manyfs_unmount()`). `opts` may be NULL. A pool mounted by
// another process is `-EBUSY`.
//
// # Safety
// `path` must be NULL or NUL-terminated; `opts` NULL or a `struct
// manyfs_options` of at least its `size` bytes; `out_fs` NULL or writable.
int manyfs_mount(const char *path, const struct manyfs_options *opts, struct manyfs_fs **out_fs);

// Make everything durable and free the mount handle. The handle is freed
// even when the final sync fails (the error is returned). NULL: `-EBADF`.
//
// # Safety
// `fs` must be NULL or a handle from `manyfs_mount()` not yet unmounted;
// it must not be used afterwards.
int manyfs_unmount(struct manyfs_fs *fs);

// Open (or create) the file at `path` and store a handle in `*out_file`
// (freed by `manyfs_close()`). `flags`: `O_RDONLY`, `O_WRONLY` or
// `O_RDWR`, plus any of `O_CREAT`, `O_EXCL`, `O_TRUNC`, `O_APPEND` from
// `<fcntl.h>`; any other flag is `-EINVAL`, as are `O_CREAT` and
// `O_TRUNC` without write access. `mode`: permission bits of a created
// file. The handle's offset starts at 0.
//
// # Safety
// `fs` must be NULL or a live mount handle; `path` NULL or
// NUL-terminated; `out_file` NULL or writable.
int manyfs_open(const struct manyfs_fs *fs,
                const char *path,
                int flags,
                uint32_t mode,
                struct manyfs_file **out_file);

// Free a file handle. Closing does not sync (as `close(2)`); returns 0,
// or `-EBADF` for NULL.
//
// # Safety
// `file` must be NULL or a handle from `manyfs_open()` not yet closed,
// which no other thread is using; it must not be used afterwards.
int manyfs_close(struct manyfs_file *file);

// Read up to `count` bytes at `offset` into `buf`: the number read, 0 at
// end of file. Does not use or move the handle's offset.
//
// # Safety
// `file` must be NULL or a live file handle; `buf` NULL or `count`
// writable bytes.
int64_t manyfs_pread(const struct manyfs_file *file, void *buf, size_t count, int64_t offset);

// Write `count` bytes from `buf` at `offset` (at end of file if opened
// with `O_APPEND`, as Linux's `pwrite` does): the number written. Does not
// use or move the handle's offset.
//
// # Safety
// `file` must be NULL or a live file handle; `buf` NULL or `count`
// readable bytes.
int64_t manyfs_pwrite(const struct manyfs_file *file,
                      const void *buf,
                      size_t count,
                      int64_t offset);

// Read up to `count` bytes at the handle's offset and move it past them:
// the number read, 0 at end of file.
//
// # Safety
// As `manyfs_pread()`.
int64_t manyfs_read(const struct manyfs_file *file, void *buf, size_t count);

// Write `count` bytes at the handle's offset (at end of file if opened
// with `O_APPEND`) and move the offset past them: the number written.
//
// # Safety
// As `manyfs_pwrite()`.
int64_t manyfs_write(const struct manyfs_file *file, const void *buf, size_t count);

// Move the handle's offset: to `offset` (`SEEK_SET`), by `offset`
// (`SEEK_CUR`) or to the end of file plus `offset` (`SEEK_END`). Returns
// the new offset; `-EINVAL` if it would be negative or `whence` is
// another value.
//
// # Safety
// `file` must be NULL or a live file handle.
int64_t manyfs_lseek(const struct manyfs_file *file, int64_t offset, int whence);

// Make the file's data, attributes and name durable (`fsync`).
//
// # Safety
// `file` must be NULL or a live file handle.
int manyfs_fsync(const struct manyfs_file *file);

// Make the file's data durable, and its attributes as far as reading the
// data needs them (`fdatasync`).
//
// # Safety
// `file` must be NULL or a live file handle.
int manyfs_fdatasync(const struct manyfs_file *file);

// Cut or extend (with zeros) the file to `length` bytes; the handle's
// offset stays where it is.
//
// # Safety
// `file` must be NULL or a live file handle.
int manyfs_ftruncate(const struct manyfs_file *file, int64_t length);

// Fill `*out` with the attributes of the open file.
//
// # Safety
// `file` must be NULL or a live file handle; `out` NULL or writable.
int manyfs_fstat(const struct manyfs_file *file, struct manyfs_stat *out);

// Fill `*out` with the attributes of what `path` names (a final symlink
// is followed, as `stat(2)` does).
//
// # Safety
// `fs` must be NULL or a live mount handle; `path` NULL or
// NUL-terminated; `out` NULL or writable.
int manyfs_stat(const struct manyfs_fs *fs, const char *path, struct manyfs_stat *out);

// Call `callback(ctx, name, ino, type)` for each entry of the directory
// `path`, in name order, without `.` and `..`. Returns the number of
// entries passed to the callback; a callback that returns non-zero is
// not called again (the entry it was given counts).
//
// # Safety
// `fs` must be NULL or a live mount handle; `path` NULL or
// NUL-terminated; `callback` NULL or a function that does not unwind.
int64_t manyfs_readdir(const struct manyfs_fs *fs,
                       const char *path,
                       manyfs_readdir_cb callback,
                       void *ctx);

// Create the directory `path` with permission bits `mode` (applied right
// after it is made, with mode 0755).
//
// # Safety
// `fs` must be NULL or a live mount handle; `path` NULL or
// NUL-terminated.
int manyfs_mkdir(const struct manyfs_fs *fs, const char *path, uint32_t mode);

// Remove the empty directory `path`.
//
// # Safety
// `fs` must be NULL or a live mount handle; `path` NULL or
// NUL-terminated.
int manyfs_rmdir(const struct manyfs_fs *fs, const char *path);

// Remove the name `path` (a file, symlink or special node; an open file
// stays readable through its handles until they are closed).
//
// # Safety
// `fs` must be NULL or a live mount handle; `path` NULL or
// NUL-terminated.
int manyfs_unlink(const struct manyfs_fs *fs, const char *path);

// Rename `from` to `to`, replacing a compatible `to` atomically, as
// `rename(2)` does.
//
// # Safety
// `fs` must be NULL or a live mount handle; `from` and `to` NULL or
// NUL-terminated.
int manyfs_rename(const struct manyfs_fs *fs, const char *from, const char *to);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* MANYFS_H */
