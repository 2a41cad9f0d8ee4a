//! The operator's Prometheus metrics and the small HTTP server that exposes them.
//!
//! Two kinds of series live here:
//!
//! - **Results**, one series per benchmark and engine entry, set from a `MemoryBenchmark`'s
//!   status by [`Metrics::observe_benchmark`] and removed by [`Metrics::forget_benchmark`]. They
//!   are a pure function of the status, so an operator that restarts rebuilds them by observing
//!   every benchmark its watch lists again; nothing is kept only in memory.
//! - **Operator health**: reconciliations, errors by a bounded category, a reconcile duration
//!   histogram and the number of benchmarks in each phase.
//!
//! Names carry their base unit (`_bytes`, `_seconds`, `_total`). Labels are bounded: the result
//! labels come from the benchmark's name and its status, never from measured values.
//!
//! [`serve`] answers `/metrics`, `/healthz` (always 200 while the process runs) and `/readyz`
//! (200 once the operator says it is ready).

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use prometheus::{
    Encoder, GaugeVec, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, IntGaugeVec,
    Opts, Registry, TextEncoder,
};
use tokio::net::TcpListener;

use crate::crd::{EngineStatus, MemoryBenchmark, Phase};

/// The labels of every result series, in this order.
pub const RESULT_LABELS: [&str; 8] = [
    "namespace",
    "benchmark",
    "entry",
    "engine",
    "version",
    "instance_type",
    "arch",
    "workload",
];

/// The result labels plus what the info series carries.
pub const INFO_LABELS: [&str; 10] = [
    "namespace",
    "benchmark",
    "entry",
    "engine",
    "version",
    "instance_type",
    "arch",
    "workload",
    "allocator",
    "image",
];

/// The phases counted by `membench_benchmarks`, always all four so a dashboard shows zeros.
const PHASES: [(Phase, &str); 4] = [
    (Phase::Pending, "Pending"),
    (Phase::Running, "Running"),
    (Phase::Succeeded, "Succeeded"),
    (Phase::Failed, "Failed"),
];

/// Buckets of the reconcile duration: a reconcile is a few API calls, rarely over seconds.
const RECONCILE_BUCKETS: [f64; 10] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0];

/// The operator's metrics. Cheap to clone: every clone shares the same registry and series.
#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    reconciliations: IntCounter,
    reconciliation_errors: IntCounterVec,
    reconcile_duration: Histogram,
    benchmarks: IntGaugeVec,
    results: ResultGauges,
    engine_info: IntGaugeVec,
    leader: IntGauge,
    /// What each benchmark last published, so stale series can be removed.
    published: Arc<Mutex<BTreeMap<BenchmarkKey, Published>>>,
}

/// `(namespace, name)` of a benchmark.
type BenchmarkKey = (String, String);

/// The series one benchmark has set.
#[derive(Default)]
struct Published {
    phase: Option<&'static str>,
    /// Label values of the result series (in `RESULT_LABELS` order).
    results: BTreeSet<Vec<String>>,
    /// Label values of the info series (in `INFO_LABELS` order).
    info: BTreeSet<Vec<String>>,
}

/// One gauge family per result figure, all with `RESULT_LABELS`.
#[derive(Clone)]
struct ResultGauges {
    memory_per_item_median: GaugeVec,
    memory_per_item_min: GaugeVec,
    memory_per_item_max: GaugeVec,
    used_memory: GaugeVec,
    used_memory_rss: GaugeVec,
    used_memory_dataset: GaugeVec,
    baseline_used_memory: GaugeVec,
    items: GaugeVec,
    items_per_second_median: GaugeVec,
    items_per_second_min: GaugeVec,
    items_per_second_max: GaugeVec,
    commands_per_second_median: GaugeVec,
    commands_per_second_min: GaugeVec,
    commands_per_second_max: GaugeVec,
    fragmentation: GaugeVec,
    repetitions_completed: GaugeVec,
    unstable: GaugeVec,
}

