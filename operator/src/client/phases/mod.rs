//! The phases a repetition runs after its readings, in order, on the data it loaded: a
//! snapshot under writes (`snapshot`), a replica's full sync under writes (`replica`), the
//! churn and its defragmentation (`churn`, `churn::defrag`), and last the load past maxmemory
//! (`eviction`), which empties the engine. Each phase is a folder here that owns its settings
//! (read from the run's plan), its checks, its run and its result, and implements [`Phase`];
//! [`PLANNED`] lists them in the order they run, and is the one place a new phase is
//! registered. `client::measurement::measure` asks them for their checks before the load and runs them once
//! per repetition with its own memory reading. A phase that fails ends the phases after it,
//! and what the repetition measured before it (its readings, the phases that finished) is kept.
//! What a phase adds to the reports beyond the comparison's columns (a table, a chart) it
//! implements as [`PhaseFigures`] (`figures.rs`), listed in [`FIGURES`].
//!
//! Rank 2 among the client's groups: it imports `connection`, `workloads` and `measurement`.
//! It shares its rank with `measurement`, and the two import each other: each phase runs with
//! the load options and writes into the repetition's record, and the record and the plan's
//! settings hold each phase's report and settings. That is the one known cycle between the
//! groups.

pub mod churn;
pub mod eviction;
pub mod figures;
pub mod peak;
pub mod phase;
pub mod replica;
pub mod snapshot;

use crate::client::connection::engine::{EngineAddress, EngineInfo};
use crate::client::connection::shards::ShardSet;
use crate::client::measurement::load_options::LoadOptions;
use crate::client::measurement::measured::RepetitionResult;
pub use crate::client::measurement::phase_kind::PhaseKind;
use crate::client::workloads::workload::Workload;
use crate::crd::MemoryBenchmarkSpec;
use crate::error::BenchError;
pub use figures::{PhaseFigures, StageChart, StageLine};
pub use phase::{Phase, PhaseContext, PhaseFailure, PlanPhase};

/// Every phase, in the order a repetition runs them: the eviction last, since it empties the
/// engine. A new phase adds its folder and one line here.
pub const PLANNED: [PlanPhase; 4] = [
    snapshot::phase::planned,
    replica::phase::planned,
    churn::phase::planned,
    eviction::phase::planned,
];

/// The phases that add a table or a chart to the reports, in the order a repetition runs
/// them. A phase whose figures are columns of the comparison only is not listed.
pub const FIGURES: [&dyn PhaseFigures; 1] = [&churn::figures::ChurnFigures];

/// The phases a spec asks of one engine entry, as a run plan holds them: the one place a
/// spec's phases become settings (`validation::run_plan`) and are checked against the spec's
/// workload and engines (`validation`). A new phase adds its field here.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SpecPhases {
    pub snapshot: Option<snapshot::Snapshot>,
    pub replica: Option<replica::ReplicaRate>,
    pub churn: Option<churn::Churn>,
    pub eviction: Option<eviction::Eviction>,
}

impl SpecPhases {
    /// Engine entry `entry`'s phases, each checked on its own (its ranges; the eviction's
    /// maxmemory and policy from `spec.eviction` or the entry's own config).
    pub fn of_entry(spec: &MemoryBenchmarkSpec, entry: usize) -> Result<Self, BenchError> {
        let peak = spec.peak.as_ref();
        Ok(Self {
            snapshot: peak
                .and_then(|p| p.snapshot.as_ref())
                .map(snapshot::Snapshot::from_spec)
                .transpose()?,
            replica: peak
                .and_then(|p| p.replica.as_ref())
                .map(replica::ReplicaRate::from_spec)
                .transpose()?,
            churn: spec
                .churn
                .as_ref()
                .map(churn::Churn::from_spec)
                .transpose()?,
            eviction: match (&spec.eviction, spec.engines.get(entry)) {
                (Some(asked), Some(engine)) => {
                    Some(eviction::Eviction::for_entry(asked, engine, entry)?)
                }
                _ => None,
            },
        })
    }

    /// What they cannot do with the spec's workload (`has_ttl`: its keys expire) and engines,
    /// said before anything runs.
    pub fn check_spec(
        &self,
        spec: &MemoryBenchmarkSpec,
        workload: &Workload,
        has_ttl: bool,
    ) -> Result<(), BenchError> {
        if let Some(churn) = &self.churn {
            churn.check_workload(workload, has_ttl, "spec.churn")?;
        }
        if let Some(snapshot) = &self.snapshot {
            snapshot.check_spec(spec, workload)?;
        }
        if let Some(replica) = &self.replica {
            replica.check_spec(spec, workload)?;
        }
        if let Some(eviction) = &self.eviction {
            eviction.check_workload(workload, "spec.eviction")?;
        }
        Ok(())
    }
}

