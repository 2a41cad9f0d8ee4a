//! What a profile holds: the shape of a keyspace as counts, shares and length distributions,
//! never a key name or value, and a field name only as an object's field at least five keys
//! have. It is what `membench profile` prints and what the
//! `profile` workload reads back (from a file, a spec inline, or a ConfigMap), so it derives
//! the schema the CRD embeds, and `check` is the one place its rules live.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The format this build writes and reads (`format:` in a profile).
pub const PROFILE_FORMAT: u32 = 1;

/// How far the shares of a profile's groups may sum from 1 (they are rounded when printed).
pub const SHARE_TOLERANCE: f64 = 0.001;

/// A keyspace's shape.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Profile {
    /// The profile format (1).
    pub format: u32,
    /// Where the profile was taken and how completely.
    pub source: ProfileSource,
    /// The keys by key-name template and type; their shares add up to 1.
    #[schemars(length(min = 1, max = 10_000))]
    pub groups: Vec<KeyGroup>,
    /// What the profiler could not read (a command the server refused) and anything else a
    /// reader of the figures should know.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// Where a profile was taken, and how much of the keyspace it saw.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProfileSource {
    /// The engine (`redis`, `valkey`, `dragonfly`), when INFO said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    /// The engine's version, when INFO said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The database profiled.
    #[serde(default)]
    pub db: u32,
    /// `DBSIZE` of that database: how many keys a rebuild stores (times its scale).
    #[schemars(range(min = 1))]
    pub keys: u64,
    /// How many keys were sampled.
    #[serde(default)]
    pub sampled_keys: u64,
    /// Whether the sample ended as asked (`--sample-keys` reached or the whole keyspace
    /// scanned); false when the time bound or the server ended it first (`stoppedBy` says).
    #[serde(default = "complete_by_default")]
    pub complete: bool,
    /// Why sampling ended early.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<String>,
    /// `used_memory` of the source when it was profiled (INFO memory), to compare a rebuild
    /// with; absent when INFO was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_memory: Option<u64>,
    /// `INFO KEYSIZES` of the source where the server has it (Redis 8): its log2 histograms of
    /// key sizes by type, as the server printed them, beside the sampled figures.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub keysizes: BTreeMap<String, String>,
    /// How many primaries of a cluster the profile covers (`membench profile --cluster`),
    /// their figures added up; 0 (left out) for one server.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub primaries: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

fn complete_by_default() -> bool {
    true
}

/// The data types a profile knows.
#[derive(
    Serialize,
    Deserialize,
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum KeyType {
    String,
    Hash,
    List,
    Set,
    Zset,
    Stream,
}

impl KeyType {
    /// The type as `TYPE` answers it.
    pub fn as_str(self) -> &'static str {
        match self {
            KeyType::String => "string",
            KeyType::Hash => "hash",
            KeyType::List => "list",
            KeyType::Set => "set",
            KeyType::Zset => "zset",
            KeyType::Stream => "stream",
        }
    }

    pub fn from_type_reply(reply: &str) -> Option<Self> {
        Some(match reply {
            "string" => KeyType::String,
            "hash" => KeyType::Hash,
            "list" => KeyType::List,
            "set" => KeyType::Set,
            "zset" => KeyType::Zset,
            "stream" => KeyType::Stream,
            _ => return None,
        })
    }

    /// Whether a key of this type holds elements (all but strings).
    pub fn has_elements(self) -> bool {
        self != KeyType::String
    }
}

