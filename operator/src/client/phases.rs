//! The phases a repetition runs after its readings, in order, on the data it loaded: a
//! snapshot under writes (`client::snapshot`), a replica's full sync under writes
//! (`client::replica`), the churn and its defragmentation
//! (`client::churn`, `client::defrag`), and last the load past maxmemory
//! (`client::eviction`), which empties the engine. `client::measure` calls them once per
//! repetition with its own memory reading. A phase that fails ends the phases after it, and
//! what the repetition measured before it (its readings, the phases that finished) is kept.

use std::time::Duration;

use crate::client::churn::{self, ChurnReport};
use crate::client::defrag;
use crate::client::engine::EngineInfo;
use crate::client::engine::{EngineAddress, MemoryInfo};
use crate::client::eviction::{self, EvictionReport};
use crate::client::load_options::LoadOptions;
use crate::client::measured::{PeakReport, RepetitionResult};
use crate::client::paced_writes::PeakTarget;
pub use crate::client::phase_kind::PhaseKind;
use crate::client::replica;
use crate::client::shards::{Pacing, ReadMemory, ShardSet};
use crate::client::snapshot;
use crate::client::snapshot::SnapshotReport;
use crate::client::workload::Workload;
use crate::error::BenchError;

/// What the phases measured (each absent when the run did not ask for it, or when it or one
/// before it failed), and the failure that ended them.
#[derive(Default)]
pub struct Phases {
    pub peak: Option<PeakReport>,
    pub churn: Option<ChurnReport>,
    pub eviction: Option<EvictionReport>,
    pub failed: Option<PhaseFailure>,
}

/// A phase that failed after the repetition's readings: which one, and why.
pub struct PhaseFailure {
    pub phase: PhaseKind,
    pub error: BenchError,
}

/// Runs the phases `options` asks for: `items` is the repetition's verified count,
/// `bytes_per_item` its figure, `read` the measurement's own reading. Each phase's report is
/// kept as soon as it is done; the first that fails ends them (`Phases::failed`).
pub fn after_readings(
    shards: &mut ShardSet,
    workload: &Workload,
    options: &LoadOptions,
    engine: &EngineInfo,
    items: u64,
    bytes_per_item: f64,
    read: &mut ReadMemory<'_>,
) -> Phases {
    let mut phases = Phases::default();
    let mut in_order = |phases: &mut Phases| -> Result<(), PhaseFailure> {
        let pacing = Pacing {
            pipeline: options.settings.pipeline,
            connect_timeout: options.settings.connect_timeout,
            stop: &options.stop,
        };
        let target = PeakTarget {
            workload,
            engine: &engine.name,
            process_id: engine.process_id,
            pacing,
            container: options.container.as_deref(),
        };
        if let Some(phase) = &options.settings.snapshot {
            let report = after_reading(
                shards,
                read,
                PhaseKind::Snapshot,
                "before the snapshot",
                |s, b| snapshot::run(s, phase, &target, b),
            )?;
            phases.peak.get_or_insert_with(PeakReport::default).snapshot = Some(report);
        }
        if let Some(phase) = &options.replica() {
            let report = after_reading(
                shards,
                read,
                PhaseKind::Replica,
                "before the sync",
                |s, b| replica::run(s, phase, &target, b),
            )?;
            phases.peak.get_or_insert_with(PeakReport::default).replica = Some(report);
        }
        if let Some(phase) = &options.settings.churn {
            let report = churn::run(shards, workload, phase, items, &pacing, read)
                .map_err(failed(PhaseKind::Churn))?;
            let churn = phases.churn.insert(report);
            if phase.defrag {
                churn.defrag = Some(
                    defrag::run(
                        shards,
                        &engine.name,
                        Duration::from_secs(u64::from(phase.defrag_seconds)),
                        read,
                        &options.stop,
                    )
                    .map_err(failed(PhaseKind::Defrag))?,
                );
            }
        }
        if let Some(phase) = &options.settings.eviction {
            phases.eviction = Some(
                eviction::run(
                    shards,
                    workload,
                    phase,
                    &engine.name,
                    bytes_per_item,
                    &pacing,
                )
                .map_err(failed(PhaseKind::Eviction))?,
            );
        }
        Ok(())
    };
    if let Err(failure) = in_order(&mut phases) {
        phases.failed = Some(failure);
    }
    phases
}

