//! A run with `spec.peak.replica` through the decision: the engine pod and its replica pod,
//! twins kept off each other's node, the client beside the engine once both are ready with the
//! replica's address, a pool with no second node, a replica that fails, and the
//! NetworkPolicy's one extra rule.

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use crate::controller::build::network_policy::{NetworkPolicySettings, network_policy};
use crate::controller::build::pods::{LABEL_COMPONENT, LABEL_ROLE, is_replica, owned_by};
use crate::controller::decide::test_fixtures::*;
use crate::crd::{ConditionReason, EngineState, MemoryBenchmark};
use crate::validation::spec_file::parse_specs;

/// A Valkey benchmark of 20,000 strings with a replica synced under 2,000 writes/s, its first
/// status written at time 0.
fn with_replica() -> MemoryBenchmark {
    with_replica_engines("[{engine: valkey, version: \"9.1.2\"}]", "")
}

/// [`with_replica`] with these `engines` (YAML) and `extra` spec lines.
fn with_replica_engines(engines: &str, extra: &str) -> MemoryBenchmark {
    let mut b = parse_specs(&format!(
        "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {{name: peak, namespace: bench}}\nspec:\n  instanceType: r8g.4xlarge\n  engines: {engines}\n{extra}  workload: {{strings: {{keys: 20000}}}}\n  repetitions: 2\n  timeoutSeconds: 3600\n  peak: {{replica: {{writesPerSecond: 2000}}}}\n"
    ))
    .unwrap()
    .remove(0);
    b.metadata.uid = Some("uid-1".into());
    b.metadata.generation = Some(1);
    b.metadata.creation_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(0)));
    let plan = reconcile(&mut b, &[], 0, None);
    assert!(plan.create.is_empty(), "the first status goes out first");
    b
}

/// The engine pod and the replica pod the first reconcile after the status creates, at time 1.
fn engine_and_replica(b: &mut MemoryBenchmark) -> (Pod, Pod) {
    let plan = reconcile(b, &[], 1, None);
    let names: Vec<String> = plan.create.iter().map(|p| p.name_any()).collect();
    assert_eq!(names, ["peak-0-engine", "peak-0-replica"]);
    let mut pods = plan.create.into_iter().map(|p| created(p, 1));
    (pods.next().unwrap(), pods.next().unwrap())
}

/// Both ready, each on its own node: the engine on r8g-0 at 127.1.0.10, the replica on r8g-1
/// at 127.1.0.11.
fn both_ready(engine: &Pod, replica: &Pod) -> Vec<Pod> {
    vec![
        ready(engine.clone(), "r8g-0", "127.1.0.10"),
        ready(replica.clone(), "r8g-1", "127.1.0.11"),
    ]
}

fn args(pod: &Pod) -> Vec<String> {
    pod.spec.as_ref().unwrap().containers[0]
        .args
        .clone()
        .unwrap_or_default()
}

fn message(b: &MemoryBenchmark) -> String {
    b.status.as_ref().unwrap().engines[0]
        .message
        .clone()
        .unwrap_or_default()
}

#[test]
fn the_replica_pod_is_the_engine_pods_twin_kept_off_every_engines_node() {
    let mut b = with_replica();
    let (engine, replica) = engine_and_replica(&mut b);
    assert!(is_replica(&replica) && !is_replica(&engine));
    assert_eq!(replica.labels()[LABEL_ROLE], "replica");
    // An engine pod: one per node, whoever's, and its run's engine among them.
    assert_eq!(replica.labels()[LABEL_COMPONENT], "engine");
    assert_eq!(
        required_anti_affinity(&replica),
        required_anti_affinity(&engine)
    );
    assert!(
        required_anti_affinity(&replica).iter().any(|t| {
            t.topology_key == "kubernetes.io/hostname"
                && t.label_selector.as_ref().unwrap().match_labels
                    == Some(
                        [
                            ("app.kubernetes.io/name".to_string(), "membench".to_string()),
                            (
                                "app.kubernetes.io/component".to_string(),
                                "engine".to_string(),
                            ),
                        ]
                        .into(),
                    )
        }),
        "{:?}",
        required_anti_affinity(&replica)
    );
    // The same server: image, arguments (the password by reference), environment,
    // resources, security, data directory, probe, node selector and tolerations.
    let (e, r) = (engine.spec.clone().unwrap(), replica.spec.clone().unwrap());
    assert_eq!(e.containers, r.containers);
    assert_eq!(e.security_context, r.security_context);
    assert_eq!(e.volumes, r.volumes);
    assert_eq!(e.node_selector, r.node_selector);
    assert_eq!(e.tolerations, r.tolerations);
    assert!(
        args(&replica)
            .join(" ")
            .contains("--requirepass $(MEMBENCH_ENGINE_PASSWORD)"),
        "{:?}",
        args(&replica)
    );
    assert!(owned_by(&replica, &b), "the operator's own replica pod");
    let mut impostor = replica.clone();
    impostor.metadata.name = Some("peak-0-engine-7".into());
    assert!(!owned_by(&impostor, &b), "a replica under another name");
}

