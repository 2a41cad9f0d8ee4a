//! The result series: one gauge family per figure of an engine entry, and the figures a
//! `MemoryBenchmark`'s status gives them.

use prometheus::{GaugeVec, Opts};

use crate::crd::{EngineCapacityStatus, EngineStatus};

/// The labels of every result series, in this order.
pub const RESULT_LABELS: [&str; 8] = [
    "namespace",
    "benchmark",
    "entry",
    "engine",
    "version",
    "instance_type",
    "arch",
    "workload",
];

/// One gauge family per result figure, all with `RESULT_LABELS`.
#[derive(Clone)]
pub(super) struct ResultGauges {
    memory_per_item_median: GaugeVec,
    memory_per_item_min: GaugeVec,
    memory_per_item_max: GaugeVec,
    used_memory: GaugeVec,
    used_memory_rss: GaugeVec,
    used_memory_dataset: GaugeVec,
    baseline_used_memory: GaugeVec,
    items: GaugeVec,
    items_per_second_median: GaugeVec,
    items_per_second_min: GaugeVec,
    items_per_second_max: GaugeVec,
    commands_per_second_median: GaugeVec,
    commands_per_second_min: GaugeVec,
    commands_per_second_max: GaugeVec,
    fragmentation: GaugeVec,
    repetitions_completed: GaugeVec,
    unstable: GaugeVec,
    capacity_projected_used_memory: GaugeVec,
    capacity_required_node_memory: GaugeVec,
    capacity_node_fill: GaugeVec,
    capacity_monthly_usd: GaugeVec,
    recommended_maxmemory: GaugeVec,
    recommended_memory_limit: GaugeVec,
    recommended_memory_request: GaugeVec,
    recommended_reserve: GaugeVec,
    churned_rss: GaugeVec,
    defragmented_rss: GaugeVec,
    eviction_overshoot: GaugeVec,
    eviction_evicted_keys: GaugeVec,
    snapshot_peak_ratio: GaugeVec,
    snapshot_cow: GaugeVec,
    replica_peak_ratio: GaugeVec,
    replica_cow: GaugeVec,
    replica_used_memory: GaugeVec,
}

