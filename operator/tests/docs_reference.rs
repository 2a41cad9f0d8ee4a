//! The book's generated reference pages (docs/src/reference/) are what the code generates now:
//! a page edited by hand, or code changed without its page, fails here with the command that
//! writes the page again.

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
    let path = format!("docs/src/reference/{page}.md");
    let committed = std::fs::read_to_string(repo_root().join(&path))
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
