//! The engine pod: pinned to a node of the instance type, alone on it, Guaranteed QoS.

use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerPort, EnvVar, NodeSelectorRequirement, NodeSelectorTerm, Pod,
    PodAffinityTerm, PodSpec, PreferredSchedulingTerm, Probe, TCPSocketAction,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;

use super::{
    APP_NAME, Component, ENGINE_PORT, HOSTNAME_LABEL, LABEL_COMPONENT, LABEL_NAME, LABEL_ROLE,
    LABEL_SHARD, POD_IP_ENV, PodSettings, ROLE_REPLICA, engine_image, guaranteed,
    image_pull_secrets, labels, metadata, node_selector, pod_ip_env, pod_resources,
    replica_pod_name, shard_pod_name, tolerations,
};
use crate::controller::build::pod_security::{
    ENGINE_DATA_DIR, engine_data_mount, engine_data_volume, engine_pod_security_context,
    restricted_container,
};
use crate::crd::{EngineKind, EngineSpec, MemoryBenchmark};
use crate::validation::engine_config::{entry_args, started_entry};
use crate::validation::{dragonfly_memory, mebibytes};

/// The arguments an engine starts with: port 6379, persistence off, reachable over the pod
/// network, then the spec's own ([`entry_args`], which can override any of these).
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
    args.extend(entry_args(engine));
    args
}

/// The engine container's arguments: [`engine_args`] with Dragonfly's explicit `--maxmemory`
/// (a share of the pod's limit, `crd/dragonfly_memory.rs`) and the password reference
/// (the spec's Secret, or the generated one) before the spec's own, which can override any of
/// them (a literal `--requirepass` needs the operator's `--allow-open-engine-args`).
fn pod_engine_args(engine: &EngineSpec, memory_bytes: u64, sharded: bool) -> Vec<String> {
    let mut args = engine_args(engine);
    let own = args.split_off(args.len() - entry_args(engine).len());
    if engine.engine == EngineKind::Dragonfly {
        args.push(format!(
            "--maxmemory={}",
            dragonfly_memory::maxmemory(memory_bytes)
        ));
    }
    if sharded {
        // A shard tells the others its own address (the pod's), rather than leaving them to
        // take the source address of its cluster bus connections: shard 0 never receives a
        // MEET, so without it the others only know it by where its connections come from,
        // which on a host whose pods share one network (the dev cluster's) is not its address.
        args.extend([
            "--cluster-announce-ip".to_string(),
            // The kubelet expands $(NAME) in arguments from the container's environment.
            format!("$({POD_IP_ENV})"),
        ]);
    }
    args.extend(crate::auth::engine_args(engine.engine));
    args.extend(own);
    args
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
    build(
        benchmark,
        index,
        Member::Engine,
        memory_bytes,
        preferred_node,
        settings,
    )
}

/// The replica pod of run `index` (`spec.peak.replica`): the engine pod's twin (image,
/// arguments, password, resources, security, the same emptyDir for the sync's file), named
/// `<benchmark>-<i>-replica` and labelled [`LABEL_ROLE`]` = replica`. Labelled an engine too, it
/// keeps the engine pods' anti-affinity against every membench engine, its own run's included:
/// the scheduler puts it on another node of the instance type than the engine it copies, and no
/// other benchmark's engine beside it. It starts empty; the client makes it a replica
/// (`REPLICAOF`) after each repetition's readings. `engines_node` is the node the engine
/// prefers (the benchmark's first engine's): the replica prefers any other, so that, created
/// at the same moment, it does not take the node the engine wants.
pub fn replica_pod(
    benchmark: &MemoryBenchmark,
    index: usize,
    memory_bytes: u64,
    engines_node: Option<&str>,
    settings: &PodSettings,
) -> Pod {
    build(
        benchmark,
        index,
        Member::Replica,
        memory_bytes,
        engines_node,
        settings,
    )
}

/// Which of its run's engine pods a pod is.
#[derive(Clone, Copy, PartialEq)]
enum Member {
    /// The one engine of an unsharded run.
    Engine,
    /// A shard of a sharded run.
    Shard(usize),
    /// The replica of `spec.peak.replica`.
    Replica,
}

