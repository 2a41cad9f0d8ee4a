//! The churn of whole items: strings and random strings (`DEL`, `SET`), records stored as
//! strings (a `DEL` or `SET` of each field's key), sorted-set members (`ZREM`, and a member
//! overwritten is removed and added again under a name of the overwrite's size). One byte per
//! item says whether it is held and in which form.
//!
//! A random-strings load wrote the keys its seeded draws picked, some several times and most
//! key spaces not whole: the client replays those draws (the load's own generator, seed and
//! request count) to know exactly which keys exist, and the churn then works on those alone, as
//! on strings. Every `DEL` must answer `:1`, and `DBSIZE` must be the keys the replay says are
//! held: a key the replay thinks absent but the engine holds (or the reverse) fails the round.

use std::time::{Duration, Instant};

use super::rounds::{
    Batch, Change, DELETED, ORIGINAL, OVERWRITTEN, RoundOutcome, Shares, check_count,
};
use crate::client::connection::resp::{CommandBuffer, push_decimal};
use crate::client::connection::shards::{LoadConnections, ShardSet};
use crate::client::connection::stop_request::StopRequest;
use crate::client::workloads::draws::KeyGenerator;
use crate::client::workloads::encoder::{KEY_DIGITS, KEY_PREFIX};
use crate::client::workloads::workload::{KeyCounts, Workload};
use crate::crd::RecordLayout;
use crate::error::BenchError;

/// The items of a churn of whole items and their states.
pub struct KeyChurn<'a> {
    workload: &'a Workload,
    states: Vec<u8>,
    held: u64,
}

impl<'a> KeyChurn<'a> {
    /// The loaded items' states: every item held, or for random strings the keys the load's
    /// draws wrote; `items` is the load's verified count, which the replay must give.
    pub fn new(workload: &'a Workload, items: u64) -> Result<Self, BenchError> {
        let states = match workload {
            Workload::RandomStrings {
                requests,
                keyspace,
                seed,
                ..
            } => {
                let states = replayed_keys(*requests, *keyspace, *seed);
                let drawn = states.iter().filter(|s| **s != DELETED).count() as u64;
                check_count(drawn, items, || {
                    format!(
                        "the load's {requests} draws over {keyspace} keys (seed {seed}) wrote {drawn} distinct keys, but the engine holds {items}: the churn cannot name the keys that exist (did something else write to the server?)"
                    )
                })?;
                states
            }
            _ => vec![ORIGINAL; usize::try_from(items).unwrap_or(usize::MAX)],
        };
        Ok(Self {
            workload,
            states,
            held: items,
        })
    }

    /// One round's deletes and overwrites, every reply checked, then the count the engine holds.
    pub fn round(
        &mut self,
        shards: &mut ShardSet,
        shares: &Shares,
        round: u32,
        connect_timeout: Duration,
        stop: &StopRequest,
    ) -> Result<RoundOutcome, BenchError> {
        let started = Instant::now();
        let what = format!("churn round {round}");
        let size = shares.value_size;
        let mut connections = LoadConnections::connect(shards, connect_timeout)?;
        let mut encoder = Encoder::new(self.workload, size);
        let mut batch = Batch::new();
        let (mut deleted, mut overwritten) = (0u64, 0u64);
        for (item, state) in self.states.iter_mut().enumerate() {
            if *state == DELETED {
                continue;
            }
            let item = item as u64;
            match shares.change(round, item) {
                Change::Delete => {
                    batch.replies += encoder.delete(&mut batch.buffer, item, *state, size);
                    *state = DELETED;
                    deleted += 1;
                }
                Change::Overwrite => {
                    batch.replies += encoder.overwrite(&mut batch.buffer, item, *state, size);
                    *state = OVERWRITTEN;
                    overwritten += 1;
                }
                Change::Keep => continue,
            }
            batch.entries += 1;
            if batch.is_full() {
                batch.flush(&mut connections, &what)?;
                stop.check(0)?;
            }
        }
        batch.flush(&mut connections, &what)?;
        drop(connections);
        let seconds = started.elapsed().as_secs_f64();
        let expected = integer_replies_owed(self.workload, deleted, overwritten);
        check_count(batch.sum, expected, || {
            format!(
                "churn round {round}: the engine's replies confirm {} of the {expected} deletes and re-adds sent ({deleted} items deleted, {overwritten} overwritten): items the load stored were missing, or another client changed the data",
                batch.sum
            )
        })?;
        self.held -= deleted;
        let (counted, elements) = count_held(shards, self.workload)?;
        check_count(counted, self.held, || {
            format!(
                "after churn round {round} the engine holds {counted} {}s, expected {} ({deleted} deleted of {})",
                self.workload.item_noun(),
                self.held,
                self.held + deleted
            )
        })?;
        Ok(RoundOutcome {
            deleted,
            overwritten,
            items: counted,
            elements,
            seconds,
        })
    }
}

