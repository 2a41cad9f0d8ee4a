//! `membench load --workload rdb`: a dump of the engine store's Redis 8.6 (every type and
//! encoding, TTLs, hash-field TTLs, a stream with a consumer group, three databases) loaded
//! into Valkey 9.1 and Dragonfly, then read back key by key from both servers: every key's
//! type, contents and TTL equal the source's, and the counts by database and type too.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use common::rdb_keyspace::{run, write_keyspace};
use membench::crd::{EngineKind, EngineSpec};
use redis::Connection;

/// The most two servers' TTLs of one key may differ by: the load keeps the key's absolute
/// expiry, so only the time between reading the two servers separates them (milliseconds
/// here); 2 s covers a slow machine, and a TTL reset at the load would be off by the time
/// since the source wrote it or by the whole TTL.
const TTL_MARGIN_MS: i64 = 2_000;

/// One key as a client reads it: its type, its contents in a canonical order, its TTL.
#[derive(Debug, PartialEq)]
struct ReadKey {
    kind: String,
    contents: Vec<String>,
    pttl_ms: i64,
}

fn text(value: &redis::Value) -> String {
    match value {
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        redis::Value::SimpleString(s) => s.clone(),
        redis::Value::Int(n) => n.to_string(),
        redis::Value::Array(items) => items.iter().map(text).collect::<Vec<_>>().join(" "),
        redis::Value::Nil => "nil".into(),
        other => format!("{other:?}"),
    }
}

fn strings(con: &mut Connection, args: &[&str]) -> Vec<String> {
    match run(con, args) {
        redis::Value::Array(items) => items.iter().map(text).collect(),
        other => vec![text(&other)],
    }
}

/// Pairs of a flat reply (field value ...), sorted.
fn sorted_pairs(flat: Vec<String>) -> Vec<String> {
    let mut pairs: Vec<String> = flat.chunks(2).map(|p| p.join("=")).collect();
    pairs.sort();
    pairs
}

/// Every key of database `db`, read in full.
fn read_database(con: &mut Connection, db: u64) -> BTreeMap<String, ReadKey> {
    run(con, &["SELECT", &db.to_string()]);
    let mut names = Vec::new();
    let mut cursor = "0".to_string();
    loop {
        let redis::Value::Array(parts) = run(con, &["SCAN", &cursor, "COUNT", "1000"]) else {
            panic!("SCAN answered no array");
        };
        cursor = text(&parts[0]);
        if let redis::Value::Array(keys) = &parts[1] {
            names.extend(keys.iter().map(text));
        }
        if cursor == "0" {
            break;
        }
    }
    names.sort();
    names.dedup();
    let mut keys = BTreeMap::new();
    for name in names {
        let kind = text(&run(con, &["TYPE", &name]));
        let contents = match kind.as_str() {
            "string" => strings(con, &["GET", &name]),
            "list" => strings(con, &["LRANGE", &name, "0", "-1"]),
            "set" => {
                let mut members = strings(con, &["SMEMBERS", &name]);
                members.sort();
                members
            }
            "zset" => strings(con, &["ZRANGE", &name, "0", "-1", "WITHSCORES"]),
            "hash" => sorted_pairs(strings(con, &["HGETALL", &name])),
            "stream" => {
                let mut contents = strings(con, &["XRANGE", &name, "-", "+"]);
                // Each group by its name and last-delivered id (its consumers and pending
                // entries are not carried by the load, and said so).
                let redis::Value::Array(groups) = run(con, &["XINFO", "GROUPS", &name]) else {
                    panic!("XINFO GROUPS {name}");
                };
                for group in groups {
                    let fields = match group {
                        redis::Value::Array(f) => f.iter().map(text).collect::<Vec<_>>(),
                        redis::Value::Map(m) => {
                            m.iter().flat_map(|(k, v)| [text(k), text(v)]).collect()
                        }
                        other => panic!("a group of {name} is {other:?}"),
                    };
                    let field = |wanted: &str| {
                        fields
                            .chunks(2)
                            .find(|p| p[0] == wanted)
                            .map(|p| p[1].clone())
                            .unwrap_or_default()
                    };
                    contents.push(format!(
                        "group {} at {}",
                        field("name"),
                        field("last-delivered-id")
                    ));
                }
                contents
            }
            other => panic!("{name} has the type {other}"),
        };
        let pttl_ms = match run(con, &["PTTL", &name]) {
            redis::Value::Int(n) => n,
            other => panic!("PTTL {name}: {other:?}"),
        };
        keys.insert(
            name,
            ReadKey {
                kind,
                contents,
                pttl_ms,
            },
        );
    }
    run(con, &["SELECT", "0"]);
    keys
}

/// The databases the keyspace writes.
const DATABASES: [u64; 3] = [0, 2, 5];

fn read_all(con: &mut Connection) -> BTreeMap<u64, BTreeMap<String, ReadKey>> {
    DATABASES
        .iter()
        .map(|db| (*db, read_database(con, *db)))
        .collect()
}

/// Keys by database and type.
fn census(keys: &BTreeMap<u64, BTreeMap<String, ReadKey>>) -> BTreeMap<(u64, String), u64> {
    let mut counts = BTreeMap::new();
    for (db, keys) in keys {
        for key in keys.values() {
            *counts.entry((*db, key.kind.clone())).or_default() += 1;
        }
    }
    counts
}

