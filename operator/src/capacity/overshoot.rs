//! Room for what a load past maxmemory measured (`spec.eviction`): an engine at its limit goes
//! above it before it evicts (the write that crosses the limit is done first, and a hash
//! table's grow allocates its new bucket array whole: redis#2716 saw 16.11 GB go to 18.26 GB at
//! maxmemory 16g). A node whose engine is given maxmemory at the projected used_memory must
//! hold that peak, so the projected RSS is raised by the same share of the projected
//! used_memory: (peak used_memory / maxmemory - 1) x projected used_memory, at the point and at
//! the band's top. The share, not the bytes: the bucket array of a table at N keys grows with
//! N.

use super::measurement::EvictionPeak;
use super::rss::RssProjection;

/// `rss` with room for `eviction`'s overshoot at `used` (and `high`, the band's top) of
/// projected used_memory; said in its note either way.
pub fn make_room(
    mut rss: RssProjection,
    eviction: Option<&EvictionPeak>,
    used: u64,
    high: u64,
) -> RssProjection {
    let Some(peak) = eviction else {
        return rss;
    };
    let ratio = peak.ratio();
    let note = if ratio <= 1.0 {
        format!(
            "spec.eviction's load past maxmemory peaked at {} bytes of used_memory, not above its limit of {}: no room added for an overshoot",
            peak.peak_used_memory, peak.limit
        )
    } else {
        // (peak - limit) / limit of u, in integers rounded up (no float noise in bytes).
        let over = u128::from(peak.peak_used_memory - peak.limit);
        let extra = |u: u64| {
            u64::try_from((over * u128::from(u)).div_ceil(u128::from(peak.limit)))
                .unwrap_or(u64::MAX)
        };
        let added = extra(used);
        rss.rss = rss.rss.saturating_add(added);
        rss.rss_high = rss.rss_high.saturating_add(extra(high));
        rss.eviction_overshoot_ratio = Some(ratio);
        format!(
            "room added for spec.eviction's overshoot: its load past maxmemory peaked {over} bytes above the limit ({} bytes of used_memory over {}, a ratio of {ratio:.6}), so an engine given maxmemory at the projected used_memory needs {added} bytes more at its peak",
            peak.peak_used_memory, peak.limit
        )
    };
    rss.add_note(note);
    rss
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::rss::RssBasis;

    fn projection() -> RssProjection {
        RssProjection {
            basis: RssBasis::DataGrowthSettled,
            rss: 120_000_000,
            rss_high: 130_000_000,
            growth_ratio: Some(1.1),
            note: None,
            churn_factor: None,
            eviction_overshoot_ratio: None,
            snapshot_peak_ratio: None,
            planned_peak_ratio: None,
        }
    }

    #[test]
    fn an_overshoot_above_maxmemory_adds_its_share_of_the_projected_used_memory_and_says_so() {
        // A 100 MiB limit the load went 5 MiB over: 5% of the projected used_memory more.
        let peak = EvictionPeak {
            limit: 100 << 20,
            peak_used_memory: 105 << 20,
            sampled: false,
        };
        let raised = make_room(projection(), Some(&peak), 100_000_000, 110_000_000);
        assert_eq!(raised.eviction_overshoot_ratio, Some(1.05));
        assert_eq!(raised.rss, 120_000_000 + 5_000_000);
        assert_eq!(raised.rss_high, 130_000_000 + 5_500_000);
        let note = raised.note.unwrap();
        assert!(
            note.contains("room added for spec.eviction's overshoot"),
            "{note}"
        );
        assert!(
            note.contains("peaked 5242880 bytes above the limit"),
            "{note}"
        );
        assert!(note.contains("a ratio of 1.050000"), "{note}");
        assert!(note.contains("5000000 bytes more"), "{note}");
        // The churn's note, when there is one, is kept before it.
        let mut churned = projection();
        churned.note = Some("raised by spec.churn's factor 1.20".into());
        let both = make_room(churned, Some(&peak), 100_000_000, 110_000_000);
        assert!(
            both.note
                .unwrap()
                .starts_with("raised by spec.churn's factor 1.20; room added")
        );
    }

    #[test]
    fn a_peak_at_or_under_the_limit_adds_nothing_and_no_eviction_says_nothing() {
        let under = EvictionPeak {
            limit: 100 << 20,
            peak_used_memory: 99 << 20,
            sampled: false,
        };
        let same = make_room(projection(), Some(&under), 100_000_000, 110_000_000);
        assert_eq!((same.rss, same.rss_high), (120_000_000, 130_000_000));
        assert_eq!(same.eviction_overshoot_ratio, None);
        assert!(same.note.unwrap().contains("no room added"));
        assert_eq!(
            make_room(projection(), None, 100_000_000, 110_000_000),
            projection()
        );
    }

    #[test]
    fn the_limit_is_the_peak_less_the_overshoot_a_result_reports() {
        // Two shards of 16 MiB each, 1 MiB over together.
        let peak = EvictionPeak::of(33 << 20, 1 << 20).unwrap();
        assert_eq!(peak.limit, 32 << 20);
        assert!((peak.ratio() - 33.0 / 32.0).abs() < 1e-12);
        // Under the limit: a negative overshoot.
        assert_eq!(EvictionPeak::of(10, -5).unwrap().limit, 15);
        assert_eq!(EvictionPeak::of(10, 10), None);
    }
}
