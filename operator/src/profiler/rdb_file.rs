//! `membench profile --rdb FILE`: the profile of a database of an RDB file, no server needed.
//! The file is read twice, key by key ([`crate::rdb`]), in memory bounded by the profile's
//! groups, never by its keys. The first pass ([`survey`]) learns what no single key says: the
//! keyspace's name templates (which name parts keys share), how many keys there are, and which
//! keys are big. The second reads every key in full, so counts are exact and every key is
//! "sampled", and tallies each into its group as it passes ([`GroupTally`]). Each key's
//! elements are kept as the live profiler reads them, so that the same data gives the same
//! profile from a server and from its dump: at most [`elements_per_key`] of a key (the keys'
//! count taken from the file's RESIZEDB hint where it has one), the first ones of a list, a
//! uniform draw of a hash's, set's or sorted set's (as HRANDFIELD, SRANDMEMBER, ZRANDMEMBER
//! draw), the first [`STREAM_ENTRIES`] entries of a stream; the groups, big keys and
//! distributions follow the live profile's rules. Keys that expired before the profile are
//! left out and counted, as the engine loading the file would drop them.
//!
//! Why two passes: a key's template depends on every other name (a part is literal when all
//! keys of its shape share it, or when at least five keys start with it), and a key is big by
//! its share of the whole keyspace; holding every name until the end cost about 660 B a key
//! (2,540 MiB peak on a 1.08 GB dump). Reading the file again costs time, not memory.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::client::workloads::draws::KeyGenerator;
use crate::profile::model::{KeyType, PROFILE_FORMAT, Profile, ProfileSource};
use crate::profile::templates::TemplateBuilder;
use crate::rdb::{Checksum, KeyEntry, KeyKind, Part, Scalar};

use super::error::ProfileError;
use super::groups::{self, GroupTally};
use super::key_sample::{
    Element, KeyObservation, MOST_ELEMENTS_PER_KEY, STREAM_ENTRIES, elements_per_key,
};
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

/// The longest element whose bytes the second pass holds: a hash field's name up to this long
/// can be an object's field (`profile::model::ObjectField`); a longer one stays unnamed.
pub(super) const FIELD_NAME_HELD: u64 = 1024;

/// One key's elements as they arrive, kept as the live profiler would read them.
pub(super) struct KeyElements {
    key_type: KeyType,
    limit: usize,
    /// Elements seen (pairs for hashes and sorted sets).
    seen: u64,
    /// A pair's first half, waiting for its second (and a hash field's name).
    pending: Option<(Element, Vec<u8>)>,
    /// Kept pairs (a hash's field and value, a member and its score) or single elements, with
    /// a hash field's name (empty for the other types, or a name past the reader's cap).
    kept: Vec<(Element, Option<Element>, Vec<u8>)>,
    entry_fields: Vec<u64>,
    stream_fields: Vec<Element>,
    stream_values: Vec<Element>,
}

impl KeyElements {
    pub(super) fn new(key_type: KeyType, limit: usize) -> Self {
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

    fn keep(&mut self, item: (Element, Option<Element>, Vec<u8>), generator: &mut KeyGenerator) {
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

    /// Takes one element read; `bytes` are its bytes as the reader kept them (a hash field's
    /// name is the only part looked at).
    pub(super) fn take(
        &mut self,
        part: Part,
        scalar: Scalar,
        bytes: &[u8],
        generator: &mut KeyGenerator,
    ) {
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
            (KeyType::Hash, Part::Field) => self.pending = Some((e, bytes.to_vec())),
            (KeyType::Zset, Part::Value) => self.pending = Some((e, Vec::new())),
            (KeyType::Hash, _) | (KeyType::Zset, _) => {
                let (first, name) = self.pending.take().unwrap_or((e, Vec::new()));
                self.keep((first, Some(e), name), generator);
            }
            _ => self.keep((e, None, Vec::new()), generator),
        }
    }

    pub(super) fn observe(
        mut self,
        observation: &mut KeyObservation,
        generator: &mut KeyGenerator,
    ) {
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
                for (field, value, name) in self.kept {
                    observation.fields.push(field);
                    observation.values.extend(value);
                    observation.field_names.push(name);
                }
            }
            KeyType::Zset => {
                for (member, score, _) in self.kept {
                    observation.values.push(member);
                    observation.scores.extend(score);
                }
            }
            _ => observation.values = self.kept.into_iter().map(|(e, _, _)| e).collect(),
        }
    }
}

