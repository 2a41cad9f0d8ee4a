//! The RSS at N items, from the projected used_memory: by the RSS the data's growth added in
//! the first repetition's settled reading when the run has one worth trusting, else by the
//! run's fragmentation ratio (which counts the empty server's RSS as if it grew with the data,
//! and so oversizes from a small run). Never below used_memory.

use serde::{Deserialize, Serialize};

use super::measurement::{ChurnGrowth, EngineMeasurement, SettledGrowth};

/// The least growth of used_memory (settled reading less the empty server's) the data-growth
/// ratio is taken from: 8 MiB. RSS moves in 4 KiB pages, and by more than the data at times (a
/// 2 MiB transparent huge page, a client's query buffer, an allocator's cached extent); under
/// 8 MiB one such step is a quarter of the growth or more. 100,000 keys of 100 bytes grow
/// used_memory by 12 to 17 MB on Redis, Valkey and Dragonfly (docs/src/results/).
pub const MIN_DATA_GROWTH_BYTES: u64 = 8 << 20;

/// Which figure the projected RSS came from.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum RssBasis {
    /// baseline RSS + (settled RSS - baseline RSS) / (settled used - baseline used) x
    /// (projected used - baseline used), of the first repetition.
    DataGrowthSettled,
    /// projected used_memory x the median used_memory_rss / used_memory of the repetitions.
    RunRatio,
}

/// The projected RSS, at the point and at the band's top.
#[derive(Clone, Debug, PartialEq)]
pub struct RssProjection {
    pub basis: RssBasis,
    pub rss: u64,
    pub rss_high: u64,
    /// RSS added per byte of used_memory the data added (the data-growth basis).
    pub growth_ratio: Option<f64>,
    /// Why the run ratio was used, or that the figure was raised to used_memory or by a
    /// churn.
    pub note: Option<String>,
    /// The churn's factor the figures were raised by (`spec.churn`), when above 1.
    pub churn_factor: Option<f64>,
    /// peak used_memory / maxmemory of a load past maxmemory (`spec.eviction`), when above 1
    /// and room was made for it (`super::overshoot`).
    pub eviction_overshoot_ratio: Option<f64>,
    /// The factor a snapshot saved under writes raised the figures by (`spec.peak.snapshot`,
    /// `super::peak`).
    pub snapshot_peak_ratio: Option<f64>,
    /// The figures at the peak over before it, as planned: `snapshot_peak_ratio` with a
    /// forking engine's copy raised to a longer save (`super::peak::planned_copy`).
    pub planned_peak_ratio: Option<f64>,
}

impl RssProjection {
    /// Adds `note` after the notes already said (each step that changes the figures says so).
    pub fn add_note(&mut self, note: String) {
        self.note = Some(match self.note.take() {
            Some(before) => format!("{before}; {note}"),
            None => note,
        });
    }
}

/// The data-growth ratio of a settled first repetition, or why it cannot be used.
fn growth_ratio(growth: Option<&SettledGrowth>) -> Result<(f64, SettledGrowth), String> {
    let g = growth.copied().ok_or_else(|| {
        "the first repetition has no settled reading of RSS (set settleSeconds, 2 is enough: RSS right after a load may be older than it); planned with the run's ratio".to_string()
    })?;
    let used = g.settled_used_memory.saturating_sub(g.baseline_used_memory);
    if used < MIN_DATA_GROWTH_BYTES {
        return Err(format!(
            "the data grew used_memory by {used} bytes, under the {MIN_DATA_GROWTH_BYTES} the RSS growth is trusted from; planned with the run's ratio"
        ));
    }
    if g.settled_used_memory_rss <= g.baseline_used_memory_rss {
        return Err(format!(
            "the settled RSS ({}) is not above the empty server's ({}); planned with the run's ratio",
            g.settled_used_memory_rss, g.baseline_used_memory_rss
        ));
    }
    let rss = g.settled_used_memory_rss - g.baseline_used_memory_rss;
    Ok((rss as f64 / used as f64, g))
}

/// The least RSS the load must have added for a churn's factor to be trusted: 4 MiB (a
/// few 2 MiB huge pages or a cached extent would otherwise be most of it).
pub const MIN_CHURN_RSS_GROWTH: u64 = 4 << 20;

