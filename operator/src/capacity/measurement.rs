//! A run's result read as the model's input: the growth curve in table entries, and the
//! fragmentation ratio. From a local report (`membench run`, its result file) or from an
//! engine's status (the operator).

use crate::client::measure::BenchmarkReport;
use crate::client::workload::{Workload, expected_unique_keys};
use crate::crd::{EngineStatus, RecordLayout};

use super::projection::CurvePoint;

/// What the model needs of one engine's run.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineMeasurement {
    pub name: String,
    /// `redis`, `valkey` or `dragonfly`.
    pub engine: String,
    /// The engine's own version.
    pub version: String,
    /// used_memory against the table's entries: the first repetition's samples and its end.
    pub curve: Vec<CurvePoint>,
    /// Table entries per item (a record stored as strings is one key per field).
    pub entries_per_item: u64,
    /// Median used_memory_rss / used_memory over the repetitions.
    pub fragmentation_ratio: Option<f64>,
}

/// Entries of the growing table per item of a workload.
fn entries_per_item(workload: &Workload) -> u64 {
    match workload {
        Workload::Records {
            layout: RecordLayout::Strings,
            fields,
            ..
        } => fields.len() as u64,
        _ => 1,
    }
}

/// The table's entries after `items` items of a sample (random keys: the expected distinct
/// keys after that many SETs).
fn sample_entries(workload: &Workload, items: u64) -> u64 {
    match workload {
        Workload::RandomStrings { keyspace, .. } => {
            expected_unique_keys(items, *keyspace).round() as u64
        }
        _ => items * entries_per_item(workload),
    }
}

fn median(mut values: Vec<f64>) -> Option<f64> {
    values.retain(|v| v.is_finite() && *v > 0.0);
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    Some(if values.len() % 2 == 0 {
        (values[mid - 1] + values[mid]) / 2.0
    } else {
        values[mid]
    })
}

/// Adds the end of the load (verified entries, used_memory) unless a sample is already there.
fn push_end(curve: &mut Vec<CurvePoint>, end: CurvePoint) {
    if curve.last().is_none_or(|p| p.entries < end.entries) {
        curve.push(end);
    }
}

impl EngineMeasurement {
    /// From a local run's report of one engine.
    pub fn from_report(report: &BenchmarkReport) -> Result<Self, String> {
        let workload = &report.workload.workload;
        let first = report
            .repetitions
            .first()
            .ok_or_else(|| format!("{}: no finished repetition to project from", report.name))?;
        let mut curve: Vec<CurvePoint> = first
            .samples
            .iter()
            .map(|s| CurvePoint {
                entries: sample_entries(workload, s.items),
                used_memory: s.used_memory,
            })
            .collect();
        push_end(
            &mut curve,
            CurvePoint {
                entries: first.items * entries_per_item(workload),
                used_memory: first.used_memory,
            },
        );
        let ratio = median(
            report
                .repetitions
                .iter()
                .map(|r| r.used_memory_rss as f64 / r.used_memory.max(1) as f64)
                .collect(),
        );
        Ok(Self {
            name: report.name.clone(),
            engine: report.engine.name.clone(),
            version: report.engine.version.clone(),
            curve,
            entries_per_item: entries_per_item(workload),
            fragmentation_ratio: ratio,
        })
    }

    /// From an engine's status (its growth curve holds at most 64 points).
    pub fn from_status(status: &EngineStatus, workload: &Workload) -> Result<Self, String> {
        let first = status
            .repetitions
            .first()
            .ok_or_else(|| format!("{}: no finished repetition to project from", status.name))?;
        let mut curve: Vec<CurvePoint> = status
            .growth
            .iter()
            .map(|g| CurvePoint {
                entries: sample_entries(workload, g.items),
                used_memory: g.used_memory,
            })
            .collect();
        push_end(
            &mut curve,
            CurvePoint {
                entries: first.items * entries_per_item(workload),
                used_memory: first.used_memory,
            },
        );
        let ratio = median(
            status
                .repetitions
                .iter()
                .map(|r| r.used_memory_rss as f64 / r.used_memory.max(1) as f64)
                .collect(),
        );
        Ok(Self {
            name: status.name.clone(),
            engine: status.engine.clone(),
            version: status
                .version
                .clone()
                .unwrap_or_else(|| status.requested_version.clone()),
            curve,
            entries_per_item: entries_per_item(workload),
            fragmentation_ratio: ratio,
        })
    }
}
