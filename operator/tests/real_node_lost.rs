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

use common::faults::{status_of, wait_for_repetition};
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
    let mut settings = settings();
    settings.pods.engine_cpu = "1".into();
    settings.pods.client_cpu = "500m".into();
    // 5 s past a pod's deletion deadline the operator gives it up (15 s by default).
    settings.lost_pod_margin = Duration::from_secs(5);
    let harness = Harness::start("real-node-lost", settings).await?;
    // Evicted 2 s after their node becomes unreachable (the default is 300 s).
    let body = format!(
        "  instanceType: r7i.xlarge\n  engines:\n    - {{engine: redis, version: \"8.2.3\"}}\n  workload: {{sortedSet: {{members: 20000, sampleEvery: 0}}}}\n  repetitions: 6\n  settleSeconds: 5\n  placement:\n    tolerations:\n      - {{key: membench.io/real-node, operator: Equal, value: \"true\", effect: NoSchedule}}\n      - {{key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 2}}\n      - {{key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 2}}\n"
    );
    assert!(TOLERATE_REAL_NODES.contains("membench.io/real-node"));
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
    let first = engine(&done, 0);
    assert_eq!(
        first.reason.as_deref(),
        Some("NodeLost"),
        "{}",
        status_of(&done)
    );
    let message = first.message.clone().unwrap_or_default();
    eprintln!("engine 0: NodeLost: {message}");
    assert!(
        message.contains(&format!("node {} stopped reporting", node.name_any())),
        "{message}"
    );
    harness.finish().await;
    drop(faults);
    // Back for the tests after this one.
    ready_real_node(&client, Duration::from_secs(90)).await?;
    Ok(())
}
