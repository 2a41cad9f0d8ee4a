//! `spec.peak`, `spec.churn` and `spec.eviction`: what the engine holds at its peak (a snapshot
//! under writes) and after the data changes (deletes, overwrites with values of another size,
//! active defragmentation; a load past maxmemory), measured in every repetition. The phases
//! themselves are `crate::client::snapshot`, `churn` and `eviction`; only the fields are here.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use super::engine_spec::EngineSpec;

/// Rounds of deletes and overwrites on the loaded data, each followed by a memory reading; then,
/// with `defrag`, active defragmentation switched on and followed until it stops regaining
/// memory. Which items a round deletes and overwrites is drawn from `seed`, so every engine
/// loses and rewrites the same ones. Records stored as hashes churn on their fields (each field
/// drawn on its own; a record whose last field is deleted is gone, as the engine deletes an
/// empty hash); a randomStrings load on the keys its draws wrote; a profile's rebuild on its
/// keys (an overwritten collection has its elements replaced by as many of
/// `overwriteValueSize` bytes; a key's TTL from the profile is given again). Applies to
/// strings, randomStrings, records, sortedSet and profile without `ttlSeconds`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChurnSpec {
    /// How many rounds of deletes and overwrites.
    #[serde(default = "default_rounds")]
    #[schemars(range(min = 1, max = 100))]
    pub rounds: u32,

    /// The share of the items still held that each round deletes (keys with `DEL`, sorted-set
    /// members with `ZREM`, a hash record's fields with `HDEL`, a rebuild's keys of any type
    /// with `DEL`): above 0 and below 1 (a round must leave something to measure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_share: Option<f64>,

    /// The share of the items a round left that it then overwrites with values of
    /// `overwriteValueSize` bytes (`SET`; a hash record's fields left with `HSET`; a sorted-set
    /// member is removed and added again under a name of that size; a rebuild's collection is
    /// written again with as many elements of that size): above 0 and at most 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overwrite_share: Option<f64>,

    /// The size in bytes of the values an overwrite writes (needed with `overwriteShare`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1048576))]
    pub overwrite_value_size: Option<u32>,

    /// After the rounds and `spec.settleSeconds`, switch the engine's active defragmentation on
    /// with thresholds low enough to act (Redis and Valkey: `activedefrag yes`,
    /// `active-defrag-ignore-bytes 1mb`, `active-defrag-threshold-lower 1`) and read memory
    /// every half second until RSS stops falling, having followed the fragmentation ratio's
    /// fall (`endedBy: held`), or `defragSeconds` pass (`endedBy: bound`). Refused on a build
    /// whose allocator cannot defragment (a libc malloc build, Debian's system jemalloc).
    /// Dragonfly cannot switch it at runtime: with `defrag`, membench starts it with
    /// `mem_defrag_check_sec_interval=1` and `mem_defrag_waste_threshold=0.05` (unless the entry
    /// sets them), which leave it idle under its 0.7-of-maxmemory gate
    /// (`mem_defrag_threshold`) through the load and the rounds, and for the window lowers
    /// maxmemory until used memory is 0.8 of it, putting it back after.
    #[serde(default)]
    pub defrag: bool,

    /// The longest defragmentation window, in seconds.
    #[serde(default = "default_defrag_seconds")]
    #[schemars(range(min = 5, max = 3600))]
    pub defrag_seconds: u32,

    /// The seed of the draws that pick which items each round deletes and overwrites.
    #[serde(default = "default_churn_seed")]
    pub seed: u64,
}

fn default_rounds() -> u32 {
    1
}

pub fn default_defrag_seconds() -> u32 {
    60
}

pub fn default_churn_seed() -> u64 {
    1
}

/// A load past `maxmemory`, after the repetition's other phases: the engine is emptied, given
/// `maxmemory` and `policy`, and loaded with the workload's items (key numbers counted on past
/// the workload's) until `loadTo` times `maxmemory` of them were written, its used_memory read
/// every 1,000 writes. What it measures: the peak used_memory (above maxmemory: the
/// overshoot, a hash table's grow among it), RSS at the end, the keys evicted and kept, and the
/// write rate once eviction runs. With `noeviction` the engine refuses writes at maxmemory:
/// those refusals are its result, not a failure. Dragonfly takes `maxmemory` at runtime but
/// evicts only with `cache_mode: "true"` in the entry's `config` (otherwise it refuses, as
/// `noeviction`), and has no `maxmemory-policy`. An entry may give its own limit and policy in
/// its `config` (`maxmemory`, `maxmemory-policy`) in place of these: its engine then starts
/// without them, and this phase gives them to it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvictionSpec {
    /// The memory limit, as the engine writes it: `100mb`, `2gb`, `104857600` (k, kb, m, mb, g,
    /// gb; kb and the like are powers of 1024, k and the like of 1000). Needed unless every
    /// entry sets `config.maxmemory`; refused beside an entry's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 24))]
    pub maxmemory: Option<String>,
    /// `maxmemory-policy`: noeviction, allkeys-lru, allkeys-lfu, allkeys-random, volatile-lru,
    /// volatile-lfu, volatile-random or volatile-ttl (default: the entry's
    /// `config.maxmemory-policy`, else allkeys-lru).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// How much to write, as a multiple of maxmemory (estimated from the repetition's own bytes
    /// per item): above 1, at most 20.
    #[serde(default = "default_load_to")]
    pub load_to: f64,
}

