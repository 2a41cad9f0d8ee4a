//! A profile's rebuild as commands, one at a time (the client's memory stays flat at any
//! scale): the keys group by group in the workload's load order (type by type, so that
//! used_memory can be read between the types), each key's name and elements drawn from its
//! own generator (`profile_workload`'s `KeyShape`), so the same seed writes the same bytes on
//! every engine whatever the order.

use std::sync::Arc;

use crate::client::connection::resp::CommandBuffer;
use crate::client::workloads::draws::KeyGenerator;
use crate::profile::model::{KeyType, Profile, ValueShape};
use crate::profile::templates::KeyTemplate;

use super::profile_objects::{ObjectFields, nth_held};
use super::profile_shape::{
    ELEMENTS_PER_COMMAND, KeyShape, KeySpread, REBUILD_TTL_MILLIS, Stratum, chance, group_stratum,
    key_generator,
};

/// The key being written: its shape, its generator, and how far it got.
pub(super) struct CurrentKey {
    shape: KeyShape,
    /// Its place among its group's keys.
    rank: u64,
    rng: KeyGenerator,
    pub(super) commands: u64,
    pub(super) sent: u64,
    elements_sent: u64,
}

/// Encodes a profile's commands in order.
pub struct ProfileEncoder {
    profile: Arc<Profile>,
    templates: Vec<KeyTemplate>,
    /// Per group, how its keys' names are numbered: key `rank` of the group is named with
    /// `rank * stride + offset` (see [`name_numbers`]).
    name_numbers: Vec<(u64, u64)>,
    /// Per group, how its keys' fields, values and scores differ in mean length.
    spreads: Vec<[Option<KeySpread>; 3]>,
    /// Per group, its object fields when its hashes are objects.
    objects: Vec<Option<ObjectFields>>,
    group_keys: Vec<u64>,
    /// The number of each group's first key: key numbers follow the profile's order of
    /// groups, whatever the load order, so a key's name and data do not depend on it.
    first_keys: Vec<u64>,
    /// The groups in the order they are loaded.
    load_order: Vec<usize>,
    element_scale: f64,
    seed: u64,
    /// Where the load stands in `load_order`.
    position: usize,
    /// The group being loaded (`load_order[position]`).
    group: usize,
    left_in_group: u64,
    /// The number of the key being written.
    pub(super) k: u64,
    pub(super) current: Option<CurrentKey>,
    key: Vec<u8>,
    element: Vec<u8>,
}

const TEXT_FILL: &[u8] = b"abcdefghijklmnopqrstuvwxyz";
const TEXT_ALPHABET: &[u8] = b"ghijklmnopqrstuvwxyz";

/// Field `place.0` of `place.1` and its value, as a hash or a stream entry has them.
fn field_and_value(
    fields: &ValueShape,
    values: &ValueShape,
    key: &KeyShape,
    (index, count): (u64, u64),
    rng: &mut KeyGenerator,
    buffer: &mut Vec<u8>,
    out: &mut CommandBuffer,
) {
    let field_place = key.strata[0].of(index, count);
    element(
        fields,
        key.integer_fields,
        Some(index),
        field_place,
        rng,
        buffer,
    );
    out.bulk(buffer);
    let value_place = key.strata[1].of(index, count);
    element(values, key.integer_values, None, value_place, rng, buffer);
    out.bulk(buffer);
}

/// The share of integers among a key's elements: all, in a key of integers.
fn integer_share(shape: &ValueShape, all_integer: bool) -> f64 {
    if all_integer {
        1.0
    } else {
        shape.integer_share
    }
}

