//! The figure membench reports is the engine's own: bytes per item recomputed independently,
//! over connections of the test's own, agrees with membench's within the memory of membench's
//! own connections; and no other client's buffers can land in a reading, because membench
//! waits until it is the engine's only client before its baseline and final readings and
//! fails the repetition, naming the others, when they do not leave in time.

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use membench::client::connection::engine::EngineAddress;
use membench::client::measurement::load_options::RunSettings;
use membench::client::measurement::measure::{LoadOptions, LoadProgress, measure};
use membench::client::workloads::workload::Workload;
use membench::crd::{EngineKind, RecordLayout};

/// What membench's two connections (control and load) may hold in the engine together. A
/// Redis 7.0 connection starts with a 16 KiB reply buffer and a 20 KiB query buffer (a batch
/// of 100 commands of up to 200 bytes fits in it) beside about 2 KiB of client structure;
/// the server shrinks the reply buffer to 1 KiB within seconds once it stays idle. So at
/// most 2 x 40 KiB; measured here at the end of every load (the sum of their CLIENT LIST
/// `tot-mem`): up to 74 KiB on Redis, 33 KiB on Valkey 9.1, which shares one query buffer
/// among its clients. membench's figure and one recomputed over another connection must
/// agree within it: the two are read through different connections, whose buffers the
/// server allocates and resizes on its own.
const OWN_CONNECTIONS_BOUND: u64 = 80 * 1024;

fn used_memory(connection: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("memory").query(connection).unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("INFO memory has used_memory")
}

/// The items the engine holds: ZCARD of the sorted set, else DBSIZE (for records stored as
/// strings, keys over fields).
fn items_in_engine(connection: &mut redis::Connection, workload: &Workload) -> u64 {
    match workload {
        Workload::SortedSet { key, .. } => redis::cmd("ZCARD").arg(key).query(connection).unwrap(),
        Workload::Records {
            layout: RecordLayout::Strings,
            fields,
            ..
        } => {
            let keys: u64 = redis::cmd("DBSIZE").query(connection).unwrap();
            assert_eq!(keys % fields.len() as u64, 0, "{keys} keys");
            keys / fields.len() as u64
        }
        _ => redis::cmd("DBSIZE").query(connection).unwrap(),
    }
}

