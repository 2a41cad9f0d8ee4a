//! The arithmetic of a plan on curves of known shape (the real engines' runs are in
//! operator/tests/capacity.rs).

use super::peak::HeadroomBasis;
use super::projection::CurvePoint;
use super::*;

const GIB: u64 = 1 << 30;

/// A Redis-like curve: `per_entry` bytes per entry, 8 per bucket, 1 MB fixed, sampled every
/// 10,000 entries.
fn redis_like(name: &str, per_entry: u64) -> EngineMeasurement {
    let rule = GrowthRule::PowerOfTwoDict;
    EngineMeasurement {
        curve: (1..=50)
            .map(|i| {
                let entries = i * 10_000;
                CurvePoint {
                    entries,
                    used_memory: 1_000_000 + per_entry * entries + 8 * rule.buckets(entries),
                }
            })
            .collect(),
        fragmentation_ratio: Some(1.1),
        ..EngineMeasurement::bare(name, "redis", "8.2.3")
    }
}

fn request(items: u64, prices: Option<Prices>) -> CapacityRequest {
    CapacityRequest {
        items,
        headroom_percent: 25,
        families: vec![InstanceFamily::R8g, InstanceFamily::R7i],
        prices,
        notes: Vec::new(),
        defaults: Default::default(),
    }
}

#[test]
fn the_node_needs_rss_over_headroom_plus_what_the_node_keeps() {
    let m = redis_like("redis-8.2", 120);
    // 100M entries: 12 GB of entries, 2^27 buckets.
    let e = plan_engine(&m, &request(100_000_000, None)).unwrap();
    let expected_used = 1_000_000 + 120 * 100_000_000 + 8 * (1u64 << 27);
    assert!(
        e.projected_used_memory.abs_diff(expected_used) < 1000,
        "{e:?}"
    );
    let high = e.projected_used_memory_band[1] as f64;
    // No settled reading: the run's ratio, the band's top RSS in whole bytes.
    assert_eq!(e.rss_basis, rss::RssBasis::RunRatio);
    assert_eq!(e.engine_memory, ((high * 1.1).ceil() / 0.75).ceil() as u64);
    // About 18 GiB to the engine: r8g.xlarge (32 GiB) is the smallest r8g that holds it, and
    // reserves 11 * 58 + 255 MiB plus the 100 MiB eviction threshold.
    let r8g = &e.instance_types[0];
    assert_eq!(r8g.instance_type.as_deref(), Some("r8g.xlarge"));
    let reserve = (11 * 58 + 255 + 100) << 20;
    assert_eq!(r8g.required_node_memory, Some(e.engine_memory + reserve));
    let fill = r8g.fill_percent.unwrap();
    assert!((fill - (e.engine_memory + reserve) as f64 / (32 * GIB) as f64 * 100.0).abs() < 1e-9);
    assert_eq!(e.required_node_memory, e.engine_memory + reserve);
    assert!(e.cheapest.is_none(), "no prices: no cost");
    assert!(r8g.monthly_usd.is_none());
}

#[test]
fn a_run_with_an_eviction_peak_gives_the_engine_room_for_its_overshoot_and_says_so() {
    let plain = plan_engine(&redis_like("redis-8.2", 120), &request(100_000_000, None)).unwrap();
    let mut m = redis_like("redis-8.2", 120);
    // The load past maxmemory peaked 3% above its 100 MiB limit.
    m.eviction = Some(measurement::EvictionPeak {
        limit: 100 << 20,
        peak_used_memory: 103 << 20,
        sampled: false,
    });
    let e = plan_engine(&m, &request(100_000_000, None)).unwrap();
    assert_eq!(e.projected_used_memory, plain.projected_used_memory);
    let extra = (3 * u128::from(plain.projected_used_memory)).div_ceil(100) as u64;
    assert_eq!(e.projected_rss, plain.projected_rss + extra);
    assert!(e.engine_memory > plain.engine_memory, "{e:?}");
    assert_eq!(e.eviction_overshoot_ratio, Some(1.03));
    assert!(
        e.rss_note
            .as_deref()
            .unwrap()
            .contains("room added for spec.eviction's overshoot"),
        "{e:?}"
    );
}

