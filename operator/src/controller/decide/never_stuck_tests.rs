//! Decisions that keep a benchmark from getting stuck, without a cluster: the status written
//! before any pod, pods the API server refuses, readiness blips, containers that cannot start,
//! images the node retries, and the queue on a busy node pool.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStatus, Pod, PodCondition,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use crate::controller::decide::conditions::PROGRESSING;
use crate::controller::decide::observation::PodRejection;
use crate::controller::decide::test_fixtures::*;
use crate::controller::rejection_message;
use crate::crd::{ConditionReason, EngineState, MemoryBenchmark, Phase};

const BUSY: &str = "0/4 nodes are available: 2 node(s) didn't match Pod's node affinity/selector, 2 node(s) didn't match pod anti-affinity rules. preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling.";

fn engine_state(b: &MemoryBenchmark, index: usize) -> (EngineState, Option<ConditionReason>) {
    let engine = &b.status.as_ref().unwrap().engines[index];
    (engine.state.clone(), engine.reason.clone())
}

fn message(b: &MemoryBenchmark, index: usize) -> String {
    b.status.as_ref().unwrap().engines[index]
        .message
        .clone()
        .unwrap_or_default()
}

/// The engine pod after its readiness probe started failing at `since` (it was ready before).
fn unready(mut pod: Pod, since: i64) -> Pod {
    let status = pod.status.as_mut().unwrap();
    status.container_statuses = Some(vec![ContainerStatus {
        name: "engine".into(),
        ready: false,
        state: Some(ContainerState {
            running: Some(ContainerStateRunning {
                started_at: Some(Time(at(1))),
            }),
            ..Default::default()
        }),
        ..Default::default()
    }]);
    status.conditions = Some(vec![PodCondition {
        type_: "Ready".into(),
        status: "False".into(),
        last_transition_time: Some(Time(at(since))),
        ..Default::default()
    }]);
    pod
}

#[test]
fn the_first_reconciliation_writes_the_status_with_started_at_before_any_pod() {
    let mut b = fresh_benchmark("");
    let plan = reconcile(&mut b, &[], 0, None);
    assert!(plan.create.is_empty(), "{:?}", plan.create);
    let status = b.status.clone().unwrap();
    assert_eq!(status.started_at, Some(Time(at(0))));
    assert_eq!(status.phase, Some(Phase::Pending));
    assert!(
        status
            .engines
            .iter()
            .all(|e| e.state == EngineState::Pending)
    );
    assert!(plan.requeue.is_some());
    // The next reconciliation creates the first engine pod.
    let plan = reconcile(&mut b, &[], 1, None);
    assert_eq!(engine_pod_of(&plan, 0).name_any(), "zset-0-engine");
}

#[test]
fn timeout_seconds_fires_even_when_no_pod_could_ever_be_created() {
    // Every create failed for a reason worth retrying (a webhook that cannot be reached):
    // nothing exists but the status written first.
    let mut b = benchmark("");
    reconcile(&mut b, &[], 1800, None);
    assert_eq!(b.status.as_ref().unwrap().phase, Some(Phase::Pending));
    let plan = reconcile(&mut b, &[], 3600, None);
    assert!(plan.create.is_empty());
    assert_eq!(b.status.as_ref().unwrap().phase, Some(Phase::Failed));
    assert_eq!(
        engine_state(&b, 0),
        (EngineState::Failed, Some(ConditionReason::Timeout))
    );
    assert_eq!(engine_state(&b, 1).1, Some(ConditionReason::NotRun));
}

#[test]
fn a_refused_engine_pod_fails_that_engine_with_the_api_servers_message_and_the_next_runs() {
    let mut b = benchmark("");
    let refusal = PodRejection {
        pod: "zset-0-engine".into(),
        message: "pods \"zset-0-engine\" is forbidden: exceeded quota: small, requested: limits.memory=471Mi, used: limits.memory=0, limited: limits.memory=256Mi".into(),
    };
    let plan = reconcile_seeing(&mut b, &[], 1, None, &[refusal], &[]);
    assert!(plan.create.is_empty(), "{:?}", plan.create);
    assert_eq!(
        engine_state(&b, 0),
        (EngineState::Failed, Some(ConditionReason::PodRejected))
    );
    assert!(
        message(&b, 0).contains("exceeded quota: small"),
        "{}",
        message(&b, 0)
    );
    assert!(message(&b, 0).contains("zset-0-engine"));
    // Not NotRun: the next engine's pod (its own memory, its own image) may be admitted.
    assert_eq!(engine_state(&b, 1).0, EngineState::Pending);
    let plan = reconcile(&mut b, &[], 2, None);
    assert_eq!(engine_pod_of(&plan, 1).name_any(), "zset-1-engine");
}

