//! The result JSON: what `membench run --output json` prints and `--result-file` writes (the
//! raw JSON of docs/results/ too), as a JSON Schema generated from the Rust types that
//! serialize it ([`LocalComparison`] and what it holds), and a page of its fields read from
//! that schema. The schema is strict: an object lists every field it may hold, so a result
//! with a field the types do not describe fails validation.

use schemars::generate::SchemaSettings;
use serde_json::Value;

use crate::report::local_run::LocalComparison;

use super::{code, header, table_cell};

/// Where the raw schema is committed, beside the page that links it.
pub const RESULT_SCHEMA_PATH: &str = "docs/src/reference/result.schema.json";

/// The JSON Schema (draft 2020-12) of a local run's result.
pub fn result_schema() -> Value {
    let generator = SchemaSettings::draft2020_12().into_generator();
    let schema = generator.into_root_schema_for::<LocalComparison>();
    let mut schema = serde_json::to_value(schema).expect("a schema always serializes");
    schema["title"] = "membench result".into();
    schema["description"] = "What one local run of a MemoryBenchmark measured: `membench run \
         --output json` prints it and `--result-file` writes it. Generated from the Rust types \
         by `membench reference-docs result-schema`."
        .into();
    close_objects(&mut schema);
    schema
}

/// The schema as committed: pretty JSON with a final line break.
pub fn result_schema_text() -> String {
    let mut text = serde_json::to_string_pretty(&result_schema()).expect("JSON always serializes");
    text.push('\n');
    text
}

/// Every object that lists its fields accepts no other: `unevaluatedProperties: false` (not
/// `additionalProperties`), because a flattened enum (the workload's `kind`) adds its fields
/// through a `oneOf` beside the object's own, and only `unevaluatedProperties` sees those. A
/// variant inside such a `oneOf`, and a `$defs` type a variant names, is left open: the object
/// around it closes it (closing it too would refuse the fields around it).
fn close_objects(schema: &mut Value) {
    let mut open_defs = Vec::new();
    variant_refs(schema, false, &mut open_defs);
    close(schema, false);
    for name in open_defs {
        if let Some(def) = schema["$defs"]
            .get_mut(&name)
            .and_then(Value::as_object_mut)
        {
            def.remove("unevaluatedProperties");
        }
    }
}

/// The `$defs` names that variants of a flattened enum refer to.
fn variant_refs(node: &Value, is_variant: bool, out: &mut Vec<String>) {
    match node {
        Value::Object(object) => {
            if is_variant && let Some(reference) = object.get("$ref").and_then(Value::as_str) {
                out.push(reference.trim_start_matches("#/$defs/").to_string());
            }
            let lists_fields = object.contains_key("properties");
            for (key, child) in object {
                let variant = lists_fields && matches!(key.as_str(), "oneOf" | "anyOf" | "allOf");
                variant_refs(child, variant, out);
            }
        }
        Value::Array(items) => {
            for item in items {
                variant_refs(item, is_variant, out);
            }
        }
        _ => {}
    }
}

fn close(node: &mut Value, inside_variant: bool) {
    let Some(object) = node.as_object_mut() else {
        if let Some(items) = node.as_array_mut() {
            for item in items {
                close(item, inside_variant);
            }
        }
        return;
    };
    let lists_fields = object.contains_key("properties");
    if lists_fields
        && !inside_variant
        && !object.contains_key("additionalProperties")
        && !object.contains_key("unevaluatedProperties")
    {
        object.insert("unevaluatedProperties".into(), Value::Bool(false));
    }
    for (key, child) in object.iter_mut() {
        let variant = lists_fields && matches!(key.as_str(), "oneOf" | "anyOf" | "allOf");
        close(child, variant);
    }
}

/// One row of the field table.
struct Field {
    path: String,
    kind: String,
    description: String,
}

