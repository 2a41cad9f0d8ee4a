//! `membench capacity RESULT.json --items N`: the capacity arithmetic of `membench run` on a
//! saved result, without measuring again.

use membench::error::ExitStatus;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use membench::capacity::recommend::TermDefaults;
use membench::capacity::{
    CapacityPlan, CapacityRequest, EngineMeasurement, Prices, given_limit, plan_reports,
};
use membench::client::measurement::measure::BenchmarkReport;
use membench::crd::InstanceFamily;
use membench::report::capacity::{
    capacity_footer, capacity_heading, capacity_table, recommended_config, recommended_table,
};
use membench::report::table::OutputFormat;

use super::usage_error;

#[derive(Args)]
pub struct CapacityArgs {
    /// A result file of `membench run --result-file` (or its `--output json`), or of
    /// `membench load --output json`.
    result: std::path::PathBuf,
    /// How many items (members, keys or records, as the workload counts them) to plan for.
    #[arg(long)]
    items: u64,
    /// A CSV of `instanceType,hourlyUSD` lines (manifests/examples/prices.example.csv shows the
    /// form); without it no cost is shown.
    #[arg(long, value_name = "FILE")]
    prices: Option<std::path::PathBuf>,
    /// The percent of the engine's memory kept free (ElastiCache's reserved-memory-percent).
    #[arg(long, default_value_t = membench::crd::default_headroom_percent())]
    headroom_percent: u32,
    /// The instance families to look in, comma-separated (r8g, r7g, r7i, r6g, r6i); by default
    /// the family of the result's instance type, or all of them.
    #[arg(long, value_delimiter = ',', value_parser = parse_family)]
    instance_families: Vec<InstanceFamily>,
    #[arg(long, value_enum, default_value = "table")]
    output: CapacityOutput,
    /// The recommended memory limit's terms the result did not measure: the share of the
    /// data's RSS a forking engine copies while it saves, when no snapshot peak was measured.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(0..=100))]
    copy_on_write_percent: u32,
    /// How many times longer than the measured save a deployed save may last, for a forking
    /// engine's copy_on_write term (the pages copied grow with the writes the save lasts
    /// through); 1 takes the measured copy as it was.
    #[arg(long, default_value_t = membench::crd::default_save_length_factor(), value_parser = clap::value_parser!(u32).range(1..=10))]
    save_length_factor: u32,
    /// The engine's repl-backlog-size in bytes (by default the engine's own default).
    #[arg(long, value_name = "BYTES")]
    replication_backlog_bytes: Option<u64>,
    /// Writes buffered for a replica during its full sync, in bytes, when no replica's sync
    /// was measured.
    #[arg(long, value_name = "BYTES", default_value_t = 0)]
    replica_output_buffer_bytes: u64,
    /// Clients' query and reply buffers, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 4 << 20)]
    client_buffers_bytes: u64,
    /// A container memory limit to check, as a Kubernetes quantity (`512Mi`, `2Gi`) or bytes:
    /// refused below what an engine holds with no data (its measured empty RSS, or the least
    /// limit it starts under), else compared with each engine's recommended limit in its notes.
    #[arg(long, value_name = "QUANTITY", value_parser = parse_memory_limit)]
    memory_limit: Option<(String, u64)>,
}

fn parse_memory_limit(quantity: &str) -> Result<(String, u64), String> {
    match membench::validation::parse_memory_quantity(quantity) {
        Some(bytes) if bytes > 0 => Ok((quantity.to_string(), bytes)),
        _ => Err(format!(
            "'{quantity}' is not a memory limit: give a Kubernetes quantity such as 512Mi or 2Gi, or bytes"
        )),
    }
}

impl CapacityArgs {
    fn term_defaults(&self) -> TermDefaults {
        TermDefaults {
            copy_on_write_percent: self.copy_on_write_percent,
            save_length_factor: self.save_length_factor,
            replication_backlog_bytes: self.replication_backlog_bytes,
            replica_output_buffer_bytes: self.replica_output_buffer_bytes,
            client_buffers_bytes: self.client_buffers_bytes,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum CapacityOutput {
    Table,
    Json,
    Markdown,
}

fn parse_family(name: &str) -> Result<InstanceFamily, String> {
    InstanceFamily::parse(name)
}

/// One benchmark of the result file: its name, instance type and engine reports.
struct SavedComparison {
    value: serde_json::Value,
    benchmark: String,
    instance_type: Option<String>,
    reports: Vec<BenchmarkReport>,
}

fn read_comparisons(path: &std::path::Path) -> Result<Vec<SavedComparison>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the result {}: {e}", path.display()))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{} is not JSON: {e}", path.display()))?;
    let values = match value {
        serde_json::Value::Array(values) => values,
        value => vec![value],
    };
    values
        .into_iter()
        .enumerate()
        .map(|(i, value)| {
            let where_ = format!("{} (benchmark {})", path.display(), i + 1);
            // `membench load --output json` prints one engine's report.
            let value = if value.get("engines").is_none() && value.get("repetitions").is_some() {
                serde_json::json!({ "benchmark": "", "engines": [value] })
            } else {
                value
            };
            let engines = value.get("engines").cloned().ok_or_else(|| {
                format!("{where_} has no engines: give a result of membench run --result-file or membench load --output json")
            })?;
            let reports: Vec<BenchmarkReport> = serde_json::from_value(engines)
                .map_err(|e| format!("{where_}: the engines are not membench reports: {e}"))?;
            Ok(SavedComparison {
                benchmark: value["benchmark"].as_str().unwrap_or_default().to_string(),
                instance_type: value["instance_type"].as_str().map(String::from),
                reports,
                value,
            })
        })
        .collect()
}

