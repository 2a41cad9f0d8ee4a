//! The churn phase, run after a repetition's load and readings on the data it loaded: rounds of
//! deletes and overwrites with values of another size, each followed by a memory reading and a
//! count of what the engine still holds, then (when asked) active defragmentation
//! (`client::defrag`). A freshly loaded keyspace is the best case an allocator sees; this is
//! what the same engine holds once the data has changed.
//!
//! Which items a round deletes and overwrites is decided by the item's number, the round and
//! the seed alone, so every engine loses and rewrites the same items. The client keeps one byte
//! per item (held, deleted, overwritten) to know each item's current form; the workloads it
//! applies to are those whose items it can name (strings, records, the sorted set).

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::client::draws::KeyGenerator;
use crate::client::encoder::{KEY_DIGITS, KEY_PREFIX};
use crate::client::resp::{CommandBuffer, push_decimal};
use crate::client::shards::{LoadConnections, Pacing, ReadMemory, ShardSet};
use crate::client::workload::Workload;
use crate::crd::{
    ChurnRoundStatus, ChurnSpec, ChurnStatus, DefragStatus, LatencyStatus, RecordLayout,
};
use crate::error::BenchError;

/// The most items a churn follows: one byte each on the client.
pub const MAX_CHURN_ITEMS: u64 = 100_000_000;

/// Commands per batch of a round (one batch in flight: a round is not timed as a load is).
const CHURN_BATCH: usize = 200;

/// How long a round's reading waits after its last command: Redis and Valkey refresh
/// used_memory_rss and the allocator's figures (`allocator_frag_ratio`) in their 100 ms cron,
/// so a reading right after the deletes can hold the figures from before them.
pub const ROUND_SETTLE: Duration = Duration::from_millis(300);

/// A churn as asked, checked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Churn {
    pub rounds: u32,
    pub delete_share: Option<f64>,
    pub overwrite_share: Option<f64>,
    pub overwrite_value_size: u32,
    pub defrag: bool,
    pub defrag_seconds: u32,
    pub seed: u64,
}

impl Churn {
    /// The checks a churn passes whichever way it was given: `field` names a setting
    /// (`deleteShare`) as the user gave it (`spec.churn.deleteShare`, `--delete-share`).
    pub fn checked(spec: &ChurnSpec, field: &dyn Fn(&str) -> String) -> Result<Self, BenchError> {
        let invalid = |name: &str, message: String| BenchError::InvalidArgument {
            field: field(name),
            message,
        };
        if spec.rounds == 0 || spec.rounds > 100 {
            return Err(invalid(
                "rounds",
                format!("is {}: it must be between 1 and 100", spec.rounds),
            ));
        }
        if spec.delete_share.is_none() && spec.overwrite_share.is_none() {
            return Err(invalid(
                "deleteShare",
                "a churn needs deleteShare, overwriteShare or both: a round that changes nothing measures nothing".into(),
            ));
        }
        if let Some(share) = spec.delete_share {
            if share >= 1.0 && share.is_finite() {
                return Err(invalid(
                    "deleteShare",
                    format!(
                        "is {share}: a round would delete every item, leaving nothing to measure; it must be above 0 and below 1"
                    ),
                ));
            }
            if !(share > 0.0 && share < 1.0) {
                return Err(invalid(
                    "deleteShare",
                    format!("is {share}: it must be above 0 and below 1"),
                ));
            }
        }
        if let Some(share) = spec.overwrite_share
            && !(share > 0.0 && share <= 1.0)
        {
            return Err(invalid(
                "overwriteShare",
                format!("is {share}: it must be above 0 and at most 1"),
            ));
        }
        let overwrite_value_size = match (spec.overwrite_share, spec.overwrite_value_size) {
            (Some(_), None) => {
                return Err(invalid(
                    "overwriteValueSize",
                    "is needed with overwriteShare: the size in bytes of the values an overwrite writes".into(),
                ));
            }
            (None, Some(_)) => {
                return Err(invalid(
                    "overwriteValueSize",
                    "applies only with overwriteShare: set overwriteShare too, or remove overwriteValueSize".into(),
                ));
            }
            (_, Some(size)) if size == 0 || size > 1 << 20 => {
                return Err(invalid(
                    "overwriteValueSize",
                    format!("is {size}: it must be between 1 and 1048576 bytes"),
                ));
            }
            (_, size) => size.unwrap_or(0),
        };
        if spec.defrag_seconds < 5 || spec.defrag_seconds > 3600 {
            return Err(invalid(
                "defragSeconds",
                format!("is {}: it must be between 5 and 3600", spec.defrag_seconds),
            ));
        }
        Ok(Self {
            rounds: spec.rounds,
            delete_share: spec.delete_share,
            overwrite_share: spec.overwrite_share,
            overwrite_value_size,
            defrag: spec.defrag,
            defrag_seconds: spec.defrag_seconds,
            seed: spec.seed,
        })
    }

