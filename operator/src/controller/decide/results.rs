//! A client's result taken into the engine's status: identity, repetitions and summary, and
//! which client errors are worth another client.

use crate::client::pod_io::result::{ClientResult, MAX_GROWTH_POINTS, ShardColumns};
use crate::crd::{
    EngineStatus, GrowthPoint, RepetitionStatus, ShardSpreadStatus, SpreadStatus, SummaryStatus,
    TypeBytesStatus,
};
use crate::stats::Spread;

pub(super) use crate::text::tail;

/// What the status may spend on repetitions, over every run of a benchmark: the API server
/// stores objects of up to 1.5 MiB (etcd's request limit), and the spec, conditions and the
/// other figures need their share.
pub const STATUS_REPETITIONS_BUDGET: usize = 1 << 20;

/// An upper estimate of one repetition in the status as JSON (measured: about 330 bytes with
/// every optional figure).
pub const REPETITION_STATUS_BYTES: usize = 400;

/// An upper estimate of one churn round in a repetition's status, and of its defragmentation
/// (measured: about 190 and 330 bytes with every figure).
pub const CHURN_ROUND_STATUS_BYTES: usize = 240;
pub const DEFRAG_STATUS_BYTES: usize = 420;
/// An upper estimate of a repetition's eviction in the status (about 300 bytes), and of its
/// snapshot peak (about 330), and of its replica's sync (under 500: the snapshot's figures and
/// the replica's, `a_replicas_status_fits_its_estimate`).
pub const EVICTION_STATUS_BYTES: usize = 360;
pub const PEAK_STATUS_BYTES: usize = 400;
pub const REPLICA_STATUS_BYTES: usize = 560;

/// What a repetition's status takes on top of [`REPETITION_STATUS_BYTES`] for its churn and
/// eviction.
pub fn churn_status_bytes(spec: &crate::crd::MemoryBenchmarkSpec) -> usize {
    spec.churn.as_ref().map_or(0, |c| {
        c.rounds as usize * CHURN_ROUND_STATUS_BYTES + usize::from(c.defrag) * DEFRAG_STATUS_BYTES
    }) + spec.eviction.as_ref().map_or(0, |_| EVICTION_STATUS_BYTES)
        + spec.peak.as_ref().map_or(0, |p| {
            usize::from(p.snapshot.is_some()) * PEAK_STATUS_BYTES
                + usize::from(p.replica.is_some()) * REPLICA_STATUS_BYTES
        })
}

/// How many repetitions a run's status lists, at most: all `requested` while a benchmark's
/// `runs` stay within [`STATUS_REPETITIONS_BUDGET`] (up to 26 runs of 100 repetitions), fewer
/// past it, never fewer than one. `extra` is what each repetition takes beyond
/// [`REPETITION_STATUS_BYTES`] (its churn: [`churn_status_bytes`]). The summary always covers
/// every repetition.
pub fn listed_per_run(runs: usize, requested: u32, extra: usize) -> u32 {
    let per_run = STATUS_REPETITIONS_BUDGET / (REPETITION_STATUS_BYTES + extra) / runs.max(1);
    u32::try_from(per_run)
        .unwrap_or(u32::MAX)
        .clamp(1, requested.max(1))
}

/// The engine's message about a result: repetitions it does not list (left out of a
/// termination message, or past `listed`, what the status lists per run) and the client's
/// warnings.
pub(super) fn result_note(result: &ClientResult, listed: u32) -> Option<String> {
    let mut notes = Vec::new();
    if result.omitted > 0 {
        notes.push(format!(
            "{} repetitions not listed (the client's result must fit 4 KB); the summary covers all",
            result.omitted
        ));
    }
    let past = result.repetitions.n.saturating_sub(listed);
    if past > 0 {
        notes.push(format!(
            "{past} repetitions not listed (the status lists at most {listed} per run of this benchmark, to stay within the API server's object size); the summary covers all"
        ));
    }
    notes.extend(result.warnings.iter().cloned());
    (!notes.is_empty()).then(|| notes.join("; "))
}

