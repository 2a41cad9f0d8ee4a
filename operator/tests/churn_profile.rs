//! Churn of a profile's rebuild against real engines from the store (Valkey 9.1.2 and Dragonfly
//! 1.40): a round loses and rewrites the same keys of every type on both, checked key by key
//! against the test's own replay of the published draws by the numbers in the keys' names, and
//! the counts each round reports (keys, and elements by type) are the engine's, read over the
//! test's own connection.

mod common;

use common::churn::{dbsize, number, replay, rounds_of};
use membench::client::connection::engine::EngineAddress;
use membench::crd::EngineKind;
use serde_json::Value;

/// A small profile of every type, its elements about 150 bytes (so that a round's
/// 300-byte rewrites of a quarter of the half it left do not outweigh the half it deleted): a
/// quarter of the strings and of the hashes with a TTL, a few lists past the listpack's length.
const MIXED_PROFILE: &str = r#"format: 1
source: {keys: 4000}
groups:
- template: "s:{n}"
  type: string
  share: 0.35
  keyLength: {buckets: [[10, 10, 1]]}
  ttl: {share: 0.25, millis: {buckets: [[100000, 100000, 1]]}}
  values: {textLength: {buckets: [[100, 200, 1]]}}
- template: "h:{n}"
  type: hash
  share: 0.2
  keyLength: {buckets: [[10, 10, 1]]}
  ttl: {share: 0.25, millis: {buckets: [[100000, 100000, 1]]}}
  elements: {buckets: [[3, 8, 1]]}
  fields: {textLength: {buckets: [[4, 8, 1]]}}
  values: {textLength: {buckets: [[100, 200, 1]]}}
- template: "t:{n}"
  type: set
  share: 0.15
  keyLength: {buckets: [[10, 10, 1]]}
  elements: {buckets: [[3, 10, 1]]}
  values: {textLength: {buckets: [[100, 200, 1]]}}
- template: "l:{n}"
  type: list
  share: 0.15
  keyLength: {buckets: [[10, 10, 1]]}
  elements: {buckets: [[3, 10, 20], [150, 200, 1]]}
  values: {textLength: {buckets: [[100, 200, 1]]}}
- template: "x:{n}"
  type: stream
  share: 0.05
  keyLength: {buckets: [[10, 10, 1]]}
  elements: {buckets: [[2, 5, 1]]}
  entryFields: {buckets: [[2, 2, 1]]}
  fields: {textLength: {buckets: [[4, 6, 1]]}}
  values: {textLength: {buckets: [[100, 200, 1]]}}
- template: "z:{n}"
  type: zset
  share: 0.1
  keyLength: {buckets: [[10, 10, 1]]}
  elements: {buckets: [[3, 10, 1]]}
  scores: {integerShare: 1.0, integerLength: {buckets: [[2, 6, 1]]}}
  values: {textLength: {buckets: [[100, 200, 1]]}}
"#;

/// A key as the test reads it from the engine: its type, its length (a string's bytes, a
/// collection's elements), whether it has a TTL, and whether it holds the churn's rewrite (a
/// string of 300 bytes; a hash's field `0` of 300 bytes, a list's first value of 300 bytes, a
/// set's or sorted set's member `m:0:` padded to 300, scored 0; a stream's first entry of one
/// field `v` of 300 bytes).
#[derive(Clone, Debug, PartialEq)]
struct HeldKey {
    key_type: String,
    length: u64,
    ttl: bool,
    rewritten: bool,
}

