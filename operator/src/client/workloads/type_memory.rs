//! Bytes per key by type, for a profile's rebuild: the load stores the keys type by type
//! (`profile_workload::TypeSegment`) and reads used_memory, the engine's key tables and the
//! keys with a TTL before the first command and after each type's last one, on the control
//! connection, with every command before answered and none after sent.
//!
//! A type's figure is what grew while its keys loaded, less what the key tables grew by then,
//! plus its share of the tables' whole growth: the main table's by its keys, the expires
//! table's by its keys with a TTL. The tables are one for every type, and they grow in steps
//! (Redis and Valkey double a bucket array when the key count passes a power of two, and hold
//! the old array too while they rehash), so the type that happened to load across a step
//! would otherwise carry the whole new array, a few bytes per key of the whole keyspace, and a
//! type loaded alone would not. The tables' sizes are `MEMORY STATS` (`overhead.hashtable.main`
//! and `overhead.hashtable.expires` of every `db.N`) on Redis and Valkey, and INFO memory's
//! `table_used_memory` on Dragonfly (its dashtable, which holds the entries; counted as the
//! main table); the keys with a TTL are INFO keyspace's `expires=`. Where the tables are not
//! answered the figure is the growth alone, and the repetition says so (`key_table: false`).
//! The readings are taken with the load connection open, so the figures leave its buffers out;
//! their sum, weighted by keys, is the used_memory growth between the first and the last
//! reading (the charging moves bytes between types, it adds none), which differs from the
//! repetition's own (read after the load connection closed) by what that connection's buffers
//! grew during the load.

use serde::{Deserialize, Serialize};

use crate::client::connection::engine::{ControlConnection, parse_info};
use crate::client::connection::resp::named_entries;
use crate::client::connection::shards::ShardSet;
use crate::client::workloads::profile_workload::TypeSegment;
use crate::error::BenchError;

/// One type's keys in one repetition.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TypeMemory {
    /// `string`, `hash`, `list`, `set`, `zset` or `stream`.
    #[serde(rename = "type")]
    pub key_type: String,
    pub keys: u64,
    /// used_memory growth while the type's keys loaded, with the key tables charged by its
    /// share (see the module's text).
    pub bytes: i64,
    pub bytes_per_key: f64,
    /// Whether the key tables were read and charged by share; false: the growth alone.
    #[serde(default)]
    pub key_table: bool,
}

/// One type's keys over the repetitions: the median of its bytes per key.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TypeSummary {
    #[serde(rename = "type")]
    pub key_type: String,
    pub keys: u64,
    pub bytes_per_key: f64,
}

/// One reading at a type's boundary: used_memory, and the key tables where the engine answers
/// them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TypeReading {
    pub used_memory: u64,
    pub tables: Option<KeyTables>,
}

/// The engine's key tables at one reading, and the keys with a TTL then.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct KeyTables {
    pub main: u64,
    pub expires: u64,
    pub keys_with_ttl: u64,
}

impl std::ops::Add for KeyTables {
    type Output = KeyTables;
    fn add(self, other: KeyTables) -> KeyTables {
        KeyTables {
            main: self.main + other.main,
            expires: self.expires + other.expires,
            keys_with_ttl: self.keys_with_ttl + other.keys_with_ttl,
        }
    }
}

/// The longest the load waits at a type's boundary for the engine to finish a rehash.
const REHASH_BOUND: std::time::Duration = std::time::Duration::from_secs(2);

