//! The operator's decisions, one behaviour each, without a cluster: pods as the API server
//! would list them, and the plan the operator makes of them.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use super::*;
use crate::controller::decide::conditions::{FAILED, PROGRESSING, READY};
use crate::controller::decide::events::transitions;
use crate::controller::decide::observation::LoadProbe;
use crate::controller::decide::test_fixtures::*;
use crate::crd::{ConditionReason, EngineState, Phase};

#[test]
fn once_the_status_is_written_only_the_first_engine_pod_is_created() {
    let mut b = benchmark("");
    let plan = reconcile(&mut b, &[], 0, None);
    assert_eq!(plan.create.len(), 1);
    assert_eq!(plan.create[0].name_any(), "zset-0-engine");
    let status = b.status.as_ref().unwrap();
    assert_eq!(status.phase, Some(Phase::Pending));
    assert_eq!(status.engines.len(), 2);
    assert_eq!(status.engines[0].started_at, Some(Time(at(0))));
    assert_eq!(status.engines[1].state, EngineState::Pending);
    assert_eq!(status.observed_generation, Some(1));
    assert_eq!(status.workload.as_deref(), Some("sorted-set 20000 members"));
    assert_eq!(condition(&b, PROGRESSING).status, "True");
    assert_eq!(condition(&b, READY).status, "False");
    assert!(plan.requeue.is_some());
}

#[test]
fn an_engine_pod_created_before_an_operator_restart_is_adopted_not_duplicated() {
    // The pod exists, but the status write after creating it never landed.
    let mut b = benchmark("");
    let pods = [created(
        engine_pod_of(&reconcile(&mut benchmark(""), &[], 0, None), 0),
        0,
    )];
    let plan = reconcile(&mut b, &pods, 3, None);
    assert!(plan.create.is_empty(), "{:?}", plan.create);
    assert_eq!(
        b.status.as_ref().unwrap().engines[0].started_at,
        Some(Time(at(0)))
    );
}

#[test]
fn an_unschedulable_engine_waits_with_the_schedulers_message_then_fails_the_benchmark() {
    let mut b = benchmark("");
    let pod = created(engine_pod_of(&reconcile(&mut b, &[], 0, None), 0), 0);
    let pod = unscheduled(
        pod,
        "0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector.",
    );
    reconcile(&mut b, std::slice::from_ref(&pod), 10, None);
    let status = b.status.clone().unwrap();
    assert_eq!(status.phase, Some(Phase::Pending));
    assert_eq!(
        status.engines[0].reason,
        Some(ConditionReason::WaitingForNode)
    );
    let progressing = condition(&b, PROGRESSING);
    assert_eq!(progressing.reason, ConditionReason::WaitingForNode);
    assert!(
        progressing
            .message
            .contains("didn't match Pod's node affinity"),
        "{}",
        progressing.message
    );

    let plan = reconcile(&mut b, std::slice::from_ref(&pod), 61, None);
    let status = b.status.clone().unwrap();
    assert_eq!(status.phase, Some(Phase::Failed));
    assert_eq!(
        status.engines[0].reason,
        Some(ConditionReason::Unschedulable)
    );
    assert!(
        status.engines[0]
            .message
            .as_ref()
            .unwrap()
            .contains("r8g.4xlarge")
    );
    assert_eq!(status.engines[1].reason, Some(ConditionReason::NotRun));
    let failed = condition(&b, FAILED);
    assert_eq!(
        (failed.status.as_str(), failed.reason.as_str()),
        ("True", ConditionReason::Unschedulable.as_str())
    );
    assert!(
        failed.message.contains("didn't match"),
        "{}",
        failed.message
    );
    assert_eq!(plan.delete, vec!["zset-0-engine".to_string()]);
    assert!(plan.create.is_empty());
    assert_eq!(plan.requeue, None);
}

