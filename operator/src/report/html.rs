//! `--output html` of `membench run` and `membench report`: one self-contained page per call,
//! with, for each benchmark, a bar chart of bytes per item per engine (the published figure
//! marked where the spec names a published table), the growth curve (both drawn by
//! `charts.rs`), the node memory each engine needs at `spec.capacity.items` against the
//! instance sizes (`capacity_chart.rs`, when the spec asks), and the comparison table. Nothing is fetched: the charts are inline SVG,
//! the style is inline CSS, and there are no scripts or fonts, so the page opens the same on a
//! machine without a network, in a browser or attached to a decision document.
//!
//! The page fits a phone's width as well as a desktop's: the charts scale with it, text wraps,
//! and a table wider than the page scrolls in its own box, so the page itself never scrolls
//! sideways.

use std::fmt::Write as _;

use crate::client::measurement::measure::MemorySample;
use crate::client::phases::{FIGURES, StageChart, StageLine};
use crate::client::pod_io::result::GrowthColumn;
use crate::client::workloads::workload::Workload;
use crate::crd::MemoryBenchmark;
use crate::report::charts::{self, escape};
use crate::report::local_run::LocalComparison;
use crate::report::published::PublishedTable;
use crate::report::table::{
    ComparisonRow, Table, attach_published, comparison_table, compute_changes,
};

pub use crate::report::capacity_chart::CapacityChart;
use crate::report::capacity_chart::render_capacity;
pub use crate::report::charts::{Bar, Curve, PublishedMark};

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
    /// Each sharded engine's shards (`report::shards`), under a heading each.
    pub shard_tables: Vec<(String, Table)>,
    /// The node memory each engine needs at `spec.capacity.items`, when the spec asks.
    pub capacity: Option<CapacityChart>,
    /// The phases' charts (`client::phases::FIGURES`), each with a line per engine that ran
    /// the phase.
    pub stage_charts: Vec<(StageChart, Vec<StageLine>)>,
}

/// Each phase's chart with a line per engine that ran it, from `stages` of an engine's first
/// repetition (the engine's label and its stages).
fn stage_charts<'e, E: 'e>(
    engines: impl Iterator<Item = &'e E> + Clone,
    stages: impl Fn(&dyn crate::client::phases::PhaseFigures, &E) -> Option<StageLine>,
) -> Vec<(StageChart, Vec<StageLine>)> {
    FIGURES
        .iter()
        .filter_map(|figures| {
            let chart = figures.chart()?;
            let lines = engines
                .clone()
                .filter_map(|engine| stages(*figures, engine))
                .collect();
            Some((chart, lines))
        })
        .collect()
}

/// One bar per comparison row, with the row's published figure as its mark.
fn bars_of(rows: &[ComparisonRow]) -> Vec<Bar> {
    rows.iter()
        .map(|row| Bar {
            engine: row.name.clone(),
            kind: row.engine.clone(),
            detail: engine_detail(row),
            bytes_per_item: row.bytes_per_item,
            published: row.published.as_ref().map(|p| PublishedMark {
                bytes_per_item: p.bytes_per_item,
                version: p.version.to_string(),
            }),
        })
        .collect()
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
    attach_published(&mut rows, table, workload.as_ref());
    let bars = bars_of(&rows);
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
    let subtitle = local_run_subtitle(benchmark, comparison);
    let stage_charts = stage_charts(comparison.engines.iter(), |figures, report| {
        Some(StageLine {
            engine: report.name.clone(),
            points: figures.stages_of_repetition(report.repetitions.first()?)?,
        })
    });
    Section {
        title: comparison.benchmark.clone(),
        subtitle,
        notes: published_notes(table, workload.as_ref(), &bars),
        item: workload
            .as_ref()
            .map_or("item", |w| w.item_noun())
            .to_string(),
        table: comparison_table(&rows),
        shard_tables: crate::report::shards::shard_tables(&comparison.engines),
        bars,
        curves,
        capacity: None,
        stage_charts,
    }
}