impl ResultGauges {
    /// Every result gauge family, unregistered.
    pub(super) fn new() -> ResultGauges {
        let result = |name: &str, help: &str| {
            GaugeVec::new(Opts::new(name, help), &RESULT_LABELS).expect("valid metric")
        };
        ResultGauges {
            memory_per_item_median: result(
                "membench_memory_per_item_median_bytes",
                "Median over the repetitions of (used_memory after the load - used_memory before) / items.",
            ),
            memory_per_item_min: result(
                "membench_memory_per_item_min_bytes",
                "Lowest bytes per item over the repetitions.",
            ),
            memory_per_item_max: result(
                "membench_memory_per_item_max_bytes",
                "Highest bytes per item over the repetitions.",
            ),
            used_memory: result(
                "membench_used_memory_bytes",
                "Median used_memory right after the load.",
            ),
            used_memory_rss: result(
                "membench_used_memory_rss_bytes",
                "Median used_memory_rss right after the load.",
            ),
            used_memory_dataset: result(
                "membench_used_memory_dataset_bytes",
                "Median used_memory_dataset right after the load, when the engine reports it.",
            ),
            baseline_used_memory: result(
                "membench_baseline_used_memory_bytes",
                "Median used_memory of the empty engine before the load.",
            ),
            items: result(
                "membench_items",
                "Items verified in the engine after each load.",
            ),
            items_per_second_median: result(
                "membench_load_median_items_per_second",
                "Median over the repetitions of items stored per second (items / load seconds).",
            ),
            items_per_second_min: result(
                "membench_load_min_items_per_second",
                "Lowest items stored per second over the repetitions.",
            ),
            items_per_second_max: result(
                "membench_load_max_items_per_second",
                "Highest items stored per second over the repetitions.",
            ),
            commands_per_second_median: result(
                "membench_load_median_commands_per_second",
                "Median over the repetitions of commands sent per second during the load (ZADD, SET or HSET).",
            ),
            commands_per_second_min: result(
                "membench_load_min_commands_per_second",
                "Lowest commands sent per second over the repetitions.",
            ),
            commands_per_second_max: result(
                "membench_load_max_commands_per_second",
                "Highest commands sent per second over the repetitions.",
            ),
            fragmentation: result(
                "membench_mem_fragmentation_ratio",
                "Median mem_fragmentation_ratio (used_memory_rss / used_memory) after the load, when the engine reports it.",
            ),
            repetitions_completed: result(
                "membench_repetitions_completed",
                "Repetitions measured so far for this engine.",
            ),
            unstable: result(
                "membench_result_unstable",
                "1 when the repetitions disagree more than the stability thresholds allow.",
            ),
            capacity_projected_used_memory: result(
                "membench_capacity_projected_used_memory_bytes",
                "used_memory projected at spec.capacity.items from the run's growth curve.",
            ),
            capacity_required_node_memory: result(
                "membench_capacity_required_node_memory_bytes",
                "The memory a node needs at spec.capacity.items: projected RSS plus headroom, plus kube-reserved and the eviction threshold of the smallest instance type that holds it.",
            ),
            capacity_node_fill: result(
                "membench_capacity_node_fill_ratio",
                "required node memory / the memory of the smallest instance type that holds it (status.capacity names the type).",
            ),
            capacity_monthly_usd: result(
                "membench_capacity_monthly_usd",
                "The monthly cost of that instance type at the prices given (absent without prices).",
            ),
            recommended_maxmemory: result(
                "membench_recommended_maxmemory_bytes",
                "The maxmemory to deploy at spec.capacity.items: used_memory projected there.",
            ),
            recommended_memory_limit: result(
                "membench_recommended_memory_limit_bytes",
                "The engine container's memory limit to deploy at spec.capacity.items: the sum of its terms (status.capacity.engines[].recommended.terms).",
            ),
            recommended_memory_request: result(
                "membench_recommended_memory_request_bytes",
                "The engine container's memory request to deploy at spec.capacity.items: its empty RSS plus its data's RSS.",
            ),
            recommended_reserve: result(
                "membench_recommended_reserve_ratio",
                "(memory limit - maxmemory) / memory limit of the recommended settings: comparable with ElastiCache's reserved-memory-percent / 100.",
            ),
            churned_rss: result(
                "membench_churn_used_memory_rss_bytes",
                "Median used_memory_rss after the last round of spec.churn's deletes and overwrites.",
            ),
            defragmented_rss: result(
                "membench_defrag_used_memory_rss_bytes",
                "Median used_memory_rss at the end of active defragmentation after spec.churn (spec.churn.defrag).",
            ),
            eviction_overshoot: result(
                "membench_eviction_overshoot_bytes",
                "Median over the repetitions of spec.eviction's peak used_memory less maxmemory (negative: it stayed under).",
            ),
            eviction_evicted_keys: result(
                "membench_eviction_evicted_keys",
                "Median keys evicted during spec.eviction's load past maxmemory.",
            ),
            snapshot_peak_ratio: result(
                "membench_snapshot_peak_ratio",
                "Median over the repetitions of the engine's memory at its highest during spec.peak.snapshot's save (its process tree, or its container's memory cgroup read from the kubelet), over the same just before it.",
            ),
            snapshot_cow: result(
                "membench_snapshot_cow_bytes",
                "Median over the repetitions of what the engine says its fork copied during spec.peak.snapshot's save (rdb_last_cow_size; absent for an engine that does not fork).",
            ),
            replica_peak_ratio: result(
                "membench_replica_sync_peak_ratio",
                "Median over the repetitions of the primary's memory at its highest during spec.peak.replica's full sync (its process tree, or its container's memory cgroup read from the kubelet), over the same just before it.",
            ),
            replica_cow: result(
                "membench_replica_sync_cow_bytes",
                "Median over the repetitions of what the primary says its fork copied while it sent spec.peak.replica's full sync (rdb_last_cow_size; absent for an engine that does not fork).",
            ),
            replica_used_memory: result(
                "membench_replica_used_memory_bytes",
                "Median over the repetitions of the replica's used_memory once in sync with the primary (spec.peak.replica).",
            ),
        }
    }

    pub(super) fn all(&self) -> [&GaugeVec; 34] {
        [
            &self.memory_per_item_median,
            &self.memory_per_item_min,
            &self.memory_per_item_max,
            &self.used_memory,
            &self.used_memory_rss,
            &self.used_memory_dataset,
            &self.baseline_used_memory,
            &self.items,
            &self.items_per_second_median,
            &self.items_per_second_min,
            &self.items_per_second_max,
            &self.commands_per_second_median,
            &self.commands_per_second_min,
            &self.commands_per_second_max,
            &self.fragmentation,
            &self.repetitions_completed,
            &self.unstable,
            &self.capacity_projected_used_memory,
            &self.capacity_required_node_memory,
            &self.capacity_node_fill,
            &self.capacity_monthly_usd,
            &self.recommended_maxmemory,
            &self.recommended_memory_limit,
            &self.recommended_memory_request,
            &self.recommended_reserve,
            &self.churned_rss,
            &self.defragmented_rss,
            &self.eviction_overshoot,
            &self.eviction_evicted_keys,
            &self.snapshot_peak_ratio,
            &self.snapshot_cow,
            &self.replica_peak_ratio,
            &self.replica_cow,
            &self.replica_used_memory,
        ]
    }

