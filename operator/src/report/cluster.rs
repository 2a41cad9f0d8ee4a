//! `membench report`: the comparison table of finished MemoryBenchmarks, read from their status
//! in the cluster, in the same published style as a local run (`table.rs` renders it), and the
//! same figures raw as CSV (`csv.rs`).

use serde::Serialize;

use crate::client::workloads::type_memory::TypeSummary;
use crate::client::workloads::workload::Workload;
use crate::crd::{ConditionReason, EngineState, EngineStatus, MemoryBenchmark, Phase};
use crate::report::csv;
use crate::report::table::{ComparisonRow, OutputFormat, attach_published, comparison_table};

/// One benchmark's comparison.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BenchmarkComparison {
    pub namespace: String,
    pub benchmark: String,
    pub phase: String,
    /// The instance type, or the instance types (`spec.instanceTypes`) joined by ", "; each
    /// row names its own.
    pub instance_type: String,
    pub workload: String,
    pub repetitions: u32,
    pub rows: Vec<ComparisonRow>,
    /// The engines' status the rows were read from, for the CSV's repetition rows.
    #[serde(skip)]
    pub engines: Vec<EngineStatus>,
}

/// The benchmark's phase as its status says it (a newer operator's as it wrote it); a status
/// not yet written is `Pending`.
fn phase_name(phase: Option<&Phase>) -> &str {
    phase.map_or("Pending", Phase::as_str)
}

/// Whether a benchmark has finished (its table will not change any more).
pub fn finished(benchmark: &MemoryBenchmark) -> bool {
    matches!(
        benchmark.status.as_ref().and_then(|s| s.phase.as_ref()),
        Some(Phase::Succeeded | Phase::Failed)
    )
}

/// The comparison of one benchmark, from its status.
pub fn comparison(benchmark: &MemoryBenchmark) -> BenchmarkComparison {
    let status = benchmark.status.clone().unwrap_or_default();
    let workload = Workload::from_spec(&benchmark.spec.workload).ok();
    let kind = workload.as_ref().map_or("", |w| w.kind()).to_string();
    let item = workload
        .as_ref()
        .map_or("item", |w| w.item_noun())
        .to_string();
    let mut rows: Vec<ComparisonRow> = status
        .engines
        .iter()
        .map(|e| {
            let mut row = row(e, &kind, &item, benchmark.spec.repetitions);
            row.ttl = benchmark
                .spec
                .engines
                .iter()
                .find(|entry| entry.display_name() == e.name)
                .and_then(|entry| crate::validation::entry_ttl(&benchmark.spec, entry));
            row
        })
        .collect();
    attach_published(
        &mut rows,
        benchmark.spec.published_table.map(|t| t.table()),
        workload.as_ref(),
    );
    BenchmarkComparison {
        namespace: benchmark.metadata.namespace.clone().unwrap_or_default(),
        benchmark: benchmark.metadata.name.clone().unwrap_or_default(),
        phase: phase_name(status.phase.as_ref()).to_string(),
        instance_type: benchmark.spec.instance_types().join(", "),
        workload: status
            .workload
            .clone()
            .or_else(|| workload.as_ref().map(|w| w.describe()))
            .unwrap_or_default(),
        repetitions: benchmark.spec.repetitions,
        rows,
        engines: status.engines.clone(),
    }
}

