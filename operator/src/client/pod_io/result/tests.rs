//! Tests of the client's result: what fits in a termination message and in what order
//! parts give way, the columns' encoding, and reading a message back.

use super::*;
use crate::client::connection::engine::EngineInfo;
use crate::client::measurement::measure::{SettledMemory, WorkloadReport};
use crate::client::workloads::workload::Workload;
use crate::stats::{Spread, StabilityThresholds};

fn repetition(i: u32, settled: bool) -> RepetitionResult {
    // Figures of the size a 50-million-member sorted set gives, varying between repetitions.
    let baseline = 912_344 + u64::from(i % 3) * 16;
    let used = 4_830_512_384 + u64::from(i) * 40_961;
    RepetitionResult {
        repetition: i,
        baseline_used_memory: baseline,
        // A later repetition starts from the pages of the one before.
        baseline_used_memory_rss: 9_000_000 + u64::from(i) * 4096,
        used_memory: used,
        used_memory_rss: 5_100_000_000 + u64::from(i) * 1_234_567,
        used_memory_dataset: Some(4_700_000_000 + u64::from(i) * 77_777),
        mem_fragmentation_ratio: Some(1.05 + f64::from(i) / 1000.0),
        items: 50_000_000,
        bytes_per_item: (used - baseline) as f64 / 50_000_000.0,
        commands_per_sec: 540_000.0,
        items_per_sec: 540_000.0,
        commands: 50_000_000,
        seconds: 92.5 + f64::from(i) * 0.137,
        encoding: Some("skiplist".into()),
        expected_unique_items: None,
        keys_with_ttl: None,
        settled: settled.then(|| SettledMemory {
            after_seconds: 5,
            used_memory: used - 1_000_000,
            used_memory_rss: 5_100_000_000 + u64::from(i) * 1_234_567 - 7_654_321,
            bytes_per_item: 0.0,
        }),
        samples: if i == 1 { growth_samples(50) } else { vec![] },
        shards: Vec::new(),
        by_type: Vec::new(),
        peak: None,
        churn: None,
        eviction: None,
    }
}

/// A curve like a 50-million-member load's, sampled every million members, with the steps
/// a growing hash table makes.
fn growth_samples(n: u64) -> Vec<MemorySample> {
    (1..=n)
        .map(|k| MemorySample {
            items: k * 1_000_000,
            used_memory: 912_344 + k * 96_612_345 + (k * k * 7_919) % 33_554_432,
        })
        .collect()
}

pub(crate) fn report(n: u32, settled: bool) -> BenchmarkReport {
    let repetitions: Vec<RepetitionResult> = (1..=n).map(|i| repetition(i, settled)).collect();
    BenchmarkReport {
        name: "redis-7.0.15".into(),
        engine: EngineInfo {
            name: "redis".into(),
            version: "7.0.15".into(),
            allocator: "jemalloc-5.3.0".into(),
            arch: "aarch64".into(),
            ..Default::default()
        },
        workload: WorkloadReport::from(&Workload::SortedSet {
            members: 50_000_000,
            key: "k".into(),
            sample_every: 1_000_000,
        }),
        pipeline: 100,
        ttl: None,
        cluster: None,
        repetitions_requested: n,
        summary: Summary::of(&repetitions, &StabilityThresholds::default()),
        repetitions,
        failed_repetition: None,
        warnings: vec!["RDB snapshots are on".into()],
        error: None,
    }
}

#[test]
fn a_hundred_repetitions_of_a_large_load_fit_with_every_repetition_listed() {
    let report = report(100, false);
    let result = ClientResult::from_report(&report);
    let message = result.to_message();
    assert!(message.len() <= BUDGET, "{} bytes", message.len());
    assert_eq!(result.omitted, 0);
    let decoded = ClientResult::read(&message, 100)
        .unwrap()
        .decoded_repetitions();
    assert_eq!(decoded.len(), 100);
    for (d, r) in decoded.iter().zip(&report.repetitions) {
        assert_eq!(d.used_memory, r.used_memory);
        assert_eq!(d.baseline_used_memory, r.baseline_used_memory);
        assert_eq!(d.used_memory_rss, r.used_memory_rss);
        assert_eq!(d.items, r.items);
        assert_eq!(d.bytes_per_item(), r.bytes_per_item);
        assert!((d.seconds - r.seconds).abs() < 1e-6);
    }
}

