//! used_memory at N keys of a profile's rebuild, projected from a rebuild at another scale.
//!
//! A rebuild at `scale` stores `scale` times the profile's keys, each drawn from the same
//! distributions (its type, name length, TTL, element count, value lengths); `scale` leaves
//! every key's shape alone (only `elementScale` changes element counts). So what a key's
//! data costs (its name, its object, its elements, a hash's or a set's own table) is the same
//! per key at any scale, and what grows in steps is what every key goes into: the main key
//! table, and the expires table for the keys with a TTL, by the engine's growth rule
//! ([`GrowthRule`]). The model is
//!
//! ```text
//! used_memory(N) = fixed + per_key * N + table(N) + table(N * ttl share)
//! ```
//!
//! with `fixed` the empty server's used_memory (the repetitions' baseline), `table` the bytes
//! of the rule's bucket array (8 a dict bucket, 64 a Valkey 8.1+ bucket, a dash-table segment
//! per shard for Dragonfly) and `per_key` what the run's own keys cost beside the tables:
//! (used_memory - baseline - table(keys) - table(ttl keys)) / keys, per repetition, their
//! median. The growth curve the other workloads fit is not needed, and the by-type readings
//! of the rebuild are not one: they are different types (see docs/src/how-to/capacity-and-cost.md).
//!
//! The band: the repetitions' spread of `per_key` times N, plus [`KNOWN_RULE_MARGIN`] of the
//! projected data (allocator size classes, Valkey's child buckets), plus the old bucket array
//! when N may be inside a resize. A run read inside a resize may hold the previous array or
//! not (the commands move the old buckets, and so does the server's cron, which may finish
//! first): it is taken to hold half of it, and the band spans both. Dragonfly: the prime table's segments are
//! counted at every split point from [`SPLIT_AT_RANGE`] (a single run cannot fit one), all
//! inside the band; its expires table is a dash table of another layout the model does not
//! count, so keys with a TTL widen the band by [`UNKNOWN_RULE_MARGIN`] of their share. An
//! unknown rule is a straight line (the run's bytes per key times N) with the unknown rule's
//! margin.

use super::dash_table;
use super::projection::{GrowthRule, KNOWN_RULE_MARGIN, Projection, UNKNOWN_RULE_MARGIN};

/// The split points (entries a segment holds when it splits) Dragonfly's segments are counted
/// at: the growth-curve fits of uniform keys on 1.40 give 824 to 825 (docs/src/how-to/capacity-and-cost.md), so a
/// little either side of them.
pub const SPLIT_AT_RANGE: std::ops::RangeInclusive<u32> = 800..=840;

/// One repetition of a rebuild as the model reads it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RebuildRepetition {
    pub baseline_used_memory: u64,
    pub used_memory: u64,
    /// Keys verified (DBSIZE).
    pub keys: u64,
}

/// A profile's rebuild: its keys, how many of them have a TTL, and its repetitions.
#[derive(Clone, Debug, PartialEq)]
pub struct RebuildMeasurement {
    pub keys: u64,
    pub ttl_keys: u64,
    pub repetitions: Vec<RebuildRepetition>,
}

/// The bytes of a table holding `entries` under `rule` (no resize under way), for `shards`
/// Dragonfly tables splitting at `split_at`. An empty dict or hashtable has no bucket array.
fn table_bytes(rule: GrowthRule, shards: u32, split_at: f64, entries: u64) -> f64 {
    match rule {
        GrowthRule::Unknown => 0.0,
        GrowthRule::DashTable => {
            // The empty tables' segments are in the baseline already.
            dash_table::SEGMENT_BYTES
                * (dash_table::segments(entries, shards, split_at)
                    - dash_table::segments(0, shards, split_at))
        }
        _ if entries == 0 => 0.0,
        _ => rule.bucket_bytes() * rule.buckets(entries) as f64,
    }
}

/// The previous bucket array's bytes when a table of `entries` may still hold it.
fn resize_window_bytes(rule: GrowthRule, entries: u64) -> f64 {
    rule.old_buckets_within_window(entries)
        .map_or(0.0, |old| old as f64 * rule.bucket_bytes())
}