    /// A spec's churn (`spec.churn`), checked.
    pub fn from_spec(spec: &ChurnSpec) -> Result<Self, BenchError> {
        Self::checked(spec, &|name| format!("spec.churn.{name}"))
    }

    /// Whether the churn applies to `workload`: one whose items it can name, with no TTL (an
    /// overwrite would drop the TTL and a key that expires mid-round would be counted as
    /// lost), of at most [`MAX_CHURN_ITEMS`] items. `field` names the churn as the user gave it.
    pub fn check_workload(
        &self,
        workload: &Workload,
        has_ttl: bool,
        field: &str,
    ) -> Result<(), BenchError> {
        let refuse = |message: String| {
            Err(BenchError::InvalidArgument {
                field: field.to_string(),
                message,
            })
        };
        let items = match workload {
            Workload::Strings { keys, .. } => *keys,
            Workload::Records { records, .. } => *records,
            Workload::SortedSet { members, .. } => *members,
            Workload::RandomStrings { .. } => {
                return refuse("applies to the strings, records and sortedSet workloads; randomStrings draws its keys at random, so which exist is not known item by item: use strings with the same value size".into());
            }
            Workload::Profile(_) => {
                return refuse("applies to the strings, records and sortedSet workloads, not yet to a profile's rebuild".into());
            }
        };
        if has_ttl {
            return refuse("does not apply with a TTL (ttlSeconds): an overwrite drops a key's TTL, and keys that expire during a round would be counted as deleted; remove ttlSeconds or the churn".into());
        }
        if items > MAX_CHURN_ITEMS {
            return refuse(format!(
                "applies to at most {MAX_CHURN_ITEMS} items (the client keeps a byte per item); this workload has {items}"
            ));
        }
        Ok(())
    }
}

/// What one round did and what the engine held after it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChurnRound {
    /// Counted from 1.
    pub round: u32,
    /// Items this round deleted (each confirmed by its command's reply).
    pub deleted: u64,
    /// Items this round overwrote.
    pub overwritten: u64,
    pub used_memory: u64,
    pub used_memory_rss: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocator_frag_ratio: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_fragmentation_ratio: Option<f64>,
    /// Items held after the round, verified in the engine (DBSIZE, ZCARD).
    pub items: u64,
    /// A record's fields held after the round (a record as a hash, verified with HLEN of
    /// the records overwritten; as strings, with DBSIZE), where items hold elements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elements: Option<u64>,
    /// How long the round's commands took.
    pub seconds: f64,
}

/// The rounds, and the defragmentation after them when asked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChurnReport {
    pub rounds: Vec<ChurnRound>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defrag: Option<crate::client::defrag::DefragReport>,
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

/// An item's state, one byte per item.
const DELETED: u8 = 0;
const ORIGINAL: u8 = 1;
const OVERWRITTEN: u8 = 2;

/// The draw deciding, for `item` in `round`, whether a share applies: a SplitMix64 of the
/// seed, the round, the purpose and the item, compared with the share.
fn drawn(seed: u64, round: u32, purpose: u64, item: u64, share: f64) -> bool {
    let mut generator = KeyGenerator::new(
        seed ^ (u64::from(round) << 48)
            ^ (purpose << 40)
            ^ item.wrapping_mul(0x9e37_79b9_7f4a_7c15),
    );
    let draw = generator.next_u64() >> 11;
    (draw as f64) < share * (1u64 << 53) as f64
}

