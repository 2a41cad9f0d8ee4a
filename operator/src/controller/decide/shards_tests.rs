//! A sharded run (`engines[].shards`) through the decision: one pod per shard, each kept off
//! every other engine's node, the client on shard 0's node with every shard's address, a pool
//! too small for the shards, and a shard that fails mid-load or goes missing, named.

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use crate::client::measurement::measured::ShardReading;
use crate::controller::build::network_policy::{NetworkPolicySettings, network_policy};
use crate::controller::build::pods::{LABEL_SHARD, shard_index};
use crate::controller::decide::conditions::PROGRESSING;
use crate::controller::decide::events::transitions;
use crate::controller::decide::test_fixtures::*;
use crate::crd::{ConditionReason, EngineKind, EngineState, MemoryBenchmark, ShardStatus};
use crate::validation::spec_file::parse_specs;
use crate::validation::{estimated_engine_memory, estimated_shard_memory, mebibytes};

/// A 3-shard Valkey benchmark of 20,000 strings, its first status written at time 0.
fn sharded() -> MemoryBenchmark {
    let mut b = parse_specs(
        "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {name: zset, namespace: bench}\nspec:\n  instanceType: r8g.4xlarge\n  engines: [{engine: valkey, version: \"9.1.2\", shards: 3}]\n  workload: {strings: {keys: 20000}}\n  repetitions: 3\n  timeoutSeconds: 3600\n",
    )
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

/// The shard pods the first reconcile after the status creates, created at time 1.
fn shard_pods(b: &mut MemoryBenchmark) -> Vec<Pod> {
    let plan = reconcile(b, &[], 1, None);
    plan.create.into_iter().map(|p| created(p, 1)).collect()
}

/// Each shard ready on its own node, r8g-<s> at 127.1.0.<10+s>.
fn all_ready(pods: &[Pod]) -> Vec<Pod> {
    pods.iter()
        .map(|p| {
            let s = shard_index(p);
            ready(
                p.clone(),
                &format!("r8g-{s}"),
                &format!("127.1.0.{}", 10 + s),
            )
        })
        .collect()
}

fn args(pod: &Pod) -> Vec<String> {
    pod.spec.as_ref().unwrap().containers[0]
        .args
        .clone()
        .unwrap_or_default()
}

#[test]
fn a_sharded_run_creates_one_cluster_mode_engine_pod_per_shard_each_alone_on_a_node() {
    let mut b = sharded();
    let before = b.status.clone().unwrap();
    let pods = shard_pods(&mut b);
    // Created, and said once: no WaitingForNode event before the scheduler says anything.
    let events: Vec<String> = transitions(&before, b.status.as_ref().unwrap())
        .into_iter()
        .map(|e| e.reason)
        .collect();
    assert_eq!(events, ["EngineCreated"]);
    let names: Vec<String> = pods.iter().map(|p| p.name_any()).collect();
    assert_eq!(
        names,
        ["zset-0-engine", "zset-0-engine-1", "zset-0-engine-2"]
    );
    // Each shard's pod is sized for its share of the data, beside the engine's fixed part.
    let workload = crate::client::workloads::workload::Workload::Strings {
        keys: 20_000,
        value_size: 100,
    };
    let per_shard = estimated_shard_memory(&workload, EngineKind::Valkey, 3);
    assert!(per_shard < estimated_engine_memory(&workload, EngineKind::Valkey));
    for (s, pod) in pods.iter().enumerate() {
        assert_eq!(pod.labels().get(LABEL_SHARD), Some(&s.to_string()));
        let limits = pod.spec.as_ref().unwrap().containers[0]
            .resources
            .as_ref()
            .unwrap()
            .limits
            .clone()
            .unwrap();
        assert_eq!(limits["memory"].0, mebibytes(per_shard));
        let args = args(pod).join(" ");
        assert!(args.contains("--cluster-enabled yes"), "{args}");
        // Each shard announces its pod address to the others.
        assert!(
            args.contains("--cluster-announce-ip $(MEMBENCH_POD_IP)"),
            "{args}"
        );
        let env = pod.spec.as_ref().unwrap().containers[0]
            .env
            .clone()
            .unwrap();
        assert!(
            env.iter().any(|e| e.name == "MEMBENCH_POD_IP"
                && e.value_from
                    .as_ref()
                    .and_then(|v| v.field_ref.as_ref())
                    .map(|f| f.field_path.as_str())
                    == Some("status.podIP")),
            "{env:?}"
        );
        let terms = required_anti_affinity(pod);
        // Against every membench engine (its own shards among them), one per node.
        assert!(
            terms.iter().any(|t| {
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
            "{terms:?}"
        );
    }
    assert!(
        b.status.as_ref().unwrap().engines[0]
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("the engine pods were created, one per shard")
    );
}

#[test]
fn the_client_starts_only_once_every_shard_is_ready_next_to_shard_0_with_every_address_in_order() {
    let mut b = sharded();
    let pods = shard_pods(&mut b);
    let mut some_ready = all_ready(&pods);
    some_ready[2] = pods[2].clone();
    let plan = reconcile(&mut b, &some_ready, 2, None);
    assert!(plan.create.is_empty(), "no client before shard 2 is ready");
    let engine = &b.status.as_ref().unwrap().engines[0];
    assert!(
        engine
            .message
            .as_deref()
            .unwrap_or_default()
            .starts_with("shard 2 (pod zset-0-engine-2): "),
        "{:?}",
        engine.message
    );
    let ready = all_ready(&pods);
    let plan = reconcile(&mut b, &ready, 3, None);
    assert_eq!(plan.create.len(), 1, "{:?}", plan.create);
    let client = &plan.create[0];
    let args = args(client).join(" ");
    assert!(
        args.starts_with(
            "load --addr 127.1.0.10:6379 --addr 127.1.0.11:6379 --addr 127.1.0.12:6379 --output"
        ),
        "{args}"
    );
    let plan = crate::controller::build::pods::plan_of_client_pod(client)
        .unwrap()
        .unwrap();
    assert!(plan.settings.own_all_slots, "{plan:?}");
    let next_to = required_affinity(client)[0]
        .label_selector
        .as_ref()
        .unwrap()
        .match_labels
        .clone()
        .unwrap();
    assert_eq!(next_to.get(LABEL_SHARD).map(String::as_str), Some("0"));
    let engine = &b.status.as_ref().unwrap().engines[0];
    assert_eq!(engine.node_name.as_deref(), Some("r8g-0"));
    let nodes: Vec<(u32, &str, Option<&str>)> = engine
        .shards
        .iter()
        .map(|s| (s.shard, s.pod.as_str(), s.node_name.as_deref()))
        .collect();
    assert_eq!(
        nodes,
        [
            (0, "zset-0-engine", Some("r8g-0")),
            (1, "zset-0-engine-1", Some("r8g-1")),
            (2, "zset-0-engine-2", Some("r8g-2")),
        ]
    );
}

#[test]
fn a_pool_with_fewer_nodes_than_shards_waits_saying_how_many_nodes_it_needs() {
    let mut b = sharded();
    let pods = shard_pods(&mut b);
    let mut placed = all_ready(&pods);
    placed[2] = unscheduled(
        pods[2].clone(),
        "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 2 node(s) didn't match pod anti-affinity rules. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
    );
    let plan = reconcile(&mut b, &placed, 700, None);
    assert!(plan.create.is_empty() && plan.delete.is_empty(), "{plan:?}");
    let engine = &b.status.as_ref().unwrap().engines[0];
    assert_eq!(engine.state, EngineState::Pending, "no scheduling deadline");
    assert_eq!(engine.reason, Some(ConditionReason::ShardsAboveNodes));
    let message = engine.message.clone().unwrap_or_default();
    assert!(
        message.starts_with("shard 2 (pod zset-0-engine-2): spec.engines[0].shards is 3: the run needs 3 nodes of instance type r8g.4xlarge at once")
            && message.contains("the pool has 2 nodes that can take an engine"),
        "{message}"
    );
    let progressing = condition(&b, PROGRESSING);
    assert_eq!(progressing.reason, ConditionReason::ShardsAboveNodes);
    assert!(
        progressing.message.contains("needs 3 nodes"),
        "{progressing:?}"
    );
}

#[test]
fn a_shard_that_crashes_mid_load_fails_the_run_naming_it_keeping_the_measured_repetitions() {
    let mut b = sharded();
    let pods = shard_pods(&mut b);
    let ready = all_ready(&pods);
    let plan = reconcile(&mut b, &ready, 3, None);
    let client = created(plan.create[0].clone(), 3);
    let mut seen = ready.clone();
    seen[1] = terminated(
        ready[1].clone(),
        "r8g-1",
        1,
        "Error",
        "Segmentation fault",
        30,
    );
    let client = terminated(
        client,
        "r8g-0",
        1,
        "Error",
        &result_message("valkey", "9.1.2", 60.0, 1, Some("ConnectionLost")),
        31,
    );
    seen.push(client);
    let plan = reconcile(&mut b, &seen, 32, None);
    let engine = &b.status.as_ref().unwrap().engines[0];
    assert_eq!(engine.state, EngineState::Failed);
    assert_eq!(engine.reason, Some(ConditionReason::EngineCrashed));
    let message = engine.message.clone().unwrap_or_default();
    assert!(
        message.starts_with(
            "shard 1 (pod zset-0-engine-1): the engine exited with code 1 (Error) after 1 of 3 repetitions"
        ),
        "{message}"
    );
    assert_eq!(engine.repetitions.len(), 1, "what was measured is kept");
    let mut deleted = plan.delete.clone();
    deleted.sort();
    assert_eq!(
        deleted,
        [
            "zset-0-client",
            "zset-0-engine",
            "zset-0-engine-1",
            "zset-0-engine-2"
        ],
        "no pod is left behind"
    );
}

#[test]
fn a_finished_sharded_run_shows_each_shards_used_memory_and_how_even_the_spread_was() {
    let mut b = sharded();
    let pods = shard_pods(&mut b);
    let ready = all_ready(&pods);
    let plan = reconcile(&mut b, &ready, 3, None);
    let client = created(plan.create[0].clone(), 3);
    // Shard 2 holds a little more than the others: 7,000 keys against 6,500.
    let repetitions = (1..=3)
        .map(|i| {
            let mut r = repetition(i, 60.0);
            r.shards = [
                (6_500u64, 1_000_000u64),
                (6_500, 1_000_000),
                (7_000, 1_100_000),
            ]
            .iter()
            .enumerate()
            .map(|(s, (keys, grew))| ShardReading {
                shard: s as u32,
                address: format!("127.1.0.{}:6379", 10 + s),
                baseline_used_memory: 1_500_000,
                used_memory: 1_500_000 + grew,
                keys: *keys,
            })
            .collect();
            r
        })
        .collect();
    let client = terminated(
        client,
        "r8g-0",
        0,
        "Completed",
        &message_of("valkey", "9.1.2", repetitions, None),
        20,
    );
    let mut seen = ready.clone();
    seen.push(client);
    reconcile(&mut b, &seen, 21, None);
    let engine = &b.status.as_ref().unwrap().engines[0];
    assert_eq!(engine.state, EngineState::Succeeded, "{engine:#?}");
    let figures = |shard: u32, pod: &str, used: u64, keys: u64| ShardStatus {
        shard,
        pod: pod.into(),
        node_name: Some(format!("r8g-{shard}")),
        baseline_used_memory: Some(1_500_000),
        used_memory: Some(used),
        keys: Some(keys),
    };
    assert_eq!(
        engine.shards,
        [
            figures(0, "zset-0-engine", 2_500_000, 6_500),
            figures(1, "zset-0-engine-1", 2_500_000, 6_500),
            figures(2, "zset-0-engine-2", 2_600_000, 7_000),
        ]
    );
    let spread = engine.shard_spread.clone().expect("the spread");
    let close = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 1e-9);
    assert!(
        close(spread.keys_max_over_min, 7_000.0 / 6_500.0),
        "{spread:?}"
    );
    assert!(close(spread.data_max_over_min, 1.1), "{spread:?}");
}

#[test]
fn a_shard_whose_node_stops_reporting_fails_the_run_as_node_lost_naming_the_shard() {
    let mut b = sharded();
    let pods = shard_pods(&mut b);
    let ready = all_ready(&pods);
    let plan = reconcile(&mut b, &ready, 3, None);
    let client = ready_client(created(plan.create[0].clone(), 3));
    let mut seen = ready.clone();
    seen.push(client);
    reconcile(&mut b, &seen, 4, None);
    // Shard 2's pod was deleted (its node went), and no kubelet confirms it stopped.
    seen[2].metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(30)));
    // The client, on shard 0's node, still runs: it is stopped to keep what it measured.
    let plan = reconcile(&mut b, &seen, 46, None);
    let engine = &b.status.as_ref().unwrap().engines[0];
    assert_eq!(engine.reason, Some(ConditionReason::StoppingClient));
    assert!(
        plan.delete.contains(&"zset-0-client".to_string()),
        "{plan:?}"
    );
    assert_eq!(plan.force_delete, ["zset-0-engine-2"]);
    seen[3] = terminated(
        seen[3].clone(),
        "r8g-0",
        1,
        "Error",
        &result_message("valkey", "9.1.2", 60.0, 1, Some("Stopped")),
        47,
    );
    let plan = reconcile(&mut b, &seen, 48, None);
    let engine = &b.status.as_ref().unwrap().engines[0];
    assert_eq!(
        engine.reason,
        Some(ConditionReason::NodeLost),
        "{engine:#?}"
    );
    let message = engine.message.clone().unwrap_or_default();
    assert!(
        message.starts_with("shard 2 (pod zset-0-engine-2): node r8g-2 stopped reporting: zset-0-engine-2 was deleted and the node had not confirmed it stopped 15 s after the grace period ended;"),
        "{message}"
    );
    assert!(!message.contains("is lost"), "{message}");
    assert_eq!(
        engine.repetitions.len(),
        1,
        "what the client measured is kept"
    );
    let mut deleted = plan.delete.clone();
    deleted.sort();
    assert_eq!(
        deleted,
        ["zset-0-client", "zset-0-engine", "zset-0-engine-1"],
        "the other shards and the client go too"
    );
}

