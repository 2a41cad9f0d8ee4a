//! What a peak phase under writes reports, shared by the two that fork: the snapshot phase
//! (`snapshot`) and the replica's full sync (`replica`), whose primary reports in a snapshot's
//! shape ([`SnapshotReport`]). The copy-on-write readings (`INFO persistence`) and the warning
//! when the writes beside the peak fell short are the same for both.

use serde::{Deserialize, Serialize};

use crate::client::connection::engine::{ControlConnection, MemoryInfo};
use crate::client::measurement::paced_writes::PacedWrites;
pub use crate::client::measurement::paced_writes::WriteLatency;
use crate::client::measurement::phase_memory::PhasePeak;
use crate::crd::{SnapshotStatus, WriteLatencyStatus};
use crate::error::BenchError;

/// What a save (or a full sync's fork) cost, and the writes beside it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SnapshotReport {
    /// Where `before_bytes` and `peak_bytes` come from: `process-tree` (the engine's resident
    /// set plus its fork children's private pages, on this machine), `container-cgroup` (the
    /// engine container's memory cgroup, its usage before and its high-water mark after, read
    /// by the operator from the kubelet: `client::measurement::container_memory`), or `engine-only` (only
    /// the engine's own figures).
    pub source: String,
    /// The engine's process tree just before the save, and the highest read during it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_bytes: Option<u64>,
    /// peak_bytes / before_bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
    /// The interval the sampler aimed at, and the readings it took (the achieved interval is
    /// duration_seconds / samples); 0 and 0 for `container-cgroup`, whose high-water mark the
    /// kernel keeps.
    pub sample_interval_ms: u64,
    pub samples: u64,
    /// `container-cgroup`: the container's high-water mark after the phase, whatever reached
    /// it (`peak_bytes` is given only when it rose during the phase).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high_water_bytes: Option<u64>,
    /// Why `before_bytes` or `peak_bytes` is missing, when one is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// What the engine says the fork copied (`rdb_last_cow_size`, where the engine reports
    /// it; Dragonfly 1.40 does not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cow_bytes: Option<u64>,
    /// Why `cow_bytes` is missing, from what was measured: the engine's process tree held
    /// one process throughout (no fork), or it forked and the engine reports no copy, or its
    /// processes could not be counted from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cow_note: Option<String>,
    /// `process-tree`: the most processes the engine's tree held at a reading (1: the save
    /// or sync ran without a fork, as far as readings every `sample_interval_ms` can see).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub most_processes: Option<u64>,
    /// The highest `current_cow_peak` the engine reported while the save ran (read every
    /// 25 ms with the save's progress; Redis 7 and later, Valkey).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cow_peak_bytes: Option<u64>,
    pub used_memory_before: u64,
    pub used_memory_rss_before: u64,
    /// From `BGSAVE` until the engine reported the save done.
    pub duration_seconds: f64,
    pub writes: u64,
    /// The rate achieved (asked for: `writes_per_sec_asked`).
    pub writes_per_sec: f64,
    pub writes_per_sec_asked: u32,
    pub write_latency_ms: WriteLatency,
    /// The longest the writes waited on one of the phase's polls (`INFO` to the engine or
    /// the replica), in milliseconds: the writes due during the last one are never sent.
    #[serde(default)]
    pub longest_poll_ms: f64,
}

impl From<&SnapshotReport> for SnapshotStatus {
    fn from(r: &SnapshotReport) -> Self {
        SnapshotStatus {
            source: r.source.clone(),
            before_bytes: r.before_bytes,
            peak_bytes: r.peak_bytes,
            ratio: r.ratio,
            high_water_bytes: r.high_water_bytes,
            note: r.note.clone(),
            cow_bytes: r.cow_bytes,
            cow_note: r.cow_note.clone(),
            most_processes: r.most_processes,
            cow_peak_bytes: r.cow_peak_bytes,
            used_memory_before: r.used_memory_before,
            duration_seconds: r.duration_seconds,
            writes_per_sec: r.writes_per_sec,
            writes: Some(r.writes),
            writes_per_sec_asked: r.writes_per_sec_asked,
            write_latency_ms: WriteLatencyStatus {
                p50: r.write_latency_ms.p50,
                p99: r.write_latency_ms.p99,
                max: r.write_latency_ms.max,
            },
        }
    }
}

