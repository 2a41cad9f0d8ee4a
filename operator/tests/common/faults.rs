//! What the fault tests share: small benchmarks whose repetitions last a few seconds without
//! loading the machine, waiting for a repetition, the process behind a pod, nodes added for a
//! test (removed however it ends), and who holds the operator's Lease (the replicas themselves:
//! [`super::operator_process`]).

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use membench::crd::{EngineStatus, MemoryBenchmark};
use membench_devcluster::faults::Faults;

use super::operator::{Harness, PodHistory};

/// Two engines of a small sorted set; each repetition waits `settle` seconds for a second
/// reading, so a repetition lasts about that long while the machine stays idle.
pub fn two_engines(instance_type: &str, repetitions: u32, settle: u32) -> String {
    format!(
        "  instanceType: {instance_type}\n  engines:\n    - {{engine: redis, version: \"7.0.15\"}}\n    - {{engine: valkey, version: \"9.1.2\"}}\n  workload: {{sortedSet: {{members: 20000, sampleEvery: 0}}}}\n  repetitions: {repetitions}\n  settleSeconds: {settle}\n"
    )
}

pub fn one_engine(instance_type: &str, repetitions: u32, settle: u32) -> String {
    format!(
        "  instanceType: {instance_type}\n  engines:\n    - {{engine: redis, version: \"7.0.15\"}}\n  workload: {{sortedSet: {{members: 20000, sampleEvery: 0}}}}\n  repetitions: {repetitions}\n  settleSeconds: {settle}\n"
    )
}

/// Writes values of 64 MiB into the engine at `url` (`Harness::engine_url`: its pod address and
/// password), as something else filling it past its pod's memory limit would, until the engine
/// stops answering (killed), which is what the tests wait for. It goes on writing (over four keys
/// in turn) rather than stopping after a few: the client's next repetition flushes the engine,
/// and a ballast written just before that flush may be gone before a limit is enforced. Fails
/// when the engine cannot be reached at all, and when it still answers after `within`.
pub async fn fill_with_ballast(url: String, within: Duration) -> anyhow::Result<()> {
    tokio::task::spawn_blocking(move || {
        let ballast = vec![b'x'; 64 << 20];
        let started = Instant::now();
        let mut written = 0u32;
        let mut connection = redis::Client::open(url.as_str())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(10)))
            .map_err(|e| anyhow::anyhow!("could not reach the engine at {url} to fill it: {e}"))?;
        while started.elapsed() < within {
            let set = redis::cmd("SET")
                .arg(format!("ballast:{}", written % 4))
                .arg(&ballast)
                .query::<()>(&mut connection);
            if set.is_err() {
                return Ok(());
            }
            written += 1;
        }
        anyhow::bail!(
            "the engine at {url} still answered after {written} ballast writes of 64 MiB in {}s: its memory limit was not enforced",
            within.as_secs()
        )
    })
    .await?
}

/// Tolerations (YAML list items under `tolerations:`) that let a benchmark's pods be evicted 2 s
/// after their node becomes unreachable or not ready (the default is 300 s).
pub const EVICTED_WITHIN_2S: &str = "      - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 2}\n      - {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 2}\n";

/// Checks that engine `index` ended `NodeLost`, naming `node`; returns the message.
pub fn assert_node_lost(done: &MemoryBenchmark, index: usize, node: &str) -> String {
    let lost = super::operator::engine(done, index);
    assert_eq!(
        lost.reason.as_ref().map(|r| r.as_str()),
        Some("NodeLost"),
        "{}",
        status_of(done)
    );
    let message = lost.message.clone().unwrap_or_default();
    eprintln!("engine {index}: NodeLost: {message}");
    assert!(
        message.contains(&format!("node {node} stopped reporting")),
        "{message}"
    );
    message
}

pub fn status_of(benchmark: &MemoryBenchmark) -> String {
    serde_json::to_string_pretty(&benchmark.status).unwrap_or_default()
}

/// Waits until engine `index`'s client has begun repetition `repetition` (so the ones before
/// it are finished), as the operator's progress reading says.
pub async fn wait_for_repetition(
    harness: &Harness,
    name: &str,
    index: usize,
    repetition: u32,
) -> anyhow::Result<MemoryBenchmark> {
    harness
        .wait_for(
            name,
            Duration::from_secs(180),
            &format!("at repetition {repetition} of engine {index}"),
            |b| {
                b.status
                    .as_ref()
                    .and_then(|s| s.progress.as_ref())
                    .is_some_and(|p| p.engine == index as u32 + 1 && p.repetition >= repetition)
            },
        )
        .await
}

/// The process a pod's container runs (the node agent's `local-process://<pid>`).
pub fn container_pid(pod: &Pod) -> Option<u32> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .first()?
        .container_id
        .as_deref()?
        .strip_prefix("local-process://")?
        .parse()
        .ok()
}

pub fn signal(pid: u32, signal: libc::c_int) -> anyhow::Result<()> {
    super::send_signal(pid, signal).map_err(|e| anyhow::anyhow!("signal {signal} to {pid}: {e}"))
}

/// Every engine measured once, completely, with figures of a real load.
pub fn measured_exactly_once(engine: &EngineStatus, repetitions: usize) {
    assert_eq!(engine.state, "Succeeded", "{engine:#?}");
    assert_eq!(engine.client_attempts, 1, "{engine:#?}");
    assert_eq!(engine.repetitions.len(), repetitions, "{engine:#?}");
    for repetition in &engine.repetitions {
        assert_eq!(repetition.items, 20_000);
        assert!(
            (20.0..400.0).contains(&repetition.bytes_per_item),
            "{repetition:#?}"
        );
    }
}

pub fn assert_each_pod_created_once(history: &PodHistory) {
    assert!(
        history.uids.values().all(|uids| uids.len() == 1),
        "a pod was created twice: {:?}",
        history.uids
    );
}

/// FLUSHALL calls the engine pod at `url` (`Harness::engine_url`, with its password) has
/// answered, over a connection of a few milliseconds.
pub fn flushall_calls(url: &str) -> u64 {
    super::flushall_calls_at(url)
}

/// Removes the nodes a test added, and makes any it silenced report again, even when the test
/// fails half-way.
pub struct AddedNodes {
    pub faults: Faults,
    pub names: Vec<String>,
}

impl AddedNodes {
    pub async fn add(instance_type: &str, names: &[&str]) -> anyhow::Result<AddedNodes> {
        let faults = Faults::of_dev_cluster().await?;
        for name in names {
            faults.add_node(name, instance_type)?;
        }
        Ok(AddedNodes {
            faults,
            names: names.iter().map(|n| n.to_string()).collect(),
        })
    }
}

impl Drop for AddedNodes {
    fn drop(&mut self) {
        for name in &self.names {
            let _ = self.faults.resume_node(name);
            let _ = self.faults.remove_node(name);
        }
    }
}

pub async fn wait_for_ready_node(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ready = nodes.get_opt(name).await?.is_some_and(|n| {
            n.status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        });
        if ready {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "node {name} not Ready within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

pub async fn lease_holder(leases: &Api<Lease>) -> anyhow::Result<Option<String>> {
    Ok(leases
        .get_opt("membench-operator")
        .await?
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty()))
}