    /// Sets the series of one engine entry (`labels` in `RESULT_LABELS` order) to its figures,
    /// removing those whose figure is not known.
    pub(super) fn set(&self, labels: &[String], figures: &ResultValues) {
        let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
        let gauges = self;
        let set = |gauge: &GaugeVec, value: Option<f64>| match value {
            Some(value) => gauge.with_label_values(&labels).set(value),
            None => {
                let _ = gauge.remove_label_values(&labels);
            }
        };
        set(&gauges.repetitions_completed, Some(figures.repetitions));
        set(&gauges.memory_per_item_median, figures.memory_per_item[0]);
        set(&gauges.memory_per_item_min, figures.memory_per_item[1]);
        set(&gauges.memory_per_item_max, figures.memory_per_item[2]);
        set(&gauges.items_per_second_median, figures.items_per_second[0]);
        set(&gauges.items_per_second_min, figures.items_per_second[1]);
        set(&gauges.items_per_second_max, figures.items_per_second[2]);
        set(
            &gauges.commands_per_second_median,
            figures.commands_per_second[0],
        );
        set(
            &gauges.commands_per_second_min,
            figures.commands_per_second[1],
        );
        set(
            &gauges.commands_per_second_max,
            figures.commands_per_second[2],
        );
        set(&gauges.used_memory, figures.used_memory);
        set(&gauges.used_memory_rss, figures.used_memory_rss);
        set(&gauges.used_memory_dataset, figures.used_memory_dataset);
        set(&gauges.baseline_used_memory, figures.baseline_used_memory);
        set(&gauges.items, figures.items);
        set(&gauges.fragmentation, figures.fragmentation);
        set(&gauges.unstable, figures.unstable);
        set(&gauges.capacity_projected_used_memory, figures.capacity[0]);
        set(&gauges.capacity_required_node_memory, figures.capacity[1]);
        set(&gauges.capacity_node_fill, figures.capacity[2]);
        set(&gauges.capacity_monthly_usd, figures.capacity[3]);
        set(&gauges.recommended_maxmemory, figures.recommended[0]);
        set(&gauges.recommended_memory_limit, figures.recommended[1]);
        set(&gauges.recommended_memory_request, figures.recommended[2]);
        set(&gauges.recommended_reserve, figures.recommended[3]);
        set(&gauges.churned_rss, figures.churn[0]);
        set(&gauges.defragmented_rss, figures.churn[1]);
        set(&gauges.eviction_overshoot, figures.eviction[0]);
        set(&gauges.eviction_evicted_keys, figures.eviction[1]);
        set(&gauges.snapshot_peak_ratio, figures.snapshot_ratio);
        set(&gauges.snapshot_cow, figures.snapshot_cow);
        set(&gauges.replica_peak_ratio, figures.replica[0]);
        set(&gauges.replica_cow, figures.replica[1]);
        set(&gauges.replica_used_memory, figures.replica[2]);
    }
}

/// The figures of one engine entry; `None` when the status does not have them yet.
pub(super) struct ResultValues {
    repetitions: f64,
    /// Median, min, max.
    memory_per_item: [Option<f64>; 3],
    /// Median, min, max.
    items_per_second: [Option<f64>; 3],
    /// Median, min, max.
    commands_per_second: [Option<f64>; 3],
    used_memory: Option<f64>,
    used_memory_rss: Option<f64>,
    used_memory_dataset: Option<f64>,
    baseline_used_memory: Option<f64>,
    items: Option<f64>,
    fragmentation: Option<f64>,
    unstable: Option<f64>,
    /// Projected used_memory, required node memory, node fill (0-1), monthly USD.
    capacity: [Option<f64>; 4],
    /// The recommended maxmemory, memory limit and request, and reserve (0-1).
    recommended: [Option<f64>; 4],
    /// RSS after the churn's last round and after defragmentation (medians).
    churn: [Option<f64>; 2],
    /// The eviction's overshoot and evicted keys (medians).
    eviction: [Option<f64>; 2],
    /// The snapshot's peak over its before (median).
    snapshot_ratio: Option<f64>,
    /// What the snapshot's fork copied (median).
    snapshot_cow: Option<f64>,
    /// The replica's full sync: the primary's peak over its before, what its fork copied, the
    /// replica's used_memory once in sync (medians).
    replica: [Option<f64>; 3],
}

