//! A mode and the POSIX access ACL it shows change together, in `file`
//! mode too, whatever a sync or a power cut interrupts.
//!
//! The kernel enforces the ACL, not the mode: an image with a chmod's new
//! mode and the old list keeps open what `ls -l` shows closed, and a new
//! inode named without the list it inherited shows its owning group the
//! mask's bits. In `file` mode an entry counts once a sync has marked it,
//! and a sync marks each sub-log up to whatever whole groups it holds when
//! the sync snapshots it: any group boundary between an operation's
//! entries is an image some sync could leave. So each test captures the
//! durable image (what the completed syncs wrote, through a
//! [`PersistObserver`]) before and after an operation, cuts the inode's
//! log page back to every group boundary in between, and mounts each cut:
//! it must show the whole old state or the whole new one.

mod common;

use common::{Durable, acl};
use manyfs::lowlevel::InodeOps;

use manyfs::format::*;
use manyfs::lowlevel::SetAttr;
use manyfs::{Fs, MkfsOptions, MountOptions, Sublogs};
use std::ffi::OsStr;
use std::path::Path;
use std::sync::Arc;

const PAGE: usize = BLOCK_SIZE as usize;
const ACCESS: &str = "system.posix_acl_access";
const DEFAULT: &str = "system.posix_acl_default";
const S_IFREG: u32 = 0o100000;
const S_IFDIR: u32 = 0o040000;

fn opts() -> MountOptions {
    {
        let mut mo = MountOptions::default();
        // No commit thread: only the test's syncs make anything durable.
        mo.commit_interval = std::time::Duration::ZERO;
        // One sub-log per inode: an operation's entries share one tail.
        mo.sublogs = Sublogs::One;
        mo
    }
}

/// A fresh `file`-mode pool in `dir`, mounted with a [`Durable`] observer.
fn fresh_observed(dir: &Path) -> (Fs, Arc<Durable>) {
    let pool = dir.join("pool");
    let mkfs = {
        let mut mk = MkfsOptions::default();
        mk.size = 8 << 20;
        mk
    };
    Fs::mkfs(&pool, &mkfs, &opts()).unwrap().unmount().unwrap();
    let obs = Arc::new(Durable::new(&pool));
    let fs = manyfs::diag::mount_observed(&pool, &opts(), obs.clone()).unwrap();
    (fs, obs)
}

fn u32_at(image: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(image[at..at + 4].try_into().unwrap())
}

/// Inode `ino`'s log pages in `image`: block -> durable mark.
fn log_marks(image: &[u8], ino: u64) -> Vec<(usize, u32)> {
    (0..image.len() / PAGE)
        .filter_map(|b| {
            let f = b * PAGE + LOG_FOOTER_OFFSET as usize;
            let owner = u64::from_le_bytes(image[f + 8..f + 16].try_into().unwrap());
            (u32_at(image, f + 20) == LOG_PAGE_MAGIC && owner == ino)
                .then(|| (b, u32_at(image, f + FOOTER_MARK as usize)))
        })
        .collect()
}

/// Every image a sync could leave of what inode `ino` appended between
/// durable images `before` and `after` (each made by a full sync): `after`
/// with the log page whose mark moved cut back to each group boundary of
/// the entries it gained. Returns the images (oldest first) and the
/// number of groups the entries form.
fn cuts(before: &[u8], after: &[u8], ino: u64) -> (Vec<Vec<u8>>, usize) {
    let old = log_marks(before, ino);
    let moved: Vec<(usize, u32)> = log_marks(after, ino)
        .into_iter()
        .filter(|p| !old.contains(p))
        .collect();
    let [(page, mark)] = moved[..] else {
        panic!("inode {ino}: expected one log page to gain entries, got {moved:?}");
    };
    assert_eq!(mark & MARK_SEALED, 0, "the page is not full");
    let from = old.iter().find(|p| p.0 == page).map_or(0, |p| p.1);
    // Group boundaries: where an entry without the "group continues"
    // flag ends.
    let mut bounds = vec![from];
    let mut slot = from;
    while slot < mark {
        let at = page * PAGE + slot as usize * SLOT_SIZE as usize;
        let (slots, flags) = (
            after[at + 1],
            u16::from_le_bytes([after[at + 2], after[at + 3]]),
        );
        let end = slot + u32::from(slots);
        let bytes = &after[at..page * PAGE + end as usize * SLOT_SIZE as usize];
        let (entry, _) = Entry::decode(bytes).expect("a committed entry below the mark");
        assert!(
            matches!(entry, Entry::SetAttr { .. } | Entry::Xattr { .. }),
            "{entry:?}"
        );
        slot = end;
        if flags & FLAG_GROUP_CONTINUES == 0 {
            bounds.push(slot);
        }
    }
    assert_eq!(bounds.last(), Some(&mark), "the mark ends a group");
    let footer = page * PAGE + LOG_FOOTER_OFFSET as usize;
    let images = bounds
        .iter()
        .map(|&cut| {
            let mut image = after.to_vec();
            image[footer + FOOTER_MARK as usize..][..4].copy_from_slice(&cut.to_le_bytes());
            // A checked count is never above the mark.
            let checked = u32_at(&image, footer + FOOTER_CHECKED as usize).min(cut);
            image[footer + FOOTER_CHECKED as usize..][..4].copy_from_slice(&checked.to_le_bytes());
            image
        })
        .collect();
    (images, bounds.len() - 1)
}

