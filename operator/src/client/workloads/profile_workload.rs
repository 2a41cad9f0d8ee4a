//! The `profile` workload: a profile's keyspace rebuilt, key by key on the fly (client memory
//! stays flat at any scale). Each key's shape (its group, name length, TTL, element count,
//! whether its elements are integers) is drawn from its own generator seeded by the workload's
//! seed and the key's number, so the commands are known before they are sent (a first pass
//! counts them without encoding) and the same seed gives the same data on every engine.
//!
//! A key is one command (`SET`, or `HSET`/`RPUSH`/`SADD`/`ZADD` of up to
//! [`ELEMENTS_PER_COMMAND`] elements, or one `XADD` per stream entry) or several, then a
//! `PEXPIRE` when it has a TTL. Every TTL is [`REBUILD_TTL_MILLIS`]: a key with a TTL costs its
//! entry in the expires table whatever the TTL is, and one that expired mid-run would be a lost
//! item.
//!
//! The keys are loaded type by type ([`ProfileWorkload::load_order`]; the commands themselves
//! come from `profile_encoder`), and [`ProfileWorkload::type_segments`] says where each type's
//! commands end, so the load reads used_memory between two types: each type's bytes per key.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::profile::model::{Distribution, KeyType, Profile, ValueShape};

pub use super::profile_encoder::ProfileEncoder;
use super::profile_objects::ObjectFields;
pub use super::profile_shape::{ELEMENTS_PER_COMMAND, MAX_ELEMENTS_PER_KEY, REBUILD_TTL_MILLIS};
use super::profile_shape::{KeyShape, group_stratum, key_generator};

/// The environment variable a client pod finds its profile in (JSON), when `membench load`
/// has no --profile file: an inline profile of at most [`MAX_PROFILE_ENV_BYTES`].
pub const PROFILE_ENV: &str = "MEMBENCH_PROFILE";

/// The most an inline profile may take as JSON to travel in [`PROFILE_ENV`]: Linux refuses to
/// start a program with one environment string over 128 KiB (MAX_ARG_STRLEN, the name and
/// `=` included), so a little less.
pub const MAX_PROFILE_ENV_BYTES: usize = 120 * 1024;

/// The environment variable holding the digest ([`profile_digest`]) of the profile the
/// operator checked, when the client pod reads it from a file (a ConfigMap's volume): the
/// client refuses a profile that is not that one (the ConfigMap changed since).
pub const PROFILE_DIGEST_ENV: &str = "MEMBENCH_PROFILE_DIGEST";

/// A fingerprint of a profile's content (FNV-1a 64 of its JSON, as hex): equal for the same
/// profile read from YAML or JSON, different for any other.
pub fn profile_digest(profile: &Profile) -> String {
    let json = serde_json::to_vec(profile).expect("a profile always serializes");
    let hash = json.iter().fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{hash:016x}")
}

/// Whether an inline profile fits in a client pod's environment; the message says its size,
/// the limit and what to do.
pub fn fits_in_environment(profile: &Profile) -> Result<(), String> {
    let bytes = serde_json::to_vec(profile)
        .expect("a profile always serializes")
        .len();
    if bytes > MAX_PROFILE_ENV_BYTES {
        return Err(format!(
            "the inline profile takes {} KiB as JSON, more than the {} KiB a client pod's environment carries (Linux starts no program with an environment variable over 128 KiB): put it in a ConfigMap (up to 1 MiB: kubectl create configmap NAME --from-file=profile.yaml=PROFILE) and name it with workload.profile.configMapRef, which the client pod mounts as a file",
            bytes.div_ceil(1024),
            MAX_PROFILE_ENV_BYTES / 1024
        ));
    }
    Ok(())
}

