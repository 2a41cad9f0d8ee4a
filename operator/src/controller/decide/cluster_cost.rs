//! The cluster's fixed cost in the status: what an empty cluster-mode node (`clusterMode`, or
//! each shard of `shards`) uses beyond the same build in standalone mode. A local run starts
//! the standalone build itself to read it (`local::runner`); in a cluster the operator runs
//! only what the spec asks for, so the figure is there when the spec has both: a cluster-mode
//! entry and a standalone entry of the same build (engine, image, `config`, `args`) on the
//! same instance type, each with a first repetition measured. Both baselines are the client's
//! first reading of its empty engine, taken the same way. Pure.

use crate::crd::{ClusterFixedCostStatus, EngineSpec, MemoryBenchmarkSpec, MemoryBenchmarkStatus};

/// Whether `standalone` runs the build `cluster` runs, in standalone mode.
fn same_build_standalone(cluster: &EngineSpec, standalone: &EngineSpec) -> bool {
    !standalone.is_cluster()
        && standalone.engine == cluster.engine
        && standalone.image() == cluster.image()
        && standalone.config == cluster.config
        && standalone.args == cluster.args
}

/// Sets each cluster-mode run's fixed cost against its standalone twin (see the module
/// documentation), and clears it where there is none.
pub(super) fn cluster_fixed_costs(status: &mut MemoryBenchmarkStatus, spec: &MemoryBenchmarkSpec) {
    let baseline = |status: &MemoryBenchmarkStatus, run: usize| {
        status.engines[run]
            .repetitions
            .first()
            .map(|r| r.baseline_used_memory)
    };
    for run in 0..status.engines.len() {
        let engine = spec.engine_of_run(run);
        let cost = engine.is_cluster().then(|| {
            let instance_type = spec.instance_type_of_run(run);
            let twin = (0..status.engines.len()).find(|&other| {
                spec.instance_type_of_run(other) == instance_type
                    && same_build_standalone(engine, spec.engine_of_run(other))
                    && baseline(status, other).is_some()
            })?;
            let nodes = engine.shards.unwrap_or(1).max(1);
            let cluster = (baseline(status, run)? as f64 / nodes as f64).round() as u64;
            let standalone = baseline(status, twin)?;
            Some(ClusterFixedCostStatus {
                standalone_entry: status.engines[twin].name.clone(),
                standalone_used_memory: standalone,
                cluster_used_memory: cluster,
                fixed_cost_bytes: cluster as i64 - standalone as i64,
                shards: engine.shards,
            })
        });
        status.engines[run].cluster_fixed_cost = cost.flatten();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{EngineStatus, RepetitionStatus};
    use crate::validation::spec_file::parse_specs;

    fn measured(name: &str, baseline: Option<u64>) -> EngineStatus {
        EngineStatus {
            name: name.into(),
            repetitions: baseline
                .map(|b| RepetitionStatus {
                    baseline_used_memory: b,
                    ..Default::default()
                })
                .into_iter()
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn a_cluster_run_beside_a_standalone_run_of_the_same_build_shows_its_fixed_cost_per_node() {
        let spec = parse_specs(
            "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {name: cost}\nspec:\n  instanceType: r7i.4xlarge\n  engines:\n    - {engine: valkey, version: \"9.1.2\", name: alone}\n    - {engine: valkey, version: \"9.1.2\", name: one-node, clusterMode: true}\n    - {engine: valkey, version: \"9.1.2\", name: three, shards: 3}\n    - {engine: valkey, version: \"9.1.2\", name: tuned, clusterMode: true, config: {hash-max-listpack-entries: \"8\"}}\n    - {engine: redis, version: \"7.4.1\", clusterMode: true}\n  workload: {strings: {keys: 1000}}\n",
        )
        .unwrap()
        .remove(0)
        .spec;
        let mut status = MemoryBenchmarkStatus {
            engines: vec![
                measured("alone", Some(900_000)),
                measured("one-node", Some(2_100_000)),
                measured("three", Some(3 * 1_500_000 + 1)),
                measured("tuned", Some(2_000_000)),
                measured("redis-7.4.1", Some(2_000_000)),
            ],
            ..Default::default()
        };
        cluster_fixed_costs(&mut status, &spec);
        let costs: Vec<Option<ClusterFixedCostStatus>> = status
            .engines
            .iter()
            .map(|e| e.cluster_fixed_cost.clone())
            .collect();
        let against_alone = |cluster: u64, fixed: i64, shards: Option<u32>| {
            Some(ClusterFixedCostStatus {
                standalone_entry: "alone".into(),
                standalone_used_memory: 900_000,
                cluster_used_memory: cluster,
                fixed_cost_bytes: fixed,
                shards,
            })
        };
        assert_eq!(
            costs,
            [
                None,
                against_alone(2_100_000, 1_200_000, None),
                against_alone(1_500_000, 600_000, Some(3)),
                // Another config is another build's figure: no twin.
                None,
                // No standalone Redis in the spec.
                None,
            ]
        );
        // Until the standalone run has a baseline, there is nothing to compare with.
        status.engines[0].repetitions.clear();
        cluster_fixed_costs(&mut status, &spec);
        assert!(
            status
                .engines
                .iter()
                .all(|e| e.cluster_fixed_cost.is_none())
        );
    }
}
