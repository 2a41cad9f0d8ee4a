//! The replica's sync as one of a repetition's phases: taken from the plan's `replica` rate
//! and the run's replica address, checked against the engines before any write, run on a
//! memory reading of its own, and warned about when its writes fell short of the rate asked.

use crate::client::connection::engine::EngineAddress;
use crate::client::measurement::load_options::LoadOptions;
use crate::client::measurement::measured::RepetitionResult;
use crate::client::measurement::phase_kind::PhaseKind;
use crate::client::phases::peak::SnapshotReport;
use crate::client::phases::phase::{Phase, PhaseContext, PhaseFailure, run_peak, writes_shortfall};
use crate::client::workloads::workload::Workload;
use crate::error::BenchError;

use super::Replica;

/// The replica phase as the plan asks for it, at this run's replica.
pub struct ReplicaPhase {
    replica: Replica,
}

/// The phase, when the plan asks for a replica's sync and the run has a replica: the plan's
/// rate at this run's replica.
pub fn planned<'a>(options: &'a LoadOptions) -> Option<Box<dyn Phase + 'a>> {
    let rate = options.settings.replica?;
    let replica = rate.at(options.replica_address.clone()?);
    Some(Box::new(ReplicaPhase { replica }))
}

impl Phase for ReplicaPhase {
    fn kind(&self) -> PhaseKind {
        PhaseKind::Replica
    }

    fn check_addresses(
        &self,
        addresses: &[EngineAddress],
        workload: &Workload,
        options: &LoadOptions,
    ) -> Result<(), BenchError> {
        let note = self.replica.check_before_writes(
            addresses,
            workload,
            options.settings.connect_timeout,
            "peak.replica",
            !options.settings.refuse_existing_keys,
        )?;
        if let Some(note) = note {
            eprintln!("warning: {note}");
        }
        Ok(())
    }

    fn run(
        &self,
        context: &mut PhaseContext<'_, '_>,
        measured: &mut RepetitionResult,
    ) -> Result<(), PhaseFailure> {
        run_peak(
            context,
            self.kind(),
            "before the sync",
            |shards, target, before| super::run(shards, &self.replica, target, before),
            |peak, report| peak.replica = Some(report),
            measured,
        )
    }

    fn warning(&self, repetitions: &[RepetitionResult]) -> Option<String> {
        fn primary(r: &RepetitionResult) -> Option<&SnapshotReport> {
            r.peak.as_ref()?.replica.as_ref().map(|r| &r.primary)
        }
        writes_shortfall(repetitions, "the replica's sync", "peak.replica", primary)
    }
}
