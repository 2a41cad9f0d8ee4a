//! The Grafana dashboards in `dashboards/` checked against what the operator really exports:
//! their JSON shape, the metric names they query, and every PromQL expression evaluated by a
//! real Prometheus that scrapes a real membench metrics endpoint.
//!
//! The Prometheus test needs the `prometheus` binary (Debian package `prometheus`); set
//! `MEMBENCH_PROMETHEUS` to use another one. Without it the test fails, saying so.

mod observability;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use membench::metrics::{self, Metrics};
use serde_json::Value;

use observability::find_binary;
use observability::prometheus::{
    Prometheus, check_every_dashboard_query, dashboards, panels, series_with_data, variables,
};

/// A metrics registry holding the fixture benchmarks and some operator activity.
fn metrics_with_fixtures() -> Metrics {
    let metrics = Metrics::new();
    for benchmark in observability::fixture_benchmarks() {
        metrics.observe_benchmark(&benchmark);
    }
    drop(metrics.reconcile_started());
    metrics.reconcile_failed("kube");
    metrics
}

/// The names of every sample the operator exports (histograms as their three series).
fn exported_names(metrics: &Metrics) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for family in metrics.registry().gather() {
        let name = family.name().to_string();
        if family.get_field_type() == prometheus::proto::MetricType::HISTOGRAM {
            for suffix in ["_bucket", "_sum", "_count"] {
                names.insert(format!("{name}{suffix}"));
            }
        } else {
            names.insert(name);
        }
    }
    names
}

fn metric_names_in(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let bytes = expr.as_bytes();
    let mut start = 0;
    while let Some(offset) = expr[start..].find("membench_") {
        let begin = start + offset;
        let mut end = begin;
        while end < bytes.len() && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_') {
            end += 1;
        }
        names.insert(expr[begin..end].to_string());
        start = end;
    }
    names
}

/// Every PromQL expression of a dashboard: panel targets and query variables.
fn expressions(dashboard: &Value) -> Vec<String> {
    let mut exprs: Vec<String> = panels(dashboard)
        .iter()
        .flat_map(|panel| panel["targets"].as_array().cloned().unwrap_or_default())
        .map(|target| target["expr"].as_str().unwrap().to_string())
        .collect();
    for variable in variables(dashboard) {
        if variable["type"] == "query" {
            exprs.push(variable["query"].as_str().unwrap().to_string());
        }
    }
    exprs
}

#[test]
fn dashboards_pick_their_prometheus_through_a_datasource_variable() {
    for (file, dashboard) in dashboards() {
        assert!(
            dashboard.get("__inputs").is_none(),
            "{file}: no __inputs, so it works provisioned and imported"
        );
        assert!(dashboard["schemaVersion"].as_u64().unwrap() >= 39, "{file}");
        assert!(
            dashboard["uid"].as_str().unwrap().starts_with("membench-"),
            "{file}"
        );
        let datasource = variables(&dashboard)
            .iter()
            .find(|v| v["name"] == "datasource")
            .unwrap_or_else(|| panic!("{file}: no datasource variable"));
        assert_eq!(datasource["type"], "datasource", "{file}");
        assert_eq!(datasource["query"], "prometheus", "{file}");
        let mut ids = BTreeSet::new();
        for panel in panels(&dashboard) {
            assert!(
                ids.insert(panel["id"].as_u64().unwrap()),
                "{file}: duplicate panel id"
            );
            assert_eq!(
                panel["datasource"]["uid"], "${datasource}",
                "{file}: {}",
                panel["title"]
            );
            for target in panel["targets"].as_array().unwrap() {
                assert_eq!(target["datasource"]["uid"], "${datasource}", "{file}");
            }
        }
    }
}

#[test]
fn the_comparison_dashboard_filters_by_workload_instance_type_engine_and_baseline() {
    let (_, dashboard) = dashboards()
        .into_iter()
        .find(|(file, _)| file == "engine-memory-comparison.json")
        .expect("dashboards/engine-memory-comparison.json");
    let names: Vec<&str> = variables(&dashboard)
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "datasource",
            "workload",
            "instance_type",
            "engine",
            "baseline"
        ]
    );
    let kinds: BTreeSet<&str> = panels(&dashboard)
        .iter()
        .map(|p| p["type"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains("barchart") && kinds.contains("table"),
        "{kinds:?}"
    );
    for expr in expressions(&dashboard) {
        if expr.contains("membench_")
            && !expr.starts_with("label_values(membench_memory_per_item_median_bytes,")
        {
            assert!(
                expr.contains("$workload"),
                "not filtered by workload: {expr}"
            );
        }
    }
}

#[test]
fn every_metric_a_dashboard_queries_is_one_the_operator_exports() {
    let exported = exported_names(&metrics_with_fixtures());
    for (file, dashboard) in dashboards() {
        for expr in expressions(&dashboard) {
            for name in metric_names_in(&expr) {
                assert!(
                    exported.contains(&name),
                    "{file} queries {name}, which membench does not export (it exports {exported:?})"
                );
            }
        }
    }
}

