//! `membench load`: one workload into one running engine, measured, as a run plan
//! (`client::measurement::plan`) says: the plan its setting flags make (`load_flags`), or one given whole
//! (`--plan FILE`, or `$MEMBENCH_PLAN` in a client pod).

use membench::error::ExitStatus;
use std::process::ExitCode;

use clap::Args;
use membench::client::connection::engine::EngineAddress;
use membench::client::measurement::measure::{
    BenchmarkReport, LoadOptions, measure_shards_journaled,
};
use membench::client::measurement::plan::{PLAN_ENV, RunPlan};
use membench::client::pod_io::progress::ProgressReporter;
use membench::client::pod_io::result::ClientResult;
use membench::client::pod_io::stop::{
    Journal, ResultFile, STOP_DEADLINE, exit_on_signals, stop_on_signals, write_journal_and_exit,
};
use membench::client::workloads::rdb_load::FetchedFiles;
use membench::client::workloads::workload::Workload;
use membench::error::{BenchError, ErrorCategory};
use membench::report::table::{ComparisonRow, OutputFormat, comparison_table, repetitions_table};

use super::load_flags::{SettingFlags, read_profile};
use super::{StabilityArgs, usage_error};

/// The groups of setting flags, which a given plan excludes: clap names the group of a
/// flattened struct after it, and fills it only for a struct that flattens none itself.
const SETTING_GROUPS: [&str; 2] = ["SettingFlags", "StabilityArgs"];

#[derive(Args)]
pub struct LoadArgs {
    /// The engine's address, HOST:PORT. Given 2 to 16 times, the shards of a cluster, shard i
    /// at the i-th: cluster-mode nodes that own no slots, which membench joins (CLUSTER MEET,
    /// the 16384 slots split evenly) before the first baseline, or a cluster those nodes
    /// already form; the load goes over one connection per shard, and the figures are the sums
    /// over the shards.
    #[arg(long, required = true, value_name = "HOST:PORT")]
    addr: Vec<String>,
    /// The settings of the run: the plan they make, unless --plan gives one.
    #[command(flatten)]
    settings: SettingFlags,
    /// Leave the benchmark's keys in the server when it ends. Without it, membench flushes what
    /// it wrote, so the server is left as empty as it found it.
    #[arg(long)]
    keep_data: bool,
    /// After each repetition's readings (and its snapshot), make the server at HOST:PORT, an
    /// empty engine of the same kind (reached with --password too), a replica of --addr
    /// (REPLICAOF, with its masterauth set to --password when one is given) while overwriting loaded keys at --replica-writes-per-sec,
    /// until it is in sync (INFO replication), then measure: the primary's process tree's peak
    /// when it runs on this machine and the copy-on-write it reports, the replica's memory and
    /// keys (verified against the primary's), the sync's duration and the writes' latency
    /// (strings, records; one --addr). The replica is then detached (REPLICAOF NO ONE) and
    /// emptied (FLUSHALL); a replica that holds keys is refused. It must be able to reach the
    /// primary at --addr.
    #[arg(long, value_name = "HOST:PORT")]
    replica: Option<String>,
    /// The engine's password, if it requires one.
    #[arg(long, env = "MEMBENCH_PASSWORD", hide_env_values = true)]
    password: Option<String>,
    /// profile: the profile to rebuild (YAML or JSON, as `membench profile` prints it).
    #[arg(long, value_name = "FILE")]
    profile: Option<std::path::PathBuf>,
    /// How to print the results.
    #[arg(long, value_enum, default_value = "table")]
    output: OutputFormat,
    /// Also write a compact result (under 4 KB, even at 100 repetitions) to this file. Client
    /// pods pass their container's termination message path, which is how the operator reads
    /// their results.
    #[arg(long, value_name = "PATH")]
    result_file: Option<std::path::PathBuf>,
    /// Serve where the load stands over HTTP on this port (client pods: the operator reads it
    /// for the benchmark's progress).
    #[arg(long, value_name = "PORT")]
    progress_port: Option<u16>,
    /// After a run that finished every repetition, keep serving its whole result beside the
    /// progress for up to this many seconds, until SIGTERM (client pods: the operator takes
    /// the result from there, then deletes the pod). Only when the progress was read during
    /// the run; 0 leaves at once. The result file is written first either way.
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    serve_result_seconds: u64,
    /// At each peak phase's start and end, wait (at most 60 s) for the reader of the progress
    /// (the operator) to answer with the engine container's memory as the kubelet read it,
    /// when the engine's processes are not on this machine (client pods on a real node). Needs
    /// --progress-port.
    #[arg(long, requires = "progress_port")]
    container_memory_marks: bool,
    /// The address to serve progress on (client pods: their pod IP, from the downward API).
    #[arg(
        long,
        env = "MEMBENCH_POD_IP",
        default_value = "0.0.0.0",
        value_name = "IP"
    )]
    progress_ip: std::net::IpAddr,
    /// Run this plan (JSON, as `membench run SPEC --print-plan` prints each entry's `plan`)
    /// instead of one made from the setting flags, which may then not be given. A plan of a
    /// newer format than this membench reads is refused (exit 2), naming both.
    #[arg(long, value_name = "FILE", conflicts_with_all = SETTING_GROUPS)]
    plan: Option<std::path::PathBuf>,
    /// The plan itself, as JSON (client pods: the operator puts their engine entry's plan in
    /// the environment).
    #[arg(
        long,
        value_name = "JSON",
        env = PLAN_ENV,
        hide_env_values = true,
        conflicts_with_all = SETTING_GROUPS,
        conflicts_with = "plan"
    )]
    plan_json: Option<String>,
    #[command(flatten)]
    stability: StabilityArgs,
}

