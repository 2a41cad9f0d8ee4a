//! `--output csv`: every figure as one table of raw numbers in base units (bytes, items per
//! second, seconds), one row per benchmark, engine and repetition, and one summary row per
//! benchmark and engine, under the header [`HEADER`] (documented in README.md, "CSV"). A
//! spreadsheet or `pandas.read_csv` loads it as it is: no units in the cells, no thousands
//! separators, no title lines, no blank lines, and an empty cell where a figure is unknown.
//!
//! The same rows come from a local run's reports ([`rows_of_report`]) and from a benchmark's
//! status in the cluster ([`rows_of_status`]); the table renders the people's version.

use crate::client::measurement::measure::BenchmarkReport;
use crate::crd::EngineStatus;
use crate::report::table::{ComparisonRow, Table};

/// The columns, in order. `row` is `repetition` or `summary`; on a summary row the figures are
/// the medians over the repetitions, with their `_min` and `_max`, and `repetitions` counts the
/// verified ones; `change_vs_first_percent`, the `published_` columns, `unstable` (`true` when
/// the repetitions disagree more than the thresholds allow) and `note` are on summary rows only.
pub const HEADER: [&str; 35] = [
    "benchmark",
    "namespace",
    "entry",
    "engine",
    "version",
    "allocator",
    "modules",
    "arch",
    "instance_type",
    "workload",
    "item",
    "row",
    "repetition",
    "repetitions",
    "items",
    "commands",
    "baseline_used_memory_bytes",
    "used_memory_bytes",
    "used_memory_rss_bytes",
    "bytes_per_item",
    "bytes_per_item_min",
    "bytes_per_item_max",
    "items_per_sec",
    "items_per_sec_min",
    "items_per_sec_max",
    "commands_per_sec",
    "commands_per_sec_min",
    "commands_per_sec_max",
    "seconds",
    "change_vs_first_percent",
    "published_bytes_per_item",
    "published_version",
    "vs_published_percent",
    "unstable",
    "note",
];

/// Where a benchmark's rows came from: its name, and for one measured in a cluster, its
/// namespace and instance type.
#[derive(Clone, Debug, Default)]
pub struct BenchmarkLabels {
    pub benchmark: String,
    pub namespace: String,
    pub instance_type: String,
}

/// A figure with its median, min and max.
type Spread3 = Option<(f64, f64, f64)>;

/// One line of the CSV, before formatting.
#[derive(Clone, Debug, Default)]
struct Line {
    repetition: Option<u32>,
    repetitions: Option<u32>,
    items: Option<u64>,
    commands: Option<u64>,
    baseline_used_memory: Option<u64>,
    used_memory: Option<f64>,
    used_memory_rss: Option<u64>,
    bytes_per_item: Spread3,
    items_per_sec: Spread3,
    commands_per_sec: Spread3,
    seconds: Option<f64>,
}

impl Line {
    /// A repetition's line: its own figures, which are their own median, min and max.
    #[allow(clippy::too_many_arguments)]
    fn repetition(
        number: u32,
        items: u64,
        commands: Option<u64>,
        memory: (u64, u64, u64),
        bytes_per_item: f64,
        items_per_sec: f64,
        commands_per_sec: f64,
        seconds: f64,
    ) -> Self {
        let (baseline, used, rss) = memory;
        let alone = |v: f64| Some((v, v, v));
        Line {
            repetition: Some(number),
            items: Some(items),
            commands,
            baseline_used_memory: Some(baseline),
            used_memory: Some(used as f64),
            used_memory_rss: Some(rss),
            bytes_per_item: alone(bytes_per_item),
            items_per_sec: alone(items_per_sec),
            commands_per_sec: alone(commands_per_sec),
            seconds: Some(seconds),
            ..Line::default()
        }
    }
}

fn text<T: ToString>(value: Option<T>) -> String {
    value.map_or_else(String::new, |v| v.to_string())
}

