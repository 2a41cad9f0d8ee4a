//! `spec.instanceTypes` end to end, on the dev cluster: one benchmark runs the same engines on
//! Graviton (r8g, arm64: the node agent runs the arm64 builds under qemu-user) and on x86 (r7i),
//! two at once on each pool (`parallelism: 2`); the status and `membench report` key every
//! result by engine and instance type, and each build stores a member in the same bytes on
//! either architecture.
//!
//! Needs what an x86 machine's `hack/install-engines.sh` installs (Debian's arm64 Redis 7.0.15,
//! the shared arm64 Valkey 9.1.2, qemu-user-static) and the membench image's arm64 half (the
//! archive from `hack/build-image.sh`, or `cargo build --target aarch64-unknown-linux-gnu -p
//! membench`).

mod common;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use common::engine_watch::watch_engines;
use common::operator::*;
use membench::crd::{EngineStatus, Phase};
use membench_devcluster::DevCluster;
use membench_devcluster::cluster::EnsureOptions;
use serde_json::Value;

const TYPES: [&str; 2] = ["r8g.4xlarge", "r7i.4xlarge"];

/// The mean settled bytes per member of a run (the hash table's incremental resize finished:
/// how far it got right after the load depends on timing, which emulation changes).
fn settled(e: &EngineStatus) -> f64 {
    let figures: Vec<f64> = e
        .repetitions
        .iter()
        .map(|r| r.settled_bytes_per_item.expect("a settled reading"))
        .collect();
    figures.iter().sum::<f64>() / figures.len() as f64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_benchmark_compares_arm64_and_x86_keyed_by_engine_and_instance_type()
-> anyhow::Result<()> {
    anyhow::ensure!(
        DevCluster::is_dev_cluster(),
        "needs the dev cluster's node agent, which runs arm64 builds under qemu-user (unset MEMBENCH_TEST_KUBECONFIG)"
    );
    let harness = Harness::start("instance-types", settings()).await?;
    let (watcher, watch) = watch_engines(harness.pods());
    harness
        .create(&spec(
            "arm-vs-x86",
            "  instanceTypes: [r8g.4xlarge, r7i.4xlarge]\n  parallelism: 2\n  engines:\n    - {engine: redis, version: \"7.0.15\"}\n    - {engine: valkey, version: \"9.1.2\"}\n  workload: {sortedSet: {members: 100000, sampleEvery: 0}}\n  repetitions: 2\n  settleSeconds: 2\n",
        ))
        .await?;
    // Under emulation the arm64 engines and clients run several times slower than native.
    let done = harness
        .finished("arm-vs-x86", Duration::from_secs(400))
        .await?;
    watcher.abort();
    let status = done.status.clone().unwrap();
    assert_eq!(status.phase, Some(Phase::Succeeded), "{status:#?}");

    // One entry per engine and instance type, each run on a node of its type by its own arch.
    let keys: Vec<(String, String)> = status
        .engines
        .iter()
        .map(|e| (e.name.clone(), e.instance_type.clone().unwrap_or_default()))
        .collect();
    let key = |n: &str, t: &str| (n.to_string(), t.to_string());
    assert_eq!(
        keys,
        [
            key("redis-7.0.15", TYPES[0]),
            key("valkey-9.1.2", TYPES[0]),
            key("redis-7.0.15", TYPES[1]),
            key("valkey-9.1.2", TYPES[1]),
        ]
    );
    let mut by_key = BTreeMap::new();
    for engine in &status.engines {
        let instance_type = engine.instance_type.clone().unwrap();
        let node = engine.node_name.clone().expect("a node");
        assert_eq!(
            instance_type_of(&harness.client, &node).await?,
            instance_type
        );
        let arch = if instance_type == TYPES[0] {
            "aarch64"
        } else {
            "x86_64"
        };
        assert_eq!(engine.arch.as_deref(), Some(arch), "{engine:#?}");
        assert_eq!(engine.repetitions.len(), 2);
        by_key.insert((engine.name.clone(), instance_type), settled(engine));
    }
    let watch = std::mem::take(&mut *watch.lock().unwrap());
    assert!(
        watch.overlaps.is_empty(),
        "two engines on one node: {:?}",
        watch.overlaps
    );
    // Two pools, two at once on each.
    assert!(watch.most_at_once["arm-vs-x86"] <= 4, "{watch:?}");

    // The same build, the same bytes on either architecture (tests/arm64_operator_e2e.rs: runs
    // of one build differ by up to 0.2 B/member at 100,000 members; a different layout or size
    // class would move the figure by 8 B or more).
    for name in ["redis-7.0.15", "valkey-9.1.2"] {
        let arm64 = by_key[&(name.to_string(), TYPES[0].to_string())];
        let x86 = by_key[&(name.to_string(), TYPES[1].to_string())];
        eprintln!("{name}: r8g (aarch64) {arm64:.3} B/member, r7i (x86_64) {x86:.3} B/member");
        assert!(
            (arm64 / x86 - 1.0).abs() < 0.005,
            "{name}: arm64 {arm64:.2} and x86 {x86:.2} B/member differ"
        );
    }

    // membench report keys its rows the same way, in JSON and in CSV.
    let kubeconfig = DevCluster::kubeconfig_with(&EnsureOptions::default()).await?;
    let report = |format: &str| {
        let output = Command::new(env!("CARGO_BIN_EXE_membench"))
            .args([
                "report",
                "--namespace",
                harness.namespace.name(),
                "--output",
                format,
            ])
            .env("KUBECONFIG", &kubeconfig)
            .output()
            .expect("membench report runs");
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout).unwrap()
    };
    let json: Value = serde_json::from_str(&report("json"))?;
    let rows: Vec<(String, String)> = json[0]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap_or_default().to_string(),
                r["instance_type"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(rows, keys, "{json}");
    assert_eq!(json[0]["instance_type"], "r8g.4xlarge, r7i.4xlarge");
    let csv = report("csv");
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let column = header.iter().position(|h| *h == "instance_type").unwrap();
    for instance_type in TYPES {
        assert!(
            csv.lines()
                .skip(1)
                .filter(|l| l.split(',').nth(column) == Some(instance_type))
                .count()
                >= 2,
            "{csv}"
        );
    }
    harness.finish().await;
    Ok(())
}
