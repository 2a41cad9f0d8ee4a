//! Tests of the generated schema: documented fields and defaults.

use kube::CustomResourceExt;
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
    let crd = serde_json::to_value(MemoryBenchmark::crd()).unwrap();
    let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    let mut found = Vec::new();
    undocumented(&schema["properties"]["spec"], "spec", &mut found);
    undocumented(&schema["properties"]["status"], "status", &mut found);
    assert!(found.is_empty(), "fields without a doc comment: {found:?}");
}

#[test]
fn the_schema_carries_the_defaults() {
    let crd = serde_json::to_value(MemoryBenchmark::crd()).unwrap();
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
    let crd = serde_json::to_value(MemoryBenchmark::crd()).unwrap();
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