/// The keys of one key-name template and one type.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeyGroup {
    /// The key names' template: literal parts shared by the group, and `{n}` (a digit run),
    /// `{id}` (a hex or mixed id), `{s}` (any other text) for the parts that vary. `{{` and
    /// `}}` are literal braces.
    #[schemars(length(min = 1, max = 1024))]
    pub template: String,
    /// The keys' type, as `TYPE` answers: string, hash, list, set, zset or stream.
    #[serde(rename = "type")]
    pub key_type: KeyType,
    /// The group's share of the keys (0 to 1).
    #[schemars(range(min = 0.0, max = 1.0))]
    pub share: f64,
    /// How many of the group's keys were read in full (their TTL, encoding and elements'
    /// lengths): all of a small group, at least a few hundred of a large one.
    #[serde(default)]
    pub sampled_keys: u64,
    /// How many keys the group holds, counted exactly by the walk of the whole keyspace (0 in
    /// a profile written before the walk counted them: the share was then scaled from the
    /// sample).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub keys: u64,
    /// One key that holds a large share of the keyspace's elements or string bytes (as
    /// `redis-cli --bigkeys` finds them), kept as its own group with its exact size.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub big_key: bool,
    /// `sampledKeys` over `keys`: the part of the group that was read in full.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub sampled_share: Option<f64>,
    /// The error the sample implies for the group's bytes per key (names and elements'
    /// lengths): the 95% bound of its relative error, 0 when every key and element was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0))]
    pub size_error: Option<f64>,
    /// Key name lengths in bytes.
    pub key_length: Distribution,
    /// The share of keys with a TTL, and their remaining TTLs in milliseconds when sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<TtlShape>,
    /// `OBJECT ENCODING` answers and their shares, where the server allowed it: a check of a
    /// rebuild, whose encodings follow from the sizes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub encodings: BTreeMap<String, f64>,
    /// Elements per key (HLEN, LLEN, SCARD, ZCARD, XLEN); absent for strings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elements: Option<Distribution>,
    /// Fields per stream entry; streams only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry_fields: Option<Distribution>,
    /// Hash and stream field names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields: Option<ValueShape>,
    /// The values: a string's value, hash and stream values, list items, set and sorted-set
    /// members.
    pub values: ValueShape,
    /// Sorted-set scores as the server prints them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scores: Option<ValueShape>,
    /// Hashes that are objects (users, sessions, jobs): every field of every key read has a
    /// name at least five keys share, so each name is kept with its own values. A rebuild then
    /// writes these fields, each with its own value lengths, in place of `fields` and `values`
    /// drawn at random. Absent when the keys' field names differ (a hash used as a map), when a
    /// key was read in part, or in a profile written before it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub object_fields: Vec<ObjectField>,
}

/// The most fields an object hash is profiled by name ([`KeyGroup::object_fields`]).
pub const MAX_OBJECT_FIELDS: usize = 64;

/// One field of an object hash, by name.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectField {
    /// The field's name, as a template of key names is written: literal text (at least five
    /// keys have the field), `{{` and `}}` for braces.
    #[schemars(length(min = 1, max = 1024))]
    pub name: String,
    /// The share of the group's keys that hold the field (0 to 1).
    #[schemars(range(min = 0.0, max = 1.0))]
    pub share: f64,
    /// Its values: `integerKeys` is the share of them that are integers.
    pub values: ValueShape,
}

/// The share of keys with a TTL and the TTLs' distribution.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TtlShape {
    /// The share of the group's keys that have a TTL (0 to 1).
    #[schemars(range(min = 0.0, max = 1.0))]
    pub share: f64,
    /// Remaining TTL in milliseconds (`PTTL`) of the keys that have one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub millis: Option<Distribution>,
}

/// Lengths of strings that are integers and of those that are not: an integer is stored as a
/// number (a string of up to 20 digits that fits in 64 bits, without leading zeros), anything
/// else as bytes.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ValueShape {
    /// The share of keys whose every sampled element is an integer (a set of them is an
    /// intset).
    #[serde(default)]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub integer_keys: f64,
    /// Among the other keys, the share of elements that are integers.
    #[serde(default)]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub integer_share: f64,
    /// Among the integers, the share that are negative (a sign takes more room in a compact
    /// encoding than the digit it replaces).
    #[serde(default)]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub negative_share: f64,
    /// Lengths in bytes of the elements that are not integers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_length: Option<Distribution>,
    /// Lengths in digits (with a sign) of the integers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integer_length: Option<Distribution>,
    /// How the keys differ from one another: each sampled key's mean length of its elements
    /// that are not integers, in thousandths of a byte (a key whose values average 19.625
    /// bytes counts as 19625); a key with more elements than were read counts at the keys'
    /// mean, since a part of it says little of it. A key of few elements is one allocation
    /// (a listpack), rounded up to the allocator's size class, so how its elements' lengths
    /// add up matters beside their distribution. Hashes, lists, sets and sorted sets only;
    /// absent in a profile written before it, when every rebuilt key gets the same mix of
    /// lengths.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_mean_length: Option<Distribution>,
}

