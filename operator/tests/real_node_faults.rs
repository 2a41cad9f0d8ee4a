//! Faults on a real node of the dev cluster (a kubelet with containerd and runc, see
//! real_node_e2e.rs), where what happens is the kubelet's and the kernel's: a client pod
//! deleted mid-run gets SIGTERM as PID 1 of its container's PID namespace, from the kubelet,
//! and its partial result travels in the termination message the kubelet reads; an engine
//! whose readiness probe the kubelet sees fail (new connections to it dropped inside its own
//! pod's network namespace) while its client's connection goes on.
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
    // The second client runs the spec's repetitions again, all of them, and its list replaces
    // the one kept from the first (the operator gives a retried client `--repetitions` as
    // written and `absorb` takes the longer list): what the first measured is kept while the
    // run goes on and for a run that ends there, not in the final list. Measuring only what
    // the first did not is still to do (issue 29): the client would need where to start, and
    // its result where it starts, for the operator to append it.
    assert_eq!(
        first.repetitions.len(),
        6,
        "the second client measures the spec's 6 repetitions: {first:#?}"
    );
    harness.finish().await;
    Ok(())
}

/// Runs `iptables ARGS` inside the network namespace of process `pid` (a pod's, which its
/// node's CNI plugin created for this test's cluster; never this machine's own).
fn iptables_in_pod(pid: u32, args: &[&str]) -> anyhow::Result<()> {
    let status = std::process::Command::new("nsenter")
        .arg(format!("--net=/proc/{pid}/ns/net"))
        .arg("iptables")
        .args(args)
        .status()?;
    anyhow::ensure!(
        status.success(),
        "iptables {args:?} in the pod's namespace: {status}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_failing_its_readiness_probe_mid_run_is_a_blip_its_running_client_outlasts()
-> anyhow::Result<()> {
    ensure_real_node(&EnsureOptions::default()).await?;
    let harness = Harness::start("real-unready", real_node_settings()).await?;
    let body = format!(
        "  instanceType: r7i.xlarge\n  engines:\n    - {{engine: redis, version: \"8.2.3\"}}\n  workload: {{sortedSet: {{members: 20000, sampleEvery: 0}}}}\n  repetitions: 6\n  settleSeconds: 3\n{TOLERATE_REAL_NODES}"
    );
    harness.create(&spec("unready", &body)).await?;
    wait_for_repetition(&harness, "unready", 0, 2).await?;
    let engine_pod = harness.pods().get("unready-0-engine").await?;
    let engines = common::real_node::host_processes(&engine_pod, "redis-server")?;
    anyhow::ensure!(
        engines.len() == 1,
        "one redis-server process, found {engines:?}"
    );
    let pid = engines[0].pid;
    // New connections to the engine are dropped: the kubelet's TCP probe times out, while the
    // client's established connection carries on.
    let rule = [
        "INPUT", "-p", "tcp", "--dport", "6379", "--syn", "-j", "DROP",
    ];
    iptables_in_pod(pid, &[&["-I"], &rule[..]].concat())?;
    let unready = harness
        .wait_for(
            "unready",
            Duration::from_secs(60),
            "reporting the engine's failing readiness probe",
            |b| {
                b.status.as_ref().is_some_and(|s| {
                    s.engines.first().is_some_and(|e| {
                        e.message.as_deref().is_some_and(|m| {
                            m.contains("fails its readiness probe")
                                && m.contains("its client carries on")
                        })
                    })
                })
            },
        )
        .await;
    iptables_in_pod(pid, &[&["-D"], &rule[..]].concat())?;
    let unready = unready?;
    let blip = engine(&unready, 0);
    assert_eq!(
        blip.state, "Running",
        "a blip does not fail the engine: {blip:#?}"
    );

    let done = harness
        .finished("unready", Duration::from_secs(180))
        .await?;
    let first = engine(&done, 0);
    assert_eq!(first.state, "Succeeded", "{}", status_of(&done));
    assert_eq!(first.repetitions.len(), 6, "{first:#?}");
    harness.finish().await;
    Ok(())
}
