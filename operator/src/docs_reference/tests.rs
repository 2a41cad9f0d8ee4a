//! The generators on small inputs whose pages can be read whole.

use clap::{Arg, ArgAction, Command};

use super::command_line::anchor;
use super::*;
use crate::metrics::MetricDescription;

#[test]
fn a_chart_value_gets_the_comment_above_it_and_its_default_and_list_items_are_no_keys() {
    let values = "# The file's own header.\n\n# -- Image tag; empty means the appVersion.\ntag: \"\"\n\nimage:\n  # -- The repository,\n  # on two lines.\n  repository: ghcr.io/x/y\n  # -- Patterns.\n  allowed:\n    - redis\n    - key: a\n      value: b\n  after: 3\n";
    let page = chart_values_page(values).unwrap();
    assert!(
        page.contains("| `tag` | `\"\"` | Image tag; empty means the appVersion. |"),
        "{page}"
    );
    assert!(
        page.contains("| `image.repository` | `\"ghcr.io/x/y\"` | The repository, on two lines. |"),
        "{page}"
    );
    assert!(
        page.contains(
            "| `image.allowed` | `[\"redis\",{\"key\":\"a\",\"value\":\"b\"}]` | Patterns. |"
        ),
        "{page}"
    );
    assert!(page.contains("| `image.after` | `3` |  |"), "{page}");
    assert!(page.contains("| `image` | see below |"), "{page}");
    // The file's header, above a blank line, documents nothing; list items are not keys.
    assert!(!page.contains("header"), "{page}");
    assert!(!page.contains("`image.allowed.key`"), "{page}");
    assert!(!page.contains("`key`"), "{page}");
}

#[test]
fn a_values_file_that_is_not_yaml_is_refused_naming_its_line() {
    let error = chart_values_page("a: 1\nnot a key\n").unwrap_err();
    assert!(error.contains("values.yaml"), "{error}");
    assert!(error.contains("line 2"), "{error}");
}

#[test]
fn the_command_line_page_lists_each_visible_command_and_flag_with_default_values_and_env() {
    let command = Command::new("membench")
        .about("Top.")
        .subcommand(
            Command::new("load")
                .about("Load a workload.")
                .arg(
                    Arg::new("addr")
                        .long("addr")
                        .help("Server address.")
                        .default_value("127.0.0.1:6379")
                        .env("MEMBENCH_ADDR"),
                )
                .arg(
                    Arg::new("workload")
                        .long("workload")
                        .value_parser(["strings", "records"])
                        .help("Which workload | kind."),
                )
                .arg(
                    Arg::new("flush")
                        .long("flush")
                        .action(ArgAction::SetTrue)
                        .help("Empty it first."),
                ),
        )
        .subcommand(Command::new("secret").hide(true).about("Not for users."));
    let page = command_line_page(&command);
    assert!(
        page.contains("## `membench load`\n\nLoad a workload."),
        "{page}"
    );
    assert!(
        page.contains(
            "| `--addr <ADDR>` | `127.0.0.1:6379` | - | `MEMBENCH_ADDR` | Server address. |"
        ),
        "{page}"
    );
    assert!(
        page.contains(
            "| `--workload <WORKLOAD>` | - | `strings`, `records` | - | Which workload \\| kind. |"
        ),
        "{page}"
    );
    assert!(
        page.contains("| `--flush` | - | - | - | Empty it first. |"),
        "{page}"
    );
    assert!(page.contains("[`membench load`](#membench-load)"), "{page}");
    assert!(!page.contains("secret"), "{page}");
    assert!(!page.contains("| `-h, --help"), "{page}");
}

#[test]
fn an_anchor_is_the_one_mdbook_gives_the_heading() {
    assert_eq!(anchor("membench load"), "membench-load");
    assert_eq!(anchor("spec.engines[].version"), "specenginesversion");
}

#[test]
fn the_api_page_gives_a_fields_type_default_validation_and_description() {
    let page = api_page();
    // repetitions: an integer with a default and a minimum, documented in spec.rs.
    let section = page
        .split("### `spec.repetitions`\n\n")
        .nth(1)
        .expect("the page has spec.repetitions");
    let facts = section.lines().next().unwrap();
    assert!(facts.starts_with("**integer"), "{facts}");
    assert!(facts.contains("default `"), "{facts}");
    assert!(facts.contains("at least 1"), "{facts}");
    // Nested fields of a list are under `[]`, and the status is there too.
    assert!(
        page.contains("### `spec.engines[].version`"),
        "missing spec.engines[].version"
    );
    assert!(
        page.contains("### `status.engines[].modules`"),
        "missing status.engines[].modules"
    );
}