/// A profile to rebuild, at a scale, with a seed.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProfileWorkload {
    /// Keys to store: the profile's DBSIZE times `scale`.
    pub keys: u64,
    pub scale: f64,
    pub element_scale: f64,
    pub seed: u64,
    /// Commands the load sends.
    pub commands: u64,
    /// Keys given a TTL (of [`REBUILD_TTL_MILLIS`]).
    pub ttl_keys: u64,
    /// Groups of the profile.
    pub groups: usize,
    /// Where the profile was taken (engine, version, keys).
    pub source: String,
    /// The profile itself; absent in a report read back, which never loads again.
    #[serde(skip)]
    pub profile: Option<Arc<Profile>>,
    /// Keys per group, in the profile's order.
    #[serde(skip)]
    group_keys: Vec<u64>,
    /// Commands per group, in the profile's order.
    #[serde(skip)]
    group_commands: Vec<u64>,
}

/// The keys of one type, loaded one after the other: what the load reads used_memory after.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TypeSegment {
    pub key_type: KeyType,
    pub keys: u64,
    /// The load's commands up to the end of this type's keys, counted from the start.
    pub commands_end: u64,
}

impl PartialEq for ProfileWorkload {
    fn eq(&self, other: &Self) -> bool {
        (
            self.keys,
            self.commands,
            self.ttl_keys,
            self.seed,
            &self.source,
        ) == (
            other.keys,
            other.commands,
            other.ttl_keys,
            other.seed,
            &other.source,
        ) && self.scale == other.scale
            && self.element_scale == other.element_scale
    }
}

/// The largest `scale` and `elementScale`.
pub const MOST_SCALE: f64 = 1_000_000.0;
/// The most keys a rebuild stores.
pub const MOST_KEYS: u64 = 2_000_000_000;

/// Splits `keys` over shares by largest remainder, so the counts add up exactly.
fn allocate(keys: u64, shares: &[f64]) -> Vec<u64> {
    let exact: Vec<f64> = shares.iter().map(|s| s * keys as f64).collect();
    let mut counts: Vec<u64> = exact.iter().map(|e| e.floor() as u64).collect();
    let mut left = keys.saturating_sub(counts.iter().sum());
    let mut order: Vec<usize> = (0..shares.len()).collect();
    order.sort_by(|a, b| {
        (exact[*b] - exact[*b].floor()).total_cmp(&(exact[*a] - exact[*a].floor()))
    });
    for i in order.into_iter().cycle() {
        if left == 0 {
            break;
        }
        counts[i] += 1;
        left -= 1;
    }
    counts
}

impl ProfileWorkload {
    /// Checks the profile and the scales, and counts what the rebuild sends.
    pub fn new(
        profile: Profile,
        scale: f64,
        element_scale: f64,
        seed: u64,
    ) -> Result<Self, String> {
        profile.check()?;
        for (name, value) in [("scale", scale), ("elementScale", element_scale)] {
            if !(value.is_finite() && value > 0.0 && value <= MOST_SCALE) {
                return Err(format!(
                    "{name} is {value}: it is a factor above 0 and at most {MOST_SCALE} (1 keeps the profile's size)"
                ));
            }
        }
        let keys = (profile.source.keys as f64 * scale).round().max(1.0) as u64;
        if keys > MOST_KEYS {
            return Err(format!(
                "scale {scale} would store {keys} keys, and a rebuild stores at most {MOST_KEYS}: with this profile's {} keys, scale is at most {}",
                profile.source.keys,
                MOST_KEYS / profile.source.keys.max(1)
            ));
        }
        let shares: Vec<f64> = profile.groups.iter().map(|g| g.share).collect();
        let group_keys = allocate(keys, &shares);
        let mut group_commands = Vec::with_capacity(group_keys.len());
        let mut ttl_keys = 0u64;
        let mut first_key = 0u64;
        for (g, (group, count)) in profile.groups.iter().zip(&group_keys).enumerate() {
            let mut commands = 0u64;
            let place = group_stratum(seed, g);
            // Which keys get a TTL follows from the group's offset alone (KeyShape::draw):
            // counted without drawing a key.
            let with_ttl = group
                .ttl
                .as_ref()
                .map_or(0, |t| place.with_integers(t.share, *count));
            let largest = group
                .elements
                .as_ref()
                .map_or(1.0, |d| d.max() as f64 * element_scale);
            // An object hash's key holds at most its 64 fields (`profile_objects`).
            let objects = ObjectFields::apply_to(group, element_scale);
            let one_command_each = group.key_type == KeyType::String
                || objects
                || (group.key_type != KeyType::Stream
                    && largest.round() <= ELEMENTS_PER_COMMAND as f64);
            if one_command_each {
                // A SET carries its TTL; any other key adds a PEXPIRE.
                let expires = if group.key_type == KeyType::String {
                    0
                } else {
                    with_ttl
                };
                commands = commands.saturating_add(count + expires);
                ttl_keys += with_ttl;
            } else {
                // Keys of several commands: counted key by key.
                for rank in 0..*count {
                    let k = first_key + rank;
                    let shape = KeyShape::draw(
                        group,
                        element_scale,
                        place.of(rank, *count),
                        &mut key_generator(seed, k),
                    );
                    commands = commands.saturating_add(shape.commands(group.key_type));
                    ttl_keys += u64::from(shape.ttl);
                }
            }
            first_key += count;
            group_commands.push(commands);
        }
        let commands = group_commands
            .iter()
            .fold(0u64, |sum, c| sum.saturating_add(*c));
        let server = match (&profile.source.engine, &profile.source.version) {
            (Some(engine), Some(version)) => format!("{engine} {version}"),
            (Some(engine), None) => engine.clone(),
            _ => "a server".to_string(),
        };
        let source = format!(
            "{server} db{}, {} keys",
            profile.source.db, profile.source.keys
        );
        Ok(Self {
            keys,
            scale,
            element_scale,
            seed,
            commands,
            ttl_keys,
            groups: profile.groups.len(),
            source,
            profile: Some(Arc::new(profile)),
            group_keys,
            group_commands,
        })
    }

