//! `membench load --workload rdb`: a dump of the engine store's Redis 8.6 (every type and
//! encoding, TTLs, hash-field TTLs, a stream with a consumer group, consumers and pending
//! entries, a deleted entry, three databases) loaded into Valkey 9.1 and Dragonfly, then read
//! back key by key from both servers: every key's type, contents and TTL equal the source's,
//! a stream's pending entries by consumer (XPENDING) and last id (XINFO STREAM), and where
//! the target has the commands, hash fields' TTLs (HPTTL), a stream's entries-added and
//! largest deleted id, and its groups' entries-read and lag (XINFO GROUPS); what the target
//! cannot take is said in the result's warnings.

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

/// How long ago the source's pending entries were delivered: far more than
/// [`TTL_MARGIN_MS`], so that a load that does not restore the delivery time (the entry then
/// reads as delivered at the load) is told from one that does.
const DELIVERED_AGO_MS: i64 = 3_600_000;

/// One key as a client reads it: its type, its contents in a canonical order, and its clocks
/// (the key's PTTL, each hash field's HPTTL, each pending entry's idle time), by name.
#[derive(Debug, PartialEq)]
struct ReadKey {
    kind: String,
    contents: Vec<String>,
    clocks: Vec<(String, i64)>,
}

/// What the target's commands let the test read and compare.
#[derive(Clone, Copy)]
struct Reading {
    /// HPTTL: hash fields' own TTLs.
    field_ttls: bool,
    /// XINFO STREAM's entries-added and max-deleted-entry-id restored by XSETID.
    stream_counters: bool,
    /// XINFO GROUPS's entries-read, restored by XGROUP SETID's ENTRIESREAD (and its lag, with
    /// the stream's counters).
    group_entries_read: bool,
}

/// A reply's flat fields (RESP2 array or RESP3 map) as name and value pairs.
fn fields_of(value: &redis::Value) -> Vec<(String, redis::Value)> {
    match value {
        redis::Value::Array(f) => f.chunks(2).map(|p| (text(&p[0]), p[1].clone())).collect(),
        redis::Value::Map(m) => m.iter().map(|(k, v)| (text(k), v.clone())).collect(),
        other => panic!("not a map: {other:?}"),
    }
}

fn field(fields: &[(String, redis::Value)], wanted: &str) -> String {
    fields
        .iter()
        .find(|(k, _)| k == wanted)
        .map(|(_, v)| text(v))
        .unwrap_or_default()
}

fn int(value: &redis::Value) -> i64 {
    match value {
        redis::Value::Int(n) => *n,
        other => panic!("not an integer: {other:?}"),
    }
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

/// A stream's entries, last id and counters, groups, consumers and pending entries.
fn read_stream(con: &mut Connection, name: &str, reading: Reading, key: &mut ReadKey) {
    key.contents = strings(con, &["XRANGE", name, "-", "+"]);
    let info = fields_of(&run(con, &["XINFO", "STREAM", name]));
    key.contents
        .push(format!("last id {}", field(&info, "last-generated-id")));
    if reading.stream_counters {
        key.contents.push(format!(
            "entries added {}, largest deleted {}",
            field(&info, "entries-added"),
            field(&info, "max-deleted-entry-id")
        ));
    }
    let redis::Value::Array(groups) = run(con, &["XINFO", "GROUPS", name]) else {
        panic!("XINFO GROUPS {name}");
    };
    for group in groups {
        let group = fields_of(&group);
        let group_name = field(&group, "name");
        key.contents.push(format!(
            "group {group_name} at {}",
            field(&group, "last-delivered-id")
        ));
        if reading.group_entries_read {
            key.contents.push(format!(
                "group {group_name} entries read {}",
                field(&group, "entries-read")
            ));
        }
        // The lag is the entries added less the entries read: restored with both.
        if reading.group_entries_read && reading.stream_counters {
            key.contents
                .push(format!("group {group_name} lag {}", field(&group, "lag")));
        }
        let redis::Value::Array(consumers) = run(con, &["XINFO", "CONSUMERS", name, &group_name])
        else {
            panic!("XINFO CONSUMERS {name} {group_name}");
        };
        let mut names: Vec<String> = consumers
            .iter()
            .map(|c| {
                let c = fields_of(c);
                format!(
                    "consumer {} with {}",
                    field(&c, "name"),
                    field(&c, "pending")
                )
            })
            .collect();
        names.sort();
        key.contents.extend(names);
        // Each pending entry: its id, consumer and delivery count; its idle time is a clock.
        let redis::Value::Array(pending) =
            run(con, &["XPENDING", name, &group_name, "-", "+", "1000"])
        else {
            panic!("XPENDING {name} {group_name}");
        };
        for entry in pending {
            let redis::Value::Array(parts) = entry else {
                panic!("a pending entry of {name}");
            };
            let id = text(&parts[0]);
            key.contents.push(format!(
                "pending {id} of {} delivered {} times",
                text(&parts[1]),
                int(&parts[3])
            ));
            key.clocks
                .push((format!("{group_name} {id} idle"), int(&parts[2])));
        }
    }
}

/// Every key of database `db`, read in full.
fn read_database(con: &mut Connection, db: u64, reading: Reading) -> BTreeMap<String, ReadKey> {
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
        let mut key = ReadKey {
            kind: text(&run(con, &["TYPE", &name])),
            contents: Vec::new(),
            clocks: Vec::new(),
        };
        match key.kind.as_str() {
            "string" => key.contents = strings(con, &["GET", &name]),
            "list" => key.contents = strings(con, &["LRANGE", &name, "0", "-1"]),
            "set" => {
                key.contents = strings(con, &["SMEMBERS", &name]);
                key.contents.sort();
            }
            "zset" => key.contents = strings(con, &["ZRANGE", &name, "0", "-1", "WITHSCORES"]),
            "hash" => {
                let flat = strings(con, &["HGETALL", &name]);
                if reading.field_ttls {
                    let fields: Vec<&str> = flat.chunks(2).map(|p| p[0].as_str()).collect();
                    let count = fields.len().to_string();
                    let args = [&["HPTTL", &name, "FIELDS", &count][..], &fields[..]].concat();
                    let redis::Value::Array(ttls) = run(con, &args) else {
                        panic!("HPTTL {name}");
                    };
                    for (field, ttl) in fields.iter().zip(&ttls) {
                        key.clocks.push((format!("field {field} ttl"), int(ttl)));
                    }
                }
                key.contents = sorted_pairs(flat);
            }
            "stream" => read_stream(con, &name, reading, &mut key),
            other => panic!("{name} has the type {other}"),
        }
        let pttl_ms = int(&run(con, &["PTTL", &name]));
        key.clocks.push(("ttl".into(), pttl_ms));
        key.clocks.sort();
        keys.insert(name, key);
    }
    run(con, &["SELECT", "0"]);
    keys
}

