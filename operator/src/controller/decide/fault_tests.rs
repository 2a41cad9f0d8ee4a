//! Decisions that keep every measurement through a fault, without a cluster: a client is
//! stopped and read before its engine ends (the deadline, its engine pod lost), a result that
//! came in before the deadline was seen still counts, pods whose node stopped reporting are
//! given up, the result finalizer comes off only once the result is in the status, and pods of
//! an earlier benchmark of the same name are waited for, never adopted.

use k8s_openapi::api::core::v1::{Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use crate::controller::decide::conditions::FAILED;
use crate::controller::decide::test_fixtures::*;
use crate::crd::{ConditionReason, EngineState, MemoryBenchmark, Phase};

fn deleted_at(mut pod: Pod, deadline: i64) -> Pod {
    pod.metadata.deletion_timestamp = Some(Time(at(deadline)));
    pod
}

/// The client after SIGTERM: it wrote the `done` repetitions it had and the error `category`.
fn stopped(client: Pod, done: u32, category: &str, at: i64) -> Pod {
    terminated(
        client,
        "r8g-1",
        1,
        "Error",
        &result_message("redis", "7.0.15", 96.0, done, Some(category)),
        at,
    )
}

fn engine_of(b: &MemoryBenchmark, index: usize) -> crate::crd::EngineStatus {
    b.status.as_ref().unwrap().engines[index].clone()
}

#[test]
fn the_deadline_stops_the_running_client_first_and_keeps_its_partial_result() {
    let mut b = benchmark("");
    let (engine, client) = measuring(&mut b, 0);
    let plan = reconcile(&mut b, &[engine.clone(), client.clone()], 3600, None);
    // Only the client is asked to stop: its engine must stay up while it finishes its batch.
    assert_eq!(plan.delete, vec![client.name_any()]);
    assert!(plan.release.is_empty(), "{:?}", plan.release);
    let first = engine_of(&b, 0);
    assert_eq!(first.state, EngineState::Running);
    assert_eq!(first.reason, Some(ConditionReason::StoppingClient));
    assert!(first.message.unwrap().starts_with("Timeout: "));
    assert_eq!(b.status.as_ref().unwrap().phase, Some(Phase::Running));

    let client = stopped(deleted_at(client, 3605), 2, "Stopped", 3601);
    let plan = reconcile(&mut b, &[engine.clone(), client.clone()], 3602, None);
    let first = engine_of(&b, 0);
    assert_eq!(first.state, EngineState::Failed);
    assert_eq!(first.reason, Some(ConditionReason::Timeout));
    assert_eq!(first.repetitions.len(), 2);
    assert!(
        first.message.as_deref().unwrap().contains("2 of 3"),
        "{:?}",
        first.message
    );
    assert_eq!(engine_of(&b, 1).reason, Some(ConditionReason::NotRun));
    assert_eq!(condition(&b, FAILED).reason, ConditionReason::Timeout);
    assert_eq!(plan.release, vec![client.name_any()]);
    assert_eq!(plan.delete, vec![engine.name_any()]);
}

#[test]
fn a_result_that_came_in_before_the_deadline_was_seen_still_counts() {
    let mut b = benchmark("");
    let (engine, client) = measuring(&mut b, 0);
    let done = terminated(
        client,
        "r8g-1",
        0,
        "Completed",
        &result_message("redis", "7.0.15", 96.0, 3, None),
        3590,
    );
    reconcile(&mut b, &[engine, done], 3600, None);
    let first = engine_of(&b, 0);
    assert_eq!(first.state, EngineState::Succeeded);
    assert_eq!(first.repetitions.len(), 3);
    assert_eq!(engine_of(&b, 1).reason, Some(ConditionReason::NotRun));
}

#[test]
fn an_engine_pod_deleted_mid_run_stops_its_client_and_keeps_what_it_measured() {
    let mut b = benchmark("");
    let (engine, client) = measuring(&mut b, 0);
    let gone = deleted_at(engine, 20);
    let plan = reconcile(&mut b, &[gone.clone(), client.clone()], 11, None);
    assert_eq!(plan.delete, vec![client.name_any()]);
    assert_eq!(
        engine_of(&b, 0).reason,
        Some(ConditionReason::StoppingClient)
    );

    let client = stopped(deleted_at(client, 16), 2, "ConnectionLost", 12);
    let plan = reconcile(&mut b, &[gone, client.clone()], 13, None);
    let first = engine_of(&b, 0);
    assert_eq!(first.state, EngineState::Failed);
    assert_eq!(first.reason, Some(ConditionReason::EnginePodLost));
    assert_eq!(first.repetitions.len(), 2);
    assert_eq!(first.client_attempts, 1, "no client against a dead engine");
    assert!(plan.create.is_empty());
    assert_eq!(plan.release, vec![client.name_any()]);
}

#[test]
fn a_client_stopped_by_someone_else_is_a_failed_attempt_whose_result_is_kept() {
    let mut b = benchmark("");
    let (engine, client) = measuring(&mut b, 0);
    // kubectl drain: the pod is deleted, the client stops and leaves what it has.
    let evicted = stopped(deleted_at(client, 20), 1, "Stopped", 16);
    let plan = reconcile(&mut b, &[engine, evicted.clone()], 17, None);
    assert_eq!(plan.create[0].name_any(), "zset-0-client-2");
    assert_eq!(plan.release, vec![evicted.name_any()]);
    let first = engine_of(&b, 0);
    assert_eq!(first.repetitions.len(), 1);
    assert_eq!(first.client_attempts, 2);
}

#[test]
fn a_result_finalizer_stays_until_the_result_is_in_the_status() {
    let mut b = benchmark("");
    let (engine, client) = measuring(&mut b, 0);
    let plan = reconcile(&mut b, &[engine.clone(), client.clone()], 8, None);
    assert!(plan.release.is_empty());
    let done = terminated(
        client,
        "r8g-1",
        0,
        "Completed",
        &result_message("redis", "7.0.15", 96.0, 3, None),
        9,
    );
    let plan = reconcile(&mut b, &[engine, done.clone()], 10, None);
    assert_eq!(engine_of(&b, 0).state, EngineState::Succeeded);
    assert_eq!(plan.release, vec![done.name_any()]);
}

#[test]
fn pods_whose_node_stopped_reporting_are_given_up_and_the_engine_fails_as_node_lost() {
    let mut b = benchmark("");
    let (engine, client) = measuring(&mut b, 0);
    b.status
        .as_mut()
        .unwrap()
        .progress
        .as_mut()
        .unwrap()
        .summary = "1/2 redis-7.0.15: rep 2/3, 40% loaded".into();
    let evicted = |pod: Pod| {
        let mut pod = deleted_at(pod, 30);
        pod.status
            .as_mut()
            .unwrap()
            .conditions
            .get_or_insert_with(Vec::new)
            .push(PodCondition {
                type_: "DisruptionTarget".into(),
                status: "True".into(),
                reason: Some("DeletionByTaintManager".into()),
                message: Some("Taint manager: deleting due to NoExecute taint".into()),
                ..Default::default()
            });
        pod
    };
    let (engine, client) = (evicted(engine), evicted(client));
    // Within the margin after the deadline, a kubelet could still be stopping them.
    let plan = reconcile(&mut b, &[engine.clone(), client.clone()], 40, None);
    assert!(plan.force_delete.is_empty());
    assert_eq!(engine_of(&b, 0).state, EngineState::Running);

    let plan = reconcile(&mut b, &[engine.clone(), client.clone()], 46, None);
    let first = engine_of(&b, 0);
    assert_eq!(first.state, EngineState::Failed);
    assert_eq!(first.reason, Some(ConditionReason::NodeLost));
    let message = first.message.unwrap();
    assert!(
        message.contains("node r8g-1 stopped reporting"),
        "{message}"
    );
    assert!(message.contains("DeletionByTaintManager"), "{message}");
    assert!(message.contains("rep 2/3, 40% loaded"), "{message}");
    assert_eq!(
        plan.force_delete,
        vec![client.name_any(), engine.name_any()]
    );
    assert_eq!(plan.release, vec![client.name_any()]);
    // Once they are gone, the benchmark goes on with the next engine.
    let plan = reconcile(&mut b, &[], 47, None);
    assert_eq!(engine_pod_of(&plan, 1).name_any(), "zset-1-engine");
}

#[test]
fn pods_of_an_earlier_benchmark_of_the_same_name_are_waited_for_never_adopted() {
    let mut b = benchmark("");
    let mut old_engine = created(
        engine_pod_of(&reconcile(&mut benchmark(""), &[], 0, None), 0),
        0,
    );
    old_engine.metadata.owner_references.as_mut().unwrap()[0].uid = "uid-of-a-deleted-one".into();
    let plan = reconcile(&mut b, std::slice::from_ref(&old_engine), 3, None);
    assert!(plan.create.is_empty(), "{:?}", plan.create);
    assert_eq!(plan.delete, vec![old_engine.name_any()]);
    let first = engine_of(&b, 0);
    assert_eq!(first.reason, Some(ConditionReason::WaitingForOldPods));
    assert_eq!(first.started_at, None, "nothing of this benchmark started");

    let terminating = deleted_at(old_engine, 13);
    let plan = reconcile(&mut b, &[terminating], 4, None);
    assert!(plan.create.is_empty() && plan.delete.is_empty());

    let plan = reconcile(&mut b, &[], 5, None);
    assert_eq!(engine_pod_of(&plan, 0).name_any(), "zset-0-engine");
}

/// What the kubelet leaves on a pod it evicts for node pressure: phase Failed, reason Evicted,
/// its message, and the engine container ended by SIGTERM (Redis exits 0, `Completed`).
fn evicted_by_the_kubelet(engine: Pod, at: i64) -> Pod {
    let mut pod = terminated(engine, "r8g-1", 0, "Completed", "", at);
    let status = pod.status.as_mut().unwrap();
    status.phase = Some("Failed".into());
    status.reason = Some("Evicted".into());
    status.message = Some(
        "The node was low on resource: ephemeral-storage. Threshold quantity: 2582Mi, available: 1964Mi."
            .into(),
    );
    pod
}

#[test]
fn an_engine_evicted_by_the_kubelet_fails_as_evicted_with_its_message_not_as_a_crash() {
    let mut b = benchmark("");
    let (engine, client) = measuring(&mut b, 0);
    let evicted = evicted_by_the_kubelet(engine, 30);
    let client = stopped(deleted_at(client, 40), 2, "Stopped", 31);
    reconcile(&mut b, &[evicted, client], 32, None);
    let first = engine_of(&b, 0);
    assert_eq!(first.state, EngineState::Failed);
    assert_eq!(first.reason, Some(ConditionReason::EngineEvicted));
    let message = first.message.unwrap_or_default();
    assert!(
        message.starts_with("the kubelet evicted the engine pod from node r8g-1 after 2 of 3 repetitions: The node was low on resource: ephemeral-storage."),
        "{message}"
    );
    assert!(!message.contains("exited with code 0"), "{message}");
    assert_eq!(
        first.repetitions.len(),
        2,
        "what the client measured is kept"
    );
}
