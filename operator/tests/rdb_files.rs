//! The RDB reader on files the engine store's own builds write: each engine is started, given
//! every type in its compact and full encodings (integers, TTLs, three databases, a stream
//! with a consumer group and pending entries, hash-field TTLs where the engine has them), made
//! to SAVE, and its dump read back: key counts per database and type, every key's element
//! count and elements' lengths, TTLs, stream groups and the checksum must be what was written.
//! And a damaged file (cut short, a byte flipped, compressed, a future version) fails with
//! the file, the byte offset and what to do.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use membench::crd::{EngineKind, EngineSpec};
use membench::rdb::{Checksum, KeyKind, Part};
use redis::Connection;

/// The TTL given to the keys that have one.
const TTL_MS: i64 = 3_600_000;

/// One key as written: what its dump must hold.
#[derive(Clone, Debug, Default, PartialEq)]
struct Expected {
    kind: String,
    ttl: bool,
    elements: u64,
    /// Sorted lengths of values, fields and scores.
    values: Vec<u64>,
    fields: Vec<u64>,
    scores: Vec<u64>,
    /// Fields per stream entry, sorted.
    entries: Vec<u64>,
    fields_with_ttl: u64,
    stream: Option<(u64, u64, u64)>,
}

fn sorted(mut v: Vec<u64>) -> Vec<u64> {
    v.sort_unstable();
    v
}

fn len(s: &str) -> u64 {
    s.len() as u64
}

fn run(con: &mut Connection, args: &[&str]) -> redis::Value {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(con)
        .unwrap_or_else(|e| panic!("{}: {e}", args.join(" ")))
}