/// Why `membench load` does not start: flags that do not go together (a usage message), or a
/// plan it cannot run, which its result file reports too.
pub(super) enum Refusal {
    Usage(String),
    Plan(BenchError),
}

impl LoadArgs {
    /// The plan to run and its workload: the plan given (`--plan`, `--plan-json`), else the
    /// one the setting flags make.
    pub(super) fn plan(&self) -> Result<(RunPlan, Workload), Refusal> {
        let text = match (&self.plan, &self.plan_json) {
            (None, None) => {
                return self
                    .settings
                    .plan(self.profile.as_deref(), self.stability.thresholds())
                    .map_err(Refusal::Usage);
            }
            (Some(path), _) => std::fs::read_to_string(path).map_err(|e| {
                Refusal::Usage(format!("cannot read --plan {}: {e}", path.display()))
            })?,
            (None, Some(json)) => json.clone(),
        };
        let plan = RunPlan::from_json(&text).map_err(Refusal::Plan)?;
        let profile = read_profile(self.profile.as_deref()).map_err(Refusal::Usage)?;
        let workload = plan.workload.workload(profile).map_err(Refusal::Plan)?;
        Ok((plan, workload))
    }
}

pub fn run_load(args: LoadArgs) -> ExitCode {
    // An RDB file at a URL is fetched here, where the run is.
    // The fetched copy is removed when `_files` drops, as the command ends.
    let planned = args.plan().and_then(|(plan, workload)| {
        // While it is fetched, and until the measurement's own handler is in place (below),
        // SIGINT and SIGTERM end the command at once, removing the copy: nothing is measured.
        let fetching = matches!(&workload, Workload::Rdb(load) if load.url.is_some())
            .then(|| {
                exit_on_signals("fetching the workload's file")
                    .inspect_err(|e| {
                        eprintln!("warning: cannot handle SIGINT and SIGTERM ({e}); a stopped download would leave its partial copy in TMPDIR");
                    })
                    .ok()
            })
            .flatten();
        let mut files = FetchedFiles::default();
        let workload = workload.fetched(&mut files).map_err(Refusal::Plan)?;
        Ok((plan, workload, files, fetching))
    });
    let (plan, workload, _files, before_measuring) = match planned {
        Ok(planned) => planned,
        Err(Refusal::Usage(message)) => return usage_error(&message),
        Err(Refusal::Plan(e)) => {
            // A client pod reports it through its result, as the benchmark's condition.
            if let Some(path) = &args.result_file {
                let refused = ClientResult::refused(&e);
                if let Err(write) = std::fs::write(path, refused.to_message()) {
                    eprintln!(
                        "error: cannot write the result to {}: {write}",
                        path.display()
                    );
                }
            }
            return usage_error(&e.to_string());
        }
    };
    let mut options = LoadOptions {
        settings: plan.settings.clone(),
        ..LoadOptions::default()
    };
    let addresses = match args
        .addr
        .iter()
        .map(|addr| EngineAddress::parse(addr, args.password.clone()))
        .collect::<Result<Vec<_>, _>>()
        .and_then(|addresses| {
            membench::client::connection::shards::check_shard_count(addresses.len())?;
            membench::client::connection::shards::check_distinct(&addresses)?;
            Ok(addresses)
        }) {
        Ok(a) => a,
        Err(e) => return usage_error(&e.to_string()),
    };
    match (&args.replica, options.settings.replica) {
        (None, None) => {}
        (Some(_), None) => {
            return usage_error(
                "--replica applies only with --replica-writes-per-sec N (or a plan whose settings.replica is set): add it, or remove --replica",
            );
        }
        (None, Some(_)) => {
            return usage_error(
                "the plan asks for a replica's sync (settings.replica): give --replica HOST:PORT, an empty engine of the same kind that can reach the primary",
            );
        }
        (Some(replica), Some(rate)) => {
            let replica = EngineAddress::parse(replica, args.password.clone())
                .map_err(|_| BenchError::InvalidArgument {
                    field: "--replica".into(),
                    message: format!("'{replica}' is not HOST:PORT (for example 127.0.0.1:6380)"),
                })
                .map(|address| rate.at(address))
                .and_then(|replica| {
                    replica
                        .check_before_writes(
                            &addresses,
                            &workload,
                            options.settings.connect_timeout,
                            "--replica",
                            !options.settings.refuse_existing_keys,
                        )
                        .map(|note| {
                            if let Some(note) = note {
                                eprintln!("warning: {note}");
                            }
                            replica
                        })
                });
            match replica {
                Ok(replica) => options.replica_address = Some(replica.address),
                Err(e) => return usage_error(&e.to_string()),
            }
        }
    }
    let target = match addresses.as_slice() {
        [only] => only.to_string(),
        shards => format!(
            "{} shards ({})",
            shards.len(),
            shards
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    // SIGINT and SIGTERM (Ctrl-C, `timeout`, the pod being deleted) end the run with what it
    // measured, printed and written below; a run that cannot end in time has its journal
    // written by the handler.
    let result_file = std::sync::Arc::new(ResultFile::new(args.result_file.clone()));
    let output = args.output;
    // The report is printed once: by the run that returned, or by the deadline after a stop.
    let printed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let print_once = {
        let printed = printed.clone();
        move |report: &BenchmarkReport| {
            if !printed.swap(true, std::sync::atomic::Ordering::SeqCst) {
                print_report(report, output);
            }
        }
    };
    let journal = Journal::new(BenchmarkReport::nothing_measured(&workload, &options));
    if let Err(e) = stop_on_signals(
        options.stop.clone(),
        STOP_DEADLINE,
        write_journal_and_exit(
            journal.clone(),
            result_file.clone(),
            STOP_DEADLINE,
            print_once.clone(),
        ),
    ) {
        eprintln!(
            "warning: cannot handle SIGINT and SIGTERM ({e}); a stopped run would leave no result"
        );
    }
    drop(before_measuring);
    let mut progress = ProgressReporter::new(&format!("{} at {target}", workload.kind()));
    let endpoint = std::sync::Arc::new(
        membench::client::pod_io::progress_endpoint::ProgressEndpoint::default(),
    );
    if args.container_memory_marks {
        options.container = Some(endpoint.clone());
    }
    if let Some(port) = args.progress_port {
        let at = std::net::SocketAddr::new(args.progress_ip, port);
        // Progress is a convenience: a load without it measures the same.
        if let Err(e) = endpoint.serve(at) {
            eprintln!("warning: cannot serve progress on {at}: {e}");
        }
    }
    let report = measure_shards_journaled(
        &addresses,
        &workload,
        &options,
        &mut |p| {
            journal.progress(p.commands_done);
            endpoint.update(&p);
            progress.update(p)
        },
        &mut |r| {
            journal.record(r);
            endpoint.set_result(r, false);
        },
    );
    progress.finish();
    let refused = report.error.as_ref().is_some_and(|e| {
        // A server that holds keys, or a setting the engine cannot do (a defrag its
        // allocator lacks), refused before any write.
        e.category == ErrorCategory::ServerNotEmpty
            || (e.category == ErrorCategory::InvalidSpec
                && report.repetitions.is_empty()
                && report.failed_repetition.is_none())
    });
    if !args.keep_data && !refused {
        for address in &addresses {
            flush_what_was_written(address, &report);
        }
    }
    for warning in &report.warnings {
        eprintln!("warning: {warning}");
    }
    if let Err(e) = result_file.write(&report) {
        let path = args
            .result_file
            .as_deref()
            .unwrap_or(std::path::Path::new(""));
        eprintln!("error: cannot write the result to {}: {e}", path.display());
        return ExitStatus::Failed.into();
    }
    print_once(&report);
    if args.progress_port.is_some() && report.error.is_none() {
        endpoint.set_result(&report, true);
        let wait = std::time::Duration::from_secs(args.serve_result_seconds);
        if endpoint.linger(&options.stop, wait) && !options.stop.requested() {
            eprintln!(
                "warning: nobody took the whole result within --serve-result-seconds {}; the result file holds it (fitted)",
                args.serve_result_seconds
            );
        }
    }
    match &report.error {
        Some(e) => {
            eprintln!("error: {}", e.message);
            match options.stop.cause() {
                Some(cause) => ExitCode::from(cause.exit_code()),
                None if refused => ExitStatus::BadInput.into(),
                None => ExitStatus::Failed.into(),
            }
        }
        None => ExitCode::SUCCESS,
    }
}

/// Prints what was measured as `format` asks: the finished run's report, or the journal of a
/// stopped one that could not return.
fn print_report(report: &BenchmarkReport, format: OutputFormat) {
    match format {
        OutputFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(report).expect("reports serialize")
        ),
        // Nothing measured: the error says it all (as below); no header over no rows.
        OutputFormat::Csv if report.repetitions.is_empty() => {}
        // The same table as `membench run`'s, without a title: no benchmark, one engine.
        OutputFormat::Csv => {
            let row = ComparisonRow::from_report(report, None);
            let labels = membench::report::csv::BenchmarkLabels::default();
            let rows = membench::report::csv::rows_of_report(&labels, report, &row);
            print!(
                "{}{}",
                membench::report::csv::header(),
                membench::report::csv::lines(rows)
            );
        }
        // Nothing measured (an engine that could not be reached, a server refused): the error
        // says it all, and a row of dashes would say nothing.
        format => {
            if !report.repetitions.is_empty() {
                let modules = membench::crd::describe_modules(report.engine.modules.as_deref());
                println!(
                    "{} on {} {} ({}, modules: {}, {}), pipeline {}\n",
                    report.workload.description,
                    report.engine.name,
                    report.engine.version,
                    report.engine.allocator_label(),
                    if modules.is_empty() {
                        "not reported"
                    } else {
                        &modules
                    },
                    report.engine.arch,
                    report.pipeline
                );
                if format == OutputFormat::Table {
                    println!("{}", repetitions_table(report).render(format));
                    for figures in membench::client::phases::FIGURES {
                        if let Some((heading, table)) = figures.table(report) {
                            println!("{heading}:\n{}", table.to_text());
                        }
                    }
                    if let Some(growth) = membench::report::table::growth_table(report) {
                        println!(
                            "used_memory during the load (repetition 1):\n{}",
                            growth.to_text()
                        );
                    }
                }
                let rows = vec![ComparisonRow::from_report(report, None)];
                print!("{}", comparison_table(&rows).render(format));
                for (heading, table) in
                    membench::report::shards::shard_tables(std::slice::from_ref(report))
                {
                    println!("\n{heading}:\n{}", table.render(format));
                }
            }
        }
    }
}

/// Empties the server of the benchmark's keys at the end (it held nothing else, or --flush
/// emptied it), unless the load never reached it.
fn flush_what_was_written(address: &EngineAddress, report: &BenchmarkReport) {
    if report.engine.version.is_empty() {
        return;
    }
    let flushed =
        membench::client::connection::engine::ControlConnection::open(address, STOP_DEADLINE)
            .and_then(|mut control| control.flush_all());
    if let Err(e) = flushed {
        eprintln!(
            "warning: cannot flush the benchmark's keys from {address} ({e}); FLUSHALL there removes them"
        );
    }
}