/// What an image shows of one inode: its mode's permission bits (with
/// setuid, setgid, sticky), owner, group and access ACL.
type State = (u32, u32, u32, Option<Vec<u8>>);

/// Mount a copy of `image` and read the state of `path` (`None`: no such
/// file). fsck must find the image clean.
fn state_in(image: &[u8], path: &str) -> Option<State> {
    let scratch = tempfile::tempdir().unwrap();
    let pool = scratch.path().join("pool");
    std::fs::write(&pool, image).unwrap();
    let report = manyfs::fsck::check(&pool).unwrap();
    assert!(report.is_clean(), "fsck: {:?}", report.errors);
    let fs = Fs::mount(&pool, &opts()).unwrap();
    let state = state(&fs, path);
    fs.unmount().unwrap();
    state
}

fn state(fs: &Fs, path: &str) -> Option<State> {
    let md = match fs.metadata(path) {
        Ok(md) => md,
        Err(e) if e.errno() == libc::ENOENT => return None,
        Err(e) => panic!("{path}: {e}"),
    };
    let acl = match fs.getxattr(md.ino, OsStr::new(ACCESS)) {
        Ok(v) => Some(v),
        Err(e) if e.errno() == libc::ENODATA => None,
        Err(e) => panic!("{path}: {e}"),
    };
    Some((md.mode & 0o7777, md.uid, md.gid, acl))
}

/// A state as `ls -l` and `getfacl` would tell it: the mode in octal,
/// the list as (tag, permission bits) pairs.
fn show(s: &Option<State>) -> String {
    let Some((mode, uid, gid, list)) = s else {
        return "no such file".into();
    };
    let list = list.as_ref().map(|l| {
        l[4..]
            .chunks_exact(8)
            .map(|e| (e[0], e[2]))
            .collect::<Vec<_>>()
    });
    format!("mode {mode:o} owner {uid}:{gid} ACL {list:?}")
}

/// Run `op` on `path` between two full syncs: every image a
/// sync during it could leave shows the state before or the state after,
/// and its entries form one atomic group.
fn atomic(fs: &Fs, obs: &Durable, path: &str, what: &str, op: impl FnOnce(&Fs)) {
    let ino = fs.metadata(path).unwrap().ino;
    fs.sync().unwrap();
    let (before, old) = (obs.image(), state(fs, path));
    op(fs);
    fs.sync().unwrap();
    let (after, new) = (obs.image(), state(fs, path));
    assert_ne!(old, new, "{what}: changes something");
    let (images, groups) = cuts(&before, &after, ino);
    let shown: Vec<Option<State>> = images.iter().map(|i| state_in(i, path)).collect();
    assert_eq!(shown.first(), Some(&old), "{what}: the image before");
    assert_eq!(shown.last(), Some(&new), "{what}: the image after");
    for (i, s) in shown.iter().enumerate() {
        assert!(
            *s == old || *s == new,
            "{what}: a sync after {i} of its {groups} groups leaves {}, \
             neither the old state {} nor the new {}",
            show(s),
            show(&old),
            show(&new)
        );
    }
    assert_eq!(groups, 1, "{what}: one atomic group");
}

