//! used_memory at N items, projected from a smaller run's growth curve.
//!
//! Bytes per item from a small run cannot be multiplied by N: the table every item goes into
//! (the keyspace, or a sorted set's own dict) grows in steps. The model is
//!
//! ```text
//! used_memory(n) = fixed + per_entry * entries(n) + per_bucket * buckets(entries(n))
//! ```
//!
//! where `buckets` is the engine's growth rule, read from its source:
//!
//! - **Redis, and Valkey before 8.1** (`dict.c`, `_dictExpandIfNeeded`): a bucket array of
//!   pointers, a power of two of at least 4 buckets, grown when an add finds as many entries
//!   as buckets (load factor 1) to the next power of two above the count. 2^25 buckets hold
//!   33,554,432 entries; the next one doubles the array.
//! - **Valkey 8.1 and later** (`hashtable.c`, `hashtableExpandIfNeeded`, `resize`): 64-byte
//!   buckets of 7 entries, a power of two of them, grown when an add would exceed 7 entries a
//!   bucket on average (`MAX_FILL_PERCENT_SOFT` 100) to `ceil(n * 5 / 32)` buckets rounded
//!   up to a power of two (twice as many).
//! - **Dragonfly** (`dash.h`, [`super::dash_table`]): a dash table per shard (thread) of
//!   840-slot segments, each split in two when it holds about `split_at` entries; `buckets` is
//!   the expected number of segments, and `split_at` is fitted with the costs (the split
//!   points whose fit is at most twice as bad as the best one all go into the band). Without
//!   the run's thread count the rule is not known: a straight line with a wider band.
//!
//! While a table grows both arrays are held until every old bucket is moved (incremental
//! rehashing: a bucket per lookup and per add), so the memory just after a step is higher than
//! the model's steady figure. Points that may be inside such a window are left out of the fit,
//! and a projection that lands inside one widens its band up to both arrays.
//!
//! `per_entry`, `per_bucket` and `fixed` are fitted by least squares to the run's own curve;
//! the band is twice the fit's standard error of prediction at N, plus a margin for what the
//! model leaves out ([`KNOWN_RULE_MARGIN`], [`UNKNOWN_RULE_MARGIN`]). For an unknown rule the
//! band also spans every bytes-per-entry figure the run went through, times N: Dragonfly's
//! curve swings by about a quarter between its steps (docs/src/results/).

use serde::{Deserialize, Serialize};

use crate::crd::EngineKind;

/// The margin added to the band, as a fraction of the projected data, when the growth rule is
/// known: what the fit's own error does not see (allocator size classes, a Valkey bucket's
/// child buckets, which depend on how full the table is).
pub const KNOWN_RULE_MARGIN: f64 = 0.01;

/// The margin when the growth rule is not known (Dragonfly without its thread count): the
/// straight line can be off by whatever the table's steps are.
pub const UNKNOWN_RULE_MARGIN: f64 = 0.05;

/// How an engine's main hash table grows.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum GrowthRule {
    /// Redis's dict: pointer buckets, a power of two, load factor 1.
    PowerOfTwoDict,
    /// Valkey 8.1+'s hashtable: 64-byte buckets of 7 entries, a power of two of them.
    BucketedHashtable,
    /// Dragonfly's dash table: a table per shard of 840-slot segments split one at a time.
    DashTable,
    /// Not known to the model (Dragonfly when the run does not say its thread count).
    Unknown,
}

impl GrowthRule {
    /// The rule of an engine (`redis`, `valkey`, `dragonfly`) at a version (`8.1.7`), with the
    /// threads it ran (Dragonfly's shards: without them, where its steps land is not known).
    pub fn of(engine: &str, version: &str, threads: Option<u32>) -> Self {
        let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
        let major = parts.next().unwrap_or(0);
        let minor = parts.next().unwrap_or(0);
        match engine.parse::<EngineKind>() {
            Ok(EngineKind::Redis) => GrowthRule::PowerOfTwoDict,
            Ok(EngineKind::Valkey) if (major, minor) >= (8, 1) => GrowthRule::BucketedHashtable,
            Ok(EngineKind::Valkey) => GrowthRule::PowerOfTwoDict,
            Ok(EngineKind::Dragonfly) if threads.is_some_and(|t| t > 0) => GrowthRule::DashTable,
            Ok(EngineKind::Dragonfly) | Err(_) => GrowthRule::Unknown,
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            GrowthRule::PowerOfTwoDict => {
                "power-of-two dict (8-byte buckets, load factor 1, Redis dict.c)"
            }
            GrowthRule::BucketedHashtable => {
                "bucketed hashtable (64-byte buckets of 7 entries, Valkey 8.1+ hashtable.c)"
            }
            GrowthRule::DashTable => {
                "dash table (840-slot segments split one at a time, a table per shard, Dragonfly dash.h)"
            }
            GrowthRule::Unknown => {
                "growth rule not known to the model: a straight line through the curve, with a wider band"
            }
        }
    }

