//! Result tables in the style of the published ones ("4.83 GB", "~97", "539k/s"), as plain
//! text, Markdown or CSV, for one engine's repetitions and for a comparison of engines.

use serde::Serialize;

use crate::client::measurement::measure::BenchmarkReport;
use crate::client::workloads::type_memory::{self, TypeSummary};
use crate::client::workloads::workload::Workload;
use crate::crd::EvictionStatus;
use crate::report::peak::{describe_replica, describe_snapshot};
use crate::report::published::{PublishedFigure, PublishedTable};
pub use crate::table::{OutputFormat, Table, format_bytes};

/// Operations per second, as "539k/s" or "1.20M/s".
pub fn format_rate(per_sec: f64) -> String {
    if per_sec >= 1e6 {
        format!("{:.2}M/s", per_sec / 1e6)
    } else if per_sec >= 1e3 {
        format!("{:.0}k/s", per_sec / 1e3)
    } else {
        format!("{per_sec:.0}/s")
    }
}

/// A change in percent with its sign ("-31.0%").
pub fn format_change(percent: f64) -> String {
    format!("{percent:+.1}%")
}

/// What the commands-per-second column is called for a workload kind.
pub fn command_rate_label(kind: &str) -> &'static str {
    match kind {
        "sorted-set" => "ZADDs/s",
        // One HSET per record, or one SET per field; a profile's SETs, HSETs, ZADDs, ...
        "records" | "profile" => "commands/s",
        _ => "SETs/s",
    }
}

/// What the items-per-second column is called for an item noun ("members/s").
pub fn item_rate_label(item: &str) -> String {
    format!("{item}s/s")
}

fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// One engine's line in a comparison, wherever its results came from (a local run or a
/// MemoryBenchmark's status).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ComparisonRow {
    pub name: String,
    pub engine: String,
    pub version: String,
    pub allocator: String,
    /// The modules the engine loaded, as a report shows them (`vectorset 1`, `none`; empty
    /// when not reported): beside the allocator, so that a figure from an image that loads
    /// modules is never read as one from an image that loads none.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub modules: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
    pub workload: String,
    pub item: String,
    pub used_memory: Option<f64>,
    pub bytes_per_item: Option<f64>,
    /// Items stored per second (items / load seconds): median, min, max.
    pub items_per_sec_median: Option<f64>,
    pub items_per_sec_min: Option<f64>,
    pub items_per_sec_max: Option<f64>,
    /// Commands sent per second: median, min, max.
    pub commands_per_sec_median: Option<f64>,
    pub commands_per_sec_min: Option<f64>,
    pub commands_per_sec_max: Option<f64>,
    pub repetitions: u32,
    pub unstable: bool,
    pub change_vs_first_percent: Option<f64>,
    /// The emulator the engine ran under (`qemu-aarch64-static`) when it is built for another
    /// architecture than the machine's: its rates are the emulator's, and the tables mark them
    /// so that no one compares them with native rates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emulator: Option<String>,
    /// The engine settings the spec changed, as the engine read them back (`CONFIG GET`):
    /// shown in the note, so that two entries of one build differ visibly.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub config: std::collections::BTreeMap<String, String>,
    /// In cluster mode, the empty one-node cluster's used_memory minus the same build's in
    /// standalone mode (`membench run`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_fixed_cost_bytes: Option<i64>,
    /// A sharded cluster's spread over its shards (the fixed cost above is then per shard).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shards: Option<crate::client::measurement::measure::ShardSpread>,
    /// The TTL the entry's items were loaded with (`seconds`, `share`), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl: Option<crate::client::workloads::ttl::Ttl>,
    /// A profile's rebuild: bytes per key of each type (`client::workloads::type_memory`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub by_type: Vec<TypeSummary>,
    /// With `spec.churn`: RSS after the last round, and after defragmentation, medians over
    /// the repetitions (`BenchmarkReport::churned_rss`, `ChurnStatus::medians_of`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub churned_rss: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub defragmented_rss: Option<f64>,
    /// With `spec.peak.snapshot`: the median peak over the steady memory and what it was, in
    /// a line (`describe_snapshot`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot_peak: Option<String>,
    /// With `spec.peak.replica`: the primary's median peak during the sync, and the replica's
    /// memory, in a line (`report::peak::describe_replica`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replica_peak: Option<String>,
    /// With `spec.eviction`: the first repetition's load past maxmemory, in a line
    /// (`describe_eviction`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eviction: Option<String>,
    /// Why there are no figures, or what to keep in mind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The published table the spec names (`spec.publishedTable`), if it names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub published_table: Option<&'static str>,
    /// That table's figure for this engine's kind and release line, and the difference from
    /// it; `None` when the table has no such row.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub published: Option<PublishedFigure>,
}

