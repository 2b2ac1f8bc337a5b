//! Wall-clock timestamps in nanoseconds since the Unix epoch.

/// Now, in nanoseconds since the epoch (0 if the clock is before 1970).
pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
