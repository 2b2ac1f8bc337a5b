//! The planted recovery bug ([`manyfs::diag::RecoveryBug::EntryChecksumIgnored`])
//! does what it says. It is process-wide, so it is planted only here, in a
//! test binary of its own, by its single test (no other test of this
//! binary decodes entries in a parallel thread meanwhile).
#![cfg(feature = "planted-bugs")]

mod common;

use manyfs::diag::RecoveryBug;
use manyfs::format::*;
use manyfs::lowlevel::InodeOps;
use manyfs::lowlevel::XattrSet;
use manyfs::{Fs, MountOptions};
use std::ffi::OsStr;
use std::path::Path;

const PAGE: usize = BLOCK_SIZE as usize;
const NAME: &str = "user.torn";

/// Clears the planted bugs when dropped, a failed assertion included.
struct Planted;

impl Planted {
    fn plant(bug: RecoveryBug) -> Planted {
        manyfs::diag::plant_recovery_bug(bug);
        Planted
    }
}

impl Drop for Planted {
    fn drop(&mut self) {
        manyfs::diag::clear_recovery_bugs();
    }
}

/// The byte range in `image` of inode `ino`'s extended-attribute entry
/// named [`NAME`] (a committed entry of several slots).
fn xattr_entry(image: &[u8], ino: u64) -> std::ops::Range<usize> {
    let le32 = |at: usize| u32::from_le_bytes(image[at..at + 4].try_into().unwrap());
    for b in 0..image.len() / PAGE {
        let f = b * PAGE + LOG_FOOTER_OFFSET as usize;
        let owner = u64::from_le_bytes(image[f + 8..f + 16].try_into().unwrap());
        if le32(f + 20) != LOG_PAGE_MAGIC || owner != ino {
            continue;
        }
        let mut slot = 0;
        while slot < ENTRY_SLOTS_PER_PAGE as usize {
            let at = b * PAGE + slot * SLOT_SIZE as usize;
            let Some(n) = Entry::claimed_slots(&image[at..at + 64]) else {
                break;
            };
            let range = at..at + n * SLOT_SIZE as usize;
            if let Some((Entry::Xattr { name, .. }, _)) = Entry::decode(&image[range.clone()])
                && name == NAME.as_bytes()
            {
                assert!(n > 2, "an entry of several slots");
                return range;
            }
            slot += n;
        }
    }
    panic!("no entry for {NAME} in inode {ino}'s log");
}

/// What a mount of `image` shows of inode `ino`'s [`NAME`]: `Err` when
/// the image does not mount, `Ok(None)` when there is no such attribute.
fn shown(image: &[u8], ino: u64) -> Result<Option<Vec<u8>>, manyfs::Error> {
    let scratch = tempfile::tempdir().unwrap();
    let pool = scratch.path().join("pool");
    std::fs::write(&pool, image).unwrap();
    let fs = Fs::mount(&pool, &MountOptions::default())?;
    let value = match fs.getxattr(ino, OsStr::new(NAME)) {
        Ok(v) => Some(v),
        Err(e) if e.errno() == libc::ENODATA || e.errno() == libc::ENOENT => None,
        Err(e) => panic!("getxattr: {e}"),
    };
    fs.unmount()?;
    Ok(value)
}

/// A pool whose inode holds [`NAME`] = `value`, unmounted: its image and
/// the inode number.
fn pool_with_xattr(dir: &Path, value: &[u8]) -> (Vec<u8>, u64) {
    let pool = dir.join("pool");
    let fs = common::mkfs(&pool, 8 << 20, &MountOptions::default());
    fs.write("/f", b"data").unwrap();
    let ino = fs.metadata("/f").unwrap().ino;
    fs.setxattr(ino, OsStr::new(NAME), value, XattrSet::Any)
        .unwrap();
    fs.unmount().unwrap();
    (std::fs::read(&pool).unwrap(), ino)
}

/// One decode, and a torn log page seen by a fresh mount's recovery: with
/// the bug planted, an entry whose later slot is older than its header
/// (what a page written back torn leaves) is taken, and the mount shows
/// an attribute value that was never written; without it, it is not.
#[test]
fn an_ignored_entry_checksum_lets_recovery_take_a_torn_entry() {
    // One decode.
    let entry = Entry::Xattr {
        seq: 1,
        ctime_ns: 5,
        name: NAME.as_bytes().to_vec(),
        value: Some(vec![0xa5; 200]),
    };
    let enc = entry.encode(false);
    let mut bytes = enc.body.to_vec();
    bytes[56..64].copy_from_slice(&enc.commit_word.to_le_bytes());
    assert_eq!(Entry::decode(&bytes).map(|d| d.0), Some(entry.clone()));
    let last = bytes.len() - SLOT_SIZE as usize;
    bytes[last..].fill(0);
    assert_eq!(Entry::decode(&bytes), None, "a torn entry is refused");
    {
        let _planted = Planted::plant(RecoveryBug::EntryChecksumIgnored);
        let (taken, _) = Entry::decode(&bytes).expect("taken with the bug planted");
        assert_ne!(taken, entry);
        // Without its commit mark it is refused still.
        assert_eq!(Entry::decode(&enc.body), None);
    }
    assert_eq!(Entry::decode(&bytes), None, "cleared");

    // A torn page under a fresh mount.
    let dir = tempfile::tempdir().unwrap();
    let value = vec![0x5a; 300];
    let (mut image, ino) = pool_with_xattr(dir.path(), &value);
    assert_eq!(shown(&image, ino).unwrap(), Some(value.clone()));
    let range = xattr_entry(&image, ino);
    // The entry's last slot as the page held it before the append: zeros.
    image[range.end - SLOT_SIZE as usize..range.end].fill(0);
    let without = shown(&image, ino);
    assert!(
        !matches!(&without, Ok(Some(v)) if *v != value),
        "without the bug no value that was never written shows: {without:?}"
    );
    let with = {
        let _planted = Planted::plant(RecoveryBug::EntryChecksumIgnored);
        shown(&image, ino)
    };
    let torn = with.expect("the torn image mounts with the bug planted");
    let torn = torn.expect("the torn attribute is there");
    assert_ne!(torn, value, "a value that was never written");
    assert!(
        torn.starts_with(&value[..64]),
        "its first slots are the real ones"
    );
}
