//! Summaries over repetitions: median, min, max and coefficient of variation; percentiles.

use serde::{Deserialize, Serialize};

/// The `p`th percentile (0 to 100) of `sorted` (ascending), by nearest rank; 0 when empty.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The spread of one figure over the repetitions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// Sample standard deviation divided by the mean (0 for a single value).
    pub cv: f64,
}

impl Spread {
    /// The spread of `values`; `None` when there are none.
    pub fn of(values: &[f64]) -> Option<Self> {
        if values.is_empty() {
            return None;
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        let mean = sorted.iter().sum::<f64>() / n as f64;
        let cv = if n > 1 && mean != 0.0 {
            let variance = sorted.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            variance.sqrt() / mean.abs()
        } else {
            0.0
        };
        Some(Self {
            median,
            min: sorted[0],
            max: sorted[n - 1],
            cv,
        })
    }
}

/// How much repetitions may disagree before a result is flagged unstable.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct StabilityThresholds {
    /// Largest coefficient of variation of bytes per item (memory layout is deterministic, so
    /// this is tight).
    pub bytes_per_item_cv: f64,
    /// Largest coefficient of variation of the load rate, items/s or commands/s alike
    /// (throughput on shared cores is noisier).
    pub rate_cv: f64,
}

impl Default for StabilityThresholds {
    fn default() -> Self {
        Self {
            bytes_per_item_cv: 0.01,
            rate_cv: 0.10,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_by_nearest_rank() {
        let sorted: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&sorted, 50.0), 50.0);
        assert_eq!(percentile(&sorted, 99.0), 99.0);
        assert_eq!(percentile(&sorted, 100.0), 100.0);
        assert_eq!(percentile(&[3.0], 99.0), 3.0);
        assert_eq!(percentile(&[], 50.0), 0.0);
    }

    #[test]
    fn median_of_an_even_count_is_the_mean_of_the_middle_two() {
        let s = Spread::of(&[4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.5, 1.0, 4.0));
    }

    #[test]
    fn identical_values_have_no_variation_and_one_value_is_its_own_median() {
        assert_eq!(Spread::of(&[7.0, 7.0, 7.0]).unwrap().cv, 0.0);
        let one = Spread::of(&[5.0]).unwrap();
        assert_eq!((one.median, one.cv), (5.0, 0.0));
        assert!(Spread::of(&[]).is_none());
    }

    #[test]
    fn cv_is_the_sample_standard_deviation_over_the_mean() {
        // mean 10, sample variance ((−2)^2 + 0 + 2^2) / 2 = 4, sd 2
        let s = Spread::of(&[8.0, 10.0, 12.0]).unwrap();
        assert!((s.cv - 0.2).abs() < 1e-12);
    }
}
