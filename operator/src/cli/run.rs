//! `membench run`: a MemoryBenchmark spec run locally, engine after engine.

use membench::error::ExitStatus;
use std::process::ExitCode;

use clap::Args;
use membench::client::connection::stop_request::StopRequest;
use membench::client::pod_io::progress::ProgressReporter;
use membench::client::pod_io::stop::{STOP_DEADLINE, stop_on_signals};
use membench::report::csv;
use membench::report::table::{ComparisonRow, OutputFormat, comparison_table};

use super::{ComparisonOutput, StabilityArgs, usage_error};

#[derive(Args)]
pub struct RunArgs {
    /// A YAML file with one or more MemoryBenchmarks (separated by `---`).
    spec: std::path::PathBuf,
    /// How to print the comparison (html: one self-contained page with the charts).
    #[arg(long, value_enum, default_value = "table")]
    output: ComparisonOutput,
    /// Run only this entry of the spec, by its name (`engines[].name`, or
    /// `<engine>-<version>`); repeat it for several. Reruns one engine of a long comparison.
    #[arg(long = "engine", value_name = "NAME")]
    engines: Vec<String>,
    /// Also write what was measured to this file, as `--output json` prints it: at the end, and
    /// when the run is stopped (SIGINT, SIGTERM), with the finished repetitions and the
    /// stopped engine's error.category `Stopped`.
    #[arg(long, value_name = "PATH")]
    result_file: Option<std::path::PathBuf>,
    /// Prices for a spec's `capacity`: a CSV of `instanceType,hourlyUSD` lines (a local run
    /// does not read `capacity.pricesConfigMapRef`). Without it no cost is shown.
    #[arg(long, value_name = "FILE")]
    prices: Option<std::path::PathBuf>,
    /// Print each engine entry's run plan and run nothing: a JSON array of `benchmark`,
    /// `engine` and `plan`, the plan being the document that entry's client pod receives in a
    /// cluster (`membench load --plan FILE` runs it against any engine).
    #[arg(long)]
    print_plan: bool,
    #[command(flatten)]
    stability: StabilityArgs,
}

/// Prints every entry's plan (see `--print-plan`).
fn print_plans(
    benchmarks: &[membench::crd::MemoryBenchmark],
    thresholds: membench::stats::StabilityThresholds,
) -> ExitCode {
    let mut entries = Vec::new();
    for benchmark in benchmarks {
        let name = benchmark.metadata.name.clone().unwrap_or_default();
        let plans = match membench::local::runner::run_plans(benchmark, thresholds) {
            Ok(plans) => plans,
            Err(e) => return usage_error(&format!("{name}: {e}")),
        };
        for (engine, plan) in benchmark.spec.engines.iter().zip(plans) {
            entries.push(serde_json::json!({
                "benchmark": name,
                "engine": engine.display_name(),
                "plan": plan,
            }));
        }
    }
    println!(
        "{}",
        serde_json::to_string_pretty(&entries).expect("plans serialize")
    );
    ExitCode::SUCCESS
}

