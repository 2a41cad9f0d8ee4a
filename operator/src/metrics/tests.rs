//! Tests of the metrics registry: the result series a status sets and removes, and the
//! operator health series.

use super::*;
use crate::crd::{
    EngineKind, EngineSpec, EngineStatus, MemoryBenchmarkSpec, MemoryBenchmarkStatus,
    RepetitionStatus, SortedSetWorkload, SpreadStatus, SummaryStatus, WorkloadSpec,
};

pub(super) fn engine_status(
    name: &str,
    engine: &str,
    version: &str,
    bytes: [f64; 3],
) -> EngineStatus {
    let repetition = |bytes_per_item: f64, rss: u64, ratio: f64| RepetitionStatus {
        baseline_used_memory: 900_000,
        used_memory: 900_000 + (bytes_per_item * 1000.0) as u64,
        used_memory_rss: rss,
        items: 1000,
        bytes_per_item,
        // As for records stored as strings: four SETs per item.
        commands_per_sec: 250_000.0,
        items_per_sec: 62_500.0,
        seconds: 0.016,
        settled_bytes_per_item: None,
        baseline_used_memory_rss: None,
        settled_used_memory: None,
        settled_used_memory_rss: None,
        used_memory_dataset: Some(50_000),
        mem_fragmentation_ratio: Some(ratio),
        churn: None,
        eviction: None,
        peak: None,
    };
    EngineStatus {
        name: name.into(),
        engine: engine.into(),
        requested_version: version.into(),
        state: "Succeeded".into(),
        version: Some(version.into()),
        allocator: Some("jemalloc-5.3.0".into()),
        arch: Some("arm64".into()),
        node_name: Some("r8g-a".into()),
        instance_type: Some("r8g.4xlarge".into()),
        image: Some(format!("{engine}:{version}")),
        repetitions: vec![
            repetition(bytes[0], 3_000_000, 1.2),
            repetition(bytes[1], 4_000_000, 1.4),
            repetition(bytes[2], 5_000_000, 1.3),
        ],
        summary: Some(SummaryStatus {
            items: 1000,
            used_memory: 900_000 + (bytes[0] * 1000.0) as u64,
            bytes_per_item: SpreadStatus {
                median: bytes[0],
                min: bytes[1],
                max: bytes[2],
                cv: 0.01,
            },
            commands_per_sec: SpreadStatus {
                median: 250_000.0,
                min: 200_000.0,
                max: 300_000.0,
                cv: 0.1,
            },
            items_per_sec: SpreadStatus {
                median: 62_500.0,
                min: 50_000.0,
                max: 75_000.0,
                cv: 0.1,
            },
            unstable: false,
            bytes_per_key_by_type: Vec::new(),
            peak: None,
        }),
        ..EngineStatus::default()
    }
}

pub(super) fn benchmark(
    namespace: &str,
    name: &str,
    phase: Phase,
    engines: Vec<EngineStatus>,
) -> MemoryBenchmark {
    let mut benchmark = MemoryBenchmark::new(
        name,
        MemoryBenchmarkSpec {
            instance_type: "r8g.4xlarge".into(),
            instance_types: Vec::new(),
            parallelism: 1,
            arch: None,
            engines: vec![EngineSpec::new(EngineKind::Redis, "7.0.15")],
            workload: WorkloadSpec {
                sorted_set: Some(SortedSetWorkload {
                    members: 1000,
                    key: "membench:zset".into(),
                    sample_every: 0,
                    ttl: Default::default(),
                }),
                ..WorkloadSpec::default()
            },
            repetitions: 3,
            pipeline: 100,
            settle_seconds: 0,
            placement: None,
            pod_resources: None,
            timeout_seconds: 600,
            cleanup_policy: Default::default(),
            published_table: None,
            auth: None,
            image_pull_secrets: Vec::new(),
            capacity: None,
            churn: None,
            eviction: None,
            peak: None,
        },
    );
    benchmark.metadata.namespace = Some(namespace.into());
    benchmark.status = Some(MemoryBenchmarkStatus {
        phase: Some(phase),
        workload: Some("sorted-set 1000 members".into()),
        engines,
        ..MemoryBenchmarkStatus::default()
    });
    benchmark
}