/// Takes a client's result into the engine's status: identity, repetitions and summary. A
/// partial result never replaces a fuller one already recorded.
pub fn absorb(engine: &mut EngineStatus, result: &ClientResult, repetitions_requested: u32) {
    let listed = result.decoded_repetitions();
    if !result.engine.version.is_empty() {
        engine.version = Some(result.engine.version.clone());
        engine.allocator = Some(result.engine.allocator.clone()).filter(|a| !a.is_empty());
        engine.arch = Some(result.engine.arch.clone()).filter(|a| !a.is_empty());
        engine.multiplexing_api = result.engine.io.clone();
        engine.threads = result.engine.threads;
        engine.config = result.engine.config.clone();
        engine.config_unreported = result.engine.config_unreported.clone();
        engine.modules = result.engine.modules.clone();
        engine.cluster = result.engine.cluster.clone();
    }
    if listed.is_empty() || listed.len() < engine.repetitions.len() {
        return;
    }
    let commands = result.commands as f64;
    let per_second = |count: f64, seconds: f64| {
        if seconds > 0.0 { count / seconds } else { 0.0 }
    };
    engine.repetitions = listed
        .iter()
        .take(repetitions_requested as usize)
        .enumerate()
        .map(|(i, r)| RepetitionStatus {
            baseline_used_memory: r.baseline_used_memory,
            used_memory: r.used_memory,
            used_memory_rss: r.used_memory_rss,
            items: r.items,
            bytes_per_item: r.bytes_per_item(),
            commands_per_sec: per_second(commands, r.seconds),
            items_per_sec: per_second(r.items as f64, r.seconds),
            seconds: r.seconds,
            settled_bytes_per_item: r
                .settled_used_memory
                .map(|s| (s as f64 - r.baseline_used_memory as f64) / r.items as f64),
            baseline_used_memory_rss: None,
            settled_used_memory: r.settled_used_memory,
            settled_used_memory_rss: None,
            used_memory_dataset: r.used_memory_dataset,
            mem_fragmentation_ratio: r.mem_fragmentation_ratio,
            churn: result.churn.get(i).map(Into::into),
            eviction: result.eviction.get(i).map(Into::into),
            peak: result.peak.get(i).map(|p| crate::crd::PeakStatus {
                snapshot: p.snapshot.as_ref().map(Into::into),
                replica: p.replica.as_ref().map(Into::into),
            }),
        })
        .collect();
    // The client sends the first repetition's RSS readings only (`first_settled_rss`, or its
    // empty server's alone when it did not settle).
    if let Some(first) = engine.repetitions.first_mut() {
        if let Some(rss) = result.first_settled_rss {
            first.baseline_used_memory_rss = Some(rss.baseline);
            first.settled_used_memory_rss = Some(rss.settled);
        } else if let Some(baseline) = result.first_baseline_rss {
            first.baseline_used_memory_rss = Some(baseline);
        }
    }
    let growth = result
        .growth
        .as_ref()
        .map(|g| g.points())
        .unwrap_or_default();
    if !growth.is_empty() || engine.growth.is_empty() {
        engine.growth = growth
            .into_iter()
            .take(MAX_GROWTH_POINTS)
            .map(|p| GrowthPoint {
                items: p.items,
                used_memory: p.used_memory,
            })
            .collect();
    }
    if let Some(columns) = &result.shards {
        absorb_shards(engine, columns);
    }
    let items_per_command = result.items_per_command().unwrap_or(1.0);
    engine.summary = result.summary.as_ref().map(|s| SummaryStatus {
        items: s.items,
        used_memory: s.used_memory.median.round() as u64,
        bytes_per_item: spread(&s.bytes_per_item, 1.0),
        commands_per_sec: spread(&s.commands_per_sec, 1.0),
        // Sent as commands/s only (see `ClientResult::from_report`).
        items_per_sec: match &s.items_per_sec {
            Some(items) => spread(items, 1.0),
            None => spread(&s.commands_per_sec, items_per_command),
        },
        unstable: s.unstable,
        bytes_per_key_by_type: s
            .by_type
            .iter()
            .map(|t| TypeBytesStatus {
                key_type: t.key_type.clone(),
                keys: t.keys,
                bytes_per_key: t.bytes_per_key,
            })
            .collect(),
        peak: s.peak.as_ref().map(Into::into),
    });
}

/// A sharded run's per-shard figures (each shard's medians) and their spread, beside the
/// shards' pods and nodes the operator recorded.
fn absorb_shards(engine: &mut EngineStatus, columns: &ShardColumns) {
    let spread = columns.spread();
    for (i, ((baseline, used), keys)) in columns
        .baseline
        .iter()
        .zip(&columns.used)
        .zip(&columns.keys)
        .enumerate()
    {
        let status = engine.shard_mut(i as u32);
        status.baseline_used_memory = Some(*baseline);
        status.used_memory = Some(*used);
        status.keys = Some(*keys);
    }
    engine.shard_spread = Some(ShardSpreadStatus {
        keys_max_over_min: spread.keys_max_over_min,
        data_max_over_min: spread.data_max_over_min,
    });
}

