//! Aligned text tables and JSON output.

use crate::runner::Record;
use crate::{BenchError, Result};
use std::fmt::Write as _;
use std::path::Path;

/// `1234567.0` -> `1.23M`.
pub fn si(v: f64) -> String {
    let (d, s) = if v >= 1e9 {
        (1e9, "G")
    } else if v >= 1e6 {
        (1e6, "M")
    } else if v >= 1e3 {
        (1e3, "k")
    } else {
        (1.0, "")
    };
    format!("{:.2}{s}", v / d)
}

/// Bytes per second in binary units.
pub fn bytes_rate(v: f64) -> String {
    if v <= 0.0 {
        return "-".into();
    }
    let gib = (1u64 << 30) as f64;
    let mib = (1u64 << 20) as f64;
    if v >= gib {
        format!("{:.2} GiB/s", v / gib)
    } else {
        format!("{:.1} MiB/s", v / mib)
    }
}

/// Nanoseconds in the most readable unit.
pub fn ns(v: u64) -> String {
    let f = v as f64;
    if v >= 1_000_000_000 {
        format!("{:.2}s", f / 1e9)
    } else if v >= 1_000_000 {
        format!("{:.2}ms", f / 1e6)
    } else if v >= 1_000 {
        format!("{:.2}us", f / 1e3)
    } else {
        format!("{v}ns")
    }
}

/// This record's bytes/s as a fraction of the memory reference at the same
/// thread count: MEM-W (or MEMHOT-W when `hot`) for writes, MEM-R
/// (MEMHOT-R) for reads, their mean for mixes. `None` for metadata.
pub fn memory_fraction(r: &Record, all: &[Record], hot: bool) -> Option<f64> {
    let (mw, mr) = if hot {
        ("MEMHOT-W", "MEMHOT-R")
    } else {
        ("MEM-W", "MEM-R")
    };
    let w: crate::Workload = r.workload.parse().ok()?;
    if !w.moves_data() || w.is_memory() || r.bytes_per_sec <= 0.0 {
        return None;
    }
    let find = |name: &str| {
        all.iter()
            .find(|m| m.target == "memory" && m.workload == name && m.threads == r.threads)
            .map(|m| m.bytes_per_sec)
    };
    let reference = match w {
        crate::Workload::HaccIo | crate::Workload::Mix { .. } | crate::Workload::Pmix { .. } => {
            (find(mw)? + find(mr)?) / 2.0
        }
        _ if w.writes() => find(mw)?,
        _ => find(mr)?,
    };
    (reference > 0.0).then(|| r.bytes_per_sec / reference)
}

/// The line under a [`text_table`] header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rule {
    /// No line.
    None,
    /// One unbroken line of dashes, as wide as the table.
    Full,
    /// Dashes under each column, two spaces apart.
    Columns,
}

/// Lay `rows` out under `header` in columns two spaces apart: the first
/// `left` columns left-aligned, the others right-aligned.
pub(crate) fn text_table(header: &[&str], rows: &[Vec<String>], left: usize, rule: Rule) -> String {
    let mut width: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, c) in width.iter_mut().zip(row) {
            *w = (*w).max(c.len());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, cells: &mut dyn Iterator<Item = &str>| {
        for (i, (c, &w)) in cells.zip(&width).enumerate() {
            if i > 0 {
                out.push_str("  ");
            }
            if i < left {
                let _ = write!(out, "{c:<w$}");
            } else {
                let _ = write!(out, "{c:>w$}");
            }
        }
        out.push('\n');
    };
    line(&mut out, &mut header.iter().copied());
    match rule {
        Rule::None => {}
        Rule::Full => {
            let total: usize = width.iter().sum::<usize>() + 2 * (width.len() - 1);
            out.push_str(&"-".repeat(total));
            out.push('\n');
        }
        Rule::Columns => {
            let dashes: Vec<String> = width.iter().map(|w| "-".repeat(*w)).collect();
            line(&mut out, &mut dashes.iter().map(String::as_str));
        }
    }
    for row in rows {
        line(&mut out, &mut row.iter().map(String::as_str));
    }
    out
}

