//! `membench profile --rdb FILE`: the profile of a database of an RDB file, no server needed.
//! The file is read once, key by key ([`crate::rdb`]); every key is read in full, so counts
//! are exact and every key is "sampled". Each key's elements are kept as the live profiler
//! reads them, so that the same data gives the same profile from a server and from its dump:
//! at most [`elements_per_key`] of a key (the keys' count taken from the file's RESIZEDB
//! hint where it has one), the first ones of a list, a uniform draw of a hash's, set's or
//! sorted set's (as HRANDFIELD, SRANDMEMBER, ZRANDMEMBER draw), the first
//! [`STREAM_ENTRIES`] entries of a stream; the groups, big keys and distributions are then
//! made by the same functions as the live profile's. Keys that expired before the profile are
//! left out and counted, as the engine loading the file would drop them. Memory: the key
//! names and each key's bounded elements, as the live profiler holds them.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::client::draws::KeyGenerator;
use crate::profile::model::{KeyType, PROFILE_FORMAT, Profile, ProfileSource};
use crate::rdb::{Checksum, KeyKind, Part, Scalar};

use super::error::ProfileError;
use super::groups::{self, PlannedGroup};
use super::key_sample::{
    Element, KeyObservation, MOST_ELEMENTS_PER_KEY, STREAM_ENTRIES, elements_per_key,
};
use super::walk::WalkedKey;
use super::{ProfileOutcome, ProfileProgress, describe_other_types, selection};

/// How a file is profiled.
#[derive(Clone, Debug)]
pub struct RdbProfileOptions {
    /// The database profiled.
    pub db: u32,
    /// Read the elements of each key as a profile of at most this many keys does.
    pub sample_keys: u64,
}

fn element(scalar: Scalar) -> Element {
    Element {
        length: u32::try_from(scalar.length).unwrap_or(u32::MAX),
        integer: scalar.integer,
        negative: scalar.negative,
    }
}

/// One key's elements as they arrive, kept as the live profiler would read them.
struct KeyElements {
    key_type: KeyType,
    limit: usize,
    /// Elements seen (pairs for hashes and sorted sets).
    seen: u64,
    /// A pair's first half, waiting for its second.
    pending: Option<Element>,
    /// Kept pairs (a hash's field and value, a member and its score) or single elements.
    kept: Vec<(Element, Option<Element>)>,
    entry_fields: Vec<u64>,
    stream_fields: Vec<Element>,
    stream_values: Vec<Element>,
}

impl KeyElements {
    fn new(key_type: KeyType, limit: usize) -> Self {
        Self {
            key_type,
            limit: if key_type == KeyType::String {
                1
            } else {
                limit
            },
            seen: 0,
            pending: None,
            kept: Vec::new(),
            entry_fields: Vec::new(),
            stream_fields: Vec::new(),
            stream_values: Vec::new(),
        }
    }

    fn keep(&mut self, item: (Element, Option<Element>), generator: &mut KeyGenerator) {
        self.seen += 1;
        match self.key_type {
            // LRANGE 0 n-1: the first ones.
            KeyType::List | KeyType::String => {
                if self.kept.len() < self.limit {
                    self.kept.push(item);
                }
            }
            // A uniform draw without repetition (reservoir sampling).
            _ => {
                if self.kept.len() < self.limit {
                    self.kept.push(item);
                } else {
                    let j = generator.below(self.seen) as usize;
                    if j < self.limit {
                        self.kept[j] = item;
                    }
                }
            }
        }
    }

    fn take(&mut self, part: Part, scalar: Scalar, generator: &mut KeyGenerator) {
        let e = element(scalar);
        match (self.key_type, part) {
            (KeyType::Stream, Part::Entry { fields }) => {
                self.entry_fields.push(fields);
            }
            (KeyType::Stream, Part::Field) => {
                if self.entry_fields.len() <= STREAM_ENTRIES {
                    self.stream_fields.push(e);
                }
            }
            (KeyType::Stream, _) => {
                if self.entry_fields.len() <= STREAM_ENTRIES {
                    self.stream_values.push(e);
                }
            }
            (KeyType::Hash, Part::Field) | (KeyType::Zset, Part::Value) => self.pending = Some(e),
            (KeyType::Hash, _) | (KeyType::Zset, _) => {
                let first = self.pending.take().unwrap_or(e);
                self.keep((first, Some(e)), generator);
            }
            _ => self.keep((e, None), generator),
        }
    }

