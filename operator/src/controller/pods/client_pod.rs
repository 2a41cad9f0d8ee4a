//! The client pod: next to its engine (a sharded run's shard 0), loading the workload into it
//! (every shard), syncing the run's replica pod from it (`spec.peak.replica`), its result in
//! the termination message.

use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerPort, EnvVar, Pod, PodAffinity, PodAffinityTerm, PodSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kube::ResourceExt;

use super::profile_delivery::profile_delivery;
use super::{
    ANNOTATION_CLIENT_OF, Component, ENGINE_PORT, HOSTNAME_LABEL, LABEL_BENCHMARK,
    LABEL_CLIENT_ATTEMPT, LABEL_COMPONENT, LABEL_ENGINE_INDEX, LABEL_ROLE, LABEL_SHARD,
    PodSettings, RESULT_FINALIZER, TERMINATION_MESSAGE_PATH, client_of, client_pod_name,
    guaranteed, image_pull_secrets, labels, metadata, node_selector, pod_ip_env, pod_resources,
    tolerations,
};
use crate::client::progress_endpoint::PROGRESS_PORT;
use crate::client::workload::Workload;
use crate::controller::pod_security::{client_pod_security_context, restricted_container};
use crate::crd::{MemoryBenchmark, RecordLayout};
use crate::validation::engine_config::settings_read_back_in;
use crate::validation::entry_ttl;

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
        Workload::Profile(profile) => {
            flag("scale", profile.scale.to_string());
            flag("element-scale", profile.element_scale.to_string());
            flag("seed", profile.seed.to_string());
        }
    }
    flag("pipeline", spec.pipeline.to_string());
    flag("repetitions", spec.repetitions.to_string());
    flag("settle-seconds", spec.settle_seconds.to_string());
    if let Some(churn) = &spec.churn {
        flag("churn-rounds", churn.rounds.to_string());
        if let Some(share) = churn.delete_share {
            flag("delete-share", share.to_string());
        }
        if let Some(share) = churn.overwrite_share {
            flag("overwrite-share", share.to_string());
        }
        if let Some(size) = churn.overwrite_value_size {
            flag("overwrite-value-size", size.to_string());
        }
        if churn.defrag {
            flag("defrag-seconds", churn.defrag_seconds.to_string());
        }
        flag("churn-seed", churn.seed.to_string());
    }
    if let Some(snapshot) = spec.peak.as_ref().and_then(|p| p.snapshot.as_ref()) {
        flag(
            "snapshot-writes-per-sec",
            snapshot.writes_per_sec.to_string(),
        );
        flag("snapshot-write-share", snapshot.write_share.to_string());
    }
    flag("output", "json".into());
    flag("result-file", TERMINATION_MESSAGE_PATH.into());
    flag("progress-port", PROGRESS_PORT.to_string());
    flag("serve-result-seconds", SERVE_RESULT_SECONDS.to_string());
    // The engine is the operator's own: a later attempt may find what an earlier one loaded
    // (--flush), and the engine pod goes with its data, which a kept failed pod shows as it
    // was (--keep-data).
    args.push("--flush".into());
    args.push("--keep-data".into());
    if spec
        .peak
        .as_ref()
        .is_some_and(|p| p.snapshot.is_some() || p.replica.is_some())
    {
        // Where the client cannot see the engine's processes (a real node), the operator reads
        // the engine container's memory from the kubelet at the phases' marks.
        args.push("--container-memory-marks".into());
    }
    if spec.churn.as_ref().is_some_and(|churn| churn.defrag) {
        args.push("--defrag".into());
    }
    args
}

/// How long a client that finished waits for the operator to take its whole result from its
/// progress endpoint (the operator reads it within a poll or two, then deletes the pod); past
/// it the client leaves, and its termination message holds the result, fitted to 4 KB.
pub const SERVE_RESULT_SECONDS: u64 = 30;

/// [`client_args`] for run `index` (its engine entry: `spec.engine_of_run`): with the workload's TTL unless the entry is
/// `withoutTtl`, and the settings its entry changed to read back (`--read-config`), so the
/// result records their effective values.
/// A sharded run's client gets one `--addr` per shard, in shard order, right after the first
/// (`membench load` joins them into one cluster before its first baseline); a run with
/// `spec.peak.replica` gets its replica pod's address (`--replica`) and the writes' rate.
fn client_args_reading_back(
    benchmark: &MemoryBenchmark,
    index: usize,
    workload: &Workload,
    addresses: &[String],
    replica: Option<&str>,
) -> Vec<String> {
    let first = addresses.first().map(String::as_str).unwrap_or_default();
    let mut args = client_args(benchmark, workload, first);
    let more = addresses
        .iter()
        .skip(1)
        .flat_map(|a| ["--addr".to_string(), a.clone()]);
    args.splice(3..3, more);
    let engine = benchmark.spec.engine_of_run(index);
    if let Some(ttl) = entry_ttl(&benchmark.spec, engine) {
        args.extend([
            "--ttl-seconds".into(),
            ttl.seconds.to_string(),
            "--ttl-share".into(),
            ttl.share.to_string(),
        ]);
    }
    if engine.is_cluster() {
        args.push("--own-all-slots".into());
    }
    if let (Some(spec), Some(address)) = (
        benchmark
            .spec
            .peak
            .as_ref()
            .and_then(|p| p.replica.as_ref()),
        replica,
    ) {
        args.extend([
            "--replica".into(),
            address.to_string(),
            "--replica-writes-per-sec".into(),
            spec.writes_per_sec.to_string(),
        ]);
    }
    // The load past maxmemory: spec.eviction's limit or the entry's own (admission checked
    // both, so a refusal here cannot happen for an admitted spec).
    if let Some(eviction) = benchmark
        .spec
        .eviction
        .as_ref()
        .and_then(|e| e.for_entry(engine).ok())
    {
        args.extend([
            "--maxmemory".into(),
            eviction.maxmemory.unwrap_or_default(),
            "--maxmemory-policy".into(),
            eviction.policy.unwrap_or_default(),
            "--load-to".into(),
            eviction.load_to.to_string(),
        ]);
    }
    let names = settings_read_back_in(engine, &benchmark.spec);
    if !names.is_empty() {
        args.push("--read-config".into());
        args.push(names.join(","));
    }
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
    let engine_ips = [engine_ip.to_string()];
    client_pod_of_shards(
        benchmark,
        index,
        attempt,
        workload,
        &engine_ips,
        None,
        settings,
    )
}

