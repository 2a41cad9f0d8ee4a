//! `engines[].clusterMode` against real engines from the store: the node is a one-node cluster
//! owning all 16,384 slots before the baseline, the cluster's fixed cost (the empty cluster
//! node against the same build standalone) is reported apart, and the published direction
//! holds: Valkey 7.2 keeps two slot pointers per key in cluster mode, Valkey 8.0 and later a
//! dictionary per slot. Dragonfly runs its emulated cluster.

mod common;

use std::process::Command;
use std::time::Duration;

use membench::client::engine::{ControlConnection, parse_info};
use membench::crd::EngineKind;
use serde_json::Value;

fn run(spec_body: &str) -> Value {
    let path = std::env::temp_dir().join(format!("membench-cluster-{}.yaml", std::process::id()));
    std::fs::write(
        &path,
        format!("apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {{name: cluster}}\nspec:\n{spec_body}"),
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_membench"))
        .args(["run", path.to_str().unwrap(), "--output", "json"])
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&path);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn a_cluster_mode_node_owns_every_slot_before_the_baseline() {
    for version in ["7.2", "9.1"] {
        let mut spec = common::shared_build(EngineKind::Valkey, version);
        spec.cluster_mode = true;
        let server = common::start_spec(&spec);
        let mut control = ControlConnection::open(&server.address, Duration::from_secs(5)).unwrap();
        control.own_all_slots().unwrap();
        let url = format!("redis://{}/", server.address.socket_addr());
        let mut connection = redis::Client::open(url).unwrap().get_connection().unwrap();
        let info: String = redis::cmd("CLUSTER")
            .arg("INFO")
            .query(&mut connection)
            .unwrap();
        let info = parse_info(&info);
        assert_eq!(info["cluster_state"], "ok", "{version}");
        assert_eq!(info["cluster_slots_assigned"], "16384", "{version}");
        assert_eq!(info["cluster_known_nodes"], "1", "{version}");
        // A second call finds the slots owned and changes nothing.
        control.own_all_slots().unwrap();
        server.stop();
    }
    let standalone = common::start(EngineKind::Valkey, &[]);
    let mut control = ControlConnection::open(&standalone.address, Duration::from_secs(5)).unwrap();
    let err = control.own_all_slots().unwrap_err().to_string();
    assert!(err.contains("not in cluster mode"), "{err}");
    standalone.stop();
}

#[test]
fn cluster_mode_costs_valkey_7_2_a_slot_pointer_pair_per_key_and_reports_its_fixed_cost_apart() {
    let v72 = common::shared_build(EngineKind::Valkey, "7.2")
        .build
        .unwrap();
    let v91 = common::shared_build(EngineKind::Valkey, "9.1")
        .build
        .unwrap();
    let df = common::shared_build(EngineKind::Dragonfly, "1.40")
        .build
        .unwrap();
    let json = run(&format!(
        "  engines:\n    - {{engine: valkey, version: \"7.2\", build: {v72}}}\n    - {{engine: valkey, version: \"7.2\", build: {v72}, name: v72-cluster, clusterMode: true}}\n    - {{engine: valkey, version: \"9.1\", build: {v91}}}\n    - {{engine: valkey, version: \"9.1\", build: {v91}, name: v91-cluster, clusterMode: true}}\n    - {{engine: dragonfly, version: \"1.40\", build: {df}, name: df-cluster, clusterMode: true}}\n  workload: {{strings: {{keys: 200000, valueSize: 16}}}}\n  repetitions: 1\n"
    ));
    let engines = json["engines"].as_array().unwrap();
    let median = |i: usize| {
        engines[i]["summary"]["bytes_per_item"]["median"]
            .as_f64()
            .unwrap()
    };
    assert!(engines[0].get("cluster").is_none());
    for i in [1, 3, 4] {
        let cluster = &engines[i]["cluster"];
        assert_eq!(
            cluster["fixed_cost_bytes"].as_i64().unwrap(),
            cluster["cluster_used_memory"].as_i64().unwrap()
                - cluster["standalone_used_memory"].as_i64().unwrap(),
            "{cluster}"
        );
        assert_eq!(
            cluster["cluster_used_memory"], engines[i]["repetitions"][0]["baseline_used_memory"],
            "the baseline is the empty cluster node"
        );
    }
    assert!(engines[1]["cluster"]["fixed_cost_bytes"].as_i64().unwrap() > 0);
    assert!(engines[3]["cluster"]["fixed_cost_bytes"].as_i64().unwrap() > 0);
    let per_key_7_2 = median(1) - median(0);
    let per_key_9_1 = median(3) - median(2);
    eprintln!("cluster mode per key: Valkey 7.2 {per_key_7_2:+.1} B, 9.1 {per_key_9_1:+.1} B");
    // Two slot pointers (16 B) per key on 7.2; a table per slot since 8.0, whose cost per key
    // falls as each slot's table fills (at 200,000 keys, 12 per slot: +9.4 B measured here).
    assert!((12.0..=24.0).contains(&per_key_7_2), "{per_key_7_2:.1}");
    assert!(
        per_key_9_1 < per_key_7_2 - 4.0,
        "{per_key_9_1:.1} against {per_key_7_2:.1}"
    );
    assert_eq!(
        engines[4]["repetitions"][0]["items"], 200_000,
        "Dragonfly's emulated cluster"
    );
}