/// Redis 8.6.3 given the keyspace, its dump saved and copied out; the server stays up to be
/// read back.
fn redis_dump(for_target: &str) -> (membench::local::runner::LocalEngine, PathBuf) {
    let server = common::start_spec(&common::shared_build(EngineKind::Redis, "8.6.3"));
    let mut con = common::connect(&server.address);
    write_keyspace(&mut con, true, true, false);
    let dir: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("dir")
        .query(&mut con)
        .unwrap();
    run(&mut con, &["SAVE"]);
    // One file per test: the tests run at once.
    let kept = std::env::temp_dir().join(format!(
        "membench-rdb-load-{for_target}-{}.rdb",
        std::process::id()
    ));
    std::fs::copy(PathBuf::from(&dir[1]).join("dump.rdb"), &kept).unwrap();
    (server, kept)
}

fn loaded_into(target: EngineSpec) {
    let (source, dump) = redis_dump(target.engine.as_str());
    let server = common::start_spec(&target);
    let output = common::load_rdb(&dump, &server.address.socket_addr(), &["--keep-data"]);
    assert!(
        output.status.success(),
        "{} {}",
        common::stderr(&output),
        common::stdout(&output)
    );
    let result: serde_json::Value = serde_json::from_str(&common::stdout(&output)).unwrap();
    let mut source_con = common::connect(&source.address);
    let mut target_con = common::connect(&server.address);
    let want = read_all(&mut source_con);
    let got = read_all(&mut target_con);
    let written: u64 = census(&want).values().sum();
    // The keyspace holds 30 keys over three databases (tests/common/rdb_keyspace.rs).
    assert_eq!(written, 30, "keys read back from the source");
    assert_eq!(census(&got), census(&want), "keys by database and type");
    assert_eq!(result["repetitions"][0]["items"], written, "{result}");
    // Bytes per key by type, as a profile's rebuild reports them: one entry per type of the
    // file with its keys, each above 0 bytes.
    let mut keys_by_type: BTreeMap<String, u64> = BTreeMap::new();
    for ((_, kind), n) in census(&want) {
        *keys_by_type.entry(kind).or_default() += n;
    }
    let by_type: BTreeMap<String, u64> = result["repetitions"][0]["by_type"]
        .as_array()
        .unwrap_or_else(|| panic!("no by_type in {result}"))
        .iter()
        .map(|t| {
            assert!(t["bytes_per_key"].as_f64().unwrap() > 0.0, "{t}");
            (
                t["type"].as_str().unwrap().to_string(),
                t["keys"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        by_type, keys_by_type,
        "keys by type in the result's by_type"
    );
    for (db, keys) in &want {
        for (name, source_key) in keys {
            let loaded = &got[db][name];
            assert_eq!(
                (&loaded.kind, &loaded.contents),
                (&source_key.kind, &source_key.contents),
                "db {db} key {name}"
            );
            let (a, b) = (loaded.pttl_ms, source_key.pttl_ms);
            assert_eq!(
                a < 0,
                b < 0,
                "db {db} key {name}: PTTL {a} loaded, {b} source"
            );
            assert!(
                (a - b).abs() <= TTL_MARGIN_MS,
                "db {db} key {name}: PTTL {a} ms loaded, {b} ms in the source"
            );
        }
    }
    // Hash fields with their own TTL are written without it, and said so.
    let scan = &result["workload"]["scan"];
    assert!(scan["field_ttls"].as_u64().unwrap() > 0, "{scan}");
    let _ = std::fs::remove_file(dump);
    drop((source_con, target_con));
    server.stop();
    source.stop();
}

#[test]
fn a_redis_8_6_dump_loads_into_valkey_9_1_key_by_key() {
    loaded_into(common::shared_build(EngineKind::Valkey, "9.1.2"));
}

#[test]
fn a_redis_8_6_dump_loads_into_dragonfly_key_by_key() {
    loaded_into(common::shared_build(EngineKind::Dragonfly, "1.40.0"));
}

#[test]
fn a_spec_s_rdb_workload_runs_locally_through_the_plan() {
    let (source, dump) = redis_dump("spec");
    let mut source_con = common::connect(&source.address);
    let want = read_all(&mut source_con);
    drop(source_con);
    source.stop();
    let dir = std::env::temp_dir().join(format!("membench-rdb-spec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = common::run_spec(
        &dir,
        "rdb-spec",
        &format!(
            "  engines: [{{engine: valkey, version: \"9.1.2\"}}]\n  workload: {{rdb: {{path: {}}}}}\n  repetitions: 1\n",
            dump.display()
        ),
    );
    let engine = &json["engines"][0];
    assert!(engine["error"].is_null(), "{engine}");
    assert_eq!(engine["workload"]["kind"], "rdb", "{engine}");
    let keys: u64 = census(&want).values().sum();
    assert_eq!(engine["repetitions"][0]["items"], keys, "{engine}");
    let by_type = &engine["workload"]["scan"]["keys"];
    for ((db, kind), n) in census(&want) {
        assert_eq!(
            by_type[db.to_string()][&kind],
            n,
            "db {db} {kind}: {by_type}"
        );
    }
    let _ = std::fs::remove_file(dump);
    let _ = std::fs::remove_dir_all(dir);
}
