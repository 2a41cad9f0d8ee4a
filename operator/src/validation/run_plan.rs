//! A spec's run plans: one `client::measurement::plan::RunPlan` per engine entry, built here once and run
//! as it is by the local runner (`membench run`) and by the client pod (`membench load` with
//! the plan the operator gives it), so both measure what the same entry asks for.

use crate::client::measurement::plan::{RunPlan, RunSettings, WorkloadPlan};
use crate::client::phases::SpecPhases;
use crate::client::workloads::workload::Workload;
use crate::crd::MemoryBenchmarkSpec;
use crate::error::BenchError;
use crate::stats::StabilityThresholds;

use super::engine_config::settings_read_back_in;
use super::entry_ttl;

/// The plan of engine entry `entry` of `spec`, loading `workload` (the spec's, checked), its
/// repetitions judged by `thresholds`. The engines are the run's own: one that holds keys is
/// emptied by the first repetition, not refused.
pub fn entry_plan(
    spec: &MemoryBenchmarkSpec,
    workload: &Workload,
    entry: usize,
    thresholds: StabilityThresholds,
) -> Result<RunPlan, BenchError> {
    let engine = spec
        .engines
        .get(entry)
        .ok_or_else(|| BenchError::InvalidArgument {
            field: "spec.engines".into(),
            message: format!(
                "has {} entries, and entry {entry} was asked for",
                spec.engines.len()
            ),
        })?;
    let phases = SpecPhases::of_entry(spec, entry)?;
    let settings = RunSettings {
        pipeline: spec.pipeline,
        repetitions: spec.repetitions,
        settle_seconds: spec.settle_seconds,
        thresholds,
        refuse_existing_keys: false,
        read_config: settings_read_back_in(engine, spec),
        ttl: entry_ttl(spec, engine),
        own_all_slots: engine.is_cluster(),
        snapshot: phases.snapshot,
        replica: phases.replica,
        churn: phases.churn,
        // spec.eviction's limit, or the entry's own.
        eviction: phases.eviction,
        ..RunSettings::default()
    };
    settings.validate().map_err(|e| match e {
        BenchError::InvalidArgument { field, message } => BenchError::InvalidArgument {
            field: format!("spec.{field}"),
            message,
        },
        other => other,
    })?;
    Ok(RunPlan::new(WorkloadPlan::of(workload), settings))
}

/// [`entry_plan`] of every engine entry, in `spec.engines`' order, with the spec's workload.
pub fn entry_plans(
    spec: &MemoryBenchmarkSpec,
    thresholds: StabilityThresholds,
) -> Result<Vec<RunPlan>, BenchError> {
    let workload = Workload::from_spec(&spec.workload)?;
    (0..spec.engines.len())
        .map(|entry| entry_plan(spec, &workload, entry, thresholds))
        .collect()
}