impl ResultGauges {
    fn all(&self) -> [&GaugeVec; 17] {
        [
            &self.memory_per_item_median,
            &self.memory_per_item_min,
            &self.memory_per_item_max,
            &self.used_memory,
            &self.used_memory_rss,
            &self.used_memory_dataset,
            &self.baseline_used_memory,
            &self.items,
            &self.items_per_second_median,
            &self.items_per_second_min,
            &self.items_per_second_max,
            &self.commands_per_second_median,
            &self.commands_per_second_min,
            &self.commands_per_second_max,
            &self.fragmentation,
            &self.repetitions_completed,
            &self.unstable,
        ]
    }
}

/// Measures one reconcile: counts it when started, records its duration when dropped.
pub struct ReconcileTimer {
    started: Instant,
    histogram: Histogram,
}

impl Drop for ReconcileTimer {
    fn drop(&mut self) {
        self.histogram.observe(self.started.elapsed().as_secs_f64());
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh registry with every membench metric registered.
    pub fn new() -> Metrics {
        let registry = Registry::new();
        let reconciliations = IntCounter::with_opts(Opts::new(
            "membench_reconciliations_total",
            "Reconciliations of MemoryBenchmarks started.",
        ))
        .expect("valid metric");
        let reconciliation_errors = IntCounterVec::new(
            Opts::new(
                "membench_reconciliation_errors_total",
                "Reconciliations that failed, by error category.",
            ),
            &["category"],
        )
        .expect("valid metric");
        let reconcile_duration = Histogram::with_opts(
            HistogramOpts::new(
                "membench_reconcile_duration_seconds",
                "How long one reconciliation of a MemoryBenchmark took.",
            )
            .buckets(RECONCILE_BUCKETS.to_vec()),
        )
        .expect("valid metric");
        let benchmarks = IntGaugeVec::new(
            Opts::new(
                "membench_benchmarks",
                "MemoryBenchmarks the operator knows, by phase.",
            ),
            &["phase"],
        )
        .expect("valid metric");
        let result = |name: &str, help: &str| {
            GaugeVec::new(Opts::new(name, help), &RESULT_LABELS).expect("valid metric")
        };
        let results = ResultGauges {
            memory_per_item_median: result(
                "membench_memory_per_item_median_bytes",
                "Median over the repetitions of (used_memory after the load - used_memory before) / items.",
            ),
            memory_per_item_min: result(
                "membench_memory_per_item_min_bytes",
                "Lowest bytes per item over the repetitions.",
            ),
            memory_per_item_max: result(
                "membench_memory_per_item_max_bytes",
                "Highest bytes per item over the repetitions.",
            ),
            used_memory: result(
                "membench_used_memory_bytes",
                "Median used_memory right after the load.",
            ),
            used_memory_rss: result(
                "membench_used_memory_rss_bytes",
                "Median used_memory_rss right after the load.",
            ),
            used_memory_dataset: result(
                "membench_used_memory_dataset_bytes",
                "Median used_memory_dataset right after the load, when the engine reports it.",
            ),
            baseline_used_memory: result(
                "membench_baseline_used_memory_bytes",
                "Median used_memory of the empty engine before the load.",
            ),
            items: result(
                "membench_items",
                "Items verified in the engine after each load.",
            ),
            items_per_second_median: result(
                "membench_load_median_items_per_second",
                "Median over the repetitions of items stored per second (items / load seconds).",
            ),
            items_per_second_min: result(
                "membench_load_min_items_per_second",
                "Lowest items stored per second over the repetitions.",
            ),
            items_per_second_max: result(
                "membench_load_max_items_per_second",
                "Highest items stored per second over the repetitions.",
            ),
            commands_per_second_median: result(
                "membench_load_median_commands_per_second",
                "Median over the repetitions of commands sent per second during the load (ZADD, SET or HSET).",
            ),
            commands_per_second_min: result(
                "membench_load_min_commands_per_second",
                "Lowest commands sent per second over the repetitions.",
            ),
            commands_per_second_max: result(
                "membench_load_max_commands_per_second",
                "Highest commands sent per second over the repetitions.",
            ),
            fragmentation: result(
                "membench_mem_fragmentation_ratio",
                "Median mem_fragmentation_ratio (used_memory_rss / used_memory) after the load, when the engine reports it.",
            ),
            repetitions_completed: result(
                "membench_repetitions_completed",
                "Repetitions measured so far for this engine.",
            ),
            unstable: result(
                "membench_result_unstable",
                "1 when the repetitions disagree more than the stability thresholds allow.",
            ),
        };
        let engine_info = IntGaugeVec::new(
            Opts::new(
                "membench_engine_info",
                "Always 1; carries the allocator the engine reported and the image it ran.",
            ),
            &INFO_LABELS,
        )
        .expect("valid metric");

        registry
            .register(Box::new(reconciliations.clone()))
            .expect("unique metric");
        registry
            .register(Box::new(reconciliation_errors.clone()))
            .expect("unique metric");
        registry
            .register(Box::new(reconcile_duration.clone()))
            .expect("unique metric");
        registry
            .register(Box::new(benchmarks.clone()))
            .expect("unique metric");
        for gauge in results.all() {
            registry
                .register(Box::new(gauge.clone()))
                .expect("unique metric");
        }
        registry
            .register(Box::new(engine_info.clone()))
            .expect("unique metric");
        let leader = IntGauge::with_opts(Opts::new(
            "membench_operator_leader",
            "1 while this operator process runs the controller (it holds the leader lease, or runs without leader election), 0 while it stands by.",
        ))
        .expect("valid metric");
        registry
            .register(Box::new(leader.clone()))
            .expect("unique metric");
        for (_, phase) in PHASES {
            benchmarks.with_label_values(&[phase]).set(0);
        }

        Metrics {
            registry,
            reconciliations,
            reconciliation_errors,
            reconcile_duration,
            benchmarks,
            results,
            engine_info,
            leader,
            published: Arc::default(),
        }
    }

    /// Whether this process runs the controller now. A replica that stops leading drops the
    /// result series too: the new leader publishes them.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
        if !leading {
            self.retain_benchmarks(std::iter::empty());
        }
    }