/// The client pod running on shard 0's node.
fn ready_client(client: Pod) -> Pod {
    ready(client, "r8g-0", "127.1.0.20")
}

#[test]
fn a_shard_pod_that_disappears_fails_the_run_naming_the_shard() {
    let mut b = sharded();
    let pods = shard_pods(&mut b);
    let ready = all_ready(&pods);
    reconcile(&mut b, &ready, 3, None);
    let without_shard_2 = &ready[..2];
    reconcile(&mut b, without_shard_2, 10, None);
    let engine = &b.status.as_ref().unwrap().engines[0];
    assert_eq!(engine.reason, Some(ConditionReason::EnginePodLost));
    let message = engine.message.clone().unwrap_or_default();
    assert!(
        message.starts_with("shard 2 (pod zset-0-engine-2): the engine pod disappeared"),
        "{message}"
    );
}

#[test]
fn only_a_benchmark_with_shards_opens_the_cluster_bus_and_only_between_its_engines() {
    let settings = NetworkPolicySettings::default();
    let bus_rules = |b: &MemoryBenchmark| {
        let value = serde_json::to_value(network_policy(b, &settings)).unwrap();
        let spec = &value["spec"];
        let on_bus = |rules: &serde_json::Value, peers: &str| -> Vec<serde_json::Value> {
            rules
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| r["ports"][0]["port"] == 16379)
                .map(|r| r[peers][0]["podSelector"]["matchLabels"].clone())
                .collect()
        };
        (
            on_bus(&spec["ingress"], "from"),
            on_bus(&spec["egress"], "to"),
        )
    };
    let engines = serde_json::json!({"app.kubernetes.io/name": "membench",
        "membench.io/benchmark": "zset", "app.kubernetes.io/component": "engine"});
    assert_eq!(
        bus_rules(&sharded()),
        (vec![engines.clone()], vec![engines])
    );
    assert_eq!(bus_rules(&benchmark("")), (vec![], vec![]));
}
