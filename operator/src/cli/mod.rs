//! The commands of the `membench` command line, one module each (its flags and what it
//! runs), and what they share. The top of the layout: it may use every part of the library
//! (docs/src/contributing/architecture.md).

use membench::error::ExitStatus;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use membench::report::table::OutputFormat;
use membench::stats::StabilityThresholds;

mod capacity;
mod cluster;
mod completions;
mod engines;
mod load;
mod load_flags;
mod operator;
mod profile;
mod reference_docs;
mod report;
mod run;

pub use capacity::{CapacityArgs, run_capacity};
pub use cluster::KUBECTL_PLUGIN;
pub use completions::{CompletionsArgs, run_completions};
pub use engines::{EnginesArgs, run_engines};
pub use load::{LoadArgs, run_load};
pub use operator::{OperatorArgs, run_operator};
pub use profile::{ProfileArgs, run_profile};
pub use reference_docs::{ReferenceDocsArgs, run_reference_docs};
pub use report::{ReportArgs, run_report};
pub use run::{RunArgs, run_local};

/// How `run` and `report` print their comparison: a text format, or one self-contained HTML
/// page with the charts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ComparisonOutput {
    /// An aligned table for a terminal.
    Table,
    Json,
    Markdown,
    Csv,
    /// One page (no network needed): bytes per item per engine as a bar chart with the
    /// published figures marked, the growth curve, the capacity chart (with `spec.capacity`), and
    /// the table.
    Html,
}

impl ComparisonOutput {
    /// The text format; `None` for the HTML page.
    fn text(self) -> Option<OutputFormat> {
        match self {
            ComparisonOutput::Table => Some(OutputFormat::Table),
            ComparisonOutput::Json => Some(OutputFormat::Json),
            ComparisonOutput::Markdown => Some(OutputFormat::Markdown),
            ComparisonOutput::Csv => Some(OutputFormat::Csv),
            ComparisonOutput::Html => None,
        }
    }
}

/// When repetitions count as disagreeing, for the commands that summarize them.
#[derive(Args, Clone, Debug)]
struct StabilityArgs {
    /// Flag results as unstable when bytes per item vary more than this (coefficient of
    /// variation).
    #[arg(long, default_value_t = StabilityThresholds::default().bytes_per_item_cv)]
    max_memory_cv: f64,
    /// Flag results as unstable when items/s vary more than this (coefficient of variation).
    #[arg(long, default_value_t = StabilityThresholds::default().rate_cv)]
    max_rate_cv: f64,
}

impl StabilityArgs {
    fn thresholds(&self) -> StabilityThresholds {
        StabilityThresholds {
            bytes_per_item_cv: self.max_memory_cv,
            rate_cv: self.max_rate_cv,
        }
    }
}

fn usage_error(message: &str) -> ExitCode {
    eprintln!("error: {message}");
    ExitStatus::BadInput.into()
}