#[test]
fn a_ready_engine_gets_its_client_pointed_at_its_pod_ip() {
    let mut b = benchmark("");
    let pod = created(engine_pod_of(&reconcile(&mut b, &[], 0, None), 0), 0);
    let pod = ready(pod, "r8g-1", "127.1.0.2");
    let plan = reconcile(&mut b, &[pod], 5, None);
    assert_eq!(plan.create.len(), 1);
    let client = &plan.create[0];
    assert_eq!(client.name_any(), "zset-0-client");
    let args = client.spec.as_ref().unwrap().containers[0]
        .args
        .clone()
        .unwrap();
    assert_eq!(
        args[1..3],
        ["--addr".to_string(), "127.1.0.2:6379".to_string()]
    );
    let status = b.status.unwrap();
    assert_eq!(status.phase, Some(Phase::Running));
    assert_eq!(status.engines[0].state, EngineState::Running);
    assert_eq!(status.engines[0].node_name.as_deref(), Some("r8g-1"));
    assert_eq!(status.engines[0].client_attempts, 1);
    assert!(
        status.engines[0]
            .image_id
            .as_ref()
            .unwrap()
            .contains("sha256")
    );
}

#[test]
fn progress_shows_the_repetition_and_how_much_is_loaded() {
    let mut b = benchmark("");
    let engine = first_engine_ready(&mut b, 0);
    let client = ready(client_created(&mut b, &engine, 5), "r8g-1", "127.1.0.3");
    let pods = [engine, client];
    let probe = LoadProbe {
        repetitions_begun: Some(2),
        loaded_percent: Some(25),
        ..Default::default()
    };
    let plan = reconcile(&mut b, &pods, 10, Some(probe));
    let progress = b.status.as_ref().unwrap().progress.clone().unwrap();
    assert_eq!(
        (
            progress.engine,
            progress.engines,
            progress.repetition,
            progress.repetitions
        ),
        (1, 2, 2, 3)
    );
    assert_eq!(progress.summary, "1/2 redis-7.0.15: rep 2/3, 25% loaded");
    assert!(plan.requeue.unwrap() <= Duration::from_secs(10));
    // Without a fresh reading the last one stays, rather than flapping.
    reconcile(&mut b, &pods, 15, None);
    assert_eq!(
        b.status
            .as_ref()
            .unwrap()
            .progress
            .as_ref()
            .unwrap()
            .summary,
        progress.summary
    );
}

#[test]
fn the_next_engine_starts_only_once_the_previous_engines_pods_are_gone() {
    let mut b = benchmark("");
    let leftovers = first_engine_measured(&mut b);
    let status = b.status.clone().unwrap();
    assert_eq!(status.engines[0].state, EngineState::Succeeded);
    assert_eq!(status.engines[0].version.as_deref(), Some("7.0.15"));
    assert_eq!(
        status.engines[0].allocator.as_deref(),
        Some("jemalloc-5.3.0")
    );
    assert_eq!(status.engines[0].repetitions.len(), 3);
    assert!(
        (status.engines[0]
            .summary
            .as_ref()
            .unwrap()
            .bytes_per_item
            .median
            - 96.0)
            .abs()
            < 1e-9
    );
    assert_eq!(status.phase, Some(Phase::Running));

    // Still terminating: wait.
    let plan = reconcile(&mut b, &leftovers, 22, None);
    assert!(plan.create.is_empty());
    // Gone: engine 1 starts.
    let plan = reconcile(&mut b, &[], 23, None);
    assert_eq!(engine_pod_of(&plan, 1).name_any(), "zset-1-engine");
}