#[test]
fn a_hundred_repetitions_of_a_large_load_fit_with_the_whole_growth_curve() {
    let report = report(100, false);
    let result = ClientResult::from_report(&report);
    let message = result.to_message();
    println!(
        "{} bytes, of which the curve takes {}",
        message.len(),
        serde_json::to_string(&result.growth).unwrap().len()
    );
    assert!(message.len() <= BUDGET, "{} bytes", message.len());
    assert_eq!(result.omitted, 0);
    let points = ClientResult::read(&message, 100)
        .unwrap()
        .growth
        .unwrap()
        .points();
    assert_eq!(points, report.repetitions[0].samples);
}

/// Without settleSeconds the first repetition's empty RSS travels alone, in every message.
#[test]
fn unsettled_repetitions_carry_the_first_ones_empty_rss() {
    for n in [1u32, 100] {
        let report = report(n, false);
        let read = ClientResult::read(&ClientResult::from_report(&report).to_message(), n).unwrap();
        assert_eq!(read.first_settled_rss, None, "{n}");
        assert_eq!(
            read.first_baseline_rss,
            Some(report.repetitions[0].baseline_used_memory_rss),
            "{n}"
        );
    }
}

/// The first repetition's RSS readings travel in every message that lists a repetition:
/// 60 settled repetitions fit beside the whole 50-point curve; 100 of them, whose settled
/// column leaves no room for the curve and some repetitions (as before it was carried),
/// still carry it.
#[test]
fn settled_repetitions_carry_the_first_ones_rss_the_capacity_plan_reads() {
    for (n, whole) in [(60u32, true), (100, false)] {
        let report = report(n, true);
        let message = ClientResult::from_report(&report).to_message();
        assert!(message.len() <= BUDGET, "{n}: {} bytes", message.len());
        let read = ClientResult::read(&message, n).unwrap();
        let first = &report.repetitions[0];
        assert_eq!(
            read.first_settled_rss,
            Some(SettledRss {
                baseline: first.baseline_used_memory_rss,
                settled: first.settled.as_ref().unwrap().used_memory_rss,
            }),
            "{n}"
        );
        assert_eq!(
            read.first_baseline_rss, None,
            "{n}: said once, in first_settled_rss"
        );
        if whole {
            assert_eq!(read.omitted, 0);
            assert_eq!(read.growth.as_ref().unwrap().points(), first.samples);
            for (d, r) in read.decoded_repetitions().iter().zip(&report.repetitions) {
                assert_eq!(
                    d.settled_used_memory,
                    Some(r.settled.as_ref().unwrap().used_memory)
                );
            }
        }
    }
}

#[test]
fn a_long_curve_is_thinned_evenly_to_at_most_64_points_keeping_the_end() {
    let samples = growth_samples(2000);
    let column = GrowthColumn::of(&samples, MAX_GROWTH_POINTS).unwrap();
    let points = column.points();
    assert!(points.len() <= MAX_GROWTH_POINTS, "{}", points.len());
    assert!(points.len() >= MAX_GROWTH_POINTS / 2, "{}", points.len());
    assert_eq!(points.last(), samples.last());
    // Every point is one of the samples, evenly spaced.
    for pair in points.windows(2) {
        assert_eq!(pair[1].items - pair[0].items, column.every);
    }
    for point in &points {
        assert!(samples.contains(point), "{point:?}");
    }
}

#[test]
fn a_malformed_growth_column_gives_no_points() {
    let too_long = GrowthColumn {
        start: 1,
        every: 1,
        used: vec![1; MAX_GROWTH_POINTS + 1],
    };
    assert!(too_long.points().is_empty());
    let overflowing = GrowthColumn {
        start: u64::MAX,
        every: u64::MAX,
        used: vec![1, 1],
    };
    assert!(overflowing.points().is_empty());
    let negative = GrowthColumn {
        start: 1,
        every: 1,
        used: vec![10, -11],
    };
    assert!(negative.points().is_empty());
    let uneven = [
        MemorySample {
            items: 10,
            used_memory: 1,
        },
        MemorySample {
            items: 25,
            used_memory: 2,
        },
    ];
    assert_eq!(GrowthColumn::of(&uneven, MAX_GROWTH_POINTS), None);
}

