//! The operator end to end on a real node of the dev cluster: a kubelet with containerd and
//! runc (`hack/dev-cluster.sh`, pool `r7i.xlarge=1:kubelet`), so what only a real node decides
//! is the node's: the images' own config (entrypoint, user 999, working directory), cgroup
//! memory limits, the `RuntimeDefault` seccomp profile, the read-only root file system and
//! pod addresses from the CNI bridge plugin. The images are real images preloaded into the
//! node's containerd: the engine images built from the engine store's builds
//! (`hack/node-images.sh`), the membench image from `hack/build-image.sh`'s archive.
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
use membench_devcluster::real_nodes::{
    REAL_NODE_INSTANCE_TYPE, TOLERATE_REAL_NODES, ensure_real_node,
};

/// Redis 8.2.3 and Valkey 9.1.2, the like-for-like pair of operator_e2e, on the real node's
/// instance type (its taint tolerated, [`TOLERATE_REAL_NODES`]). Small, so the node's 1750m
/// CPUs and 4Gi hold an engine and its client; 100,000 members, so the few kilobytes of client
/// buffers that differ between two runs stay well below the 0.5% compared (at 20,000 members
/// they moved Valkey's figure by 0.34%).
const TWO_ENGINES_ON_THE_REAL_NODE: &str = "  instanceType: r7i.xlarge\n  engines:\n    - {engine: redis, version: \"8.2.3\"}\n    - {engine: valkey, version: \"9.1.2\"}\n  workload: {sortedSet: {members: 100000, sampleEvery: 0}}\n  repetitions: 2\n  pipeline: 100\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_engine_comparison_on_a_real_node_measures_what_a_local_run_of_the_same_builds_does()
-> anyhow::Result<()> {
    assert_eq!(
        REAL_NODE_INSTANCE_TYPE, "r7i.xlarge",
        "the spec below names it"
    );
    let (_, node) = ensure_real_node(&EnsureOptions::default()).await?;
    let harness = Harness::start("real-zset", real_node_settings()).await?;
    let (recorder, history) = record_pods(harness.pods());
    let yaml = spec(
        "zset",
        &format!("{TWO_ENGINES_ON_THE_REAL_NODE}{TOLERATE_REAL_NODES}"),
    );
    harness.create(&yaml).await?;
    let done = harness.finished("zset", Duration::from_secs(300)).await?;
    recorder.abort();
    let status = done
        .status
        .clone()
        .context("a finished benchmark has a status")?;
    assert_eq!(status.phase, Some(Phase::Succeeded), "{status:#?}");

    // Pinned to the real node, each client beside its engine, one engine at a time.
    let history = std::mem::take(&mut *history.lock().unwrap());
    for i in 0..2 {
        for component in ["engine", "client"] {
            let pod = format!("zset-{i}-{component}");
            let ran_on = history
                .nodes
                .get(&pod)
                .with_context(|| format!("{pod} never scheduled: {history:?}"))?;
            assert_eq!(ran_on, &node.name_any(), "{pod} must run on the real node");
        }
        assert_eq!(
            status.engines[i].node_name.as_deref(),
            Some(node.name_any().as_str())
        );
    }
    assert_eq!(
        history.max_engines_at_once, 1,
        "engines must run one at a time"
    );

    let (redis, valkey) = (&status.engines[0], &status.engines[1]);
    assert_eq!(redis.version.as_deref(), Some("8.2.3"));
    assert_eq!(valkey.version.as_deref(), Some("9.1.2"));
    for (engine, repository) in [
        (redis, "docker.io/library/redis"),
        (valkey, "docker.io/valkey/valkey"),
    ] {
        assert_eq!(engine.state, "Succeeded", "{engine:#?}");
        assert_eq!(engine.repetitions.len(), 2, "{engine:#?}");
        assert!(engine.repetitions.iter().all(|r| r.items == 100_000));
        assert_eq!(
            engine.instance_type.as_deref(),
            Some(REAL_NODE_INSTANCE_TYPE)
        );
        // The runtime's imageID: the image's repository and digest, not the agent's local://.
        let image_id = engine.image_id.as_deref().unwrap_or_default();
        assert!(
            image_id.starts_with(&format!("{repository}@sha256:")),
            "{} ran as {image_id:?}, not a containerd image of {repository}",
            engine.name
        );
    }

    // The same builds run locally (membench run's own path) measure the same bytes per item:
    // the node adds nothing to what the engine itself accounts.
    let images = ["redis:8.2.3", "valkey/valkey:9.1.2"];
    assert_a_local_run_measures_the_same(&yaml, &images, &status.engines).await?;
    harness
        .pods_gone_within(Duration::from_secs(60))
        .await
        .context("after the benchmark finished")?;
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_over_its_cgroup_limit_is_oom_killed_by_the_kernel_keeping_earlier_repetitions()
-> anyhow::Result<()> {
    let (_, node) = ensure_real_node(&EnsureOptions::default()).await?;
    let harness = Harness::start("real-oom", real_node_settings()).await?;
    let body = "  instanceType: r7i.xlarge\n  engines:\n    - {engine: redis, version: \"8.2.3\", memory: 128Mi}\n  workload: {sortedSet: {members: 20000, sampleEvery: 0}}\n  repetitions: 10\n  settleSeconds: 3\n  cleanupPolicy: KeepFailed\n";
    harness
        .create(&spec("oom", &format!("{body}{TOLERATE_REAL_NODES}")))
        .await?;
    common::faults::wait_for_repetition(&harness, "oom", 0, 3).await?;
    // Something else fills the engine past its pod's memory limit (64 MiB at a time): the node's
    // memory cgroup stops it, there is no sampler on a real node.
    let engine_pod = harness.pods().get("oom-0-engine").await?;
    assert_eq!(
        engine_pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref()),
        Some(node.name_any().as_str())
    );
    let url = harness.engine_url("oom", "oom-0-engine").await?;
    common::faults::fill_with_ballast(url, Duration::from_secs(60)).await?;

    let done = harness.finished("oom", Duration::from_secs(120)).await?;
    let first = engine(&done, 0);
    assert_eq!(
        first.reason.as_ref().map(|r| r.as_str()),
        Some("EngineOOMKilled"),
        "{}",
        common::faults::status_of(&done)
    );
    assert!(
        first
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("128Mi"),
        "{:?}",
        first.message
    );
    assert!(
        (2..10).contains(&first.repetitions.len()),
        "the repetitions finished before the kill are kept: {first:#?}"
    );
    // The kubelet's record: the kernel's OOM kill (SIGKILL, 137).
    common::real_node::assert_oom_killed(&harness.pods(), "oom-0-engine").await?;
    harness.finish().await;
    Ok(())
}
