//! `spec.peak.replica`: the writes during a replica's full sync. The phase itself is
//! `crate::client::phases::replica`; only the fields are here.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

/// The writes during a replica's full sync.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaSpec {
    /// Overwrites per second, spread over every loaded item, while the replica syncs (the
    /// achieved rate is reported).
    #[serde(rename = "writesPerSecond")]
    #[schemars(range(min = 1, max = 10000000))]
    pub writes_per_sec: u32,
}
