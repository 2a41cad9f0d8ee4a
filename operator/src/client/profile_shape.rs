//! A key of a profile's rebuild, drawn: its shape (length, TTL, element count, whether its
//! elements are integers, a stream's fields per entry) from the generator of the workload's
//! seed and the key's number, and the offsets that place its elements. Below both the workload
//! (`profile_workload`, which counts the commands) and the encoder (`profile_encoder`, which
//! writes them), so the two draw the same keys.

use crate::client::draws::KeyGenerator;
use crate::profile::model::{Distribution, KeyGroup, KeyType, ValueShape};

/// How many elements one command of a rebuild adds at most.
pub const ELEMENTS_PER_COMMAND: u64 = 512;
/// The TTL of every rebuilt key that has one: 30 days, far beyond any run.
pub const REBUILD_TTL_MILLIS: u64 = 30 * 24 * 3600 * 1000;
/// The largest element count a key may be given (after `elementScale`).
pub const MAX_ELEMENTS_PER_KEY: u64 = 100_000_000;

/// The generator of key `k`'s shape (and of its elements, drawn after its shape).
pub fn key_generator(seed: u64, k: u64) -> KeyGenerator {
    let mut mix = KeyGenerator::new(seed ^ k.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    KeyGenerator::new(mix.next_u64())
}

pub fn draw(d: &Distribution, rng: &mut KeyGenerator) -> u64 {
    d.draw(|bound| rng.below(bound))
}

pub fn chance(share: f64, rng: &mut KeyGenerator) -> bool {
    share > 0.0 && (share >= 1.0 || (rng.next_u64() as f64 / u64::MAX as f64) < share)
}

/// Where an element stands among its key's elements of one kind (fields, values or scores):
/// element `index` of `count`, and the key's three offsets (0 to 1) that place it. Elements
/// are drawn systematically, not independently: the integers are spread evenly over the
/// key's elements (`integerShare` of them, rounded up or down), and the integers' and the
/// texts' lengths step evenly through their distributions. Each key still follows the
/// distributions exactly (the offsets vary by key), but a key's total size varies as little
/// as a schema's keys do (the same fields in every hash): independent draws would spread the
/// sizes, and allocators round sizes to classes, so a spread changes the memory.
#[derive(Clone, Copy)]
pub struct Stratum {
    pub index: u64,
    pub count: u64,
    pub offsets: [f64; 3],
}

fn unit(rng: &mut KeyGenerator) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

impl Stratum {
    /// Whether the element is an integer, and its place among the integers or the texts as a
    /// quantile.
    pub fn place(self, integer_share: f64) -> (bool, f64) {
        let [o_integer, o_integer_length, o_text_length] = self.offsets;
        let p = integer_share.clamp(0.0, 1.0);
        let before = |j: u64| ((j as f64) * p + o_integer).floor() as u64;
        let integer = before(self.index + 1) > before(self.index);
        let integers = self.with_integers(p, self.count);
        let integer_rank = before(self.index) - before(0);
        if integer {
            (
                true,
                (integer_rank as f64 + o_integer_length) / integers.max(1) as f64,
            )
        } else {
            let texts = self.count - integers;
            let text_rank = self.index - integer_rank;
            (
                false,
                (text_rank as f64 + o_text_length) / texts.max(1) as f64,
            )
        }
    }

    /// How many of `count` elements are integers at `integer_share` (the same count
    /// `place` gives, without placing each).
    pub fn with_integers(self, integer_share: f64, count: u64) -> u64 {
        let p = integer_share.clamp(0.0, 1.0);
        let before = |j: u64| ((j as f64) * p + self.offsets[0]).floor() as u64;
        before(count) - before(0)
    }

    pub fn of(self, index: u64, count: u64) -> Self {
        Self {
            index,
            count: count.max(1),
            ..self
        }
    }
}

/// The offsets that place a group's keys (see [`KeyShape::draw`]).
pub fn group_stratum(seed: u64, group: usize) -> Stratum {
    let mut rng = key_generator(seed ^ 0x6772_6f75_7073, group as u64);
    Stratum {
        index: 0,
        count: 1,
        offsets: [unit(&mut rng), unit(&mut rng), unit(&mut rng)],
    }
}

/// One key's shape.
pub struct KeyShape {
    pub key_length: usize,
    pub ttl: bool,
    pub elements: u64,
    pub integer_fields: bool,
    pub integer_values: bool,
    pub integer_scores: bool,
    /// Fields per entry of a stream (1 for the other types).
    pub entry_fields: u64,
    /// The offsets of the key's fields, values and scores.
    pub strata: [Stratum; 3],
}

impl KeyShape {
    /// The shape of the key `place` puts among its group's keys: which keys have a TTL and
    /// how many elements each has step evenly through the group's share and distribution, as
    /// a key's elements do (see [`Stratum`]), so that a small group rebuilds as it was.
    pub fn draw(
        group: &KeyGroup,
        element_scale: f64,
        place: Stratum,
        rng: &mut KeyGenerator,
    ) -> Self {
        let key_length = draw(&group.key_length, rng) as usize;
        let ttl = group.ttl.as_ref().is_some_and(|t| place.place(t.share).0);
        let elements = group.elements.as_ref().map_or(1, |d| {
            let quantile = (place.index as f64 + place.offsets[1]) / place.count as f64;
            ((d.quantile(quantile) as f64 * element_scale).round() as u64)
                .clamp(1, MAX_ELEMENTS_PER_KEY)
        });
        let mut integer_keys =
            |shape: Option<&ValueShape>| shape.is_some_and(|s| chance(s.integer_keys, rng));
        let integer_fields = integer_keys(group.fields.as_ref());
        let integer_values = integer_keys(Some(&group.values));
        let integer_scores = integer_keys(group.scores.as_ref());
        let mut stratum = || Stratum {
            index: 0,
            count: 1,
            offsets: [unit(rng), unit(rng), unit(rng)],
        };
        let strata = [stratum(), stratum(), stratum()];
        // A stream's entries share their fields, as an application's events do (and a stream
        // stores the fields of entries like its first one once): one count per key.
        let entry_fields = group
            .entry_fields
            .as_ref()
            .map_or(1, |d| draw(d, rng).max(1));
        Self {
            strata,
            entry_fields,
            key_length,
            ttl,
            elements,
            integer_fields,
            integer_values,
            integer_scores,
        }
    }

    pub fn commands(&self, key_type: KeyType) -> u64 {
        let writes = match key_type {
            KeyType::String => return 1,
            KeyType::Stream => self.elements,
            _ => self.elements.div_ceil(ELEMENTS_PER_COMMAND),
        };
        writes + u64::from(self.ttl)
    }
}
