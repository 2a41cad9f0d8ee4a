//! The operator on the dev cluster where a real cluster is less forgiving than a quiet one:
//! an engine that turns unready for a while, a container that cannot start, an image the node
//! keeps failing to pull, a node pool that other benchmarks occupy, and engines of one
//! benchmark that should share a node. The operator runs in-process, one per test, each
//! watching its own namespace; the engines are real Redis and Valkey servers.

mod common;

use std::time::Duration;

use common::operator::*;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, ListParams, PostParams};
use membench::crd::{MemoryBenchmark, Phase};

fn reason_is(benchmark: &MemoryBenchmark, index: usize, reason: &str) -> bool {
    engine(benchmark, index).reason.as_ref().map(|r| r.as_str()) == Some(reason)
}

/// A pod bound straight to `node` (no scheduler) that never runs: its image cannot be pulled.
/// It holds what it requests on the node, and with `labels` it looks like whatever they say.
fn placeholder_pod(
    name: &str,
    node: &str,
    labels: serde_json::Value,
    cpu: &str,
    memory: &str,
) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "nodeName": node,
            "securityContext": {"runAsNonRoot": true, "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": "placeholder",
                "image": "registry.invalid/membench-tests/placeholder:1",
                "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}},
                "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}
            }]
        }
    }))
    .expect("a pod")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_readiness_blip_after_the_engine_ran_for_a_while_is_not_a_startup_timeout()
