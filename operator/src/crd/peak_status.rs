//! The peak phases in the status (`spec.peak`): a repetition's snapshot and replica side by
//! side, and their peaks over the repetitions (`summary.peak`).

use serde::{Deserialize, Serialize};

use super::replica_status::ReplicaStatus;
use super::snapshot_status::SnapshotStatus;

/// The peak phases over the repetitions (`summary.peak`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PeakSummaryStatus {
    /// The snapshot saved under writes, over the repetitions that measured its peak.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<PeakRatioStatus>,
    /// The replica's full sync under writes, over the repetitions that measured the primary's
    /// peak.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<PeakRatioStatus>,
}

/// A peak phase's peakBytes / beforeBytes over the repetitions.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PeakRatioStatus {
    /// The median: what the engine's machine held at the peak against just before it (1.5:
    /// half as much again as its steady memory).
    pub ratio: f64,
    /// The lowest repetition.
    pub min: f64,
    /// The highest repetition.
    pub max: f64,
    /// The repetitions that measured it.
    pub repetitions: u32,
}

/// A repetition's peak phases.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PeakStatus {
    /// The snapshot saved under writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<SnapshotStatus>,
    /// The replica's full sync under writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<ReplicaStatus>,
}