/// The RSS at `used` and at `high` (the band's top) of projected used_memory, raised by the
/// churn's factor when the run churned (`spec.churn`): the memory the data's deletes and
/// overwrites left inside the allocator's pages stays with the engine.
pub fn project(measurement: &EngineMeasurement, used: u64, high: u64) -> RssProjection {
    let fresh = project_fresh(measurement, used, high);
    match &measurement.churn {
        Some(churn) => churned(fresh, churn),
        None => fresh,
    }
}

/// The churn's factor: RSS the last round left above the empty server's, over what the load
/// left; the projection's RSS above the empty server's raised by it when above 1.
fn churned(mut fresh: RssProjection, churn: &ChurnGrowth) -> RssProjection {
    let loaded = churn.loaded_rss.saturating_sub(churn.baseline_rss);
    if loaded < MIN_CHURN_RSS_GROWTH {
        fresh.add_note(format!(
            "spec.churn's factor not used: the load added {loaded} bytes of RSS, under the {MIN_CHURN_RSS_GROWTH} it is trusted from"
        ));
        return fresh;
    }
    let factor = churn.churned_rss.saturating_sub(churn.baseline_rss) as f64 / loaded as f64;
    if factor <= 1.0 {
        fresh.add_note(format!(
            "spec.churn left RSS at {factor:.2} times the load's growth, not above it: planned from the load"
        ));
        return fresh;
    }
    let raise = |rss: u64| {
        let above = rss.saturating_sub(churn.baseline_rss) as f64;
        (churn.baseline_rss as f64 + above * factor).ceil() as u64
    };
    fresh.rss = raise(fresh.rss);
    fresh.rss_high = raise(fresh.rss_high);
    fresh.churn_factor = Some(factor);
    fresh.add_note(format!(
        "raised by spec.churn's factor {factor:.2} (the first repetition's RSS after its last round, over the load's, each above the empty server's): what deletes and overwrites leave in the allocator's pages"
    ));
    fresh
}

