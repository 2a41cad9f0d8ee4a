//! The fault suite on the dev cluster: each test breaks one thing while a benchmark runs and
//! checks that afterwards the status is right and nothing measured before the fault is lost.
//! The operator runs in-process (one per test, watching its own namespace), except for the
//! leader-election test, which runs two `membench operator` processes. Engines are real Redis
//! and Valkey servers; `settleSeconds` stretches each repetition without load on the machine's
//! two cores, so that a fault lands after some repetitions have finished. The API server
//! restart is in `fault_apiserver_e2e.rs`, its own test binary, since it disturbs every test
//! running at the time.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use common::faults::*;
use common::operator::*;
use common::operator_process::{OperatorArgs, OperatorProcess};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use membench::controller::build::pods::RESULT_FINALIZER;
use membench::crd::{MemoryBenchmark, Phase};
use membench_devcluster::DevCluster;
use membench_devcluster::faults::Faults;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_killed_mid_run_again_and_again_measures_every_engine_exactly_once()
-> anyhow::Result<()> {
    let mut harness = Harness::start("fault-restarts", settings()).await?;
    let (recorder, history) = record_pods(harness.pods());
    harness
        .create(&spec("restarts", &two_engines("r8g.4xlarge", 3, 2)))
        .await?;
    // Kill the operator every few seconds, at whatever point it is: creating pods, writing
    // the status, reading a result. Each new one starts with an empty cache.
    let mut kills = 0;
    let finished = loop {
        tokio::time::sleep(Duration::from_millis(2500 + 700 * (kills % 3))).await;
        let benchmark = harness.benchmarks().get("restarts").await?;
        if matches!(
            benchmark.status.as_ref().and_then(|s| s.phase.clone()),
            Some(Phase::Succeeded | Phase::Failed)
        ) {
            break benchmark;
        }
        anyhow::ensure!(
            kills < 40,
            "not finished after 40 restarts: {}",
            status_of(&benchmark)
        );
        harness.operator.abort();
        kills += 1;
        harness.operator = spawn_operator(
            &harness.client,
            harness.namespace.name(),
            settings(),
            &harness.metrics,
        );
    };
    recorder.abort();
    eprintln!("the operator was killed {kills} times");
    assert!(
        kills >= 4,
        "the run ended before the operator was killed often"
    );
    let status = finished.status.clone().unwrap();
    assert_eq!(
        status.phase,
        Some(Phase::Succeeded),
        "{}",
        status_of(&finished)
    );
    for engine in &status.engines {
        measured_exactly_once(engine, 3);
    }
    assert_each_pod_created_once(&history.lock().unwrap());
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_decided_from_an_older_version_is_refused_and_never_replaces_a_result()
-> anyhow::Result<()> {
    let harness = Harness::start("fault-stale", settings()).await?;
    harness
        .create(&spec("stale", &one_engine("r7i.4xlarge", 2, 2)))
        .await?;
    let running = harness
        .wait_for("stale", Duration::from_secs(120), "measuring", |b| {
            engine(b, 0).reason.as_ref().map(|r| r.as_str()) == Some("Measuring")
        })
        .await?;
    let done = harness.finished("stale", Duration::from_secs(180)).await?;
    assert_eq!(done.status.as_ref().unwrap().phase, Some(Phase::Succeeded));

    // The view of a lagging cache: the benchmark as it was while it ran, written back.
    let api = harness.benchmarks();
    let refused = membench::controller::write_status(
        &api,
        "stale",
        running.metadata.resource_version.as_deref(),
        running.status.as_ref().unwrap(),
    )
    .await;
    match refused {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 409, "{status:?}"),
        other => panic!("a write from an older version must be refused: {other:?}"),
    }
    // A reconciliation handed that same old object decides from what the API server holds.
    let (store, _writer) = kube::runtime::reflector::store::<MemoryBenchmark>();
    let ctx = Arc::new(membench::controller::Context::new(
        harness.client.clone(),
        settings(),
        membench::metrics::Metrics::new(),
        vec![store],
    ));
    membench::controller::reconcile(Arc::new(running), ctx).await?;
    let after = api.get("stale").await?;
    assert_eq!(after.status, done.status, "the result changed");
    measured_exactly_once(&engine(&after, 0), 2);
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_process_killed_mid_load_fails_as_crashed_keeping_its_finished_repetitions()
-> anyhow::Result<()> {
    let harness = Harness::start("fault-engine-kill", settings()).await?;
    harness
        .create(&spec("crash", &two_engines("r8g.4xlarge", 6, 3)))
        .await?;
    wait_for_repetition(&harness, "crash", 0, 3).await?;
    let engine_pod = harness.pods().get("crash-0-engine").await?;
    let pid = container_pid(&engine_pod).expect("the engine's process");
    signal(pid, libc::SIGKILL)?;

    let done = harness.finished("crash", Duration::from_secs(180)).await?;
    let first = engine(&done, 0);
    assert_eq!(first.state, "Failed", "{}", status_of(&done));
    assert_eq!(
        first.reason.as_ref().map(|r| r.as_str()),
        Some("EngineCrashed")
    );
    assert!(
        (2..6).contains(&first.repetitions.len()),
        "the repetitions finished before the kill are kept: {first:#?}"
    );
    assert_eq!(first.client_attempts, 1, "no client against a dead engine");
    assert!(first.summary.is_some());
    measured_exactly_once(&engine(&done, 1), 6);
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_pod_deleted_mid_run_keeps_what_its_client_measured() -> anyhow::Result<()> {
    let harness = Harness::start("fault-engine-pod", settings()).await?;
    harness
        .create(&spec("podgone", &two_engines("r8g.4xlarge", 6, 3)))
        .await?;
    wait_for_repetition(&harness, "podgone", 0, 3).await?;
    harness
        .pods()
        .delete("podgone-0-engine", &DeleteParams::default())
        .await?;

    let done = harness
        .finished("podgone", Duration::from_secs(180))
        .await?;
    let first = engine(&done, 0);
    assert_eq!(
        first.reason.as_ref().map(|r| r.as_str()),
        Some("EnginePodLost"),
        "{}",
        status_of(&done)
    );
    assert!(
        (2..6).contains(&first.repetitions.len()),
        "the repetitions finished before the deletion are kept: {first:#?}"
    );
    assert_eq!(first.client_attempts, 1);
    measured_exactly_once(&engine(&done, 1), 6);
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_oom_killed_mid_run_keeps_the_repetitions_measured_before() -> anyhow::Result<()>
{
    let harness = Harness::start("fault-oom", settings()).await?;
    let body = "  instanceType: r7i.4xlarge\n  engines:\n    - {engine: redis, version: \"7.0.15\", memory: 128Mi}\n  workload: {sortedSet: {members: 20000, sampleEvery: 0}}\n  repetitions: 10\n  settleSeconds: 3\n";
    harness.create(&spec("oom", body)).await?;
    wait_for_repetition(&harness, "oom", 0, 3).await?;
    // Something else fills the engine past its pod's memory limit (64 MiB at a time) until it
    // is killed, well before its 10th repetition.
    let url = harness.engine_url("oom", "oom-0-engine").await?;
    fill_with_ballast(url, Duration::from_secs(60)).await?;

    let done = harness.finished("oom", Duration::from_secs(120)).await?;
    let first = engine(&done, 0);
    assert_eq!(
        first.reason.as_ref().map(|r| r.as_str()),
        Some("EngineOOMKilled"),
        "{}",
        status_of(&done)
    );
    assert!(
        first
            .message
            .as_deref()
            .unwrap()
            .contains("memory limit 128Mi")
    );
    assert!(
        (2..10).contains(&first.repetitions.len()),
        "the repetitions finished before the kill are kept: {first:#?}"
    );
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_failing_three_times_fails_its_engine_keeping_what_the_attempts_measured()
-> anyhow::Result<()> {
    let harness = Harness::start("fault-client", settings()).await?;
    // Each attempt's own result, as its pod's termination message held it: a watch sees every
    // update of the pods, so none is missed when the operator deletes a pod it has read.
    let record = common::pod_record::PodRecord::start(harness.pods()).await?;
    harness
        .create(&spec("flaky", &one_engine("r7i.4xlarge", 5, 2)))
        .await?;
    for attempt in 1..=3u32 {
        let name = if attempt == 1 {
            "flaky-0-client".to_string()
        } else {
            format!("flaky-0-client-{attempt}")
        };
        // The first attempt is stopped once it has begun three more repetitions than when it
        // was first seen running (so it finished at least two), the others after one more (at
        // most the one they were in when first seen, each repetition lasting its 2 s settle
        // against this loop's 300 ms): the fullest attempt is the first, not the last. Read
        // from the engine itself: the operator's progress reading counts every attempt's.
        let begun = if attempt == 1 { 3 } else { 1 };
        let started = Instant::now();
        let mut first_seen: Option<u64> = None;
        let pid = loop {
            anyhow::ensure!(
                started.elapsed() < Duration::from_secs(120),
                "{name} did not get to its repetition {begun} after it was first seen"
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
            let Some(pid) = harness
                .pods()
                .get_opt(&name)
                .await?
                .as_ref()
                .and_then(container_pid)
            else {
                continue;
            };
            // The engine requires the benchmark's generated password.
            let url = harness.engine_url("flaky", "flaky-0-engine").await?;
            let calls = tokio::task::spawn_blocking(move || flushall_calls(&url)).await?;
            let base = *first_seen.get_or_insert(calls);
            if calls >= base + begun {
                break pid;
            }
        };
        signal(pid, libc::SIGTERM)?;
    }
    let done = harness.finished("flaky", Duration::from_secs(120)).await?;
    let first = engine(&done, 0);
    assert_eq!(
        first.reason.as_ref().map(|r| r.as_str()),
        Some("ClientFailed"),
        "{}",
        status_of(&done)
    );
    assert_eq!(first.client_attempts, 3);
    assert!(
        first
            .message
            .as_deref()
            .unwrap()
            .contains("stopped by SIGTERM"),
        "{first:#?}"
    );
    // What each attempt measured, by its own result; the status keeps the fullest.
    let counts: Vec<usize> = ["flaky-0-client", "flaky-0-client-2", "flaky-0-client-3"]
        .iter()
        .map(|pod| {
            let message = record
                .termination_message(pod)
                .with_context(|| format!("{pod}'s termination message"))?;
            let result = membench::client::pod_io::result::ClientResult::read(&message, 5)
                .map_err(|e| anyhow::anyhow!("{pod}'s result: {e:?}"))?;
            Ok(result.decoded_repetitions().len())
        })
        .collect::<anyhow::Result<_>>()?;
    eprintln!("repetitions finished by each attempt: {counts:?}");
    let fullest = *counts.iter().max().unwrap_or(&0);
    assert!(
        fullest >= 2 && counts[2] < fullest,
        "the test's premise: an attempt before the last finished more repetitions than it ({counts:?})"
    );
    assert_eq!(
        first.repetitions.len(),
        fullest,
        "the status keeps the fullest attempt's repetitions ({counts:?}): {first:#?}"
    );
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_node_of_the_type_the_benchmark_waits_and_runs_once_one_appears()
-> anyhow::Result<()> {
    let harness = Harness::start("fault-late-node", settings()).await?;
    // A run that was killed half-way may have left its node behind.
    Faults::of_dev_cluster()
        .await?
        .remove_node("fault-late-0")?;
    let nodes_api: Api<k8s_openapi::api::core::v1::Node> = Api::all(harness.client.clone());
    let deadline = Instant::now() + Duration::from_secs(30);
    while !nodes_api
        .list(&ListParams::default().labels("node.kubernetes.io/instance-type=r7i.2xlarge"))
        .await?
        .items
        .is_empty()
    {
        anyhow::ensure!(
            Instant::now() < deadline,
            "an r7i.2xlarge node is left over"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    harness
        .create(&spec("late", &one_engine("r7i.2xlarge", 2, 0)))
        .await?;
    let waiting = harness
        .wait_for("late", Duration::from_secs(60), "waiting for a node", |b| {
            engine(b, 0).reason.as_ref().map(|r| r.as_str()) == Some("WaitingForNode")
                && engine(b, 0)
                    .message
                    .as_deref()
                    .is_some_and(|m| m.contains("node affinity/selector"))
        })
        .await?;
    assert_eq!(
        condition(&waiting, "Progressing").map(|c| c.reason),
        Some("WaitingForNode".into())
    );
    let nodes = AddedNodes::add("r7i.2xlarge", &["fault-late-0"]).await?;
    let done = harness.finished("late", Duration::from_secs(120)).await?;
    let first = engine(&done, 0);
    assert_eq!(first.node_name.as_deref(), Some("fault-late-0"));
    measured_exactly_once(&first, 2);
    harness.finish().await;
    drop(nodes);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_benchmark_deleted_mid_run_leaves_nothing_behind_within_seconds() -> anyhow::Result<()> {
    let harness = Harness::start("fault-delete", settings()).await?;
    // Far more repetitions than it gets to: on a freshly started dev cluster, with another test
    // beside it, a 5-repetition client once finished all of them (exit 0 in the node agent's
    // log) before the delete came, and the test failed.
    harness
        .create(&spec("gone", &one_engine("r7i.4xlarge", 20, 3)))
        .await?;
    wait_for_repetition(&harness, "gone", 0, 2).await?;
    let client = harness.pods().get("gone-0-client").await?;
    assert!(client.finalizers().iter().any(|f| f == RESULT_FINALIZER));
    harness
        .benchmarks()
        .delete("gone", &DeleteParams::default())
        .await?;
    let gone = harness
        .pods_gone_within(Duration::from_secs(20))
        .await
        .context("after the benchmark was deleted")?;
    eprintln!(
        "every pod was gone {} ms after the benchmark was deleted",
        gone.as_millis()
    );
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_stops_reporting_loses_its_pods_the_benchmark_says_so_and_goes_on()
-> anyhow::Result<()> {
    // A kubelet that is there stops a pod within its grace period; 5 s past it (15 s by
    // default) the operator gives the pod up.
    let mut settings = settings();
    settings.lost_pod_margin = Duration::from_secs(5);
    let harness = Harness::start("fault-node-lost", settings).await?;
    let nodes = AddedNodes::add("r7i.8xlarge", &["fault-lost-0", "fault-lost-1"]).await?;
    for name in &nodes.names {
        wait_for_ready_node(&harness.client, name).await?;
    }
    // Evicted 2 s after their node becomes unreachable (the default is 300 s).
    let body = format!(
        "{}  placement:\n    tolerations:\n{EVICTED_WITHIN_2S}",
        two_engines("r7i.8xlarge", 4, 5)
    );
    harness.create(&spec("lost", &body)).await?;
    let measuring = wait_for_repetition(&harness, "lost", 0, 2).await?;
    let node = engine(&measuring, 0).node_name.expect("engine 0's node");
    nodes.faults.silence_node(&node)?;
    let silenced = Instant::now();

    let done = harness.finished("lost", Duration::from_secs(240)).await?;
    eprintln!(
        "finished {} s after node {node} went silent",
        silenced.elapsed().as_secs()
    );
    let message = assert_node_lost(&done, 0, &node);
    assert!(message.contains("the last progress reading"), "{message}");
    assert!(message.contains("DeletionByTaintManager"), "{message}");
    let second = engine(&done, 1);
    assert_ne!(second.node_name.as_deref(), Some(node.as_str()));
    measured_exactly_once(&second, 4);
    // The second engine's pods go right after the status that finished it (results first), on
    // a node that is there: gone within seconds, not at once.
    harness
        .pods_gone_within(Duration::from_secs(20))
        .await
        .context("after the benchmark finished")?;
    harness.finish().await;
    drop(nodes);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_benchmark_created_again_under_its_name_waits_for_the_old_pods_and_never_adopts_them()
-> anyhow::Result<()> {
    let harness = Harness::start("fault-recreate", settings()).await?;
    let body = one_engine("r7i.4xlarge", 3, 2);
    let first = harness.create(&spec("again", &body)).await?;
    wait_for_repetition(&harness, "again", 0, 1).await?;
    // Hold the old engine pod in Terminating, as a slow node would.
    let hold = serde_json::json!({"metadata": {"finalizers": ["membench.io/test-hold"]}});
    let pods = harness.pods();
    pods.patch(
        "again-0-engine",
        &PatchParams::default(),
        &Patch::Merge(&hold),
    )
    .await?;
    let old_uid = pods.get("again-0-engine").await?.uid();
    harness
        .benchmarks()
        .delete("again", &DeleteParams::default())
        .await?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while harness.benchmarks().get_opt("again").await?.is_some() {
        anyhow::ensure!(Instant::now() < deadline, "the benchmark was not deleted");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let second = harness.create(&spec("again", &body)).await?;
    assert_ne!(first.uid(), second.uid());
    harness
        .wait_for(
            "again",
            Duration::from_secs(30),
            "waiting for the old pods",
            |b| engine(b, 0).reason.as_ref().map(|r| r.as_str()) == Some("WaitingForOldPods"),
        )
        .await?;
    // It decides again every second while it waits: three more decisions, and still waiting.
    let reconciles = harness.reconciles_finished();
    harness
        .reconciled_again(reconciles, 3, Duration::from_secs(30))
        .await?;
    let still = harness.benchmarks().get("again").await?;
    assert_eq!(
        engine(&still, 0).reason.as_ref().map(|r| r.as_str()),
        Some("WaitingForOldPods")
    );
    assert_eq!(
        pods.get("again-0-engine").await?.uid(),
        old_uid,
        "not replaced"
    );

    let release = serde_json::json!({"metadata": {"finalizers": null}});
    pods.patch(
        "again-0-engine",
        &PatchParams::default(),
        &Patch::Merge(&release),
    )
    .await?;
    let done = harness.finished("again", Duration::from_secs(120)).await?;
    measured_exactly_once(&engine(&done, 0), 3);
    assert_eq!(done.uid(), second.uid());
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_seconds_stops_the_client_and_keeps_its_partial_result() -> anyhow::Result<()> {
    let harness = Harness::start("fault-deadline", settings()).await?;
    // 10 repetitions of at least 15 s each cannot finish in the minimum timeout of 60 s.
    let body = format!(
        "{}  timeoutSeconds: 60\n",
        two_engines("r7i.4xlarge", 10, 15)
    );
    harness.create(&spec("deadline", &body)).await?;
    let done = harness
        .finished("deadline", Duration::from_secs(150))
        .await?;
    let first = engine(&done, 0);
    assert_eq!(
        first.reason.as_ref().map(|r| r.as_str()),
        Some("Timeout"),
        "{}",
        status_of(&done)
    );
    eprintln!(
        "engine 0: Timeout with {} repetitions: {}",
        first.repetitions.len(),
        first.message.as_deref().unwrap_or_default()
    );
    assert!(
        (2..10).contains(&first.repetitions.len()),
        "what the client measured before the deadline is kept: {first:#?}"
    );
    assert!(
        first
            .message
            .as_deref()
            .unwrap()
            .contains("repetitions measured before are kept"),
        "{first:#?}"
    );
    assert_eq!(
        engine(&done, 1).reason.as_ref().map(|r| r.as_str()),
        Some("NotRun")
    );
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_killed_mid_run_hands_over_to_its_standby_within_15_seconds() -> anyhow::Result<()>
{
    let harness = Harness::without_operator("fault-leader").await?;
    let kubeconfig =
        DevCluster::kubeconfig_with(&membench_devcluster::EnsureOptions::default()).await?;
    let namespace = harness.namespace.name().to_string();
    let mut operators = Vec::new();
    for identity in ["op-a", "op-b"] {
        let process = OperatorProcess::start(
            &kubeconfig,
            &OperatorArgs {
                namespaces: &[&namespace],
                client_image: CLIENT_IMAGE,
                rust_log: "info",
                log_name: &format!("membench-{namespace}-{identity}.log"),
                leader_identity: Some(identity),
            },
        )?;
        operators.push((identity, process));
    }
    let leases: Api<Lease> = harness.namespace.api();
    let deadline = Instant::now() + Duration::from_secs(60);
    let leader = loop {
        if let Some(holder) = lease_holder(&leases).await? {
            break holder;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "no replica took the lease within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let (recorder, history) = record_pods(harness.pods());
    harness
        .create(&spec("handover", &two_engines("r8g.4xlarge", 3, 3)))
        .await?;
    wait_for_repetition(&harness, "handover", 0, 2).await?;

    let (_, replica) = operators
        .iter_mut()
        .find(|(identity, _)| *identity == leader)
        .expect("the lease holder is one of the two replicas");
    replica.kill()?;
    let killed = Instant::now();
    let standby = loop {
        match lease_holder(&leases).await? {
            Some(holder) if holder != leader => break holder,
            _ => {}
        }
        anyhow::ensure!(
            killed.elapsed() < Duration::from_secs(15),
            "no standby took the lease within 15 s of the leader's death"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let handover = killed.elapsed();
    eprintln!(
        "{standby} took over {} ms after {leader} was killed",
        handover.as_millis()
    );

    let done = harness
        .finished("handover", Duration::from_secs(180))
        .await?;
    recorder.abort();
    assert_eq!(
        done.status.as_ref().unwrap().phase,
        Some(Phase::Succeeded),
        "{}",
        status_of(&done)
    );
    for engine in &done.status.as_ref().unwrap().engines {
        measured_exactly_once(engine, 3);
    }
    {
        let history = history.lock().unwrap();
        assert_each_pod_created_once(&history);
        let names: BTreeSet<&String> = history.uids.keys().collect();
        assert_eq!(names.len(), 4, "{names:?}");
    }
    drop(operators);
    harness.finish().await;
    Ok(())
}