    /// The bytes of one bucket, from the structure (the fit's fallback when the curve crosses
    /// no step).
    pub fn bucket_bytes(self) -> f64 {
        match self {
            GrowthRule::PowerOfTwoDict => 8.0,
            GrowthRule::BucketedHashtable => 64.0,
            GrowthRule::DashTable => super::dash_table::SEGMENT_BYTES,
            GrowthRule::Unknown => 0.0,
        }
    }

    /// Entries one bucket holds before the table grows.
    fn entries_per_bucket(self) -> u64 {
        match self {
            GrowthRule::BucketedHashtable => 7,
            _ => 1,
        }
    }

    /// The buckets of the table once it holds `entries` and no resize is under way.
    /// (Dragonfly's segments depend on the fitted split point: [`super::dash_table::segments`].)
    pub fn buckets(self, entries: u64) -> u64 {
        match self {
            GrowthRule::Unknown | GrowthRule::DashTable => 0,
            GrowthRule::PowerOfTwoDict => entries.next_power_of_two().max(4),
            GrowthRule::BucketedHashtable => entries.div_ceil(7).next_power_of_two().max(1),
        }
    }

    /// When the table holds `entries` and may still hold its previous array: the previous
    /// array's buckets. The previous array goes once every old bucket has moved. Every
    /// workload's command looks its key (or member) up before adding it, and the lookup and the
    /// add each move one bucket, so a window lasts at most half as many adds as the old array
    /// has non-empty buckets (for a dict at load factor 1, 1 - 1/e of them; a Valkey bucket of
    /// 7 entries is all but never empty). Redis's sorted set measured here agrees: 2^25 + 1
    /// members grow the dict, 34M still hold both arrays, 50M one (docs/src/results/).
    /// A dash table frees nothing when it splits, so it has no such window.
    pub fn old_buckets_within_window(self, entries: u64) -> Option<u64> {
        if matches!(self, GrowthRule::Unknown | GrowthRule::DashTable) {
            return None;
        }
        let buckets = self.buckets(entries);
        let old = buckets / 2;
        if old == 0 || buckets == self.buckets(0) {
            return None;
        }
        // The step happened at the add after old * entries_per_bucket entries.
        let grew_at = old * self.entries_per_bucket() + 1;
        let non_empty = match self {
            GrowthRule::PowerOfTwoDict => (old as f64 * (1.0 - (-1f64).exp())).ceil() as u64,
            _ => old,
        };
        let window = non_empty.div_ceil(2);
        (entries >= grew_at && entries < grew_at + window).then_some(old)
    }
}

/// One point of a growth curve, as the model reads it: the table's entries and used_memory.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CurvePoint {
    pub entries: u64,
    pub used_memory: u64,
}

/// used_memory projected at N, with its band.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Projection {
    pub used_memory: u64,
    pub low: u64,
    pub high: u64,
    pub growth_rule: GrowthRule,
    /// Fitted bytes per entry (key, member, field) of the table.
    pub per_entry_bytes: f64,
    /// Fitted bytes per bucket of the table (a Dragonfly segment; 0 for an unknown rule).
    pub per_bucket_bytes: f64,
    /// Dragonfly: the shards (threads) projected for, and the entries a segment was fitted to
    /// hold when it splits (the best fit's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shards: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_at: Option<f64>,
    /// The curve's points the fit used.
    pub points_fitted: usize,
    /// What the reader should know about this projection (an unknown rule, a step inside the
    /// band, a fallback), in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl Projection {
    /// The projection of `figures` (the point, the band's low and high, in bytes; rounded,
    /// never below zero) under `rule`, with its fitted costs, the points it rests on and its
    /// notes; no shards or split point (Dragonfly's callers set them).
    pub fn of(
        rule: GrowthRule,
        figures: [f64; 3],
        costs: (f64, f64),
        points_fitted: usize,
        notes: Vec<String>,
    ) -> Self {
        let [point, low, high] = figures.map(|v| v.round().max(0.0) as u64);
        Self {
            used_memory: point,
            low,
            high,
            growth_rule: rule,
            per_entry_bytes: costs.0,
            per_bucket_bytes: costs.1,
            shards: None,
            split_at: None,
            points_fitted,
            notes,
        }
    }
}

