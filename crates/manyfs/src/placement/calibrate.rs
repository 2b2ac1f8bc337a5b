//! Calibration: each node's read and write bandwidth at read ratios 100,
//! 80, 60, 40, 20 and 0 %, measured on free blocks of that node's pool
//! member and stored in a small text file beside the pool
//! (`POOL.calibration`) for the planner's maxima.
//!
//! The paper found that `reads / 3 + writes` stays about constant across
//! read ratios on Optane; the maximum weighted bandwidth a node is given is
//! the largest measured, its read bandwidth the one at 100 % reads. The
//! file format, one point per line, `#` starts a comment:
//!
//! ```text
//! # node read% read_bytes_per_s write_bytes_per_s
//! 0 100 6800000000 0
//! 0 80 4100000000 1025000000
//! ```

use super::account::NodeRanges;
use super::config::PlacementConfig;
use crate::error::{Error, Result};
use crate::layout::BLOCK_SIZE;
use crate::media::Media;
use crate::topology::Topology;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The read ratios measured, percent.
pub const READ_RATIOS: [u32; 6] = [100, 80, 60, 40, 20, 0];

/// Bytes of scratch blocks measured per node (at most).
const SCRATCH_BYTES: u64 = 16 << 20;

/// Bytes per read or write.
const CHUNK: usize = 64 << 10;

/// Threads measuring one node (at most; fewer if it has fewer CPUs).
const MAX_THREADS: usize = 4;

/// One measured point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CalibrationPoint {
    /// The node.
    pub node: usize,
    /// Percentage of operations that read.
    pub read_pct: u32,
    /// Bytes read per second.
    pub read_bw: u64,
    /// Bytes written per second.
    pub write_bw: u64,
}

/// A pool's measured bandwidths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Calibration {
    /// Every point measured.
    pub points: Vec<CalibrationPoint>,
}

impl Calibration {
    /// Where the calibration of `pool` is kept: `POOL.calibration`.
    pub fn path_for(pool: &Path) -> PathBuf {
        let mut p = pool.as_os_str().to_owned();
        p.push(".calibration");
        PathBuf::from(p)
    }

    /// Parse the text form; `what` names it in errors.
    pub fn parse(text: &str, what: &str) -> Result<Calibration> {
        let mut points = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let bad = |why: &str| {
                Error::InvalidArgument(format!("calibration {what}, line {}: {why}", i + 1))
            };
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() != 4 {
                return Err(bad("expected NODE READ% READ_BW WRITE_BW"));
            }
            let num = |s: &str| {
                s.parse::<u64>()
                    .map_err(|_| bad(&format!("{s:?} is no number")))
            };
            let (node, pct) = (num(f[0])?, num(f[1])?);
            if pct > 100 || node > crate::topology::MAX_CPUS as u64 {
                return Err(bad("node or percentage out of range"));
            }
            points.push(CalibrationPoint {
                node: node as usize,
                read_pct: pct as u32,
                read_bw: num(f[2])?,
                write_bw: num(f[3])?,
            });
        }
        Ok(Calibration { points })
    }

    /// The text form.
    pub fn to_text(&self) -> String {
        let mut s =
            String::from("# manyfs calibration: node read% read_bytes_per_s write_bytes_per_s\n");
        for p in &self.points {
            s += &format!("{} {} {} {}\n", p.node, p.read_pct, p.read_bw, p.write_bw);
        }
        s
    }

    /// Read `path`; None if there is no such file.
    pub fn load(path: &Path) -> Result<Option<Calibration>> {
        match std::fs::read_to_string(path) {
            Ok(t) => Calibration::parse(&t, &path.display().to_string()).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(cause) => Err(Error::Io {
                context: format!("read calibration {}", path.display()),
                cause,
            }),
        }
    }

    /// Write to `path`.
    pub fn save(&self, path: &Path) -> Result<()> {
        std::fs::write(path, self.to_text()).map_err(|cause| Error::Io {
            context: format!("write calibration {}", path.display()),
            cause,
        })
    }

    /// Give `cfg` these maxima for `nodes` nodes: each node's read
    /// bandwidth at 100 % reads, and its largest weighted bandwidth.
    pub fn apply(&self, cfg: &mut PlacementConfig, nodes: usize) {
        let div = u64::from(cfg.read_weight_divisor.max(1));
        cfg.node_read_bw = vec![0; nodes];
        cfg.node_max_bw = vec![0; nodes];
        for p in self.points.iter().filter(|p| p.node < nodes) {
            if p.read_pct == 100 {
                cfg.node_read_bw[p.node] = p.read_bw;
            }
            let weighted = p.read_bw / div + p.write_bw;
            cfg.node_max_bw[p.node] = cfg.node_max_bw[p.node].max(weighted);
        }
    }
}