/// A boundary's reading, once no shard is inside a rehash (waited for at most
/// [`REHASH_BOUND`]; `MEMORY STATS` `db.dict.rehashing.count`, Redis 7.4 and Valkey 8 and later,
/// and an engine that does not say is not waited for): the data's used_memory
/// (`data_memory`), and the key tables of every shard added up (None if one shard does not
/// answer them). Inside a rehash the engine holds a key table's old bucket array beside the
/// new one until its cron (`activerehashing`, a millisecond every tick) or the commands have
/// moved every bucket: Valkey 9.1 at 30,000 keys held 262,144 B more for tens of milliseconds, which
/// the type read then would carry and a type loaded alone and read later would not. The
/// tables come from the same `MEMORY STATS` replies that said the rehash was over (nothing is
/// sent between them and used_memory).
pub fn reading(
    shards: &mut ShardSet,
    data_memory: impl Fn(&mut ShardSet) -> Result<u64, BenchError>,
) -> Result<TypeReading, BenchError> {
    let started = std::time::Instant::now();
    let stats = loop {
        let stats = shards.each(|control, _| Ok(memory_stats(control)))?;
        let rehashing = stats
            .iter()
            .any(|s| s.as_ref().is_some_and(|s| rehashing(s) > 0));
        if !rehashing || started.elapsed() >= REHASH_BOUND {
            break stats;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let used_memory = data_memory(shards)?;
    let mut stats = stats.into_iter();
    let mut tables = Some(KeyTables::default());
    for shard in shards.each(|control, _| key_tables(control, stats.next().flatten()))? {
        tables = tables.zip(shard).map(|(a, b)| a + b);
    }
    Ok(TypeReading {
        used_memory,
        tables,
    })
}

/// The engine's `MEMORY STATS` reply, or None where it refuses the command.
fn memory_stats(control: &mut ControlConnection) -> Option<redis::Value> {
    control
        .query_unclassified(redis::cmd("MEMORY").arg("STATS"))
        .ok()
}

/// The tables being rehashed, from a `MEMORY STATS` reply; 0 where the engine does not say.
fn rehashing(stats: &redis::Value) -> u64 {
    named_entries(stats)
        .into_iter()
        .find(|(name, _)| name == "db.dict.rehashing.count")
        .and_then(|(_, value)| redis::from_redis_value(value).ok())
        .unwrap_or(0)
}

/// The engine's key tables (from its `MEMORY STATS` reply, `stats`, else INFO memory), or
/// None where it answers neither `MEMORY STATS` with `db.N` entries nor INFO memory's
/// `table_used_memory`.
fn key_tables(
    control: &mut ControlConnection,
    stats: Option<redis::Value>,
) -> Result<Option<KeyTables>, BenchError> {
    let keys_with_ttl = control.keys_with_expiry()?;
    if let Some((main, expires)) = stats.as_ref().and_then(tables_of_stats) {
        return Ok(Some(KeyTables {
            main,
            expires,
            keys_with_ttl,
        }));
    }
    let dashtable = control
        .query_unclassified::<String>(redis::cmd("INFO").arg("memory"))
        .ok()
        .and_then(|text| parse_info(&text).get("table_used_memory")?.parse().ok());
    Ok(dashtable.map(|main| KeyTables {
        main,
        expires: 0,
        keys_with_ttl,
    }))
}

/// The sums of `overhead.hashtable.main` and of `overhead.hashtable.expires` over the `db.N`
/// entries of a `MEMORY STATS` reply (a flat list of names and values, or a map in RESP3):
/// (0, 0) for Redis's and Valkey's reply with no `db.N` entry (they leave out an empty
/// database), None for a reply that is not theirs (Dragonfly answers a few fields of its own).
fn tables_of_stats(stats: &redis::Value) -> Option<(u64, u64)> {
    let entries = named_entries(stats);
    if !entries.iter().any(|(name, _)| name == "total.allocated") {
        return None;
    }
    let (mut main, mut expires) = (0, 0);
    for (name, db) in entries {
        if !name.starts_with("db.") {
            continue;
        }
        for (field, value) in named_entries(&db) {
            let bytes = || redis::from_redis_value::<u64>(value.clone()).ok();
            match field.as_str() {
                "overhead.hashtable.main" => main += bytes()?,
                "overhead.hashtable.expires" => expires += bytes()?,
                _ => {}
            }
        }
    }
    Some((main, expires))
}

/// Each type's memory from the readings: `readings[0]` before the first command,
/// `readings[i + 1]` after segment `i`. Empty when the readings do not match the segments.
/// With the key tables read at every boundary, each type gives back what the tables grew by
/// during its load and takes its share of their whole growth: the main table's by its keys,
/// the expires table's by the keys it gave a TTL (by its keys when none has one).
pub fn of_readings(segments: &[TypeSegment], readings: &[TypeReading]) -> Vec<TypeMemory> {
    if segments.is_empty() || readings.len() != segments.len() + 1 {
        return Vec::new();
    }
    let tables: Option<Vec<KeyTables>> = readings.iter().map(|r| r.tables).collect();
    let keys: u64 = segments.iter().map(|s| s.keys).sum();
    segments
        .iter()
        .enumerate()
        .map(|(i, segment)| {
            let grown = readings[i + 1].used_memory as f64 - readings[i].used_memory as f64;
            let bytes = match &tables {
                Some(t) => grown + charged(t, i, segment.keys, keys),
                None => grown,
            };
            TypeMemory {
                key_type: segment.key_type.as_str().to_string(),
                keys: segment.keys,
                bytes: bytes.round() as i64,
                bytes_per_key: bytes / segment.keys.max(1) as f64,
                key_table: tables.is_some(),
            }
        })
        .collect()
}

/// What segment `i` (of `keys` keys, of `all_keys` in every segment) is charged for the key
/// tables instead of what they grew by during its load.
fn charged(tables: &[KeyTables], i: usize, keys: u64, all_keys: u64) -> f64 {
    let (first, last) = (tables[0], tables[tables.len() - 1]);
    let (before, after) = (tables[i], tables[i + 1]);
    let delta = |a: u64, b: u64| b as f64 - a as f64;
    let key_share = keys as f64 / all_keys.max(1) as f64;
    let with_ttl = delta(first.keys_with_ttl, last.keys_with_ttl);
    let ttl_share = if with_ttl > 0.0 {
        delta(before.keys_with_ttl, after.keys_with_ttl) / with_ttl
    } else {
        key_share
    };
    delta(first.main, last.main) * key_share - delta(before.main, after.main)
        + delta(first.expires, last.expires) * ttl_share
        - delta(before.expires, after.expires)
}

/// The median bytes per key of each type over the repetitions that measured it, in the order
/// of the first repetition.
pub fn summarize<'a>(repetitions: impl Iterator<Item = &'a [TypeMemory]>) -> Vec<TypeSummary> {
    let mut summaries: Vec<(TypeSummary, Vec<f64>)> = Vec::new();
    for types in repetitions {
        for t in types {
            match summaries.iter_mut().find(|(s, _)| s.key_type == t.key_type) {
                Some((_, values)) => values.push(t.bytes_per_key),
                None => summaries.push((
                    TypeSummary {
                        key_type: t.key_type.clone(),
                        keys: t.keys,
                        bytes_per_key: 0.0,
                    },
                    vec![t.bytes_per_key],
                )),
            }
        }
    }
    summaries
        .into_iter()
        .filter_map(|(mut summary, values)| {
            summary.bytes_per_key = crate::stats::Spread::of(&values)?.median;
            Some(summary)
        })
        .collect()
}

/// The types as one line: `string ~71.2 B (600 keys), hash ~152.0 B (300 keys)`.
pub fn describe(types: &[TypeSummary]) -> String {
    types
        .iter()
        .map(|t| format!("{} ~{:.1} B ({} keys)", t.key_type, t.bytes_per_key, t.keys))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::model::KeyType;

    fn segments() -> [TypeSegment; 2] {
        [
            TypeSegment {
                key_type: KeyType::String,
                keys: 10,
                commands_end: 10,
            },
            TypeSegment {
                key_type: KeyType::Hash,
                keys: 30,
                commands_end: 40,
            },
        ]
    }

    #[test]
    fn each_type_is_the_growth_between_its_two_readings_over_its_keys() {
        let plain = |used: &[u64]| {
            used.iter()
                .map(|&used_memory| TypeReading {
                    used_memory,
                    tables: None,
                })
                .collect::<Vec<_>>()
        };
        let segments = segments();
        let types = of_readings(&segments, &plain(&[1000, 1700, 4000]));
        assert!(!types[0].key_table);
        assert_eq!(types[0].bytes_per_key, 70.0);
        assert_eq!(types[1].bytes, 2300);
        assert!(
            of_readings(&segments, &plain(&[1000, 1700])).is_empty(),
            "a reading missing"
        );
        let second = of_readings(&segments, &plain(&[1000, 1800, 3400]));
        let summary = summarize([types.as_slice(), second.as_slice()].into_iter());
        assert_eq!(summary[0].key_type, "string");
        assert_eq!(summary[0].bytes_per_key, 75.0);
        assert_eq!(summary[1].bytes_per_key, 65.0);
        assert_eq!(
            describe(&summary),
            "string ~75.0 B (10 keys), hash ~65.0 B (30 keys)"
        );
    }

    #[test]
    fn the_key_tables_are_charged_by_share_not_to_the_type_they_grew_under() {
        let segments = segments();
        let at = |used_memory, main, expires, keys_with_ttl| TypeReading {
            used_memory,
            tables: Some(KeyTables {
                main,
                expires,
                keys_with_ttl,
            }),
        };
        // The main table doubled from 160 to 480 B during the hashes: 320 B over 40 keys is
        // 8 B a key, 80 B of it the strings'. The expires table grew by 200 B during the
        // strings, which gave their 4 keys a TTL, and by 100 B during the hashes, which gave
        // none: all 300 B are the strings'.
        let readings = [
            at(1000, 160, 0, 0),
            at(1700, 160, 200, 4),
            at(5000, 480, 300, 4),
        ];
        let types = of_readings(&segments, &readings);
        assert!(types.iter().all(|t| t.key_table));
        assert_eq!(types[0].bytes, 700 + 80 + 300 - 200);
        assert_eq!(types[1].bytes, 3300 - 320 + 240 - 100);
        assert_eq!(
            types.iter().map(|t| t.bytes).sum::<i64>(),
            4000,
            "charging moves bytes between types and adds none"
        );
        // One boundary without the tables: the growth alone, for every type.
        let mut partial = readings;
        partial[1].tables = None;
        let types = of_readings(&segments, &partial);
        assert_eq!(types[0].bytes, 700);
        assert!(!types[1].key_table);
    }

    #[test]
    fn the_key_tables_are_every_databases_main_and_expires_tables() {
        use redis::Value;
        let text = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let db = |main: i64, expires: i64| {
            Value::Array(vec![
                text("overhead.hashtable.main"),
                Value::Int(main),
                text("overhead.hashtable.expires"),
                Value::Int(expires),
            ])
        };
        let stats = Value::Array(vec![
            text("total.allocated"),
            Value::Int(944808),
            text("db.0"),
            db(75568, 112),
            text("db.3"),
            db(1000, 24),
            text("keys.count"),
            Value::Int(2422),
        ]);
        assert_eq!(tables_of_stats(&stats), Some((76568, 136)));
        let empty = Value::Array(vec![text("total.allocated"), Value::Int(927168)]);
        assert_eq!(
            tables_of_stats(&empty),
            Some((0, 0)),
            "no database holds a key"
        );
        let dragonfly = Value::Array(vec![text("connections.direct_bytes"), Value::Int(10968)]);
        assert_eq!(tables_of_stats(&dragonfly), None);
    }
}
