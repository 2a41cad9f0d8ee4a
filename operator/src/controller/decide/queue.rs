//! Benchmarks that want the same node pool take turns instead of failing each other.
//!
//! Every engine pod keeps a node to itself (a required pod anti-affinity against every membench
//! engine), so when each node of a pool runs an engine, the next benchmark's engine pod cannot
//! be placed. The scheduler says why: its message counts nodes that "didn't match pod
//! anti-affinity rules". That benchmark waits for a free node, with no deadline but its own
//! `timeoutSeconds`. Only a pod that fits no node for other reasons (no node of the type, taints,
//! too little memory) runs into the scheduling deadline.
//!
//! The queue is first come, first served by creation time among the benchmarks the operator
//! sees: a benchmark creates its next engine pod only when no benchmark of the same pool that
//! was created before it waits for a free node, so a later benchmark cannot overtake an earlier
//! one, however often nodes change hands. The scheduler still decides which node; the queue only
//! decides whose pod exists. Pure: reads the benchmarks as the controller's cache holds them.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::ResourceExt;

use crate::crd::{Arch, ConditionReason, EngineState, MemoryBenchmark};

use super::observation::is_terminal;

/// The nodes a benchmark's run can use: its instance type, arch and extra node labels. A
/// benchmark of several instance types (`spec.instanceTypes`) wants one pool per type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodePool {
    pub instance_type: String,
    pub arch: Option<Arch>,
    pub node_selector: BTreeMap<String, String>,
}

impl NodePool {
    pub fn of(benchmark: &MemoryBenchmark, instance_type: &str) -> NodePool {
        let spec = &benchmark.spec;
        NodePool {
            instance_type: instance_type.to_string(),
            arch: spec.arch,
            node_selector: spec
                .placement
                .as_ref()
                .map(|p| p.node_selector.clone())
                .unwrap_or_default(),
        }
    }
}

/// The scheduler's words for a node that another engine keeps to itself: the new pod's own
/// anti-affinity, or the running engine's.
const BUSY_NODE_REASONS: [&str; 2] = [
    "didn't match pod anti-affinity rules",
    "didn't satisfy existing pods anti-affinity rules",
];

/// Whether the scheduler's message says that nodes of the pool exist but are taken by other
/// engines (as opposed to no node of the type at all, or none with room).
pub fn nodes_busy(scheduler_message: &str) -> bool {
    BUSY_NODE_REASONS
        .iter()
        .any(|r| scheduler_message.contains(r))
}

/// How many nodes the scheduler's message counts as taken by another engine ("2 node(s)
/// didn't match pod anti-affinity rules"), in its verdict on the nodes (not its note on
/// preemption). The scheduler gives each node the first filter it fails, so the nodes of the
/// pool that could take the engine but for the engine already there are these.
pub fn busy_nodes(scheduler_message: &str) -> Option<usize> {
    let verdict = scheduler_message
        .split("preemption:")
        .next()
        .unwrap_or_default();
    let counts: Vec<usize> = verdict
        .split([',', ':', '.'])
        .filter(|part| BUSY_NODE_REASONS.iter().any(|r| part.contains(r)))
        .filter_map(|part| part.split_whitespace().next()?.parse().ok())
        .collect();
    (!counts.is_empty()).then(|| counts.iter().sum())
}

/// Whether a benchmark's status says one of its runs waits for a free node of `pool`: the
/// nodes are taken by other engines, or by its own (more `parallelism` than nodes, or more
/// shards).
pub fn waits_for_free_node(benchmark: &MemoryBenchmark, pool: &NodePool) -> bool {
    let Some(status) = &benchmark.status else {
        return false;
    };
    benchmark.metadata.deletion_timestamp.is_none()
        && status.engines.iter().enumerate().any(|(run, engine)| {
            !is_terminal(engine)
                && engine.state == EngineState::Pending
                && matches!(
                    engine.reason,
                    Some(
                        ConditionReason::WaitingForFreeNode
                            | ConditionReason::ParallelismAboveNodes
                            | ConditionReason::ShardsAboveNodes
                    )
                )
                && NodePool::of(benchmark, &benchmark.spec.instance_type_of_run(run)) == *pool
        })
}

/// First come, first served: creation time, then namespace and name to break ties.
fn queue_order(b: &MemoryBenchmark) -> (Option<k8s_openapi::jiff::Timestamp>, String, String) {
    (
        b.metadata.creation_timestamp.as_ref().map(|t| t.0),
        b.namespace().unwrap_or_default(),
        b.name_any(),
    )
}

/// How many benchmarks wait for a free node of `benchmark`'s pool of `instance_type` and came
/// before it.
pub fn benchmarks_ahead(
    benchmark: &MemoryBenchmark,
    instance_type: &str,
    others: &[Arc<MemoryBenchmark>],
) -> usize {
    let pool = NodePool::of(benchmark, instance_type);
    let mine = queue_order(benchmark);
    others
        .iter()
        .filter(|other| other.uid() != benchmark.uid())
        .filter(|other| waits_for_free_node(other, &pool))
        .filter(|other| queue_order(other) < mine)
        .count()
}

