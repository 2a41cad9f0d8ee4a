//! `--output html` of `membench run` and `membench report`: one self-contained page per call,
//! with, for each benchmark, a bar chart of bytes per item per engine (the published figure
//! marked where the spec names a published table), the sorted set's growth curve, and the
//! comparison table. Nothing is fetched: the charts are inline SVG, the style is inline CSS,
//! and there are no scripts or fonts, so the page opens the same on a machine without a
//! network, in a browser or attached to a decision document.
//!
//! The charts carry class names and `data-` attributes (`rect.bar[data-engine]`,
//! `line.published-mark`, `polyline.growth-line`) so a test can read them back from the DOM.

use std::fmt::Write as _;

use crate::client::measure::MemorySample;
use crate::client::result::GrowthColumn;
use crate::client::workload::Workload;
use crate::crd::{EngineKind, MemoryBenchmark};
use crate::report::local_run::LocalComparison;
use crate::report::published::{PublishedRow, PublishedTable, thousands};
use crate::report::table::{
    ComparisonRow, Table, comparison_table, compute_changes, format_bytes, format_change,
};

/// The most points of one curve drawn: a line this dense is already smooth at page width.
const MAX_DRAWN_POINTS: usize = 500;

/// One benchmark's part of the page.
#[derive(Clone, Debug, PartialEq)]
pub struct Section {
    pub title: String,
    /// What was loaded and where it ran.
    pub subtitle: String,
    /// What a reader must keep in mind (published table, size differences, failures).
    pub notes: Vec<String>,
    /// What one item is (`member`, `key`, `record`).
    pub item: String,
    pub bars: Vec<Bar>,
    pub curves: Vec<Curve>,
    pub table: Table,
}

/// One engine's bar.
#[derive(Clone, Debug, PartialEq)]
pub struct Bar {
    /// The entry's name (`engines[].name`, or `<engine>-<version>`).
    pub engine: String,
    /// Engine, version and allocator, under the name.
    pub detail: String,
    /// Median bytes per item; `None` when the engine has no result.
    pub bytes_per_item: Option<f64>,
    /// The published figure of the engine's row, and which release it was published for.
    pub published: Option<PublishedMark>,
}

/// A published figure marked on a bar.
#[derive(Clone, Debug, PartialEq)]
pub struct PublishedMark {
    pub bytes_per_item: f64,
    /// The release the table measured (`8.1.9`), or empty when it names none.
    pub version: String,
}

/// One engine's growth curve: used_memory during the first repetition's load, starting from
/// the empty server's (at 0 items) when that is known.
#[derive(Clone, Debug, PartialEq)]
pub struct Curve {
    pub engine: String,
    pub points: Vec<MemorySample>,
}

impl Curve {
    fn new(engine: &str, baseline: Option<u64>, samples: Vec<MemorySample>) -> Self {
        let empty = baseline.map(|used_memory| MemorySample {
            items: 0,
            used_memory,
        });
        Self {
            engine: engine.to_string(),
            points: empty.into_iter().chain(samples).collect(),
        }
    }
}

fn published_mark(
    table: Option<&PublishedTable>,
    engine: &str,
    version: &str,
    workload: Option<&Workload>,
) -> Option<PublishedMark> {
    let kind: EngineKind = engine.parse().ok()?;
    let row: &PublishedRow = table?.row_for(kind, version, workload?)?;
    Some(PublishedMark {
        bytes_per_item: row.bytes_per_item,
        version: row.version.to_string(),
    })
}

/// The page's table: the comparison table with the published figure and the difference from
/// it, when the spec names a published table.
fn table_with_published(rows: &[ComparisonRow], bars: &[Bar], published: bool) -> Table {
    let mut table = comparison_table(rows);
    if !published {
        return table;
    }
    // The note stays last.
    let note_at = table.headers.len() - 1;
    table.headers.splice(
        note_at..note_at,
        ["Published".into(), "vs published".into()],
    );
    for (row, bar) in table.rows.iter_mut().zip(bars) {
        let (figure, change) = match &bar.published {
            Some(mark) => (
                if mark.version.is_empty() {
                    format!("{:.2}", mark.bytes_per_item)
                } else {
                    format!("{:.2} ({})", mark.bytes_per_item, mark.version)
                },
                bar.bytes_per_item.map_or("-".into(), |b| {
                    format_change((b / mark.bytes_per_item - 1.0) * 100.0)
                }),
            ),
            None => ("-".into(), "-".into()),
        };
        row.splice(note_at..note_at, [figure, change]);
    }
    table
}