/// Render records as an aligned table (one row per point).
pub fn table(records: &[Record]) -> String {
    let header = [
        "workload",
        "target",
        "threads",
        "ops/s",
        "bandwidth",
        "p50",
        "p99",
        "of DRAM copy",
        "of cached copy",
    ];
    let pct = |f: Option<f64>| {
        f.map(|f| format!("{:.1}%", f * 100.0))
            .unwrap_or_else(|| "-".into())
    };
    let rows: Vec<Vec<String>> = records
        .iter()
        .map(|r| {
            vec![
                r.workload.clone(),
                shown_target(r),
                r.threads.to_string(),
                si(r.ops_per_sec),
                bytes_rate(r.bytes_per_sec),
                ns(r.p50_ns),
                ns(r.p99_ns),
                pct(memory_fraction(r, records, false)),
                pct(memory_fraction(r, records, true)),
            ]
        })
        .collect();
    let mut out = text_table(&header, &rows, 2, Rule::Full);
    let mut labels: Vec<&str> = records
        .iter()
        .filter_map(|r| r.emulated.as_deref())
        .collect();
    labels.sort_unstable();
    labels.dedup();
    for l in labels {
        let _ = writeln!(out, "EMULATED = {l}");
    }
    out.push_str(&steal_note(records));
    out.push_str(&persist_table(records));
    out
}

/// A point whose host stole at least this share of the CPU time is named
/// under the table ([`steal_note`]).
pub const STEAL_NOTED: f64 = 0.05;

/// A line under the table naming the points during which the host stole
/// at least [`STEAL_NOTED`] of the machine's CPU time ([`Record::steal`]);
/// empty when none did. Their numbers, and ratios with them, say as much
/// about the host's other tenants as about the file system.
pub fn steal_note(records: &[Record]) -> String {
    let noted: Vec<String> = records
        .iter()
        .filter_map(|r| {
            let s = r.steal.filter(|&s| s >= STEAL_NOTED)?;
            Some(format!(
                "{} {} {}: {:.0}%",
                r.workload,
                shown_target(r),
                r.threads,
                s * 100.0
            ))
        })
        .collect();
    if noted.is_empty() {
        return String::new();
    }
    format!(
        "host steal (CPU time the hypervisor gave to others while the point ran): {}\n",
        noted.join(", ")
    )
}

