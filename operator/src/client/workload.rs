//! The four published workloads: which commands they send, one at a time on the fly (never
//! all at once, so client memory stays flat whatever N is), and how their result is verified
//! in the engine afterwards.

use serde::{Deserialize, Serialize};

use crate::client::draws::KeyGenerator;
use crate::client::engine::ControlConnection;
use crate::client::profile_workload::{ProfileEncoder, ProfileWorkload};
use crate::client::resp::{CommandBuffer, format_decimal, push_decimal};
use crate::crd::{RecordLayout, WorkloadSpec, default_seed};
use crate::error::BenchError;

/// Key names of the string workloads: `key:` and a 12-digit zero-padded number, as
/// redis-benchmark and valkey-benchmark name `key:__rand_int__`.
const KEY_PREFIX: &[u8] = b"key:";
const KEY_DIGITS: usize = 12;

/// Above this key space the exact count of distinct random keys would need too large a bitmap
/// (one bit per key), and the check falls back to the statistical expectation.
const MAX_EXACT_KEYSPACE: u64 = 1 << 27;

/// A validated workload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
}

fn invalid(field: &str, message: impl Into<String>) -> BenchError {
    BenchError::InvalidArgument {
        field: field.to_string(),
        message: message.into(),
    }
}

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
        ]
        .iter()
        .filter(|s| **s)
        .count();
        if set != 1 {
            return Err(invalid(
                "spec.workload",
                format!(
                    "set exactly one of sortedSet, randomStrings, strings, records, profile ({set} are set)"
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
        } else {
            unreachable!("exactly one workload is set")
        };
        workload.validate()?;
        Ok(workload)
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
        }
    }

    /// What one item is called: a sorted-set member, a key, a record.
    pub fn item_noun(&self) -> &'static str {
        match self {
            Workload::SortedSet { .. } => "member",
            Workload::RandomStrings { .. } | Workload::Strings { .. } | Workload::Profile(_) => {
                "key"
            }
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
        }
    }

    /// Read used_memory every this many items during the load (0: never).
    pub fn sample_every(&self) -> u64 {
        match self {
            Workload::SortedSet { sample_every, .. } => *sample_every,
            _ => 0,
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
            _ => "SET",
        }
    }

    pub fn encoder(&self) -> CommandEncoder {
        CommandEncoder::new(self.clone())
    }

    /// Checks in the engine that the load stored what it should, and returns the verified
    /// number of items. `integer_replies` is the sum of the load's integer replies.
    pub fn verify(
        &self,
        control: &mut ControlConnection,
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

const NAMES: [&str; 8] = [
    "Alice", "Bob", "Carol", "Dave", "Erin", "Frank", "Grace", "Heidi",
];
const CITIES: [&str; 8] = [
    "Toronto", "Berlin", "Tokyo", "Lyon", "Austin", "Dublin", "Seoul", "Lima",
];

/// Encodes the workload's commands in order, one call per command.
pub struct CommandEncoder {
    workload: Workload,
    /// The RESP that every command shares up to its first varying byte, and after its last
    /// one, encoded once: a SET is then the prefix, 12 digits and the suffix, and a ZADD the
    /// prefix and its number twice, instead of a dozen length fields formatted per command.
    /// Empty for records, whose commands share less.
    prefix: Vec<u8>,
    suffix: Vec<u8>,
    keys: KeyGenerator,
    /// One bit per key of a random-strings key space, to count exactly how many distinct keys
    /// were sent.
    sent_keys: Option<Vec<u64>>,
    distinct_sent: u64,
    record_key: Vec<u8>,
    profile: Option<ProfileEncoder>,
}

/// `SET key:<12 digits> <value>` up to the digits, and after them.
fn set_template(value_size: u32) -> (Vec<u8>, Vec<u8>) {
    let mut prefix = CommandBuffer::default();
    prefix
        .array(3)
        .bulk(b"SET")
        .raw(b"$")
        .raw((KEY_PREFIX.len() + KEY_DIGITS).to_string().as_bytes())
        .raw(b"\r\n")
        .raw(KEY_PREFIX);
    let mut suffix = CommandBuffer::default();
    suffix.raw(b"\r\n").bulk(&vec![b'x'; value_size as usize]);
    (prefix.as_bytes().to_vec(), suffix.as_bytes().to_vec())
}

impl CommandEncoder {
    fn new(workload: Workload) -> Self {
        let (prefix, suffix, keys, sent_keys) = match &workload {
            Workload::SortedSet { key, .. } => {
                let mut prefix = CommandBuffer::default();
                prefix
                    .array(5)
                    .bulk(b"ZADD")
                    .bulk(key.as_bytes())
                    .bulk(b"NX");
                (
                    prefix.as_bytes().to_vec(),
                    Vec::new(),
                    KeyGenerator::new(default_seed()),
                    None,
                )
            }
            Workload::RandomStrings {
                value_size,
                seed,
                keyspace,
                ..
            } => {
                let (prefix, suffix) = set_template(*value_size);
                (
                    prefix,
                    suffix,
                    KeyGenerator::new(*seed),
                    (*keyspace <= MAX_EXACT_KEYSPACE)
                        .then(|| vec![0u64; keyspace.div_ceil(64) as usize]),
                )
            }
            Workload::Strings { value_size, .. } => {
                let (prefix, suffix) = set_template(*value_size);
                (prefix, suffix, KeyGenerator::new(default_seed()), None)
            }
            Workload::Records { .. } | Workload::Profile(_) => (
                Vec::new(),
                Vec::new(),
                KeyGenerator::new(default_seed()),
                None,
            ),
        };
        let profile = match &workload {
            Workload::Profile(profile) => Some(profile.encoder()),
            _ => None,
        };
        Self {
            workload,
            prefix,
            suffix,
            keys,
            sent_keys,
            distinct_sent: 0,
            record_key: Vec::with_capacity(64),
            profile,
        }
    }

    /// How many distinct keys the random-strings load has sent, when counted exactly.
    pub fn distinct_sent(&self) -> Option<u64> {
        self.sent_keys.as_ref().map(|_| self.distinct_sent)
    }

    /// Appends command number `index` (counted from 0; calls must come in order).
    pub fn encode(&mut self, index: u64, out: &mut CommandBuffer) {
        if let Some(profile) = &mut self.profile {
            profile.encode_next(out);
            return;
        }
        match &self.workload {
            Workload::SortedSet { .. } => {
                // `$<n>\r\n<i>\r\n$<n+2>\r\nm:<i>\r\n` after the shared prefix.
                let mut digits = [0u8; 20];
                let number = format_decimal(index, &mut digits);
                out.raw(&self.prefix)
                    .bulk(number)
                    .bulk_prefixed_digits(b"m:", number);
            }
            Workload::RandomStrings { keyspace, .. } => {
                let k = self.keys.below(*keyspace);
                if let Some(bits) = &mut self.sent_keys {
                    let (word, bit) = ((k / 64) as usize, 1u64 << (k % 64));
                    if bits[word] & bit == 0 {
                        bits[word] |= bit;
                        self.distinct_sent += 1;
                    }
                }
                out.raw(&self.prefix)
                    .padded_digits(k, KEY_DIGITS)
                    .raw(&self.suffix);
            }
            Workload::Strings { .. } => {
                out.raw(&self.prefix)
                    .padded_digits(index, KEY_DIGITS)
                    .raw(&self.suffix);
            }
            Workload::Profile(_) => unreachable!("a profile is encoded by its own encoder"),
            Workload::Records { layout, fields, .. } => match layout {
                RecordLayout::Hash => {
                    self.record_key.clear();
                    self.record_key.extend_from_slice(b"user:");
                    push_decimal(&mut self.record_key, index);
                    out.array(2 + 2 * fields.len())
                        .bulk(b"HSET")
                        .bulk(&self.record_key);
                    for field in fields {
                        out.bulk(field.as_bytes());
                        encode_field_value(out, field, index);
                    }
                }
                RecordLayout::Strings => {
                    let per = fields.len() as u64;
                    let (record, field) = (index / per, &fields[(index % per) as usize]);
                    self.record_key.clear();
                    self.record_key.extend_from_slice(b"user:");
                    push_decimal(&mut self.record_key, record);
                    self.record_key.push(b':');
                    self.record_key.extend_from_slice(field.as_bytes());
                    out.array(3).bulk(b"SET").bulk(&self.record_key);
                    encode_field_value(out, field, record);
                }
            },
        }
    }
}

/// The value of a record's field: the published example's kinds of values (a name, an age, a
/// city, a score), varied by record so that no value is shared.
fn encode_field_value(out: &mut CommandBuffer, field: &str, record: u64) {
    match field {
        "name" => {
            out.bulk(NAMES[(record % NAMES.len() as u64) as usize].as_bytes());
        }
        "age" => {
            out.bulk_decimal(18 + record % 60);
        }
        "city" => {
            out.bulk(CITIES[(record % CITIES.len() as u64) as usize].as_bytes());
        }
        "score" => {
            out.bulk_decimal(record % 1000);
        }
        _ => {
            out.bulk_prefixed_decimal(b"v", record % 100_000);
        }
    }
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
    fn random_keys_stay_in_the_key_space_and_are_counted_exactly() {
        let workload = Workload::RandomStrings {
            requests: 10_000,
            keyspace: 1_000,
            value_size: 3,
            seed: 1,
        };
        let mut encoder = workload.encoder();
        let mut out = CommandBuffer::default();
        for i in 0..10_000 {
            encoder.encode(i, &mut out);
        }
        // 10,000 draws over 1,000 keys miss almost none: 1000 * (1 - e^-10) ~ 999.95.
        assert!(encoder.distinct_sent().unwrap() >= 995);
        let text = String::from_utf8_lossy(out.as_bytes());
        assert!(text.contains("$16\r\nkey:000000000"));
        assert!(!text.contains("key:000000001000"));
    }

    /// Command `index` built argument by argument, the plain way, to check the encoder's
    /// pre-encoded parts against.
    fn built_argument_by_argument(workload: &Workload, index: u64, key: u64) -> Vec<u8> {
        let mut out = CommandBuffer::default();
        match workload {
            Workload::SortedSet { key, .. } => {
                out.array(5)
                    .bulk(b"ZADD")
                    .bulk(key.as_bytes())
                    .bulk(b"NX")
                    .bulk(index.to_string().as_bytes())
                    .bulk(format!("m:{index}").as_bytes());
            }
            Workload::RandomStrings { value_size, .. } | Workload::Strings { value_size, .. } => {
                out.array(3)
                    .bulk(b"SET")
                    .bulk(format!("key:{key:012}").as_bytes())
                    .bulk(&vec![b'x'; *value_size as usize]);
            }
            Workload::Records { .. } | Workload::Profile(_) => {
                unreachable!("records and profiles are built argument by argument")
            }
        }
        out.as_bytes().to_vec()
    }

    #[test]
    fn pre_encoded_commands_equal_commands_built_argument_by_argument() {
        // Every digit count a key can have, on both sides of each change.
        let mut boundaries: Vec<u64> = (0..12)
            .flat_map(|digits| {
                let n = 10u64.pow(digits);
                [n - 1, n, n + 1]
            })
            .collect();
        boundaries.push(999_999_999_999);
        let sorted_set = Workload::SortedSet {
            members: u64::MAX,
            key: "a key".into(),
            sample_every: 0,
        };
        let strings = Workload::Strings {
            keys: 999_999_999_999,
            value_size: 100,
        };
        for workload in [&sorted_set, &strings] {
            let mut encoder = workload.encoder();
            for &index in &boundaries {
                let mut out = CommandBuffer::default();
                encoder.encode(index, &mut out);
                assert_eq!(
                    out.as_bytes(),
                    built_argument_by_argument(workload, index, index),
                    "{workload:?} {index}"
                );
            }
        }
        // Random keys: the same draws, encoded both ways.
        let random = Workload::RandomStrings {
            requests: 1000,
            keyspace: 999_999_999_999,
            value_size: 16,
            seed: 3,
        };
        let mut encoder = random.encoder();
        let mut draws = KeyGenerator::new(3);
        for index in 0..1000 {
            let mut out = CommandBuffer::default();
            encoder.encode(index, &mut out);
            let key = draws.below(999_999_999_999);
            assert_eq!(
                out.as_bytes(),
                built_argument_by_argument(&random, index, key)
            );
        }
    }

    #[test]
    fn records_as_strings_send_one_set_per_field() {
        let workload = Workload::Records {
            records: 2,
            layout: RecordLayout::Strings,
            fields: crate::crd::default_record_fields(),
        };
        assert_eq!(workload.commands(), 8);
        let mut encoder = workload.encoder();
        let mut out = CommandBuffer::default();
        encoder.encode(5, &mut out);
        assert_eq!(
            out.as_bytes(),
            b"*3\r\n$3\r\nSET\r\n$10\r\nuser:1:age\r\n$2\r\n19\r\n"
        );
    }

    #[test]
    fn a_record_as_a_hash_is_one_hset_with_every_field() {
        let workload = Workload::Records {
            records: 1,
            layout: RecordLayout::Hash,
            fields: vec!["name".into(), "city".into()],
        };
        let mut encoder = workload.encoder();
        let mut out = CommandBuffer::default();
        encoder.encode(0, &mut out);
        assert_eq!(
            out.as_bytes(),
            b"*6\r\n$4\r\nHSET\r\n$6\r\nuser:0\r\n$4\r\nname\r\n$5\r\nAlice\r\n$4\r\ncity\r\n$7\r\nToronto\r\n"
        );
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
