//! The operator at scale, on a private dev cluster of 8 fake nodes of two instance types:
//!
//! 1. Latency on an idle operator: 10 benchmarks applied one after another, each on a free
//!    node; the time from the create call returning to the engine pod's first watch event.
//!    Target: median under 1 s.
//! 2. Load: 200 MemoryBenchmarks (small workloads, mixed engines, both instance types) applied
//!    at once. Every one must end Succeeded; a watch of every pod checks that no node ever holds
//!    two engine pods at once; the time until the last one finished is printed.
//! 3. Idle again: reconciliations per second over a minute once everything has finished
//!    (finished benchmarks are never requeued, so anything above 0 is work nobody asked for);
//!    the operator's peak RSS (VmHWM of its process, the release build). Target: under 64 MiB.
//!
//! The operator runs as its own process (the release `membench operator`, watching the two
//! namespaces of the run with `--namespace a,b`), so its memory, log and metrics are its own;
//! its log's warnings and errors are counted and listed. Nothing here fails on a figure: each is
//! printed beside its target with a verdict, like the performance harness.
//!
//! ```sh
//! cargo bench -p membench --bench operator_at_scale                 # about 5 minutes here
//! cargo bench -p membench --bench operator_at_scale -- --benchmarks 40   # a smaller load
//! ```
//!
//! The cluster: `MEMBENCH_DEV_CLUSTER_DIR` (default `~/.cache/membench/operator-at-scale`) with
//! `MEMBENCH_DEV_CLUSTER_NODES` (default `r8g.4xlarge=4,r7i.4xlarge=4`); started when it is not
//! up, and stopped at the end if this run started it. Needs what `hack/dev-cluster.sh` needs
//! (`hack/build-tools.sh`, the engine store).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{ListParams, PostParams};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use membench::crd::{MemoryBenchmark, Phase};

#[path = "common/dev_cluster.rs"]
mod dev_cluster;
use dev_cluster::{Cluster, create_namespace, verdict};

// Shared with the tests; `kill` is for the leader hand-over test only.
#[allow(dead_code)]
#[path = "../tests/common/operator_process.rs"]
mod operator_process;
use operator_process::{OperatorArgs, OperatorProcess};

const CLIENT_IMAGE: &str = "ghcr.io/membench/membench:dev";
const DEFAULT_NODES: &str = "r8g.4xlarge=4,r7i.4xlarge=4";
const LATENCY_SAMPLES: usize = 10;
const RSS_TARGET_MIB: f64 = 64.0;
const IDLE_SECONDS: u64 = 60;

struct Options {
    benchmarks: usize,
}

fn options() -> Options {
    let args: Vec<String> = std::env::args().collect();
    let benchmarks = args
        .iter()
        .position(|a| a == "--benchmarks")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(200);
    Options { benchmarks }
}

/// Warning and error lines of the operator's log, counted by level and message.
fn complaints(operator: &OperatorProcess) -> BTreeMap<(String, String), usize> {
    let mut found = BTreeMap::new();
    for line in operator.log().lines() {
        let Ok(entry) = serde_json::from_str::<serde_json::Value>(line) else {
            *found
                .entry(("UNPARSED".into(), line.chars().take(120).collect()))
                .or_default() += 1;
            continue;
        };
        let level = entry["level"].as_str().unwrap_or_default().to_string();
        if level == "WARN" || level == "ERROR" {
            let message = entry["fields"]["message"].as_str().unwrap_or_default();
            // Benchmark names and numbers vary; the shape of the message is what counts.
            let shape: String = message
                .chars()
                .map(|c| if c.is_ascii_digit() { '#' } else { c })
                .take(140)
                .collect();
            *found.entry((level, shape)).or_default() += 1;
        }
    }
    found
}

/// What the pod watch saw: when each pod first appeared, and the most engine pods any node held
/// at once that could be running (bound, not yet in a terminal phase).
#[derive(Default)]
struct PodHistory {
    first_seen: BTreeMap<(String, String), Instant>,
    /// Engine pods that exist now and are bound: UID -> (namespace, node).
    engines_now: BTreeMap<String, (String, String)>,
    /// The last state seen of each engine pod now bound, by UID, to describe an overlap.
    engine_states: BTreeMap<String, String>,
    /// The first moments a node held two engine pods, described.
    overlaps: Vec<String>,
    most_engines_on_a_node: usize,
    engines_per_node: BTreeMap<String, BTreeSet<String>>,
}

fn is_engine(pod: &Pod) -> bool {
    pod.labels()
        .get("app.kubernetes.io/component")
        .map(String::as_str)
        == Some("engine")
}