/// What each `lib:` point made durable per operation ([`Record::persist`];
/// per `fsync` for DWSL), as a second table; empty when no record has it.
pub fn persist_table(records: &[Record]) -> String {
    let rows: Vec<Vec<String>> = records
        .iter()
        .filter_map(|r| {
            let p = r.persist.as_ref()?;
            Some(vec![
                r.workload.clone(),
                shown_target(r),
                r.threads.to_string(),
                p.pool_mode.clone(),
                format!("{:.0}", p.pool_bytes),
                format!("{:.1}", p.pool_cache_lines),
                p.pool_full_syncs.to_string(),
                format!("{:.0}", p.device_bytes),
                format!("{:.2}", p.device_flushes),
                format!("{:.2}", p.device_transfers),
                format!("{:.2}", p.device_uring_batches),
            ])
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let header = [
        "workload",
        "target",
        "threads",
        "pool",
        "pool B/op",
        "pool lines/op",
        "full syncs",
        "device B/op",
        "device flushes/op",
        "transfers/op",
        "ring batches/op",
    ];
    format!(
        "\nmade durable per operation (DWSL: per fsync; full syncs: total):\n{}",
        text_table(&header, &rows, 2, Rule::Full)
    )
}

/// A record's target as tables and plots show it: marked EMULATED when it
/// ran under an emulation ([`Record::emulated`]) and its label does not
/// say so already.
pub fn shown_target(r: &Record) -> String {
    if r.emulated.is_some() && !r.target.contains("EMULATED") {
        format!("{} EMULATED", r.target)
    } else {
        r.target.clone()
    }
}

/// Write records as a JSON array (one object per point).
pub fn write_json(path: &Path, records: &[Record]) -> Result<()> {
    let f = std::fs::File::create(path).map_err(|e| BenchError::io("create", path, e))?;
    let mut w = std::io::BufWriter::new(f);
    serde_json::to_writer_pretty(&mut w, records)?;
    use std::io::Write;
    w.write_all(b"\n")
        .and_then(|_| w.flush())
        .map_err(|e| BenchError::io("write", path, e))
}

/// Read records written by [`write_json`].
pub fn read_json(path: &Path) -> Result<Vec<Record>> {
    let f = std::fs::File::open(path).map_err(|e| BenchError::io("open", path, e))?;
    Ok(serde_json::from_reader(std::io::BufReader::new(f))?)
}

/// Ratios the goals are stated in, per workload and in-process target:
/// speed against the first directory target (tmpfs) at the same thread
/// count, two-thread over one-thread scaling, and the highest thread count
/// over two threads.
pub fn headline(records: &[Record]) -> String {
    let find = |w: &str, t: &str, n: usize| {
        records
            .iter()
            .find(|r| r.workload == w && r.target == t && r.threads == n)
            .map(|r| r.ops_per_sec)
    };
    let baseline = records
        .iter()
        .find(|r| !r.target.starts_with("lib:") && r.target != "memory")
        .map(|r| r.target.clone());
    let max_threads = records.iter().map(|r| r.threads).max().unwrap_or(1);
    let has = |n: usize| records.iter().any(|r| r.threads == n);
    if baseline.is_none() && !(has(1) && has(2)) {
        return String::new();
    }
    let mut workloads: Vec<&str> = Vec::new();
    let mut targets: Vec<&str> = Vec::new();
    for r in records {
        if r.target == "memory" {
            continue;
        }
        if !workloads.contains(&r.workload.as_str()) {
            workloads.push(&r.workload);
        }
        if !targets.contains(&r.target.as_str()) {
            targets.push(&r.target);
        }
    }
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
        _ => "-".into(),
    };
    // (header, which thread count, versus baseline or versus own count)
    let mut cols: Vec<(String, usize, Option<usize>)> = Vec::new();
    if let Some(b) = &baseline {
        for n in [1, 2] {
            if has(n) {
                cols.push((format!("{n}t vs {b}"), n, None));
            }
        }
    }
    if has(1) && has(2) {
        cols.push(("2t/1t".into(), 2, Some(1)));
    }
    if max_threads > 2 && has(2) {
        cols.push((format!("{max_threads}t/2t"), max_threads, Some(2)));
    }
    let mut header = vec!["workload".to_string(), "target".to_string()];
    header.extend(cols.iter().map(|c| c.0.clone()));
    let mut rows: Vec<Vec<String>> = Vec::new();
    for w in &workloads {
        for t in &targets {
            let mut row = vec![w.to_string(), t.to_string()];
            for (_, n, versus) in &cols {
                row.push(match versus {
                    None => ratio(
                        find(w, t, *n),
                        baseline.as_deref().and_then(|bt| find(w, bt, *n)),
                    ),
                    Some(m) => ratio(find(w, t, *n), find(w, t, *m)),
                });
            }
            rows.push(row);
        }
    }
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    text_table(&header, &rows, 2, Rule::None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(w: &str, t: &str, threads: usize, bps: f64) -> Record {
        Record {
            workload: w.into(),
            target: t.into(),
            threads,
            ops_per_sec: bps / 4096.0,
            bytes_per_sec: bps,
            p50_ns: 100,
            p99_ns: 2000,
            ops: 10,
            seconds: 1.0,
            runs: 1,
            ops_per_sec_min: bps / 4096.0,
            ops_per_sec_max: bps / 4096.0,
            emulated: None,
            moves: None,
            persist: None,
            write_latency: None,
            fsync_latency: None,
            steal: None,
        }
    }

    #[test]
    fn emulated_records_are_marked_in_the_table() {
        let mut capped = rec("DRBL", "lib:srl-tree", 1, 1e9);
        capped.emulated = Some("EMULATED NVMM bandwidth cap 1000000000 B/s per node".into());
        let mut labelled = capped.clone();
        labelled.target = "rl EMULATED".into();
        let plain = rec("DRBL", "lib:inode", 1, 1e9);
        let t = table(&[capped, labelled, plain]);
        assert!(t.contains("lib:srl-tree EMULATED"), "{t}");
        assert!(!t.contains("rl EMULATED EMULATED"), "{t}");
        assert!(!t.contains("lib:inode EMULATED"), "{t}");
        // The parameters once, below the table.
        let foot = "EMULATED = EMULATED NVMM bandwidth cap 1000000000 B/s per node";
        assert_eq!(t.matches(foot).count(), 1, "{t}");
    }

    #[test]
    fn points_the_host_stole_from_are_named_under_the_table() {
        let mut stolen = rec("DWOM", "lib:srl-tree", 1, 1e9);
        stolen.steal = Some(0.23);
        let mut little = rec("DWOM", "tmpfs", 1, 1e9);
        little.steal = Some(0.01);
        let unknown = rec("DRBM", "tmpfs", 2, 1e9);
        let t = table(&[stolen.clone(), little.clone(), unknown.clone()]);
        let note = t.lines().find(|l| l.starts_with("host steal (")).unwrap();
        assert!(note.ends_with("): DWOM lib:srl-tree 1: 23%"), "{t}");
        assert_eq!(steal_note(&[little, unknown]), "");
    }

    #[test]
    fn headline_ratios() {
        let rs = vec![
            rec("DWOM", "lib:srl-tree", 1, 4.0),
            rec("DWOM", "lib:srl-tree", 2, 8.0),
            rec("DWOM", "tmpfs", 1, 2.0),
            rec("DWOM", "tmpfs", 2, 2.0),
        ];
        let h = headline(&rs);
        assert!(h.contains("1t vs tmpfs") && h.contains("2t/1t"), "{h}");
        assert!(!h.contains("2t/2t"));
        let line = h.lines().find(|l| l.contains("lib:srl-tree")).unwrap();
        assert!(line.contains("2.00x") && line.contains("4.00x"), "{line}");
        assert_eq!(headline(&rs[1..2]), "");
    }

    #[test]
    fn median_of_runs() {
        let runs = vec![
            rec("DWOM", "tmpfs", 1, 3.0),
            rec("DWOM", "tmpfs", 1, 1.0),
            rec("DWOM", "tmpfs", 1, 2.0),
        ];
        let m = crate::runner::median_record(runs).unwrap();
        assert_eq!(m.bytes_per_sec, 2.0);
        assert_eq!(m.runs, 3);
        assert_eq!(m.ops_per_sec_min, 1.0 / 4096.0);
        assert_eq!(m.ops_per_sec_max, 3.0 / 4096.0);
        assert!(crate::runner::median_record(vec![]).is_none());
    }

    #[test]
    fn table_and_fraction() {
        let rs = vec![
            rec("MEM-W", "memory", 1, 10e9),
            rec("MEM-R", "memory", 1, 20e9),
            rec("DWOM", "lib:srl-tree", 1, 1e9),
            rec("DRBM", "tmpfs", 1, 2e9),
            rec("MWCL", "tmpfs", 1, 0.0),
        ];
        assert!((memory_fraction(&rs[2], &rs, false).unwrap() - 0.1).abs() < 1e-9);
        assert!((memory_fraction(&rs[3], &rs, false).unwrap() - 0.1).abs() < 1e-9);
        assert!(memory_fraction(&rs[3], &rs, true).is_none());
        assert!(memory_fraction(&rs[4], &rs, false).is_none());
        let t = table(&rs);
        assert_eq!(t.lines().count(), 2 + rs.len());
        assert!(t.contains("lib:srl-tree"));
        assert!(t.contains("10.0%"));
    }
}
