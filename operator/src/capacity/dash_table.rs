//! Dragonfly's keyspace as the model sees it: a dash table per shard, growing by segments.
//!
//! From Dragonfly's source (1.40, `src/core/dash.h`, `src/core/dash_internal.h`,
//! `src/server/detail/table.h`): each shard (one per thread, `--proactor_threads`, unless
//! `--num_shards` asks for fewer) keeps its keys in its own `PrimeTable`, a dash table of
//! segments of 56 buckets plus 4 stash buckets of 14 slots (840 entries). A table starts with 8
//! segments. An insert that finds its two home buckets and the stash full splits that one
//! segment in two (`DashTable::Split`), each taking half of its hash range; nothing is freed
//! and nothing rehashes later, so there is no window in which two arrays are held. The
//! directory of segment pointers doubles when a split needs one more bit of the hash
//! (8 bytes a pointer: 16 KiB at 2048 segments, left to the fit's per-entry cost).
//!
//! A segment splits when it holds about `split_at` entries (the fill at which an insert finds
//! no room; measured, about 825 of 840 for uniform keys). Its hash range at depth `d` holds a
//! binomial share `m / 2^d` of the shard's `m` keys, so the expected number of segments is
//!
//! ```text
//! segments(m) = 8 + sum over d >= 3 of 2^d * P(Binomial(m, 2^-d) >= split_at)
//! ```
//!
//! which rises in waves around `split_at * 2^d` entries: the sawtooth of Dragonfly's bytes per
//! key (docs/src/results/). The whole keyspace has `shards` tables of `entries / shards` keys.
//! Where the waves land therefore depends on the thread count, which the run reports
//! (`INFO server` `thread_count`) and the projection keeps: it projects for that count.

/// Entries a segment holds when full (60 buckets of 14 slots).
pub const SEGMENT_SLOTS: u32 = 840;

/// Segments a shard's table starts with.
const INITIAL_SEGMENTS_LOG: u32 = 3;

/// `sizeof(Segment)` of the prime table on 1.40 (`INFO memory` `table_used_memory` of an
/// empty one-thread server, 258,496 bytes, less its 8 directory pointers, over 8 segments):
/// the fit's per-segment cost when the curve does not give one.
pub const SEGMENT_BYTES: f64 = 32_304.0;

/// The split points the fit tries, in entries a segment holds when it splits: from 70% full
/// to full.
pub fn split_points() -> impl Iterator<Item = u32> {
    (SEGMENT_SLOTS * 7 / 10)..=SEGMENT_SLOTS
}

/// The standard normal distribution function.
fn normal_cdf(z: f64) -> f64 {
    0.5 * erfc(-z / std::f64::consts::SQRT_2)
}

/// erfc, to about 1e-7 (Numerical Recipes' Chebyshev fit), enough for a count of segments.
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87
                                        + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    if x >= 0.0 { r } else { 2.0 - r }
}

/// The expected segments of all `shards` tables holding `entries` keys between them, when a
/// segment splits at `split_at` entries.
pub fn segments(entries: u64, shards: u32, split_at: f64) -> f64 {
    let shards = shards.max(1);
    let per_shard = entries as f64 / f64::from(shards);
    let mut total = f64::from(1u32 << INITIAL_SEGMENTS_LOG);
    for depth in INITIAL_SEGMENTS_LOG..48 {
        let share = 0.5f64.powi(depth as i32);
        let mean = per_shard * share;
        let sd = (mean * (1.0 - share)).sqrt().max(1e-9);
        // Past the first levels, a range far below the split point adds nothing more.
        if mean + 12.0 * sd < split_at {
            break;
        }
        // The count is a whole number: P(count >= split_at) with the continuity correction.
        total += (1u64 << depth) as f64 * normal_cdf((mean - split_at.ceil() + 0.5) / sd);
    }
    total * f64::from(shards)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_double_in_waves_around_the_split_point_times_a_power_of_two() {
        // Empty: 8 segments a shard.
        assert_eq!(segments(0, 1, 825.0), 8.0);
        assert_eq!(segments(0, 2, 825.0), 16.0);
        // Well before the wave at 1024 * 825 entries: 1024 segments; well after it: 2048.
        assert!((segments(700_000, 1, 825.0) - 1024.0).abs() < 0.5);
        assert!((segments(1_000_000, 1, 825.0) - 2048.0).abs() < 0.5);
        // In the middle of it, half the segments have split.
        let middle = segments(1024 * 825, 1, 825.0);
        assert!((middle - 1536.0).abs() < 40.0, "{middle}");
        // Two shards of half the keys each: the same total at 1M, a different one mid-wave.
        assert!((segments(1_000_000, 2, 825.0) - 2048.0).abs() < 0.5);
        assert!((segments(3 * 512 * 825, 3, 825.0) - 3.0 * 768.0).abs() < 30.0);
        // A later split point moves the wave to more keys.
        assert!(segments(850_000, 1, 840.0) < segments(850_000, 1, 800.0));
    }

    #[test]
    fn the_normal_distribution_function_is_accurate_enough() {
        assert!((normal_cdf(0.0) - 0.5).abs() < 1e-7);
        assert!((normal_cdf(1.96) - 0.975).abs() < 1e-4);
        assert!((normal_cdf(-1.96) - 0.025).abs() < 1e-4);
    }
}
