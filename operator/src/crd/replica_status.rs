//! A repetition's replica sync under writes in the status (`spec.peak.replica`). The client's
//! result names it in snake_case (`client::phases::replica`); the status in camelCase.

use serde::{Deserialize, Serialize};

use super::snapshot_status::SnapshotStatus;

/// What a replica's full sync under writes cost (`spec.peak.replica`): the primary's peak and
/// the replica once in sync.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaStatus {
    /// The primary's figures, in a snapshot's shape: its process tree before and at its
    /// highest during the sync, the copy-on-write of the fork that sent it, the sync's duration
    /// (from REPLICAOF until the replica said it was in sync) and the writes.
    #[serde(flatten)]
    pub primary: SnapshotStatus,
    /// The primary's replication backlog once the replica was in sync
    /// (`mem_replication_backlog`), in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backlog_bytes: Option<u64>,
    /// The primary's used_memory once the replica was in sync (its backlog included), in bytes.
    pub primary_used_memory_after: u64,
    /// The replica's used_memory once in sync, in bytes.
    pub replica_used_memory: u64,
    /// The replica's used_memory_rss once in sync, in bytes.
    pub replica_used_memory_rss: u64,
    /// The keys the replica held once in sync (the primary's, verified).
    pub replica_keys: u64,
    /// The replica at its highest during the sync, in bytes: its process tree where the client
    /// saw it, else its container's memory cgroup read from the kubelet (the high-water mark,
    /// when it rose during the sync).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_peak_bytes: Option<u64>,
}
