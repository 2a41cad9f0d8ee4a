//! The benchmark's pods, built without any I/O: the engine pod pinned to a node of the
//! requested instance type, the client pod next to it, their names and labels, and which
//! benchmark and engine a pod belongs to. What a pod's status says about it is
//! [`super::pod_state`]'s, re-exported here.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerPort, EnvVar, EnvVarSource, NodeSelectorRequirement,
    NodeSelectorTerm, ObjectFieldSelector, Pod, PodAffinity, PodAffinityTerm, PodSpec,
    PreferredSchedulingTerm, Probe, ResourceRequirements, TCPSocketAction, Toleration,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{Resource, ResourceExt};

use crate::crd::{EngineKind, EngineSpec, MemoryBenchmark, PlacementSpec, RecordLayout};
use crate::workload::Workload;

use crate::progress_endpoint::PROGRESS_PORT;
use crate::validation::mebibytes;

use super::pod_security::{
    ENGINE_DATA_DIR, client_pod_security_context, engine_data_mount, engine_data_volume,
    engine_pod_security_context, restricted_container,
};
pub use super::pod_state::{
    PodState, client_state, condition_since, disruption, has_started, image_id, node_name, pod_ip,
    pod_state, scheduled_at, stuck_deleting,
};

pub const LABEL_NAME: &str = "app.kubernetes.io/name";
pub const LABEL_INSTANCE: &str = "app.kubernetes.io/instance";
pub const LABEL_COMPONENT: &str = "app.kubernetes.io/component";
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const LABEL_BENCHMARK: &str = "membench.io/benchmark";
pub const LABEL_ENGINE_INDEX: &str = "membench.io/engine-index";
pub const LABEL_CLIENT_ATTEMPT: &str = "membench.io/client-attempt";
/// On client pods: `<benchmark UID>/<engine index>/<attempt>`, written by the operator when it
/// creates the pod. Only a pod whose name, owner and this annotation all agree is read as a
/// client (see [`owned_by`]).
pub const ANNOTATION_CLIENT_OF: &str = "membench.io/client-of";

pub const APP_NAME: &str = "membench";
pub const MANAGER: &str = "membench-operator";
pub const INSTANCE_TYPE_LABEL: &str = "node.kubernetes.io/instance-type";
pub const ARCH_LABEL: &str = "kubernetes.io/arch";
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// The port every engine listens on inside its pod.
pub const ENGINE_PORT: i32 = 6379;
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
}

impl Default for PodSettings {
    fn default() -> Self {
        Self {
            client_image: default_client_image(),
            engine_cpu: "2".into(),
            client_cpu: "1".into(),
            client_memory: "256Mi".into(),
        }
    }
}

/// The membench image of this build's version.
pub fn default_client_image() -> String {
    format!("ghcr.io/membench/membench:{}", env!("CARGO_PKG_VERSION"))
}

