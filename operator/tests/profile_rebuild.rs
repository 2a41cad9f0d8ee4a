//! A profile's rebuild on real engines: its bytes per key by type (the keys loaded type by
//! type, used_memory read between the types) add up to its bytes per key, in the JSON and the
//! table, and each type's is what the engine's MEMORY USAGE of that type's keys says; and
//! streams, profiled on a server that holds them and rebuilt, keep their entries and
//! their memory.

mod common;

use std::path::{Path, PathBuf};

use membench::client::connection::engine::EngineAddress;
use membench::crd::EngineKind;
use membench::profile::Profile;
use membench::profile::model::KeyType;

fn tempdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "membench-profile-rebuild-{name}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn profile_to(address: &EngineAddress, path: &Path) -> Profile {
    let addr = address.socket_addr();
    let output = common::membench(&["profile", "--addr", &addr, "--output", "json"]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    std::fs::write(path, &output.stdout).unwrap();
    serde_json::from_slice(&output.stdout).expect("a profile")
}

fn rebuild(address: &EngineAddress, profile: &Path, output: &str) -> std::process::Output {
    let args = common::rebuild_args(&address.socket_addr(), profile, 2, output);
    let output = common::membench(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(output.status.success(), "{}", common::stderr(&output));
    output
}

/// Every type a profile knows but streams, in their usual shapes: short strings (a third with
/// a TTL), small hashes, sets of ids, sorted-set indexes, lists.
fn fill_every_type(connection: &mut redis::Connection) {
    fill_types(connection, &["string", "hash", "list", "set", "zset"]);
}

/// The keys of [`fill_every_type`] of the types `types` (`string`, `hash`, `list`, `set`,
/// `zset`) alone.
fn fill_types(connection: &mut redis::Connection, types: &[&str]) {
    let wanted = |name: &str| types.contains(&name);
    let mut pipe = redis::pipe();
    for i in 0..30_000u32 {
        if i % 3 == 0 && wanted("string") {
            pipe.cmd("SET")
                .arg(format!("session:{i}"))
                .arg(format!("{{\"user\":{i},\"cart\":[{}]}}", i % 97))
                .arg("EX")
                .arg(86_400)
                .ignore();
        } else if wanted("string") {
            pipe.cmd("SET").arg(format!("counter:{i}")).arg(i).ignore();
        }
        if i % 3 == 0 && wanted("hash") {
            pipe.cmd("HSET")
                .arg(format!("user:{i}"))
                .arg("name")
                .arg(format!("user-name-{i}"))
                .arg("age")
                .arg(i % 90)
                .arg("city")
                .arg("Lyon")
                .ignore();
        }
        if i % 10 == 0 && wanted("set") {
            let members: Vec<u32> = (0..(5 + i % 20)).map(|m| m * 7 + i).collect();
            pipe.cmd("SADD")
                .arg(format!("group:{i}:members"))
                .arg(members)
                .ignore();
        }
        if i % 10 == 0 && wanted("list") {
            pipe.cmd("RPUSH")
                .arg(format!("queue:{i}"))
                .arg(
                    (0..(3 + i % 8))
                        .map(|j| format!("job-{j}"))
                        .collect::<Vec<_>>(),
                )
                .ignore();
        }
        if i % 20 == 0 && wanted("zset") {
            let mut zadd = redis::cmd("ZADD");
            zadd.arg(format!("rank:{i}"));
            for m in 0..(10 + i % 30) {
                zadd.arg(m * 3).arg(format!("player-{m}"));
            }
            pipe.add_command(zadd).ignore();
        }
        // 30 batches of 1000 rows: the last row ends the last batch.
        if i % 1000 == 999 {
            pipe.query::<()>(connection).expect("the data loads");
            pipe = redis::pipe();
        }
    }
}

#[test]
fn bytes_per_key_by_type_weighted_by_keys_add_up_to_the_bytes_per_key() {
    let spec = common::shared_build(EngineKind::Valkey, "9.1");
    let dir = tempdir("by-type");
    let path = dir.join("every-type.json");
    let source_usage = {
        let source = common::start_spec(&spec);
        fill_every_type(&mut common::connect(&source.address));
        let profile = profile_to(&source.address, &path);
        let types: std::collections::BTreeSet<KeyType> =
            profile.groups.iter().map(|g| g.key_type).collect();
        assert_eq!(types.len(), 5, "{types:?}");
        common::memory_usage_by_type(&source.address)
    };
    let target = common::start_spec(&spec);
    let output = rebuild(&target.address, &path, "json");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let summary = &report["summary"];
    let keys = summary["items"].as_u64().unwrap();
    let total = summary["bytes_per_item"]["median"].as_f64().unwrap() * keys as f64;
    let by_type = summary["by_type"].as_array().expect("summary.by_type");
    let names: Vec<&str> = by_type
        .iter()
        .map(|t| t["type"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["string", "hash", "list", "set", "zset"]);
    let counted: u64 = by_type.iter().map(|t| t["keys"].as_u64().unwrap()).sum();
    assert_eq!(counted, keys, "every key is in one type");
    let weighted: f64 = by_type
        .iter()
        .map(|t| t["keys"].as_u64().unwrap() as f64 * t["bytes_per_key"].as_f64().unwrap())
        .sum();
    // The types' readings are taken with the load connection open, the repetition's own
    // without it: what separates the two sums is what that connection's buffers grew during the
    // load (its query buffer: 21.5 KiB measured on 47,500 keys), a fixed cost whatever the
    // keys, and across two repetitions the medians taken apart. 64 KiB bounds it.
    let difference = weighted - total;
    eprintln!(
        "valkey 9.1, {keys} keys: {:.1} B/key in all, by type {}; weighted sum {weighted:.0} B against {total:.0} B ({difference:+.0} B, {:+.3}%)",
        total / keys as f64,
        by_type
            .iter()
            .map(|t| format!(
                "{} {:.1}",
                t["type"].as_str().unwrap(),
                t["bytes_per_key"].as_f64().unwrap()
            ))
            .collect::<Vec<_>>()
            .join(", "),
        difference / total * 100.0
    );
    assert!(
        difference.abs() <= 64.0 * 1024.0,
        "the types add up to {weighted:.0} B, the whole to {total:.0} B: more than 64 KiB apart"
    );
    // Every type costs something, and a sorted set of 10 to 39 members more than a counter.
    let per_key = |name: &str| {
        by_type.iter().find(|t| t["type"] == name).unwrap()["bytes_per_key"]
            .as_f64()
            .unwrap()
    };
    assert!(
        by_type
            .iter()
            .all(|t| t["bytes_per_key"].as_f64().unwrap() > 0.0)
    );
    assert!(per_key("zset") > 2.0 * per_key("string"));
    // Each repetition carries its own.
    for repetition in report["repetitions"].as_array().unwrap() {
        assert_eq!(repetition["by_type"].as_array().unwrap().len(), 5);
    }

    let mut args = common::rebuild_args(&target.address.socket_addr(), &path, 1, "table");
    args.push("--keep-data".into());
    let output = common::membench(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(output.status.success(), "{}", common::stderr(&output));
    let table = common::stdout(&output);
    assert!(
        table.contains("Bytes per key by type") && table.contains("string ~"),
        "{table}"
    );

    // A witness of the test's own, type by type: MEMORY USAGE summed per TYPE over SCAN, on
    // the source and on the rebuild the last run left.
    let rebuilt_usage = common::memory_usage_by_type(&target.address);
    // MEMORY USAGE leaves out the key table's bucket arrays, which membench charges to each
    // type by its share of the keys: the engine's own figure (overhead.db.hashtable.lut) per
    // key is added to each type's.
    let stats: Vec<redis::Value> = redis::cmd("MEMORY")
        .arg("STATS")
        .query(&mut common::connect(&target.address))
        .unwrap();
    let buckets_per_key = memory_stat(&stats, "overhead.db.hashtable.lut") as f64 / keys as f64;
    for t in by_type {
        let name = t["type"].as_str().unwrap();
        let product = t["bytes_per_key"].as_f64().unwrap();
        let (source_keys, source_bytes) = source_usage[name];
        let (rebuilt_keys, rebuilt_bytes) = rebuilt_usage[name];
        let source_per_key = source_bytes as f64 / source_keys as f64;
        let rebuilt_per_key = rebuilt_bytes as f64 / rebuilt_keys as f64;
        let witnessed = rebuilt_per_key + buckets_per_key;
        eprintln!(
            "{name}: membench {product:.1} B/key over {} keys; MEMORY USAGE {rebuilt_per_key:.1} B/key (+{buckets_per_key:.1} of buckets: {witnessed:.1}) over {rebuilt_keys} rebuilt keys, {source_per_key:.1} B/key over {source_keys} source keys",
            t["keys"]
        );
        assert_eq!(
            t["keys"].as_u64(),
            Some(rebuilt_keys),
            "{name}: keys by TYPE"
        );
        assert_eq!(
            source_keys, rebuilt_keys,
            "{name}: the source's keys by TYPE"
        );
        // What else separates the two: the expires table's buckets (a third of the strings
        // carry a TTL) and the allocator's rounding of what MEMORY USAGE estimates. Measured
        // (Valkey 9.1.2, 47,500 keys, 3 runs): membench above the witness by 2.2 B/key for
        // strings, -1.9 hashes, 1.0 lists and sets, 5.1-5.2 zsets. 10 B/key holds that; the
        // types differ by 10 to 250 B/key, and the bytes of each type charged to the next
        // (a sum that still adds up) failed it by 26 B/key on strings.
        assert!(
            (product - witnessed).abs() <= 10.0,
            "{name}: membench says {product:.1} B/key, MEMORY USAGE and the buckets {witnessed:.1}"
        );
        // The rebuild's keys of each type cost what the source's did, by the same witness:
        // zsets measured 4.7-5.4% under in 3 runs (312.9-315.3 against 330.7 B/key: the
        // profile's buckets of member lengths), the others equal to 0.1 B/key. 8% holds that.
        assert!(
            (rebuilt_per_key / source_per_key - 1.0).abs() <= 0.08,
            "{name}: MEMORY USAGE {rebuilt_per_key:.1} B/key rebuilt, {source_per_key:.1} B/key in the source"
        );
    }
}

/// Each type's bytes per key in a rebuild against the source's keys of that type loaded alone.
/// It failed before the key tables were charged by share and the readings waited out a rehash
/// (issue 29): three runs gave hash 64.9, 77.8 and 89.6 B/key in the rebuild against 100 B
/// loaded alone, as the hashes loaded across the main table's doubling and carried the whole
/// new bucket array; and a string figure read inside a rehash (Valkey 9.1 holds the old array,
/// 262,144 B at 30,000 keys, for tens of milliseconds) was 9 B/key above the same keys read
/// after it.
#[test]
fn each_types_bytes_per_key_is_what_its_keys_cost_loaded_alone() {
    let spec = common::shared_build(EngineKind::Valkey, "9.1");
    let dir = tempdir("by-type-alone");
    let path = dir.join("every-type.json");
    {
        let source = common::start_spec(&spec);
        fill_every_type(&mut common::connect(&source.address));
        profile_to(&source.address, &path);
    }
    let target = common::start_spec(&spec);
    let output = rebuild(&target.address, &path, "json");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let by_type = report["summary"]["by_type"]
        .as_array()
        .expect("summary.by_type");
    let per_key = |name: &str| {
        by_type.iter().find(|t| t["type"] == name).unwrap()["bytes_per_key"]
            .as_f64()
            .unwrap()
    };
    // Each type's figure against the source's keys of that type loaded alone into the empty
    // engine, read by the test itself.
    let mut connection = common::connect(&target.address);
    for name in ["string", "hash", "list", "set", "zset"] {
        let _: () = redis::cmd("FLUSHALL")
            .arg("SYNC")
            .query(&mut connection)
            .unwrap();
        let before = out_of_rehash(&mut connection);
        fill_types(&mut connection, &[name]);
        let keys: u64 = redis::cmd("DBSIZE").query(&mut connection).unwrap();
        let alone = (out_of_rehash(&mut connection) - before) as f64 / keys as f64;
        let rebuilt = per_key(name);
        eprintln!(
            "{name}: {rebuilt:.1} B/key in the rebuild, {alone:.1} B/key loaded alone ({keys} keys)"
        );
        // What is left apart is each table's rounding to a power of two: a type alone has a
        // table sized for its keys (Valkey 9.1: 18 B/key of buckets at 30,000 keys, 40 at
        // 1,500), and its share in the mix is the mix's (14 B/key at 47,500): up to about
        // 20 B/key for the few zsets, a few for the rest. 10% holds that and still tells one
        // type's figure from its neighbour's.
        assert!(
            (rebuilt / alone - 1.0).abs() <= 0.10,
            "{name}: {rebuilt:.1} B/key in the rebuild, {alone:.1} B/key loaded alone"
        );
    }
    let _: () = redis::cmd("FLUSHALL")
        .arg("SYNC")
        .query(&mut connection)
        .unwrap();
    drop(connection);
}

/// The figure `name` of a MEMORY STATS reply, at its top level or in its `db.0`.
fn memory_stat(stats: &[redis::Value], name: &str) -> u64 {
    let reply = |v: &redis::Value| redis::from_redis_value::<String>(v.clone()).ok();
    let db = stats
        .chunks(2)
        .find(|p| reply(&p[0]).as_deref() == Some("db.0"));
    let pairs: Vec<redis::Value> = db
        .and_then(|p| redis::from_redis_value(p[1].clone()).ok())
        .unwrap_or_default();
    stats
        .chunks(2)
        .chain(pairs.chunks(2))
        .find(|pair| reply(&pair[0]).as_deref() == Some(name))
        .map(|pair| redis::from_redis_value::<u64>(pair[1].clone()).unwrap())
        .unwrap_or_else(|| panic!("Valkey 9.1's MEMORY STATS reports {name}"))
}

/// used_memory once it has settled and no key table is being rehashed (`MEMORY STATS`
/// `db.dict.rehashing.count`, which Valkey 9.1 reports), bounded at 5 s. Prints what the first
/// reading held for a rehash (`overhead.db.hashtable.rehashing`), how long the rehash took to
/// end, and the bucket arrays per key then (`overhead.db.hashtable.lut`), the figures
/// docs/src/results/ quotes.
fn out_of_rehash(connection: &mut redis::Connection) -> u64 {
    let started = std::time::Instant::now();
    let stat = memory_stat;
    let mut held = None;
    loop {
        let stats: Vec<redis::Value> = redis::cmd("MEMORY").arg("STATS").query(connection).unwrap();
        let keys = stat(&stats, "keys.count");
        if keys > 0 {
            held.get_or_insert(stat(&stats, "overhead.db.hashtable.rehashing"));
        }
        if stat(&stats, "db.dict.rehashing.count") == 0 {
            if keys > 0 {
                eprintln!(
                    "{keys} keys: {} B held for a rehash at the first reading, over {:.0} ms later; buckets {:.1} B/key",
                    held.unwrap_or(0),
                    started.elapsed().as_secs_f64() * 1000.0,
                    stat(&stats, "overhead.db.hashtable.lut") as f64 / keys as f64
                );
            }
            return common::settled_used_memory(connection);
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "still rehashing after 5 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Streams of 1 to 60 entries (an event log per device), 2 to 4 fields an entry, the same
/// fields within a stream, values of varied lengths. Returns the keys and the entries.
fn fill_streams(connection: &mut redis::Connection) -> (u64, u64) {
    let mut entries = 0u64;
    let streams = 3000u64;
    for device in 0..streams {
        let mut pipe = redis::pipe();
        let fields = 2 + device % 3;
        let length = 1 + (device * 7919) % 60;
        for entry in 0..length {
            let mut xadd = redis::cmd("XADD");
            xadd.arg(format!("events:{device}")).arg("*");
            for f in 0..fields {
                let value = match f {
                    0 => format!("{}", 20 + (entry * 13 + device) % 80),
                    1 => "x".repeat(5 + ((entry * 31 + device) % 40) as usize),
                    _ => format!("state-{}", (entry + device) % 7),
                };
                xadd.arg(["temperature", "message", "state", "battery"][f as usize])
                    .arg(value);
            }
            pipe.add_command(xadd).ignore();
        }
        entries += length;
        pipe.query::<()>(connection).expect("the streams load");
    }
    (streams, entries)
}

fn total_entries(connection: &mut redis::Connection, keys: u64) -> u64 {
    let mut pipe = redis::pipe();
    let mut cursor = 0u64;
    let mut names = Vec::new();
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("COUNT")
            .arg(1000)
            .query(connection)
            .unwrap();
        names.extend(batch);
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    assert_eq!(names.len() as u64, keys);
    for name in &names {
        pipe.cmd("XLEN").arg(name);
    }
    let lengths: Vec<u64> = pipe.query(connection).unwrap();
    lengths.iter().sum()
}

#[test]
fn streams_profiled_and_rebuilt_keep_their_entries_and_their_memory() {
    let spec = common::shared_build(EngineKind::Valkey, "9.1");
    let dir = tempdir("streams");
    let path = dir.join("streams.json");
    let (keys, entries, source_data) = {
        let source = common::start_spec(&spec);
        let empty = common::used_memory(&source.address);
        let (keys, entries) = fill_streams(&mut common::connect(&source.address));
        std::thread::sleep(std::time::Duration::from_millis(200));
        let data = common::used_memory(&source.address) - empty;
        let profile = profile_to(&source.address, &path);
        assert_eq!(profile.source.sampled_keys, keys);
        let streams = profile
            .groups
            .iter()
            .find(|g| g.key_type == KeyType::Stream)
            .expect("a stream group");
        assert!(streams.entry_fields.is_some(), "{streams:?}");
        (keys, entries, data)
    };
    let target = common::start_spec(&spec);
    let mut args = common::rebuild_args(&target.address.socket_addr(), &path, 1, "json");
    args.push("--keep-data".into());
    let output = common::membench(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(output.status.success(), "{}", common::stderr(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let repetition = &report["repetitions"][0];
    assert_eq!(repetition["items"].as_u64(), Some(keys), "DBSIZE");
    let rebuilt_data = repetition["used_memory"].as_u64().unwrap() as f64
        - repetition["baseline_used_memory"].as_u64().unwrap() as f64;
    let rebuilt_entries = total_entries(&mut common::connect(&target.address), keys);
    let entries_off = rebuilt_entries as f64 / entries as f64 - 1.0;
    let memory_off = rebuilt_data / source_data as f64 - 1.0;
    eprintln!(
        "streams on valkey 9.1: {keys} keys, {entries} entries -> {rebuilt_entries} ({:+.2}%); source {source_data} B ({:.1} B/key), rebuilt {rebuilt_data:.0} B ({:.1} B/key): {:+.2}%",
        entries_off * 100.0,
        source_data as f64 / keys as f64,
        rebuilt_data / keys as f64,
        memory_off * 100.0
    );
    let by_type = report["summary"]["by_type"].as_array().unwrap();
    assert_eq!(by_type.len(), 1);
    assert_eq!(by_type[0]["type"], "stream");
    // membench capacity projects a rebuild from its end reading (capacity/rebuild.rs): the
    // key table by Valkey 9.1's rule, the keys' data per key.
    let result = dir.join("result.json");
    std::fs::write(&result, &output.stdout).unwrap();
    let capacity = common::membench(&[
        "capacity",
        result.to_str().unwrap(),
        "--items",
        "1000000",
        "--output",
        "json",
    ]);
    assert!(capacity.status.success(), "{}", common::stderr(&capacity));
    let plan: serde_json::Value = serde_json::from_slice(&capacity.stdout).unwrap();
    let projection = &plan["engines"][0]["capacity"]["projection"];
    assert_eq!(projection["growth_rule"], "bucketed-hashtable", "{plan}");
    let projected = plan["engines"][0]["capacity"]["projected_used_memory"]
        .as_f64()
        .unwrap_or(0.0);
    // A million stream keys cost at least the rebuilt keys' data per key times a million.
    assert!(
        projected >= rebuilt_data / keys as f64 * 1e6,
        "projected {projected} for 1M keys from {rebuilt_data} B of {keys}: {plan}"
    );
    assert!(
        entries_off.abs() <= 0.01,
        "the rebuild holds {rebuilt_entries} entries, the source {entries}"
    );
    // The bound for a rebuild on the same build (measured +0.52%): a stream's memory
    // follows its entries' count, fields and value lengths, which the profile holds, and the
    // listpack nodes they fill; the IDs (time-based on both sides) delta-encode alike.
    assert!(
        memory_off.abs() <= 0.02,
        "the rebuild's memory is {:+.2}% off the source's",
        memory_off * 100.0
    );
}

#[test]
fn a_client_pod_refuses_a_profile_file_that_is_not_the_one_the_operator_checked() {
    let engine = common::start(EngineKind::Valkey, &[]);
    let dir = tempdir("digest");
    let path = dir.join("profile.yaml");
    let text = "format: 1\nsource: {keys: 50}\ngroups:\n- {template: \"k:{n}\", type: string, share: 1.0, keyLength: {buckets: [[4, 4, 1]]}, values: {textLength: {buckets: [[3, 3, 1]]}}}\n";
    std::fs::write(&path, text).unwrap();
    let checked = membench::client::workloads::profile_workload::profile_digest(
        &Profile::parse(text).unwrap(),
    );
    let load = |digest: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_membench"))
            .args(common::rebuild_args(
                &engine.address.socket_addr(),
                &path,
                1,
                "json",
            ))
            .env("MEMBENCH_PROFILE_DIGEST", digest)
            .output()
            .unwrap()
    };
    let output = load("0123456789abcdef");
    assert!(!output.status.success());
    let stderr = common::stderr(&output);
    assert!(
        stderr.contains("is not the profile the operator checked")
            && stderr.contains(&checked)
            && stderr.contains("0123456789abcdef"),
        "{stderr}"
    );
    let output = load(&checked);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["summary"]["items"], 50);

    // The file itself changed on disk after the check (its values 3 bytes longer, the same
    // keys), the pod's digest still the checked one: refused, and nothing is loaded.
    let altered = text.replace("[[3, 3, 1]]", "[[6, 6, 1]]");
    assert_ne!(altered, text);
    std::fs::write(&path, &altered).unwrap();
    let altered_digest = membench::client::workloads::profile_workload::profile_digest(
        &Profile::parse(&altered).unwrap(),
    );
    let output = load(&checked);
    let stderr = common::stderr(&output);
    assert!(
        !output.status.success(),
        "the altered file was loaded: {stderr}"
    );
    assert!(
        stderr.contains("is not the profile the operator checked")
            && stderr.contains(&format!("digest {altered_digest}, expected {checked}")),
        "{stderr}"
    );
    assert_ne!(altered_digest, checked);
    let keys: u64 = redis::cmd("DBSIZE")
        .query(&mut common::connect(&engine.address))
        .unwrap();
    assert_eq!(keys, 0, "the refused profile loaded keys");
}