    /// The registry, for callers that add their own collectors.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Counts a reconciliation; its duration is recorded when the returned timer is dropped.
    pub fn reconcile_started(&self) -> ReconcileTimer {
        self.reconciliations.inc();
        ReconcileTimer {
            started: Instant::now(),
            histogram: self.reconcile_duration.clone(),
        }
    }

    /// Counts a failed reconciliation under a bounded error category (the error's metric label).
    pub fn reconcile_failed(&self, category: &'static str) {
        self.reconciliation_errors
            .with_label_values(&[category])
            .inc();
    }

    /// Sets every result series of `benchmark` from its status, and removes the series it set
    /// before that no longer apply (an engine whose reported version replaced the requested
    /// one, say). Idempotent: observing the same status twice changes nothing.
    pub fn observe_benchmark(&self, benchmark: &MemoryBenchmark) {
        let Some(name) = benchmark.metadata.name.clone() else {
            return;
        };
        let namespace = benchmark.metadata.namespace.clone().unwrap_or_default();
        let status = benchmark.status.clone().unwrap_or_default();

        let mut now = Published {
            phase: Some(phase_name(status.phase.unwrap_or(Phase::Pending))),
            ..Published::default()
        };
        let workload = status.workload.clone().unwrap_or_default();
        let mut values: Vec<(Vec<String>, ResultValues)> = Vec::new();
        for engine in &status.engines {
            let labels = vec![
                namespace.clone(),
                name.clone(),
                engine.name.clone(),
                engine.engine.clone(),
                engine
                    .version
                    .clone()
                    .unwrap_or_else(|| engine.requested_version.clone()),
                engine
                    .instance_type
                    .clone()
                    .unwrap_or_else(|| benchmark.spec.instance_type.clone()),
                engine
                    .arch
                    .clone()
                    .or_else(|| benchmark.spec.arch.map(|arch| arch.as_str().to_string()))
                    .unwrap_or_default(),
                workload.clone(),
            ];
            let mut info = labels.clone();
            info.push(engine.allocator.clone().unwrap_or_default());
            info.push(engine.image.clone().unwrap_or_default());
            now.info.insert(info);
            now.results.insert(labels.clone());
            values.push((labels, ResultValues::of(engine)));
        }

        let key = (namespace, name);
        let mut published = self.published.lock().expect("metrics lock");
        if let Some(before) = published.get(&key) {
            self.remove_stale(before, &now);
        }
        for (labels, figures) in &values {
            self.set_results(labels, figures);
        }
        for info in &now.info {
            let info: Vec<&str> = info.iter().map(String::as_str).collect();
            self.engine_info.with_label_values(&info).set(1);
        }
        published.insert(key, now);
        self.count_phases(&published);
    }