const DELETE: u64 = 1;
const OVERWRITE: u64 = 2;

/// Whether round `round` of a churn seeded `seed` deletes item `item` (if it still holds it):
/// what an independent check sends its own deletes by.
pub fn deletes(seed: u64, round: u32, item: u64, share: f64) -> bool {
    drawn(seed, round, DELETE, item, share)
}

/// A sorted-set member's name once overwritten: `m:<i>:` padded with `x` to the overwrite's
/// size (longer than the original `m:<i>` whatever the size).
fn overwritten_member(out: &mut Vec<u8>, item: u64, size: u32) {
    out.clear();
    out.extend_from_slice(b"m:");
    push_decimal(out, item);
    out.push(b':');
    out.resize(out.len().max(size as usize), b'x');
}

/// The commands of one item's change, appended to `batch`; the replies they owe. Keys and
/// members are named as the load's encoder names them (`key:` and 12 digits, `user:<i>` and
/// `user:<i>:<field>`, `m:<i>`).
struct Encoder<'a> {
    workload: &'a Workload,
    value: Vec<u8>,
    /// A record field's key, or an overwritten member's name.
    name: Vec<u8>,
}

impl<'a> Encoder<'a> {
    fn new(workload: &'a Workload, size: u32) -> Self {
        Self {
            workload,
            value: vec![b'x'; size as usize],
            name: Vec::new(),
        }
    }

    /// `user:<item>:<field>` into `self.name`.
    fn field_key(&mut self, item: u64, field: &str) {
        self.name.clear();
        self.name.extend_from_slice(b"user:");
        push_decimal(&mut self.name, item);
        self.name.push(b':');
        self.name.extend_from_slice(field.as_bytes());
    }

    /// The item's key as an argument: strings and records stored as hashes.
    fn key(batch: &mut CommandBuffer, workload: &Workload, item: u64) {
        match workload {
            Workload::Strings { .. } => batch.bulk_padded_decimal(KEY_PREFIX, item, KEY_DIGITS),
            _ => batch.bulk_prefixed_decimal(b"user:", item),
        };
    }

    /// The member's current name as an argument.
    fn member(&mut self, batch: &mut CommandBuffer, item: u64, state: u8, size: u32) {
        if state == OVERWRITTEN {
            overwritten_member(&mut self.name, item, size);
            batch.bulk(&self.name);
        } else {
            batch.bulk_prefixed_decimal(b"m:", item);
        }
    }

    fn delete(&mut self, batch: &mut CommandBuffer, item: u64, state: u8, size: u32) -> usize {
        match self.workload {
            Workload::Strings { .. }
            | Workload::Records {
                layout: RecordLayout::Hash,
                ..
            } => {
                Self::key(batch.array(2).bulk(b"DEL"), self.workload, item);
                1
            }
            Workload::Records {
                layout: RecordLayout::Strings,
                fields,
                ..
            } => {
                // One DEL per field's key: in a cluster they may live on different shards.
                for field in fields {
                    self.field_key(item, field);
                    batch.array(2).bulk(b"DEL").bulk(&self.name);
                }
                fields.len()
            }
            Workload::SortedSet { key, .. } => {
                batch.array(3).bulk(b"ZREM").bulk(key.as_bytes());
                self.member(batch, item, state, size);
                1
            }
            Workload::RandomStrings { .. } | Workload::Profile(_) => {
                unreachable!("check_workload refuses them")
            }
        }
    }

