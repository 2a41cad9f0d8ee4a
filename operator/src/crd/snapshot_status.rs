//! A repetition's snapshot under writes in the status (`spec.peak.snapshot`), in the shape a
//! replica's primary reports too. The client's result names it in snake_case
//! (`client::phases::snapshot`); the status in camelCase.

use serde::{Deserialize, Serialize};

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
    /// or reports no copy. `cowNote` says which.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cow_bytes: Option<u64>,
    /// Why `cowBytes` is absent, from what was measured: the engine's processes held one at
    /// every reading (no fork), or it forked and reports no copy, or its processes were not
    /// counted (a client pod cannot see them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cow_note: Option<String>,
    /// The most processes the engine's process tree held at a reading during the save (1: no
    /// fork); absent where they could not be counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub most_processes: Option<u64>,
    /// The highest `current_cow_peak` the engine reported while its fork child ran, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cow_peak_bytes: Option<u64>,
    /// used_memory just before the save (or the sync), in bytes.
    pub used_memory_before: u64,
    /// From BGSAVE until the engine reported it done (a replica: from REPLICAOF until the
    /// replica said it was in sync), in seconds.
    pub duration_seconds: f64,
    /// The write rate achieved during the save (or the sync): `writes` over `durationSeconds`.
    pub writes_per_sec: f64,
    /// The writes sent and answered during the save (or the sync); absent in a status written
    /// before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writes: Option<u64>,
    /// The write rate asked for (`spec.peak.snapshot.writesPerSecond`, or the replica's); 0 in a
    /// status written
    /// before it was recorded.
    #[serde(default)]
    pub writes_per_sec_asked: u32,
    /// The writes' latency.
    pub write_latency_ms: WriteLatencyStatus,
}
