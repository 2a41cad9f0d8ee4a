//! The churn of a profile's rebuild (`Workload::Profile`): keys of mixed types, each drawn by
//! its number (the `{n}` of its group's template), the round and the seed, as whole items are
//! (`keys`). The client names every key and knows its type, element count and TTL from the
//! workload's own draws (`ProfileEncoder::each_key`, the load's), never from the engine, and
//! keeps one byte per key.
//!
//! A round deletes `deleteShare` of the keys still held (`DEL`, whatever the type) and
//! overwrites `overwriteShare` of those it left with values of `overwriteValueSize` bytes:
//! - a string is `SET` to a value of that size;
//! - a collection's elements are replaced: the key is deleted and written again with as many
//!   elements as the load gave it, each of that size: a list's values, a hash's values (its
//!   fields named by their place, `0`, `1`, ...), a set's or sorted set's members (`m:<j>:`
//!   padded with `x` to the size, score `j`), a stream's entries (one field `v`);
//! - a key the load gave a TTL gets it again (`SET ... PX`, `PEXPIRE`), so the expires table
//!   keeps the keys it held.
//!
//! Replacing keeps each key's element count, so what the engine must hold after a round follows
//! from the states alone, and is verified: every `DEL` answered `:1`, every re-add the elements
//! it added (`RPUSH` the list's length), every `PEXPIRE` `:1`; `DBSIZE` is the keys held, the
//! keys with an expiry those of them with a TTL, and a pipelined `HLEN`, `SCARD`, `LLEN`,
//! `ZCARD` or `XLEN` over every collection key held sums to their elements. `deleted` and
//! `overwritten` count keys, `items` the keys held, `elements` the collections' elements held.

use std::time::{Duration, Instant};

use super::keys::overwritten_member;
use super::rounds::{
    Batch, Change, DELETED, MAX_BATCH_BYTES, ORIGINAL, OVERWRITTEN, RoundOutcome, Shares,
    check_count,
};
use crate::client::connection::shards::{LoadConnections, ShardSet};
use crate::client::connection::stop_request::StopRequest;
use crate::client::workloads::profile_encoder::{ProfileEncoder, RebuiltKey};
use crate::client::workloads::profile_workload::{
    ELEMENTS_PER_COMMAND, ProfileWorkload, REBUILD_TTL_MILLIS,
};
use crate::client::workloads::workload::KeyCounts;
use crate::error::BenchError;
use crate::profile::model::KeyType;

/// A rebuild's keys and their states.
pub struct ProfileChurn {
    encoder: ProfileEncoder,
    states: Vec<u8>,
    keys_held: u64,
    /// Of the keys held: those with a TTL, and the collections' elements.
    ttl_held: u64,
    elements_held: u64,
}

/// The elements a key counts among a round's `elements`: none for a string.
fn collection_elements(key: &RebuiltKey<'_>) -> u64 {
    if key.key_type == KeyType::String {
        0
    } else {
        key.elements
    }
}

/// The command that counts a collection's elements.
fn length_command(key_type: KeyType) -> Option<&'static [u8]> {
    match key_type {
        KeyType::String => None,
        KeyType::Hash => Some(b"HLEN"),
        KeyType::List => Some(b"LLEN"),
        KeyType::Set => Some(b"SCARD"),
        KeyType::Zset => Some(b"ZCARD"),
        KeyType::Stream => Some(b"XLEN"),
    }
}

impl ProfileChurn {
    /// Every key of `workload` held, as the load verified (`items` must be its keys).
    pub fn new(workload: &ProfileWorkload, items: u64) -> Result<Self, BenchError> {
        check_count(items, workload.keys, || {
            format!(
                "the churn starts from the rebuild's {} keys, but the load's count says the engine holds {items}",
                workload.keys
            )
        })?;
        let encoder = workload.encoder();
        let (mut ttl_held, mut elements_held) = (0u64, 0u64);
        encoder.each_key(|key| {
            ttl_held += u64::from(key.ttl);
            elements_held += collection_elements(&key);
            Ok::<_, BenchError>(())
        })?;
        Ok(Self {
            encoder,
            states: vec![ORIGINAL; usize::try_from(items).unwrap_or(usize::MAX)],
            keys_held: items,
            ttl_held,
            elements_held,
        })
    }