impl SnapshotReport {
    /// A phase's figures: what the engine's tree did (`tree`), its memory just before
    /// (`before`), the phase's seconds, the writes beside it and the rate asked for, and the
    /// copy-on-write the engine reported (none where it reports none: why is then said in
    /// `cow_note`, from the processes the tree held).
    pub fn of(
        tree: PhasePeak,
        before: &MemoryInfo,
        duration_seconds: f64,
        writes: PacedWrites,
        writes_per_sec_asked: u32,
        cow_bytes: Option<u64>,
        cow_peak_bytes: Option<u64>,
    ) -> Self {
        Self {
            cow_note: missing_cow_reason(cow_bytes, tree.most_processes, tree.samples),
            most_processes: tree.most_processes,
            source: tree.source.into(),
            ratio: tree.ratio(),
            before_bytes: tree.before_bytes,
            peak_bytes: tree.peak_bytes,
            sample_interval_ms: tree.sample_interval_ms,
            samples: tree.samples,
            high_water_bytes: tree.high_water_bytes,
            note: tree.note,
            cow_bytes,
            cow_peak_bytes,
            used_memory_before: before.used_memory,
            used_memory_rss_before: before.used_memory_rss,
            duration_seconds,
            writes: writes.writes,
            writes_per_sec: writes.writes as f64 / duration_seconds.max(1e-9),
            writes_per_sec_asked,
            write_latency_ms: WriteLatency::of(writes.latencies_ms),
            longest_poll_ms: writes.longest_poll_ms,
        }
    }
}

/// Why an engine's copy-on-write figure is missing, read from what the phase measured: the
/// most processes its tree held (`most_processes`, process-tree only) over `samples` readings.
/// None when the engine reported the figure.
pub fn missing_cow_reason(
    cow_bytes: Option<u64>,
    most_processes: Option<u64>,
    samples: u64,
) -> Option<String> {
    if cow_bytes.is_some() {
        return None;
    }
    Some(match most_processes {
        Some(1) => format!(
            "no fork: the engine's process tree held one process at each of {samples} readings"
        ),
        Some(most) => format!(
            "the engine forked ({most} processes at most) but reports no copy-on-write size \
             (INFO persistence rdb_last_cow_size)"
        ),
        None => "the engine reports no copy-on-write size (INFO persistence \
                 rdb_last_cow_size), and its processes were not counted (they are not on \
                 this machine)"
            .into(),
    })
}

/// Whether a fork child runs, from `INFO persistence` (`rdb_bgsave_in_progress`: a save, or a
/// replica's full sync); while one does, `cow_peak` keeps the highest `current_cow_peak` read
/// (Redis 7 and later, Valkey).
pub fn note_cow_peak(
    persistence: &std::collections::HashMap<String, String>,
    cow_peak: &mut Option<u64>,
) -> bool {
    let field = |name: &str| {
        persistence
            .get(name)
            .map(String::as_str)
            .unwrap_or_default()
    };
    if field("rdb_bgsave_in_progress") != "1" {
        return false;
    }
    if let Ok(copied) = field("current_cow_peak").parse::<u64>() {
        *cow_peak = Some(cow_peak.unwrap_or(0).max(copied));
    }
    true
}

/// What the engine's last fork copied (`rdb_last_cow_size`), where it reports it.
pub fn last_cow_size(control: &mut ControlConnection) -> Result<Option<u64>, BenchError> {
    Ok(control
        .info("persistence")?
        .get("rdb_last_cow_size")
        .and_then(|v| v.parse::<u64>().ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_copy_is_explained_by_the_processes_the_tree_held() {
        assert_eq!(missing_cow_reason(Some(0), Some(2), 40), None);
        assert_eq!(missing_cow_reason(Some(9_000), None, 0), None);
        let single = missing_cow_reason(None, Some(1), 40).unwrap();
        assert!(
            single.contains("no fork") && single.contains("one process at each of 40"),
            "{single}"
        );
        let forked = missing_cow_reason(None, Some(2), 40).unwrap();
        assert!(
            forked.contains("forked (2 processes") && forked.contains("rdb_last_cow_size"),
            "{forked}"
        );
        let elsewhere = missing_cow_reason(None, None, 0).unwrap();
        assert!(elsewhere.contains("not on this machine"), "{elsewhere}");
    }
}