/// The result JSON page: every field path with its type and description, read from
/// [`result_schema`], and a link to the raw schema.
pub fn result_json_page() -> String {
    let schema = result_schema();
    let mut page = header(
        "result-json",
        "Result JSON",
        "the JSON Schema of the Rust result types (operator/src/report/local_run.rs and what it holds)",
    );
    page.push_str(
        "`membench run SPEC --output json` prints this document, and `--result-file FILE` \
         writes it; `membench capacity RESULT.json` reads it back. The raw \
         JSON of the published results (docs/results/) has the same form. The machine-readable \
         schema is [result.schema.json](result.schema.json) (JSON Schema draft 2020-12); \
         validate a result with any JSON Schema validator. It is strict: a field it does not \
         list is an error.\n\n",
    );
    page.push_str(
        "Sizes are bytes, rates are per second, times are seconds unless the name says \
         otherwise. `[]` in a path is each element of a list, `*` each value of a map. A field \
         marked optional is left out when it does not apply.\n\n",
    );
    let mut table = FieldTable {
        root: &schema,
        seen: Vec::new(),
        rows: Vec::new(),
    };
    table.walk(&schema, "");
    // A list, not a table: a path runs to 60 characters without a break, which would widen a
    // table's first column until its descriptions scroll out of sight.
    for field in table.rows {
        let description = table_cell(&field.description);
        page.push_str(&format!("- {} ({})", code(&field.path), field.kind));
        if description.is_empty() {
            page.push('\n');
        } else {
            page.push_str(&format!(": {description}\n"));
        }
    }
    page
}

/// The schema `node` points to: itself, or the `$defs` entry of its `$ref`.
fn resolve<'a>(root: &'a Value, node: &'a Value) -> &'a Value {
    match node["$ref"].as_str() {
        Some(reference) => {
            let name = reference.trim_start_matches("#/$defs/");
            &root["$defs"][name]
        }
        None => node,
    }
}

/// `node` without a `null` alternative (an optional field's `anyOf: [X, {type: null}]`), and
/// whether it had one.
fn without_null<'a>(root: &'a Value, node: &'a Value) -> (&'a Value, bool) {
    if let Some(options) = node["anyOf"].as_array() {
        let others: Vec<&Value> = options
            .iter()
            .filter(|o| o["type"].as_str() != Some("null"))
            .collect();
        if others.len() == 1 && options.len() == 2 {
            return (resolve(root, others[0]), true);
        }
    }
    (resolve(root, node), false)
}

/// The type as a reader writes it: `integer`, `number`, `string`, `list of object`, `map of
/// string`, `one of "a", "b"`.
fn type_name(root: &Value, node: &Value) -> String {
    let (node, _) = without_null(root, node);
    if let Some(words) = words_of(node) {
        return format!("one of {}", words.join(", "));
    }
    let types: Vec<&str> = match &node["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts
            .iter()
            .filter_map(Value::as_str)
            .filter(|t| *t != "null")
            .collect(),
        _ => Vec::new(),
    };
    match types.as_slice() {
        ["array"] => format!("list of {}", type_name(root, &node["items"])),
        ["object"] if node["additionalProperties"].is_object() => {
            format!("map of {}", type_name(root, &node["additionalProperties"]))
        }
        [single] => single.to_string(),
        [] if node.get("oneOf").is_some() || node.get("anyOf").is_some() => {
            "object, by `kind`".to_string()
        }
        [] => "any".to_string(),
        several => several.join(" or "),
    }
}

/// The words a string field may hold: its `enum`, or a `oneOf` of `enum`s and `const`s (an enum
/// whose documented variant, such as `Unknown`, is a `const` of its own).
fn words_of(node: &Value) -> Option<Vec<String>> {
    let listed = |n: &Value| -> Option<Vec<Value>> {
        match (n["enum"].as_array(), n.get("const")) {
            (Some(values), _) => Some(values.clone()),
            (None, Some(value)) => Some(vec![value.clone()]),
            (None, None) => None,
        }
    };
    let values = match listed(node) {
        Some(values) => values,
        None => {
            let options = node["oneOf"].as_array()?;
            let mut values = Vec::new();
            for option in options {
                values.extend(listed(option)?);
            }
            values
        }
    };
    Some(
        values
            .iter()
            .filter(|v| !v.is_null())
            .map(|v| code(&v.to_string()))
            .collect(),
    )
}

