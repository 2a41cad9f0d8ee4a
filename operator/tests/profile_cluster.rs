//! `membench profile` on a cluster: three Valkey 9.1 nodes in cluster mode, joined by the test
//! (CLUSTER MEET, a third of the slots each), keys written to the node that owns their slot.
//! Without `--cluster` the profile is one node's and says so; with it, every primary's keys
//! are in one profile, shares and all.

mod common;

use std::time::{Duration, Instant};

use membench::client::connection::slots::{even_range, key_slot};
use membench::crd::EngineKind;
use membench::local::runner::LocalEngine;
use membench::profile::model::KeyType;

/// A free loopback port for a node's cluster bus (its client port + 10000 may not be).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The three nodes' slots, split as the client splits them for shards.
fn slot_range(node: usize) -> (u16, u16) {
    even_range(node, 3)
}

struct Cluster {
    nodes: Vec<LocalEngine>,
    connections: Vec<redis::Connection>,
}

fn info_field(connection: &mut redis::Connection, command: &[&str], field: &str) -> String {
    let mut cmd = redis::cmd(command[0]);
    for arg in &command[1..] {
        cmd.arg(*arg);
    }
    let text: String = cmd.query(connection).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// Three nodes in cluster mode, met and given a third of the slots each; waits until every
/// node sees the cluster as ok with three nodes.
fn start_cluster() -> Cluster {
    let mut spec = common::shared_build(EngineKind::Valkey, "9.1");
    spec.cluster_mode = true;
    let nodes: Vec<(LocalEngine, u16)> = (0..3)
        .map(|_| {
            let bus = free_port();
            let mut spec = spec.clone();
            spec.args = vec!["--cluster-port".into(), bus.to_string()];
            (common::start_spec(&spec), bus)
        })
        .collect();
    let mut connections: Vec<redis::Connection> = nodes
        .iter()
        .map(|(node, _)| common::connect(&node.address))
        .collect();
    for (node, bus) in &nodes[1..] {
        let _: () = redis::cmd("CLUSTER")
            .arg("MEET")
            .arg("127.0.0.1")
            .arg(node.address.port)
            .arg(*bus)
            .query(&mut connections[0])
            .unwrap();
    }
    for (node, connection) in connections.iter_mut().enumerate() {
        let (first, last) = slot_range(node);
        let _: () = redis::cmd("CLUSTER")
            .arg("ADDSLOTSRANGE")
            .arg(first)
            .arg(last)
            .query(connection)
            .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    for connection in &mut connections {
        loop {
            let state = info_field(connection, &["CLUSTER", "INFO"], "cluster_state");
            let known = info_field(connection, &["CLUSTER", "INFO"], "cluster_known_nodes");
            if state == "ok" && known == "3" {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the cluster is not ok within 30 s (cluster_state {state}, {known} nodes known)"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    Cluster {
        nodes: nodes.into_iter().map(|(node, _)| node).collect(),
        connections,
    }
}

impl Cluster {
    fn node_of(&self, key: &str) -> usize {
        let slot = key_slot(key.as_bytes());
        (0..3)
            .position(|node| {
                let (first, last) = slot_range(node);
                (first..=last).contains(&slot)
            })
            .unwrap()
    }

    /// 3000 strings and 1500 hashes, each written to the node that owns its slot.
    fn fill(&mut self) {
        let mut pipes: Vec<redis::Pipeline> = (0..3).map(|_| redis::pipe()).collect();
        for i in 0..3000 {
            let key = format!("session:{i}");
            pipes[self.node_of(&key)]
                .cmd("SET")
                .arg(&key)
                .arg(format!("token-{i:08}"))
                .ignore();
            if i % 2 == 0 {
                let key = format!("order:{i}");
                pipes[self.node_of(&key)]
                    .cmd("HSET")
                    .arg(&key)
                    .arg("item")
                    .arg("book")
                    .arg("qty")
                    .arg(i % 5)
                    .ignore();
            }
        }
        for (pipe, connection) in pipes.iter().zip(&mut self.connections) {
            pipe.query::<()>(connection)
                .expect("each key goes to the node of its slot");
        }
    }

    fn dbsizes(&mut self) -> Vec<u64> {
        self.connections
            .iter_mut()
            .map(|c| redis::cmd("DBSIZE").query(c).unwrap())
            .collect()
    }
}

#[test]
fn the_slot_function_is_the_servers() {
    let mut cluster = start_cluster();
    for key in ["session:0", "order:1234", "session:2999"] {
        let slot: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut cluster.connections[0])
            .unwrap();
        assert_eq!(slot, key_slot(key.as_bytes()), "{key}");
    }
}

#[test]
fn with_cluster_every_primary_is_profiled_into_one_profile_and_without_it_one_node_says_so() {
    let mut cluster = start_cluster();
    cluster.fill();
    let dbsizes = cluster.dbsizes();
    assert_eq!(dbsizes.iter().sum::<u64>(), 4500);
    assert!(dbsizes.iter().all(|n| *n > 1000), "{dbsizes:?}");
    let seed = cluster.nodes[1].address.socket_addr();

    let (output, one) = common::profile_json(&seed, &[]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let one = one.expect("a profile of one node");
    assert_eq!(one.source.keys, dbsizes[1]);
    assert_eq!(one.source.primaries, 0);
    let stderr = common::stderr(&output);
    assert!(
        stderr.contains("the server is a cluster node")
            && stderr.contains(&format!("the keys of {seed} only"))
            && stderr.contains("--cluster"),
        "{stderr}"
    );

    let (output, all) = common::profile_json(&seed, &["--cluster"]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let all = all.expect("a profile of the cluster");
    all.check()
        .expect("the merged profile is valid for a rebuild");
    assert_eq!(all.source.keys, 4500, "DBSIZE of the three primaries");
    assert_eq!(all.source.sampled_keys, 4500);
    assert_eq!(all.source.primaries, 3);
    assert!(all.source.complete);
    let share = |template: &str, key_type| {
        all.groups
            .iter()
            .find(|g| g.template == template && g.key_type == key_type)
            .unwrap_or_else(|| panic!("no {template} group: {:?}", all.groups))
            .share
    };
    assert!((share("session:{n}", KeyType::String) - 3000.0 / 4500.0).abs() < 1e-9);
    assert!((share("order:{n}", KeyType::Hash) - 1500.0 / 4500.0).abs() < 1e-9);
    let notes = all.notes.join("\n");
    assert!(notes.contains("3 primaries of a cluster"), "{notes}");
    assert!(!notes.contains("the server is a cluster node"), "{notes}");
    let used: u64 = all.source.used_memory.expect("INFO memory of each");
    assert!(used > 3 * one.source.used_memory.unwrap() / 2, "{used}");
    let hashes = all
        .groups
        .iter()
        .find(|g| g.key_type == KeyType::Hash)
        .unwrap();
    assert_eq!(
        hashes.elements.as_ref().unwrap().buckets,
        vec![[2, 2, 1500]]
    );
}

#[test]
fn cluster_on_a_standalone_server_is_refused_saying_so() {
    let engine = common::start(EngineKind::Valkey, &[]);
    let mut connection = common::connect(&engine.address);
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query(&mut connection)
        .unwrap();
    let (output, profile) = common::profile_json(&engine.address.socket_addr(), &["--cluster"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(profile.is_none());
    let stderr = common::stderr(&output);
    assert!(
        stderr.contains("is not a cluster node") && stderr.contains("without --cluster"),
        "{stderr}"
    );
}
