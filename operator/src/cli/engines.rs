//! `membench engines`: the engine store's builds.

use membench::error::ExitStatus;
use std::process::ExitCode;

use clap::Args;
use membench::report::table::OutputFormat;

#[derive(Args)]
pub struct EnginesArgs {
    /// How to print the list (table, json, markdown or csv).
    #[arg(long, value_enum, default_value = "table")]
    output: OutputFormat,
}

pub fn run_engines(args: EnginesArgs) -> ExitCode {
    use membench_enginestore::EngineStore;
    let store = match EngineStore::open_default() {
        Ok(store) => store,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitStatus::Failed.into();
        }
    };
    if store.builds().is_empty() {
        eprintln!(
            "error: the engine store at {} holds no builds: run hack/install-engines.sh (or set {} to where the store is)",
            store.root().display(),
            membench_enginestore::ROOT_ENV
        );
        return ExitStatus::Failed.into();
    }
    if args.output == OutputFormat::Json {
        let listing = membench::local::engine_store::StoreListing {
            store: store.root(),
            builds: store.builds(),
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&listing).expect("builds serialize")
        );
        return ExitCode::SUCCESS;
    }
    let (table, notes) = membench::local::engine_store::engines_table(&store);
    print!("{}", table.render(args.output));
    if args.output == OutputFormat::Table {
        println!(
            "\n{} builds in {}. A spec picks one by engine and version (`9.1` is any 9.1.x), preferring the official image's allocator, or by `build: <name>`; `allocator: jemalloc` preloads jemalloc into a libc build.",
            store.builds().len(),
            store.root().display()
        );
        for note in notes {
            println!("- {note}");
        }
    }
    ExitCode::SUCCESS
}
