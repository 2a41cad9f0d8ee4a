//! The churn of records stored as hashes, on their fields: a round deletes `deleteShare` of
//! the fields still held (`HDEL` of a record's drawn fields in one command) and overwrites
//! `overwriteShare` of the fields it left with values of `overwriteValueSize` bytes (`HSET` of
//! those fields), each field drawn by its own number (record x fields + the field's place in
//! the workload's field list), the round and the seed. One byte per field on the client.
//!
//! A record whose every field was deleted is gone: the engine deletes an empty hash's key, and
//! the client counts the record no more (no command names it again). What is verified after a
//! round: each `HDEL` answered the number of fields it named (`:n`), each `HSET` `:0` (no
//! field was new), `DBSIZE` is the records with a field left, and the sum of `HLEN` over those
//! records (pipelined, one per record held) is the fields held.

use std::time::{Duration, Instant};

use super::rounds::{
    Batch, Change, DELETED, ORIGINAL, OVERWRITTEN, RoundOutcome, Shares, check_count,
};
use crate::client::connection::resp::CommandBuffer;
use crate::client::connection::shards::{LoadConnections, ShardSet};
use crate::client::connection::stop_request::StopRequest;
use crate::client::workloads::workload::KeyCounts;
use crate::error::BenchError;

/// The records' fields and their states.
pub struct FieldChurn<'a> {
    fields: &'a [String],
    /// `records x fields.len()` states, a record's fields together.
    states: Vec<u8>,
    keys_held: u64,
    fields_held: u64,
}

/// `user:<record>`, the key the load's HSET wrote.
fn record_key(buffer: &mut CommandBuffer, record: u64) {
    buffer.bulk_prefixed_decimal(b"user:", record);
}

impl<'a> FieldChurn<'a> {
    /// `records` records of `fields`, as the load verified them (`items` must be `records`).
    pub fn new(records: u64, fields: &'a [String], items: u64) -> Result<Self, BenchError> {
        check_count(items, records, || {
            format!(
                "the churn starts from {records} records, but the load's count says the engine holds {items}"
            )
        })?;
        let count = records.saturating_mul(fields.len() as u64);
        Ok(Self {
            fields,
            states: vec![ORIGINAL; usize::try_from(count).unwrap_or(usize::MAX)],
            keys_held: records,
            fields_held: count,
        })
    }

    /// One round's HDELs and HSETs, every reply checked, then the keys and fields the engine
    /// holds counted.
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
        let per = self.fields.len();
        let value = vec![b'x'; shares.value_size as usize];
        let mut connections = LoadConnections::connect(shards, connect_timeout)?;
        let (mut deletes, mut overwrites) = (Batch::new(), Batch::new());
        let (mut deleted, mut overwritten, mut emptied) = (0u64, 0u64, 0u64);
        let (mut to_delete, mut to_overwrite) = (Vec::with_capacity(per), Vec::with_capacity(per));
        for (record, states) in self.states.chunks_exact_mut(per).enumerate() {
            let record = record as u64;
            to_delete.clear();
            to_overwrite.clear();
            let mut held = 0;
            for (place, state) in states.iter_mut().enumerate() {
                if *state == DELETED {
                    continue;
                }
                held += 1;
                match shares.change(round, record * per as u64 + place as u64) {
                    Change::Delete => {
                        *state = DELETED;
                        to_delete.push(place);
                    }
                    Change::Overwrite => {
                        *state = OVERWRITTEN;
                        to_overwrite.push(place);
                    }
                    Change::Keep => {}
                }
            }
            if !to_delete.is_empty() {
                record_key(
                    deletes.buffer.array(2 + to_delete.len()).bulk(b"HDEL"),
                    record,
                );
                for place in &to_delete {
                    deletes.buffer.bulk(self.fields[*place].as_bytes());
                }
                deletes.replies += 1;
                deletes.entries += 1;
                deleted += to_delete.len() as u64;
                emptied += u64::from(to_delete.len() == held);
            }
            if !to_overwrite.is_empty() {
                record_key(
                    overwrites
                        .buffer
                        .array(2 + 2 * to_overwrite.len())
                        .bulk(b"HSET"),
                    record,
                );
                for place in &to_overwrite {
                    overwrites
                        .buffer
                        .bulk(self.fields[*place].as_bytes())
                        .bulk(&value);
                }
                overwrites.replies += 1;
                overwrites.entries += 1;
                overwritten += to_overwrite.len() as u64;
            }
            if deletes.is_full() || overwrites.is_full() {
                deletes.flush(&mut connections, &what)?;
                overwrites.flush(&mut connections, &what)?;
                stop.check(0)?;
            }
        }
        deletes.flush(&mut connections, &what)?;
        overwrites.flush(&mut connections, &what)?;
        let seconds = started.elapsed().as_secs_f64();
        check_count(deletes.sum, deleted, || {
            format!(
                "churn round {round}: the engine's HDEL replies confirm {} of the {deleted} fields deleted: fields the load stored were missing, or another client changed the data",
                deletes.sum
            )
        })?;
        check_count(overwrites.sum, 0, || {
            format!(
                "churn round {round}: the engine's HSET replies say {} of the {overwritten} fields overwritten were new: fields the load stored were missing, or another client changed the data",
                overwrites.sum
            )
        })?;
        self.keys_held -= emptied;
        self.fields_held -= deleted;
        let keys = shards.dbsize()?;
        check_count(keys, self.keys_held, || {
            format!(
                "after churn round {round} the engine holds {keys} keys, expected {} records with a field left ({emptied} lost their last field this round; an empty hash's key is deleted)",
                self.keys_held
            )
        })?;
        let counted = self.count_fields(&mut connections, &what)?;
        check_count(counted, self.fields_held, || {
            format!(
                "after churn round {round} HLEN over the {keys} records held sums to {counted} fields, expected {} ({deleted} deleted this round)",
                self.fields_held
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

    /// The sum of HLEN over every record with a field held, pipelined.
    fn count_fields(
        &self,
        connections: &mut LoadConnections,
        what: &str,
    ) -> Result<u64, BenchError> {
        let mut lengths = Batch::new();
        for (record, states) in self.states.chunks_exact(self.fields.len()).enumerate() {
            if states.iter().all(|s| *s == DELETED) {
                continue;
            }
            record_key(lengths.buffer.array(2).bulk(b"HLEN"), record as u64);
            lengths.replies += 1;
            lengths.entries += 1;
            lengths.flush_when_full(connections, what)?;
        }
        lengths.flush(connections, what)?;
        Ok(lengths.sum)
    }
}
