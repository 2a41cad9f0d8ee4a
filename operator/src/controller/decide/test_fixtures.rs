//! What the decision's tests share: benchmarks and pods as the API server would hand them
//! over, and one reconciliation applied the way the API server applies its status.

use std::time::Duration;

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, Pod, PodCondition, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use std::sync::Arc;

use crate::client::connection::engine::EngineInfo;
use crate::client::measurement::measure::{
    BenchmarkReport, ErrorReport, RepetitionResult, Summary, WorkloadReport,
};
use crate::client::pod_io::result::ClientResult;
use crate::controller::decide::observation::{
    LoadProbe, Observation, Plan, PodRejection, ServedResult, Settings,
};
use crate::controller::decide::plan::plan;
use crate::crd::MemoryBenchmark;
use crate::stats::StabilityThresholds;
use crate::validation::spec_file::parse_specs;

pub(super) const T0: i64 = 1_800_000_000;

pub(super) fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(T0 + seconds).unwrap()
}

/// A benchmark as it is created, before the operator has written any status.
pub(super) fn fresh_benchmark(extra: &str) -> MemoryBenchmark {
    let mut b = parse_specs(&format!(
        "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {{name: zset, namespace: bench}}\nspec:\n  instanceType: r8g.4xlarge\n  engines: [{{engine: redis, version: \"7.0.15\"}}, {{engine: valkey, version: \"9.1.2\"}}]\n  workload: {{sortedSet: {{members: 20000}}}}\n  repetitions: 3\n  timeoutSeconds: 3600\n{extra}"
    ))
    .unwrap()
    .remove(0);
    b.metadata.uid = Some("uid-1".into());
    b.metadata.generation = Some(1);
    b.metadata.creation_timestamp = Some(Time(at(0)));
    b
}

/// A benchmark whose first status (startedAt, the engines pending) the operator has written at
/// time 0, as it does before it creates any pod.
pub(super) fn benchmark(extra: &str) -> MemoryBenchmark {
    let mut b = fresh_benchmark(extra);
    let plan = reconcile(&mut b, &[], 0, None);
    assert!(
        plan.create.is_empty(),
        "the first status goes out before any pod"
    );
    b
}

pub(super) fn settings() -> Settings {
    Settings {
        scheduling_timeout: Duration::from_secs(60),
        ..Settings::default()
    }
}

/// Runs one reconciliation at `now` and applies its status, as the API server would.
pub(super) fn reconcile(
    b: &mut MemoryBenchmark,
    pods: &[Pod],
    now: i64,
    load: Option<LoadProbe>,
) -> Plan {
    reconcile_seeing(b, pods, now, load, &[], &[])
}

/// A reconciliation that also saw pods refused by the API server and other benchmarks.
pub(super) fn reconcile_seeing(
    b: &mut MemoryBenchmark,
    pods: &[Pod],
    now: i64,
    load: Option<LoadProbe>,
    rejected: &[PodRejection],
    others: &[Arc<MemoryBenchmark>],
) -> Plan {
    reconcile_served(b, pods, now, load, rejected, others, &[])
}

/// A reconciliation that also read whole results from client pods.
pub(super) fn reconcile_served(
    b: &mut MemoryBenchmark,
    pods: &[Pod],
    now: i64,
    load: Option<LoadProbe>,
    rejected: &[PodRejection],
    others: &[Arc<MemoryBenchmark>],
    served: &[ServedResult],
) -> Plan {
    let plan = plan(
        &Observation {
            benchmark: b,
            pods,
            now: at(now),
            load,
            rejected,
            served,
            others,
            prices: None,
            nodes: &[],
        },
        &settings(),
    );
    b.status = Some(plan.status.clone());
    plan
}

pub(super) fn created(mut pod: Pod, now: i64) -> Pod {
    pod.metadata.creation_timestamp = Some(Time(at(now)));
    pod.metadata.uid = Some(format!("pod-{}", pod.name_any()));
    pod
}

pub(super) fn container_status(state: ContainerState, ready: bool) -> Option<Vec<ContainerStatus>> {
    Some(vec![ContainerStatus {
        name: "c".into(),
        ready,
        image_id: "docker.io/library/redis@sha256:abc".into(),
        state: Some(state),
        ..Default::default()
    }])
}

