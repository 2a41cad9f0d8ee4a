//! `spec.parallelism` end to end, on the dev cluster (a real API server and scheduler, engines
//! run by the node agent as real servers from the engine store): up to N engines at once, each
//! alone on its node, measuring what one at a time measures; and a parallelism above the pool's
//! size, which waits saying how many nodes the type has. Small workloads: the machine's cores
//! are shared. The wall-time figures are the bench's (`cargo bench --bench parallel_matrix`).

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use common::engine_watch::watch_engines;
use common::operator::*;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use membench::crd::{MemoryBenchmark, Phase};
use membench_devcluster::faults::Faults;

/// Three builds of two engines, each with the allocator of its official image. Memory is read
/// again a second after each load: right after it, how far the hash table's incremental resize
/// got depends on timing, which engines beside each other change (at 20,000 members the first
/// reading of one build differed by up to 1.2% between two runs here, the settled one did not).
fn three_engines(instance_type: &str, parallelism: u32, members: u64) -> String {
    format!(
        "  instanceType: {instance_type}\n  parallelism: {parallelism}\n  engines:\n    - {{engine: redis, version: \"8.2.3\"}}\n    - {{engine: valkey, version: \"9.1.2\"}}\n    - {{engine: redis, version: \"7.4.1\"}}\n  workload: {{sortedSet: {{members: {members}, sampleEvery: 0}}}}\n  repetitions: 1\n  settleSeconds: 1\n"
    )
}