    fn observe(mut self, observation: &mut KeyObservation, generator: &mut KeyGenerator) {
        // In a random order, so that any prefix of what was kept is a uniform draw.
        if !matches!(
            self.key_type,
            KeyType::List | KeyType::String | KeyType::Stream
        ) {
            for i in (1..self.kept.len()).rev() {
                let j = generator.below(i as u64 + 1) as usize;
                self.kept.swap(i, j);
            }
        }
        match self.key_type {
            KeyType::Stream => {
                self.entry_fields.truncate(STREAM_ENTRIES);
                observation.entry_fields = self.entry_fields;
                observation.fields = self.stream_fields;
                observation.values = self.stream_values;
            }
            KeyType::Hash => {
                for (field, value) in self.kept {
                    observation.fields.push(field);
                    observation.values.extend(value);
                }
            }
            KeyType::Zset => {
                for (member, score) in self.kept {
                    observation.values.push(member);
                    observation.scores.extend(score);
                }
            }
            _ => observation.values = self.kept.into_iter().map(|(e, _)| e).collect(),
        }
    }
}

/// Keeps the first `n` elements of a key read (a uniform draw, as they were shuffled).
fn keep_elements(observation: &mut KeyObservation, n: usize) {
    if observation.key_type == Some(KeyType::Stream) {
        return;
    }
    observation.fields.truncate(n);
    observation.values.truncate(n);
    observation.scores.truncate(n);
}

fn key_type_of(kind: &KeyKind) -> Option<KeyType> {
    Some(match kind {
        KeyKind::String => KeyType::String,
        KeyKind::List => KeyType::List,
        KeyKind::Set => KeyType::Set,
        KeyKind::Zset => KeyType::Zset,
        KeyKind::Hash => KeyType::Hash,
        KeyKind::Stream => KeyType::Stream,
        KeyKind::Module(_) => return None,
    })
}

