//! Faults on a real node of the dev cluster (a kubelet with containerd and runc, see
//! real_node_e2e.rs), where what happens is the kubelet's and the kernel's: a client pod
//! deleted mid-run gets SIGTERM as PID 1 of its container's PID namespace, from the kubelet,
//! and its partial result travels in the termination message the kubelet reads.
//!
//! These tests need the real node: when it cannot start they fail, naming what is missing.

mod common;

use std::time::Duration;

use common::faults::{status_of, wait_for_repetition};
use common::operator::*;
use kube::ResourceExt;
use kube::api::DeleteParams;
use membench_devcluster::EnsureOptions;
use membench_devcluster::real_nodes::{TOLERATE_REAL_NODES, ensure_real_node};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_pod_deleted_mid_run_keeps_the_repetitions_it_finished() -> anyhow::Result<()> {
    let (_, node) = ensure_real_node(&EnsureOptions::default()).await?;
    let harness = Harness::start("real-client-gone", real_node_settings()).await?;
    let body = format!(
        "  instanceType: r7i.xlarge\n  engines:\n    - {{engine: redis, version: \"8.2.3\"}}\n  workload: {{sortedSet: {{members: 20000, sampleEvery: 0}}}}\n  repetitions: 6\n  settleSeconds: 3\n{TOLERATE_REAL_NODES}"
    );
    harness.create(&spec("gone", &body)).await?;
    let at_deletion = wait_for_repetition(&harness, "gone", 0, 3).await?;
    let begun = at_deletion
        .status
        .as_ref()
        .and_then(|s| s.progress.as_ref())
        .map(|p| p.repetition)
        .unwrap_or_default();
    let client = harness.pods().get("gone-0-client").await?;
    assert_eq!(
        client.spec.as_ref().and_then(|s| s.node_name.as_deref()),
        Some(node.name_any().as_str())
    );
    // The kubelet stops it: SIGTERM to the membench process, PID 1 in its container.
    harness
        .pods()
        .delete("gone-0-client", &DeleteParams::default())
        .await?;

    // When the second client starts, the first one's finished repetitions are already in the
    // status: read from the termination message the kubelet wrote after the SIGTERM.
    let retried = harness
        .wait_for(
            "gone",
            Duration::from_secs(120),
            "on its second client",
            |b| {
                b.status
                    .as_ref()
                    .is_some_and(|s| s.engines.first().is_some_and(|e| e.client_attempts >= 2))
            },
        )
        .await?;
    let kept = engine(&retried, 0).repetitions.len();
    assert!(
        kept as u32 + 1 >= begun,
        "the client was at repetition {begun} when deleted; only {kept} were kept: {}",
        status_of(&retried)
    );

    let done = harness.finished("gone", Duration::from_secs(180)).await?;
    let first = engine(&done, 0);
    assert_eq!(first.state, "Succeeded", "{}", status_of(&done));
    assert_eq!(first.client_attempts, 2, "{first:#?}");
    assert_eq!(
        first.repetitions.len(),
        6,
        "the second client measures only what the first did not: {first:#?}"
    );
    harness.finish().await;
    Ok(())
}