fn bytes_per_member(benchmark: &MemoryBenchmark) -> BTreeMap<String, f64> {
    benchmark
        .status
        .as_ref()
        .unwrap()
        .engines
        .iter()
        .map(|e| {
            let median = e
                .summary
                .as_ref()
                .map_or(f64::NAN, |s| s.bytes_per_item.median);
            (e.name.clone(), median)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_engines_stay_within_parallelism_one_per_node_and_measure_what_one_at_a_time_does()
-> anyhow::Result<()> {
    let harness = Harness::start("par-runs", settings()).await?;
    let (watcher, watch) = watch_engines(harness.pods());
    // Both benchmarks on one pool, and every node keeps one engine.
    // 500,000 members: two runs of one build differ by some 15 KB here whatever the
    // parallelism (0.15% at 100,000 members, 0.01-0.02% at 500,000).
    harness
        .create(&spec("par", &three_engines("r7i.4xlarge", 2, 500_000)))
        .await?;
    // The pool has two r7i.4xlarge nodes: "seq" is created once "par" runs two engines, or its
    // first engine could take the second node first and leave "par" one at a time (seen once
    // in a fresh-clone run: most running at once 1, both of par's engines on one node).
    let deadline = Instant::now() + Duration::from_secs(120);
    while watch.lock().unwrap().most_running_at_once.get("par") < Some(&2) {
        anyhow::ensure!(
            Instant::now() < deadline,
            "par never ran two engines at once within 120 s: {:?}",
            watch.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    harness
        .create(&spec("seq", &three_engines("r7i.4xlarge", 1, 500_000)))
        .await?;
    let par = harness.finished("par", Duration::from_secs(300)).await?;
    let seq = harness.finished("seq", Duration::from_secs(300)).await?;
    watcher.abort();
    let watch = std::mem::take(&mut *watch.lock().unwrap());
    for done in [&par, &seq] {
        let status = done.status.as_ref().unwrap();
        assert_eq!(status.phase, Some(Phase::Succeeded), "{status:#?}");
    }

    assert!(
        watch.overlaps.is_empty(),
        "two engines on one node: {:?}",
        watch.overlaps
    );
    assert_eq!(watch.most_at_once.get("seq"), Some(&1), "{watch:?}");
    assert_eq!(
        watch.most_at_once.get("par"),
        Some(&2),
        "parallelism 2 must have run two engines at once, and never more: {watch:?}"
    );
    assert_eq!(watch.most_running_at_once.get("par"), Some(&2), "{watch:?}");
    // The two that ran at once ran on two nodes.
    let par_nodes = &watch.nodes["par"];
    assert!(par_nodes.len() >= 2, "{par_nodes:?}");
    for node in par_nodes {
        assert_eq!(
            instance_type_of(&harness.client, node).await?,
            "r7i.4xlarge"
        );
    }
    let status = par.status.as_ref().unwrap();
    let overlapping = status.engines.iter().any(|a| {
        status.engines.iter().any(|b| {
            a.name != b.name
                && a.started_at.as_ref().unwrap().0 < b.finished_at.as_ref().unwrap().0
                && b.started_at.as_ref().unwrap().0 < a.finished_at.as_ref().unwrap().0
        })
    });
    assert!(
        overlapping,
        "no two engines of par overlapped in time: {status:#?}"
    );

    // The same figures as one at a time, build by build.
    let (parallel, sequential) = (bytes_per_member(&par), bytes_per_member(&seq));
    eprintln!("bytes per member, parallelism 2: {parallel:?}; parallelism 1: {sequential:?}");
    assert_eq!(parallel.len(), 3);
    for (name, one_at_a_time) in &sequential {
        let at_once = parallel[name];
        let difference = (at_once - one_at_a_time).abs() / one_at_a_time;
        assert!(
            difference <= 0.001,
            "{name}: {at_once} B/member with parallelism 2, {one_at_a_time} one at a time ({:.3}%)",
            difference * 100.0
        );
    }
    harness.finish().await;
    Ok(())
}

/// Adds two nodes of an instance type no other test uses, and removes them when dropped.
struct SmallPool {
    faults: Faults,
    names: Vec<String>,
}

impl Drop for SmallPool {
    fn drop(&mut self) {
        for name in &self.names {
            let _ = self.faults.remove_node(name);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallelism_above_the_pool_waits_saying_how_many_nodes_the_type_has_then_finishes()
-> anyhow::Result<()> {
    const TYPE: &str = "r7i.8xlarge";
    let harness = Harness::start("par-small-pool", settings()).await?;
    let pool = SmallPool {
        faults: Faults::of_dev_cluster().await?,
        names: vec!["par-pool-0".into(), "par-pool-1".into()],
    };
    for name in &pool.names {
        pool.faults.add_node(name, TYPE)?;
    }
    let nodes: Api<Node> = Api::all(harness.client.clone());
    let selector = format!("node.kubernetes.io/instance-type={TYPE}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ready = nodes
            .list(&ListParams::default().labels(&selector))
            .await?
            .items
            .len();
        if ready == 2 {
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{ready} of 2 {TYPE} nodes registered"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    let (watcher, watch) = watch_engines(harness.pods());
    harness
        .create(&spec("wide", &three_engines(TYPE, 3, 20_000)))
        .await?;
    let waiting = harness
        .wait_for(
            "wide",
            Duration::from_secs(120),
            "a run waiting on the small pool",
            |b| {
                b.status.as_ref().is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|c| c.type_ == "Progressing" && c.reason == "ParallelismAboveNodes")
                })
            },
        )
        .await?;
    let progressing = condition(&waiting, "Progressing").context("a Progressing condition")?;
    assert!(
        progressing.message.contains("spec.parallelism is 3")
            && progressing.message.contains(&format!("{TYPE} has 2 nodes"))
            && progressing.message.contains("set parallelism to 2"),
        "{}",
        progressing.message
    );
    let done = harness.finished("wide", Duration::from_secs(300)).await?;
    watcher.abort();
    let status = done.status.as_ref().unwrap();
    assert_eq!(status.phase, Some(Phase::Succeeded), "{status:#?}");
    assert_eq!(condition(&done, "Ready").unwrap().status, "True");
    let watch = std::mem::take(&mut *watch.lock().unwrap());
    assert!(
        watch.overlaps.is_empty(),
        "two engines on one node: {:?}",
        watch.overlaps
    );
    assert_eq!(
        watch.most_running_at_once.get("wide"),
        Some(&2),
        "{watch:?}"
    );
    assert!(watch.most_at_once["wide"] <= 3, "{watch:?}");
    assert_eq!(watch.nodes["wide"], pool.names.iter().cloned().collect());
    harness.finish().await;
    drop(pool);
    Ok(())
}