/// Least squares of `y` on the columns of `x` (each row one point), with the covariance
/// factor `(X'X)^-1`. `None` when the columns are not independent.
fn least_squares(x: &[Vec<f64>], y: &[f64]) -> Option<(Vec<f64>, Vec<Vec<f64>>, f64)> {
    let k = x.first()?.len();
    let mut xtx = vec![vec![0.0; k]; k];
    let mut xty = vec![0.0; k];
    for (row, yi) in x.iter().zip(y) {
        for i in 0..k {
            xty[i] += row[i] * yi;
            for j in 0..k {
                xtx[i][j] += row[i] * row[j];
            }
        }
    }
    let inverse = invert(&xtx)?;
    let beta: Vec<f64> = (0..k)
        .map(|i| (0..k).map(|j| inverse[i][j] * xty[j]).sum())
        .collect();
    let residuals: f64 = x
        .iter()
        .zip(y)
        .map(|(row, yi)| {
            let fit: f64 = row.iter().zip(&beta).map(|(a, b)| a * b).sum();
            (yi - fit).powi(2)
        })
        .sum();
    let dof = x.len().saturating_sub(k).max(1) as f64;
    Some((beta, inverse, residuals / dof))
}

/// Gauss-Jordan inverse of a small matrix; `None` when it is (nearly) singular.
fn invert(m: &[Vec<f64>]) -> Option<Vec<Vec<f64>>> {
    let n = m.len();
    let mut a: Vec<Vec<f64>> = m
        .iter()
        .enumerate()
        .map(|(i, row)| {
            let mut r = row.clone();
            r.extend((0..n).map(|j| if i == j { 1.0 } else { 0.0 }));
            r
        })
        .collect();
    for col in 0..n {
        let pivot = (col..n).max_by(|&p, &q| a[p][col].abs().total_cmp(&a[q][col].abs()))?;
        let scale = a.iter().map(|r| r[col].abs()).fold(0.0, f64::max);
        if a[pivot][col].abs() <= scale * 1e-12 || a[pivot][col] == 0.0 {
            return None;
        }
        a.swap(col, pivot);
        let p = a[col][col];
        for v in a[col].iter_mut() {
            *v /= p;
        }
        for r in 0..n {
            if r != col {
                let f = a[r][col];
                if f != 0.0 {
                    let pivot_row = a[col].clone();
                    for (v, pv) in a[r].iter_mut().zip(pivot_row) {
                        *v -= f * pv;
                    }
                }
            }
        }
    }
    Some(a.into_iter().map(|r| r[n..].to_vec()).collect())
}

/// A least-squares fit's projection at one point: the costs, the point and its variance, and
/// the sum of squared residuals.
struct LinearFit {
    beta: Vec<f64>,
    point: f64,
    variance: f64,
    residuals: f64,
}

/// Fits `y` on the rows of `x` and projects at `at`.
fn fit_at(x: &[Vec<f64>], y: &[f64], at: &[f64]) -> Option<LinearFit> {
    let (beta, cov, s2) = least_squares(x, y)?;
    let point = at.iter().zip(&beta).map(|(a, b)| a * b).sum();
    let variance = (0..at.len())
        .map(|i| {
            (0..at.len())
                .map(|j| at[i] * cov[i][j] * at[j])
                .sum::<f64>()
        })
        .sum::<f64>()
        * s2;
    let dof = x.len().saturating_sub(at.len()).max(1) as f64;
    Some(LinearFit {
        beta,
        point,
        variance,
        residuals: s2 * dof,
    })
}