    /// One round's deletes and rewrites, every reply checked, then the keys, expiries and
    /// elements the engine holds counted.
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
        let mut connections = LoadConnections::connect(shards, connect_timeout)?;
        let mut rewrite = Rewrite::new(shares.value_size);
        let mut batch = Batch::new();
        let (mut deleted, mut overwritten) = (0u64, 0u64);
        let (mut ttl_deleted, mut elements_deleted) = (0u64, 0u64);
        let mut owed = 0u64;
        let states = &mut self.states;
        self.encoder.each_key(|key| {
            let state = &mut states[key.number as usize];
            if *state == DELETED {
                return Ok(());
            }
            match shares.change(round, key.number) {
                Change::Delete => {
                    *state = DELETED;
                    deleted += 1;
                    ttl_deleted += u64::from(key.ttl);
                    elements_deleted += collection_elements(&key);
                    owed += batch_delete(&mut batch, key.name);
                    send_when_full(&mut batch, &mut connections, &what, stop)
                }
                Change::Overwrite => {
                    *state = OVERWRITTEN;
                    overwritten += 1;
                    owed += rewrite.key(&key, &mut batch, &mut connections, &what, stop)?;
                    Ok(())
                }
                Change::Keep => Ok(()),
            }
        })?;
        batch.flush(&mut connections, &what)?;
        let seconds = started.elapsed().as_secs_f64();
        check_count(batch.sum, owed, || {
            format!(
                "churn round {round}: the engine's integer replies add up to {}, expected {owed} ({deleted} keys deleted, {overwritten} rewritten: a DEL of a held key answers 1, a re-add the elements it adds, a PEXPIRE 1): keys the load stored were missing, or another client changed the data",
                batch.sum
            )
        })?;
        self.keys_held -= deleted;
        self.ttl_held -= ttl_deleted;
        self.elements_held -= elements_deleted;
        let keys = shards.dbsize()?;
        check_count(keys, self.keys_held, || {
            format!(
                "after churn round {round} the engine holds {keys} keys, expected {} ({deleted} deleted of {})",
                self.keys_held,
                self.keys_held + deleted
            )
        })?;
        let expiring = shards.keys_with_expiry()?;
        check_count(expiring, self.ttl_held, || {
            format!(
                "after churn round {round} the engine holds {expiring} keys with a TTL, expected {} (a rewritten key gets its TTL again)",
                self.ttl_held
            )
        })?;
        let counted = self.count_elements(&mut connections, &what)?;
        check_count(counted, self.elements_held, || {
            format!(
                "after churn round {round} HLEN, LLEN, SCARD, ZCARD and XLEN over the collections held sum to {counted} elements, expected {} (a rewritten collection keeps its element count)",
                self.elements_held
            )
        })?;
        Ok(RoundOutcome {
            deleted,
            overwritten,
            items: keys,
            elements: Some(counted),
            seconds,
        })
    }

    /// The elements of every collection key held, counted by the engine, pipelined.
    fn count_elements(
        &self,
        connections: &mut LoadConnections,
        what: &str,
    ) -> Result<u64, BenchError> {
        let mut lengths = Batch::new();
        self.encoder.each_key(|key| {
            let Some(command) = length_command(key.key_type) else {
                return Ok(());
            };
            if self.states[key.number as usize] == DELETED {
                return Ok(());
            }
            lengths.buffer.array(2).bulk(command).bulk(key.name);
            lengths.replies += 1;
            lengths.entries += 1;
            lengths.flush_when_full(connections, what)
        })?;
        lengths.flush(connections, what)?;
        Ok(lengths.sum)
    }
}

/// Appends `DEL name`; the `:1` it owes.
fn batch_delete(batch: &mut Batch, name: &[u8]) -> u64 {
    batch.buffer.array(2).bulk(b"DEL").bulk(name);
    batch.replies += 1;
    batch.entries += 1;
    1
}

/// Sends the batch when it is full, then honours a stop.
fn send_when_full(
    batch: &mut Batch,
    connections: &mut LoadConnections,
    what: &str,
    stop: &StopRequest,
) -> Result<(), BenchError> {
    if batch.is_full() {
        batch.flush(connections, what)?;
        stop.check(0)?;
    }
    Ok(())
}

