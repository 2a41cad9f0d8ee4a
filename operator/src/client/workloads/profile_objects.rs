//! An object hash's rebuild (a group with `objectFields`: users, sessions, jobs): each key
//! writes the fields the profile names, each value drawn from its own field's lengths. A key
//! has as many fields as the group's element counts give it (drawn as for any hash, so a
//! rebuild's counts are the same with objects or without), and they are the fields most keys
//! have: an object's optional fields are the rarer ones. Whether key `rank`'s value of a field
//! is an integer and where its length stands step through the group's keys (a Weyl sequence,
//! `frac(offset + rank × step)`), every field and draw at a step of its own (square roots of
//! distinct primes, independent over the rationals): over the keys each field keeps its
//! integers and its lengths, and no field follows another or the key's place, as the
//! source's fields did not.

use crate::profile::model::{KeyGroup, ValueShape};
use crate::profile::templates::literal_of;

use super::profile_shape::{Stratum, key_generator};

/// One field as the rebuild draws it.
struct FieldDraw {
    name: Vec<u8>,
    share: f64,
    /// The field's values, its integers' share as `integerShare` (what [`Stratum::place`]
    /// spreads), as one element a key.
    values: ValueShape,
    /// Steps and offsets of its two draws: whether an integer, the length.
    steps: [f64; 2],
    offsets: [f64; 2],
}

/// An object hash group's fields, ready to draw.
pub struct ObjectFields {
    fields: Vec<FieldDraw>,
    /// The fields, the most held first (the profile's order among equals).
    by_share: Vec<usize>,
}

/// The first `n` primes.
fn primes(n: usize) -> Vec<u64> {
    let mut found: Vec<u64> = Vec::with_capacity(n);
    let mut candidate = 2u64;
    while found.len() < n {
        if found
            .iter()
            .take_while(|p| *p * *p <= candidate)
            .all(|p| !candidate.is_multiple_of(*p))
        {
            found.push(candidate);
        }
        candidate += 1;
    }
    found
}