#[test]
fn the_client_starts_once_both_are_ready_beside_the_engine_with_the_replicas_address() {
    let mut b = with_replica();
    let (engine, replica) = engine_and_replica(&mut b);
    let starting = vec![
        ready(engine.clone(), "r8g-0", "127.1.0.10"),
        replica.clone(),
    ];
    let plan = reconcile(&mut b, &starting, 2, None);
    assert!(
        plan.create.is_empty(),
        "no client before the replica is ready"
    );
    assert!(
        message(&b).starts_with("replica (pod peak-0-replica): "),
        "{}",
        message(&b)
    );
    let plan = reconcile(&mut b, &both_ready(&engine, &replica), 3, None);
    assert_eq!(plan.create.len(), 1, "{:?}", plan.create);
    let client = &plan.create[0];
    let args = args(client).join(" ");
    assert!(
        args.starts_with("load --addr 127.1.0.10:6379 --replica 127.1.0.11:6379 "),
        "only the engine is loaded, its replica synced: {args}"
    );
    let plan = crate::controller::build::pods::plan_of_client_pod(client)
        .unwrap()
        .unwrap();
    assert_eq!(plan.settings.replica.map(|r| r.writes_per_sec), Some(2000));
    assert_eq!(args.matches("--addr").count(), 1, "{args}");
    let next_to = required_affinity(client)[0].label_selector.clone().unwrap();
    // Beside the engine pod, never beside the replica, an engine pod too.
    let not_replica = next_to.match_expressions.unwrap();
    assert_eq!(
        (
            not_replica[0].key.as_str(),
            not_replica[0].operator.as_str()
        ),
        (LABEL_ROLE, "DoesNotExist")
    );
    let engine_status = &b.status.as_ref().unwrap().engines[0];
    assert_eq!(engine_status.node_name.as_deref(), Some("r8g-0"));
    assert_eq!(engine_status.replica_node_name.as_deref(), Some("r8g-1"));
    // The client's marks read the engine's container and the replica's, each on its node.
    let mut pods = both_ready(&engine, &replica);
    pods.push(ready(created(client.clone(), 3), "r8g-0", "127.1.0.12"));
    let target = crate::controller::decide::plan::probe_target(&b, &pods).expect("a probe target");
    let containers =
        [target.engine.unwrap(), target.replica.unwrap()].map(|c| (c.pod, c.container, c.node));
    assert_eq!(
        containers,
        [
            ("peak-0-engine".into(), "engine".into(), "r8g-0".into()),
            ("peak-0-replica".into(), "engine".into(), "r8g-1".into()),
        ]
    );
}

#[test]
fn a_pool_with_no_second_node_leaves_the_replica_waiting_then_fails_saying_it_needs_one() {
    let mut b = with_replica();
    let (engine, replica) = engine_and_replica(&mut b);
    let scheduler = "0/5 nodes are available: 1 node(s) didn't match pod anti-affinity rules, 4 node(s) didn't match Pod's node affinity/selector. preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling.";
    let seen = vec![
        ready(engine.clone(), "r8g-0", "127.1.0.10"),
        unscheduled(replica.clone(), scheduler),
    ];
    let plan = reconcile(&mut b, &seen, 30, None);
    assert!(plan.create.is_empty() && plan.delete.is_empty(), "{plan:?}");
    let engine_status = &b.status.as_ref().unwrap().engines[0];
    assert_eq!(engine_status.reason, Some(ConditionReason::WaitingForNode));
    assert!(
        message(&b).starts_with("replica (pod peak-0-replica): a replica needs a second node of instance type r8g.4xlarge"),
        "{}",
        message(&b)
    );
    // Past the scheduling deadline (60 s in these tests), it fails, saying what to do.
    let plan = reconcile(&mut b, &seen, 62, None);
    let engine_status = &b.status.as_ref().unwrap().engines[0];
    assert_eq!(engine_status.state, EngineState::Failed);
    assert_eq!(engine_status.reason, Some(ConditionReason::Unschedulable));
    let text = message(&b);
    assert!(
        text.starts_with("replica (pod peak-0-replica): the replica pod was not scheduled within 60 s: a replica needs a second node of instance type r8g.4xlarge")
            && text.contains("add a node of the type, or remove spec.peak.replica"),
        "{text}"
    );
    let mut deleted = plan.delete.clone();
    deleted.sort();
    assert_eq!(deleted, ["peak-0-engine", "peak-0-replica"]);
}

