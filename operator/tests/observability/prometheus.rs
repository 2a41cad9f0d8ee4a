//! A real Prometheus for tests, and the dashboards' queries evaluated through it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub fn dashboards() -> Vec<(String, Value)> {
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
pub fn panels(dashboard: &Value) -> Vec<&Value> {
    let mut all = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        all.push(panel);
        if let Some(nested) = panel["panels"].as_array() {
            all.extend(nested);
        }
    }
    all
}

pub fn variables(dashboard: &Value) -> &Vec<Value> {
    dashboard["templating"]["list"].as_array().unwrap()
}

/// `label_values(SELECTOR, LABEL)` as an instant query returning one series per value.
pub fn label_values_as_query(variable_query: &str) -> String {
    let inner = variable_query
        .strip_prefix("label_values(")
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("only label_values(...) variables are used: {variable_query}"));
    let (selector, label) = inner.rsplit_once(',').unwrap();
    format!("count by ({}) ({})", label.trim(), selector.trim())
}

pub struct Prometheus {
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
    pub fn start(binary: &Path, scrape_target: &str) -> Prometheus {
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
        let port = super::free_port();
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

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default()
    }

    pub async fn api(&self, path_and_query: &str) -> Value {
        let (status, body) = super::http_get(&self.addr, path_and_query).await.unwrap();
        let json: Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("{path_and_query}: HTTP {status}, not JSON ({e}): {body}"));
        assert_eq!(
            json["status"], "success",
            "{path_and_query}: HTTP {status}: {json}"
        );
        json["data"].clone()
    }

    pub async fn query(&self, expr: &str) -> Value {
        self.api(&format!(
            "/api/v1/query?query={}",
            super::percent_encode(expr)
        ))
        .await
    }

    /// A range query over the last `seconds`, one point a second, ending a second from now so
    /// that the newest scrape is always inside the range.
    pub async fn query_range(&self, expr: &str, seconds: u64) -> Value {
        let end = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            + 1;
        self.api(&format!(
            "/api/v1/query_range?query={}&start={}&end={end}&step=1",
            super::percent_encode(expr),
            end - seconds
        ))
        .await
    }

    pub async fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok((200, _)) = super::http_get(&self.addr, "/-/ready").await {
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
    pub async fn wait_scrapes(&self, samples: u64) {
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
pub fn series_with_data(data: &Value) -> Vec<(BTreeMap<String, String>, Vec<f64>)> {
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
pub fn labels_a_panel_reads(panel: &Value, target: &Value) -> BTreeSet<String> {
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

/// Evaluates every variable and panel query of every dashboard through `prometheus`, with the
/// variables replaced by `substitute`, and panics unless each returns data carrying the labels
/// its panel reads. Range queries look back `range_seconds`. Returns how many were checked.
pub async fn check_every_dashboard_query(
    prometheus: &Prometheus,
    substitute: impl Fn(&str) -> String,
    range_seconds: u64,
) -> usize {
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
                    prometheus.query_range(&expr, range_seconds).await
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
    checked
}