/// [`client_pod`] for engine pods at `engine_ips`, in shard order: a sharded run's client runs
/// on shard 0's node and loads every shard. `replica_ip` is the run's replica pod's address
/// (`spec.peak.replica`), which the client syncs from the engine it loaded.
pub fn client_pod_of_shards(
    benchmark: &MemoryBenchmark,
    index: usize,
    attempt: u32,
    workload: &Workload,
    engine_ips: &[String],
    replica_ip: Option<&str>,
    settings: &PodSettings,
) -> Pod {
    let name = benchmark.name_any();
    let mut labels = labels(&name, index, Component::Client);
    labels.insert(LABEL_CLIENT_ATTEMPT.into(), attempt.to_string());
    let mut metadata = metadata(benchmark, client_pod_name(&name, index, attempt), labels);
    metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(
            ANNOTATION_CLIENT_OF.to_string(),
            client_of(&benchmark.uid().unwrap_or_default(), index, attempt),
        );
    // Keeps the pod readable after it is deleted, until its result is in the status.
    metadata.finalizers = Some(vec![RESULT_FINALIZER.into()]);
    let mut engine_labels: std::collections::BTreeMap<String, String> = [
        (LABEL_BENCHMARK.to_string(), name.clone()),
        (LABEL_ENGINE_INDEX.to_string(), index.to_string()),
        (
            LABEL_COMPONENT.to_string(),
            Component::Engine.as_str().to_string(),
        ),
    ]
    .into();
    if benchmark.spec.engine_of_run(index).shards.is_some() {
        engine_labels.insert(LABEL_SHARD.to_string(), "0".to_string());
    }
    // Beside the engine it loads, never beside that engine's replica (an engine pod too).
    let not_the_replica = benchmark
        .spec
        .peak
        .as_ref()
        .is_some_and(|p| p.replica.is_some())
        .then(|| {
            vec![LabelSelectorRequirement {
                key: LABEL_ROLE.to_string(),
                operator: "DoesNotExist".into(),
                values: None,
            }]
        });
    let next_to_engine = PodAffinityTerm {
        label_selector: Some(LabelSelector {
            match_labels: Some(engine_labels),
            match_expressions: not_the_replica,
        }),
        topology_key: HOSTNAME_LABEL.to_string(),
        ..Default::default()
    };
    // A profile workload's profile: a file from its ConfigMap, or the environment.
    let profile = profile_delivery(benchmark);
    let addresses: Vec<String> = engine_ips.iter().map(|ip| engine_address(ip)).collect();
    let replica = replica_ip.map(engine_address);
    let mut args =
        client_args_reading_back(benchmark, index, workload, &addresses, replica.as_deref());
    args.extend(profile.args);
    let mut env = client_env(benchmark);
    env.extend(profile.env);
    Pod {
        metadata,
        spec: Some(PodSpec {
            volumes: profile.volume.map(|v| vec![v]),
            restart_policy: Some("Never".into()),
            // SIGTERM ends a run between two batches with what it measured (client/stop.rs
            // writes it within 3 s at the latest).
            termination_grace_period_seconds: Some(5),
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            image_pull_secrets: image_pull_secrets(benchmark, settings),
            node_selector: Some(node_selector(benchmark, index, settings)),
            tolerations: tolerations(benchmark, settings),
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
                args: Some(args),
                // The progress endpoint listens on the pod's own address.
                env: Some(env),
                volume_mounts: profile.mount.map(|m| vec![m]),
                ports: Some(vec![ContainerPort {
                    name: Some("progress".into()),
                    container_port: PROGRESS_PORT.into(),
                    protocol: Some("TCP".into()),
                    ..Default::default()
                }]),
                resources: Some({
                    let sizes = pod_resources(benchmark, settings);
                    guaranteed(&sizes.client_cpu, &sizes.client_memory)
                }),
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
/// password from the spec's Secret or the generated one.
fn client_env(benchmark: &MemoryBenchmark) -> Vec<EnvVar> {
    let mut env = vec![pod_ip_env()];
    env.push(crate::auth::client_env(&crate::auth::effective_auth(
        benchmark,
    )));
    env
}
