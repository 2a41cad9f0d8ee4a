//! The dashboards on a benchmark the real operator ran: the operator (in-process, watching a
//! namespace of its own on the dev cluster) measures real Redis 7.4.1 and Valkey 9.1.2 engines
//! that the node agent runs, serves its metrics, a real Prometheus scrapes them, and every query
//! of every dashboard must return data. Deleting the benchmark removes its series.
//!
//! Needs the dev cluster (or `MEMBENCH_TEST_KUBECONFIG`), the engine store's Redis 7.4.1 and
//! Valkey 9.1.2 for the node agent (hack/install-engines.sh), and `prometheus`.

mod observability;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use membench::controller::{self, Scope, Settings};
use membench::crd::{MemoryBenchmark, Phase};
use membench::metrics::{self, Metrics};
use membench_devcluster::DevCluster;
use membench_devcluster::wait::TestNamespace;

use observability::prometheus::{Prometheus, check_every_dashboard_query, series_with_data};
use observability::{find_binary, run_until_finished};

/// The image the node agent runs as the freshly built membench binary.
const CLIENT_IMAGE: &str = "ghcr.io/membench/membench:dev";

const BENCHMARK: &str = "
apiVersion: membench.io/v1alpha1
kind: MemoryBenchmark
metadata:
  name: dashboards
spec:
  instanceType: r7i.4xlarge
  engines:
    # Redis with its bundled jemalloc: Debian's 7.0.15 cannot defragment, which spec.churn's
    # defrag asks of both.
    - engine: redis
      version: 7.4.1
    - engine: valkey
      version: 9.1.2
  # Records stored as four string keys each: items/s is a quarter of commands/s, so a panel
  # showing one for the other reads wrong.
  workload:
    records:
      records: 5000
      layout: strings
  repetitions: 2
  timeoutSeconds: 600
  # The comparison dashboard's capacity panels read what the operator plans at this size.
  capacity:
    items: 1000000
  # Its snapshot, replica, churn and eviction panels read these phases' figures (the replica
  # runs on the pool's other r7i.4xlarge node).
  peak: {snapshot: {writesPerSecond: 2000}, replica: {writesPerSecond: 2000}}
  churn: {rounds: 1, deleteShare: 0.5, defrag: true, defragSeconds: 5}
  eviction: {maxmemory: 4mb, loadTo: 2}
";

async fn install_crd(client: &Client) -> anyhow::Result<()> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../crds/memorybenchmark.yaml");
    let crd: CustomResourceDefinition = serde_saphyr::from_str(&std::fs::read_to_string(path)?)?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.patch(
        &crd.name_any(),
        &PatchParams::apply("membench-tests").force(),
        &Patch::Apply(&crd),
    )
    .await
    .context("the API server accepts crds/memorybenchmark.yaml")?;
    let established = kube::runtime::wait::conditions::is_crd_established();
    tokio::time::timeout(
        Duration::from_secs(30),
        kube::runtime::wait::await_condition(crds, &crd.name_any(), established),
    )
    .await??;
    Ok(())
}