/// The sum of CLIENT LIST `tot-mem` over every connection but the asking one.
fn memory_of_other_connections(address: &EngineAddress) -> u64 {
    let mut connection = common::connect(address);
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut connection)
        .unwrap();
    list.lines()
        .filter(|line| !line.contains("cmd=client|list"))
        .filter_map(|line| {
            line.split_whitespace()
                .find_map(|field| field.strip_prefix("tot-mem="))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .sum()
}

fn workloads() -> Vec<Workload> {
    let fields = membench::crd::default_record_fields();
    vec![
        Workload::SortedSet {
            members: 200_000,
            key: "membench:zset".into(),
            sample_every: 0,
        },
        Workload::RandomStrings {
            requests: 200_000,
            keyspace: 200_000,
            value_size: 16,
            seed: membench::crd::default_seed(),
        },
        Workload::Strings {
            keys: 100_000,
            value_size: 100,
        },
        Workload::Records {
            records: 50_000,
            layout: RecordLayout::Hash,
            fields: fields.clone(),
        },
        Workload::Records {
            records: 50_000,
            layout: RecordLayout::Strings,
            fields,
        },
    ]
}

/// Loads every workload into `engine` and checks membench's figure against one recomputed
/// from INFO memory and the engine's own count, read over the test's own connections
/// before and after.
fn every_workload_agrees_with_an_independent_reading(engine: EngineKind) {
    let server = common::start(engine, &[]);
    let options = LoadOptions::of(RunSettings {
        repetitions: 1,
        ..RunSettings::default()
    });
    for workload in workloads() {
        // A first load of the workload, thrown away: an engine allocates some things once, at
        // its first FLUSHALL or first command of a kind, which a reading taken before that
        // would count as data.
        let warm_up = measure(&server.address, &workload, &options, &mut |_| {});
        assert!(warm_up.error.is_none(), "{workload:?}: {:?}", warm_up.error);

        let mut connection = common::connect(&server.address);
        let _: () = redis::cmd("FLUSHALL")
            .arg("SYNC")
            .query(&mut connection)
            .unwrap();
        let before = used_memory(&mut connection);
        drop(connection);

        // At the end of the load both of membench's connections are open and at their fullest.
        let mut own_connections = 0;
        let total = workload.commands();
        let mut progress = |p: LoadProgress| {
            if p.commands_done == total {
                own_connections = memory_of_other_connections(&server.address);
            }
        };
        let report = measure(&server.address, &workload, &options, &mut progress);
        assert!(report.error.is_none(), "{workload:?}: {:?}", report.error);
        let measured = &report.repetitions[0];

        let mut connection = common::connect(&server.address);
        let after = used_memory(&mut connection);
        let items = items_in_engine(&mut connection, &workload);
        drop(connection);

        let what = format!("{engine} {}", workload.describe());
        assert!(
            own_connections > 0 && own_connections <= OWN_CONNECTIONS_BOUND,
            "{what}: membench's connections hold {own_connections} bytes, the bound is {OWN_CONNECTIONS_BOUND}"
        );
        assert_eq!(items, measured.items, "{what}");
        let independent = after as i64 - before as i64;
        let membench = measured.used_memory as i64 - measured.baseline_used_memory as i64;
        let difference = (independent - membench).unsigned_abs();
        assert!(
            difference <= OWN_CONNECTIONS_BOUND,
            "{what}: membench counted {membench} bytes, an independent reading {independent} ({difference} apart, more than {OWN_CONNECTIONS_BOUND})"
        );
        let independent_per_item = independent as f64 / items as f64;
        assert!(
            (independent_per_item - measured.bytes_per_item).abs()
                <= OWN_CONNECTIONS_BOUND as f64 / items as f64,
            "{what}: {independent_per_item} vs {} bytes per item",
            measured.bytes_per_item
        );
        println!(
            "{what}: membench {:.3} B/item, independent {independent_per_item:.3}, {difference} bytes apart; membench's connections held {own_connections} bytes",
            measured.bytes_per_item
        );
    }
}

#[test]
fn redis_bytes_per_item_agree_with_an_independent_reading_within_membench_connections() {
    every_workload_agrees_with_an_independent_reading(EngineKind::Redis);
}

#[test]
fn valkey_bytes_per_item_agree_with_an_independent_reading_within_membench_connections() {
    every_workload_agrees_with_an_independent_reading(EngineKind::Valkey);
}

fn sorted_set(members: u64) -> Workload {
    Workload::SortedSet {
        members,
        key: "membench:zset".into(),
        sample_every: 0,
    }
}

fn options(repetitions: u32, other_clients_timeout: Duration) -> LoadOptions {
    LoadOptions::of(RunSettings {
        repetitions,
        other_clients_timeout,
        ..RunSettings::default()
    })
}

fn named_connection(address: &EngineAddress, name: &str) -> redis::Connection {
    let mut connection = common::connect(address);
    let _: () = redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg(name)
        .query(&mut connection)
        .unwrap();
    connection
}

#[test]
fn a_client_that_stays_connected_fails_the_repetition_before_the_baseline_naming_it() {
    let redis = common::start(EngineKind::Redis, &[]);
    let _stray = named_connection(&redis.address, "stray-monitor");
    let started = Instant::now();
    let report = measure(
        &redis.address,
        &sorted_set(1_000),
        &options(2, Duration::from_secs(1)),
        &mut |_| {},
    );
    let error = report.error.as_ref().expect("the repetition fails");
    assert_eq!(error.category, "OtherClientsConnected", "{}", error.message);
    for expected in [
        "1 other client",
        "stray-monitor",
        "baseline",
        "--other-clients-timeout",
    ] {
        assert!(
            error.message.contains(expected),
            "{expected}: {}",
            error.message
        );
    }
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert!(report.repetitions.is_empty() && report.summary.is_none());
}

#[test]
fn a_client_that_connects_during_the_load_and_stays_fails_the_final_reading_keeping_earlier_repetitions()
 {
    let valkey = common::start(EngineKind::Valkey, &[]);
    let address = valkey.address.clone();
    let mut stray = None;
    let mut progress = |p: LoadProgress| {
        if p.repetition == 2 && stray.is_none() {
            stray = Some(named_connection(&address, "arrived-mid-load"));
        }
    };
    let report = measure(
        &valkey.address,
        &sorted_set(5_000),
        &options(2, Duration::from_secs(1)),
        &mut progress,
    );
    let error = report.error.as_ref().expect("the second repetition fails");
    assert_eq!(error.category, "OtherClientsConnected", "{}", error.message);
    assert!(
        error.message.contains("arrived-mid-load") && error.message.contains("final"),
        "{}",
        error.message
    );
    assert_eq!(report.repetitions.len(), 1, "the first repetition is kept");
    let failed = report
        .failed_repetition
        .as_ref()
        .expect("what is known of it");
    assert_eq!((failed.repetition, failed.commands_sent), (2, 5_000));
    assert!(failed.used_memory.is_some());
    assert_eq!(report.summary.as_ref().unwrap().repetitions, 1);
}

#[test]
fn a_client_that_leaves_in_time_is_waited_for_and_its_buffers_stay_out_of_the_baseline() {
    let redis = common::start(EngineKind::Redis, &[]);
    // Half of a 1 MB argument: the server holds it in the connection's query buffer.
    let mut stray = std::net::TcpStream::connect(redis.address.socket_addr()).unwrap();
    stray
        .write_all(b"*2\r\n$4\r\nECHO\r\n$1000000\r\n")
        .unwrap();
    stray.write_all(&vec![b'x'; 500_000]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while memory_of_other_connections(&redis.address) < 500_000 {
        assert!(
            Instant::now() < deadline,
            "the server never buffered the stray's argument"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let with_stray = used_memory(&mut common::connect(&redis.address));
    let leaves = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        drop(stray);
    });
    let report = measure(
        &redis.address,
        &sorted_set(1_000),
        &options(1, Duration::from_secs(10)),
        &mut |_| {},
    );
    leaves.join().unwrap();
    assert!(report.error.is_none(), "{:?}", report.error);
    let baseline = report.repetitions[0].baseline_used_memory;
    assert!(
        baseline + 500_000 < with_stray,
        "baseline {baseline} should not hold the stray's half-megabyte (used_memory with it: {with_stray})"
    );
}
