//! `engines[].shards` and `membench load --addr ... --addr ...` against real Valkey 9.1 cluster
//! nodes from the engine store: the client's slots are the engine's own, three local shards
//! measure the bytes per key one cluster-mode node measures with the keys spread over all
//! three, a slot moved under the load fails it naming the slot and the shard, shards that
//! cannot reach each other fail the bounded join naming the shard, a shard killed
//! mid-run fails that repetition naming the shard and keeps the ones before, and the bad
//! inputs are refused before anything starts.

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use membench::client::connection::engine::{ControlConnection, EngineAddress};
use membench::client::connection::shards::ShardSet;
use membench::client::connection::slots::key_slot;
use membench::client::measurement::load_options::RunSettings;
use membench::client::measurement::measure::{LoadOptions, measure_shards_journaled};
use membench::client::pod_io::result::ClientResult;
use membench::client::workloads::workload::Workload;
use membench::crd::{EngineKind, EngineSpec};
use membench::local::runner::LocalEngine;
use serde_json::Value;

/// Valkey 9.1 with the official image's allocator, as a cluster-mode node.
fn cluster_node_spec() -> EngineSpec {
    let mut spec = common::shared_build(EngineKind::Valkey, "9.1");
    spec.cluster_mode = true;
    spec
}

fn start_nodes(count: usize) -> Vec<LocalEngine> {
    let spec = cluster_node_spec();
    (0..count).map(|_| common::start_spec(&spec)).collect()
}

fn addresses(nodes: &[LocalEngine]) -> Vec<EngineAddress> {
    nodes.iter().map(|n| n.address.clone()).collect()
}

fn write_spec(name: &str, spec: &str) -> PathBuf {
    common::write_spec(
        &std::env::temp_dir(),
        &format!("membench-shards-{}-{name}", std::process::id()),
        spec,
    )
}

#[test]
fn the_clients_slot_of_a_key_is_the_engines_own() {
    let node = common::start_spec(&cluster_node_spec());
    let mut connection = common::connect(&node.address);
    let keys = [
        "key:000000000000",
        "key:000000123456",
        "membench:zset",
        "{user1000}.following",
        "foo{}{bar}",
        "foo{{bar}}zap",
        "foo{bar}{zap}",
        "123456789",
        "",
    ];
    for key in keys {
        let engine: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut connection)
            .unwrap();
        assert_eq!(key_slot(key.as_bytes()), engine, "CLUSTER KEYSLOT {key:?}");
    }
    node.stop();
}

