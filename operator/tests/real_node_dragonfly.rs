//! Dragonfly on a real node of the dev cluster (a kubelet with containerd and runc, see
//! real_node_e2e.rs): under the pod's `RuntimeDefault` seccomp profile, containerd 2's blocks
//! the `io_uring_*` system calls, so Dragonfly runs on epoll instead of io_uring
//! (dragonfly#4042). The result says which it ran on (`multiplexingApi`), its explicit
//! `--maxmemory` is the operator's share of the pod's limit, and its bytes per item are what a
//! local run of the same build measures.
//!
//! These tests need the real node: when it cannot start they fail, naming what is missing.

mod common;

use std::time::Duration;

use anyhow::Context as _;
use common::operator::*;
use common::real_node::assert_a_local_run_measures_the_same;
use kube::ResourceExt;
use membench::crd::Phase;
use membench_devcluster::EnsureOptions;
use membench_devcluster::real_nodes::{TOLERATE_REAL_NODES, ensure_real_node};

/// Dragonfly 1.40 with one thread, as the local runner starts it (`--proactor_threads=1`), so
/// the two runs shard the data alike; 1Gi, above the 640Mi two threads would need.
const DRAGONFLY_ON_THE_REAL_NODE: &str = "  instanceType: r7i.xlarge\n  engines:\n    - {engine: dragonfly, version: \"1.40.0\", memory: 1Gi, args: [\"--proactor_threads=1\"]}\n  workload: {sortedSet: {members: 100000, sampleEvery: 0}}\n  repetitions: 2\n  pipeline: 100\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dragonfly_under_runtime_default_seccomp_runs_on_epoll_says_so_and_measures_what_a_local_run_does()
-> anyhow::Result<()> {
    let (_, node) = ensure_real_node(&EnsureOptions::default()).await?;
    let harness = Harness::start("real-dragonfly", real_node_settings()).await?;
    let yaml = spec(
        "dfly",
        &format!("{DRAGONFLY_ON_THE_REAL_NODE}{TOLERATE_REAL_NODES}"),
    );
    harness.create(&yaml).await?;
    common::faults::wait_for_repetition(&harness, "dfly", 0, 1).await?;
    let engine_pod = harness.pods().get("dfly-0-engine").await?;
    let args = engine_pod
        .spec
        .and_then(|s| s.containers.into_iter().next()?.args)
        .unwrap_or_default();
    // The operator's explicit --maxmemory: 80% of the 1Gi limit, in bytes.
    assert!(
        args.contains(&format!("--maxmemory={}", 1024_u64 * 1024 * 1024 * 4 / 5)),
        "{args:?}"
    );
    let done = harness.finished("dfly", Duration::from_secs(240)).await?;
    let status = done
        .status
        .clone()
        .context("a finished benchmark has a status")?;
    assert_eq!(status.phase, Some(Phase::Succeeded), "{status:#?}");
    let dragonfly = &status.engines[0];
    assert_eq!(
        dragonfly.node_name.as_deref(),
        Some(node.name_any().as_str())
    );
    assert!(
        dragonfly.image_id.as_deref().is_some_and(|id| id
            .starts_with("docker.dragonflydb.io/dragonflydb/dragonfly@sha256:")),
        "{:?}",
        dragonfly.image_id
    );
    // containerd's RuntimeDefault profile refuses io_uring_setup: Dragonfly falls back to
    // epoll, and the result says so.
    assert_eq!(
        dragonfly.multiplexing_api.as_deref(),
        Some("epoll"),
        "{dragonfly:#?}"
    );
    // The same build run locally (io_uring where the kernel allows it) stores the same bytes
    // per item: the event loop and the node change nothing in the engine's accounting.
    let images = ["docker.dragonflydb.io/dragonflydb/dragonfly:v1.40.0"];
    let local = assert_a_local_run_measures_the_same(&yaml, &images, &status.engines).await?;
    eprintln!(
        "dragonfly locally ran on {:?}",
        local[0].engine.multiplexing_api
    );
    harness
        .pods_gone_within(Duration::from_secs(60))
        .await
        .context("after the benchmark finished")?;
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dragonfly_at_its_maxmemory_refuses_writes_before_the_kernel_kills_it_and_says_so()
-> anyhow::Result<()> {
    ensure_real_node(&EnsureOptions::default()).await?;
    let harness = Harness::start("real-dfly-oom", real_node_settings()).await?;
    // One thread in 384Mi: --maxmemory is 80% of it, about 307 MiB, and 400,000 keys of 1,000
    // bytes need more. Dragonfly answers -OOM at its maxmemory, well below the cgroup's limit.
    let body = format!(
        "  instanceType: r7i.xlarge\n  engines:\n    - {{engine: dragonfly, version: \"1.40.0\", memory: 384Mi, args: [\"--proactor_threads=1\"]}}\n  workload: {{strings: {{keys: 400000, valueSize: 1000}}}}\n  repetitions: 2\n  pipeline: 100\n  cleanupPolicy: KeepFailed\n{TOLERATE_REAL_NODES}"
    );
    harness.create(&spec("dfly-oom", &body)).await?;
    let done = harness
        .finished("dfly-oom", Duration::from_secs(240))
        .await?;
    let first = engine(&done, 0);
    assert_eq!(
        first.reason.as_ref().map(|r| r.as_str()),
        Some("EngineOutOfMemory"),
        "{}",
        common::faults::status_of(&done)
    );
    assert!(first.repetitions.is_empty(), "{first:#?}");
    // The engine itself stayed up: its container still runs, was never restarted and never
    // ended (for any reason, the kernel's OOM kill included), as the kept pod shows.
    let engine_pod = harness.pods().get("dfly-oom-0-engine").await?;
    let container = engine_pod
        .status
        .and_then(|s| s.container_statuses)
        .and_then(|c| c.into_iter().find(|c| c.name == "engine"))
        .context("the engine container's status (cleanupPolicy KeepFailed)")?;
    assert!(
        container
            .state
            .as_ref()
            .is_some_and(|s| s.running.is_some()),
        "the engine container is not running: {container:#?}"
    );
    assert_eq!(container.restart_count, 0, "{container:#?}");
    assert!(
        container
            .last_state
            .as_ref()
            .is_none_or(|s| s.terminated.is_none()),
        "the engine container ended once: {container:#?}"
    );
    harness.finish().await;
    Ok(())
}
