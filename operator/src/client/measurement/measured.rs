//! What a measurement reports: each verified repetition (with each shard's readings, when the
//! engine is a sharded cluster), what is known of one that failed, the summary over the
//! repetitions, and the report of one engine that holds them. `measure` fills them in.

use serde::{Deserialize, Serialize};

use crate::client::connection::engine::EngineInfo;
use crate::client::phases::churn::ChurnReport;
use crate::client::workloads::ttl::Ttl;
use crate::client::workloads::type_memory::{self, TypeMemory, TypeSummary};
use crate::client::workloads::workload::Workload;
use crate::error::BenchError;
use crate::stats::{Spread, StabilityThresholds};

/// The workload as reported: its parameters, a description and what one item is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WorkloadReport {
    #[serde(flatten)]
    pub workload: Workload,
    pub description: String,
    /// What one item is: `member`, `key` or `record`.
    pub item: String,
}

impl From<&Workload> for WorkloadReport {
    fn from(workload: &Workload) -> Self {
        Self {
            workload: workload.clone(),
            description: workload.describe(),
            item: workload.item_noun().to_string(),
        }
    }
}

/// used_memory read during a load, for a growth curve.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MemorySample {
    pub items: u64,
    pub used_memory: u64,
}

/// A second memory reading after `settle_seconds`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SettledMemory {
    pub after_seconds: u32,
    pub used_memory: u64,
    pub used_memory_rss: u64,
    pub bytes_per_item: f64,
}

/// One verified repetition.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RepetitionResult {
    /// Counted from 1.
    pub repetition: u32,
    pub baseline_used_memory: u64,
    pub baseline_used_memory_rss: u64,
    pub used_memory: u64,
    pub used_memory_rss: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_memory_dataset: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_fragmentation_ratio: Option<f64>,
    /// Items verified in the engine (ZCARD, DBSIZE).
    pub items: u64,
    pub bytes_per_item: f64,
    /// Commands sent per second during the load (ZADDs, SETs or HSETs).
    pub commands_per_sec: f64,
    /// Verified items per second: `items` / `seconds`. Below `commands_per_sec` for records
    /// stored as strings (one SET per field) and for random keys (SETs that repeat a key store
    /// nothing new).
    pub items_per_sec: f64,
    pub commands: u64,
    pub seconds: f64,
    /// `OBJECT ENCODING` of the sorted set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<String>,
    /// For random keys: the expected number of distinct keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_unique_items: Option<f64>,
    /// With a TTL: the keys that hold an expiry (`INFO keyspace` `expires=`), verified
    /// against what the load gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys_with_ttl: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled: Option<SettledMemory>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<MemorySample>,
    /// A sharded cluster's readings, shard by shard (empty for one engine): the figures above
    /// are their sums.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shards: Vec<ShardReading>,
    /// A profile's rebuild: each type's keys and the used_memory they added
    /// (`client::workloads::type_memory`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_type: Vec<TypeMemory>,
    /// The snapshot saved under writes after the readings above (`client::phases::snapshot`), when
    /// the run asked for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak: Option<PeakReport>,
    /// Deletes and overwrites after the readings above, and defragmentation
    /// (`client::phases::churn`), when the run asked for them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub churn: Option<ChurnReport>,
    /// The load past maxmemory after the phases above (`client::phases::eviction`), when asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction: Option<crate::client::phases::eviction::EvictionReport>,
}

/// A repetition's peak phases.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PeakReport {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<crate::client::phases::peak::SnapshotReport>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<crate::client::phases::replica::ReplicaReport>,
}

/// What is known of a repetition that did not finish. No bytes per item: the count is not
/// verified.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FailedRepetition {
    pub repetition: u32,
    /// Commands sent before the load stopped.
    pub commands_sent: u64,
    pub baseline_used_memory: Option<u64>,
    /// used_memory when the load stopped, if the engine still answered.
    pub used_memory: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<MemorySample>,
}

