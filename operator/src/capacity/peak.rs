//! Room for the peak of a snapshot saved under writes (`spec.peak.snapshot`): Redis and Valkey
//! save by forking, and every page the engine writes while the child saves is copied, so the
//! node holds the engine's memory and that copy at once; the kernel kills the engine at its
//! limit then, not at used_memory. A node sized for the steady state is lost at the save. The
//! projected RSS is raised by the run's measured factor, peak over steady, of the repetition
//! where it was highest:
//! - `process-tree` (the client beside the engine read its processes): the measured peak of the
//!   engine's resident set plus its fork child's private pages, over the same before the save;
//! - `engine-only` (a client pod that cannot see the engine's processes): estimated from the
//!   engine's own `rdb_last_cow_size` over its used_memory before the save, and said so.
//!
//! The factor holds for the run's write rate and share of keys written: the copy grows with the
//! pages written during the save, and a save of more data lasts longer, so at a larger size and
//! the same rate it is a floor, not a bound. The note says that too.
//!
//! The raised RSS is then the memory the engine is given, in place of the plan's headroom
//! (`headroomPercent`, 25 by default: ElastiCache's reserve for fork copy-on-write among
//! others), which is a guess where the run measured what the save takes ([`engine_memory`]).

use serde::{Deserialize, Serialize};

use super::measurement::SnapshotPeak;
use super::rss::RssProjection;

/// What the memory given to the engine holds beyond its projected steady RSS.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum HeadroomBasis {
    /// The band's top RSS over 1 - headroomPercent / 100.
    #[default]
    HeadroomPercent,
    /// The band's top RSS raised by the run's measured peak (a snapshot's save or a replica's
    /// full sync) over steady memory, with no
    /// headroom percent on top.
    SnapshotPeak,
}

/// The memory to give the engine: the band's top RSS raised by the snapshot's peak when the run
/// measured one, else over 1 - `headroom_percent` / 100.
pub fn engine_memory(rss: &RssProjection, headroom_percent: u32) -> (u64, HeadroomBasis) {
    if rss.snapshot_peak_ratio.is_some() {
        return (rss.rss_high, HeadroomBasis::SnapshotPeak);
    }
    let reserved = 1.0 - f64::from(headroom_percent) / 100.0;
    (
        (rss.rss_high as f64 / reserved).ceil() as u64,
        HeadroomBasis::HeadroomPercent,
    )
}