    /// Removes every series of a deleted benchmark.
    pub fn forget_benchmark(&self, namespace: &str, name: &str) {
        let mut published = self.published.lock().expect("metrics lock");
        if let Some(before) = published.remove(&(namespace.to_string(), name.to_string())) {
            self.remove_stale(&before, &Published::default());
        }
        self.count_phases(&published);
    }

    /// Removes the series of every benchmark not in `existing` (`(namespace, name)` pairs), for
    /// a caller that holds the full list, such as a reflector's store after a relist: a
    /// benchmark deleted while no reconcile ran for it loses its series here.
    pub fn retain_benchmarks<'a>(&self, existing: impl IntoIterator<Item = (&'a str, &'a str)>) {
        let keep: BTreeSet<(&str, &str)> = existing.into_iter().collect();
        let mut published = self.published.lock().expect("metrics lock");
        let gone: Vec<BenchmarkKey> = published
            .keys()
            .filter(|(namespace, name)| !keep.contains(&(namespace.as_str(), name.as_str())))
            .cloned()
            .collect();
        for key in gone {
            if let Some(before) = published.remove(&key) {
                self.remove_stale(&before, &Published::default());
            }
        }
        self.count_phases(&published);
    }

    /// The metrics in the Prometheus text exposition format.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        TextEncoder::new()
            .encode_utf8(&self.registry.gather(), &mut text)
            .expect("text encoding never fails");
        text
    }

    fn remove_stale(&self, before: &Published, now: &Published) {
        for labels in before.results.difference(&now.results) {
            let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
            for gauge in self.results.all() {
                // Absent when that figure was never known for this engine.
                let _ = gauge.remove_label_values(&labels);
            }
        }
        for info in before.info.difference(&now.info) {
            let info: Vec<&str> = info.iter().map(String::as_str).collect();
            let _ = self.engine_info.remove_label_values(&info);
        }
    }

    fn set_results(&self, labels: &[String], figures: &ResultValues) {
        let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
        let gauges = &self.results;
        let set = |gauge: &GaugeVec, value: Option<f64>| match value {
            Some(value) => gauge.with_label_values(&labels).set(value),
            None => {
                let _ = gauge.remove_label_values(&labels);
            }
        };
        set(&gauges.repetitions_completed, Some(figures.repetitions));
        set(&gauges.memory_per_item_median, figures.memory_per_item[0]);
        set(&gauges.memory_per_item_min, figures.memory_per_item[1]);
        set(&gauges.memory_per_item_max, figures.memory_per_item[2]);
        set(&gauges.items_per_second_median, figures.items_per_second[0]);
        set(&gauges.items_per_second_min, figures.items_per_second[1]);
        set(&gauges.items_per_second_max, figures.items_per_second[2]);
        set(
            &gauges.commands_per_second_median,
            figures.commands_per_second[0],
        );
        set(
            &gauges.commands_per_second_min,
            figures.commands_per_second[1],
        );
        set(
            &gauges.commands_per_second_max,
            figures.commands_per_second[2],
        );
        set(&gauges.used_memory, figures.used_memory);
        set(&gauges.used_memory_rss, figures.used_memory_rss);
        set(&gauges.used_memory_dataset, figures.used_memory_dataset);
        set(&gauges.baseline_used_memory, figures.baseline_used_memory);
        set(&gauges.items, figures.items);
        set(&gauges.fragmentation, figures.fragmentation);
        set(&gauges.unstable, figures.unstable);
    }

    fn count_phases(&self, published: &BTreeMap<BenchmarkKey, Published>) {
        for (_, phase) in PHASES {
            let count = published
                .values()
                .filter(|benchmark| benchmark.phase == Some(phase))
                .count();
            self.benchmarks
                .with_label_values(&[phase])
                .set(count as i64);
        }
    }
}

