//! A repetition's churn in the status (`spec.churn`): what each round did and what the engine
//! held after it, and what defragmentation regained; and its load past maxmemory
//! (`spec.eviction`); and its snapshot peak (`spec.peak`). The client's result names them in
//! snake_case (`client::churn`, `client::eviction`, `client::snapshot`); the status in
//! camelCase.

use serde::{Deserialize, Serialize};

/// One round of deletes and overwrites.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChurnRoundStatus {
    /// Counted from 1.
    pub round: u32,
    /// Items the round deleted (records stored as hashes: fields).
    pub deleted: u64,
    /// Items the round overwrote with values of `overwriteValueSize` (records stored as
    /// hashes: fields).
    pub overwritten: u64,
    /// used_memory after the round, in bytes.
    pub used_memory: u64,
    /// used_memory_rss after the round, in bytes.
    pub used_memory_rss: u64,
    /// The allocator's fragmentation after the round (Redis and Valkey).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocator_frag_ratio: Option<f64>,
    /// used_memory_rss / used_memory after the round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_fragmentation_ratio: Option<f64>,
    /// Items held after the round, verified in the engine (records stored as hashes: the
    /// records with a field left; a profile's rebuild: its keys).
    pub items: u64,
    /// Elements held after the round, verified, where items hold them (a record's fields; a
    /// rebuild's collections' elements).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elements: Option<u64>,
    /// How long the round's commands took, in seconds.
    pub seconds: f64,
}

/// The probe's write latency during defragmentation, in milliseconds.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LatencyStatus {
    /// Probe writes sent (one every 50 ms on the control connection).
    pub writes: u64,
    /// The median write latency.
    pub p50: f64,
    /// The 99th percentile.
    pub p99: f64,
    /// The slowest write.
    pub max: f64,
}

/// What active defragmentation regained after the rounds.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DefragStatus {
    /// How it was switched on: `activedefrag` (Redis, Valkey) or `maxmemory-gate` (Dragonfly:
    /// maxmemory lowered for the window until used memory passed its defragmentation threshold).
    pub switched: String,
    /// used_memory_rss before defragmentation was switched on, in bytes.
    pub rss_before: u64,
    /// used_memory_rss at the end of the window, in bytes.
    pub rss_after: u64,
    /// used_memory before the window, in bytes.
    pub used_memory_before: u64,
    /// used_memory at its end, in bytes.
    pub used_memory_after: u64,
    /// allocator_frag_ratio before the window (Redis and Valkey).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocator_frag_ratio_before: Option<f64>,
    /// allocator_frag_ratio at its end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocator_frag_ratio_after: Option<f64>,
    /// Seconds until RSS came within half a percent of the window's lowest.
    pub seconds: f64,
    /// The whole window, in seconds.
    pub window_seconds: f64,
    /// The engine's CPU time in the window, in seconds.
    pub cpu_seconds: f64,
    /// The window's bound passed while RSS still fell, or had not yet followed the
    /// fragmentation ratio's fall.
    #[serde(default)]
    pub bound_reached: bool,
    /// Which rule ended the window: `held` (RSS held for 12 s after following the ratio's
    /// fall) or `bound` (the window's bound passed first).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ended_by: String,
    /// `MEMORY PURGE` was sent after the window: its bound passed with RSS short of what the
    /// ratio's fall implies. rssAfter is then after the purge, rssBeforePurge before it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub purged: bool,
    /// used_memory_rss at the end of the window, before `MEMORY PURGE`: what the allocator
    /// gave back by itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_before_purge: Option<u64>,
    /// The probe's write latency during the window, in milliseconds.
    pub write_latency_ms: LatencyStatus,
}

/// A repetition's churn.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChurnStatus {
    /// Each round, in order.
    pub rounds: Vec<ChurnRoundStatus>,
    /// Active defragmentation after the rounds, when `spec.churn.defrag` asked for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defrag: Option<DefragStatus>,
}

impl ChurnStatus {
    /// used_memory_rss after the last round: the churned RSS.
    pub fn churned_rss(&self) -> Option<u64> {
        self.rounds.last().map(|r| r.used_memory_rss)
    }

    /// used_memory_rss at the end of defragmentation, when there was one.
    pub fn defragmented_rss(&self) -> Option<u64> {
        self.defrag.as_ref().map(|d| d.rss_after)
    }
}