/// A distribution of non-negative whole numbers as buckets: exact values when few distinct
/// ones were seen, else ranges holding equal numbers of observations.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Distribution {
    /// `[min, max, count]` per bucket, in increasing order; min equals max for an exact value.
    #[schemars(length(min = 1, max = 4096))]
    #[serde(serialize_with = "buckets_on_one_line_each")]
    pub buckets: Vec<[u64; 3]>,
}

/// Each `[min, max, count]` as one YAML line (JSON is unchanged).
fn buckets_on_one_line_each<S: serde::Serializer>(
    buckets: &[[u64; 3]],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_seq(buckets.iter().map(serde_saphyr::FlowSeq))
}

/// At most this many buckets per distribution (the exact values up to this many).
pub const MAX_BUCKETS: usize = 64;

impl Distribution {
    /// From observed values and how often each was seen.
    pub fn from_counts(counts: &BTreeMap<u64, u64>) -> Self {
        if counts.len() <= MAX_BUCKETS {
            return Self {
                buckets: counts.iter().map(|(v, c)| [*v, *v, *c]).collect(),
            };
        }
        let total: u64 = counts.values().sum();
        let per_bucket = total.div_ceil(MAX_BUCKETS as u64);
        let mut buckets = Vec::new();
        let mut current: Option<[u64; 3]> = None;
        for (&value, &count) in counts {
            let bucket = current.get_or_insert([value, value, 0]);
            bucket[1] = value;
            bucket[2] += count;
            if bucket[2] >= per_bucket {
                buckets.extend(current.take());
            }
        }
        buckets.extend(current);
        Self { buckets }
    }

    pub fn observations(&self) -> u64 {
        self.buckets.iter().map(|b| b[2]).sum()
    }

    /// The mean, taking each range's middle.
    pub fn mean(&self) -> f64 {
        let total = self.observations();
        if total == 0 {
            return 0.0;
        }
        let sum: f64 = self
            .buckets
            .iter()
            .map(|[min, max, count]| (*min as f64 + *max as f64) / 2.0 * *count as f64)
            .sum();
        sum / total as f64
    }

    pub fn max(&self) -> u64 {
        self.buckets.last().map_or(0, |b| b[1])
    }

    /// A value drawn from the distribution with `draw_below(bound)`, a uniform draw from
    /// 0..bound: first an observation (so a bucket by its count), then a value in its range.
    pub fn draw(&self, mut draw_below: impl FnMut(u64) -> u64) -> u64 {
        let total = self.observations();
        if total == 0 {
            return 0;
        }
        let mut pick = draw_below(total);
        for [min, max, count] in &self.buckets {
            if pick < *count {
                return min + draw_below(max - min + 1);
            }
            pick -= count;
        }
        self.max()
    }

    /// The value at quantile `u` (0 to 1): the bucket holding that share of the observations,
    /// and the place in its range as far in as `u` is into the bucket's count.
    pub fn quantile(&self, u: f64) -> u64 {
        let total = self.observations();
        if total == 0 {
            return 0;
        }
        let mut target = u.clamp(0.0, 1.0) * total as f64;
        for [min, max, count] in &self.buckets {
            let count = *count as f64;
            if target < count {
                let width = (max - min + 1) as f64;
                return (min + (target / count * width) as u64).min(*max);
            }
            target -= count;
        }
        self.max()
    }

    fn check(&self, at: &str) -> Result<(), String> {
        if self.buckets.is_empty() {
            return Err(format!("{at}: a distribution needs at least one bucket"));
        }
        let mut previous_max = None;
        for (i, [min, max, _]) in self.buckets.iter().enumerate() {
            if min > max {
                return Err(format!(
                    "{at}.buckets[{i}]: min {min} is above max {max} (a bucket is [min, max, count])"
                ));
            }
            if previous_max.is_some_and(|p| p > *min) {
                return Err(format!(
                    "{at}.buckets[{i}]: buckets must come in increasing order without overlap"
                ));
            }
            previous_max = Some(*max);
        }
        if self.observations() == 0 {
            return Err(format!("{at}: every bucket's count is 0"));
        }
        Ok(())
    }
}