/// The engine pods of run `index`: its one [`engine_pod`], or for an entry with `shards: N`
/// one pod per shard, in shard order, each labelled with its shard ([`super::LABEL_SHARD`])
/// and kept off every node another membench engine runs on, its own shards' included, so each
/// shard is alone on its own node of the instance type. Only shard 0 prefers
/// `preferred_node`: the client runs beside it.
pub fn shard_pods(
    benchmark: &MemoryBenchmark,
    index: usize,
    memory_bytes: u64,
    preferred_node: Option<&str>,
    settings: &PodSettings,
) -> Vec<Pod> {
    match benchmark.spec.engine_of_run(index).shards {
        None => vec![engine_pod(
            benchmark,
            index,
            memory_bytes,
            preferred_node,
            settings,
        )],
        Some(shards) => (0..shards as usize)
            .map(|shard| {
                let preferred = preferred_node.filter(|_| shard == 0);
                build(
                    benchmark,
                    index,
                    Member::Shard(shard),
                    memory_bytes,
                    preferred,
                    settings,
                )
            })
            .collect(),
    }
}

fn build(
    benchmark: &MemoryBenchmark,
    index: usize,
    member: Member,
    memory_bytes: u64,
    preferred_node: Option<&str>,
    settings: &PodSettings,
) -> Pod {
    let name = benchmark.name_any();
    let engine = benchmark.spec.engine_of_run(index);
    let shard = match member {
        Member::Shard(shard) => Some(shard),
        Member::Engine | Member::Replica => None,
    };
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
        // The replica's preference is the other way round: away from the engine's node.
        let same_node = PreferredSchedulingTerm {
            weight: 100,
            preference: NodeSelectorTerm {
                match_fields: Some(vec![NodeSelectorRequirement {
                    key: "metadata.name".into(),
                    operator: if member == Member::Replica {
                        "NotIn"
                    } else {
                        "In"
                    }
                    .into(),
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
    let mut pod_labels = labels(&name, index, Component::Engine);
    if let Some(shard) = shard {
        pod_labels.insert(LABEL_SHARD.into(), shard.to_string());
    }
    let pod_name = if member == Member::Replica {
        pod_labels.insert(LABEL_ROLE.into(), ROLE_REPLICA.into());
        replica_pod_name(&name, index)
    } else {
        shard_pod_name(&name, index, shard.unwrap_or(0))
    };
    Pod {
        metadata: metadata(benchmark, pod_name, pod_labels),
        spec: Some(PodSpec {
            restart_policy: Some("Never".into()),
            termination_grace_period_seconds: Some(10),
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            image_pull_secrets: image_pull_secrets(benchmark, settings),
            node_selector: Some(node_selector(benchmark, index, settings)),
            tolerations: tolerations(benchmark, settings),
            affinity: Some(Affinity {
                node_affinity,
                pod_affinity: user_affinity.pod_affinity.clone(),
                pod_anti_affinity: Some(anti_affinity),
            }),
            security_context: Some(engine_pod_security_context(engine)),
            // A snapshot (spec.peak) is written here: bounded by the engine's memory, which
            // an RDB of the data never exceeds.
            volumes: Some(vec![engine_data_volume(
                benchmark
                    .spec
                    .peak
                    .as_ref()
                    .map(|_| memory_bytes.max(64 << 20)),
            )]),
            containers: vec![Container {
                name: "engine".into(),
                image: Some(engine_image(engine, settings)),
                args: Some(pod_engine_args(
                    &started_entry(engine, &benchmark.spec),
                    memory_bytes,
                    shard.is_some(),
                )),
                env: Some(engine_env(benchmark, engine, shard.is_some())),
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
                resources: Some(guaranteed(
                    &pod_resources(benchmark, settings).engine_cpu,
                    &memory,
                )),
                termination_message_policy: Some("FallbackToLogsOnError".into()),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
    }
}

/// The engine container's environment: the password, and a shard's own pod address.
fn engine_env(benchmark: &MemoryBenchmark, engine: &EngineSpec, sharded: bool) -> Vec<EnvVar> {
    let mut env = vec![crate::auth::engine_env(
        engine.engine,
        &crate::auth::effective_auth(benchmark),
    )];
    if sharded {
        env.push(pod_ip_env());
    }
    env
}
