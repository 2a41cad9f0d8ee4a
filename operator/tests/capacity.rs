//! The capacity arithmetic end to end on real engines: `membench run` of a small spec with
//! `capacity`, then `membench capacity` on its saved result, which must give the same plan;
//! the projection from the small run against a real run at the planned size, for 100-byte
//! strings and for a profile's rebuild (five types, a quarter of the keys with a TTL, rebuilt
//! at ten times the scale); and the bad inputs refused in words.
//!
//! The strings sizes are issue 21's own target: from a 100,000-key run of 100-byte strings, the
//! projected 1,000,000-key used_memory within 2% of a measured 1,000,000-key run (and inside
//! the band), on Redis 8.2, Valkey 8.1, Valkey 9.1 and Dragonfly. Both runs, one repetition
//! each, took 12 s with the debug build on 2 shared cores (docs/src/results/, "Capacity
//! projection", has the figures of three repetitions).
//!
//! Needs the engine store's Redis 8.2.3, Valkey 9.1.2 (hack/install-engines.sh; both come from
//! pinned wheels, so every machine's store has them), Valkey 8.1.7 for the strings (the
//! upstream shared build the store builds: `version: "8.1"` prefers it, with the official
//! image's jemalloc, to the libc 8.1.8 wheel) and Dragonfly 1.40.0, whose dash table the
//! projection models per shard (one thread, as a local run starts it).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const SMALL: u64 = 100_000;
const LARGE: u64 = 1_000_000;
/// The strings runs read memory again this long after the load: the projected RSS is taken
/// from the first repetition's settled reading (RSS is refreshed only every 100 ms by Redis
/// and Valkey), and checked against the large run's.
const SETTLE_SECONDS: u32 = 2;
/// How far the projected RSS may be from the large run's settled RSS, (below, above), per
/// engine. Measured here, four runs of one repetition each with settleSeconds 2
/// (docs/src/results/, "Strings: 100,000 keys of 100 bytes projected to 1,000,000"): Redis 8.2
/// +2.5% to +4.3%, Valkey 8.1 -4.4% to -3.1%, Valkey 9.1 -0.7% to +0.1%; Dragonfly +1.2%,
/// +2.0%, +2.2% and +21.8%, its RSS growth at 100,000 keys (12.2 MB of data) varying by about
/// 3 MB from run to run.
fn rss_margin(engine: &str) -> (f64, f64) {
    if engine.starts_with("dragonfly") {
        (0.10, 0.30)
    } else {
        (0.10, 0.10)
    }
}

/// The engines of the profile's rebuild.
const ENGINES: &[&str] = &[
    "{engine: redis, version: \"8.2\"}",
    "{engine: valkey, version: \"9.1\", allocator: jemalloc}",
    "{engine: dragonfly, version: \"1.40.0\"}",
];
/// The engines of the strings target: the four the issue names.
const STRINGS_ENGINES: &[&str] = &[
    "{engine: redis, version: \"8.2\"}",
    "{engine: valkey, version: \"8.1\"}",
    "{engine: valkey, version: \"9.1\", allocator: jemalloc}",
    "{engine: dragonfly, version: \"1.40.0\"}",
];

/// The profile's own keys; its small rebuild stores 10 times as many, the large one 100 times.
const PROFILE_KEYS: u64 = 2_000;
const PROFILE_SMALL_SCALE: u64 = 10;
const PROFILE_LARGE_SCALE: u64 = 100;

/// A spec of `engines` measuring `workload` (its YAML under `workload:`, indented by four),
/// with `capacity` for `items`.
fn spec(
    name: &str,
    engines: &[&str],
    workload: &str,
    repetitions: u32,
    settle_seconds: u32,
    items: u64,
) -> String {
    let engines: String = engines.iter().map(|e| format!("    - {e}\n")).collect();
    format!(
        "apiVersion: membench.io/v1alpha1
kind: MemoryBenchmark
metadata:
  name: {name}
spec:
  instanceType: r8g.4xlarge
  engines:
{engines}  workload:
{workload}
  repetitions: {repetitions}
  settleSeconds: {settle_seconds}
  capacity:
    items: {items}
    instanceFamilies: [r8g, r7i]
"
    )
}

fn strings_spec(keys: u64) -> String {
    spec(
        &format!("capacity-strings-{keys}"),
        STRINGS_ENGINES,
        &format!("    strings: {{keys: {keys}, valueSize: 100}}"),
        1,
        SETTLE_SECONDS,
        LARGE,
    )
}

