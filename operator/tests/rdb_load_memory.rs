//! Exactness of `membench load --workload rdb`: Valkey 9.1.2's own dump loaded by membench into
//! an empty Valkey 9.1.2 against Valkey loading that dump itself at start. The goal is 0.2%.
//! On strings, hashes, lists, sets, sorted sets and TTLs (no streams) membench's load comes out
//! 2.7% lower (13,134,288 B against 13,496,200 B), and `MEMORY STATS` says where: the main
//! keyspace table (`db.0` `overhead.hashtable.main`, 1,580,880 B against 1,941,072 B). Loading at start, Valkey
//! sizes that table from the file's RESIZEDB hint before the first key; keys written by
//! commands grow it step by step, as membench's load and any writes do (the same keyspace
//! written directly has membench's table to 0.03%). Everything else, the data, lands within
//! 0.2% (-0.015% measured): the test holds that, and that the main table is the rest. Streams are a known, larger
//! difference,
//! measured and bounded here: XADD leaves a stream's last node preallocated to
//! stream-node-max-bytes (4096 B), where a node loaded from a file is exactly its size, so a
//! stream written by commands holds up to 4 KiB more than the same stream loaded at start.

mod common;

use std::path::{Path, PathBuf};

use membench::crd::EngineKind;
use redis::Connection;

/// The largest relative difference in used_memory but the main keyspace table between the two
/// loads, without streams: the goal (see the module's comment).
const MOST_RELATIVE_DIFFERENCE: f64 = 0.002;

/// stream-node-max-bytes at its default: what XADD preallocates for a stream's last node.
const STREAM_NODE_MAX_BYTES: i64 = 4096;

/// Writes a keyspace of every type but streams: 40,000 strings (5 to 60 bytes), 8,000 with a
/// day's TTL, 4,000 hashes of 2 to 20 fields, 800 lists, 800 sets and 800 sorted sets of 1 to
/// 200 elements (past the listpack limits for some), and `streams` streams of 10 entries.
fn write_keyspace(con: &mut Connection, streams: u64) {
    let mut state = 7u64;
    let mut draw = |below: u64| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) % below
    };
    let mut pipe = redis::pipe();
    for i in 0..40_000 {
        pipe.cmd("SET")
            .arg(format!("str:{i}"))
            .arg("v".repeat(5 + draw(56) as usize))
            .ignore();
    }
    for i in 0..8_000 {
        pipe.cmd("SET")
            .arg(format!("ttl:{i}"))
            .arg(format!("val{i}"))
            .arg("EX")
            .arg(86_400)
            .ignore();
    }
    for i in 0..4_000 {
        let mut cmd = redis::cmd("HSET");
        cmd.arg(format!("h:{i}"));
        for f in 0..2 + draw(19) {
            cmd.arg(format!("f{f}"))
                .arg("x".repeat(1 + draw(30) as usize));
        }
        pipe.add_command(cmd).ignore();
    }
    for (kind, prefix) in [("RPUSH", "l"), ("SADD", "s"), ("ZADD", "z")] {
        for i in 0..800 {
            let mut cmd = redis::cmd(kind);
            cmd.arg(format!("{prefix}:{i}"));
            for j in 0..1 + draw(200) {
                if kind == "ZADD" {
                    cmd.arg(format!("{}.{}", draw(1000), draw(1000)));
                }
                cmd.arg(format!("m{j}:{}", draw(1_000_000)));
            }
            pipe.add_command(cmd).ignore();
        }
    }
    for i in 0..streams {
        for j in 0..10 {
            pipe.cmd("XADD")
                .arg(format!("x:{i}"))
                .arg("*")
                .arg("a")
                .arg(j)
                .arg("b")
                .arg("y".repeat(1 + draw(20) as usize))
                .ignore();
        }
    }
    pipe.query::<()>(con).unwrap();
}

fn config_dir(con: &mut Connection) -> PathBuf {
    let dir: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("dir")
        .query(con)
        .unwrap();
    PathBuf::from(&dir[1])
}

/// What a load left in the engine: used_memory (settled) and the part of it that is the main
/// keyspace table.
#[derive(Clone, Copy, Debug)]
struct Reading {
    used_memory: u64,
    main_table: u64,
}

impl Reading {
    fn of(con: &mut Connection) -> Reading {
        let used_memory = common::settled_used_memory(con);
        Reading {
            used_memory,
            main_table: main_table_bytes(con),
        }
    }

    /// used_memory without the main keyspace table.
    fn rest(&self) -> u64 {
        self.used_memory - self.main_table
    }
}

/// The bytes of the main keyspace table (`MEMORY STATS`, `db.0`, `overhead.hashtable.main`):
/// its buckets and the entries' overhead, which depend on how the table grew.
fn main_table_bytes(con: &mut Connection) -> u64 {
    let stats: Vec<redis::Value> = redis::cmd("MEMORY").arg("STATS").query(con).unwrap();
    let text = |v: &redis::Value| match v {
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        redis::Value::SimpleString(s) => s.clone(),
        _ => String::new(),
    };
    let db = stats
        .chunks(2)
        .find(|pair| text(&pair[0]) == "db.0")
        .map(|pair| pair[1].clone())
        .expect("MEMORY STATS has db.0");
    let redis::Value::Array(fields) = db else {
        panic!("MEMORY STATS db.0 is {db:?}")
    };
    fields
        .chunks(2)
        .find(|pair| text(&pair[0]) == "overhead.hashtable.main")
        .and_then(|pair| match pair[1] {
            redis::Value::Int(n) => u64::try_from(n).ok(),
            _ => None,
        })
        .expect("MEMORY STATS db.0 has overhead.hashtable.main")
}