fn phase_name(phase: Phase) -> &'static str {
    PHASES
        .iter()
        .find(|(candidate, _)| *candidate == phase)
        .map(|(_, name)| *name)
        .expect("every phase is listed")
}

/// The figures of one engine entry; `None` when the status does not have them yet.
struct ResultValues {
    repetitions: f64,
    /// Median, min, max.
    memory_per_item: [Option<f64>; 3],
    /// Median, min, max.
    items_per_second: [Option<f64>; 3],
    /// Median, min, max.
    commands_per_second: [Option<f64>; 3],
    used_memory: Option<f64>,
    used_memory_rss: Option<f64>,
    used_memory_dataset: Option<f64>,
    baseline_used_memory: Option<f64>,
    items: Option<f64>,
    fragmentation: Option<f64>,
    unstable: Option<f64>,
}

impl ResultValues {
    fn of(engine: &EngineStatus) -> ResultValues {
        let repetitions = &engine.repetitions;
        let median_of = |values: Vec<f64>| median(values);
        let summary = engine.summary.as_ref();
        ResultValues {
            repetitions: repetitions.len() as f64,
            memory_per_item: match summary {
                Some(s) => [
                    Some(s.bytes_per_item.median),
                    Some(s.bytes_per_item.min),
                    Some(s.bytes_per_item.max),
                ],
                None => [None; 3],
            },
            items_per_second: match summary {
                Some(s) => [
                    Some(s.items_per_sec.median),
                    Some(s.items_per_sec.min),
                    Some(s.items_per_sec.max),
                ],
                None => [None; 3],
            },
            commands_per_second: match summary {
                Some(s) => [
                    Some(s.commands_per_sec.median),
                    Some(s.commands_per_sec.min),
                    Some(s.commands_per_sec.max),
                ],
                None => [None; 3],
            },
            used_memory: summary.map(|s| s.used_memory as f64),
            items: summary.map(|s| s.items as f64),
            unstable: summary.map(|s| if s.unstable { 1.0 } else { 0.0 }),
            used_memory_rss: median_of(
                repetitions
                    .iter()
                    .map(|r| r.used_memory_rss as f64)
                    .collect(),
            ),
            used_memory_dataset: median_of(
                repetitions
                    .iter()
                    .filter_map(|r| r.used_memory_dataset.map(|d| d as f64))
                    .collect(),
            ),
            baseline_used_memory: median_of(
                repetitions
                    .iter()
                    .map(|r| r.baseline_used_memory as f64)
                    .collect(),
            ),
            fragmentation: median_of(
                repetitions
                    .iter()
                    .filter_map(|r| r.mem_fragmentation_ratio)
                    .collect(),
            ),
        }
    }
}

/// The median of some figures (the mean of the middle two for an even count); `None` for none.
fn median(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    Some(if values.len() % 2 == 0 {
        (values[middle - 1] + values[middle]) / 2.0
    } else {
        values[middle]
    })
}

/// Serves `/metrics`, `/healthz` and `/readyz` on `addr` until the task is dropped or accepting
/// a connection fails.
pub async fn serve(
    addr: SocketAddr,
    metrics: Metrics,
    ready: Arc<AtomicBool>,
) -> std::io::Result<()> {
    let listener = TcpListener::bind(addr).await?;
    serve_on(listener, metrics, ready).await
}

