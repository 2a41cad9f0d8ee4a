//! `spec.parallelism` and `spec.instanceTypes` in the decision, without a cluster: which engine
//! pods exist at once, on which instance type, and what a run waits for when the pool has
//! fewer nodes than the parallelism.

use kube::ResourceExt;

use super::conditions::PROGRESSING;
use super::test_fixtures::*;
use crate::controller::build::pods::INSTANCE_TYPE_LABEL;
use crate::crd::{ConditionReason, EngineState, MemoryBenchmark, Phase};

/// Three engines on r8g.4xlarge, `parallelism` at once; the first status written at time 0.
fn three_engines(parallelism: u32) -> MemoryBenchmark {
    let mut b = fresh_benchmark(&format!("  parallelism: {parallelism}\n"));
    b.spec.engines.push(crate::crd::EngineSpec::new(
        crate::crd::EngineKind::Redis,
        "8.2.3",
    ));
    reconcile(&mut b, &[], 0, None);
    b
}

fn names(pods: &[k8s_openapi::api::core::v1::Pod]) -> Vec<String> {
    pods.iter().map(|p| p.name_any()).collect()
}

#[test]
fn parallelism_creates_that_many_engine_pods_at_once_and_no_more() {
    let mut b = three_engines(2);
    let plan = reconcile(&mut b, &[], 1, None);
    assert_eq!(names(&plan.create), ["zset-0-engine", "zset-1-engine"]);
    // Both keep a node to themselves: the anti-affinity that holds across benchmarks holds
    // between them too.
    for pod in &plan.create {
        let terms = required_anti_affinity(pod);
        assert!(
            terms
                .iter()
                .any(|t| t.topology_key == "kubernetes.io/hostname")
        );
    }
    let pods: Vec<_> = plan.create.iter().map(|p| created(p.clone(), 1)).collect();
    // The third waits while both run, whatever happens to them.
    let running = [
        ready(pods[0].clone(), "r8g-1", "127.1.0.2"),
        ready(pods[1].clone(), "r8g-2", "127.1.0.4"),
    ];
    let plan = reconcile(&mut b, &running, 2, None);
    assert!(
        !plan.create.iter().any(|p| p.name_any() == "zset-2-engine"),
        "{:?}",
        names(&plan.create)
    );
    let status = b.status.as_ref().unwrap();
    assert_eq!(status.phase, Some(Phase::Running));
    assert_eq!(status.engines[2].state, EngineState::Pending);
    assert!(status.engines[2].started_at.is_none());
    assert!(
        status
            .progress
            .as_ref()
            .unwrap()
            .summary
            .contains("2 engines under way at once"),
        "{:?}",
        status.progress
    );
    // Both measuring: a reconciliation without a fresh progress reading keeps the last one,
    // and the note of how many run at once is not repeated.
    let clients: Vec<_> = plan
        .create
        .iter()
        .filter(|p| p.name_any().contains("client"))
        .map(|p| ready(created(p.clone(), 2), "r8g-1", "127.1.0.3"))
        .collect();
    let all: Vec<_> = running.iter().chain(&clients).cloned().collect();
    let probe = super::observation::LoadProbe {
        repetitions_begun: Some(1),
        loaded_percent: Some(40),
        ..Default::default()
    };
    reconcile(&mut b, &all, 3, Some(probe));
    // Progress is read from the first run's client; the other run's client is followed for
    // its peak phases' marks, with its own engine's container on its own node.
    let probed = super::plan::probe_target(&b, &all).expect("the probed client");
    let others = super::plan::other_clients_under_way(&b, &all);
    assert_eq!(others.len(), 1, "{others:?}");
    assert_ne!(others[0].engine, probed.engine);
    let other_engine = others[0].engine.clone().expect("its engine's container");
    assert_eq!(
        (other_engine.pod.as_str(), other_engine.node.as_str()),
        ("zset-1-engine", "r8g-2")
    );
    reconcile(&mut b, &all, 4, None);
    let summary = b.status.as_ref().unwrap().progress.clone().unwrap().summary;
    assert_eq!(
        summary,
        "1/3 redis-7.0.15: rep 1/3, 40% loaded (2 engines under way at once)"
    );
}

