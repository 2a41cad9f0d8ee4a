//! Engine settings in a cluster, on the dev cluster with the operator running: an entry's
//! `config` reaches the engine pod and its effective value, read back by the client with
//! CONFIG GET, lands in the engine's status; args outside the allowlist (Dragonfly's
//! single-dash `-requirepass=x`, `--admin_port`, `--memcached_port`) are `PolicyDenied` naming
//! them, and nothing is created; `clusterMode` entries run as one-node clusters in their pods;
//! a workload's TTL reaches the client pods, with and without it side by side.

mod common;

use std::time::Duration;

use anyhow::Context as _;

use common::operator::{Harness, refusal_message, settings, spec};
use common::pod_record::PodRecord;
use common::real_node::run_locally;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entrys_config_reaches_its_engine_and_the_effective_values_land_in_status()
-> anyhow::Result<()> {
    let harness = Harness::start("ns-settings", settings()).await?;
    let body = "  instanceType: r7i.4xlarge\n  engines:\n    - {engine: valkey, version: \"9.1.2\", config: {hash-max-listpack-entries: \"0\", maxmemory: 900mb}}\n    - {engine: dragonfly, version: \"1.40.0\", config: {max_eviction_per_heartbeat: \"50\", list_max_listpack_size: \"-3\"}}\n  workload: {records: {records: 2000, layout: hash}}\n  repetitions: 1\n";
    harness.create(&spec("settings", body)).await?;
    let done = harness
        .finished("settings", Duration::from_secs(240))
        .await?;
    let engines = done.status.unwrap().engines;
    assert_eq!(engines[0].state, "Succeeded", "{:#?}", engines[0]);
    assert_eq!(
        engines[0]
            .config
            .get("hash-max-listpack-entries")
            .map(String::as_str),
        Some("0"),
        "{:#?}",
        engines[0]
    );
    assert_eq!(
        engines[0].config.get("maxmemory").map(String::as_str),
        Some("943718400"),
        "900mb as Valkey reads it back"
    );
    assert_eq!(engines[1].state, "Succeeded", "{:#?}", engines[1]);
    assert_eq!(
        engines[1]
            .config
            .get("max_eviction_per_heartbeat")
            .map(String::as_str),
        Some("50"),
        "{:#?}",
        engines[1]
    );
    assert_eq!(engines[1].config_unreported, ["list_max_listpack_size"]);
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn args_outside_the_allowlist_are_invalid_spec_naming_them_and_nothing_is_created()
-> anyhow::Result<()> {
    let harness = Harness::start("ns-settings-args", settings()).await?;
    let record = PodRecord::start(harness.pods()).await?;
    let cases = [
        (
            "df-pass",
            "dragonfly",
            "1.40.0",
            "[-requirepass=x]",
            "'-requirepass=x' would open the engine again",
        ),
        (
            "df-admin",
            "dragonfly",
            "1.40.0",
            "[--admin_port=7000]",
            "'--admin_port=7000' would open the engine again",
        ),
        (
            "df-nopass",
            "dragonfly",
            "1.40.0",
            "[--admin_nopass]",
            "'--admin_nopass' would open the engine again",
        ),
        (
            "df-memcached",
            "dragonfly",
            "1.40.0",
            "[--memcached_port, \"11211\"]",
            "'--memcached_port 11211' would open the engine again",
        ),
        (
            "redis-threads",
            "redis",
            "7.0.15",
            "[--io-threads, \"4\"]",
            "'--io-threads 4' is not a memory-relevant setting",
        ),
    ];
    for (name, engine, version, args, _) in cases {
        let body = format!(
            "  instanceType: r7i.4xlarge\n  engines: [{{engine: {engine}, version: \"{version}\", args: {args}}}]\n  workload: {{sortedSet: {{members: 1000, sampleEvery: 0}}}}\n"
        );
        harness.create(&spec(name, &body)).await?;
    }
    for (name, _, _, _, words) in cases {
        let done = harness.finished(name, Duration::from_secs(60)).await?;
        let message = refusal_message(&done, name, "PolicyDenied");
        assert!(
            message.starts_with("spec.engines[0].args: ")
                && message.contains(words)
                && message.contains("--allow-open-engine-args"),
            "{name}: {message}"
        );
    }
    // Not one pod, ever: watched from before the first benchmark was created.
    let pods = record.all_pods()?;
    assert!(pods.is_empty(), "pods were created: {pods:?}");
    harness.finish().await;
    Ok(())
}

/// Each build standalone and in cluster mode, side by side: the cluster-mode entries' fixed cost
/// is measured against the standalone ones.
const CLUSTER_MODE: &str = "  instanceType: r7i.4xlarge\n  engines:\n    - {engine: valkey, version: \"9.1.2\", name: valkey}\n    - {engine: valkey, version: \"9.1.2\", name: valkey-cluster, clusterMode: true}\n    - {engine: redis, version: \"7.0.15\", name: redis}\n    - {engine: redis, version: \"7.0.15\", name: redis-cluster, clusterMode: true}\n    - {engine: dragonfly, version: \"1.40.0\", name: dragonfly}\n    - {engine: dragonfly, version: \"1.40.0\", name: dragonfly-cluster, clusterMode: true}\n  workload: {strings: {keys: 5000, valueSize: 16}}\n  repetitions: 1\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_mode_engine_runs_as_a_one_node_cluster_in_its_pod_and_its_fixed_cost_is_a_local_runs()
-> anyhow::Result<()> {
    let harness = Harness::start("ns-cluster-mode", settings()).await?;
    harness.create(&spec("cluster", CLUSTER_MODE)).await?;
    let done = harness
        .finished("cluster", Duration::from_secs(400))
        .await?;
    let status = done.status.clone().unwrap();
    for engine in &status.engines {
        assert_eq!(engine.state, "Succeeded", "{engine:#?}");
        assert_eq!(engine.repetitions[0].items, 5000, "{engine:#?}");
    }
    // What each engine answered to CLUSTER INFO in its pod: the cluster-mode ones (Dragonfly's
    // emulated cluster included) a one-node cluster owning every slot; the standalone ones
    // none (the client asks only a cluster it made: cluster_mode.rs shows that standalone
    // engines refuse the command).
    for pair in status.engines.chunks(2) {
        let (standalone, cluster) = (&pair[0], &pair[1]);
        assert_eq!(standalone.cluster, None, "{standalone:#?}");
        assert_eq!(standalone.cluster_fixed_cost, None, "{standalone:#?}");
        let state = cluster
            .cluster
            .as_ref()
            .with_context(|| format!("{} recorded no CLUSTER INFO", cluster.name))?;
        assert_eq!(
            (state.state.as_str(), state.slots, state.nodes, state.size),
            ("ok", 16384, 1, 1),
            "{}",
            cluster.name
        );
        let cost = cluster
            .cluster_fixed_cost
            .as_ref()
            .with_context(|| format!("{} has no clusterFixedCost", cluster.name))?;
        assert_eq!(cost.standalone_entry, standalone.name);
    }
    // The pods' fixed costs are those of the same builds run locally (membench run's path).
    let images: Vec<&str> = status
        .engines
        .iter()
        .map(|e| e.image.as_deref().unwrap_or_default())
        .collect();
    let local = run_locally(&spec("cluster", CLUSTER_MODE), &images).await?;
    for (in_pod, local) in status.engines.iter().zip(&local).skip(1).step_by(2) {
        let in_pod_cost = in_pod.cluster_fixed_cost.as_ref().unwrap().fixed_cost_bytes;
        let local_cost = local
            .cluster
            .as_ref()
            .with_context(|| format!("the local run of {} has no fixed cost", in_pod.name))?
            .fixed_cost_bytes;
        eprintln!(
            "{}: cluster fixed cost {in_pod_cost} B in its pod, {local_cost} B locally",
            in_pod.name
        );
        // An empty engine's used_memory steps by about 24 KiB with its first connections.
        let margin = (local_cost.abs() / 20).max(64 * 1024);
        assert!(
            (in_pod_cost - local_cost).abs() <= margin,
            "{}: {in_pod_cost} B in its pod against {local_cost} B locally (within {margin} B)",
            in_pod.name
        );
    }
    // Valkey 9.1's dictionary per slot costs about 1.9 MB before any data (cluster_mode.rs
    // reads it locally): a standalone node in the pod would show none.
    let valkey = status.engines[1].cluster_fixed_cost.as_ref().unwrap();
    assert!(
        valkey.fixed_cost_bytes > 1_000_000,
        "Valkey 9.1.2's cluster fixed cost in its pod: {valkey:?}"
    );
    // The pods go after the status says done (their deletion takes a moment).
    harness
        .pods_gone_within(Duration::from_secs(60))
        .await
        .context("the pods are gone once done")?;
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_with_a_ttl_cost_more_than_without_in_pods_side_by_side() -> anyhow::Result<()> {
    let harness = Harness::start("ns-ttl", settings()).await?;
    let body = "  instanceType: r7i.4xlarge\n  engines:\n    - {engine: valkey, version: \"8.0.9\", name: ttl}\n    - {engine: valkey, version: \"8.0.9\", name: plain, withoutTtl: true}\n  workload: {strings: {keys: 20000, valueSize: 16, ttlSeconds: 3600}}\n  repetitions: 1\n";
    harness.create(&spec("ttl", body)).await?;
    let done = harness.finished("ttl", Duration::from_secs(240)).await?;
    let engines = done.status.unwrap().engines;
    let median = |i: usize| {
        assert_eq!(engines[i].state, "Succeeded", "{:#?}", engines[i]);
        engines[i].summary.as_ref().unwrap().bytes_per_item.median
    };
    // Valkey 8.0 keeps each expiry in a second dict entry (+39.7 B/key at 632k keys locally).
    assert!(
        median(0) - median(1) > 20.0,
        "with a TTL {:.1}, without {:.1}",
        median(0),
        median(1)
    );
    harness.finish().await;
    Ok(())
}