/// The policy of a load past maxmemory that neither `spec.eviction` nor the entry names.
pub const DEFAULT_EVICTION_POLICY: &str = "allkeys-lru";

pub fn default_load_to() -> f64 {
    3.0
}

/// What a node must hold at the engine's peak, measured in every repetition after its
/// readings, on the data it loaded.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct PeakSpec {
    /// A snapshot (`BGSAVE`) saved while the client overwrites loaded keys: Redis and Valkey
    /// fork, and every page written during the save is copied; Dragonfly saves without a fork.
    /// Applies to the strings and records workloads. The snapshot goes to the engine's data
    /// directory under its own file name (`membench load` against a server of yours writes its
    /// `dir`/`dbfilename`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<SnapshotSpec>,
    /// A replica of the engine does a full sync (`REPLICAOF`) while the client overwrites
    /// loaded keys, after the snapshot when both are asked: Redis and Valkey fork to send it,
    /// Dragonfly syncs without a fork. Measured on the primary (its process tree's peak, the
    /// copy-on-write it counts) and on the replica (its memory and keys once in sync), which is
    /// then detached and emptied. Applies to the strings and records workloads, on one engine
    /// without shards or cluster mode. `membench run` starts the replica as a second process of
    /// the same build; the operator starts it as a second engine pod on another node of the
    /// instance type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<ReplicaSpec>,
}

/// The writes during a replica's full sync.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaSpec {
    /// Overwrites per second, spread over every loaded item, while the replica syncs (the
    /// achieved rate is reported).
    #[serde(rename = "writesPerSecond")]
    #[schemars(range(min = 1, max = 10000000))]
    pub writes_per_sec: u32,
}

/// The writes during the snapshot.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotSpec {
    /// Overwrites per second while the snapshot is saved (the achieved rate is reported).
    #[serde(rename = "writesPerSecond")]
    #[schemars(range(min = 1, max = 10000000))]
    pub writes_per_sec: u32,
    /// The share of the loaded items the writes are spread over, drawn uniformly: above 0 and
    /// at most 1.
    #[serde(default = "default_write_share")]
    pub write_share: f64,
}

pub fn default_write_share() -> f64 {
    1.0
}

impl EvictionSpec {
    /// The load past maxmemory `engine` runs: this one's maxmemory and policy, or the entry's own
    /// `config.maxmemory` and `config.maxmemory-policy`, with both fields set. Refused when
    /// neither names a maxmemory, or both do (or name two policies): the message names the
    /// entry's fields from `config.`.
    pub fn for_entry(&self, engine: &EngineSpec) -> Result<EvictionSpec, String> {
        let own = |name: &str| {
            engine
                .config
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
        };
        let maxmemory = match (self.maxmemory.clone(), own("maxmemory")) {
            (Some(spec), Some(entry)) => {
                return Err(format!(
                    "config.maxmemory ({entry}) and spec.eviction.maxmemory ({spec}) are both set: keep one (config.maxmemory is this engine's own limit for the load past it)"
                ));
            }
            (None, None) => {
                return Err(
                    "has no maxmemory for spec.eviction's load past it: set spec.eviction.maxmemory, or config.maxmemory on this engine".into(),
                );
            }
            (Some(limit), None) | (None, Some(limit)) => limit,
        };
        let policy = match (self.policy.clone(), own("maxmemory-policy")) {
            (Some(spec), Some(entry)) if !spec.eq_ignore_ascii_case(&entry) => {
                return Err(format!(
                    "config.maxmemory-policy ({entry}) and spec.eviction.policy ({spec}) differ: keep one"
                ));
            }
            (Some(policy), _) | (None, Some(policy)) => policy,
            (None, None) => DEFAULT_EVICTION_POLICY.to_string(),
        };
        Ok(EvictionSpec {
            maxmemory: Some(maxmemory),
            policy: Some(policy),
            load_to: self.load_to,
        })
    }
}