/// Median, min and max over the verified repetitions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Summary {
    /// Items per repetition (the median, should repetitions differ).
    pub items: u64,
    pub repetitions: u32,
    pub used_memory: Spread,
    pub bytes_per_item: Spread,
    /// Read under its former name too, so that an operator reads the result of a client from
    /// before the rename.
    #[serde(alias = "ops_per_sec")]
    pub commands_per_sec: Spread,
    /// Always present in reports. Left out of a client's termination message (`None`), where
    /// the reader derives it from `commands_per_sec`: every repetition stores the same items
    /// with the same commands, so the two differ by a constant factor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items_per_sec: Option<Spread>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled_bytes_per_item: Option<Spread>,
    /// A profile's rebuild: the median bytes per key of each type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_type: Vec<TypeSummary>,
    /// True when the repetitions disagree more than the thresholds allow.
    pub unstable: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unstable_reason: Option<String>,
    /// How the data spread over the shards of a sharded cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shards: Option<ShardSpread>,
    /// The peak phases over the repetitions that measured them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak: Option<PeakSummary>,
}

/// The peak phases over the repetitions: what the engine's machine held at the peak against
/// just before it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PeakSummary {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<PeakRatio>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<PeakRatio>,
}

impl PeakSummary {
    /// `None` when no repetition measured a peak's memory: a client that cannot see the
    /// engine's processes (`source: engine-only`) reports the engine's own figures only.
    fn of(repetitions: &[RepetitionResult]) -> Option<Self> {
        let snapshot = PeakRatio::of(
            repetitions
                .iter()
                .filter_map(|r| r.peak.as_ref()?.snapshot.as_ref()?.ratio),
        );
        let replica = PeakRatio::of(
            repetitions
                .iter()
                .filter_map(|r| r.peak.as_ref()?.replica.as_ref()?.primary.ratio),
        );
        (snapshot.is_some() || replica.is_some()).then_some(Self { snapshot, replica })
    }
}

/// A peak phase over the repetitions: `peak_bytes / before_bytes`, its median (`ratio`), its
/// lowest and highest, and how many repetitions measured it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PeakRatio {
    pub ratio: f64,
    pub min: f64,
    pub max: f64,
    pub repetitions: u32,
}

impl From<&PeakSummary> for crate::crd::PeakSummaryStatus {
    fn from(p: &PeakSummary) -> Self {
        Self {
            snapshot: p.snapshot.as_ref().map(Into::into),
            replica: p.replica.as_ref().map(Into::into),
        }
    }
}

impl From<&PeakRatio> for crate::crd::PeakRatioStatus {
    fn from(r: &PeakRatio) -> Self {
        Self {
            ratio: r.ratio,
            min: r.min,
            max: r.max,
            repetitions: r.repetitions,
        }
    }
}

impl PeakRatio {
    fn of(ratios: impl Iterator<Item = f64>) -> Option<Self> {
        let ratios: Vec<f64> = ratios.collect();
        let spread = Spread::of(&ratios)?;
        Some(Self {
            ratio: spread.median,
            min: spread.min,
            max: spread.max,
            repetitions: ratios.len() as u32,
        })
    }
}

impl Summary {
    pub fn of(repetitions: &[RepetitionResult], thresholds: &StabilityThresholds) -> Option<Self> {
        let figure = |f: fn(&RepetitionResult) -> f64| {
            Spread::of(&repetitions.iter().map(f).collect::<Vec<_>>())
        };
        let bytes_per_item = figure(|r| r.bytes_per_item)?;
        let commands_per_sec = figure(|r| r.commands_per_sec)?;
        let items_per_sec = figure(|r| r.items_per_sec);
        let used_memory = figure(|r| r.used_memory as f64)?;
        let items = figure(|r| r.items as f64)?.median.round() as u64;
        let settled: Vec<f64> = repetitions
            .iter()
            .filter_map(|r| r.settled.as_ref().map(|s| s.bytes_per_item))
            .collect();
        let mut reasons = Vec::new();
        if bytes_per_item.cv > thresholds.bytes_per_item_cv {
            reasons.push(format!(
                "bytes per item vary by {:.1}% (CV), more than {:.1}%",
                bytes_per_item.cv * 100.0,
                thresholds.bytes_per_item_cv * 100.0
            ));
        }
        // The load rate's variation: items/s and commands/s vary alike (one is a constant
        // multiple of the other).
        if commands_per_sec.cv > thresholds.rate_cv {
            reasons.push(format!(
                "load rates vary by {:.1}% (CV), more than {:.1}%",
                commands_per_sec.cv * 100.0,
                thresholds.rate_cv * 100.0
            ));
        }
        Some(Self {
            items,
            repetitions: repetitions.len() as u32,
            used_memory,
            bytes_per_item,
            commands_per_sec,
            items_per_sec,
            settled_bytes_per_item: Spread::of(&settled),
            by_type: type_memory::summarize(repetitions.iter().map(|r| r.by_type.as_slice())),
            unstable: !reasons.is_empty(),
            unstable_reason: (!reasons.is_empty()).then(|| reasons.join("; ")),
            shards: ShardSpread::of(repetitions),
            peak: PeakSummary::of(repetitions),
        })
    }
}