fn published_notes(
    table: Option<&PublishedTable>,
    workload: Option<&Workload>,
    bars: &[Bar],
) -> Vec<String> {
    let Some(table) = table else {
        return Vec::new();
    };
    let mut notes = vec![format!(
        "Published table {}: {}. A row is marked on the engines of its release line.",
        table.name, table.source
    )];
    if let Some(note) = workload.and_then(|w| table.size_note(w)) {
        notes.push(format!("Note: {note}."));
    }
    let unmatched: Vec<&str> = bars
        .iter()
        .filter(|b| b.published.is_none())
        .map(|b| b.engine.as_str())
        .collect();
    if !unmatched.is_empty() {
        notes.push(format!(
            "No published figure for {}: the table has no row of that engine and release line.",
            unmatched.join(", ")
        ));
    }
    notes
}

/// The section of a local run (`membench run`).
pub fn section_from_local(benchmark: &MemoryBenchmark, comparison: &LocalComparison) -> Section {
    let workload = Workload::from_spec(&benchmark.spec.workload).ok();
    let table = benchmark.spec.published_table.map(|t| t.table());
    let mut rows: Vec<ComparisonRow> = comparison
        .engines
        .iter()
        .map(|r| ComparisonRow::from_report(r, None))
        .collect();
    compute_changes(&mut rows);
    let bars: Vec<Bar> = comparison
        .engines
        .iter()
        .zip(&rows)
        .map(|(report, row)| Bar {
            engine: row.name.clone(),
            detail: engine_detail(row),
            bytes_per_item: row.bytes_per_item,
            published: published_mark(
                table,
                &report.engine.name,
                &report.engine.version,
                workload.as_ref(),
            ),
        })
        .collect();
    let curves = comparison
        .engines
        .iter()
        .filter_map(|report| {
            let first = report.repetitions.first()?;
            (!first.samples.is_empty()).then(|| {
                Curve::new(
                    &report.name,
                    Some(first.baseline_used_memory),
                    drawn_points(&first.samples),
                )
            })
        })
        .collect();
    let first = comparison.engines.first();
    let subtitle = format!(
        "{}; {} repetitions, pipeline {}; ran locally on {} ({}, {} CPUs{})",
        first.map_or_else(
            || workload.as_ref().map(|w| w.describe()).unwrap_or_default(),
            |r| r.workload.description.clone()
        ),
        benchmark.spec.repetitions,
        benchmark.spec.pipeline,
        comparison.host.hostname,
        comparison.host.arch,
        comparison.host.cpus,
        comparison.instance_type_note()
    );
    Section {
        title: comparison.benchmark.clone(),
        subtitle,
        notes: published_notes(table, workload.as_ref(), &bars),
        item: workload
            .as_ref()
            .map_or("item", |w| w.item_noun())
            .to_string(),
        table: table_with_published(&rows, &bars, table.is_some()),
        bars,
        curves,
    }
}

/// The section of a benchmark measured in a cluster (`membench report`), from its status.
pub fn section_from_status(benchmark: &MemoryBenchmark) -> Section {
    let comparison = crate::report::cluster::comparison(benchmark);
    let workload = Workload::from_spec(&benchmark.spec.workload).ok();
    let table = benchmark.spec.published_table.map(|t| t.table());
    let status = benchmark.status.clone().unwrap_or_default();
    let bars: Vec<Bar> = comparison
        .rows
        .iter()
        .map(|row| Bar {
            engine: row.name.clone(),
            detail: engine_detail(row),
            bytes_per_item: row.bytes_per_item,
            published: published_mark(table, &row.engine, &row.version, workload.as_ref()),
        })
        .collect();
    let curves = status
        .engines
        .iter()
        .filter(|e| !e.growth.is_empty())
        .map(|e| {
            Curve::new(
                &e.name,
                e.repetitions.first().map(|r| r.baseline_used_memory),
                e.growth
                    .iter()
                    .map(|p| MemorySample {
                        items: p.items,
                        used_memory: p.used_memory,
                    })
                    .collect(),
            )
        })
        .collect();
    Section {
        title: format!("{}/{}", comparison.namespace, comparison.benchmark),
        subtitle: format!(
            "{}; {} repetitions on {}; {}",
            comparison.workload, comparison.repetitions, comparison.instance_type, comparison.phase
        ),
        notes: published_notes(table, workload.as_ref(), &bars),
        item: workload
            .as_ref()
            .map_or("item", |w| w.item_noun())
            .to_string(),
        table: table_with_published(&comparison.rows, &bars, table.is_some()),
        bars,
        curves,
    }
}