#[test]
fn a_run_with_a_snapshot_peak_sizes_the_node_for_the_peak_and_says_so() {
    let plain = plan_engine(&redis_like("redis-8.2", 120), &request(100_000_000, None)).unwrap();
    let mut m = redis_like("redis-8.2", 120);
    m.snapshot = Some(crate::capacity::measurement::SnapshotPeak {
        counter_before: None,
        held_above_rss: None,
        ratio: 1.5,
        measured_on: Some("the engine's process tree"),
        phase: Default::default(),
        writes: None,
    });
    let e = plan_engine(&m, &request(100_000_000, None)).unwrap();
    assert_eq!(e.projected_used_memory, plain.projected_used_memory);
    // Redis forks: half its pages copied by the measured save, 1 - 0.5^3 by one three times as
    // long (saveLengthFactor's default), as its recommended limit's copy_on_write.
    assert!(
        (e.projected_rss as f64 - plain.projected_rss as f64 * 1.875).abs() <= 2.0,
        "{} against 1.875 x {}",
        e.projected_rss,
        plain.projected_rss
    );
    assert!(
        e.required_node_memory > plain.required_node_memory,
        "{e:?} against {plain:?}"
    );
    assert_eq!(e.snapshot_peak_ratio, Some(1.5));
    assert!(
        e.rss_note
            .as_deref()
            .unwrap()
            .contains("raised 1.875x for spec.peak.snapshot (measured on the engine's process tree): the measured 1.500x"),
        "{e:?}"
    );
    assert_eq!(
        e.planned_peak_ratio.map(|r| (r * 1000.0).round()),
        Some(1875.0)
    );
    // The peak is the engine's memory, in place of the 25% headroom.
    assert_eq!(plain.headroom_basis, HeadroomBasis::HeadroomPercent);
    assert_eq!(e.headroom_basis, HeadroomBasis::SnapshotPeak);
    let plain_high = plain.engine_memory as f64 * 0.75;
    assert!(
        (e.engine_memory as f64 - plain_high * 1.875).abs() <= 3.0,
        "{} against 1.875 x {plain_high}",
        e.engine_memory
    );
}

/// The terms of a recommended limit that the node's engine memory models: the engine's steady
/// memory, the pages its save copies and the overshoot past maxmemory (the backlog, buffers and
/// a start minimum are the limit's alone).
fn peak_share_of_the_limit(recommended: &recommend::Recommended) -> u64 {
    recommended
        .terms
        .iter()
        .filter(|t| {
            matches!(
                t.name.as_str(),
                "empty_rss" | "data_rss" | "copy_on_write" | "save_peak" | "eviction_overshoot"
            )
        })
        .map(|t| t.bytes)
        .sum()
}

/// A forking engine whose measured save was short (1.2x): the recommended limit's copy is
/// raised to a save spec.capacity.defaults.saveLengthFactor (3) times as long, 1 - 0.8^3 =
/// 48.8% of the steady memory. A node sized from the measured 20% would hold about 1.2 / 1.488
/// = 81% of the peak the same output's limit is for; the band's top (1% of the data and two
/// standard deviations above the point) is the only margin the node may have above it.
#[test]
fn a_forking_engine_with_a_short_save_gets_a_node_that_holds_its_recommended_peak() {
    for items in [50_000, 100_000_000] {
        let mut m = redis_like("valkey", 120);
        m.engine = "valkey".into();
        m.version = "9.1.2".into();
        m.snapshot = Some(measurement::SnapshotPeak {
            counter_before: None,
            // A container that held 2 MB beside the engine's pages before the save.
            held_above_rss: Some(2_000_000),
            ratio: 1.2,
            measured_on: Some("the engine container's memory cgroup"),
            phase: Default::default(),
            writes: None,
        });
        m.eviction = Some(measurement::EvictionPeak {
            limit: 100 << 20,
            peak_used_memory: 101 << 20,
            sampled: false,
        });
        let e = plan_engine(&m, &request(items, None)).unwrap();
        let recommended = e.recommended.as_ref().unwrap();
        let share = peak_share_of_the_limit(recommended);
        let copy = recommended
            .terms
            .iter()
            .find(|t| t.name == "copy_on_write")
            .unwrap()
            .bytes;
        let steady = share - copy - (recommended.maxmemory_bytes as f64 * 0.01).ceil() as u64;
        assert!(
            copy as f64 > 0.48 * steady as f64,
            "{items}: the limit's copy is a save three times as long: {copy} of {steady}"
        );
        assert_eq!(e.headroom_basis, HeadroomBasis::SnapshotPeak);
        assert!(
            e.engine_memory >= share,
            "{items} items: the node gives the engine {} bytes, under the {share} of its recommended limit's peak terms {:?}",
            e.engine_memory,
            recommended.terms
        );
        // The same copy, not a larger guess: within the band's top above the point.
        let band = e.projected_used_memory_band[1] - e.projected_used_memory;
        let slack = (band as f64 * 1.1 * 1.5 * 1.02) as u64 + (2 << 20);
        assert!(
            e.engine_memory <= share + slack,
            "{items} items: {} against {share} (+{slack})",
            e.engine_memory
        );
    }
}

