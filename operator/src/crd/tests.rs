//! Tests of the generated schema: documented fields and defaults.

use serde_json::Value;

use super::*;

/// Paths of schema properties that have no description (`kubectl explain` would show
/// nothing for them).
fn undocumented(schema: &Value, path: &str, found: &mut Vec<String>) {
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            let child = format!("{path}.{name}");
            if property.get("description").is_none() {
                found.push(child.clone());
            }
            undocumented(property, &child, found);
        }
    }
    if let Some(items) = schema.get("items") {
        undocumented(items, &format!("{path}[]"), found);
    }
}

#[test]
fn every_field_of_spec_and_status_is_documented() {
    let crd = serde_json::to_value(super::definition()).unwrap();
    let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    let mut found = Vec::new();
    undocumented(&schema["properties"]["spec"], "spec", &mut found);
    undocumented(&schema["properties"]["status"], "status", &mut found);
    assert!(found.is_empty(), "fields without a doc comment: {found:?}");
}

#[test]
fn the_schema_carries_the_defaults() {
    let crd = serde_json::to_value(super::definition()).unwrap();
    let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
    assert_eq!(spec["repetitions"]["default"], 10);
    assert_eq!(spec["pipeline"]["default"], 100);
    assert_eq!(spec["settleSeconds"]["default"], 0);
    assert_eq!(spec["cleanupPolicy"]["default"], "Delete");
}

/// The schema writes the pipeline's and the repetitions' limits as literals (schemars takes
/// them so); the client, the validation and a run plan check [`MAX_PIPELINE`] and
/// [`MAX_REPETITIONS`]. A limit changed in one place and not the other fails here.
#[test]
fn the_schemas_limits_are_the_constants_the_client_checks() {
    let crd = serde_json::to_value(super::definition()).unwrap();
    let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
    // schemars writes the limits as floats.
    let limit = |field: &str, bound: &str| spec[field][bound].as_f64();
    assert_eq!(limit("pipeline", "maximum"), Some(f64::from(MAX_PIPELINE)));
    assert_eq!(limit("pipeline", "minimum"), Some(1.0));
    assert_eq!(
        limit("repetitions", "maximum"),
        Some(f64::from(MAX_REPETITIONS))
    );
    assert_eq!(limit("repetitions", "minimum"), Some(1.0));
}

/// The paths under `schema` (a property's name, `[]` for an array's items) that carry a closed
/// `enum`.
fn closed_enums(schema: &Value, path: &str, found: &mut Vec<String>) {
    if schema.get("enum").is_some() {
        found.push(path.to_string());
    }
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            closed_enums(property, &format!("{path}.{name}"), found);
        }
    }
    if let Some(items) = schema.get("items") {
        closed_enums(items, &format!("{path}[]"), found);
    }
}

fn status_schema() -> Value {
    let crd = serde_json::to_value(super::definition()).unwrap();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"].clone()
}

#[test]
fn the_status_schema_takes_a_word_a_newer_operator_writes() {
    // A closed `enum` would make the API server refuse a newer operator's status write that
    // holds a word this release does not know.
    let mut found = Vec::new();
    closed_enums(&status_schema(), "status", &mut found);
    assert_eq!(
        found,
        Vec::<String>::new(),
        "closed enums in the status schema"
    );
    // The walk finds an enum where there is one: the spec keeps its closed enums.
    let crd = serde_json::to_value(super::definition()).unwrap();
    let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    let mut in_spec = Vec::new();
    closed_enums(spec, "spec", &mut in_spec);
    assert!(
        in_spec.contains(&"spec.engines[].engine".to_string()),
        "{in_spec:?}"
    );
}

#[test]
fn the_status_schema_names_the_words_this_release_knows() {
    use crate::words::Words;
    let status = status_schema();
    let phase = &status["properties"]["phase"]["description"];
    for word in Phase::KNOWN {
        assert!(
            phase
                .as_str()
                .unwrap_or_default()
                .contains(&format!("`{word}`")),
            "phase's description does not name `{word}`: {phase}"
        );
    }
    let engine = &status["properties"]["engines"]["items"]["properties"];
    let fields: [(&str, Vec<&str>); 3] = [
        (
            "engine",
            StatusEngineKind::KNOWN.iter().map(|k| k.as_str()).collect(),
        ),
        (
            "state",
            EngineState::KNOWN.iter().map(|s| s.as_str()).collect(),
        ),
        (
            "reason",
            ConditionReason::KNOWN.iter().map(|r| r.as_str()).collect(),
        ),
    ];
    for (field, words) in fields {
        let schema = &engine[field];
        assert_eq!(schema["type"], "string", "{field}: {schema}");
        let description = schema["description"].as_str().unwrap_or_default();
        for word in words {
            assert!(
                description.contains(&format!("`{word}`")),
                "engines[].{field}'s description does not name `{word}`: {description}"
            );
        }
    }
}

#[test]
fn a_status_with_a_newer_operators_words_is_written_back_byte_for_byte() {
    let status = MemoryBenchmarkStatus {
        phase: Some(Phase::Running),
        engines: vec![EngineStatus {
            name: "redis-8".into(),
            engine: StatusEngineKind::Known(EngineKind::Redis),
            state: EngineState::Running,
            reason: Some(ConditionReason::Measuring),
            ..EngineStatus::default()
        }],
        ..MemoryBenchmarkStatus::default()
    };
    let current = serde_json::to_string(&status).unwrap();
    let newer = current
        .replace("\"engine\":\"redis\"", "\"engine\":\"keydb\"")
        .replace("\"phase\":\"Running\"", "\"phase\":\"Paused\"")
        .replace("\"state\":\"Running\"", "\"state\":\"Hibernating\"")
        .replace(
            "\"reason\":\"Measuring\"",
            "\"reason\":\"QuantumDecoherence\"",
        );
    for word in ["Paused", "keydb", "Hibernating", "QuantumDecoherence"] {
        assert!(newer.contains(word), "{word} not put into {newer}");
    }
    let read: MemoryBenchmarkStatus = serde_json::from_str(&newer).unwrap();
    assert_eq!(serde_json::to_string(&read).unwrap(), newer);
    // Read back, the words are still unknown to this release's decisions.
    assert!(!read.phase.as_ref().unwrap().is_known());
    let engine = &read.engines[0];
    assert_eq!(engine.engine.known(), None);
    assert!(!engine.state.is_finished() && !engine.state.is_known());
    assert!(!engine.reason.as_ref().unwrap().is_known());
}