/// What a local run loaded and where it ran, in a line: under the benchmark's name above its
/// table and on its page.
pub fn local_run_subtitle(benchmark: &MemoryBenchmark, comparison: &LocalComparison) -> String {
    let workload = comparison.engines.first().map_or_else(
        || {
            Workload::from_spec(&benchmark.spec.workload)
                .map(|w| w.describe())
                .unwrap_or_default()
        },
        |r| r.workload.description.clone(),
    );
    let emulated = if comparison.arch != comparison.host.arch {
        format!(
            "; {} builds under qemu-user emulation: memory figures are the architecture's, rates are the emulator's",
            comparison.arch
        )
    } else {
        String::new()
    };
    format!(
        "{workload}; {} repetitions, pipeline {}; ran locally on {} ({}, {} CPUs{}){emulated}",
        benchmark.spec.repetitions,
        benchmark.spec.pipeline,
        comparison.host.hostname,
        comparison.host.arch,
        comparison.host.cpus,
        comparison.instance_type_note()
    )
}

/// The section of a benchmark measured in a cluster (`membench report`), from its status.
pub fn section_from_status(benchmark: &MemoryBenchmark) -> Section {
    let comparison = crate::report::cluster::comparison(benchmark);
    let workload = Workload::from_spec(&benchmark.spec.workload).ok();
    let table = benchmark.spec.published_table.map(|t| t.table());
    let status = benchmark.status.clone().unwrap_or_default();
    // A benchmark of several instance types has one bar and one curve per engine and type.
    let several_types = benchmark.spec.instance_types().len() > 1;
    let label = |name: &str, instance_type: Option<&String>| match instance_type {
        Some(t) if several_types => format!("{name} on {t}"),
        _ => name.to_string(),
    };
    let mut bars = bars_of(&comparison.rows);
    for (bar, row) in bars.iter_mut().zip(&comparison.rows) {
        bar.engine = label(&row.name, row.instance_type.as_ref());
    }
    let curves = status
        .engines
        .iter()
        .filter(|e| !e.growth.is_empty())
        .map(|e| {
            Curve::new(
                &label(&e.name, e.instance_type.as_ref()),
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
    let stage_charts = stage_charts(status.engines.iter(), |figures, engine| {
        Some(StageLine {
            engine: label(&engine.name, engine.instance_type.as_ref()),
            points: figures.stages_of_status(engine.repetitions.first()?)?,
        })
    });
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
        table: comparison_table(&comparison.rows),
        shard_tables: Vec::new(),
        bars,
        curves,
        capacity: status.capacity.as_ref().map(CapacityChart::from_status),
        stage_charts,
    }
}

fn engine_detail(row: &ComparisonRow) -> String {
    let mut detail = format!("{} {}", row.engine, row.version);
    if !row.allocator.is_empty() {
        let _ = write!(detail, ", {}", row.allocator);
    }
    if !row.modules.is_empty() {
        let _ = write!(detail, ", modules: {}", row.modules);
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

/// The page's style: text wraps anywhere rather than widen the page; the charts take the
/// page's width up to their own (`charts::CHART_WIDTH`), keeping their proportions; a table
/// scrolls inside its own box.
const STYLE: &str = "
body { font-family: sans-serif; margin: 2em auto; max-width: 68em; padding: 0 1em; color: #222; overflow-wrap: anywhere; }
h1 { font-size: 1.5em; } h2 { font-size: 1.25em; margin-top: 2.5em; border-bottom: 1px solid #ccc; }
p.subtitle { color: #555; } ul.notes { color: #444; font-size: 0.9em; padding-left: 1.2em; }
figure { margin: 1.5em 0; } figcaption { font-weight: bold; margin-bottom: 0.5em; }
svg.chart { display: block; width: 100%; max-width: 560px; height: auto; }
svg text { font-family: sans-serif; font-size: 14px; fill: #222; }
svg .axis { stroke: #888; stroke-width: 1; } svg .grid { stroke: #e4e4e4; stroke-width: 1; }
svg .published-mark { stroke: #000; stroke-width: 3; }
svg .growth-line, svg .stage-line { fill: none; stroke-width: 2; }
div.table-scroll { overflow-x: auto; max-width: 100%; }
table.comparison { border-collapse: collapse; font-size: 0.85em; overflow-wrap: normal; }
table.comparison th, table.comparison td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: left; white-space: nowrap; }
table.comparison td:last-child { white-space: normal; min-width: 18em; }
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
    charts::render_bars(page, &section.bars, &section.item);
    charts::render_curves(page, &section.curves, &section.bars, &section.item);
    if let Some(capacity) = &section.capacity {
        render_capacity(page, capacity, &section.bars, &section.item);
    }
    for (chart, lines) in &section.stage_charts {
        crate::report::stage_chart::render_stages(page, chart, lines, &section.bars);
    }
    render_table(page, &section.table);
    for (heading, table) in &section.shard_tables {
        let _ = writeln!(page, "<p class=\"shards\">{}</p>", escape(heading));
        render_table(page, table);
    }
    page.push_str("</section>\n");
}

fn render_table(page: &mut String, table: &Table) {
    page.push_str("<div class=\"table-scroll\">\n<table class=\"comparison\">\n<thead><tr>");
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
    page.push_str("</tbody>\n</table>\n</div>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{EngineStatus, GrowthPoint, MemoryBenchmarkStatus, Phase, SummaryStatus};
    use crate::validation::spec_file::parse_specs;

    fn engine(name: &str, kind: &str, version: &str, bytes: Option<f64>) -> EngineStatus {
        EngineStatus {
            name: name.into(),
            engine: kind.into(),
            requested_version: version.into(),
            version: Some(version.into()),
            allocator: Some("jemalloc-5.3.0".into()),
            state: if bytes.is_some() {
                "Succeeded"
            } else {
                "Failed"
            }
            .into(),
            reason: bytes.is_none().then(|| "EngineCrashed".into()),
            message: bytes
                .is_none()
                .then(|| "exited with <signal 9> & lost".into()),
            summary: bytes.map(|b| SummaryStatus {
                items: 50_000_000,
                used_memory: (b * 5e7) as u64,
                bytes_per_item: crate::crd::SpreadStatus {
                    median: b,
                    min: b,
                    max: b,
                    cv: 0.0,
                },
                ..Default::default()
            }),
            growth: bytes.map_or_else(Vec::new, |b| {
                (1..=50)
                    .map(|k| GrowthPoint {
                        items: k * 1_000_000,
                        used_memory: (b * (k * 1_000_000) as f64) as u64,
                    })
                    .collect()
            }),
            ..Default::default()
        }
    }

    fn benchmark(published: bool) -> MemoryBenchmark {
        let table = if published {
            "  publishedTable: sorted-set-50m\n"
        } else {
            ""
        };
        let mut b = parse_specs(&format!("apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {{name: zset, namespace: bench}}\nspec:\n  instanceType: r8g.4xlarge\n{table}  engines: [{{engine: redis, version: \"8.2\"}}, {{engine: valkey, version: \"9.1\"}}, {{engine: dragonfly, version: \"1.40.0\"}}]\n  workload: {{sortedSet: {{members: 50000000}}}}\n  repetitions: 1\n")).unwrap().remove(0);
        b.status = Some(MemoryBenchmarkStatus {
            phase: Some(Phase::Failed),
            engines: vec![
                engine("redis-8.2", "redis", "8.2.3", Some(96.59)),
                engine("valkey-9.1", "valkey", "9.1.2", Some(66.82)),
                engine("dragonfly-1.40.0", "dragonfly", "1.40.0", None),
            ],
            ..Default::default()
        });
        b
    }

    fn count(page: &str, needle: &str) -> usize {
        page.matches(needle).count()
    }

    #[test]
    fn every_engine_gets_a_bar_even_without_a_result() {
        let page = render_page("t", &[section_from_status(&benchmark(true))]);
        assert_eq!(count(&page, "<rect class=\"bar"), 3, "{page}");
        assert_eq!(count(&page, "<rect class=\"bar bar-missing\""), 1);
        assert!(page.contains("data-engine=\"valkey-9.1\" data-value=\"66.82\""));
    }

    #[test]
    fn published_figures_are_marked_on_the_engines_of_their_release_line() {
        let section = section_from_status(&benchmark(true));
        let marks: Vec<Option<f64>> = section
            .bars
            .iter()
            .map(|b| b.published.as_ref().map(|p| p.bytes_per_item))
            .collect();
        // Redis 8.2.10 and Valkey 9.1.2 published 4.83 and 3.34 GB; the table has no Dragonfly.
        assert_eq!(marks, vec![Some(96.6), Some(66.8), None]);
        let page = render_page("t", &[section]);
        assert_eq!(count(&page, "<line class=\"published-mark\""), 2);
        assert!(page.contains("No published figure for dragonfly-1.40.0"));
        // The table sets the published figure beside the measured one.
        assert!(
            page.contains("<td class=\"number\">96.60 (8.2.10)</td>"),
            "{page}"
        );
        assert!(page.contains("<td class=\"number\">-0.0%</td>"), "{page}");
    }

    #[test]
    fn without_a_published_table_nothing_is_marked() {
        let section = section_from_status(&benchmark(false));
        assert!(section.bars.iter().all(|b| b.published.is_none()));
        let page = render_page("t", &[section]);
        assert_eq!(count(&page, "<line class=\"published-mark\""), 0);
        assert!(!page.contains("<th>Published</th>"));
    }

    #[test]
    fn the_growth_curve_is_drawn_for_each_engine_that_has_one() {
        let page = render_page("t", &[section_from_status(&benchmark(true))]);
        assert_eq!(count(&page, "<polyline class=\"growth-line\""), 2);
        assert!(page.contains("data-engine=\"redis-8.2\" data-points=\"50\""));
        let mut strings = benchmark(false);
        strings.status.as_mut().unwrap().engines[0].growth.clear();
        strings.status.as_mut().unwrap().engines[1].growth.clear();
        let page = render_page("t", &[section_from_status(&strings)]);
        assert!(page.contains("class=\"no-growth-curve\""));
    }

    #[test]
    fn a_snapshots_peak_is_shown_beside_bytes_per_item() {
        let mut b = benchmark(false);
        let valkey = &mut b.status.as_mut().unwrap().engines[1];
        valkey.repetitions = vec![crate::crd::RepetitionStatus {
            items: 50_000_000,
            peak: Some(crate::crd::PeakStatus {
                snapshot: Some(crate::crd::SnapshotStatus {
                    source: "process-tree".into(),
                    before_bytes: Some(4_000_000_000),
                    peak_bytes: Some(6_224_000_000),
                    ratio: Some(1.556),
                    cow_bytes: Some(2_100_000_000),
                    ..Default::default()
                }),
                replica: None,
            }),
            ..Default::default()
        }];
        let page = render_page("t", &[section_from_status(&b)]);
        assert!(page.contains("Peak during snapshot"), "no column");
        assert!(page.contains("x1.56 (6.22 GB)"), "no figure");
        assert!(page.contains("copy-on-write 2.10 GB"), "no copy");
        // Without a snapshot, no column.
        let page = render_page("t", &[section_from_status(&benchmark(false))]);
        assert!(!page.contains("Peak during snapshot"));
    }

    #[test]
    fn a_replicas_sync_is_shown_beside_bytes_per_item() {
        let mut b = benchmark(false);
        let valkey = &mut b.status.as_mut().unwrap().engines[1];
        valkey.repetitions = vec![crate::crd::RepetitionStatus {
            items: 50_000,
            peak: Some(crate::crd::PeakStatus {
                snapshot: None,
                replica: Some(crate::crd::ReplicaStatus {
                    primary: crate::crd::SnapshotStatus {
                        source: "process-tree".into(),
                        before_bytes: Some(74_160_000),
                        peak_bytes: Some(83_480_000),
                        ratio: Some(1.1257),
                        cow_bytes: Some(9_170_000),
                        ..Default::default()
                    },
                    replica_used_memory: 65_570_000,
                    ..Default::default()
                }),
            }),
            ..Default::default()
        }];
        let page = render_page("t", &[section_from_status(&b)]);
        assert!(page.contains("Peak during replica sync"), "no column");
        assert!(
            page.contains("x1.13 (83.48 MB), copy-on-write 9.17 MB, replica 65.57 MB"),
            "no figures"
        );
        assert!(!page.contains("Peak during snapshot"), "no snapshot asked");
        let page = render_page("t", &[section_from_status(&benchmark(false))]);
        assert!(!page.contains("Peak during replica sync"));
    }

    #[test]
    fn a_churns_rounds_are_drawn_as_a_line_per_engine_that_churned() {
        let mut b = benchmark(false);
        let round = |round: u32, rss: u64| crate::crd::ChurnRoundStatus {
            round,
            used_memory_rss: rss,
            ..Default::default()
        };
        let churned = |rss: [u64; 3], defrag: Option<u64>| crate::crd::RepetitionStatus {
            items: 50_000_000,
            used_memory_rss: 9_000_000_000,
            settled_used_memory_rss: Some(rss[0]),
            churn: Some(crate::crd::ChurnStatus {
                rounds: vec![round(1, rss[1]), round(2, rss[2])],
                defrag: defrag.map(|rss_after| crate::crd::DefragStatus {
                    rss_after,
                    ..Default::default()
                }),
            }),
            ..Default::default()
        };
        let engines = &mut b.status.as_mut().unwrap().engines;
        engines[0].repetitions = vec![churned(
            [5_000_000_000, 5_100_000_000, 5_200_000_000],
            Some(3_000_000_000),
        )];
        engines[1].repetitions = vec![churned([4_000_000_000, 4_300_000_000, 4_400_000_000], None)];
        let page = render_page("t", &[section_from_status(&b)]);
        assert_eq!(count(&page, "<figure class=\"churn\">"), 1, "{page}");
        assert_eq!(count(&page, "class=\"stage-line churn-line\""), 2, "{page}");
        // After the load (the settled reading), each round, and defragmentation where it ran.
        assert!(page.contains("data-engine=\"redis-8.2\" data-points=\"4\""));
        assert!(page.contains("data-engine=\"valkey-9.1\" data-points=\"3\""));
        for stage in ["load", "round 1", "round 2", "defrag"] {
            assert!(page.contains(&format!(">{stage}</text>")), "{stage}");
        }
        // The comparison's columns: RSS after the last round and after defragmentation.
        assert!(page.contains("5.20 GB"), "{page}");
        assert!(page.contains("3.00 GB"), "{page}");
        // Without a churn, no chart.
        let page = render_page("t", &[section_from_status(&benchmark(false))]);
        assert!(!page.contains("<figure class=\"churn\">"));
    }

    #[test]
    fn the_page_fetches_nothing() {
        let page = render_page("t", &[section_from_status(&benchmark(true))]);
        for forbidden in [
            "<script", "src=", "href=", "url(", "@import", "http:", "https:",
        ] {
            assert!(!page.contains(forbidden), "the page holds {forbidden}");
        }
    }

    #[test]
    fn text_from_engines_and_errors_is_escaped() {
        let page = render_page("a <b> & c", &[section_from_status(&benchmark(true))]);
        assert!(page.contains("<title>a &lt;b&gt; &amp; c</title>"));
        assert!(
            page.contains("exited with &lt;signal 9&gt; &amp; lost"),
            "{page}"
        );
        assert!(!page.contains("<signal 9>"));
    }
}
