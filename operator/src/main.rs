//! The `membench` command line: a thin layer over the library.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cli;

use cli::{
    EnginesArgs, LoadArgs, OperatorArgs, ReportArgs, RunArgs, run_engines, run_load, run_local,
    run_operator, run_report,
};

#[derive(Parser)]
#[command(
    name = "membench",
    version,
    about = "Measures how much memory Redis, Valkey and Dragonfly need for the same data"
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
    Load(LoadArgs),
    /// Run a MemoryBenchmark spec locally: start each engine as a local process, one at a
    /// time, measure it, stop it, and compare.
    Run(RunArgs),
    /// Run the Kubernetes operator: measure each MemoryBenchmark in the cluster on a node of
    /// its instance type, one engine at a time, with the results in its status.
    Operator(OperatorArgs),
    /// Print the comparison table of finished MemoryBenchmarks in the cluster.
    Report(ReportArgs),
    /// List the engine store: every build `membench run` can start (hack/install-engines.sh
    /// installs them).
    Engines(EnginesArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Crd => {
            print!("{}", membench::crd_yaml());
            ExitCode::SUCCESS
        }
        Command::Load(args) => run_load(args),
        Command::Run(args) => run_local(args),
        Command::Operator(args) => run_operator(args),
        Command::Report(args) => run_report(args),
        Command::Engines(args) => run_engines(args),
    }
}