/// Keeps the first `n` elements of a key read (a uniform draw, as they were shuffled).
pub(super) fn keep_elements(observation: &mut KeyObservation, n: usize) {
    if observation.key_type == Some(KeyType::Stream) {
        return;
    }
    observation.fields.truncate(n);
    observation.values.truncate(n);
    observation.scores.truncate(n);
    observation.field_names.truncate(n);
}

pub(super) fn key_type_of(kind: &KeyKind) -> Option<KeyType> {
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

/// Whether a key read from the file is one the profile takes.
pub(super) enum Classified {
    Profiled {
        key_type: KeyType,
        ttl_millis: Option<u64>,
    },
    OtherDb(u64),
    OtherType(String),
    Expired,
}

/// What of `entry` the profile of database `db` takes, at `now_ms`.
pub(super) fn classify(entry: &KeyEntry, db: u64, now_ms: i64) -> Classified {
    if entry.db != db {
        return Classified::OtherDb(entry.db);
    }
    let Some(key_type) = key_type_of(&entry.kind) else {
        let KeyKind::Module(name) = &entry.kind else {
            unreachable!("every other kind has a type")
        };
        return Classified::OtherType(format!("module {name}"));
    };
    let ttl_millis = match entry.expire_at_ms {
        Some(at) if at <= now_ms => return Classified::Expired,
        Some(at) => Some((at - now_ms) as u64),
        None => None,
    };
    Classified::Profiled {
        key_type,
        ttl_millis,
    }
}

/// One key of the file as the second pass reads it.
#[expect(
    clippy::large_enum_variant,
    reason = "one value a key, returned and taken apart at once"
)]
pub(super) enum Observed {
    /// A key of the database the profile takes, observed: its type, TTL and elements (as
    /// many as a profile of the file's keys reads, the big ones' all).
    Profiled {
        key: KeyEntry,
        key_type: KeyType,
        observation: KeyObservation,
    },
    /// A key of another database or type, or expired.
    Skipped,
}

/// Reads the next key of `reader` and observes it for the profile of database `db` at
/// `now_ms`; None at the end of the file.
pub(super) fn observe_next_key<R: std::io::Read>(
    reader: &mut crate::rdb::RdbReader<R>,
    db: u64,
    now_ms: i64,
    options: &RdbProfileOptions,
    generator: &mut KeyGenerator,
) -> Result<Option<Observed>, crate::rdb::RdbError> {
    let hint = reader.facts().resize_hints.get(&db).map(|h| h.0);
    // Until the file's RESIZEDB hint says how many keys the database holds, as many as a big
    // key's read.
    let hinted = hint.map_or(MOST_ELEMENTS_PER_KEY, |keys| {
        elements_per_key(keys.min(options.sample_keys))
    });
    let mut elements: Option<KeyElements> = None;
    // Every key's elements pass through the draw, those of keys left out too, so that the
    // draws are those of the file's order.
    let key = reader.next_key_with_bytes(&mut |kind, part, scalar, bytes| {
        let Some(key_type) = key_type_of(kind) else {
            return;
        };
        elements
            .get_or_insert_with(|| KeyElements::new(key_type, MOST_ELEMENTS_PER_KEY))
            .take(part, scalar, bytes, generator);
    })?;
    let Some(key) = key else { return Ok(None) };
    let Classified::Profiled {
        key_type,
        ttl_millis,
    } = classify(&key, db, now_ms)
    else {
        return Ok(Some(Observed::Skipped));
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
        elements.observe(&mut observation, generator);
    }
    // A key too small to be big needs no more than a profile of the file's keys reads.
    if key.elements < selection::BIG_KEY_LEAST {
        keep_elements(&mut observation, hinted);
    }
    Ok(Some(Observed::Profiled {
        key,
        key_type,
        observation,
    }))
}