#[test]
fn a_refused_client_pod_fails_its_engine_as_pod_rejected() {
    let mut b = benchmark("");
    let engine = first_engine_ready(&mut b, 1);
    let refusal = PodRejection {
        pod: "zset-0-client".into(),
        message: "pods \"zset-0-client\" is forbidden: maximum cpu usage per Container is 500m, but limit is 1".into(),
    };
    let plan = reconcile_seeing(&mut b, &[engine], 5, None, &[refusal], &[]);
    assert!(plan.create.is_empty());
    assert_eq!(plan.delete, vec!["zset-0-engine".to_string()]);
    assert_eq!(engine_state(&b, 0).1, Some(ConditionReason::PodRejected));
    assert!(message(&b, 0).contains("maximum cpu usage per Container"));
}

fn api_error(code: u16, reason: &str, message: &str) -> kube::Error {
    kube::Error::Api(Box::new(kube::core::Status {
        code,
        reason: reason.into(),
        message: message.into(),
        ..Default::default()
    }))
}

#[test]
fn admission_and_validation_refusals_are_final_and_everything_else_is_retried() {
    for (code, why, text) in [
        (
            403,
            "Forbidden",
            "pods \"a\" is forbidden: violates PodSecurity \"restricted:latest\": runAsNonRoot != true",
        ),
        (
            403,
            "Forbidden",
            "pods \"a\" is forbidden: exceeded quota: small",
        ),
        (
            422,
            "Invalid",
            "Pod \"a\" is invalid: spec.affinity.nodeAffinity...values: Required value",
        ),
        (
            400,
            "BadRequest",
            "admission webhook \"deny.example.com\" denied the request: no",
        ),
    ] {
        assert_eq!(
            rejection_message(&api_error(code, why, text)).as_deref(),
            Some(text),
            "{text}"
        );
    }
    for (code, why, text) in [
        (
            500,
            "InternalError",
            "Internal error occurred: failed calling webhook \"x\": connection refused",
        ),
        (
            409,
            "Conflict",
            "Operation cannot be fulfilled on resourcequotas \"q\"",
        ),
        (429, "TooManyRequests", "slow down"),
        (
            403,
            "Forbidden",
            "pods is forbidden: User \"system:serviceaccount:m:op\" cannot create resource \"pods\" in API group \"\" in the namespace \"b\"",
        ),
        (
            403,
            "Forbidden",
            "pods \"a\" is forbidden: unable to create new content in namespace b because it is being terminated",
        ),
    ] {
        assert_eq!(
            rejection_message(&api_error(code, why, text)),
            None,
            "{text}"
        );
    }
}

#[test]
fn a_readiness_blip_while_the_client_runs_is_not_a_startup_timeout() {
    let mut b = benchmark("");
    let (engine, client) = measuring(&mut b, 1);
    // Unready since 900 s; the container started at 1 s, far beyond the 300 s startup timeout.
    let blip = unready(engine.clone(), 900);
    reconcile(&mut b, &[blip.clone(), client.clone()], 1000, None);
    assert_eq!(
        engine_state(&b, 0),
        (EngineState::Running, Some(ConditionReason::Measuring))
    );
    assert!(
        message(&b, 0).contains("readiness probe"),
        "{}",
        message(&b, 0)
    );
    // ... however long it lasts: the client decides.
    reconcile(&mut b, &[blip, client.clone()], 2000, None);
    assert_eq!(engine_state(&b, 0).0, EngineState::Running);
    // Ready again.
    reconcile(&mut b, &[engine, client], 2005, None);
    assert_eq!(
        engine_state(&b, 0),
        (EngineState::Running, Some(ConditionReason::Measuring))
    );
    assert_eq!(message(&b, 0), "");
}

#[test]
fn an_engine_that_was_ready_is_not_timed_out_from_its_start_even_when_the_pod_cannot_tell() {
    let mut b = benchmark("");
    let (engine, client) = measuring(&mut b, 1);
    // Not ready, with no Ready condition to date it: only the status knows it was ready.
    let mut unknown = unready(engine, 900);
    unknown.status.as_mut().unwrap().conditions = None;
    reconcile(&mut b, &[unknown, client], 1000, None);
    assert_eq!(engine_state(&b, 0).0, EngineState::Running);
}

