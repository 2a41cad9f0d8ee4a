//! Churn against real engines from the store: deletes leave RSS where the load left it while
//! used_memory falls, active defragmentation gives it back (Valkey 9.1.2 with its bundled
//! jemalloc), the same deletes sent by `redis-cli --pipe` from the test's own script give the
//! same memory (at the Churn table's 1,000,000 keys), overwrites and sorted-set members are
//! counted, a hash record's fields are deleted and overwritten one by one (an emptied record is
//! gone), a random-strings load is churned on exactly the keys its draws wrote (both checked
//! key by key against the test's own replay of the published draws; a profile's rebuild in
//! churn_profile.rs), Dragonfly's defragmentation stays idle through the rounds and regains RSS in its
//! window, what cannot be churned or defragmented is refused before any write, and
//! `membench load`'s table shows each round under the repetitions.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::churn::{dbsize, number, replay, rounds_of};
use membench::client::connection::engine::{EngineAddress, parse_info};
use membench::crd::EngineKind;
use serde_json::Value;

/// 200,000 keys of 100 B: about 35 MB, enough for fragmentation to show in RSS.
const KEYS: u64 = 200_000;

/// The Churn table's row size (docs/src/results/): 1,000,000 keys of 100 B. The independent check
/// runs at it: RSS moves by what redis-cli's query buffer left in the allocator (a few hundred
/// KiB, measured), which is over 1% of a smaller run's RSS.
const ROW_KEYS: u64 = 1_000_000;

fn load(address: &str, extra: &[&str]) -> (Value, std::process::Output) {
    load_keys(address, KEYS, extra)
}

fn load_keys(address: &str, keys: u64, extra: &[&str]) -> (Value, std::process::Output) {
    let output = load_keys_as(address, keys, "json", extra);
    let json = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    (json, output)
}

/// `membench load` of `keys` strings, one repetition, printed as `output`.
fn load_keys_as(address: &str, keys: u64, output: &str, extra: &[&str]) -> std::process::Output {
    let keys = keys.to_string();
    let mut args = vec![
        "load",
        "--addr",
        address,
        "--workload",
        "strings",
        "--keys",
        &keys,
        "--repetitions",
        "1",
        "--output",
        output,
    ];
    args.extend(extra);
    common::membench(&args)
}

fn memory(address: &EngineAddress) -> (u64, u64) {
    let mut connection = common::connect(address);
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query(&mut connection)
        .unwrap();
    let fields = parse_info(&info);
    let number = |name: &str| fields[name].parse::<u64>().unwrap();
    (number("used_memory"), number("used_memory_rss"))
}