impl ComparisonRow {
    pub fn from_report(report: &BenchmarkReport, instance_type: Option<String>) -> Self {
        let summary = report.summary.as_ref();
        let items_per_sec = summary.and_then(|s| s.items_per_sec.as_ref());
        let note = match (&report.error, summary) {
            (Some(e), Some(s)) => Some(format!(
                "stopped after {} of {} repetitions: {}",
                s.repetitions, report.repetitions_requested, e.message
            )),
            (Some(e), None) => Some(e.message.clone()),
            (None, Some(s)) if s.unstable => s.unstable_reason.clone(),
            _ => None,
        };
        Self {
            name: report.name.clone(),
            engine: report.engine.name.clone(),
            version: report.engine.version.clone(),
            allocator: report.engine.allocator_label(),
            modules: crate::crd::describe_modules(report.engine.modules.as_deref()),
            instance_type,
            workload: report.workload.workload.kind().to_string(),
            item: report.workload.item.clone(),
            used_memory: summary.map(|s| s.used_memory.median),
            bytes_per_item: summary.map(|s| s.bytes_per_item.median),
            items_per_sec_median: items_per_sec.map(|s| s.median),
            items_per_sec_min: items_per_sec.map(|s| s.min),
            items_per_sec_max: items_per_sec.map(|s| s.max),
            commands_per_sec_median: summary.map(|s| s.commands_per_sec.median),
            commands_per_sec_min: summary.map(|s| s.commands_per_sec.min),
            commands_per_sec_max: summary.map(|s| s.commands_per_sec.max),
            repetitions: summary.map_or(0, |s| s.repetitions),
            unstable: summary.is_some_and(|s| s.unstable),
            change_vs_first_percent: None,
            emulator: report.engine.emulator.clone(),
            config: report.engine.config.clone(),
            ttl: report.ttl,
            cluster_fixed_cost_bytes: report.cluster.as_ref().map(|c| c.fixed_cost_bytes),
            shards: summary.and_then(|s| s.shards.clone()),
            by_type: summary.map(|s| s.by_type.clone()).unwrap_or_default(),
            churned_rss: report.churned_rss(),
            defragmented_rss: report.defragmented_rss(),
            snapshot_peak: describe_snapshot(
                &report
                    .repetitions
                    .iter()
                    .filter_map(|r| r.peak.as_ref()?.snapshot.as_ref().map(Into::into))
                    .collect::<Vec<_>>(),
            ),
            replica_peak: describe_replica(
                &report
                    .repetitions
                    .iter()
                    .filter_map(|r| r.peak.as_ref()?.replica.as_ref().map(Into::into))
                    .collect::<Vec<_>>(),
            ),
            eviction: report
                .repetitions
                .iter()
                .find_map(|r| r.eviction.as_ref())
                .map(|e| describe_eviction(&e.into())),
            note,
            published_table: None,
            published: None,
        }
    }
}

impl ComparisonRow {
    /// Whether the entry carries the name a spec gives by default, `<engine>-<version>`, where
    /// the spec's version may be a prefix of the reported one (`redis-7.0` for 7.0.15).
    pub fn has_default_name(&self) -> bool {
        self.name
            .strip_prefix(&format!("{}-", self.engine))
            .is_some_and(|v| self.version == v || self.version.starts_with(&format!("{v}.")))
    }
}

/// `value` relative to `first`, in percent (negative: smaller). `None` when either is missing
/// or `first` is not positive, where a ratio means nothing.
pub fn change_percent(value: Option<f64>, first: Option<f64>) -> Option<f64> {
    match (value, first) {
        (Some(value), Some(first)) if first > 0.0 => Some((value / first - 1.0) * 100.0),
        _ => None,
    }
}

