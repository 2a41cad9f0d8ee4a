//! The Grafana dashboards in `dashboards/` checked against what the operator really exports:
//! their JSON shape, the metric names they query, and every PromQL expression evaluated by a
//! real Prometheus that scrapes a real membench metrics endpoint.
//!
//! The Prometheus test needs the `prometheus` binary (Debian package `prometheus`); set
//! `MEMBENCH_PROMETHEUS` to use another one. Without it the test says so and skips.

mod observability;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use membench::metrics::{self, Metrics};
use serde_json::Value;

use observability::{find_binary, http_get, percent_encode};

fn dashboards() -> Vec<(String, Value)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../dashboards");
    let mut found: Vec<_> = std::fs::read_dir(&dir)
        .expect("dashboards/ exists")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    found.sort();
    assert!(found.len() >= 2, "expected the two dashboards in {dir:?}");
    found
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            let json = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{} is not valid JSON: {e}", path.display()));
            (
                path.file_name().unwrap().to_string_lossy().into_owned(),
                json,
            )
        })
        .collect()
}

/// Every panel, rows' nested panels included.
fn panels(dashboard: &Value) -> Vec<&Value> {
    let mut all = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        all.push(panel);
        if let Some(nested) = panel["panels"].as_array() {
            all.extend(nested);
        }
    }
    all
}

fn variables(dashboard: &Value) -> &Vec<Value> {
    dashboard["templating"]["list"].as_array().unwrap()
}

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
        .replace("$workload", observability::SORTED_SET_WORKLOAD)
        .replace("$instance_type", ".*")
        .replace("$engine", ".*")
        .replace("$baseline", "redis-7.0.15");
    assert!(
        !replaced.contains('$'),
        "an unknown variable is left in {replaced}"
    );
    replaced
}

/// `label_values(SELECTOR, LABEL)` as an instant query returning one series per value.
fn label_values_as_query(variable_query: &str) -> String {
    let inner = variable_query
        .strip_prefix("label_values(")
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("only label_values(...) variables are used: {variable_query}"));
    let (selector, label) = inner.rsplit_once(',').unwrap();
    format!("count by ({}) ({})", label.trim(), selector.trim())
}

struct Prometheus {
    child: Child,
    dir: PathBuf,
    addr: String,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Prometheus {
    fn start(binary: &Path, scrape_target: &str) -> Prometheus {
        let dir = std::env::temp_dir().join(format!(
            "membench-prometheus-{}-{}",
            std::process::id(),
            Instant::now().elapsed().as_nanos()
        ));
        std::fs::create_dir_all(dir.join("data")).unwrap();
        // honor_labels as in the chart's ServiceMonitor: the results' own `namespace` label wins.
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: membench\n    honor_labels: true\n    \
             static_configs:\n      - targets: ['{scrape_target}']\n"
        );
        std::fs::write(dir.join("prometheus.yml"), config).unwrap();
        let port = observability::free_port();
        let addr = format!("127.0.0.1:{port}");
        let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
        let child = Command::new(binary)
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("prometheus starts");
        Prometheus { child, dir, addr }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default()
    }

