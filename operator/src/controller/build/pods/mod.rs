//! The benchmark's pods, built without any I/O: the engine pod pinned to a node of the
//! requested instance type, the client pod next to it, their names and labels, and which
//! benchmark and engine a pod belongs to. What a pod's status says about it is
//! [`crate::controller::decide::pod_state`]'s, re-exported here.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    EnvVar, EnvVarSource, LocalObjectReference, ObjectFieldSelector, Pod, ResourceRequirements,
    Toleration,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{Resource, ResourceExt};

use super::engine_registry::EngineRegistry;
use super::pod_defaults::{merged_node_selector, merged_tolerations};
use crate::crd::{MemoryBenchmark, PodResourcesSpec, TolerationSpec};

mod client_pod;
mod engine_pod;
#[cfg(test)]
mod operator_defaults_tests;
#[cfg(test)]
mod profile_tests;
#[cfg(test)]
mod rdb_tests;
#[cfg(test)]
pub(crate) mod tests;
mod workload_delivery;

pub use client_pod::{
    client_args, client_pod, client_pod_of_shards, engine_address, plan_of_client_pod,
};
pub use engine_pod::{engine_args, engine_pod, replica_pod, shard_pods};

pub const LABEL_NAME: &str = "app.kubernetes.io/name";
pub const LABEL_INSTANCE: &str = "app.kubernetes.io/instance";
pub const LABEL_COMPONENT: &str = "app.kubernetes.io/component";
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const LABEL_BENCHMARK: &str = "membench.io/benchmark";
pub const LABEL_ENGINE_INDEX: &str = "membench.io/engine-index";
pub const LABEL_CLIENT_ATTEMPT: &str = "membench.io/client-attempt";
/// On the engine pods of a sharded run (`engines[].shards`): which shard, from 0.
pub const LABEL_SHARD: &str = "membench.io/shard";
/// On the replica pod of a run with `spec.peak.replica`: `replica`. The replica is an engine pod
/// (labelled as one, so it keeps a node to itself like every engine) that its run's client
/// never loads and never sits beside; this label is how they tell it from the engine it copies.
pub const LABEL_ROLE: &str = "membench.io/role";
/// [`LABEL_ROLE`]'s value on a replica pod.
pub const ROLE_REPLICA: &str = "replica";
/// On client pods: `<benchmark UID>/<engine index>/<attempt>`, written by the operator when it
/// creates the pod. Only a pod whose name, owner and this annotation all agree is read as a
/// client (see [`owned_by`]).
pub const ANNOTATION_CLIENT_OF: &str = "membench.io/client-of";
/// On engine and client pods, `"true"`: Karpenter neither consolidates nor expires a node
/// while such a pod runs on it (a benchmark's engine and its data would go with the node).
pub const ANNOTATION_DO_NOT_DISRUPT: &str = "karpenter.sh/do-not-disrupt";
/// On engine and client pods, `"false"`: the cluster autoscaler does not scale down a node
/// that runs such a pod.
pub const ANNOTATION_SAFE_TO_EVICT: &str = "cluster-autoscaler.kubernetes.io/safe-to-evict";

pub const APP_NAME: &str = "membench";
pub const MANAGER: &str = "membench-operator";
pub const INSTANCE_TYPE_LABEL: &str = "node.kubernetes.io/instance-type";
pub const ARCH_LABEL: &str = "kubernetes.io/arch";
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// The port every engine listens on inside its pod.
pub const ENGINE_PORT: i32 = 6379;
/// The cluster bus of a cluster-mode engine: its port + 10000, where a sharded run's shards
/// gossip with each other.
pub const CLUSTER_BUS_PORT: i32 = ENGINE_PORT + 10000;
/// Where the client leaves its result (the container's terminationMessagePath).
pub const TERMINATION_MESSAGE_PATH: &str = "/dev/termination-log";
/// The finalizer on every client pod: a client pod that is deleted (by the operator to stop it,
/// by an eviction, by anyone) stays readable, with its result in its terminated status, until
/// the operator has written that result into the benchmark's status and removes it. The Job
/// controller tracks its pods' outcomes the same way (`batch.kubernetes.io/job-tracking`).
pub const RESULT_FINALIZER: &str = "membench.io/client-result";

