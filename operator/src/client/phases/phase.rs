//! What every phase of a repetition is to the repetition that runs it: the [`Phase`] trait a
//! phase's folder implements (its kind, its checks before the load, its run, its warning), the
//! context it runs against, and the failure that names it. `client::phases` lists the phases
//! and runs them.

use crate::client::connection::engine::{EngineAddress, EngineInfo, MemoryInfo};
use crate::client::connection::shards::{Pacing, ReadMemory, ShardSet};
use crate::client::measurement::load_options::LoadOptions;
use crate::client::measurement::measured::{PeakReport, RepetitionResult};
use crate::client::measurement::paced_writes::PeakTarget;
use crate::client::measurement::phase_kind::PhaseKind;
use crate::client::phases::peak::SnapshotReport;
use crate::client::workloads::workload::Workload;
use crate::error::BenchError;

/// One measurement a repetition runs after its readings. An implementation holds its own
/// settings, taken from the plan by its constructor in [`PLANNED`](super::PLANNED) (which
/// returns `None` when the plan does not ask for it); every check has a default that refuses
/// nothing, so a phase writes only the ones it needs.
pub trait Phase {
    /// Which phase this is, as a result names it when it fails.
    fn kind(&self) -> PhaseKind;

    /// Refuses, before anything is written, a workload (or a run setting) this phase cannot
    /// measure. Runs without the engine.
    fn check_workload(
        &self,
        _workload: &Workload,
        _options: &LoadOptions,
    ) -> Result<(), BenchError> {
        Ok(())
    }

    /// Refuses, before anything is written, engines this phase cannot run on: how many there
    /// are, or what another engine it needs answers. May connect to them.
    fn check_addresses(
        &self,
        _addresses: &[EngineAddress],
        _workload: &Workload,
        _options: &LoadOptions,
    ) -> Result<(), BenchError> {
        Ok(())
    }

    /// Refuses, once the engine has identified itself and before the first write, an engine
    /// that cannot do what this phase asks of it.
    fn check_engine(&self, _shards: &mut ShardSet, _engine: &EngineInfo) -> Result<(), BenchError> {
        Ok(())
    }

    /// Runs the phase on the repetition's data and puts its result into the repetition's
    /// record (`measured`); a failure names the phase it happened in.
    fn run(
        &self,
        context: &mut PhaseContext<'_, '_>,
        measured: &mut RepetitionResult,
    ) -> Result<(), PhaseFailure>;

    /// What to tell a reader about this phase over the run's repetitions, said once a run.
    fn warning(&self, _repetitions: &[RepetitionResult]) -> Option<String> {
        None
    }
}

/// Builds a phase from the run's options, `None` when the plan does not ask for it.
pub type PlanPhase = for<'a> fn(&'a LoadOptions) -> Option<Box<dyn Phase + 'a>>;

/// What a phase runs against: the repetition's engines and workload, the run's options and
/// the engine's identity, the repetition's verified count and its bytes per item, and the
/// measurement's own memory reading.
pub struct PhaseContext<'a, 'r> {
    pub shards: &'a mut ShardSet,
    pub workload: &'a Workload,
    pub options: &'a LoadOptions,
    pub engine: &'a EngineInfo,
    /// The repetition's verified count.
    pub items: u64,
    /// The repetition's bytes per item.
    pub bytes_per_item: f64,
    pub read: &'a mut ReadMemory<'r>,
}

impl<'a> PhaseContext<'a, '_> {
    /// The run's batch size, connect timeout and stop, as a phase talks to the engine.
    pub fn pacing(&self) -> Pacing<'a> {
        Pacing {
            pipeline: self.options.settings.pipeline,
            connect_timeout: self.options.settings.connect_timeout,
            stop: &self.options.stop,
        }
    }

    /// The engine a peak phase runs on, and how.
    pub fn peak_target(&self) -> PeakTarget<'a> {
        PeakTarget {
            workload: self.workload,
            engine: &self.engine.name,
            process_id: self.engine.process_id,
            pacing: self.pacing(),
            container: self.options.container.as_deref(),
        }
    }

    /// Reads memory just before a phase (the settled reading, when there was one, is older
    /// than the phase); a failure names `phase`.
    pub fn read_before(
        &mut self,
        phase: PhaseKind,
        reading: &'static str,
    ) -> Result<MemoryInfo, PhaseFailure> {
        (self.read)(self.shards, reading).map_err(failed(phase))
    }
}

/// Runs a peak phase (a snapshot, a replica's sync) the one way both run: a memory reading just
/// before it (`reading` names it), its measurement on the engine (`measure`), and its report
/// kept in the repetition's `peak` (`keep`); a failure names `kind`.
pub fn run_peak<R>(
    context: &mut PhaseContext<'_, '_>,
    kind: PhaseKind,
    reading: &'static str,
    measure: impl FnOnce(&mut ShardSet, &PeakTarget<'_>, &MemoryInfo) -> Result<R, BenchError>,
    keep: impl FnOnce(&mut PeakReport, R),
    measured: &mut RepetitionResult,
) -> Result<(), PhaseFailure> {
    let before = context.read_before(kind.clone(), reading)?;
    let target = context.peak_target();
    let report = measure(context.shards, &target, &before).map_err(failed(kind))?;
    keep(
        measured.peak.get_or_insert_with(PeakReport::default),
        report,
    );
    Ok(())
}

/// A phase that failed after the repetition's readings: which one, and why.
pub struct PhaseFailure {
    pub phase: PhaseKind,
    pub error: BenchError,
}

/// Names the phase a failure happened in.
pub fn failed(phase: PhaseKind) -> impl FnOnce(BenchError) -> PhaseFailure {
    move |error| PhaseFailure { phase, error }
}

/// What to tell a reader when the writes beside a peak phase (this snapshot; a replica's sync,
/// whose primary reports in a snapshot's shape) did not reach 90% of the rate asked in some
/// repetitions: the lowest rate reached, in how many, and that the peak is that of the rate
/// reached. `during` names the phase (`the snapshot`), `field` its setting (`peak.snapshot`).
pub fn writes_shortfall(
    repetitions: &[RepetitionResult],
    during: &str,
    field: &str,
    phase: fn(&RepetitionResult) -> Option<&SnapshotReport>,
) -> Option<String> {
    let short: Vec<(u32, &SnapshotReport)> = repetitions
        .iter()
        .filter_map(|r| Some((r.repetition, phase(r)?)))
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