-> anyhow::Result<()> {
    // A short startup timeout: counted from the container's start, any blip after 8 s of
    // running would fail the engine.
    let mut settings = settings();
    settings.startup_timeout = Duration::from_secs(8);
    let harness = Harness::start("ns-blip", settings).await?;
    // One long repetition (a new repetition would open a new connection, which the blip would
    // refuse): one command per round trip keeps the load going for tens of seconds.
    // (On r8g-4xlarge-1: the queue test below holds r8g-4xlarge-0.)
    let body = "  instanceType: r8g.4xlarge\n  engines:\n    - {engine: redis, version: \"7.0.15\"}\n  workload: {sortedSet: {members: 1000000, sampleEvery: 0}}\n  repetitions: 1\n  pipeline: 1\n  placement:\n    nodeSelector: {kubernetes.io/hostname: r8g-4xlarge-1}\n";
    harness.create(&spec("blip", body)).await?;
    let measuring = harness
        .wait_for("blip", Duration::from_secs(120), "measuring", |b| {
            reason_is(b, 0, "Measuring")
        })
        .await?;
    anyhow::ensure!(measuring.status.unwrap().phase == Some(Phase::Running));
    // The engine has run for longer than the startup timeout.
    let pod = harness.pods().get("blip-0-engine").await?;
    let started = pod
        .status
        .as_ref()
        .and_then(|s| s.start_time.clone())
        .expect("started")
        .0;
    let age = k8s_openapi::jiff::Timestamp::now().duration_since(started);
    let wait = k8s_openapi::jiff::SignedDuration::from_secs(10) - age;
    if wait.is_positive() {
        tokio::time::sleep(wait.unsigned_abs()).await;
    }
    // The engine stops listening on 6379 (its readiness probe's port) and listens on another;
    // the client's connection stays open.
    let url = harness.engine_url("blip", "blip-0-engine").await?;
    let mut control = redis::Client::open(url)?.get_connection()?;
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("port")
        .arg(6390)
        .query::<()>(&mut control)?;
    let noticed = harness
        .wait_for("blip", Duration::from_secs(40), "noticing the blip", |b| {
            engine(b, 0)
                .message
                .is_some_and(|m| m.contains("fails its readiness probe"))
                || b.status
                    .as_ref()
                    .and_then(|s| s.phase.clone())
                    .is_some_and(|p| p != Phase::Running)
        })
        .await;
    let restored = redis::cmd("CONFIG")
        .arg("SET")
        .arg("port")
        .arg(6379)
        .query::<()>(&mut control);
    drop(control);
    let noticed = noticed?;
    restored.map_err(|e| {
        anyhow::anyhow!(
            "the engine went away during the blip ({e}); status: {:#?}",
            engine(&noticed, 0)
        )
    })?;
    assert_eq!(
        engine(&noticed, 0).state,
        "Running",
        "{:#?}",
        engine(&noticed, 0)
    );
    let done = harness.finished("blip", Duration::from_secs(240)).await?;
    let measured = engine(&done, 0);
    assert_eq!(measured.state, "Succeeded", "{measured:#?}");
    assert_eq!(measured.repetitions.len(), 1);
    assert_eq!(measured.client_attempts, 1);
    assert_eq!(measured.repetitions[0].items, 1_000_000);
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_whose_program_cannot_start_fails_as_run_container_error_without_retries()
-> anyhow::Result<()> {
    // The Redis image as the client image: its entrypoint takes `load` for a program to run,
    // and there is none (the runtime's StartError).
    let mut settings = settings();
    settings.pods.client_image = "redis:7.0.15".into();
    let harness = Harness::start("ns-start", settings).await?;
    let body = "  instanceType: r7i.4xlarge\n  engines:\n    - {engine: redis, version: \"7.0.15\"}\n    - {engine: valkey, version: \"9.1.2\"}\n  workload: {sortedSet: {members: 1000, sampleEvery: 0}}\n  repetitions: 1\n";
    harness.create(&spec("start", body)).await?;
    let done = harness.finished("start", Duration::from_secs(120)).await?;
    let first = engine(&done, 0);
    assert_eq!(
        first.reason.as_ref().map(|r| r.as_str()),
        Some("RunContainerError"),
        "{first:#?}"
    );
    assert_eq!(
        first.client_attempts, 1,
        "a program that is not there is not retried"
    );
    assert!(
        first
            .message
            .as_deref()
            .is_some_and(|m| m.contains("\"load\"") && m.contains("not found")),
        "{:?}",
        first.message
    );
    assert_eq!(
        engine(&done, 1).reason.as_ref().map(|r| r.as_str()),
        Some("NotRun")
    );
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_pull_error_is_retried_with_back_off_for_a_bounded_time_before_the_engine_fails()
-> anyhow::Result<()> {
    let harness = Harness::start("ns-pull", settings()).await?;
    let timeout = settings().image_pull_timeout;
    let body = "  instanceType: r7i.4xlarge\n  engines:\n    - {engine: redis, version: \"6.2.99\"}\n  workload: {sortedSet: {members: 1000, sampleEvery: 0}}\n";
    harness.create(&spec("pull", body)).await?;
    let waiting = harness
        .wait_for(
            "pull",
            Duration::from_secs(60),
            "waiting for the image",
            |b| reason_is(b, 0, "WaitingForImage") || reason_is(b, 0, "ImagePullFailed"),
        )
        .await?;
    let note = engine(&waiting, 0);
    assert_eq!(
        note.reason.as_ref().map(|r| r.as_str()),
        Some("WaitingForImage"),
        "{note:#?}"
    );
    assert!(note.message.unwrap_or_default().contains("redis:6.2.99"));
    let pod = harness.pods().get("pull-0-engine").await?;
    let scheduled = membench::controller::decide::pod_state::scheduled_at(&pod).expect("scheduled");
    let done = harness.finished("pull", Duration::from_secs(120)).await?;
    let failed = engine(&done, 0);
    assert_eq!(
        failed.reason.as_ref().map(|r| r.as_str()),
        Some("ImagePullFailed"),
        "{failed:#?}"
    );
    assert!(
        failed
            .message
            .as_deref()
            .is_some_and(|m| m.contains("the node retried for")),
        "{:?}",
        failed.message
    );
    let finished = failed.finished_at.expect("finishedAt").0;
    assert!(
        finished.duration_since(scheduled).as_secs() >= timeout.as_secs() as i64,
        "failed {finished} before {timeout:?} after {scheduled}"
    );
    // The node really retried: more than one failed pull (events of a series count repeats).
    let events: Vec<Event> = harness
        .namespace
        .api::<Event>()
        .list(&ListParams::default())
        .await?
        .items;
    let pulls_failed: i32 = events
        .iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("pull-0-engine"))
        .filter(|e| {
            e.note
                .as_deref()
                .is_some_and(|n| n.contains("Failed to pull image"))
        })
        .map(|e| e.series.as_ref().map_or(1, |s| s.count))
        .sum();
    assert!(pulls_failed >= 2, "pull attempts: {pulls_failed}");
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn benchmarks_wanting_a_busy_node_queue_first_come_first_served_past_the_scheduling_deadline()
-> anyhow::Result<()> {
    let mut settings = settings();
    settings.scheduling_timeout = Duration::from_secs(5);
    let harness = Harness::start("ns-queue", settings).await?;
    // Another benchmark's engine holds the one node both benchmarks may use.
    let node = "r8g-4xlarge-0";
    let occupier = placeholder_pod(
        "occupier",
        node,
        serde_json::json!({"app.kubernetes.io/name": "membench", "app.kubernetes.io/component": "engine"}),
        "100m",
        "64Mi",
    );
    harness
        .pods()
        .create(&PostParams::default(), &occupier)
        .await?;
    let (recorder, history) = record_pods(harness.pods());
    let body = format!(
        "  instanceType: r8g.4xlarge\n  engines:\n    - {{engine: redis, version: \"7.0.15\"}}\n  workload: {{sortedSet: {{members: 20000, sampleEvery: 0}}}}\n  repetitions: 1\n  placement:\n    nodeSelector: {{kubernetes.io/hostname: {node}}}\n"
    );
    harness.create(&spec("first", &body)).await?;
    let first_waits = "waiting for a free r8g.4xlarge node, 0 benchmarks ahead";
    harness
        .wait_for("first", Duration::from_secs(60), "queued", |b| {
            engine(b, 0).message.as_deref() == Some(first_waits)
                || b.status.as_ref().and_then(|s| s.phase.clone()) == Some(Phase::Failed)
        })
        .await?;
    harness.create(&spec("second", &body)).await?;
    let second_waits = "waiting for a free r8g.4xlarge node, 1 benchmark ahead";
    harness
        .wait_for(
            "second",
            Duration::from_secs(60),
            "queued behind first",
            |b| engine(b, 0).message.as_deref() == Some(second_waits),
        )
        .await?;
    // Well past the 5 s scheduling deadline: both still wait, and only the first has a pod.
    tokio::time::sleep(Duration::from_secs(10)).await;
    for (name, waits) in [("first", first_waits), ("second", second_waits)] {
        let b = harness.benchmarks().get(name).await?;
        assert_eq!(
            b.status.as_ref().unwrap().phase,
            Some(Phase::Pending),
            "{name}"
        );
        assert!(
            reason_is(&b, 0, "WaitingForFreeNode"),
            "{name}: {:#?}",
            engine(&b, 0)
        );
        let progressing = condition(&b, "Progressing").unwrap();
        assert_eq!(progressing.reason, "WaitingForFreeNode");
        assert!(
            progressing.message.contains(waits),
            "{}",
            progressing.message
        );
        let progress = b.status.as_ref().unwrap().progress.clone().unwrap();
        assert!(progress.summary.ends_with(waits), "{}", progress.summary);
    }
    assert!(harness.pods().get_opt("first-0-engine").await?.is_some());
    assert!(harness.pods().get_opt("second-0-engine").await?.is_none());

    // The node frees up: first runs, then second.
    harness
        .pods()
        .delete("occupier", &DeleteParams::default().grace_period(0))
        .await?;
    let first = harness.finished("first", Duration::from_secs(120)).await?;
    let second = harness.finished("second", Duration::from_secs(120)).await?;
    let (a, b) = (engine(&first, 0), engine(&second, 0));
    assert_eq!(
        (a.state.as_str(), b.state.as_str()),
        ("Succeeded", "Succeeded"),
        "{a:#?}\n{b:#?}"
    );
    assert_eq!(a.node_name.as_deref(), Some(node));
    assert_eq!(b.node_name.as_deref(), Some(node));
    // First come, first served: the second benchmark's pod was created only once the first
    // one's engine had its node, and got the node only once the first had finished.
    recorder.abort();
    let history = std::mem::take(&mut *history.lock().unwrap());
    let first_scheduled = history.scheduled["first-0-engine"];
    let second_scheduled = history.scheduled["second-0-engine"];
    let second_created = b.started_at.unwrap().0;
    assert!(
        second_created >= first_scheduled,
        "second's pod was created at {second_created}, before first had its node at {first_scheduled}"
    );
    let first_done = a.finished_at.unwrap().0;
    assert!(
        second_scheduled >= first_done,
        "second got the node at {second_scheduled}, before first finished at {first_done}"
    );
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engines_of_a_benchmark_prefer_the_node_its_first_engine_ran_on() -> anyhow::Result<()>
{
    let harness = Harness::start("ns-node", settings()).await?;
    let body = "  instanceType: r7i.4xlarge\n  engines:\n    - {engine: redis, version: \"7.0.15\"}\n    - {engine: valkey, version: \"9.1.2\"}\n  workload: {sortedSet: {members: 300000, sampleEvery: 0}}\n  repetitions: 2\n";
    harness.create(&spec("same", body)).await?;
    let placed = harness
        .wait_for("same", Duration::from_secs(120), "placing engine 1", |b| {
            engine(b, 0).node_name.is_some()
        })
        .await?;
    let first_node = engine(&placed, 0).node_name.unwrap();
    // Most of that node's CPU and memory taken: without a preference, the scheduler would put
    // the next engine on the emptier node of the pool.
    let filler = placeholder_pod("filler", &first_node, serde_json::json!({}), "12", "100Gi");
    harness
        .pods()
        .create(&PostParams::default(), &filler)
        .await?;
    let done = harness.finished("same", Duration::from_secs(240)).await?;
    assert_eq!(done.status.as_ref().unwrap().phase, Some(Phase::Succeeded));
    let (a, b) = (engine(&done, 0), engine(&done, 1));
    assert_eq!(a.node_name.as_deref(), Some(first_node.as_str()));
    assert_eq!(
        b.node_name.as_deref(),
        Some(first_node.as_str()),
        "engine 1 left the first engine's node"
    );
    harness.finish().await;
    Ok(())
}