/// A fresh observed pool holding `/f` (mode 0o644, owner 0): the mount,
/// its observer and `/f`'s inode number.
fn pool_with_f(dir: &Path) -> (Fs, Arc<Durable>, u64) {
    let (fs, obs) = fresh_observed(dir);
    let f = fs
        .mknod(ROOT_INO, OsStr::new("f"), S_IFREG | 0o644, 0, 0, 0)
        .unwrap()
        .ino;
    (fs, obs, f)
}

fn setfacl(fs: &Fs, ino: u64, text: &str) {
    fs.setxattr(
        ino,
        OsStr::new(ACCESS),
        &acl(text),
        manyfs::lowlevel::XattrSet::Any,
    )
    .unwrap();
}

fn setattr(fs: &Fs, ino: u64, attr: SetAttr) {
    fs.setattr(ino, &attr).unwrap();
}

/// The list `/f` gets: a named user with rwx, the mask letting it have
/// them.
const NAMED: &str = "u::rw-,u:1000:rwx,g::r--,m::rwx,o::---";

/// setfacl of a list with a named entry sets the mode's bits from it (the
/// mask as the group's): the list and the mode 0o670 are one change.
#[test]
fn setfacl_sets_the_list_and_the_mode_together() {
    let dir = tempfile::tempdir().unwrap();
    let (fs, obs, f) = pool_with_f(dir.path());
    atomic(&fs, &obs, "/f", "setfacl", |fs| setfacl(fs, f, NAMED));
    assert_eq!(state(&fs, "/f"), Some((0o670, 0, 0, Some(acl(NAMED)))));
    // A list the mode says all of: the stored list goes, the mode takes
    // its bits, in one change too.
    atomic(&fs, &obs, "/f", "setfacl minimal", |fs| {
        setfacl(fs, f, "u::rwx,g::r-x,o::r--")
    });
    assert_eq!(state(&fs, "/f"), Some((0o754, 0, 0, None)));
    fs.unmount().unwrap();
}

/// chmod closing the group class of a file with an access ACL: the mask
/// follows the mode, and user 1000 loses rwx. An image with the new mode
/// 0o600 and the old mask would let it in while `ls -l` shows `rw-------`.
#[test]
fn chmod_rewrites_the_acl_with_the_mode() {
    let dir = tempfile::tempdir().unwrap();
    let (fs, obs, f) = pool_with_f(dir.path());
    setfacl(&fs, f, NAMED);
    atomic(&fs, &obs, "/f", "chmod 4600", |fs| {
        let mode = Some(0o4600);
        setattr(
            fs,
            f,
            SetAttr {
                mode,
                ..Default::default()
            },
        )
    });
    assert_eq!(
        state(&fs, "/f"),
        Some((
            0o4600,
            0,
            0,
            Some(acl("u::rw-,u:1000:rwx,g::r--,m::---,o::---"))
        ))
    );
    fs.unmount().unwrap();
}

/// chown as the kernel sends it for an unprivileged owner change: owner,
/// group and the mode without setuid in one request, on a file with an
/// access ACL: one atomic change (the list's bits do not change, so no
/// entry rewrites it).
#[test]
fn chown_clearing_setuid_is_one_change() {
    let dir = tempfile::tempdir().unwrap();
    let (fs, obs, f) = pool_with_f(dir.path());
    setfacl(&fs, f, NAMED);
    let mode = Some(0o4670);
    setattr(
        &fs,
        f,
        SetAttr {
            mode,
            ..Default::default()
        },
    );
    atomic(&fs, &obs, "/f", "chown", |fs| {
        let (uid, gid, mode) = (Some(1000), Some(1000), Some(0o670));
        setattr(
            fs,
            f,
            SetAttr {
                uid,
                gid,
                mode,
                ..Default::default()
            },
        )
    });
    assert_eq!(
        state(&fs, "/f"),
        Some((0o670, 1000, 1000, Some(acl(NAMED))))
    );
    fs.unmount().unwrap();
}