/// An element of `length` bytes; `unique` makes it distinct from every other element of the
/// key given another `unique` (fields, set and sorted-set members).
fn element(
    shape: &ValueShape,
    all_integer: bool,
    unique: Option<u64>,
    stratum: Stratum,
    rng: &mut KeyGenerator,
    out: &mut Vec<u8>,
) {
    out.clear();
    let (integer, quantile) = stratum.place(integer_share(shape, all_integer));
    match (integer, &shape.integer_length, &shape.text_length) {
        (true, Some(lengths), _) | (false, Some(lengths), None) => {
            let length = lengths.quantile(quantile).clamp(1, 19) as usize;
            match unique {
                // "1" and the number, zero-padded: distinct numbers, no leading zero.
                Some(j) => {
                    out.push(b'1');
                    let digits = j.to_string();
                    let width = length.saturating_sub(1).max(1);
                    out.extend(std::iter::repeat_n(
                        b'0',
                        width.saturating_sub(digits.len()),
                    ));
                    out.extend_from_slice(digits.as_bytes());
                }
                None => {
                    let negative = length > 1 && chance(shape.negative_share, rng);
                    if negative {
                        out.push(b'-');
                    }
                    push_number(length - usize::from(negative), rng, out);
                }
            }
        }
        (_, _, Some(lengths)) => {
            let length = lengths.quantile(quantile) as usize;
            match unique {
                // The number in letters g..z, padded with g: no digit, so never an integer.
                Some(mut j) => {
                    let start = out.len();
                    loop {
                        out.push(TEXT_ALPHABET[(j % 20) as usize]);
                        j /= 20;
                        if j == 0 {
                            break;
                        }
                    }
                    while out.len() - start < length {
                        out.push(b'g');
                    }
                    out[start..].reverse();
                }
                None => {
                    let offset = rng.below(26) as usize;
                    out.extend((0..length).map(|i| TEXT_FILL[(offset + i) % 26]));
                }
            }
        }
        (_, None, None) => out.push(b'x'),
    }
}

/// A positive number of `digits` digits, without a leading zero.
fn push_number(digits: usize, rng: &mut KeyGenerator, out: &mut Vec<u8>) {
    out.push(b'1' + rng.below(9) as u8);
    for _ in 1..digits {
        out.push(b'0' + rng.below(10) as u8);
    }
}

/// A score of the length drawn: an integer, or a decimal fraction the server prints back the
/// same way (no trailing zero, at most 17 significant digits).
fn score(
    shape: &ValueShape,
    all_integer: bool,
    stratum: Stratum,
    rng: &mut KeyGenerator,
    out: &mut Vec<u8>,
) {
    out.clear();
    let (integer, quantile) = stratum.place(integer_share(shape, all_integer));
    if integer || shape.text_length.is_none() {
        let length = shape
            .integer_length
            .as_ref()
            .map_or(1, |d| d.quantile(quantile))
            .clamp(1, 15) as usize;
        let negative = length > 1 && chance(shape.negative_share, rng);
        if negative {
            out.push(b'-');
        }
        push_number(length - usize::from(negative), rng, out);
    } else {
        let length = shape
            .text_length
            .as_ref()
            .map_or(3, |d| d.quantile(quantile))
            .clamp(3, 17) as usize;
        out.extend_from_slice(b"0.");
        for _ in 2..length - 1 {
            out.push(b'0' + rng.below(10) as u8);
        }
        out.push(b'1' + rng.below(9) as u8);
    }
}

/// How each group numbers its keys' names: the groups that share a template (a string and a
/// hash both named `user:{n}`) take turns in one numbering, `(stride, offset)` = (how many
/// share it, the group's place among them); a template of its own numbers its keys from 0.
/// So the numbers in a group's names need as many digits as a source numbered densely from 0
/// would, where numbering every key of the profile in one sequence gave a group of 150,000
/// keys behind 40,001 others six digits for 90,000 of its names where the source's had
/// 50,000, and pushed 40,000 names into a larger allocation (strings +3.9% by MEMORY USAGE on
/// Valkey 9.1, 2026-12-05).
fn name_numbers(profile: &Profile) -> Vec<(u64, u64)> {
    let groups = &profile.groups;
    groups
        .iter()
        .enumerate()
        .map(|(i, group)| {
            let same = |other: &&crate::profile::model::KeyGroup| other.template == group.template;
            let stride = groups.iter().filter(same).count() as u64;
            let offset = groups[..i].iter().filter(same).count() as u64;
            (stride, offset)
        })
        .collect()
}