/// Like [`serve`], on a listener the caller already bound (tests bind port 0 and read it back).
pub async fn serve_on(
    listener: TcpListener,
    metrics: Metrics,
    ready: Arc<AtomicBool>,
) -> std::io::Result<()> {
    loop {
        let (stream, _) = listener.accept().await?;
        let metrics = metrics.clone();
        let ready = ready.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let response = respond(&request, &metrics, &ready);
                async move { Ok::<_, Infallible>(response) }
            });
            // A client that hangs up mid-request is not the operator's problem.
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn respond(
    request: &Request<Incoming>,
    metrics: &Metrics,
    ready: &AtomicBool,
) -> Response<Full<Bytes>> {
    let text = |status: StatusCode, body: &'static str| {
        Response::builder()
            .status(status)
            .header("content-type", "text/plain; charset=utf-8")
            .body(Full::new(Bytes::from_static(body.as_bytes())))
            .expect("valid response")
    };
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "only GET\n");
    }
    match request.uri().path() {
        "/metrics" => Response::builder()
            .header("content-type", TextEncoder::new().format_type())
            .body(Full::new(Bytes::from(metrics.encode())))
            .expect("valid response"),
        "/healthz" => text(StatusCode::OK, "ok\n"),
        "/readyz" if ready.load(Ordering::Relaxed) => text(StatusCode::OK, "ready\n"),
        "/readyz" => text(StatusCode::SERVICE_UNAVAILABLE, "not ready\n"),
        _ => text(
            StatusCode::NOT_FOUND,
            "not found: try /metrics, /healthz or /readyz\n",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{
        EngineKind, EngineSpec, EngineStatus, MemoryBenchmarkSpec, MemoryBenchmarkStatus,
        RepetitionStatus, SortedSetWorkload, SpreadStatus, SummaryStatus, WorkloadSpec,
    };

    fn engine_status(name: &str, engine: &str, version: &str, bytes: [f64; 3]) -> EngineStatus {
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
            used_memory_dataset: Some(50_000),
            mem_fragmentation_ratio: Some(ratio),
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
            }),
            ..EngineStatus::default()
        }
    }

    fn benchmark(
        namespace: &str,
        name: &str,
        phase: Phase,
        engines: Vec<EngineStatus>,
    ) -> MemoryBenchmark {
        let mut benchmark = MemoryBenchmark::new(
            name,
            MemoryBenchmarkSpec {
                instance_type: "r8g.4xlarge".into(),
                arch: None,
                engines: vec![EngineSpec::new(EngineKind::Redis, "7.0.15")],
                workload: WorkloadSpec {
                    sorted_set: Some(SortedSetWorkload {
                        members: 1000,
                        key: "membench:zset".into(),
                        sample_every: 0,
                    }),
                    ..WorkloadSpec::default()
                },
                repetitions: 3,
                pipeline: 100,
                settle_seconds: 0,
                placement: None,
                timeout_seconds: 600,
                cleanup_policy: Default::default(),
                published_table: None,
                auth: None,
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
    fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
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

    async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        let status = response.split_whitespace().nth(1).unwrap().parse().unwrap();
        (status, response)
    }

    #[tokio::test]
    async fn the_server_answers_health_always_readiness_once_ready_and_metrics_as_text() {
        let metrics = Metrics::new();
        drop(metrics.reconcile_started());
        let ready = Arc::new(AtomicBool::new(false));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(serve_on(listener, metrics, ready.clone()));

        assert_eq!(get(addr, "/healthz").await.0, 200);
        assert_eq!(get(addr, "/readyz").await.0, 503);
        ready.store(true, Ordering::Relaxed);
        assert_eq!(get(addr, "/readyz").await.0, 200);
        let (status, response) = get(addr, "/metrics").await;
        assert_eq!(status, 200);
        assert!(
            response.contains("content-type: text/plain; version=0.0.4"),
            "{response}"
        );
        assert!(
            response.contains("membench_reconciliations_total 1"),
            "{response}"
        );
        assert_eq!(get(addr, "/elsewhere").await.0, 404);
        server.abort();
    }

    #[test]
    fn median_of_an_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(vec![]), None);
    }
}