    /// The order the groups are loaded in: by type (strings, hashes, lists, sets, sorted sets,
    /// streams), in the profile's order within a type, so that the load can read used_memory
    /// between two types. Keys keep their numbers ([`Self::first_keys`]) whatever the order.
    pub fn load_order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.group_keys.len()).collect();
        if let Some(profile) = &self.profile {
            order.sort_by_key(|g| profile.groups[*g].key_type);
        }
        order
    }

    /// The number of each group's first key, in the profile's order.
    pub fn first_keys(&self) -> Vec<u64> {
        self.group_keys
            .iter()
            .scan(0u64, |next, keys| {
                let first = *next;
                *next += keys;
                Some(first)
            })
            .collect()
    }

    /// The types in the order they are loaded, with their keys and where their commands end
    /// (types without keys left out).
    pub fn type_segments(&self) -> Vec<TypeSegment> {
        let Some(profile) = &self.profile else {
            return Vec::new();
        };
        let mut segments: Vec<TypeSegment> = Vec::new();
        let mut commands_end = 0u64;
        for g in self.load_order() {
            let (keys, key_type) = (self.group_keys[g], profile.groups[g].key_type);
            if keys == 0 {
                continue;
            }
            commands_end = commands_end.saturating_add(self.group_commands[g]);
            match segments.last_mut() {
                Some(last) if last.key_type == key_type => {
                    last.keys += keys;
                    last.commands_end = commands_end;
                }
                _ => segments.push(TypeSegment {
                    key_type,
                    keys,
                    commands_end,
                }),
            }
        }
        segments
    }

    /// A generous guess of the data's size in bytes, for an engine pod's memory: per key its
    /// name and about 64 bytes of overhead, per element its lengths and about 24 bytes, per
    /// TTL 32 bytes.
    pub fn estimated_bytes(&self) -> u64 {
        let Some(profile) = &self.profile else {
            return 0;
        };
        let mean = |shape: Option<&ValueShape>| {
            shape.map_or(0.0, |s| {
                let text = s.text_length.as_ref().map_or(0.0, Distribution::mean);
                let integer = s.integer_length.as_ref().map_or(0.0, Distribution::mean);
                text.max(integer)
            })
        };
        let bytes: f64 = profile
            .groups
            .iter()
            .zip(&self.group_keys)
            .map(|(group, keys)| {
                let elements = group
                    .elements
                    .as_ref()
                    .map_or(1.0, |d| d.mean() * self.element_scale);
                let per_element = mean(group.fields.as_ref())
                    + mean(Some(&group.values))
                    + mean(group.scores.as_ref())
                    + 24.0;
                let per_key = group.key_length.mean() + 64.0 + elements * per_element;
                *keys as f64 * per_key
            })
            .sum();
        (bytes + self.ttl_keys as f64 * 32.0) as u64
    }

    pub fn describe(&self) -> String {
        let ttl = if self.ttl_keys > 0 {
            format!(
                "; {} keys with a {}-day TTL, so none expires during the run",
                self.ttl_keys,
                REBUILD_TTL_MILLIS / 86_400_000
            )
        } else {
            String::new()
        };
        format!(
            "profile of {}: {} keys in {} groups (scale {}, elementScale {}, seed {}){ttl}",
            self.source, self.keys, self.groups, self.scale, self.element_scale, self.seed
        )
    }

    pub fn encoder(&self) -> ProfileEncoder {
        ProfileEncoder::new(
            self.profile
                .clone()
                .expect("a profile workload that loads holds its profile"),
            self.group_keys.clone(),
            self.first_keys(),
            self.load_order(),
            self.element_scale,
            self.seed,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::connection::resp::CommandBuffer;
    use crate::client::workloads::profile_shape::Stratum;

    fn profile(yaml_groups: &str) -> Profile {
        Profile::parse(&format!(
            "format: 1\nsource: {{keys: 40}}\ngroups:\n{yaml_groups}"
        ))
        .unwrap()
    }

    const MIXED: &str = r#"- template: "s:{n}"
  type: string
  share: 0.25
  keyLength: {buckets: [[5, 8, 4]]}
  ttl: {share: 0.5, millis: {buckets: [[1000, 1000, 1]]}}
  values: {integerShare: 0.5, textLength: {buckets: [[10, 10, 1]]}, integerLength: {buckets: [[3, 3, 1]]}}
- template: "h:{n}"
  type: hash
  share: 0.25
  keyLength: {buckets: [[5, 5, 1]]}
  ttl: {share: 0.3, millis: {buckets: [[1000, 1000, 1]]}}
  elements: {buckets: [[3, 3, 1]]}
  fields: {textLength: {buckets: [[4, 4, 1]]}}
  values: {textLength: {buckets: [[4, 4, 1]]}}
- template: "l:{n}"
  type: list
  share: 0.25
  keyLength: {buckets: [[5, 5, 1]]}
  ttl: {share: 0.5, millis: {buckets: [[1000, 1000, 1]]}}
  elements: {buckets: [[10, 10, 1], [1500, 1500, 1]]}
  values: {integerKeys: 1.0, integerLength: {buckets: [[4, 4, 1]]}}
- template: "x:{n}"
  type: stream
  share: 0.25
  keyLength: {buckets: [[5, 5, 1]]}
  elements: {buckets: [[2, 3, 1]]}
  entryFields: {buckets: [[2, 2, 1]]}
  fields: {textLength: {buckets: [[3, 3, 1]]}}
  values: {textLength: {buckets: [[3, 3, 1]]}}
"#;

    #[test]
    fn a_scale_past_its_limit_is_refused_naming_the_limit() {
        let Err(err) = ProfileWorkload::new(profile(MIXED), 1e7, 1.0, 42) else {
            panic!("1e7 is refused");
        };
        assert!(
            err.contains("scale is 10000000") && err.contains("at most 1000000"),
            "{err}"
        );
        // A profile of 10,000 keys at 1e6 would be 1e10 keys: refused with the keys' limit.
        let mut big = profile(MIXED);
        big.source.keys = 10_000;
        let Err(err) = ProfileWorkload::new(big, 1e6, 1.0, 42) else {
            panic!("1e10 keys are refused");
        };
        assert!(
            err.contains("at most 2000000000") && err.contains("scale is at most 200000"),
            "{err}"
        );
    }

    #[test]
    fn the_commands_counted_before_the_load_are_the_commands_it_sends() {
        let workload = ProfileWorkload::new(profile(MIXED), 2.0, 1.0, 42).unwrap();
        assert_eq!(workload.keys, 80);
        let mut encoder = workload.encoder();
        let mut out = CommandBuffer::default();
        for _ in 0..workload.commands {
            encoder.encode_next(&mut out);
        }
        // The last command ends the last key.
        assert_eq!(encoder.k, workload.keys - 1);
        let last = encoder.current.as_ref().unwrap();
        assert_eq!(last.sent, last.commands);
        let text = String::from_utf8_lossy(out.as_bytes());
        let ttls = text.matches("PEXPIRE").count() + text.matches("\r\nPX\r\n").count();
        assert_eq!(ttls as u64, workload.ttl_keys);
        // Shares of 0.5 and 0.3 of 20 keys each: exactly 10 + 6 + 10.
        assert_eq!(workload.ttl_keys, 26);
    }

    #[test]
    fn the_same_seed_is_the_same_data_and_another_seed_is_not() {
        let encode = |seed| {
            let workload = ProfileWorkload::new(profile(MIXED), 1.0, 1.0, seed).unwrap();
            let mut encoder = workload.encoder();
            let mut out = CommandBuffer::default();
            for _ in 0..workload.commands {
                encoder.encode_next(&mut out);
            }
            out.as_bytes().to_vec()
        };
        assert_eq!(encode(1), encode(1));
        assert_ne!(encode(1), encode(2));
    }

    /// The key names a load writes, in order, from RESP text (each command's second bulk).
    fn keys_written(workload: &ProfileWorkload) -> Vec<(String, String)> {
        let mut encoder = workload.encoder();
        (0..workload.commands)
            .map(|_| {
                let mut out = CommandBuffer::default();
                encoder.encode_next(&mut out);
                let text = String::from_utf8_lossy(out.as_bytes()).to_string();
                let parts: Vec<&str> = text.split("\r\n").collect();
                (parts[2].to_string(), parts[4].to_string())
            })
            .collect()
    }

    #[test]
    fn each_key_names_the_keys_the_load_writes_with_their_types_elements_and_ttls() {
        let workload = ProfileWorkload::new(profile(MIXED), 2.0, 1.0, 42).unwrap();
        let mut encoder = workload.encoder();
        // Per key, from the load's commands: its command, elements and whether it got a TTL.
        let mut written = std::collections::BTreeMap::<String, (String, u64, bool)>::new();
        for _ in 0..workload.commands {
            let mut out = CommandBuffer::default();
            encoder.encode_next(&mut out);
            let text = String::from_utf8_lossy(out.as_bytes()).to_string();
            let parts: Vec<&str> = text.split("\r\n").collect();
            let arguments: u64 = parts[0][1..].parse().unwrap();
            let key = written.entry(parts[4].to_string()).or_default();
            match parts[2] {
                "PEXPIRE" => key.2 = true,
                command => {
                    key.0 = command.to_string();
                    key.1 += match command {
                        "HSET" | "ZADD" => (arguments - 2) / 2,
                        "RPUSH" | "SADD" => arguments - 2,
                        _ => 1,
                    };
                    key.2 |= command == "SET" && arguments == 5;
                }
            }
        }
        let mut drawn = std::collections::BTreeMap::new();
        let mut numbers = Vec::new();
        workload
            .encoder()
            .each_key(|key| {
                let command = match key.key_type {
                    KeyType::String => "SET",
                    KeyType::Hash => "HSET",
                    KeyType::List => "RPUSH",
                    KeyType::Set => "SADD",
                    KeyType::Zset => "ZADD",
                    KeyType::Stream => "XADD",
                };
                let name = String::from_utf8(key.name.to_vec()).unwrap();
                drawn.insert(name, (command.to_string(), key.elements, key.ttl));
                numbers.push(key.number);
                Ok::<_, ()>(())
            })
            .unwrap();
        assert_eq!(drawn, written);
        assert_eq!(numbers, (0..workload.keys).collect::<Vec<_>>());
    }

    #[test]
    fn keys_load_type_by_type_and_keep_their_numbers_and_data() {
        // The profile's order interleaves the types: the stream group comes first, the
        // strings last.
        let groups: Vec<&str> = MIXED.split("\n- ").collect();
        let reordered = format!(
            "- {}\n- {}\n- {}\n- {}",
            groups[3].trim_end(),
            groups[1].trim_end(),
            groups[2].trim_end(),
            groups[0].trim_start_matches("- ").trim_end()
        );
        let workload = ProfileWorkload::new(profile(&reordered), 1.0, 1.0, 7).unwrap();
        assert_eq!(workload.load_order(), vec![3, 1, 2, 0]);
        let segments = workload.type_segments();
        let types: Vec<(KeyType, u64)> = segments.iter().map(|s| (s.key_type, s.keys)).collect();
        assert_eq!(
            types,
            vec![
                (KeyType::String, 10),
                (KeyType::Hash, 10),
                (KeyType::List, 10),
                (KeyType::Stream, 10)
            ]
        );
        assert_eq!(segments.last().unwrap().commands_end, workload.commands);
        let written = keys_written(&workload);
        // Each type's commands end where its segment says, and the next type's begin.
        let mut at = 0usize;
        for (segment, command) in segments.iter().zip(["SET", "HSET", "RPUSH", "XADD"]) {
            let end = segment.commands_end as usize;
            assert!(
                written[at..end]
                    .iter()
                    .all(|(name, _)| name == command || name == "PEXPIRE"),
                "{command}: {:?}",
                &written[at..end]
            );
            at = end;
        }
        // A group's names are numbered from 0 whatever its place (the strings are group 3,
        // keys 30 to 39): as short as the source's own, densely numbered, names.
        let strings: std::collections::BTreeSet<u64> = written[..10]
            .iter()
            .map(|(_, key)| key.trim_start_matches("s:").parse().unwrap())
            .collect();
        assert_eq!(strings, (0..10).collect());
    }

    #[test]
    fn names_need_no_more_digits_than_a_densely_numbered_source_and_shared_templates_take_turns() {
        // 1,000 strings named s:0 to s:999 behind 2,000 other keys, and a string group and a
        // hash group that share one template, as the profiler writes them.
        let yaml = r#"- template: "o:{n}"
  type: string
  share: 0.4
  keyLength: {buckets: [[6, 6, 1]]}
  values: {textLength: {buckets: [[4, 4, 1]]}}
- template: "s:{n}"
  type: string
  share: 0.2
  keyLength: {buckets: [[3, 3, 10], [4, 4, 90], [5, 5, 900]]}
  values: {textLength: {buckets: [[4, 4, 1]]}}
- template: "u:{n}"
  type: string
  share: 0.2
  keyLength: {buckets: [[5, 5, 1]]}
  values: {textLength: {buckets: [[4, 4, 1]]}}
- template: "u:{n}"
  type: hash
  share: 0.2
  keyLength: {buckets: [[5, 5, 1]]}
  elements: {buckets: [[1, 1, 1]]}
  fields: {textLength: {buckets: [[4, 4, 1]]}}
  values: {textLength: {buckets: [[4, 4, 1]]}}"#;
        let workload = ProfileWorkload::new(profile(yaml), 125.0, 1.0, 3).unwrap();
        let mut lengths = std::collections::BTreeMap::<usize, u64>::new();
        let mut shared = std::collections::BTreeSet::new();
        workload
            .encoder()
            .each_key::<()>(|key| {
                let name = String::from_utf8(key.name.to_vec()).unwrap();
                if name.starts_with("s:") {
                    *lengths.entry(name.len()).or_default() += 1;
                }
                if name.starts_with("u:") {
                    assert!(shared.insert(name.clone()), "{name} named twice");
                }
                Ok(())
            })
            .unwrap();
        // The source's lengths exactly: s:0-s:9, s:10-s:99, s:100-s:999.
        assert_eq!(lengths, [(3, 10), (4, 90), (5, 900)].into_iter().collect());
        assert_eq!(shared.len(), 2000);
        assert!(shared.iter().all(|name| name.len() <= 6), "{shared:?}");
    }

    #[test]
    fn integers_are_spread_evenly_over_a_keys_elements() {
        let stratum = Stratum::new([0.37, 0.5, 0.5]).of(0, 10);
        let integers = (0..10).filter(|j| stratum.of(*j, 10).place(0.3).0).count();
        assert_eq!(integers, 3);
        assert_eq!(stratum.with_integers(0.3, 10), 3);
    }
}
