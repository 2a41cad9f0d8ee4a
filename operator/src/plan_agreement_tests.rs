//! A spec's run plans agree wherever it runs: the plan `membench run` measures each engine
//! entry with (`local::runner::run_plans`) is the plan that entry's client pod carries, read
//! back from the Pod the controller builds, for every run (each entry on each instance type)
//! of every example spec and of one whose entries differ in every way a plan can. And the
//! client pod's command line carries no setting, only where things are.

use std::path::Path;

use crate::client::measurement::plan::RunPlan;
use crate::controller::build::pods::{PodSettings, client_pod_of_shards, plan_of_client_pod};
use crate::crd::MemoryBenchmark;
use crate::local::runner::run_plans;
use crate::stats::StabilityThresholds;
use crate::validation::spec_file::{parse_specs, read_specs};
use crate::validation::validate;

/// The client pod's flags: none of them is a setting of the run.
const POD_FLAGS: [&str; 9] = [
    "--addr",
    "--replica",
    "--output",
    "--result-file",
    "--progress-port",
    "--serve-result-seconds",
    "--keep-data",
    "--container-memory-marks",
    "--profile",
];

/// Entries that differ in each thing an entry changes in its plan (its TTL, cluster mode, the
/// settings read back, its own eviction limit), on two instance types.
const ENTRIES_THAT_DIFFER: &str = "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {name: differ, namespace: bench}\nspec:\n  instanceTypes: [r8g.4xlarge, r7i.4xlarge]\n  engines:\n    - {engine: valkey, version: \"9.1.2\", config: {hash-max-listpack-entries: \"64\", maxmemory: 64mb}}\n    - {engine: valkey, version: \"9.1.2\", name: plain, withoutTtl: true, clusterMode: true, config: {maxmemory: 32mb}}\n    - {engine: redis, version: \"8.2.3\", config: {maxmemory: 48mb, maxmemory-policy: allkeys-lfu}}\n  workload: {strings: {keys: 1000, ttlSeconds: 3600, ttlShare: 0.5}}\n  repetitions: 2\n  pipeline: 50\n  settleSeconds: 1\n  peak: {snapshot: {writesPerSecond: 500}}\n  eviction: {loadTo: 2}\n";

fn examples() -> Vec<MemoryBenchmark> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests/examples");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|file| read_specs(file).unwrap_or_else(|e| panic!("{}: {e}", file.display())))
        .collect()
}

/// The plan run `run`'s client pod carries, and its flags.
fn pod_plan(benchmark: &MemoryBenchmark, plans: &[RunPlan], run: usize) -> (RunPlan, Vec<String>) {
    let shards = benchmark.spec.engine_of_run(run).shards.unwrap_or(1);
    let ips: Vec<String> = (0..shards).map(|s| format!("10.0.0.{}", s + 1)).collect();
    let replica = benchmark
        .spec
        .peak
        .as_ref()
        .is_some_and(|p| p.replica.is_some())
        .then_some("10.0.1.1");
    let pod = client_pod_of_shards(
        benchmark,
        run,
        1,
        plans,
        &ips,
        replica,
        &PodSettings::default(),
    );
    let plan = plan_of_client_pod(&pod)
        .expect("a client pod carries its plan")
        .unwrap_or_else(|e| panic!("the client would refuse its pod's plan: {e}"));
    let args = pod.spec.unwrap().containers[0].args.clone().unwrap();
    (plan, args)
}

#[test]
fn every_runs_client_pod_carries_the_plan_a_local_run_measures_its_entry_with() {
    let differ = parse_specs(ENTRIES_THAT_DIFFER).unwrap().remove(0);
    let local = run_plans(&differ, StabilityThresholds::default()).unwrap();
    // Three entries whose plans differ: a pod given another entry's plan would show.
    assert!(local[0] != local[1] && local[1] != local[2] && local[0] != local[2]);
    let mut benchmarks = examples();
    assert!(benchmarks.len() >= 10, "the example specs were not found");
    benchmarks.push(differ);
    let mut runs = 0;
    let mut compared = 0;
    for benchmark in &benchmarks {
        let name = benchmark.metadata.name.clone().unwrap_or_default();
        let valid = match validate(benchmark) {
            Ok(valid) => valid,
            // A spec that picks local builds (`reproduce-*`) runs with `membench run` only.
            Err(e) if e.contains("applies to membench run only") => continue,
            Err(e) => panic!("{name}: {e}"),
        };
        compared += 1;
        let local = run_plans(benchmark, StabilityThresholds::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        for run in 0..benchmark.spec.runs() {
            let (from_pod, args) = pod_plan(benchmark, &valid.plans, run);
            let entry = benchmark.spec.entry_of_run(run);
            assert_eq!(from_pod, local[entry], "{name}, run {run} (entry {entry})");
            let settings: Vec<&String> = args
                .iter()
                .filter(|a| a.starts_with("--") && !POD_FLAGS.contains(&a.as_str()))
                .collect();
            assert!(
                settings.is_empty(),
                "{name}: the client pod's command line carries settings {settings:?}: {args:?}"
            );
            runs += 1;
        }
    }
    assert!(
        compared >= 10 && runs > compared,
        "{compared} specs compared, {runs} runs"
    );
}
