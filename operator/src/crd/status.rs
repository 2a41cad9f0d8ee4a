//! The status of a `MemoryBenchmark`: its phase, its progress and what each engine measured.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use super::condition_reason::ConditionReason;
use super::engine_state::{EngineState, StatusEngineKind};

crate::words::open_words! {
    /// The state of a benchmark as a whole.
    pub enum Phase {
        Pending = "Pending",
        Running = "Running",
        Succeeded = "Succeeded",
        Failed = "Failed",
    }
    unknown_meaning = "A phase this release does not know, written by a newer operator.\n";
}

/// What the operator has measured so far.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryBenchmarkStatus {
    /// The `metadata.generation` of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// Where the benchmark stands as a whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crate::words::name_known_words::<Phase>)]
    pub phase: Option<Phase>,

    /// A short name of the workload, for example `sorted-set 50000000 members`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,

    /// The instance types the engines run on, `spec.instanceType` or every one of
    /// `spec.instanceTypes`, comma separated (`r8g.4xlarge, r7i.4xlarge`): the printer column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_types: Option<String>,

    /// Standard conditions: `Ready` (results complete), `Progressing`, `Failed`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,

    /// Where the benchmark stands while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,

    /// The results of each engine, in the order of `spec.engines`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub engines: Vec<EngineStatus>,

    /// The lowest median bytes per item among the engines measured so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_bytes_per_item: Option<f64>,

    /// The engine with the lowest median bytes per item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_engine: Option<String>,

    /// When the first engine started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,

    /// When the last engine finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,

    /// What the engines measured so far need at `spec.capacity.items` (when the spec asks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacityStatus>,
}

impl MemoryBenchmarkStatus {
    /// Whether an engine run has started: one with a start time or past Pending.
    pub fn any_engine_started(&self) -> bool {
        self.engines
            .iter()
            .any(|e| e.started_at.is_some() || e.state != EngineState::Pending)
    }
}

/// The capacity plan of the engines measured so far (`spec.capacity`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityStatus {
    /// The items planned for (`spec.capacity.items`).
    pub items: u64,
    /// The instance families looked in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 5))]
    pub instance_families: Vec<String>,
    /// The smallest instance type that holds any engine at that size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smallest_instance_type: Option<String>,
    /// The engine whose node costs least a month, with the prices given; absent when several
    /// tie for it (`cheapestTie`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cheapest_engine: Option<String>,
    /// That engine's instance type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cheapest_instance_type: Option<String>,
    /// That node's monthly cost in USD (730 hours at the given hourly price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cheapest_monthly_usd: Option<f64>,
    /// Every engine at the cheapest price (within half a cent a month) when more than one
    /// is, as `ENGINE on INSTANCE-TYPE`: a tie, not one engine cheaper than the others.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub cheapest_tie: Vec<String>,
    /// What a reader of the plan should know: an instance type the table does not know, and
    /// what was planned over instead.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub notes: Vec<String>,
    /// Why there is no plan, or no price (prices not readable, an engine not projected).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Each projected engine, in the order of `spec.engines`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub engines: Vec<EngineCapacityStatus>,
}

