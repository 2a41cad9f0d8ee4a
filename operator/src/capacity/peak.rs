//! Room for the peak of a snapshot saved under writes (`spec.peak.snapshot`) or a replica's
//! full sync (`spec.peak.replica`): Redis and Valkey save by forking, and every page the engine
//! writes while the child saves is copied, so the node holds the engine's memory and that copy
//! at once; the kernel kills the engine at its limit then, not at used_memory. A node sized for
//! the steady state is lost at the save. The run's measured factor, peak over steady, of the
//! repetition where it was highest, is
//! - `process-tree` (the client beside the engine read its processes): the measured peak of the
//!   engine's resident set plus its fork child's private pages, over the same before the save;
//! - `container-cgroup` (a client pod on a real node): the engine container's memory cgroup at
//!   its peak over the same before the save; it holds more than the engine's RSS (the page
//!   cache, the binary's pages), and that is counted as steady memory too;
//! - `engine-only` (a client pod that cannot see the engine's processes): estimated from the
//!   engine's own `rdb_last_cow_size` over its used_memory before the save, and said so.
//!
//! The copy grows with the pages written during the save, and a save lasts longer with more
//! data, a slower disk or less CPU for the child, so for a forking engine the copy planned for
//! is what a save `spec.capacity.defaults.saveLengthFactor` times as long copies
//! ([`planned_copy`], [`longer_save_copy`]); a save without a fork (Dragonfly) copies nothing
//! and its peak is taken as measured. The node's engine memory ([`make_room`]) and the
//! recommended limit's `copy_on_write` term (`super::recommend`) both call [`planned_copy`], so
//! a node is never sized under the limit the same plan recommends.
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

/// How a save's copy is planned for: whether the engine forks to save, and how many times
/// longer than the measured save a deployed one may last
/// (`spec.capacity.defaults.saveLengthFactor`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SaveCopyPlan {
    pub forks_to_save: bool,
    pub save_length_factor: u32,
}

impl SaveCopyPlan {
    /// For `engine` (a kind's name) with `save_length_factor`.
    pub fn of(engine: &str, save_length_factor: u32) -> Self {
        Self {
            forks_to_save: crate::crd::EngineKind::capabilities_of(engine).forks_to_save,
            save_length_factor,
        }
    }

    /// Whether the plan copies more than the measured save: a forking engine, a factor above 1.
    pub fn raises(self) -> bool {
        self.forks_to_save && self.save_length_factor > 1
    }
}

/// What the measured counter held beside the engine's RSS before the save (a container's page
/// cache and binary's pages): steady memory the peak's ratio multiplies too.
pub fn held_above_rss(peak: &SnapshotPeak) -> u64 {
    peak.held_above_rss.unwrap_or(0)
}

/// The bytes above `steady` at `peak` as planned: the measured peak over steady memory, for a
/// forking engine raised to what a save `save_length_factor` times as long copies; a save
/// without a fork as measured.
pub fn planned_copy(peak: &SnapshotPeak, steady: u64, plan: SaveCopyPlan) -> u64 {
    let measured = measured_copy(peak, steady);
    if plan.forks_to_save {
        longer_save_copy(measured, steady, plan.save_length_factor)
    } else {
        measured
    }
}

/// The bytes above `steady` at `peak`'s measured ratio: the peak less steady, not (ratio - 1)
/// x steady, whose float is a hair off (1.3 - 1.0 is above 0.3).
pub fn measured_copy(peak: &SnapshotPeak, steady: u64) -> u64 {
    ((steady as f64 * peak.ratio.max(1.0)).ceil() as u64).saturating_sub(steady)
}

/// What a save `factor` times as long as the measured one copies, from the measured copy
/// (`copied` of `steady` bytes). Writes land on pages at random, so the share of pages a save
/// has not yet copied falls geometrically with the writes it lasts through: a share `f`
/// copied by the measured save leaves `(1 - f)^factor` uncopied after one `factor` times as
/// long. Never more than the whole of `steady`, never less than what was measured.
pub fn longer_save_copy(copied: u64, steady: u64, factor: u32) -> u64 {
    if steady == 0 || factor <= 1 {
        return copied;
    }
    let share = (copied as f64 / steady as f64).min(1.0);
    let longer = 1.0 - (1.0 - share).powi(factor as i32);
    ((longer * steady as f64).ceil() as u64)
        .min(steady)
        .max(copied)
}