/// The databases the keyspace writes.
const DATABASES: [u64; 3] = [0, 2, 5];

fn read_all(con: &mut Connection, reading: Reading) -> BTreeMap<u64, BTreeMap<String, ReadKey>> {
    DATABASES
        .iter()
        .map(|db| (*db, read_database(con, *db, reading)))
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

/// The stream `st` given a history beyond what the keyspace writes: an entry added and deleted
/// (its last id and entries-added then exceed its last entry's), a second consumer with one
/// pending entry delivered 3 times, an idle consumer with none, a second group that read an
/// entry added after the deletion, and every pending entry's delivery time set
/// [`DELIVERED_AGO_MS`] in the past.
fn pending_history(con: &mut Connection) {
    run(con, &["SELECT", "0"]);
    let deleted = text(&run(con, &["XADD", "st", "*", "gone", "soon"]));
    run(con, &["XDEL", "st", &deleted]);
    run(
        con,
        &[
            "XREADGROUP",
            "GROUP",
            "readers",
            "reader-2",
            "COUNT",
            "1",
            "STREAMS",
            "st",
            ">",
        ],
    );
    run(
        con,
        &["XGROUP", "CREATECONSUMER", "st", "readers", "idle-reader"],
    );
    // A group that reads entries as they come: after reading a last entry (NOACK, nothing
    // pending) its entries-read is the entries ever added (7) and its lag 0. The group
    // "readers" last read before the deleted entry: the engine no longer knows its
    // entries-read (-1) and estimates its lag.
    run(con, &["XGROUP", "CREATE", "st", "tail", "$"]);
    run(con, &["XADD", "st", "*", "late", "1"]);
    run(
        con,
        &[
            "XREADGROUP",
            "GROUP",
            "tail",
            "tail-reader",
            "NOACK",
            "STREAMS",
            "st",
            ">",
        ],
    );
    let redis::Value::Array(time) = run(con, &["TIME"]) else {
        panic!("TIME");
    };
    let now_ms = text(&time[0]).parse::<i64>().unwrap() * 1000;
    let redis::Value::Array(pending) = run(con, &["XPENDING", "st", "readers", "-", "+", "100"])
    else {
        panic!("XPENDING st");
    };
    assert_eq!(pending.len(), 3, "st's pending entries");
    for (i, entry) in pending.iter().enumerate() {
        let redis::Value::Array(parts) = entry else {
            panic!("a pending entry of st");
        };
        let at = (now_ms - DELIVERED_AGO_MS).to_string();
        let count = (1 + 2 * i).to_string();
        run(
            con,
            &[
                "XCLAIM",
                "st",
                "readers",
                &text(&parts[1]),
                "0",
                &text(&parts[0]),
                "TIME",
                &at,
                "RETRYCOUNT",
                &count,
                "FORCE",
                "JUSTID",
            ],
        );
    }
}

/// Redis 8.6.3 given the keyspace, its dump saved and copied out; the server stays up to be
/// read back.
fn redis_dump(for_target: &str) -> (membench::local::runner::LocalEngine, PathBuf) {
    let server = common::start_spec(&common::shared_build(EngineKind::Redis, "8.6.3"));
    let mut con = common::connect(&server.address);
    write_keyspace(&mut con, true, true, false);
    pending_history(&mut con);
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

/// What the target must say it left out, when it lacks a command.
const NO_FIELD_TTLS: &str = "hash fields written without their own TTL";
const NO_STREAM_COUNTERS: &str = "entries-added and largest deleted id not restored";
const NO_GROUP_ENTRIES_READ: &str = "consumer groups' entries-read not restored";

fn loaded_into(target: EngineSpec, reading: Reading) {
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
    let want = read_all(&mut source_con, reading);
    let got = read_all(&mut target_con, reading);
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
    let mut field_clocks = 0;
    let mut idle_clocks = 0;
    for (db, keys) in &want {
        for (name, source_key) in keys {
            let loaded = &got[db][name];
            assert_eq!(
                (&loaded.kind, &loaded.contents),
                (&source_key.kind, &source_key.contents),
                "db {db} key {name}"
            );
            let labels = |k: &ReadKey| k.clocks.iter().map(|c| c.0.clone()).collect::<Vec<_>>();
            assert_eq!(labels(loaded), labels(source_key), "db {db} key {name}");
            for ((label, a), (_, b)) in loaded.clocks.iter().zip(&source_key.clocks) {
                // -1 (none) and -2 (no such field) must match as they are.
                assert_eq!(
                    *a < 0,
                    *b < 0,
                    "db {db} key {name} {label}: {a} loaded, {b} source"
                );
                assert!(
                    (a - b).abs() <= TTL_MARGIN_MS,
                    "db {db} key {name} {label}: {a} ms loaded, {b} ms in the source"
                );
                field_clocks += u64::from(label.starts_with("field") && *b > 0);
                idle_clocks += u64::from(label.ends_with("idle"));
            }
        }
    }
    // The comparison covered what it claims: the keyspace's 5 hash fields with their own
    // TTL where the target reads them, and st's 3 pending entries.
    assert_eq!(field_clocks, if reading.field_ttls { 5 } else { 0 });
    assert_eq!(idle_clocks, 3, "pending entries compared");
    // ... and st's groups' entries-read and lag, one known and one the engine estimates, where
    // the target takes SETID's ENTRIESREAD.
    if reading.group_entries_read {
        let st = &want[&0]["st"].contents;
        for wanted in [
            "group tail entries read 7",
            "group readers entries read nil",
        ] {
            assert!(st.iter().any(|c| c == wanted), "{wanted} in {st:#?}");
        }
        if reading.stream_counters {
            for wanted in ["group tail lag 0", "group readers lag nil"] {
                assert!(st.iter().any(|c| c == wanted), "{wanted} in {st:#?}");
            }
        }
    }
    let scan = &result["workload"]["scan"];
    assert_eq!(scan["field_ttls"], 5, "{scan}");
    assert_eq!(scan["pending_entries"], 3, "{scan}");
    assert_eq!(scan["groups_entries_read"], 2, "{scan}");
    // What the target cannot take is said, and only then.
    let warnings = result["warnings"].to_string();
    assert_eq!(
        warnings.contains(NO_FIELD_TTLS),
        !reading.field_ttls,
        "{warnings}"
    );
    assert_eq!(
        warnings.contains(NO_STREAM_COUNTERS),
        !reading.stream_counters,
        "{warnings}"
    );
    // Without entries-added, a group's lag is the engine's own: the warning says so.
    assert_eq!(
        warnings.contains("lag, which needs entries-added, is the engine's own estimate"),
        !reading.stream_counters,
        "{warnings}"
    );
    assert_eq!(
        warnings.contains(NO_GROUP_ENTRIES_READ),
        !reading.group_entries_read,
        "{warnings}"
    );
    let _ = std::fs::remove_file(dump);
    drop((source_con, target_con));
    server.stop();
    source.stop();
}

#[test]
fn a_redis_8_6_dump_loads_into_valkey_9_1_key_by_key() {
    loaded_into(
        common::shared_build(EngineKind::Valkey, "9.1.2"),
        Reading {
            field_ttls: true,
            stream_counters: true,
            group_entries_read: true,
        },
    );
}

#[test]
fn a_redis_8_6_dump_loads_into_dragonfly_key_by_key() {
    // Dragonfly 1.40 has no HPEXPIREAT and its XSETID takes no options. Its COMMAND INFO
    // lists no XGROUP subcommands, but it takes SETID's ENTRIESREAD (CREATE's it accepts and
    // ignores), which the probe on a scratch stream finds: the groups' entries-read are
    // restored. Their lag is not: it needs the entries added, which XSETID cannot set here.
    loaded_into(
        common::shared_build(EngineKind::Dragonfly, "1.40.0"),
        Reading {
            field_ttls: false,
            stream_counters: false,
            group_entries_read: true,
        },
    );
}

#[test]
fn a_spec_s_rdb_workload_runs_locally_through_the_plan() {
    let (source, dump) = redis_dump("spec");
    let mut source_con = common::connect(&source.address);
    let want = read_all(
        &mut source_con,
        Reading {
            field_ttls: false,
            stream_counters: false,
            group_entries_read: false,
        },
    );
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