/// What one engine needs at `spec.capacity.items`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EngineCapacityStatus {
    /// The engine entry's name.
    pub name: String,
    /// used_memory projected at that size, in bytes.
    pub projected_used_memory: u64,
    /// The low end of the projection's band, in bytes.
    pub projected_used_memory_low: u64,
    /// The high end of the projection's band, in bytes.
    pub projected_used_memory_high: u64,
    /// The projected RSS in bytes, never below projectedUsedMemory: see rssBasis.
    pub projected_rss: u64,
    /// What projectedRss came from: `data-growth-settled` (the first repetition's RSS growth
    /// over its data's growth, read after settleSeconds) or `run-ratio` (used_memory times the
    /// measured fragmentation ratio, which oversizes from a small run).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rss_basis: String,
    /// peak used_memory / maxmemory of the run's load past maxmemory (`spec.eviction`), when
    /// above 1: projectedRss holds that share of projectedUsedMemory more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_overshoot_ratio: Option<f64>,
    /// Peak over steady memory of a snapshot saved under the run's writes
    /// (`spec.peak.snapshot`), the highest of its repetitions, as measured: projectedRss is
    /// raised for it, since the node holds the engine and the pages its fork copied at once; a
    /// forking engine's copy raised to a save spec.capacity.defaults.saveLengthFactor times as
    /// long, as the recommended limit's copy_on_write term is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_peak_ratio: Option<f64>,
    /// What the memory given to the engine holds beyond its projected RSS: `headroom-percent`
    /// (RSS / (1 - headroomPercent/100)) or `snapshot-peak` (the RSS raised for
    /// snapshotPeakRatio, with no headroom percent on top).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub headroom_basis: String,
    /// The memory a node needs for it: the band's top RSS plus headroom, plus kube-reserved and
    /// the eviction threshold of the smallest instance type that holds it, in bytes.
    pub required_node_memory: u64,
    /// The smallest instance type of all families that holds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smallest_instance_type: Option<String>,
    /// How full that node would be, in percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fill_percent: Option<f64>,
    /// That node's monthly cost in USD, when priced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monthly_usd: Option<f64>,
    /// The growth rule the projection used (`power-of-two-dict`, `bucketed-hashtable`,
    /// `dash-table`, `unknown`).
    pub growth_rule: String,
    /// The maxmemory and the container memory limit to deploy at that size, the limit the sum
    /// of its terms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recommended: Option<RecommendedStatus>,
}

/// The settings to deploy for one engine (`membench capacity` prints the same).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecommendedStatus {
    /// The engine's maxmemory: used_memory projected at the planned size, rounded up to a MiB.
    pub maxmemory_bytes: u64,
    /// The container's memory limit: the sum of the terms, rounded up to a MiB.
    pub memory_limit_bytes: u64,
    /// The container's memory request: the engine's empty RSS plus its data's RSS.
    pub memory_request_bytes: u64,
    /// (memoryLimitBytes - maxmemoryBytes) / memoryLimitBytes, in percent: comparable with
    /// ElastiCache's reserved-memory-percent.
    pub reserve_percent: f64,
    /// The write rate the copy-on-write term holds for (reached during the save).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writes_per_sec: Option<f64>,
    /// The terms of the limit, in order.
    #[schemars(length(max = 12))]
    pub terms: Vec<RecommendedTermStatus>,
}

/// One term of a recommended memory limit.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecommendedTermStatus {
    /// `empty_rss`, `data_rss`, `copy_on_write` (or `save_peak`), `replication_backlog`,
    /// `replica_output_buffer`, `eviction_overshoot`, `client_buffers` or `start_minimum`
    /// (Dragonfly: what its least maxmemory a thread adds).
    pub name: String,
    /// Its bytes.
    pub bytes: u64,
    /// `measured` (by this run) or `default` (spec.capacity.defaults, or membench's).
    pub source: String,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Progress of a running benchmark.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    /// Engine i of n, counted from 1.
    pub engine: u32,
    /// How many engines the benchmark compares.
    pub engines: u32,
    /// The repetition under way, counted from 1 (0 before the first starts).
    pub repetition: u32,
    /// How many repetitions each engine gets.
    pub repetitions: u32,
    /// For example `engine 1/2 (redis-7.0.15), repetition 3/10`.
    pub summary: String,
}

