//! Binding a pool member's memory to its NUMA node.
//!
//! A member on tmpfs (`/dev/shm`: DRAM standing in for persistent memory,
//! as the papers emulated it) gets its pages from whatever node the
//! allocating thread runs on, unless told otherwise. When the mount's
//! topology is the machine's own and the member's node exists, manyfs
//! tells it: at mkfs the creating thread allocates the member's pages
//! (`posix_fallocate`) under `set_mempolicy(MPOL_BIND, node)`, and every
//! mount `mbind`s the member's mapping to the node (`MPOL_BIND`, the
//! file's shared policy, for pages allocated later), both before any page
//! of it is touched through the mapping. On an emulated topology the node
//! numbers name no real memory, so nothing is bound (a debug log says so);
//! a node the machine lacks is skipped the same way. Members on other file
//! systems are not bound: a DAX device already is one node's memory (in
//! `pm` mode the mount checks that the kernel's node for the device, where
//! it reports one, is the member's: [`check_device_node`]), and a disk
//! file's pages are the page cache's.
//!
//! Node numbers here are the kernel's (`/sys/devices/system/node/nodeN`),
//! as `manyfs mkfs --member PATH@NODE` takes them.

use crate::error::{Error, Result};
use crate::topology::Topology;
use std::path::Path;

/// `statfs.f_type` of tmpfs.
const TMPFS_MAGIC: libc::c_long = 0x0102_1994;
/// `MPOL_DEFAULT` of `<linux/mempolicy.h>`.
const MPOL_DEFAULT: libc::c_int = 0;
/// `MPOL_BIND` of `<linux/mempolicy.h>`.
const MPOL_BIND: libc::c_int = 2;

/// What [`bind_plan`] decided for one member (a bind names the kernel's
/// node id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Bind it to this kernel node.
    Bind(u32),
    /// Leave it alone (not on tmpfs, emulated topology, no such node).
    Skip,
}

/// Whether `path` (or, when it does not exist yet, its directory) is on
/// tmpfs.
pub(crate) fn on_tmpfs(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let probe = if path.exists() {
        path
    } else {
        match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        }
    };
    let Ok(c) = std::ffi::CString::new(probe.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a zeroed statfs is a valid out-parameter; statfs reads the
    // NUL-terminated path and writes only `st`.
    unsafe {
        let mut st: libc::statfs = std::mem::zeroed();
        libc::statfs(c.as_ptr(), &mut st) == 0 && st.f_type as libc::c_long == TMPFS_MAGIC
    }
}

/// Whether the kernel has NUMA node `node` (under `sys`, normally
/// `/sys/devices/system`).
fn node_exists(sys: &Path, node: u32) -> bool {
    sys.join(format!("node/node{node}")).is_dir()
}

/// Whether the member at `path` on `node` is to be bound, under the
/// mount's `topology`.
pub(crate) fn bind_plan(path: &Path, node: u32, topology: &Topology) -> Plan {
    if !on_tmpfs(path) {
        return Plan::Skip;
    }
    if topology.is_emulated() {
        tracing::debug!(
            member = %path.display(),
            node,
            "member on tmpfs not bound to its node: the topology is emulated"
        );
        return Plan::Skip;
    }
    // `node` is manyfs's dense number; the kernel's id may differ where its
    // node ids have holes (nodes 0 and 2, say).
    let os_id = ((node as usize) < topology.node_count())
        .then(|| topology.os_node_id(node as usize))
        .filter(|&id| node_exists(Path::new("/sys/devices/system"), id));
    let Some(os_id) = os_id else {
        tracing::debug!(
            member = %path.display(),
            node,
            "member on tmpfs not bound: the machine has no such NUMA node"
        );
        return Plan::Skip;
    };
    Plan::Bind(os_id)
}