#[test]
fn a_finished_comparison_is_ready_with_changes_against_the_first_engine() {
    let mut b = benchmark("");
    first_engine_measured(&mut b);
    let engine = ready(
        created(engine_pod_of(&reconcile(&mut b, &[], 30, None), 1), 30),
        "r8g-2",
        "127.1.0.4",
    );
    let plan = reconcile(&mut b, std::slice::from_ref(&engine), 35, None);
    let client = terminated(
        created(plan.create[0].clone(), 35),
        "r8g-2",
        0,
        "Completed",
        &result_message("valkey", "9.1.2", 72.0, 3, None),
        50,
    );
    let plan = reconcile(&mut b, &[engine, client], 51, None);
    assert_eq!(plan.delete.len(), 2);
    let status = b.status.clone().unwrap();
    assert_eq!(status.phase, Some(Phase::Succeeded));
    assert_eq!(status.best_engine.as_deref(), Some("valkey-9.1.2"));
    assert_eq!(status.best_bytes_per_item, Some(72.0));
    assert_eq!(status.engines[0].change_vs_first_percent, Some(0.0));
    assert!((status.engines[1].change_vs_first_percent.unwrap() + 25.0).abs() < 1e-9);
    assert_eq!(status.finished_at, Some(Time(at(51))));
    assert_eq!(
        status.progress.as_ref().unwrap().summary,
        "done: 2/2 engines"
    );
    assert_eq!(condition(&b, READY).status, "True");
    assert_eq!(condition(&b, READY).reason, ConditionReason::Completed);
    assert_eq!(condition(&b, FAILED).status, "False");
    assert_eq!(plan.requeue, None);
    // Nothing changes on a later look.
    let before = b.status.clone();
    let plan = reconcile(&mut b, &[], 500, None);
    assert_eq!(b.status, before);
    assert!(plan.create.is_empty() && plan.delete.is_empty());
}

#[test]
fn an_oom_killed_engine_keeps_its_partial_results_and_the_next_engine_still_runs() {
    let mut b = benchmark("");
    let engine = first_engine_ready(&mut b, 0);
    let client = client_created(&mut b, &engine, 5);
    let dead = terminated(engine.clone(), "r8g-1", 137, "OOMKilled", "", 30);
    // The client has not noticed yet: wait for its partial result.
    let still_running = ready(client.clone(), "r8g-1", "127.1.0.3");
    let plan = reconcile(&mut b, &[dead.clone(), still_running], 31, None);
    assert!(plan.delete.is_empty());
    assert_eq!(
        b.status.as_ref().unwrap().engines[0].state,
        EngineState::Running
    );

    let partial = terminated(
        client,
        "r8g-1",
        1,
        "Error",
        &result_message("redis", "7.0.15", 96.0, 2, Some("ConnectionLost")),
        31,
    );
    let plan = reconcile(&mut b, &[dead, partial], 32, None);
    let engine = &b.status.as_ref().unwrap().engines[0];
    assert_eq!(engine.state, EngineState::Failed);
    assert_eq!(engine.reason, Some(ConditionReason::EngineOOMKilled));
    assert!(
        engine
            .message
            .as_ref()
            .unwrap()
            .contains("after 2 of 3 repetitions"),
        "{:?}",
        engine.message
    );
    assert_eq!(engine.repetitions.len(), 2);
    assert!(engine.summary.is_some());
    assert_eq!(plan.delete.len(), 2);
    // The benchmark goes on with the next engine.
    let plan = reconcile(&mut b, &[], 33, None);
    assert_eq!(engine_pod_of(&plan, 1).name_any(), "zset-1-engine");
}

#[test]
fn an_engine_oom_killed_during_a_snapshot_is_reported_with_the_phase_its_client_was_in() {
    let mut b = benchmark("");
    let engine = first_engine_ready(&mut b, 0);
    let client = client_created(&mut b, &engine, 5);
    let dead = terminated(engine, "r8g-1", 137, "OOMKilled", "", 30);
    // The client's connection broke in repetition 2's snapshot phase: its report names it.
    let repetitions = (1..=2).map(|i| repetition(i, 96.0)).collect();
    let mut report = report_of("valkey", "9.1.2", repetitions, Some("ConnectionLost"));
    report.error.as_mut().unwrap().phase =
        Some(crate::client::measurement::measured::FailedPhase {
            name: crate::client::phases::PhaseKind::Snapshot,
            repetition: 2,
        });
    let message = crate::client::pod_io::result::ClientResult::from_report(&report).to_message();
    let partial = terminated(client, "r8g-1", 1, "Error", &message, 31);
    reconcile(&mut b, &[dead, partial], 32, None);
    let engine = &b.status.as_ref().unwrap().engines[0];
    assert_eq!(engine.reason, Some(ConditionReason::EngineOOMKilled));
    let message = engine.message.as_deref().unwrap_or_default();
    assert!(
        message.contains("OOMKilled (memory limit ")
            && message.contains("during repetition 2's snapshot phase, after 2 of 3 repetitions")
            && message.contains("the save forks"),
        "{message}"
    );
    assert_eq!(engine.repetitions.len(), 2);
}