fn watch_pods(
    client: Client,
    namespace: String,
    history: Arc<Mutex<PodHistory>>,
) -> tokio::task::JoinHandle<()> {
    let pods: Api<Pod> = Api::namespaced(client, &namespace);
    tokio::spawn(async move {
        let mut events = std::pin::pin!(watcher::watcher(pods, watcher::Config::default()));
        while let Some(event) = events.next().await {
            let now = Instant::now();
            let mut history = history.lock().unwrap();
            match event {
                Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => {
                    history
                        .first_seen
                        .entry((namespace.clone(), pod.name_any()))
                        .or_insert(now);
                    let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
                    let phase = pod
                        .status
                        .as_ref()
                        .and_then(|s| s.phase.clone())
                        .unwrap_or_default();
                    // A pod in a terminal phase has no process left: its node is free for the
                    // next engine (the scheduler sees it so too) while the pod object is deleted.
                    if matches!(phase.as_str(), "Succeeded" | "Failed") {
                        let uid = pod.uid().unwrap_or_default();
                        history.engines_now.remove(&uid);
                        history.engine_states.remove(&uid);
                    } else if let (true, Some(node)) = (is_engine(&pod), node) {
                        let uid = pod.uid().unwrap_or_default();
                        history
                            .engines_per_node
                            .entry(node.clone())
                            .or_default()
                            .insert(uid.clone());
                        let deleting = pod.metadata.deletion_timestamp.is_some();
                        history.engine_states.insert(
                            uid.clone(),
                            format!(
                                "{} ({phase}{})",
                                pod.name_any(),
                                if deleting { ", deleting" } else { "" }
                            ),
                        );
                        history
                            .engines_now
                            .insert(uid, (namespace.clone(), node.clone()));
                        let count = history
                            .engines_now
                            .values()
                            .filter(|(_, n)| *n == node)
                            .count();
                        history.most_engines_on_a_node = history.most_engines_on_a_node.max(count);
                        if count > 1 && history.overlaps.len() < 5 {
                            let together: Vec<String> = history
                                .engines_now
                                .iter()
                                .filter(|(_, (_, n))| *n == node)
                                .filter_map(|(uid, _)| history.engine_states.get(uid).cloned())
                                .collect();
                            history
                                .overlaps
                                .push(format!("{node}: {}", together.join(" + ")));
                        }
                    }
                }
                Ok(watcher::Event::Delete(pod)) => {
                    let uid = pod.uid().unwrap_or_default();
                    history.engines_now.remove(&uid);
                    history.engine_states.remove(&uid);
                }
                // A relist (the watch restarted): pods deleted in the gap get no Delete event,
                // so this namespace's engines are known again only from what the list holds.
                Ok(watcher::Event::Init) => {
                    history.engines_now.retain(|_, (ns, _)| *ns != namespace);
                }
                _ => {}
            }
        }
    })
}

/// Benchmark `i` of a run: engines and workloads take turns, as do the two instance types.
fn benchmark(name: &str, i: usize, dragonfly: bool) -> anyhow::Result<MemoryBenchmark> {
    let engines = [
        "{engine: redis, version: \"7.0.15\"}",
        "{engine: redis, version: \"8.2.3\"}",
        "{engine: valkey, version: \"9.1.2\"}",
        if dragonfly {
            "{engine: dragonfly, version: \"1.40.0\"}"
        } else {
            "{engine: valkey, version: \"8.1\"}"
        },
    ];
    let workloads = [
        "{strings: {keys: 1000, valueSize: 100}}",
        "{sortedSet: {members: 2000, sampleEvery: 0}}",
        "{records: {records: 500}}",
        "{randomStrings: {requests: 2000, keyspace: 2000}}",
    ];
    let instance_type = if i.is_multiple_of(2) {
        "r8g.4xlarge"
    } else {
        "r7i.4xlarge"
    };
    let yaml = format!(
        "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {{name: {name}}}\nspec:\n  instanceType: {instance_type}\n  engines: [{}]\n  workload: {}\n  repetitions: 1\n",
        engines[i % engines.len()],
        workloads[(i / 2) % workloads.len()]
    );
    Ok(serde_saphyr::from_str(&yaml)?)
}

fn phase_of(b: &MemoryBenchmark) -> Option<Phase> {
    b.status.as_ref().and_then(|s| s.phase.clone())
}

