//! Throughput-vs-threads plots, latency CDFs and checkpoint traces (SVG
//! or PNG) with plotters.
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

/// Call `$draw(area, args...)` on an SVG or PNG drawing area of `$size`
/// at `$path`, chosen by its extension.
macro_rules! render {
    ($path:expr, $size:expr, $draw:ident, $($arg:expr),*) => {{
        let ext = $path
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or("")
            .to_ascii_lowercase();
        match ext.as_str() {
            "svg" => $draw(SVGBackend::new($path, $size).into_drawing_area(), $($arg),*),
            "png" => $draw(BitMapBackend::new($path, $size).into_drawing_area(), $($arg),*),
            _ => Err(format!("unknown plot format {ext:?} (use .svg or .png)")),
        }
    }};
}

/// A white figure with `title` on top; returns the area under it.
fn titled<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    title: &str,
) -> std::result::Result<DrawingArea<DB, Shift>, DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    root.titled(title, (FONT, 22))
}

/// The legend box every panel has, in its corner `at`.
fn draw_legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    at: SeriesLabelPosition,
) -> std::result::Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    chart
        .configure_series_labels()
        .label_font((FONT, 12))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(at)
        .draw()
}

/// Draw `pts` as a line of `color`, named `name` in the legend.
fn labelled_line<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    pts: Vec<CT::From>,
    name: &str,
    color: RGBAColor,
) -> std::result::Result<(), DrawingAreaErrorKind<DB::ErrorType>>
where
    CT::From: Clone + 'static,
{
    chart
        .draw_series(LineSeries::new(pts, color.stroke_width(2)))?
        .label(name)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
    Ok(())
}

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

/// Panel name of the memory-reference rows (drawn as one panel whose lines
/// are the four copy kinds).
pub const MEMORY_PANEL: &str = "memory reference (4 KiB copies)";

/// One panel: a title and its lines (name, points sorted by threads).
struct Panel {
    title: String,
    lines: Vec<(String, Vec<(usize, f64)>)>,
}

fn panels(records: &[Record]) -> Vec<Panel> {
    let mut out: Vec<Panel> = Vec::new();
    for r in records {
        let (title, line) = if r.target == "memory" {
            (MEMORY_PANEL.to_string(), r.workload.clone())
        } else {
            (r.workload.clone(), crate::report::shown_target(r))
        };
        let p = match out.iter_mut().position(|p| p.title == title) {
            Some(i) => &mut out[i],
            None => {
                out.push(Panel {
                    title,
                    lines: Vec::new(),
                });
                out.last_mut().expect("just pushed")
            }
        };
        match p.lines.iter_mut().find(|(n, _)| *n == line) {
            Some((_, pts)) => pts.push((r.threads.max(1), r.ops_per_sec)),
            None => p
                .lines
                .push((line, vec![(r.threads.max(1), r.ops_per_sec)])),
        }
    }
    // Data panels first, the memory reference last.
    out.sort_by_key(|p| p.title == MEMORY_PANEL);
    for p in &mut out {
        for (_, pts) in &mut p.lines {
            pts.sort_by_key(|x| x.0);
        }
    }
    out
}

/// Write a plot of `records` to `path` (`.svg` or `.png`): one panel per
/// workload, throughput (ops/s) against threads on a log2 axis, one line per
/// target, and one panel for the memory reference rows.
pub fn write_plot(path: &Path, records: &[Record]) -> Result<()> {
    let err = |msg: String| BenchError::Plot {
        path: path.to_path_buf(),
        msg,
    };
    if records.is_empty() {
        return Err(err("no records to plot".into()));
    }
    register_font().map_err(err)?;
    let panels = panels(records);
    let cols = panels.len().min(3);
    let rows = panels.len().div_ceil(cols);
    let size = (cols as u32 * 520, rows as u32 * 380 + 40);
    render!(path, size, draw, &panels, (rows, cols)).map_err(err)
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    panels: &[Panel],
    grid: (usize, usize),
) -> std::result::Result<(), String> {
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    let root = titled(
        root,
        "manyfs bench: throughput vs threads (4 KiB ops; HACCIO 1 MiB records)",
    )
    .map_err(e)?;
    let areas = root.split_evenly(grid);
    for (area, panel) in areas.iter().zip(panels) {
        let all = panel.lines.iter().flat_map(|(_, p)| p.iter());
        let tmin = all.clone().map(|p| p.0).min().unwrap_or(1) as f64;
        let tmax = all.clone().map(|p| p.0).max().unwrap_or(1) as f64;
        let ymax = all.map(|p| p.1).fold(0.0f64, f64::max);
        // Head room for the legend.
        let ymax = if ymax > 0.0 { ymax * 1.45 } else { 1.0 };
        let (x0, x1) = (tmin.log2() - 0.3, tmax.log2() + 0.3);
        let mut chart = ChartBuilder::on(area)
            .caption(&panel.title, (FONT, 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(x0..x1, 0f64..ymax)
            .map_err(e)?;
        chart
            .configure_mesh()
            .x_desc("threads (log2 scale)")
            .y_desc("throughput (ops/s)")
            .x_labels(((x1 - x0).ceil() as usize + 1).max(2))
            .x_label_formatter(&|v| {
                if (v - v.round()).abs() < 1e-6 {
                    format!("{:.0}", 2f64.powf(v.round()))
                } else {
                    String::new()
                }
            })
            .y_label_formatter(&|v| si(*v))
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 13))
            .draw()
            .map_err(e)?;
        for (i, (name, pts)) in panel.lines.iter().enumerate() {
            let pts: Vec<(f64, f64)> = pts.iter().map(|&(t, y)| ((t as f64).log2(), y)).collect();
            let color = Palette99::pick(i).to_rgba();
            labelled_line(&mut chart, pts.clone(), name, color).map_err(e)?;
            chart
                .draw_series(pts.iter().map(|p| Circle::new(*p, 3, color.filled())))
                .map_err(e)?;
        }
        draw_legend(&mut chart, SeriesLabelPosition::UpperRight).map_err(e)?;
    }
    root.present().map_err(e)?;
    Ok(())
}