impl ProfileEncoder {
    /// The encoder of a profile's keys: `group_keys` keys per group, numbered from
    /// `first_keys`, loaded in `load_order` (`ProfileWorkload` decides them).
    pub fn new(
        profile: Arc<Profile>,
        group_keys: Vec<u64>,
        first_keys: Vec<u64>,
        load_order: Vec<usize>,
        element_scale: f64,
        seed: u64,
    ) -> Self {
        let templates = profile
            .groups
            .iter()
            .map(|g| KeyTemplate::parse(&g.template).expect("a checked profile's templates parse"))
            .collect();
        let name_numbers = name_numbers(&profile);
        let spreads = profile
            .groups
            .iter()
            .map(|g| {
                let of = |shape: Option<&ValueShape>| shape.and_then(KeySpread::of);
                [
                    of(g.fields.as_ref()),
                    of(Some(&g.values)),
                    of(g.scores.as_ref()),
                ]
            })
            .collect();
        let objects = profile
            .groups
            .iter()
            .enumerate()
            .map(|(i, g)| ObjectFields::of(g, element_scale, seed, i))
            .collect();
        let group = load_order.first().copied().unwrap_or(0);
        Self {
            profile,
            templates,
            name_numbers,
            spreads,
            objects,
            left_in_group: group_keys.get(group).copied().unwrap_or(0),
            group_keys,
            first_keys,
            load_order,
            element_scale,
            seed,
            position: 0,
            group,
            k: 0,
            current: None,
            key: Vec::with_capacity(128),
            element: Vec::with_capacity(128),
        }
    }

    /// Appends the next command.
    pub fn encode_next(&mut self, out: &mut CommandBuffer) {
        if self.current.as_ref().is_none_or(|c| c.sent == c.commands) {
            self.start_next_key();
        }
        let group = &self.profile.groups[self.group];
        let current = self.current.as_mut().expect("a key under way");
        let key = &self.key;
        let element_buffer = &mut self.element;
        let ttl_command = current.shape.ttl && current.sent == current.commands - 1;
        if ttl_command && group.key_type != KeyType::String {
            out.array(3)
                .bulk(b"PEXPIRE")
                .bulk(key)
                .bulk_decimal(REBUILD_TTL_MILLIS);
            current.sent += 1;
            return;
        }
        let rng = &mut current.rng;
        match group.key_type {
            KeyType::String => {
                element(
                    &group.values,
                    current.shape.integer_values,
                    None,
                    current.shape.strata[1].of(0, 1),
                    rng,
                    element_buffer,
                );
                if current.shape.ttl {
                    out.array(5)
                        .bulk(b"SET")
                        .bulk(key)
                        .bulk(element_buffer)
                        .bulk(b"PX")
                        .bulk_decimal(REBUILD_TTL_MILLIS);
                } else {
                    out.array(3).bulk(b"SET").bulk(key).bulk(element_buffer);
                }
            }
            KeyType::Stream => {
                let fields = current.shape.entry_fields;
                out.array(3 + 2 * fields as usize)
                    .bulk(b"XADD")
                    .bulk(key)
                    .bulk(b"*");
                let field_shape = group.fields.clone().unwrap_or_default();
                for f in 0..fields {
                    let place = (f, fields);
                    let (fields, values) = (&field_shape, &group.values);
                    field_and_value(
                        fields,
                        values,
                        &current.shape,
                        place,
                        rng,
                        element_buffer,
                        out,
                    );
                }
                current.elements_sent += 1;
            }
            key_type => {
                let n = (current.shape.elements - current.elements_sent).min(ELEMENTS_PER_COMMAND);
                let (name, per_element): (&[u8], usize) = match key_type {
                    KeyType::Hash => (b"HSET", 2),
                    KeyType::List => (b"RPUSH", 1),
                    KeyType::Set => (b"SADD", 1),
                    _ => (b"ZADD", 2),
                };
                out.array(2 + per_element * n as usize).bulk(name).bulk(key);
                let elements = current.shape.elements;
                for i in 0..n {
                    let j = current.elements_sent + i;
                    match key_type {
                        KeyType::Hash if current.shape.object_fields != 0 => {
                            let objects = self.objects[self.group]
                                .as_ref()
                                .expect("a key with object fields is of an object group");
                            let f = nth_held(current.shape.object_fields, j);
                            out.bulk(objects.name(f));
                            let (values, place) = objects.value(f, current.rank);
                            element(values, false, None, place, rng, element_buffer);
                        }
                        KeyType::Hash => {
                            let fields = group.fields.as_ref().expect("a checked hash has fields");
                            let place = (j, elements);
                            let values = &group.values;
                            field_and_value(
                                fields,
                                values,
                                &current.shape,
                                place,
                                rng,
                                element_buffer,
                                out,
                            );
                            continue;
                        }
                        KeyType::List => {
                            element(
                                &group.values,
                                current.shape.integer_values,
                                None,
                                current.shape.strata[1].of(j, elements),
                                rng,
                                element_buffer,
                            );
                        }
                        KeyType::Set => {
                            element(
                                &group.values,
                                current.shape.integer_values,
                                Some(j),
                                current.shape.strata[1].of(j, elements),
                                rng,
                                element_buffer,
                            );
                        }
                        _ => {
                            let scores = group.scores.as_ref().expect("a checked zset has scores");
                            score(
                                scores,
                                current.shape.integer_scores,
                                current.shape.strata[2].of(j, elements),
                                rng,
                                element_buffer,
                            );
                            out.bulk(element_buffer);
                            element(
                                &group.values,
                                current.shape.integer_values,
                                Some(j),
                                current.shape.strata[1].of(j, elements),
                                rng,
                                element_buffer,
                            );
                        }
                    }
                    out.bulk(element_buffer);
                }
                current.elements_sent += n;
            }
        }
        current.sent += 1;
    }