#[test]
fn only_a_forking_engine_killed_in_a_save_or_sync_is_told_its_fork_copies() {
    use crate::client::phases::PhaseKind;
    use crate::controller::decide::lifecycle::forked_copy_note;
    use crate::crd::EngineKind;
    for phase in [PhaseKind::Snapshot, PhaseKind::Replica] {
        assert!(forked_copy_note(&phase, EngineKind::Valkey).contains("the save forks"));
        assert!(forked_copy_note(&phase, EngineKind::Redis).contains("the save forks"));
        // Dragonfly saves and syncs without a fork: nothing was copied.
        assert_eq!(forked_copy_note(&phase, EngineKind::Dragonfly), "");
    }
    assert_eq!(forked_copy_note(&PhaseKind::Churn, EngineKind::Valkey), "");
}

#[test]
fn an_entrypoint_that_cannot_find_its_server_fails_as_a_start_error_not_a_crash() {
    let mut b = benchmark("");
    let plan = reconcile(&mut b, &[], 0, None);
    let engine = created(engine_pod_of(&plan, 0), 0);
    // An official image's docker-entrypoint.sh execs a program the image lacks: its shell
    // exits 127, and the log tail is the container's last words.
    let dead = terminated(
        engine,
        "r8g-1",
        127,
        "Error",
        "/usr/local/bin/docker-entrypoint.sh: exec: redis-server: not found",
        3,
    );
    reconcile(&mut b, &[dead], 4, None);
    let engine = &b.status.as_ref().unwrap().engines[0];
    assert_eq!(engine.state, EngineState::Failed);
    assert_eq!(engine.reason, Some(ConditionReason::RunContainerError));
    let message = engine.message.as_deref().unwrap_or_default();
    assert!(
        message.starts_with("the engine image's entrypoint could not find the server (exit 127); spec.engines[0].image must start redis-server")
            && message.ends_with("exec: redis-server: not found"),
        "{message}"
    );
}

#[test]
fn keep_failed_leaves_a_failed_engines_pods_in_place_for_debugging() {
    let mut b = benchmark("  cleanupPolicy: KeepFailed\n");
    let engine = created(engine_pod_of(&reconcile(&mut b, &[], 0, None), 0), 0);
    let pulling = waiting(engine, "r8g-1", "InvalidImageName");
    let plan = reconcile(&mut b, std::slice::from_ref(&pulling), 5, None);
    let status = b.status.clone().unwrap();
    assert_eq!(
        status.engines[0].reason,
        Some(ConditionReason::ImagePullFailed)
    );
    assert!(
        status.engines[0]
            .message
            .as_ref()
            .unwrap()
            .contains("redis:7.0.15")
    );
    assert!(plan.delete.is_empty());
    // The kept pod does not hold up the next engine.
    let plan = reconcile(&mut b, &[pulling], 6, None);
    assert_eq!(engine_pod_of(&plan, 1).name_any(), "zset-1-engine");
}

