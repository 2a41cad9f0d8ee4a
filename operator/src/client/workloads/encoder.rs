//! The encoder of a workload's commands: each command appended in order to a reused buffer
//! from parts encoded once (a SET is a shared prefix, 12 digits and a shared suffix), with the
//! TTL the items it picks get, and the generator of random keys.

use super::draws::KeyGenerator;
use super::profile_workload::ProfileEncoder;
use super::rdb_load::encoder::RdbEncoder;
use super::ttl::Ttl;
use super::workload::Workload;
use crate::client::connection::resp::{CommandBuffer, format_decimal, push_decimal};
use crate::crd::{RecordLayout, default_seed};

/// Key names of the string workloads: `key:` and a 12-digit zero-padded number, as
/// redis-benchmark and valkey-benchmark name `key:__rand_int__`.
pub(crate) const KEY_PREFIX: &[u8] = b"key:";
pub(crate) const KEY_DIGITS: usize = 12;

/// Above this key space the exact count of distinct random keys would need too large a bitmap
/// (one bit per key), and the check falls back to the statistical expectation.
const MAX_EXACT_KEYSPACE: u64 = 1 << 27;

impl Workload {
    pub fn encoder(&self) -> CommandEncoder {
        CommandEncoder::new(self.clone(), None)
    }

    /// An encoder that gives the items `ttl` picks a TTL with their write.
    pub fn encoder_with_ttl(&self, ttl: Option<Ttl>) -> CommandEncoder {
        CommandEncoder::new(self.clone(), ttl)
    }
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
    /// A profile's rebuild, which draws its keys and commands itself.
    profile: Option<ProfileEncoder>,
    /// An RDB file's load, whose commands come from its reader thread.
    rdb: Option<RdbEncoder>,
    /// The TTL given to the items it picks, and the SET template's parts with `EX` for them.
    ttl: Option<Ttl>,
    ttl_prefix: Vec<u8>,
    ttl_suffix: Vec<u8>,
    /// `EXPIRE` commands appended (their `:1` replies are not the workload's).
    expires_sent: u64,
    /// Distinct random keys sent with a TTL.
    distinct_with_ttl: u64,
}

/// `SET key:<12 digits> <value>` up to the digits, and after them; with `EX <seconds>` after
/// the value when `ttl_seconds` is given.
fn set_template(value_size: u32, ttl_seconds: Option<u32>) -> (Vec<u8>, Vec<u8>) {
    let mut prefix = CommandBuffer::default();
    prefix
        .array(if ttl_seconds.is_some() { 5 } else { 3 })
        .bulk(b"SET")
        .raw(b"$")
        .raw((KEY_PREFIX.len() + KEY_DIGITS).to_string().as_bytes())
        .raw(b"\r\n")
        .raw(KEY_PREFIX);
    let mut suffix = CommandBuffer::default();
    suffix.raw(b"\r\n").bulk(&vec![b'x'; value_size as usize]);
    if let Some(seconds) = ttl_seconds {
        suffix.bulk(b"EX").bulk_decimal(u64::from(seconds));
    }
    (prefix.as_bytes().to_vec(), suffix.as_bytes().to_vec())
}

impl CommandEncoder {
    fn new(workload: Workload, ttl: Option<Ttl>) -> Self {
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
                let (prefix, suffix) = set_template(*value_size, None);
                (
                    prefix,
                    suffix,
                    KeyGenerator::new(*seed),
                    (*keyspace <= MAX_EXACT_KEYSPACE)
                        .then(|| vec![0u64; keyspace.div_ceil(64) as usize]),
                )
            }
            Workload::Strings { value_size, .. } => {
                let (prefix, suffix) = set_template(*value_size, None);
                (prefix, suffix, KeyGenerator::new(default_seed()), None)
            }
            Workload::Records { .. } | Workload::Profile(_) | Workload::Rdb(_) => (
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
        let rdb = match &workload {
            Workload::Rdb(load) => Some(RdbEncoder::new(load)),
            _ => None,
        };
        let (ttl_prefix, ttl_suffix) = match (&workload, ttl) {
            (
                Workload::RandomStrings { value_size, .. } | Workload::Strings { value_size, .. },
                Some(ttl),
            ) => set_template(*value_size, Some(ttl.seconds)),
            _ => (Vec::new(), Vec::new()),
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
            rdb,
            ttl,
            ttl_prefix,
            ttl_suffix,
            expires_sent: 0,
            distinct_with_ttl: 0,
        }
    }

    /// `EXPIRE` commands appended so far: each answers `:1`, which is not the workload's reply.
    pub fn expires_sent(&self) -> u64 {
        self.expires_sent
    }

    /// How many distinct random keys were sent with a TTL, when counted exactly.
    pub fn distinct_with_ttl(&self) -> Option<u64> {
        self.sent_keys.as_ref().map(|_| self.distinct_with_ttl)
    }

    /// How many distinct keys the random-strings load has sent, when counted exactly.
    pub fn distinct_sent(&self) -> Option<u64> {
        self.sent_keys.as_ref().map(|_| self.distinct_sent)
    }

