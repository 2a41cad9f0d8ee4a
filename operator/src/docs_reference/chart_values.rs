//! The chart values page: every key of charts/membench/values.yaml with its default and the
//! comment above it, read from the file itself (helm-docs' convention: a comment block right
//! above a key documents it, `# -- ` opening it). Keys inside a list's items are part of that
//! list's default, not keys of their own.

use serde_json::Value;

use super::{code, header, table_cell};

/// One key of values.yaml: its dotted path, its documentation and its default.
struct ValueKey {
    path: String,
    doc: String,
    default: Option<Value>,
}

/// The chart values reference page for the text of values.yaml, or what in it cannot be read.
pub fn chart_values_page(values_yaml: &str) -> Result<String, String> {
    let parsed: Value = serde_saphyr::from_str(values_yaml)
        .map_err(|e| format!("charts/membench/values.yaml is not valid YAML: {e}"))?;
    let keys = read_keys(values_yaml, &parsed)?;
    let mut page = header(
        "chart-values",
        "Chart values",
        "charts/membench/values.yaml and its comments",
    );
    page.push_str(
        "The values of the `membench` Helm chart (`charts/membench`). Set them with `--set` or a \
         values file: `helm install membench charts/membench -n membench-system \
         --create-namespace -f my-values.yaml`. `helm show values charts/membench` prints the \
         file with its comments.\n\n",
    );
    page.push_str("| value | default | description |\n|---|---|---|\n");
    for key in keys {
        let default = match &key.default {
            Some(Value::Object(map)) if !map.is_empty() => "see below".to_string(),
            Some(value) => code(&serde_json::to_string(value).expect("JSON always serializes")),
            None => "-".to_string(),
        };
        page.push_str(&format!(
            "| {} | {} | {} |\n",
            code(&key.path),
            default,
            table_cell(&key.doc)
        ));
    }
    Ok(page)
}

/// The keys of `text` in file order, each with the comment block right above it.
fn read_keys(text: &str, parsed: &Value) -> Result<Vec<ValueKey>, String> {
    let mut keys = Vec::new();
    // (indent, key) of the mappings the current line is inside.
    let mut parents: Vec<(usize, String)> = Vec::new();
    let mut comment: Vec<String> = Vec::new();
    // Lines indented deeper than this belong to a list's items (or a block scalar): skipped.
    let mut skip_deeper_than: Option<usize> = None;
    for (number, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if let Some(limit) = skip_deeper_than {
            if trimmed.is_empty() || indent > limit || trimmed.starts_with("- ") && indent == limit
            {
                continue;
            }
            skip_deeper_than = None;
        }
        if trimmed.is_empty() {
            comment.clear();
            continue;
        }
        if let Some(text) = trimmed.strip_prefix('#') {
            let text = text.strip_prefix(' ').unwrap_or(text);
            comment.push(text.strip_prefix("-- ").unwrap_or(text).to_string());
            continue;
        }
        let Some((key, rest)) = trimmed.split_once(':') else {
            return Err(format!(
                "charts/membench/values.yaml:{}: expected `key: value`, found {trimmed:?}",
                number + 1
            ));
        };
        while parents.last().is_some_and(|(i, _)| *i >= indent) {
            parents.pop();
        }
        let path: Vec<&str> = parents
            .iter()
            .map(|(_, k)| k.as_str())
            .chain([key.trim()])
            .collect();
        let default = path
            .iter()
            .try_fold(parsed, |value, key| value.get(*key))
            .cloned();
        let value = rest.trim();
        keys.push(ValueKey {
            path: path.join("."),
            doc: comment.join(" "),
            default,
        });
        comment.clear();
        if value.is_empty() {
            // A mapping (its keys follow, indented) or a list (its items follow as `- `).
            parents.push((indent, key.trim().to_string()));
            if next_content_line_is_list_item(text, number) {
                skip_deeper_than = Some(indent);
                parents.pop();
            }
        } else if value.starts_with('|') || value.starts_with('>') {
            skip_deeper_than = Some(indent);
        }
    }
    Ok(keys)
}

fn next_content_line_is_list_item(text: &str, after: usize) -> bool {
    text.lines()
        .skip(after + 1)
        .map(str::trim_start)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .is_some_and(|l| l.starts_with("- ") || l == "-")
}