/// Sets beside each row the published figure of its engine's kind and release line from
/// `table` (the spec's `publishedTable`), and the difference from it.
pub fn attach_published(
    rows: &mut [ComparisonRow],
    table: Option<&PublishedTable>,
    workload: Option<&Workload>,
) {
    let (Some(table), Some(workload)) = (table, workload) else {
        return;
    };
    for row in rows {
        row.published_table = Some(table.name);
        row.published = table.figure_for(&row.engine, &row.version, workload, row.bytes_per_item);
    }
}

/// Fills in each row's change of bytes per item against the first row.
pub fn compute_changes(rows: &mut [ComparisonRow]) {
    let first = rows.first().and_then(|r| r.bytes_per_item);
    for row in rows.iter_mut() {
        row.change_vs_first_percent = change_percent(row.bytes_per_item, first);
    }
}

/// The comparison table: engine, version, allocator, modules, used_memory, bytes per item, median
/// items/s with its spread, median commands/s, change against the first engine, and where the
/// spec names a published table, the published figure and the difference from it.
/// A TTL as the table shows it: `3600 s`, or `3600 s, 50%` for a share of the items.
fn format_ttl(ttl: crate::client::workloads::ttl::Ttl) -> String {
    if ttl.share >= 1.0 {
        format!("{} s", ttl.seconds)
    } else {
        format!("{} s, {:.0}%", ttl.seconds, ttl.share * 100.0)
    }
}

/// What the TTL costs per item on a row with one: its bytes per item minus those of the row
/// without a TTL of the same engine, version, allocator, modules and settings (a `withoutTtl`
/// entry).
fn ttl_cost(row: &ComparisonRow, rows: &[ComparisonRow]) -> Option<f64> {
    row.ttl?;
    let without = rows.iter().find(|other| {
        other.ttl.is_none()
            && other.engine == row.engine
            && other.version == row.version
            && other.allocator == row.allocator
            && other.modules == row.modules
            && other.config == row.config
    })?;
    Some(row.bytes_per_item? - without.bytes_per_item?)
}