/// An error in a report: a bounded category and the message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ErrorReport {
    /// The bounded category of the failure, a CamelCase word: a metric label, an event reason,
    /// and the condition reason a client's error becomes.
    #[schemars(transform = crate::words::name_known_words::<crate::error::ErrorCategory>)]
    pub category: crate::error::ErrorCategory,
    pub message: String,
    /// The phase after a repetition's readings that failed, when one ended the run: the
    /// operator names it when the engine's container ended meanwhile (a save's fork copy that
    /// took the container past its memory limit is the kernel's to kill, and its record says
    /// only OOMKilled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<FailedPhase>,
}

/// Which phase failed, and after which repetition's readings (1-based).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FailedPhase {
    /// The phase's name.
    #[schemars(transform = crate::words::name_known_words::<crate::client::measurement::phase_kind::PhaseKind>)]
    pub name: crate::client::measurement::phase_kind::PhaseKind,
    pub repetition: u32,
}

impl From<&BenchError> for ErrorReport {
    fn from(e: &BenchError) -> Self {
        Self {
            category: e.kind(),
            message: e.to_string(),
            phase: None,
        }
    }
}

/// Everything measured of one engine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BenchmarkReport {
    /// The entry's name in a comparison (`<engine>-<version>` unless the spec names it).
    pub name: String,
    pub engine: EngineInfo,
    pub workload: WorkloadReport,
    pub pipeline: u32,
    /// In cluster mode, the cluster's fixed cost: the empty one-node cluster's used_memory
    /// (the first baseline) against the same build's in standalone mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterCost>,
    /// The TTL the load gave its items (`seconds`, `share`), when it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<Ttl>,
    pub repetitions_requested: u32,
    pub repetitions: Vec<RepetitionResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_repetition: Option<FailedRepetition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<Summary>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorReport>,
}

/// What cluster mode costs before any data: the empty node's used_memory in cluster mode
/// (owning every slot, or its share of them in a sharded cluster) and in standalone mode, same
/// build. For a sharded cluster the figures are per node: `cluster_used_memory` is the mean of
/// the shards' first baselines, each shard paying the cost once (the cluster's total is
/// `shards` times it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ClusterCost {
    pub standalone_used_memory: u64,
    pub cluster_used_memory: u64,
    /// `cluster_used_memory - standalone_used_memory`.
    pub fixed_cost_bytes: i64,
    /// The shards of a sharded cluster, whose figures above are per node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shards: Option<u32>,
}

impl ClusterCost {
    /// The cost against `standalone`'s used_memory, from the first repetition's baseline: the
    /// one node's, or the mean of the shards'.
    pub fn per_node(standalone: u64, first: &RepetitionResult) -> Self {
        let nodes = first.shards.len().max(1) as u64;
        let cluster = (first.baseline_used_memory as f64 / nodes as f64).round() as u64;
        Self {
            standalone_used_memory: standalone,
            cluster_used_memory: cluster,
            fixed_cost_bytes: cluster as i64 - standalone as i64,
            shards: (nodes > 1).then_some(nodes as u32),
        }
    }
}

impl BenchmarkReport {
    pub fn succeeded(&self) -> bool {
        self.error.is_none()
    }
}

/// One shard's readings in a repetition of a sharded cluster.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ShardReading {
    /// The shard's index, from 0, in the order of the `--addr` flags.
    pub shard: u32,
    pub address: String,
    pub baseline_used_memory: u64,
    pub used_memory: u64,
    /// The keys the shard holds after the load (DBSIZE).
    pub keys: u64,
}

impl ShardReading {
    /// What the load added to the shard's used_memory.
    pub fn data_bytes(&self) -> i64 {
        self.used_memory as i64 - self.baseline_used_memory as i64
    }
}