/// A spread in status, every figure multiplied by `factor` (the coefficient of variation does
/// not change with scale).
fn spread(s: &Spread, factor: f64) -> SpreadStatus {
    SpreadStatus {
        median: s.median * factor,
        min: s.min * factor,
        max: s.max * factor,
        cv: s.cv,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::measurement::measure::MemorySample;
    use crate::client::pod_io::result::{GrowthColumn, RepetitionColumns};
    use crate::stats::StabilityThresholds;

    fn result_with_growth(points: u64) -> ClientResult {
        let samples: Vec<MemorySample> = (1..=points)
            .map(|k| MemorySample {
                items: k * 1000,
                used_memory: 1_000_000 + k * 75_000,
            })
            .collect();
        ClientResult {
            commands: points * 1000,
            repetitions: RepetitionColumns {
                n: 1,
                baseline: vec![1_000_000],
                used: vec![1_000_000 + points as i64 * 75_000],
                rss: vec![9_000_000],
                items: vec![(points * 1000) as i64],
                micros: vec![1_000_000],
                ..Default::default()
            },
            growth: GrowthColumn::of(&samples, MAX_GROWTH_POINTS),
            ..Default::default()
        }
    }

    #[test]
    fn the_growth_curve_lands_in_the_status() {
        let mut engine = EngineStatus::default();
        absorb(&mut engine, &result_with_growth(5), 1);
        assert_eq!(engine.growth.len(), 5);
        assert_eq!(
            engine.growth[4],
            GrowthPoint {
                items: 5000,
                used_memory: 1_375_000
            }
        );
    }

    #[test]
    fn a_result_without_a_curve_keeps_the_curve_already_recorded() {
        let mut engine = EngineStatus::default();
        absorb(&mut engine, &result_with_growth(5), 1);
        let mut without = result_with_growth(5);
        without.growth = None;
        absorb(&mut engine, &without, 1);
        assert_eq!(engine.growth.len(), 5);
    }

    /// A report of three repetitions whose snapshots peaked at `ratios` of their steady memory.
    fn report_with_snapshot_peaks(
        ratios: [f64; 3],
    ) -> crate::client::measurement::measure::BenchmarkReport {
        use crate::client::measurement::measured::{PeakReport, Summary};
        use crate::client::phases::peak::{SnapshotReport, WriteLatency};
        let mut report = crate::client::pod_io::result::tests::report(3, false);
        for (repetition, ratio) in report.repetitions.iter_mut().zip(ratios) {
            let before = 5_000_000_000u64;
            repetition.peak = Some(PeakReport {
                snapshot: Some(SnapshotReport {
                    source: "process-tree".into(),
                    before_bytes: Some(before),
                    peak_bytes: Some((before as f64 * ratio) as u64),
                    ratio: Some(ratio),
                    sample_interval_ms: 20,
                    samples: 150,
                    high_water_bytes: None,
                    note: None,
                    cow_bytes: Some(2_000_000_000),
                    cow_note: None,
                    most_processes: Some(2),
                    cow_peak_bytes: Some(1_900_000_000),
                    used_memory_before: 4_800_000_000,
                    used_memory_rss_before: 4_900_000_000,
                    duration_seconds: 3.0,
                    writes: 150_000,
                    writes_per_sec: 50_000.0,
                    writes_per_sec_asked: 50_000,
                    longest_poll_ms: 30.0,
                    write_latency_ms: WriteLatency {
                        p50: 0.2,
                        p99: 1.5,
                        max: 40.0,
                    },
                }),
                replica: None,
            });
        }
        report.summary = Summary::of(&report.repetitions, &StabilityThresholds::default());
        report
    }

    #[test]
    fn the_snapshots_median_peak_over_steady_memory_lands_in_the_status_summary() {
        let report = report_with_snapshot_peaks([1.62, 1.41, 1.55]);
        for message in [
            ClientResult::from_report(&report).to_message(),
            serde_json::to_string(&ClientResult::whole(&report)).unwrap(),
        ] {
            let result = ClientResult::read_whole(&message, 3).unwrap();
            let mut engine = EngineStatus::default();
            absorb(&mut engine, &result, 3);
            let peak = engine.summary.unwrap().peak.unwrap().snapshot.unwrap();
            assert_eq!(
                (peak.ratio, peak.min, peak.max, peak.repetitions),
                (1.55, 1.41, 1.62, 3)
            );
        }
    }

    /// [`report_with_snapshot_peaks`] whose repetitions also synced a replica, the primary's
    /// peak at `ratios` of its memory before.
    fn report_with_replica_peaks(
        ratios: [f64; 3],
    ) -> crate::client::measurement::measure::BenchmarkReport {
        let mut report = report_with_snapshot_peaks(ratios);
        for repetition in &mut report.repetitions {
            let peak = repetition.peak.as_mut().unwrap();
            peak.replica = Some(crate::client::phases::replica::ReplicaReport {
                primary: peak.snapshot.clone().unwrap(),
                backlog_bytes: Some(1_048_576),
                primary_used_memory_after: 4_801_000_000,
                replica_backlog_bytes: Some(1_048_576),
                replica_peak_bytes: Some(5_100_000_000),
                replica_used_memory: 4_790_000_000,
                replica_used_memory_rss: 4_950_000_000,
                replica_keys: 50_000_000,
            });
        }
        report.summary = crate::client::measurement::measured::Summary::of(
            &report.repetitions,
            &StabilityThresholds::default(),
        );
        report
    }

    #[test]
    fn the_replicas_median_peak_and_its_figures_land_in_the_status_in_camel_case() {
        let report = report_with_replica_peaks([1.12, 1.31, 1.2]);
        let message = serde_json::to_string(&ClientResult::whole(&report)).unwrap();
        let result = ClientResult::read_whole(&message, 3).unwrap();
        let mut engine = EngineStatus::default();
        absorb(&mut engine, &result, 3);
        let summary = engine.summary.as_ref().unwrap().peak.as_ref().unwrap();
        let replica = summary.replica.as_ref().unwrap();
        assert_eq!(
            (replica.ratio, replica.min, replica.max, replica.repetitions),
            (1.2, 1.12, 1.31, 3)
        );
        let listed = engine.repetitions[0].peak.as_ref().unwrap();
        let json = serde_json::to_value(listed.replica.as_ref().unwrap()).unwrap();
        assert_eq!(json["replicaKeys"], 50_000_000, "{json}");
        assert_eq!(json["replicaUsedMemory"], 4_790_000_000u64, "{json}");
        assert_eq!(json["ratio"], 1.12, "{json}");
        assert_eq!(json["backlogBytes"], 1_048_576, "{json}");
        let text = serde_json::to_string(listed.replica.as_ref().unwrap()).unwrap();
        assert!(
            text.len() < REPLICA_STATUS_BYTES,
            "{} bytes against the estimate {REPLICA_STATUS_BYTES}: {text}",
            text.len()
        );
    }

    #[test]
    fn a_replicas_summary_peak_that_is_no_ratio_of_its_repetitions_is_refused() {
        let mut report = report_with_replica_peaks([1.12, 1.31, 1.2]);
        let summary = report.summary.as_mut().unwrap().peak.as_mut().unwrap();
        summary.replica.as_mut().unwrap().ratio = 1.5;
        let message = serde_json::to_string(&ClientResult::whole(&report)).unwrap();
        let refused = ClientResult::read_whole(&message, 3).unwrap_err();
        let refused = refused.to_string();
        assert!(refused.contains("summary.peak.replica"), "{refused}");
    }

    #[test]
    fn a_summary_peak_that_is_no_ratio_of_its_repetitions_is_refused() {
        for (ratio, min, max, repetitions) in [
            (f64::NAN, 1.4, 1.6, 3),
            (-1.5, -2.0, 1.6, 3),
            (1.7, 1.4, 1.6, 3),
            (1.5, 1.4, 1.6, 0),
            (1.5, 1.4, 1.6, 4),
        ] {
            let mut report = report_with_snapshot_peaks([1.62, 1.41, 1.55]);
            let snapshot = report.summary.as_mut().unwrap().peak.as_mut().unwrap();
            let snapshot = snapshot.snapshot.as_mut().unwrap();
            (
                snapshot.ratio,
                snapshot.min,
                snapshot.max,
                snapshot.repetitions,
            ) = (ratio, min, max, repetitions);
            let message = serde_json::to_string(&ClientResult::whole(&report)).unwrap();
            let refused = ClientResult::read_whole(&message, 3);
            assert!(
                refused.is_err(),
                "{ratio} in {min}..{max} over {repetitions}: {refused:?}"
            );
        }
    }

    #[test]
    fn the_first_repetitions_settled_readings_land_in_the_status_for_the_capacity_plan() {
        let mut engine = EngineStatus::default();
        let mut result = result_with_growth(5);
        result.repetitions.settled = vec![1_380_000];
        result.first_settled_rss = Some(crate::client::pod_io::result::SettledRss {
            baseline: 7_500_000,
            settled: 9_100_000,
        });
        absorb(&mut engine, &result, 1);
        let first = &engine.repetitions[0];
        assert_eq!(first.baseline_used_memory_rss, Some(7_500_000));
        assert_eq!(first.settled_used_memory, Some(1_380_000));
        assert_eq!(first.settled_used_memory_rss, Some(9_100_000));
    }

    /// A run without settleSeconds still tells the empty server's RSS: the recommended limit's
    /// `empty_rss` term was a default of 0 on the dev cluster without it.
    #[test]
    fn the_first_repetitions_empty_rss_lands_in_the_status_without_a_settled_reading() {
        let mut engine = EngineStatus::default();
        let mut result = result_with_growth(5);
        result.first_baseline_rss = Some(7_500_000);
        absorb(&mut engine, &result, 1);
        let first = &engine.repetitions[0];
        assert_eq!(first.baseline_used_memory_rss, Some(7_500_000));
        assert_eq!(first.settled_used_memory_rss, None);
    }
}