    async fn api(&self, path_and_query: &str) -> Value {
        let (status, body) = http_get(&self.addr, path_and_query).await.unwrap();
        let json: Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("{path_and_query}: HTTP {status}, not JSON ({e}): {body}"));
        assert_eq!(
            json["status"], "success",
            "{path_and_query}: HTTP {status}: {json}"
        );
        json["data"].clone()
    }

    async fn query(&self, expr: &str) -> Value {
        self.api(&format!("/api/v1/query?query={}", percent_encode(expr)))
            .await
    }

    async fn query_range(&self, expr: &str, seconds: u64) -> Value {
        let end = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        self.api(&format!(
            "/api/v1/query_range?query={}&start={}&end={end}&step=1",
            percent_encode(expr),
            end - seconds
        ))
        .await
    }

    async fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok((200, _)) = http_get(&self.addr, "/-/ready").await {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "Prometheus never became ready:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Waits until Prometheus has scraped the target `samples` times.
    async fn wait_scrapes(&self, samples: u64) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let data = self
                .query(
                    "count_over_time(up{job=\"membench\"}[1m]) and on () up{job=\"membench\"} == 1",
                )
                .await;
            let count = data["result"]
                .get(0)
                .and_then(|sample| sample["value"][1].as_str())
                .and_then(|value| value.parse::<f64>().ok())
                .unwrap_or(0.0);
            if count >= samples as f64 {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "Prometheus scraped membench {count} times in 60 s:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// The series of an instant or range query result, with their finite values.
fn series_with_data(data: &Value) -> Vec<(BTreeMap<String, String>, Vec<f64>)> {
    let parse = |v: &Value| v[1].as_str().and_then(|s| s.parse::<f64>().ok());
    data["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|series| {
            let labels = series["metric"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                .collect();
            let values: Vec<f64> = match series.get("values") {
                Some(values) => values
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(parse)
                    .collect(),
                None => parse(&series["value"]).into_iter().collect(),
            };
            let finite: Vec<f64> = values.into_iter().filter(|v: &f64| v.is_finite()).collect();
            (labels, finite)
        })
        .filter(|(_, values)| !values.is_empty())
        .collect()
}

/// Labels a panel needs from its query's result: `{{label}}` in the legend, and the fields a
/// table or bar chart keeps (other than the values).
fn labels_a_panel_reads(panel: &Value, target: &Value) -> BTreeSet<String> {
    let mut labels = BTreeSet::new();
    let legend = target["legendFormat"].as_str().unwrap_or("");
    for part in legend.split("{{").skip(1) {
        labels.insert(part.split("}}").next().unwrap().trim().to_string());
    }
    for transformation in panel["transformations"]
        .as_array()
        .cloned()
        .unwrap_or_default()
    {
        if transformation["id"] == "filterFieldsByName" {
            for name in transformation["options"]["include"]["names"]
                .as_array()
                .unwrap()
            {
                let name = name.as_str().unwrap();
                if !name.starts_with("Value") {
                    labels.insert(name.to_string());
                }
            }
        }
    }
    labels
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_query_returns_data_from_a_real_prometheus_scraping_membench() {
    let Some(binary) = find_binary(
        "MEMBENCH_PROMETHEUS",
        "prometheus",
        &["/usr/bin/prometheus"],
    ) else {
        println!(
            "SKIPPED: no prometheus binary (install the Debian package `prometheus` or set MEMBENCH_PROMETHEUS)"
        );
        return;
    };

    let metrics = metrics_with_fixtures();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let target = listener.local_addr().unwrap().to_string();
    let ready = Arc::new(AtomicBool::new(true));
    let server = tokio::spawn(metrics::serve_on(listener, metrics.clone(), ready));
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

    let mut checked = 0;
    for (file, dashboard) in dashboards() {
        for variable in variables(&dashboard) {
            if variable["type"] != "query" {
                continue;
            }
            let query = substitute(&label_values_as_query(variable["query"].as_str().unwrap()));
            let data = prometheus.query(&query).await;
            assert!(
                !series_with_data(&data).is_empty(),
                "{file}: variable {} has no values: {query}",
                variable["name"]
            );
            checked += 1;
        }
        for panel in panels(&dashboard) {
            let title = panel["title"].as_str().unwrap();
            for target in panel["targets"].as_array().unwrap() {
                let expr = substitute(target["expr"].as_str().unwrap());
                let data = if target["instant"] == true {
                    prometheus.query(&expr).await
                } else {
                    prometheus.query_range(&expr, 30).await
                };
                let series = series_with_data(&data);
                assert!(
                    !series.is_empty(),
                    "{file}: panel '{title}' has no data for {expr}: {data}"
                );
                for label in labels_a_panel_reads(panel, target) {
                    assert!(
                        series.iter().all(|(labels, _)| labels.contains_key(&label)),
                        "{file}: panel '{title}' reads label {label} that {expr} does not return: {data}"
                    );
                }
                checked += 1;
            }
        }
    }
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

    activity.abort();
    server.abort();
}
