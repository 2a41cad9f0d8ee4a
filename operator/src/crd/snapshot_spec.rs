//! `spec.peak.snapshot`: the writes during a snapshot. The phase itself is
//! `crate::client::phases::snapshot`; only the fields are here.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

/// The writes during the snapshot.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotSpec {
    /// Overwrites per second while the snapshot is saved (the achieved rate is reported).
    #[serde(rename = "writesPerSecond")]
    #[schemars(range(min = 1, max = 10000000))]
    pub writes_per_sec: u32,
    /// The share of the loaded items the writes are spread over, drawn uniformly: above 0 and
    /// at most 1.
    #[serde(default = "default_write_share")]
    pub write_share: f64,
}

pub fn default_write_share() -> f64 {
    1.0
}