/// What the first pass learns of the database's keys: enough to template every name and to
/// know the big keys before any key is tallied.
struct Survey {
    /// The keys profiled (of the database, of a type membench profiles, not expired).
    keys: u64,
    templates: TemplateBuilder,
    /// The big keys, by their place among the keys profiled.
    big: BTreeSet<u64>,
    other_dbs: BTreeMap<u64, u64>,
    other_types: BTreeMap<String, u64>,
    expired: u64,
}

/// The first pass: names, sizes and big keys, no element kept. A key is big by its share of
/// the whole keyspace's elements (or string bytes), known only at the end; since a running
/// total only grows, a key below the share of the total read so far (itself included) can
/// never be big, so the keys kept to decide on are few: each one held 1% of a total that then
/// grew by at least as much, so there are at most about 100 per e-fold of the total (about
/// 2,300 for a total of 10^13).
fn survey(
    path: &Path,
    db: u64,
    now_ms: i64,
    progress: &mut dyn FnMut(ProfileProgress),
) -> Result<Survey, ProfileError> {
    let mut reader = crate::rdb::open(path)?;
    let mut survey = Survey {
        keys: 0,
        templates: TemplateBuilder::default(),
        big: BTreeSet::new(),
        other_dbs: BTreeMap::new(),
        other_types: BTreeMap::new(),
        expired: 0,
    };
    // (place, whether a string, size) of each key big against the total read so far.
    let mut candidates: Vec<(u64, bool, u64)> = Vec::new();
    let (mut string_bytes, mut elements) = (0u64, 0u64);
    while let Some(entry) = reader.next_key(&mut |_, _, _| {})? {
        match classify(&entry, db, now_ms) {
            Classified::Profiled { key_type, .. } => {
                survey.templates.add(&entry.name);
                let string = key_type == KeyType::String;
                let total = if string {
                    &mut string_bytes
                } else {
                    &mut elements
                };
                *total += entry.elements;
                if selection::is_big(entry.elements, *total) {
                    candidates.push((survey.keys, string, entry.elements));
                }
                survey.keys += 1;
                if survey.keys.is_multiple_of(1000) {
                    progress(ProfileProgress {
                        stage: "surveying",
                        sampled: survey.keys,
                        target: reader.facts().resize_hints.get(&db).map_or(0, |h| h.0),
                    });
                }
            }
            Classified::OtherDb(other) => *survey.other_dbs.entry(other).or_default() += 1,
            Classified::OtherType(name) => *survey.other_types.entry(name).or_default() += 1,
            Classified::Expired => survey.expired += 1,
        }
    }
    survey.big = candidates
        .into_iter()
        .filter(|&(_, string, size)| {
            selection::is_big(size, if string { string_bytes } else { elements })
        })
        .map(|(place, _, _)| place)
        .collect();
    Ok(survey)
}

/// A big key, held until its group's other keys are known.
struct BigKey {
    observation: KeyObservation,
    key_length: u64,
    size: u64,
}

/// One template and type as the second pass fills it.
#[derive(Default)]
struct FileGroup {
    tally: GroupTally,
    big_keys: Vec<BigKey>,
}

