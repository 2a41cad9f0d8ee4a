//! A sharded cluster across nodes (`engines[].shards`), on the dev cluster with the node agent
//! and the operator in-process: a 3-shard Valkey 9.1 benchmark, each shard alone on its own
//! node of a pool of 3, stores a key in the same bytes as a one-node cluster-mode Valkey 9.1
//! (within 1%), with each shard's figures, the spread and the cluster's fixed cost (against a
//! standalone entry of the same build) in the status; and a shard killed mid-load fails the run naming the shard, keeping the
//! repetitions measured before, with no pod left behind. Each test adds the nodes it needs
//! for the time it runs (a pool of its own instance type, as the fault and parallelism tests
//! add theirs), and removes them however it ends.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::Context as _;
use common::faults::{
    AddedNodes, container_pid, signal, status_of, wait_for_ready_node, wait_for_repetition,
};
use common::operator::*;

/// Adds three nodes of `instance_type` named `<prefix>-<i>`, ready for the three shards.
async fn pool_of_three(
    harness: &Harness,
    instance_type: &str,
    prefix: &str,
) -> anyhow::Result<AddedNodes> {
    let names: Vec<String> = (0..3).map(|i| format!("{prefix}-{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let nodes = AddedNodes::add(instance_type, &names).await?;
    for name in &nodes.names {
        wait_for_ready_node(&harness.client, name).await?;
    }
    Ok(nodes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_valkey_shards_on_three_nodes_store_a_key_in_the_bytes_of_a_one_node_cluster()
-> anyhow::Result<()> {
    // amd64 nodes, whose engines run natively: 200,000 keys load in seconds.
    const TYPE: &str = "r7i.2xlarge";
    let harness = Harness::start("shards", settings()).await?;
    let _nodes = pool_of_three(&harness, TYPE, "shards-e2e").await?;
    let (recorder, history) = record_pods(harness.pods());
    let body = format!(
        "  instanceType: {TYPE}\n  engines:\n    - {{engine: valkey, version: \"9.1.2\", name: valkey-3-shards, shards: 3}}\n    - {{engine: valkey, version: \"9.1.2\", name: valkey-one-node, clusterMode: true}}\n    - {{engine: valkey, version: \"9.1.2\", name: valkey-standalone}}\n  workload: {{strings: {{keys: 200000, valueSize: 32}}}}\n  repetitions: 1\n"
    );
    harness.create(&spec("shards", &body)).await?;
    let done = harness.finished("shards", Duration::from_secs(600)).await?;
    recorder.abort();
    let sharded = engine(&done, 0);
    let one_node = engine(&done, 1);
    let standalone = engine(&done, 2);
    for run in [&sharded, &one_node, &standalone] {
        assert_eq!(run.state, "Succeeded", "{}", status_of(&done));
        assert_eq!(run.repetitions[0].items, 200_000, "{run:#?}");
    }
    let per_key = |run: &membench::crd::EngineStatus| run.repetitions[0].bytes_per_item;
    let (across, alone) = (per_key(&sharded), per_key(&one_node));
    eprintln!("bytes per key: 3 shards {across:.2}, one cluster-mode node {alone:.2}");
    assert!(
        (across - alone).abs() <= alone * 0.01,
        "3 shards store a key in {across:.2} bytes, one cluster-mode node in {alone:.2}: more than 1% apart"
    );

    // Every shard on a node of its own, of the pool's type; the client beside shard 0.
    let nodes = history.lock().unwrap().nodes.clone();
    let shard_pods = ["shards-0-engine", "shards-0-engine-1", "shards-0-engine-2"];
    let shard_nodes: Vec<String> = shard_pods
        .iter()
        .map(|p| {
            nodes
                .get(*p)
                .cloned()
                .with_context(|| format!("{p} never ran"))
        })
        .collect::<anyhow::Result<_>>()?;
    let distinct: BTreeSet<&String> = shard_nodes.iter().collect();
    assert_eq!(
        distinct.len(),
        3,
        "the shards shared nodes: {shard_nodes:?}"
    );
    for node in &shard_nodes {
        assert_eq!(instance_type_of(&harness.client, node).await?, TYPE);
    }
    assert_eq!(
        nodes.get("shards-0-client"),
        Some(&shard_nodes[0]),
        "the client runs on shard 0's node"
    );
    let recorded: Vec<(u32, String, Option<String>)> = sharded
        .shards
        .iter()
        .map(|s| (s.shard, s.pod.clone(), s.node_name.clone()))
        .collect();
    let expected: Vec<(u32, String, Option<String>)> = (0..3)
        .map(|s: usize| {
            (
                s as u32,
                shard_pods[s].to_string(),
                Some(shard_nodes[s].clone()),
            )
        })
        .collect();
    assert_eq!(recorded, expected, "the status says where each shard ran");

    // Each shard's used_memory, and how even the spread was: the slots split evenly, so the
    // keys do too (within a few percent).
    let keys: u64 = sharded.shards.iter().filter_map(|s| s.keys).sum();
    assert_eq!(keys, 200_000, "{:#?}", sharded.shards);
    for shard in &sharded.shards {
        let (Some(baseline), Some(used)) = (shard.baseline_used_memory, shard.used_memory) else {
            panic!(
                "shard {} has no figures: {:#?}",
                shard.shard, sharded.shards
            );
        };
        assert!(used > baseline, "{shard:?}");
    }
    let spread = sharded.shard_spread.clone().context("the shards' spread")?;
    eprintln!("spread over the shards: {spread:?}");
    assert!(
        spread
            .keys_max_over_min
            .is_some_and(|r| (1.0..1.05).contains(&r)),
        "{spread:?}"
    );

    // The cluster's fixed cost, against the standalone entry of the same build: per shard for
    // the sharded run.
    for (run, shards) in [(&sharded, Some(3)), (&one_node, None)] {
        let cost = run
            .cluster_fixed_cost
            .clone()
            .with_context(|| format!("{}: no cluster fixed cost", run.name))?;
        eprintln!("{}: cluster fixed cost {cost:?}", run.name);
        assert_eq!(cost.standalone_entry, "valkey-standalone");
        assert_eq!(cost.shards, shards);
        assert_eq!(
            cost.standalone_used_memory,
            standalone.repetitions[0].baseline_used_memory
        );
        assert!(cost.fixed_cost_bytes > 0, "{cost:?}");
    }
    assert!(standalone.cluster_fixed_cost.is_none());

    harness
        .pods_gone_within(Duration::from_secs(60))
        .await
        .context("the pods are gone once done")?;
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_killed_mid_load_fails_the_run_naming_it_and_keeps_the_repetitions_before()
-> anyhow::Result<()> {
    // Another pool than the test above's, so the two run side by side (amd64: the client
    // image the node agent runs there is this build's).
    const TYPE: &str = "r7i.8xlarge";
    let harness = Harness::start("shards-kill", settings()).await?;
    let _nodes = pool_of_three(&harness, TYPE, "shards-kill").await?;
    // settleSeconds stretches each repetition, so the kill lands after some have finished.
    let body = format!(
        "  instanceType: {TYPE}\n  engines:\n    - {{engine: valkey, version: \"9.1.2\", shards: 3}}\n  workload: {{strings: {{keys: 20000, valueSize: 32}}}}\n  repetitions: 6\n  settleSeconds: 3\n"
    );
    harness.create(&spec("kill", &body)).await?;
    let at_3 = wait_for_repetition(&harness, "kill", 0, 3).await?;
    let shard_1 = harness
        .pods()
        .get_opt("kill-0-engine-1")
        .await?
        .with_context(|| {
            format!(
                "shard 1's pod is gone at repetition 3: {}",
                status_of(&at_3)
            )
        })?;
    let pid = container_pid(&shard_1).context("shard 1's engine process")?;
    signal(pid, libc::SIGKILL)?;

    let done = harness.finished("kill", Duration::from_secs(180)).await?;
    let run = engine(&done, 0);
    assert_eq!(run.state, "Failed", "{}", status_of(&done));
    assert_eq!(
        run.reason.as_ref().map(|r| r.as_str()),
        Some("EngineCrashed"),
        "{}",
        status_of(&done)
    );
    let message = run.message.clone().unwrap_or_default();
    eprintln!("the run's message: {message}");
    assert!(
        message.starts_with("shard 1 (pod kill-0-engine-1): the engine exited"),
        "{message}"
    );
    assert!(
        (2..6).contains(&run.repetitions.len()),
        "the repetitions finished before the kill are kept: {run:#?}"
    );
    harness
        .pods_gone_within(Duration::from_secs(60))
        .await
        .context("no pod is left behind")?;
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_of_two_nodes_keeps_a_three_shard_run_waiting_saying_it_needs_three()
-> anyhow::Result<()> {
    // The dev cluster's r7i.4xlarge pool has 2 nodes.
    let harness = Harness::start("shards-few", settings()).await?;
    let body = "  instanceType: r7i.4xlarge\n  engines:\n    - {engine: valkey, version: \"9.1.2\", shards: 3}\n  workload: {strings: {keys: 1000}}\n  repetitions: 1\n";
    harness.create(&spec("few", body)).await?;
    let waiting = harness
        .wait_for(
            "few",
            Duration::from_secs(90),
            "waiting for a third node",
            |b| {
                b.status.as_ref().is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|c| c.type_ == "Progressing" && c.reason == "ShardsAboveNodes")
                })
            },
        )
        .await?;
    let progressing = condition(&waiting, "Progressing").context("no Progressing condition")?;
    eprintln!("Progressing: {}", progressing.message);
    assert!(
        progressing
            .message
            .contains("the run needs 3 nodes of instance type r7i.4xlarge at once")
            && progressing.message.contains("the pool has 2 nodes"),
        "{progressing:?}"
    );
    let run = engine(&waiting, 0);
    assert_eq!(run.state, "Pending", "{run:#?}");
    assert_eq!(run.client_attempts, 0, "no client before every shard runs");
    harness
        .benchmarks()
        .delete("few", &Default::default())
        .await?;
    harness
        .pods_gone_within(Duration::from_secs(60))
        .await
        .context("the shards go with the benchmark")?;
    harness.finish().await;
    Ok(())
}
