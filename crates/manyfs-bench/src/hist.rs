//! A small log-linear latency histogram (about 3% relative error).

const EXACT: usize = 32;
const SUB_BITS: u32 = 4;
const SUB: usize = 1 << SUB_BITS;
const BUCKETS: usize = EXACT + 60 * SUB;

/// Counts of latencies in nanoseconds, mergeable across threads.
#[derive(Clone, Debug)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

fn bucket(v: u64) -> usize {
    if v < EXACT as u64 {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros(); // >= 5
    let sub = ((v >> (msb - SUB_BITS)) as usize) & (SUB - 1);
    EXACT + (msb as usize - 5) * SUB + sub
}

fn value(idx: usize) -> u64 {
    if idx < EXACT {
        return idx as u64;
    }
    let msb = ((idx - EXACT) / SUB) as u32 + 5;
    let sub = ((idx - EXACT) % SUB) as u64;
    let width = 1u64 << (msb - SUB_BITS);
    ((SUB as u64 + sub) << (msb - SUB_BITS)) + width / 2
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Self {
        Histogram {
            counts: vec![0; BUCKETS],
            total: 0,
        }
    }

    /// Count one latency of `ns` nanoseconds.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.counts[bucket(ns)] += 1;
        self.total += 1;
    }

    /// Add another histogram's counts to this one.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.total += other.total;
    }

    /// Number of recorded values.
    pub fn count(&self) -> u64 {
        self.total
    }

    /// The value below which a fraction `q` (0..=1) of the recorded values
    /// lie (0 when empty).
    pub fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return value(i);
            }
        }
        value(BUCKETS - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotonic_and_close() {
        let mut last = 0;
        for v in [0u64, 1, 31, 32, 33, 100, 1000, 12345, 1 << 20, u64::MAX / 2] {
            let b = bucket(v);
            assert!(b >= last);
            last = b;
            let back = value(b);
            let err = (back as f64 - v as f64).abs() / (v.max(1) as f64);
            assert!(err < 0.04, "{v} -> {back}");
        }
        assert!(bucket(u64::MAX) < BUCKETS);
    }

    #[test]
    fn quantiles() {
        let mut h = Histogram::new();
        for v in 1..=1000 {
            h.record(v);
        }
        let p50 = h.quantile(0.5);
        assert!((480..=520).contains(&p50), "{p50}");
        let p99 = h.quantile(0.99);
        assert!((960..=1020).contains(&p99), "{p99}");
    }
}