/// The cells of a line: the engine's columns from `row`, then the line's figures.
fn cells(labels: &BenchmarkLabels, row: &ComparisonRow, arch: &str, line: &Line) -> Vec<String> {
    let summary = line.repetition.is_none();
    let spread = |s: Spread3, pick: fn((f64, f64, f64)) -> f64| text(s.map(pick));
    let on_summary = |value: Option<String>| value.filter(|_| summary).unwrap_or_default();
    let published = row.published.as_ref().filter(|_| summary);
    let mut cells = vec![
        labels.benchmark.clone(),
        labels.namespace.clone(),
        row.name.clone(),
        row.engine.clone(),
        row.version.clone(),
        row.allocator.clone(),
        row.modules.clone(),
        arch.to_string(),
        row.instance_type
            .clone()
            .unwrap_or_else(|| labels.instance_type.clone()),
        row.workload.clone(),
        row.item.clone(),
        if summary { "summary" } else { "repetition" }.to_string(),
        text(line.repetition),
        text(line.repetitions),
        text(line.items),
        text(line.commands),
        text(line.baseline_used_memory),
        text(line.used_memory),
        text(line.used_memory_rss),
    ];
    for figure in [
        line.bytes_per_item,
        line.items_per_sec,
        line.commands_per_sec,
    ] {
        cells.push(spread(figure, |s| s.0));
        let range = |pick| {
            if summary {
                spread(figure, pick)
            } else {
                String::new()
            }
        };
        cells.push(range(|s| s.1));
        cells.push(range(|s| s.2));
    }
    cells.extend([
        text(line.seconds),
        on_summary(row.change_vs_first_percent.map(|c| c.to_string())),
        text(published.map(|p| p.bytes_per_item)),
        published.map_or_else(String::new, |p| p.version.to_string()),
        text(published.and_then(|p| p.difference_percent)),
        on_summary(Some(row.unstable.to_string())),
        on_summary(row.note.clone()),
    ]);
    cells
}

/// The rows of one engine of a local run or `membench load`: a row per verified repetition,
/// then its summary (figures empty when none was verified, the note saying why).
pub fn rows_of_report(
    labels: &BenchmarkLabels,
    report: &BenchmarkReport,
    row: &ComparisonRow,
) -> Vec<Vec<String>> {
    let arch = &report.engine.arch;
    let mut rows: Vec<Vec<String>> = report
        .repetitions
        .iter()
        .map(|r| {
            let line = Line::repetition(
                r.repetition,
                r.items,
                Some(r.commands),
                (r.baseline_used_memory, r.used_memory, r.used_memory_rss),
                r.bytes_per_item,
                r.items_per_sec,
                r.commands_per_sec,
                r.seconds,
            );
            cells(labels, row, arch, &line)
        })
        .collect();
    let summary = report.summary.as_ref();
    let line = Line {
        repetitions: Some(summary.map_or(0, |s| s.repetitions)),
        items: summary.map(|s| s.items),
        used_memory: summary.map(|s| s.used_memory.median),
        bytes_per_item: summary.map(|s| {
            (
                s.bytes_per_item.median,
                s.bytes_per_item.min,
                s.bytes_per_item.max,
            )
        }),
        items_per_sec: summary
            .and_then(|s| s.items_per_sec.as_ref())
            .map(|s| (s.median, s.min, s.max)),
        commands_per_sec: summary.map(|s| {
            (
                s.commands_per_sec.median,
                s.commands_per_sec.min,
                s.commands_per_sec.max,
            )
        }),
        ..Line::default()
    };
    rows.push(cells(labels, row, arch, &line));
    rows
}

/// The rows of one engine of a benchmark measured in a cluster, from its status: a row per
/// repetition the status holds (numbered from 1), then its summary.
pub fn rows_of_status(
    labels: &BenchmarkLabels,
    engine: &EngineStatus,
    row: &ComparisonRow,
) -> Vec<Vec<String>> {
    let arch = engine.arch.clone().unwrap_or_default();
    let mut rows: Vec<Vec<String>> = engine
        .repetitions
        .iter()
        .zip(1u32..)
        .map(|(r, number)| {
            let line = Line::repetition(
                number,
                r.items,
                None,
                (r.baseline_used_memory, r.used_memory, r.used_memory_rss),
                r.bytes_per_item,
                r.items_per_sec,
                r.commands_per_sec,
                r.seconds,
            );
            cells(labels, row, &arch, &line)
        })
        .collect();
    let summary = engine.summary.as_ref();
    let spread = |s: &crate::crd::SpreadStatus| (s.median, s.min, s.max);
    let line = Line {
        repetitions: Some(engine.repetitions.len() as u32),
        items: summary.map(|s| s.items),
        used_memory: summary.map(|s| s.used_memory as f64),
        bytes_per_item: summary.map(|s| spread(&s.bytes_per_item)),
        items_per_sec: summary.map(|s| spread(&s.items_per_sec)),
        commands_per_sec: summary.map(|s| spread(&s.commands_per_sec)),
        ..Line::default()
    };
    rows.push(cells(labels, row, &arch, &line));
    rows
}

/// The header line, which a caller printing rows as they come prints once, first.
pub fn header() -> String {
    Table::new(&HEADER).to_csv()
}

/// Rows without the header, in the same quoting as the header's table.
pub fn lines(rows: Vec<Vec<String>>) -> String {
    let mut table = Table::new(&HEADER);
    for row in rows {
        table.push(row);
    }
    let csv = table.to_csv();
    csv.split_once('\n')
        .map_or_else(String::new, |(_, rows)| rows.to_string())
}