/// How evenly a sharded cluster's data spread: each shard's median figures over the
/// repetitions, in shard order, and the largest shard against the smallest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ShardSpread {
    /// Each shard's median baseline used_memory.
    pub baseline_used_memory: Vec<u64>,
    /// Each shard's median final used_memory.
    pub used_memory: Vec<u64>,
    /// Each shard's median key count.
    pub keys: Vec<u64>,
    /// The most keys a shard holds over the fewest (1: an even spread); `None` when a shard
    /// holds none.
    pub keys_max_over_min: Option<f64>,
    /// The most data a shard's used_memory grew by over the least (final - baseline); `None`
    /// when a shard's did not grow.
    pub data_max_over_min: Option<f64>,
}

impl ShardSpread {
    /// The spread of the repetitions' shard readings; `None` for one engine.
    pub fn of(repetitions: &[RepetitionResult]) -> Option<Self> {
        let shards = repetitions.first()?.shards.len();
        if shards == 0 || repetitions.iter().any(|r| r.shards.len() != shards) {
            return None;
        }
        let median = |shard: usize, f: fn(&ShardReading) -> f64| {
            let values: Vec<f64> = repetitions.iter().map(|r| f(&r.shards[shard])).collect();
            Spread::of(&values).map_or(0.0, |s| s.median)
        };
        let column = |f: fn(&ShardReading) -> f64| -> Vec<f64> {
            (0..shards).map(|shard| median(shard, f)).collect()
        };
        let round = |values: Vec<f64>| values.iter().map(|v| v.round() as u64).collect();
        Some(Self::from_medians(
            round(column(|r| r.baseline_used_memory as f64)),
            round(column(|r| r.used_memory as f64)),
            round(column(|r| r.keys as f64)),
        ))
    }

    /// The spread of each shard's median baseline and final used_memory and keys.
    pub fn from_medians(baseline: Vec<u64>, used: Vec<u64>, keys: Vec<u64>) -> Self {
        let data: Vec<f64> = used
            .iter()
            .zip(&baseline)
            .map(|(u, b)| *u as f64 - *b as f64)
            .collect();
        let key_counts: Vec<f64> = keys.iter().map(|k| *k as f64).collect();
        Self {
            keys_max_over_min: max_over_min(&key_counts),
            data_max_over_min: max_over_min(&data),
            baseline_used_memory: baseline,
            used_memory: used,
            keys,
        }
    }

    /// `3 shards, keys 33.4% / 33.2% / 33.4% (most over fewest 1.01), data most over least 1.01`.
    pub fn describe(&self) -> String {
        let shares: Vec<String> = self
            .key_shares()
            .iter()
            .map(|share| format!("{:.1}%", share * 100.0))
            .collect();
        let ratio = |r: Option<f64>| {
            r.map_or_else(|| "a shard got none".to_string(), |r| format!("{r:.3}"))
        };
        format!(
            "{} shards, keys {} (most over fewest {}), data most over least {}",
            self.keys.len(),
            shares.join(" / "),
            ratio(self.keys_max_over_min),
            ratio(self.data_max_over_min)
        )
    }

    /// Each shard's share of the keys, from 0 to 1.
    pub fn key_shares(&self) -> Vec<f64> {
        let total: u64 = self.keys.iter().sum();
        self.keys
            .iter()
            .map(|k| {
                if total == 0 {
                    0.0
                } else {
                    *k as f64 / total as f64
                }
            })
            .collect()
    }
}

/// The largest value over the smallest; `None` when the smallest is not above 0 (a shard that
/// got nothing has no ratio a JSON number can hold).
fn max_over_min(values: &[f64]) -> Option<f64> {
    let max = values.iter().copied().fold(f64::MIN, f64::max);
    let min = values.iter().copied().fold(f64::MAX, f64::min);
    (min > 0.0).then(|| max / min)
}

impl BenchmarkReport {
    /// RSS after the last churn round (before defragmentation), the median over the
    /// repetitions that churned.
    pub fn churned_rss(&self) -> Option<f64> {
        let values: Vec<f64> = self
            .repetitions
            .iter()
            .filter_map(|r| r.churn.as_ref()?.churned_rss())
            .map(|rss| rss as f64)
            .collect();
        Spread::of(&values).map(|s| s.median)
    }

    /// RSS at the end of the defragmentation window, the median over the repetitions.
    pub fn defragmented_rss(&self) -> Option<f64> {
        let values: Vec<f64> = self
            .repetitions
            .iter()
            .filter_map(|r| Some(r.churn.as_ref()?.defrag.as_ref()?.rss_after as f64))
            .collect();
        Spread::of(&values).map(|s| s.median)
    }
}