fn project_fresh(measurement: &EngineMeasurement, used: u64, high: u64) -> RssProjection {
    match growth_ratio(measurement.settled_growth.as_ref()) {
        Ok((ratio, g)) => {
            let at = |u: u64| {
                g.baseline_used_memory_rss as f64
                    + ratio * (u as f64 - g.baseline_used_memory as f64)
            };
            let (rss, rss_high) = (at(used), at(high));
            // RSS below used_memory is allocated memory not yet touched (a fresh bucket array
            // is, until keys fill it), which the engine may touch: planned at used_memory.
            let note = (rss < used as f64).then(|| {
                format!(
                    "the data's growth gives an RSS of {} bytes, below the projected used_memory: planned at used_memory (allocated pages the engine may touch)",
                    rss.round()
                )
            });
            RssProjection {
                basis: RssBasis::DataGrowthSettled,
                rss: (rss.round() as u64).max(used),
                rss_high: (rss_high.ceil() as u64).max(high),
                growth_ratio: Some(ratio),
                note,
                churn_factor: None,
                eviction_overshoot_ratio: None,
                snapshot_peak_ratio: None,
                planned_peak_ratio: None,
            }
        }
        Err(why) => {
            let ratio = measurement.fragmentation_ratio.unwrap_or(1.0);
            let note = if ratio < 1.0 {
                format!("{why}; its ratio {ratio:.3} is below 1, so planned at used_memory")
            } else {
                why
            };
            let ratio = ratio.max(1.0);
            RssProjection {
                basis: RssBasis::RunRatio,
                rss: (used as f64 * ratio).round() as u64,
                rss_high: (high as f64 * ratio).ceil() as u64,
                growth_ratio: None,
                note: Some(note),
                churn_factor: None,
                eviction_overshoot_ratio: None,
                snapshot_peak_ratio: None,
                planned_peak_ratio: None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measurement(settled: Option<SettledGrowth>, ratio: f64) -> EngineMeasurement {
        EngineMeasurement {
            fragmentation_ratio: Some(ratio),
            settled_growth: settled,
            ..EngineMeasurement::bare("e", "valkey", "9.1.2")
        }
    }

    #[test]
    fn a_churn_raises_the_projected_rss_above_the_empty_server_by_its_factor() {
        let mut m = measurement(Some(settled(16_000_000, 20_000_000)), 1.6);
        let fresh = project(&m, 161_000_000, 171_000_000);
        // The load added 20 MB of RSS; after its last round the engine held 30 MB above the
        // empty server's 7.5 MB: a factor of 1.5.
        m.churn = Some(ChurnGrowth {
            baseline_rss: 7_500_000,
            loaded_rss: 27_500_000,
            churned_rss: 37_500_000,
        });
        let raised = project(&m, 161_000_000, 171_000_000);
        assert_eq!(raised.churn_factor, Some(1.5));
        assert_eq!(raised.rss, 7_500_000 + (fresh.rss - 7_500_000) * 3 / 2);
        assert!(
            raised
                .note
                .as_deref()
                .unwrap()
                .contains("spec.churn's factor 1.50")
        );
        // A churn that left RSS below the load's changes nothing, and says so.
        m.churn = Some(ChurnGrowth {
            baseline_rss: 7_500_000,
            loaded_rss: 27_500_000,
            churned_rss: 20_000_000,
        });
        let same = project(&m, 161_000_000, 171_000_000);
        assert_eq!(same.rss, fresh.rss);
        assert!(
            same.note
                .as_deref()
                .unwrap()
                .contains("planned from the load")
        );
    }

    /// A 100,000-key run in round numbers: 7.5 MB of RSS empty, `data` bytes of used_memory
    /// adding `rss` bytes of RSS.
    fn settled(data: u64, rss: u64) -> SettledGrowth {
        SettledGrowth {
            baseline_used_memory: 1_000_000,
            baseline_used_memory_rss: 7_500_000,
            settled_used_memory: 1_000_000 + data,
            settled_used_memory_rss: 7_500_000 + rss,
        }
    }

    #[test]
    fn a_settled_run_projects_the_rss_of_its_data_growth_from_the_empty_server() {
        let m = measurement(Some(settled(16_000_000, 20_000_000)), 1.6);
        let p = project(&m, 161_000_000, 171_000_000);
        assert_eq!(p.basis, RssBasis::DataGrowthSettled);
        assert_eq!(p.growth_ratio, Some(1.25));
        // 7.5 MB + 1.25 x 160 MB, where the run ratio would say 257.6 MB.
        assert_eq!(p.rss, 207_500_000);
        assert_eq!(p.rss_high, 220_000_000);
        assert_eq!(p.note, None);
    }

    #[test]
    fn the_run_ratio_is_used_and_said_without_a_settled_reading_or_with_too_little_data() {
        let none = project(&measurement(None, 1.6), 100_000_000, 110_000_000);
        assert_eq!(none.basis, RssBasis::RunRatio);
        assert_eq!((none.rss, none.rss_high), (160_000_000, 176_000_000));
        assert!(none.note.unwrap().contains("no settled reading"));
        let small = project(
            &measurement(Some(settled(MIN_DATA_GROWTH_BYTES - 1, 9_000_000)), 1.6),
            100_000_000,
            110_000_000,
        );
        assert_eq!(small.basis, RssBasis::RunRatio);
        assert!(small.note.unwrap().contains("under the 8388608"));
        let flat = project(
            &measurement(Some(settled(16_000_000, 0)), 1.6),
            100_000_000,
            110_000_000,
        );
        assert_eq!(flat.basis, RssBasis::RunRatio);
        assert!(flat.note.unwrap().contains("not above the empty server's"));
    }

    #[test]
    fn no_rss_below_used_memory_is_planned_on_either_basis() {
        // The data added half its bytes in RSS (pages allocated, not touched).
        let p = project(
            &measurement(Some(settled(16_000_000, 8_000_000)), 0.9),
            100_000_000,
            110_000_000,
        );
        assert_eq!(p.basis, RssBasis::DataGrowthSettled);
        assert_eq!((p.rss, p.rss_high), (100_000_000, 110_000_000));
        assert!(p.note.unwrap().contains("planned at used_memory"));
        let r = project(&measurement(None, 0.9), 100_000_000, 110_000_000);
        assert_eq!((r.rss, r.rss_high), (100_000_000, 110_000_000));
        assert!(r.note.unwrap().contains("below 1"));
    }
}
