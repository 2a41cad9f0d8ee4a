//! JSON written by release 0.1.0 reads back unchanged through this release's types: a
//! benchmark's status (as the operator wrote it, captured from the controller's own decisions)
//! and a local run's result (`membench run tests/fixtures/release-0.1.0/local-run-spec.yaml
//! --output json`, a Valkey and a Dragonfly engine with a snapshot under writes). The typed
//! words (engine state, engine kind, reasons, error categories, phase names) must serialize
//! as the words that release wrote, or a reader of that release could not read ours.

use membench::client::measurement::measured::BenchmarkReport;
use membench::crd::MemoryBenchmarkStatus;
use serde_json::Value;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/release-0.1.0");

fn fixture(name: &str) -> Value {
    let path = format!("{FIXTURES}/{name}");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Reads `written` as `T` and writes it back: the same JSON value, field for field.
fn reads_back_unchanged<T: serde::de::DeserializeOwned + serde::Serialize>(written: &Value) {
    let read: T = serde_json::from_value(written.clone()).expect("reads as this release's type");
    let again = serde_json::to_value(&read).unwrap();
    assert_eq!(&again, written, "written back differently");
}

#[test]
fn a_status_written_by_release_0_1_0_reads_and_writes_back_unchanged() {
    for name in ["status-measured.json", "status-failed.json"] {
        let written = fixture(name);
        reads_back_unchanged::<MemoryBenchmarkStatus>(&written);
        let status: MemoryBenchmarkStatus = serde_json::from_value(written).unwrap();
        assert!(
            status.engines.iter().all(|e| e.engine.known().is_some()),
            "{name}"
        );
    }
    // The words the typed fields hold are the ones that release wrote.
    let failed: MemoryBenchmarkStatus =
        serde_json::from_value(fixture("status-failed.json")).unwrap();
    assert_eq!(failed.engines[0].state, "Failed");
    assert_eq!(failed.engines[0].engine, "redis");
    assert_eq!(
        failed.engines[0].reason.as_ref().map(|r| r.as_str()),
        Some("Unschedulable")
    );
    assert_eq!(
        failed.engines[1].reason.as_ref().map(|r| r.as_str()),
        Some("NotRun")
    );
}

#[test]
fn a_local_result_written_by_release_0_1_0_reads_and_writes_back_unchanged() {
    let written = fixture("local-run.json");
    let engines = written["engines"].as_array().expect("engines");
    assert_eq!(engines.len(), 2);
    for engine in engines {
        reads_back_unchanged::<BenchmarkReport>(engine);
    }
}

#[test]
fn words_a_newer_release_might_write_are_kept_and_written_back_unchanged() {
    let mut written = fixture("status-failed.json");
    written["engines"][0]["state"] = "Hibernating".into();
    written["engines"][0]["engine"] = "keydb".into();
    written["engines"][0]["reason"] = "QuantumDecoherence".into();
    reads_back_unchanged::<MemoryBenchmarkStatus>(&written);
    let status: MemoryBenchmarkStatus = serde_json::from_value(written).expect("still reads");
    let engine = &status.engines[0];
    assert_eq!(
        engine.state,
        membench::crd::EngineState::Unknown("Hibernating".into())
    );
    assert_eq!(
        engine.engine,
        membench::crd::StatusEngineKind::Unknown("keydb".into())
    );
    assert_eq!(
        engine.reason,
        Some(membench::crd::ConditionReason::Unknown(
            "QuantumDecoherence".into()
        ))
    );

    let mut result = fixture("local-run.json")["engines"][0].clone();
    result["error"] = serde_json::json!({
        "category": "CosmicRay",
        "message": "a newer client's failure",
        "phase": {"name": "teleport", "repetition": 1}
    });
    reads_back_unchanged::<BenchmarkReport>(&result);
    let report: BenchmarkReport = serde_json::from_value(result).expect("still reads");
    let error = report.error.expect("error");
    assert_eq!(
        error.category,
        membench::error::ErrorCategory::Unknown("CosmicRay".into())
    );
    assert!(!error.category.is_retryable());
    assert_eq!(
        error.phase.expect("phase").name,
        membench::client::phases::PhaseKind::Unknown("teleport".into())
    );
}