/// Writes every type into `con`'s server; returns what each key must read back as, by
/// (db, name).
fn write_keyspace(
    con: &mut Connection,
    field_ttls: bool,
    idempotent_producers: bool,
    set_member_ttls: bool,
) -> BTreeMap<(u64, String), Expected> {
    let mut expected = BTreeMap::new();
    let mut put = |db: u64, name: &str, e: Expected| {
        expected.insert((db, name.to_string()), e);
    };
    run(con, &["SELECT", "0"]);
    // Strings: integers (negative too), short text, a long compressible one, with TTLs.
    for (name, value) in [
        ("s:int:1", "12345"),
        ("s:int:2", "-77"),
        ("s:int:big", "9007199254740993"),
        ("s:text", "hello world"),
        ("s:lead0", "007"),
    ] {
        run(con, &["SET", name, value]);
        put(
            0,
            name,
            Expected {
                kind: "string".into(),
                elements: len(value),
                values: vec![len(value)],
                ..Default::default()
            },
        );
    }
    let long = "x".repeat(5000);
    run(con, &["SET", "s:long", &long]);
    put(
        0,
        "s:long",
        Expected {
            kind: "string".into(),
            elements: 5000,
            values: vec![5000],
            ..Default::default()
        },
    );
    for i in 0..4 {
        let name = format!("s:ttl:{i}");
        let value = format!("v{}", "y".repeat(i * 30));
        run(con, &["SET", &name, &value, "PX", &TTL_MS.to_string()]);
        put(
            0,
            &name,
            Expected {
                kind: "string".into(),
                ttl: true,
                elements: len(&value),
                values: vec![len(&value)],
                ..Default::default()
            },
        );
    }
    // Lists: small (compact) and large (a quicklist of several nodes).
    let small_list = ["a", "bb", "123", "-4"];
    run(con, &[&["RPUSH", "l:small"][..], &small_list[..]].concat());
    put(
        0,
        "l:small",
        Expected {
            kind: "list".into(),
            elements: 4,
            values: sorted(small_list.iter().map(|s| len(s)).collect()),
            ..Default::default()
        },
    );
    let big_list: Vec<String> = (0..600)
        .map(|i| format!("item-{i}-{}", "z".repeat(i % 50)))
        .collect();
    let mut args = vec!["RPUSH", "l:big"];
    args.extend(big_list.iter().map(String::as_str));
    run(con, &args);
    put(
        0,
        "l:big",
        Expected {
            kind: "list".into(),
            ttl: false,
            elements: 600,
            values: sorted(big_list.iter().map(|s| len(s)).collect()),
            ..Default::default()
        },
    );
    // Sets: integers (an intset), small text, large.
    run(con, &["SADD", "set:ints", "1", "22", "-333"]);
    put(
        0,
        "set:ints",
        Expected {
            kind: "set".into(),
            elements: 3,
            values: vec![1, 2, 4],
            ..Default::default()
        },
    );
    run(con, &["SADD", "set:small", "alpha", "be", "c"]);
    put(
        0,
        "set:small",
        Expected {
            kind: "set".into(),
            elements: 3,
            values: vec![1, 2, 5],
            ..Default::default()
        },
    );
    let big_set: Vec<String> = (0..300).map(|i| format!("member:{i}")).collect();
    let mut args = vec!["SADD", "set:big"];
    args.extend(big_set.iter().map(String::as_str));
    run(con, &args);
    put(
        0,
        "set:big",
        Expected {
            kind: "set".into(),
            elements: 300,
            values: sorted(big_set.iter().map(|s| len(s)).collect()),
            ..Default::default()
        },
    );
    // Sorted sets: small with integral, fractional and negative scores; large.
    run(
        con,
        &["ZADD", "z:small", "1", "one", "2.5", "two", "-3", "three"],
    );
    put(
        0,
        "z:small",
        Expected {
            kind: "zset".into(),
            elements: 3,
            values: vec![3, 3, 5],
            scores: vec![1, 2, 3],
            ..Default::default()
        },
    );
    let mut args = vec!["ZADD".to_string(), "z:big".to_string()];
    for i in 0..200 {
        args.push(i.to_string());
        args.push(format!("m{i}"));
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    run(con, &refs);
    put(
        0,
        "z:big",
        Expected {
            kind: "zset".into(),
            elements: 200,
            values: sorted((0..200).map(|i| len(&format!("m{i}"))).collect()),
            scores: sorted((0..200).map(|i| len(&i.to_string())).collect()),
            ..Default::default()
        },
    );
    // Hashes: small, large, and one with a TTL on the key.
    run(
        con,
        &[
            "HSET", "h:small", "name", "Ada", "age", "36", "city", "London",
        ],
    );
    put(
        0,
        "h:small",
        Expected {
            kind: "hash".into(),
            elements: 3,
            fields: vec![3, 4, 4],
            values: vec![2, 3, 6],
            ..Default::default()
        },
    );
    let mut args = vec!["HSET".to_string(), "h:big".to_string()];
    for i in 0..300 {
        args.push(format!("field{i}"));
        args.push("v".repeat(i % 70));
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    run(con, &refs);
    put(
        0,
        "h:big",
        Expected {
            kind: "hash".into(),
            elements: 300,
            fields: sorted((0..300).map(|i| len(&format!("field{i}"))).collect()),
            values: sorted((0..300).map(|i| (i % 70) as u64).collect()),
            ..Default::default()
        },
    );
    run(con, &["HSET", "h:ttl", "a", "1", "b", "2"]);
    run(con, &["PEXPIRE", "h:ttl", &TTL_MS.to_string()]);
    put(
        0,
        "h:ttl",
        Expected {
            kind: "hash".into(),
            ttl: true,
            elements: 2,
            fields: vec![1, 1],
            values: vec![1, 1],
            ..Default::default()
        },
    );
    // Hash-field TTLs, small (listpack) and large (hashtable).
    if field_ttls {
        run(
            con,
            &["HSET", "hf:small", "f1", "v1", "f2", "v2", "f3", "v3"],
        );
        run(
            con,
            &["HEXPIRE", "hf:small", "3600", "FIELDS", "2", "f1", "f2"],
        );
        put(
            0,
            "hf:small",
            Expected {
                kind: "hash".into(),
                elements: 3,
                fields: vec![2, 2, 2],
                values: vec![2, 2, 2],
                fields_with_ttl: 2,
                ..Default::default()
            },
        );
        let mut args = vec!["HSET".to_string(), "hf:big".to_string()];
        for i in 0..200 {
            args.push(format!("f{i}"));
            // Past hash-max-listpack-value (64): a hashtable, saved as HASH_METADATA.
            args.push(format!("value-{i}-{}", "w".repeat(70)));
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        run(con, &refs);
        run(
            con,
            &["HEXPIRE", "hf:big", "3600", "FIELDS", "3", "f1", "f2", "f3"],
        );
        put(
            0,
            "hf:big",
            Expected {
                kind: "hash".into(),
                elements: 200,
                fields: sorted((0..200).map(|i| len(&format!("f{i}"))).collect()),
                values: sorted(
                    (0..200)
                        .map(|i| len(&format!("value-{i}-{}", "w".repeat(70))))
                        .collect(),
                ),
                fields_with_ttl: 3,
                ..Default::default()
            },
        );
    }
    // A stream: entries with the same fields and with others, a group, two pending entries.
    let mut fields = Vec::new();
    let mut values = Vec::new();
    let mut entries = Vec::new();
    for i in 0..5 {
        let pairs: Vec<(String, String)> = if i % 2 == 0 {
            vec![
                ("temp".into(), format!("{}", 20 + i)),
                ("unit".into(), "celsius".into()),
            ]
        } else {
            vec![("event".into(), format!("door-{i}-opened"))]
        };
        let mut args = vec!["XADD".to_string(), "st".to_string(), "*".to_string()];
        for (f, v) in &pairs {
            args.push(f.clone());
            args.push(v.clone());
            fields.push(len(f));
            values.push(len(v));
        }
        entries.push(pairs.len() as u64);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        run(con, &refs);
    }
    run(con, &["XGROUP", "CREATE", "st", "readers", "0"]);
    run(
        con,
        &[
            "XREADGROUP",
            "GROUP",
            "readers",
            "reader-1",
            "COUNT",
            "2",
            "STREAMS",
            "st",
            ">",
        ],
    );
    put(
        0,
        "st",
        Expected {
            kind: "stream".into(),
            elements: 5,
            fields: sorted(fields),
            values: sorted(values),
            entries: sorted(entries),
            stream: Some((1, 1, 2)),
            ..Default::default()
        },
    );
    // Dragonfly's set members with their own TTL (SADDEX): its RDB type 32.
    if set_member_ttls {
        run(con, &["SADDEX", "set:ttl", "3600", "a", "bb", "ccc"]);
        put(
            0,
            "set:ttl",
            Expected {
                kind: "set".into(),
                elements: 3,
                values: vec![1, 2, 3],
                fields_with_ttl: 3,
                ..Default::default()
            },
        );
    }
    // Redis 8.6's idempotent producers: a stream that keeps their ids (RDB stream type 26).
    if idempotent_producers {
        run(
            con,
            &[
                "XADD",
                "st:idmp",
                "IDMP",
                "producer-1",
                "iid-1",
                "*",
                "a",
                "1",
            ],
        );
        run(
            con,
            &[
                "XADD",
                "st:idmp",
                "IDMP",
                "producer-1",
                "iid-2",
                "*",
                "a",
                "22",
            ],
        );
        run(
            con,
            &[
                "XADD",
                "st:idmp",
                "IDMPAUTO",
                "producer-2",
                "*",
                "bb",
                "333",
            ],
        );
        put(
            0,
            "st:idmp",
            Expected {
                kind: "stream".into(),
                elements: 3,
                fields: vec![1, 1, 2],
                values: vec![1, 2, 3],
                entries: vec![1, 1, 1],
                stream: Some((0, 0, 0)),
                ..Default::default()
            },
        );
    }
    // Two more databases.
    run(con, &["SELECT", "2"]);
    for i in 0..5 {
        let name = format!("other:{i}");
        run(con, &["SET", &name, "x"]);
        put(
            2,
            &name,
            Expected {
                kind: "string".into(),
                ttl: i == 0,
                elements: 1,
                values: vec![1],
                ..Default::default()
            },
        );
    }
    run(con, &["PEXPIRE", "other:0", &TTL_MS.to_string()]);
    run(con, &["SELECT", "5"]);
    run(con, &["RPUSH", "db5:list", "p", "q"]);
    put(
        5,
        "db5:list",
        Expected {
            kind: "list".into(),
            elements: 2,
            values: vec![1, 1],
            ..Default::default()
        },
    );
    run(con, &["SELECT", "0"]);
    expected
}

fn kind_name(kind: &KeyKind) -> String {
    match kind {
        KeyKind::String => "string".into(),
        KeyKind::List => "list".into(),
        KeyKind::Set => "set".into(),
        KeyKind::Zset => "zset".into(),
        KeyKind::Hash => "hash".into(),
        KeyKind::Stream => "stream".into(),
        KeyKind::Module(name) => format!("module {name}"),
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// What a dump read back as: its keys, its checksum, its header and the value types it held.
struct ReadBack {
    keys: BTreeMap<(u64, String), Expected>,
    checksum: Checksum,
    header: String,
    types: std::collections::BTreeSet<u8>,
}

/// Reads the dump at `path` into the same shape as [`Expected`].
fn read_dump(path: &Path) -> ReadBack {
    let mut reader = membench::rdb::open(path).unwrap_or_else(|e| panic!("{e}"));
    let header = format!("{}{}", reader.magic().as_str(), reader.version());
    let mut read = BTreeMap::new();
    let mut types = std::collections::BTreeSet::new();
    let started = now_ms();
    loop {
        let mut values = Vec::new();
        let mut fields = Vec::new();
        let mut scores = Vec::new();
        let mut entries = Vec::new();
        let key = reader
            .next_key(&mut |_, part, scalar| match part {
                Part::Value => values.push(scalar.length),
                Part::Field => fields.push(scalar.length),
                Part::Score => scores.push(scalar.length),
                Part::Entry { fields } => entries.push(fields),
            })
            .unwrap_or_else(|e| panic!("{e}"));
        let Some(key) = key else { break };
        types.insert(key.rdb_type);
        if let Some(at) = key.expire_at_ms {
            // Written with an hour to live a few seconds before.
            let left = at - started;
            assert!(
                left > TTL_MS - 120_000 && left <= TTL_MS,
                "{}: {left} ms left of {TTL_MS}",
                String::from_utf8_lossy(&key.name)
            );
        }
        read.insert(
            (key.db, String::from_utf8_lossy(&key.name).into_owned()),
            Expected {
                kind: kind_name(&key.kind),
                ttl: key.expire_at_ms.is_some(),
                elements: key.elements,
                values: sorted(values),
                fields: sorted(fields),
                scores: sorted(scores),
                entries: sorted(entries),
                fields_with_ttl: key.fields_with_ttl,
                stream: key.stream.map(|s| (s.groups, s.consumers, s.pending)),
            },
        );
    }
    let checksum = reader
        .facts()
        .checksum
        .expect("a file read to its end has a checksum state");
    ReadBack {
        keys: read,
        checksum,
        header,
        types,
    }
}

/// The dump file a SAVE left in `dir`.
fn dump_in(dir: &str) -> PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "rdb"))
        .unwrap_or_else(|| panic!("no .rdb file in {dir} after SAVE"))
}

/// Starts `engine` at `version`, writes the keyspace, saves, and checks the dump; returns
/// the dump's path (a copy in a directory of the test's own) and its header.
fn saved_dump_reads_back(
    engine: EngineKind,
    version: &str,
    field_ttls: bool,
    header: &str,
) -> PathBuf {
    let server = common::start_spec(&EngineSpec::new(engine, version));
    let mut con = common::connect(&server.address);
    let idempotent_producers = engine == EngineKind::Redis && version == "8.6.3";
    let written = write_keyspace(
        &mut con,
        field_ttls,
        idempotent_producers,
        engine == EngineKind::Dragonfly,
    );
    let dir: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("dir")
        .query(&mut con)
        .unwrap();
    if engine == EngineKind::Dragonfly {
        run(&mut con, &["SAVE", "RDB", "membench-rdb-test"]);
    } else {
        run(&mut con, &["SAVE"]);
    }
    let dump = dump_in(&dir[1]);
    let kept = std::env::temp_dir().join(format!(
        "membench-rdb-{engine}-{version}-{}.rdb",
        std::process::id()
    ));
    std::fs::copy(&dump, &kept).unwrap();
    drop(con);
    server.stop();

    let ReadBack {
        keys: read,
        checksum,
        header: found_header,
        types,
    } = read_dump(&kept);
    // Which value types the engine wrote, for the record.
    eprintln!("{engine} {version}: {found_header}, RDB value types {types:?}");
    assert_eq!(found_header, header, "the header of {}", kept.display());
    // Dragonfly 1.40 writes 8 zero bytes where the checksum goes (checksum off).
    if engine == EngineKind::Dragonfly {
        assert_eq!(checksum, Checksum::Disabled, "{}", kept.display());
    } else {
        assert!(
            matches!(checksum, Checksum::Verified(_)),
            "{}: {checksum:?}",
            kept.display()
        );
    }
    // Per database and type, then key by key.
    let census = |keys: &BTreeMap<(u64, String), Expected>| -> BTreeMap<(u64, String), usize> {
        let mut counts = BTreeMap::new();
        for ((db, _), e) in keys {
            *counts.entry((*db, e.kind.clone())).or_default() += 1;
        }
        counts
    };
    assert_eq!(
        census(&read),
        census(&written),
        "keys per database and type"
    );
    for (key, want) in &written {
        let got = read
            .get(key)
            .unwrap_or_else(|| panic!("{key:?} is not in the dump"));
        assert_eq!(got, want, "{key:?} in the {engine} {version} dump");
    }
    kept
}

macro_rules! engine_test {
    ($name:ident, $engine:expr, $version:expr, $field_ttls:expr, $header:expr) => {
        #[test]
        fn $name() {
            let kept = saved_dump_reads_back($engine, $version, $field_ttls, $header);
            let _ = std::fs::remove_file(kept);
        }
    };
}

engine_test!(
    redis_6_2_dump_reads_back,
    EngineKind::Redis,
    "6.2.14",
    false,
    "REDIS9"
);
engine_test!(
    redis_7_0_dump_reads_back,
    EngineKind::Redis,
    "7.0.15",
    false,
    "REDIS10"
);
engine_test!(
    redis_7_4_dump_reads_back,
    EngineKind::Redis,
    "7.4.1",
    true,
    "REDIS12"
);
engine_test!(
    redis_8_0_dump_reads_back,
    EngineKind::Redis,
    "8.0.6",
    true,
    "REDIS12"
);
engine_test!(
    redis_8_2_dump_reads_back,
    EngineKind::Redis,
    "8.2.3",
    true,
    "REDIS12"
);
engine_test!(
    redis_8_6_dump_reads_back,
    EngineKind::Redis,
    "8.6.3",
    true,
    "REDIS13"
);
engine_test!(
    valkey_7_2_dump_reads_back,
    EngineKind::Valkey,
    "7.2.13",
    false,
    "REDIS11"
);
engine_test!(
    valkey_8_0_dump_reads_back,
    EngineKind::Valkey,
    "8.0.9",
    false,
    "REDIS11"
);
engine_test!(
    valkey_8_1_dump_reads_back,
    EngineKind::Valkey,
    "8.1.7",
    false,
    "REDIS11"
);
engine_test!(
    valkey_9_0_dump_reads_back,
    EngineKind::Valkey,
    "9.0.4",
    true,
    "VALKEY80"
);
engine_test!(
    valkey_9_1_dump_reads_back,
    EngineKind::Valkey,
    "9.1.2",
    true,
    "VALKEY80"
);
engine_test!(
    dragonfly_1_40_dump_reads_back,
    EngineKind::Dragonfly,
    "1.40.0",
    true,
    "REDIS9"
);

/// The error reading `bytes` (written to a file of the test's own) ends with.
fn error_of(bytes: &[u8], name: &str) -> (String, String) {
    let path = std::env::temp_dir().join(format!("membench-rdb-{name}-{}.rdb", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    let result = (|| {
        let mut reader = membench::rdb::open(&path)?;
        while reader.next_key(&mut |_, _, _| {})?.is_some() {}
        Ok::<_, membench::rdb::RdbError>(())
    })();
    let _ = std::fs::remove_file(&path);
    let error = result.expect_err("a damaged file must not read");
    (error.to_string(), path.display().to_string())
}

#[test]
fn a_damaged_dump_fails_naming_the_file_the_offset_and_what_to_do() {
    let kept = saved_dump_reads_back(EngineKind::Valkey, "9.1.2", true, "VALKEY80");
    let whole = std::fs::read(&kept).unwrap();
    let _ = std::fs::remove_file(&kept);

    // Cut short in the middle: the end of what is there is the offset.
    let cut = whole.len() / 2;
    let (message, path) = error_of(&whole[..cut], "cut");
    assert!(
        message.starts_with(&format!("{path}: at byte {cut}: the file ends inside")),
        "{message}"
    );
    assert!(
        message.contains("truncated") && message.contains("run SAVE"),
        "{message}"
    );

    // One byte of a key name flipped: the file parses, the checksum (at the end) differs.
    let at = whole
        .windows(7)
        .position(|w| w == b"h:small")
        .expect("the dump holds the key h:small");
    let mut flipped = whole.clone();
    flipped[at] ^= 0x20;
    let (message, path) = error_of(&flipped, "flipped");
    let checksum_at = whole.len() - 8;
    assert!(
        message.starts_with(&format!(
            "{path}: at byte {checksum_at}: the CRC64 checksum"
        )),
        "{message}"
    );
    assert!(
        message.contains("corrupt") && message.contains("copy it again"),
        "{message}"
    );

    // A compressed dump, and a version from the future.
    let (message, _) = error_of(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3], "gzip");
    assert!(
        message.contains("at byte 0: the file is gzip-compressed") && message.contains("gunzip"),
        "{message}"
    );
    let mut future = whole.clone();
    future[..9].copy_from_slice(b"REDIS0099");
    let (message, _) = error_of(&future, "future");
    assert!(
        message.contains("at byte 5: REDIS RDB version 99 is not one this membench reads"),
        "{message}"
    );
    let (message, _) = error_of(b"not an rdb file at all", "text");
    assert!(
        message.contains("at byte 0: the file does not start with REDIS or VALKEY"),
        "{message}"
    );
}
