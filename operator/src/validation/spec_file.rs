//! A MemoryBenchmark read from YAML the way the API server would take it: kind and apiVersion,
//! field names (a misspelt one is named, not dropped), types, limits and the CEL rules
//! ([`super::validate_spec`]). The local runner reads its specs through it, and tests build
//! their benchmarks with it.

use std::path::Path;

use serde_json::Value;

use crate::crd::MemoryBenchmark;

/// Reads every MemoryBenchmark in a YAML file (several may be separated by `---`), checking
/// what the API server would check: kind, apiVersion, field names, limits and the CEL rules.
pub fn read_specs(path: &Path) -> Result<Vec<MemoryBenchmark>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let name = path.display().to_string();
    parse_specs_named(&text, &name).map_err(|e| format!("{name}: {e}"))
}

/// Parses and checks MemoryBenchmark documents.
pub fn parse_specs(text: &str) -> Result<Vec<MemoryBenchmark>, String> {
    parse_specs_named(text, "<input>")
}

/// [`parse_specs`] of the text of file `name`, which a YAML error's snippet names.
fn parse_specs_named(text: &str, name: &str) -> Result<Vec<MemoryBenchmark>, String> {
    let documents: Vec<Value> = serde_saphyr::from_multiple(text).map_err(|e| {
        let rendered = e.render_with_options(serde_saphyr::render_options! {
            source_name: Some(name),
        });
        // The command line says `error:` once, before the file's name.
        let rendered = rendered.strip_prefix("error: ").unwrap_or(&rendered);
        format!("not valid YAML: {rendered}")
    })?;
    let documents: Vec<Value> = documents.into_iter().filter(|d| !d.is_null()).collect();
    if documents.is_empty() {
        return Err("holds no MemoryBenchmark".into());
    }
    let mut specs = Vec::new();
    for (i, document) in documents.iter().enumerate() {
        let which = if documents.len() > 1 {
            format!("document {}: ", i + 1)
        } else {
            String::new()
        };
        let check = || -> Result<MemoryBenchmark, String> {
            let kind = document.get("kind").and_then(Value::as_str).unwrap_or("");
            let api_version = document
                .get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or("");
            if kind != "MemoryBenchmark" || api_version != "membench.io/v1alpha1" {
                return Err(format!(
                    "expected kind MemoryBenchmark with apiVersion membench.io/v1alpha1, found kind '{kind}', apiVersion '{api_version}'"
                ));
            }
            super::shards::refuse_cluster_mode_off_with_shards(document)?;
            // A local run needs no instance type (a cluster needs instanceType or
            // instanceTypes): a missing one reads as empty.
            let benchmark: MemoryBenchmark = serde_json::from_value(document.clone())
                .map_err(|e| describe_type_error(document, &e))?;
            let typed = serde_json::to_value(&benchmark).expect("specs serialize");
            if let Some(unknown) =
                unknown_fields(document.get("spec"), typed.get("spec"), "spec").first()
            {
                return Err(format!(
                    "unknown field {unknown}: check its spelling (`kubectl explain memorybenchmark.spec` lists the fields)"
                ));
            }
            super::validate_spec(&benchmark)?;
            Ok(benchmark)
        };
        specs.push(check().map_err(|e| format!("{which}{e}"))?);
    }
    Ok(specs)
}

/// serde's message plus the field it is about, found by walking the document.
fn describe_type_error(document: &Value, e: &serde_json::Error) -> String {
    let message = e.to_string();
    if document.get("spec").is_none() {
        return "spec is missing".to_string();
    }
    if let Some(field) = message
        .strip_prefix("missing field `")
        .and_then(|rest| rest.split('`').next())
    {
        return format!("missing field '{field}' (required)");
    }
    message
}

/// Paths of fields in `original` that did not survive a round trip through the typed spec,
/// i.e. fields the spec does not have. Empty values (`[]`, `{}`, null) are not reported, since
/// the typed spec leaves them out.
pub fn unknown_fields(original: Option<&Value>, typed: Option<&Value>, path: &str) -> Vec<String> {
    let mut found = Vec::new();
    match (original, typed) {
        (Some(Value::Object(o)), Some(Value::Object(t))) => {
            for (key, value) in o {
                let child = format!("{path}.{key}");
                match t.get(key) {
                    Some(typed_value) => {
                        found.extend(unknown_fields(Some(value), Some(typed_value), &child))
                    }
                    None if is_empty(value) => {}
                    None => found.push(child),
                }
            }
        }
        (Some(Value::Array(o)), Some(Value::Array(t))) => {
            for (i, (value, typed_value)) in o.iter().zip(t).enumerate() {
                found.extend(unknown_fields(
                    Some(value),
                    Some(typed_value),
                    &format!("{path}[{i}]"),
                ));
            }
        }
        _ => {}
    }
    found
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(body: &str) -> Result<Vec<MemoryBenchmark>, String> {
        parse_specs(&format!(
            "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {{name: t}}\nspec:\n{body}"
        ))
    }

    #[test]
    fn a_valid_spec_gets_the_schema_defaults() {
        let specs = spec("  instanceType: r8g.4xlarge\n  engines: [{engine: redis, version: \"7.0.15\"}]\n  workload: {sortedSet: {members: 1000}}\n").unwrap();
        assert_eq!(specs[0].spec.repetitions, 10);
        assert_eq!(specs[0].spec.pipeline, 100);
    }

    #[test]
    fn a_misspelt_field_is_named() {
        let err = spec("  instanceType: x\n  engines: [{engine: redis, version: \"7.0\"}]\n  workload: {sortedSet: {members: 10}}\n  repetitons: 3\n").unwrap_err();
        assert!(err.contains("spec.repetitons"), "{err}");
    }

    #[test]
    fn an_unknown_engine_lists_the_allowed_ones() {
        let err = spec("  instanceType: x\n  engines: [{engine: keydb, version: \"6.3\"}]\n  workload: {strings: {keys: 10}}\n").unwrap_err();
        assert!(
            err.contains("keydb")
                && err.contains("redis")
                && err.contains("valkey")
                && err.contains("dragonfly"),
            "{err}"
        );
    }

    #[test]
    fn limits_and_duplicate_engines_are_rejected() {
        let err = spec("  instanceType: x\n  engines: [{engine: redis, version: \"7.0\"}]\n  workload: {strings: {keys: 10}}\n  repetitions: 0\n").unwrap_err();
        assert!(
            err.contains("spec.repetitions") && err.contains("between 1 and 100"),
            "{err}"
        );
        let err = spec("  instanceType: x\n  engines: [{engine: redis, version: \"7.0\"}, {engine: redis, version: \"7.0\"}]\n  workload: {strings: {keys: 10}}\n").unwrap_err();
        assert!(err.contains("engines[1]") && err.contains("name"), "{err}");
    }

    #[test]
    fn the_wrong_kind_is_rejected() {
        let err =
            parse_specs("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n").unwrap_err();
        assert!(err.contains("MemoryBenchmark"), "{err}");
    }
}
