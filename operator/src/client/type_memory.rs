//! Bytes per key by type, for a profile's rebuild: the load stores the keys type by type
//! (`profile_workload::TypeSegment`) and reads used_memory before the first command and
//! after each type's last one, on the control connection, with every command before answered
//! and none after sent. A type's figure is the growth of used_memory over its keys, divided
//! by their number.
//!
//! What it holds: everything that grew while the type loaded, which is the keys' data, their
//! names and their entries in the main key table and (with a TTL) the expires table, and any
//! growth of those tables' bucket arrays that fell during that type's load: a table doubles
//! when the key count passes a power of two, and the type loaded then carries the whole new
//! array (a few bytes per key of the whole keyspace). Every engine reports used_memory, so it
//! needs no MEMORY command. The readings are taken with the load connection open, so the
//! figures leave its buffers out; their sum, weighted by keys, is the used_memory growth
//! between the first and the last reading, which differs from the repetition's own (read
//! after the load connection closed) by what that connection's buffers grew during the load.

use serde::{Deserialize, Serialize};

use crate::client::profile_workload::TypeSegment;

/// One type's keys in one repetition.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TypeMemory {
    /// `string`, `hash`, `list`, `set`, `zset` or `stream`.
    #[serde(rename = "type")]
    pub key_type: String,
    pub keys: u64,
    /// used_memory growth while the type's keys loaded.
    pub bytes: i64,
    pub bytes_per_key: f64,
}

/// One type's keys over the repetitions: the median of its bytes per key.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TypeSummary {
    #[serde(rename = "type")]
    pub key_type: String,
    pub keys: u64,
    pub bytes_per_key: f64,
}

/// Each type's memory from the readings: `readings[0]` before the first command,
/// `readings[i + 1]` after segment `i`. Empty when the readings do not match the segments.
pub fn of_readings(segments: &[TypeSegment], readings: &[u64]) -> Vec<TypeMemory> {
    if segments.is_empty() || readings.len() != segments.len() + 1 {
        return Vec::new();
    }
    segments
        .iter()
        .zip(readings.windows(2))
        .map(|(segment, pair)| {
            let bytes = pair[1] as i64 - pair[0] as i64;
            TypeMemory {
                key_type: segment.key_type.as_str().to_string(),
                keys: segment.keys,
                bytes,
                bytes_per_key: bytes as f64 / segment.keys.max(1) as f64,
            }
        })
        .collect()
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

    #[test]
    fn each_type_is_the_growth_between_its_two_readings_over_its_keys() {
        let segments = [
            TypeSegment {
                key_type: KeyType::String,
                keys: 10,
                commands_end: 10,
            },
            TypeSegment {
                key_type: KeyType::Hash,
                keys: 4,
                commands_end: 18,
            },
        ];
        let types = of_readings(&segments, &[1000, 1700, 2500]);
        assert_eq!(types[0].bytes_per_key, 70.0);
        assert_eq!(types[1].bytes, 800);
        assert_eq!(types[1].bytes_per_key, 200.0);
        assert!(
            of_readings(&segments, &[1000, 1700]).is_empty(),
            "a reading missing"
        );
        let second = of_readings(&segments, &[1000, 1800, 2400]);
        let summary = summarize([types.as_slice(), second.as_slice()].into_iter());
        assert_eq!(summary[0].key_type, "string");
        assert_eq!(summary[0].bytes_per_key, 75.0);
        assert_eq!(summary[1].bytes_per_key, 175.0);
        assert_eq!(
            describe(&summary),
            "string ~75.0 B (10 keys), hash ~175.0 B (4 keys)"
        );
    }
}