pub(super) fn unscheduled(mut pod: Pod, message: &str) -> Pod {
    pod.status = Some(PodStatus {
        phase: Some("Pending".into()),
        conditions: Some(vec![PodCondition {
            type_: "PodScheduled".into(),
            status: "False".into(),
            reason: Some("Unschedulable".into()),
            message: Some(message.into()),
            ..Default::default()
        }]),
        ..Default::default()
    });
    pod
}

pub(super) fn ready(mut pod: Pod, node: &str, ip: &str) -> Pod {
    pod.spec.as_mut().unwrap().node_name = Some(node.into());
    pod.status = Some(PodStatus {
        phase: Some("Running".into()),
        pod_ip: Some(ip.into()),
        container_statuses: container_status(
            ContainerState {
                running: Some(ContainerStateRunning {
                    started_at: Some(Time(at(0))),
                }),
                ..Default::default()
            },
            true,
        ),
        ..Default::default()
    });
    pod
}

pub(super) fn waiting(mut pod: Pod, node: &str, reason: &str) -> Pod {
    pod.spec.as_mut().unwrap().node_name = Some(node.into());
    pod.status = Some(PodStatus {
        phase: Some("Pending".into()),
        container_statuses: container_status(
            ContainerState {
                waiting: Some(ContainerStateWaiting {
                    reason: Some(reason.into()),
                    message: Some("no local program for image".into()),
                }),
                ..Default::default()
            },
            false,
        ),
        ..Default::default()
    });
    pod
}

pub(super) fn terminated(
    mut pod: Pod,
    node: &str,
    exit_code: i32,
    reason: &str,
    message: &str,
    finished: i64,
) -> Pod {
    pod.spec.as_mut().unwrap().node_name = Some(node.into());
    pod.status = Some(PodStatus {
        phase: Some(
            if exit_code == 0 {
                "Succeeded"
            } else {
                "Failed"
            }
            .into(),
        ),
        container_statuses: container_status(
            ContainerState {
                terminated: Some(ContainerStateTerminated {
                    exit_code,
                    reason: Some(reason.into()),
                    message: Some(message.into()),
                    finished_at: Some(Time(at(finished))),
                    ..Default::default()
                }),
                ..Default::default()
            },
            false,
        ),
        ..Default::default()
    });
    pod
}

pub(super) fn deleting(mut pod: Pod) -> Pod {
    pod.metadata.deletion_timestamp = Some(Time(at(0)));
    pod
}

pub(super) fn repetition(i: u32, bytes_per_item: f64) -> RepetitionResult {
    let baseline = 900_000;
    let used = baseline + (bytes_per_item * 20_000.0) as u64;
    RepetitionResult {
        repetition: i,
        baseline_used_memory: baseline,
        baseline_used_memory_rss: 5_000_000,
        used_memory: used,
        used_memory_rss: 9_000_000,
        used_memory_dataset: None,
        mem_fragmentation_ratio: None,
        items: 20_000,
        bytes_per_item: (used - baseline) as f64 / 20_000.0,
        commands_per_sec: 400_000.0,
        items_per_sec: 400_000.0,
        commands: 20_000,
        seconds: 0.05,
        encoding: Some("skiplist".into()),
        expected_unique_items: None,
        keys_with_ttl: None,
        settled: None,
        samples: vec![],
        shards: Vec::new(),
        by_type: vec![],
        peak: None,
        churn: None,
        eviction: None,
    }
}

pub(super) fn result_message(
    engine: &str,
    version: &str,
    bytes: f64,
    done: u32,
    error: Option<&str>,
) -> String {
    let repetitions: Vec<RepetitionResult> = (1..=done).map(|i| repetition(i, bytes)).collect();
    message_of(engine, version, repetitions, error)
}

/// The result of a client that measured `repetitions`, with `error` when it ended early.
pub(super) fn message_of(
    engine: &str,
    version: &str,
    repetitions: Vec<RepetitionResult>,
    error: Option<&str>,
) -> String {
    ClientResult::from_report(&report_of(engine, version, repetitions, error)).to_message()
}