pub fn comparison_table(rows: &[ComparisonRow]) -> Table {
    let item = rows.first().map_or("item", |r| r.item.as_str());
    let kind = rows.first().map_or("", |r| r.workload.as_str());
    let bytes_header = format!("Bytes per {item}");
    let items_rate_header = format!("Median {}", item_rate_label(item));
    let commands_rate_header = format!("Median {}", command_rate_label(kind));
    let with_instance = rows.iter().any(|r| r.instance_type.is_some());
    // Entries named in the spec (the same engine twice, say) need their names to be told apart.
    let with_name = rows.iter().any(|r| !r.has_default_name());
    let with_published = rows.iter().any(|r| r.published_table.is_some());
    let with_ttl = rows.iter().any(|r| r.ttl.is_some());
    let with_types = rows.iter().any(|r| !r.by_type.is_empty());
    let with_churn = rows.iter().any(|r| r.churned_rss.is_some());
    let with_defrag = rows.iter().any(|r| r.defragmented_rss.is_some());
    let with_eviction = rows.iter().any(|r| r.eviction.is_some());
    let with_snapshot = rows.iter().any(|r| r.snapshot_peak.is_some());
    let with_replica = rows.iter().any(|r| r.replica_peak.is_some());
    let mut headers = if with_name { vec!["Name"] } else { Vec::new() };
    headers.extend(["Engine", "Version", "Allocator", "Modules"]);
    if with_instance {
        headers.push("Instance type");
    }
    headers.extend(["used_memory", bytes_header.as_str()]);
    if with_churn {
        headers.push("RSS after churn");
    }
    if with_defrag {
        headers.push("after defrag");
    }
    if with_snapshot {
        headers.push("Peak during snapshot");
    }
    if with_replica {
        headers.push("Peak during replica sync");
    }
    if with_eviction {
        headers.push("At maxmemory");
    }
    if with_ttl {
        headers.extend(["TTL", "TTL cost"]);
    }
    if with_types {
        headers.push("Bytes per key by type");
    }
    headers.extend([
        items_rate_header.as_str(),
        "Spread (min-max)",
        commands_rate_header.as_str(),
        "vs first",
    ]);
    if with_published {
        headers.extend(["Published", "vs published"]);
    }
    headers.push("Note");
    let mut table = Table::new(&headers);
    let dash = || "-".to_string();
    for r in rows {
        let mut row = if with_name {
            vec![r.name.clone()]
        } else {
            Vec::new()
        };
        row.extend([
            capitalize(&r.engine),
            r.version.clone(),
            r.allocator.clone(),
            if r.modules.is_empty() {
                dash()
            } else {
                r.modules.clone()
            },
        ]);
        if with_instance {
            row.push(r.instance_type.clone().unwrap_or_else(dash));
        }
        row.push(r.used_memory.map_or_else(dash, format_bytes));
        row.push(r.bytes_per_item.map_or_else(dash, |b| format!("~{b:.1}")));
        if with_churn {
            row.push(r.churned_rss.map_or_else(dash, format_bytes));
        }
        if with_defrag {
            row.push(r.defragmented_rss.map_or_else(dash, format_bytes));
        }
        if with_snapshot {
            row.push(r.snapshot_peak.clone().unwrap_or_else(dash));
        }
        if with_replica {
            row.push(r.replica_peak.clone().unwrap_or_else(dash));
        }
        if with_eviction {
            row.push(r.eviction.clone().unwrap_or_else(dash));
        }
        if with_ttl {
            row.push(r.ttl.map_or_else(|| "none".to_string(), format_ttl));
            row.push(ttl_cost(r, rows).map_or_else(dash, |c| format!("{c:+.1} B")));
        }
        if with_types {
            row.push(if r.by_type.is_empty() {
                dash()
            } else {
                type_memory::describe(&r.by_type)
            });
        }
        // An emulated engine's rates are the emulator's: marked in the cell itself, so that
        // no one reads them against a native row.
        let rate = |per_sec: f64| match r.emulator {
            Some(_) => format!("{} emulated", format_rate(per_sec)),
            None => format_rate(per_sec),
        };
        row.push(r.items_per_sec_median.map_or_else(dash, rate));
        row.push(match (r.items_per_sec_min, r.items_per_sec_max) {
            (Some(lo), Some(hi)) => format!("{} to {}", format_rate(lo), rate(hi)),
            _ => dash(),
        });
        row.push(r.commands_per_sec_median.map_or_else(dash, rate));
        row.push(r.change_vs_first_percent.map_or_else(dash, format_change));
        if with_published {
            match &r.published {
                Some(p) if p.version.is_empty() => row.push(format!("{:.2}", p.bytes_per_item)),
                Some(p) => row.push(format!("{:.2} ({})", p.bytes_per_item, p.version)),
                None => row.push(dash()),
            }
            let difference = r.published.as_ref().and_then(|p| p.difference_percent);
            row.push(difference.map_or_else(dash, format_change));
        }
        let mut note = r.note.clone().unwrap_or_default();
        if r.unstable && !note.starts_with("unstable") {
            note = format!("unstable: {note}");
        }
        let mut extra = Vec::new();
        if !r.config.is_empty() {
            let settings: Vec<String> = r.config.iter().map(|(k, v)| format!("{k}={v}")).collect();
            extra.push(format!("config {}", settings.join(" ")));
        }
        if let Some(cost) = r.cluster_fixed_cost_bytes {
            let sign = if cost < 0 { "-" } else { "+" };
            let (per, baseline) = match r.shards {
                Some(_) => (" per shard", "each shard's baseline"),
                None => ("", "the baseline"),
            };
            extra.push(format!(
                "cluster mode: {sign}{}{per} against standalone when empty (in {baseline})",
                format_bytes(cost.unsigned_abs() as f64)
            ));
        }
        if let Some(spread) = &r.shards {
            extra.push(spread.describe());
        }
        if let Some(emulator) = &r.emulator {
            extra.push(format!("rates under {emulator}, not the architecture's"));
        }
        for text in extra {
            note = if note.is_empty() {
                text
            } else {
                format!("{note}; {text}")
            };
        }
        row.push(note);
        table.push(row);
    }
    table
}