    fn overwrite(&mut self, batch: &mut CommandBuffer, item: u64, state: u8, size: u32) -> usize {
        match self.workload {
            Workload::Strings { .. } => {
                Self::key(batch.array(3).bulk(b"SET"), self.workload, item);
                batch.bulk(&self.value);
                1
            }
            Workload::Records {
                layout: RecordLayout::Hash,
                fields,
                ..
            } => {
                Self::key(
                    batch.array(2 + 2 * fields.len()).bulk(b"HSET"),
                    self.workload,
                    item,
                );
                for field in fields {
                    batch.bulk(field.as_bytes()).bulk(&self.value);
                }
                1
            }
            Workload::Records {
                layout: RecordLayout::Strings,
                fields,
                ..
            } => {
                for field in fields {
                    self.field_key(item, field);
                    batch
                        .array(3)
                        .bulk(b"SET")
                        .bulk(&self.name)
                        .bulk(&self.value);
                }
                fields.len()
            }
            Workload::SortedSet { key, .. } => {
                // Removed under its current name, added again under a name of the new size
                // with the same score. Once overwritten its name stays the same size.
                batch.array(3).bulk(b"ZREM").bulk(key.as_bytes());
                self.member(batch, item, state, size);
                overwritten_member(&mut self.name, item, size);
                batch
                    .array(4)
                    .bulk(b"ZADD")
                    .bulk(key.as_bytes())
                    .bulk_decimal(item)
                    .bulk(&self.name);
                2
            }
            Workload::RandomStrings { .. } | Workload::Profile(_) => {
                unreachable!("check_workload refuses them")
            }
        }
    }
}

/// What a round's commands must have answered, as integer replies: a DEL of a held key `:1`,
/// a ZREM of a held member `:1`, the re-added member's ZADD `:1`; SET answers `+OK` and an
/// HSET of existing fields `:0`.
fn integer_replies_owed(workload: &Workload, deleted: u64, overwritten: u64) -> u64 {
    match workload {
        Workload::Records {
            layout: RecordLayout::Strings,
            fields,
            ..
        } => deleted * fields.len() as u64,
        Workload::SortedSet { .. } => deleted + 2 * overwritten,
        _ => deleted,
    }
}

/// Sends `batch` (owing `replies` replies) and adds its integer replies to `sum`; an error
/// reply fails the round naming the command and the engine's words.
fn flush(
    connections: &mut LoadConnections,
    batch: &mut CommandBuffer,
    replies: &mut usize,
    owed: &mut Vec<usize>,
    sum: &mut u64,
    round: u32,
) -> Result<(), BenchError> {
    if *replies == 0 {
        return Ok(());
    }
    let lost = |connections: &LoadConnections, failure| BenchError::ConnectionLost {
        items_sent: 0,
        detail: format!("churn round {round}: {}", connections.describe(&failure)),
    };
    connections
        .send(batch, *replies, owed)
        .map_err(|f| lost(connections, f))?;
    let (tally, shard) = connections.read(owed).map_err(|f| lost(connections, f))?;
    if let Some(reply) = tally.first_error {
        return Err(BenchError::from_load_reply(
            &format!("churn round {round}"),
            reply,
            0,
            connections.address(shard),
        ));
    }
    *sum += tally.integer_sum;
    batch.clear();
    *replies = 0;
    Ok(())
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
    let mut states = vec![ORIGINAL; usize::try_from(items).unwrap_or(usize::MAX)];
    let mut held = items;
    let mut rounds = Vec::with_capacity(churn.rounds as usize);
    let size = churn.overwrite_value_size;
    for round in 1..=churn.rounds {
        stop.check(0)?;
        let started = Instant::now();
        let mut connections = LoadConnections::connect(shards, connect_timeout)?;
        let mut encoder = Encoder::new(workload, size);
        let mut batch = CommandBuffer::with_capacity(64 * 1024);
        let mut owed = Vec::new();
        let (mut replies, mut in_batch, mut sum) = (0usize, 0usize, 0u64);
        let (mut deleted, mut overwritten) = (0u64, 0u64);
        for (item, state) in states.iter_mut().enumerate() {
            if *state == DELETED {
                continue;
            }
            let item = item as u64;
            if churn
                .delete_share
                .is_some_and(|share| drawn(churn.seed, round, DELETE, item, share))
            {
                replies += encoder.delete(&mut batch, item, *state, size);
                *state = DELETED;
                deleted += 1;
            } else if churn
                .overwrite_share
                .is_some_and(|share| drawn(churn.seed, round, OVERWRITE, item, share))
            {
                replies += encoder.overwrite(&mut batch, item, *state, size);
                *state = OVERWRITTEN;
                overwritten += 1;
            } else {
                continue;
            }
            in_batch += 1;
            if in_batch >= CHURN_BATCH {
                flush(
                    &mut connections,
                    &mut batch,
                    &mut replies,
                    &mut owed,
                    &mut sum,
                    round,
                )?;
                in_batch = 0;
                stop.check(0)?;
            }
        }
        flush(
            &mut connections,
            &mut batch,
            &mut replies,
            &mut owed,
            &mut sum,
            round,
        )?;
        drop(connections);
        let seconds = started.elapsed().as_secs_f64();
        let expected = integer_replies_owed(workload, deleted, overwritten);
        if sum != expected {
            return Err(BenchError::CountMismatch {
                message: format!(
                    "churn round {round}: the engine's replies confirm {sum} of the {expected} deletes and re-adds sent ({deleted} items deleted, {overwritten} overwritten): items the load stored were missing, or another client changed the data"
                ),
            });
        }
        held -= deleted;
        let (counted, elements) = count_held(shards, workload, &states, held)?;
        if counted != held {
            return Err(BenchError::CountMismatch {
                message: format!(
                    "after churn round {round} the engine holds {counted} {}s, expected {held} ({deleted} deleted of {})",
                    workload.item_noun(),
                    held + deleted
                ),
            });
        }
        stop.sleep(ROUND_SETTLE)?;
        let memory = read(shards, "after a churn round")?;
        rounds.push(ChurnRound {
            round,
            deleted,
            overwritten,
            used_memory: memory.used_memory,
            used_memory_rss: memory.used_memory_rss,
            allocator_frag_ratio: memory.allocator_frag_ratio,
            mem_fragmentation_ratio: memory.mem_fragmentation_ratio,
            items: counted,
            elements,
            seconds,
        });
    }
    Ok(ChurnReport {
        rounds,
        defrag: None,
    })
}

