//! The snapshot peak phase (`spec.peak.snapshot`), run after a repetition's readings on the data
//! it loaded: the engine saves a snapshot (`BGSAVE`) while the client overwrites loaded keys at
//! a given rate, and the phase measures what the machine must hold meanwhile. Redis and Valkey
//! fork: every page the parent writes during the save is copied, which `rdb_last_cow_size`
//! counts and the process tree's Pss shows (`client::measurement::process_tree`, on the engine's own
//! machine); Dragonfly saves without a fork. The writes end when the save has finished
//! (Redis and Valkey: `INFO persistence`; Dragonfly: the answer to `SAVE` on a connection of
//! its own), within a bound.

pub mod files;
pub mod phase;

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::client::connection::engine::{ControlConnection, MemoryInfo};
use crate::client::connection::shards::ShardSet;
use crate::client::measurement::paced_writes::{self, Beside, PeakTarget, WriteRate};
use crate::client::measurement::phase_memory::PhaseWatch;
use crate::client::phases::peak::{SnapshotReport, last_cow_size, note_cow_peak};
use crate::client::workloads::workload::Workload;
use crate::crd::{EngineKind, MemoryBenchmarkSpec, SnapshotSpec};
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

    /// What it cannot do with a spec's workload and engines: a workload it cannot overwrite, an
    /// entry of several shards (each forks on its own).
    pub fn check_spec(
        &self,
        spec: &MemoryBenchmarkSpec,
        workload: &Workload,
    ) -> Result<(), BenchError> {
        self.check_workload(workload, "spec.peak.snapshot")?;
        match spec
            .engines
            .iter()
            .position(|e| e.shards.is_some_and(|n| n > 1))
        {
            Some(i) => Err(BenchError::InvalidArgument {
                field: "spec.peak.snapshot".into(),
                message: format!(
                    "measures one engine's save, and spec.engines[{i}] is a sharded cluster whose shards each fork on their own: measure it without shards, or remove peak"
                ),
            }),
            None => Ok(()),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

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