#[test]
fn the_metrics_page_has_a_row_per_metric_with_its_labels() {
    let page = metrics_page(&[MetricDescription {
        name: "membench_x_bytes".into(),
        kind: "gauge",
        help: "The x of <name>.".into(),
        labels: vec!["namespace".into(), "benchmark".into()],
    }]);
    assert!(
        page.contains(
            "| `membench_x_bytes` | gauge | `namespace`, `benchmark` | The x of &lt;name>. |"
        ),
        "{page}"
    );
}

#[test]
fn the_registry_describes_every_metric_it_can_expose_even_without_a_series() {
    let descriptions = crate::metrics::Metrics::new().descriptions();
    let errors = descriptions
        .iter()
        .find(|d| d.name == "membench_reconciliation_errors_total")
        .expect("the errors counter is described before any error");
    assert_eq!(errors.kind, "counter");
    assert_eq!(errors.labels, ["category"]);
    assert!(
        descriptions
            .iter()
            .any(|d| d.name == "membench_reconcile_duration_seconds" && d.kind == "histogram")
    );
}

#[test]
fn the_exit_codes_page_has_a_row_per_code_with_its_meaning() {
    let page = exit_codes_page();
    for status in crate::error::ExitStatus::ALL {
        assert!(
            page.contains(&format!("\n| {} | ", status.code())),
            "no row for {status:?}: {page}"
        );
    }
    assert!(page.contains("| 2 | Bad input: a flag, a spec,"), "{page}");
}

#[test]
fn every_condition_reason_has_an_entry_saying_what_it_means_linked_from_the_overview() {
    let page = status_page();
    for reason in crate::crd::ConditionReason::KNOWN {
        let heading = format!("### `{}`\n\n", reason.as_str());
        let entry = page
            .split(&heading)
            .nth(1)
            .unwrap_or_else(|| panic!("no entry for {reason}"));
        let meaning = entry.split("\n\n").next().unwrap();
        // A reason declared without a doc comment would have an empty entry.
        assert!(
            meaning.split_whitespace().count() >= 5,
            "{reason} has no meaning: {meaning:?}"
        );
        assert_eq!(reason_anchor(reason), reason.as_str().to_lowercase());
    }
    assert!(
        page.contains("[`WaitingForNode`](#waitingfornode)"),
        "{page}"
    );
}

#[test]
fn the_result_json_page_lists_nested_fields_and_the_workloads_kinds() {
    let page = result_json_page();
    assert!(
        page.contains("- `engines[].repetitions[].used_memory` (integer)"),
        "{page}"
    );
    assert!(
        page.contains("- `engines[].summary.bytes_per_item.median` (number)"),
        "{page}"
    );
    let kind = page
        .lines()
        .find(|l| l.starts_with("- `engines[].workload.kind` ("))
        .expect("a row for the workload's kind");
    for word in ["sorted-set", "strings", "records", "profile", "rdb"] {
        assert!(kind.contains(&format!("`\"{word}\"`")), "{kind}");
    }
    // A variant's own field says which kind it belongs to.
    assert!(
        page.contains("- `engines[].workload.members` (integer, kind `sorted-set`)"),
        "{page}"
    );
    assert!(
        page.contains("- `engines[].error.category` (string): The bounded category of the failure"),
        "{page}"
    );
    assert!(
        page.contains(
            "the condition reason a client's error becomes. Known words: `InvalidSpec`, "
        ),
        "{page}"
    );
}

#[test]
fn the_result_schema_closes_every_object_but_a_flattened_enums_variants() {
    let schema = result_schema();
    let defs = schema["$defs"].as_object().unwrap();
    assert_eq!(schema["unevaluatedProperties"], false);
    assert_eq!(defs["RepetitionResult"]["unevaluatedProperties"], false);
    assert_eq!(defs["WorkloadReport"]["unevaluatedProperties"], false);
    // The profile workload's fields come in through the report's `oneOf`: closed there.
    assert!(
        defs["ProfileWorkload"]
            .get("unevaluatedProperties")
            .is_none()
    );
}
