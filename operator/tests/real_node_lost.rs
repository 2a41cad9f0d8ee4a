//! A real node lost mid-run: its kubelet stops (`hack/dev-cluster.sh stop-kubelet`), as a
//! kubelet that crashed or a machine cut off. Its containers keep running under containerd,
//! nothing reports for the node, the node lifecycle controller marks it unreachable and evicts
//! its pods, which stay Terminating with no kubelet to confirm. A test file of its own, since
//! cargo runs one test binary at a time: no other real-node test runs while its node is down,
//! and the node is started afresh when the test ends.
//!
//! Needs the real node: when it cannot start the test fails, naming what is missing.
//!
//! Only the kubelet stops: the client carries on and its progress endpoint still answers on
//! its pod address, so the operator reads the repetitions it finished from there before it
//! gives the node up, and NodeLost keeps them.

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
    // 12 repetitions of about 5 s (the settle wait): the client is still measuring when the
    // node is given up, about 40 s after its kubelet stopped.
    let body = format!(
        "  instanceType: r7i.xlarge\n  engines:\n    - {{engine: redis, version: \"8.2.3\"}}\n  workload: {{sortedSet: {{members: 20000, sampleEvery: 0}}}}\n  repetitions: 12\n  settleSeconds: 5\n{TOLERATE_REAL_NODES}{EVICTED_WITHIN_2S}"
    );
    harness.create(&spec("lost", &body)).await?;
    let measuring = wait_for_repetition(&harness, "lost", 0, 2).await?;
    assert_eq!(
        engine(&measuring, 0).node_name.as_deref(),
        Some(node.name_any().as_str())
    );
    let finished_before_the_stop = measuring
        .status
        .as_ref()
        .and_then(|s| s.progress.as_ref())
        .map_or(0, |p| p.repetition.saturating_sub(1));
    let client_pod = harness.pods().get("lost-0-client").await?;
    let client_ip: std::net::IpAddr = client_pod
        .status
        .and_then(|s| s.pod_ip)
        .ok_or_else(|| anyhow::anyhow!("the client pod has no IP"))?
        .parse()?;
    let faults = RestartRealNodes(Faults::of_dev_cluster().await?);
    faults.0.stop_kubelet(&node.name_any())?;
    let stopped = Instant::now();

    let done = harness.finished("lost", Duration::from_secs(240)).await?;
    eprintln!(
        "finished {} s after the kubelet of {} stopped",
        stopped.elapsed().as_secs(),
        node.name_any()
    );
    let message = assert_node_lost(&done, 0, &node.name_any());
    // What the client finished is kept: the repetitions after the kubelet stopped too.
    let kept = engine(&done, 0).repetitions;
    assert!(
        message.contains("served the repetitions it finished"),
        "{message}"
    );
    assert!(
        kept.len() as u32 > finished_before_the_stop && kept.len() < 12,
        "{} repetitions kept, {finished_before_the_stop} finished before the kubelet stopped",
        kept.len()
    );
    // They are the client's own: it still runs there (no kubelet stops it) and serves them.
    let address = std::net::SocketAddr::new(
        client_ip,
        membench::client::pod_io::progress_endpoint::PROGRESS_PORT,
    );
    let served =
        membench::client::pod_io::progress_endpoint::fetch_result(address, Duration::from_secs(3))
            .await
            .ok_or_else(|| anyhow::anyhow!("the client at {address} serves no result"))?;
    let served = membench::client::pod_io::result::ClientResult::read_whole(&served, 12)
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .decoded_repetitions();
    eprintln!(
        "kept {} repetitions ({finished_before_the_stop} finished before the kubelet stopped); the client has finished {} by now",
        kept.len(),
        served.len()
    );
    assert!(served.len() >= kept.len());
    for (status, client) in kept.iter().zip(&served) {
        assert_eq!(status.used_memory, client.used_memory);
        assert_eq!(status.baseline_used_memory, client.baseline_used_memory);
    }
    harness.finish().await;
    drop(faults);
    // Back for the tests after this one.
    ready_real_node(&client, Duration::from_secs(90)).await?;
    Ok(())
}
