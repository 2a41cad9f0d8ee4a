//! The client pod: next to its engine (a sharded run's shard 0), loading the workload into it
//! (every shard), syncing the run's replica pod from it (`spec.peak.replica`), its result in
//! the termination message. It runs its entry's run plan, which it finds whole in its
//! environment (`MEMBENCH_PLAN`); its arguments say only where the engines are and where the
//! result goes.

use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerPort, EnvVar, Pod, PodAffinity, PodAffinityTerm, PodSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kube::ResourceExt;

use super::workload_delivery::workload_delivery;
use super::{
    ANNOTATION_CLIENT_OF, Component, ENGINE_PORT, HOSTNAME_LABEL, LABEL_BENCHMARK,
    LABEL_CLIENT_ATTEMPT, LABEL_COMPONENT, LABEL_ENGINE_INDEX, LABEL_ROLE, LABEL_SHARD,
    PodSettings, RESULT_FINALIZER, TERMINATION_MESSAGE_PATH, client_of, client_pod_name,
    guaranteed, image_pull_secrets, labels, metadata, node_selector, pod_ip_env, pod_resources,
    tolerations,
};
use crate::client::measurement::plan::{PLAN_ENV, RunPlan};
use crate::client::pod_io::progress_endpoint::PROGRESS_PORT;
use crate::controller::build::pod_security::{client_pod_security_context, restricted_container};
use crate::crd::MemoryBenchmark;

/// The `membench load` arguments of a client pod: the engines at `addresses` (a sharded run's
/// shards in order), the replica of its plan's sync at `replica`, and where its result goes.
/// Every setting of the run is in its plan ([`PLAN_ENV`]), none is a flag here.
pub fn client_args(plan: &RunPlan, addresses: &[String], replica: Option<&str>) -> Vec<String> {
    let mut args: Vec<String> = vec!["load".into()];
    for address in addresses {
        args.extend(["--addr".into(), address.clone()]);
    }
    if let Some(replica) = replica {
        args.extend(["--replica".into(), replica.to_string()]);
    }
    for (flag, value) in [
        ("--output", "json".to_string()),
        ("--result-file", TERMINATION_MESSAGE_PATH.to_string()),
        ("--progress-port", PROGRESS_PORT.to_string()),
        ("--serve-result-seconds", SERVE_RESULT_SECONDS.to_string()),
    ] {
        args.extend([flag.to_string(), value]);
    }
    // The engine pod goes with its data, which a kept failed pod shows as it was.
    args.push("--keep-data".into());
    if plan.settings.snapshot.is_some() || plan.settings.replica.is_some() {
        // Where the client cannot see the engine's processes (a real node), the operator reads
        // the engine container's memory from the kubelet at the phases' marks.
        args.push("--container-memory-marks".into());
    }
    args
}

/// How long a client that finished waits for the operator to take its whole result from its
/// progress endpoint (the operator reads it within a poll or two, then deletes the pod); past
/// it the client leaves, and its termination message holds the result, fitted to 4 KB.
pub const SERVE_RESULT_SECONDS: u64 = 30;

/// The plan a client pod was given, read back from its container's environment: `None` for a
/// pod without one, else the plan as the client reads it.
pub fn plan_of_client_pod(pod: &Pod) -> Option<Result<RunPlan, crate::error::BenchError>> {
    let container = pod.spec.as_ref()?.containers.first()?;
    let value = container
        .env
        .as_ref()?
        .iter()
        .find(|e| e.name == PLAN_ENV)?
        .value
        .as_deref()?;
    Some(RunPlan::from_json(value))
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
    plans: &[RunPlan],
    engine_ip: &str,
    settings: &PodSettings,
) -> Pod {
    let engine_ips = [engine_ip.to_string()];
    client_pod_of_shards(
        benchmark,
        index,
        attempt,
        plans,
        &engine_ips,
        None,
        settings,
    )
}

/// [`client_pod`] for engine pods at `engine_ips`, in shard order: a sharded run's client runs
/// on shard 0's node and loads every shard. `replica_ip` is the run's replica pod's address
/// (`spec.peak.replica`), which the client syncs from the engine it loaded. `plans` are the
/// engine entries' (`ValidSpec::plans`): the run's entry's is handed over whole in the
/// environment.
pub fn client_pod_of_shards(
    benchmark: &MemoryBenchmark,
    index: usize,
    attempt: u32,
    plans: &[RunPlan],
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
    // A profile workload's profile (a file from its ConfigMap, or the environment), or an RDB
    // file's claim.
    let delivery = workload_delivery(benchmark);
    let addresses: Vec<String> = engine_ips.iter().map(|ip| engine_address(ip)).collect();
    let replica = replica_ip.map(engine_address);
    let plan = &plans[benchmark.spec.entry_of_run(index)];
    let mut args = client_args(plan, &addresses, replica.as_deref());
    args.extend(delivery.args);
    let mut env = client_env(benchmark);
    env.push(EnvVar {
        name: PLAN_ENV.into(),
        value: Some(plan.to_json()),
        ..Default::default()
    });
    env.extend(delivery.env);
    Pod {
        metadata,
        spec: Some(PodSpec {
            volumes: (!delivery.volumes.is_empty()).then_some(delivery.volumes),
            restart_policy: Some("Never".into()),
            // SIGTERM ends a run between two batches with what it measured (client/pod_io/stop.rs
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
                volume_mounts: (!delivery.mounts.is_empty()).then_some(delivery.mounts),
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