#[test]
fn the_next_engine_starts_when_one_of_the_parallel_ones_is_done_and_its_pods_are_gone() {
    let mut b = three_engines(2);
    let plan = reconcile(&mut b, &[], 1, None);
    let engine0 = ready(created(engine_pod_of(&plan, 0), 1), "r8g-1", "127.1.0.2");
    let engine1 = ready(created(engine_pod_of(&plan, 1), 1), "r8g-2", "127.1.0.4");
    let plan = reconcile(&mut b, &[engine0.clone(), engine1.clone()], 2, None);
    // Each ready engine gets its client in the same reconciliation.
    let clients: Vec<_> = plan
        .create
        .iter()
        .filter(|p| p.name_any().contains("client"))
        .map(|p| created(p.clone(), 2))
        .collect();
    assert_eq!(names(&clients), ["zset-0-client", "zset-1-client"]);
    let done = terminated(
        clients[1].clone(),
        "r8g-2",
        0,
        "Completed",
        &result_message("valkey", "9.1.2", 66.0, 3, None),
        20,
    );
    let client0 = ready(clients[0].clone(), "r8g-1", "127.1.0.3");
    let plan = reconcile(
        &mut b,
        &[
            engine0.clone(),
            client0.clone(),
            engine1.clone(),
            done.clone(),
        ],
        21,
        None,
    );
    assert_eq!(
        b.status.as_ref().unwrap().engines[1].state,
        EngineState::Succeeded
    );
    assert!(plan.delete.contains(&"zset-1-engine".to_string()));
    // Its pods still terminate: their node is not free yet.
    assert!(
        !plan.create.iter().any(|p| p.name_any() == "zset-2-engine"),
        "{:?}",
        names(&plan.create)
    );
    let plan = reconcile(
        &mut b,
        &[
            engine0.clone(),
            client0.clone(),
            deleting(engine1),
            deleting(done),
        ],
        22,
        None,
    );
    assert!(!plan.create.iter().any(|p| p.name_any() == "zset-2-engine"));
    // Gone: the third starts beside the first.
    let plan = reconcile(&mut b, &[engine0, client0], 23, None);
    assert_eq!(names(&plan.create), ["zset-2-engine"]);
}

#[test]
fn parallelism_above_the_pool_waits_saying_how_many_nodes_of_the_type_there_are() {
    let mut b = three_engines(3);
    let plan = reconcile(&mut b, &[], 1, None);
    assert_eq!(plan.create.len(), 3);
    let busy = "0/4 nodes are available: 2 node(s) didn't match Pod's node affinity/selector, 2 node(s) didn't match pod anti-affinity rules. preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling.";
    let pods = [
        ready(created(engine_pod_of(&plan, 0), 1), "r8g-1", "127.1.0.2"),
        ready(created(engine_pod_of(&plan, 1), 1), "r8g-2", "127.1.0.4"),
        unscheduled(created(engine_pod_of(&plan, 2), 1), busy),
    ];
    reconcile(&mut b, &pods, 2, None);
    let engine = &b.status.as_ref().unwrap().engines[2];
    assert_eq!(engine.reason, Some(ConditionReason::ParallelismAboveNodes));
    let message = engine.message.clone().unwrap();
    assert!(
        message.contains("spec.parallelism is 3")
            && message.contains("r8g.4xlarge has 2 nodes")
            && message.contains("set parallelism to 2"),
        "{message}"
    );
    let progressing = condition(&b, PROGRESSING);
    assert_eq!(progressing.reason, ConditionReason::ParallelismAboveNodes);
    assert!(
        progressing.message.contains("has 2 nodes"),
        "{}",
        progressing.message
    );
    // No scheduling deadline: long after it the run still waits, it does not fail.
    reconcile(&mut b, &pods, 500, None);
    let engine = &b.status.as_ref().unwrap().engines[2];
    assert_eq!(engine.state, EngineState::Pending);
    assert_eq!(engine.reason, Some(ConditionReason::ParallelismAboveNodes));
}

#[test]
fn nodes_busy_with_another_benchmarks_engines_are_a_queue_not_a_small_pool() {
    let mut b = three_engines(3);
    let plan = reconcile(&mut b, &[], 1, None);
    // One of ours runs; the scheduler finds two busy nodes: the other is someone else's.
    let busy = "0/4 nodes are available: 2 node(s) didn't match Pod's node affinity/selector, 2 node(s) didn't match pod anti-affinity rules.";
    let pods = [
        ready(created(engine_pod_of(&plan, 0), 1), "r8g-1", "127.1.0.2"),
        unscheduled(created(engine_pod_of(&plan, 1), 1), busy),
        unscheduled(created(engine_pod_of(&plan, 2), 1), busy),
    ];
    reconcile(&mut b, &pods, 2, None);
    let engine = &b.status.as_ref().unwrap().engines[1];
    assert_eq!(engine.reason, Some(ConditionReason::WaitingForFreeNode));
}