fn row(engine: &EngineStatus, kind: &str, item: &str, requested: u32) -> ComparisonRow {
    let summary = engine.summary.as_ref();
    let measured = engine.repetitions.len() as u32;
    let note = match (&engine.state, summary) {
        (EngineState::Succeeded, Some(s)) if s.unstable => Some(format!(
            "repetitions disagree: bytes/item CV {:.1}%, items/s CV {:.1}%",
            s.bytes_per_item.cv * 100.0,
            s.items_per_sec.cv * 100.0
        )),
        (EngineState::Succeeded, _) => None,
        (EngineState::Failed, Some(_)) => Some(format!(
            "{} after {measured} of {requested} repetitions: {}",
            engine
                .reason
                .as_ref()
                .map_or("Failed", ConditionReason::as_str),
            engine.message.clone().unwrap_or_default()
        )),
        (state, _) => Some(format!(
            "{}: {}",
            engine
                .reason
                .as_ref()
                .map_or(state.as_str(), ConditionReason::as_str),
            engine.message.clone().unwrap_or_default()
        )),
    };
    let (churned_rss, defragmented_rss) = crate::crd::ChurnStatus::medians_of(
        engine.repetitions.iter().filter_map(|r| r.churn.as_ref()),
    );
    ComparisonRow {
        name: engine.name.clone(),
        engine: engine.engine.to_string(),
        version: engine
            .version
            .clone()
            .unwrap_or_else(|| engine.requested_version.clone()),
        allocator: engine.allocator.clone().unwrap_or_default(),
        modules: crate::crd::describe_modules(engine.modules.as_deref()),
        config: engine.config.clone(),
        ttl: None,
        cluster_fixed_cost_bytes: None,
        shards: None,
        instance_type: engine.instance_type.clone(),
        workload: kind.to_string(),
        item: item.to_string(),
        used_memory: summary.map(|s| s.used_memory as f64),
        bytes_per_item: summary.map(|s| s.bytes_per_item.median),
        items_per_sec_median: summary.map(|s| s.items_per_sec.median),
        items_per_sec_min: summary.map(|s| s.items_per_sec.min),
        items_per_sec_max: summary.map(|s| s.items_per_sec.max),
        commands_per_sec_median: summary.map(|s| s.commands_per_sec.median),
        commands_per_sec_min: summary.map(|s| s.commands_per_sec.min),
        commands_per_sec_max: summary.map(|s| s.commands_per_sec.max),
        repetitions: measured,
        unstable: summary.is_some_and(|s| s.unstable),
        change_vs_first_percent: engine.change_vs_first_percent,
        emulator: emulator_of(engine.image_id.as_deref()),
        churned_rss,
        defragmented_rss,
        snapshot_peak: crate::report::peak::describe_snapshot(
            &engine
                .repetitions
                .iter()
                .filter_map(|r| r.peak.as_ref()?.snapshot.clone())
                .collect::<Vec<_>>(),
        ),
        replica_peak: crate::report::peak::describe_replica(
            &engine
                .repetitions
                .iter()
                .filter_map(|r| r.peak.as_ref()?.replica.clone())
                .collect::<Vec<_>>(),
        ),
        eviction: engine
            .repetitions
            .iter()
            .find_map(|r| r.eviction.as_ref())
            .map(crate::report::table::describe_eviction),
        by_type: summary
            .map(|s| {
                s.bytes_per_key_by_type
                    .iter()
                    .map(|t| TypeSummary {
                        key_type: t.key_type.clone(),
                        keys: t.keys,
                        bytes_per_key: t.bytes_per_key,
                    })
                    .collect()
            })
            .unwrap_or_default(),
        note,
        published_table: None,
        published: None,
    }
}

/// The emulator an engine ran under, as the dev cluster's node agent records it in the
/// imageID (`local://<server>@<version>?build=<build>&emulator=qemu-aarch64-static`) when an
/// arm64 node runs an arm64 build on an x86 machine. A real node's imageID (a digest) has none.
fn emulator_of(image_id: Option<&str>) -> Option<String> {
    let (_, query) = image_id?.strip_prefix("local://")?.split_once('?')?;
    query
        .split('&')
        .find_map(|pair| pair.strip_prefix("emulator="))
        .map(str::to_string)
}