#[test]
fn small_results_keep_every_optional_column() {
    let result = ClientResult::from_report(&report(10, true));
    let decoded = result.decoded_repetitions();
    assert_eq!(decoded.len(), 10);
    assert_eq!(decoded[0].used_memory_dataset, Some(4_700_077_777));
    assert_eq!(decoded[0].mem_fragmentation_ratio, Some(1.05));
    assert_eq!(
        decoded[0].settled_used_memory,
        Some(4_830_512_384 + 40_961 - 1_000_000)
    );
    assert_eq!(
        result.first_settled_rss,
        Some(SettledRss {
            baseline: 9_000_000 + 4096,
            settled: 5_101_234_567 - 7_654_321
        })
    );
    assert_eq!(result.warnings.len(), 1);
    assert_eq!(result.encoding.as_deref(), Some("skiplist"));
}

#[test]
fn when_even_the_columns_do_not_fit_the_last_repetitions_are_left_out_and_counted() {
    let mut report = report(100, true);
    // Wildly varying figures defeat the difference encoding.
    for (i, r) in report.repetitions.iter_mut().enumerate() {
        r.used_memory_rss = 1_000_000_000_000 + (i as u64) * 999_999_937_777;
        r.used_memory += (i as u64) * 987_654_321_123;
        r.seconds = 1000.0 + i as f64 * 37.123457;
    }
    let result = ClientResult::from_report(&report);
    let message = result.to_message();
    assert!(message.len() <= BUDGET, "{} bytes", message.len());
    assert!(result.omitted > 0);
    let listed = result.decoded_repetitions().len();
    assert_eq!(listed + result.omitted as usize, 100);
    // The curve went before any repetition did.
    assert_eq!(result.growth, None);
    // The summary still covers all of them.
    assert_eq!(result.summary.as_ref().unwrap().repetitions, 100);
}

#[test]
fn a_failed_run_keeps_its_finished_repetitions_and_the_error() {
    let mut report = report(3, false);
    report.error = Some(ErrorReport {
        category: crate::error::ErrorCategory::ConnectionLost,
        message: "x".repeat(5000),
        phase: None,
    });
    report.failed_repetition = Some(crate::client::measurement::measure::FailedRepetition {
        repetition: 4,
        commands_sent: 1234,
        baseline_used_memory: Some(1),
        used_memory: None,
        samples: vec![],
    });
    let result = ClientResult::read(&ClientResult::from_report(&report).to_message(), 10).unwrap();
    assert_eq!(result.decoded_repetitions().len(), 3);
    assert_eq!(
        result.error.as_ref().unwrap().category,
        crate::error::ErrorCategory::ConnectionLost
    );
    assert!(result.error.as_ref().unwrap().message.len() < 500);
    assert_eq!(result.failed.as_ref().unwrap().commands_sent, 1234);
}

#[test]
fn the_message_carries_commands_per_second_and_items_per_second_is_derived() {
    let mut report = report(3, false);
    // Records stored as strings: four SETs per record.
    for r in &mut report.repetitions {
        r.commands = 4 * r.items;
    }
    report.summary = Summary::of(&report.repetitions, &StabilityThresholds::default());
    let result = ClientResult::from_report(&report);
    let message = result.to_message();
    assert!(message.contains("commands_per_sec") && !message.contains("items_per_sec"));
    let parsed = ClientResult::read(&message, 100).unwrap();
    assert_eq!(parsed.items_per_command(), Some(0.25));
    // A client from before the rename sent the same figure as ops_per_sec.
    let before = ClientResult::read(&message.replace("commands_per_sec", "ops_per_sec"), 3);
    assert_eq!(before.unwrap().summary, parsed.summary);
}

#[test]
fn columns_are_one_value_when_constant_and_differences_otherwise() {
    assert_eq!(encode_column(&[5, 5, 5]), vec![5]);
    assert_eq!(encode_column(&[100, 103, 98]), vec![100, 3, -2]);
    assert_eq!(decode_column(&[100, 3, -2], 3), Some(vec![100, 103, 98]));
    assert_eq!(decode_column(&[7], 2), Some(vec![7, 7]));
    assert_eq!(decode_column(&[1, 2], 3), None);
    assert!(encode_column(&[]).is_empty());
}

#[test]
fn an_empty_or_foreign_message_is_an_error_that_says_so() {
    let empty = ClientResult::read("", 3).unwrap_err();
    assert!(matches!(&empty, ReadError::NoResult(why) if why.contains("no result")));
    let logs = ClientResult::read("panicked at main.rs", 3).unwrap_err();
    assert!(
        matches!(&logs, ReadError::NoResult(why) if why.contains("not a membench result")),
        "{logs:?}"
    );
    let _ = Spread::default();
}