/// Every key the engine holds, read over the test's own connection (SCAN, then pipelined
/// TYPE, the lengths, PTTL and the rewrite's probe).
fn held_keys(address: &EngineAddress) -> std::collections::BTreeMap<String, HeldKey> {
    let mut connection = common::connect(address);
    let names: Vec<String> = redis::cmd("SCAN")
        .cursor_arg(0)
        .arg("COUNT")
        .arg(1000)
        .clone()
        .iter(&mut connection)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let mut types = redis::pipe();
    for name in &names {
        types.cmd("TYPE").arg(name);
    }
    let types: Vec<String> = types.query(&mut connection).unwrap();
    let member = format!("{:x<300}", "m:0:");
    let (mut lengths, mut ttls, mut probes) = (redis::pipe(), redis::pipe(), redis::pipe());
    for (name, key_type) in names.iter().zip(&types) {
        let (length, probe) = match key_type.as_str() {
            "string" => ("STRLEN", redis::cmd("STRLEN").arg(name).clone()),
            "hash" => ("HLEN", redis::cmd("HSTRLEN").arg(name).arg("0").clone()),
            "list" => ("LLEN", redis::cmd("LINDEX").arg(name).arg(0).clone()),
            "set" => (
                "SCARD",
                redis::cmd("SISMEMBER").arg(name).arg(&member).clone(),
            ),
            "zset" => ("ZCARD", redis::cmd("ZSCORE").arg(name).arg(&member).clone()),
            "stream" => (
                "XLEN",
                redis::cmd("XRANGE")
                    .arg(name)
                    .arg("-")
                    .arg("+")
                    .arg("COUNT")
                    .arg(1)
                    .clone(),
            ),
            other => panic!("{name} is a {other}"),
        };
        lengths.cmd(length).arg(name);
        ttls.cmd("PTTL").arg(name);
        probes.add_command(probe);
    }
    let lengths: Vec<u64> = lengths.query(&mut connection).unwrap();
    let ttls: Vec<i64> = ttls.query(&mut connection).unwrap();
    let probes: Vec<redis::Value> = probes.query(&mut connection).unwrap();
    let mut held = std::collections::BTreeMap::new();
    for (i, name) in names.into_iter().enumerate() {
        let rewritten = match (types[i].as_str(), &probes[i]) {
            ("string" | "hash", redis::Value::Int(n)) => *n == 300,
            ("set", redis::Value::Int(n)) => *n == 1,
            ("zset", redis::Value::BulkString(score)) => score == b"0",
            ("list", redis::Value::BulkString(value)) => value.len() == 300,
            ("stream", redis::Value::Array(entries)) => {
                let fields = match entries.first() {
                    Some(redis::Value::Array(entry)) => entry.get(1),
                    _ => None,
                };
                matches!(fields, Some(redis::Value::Array(pair))
                    if pair.len() == 2
                        && pair[0] == redis::Value::BulkString(b"v".to_vec())
                        && matches!(&pair[1], redis::Value::BulkString(v) if v.len() == 300))
            }
            _ => false,
        };
        let key = HeldKey {
            key_type: types[i].clone(),
            length: lengths[i],
            ttl: ttls[i] > 0,
            rewritten,
        };
        held.insert(name, key);
    }
    held
}

/// A rebuilt key's number, over the profile's groups in order: its group's first (4,000 keys
/// by the shares above: 1,400 strings, 800 hashes, 600 sets, 600 lists, 200 streams, 400
/// sorted sets) and its place in the group, the digits its template's `{n}` wrote (a group
/// numbers its names from 0).
fn key_number(name: &str) -> usize {
    let (prefix, place) = name.split_once(':').unwrap();
    let first = match prefix {
        "s" => 0,
        "h" => 1_400,
        "t" => 2_200,
        "l" => 2_800,
        "x" => 3_400,
        "z" => 3_600,
        other => panic!("a key of no group: {other}"),
    };
    first + place.parse::<usize>().unwrap()
}

/// The elements of each collection type among `keys`, and of them all.
fn elements_by_type<'a>(
    keys: impl Iterator<Item = &'a HeldKey>,
) -> std::collections::BTreeMap<String, u64> {
    let mut sums = std::collections::BTreeMap::new();
    for key in keys.filter(|k| k.key_type != "string") {
        *sums.entry(key.key_type.clone()).or_insert(0) += key.length;
        *sums.entry("all".to_string()).or_insert(0) += key.length;
    }
    sums
}

#[test]
fn a_profiles_rebuild_loses_and_rewrites_the_same_keys_of_every_type_counted_in_the_engine() {
    for engine in [EngineKind::Valkey, EngineKind::Dragonfly] {
        profile_rebuild_churned(engine);
    }
}

