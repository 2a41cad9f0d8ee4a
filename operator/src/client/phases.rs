//! The phases a repetition runs after its readings, in order, on the data it loaded: a
//! snapshot under writes (`client::snapshot`), the churn and its defragmentation
//! (`client::churn`, `client::defrag`), and last the load past maxmemory
//! (`client::eviction`), which empties the engine. `client::measure` calls them once per
//! repetition with its own memory reading. A phase that fails ends the phases after it, and
//! what the repetition measured before it (its readings, the phases that finished) is kept.

use std::time::Duration;

use crate::client::churn::{self, ChurnReport};
use crate::client::defrag;
use crate::client::engine::EngineInfo;
use crate::client::eviction::{self, EvictionReport};
use crate::client::load_options::LoadOptions;
use crate::client::measured::{PeakReport, RepetitionResult};
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
    /// `snapshot`, `churn`, `defrag` or `eviction`.
    pub phase: &'static str,
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
            pipeline: options.pipeline,
            connect_timeout: options.connect_timeout,
            stop: &options.stop,
        };
        if let Some(phase) = &options.snapshot {
            // Read again: the settled reading, when there was one, is older than the save.
            let before = read(shards, "before the snapshot").map_err(failed("snapshot"))?;
            let report = snapshot::run(
                shards,
                workload,
                phase,
                &engine.name,
                engine.process_id,
                &before,
                &pacing,
            )
            .map_err(failed("snapshot"))?;
            phases.peak = Some(PeakReport {
                snapshot: Some(report),
            });
        }
        if let Some(phase) = &options.churn {
            let report = churn::run(shards, workload, phase, items, &pacing, read)
                .map_err(failed("churn"))?;
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
                    .map_err(failed("defrag"))?,
                );
            }
        }
        if let Some(phase) = &options.eviction {
            phases.eviction = Some(
                eviction::run(
                    shards,
                    workload,
                    phase,
                    &engine.name,
                    bytes_per_item,
                    &pacing,
                )
                .map_err(failed("eviction"))?,
            );
        }
        Ok(())
    };
    if let Err(failure) = in_order(&mut phases) {
        phases.failed = Some(failure);
    }
    phases
}

/// Names the phase a failure happened in.
fn failed(phase: &'static str) -> impl FnOnce(BenchError) -> PhaseFailure {
    move |error| PhaseFailure { phase, error }
}

/// What to tell a reader when the writes of some repetitions' snapshots did not reach 90% of
/// the rate asked: the lowest rate reached, in how many, and that the peak is that of the rate
/// reached (one warning for the run).
pub fn snapshot_shortfall(repetitions: &[RepetitionResult]) -> Option<String> {
    let short: Vec<(u32, &SnapshotReport)> = repetitions
        .iter()
        .filter_map(|r| Some((r.repetition, r.peak.as_ref()?.snapshot.as_ref()?)))
        .filter(|(_, s)| s.writes_per_sec < 0.9 * f64::from(s.writes_per_sec_asked))
        .collect();
    let (repetition, lowest) = short
        .iter()
        .min_by(|a, b| a.1.writes_per_sec.total_cmp(&b.1.writes_per_sec))?;
    Some(format!(
        "the writes during the snapshot reached under 90% of the {} a second asked (peak.snapshot.writesPerSecond) in {} of {} repetitions, {:.0} a second at the lowest (repetition {repetition}): the engine or this client could not keep up, and each peak measured is that of the rate reached",
        lowest.writes_per_sec_asked,
        short.len(),
        repetitions.len(),
        lowest.writes_per_sec
    ))
}
