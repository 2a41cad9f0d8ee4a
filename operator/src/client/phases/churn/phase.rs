//! The churn as one of a repetition's phases: taken from the plan's `churn` setting, checked
//! against the workload and (its defragmentation) against the engine before any write, and
//! run as its rounds and then, when asked, the defragmentation window, each failure named
//! for the part it happened in.

use std::time::Duration;

use crate::client::connection::engine::EngineInfo;
use crate::client::connection::shards::ShardSet;
use crate::client::measurement::load_options::LoadOptions;
use crate::client::measurement::measured::RepetitionResult;
use crate::client::measurement::phase_kind::PhaseKind;
use crate::client::phases::phase::{Phase, PhaseContext, PhaseFailure, failed};
use crate::client::workloads::workload::Workload;
use crate::error::BenchError;

use super::{Churn, defrag};

/// The churn phase (with its defragmentation) as the plan asks for it.
pub struct ChurnPhase<'a> {
    churn: &'a Churn,
}

/// The phase, when the plan asks for a churn.
pub fn planned<'a>(options: &'a LoadOptions) -> Option<Box<dyn Phase + 'a>> {
    let churn = options.settings.churn.as_ref()?;
    Some(Box::new(ChurnPhase { churn }))
}

impl Phase for ChurnPhase<'_> {
    fn kind(&self) -> PhaseKind {
        PhaseKind::Churn
    }

    fn check_workload(&self, workload: &Workload, options: &LoadOptions) -> Result<(), BenchError> {
        self.churn
            .check_workload(workload, options.settings.ttl.is_some(), "churn")
    }

    fn check_engine(&self, shards: &mut ShardSet, engine: &EngineInfo) -> Result<(), BenchError> {
        if !self.churn.defrag {
            return Ok(());
        }
        // Before any write: a build that cannot defragment is refused, not measured.
        defrag::check_supported(shards, &engine.name, &engine.allocator, "churn.defrag")
    }

    fn run(
        &self,
        context: &mut PhaseContext<'_, '_>,
        measured: &mut RepetitionResult,
    ) -> Result<(), PhaseFailure> {
        let pacing = context.pacing();
        let report = super::run(
            context.shards,
            context.workload,
            self.churn,
            context.items,
            &pacing,
            context.read,
        )
        .map_err(failed(PhaseKind::Churn))?;
        // The rounds stand even when the defragmentation after them fails.
        let churn = measured.churn.insert(report);
        if self.churn.defrag {
            churn.defrag = Some(
                defrag::run(
                    context.shards,
                    &context.engine.name,
                    Duration::from_secs(u64::from(self.churn.defrag_seconds)),
                    context.read,
                    &context.options.stop,
                )
                .map_err(failed(PhaseKind::Defrag))?,
            );
        }
        Ok(())
    }
}
