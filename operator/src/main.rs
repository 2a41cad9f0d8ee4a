//! The `membench` command line: a thin layer over the library.

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use membench::error::ExitStatus;

mod cli;

use cli::{
    CapacityArgs, CompletionsArgs, EnginesArgs, LoadArgs, OperatorArgs, ProfileArgs,
    ReferenceDocsArgs, ReportArgs, RunArgs, run_capacity, run_completions, run_engines, run_load,
    run_local, run_operator, run_profile, run_reference_docs, run_report,
};

#[derive(Parser)]
#[command(
    name = "membench",
    version,
    about = "Measures how much memory Redis, Valkey and Dragonfly need for the same data",
    after_help = ExitStatus::help_text()
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the MemoryBenchmark CustomResourceDefinition as YAML.
    Crd,
    /// Load a workload into a running engine and measure its memory.
    Load(Box<LoadArgs>),
    /// Read the shape of a live server's keyspace (types, sizes, key-name templates, TTLs;
    /// never a name or value) and print it as a profile, which `load --workload profile`
    /// rebuilds on any engine at any scale. Read-only, rate-limited and time-bounded.
    Profile(ProfileArgs),
    /// Run a MemoryBenchmark spec locally: start each engine as a local process, one at a
    /// time, measure it, stop it, and compare.
    Run(RunArgs),
    /// Run the Kubernetes operator: measure each MemoryBenchmark in the cluster on a node of
    /// its instance type, one engine at a time, with the results in its status.
    Operator(Box<OperatorArgs>),
    /// Print the comparison table of finished MemoryBenchmarks in the cluster.
    Report(ReportArgs),
    /// From a saved result (`membench run --result-file`), without measuring again: each
    /// engine's projected memory at --items, the memory a node needs for it, the smallest
    /// instance type of each family that holds it and, with --prices, what it costs a month.
    Capacity(CapacityArgs),
    /// List the engine store: every build `membench run` can start (hack/install-engines.sh
    /// installs them).
    Engines(EnginesArgs),
    /// Print a completion script for a shell (bash, zsh or fish).
    Completions(CompletionsArgs),
    /// Print a generated reference page of the book (docs/src/reference/PAGE.md), or check the
    /// docs' command lines against this command line. For the docs' own tests: hidden.
    #[command(hide = true)]
    ReferenceDocs(ReferenceDocsArgs),
}

/// What the program is called, for its help and usage: `kubectl membench` when it is installed
/// as the kubectl plugin `kubectl-membench` (kubectl runs plugins by that file name).
fn program_name() -> &'static str {
    let invoked = std::env::args_os().next().unwrap_or_default();
    let file_name = std::path::Path::new(&invoked)
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    if file_name == cli::KUBECTL_PLUGIN {
        "kubectl membench"
    } else {
        "membench"
    }
}

/// The command line as a user meets it, called `name`.
fn membench_command(name: &'static str) -> clap::Command {
    // The commands that measure or read results exit with these codes too.
    ["load", "run", "report", "capacity", "profile"]
        .into_iter()
        .fold(Cli::command().bin_name(name), |command, sub| {
            command.mut_subcommand(sub, |c| c.after_help(ExitStatus::help_text()))
        })
}

fn main() -> ExitCode {
    let name = program_name();
    let command = membench_command(name);
    let cli = match Cli::from_arg_matches(&command.get_matches()) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    match cli.command {
        Command::Crd => {
            print!("{}", membench::crd_yaml());
            ExitCode::SUCCESS
        }
        Command::Load(args) => run_load(*args),
        Command::Profile(args) => run_profile(args),
        Command::Run(args) => run_local(args),
        Command::Operator(args) => run_operator(*args),
        Command::Report(args) => run_report(args),
        Command::Capacity(args) => run_capacity(args),
        Command::Engines(args) => run_engines(args),
        Command::Completions(args) => run_completions(args, Cli::command(), name),
        Command::ReferenceDocs(args) => {
            run_reference_docs(args, membench_command("membench").name("membench"))
        }
    }
}
