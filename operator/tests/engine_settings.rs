//! `engines[].config` against real engines from the store: a memory-layout setting is applied
//! at start (it changes the encoding and the bytes per item), its effective value is read back
//! with CONFIG GET into the results, Dragonfly's flags it does not report are named as such,
//! and a setting outside the allowlist is refused before anything starts.

mod common;

use std::process::{Command, Output};

use serde_json::Value;

fn write_spec(name: &str, spec: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!(
        "membench-settings-{}-{name}.yaml",
        std::process::id()
    ));
    let yaml = format!(
        "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {{name: {name}}}\nspec:\n{spec}"
    );
    std::fs::write(&path, yaml).unwrap();
    path
}

fn run_json(name: &str, spec: &str) -> (Output, Value) {
    let path = write_spec(name, spec);
    let output = Command::new(env!("CARGO_BIN_EXE_membench"))
        .args(["run", path.to_str().unwrap(), "--output", "json"])
        .output()
        .expect("membench runs");
    let _ = std::fs::remove_file(&path);
    let json = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    (output, json)
}

/// [`run_json`] of a spec that must run to the end.
fn measured(name: &str, spec: &str) -> Value {
    let (output, json) = run_json(name, spec);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    json
}

fn median_bytes(engine: &Value) -> f64 {
    engine["summary"]["bytes_per_item"]["median"]
        .as_f64()
        .unwrap_or_else(|| panic!("no median: {engine}"))
}

#[test]
fn a_hash_listpack_threshold_of_zero_costs_a_record_more_bytes_and_its_value_is_read_back() {
    let build = common::shared_build(membench::crd::EngineKind::Valkey, "9.1")
        .build
        .unwrap();
    let json = measured(
        "listpack",
        &format!(
            "  engines:\n    - {{engine: valkey, version: \"9.1\", build: {build}}}\n    - {{engine: valkey, version: \"9.1\", build: {build}, name: hashtable, config: {{hash-max-listpack-entries: \"0\"}}}}\n  workload: {{records: {{records: 20000, layout: hash}}}}\n  repetitions: 2\n"
        ),
    );
    let engines = json["engines"].as_array().unwrap();
    assert!(
        engines[0]["engine"].get("config").is_none(),
        "{}",
        engines[0]["engine"]
    );
    assert_eq!(
        engines[1]["engine"]["config"]["hash-max-listpack-entries"],
        "0"
    );
    let listpack = median_bytes(&engines[0]);
    let hashtable = median_bytes(&engines[1]);
    // Four small fields: a listpack of about 60 bytes against a dict with four entries.
    assert!(
        hashtable > listpack * 1.5,
        "listpack {listpack:.1} B/record, hashtable {hashtable:.1} B/record"
    );
}

#[test]
fn a_sorted_set_threshold_keeps_the_set_a_listpack_as_object_encoding_reports() {
    let json = measured(
        "zset-listpack",
        "  engines:\n    - {engine: redis, version: \"7.0\", config: {zset-max-listpack-entries: \"20000\", zset-max-listpack-value: \"64\"}}\n  workload: {sortedSet: {members: 5000, sampleEvery: 0}}\n  repetitions: 1\n",
    );
    let engine = &json["engines"][0];
    assert_eq!(engine["repetitions"][0]["encoding"], "listpack", "{engine}");
    assert_eq!(
        engine["engine"]["config"]["zset-max-listpack-entries"],
        "20000"
    );
    assert_eq!(engine["engine"]["config"]["zset-max-listpack-value"], "64");
}

#[test]
fn dragonfly_reads_back_what_config_get_offers_and_names_the_flags_it_does_not() {
    let build = common::shared_build(membench::crd::EngineKind::Dragonfly, "1.40")
        .build
        .unwrap();
    let json = measured(
        "dragonfly",
        &format!(
            "  engines:\n    - {{engine: dragonfly, version: \"1.40\", build: {build}, config: {{maxmemory: \"2000000000\", list_max_listpack_size: \"-3\", max_eviction_per_heartbeat: \"50\"}}}}\n  workload: {{strings: {{keys: 2000, valueSize: 16}}}}\n  repetitions: 1\n"
        ),
    );
    let engine = &json["engines"][0]["engine"];
    assert_eq!(engine["config"]["maxmemory"], "2000000000", "{engine}");
    assert_eq!(
        engine["config"]["max_eviction_per_heartbeat"], "50",
        "{engine}"
    );
    assert_eq!(
        engine["config_unreported"],
        serde_json::json!(["list_max_listpack_size"]),
        "{engine}"
    );
}

#[test]
fn a_setting_outside_the_allowlist_is_refused_naming_it_before_any_engine_starts() {
    for (config, words) in [
        (
            "{dir: tmp}",
            "spec.engines[1].config.dir: membench does not let a benchmark change dir",
        ),
        (
            "{io-threads: \"4\"}",
            "spec.engines[1].config.io-threads: membench does not let a benchmark change io-threads (it is not a memory-relevant setting)",
        ),
        (
            "{maxmemory-policy: allkeys-lru}",
            "set config.maxmemory too",
        ),
    ] {
        let (output, _) = run_json(
            "refused",
            &format!(
                "  engines:\n    - {{engine: redis, version: \"7.0\"}}\n    - {{engine: valkey, version: \"9.1\", config: {config}}}\n  workload: {{strings: {{keys: 100}}}}\n"
            ),
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{config}: {stderr}");
        assert!(stderr.contains(words), "{config}: {stderr}");
        assert!(output.stdout.is_empty(), "nothing was measured");
    }
}