#[test]
fn instance_types_run_every_engine_on_each_type_keyed_by_both() {
    let mut b = fresh_benchmark("  parallelism: 1\n");
    b.spec.instance_type = String::new();
    b.spec.instance_types = vec!["r8g.4xlarge".into(), "r7i.4xlarge".into()];
    reconcile(&mut b, &[], 0, None);
    let status = b.status.as_ref().unwrap();
    let keys: Vec<(String, Option<String>)> = status
        .engines
        .iter()
        .map(|e| (e.name.clone(), e.instance_type.clone()))
        .collect();
    let key = |n: &str, t: &str| (n.to_string(), Some(t.to_string()));
    assert_eq!(
        keys,
        [
            key("redis-7.0.15", "r8g.4xlarge"),
            key("valkey-9.1.2", "r8g.4xlarge"),
            key("redis-7.0.15", "r7i.4xlarge"),
            key("valkey-9.1.2", "r7i.4xlarge"),
        ]
    );
    // Parallelism applies per pool: one engine on each type at once.
    let plan = reconcile(&mut b, &[], 1, None);
    assert_eq!(names(&plan.create), ["zset-0-engine", "zset-2-engine"]);
    let type_of = |p: &k8s_openapi::api::core::v1::Pod| {
        p.spec.as_ref().unwrap().node_selector.as_ref().unwrap()[INSTANCE_TYPE_LABEL].clone()
    };
    assert_eq!(type_of(&plan.create[0]), "r8g.4xlarge");
    assert_eq!(type_of(&plan.create[1]), "r7i.4xlarge");
    let engine = plan.create[1].spec.as_ref().unwrap().containers[0]
        .image
        .clone()
        .unwrap();
    assert!(engine.starts_with("redis:"), "{engine}");
}

#[test]
fn change_against_the_first_engine_is_within_each_instance_type() {
    let mut b = fresh_benchmark("");
    b.spec.instance_type = String::new();
    b.spec.instance_types = vec!["r8g.4xlarge".into(), "r7i.4xlarge".into()];
    reconcile(&mut b, &[], 0, None);
    let status = b.status.as_mut().unwrap();
    for (engine, median) in status.engines.iter_mut().zip([100.0, 50.0, 200.0, 150.0]) {
        engine.state = EngineState::Succeeded;
        engine.summary = Some(crate::crd::SummaryStatus {
            bytes_per_item: crate::crd::SpreadStatus {
                median,
                ..Default::default()
            },
            ..Default::default()
        });
    }
    reconcile(&mut b, &[], 1, None);
    let status = b.status.as_ref().unwrap();
    let changes: Vec<Option<f64>> = status
        .engines
        .iter()
        .map(|e| e.change_vs_first_percent)
        .collect();
    assert_eq!(changes, [Some(0.0), Some(-50.0), Some(0.0), Some(-25.0)]);
    assert_eq!(
        status.best_engine.as_deref(),
        Some("valkey-9.1.2 on r8g.4xlarge")
    );
}

#[test]
fn a_timeout_stops_every_engine_under_way_and_runs_no_other() {
    let mut b = three_engines(2);
    let plan = reconcile(&mut b, &[], 1, None);
    let pods = [
        ready(created(engine_pod_of(&plan, 0), 1), "r8g-1", "127.1.0.2"),
        ready(created(engine_pod_of(&plan, 1), 1), "r8g-2", "127.1.0.4"),
    ];
    reconcile(&mut b, &pods, 2, None);
    reconcile(&mut b, &pods, 3600, None);
    let status = b.status.as_ref().unwrap();
    let reasons: Vec<Option<ConditionReason>> =
        status.engines.iter().map(|e| e.reason.clone()).collect();
    assert_eq!(
        reasons,
        [
            Some(ConditionReason::Timeout),
            Some(ConditionReason::Timeout),
            Some(ConditionReason::NotRun)
        ]
    );
    assert_eq!(status.phase, Some(Phase::Failed));
}

#[test]
fn the_status_names_the_instance_types_for_the_printer_column() {
    // One instanceType: that one.
    let b = benchmark("");
    let status = b.status.as_ref().unwrap();
    assert_eq!(status.instance_types.as_deref(), Some("r8g.4xlarge"));
    // instanceTypes: every one, in the spec's order (spec.instanceType is empty then, so a
    // column reading it would show nothing).
    let mut b = fresh_benchmark("");
    b.spec.instance_type = String::new();
    b.spec.instance_types = vec!["r8g.4xlarge".into(), "r7i.4xlarge".into()];
    reconcile(&mut b, &[], 0, None);
    let status = b.status.as_ref().unwrap();
    assert_eq!(
        status.instance_types.as_deref(),
        Some("r8g.4xlarge, r7i.4xlarge")
    );
}