    fn start_next_key(&mut self) {
        if self.current.is_some() {
            self.left_in_group -= 1;
        }
        while self.left_in_group == 0 {
            self.position += 1;
            self.group = self.load_order[self.position];
            self.left_in_group = self.group_keys[self.group];
        }
        let rank = self.group_keys[self.group] - self.left_in_group;
        let mut key = std::mem::take(&mut self.key);
        let (k, shape, rng) = self.draw_key(self.group, rank, &mut key);
        self.key = key;
        self.k = k;
        self.current = Some(CurrentKey {
            commands: shape.commands(self.profile.groups[self.group].key_type),
            shape,
            rank,
            rng,
            sent: 0,
            elements_sent: 0,
        });
    }

    /// Key `rank` of `group`: its number, its shape and the generator its elements are drawn
    /// from next; its name written into `name`.
    fn draw_key(
        &self,
        group: usize,
        rank: u64,
        name: &mut Vec<u8>,
    ) -> (u64, KeyShape, KeyGenerator) {
        let count = self.group_keys[group];
        let k = self.first_keys[group] + rank;
        let mut rng = key_generator(self.seed, k);
        let place = group_stratum(self.seed, group).of(rank, count);
        let mut shape = KeyShape::draw(
            &self.profile.groups[group],
            self.element_scale,
            place,
            &mut rng,
        );
        shape.spread(&self.spreads[group], place);
        if let Some(objects) = &self.objects[group] {
            shape.object_fields = objects.held(shape.elements);
            shape.elements = u64::from(shape.object_fields.count_ones());
        }
        name.clear();
        let (stride, offset) = self.name_numbers[group];
        self.templates[group].render(rank * stride + offset, shape.key_length, name);
        (k, shape, rng)
    }

    /// Every key the rebuild writes, by number (the profile's order of groups, not the load's),
    /// drawn as the load draws it but without its elements: what a churn names and rewrites
    /// (`client::phases::churn`) without reading the engine's keys back.
    pub fn each_key<E>(
        &self,
        mut visit: impl FnMut(RebuiltKey<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut name = Vec::with_capacity(128);
        for (group, count) in self.group_keys.iter().enumerate() {
            let key_type = self.profile.groups[group].key_type;
            for rank in 0..*count {
                let (number, shape, _) = self.draw_key(group, rank, &mut name);
                visit(RebuiltKey {
                    number,
                    key_type,
                    name: &name,
                    elements: shape.elements,
                    ttl: shape.ttl,
                })?;
            }
        }
        Ok(())
    }
}

/// One key of a rebuild as the load writes it ([`ProfileEncoder::each_key`]).
pub struct RebuiltKey<'a> {
    /// Its number, counted over the profile's groups in order (its name numbers it within its
    /// group: `ProfileEncoder`'s `name_numbers`).
    pub number: u64,
    pub key_type: KeyType,
    pub name: &'a [u8],
    /// A hash's fields, a list's, set's or sorted set's elements, a stream's entries; 1 for a
    /// string.
    pub elements: u64,
    /// Whether the load gave it a TTL (of `REBUILD_TTL_MILLIS`).
    pub ttl: bool,
}