#[test]
fn an_engine_unready_without_a_client_fails_once_unready_for_the_startup_timeout() {
    let mut b = benchmark("");
    let engine = first_engine_ready(&mut b, 1);
    // Ready once: its client is created; then it turns unready before the client exists.
    reconcile(&mut b, std::slice::from_ref(&engine), 5, None);
    b.status.as_mut().unwrap().engines[0].client_attempts = 0;
    let blip = unready(engine, 100);
    reconcile(&mut b, std::slice::from_ref(&blip), 200, None);
    assert_eq!(engine_state(&b, 0).0, EngineState::Running);
    assert!(message(&b, 0).contains("waiting for it to recover"));
    reconcile(&mut b, std::slice::from_ref(&blip), 400, None);
    assert_eq!(
        engine_state(&b, 0),
        ("Failed".into(), Some(ConditionReason::EngineNotReady))
    );
    assert!(message(&b, 0).contains("was ready, then stopped"));
}

#[test]
fn a_container_that_cannot_be_created_or_started_fails_its_engine_with_that_reason() {
    for why in [
        ConditionReason::CreateContainerError,
        ConditionReason::RunContainerError,
    ] {
        let mut b = benchmark("");
        let pod = created(engine_pod_of(&reconcile(&mut b, &[], 1, None), 0), 1);
        let stuck = waiting(pod, "r8g-1", why.as_str());
        let plan = reconcile(&mut b, &[stuck], 5, None);
        assert_eq!(engine_state(&b, 0), (EngineState::Failed, Some(why)));
        assert!(message(&b, 0).contains("could not be started"));
        assert_eq!(plan.delete, vec!["zset-0-engine".to_string()]);
        // The next engine runs.
        assert_eq!(engine_state(&b, 1).0, EngineState::Pending);
    }
}

#[test]
fn a_missing_password_secret_is_waited_for_then_fails_naming_the_secret() {
    let mut b = benchmark("  auth: {passwordSecretRef: {name: engine-password, key: password}}\n");
    let pod = created(engine_pod_of(&reconcile(&mut b, &[], 1, None), 0), 1);
    let mut missing = waiting(pod, "r8g-1", "CreateContainerConfigError");
    missing
        .status
        .as_mut()
        .unwrap()
        .container_statuses
        .as_mut()
        .unwrap()[0]
        .state
        .as_mut()
        .unwrap()
        .waiting
        .as_mut()
        .unwrap()
        .message = Some("secret \"engine-password\" not found".into());
    // The kubelet retries (the Secret may be created in a moment): wait, saying what is missing.
    let plan = reconcile(&mut b, std::slice::from_ref(&missing), 5, None);
    assert!(plan.delete.is_empty());
    assert_eq!(
        engine_state(&b, 0),
        ("Pending".into(), Some(ConditionReason::WaitingForConfig))
    );
    for expected in [
        "secret \"engine-password\" not found",
        "namespace \"bench\"",
        "300 s",
    ] {
        assert!(
            message(&b, 0).contains(expected),
            "{expected}: {}",
            message(&b, 0)
        );
    }
    reconcile(&mut b, std::slice::from_ref(&missing), 250, None);
    assert_eq!(
        engine_state(&b, 0).1,
        Some(ConditionReason::WaitingForConfig)
    );
    // 300 s after the pod was created: the engine fails with the kubelet's reason.
    let plan = reconcile(&mut b, std::slice::from_ref(&missing), 301, None);
    assert_eq!(
        engine_state(&b, 0),
        (
            "Failed".into(),
            Some(ConditionReason::CreateContainerConfigError)
        )
    );
    assert!(message(&b, 0).contains("could not be created within 300 s"));
    assert!(message(&b, 0).contains("engine-password"));
    assert_eq!(plan.delete, vec!["zset-0-engine".to_string()]);
}

#[test]
fn an_engine_whose_program_cannot_start_fails_as_run_container_error() {
    let mut b = benchmark("");
    let pod = created(engine_pod_of(&reconcile(&mut b, &[], 1, None), 0), 1);
    let never = terminated(
        pod,
        "r8g-1",
        128,
        "StartError",
        "exec: \"redis-server\": executable file not found in $PATH",
        3,
    );
    reconcile(&mut b, &[never], 5, None);
    assert_eq!(
        engine_state(&b, 0).1,
        Some(ConditionReason::RunContainerError)
    );
    assert!(message(&b, 0).contains("executable file not found"));
}