fn engine_detail(row: &ComparisonRow) -> String {
    let mut detail = format!("{} {}", row.engine, row.version);
    if !row.allocator.is_empty() {
        let _ = write!(detail, ", {}", row.allocator);
    }
    detail
}

/// A curve's samples, thinned for drawing when there are very many.
fn drawn_points(samples: &[MemorySample]) -> Vec<MemorySample> {
    if samples.len() <= MAX_DRAWN_POINTS {
        return samples.to_vec();
    }
    GrowthColumn::of(samples, MAX_DRAWN_POINTS)
        .map(|c| c.points())
        .unwrap_or_default()
}

/// Text made safe for HTML content and attribute values.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Distinct colours for up to twelve engines (then they repeat), readable on white.
const PALETTE: [&str; 12] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2",
    "#7f7f7f", "#bcbd22", "#393b79", "#637939",
];

fn colour(index: usize) -> &'static str {
    PALETTE[index % PALETTE.len()]
}

const STYLE: &str = "
body { font-family: sans-serif; margin: 2em auto; max-width: 68em; padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.25em; margin-top: 2.5em; border-bottom: 1px solid #ccc; }
p.subtitle { color: #555; } ul.notes { color: #444; font-size: 0.9em; }
figure { margin: 1.5em 0; } figcaption { font-weight: bold; margin-bottom: 0.5em; }
svg text { font-family: sans-serif; font-size: 12px; fill: #222; }
svg .axis { stroke: #888; stroke-width: 1; } svg .grid { stroke: #e4e4e4; stroke-width: 1; }
svg .published-mark { stroke: #000; stroke-width: 3; }
svg .growth-line { fill: none; stroke-width: 2; }
table.comparison { border-collapse: collapse; font-size: 0.85em; }
table.comparison th, table.comparison td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: left; }
table.comparison td.number { text-align: right; font-variant-numeric: tabular-nums; }
table.comparison th { background: #f3f3f3; }
.legend span { display: inline-block; margin-right: 1.5em; font-size: 0.9em; }
.legend i { display: inline-block; width: 1em; height: 0.6em; margin-right: 0.4em; }
";

/// The whole page.
pub fn render_page(title: &str, sections: &[Section]) -> String {
    let mut page = String::new();
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>\n<p class=\"subtitle\">Memory per item as each engine accounts it (used_memory after the load minus the empty server's, over the verified count), by membench {}.</p>\n",
        escape(title),
        escape(title),
        env!("CARGO_PKG_VERSION")
    );
    for section in sections {
        render_section(&mut page, section);
    }
    page.push_str("</body>\n</html>\n");
    page
}

fn render_section(page: &mut String, section: &Section) {
    let _ = write!(
        page,
        "<section class=\"benchmark\" data-benchmark=\"{}\">\n<h2>{}</h2>\n<p class=\"subtitle\">{}</p>\n",
        escape(&section.title),
        escape(&section.title),
        escape(&section.subtitle)
    );
    if !section.notes.is_empty() {
        page.push_str("<ul class=\"notes\">\n");
        for note in &section.notes {
            let _ = writeln!(page, "<li>{}</li>", escape(note));
        }
        page.push_str("</ul>\n");
    }
    render_bars(page, section);
    render_curves(page, section);
    render_table(page, &section.table);
    page.push_str("</section>\n");
}

/// A round step for axis ticks: 1, 2, 2.5 or 5 times a power of ten, giving about `ticks`
/// ticks.
fn tick_step(max: f64, ticks: f64) -> f64 {
    if max <= 0.0 {
        return 1.0;
    }
    let raw = max / ticks;
    let power = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * power)
}

fn render_bars(page: &mut String, section: &Section) {
    const LABEL_WIDTH: f64 = 260.0;
    const CHART_WIDTH: f64 = 520.0;
    const ROW_HEIGHT: f64 = 34.0;
    const TOP: f64 = 24.0;
    let max = section
        .bars
        .iter()
        .flat_map(|b| {
            [
                b.bytes_per_item,
                b.published.as_ref().map(|p| p.bytes_per_item),
            ]
        })
        .flatten()
        .fold(0.0f64, f64::max);
    let step = tick_step(max, 5.0);
    let axis_max = (max / step).ceil().max(1.0) * step;
    let x = |value: f64| LABEL_WIDTH + value / axis_max * CHART_WIDTH;
    let height = TOP + ROW_HEIGHT * section.bars.len() as f64 + 30.0;
    let width = LABEL_WIDTH + CHART_WIDTH + 190.0;
    let _ = write!(
        page,
        "<figure class=\"bytes-per-item\">\n<figcaption>Bytes per {item} (median over the repetitions)</figcaption>\n<svg class=\"bar-chart\" role=\"img\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" data-bars=\"{}\">\n",
        section.bars.len(),
        item = escape(&section.item),
    );
    let bottom = TOP + ROW_HEIGHT * section.bars.len() as f64;
    let mut tick = 0.0;
    while tick <= axis_max + step / 2.0 {
        let _ = writeln!(
            page,
            "<line class=\"grid\" x1=\"{x:.1}\" y1=\"{TOP}\" x2=\"{x:.1}\" y2=\"{bottom}\"/><text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            bottom + 16.0,
            format_tick(tick),
            x = x(tick),
        );
        tick += step;
    }
    for (i, bar) in section.bars.iter().enumerate() {
        let y = TOP + ROW_HEIGHT * i as f64;
        let _ = writeln!(
            page,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\"><tspan font-weight=\"bold\">{}</tspan><tspan x=\"{:.1}\" dy=\"13\" fill=\"#555\">{}</tspan></text>",
            LABEL_WIDTH - 8.0,
            y + 13.0,
            escape(&bar.engine),
            LABEL_WIDTH - 8.0,
            escape(&shorten(&bar.detail, 40)),
        );
        let (bar_width, mut value_text, class) = match bar.bytes_per_item {
            Some(b) => (x(b) - LABEL_WIDTH, format!("{b:.2}"), "bar"),
            None => (0.0, "no result".to_string(), "bar bar-missing"),
        };
        if let Some(mark) = &bar.published {
            let _ = write!(value_text, " (published {:.2})", mark.bytes_per_item);
        }
        let _ = write!(
            page,
            "<rect class=\"{class}\" data-engine=\"{}\" data-value=\"{}\" x=\"{LABEL_WIDTH}\" y=\"{:.1}\" width=\"{bar_width:.1}\" height=\"{:.1}\" fill=\"{}\"><title>{}: {}</title></rect>\n<text x=\"{:.1}\" y=\"{:.1}\">{}</text>\n",
            escape(&bar.engine),
            bar.bytes_per_item.map_or(String::new(), |b| format!("{b}")),
            y + 4.0,
            ROW_HEIGHT - 10.0,
            colour(i),
            escape(&bar.engine),
            value_text,
            LABEL_WIDTH
                + bar_width.max(
                    bar.published
                        .as_ref()
                        .map_or(0.0, |m| x(m.bytes_per_item) - LABEL_WIDTH)
                )
                + 6.0,
            y + 21.0,
            value_text,
        );
        if let Some(mark) = &bar.published {
            let at = x(mark.bytes_per_item);
            let release = if mark.version.is_empty() {
                String::new()
            } else {
                format!(" ({})", mark.version)
            };
            let _ = writeln!(
                page,
                "<line class=\"published-mark\" data-engine=\"{}\" data-value=\"{}\" x1=\"{at:.1}\" y1=\"{:.1}\" x2=\"{at:.1}\" y2=\"{:.1}\"><title>published{}: {:.2}</title></line>",
                escape(&bar.engine),
                mark.bytes_per_item,
                y + 1.0,
                y + ROW_HEIGHT - 3.0,
                escape(&release),
                mark.bytes_per_item,
            );
        }
    }
    page.push_str("</svg>\n");
    if section.bars.iter().any(|b| b.published.is_some()) {
        page.push_str("<div class=\"legend\"><span><i style=\"background:#000;width:3px\"></i>published figure of the engine's release line</span></div>\n");
    }
    page.push_str("</figure>\n");
}

fn format_tick(value: f64) -> String {
    if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value}")
    }
}

fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let kept: String = text.chars().take(max - 1).collect();
    format!("{kept}…")
}