/// The phases the run's plan asks for, in the order they run.
pub fn planned(options: &LoadOptions) -> Vec<Box<dyn Phase + '_>> {
    PLANNED.iter().filter_map(|plan| plan(options)).collect()
}

/// Runs the phases `options` asks for, in order, into `measured`: each phase's result is kept
/// as soon as it is done; the first that fails ends them, and is returned.
pub fn after_readings(
    context: &mut PhaseContext<'_, '_>,
    measured: &mut RepetitionResult,
) -> Option<PhaseFailure> {
    planned(context.options)
        .iter()
        .find_map(|phase| phase.run(context, measured).err())
}

/// What the phases asked for cannot do with this workload, said before anything is written.
pub fn check_workload(workload: &Workload, options: &LoadOptions) -> Result<(), BenchError> {
    planned(options)
        .iter()
        .try_for_each(|phase| phase.check_workload(workload, options))
}

/// What the phases asked for cannot do with these engines, said before anything is written
/// (a snapshot of several shards, a replica that does not answer, is the engine itself or
/// holds keys).
pub fn check_addresses(
    addresses: &[EngineAddress],
    workload: &Workload,
    options: &LoadOptions,
) -> Result<(), BenchError> {
    planned(options)
        .iter()
        .try_for_each(|phase| phase.check_addresses(addresses, workload, options))
}

/// What the phases asked for cannot do with the engine that identified itself as `engine`,
/// said before any write.
pub fn check_engine(
    shards: &mut ShardSet,
    engine: &EngineInfo,
    options: &LoadOptions,
) -> Result<(), BenchError> {
    planned(options)
        .iter()
        .try_for_each(|phase| phase.check_engine(shards, engine))
}

/// What the phases tell a reader over the run's repetitions, one warning per phase at most.
pub fn warnings(repetitions: &[RepetitionResult], options: &LoadOptions) -> Vec<String> {
    planned(options)
        .iter()
        .filter_map(|phase| phase.warning(repetitions))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::connection::engine::EngineAddress;
    use crate::client::measurement::plan::RunSettings;
    use crate::client::phases::churn::Churn;
    use crate::client::phases::eviction::Eviction;
    use crate::client::phases::replica::ReplicaRate;
    use crate::client::phases::snapshot::Snapshot;

    /// A run whose plan asks for every phase, with a replica to sync.
    fn every_phase() -> LoadOptions {
        LoadOptions {
            replica_address: Some(EngineAddress::parse("127.0.0.1:6390", None).unwrap()),
            ..LoadOptions::of(RunSettings {
                snapshot: Some(Snapshot {
                    writes_per_sec: 1000,
                    write_share: 1.0,
                }),
                replica: Some(ReplicaRate {
                    writes_per_sec: 1000,
                }),
                churn: Some(Churn {
                    rounds: 1,
                    delete_share: Some(0.5),
                    overwrite_share: None,
                    overwrite_value_size: 0,
                    defrag: true,
                    defrag_seconds: 10,
                    seed: 1,
                }),
                eviction: Some(Eviction {
                    maxmemory: 1 << 20,
                    policy: "allkeys-lru".into(),
                    load_to: 2.0,
                }),
                ..RunSettings::default()
            })
        }
    }

    fn kinds(options: &LoadOptions) -> Vec<PhaseKind> {
        planned(options).iter().map(|phase| phase.kind()).collect()
    }

    #[test]
    fn the_phases_run_in_the_order_results_were_always_measured_in_eviction_last() {
        // The eviction empties the engine: a phase after it would measure nothing.
        assert_eq!(
            kinds(&every_phase()),
            [
                PhaseKind::Snapshot,
                PhaseKind::Replica,
                PhaseKind::Churn,
                PhaseKind::Eviction
            ]
        );
    }

    #[test]
    fn a_phase_the_plan_does_not_ask_for_does_not_run() {
        assert_eq!(kinds(&LoadOptions::default()), Vec::<PhaseKind>::new());
        let mut options = every_phase();
        options.settings.churn = None;
        // A replica's sync needs the replica too: the rate alone does not plan it.
        options.replica_address = None;
        assert_eq!(kinds(&options), [PhaseKind::Snapshot, PhaseKind::Eviction]);
    }
}