fn scratch() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("capacity");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn membench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_membench"))
        .args(args)
        .output()
        .expect("membench runs")
}

fn prices_file() -> String {
    concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../manifests/examples/prices.example.csv"
    )
    .to_string()
}

/// Runs `text` (saved as NAME.yaml) with `--prices`, returning the result file's JSON
/// (NAME.json) and what the run printed; the run must print its capacity table for `items`.
fn run(name: &str, text: &str, items: u64) -> (Value, String) {
    let dir = scratch();
    let spec_path = dir.join(format!("{name}.yaml"));
    let result = dir.join(format!("{name}.json"));
    std::fs::write(&spec_path, text).unwrap();
    let out = membench(&[
        "run",
        spec_path.to_str().unwrap(),
        "--result-file",
        result.to_str().unwrap(),
        "--prices",
        &prices_file(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "membench run failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(&format!(
            "capacity at {items} keys, 25% headroom, families r8g, r7i"
        )),
        "the run prints its capacity table: {stdout}"
    );
    let json = serde_json::from_str(&std::fs::read_to_string(&result).unwrap()).unwrap();
    (json, stdout.into_owned())
}

fn run_strings(keys: u64) -> (Value, String) {
    run(&format!("strings-{keys}"), &strings_spec(keys), LARGE)
}

#[test]
fn a_saved_run_gives_the_same_plan_as_the_run_and_projects_a_real_larger_run_within_2_percent() {
    let (small, printed) = run_strings(SMALL);
    let engines = small["engines"].as_array().expect("engines");
    let names: Vec<&str> = engines
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["redis-8.2", "valkey-8.1", "valkey-9.1", "dragonfly-1.40.0"],
        "{small}"
    );
    // Each engine projected by its own growth rule: Redis's power-of-two dict, Valkey 8.1's
    // and 9.1's bucketed hashtable, Dragonfly's dash table (modelled from the thread count
    // the run reports).
    for (engine, (version, rule)) in engines.iter().zip([
        ("8.2.", "power-of-two-dict"),
        ("8.1.", "bucketed-hashtable"),
        ("9.1.", "bucketed-hashtable"),
        ("1.40.0", "dash-table"),
    ]) {
        assert!(
            engine["engine"]["version"]
                .as_str()
                .is_some_and(|v| v.starts_with(version)),
            "{}",
            engine["engine"]
        );
        assert_eq!(
            engine["capacity"]["projection"]["growth_rule"], rule,
            "{}",
            engine["capacity"]
        );
    }
    assert_eq!(
        engines[3]["engine"]["threads"], 1,
        "{}",
        engines[3]["engine"]
    );
    for engine in engines {
        let capacity = &engine["capacity"];
        for field in [
            "projected_used_memory",
            "required_node_memory",
            "projected_rss",
        ] {
            assert!(
                capacity[field].as_u64().unwrap_or(0) > 0,
                "{field}: {engine}"
            );
        }
        let fits = capacity["instance_types"]
            .as_array()
            .expect("instance_types");
        assert_eq!(fits.len(), 2, "{capacity}");
        // 1,000,000 keys of 100 bytes fit the smallest size of both families.
        assert_eq!(fits[0]["instance_type"], "r8g.large", "{capacity}");
        assert_eq!(fits[1]["instance_type"], "r7i.large", "{capacity}");
        assert!(fits[0]["monthly_usd"].as_f64().unwrap() > 0.0, "{capacity}");
    }
    let cheapest = &small["capacity"]["cheapest"];
    assert_eq!(cheapest["instance_type"], "r8g.large", "{small}");

    // The same arithmetic from the saved result, without measuring again.
    assert_the_saved_result_plans_the_same(&format!("strings-{SMALL}"), LARGE, &small);
    // A real run at the planned size: the projection within 2%, and inside its band.
    let (large, _) = run_strings(LARGE);
    assert_projected_within_2_percent_and_in_band(&small, &large, SMALL, LARGE);
    // The RSS from the data's settled growth, said in the table's notes, against the large
    // run's settled RSS.
    for engine in engines {
        assert_rss_basis(
            engine,
            &printed,
            "data-growth-settled",
            "the data's settled growth",
        );
    }
    assert_projected_rss_within_margin_of_the_settled_rss(&small, &large);
}

