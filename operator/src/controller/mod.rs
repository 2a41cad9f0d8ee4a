//! The operator: a kube-rs controller that turns each `MemoryBenchmark` into measurements on
//! the requested hardware, one engine at a time, with the results in the status.
//!
//! Each reconciliation lists the benchmark's pods, reads the progress of the engine under
//! load, and hands both (with the other benchmarks in the controller's cache, for the queue on
//! a node pool) to the pure [`plan::plan`], which decides the new status and which pods to
//! create and delete. This module only carries that decision out: pods are created first, then
//! the status is written (server-side apply, only when it changed), then events are published
//! and finished pods deleted. A pod the API server refuses (admission or validation) goes back
//! into the plan as a [`plan::PodRejection`], which fails its engine at once; only transient
//! API errors are retried. `pods` builds the pods (their Pod Security settings in
//! `pod_security`); `crate::validation` checks the spec.

pub mod conditions;
pub mod events;
#[cfg(test)]
mod hostile_input_tests;
mod lifecycle;
pub mod network_policy;
#[cfg(test)]
mod never_stuck_tests;
pub mod plan;
pub mod pod_security;
pub mod pod_state;
pub mod pods;
pub mod policy;
pub mod progress;
pub mod queue;
pub mod results;
pub mod summary;
#[cfg(test)]
mod test_fixtures;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use tracing::{info, instrument, warn};

use crate::crd::MemoryBenchmark;
use crate::metrics::Metrics;

use self::events::transitions;
pub use self::plan::Settings;
use self::plan::{Observation, PodRejection, probe_target};
use self::progress::ProgressReadings;

/// The field manager of everything the operator writes.
pub const FIELD_MANAGER: &str = "membench-operator";

/// What every reconciliation shares.
pub struct Context {
    pub client: Client,
    pub recorder: Recorder,
    pub settings: Settings,
    /// Reconciliations, errors and results (`/metrics`).
    pub metrics: Metrics,
    readings: ProgressReadings,
    /// The benchmarks the controllers watch (their caches, one per watched namespace or one
    /// for all), for the queue on a node pool.
    benchmarks: Vec<Store<MemoryBenchmark>>,
}