#[test]
fn a_replica_on_a_node_busy_with_another_benchmark_waits_in_the_queue_past_the_deadline() {
    let mut b = with_replica();
    let (engine, replica) = engine_and_replica(&mut b);
    let scheduler = "0/4 nodes are available: 2 node(s) didn't match pod anti-affinity rules, 2 node(s) didn't match Pod's node affinity/selector.";
    let seen = vec![
        ready(engine.clone(), "r8g-0", "127.1.0.10"),
        unscheduled(replica.clone(), scheduler),
    ];
    reconcile(&mut b, &seen, 300, None);
    let engine_status = &b.status.as_ref().unwrap().engines[0];
    assert_eq!(engine_status.state, EngineState::Pending);
    assert_eq!(
        engine_status.reason,
        Some(ConditionReason::WaitingForFreeNode)
    );
}

#[test]
fn a_replica_that_crashes_mid_run_fails_the_run_naming_it_keeping_what_was_measured() {
    let mut b = with_replica();
    let (engine, replica) = engine_and_replica(&mut b);
    let ready_pods = both_ready(&engine, &replica);
    let plan = reconcile(&mut b, &ready_pods, 3, None);
    let client = created(plan.create[0].clone(), 3);
    let mut seen = ready_pods.clone();
    seen[1] = terminated(
        ready_pods[1].clone(),
        "r8g-1",
        1,
        "Error",
        "Segmentation fault",
        30,
    );
    seen.push(terminated(
        client,
        "r8g-0",
        1,
        "Error",
        &result_message("valkey", "9.1.2", 60.0, 1, Some("ConnectionLost")),
        31,
    ));
    let plan = reconcile(&mut b, &seen, 32, None);
    let engine_status = &b.status.as_ref().unwrap().engines[0];
    assert_eq!(engine_status.state, EngineState::Failed);
    assert_eq!(engine_status.reason, Some(ConditionReason::EngineCrashed));
    assert!(
        message(&b).starts_with(
            "replica (pod peak-0-replica): the engine exited with code 1 (Error) after 1 of 2 repetitions"
        ),
        "{}",
        message(&b)
    );
    assert_eq!(
        engine_status.repetitions.len(),
        1,
        "what was measured is kept"
    );
    let mut deleted = plan.delete.clone();
    deleted.sort();
    assert_eq!(
        deleted,
        ["peak-0-client", "peak-0-engine", "peak-0-replica"]
    );
}

#[test]
fn a_replica_whose_image_name_is_invalid_fails_the_run_at_once_naming_it() {
    let mut b = with_replica();
    let (engine, replica) = engine_and_replica(&mut b);
    let seen = vec![
        ready(engine.clone(), "r8g-0", "127.1.0.10"),
        waiting(replica.clone(), "r8g-1", "InvalidImageName"),
    ];
    reconcile(&mut b, &seen, 5, None);
    let engine_status = &b.status.as_ref().unwrap().engines[0];
    assert_eq!(engine_status.state, EngineState::Failed);
    assert_eq!(engine_status.reason, Some(ConditionReason::ImagePullFailed));
    assert!(
        message(&b).starts_with("replica (pod peak-0-replica): cannot pull the engine image"),
        "{}",
        message(&b)
    );
}

#[test]
fn a_replica_pod_that_disappears_fails_the_run_naming_it() {
    let mut b = with_replica();
    let (engine, replica) = engine_and_replica(&mut b);
    reconcile(&mut b, &both_ready(&engine, &replica), 3, None);
    reconcile(&mut b, &both_ready(&engine, &replica)[..1], 10, None);
    let engine_status = &b.status.as_ref().unwrap().engines[0];
    assert_eq!(engine_status.reason, Some(ConditionReason::EnginePodLost));
    assert!(
        message(&b).starts_with("replica (pod peak-0-replica): the engine pod disappeared"),
        "{}",
        message(&b)
    );
}

