//! The capacity projection of a profile's rebuild on real engines: `membench run` of a spec
//! whose workload is a profile (five types, a fifth of the keys with a TTL) and whose
//! `capacity` asks for ten times its keys, then the same spec rebuilt at ten times the scale;
//! the measured used_memory must be inside the band and within 2% of the projected figure.
//! `membench capacity` on the small run's saved result must give the same plan.
//!
//! Needs the engine store's Redis 8.2.3 (a power-of-two dict), Valkey 9.1.2 (the bucketed
//! hashtable) and Dragonfly 1.40.0 (a dash table per shard; one thread, as a local run starts
//! it).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// The profile's own keys; the small rebuild stores 10 times as many, the large one 100 times.
const PROFILE_KEYS: u64 = 2_000;
const SMALL_SCALE: u64 = 10;
const LARGE_SCALE: u64 = 100;

/// Strings (short values, a third of them with a TTL), small hashes, sets of ids, sorted-set
/// indexes and lists, as an application's keyspace holds them.
const GROUPS: &str = r#"
    - template: "session:{n}"
      type: string
      share: 0.5
      keyLength: {buckets: [[12, 14, 1]]}
      ttl: {share: 0.4, millis: {buckets: [[86400000, 86400000, 1]]}}
      values: {textLength: {buckets: [[20, 60, 3], [100, 200, 1]]}}
    - template: "counter:{n}"
      type: string
      share: 0.15
      keyLength: {buckets: [[10, 13, 1]]}
      values: {integerShare: 1.0, integerLength: {buckets: [[1, 6, 1]]}}
    - template: "user:{n}"
      type: hash
      share: 0.2
      keyLength: {buckets: [[8, 10, 1]]}
      ttl: {share: 0.25, millis: {buckets: [[86400000, 86400000, 1]]}}
      elements: {buckets: [[3, 8, 3], [150, 200, 1]]}
      fields: {textLength: {buckets: [[4, 10, 1]]}}
      values: {integerShare: 0.3, textLength: {buckets: [[5, 30, 1]]}, integerLength: {buckets: [[1, 4, 1]]}}
    - template: "group:{n}:members"
      type: set
      share: 0.06
      keyLength: {buckets: [[16, 18, 1]]}
      elements: {buckets: [[5, 30, 1]]}
      values: {integerKeys: 1.0, integerLength: {buckets: [[4, 7, 1]]}}
    - template: "rank:{n}"
      type: zset
      share: 0.05
      keyLength: {buckets: [[8, 10, 1]]}
      elements: {buckets: [[10, 40, 1]]}
      values: {textLength: {buckets: [[8, 12, 1]]}}
      scores: {integerShare: 1.0, integerLength: {buckets: [[1, 5, 1]]}}
    - template: "queue:{n}"
      type: list
      share: 0.04
      keyLength: {buckets: [[8, 10, 1]]}
      elements: {buckets: [[3, 10, 1]]}
      values: {textLength: {buckets: [[5, 8, 1]]}}
"#;

fn spec(scale: u64, repetitions: u32) -> String {
    let groups: String = GROUPS
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| format!("      {l}\n"))
        .collect::<String>();
    format!(
        "apiVersion: membench.io/v1alpha1
kind: MemoryBenchmark
metadata:
  name: capacity-profile-{scale}
spec:
  instanceType: r8g.4xlarge
  engines:
    - {{engine: redis, version: \"8.2\"}}
    - {{engine: valkey, version: \"9.1\", allocator: jemalloc}}
    - {{engine: dragonfly, version: \"1.40.0\"}}
  workload:
    profile:
      scale: {scale}
      seed: 7
      source: {{keys: {PROFILE_KEYS}}}
      groups:
{groups}  repetitions: {repetitions}
  capacity:
    items: {items}
    instanceFamilies: [r8g]
",
        items = PROFILE_KEYS * LARGE_SCALE
    )
}

fn scratch() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("capacity-profile");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn membench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_membench"))
        .args(args)
        .output()
        .expect("membench runs")
}

/// Runs the spec at `scale`, returning the result file's JSON.
fn run(scale: u64, repetitions: u32) -> Value {
    let dir = scratch();
    let spec_path = dir.join(format!("profile-{scale}.yaml"));
    let result = dir.join(format!("profile-{scale}.json"));
    std::fs::write(&spec_path, spec(scale, repetitions)).unwrap();
    let out = membench(&[
        "run",
        spec_path.to_str().unwrap(),
        "--result-file",
        result.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "membench run failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(&result).unwrap()).unwrap()
}

#[test]
fn a_rebuild_projects_ten_times_its_keys_within_2_percent_of_a_real_rebuild_at_that_size() {
    let small = run(SMALL_SCALE, 2);
    let engines = small["engines"].as_array().expect("engines");
    assert_eq!(engines.len(), 3, "{small}");
    assert!(
        small["capacity"]["not_projected"].is_null(),
        "every engine is projected: {}",
        small["capacity"]
    );
    let rules: Vec<&str> = engines
        .iter()
        .map(|e| {
            e["capacity"]["projection"]["growth_rule"]
                .as_str()
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(
        rules,
        ["power-of-two-dict", "bucketed-hashtable", "dash-table"],
        "{small}"
    );
    let keys = PROFILE_KEYS * SMALL_SCALE;
    for engine in engines {
        assert_eq!(
            engine["repetitions"][0]["items"], keys,
            "{}",
            engine["name"]
        );
    }

    // The same arithmetic from the saved result, without measuring again.
    let result = scratch().join(format!("profile-{SMALL_SCALE}.json"));
    let out = membench(&[
        "capacity",
        result.to_str().unwrap(),
        "--items",
        &(PROFILE_KEYS * LARGE_SCALE).to_string(),
        "--instance-families",
        "r8g",
        "--output",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let saved: Value = serde_json::from_slice(&out.stdout).unwrap();
    for (a, b) in saved["engines"].as_array().unwrap().iter().zip(engines) {
        assert_eq!(a["capacity"], b["capacity"], "{}", a["name"]);
    }

    // A real rebuild at the planned size.
    let large = run(LARGE_SCALE, 1);
    let mut failures = Vec::new();
    for (projected, measured) in engines.iter().zip(large["engines"].as_array().unwrap()) {
        let used = measured["repetitions"][0]["used_memory"].as_f64().unwrap();
        let capacity = &projected["capacity"];
        let point = capacity["projected_used_memory"].as_f64().unwrap();
        let band = &capacity["projected_used_memory_band"];
        let (low, high) = (band[0].as_f64().unwrap(), band[1].as_f64().unwrap());
        let error = (point - used) / used;
        let naive = {
            let r = &projected["repetitions"][0];
            let base = r["baseline_used_memory"].as_f64().unwrap();
            base + (r["used_memory"].as_f64().unwrap() - base) * (LARGE_SCALE / SMALL_SCALE) as f64
        };
        eprintln!(
            "{}: projected {point} [{low}, {high}] from {keys} keys, measured {used} at {} keys: {:+.2}% (band {:+.2}% / {:+.2}%; bytes per key times N: {:+.2}%)",
            projected["name"],
            PROFILE_KEYS * LARGE_SCALE,
            error * 100.0,
            (low - used) / used * 100.0,
            (high - used) / used * 100.0,
            (naive - used) / used * 100.0,
        );
        if error.abs() >= 0.02 {
            failures.push(format!(
                "{}: projected {point}, measured {used} ({:+.2}%)",
                projected["name"],
                error * 100.0
            ));
        }
        if !(low <= used && used <= high) {
            failures.push(format!(
                "{}: measured {used} outside the band [{low}, {high}]",
                projected["name"]
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