fn profile_rebuild_churned(engine: EngineKind) {
    let dir = std::env::temp_dir().join(format!(
        "membench-churn-profile-{engine:?}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("profile.yaml");
    std::fs::write(&path, MIXED_PROFILE).unwrap();
    let server = common::start(engine, &[]);
    let rebuild = |extra: &[&str]| {
        let mut args = common::rebuild_args(&server.address.socket_addr(), &path, 1, "json");
        args.extend(extra.iter().map(|a| a.to_string()));
        args.push("--keep-data".into());
        let output = common::membench(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(output.status.success(), "{}", common::stderr(&output));
        serde_json::from_slice::<Value>(&output.stdout).unwrap()
    };

    // The rebuild alone, read key by key; then emptied and rebuilt again, churned.
    rebuild(&[]);
    let loaded = held_keys(&server.address);
    assert_eq!(loaded.len(), 4_000);
    assert!(
        loaded.values().all(|k| !k.rewritten),
        "a load writes no rewrite"
    );
    let _: () = redis::cmd("FLUSHALL")
        .query(&mut common::connect(&server.address))
        .unwrap();
    let json = rebuild(&[
        "--churn-rounds",
        "2",
        "--delete-share",
        "0.5",
        "--overwrite-share",
        "0.25",
        "--overwrite-value-size",
        "300",
    ]);
    let rounds = rounds_of(&json);

    // The test's own replay of the published draws, by each key's number.
    let mut numbered = vec![false; loaded.len()];
    for name in loaded.keys() {
        numbered[key_number(name)] = true;
    }
    assert!(
        numbered.iter().all(|n| *n),
        "the keys are numbered 0 to 3,999"
    );
    let (after_first, _) = replay(&numbered, 1, 0.5, 0.25);
    let (states, counts) = replay(&numbered, 2, 0.5, 0.25);
    for (round, (deleted, overwritten)) in rounds.iter().zip(&counts) {
        assert_eq!(
            round["deleted"].as_u64(),
            Some(*deleted),
            "{engine:?} {round}"
        );
        assert_eq!(round["overwritten"].as_u64(), Some(*overwritten), "{round}");
    }
    assert!(counts[0].0 > 1_800 && counts[0].1 > 400, "{counts:?}");

    // Each key: gone, as loaded, or rewritten with its type, element count and TTL kept.
    let expected = |states: &[Option<bool>]| {
        let mut expected = std::collections::BTreeMap::new();
        for (name, before) in &loaded {
            if let Some(rewritten) = states[key_number(name)] {
                let mut key = before.clone();
                key.rewritten = rewritten;
                if rewritten && key.key_type == "string" {
                    key.length = 300;
                }
                expected.insert(name.clone(), key);
            }
        }
        expected
    };
    let held = held_keys(&server.address);
    assert_eq!(held, expected(&states), "{engine:?}");

    // The rounds' counts are the engine's: keys (DBSIZE) and each type's elements.
    let first = expected(&after_first);
    assert_eq!(rounds[0]["items"].as_u64(), Some(first.len() as u64));
    let first_elements = elements_by_type(first.values())["all"];
    assert_eq!(rounds[0]["elements"].as_u64(), Some(first_elements));
    assert_eq!(dbsize(&server.address), held.len() as u64);
    assert_eq!(rounds[1]["items"].as_u64(), Some(held.len() as u64));
    let elements = elements_by_type(held.values());
    let loaded_elements = elements_by_type(loaded.values());
    for key_type in ["hash", "list", "set", "zset", "stream"] {
        assert!(
            elements[key_type] < loaded_elements[key_type] * 6 / 10,
            "{engine:?} {key_type}: {elements:?} of {loaded_elements:?}"
        );
    }
    assert_eq!(rounds[1]["elements"].as_u64(), Some(elements["all"]));

    // Half the keys gone outweighs the rewrites: used_memory falls below the load's.
    let loaded_used = number(&json["repetitions"][0]["used_memory"]);
    let churned_used = number(&rounds[0]["used_memory"]);
    println!(
        "{engine:?}: used_memory {loaded_used} after the load, {churned_used} after round 1; elements {loaded_elements:?} -> {elements:?}; rounds: {}",
        serde_json::to_string(&rounds).unwrap()
    );
    assert!(churned_used < 0.9 * loaded_used, "{engine:?}");
    std::fs::remove_dir_all(&dir).ok();
}