/// Polls an instant query until `done` accepts its series, or fails after `timeout`.
async fn until_query(
    prometheus: &Prometheus,
    expr: &str,
    timeout: Duration,
    done: impl Fn(usize) -> bool,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let series = series_with_data(&prometheus.query(expr).await).len();
        if done(series) {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{expr}: {series} series after {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_panel_shows_a_benchmark_the_operator_ran() -> anyhow::Result<()> {
    let Some(prometheus_bin) = find_binary(
        "MEMBENCH_PROMETHEUS",
        "prometheus",
        &["/usr/bin/prometheus"],
    ) else {
        observability::missing("no prometheus binary (Debian package `prometheus`)");
    };
    let client = DevCluster::ensure().await?;
    install_crd(&client).await?;
    let namespace = TestNamespace::create(&client, "dashboards").await?;

    // The operator, as `membench operator` runs it: metrics served while it reconciles.
    let metrics = Metrics::new();
    let ready = Arc::new(AtomicBool::new(false));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let target = listener.local_addr()?.to_string();
    let server = tokio::spawn(metrics::serve::serve_on(
        listener,
        metrics.clone(),
        ready.clone(),
    ));
    let mut settings = Settings {
        scheduling_timeout: Duration::from_secs(120),
        poll_interval: Duration::from_secs(2),
        ..Settings::default()
    };
    settings.pods.client_image = CLIENT_IMAGE.into();
    let operator = {
        let client = client.clone();
        let scope = Scope::namespace(namespace.name());
        tokio::spawn(async move {
            let never = std::future::pending::<()>();
            if let Err(e) = controller::run(client, scope, settings, metrics, ready, never).await {
                eprintln!("operator stopped: {e:#}");
            }
        })
    };

    let prometheus = Prometheus::start(&prometheus_bin, &target);
    prometheus.wait_ready().await;
    // Scraping before the benchmark starts, so that its every reconcile is seen.
    prometheus.wait_scrapes(3).await;
    let started = Instant::now();

    let benchmarks: Api<MemoryBenchmark> = namespace.api();
    let done = run_until_finished(&benchmarks, BENCHMARK, Duration::from_secs(300)).await?;
    let status = done.status.clone().unwrap();
    assert_eq!(status.phase, Some(Phase::Succeeded), "{status:#?}");

    // Prometheus has scraped the finished results.
    until_query(
        &prometheus,
        "membench_memory_per_item_median_bytes{benchmark=\"dashboards\"}",
        Duration::from_secs(30),
        |series| series == 2,
    )
    .await?;
    // Three scrapes of the finished results, so that rates and range queries see them too.
    until_query(
        &prometheus,
        "count_over_time(membench_memory_per_item_median_bytes{benchmark=\"dashboards\"}[1m]) >= 3",
        Duration::from_secs(30),
        |series| series == 2,
    )
    .await?;
    let workload = status.workload.clone().context("status.workload")?;
    let substitute = |expr: &str| {
        let replaced = expr
            .replace("$__rate_interval", "1m")
            .replace("$workload", &workload)
            .replace("$instance_type", "r7i.4xlarge")
            .replace("$engine", ".*")
            .replace("$baseline", "redis-7.4.1");
        assert!(!replaced.contains('$'), "an unknown variable in {replaced}");
        replaced
    };
    let lookback = started.elapsed().as_secs() + 5;
    let checked = check_every_dashboard_query(&prometheus, substitute, lookback).await;
    println!("{checked} dashboard queries returned data for a benchmark the operator ran");

    // The dashboards show what the status says.
    for engine in &status.engines {
        let median = engine.summary.as_ref().unwrap().bytes_per_item.median;
        let data = prometheus
            .query(&format!(
                "membench_memory_per_item_median_bytes{{benchmark=\"dashboards\", entry=\"{}\"}}",
                engine.name
            ))
            .await;
        let shown = series_with_data(&data)[0].1[0];
        assert!(
            (shown - median).abs() < 1e-9,
            "{}: {shown} vs {median}",
            engine.name
        );
        let summary = engine.summary.as_ref().unwrap();
        for (metric, expected) in [
            ("items", summary.items_per_sec.median),
            ("commands", summary.commands_per_sec.median),
        ] {
            let data = prometheus
                .query(&format!(
                    "membench_load_median_{metric}_per_second{{benchmark=\"dashboards\", entry=\"{}\"}}",
                    engine.name
                ))
                .await;
            let shown = series_with_data(&data)[0].1[0];
            assert!(
                (shown - expected).abs() <= 1e-9 * expected,
                "{} {metric}/s: {shown} vs {expected}",
                engine.name
            );
        }
        assert!(
            (summary.commands_per_sec.median / summary.items_per_sec.median - 4.0).abs() < 1e-6,
            "{}: four SETs a record: {summary:?}",
            engine.name
        );
    }

    // Deleting the benchmark removes its series.
    benchmarks
        .delete("dashboards", &DeleteParams::default())
        .await?;
    until_query(
        &prometheus,
        "membench_memory_per_item_median_bytes{benchmark=\"dashboards\"}",
        Duration::from_secs(60),
        |series| series == 0,
    )
    .await?;

    operator.abort();
    server.abort();
    let _ = namespace.delete().await;
    Ok(())
}
