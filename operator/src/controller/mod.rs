//! The operator: a kube-rs controller that turns each `MemoryBenchmark` into measurements on
//! the requested hardware, one engine at a time, with the results in the status.
//!
//! Each reconciliation reads the benchmark afresh from the API server (never the cache, which
//! may lag behind the operator's own last write), lists its pods, reads the progress of the
//! engine under load, and hands them (with the other benchmarks in the controller's cache, for
//! the queue on a node pool) to the pure [`plan::plan`], which decides the new status and which
//! pods to create and delete. This module only carries that decision out: pods are created
//! first, then the status is written (server-side apply, only when it changed, on condition
//! that the benchmark is still at the version read: a status that changed in between is read
//! again, never overwritten), then events are published, client pods' result finalizers
//! released, and finished pods deleted. A pod the API server refuses (admission or validation)
//! goes back into the plan as a [`observation::PodRejection`], which fails its engine at
//! once; only transient API errors are retried. `pods` builds the pods (their Pod Security
//! settings in `pod_security`); `crate::validation` checks the spec. [`leader`] lets one of
//! several operator replicas run the controller; `running` runs it (its scope, the election).
//!
//! It may use the parts below it (`report`, `metrics`, `validation`, `client`, `auth`, `crd`
//! and the leaves); never the local runner, its peer (docs/src/contributing/architecture.md, `layout_tests.rs`).

mod capacity_prices;
mod client_lifecycle;
mod cluster_cost;
pub mod conditions;
mod container_reading;
pub mod engine_password;
pub mod engine_registry;
pub mod events;
#[cfg(test)]
mod fault_tests;
#[cfg(test)]
mod hostile_input_tests;
pub mod leader;
mod lifecycle;
pub mod network_policy;
#[cfg(test)]
mod never_stuck_tests;
pub mod nodes;
pub mod observation;
#[cfg(test)]
mod operator_settings_tests;
#[cfg(test)]
mod parallel_tests;
pub mod plan;
pub mod pod_defaults;
pub mod pod_fit;
pub mod pod_security;
pub mod pod_state;
pub mod pods;
pub mod policy;
pub mod profile_config_map;
pub mod progress;
pub mod pull_failure;
pub mod queue;
mod replica_pods;
#[cfg(test)]
mod replica_tests;
pub mod results;
mod running;
#[cfg(test)]
mod served_result_tests;
mod shards;
#[cfg(test)]
mod shards_tests;
pub mod spec_error;
mod step;
pub mod summary;
#[cfg(test)]
mod test_fixtures;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
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