/// One engine's repetitions, one row each.
pub fn repetitions_table(report: &BenchmarkReport) -> Table {
    let item = &report.workload.item;
    let bytes_header = format!("Bytes per {item}");
    let items_rate_header = capitalize(&item_rate_label(item));
    let commands_rate_header = capitalize(command_rate_label(report.workload.workload.kind()));
    let settled = report.repetitions.iter().any(|r| r.settled.is_some());
    let mut headers = vec![
        "Rep",
        "Baseline",
        "used_memory",
        "used_memory_rss",
        "Items",
        bytes_header.as_str(),
        items_rate_header.as_str(),
        commands_rate_header.as_str(),
        "Seconds",
    ];
    if settled {
        headers.push("Settled bytes/item");
    }
    let mut table = Table::new(&headers);
    for r in &report.repetitions {
        let mut row = vec![
            r.repetition.to_string(),
            format_bytes(r.baseline_used_memory as f64),
            format_bytes(r.used_memory as f64),
            format_bytes(r.used_memory_rss as f64),
            r.items.to_string(),
            format!("{:.2}", r.bytes_per_item),
            format_rate(r.items_per_sec),
            format_rate(r.commands_per_sec),
            format!("{:.2}", r.seconds),
        ];
        if settled {
            row.push(
                r.settled
                    .as_ref()
                    .map_or_else(String::new, |s| format!("{:.2}", s.bytes_per_item)),
            );
        }
        table.push(row);
    }
    table
}

/// The growth curve of the first repetition: used_memory read during the load (the sorted
/// set samples it every `sampleEvery` members). `None` when nothing was sampled.
pub fn growth_table(report: &BenchmarkReport) -> Option<Table> {
    let first = report.repetitions.first()?;
    if first.samples.is_empty() {
        return None;
    }
    let item = &report.workload.item;
    let items_header = format!("{}s", capitalize(item));
    let bytes_header = format!("Bytes per {item}");
    let mut table = Table::new(&[items_header.as_str(), "used_memory", bytes_header.as_str()]);
    for sample in &first.samples {
        let added = sample.used_memory as f64 - first.baseline_used_memory as f64;
        table.push(vec![
            sample.items.to_string(),
            format_bytes(sample.used_memory as f64),
            format!("{:.2}", added / sample.items.max(1) as f64),
        ]);
    }
    Some(table)
}