/// Where calibration takes its scratch blocks from (the mount's block
/// allocator; a trait so that placement does not depend on `alloc`).
pub trait ScratchBlocks {
    /// Between 1 and `want` contiguous free data blocks, from `node` first.
    fn take(&self, node: usize, want: u64) -> Result<(u64, u64)>;
    /// Give back blocks [`ScratchBlocks::take`] returned.
    fn give_back(&self, first: u64, count: u64);
}

/// `config`, with the maxima of the calibration stored beside `pool` when
/// `config` has none of its own (an unreadable file is reported and
/// ignored: a stale calibration must not stop a mount).
pub fn config_for_pool(pool: &Path, config: &PlacementConfig, nodes: usize) -> PlacementConfig {
    let mut config = config.clone();
    if !config.node_max_bw.is_empty() || !config.node_read_bw.is_empty() {
        return config;
    }
    match Calibration::load(&Calibration::path_for(pool)) {
        Ok(Some(c)) => c.apply(&mut config, nodes),
        Ok(None) => {}
        Err(e) => {
            tracing::warn!(target: "manyfs::placement", error = %e, "calibration ignored")
        }
    }
    config
}

/// Measure every node that has free blocks of its own, `per_point` per
/// read ratio, with up to 4 threads on the CPUs of `cpus` on that node
/// (unpinned if it has none). The scratch blocks are allocated from the
/// node, overwritten, and freed again: nothing refers to them.
pub(crate) fn measure(
    media: &Media,
    blocks: &dyn ScratchBlocks,
    ranges: &NodeRanges,
    topology: &Topology,
    cpus: &[usize],
    per_point: Duration,
) -> Result<Calibration> {
    let mut points = Vec::new();
    for node in 0..topology.node_count() {
        let scratch = take_scratch(blocks, ranges, node)?;
        let result = measure_node(media, &scratch, topology, cpus, node, per_point);
        for &(b, n) in &scratch {
            blocks.give_back(b, n);
        }
        points.extend(result?);
    }
    Ok(Calibration { points })
}

/// Up to [`SCRATCH_BYTES`] of free blocks on `node` (none if it has none).
fn take_scratch(
    blocks: &dyn ScratchBlocks,
    ranges: &NodeRanges,
    node: usize,
) -> Result<Vec<(u64, u64)>> {
    let want = SCRATCH_BYTES / BLOCK_SIZE;
    let mut got = Vec::new();
    let mut have = 0;
    while have < want {
        let Ok((b, n)) = blocks.take(node, want - have) else {
            break;
        };
        if ranges.node_of(b) != node {
            // It spilled to another node: this one is full.
            blocks.give_back(b, n);
            break;
        }
        got.push((b, n));
        have += n;
    }
    Ok(got)
}