impl Context {
    pub fn new(
        client: Client,
        settings: Settings,
        metrics: Metrics,
        benchmarks: Vec<Store<MemoryBenchmark>>,
    ) -> Self {
        let reporter = Reporter {
            controller: FIELD_MANAGER.into(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            settings,
            metrics,
            readings: ProgressReadings::default(),
            benchmarks,
        }
    }
}

/// What can go wrong in a reconciliation: only API calls (the decision itself cannot fail).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot list the benchmark's pods: {0}")]
    ListPods(#[source] kube::Error),
    #[error("cannot create pod {name}: {source}")]
    CreatePod {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot delete pod {name}: {source}")]
    DeletePod {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot write the status: {0}")]
    WriteStatus(#[source] kube::Error),
    #[error("cannot create the benchmark's NetworkPolicy: {0}")]
    CreateNetworkPolicy(#[source] kube::Error),
}

impl Error {
    /// A short, bounded category for metric labels.
    pub fn category(&self) -> &'static str {
        match self {
            Error::ListPods(_) => "ListPods",
            Error::CreatePod { .. } => "CreatePod",
            Error::DeletePod { .. } => "DeletePod",
            Error::WriteStatus(_) => "WriteStatus",
            Error::CreateNetworkPolicy(_) => "CreateNetworkPolicy",
        }
    }
}

fn is_status(e: &kube::Error, check: fn(&kube::core::Status) -> bool) -> bool {
    matches!(e, kube::Error::Api(status) if check(status))
}

/// The API server's message when it refused a pod for good: admission (Pod Security, a
/// ResourceQuota, a LimitRange, a webhook or policy that denied it) or the pod API's own
/// validation. `None` for what may pass on a retry: server errors and timeouts (a webhook that
/// cannot be reached), conflicts, throttling, the operator's own missing permissions (fixed by
/// whoever installed it), and a namespace being deleted (the benchmark goes with it).
pub fn rejection_message(e: &kube::Error) -> Option<String> {
    let kube::Error::Api(status) = e else {
        return None;
    };
    let refused = matches!(status.code, 400 | 403 | 422);
    let operator_not_allowed = status.message.contains(" cannot create resource ");
    let namespace_going = status.message.contains("because it is being terminated");
    (refused && !operator_not_allowed && !namespace_going).then(|| status.message.clone())
}

/// One reconciliation of one benchmark.
#[instrument(skip_all, fields(benchmark = %benchmark.name_any(), namespace = %benchmark.namespace().unwrap_or_default()))]
pub async fn reconcile(
    benchmark: Arc<MemoryBenchmark>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    let _timer = ctx.metrics.reconcile_started();
    if benchmark.metadata.deletion_timestamp.is_some() {
        // Its pods go with it (owner references and the garbage collector).
        return Ok(Action::await_change());
    }
    let namespace = benchmark.namespace().unwrap_or_default();
    let name = benchmark.name_any();
    let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
    let pods = pods_api
        .list(&ListParams::default().labels(&pods::benchmark_pods_selector(&name)))
        .await
        .map_err(Error::ListPods)?
        .items;
    let load = match probe_target(&benchmark, &pods) {
        Some(target) => ctx.readings.read(&namespace, &name, target).await,
        None => None,
    };
    let others: Vec<Arc<MemoryBenchmark>> = ctx.benchmarks.iter().flat_map(Store::state).collect();
    let now = Timestamp::now();
    let mut rejected: Vec<PodRejection> = Vec::new();
    // Each refusal fails an engine, so the plan settles within one pass per engine.
    let plan = loop {
        let observation = Observation {
            benchmark: &benchmark,
            pods: &pods,
            now,
            load,
            rejected: &rejected,
            others: &others,
        };
        let plan = plan::plan(&observation, &ctx.settings);
        // The benchmark's pods are closed to the rest of the cluster before the first exists.
        if !plan.create.is_empty() && ctx.settings.network_policy.enabled {
            network_policy::ensure(&ctx.client, &benchmark, &ctx.settings.network_policy)
                .await
                .map_err(Error::CreateNetworkPolicy)?;
        }
        let refused = create_pods(&pods_api, &plan.create).await?;
        if refused.is_empty() || rejected.len() > benchmark.spec.engines.len() {
            break plan;
        }
        rejected.extend(refused);
    };

    let old = benchmark.status.clone().unwrap_or_default();
    if plan.status != old {
        let api: Api<MemoryBenchmark> = Api::namespaced(ctx.client.clone(), &namespace);
        // The resourceVersion the plan was made from is a precondition: a reconciliation that
        // worked from a cached benchmark older than the last status write (a pod event can
        // arrive before the watch event of that write) fails with a conflict and is retried,
        // instead of overwriting a finished engine with what the stale status implied (seen
        // under 200 benchmarks at once as EnginePodLost after success).
        let patch = serde_json::json!({
            "apiVersion": MemoryBenchmark::api_version(&()),
            "kind": MemoryBenchmark::kind(&()),
            "metadata": {"resourceVersion": benchmark.resource_version()},
            "status": plan.status,
        });
        api.patch_status(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await
        .map_err(Error::WriteStatus)?;
        let reference = benchmark.object_ref(&());
        for transition in transitions(&old, &plan.status) {
            info!(reason = %transition.reason, "{}", transition.note);
            let event = Event {
                type_: if transition.warning {
                    EventType::Warning
                } else {
                    EventType::Normal
                },
                reason: transition.reason,
                note: Some(shorten(&transition.note, 1000)),
                action: "Benchmark".into(),
                secondary: None,
            };
            if let Err(e) = ctx.recorder.publish(&event, &reference).await {
                warn!(error = %e, "cannot publish an event");
            }
        }
    }

    for pod_name in &plan.delete {
        match pods_api.delete(pod_name, &DeleteParams::background()).await {
            Ok(_) => info!(pod = %pod_name, "deleting pod"),
            Err(e) if is_status(&e, kube::core::Status::is_not_found) => {}
            Err(source) => {
                return Err(Error::DeletePod {
                    name: pod_name.clone(),
                    source,
                });
            }
        }
    }

    let mut observed = (*benchmark).clone();
    observed.status = Some(plan.status);
    ctx.metrics.observe_benchmark(&observed);
    Ok(plan
        .requeue
        .map_or_else(Action::await_change, Action::requeue))
}

/// Creates the plan's pods; returns those the API server refused for good.
async fn create_pods(pods_api: &Api<Pod>, pods: &[Pod]) -> Result<Vec<PodRejection>, Error> {
    let mut refused = Vec::new();
    for pod in pods {
        let pod_name = pod.name_any();
        match pods_api.create(&PostParams::default(), pod).await {
            Ok(_) => info!(pod = %pod_name, "created pod"),
            // Created by a reconciliation whose status write did not land; it is ours.
            Err(e) if is_status(&e, kube::core::Status::is_already_exists) => {}
            Err(e) => match rejection_message(&e) {
                Some(message) => {
                    warn!(pod = %pod_name, "the API server rejected the pod: {message}");
                    refused.push(PodRejection {
                        pod: pod_name,
                        message,
                    });
                }
                None => {
                    return Err(Error::CreatePod {
                        name: pod_name,
                        source: e,
                    });
                }
            },
        }
    }
    Ok(refused)
}

fn shorten(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// After a failed reconciliation: count it and try again shortly (API errors are transient;
/// an invalid spec is not an error but a Failed status that waits for a change).
pub fn error_policy(benchmark: Arc<MemoryBenchmark>, error: &Error, ctx: Arc<Context>) -> Action {
    warn!(benchmark = %benchmark.name_any(), category = error.category(), "reconciliation failed: {error}");
    ctx.metrics.reconcile_failed(error.category());
    Action::requeue(Duration::from_secs(5))
}

/// Where the operator watches.
#[derive(Clone, Debug, Default)]
pub struct Scope {
    /// The namespaces to watch; every namespace when empty.
    pub namespaces: Vec<String>,
}

impl Scope {
    /// One namespace.
    pub fn namespace(namespace: &str) -> Self {
        Self {
            namespaces: vec![namespace.to_string()],
        }
    }

    /// The benchmark and pod APIs to watch: one pair per namespace, or one for all.
    fn apis(&self, client: &Client) -> Vec<(Api<MemoryBenchmark>, Api<Pod>)> {
        if self.namespaces.is_empty() {
            return vec![(Api::all(client.clone()), Api::all(client.clone()))];
        }
        self.namespaces
            .iter()
            .map(|ns| {
                (
                    Api::namespaced(client.clone(), ns),
                    Api::namespaced(client.clone(), ns),
                )
            })
            .collect()
    }
}

/// Runs the controller until the process is asked to stop (SIGTERM, Ctrl-C) or `shutdown`
/// resolves. `ready` turns true once the MemoryBenchmark API answers. With several namespaces
/// in `scope`, one controller watches each (namespaced watches need no cluster-wide rights) and
/// they share one context, so the queue on a node pool sees the benchmarks of all of them.
pub async fn run(
    client: Client,
    scope: Scope,
    settings: Settings,
    metrics: Metrics,
    ready: Arc<AtomicBool>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> anyhow::Result<()> {
    use futures::FutureExt;
    let apis = scope.apis(&client);
    for (benchmarks, _) in &apis {
        benchmarks
            .list(&ListParams::default().limit(1))
            .await
            .map_err(|e| {
                anyhow::anyhow!(
                    "the MemoryBenchmark API does not answer ({e}); is the CRD installed (kubectl apply -f crds/), and may the operator list MemoryBenchmarks there?"
                )
            })?;
    }
    ready.store(true, Ordering::SeqCst);
    let controllers: Vec<_> = apis
        .iter()
        .map(|(benchmarks, pods)| {
            let controller = Controller::new(
                benchmarks.clone(),
                watcher::Config::default().any_semantic(),
            );
            let controller = controller.owns(
                pods.clone(),
                watcher::Config::default().labels(&pods::managed_pods_selector()),
            );
            (controller.store(), controller)
        })
        .collect();
    let stores = controllers.iter().map(|(store, _)| store.clone()).collect();
    let ctx = Arc::new(Context::new(client, settings, metrics.clone(), stores));
    info!(
        namespaces = if scope.namespaces.is_empty() {
            "(all)".to_string()
        } else {
            scope.namespaces.join(",")
        },
        "operator started"
    );
    // A deleted benchmark whose pods are already gone triggers no reconcile, so its series
    // are dropped by comparing the published ones with the listed benchmarks now and then.
    let pruning = tokio::spawn(prune_deleted_benchmarks(
        apis.iter()
            .map(|(benchmarks, _)| benchmarks.clone())
            .collect(),
        metrics.clone(),
    ));
    let shutdown = shutdown.shared();
    let runs = controllers.into_iter().map(|(_, controller)| {
        controller
            .graceful_shutdown_on(shutdown.clone())
            .run(reconcile, error_policy, ctx.clone())
            .boxed()
    });
    futures::stream::select_all(runs)
        .for_each(|result| {
            match result {
                Ok((object, _)) => tracing::debug!(benchmark = %object.name, "reconciled"),
                Err(kube::runtime::controller::Error::ObjectNotFound(object)) => {
                    // Deleted: its series and readings go with it.
                    let namespace = object.namespace.clone().unwrap_or_default();
                    metrics.forget_benchmark(&namespace, &object.name);
                    ctx.readings.forget(&namespace, &object.name);
                }
                Err(e) => tracing::debug!(error = %e, "controller"),
            }
            std::future::ready(())
        })
        .await;
    pruning.abort();
    ready.store(false, Ordering::SeqCst);
    Ok(())
}

/// How often series of deleted benchmarks are looked for.
const PRUNE_INTERVAL: Duration = Duration::from_secs(15);

/// Forgets the series of benchmarks that no longer exist. A list every few seconds is cheap
/// and needs nothing from the controller's cache, so it works however the benchmark went away.
async fn prune_deleted_benchmarks(apis: Vec<Api<MemoryBenchmark>>, metrics: Metrics) {
    let mut ticks = tokio::time::interval(PRUNE_INTERVAL);
    'ticks: loop {
        ticks.tick().await;
        // Every watched namespace is listed before anything is dropped: a series is kept unless
        // the complete listing lacks its benchmark.
        let mut listed = Vec::new();
        for api in &apis {
            match api.list_metadata(&ListParams::default()).await {
                Ok(list) => listed.extend(list.items),
                Err(e) => {
                    warn!(error = %e, "cannot list benchmarks to drop the series of deleted ones");
                    continue 'ticks;
                }
            }
        }
        metrics.retain_benchmarks(listed.iter().map(|b| {
            (
                b.metadata.namespace.as_deref().unwrap_or_default(),
                b.metadata.name.as_deref().unwrap_or_default(),
            )
        }));
    }
}