/// The distinct entry counts of a curve, refused in words below three.
fn require_distinct_points(points: &[CurvePoint]) -> Result<(), String> {
    let distinct: std::collections::BTreeSet<u64> = points.iter().map(|p| p.entries).collect();
    if distinct.len() < 3 {
        return Err(format!(
            "the growth curve has {} distinct points; a projection needs at least 3 (sample used_memory more often: a smaller sampleEvery, or more items)",
            distinct.len()
        ));
    }
    Ok(())
}

/// Dragonfly's projection at `entries` for `shards` tables ([`super::dash_table`]): for every
/// split point, the least-squares costs (fixed, per entry, per segment); the best fit gives
/// the projection, and every split point whose residuals are at most twice the best's gives
/// its own projection and band, all inside the band reported. (The residuals of a sawtooth
/// are not independent, so a textbook interval on the split point would be far too narrow.)
fn project_dash_table(
    shards: u32,
    curve: &[CurvePoint],
    entries: u64,
) -> Result<Projection, String> {
    use super::dash_table::{SEGMENT_SLOTS, segments, split_points};
    require_distinct_points(curve)?;
    let y: Vec<f64> = curve.iter().map(|p| p.used_memory as f64).collect();
    let (first_entries, last_entries) = (
        curve.iter().map(|p| p.entries).min().unwrap_or(0),
        curve.iter().map(|p| p.entries).max().unwrap_or(0),
    );
    let fits: Vec<(u32, LinearFit)> = split_points()
        // A split point at which the curve would see no split leaves the segment column
        // constant: the fit would give its cost to noise.
        .filter(|&split_at| {
            let t = f64::from(split_at);
            segments(last_entries, shards, t) - segments(first_entries, shards, t) >= 0.5
        })
        .filter_map(|split_at| {
            let t = f64::from(split_at);
            let x: Vec<Vec<f64>> = curve
                .iter()
                .map(|p| vec![1.0, p.entries as f64, segments(p.entries, shards, t)])
                .collect();
            let at = [1.0, entries as f64, segments(entries, shards, t)];
            fit_at(&x, &y, &at)
                .filter(|f| f.beta[1] > 0.0 && f.beta[2] > 0.0)
                .map(|f| (split_at, f))
        })
        .collect();
    // The curve must show the splits: a fit with segments at least twice as good as a
    // straight line. A run too small to reach a shard's first splits (near 8 x 825 keys a
    // shard) cannot say where the later ones land.
    let straight: Vec<Vec<f64>> = curve.iter().map(|p| vec![1.0, p.entries as f64]).collect();
    let line_residuals = fit_at(&straight, &y, &[1.0, entries as f64]).map(|f| f.residuals);
    let best = fits
        .iter()
        .min_by(|a, b| a.1.residuals.total_cmp(&b.1.residuals))
        .filter(|(_, f)| line_residuals.is_none_or(|line| f.residuals * 2.0 < line));
    let Some((best_split, best)) = best else {
        let mut line = project(GrowthRule::Unknown, shards, curve, entries)?;
        line.notes.insert(
            0,
            format!("the curve shows no dash-table segment split ({last_entries} entries over {shards} shard(s); a shard's first splits come near 8 x 825 entries), so where the later ones land is not known"),
        );
        return Ok(line);
    };
    let accepted: Vec<&(u32, LinearFit)> = fits
        .iter()
        .filter(|(_, f)| f.residuals <= 2.0 * best.residuals)
        .collect();
    let band = |f: &LinearFit| {
        let half =
            2.0 * f.variance.max(0.0).sqrt() + KNOWN_RULE_MARGIN * (f.point - f.beta[0]).max(0.0);
        (f.point - half, f.point + half)
    };
    let low = accepted
        .iter()
        .map(|(_, f)| band(f).0)
        .fold(f64::INFINITY, f64::min);
    let high = accepted
        .iter()
        .map(|(_, f)| band(f).1)
        .fold(f64::NEG_INFINITY, f64::max);
    let first = accepted
        .iter()
        .map(|(t, _)| *t)
        .min()
        .unwrap_or(*best_split);
    let last = accepted
        .iter()
        .map(|(t, _)| *t)
        .max()
        .unwrap_or(*best_split);
    let mut notes = vec![format!(
        "dash table of {shards} shard(s) (the run's threads): segments of {SEGMENT_SLOTS} slots split at {best_split} entries ({:.1}% full; {first} to {last} fit within twice the best residuals, and all are in the band); with another --proactor_threads the steps land elsewhere: project from a run with the node's thread count",
        f64::from(*best_split) / f64::from(SEGMENT_SLOTS) * 100.0
    )];
    if first == split_points().min().unwrap_or(0) || last == SEGMENT_SLOTS {
        notes.push(
            "the curve does not pin the split point down (it crosses too few segment splits): the band spans every split point that fits".to_string(),
        );
    }
    Ok(Projection {
        shards: Some(shards),
        split_at: Some(f64::from(*best_split)),
        ..Projection::of(
            GrowthRule::DashTable,
            [best.point, low, high],
            (best.beta[1], best.beta[2]),
            curve.len(),
            notes,
        )
    })
}

