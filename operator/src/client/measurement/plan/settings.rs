//! A run's settings besides its workload: the load's batches, the repetitions and readings,
//! and each phase after the readings as a field of its own type (`snapshot`, `replica`,
//! `churn`, `eviction`), so that a phase's settings stay its own.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::client::phases::churn::Churn;
use crate::client::phases::eviction::Eviction;
use crate::client::phases::replica::ReplicaRate;
use crate::client::phases::snapshot::Snapshot;
use crate::client::workloads::ttl::Ttl;
use crate::crd::{MAX_PIPELINE, MAX_REPETITIONS};
use crate::error::BenchError;
use crate::stats::StabilityThresholds;

/// Long enough for the connections that come and go around a benchmark (a TCP readiness
/// probe, the operator's progress reading, which gives up after 3 s, the load connection
/// the server has yet to close), short enough that a client that stays is reported quickly.
pub const DEFAULT_OTHER_CLIENTS_TIMEOUT: Duration = Duration::from_secs(10);

/// The most batches in flight: 16 batches of the default pipeline stay far under what the
/// load keeps in flight (`EARLY_BATCH_BYTES`).
pub const MAX_BATCHES_IN_FLIGHT: u32 = 16;

/// How to load, measure, and what to run after the readings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSettings {
    /// Commands per batch: a batch is sent whole, and its replies read whole.
    pub pipeline: u32,
    /// Batches sent before the replies of the first of them are read: 1 keeps at most
    /// `pipeline` commands unanswered (as `redis-benchmark -P`); more (8 by default) send the
    /// next batches while the engine still works on the first, so the engine never waits for
    /// the client between batches. What is in flight stays under `EARLY_BATCH_BYTES`.
    pub batches_in_flight: u32,
    pub repetitions: u32,
    /// Seconds to wait after a load before a second memory reading (0: no second reading).
    pub settle_seconds: u32,
    pub thresholds: StabilityThresholds,
    #[serde(rename = "connect_timeout_ms", with = "milliseconds")]
    pub connect_timeout: Duration,
    /// How long to wait for every other client of the engine to disconnect before each
    /// baseline and final memory reading (see `wait_until_sole_client`).
    #[serde(rename = "other_clients_timeout_ms", with = "milliseconds")]
    pub other_clients_timeout: Duration,
    /// Refuse a server that holds keys at the start (`ServerNotEmpty`) instead of emptying it
    /// with the first repetition's FLUSHALL: `membench load`, pointed at someone's server,
    /// unless asked to `--flush`. Engines the caller started itself are its own to empty.
    pub refuse_existing_keys: bool,
    /// Engine settings to read back with `CONFIG GET` into the result's `engine.config`: the
    /// ones the spec changed.
    pub read_config: Vec<String>,
    /// A TTL to give the items it picks, set with their writes (`workload.*.ttlSeconds`).
    pub ttl: Option<Ttl>,
    /// Make the engine, a cluster-mode node, own all 16,384 slots before the first baseline.
    /// Several shards are joined whether it is set or not.
    pub own_all_slots: bool,
    /// A snapshot saved under writes after each repetition's readings (`client::phases::snapshot`).
    pub snapshot: Option<Snapshot>,
    /// A replica's full sync under writes after the snapshot (`client::phases::replica`); the replica's
    /// address is the run's, passed beside the plan.
    pub replica: Option<ReplicaRate>,
    /// Deletes and overwrites after each repetition's readings, and defragmentation
    /// (`client::phases::churn`).
    pub churn: Option<Churn>,
    /// A load past maxmemory after each repetition's other phases (`client::phases::eviction`).
    pub eviction: Option<Eviction>,
}

impl Default for RunSettings {
    fn default() -> Self {
        Self {
            pipeline: crate::crd::default_pipeline(),
            batches_in_flight: 8,
            repetitions: 10,
            settle_seconds: 0,
            thresholds: StabilityThresholds::default(),
            connect_timeout: Duration::from_secs(5),
            other_clients_timeout: DEFAULT_OTHER_CLIENTS_TIMEOUT,
            refuse_existing_keys: false,
            read_config: Vec::new(),
            ttl: None,
            own_all_slots: false,
            snapshot: None,
            replica: None,
            churn: None,
            eviction: None,
        }
    }
}

impl RunSettings {
    /// The ranges every way of giving these settings shares (a spec, flags, a plan).
    pub fn validate(&self) -> Result<(), BenchError> {
        let invalid = |field: &str, message: String| {
            Err(BenchError::InvalidArgument {
                field: field.into(),
                message,
            })
        };
        if self.pipeline == 0 || self.pipeline > MAX_PIPELINE {
            return invalid("pipeline", format!("must be between 1 and {MAX_PIPELINE}"));
        }
        if self.batches_in_flight == 0 || self.batches_in_flight > MAX_BATCHES_IN_FLIGHT {
            return invalid(
                "batches-in-flight",
                format!("must be between 1 and {MAX_BATCHES_IN_FLIGHT}"),
            );
        }
        if self.repetitions == 0 || self.repetitions > MAX_REPETITIONS {
            return invalid(
                "repetitions",
                format!("must be between 1 and {MAX_REPETITIONS}"),
            );
        }
        Ok(())
    }
}

/// A duration as whole milliseconds, so a plan reads as numbers a person can check.
mod milliseconds {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        u64::deserialize(deserializer).map(Duration::from_millis)
    }
}
