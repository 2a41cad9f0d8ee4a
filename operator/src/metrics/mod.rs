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
//! [`serve::serve`] answers `/metrics`, `/healthz` (always 200 while the process runs) and
//! `/readyz` (200 once the operator says it is ready).
//!
//! It may use only `crd` and the leaves: the controller feeds it statuses (docs/src/contributing/architecture.md,
//! `layout_tests.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use prometheus::core::Collector;
use prometheus::proto::MetricType;
use prometheus::{
    Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
    TextEncoder,
};

use crate::crd::{MemoryBenchmark, Phase};

#[cfg(test)]
mod replica_tests;
mod results;
pub mod serve;
#[cfg(test)]
mod tests;

pub use results::RESULT_LABELS;
use results::{ResultGauges, ResultValues};

/// The result labels followed by `extra`, as an array of `N` (the lengths added up).
const fn result_labels_and<const N: usize>(extra: &[&'static str]) -> [&'static str; N] {
    let mut labels = [""; N];
    let mut i = 0;
    while i < RESULT_LABELS.len() {
        labels[i] = RESULT_LABELS[i];
        i += 1;
    }
    let mut j = 0;
    while j < extra.len() {
        labels[i + j] = extra[j];
        j += 1;
    }
    labels
}

/// The result labels plus what the info series carries.
/// `modules` is what the report shows beside the allocator (`vectorset 1`, `graph 41603,
/// vectorset 1`, `none`; `not reported` when the engine did not say): a dashboard can tell a figure
/// from an image that loads modules from one that loads none.
pub const INFO_LABELS: [&str; 11] = result_labels_and(&["allocator", "image", "modules"]);

/// The result labels plus the key type, for a profile rebuild's bytes per key by type.
pub const TYPE_LABELS: [&str; 9] = result_labels_and(&["type"]);

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
    bytes_per_key_by_type: prometheus::GaugeVec,
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
    /// Label values of the by-type series (in `TYPE_LABELS` order).
    by_type: BTreeSet<Vec<String>>,
}

/// One metric as a scraper sees it: its name, type, help and label names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetricDescription {
    pub name: String,
    /// `counter`, `gauge` or `histogram`.
    pub kind: &'static str,
    pub help: String,
    pub labels: Vec<String>,
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
        let results = ResultGauges::new();
        let engine_info = IntGaugeVec::new(
            Opts::new(
                "membench_engine_info",
                "Always 1; carries the allocator and the modules the engine reported and the image it ran.",
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
        let bytes_per_key_by_type = prometheus::GaugeVec::new(
            Opts::new(
                "membench_memory_per_key_by_type_bytes",
                "A profile's rebuild, loaded type by type: median over the repetitions of the used_memory a type's keys added over their number (their entries in the key tables included).",
            ),
            &TYPE_LABELS,
        )
        .expect("valid metric");
        registry
            .register(Box::new(bytes_per_key_by_type.clone()))
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
            bytes_per_key_by_type,
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

    /// Every metric this registry can expose, with its type, help and labels, whether or not
    /// it has a series yet (the registry's own `gather` leaves out vectors without one): what
    /// the metrics reference page lists.
    pub fn descriptions(&self) -> Vec<MetricDescription> {
        let mut collectors: Vec<&dyn Collector> = vec![
            &self.reconciliations,
            &self.reconciliation_errors,
            &self.reconcile_duration,
            &self.benchmarks,
            &self.engine_info,
            &self.bytes_per_key_by_type,
            &self.leader,
        ];
        collectors.extend(self.results.all().into_iter().map(|g| g as &dyn Collector));
        let mut descriptions: Vec<MetricDescription> = collectors
            .into_iter()
            .flat_map(|collector| {
                let kinds: Vec<MetricType> = collector
                    .collect()
                    .iter()
                    .map(|f| f.get_field_type())
                    .collect();
                collector
                    .desc()
                    .into_iter()
                    .zip(kinds)
                    .map(|(desc, kind)| MetricDescription {
                        name: desc.fq_name.clone(),
                        kind: match kind {
                            MetricType::COUNTER => "counter",
                            MetricType::GAUGE => "gauge",
                            MetricType::HISTOGRAM => "histogram",
                            MetricType::SUMMARY => "summary",
                            MetricType::UNTYPED => "untyped",
                        },
                        help: desc.help.clone(),
                        labels: desc.variable_labels.clone(),
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        descriptions.sort_by(|a, b| a.name.cmp(&b.name));
        descriptions
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
        let mut by_type: Vec<(Vec<String>, f64)> = Vec::new();
        for engine in &status.engines {
            let labels = vec![
                namespace.clone(),
                name.clone(),
                engine.name.clone(),
                engine.engine.to_string(),
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
            // Prometheus drops an empty label: an engine that did not say is `not reported`.
            info.push(match engine.modules.as_deref() {
                None => "not reported".to_string(),
                modules => crate::crd::describe_modules(modules),
            });
            now.info.insert(info);
            now.results.insert(labels.clone());
            for t in engine.summary.iter().flat_map(|s| &s.bytes_per_key_by_type) {
                let mut typed = labels.clone();
                typed.push(t.key_type.clone());
                now.by_type.insert(typed.clone());
                by_type.push((typed, t.bytes_per_key));
            }
            let capacity = status
                .capacity
                .as_ref()
                .and_then(|c| c.engines.iter().find(|e| e.name == engine.name));
            values.push((labels, ResultValues::of(engine, capacity)));
        }

        let key = (namespace, name);
        let mut published = self.published.lock().expect("metrics lock");
        if let Some(before) = published.get(&key) {
            self.remove_stale(before, &now);
        }
        for (labels, figures) in &values {
            self.results.set(labels, figures);
        }
        for info in &now.info {
            let info: Vec<&str> = info.iter().map(String::as_str).collect();
            self.engine_info.with_label_values(&info).set(1);
        }
        for (labels, bytes) in &by_type {
            let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
            self.bytes_per_key_by_type
                .with_label_values(&labels)
                .set(*bytes);
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
        for typed in before.by_type.difference(&now.by_type) {
            let typed: Vec<&str> = typed.iter().map(String::as_str).collect();
            let _ = self.bytes_per_key_by_type.remove_label_values(&typed);
        }
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
