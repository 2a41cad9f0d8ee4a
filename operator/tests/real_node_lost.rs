//! A real node lost mid-run: its kubelet stops (`hack/dev-cluster.sh stop-kubelet`), as a
//! kubelet that crashed or a machine cut off. Its containers keep running under containerd,
//! nothing reports for the node, the node lifecycle controller marks it unreachable and evicts
//! its pods, which stay Terminating with no kubelet to confirm. A test file of its own, since
//! cargo runs one test binary at a time: no other real-node test runs while its node is down,
//! and the node is started afresh when the test ends.
//!
//! Needs the real node: when it cannot start the test fails, naming what is missing.

mod common;

use std::time::{Duration, Instant};

use common::faults::{EVICTED_WITHIN_2S, assert_node_lost, wait_for_repetition};
use common::operator::*;
use kube::ResourceExt;
use membench_devcluster::EnsureOptions;
use membench_devcluster::faults::Faults;
use membench_devcluster::real_nodes::{TOLERATE_REAL_NODES, ensure_real_node, ready_real_node};

/// Starts the stopped real node again however the test ends, so the tests after it have it.
struct RestartRealNodes(Faults);

impl Drop for RestartRealNodes {
    fn drop(&mut self) {
        if let Err(e) = self.0.restart_real_nodes() {
            eprintln!("starting the real node again: {e:#}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_node_whose_kubelet_stops_is_lost_and_the_benchmark_says_so() -> anyhow::Result<()> {
    let (client, node) = ensure_real_node(&EnsureOptions::default()).await?;
    let mut settings = real_node_settings();
    // 5 s past a pod's deletion deadline the operator gives it up (15 s by default).
    settings.lost_pod_margin = Duration::from_secs(5);
    let harness = Harness::start("real-node-lost", settings).await?;
    // The real node's taint tolerated, and evicted 2 s after the node becomes unreachable.
    let body = format!(
        "  instanceType: r7i.xlarge\n  engines:\n    - {{engine: redis, version: \"8.2.3\"}}\n  workload: {{sortedSet: {{members: 20000, sampleEvery: 0}}}}\n  repetitions: 6\n  settleSeconds: 5\n{TOLERATE_REAL_NODES}{EVICTED_WITHIN_2S}"
    );
    harness.create(&spec("lost", &body)).await?;
    let measuring = wait_for_repetition(&harness, "lost", 0, 2).await?;
    assert_eq!(
        engine(&measuring, 0).node_name.as_deref(),
        Some(node.name_any().as_str())
    );
    let faults = RestartRealNodes(Faults::of_dev_cluster().await?);
    faults.0.stop_kubelet(&node.name_any())?;
    let stopped = Instant::now();

    let done = harness.finished("lost", Duration::from_secs(240)).await?;
    eprintln!(
        "finished {} s after the kubelet of {} stopped",
        stopped.elapsed().as_secs(),
        node.name_any()
    );
    assert_node_lost(&done, 0, &node.name_any());
    harness.finish().await;
    drop(faults);
    // Back for the tests after this one.
    ready_real_node(&client, Duration::from_secs(90)).await?;
    Ok(())
}