/// The NUMA node the kernel reports for the block device `major:minor`
/// (under `sys`, normally `/sys`): `dev/block/M:N/device/numa_node`, or
/// the whole disk's for a partition. `None` where the kernel does not know
/// (no such file, `-1`): a device without NUMA affinity, or one that is
/// not a block device (tmpfs, a network file system).
fn device_node(sys: &Path, major: u32, minor: u32) -> Option<u32> {
    let dev = sys.join(format!("dev/block/{major}:{minor}"));
    let read = |dir: &Path| -> Option<u32> {
        let text = std::fs::read_to_string(dir.join("device/numa_node")).ok()?;
        text.trim()
            .parse::<i64>()
            .ok()
            .and_then(|n| u32::try_from(n).ok())
    };
    read(&dev).or_else(|| {
        // A partition's directory lies inside its disk's.
        let real = std::fs::canonicalize(&dev).ok()?;
        read(real.parent()?)
    })
}

/// The device a file lives on and the NUMA node the kernel reports for
/// it, where it reports one (see [`device_node`]).
fn file_device_node(sys: &Path, file: &std::fs::File) -> Option<(String, u32)> {
    use std::os::unix::fs::MetadataExt;
    let dev = file.metadata().ok()?.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let node = device_node(sys, major, minor)?;
    Some((format!("{major}:{minor}"), node))
}

/// Check that a member on a persistent-memory device is on the node the
/// pool says: a DAX device is one node's memory, so a member given the
/// wrong node would make local-first placement remote for every access.
/// Checked on the machine's own topology only (an emulated one's node
/// numbers name no hardware), and only where the kernel reports a node.
pub(crate) fn check_device_node(
    sys: &Path,
    file: &std::fs::File,
    path: &Path,
    index: u32,
    given: u32,
    topology: &Topology,
) -> Result<()> {
    if topology.is_emulated() {
        return Ok(());
    }
    // The kernel reports its own node id; members carry manyfs's dense
    // number (an id the topology does not know stays as the kernel's).
    let dense = |os_id: u32| topology.node_of_os_id(os_id).map_or(os_id, |n| n as u32);
    match file_device_node(sys, file).map(|(device, os_id)| (device, dense(os_id))) {
        Some((device, found)) if found != given => Err(Error::Member {
            path: path.to_path_buf(),
            index,
            problem: crate::error::MemberProblem::WrongNode {
                given,
                device,
                found,
            },
        }),
        _ => Ok(()),
    }
}

/// A node mask with only `node` set, and the `maxnode` to pass with it.
fn mask_of(node: u32) -> (Vec<libc::c_ulong>, libc::c_ulong) {
    let bits = libc::c_ulong::BITS;
    let mut mask = vec![0 as libc::c_ulong; node as usize / bits as usize + 1];
    mask[(node / bits) as usize] |= 1 << (node % bits);
    let maxnode = mask.len() as libc::c_ulong * libc::c_ulong::from(bits) + 1;
    (mask, maxnode)
}

/// Ok for a zero syscall result, else the OS error as a failure to bind
/// member `path` to `node` by `what`.
fn checked(rc: libc::c_long, path: &Path, node: u32, what: &str) -> Result<()> {
    if rc == 0 {
        return Ok(());
    }
    Err(Error::io(
        format!(
            "bind pool member {} to NUMA node {node} ({what})",
            path.display()
        ),
        std::io::Error::last_os_error(),
    ))
}

/// `mbind(MPOL_BIND, node)` the mapping `[addr, addr+len)` of member
/// `path`: the tmpfs file's shared policy for that range.
///
/// # Safety
///
/// `[addr, addr+len)` must be a mapping this process owns; mbind changes
/// only its policy, not its contents.
pub(crate) unsafe fn mbind(addr: *mut u8, len: usize, path: &Path, node: u32) -> Result<()> {
    let (mask, maxnode) = mask_of(node);
    // SAFETY: the caller owns the range; the mask outlives the call and
    // holds `maxnode - 1` bits.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mbind,
            addr,
            len,
            MPOL_BIND,
            mask.as_ptr(),
            maxnode,
            0 as libc::c_uint,
        )
    };
    checked(rc, path, node, "mbind")
}