/// The table, its heading and its notes, in a text format.
pub(super) fn render_plan(plan: &CapacityPlan, item: &str, format: OutputFormat) -> String {
    let footer = capacity_footer(plan);
    let mut text = format!(
        "{}\n\n{}",
        capacity_heading(plan, item),
        capacity_table(plan).render(format)
    );
    if !footer.is_empty() {
        text.push_str(&format!("\n{footer}\n"));
    }
    if plan.engines.iter().any(|e| e.recommended.is_some()) {
        text.push_str(&format!(
            "\nrecommended settings at {} {item}s: maxmemory and the container's memory limit, the sum of its terms\n\n{}\n{}\n",
            plan.items,
            recommended_table(plan).render(format),
            recommended_config(plan)
        ));
    }
    text
}

pub fn run_capacity(args: CapacityArgs) -> ExitCode {
    // The flags are checked before anything is read.
    let flags = CapacityRequest {
        items: args.items,
        headroom_percent: args.headroom_percent,
        families: Vec::new(),
        prices: None,
        notes: Vec::new(),
        defaults: args.term_defaults(),
    };
    if let Err(message) = flags.validate() {
        return usage_error(
            &message
                .replace("capacity items", "--items")
                .replace("capacity headroomPercent", "--headroom-percent"),
        );
    }
    let prices = match args.prices.as_deref().map(Prices::read).transpose() {
        Ok(p) => p,
        Err(message) => return usage_error(&message),
    };
    let comparisons = match read_comparisons(&args.result) {
        Ok(c) => c,
        Err(message) => return usage_error(&message),
    };
    let mut planned = Vec::new();
    for comparison in comparisons {
        let types: Vec<&str> = comparison
            .instance_type
            .as_deref()
            .map(|types| types.split(", ").collect())
            .unwrap_or_default();
        let families = membench::capacity::default_families(&args.instance_families, &types);
        let unknown = membench::capacity::unknown_instance_types_note(
            &args.instance_families,
            &types,
            &families,
        );
        if let Some(note) = &unknown {
            eprintln!("warning: {note}");
        }
        let request = CapacityRequest {
            items: args.items,
            headroom_percent: args.headroom_percent,
            families,
            prices: prices.clone(),
            notes: unknown.into_iter().collect(),
            defaults: args.term_defaults(),
        };
        let plan = plan_reports(&comparison.reports, &request);
        planned.push((comparison, plan));
    }
    if let Some((given, limit)) = &args.memory_limit {
        // Every engine of every benchmark is checked before anything is printed.
        let mut refused = Vec::new();
        for (comparison, plan) in &mut planned {
            check_memory_limit(given, *limit, &comparison.reports, plan, &mut refused);
        }
        if !refused.is_empty() {
            return usage_error(&refused.join("\nerror: "));
        }
    }
    let mut json = Vec::new();
    let mut failed = false;
    for (mut comparison, plan) in planned {
        failed |= !plan.not_projected.is_empty();
        for missing in &plan.not_projected {
            eprintln!("error: {}: not projected: {}", missing.name, missing.reason);
        }
        let item = comparison
            .reports
            .first()
            .map_or("item", |r| r.workload.item.as_str());
        match args.output {
            CapacityOutput::Json => {
                plan.attach_to(&mut comparison.value);
                json.push(comparison.value);
            }
            CapacityOutput::Table => {
                if !comparison.benchmark.is_empty() {
                    println!("{}:", comparison.benchmark);
                }
                println!("{}", render_plan(&plan, item, OutputFormat::Table));
            }
            CapacityOutput::Markdown => {
                if !comparison.benchmark.is_empty() {
                    println!("### {}\n", comparison.benchmark);
                }
                println!("{}", render_plan(&plan, item, OutputFormat::Markdown));
            }
        }
    }
    if args.output == CapacityOutput::Json {
        let value = if json.len() == 1 {
            json.remove(0)
        } else {
            serde_json::Value::Array(json)
        };
        println!("{}", serde_json::to_string_pretty(&value).expect("json"));
    }
    if failed {
        ExitStatus::Failed.into()
    } else {
        ExitCode::SUCCESS
    }
}

/// Checks `limit` against each engine of `reports`: a refusal in `refused` when it is below
/// what the engine holds with no data, else a note of how it compares with the recommended
/// limit.
fn check_memory_limit(
    given: &str,
    limit: u64,
    reports: &[BenchmarkReport],
    plan: &mut CapacityPlan,
    refused: &mut Vec<String>,
) {
    // An engine the plan could not project is named in its not_projected.
    for measurement in reports
        .iter()
        .filter_map(|r| EngineMeasurement::from_report(r).ok())
    {
        let engine = plan.engines.iter_mut().find(|e| e.name == measurement.name);
        let recommended = engine.and_then(|e| e.recommended.as_mut());
        match given_limit::check(given, limit, &measurement, recommended.as_deref()) {
            Ok(()) => {
                if let Some(r) = recommended {
                    let note = given_limit::compared(given, limit, r);
                    r.notes.push(note);
                }
            }
            Err(message) => refused.push(message),
        }
    }
}
