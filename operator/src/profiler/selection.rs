//! Which keys a profile reads in full, chosen after the walk counted every group: every group
//! is sampled enough to bound its error ([`MIN_SAMPLE_PER_GROUP`] keys, or all of a smaller
//! group) and the rest of `--sample-keys` goes to the groups by their size; within a group the
//! keys are drawn uniformly. And which keys are big: one that holds [`BIG_KEY_SHARE`] or more
//! of the keyspace's elements (or of its string bytes) is its own group, read as deeply as a
//! key is read, never scaled from a sample. Pure functions, tested here.

use crate::client::workloads::draws::KeyGenerator;

/// Every group has at least this many of its keys sampled (all of a smaller one): the error
/// of a mean over a few hundred keys is a few percent of the spread at most.
pub const MIN_SAMPLE_PER_GROUP: u64 = 400;
/// A key holding this share of the keyspace's elements, or of its string bytes, is a big key.
pub const BIG_KEY_SHARE: f64 = 0.01;
/// ... and at least this many elements (bytes of a string): a small keyspace's keys are not
/// big keys for being few.
pub const BIG_KEY_LEAST: u64 = 4096;

/// How many keys of each group to sample, from the groups' sizes and the budget: each group
/// gets min(its keys, the floor), the floor being [`MIN_SAMPLE_PER_GROUP`] or less when the
/// budget cannot give every group that many; what is left of the budget is split over the
/// groups by the keys they have left.
pub fn sample_sizes(group_keys: &[u64], budget: u64) -> Vec<u64> {
    let groups = group_keys.len().max(1) as u64;
    let floor = MIN_SAMPLE_PER_GROUP.min((budget / groups).max(1));
    let mut sizes: Vec<u64> = group_keys.iter().map(|&n| n.min(floor)).collect();
    let left: u64 = budget.saturating_sub(sizes.iter().sum());
    let remaining: Vec<u64> = group_keys.iter().zip(&sizes).map(|(n, s)| n - s).collect();
    let unsampled: u64 = remaining.iter().sum();
    if left == 0 || unsampled == 0 {
        return sizes;
    }
    if left >= unsampled {
        return group_keys.to_vec();
    }
    for (size, rest) in sizes.iter_mut().zip(&remaining) {
        *size += (u128::from(left) * u128::from(*rest) / u128::from(unsampled)) as u64;
    }
    sizes
}

/// `count` of the positions 0..n, drawn uniformly without repetition (a partial shuffle), in
/// increasing order.
pub fn choose(n: usize, count: usize, generator: &mut KeyGenerator) -> Vec<usize> {
    let count = count.min(n);
    if count == n {
        return (0..n).collect();
    }
    let mut positions: Vec<usize> = (0..n).collect();
    for i in 0..count {
        let j = i + generator.below((n - i) as u64) as usize;
        positions.swap(i, j);
    }
    let mut chosen = positions[..count].to_vec();
    chosen.sort_unstable();
    chosen
}

/// Whether a key of `size` (elements, or a string's bytes) is big among keys of `total`.
pub fn is_big(size: u64, total: u64) -> bool {
    size >= BIG_KEY_LEAST && size as f64 >= BIG_KEY_SHARE * total as f64
}

/// The spread of values taken one at a time (Welford's running mean and sum of squared
/// deviations), so that a group's error needs no list of its keys.
#[derive(Clone, Copy, Debug, Default)]
pub struct Spread {
    n: u64,
    mean: f64,
    squares: f64,
}

impl Spread {
    pub fn add(&mut self, value: f64) {
        self.n += 1;
        let delta = value - self.mean;
        self.mean += delta / self.n as f64;
        self.squares += delta * (value - self.mean);
    }

    fn moments(&self) -> (u64, f64, f64) {
        let variance = if self.n < 2 {
            0.0
        } else {
            self.squares / (self.n - 1) as f64
        };
        (self.n, self.mean, variance)
    }
}

/// The spread of lengths (whole bytes) taken one at a time, by their exact sums: the result
/// does not depend on the order the lengths came in.
#[derive(Clone, Copy, Debug, Default)]
pub struct LengthSpread {
    n: u64,
    sum: u128,
    squares: u128,
}

impl LengthSpread {
    pub fn add(&mut self, length: u64) {
        self.n += 1;
        self.sum += u128::from(length);
        self.squares += u128::from(length) * u128::from(length);
    }

    fn moments(&self) -> (u64, f64, f64) {
        if self.n == 0 {
            return (0, 0.0, 0.0);
        }
        let n = u128::from(self.n);
        let mean = self.sum as f64 / self.n as f64;
        if self.n < 2 {
            return (self.n, mean, 0.0);
        }
        // n * sum of squares - sum^2, exact while it fits (lengths below 4 GB over fewer than
        // 2^40 elements); in floating point past that.
        let variance = match self
            .squares
            .checked_mul(n)
            .and_then(|a| self.sum.checked_mul(self.sum).map(|b| a - b))
        {
            Some(spread) => spread as f64 / (n * (n - 1)) as f64,
            None => (self.squares as f64 - self.sum as f64 * mean) / (self.n - 1) as f64,
        };
        (self.n, mean, variance.max(0.0))
    }
}