#[test]
fn a_client_that_cannot_start_is_not_retried_and_the_rest_is_not_run() {
    let mut b = benchmark("");
    let engine = first_engine_ready(&mut b, 1);
    let client = client_created(&mut b, &engine, 5);
    let never = terminated(
        client,
        "r8g-1",
        128,
        "StartError",
        "exec: \"load\": executable file not found in $PATH",
        6,
    );
    let plan = reconcile(&mut b, &[engine, never], 7, None);
    assert!(plan.create.is_empty(), "not retried: {:?}", plan.create);
    assert_eq!(
        engine_state(&b, 0).1,
        Some(ConditionReason::RunContainerError)
    );
    assert_eq!(b.status.as_ref().unwrap().engines[0].client_attempts, 1);
    assert_eq!(engine_state(&b, 1).1, Some(ConditionReason::NotRun));
}

#[test]
fn an_image_pull_error_is_retried_for_a_bounded_time_before_the_engine_fails() {
    let mut b = benchmark("");
    let pod = created(engine_pod_of(&reconcile(&mut b, &[], 1, None), 0), 1);
    let pulling = waiting(pod.clone(), "r8g-1", "ErrImagePull");
    let plan = reconcile(&mut b, std::slice::from_ref(&pulling), 5, None);
    assert!(plan.delete.is_empty());
    assert_eq!(
        engine_state(&b, 0),
        ("Pending".into(), Some(ConditionReason::WaitingForImage))
    );
    assert!(
        message(&b, 0).contains("redis:7.0.15"),
        "{}",
        message(&b, 0)
    );
    let backing_off = waiting(pod, "r8g-1", "ImagePullBackOff");
    reconcile(&mut b, std::slice::from_ref(&backing_off), 250, None);
    assert_eq!(
        engine_state(&b, 0).1,
        Some(ConditionReason::WaitingForImage)
    );
    // 300 s after the pod was created (it has no PodScheduled condition to say more).
    let plan = reconcile(&mut b, std::slice::from_ref(&backing_off), 301, None);
    assert_eq!(
        engine_state(&b, 0),
        ("Failed".into(), Some(ConditionReason::ImagePullFailed))
    );
    assert!(
        message(&b, 0).contains("retried for 300 s"),
        "{}",
        message(&b, 0)
    );
    // The registry, and that the pod had no pull Secret to present to it.
    assert!(
        message(&b, 0).contains("; registry docker.io; the pod presented no imagePullSecrets"),
        "{}",
        message(&b, 0)
    );
    assert_eq!(plan.delete, vec!["zset-0-engine".to_string()]);
}

#[test]
fn an_image_pull_failure_names_the_registry_and_the_pull_secrets_the_pod_presented() {
    let mut b = benchmark("  imagePullSecrets: [{name: mirror-creds}]\n");
    let pod = created(engine_pod_of(&reconcile(&mut b, &[], 1, None), 0), 1);
    let backing_off = waiting(pod, "r8g-1", "ImagePullBackOff");
    reconcile(&mut b, std::slice::from_ref(&backing_off), 301, None);
    assert_eq!(
        engine_state(&b, 0),
        ("Failed".into(), Some(ConditionReason::ImagePullFailed))
    );
    let message = message(&b, 0);
    assert!(
        message.contains("cannot pull the engine image redis:7.0.15")
            && message.contains(
                "registry docker.io; the pod presented the imagePullSecret mirror-creds (namespace bench)"
            ),
        "{message}"
    );
}