/// "waiting for a free r8g.4xlarge node, 2 benchmarks ahead".
pub fn waiting_message(instance_type: &str, ahead: usize) -> String {
    let benchmarks = if ahead == 1 {
        "benchmark"
    } else {
        "benchmarks"
    };
    format!("waiting for a free {instance_type} node, {ahead} {benchmarks} ahead")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{EngineStatus, MemoryBenchmarkStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    fn benchmark(name: &str, created: i64, instance_type: &str, waiting: bool) -> MemoryBenchmark {
        let mut b: MemoryBenchmark = serde_saphyr::from_str(&format!(
            "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {{name: {name}, namespace: bench}}\nspec:\n  instanceType: {instance_type}\n  engines: [{{engine: redis, version: \"7.0.15\"}}]\n  workload: {{sortedSet: {{members: 1000}}}}\n"
        ))
        .unwrap();
        b.metadata.uid = Some(format!("uid-{name}"));
        b.metadata.creation_timestamp = Some(Time(
            Timestamp::from_second(1_800_000_000 + created).unwrap(),
        ));
        b.status = Some(MemoryBenchmarkStatus {
            engines: vec![EngineStatus {
                state: EngineState::Pending,
                reason: Some(if waiting {
                    ConditionReason::WaitingForFreeNode
                } else {
                    ConditionReason::WaitingForNode
                }),
                ..Default::default()
            }],
            ..Default::default()
        });
        b
    }

    #[test]
    fn only_earlier_benchmarks_waiting_for_the_same_pool_are_ahead() {
        let me = benchmark("me", 10, "r8g.4xlarge", false);
        let others: Vec<Arc<MemoryBenchmark>> = [
            benchmark("earlier", 1, "r8g.4xlarge", true),
            benchmark("earlier-too", 5, "r8g.4xlarge", true),
            benchmark("later", 20, "r8g.4xlarge", true),
            benchmark("other-pool", 1, "r7i.4xlarge", true),
            benchmark("not-waiting", 1, "r8g.4xlarge", false),
            me.clone(),
        ]
        .into_iter()
        .map(Arc::new)
        .collect();
        assert_eq!(benchmarks_ahead(&me, "r8g.4xlarge", &others), 2);
    }

    #[test]
    fn the_same_creation_second_is_ordered_by_name() {
        let a = benchmark("a", 1, "r8g.4xlarge", true);
        let b = benchmark("b", 1, "r8g.4xlarge", true);
        let both = [Arc::new(a.clone()), Arc::new(b.clone())];
        assert_eq!(benchmarks_ahead(&a, "r8g.4xlarge", &both), 0);
        assert_eq!(benchmarks_ahead(&b, "r8g.4xlarge", &both), 1);
    }

    #[test]
    fn a_node_taken_by_another_engine_is_busy_but_a_missing_node_is_not() {
        assert!(nodes_busy(
            "0/4 nodes are available: 2 node(s) didn't match Pod's node affinity/selector, 2 node(s) didn't match pod anti-affinity rules. preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."
        ));
        assert!(nodes_busy(
            "0/4 nodes are available: 1 node(s) didn't satisfy existing pods anti-affinity rules, 3 node(s) didn't match Pod's node affinity/selector."
        ));
        assert!(!nodes_busy(
            "0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector."
        ));
        assert!(!nodes_busy(
            "0/4 nodes are available: 2 Insufficient memory, 2 node(s) didn't match Pod's node affinity/selector."
        ));
    }

    #[test]
    fn the_busy_nodes_are_counted_from_the_verdict_not_from_the_preemption_note() {
        assert_eq!(
            busy_nodes(
                "0/6 nodes are available: 2 node(s) didn't match Pod's node affinity/selector, 3 node(s) didn't match pod anti-affinity rules, 1 node(s) didn't satisfy existing pods anti-affinity rules. preemption: 0/6 nodes are available: 6 Preemption is not helpful for scheduling."
            ),
            Some(4)
        );
        assert_eq!(
            busy_nodes(
                "0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector."
            ),
            None
        );
    }

    #[test]
    fn a_run_waiting_on_its_own_parallelism_holds_its_pool_and_only_that_pool() {
        let mut both = benchmark("both", 1, "r8g.4xlarge", false);
        both.spec.instance_type = String::new();
        both.spec.instance_types = vec!["r8g.4xlarge".into(), "r7i.4xlarge".into()];
        let status = both.status.as_mut().unwrap();
        status.engines = vec![
            EngineStatus {
                state: EngineState::Running,
                instance_type: Some("r8g.4xlarge".into()),
                ..Default::default()
            },
            EngineStatus {
                state: EngineState::Pending,
                reason: Some(ConditionReason::ParallelismAboveNodes),
                instance_type: Some("r7i.4xlarge".into()),
                ..Default::default()
            },
        ];
        let later = benchmark("later", 5, "r7i.4xlarge", false);
        let others = [Arc::new(both.clone()), Arc::new(later.clone())];
        assert_eq!(benchmarks_ahead(&later, "r7i.4xlarge", &others), 1);
        assert_eq!(benchmarks_ahead(&later, "r8g.4xlarge", &others), 0);
    }

    #[test]
    fn the_waiting_message_counts_the_benchmarks_ahead() {
        assert_eq!(
            waiting_message("r8g.4xlarge", 1),
            "waiting for a free r8g.4xlarge node, 1 benchmark ahead"
        );
        assert_eq!(
            waiting_message("r8g.4xlarge", 0),
            "waiting for a free r8g.4xlarge node, 0 benchmarks ahead"
        );
    }
}