/// The label selector of every pod the operator manages, for its watch: the reflector never
/// caches the cluster's other pods.
pub fn managed_pods_selector() -> String {
    format!("{LABEL_NAME}={APP_NAME},{LABEL_BENCHMARK}")
}

/// The label selector of one benchmark's pods.
pub fn benchmark_pods_selector(benchmark: &str) -> String {
    format!("{LABEL_NAME}={APP_NAME},{LABEL_BENCHMARK}={benchmark}")
}

/// The role of a pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Component {
    Engine,
    Client,
}

impl Component {
    pub fn as_str(self) -> &'static str {
        match self {
            Component::Engine => "engine",
            Component::Client => "client",
        }
    }
}

/// Settings of the pods that do not come from the spec.
#[derive(Clone, Debug, PartialEq)]
pub struct PodSettings {
    /// The membench image the client pods run (`membench load`).
    pub client_image: String,
    /// CPU of an engine pod (request = limit).
    pub engine_cpu: String,
    /// CPU and memory of a client pod (request = limit; the client's memory does not grow with
    /// the workload).
    pub client_cpu: String,
    pub client_memory: String,
    /// Secrets every engine and client pod pulls its image with
    /// (`--benchmark-image-pull-secrets`), before the spec's own `imagePullSecrets`.
    pub image_pull_secrets: Vec<String>,
    /// Tolerations every engine and client pod gets (`--benchmark-tolerations`), unless the
    /// spec's placement tolerates the same key itself.
    pub tolerations: Vec<TolerationSpec>,
    /// Node labels every engine and client pod requires (`--benchmark-node-selector`), unless
    /// the spec's placement names the same key.
    pub node_selector: BTreeMap<String, String>,
    /// The engine mirror (`--engine-registry`): the official image of an entry without its own
    /// `image` is pulled from it.
    pub engine_registry: Option<EngineRegistry>,
}

impl Default for PodSettings {
    fn default() -> Self {
        Self {
            client_image: default_client_image(),
            engine_cpu: "2".into(),
            client_cpu: "1".into(),
            client_memory: "256Mi".into(),
            image_pull_secrets: Vec::new(),
            tolerations: Vec::new(),
            node_selector: BTreeMap::new(),
            engine_registry: None,
        }
    }
}

/// The membench image of this build's version.
pub fn default_client_image() -> String {
    format!("ghcr.io/membench/membench:{}", env!("CARGO_PKG_VERSION"))
}

/// The variable that holds a pod's own address (the downward API's `status.podIP`): the
/// client's progress endpoint listens on it, and a shard announces it to the others.
pub const POD_IP_ENV: &str = "MEMBENCH_POD_IP";