#[test]
fn nodes_busy_with_other_engines_mean_waiting_with_no_scheduling_deadline() {
    let mut b = benchmark("");
    let pod = unscheduled(
        created(engine_pod_of(&reconcile(&mut b, &[], 1, None), 0), 1),
        BUSY,
    );
    // Far beyond the 60 s scheduling deadline of these tests (within timeoutSeconds, 3600).
    let plan = reconcile(&mut b, std::slice::from_ref(&pod), 3000, None);
    assert!(plan.delete.is_empty());
    assert_eq!(
        engine_state(&b, 0),
        ("Pending".into(), Some(ConditionReason::WaitingForFreeNode))
    );
    let waiting_for = "waiting for a free r8g.4xlarge node, 0 benchmarks ahead";
    assert_eq!(message(&b, 0), waiting_for);
    let status = b.status.as_ref().unwrap();
    assert_eq!(status.phase, Some(Phase::Pending));
    assert!(
        status
            .progress
            .as_ref()
            .unwrap()
            .summary
            .ends_with(waiting_for),
        "{:?}",
        status.progress
    );
    let progressing = condition(&b, PROGRESSING);
    assert_eq!(progressing.reason, ConditionReason::WaitingForFreeNode);
    assert!(
        progressing.message.contains(waiting_for),
        "{}",
        progressing.message
    );
}

#[test]
fn a_later_benchmark_waits_behind_an_earlier_one_for_the_same_pool_without_a_pod() {
    // The earlier benchmark waits for a free node (its pod cannot be placed).
    let mut first = benchmark("");
    first.metadata.name = Some("first".into());
    first.metadata.uid = Some("uid-first".into());
    let pod = unscheduled(
        created(engine_pod_of(&reconcile(&mut first, &[], 1, None), 0), 1),
        BUSY,
    );
    reconcile(&mut first, std::slice::from_ref(&pod), 5, None);
    let mut later = fresh_benchmark("");
    later.metadata.creation_timestamp = Some(Time(at(10)));
    reconcile(&mut later, &[], 10, None);
    let others = [Arc::new(first.clone()), Arc::new(later.clone())];
    let plan = reconcile_seeing(&mut later, &[], 11, None, &[], &others);
    assert!(plan.create.is_empty(), "{:?}", plan.create);
    assert_eq!(
        message(&later, 0),
        "waiting for a free r8g.4xlarge node, 1 benchmark ahead"
    );
    assert_eq!(
        engine_state(&later, 0).1,
        Some(ConditionReason::WaitingForFreeNode)
    );
    // Benchmarks for another pool are not ahead.
    let mut elsewhere = first.clone();
    elsewhere.spec.instance_type = "r7i.4xlarge".into();
    let plan = reconcile_seeing(&mut later, &[], 12, None, &[], &[Arc::new(elsewhere)]);
    assert_eq!(engine_pod_of(&plan, 0).name_any(), "zset-0-engine");
}

#[test]
fn the_earliest_waiting_benchmark_keeps_its_place_when_a_later_one_waits_too() {
    let mut first = benchmark("");
    let pod = unscheduled(
        created(engine_pod_of(&reconcile(&mut first, &[], 1, None), 0), 1),
        BUSY,
    );
    let mut later = first.clone();
    later.metadata.name = Some("later".into());
    later.metadata.uid = Some("uid-later".into());
    later.metadata.creation_timestamp = Some(Time(at(10)));
    later.status.as_mut().unwrap().engines[0].reason = Some(ConditionReason::WaitingForFreeNode);
    let others = [Arc::new(later)];
    reconcile_seeing(
        &mut first,
        std::slice::from_ref(&pod),
        20,
        None,
        &[],
        &others,
    );
    assert_eq!(
        message(&first, 0),
        "waiting for a free r8g.4xlarge node, 0 benchmarks ahead"
    );
}

#[test]
fn later_engines_prefer_the_node_the_first_engine_ran_on() {
    let mut b = benchmark("");
    let (engine, client) = measuring(&mut b, 1);
    let done = terminated(
        client,
        "r8g-1",
        0,
        "Completed",
        &result_message("redis", "7.0.15", 96.0, 3, None),
        20,
    );
    reconcile(&mut b, &[engine, done], 21, None);
    let plan = reconcile(&mut b, &[], 22, None);
    let pod = engine_pod_of(&plan, 1);
    let preferred = pod
        .spec
        .unwrap()
        .affinity
        .unwrap()
        .node_affinity
        .unwrap()
        .preferred_during_scheduling_ignored_during_execution
        .unwrap();
    assert_eq!(preferred.len(), 1);
    assert_eq!(preferred[0].weight, 100);
    let fields = preferred[0].preference.match_fields.clone().unwrap();
    assert_eq!(fields[0].key, "metadata.name");
    assert_eq!(fields[0].values, Some(vec!["r8g-1".to_string()]));
    assert_eq!(
        b.status.as_ref().unwrap().engines[0].node_name.as_deref(),
        Some("r8g-1")
    );
}
