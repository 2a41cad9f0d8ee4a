//! A benchmark on Graviton (r8g, arm64) end to end on the dev cluster: the operator places the
//! engine and its client on an arm64 node, whose node agent runs the arm64 engine build and the
//! membench image's arm64 half under qemu-user, so arm64 code really runs; the status records
//! the engine's own report of its architecture (aarch64) and the same bytes per item as the
//! same release on an amd64 (r7i) node.
//!
//! Needs what an x86 machine's `hack/install-engines.sh` installs (Debian's arm64 redis-server
//! 7.0.15 and qemu-user-static) and the membench image's arm64 half: the archive from
//! `hack/build-image.sh`, or `cargo build --release --target aarch64-unknown-linux-gnu`.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::operator::{Harness, settings, spec};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use membench::crd::{EngineStatus, MemoryBenchmark, Phase};
use membench_devcluster::DevCluster;

/// Every pod's containers' imageIDs, by pod name, as a watch sees them (client pods are deleted
/// once their engine is done).
fn record_image_ids(
    pods: Api<Pod>,
) -> (
    tokio::task::JoinHandle<()>,
    Arc<Mutex<BTreeMap<String, String>>>,
) {
    let seen = Arc::new(Mutex::new(BTreeMap::new()));
    let shared = seen.clone();
    let task = tokio::spawn(async move {
        let mut events = std::pin::pin!(watcher::watcher(pods, watcher::Config::default()));
        while let Some(event) = events.next().await {
            if let Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) = event {
                let ids = pod
                    .status
                    .as_ref()
                    .and_then(|s| s.container_statuses.as_ref())
                    .into_iter()
                    .flatten()
                    .map(|c| c.image_id.clone())
                    .find(|id| !id.is_empty());
                if let Some(id) = ids {
                    shared.lock().unwrap().insert(pod.name_any(), id);
                }
            }
        }
    });
    (task, seen)
}

fn benchmark(name: &str, instance_type: &str) -> String {
    // Debian's Redis 7.0.15 has a build for each architecture on every x86 machine's store, with
    // the same allocator (Debian's jemalloc).
    spec(
        name,
        &format!(
            "  instanceType: {instance_type}\n  engines:\n    - {{engine: redis, version: \"7.0.15\"}}\n  workload: {{sortedSet: {{members: 100000, sampleEvery: 0}}}}\n  repetitions: 2\n  settleSeconds: 3\n"
        ),
    )
}

fn succeeded_engine(benchmark: &MemoryBenchmark) -> EngineStatus {
    let status = benchmark.status.clone().unwrap();
    assert_eq!(status.phase, Some(Phase::Succeeded), "{status:#?}");
    status.engines[0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_r8g_benchmark_runs_arm64_engine_and_client_code_and_matches_the_amd64_figure()
-> anyhow::Result<()> {
    anyhow::ensure!(
        DevCluster::is_dev_cluster(),
        "needs the dev cluster's node agent, which runs arm64 builds under qemu-user (unset MEMBENCH_TEST_KUBECONFIG)"
    );
    let harness = Harness::start("op-arm64", settings()).await?;
    let (recorder, image_ids) = record_image_ids(harness.pods());
    for (name, instance_type) in [("graviton", "r8g.4xlarge"), ("intel", "r7i.4xlarge")] {
        harness.create(&benchmark(name, instance_type)).await?;
    }
    // Under emulation the arm64 engine and client run several times slower than native.
    let graviton = harness
        .finished("graviton", Duration::from_secs(300))
        .await?;
    let intel = harness.finished("intel", Duration::from_secs(300)).await?;
    recorder.abort();

    let arm64 = succeeded_engine(&graviton);
    let amd64 = succeeded_engine(&intel);
    // The engine's own INFO server (the last word of `os`) says what code ran.
    assert_eq!(arm64.arch.as_deref(), Some("aarch64"), "{arm64:#?}");
    assert_eq!(amd64.arch.as_deref(), Some("x86_64"), "{amd64:#?}");
    assert_eq!(arm64.instance_type.as_deref(), Some("r8g.4xlarge"));
    let arm64_image = arm64.image_id.clone().unwrap_or_default();
    assert!(
        arm64_image.ends_with("?build=redis-7.0.15-debian-arm64&emulator=qemu-aarch64-static"),
        "{arm64_image}"
    );
    assert!(
        !amd64
            .image_id
            .clone()
            .unwrap_or_default()
            .contains("emulator"),
        "{amd64:#?}"
    );
    // The client pod ran the membench image's arm64 half, under the same emulator: the
    // manifest of hack/build-image.sh's archive, not the agent's fallback of a cross-built
    // binary (`local://<binary>@built-...`), which has the same platform and emulator.
    let ids = image_ids.lock().unwrap().clone();
    let client_image = ids
        .get("graviton-0-client")
        .unwrap_or_else(|| panic!("no imageID seen for the client: {ids:?}"));
    assert!(
        client_image.starts_with("local://oci-archive:")
            && client_image.contains("?platform=linux/arm64&manifest=sha256:")
            && client_image.ends_with("&emulator=qemu-aarch64-static"),
        "the client did not run the arm64 image of the archive: {client_image}"
    );
    let intel_client = ids.get("intel-0-client").cloned().unwrap_or_default();
    assert!(
        intel_client.contains("platform=linux/amd64") && !intel_client.contains("emulator"),
        "{intel_client}"
    );

    // The same release with the same allocator stores a member in the same bytes on either,
    // once the hash table's incremental resize has finished (right after the load, how far it
    // got depends on timing, which emulation changes: the settled reading is compared).
    let bytes = |e: &EngineStatus| {
        let settled: Vec<f64> = e
            .repetitions
            .iter()
            .map(|r| r.settled_bytes_per_item.expect("a settled reading"))
            .collect();
        settled.iter().sum::<f64>() / settled.len() as f64
    };
    eprintln!(
        "Redis 7.0.15 (Debian), 100,000-member sorted set, settled: r8g (aarch64, {client_image}) {:.3} B/member, r7i (x86_64, {intel_client}) {:.3} B/member",
        bytes(&arm64),
        bytes(&amd64)
    );
    // Runs of one build differ by up to 0.2 B/member here (the skiplist's random levels, the
    // baseline); a different layout or size class would move the figure by 8 B or more (7%).
    assert!(
        (bytes(&arm64) / bytes(&amd64) - 1.0).abs() < 0.005,
        "arm64 {:.2} and amd64 {:.2} B/member differ",
        bytes(&arm64),
        bytes(&amd64)
    );
    harness.finish().await;
    Ok(())
}
