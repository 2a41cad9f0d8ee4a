//! `spec.peak.replica` in a cluster, on the dev cluster with the node agent and the operator
//! in-process: the operator starts the engine's replica as a second engine pod on the other
//! node of the `r7i.4xlarge` pool (two nodes), the client beside the engine syncs it under
//! writes after each repetition's readings, and the replica's figures (its used_memory, the
//! keys it held once in sync) land in the status with the node it ran on; the NetworkPolicy
//! lets the replica reach its engine, and no pod is left behind.

mod common;

use std::time::Duration;

use anyhow::Context as _;
use common::faults::status_of;
use common::operator::*;
use k8s_openapi::api::networking::v1::NetworkPolicy;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_valkey_replica_syncs_under_writes_on_the_other_node_and_its_figures_reach_the_status()
-> anyhow::Result<()> {
    const TYPE: &str = "r7i.4xlarge";
    const KEYS: u64 = 20_000;
    let started = std::time::Instant::now();
    let harness = Harness::start("replica", settings()).await?;
    let (recorder, history) = record_pods(harness.pods());
    let body = format!(
        "  instanceType: {TYPE}\n  engines: [{{engine: valkey, version: \"9.1.2\"}}]\n  workload: {{strings: {{keys: {KEYS}, valueSize: 100}}}}\n  repetitions: 2\n  settleSeconds: 0\n  peak: {{replica: {{writesPerSecond: 2000}}}}\n"
    );
    harness.create(&spec("replica", &body)).await?;

    let done = harness
        .finished("replica", Duration::from_secs(300))
        .await?;
    recorder.abort();
    let run = engine(&done, 0);
    assert_eq!(run.state, "Succeeded", "{}", status_of(&done));
    assert_eq!(run.repetitions.len(), 2, "{run:#?}");
    for (i, repetition) in run.repetitions.iter().enumerate() {
        let replica = repetition
            .peak
            .as_ref()
            .and_then(|p| p.replica.as_ref())
            .with_context(|| format!("no peak.replica in repetition {}", i + 1))?;
        eprintln!(
            "repetition {} ({}): replica used_memory {} B, rss {} B, {} keys; primary {} B after, backlog {:?}, sync {:.2} s at {:.0} writes/s (asked {}), cow {:?}",
            i + 1,
            replica.primary.source,
            replica.replica_used_memory,
            replica.replica_used_memory_rss,
            replica.replica_keys,
            replica.primary_used_memory_after,
            replica.backlog_bytes,
            replica.primary.duration_seconds,
            replica.primary.writes_per_sec,
            replica.primary.writes_per_sec_asked,
            replica.primary.cow_bytes,
        );
        // In sync: the replica held the primary's keys, and about as many bytes of them.
        assert_eq!(replica.replica_keys, KEYS, "{replica:#?}");
        assert!(
            replica.replica_used_memory > KEYS * 100,
            "the replica holds {} B for {KEYS} values of 100 B: {replica:#?}",
            replica.replica_used_memory
        );
        assert_eq!(replica.primary.writes_per_sec_asked, 2000, "{replica:#?}");
        // The asked rate reached: measured 1,995 and 1,998/s of 2,000 (2026-12-06, on the dev
        // cluster). What falls short is the writes due while the last poll waited on the
        // replica loading its 2 MB, a few milliseconds of a 4.7 s sync; 10% below is the
        // product's own warning threshold.
        assert!(
            replica.primary.writes_per_sec >= 0.9 * 2000.0,
            "{replica:#?}"
        );
        // Valkey forks to send the sync, and counts what the fork copied: measured 0.97 and
        // 1.24 MB (the writes during the fork's life); a fifth of the least is asked, where
        // a sync that copied nothing (rdb_last_cow_size:0) fails.
        let cow = replica.primary.cow_bytes.unwrap_or(0);
        assert!(cow > 190_000, "the fork copied {cow} B: {replica:#?}");
    }

    // The benchmark's policy (made before its first pod, kept until it is deleted): the
    // replica reaches its engine on 6379.
    let policies: kube::Api<NetworkPolicy> = harness.namespace.api();
    let policy = serde_json::to_value(policies.get("replica").await?)?;
    let replica_rule = policy["spec"]["ingress"]
        .as_array()
        .context("ingress rules")?
        .iter()
        .any(|r| {
            r["ports"][0]["port"] == 6379
                && r["from"][0]["podSelector"]["matchLabels"]["membench.io/role"] == "replica"
        });
    assert!(replica_rule, "no rule lets the replica in: {policy:#}");

    // The engine and its replica each on a node of the pool, never the same one; the client
    // beside the engine; the status names both nodes.
    let nodes = history.lock().unwrap().nodes.clone();
    let engine_node = nodes
        .get("replica-0-engine")
        .context("the engine pod never ran")?;
    let replica_node = nodes
        .get("replica-0-replica")
        .context("the replica pod never ran")?;
    assert_ne!(
        engine_node, replica_node,
        "the replica ran beside its engine"
    );
    for node in [engine_node, replica_node] {
        assert_eq!(instance_type_of(&harness.client, node).await?, TYPE);
    }
    assert_eq!(nodes.get("replica-0-client"), Some(engine_node));
    assert_eq!(run.node_name.as_ref(), Some(engine_node));
    assert_eq!(run.replica_node_name.as_ref(), Some(replica_node));

    let gone = harness.pods_gone_within(Duration::from_secs(60)).await?;
    eprintln!(
        "every pod gone {:.1} s after the benchmark finished; {:.1} s in all",
        gone.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
