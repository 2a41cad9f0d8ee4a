//! The API server restarted while a benchmark runs: every watch breaks (the operator's, the node
//! agent's, the controllers'), writes fail for a while, and everything reconnects. A test binary
//! of its own, since the restart disturbs every test running at the same time in the process.

mod common;

use std::time::{Duration, Instant};

use common::operator::*;
use membench::crd::Phase;
use membench_devcluster::faults::Faults;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_server_restarted_mid_run_loses_nothing_and_measures_each_engine_once()
-> anyhow::Result<()> {
    let faults = Faults::of_dev_cluster().await?;
    let harness = Harness::start("fault-apiserver", settings()).await?;
    let (recorder, history) = record_pods(harness.pods());
    let body = "  instanceType: r8g.4xlarge\n  engines:\n    - {engine: redis, version: \"7.0.15\"}\n    - {engine: valkey, version: \"9.1.2\"}\n  workload: {sortedSet: {members: 20000, sampleEvery: 0}}\n  repetitions: 4\n  settleSeconds: 3\n";
    harness.create(&spec("restart", body)).await?;
    harness
        .wait_for(
            "restart",
            Duration::from_secs(120),
            "measuring its first engine",
            |b| {
                b.status
                    .as_ref()
                    .and_then(|s| s.progress.as_ref())
                    .is_some_and(|p| p.engine == 1 && p.repetition >= 2)
            },
        )
        .await?;
    let restarted = Instant::now();
    tokio::task::spawn_blocking(move || faults.restart_apiserver()).await??;
    eprintln!(
        "the API server answered again {} ms after the restart began",
        restarted.elapsed().as_millis()
    );

    let done = harness
        .finished("restart", Duration::from_secs(240))
        .await?;
    recorder.abort();
    let status = done.status.clone().unwrap();
    assert_eq!(
        status.phase,
        Some(Phase::Succeeded),
        "{}",
        serde_json::to_string_pretty(&status)?
    );
    for engine in &status.engines {
        assert_eq!(engine.client_attempts, 1, "{engine:#?}");
        assert_eq!(engine.repetitions.len(), 4, "{engine:#?}");
        assert!(engine.repetitions.iter().all(|r| r.items == 20_000));
    }
    {
        let history = history.lock().unwrap();
        assert!(
            history.uids.values().all(|uids| uids.len() == 1),
            "a pod was created twice: {:?}",
            history.uids
        );
    }
    harness.finish().await;
    Ok(())
}