/// Values the test gives the dashboard variables, as Grafana would substitute them.
fn substitute(expr: &str) -> String {
    let replaced = expr
        .replace("$__rate_interval", "1m")
        .replace("$workload", observability::FINISHED_WORKLOAD)
        .replace("$instance_type", ".*")
        .replace("$engine", ".*")
        .replace("$baseline", "redis-7.0.15");
    assert!(
        !replaced.contains('$'),
        "an unknown variable is left in {replaced}"
    );
    replaced
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_query_returns_data_from_a_real_prometheus_scraping_membench() {
    let Some(binary) = find_binary(
        "MEMBENCH_PROMETHEUS",
        "prometheus",
        &["/usr/bin/prometheus"],
    ) else {
        observability::missing(
            "no prometheus binary (install the Debian package `prometheus` or set MEMBENCH_PROMETHEUS)",
        );
    };

    let metrics = metrics_with_fixtures();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let target = listener.local_addr().unwrap().to_string();
    let ready = Arc::new(AtomicBool::new(true));
    let server = tokio::spawn(metrics::serve::serve_on(listener, metrics.clone(), ready));
    // Reconciles keep happening while Prometheus scrapes, so rates and quantiles have data.
    let activity = {
        let metrics = metrics.clone();
        tokio::spawn(async move {
            loop {
                let timer = metrics.reconcile_started();
                tokio::time::sleep(Duration::from_millis(30)).await;
                drop(timer);
                metrics.reconcile_failed("kube");
                tokio::time::sleep(Duration::from_millis(70)).await;
            }
        })
    };

    let prometheus = Prometheus::start(&binary, &target);
    prometheus.wait_ready().await;
    prometheus.wait_scrapes(5).await;

    let checked = check_every_dashboard_query(&prometheus, substitute, 30).await;
    println!("{checked} dashboard queries returned data from Prometheus");

    // Spot-check values against the fixtures, so "has data" also means "the right data".
    let change = prometheus
        .query(&substitute(
            "100 * (membench_memory_per_item_median_bytes{workload=~\"$workload\", entry=\"valkey-9.1.2\"} \
             / on (workload, instance_type) group_left () min by (workload, instance_type) \
             (membench_memory_per_item_median_bytes{workload=~\"$workload\", entry=\"$baseline\"}) - 1)",
        ))
        .await;
    let change = series_with_data(&change)[0].1[0];
    assert!(
        (change - (70.1 / 112.3 - 1.0) * 100.0).abs() < 1e-6,
        "{change}"
    );

    // The reserve panel shows the status's reservePercent as a ratio.
    let reserve = prometheus
        .query(&substitute(
            "membench_recommended_reserve_ratio{workload=~\"$workload\", entry=\"valkey-9.1.2\"}",
        ))
        .await;
    let reserve = series_with_data(&reserve)[0].1[0];
    assert!((reserve - 0.4551).abs() < 1e-9, "{reserve}");

    let checked = rate_columns_show_what_they_are_named_for(&prometheus).await;
    assert!(
        checked >= 5,
        "only {checked} items/s or commands/s columns found"
    );

    activity.abort();
    server.abort();
}

/// Every column a panel names items/s or commands/s (its `organize` rename of `Value #X`) shows
/// that figure of the finished fixture's Valkey, not the other one: the fixture stores four
/// commands per item, so a column that queried the wrong metric reads four times off.
async fn rate_columns_show_what_they_are_named_for(prometheus: &Prometheus) -> usize {
    // Valkey 9.1.2's items/s in the fixture: median, min, max.
    let items = [450_000.0, 440_000.0, 462_000.0];
    let mut checked = 0;
    for (file, dashboard) in dashboards() {
        for panel in panels(&dashboard) {
            let renames: Vec<(String, String)> = panel["transformations"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|t| t["id"] == "organize")
                .flat_map(|t| t["options"]["renameByName"].as_object().cloned())
                .flatten()
                .filter_map(|(field, name)| Some((field, name.as_str()?.to_lowercase())))
                .collect();
            for (field, column) in renames {
                let per_item = if column.contains("items/s") {
                    1.0
                } else if column.contains("commands/s") {
                    observability::FINISHED_COMMANDS_PER_ITEM
                } else {
                    continue;
                };
                let which = if column.contains("min") {
                    1
                } else if column.contains("max") {
                    2
                } else {
                    0
                };
                let ref_id = field
                    .strip_prefix("Value #")
                    .expect("a query's value column");
                let target = panel["targets"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|t| t["refId"] == ref_id)
                    .unwrap_or_else(|| panic!("{file}: no query {ref_id} for {column}"));
                let expr = substitute(target["expr"].as_str().unwrap());
                let data = prometheus.query(&expr).await;
                let valkey: Vec<f64> = series_with_data(&data)
                    .into_iter()
                    .filter(|(labels, _)| {
                        labels.get("entry").map(String::as_str) == Some("valkey-9.1.2")
                    })
                    .flat_map(|(_, values)| values)
                    .collect();
                let expected = items[which] * per_item;
                assert_eq!(
                    valkey,
                    [expected],
                    "{file}, panel {:?}, column {column:?} ({expr}): Valkey's figure",
                    panel["title"]
                );
                checked += 1;
            }
        }
    }
    checked
}