fn is_optional(root: &Value, parent: &Value, name: &str, child: &Value) -> bool {
    let required = parent["required"]
        .as_array()
        .is_some_and(|r| r.iter().any(|n| n.as_str() == Some(name)));
    let nullable = without_null(root, child).1
        || child["type"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t.as_str() == Some("null")));
    !required || nullable
}

/// The field table being written: the schema it reads, the `$defs` on the way down (so a type
/// that holds itself stops) and the rows so far.
struct FieldTable<'a> {
    root: &'a Value,
    seen: Vec<String>,
    rows: Vec<Field>,
}

impl<'a> FieldTable<'a> {
    /// Appends a row for each field of the object `node` (under `prefix`) and of what it holds.
    fn walk(&mut self, node: &'a Value, prefix: &str) {
        let root = self.root;
        if let Some(reference) = node["$ref"].as_str() {
            if self.seen.iter().any(|s| s == reference) {
                return;
            }
            self.seen.push(reference.to_string());
            self.walk(resolve(root, node), prefix);
            self.seen.pop();
            return;
        }
        let (node, _) = without_null(root, node);
        if let Some(properties) = node["properties"].as_object() {
            for (name, child) in properties {
                self.field(node, name, child, prefix, None);
            }
        }
        // A flattened enum's variants: each variant's fields, named for its `kind` (a variant
        // that holds a struct names it by `$ref` beside its `kind`).
        for variant in node["oneOf"].as_array().into_iter().flatten() {
            let Some(kind) = variant["properties"]["kind"]["const"].as_str() else {
                self.walk(variant, prefix);
                continue;
            };
            let held = resolve(root, variant);
            let sources = if std::ptr::eq(variant, held) {
                vec![variant]
            } else {
                vec![variant, held]
            };
            for source in sources {
                for (name, child) in source["properties"].as_object().into_iter().flatten() {
                    if name != "kind" {
                        self.field(source, name, child, prefix, Some(kind));
                    }
                }
            }
        }
        let kinds: Vec<String> = node["oneOf"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v["properties"]["kind"]["const"].as_str())
            .map(|k| code(&format!("\"{k}\"")))
            .collect();
        if !kinds.is_empty() {
            self.rows.push(Field {
                path: format!("{prefix}kind"),
                kind: format!("one of {}", kinds.join(", ")),
                description: "Which kind of workload; the fields marked with a kind are that \
                              kind's."
                    .into(),
            });
        }
    }

    /// Appends the row of field `name` of `parent` (of the variant `kind`, if one) and the rows
    /// of what it holds.
    fn field(
        &mut self,
        parent: &'a Value,
        name: &str,
        child: &'a Value,
        prefix: &str,
        kind: Option<&str>,
    ) {
        let root = self.root;
        let path = format!("{prefix}{name}");
        let mut facts = type_name(root, child);
        if is_optional(root, parent, name, child) {
            facts.push_str(", optional");
        }
        if let Some(kind) = kind {
            facts.push_str(&format!(", kind {}", code(kind)));
        }
        let (target, _) = without_null(root, child);
        let description = child["description"]
            .as_str()
            .or_else(|| target["description"].as_str())
            .unwrap_or_default()
            .to_string();
        self.rows.push(Field {
            path: path.clone(),
            kind: facts,
            description,
        });
        // What the field holds: an object's fields, a list's or a map's elements' fields.
        if target["type"] == "array" {
            self.walk(&target["items"], &format!("{path}[]."));
        } else if target["additionalProperties"].is_object() {
            self.walk(&target["additionalProperties"], &format!("{path}.*."));
        } else {
            self.walk(without_ref(child), &format!("{path}."));
        }
    }
}

/// The `$ref` a field names, through an optional field's `anyOf` with null.
fn without_ref(child: &Value) -> &Value {
    if let Some(options) = child["anyOf"].as_array()
        && let Some(reference) = options.iter().find(|o| o.get("$ref").is_some())
    {
        return reference;
    }
    child
}