    /// Appends command number `index` (counted from 0; calls must come in order), and the
    /// `EXPIRE` that follows it when its item gets a TTL that way; returns how many replies
    /// they will get (1 or 2).
    pub fn encode(&mut self, index: u64, out: &mut CommandBuffer) -> usize {
        // A profile's rebuild counts its PEXPIREs among its commands: one reply each.
        if let Some(profile) = &mut self.profile {
            profile.encode_next(out);
            return 1;
        }
        if let Some(rdb) = &mut self.rdb {
            rdb.encode_next(out);
            return 1;
        }
        let ttl = self.ttl;
        let has_ttl = |item: u64| ttl.is_some_and(|ttl| ttl.applies_to(item));
        let seconds = ttl.map_or(0, |ttl| ttl.seconds);
        match &self.workload {
            Workload::SortedSet { key, .. } => {
                // `$<n>\r\n<i>\r\n$<n+2>\r\nm:<i>\r\n` after the shared prefix.
                let mut digits = [0u8; 20];
                let number = format_decimal(index, &mut digits);
                out.raw(&self.prefix)
                    .bulk(number)
                    .bulk_prefixed_digits(b"m:", number);
                // The one key gets its TTL once it exists.
                if index == 0 && has_ttl(0) {
                    expire(out, key.as_bytes(), seconds);
                    self.expires_sent += 1;
                    return 2;
                }
            }
            Workload::RandomStrings { keyspace, .. } => {
                let k = self.keys.below(*keyspace);
                let ttl = has_ttl(k);
                if let Some(bits) = &mut self.sent_keys {
                    let (word, bit) = ((k / 64) as usize, 1u64 << (k % 64));
                    if bits[word] & bit == 0 {
                        bits[word] |= bit;
                        self.distinct_sent += 1;
                        self.distinct_with_ttl += u64::from(ttl);
                    }
                }
                let (prefix, suffix) = if ttl {
                    (&self.ttl_prefix, &self.ttl_suffix)
                } else {
                    (&self.prefix, &self.suffix)
                };
                out.raw(prefix).padded_digits(k, KEY_DIGITS).raw(suffix);
            }
            Workload::Strings { .. } => {
                let (prefix, suffix) = if has_ttl(index) {
                    (&self.ttl_prefix, &self.ttl_suffix)
                } else {
                    (&self.prefix, &self.suffix)
                };
                out.raw(prefix).padded_digits(index, KEY_DIGITS).raw(suffix);
            }
            Workload::Profile(_) | Workload::Rdb(_) => {
                unreachable!("a profile and a file are encoded by their own encoders")
            }
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
                    if has_ttl(index) {
                        expire(out, &self.record_key, seconds);
                        self.expires_sent += 1;
                        return 2;
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
                    let with_ttl = has_ttl(record);
                    out.array(if with_ttl { 5 } else { 3 })
                        .bulk(b"SET")
                        .bulk(&self.record_key);
                    encode_field_value(out, field, record);
                    if with_ttl {
                        out.bulk(b"EX").bulk_decimal(u64::from(seconds));
                    }
                }
            },
        }
        1
    }
}

/// `EXPIRE <key> <seconds>`, after the write of `key`.
fn expire(out: &mut CommandBuffer, key: &[u8], seconds: u32) {
    out.array(3)
        .bulk(b"EXPIRE")
        .bulk(key)
        .bulk_decimal(u64::from(seconds));
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
            Workload::Records { .. } | Workload::Profile(_) | Workload::Rdb(_) => {
                unreachable!("records, profiles and files are built argument by argument")
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
    fn items_with_a_ttl_get_ex_or_a_pipelined_expire_and_the_others_nothing() {
        let ttl = Some(Ttl {
            seconds: 3600,
            share: 0.5,
        });
        let strings = Workload::Strings {
            keys: 4,
            value_size: 2,
        };
        let mut encoder = strings.encoder_with_ttl(ttl);
        let mut out = CommandBuffer::default();
        assert_eq!(encoder.encode(0, &mut out), 1);
        assert_eq!(encoder.encode(1, &mut out), 1);
        assert_eq!(
            String::from_utf8_lossy(out.as_bytes()),
            "*3\r\n$3\r\nSET\r\n$16\r\nkey:000000000000\r\n$2\r\nxx\r\n*5\r\n$3\r\nSET\r\n$16\r\nkey:000000000001\r\n$2\r\nxx\r\n$2\r\nEX\r\n$4\r\n3600\r\n"
        );
        let hash = Workload::Records {
            records: 2,
            layout: RecordLayout::Hash,
            fields: vec!["age".into()],
        };
        let mut encoder = hash.encoder_with_ttl(ttl);
        let mut out = CommandBuffer::default();
        assert_eq!(encoder.encode(0, &mut out), 1);
        assert_eq!(encoder.encode(1, &mut out), 2);
        assert!(
            String::from_utf8_lossy(out.as_bytes())
                .ends_with("*3\r\n$6\r\nEXPIRE\r\n$6\r\nuser:1\r\n$4\r\n3600\r\n")
        );
        assert_eq!(encoder.expires_sent(), 1);
    }
}
