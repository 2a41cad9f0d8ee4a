//! The four published workloads: which commands they send, one at a time on the fly (never
//! all at once, so client memory stays flat whatever N is), and how their result is verified
//! in the engine afterwards.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::ttl::Ttl;
use crate::client::connection::engine::ControlConnection;
use crate::client::connection::shards::ShardSet;
use crate::client::workloads::profile_workload::{ProfileWorkload, TypeSegment};
use crate::client::workloads::rdb_load::{FetchedFiles, RdbLoad};
use crate::crd::{RecordLayout, WorkloadSpec};
use crate::error::BenchError;
use crate::formats::MIN_SAMPLE_EVERY;

/// A validated workload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Workload {
    SortedSet {
        members: u64,
        key: String,
        sample_every: u64,
    },
    RandomStrings {
        requests: u64,
        keyspace: u64,
        value_size: u32,
        seed: u64,
    },
    Strings {
        keys: u64,
        value_size: u32,
    },
    Records {
        records: u64,
        layout: RecordLayout,
        fields: Vec<String>,
    },
    /// A keyspace rebuilt from its profile (`membench profile`).
    Profile(ProfileWorkload),
    /// Every key of an RDB file (`client::workloads::rdb_load`).
    Rdb(RdbLoad),
}

fn invalid(field: &str, message: impl Into<String>) -> BenchError {
    BenchError::InvalidArgument {
        field: field.to_string(),
        message: message.into(),
    }
}

/// About [`AUTOMATIC_SAMPLES`] readings a load, never closer than [`MIN_SAMPLE_EVERY`] items,
/// on a round number of items (a multiple of 1000) so curves of two runs line up.
fn automatic_sample_every(items: u64) -> u64 {
    (items / AUTOMATIC_SAMPLES)
        .div_ceil(MIN_SAMPLE_EVERY)
        .max(1)
        .saturating_mul(MIN_SAMPLE_EVERY)
}

/// How many used_memory readings a load of the workloads without a `sampleEvery` takes.
pub const AUTOMATIC_SAMPLES: u64 = 100;

/// What a count of zero is told, wherever it is given (a spec, a flag).
pub const AT_LEAST_ONE: &str = "must be at least 1";

fn zero(field: &str) -> BenchError {
    invalid(field, AT_LEAST_ONE)
}

fn at_least_one(field: &str, n: u64) -> Result<u64, BenchError> {
    if n == 0 { Err(zero(field)) } else { Ok(n) }
}

impl Workload {
    /// Checks a spec's workload and turns it into a `Workload`.
    pub fn from_spec(spec: &WorkloadSpec) -> Result<Self, BenchError> {
        let set = [
            spec.sorted_set.is_some(),
            spec.random_strings.is_some(),
            spec.strings.is_some(),
            spec.records.is_some(),
            spec.profile.is_some(),
            spec.rdb.is_some(),
        ]
        .iter()
        .filter(|s| **s)
        .count();
        if set != 1 {
            return Err(invalid(
                "spec.workload",
                format!(
                    "set exactly one of sortedSet, randomStrings, strings, records, profile, rdb ({set} are set)"
                ),
            ));
        }
        let workload = if let Some(w) = &spec.sorted_set {
            Workload::SortedSet {
                members: at_least_one("spec.workload.sortedSet.members", w.members)?,
                key: w.key.clone(),
                sample_every: w.sample_every,
            }
        } else if let Some(w) = &spec.random_strings {
            Workload::RandomStrings {
                requests: at_least_one("spec.workload.randomStrings.requests", w.requests)?,
                keyspace: at_least_one("spec.workload.randomStrings.keyspace", w.keyspace)?,
                value_size: w.value_size,
                seed: w.seed,
            }
        } else if let Some(w) = &spec.strings {
            Workload::Strings {
                keys: at_least_one("spec.workload.strings.keys", w.keys)?,
                value_size: w.value_size,
            }
        } else if let Some(w) = &spec.records {
            Workload::Records {
                records: at_least_one("spec.workload.records.records", w.records)?,
                layout: w.layout,
                fields: w.fields.clone(),
            }
        } else if let Some(w) = &spec.profile {
            Workload::Profile(
                ProfileWorkload::new(
                    w.profile()
                        .map_err(|message| invalid("spec.workload.profile", message))?,
                    w.scale,
                    w.element_scale,
                    w.seed,
                )
                .map_err(|message| invalid("spec.workload.profile", message))?,
            )
        } else if let Some(w) = &spec.rdb {
            Workload::Rdb(RdbLoad::of_spec(w)?)
        } else {
            unreachable!("exactly one workload is set")
        };
        workload.validate()?;
        Ok(workload)
    }