/// The groups in the order the live profile makes them: by template and type, a big key of a
/// larger group split out after them all. A lone big key is its own group, marked; big keys
/// that are all of a group's keys stay one group, read as any key is read (`per_key`).
fn finish_groups(
    groups: BTreeMap<(String, KeyType), FileGroup>,
    per_key: usize,
) -> Vec<(String, KeyType, bool, GroupTally)> {
    let tallied = |key: &BigKey, tally: &mut GroupTally| {
        tally.count_key(key.key_length, Some(key.size));
        tally.observe(&key.observation);
    };
    let mut finished = Vec::new();
    let mut split_out = Vec::new();
    for ((template, key_type), mut group) in groups {
        let others = group.tally.all_keys();
        match (others, group.big_keys.len()) {
            (0, 1) => {
                tallied(&group.big_keys[0], &mut group.tally);
                finished.push((template, key_type, true, group.tally));
            }
            (1.., 1..) => {
                for key in &group.big_keys {
                    let mut tally = GroupTally::default();
                    tallied(key, &mut tally);
                    split_out.push((template.clone(), key_type, true, tally));
                }
                finished.push((template, key_type, false, group.tally));
            }
            _ => {
                for mut key in group.big_keys {
                    keep_elements(&mut key.observation, per_key);
                    tallied(&key, &mut group.tally);
                }
                finished.push((template, key_type, false, group.tally));
            }
        }
    }
    finished.extend(split_out);
    finished
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
    let db = u64::from(options.db);
    let survey = survey(path, db, now_ms, progress)?;
    let file = path.display().to_string();
    if survey.keys == 0 {
        let others: Vec<String> = survey
            .other_dbs
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
    // Every key but the big ones read as deeply as a profile of this many keys reads a key.
    let per_key = elements_per_key(survey.keys.min(options.sample_keys));

    let mut reader = crate::rdb::open(path)?.with_short_values(FIELD_NAME_HELD);
    let mut groups: BTreeMap<(String, KeyType), FileGroup> = BTreeMap::new();
    let mut generator = KeyGenerator::new(0x0005_eed0_f4db);
    let mut place = 0u64;
    while let Some(next) = observe_next_key(&mut reader, db, now_ms, options, &mut generator)? {
        let Observed::Profiled {
            key,
            key_type,
            mut observation,
        } = next
        else {
            continue;
        };
        let group = groups
            .entry((survey.templates.template_of(&key.name), key_type))
            .or_default();
        if survey.big.contains(&place) {
            group.big_keys.push(BigKey {
                observation,
                key_length: key.name.len() as u64,
                size: key.elements,
            });
        } else {
            keep_elements(&mut observation, per_key);
            group
                .tally
                .count_key(key.name.len() as u64, Some(key.elements));
            group.tally.observe(&observation);
        }
        place += 1;
        if place.is_multiple_of(1000) {
            progress(ProfileProgress {
                stage: "reading",
                sampled: place,
                target: survey.keys,
            });
        }
    }
    let finished = finish_groups(groups, per_key);
    let big_keys = finished.iter().filter(|g| g.2).count();
    let groups = groups::groups_of_tallies(
        finished
            .iter()
            .map(|(template, key_type, big, tally)| (template.as_str(), *key_type, *big, tally)),
    );
    let facts = reader.facts().clone();
    let Survey {
        keys,
        templates,
        other_dbs,
        other_types,
        expired,
        ..
    } = survey;

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
        keys,
        big_keys,
        selection::BIG_KEY_SHARE * 100.0
    )];
    notes.push(format!(
        "at most {} elements kept per key ({MOST_ELEMENTS_PER_KEY} of a big key), as a live profile of as many keys reads them (the first of a list, a uniform draw of a hash, set or sorted set, the first {STREAM_ENTRIES} entries of a stream)",
        per_key
    ));
    notes.push(
        "encodings are not recorded from a file: the engine that loads it chooses them".into(),
    );
    notes.extend(groups::uncounted_first_parts_note(
        templates.uncounted_first_parts(),
    ));
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
        keys,
        sampled_keys: keys,
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
