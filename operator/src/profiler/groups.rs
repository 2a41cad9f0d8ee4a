//! The sampled keys summed up by template and type: counts become shares, lengths become
//! distributions. Nothing of a name or value survives this step but its length and whether it
//! was an integer.

use std::collections::BTreeMap;

use crate::profile::model::{Distribution, KeyGroup, KeyType, TtlShape, ValueShape};

use super::key_sample::{Element, KeyObservation};

fn count(map: &mut BTreeMap<u64, u64>, value: u64) {
    *map.entry(value).or_default() += 1;
}

fn distribution(counts: &BTreeMap<u64, u64>) -> Option<Distribution> {
    (!counts.is_empty()).then(|| Distribution::from_counts(counts))
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
}

impl ValueTally {
    fn observe(&mut self, elements: &[Element]) {
        if elements.is_empty() {
            return;
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
        self.fields.observe(&key.fields);
        self.values.observe(&key.values);
        self.scores.observe(&key.scores);
    }

    fn group(&self, template: String, key_type: KeyType, sampled: u64) -> KeyGroup {
        KeyGroup {
            template,
            key_type,
            share: self.keys as f64 / sampled as f64,
            sampled_keys: self.keys,
            key_length: Distribution::from_counts(&self.key_lengths),
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
                .then(|| distribution(&self.elements).unwrap_or_default()),
            entry_fields: (key_type == KeyType::Stream)
                .then(|| distribution(&self.entry_fields).unwrap_or_default()),
            fields: matches!(key_type, KeyType::Hash | KeyType::Stream)
                .then(|| self.fields.shape()),
            values: self.values.shape(),
            scores: (key_type == KeyType::Zset).then(|| self.scores.shape()),
        }
    }
}

/// The groups of the sampled keys, the largest first. `templates[i]` is the template of
/// `keys[i]`.
pub fn groups_of(keys: &[KeyObservation], templates: &[String]) -> Vec<KeyGroup> {
    let mut tallies: BTreeMap<(&str, KeyType), GroupTally> = BTreeMap::new();
    for (key, template) in keys.iter().zip(templates) {
        let Some(key_type) = key.key_type else {
            continue;
        };
        tallies
            .entry((template.as_str(), key_type))
            .or_default()
            .observe(key);
    }
    let sampled: u64 = tallies.values().map(|t| t.keys).sum();
    let mut groups: Vec<KeyGroup> = tallies
        .into_iter()
        .map(|((template, key_type), tally)| tally.group(template.to_string(), key_type, sampled))
        .collect();
    groups.sort_by_key(|g| std::cmp::Reverse(g.sampled_keys));
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

    #[test]
    fn a_set_of_integers_counts_as_an_integer_key_and_mixed_ones_by_element() {
        let keys = [set_key(&["1", "22"]), set_key(&["abc", "7"])];
        let templates = vec!["ids:{n}".to_string(); 2];
        let groups = groups_of(&keys, &templates);
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
    }
}
