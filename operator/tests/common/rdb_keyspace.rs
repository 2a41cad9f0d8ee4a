//! A keyspace of every type and encoding written into an engine, and what each key must read
//! back as from the engine's dump (tests/rdb_files.rs).

use std::collections::BTreeMap;

use redis::Connection;

/// The TTL given to the keys that have one.
pub const TTL_MS: i64 = 3_600_000;

/// One key as written: what its dump must hold.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Expected {
    pub kind: String,
    pub ttl: bool,
    pub elements: u64,
    /// Sorted lengths of values, fields and scores.
    pub values: Vec<u64>,
    pub fields: Vec<u64>,
    pub scores: Vec<u64>,
    /// Fields per stream entry, sorted.
    pub entries: Vec<u64>,
    pub fields_with_ttl: u64,
    pub stream: Option<(u64, u64, u64)>,
}

pub fn sorted(mut v: Vec<u64>) -> Vec<u64> {
    v.sort_unstable();
    v
}

fn len(s: &str) -> u64 {
    s.len() as u64
}

pub fn run(con: &mut Connection, args: &[&str]) -> redis::Value {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(con)
        .unwrap_or_else(|e| panic!("{}: {e}", args.join(" ")))
}

/// Writes every type into `con`'s server; returns what each key must read back as, by
/// (db, name).
pub fn write_keyspace(
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