/// `rss` raised to `peak` at the point and the band's top, as planned by `plan`, and said in
/// its note: the steady RSS, what the measured counter held beside it, and the planned copy of
/// both.
pub fn make_room(
    mut rss: RssProjection,
    peak: Option<&SnapshotPeak>,
    plan: SaveCopyPlan,
) -> RssProjection {
    let Some(peak) = peak else {
        return rss;
    };
    let held = held_above_rss(peak);
    let raise = |bytes: u64| {
        let steady = bytes.saturating_add(held);
        steady.saturating_add(planned_copy(peak, steady, plan))
    };
    let before = rss.rss;
    rss.rss = raise(rss.rss);
    rss.rss_high = raise(rss.rss_high);
    let planned_ratio = rss.rss as f64 / before.max(1) as f64;
    rss.snapshot_peak_ratio = Some(peak.ratio);
    rss.planned_peak_ratio = Some(planned_ratio);
    let how = match peak.measured_on {
        Some(on) => format!("measured on {on}"),
        None => "estimated from the engine's rdb_last_cow_size over its used_memory (neither the engine's processes nor its container's memory could be read)".into(),
    };
    let held_said = if held > 0 {
        format!(" and the {held} bytes the counter held beside the engine's RSS before it")
    } else {
        String::new()
    };
    let planned = if plan.raises() {
        format!(
            "the measured {:.3}x of the steady memory{held_said}, its copy raised to what a save {} times as long copies (spec.capacity.defaults.saveLengthFactor), as the recommended limit's copy_on_write term is",
            peak.ratio, plan.save_length_factor
        )
    } else if plan.forks_to_save {
        format!(
            "the measured {:.3}x of the steady memory{held_said}, as measured (spec.capacity.defaults.saveLengthFactor 1)",
            peak.ratio
        )
    } else {
        format!(
            "the measured {:.3}x of the steady memory{held_said}: a save without a fork, taken as measured",
            peak.ratio
        )
    };
    let note = format!(
        "raised {planned_ratio:.3}x for {} ({how}): {planned}; the node holds the engine's memory and the pages its fork copied {} under the run's writes, {} bytes at the estimate instead of {before}; more data at the same write rate takes longer to save or send and copies more, so this is a floor",
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
            planned_peak_ratio: None,
        }
    }

    /// The measured copy as it was (saveLengthFactor 1).
    const AS_MEASURED: SaveCopyPlan = SaveCopyPlan {
        forks_to_save: true,
        save_length_factor: 1,
    };

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
        let raised = make_room(projection(), peak.as_ref(), AS_MEASURED);
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

    /// The recommended limit plans the copy of a save three times as long as the measured one
    /// (saveLengthFactor's default); the node is sized for the same copy, never the measured
    /// one alone, or it would be smaller than the limit of the same plan.
    #[test]
    fn a_forking_engine_is_raised_for_the_copy_of_a_longer_save_as_its_limit_is() {
        let peak = highest(
            [snapshot(Some(1.55), None)]
                .iter()
                .filter_map(SnapshotPeak::of),
        );
        let raised = make_room(projection(), peak.as_ref(), SaveCopyPlan::of("valkey", 3));
        // 55% copied: a save three times as long leaves 0.45^3 uncopied.
        let copied = 1.0 - 0.45f64.powi(3);
        assert!(
            (raised.rss as f64 - 100_000_000.0 * (1.0 + copied)).abs() <= 1.0,
            "{raised:?}"
        );
        assert!((raised.rss_high as f64 - 110_000_000.0 * (1.0 + copied)).abs() <= 1.0);
        assert_eq!(raised.snapshot_peak_ratio, Some(1.55));
        assert!((raised.planned_peak_ratio.unwrap() - (1.0 + copied)).abs() < 1e-6);
        let note = raised.note.unwrap();
        assert!(
            note.contains("raised 1.909x for spec.peak.snapshot (measured on the engine's process tree): the measured 1.550x")
                && note.contains("a save 3 times as long copies (spec.capacity.defaults.saveLengthFactor)"),
            "{note}"
        );
    }

    /// A container measured at 276.1 MB before the save held more than the engine's RSS: the
    /// ratio multiplies that too (the recommended limit's data_rss counts it the same way).
    #[test]
    fn what_the_counter_held_beside_the_engines_rss_is_steady_memory_the_peak_multiplies() {
        let peak = SnapshotPeak {
            counter_before: Some(102_000_000),
            held_above_rss: Some(2_000_000),
            ratio: 1.5,
            measured_on: Some("the engine container's memory cgroup"),
            phase: PeakPhase::Snapshot,
            writes: None,
        };
        let raised = make_room(projection(), Some(&peak), AS_MEASURED);
        assert_eq!(raised.rss, 153_000_000);
        assert_eq!(raised.rss_high, 168_000_000);
        assert!(
            raised
                .note
                .unwrap()
                .contains("and the 2000000 bytes the counter held beside the engine's RSS"),
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
        let raised = make_room(projection(), Some(&peak), AS_MEASURED);
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
        let dragonfly = SaveCopyPlan::of("dragonfly", 3);
        assert_eq!(
            make_room(projection(), None, SaveCopyPlan::of("valkey", 3)),
            projection()
        );
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
        let raised = make_room(projection(), peak.as_ref(), dragonfly);
        assert_eq!((raised.rss, raised.rss_high), (100_000_000, 110_000_000));
        // A forkless save that did rise is taken as measured, not raised for a longer save.
        let peak = highest(
            [snapshot(Some(1.02), None)]
                .iter()
                .filter_map(SnapshotPeak::of),
        );
        let raised = make_room(projection(), peak.as_ref(), dragonfly);
        assert_eq!((raised.rss, raised.rss_high), (102_000_000, 112_200_000));
        assert!(
            raised
                .note
                .unwrap()
                .contains("1.020x of the steady memory: a save without a fork, taken as measured")
        );
    }

    #[test]
    fn a_longer_save_copies_the_pages_left_geometrically_up_to_the_whole_and_never_less_than_measured()
     {
        // 40% copied: a save twice as long leaves 0.6^2 uncopied, three times 0.6^3.
        assert_eq!(longer_save_copy(400, 1000, 2), 640);
        assert_eq!(longer_save_copy(400, 1000, 3), 784);
        // As measured at 1, and at any factor when nothing or everything was copied.
        assert_eq!(longer_save_copy(400, 1000, 1), 400);
        assert_eq!(longer_save_copy(0, 1000, 3), 0);
        assert_eq!(longer_save_copy(1000, 1000, 3), 1000);
        // A copy measured above the steady memory (new pages beside the copy) is kept whole.
        assert_eq!(longer_save_copy(1200, 1000, 3), 1200);
        assert_eq!(longer_save_copy(5, 0, 3), 5);
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
        let raised = make_room(projection(), Some(&peak), AS_MEASURED);
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