#[test]
fn deleting_half_the_keys_leaves_rss_where_the_load_left_it_and_active_defrag_gives_it_back() {
    let server = common::start_spec(&common::shared_build(EngineKind::Valkey, "9.1.2"));
    let addr = server.address.socket_addr();
    let (json, output) = load(
        &addr,
        &[
            "--churn-rounds",
            "1",
            "--delete-share",
            "0.5",
            "--defrag",
            "--keep-data",
        ],
    );
    assert!(output.status.success(), "{}", common::stderr(&output));
    let repetition = &json["repetitions"][0];
    let loaded_used = number(&repetition["used_memory"]);
    let loaded_rss = number(&repetition["used_memory_rss"]);
    let data = loaded_used - number(&repetition["baseline_used_memory"]);
    let round = &repetition["churn"]["rounds"][0];
    let deleted = round["deleted"].as_u64().unwrap();
    // A binomial draw of half of 200,000: within 5 standard deviations (about 1,120).
    assert!(deleted.abs_diff(KEYS / 2) < 1_120, "{round}");
    assert_eq!(round["items"].as_u64().unwrap(), KEYS - deleted);
    assert_eq!(
        dbsize(&server.address),
        KEYS - deleted,
        "the engine holds what the round says, counted over the test's own connection"
    );

    // used_memory falls by about the deleted half of the data; RSS stays where it was.
    let freed = loaded_used - number(&round["used_memory"]);
    assert!(
        freed > 0.4 * data && freed < 0.6 * data,
        "deleting half the keys frees about half the data: freed {freed} of {data}"
    );
    let churned_rss = number(&round["used_memory_rss"]);
    assert!(
        churned_rss > 0.95 * loaded_rss,
        "RSS stays where the load left it: {loaded_rss} -> {churned_rss}"
    );
    let fragmented = number(&round["allocator_frag_ratio"]);
    assert!(fragmented >= 1.4, "allocator_frag_ratio {fragmented}");

    // Active defragmentation gives most of the freed memory back to the kernel.
    let defrag = &repetition["churn"]["defrag"];
    let mut shown = defrag.clone();
    shown.as_object_mut().map(|d| d.remove("samples"));
    println!("defragmentation window: {shown}");
    assert_eq!(defrag["switched"], "activedefrag");
    let regained = number(&defrag["rss_before"]) - number(&defrag["rss_after"]);
    assert!(
        regained > 0.5 * freed,
        "defragmentation regains most of the {freed} bytes freed: {defrag}"
    );
    assert!(
        number(&defrag["allocator_frag_ratio_after"]) < 1.15,
        "{defrag}"
    );
    assert!(number(&defrag["cpu_seconds"]) > 0.0, "{defrag}");
    assert!(
        defrag["write_latency_ms"]["writes"].as_u64().unwrap() > 10,
        "{defrag}"
    );
    assert!(number(&defrag["write_latency_ms"]["p99"]) > 0.0, "{defrag}");
    assert_eq!(defrag["sample_interval_ms"], 500);
    // The window's settings are put back, and its probe key is gone.
    let mut connection = common::connect(&server.address);
    let activedefrag: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("activedefrag")
        .query(&mut connection)
        .unwrap();
    assert_eq!(activedefrag[1], "no");
    let ignore: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("active-defrag-ignore-bytes")
        .query(&mut connection)
        .unwrap();
    assert_eq!(ignore[1], "104857600", "the default 100mb is back");
    assert_eq!(dbsize(&server.address), KEYS - deleted, "no probe key left");
}

/// Dragonfly cannot switch its defragmentation at runtime: started as a spec with `defrag`
/// starts it (`started_entry`: a check every second, a low waste threshold), it stays idle
/// through the rounds under its 0.7-of-maxmemory gate, and the window regains RSS by lowering
/// maxmemory over that gate, then puts maxmemory back. At its defaults it regained nothing in
/// 20 s of the same deletes (measured by hand, 1,000,000 keys).
#[test]
fn dragonflys_defragmentation_waits_for_the_window_and_regains_rss_in_it() {
    let entry = common::shared_build(EngineKind::Dragonfly, "1.40.0");
    let mut spec: membench::crd::MemoryBenchmarkSpec = serde_json::from_value(serde_json::json!({
        "instanceType": "r7i.large",
        "engines": [],
        "workload": {"strings": {"keys": KEYS}},
        "churn": {"rounds": 1, "deleteShare": 0.5, "defrag": true}
    }))
    .unwrap();
    spec.engines.push(entry.clone());
    let started = membench::validation::engine_config::started_entry(&entry, &spec);
    assert_eq!(
        started
            .config
            .get("mem_defrag_check_sec_interval")
            .map(String::as_str),
        Some("1"),
        "{started:?}"
    );
    let server = common::start_spec(&started);
    let addr = server.address.socket_addr();
    let setting = |name: &str| common::config(&mut common::connect(&server.address), name);
    let (maxmemory_before, deny_ratio_before) =
        (setting("maxmemory"), setting("rss_oom_deny_ratio"));
    let (json, output) = load(
        &addr,
        &[
            "--churn-rounds",
            "1",
            "--delete-share",
            "0.5",
            "--defrag",
            "--defrag-seconds",
            "30",
        ],
    );
    assert!(output.status.success(), "{}", common::stderr(&output));
    let repetition = &json["repetitions"][0];
    let loaded_used = number(&repetition["used_memory"]);
    let loaded_rss = number(&repetition["used_memory_rss"]);
    let round = &repetition["churn"]["rounds"][0];
    let freed = loaded_used - number(&round["used_memory"]);
    assert!(freed > 0.0, "{round}");
    // Idle through the round: RSS where the load left it (it fell by about the freed memory
    // when the check ran armed from the start, measured by hand).
    let churned_rss = number(&round["used_memory_rss"]);
    assert!(
        churned_rss > loaded_rss - 0.25 * freed,
        "the round's RSS stays where the load left it: {loaded_rss} -> {churned_rss}, {freed} freed"
    );
    let defrag = &repetition["churn"]["defrag"];
    assert_eq!(defrag["switched"], "maxmemory-gate", "{defrag}");
    let regained = number(&defrag["rss_before"]) - number(&defrag["rss_after"]);
    assert!(
        regained > 0.5 * freed,
        "the window regains most of the {freed} bytes freed: {defrag}"
    );
    assert_eq!(
        setting("maxmemory"),
        maxmemory_before,
        "maxmemory is put back"
    );
    assert_eq!(
        setting("rss_oom_deny_ratio"),
        deny_ratio_before,
        "rss_oom_deny_ratio is put back"
    );
}