/// The write-latency trace of `--reproduce tier-checkpoint`: one panel per
/// run (rows: thread counts; columns: none, background, blocking, device), the
/// slowest write per [`crate::reproduce::checkpoint::BUCKET`] against
/// time (log scale), checkpoints shaded, the `none` run's p99 as a dashed
/// line.
pub fn write_checkpoint_plot(
    path: &Path,
    runs: &[crate::reproduce::checkpoint::CheckpointRun],
) -> Result<()> {
    let err = |msg: String| BenchError::Plot {
        path: path.to_path_buf(),
        msg,
    };
    if runs.is_empty() {
        return Err(err("no runs to plot".into()));
    }
    register_font().map_err(err)?;
    // The three modes and the raw-device run.
    let cols = crate::reproduce::checkpoint::MODES.len() + 1;
    let rows = runs.len().div_ceil(cols);
    let size = (cols as u32 * 520, rows as u32 * 340 + 40);
    render!(path, size, draw_checkpoint, runs, (rows, cols)).map_err(err)
}

fn draw_checkpoint<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    runs: &[crate::reproduce::checkpoint::CheckpointRun],
    grid: (usize, usize),
) -> std::result::Result<(), String> {
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    let root = titled(
        root,
        "manyfs tier: slowest 4 KiB append per 10 ms through checkpoints",
    )
    .map_err(e)?;
    let us = |ns: u64| (ns.max(1) as f64) / 1e3;
    let ymax = runs
        .iter()
        .map(|r| us(r.max_ns))
        .fold(1.0f64, f64::max)
        .max(10.0)
        * 2.0;
    let ymin = runs
        .iter()
        .flat_map(|r| r.trace.iter().filter(|b| b.2 > 0).map(|b| us(b.1)))
        .fold(f64::INFINITY, f64::min)
        .clamp(0.1, 1e6)
        / 2.0;
    for (area, run) in root.split_evenly(grid).iter().zip(runs) {
        let reference = runs
            .iter()
            .find(|n| n.mode == "none" && n.threads == run.threads)
            .map(|n| us(n.p99_ns));
        let xmax = run.seconds.max(1e-3);
        let mut chart = ChartBuilder::on(area)
            .caption(format!("{} x{}", run.mode, run.threads), (FONT, 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..xmax, (ymin..ymax).log_scale())
            .map_err(e)?;
        chart
            .configure_mesh()
            .x_desc("time (s)")
            .y_desc("slowest write (us)")
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 13))
            .draw()
            .map_err(e)?;
        // A checkpoint is often far shorter than a pixel: its start is a
        // line, its length a band behind it.
        let shade = RGBColor(255, 160, 40);
        chart
            .draw_series(run.checkpoints.iter().map(|&(s, t)| {
                Rectangle::new([(s, ymin), (t.max(s), ymax)], shade.mix(0.35).filled())
            }))
            .map_err(e)?;
        chart
            .draw_series(
                run.checkpoints
                    .iter()
                    .map(|&(s, _)| PathElement::new(vec![(s, ymin), (s, ymax)], shade.mix(0.6))),
            )
            .map_err(e)?
            .label("checkpoint start")
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], shade.stroke_width(2))
            });
        let pts: Vec<(f64, f64)> = run
            .trace
            .iter()
            .filter(|b| b.2 > 0)
            .map(|b| (b.0, us(b.1)))
            .collect();
        let color = BLUE.to_rgba();
        chart
            .draw_series(LineSeries::new(pts, color.stroke_width(1)))
            .map_err(e)?
            .label("slowest write per 10 ms")
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        if let Some(p) = reference {
            let red = RED.stroke_width(2);
            chart
                .draw_series(DashedLineSeries::new(vec![(0.0, p), (xmax, p)], 6, 4, red))
                .map_err(e)?
                .label("p99 without checkpoints")
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], red));
        }
        draw_legend(&mut chart, SeriesLabelPosition::UpperRight).map_err(e)?;
    }
    root.present().map_err(e)?;
    Ok(())
}