/// The engine's plan took its RSS from `basis`, and the table's notes said `said` of it.
fn assert_rss_basis(engine: &Value, printed: &str, basis: &str, said: &str) {
    let name = engine["name"].as_str().unwrap();
    assert_eq!(
        engine["capacity"]["rss_basis"], basis,
        "{}",
        engine["capacity"]
    );
    assert!(
        printed.contains(&format!("RSS: {name}: {said}")),
        "{printed}"
    );
}

/// Each engine's projected RSS from the `small` run against the `large` run's settled RSS:
/// within [`rss_margin`], never below the projected used_memory. Prints the figures, and what
/// the run's ratio (used_memory_rss / used_memory) would have said.
fn assert_projected_rss_within_margin_of_the_settled_rss(small: &Value, large: &Value) {
    let mut failures = Vec::new();
    let measured_engines = large["engines"].as_array().unwrap();
    for (projected, measured) in small["engines"]
        .as_array()
        .unwrap()
        .iter()
        .zip(measured_engines)
    {
        let name = &projected["name"];
        let settled = &measured["repetitions"][0]["settled"];
        let rss = settled["used_memory_rss"]
            .as_f64()
            .unwrap_or_else(|| panic!("{name}: the large run has no settled RSS: {measured}"));
        let capacity = &projected["capacity"];
        let point = capacity["projected_rss"].as_f64().unwrap();
        let used = capacity["projected_used_memory"].as_f64().unwrap();
        let ratio_rss = used * capacity["fragmentation_ratio"].as_f64().unwrap();
        let error = (point - rss) / rss;
        eprintln!(
            "{name}: projected RSS {point} (growth ratio {}), measured settled RSS {rss} at {LARGE}: {:+.2}% (the run's ratio {}: {:+.2}%)",
            capacity["rss_growth_ratio"],
            error * 100.0,
            capacity["fragmentation_ratio"],
            (ratio_rss - rss) / rss * 100.0,
        );
        let (below, above) = rss_margin(name.as_str().unwrap());
        if error < -below || error > above {
            failures.push(format!(
                "{name}: projected RSS {point}, measured {rss} ({:+.2}%)",
                error * 100.0
            ));
        }
        if point < used {
            failures.push(format!("{name}: RSS {point} below used_memory {used}"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// `membench capacity` on the saved NAME.json for `items` gives the plan of the run itself.
fn assert_the_saved_result_plans_the_same(name: &str, items: u64, run: &Value) {
    let result = scratch().join(format!("{name}.json"));
    let out = membench(&[
        "capacity",
        result.to_str().unwrap(),
        "--items",
        &items.to_string(),
        "--instance-families",
        "r8g,r7i",
        "--prices",
        &prices_file(),
        "--output",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let saved: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(saved["capacity"], run["capacity"]);
    let engines = run["engines"].as_array().expect("engines");
    for (a, b) in saved["engines"].as_array().unwrap().iter().zip(engines) {
        assert_eq!(a["capacity"], b["capacity"], "{}", a["name"]);
    }
}

/// Each engine's projection from the `small` run (`from` items) against the used_memory the
/// `large` run measured (`at` items): within 2% and inside the band. Prints the figures, and
/// what the small run's bytes per item times `at` would have said.
fn assert_projected_within_2_percent_and_in_band(small: &Value, large: &Value, from: u64, at: u64) {
    let mut failures = Vec::new();
    let engines = small["engines"].as_array().expect("engines");
    let measured_engines = large["engines"].as_array().unwrap();
    assert_eq!(measured_engines.len(), engines.len(), "{large}");
    for (projected, measured) in engines.iter().zip(measured_engines) {
        let name = &projected["name"];
        assert_eq!(name, &measured["name"]);
        assert_eq!(measured["repetitions"][0]["items"], at, "{name}");
        let used = measured["repetitions"][0]["used_memory"].as_f64().unwrap();
        let capacity = &projected["capacity"];
        let point = capacity["projected_used_memory"].as_f64().unwrap();
        let band = &capacity["projected_used_memory_band"];
        let (low, high) = (band[0].as_f64().unwrap(), band[1].as_f64().unwrap());
        let error = (point - used) / used;
        let first = &projected["repetitions"][0];
        let baseline = first["baseline_used_memory"].as_f64().unwrap();
        let naive = baseline
            + (first["used_memory"].as_f64().unwrap() - baseline) * at as f64 / from as f64;
        let off = |v: f64| (v - used) / used * 100.0;
        eprintln!(
            "{name}: projected {point} [{low}, {high}] from {from}, measured {used} at {at}: {:+.2}% (band {:+.2}% / {:+.2}%; bytes per item times N: {:+.2}%)",
            error * 100.0,
            off(low),
            off(high),
            off(naive),
        );
        if error.abs() >= 0.02 {
            failures.push(format!(
                "{name}: projected {point} from {from}, measured {used} at {at} ({:+.2}%)",
                error * 100.0
            ));
        }
        if !(low <= used && used <= high) {
            failures.push(format!("{name}: measured {used} outside the band {band}"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Strings (short values, a third of them with a TTL), small hashes, sets of ids, sorted-set
/// indexes and lists, as an application's keyspace holds them.
const PROFILE_GROUPS: &str = r#"
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

fn profile_spec(scale: u64, repetitions: u32) -> String {
    let groups: String = PROFILE_GROUPS
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| format!("    {l}\n"))
        .collect();
    let workload = format!(
        "    profile:\n      scale: {scale}\n      seed: 7\n      source: {{keys: {PROFILE_KEYS}}}\n      groups:\n{}",
        groups.trim_end()
    );
    spec(
        &format!("capacity-profile-{scale}"),
        ENGINES,
        &workload,
        repetitions,
        0,
        PROFILE_KEYS * PROFILE_LARGE_SCALE,
    )
}

#[test]
fn a_rebuild_projects_ten_times_its_keys_within_2_percent_of_a_real_rebuild_at_that_size() {
    let (from, at) = (
        PROFILE_KEYS * PROFILE_SMALL_SCALE,
        PROFILE_KEYS * PROFILE_LARGE_SCALE,
    );
    let (small, printed) = run(
        &format!("profile-{from}"),
        &profile_spec(PROFILE_SMALL_SCALE, 2),
        at,
    );
    assert!(
        small["capacity"]["not_projected"].is_null(),
        "every engine is projected: {}",
        small["capacity"]
    );
    let engines = small["engines"].as_array().expect("engines");
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
    for engine in engines {
        assert_eq!(
            engine["repetitions"][0]["items"], from,
            "{}",
            engine["name"]
        );
        // No settleSeconds: the RSS falls back to the run's ratio, and says so.
        let said = format!(
            "the run's ratio {:.3}: the first repetition has no settled reading",
            engine["capacity"]["fragmentation_ratio"].as_f64().unwrap()
        );
        assert_rss_basis(engine, &printed, "run-ratio", &said);
    }
    assert_the_saved_result_plans_the_same(&format!("profile-{from}"), at, &small);
    let (large, _) = run(
        &format!("profile-{at}"),
        &profile_spec(PROFILE_LARGE_SCALE, 1),
        at,
    );
    assert_projected_within_2_percent_and_in_band(&small, &large, from, at);
}

#[test]
fn bad_capacity_input_is_refused_in_words() {
    let dir = scratch();
    let result = dir.join("not-measured.json");
    // Nothing is measured for these: the input is refused before the result is read.
    std::fs::write(&result, "{\"engines\": []}").unwrap();
    let path = result.to_str().unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["--items".into(), "0".into()],
            "--items must be at least 1",
        ),
        (
            vec![
                "--items".into(),
                "10".into(),
                "--instance-families".into(),
                "m7g".into(),
            ],
            "unknown instance family 'm7g': the instance-type table knows r8g, r7g, r7i, r6g, r6i",
        ),
        (
            vec![
                "--items".into(),
                "10".into(),
                "--headroom-percent".into(),
                "95".into(),
            ],
            "--headroom-percent must be between 0 and 90",
        ),
    ];
    for (args, expected) in cases {
        let mut all = vec!["capacity".to_string(), path.to_string()];
        all.extend(args.clone());
        let out = membench(&all.iter().map(String::as_str).collect::<Vec<_>>());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    let prices = dir.join("bad-prices.csv");
    std::fs::write(&prices, "r8g.large,0.1\nr8g.xlarge,free\n").unwrap();
    let out = membench(&[
        "capacity",
        path,
        "--items",
        "10",
        "--prices",
        prices.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("bad-prices.csv line 2: 'free' is not a price"),
        "{stderr}"
    );
}

/// The term of a recommendation named `name`.
fn term<'a>(recommended: &'a Value, name: &str) -> Option<&'a Value> {
    recommended["terms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
}

#[test]
fn the_recommended_limit_is_the_sum_of_terms_measured_by_the_run_and_names_what_it_did_not_measure()
{
    // A save under writes and a load past maxmemory on a forking engine (Valkey) and one that
    // saves without a fork (Dragonfly): 100,000 keys of 100 bytes, planned at 1,000,000.
    let text = spec(
        "capacity-recommended",
        &[
            "{engine: valkey, version: \"9.1\"}",
            "{engine: dragonfly, version: \"1.40\"}",
        ],
        "    strings: {keys: 100000, valueSize: 100}",
        1,
        SETTLE_SECONDS,
        1_000_000,
    )
    .replace(
        "  capacity:\n",
        "  peak: {snapshot: {writesPerSecond: 20000}}\n  eviction: {maxmemory: 8mb, policy: allkeys-lru, loadTo: 2}\n  capacity:\n",
    );
    let (json, printed) = run("capacity-recommended", &text, 1_000_000);
    const MIB: u64 = 1 << 20;
    for engine in json["engines"].as_array().unwrap() {
        let name = engine["name"].as_str().unwrap();
        let capacity = &engine["capacity"];
        let r = &capacity["recommended"];
        let maxmemory = r["maxmemory_bytes"].as_u64().unwrap();
        // maxmemory is the projected used_memory, rounded up to a MiB; Dragonfly's at least
        // the 256 MiB a thread it starts with, the limit topped up by a start_minimum term.
        let projected = capacity["projected_used_memory"].as_u64().unwrap();
        let least = match engine["engine"]["name"].as_str() {
            Some("dragonfly") => engine["engine"]["threads"].as_u64().unwrap() * 256 * MIB,
            _ => 0,
        };
        assert_eq!(
            maxmemory,
            (projected.div_ceil(MIB) * MIB).max(least),
            "{name}: {r}"
        );
        if least > projected {
            // The note says why, and the limit gives it that much as an engine pod does (80%
            // of the limit as --maxmemory), a start_minimum term topping the others up.
            assert!(
                r["notes"].to_string().contains("256 MiB per thread"),
                "{name}: {r}"
            );
            let limit = r["memory_limit_bytes"].as_u64().unwrap();
            assert!(limit * 80 / 100 >= least, "{name}: {r}");
        } else {
            assert!(term(r, "start_minimum").is_none(), "{name}: {r}");
        }
        // The limit is the sum of its terms, rounded up to a MiB.
        let sum: u64 = r["terms"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["bytes"].as_u64().unwrap())
            .sum();
        let limit = r["memory_limit_bytes"].as_u64().unwrap();
        assert_eq!(limit, sum.max(maxmemory).div_ceil(MIB) * MIB, "{name}: {r}");
        let reserve = (limit - maxmemory) as f64 / limit as f64 * 100.0;
        assert!((r["reserve_percent"].as_f64().unwrap() - reserve).abs() < 1e-9);
        // The empty server's RSS is the first repetition's reading, as the result has it.
        let empty = term(r, "empty_rss").unwrap();
        assert_eq!(empty["source"], "measured", "{name}: {r}");
        assert_eq!(
            empty["bytes"], engine["repetitions"][0]["baseline_used_memory_rss"],
            "{name}: {r}"
        );
        assert_eq!(term(r, "data_rss").unwrap()["source"], "measured");
        // The load past maxmemory was measured.
        assert_eq!(
            term(r, "eviction_overshoot").unwrap()["source"],
            "measured",
            "{name}: {r}"
        );
        // What the run did not measure is a default, and the notes say what would measure it.
        assert_eq!(term(r, "client_buffers").unwrap()["source"], "default");
        let notes = r["notes"].to_string();
        assert!(notes.contains("add spec.churn"), "{name}: {notes}");
        let steady = empty["bytes"].as_u64().unwrap()
            + term(r, "data_rss").unwrap()["bytes"].as_u64().unwrap();
        assert_eq!(
            r["memory_request_bytes"].as_u64().unwrap(),
            steady.div_ceil(MIB) * MIB,
            "{name}: {r}"
        );
        assert!(
            printed.contains(&format!("{name}: the engine: ")),
            "the lines to paste are printed: {printed}"
        );
    }
    let valkey = &json["engines"][0]["capacity"]["recommended"];
    let cow = term(valkey, "copy_on_write").expect("a forking engine's copy");
    assert_eq!(cow["source"], "measured", "{valkey}");
    assert!(cow["bytes"].as_u64().unwrap() > 0, "{valkey}");
    assert!(
        valkey["config"]["maxmemory"]
            .as_str()
            .unwrap()
            .starts_with("maxmemory ")
    );
    assert!(valkey["config"]["elasticache_reserved_memory_percent"].is_u64());
    let dragonfly = &json["engines"][1]["capacity"]["recommended"];
    assert!(
        term(dragonfly, "copy_on_write").is_none(),
        "an engine that saves without a fork has no copy-on-write term: {dragonfly}"
    );
    assert_eq!(term(dragonfly, "save_peak").unwrap()["source"], "measured");
    assert!(
        dragonfly["config"]["maxmemory"]
            .as_str()
            .unwrap()
            .starts_with("--maxmemory=")
    );
    // The same arithmetic on the saved result.
    let saved = scratch().join("capacity-recommended.json");
    let out = membench(&[
        "capacity",
        saved.to_str().unwrap(),
        "--items",
        "1000000",
        "--output",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let again: Value = serde_json::from_slice(&out.stdout).unwrap();
    let again = if again.is_array() { &again[0] } else { &again };
    assert_eq!(
        &again["engines"][0]["capacity"]["recommended"], valkey,
        "membench capacity on the saved result gives the same recommendation"
    );
}

/// `membench capacity --memory-limit` on a saved run: a limit below what an engine holds with
/// no data (the empty server's RSS this run measured, or Dragonfly's least start limit) is
/// refused, naming the limit and that figure; one at or above both is compared with the
/// recommended limit instead.
#[test]
fn a_memory_limit_below_an_engines_empty_rss_is_refused_naming_both_figures() {
    let text = spec(
        "capacity-given-limit",
        &[
            "{engine: valkey, version: \"9.1\"}",
            "{engine: dragonfly, version: \"1.40\"}",
        ],
        "    strings: {keys: 20000, valueSize: 100}",
        1,
        SETTLE_SECONDS,
        100_000,
    );
    let (json, _) = run("capacity-given-limit", &text, 100_000);
    let empty: Vec<u64> = json["engines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            e["repetitions"][0]["baseline_used_memory_rss"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert!(empty.iter().all(|b| *b > 1 << 20), "{empty:?}");
    let saved = scratch().join("capacity-given-limit.json");
    let capacity = |limit: &str| {
        membench(&[
            "capacity",
            saved.to_str().unwrap(),
            "--items",
            "100000",
            "--memory-limit",
            limit,
            "--output",
            "json",
        ])
    };
    // One byte under Valkey's empty RSS: both engines refused, each naming its own figure.
    let under = (empty[0] - 1).to_string();
    let out = capacity(&under);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        out.stdout.is_empty(),
        "nothing is planned on a refused limit"
    );
    assert!(
        stderr.contains(&format!(
            "error: --memory-limit {under} ({under} bytes) is below what valkey-9.1 holds with no data: its empty RSS is {} bytes",
            empty[0]
        )) && stderr.contains("give at least its recommended memory limit at --items, "),
        "{stderr}"
    );
    let threads = json["engines"][1]["engine"]["threads"].as_u64().unwrap() as u32;
    let least = membench::crd::dragonfly_memory::minimum_limit(threads);
    assert!(
        stderr.contains(&format!(
            "below what dragonfly-1.40 holds with no data: its empty RSS is {} bytes",
            empty[1]
        )) && stderr.contains(&format!("it starts only under a limit of {least} bytes")),
        "{stderr}"
    );
    // At Valkey's empty RSS: Valkey passes, Dragonfly (below its start limit) alone is refused.
    let out = capacity(&empty[0].to_string());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        !stderr.contains("valkey-9.1") && stderr.contains("dragonfly-1.40"),
        "{stderr}"
    );
    // At Dragonfly's start limit both pass, and each recommendation says how the limit compares.
    let out = capacity(&least.to_string());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let planned: Value = serde_json::from_slice(&out.stdout).unwrap();
    for engine in planned["engines"].as_array().unwrap() {
        let r = &engine["capacity"]["recommended"];
        let wanted = r["memory_limit_bytes"].as_u64().unwrap();
        let said = if least >= wanted {
            "holds the recommended limit"
        } else {
            "short of the recommended limit"
        };
        assert!(
            r["notes"].as_array().unwrap().iter().any(|n| n
                .as_str()
                .unwrap()
                .starts_with(&format!("--memory-limit {least} ("))
                && n.as_str().unwrap().contains(said)),
            "{}: {r}",
            engine["name"]
        );
    }
}