/// Renders comparisons: a titled table per benchmark (text, Markdown), every figure as one CSV
/// table (`csv.rs`), or JSON.
pub fn render(comparisons: &[BenchmarkComparison], format: OutputFormat) -> String {
    match format {
        OutputFormat::Json => {
            serde_json::to_string_pretty(comparisons).expect("comparisons serialize") + "\n"
        }
        OutputFormat::Csv => {
            let mut out = csv::header();
            for c in comparisons {
                let labels = csv::BenchmarkLabels {
                    benchmark: c.benchmark.clone(),
                    namespace: c.namespace.clone(),
                    instance_type: c.instance_type.clone(),
                };
                let rows = c
                    .engines
                    .iter()
                    .zip(&c.rows)
                    .flat_map(|(engine, row)| csv::rows_of_status(&labels, engine, row))
                    .collect();
                out.push_str(&csv::lines(rows));
            }
            out
        }
        OutputFormat::Table | OutputFormat::Markdown => {
            let mut out = String::new();
            for (i, c) in comparisons.iter().enumerate() {
                if i > 0 {
                    out.push('\n');
                }
                let title = format!(
                    "{}/{} ({}): {} on {}, {} repetitions",
                    c.namespace, c.benchmark, c.phase, c.workload, c.instance_type, c.repetitions
                );
                if format == OutputFormat::Markdown {
                    out.push_str(&format!("### {title}\n\n"));
                } else {
                    out.push_str(&format!("{title}\n\n"));
                }
                out.push_str(&comparison_table(&c.rows).render(format));
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{MemoryBenchmarkStatus, SpreadStatus, SummaryStatus};
    use crate::validation::spec_file::parse_specs;

    fn engine(name: &str, engine: &str, version: &str, median: f64) -> EngineStatus {
        EngineStatus {
            name: name.into(),
            engine: engine.into(),
            requested_version: version.into(),
            state: "Succeeded".into(),
            version: Some(version.into()),
            allocator: Some("jemalloc-5.3.0".into()),
            instance_type: Some("r8g.4xlarge".into()),
            summary: Some(SummaryStatus {
                items: 50_000_000,
                used_memory: (median * 50_000_000.0) as u64,
                bytes_per_item: SpreadStatus {
                    median,
                    min: median,
                    max: median,
                    cv: 0.0,
                },
                commands_per_sec: SpreadStatus {
                    median: 540_000.0,
                    min: 500_000.0,
                    max: 560_000.0,
                    cv: 0.02,
                },
                items_per_sec: SpreadStatus {
                    median: 540_000.0,
                    min: 500_000.0,
                    max: 560_000.0,
                    cv: 0.02,
                },
                unstable: false,
                bytes_per_key_by_type: Vec::new(),
                peak: None,
            }),
            ..Default::default()
        }
    }

    fn benchmark() -> MemoryBenchmark {
        let mut b = parse_specs("apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {name: zset-50m, namespace: bench}\nspec:\n  instanceType: r8g.4xlarge\n  engines: [{engine: redis, version: \"7.0.15\"}, {engine: valkey, version: \"9.1.2\"}]\n  workload: {sortedSet: {members: 50000000}}\n").unwrap().remove(0);
        let mut valkey = engine("valkey-9.1.2", "valkey", "9.1.2", 66.6);
        valkey.change_vs_first_percent = Some(-31.0);
        b.status = Some(MemoryBenchmarkStatus {
            phase: Some(Phase::Succeeded),
            workload: Some("sorted-set 50000000 members".into()),
            engines: vec![engine("redis-7.0.15", "redis", "7.0.15", 96.6), valkey],
            ..Default::default()
        });
        b
    }

    #[test]
    fn the_table_reads_like_the_published_ones() {
        let text = render(&[comparison(&benchmark())], OutputFormat::Table);
        assert!(text.starts_with("bench/zset-50m (Succeeded): sorted-set 50000000 members on r8g.4xlarge, 10 repetitions"), "{text}");
        assert!(text.contains("Bytes per member"), "{text}");
        assert!(
            text.contains("Valkey") && text.contains("~66.6") && text.contains("-31.0%"),
            "{text}"
        );
        assert!(
            text.contains("r8g.4xlarge") && text.contains("540k/s"),
            "{text}"
        );
        assert!(text.contains("4.83 GB"), "{text}");
    }

    /// The same two engines on r8g.4xlarge and on r7i.4xlarge (`spec.instanceTypes`).
    fn two_instance_types() -> MemoryBenchmark {
        let mut b = parse_specs("apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {name: arm-vs-x86, namespace: bench}\nspec:\n  instanceTypes: [r8g.4xlarge, r7i.4xlarge]\n  engines: [{engine: redis, version: \"7.0.15\"}, {engine: valkey, version: \"9.1.2\"}]\n  workload: {sortedSet: {members: 50000000}}\n").unwrap().remove(0);
        let on = |mut e: EngineStatus, t: &str| {
            e.instance_type = Some(t.into());
            e
        };
        b.status = Some(MemoryBenchmarkStatus {
            phase: Some(Phase::Succeeded),
            workload: Some("sorted-set 50000000 members".into()),
            engines: [
                ("redis", 96.6, "r8g.4xlarge"),
                ("valkey", 66.6, "r8g.4xlarge"),
                ("redis", 96.7, "r7i.4xlarge"),
                ("valkey", 66.8, "r7i.4xlarge"),
            ]
            .into_iter()
            .map(|(kind, median, t)| {
                let version = if kind == "redis" { "7.0.15" } else { "9.1.2" };
                on(
                    engine(&format!("{kind}-{version}"), kind, version, median),
                    t,
                )
            })
            .collect(),
            ..Default::default()
        });
        b
    }

    #[test]
    fn every_report_keys_a_result_by_engine_and_instance_type() {
        let comparisons = [comparison(&two_instance_types())];
        assert_eq!(comparisons[0].instance_type, "r8g.4xlarge, r7i.4xlarge");
        let keys: Vec<(String, Option<String>)> = comparisons[0]
            .rows
            .iter()
            .map(|r| (r.name.clone(), r.instance_type.clone()))
            .collect();
        assert_eq!(keys.len(), 4);
        let distinct: std::collections::BTreeSet<_> = keys.iter().collect();
        assert_eq!(distinct.len(), 4, "{keys:?}");

        let text = render(&comparisons, OutputFormat::Table);
        let valkey_lines: Vec<&str> = text.lines().filter(|l| l.contains("Valkey")).collect();
        assert_eq!(valkey_lines.len(), 2, "{text}");
        assert!(
            valkey_lines[0].contains("r8g.4xlarge") && valkey_lines[0].contains("~66.6"),
            "{text}"
        );
        assert!(
            valkey_lines[1].contains("r7i.4xlarge") && valkey_lines[1].contains("~66.8"),
            "{text}"
        );
        let markdown = render(&comparisons, OutputFormat::Markdown);
        assert_eq!(markdown.matches("r7i.4xlarge |").count(), 2, "{markdown}");

        let json: serde_json::Value =
            serde_json::from_str(&render(&comparisons, OutputFormat::Json)).unwrap();
        let rows = json[0]["rows"].as_array().unwrap();
        assert_eq!(rows[3]["instance_type"], "r7i.4xlarge", "{json}");
        assert_eq!(rows[3]["name"], "valkey-9.1.2", "{json}");

        let csv = render(&comparisons, OutputFormat::Csv);
        let column = csv::HEADER
            .iter()
            .position(|h| *h == "instance_type")
            .unwrap();
        let types: Vec<&str> = csv
            .lines()
            .skip(1)
            .map(|l| l.split(',').nth(column).unwrap())
            .collect();
        assert_eq!(
            types,
            ["r8g.4xlarge", "r8g.4xlarge", "r7i.4xlarge", "r7i.4xlarge"],
            "{csv}"
        );

        let section = crate::report::html::section_from_status(&two_instance_types());
        let bars: Vec<&str> = section.bars.iter().map(|b| b.engine.as_str()).collect();
        assert_eq!(
            bars,
            [
                "redis-7.0.15 on r8g.4xlarge",
                "valkey-9.1.2 on r8g.4xlarge",
                "redis-7.0.15 on r7i.4xlarge",
                "valkey-9.1.2 on r7i.4xlarge"
            ]
        );
    }

    #[test]
    fn rates_of_an_engine_the_dev_cluster_emulated_are_marked_as_the_emulators() {
        let mut b = benchmark();
        let engines = &mut b.status.as_mut().unwrap().engines;
        engines[1].image_id = Some(
            "local:///store/valkey-server@9.1.2?build=valkey-9.1.2-upstream-arm64&emulator=qemu-aarch64-static"
                .into(),
        );
        engines[0].image_id = Some("docker.io/library/redis@sha256:0123".into());
        let comparison = comparison(&b);
        assert_eq!(comparison.rows[0].emulator, None);
        assert_eq!(
            comparison.rows[1].emulator.as_deref(),
            Some("qemu-aarch64-static")
        );
        let text = render(&[comparison], OutputFormat::Table);
        let valkey = text.lines().find(|l| l.contains("Valkey")).unwrap();
        assert!(
            valkey.contains("540k/s emulated") && valkey.contains("under qemu-aarch64-static"),
            "{text}"
        );
        let redis = text.lines().find(|l| l.contains("Redis")).unwrap();
        assert!(!redis.contains("emulated"), "{text}");
    }

    #[test]
    fn markdown_csv_and_json_carry_the_same_rows() {
        let comparisons = [comparison(&benchmark())];
        let markdown = render(&comparisons, OutputFormat::Markdown);
        assert!(
            markdown.contains("### bench/zset-50m") && markdown.contains("| Valkey | 9.1.2 |"),
            "{markdown}"
        );
        // One table of raw figures under the documented header, a summary row per engine (the
        // fixture's status holds no repetitions).
        let csv = render(&comparisons, OutputFormat::Csv);
        let lines: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
        assert_eq!(lines[0], csv::HEADER, "{csv}");
        assert_eq!(lines.len(), 3, "{csv}");
        let cell = |line: usize, column: &str| {
            lines[line][csv::HEADER.iter().position(|h| *h == column).unwrap()]
        };
        assert_eq!(cell(2, "benchmark"), "zset-50m");
        assert_eq!(cell(2, "namespace"), "bench");
        assert_eq!(cell(2, "engine"), "valkey");
        assert_eq!(cell(2, "row"), "summary");
        assert_eq!(cell(2, "bytes_per_item"), "66.6");
        assert_eq!(cell(2, "used_memory_bytes"), "3329999999");
        assert_eq!(cell(2, "items_per_sec"), "540000");
        let json: serde_json::Value =
            serde_json::from_str(&render(&comparisons, OutputFormat::Json)).unwrap();
        assert_eq!(json[0]["rows"][1]["bytes_per_item"], 66.6);
    }

    #[test]
    fn records_as_strings_show_records_per_second_beside_commands_per_second() {
        let mut b = parse_specs("apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {name: users, namespace: bench}\nspec:\n  instanceType: r8g.4xlarge\n  engines: [{engine: valkey, version: \"9.1.2\"}]\n  workload: {records: {records: 1000000, layout: strings}}\n").unwrap().remove(0);
        let mut valkey = engine("valkey-9.1.2", "valkey", "9.1.2", 261.7);
        let summary = valkey.summary.as_mut().unwrap();
        summary.items_per_sec = SpreadStatus {
            median: 135_000.0,
            min: 125_000.0,
            max: 140_000.0,
            cv: 0.02,
        };
        b.status = Some(MemoryBenchmarkStatus {
            phase: Some(Phase::Succeeded),
            engines: vec![valkey],
            ..Default::default()
        });
        let table = comparison_table(&comparison(&b).rows);
        let column = |header: &str| {
            let at = table.headers.iter().position(|h| h == header);
            table.rows[0][at.unwrap_or_else(|| panic!("no {header}: {:?}", table.headers))].clone()
        };
        assert_eq!(column("Median records/s"), "135k/s");
        assert_eq!(column("Spread (min-max)"), "125k/s to 140k/s");
        assert_eq!(column("Median commands/s"), "540k/s");
    }

    #[test]
    fn a_failed_engine_says_why_and_how_far_it_got() {
        let mut b = benchmark();
        let status = b.status.as_mut().unwrap();
        status.phase = Some(Phase::Failed);
        let valkey = &mut status.engines[1];
        valkey.state = "Failed".into();
        valkey.reason = Some("EngineOOMKilled".into());
        valkey.message = Some("the engine was OOMKilled".into());
        let c = comparison(&b);
        assert!(
            c.rows[1]
                .note
                .as_deref()
                .unwrap()
                .starts_with("EngineOOMKilled after 0 of 10")
        );
        assert!(finished(&b));
    }
}
