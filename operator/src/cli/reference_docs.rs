//! `membench reference-docs PAGE` (hidden): prints a generated reference page of the book, and
//! `membench reference-docs check-command-lines` tells which command lines of the docs the
//! current command line refuses. Both need clap's command of this binary, which only the binary
//! has; the pages themselves are the library's (`membench::docs_reference`).

use membench::error::ExitStatus;
use std::io::Read;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use membench::docs_reference;
use membench::metrics::Metrics;

#[derive(Args)]
pub struct ReferenceDocsArgs {
    /// The page to print, or `check-command-lines`: read a JSON list of argument lists on
    /// stdin and print, for each, null when it parses or clap's error when it does not.
    #[arg(value_enum)]
    page: ReferencePage,
    /// The chart values file the chart-values page is read from.
    #[arg(long, default_value = "charts/membench/values.yaml")]
    values: std::path::PathBuf,
}

#[derive(Clone, Copy, ValueEnum)]
enum ReferencePage {
    CommandLine,
    Api,
    Metrics,
    ChartValues,
    ResultJson,
    /// The raw JSON Schema of the result JSON (docs/src/reference/result.schema.json).
    ResultSchema,
    ExitCodes,
    Status,
    CheckCommandLines,
}

pub fn run_reference_docs(args: ReferenceDocsArgs, command: clap::Command) -> ExitCode {
    let page = match args.page {
        ReferencePage::CommandLine => docs_reference::command_line_page(&command),
        ReferencePage::Api => docs_reference::api_page(),
        ReferencePage::Metrics => docs_reference::metrics_page(&Metrics::new().descriptions()),
        ReferencePage::ChartValues => {
            let text = match std::fs::read_to_string(&args.values) {
                Ok(text) => text,
                Err(e) => {
                    eprintln!(
                        "error: cannot read {}: {e} (run this at the repository's root, or give --values)",
                        args.values.display()
                    );
                    return ExitStatus::BadInput.into();
                }
            };
            match docs_reference::chart_values_page(&text) {
                Ok(page) => page,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitStatus::BadInput.into();
                }
            }
        }
        ReferencePage::ResultJson => docs_reference::result_json_page(),
        ReferencePage::ResultSchema => docs_reference::result_schema_text(),
        ReferencePage::ExitCodes => docs_reference::exit_codes_page(),
        ReferencePage::Status => docs_reference::status_page(),
        ReferencePage::CheckCommandLines => return check_command_lines(command),
    };
    print!("{page}");
    ExitCode::SUCCESS
}

/// Parses each argument list of stdin (a JSON list of lists of strings, each starting with
/// `membench`) with `command`, without running anything.
fn check_command_lines(command: clap::Command) -> ExitCode {
    let mut input = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut input) {
        eprintln!("error: cannot read stdin: {e}");
        return ExitStatus::BadInput.into();
    }
    let lines: Vec<Vec<String>> = match serde_json::from_str(&input) {
        Ok(lines) => lines,
        Err(e) => {
            eprintln!("error: stdin is not a JSON list of argument lists: {e}");
            return ExitStatus::BadInput.into();
        }
    };
    let verdicts: Vec<Option<String>> = lines
        .iter()
        .map(|args| match command.clone().try_get_matches_from(args) {
            Ok(_) => None,
            // `--help` and `--version` are lines a reader may copy too.
            Err(e)
                if matches!(
                    e.kind(),
                    clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
                ) =>
            {
                None
            }
            Err(e) => Some(e.render().to_string()),
        })
        .collect();
    println!(
        "{}",
        serde_json::to_string(&verdicts).expect("JSON always serializes")
    );
    ExitCode::SUCCESS
}
