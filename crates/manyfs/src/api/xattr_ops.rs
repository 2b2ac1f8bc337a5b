//! Extended attributes by inode number (`getxattr`, `setxattr`,
//! `listxattr`, `removexattr`); see the `xattr` module for the limits and
//! namespaces. Path-level callers resolve first
//! (`fs.symlink_metadata(path)?.ino`).

use super::*;
use crate::error::Result;
use crate::xattr::{self, XattrSet};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

impl Fs {
    /// The value of extended attribute `name` of inode `ino` (`NoData`,
    /// i.e. `ENODATA`, when it has none).
    pub fn getxattr(&self, ino: u64, name: &OsStr) -> Result<Vec<u8>> {
        xattr::get(&*self.core.get(ino)?, name.as_bytes())
    }

    /// Set extended attribute `name` of inode `ino` to `value`; `how`
    /// says whether it must not exist yet (`EEXIST`) or must exist
    /// (`ENODATA`). Changes the inode's ctime.
    pub fn setxattr(&self, ino: u64, name: &OsStr, value: &[u8], how: XattrSet) -> Result<()> {
        let inode = self.core.get(ino)?;
        xattr::set(&self.core, &inode, name.as_bytes(), value, how)
    }

    /// Names of the extended attributes of inode `ino`, sorted.
    pub fn listxattr(&self, ino: u64) -> Result<Vec<OsString>> {
        let inode = self.core.get(ino)?;
        Ok(xattr::list(&inode)
            .into_iter()
            .map(OsString::from_vec)
            .collect())
    }

    /// Remove extended attribute `name` of inode `ino` (`ENODATA` when it
    /// has none).
    pub fn removexattr(&self, ino: u64, name: &OsStr) -> Result<()> {
        let inode = self.core.get(ino)?;
        xattr::remove(&self.core, &inode, name.as_bytes())
    }
}