fn unit(bits: u64) -> f64 {
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

impl ObjectFields {
    /// Whether a group's keys are rebuilt as objects: it has object fields, and its keys keep
    /// their element counts (`element_scale` 1: a schema's fields are not scaled).
    pub fn apply_to(group: &KeyGroup, element_scale: f64) -> bool {
        !group.object_fields.is_empty() && element_scale == 1.0
    }

    /// The group's fields to draw, where [`Self::apply_to`] says so; `seed` and `group_index`
    /// give the offsets.
    pub fn of(group: &KeyGroup, element_scale: f64, seed: u64, group_index: usize) -> Option<Self> {
        if !Self::apply_to(group, element_scale) {
            return None;
        }
        let primes = primes(2 * group.object_fields.len());
        let mut rng = key_generator(seed ^ 0x6f62_6a65_6374, group_index as u64);
        let fields: Vec<FieldDraw> = group
            .object_fields
            .iter()
            .enumerate()
            .map(|(f, field)| {
                let step = |i: usize| (primes[2 * f + i] as f64).sqrt().fract();
                let mut values = field.values.clone();
                values.integer_share = values.integer_keys;
                values.integer_keys = 0.0;
                FieldDraw {
                    name: literal_of(&field.name).expect("a checked profile's field names parse"),
                    share: field.share,
                    values,
                    steps: [step(0), step(1)],
                    offsets: [unit(rng.next_u64()), unit(rng.next_u64())],
                }
            })
            .collect();
        let mut by_share: Vec<usize> = (0..fields.len()).collect();
        by_share.sort_by(|a, b| fields[*b].share.total_cmp(&fields[*a].share));
        Some(Self { fields, by_share })
    }

    fn draw(&self, field: usize, which: usize, rank: u64) -> f64 {
        let f = &self.fields[field];
        (f.offsets[which] + rank as f64 * f.steps[which]).fract()
    }

    /// The fields a key of `count` elements holds, as bits (field `f` is bit `f`): the
    /// `count` most held, at least one and at most every field.
    pub fn held(&self, count: u64) -> u64 {
        let count = (count as usize).clamp(1, self.by_share.len());
        self.by_share[..count]
            .iter()
            .fold(0, |held, f| held | 1 << f)
    }

    /// Field `f`'s name.
    pub fn name(&self, f: usize) -> &[u8] {
        &self.fields[f].name
    }

    /// Field `f`'s values, and where key `rank`'s value stands among them (as `element` of
    /// `profile_encoder` takes it: an integer when its draw falls in the integers' share, its
    /// length at the quantile drawn).
    pub fn value(&self, f: usize, rank: u64) -> (&ValueShape, Stratum) {
        let length = self.draw(f, 1, rank);
        (
            &self.fields[f].values,
            Stratum::new([self.draw(f, 0, rank), length, length]),
        )
    }
}

/// The `j`-th field (from 0) of those `held` names: the place of its `j`-th set bit.
pub fn nth_held(held: u64, j: u64) -> usize {
    let mut rest = held;
    for _ in 0..j {
        rest &= rest - 1;
    }
    rest.trailing_zeros() as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::model::{Distribution, ObjectField};

    fn field(name: &str, share: f64, lengths: Vec<[u64; 3]>, integers: f64) -> ObjectField {
        ObjectField {
            name: name.into(),
            share,
            values: ValueShape {
                integer_keys: integers,
                text_length: (integers < 1.0).then(|| Distribution {
                    buckets: lengths.clone(),
                }),
                integer_length: (integers > 0.0).then(|| Distribution {
                    buckets: vec![[13, 13, 1]],
                }),
                ..ValueShape::default()
            },
        }
    }

    #[test]
    fn keys_hold_the_fields_most_keys_have_and_each_keeps_its_integers_and_lengths() {
        let one = |n| Distribution {
            buckets: vec![[n, n, 1]],
        };
        let group = KeyGroup {
            template: "job:{n}".into(),
            key_type: crate::profile::model::KeyType::Hash,
            share: 1.0,
            sampled_keys: 1,
            keys: 1,
            big_key: false,
            sampled_share: None,
            size_error: None,
            key_length: one(6),
            ttl: None,
            encodings: Default::default(),
            // A quarter of the keys have the third field.
            elements: Some(Distribution {
                buckets: vec![[2, 2, 3], [3, 3, 1]],
            }),
            entry_fields: None,
            fields: Some(field("f", 1.0, vec![[5, 5, 1]], 0.0).values),
            values: field("v", 1.0, vec![[5, 5, 1]], 0.0).values,
            scores: None,
            object_fields: vec![
                field("data", 1.0, vec![[100, 100, 1], [400, 400, 1]], 0.0),
                field("failedReason", 0.25, vec![[10, 10, 1]], 0.0),
                field("progress", 1.0, vec![[3, 3, 1]], 0.5),
            ],
        };
        let objects = ObjectFields::of(&group, 1.0, 7, 0).unwrap();
        assert!(ObjectFields::of(&group, 2.0, 7, 0).is_none());
        // The fields most keys have first: a key of 2 elements has data and progress.
        assert_eq!(objects.held(2), 0b101);
        assert_eq!(objects.held(3), 0b111);
        assert_eq!(objects.held(0), 0b001, "a hash is not empty");
        assert_eq!(objects.held(70), 0b111, "a key has at most every field");
        let keys = 10_000u64;
        let (mut integers, mut long) = (0, 0);
        let mut both = 0;
        for rank in 0..keys {
            let (shape, place) = objects.value(2, rank);
            let (integer, _) = place.place(shape.integer_share);
            integers += u64::from(integer);
            let (shape, place) = objects.value(0, rank);
            let (_, quantile) = place.place(shape.integer_share);
            let is_long = shape.text_length.as_ref().unwrap().quantile(quantile) == 400;
            long += u64::from(is_long);
            both += u64::from(is_long && integer);
        }
        let near = |n: u64, share: f64| (n as f64 / keys as f64 - share).abs() < 0.01;
        assert!(near(integers, 0.5), "{integers} integers of {keys}");
        assert!(near(long, 0.5), "{long} long values of {keys}");
        // Two fields' draws are independent: a long data and an integer progress together in
        // a quarter of the keys.
        assert!(near(both, 0.25), "{both} of {keys}");
        assert_eq!(nth_held(0b1011, 0), 0);
        assert_eq!(nth_held(0b1011, 2), 3);
    }
}