/// The results of one engine.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EngineStatus {
    /// The entry's name (`spec.engines[].name`, or `<engine>-<version>`).
    pub name: String,
    /// The engine.
    #[schemars(transform = crate::words::name_known_words::<StatusEngineKind>)]
    pub engine: StatusEngineKind,
    /// The version asked for in the spec.
    pub requested_version: String,
    /// Where the engine entry stands.
    #[schemars(transform = crate::words::name_known_words::<EngineState>)]
    pub state: EngineState,
    /// Why the engine failed or waits, as a CamelCase reason (for example `Unschedulable`,
    /// `ImagePullFailed`, `EngineOOMKilled`, `ClientFailed`, `Timeout`); the book's status page
    /// says what each means.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crate::words::name_known_words::<ConditionReason>)]
    pub reason: Option<ConditionReason>,
    /// Why the engine failed or waits, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// How many client pods were started for this engine (a failed client is retried a few
    /// times while the engine stays healthy).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub client_attempts: u32,
    /// The version the engine itself reported in `INFO server`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The allocator the engine reported (`mem_allocator`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocator: Option<String>,
    /// The CPU architecture the engine reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<String>,
    /// The event loop the engine reported (`INFO server` `multiplexing_api`): Dragonfly runs
    /// on `iouring`, or on `epoll` where the pod's seccomp profile (containerd's
    /// `RuntimeDefault`) blocks io_uring.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multiplexing_api: Option<String>,
    /// The threads the engine reported (`INFO server` `thread_count`; Dragonfly, whose
    /// keyspace is a table per thread: the capacity projection needs it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<u32>,
    /// The settings the spec changed (`engines[].config`, and allowlisted `args`), as the
    /// engine reported them with `CONFIG GET` after it started: the effective values.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub config: std::collections::BTreeMap<String, String>,
    /// Settings the spec changed that the engine does not report through `CONFIG GET`
    /// (Dragonfly reports a few of its flags only): passed as the spec gave them, not read back.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config_unreported: Vec<String>,
    /// The modules the engine loaded, as `INFO modules` lists them (name and version, sorted
    /// by name): Redis 8 builds its `vectorset` in, Valkey 9.1 its `lua`, Dragonfly answers
    /// `ReJSON` and `search`, an image that loads a module (FalkorDB's `graph`) adds it. Memory
    /// figures of engines that load different modules are not like for like. An empty list:
    /// none loaded; absent: not reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modules: Option<Vec<EngineModule>>,
    /// `CLUSTER INFO` of a cluster-mode engine (shard 0's for a sharded one), read after the
    /// client made the cluster; absent for a standalone engine, which does not answer it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterNodeState>,
    /// The node the engine ran on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// That node's `node.kubernetes.io/instance-type`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
    /// The node the engine's replica ran on (`spec.peak.replica`): another node of the same
    /// instance type, never the engine's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_node_name: Option<String>,
    /// The image the engine pod ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The engine mirror the image came from (the operator's `engineRegistry`): the entry's
    /// official image, pulled from the mirror under the same name. Absent when the entry names
    /// its own `image` or the operator has no mirror.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_registry: Option<String>,
    /// The image ID the node reported (the digest actually run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
    /// When this engine's pod was created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    /// When this engine's results were complete or it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,
    /// Each repetition's figures, in order (at most `spec.repetitions`, itself at most 100).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repetitions: Vec<RepetitionStatus>,
    /// Median, min and max over the repetitions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<SummaryStatus>,
    /// Median bytes per item relative to the first engine, in percent (negative: smaller).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change_vs_first_percent: Option<f64>,
    /// The growth curve: used_memory read during the first repetition's load, every
    /// `spec.workload.sortedSet.sampleEvery` members for the sorted set, about 100 times a load
    /// for the other workloads (what `spec.capacity` projects from). At most 64 points: a longer curve
    /// is thinned evenly, counted back from the last point, which is the end of the load.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub growth: Vec<GrowthPoint>,
    /// A sharded run's shards (`engines[].shards`), in shard order: each shard's pod and the
    /// node it ran on (each its own), and once measured its median used_memory and keys.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub shards: Vec<ShardStatus>,
    /// How evenly a sharded run's data spread over its shards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard_spread: Option<ShardSpreadStatus>,
    /// What cluster mode costs before any data, for a cluster-mode run (`clusterMode` or
    /// `shards`) whose spec also has a standalone entry of the same build (engine, image,
    /// `config` and `args`) on the same instance type: the empty cluster-mode node's
    /// used_memory (its first baseline; for shards, the mean of the shards') against that
    /// entry's first baseline. Absent without such an entry: add one to see it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_fixed_cost: Option<ClusterFixedCostStatus>,
}