/// Run `f` with the calling thread's memory policy `MPOL_BIND` to `node`
/// (so the pages it allocates come from that node), then restore the
/// default policy.
pub(crate) fn with_thread_bound<T>(
    path: &Path,
    node: u32,
    f: impl FnOnce() -> Result<T>,
) -> Result<T> {
    let (mask, maxnode) = mask_of(node);
    // SAFETY: set_mempolicy reads `maxnode - 1` bits of the mask, which
    // outlives the call; it changes only this thread's policy.
    let rc = unsafe { libc::syscall(libc::SYS_set_mempolicy, MPOL_BIND, mask.as_ptr(), maxnode) };
    checked(rc, path, node, "set_mempolicy")?;
    let out = f();
    // SAFETY: MPOL_DEFAULT takes no mask; this thread's policy only.
    unsafe {
        libc::syscall(
            libc::SYS_set_mempolicy,
            MPOL_DEFAULT,
            std::ptr::null::<libc::c_ulong>(),
            0 as libc::c_ulong,
        )
    };
    out
}

/// Run `f`, which creates the member file at `path` and allocates its
/// pages, bound to `node` when [`bind_plan`] says so.
pub(crate) fn create_bound<T>(
    path: &Path,
    node: u32,
    topology: &Topology,
    f: impl FnOnce() -> Result<T>,
) -> Result<T> {
    match bind_plan(path, node, topology) {
        Plan::Bind(n) => with_thread_bound(path, n, f),
        Plan::Skip => f(),
    }
}

impl super::Media {
    /// Bind each member on tmpfs to its NUMA node's memory (`mbind`), where
    /// `topology` is the machine's and has the node; skip the others (see the
    /// module doc). Call before the mapping is touched. An `mbind` the kernel
    /// refuses for a real node is an error naming the member.
    pub fn bind_members(&self, topology: &crate::Topology) -> Result<()> {
        for m in &self.members {
            if let Plan::Bind(node) = bind_plan(&m.path, m.node, topology) {
                // SAFETY: `base + start .. + len` is this member's part of
                // the mapping `self` owns; mbind changes only its policy.
                unsafe {
                    mbind(
                        self.base.add(m.start as usize),
                        m.len as usize,
                        &m.path,
                        node,
                    )?
                };
            }
        }
        Ok(())
    }

    /// In `pm` mode, check that each member's persistent-memory device is
    /// on the node the pool gives it, where the kernel reports the
    /// device's node and `topology` is the machine's own (see
    /// [`check_device_node`]): a mismatch is
    /// [`crate::MemberProblem::WrongNode`].
    pub fn check_member_nodes(&self, topology: &crate::Topology) -> Result<()> {
        if self.mode != super::Durability::Pm {
            return Ok(());
        }
        for (index, m) in self.members.iter().enumerate() {
            check_device_node(
                Path::new("/sys"),
                &m.file,
                &m.path,
                index as u32,
                m.node,
                topology,
            )?;
        }
        Ok(())
    }
}