#[test]
fn only_a_benchmark_with_a_replica_lets_its_replica_pods_reach_its_engines() {
    let settings = NetworkPolicySettings::default();
    let engine_port_peers = |b: &MemoryBenchmark| -> Vec<serde_json::Value> {
        let value = serde_json::to_value(network_policy(b, &settings)).unwrap();
        value["spec"]["ingress"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["ports"][0]["port"] == 6379)
            .map(|r| r["from"][0]["podSelector"]["matchLabels"].clone())
            .collect()
    };
    let clients = serde_json::json!({"app.kubernetes.io/name": "membench",
        "membench.io/benchmark": "peak", "app.kubernetes.io/component": "client"});
    let replicas = serde_json::json!({"app.kubernetes.io/name": "membench",
        "membench.io/benchmark": "peak", "app.kubernetes.io/component": "engine",
        "membench.io/role": "replica"});
    assert_eq!(engine_port_peers(&with_replica()), [clients, replicas]);
    let mut without = with_replica();
    without.spec.peak = None;
    let clients_only = engine_port_peers(&without);
    assert_eq!(clients_only.len(), 1, "{clients_only:?}");
}

#[test]
fn the_engine_beside_a_replica_that_crashes_is_named_as_the_engine() {
    let mut b = with_replica();
    let (engine, replica) = engine_and_replica(&mut b);
    let seen = vec![
        terminated(
            engine.clone(),
            "r8g-0",
            139,
            "Error",
            "Segmentation fault",
            4,
        ),
        ready(replica.clone(), "r8g-1", "127.1.0.11"),
    ];
    let plan = reconcile(&mut b, &seen, 5, None);
    let engine_status = &b.status.as_ref().unwrap().engines[0];
    assert_eq!(engine_status.reason, Some(ConditionReason::EngineCrashed));
    assert!(
        message(&b).starts_with("engine (pod peak-0-engine): the engine exited with code 139"),
        "{}",
        message(&b)
    );
    let mut deleted = plan.delete.clone();
    deleted.sort();
    assert_eq!(deleted, ["peak-0-engine", "peak-0-replica"]);
}

#[test]
fn runs_in_parallel_whose_engines_hold_every_node_leave_the_replicas_waiting_then_say_to_lower_parallelism()
 {
    let mut b = with_replica_engines(
        "[{engine: valkey, version: \"9.1.2\"}, {engine: valkey, version: \"9.1.2\", name: second}]",
        "  parallelism: 2\n",
    );
    let plan = reconcile(&mut b, &[], 1, None);
    let mut names: Vec<String> = plan.create.iter().map(|p| p.name_any()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "peak-0-engine",
            "peak-0-replica",
            "peak-1-engine",
            "peak-1-replica"
        ]
    );
    let pod = |name: &str| {
        created(
            plan.create
                .iter()
                .find(|p| p.name_any() == name)
                .unwrap()
                .clone(),
            1,
        )
    };
    // The pool's two nodes each took one run's engine; neither replica has a node.
    let scheduler = "0/5 nodes are available: 2 node(s) didn't match pod anti-affinity rules, 3 node(s) didn't match Pod's node affinity/selector. preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling.";
    let seen = vec![
        ready(pod("peak-0-engine"), "r8g-0", "127.1.0.10"),
        ready(pod("peak-1-engine"), "r8g-1", "127.1.0.11"),
        unscheduled(pod("peak-0-replica"), scheduler),
        unscheduled(pod("peak-1-replica"), scheduler),
    ];
    let plan = reconcile(&mut b, &seen, 30, None);
    assert!(plan.create.is_empty() && plan.delete.is_empty(), "{plan:?}");
    for engine in &b.status.as_ref().unwrap().engines {
        assert_eq!(engine.reason, Some(ConditionReason::WaitingForNode));
        let text = engine.message.clone().unwrap_or_default();
        assert!(
            text.contains("the pool's 2 nodes that can take an engine each run one of this benchmark's engines (spec.parallelism is 2")
                && text.contains("set parallelism to 1 or lower, or add nodes of the type"),
            "{text}"
        );
    }
    // Past the scheduling deadline, both runs fail saying the same.
    reconcile(&mut b, &seen, 62, None);
    for engine in &b.status.as_ref().unwrap().engines {
        assert_eq!(engine.state, EngineState::Failed);
        assert_eq!(engine.reason, Some(ConditionReason::Unschedulable));
        assert!(
            engine
                .message
                .as_deref()
                .unwrap_or_default()
                .contains("set parallelism to 1 or lower"),
            "{engine:?}"
        );
    }
}