/// The profile of database `options.db` of the RDB file at `path`.
pub fn profile_rdb_file(
    path: &Path,
    options: &RdbProfileOptions,
    progress: &mut dyn FnMut(ProfileProgress),
) -> Result<ProfileOutcome, ProfileError> {
    let started = Instant::now();
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let mut reader = crate::rdb::open(path)?;
    let mut walked: Vec<WalkedKey> = Vec::new();
    let mut observations: Vec<KeyObservation> = Vec::new();
    let mut other_dbs: BTreeMap<u64, u64> = BTreeMap::new();
    let mut other_types: BTreeMap<String, u64> = BTreeMap::new();
    let mut expired = 0u64;
    let mut generator = KeyGenerator::new(0x0005_eed0_f4db);
    let db = u64::from(options.db);
    loop {
        let hint = reader.facts().resize_hints.get(&db).map(|h| h.0);
        // Until the file's RESIZEDB hint says how many keys the database holds, as many as a
        // big key's read.
        let hinted = hint.map_or(MOST_ELEMENTS_PER_KEY, |keys| {
            elements_per_key(keys.min(options.sample_keys))
        });
        let limit = MOST_ELEMENTS_PER_KEY;
        let mut elements: Option<KeyElements> = None;
        let key = reader.next_key(&mut |kind, part, scalar| {
            let Some(key_type) = key_type_of(kind) else {
                return;
            };
            elements
                .get_or_insert_with(|| KeyElements::new(key_type, limit))
                .take(part, scalar, &mut generator);
        });
        let Some(key) = key? else { break };
        if key.db != db {
            *other_dbs.entry(key.db).or_default() += 1;
            continue;
        }
        let Some(key_type) = key_type_of(&key.kind) else {
            let KeyKind::Module(name) = &key.kind else {
                unreachable!("every other kind has a type")
            };
            *other_types.entry(format!("module {name}")).or_default() += 1;
            continue;
        };
        let ttl_millis = match key.expire_at_ms {
            Some(at) if at <= now_ms => {
                expired += 1;
                continue;
            }
            Some(at) => Some((at - now_ms) as u64),
            None => None,
        };
        let mut observation = KeyObservation {
            key_type: Some(key_type),
            key_length: key.name.len() as u64,
            ttl_millis,
            encoding: None,
            elements: key_type.has_elements().then_some(key.elements),
            ..KeyObservation::default()
        };
        if let Some(elements) = elements {
            elements.observe(&mut observation, &mut generator);
        }
        // A key too small to be big needs no more than a profile of the file's keys reads.
        if key.elements < selection::BIG_KEY_LEAST {
            keep_elements(&mut observation, hinted);
        }
        walked.push(WalkedKey {
            name: key.name,
            key_type,
            size: Some(key.elements),
        });
        observations.push(observation);
        if walked.len().is_multiple_of(1000) {
            progress(ProfileProgress {
                stage: "reading",
                sampled: walked.len() as u64,
                target: hint.unwrap_or(0),
            });
        }
    }
    let facts = reader.facts().clone();
    let file = path.display().to_string();
    if walked.is_empty() {
        let others: Vec<String> = other_dbs
            .iter()
            .map(|(db, n)| format!("db{db} holds {n} keys (--db {db})"))
            .collect();
        let others = if others.is_empty() {
            String::new()
        } else {
            format!("; {}", others.join(", "))
        };
        return Err(ProfileError::EmptyFile {
            file,
            db: options.db,
            others,
        });
    }

    let mut plan = groups::plan_by_template(&walked);
    groups::split_big_keys(&mut plan, &walked);
    // Every key but the big ones read as deeply as a profile of this many keys reads a key.
    let per_key = elements_per_key((walked.len() as u64).min(options.sample_keys));
    for (_, _, big_key, keys) in &plan {
        if !big_key {
            for &i in keys {
                keep_elements(&mut observations[i], per_key);
            }
        }
    }
    let planned: Vec<PlannedGroup<'_>> = plan
        .iter()
        .map(|(template, key_type, big_key, keys)| PlannedGroup {
            template: template.clone(),
            key_type: *key_type,
            big_key: *big_key,
            keys: keys.iter().map(|&i| &walked[i]).collect(),
            sampled: keys.iter().map(|&i| &observations[i]).collect(),
        })
        .collect();
    let groups = groups::groups_of(&planned);

    let (engine, version) = if let Some(v) = facts.aux.get("valkey-ver") {
        ("valkey", v.clone())
    } else if let Some(v) = facts.aux.get("df-ver") {
        ("dragonfly", v.trim_start_matches("df-v").to_string())
    } else {
        (
            "redis",
            facts.aux.get("redis-ver").cloned().unwrap_or_default(),
        )
    };
    let mut notes = vec![format!(
        "read from the RDB file {file} ({}{}, {}): every key of db {} read ({} keys), no server; element counts are exact; {} big key(s) (at least {:.0}% of the keyspace's elements or string bytes) kept as their own groups",
        reader.magic().as_str(),
        reader.version(),
        match facts.checksum {
            Some(Checksum::Verified(_)) => "checksum verified",
            Some(Checksum::Disabled) => "saved without a checksum",
            _ => "a version without a checksum",
        },
        options.db,
        walked.len(),
        plan.iter().filter(|g| g.2).count(),
        selection::BIG_KEY_SHARE * 100.0
    )];
    notes.push(format!(
        "at most {} elements kept per key ({MOST_ELEMENTS_PER_KEY} of a big key), as a live profile of as many keys reads them (the first of a list, a uniform draw of a hash, set or sorted set, the first {STREAM_ENTRIES} entries of a stream)",
        per_key
    ));
    notes.push(
        "encodings are not recorded from a file: the engine that loads it chooses them".into(),
    );
    if expired > 0 {
        notes.push(format!(
            "{expired} key(s) had expired before this profile was taken and are left out, as an engine loading the file drops them"
        ));
    }
    if !other_dbs.is_empty() {
        let list: Vec<String> = other_dbs
            .iter()
            .map(|(db, n)| format!("db{db}: {n} keys"))
            .collect();
        notes.push(format!(
            "other databases of the file are not in this profile ({}; --db chooses one)",
            list.join(", ")
        ));
    }
    if !other_types.is_empty() {
        notes.push(format!(
            "keys of other types were left out{}: membench profiles strings, hashes, lists, sets, sorted sets and streams",
            describe_other_types(&other_types)
        ));
    }
    if !facts.module_aux.is_empty() || facts.function_libraries > 0 {
        notes.push(format!(
            "the file also holds {} function librar(ies) and module records of {:?}, not profiled",
            facts.function_libraries,
            facts.module_aux.keys().collect::<Vec<_>>()
        ));
    }
    notes.push(format!("read in {:.1} s", started.elapsed().as_secs_f64()));
    let source = ProfileSource {
        engine: Some(engine.into()),
        version: Some(version),
        db: options.db,
        keys: walked.len() as u64,
        sampled_keys: observations.len() as u64,
        complete: true,
        stopped_by: None,
        used_memory: facts.aux.get("used-mem").and_then(|m| m.parse().ok()),
        keysizes: BTreeMap::new(),
        primaries: 0,
    };
    Ok(ProfileOutcome {
        profile: Profile {
            format: PROFILE_FORMAT,
            source,
            groups,
            notes,
        },
        error: None,
    })
}
