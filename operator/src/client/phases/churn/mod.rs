//! The churn phase, run after a repetition's load and readings on the data it loaded: rounds of
//! deletes and overwrites with values of another size, each followed by a memory reading and a
//! count of what the engine still holds, then (when asked) active defragmentation
//! (`client::phases::churn::defrag`). A freshly loaded keyspace is the best case an allocator sees; this is
//! what the same engine holds once the data has changed.
//!
//! Which items a round deletes and overwrites is decided by the item's number, the round and
//! the seed alone, so every engine loses and rewrites the same items. The client keeps one byte
//! per item (held, deleted, overwritten) to know each item's current form. The parts:
//! - `spec`: the churn asked for, checked, and the workloads it applies to;
//! - `rounds`: the draws, the states and the batches both kinds of churn send;
//! - `keys`: whole items (strings, random strings, records as strings, sorted-set members);
//! - `fields`: records stored as hashes, churned on their fields (`HDEL`, `HSET`);
//! - `profile`: a profile's rebuild, keys of mixed types (`DEL`; a string `SET`, a
//!   collection's elements replaced by as many of the overwrite's size);
//! - `figures`: what it adds to the reports, its table and its chart.

pub mod defrag;
mod fields;
pub mod figures;
mod keys;
pub mod phase;
mod profile;
mod rounds;
mod spec;

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::client::connection::shards::{Pacing, ReadMemory, ShardSet};
use crate::client::workloads::workload::Workload;
use crate::crd::{ChurnRoundStatus, ChurnStatus, DefragStatus, LatencyStatus, RecordLayout};
use crate::error::BenchError;
use fields::FieldChurn;
use keys::KeyChurn;
use profile::ProfileChurn;
pub use spec::{Churn, MAX_CHURN_ITEMS};

/// How long a round's reading waits after its last command: Redis and Valkey refresh
/// used_memory_rss and the allocator's figures (`allocator_frag_ratio`) in their 100 ms cron,
/// so a reading right after the deletes can hold the figures from before them.
pub const ROUND_SETTLE: Duration = Duration::from_millis(300);

/// What one round did and what the engine held after it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ChurnRound {
    /// Counted from 1.
    pub round: u32,
    /// Items this round deleted (each confirmed by its command's reply); for records stored as
    /// hashes, fields (HDEL); for a profile's rebuild, keys of any type (DEL).
    pub deleted: u64,
    /// Items this round overwrote; for records stored as hashes, fields (HSET); for a
    /// profile's rebuild, keys (a string SET, a collection's elements replaced).
    pub overwritten: u64,
    pub used_memory: u64,
    pub used_memory_rss: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocator_frag_ratio: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_fragmentation_ratio: Option<f64>,
    /// Items held after the round, verified in the engine (DBSIZE, ZCARD); for records stored
    /// as hashes, the records with a field left (an empty hash's key is deleted).
    pub items: u64,
    /// A record's fields held after the round, where items hold elements: as a hash, the sum
    /// of HLEN over the records held; as strings, DBSIZE (one key per field); for a profile's
    /// rebuild, the elements of its collection keys held (HLEN, LLEN, SCARD, ZCARD, XLEN).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elements: Option<u64>,
    /// How long the round's commands took.
    pub seconds: f64,
}

/// The rounds, and the defragmentation after them when asked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ChurnReport {
    pub rounds: Vec<ChurnRound>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defrag: Option<crate::client::phases::churn::defrag::DefragReport>,
}

impl ChurnReport {
    /// RSS after the last round (before any defragmentation): the churned RSS.
    pub fn churned_rss(&self) -> Option<u64> {
        self.rounds.last().map(|r| r.used_memory_rss)
    }

    /// The same without the defragmentation window's readings (the result a client pod sends
    /// and the status carry the window's outcome, not its curve).
    pub fn without_samples(&self) -> Self {
        let mut report = self.clone();
        if let Some(defrag) = &mut report.defrag {
            defrag.samples.clear();
        }
        report
    }
}