#[test]
fn a_failed_client_is_retried_a_bounded_number_of_times() {
    let mut b = benchmark("");
    let engine = first_engine_ready(&mut b, 0);
    let mut client = client_created(&mut b, &engine, 5);
    for attempt in 1..=3u32 {
        let crashed = terminated(
            client.clone(),
            "r8g-1",
            101,
            "Error",
            "thread 'main' panicked",
            10 * attempt as i64,
        );
        let plan = reconcile(
            &mut b,
            &[engine.clone(), crashed],
            10 * attempt as i64 + 1,
            None,
        );
        let status = b.status.clone().unwrap();
        if attempt < 3 {
            assert_eq!(plan.create.len(), 1, "attempt {attempt}");
            assert_eq!(
                plan.create[0].name_any(),
                format!("zset-0-client-{}", attempt + 1)
            );
            assert_eq!(plan.delete, vec![client.name_any()]);
            assert_eq!(status.engines[0].client_attempts, attempt + 1);
            assert!(
                transitions(
                    &MemoryBenchmarkStatus {
                        engines: vec![
                            EngineStatus {
                                client_attempts: attempt,
                                ..status.engines[0].clone()
                            },
                            status.engines[1].clone()
                        ],
                        ..status.clone()
                    },
                    &status
                )
                .iter()
                .any(|t| t.reason == ConditionReason::ClientRetry)
            );
            client = created(plan.create[0].clone(), 10 * attempt as i64 + 1);
        } else {
            assert!(plan.create.is_empty());
            assert_eq!(
                status.engines[0].reason,
                Some(ConditionReason::ClientFailed)
            );
            assert!(
                status.engines[0]
                    .message
                    .as_ref()
                    .unwrap()
                    .contains("panicked")
            );
        }
    }
}

#[test]
fn a_measurement_error_from_the_engine_is_not_retried() {
    let mut b = benchmark("");
    let engine = first_engine_ready(&mut b, 0);
    let client = client_created(&mut b, &engine, 5);
    let refused = terminated(
        client,
        "r8g-1",
        1,
        "Error",
        &result_message("redis", "7.0.15", 96.0, 1, Some("OutOfMemory")),
        9,
    );
    let plan = reconcile(&mut b, &[engine, refused], 10, None);
    assert!(plan.create.is_empty());
    let engine = &b.status.as_ref().unwrap().engines[0];
    assert_eq!(engine.reason, Some(ConditionReason::EngineOutOfMemory));
    assert_eq!(engine.repetitions.len(), 1);
}

#[test]
fn an_invalid_spec_fails_without_creating_anything_and_waits_for_a_change() {
    let mut b = benchmark("");
    b.spec.engines[0].memory = Some("lots".into());
    let plan = reconcile(&mut b, &[], 0, None);
    assert!(plan.create.is_empty());
    assert_eq!(plan.requeue, None);
    assert_eq!(b.status.as_ref().unwrap().phase, Some(Phase::Failed));
    let failed = condition(&b, FAILED);
    assert_eq!(failed.reason, ConditionReason::InvalidSpec);
    assert!(failed.message.contains("spec.engines[0].memory"));
}

#[test]
fn conditions_keep_their_transition_time_until_their_status_flips() {
    let mut b = benchmark("");
    let pod = unscheduled(
        created(engine_pod_of(&reconcile(&mut b, &[], 0, None), 0), 0),
        "no nodes",
    );
    let first = condition(&b, PROGRESSING).last_transition_time.clone();
    reconcile(&mut b, std::slice::from_ref(&pod), 20, None);
    // Reason and message changed, status did not.
    assert_eq!(
        condition(&b, PROGRESSING).reason,
        ConditionReason::WaitingForNode
    );
    assert_eq!(condition(&b, PROGRESSING).last_transition_time, first);
    reconcile(&mut b, &[pod], 61, None);
    assert_eq!(condition(&b, PROGRESSING).status, "False");
    assert_eq!(
        condition(&b, PROGRESSING).last_transition_time,
        Time(at(61))
    );
}

#[test]
fn a_reconciliation_that_learns_nothing_new_changes_nothing() {
    let mut b = benchmark("");
    let pod = unscheduled(
        created(engine_pod_of(&reconcile(&mut b, &[], 0, None), 0), 0),
        "no nodes",
    );
    reconcile(&mut b, std::slice::from_ref(&pod), 10, None);
    let before = b.status.clone();
    reconcile(&mut b, std::slice::from_ref(&pod), 15, None);
    assert_eq!(b.status, before, "only time passed");
}

