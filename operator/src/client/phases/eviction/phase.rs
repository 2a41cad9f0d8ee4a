//! The eviction as one of a repetition's phases: taken from the plan's `eviction` setting,
//! checked against the workload before any write, and run last, since it empties the engine.

use crate::client::measurement::load_options::LoadOptions;
use crate::client::measurement::measured::RepetitionResult;
use crate::client::measurement::phase_kind::PhaseKind;
use crate::client::phases::phase::{Phase, PhaseContext, PhaseFailure, failed};
use crate::client::workloads::workload::Workload;
use crate::error::BenchError;

use super::Eviction;

/// The eviction phase as the plan asks for it.
pub struct EvictionPhase<'a> {
    eviction: &'a Eviction,
}

/// The phase, when the plan asks for an eviction.
pub fn planned<'a>(options: &'a LoadOptions) -> Option<Box<dyn Phase + 'a>> {
    let eviction = options.settings.eviction.as_ref()?;
    Some(Box::new(EvictionPhase { eviction }))
}

impl Phase for EvictionPhase<'_> {
    fn kind(&self) -> PhaseKind {
        PhaseKind::Eviction
    }

    fn check_workload(
        &self,
        workload: &Workload,
        _options: &LoadOptions,
    ) -> Result<(), BenchError> {
        self.eviction.check_workload(workload, "eviction")
    }

    fn run(
        &self,
        context: &mut PhaseContext<'_, '_>,
        measured: &mut RepetitionResult,
    ) -> Result<(), PhaseFailure> {
        let pacing = context.pacing();
        measured.eviction = Some(
            super::run(
                context.shards,
                context.workload,
                self.eviction,
                &context.engine.name,
                context.bytes_per_item,
                &pacing,
            )
            .map_err(failed(self.kind()))?,
        );
        Ok(())
    }
}