/// The median of values (there is at least one).
fn median(values: &[f64]) -> f64 {
    crate::stats::Spread::of(values).map_or(0.0, |s| s.median)
}

/// One split point's projection: (point, low, high, per_key).
fn project_at(
    rule: GrowthRule,
    shards: u32,
    split_at: f64,
    run: &RebuildMeasurement,
    keys: u64,
) -> (f64, f64, f64, f64) {
    let ttl_share = run.ttl_keys as f64 / run.keys.max(1) as f64;
    let ttl_of = |n: u64| (n as f64 * ttl_share).round() as u64;
    // The expires table is modelled for the engines with one rule for both tables (Redis,
    // Valkey); Dragonfly's is left in the per-key cost (see the module's docs).
    let expires = |n: u64| match rule {
        GrowthRule::DashTable => 0.0,
        _ => table_bytes(rule, shards, split_at, ttl_of(n)),
    };
    let tables = |n: u64| table_bytes(rule, shards, split_at, n) + expires(n);
    // A table that may be inside its resize holds both bucket arrays until every old bucket
    // has moved: the commands' own lookups and adds move them
    // ([`GrowthRule::old_buckets_within_window`]), and so does the server's cron
    // (`activerehashing`, a millisecond every tick), which may finish first. A run read there
    // holds the previous arrays or not (Redis 8.2 at 20,000 keys measured both, 131 KB
    // apart): taken as holding half of them, with both cases inside the band.
    let in_resize = |n: u64| {
        let ttl = match rule {
            GrowthRule::DashTable => 0,
            _ => ttl_of(n),
        };
        resize_window_bytes(rule, n) + resize_window_bytes(rule, ttl)
    };
    let per_key: Vec<f64> = run
        .repetitions
        .iter()
        .map(|r| {
            let data = r.used_memory as f64
                - r.baseline_used_memory as f64
                - tables(r.keys)
                - in_resize(r.keys) / 2.0;
            data / r.keys.max(1) as f64
        })
        .collect();
    let per_key_median = median(&per_key);
    let spread = per_key
        .iter()
        .map(|p| (p - per_key_median).abs())
        .fold(0.0, f64::max);
    let fixed = median(
        &run.repetitions
            .iter()
            .map(|r| r.baseline_used_memory as f64)
            .collect::<Vec<_>>(),
    );
    let n = keys as f64;
    let data = per_key_median * n + tables(keys);
    let point = fixed + data;
    let mut margin = match rule {
        GrowthRule::Unknown => UNKNOWN_RULE_MARGIN,
        _ => KNOWN_RULE_MARGIN,
    };
    if rule == GrowthRule::DashTable && run.ttl_keys > 0 {
        margin += UNKNOWN_RULE_MARGIN * ttl_share;
    }
    let half = spread * n + margin * data.max(0.0);
    let run_window = in_resize(run.keys) / run.keys.max(1) as f64;
    let low = point - half - run_window / 2.0 * n;
    let high = point + half + run_window / 2.0 * n + in_resize(keys);
    (point, low, high, per_key_median)
}