#[test]
fn a_save_that_copies_nothing_needs_no_headroom_for_copies_and_gets_a_smaller_node() {
    // Dragonfly saving without a fork: 1.004x (docs/src/results/'s Peak memory run).
    let plain = plan_engine(&redis_like("dragonfly", 120), &request(100_000_000, None)).unwrap();
    let planned = plan_with_snapshot_peak("dragonfly", 1.004);
    let e = &planned.engines[0];
    assert_eq!(e.headroom_basis, HeadroomBasis::SnapshotPeak);
    assert!(
        e.engine_memory < plain.engine_memory,
        "{} against {} with 25% headroom",
        e.engine_memory,
        plain.engine_memory
    );
    assert!(e.required_node_memory <= plain.required_node_memory);
}

/// A plan of one engine (`name`: its kind) whose snapshot peaked at `ratio` of its steady
/// memory.
pub(crate) fn plan_with_snapshot_peak(name: &str, ratio: f64) -> CapacityPlan {
    let mut m = redis_like(name, 120);
    m.engine = name.into();
    m.snapshot = Some(crate::capacity::measurement::SnapshotPeak {
        counter_before: None,
        held_above_rss: None,
        ratio,
        measured_on: Some("the engine's process tree"),
        phase: Default::default(),
        writes: None,
    });
    plan(&[m], &request(100_000_000, None))
}

#[test]
fn prices_name_the_cheapest_engine_and_no_other_price_is_shown() {
    let prices = Prices::parse(
        "p.csv",
        "r8g.xlarge,0.2\nr8g.2xlarge,0.4\nr7i.2xlarge,0.5\n",
    )
    .unwrap();
    let small = redis_like("small", 120);
    let big = redis_like("big", 250);
    let plan = plan(&[big, small], &request(100_000_000, Some(prices)));
    let cheapest = plan.cheapest.as_ref().unwrap();
    assert_eq!(cheapest.engine, "small");
    assert_eq!(cheapest.instance_type, "r8g.xlarge");
    assert!((cheapest.monthly_usd - 0.2 * 730.0).abs() < 1e-9);
    // r7i.xlarge holds the small engine but has no price: none is shown for it.
    let small = &plan.engines[1];
    assert_eq!(
        small.instance_types[1].instance_type.as_deref(),
        Some("r7i.xlarge")
    );
    assert_eq!(small.instance_types[1].monthly_usd, None);
    assert_eq!(plan.smallest_instance_type.as_deref(), Some("r8g.xlarge"));
}

#[test]
fn an_engine_too_big_for_every_type_says_so() {
    let e = plan_engine(&redis_like("huge", 100), &request(10_000_000_000, None)).unwrap();
    assert!(e.smallest_instance_type.is_none());
    for fit in &e.instance_types {
        assert!(fit.instance_type.is_none());
        assert!(
            fit.note
                .as_deref()
                .unwrap()
                .contains("16xlarge has 512 GiB"),
            "{fit:?}"
        );
    }
}

#[test]
fn families_default_to_the_spec_instance_types_family() {
    assert_eq!(
        default_families(&[], &["r7g.4xlarge"]),
        vec![InstanceFamily::R7g]
    );
    // instanceTypes: each type's family, once, in the spec's order.
    assert_eq!(
        default_families(&[], &["r8g.4xlarge", "r7i.4xlarge", "r8g.2xlarge"]),
        vec![InstanceFamily::R8g, InstanceFamily::R7i]
    );
    assert_eq!(
        default_families(&[], &["m7g.4xlarge"]),
        InstanceFamily::ALL.to_vec()
    );
    assert_eq!(default_families(&[], &[]), InstanceFamily::ALL.to_vec());
    assert_eq!(
        default_families(&[InstanceFamily::R6i], &["r7g.4xlarge"]),
        vec![InstanceFamily::R6i]
    );
    let err = InstanceFamily::parse("m7g").unwrap_err();
    assert!(err.contains("r8g, r7g, r7i, r6g, r6i"), "{err}");
    let zero = CapacityRequest {
        items: 0,
        ..request(1, None)
    };
    assert!(zero.validate().unwrap_err().contains("at least 1"));
}

#[test]
fn three_engines_at_one_price_are_a_tie_not_one_cheapest() {
    let (plan, prices) = three_engines_at_one_price();
    assert_eq!(plan.cheapest_tie.len(), 3, "{:?}", plan.cheapest_tie);
    // One engine cheaper than the others is no tie.
    let plan = plan_of_two(prices);
    assert!(plan.cheapest_tie.is_empty());
}

