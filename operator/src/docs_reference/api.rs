//! The MemoryBenchmark API page: every field path of the spec and the status, with its type,
//! default, validation rules and description, read from the CRD schema the code generates (what
//! the API server enforces and `kubectl explain` shows).

use serde_json::Value;

use super::{code, escape_html, header, paragraphs};

/// The MemoryBenchmark API reference page.
pub fn api_page() -> String {
    let crd = serde_json::to_value(crate::crd::definition()).expect("the CRD always serializes");
    let version = &crd["spec"]["versions"][0];
    let schema = &version["schema"]["openAPIV3Schema"];
    let mut page = header(
        "api",
        "MemoryBenchmark API",
        "the CRD schema of the Rust types in operator/src/crd",
    );
    page.push_str(&format!(
        "`apiVersion: {}/{}`, `kind: {}` (short name `mb`). The same descriptions are what \
         `kubectl explain memorybenchmark.spec` shows in a cluster, field by field \
         (`kubectl explain memorybenchmark.spec.engines`). Each field gives its type, its default, \
         what the API server checks and its description.\n\n",
        crd["spec"]["group"].as_str().unwrap_or_default(),
        version["name"].as_str().unwrap_or_default(),
        crd["spec"]["names"]["kind"].as_str().unwrap_or_default(),
    ));
    for top in ["spec", "status"] {
        let Some(field) = schema["properties"].get(top) else {
            continue;
        };
        page.push_str(&format!("## `{top}`\n\n"));
        let required = is_required(schema, top);
        describe(top, field, required, &mut page);
    }
    page
}

fn is_required(parent: &Value, name: &str) -> bool {
    parent["required"]
        .as_array()
        .is_some_and(|r| r.iter().any(|n| n.as_str() == Some(name)))
}

/// Appends the field at `path` and, below it, its own fields.
fn describe(path: &str, schema: &Value, required: bool, page: &mut String) {
    page.push_str(&format!("### `{path}`\n\n"));
    let mut facts = vec![format!("**{}**", type_of(schema))];
    if required {
        facts.push("required".into());
    }
    if let Some(default) = schema.get("default") {
        facts.push(format!("default {}", code(&compact(default))));
    }
    facts.extend(rules_of(schema));
    page.push_str(&facts.join(" · "));
    page.push_str("\n\n");
    if let Some(description) = schema["description"].as_str() {
        page.push_str(&paragraphs(description));
        page.push_str("\n\n");
    }
    // Nested fields: an object's properties, an array's items, a map's values.
    if let Some(properties) = schema["properties"].as_object() {
        for (name, child) in properties {
            describe(
                &format!("{path}.{name}"),
                child,
                is_required(schema, name),
                page,
            );
        }
    }
    if let Some(items) = schema.get("items")
        && let Some(properties) = items["properties"].as_object()
    {
        for (name, child) in properties {
            describe(
                &format!("{path}[].{name}"),
                child,
                is_required(items, name),
                page,
            );
        }
    }
    if let Some(values) = schema.get("additionalProperties")
        && let Some(properties) = values["properties"].as_object()
    {
        for (name, child) in properties {
            describe(
                &format!("{path}.*.{name}"),
                child,
                is_required(values, name),
                page,
            );
        }
    }
}

/// The field's type as a reader writes it: `string`, `integer (int32)`, `array of object`,
/// `map of string`, with `, nullable` where null is accepted.
fn type_of(schema: &Value) -> String {
    let base = if schema
        .get("x-kubernetes-int-or-string")
        .and_then(Value::as_bool)
        == Some(true)
    {
        "integer or string".to_string()
    } else {
        match schema["type"].as_str() {
            Some("array") => format!("array of {}", type_of(&schema["items"])),
            Some("object")
                if schema
                    .get("additionalProperties")
                    .is_some_and(Value::is_object) =>
            {
                format!("map of {}", type_of(&schema["additionalProperties"]))
            }
            Some(kind) => match schema["format"].as_str() {
                Some(format) => format!("{kind} ({format})"),
                None => kind.to_string(),
            },
            None if schema.get("anyOf").is_some() || schema.get("oneOf").is_some() => {
                "one of several shapes".to_string()
            }
            None => "any".to_string(),
        }
    };
    if schema.get("nullable").and_then(Value::as_bool) == Some(true) {
        format!("{base}, nullable")
    } else {
        base
    }
}

/// What the API server checks on the field, each as one short phrase.
fn rules_of(schema: &Value) -> Vec<String> {
    let mut rules = Vec::new();
    if let Some(values) = schema["enum"].as_array() {
        let values: Vec<String> = values.iter().map(|v| code(&compact(v))).collect();
        rules.push(format!("one of {}", values.join(", ")));
    }
    for (key, phrase) in [
        ("minimum", "at least"),
        ("maximum", "at most"),
        ("minLength", "length at least"),
        ("maxLength", "length at most"),
        ("minItems", "at least {} items"),
        ("maxItems", "at most {} items"),
        ("minProperties", "at least {} entries"),
        ("maxProperties", "at most {} entries"),
    ] {
        if let Some(value) = schema.get(key) {
            let value = number(value);
            if phrase.contains("{}") {
                rules.push(phrase.replace("{}", &value));
            } else {
                rules.push(format!("{phrase} {value}"));
            }
        }
    }
    if let Some(pattern) = schema["pattern"].as_str() {
        rules.push(format!("matches {}", code(pattern)));
    }
    for rule in schema["x-kubernetes-validations"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let text = rule["rule"].as_str().unwrap_or_default();
        match rule["message"].as_str() {
            Some(message) => rules.push(format!(
                "rule {} (\"{}\")",
                code(text),
                escape_html(message)
            )),
            None => rules.push(format!("rule {}", code(text))),
        }
    }
    rules
}

/// A bound as written: the schema stores `minimum: 1.0` for an integer field's 1.
fn number(value: &Value) -> String {
    match value.as_f64() {
        Some(n) if n.fract() == 0.0 && n.abs() < 1e15 => format!("{}", n as i64),
        _ => compact(value),
    }
}

fn compact(value: &Value) -> String {
    serde_json::to_string(value).expect("JSON always serializes")
}