/// What the peak phases asked for cannot do with these engines and this workload, said before
/// anything is written: a snapshot or a replica of several shards (each forks on its own), a
/// workload whose writes would not overwrite loaded keys, a replica that does not answer, is
/// the engine itself or holds keys.
pub fn check_peak(
    addresses: &[EngineAddress],
    workload: &Workload,
    options: &LoadOptions,
) -> Result<(), BenchError> {
    if let Some(snapshot) = &options.settings.snapshot {
        if addresses.len() > 1 {
            return Err(BenchError::InvalidArgument {
                field: "peak.snapshot".into(),
                message: format!(
                    "measures one engine's save; a cluster of {} shards forks each on its own: measure one shard",
                    addresses.len()
                ),
            });
        }
        snapshot.check_workload(workload, "peak.snapshot")?;
    }
    match &options.replica() {
        Some(replica) => replica
            .check_before_writes(
                addresses,
                workload,
                options.settings.connect_timeout,
                "peak.replica",
                !options.settings.refuse_existing_keys,
            )
            .map(|note| {
                if let Some(note) = note {
                    eprintln!("warning: {note}");
                }
            }),
        None => Ok(()),
    }
}

/// Runs a peak phase on a memory reading of its own, taken just before it (the settled
/// reading, when there was one, is older than the phase); a failure of either names `phase`.
fn after_reading<T>(
    shards: &mut ShardSet,
    read: &mut ReadMemory<'_>,
    phase: PhaseKind,
    reading: &'static str,
    run: impl FnOnce(&mut ShardSet, &MemoryInfo) -> Result<T, BenchError>,
) -> Result<T, PhaseFailure> {
    let before = read(shards, reading).map_err(failed(phase))?;
    run(shards, &before).map_err(failed(phase))
}

/// Names the phase a failure happened in.
fn failed(phase: PhaseKind) -> impl FnOnce(BenchError) -> PhaseFailure {
    move |error| PhaseFailure { phase, error }
}

/// What to tell a reader when the writes of some repetitions' peak phases (a snapshot, a
/// replica's sync) did not reach 90% of the rate asked: per phase, the lowest rate reached, in
/// how many, and that the peak is that of the rate reached (one warning per phase for the run).
pub fn peak_shortfalls(repetitions: &[RepetitionResult]) -> Vec<String> {
    fn snapshot(p: &PeakReport) -> Option<&SnapshotReport> {
        p.snapshot.as_ref()
    }
    fn replica(p: &PeakReport) -> Option<&SnapshotReport> {
        p.replica.as_ref().map(|r| &r.primary)
    }
    [
        shortfall(repetitions, "the snapshot", "peak.snapshot", snapshot),
        shortfall(repetitions, "the replica's sync", "peak.replica", replica),
    ]
    .into_iter()
    .flatten()
    .collect()
}

fn shortfall(
    repetitions: &[RepetitionResult],
    during: &str,
    field: &str,
    phase: fn(&PeakReport) -> Option<&SnapshotReport>,
) -> Option<String> {
    let short: Vec<(u32, &SnapshotReport)> = repetitions
        .iter()
        .filter_map(|r| Some((r.repetition, phase(r.peak.as_ref()?)?)))
        .filter(|(_, s)| s.writes_per_sec < 0.9 * f64::from(s.writes_per_sec_asked))
        .collect();
    let (repetition, lowest) = short
        .iter()
        .min_by(|a, b| a.1.writes_per_sec.total_cmp(&b.1.writes_per_sec))?;
    Some(format!(
        "the writes during {during} reached under 90% of the {} a second asked ({field}.writesPerSecond) in {} of {} repetitions, {:.0} a second at the lowest (repetition {repetition}): the engine or this client could not keep up, and each peak measured is that of the rate reached",
        lowest.writes_per_sec_asked,
        short.len(),
        repetitions.len(),
        lowest.writes_per_sec
    ))
}