/// The report of a client that measured `repetitions`, with `error` when it ended early.
pub(super) fn report_of(
    engine: &str,
    version: &str,
    repetitions: Vec<RepetitionResult>,
    error: Option<&str>,
) -> BenchmarkReport {
    BenchmarkReport {
        name: format!("{engine}-{version}"),
        engine: EngineInfo {
            name: engine.into(),
            version: version.into(),
            allocator: "jemalloc-5.3.0".into(),
            arch: "aarch64".into(),
            ..Default::default()
        },
        workload: WorkloadReport::from(&crate::client::workloads::workload::Workload::SortedSet {
            members: 20_000,
            key: "membench:zset".into(),
            sample_every: 0,
        }),
        pipeline: 100,
        ttl: None,
        cluster: None,
        repetitions_requested: 3,
        summary: Summary::of(&repetitions, &StabilityThresholds::default()),
        repetitions,
        failed_repetition: None,
        warnings: vec![],
        error: error.map(|category| ErrorReport {
            category: crate::error::ErrorCategory::parse(category),
            message: format!("{category} during the load"),
            phase: None,
        }),
    }
}

pub(super) fn engine_pod_of(plan: &Plan, index: usize) -> Pod {
    plan.create
        .iter()
        .find(|p| p.name_any().ends_with(&format!("-{index}-engine")))
        .cloned()
        .unwrap_or_else(|| {
            panic!(
                "no engine pod {index} created: {:?}",
                plan.create.iter().map(|p| p.name_any()).collect::<Vec<_>>()
            )
        })
}

pub(super) fn condition<'a>(
    b: &'a MemoryBenchmark,
    type_: &str,
) -> &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
    b.status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap()
}

/// Engine 0's pod as the first reconcile at `now` creates it, ready on r8g-1 at 127.1.0.2.
pub(super) fn first_engine_ready(b: &mut MemoryBenchmark, now: i64) -> Pod {
    let plan = reconcile(b, &[], now, None);
    ready(created(engine_pod_of(&plan, 0), now), "r8g-1", "127.1.0.2")
}

/// The client pod the reconcile at `now` creates next to the ready `engine`.
pub(super) fn client_created(b: &mut MemoryBenchmark, engine: &Pod, now: i64) -> Pod {
    let plan = reconcile(b, std::slice::from_ref(engine), now, None);
    created(plan.create[0].clone(), now)
}

/// Engine 0 ready at 127.1.0.2 (its pod created at `engine_at`) and a running client next to
/// it, created at time 5.
pub(super) fn measuring(b: &mut MemoryBenchmark, engine_at: i64) -> (Pod, Pod) {
    let engine = first_engine_ready(b, engine_at);
    let client = ready(client_created(b, &engine, 5), "r8g-1", "127.1.0.3");
    reconcile(b, &[engine.clone(), client.clone()], 6, None);
    (engine, client)
}

/// Drives engine 0 to success: returns the benchmark after the client's result is in.
pub(super) fn first_engine_measured(b: &mut MemoryBenchmark) -> Vec<Pod> {
    let engine = first_engine_ready(b, 0);
    let client = client_created(b, &engine, 5);
    let client = terminated(
        client,
        "r8g-1",
        0,
        "Completed",
        &result_message("redis", "7.0.15", 96.0, 3, None),
        20,
    );
    let plan = reconcile(b, &[engine.clone(), client.clone()], 21, None);
    assert_eq!(
        plan.delete,
        vec!["zset-0-client".to_string(), "zset-0-engine".to_string()]
    );
    vec![deleting(engine), deleting(client)]
}

/// The pod's required affinity terms (a client pod's: beside the engine it loads).
pub(super) fn required_affinity(pod: &Pod) -> Vec<k8s_openapi::api::core::v1::PodAffinityTerm> {
    pod.spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.pod_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .clone()
        })
        .unwrap_or_default()
}

/// The pod's required anti-affinity terms (an engine pod's: one membench engine per node).
pub(super) fn required_anti_affinity(
    pod: &Pod,
) -> Vec<k8s_openapi::api::core::v1::PodAffinityTerm> {
    pod.spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.pod_anti_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .clone()
        })
        .unwrap_or_default()
}