/// `rss` raised by `peak`'s factor at the point and the band's top, and said in its note.
pub fn make_room(mut rss: RssProjection, peak: Option<&SnapshotPeak>) -> RssProjection {
    let Some(peak) = peak else {
        return rss;
    };
    let raise = |bytes: u64| (bytes as f64 * peak.ratio).ceil() as u64;
    let before = rss.rss;
    rss.rss = raise(rss.rss).max(rss.rss);
    rss.rss_high = raise(rss.rss_high).max(rss.rss_high);
    rss.snapshot_peak_ratio = Some(peak.ratio);
    let how = match peak.measured_on {
        Some(on) => format!("measured on {on}"),
        None => "estimated from the engine's rdb_last_cow_size over its used_memory (neither the engine's processes nor its container's memory could be read)".into(),
    };
    let note = format!(
        "raised {:.3}x for {} ({how}): the node holds the engine's memory and the pages its fork copied {} under the run's writes, {} bytes at the estimate instead of {before}; more data at the same write rate takes longer to save or send and copies more, so this is a floor",
        peak.ratio,
        peak.phase.field(),
        peak.phase.what(),
        rss.rss
    );
    rss.add_note(note);
    rss
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::measurement::PeakPhase;
    use crate::capacity::measurement::highest_snapshot_peak as highest;
    use crate::capacity::rss::RssBasis;
    use crate::crd::SnapshotStatus;

    fn projection() -> RssProjection {
        RssProjection {
            basis: RssBasis::DataGrowthSettled,
            rss: 100_000_000,
            rss_high: 110_000_000,
            growth_ratio: Some(1.05),
            note: None,
            churn_factor: None,
            eviction_overshoot_ratio: None,
            snapshot_peak_ratio: None,
        }
    }

    fn snapshot(ratio: Option<f64>, cow: Option<u64>) -> SnapshotStatus {
        SnapshotStatus {
            source: if ratio.is_some() {
                "process-tree".into()
            } else {
                "engine-only".into()
            },
            ratio,
            cow_bytes: cow,
            used_memory_before: 600_000_000,
            ..SnapshotStatus::default()
        }
    }

    #[test]
    fn a_measured_peak_raises_the_projected_rss_by_its_factor_and_says_so() {
        // Valkey 9.1.2 saving 500,000 x 1 KiB under 50,000 writes/s: 1.55x (docs/src/results/).
        let peak = highest(
            [snapshot(Some(1.50), None), snapshot(Some(1.55), None)]
                .iter()
                .filter_map(SnapshotPeak::of),
        );
        let raised = make_room(projection(), peak.as_ref());
        assert_eq!(raised.rss, 155_000_000);
        assert_eq!(raised.rss_high, 170_500_000);
        assert_eq!(raised.snapshot_peak_ratio, Some(1.55));
        let note = raised.note.unwrap();
        assert!(
            note.contains(
                "raised 1.550x for spec.peak.snapshot (measured on the engine's process tree)"
            ) && note.contains("155000000 bytes at the estimate instead of 100000000")
                && note.contains("a floor"),
            "{note}"
        );
    }

    #[test]
    fn an_engine_only_snapshot_is_estimated_from_its_copy_on_write_and_says_so() {
        // 300 MB copied of 600 MB used: 1.5x.
        let peak = highest(
            [snapshot(None, Some(300_000_000))]
                .iter()
                .filter_map(SnapshotPeak::of),
        )
        .unwrap();
        assert_eq!(
            peak,
            SnapshotPeak {
                counter_before: None,
                held_above_rss: None,
                ratio: 1.5,
                measured_on: None,
                phase: PeakPhase::Snapshot,
                writes: None,
            }
        );
        let raised = make_room(projection(), Some(&peak));
        assert_eq!(raised.rss, 150_000_000);
        assert!(
            raised
                .note
                .unwrap()
                .contains("estimated from the engine's rdb_last_cow_size"),
        );
    }

    #[test]
    fn no_snapshot_or_no_figure_adds_nothing_and_a_forkless_save_adds_nothing_either() {
        assert_eq!(make_room(projection(), None), projection());
        assert_eq!(
            highest([snapshot(None, None)].iter().filter_map(SnapshotPeak::of)),
            None
        );
        // Dragonfly's forkless save: its peak is its steady memory (a reading a little below
        // counts as 1).
        let peak = highest(
            [snapshot(Some(0.99), None)]
                .iter()
                .filter_map(SnapshotPeak::of),
        );
        let raised = make_room(projection(), peak.as_ref());
        assert_eq!((raised.rss, raised.rss_high), (100_000_000, 110_000_000));
    }

    /// Dragonfly on a real node: the container's high-water mark did not rise during its save,
    /// so the status has no ratio, only the mark and the memory before; the run was left with
    /// no peak, and its recommendation with no save term and no write rate.
    #[test]
    fn a_container_mark_that_did_not_rise_is_the_saves_peak_at_most() {
        let flat = SnapshotStatus {
            source: "container-cgroup".into(),
            before_bytes: Some(206_196_736),
            high_water_bytes: Some(208_478_208),
            writes_per_sec: 9_000.0,
            writes_per_sec_asked: 100_000,
            ..snapshot(None, None)
        };
        let peak = SnapshotPeak::of(&flat).expect("a peak from the mark");
        assert!((peak.ratio - 208_478_208.0 / 206_196_736.0).abs() < 1e-12);
        assert_eq!(peak.counter_before, Some(206_196_736));
        assert_eq!(peak.writes.map(|w| w.asked), Some(100_000));
        // Without the mark there is nothing to go on.
        let unknown = SnapshotStatus {
            high_water_bytes: None,
            ..flat
        };
        assert_eq!(SnapshotPeak::of(&unknown), None);
    }

    #[test]
    fn a_replica_sync_that_peaked_higher_than_the_save_is_the_peak_planned_for_and_named() {
        use crate::crd::{PeakStatus, ReplicaStatus};
        let sync = ReplicaStatus {
            primary: snapshot(Some(1.30), None),
            ..ReplicaStatus::default()
        };
        let both = PeakStatus {
            snapshot: Some(snapshot(Some(1.10), None)),
            replica: Some(sync.clone()),
        };
        let peak = SnapshotPeak::of_peak(&both).unwrap();
        assert_eq!((peak.ratio, peak.phase), (1.30, PeakPhase::Replica));
        let raised = make_room(projection(), Some(&peak));
        assert_eq!(raised.rss, 130_000_000);
        let note = raised.note.unwrap();
        assert!(
            note.contains("raised 1.300x for spec.peak.replica")
                && note.contains("while it sends a replica its full sync"),
            "{note}"
        );
        // The save's, when it was the higher.
        let save_higher = PeakStatus {
            snapshot: Some(snapshot(Some(1.40), None)),
            replica: Some(sync),
        };
        let peak = SnapshotPeak::of_peak(&save_higher).unwrap();
        assert_eq!((peak.ratio, peak.phase), (1.40, PeakPhase::Snapshot));
    }
}
