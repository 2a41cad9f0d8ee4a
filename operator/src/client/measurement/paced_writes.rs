//! The paced overwrites a peak phase runs while the engine does something costly (a snapshot's
//! save, `client::phases::snapshot`; a replica's full sync, `client::phases::replica`): loaded items overwritten
//! with values of the workload's size at an asked rate, until the phase says it is done or its
//! bound passes, each batch's round trip kept for the latency the writes saw.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::client::connection::resp::CommandBuffer;
use crate::client::connection::shards::{LoadConnections, Pacing, ShardSet};
use crate::client::workloads::draws::KeyGenerator;
use crate::client::workloads::workload::Workload;
use crate::error::BenchError;
use crate::stats::percentile;

/// Writes go in a batch every this often, as many as the rate has due (at most 100).
const TICK: Duration = Duration::from_millis(1);
/// How often the phase is asked whether it is done.
const POLL: Duration = Duration::from_millis(25);

/// The writes asked for: how many a second, spread over which share of the loaded items.
#[derive(Clone, Copy, Debug)]
pub struct WriteRate {
    pub writes_per_sec: u32,
    pub write_share: f64,
}

/// The engine a peak phase runs on and how: the workload it loaded (whose items the writes
/// overwrite), its name (`dragonfly` saves and syncs its own way), its process id as its INFO
/// reports it (its process tree is read when it is on this machine), and the run's pacing.
pub struct PeakTarget<'a> {
    pub workload: &'a Workload,
    pub engine: &'a str,
    pub process_id: Option<u32>,
    pub pacing: Pacing<'a>,
    /// Who reads the engine's container when its processes are not on this machine.
    pub container: Option<&'a dyn crate::client::measurement::container_memory::ContainerMarks>,
}

/// The phase the writes run beside: its name in errors (`snapshot`, `replica`), the command
/// that started it, the writes' rate, how long it may take and what did not happen when it
/// took longer (`the snapshot did not finish`).
pub struct Beside {
    pub phase: &'static str,
    pub command: &'static str,
    pub rate: WriteRate,
    pub bound: Duration,
    pub unfinished: String,
}

/// What the writes did.
pub struct PacedWrites {
    pub writes: u64,
    /// Each batch's round trip, in milliseconds.
    pub latencies_ms: Vec<f64>,
    /// The longest the writes waited on one of the phase's polls, in milliseconds: writes
    /// due meanwhile are caught up after it, except after the poll that ends the phase (a
    /// replica answers only once it has loaded the sync), so the rate reached over the
    /// phase falls short of the asked one by up to this wait.
    pub longest_poll_ms: f64,
}

/// The writes' latency during a phase: the round trip of each batch, in milliseconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WriteLatency {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

impl WriteLatency {
    pub fn of(mut latencies_ms: Vec<f64>) -> Self {
        latencies_ms.sort_by(f64::total_cmp);
        Self {
            p50: percentile(&latencies_ms, 50.0),
            p99: percentile(&latencies_ms, 99.0),
            max: latencies_ms.last().copied().unwrap_or(0.0),
        }
    }
}

/// Overwrites loaded items of `target` at `beside.rate` until `done` says the phase is over
/// (asked every 25 ms), or fails naming `beside.bound` once it has passed.
pub fn write_until(
    shards: &mut ShardSet,
    target: &PeakTarget<'_>,
    beside: &Beside,
    done: &mut dyn FnMut(&mut ShardSet) -> Result<bool, BenchError>,
) -> Result<PacedWrites, BenchError> {
    let (workload, pacing, rate) = (target.workload, &target.pacing, beside.rate);
    let items = workload.intended_items().unwrap_or(1).max(1);
    let span = ((items as f64 * rate.write_share).ceil() as u64).clamp(1, items);
    let per_item = workload.commands_per_item();
    let mut connections = LoadConnections::connect(shards, pacing.connect_timeout)?;
    let mut encoder = workload.encoder();
    let mut draws = KeyGenerator::new(crate::crd::default_seed());
    let mut batch = CommandBuffer::with_capacity(16 * 1024);
    let mut owed = Vec::new();
    let mut latencies_ms = Vec::new();
    let started = Instant::now();
    let mut last_poll = started;
    let mut writes = 0u64;
    let mut longest_poll_ms = 0.0f64;
    loop {
        pacing.stop.check(writes)?;
        if last_poll.elapsed() >= POLL {
            last_poll = Instant::now();
            let finished = done(shards)?;
            longest_poll_ms = longest_poll_ms.max(last_poll.elapsed().as_secs_f64() * 1000.0);
            if finished {
                return Ok(PacedWrites {
                    writes,
                    latencies_ms,
                    longest_poll_ms,
                });
            }
            if started.elapsed() >= beside.bound {
                return Err(BenchError::EngineRejected {
                    command: beside.command.into(),
                    message: format!("{} within {} s", beside.unfinished, beside.bound.as_secs()),
                });
            }
        }
        let due = (started.elapsed().as_secs_f64() * f64::from(rate.writes_per_sec)) as u64;
        let count = due.saturating_sub(writes).min(100);
        if count == 0 {
            std::thread::sleep(TICK);
            continue;
        }
        batch.clear();
        let mut replies = 0;
        for _ in 0..count {
            // A record stored as strings is one SET per field: its first field's key stands for
            // it (the encoder numbers commands, not records).
            let item = draws.below(span);
            replies += encoder.encode(item * per_item, &mut batch);
        }
        let sent = Instant::now();
        let lost = |connections: &LoadConnections, failure| BenchError::ConnectionLost {
            items_sent: writes,
            detail: format!("{} phase: {}", beside.phase, connections.describe(&failure)),
        };
        connections
            .send(&batch, replies, &mut owed)
            .map_err(|f| lost(&connections, f))?;
        let (tally, shard) = connections.read(&owed).map_err(|f| lost(&connections, f))?;
        latencies_ms.push(sent.elapsed().as_secs_f64() * 1000.0);
        if let Some(reply) = tally.first_error {
            return Err(BenchError::from_load_reply(
                &format!("a write during the {}", beside.phase),
                reply,
                writes,
                connections.address(shard),
            ));
        }
        writes += count;
    }
}