/// A repetition's load past maxmemory in a line: the peak against maxmemory, the keys evicted
/// and kept, the write rate while evicting, or the refusal that was its result.
pub fn describe_eviction(eviction: &EvictionStatus) -> String {
    let EvictionStatus {
        maxmemory,
        overshoot_bytes: overshoot,
        evicted_keys: evicted,
        keys_kept: kept,
        items_per_sec_evicting: evicting_rate,
        refused_at_items: refused_at,
        ..
    } = *eviction;
    let sign = if overshoot < 0 { "-" } else { "+" };
    let peak = format!(
        "peak {sign}{} against maxmemory {}{}",
        format_bytes(overshoot.unsigned_abs() as f64),
        format_bytes(maxmemory as f64),
        if eviction.peak_was_sampled() {
            " (sampled after eviction: a transient can be missed)"
        } else {
            ""
        }
    );
    match refused_at {
        Some(at) => format!("{peak}; writes refused from about {at} items ({kept} kept)"),
        None => format!(
            "{peak}; {evicted} evicted, {kept} kept{}",
            evicting_rate.map_or_else(String::new, |r| format!(
                ", {} while evicting",
                format_rate(r)
            ))
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_read_like_the_published_tables() {
        assert_eq!(format_bytes(4_830_000_000.0), "4.83 GB");
        assert_eq!(format_bytes(512.0), "512 B");
        assert_eq!(format_rate(539_400.0), "539k/s");
        assert_eq!(format_rate(1_200_000.0), "1.20M/s");
        assert_eq!(format_change(-31.04), "-31.0%");
    }

    #[test]
    fn changes_are_relative_to_the_first_row() {
        let row = |b: Option<f64>| ComparisonRow {
            name: "redis-1".into(),
            engine: "redis".into(),
            version: "1".into(),
            allocator: String::new(),
            modules: String::new(),
            instance_type: None,
            workload: "sorted-set".into(),
            item: "member".into(),
            used_memory: None,
            bytes_per_item: b,
            items_per_sec_median: None,
            items_per_sec_min: None,
            items_per_sec_max: None,
            commands_per_sec_median: None,
            commands_per_sec_min: None,
            commands_per_sec_max: None,
            repetitions: 1,
            unstable: false,
            change_vs_first_percent: None,
            emulator: None,
            config: Default::default(),
            ttl: None,
            cluster_fixed_cost_bytes: None,
            shards: None,
            by_type: Vec::new(),
            churned_rss: None,
            defragmented_rss: None,
            snapshot_peak: None,
            replica_peak: None,
            eviction: None,
            note: None,
            published_table: None,
            published: None,
        };
        let mut rows = vec![row(Some(100.0)), row(Some(75.0)), row(None)];
        compute_changes(&mut rows);
        assert_eq!(rows[0].change_vs_first_percent, Some(0.0));
        assert!(rows[0].has_default_name());
        let mut short = rows[0].clone();
        (short.name, short.version) = ("redis-7.0".into(), "7.0.15".into());
        assert!(short.has_default_name());
        short.name = "redis-custom".into();
        assert!(!short.has_default_name());
        assert_eq!(rows[1].change_vs_first_percent, Some(-25.0));
        assert_eq!(rows[2].change_vs_first_percent, None);
        let table = comparison_table(&rows);
        // Engine, Version, Allocator, Modules, used_memory, then the figures.
        assert_eq!(table.headers[3], "Modules");
        assert_eq!(table.rows[0][3], "-", "modules not reported");
        assert_eq!(table.headers[5], "Bytes per member");
        assert_eq!(table.rows[1][9], "-25.0%");
    }

    #[test]
    fn an_emulated_engines_rates_are_marked_in_the_cells_and_the_note() {
        let row = |emulator: Option<&str>| ComparisonRow {
            name: "valkey-9.1".into(),
            engine: "valkey".into(),
            version: "9.1.2".into(),
            allocator: "jemalloc-5.3.0".into(),
            modules: "none".into(),
            instance_type: None,
            workload: "sorted-set".into(),
            item: "member".into(),
            used_memory: Some(7.0e6),
            bytes_per_item: Some(70.8),
            items_per_sec_median: Some(86_000.0),
            items_per_sec_min: Some(80_000.0),
            items_per_sec_max: Some(90_000.0),
            commands_per_sec_median: Some(86_000.0),
            commands_per_sec_min: Some(80_000.0),
            commands_per_sec_max: Some(90_000.0),
            repetitions: 3,
            unstable: false,
            change_vs_first_percent: None,
            emulator: emulator.map(String::from),
            config: Default::default(),
            ttl: None,
            cluster_fixed_cost_bytes: None,
            shards: None,
            by_type: Vec::new(),
            churned_rss: None,
            defragmented_rss: None,
            snapshot_peak: None,
            replica_peak: None,
            eviction: None,
            note: None,
            published_table: None,
            published: None,
        };
        let table = comparison_table(&[row(None), row(Some("qemu-aarch64-static"))]);
        let rate = table
            .headers
            .iter()
            .position(|h| h == "Median members/s")
            .unwrap();
        assert_eq!(table.rows[0][rate], "86k/s");
        assert_eq!(table.rows[1][rate], "86k/s emulated");
        assert_eq!(table.rows[1][rate + 1], "80k/s to 90k/s emulated");
        let note = table.rows[1].last().unwrap();
        assert!(note.contains("under qemu-aarch64-static"), "{note}");
        assert!(table.rows[0].last().unwrap().is_empty());
    }

    #[test]
    fn csv_and_markdown_escape_their_separators() {
        let mut t = Table::new(&["a", "b"]);
        t.push(vec!["x,y".into(), "p|q".into()]);
        assert_eq!(t.to_csv(), "a,b\n\"x,y\",p|q\n");
        assert!(t.to_markdown().contains("p\\|q"));
    }
}