    /// The workload ready to run: an RDB file at a URL fetched and scanned into the temporary
    /// directory, once however many entries of a run ask for it, the copy kept in `files`,
    /// which removes it when dropped (keep it for the run); any other as it is.
    pub fn fetched(self, files: &mut FetchedFiles) -> Result<Self, BenchError> {
        match self {
            Workload::Rdb(load) if !load.is_fetched() => match &load.url {
                Some(url) => Ok(Workload::Rdb(files.load(url, load.credentials.as_deref())?)),
                None => Ok(Workload::Rdb(load)),
            },
            other => Ok(other),
        }
    }

    /// Limits that hold whichever way the workload was given (spec or flags).
    pub fn validate(&self) -> Result<(), BenchError> {
        match self {
            // A count of zero measures nothing (bytes per item would be 0/0): refused as a
            // spec refuses it, with the same words.
            Workload::SortedSet { members: 0, .. } => Err(zero("sortedSet.members")),
            Workload::RandomStrings { requests: 0, .. } => Err(zero("randomStrings.requests")),
            Workload::RandomStrings { keyspace: 0, .. } => Err(zero("randomStrings.keyspace")),
            Workload::Strings { keys: 0, .. } => Err(zero("strings.keys")),
            Workload::Records { records: 0, .. } => Err(zero("records.records")),
            Workload::SortedSet { key, .. } if key.is_empty() => {
                Err(invalid("sortedSet.key", "must not be empty"))
            }
            Workload::RandomStrings { keyspace, .. } if *keyspace > 999_999_999_999 => {
                Err(invalid(
                    "randomStrings.keyspace",
                    "must be at most 999999999999 (keys have 12 digits)",
                ))
            }
            Workload::Strings { keys, .. } if *keys > 999_999_999_999 => Err(invalid(
                "strings.keys",
                "must be at most 999999999999 (keys have 12 digits)",
            )),
            Workload::RandomStrings { value_size: 0, .. }
            | Workload::Strings { value_size: 0, .. } => {
                Err(invalid("valueSize", "must be at least 1 byte"))
            }
            Workload::Records { fields, .. } => {
                if fields.is_empty() {
                    return Err(invalid("records.fields", "needs at least one field name"));
                }
                let mut seen = std::collections::BTreeSet::new();
                for f in fields {
                    if f.is_empty() || !seen.insert(f) {
                        return Err(invalid(
                            "records.fields",
                            format!("field names must be non-empty and distinct ('{f}')"),
                        ));
                    }
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// The short name used on the command line and in reports.
    pub fn kind(&self) -> &'static str {
        match self {
            Workload::SortedSet { .. } => "sorted-set",
            Workload::RandomStrings { .. } => "random-strings",
            Workload::Strings { .. } => "strings",
            Workload::Records { .. } => "records",
            Workload::Profile(_) => "profile",
            Workload::Rdb(_) => "rdb",
        }
    }

    /// One line saying what is loaded, for tables and status.
    pub fn describe(&self) -> String {
        match self {
            Workload::SortedSet { members, .. } => format!("sorted-set {members} members"),
            Workload::RandomStrings {
                requests,
                keyspace,
                value_size,
                ..
            } => format!(
                "random-strings {requests} SETs over {keyspace} keys, {value_size}-byte values"
            ),
            Workload::Strings { keys, value_size } => {
                format!("strings {keys} keys, {value_size}-byte values")
            }
            Workload::Records {
                records,
                layout,
                fields,
            } => {
                format!(
                    "records {records} x {} fields as {}",
                    fields.len(),
                    layout.as_str()
                )
            }
            Workload::Profile(profile) => profile.describe(),
            Workload::Rdb(load) => load.describe(),
        }
    }

    /// What one item is called: a sorted-set member, a key, a record.
    pub fn item_noun(&self) -> &'static str {
        match self {
            Workload::SortedSet { .. } => "member",
            Workload::RandomStrings { .. }
            | Workload::Strings { .. }
            | Workload::Profile(_)
            | Workload::Rdb(_) => "key",
            Workload::Records { .. } => "record",
        }
    }

    /// How many commands the load sends.
    pub fn commands(&self) -> u64 {
        match self {
            Workload::SortedSet { members, .. } => *members,
            Workload::RandomStrings { requests, .. } => *requests,
            Workload::Strings { keys, .. } => *keys,
            Workload::Records {
                records,
                layout: RecordLayout::Hash,
                ..
            } => *records,
            Workload::Records {
                records,
                layout: RecordLayout::Strings,
                fields,
            } => records * fields.len() as u64,
            Workload::Profile(profile) => profile.commands,
            Workload::Rdb(load) => load.scan.commands,
        }
    }

    /// How many commands make one item (one record stored as strings is one SET per field).
    pub fn commands_per_item(&self) -> u64 {
        match self {
            Workload::Records {
                layout: RecordLayout::Strings,
                fields,
                ..
            } => fields.len() as u64,
            _ => 1,
        }
    }

    /// How many items the load is meant to store, when that is known before loading (the
    /// random-strings workload stores however many distinct keys were drawn).
    pub fn intended_items(&self) -> Option<u64> {
        match self {
            Workload::SortedSet { members, .. } => Some(*members),
            Workload::RandomStrings { .. } => None,
            Workload::Strings { keys, .. } => Some(*keys),
            Workload::Records { records, .. } => Some(*records),
            Workload::Profile(profile) => Some(profile.keys),
            Workload::Rdb(load) => Some(load.scan.keys_written()),
        }
    }

    /// Read used_memory every this many items during the load (0: never), for the growth
    /// curve a capacity projection fits (`crate::capacity`). The sorted set takes its
    /// `sampleEvery`; the other workloads read it about 100 times a load, at most every
    /// [`MIN_SAMPLE_EVERY`] items (random keys: every so many SETs).
    pub fn sample_every(&self) -> u64 {
        match self {
            Workload::SortedSet { sample_every, .. } => *sample_every,
            Workload::RandomStrings { requests, .. } => automatic_sample_every(*requests),
            Workload::Strings { keys, .. } => automatic_sample_every(*keys),
            Workload::Records { records, .. } => automatic_sample_every(*records),
            // A rebuild's commands are not one per key (a key takes several, and PEXPIREs),
            // so the load's item counter does not step by keys: no growth curve.
            Workload::Profile(_) | Workload::Rdb(_) => 0,
        }
    }

    /// A profile's rebuild and an RDB file's load: their types in load order, where the load
    /// reads used_memory (`client::workloads::type_memory`); no other workload has any.
    pub fn type_segments(&self) -> Vec<TypeSegment> {
        match self {
            Workload::Profile(profile) => profile.type_segments(),
            Workload::Rdb(load) => load.type_segments(),
            _ => Vec::new(),
        }
    }

    /// The name of the write command, for error messages.
    pub fn command_name(&self) -> &'static str {
        match self {
            Workload::SortedSet { .. } => "ZADD",
            Workload::Records {
                layout: RecordLayout::Hash,
                ..
            } => "HSET",
            Workload::Profile(_) => {
                "a rebuild command (SET, HSET, RPUSH, SADD, ZADD, XADD, PEXPIRE)"
            }
            Workload::Rdb(_) => {
                "a load command (SELECT, SET, HSET, RPUSH, SADD, ZADD, XADD, XGROUP CREATE, XGROUP SETID, PEXPIREAT)"
            }
            _ => "SET",
        }
    }

    /// Checks that the keys the load gave a TTL hold one: `INFO keyspace` `expires=` against the
    /// count the load decided (exact, except for random keys over a key space too large to count,
    /// where it must be within a few standard deviations of the share of the keys).
    pub fn verify_ttl(
        &self,
        control: &mut impl KeyCounts,
        ttl: &Ttl,
        distinct_with_ttl: Option<u64>,
    ) -> Result<u64, BenchError> {
        let holding = control.keys_with_expiry()?;
        let mismatch = |expected: String| {
            Err(BenchError::CountMismatch {
                message: format!(
                    "INFO keyspace says {holding} keys have a TTL, expected {expected}: the TTL was not set with every write it was sent with (or keys expired already)"
                ),
            })
        };
        match self.keys_with_ttl(ttl, distinct_with_ttl) {
            Some(expected) if expected != holding => mismatch(expected.to_string()),
            Some(_) => Ok(holding),
            None => {
                let keys = control.keys_in_all_databases()? as f64;
                let expected = keys * ttl.share;
                let margin = 6.0 * (keys * ttl.share * (1.0 - ttl.share)).sqrt() + 10.0;
                if (holding as f64 - expected).abs() > margin {
                    return mismatch(format!("about {expected:.0}"));
                }
                Ok(holding)
            }
        }
    }

    /// How many keys the load leaves with an expiry under `ttl`: for records stored as
    /// strings, every field key of a record with a TTL; for random keys, the distinct keys
    /// sent that got one (`None` when they were not counted exactly).
    pub fn keys_with_ttl(&self, ttl: &Ttl, distinct_with_ttl: Option<u64>) -> Option<u64> {
        match self {
            Workload::SortedSet { .. } => Some(1),
            Workload::Strings { keys, .. } => Some(ttl.items_with_ttl(*keys)),
            Workload::RandomStrings { .. } => distinct_with_ttl,
            Workload::Records {
                records,
                layout: RecordLayout::Hash,
                ..
            } => Some(ttl.items_with_ttl(*records)),
            Workload::Records {
                records,
                layout: RecordLayout::Strings,
                fields,
            } => Some(ttl.items_with_ttl(*records) * fields.len() as u64),
            // A profile and a file carry their own TTLs (the workload's ttlSeconds does not
            // apply).
            Workload::Profile(_) | Workload::Rdb(_) => None,
        }
    }

    /// Checks in the engine that the load stored what it should, and returns the verified
    /// number of items. `integer_replies` is the sum of the load's integer replies.
    pub fn verify(
        &self,
        control: &mut impl KeyCounts,
        integer_replies: u64,
        distinct_sent: Option<u64>,
    ) -> Result<Verified, BenchError> {
        let mismatch = |message: String| Err(BenchError::CountMismatch { message });
        match self {
            Workload::SortedSet { members, key, .. } => {
                let zcard = control.zcard(key)?;
                if zcard != *members {
                    return mismatch(format!("ZCARD {key} is {zcard}, expected {members}"));
                }
                if integer_replies != *members {
                    return mismatch(format!(
                        "ZADD NX reported {integer_replies} new members, expected {members} (was the key already there?)"
                    ));
                }
                let encoding = match control.object_encoding(key) {
                    Ok(encoding) => encoding,
                    // Dragonfly has no OBJECT command; the encoding is then not known.
                    Err(BenchError::EngineRejected { .. }) => None,
                    Err(e) => return Err(e),
                };
                Ok(Verified {
                    items: zcard,
                    encoding,
                    expected_unique: None,
                })
            }
            Workload::RandomStrings {
                requests, keyspace, ..
            } => {
                let dbsize = control.dbsize()?;
                let expected = expected_unique_keys(*requests, *keyspace);
                if let Some(sent) = distinct_sent {
                    if dbsize != sent {
                        return mismatch(format!(
                            "DBSIZE is {dbsize}, but the load sent {sent} distinct keys (did something else write to the server?)"
                        ));
                    }
                } else {
                    // 1M draws over 1M keys: standard deviation of the distinct count ~ 340;
                    // allow a generous margin plus 0.1% for small runs.
                    let margin = (expected * 0.001).max(6.0 * expected.sqrt()).max(10.0);
                    if (dbsize as f64 - expected).abs() > margin {
                        return mismatch(format!(
                            "DBSIZE is {dbsize}, expected about {expected:.0} distinct keys for {requests} SETs over {keyspace} keys"
                        ));
                    }
                }
                Ok(Verified {
                    items: dbsize,
                    encoding: None,
                    expected_unique: Some(expected),
                })
            }
            Workload::Strings { keys, .. } => {
                let dbsize = control.dbsize()?;
                if dbsize != *keys {
                    return mismatch(format!(
                        "DBSIZE is {dbsize}, expected exactly {keys} distinct keys (a load with overlapping key ranges stores fewer)"
                    ));
                }
                Ok(Verified {
                    items: dbsize,
                    encoding: None,
                    expected_unique: None,
                })
            }
            Workload::Profile(profile) => {
                let dbsize = control.dbsize()?;
                if dbsize != profile.keys {
                    return mismatch(format!(
                        "DBSIZE is {dbsize}, expected the {} keys the profile asks for",
                        profile.keys
                    ));
                }
                Ok(Verified {
                    items: dbsize,
                    encoding: None,
                    expected_unique: None,
                })
            }
            Workload::Rdb(load) => Ok(Verified {
                items: load.verify(&mut |db| control.keys_by_type(db))?,
                encoding: None,
                expected_unique: None,
            }),
            Workload::Records {
                records,
                layout,
                fields,
            } => {
                let dbsize = control.dbsize()?;
                let expected_keys = match layout {
                    RecordLayout::Hash => *records,
                    RecordLayout::Strings => records * fields.len() as u64,
                };
                if dbsize != expected_keys {
                    return mismatch(format!(
                        "DBSIZE is {dbsize}, expected {expected_keys} keys for {records} records"
                    ));
                }
                if *layout == RecordLayout::Hash && integer_replies != records * fields.len() as u64
                {
                    return mismatch(format!(
                        "HSET added {integer_replies} fields, expected {}",
                        records * fields.len() as u64
                    ));
                }
                Ok(Verified {
                    items: *records,
                    encoding: None,
                    expected_unique: None,
                })
            }
        }
    }
}

/// What verification reads of the engine: one engine's counts, or a sharded cluster's summed
/// over its shards (`crate::client::connection::shards::ShardSet`).
pub trait KeyCounts {
    /// Keys in the selected database (DBSIZE).
    fn dbsize(&mut self) -> Result<u64, BenchError>;
    /// Keys in every database (INFO keyspace).
    fn keys_in_all_databases(&mut self) -> Result<u64, BenchError>;
    /// Keys with a TTL in every database (INFO keyspace `expires=`).
    fn keys_with_expiry(&mut self) -> Result<u64, BenchError>;
    /// ZCARD of a key.
    fn zcard(&mut self, key: &str) -> Result<u64, BenchError>;
    /// `OBJECT ENCODING` of a key; None when the engine has no such command.
    fn object_encoding(&mut self, key: &str) -> Result<Option<String>, BenchError>;
    /// Keys by type (`TYPE`'s names) in database `db`.
    fn keys_by_type(&mut self, db: u64) -> Result<BTreeMap<String, u64>, BenchError>;
}

impl KeyCounts for ControlConnection {
    fn dbsize(&mut self) -> Result<u64, BenchError> {
        ControlConnection::dbsize(self)
    }
    fn keys_in_all_databases(&mut self) -> Result<u64, BenchError> {
        ControlConnection::keys_in_all_databases(self)
    }
    fn keys_with_expiry(&mut self) -> Result<u64, BenchError> {
        ControlConnection::keys_with_expiry(self)
    }
    fn zcard(&mut self, key: &str) -> Result<u64, BenchError> {
        ControlConnection::zcard(self, key)
    }
    fn object_encoding(&mut self, key: &str) -> Result<Option<String>, BenchError> {
        ControlConnection::object_encoding(self, key)
    }
    fn keys_by_type(&mut self, db: u64) -> Result<BTreeMap<String, u64>, BenchError> {
        crate::client::workloads::rdb_load::type_counts::keys_by_type(self, db)
    }
}

impl KeyCounts for ShardSet {
    fn dbsize(&mut self) -> Result<u64, BenchError> {
        Ok(self.each(|c, _| c.dbsize())?.iter().sum())
    }
    fn keys_in_all_databases(&mut self) -> Result<u64, BenchError> {
        Ok(self.each(|c, _| c.keys_in_all_databases())?.iter().sum())
    }
    fn keys_with_expiry(&mut self) -> Result<u64, BenchError> {
        Ok(self.each(|c, _| c.keys_with_expiry())?.iter().sum())
    }
    fn zcard(&mut self, key: &str) -> Result<u64, BenchError> {
        self.control_of(key).zcard(key)
    }
    fn object_encoding(&mut self, key: &str) -> Result<Option<String>, BenchError> {
        self.control_of(key).object_encoding(key)
    }
    fn keys_by_type(&mut self, db: u64) -> Result<BTreeMap<String, u64>, BenchError> {
        let mut total = BTreeMap::new();
        for counts in self.each(|c, _| c.keys_by_type(db))? {
            for (name, n) in counts {
                *total.entry(name).or_default() += n;
            }
        }
        Ok(total)
    }
}

/// What verification found.
#[derive(Clone, Debug, PartialEq)]
pub struct Verified {
    pub items: u64,
    /// `OBJECT ENCODING` of the sorted set (`skiplist` or `listpack`).
    pub encoding: Option<String>,
    /// For random keys: the expected number of distinct keys.
    pub expected_unique: Option<f64>,
}

/// The expected number of distinct keys after `requests` uniform draws from `keyspace` keys:
/// R * (1 - (1 - 1/R)^N). 1,000,000 over 1,000,000 gives about 632,120.
pub fn expected_unique_keys(requests: u64, keyspace: u64) -> f64 {
    let r = keyspace as f64;
    let n = requests as f64;
    r * -f64::exp_m1(n * f64::ln_1p(-1.0 / r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_million_sets_over_one_million_keys_leave_about_632_thousand() {
        let expected = expected_unique_keys(1_000_000, 1_000_000);
        assert!((expected - 632_120.0).abs() < 1.0, "{expected}");
    }

    #[test]
    fn a_spec_with_two_workloads_is_rejected_naming_the_field() {
        let spec: WorkloadSpec = serde_json::from_value(serde_json::json!({
            "sortedSet": {"members": 10},
            "strings": {"keys": 10}
        }))
        .unwrap();
        let err = Workload::from_spec(&spec).unwrap_err().to_string();
        assert!(
            err.contains("spec.workload") && err.contains("exactly one"),
            "{err}"
        );
    }
}
