//! The book's generated reference pages (docs/src/reference/) are what the code generates now:
//! a page edited by hand, or code changed without its page, fails here with the command that
//! writes the page again. And the result JSON's schema (docs/src/reference/result.schema.json)
//! accepts what `membench run` really writes, and refuses a field it does not describe.

use std::path::Path;
use std::process::Command;

fn repo_root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// `membench reference-docs PAGE`, run at the repository's root as the page's header says.
fn generated(page: &str) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_membench"))
        .args(["reference-docs", page])
        .current_dir(repo_root())
        .output()
        .expect("membench runs");
    assert!(
        output.status.success(),
        "membench reference-docs {page} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("the page is UTF-8")
}

fn assert_page_is_current(page: &str) {
    assert_file_is_current(page, &format!("docs/src/reference/{page}.md"));
}

fn assert_file_is_current(page: &str, path: &str) {
    let committed = std::fs::read_to_string(repo_root().join(path))
        .unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    let generated = generated(page);
    if committed != generated {
        let (line, (ours, theirs)) = committed
            .lines()
            .chain(std::iter::repeat(""))
            .zip(generated.lines().chain(std::iter::repeat("")))
            .enumerate()
            .find(|(_, (a, b))| a != b)
            .expect("texts that differ differ in a line");
        panic!(
            "{path} is not what the code generates (first difference at line {}):\n  committed: {ours}\n  generated: {theirs}\nRun `cargo run -p membench -- reference-docs {page} > {path}` at the repository's root.",
            line + 1
        );
    }
}

#[test]
fn the_command_line_page_is_what_clap_generates() {
    assert_page_is_current("command-line");
}

#[test]
fn the_api_page_is_what_the_crd_schema_generates() {
    assert_page_is_current("api");
}

#[test]
fn the_metrics_page_is_what_the_registry_generates() {
    assert_page_is_current("metrics");
}

#[test]
fn the_chart_values_page_is_what_values_yaml_generates() {
    assert_page_is_current("chart-values");
}

#[test]
fn the_result_json_page_is_what_the_result_schema_generates() {
    assert_page_is_current("result-json");
}

#[test]
fn the_committed_result_schema_is_what_the_result_types_generate() {
    assert_file_is_current("result-schema", "docs/src/reference/result.schema.json");
}

#[test]
fn the_exit_codes_page_is_what_the_exit_status_table_generates() {
    assert_page_is_current("exit-codes");
}

#[test]
fn the_status_page_is_what_the_condition_reasons_generate() {
    assert_page_is_current("status");
}

/// The committed schema, compiled by the `jsonschema` crate (draft 2020-12).
fn result_validator() -> jsonschema::Validator {
    let path = repo_root().join("docs/src/reference/result.schema.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let schema: serde_json::Value = serde_json::from_str(&text).expect("the schema is JSON");
    jsonschema::validator_for(&schema).expect("the committed schema is a valid JSON Schema")
}

/// Every way `result` breaks the schema, each with the path of the value.
fn schema_errors(result: &serde_json::Value) -> Vec<String> {
    result_validator()
        .iter_errors(result)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

#[test]
fn a_real_local_run_and_the_release_fixture_validate_against_the_result_schema() {
    // A real run of two engines (one that reports an allocator, one that does not), two
    // repetitions each: what `membench run --output json` writes today.
    let spec = std::env::temp_dir().join(format!("membench-schema-{}.yaml", std::process::id()));
    std::fs::write(
        &spec,
        "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {name: schema-check}\nspec:\n  engines:\n    - {engine: valkey, version: \"9.1\"}\n    - {engine: dragonfly, version: \"1.40\"}\n  workload: {strings: {keys: 5000, valueSize: 100}}\n  repetitions: 2\n",
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_membench"))
        .args(["run", spec.to_str().unwrap(), "--output", "json"])
        .output()
        .expect("membench runs");
    assert!(
        output.status.success(),
        "membench run failed (the engine store is hack/install-engines.sh's): {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let real: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(real["engines"].as_array().map(Vec::len), Some(2), "{real}");
    let errors = schema_errors(&real);
    assert!(
        errors.is_empty(),
        "a real result breaks the schema:\n{}",
        errors.join("\n")
    );

    // Release 0.1.0's local run, with a snapshot under writes (the peak fields).
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/release-0.1.0/local-run.json"
    );
    let fixture: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    let errors = schema_errors(&fixture);
    assert!(
        errors.is_empty(),
        "the release fixture breaks the schema:\n{}",
        errors.join("\n")
    );
}

#[test]
fn a_result_with_a_field_the_schema_does_not_describe_or_without_a_required_one_is_refused() {
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/release-0.1.0/local-run.json"
    );
    let fixture: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();

    let mut unknown = fixture.clone();
    unknown["engines"][0]["repetitions"][0]["bytes_per_kitten"] = 1.into();
    let errors = schema_errors(&unknown);
    assert!(
        errors
            .iter()
            .any(|e| e.contains("bytes_per_kitten") && e.contains("/engines/0/repetitions/0")),
        "an unknown field is not named: {errors:?}"
    );

    let mut missing = fixture.clone();
    missing["engines"][1]["repetitions"][0]
        .as_object_mut()
        .unwrap()
        .remove("used_memory");
    let errors = schema_errors(&missing);
    assert!(
        errors
            .iter()
            .any(|e| e.contains("used_memory") && e.contains("/engines/1/repetitions/0")),
        "a missing required field is not named: {errors:?}"
    );

    let mut wrong_kind = fixture;
    wrong_kind["engines"][0]["workload"]["kind"] = "kittens".into();
    assert!(
        !schema_errors(&wrong_kind).is_empty(),
        "a workload of no known kind passes"
    );
}

#[test]
fn the_troubleshooting_table_links_each_reason_it_names_to_its_entry_on_the_status_page() {
    let path = "docs/src/how-to/troubleshooting.md";
    let text = std::fs::read_to_string(repo_root().join(path)).unwrap();
    let reasons: Vec<&str> = membench::crd::ConditionReason::KNOWN
        .iter()
        .map(|r| r.as_str())
        .collect();
    let word = regex::Regex::new(r"(\[)?`([A-Za-z]+)`(\]\(([^)]*)\))?").unwrap();
    let mut problems = Vec::new();
    let mut linked = 0;
    for (number, line) in text.lines().enumerate() {
        // The reason column of the failure table: the second cell of a row.
        let Some(reason_cell) = line
            .strip_prefix("| ")
            .and_then(|rest| rest.split(" | ").nth(1))
        else {
            continue;
        };
        for found in word.captures_iter(reason_cell) {
            let name = &found[2];
            if !reasons.contains(&name) {
                continue;
            }
            let expected = format!("../reference/status.md#{}", name.to_lowercase());
            match found.get(4) {
                Some(target) if found.get(1).is_some() && target.as_str() == expected => {
                    linked += 1
                }
                _ => problems.push(format!(
                    "{path}:{}: `{name}` is not a link to its entry: write [`{name}`]({expected})",
                    number + 1
                )),
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(
        linked >= 20,
        "only {linked} reasons linked in {path}'s failure table"
    );
}
