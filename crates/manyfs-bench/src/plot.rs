//! Throughput-vs-threads plots (SVG or PNG) with plotters.
//!
//! Text is laid out with ab_glyph from a TrueType font found on the system
//! (DejaVu Sans, from Debian's `fonts-dejavu-core`; `MANYFS_BENCH_FONT`
//! overrides), so no fontconfig is needed and it works headless.

use crate::report::si;
use crate::runner::Record;
use crate::{BenchError, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Places a sans-serif TrueType font is looked for.
pub const FONT_CANDIDATES: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation-sans/LiberationSans-Regular.ttf",
];

const FONT: &str = "sans-serif";

fn register_font() -> std::result::Result<(), String> {
    static DONE: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        let mut paths: Vec<PathBuf> = Vec::new();
        if let Some(p) = std::env::var_os("MANYFS_BENCH_FONT") {
            paths.push(p.into());
        }
        paths.extend(FONT_CANDIDATES.iter().map(PathBuf::from));
        for p in &paths {
            if let Ok(bytes) = std::fs::read(p) {
                // The font table wants 'static bytes; one font per process.
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font(FONT, FontStyle::Normal, bytes).is_ok() {
                    return Ok(());
                }
            }
        }
        Err(format!(
            "no TrueType font found (tried MANYFS_BENCH_FONT and {}); install fonts-dejavu-core \
             (scripts/install-deps.sh)",
            FONT_CANDIDATES.join(", ")
        ))
    })
    .clone()
}

/// Distinct values in first-seen order.
fn uniq<'a>(it: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for s in it {
        if !v.iter().any(|x| x == s) {
            v.push(s.to_string());
        }
    }
    v
}

/// Write a plot of `records` to `path` (`.svg` or `.png`): one panel per
/// workload, throughput (ops/s) against threads on a log axis, one line per
/// target.
pub fn write_plot(path: &Path, records: &[Record]) -> Result<()> {
    let err = |msg: String| BenchError::Plot {
        path: path.to_path_buf(),
        msg,
    };
    if records.is_empty() {
        return Err(err("no records to plot".into()));
    }
    register_font().map_err(err)?;
    let workloads = uniq(records.iter().map(|r| r.workload.as_str()));
    let cols = workloads.len().min(3);
    let rows = workloads.len().div_ceil(cols);
    let size = (cols as u32 * 520, rows as u32 * 380 + 40);
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    match ext.as_str() {
        "svg" => draw(
            SVGBackend::new(path, size).into_drawing_area(),
            records,
            &workloads,
            (rows, cols),
        ),
        "png" => draw(
            BitMapBackend::new(path, size).into_drawing_area(),
            records,
            &workloads,
            (rows, cols),
        ),
        _ => Err(format!("unknown plot format {ext:?} (use .svg or .png)")),
    }
    .map_err(err)
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    records: &[Record],
    workloads: &[String],
    grid: (usize, usize),
) -> std::result::Result<(), String> {
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    root.fill(&WHITE).map_err(e)?;
    let root = root
        .titled(
            "manyfs bench: throughput vs threads (4 KiB ops; HACCIO 1 MiB records)",
            (FONT, 22),
        )
        .map_err(e)?;
    let targets = uniq(records.iter().map(|r| r.target.as_str()));
    let panels = root.split_evenly(grid);
    for (panel, w) in panels.iter().zip(workloads) {
        let rs: Vec<&Record> = records.iter().filter(|r| &r.workload == w).collect();
        let tmin = rs.iter().map(|r| r.threads).min().unwrap_or(1).max(1) as f64;
        let tmax = rs.iter().map(|r| r.threads).max().unwrap_or(1).max(1) as f64;
        let ymax = rs.iter().map(|r| r.ops_per_sec).fold(0.0f64, f64::max);
        let ymax = if ymax > 0.0 { ymax * 1.15 } else { 1.0 };
        let mut chart = ChartBuilder::on(panel)
            .caption(w, (FONT, 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d((tmin * 0.8..tmax * 1.25).log_scale(), 0f64..ymax)
            .map_err(e)?;
        chart
            .configure_mesh()
            .x_desc("threads (count, log scale)")
            .y_desc("throughput (ops/s)")
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_label_formatter(&|v| si(*v))
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 13))
            .draw()
            .map_err(e)?;
        for (i, t) in targets.iter().enumerate() {
            let mut pts: Vec<(f64, f64)> = rs
                .iter()
                .filter(|r| &r.target == t)
                .map(|r| (r.threads.max(1) as f64, r.ops_per_sec))
                .collect();
            if pts.is_empty() {
                continue;
            }
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                .map_err(e)?
                .label(t.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
            chart
                .draw_series(pts.iter().map(|p| Circle::new(*p, 3, color.filled())))
                .map_err(e)?;
        }
        chart
            .configure_series_labels()
            .label_font((FONT, 12))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(e)?;
    }
    root.present().map_err(e)?;
    Ok(())
}