#[test]
fn the_same_deletes_sent_by_redis_cli_pipe_give_the_same_memory() {
    let redis_cli = common::find_on_path("redis-cli").expect(
        "this test needs redis-cli (Debian's redis-tools, which hack/install-engines.sh installs)",
    );
    let spec = common::shared_build(EngineKind::Valkey, "9.1.2");
    // membench's own round on one server...
    let churned = common::start_spec(&spec);
    let (json, output) = load_keys(
        &churned.address.socket_addr(),
        ROW_KEYS,
        &["--churn-rounds", "1", "--delete-share", "0.5"],
    );
    assert!(output.status.success(), "{}", common::stderr(&output));
    let round = json["repetitions"][0]["churn"]["rounds"][0].clone();

    // ...and the same load into another, then the same keys deleted by redis-cli --pipe from
    // a script written here, the keys picked by the churn's published draw.
    let piped = common::start_spec(&spec);
    let (_, output) = load_keys(&piped.address.socket_addr(), ROW_KEYS, &["--keep-data"]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let mut script = Vec::new();
    let mut deleted = 0u64;
    for item in 0..ROW_KEYS {
        if membench::client::phases::churn::deletes(1, 1, item, 0.5) {
            let key = format!("key:{item:012}");
            write!(script, "*2\r\n$3\r\nDEL\r\n${}\r\n{key}\r\n", key.len()).unwrap();
            deleted += 1;
        }
    }
    assert_eq!(deleted, round["deleted"].as_u64().unwrap());
    let port = piped
        .address
        .socket_addr()
        .rsplit(':')
        .next()
        .unwrap()
        .to_string();
    let mut child = Command::new(redis_cli)
        .args(["-h", "127.0.0.1", "-p", &port, "--pipe"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&script).unwrap();
    let piped_output = child.wait_with_output().unwrap();
    assert!(piped_output.status.success());
    let said = String::from_utf8_lossy(&piped_output.stdout);
    assert!(said.contains(&format!("replies: {deleted}")), "{said}");
    assert_eq!(dbsize(&piped.address), ROW_KEYS - deleted);

    // Read as membench reads a round: after the engine's cron refreshed its figures.
    std::thread::sleep(membench::client::phases::churn::ROUND_SETTLE);
    let (used, rss) = memory(&piped.address);
    println!(
        "membench's round: used_memory {}, RSS {}; redis-cli --pipe: used_memory {used}, RSS {rss}",
        round["used_memory"], round["used_memory_rss"]
    );
    let within = |ours: f64, theirs: f64, what: &str| {
        assert!(
            (ours - theirs).abs() <= 0.01 * theirs,
            "{what}: membench's round {ours} against redis-cli --pipe {theirs}"
        );
    };
    within(number(&round["used_memory"]), used as f64, "used_memory");
    within(
        number(&round["used_memory_rss"]),
        rss as f64,
        "used_memory_rss",
    );
}

#[test]
fn overwrites_and_sorted_set_members_are_churned_and_counted_in_the_engine() {
    let server = common::start(EngineKind::Valkey, &[]);
    let addr = server.address.socket_addr();
    // Two rounds on a sorted set: members removed, others re-added under 64-byte names.
    let output = common::membench(&[
        "load",
        "--addr",
        &addr,
        "--workload",
        "sorted-set",
        "--members",
        "20000",
        "--sample-every",
        "0",
        "--repetitions",
        "1",
        "--churn-rounds",
        "2",
        "--delete-share",
        "0.25",
        "--overwrite-share",
        "0.5",
        "--overwrite-value-size",
        "64",
        "--keep-data",
        "--output",
        "json",
    ]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    let rounds = json["repetitions"][0]["churn"]["rounds"]
        .as_array()
        .unwrap();
    assert_eq!(rounds.len(), 2);
    let held = rounds[1]["items"].as_u64().unwrap();
    let deleted: u64 = rounds.iter().map(|r| r["deleted"].as_u64().unwrap()).sum();
    assert_eq!(held, 20_000 - deleted);
    let mut connection = common::connect(&server.address);
    let zcard: u64 = redis::cmd("ZCARD")
        .arg("membench:zset")
        .query(&mut connection)
        .unwrap();
    assert_eq!(zcard, held);
    // Overwritten members now have names of 64 bytes.
    let members: Vec<String> = redis::cmd("ZRANGE")
        .arg("membench:zset")
        .arg(0)
        .arg(-1)
        .query(&mut connection)
        .unwrap();
    let long = members.iter().filter(|m| m.len() == 64).count();
    assert!(
        long as f64 > 0.4 * held as f64,
        "about half the members held were overwritten: {long} of {held}"
    );
    // Their bytes: the round that overwrote with longer names grew used_memory per member.
    let per_member = |r: &Value| number(&r["used_memory"]) / r["items"].as_u64().unwrap() as f64;
    assert!(
        per_member(&rounds[1]) > per_member(&rounds[0]),
        "{rounds:?}"
    );
}

#[test]
fn what_cannot_be_churned_or_defragmented_is_refused_before_any_write() {
    // Debian's Redis links the system jemalloc, which cannot defragment.
    let server = common::start(EngineKind::Redis, &[]);
    let addr = server.address.socket_addr();
    let (_, output) = load(
        &addr,
        &["--churn-rounds", "1", "--delete-share", "0.5", "--defrag"],
    );
    assert_eq!(output.status.code(), Some(2), "{}", common::stderr(&output));
    let stderr = common::stderr(&output);
    assert!(stderr.contains("cannot defragment"), "{stderr}");
    assert!(stderr.contains("activedefrag"), "{stderr}");
    assert_eq!(dbsize(&server.address), 0, "nothing was written");

    for (flags, says) in [
        (
            vec!["--churn-rounds", "1", "--delete-share", "1"],
            "would delete every item",
        ),
        (
            vec!["--churn-rounds", "1", "--delete-share", "0"],
            "above 0 and below 1",
        ),
        (
            vec![
                "--churn-rounds",
                "1",
                "--overwrite-share",
                "1.5",
                "--overwrite-value-size",
                "10",
            ],
            "--overwrite-share",
        ),
        (
            vec!["--churn-rounds", "1", "--overwrite-share", "0.5"],
            "--overwrite-value-size",
        ),
        (
            vec!["--delete-share", "0.5"],
            "applies only with --churn-rounds",
        ),
        (
            vec!["--churn-rounds", "0", "--delete-share", "0.5"],
            "between 1 and 100",
        ),
    ] {
        let (_, output) = load(&addr, &flags);
        assert_eq!(output.status.code(), Some(2), "{flags:?}");
        let stderr = common::stderr(&output);
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
    }
    // A key space larger than the client follows (a byte per key) is refused, saying so.
    let output = common::membench(&[
        "load",
        "--addr",
        &addr,
        "--workload",
        "random-strings",
        "--requests",
        "100",
        "--keyspace",
        "100000001",
        "--churn-rounds",
        "1",
        "--delete-share",
        "0.5",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = common::stderr(&output);
    assert!(stderr.contains("follows at most 100000000"), "{stderr}");
    assert_eq!(dbsize(&server.address), 0, "nothing was written");
}

#[test]
fn a_spec_that_would_delete_every_key_is_refused_naming_the_field() {
    let dir = std::env::temp_dir().join(format!("membench-churn-spec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let spec = common::write_spec(
        &dir,
        "churn",
        "  engines: [{engine: valkey, version: \"9.1\"}]\n  workload: {strings: {keys: 1000}}\n  repetitions: 1\n  churn: {rounds: 2, deleteShare: 1.0}\n",
    );
    let output = common::membench(&["run", spec.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2), "{}", common::stderr(&output));
    let stderr = common::stderr(&output);
    assert!(stderr.contains("spec.churn.deleteShare"), "{stderr}");
    assert!(stderr.contains("would delete every item"), "{stderr}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_hash_records_fields_are_deleted_and_overwritten_one_by_one_and_an_emptied_record_is_gone() {
    // Valkey 9.1 and Dragonfly: both delete a hash's key with its last field.
    for engine in [EngineKind::Valkey, EngineKind::Dragonfly] {
        hash_fields_churned_one_by_one(engine);
    }
    // The table says the counts are fields, and the fields beside the records left.
    let server = common::start(EngineKind::Valkey, &[]);
    let output = common::membench(&[
        "load",
        "--addr",
        &server.address.socket_addr(),
        "--workload",
        "records",
        "--records",
        "200",
        "--repetitions",
        "1",
        "--churn-rounds",
        "1",
        "--delete-share",
        "0.5",
    ]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let table = String::from_utf8_lossy(&output.stdout);
    println!("{table}");
    assert!(
        table.contains("Fields deleted") && table.contains("Records (fields)"),
        "{table}"
    );
}

fn hash_fields_churned_one_by_one(engine: EngineKind) {
    const RECORDS: u64 = 2_000;
    const FIELDS: [&str; 4] = ["name", "age", "city", "score"];
    let server = common::start(engine, &[]);
    let records = RECORDS.to_string();
    let output = common::membench(&[
        "load",
        "--addr",
        &server.address.socket_addr(),
        "--workload",
        "records",
        "--records",
        &records,
        "--repetitions",
        "1",
        "--churn-rounds",
        "2",
        "--delete-share",
        "0.5",
        "--overwrite-share",
        "0.5",
        "--overwrite-value-size",
        "64",
        "--keep-data",
        "--output",
        "json",
    ]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    let rounds = rounds_of(&json);

    // The test's own replay of the published draws, field by field.
    let per = FIELDS.len() as u64;
    let (states, counts) = replay(&vec![true; (RECORDS * per) as usize], 2, 0.5, 0.5);
    for (round, (deleted, overwritten)) in rounds.iter().zip(&counts) {
        assert_eq!(round["deleted"].as_u64(), Some(*deleted), "fields: {round}");
        assert_eq!(round["overwritten"].as_u64(), Some(*overwritten), "{round}");
    }

    // Every record holds exactly the fields the draws left, overwritten ones at 64 bytes.
    let mut connection = common::connect(&server.address);
    let mut pipe = redis::pipe();
    for record in 0..RECORDS {
        pipe.cmd("HGETALL").arg(format!("user:{record}"));
    }
    let held: Vec<std::collections::HashMap<String, String>> = pipe.query(&mut connection).unwrap();
    let (mut keys, mut fields) = (0u64, 0u64);
    for (record, hash) in held.iter().enumerate() {
        let mut expected = std::collections::BTreeMap::new();
        for (place, name) in FIELDS.iter().enumerate() {
            if let Some(overwritten) = states[record * FIELDS.len() + place] {
                expected.insert(name.to_string(), overwritten);
            }
        }
        let found: std::collections::BTreeMap<String, bool> = hash
            .iter()
            .map(|(name, value)| (name.clone(), value.len() == 64 && value.starts_with("xx")))
            .collect();
        assert_eq!(found, expected, "{engine:?} user:{record}: {hash:?}");
        keys += u64::from(!expected.is_empty());
        fields += expected.len() as u64;
    }
    // About 0.75^4 of the records lost every field over the two rounds: their keys are gone,
    // and the round counts them no more.
    assert!(
        keys < RECORDS * 8 / 10 && keys > RECORDS / 2,
        "{engine:?}: {keys} of {RECORDS} records keep a field"
    );
    let last = &rounds[1];
    println!(
        "{engine:?}: {keys} records and {fields} fields left; rounds: {}",
        serde_json::to_string(&rounds).unwrap()
    );
    assert_eq!(last["items"].as_u64(), Some(keys), "{last}");
    assert_eq!(last["elements"].as_u64(), Some(fields), "{last}");
    assert_eq!(dbsize(&server.address), keys);
}

#[test]
fn a_random_strings_load_is_churned_on_exactly_the_keys_its_draws_wrote() {
    const REQUESTS: u64 = 30_000;
    const KEYSPACE: u64 = 20_000;
    let server = common::start(EngineKind::Valkey, &[]);
    let (requests, keyspace) = (REQUESTS.to_string(), KEYSPACE.to_string());
    let output = common::membench(&[
        "load",
        "--addr",
        &server.address.socket_addr(),
        "--workload",
        "random-strings",
        "--requests",
        &requests,
        "--keyspace",
        &keyspace,
        "--seed",
        "5",
        "--repetitions",
        "1",
        "--churn-rounds",
        "2",
        "--delete-share",
        "0.5",
        "--overwrite-share",
        "0.5",
        "--overwrite-value-size",
        "64",
        "--keep-data",
        "--output",
        "json",
    ]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    let rounds = rounds_of(&json);

    // The keys the load wrote, from its generator as the test draws it, then the churn's draws.
    let mut drawn = vec![false; KEYSPACE as usize];
    let mut keys = membench::client::workloads::draws::KeyGenerator::new(5);
    for _ in 0..REQUESTS {
        drawn[keys.below(KEYSPACE) as usize] = true;
    }
    let loaded = drawn.iter().filter(|d| **d).count() as u64;
    assert!(
        loaded < KEYSPACE * 8 / 10,
        "the key space is not whole: {loaded}"
    );
    assert_eq!(json["repetitions"][0]["items"].as_u64(), Some(loaded));
    let (states, counts) = replay(&drawn, 2, 0.5, 0.5);
    for (round, (deleted, overwritten)) in rounds.iter().zip(&counts) {
        assert_eq!(round["deleted"].as_u64(), Some(*deleted), "{round}");
        assert_eq!(round["overwritten"].as_u64(), Some(*overwritten), "{round}");
    }

    // Each key of the key space: absent, 16 bytes as loaded or 64 as overwritten.
    let mut pipe = redis::pipe();
    for key in 0..KEYSPACE {
        pipe.cmd("STRLEN").arg(format!("key:{key:012}"));
    }
    let lengths: Vec<u64> = pipe.query(&mut common::connect(&server.address)).unwrap();
    for (key, (length, state)) in lengths.iter().zip(&states).enumerate() {
        let expected = match state {
            None => 0,
            Some(false) => 16,
            Some(true) => 64,
        };
        assert_eq!(*length, expected, "key:{key:012}");
    }
    let held = states.iter().filter(|s| s.is_some()).count() as u64;
    assert_eq!(rounds[1]["items"].as_u64(), Some(held));
    assert_eq!(dbsize(&server.address), held);
}

/// `membench load --output table` prints the churn's own table (the phase's `PhaseFigures`)
/// under the repetitions: a row after the load, one a round with what it deleted, and the
/// defragmentation's row.
#[test]
fn membench_loads_table_shows_the_load_each_round_and_defragmentation() {
    let server = common::start_spec(&common::shared_build(EngineKind::Valkey, "9.1.2"));
    let addr = server.address.socket_addr();
    let output = load_keys_as(
        &addr,
        2000,
        "table",
        &[
            "--churn-rounds",
            "2",
            "--delete-share",
            "0.25",
            "--defrag",
            "--defrag-seconds",
            "5",
        ],
    );
    assert!(output.status.success(), "{}", common::stderr(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let heading = "After the load, churn (spec.churn):\n";
    let table = stdout
        .split_once(heading)
        .unwrap_or_else(|| panic!("no {heading:?} in:\n{stdout}"))
        .1;
    // The table's lines up to the first blank one: its header, its rule and its rows, each
    // row's cells apart by two spaces or more.
    let rows: Vec<Vec<&str>> = table
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .skip(2)
        .map(|l| {
            l.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect()
        })
        .collect();
    let stages: Vec<&str> = rows.iter().map(|r| r[1]).collect();
    assert_eq!(stages.len(), 4, "{table}");
    assert_eq!(&stages[..3], ["load", "round 1", "round 2"], "{table}");
    assert!(stages[3].starts_with("defrag ("), "{table}");
    for round in &rows[1..3] {
        let deleted: u64 = round[2].parse().unwrap_or_else(|_| panic!("{round:?}"));
        // A quarter of what is left, drawn: well inside (0, 1000) at 2,000 keys.
        assert!(deleted > 200 && deleted < 800, "{round:?}");
    }
}