/// Projects a rebuild's used_memory at `keys` keys for an engine of `shards` tables.
pub fn project(
    rule: GrowthRule,
    shards: u32,
    run: &RebuildMeasurement,
    keys: u64,
) -> Result<Projection, String> {
    if run.repetitions.is_empty() || run.keys == 0 {
        return Err("the rebuild has no verified repetition to project from".to_string());
    }
    let mut notes = vec![format!(
        "a profile's rebuild: every key is drawn from the same distributions at any scale, so its data costs the same per key; the {} grow by the rule ({})",
        if rule == GrowthRule::DashTable {
            "key tables"
        } else {
            "key table and the expires table"
        },
        rule.describe()
    )];
    if run.repetitions.len() < 2 {
        notes.push(
            "one repetition: the band has no repetition spread in it (run more repetitions to see it)"
                .to_string(),
        );
    }
    let ttl_share = run.ttl_keys as f64 / run.keys as f64;
    let projections: Vec<(f64, (f64, f64, f64, f64))> = if rule == GrowthRule::DashTable {
        SPLIT_AT_RANGE
            .map(|t| {
                let t = f64::from(t);
                (t, project_at(rule, shards, t, run, keys))
            })
            .collect()
    } else {
        vec![(0.0, project_at(rule, shards, 0.0, run, keys))]
    };
    // The middle split point gives the figure; every one is inside the band.
    let (split_at, (point, _, _, per_key)) = projections[projections.len() / 2];
    let low = projections
        .iter()
        .map(|(_, p)| p.1)
        .fold(f64::INFINITY, f64::min);
    let high = projections
        .iter()
        .map(|(_, p)| p.2)
        .fold(f64::NEG_INFINITY, f64::max);
    match rule {
        GrowthRule::DashTable => {
            notes.push(format!(
                "dash table of {shards} shard(s) (the run's threads), segments counted at split points {} to {} (the band spans them); with another --proactor_threads the steps land elsewhere",
                SPLIT_AT_RANGE.start(),
                SPLIT_AT_RANGE.end()
            ));
            if run.ttl_keys > 0 {
                notes.push(format!(
                    "the expires table ({:.1}% of the keys have a TTL) is a dash table the model does not count: its cost is taken per key and the band widened by {:.0}% of that share",
                    ttl_share * 100.0,
                    UNKNOWN_RULE_MARGIN * 100.0
                ));
            }
        }
        GrowthRule::Unknown => notes.push(rule.describe().to_string()),
        _ => {}
    }
    if rule.old_buckets_within_window(keys).is_some() {
        notes.push(format!(
            "{keys} keys may be inside the key table's resize (both bucket arrays held): the band's top includes the previous array"
        ));
    }
    if rule.old_buckets_within_window(run.keys).is_some()
        || (rule != GrowthRule::DashTable
            && rule
                .old_buckets_within_window((run.keys as f64 * ttl_share).round() as u64)
                .is_some())
    {
        notes.push(format!(
            "the run's {} keys may be inside a table's resize (both bucket arrays held until the commands or the server's cron have moved every old bucket): its reading is taken to hold half the previous array, and the band spans holding all of it or none",
            run.keys
        ));
    }
    let dash = rule == GrowthRule::DashTable;
    let per_bucket = if dash {
        dash_table::SEGMENT_BYTES
    } else {
        rule.bucket_bytes()
    };
    Ok(Projection {
        shards: dash.then_some(shards),
        split_at: dash.then_some(split_at),
        ..Projection::of(
            rule,
            [point, low, high],
            (per_key, per_bucket),
            run.repetitions.len(),
            notes,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rebuild made by the model itself: `per_key` bytes a key, a fifth with a TTL, tables by
    /// the rule, 900 KB fixed.
    fn modelled(rule: GrowthRule, keys: u64, per_key: f64) -> RebuildRepetition {
        // Dragonfly's expires table is not modelled (the module's docs).
        let expires = match rule {
            GrowthRule::DashTable => 0.0,
            _ => table_bytes(rule, 1, 825.0, keys / 5),
        };
        let tables = table_bytes(rule, 1, 825.0, keys) + expires;
        RebuildRepetition {
            baseline_used_memory: 900_000,
            used_memory: (900_000.0 + per_key * keys as f64 + tables).round() as u64,
            keys,
        }
    }

    #[test]
    fn a_rebuild_that_follows_the_model_projects_its_tables_steps() {
        for rule in [GrowthRule::PowerOfTwoDict, GrowthRule::BucketedHashtable] {
            // 28,000 keys (5,600 with a TTL) are past both tables' resizes.
            let run = RebuildMeasurement {
                keys: 28_000,
                ttl_keys: 5_600,
                repetitions: vec![modelled(rule, 28_000, 150.0), modelled(rule, 28_000, 151.0)],
            };
            let p = project(rule, 1, &run, 280_000).unwrap();
            let expected = modelled(rule, 280_000, 150.5).used_memory as f64;
            assert!(
                (p.used_memory as f64 / expected - 1.0).abs() < 1e-4,
                "{rule:?}: {p:?} against {expected}"
            );
            assert!(
                p.low as f64 <= expected && expected <= p.high as f64,
                "{p:?}"
            );
            // The spread of the repetitions (0.5 B a key either side) is in the band.
            assert!(
                p.high as f64 - p.used_memory as f64 >= 0.5 * 280_000.0,
                "{p:?}"
            );
            // Bytes per key times N misses the tables' steps (28,000 keys are in a 32,768
            // bucket dict, 280,000 in a 524,288 one).
            let naive = 900_000.0
                + (run.repetitions[0].used_memory - 900_000) as f64 / 28_000.0 * 280_000.0;
            if rule == GrowthRule::PowerOfTwoDict {
                assert!((naive - expected).abs() > 100_000.0, "{naive} {expected}");
            }
        }
    }

    #[test]
    fn a_run_read_inside_a_resize_has_both_cases_in_its_band() {
        // 20,000 keys: the dict grew to 32,768 buckets at 16,385 and its 16,384 old ones may
        // not all have moved; 4,000 keys with a TTL are past the expires table's resize.
        let rule = GrowthRule::PowerOfTwoDict;
        let freed = modelled(rule, 20_000, 150.0);
        let held = RebuildRepetition {
            used_memory: freed.used_memory + 16_384 * 8,
            ..freed
        };
        let expected = modelled(rule, 200_000, 150.0).used_memory as f64;
        for reading in [freed, held] {
            let run = RebuildMeasurement {
                keys: 20_000,
                ttl_keys: 4_000,
                repetitions: vec![reading],
            };
            let p = project(rule, 1, &run, 200_000).unwrap();
            assert!(
                p.low as f64 <= expected && expected <= p.high as f64,
                "{p:?}"
            );
            // Off by at most half the old array, per key of the run, times N: which of the
            // two the run read is not known.
            let half_old_per_key = 16_384.0 * 8.0 / 2.0 / 20_000.0;
            assert!(
                (p.used_memory as f64 - expected).abs() <= half_old_per_key * 200_000.0 + 1.0,
                "{p:?}"
            );
            assert!(
                p.notes
                    .iter()
                    .any(|n| n.contains("inside a table's resize"))
            );
        }
    }

    #[test]
    fn one_repetition_and_an_unknown_rule_say_so_and_the_unknown_rule_is_wider() {
        let run = RebuildMeasurement {
            keys: 20_000,
            ttl_keys: 0,
            repetitions: vec![modelled(GrowthRule::PowerOfTwoDict, 20_000, 150.0)],
        };
        let known = project(GrowthRule::PowerOfTwoDict, 1, &run, 200_000).unwrap();
        let unknown = project(GrowthRule::Unknown, 1, &run, 200_000).unwrap();
        assert!(known.notes.iter().any(|n| n.contains("one repetition")));
        assert!(unknown.notes.iter().any(|n| n.contains("not known")));
        assert!(unknown.high - unknown.low > known.high - known.low);
        let none = RebuildMeasurement {
            repetitions: Vec::new(),
            ..run
        };
        assert!(project(GrowthRule::PowerOfTwoDict, 1, &none, 10).is_err());
    }

    #[test]
    fn dragonflys_band_spans_the_split_points_and_its_expires_table() {
        let rule = GrowthRule::DashTable;
        let run = |ttl_keys| RebuildMeasurement {
            keys: 20_000,
            ttl_keys,
            repetitions: vec![modelled(rule, 20_000, 150.0), modelled(rule, 20_000, 150.0)],
        };
        let p = project(rule, 1, &run(0), 200_000).unwrap();
        let expected = modelled(rule, 200_000, 150.0).used_memory as f64;
        assert!(
            p.low as f64 <= expected && expected <= p.high as f64,
            "{p:?}"
        );
        assert_eq!(p.shards, Some(1));
        let with_ttl = project(rule, 1, &run(10_000), 200_000).unwrap();
        assert!(
            with_ttl.high - with_ttl.low > p.high - p.low,
            "{with_ttl:?}"
        );
        assert!(with_ttl.notes.iter().any(|n| n.contains("expires table")));
    }
}