fn check_share(at: &str, share: f64) -> Result<(), String> {
    if !(0.0..=1.0).contains(&share) {
        return Err(format!("{at}: a share is between 0 and 1, not {share}"));
    }
    Ok(())
}

impl ValueShape {
    fn check(&self, at: &str) -> Result<(), String> {
        check_share(&format!("{at}.integerKeys"), self.integer_keys)?;
        check_share(&format!("{at}.integerShare"), self.integer_share)?;
        check_share(&format!("{at}.negativeShare"), self.negative_share)?;
        let wants_text = self.integer_keys < 1.0 && self.integer_share < 1.0;
        let wants_integers = self.integer_keys > 0.0 || self.integer_share > 0.0;
        match (&self.text_length, wants_text) {
            (Some(d), _) => d.check(&format!("{at}.textLength"))?,
            (None, true) => {
                return Err(format!(
                    "{at}.textLength is missing, but not every element is an integer"
                ));
            }
            (None, false) => {}
        }
        match (&self.integer_length, wants_integers) {
            (Some(d), _) => {
                d.check(&format!("{at}.integerLength"))?;
                if d.buckets.iter().any(|b| b[0] == 0 || b[1] > 20) {
                    return Err(format!(
                        "{at}.integerLength: an integer has 1 to 20 characters"
                    ));
                }
            }
            (None, true) => {
                return Err(format!(
                    "{at}.integerLength is missing, but some elements are integers"
                ));
            }
            (None, false) => {}
        }
        if let Some(d) = &self.key_mean_length {
            d.check(&format!("{at}.keyMeanLength"))?;
        }
        Ok(())
    }
}