/// `<benchmark>-<i>-engine`.
pub fn engine_pod_name(benchmark: &str, index: usize) -> String {
    format!("{benchmark}-{index}-engine")
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

/// The node labels both pods require: the instance type, the arch when given, and the spec's
/// extra node selector.
fn node_selector(benchmark: &MemoryBenchmark) -> BTreeMap<String, String> {
    let spec = &benchmark.spec;
    let mut selector = BTreeMap::new();
    if let Some(placement) = &spec.placement {
        selector.extend(placement.node_selector.clone());
    }
    selector.insert(INSTANCE_TYPE_LABEL.to_string(), spec.instance_type.clone());
    if let Some(arch) = spec.arch {
        selector.insert(ARCH_LABEL.to_string(), arch.as_str().to_string());
    }
    selector
}

/// The spec's tolerations, as the pod API takes them.
fn tolerations(placement: &PlacementSpec) -> Option<Vec<Toleration>> {
    (!placement.tolerations.is_empty())
        .then(|| placement.tolerations.iter().map(Toleration::from).collect())
}

/// The arguments an engine starts with: port 6379, persistence off, reachable over the pod
/// network, then the spec's own (which can override any of these).
pub fn engine_args(engine: &EngineSpec) -> Vec<String> {
    let mut args: Vec<String> = match engine.engine {
        EngineKind::Redis | EngineKind::Valkey => [
            "--port",
            "6379",
            "--save",
            "",
            "--appendonly",
            "no",
            "--protected-mode",
            "no",
        ]
        .map(String::from)
        .to_vec(),
        // Dragonfly starts one thread per core it sees unless told; its pod has two CPUs.
        EngineKind::Dragonfly => [
            "--port=6379",
            "--dbfilename=",
            "--proactor_threads=2",
            "--logtostderr",
        ]
        .map(String::from)
        .to_vec(),
    };
    args.extend(engine.args.iter().cloned());
    args
}

/// [`engine_args`], plus the password reference when the spec has `auth`.
fn engine_args_with_auth(benchmark: &MemoryBenchmark, engine: &EngineSpec) -> Vec<String> {
    let mut args = engine_args(engine);
    if benchmark.spec.auth.is_some() {
        args.extend(crate::auth::engine_args(engine.engine));
    }
    args
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

fn metadata(
    benchmark: &MemoryBenchmark,
    name: String,
    labels: BTreeMap<String, String>,
) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: benchmark.namespace(),
        labels: Some(labels),
        owner_references: benchmark.controller_owner_ref(&()).map(|r| vec![r]),
        ..Default::default()
    }
}

