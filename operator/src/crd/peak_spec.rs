//! `spec.peak`: what a node must hold at the engine's peak, the snapshot's and the replica's
//! phases side by side (each in its own file: `snapshot_spec`, `replica_spec`).

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use super::replica_spec::ReplicaSpec;
use super::snapshot_spec::SnapshotSpec;

/// What a node must hold at the engine's peak, measured in every repetition after its
/// readings, on the data it loaded.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct PeakSpec {
    /// A snapshot (`BGSAVE`) saved while the client overwrites loaded keys: Redis and Valkey
    /// fork, and every page written during the save is copied; Dragonfly saves without a fork.
    /// Applies to the strings and records workloads. The snapshot goes to the engine's data
    /// directory under its own file name (`membench load` against a server of yours writes its
    /// `dir`/`dbfilename`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<SnapshotSpec>,
    /// A replica of the engine does a full sync (`REPLICAOF`) while the client overwrites
    /// loaded keys, after the snapshot when both are asked: Redis and Valkey fork to send it,
    /// Dragonfly syncs without a fork. Measured on the primary (its process tree's peak, the
    /// copy-on-write it counts) and on the replica (its memory and keys once in sync), which is
    /// then detached and emptied. Applies to the strings and records workloads, on one engine
    /// without shards or cluster mode. `membench run` starts the replica as a second process of
    /// the same build; the operator starts it as a second engine pod on another node of the
    /// instance type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<ReplicaSpec>,
}