#[test]
fn three_local_shards_measure_the_bytes_per_key_of_one_cluster_node_with_the_keys_on_all_three() {
    let build = cluster_node_spec().build.unwrap();
    let spec = write_spec(
        "three-shards",
        &format!(
            "  repetitions: 2\n  engines:\n    - {{engine: valkey, version: \"9.1\", build: {build}, shards: 3}}\n    - {{engine: valkey, version: \"9.1\", build: {build}, clusterMode: true, name: one-node}}\n  workload: {{strings: {{keys: 30000}}}}\n"
        ),
    );
    let output = common::membench(&["run", spec.to_str().unwrap(), "--output", "json"]);
    let _ = std::fs::remove_file(&spec);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    let engines = json["engines"].as_array().unwrap();
    let median = |i: usize| {
        engines[i]["summary"]["bytes_per_item"]["median"]
            .as_f64()
            .unwrap()
    };
    let (sharded, one_node) = (median(0), median(1));
    let difference = (sharded / one_node - 1.0).abs();
    eprintln!(
        "3 shards {sharded:.2} B/key, one node {one_node:.2} B/key ({:.2}%)",
        difference * 100.0
    );
    assert!(
        difference < 0.01,
        "3 shards measure {sharded:.2} bytes per key, one cluster node {one_node:.2}: more than 1% apart"
    );
    for repetition in engines[0]["repetitions"].as_array().unwrap() {
        let shards = repetition["shards"]
            .as_array()
            .expect("each shard's readings");
        assert_eq!(shards.len(), 3, "{repetition}");
        let keys: Vec<u64> = shards.iter().map(|s| s["keys"].as_u64().unwrap()).collect();
        assert_eq!(keys.iter().sum::<u64>(), 30000, "{keys:?}");
        assert_eq!(repetition["items"], 30000);
        for (shard, k) in shards.iter().zip(&keys) {
            let share = *k as f64 / 30000.0;
            assert!(
                (0.30..=0.37).contains(&share),
                "a shard holds {share:.3} of the keys: {keys:?}"
            );
            let data = shard["used_memory"].as_u64().unwrap() as i64
                - shard["baseline_used_memory"].as_u64().unwrap() as i64;
            assert!(data > 0, "{shard}");
        }
        let sum = |field: &str| {
            shards
                .iter()
                .map(|s| s[field].as_u64().unwrap())
                .sum::<u64>()
        };
        assert_eq!(repetition["used_memory"].as_u64(), Some(sum("used_memory")));
        assert_eq!(
            repetition["baseline_used_memory"].as_u64(),
            Some(sum("baseline_used_memory"))
        );
    }
    let spread = &engines[0]["summary"]["shards"];
    assert!(
        spread["keys_max_over_min"].as_f64().unwrap() < 1.1,
        "{spread}"
    );
    assert_eq!(
        engines[0]["cluster"]["shards"], 3,
        "the fixed cost is per shard"
    );
    assert!(engines[1]["repetitions"][0].get("shards").is_none());
    // Every shard was stopped at the end.
    let shard_addresses: Vec<String> = engines[0]["repetitions"][0]["shards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["address"].as_str().unwrap().to_string())
        .collect();
    for address in shard_addresses {
        assert!(
            std::net::TcpStream::connect(&address).is_err(),
            "the shard at {address} still runs after the run"
        );
    }
}

#[test]
fn a_slot_moved_under_the_load_fails_it_naming_the_slot_and_the_shard() {
    let nodes = start_nodes(2);
    let addresses = addresses(&nodes);
    // The first key of the load whose slot shard 0 owns in the even split (0 to 8191).
    let slot = (0..1000u64)
        .map(|i| key_slot(format!("key:{i:012}").as_bytes()))
        .find(|slot| *slot < 8192)
        .unwrap();
    // Held open, these keep the run waiting before its first baseline, every shard empty:
    // the slot is moved to shard 1 then, behind the client's back.
    let mut holders: Vec<redis::Connection> = addresses.iter().map(common::connect).collect();
    let ids: Vec<String> = holders
        .iter_mut()
        .map(|c| redis::cmd("CLUSTER").arg("MYID").query(c).unwrap())
        .collect();
    let run = {
        let addresses = addresses.clone();
        std::thread::spawn(move || {
            let workload = Workload::Strings {
                keys: 2000,
                value_size: 16,
            };
            let options = LoadOptions::of(RunSettings {
                repetitions: 2,
                other_clients_timeout: Duration::from_secs(60),
                ..RunSettings::default()
            });
            measure_shards_journaled(&addresses, &workload, &options, &mut |_| {}, &mut |_| {})
        })
    };
    let url = format!("redis://{}/", addresses[0].socket_addr());
    let deadline = Instant::now() + Duration::from_secs(60);
    while common::flushall_calls_at(&url) == 0 {
        assert!(
            Instant::now() < deadline,
            "the run never reached its first repetition"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for holder in holders.iter_mut().rev() {
        let _: String = redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(slot)
            .arg("NODE")
            .arg(&ids[1])
            .query(holder)
            .unwrap();
    }
    drop(holders);
    let report = run.join().unwrap();
    let error = report.error.expect("the load met MOVED");
    assert_eq!(error.category, "SlotMoved", "{}", error.message);
    assert!(
        error.message.contains(&format!("MOVED for slot {slot} "))
            && error
                .message
                .contains(&format!("shard 0 ({})", addresses[0])),
        "{}",
        error.message
    );
    assert!(report.repetitions.is_empty());
    assert_eq!(report.failed_repetition.unwrap().repetition, 1);
    for node in nodes {
        node.stop();
    }
}

#[test]
fn a_shard_killed_mid_run_fails_the_repetition_naming_it_and_keeps_the_finished_ones() {
    let nodes = start_nodes(3);
    let addresses = addresses(&nodes);
    let dir = std::env::temp_dir().join(format!("membench-shards-killed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let result = dir.join("termination-log");
    let mut client = common::start_load(
        &addresses,
        &["--workload", "strings", "--keys", "100000"],
        40,
        &result,
    );
    common::wait_for_repetitions(&addresses[0], &mut client, 2);
    common::send_signal(nodes[1].pid(), libc::SIGKILL).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = client.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the client did not exit within 60 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(!status.success());
    let text = std::fs::read_to_string(&result).expect("the client wrote its result");
    let message = ClientResult::read(&text, 40).expect("the result reads as the operator reads it");
    let error = message.error.clone().expect("why it stopped");
    assert_eq!(error.category, "ConnectionLost", "{}", error.message);
    assert!(
        error
            .message
            .contains(&format!("shard 1 ({})", addresses[1])),
        "{}",
        error.message
    );
    let kept = message.decoded_repetitions();
    assert!(kept.len() >= 2, "{} repetitions kept", kept.len());
    assert!(kept.iter().all(|r| r.items == 100_000), "{kept:?}");
    let failed = message.failed.expect("how far the failed repetition got");
    assert!(failed.repetition as usize > kept.len(), "{failed:?}");
    let shards = message.shards.expect("the shards' figures");
    assert_eq!(shards.keys.len(), 3);
    assert_eq!(shards.keys.iter().sum::<u64>(), 100_000);
    let _ = std::fs::remove_dir_all(dir);
    for node in nodes {
        drop(node);
    }
}

#[test]
fn nodes_that_belong_to_another_cluster_are_refused_naming_the_shard() {
    let nodes = start_nodes(3);
    let addresses = addresses(&nodes);
    // Shards 0 and 1 form a cluster of their own; shard 2 is not in it.
    let mut pair = ShardSet::open(&addresses[..2], Duration::from_secs(5)).unwrap();
    pair.join(Duration::from_secs(30)).unwrap();
    let mut three = ShardSet::open(&addresses, Duration::from_secs(5)).unwrap();
    let err = three.join(Duration::from_secs(5)).unwrap_err().to_string();
    assert!(
        err.contains(&format!("shard 0 ({})", addresses[0])) && err.contains("another cluster"),
        "{err}"
    );
    // A standalone node among the shards is named too.
    let standalone = common::start(EngineKind::Valkey, &[]);
    let mixed = [addresses[2].clone(), standalone.address.clone()];
    let mut set = ShardSet::open(&mixed, Duration::from_secs(5)).unwrap();
    let err = set.join(Duration::from_secs(5)).unwrap_err().to_string();
    assert!(
        err.contains(&format!("shard 1 ({})", standalone.address))
            && err.contains("not in cluster mode"),
        "{err}"
    );
    let mut control = ControlConnection::open(&addresses[2], Duration::from_secs(5)).unwrap();
    assert_eq!(control.cluster_info().unwrap()["cluster_known_nodes"], "1");
}

#[test]
fn bad_shard_inputs_are_refused_before_anything_starts() {
    let cases = [
        (
            "one-shard",
            "  engines: [{engine: valkey, version: \"9.1\", shards: 1}]\n  workload: {strings: {keys: 10}}\n",
            "shards is 1: a sharded cluster has at least 2 shards",
        ),
        (
            "cluster-off",
            "  engines: [{engine: valkey, version: \"9.1\", shards: 3, clusterMode: false}]\n  workload: {strings: {keys: 10}}\n",
            "spec.engines[0]: clusterMode is false, but shards is 3",
        ),
        (
            "dragonfly",
            "  engines: [{engine: dragonfly, version: \"1.40\", shards: 2}]\n  workload: {strings: {keys: 10}}\n",
            "Dragonfly has no multi-node cluster membench can join",
        ),
        (
            "sorted-set",
            "  engines: [{engine: redis, version: \"7.0\"}, {engine: valkey, version: \"9.1\", shards: 3}]\n  workload: {sortedSet: {members: 10}}\n",
            "spec.engines[1] (valkey-9.1): shards is 3, but the sorted-set workload is one key",
        ),
        (
            "too-many",
            "  engines: [{engine: valkey, version: \"9.1\", shards: 17}]\n  workload: {strings: {keys: 10}}\n",
            "membench joins at most 16 shards",
        ),
    ];
    for (name, body, expected) in cases {
        let spec = write_spec(name, body);
        let output = common::membench(&["run", spec.to_str().unwrap()]);
        let _ = std::fs::remove_file(&spec);
        let stderr = common::stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{name}: {stderr}");
        assert!(stderr.contains(expected), "{name}: {stderr}");
    }
    let seventeen: Vec<String> = (0..17)
        .flat_map(|i| ["--addr".to_string(), format!("127.0.0.1:{}", 20000 + i)])
        .collect();
    let mut args = vec!["load", "--workload", "strings", "--keys", "10"];
    args.extend(seventeen.iter().map(String::as_str));
    let output = common::membench(&args);
    assert_eq!(output.status.code(), Some(2), "{}", common::stderr(&output));
    assert!(
        common::stderr(&output).contains("17 addresses given"),
        "{}",
        common::stderr(&output)
    );
}

#[test]
fn the_table_and_the_html_page_show_each_shard() {
    let build = cluster_node_spec().build.unwrap();
    let spec = write_spec(
        "html",
        &format!(
            "  repetitions: 1\n  engines:\n    - {{engine: valkey, version: \"9.1\", build: {build}, shards: 2, name: two}}\n  workload: {{strings: {{keys: 3000}}}}\n"
        ),
    );
    let html = common::membench(&["run", spec.to_str().unwrap(), "--output", "html"]);
    let _ = std::fs::remove_file(&spec);
    assert!(html.status.success(), "{}", common::stderr(&html));
    let page = common::stdout(&html);
    assert!(
        page.contains("two: each shard&#39;s median over the repetitions (2 shards, keys "),
        "{page}"
    );
    assert!(page.contains("<th>Share of keys</th>"), "{page}");

    let nodes = start_nodes(2);
    let mut args = vec![
        "load",
        "--workload",
        "strings",
        "--keys",
        "3000",
        "--repetitions",
        "1",
    ];
    let flags: Vec<String> = nodes
        .iter()
        .flat_map(|n| ["--addr".to_string(), n.address.socket_addr()])
        .collect();
    args.extend(flags.iter().map(String::as_str));
    let table = common::membench(&args);
    assert!(table.status.success(), "{}", common::stderr(&table));
    let text = common::stdout(&table);
    for node in &nodes {
        let row = text
            .lines()
            .find(|line| line.contains(&node.address.socket_addr()))
            .unwrap_or_else(|| panic!("no row of the shard at {}: {text}", node.address));
        assert!(row.contains('%'), "{row}");
    }
    assert!(text.contains("2 shards, keys "), "{text}");
    // membench load flushes what it wrote from every shard.
    for node in &nodes {
        let mut connection = common::connect(&node.address);
        let keys: u64 = redis::cmd("DBSIZE").query(&mut connection).unwrap();
        assert_eq!(
            keys, 0,
            "the shard at {} keeps the benchmark's keys",
            node.address
        );
    }
}

#[test]
fn shards_that_cannot_reach_each_others_bus_fail_the_join_naming_the_shard() {
    // Shard 1 listens for the cluster bus elsewhere than its port + 10000, where shard 0 looks.
    let bus = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let bus_port = bus.local_addr().unwrap().port().to_string();
    drop(bus);
    let mut elsewhere = cluster_node_spec();
    elsewhere.args = vec!["--cluster-port".into(), bus_port];
    let nodes = [
        common::start_spec(&cluster_node_spec()),
        common::start_spec(&elsewhere),
    ];
    let addresses: Vec<EngineAddress> = nodes.iter().map(|n| n.address.clone()).collect();
    let mut shards = ShardSet::open(&addresses, Duration::from_secs(5)).unwrap();
    let started = Instant::now();
    let err = shards.join(Duration::from_secs(3)).unwrap_err().to_string();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the wait is bounded"
    );
    // Shard 0, first in order, sees shard 1 only in its handshake and half the slots.
    assert!(
        err.contains(&format!(
            "shard 0 ({}) did not join the 2-shard cluster within 3 s",
            addresses[0]
        )) && err.contains("cluster_slots_assigned:8192")
            && err.contains("cluster bus port"),
        "{err}"
    );
}
