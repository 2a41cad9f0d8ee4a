//! `spec.peak.replica` on two real nodes of the dev cluster (kubelets with containerd and runc,
//! see real_node_e2e.rs): the engine pod on one, its replica pod on the other, the client beside
//! the engine. A client pod sees neither engine's processes, so the operator reads both
//! containers' memory cgroups from their nodes' kubelets at the sync's two edges
//! (`/metrics/cadvisor` through the node proxy): the primary's, whose save's fork copies the
//! pages the writes touch, and the replica's, which grows from empty to the primary's data.
//!
//! A pool of its own (`r6i.xlarge`, two nodes), so the other real-node tests keep their one
//! node of `r7i.xlarge`. It needs the real nodes: when they cannot start it fails, naming what
//! is missing.

mod common;

use std::time::Duration;

use anyhow::Context as _;
use common::faults::status_of;
use common::operator::*;
use membench::crd::Phase;
use membench_devcluster::EnsureOptions;
use membench_devcluster::real_nodes::{TOLERATE_REAL_NODES, ensure_real_node};

/// Two real nodes of an instance type no other test uses.
const POOL: &str = "r6i.xlarge=2:kubelet";
const KEYS: u64 = 100_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replicas_full_sync_on_two_real_nodes_is_read_from_both_kubelets() -> anyhow::Result<()> {
    let mut options = EnsureOptions::default();
    options.extra_node_pools.push(POOL.into());
    ensure_real_node(&options).await?;
    let harness = Harness::start("real-replica", real_node_settings()).await?;
    // 100,000 values of 100 bytes (about 30 to a page), 50,000 writes a second over all of
    // them while the primary forks and sends: the copy touches most pages, so the primary's
    // container rises above anything its load reached.
    let body = format!(
        "  instanceType: r6i.xlarge\n  engines: [{{engine: valkey, version: \"9.1.2\", memory: 512Mi}}]\n  workload: {{strings: {{keys: {KEYS}, valueSize: 100}}}}\n  repetitions: 1\n  pipeline: 100\n  peak: {{replica: {{writesPerSecond: 50000}}}}\n  cleanupPolicy: KeepFailed\n{TOLERATE_REAL_NODES}"
    );
    harness.create(&spec("vk-replica", &body)).await?;
    let done = harness
        .finished("vk-replica", Duration::from_secs(300))
        .await?;
    let status = done.status.clone().context("a status")?;
    assert_eq!(status.phase, Some(Phase::Succeeded), "{}", status_of(&done));
    let engine = &status.engines[0];
    let (node, replica_node) = (
        engine.node_name.clone().context("the engine's node")?,
        engine
            .replica_node_name
            .clone()
            .context("the replica's node")?,
    );
    assert!(
        node.starts_with("r6i-xlarge-")
            && replica_node.starts_with("r6i-xlarge-")
            && node != replica_node,
        "engine on {node}, replica on {replica_node}"
    );
    let repetition = &engine.repetitions[0];
    let sync = repetition
        .peak
        .as_ref()
        .and_then(|p| p.replica.as_ref())
        .with_context(|| format!("the sync's figures in {repetition:#?}"))?;
    eprintln!("{sync:#?}");
    assert_eq!(sync.replica_keys, KEYS, "{sync:#?}");
    // The primary: its container, before the sync and at its high-water mark after.
    let primary = &sync.primary;
    assert_eq!(primary.source, "container-cgroup", "{primary:#?}");
    let before = primary.before_bytes.context("the primary before")?;
    let peak = primary
        .peak_bytes
        .with_context(|| format!("the primary's peak in {primary:#?}"))?;
    // The sync's fork and its backlog show: measured here at 19.6 MB before and 42.5 MB at
    // the peak (2.17 times); half that rise (1.5 times) is the least a sync that forked and
    // allocated its backlog can show, where a figure that missed the sync stays near 1.0.
    assert!(
        before > KEYS * 100 && peak as f64 > 1.5 * before as f64,
        "the primary's container: before {before}, peak {peak} ({:.2} times)",
        peak as f64 / before as f64
    );
    // The replica, read on its own node: its container, empty before the sync, rose to hold
    // the data it took (100 bytes a value and more) and about what its engine says it holds
    // (27.7 MB against a used_memory of 25.3 here; its resident set, 32.4 MB, also counts the
    // binary's file pages, which its container is not charged for).
    let replica_peak = sync
        .replica_peak_bytes
        .with_context(|| format!("the replica's peak in {sync:#?}"))?;
    assert!(
        replica_peak > KEYS * 100 && replica_peak as f64 >= 0.8 * sync.replica_used_memory as f64,
        "the replica's container peaked at {replica_peak}, its used_memory {}",
        sync.replica_used_memory
    );
    harness.finish().await;
    Ok(())
}