/// The value of the one sample of `name` whose labels include all of `labels`.
pub(super) fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter(|line| {
            line.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .find(|line| {
            labels
                .iter()
                .all(|(label, value)| line.contains(&format!("{label}=\"{value}\"")))
        })
        .map(|line| line.rsplit(' ').next().unwrap().parse().unwrap())
}

#[test]
fn observing_a_finished_benchmark_publishes_its_results_per_engine() {
    let metrics = Metrics::new();
    metrics.observe_benchmark(&benchmark(
        "bench",
        "zset",
        Phase::Succeeded,
        vec![
            engine_status("redis-7.0.15", "redis", "7.0.15", [112.5, 110.0, 115.0]),
            engine_status("valkey-9.1.2", "valkey", "9.1.2", [70.25, 70.0, 71.0]),
        ],
    ));
    let text = metrics.encode();
    let redis = [("benchmark", "zset"), ("entry", "redis-7.0.15")];
    let valkey = [
        ("namespace", "bench"),
        ("engine", "valkey"),
        ("version", "9.1.2"),
        ("instance_type", "r8g.4xlarge"),
        ("arch", "arm64"),
        ("workload", "sorted-set 1000 members"),
    ];
    assert_eq!(
        sample(&text, "membench_memory_per_item_median_bytes", &redis),
        Some(112.5)
    );
    assert_eq!(
        sample(&text, "membench_memory_per_item_min_bytes", &redis),
        Some(110.0)
    );
    assert_eq!(
        sample(&text, "membench_memory_per_item_max_bytes", &redis),
        Some(115.0)
    );
    assert_eq!(
        sample(&text, "membench_memory_per_item_median_bytes", &valkey),
        Some(70.25)
    );
    assert_eq!(
        sample(&text, "membench_used_memory_bytes", &valkey),
        Some(970_250.0)
    );
    assert_eq!(
        sample(&text, "membench_used_memory_rss_bytes", &valkey),
        Some(4_000_000.0)
    );
    assert_eq!(
        sample(&text, "membench_used_memory_dataset_bytes", &valkey),
        Some(50_000.0)
    );
    assert_eq!(
        sample(&text, "membench_baseline_used_memory_bytes", &valkey),
        Some(900_000.0)
    );
    assert_eq!(sample(&text, "membench_items", &valkey), Some(1000.0));
    assert_eq!(
        sample(&text, "membench_load_median_items_per_second", &valkey),
        Some(62_500.0)
    );
    assert_eq!(
        sample(&text, "membench_load_min_items_per_second", &valkey),
        Some(50_000.0)
    );
    assert_eq!(
        sample(&text, "membench_load_max_items_per_second", &valkey),
        Some(75_000.0)
    );
    assert_eq!(
        sample(&text, "membench_load_median_commands_per_second", &valkey),
        Some(250_000.0)
    );
    assert_eq!(
        sample(&text, "membench_load_min_commands_per_second", &valkey),
        Some(200_000.0)
    );
    assert_eq!(
        sample(&text, "membench_load_max_commands_per_second", &valkey),
        Some(300_000.0)
    );
    assert_eq!(
        sample(&text, "membench_mem_fragmentation_ratio", &valkey),
        Some(1.3)
    );
    assert_eq!(
        sample(&text, "membench_repetitions_completed", &valkey),
        Some(3.0)
    );
    assert_eq!(
        sample(&text, "membench_result_unstable", &valkey),
        Some(0.0)
    );
    assert_eq!(
        sample(
            &text,
            "membench_engine_info",
            &[
                ("entry", "valkey-9.1.2"),
                ("allocator", "jemalloc-5.3.0"),
                ("image", "valkey:9.1.2")
            ]
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(&text, "membench_benchmarks", &[("phase", "Succeeded")]),
        Some(1.0)
    );
    assert_eq!(
        sample(&text, "membench_benchmarks", &[("phase", "Running")]),
        Some(0.0)
    );
}

#[test]
fn the_info_series_carries_the_modules_the_engine_loaded_as_the_report_shows_them() {
    let metrics = Metrics::new();
    let mut redis = engine_status("redis-8.2.3", "redis", "8.2.3", [60.0, 60.0, 60.0]);
    redis.modules = Some(vec![
        crate::crd::EngineModule {
            name: "graph".into(),
            version: "41603".into(),
        },
        crate::crd::EngineModule {
            name: "vectorset".into(),
            version: "1".into(),
        },
    ]);
    let mut valkey = engine_status("valkey-9.0.0", "valkey", "9.0.0", [60.0, 60.0, 60.0]);
    valkey.modules = Some(vec![]);
    let unreported = engine_status("valkey-8.1.4", "valkey", "8.1.4", [60.0, 60.0, 60.0]);
    metrics.observe_benchmark(&benchmark(
        "bench",
        "zset",
        Phase::Succeeded,
        vec![redis, valkey, unreported],
    ));
    let text = metrics.encode();
    for (entry, modules) in [
        ("redis-8.2.3", "graph 41603, vectorset 1"),
        ("valkey-9.0.0", "none"),
        ("valkey-8.1.4", "not reported"),
    ] {
        assert_eq!(
            sample(
                &text,
                "membench_engine_info",
                &[("entry", entry), ("modules", modules)]
            ),
            Some(1.0),
            "{entry}: {text}"
        );
    }
}

#[test]
fn an_engine_still_running_has_progress_but_no_results_yet() {
    let metrics = Metrics::new();
    let mut running = engine_status("valkey-9.1", "valkey", "9.1", [0.0; 3]);
    running.version = None;
    running.summary = None;
    running.repetitions.truncate(1);
    metrics.observe_benchmark(&benchmark("bench", "zset", Phase::Running, vec![running]));
    let text = metrics.encode();
    let entry = [("entry", "valkey-9.1"), ("version", "9.1")];
    assert_eq!(
        sample(&text, "membench_repetitions_completed", &entry),
        Some(1.0)
    );
    assert_eq!(
        sample(&text, "membench_memory_per_item_median_bytes", &entry),
        None
    );
    assert_eq!(
        sample(&text, "membench_benchmarks", &[("phase", "Running")]),
        Some(1.0)
    );
}

#[test]
fn a_reported_version_replaces_the_requested_one_without_leaving_stale_series() {
    let metrics = Metrics::new();
    let mut running = engine_status("valkey-9.1", "valkey", "9.1", [70.0; 3]);
    running.version = None;
    metrics.observe_benchmark(&benchmark(
        "bench",
        "zset",
        Phase::Running,
        vec![running.clone()],
    ));
    running.version = Some("9.1.2".into());
    metrics.observe_benchmark(&benchmark("bench", "zset", Phase::Succeeded, vec![running]));
    let text = metrics.encode();
    assert_eq!(
        sample(
            &text,
            "membench_repetitions_completed",
            &[("version", "9.1")]
        ),
        None
    );
    assert_eq!(
        sample(&text, "membench_engine_info", &[("version", "9.1")]),
        None
    );
    assert_eq!(
        sample(
            &text,
            "membench_repetitions_completed",
            &[("version", "9.1.2")]
        ),
        Some(3.0)
    );
    assert_eq!(
        sample(&text, "membench_benchmarks", &[("phase", "Running")]),
        Some(0.0)
    );
    assert_eq!(
        sample(&text, "membench_benchmarks", &[("phase", "Succeeded")]),
        Some(1.0)
    );
}

#[test]
fn forgetting_a_benchmark_removes_all_its_series_and_keeps_the_others() {
    let metrics = Metrics::new();
    let engines = || vec![engine_status("redis-7.0.15", "redis", "7.0.15", [112.0; 3])];
    metrics.observe_benchmark(&benchmark("bench", "gone", Phase::Succeeded, engines()));
    metrics.observe_benchmark(&benchmark("bench", "kept", Phase::Failed, engines()));
    metrics.forget_benchmark("bench", "gone");
    let text = metrics.encode();
    assert!(!text.contains("benchmark=\"gone\""), "{text}");
    assert_eq!(
        sample(
            &text,
            "membench_memory_per_item_median_bytes",
            &[("benchmark", "kept")]
        ),
        Some(112.0)
    );
    assert_eq!(
        sample(&text, "membench_benchmarks", &[("phase", "Succeeded")]),
        Some(0.0)
    );
    assert_eq!(
        sample(&text, "membench_benchmarks", &[("phase", "Failed")]),
        Some(1.0)
    );
}

#[test]
fn retaining_the_listed_benchmarks_drops_the_series_of_the_others() {
    let metrics = Metrics::new();
    let engines = || vec![engine_status("redis-7.0.15", "redis", "7.0.15", [112.0; 3])];
    metrics.observe_benchmark(&benchmark("a", "kept", Phase::Succeeded, engines()));
    metrics.observe_benchmark(&benchmark("b", "kept", Phase::Running, engines()));
    metrics.retain_benchmarks([("a", "kept")]);
    let text = metrics.encode();
    assert!(!text.contains("namespace=\"b\""), "{text}");
    assert!(text.contains("namespace=\"a\""), "{text}");
    assert_eq!(
        sample(&text, "membench_benchmarks", &[("phase", "Running")]),
        Some(0.0)
    );
}

#[test]
fn observing_the_listed_statuses_again_rebuilds_the_series_after_a_restart() {
    let finished = benchmark(
        "bench",
        "zset",
        Phase::Succeeded,
        vec![engine_status("redis-7.0.15", "redis", "7.0.15", [112.0; 3])],
    );
    let before = Metrics::new();
    before.observe_benchmark(&finished);
    let after_restart = Metrics::new();
    after_restart.observe_benchmark(&finished);
    after_restart.observe_benchmark(&finished);
    assert_eq!(before.encode(), after_restart.encode());
}

#[test]
fn reconciles_are_counted_timed_and_failures_categorised() {
    let metrics = Metrics::new();
    drop(metrics.reconcile_started());
    drop(metrics.reconcile_started());
    metrics.reconcile_failed("kube");
    let text = metrics.encode();
    assert_eq!(
        sample(&text, "membench_reconciliations_total", &[]),
        Some(2.0)
    );
    assert_eq!(
        sample(&text, "membench_reconcile_duration_seconds_count", &[]),
        Some(2.0)
    );
    assert_eq!(
        sample(
            &text,
            "membench_reconciliation_errors_total",
            &[("category", "kube")]
        ),
        Some(1.0)
    );
}

#[test]
fn every_metric_name_carries_the_prefix_and_a_unit_or_a_known_suffix() {
    let metrics = Metrics::new();
    metrics.observe_benchmark(&benchmark(
        "bench",
        "zset",
        Phase::Succeeded,
        vec![engine_status("redis-7.0.15", "redis", "7.0.15", [112.0; 3])],
    ));
    drop(metrics.reconcile_started());
    metrics.reconcile_failed("kube");
    let families = metrics.registry().gather();
    assert_eq!(families.len(), 23);
    // Counts without a unit: items, repetitions, benchmarks, and the 0/1 and info gauges.
    let unitless = [
        "membench_items",
        "membench_repetitions_completed",
        "membench_benchmarks",
        "membench_result_unstable",
        "membench_engine_info",
        "membench_operator_leader",
    ];
    for family in families {
        let name = family.name();
        assert!(name.starts_with("membench_"), "{name}");
        let counter = family.get_field_type() == prometheus::proto::MetricType::COUNTER;
        assert_eq!(counter, name.ends_with("_total"), "{name}");
        assert!(
            unitless.contains(&name)
                || ["_bytes", "_seconds", "_total", "_ratio", "_per_second"]
                    .iter()
                    .any(|unit| name.ends_with(unit)),
            "{name} has no base unit"
        );
        for metric in family.get_metric() {
            for label in metric.get_label() {
                assert!(
                    INFO_LABELS.contains(&label.name())
                        || ["phase", "category"].contains(&label.name()),
                    "{name} has an unbounded label {}",
                    label.name()
                );
            }
        }
    }
}

#[test]
fn a_capacity_plan_in_status_becomes_capacity_series_and_goes_with_it() {
    let metrics = Metrics::new();
    let mut bench = benchmark(
        "bench",
        "zset",
        Phase::Succeeded,
        vec![engine_status(
            "valkey-9.1.2",
            "valkey",
            "9.1.2",
            [70.25, 70.0, 71.0],
        )],
    );
    let status = bench.status.as_mut().unwrap();
    status.capacity = Some(crate::crd::CapacityStatus {
        items: 50_000_000,
        smallest_instance_type: Some("r8g.large".into()),
        engines: vec![crate::crd::EngineCapacityStatus {
            name: "valkey-9.1.2".into(),
            projected_used_memory: 3_341_540_507,
            required_node_memory: 5_368_709_120,
            fill_percent: Some(31.3),
            monthly_usd: None,
            recommended: Some(crate::crd::RecommendedStatus {
                maxmemory_bytes: 3_342_860_288,
                memory_limit_bytes: 8_000_000_000,
                memory_request_bytes: 4_000_000_000,
                reserve_percent: 58.2,
                ..Default::default()
            }),
            ..Default::default()
        }],
        ..Default::default()
    });
    metrics.observe_benchmark(&bench);
    let text = metrics.encode();
    let valkey = [("entry", "valkey-9.1.2")];
    assert_eq!(
        sample(
            &text,
            "membench_capacity_projected_used_memory_bytes",
            &valkey
        ),
        Some(3_341_540_507.0)
    );
    for (metric, value) in [
        ("membench_recommended_maxmemory_bytes", 3_342_860_288.0),
        ("membench_recommended_memory_limit_bytes", 8_000_000_000.0),
        ("membench_recommended_memory_request_bytes", 4_000_000_000.0),
        ("membench_recommended_reserve_ratio", 58.2 / 100.0),
    ] {
        assert_eq!(sample(&text, metric, &valkey), Some(value), "{metric}");
    }
    assert_eq!(
        sample(
            &text,
            "membench_capacity_required_node_memory_bytes",
            &valkey
        ),
        Some(5_368_709_120.0)
    );
    assert_eq!(
        sample(&text, "membench_capacity_node_fill_ratio", &valkey),
        Some(0.313)
    );
    // No prices: no cost series.
    assert_eq!(
        sample(&text, "membench_capacity_monthly_usd", &valkey),
        None
    );
    bench.status.as_mut().unwrap().capacity = None;
    metrics.observe_benchmark(&bench);
    let text = metrics.encode();
    assert_eq!(
        sample(
            &text,
            "membench_capacity_projected_used_memory_bytes",
            &valkey
        ),
        None
    );
}

#[test]
fn a_rebuilds_bytes_per_key_by_type_is_a_series_per_type_removed_with_the_benchmark() {
    let metrics = Metrics::new();
    let mut engine = engine_status("valkey-9.1.2", "valkey", "9.1.2", [90.0, 89.0, 91.0]);
    let summary = engine.summary.as_mut().unwrap();
    summary.bytes_per_key_by_type = vec![
        crate::crd::TypeBytesStatus {
            key_type: "string".into(),
            keys: 600,
            bytes_per_key: 71.5,
        },
        crate::crd::TypeBytesStatus {
            key_type: "hash".into(),
            keys: 400,
            bytes_per_key: 118.25,
        },
    ];
    metrics.observe_benchmark(&benchmark(
        "bench",
        "rebuild",
        Phase::Succeeded,
        vec![engine],
    ));
    let text = metrics.encode();
    let typed = |key_type| {
        sample(
            &text,
            "membench_memory_per_key_by_type_bytes",
            &[("entry", "valkey-9.1.2"), ("type", key_type)],
        )
    };
    assert_eq!(typed("string"), Some(71.5));
    assert_eq!(typed("hash"), Some(118.25));
    assert_eq!(typed("list"), None);
    metrics.forget_benchmark("bench", "rebuild");
    assert!(
        !metrics
            .encode()
            .contains("membench_memory_per_key_by_type_bytes{"),
        "the series go with the benchmark"
    );
}

#[test]
fn a_churn_in_status_becomes_the_churned_and_defragmented_rss_series() {
    let metrics = Metrics::new();
    let mut engine = engine_status("valkey-9.1.2", "valkey", "9.1.2", [90.0, 89.0, 91.0]);
    let churn = |churned: u64, defragmented: Option<u64>| crate::crd::ChurnStatus {
        rounds: vec![
            crate::crd::ChurnRoundStatus {
                round: 1,
                used_memory_rss: churned + 1_000_000,
                ..Default::default()
            },
            crate::crd::ChurnRoundStatus {
                round: 2,
                used_memory_rss: churned,
                ..Default::default()
            },
        ],
        defrag: defragmented.map(|rss| crate::crd::DefragStatus {
            rss_after: rss,
            ..Default::default()
        }),
    };
    for (repetition, (churned, defragmented)) in engine.repetitions.iter_mut().zip([
        (30_000_000, 20_000_000),
        (32_000_000, 21_000_000),
        (31_000_000, 19_000_000),
    ]) {
        repetition.churn = Some(churn(churned, Some(defragmented)));
    }
    let plain = engine_status("redis-7.0.15", "redis", "7.0.15", [120.0, 119.0, 121.0]);
    metrics.observe_benchmark(&benchmark(
        "bench",
        "churn",
        Phase::Succeeded,
        vec![engine, plain],
    ));
    let text = metrics.encode();
    let valkey = [("entry", "valkey-9.1.2")];
    // The medians over the repetitions: of the last round's RSS, of defragmentation's end.
    assert_eq!(
        sample(&text, "membench_churn_used_memory_rss_bytes", &valkey),
        Some(31_000_000.0)
    );
    assert_eq!(
        sample(&text, "membench_defrag_used_memory_rss_bytes", &valkey),
        Some(20_000_000.0)
    );
    let redis = [("entry", "redis-7.0.15")];
    assert_eq!(
        sample(&text, "membench_churn_used_memory_rss_bytes", &redis),
        None
    );
}

#[test]
fn a_snapshot_in_status_becomes_the_peak_ratio_and_copy_on_write_series() {
    let metrics = Metrics::new();
    let snapshot = |ratio: Option<f64>, cow: Option<u64>| crate::crd::PeakStatus {
        snapshot: Some(crate::crd::SnapshotStatus {
            source: if ratio.is_some() {
                "process-tree"
            } else {
                "engine-only"
            }
            .into(),
            ratio,
            cow_bytes: cow,
            ..Default::default()
        }),
        replica: None,
    };
    // Valkey in a pod: the engine's own figures only, so no ratio and a copy-on-write median.
    let mut valkey = engine_status("valkey-9.1.2", "valkey", "9.1.2", [90.0, 89.0, 91.0]);
    for (repetition, cow) in
        valkey
            .repetitions
            .iter_mut()
            .zip([300_000_000, 340_000_000, 320_000_000])
    {
        repetition.peak = Some(snapshot(None, Some(cow)));
    }
    // Dragonfly measured where its processes are seen: the summary's median is the series,
    // whatever the repetitions listed say; it does not fork.
    let mut dragonfly = engine_status("dragonfly-1.40", "dragonfly", "1.40", [50.0, 49.0, 51.0]);
    for repetition in &mut dragonfly.repetitions {
        repetition.peak = Some(snapshot(Some(1.9), None));
    }
    dragonfly.summary.as_mut().unwrap().peak = Some(crate::crd::PeakSummaryStatus {
        snapshot: Some(crate::crd::PeakRatioStatus {
            ratio: 1.004,
            min: 1.001,
            max: 1.006,
            repetitions: 3,
        }),
        replica: None,
    });
    let plain = engine_status("redis-7.0.15", "redis", "7.0.15", [120.0, 119.0, 121.0]);
    metrics.observe_benchmark(&benchmark(
        "bench",
        "peak",
        Phase::Succeeded,
        vec![valkey, dragonfly, plain],
    ));
    let text = metrics.encode();
    let entry = |name| [("entry", name)];
    assert_eq!(
        sample(&text, "membench_snapshot_cow_bytes", &entry("valkey-9.1.2")),
        Some(320_000_000.0)
    );
    assert_eq!(
        sample(
            &text,
            "membench_snapshot_peak_ratio",
            &entry("valkey-9.1.2")
        ),
        None
    );
    assert_eq!(
        sample(
            &text,
            "membench_snapshot_peak_ratio",
            &entry("dragonfly-1.40")
        ),
        Some(1.004)
    );
    assert_eq!(
        sample(
            &text,
            "membench_snapshot_cow_bytes",
            &entry("dragonfly-1.40")
        ),
        None
    );
    for metric in [
        "membench_snapshot_peak_ratio",
        "membench_snapshot_cow_bytes",
    ] {
        assert_eq!(sample(&text, metric, &entry("redis-7.0.15")), None);
    }
}
