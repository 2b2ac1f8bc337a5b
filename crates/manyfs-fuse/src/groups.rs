//! Whether a request's caller belongs to a group: its fsgid (in the
//! request) or one of its supplementary groups, which FUSE does not send
//! and are read from `/proc/PID/status`. Asked only where the answer
//! changes a file's mode (a setgid file without group execute written by
//! another user), so the read stays off every common path.

/// Whether the process `pid`, whose request carried `fsgid`, belongs to
/// group `gid`. A process that cannot be looked up (gone, or a request from
/// the kernel with pid 0) counts as outside it: the privilege is dropped.
pub(crate) fn caller_in_group(pid: u32, fsgid: u32, gid: u32) -> bool {
    if fsgid == gid {
        return true;
    }
    if pid == 0 {
        return false;
    }
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    supplementary_groups(&status).any(|g| g == gid)
}

/// The ids on the `Groups:` line of a `/proc/PID/status` text.
fn supplementary_groups(status: &str) -> impl Iterator<Item = u32> + '_ {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .into_iter()
        .flat_map(|rest| rest.split_whitespace().filter_map(|g| g.parse().ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_line_is_parsed() {
        let status = "Name:\tsh\nGid:\t100\t100\t100\t100\nGroups:\t4 24 27 \nVmPeak:\t1 kB\n";
        assert_eq!(
            supplementary_groups(status).collect::<Vec<_>>(),
            [4, 24, 27]
        );
        assert_eq!(supplementary_groups("Groups:\t\n").count(), 0);
        assert_eq!(supplementary_groups("Name:\tx\n").count(), 0);
    }

    #[test]
    fn this_process_is_in_its_own_groups_and_not_in_others() {
        let pid = std::process::id();
        // SAFETY: getegid has no preconditions and cannot fail.
        let egid = unsafe { libc::getegid() };
        assert!(caller_in_group(pid, egid, egid));
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        for g in supplementary_groups(&status) {
            assert!(caller_in_group(pid, u32::MAX - 1, g), "group {g}");
        }
        let outside = (1..u32::MAX - 2)
            .find(|g| *g != egid && !supplementary_groups(&status).any(|s| s == *g))
            .unwrap();
        assert!(!caller_in_group(pid, egid, outside));
        assert!(!caller_in_group(0, egid, outside), "the kernel's pid 0");
    }
}