#[test]
fn events_follow_each_engines_transitions() {
    let mut b = benchmark("");
    let old = b.status.clone().unwrap_or_default();
    reconcile(&mut b, &[], 0, None);
    let events = transitions(&old, b.status.as_ref().unwrap());
    assert_eq!(
        events.iter().map(|e| e.reason.as_str()).collect::<Vec<_>>(),
        ["EngineCreated"]
    );

    let mut b = benchmark("");
    let before_failure = {
        let pod = created(engine_pod_of(&reconcile(&mut b, &[], 0, None), 0), 0);
        reconcile(&mut b, &[unscheduled(pod.clone(), "no nodes")], 10, None);
        let old = b.status.clone().unwrap();
        reconcile(&mut b, &[unscheduled(pod, "no nodes")], 61, None);
        old
    };
    let events = transitions(&before_failure, b.status.as_ref().unwrap());
    let reasons: Vec<(&str, bool)> = events
        .iter()
        .map(|e| (e.reason.as_str(), e.warning))
        .collect();
    assert_eq!(
        reasons,
        [
            (ConditionReason::Unschedulable.as_str(), true),
            ("BenchmarkFailed", true)
        ]
    );
}

#[test]
fn the_client_under_way_is_where_progress_is_read() {
    let mut b = benchmark("");
    let engine = first_engine_ready(&mut b, 0);
    assert_eq!(
        probe_target(&b, std::slice::from_ref(&engine)),
        None,
        "no client yet"
    );
    let client = ready(client_created(&mut b, &engine, 5), "r8g-1", "127.1.0.3");
    // The engine's container, on the engine's node, is what a mark of the client reads.
    let engine_node = engine.spec.as_ref().and_then(|s| s.node_name.clone());
    assert!(engine_node.is_some(), "the engine pod is on a node");
    assert_eq!(
        probe_target(&b, &[engine.clone(), client]),
        Some(ProbeTarget {
            address: "127.1.0.3:9121".parse().unwrap(),
            engine: engine_node.map(|node| EngineContainer {
                namespace: engine.namespace().unwrap_or_default(),
                pod: engine.name_any(),
                container: "engine".into(),
                node,
            }),
            replica: None,
        })
    );
}

#[test]
fn a_plan_the_client_refuses_fails_the_benchmark_with_its_reason_naming_the_field_and_versions() {
    use crate::client::measurement::plan::{MEMBENCH_VERSION, PLAN_FORMAT, RunPlan};
    let mut b = fresh_benchmark("");
    b.spec.engines.truncate(1);
    reconcile(&mut b, &[], 0, None);
    let engine = first_engine_ready(&mut b, 0);
    let client = client_created(&mut b, &engine, 5);
    // The plan the operator gave, as a client of an older membench finds it: of a newer
    // format (one a newer operator would write).
    let given = crate::controller::build::pods::plan_of_client_pod(&client)
        .expect("the client pod carries its plan")
        .unwrap();
    let mut newer = serde_json::to_value(&given).unwrap();
    newer["format"] = (PLAN_FORMAT + 1).into();
    newer["written_by"] = "9.4.0".into();
    let refusal = RunPlan::from_json(&newer.to_string()).unwrap_err();
    // What `membench load` leaves in its termination message when it refuses a plan.
    let message = crate::client::pod_io::result::ClientResult {
        error: Some((&refusal).into()),
        ..Default::default()
    }
    .to_message();
    let refused = terminated(client, "r8g-1", 2, "Error", &message, 9);
    let plan = reconcile(&mut b, &[engine, refused], 10, None);
    assert!(
        plan.create.is_empty(),
        "not retried: another client would refuse the same plan"
    );
    assert_eq!(b.status.as_ref().unwrap().phase, Some(Phase::Failed));
    let failed = condition(&b, FAILED);
    assert_eq!(failed.status, "True");
    assert_eq!(failed.reason, "InvalidPlan");
    for said in [
        "the run plan's format is".to_string(),
        format!("is {}", PLAN_FORMAT + 1),
        "membench 9.4.0".to_string(),
        format!("membench {MEMBENCH_VERSION}"),
    ] {
        assert!(failed.message.contains(&said), "{said}: {}", failed.message);
    }
}
