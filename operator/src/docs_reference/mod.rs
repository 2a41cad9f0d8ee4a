//! The reference pages of the book (docs/src/reference/) that are generated from the code, so
//! that they cannot say something the code does not: the command line from clap's command
//! tree, the MemoryBenchmark API from the CRD schema, the metrics from the registry, the
//! chart's values from values.yaml and its comments, the result JSON's schema from the result
//! types, the exit codes from the table the binary exits with, and the condition reasons from
//! their declarations. Each page is a pure function of its source; `membench reference-docs
//! PAGE` prints it, and `operator/tests/docs_reference.rs` fails when a committed page differs
//! from what its function gives.
//!
//! It sits above `crd`, `metrics`, `report`, `client` and `error`, whose types it reads, and
//! below the command line, which hands it clap's command
//! (docs/src/contributing/architecture.md, `layout_tests.rs`).

mod api;
mod chart_values;
mod command_line;
mod exit_codes;
mod metrics;
mod result_json;
mod status;
#[cfg(test)]
mod tests;

pub use api::api_page;
pub use chart_values::chart_values_page;
pub use command_line::command_line_page;
pub use exit_codes::exit_codes_page;
pub use metrics::metrics_page;
pub use result_json::{RESULT_SCHEMA_PATH, result_json_page, result_schema, result_schema_text};
pub use status::{anchor as reason_anchor, status_page};

/// The generated pages, by the name `membench reference-docs` takes.
pub const PAGES: [&str; 7] = [
    "command-line",
    "api",
    "metrics",
    "chart-values",
    "result-json",
    "exit-codes",
    "status",
];

/// The opening of a generated page: where it comes from and the command that writes it, so that
/// a reader who edits it by hand learns why the suite fails.
fn header(page: &str, title: &str, source: &str) -> String {
    format!(
        "<!-- Generated from {source} by `membench reference-docs {page} > docs/src/reference/{page}.md`,\n     run at the repository's root. Do not edit: operator/tests/docs_reference.rs fails when\n     this page differs from what the code generates. Change the code, then run that command. -->\n\n# {title}\n\n"
    )
}

/// `text` on one line, safe inside a Markdown table cell: line breaks become spaces and a `|`
/// is escaped.
fn table_cell(text: &str) -> String {
    escape_html(&text.split_whitespace().collect::<Vec<_>>().join(" ")).replace('|', "\\|")
}

/// Doc text as Markdown paragraphs: blank lines stay breaks, single line breaks become spaces
/// (the comment's own wrapping).
fn paragraphs(text: &str) -> String {
    text.split("\n\n")
        .map(|p| escape_html(&p.split_whitespace().collect::<Vec<_>>().join(" ")))
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// `<` outside inline code as `&lt;`: doc text says `<release>-<chart>` or `<name>`, which
/// Markdown would otherwise pass on to the browser as an HTML tag and show as nothing.
fn escape_html(text: &str) -> String {
    text.split('`')
        .enumerate()
        .map(|(i, part)| {
            if i % 2 == 0 {
                part.replace('<', "&lt;")
            } else {
                part.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("`")
}

/// `text` as inline code, with a fence long enough for the backticks it holds.
fn code(text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest + 1);
    if text.starts_with('`') || text.ends_with('`') {
        format!("{fence} {text} {fence}")
    } else {
        format!("{fence}{text}{fence}")
    }
}