/// Where [`write_cdf_plot`] goes beside the figure `plot`: `NAME.svg`
/// becomes `NAME.cdf.svg` (`.png` likewise).
pub fn cdf_path(plot: &Path) -> PathBuf {
    let ext = plot.extension().and_then(|e| e.to_str()).unwrap_or("svg");
    plot.with_extension(format!("cdf.{ext}"))
}

/// One CDF panel: (workload, `write` or `fsync`), a thread count, and its
/// lines (target, CDF points in ns).
struct CdfPanel<'a> {
    row: (String, &'static str),
    threads: usize,
    lines: Vec<(String, &'a [(u64, f64)])>,
}

fn cdf_panels(records: &[Record]) -> Vec<CdfPanel<'_>> {
    let mut out: Vec<CdfPanel<'_>> = Vec::new();
    for r in records {
        let kinds = [("write", &r.write_latency), ("fsync", &r.fsync_latency)];
        for (kind, p) in kinds {
            let Some(p) = p.as_ref().filter(|p| !p.cdf.is_empty()) else {
                continue;
            };
            let row = (r.workload.clone(), kind);
            let line = (crate::report::shown_target(r), p.cdf.as_slice());
            match out
                .iter_mut()
                .find(|x| x.row == row && x.threads == r.threads)
            {
                Some(panel) => panel.lines.push(line),
                None => out.push(CdfPanel {
                    row,
                    threads: r.threads,
                    lines: vec![line],
                }),
            }
        }
    }
    out
}

/// Write the latency CDFs of `records` to `path` (`.svg` or `.png`): one
/// panel per (workload, `write` or `fsync`) row and thread count column,
/// the fraction of operations at or below each latency (log scale), one
/// line per target (the same colour in every panel). Records without a
/// CDF are left out; none at all is an error.
pub fn write_cdf_plot(path: &Path, records: &[Record]) -> Result<()> {
    let err = |msg: String| BenchError::Plot {
        path: path.to_path_buf(),
        msg,
    };
    let panels = cdf_panels(records);
    if panels.is_empty() {
        return Err(err("no latency CDFs to plot".into()));
    }
    register_font().map_err(err)?;
    let mut rows: Vec<&(String, &str)> = Vec::new();
    let mut threads: Vec<usize> = Vec::new();
    for p in &panels {
        if !rows.contains(&&p.row) {
            rows.push(&p.row);
        }
        threads.push(p.threads);
    }
    threads.sort_unstable();
    threads.dedup();
    let size = (threads.len() as u32 * 620, rows.len() as u32 * 400 + 40);
    render!(path, size, draw_cdfs, &panels, &rows, &threads).map_err(err)
}

fn draw_cdfs<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    panels: &[CdfPanel<'_>],
    rows: &[&(String, &str)],
    threads: &[usize],
) -> std::result::Result<(), String> {
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    let root = titled(
        root,
        "manyfs bench: latency CDFs (fraction of operations at or below a latency)",
    )
    .map_err(e)?;
    // One colour per target, in the order targets first appear.
    let mut targets: Vec<&str> = Vec::new();
    for p in panels {
        for (t, _) in &p.lines {
            if !targets.contains(&t.as_str()) {
                targets.push(t);
            }
        }
    }
    let areas = root.split_evenly((rows.len(), threads.len()));
    for (r, row) in rows.iter().enumerate() {
        let in_row = panels.iter().filter(|p| &p.row == *row);
        // One latency range per row, so the thread counts compare.
        let pts = in_row
            .clone()
            .flat_map(|p| p.lines.iter().flat_map(|l| l.1));
        let lo = pts.clone().map(|p| p.0).min().unwrap_or(1).max(1) as f64;
        let hi = pts.map(|p| p.0).max().unwrap_or(1) as f64;
        // Room on the right, where every CDF is at 1, for the legend.
        let (x0, x1) = (lo / 1.5, hi.max(lo * 10.0) * 30.0);
        for p in in_row {
            let c = threads.iter().position(|&t| t == p.threads).unwrap_or(0);
            let area = &areas[r * threads.len() + c];
            let mut chart = ChartBuilder::on(area)
                .caption(format!("{} {} x{}", row.0, row.1, p.threads), (FONT, 18))
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(60)
                .build_cartesian_2d((x0..x1).log_scale(), 0f64..1.02)
                .map_err(e)?;
            chart
                .configure_mesh()
                .x_desc(format!("{} latency (log scale)", row.1))
                .y_desc("fraction at or below")
                .x_label_formatter(&|v| crate::report::ns(*v as u64))
                .label_style((FONT, 12))
                .axis_desc_style((FONT, 13))
                .draw()
                .map_err(e)?;
            for (name, cdf) in &p.lines {
                let i = targets.iter().position(|t| t == name).unwrap_or(0);
                let color = Palette99::pick(i).to_rgba();
                let pts = cdf.iter().map(|&(ns, f)| (ns.max(1) as f64, f));
                labelled_line(&mut chart, pts.collect(), name, color).map_err(e)?;
            }
            // Past the slowest operation, under the lines at 1.
            draw_legend(&mut chart, SeriesLabelPosition::LowerRight).map_err(e)?;
        }
    }
    root.present().map_err(e)?;
    Ok(())
}
