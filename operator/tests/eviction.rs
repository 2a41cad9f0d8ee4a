//! A load past maxmemory against real engines from the store: every key written is either kept
//! or evicted (counted by the engine, checked over the test's own connection), the peak is read
//! against maxmemory, the engine's own settings are put back; noeviction's refusals are its
//! result, not a failure; Dragonfly refuses without cache_mode and evicts with it; what cannot
//! be loaded past maxmemory is refused before any write.

mod common;

use membench::crd::EngineKind;
use serde_json::Value;

fn load(address: &str, extra: &[&str]) -> (Value, std::process::Output) {
    let mut args = vec![
        "load",
        "--addr",
        address,
        "--workload",
        "strings",
        "--keys",
        "20000",
        "--repetitions",
        "1",
        "--keep-data",
        "--output",
        "json",
    ];
    args.extend(extra);
    let output = common::membench(&args);
    let json = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    (json, output)
}

/// The phase's peak is the engine's `used_memory_peak`, read by the test after the phase: the
/// test's reading can be higher by what its own connection and the settings put back allocated
/// since (a connection's reply buffer is 16 KiB; seen 16,224 bytes above), never lower.
fn assert_engines_own_peak(peak: u64, connection: &mut redis::Connection, eviction: &Value) {
    let engine = used_memory_peak(connection);
    assert!(
        peak <= engine && engine - peak <= 64 << 10,
        "the phase's peak {peak} is the engine's used_memory_peak ({engine}, read after): {eviction}"
    );
}

/// `used_memory_peak` of the engine, over the test's own connection.
fn used_memory_peak(connection: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("memory").query(connection).unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix("used_memory_peak:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no used_memory_peak in INFO memory: {info}"))
}

fn count(value: &Value) -> u64 {
    value
        .as_u64()
        .unwrap_or_else(|| panic!("not a count: {value}"))
}

#[test]
fn every_key_written_past_maxmemory_is_kept_or_evicted_and_the_settings_are_put_back() {
    let server = common::start(EngineKind::Valkey, &[]);
    let (json, output) = load(
        &server.address.socket_addr(),
        &[
            "--maxmemory",
            "16mb",
            "--maxmemory-policy",
            "allkeys-lru",
            "--load-to",
            "3",
        ],
    );
    assert!(output.status.success(), "{}", common::stderr(&output));
    let eviction = &json["repetitions"][0]["eviction"];
    let written = count(&eviction["items_written"]);
    let evicted = count(&eviction["evicted_keys"]);
    let kept = count(&eviction["keys_kept"]);
    // Three times 16 MiB of 100-byte values at the repetition's bytes per key.
    let bytes_per_key = json["repetitions"][0]["bytes_per_item"].as_f64().unwrap();
    let asked = (3.0 * 16.0 * 1048576.0 / bytes_per_key).ceil() as u64;
    assert!(
        written.abs_diff(asked) <= 100,
        "{written} written, {asked} asked: {eviction}"
    );
    assert!(
        evicted > written / 2,
        "most of 3x maxmemory is evicted: {eviction}"
    );
    assert_eq!(
        kept + evicted,
        written,
        "each key is kept or evicted: {eviction}"
    );
    let mut connection = common::connect(&server.address);
    let dbsize: u64 = redis::cmd("DBSIZE").query(&mut connection).unwrap();
    assert_eq!(
        dbsize, kept,
        "what the engine holds, over the test's own connection"
    );
    let peak = count(&eviction["peak_used_memory"]);
    let maxmemory = 16u64 << 20;
    assert_eq!(count(&eviction["maxmemory"]), maxmemory);
    // The load before the phase (20,000 keys, about 4 MB) stayed under 16 MiB, so the engine's
    // own peak rose in the phase: the figure is the engine's, read again by the test.
    assert_eq!(eviction["peak_source"], "engine", "{eviction}");
    assert_engines_own_peak(peak, &mut connection, eviction);
    assert!(
        peak >= count(&eviction["used_memory"]),
        "the peak is never below a later reading: {eviction}"
    );
    // The load filled the engine to its limit: 3x maxmemory was written.
    assert!(
        peak as f64 >= 0.99 * maxmemory as f64,
        "the load reached maxmemory: {eviction}"
    );
    // The overshoot is how far the engine's own peak, read by the test, went past maxmemory
    // (none when it stayed under): the test's reading can be higher by what its connection
    // allocated since, 64 KiB at most as above, never lower.
    let overshoot = eviction["overshoot_bytes"].as_i64().unwrap();
    let engines_overshoot = used_memory_peak(&mut connection).saturating_sub(maxmemory) as i64;
    assert!(
        overshoot >= 0
            && overshoot <= engines_overshoot
            && engines_overshoot - overshoot <= 64 << 10,
        "an overshoot of {overshoot} B, the engine's used_memory_peak {engines_overshoot} B past maxmemory: {eviction}"
    );
    assert!(
        eviction["items_per_sec_evicting"].as_f64().unwrap() > 0.0,
        "{eviction}"
    );
    assert_eq!(
        common::config(&mut connection, "maxmemory"),
        "0",
        "maxmemory is put back"
    );
    assert_eq!(
        common::config(&mut connection, "maxmemory-policy"),
        "noeviction"
    );
}