/// What a cluster-mode engine said of its cluster (`CLUSTER INFO`) once the client had made it
/// (a one-node cluster owning every slot, shards joined, or Dragonfly's emulated cluster), so a
/// figure from a cluster-mode node is never read as a standalone one's.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, schemars::JsonSchema)]
pub struct ClusterNodeState {
    /// `cluster_state`: `ok` when every slot is served.
    pub state: String,
    /// `cluster_slots_assigned`: 16384 for a one-node cluster.
    pub slots: u32,
    /// `cluster_known_nodes`: the nodes this one knows, itself included.
    pub nodes: u32,
    /// `cluster_size`: the primaries that serve slots.
    pub size: u32,
}

/// A module an engine loaded (one `module:` line of `INFO modules`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, schemars::JsonSchema)]
pub struct EngineModule {
    /// The module's name (`name=`), for example `vectorset` or `graph`.
    pub name: String,
    /// The module's version as the engine reports it (`ver=`, an integer: 41603 is 4.16.3).
    pub version: String,
}

/// Modules as a report shows them: `graph 41603, vectorset 1`, `none`, or empty when the
/// engine's result did not say.
pub fn describe_modules(modules: Option<&[EngineModule]>) -> String {
    match modules {
        None => String::new(),
        Some([]) => "none".to_string(),
        Some(modules) => modules
            .iter()
            .map(|m| format!("{} {}", m.name, m.version))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// The cluster's fixed cost, per node, against a standalone run of the same build.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterFixedCostStatus {
    /// The standalone entry it is measured against (its name in `engines`).
    pub standalone_entry: String,
    /// That entry's empty node's used_memory (its first baseline).
    pub standalone_used_memory: u64,
    /// The empty cluster-mode node's used_memory (per shard for a sharded run).
    pub cluster_used_memory: u64,
    /// `clusterUsedMemory - standaloneUsedMemory`, in bytes (per shard for a sharded run,
    /// each of which pays it).
    pub fixed_cost_bytes: i64,
    /// A sharded run's shards, whose figures above are per node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shards: Option<u32>,
}

impl EngineStatus {
    /// Shard `shard`'s entry in [`EngineStatus::shards`], added in shard order if missing.
    pub fn shard_mut(&mut self, shard: u32) -> &mut ShardStatus {
        let at = match self.shards.binary_search_by_key(&shard, |s| s.shard) {
            Ok(at) => at,
            Err(at) => {
                self.shards.insert(
                    at,
                    ShardStatus {
                        shard,
                        ..Default::default()
                    },
                );
                at
            }
        };
        &mut self.shards[at]
    }
}

/// How evenly a sharded run's data spread: the largest shard against the smallest (1 is an
/// even spread).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShardSpreadStatus {
    /// The most keys a shard holds over the fewest; absent when a shard holds none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys_max_over_min: Option<f64>,
    /// The most a shard's used_memory grew by in the load over the least; absent when a
    /// shard's did not grow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_max_over_min: Option<f64>,
}

/// One shard of a sharded run.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShardStatus {
    /// The shard's index, from 0; shard i owns slots i*16384/N to (i+1)*16384/N - 1.
    pub shard: u32,
    /// Its engine pod.
    pub pod: String,
    /// The node that pod ran on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// The shard's median used_memory before the load, over the repetitions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_used_memory: Option<u64>,
    /// The shard's median used_memory after the load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_memory: Option<u64>,
    /// The shard's median key count after the load (DBSIZE).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<u64>,
}

/// One point of a growth curve.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrowthPoint {
    /// Items loaded so far.
    pub items: u64,
    /// used_memory at that point, in bytes (the empty server's is the first repetition's
    /// `baselineUsedMemory`).
    pub used_memory: u64,
}

