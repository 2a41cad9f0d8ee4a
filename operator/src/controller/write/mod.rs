//! The decision carried out: the pods it creates (with the password Secret and the
//! NetworkPolicy they need first), the status by a conditional server-side apply, the events of
//! the change, the result finalizers released and the finished pods deleted.

pub mod engine_password;
pub mod network_policy;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType};
use kube::{Client, Resource, ResourceExt};
use tracing::{info, warn};

use crate::controller::build::pods;
use crate::controller::context::{Context, FIELD_MANAGER};
use crate::controller::decide::events::transitions;
use crate::controller::decide::observation::{Plan, PodRejection};
use crate::controller::error::Error;
use crate::controller::read::Reading;
use crate::crd::{MemoryBenchmark, MemoryBenchmarkStatus};

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

/// Decides and creates until the decision holds: each pod the API server refuses for good goes
/// back into the decision, which fails its engine, so this settles within one pass per engine.
/// The engines' password Secret and the NetworkPolicy exist before the first pod.
pub async fn create_as_decided(reading: &Reading, ctx: &Context) -> Result<Plan, Error> {
    let benchmark = &reading.benchmark;
    let pods_api: Api<Pod> = Api::namespaced(
        ctx.client.clone(),
        &benchmark.namespace().unwrap_or_default(),
    );
    let mut rejected: Vec<PodRejection> = Vec::new();
    loop {
        let plan =
            crate::controller::decide::plan::plan(&reading.observation(&rejected), &ctx.settings);
        // The engines' password exists before the first pod that takes it (unless the spec
        // names its own).
        if !plan.create.is_empty() && benchmark.spec.auth.is_none() {
            engine_password::ensure(&ctx.client, benchmark)
                .await
                .map_err(Error::CreateEnginePassword)?;
        }
        // The benchmark's pods are closed to the rest of the cluster before the first exists.
        if !plan.create.is_empty() && ctx.settings.network_policy.enabled {
            network_policy::ensure(&ctx.client, benchmark, &ctx.settings.network_policy)
                .await
                .map_err(Error::CreateNetworkPolicy)?;
        }
        let refused = create_pods(&pods_api, &plan.create).await?;
        if refused.is_empty() || rejected.len() > benchmark.spec.runs() {
            return Ok(plan);
        }
        rejected.extend(refused);
    }
}

/// Whether a status write landed.
#[derive(Debug, PartialEq, Eq)]
pub enum Written {
    /// The status is in, and the events of its change are published.
    Done,
    /// Written by someone else since it was read (another operator, a reconciliation that
    /// overlapped): decide again from what is there now. Nothing else of the decision may be
    /// carried out: finalizers and pods go only once the status that holds their results is in.
    Conflict,
}

/// Writes the decided status when it differs from the one read, then publishes the events of
/// the change.
pub async fn status(
    benchmark: &MemoryBenchmark,
    status: &MemoryBenchmarkStatus,
    ctx: &Context,
) -> Result<Written, Error> {
    let old = benchmark.status.clone().unwrap_or_default();
    if *status == old {
        return Ok(Written::Done);
    }
    let api: Api<MemoryBenchmark> = Api::namespaced(
        ctx.client.clone(),
        &benchmark.namespace().unwrap_or_default(),
    );
    match write_status(
        &api,
        &benchmark.name_any(),
        benchmark.metadata.resource_version.as_deref(),
        status,
    )
    .await
    {
        Ok(_) => {}
        Err(e) if is_status(&e, |s| s.code == 409) => return Ok(Written::Conflict),
        Err(e) => return Err(Error::WriteStatus(e)),
    }
    let reference = benchmark.object_ref(&());
    for transition in transitions(&old, status) {
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
    Ok(Written::Done)
}

/// What the decision does to pods once its status is in: result finalizers released, pods on
/// nodes that stopped reporting deleted at once, finished pods deleted.
pub async fn pods_after_status(
    benchmark: &MemoryBenchmark,
    plan: &Plan,
    client: &Client,
) -> Result<(), Error> {
    let pods_api: Api<Pod> =
        Api::namespaced(client.clone(), &benchmark.namespace().unwrap_or_default());
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
    Ok(())
}

/// Releases the result finalizers of a benchmark being deleted: its pods go with it (owner
/// references and the garbage collector), and their results have nowhere to go.
pub async fn release_all(
    benchmark: &MemoryBenchmark,
    pods: &[Pod],
    client: &Client,
) -> Result<(), Error> {
    let pods_api: Api<Pod> =
        Api::namespaced(client.clone(), &benchmark.namespace().unwrap_or_default());
    for pod in pods.iter().filter(|p| pods::holds_result(p)) {
        release(&pods_api, &pod.name_any()).await?;
    }
    Ok(())
}

/// Writes a benchmark's status by server-side apply, on condition that the benchmark is still
/// at `resource_version`, the version the status was decided from (an apply patch that names a
/// resourceVersion is a precondition). A benchmark written in between gives a 409 Conflict and
/// keeps its status, so a decision made from an older view never replaces a newer result.
pub async fn write_status(
    api: &Api<MemoryBenchmark>,
    name: &str,
    resource_version: Option<&str>,
    status: &MemoryBenchmarkStatus,
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
pub async fn release(pods_api: &Api<Pod>, name: &str) -> Result<(), Error> {
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
pub async fn release_orphans(client: Client, namespace: String, name: String) {
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