fn pod_ip_env() -> EnvVar {
    EnvVar {
        name: POD_IP_ENV.into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: "status.podIP".into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// `<benchmark>-<i>-engine`.
pub fn engine_pod_name(benchmark: &str, index: usize) -> String {
    format!("{benchmark}-{index}-engine")
}

/// Shard `shard` of run `index`: [`engine_pod_name`] for shard 0, `<benchmark>-<i>-engine-<s>`
/// for the others (the way client attempts are named), so an unsharded run's one pod and a
/// sharded run's first are found under the same name.
pub fn shard_pod_name(benchmark: &str, index: usize, shard: usize) -> String {
    if shard == 0 {
        engine_pod_name(benchmark, index)
    } else {
        format!("{benchmark}-{index}-engine-{shard}")
    }
}

/// `<benchmark>-<i>-replica`: the replica of run `i`'s engine (`spec.peak.replica`).
pub fn replica_pod_name(benchmark: &str, index: usize) -> String {
    format!("{benchmark}-{index}-replica")
}

/// `<benchmark>-<i>-client` for the first attempt, `<benchmark>-<i>-client-<n>` for retries.
pub fn client_pod_name(benchmark: &str, index: usize, attempt: u32) -> String {
    if attempt <= 1 {
        format!("{benchmark}-{index}-client")
    } else {
        format!("{benchmark}-{index}-client-{attempt}")
    }
}

fn labels(benchmark: &str, index: usize, component: Component) -> BTreeMap<String, String> {
    [
        (LABEL_NAME, APP_NAME.to_string()),
        (LABEL_INSTANCE, benchmark.to_string()),
        (LABEL_COMPONENT, component.as_str().to_string()),
        (LABEL_MANAGED_BY, MANAGER.to_string()),
        (LABEL_BENCHMARK, benchmark.to_string()),
        (LABEL_ENGINE_INDEX, index.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The node labels both pods of run `index` require: the run's instance type, the arch when
/// given, and the operator's and the spec's extra node labels (the spec's win on a key).
fn node_selector(
    benchmark: &MemoryBenchmark,
    index: usize,
    settings: &PodSettings,
) -> BTreeMap<String, String> {
    let spec = &benchmark.spec;
    let mut selector = merged_node_selector(&settings.node_selector, spec.placement.as_ref());
    selector.insert(
        INSTANCE_TYPE_LABEL.to_string(),
        spec.instance_type_of_run(index),
    );
    if let Some(arch) = spec.arch {
        selector.insert(ARCH_LABEL.to_string(), arch.as_str().to_string());
    }
    selector
}

/// The operator's and the spec's tolerations (the spec's win on a key), as the pod API takes
/// them.
fn tolerations(benchmark: &MemoryBenchmark, settings: &PodSettings) -> Option<Vec<Toleration>> {
    let merged = merged_tolerations(&settings.tolerations, benchmark.spec.placement.as_ref());
    (!merged.is_empty()).then(|| merged.iter().map(Toleration::from).collect())
}

/// The CPU of the engine pods and the CPU and memory of the client pod: the spec's
/// `podResources`, else the operator's.
pub fn pod_resources(benchmark: &MemoryBenchmark, settings: &PodSettings) -> PodResourcesSpec {
    benchmark
        .spec
        .pod_resources
        .clone()
        .unwrap_or_else(|| PodResourcesSpec {
            engine_cpu: settings.engine_cpu.clone(),
            client_cpu: settings.client_cpu.clone(),
            client_memory: settings.client_memory.clone(),
        })
}

/// The image an engine entry's pods run: its own, else its official image (from the mirror
/// when the operator has one).
pub fn engine_image(engine: &crate::crd::EngineSpec, settings: &PodSettings) -> String {
    super::engine_registry::engine_image(engine, settings.engine_registry.as_ref())
}

/// What every engine and client pod says to cluster autoscalers: leave its node alone while it
/// runs. A benchmark evicted by a consolidation or a scale-down loses its engine and its data
/// mid-run; the operator would record it (EnginePodLost, EngineEvicted) but not finish it.
fn autoscaler_annotations() -> BTreeMap<String, String> {
    [
        (ANNOTATION_DO_NOT_DISRUPT.to_string(), "true".to_string()),
        (ANNOTATION_SAFE_TO_EVICT.to_string(), "false".to_string()),
    ]
    .into()
}

fn guaranteed(cpu: &str, memory: &str) -> ResourceRequirements {
    let amounts: BTreeMap<String, Quantity> = [
        ("cpu".to_string(), Quantity(cpu.to_string())),
        ("memory".to_string(), Quantity(memory.to_string())),
    ]
    .into();
    ResourceRequirements {
        requests: Some(amounts.clone()),
        limits: Some(amounts),
        ..Default::default()
    }
}

/// The image pull secrets of a benchmark's pods: the operator's, then the spec's, each once.
fn image_pull_secrets(
    benchmark: &MemoryBenchmark,
    settings: &PodSettings,
) -> Option<Vec<LocalObjectReference>> {
    let mut names: Vec<&str> = Vec::new();
    let spec_names = benchmark
        .spec
        .image_pull_secrets
        .iter()
        .map(|s| s.name.as_str());
    for name in settings
        .image_pull_secrets
        .iter()
        .map(String::as_str)
        .chain(spec_names)
    {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    (!names.is_empty()).then(|| {
        names
            .into_iter()
            .map(|name| LocalObjectReference { name: name.into() })
            .collect()
    })
}

/// The metadata of an object the operator makes for a benchmark besides its pods (its
/// NetworkPolicy, its password Secret): named `name`, in the benchmark's namespace, labelled as
/// the benchmark's and managed by membench, owned by the benchmark (the garbage collector
/// deletes it with it).
pub fn benchmark_object_metadata(benchmark: &MemoryBenchmark, name: String) -> ObjectMeta {
    let instance = benchmark.name_any();
    let labels = [
        (LABEL_NAME, APP_NAME),
        (LABEL_INSTANCE, instance.as_str()),
        (LABEL_MANAGED_BY, MANAGER),
        (LABEL_BENCHMARK, instance.as_str()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    ObjectMeta {
        name: Some(name),
        namespace: benchmark.namespace(),
        labels: Some(labels),
        owner_references: benchmark.controller_owner_ref(&()).map(|r| vec![r]),
        ..Default::default()
    }
}

/// A pod's metadata: its name, labels and owner, and the [`autoscaler_annotations`].
fn metadata(
    benchmark: &MemoryBenchmark,
    name: String,
    labels: BTreeMap<String, String>,
) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: benchmark.namespace(),
        labels: Some(labels),
        annotations: Some(autoscaler_annotations()),
        owner_references: benchmark.controller_owner_ref(&()).map(|r| vec![r]),
        ..Default::default()
    }
}

/// Which engine a pod belongs to, from its label.
pub fn engine_index(pod: &Pod) -> Option<usize> {
    pod.labels().get(LABEL_ENGINE_INDEX)?.parse().ok()
}

/// Which shard of its run an engine pod is, from its label; 0 for the one engine of a run that
/// is not sharded.
pub fn shard_index(pod: &Pod) -> usize {
    pod.labels()
        .get(LABEL_SHARD)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// Whether an engine pod is a replica (`spec.peak.replica`), not an engine the client loads.
pub fn is_replica(pod: &Pod) -> bool {
    pod.labels().get(LABEL_ROLE).map(String::as_str) == Some(ROLE_REPLICA)
}

/// Where an engine pod comes in its run's list: the shards in order, the replica last (so the
/// first is always the engine the client runs beside).
pub fn engine_pod_order(pod: &Pod) -> (bool, usize) {
    (is_replica(pod), shard_index(pod))
}

/// Whether a pod is an engine or a client.
pub fn component(pod: &Pod) -> Option<Component> {
    match pod.labels().get(LABEL_COMPONENT)?.as_str() {
        "engine" => Some(Component::Engine),
        "client" => Some(Component::Client),
        _ => None,
    }
}

/// Whether the pod still carries the operator's result finalizer.
pub fn holds_result(pod: &Pod) -> bool {
    pod.finalizers().iter().any(|f| f == RESULT_FINALIZER)
}

/// A client pod's attempt number.
pub fn client_attempt(pod: &Pod) -> Option<u32> {
    pod.labels().get(LABEL_CLIENT_ATTEMPT)?.parse().ok()
}

/// The value of [`ANNOTATION_CLIENT_OF`].
fn client_of(benchmark_uid: &str, index: usize, attempt: u32) -> String {
    format!("{benchmark_uid}/{index}/{attempt}")
}

/// Whether `pod` is one the operator created for `benchmark`: controlled by it (same UID, so a
/// benchmark deleted and created again under the same name does not adopt its predecessor's
/// terminating pods), named as the operator names that engine's pods, and for a client, the
/// operator's annotation naming the same benchmark UID, engine and attempt. Anyone who may
/// create pods in the namespace could copy the labels; a pod that does not agree with itself
/// is not read, so its termination message never reaches the status.
pub fn owned_by(pod: &Pod, benchmark: &MemoryBenchmark) -> bool {
    let Some(uid) = benchmark.uid() else {
        return false;
    };
    let controlled = pod
        .owner_references()
        .iter()
        .any(|r| r.controller == Some(true) && r.uid == uid);
    let Some(index) = engine_index(pod) else {
        return false;
    };
    let benchmark_name = benchmark.name_any();
    controlled
        && match component(pod) {
            Some(Component::Engine) if is_replica(pod) => {
                pod.name_any() == replica_pod_name(&benchmark_name, index)
            }
            Some(Component::Engine) => {
                pod.name_any() == shard_pod_name(&benchmark_name, index, shard_index(pod))
            }
            Some(Component::Client) => client_attempt(pod).is_some_and(|attempt| {
                pod.name_any() == client_pod_name(&benchmark_name, index, attempt)
                    && pod.annotations().get(ANNOTATION_CLIENT_OF)
                        == Some(&client_of(&uid, index, attempt))
            }),
            None => false,
        }
}