pub fn run_local(args: RunArgs) -> ExitCode {
    let mut benchmarks = match membench::validation::spec_file::read_specs(&args.spec) {
        Ok(b) => b,
        Err(message) => return usage_error(&message),
    };
    if let Err(message) = membench::local::runner::select_engines(&mut benchmarks, &args.engines) {
        return usage_error(&message);
    }
    if let Some(message) = benchmarks
        .iter()
        .find_map(|b| membench::local::runner::refuse_cluster_only(b).err())
    {
        return usage_error(&message);
    }
    if args.print_plan {
        return print_plans(&benchmarks, args.stability.thresholds());
    }
    let prices = match args
        .prices
        .as_deref()
        .map(membench::capacity::Prices::read)
        .transpose()
    {
        Ok(p) => p,
        Err(message) => return usage_error(&message),
    };
    // Every benchmark's capacity request, checked before anything is measured.
    let mut requests = Vec::new();
    for benchmark in &benchmarks {
        let name = benchmark.metadata.name.clone().unwrap_or_default();
        let request = match &benchmark.spec.capacity {
            None => None,
            Some(capacity) => {
                if capacity.prices_config_map_ref.is_some() && prices.is_none() {
                    eprintln!(
                        "note: {name}: spec.capacity.pricesConfigMapRef names a ConfigMap, which a local run does not read: give the prices with --prices FILE"
                    );
                }
                let types = benchmark.spec.instance_types();
                let types: Vec<&str> = types.iter().map(String::as_str).collect();
                match membench::capacity::CapacityRequest::from_spec(
                    capacity,
                    &types,
                    prices.clone(),
                ) {
                    Ok(r) => Some(r),
                    Err(message) => return usage_error(&format!("{name}: spec.{message}")),
                }
            }
        };
        requests.push(request);
    }
    let thresholds = args.stability.thresholds();
    // SIGINT and SIGTERM (Ctrl-C, `timeout`) end the engine under way with what it measured;
    // its engine is stopped and the run goes on to print and write what it has. Should the
    // measurement not return (an engine that stopped answering), its engine is killed.
    let stop = StopRequest::new();
    if let Err(e) = stop_on_signals(stop.clone(), STOP_DEADLINE, |_| {
        membench::local::runner::kill_started_engines()
    }) {
        eprintln!(
            "warning: cannot handle SIGINT and SIGTERM ({e}); a stopped run would leave its engine running"
        );
    }
    let mut failed = false;
    let mut comparisons = Vec::new();
    // Each benchmark's rows, with the published figures, for the JSON.
    let mut published = Vec::new();
    let mut sections = Vec::new();
    // Each benchmark's capacity plan, when its spec asks for one.
    let mut plans = Vec::new();
    // The text tables are printed as each benchmark finishes; JSON and the page at the end.
    let text = args.output.text().filter(|f| *f != OutputFormat::Json);
    // CSV is one table for every benchmark: the header first, then each one's rows as it ends.
    if text == Some(OutputFormat::Csv) {
        print!("{}", csv::header());
    }
    for (benchmark, request) in benchmarks.iter().zip(&requests) {
        let name = benchmark.metadata.name.clone().unwrap_or_default();
        if let Some(auth) = &benchmark.spec.auth {
            let secret = &auth.password_secret_ref;
            eprintln!(
                "note: {name}: spec.auth names the Kubernetes Secret {:?} (key {:?}), which a local run does not read: the local engines require a password made for this run",
                secret.name, secret.key
            );
        }
        for note in membench::local::runner::local_notes(benchmark) {
            eprintln!("note: {name}: {note}");
        }
        // Both callbacks draw on the same bar.
        let progress = std::cell::RefCell::new(ProgressReporter::new(&name));
        let result = membench::local::runner::run_benchmark(
            benchmark,
            thresholds,
            &stop,
            &mut |engine| progress.borrow_mut().relabel(&format!("{name}: {engine}")),
            &mut |p| progress.borrow_mut().update(p),
        );
        progress.borrow().finish();
        let comparison = match result {
            Ok(c) => c,
            Err(e) => {
                eprintln!("error: {name}: {e}");
                failed = true;
                continue;
            }
        };
        for report in &comparison.engines {
            for warning in &report.warnings {
                eprintln!("warning: {}: {warning}", report.name);
            }
            if let Some(e) = &report.error {
                eprintln!("error: {}: {}", report.name, e.message);
                failed = true;
            }
        }

        let mut rows: Vec<ComparisonRow> = comparison
            .engines
            .iter()
            .map(|r| ComparisonRow::from_report(r, None))
            .collect();
        membench::report::table::compute_changes(&mut rows);
        membench::report::table::attach_published(
            &mut rows,
            benchmark.spec.published_table.map(|t| t.table()),
            membench::client::workloads::workload::Workload::from_spec(&benchmark.spec.workload)
                .ok()
                .as_ref(),
        );
        match text {
            Some(OutputFormat::Csv) => {
                let labels = csv::BenchmarkLabels {
                    benchmark: name.clone(),
                    instance_type: comparison.instance_type.clone().unwrap_or_default(),
                    ..Default::default()
                };
                let lines = comparison
                    .engines
                    .iter()
                    .zip(&rows)
                    .flat_map(|(report, row)| csv::rows_of_report(&labels, report, row))
                    .collect();
                print!("{}", csv::lines(lines));
            }
            Some(format) => {
                let title = membench::report::html::local_run_subtitle(benchmark, &comparison);
                match format {
                    OutputFormat::Markdown => println!("### {name}\n\n{title}\n"),
                    _ => println!("{name}: {title}\n"),
                }
                println!("{}", comparison_table(&rows).render(format));
                for (heading, table) in membench::report::shards::shard_tables(&comparison.engines)
                {
                    println!("{heading}:\n{}", table.render(format));
                }
            }
            None => {}
        }
        let plan = request
            .as_ref()
            .map(|r| membench::capacity::plan_reports(&comparison.engines, r));
        if let Some(plan) = &plan {
            for missing in &plan.not_projected {
                eprintln!(
                    "warning: {}: not projected: {}",
                    missing.name, missing.reason
                );
            }
            let item = comparison
                .engines
                .first()
                .map_or("item", |r| r.workload.item.as_str());
            if let Some(format @ (OutputFormat::Table | OutputFormat::Markdown)) = text {
                println!("{}", super::capacity::render_plan(plan, item, format));
            }
        }
        if args.output == ComparisonOutput::Html {
            let mut section = membench::report::html::section_from_local(benchmark, &comparison);
            section.capacity = plan
                .as_ref()
                .map(membench::report::html::CapacityChart::from_plan);
            sections.push(section);
        }
        plans.push(plan);
        published.push(rows);
        comparisons.push(comparison);
        if stop.requested() {
            break;
        }
    }
    if args.output == ComparisonOutput::Html {
        print!(
            "{}",
            membench::report::html::render_page(
                &format!("membench run {}", args.spec.display()),
                &sections
            )
        );
    }
    let json = || {
        // Each engine's report with the published figure the spec's table gives it.
        let mut values: Vec<serde_json::Value> = comparisons
            .iter()
            .map(|c| serde_json::to_value(c).expect("comparisons serialize"))
            .collect();
        for (value, plan) in values.iter_mut().zip(&plans) {
            if let Some(plan) = plan {
                plan.attach_to(value);
            }
        }
        for (value, rows) in values.iter_mut().zip(&published) {
            if let Some(table) = rows.first().and_then(|r| r.published_table) {
                value["published_table"] = table.into();
            }
            for (engine, row) in value["engines"]
                .as_array_mut()
                .into_iter()
                .flatten()
                .zip(rows)
            {
                if let Some(figure) = &row.published {
                    engine["published"] = serde_json::to_value(figure).expect("figures serialize");
                }
            }
        }
        let value = if values.len() == 1 {
            Ok(values.remove(0))
        } else {
            serde_json::to_value(&values)
        };
        serde_json::to_string_pretty(&value.expect("comparisons serialize")).expect("json")
    };
    if args.output == ComparisonOutput::Json {
        println!("{}", json());
    }
    if let Some(path) = &args.result_file
        && let Err(e) = std::fs::write(path, json() + "\n")
    {
        eprintln!("error: cannot write the result to {}: {e}", path.display());
        failed = true;
    }
    if let Some(cause) = stop.cause() {
        let left: Vec<String> = benchmarks
            .iter()
            .flat_map(|b| b.spec.engines.iter().map(move |e| (b, e)))
            .filter(|(b, e)| {
                !comparisons.iter().any(|c| {
                    Some(&c.benchmark) == b.metadata.name.as_ref()
                        && c.engines.iter().any(|r| r.name == e.display_name())
                })
            })
            .map(|(_, e)| e.display_name())
            .collect();
        if !left.is_empty() {
            eprintln!(
                "membench: stopped by {}; not run: {}",
                cause.signal_name(),
                left.join(", ")
            );
        }
        return ExitCode::from(cause.exit_code());
    }
    if failed {
        ExitStatus::Failed.into()
    } else {
        ExitCode::SUCCESS
    }
}