/// The policy mode and node mask (first word) of the page at `addr`
/// (`get_mempolicy(MPOL_F_ADDR)`), for tests.
#[cfg(test)]
pub(crate) fn policy_at(addr: *mut u8) -> std::io::Result<(libc::c_int, libc::c_ulong)> {
    const MPOL_F_ADDR: libc::c_ulong = 1 << 1;
    let mut mode: libc::c_int = 0;
    let mut mask = [0 as libc::c_ulong; 16];
    // SAFETY: the out-parameters are ours and `mask` holds 1024 bits.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_get_mempolicy,
            &mut mode as *mut libc::c_int,
            mask.as_mut_ptr(),
            (mask.len() * 64) as libc::c_ulong,
            addr,
            MPOL_F_ADDR,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((mode, mask[0]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::media::{Durability, Media, OpenMember};

    /// A 1 MiB member file in `dir`, mapped (on node 0).
    fn mapped(dir: &Path) -> (std::path::PathBuf, Media) {
        let p = dir.join("m0");
        let len = 1 << 20;
        let file = create_bound(&p, 0, Topology::system(), || {
            Media::create_file(&p, len, false)
        })
        .unwrap();
        let m = Media::from_members(
            vec![OpenMember {
                file,
                path: p.clone(),
                len,
                node: 0,
            }],
            Durability::Dram,
            true,
        )
        .unwrap();
        (p, m)
    }

    /// A fake `/sys` where block device `259:0` (a disk) is on node 1,
    /// its partition `259:1` has no node of its own, and `259:2` reports
    /// `-1` (no affinity).
    fn fake_sys() -> tempfile::TempDir {
        let sys = tempfile::tempdir().unwrap();
        let disk = sys.path().join("devices/pmem0");
        std::fs::create_dir_all(disk.join("device")).unwrap();
        std::fs::write(disk.join("device/numa_node"), "1\n").unwrap();
        std::fs::create_dir_all(disk.join("pmem0p1")).unwrap();
        let other = sys.path().join("devices/vda");
        std::fs::create_dir_all(other.join("device")).unwrap();
        std::fs::write(other.join("device/numa_node"), "-1\n").unwrap();
        let block = sys.path().join("dev/block");
        std::fs::create_dir_all(&block).unwrap();
        std::os::unix::fs::symlink(&disk, block.join("259:0")).unwrap();
        std::os::unix::fs::symlink(disk.join("pmem0p1"), block.join("259:1")).unwrap();
        std::os::unix::fs::symlink(&other, block.join("259:2")).unwrap();
        sys
    }

    #[test]
    fn a_device_node_comes_from_sysfs_or_its_disk() {
        let sys = fake_sys();
        assert_eq!(device_node(sys.path(), 259, 0), Some(1));
        assert_eq!(device_node(sys.path(), 259, 1), Some(1), "the disk's");
        assert_eq!(device_node(sys.path(), 259, 2), None, "-1: unknown");
        assert_eq!(device_node(sys.path(), 8, 0), None, "no such device");
    }

    #[test]
    fn a_member_on_another_nodes_device_is_a_typed_error() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m1");
        let file = std::fs::File::create(&path).unwrap();
        let dev = file.metadata().unwrap().dev();
        // A fake /sys that puts this file's device on node 1.
        let sys = tempfile::tempdir().unwrap();
        let d = sys.path().join(format!(
            "dev/block/{}:{}/device",
            libc::major(dev),
            libc::minor(dev)
        ));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("numa_node"), "1").unwrap();
        let system = Topology::system();
        check_device_node(sys.path(), &file, &path, 1, 1, system).unwrap();
        let err = check_device_node(sys.path(), &file, &path, 1, 0, system).unwrap_err();
        match &err {
            Error::Member {
                index: 1,
                problem:
                    crate::error::MemberProblem::WrongNode {
                        given: 0, found: 1, ..
                    },
                ..
            } => {}
            other => panic!("{other:?}"),
        }
        assert!(err.to_string().contains("belongs to node 1"), "{err}");
        // An emulated topology's nodes name no hardware: not checked.
        check_device_node(sys.path(), &file, &path, 1, 0, &Topology::emulated(2, 1)).unwrap();
        // Where the kernel reports no node, nothing to check.
        let empty = tempfile::tempdir().unwrap();
        check_device_node(empty.path(), &file, &path, 1, 0, system).unwrap();

        // A machine whose node ids have a hole (nodes 0 and 2): the device
        // on the kernel's node 2 is manyfs's node 1.
        std::fs::write(d.join("numa_node"), "2").unwrap();
        let nodes = tempfile::tempdir().unwrap();
        for (id, cpus) in [(0, "0-3"), (2, "4-7")] {
            let n = nodes.path().join(format!("node/node{id}"));
            std::fs::create_dir_all(&n).unwrap();
            std::fs::write(n.join("cpulist"), cpus).unwrap();
        }
        std::fs::create_dir_all(nodes.path().join("cpu")).unwrap();
        std::fs::write(nodes.path().join("cpu/possible"), "0-7").unwrap();
        let holes = Topology::from_sysfs(nodes.path());
        check_device_node(sys.path(), &file, &path, 1, 1, &holes).unwrap();
        let err = check_device_node(sys.path(), &file, &path, 1, 0, &holes).unwrap_err();
        assert!(
            matches!(
                err,
                Error::Member {
                    problem: crate::error::MemberProblem::WrongNode { found: 1, .. },
                    ..
                }
            ),
            "{err:?}"
        );
    }

    /// A directory on tmpfs, where this machine has one with NUMA node 0
    /// in sysfs (else the test has nothing to bind).
    fn shm_dir() -> Option<tempfile::TempDir> {
        let shm = Path::new("/dev/shm");
        if !on_tmpfs(shm) || !node_exists(Path::new("/sys/devices/system"), 0) {
            return None;
        }
        tempfile::tempdir_in(shm).ok()
    }

    #[test]
    fn a_tmpfs_member_is_bound_to_its_node() {
        let Some(dir) = shm_dir() else { return };
        let (p, m) = mapped(dir.path());
        assert_eq!(bind_plan(&p, 0, Topology::system()), Plan::Bind(0));
        assert_eq!(policy_at(m.base).unwrap().0, MPOL_DEFAULT);
        m.bind_members(Topology::system()).unwrap();
        assert_eq!(policy_at(m.base).unwrap(), (MPOL_BIND, 1));
        // The thread that created the file is back on the default policy.
        assert_eq!(thread_policy().unwrap(), MPOL_DEFAULT);
        m.store(0, b"bound").unwrap();
        assert_eq!(m.read_vec(0, 5).unwrap(), b"bound");
    }

    #[test]
    fn emulated_topologies_missing_nodes_and_disk_files_are_skipped() {
        let disk = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
        if !on_tmpfs(&disk) {
            assert_eq!(bind_plan(&disk, 0, Topology::system()), Plan::Skip);
        }
        let Some(dir) = shm_dir() else { return };
        let (p, m) = mapped(dir.path());
        assert_eq!(bind_plan(&p, 0, &Topology::emulated(2, 1)), Plan::Skip);
        assert_eq!(bind_plan(&p, 4000, Topology::system()), Plan::Skip);
        m.bind_members(&Topology::emulated(2, 1)).unwrap();
        assert_eq!(policy_at(m.base).unwrap().0, MPOL_DEFAULT);
    }

    #[test]
    fn a_refused_mbind_is_an_error_naming_the_member_and_node() {
        let Some(dir) = shm_dir() else { return };
        let (p, m) = mapped(dir.path());
        // SAFETY: base + 1 lies in the mapping `m` owns; an unaligned
        // start makes the kernel refuse (EINVAL) without changing anything.
        let err = unsafe { mbind(m.base.add(1), 4096, &p, 0) }.unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains(&p.display().to_string()) && msg.contains("NUMA node 0"),
            "{msg}"
        );
        assert_eq!(err.errno(), libc::EINVAL);
        // A node the kernel lacks, bound through with_thread_bound, fails
        // the same way and leaves the thread's policy alone.
        let err = with_thread_bound(&p, 4000, || Ok(())).unwrap_err();
        assert!(err.to_string().contains("set_mempolicy"), "{err}");
        assert_eq!(thread_policy().unwrap(), MPOL_DEFAULT);
    }

    /// The calling thread's policy mode (`get_mempolicy`, no flags).
    fn thread_policy() -> std::io::Result<libc::c_int> {
        let mut mode: libc::c_int = -1;
        // SAFETY: `mode` is ours; no mask is asked for.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_get_mempolicy,
                &mut mode as *mut libc::c_int,
                std::ptr::null_mut::<libc::c_ulong>(),
                0 as libc::c_ulong,
                std::ptr::null_mut::<libc::c_void>(),
                0 as libc::c_ulong,
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(mode)
    }
}