/// The commands that rewrite a key with values of the overwrite's size.
struct Rewrite {
    value: Vec<u8>,
    member: Vec<u8>,
    size: u32,
    /// Elements per command: [`ELEMENTS_PER_COMMAND`], fewer when that many values would pass
    /// a batch's bytes.
    per_command: u64,
}

impl Rewrite {
    fn new(size: u32) -> Self {
        Self {
            value: vec![b'x'; size as usize],
            member: Vec::new(),
            size,
            per_command: (MAX_BATCH_BYTES as u64 / (u64::from(size) + 64))
                .clamp(1, ELEMENTS_PER_COMMAND),
        }
    }

    /// Appends the key's rewrite to `batch` (sent whenever it fills); the integer replies it
    /// owes.
    fn key(
        &mut self,
        key: &RebuiltKey<'_>,
        batch: &mut Batch,
        connections: &mut LoadConnections,
        what: &str,
        stop: &StopRequest,
    ) -> Result<u64, BenchError> {
        if key.key_type == KeyType::String {
            // SET replaces the value and drops a TTL: given again in the same command.
            let buffer = &mut batch.buffer;
            if key.ttl {
                buffer
                    .array(5)
                    .bulk(b"SET")
                    .bulk(key.name)
                    .bulk(&self.value);
                buffer.bulk(b"PX").bulk_decimal(REBUILD_TTL_MILLIS);
            } else {
                buffer
                    .array(3)
                    .bulk(b"SET")
                    .bulk(key.name)
                    .bulk(&self.value);
            }
            batch.replies += 1;
            batch.entries += 1;
            send_when_full(batch, connections, what, stop)?;
            return Ok(0);
        }
        let mut owed = batch_delete(batch, key.name);
        send_when_full(batch, connections, what, stop)?;
        let mut written = 0u64;
        while written < key.elements {
            let n = (key.elements - written).min(self.per_command);
            owed += self.elements(key, written, n, batch);
            written += n;
            send_when_full(batch, connections, what, stop)?;
        }
        if key.ttl {
            batch
                .buffer
                .array(3)
                .bulk(b"PEXPIRE")
                .bulk(key.name)
                .bulk_decimal(REBUILD_TTL_MILLIS);
            batch.replies += 1;
            batch.entries += 1;
            owed += 1;
            send_when_full(batch, connections, what, stop)?;
        }
        Ok(owed)
    }

