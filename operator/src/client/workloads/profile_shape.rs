//! A key of a profile's rebuild, drawn: its shape (length, TTL, element count, whether its
//! elements are integers, a stream's fields per entry) from the generator of the workload's
//! seed and the key's number, and the offsets that place its elements. Below both the workload
//! (`profile_workload`, which counts the commands) and the encoder (`profile_encoder`, which
//! writes them), so the two draw the same keys.

use crate::client::workloads::draws::KeyGenerator;
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
/// texts' lengths step evenly through their distributions, the texts' through the part of it
/// (`window`, quantiles from and to) that gives the key its mean length ([`KeySpread`]). A
/// key's total size then varies as the source's keys' did: as little as a schema's keys do
/// (the same fields in every hash), or as much as independently drawn values make it, and
/// allocators round sizes to classes, so a spread changes the memory.
#[derive(Clone, Copy)]
pub struct Stratum {
    pub index: u64,
    pub count: u64,
    pub offsets: [f64; 3],
    /// The quantiles of the text lengths this key's texts step through: all of them, unless
    /// the profile says how keys differ ([`KeySpread`]).
    pub window: [f64; 2],
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
            let [from, to] = self.window;
            let within = (text_rank as f64 + o_text_length) / texts.max(1) as f64;
            (false, from + (to - from) * within)
        }
    }

    /// A stratum at `offsets`, its texts stepping through the whole distribution.
    pub fn new(offsets: [f64; 3]) -> Self {
        Self {
            index: 0,
            count: 1,
            offsets,
            window: [0.0, 1.0],
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
    Stratum::new([unit(&mut rng), unit(&mut rng), unit(&mut rng)])
}

/// How many points of a text-length distribution [`KeySpread`] keeps.
const SPREAD_POINTS: usize = 1024;

/// The R3 sequence's steps (1/g, 1/g², 1/g³, g the root of x⁴ = x + 1 above 1): key
/// `n` of a group takes quantile `frac(offset + n × step)` of the keys' means, one step for
/// each kind of element, so that the keys cover the distribution evenly (a small group as
/// well as a large one) without following their element counts or one another.
const KEY_MEAN_STEPS: [f64; 3] = [
    0.819_172_513_396_164_4,
    0.671_043_606_703_789_1,
    0.549_700_477_901_970_7,
];

/// How a group's keys differ in the lengths of one kind of their text elements (fields,
/// values or scores): the profile's keys' mean lengths (`keyMeanLength`) and the text
/// lengths' distribution, as the window of quantiles a key takes its texts from to get its
/// mean. A key's window is the lowest quantiles (a short mean), the highest (a long one) or
/// all of them (the mean of the distribution), so its texts keep lengths the distribution
/// holds; over the keys the means keep their spread about the distribution's mean, which is
/// unchanged.
pub struct KeySpread {
    /// The text lengths at evenly spaced quantiles, and their running sums from 0.
    points: Vec<f64>,
    sums: Vec<f64>,
    key_means: Distribution,
    /// The keys' mean lengths' own mean, in thousandths of a byte.
    key_means_center: f64,
}

impl KeySpread {
    /// The spread of `shape`'s texts, when the profile has the keys' means and they differ.
    pub fn of(shape: &ValueShape) -> Option<Self> {
        let (key_means, lengths) = (shape.key_mean_length.as_ref()?, shape.text_length.as_ref()?);
        let one_value =
            |d: &Distribution| d.buckets.len() == 1 && d.buckets[0][0] == d.buckets[0][1];
        if one_value(key_means) || one_value(lengths) {
            return None;
        }
        let points: Vec<f64> = (0..SPREAD_POINTS)
            .map(|i| lengths.quantile((i as f64 + 0.5) / SPREAD_POINTS as f64) as f64)
            .collect();
        let sums = std::iter::once(0.0)
            .chain(points.iter().scan(0.0, |sum, p| {
                *sum += p;
                Some(*sum)
            }))
            .collect();
        Some(Self {
            points,
            sums,
            key_means_center: key_means.mean(),
            key_means: key_means.clone(),
        })
    }

    /// The integral of the text lengths' quantile function from 0 to `q`.
    fn integral(&self, q: f64) -> f64 {
        let at = q.clamp(0.0, 1.0) * SPREAD_POINTS as f64;
        let i = (at as usize).min(SPREAD_POINTS - 1);
        (self.sums[i] + (at - i as f64) * self.points[i]) / SPREAD_POINTS as f64
    }

    /// The window of position `c` (0 to 1): quantiles 0 to 2c below the middle, 2c - 1 to 1
    /// above it; its mean length rises with `c`.
    fn window_at(c: f64) -> [f64; 2] {
        if c < 0.5 {
            [0.0, 2.0 * c]
        } else {
            [2.0 * c - 1.0, 1.0]
        }
    }

    fn mean_of(&self, [from, to]: [f64; 2]) -> f64 {
        if to - from < 1e-9 {
            let i = ((from * SPREAD_POINTS as f64) as usize).min(SPREAD_POINTS - 1);
            return self.points[i];
        }
        (self.integral(to) - self.integral(from)) / (to - from)
    }

    /// The window of the key at quantile `u` of the keys' means: its texts' mean is the
    /// distribution's mean moved by as much as that key's mean is from the keys' own mean.
    pub fn window(&self, u: f64) -> [f64; 2] {
        let mean = self.sums[SPREAD_POINTS] / SPREAD_POINTS as f64;
        let target = mean + (self.key_means.quantile(u) as f64 - self.key_means_center) / 1000.0;
        let (mut low, mut high) = (0.0, 1.0);
        for _ in 0..40 {
            let middle = (low + high) / 2.0;
            if self.mean_of(Self::window_at(middle)) < target {
                low = middle;
            } else {
                high = middle;
            }
        }
        Self::window_at((low + high) / 2.0)
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
    /// An object hash's fields the key holds, as bits (`profile_objects`); 0 for any other
    /// key, whose elements are drawn from the group's fields and values.
    pub object_fields: u64,
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
        // The names' lengths step through their distribution in the order of the keys, the
        // shortest first: a group's names are numbered in the same order (`render`), and a
        // name must be long enough for its number, as the source's were.
        let key_length = group
            .key_length
            .quantile((place.index as f64 + place.offsets[0]) / place.count as f64)
            as usize;
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
        let mut stratum = || Stratum::new([unit(rng), unit(rng), unit(rng)]);
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
            object_fields: 0,
        }
    }

    /// Gives the key's fields, values and scores the windows that make their mean lengths
    /// differ from key to key as `spreads` say (a kind without one keeps the whole
    /// distribution). `place` is the key's place among its group's keys, as in [`Self::draw`].
    pub fn spread(&mut self, spreads: &[Option<KeySpread>; 3], place: Stratum) {
        for ((stratum, spread), step) in self.strata.iter_mut().zip(spreads).zip(KEY_MEAN_STEPS) {
            if let Some(spread) = spread {
                let u = (place.offsets[2] + place.index as f64 * step).fract();
                stratum.window = spread.window(u);
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::model::Profile;

    /// Every length from `from` to `to` once.
    fn every_length(from: u64, to: u64) -> Distribution {
        Distribution {
            buckets: (from..=to).map(|l| [l, l, 1]).collect(),
        }
    }

    /// The lengths of a key's `count` texts, stepping through `window` from `offset`.
    fn texts(lengths: &Distribution, window: [f64; 2], offset: f64, count: u64) -> Vec<u64> {
        let stratum = Stratum {
            window,
            ..Stratum::new([0.0, 0.0, offset])
        };
        (0..count)
            .map(|j| lengths.quantile(stratum.of(j, count).place(0.0).1))
            .collect()
    }

    #[test]
    fn a_keys_texts_take_the_mean_of_its_place_among_the_keys_means_and_lengths_the_source_had() {
        let lengths = every_length(8, 31);
        let shape = ValueShape {
            text_length: Some(lengths.clone()),
            key_mean_length: Some(Distribution {
                buckets: vec![
                    [15_500, 15_500, 1],
                    [19_500, 19_500, 2],
                    [23_500, 23_500, 1],
                ],
            }),
            ..ValueShape::default()
        };
        let spread = KeySpread::of(&shape).expect("the keys' means differ");
        for (u, mean) in [(0.1, 15.5), (0.5, 19.5), (0.9, 23.5)] {
            let window = spread.window(u);
            // Over the offsets (which vary by key) the mean is exact; each key is within a
            // byte of it (each of its 8 texts stands for 3 lengths, and takes one of them).
            let mut sum = 0;
            for step in 0..64 {
                let lengths = texts(&lengths, window, (step as f64 + 0.5) / 64.0, 8);
                assert!(lengths.iter().all(|l| (8..=31).contains(l)), "{lengths:?}");
                let key_mean = lengths.iter().sum::<u64>() as f64 / 8.0;
                assert!((key_mean - mean).abs() <= 1.0, "{u}: {key_mean} for {mean}");
                sum += lengths.iter().sum::<u64>();
            }
            let over_offsets = sum as f64 / (64.0 * 8.0);
            assert!((over_offsets - mean).abs() < 0.05, "{u}: {over_offsets}");
        }
        // Keys that do not differ, or texts of one length, keep the whole distribution.
        let same = ValueShape {
            key_mean_length: Some(Distribution {
                buckets: vec![[19_500, 19_500, 4]],
            }),
            ..shape
        };
        assert!(KeySpread::of(&same).is_none());
    }

    #[test]
    fn a_groups_keys_spread_their_means_as_the_profile_says_about_the_mean_of_the_lengths() {
        let profile = Profile::parse(
            r#"format: 1
source: {keys: 4000}
groups:
- template: "user:{n}"
  type: hash
  share: 1
  keyLength: {buckets: [[9, 9, 1]]}
  elements: {buckets: [[8, 8, 1]]}
  fields: {textLength: {buckets: [[6, 6, 1]]}}
  values:
    textLength: {buckets: [[8, 11, 4], [12, 19, 8], [20, 31, 12]]}
    keyMeanLength: {buckets: [[14000, 16000, 10], [18000, 20000, 20], [22000, 26000, 10]]}
"#,
        )
        .unwrap();
        let group = &profile.groups[0];
        let spreads = [
            KeySpread::of(group.fields.as_ref().unwrap()),
            KeySpread::of(&group.values),
            None,
        ];
        assert!(spreads[0].is_none() && spreads[1].is_some());
        let lengths = group.values.text_length.as_ref().unwrap();
        let keys = 4000u64;
        let place = group_stratum(7, 0);
        let means: Vec<f64> = (0..keys)
            .map(|k| {
                let mut shape =
                    KeyShape::draw(group, 1.0, place.of(k, keys), &mut key_generator(7, k));
                shape.spread(&spreads, place.of(k, keys));
                let [_, values, _] = shape.strata;
                let lengths: Vec<u64> = (0..8)
                    .map(|j| lengths.quantile(values.of(j, 8).place(0.0).1))
                    .collect();
                lengths.iter().sum::<u64>() as f64 / 8.0
            })
            .collect();
        let mean = means.iter().sum::<f64>() / keys as f64;
        let spread = (means.iter().map(|m| (m - mean).powi(2)).sum::<f64>() / keys as f64).sqrt();
        // The lengths' mean (19.5 at the buckets' middles) is kept; the keys' means spread as
        // the profile's do about theirs (a standard deviation of 3.3 B), where a whole
        // distribution for every key would spread them by a fraction of a byte.
        let profile_spread = {
            let d = group.values.key_mean_length.as_ref().unwrap();
            let points: Vec<f64> = (0..1000)
                .map(|i| d.quantile((i as f64 + 0.5) / 1000.0) as f64 / 1000.0)
                .collect();
            let center = points.iter().sum::<f64>() / 1000.0;
            (points.iter().map(|p| (p - center).powi(2)).sum::<f64>() / 1000.0).sqrt()
        };
        assert!((mean - lengths.mean()).abs() < 0.1, "{mean}");
        assert!(
            (spread / profile_spread - 1.0).abs() < 0.1,
            "{spread} against {profile_spread}"
        );
    }
}