/// One repetition's figures.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RepetitionStatus {
    /// used_memory of the empty server before the load, in bytes.
    pub baseline_used_memory: u64,
    /// used_memory right after the load, in bytes.
    pub used_memory: u64,
    /// used_memory_rss right after the load, in bytes.
    pub used_memory_rss: u64,
    /// Items verified in the engine after the load.
    pub items: u64,
    /// (used_memory - baseline_used_memory) / items.
    pub bytes_per_item: f64,
    /// Commands sent per second during the load (ZADDs, SETs or HSETs).
    #[serde(default)]
    pub commands_per_sec: f64,
    /// Items stored per second: items / seconds. Below commandsPerSec for records stored as
    /// strings (commandsPerSec / fields) and for random keys (SETs that repeat a key store
    /// nothing new).
    #[serde(default)]
    pub items_per_sec: f64,
    /// How long the load took, in seconds.
    pub seconds: f64,
    /// Bytes per item read again after `spec.settleSeconds`, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled_bytes_per_item: Option<f64>,
    /// used_memory_rss of the empty server before the load, in bytes: the first repetition's,
    /// when it settled (the client's result carries no more; the capacity plan reads it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_used_memory_rss: Option<u64>,
    /// used_memory read again after `spec.settleSeconds`, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled_used_memory: Option<u64>,
    /// used_memory_rss read again after `spec.settleSeconds`: the first repetition's, when
    /// set (the capacity plan projects RSS from it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled_used_memory_rss: Option<u64>,
    /// used_memory_dataset right after the load, in bytes (the engine's own estimate of the
    /// memory holding data, without its overhead), when the engine reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_memory_dataset: Option<u64>,
    /// mem_fragmentation_ratio right after the load (used_memory_rss / used_memory), when the
    /// engine reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_fragmentation_ratio: Option<f64>,
    /// What `spec.churn` did to the data after the readings above, and what the engine held
    /// after each round and after defragmentation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub churn: Option<super::churn_status::ChurnStatus>,
    /// What `spec.eviction`'s load past maxmemory measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction: Option<super::eviction_status::EvictionStatus>,
    /// What `spec.peak`'s snapshot under writes cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak: Option<super::peak_status::PeakStatus>,
}

/// Summary over an engine's repetitions.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SummaryStatus {
    /// Items per repetition.
    pub items: u64,
    /// Median used_memory after the load, in bytes.
    pub used_memory: u64,
    /// Bytes per item: median, min, max and coefficient of variation.
    pub bytes_per_item: SpreadStatus,
    /// Commands sent per second: median, min, max and coefficient of variation.
    #[serde(default)]
    pub commands_per_sec: SpreadStatus,
    /// Items stored per second: median, min, max and coefficient of variation.
    #[serde(default)]
    pub items_per_sec: SpreadStatus,
    /// True when the repetitions disagree more than the threshold allows.
    pub unstable: bool,
    /// A profile's rebuild: the median bytes per key of each type, the used_memory its keys
    /// added (loaded type by type) over their number, including their entries in the key
    /// tables and any growth of those tables during their load.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 6))]
    pub bytes_per_key_by_type: Vec<TypeBytesStatus>,
    /// The peak phases (`spec.peak`) over the repetitions that measured them: the median of
    /// each one's peak over its steady memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak: Option<super::peak_status::PeakSummaryStatus>,
}

/// One type's keys in a profile's rebuild.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TypeBytesStatus {
    /// `string`, `hash`, `list`, `set`, `zset` or `stream`.
    #[serde(rename = "type")]
    pub key_type: String,
    /// The keys of that type the rebuild stored.
    pub keys: u64,
    /// Median over the repetitions of the used_memory they added over their number.
    pub bytes_per_key: f64,
}

/// Median, min, max and coefficient of variation of a figure.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SpreadStatus {
    /// The median over the repetitions.
    pub median: f64,
    /// The lowest repetition.
    pub min: f64,
    /// The highest repetition.
    pub max: f64,
    /// Standard deviation divided by the mean.
    pub cv: f64,
}