#[test]
fn a_load_of_large_values_that_never_passed_maxmemory_has_its_own_peak_and_no_negative_overshoot() {
    // 1 MiB values: the query buffer holding a value counts toward maxmemory before its SET
    // runs, so the engine evicts before each write and its used_memory after every command
    // stays under the limit (Valkey 9.1.2: 29 of 39 keys evicted, used_memory_peak 15.6 MB at
    // 16 MiB). The phase's peak is that figure, the engine's own; its overshoot is 0 (the
    // readings alone once gave -1.2 MB).
    let server = common::start(EngineKind::Valkey, &[]);
    let address = server.address.socket_addr();
    let output = common::membench(&[
        "load",
        "--addr",
        &address,
        "--workload",
        "strings",
        "--keys",
        "4",
        "--value-size",
        "1048576",
        "--repetitions",
        "1",
        "--keep-data",
        "--output",
        "json",
        "--maxmemory",
        "16mb",
        "--maxmemory-policy",
        "allkeys-lru",
        "--load-to",
        "3",
    ]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    let eviction = &json["repetitions"][0]["eviction"];
    let maxmemory = 16u64 << 20;
    assert!(count(&eviction["evicted_keys"]) > 0, "{eviction}");
    let peak = count(&eviction["peak_used_memory"]);
    assert_eq!(eviction["peak_source"], "engine", "{eviction}");
    let mut connection = common::connect(&server.address);
    assert_engines_own_peak(peak, &mut connection, eviction);
    assert!(
        peak >= count(&eviction["used_memory"]),
        "the peak is never below a later reading: {eviction}"
    );
    // The engine's own peak, read by the test, stayed under maxmemory: the overshoot is 0,
    // never less (the readings alone once gave -1.2 MB).
    assert!(
        used_memory_peak(&mut connection) < maxmemory,
        "the engine never went above maxmemory: {eviction}"
    );
    assert_eq!(
        eviction["overshoot_bytes"].as_i64(),
        Some(0),
        "an engine that stayed under maxmemory overshot by 0, never by less: {eviction}"
    );
}

#[test]
fn noevictions_refusals_are_its_result_and_dragonfly_evicts_only_in_cache_mode() {
    let server = common::start(EngineKind::Valkey, &[]);
    let (json, output) = load(
        &server.address.socket_addr(),
        &["--maxmemory", "16mb", "--maxmemory-policy", "noeviction"],
    );
    assert!(
        output.status.success(),
        "refused writes are noeviction's result, not a failure: {}",
        common::stderr(&output)
    );
    let eviction = &json["repetitions"][0]["eviction"];
    assert_eq!(count(&eviction["evicted_keys"]), 0, "{eviction}");
    assert!(
        eviction["refusal"].as_str().unwrap().starts_with("OOM"),
        "{eviction}"
    );
    let refused_at = count(&eviction["refused_at_items"]);
    let kept = count(&eviction["keys_kept"]);
    assert!(kept <= refused_at && refused_at - kept <= 100, "{eviction}");
    assert!(json["error"].is_null(), "{json}");

    let dragonfly = common::start_spec(&common::shared_build(EngineKind::Dragonfly, "1.40"));
    let (json, output) = load(&dragonfly.address.socket_addr(), &["--maxmemory", "64mb"]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let eviction = &json["repetitions"][0]["eviction"];
    assert_eq!(eviction["policy"], "dragonfly-cache-mode");
    assert_eq!(count(&eviction["evicted_keys"]), 0, "{eviction}");
    assert!(
        eviction["refused_at_items"].is_u64(),
        "without cache_mode it refuses: {eviction}"
    );

    let mut spec = common::shared_build(EngineKind::Dragonfly, "1.40");
    spec.args = vec!["--cache_mode=true".into()];
    let cache = common::start_spec(&spec);
    let (json, output) = load(&cache.address.socket_addr(), &["--maxmemory", "64mb"]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let eviction = &json["repetitions"][0]["eviction"];
    assert!(
        count(&eviction["evicted_keys"]) > 0,
        "cache_mode evicts: {eviction}"
    );
}

#[test]
fn what_cannot_be_loaded_past_maxmemory_is_refused_before_any_write() {
    let server = common::start(EngineKind::Valkey, &[]);
    let addr = server.address.socket_addr();
    for (flags, says) in [
        (
            vec!["--maxmemory", "lots"],
            "give bytes with an optional unit",
        ),
        (vec!["--maxmemory", "100mb", "--load-to", "1"], "--load-to"),
        (
            vec!["--maxmemory", "100mb", "--maxmemory-policy", "lru"],
            "one of noeviction",
        ),
        (vec!["--load-to", "3"], "applies only with --maxmemory"),
    ] {
        let (_, output) = load(&addr, &flags);
        assert_eq!(output.status.code(), Some(2), "{flags:?}");
        let stderr = common::stderr(&output);
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
    }
    let output = common::membench(&[
        "load",
        "--addr",
        &addr,
        "--workload",
        "sorted-set",
        "--members",
        "100",
        "--maxmemory",
        "100mb",
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(common::stderr(&output).contains("strings and records"));
    let mut connection = common::connect(&server.address);
    let dbsize: u64 = redis::cmd("DBSIZE").query(&mut connection).unwrap();
    assert_eq!(dbsize, 0, "nothing was written");

    let dir = std::env::temp_dir().join(format!("membench-eviction-spec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let spec = common::write_spec(
        &dir,
        "evict",
        "  engines: [{engine: valkey, version: \"9.1\", memory: 64Mi}]\n  workload: {strings: {keys: 1000}}\n  repetitions: 1\n  eviction: {maxmemory: 100mb}\n",
    );
    let output = common::membench(&["run", spec.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2), "{}", common::stderr(&output));
    let stderr = common::stderr(&output);
    assert!(stderr.contains("spec.eviction.maxmemory"), "{stderr}");
    assert!(stderr.contains("spec.engines[0].memory"), "{stderr}");
    std::fs::remove_dir_all(&dir).ok();
}

/// An entry's own `config.maxmemory` and `config.maxmemory-policy` are its limit and policy
/// for the load past maxmemory, in place of spec.eviction's: its engine starts without them (the
/// load before the phase, 60,000 keys of about 6 MB at 100 B each, is whole although it is
/// above the entry's 4mb), and the other entry takes spec.eviction's.
#[test]
fn an_entrys_own_maxmemory_is_its_limit_for_the_load_past_it_and_not_before() {
    let dir = std::env::temp_dir().join(format!("membench-eviction-own-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let spec = common::write_spec(
        &dir,
        "eviction-own",
        "  engines:\n    - {engine: valkey, version: \"9.1\", config: {maxmemory: 4mb, maxmemory-policy: allkeys-random}}\n    - {engine: valkey, version: \"9.1\", name: lfu, config: {maxmemory-policy: allkeys-lfu}}\n  workload: {strings: {keys: 60000}}\n  repetitions: 1\n  settleSeconds: 0\n  eviction: {loadTo: 2}\n",
    );
    let refused = common::membench(&["run", spec.to_str().unwrap()]);
    assert_eq!(
        refused.status.code(),
        Some(2),
        "{}",
        common::stderr(&refused)
    );
    assert!(
        common::stderr(&refused).contains("spec.engines[1]")
            && common::stderr(&refused)
                .contains("set spec.eviction.maxmemory, or config.maxmemory"),
        "{}",
        common::stderr(&refused)
    );
    let spec = common::write_spec(
        &dir,
        "eviction-own",
        "  engines:\n    - {engine: valkey, version: \"9.1\", config: {maxmemory: 4mb, maxmemory-policy: allkeys-random}}\n    - {engine: valkey, version: \"9.1\", name: lfu, config: {maxmemory: 6mb, maxmemory-policy: allkeys-lfu}}\n  workload: {strings: {keys: 60000}}\n  repetitions: 1\n  settleSeconds: 0\n  eviction: {loadTo: 2}\n",
    );
    let result = dir.join("result.json");
    let output = common::membench(&[
        "run",
        spec.to_str().unwrap(),
        "--result-file",
        result.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&result).unwrap()).unwrap();
    for (engine, (limit, policy)) in json["engines"]
        .as_array()
        .unwrap()
        .iter()
        .zip([(4u64 << 20, "allkeys-random"), (6 << 20, "allkeys-lfu")])
    {
        let repetition = &engine["repetitions"][0];
        assert_eq!(
            count(&repetition["items"]),
            60_000,
            "the load before the phase is whole: {repetition}"
        );
        let eviction = &repetition["eviction"];
        assert_eq!(count(&eviction["maxmemory"]), limit, "{eviction}");
        assert_eq!(eviction["policy"], policy, "{eviction}");
        assert!(count(&eviction["evicted_keys"]) > 0, "{eviction}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_capacity_plan_of_a_run_with_an_eviction_makes_room_for_its_measured_overshoot() {
    let dir = std::env::temp_dir().join(format!("membench-eviction-plan-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut json = common::run_spec(
        &dir,
        "eviction-plan",
        "  engines: [{engine: valkey, version: \"9.1\"}]\n  workload: {strings: {keys: 20000}}\n  repetitions: 1\n  settleSeconds: 1\n  eviction: {maxmemory: 16mb, policy: allkeys-lru, loadTo: 2}\n  capacity: {items: 1000000, instanceFamilies: [r8g]}\n",
    );
    let eviction = json["engines"][0]["repetitions"][0]["eviction"].clone();
    let peak = count(&eviction["peak_used_memory"]);
    let limit = 16u64 << 20;
    // The engine evicted, so a command found it above maxmemory: the load overshot, and the
    // engine's own peak (the load before the phase stayed under 16 MiB) says by how much.
    assert!(count(&eviction["evicted_keys"]) > 0, "{eviction}");
    assert_eq!(eviction["peak_source"], "engine", "{eviction}");
    assert!(peak > limit, "the load overshot maxmemory: {eviction}");
    let planned = common::capacity_plans(&dir.join("eviction-plan.json")).remove(0);

    // The same result without its eviction: the plan the overshoot is added to.
    for repetition in json["engines"][0]["repetitions"].as_array_mut().unwrap() {
        repetition.as_object_mut().unwrap().remove("eviction");
    }
    let without = dir.join("without-eviction.json");
    std::fs::write(&without, serde_json::to_vec(&json).unwrap()).unwrap();
    let plain = common::capacity_plans(&without).remove(0);
    let used = count(&planned["projected_used_memory"]);
    assert_eq!(used, count(&plain["projected_used_memory"]));
    let note = planned["rss_note"].as_str().unwrap_or_default().to_string();
    println!(
        "peak used_memory {peak} at maxmemory {limit}; projected RSS {} without the overshoot, {} with it",
        plain["projected_rss"], planned["projected_rss"]
    );
    {
        let extra = (u128::from(peak - limit) * u128::from(used)).div_ceil(u128::from(limit));
        assert_eq!(
            count(&planned["projected_rss"]),
            count(&plain["projected_rss"]) + extra as u64,
            "{planned}"
        );
        assert!(
            count(&planned["engine_memory"]) > count(&plain["engine_memory"]),
            "{planned}"
        );
        let ratio = planned["eviction_overshoot_ratio"].as_f64().unwrap();
        assert!(
            (ratio - peak as f64 / limit as f64).abs() < 1e-12,
            "{planned}"
        );
        assert!(
            note.contains("room added for spec.eviction's overshoot"),
            "{note}"
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_published_eviction_runs_overshoot_is_planned_for_each_engine_that_went_over() {
    // docs/src/results/'s Eviction table: one real run of six entries, four of them above
    // maxmemory (+80 to +91,112 bytes), two under it.
    let path = std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/results/eviction/eviction-strings-100mb.json"
    ));
    let plans = common::capacity_plans(path);
    let result: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut over = 0;
    for (engine, planned) in result["engines"].as_array().unwrap().iter().zip(&plans) {
        let eviction = &engine["repetitions"][0]["eviction"];
        let peak = count(&eviction["peak_used_memory"]);
        let overshoot = eviction["overshoot_bytes"].as_i64().unwrap();
        let capacity = planned;
        let note = capacity["rss_note"].as_str().unwrap_or_default();
        if overshoot > 0 {
            over += 1;
            let ratio = capacity["eviction_overshoot_ratio"].as_f64().unwrap();
            let limit = (peak as i64 - overshoot) as f64;
            assert!((ratio - peak as f64 / limit).abs() < 1e-12, "{capacity}");
            assert!(
                note.contains("room added for spec.eviction's overshoot"),
                "{note}"
            );
        } else {
            assert!(
                capacity.get("eviction_overshoot_ratio").is_none(),
                "{capacity}"
            );
            assert!(note.contains("no room added"), "{note}");
        }
    }
    assert_eq!(over, 4, "{plans:#?}");
}
