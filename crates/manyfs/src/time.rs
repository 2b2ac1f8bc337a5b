//! Wall-clock timestamps in nanoseconds since the Unix epoch.
//!
//! File times use the coarse real-time clock, as the kernel does for inode
//! timestamps: it is read from the vDSO without touching the hardware
//! counter, so stamping every write costs a few nanoseconds.

/// Now, in nanoseconds since the epoch (0 if the clock is before 1970).
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we pass; no other memory.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) };
    if rc != 0 || ts.tv_sec < 0 {
        return std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    #[test]
    fn coarse_clock_is_close_to_the_precise_one() {
        let precise = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        let coarse = super::now_ns();
        assert!(
            coarse.abs_diff(precise) < 100_000_000,
            "{coarse} vs {precise}"
        );
    }
}