async fn wait_all_finished(
    api: &Api<MemoryBenchmark>,
    count: usize,
    timeout: Duration,
) -> anyhow::Result<Vec<MemoryBenchmark>> {
    let deadline = Instant::now() + timeout;
    loop {
        let listed = api.list(&ListParams::default()).await?.items;
        let finished = listed
            .iter()
            .filter(|b| matches!(phase_of(b), Some(Phase::Succeeded | Phase::Failed)))
            .count();
        if listed.len() == count && finished == count {
            return Ok(listed);
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{finished} of {count} finished after {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let options = options();
    if std::env::args().any(|a| a == "--list") {
        return Ok(());
    }
    let cluster = Cluster::up("operator-at-scale", DEFAULT_NODES)?;
    println!("cluster: {} ({})", cluster.dir.display(), cluster.nodes);
    let client = membench_devcluster::cluster::client_for(&cluster.kubeconfig()).await?;
    let dragonfly = membench_enginestore::EngineStore::open_default()
        .map(|s| s.builds().iter().any(|b| b.engine == "dragonfly"))
        .unwrap_or(false);
    let suffix = membench_devcluster::wait::unique_suffix();
    let latency_ns = format!("scale-latency-{suffix}");
    let load_ns = format!("scale-load-{suffix}");
    for ns in [&latency_ns, &load_ns] {
        create_namespace(&client, ns).await?;
    }
    let log_name = format!("membench-at-scale-{}.log", std::process::id());
    let operator = OperatorProcess::start(
        &cluster.kubeconfig(),
        &OperatorArgs {
            namespaces: &[&latency_ns, &load_ns],
            client_image: CLIENT_IMAGE,
            rust_log: "info,kube=warn",
            log_name: &log_name,
            leader_identity: None,
        },
    )?;
    let history = Arc::new(Mutex::new(PodHistory::default()));
    let watches = [
        watch_pods(client.clone(), latency_ns.clone(), history.clone()),
        watch_pods(client.clone(), load_ns.clone(), history.clone()),
    ];
    tokio::time::sleep(Duration::from_secs(2)).await;
    println!(
        "machine: {} CPUs; engines: redis 7.0.15, redis 8.2.3, valkey 9.1.2, {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        if dragonfly {
            "dragonfly 1.40.0"
        } else {
            "valkey 8.1 (no Dragonfly in the store)"
        }
    );

    // 1. Apply to engine pod on an idle operator, each benchmark on a free node.
    let latency_api: Api<MemoryBenchmark> = Api::namespaced(client.clone(), &latency_ns);
    let mut latencies = Vec::new();
    for i in 0..LATENCY_SAMPLES {
        let name = format!("idle-{i}");
        let applied = Instant::now();
        latency_api
            .create(&PostParams::default(), &benchmark(&name, i, dragonfly)?)
            .await?;
        let pod = (latency_ns.clone(), format!("{name}-0-engine"));
        let deadline = applied + Duration::from_secs(60);
        let seen = loop {
            if let Some(at) = history.lock().unwrap().first_seen.get(&pod) {
                break *at;
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "no engine pod for {name} within 60 s"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        latencies.push(seen.duration_since(applied).as_secs_f64() * 1000.0);
        wait_all_finished(&latency_api, i + 1, Duration::from_secs(120)).await?;
    }
    let mut sorted = latencies.clone();
    let latency_median = median(&mut sorted);

    // 2. The load, applied at once.
    let load_api: Api<MemoryBenchmark> = Api::namespaced(client.clone(), &load_ns);
    let specs: Vec<MemoryBenchmark> = (0..options.benchmarks)
        .map(|i| benchmark(&format!("b{i:03}"), i, dragonfly))
        .collect::<anyhow::Result<_>>()?;
    let started = Instant::now();
    let applied: Vec<(String, Instant)> = futures::stream::iter(specs)
        .map(|b| {
            let api = load_api.clone();
            async move {
                let name = b.name_any();
                api.create(&PostParams::default(), &b).await?;
                anyhow::Ok((name, Instant::now()))
            }
        })
        .buffer_unordered(16)
        .try_collect()
        .await?;
    let applying = started.elapsed();
    let finished =
        wait_all_finished(&load_api, options.benchmarks, Duration::from_secs(3600)).await?;
    let until_last = started.elapsed();
    let succeeded = finished
        .iter()
        .filter(|b| phase_of(b) == Some(Phase::Succeeded))
        .count();
    let failures: Vec<String> = finished
        .iter()
        .filter(|b| phase_of(b) != Some(Phase::Succeeded))
        .map(|b| {
            let engine = b
                .status
                .as_ref()
                .and_then(|s| s.engines.first().cloned())
                .unwrap_or_default();
            format!(
                "{}: {:?} {}",
                b.name_any(),
                engine.reason,
                engine.message.unwrap_or_default()
            )
        })
        .collect();
    let durations: Vec<f64> = finished
        .iter()
        .filter_map(|b| {
            let s = b.status.as_ref()?;
            Some(
                s.finished_at
                    .as_ref()?
                    .0
                    .duration_since(s.started_at.as_ref()?.0)
                    .as_secs_f64(),
            )
        })
        .collect();
    // Under load, the earliest benchmarks of each pool find a free node: their apply to pod.
    let mut under_load: Vec<f64> = {
        let history = history.lock().unwrap();
        let mut by_apply = applied.clone();
        by_apply.sort_by_key(|(_, at)| *at);
        by_apply
            .iter()
            .take(8)
            .filter_map(|(name, at)| {
                let seen = history
                    .first_seen
                    .get(&(load_ns.clone(), format!("{name}-0-engine")))?;
                Some(seen.duration_since(*at).as_secs_f64() * 1000.0)
            })
            .collect()
    };
    let under_load_median = median(&mut under_load);

    // 3. Idle again.
    let reconciliations = || {
        operator
            .metric("membench_reconciliations_total")
            .map(|v| v as u64)
    };
    tokio::time::sleep(Duration::from_secs(5)).await;
    let before = reconciliations();
    tokio::time::sleep(Duration::from_secs(IDLE_SECONDS)).await;
    let after = reconciliations();
    let idle_rate = match (before, after) {
        (Some(b), Some(a)) => Some(a.saturating_sub(b) as f64 / IDLE_SECONDS as f64),
        _ => None,
    };
    let peak_rss = operator.peak_rss_mib();
    let complaints = complaints(&operator);
    for watch in watches {
        watch.abort();
    }
    let history = std::mem::take(&mut *history.lock().unwrap());

    println!(
        "\n== 1. apply to engine pod, idle operator ({LATENCY_SAMPLES} benchmarks, one at a time, each on a free node)"
    );
    println!(
        "   each (ms): {}",
        latencies
            .iter()
            .map(|l| format!("{l:.0}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "   median {latency_median:.0} ms; target < 1000 ms: {}",
        verdict(latency_median < 1000.0)
    );
    println!(
        "\n== 2. {} MemoryBenchmarks applied at once over 8 nodes",
        options.benchmarks
    );
    println!(
        "   applying took {:.1} s (16 create calls in flight)",
        applying.as_secs_f64()
    );
    println!(
        "   succeeded: {succeeded} of {}{}",
        options.benchmarks,
        if failures.is_empty() {
            String::new()
        } else {
            format!("; not: {failures:?}")
        }
    );
    println!(
        "   time until the last one finished: {:.1} s after the first apply",
        until_last.as_secs_f64()
    );
    if !durations.is_empty() {
        let mut d = durations.clone();
        println!(
            "   one benchmark from its start to its end: median {:.1} s, min {:.1} s, max {:.1} s",
            median(&mut d),
            d[0],
            d[d.len() - 1]
        );
    }
    println!(
        "   most engine pods that could run on one node at any moment (watch; bound and not Succeeded or Failed): {} (must be 1): {}",
        history.most_engines_on_a_node,
        if history.most_engines_on_a_node == 1 {
            "holds"
        } else {
            "BROKEN"
        }
    );
    for overlap in &history.overlaps {
        println!("     two engines on {overlap}");
    }
    println!(
        "   engines run per node: {}",
        history
            .engines_per_node
            .iter()
            .map(|(n, e)| format!("{n}={}", e.len()))
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "   apply to engine pod under load, the 8 earliest (free nodes): median {under_load_median:.0} ms"
    );
    println!("\n== 3. the operator");
    match peak_rss {
        Some(rss) => println!(
            "   peak RSS (VmHWM, release build): {rss:.1} MiB; target < {RSS_TARGET_MIB} MiB: {}",
            verdict(rss < RSS_TARGET_MIB)
        ),
        None => println!("   peak RSS: could not read /proc"),
    }
    match idle_rate {
        Some(rate) => println!(
            "   reconciliations while idle ({IDLE_SECONDS} s after the last finished): {rate:.3}/s; periodic ones expected: 0 (finished benchmarks are not requeued): {}",
            verdict(rate == 0.0)
        ),
        None => println!("   reconciliations while idle: could not read /metrics"),
    }
    println!(
        "   operator log, warnings and errors by message ({} kinds):",
        complaints.len()
    );
    for ((level, message), count) in &complaints {
        println!("     {count:>5} {level} {message}");
    }
    drop(operator);
    for ns in [&latency_ns, &load_ns] {
        let _ = Api::<Namespace>::all(client.clone())
            .delete(ns, &Default::default())
            .await;
    }
    drop(cluster);
    Ok(())
}
