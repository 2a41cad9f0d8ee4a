//! A benchmark's processes on a real node of the dev cluster (a kubelet with containerd and
//! runc, see real_node_e2e.rs), read from this machine's /proc, where a real node's containers
//! are processes: what their arguments show to anyone on the node, which users they run as,
//! and what becomes of an engine killed from outside (SIGKILL is not an OOM kill).
//!
//! These tests need the real node: when it cannot start they fail, naming what is missing.

mod common;

use std::time::Duration;

use anyhow::Context as _;
use common::faults::{status_of, wait_for_repetition};
use common::operator::*;
use common::real_node::host_processes;
use membench::crd::Phase;
use membench_devcluster::EnsureOptions;
use membench_devcluster::real_nodes::{TOLERATE_REAL_NODES, ensure_real_node};

/// One Redis, long enough (settleSeconds) that its processes can be read mid-run.
fn redis_for(repetitions: u32) -> String {
    format!(
        "  instanceType: r7i.xlarge\n  engines:\n    - {{engine: redis, version: \"8.2.3\"}}\n  workload: {{sortedSet: {{members: 20000, sampleEvery: 0}}}}\n  repetitions: {repetitions}\n  settleSeconds: 3\n{TOLERATE_REAL_NODES}"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_password_is_in_no_process_arguments_and_the_client_runs_as_65532_without_a_shell()
-> anyhow::Result<()> {
    ensure_real_node(&EnsureOptions::default()).await?;
    let harness = Harness::start("real-procs", real_node_settings()).await?;
    harness.create(&spec("procs", &redis_for(4))).await?;
    wait_for_repetition(&harness, "procs", 0, 2).await?;
    let password = harness.generated_engine_password("procs").await?;
    assert!(password.len() >= 16, "a generated password is long");

    let engine_pod = harness.pods().get("procs-0-engine").await?;
    let engines = host_processes(&engine_pod, "redis-server")?;
    anyhow::ensure!(
        engines.len() == 1,
        "one redis-server process in the engine pod's cgroup, found {engines:?}"
    );
    let engine = &engines[0];
    // The image's user, 999; the server's arguments show no password to `ps` on the node.
    assert_eq!(engine.uid, 999, "{engine:?}");
    assert!(
        !engine.cmdline.iter().any(|a| a.contains(&password)),
        "the engine's command line shows its password: {:?}",
        engine.cmdline
    );

    let client_pod = harness.pods().get("procs-0-client").await?;
    let clients = host_processes(&client_pod, "membench")?;
    anyhow::ensure!(
        clients.len() == 1,
        "one membench process in the client pod's cgroup, found {clients:?}"
    );
    let client = &clients[0];
    assert_eq!(client.uid, 65532, "{client:?}");
    assert!(
        !client.cmdline.iter().any(|a| a.contains(&password)),
        "the client's command line shows the password: {:?}",
        client.cmdline
    );
    // The membench image is the program and nothing else: no shell to exec into.
    for shell in ["bin/sh", "bin/bash", "usr/bin/sh", "bin/busybox"] {
        let path = client.root().join(shell);
        assert!(
            !path.exists(),
            "the client's image has {shell} ({})",
            path.display()
        );
    }
    let program = client.root().join("usr/local/bin/membench");
    assert!(
        program.exists(),
        "the client's root file system, read at {}, holds the image's membench",
        program.display()
    );

    let done = harness.finished("procs", Duration::from_secs(180)).await?;
    assert_eq!(
        done.status.as_ref().and_then(|s| s.phase.clone()),
        Some(Phase::Succeeded),
        "{}",
        status_of(&done)
    );
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_killed_on_the_real_node_fails_as_crashed_not_oom_killed_keeping_its_repetitions()
-> anyhow::Result<()> {
    ensure_real_node(&EnsureOptions::default()).await?;
    let harness = Harness::start("real-kill", real_node_settings()).await?;
    let body = redis_for(6).replace(
        "  settleSeconds: 3\n",
        "  settleSeconds: 3\n  cleanupPolicy: KeepFailed\n",
    );
    harness.create(&spec("kill", &body)).await?;
    wait_for_repetition(&harness, "kill", 0, 3).await?;
    let engine_pod = harness.pods().get("kill-0-engine").await?;
    let engines = host_processes(&engine_pod, "redis-server")?;
    anyhow::ensure!(
        engines.len() == 1,
        "one redis-server process, found {engines:?}"
    );
    // SIGKILL from outside: exit 137 as from the kernel's OOM killer, but no OOM event in the
    // container's memory cgroup, so the kubelet's reason is Error, not OOMKilled.
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &engines[0].pid.to_string()])
        .status()
        .context("kill")?;
    assert!(killed.success());

    let done = harness.finished("kill", Duration::from_secs(120)).await?;
    let first = engine(&done, 0);
    assert_eq!(
        first.reason.as_ref().map(|r| r.as_str()),
        Some("EngineCrashed"),
        "{}",
        status_of(&done)
    );
    let message = first.message.as_deref().unwrap_or_default();
    assert!(message.contains("exited with code 137"), "{message}");
    assert!(
        (2..6).contains(&first.repetitions.len()),
        "the repetitions finished before the kill are kept: {first:#?}"
    );
    let terminated = common::real_node::terminated_state(&harness.pods(), "kill-0-engine").await?;
    assert_eq!(terminated.exit_code, 137, "{terminated:#?}");
    assert_ne!(
        terminated.reason.as_deref(),
        Some("OOMKilled"),
        "{terminated:#?}"
    );
    harness.finish().await;
    Ok(())
}