fn render_curves(page: &mut String, section: &Section) {
    if section.curves.is_empty() {
        let _ = writeln!(
            page,
            "<p class=\"no-growth-curve\">No growth curve: only the sorted-set workload reads used_memory during the load (every <code>sampleEvery</code> members).</p>"
        );
        return;
    }
    const LEFT: f64 = 80.0;
    const TOP: f64 = 16.0;
    const PLOT_WIDTH: f64 = 640.0;
    const PLOT_HEIGHT: f64 = 300.0;
    let max_items = section
        .curves
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.items))
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let max_used = section
        .curves
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.used_memory))
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let x_step = tick_step(max_items, 5.0);
    let y_step = tick_step(max_used, 5.0);
    let x_max = (max_items / x_step).ceil() * x_step;
    let y_max = (max_used / y_step).ceil() * y_step;
    let x = |items: f64| LEFT + items / x_max * PLOT_WIDTH;
    let y = |used: f64| TOP + PLOT_HEIGHT - used / y_max * PLOT_HEIGHT;
    let width = LEFT + PLOT_WIDTH + 30.0;
    let height = TOP + PLOT_HEIGHT + 44.0;
    let _ = write!(
        page,
        "<figure class=\"growth\">\n<figcaption>used_memory during the load (first repetition)</figcaption>\n<svg class=\"growth-chart\" role=\"img\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" data-curves=\"{}\">\n",
        section.curves.len()
    );
    let mut tick = 0.0;
    while tick <= y_max + y_step / 2.0 {
        let _ = writeln!(
            page,
            "<line class=\"grid\" x1=\"{LEFT}\" y1=\"{at:.1}\" x2=\"{:.1}\" y2=\"{at:.1}\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            LEFT + PLOT_WIDTH,
            LEFT - 6.0,
            y(tick) + 4.0,
            escape(&format_bytes(tick)),
            at = y(tick),
        );
        tick += y_step;
    }
    let mut tick = 0.0;
    while tick <= x_max + x_step / 2.0 {
        let _ = writeln!(
            page,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            x(tick),
            TOP + PLOT_HEIGHT + 16.0,
            thousands(tick as u64),
        );
        tick += x_step;
    }
    let _ = write!(
        page,
        "<line class=\"axis\" x1=\"{LEFT}\" y1=\"{bottom}\" x2=\"{:.1}\" y2=\"{bottom}\"/><line class=\"axis\" x1=\"{LEFT}\" y1=\"{TOP}\" x2=\"{LEFT}\" y2=\"{bottom}\"/>\n<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}s loaded</text>\n",
        LEFT + PLOT_WIDTH,
        LEFT + PLOT_WIDTH / 2.0,
        TOP + PLOT_HEIGHT + 36.0,
        escape(&section.item),
        bottom = TOP + PLOT_HEIGHT,
    );
    for curve in &section.curves {
        let index = section
            .bars
            .iter()
            .position(|b| b.engine == curve.engine)
            .unwrap_or(0);
        let points: Vec<String> = curve
            .points
            .iter()
            .map(|p| format!("{:.1},{:.1}", x(p.items as f64), y(p.used_memory as f64)))
            .collect();
        let _ = writeln!(
            page,
            "<polyline class=\"growth-line\" data-engine=\"{}\" data-points=\"{}\" stroke=\"{}\" points=\"{}\"><title>{}</title></polyline>",
            escape(&curve.engine),
            curve.points.len(),
            colour(index),
            points.join(" "),
            escape(&curve.engine),
        );
    }
    page.push_str("</svg>\n<div class=\"legend\">");
    for curve in &section.curves {
        let index = section
            .bars
            .iter()
            .position(|b| b.engine == curve.engine)
            .unwrap_or(0);
        let _ = write!(
            page,
            "<span><i style=\"background:{}\"></i>{}</span>",
            colour(index),
            escape(&curve.engine)
        );
    }
    page.push_str("</div>\n</figure>\n");
}

fn render_table(page: &mut String, table: &Table) {
    page.push_str("<table class=\"comparison\">\n<thead><tr>");
    for header in &table.headers {
        let _ = write!(page, "<th>{}</th>", escape(header));
    }
    page.push_str("</tr></thead>\n<tbody>\n");
    for row in &table.rows {
        page.push_str("<tr>");
        for cell in row {
            let numeric = cell.starts_with(|c: char| c.is_ascii_digit() || "~+-".contains(c));
            if numeric {
                let _ = write!(page, "<td class=\"number\">{}</td>", escape(cell));
            } else {
                let _ = write!(page, "<td>{}</td>", escape(cell));
            }
        }
        page.push_str("</tr>\n");
    }
    page.push_str("</tbody>\n</table>\n");
}

#[cfg(test)]
#[path = "html_tests.rs"]
mod tests;