/// The engine pod of engine `index`: on a node of the instance type (plus the spec's
/// placement), never on a node where another membench engine runs (any namespace), with
/// Guaranteed QoS and a TCP readiness probe, admitted under Pod Security `restricted` (the
/// image's non-root user, its data directory an emptyDir). `preferred_node` is the node the
/// benchmark's first engine ran on: the later engines prefer it, so their items/s compare like
/// with like.
pub fn engine_pod(
    benchmark: &MemoryBenchmark,
    index: usize,
    memory_bytes: u64,
    preferred_node: Option<&str>,
    settings: &PodSettings,
) -> Pod {
    let name = benchmark.name_any();
    let engine = &benchmark.spec.engines[index];
    let placement = benchmark.spec.placement.clone().unwrap_or_default();
    let user_affinity = placement.affinity.clone().unwrap_or_default();

    // One benchmark engine per node, across namespaces: two benchmarks on one node would
    // skew each other's memory and throughput.
    let one_engine_per_node = PodAffinityTerm {
        label_selector: Some(LabelSelector {
            match_labels: Some(
                [
                    (LABEL_NAME.to_string(), APP_NAME.to_string()),
                    (
                        LABEL_COMPONENT.to_string(),
                        Component::Engine.as_str().to_string(),
                    ),
                ]
                .into(),
            ),
            ..Default::default()
        }),
        namespace_selector: Some(LabelSelector::default()),
        topology_key: HOSTNAME_LABEL.to_string(),
        ..Default::default()
    };
    let mut anti_affinity = user_affinity.pod_anti_affinity.clone().unwrap_or_default();
    anti_affinity
        .required_during_scheduling_ignored_during_execution
        .get_or_insert_with(Vec::new)
        .push(one_engine_per_node);

    let mut node_affinity = user_affinity.node_affinity.clone();
    if let Some(node) = preferred_node {
        // matchFields on metadata.name: a node's name, unlike its hostname label, is unique.
        let same_node = PreferredSchedulingTerm {
            weight: 100,
            preference: NodeSelectorTerm {
                match_fields: Some(vec![NodeSelectorRequirement {
                    key: "metadata.name".into(),
                    operator: "In".into(),
                    values: Some(vec![node.to_string()]),
                }]),
                ..Default::default()
            },
        };
        node_affinity
            .get_or_insert_with(Default::default)
            .preferred_during_scheduling_ignored_during_execution
            .get_or_insert_with(Vec::new)
            .push(same_node);
    }

    let memory = mebibytes(memory_bytes);
    Pod {
        metadata: metadata(
            benchmark,
            engine_pod_name(&name, index),
            labels(&name, index, Component::Engine),
        ),
        spec: Some(PodSpec {
            restart_policy: Some("Never".into()),
            termination_grace_period_seconds: Some(10),
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            node_selector: Some(node_selector(benchmark)),
            tolerations: tolerations(&placement),
            affinity: Some(Affinity {
                node_affinity,
                pod_affinity: user_affinity.pod_affinity.clone(),
                pod_anti_affinity: Some(anti_affinity),
            }),
            security_context: Some(engine_pod_security_context(engine)),
            volumes: Some(vec![engine_data_volume()]),
            containers: vec![Container {
                name: "engine".into(),
                image: Some(engine.image()),
                args: Some(engine_args_with_auth(benchmark, engine)),
                env: benchmark
                    .spec
                    .auth
                    .as_ref()
                    .map(|auth| vec![crate::auth::engine_env(engine.engine, auth)]),
                working_dir: Some(ENGINE_DATA_DIR.into()),
                volume_mounts: Some(vec![engine_data_mount()]),
                security_context: Some(restricted_container()),
                ports: Some(vec![ContainerPort {
                    name: Some("resp".into()),
                    container_port: ENGINE_PORT,
                    protocol: Some("TCP".into()),
                    ..Default::default()
                }]),
                readiness_probe: Some(Probe {
                    tcp_socket: Some(TCPSocketAction {
                        port: IntOrString::Int(ENGINE_PORT),
                        ..Default::default()
                    }),
                    period_seconds: Some(2),
                    failure_threshold: Some(3),
                    ..Default::default()
                }),
                resources: Some(guaranteed(&settings.engine_cpu, &memory)),
                termination_message_policy: Some("FallbackToLogsOnError".into()),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
    }
}

/// The `membench load` arguments that load the spec's workload into the engine at `address`
/// and leave the result in the termination message.
pub fn client_args(benchmark: &MemoryBenchmark, workload: &Workload, address: &str) -> Vec<String> {
    let spec = &benchmark.spec;
    let mut args: Vec<String> = vec![
        "load".into(),
        "--addr".into(),
        address.into(),
        "--workload".into(),
        workload.kind().into(),
    ];
    let mut flag = |name: &str, value: String| {
        args.push(format!("--{name}"));
        args.push(value);
    };
    match workload {
        Workload::SortedSet {
            members,
            key,
            sample_every,
        } => {
            flag("members", members.to_string());
            flag("key", key.clone());
            flag("sample-every", sample_every.to_string());
        }
        Workload::RandomStrings {
            requests,
            keyspace,
            value_size,
            seed,
        } => {
            flag("requests", requests.to_string());
            flag("keyspace", keyspace.to_string());
            flag("value-size", value_size.to_string());
            flag("seed", seed.to_string());
        }
        Workload::Strings { keys, value_size } => {
            flag("keys", keys.to_string());
            flag("value-size", value_size.to_string());
        }
        Workload::Records {
            records,
            layout,
            fields,
        } => {
            flag("records", records.to_string());
            flag(
                "layout",
                match layout {
                    RecordLayout::Hash => "hash",
                    RecordLayout::Strings => "strings",
                }
                .into(),
            );
            flag("fields", fields.join(","));
        }
    }
    flag("pipeline", spec.pipeline.to_string());
    flag("repetitions", spec.repetitions.to_string());
    flag("settle-seconds", spec.settle_seconds.to_string());
    flag("output", "json".into());
    flag("result-file", TERMINATION_MESSAGE_PATH.into());
    flag("progress-port", PROGRESS_PORT.to_string());
    args
}

/// `ip:6379`, with brackets around an IPv6 address.
pub fn engine_address(pod_ip: &str) -> String {
    if pod_ip.contains(':') {
        format!("[{pod_ip}]:{ENGINE_PORT}")
    } else {
        format!("{pod_ip}:{ENGINE_PORT}")
    }
}

/// The client pod of engine `index`: on the engine pod's node (required pod affinity on
/// `kubernetes.io/hostname`), loading it at `engine_ip`. It needs no API access and runs
/// unprivileged with a read-only root filesystem; its result leaves through the termination
/// message.
pub fn client_pod(
    benchmark: &MemoryBenchmark,
    index: usize,
    attempt: u32,
    workload: &Workload,
    engine_ip: &str,
    settings: &PodSettings,
) -> Pod {
    let name = benchmark.name_any();
    let placement = benchmark.spec.placement.clone().unwrap_or_default();
    let mut labels = labels(&name, index, Component::Client);
    labels.insert(LABEL_CLIENT_ATTEMPT.into(), attempt.to_string());
    let mut metadata = metadata(benchmark, client_pod_name(&name, index, attempt), labels);
    metadata.annotations = Some(
        [(
            ANNOTATION_CLIENT_OF.to_string(),
            client_of(&benchmark.uid().unwrap_or_default(), index, attempt),
        )]
        .into(),
    );
    // Keeps the pod readable after it is deleted, until its result is in the status.
    metadata.finalizers = Some(vec![RESULT_FINALIZER.into()]);
    let next_to_engine = PodAffinityTerm {
        label_selector: Some(LabelSelector {
            match_labels: Some(
                [
                    (LABEL_BENCHMARK.to_string(), name.clone()),
                    (LABEL_ENGINE_INDEX.to_string(), index.to_string()),
                    (
                        LABEL_COMPONENT.to_string(),
                        Component::Engine.as_str().to_string(),
                    ),
                ]
                .into(),
            ),
            ..Default::default()
        }),
        topology_key: HOSTNAME_LABEL.to_string(),
        ..Default::default()
    };
    Pod {
        metadata,
        spec: Some(PodSpec {
            restart_policy: Some("Never".into()),
            // SIGTERM ends a run between two batches with what it measured (client_stop.rs
            // writes it within 3 s at the latest).
            termination_grace_period_seconds: Some(5),
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            node_selector: Some(node_selector(benchmark)),
            tolerations: tolerations(&placement),
            affinity: Some(Affinity {
                pod_affinity: Some(PodAffinity {
                    required_during_scheduling_ignored_during_execution: Some(vec![next_to_engine]),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            security_context: Some(client_pod_security_context()),
            containers: vec![Container {
                name: "client".into(),
                image: Some(settings.client_image.clone()),
                args: Some(client_args(benchmark, workload, &engine_address(engine_ip))),
                // The progress endpoint listens on the pod's own address.
                env: Some(client_env(benchmark)),
                ports: Some(vec![ContainerPort {
                    name: Some("progress".into()),
                    container_port: PROGRESS_PORT.into(),
                    protocol: Some("TCP".into()),
                    ..Default::default()
                }]),
                resources: Some(guaranteed(&settings.client_cpu, &settings.client_memory)),
                termination_message_path: Some(TERMINATION_MESSAGE_PATH.into()),
                // A client that dies before writing its result still leaves its last log lines.
                termination_message_policy: Some("FallbackToLogsOnError".into()),
                security_context: Some(restricted_container()),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
    }
}

/// The client's environment: its pod address for the progress endpoint, and the engine's
/// password from the spec's Secret when it has one.
fn client_env(benchmark: &MemoryBenchmark) -> Vec<EnvVar> {
    let mut env = vec![EnvVar {
        name: "MEMBENCH_POD_IP".into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: "status.podIP".into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }];
    if let Some(auth) = &benchmark.spec.auth {
        env.push(crate::auth::client_env(auth));
    }
    env
}

/// Which engine a pod belongs to, from its label.
pub fn engine_index(pod: &Pod) -> Option<usize> {
    pod.labels().get(LABEL_ENGINE_INDEX)?.parse().ok()
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
            Some(Component::Engine) => pod.name_any() == engine_pod_name(&benchmark_name, index),
            Some(Component::Client) => client_attempt(pod).is_some_and(|attempt| {
                pod.name_any() == client_pod_name(&benchmark_name, index, attempt)
                    && pod.annotations().get(ANNOTATION_CLIENT_OF)
                        == Some(&client_of(&uid, index, attempt))
            }),
            None => false,
        }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::parse_specs;

    pub(crate) fn benchmark(extra: &str) -> MemoryBenchmark {
        let mut b = parse_specs(&format!(
            "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {{name: zset, namespace: bench}}\nspec:\n  instanceType: r8g.4xlarge\n  engines: [{{engine: redis, version: \"7.0.15\"}}, {{engine: valkey, version: \"9.1.2\", args: [--maxmemory, 1gb]}}]\n  workload: {{sortedSet: {{members: 20000}}}}\n  repetitions: 3\n{extra}"
        ))
        .unwrap()
        .remove(0);
        b.metadata.uid = Some("uid-1".into());
        b
    }

    fn workload(b: &MemoryBenchmark) -> Workload {
        Workload::from_spec(&b.spec.workload).unwrap()
    }

    #[test]
    fn the_engine_pod_is_pinned_to_the_instance_type_and_arch_with_guaranteed_qos() {
        let b = benchmark(
            "  arch: arm64\n  placement:\n    nodeSelector: {pool: bench}\n    tolerations: [{key: dedicated, operator: Equal, value: bench, effect: NoSchedule}]\n",
        );
        let pod = engine_pod(&b, 0, 512 << 20, None, &PodSettings::default());
        let spec = pod.spec.unwrap();
        let selector = spec.node_selector.unwrap();
        assert_eq!(selector[INSTANCE_TYPE_LABEL], "r8g.4xlarge");
        assert_eq!(selector[ARCH_LABEL], "arm64");
        assert_eq!(selector["pool"], "bench");
        assert_eq!(
            spec.tolerations.unwrap(),
            vec![Toleration {
                key: Some("dedicated".into()),
                operator: Some("Equal".into()),
                value: Some("bench".into()),
                effect: Some("NoSchedule".into()),
                ..Default::default()
            }]
        );
        let resources = spec.containers[0].resources.clone().unwrap();
        assert_eq!(resources.requests, resources.limits);
        assert_eq!(
            resources.limits.unwrap()["memory"],
            Quantity("512Mi".into())
        );
        assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
        assert_eq!(pod.metadata.name.as_deref(), Some("zset-0-engine"));
        assert_eq!(pod.metadata.namespace.as_deref(), Some("bench"));
        let owner = &pod.metadata.owner_references.unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.controller),
            ("MemoryBenchmark", Some(true))
        );
    }

    #[test]
    fn engines_keep_a_node_to_themselves_across_namespaces() {
        let pod = engine_pod(&benchmark(""), 1, 512 << 20, None, &PodSettings::default());
        let anti = pod
            .spec
            .unwrap()
            .affinity
            .unwrap()
            .pod_anti_affinity
            .unwrap();
        let term = &anti
            .required_during_scheduling_ignored_during_execution
            .unwrap()[0];
        assert_eq!(term.topology_key, HOSTNAME_LABEL);
        assert_eq!(term.namespace_selector, Some(LabelSelector::default()));
        let labels = term.label_selector.clone().unwrap().match_labels.unwrap();
        assert_eq!(labels[LABEL_COMPONENT], "engine");
        assert_eq!(labels[LABEL_NAME], "membench");
        // The engine pod itself carries the labels the term selects.
        let own = pod.metadata.labels.unwrap();
        assert_eq!(own[LABEL_COMPONENT], "engine");
        assert_eq!(own[LABEL_ENGINE_INDEX], "1");
        assert_eq!(own[LABEL_BENCHMARK], "zset");
        assert_eq!(own[LABEL_INSTANCE], "zset");
    }

    #[test]
    fn user_affinity_is_kept_next_to_membench_anti_affinity() {
        let b = benchmark(
            "  placement:\n    affinity:\n      nodeAffinity:\n        requiredDuringSchedulingIgnoredDuringExecution:\n          nodeSelectorTerms: [{matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [eu-west-1a]}]}]\n",
        );
        let affinity = engine_pod(&b, 0, 1 << 30, None, &PodSettings::default())
            .spec
            .unwrap()
            .affinity
            .unwrap();
        assert!(affinity.node_affinity.is_some());
        assert!(affinity.pod_anti_affinity.is_some());
    }

    #[test]
    fn engines_run_without_persistence_on_port_6379_with_user_args_last() {
        let b = benchmark("");
        let args = engine_args(&b.spec.engines[1]);
        assert_eq!(
            args,
            [
                "--port",
                "6379",
                "--save",
                "",
                "--appendonly",
                "no",
                "--protected-mode",
                "no",
                "--maxmemory",
                "1gb"
            ]
        );
        let pod = engine_pod(&b, 1, 1 << 30, None, &PodSettings::default());
        assert_eq!(
            pod.spec.unwrap().containers[0].image.as_deref(),
            Some("valkey/valkey:9.1.2")
        );
        let dragonfly = EngineSpec {
            engine: EngineKind::Dragonfly,
            ..b.spec.engines[0].clone()
        };
        assert!(engine_args(&dragonfly).contains(&"--dbfilename=".to_string()));
    }

    #[test]
    fn the_client_runs_next_to_its_engine_and_writes_its_result_to_the_termination_message() {
        let b = benchmark("");
        let pod = client_pod(
            &b,
            1,
            2,
            &workload(&b),
            "127.1.0.5",
            &PodSettings::default(),
        );
        assert_eq!(pod.metadata.name.as_deref(), Some("zset-1-client-2"));
        let spec = pod.spec.unwrap();
        let affinity = spec.affinity.unwrap().pod_affinity.unwrap();
        let term = &affinity
            .required_during_scheduling_ignored_during_execution
            .unwrap()[0];
        assert_eq!(term.topology_key, HOSTNAME_LABEL);
        let selected = term.label_selector.clone().unwrap().match_labels.unwrap();
        assert_eq!(selected[LABEL_ENGINE_INDEX], "1");
        assert_eq!(selected[LABEL_COMPONENT], "engine");
        assert_eq!(selected[LABEL_BENCHMARK], "zset");
        let container = &spec.containers[0];
        let args = container.args.clone().unwrap().join(" ");
        assert_eq!(
            args,
            "load --addr 127.1.0.5:6379 --workload sorted-set --members 20000 --key membench:zset --sample-every 1000000 --pipeline 100 --repetitions 3 --settle-seconds 0 --output json --result-file /dev/termination-log --progress-port 9121"
        );
        assert_eq!(
            container.termination_message_path.as_deref(),
            Some(TERMINATION_MESSAGE_PATH)
        );
        assert_eq!(spec.automount_service_account_token, Some(false));
        assert_eq!(pod.metadata.finalizers, Some(vec![RESULT_FINALIZER.into()]));
        assert_eq!(
            container
                .security_context
                .clone()
                .unwrap()
                .read_only_root_filesystem,
            Some(true)
        );
        assert_eq!(client_pod_name("zset", 0, 1), "zset-0-client");
        assert_eq!(engine_address("fd00::5"), "[fd00::5]:6379");
    }

    #[test]
    fn each_workload_becomes_the_matching_load_flags() {
        let b = benchmark("");
        let records = Workload::Records {
            records: 10,
            layout: RecordLayout::Strings,
            fields: vec!["name".into(), "age".into()],
        };
        let args = client_args(&b, &records, "h:1").join(" ");
        assert!(
            args.contains("--workload records --records 10 --layout strings --fields name,age"),
            "{args}"
        );
        let random = Workload::RandomStrings {
            requests: 100,
            keyspace: 50,
            value_size: 16,
            seed: 7,
        };
        let args = client_args(&b, &random, "h:1").join(" ");
        assert!(
            args.contains("--requests 100 --keyspace 50 --value-size 16 --seed 7"),
            "{args}"
        );
    }

    #[test]
    fn with_auth_both_pods_take_the_password_from_the_secret_and_no_spec_holds_it() {
        let b = benchmark("  auth: {passwordSecretRef: {name: engine-password, key: password}}\n");
        let engine = engine_pod(&b, 1, 1 << 30, None, &PodSettings::default());
        let container = &engine.spec.as_ref().unwrap().containers[0];
        let args = container.args.clone().unwrap();
        assert_eq!(
            args[args.len() - 2..],
            ["--requirepass", "$(MEMBENCH_ENGINE_PASSWORD)"]
        );
        let env = container.env.clone().unwrap();
        let secret = env[0]
            .value_from
            .as_ref()
            .unwrap()
            .secret_key_ref
            .as_ref()
            .unwrap();
        assert_eq!(
            (env[0].name.as_str(), secret.name.as_str()),
            ("MEMBENCH_ENGINE_PASSWORD", "engine-password")
        );
        let client = client_pod(
            &b,
            1,
            1,
            &workload(&b),
            "127.1.0.5",
            &PodSettings::default(),
        );
        let env = client.spec.unwrap().containers[0].env.clone().unwrap();
        let password = env.iter().find(|e| e.name == "MEMBENCH_PASSWORD").unwrap();
        assert!(password.value.is_none());
        assert_eq!(
            password
                .value_from
                .as_ref()
                .unwrap()
                .secret_key_ref
                .as_ref()
                .unwrap()
                .key,
            "password"
        );
        // Without auth, neither pod mentions a password.
        let open = benchmark("");
        let engine = engine_pod(&open, 1, 1 << 30, None, &PodSettings::default());
        let text = serde_json::to_string(&engine).unwrap();
        assert!(
            !text.contains("requirepass") && !text.contains("PASSWORD"),
            "{text}"
        );
    }

    #[test]
    fn a_client_pod_is_read_only_when_name_owner_and_annotation_agree() {
        let b = benchmark("");
        let client = client_pod(
            &b,
            1,
            2,
            &workload(&b),
            "127.1.0.5",
            &PodSettings::default(),
        );
        assert_eq!(
            client.annotations()[ANNOTATION_CLIENT_OF],
            "uid-1/1/2",
            "benchmark UID, engine index and attempt"
        );
        assert!(owned_by(&client, &b));
        // A pod that copies the labels and the owner but not the operator's annotation.
        let mut forged = client.clone();
        forged.metadata.annotations = None;
        assert!(!owned_by(&forged, &b));
        // The annotation of another attempt, or a name that is not the attempt's.
        let mut other_attempt = client.clone();
        other_attempt
            .annotations_mut()
            .insert(ANNOTATION_CLIENT_OF.into(), "uid-1/1/3".into());
        assert!(!owned_by(&other_attempt, &b));
        let mut renamed = client.clone();
        renamed.metadata.name = Some("zset-1-client-evil".into());
        assert!(!owned_by(&renamed, &b));
        let mut engine = engine_pod(&b, 1, 1 << 30, None, &PodSettings::default());
        assert!(owned_by(&engine, &b));
        engine.metadata.name = Some("zset-1-engine-2".into());
        assert!(!owned_by(&engine, &b));
    }

    #[test]
    fn only_pods_controlled_by_this_very_benchmark_are_its_own() {
        let b = benchmark("");
        let pod = engine_pod(&b, 0, 1 << 30, None, &PodSettings::default());
        assert!(owned_by(&pod, &b));
        let mut recreated = b.clone();
        recreated.metadata.uid = Some("uid-2".into());
        assert!(!owned_by(&pod, &recreated));
    }
}