/// The keys a random-strings load wrote, replayed from its draws (the load's encoder draws
/// one key per request from a generator seeded with `seed`): `ORIGINAL` for each key drawn.
fn replayed_keys(requests: u64, keyspace: u64, seed: u64) -> Vec<u8> {
    let mut states = vec![DELETED; usize::try_from(keyspace).unwrap_or(usize::MAX)];
    let mut keys = KeyGenerator::new(seed);
    for _ in 0..requests {
        states[keys.below(keyspace) as usize] = ORIGINAL;
    }
    states
}

/// A sorted-set member's name once overwritten: `m:<i>:` padded with `x` to the overwrite's
/// size (longer than the original `m:<i>` whatever the size).
pub(super) fn overwritten_member(out: &mut Vec<u8>, item: u64, size: u32) {
    out.clear();
    out.extend_from_slice(b"m:");
    push_decimal(out, item);
    out.push(b':');
    out.resize(out.len().max(size as usize), b'x');
}

/// The commands of one item's change, appended to `batch`; the replies they owe. Keys and
/// members are named as the load's encoder names them (`key:` and 12 digits, `user:<i>:<field>`,
/// `m:<i>`).
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
            Workload::Strings { .. } | Workload::RandomStrings { .. } => {
                batch
                    .array(2)
                    .bulk(b"DEL")
                    .bulk_padded_decimal(KEY_PREFIX, item, KEY_DIGITS);
                1
            }
            Workload::Records { fields, .. } => {
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
            Workload::Profile(_) => unreachable!("a profile churns in `profile`"),
            Workload::Rdb(_) => unreachable!("an rdb load is refused a churn (`churn::spec`)"),
        }
    }

    fn overwrite(&mut self, batch: &mut CommandBuffer, item: u64, state: u8, size: u32) -> usize {
        match self.workload {
            Workload::Strings { .. } | Workload::RandomStrings { .. } => {
                batch
                    .array(3)
                    .bulk(b"SET")
                    .bulk_padded_decimal(KEY_PREFIX, item, KEY_DIGITS)
                    .bulk(&self.value);
                1
            }
            Workload::Records { fields, .. } => {
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
            Workload::Profile(_) => unreachable!("a profile churns in `profile`"),
            Workload::Rdb(_) => unreachable!("an rdb load is refused a churn (`churn::spec`)"),
        }
    }
}

/// What a round's commands must have answered, as integer replies: a DEL of a held key `:1`,
/// a ZREM of a held member `:1`, the re-added member's ZADD `:1`; SET answers `+OK`.
fn integer_replies_owed(workload: &Workload, deleted: u64, overwritten: u64) -> u64 {
    match workload {
        Workload::Records { fields, .. } => deleted * fields.len() as u64,
        Workload::SortedSet { .. } => deleted + 2 * overwritten,
        _ => deleted,
    }
}

/// The items the engine holds (DBSIZE; ZCARD of the sorted set), and a record's fields where
/// they are elements (records as strings: DBSIZE counts the fields' keys).
fn count_held(
    shards: &mut ShardSet,
    workload: &Workload,
) -> Result<(u64, Option<u64>), BenchError> {
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
        _ => Ok((shards.dbsize()?, None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_the_loads_and_an_overwritten_member_is_longer() {
        let workloads = [
            Workload::Strings {
                keys: 100,
                value_size: 100,
            },
            Workload::Records {
                records: 10,
                layout: RecordLayout::Strings,
                fields: vec!["name".into(), "age".into()],
            },
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
    fn the_replay_names_exactly_the_keys_a_random_strings_load_sent() {
        let workload = Workload::RandomStrings {
            requests: 3_000,
            keyspace: 2_000,
            value_size: 4,
            seed: 7,
        };
        let mut encoder = workload.encoder();
        let mut load = CommandBuffer::default();
        for index in 0..3_000 {
            encoder.encode(index, &mut load);
        }
        let loaded = String::from_utf8_lossy(load.as_bytes()).into_owned();
        let states = replayed_keys(3_000, 2_000, 7);
        let held = states.iter().filter(|s| **s == ORIGINAL).count() as u64;
        assert_eq!(Some(held), encoder.distinct_sent());
        for (key, state) in states.iter().enumerate() {
            let name = format!("\r\nkey:{key:012}\r\n");
            assert_eq!(loaded.contains(&name), *state == ORIGINAL, "key {key}");
        }
    }
}
