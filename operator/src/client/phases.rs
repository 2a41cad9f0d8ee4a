//! The phases a repetition runs after its readings, in order, on the data it loaded: a
//! snapshot under writes (`client::snapshot`), the churn and its defragmentation
//! (`client::churn`, `client::defrag`), and last the load past maxmemory
//! (`client::eviction`), which empties the engine. `client::measure` calls them once per
//! repetition with its own memory reading.

use std::time::Duration;

use crate::client::churn::{self, ChurnReport};
use crate::client::defrag;
use crate::client::engine::EngineInfo;
use crate::client::eviction::{self, EvictionReport};
use crate::client::load_options::LoadOptions;
use crate::client::measured::PeakReport;
use crate::client::shards::{Pacing, ReadMemory, ShardSet};
use crate::client::snapshot;
use crate::client::workload::Workload;
use crate::error::BenchError;

/// What the phases measured (each absent when the run did not ask for it).
pub struct Phases {
    pub peak: Option<PeakReport>,
    pub churn: Option<ChurnReport>,
    pub eviction: Option<EvictionReport>,
}

/// Runs the phases `options` asks for: `items` is the repetition's verified count,
/// `bytes_per_item` its figure, `read` the measurement's own reading.
pub fn after_readings(
    shards: &mut ShardSet,
    workload: &Workload,
    options: &LoadOptions,
    engine: &EngineInfo,
    items: u64,
    bytes_per_item: f64,
    read: &mut ReadMemory<'_>,
) -> Result<Phases, BenchError> {
    let pacing = Pacing {
        pipeline: options.pipeline,
        connect_timeout: options.connect_timeout,
        stop: &options.stop,
    };
    let peak = match &options.snapshot {
        Some(phase) => {
            // Read again: the settled reading, when there was one, is older than the save.
            let before = read(shards, "before the snapshot")?;
            Some(PeakReport {
                snapshot: Some(snapshot::run(
                    shards,
                    workload,
                    phase,
                    &engine.name,
                    engine.process_id,
                    &before,
                    &pacing,
                )?),
            })
        }
        None => None,
    };
    let churn = match &options.churn {
        Some(phase) => {
            let mut report = churn::run(shards, workload, phase, items, &pacing, read)?;
            if phase.defrag {
                report.defrag = Some(defrag::run(
                    shards,
                    &engine.name,
                    Duration::from_secs(u64::from(phase.defrag_seconds)),
                    read,
                    &options.stop,
                )?);
            }
            Some(report)
        }
        None => None,
    };
    let eviction = match &options.eviction {
        Some(phase) => Some(eviction::run(
            shards,
            workload,
            phase,
            &engine.name,
            bytes_per_item,
            &pacing,
        )?),
        None => None,
    };
    Ok(Phases {
        peak,
        churn,
        eviction,
    })
}