use self::container_reading::MarkAnswer;
use self::events::transitions;
pub use self::observation::Settings;
use self::observation::{Observation, PodRejection};
use self::plan::probe_target;
use self::progress::ProgressReadings;
pub use self::running::{Election, Scope, run, run_elected};

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
    #[error("cannot read the benchmark: {0}")]
    ReadBenchmark(#[source] kube::Error),
    #[error("cannot release the result finalizer of pod {name}: {source}")]
    ReleasePod {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot create the benchmark's NetworkPolicy: {0}")]
    CreateNetworkPolicy(#[source] network_policy::EnsureError),
    #[error("cannot create the benchmark's engine password Secret: {0}")]
    CreateEnginePassword(#[source] engine_password::EnsureError),
    #[error("cannot read the profile's ConfigMap: {0}")]
    ReadProfile(#[source] kube::Error),
}

impl Error {
    /// A short, bounded category for metric labels.
    pub fn category(&self) -> &'static str {
        match self {
            Error::ListPods(_) => "ListPods",
            Error::CreatePod { .. } => "CreatePod",
            Error::DeletePod { .. } => "DeletePod",
            Error::WriteStatus(_) => "WriteStatus",
            Error::ReadBenchmark(_) => "ReadBenchmark",
            Error::ReleasePod { .. } => "ReleasePod",
            Error::ReadProfile(_) => "ReadProfile",
            Error::CreateNetworkPolicy(_) => "CreateNetworkPolicy",
            Error::CreateEnginePassword(_) => "CreateEnginePassword",
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
#[instrument(skip_all, fields(benchmark = %cached.name_any(), namespace = %cached.namespace().unwrap_or_default()))]
pub async fn reconcile(cached: Arc<MemoryBenchmark>, ctx: Arc<Context>) -> Result<Action, Error> {
    let _timer = ctx.metrics.reconcile_started();
    let namespace = cached.namespace().unwrap_or_default();
    let name = cached.name_any();
    let api: Api<MemoryBenchmark> = Api::namespaced(ctx.client.clone(), &namespace);
    let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
    // The cache may hold a version older than the operator's own last write (a watch that lags,
    // a restart): deciding from it could undo a result. A read is cheap next to that.
    let Some(benchmark) = api.get_opt(&name).await.map_err(Error::ReadBenchmark)? else {
        return Ok(Action::await_change());
    };
    // A profile from a ConfigMap is decided from inline, like any other spec.
    let benchmark = profile_config_map::resolve(&ctx.client, benchmark)
        .await
        .map_err(Error::ReadProfile)?;
    let pods = pods_api
        .list(&ListParams::default().labels(&pods::benchmark_pods_selector(&name)))
        .await
        .map_err(Error::ListPods)?
        .items;
    if benchmark.metadata.deletion_timestamp.is_some() {
        // Its pods go with it (owner references and the garbage collector); their results
        // have nowhere to go, so nothing holds them back.
        for pod in pods.iter().filter(|p| pods::holds_result(p)) {
            release(&pods_api, &pod.name_any()).await?;
        }
        return Ok(Action::await_change());
    }
    let target = probe_target(&benchmark, &pods);
    let mut load = match &target {
        Some(target) => ctx.readings.read(&namespace, &name, target.clone()).await,
        None => None,
    };
    // A client waiting on a peak phase's mark gets the engine container's memory; until the
    // kubelet's reading is newer than the mark, the benchmark is looked at again in a second.
    // The clients of runs in parallel are read for their marks only.
    let mut mark_waits = false;
    if let (Some(target), Some(mark)) = (&target, load.and_then(|l| l.mark)) {
        match container_reading::answer(&ctx.client, target, mark).await {
            MarkAnswer::Answered => {
                ctx.readings.forget(&namespace, &name);
                if let Some(load) = &mut load {
                    load.mark = None;
                }
            }
            MarkAnswer::NotYet => mark_waits = true,
        }
    }
    for other in plan::other_clients_under_way(&benchmark, &pods) {
        let mark = crate::client::progress_endpoint::fetch_mark(other.address, MARK_READ_TIMEOUT);
        if let Some(mark) = mark.await
            && container_reading::answer(&ctx.client, &other, mark).await == MarkAnswer::NotYet
        {
            mark_waits = true;
        }
    }
    let now = Timestamp::now();
    let served = read_served_results(&benchmark, &pods, load, now, &ctx.settings).await;
    let others: Vec<Arc<MemoryBenchmark>> = ctx.benchmarks.iter().flat_map(Store::state).collect();
    let prices = capacity_prices::read(&ctx.client, &namespace, &benchmark).await;
    let nodes = nodes::read_before_first_pod(&ctx.client, &benchmark, &pods).await;
    let mut rejected: Vec<PodRejection> = Vec::new();
    // Each refusal fails an engine, so the plan settles within one pass per engine.
    let plan = loop {
        let observation = Observation {
            benchmark: &benchmark,
            pods: &pods,
            now,
            load,
            rejected: &rejected,
            served: &served,
            others: &others,
            prices: prices.as_ref(),
            nodes: &nodes,
        };
        let plan = plan::plan(&observation, &ctx.settings);
        // The engines' password exists before the first pod that takes it (unless the spec
        // names its own).
        if !plan.create.is_empty() && benchmark.spec.auth.is_none() {
            engine_password::ensure(&ctx.client, &benchmark)
                .await
                .map_err(Error::CreateEnginePassword)?;
        }
        // The benchmark's pods are closed to the rest of the cluster before the first exists.
        if !plan.create.is_empty() && ctx.settings.network_policy.enabled {
            network_policy::ensure(&ctx.client, &benchmark, &ctx.settings.network_policy)
                .await
                .map_err(Error::CreateNetworkPolicy)?;
        }
        let refused = create_pods(&pods_api, &plan.create).await?;
        if refused.is_empty() || rejected.len() > benchmark.spec.runs() {
            break plan;
        }
        rejected.extend(refused);
    };

    let old = benchmark.status.clone().unwrap_or_default();
    if plan.status != old {
        match write_status(
            &api,
            &name,
            benchmark.metadata.resource_version.as_deref(),
            &plan.status,
        )
        .await
        {
            Ok(_) => {}
            // Written by someone else since it was read (another operator, a reconciliation
            // that overlapped): decide again from what is there now. Nothing below may run:
            // finalizers and pods go only once the status that holds their results is in.
            Err(e) if is_status(&e, |s| s.code == 409) => {
                info!("the benchmark changed since it was read; reading it again");
                return Ok(Action::requeue(Duration::from_millis(500)));
            }
            Err(e) => return Err(Error::WriteStatus(e)),
        }
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
                note: Some(crate::text::head(&transition.note, 1000)),
                action: "Benchmark".into(),
                secondary: None,
            };
            if let Err(e) = ctx.recorder.publish(&event, &reference).await {
                warn!(error = %e, "cannot publish an event");
            }
        }
    }

    for pod_name in &plan.release {
        release(&pods_api, pod_name).await?;
    }
    for pod_name in &plan.force_delete {
        let now_please = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::background()
        };
        delete_pod(&pods_api, pod_name, &now_please).await?;
        warn!(pod = %pod_name, "its node stopped reporting: deleted it without waiting for a kubelet");
    }
    for pod_name in &plan.delete {
        delete_pod(&pods_api, pod_name, &DeleteParams::background()).await?;
    }

    let mut observed = benchmark.clone();
    observed.status = Some(plan.status);
    ctx.metrics.observe_benchmark(&observed);
    let requeue = match plan.requeue {
        Some(after) if mark_waits => Some(after.min(Duration::from_secs(1))),
        other => other,
    };
    Ok(requeue.map_or_else(Action::await_change, Action::requeue))
}

/// How long reading the progress of a client in parallel (for its marks) may take.
const MARK_READ_TIMEOUT: Duration = Duration::from_secs(2);

/// How long reading a client's whole result may take.
const RESULT_READ_TIMEOUT: Duration = Duration::from_secs(3);

/// Reads the whole result of each client [`plan::result_targets`] names (a client that said
/// done, one on a node that stopped reporting), each bounded in time and bytes and held to the
/// bounds of a result; one that does not answer is `NoResult`, and the termination message
/// stays the fallback.
async fn read_served_results(
    benchmark: &MemoryBenchmark,
    pods: &[Pod],
    load: Option<observation::LoadProbe>,
    now: Timestamp,
    settings: &Settings,
) -> Vec<observation::ServedResult> {
    let mut served = Vec::new();
    for (pod, target) in plan::result_targets(benchmark, pods, load, now, settings) {
        let body =
            crate::client::progress_endpoint::fetch_result(target.address, RESULT_READ_TIMEOUT)
                .await;
        let result = match body {
            Some(body) => {
                crate::client::result::ClientResult::read_whole(&body, benchmark.spec.repetitions)
            }
            None => Err(crate::client::result::ReadError::NoResult(format!(
                "the client pod {pod} did not serve a result at {}",
                target.address
            ))),
        };
        if let Err(e) = &result {
            info!(pod = %pod, "no whole result from the client: {e}");
        }
        served.push(observation::ServedResult { pod, result });
    }
    served
}

/// Writes a benchmark's status by server-side apply, on condition that the benchmark is still
/// at `resource_version`, the version the status was decided from (an apply patch that names a
/// resourceVersion is a precondition). A benchmark written in between gives a 409 Conflict and
/// keeps its status, so a decision made from an older view never replaces a newer result.
pub async fn write_status(
    api: &Api<MemoryBenchmark>,
    name: &str,
    resource_version: Option<&str>,
    status: &crate::crd::MemoryBenchmarkStatus,
) -> Result<MemoryBenchmark, kube::Error> {
    let mut patch = serde_json::json!({
        "apiVersion": MemoryBenchmark::api_version(&()),
        "kind": MemoryBenchmark::kind(&()),
        "status": status,
    });
    if let Some(version) = resource_version {
        patch["metadata"] = serde_json::json!({ "resourceVersion": version });
    }
    api.patch_status(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
}

/// Takes the result finalizer off a client pod (its result is in the status, or has no home);
/// a pod already gone is fine.
async fn release(pods_api: &Api<Pod>, name: &str) -> Result<(), Error> {
    let patch = serde_json::json!({
        "metadata": { "$deleteFromPrimitiveList/finalizers": [pods::RESULT_FINALIZER] }
    });
    match pods_api
        .patch(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if is_status(&e, kube::core::Status::is_not_found) => Ok(()),
        Err(source) => Err(Error::ReleasePod {
            name: name.to_string(),
            source,
        }),
    }
}

async fn delete_pod(pods_api: &Api<Pod>, name: &str, params: &DeleteParams) -> Result<(), Error> {
    match pods_api.delete(name, params).await {
        Ok(_) => {
            info!(pod = %name, "deleting pod");
            Ok(())
        }
        Err(e) if is_status(&e, kube::core::Status::is_not_found) => Ok(()),
        Err(source) => Err(Error::DeletePod {
            name: name.to_string(),
            source,
        }),
    }
}

/// Releases the client pods of a benchmark that is gone (deleted while the operator watched, or
/// while it was down): their results have no home, and the garbage collector is deleting them.
/// A benchmark created again under the same name keeps its own pods.
async fn release_orphans(client: Client, namespace: String, name: String) {
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let benchmarks: Api<MemoryBenchmark> = Api::namespaced(client, &namespace);
    let current = match benchmarks.get_opt(&name).await {
        Ok(current) => current,
        Err(e) => {
            warn!(error = %e, benchmark = %name, "cannot read the benchmark to release its pods");
            return;
        }
    };
    let selector = pods::benchmark_pods_selector(&name);
    let listed = match pods_api
        .list(&ListParams::default().labels(&selector))
        .await
    {
        Ok(list) => list.items,
        Err(e) => {
            warn!(error = %e, benchmark = %name, "cannot list the pods of a deleted benchmark");
            return;
        }
    };
    for pod in listed.iter().filter(|p| pods::holds_result(p)) {
        if current.as_ref().is_some_and(|b| pods::owned_by(pod, b)) {
            continue;
        }
        if let Err(e) = release(&pods_api, &pod.name_any()).await {
            warn!(error = %e, "cannot release a pod of a deleted benchmark");
        }
    }
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

/// After a failed reconciliation: count it and try again shortly (API errors are transient;
/// an invalid spec is not an error but a Failed status that waits for a change).
pub fn error_policy(benchmark: Arc<MemoryBenchmark>, error: &Error, ctx: Arc<Context>) -> Action {
    warn!(benchmark = %benchmark.name_any(), category = error.category(), "reconciliation failed: {error}");
    ctx.metrics.reconcile_failed(error.category());
    Action::requeue(Duration::from_secs(5))
}