/// A group's object fields: a hash's only, at most [`MAX_OBJECT_FIELDS`], each name once.
fn check_object_fields(at: &str, group: &KeyGroup) -> Result<(), String> {
    if group.object_fields.is_empty() {
        return Ok(());
    }
    if group.key_type != KeyType::Hash {
        return Err(format!(
            "{at}.objectFields: only a hash has fields by name, not a {}",
            group.key_type.as_str()
        ));
    }
    if group.object_fields.len() > MAX_OBJECT_FIELDS {
        return Err(format!(
            "{at}.objectFields: {} fields, at most {MAX_OBJECT_FIELDS} are kept by name",
            group.object_fields.len()
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for (j, field) in group.object_fields.iter().enumerate() {
        let at = format!("{at}.objectFields[{j}]");
        let name = crate::profile::templates::literal_of(&field.name)
            .map_err(|e| format!("{at}.name: {e}"))?;
        if !seen.insert(name) {
            return Err(format!(
                "{at}.name: {:?} comes twice; each field is kept once",
                field.name
            ));
        }
        check_share(&format!("{at}.share"), field.share)?;
        field.values.check(&format!("{at}.values"))?;
    }
    Ok(())
}

impl Profile {
    /// Checks what a rebuild relies on; the message names the field and what is wrong.
    pub fn check(&self) -> Result<(), String> {
        if self.format != PROFILE_FORMAT {
            return Err(format!(
                "format is {}, but this membench reads profile format {PROFILE_FORMAT}",
                self.format
            ));
        }
        if self.source.keys == 0 {
            return Err("source.keys is 0: a profile describes at least one key".into());
        }
        if self.groups.is_empty() {
            return Err("groups is empty: a profile needs at least one group of keys".into());
        }
        let mut sum = 0.0;
        for (i, group) in self.groups.iter().enumerate() {
            let at = format!("groups[{i}]");
            check_share(&format!("{at}.share"), group.share)?;
            sum += group.share;
            crate::profile::templates::KeyTemplate::parse(&group.template)
                .map_err(|e| format!("{at}.template: {e}"))?;
            group.key_length.check(&format!("{at}.keyLength"))?;
            if let Some(ttl) = &group.ttl {
                check_share(&format!("{at}.ttl.share"), ttl.share)?;
                match &ttl.millis {
                    Some(d) => d.check(&format!("{at}.ttl.millis"))?,
                    None if ttl.share > 0.0 => {
                        return Err(format!(
                            "{at}.ttl.millis is missing, but ttl.share is above 0"
                        ));
                    }
                    None => {}
                }
            }
            for (name, share) in &group.encodings {
                check_share(&format!("{at}.encodings.{name}"), *share)?;
            }
            if let Some(share) = group.sampled_share {
                check_share(&format!("{at}.sampledShare"), share)?;
            }
            if let Some(error) = group.size_error
                && !(error.is_finite() && error >= 0.0)
            {
                return Err(format!(
                    "{at}.sizeError: the bound of a relative error is a number of 0 or more, not {error}"
                ));
            }
            let ty = group.key_type;
            match (&group.elements, ty.has_elements()) {
                (Some(d), true) => d.check(&format!("{at}.elements"))?,
                (None, true) => {
                    return Err(format!(
                        "{at}.elements is missing: a {} has elements",
                        ty.as_str()
                    ));
                }
                (Some(_), false) => {
                    return Err(format!("{at}.elements: a string has no elements"));
                }
                (None, false) => {}
            }
            let needs_fields = matches!(ty, KeyType::Hash | KeyType::Stream);
            match (&group.fields, needs_fields) {
                (Some(f), true) => f.check(&format!("{at}.fields"))?,
                (None, true) => {
                    return Err(format!(
                        "{at}.fields is missing: a {} has fields",
                        ty.as_str()
                    ));
                }
                (Some(_), false) => {
                    return Err(format!("{at}.fields: a {} has no fields", ty.as_str()));
                }
                (None, false) => {}
            }
            group.values.check(&format!("{at}.values"))?;
            match (&group.scores, ty == KeyType::Zset) {
                (Some(s), true) => s.check(&format!("{at}.scores"))?,
                (None, true) => return Err(format!("{at}.scores is missing: a zset has scores")),
                (Some(_), false) => {
                    return Err(format!("{at}.scores: only a zset has scores"));
                }
                (None, false) => {}
            }
            check_object_fields(&at, group)?;
            match (&group.entry_fields, ty == KeyType::Stream) {
                (Some(d), true) => d.check(&format!("{at}.entryFields"))?,
                (None, true) => {
                    return Err(format!(
                        "{at}.entryFields is missing: a stream's entries have fields"
                    ));
                }
                (Some(_), false) => {
                    return Err(format!("{at}.entryFields: only a stream has entries"));
                }
                (None, false) => {}
            }
        }
        if (sum - 1.0).abs() > SHARE_TOLERANCE {
            return Err(format!(
                "the groups' shares add up to {sum:.4}, not 1: each share is the group's part of the keys"
            ));
        }
        Ok(())
    }

    /// Reads a profile from YAML or JSON (JSON is YAML) and checks it.
    pub fn parse(text: &str) -> Result<Self, String> {
        let profile: Profile = serde_saphyr::from_str(text).map_err(|e| {
            format!("the profile does not parse: {e} (it is what `membench profile` prints)")
        })?;
        profile.check()?;
        Ok(profile)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn few_distinct_values_stay_exact_and_many_become_equal_count_ranges() {
        let exact: BTreeMap<u64, u64> = [(3, 2), (7, 1)].into();
        assert_eq!(
            Distribution::from_counts(&exact).buckets,
            vec![[3, 3, 2], [7, 7, 1]]
        );
        let many: BTreeMap<u64, u64> = (0..1000).map(|v| (v, 1)).collect();
        let d = Distribution::from_counts(&many);
        assert!(d.buckets.len() <= MAX_BUCKETS, "{}", d.buckets.len());
        assert_eq!(d.observations(), 1000);
        assert!((d.mean() - 499.5).abs() < 1.0, "{}", d.mean());
    }

    #[test]
    fn a_draw_lands_inside_a_bucket() {
        let d = Distribution {
            buckets: vec![[10, 20, 1], [100, 100, 1]],
        };
        let mut state = 1u64;
        for _ in 0..100 {
            let v = d.draw(|bound| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
                (state >> 33) % bound
            });
            assert!((10..=20).contains(&v) || v == 100, "{v}");
        }
    }

    fn string_group(share: f64) -> KeyGroup {
        KeyGroup {
            template: "flight:{n}".into(),
            key_type: KeyType::String,
            share,
            sampled_keys: 1,
            keys: 0,
            big_key: false,
            sampled_share: None,
            size_error: None,
            key_length: Distribution {
                buckets: vec![[10, 10, 1]],
            },
            ttl: None,
            encodings: BTreeMap::new(),
            elements: None,
            entry_fields: None,
            fields: None,
            values: ValueShape {
                text_length: Some(Distribution {
                    buckets: vec![[5, 5, 1]],
                }),
                ..ValueShape::default()
            },
            scores: None,
            object_fields: vec![],
        }
    }

    fn profile(groups: Vec<KeyGroup>) -> Profile {
        Profile {
            format: PROFILE_FORMAT,
            source: ProfileSource {
                keys: 10,
                ..ProfileSource::default()
            },
            groups,
            notes: vec![],
        }
    }

    #[test]
    fn shares_that_do_not_add_up_are_refused_with_their_sum() {
        let err = profile(vec![string_group(0.5), string_group(0.3)])
            .check()
            .unwrap_err();
        assert!(err.contains("add up to 0.8000"), "{err}");
        profile(vec![string_group(0.5), string_group(0.5)])
            .check()
            .unwrap();
    }

    #[test]
    fn an_unknown_type_does_not_parse_and_the_message_says_so() {
        let mut text =
            serde_json::to_string(&profile(vec![string_group(1.0)])).expect("serializes");
        text = text.replace("\"string\"", "\"bitmap\"");
        let err = Profile::parse(&text).unwrap_err();
        assert!(
            err.contains("does not parse") && err.contains("bitmap"),
            "{err}"
        );
    }

    #[test]
    fn a_hash_without_fields_is_refused_naming_the_field() {
        let mut group = string_group(1.0);
        group.key_type = KeyType::Hash;
        group.elements = Some(Distribution {
            buckets: vec![[2, 2, 1]],
        });
        let err = profile(vec![group]).check().unwrap_err();
        assert!(err.contains("groups[0].fields is missing"), "{err}");
    }

    #[test]
    fn object_fields_out_of_place_or_named_twice_are_refused_naming_the_field() {
        let field = |name: &str| ObjectField {
            name: name.into(),
            share: 1.0,
            values: string_group(1.0).values,
        };
        let mut group = string_group(1.0);
        group.object_fields = vec![field("name")];
        let err = profile(vec![group.clone()]).check().unwrap_err();
        assert!(err.contains("groups[0].objectFields: only a hash"), "{err}");
        group.key_type = KeyType::Hash;
        group.elements = Some(Distribution {
            buckets: vec![[2, 2, 1]],
        });
        group.fields = Some(group.values.clone());
        group.object_fields = vec![field("name"), field("age"), field("name")];
        let err = profile(vec![group.clone()]).check().unwrap_err();
        assert!(
            err.contains("groups[0].objectFields[2].name") && err.contains("twice"),
            "{err}"
        );
        group.object_fields = vec![field("user:{n}")];
        let err = profile(vec![group.clone()]).check().unwrap_err();
        assert!(err.contains("objectFields[0].name"), "{err}");
        group.object_fields = vec![field("name"), field("{{id}}")];
        profile(vec![group]).check().unwrap();
    }

    #[test]
    fn a_sampled_share_or_size_error_out_of_range_is_refused_naming_the_field() {
        for (share, error, field) in [
            (Some(1.5), None, "groups[0].sampledShare"),
            (Some(-0.1), None, "groups[0].sampledShare"),
            (None, Some(-0.01), "groups[0].sizeError"),
            (None, Some(f64::INFINITY), "groups[0].sizeError"),
        ] {
            let mut group = string_group(1.0);
            group.sampled_share = share;
            group.size_error = error;
            let err = profile(vec![group]).check().unwrap_err();
            assert!(err.contains(field), "{err}");
        }
        let mut group = string_group(1.0);
        group.sampled_share = Some(0.25);
        group.size_error = Some(0.0);
        profile(vec![group]).check().unwrap();
    }
}
