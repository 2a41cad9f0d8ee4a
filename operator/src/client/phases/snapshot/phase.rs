//! The snapshot as one of a repetition's phases: taken from the plan's `snapshot` setting,
//! checked against the workload and the engines, run on a memory reading of its own, and
//! warned about when its writes fell short of the rate asked.

use crate::client::connection::engine::EngineAddress;
use crate::client::measurement::load_options::LoadOptions;
use crate::client::measurement::measured::RepetitionResult;
use crate::client::measurement::phase_kind::PhaseKind;
use crate::client::phases::peak::SnapshotReport;
use crate::client::phases::phase::{Phase, PhaseContext, PhaseFailure, run_peak, writes_shortfall};
use crate::client::workloads::workload::Workload;
use crate::error::BenchError;

use super::Snapshot;

/// The snapshot phase as the plan asks for it.
pub struct SnapshotPhase<'a> {
    snapshot: &'a Snapshot,
}

/// The phase, when the plan asks for a snapshot.
pub fn planned<'a>(options: &'a LoadOptions) -> Option<Box<dyn Phase + 'a>> {
    let snapshot = options.settings.snapshot.as_ref()?;
    Some(Box::new(SnapshotPhase { snapshot }))
}

impl Phase for SnapshotPhase<'_> {
    fn kind(&self) -> PhaseKind {
        PhaseKind::Snapshot
    }

    fn check_workload(
        &self,
        workload: &Workload,
        _options: &LoadOptions,
    ) -> Result<(), BenchError> {
        self.snapshot.check_workload(workload, "peak.snapshot")
    }

    fn check_addresses(
        &self,
        addresses: &[EngineAddress],
        _workload: &Workload,
        _options: &LoadOptions,
    ) -> Result<(), BenchError> {
        if addresses.len() > 1 {
            return Err(BenchError::InvalidArgument {
                field: "peak.snapshot".into(),
                message: format!(
                    "measures one engine's save; a cluster of {} shards forks each on its own: measure one shard",
                    addresses.len()
                ),
            });
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
            "before the snapshot",
            |shards, target, before| super::run(shards, self.snapshot, target, before),
            |peak, report| peak.snapshot = Some(report),
            measured,
        )
    }

    fn warning(&self, repetitions: &[RepetitionResult]) -> Option<String> {
        fn snapshot(r: &RepetitionResult) -> Option<&SnapshotReport> {
            r.peak.as_ref()?.snapshot.as_ref()
        }
        writes_shortfall(repetitions, "the snapshot", "peak.snapshot", snapshot)
    }
}