/// Valkey 9.1.2 without latency tracking: its per-command histograms (about 24 KiB each, made at
/// a command's first use) are not data, and membench's load sends commands a server loading at
/// start never gets (with them, membench's side measured 2.6% more).
fn valkey() -> membench::crd::EngineSpec {
    let mut spec = common::shared_build(EngineKind::Valkey, "9.1.2");
    spec.args = vec!["--latency-tracking".into(), "no".into()];
    spec
}

/// What Valkey 9.1.2 loading `dump` itself at start held, and what an empty Valkey 9.1.2 held
/// after membench loaded it.
fn both_loads(dump: &Path, name: &str) -> (Reading, Reading) {
    let dir = std::env::temp_dir().join(format!("membench-rdb-self-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(dump, dir.join("dump.rdb")).unwrap();
    let mut spec = valkey();
    spec.args
        .extend(["--dir".into(), dir.display().to_string()]);
    let itself = common::start_spec(&spec);
    let mut con = common::connect(&itself.address);
    let keys: u64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert!(
        keys > 50_000,
        "Valkey loaded {keys} keys of {}",
        dump.display()
    );
    let by_itself = Reading::of(&mut con);
    drop(con);
    itself.stop();
    let _ = std::fs::remove_dir_all(&dir);

    let target = common::start_spec(&valkey());
    let output = common::load_rdb(dump, &target.address.socket_addr(), &["--keep-data"]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let mut con = common::connect(&target.address);
    let loaded: u64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(loaded, keys, "keys membench loaded");
    let by_membench = Reading::of(&mut con);
    drop(con);
    target.stop();
    (by_itself, by_membench)
}

fn valkey_dump(streams: u64, name: &str) -> PathBuf {
    let source = common::start_spec(&common::shared_build(EngineKind::Valkey, "9.1.2"));
    let mut con = common::connect(&source.address);
    write_keyspace(&mut con, streams);
    redis::cmd("SAVE").query::<()>(&mut con).unwrap();
    let kept = std::env::temp_dir().join(format!("membench-rdb-{name}-{}.rdb", std::process::id()));
    std::fs::copy(config_dir(&mut con).join("dump.rdb"), &kept).unwrap();
    drop(con);
    source.stop();
    kept
}

#[test]
fn valkey_s_own_dump_loaded_by_membench_holds_valkeys_memory_within_0_2_percent_but_its_presized_main_table()
 {
    let dump = valkey_dump(0, "no-streams");
    let (by_itself, by_membench) = both_loads(&dump, "no-streams");
    let relative = |membench: u64, itself: u64| (membench as f64 - itself as f64) / itself as f64;
    let whole = relative(by_membench.used_memory, by_itself.used_memory);
    let rest = relative(by_membench.rest(), by_itself.rest());
    eprintln!(
        "used_memory: {} B loaded by Valkey at start, {} B loaded by membench ({:+.3}%); main table {} B and {} B; the rest {} B and {} B ({:+.3}%)",
        by_itself.used_memory,
        by_membench.used_memory,
        whole * 100.0,
        by_itself.main_table,
        by_membench.main_table,
        by_itself.rest(),
        by_membench.rest(),
        rest * 100.0
    );
    assert!(
        rest.abs() <= MOST_RELATIVE_DIFFERENCE,
        "used_memory but the main table: {} B loaded by membench against {} B loaded by Valkey: {:+.3}%",
        by_membench.rest(),
        by_itself.rest(),
        rest * 100.0
    );
    // The table Valkey sized from the file's hint is never smaller than one grown by writes.
    assert!(
        by_itself.main_table >= by_membench.main_table,
        "{by_itself:?} loaded by Valkey, {by_membench:?} by membench"
    );
    let _ = std::fs::remove_file(dump);
}

#[test]
fn a_stream_written_by_xadd_holds_at_most_a_preallocated_node_more_than_one_loaded_at_start() {
    const STREAMS: u64 = 500;
    let with = valkey_dump(STREAMS, "streams");
    let (itself, membench) = both_loads(&with, "streams");
    let without = valkey_dump(0, "no-streams-2");
    let (itself_base, membench_base) = both_loads(&without, "no-streams-2");
    // What the streams add over the same keyspace without them, each way, per stream.
    let per_stream = |with: Reading, without: Reading| {
        (with.used_memory as i64 - without.used_memory as i64) / STREAMS as i64
    };
    let (by_itself, by_membench) = (
        per_stream(itself, itself_base),
        per_stream(membench, membench_base),
    );
    eprintln!(
        "per stream of 10 entries: {by_itself} B loaded by Valkey, {by_membench} B by membench"
    );
    let extra = by_membench - by_itself;
    // The extra is the last node's preallocation: above half of it (the entries fill some of
    // the 4096 B), never past it plus 64 B of allocator rounding.
    assert!(
        extra > STREAM_NODE_MAX_BYTES / 2 && extra <= STREAM_NODE_MAX_BYTES + 64,
        "{extra} B more per stream loaded by membench ({by_membench} B) than by Valkey ({by_itself} B)"
    );
    let _ = std::fs::remove_file(with);
    let _ = std::fs::remove_file(without);
}