impl From<&ChurnReport> for ChurnStatus {
    fn from(report: &ChurnReport) -> Self {
        ChurnStatus {
            rounds: report
                .rounds
                .iter()
                .map(|r| ChurnRoundStatus {
                    round: r.round,
                    deleted: r.deleted,
                    overwritten: r.overwritten,
                    used_memory: r.used_memory,
                    used_memory_rss: r.used_memory_rss,
                    allocator_frag_ratio: r.allocator_frag_ratio,
                    mem_fragmentation_ratio: r.mem_fragmentation_ratio,
                    items: r.items,
                    elements: r.elements,
                    seconds: r.seconds,
                })
                .collect(),
            defrag: report.defrag.as_ref().map(|d| DefragStatus {
                switched: d.switched.clone(),
                rss_before: d.rss_before,
                rss_after: d.rss_after,
                used_memory_before: d.used_memory_before,
                used_memory_after: d.used_memory_after,
                allocator_frag_ratio_before: d.allocator_frag_ratio_before,
                allocator_frag_ratio_after: d.allocator_frag_ratio_after,
                seconds: d.seconds,
                window_seconds: d.window_seconds,
                cpu_seconds: d.cpu_seconds,
                bound_reached: d.bound_reached,
                ended_by: d.ended_by.clone(),
                purged: d.purged,
                rss_before_purge: d.rss_before_purge,
                write_latency_ms: LatencyStatus {
                    writes: d.write_latency_ms.writes,
                    p50: d.write_latency_ms.p50,
                    p99: d.write_latency_ms.p99,
                    max: d.write_latency_ms.max,
                },
            }),
        }
    }
}

/// Whether round `round` of a churn seeded `seed` deletes item `item` (if it still holds it):
/// what an independent check sends its own deletes by. For records stored as hashes the item
/// is a field, numbered record x fields + the field's place in the workload's list.
pub fn deletes(seed: u64, round: u32, item: u64, share: f64) -> bool {
    rounds::drawn(seed, round, rounds::DELETE, item, share)
}

/// Whether round `round` overwrites item (field) `item`, when it still holds it and did not
/// delete it this round ([`deletes`]): the other draw an independent check follows.
pub fn overwrites(seed: u64, round: u32, item: u64, share: f64) -> bool {
    rounds::drawn(seed, round, rounds::OVERWRITE, item, share)
}

/// The churn of one workload: whole items, a hash record's fields, or a rebuild's keys.
enum Follower<'a> {
    Keys(KeyChurn<'a>),
    Fields(FieldChurn<'a>),
    // Boxed: its encoder is ten times the others.
    Profile(Box<ProfileChurn>),
}

/// Runs the rounds on the data a repetition loaded (`items` of them, verified), reading memory
/// and counting what the engine holds after each, then defragmentation when asked.
pub fn run(
    shards: &mut ShardSet,
    workload: &Workload,
    churn: &Churn,
    items: u64,
    pacing: &Pacing<'_>,
    read: &mut ReadMemory<'_>,
) -> Result<ChurnReport, BenchError> {
    let Pacing {
        connect_timeout,
        stop,
        ..
    } = *pacing;
    let mut follower = match workload {
        Workload::Records {
            records,
            layout: RecordLayout::Hash,
            fields,
        } => Follower::Fields(FieldChurn::new(*records, fields, items)?),
        Workload::Profile(profile) => {
            Follower::Profile(Box::new(ProfileChurn::new(profile, items)?))
        }
        _ => Follower::Keys(KeyChurn::new(workload, items)?),
    };
    let shares = churn.shares();
    let mut rounds = Vec::with_capacity(churn.rounds as usize);
    for round in 1..=churn.rounds {
        stop.check(0)?;
        let outcome = match &mut follower {
            Follower::Keys(keys) => keys.round(shards, &shares, round, connect_timeout, stop)?,
            Follower::Fields(fields) => {
                fields.round(shards, &shares, round, connect_timeout, stop)?
            }
            Follower::Profile(keys) => keys.round(shards, &shares, round, connect_timeout, stop)?,
        };
        stop.sleep(ROUND_SETTLE)?;
        let memory = read(shards, "after a churn round")?;
        rounds.push(ChurnRound {
            round,
            deleted: outcome.deleted,
            overwritten: outcome.overwritten,
            used_memory: memory.used_memory,
            used_memory_rss: memory.used_memory_rss,
            allocator_frag_ratio: memory.allocator_frag_ratio,
            mem_fragmentation_ratio: memory.mem_fragmentation_ratio,
            items: outcome.items,
            elements: outcome.elements,
            seconds: outcome.seconds,
        });
    }
    Ok(ChurnReport {
        rounds,
        defrag: None,
    })
}