fn measure_node(
    media: &Media,
    scratch: &[(u64, u64)],
    topology: &Topology,
    cpus: &[usize],
    node: usize,
    per_point: Duration,
) -> Result<Vec<CalibrationPoint>> {
    // Whole chunks inside the scratch extents, as pool offsets.
    let chunk_blocks = CHUNK as u64 / BLOCK_SIZE;
    let chunks: Vec<u64> = scratch
        .iter()
        .flat_map(|&(b, n)| (0..n / chunk_blocks).map(move |i| (b + i * chunk_blocks) * BLOCK_SIZE))
        .collect();
    if chunks.is_empty() {
        return Ok(Vec::new());
    }
    let mine: Vec<usize> = cpus
        .iter()
        .copied()
        .filter(|&c| topology.node_of(c) == node)
        .collect();
    let threads = mine.len().clamp(1, MAX_THREADS).min(chunks.len());
    let mut out = Vec::new();
    for pct in READ_RATIOS {
        let (read, written) = (AtomicU64::new(0), AtomicU64::new(0));
        let start = Instant::now();
        let results: Vec<Result<()>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let (chunks, mine, read, written) = (&chunks, &mine, &read, &written);
                    s.spawn(move || -> Result<()> {
                        if !mine.is_empty() {
                            super::affinity::set(0, mine)?;
                        }
                        let mut buf = vec![0x5au8; CHUNK];
                        let (mut r, mut w) = (0u64, 0u64);
                        let mut i = t;
                        // At least one operation each, however late the
                        // thread got a CPU.
                        loop {
                            let off = chunks[i % chunks.len()];
                            // Of every 5 operations, pct / 20 read.
                            if (i % 5) < (pct / 20) as usize {
                                media.read(off, &mut buf)?;
                                r += CHUNK as u64;
                            } else {
                                media.nt_copy(off, &buf)?;
                                w += CHUNK as u64;
                            }
                            i += threads;
                            if start.elapsed() >= per_point {
                                break;
                            }
                        }
                        read.fetch_add(r, Ordering::Relaxed);
                        written.fetch_add(w, Ordering::Relaxed);
                        Ok(())
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(Error::InvalidArgument(
                            "a calibration thread panicked".into(),
                        ))
                    })
                })
                .collect()
        });
        results.into_iter().collect::<Result<Vec<()>>>()?;
        let secs = start.elapsed().as_secs_f64().max(1e-9);
        out.push(CalibrationPoint {
            node,
            read_pct: pct,
            read_bw: (read.into_inner() as f64 / secs) as u64,
            write_bw: (written.into_inner() as f64 / secs) as u64,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_form_round_trips_and_bad_lines_are_errors() {
        let c = Calibration {
            points: vec![
                CalibrationPoint {
                    node: 0,
                    read_pct: 100,
                    read_bw: 6_000,
                    write_bw: 0,
                },
                CalibrationPoint {
                    node: 1,
                    read_pct: 20,
                    read_bw: 300,
                    write_bw: 2_000,
                },
            ],
        };
        assert_eq!(Calibration::parse(&c.to_text(), "t").unwrap(), c);
        for bad in [
            "0 100 5",
            "0 101 1 1",
            "x 100 1 1",
            "0 50 1 -1",
            "999 100 1 1",
        ] {
            let e = Calibration::parse(bad, "t").unwrap_err();
            assert!(e.to_string().contains("line 1"), "{bad}: {e}");
        }
        let mut cfg = PlacementConfig::default();
        c.apply(&mut cfg, 2);
        assert_eq!(cfg.node_read_bw, vec![6_000, 0]);
        assert_eq!(cfg.node_max_bw, vec![2_000, 2_100]);
        assert_eq!(cfg.node_max(0), 2_000);
        assert_eq!(
            Calibration::path_for(Path::new("/p/pool")),
            Path::new("/p/pool.calibration")
        );
    }

    #[test]
    fn files_load_save_and_may_be_absent() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.calibration");
        assert_eq!(Calibration::load(&p).unwrap(), None);
        let c = Calibration {
            points: vec![CalibrationPoint {
                node: 0,
                read_pct: 0,
                read_bw: 0,
                write_bw: 9,
            }],
        };
        c.save(&p).unwrap();
        assert_eq!(Calibration::load(&p).unwrap(), Some(c));
        std::fs::write(&p, "garbage").unwrap();
        assert!(Calibration::load(&p).is_err());
        assert!(Calibration::load(dir.path()).is_err(), "a directory");
        assert!(c_save_fails(dir.path()));
    }

    #[test]
    fn a_mount_takes_the_maxima_beside_the_pool_unless_given_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let pool = dir.path().join("pool");
        let base = PlacementConfig::default();
        assert_eq!(config_for_pool(&pool, &base, 2), base, "no file");
        std::fs::write(Calibration::path_for(&pool), "0 100 3000 0\n1 0 0 700\n").unwrap();
        let c = config_for_pool(&pool, &base, 2);
        assert_eq!(
            (c.node_read_bw, c.node_max_bw),
            (vec![3000, 0], vec![1000, 700])
        );
        let own = PlacementConfig {
            node_max_bw: vec![5],
            ..PlacementConfig::default()
        };
        assert_eq!(config_for_pool(&pool, &own, 2), own);
        std::fs::write(Calibration::path_for(&pool), "bad").unwrap();
        assert_eq!(
            config_for_pool(&pool, &base, 2),
            base,
            "a bad file is ignored"
        );
    }

    fn c_save_fails(dir: &Path) -> bool {
        Calibration::default()
            .save(&dir.join("no/such/dir"))
            .is_err()
    }
}