/// The items the engine holds (DBSIZE; ZCARD of the sorted set), and a record's fields where
/// they are elements (hashes: HLEN of a sample of the overwritten records must be the field
/// count, so the total is held x fields; strings: DBSIZE counts the fields' keys).
fn count_held(
    shards: &mut ShardSet,
    workload: &Workload,
    states: &[u8],
    held: u64,
) -> Result<(u64, Option<u64>), BenchError> {
    use crate::client::workload::KeyCounts;
    match workload {
        Workload::SortedSet { key, .. } => Ok((shards.zcard(key)?, None)),
        Workload::Records {
            layout: RecordLayout::Strings,
            fields,
            ..
        } => {
            let keys = shards.dbsize()?;
            let per = fields.len() as u64;
            if keys % per != 0 {
                return Err(BenchError::CountMismatch {
                    message: format!(
                        "after a churn round the engine holds {keys} keys, not a whole number of {per}-field records"
                    ),
                });
            }
            Ok((keys / per, Some(keys)))
        }
        Workload::Records {
            layout: RecordLayout::Hash,
            fields,
            ..
        } => {
            let keys = shards.dbsize()?;
            // An overwritten record keeps its fields (HSET of existing ones adds none): checked
            // on the first few, the others' HSET replies said so already.
            for (item, _) in states
                .iter()
                .enumerate()
                .filter(|(_, s)| **s == OVERWRITTEN)
                .take(8)
            {
                let name = format!("user:{item}");
                let length = shards.hlen(&name)?;
                if length != fields.len() as u64 {
                    return Err(BenchError::CountMismatch {
                        message: format!(
                            "after a churn round record {name} holds {length} fields, expected {}",
                            fields.len()
                        ),
                    });
                }
            }
            Ok((keys, Some(held * fields.len() as u64)))
        }
        _ => Ok((shards.dbsize()?, None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(delete: Option<f64>, overwrite: Option<f64>, size: Option<u32>) -> ChurnSpec {
        ChurnSpec {
            rounds: 2,
            delete_share: delete,
            overwrite_share: overwrite,
            overwrite_value_size: size,
            defrag: false,
            defrag_seconds: 60,
            seed: 1,
        }
    }

    fn refusal(spec: &ChurnSpec) -> String {
        Churn::from_spec(spec).unwrap_err().to_string()
    }

    #[test]
    fn shares_outside_their_range_and_a_round_that_deletes_everything_are_refused_naming_the_field()
    {
        assert!(refusal(&spec(Some(1.0), None, None)).contains("would delete every item"));
        assert!(refusal(&spec(Some(0.0), None, None)).contains("spec.churn.deleteShare"));
        assert!(refusal(&spec(Some(-0.5), None, None)).contains("above 0 and below 1"));
        assert!(refusal(&spec(Some(f64::NAN), None, None)).contains("above 0 and below 1"));
        assert!(refusal(&spec(None, Some(1.5), Some(10))).contains("spec.churn.overwriteShare"));
        assert!(refusal(&spec(None, Some(0.5), None)).contains("overwriteValueSize"));
        assert!(refusal(&spec(Some(0.5), None, Some(10))).contains("applies only with"));
        assert!(refusal(&spec(None, None, None)).contains("changes nothing"));
        assert!(Churn::from_spec(&spec(Some(0.5), Some(1.0), Some(300))).is_ok());
    }

    #[test]
    fn the_draws_take_the_share_asked_and_are_the_same_for_the_same_seed() {
        let n = 200_000u64;
        let picked = (0..n).filter(|i| drawn(1, 1, DELETE, *i, 0.5)).count() as f64;
        // A binomial's standard deviation here is about 224: 5 of them.
        assert!((picked - 100_000.0).abs() < 1_120.0, "{picked}");
        let again = (0..n).filter(|i| drawn(1, 1, DELETE, *i, 0.5)).count() as f64;
        assert_eq!(picked, again);
        let other_round = (0..1000)
            .filter(|i| drawn(1, 1, DELETE, *i, 0.5) != drawn(1, 2, DELETE, *i, 0.5))
            .count();
        assert!(other_round > 300, "rounds draw apart: {other_round}");
    }

    #[test]
    fn names_match_the_loads_and_an_overwritten_member_is_longer() {
        let record = |layout| Workload::Records {
            records: 10,
            layout,
            fields: vec!["name".into(), "age".into()],
        };
        let workloads = [
            Workload::Strings {
                keys: 100,
                value_size: 100,
            },
            record(RecordLayout::Hash),
            record(RecordLayout::Strings),
            Workload::SortedSet {
                members: 100,
                key: "z".into(),
                sample_every: 0,
            },
        ];
        for workload in &workloads {
            // The load's commands for item 42 (a record stored as strings: both its fields).
            let mut load = CommandBuffer::default();
            let mut encoder = workload.encoder();
            let per = workload.commands_per_item();
            for index in 42 * per..43 * per {
                encoder.encode(index, &mut load);
            }
            let mut deleted = CommandBuffer::default();
            Encoder::new(workload, 10).delete(&mut deleted, 42, ORIGINAL, 10);
            // Every argument the delete names after its command is one the load wrote.
            let text = String::from_utf8_lossy(deleted.as_bytes()).into_owned();
            let loaded = String::from_utf8_lossy(load.as_bytes()).into_owned();
            for argument in text
                .split("\r\n")
                .filter(|a| !a.is_empty() && !a.starts_with(['*', '$']))
            {
                if !["DEL", "ZREM", "z"].contains(&argument) {
                    assert!(
                        loaded.contains(&format!("\r\n{argument}\r\n")),
                        "{argument} is not in the load's {loaded:?}"
                    );
                }
            }
        }
        let mut out = Vec::new();
        overwritten_member(&mut out, 5, 10);
        assert_eq!(out, b"m:5:xxxxxx");
        overwritten_member(&mut out, 12345, 3);
        assert_eq!(out, b"m:12345:");
    }

    #[test]
    fn workloads_it_cannot_follow_item_by_item_are_refused_saying_which_it_can() {
        let churn = Churn::from_spec(&spec(Some(0.5), None, None)).unwrap();
        let random = Workload::RandomStrings {
            requests: 10,
            keyspace: 10,
            value_size: 16,
            seed: 1,
        };
        let message = churn
            .check_workload(&random, false, "spec.churn")
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("strings, records and sortedSet"),
            "{message}"
        );
        let strings = Workload::Strings {
            keys: 10,
            value_size: 100,
        };
        assert!(churn.check_workload(&strings, false, "spec.churn").is_ok());
        assert!(
            churn
                .check_workload(&strings, true, "spec.churn")
                .unwrap_err()
                .to_string()
                .contains("TTL")
        );
    }
}
