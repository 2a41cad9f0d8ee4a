//! The snapshot peak phase (`spec.peak.snapshot`), run after a repetition's readings on the data
//! it loaded: the engine saves a snapshot (`BGSAVE`) while the client overwrites loaded keys at
//! a given rate, and the phase measures what the machine must hold meanwhile. Redis and Valkey
//! fork: every page the parent writes during the save is copied, which `rdb_last_cow_size`
//! counts and the process tree's Pss shows (`client::process_tree`, on the engine's own
//! machine); Dragonfly saves without a fork. The writes end when the save has finished
//! (Redis and Valkey: `INFO persistence`; Dragonfly: the answer to `SAVE` on a connection of
//! its own), within a bound.

pub mod files;
pub mod phase;

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::client::engine::{ControlConnection, MemoryInfo};
pub use crate::client::paced_writes::WriteLatency;
use crate::client::paced_writes::{self, Beside, PacedWrites, PeakTarget, WriteRate};
use crate::client::phase_memory::{PhasePeak, PhaseWatch};
use crate::client::shards::ShardSet;
use crate::client::workload::Workload;
use crate::crd::{EngineKind, SnapshotSpec, SnapshotStatus, WriteLatencyStatus};
use crate::error::BenchError;
use files::SaveFiles;

/// The longest a save may take before the phase fails.
pub const SAVE_BOUND: Duration = Duration::from_secs(600);
/// The snapshot's base name on Dragonfly when its run gave it none (`--dbfilename=`).
const DRAGONFLY_SNAPSHOT: &str = "membench-snapshot";

/// A snapshot phase as asked, checked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Snapshot {
    pub writes_per_sec: u32,
    pub write_share: f64,
}

impl Snapshot {
    pub fn checked(
        spec: &SnapshotSpec,
        field: &dyn Fn(&str) -> String,
    ) -> Result<Self, BenchError> {
        let invalid = |name: &str, message: String| BenchError::InvalidArgument {
            field: field(name),
            message,
        };
        if spec.writes_per_sec == 0 || spec.writes_per_sec > 10_000_000 {
            return Err(invalid(
                "writesPerSecond",
                format!(
                    "is {}: it must be between 1 and 10000000",
                    spec.writes_per_sec
                ),
            ));
        }
        if !(spec.write_share > 0.0 && spec.write_share <= 1.0) {
            return Err(invalid(
                "writeShare",
                format!("is {}: it must be above 0 and at most 1", spec.write_share),
            ));
        }
        Ok(Self {
            writes_per_sec: spec.writes_per_sec,
            write_share: spec.write_share,
        })
    }

    pub fn from_spec(spec: &SnapshotSpec) -> Result<Self, BenchError> {
        Self::checked(spec, &|name| format!("spec.peak.snapshot.{name}"))
    }

    /// The workloads whose loaded items it can overwrite with writes of the same size: strings
    /// and records (the sorted set's `ZADD NX` would write nothing).
    pub fn check_workload(&self, workload: &Workload, field: &str) -> Result<(), BenchError> {
        match workload {
            Workload::Strings { .. } | Workload::Records { .. } => Ok(()),
            other => Err(BenchError::InvalidArgument {
                field: field.to_string(),
                message: format!(
                    "applies to the strings and records workloads (their writes overwrite loaded keys with values of the same size), not to {}",
                    other.kind()
                ),
            }),
        }
    }
}

/// What the save cost.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SnapshotReport {
    /// Where `before_bytes` and `peak_bytes` come from: `process-tree` (the engine's resident
    /// set plus its fork children's private pages, on this machine), `container-cgroup` (the
    /// engine container's memory cgroup, its usage before and its high-water mark after, read
    /// by the operator from the kubelet: `client::container_memory`), or `engine-only` (only
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

/// Whether the save `BGSAVE` started on Redis or Valkey is over: `rdb_bgsave_in_progress`
/// cleared. An error says a failed save failed. `cow_peak` keeps the highest
/// `current_cow_peak` read while the save ran (Redis 7 and later, Valkey).
fn save_done(
    control: &mut ControlConnection,
    cow_peak: &mut Option<u64>,
) -> Result<bool, BenchError> {
    let now = control.info("persistence")?;
    let field = |name: &str| now.get(name).cloned().unwrap_or_default();
    if note_cow_peak(&now, cow_peak) {
        return Ok(false);
    }
    if field("rdb_last_bgsave_status") != "ok" {
        return Err(BenchError::EngineRejected {
            command: "BGSAVE".into(),
            message: "the snapshot failed (rdb_last_bgsave_status:err): the engine's log says why (a full disk, a directory it cannot write, or the save's fork child killed, as the kernel's OOM killer does at a container's memory limit when it picks the child)".into(),
        });
    }
    Ok(true)
}

/// A save under way, and how its end is known.
enum Save {
    /// Redis and Valkey: `BGSAVE` forked a child; INFO persistence says when it is done.
    Forked,
    /// Dragonfly: `SAVE` on a connection of its own, answered when the save has ended (it
    /// blocks that connection only; the engine serves the writes meanwhile). Its INFO cannot
    /// tell: `last_success_save` is the second a save began by a clock of its own, which one
    /// CI run saw a second behind `TIME`, so a save begun in the second of the one before it
    /// left the stamp as it was and its end went unseen for the phase's whole bound.
    /// The thread waiting for the answer; None once it was taken.
    Answered(Option<std::thread::JoinHandle<Result<String, BenchError>>>),
}