/// Projects used_memory at `entries` from a curve, for an engine of `shards` tables (Dragonfly's
/// threads; the other engines have one). Needs at least three points with different entry
/// counts; says what it could not do in words otherwise.
pub fn project(
    rule: GrowthRule,
    shards: u32,
    curve: &[CurvePoint],
    entries: u64,
) -> Result<Projection, String> {
    if rule == GrowthRule::DashTable {
        return project_dash_table(shards, curve, entries);
    }
    let mut notes = Vec::new();
    let steady: Vec<CurvePoint> = curve
        .iter()
        .copied()
        .filter(|p| rule.old_buckets_within_window(p.entries).is_none())
        .collect();
    // With too few points outside the windows, the fit takes them all (and says so).
    let points = if steady.len() >= 3 {
        steady
    } else {
        if rule != GrowthRule::Unknown {
            notes.push(
                "too few points of the curve lie outside a table's resize; the fit uses all of them"
                    .to_string(),
            );
        }
        curve.to_vec()
    };
    require_distinct_points(&points)?;
    let y: Vec<f64> = points.iter().map(|p| p.used_memory as f64).collect();
    let buckets = |n: u64| rule.buckets(n) as f64;
    // The full model, when the curve crosses at least one step of the table.
    let steps: std::collections::BTreeSet<u64> =
        points.iter().map(|p| rule.buckets(p.entries)).collect();
    let mut fitted = None;
    if rule != GrowthRule::Unknown && steps.len() >= 2 {
        let x: Vec<Vec<f64>> = points
            .iter()
            .map(|p| vec![1.0, p.entries as f64, buckets(p.entries)])
            .collect();
        if let Some((beta, cov, s2)) = least_squares(&x, &y)
            && beta[2] > 0.0
        {
            fitted = Some((beta, cov, s2, vec![1.0, entries as f64, buckets(entries)]));
        } else {
            notes.push(format!(
                "the curve gives no positive cost per bucket; the structure's {} bytes a bucket are used instead",
                rule.bucket_bytes()
            ));
        }
    } else if rule != GrowthRule::Unknown {
        notes.push(format!(
            "the curve crosses no step of the table; the structure's {} bytes a bucket are used instead of a fitted cost",
            rule.bucket_bytes()
        ));
    }
    let (beta, cov, s2, at) = match fitted {
        Some(f) => f,
        None => {
            // Per-bucket cost fixed: fit fixed + per_entry on what the buckets leave.
            let c = rule.bucket_bytes();
            let x: Vec<Vec<f64>> = points.iter().map(|p| vec![1.0, p.entries as f64]).collect();
            let y: Vec<f64> = points
                .iter()
                .map(|p| p.used_memory as f64 - c * buckets(p.entries))
                .collect();
            let (mut beta, cov, s2) =
                least_squares(&x, &y).ok_or("the growth curve's points do not determine a line")?;
            beta.push(c);
            // The fixed bucket cost's term is added to the projection below, outside the fit.
            (beta, cov, s2, vec![1.0, entries as f64])
        }
    };
    let bucket_term = if at.len() == 2 {
        beta[2] * buckets(entries)
    } else {
        0.0
    };
    let point: f64 = at.iter().zip(&beta).map(|(a, b)| a * b).sum::<f64>() + bucket_term;
    let variance: f64 = (0..at.len())
        .map(|i| {
            (0..at.len())
                .map(|j| at[i] * cov[i][j] * at[j])
                .sum::<f64>()
        })
        .sum::<f64>()
        * s2;
    let data = (point - beta[0]).max(0.0);
    let margin = match rule {
        GrowthRule::Unknown => {
            notes.push(rule.describe().to_string());
            UNKNOWN_RULE_MARGIN
        }
        _ => KNOWN_RULE_MARGIN,
    };
    let half = 2.0 * variance.max(0.0).sqrt() + margin * data;
    let mut low = point - half;
    let mut high = point + half;
    if rule == GrowthRule::Unknown {
        // A table that grows in steps the model does not know swings around any line: the
        // band spans the bytes per entry the run itself went through (past its first quarter,
        // where fixed costs still weigh), times N, widened by the margin.
        let last = points.iter().map(|p| p.entries).max().unwrap_or(0);
        let per_entry: Vec<f64> = points
            .iter()
            .filter(|p| p.entries * 4 >= last && p.entries > 0)
            .map(|p| (p.used_memory as f64 - beta[0]) / p.entries as f64)
            .collect();
        let lowest = per_entry.iter().copied().fold(f64::INFINITY, f64::min);
        let highest = per_entry.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if lowest.is_finite() && highest.is_finite() {
            let n = entries as f64;
            low = low.min(beta[0] + n * lowest * (1.0 - margin));
            high = high.max(beta[0] + n * highest * (1.0 + margin));
        }
    }
    if let Some(old) = rule.old_buckets_within_window(entries) {
        high += beta[2] * old as f64;
        notes.push(format!(
            "{entries} entries may be inside the table's resize (both bucket arrays held): the band's top includes the previous array"
        ));
    }
    let entry_cost = beta[1];
    if entry_cost <= 0.0 {
        return Err("the growth curve does not rise with the items loaded".to_string());
    }
    Ok(Projection::of(
        rule,
        [point, low, high],
        (entry_cost, beta[2]),
        points.len(),
        notes,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_growth_rules_step_where_the_engines_sources_say() {
        let dict = GrowthRule::PowerOfTwoDict;
        assert_eq!(dict.buckets(33_554_432), 1 << 25);
        assert_eq!(dict.buckets(33_554_433), 1 << 26);
        assert_eq!(dict.buckets(1), 4);
        let table = GrowthRule::BucketedHashtable;
        assert_eq!(table.buckets(7 << 22), 1 << 22);
        assert_eq!(table.buckets((7 << 22) + 1), 1 << 23);
        // 34M members: just after Redis's 2^25 step, both arrays may still be held.
        assert_eq!(dict.old_buckets_within_window(34_000_000), Some(1 << 25));
        assert_eq!(dict.old_buckets_within_window(50_000_000), None);
        assert_eq!(GrowthRule::of("valkey", "8.1.7", None), table);
        assert_eq!(GrowthRule::of("valkey", "8.0.9", None), dict);
        assert_eq!(GrowthRule::of("redis", "8.6.3", None), dict);
        assert_eq!(
            GrowthRule::of("dragonfly", "1.40.0", Some(2)),
            GrowthRule::DashTable
        );
        // Without its thread count, where Dragonfly's steps land is not known.
        assert_eq!(
            GrowthRule::of("dragonfly", "1.40.0", None),
            GrowthRule::Unknown
        );
    }

    /// A curve made by the model itself, so the fit must give its costs back.
    fn model_curve(
        rule: GrowthRule,
        fixed: f64,
        per_entry: f64,
        per_bucket: f64,
    ) -> Vec<CurvePoint> {
        (1..=100)
            .map(|i| {
                let entries = i * 1000;
                CurvePoint {
                    entries,
                    used_memory: (fixed
                        + per_entry * entries as f64
                        + per_bucket * rule.buckets(entries) as f64)
                        as u64,
                }
            })
            .collect()
    }

    #[test]
    fn the_fit_recovers_the_costs_of_a_curve_that_follows_the_model() {
        let rule = GrowthRule::PowerOfTwoDict;
        let curve = model_curve(rule, 900_000.0, 150.0, 8.0);
        let p = project(rule, 1, &curve, 1_000_000).unwrap();
        assert!((p.per_entry_bytes - 150.0).abs() < 0.01, "{p:?}");
        assert!((p.per_bucket_bytes - 8.0).abs() < 0.01, "{p:?}");
        let expected = 900_000 + 150 * 1_000_000 + 8 * (1 << 20);
        assert!(
            (p.used_memory as i64 - expected as i64).abs() < 100,
            "{p:?}"
        );
        assert!(p.low <= expected && p.high >= expected);
        // A straight line's projection misses the step: the rule matters.
        let naive = 150.0 * 1e6 + 8.0 * 131072.0 / 100_000.0 * 1e6;
        assert!((naive - expected as f64).abs() > 1e5);
    }

    #[test]
    fn an_unknown_rule_says_so_and_widens_the_band() {
        let curve = model_curve(GrowthRule::PowerOfTwoDict, 900_000.0, 150.0, 0.0);
        let known = project(GrowthRule::PowerOfTwoDict, 1, &curve, 1_000_000).unwrap();
        let unknown = project(GrowthRule::Unknown, 1, &curve, 1_000_000).unwrap();
        assert!(unknown.high - unknown.low > known.high - known.low);
        assert!(
            unknown.notes.iter().any(|n| n.contains("not known")),
            "{unknown:?}"
        );
    }

    /// A Dragonfly-like curve: `shards` dash tables whose segments split at 825 entries,
    /// 80 bytes a key and 32,700 a segment, sampled every 1,000 keys to 100,000.
    fn dash_curve(shards: u32) -> Vec<CurvePoint> {
        (1..=100)
            .map(|i| {
                let entries = i * 1000;
                let segments = super::super::dash_table::segments(entries, shards, 825.0);
                CurvePoint {
                    entries,
                    used_memory: (25_000.0 + 80.0 * entries as f64 + 32_700.0 * segments) as u64,
                }
            })
            .collect()
    }

    #[test]
    fn the_dash_table_fit_finds_the_split_point_and_projects_for_the_runs_shards() {
        for shards in [1, 3] {
            let curve = dash_curve(shards);
            let p = project(GrowthRule::DashTable, shards, &curve, 1_000_000).unwrap();
            assert_eq!(p.split_at, Some(825.0), "{p:?}");
            assert_eq!(p.shards, Some(shards));
            assert!((p.per_entry_bytes - 80.0).abs() < 0.1, "{p:?}");
            let segments = super::super::dash_table::segments(1_000_000, shards, 825.0);
            let expected = 25_000.0 + 80.0 * 1e6 + 32_700.0 * segments;
            assert!(
                (p.used_memory as f64 / expected - 1.0).abs() < 1e-4,
                "{shards} shards: {p:?} against {expected}"
            );
            assert!(p.low as f64 <= expected && expected <= p.high as f64);
            assert!(p.notes[0].contains(&format!("{shards} shard(s)")), "{p:?}");
        }
        // 1M keys take 2048 segments in one shard, 3 x 512 in three (333,333 keys each, between
        // two waves): the thread count moves the projection by more than the band of either.
        let one = project(GrowthRule::DashTable, 1, &dash_curve(1), 1_000_000).unwrap();
        let three = project(GrowthRule::DashTable, 3, &dash_curve(3), 1_000_000).unwrap();
        assert!(one.used_memory.abs_diff(three.used_memory) > (one.high - one.low) / 2);
    }

    #[test]
    fn a_dragonfly_curve_that_reaches_no_split_gets_the_unknown_rules_wide_band() {
        // 5,000 keys in one shard: below its first splits (near 8 x 825), a straight line.
        let curve: Vec<CurvePoint> = dash_curve(1).into_iter().take(5).collect();
        let p = project(GrowthRule::DashTable, 1, &curve, 1_000_000).unwrap();
        assert_eq!(p.growth_rule, GrowthRule::Unknown, "{p:?}");
        assert!(p.notes[0].contains("no dash-table segment split"), "{p:?}");
        // The band is the unknown rule's: the straight line's figure plus at least 5%.
        assert!(p.high as f64 >= p.used_memory as f64 * 1.04, "{p:?}");
        // 10,000 keys cross the first wave: the rule is fitted.
        let curve: Vec<CurvePoint> = dash_curve(1).into_iter().take(10).collect();
        let p = project(GrowthRule::DashTable, 1, &curve, 1_000_000).unwrap();
        assert_eq!(p.growth_rule, GrowthRule::DashTable, "{p:?}");
    }

    #[test]
    fn a_curve_of_too_few_points_is_refused_in_words() {
        let curve = vec![CurvePoint {
            entries: 1000,
            used_memory: 10_000,
        }];
        let err = project(GrowthRule::PowerOfTwoDict, 1, &curve, 10).unwrap_err();
        assert!(err.contains("at least 3"), "{err}");
    }
}