    /// Appends elements `from..from + n` of a collection key: one command, or one `XADD` per
    /// stream entry; the integer replies they owe (the elements added; a list's length after
    /// the push).
    fn elements(&mut self, key: &RebuiltKey<'_>, from: u64, n: u64, batch: &mut Batch) -> u64 {
        let buffer = &mut batch.buffer;
        let (command, per_element, owed): (&[u8], usize, u64) = match key.key_type {
            KeyType::Hash => (b"HSET", 2, n),
            KeyType::List => (b"RPUSH", 1, from + n),
            KeyType::Set => (b"SADD", 1, n),
            KeyType::Zset => (b"ZADD", 2, n),
            KeyType::Stream => {
                for _ in 0..n {
                    buffer.array(5).bulk(b"XADD").bulk(key.name).bulk(b"*");
                    buffer.bulk(b"v").bulk(&self.value);
                }
                batch.replies += n as usize;
                batch.entries += n as usize;
                return 0;
            }
            KeyType::String => unreachable!("a string is rewritten by SET"),
        };
        buffer
            .array(2 + per_element * n as usize)
            .bulk(command)
            .bulk(key.name);
        for j in from..from + n {
            match key.key_type {
                KeyType::Hash => {
                    buffer.bulk_decimal(j).bulk(&self.value);
                }
                KeyType::List => {
                    buffer.bulk(&self.value);
                }
                _ => {
                    overwritten_member(&mut self.member, j, self.size);
                    if key.key_type == KeyType::Zset {
                        buffer.bulk_decimal(j);
                    }
                    buffer.bulk(&self.member);
                }
            }
        }
        batch.replies += 1;
        batch.entries += 1;
        owed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::model::Profile;

    const PROFILE: &str = r#"format: 1
source: {keys: 2000}
groups:
- template: "s:{n}"
  type: string
  share: 0.5
  keyLength: {buckets: [[8, 8, 1]]}
  values: {textLength: {buckets: [[10, 10, 1]]}}
- template: "h:{n}"
  type: hash
  share: 0.5
  keyLength: {buckets: [[8, 8, 1]]}
  elements: {buckets: [[3, 3, 1]]}
  fields: {textLength: {buckets: [[4, 4, 1]]}}
  values: {textLength: {buckets: [[4, 4, 1]]}}
"#;

    /// The names of the keys round 1 of a churn seeded `seed` deletes and overwrites, drawn
    /// from a rebuild of its own (seeded 42, as every engine's is).
    fn picked(seed: u64) -> (Vec<String>, Vec<String>) {
        let profile = Profile::parse(PROFILE).unwrap();
        let workload = ProfileWorkload::new(profile, 1.0, 1.0, 42).unwrap();
        let shares = Shares {
            seed,
            delete: Some(0.5),
            overwrite: Some(0.25),
            value_size: 300,
        };
        let (mut deleted, mut overwritten) = (Vec::new(), Vec::new());
        workload
            .encoder()
            .each_key(|key| {
                let name = String::from_utf8(key.name.to_vec()).unwrap();
                match shares.change(1, key.number) {
                    Change::Delete => deleted.push(name),
                    Change::Overwrite => overwritten.push(name),
                    Change::Keep => {}
                }
                Ok::<_, ()>(())
            })
            .unwrap();
        (deleted, overwritten)
    }

    #[test]
    fn a_round_picks_the_same_keys_for_the_same_seed_and_others_for_another() {
        let (deleted, overwritten) = picked(1);
        // About half deleted, a quarter of the other half overwritten, of both types.
        assert!(deleted.len().abs_diff(1_000) < 120, "{}", deleted.len());
        assert!(
            overwritten.len().abs_diff(250) < 80,
            "{}",
            overwritten.len()
        );
        assert!(deleted.iter().any(|n| n.starts_with("s:")));
        assert!(deleted.iter().any(|n| n.starts_with("h:")));
        assert_eq!(picked(1), (deleted.clone(), overwritten));
        let (other, _) = picked(2);
        let common = other.iter().filter(|n| deleted.contains(n)).count();
        assert!(
            common < 600,
            "another seed deletes other keys: {common} in common"
        );
    }

    #[test]
    fn a_rewrite_keeps_a_collections_element_count_and_owes_what_the_engine_answers() {
        let key = |key_type, elements, ttl| RebuiltKey {
            number: 0,
            key_type,
            name: b"k",
            elements,
            ttl,
        };
        let mut rewrite = Rewrite::new(300);
        assert_eq!(rewrite.per_command, ELEMENTS_PER_COMMAND);
        // A list of 1,200 values in three pushes answering 512, 1024 and 1200; DEL 1.
        let mut batch = Batch::new();
        let list = key(KeyType::List, 1_200, false);
        let mut owed = batch_delete(&mut batch, list.name);
        for from in [0, 512, 1024] {
            let n = (1_200 - from).min(512);
            owed += rewrite.elements(&list, from, n, &mut batch);
        }
        assert_eq!(owed, 1 + 512 + 1024 + 1200);
        assert_eq!(batch.replies, 4);
        let text = String::from_utf8_lossy(batch.buffer.as_bytes()).into_owned();
        assert_eq!(text.matches(&"x".repeat(300)).count(), 1_200);
        // A sorted set's members are distinct, of the overwrite's size, scored by their place.
        let mut batch = Batch::new();
        let zset = key(KeyType::Zset, 3, true);
        assert_eq!(rewrite.elements(&zset, 0, 3, &mut batch), 3);
        let text = String::from_utf8_lossy(batch.buffer.as_bytes()).into_owned();
        assert!(text.contains(&format!("\r\n2\r\n$300\r\nm:2:{}\r\n", "x".repeat(296))));
        // Values of 1 MiB: a few per command, so that a batch stays near its bytes.
        assert_eq!(Rewrite::new(1 << 20).per_command, 3);
    }
}