impl Save {
    fn start(
        control: &mut ControlConnection,
        engine: &str,
        timeout: Duration,
    ) -> Result<Self, BenchError> {
        let can = EngineKind::capabilities_of(engine);
        if can.forks_to_save {
            control.query::<String>(&mut redis::cmd(can.save_command))?;
            return Ok(Save::Forked);
        }
        let mut own = ControlConnection::open(control.address(), timeout)?;
        own.set_read_timeout(SAVE_BOUND + Duration::from_secs(30))?;
        Ok(Save::Answered(Some(std::thread::spawn(move || {
            own.query::<String>(&mut redis::cmd(can.save_command))
        }))))
    }

    /// Whether the save has ended; an error for a save that failed. `cow_peak` as in
    /// `save_done` (Dragonfly does not fork: never set).
    fn done(
        &mut self,
        control: &mut ControlConnection,
        cow_peak: &mut Option<u64>,
    ) -> Result<bool, BenchError> {
        let Save::Answered(answer) = self else {
            return save_done(control, cow_peak);
        };
        if answer.as_ref().is_some_and(|handle| !handle.is_finished()) {
            return Ok(false);
        }
        let Some(handle) = answer.take() else {
            return Ok(true);
        };
        let failed = |message: String| BenchError::EngineRejected {
            command: "SAVE".into(),
            message,
        };
        match handle.join() {
            Ok(Ok(_)) => Ok(true),
            Ok(Err(BenchError::EngineRejected { message, .. })) => {
                Err(failed(format!("the snapshot failed: {message}")))
            }
            Ok(Err(other)) => Err(other),
            Err(_) => Err(failed(
                "the thread waiting for the save's answer panicked".into(),
            )),
        }
    }
}

/// Runs the phase on a single engine (the shards of a cluster each fork on their own; not
/// measured here): `BGSAVE`, paced overwrites of `write_share` of the loaded items until the
/// save is done, the process tree's peak sampled meanwhile when the engine is on this machine.
pub fn run(
    shards: &mut ShardSet,
    snapshot: &Snapshot,
    target: &PeakTarget<'_>,
    before: &MemoryInfo,
) -> Result<SnapshotReport, BenchError> {
    let connect_timeout = target.pacing.connect_timeout;
    let mut kept_name = None;
    let names_its_file = EngineKind::capabilities_of(target.engine).save_needs_file_name;
    if names_its_file {
        let pair: Vec<String> = shards
            .first()
            .query(redis::cmd("CONFIG").arg("GET").arg("dbfilename"))?;
        if pair.get(1).is_some_and(|name| name.is_empty()) {
            shards.first().query::<()>(
                redis::cmd("CONFIG")
                    .arg("SET")
                    .arg("dbfilename")
                    .arg(DRAGONFLY_SNAPSHOT),
            )?;
            kept_name = Some(String::new());
        }
    }
    let files = names_its_file
        .then(|| SaveFiles::before_save(shards.first(), target.process_id))
        .flatten();
    let watch = PhaseWatch::start(target.process_id, target.container);
    let started = Instant::now();
    let mut cow_peak_bytes = None;
    let beside = Beside {
        phase: "snapshot",
        command: "BGSAVE",
        rate: WriteRate {
            writes_per_sec: snapshot.writes_per_sec,
            write_share: snapshot.write_share,
        },
        bound: SAVE_BOUND,
        unfinished: "the snapshot did not finish".into(),
    };
    let result =
        Save::start(shards.first(), target.engine, connect_timeout).and_then(|mut save| {
            paced_writes::write_until(shards, target, &beside, &mut |shards| {
                save.done(shards.first(), &mut cow_peak_bytes)
            })
        });
    let duration = started.elapsed().as_secs_f64();
    let tree = watch.finish(result.is_ok());
    if let Some(name) = kept_name {
        shards
            .first()
            .query::<()>(redis::cmd("CONFIG").arg("SET").arg("dbfilename").arg(name))?;
    }
    // What the save wrote is the benchmark's data, not the user's: removed where it is here.
    for left in files.iter().flat_map(SaveFiles::remove_new) {
        eprintln!("warning: cannot remove the snapshot file Dragonfly wrote: {left}");
    }
    let writes = result?;
    let cow_bytes = last_cow_size(shards.first())?;
    Ok(SnapshotReport::of(
        tree,
        before,
        duration,
        writes,
        snapshot.writes_per_sec,
        cow_bytes,
        cow_peak_bytes,
    ))
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

    #[test]
    fn a_rate_or_share_outside_its_range_is_refused_naming_the_field() {
        let refusal = |writes_per_sec, write_share| {
            Snapshot::from_spec(&SnapshotSpec {
                writes_per_sec,
                write_share,
            })
            .unwrap_err()
            .to_string()
        };
        assert!(refusal(0, 1.0).contains("spec.peak.snapshot.writesPerSecond"));
        assert!(refusal(1000, 0.0).contains("spec.peak.snapshot.writeShare"));
        assert!(refusal(1000, 1.5).contains("at most 1"));
        let sorted = Workload::SortedSet {
            members: 10,
            key: "k".into(),
            sample_every: 0,
        };
        let ok = Snapshot::from_spec(&SnapshotSpec {
            writes_per_sec: 1000,
            write_share: 1.0,
        })
        .unwrap();
        assert!(
            ok.check_workload(&sorted, "spec.peak")
                .unwrap_err()
                .to_string()
                .contains("strings and records")
        );
    }
}