/// A new file and directory under a directory with a default ACL: once
/// a sync makes the name count, what it inherited counts too. The sync
/// is a sibling's fsync, which syncs the directory (it named the sibling
/// since the last full sync) but not the new inodes themselves.
#[test]
fn inherited_acls_count_with_the_name() {
    let dir = tempfile::tempdir().unwrap();
    let (fs, obs) = fresh_observed(dir.path());
    let d = fs
        .mknod(ROOT_INO, OsStr::new("d"), S_IFDIR | 0o755, 0, 0, 0)
        .unwrap()
        .ino;
    // The owning group may read; the mask would let it write.
    let default = acl("u::rwx,u:1000:rwx,g::r--,m::rwx,o::r--");
    fs.setxattr(
        d,
        OsStr::new(DEFAULT),
        &default,
        manyfs::lowlevel::XattrSet::Any,
    )
    .unwrap();
    fs.sync().unwrap();
    let f = fs
        .mknod(d, OsStr::new("f"), S_IFREG | 0o666, 0, 0, 0)
        .unwrap();
    let sub = fs
        .mknod(d, OsStr::new("sub"), S_IFDIR | 0o777, 0, 0, 0)
        .unwrap();
    let inherited = acl("u::rw-,u:1000:rwx,g::r--,m::rw-,o::r--");
    assert_eq!((f.mode & 0o7777, sub.mode & 0o7777), (0o664, 0o774));
    assert_eq!(
        state(&fs, "/d/f"),
        Some((0o664, 0, 0, Some(inherited.clone())))
    );
    let sibling = common::open_rw(&fs, "/d/sibling");
    sibling.sync_all().unwrap();
    let image = obs.image();
    let scratch = tempfile::tempdir().unwrap();
    let pool = scratch.path().join("pool");
    std::fs::write(&pool, &image).unwrap();
    let report = manyfs::fsck::check(&pool).unwrap();
    assert!(report.is_clean(), "fsck: {:?}", report.errors);
    let after = Fs::mount(&pool, &opts()).unwrap();
    assert!(after.metadata("/d/sibling").is_ok(), "the fsync'd name");
    // Without its list, /d/f's group bits (the mask's rw-) would be the
    // owning group's permission.
    assert_eq!(
        state(&after, "/d/f"),
        Some((0o664, 0, 0, Some(inherited))),
        "/d/f: named by the synced directory, with its list"
    );
    let s = state(&after, "/d/sub").expect("/d/sub: named by the synced directory");
    assert!(s.3.is_some(), "/d/sub: its access list");
    let ino = after.metadata("/d/sub").unwrap().ino;
    assert_eq!(
        after.getxattr(ino, OsStr::new(DEFAULT)).ok(),
        Some(default),
        "/d/sub: its default list"
    );
    after.unmount().unwrap();
    fs.unmount().unwrap();
}

/// Many chmods of a file and a directory with access ACLs compact their
/// logs (which rewrite the live attributes and lists); after a remount
/// each shows its last mode and the list that agrees with it.
#[test]
fn compaction_keeps_the_mode_and_the_acl() {
    let dir = tempfile::tempdir().unwrap();
    let (fs, _obs, f) = pool_with_f(dir.path());
    let d = fs
        .mknod(ROOT_INO, OsStr::new("d"), S_IFDIR | 0o755, 0, 0, 0)
        .unwrap()
        .ino;
    for ino in [f, d] {
        setfacl(&fs, ino, NAMED);
        for i in 0..200u32 {
            let mode = Some(if i % 2 == 0 { 0o640 } else { 0o670 });
            setattr(
                &fs,
                ino,
                SetAttr {
                    mode,
                    ..Default::default()
                },
            );
        }
    }
    let last = Some(acl("u::rw-,u:1000:rwx,g::r--,m::rwx,o::---"));
    let want = |fs: &Fs| {
        assert_eq!(state(fs, "/f"), Some((0o670, 0, 0, last.clone())));
        assert_eq!(state(fs, "/d"), Some((0o670, 0, 0, last.clone())));
    };
    want(&fs);
    fs.unmount().unwrap();
    let pool = dir.path().join("pool");
    let report = manyfs::fsck::check(&pool).unwrap();
    assert!(report.is_clean(), "fsck: {:?}", report.errors);
    // 400 chmods of two entries each would fill about 26 log pages.
    assert!(
        report.log_pages <= 6,
        "{} log pages, {} entries: the logs were compacted",
        report.log_pages,
        report.entries
    );
    let fs = Fs::mount(&pool, &opts()).unwrap();
    want(&fs);
    fs.unmount().unwrap();
}