/// The 95% bound (1.96 standard errors) of the relative error of a mean of `n` values of
/// `mean` and `variance` drawn from `population`, with the finite-population correction (0
/// when every value was read).
fn relative_error((n, mean, variance): (u64, f64, f64), population: u64) -> f64 {
    if n < 2 || population <= n || mean <= 0.0 {
        return 0.0;
    }
    let n = n as f64;
    let correction = 1.0 - n / population as f64;
    1.96 * (variance / n * correction).sqrt() / mean
}

/// The error a group's sample implies: the 95% bound of the relative error of the group's
/// mean bytes per key (its name and the elements' lengths) estimated from the sampled keys,
/// with the finite-population correction (0 when every key was read), combined with the error
/// of the element lengths where a key's elements were read in part. `per_key` spreads the
/// sampled keys' estimated bytes; `elements` the lengths of the elements read, `read` and
/// `held` how many elements were read of how many the sampled keys hold.
pub fn size_error(
    per_key: &Spread,
    group_keys: u64,
    elements: &LengthSpread,
    read: u64,
    held: u64,
) -> f64 {
    let keys = relative_error(per_key.moments(), group_keys);
    let lengths = if read < held {
        relative_error(elements.moments(), held)
    } else {
        0.0
    };
    (keys * keys + lengths * lengths).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_group_gets_its_floor_or_all_its_keys_and_the_rest_goes_by_size() {
        // A big group, a middling one, a group of 3 and a lone key: budget 5000.
        let sizes = sample_sizes(&[150_000, 40_000, 3, 1], 5000);
        assert_eq!(&sizes[2..], &[3, 1], "a small group is read whole");
        assert!(sizes[1] >= MIN_SAMPLE_PER_GROUP, "{sizes:?}");
        assert!(sizes[0] > sizes[1], "{sizes:?}");
        assert!(sizes.iter().sum::<u64>() <= 5000, "{sizes:?}");
        assert!(sizes.iter().sum::<u64>() >= 4990, "{sizes:?}");
        // A budget above the keys reads every key.
        assert_eq!(sample_sizes(&[10, 20], 100), vec![10, 20]);
        // More groups than the budget: one key each, at least.
        assert_eq!(sample_sizes(&[10, 10, 10], 2), vec![1, 1, 1]);
    }

    #[test]
    fn chosen_positions_are_distinct_and_in_range() {
        let mut generator = KeyGenerator::new(7);
        let chosen = choose(1000, 300, &mut generator);
        assert_eq!(chosen.len(), 300);
        assert!(
            chosen.windows(2).all(|w| w[0] < w[1]),
            "distinct, increasing"
        );
        assert!(*chosen.last().unwrap() < 1000);
        // Uniform: the mean position is near the middle.
        let mean = chosen.iter().sum::<usize>() as f64 / 300.0;
        assert!((mean - 499.5).abs() < 60.0, "{mean}");
        assert_eq!(choose(5, 9, &mut generator), vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn a_key_is_big_by_its_share_and_not_for_being_one_of_few() {
        assert!(is_big(60_000, 140_000));
        assert!(!is_big(10, 40_000));
        assert!(!is_big(100, 300), "a third of a tiny keyspace is not big");
    }

    #[test]
    fn the_error_is_zero_when_every_key_is_read_and_shrinks_with_the_sample() {
        let spread_of = |n: usize| {
            let mut spread = Spread::default();
            for i in 0..n {
                spread.add(100.0 + (i % 20) as f64);
            }
            spread
        };
        let none = LengthSpread::default();
        assert_eq!(size_error(&spread_of(400), 400, &none, 0, 0), 0.0);
        let few = size_error(&spread_of(100), 100_000, &none, 0, 0);
        let many = size_error(&spread_of(400), 100_000, &none, 0, 0);
        assert!(many < few && many > 0.0, "{many} {few}");
        // 1.96 * sd / sqrt(n) / mean: sd of 0..19 is about 5.9, mean 109.5.
        assert!((many - 1.96 * 5.92 / 20.0 / 109.5).abs() < 1e-3, "{many}");
    }

    #[test]
    fn lengths_spread_the_same_in_any_order_and_as_a_two_pass_variance() {
        let lengths: Vec<u64> = (0..1000).map(|i| (i * 37) % 101).collect();
        let (mut forward, mut backward) = (LengthSpread::default(), LengthSpread::default());
        lengths.iter().for_each(|&l| forward.add(l));
        lengths.iter().rev().for_each(|&l| backward.add(l));
        assert_eq!(forward.moments(), backward.moments());
        let mean = lengths.iter().sum::<u64>() as f64 / 1000.0;
        let variance = lengths
            .iter()
            .map(|&l| (l as f64 - mean).powi(2))
            .sum::<f64>()
            / 999.0;
        let (n, m, v) = forward.moments();
        assert_eq!((n, m), (1000, mean));
        assert!(
            (v - variance).abs() < 1e-9 * variance,
            "{v} against {variance}"
        );
        let mut spread = Spread::default();
        lengths.iter().for_each(|&l| spread.add(l as f64));
        assert!((spread.moments().2 - variance).abs() < 1e-9 * variance);
    }
}
