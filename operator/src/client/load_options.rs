//! How to run a load: the batches, the repetitions and readings, and the phases after the
//! readings that a run asks for (`client::snapshot`, `client::replica`, `client::churn`,
//! `client::eviction`). The
//! protocol that follows them is `client::measure`.

use std::time::Duration;

use crate::client::churn::Churn;
use crate::client::eviction::Eviction;
use crate::client::replica::Replica;
use crate::client::snapshot::Snapshot;
use crate::client::stop_request::StopRequest;
use crate::client::ttl::Ttl;
use crate::error::BenchError;
use crate::stats::StabilityThresholds;

/// Long enough for the connections that come and go around a benchmark (a TCP readiness
/// probe, the operator's progress reading, which gives up after 3 s, the load connection
/// the server has yet to close), short enough that a client that stays is reported quickly.
pub const DEFAULT_OTHER_CLIENTS_TIMEOUT: Duration = Duration::from_secs(10);

/// How to run the load.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// Commands per batch: a batch is sent whole, and its replies read whole.
    pub pipeline: u32,
    /// Batches sent before the replies of the first of them are read: 1 keeps at most
    /// `pipeline` commands unanswered (as `redis-benchmark -P`); more (8 by default) send the
    /// next batches while the engine still works on the first, so the engine never waits for
    /// the client between batches. What is in flight stays under [`EARLY_BATCH_BYTES`].
    pub batches_in_flight: u32,
    pub repetitions: u32,
    /// Seconds to wait after a load before a second memory reading (0: no second reading).
    pub settle_seconds: u32,
    pub thresholds: StabilityThresholds,
    pub connect_timeout: Duration,
    /// How long to wait for every other client of the engine to disconnect before each
    /// baseline and final memory reading (see [`wait_until_sole_client`]).
    pub other_clients_timeout: Duration,
    /// Stops the run early when requested (never, unless someone holds a clone).
    pub stop: StopRequest,
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
    /// Deletes and overwrites after each repetition's readings, and defragmentation
    /// (`client::churn`).
    pub churn: Option<Churn>,
    /// A load past maxmemory after each repetition's other phases (`client::eviction`).
    pub eviction: Option<Eviction>,
    /// A snapshot saved under writes after each repetition's readings (`client::snapshot`).
    pub snapshot: Option<Snapshot>,
    /// A replica's full sync under writes after the snapshot (`client::replica`).
    pub replica: Option<Replica>,
    /// Who reads the engine's container at a peak phase's marks when its processes are not on
    /// this machine (`client::container_memory`: the operator, through the progress endpoint).
    pub container: Option<std::sync::Arc<dyn crate::client::container_memory::ContainerMarks>>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            pipeline: 100,
            batches_in_flight: 8,
            repetitions: 10,
            settle_seconds: 0,
            thresholds: StabilityThresholds::default(),
            connect_timeout: Duration::from_secs(5),
            other_clients_timeout: DEFAULT_OTHER_CLIENTS_TIMEOUT,
            stop: StopRequest::default(),
            refuse_existing_keys: false,
            read_config: Vec::new(),
            ttl: None,
            own_all_slots: false,
            churn: None,
            eviction: None,
            snapshot: None,
            replica: None,
            container: None,
        }
    }
}

impl LoadOptions {
    pub fn validate(&self) -> Result<(), BenchError> {
        let invalid = |field: &str, message: &str| {
            Err(BenchError::InvalidArgument {
                field: field.into(),
                message: message.into(),
            })
        };
        if self.pipeline == 0 || self.pipeline > 100_000 {
            return invalid("pipeline", "must be between 1 and 100000");
        }
        if self.batches_in_flight == 0 || self.batches_in_flight > 16 {
            return invalid("batches-in-flight", "must be between 1 and 16");
        }
        if self.repetitions == 0 || self.repetitions > 100 {
            return invalid("repetitions", "must be between 1 and 100");
        }
        Ok(())
    }
}