/// What a load past maxmemory measured (`spec.eviction`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvictionStatus {
    /// maxmemory as the engine was given it, in bytes (per shard).
    pub maxmemory: u64,
    /// maxmemory-policy (Dragonfly has none: `cache_mode` decides).
    pub policy: String,
    /// Items written.
    pub items_written: u64,
    /// The load's highest used_memory, in bytes: the engine's own used_memory_peak where it
    /// rose during the load (recorded after each command, before the next one's eviction),
    /// else the highest reading (every 1,000 writes and at the end).
    pub peak_used_memory: u64,
    /// Where peakUsedMemory comes from: `engine` (the engine's used_memory_peak, which misses
    /// no transient) or `sampled` (readings taken after eviction, which can miss one: the
    /// engine's own peak was set higher earlier in the run and cannot be reset).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub peak_source: String,
    /// peakUsedMemory - maxmemory, 0 when the engine stayed under it.
    pub overshoot_bytes: i64,
    /// used_memory_rss at the end, in bytes.
    pub used_memory_rss: u64,
    /// Keys the engine evicted during the load.
    pub evicted_keys: u64,
    /// Keys it held at the end.
    pub keys_kept: u64,
    /// Items written per second once eviction ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items_per_sec_evicting: Option<f64>,
    /// The engine refused writes at maxmemory (noeviction, Dragonfly without cache_mode):
    /// items sent by the end of the batch it first refused in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused_at_items: Option<u64>,
}

/// The write latency during a snapshot: each batch's round trip, in milliseconds.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WriteLatencyStatus {
    /// The median.
    pub p50: f64,
    /// The 99th percentile.
    pub p99: f64,
    /// The slowest.
    pub max: f64,
}

/// What a snapshot saved under writes cost (`spec.peak.snapshot`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotStatus {
    /// `process-tree` (the engine's process tree read on its machine), `container-cgroup` (the
    /// engine container's memory cgroup, read by the operator from the kubelet's
    /// /metrics/cadvisor just before and just after) or `engine-only` (the engine's own
    /// figures).
    pub source: String,
    /// The tree's (or the container's) memory just before the save (or a replica's sync), in
    /// bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_bytes: Option<u64>,
    /// The highest during the save (or the sync), in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_bytes: Option<u64>,
    /// peakBytes / beforeBytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
    /// `container-cgroup`: the container's high-water mark after the phase, whatever reached it
    /// (peakBytes is given only when it rose during the phase), in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high_water_bytes: Option<u64>,
    /// Why beforeBytes or peakBytes is missing, when one is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// What the engine says its fork copied (`rdb_last_cow_size`), in bytes; absent when none
    /// was measured: the engine did not fork (Dragonfly's save and sync run in its own process)
    /// or reports no copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cow_bytes: Option<u64>,
    /// The highest `current_cow_peak` the engine reported while its fork child ran, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cow_peak_bytes: Option<u64>,
    /// used_memory just before the save (or the sync), in bytes.
    pub used_memory_before: u64,
    /// From BGSAVE until the engine reported it done (a replica: from REPLICAOF until the
    /// replica said it was in sync), in seconds.
    pub duration_seconds: f64,
    /// The write rate achieved during the save (or the sync).
    pub writes_per_sec: f64,
    /// The write rate asked for (`spec.peak.snapshot.writesPerSecond`, or the replica's); 0 in a
    /// status written
    /// before it was recorded.
    #[serde(default)]
    pub writes_per_sec_asked: u32,
    /// The writes' latency.
    pub write_latency_ms: WriteLatencyStatus,
}

/// The peak phases over the repetitions (`summary.peak`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PeakSummaryStatus {
    /// The snapshot saved under writes, over the repetitions that measured its peak.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<PeakRatioStatus>,
    /// The replica's full sync under writes, over the repetitions that measured the primary's
    /// peak.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<PeakRatioStatus>,
}

/// A peak phase's peakBytes / beforeBytes over the repetitions.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PeakRatioStatus {
    /// The median: what the engine's machine held at the peak against just before it (1.5:
    /// half as much again as its steady memory).
    pub ratio: f64,
    /// The lowest repetition.
    pub min: f64,
    /// The highest repetition.
    pub max: f64,
    /// The repetitions that measured it.
    pub repetitions: u32,
}

/// A repetition's peak phases.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PeakStatus {
    /// The snapshot saved under writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<SnapshotStatus>,
    /// The replica's full sync under writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<ReplicaStatus>,
}

/// What a replica's full sync under writes cost (`spec.peak.replica`): the primary's peak and
/// the replica once in sync.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaStatus {
    /// The primary's figures, in a snapshot's shape: its process tree before and at its
    /// highest during the sync, the copy-on-write of the fork that sent it, the sync's duration
    /// (from REPLICAOF until the replica said it was in sync) and the writes.
    #[serde(flatten)]
    pub primary: SnapshotStatus,
    /// The primary's replication backlog once the replica was in sync
    /// (`mem_replication_backlog`), in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backlog_bytes: Option<u64>,
    /// The primary's used_memory once the replica was in sync (its backlog included), in bytes.
    pub primary_used_memory_after: u64,
    /// The replica's used_memory once in sync, in bytes.
    pub replica_used_memory: u64,
    /// The replica's used_memory_rss once in sync, in bytes.
    pub replica_used_memory_rss: u64,
    /// The keys the replica held once in sync (the primary's, verified).
    pub replica_keys: u64,
    /// The replica at its highest during the sync, in bytes: its process tree where the client
    /// saw it, else its container's memory cgroup read from the kubelet (the high-water mark,
    /// when it rose during the sync).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_peak_bytes: Option<u64>,
}