/// Three engines that land on the same instance at one price, and those prices.
pub(crate) fn three_engines_at_one_price() -> (CapacityPlan, Prices) {
    let prices = Prices::parse("p.csv", "r8g.xlarge,0.2\nr8g.2xlarge,0.4\n").unwrap();
    let engines = [
        redis_like("a", 120),
        redis_like("b", 121),
        redis_like("c", 122),
    ];
    let plan = plan(&engines, &request(100_000_000, Some(prices.clone())));
    (plan, prices)
}

fn plan_of_two(prices: Prices) -> CapacityPlan {
    plan(
        &[redis_like("small", 120), redis_like("big", 250)],
        &request(100_000_000, Some(prices)),
    )
}

#[test]
fn an_instance_type_the_table_does_not_know_is_named_with_what_was_planned_over() {
    let families = default_families(&[], &["r8gd.4xlarge"]);
    let note = unknown_instance_types_note(&[], &["r8gd.4xlarge"], &families).unwrap();
    assert!(
        note.contains("r8gd.4xlarge is not in membench's instance-type table")
            && note.contains("the plan looks in r8g, r7g, r7i, r6g, r6i instead"),
        "{note}"
    );
    assert_eq!(
        unknown_instance_types_note(&[], &["e2-highmem-8", "r7g.xlarge"], &[InstanceFamily::R7g])
            .unwrap()
            .split(" is not")
            .next(),
        Some("the result's instance type e2-highmem-8")
    );
    assert!(unknown_instance_types_note(&[], &["r7g.xlarge"], &[InstanceFamily::R7g]).is_none());
    // Families given: the instance type does not choose them, so nothing to say.
    assert!(
        unknown_instance_types_note(&[InstanceFamily::R7g], &["x"], &[InstanceFamily::R7g])
            .is_none()
    );
}

#[test]
fn an_engine_whose_keyspace_is_a_table_per_thread_says_its_thread_count_is_missing() {
    let mut dragonfly = redis_like("dragonfly", 120);
    dragonfly.engine = "dragonfly".into();
    dragonfly.version = "1.40.0".into();
    let planned = plan_engine(&dragonfly, &request(100_000_000, None)).unwrap();
    assert!(
        planned.projection.notes[0].contains("does not report Dragonfly's thread count"),
        "{:?}",
        planned.projection.notes
    );
    // A keyspace of one table (Redis) has no thread count to miss.
    let redis = plan_engine(&redis_like("redis", 120), &request(100_000_000, None)).unwrap();
    assert!(
        redis
            .projection
            .notes
            .iter()
            .all(|n| !n.contains("thread count")),
        "{:?}",
        redis.projection.notes
    );
}

/// The recommended-limits run (docs/results/capacity/), whose eviction peaks were sampled:
/// each engine's report as `membench run` wrote it.
fn recommended_run_reports() -> Vec<crate::client::measurement::measure::BenchmarkReport> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/results/capacity/recommended-500k-10000.json"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    serde_json::from_value(json["engines"].clone()).unwrap()
}

#[test]
fn a_sampled_eviction_peak_is_said_in_its_term_which_stays_measured() {
    let mut reports = recommended_run_reports();
    let valkey = reports
        .iter_mut()
        .find(|r| r.engine.name == "valkey")
        .unwrap();
    let eviction_term = |report: &crate::client::measurement::measure::BenchmarkReport| {
        let m = EngineMeasurement::from_report(report).unwrap();
        let r = recommend::recommend(&m, 600 << 20, &Default::default());
        r.terms
            .into_iter()
            .find(|t| t.name == "eviction_overshoot")
            .unwrap()
    };
    let eviction = valkey.repetitions[0].eviction.as_ref().unwrap();
    assert_eq!(eviction.peak_source, "sampled");
    let sampled = eviction_term(valkey);
    assert_eq!(sampled.source, recommend::TermSource::Measured);
    let note = sampled.note.unwrap();
    assert!(
        note.contains("the peak is the highest reading between batches of writes")
            && note.contains("may miss a transient"),
        "{note}"
    );
    // The engine's own peak: nothing to warn of.
    valkey.repetitions[0].eviction.as_mut().unwrap().peak_source = "engine".into();
    let from_engine = eviction_term(valkey);
    assert_eq!(from_engine.source, recommend::TermSource::Measured);
    assert!(
        !from_engine
            .note
            .as_deref()
            .unwrap()
            .contains("between batches"),
        "{from_engine:?}"
    );
}