impl ResultValues {
    pub(super) fn of(
        engine: &EngineStatus,
        capacity: Option<&EngineCapacityStatus>,
    ) -> ResultValues {
        let repetitions = &engine.repetitions;
        let median_of = |values: Vec<f64>| median(values);
        let summary = engine.summary.as_ref();
        ResultValues {
            repetitions: repetitions.len() as f64,
            memory_per_item: match summary {
                Some(s) => [
                    Some(s.bytes_per_item.median),
                    Some(s.bytes_per_item.min),
                    Some(s.bytes_per_item.max),
                ],
                None => [None; 3],
            },
            items_per_second: match summary {
                Some(s) => [
                    Some(s.items_per_sec.median),
                    Some(s.items_per_sec.min),
                    Some(s.items_per_sec.max),
                ],
                None => [None; 3],
            },
            commands_per_second: match summary {
                Some(s) => [
                    Some(s.commands_per_sec.median),
                    Some(s.commands_per_sec.min),
                    Some(s.commands_per_sec.max),
                ],
                None => [None; 3],
            },
            used_memory: summary.map(|s| s.used_memory as f64),
            items: summary.map(|s| s.items as f64),
            unstable: summary.map(|s| if s.unstable { 1.0 } else { 0.0 }),
            capacity: match capacity {
                Some(c) => [
                    Some(c.projected_used_memory as f64),
                    Some(c.required_node_memory as f64),
                    c.fill_percent.map(|f| f / 100.0),
                    c.monthly_usd,
                ],
                None => [None; 4],
            },
            recommended: match capacity.and_then(|c| c.recommended.as_ref()) {
                Some(r) => [
                    Some(r.maxmemory_bytes as f64),
                    Some(r.memory_limit_bytes as f64),
                    Some(r.memory_request_bytes as f64),
                    Some(r.reserve_percent / 100.0),
                ],
                None => [None; 4],
            },
            used_memory_rss: median_of(
                repetitions
                    .iter()
                    .map(|r| r.used_memory_rss as f64)
                    .collect(),
            ),
            used_memory_dataset: median_of(
                repetitions
                    .iter()
                    .filter_map(|r| r.used_memory_dataset.map(|d| d as f64))
                    .collect(),
            ),
            baseline_used_memory: median_of(
                repetitions
                    .iter()
                    .map(|r| r.baseline_used_memory as f64)
                    .collect(),
            ),
            fragmentation: median_of(
                repetitions
                    .iter()
                    .filter_map(|r| r.mem_fragmentation_ratio)
                    .collect(),
            ),
            churn: [
                median_of(
                    repetitions
                        .iter()
                        .filter_map(|r| r.churn.as_ref()?.churned_rss())
                        .map(|b| b as f64)
                        .collect(),
                ),
                median_of(
                    repetitions
                        .iter()
                        .filter_map(|r| r.churn.as_ref()?.defragmented_rss())
                        .map(|b| b as f64)
                        .collect(),
                ),
            ],
            // The summary's covers every repetition, the listed ones may be fewer.
            snapshot_ratio: summary
                .and_then(|s| Some(s.peak.as_ref()?.snapshot.as_ref()?.ratio))
                .or_else(|| {
                    median_of(
                        repetitions
                            .iter()
                            .filter_map(|r| r.peak.as_ref()?.snapshot.as_ref()?.ratio)
                            .collect(),
                    )
                }),
            snapshot_cow: median_of(
                repetitions
                    .iter()
                    .filter_map(|r| r.peak.as_ref()?.snapshot.as_ref()?.cow_bytes)
                    .map(|b| b as f64)
                    .collect(),
            ),
            replica: [
                summary
                    .and_then(|s| Some(s.peak.as_ref()?.replica.as_ref()?.ratio))
                    .or_else(|| {
                        median_of(
                            repetitions
                                .iter()
                                .filter_map(|r| r.peak.as_ref()?.replica.as_ref()?.primary.ratio)
                                .collect(),
                        )
                    }),
                median_of(
                    repetitions
                        .iter()
                        .filter_map(|r| r.peak.as_ref()?.replica.as_ref()?.primary.cow_bytes)
                        .map(|b| b as f64)
                        .collect(),
                ),
                median_of(
                    repetitions
                        .iter()
                        .filter_map(|r| {
                            Some(r.peak.as_ref()?.replica.as_ref()?.replica_used_memory)
                        })
                        .map(|b| b as f64)
                        .collect(),
                ),
            ],
            eviction: [
                median_of(
                    repetitions
                        .iter()
                        .filter_map(|r| Some(r.eviction.as_ref()?.overshoot_bytes as f64))
                        .collect(),
                ),
                median_of(
                    repetitions
                        .iter()
                        .filter_map(|r| Some(r.eviction.as_ref()?.evicted_keys as f64))
                        .collect(),
                ),
            ],
        }
    }
}

/// The median of some figures (the mean of the middle two for an even count); `None` for none.
fn median(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    Some(if values.len().is_multiple_of(2) {
        (values[middle - 1] + values[middle]) / 2.0
    } else {
        values[middle]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_an_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(vec![]), None);
    }
}
