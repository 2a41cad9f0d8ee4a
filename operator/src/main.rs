//! The `membench` command line: a thin layer over the library.

use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use membench::client_stop::{Journal, ResultFile, STOP_DEADLINE, stop_on_sigterm};
use membench::crd::RecordLayout;
use membench::engine::EngineAddress;
use membench::measure::{BenchmarkReport, LoadOptions, measure_journaled};
use membench::progress::ProgressReporter;
use membench::report::{ComparisonRow, OutputFormat, comparison_table, repetitions_table};
use membench::stats::StabilityThresholds;
use membench::workload::Workload;

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

#[derive(Args)]
struct EnginesArgs {
    /// How to print the list (table, json, markdown or csv).
    #[arg(long, value_enum, default_value = "table")]
    output: OutputFormat,
}

#[derive(Args)]
struct OperatorArgs {
    /// Watch only these namespaces, comma separated (default: every namespace). Namespaced
    /// watches need only Roles in those namespaces.
    #[arg(long, env = "MEMBENCH_WATCH_NAMESPACE", value_delimiter = ',')]
    namespace: Vec<String>,
    /// Create a NetworkPolicy per benchmark that closes its pods to the rest of the cluster.
    #[arg(long, env = "MEMBENCH_BENCHMARK_NETWORK_POLICIES", default_value_t = true, action = clap::ArgAction::Set)]
    benchmark_network_policies: bool,
    /// The operator's own namespace, so that benchmark NetworkPolicies let in only its pods
    /// (the chart sets it from the downward API; outside a cluster any namespace matches).
    #[arg(long, env = "MEMBENCH_NAMESPACE")]
    operator_namespace: Option<String>,
    /// Labels of the operator's pods, comma separated `key=value` (the chart's selector labels).
    #[arg(
        long,
        env = "MEMBENCH_OPERATOR_POD_LABELS",
        value_delimiter = ',',
        default_value = "app.kubernetes.io/name=membench,app.kubernetes.io/component=operator"
    )]
    operator_pod_labels: Vec<String>,
    /// Where to serve /metrics, /healthz and /readyz.
    #[arg(long, env = "MEMBENCH_METRICS_ADDR", default_value = "0.0.0.0:8080")]
    metrics_addr: std::net::SocketAddr,
    /// The membench image client pods run.
    #[arg(long, env = "MEMBENCH_CLIENT_IMAGE", default_value_t = membench::controller::pods::default_client_image())]
    client_image: String,
    /// Seconds a pod may wait for a node before its benchmark fails as Unschedulable (nodes
    /// that exist but run other benchmarks' engines are waited for without this deadline).
    #[arg(
        long,
        env = "MEMBENCH_SCHEDULING_TIMEOUT_SECONDS",
        default_value_t = 600
    )]
    scheduling_timeout_seconds: u64,
    /// Seconds a node may keep retrying an image pull before the engine fails as ImagePullFailed.
    #[arg(
        long,
        env = "MEMBENCH_IMAGE_PULL_TIMEOUT_SECONDS",
        default_value_t = 300
    )]
    image_pull_timeout_seconds: u64,
    /// Log format: json (the default in a cluster) or text.
    #[arg(long, env = "MEMBENCH_LOG_FORMAT", value_enum)]
    log_format: Option<LogFormat>,
    /// Run the controller only while this replica holds the leader Lease (for two or more
    /// replicas); the others stand by and take over within 15 s of the leader's death.
    #[arg(long, env = "MEMBENCH_LEADER_ELECTION")]
    leader_election: bool,
    /// The namespace of the leader Lease: the operator's own.
    #[arg(long, env = "MEMBENCH_NAMESPACE", default_value = "membench-system")]
    leader_election_namespace: String,
    /// The name of the leader Lease.
    #[arg(long, default_value = "membench-operator")]
    leader_election_lease: String,
    /// This replica's identity in the Lease (default: $POD_NAME, else host name and process ID).
    #[arg(long, env = "POD_NAME")]
    leader_election_identity: Option<String>,
    /// Image patterns engines may run, comma separated: a repository (`*` matches any
    /// characters but `/`) allows all its tags and digests, `repo:tag` only that tag. Default:
    /// the official images of Redis, Valkey and Dragonfly.
    #[arg(
        long,
        env = "MEMBENCH_ALLOWED_IMAGES",
        value_delimiter = ',',
        value_name = "PATTERNS"
    )]
    allowed_images: Option<Vec<String>>,
    /// Accept engine args that open an engine again (--protected-mode, --enable-debug-command,
    /// --enable-module-command, --enable-protected-configs, --loadmodule, --rename-command
    /// CONFIG, --requirepass); without it they are InvalidSpec.
    #[arg(long, env = "MEMBENCH_ALLOW_OPEN_ENGINE_ARGS")]
    allow_open_engine_args: bool,
    /// Accept tolerations without a key (operator Exists), which tolerate every taint; without
    /// it they are InvalidSpec.
    #[arg(long, env = "MEMBENCH_ALLOW_TOLERATE_EVERYTHING")]
    allow_tolerate_everything: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    Json,
    Text,
}

#[derive(Args)]
struct ReportArgs {
    /// The benchmarks to report (default: every finished one in the namespace).
    names: Vec<String>,
    /// The namespace (default: the kubeconfig's).
    #[arg(short = 'n', long)]
    namespace: Option<String>,
    /// Every namespace.
    #[arg(short = 'A', long, conflicts_with = "namespace")]
    all_namespaces: bool,
    /// How to print the comparison (html: one self-contained page with the charts).
    #[arg(long, value_enum, default_value = "table")]
    output: ComparisonOutput,
}

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
    /// published figures marked, the sorted set's growth curve, and the table.
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

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum WorkloadKind {
    SortedSet,
    RandomStrings,
    Strings,
    Records,
}

#[derive(Args)]
struct LoadArgs {
    /// The engine's address, HOST:PORT.
    #[arg(long)]
    addr: String,
    /// The engine's password, if it requires one.
    #[arg(long, env = "MEMBENCH_PASSWORD", hide_env_values = true)]
    password: Option<String>,
    /// Which published workload to load.
    #[arg(long, value_enum)]
    workload: WorkloadKind,
    /// sorted-set: how many members to add to the one sorted set.
    #[arg(long)]
    members: Option<u64>,
    /// sorted-set: the key of the sorted set.
    #[arg(long, default_value = "membench:zset")]
    key: String,
    /// sorted-set: read used_memory every this many members (0: no growth curve).
    #[arg(long, default_value_t = 1_000_000)]
    sample_every: u64,
    /// random-strings: how many SETs to send (valkey-benchmark -n).
    #[arg(long)]
    requests: Option<u64>,
    /// random-strings: the key space the keys are drawn from (valkey-benchmark -r).
    #[arg(long)]
    keyspace: Option<u64>,
    /// random-strings: seed of the key generator.
    #[arg(long, default_value_t = membench::crd::default_seed())]
    seed: u64,
    /// strings: how many distinct keys to store.
    #[arg(long)]
    keys: Option<u64>,
    /// random-strings and strings: value size in bytes (default 16 for random-strings, 100 for
    /// strings, as published).
    #[arg(long)]
    value_size: Option<u32>,
    /// records: how many records to store.
    #[arg(long)]
    records: Option<u64>,
    /// records: one hash per record, or one string key per field.
    #[arg(long, value_enum, default_value = "hash")]
    layout: LayoutArg,
    /// records: the field names of a record, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "name,age,city,score")]
    fields: Vec<String>,
    #[command(flatten)]
    measurement: MeasurementArgs,
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
    /// The address to serve progress on (client pods: their pod IP, from the downward API).
    #[arg(
        long,
        env = "MEMBENCH_POD_IP",
        default_value = "0.0.0.0",
        value_name = "IP"
    )]
    progress_ip: std::net::IpAddr,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum LayoutArg {
    Hash,
    Strings,
}

/// Flags shared by the commands that measure.
#[derive(Args, Clone, Debug)]
pub struct MeasurementArgs {
    /// Commands sent before their replies are read, on the one connection.
    #[arg(long, default_value_t = 100)]
    pipeline: u32,
    /// How many times to load the workload, flushing in between.
    #[arg(long, default_value_t = 10)]
    repetitions: u32,
    /// Seconds to wait after each load before a second memory reading (0: none).
    #[arg(long, default_value_t = 0)]
    settle_seconds: u32,
    /// Seconds to wait for the engine's other clients to disconnect before each baseline and
    /// final memory reading (their buffers would count as data); a client still connected
    /// then fails the repetition, naming it.
    #[arg(long, value_name = "SECONDS", default_value_t = membench::measure::DEFAULT_OTHER_CLIENTS_TIMEOUT.as_secs())]
    other_clients_timeout: u64,
    #[command(flatten)]
    stability: StabilityArgs,
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

impl MeasurementArgs {
    fn options(&self) -> LoadOptions {
        LoadOptions {
            pipeline: self.pipeline,
            repetitions: self.repetitions,
            settle_seconds: self.settle_seconds,
            thresholds: self.stability.thresholds(),
            other_clients_timeout: std::time::Duration::from_secs(self.other_clients_timeout),
            ..LoadOptions::default()
        }
    }
}

/// Says which flag a workload needs when it is missing.
fn required(value: Option<u64>, flag: &str, workload: &str) -> Result<u64, String> {
    value.ok_or_else(|| format!("--workload {workload} needs {flag} N"))
}

impl LoadArgs {
    fn workload(&self) -> Result<Workload, String> {
        let stray = |flags: &[(&str, bool)]| -> Result<(), String> {
            match flags.iter().find(|(_, set)| *set) {
                Some((flag, _)) => Err(format!(
                    "{flag} does not apply to --workload {}",
                    self.workload.to_possible_value().unwrap().get_name()
                )),
                None => Ok(()),
            }
        };
        let workload = match self.workload {
            WorkloadKind::SortedSet => {
                stray(&[
                    ("--requests", self.requests.is_some()),
                    ("--keys", self.keys.is_some()),
                    ("--records", self.records.is_some()),
                    ("--value-size", self.value_size.is_some()),
                ])?;
                Workload::SortedSet {
                    members: required(self.members, "--members", "sorted-set")?,
                    key: self.key.clone(),
                    sample_every: self.sample_every,
                }
            }
            WorkloadKind::RandomStrings => {
                stray(&[
                    ("--members", self.members.is_some()),
                    ("--keys", self.keys.is_some()),
                    ("--records", self.records.is_some()),
                ])?;
                Workload::RandomStrings {
                    requests: required(self.requests, "--requests", "random-strings")?,
                    keyspace: required(self.keyspace, "--keyspace", "random-strings")?,
                    value_size: self.value_size.unwrap_or(16),
                    seed: self.seed,
                }
            }
            WorkloadKind::Strings => {
                stray(&[
                    ("--members", self.members.is_some()),
                    ("--requests", self.requests.is_some()),
                    ("--records", self.records.is_some()),
                ])?;
                Workload::Strings {
                    keys: required(self.keys, "--keys", "strings")?,
                    value_size: self.value_size.unwrap_or(100),
                }
            }
            WorkloadKind::Records => {
                stray(&[
                    ("--members", self.members.is_some()),
                    ("--requests", self.requests.is_some()),
                    ("--keys", self.keys.is_some()),
                ])?;
                Workload::Records {
                    records: required(self.records, "--records", "records")?,
                    layout: match self.layout {
                        LayoutArg::Hash => RecordLayout::Hash,
                        LayoutArg::Strings => RecordLayout::Strings,
                    },
                    fields: self.fields.clone(),
                }
            }
        };
        workload.validate().map_err(|e| e.to_string())?;
        Ok(workload)
    }
}

fn run_load(args: LoadArgs) -> ExitCode {
    let workload = match args.workload() {
        Ok(w) => w,
        Err(message) => return usage_error(&message),
    };
    let options = args.measurement.options();
    if let Err(e) = options.validate() {
        return usage_error(&e.to_string().replacen("invalid ", "invalid --", 1));
    }
    let address = match EngineAddress::parse(&args.addr, args.password.clone()) {
        Ok(a) => a,
        Err(e) => return usage_error(&e.to_string()),
    };
    // SIGTERM (the pod being deleted) ends the run with what it measured, written below; a
    // run that cannot end in time has its journal written by the handler.
    let result_file = std::sync::Arc::new(ResultFile::new(args.result_file.clone()));
    let journal = Journal::new(BenchmarkReport::nothing_measured(&workload, &options));
    if let Err(e) = stop_on_sigterm(
        options.stop.clone(),
        journal.clone(),
        result_file.clone(),
        STOP_DEADLINE,
    ) {
        eprintln!("warning: cannot handle SIGTERM ({e}); a stopped run would leave no result");
    }
    let mut progress = ProgressReporter::new(&format!("{} at {address}", workload.kind()));
    let endpoint = std::sync::Arc::new(membench::progress_endpoint::ProgressEndpoint::default());
    if let Some(port) = args.progress_port {
        let at = std::net::SocketAddr::new(args.progress_ip, port);
        // Progress is a convenience: a load without it measures the same.
        if let Err(e) = endpoint.serve(at) {
            eprintln!("warning: cannot serve progress on {at}: {e}");
        }
    }
    let report = measure_journaled(
        &address,
        &workload,
        &options,
        &mut |p| {
            journal.progress(p.commands_done);
            endpoint.update(&p);
            progress.update(p)
        },
        &mut |r| journal.record(r),
    );
    progress.finish();
    for warning in &report.warnings {
        eprintln!("warning: {warning}");
    }
    if let Err(e) = result_file.write(&report) {
        let path = args
            .result_file
            .as_deref()
            .unwrap_or(std::path::Path::new(""));
        eprintln!("error: cannot write the result to {}: {e}", path.display());
        return ExitCode::FAILURE;
    }
    match args.output {
        OutputFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("reports serialize")
        ),
        format => {
            if !report.repetitions.is_empty() {
                println!(
                    "{} on {} {} ({}, {}), pipeline {}\n",
                    report.workload.description,
                    report.engine.name,
                    report.engine.version,
                    report.engine.allocator_label(),
                    report.engine.arch,
                    report.pipeline
                );
                if format == OutputFormat::Table {
                    println!("{}", repetitions_table(&report).render(format));
                    if let Some(growth) = membench::report::growth_table(&report) {
                        println!(
                            "used_memory during the load (repetition 1):\n{}",
                            growth.to_text()
                        );
                    }
                }
            }
            let rows = vec![ComparisonRow::from_report(&report, None)];
            print!("{}", comparison_table(&rows).render(format));
        }
    }
    match &report.error {
        Some(e) => {
            eprintln!("error: {}", e.message);
            ExitCode::FAILURE
        }
        None => ExitCode::SUCCESS,
    }
}

#[derive(Args)]
struct RunArgs {
    /// A YAML file with one or more MemoryBenchmarks (separated by `---`).
    spec: std::path::PathBuf,
    /// How to print the comparison (html: one self-contained page with the charts).
    #[arg(long, value_enum, default_value = "table")]
    output: ComparisonOutput,
    /// Run only this entry of the spec, by its name (`engines[].name`, or
    /// `<engine>-<version>`); repeat it for several. Reruns one engine of a long comparison.
    #[arg(long = "engine", value_name = "NAME")]
    engines: Vec<String>,
    #[command(flatten)]
    stability: StabilityArgs,
}

fn run_local(args: RunArgs) -> ExitCode {
    let mut benchmarks = match membench::local::read_specs(&args.spec) {
        Ok(b) => b,
        Err(message) => return usage_error(&message),
    };
    if let Err(message) = membench::local::select_engines(&mut benchmarks, &args.engines) {
        return usage_error(&message);
    }
    let thresholds = args.stability.thresholds();
    let mut failed = false;
    let mut comparisons = Vec::new();
    let mut sections = Vec::new();
    // The text tables are printed as each benchmark finishes; JSON and the page at the end.
    let text = args.output.text().filter(|f| *f != OutputFormat::Json);
    for benchmark in &benchmarks {
        let name = benchmark.metadata.name.clone().unwrap_or_default();
        // Both callbacks draw on the same bar.
        let progress = std::cell::RefCell::new(ProgressReporter::new(&name));
        let result = membench::local::run_benchmark(
            benchmark,
            thresholds,
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
        if args.output == ComparisonOutput::Html {
            sections.push(membench::html_report::section_from_local(
                benchmark,
                &comparison,
            ));
        }
        if let Some(format) = text {
            let mut rows: Vec<ComparisonRow> = comparison
                .engines
                .iter()
                .map(|r| ComparisonRow::from_report(r, None))
                .collect();
            membench::report::compute_changes(&mut rows);
            if format == OutputFormat::Table {
                let workload = comparison
                    .engines
                    .first()
                    .map(|r| r.workload.description.clone())
                    .unwrap_or_default();
                let emulated = if comparison.arch != comparison.host.arch {
                    format!(
                        "; {} builds under qemu-user emulation: memory figures are the architecture's, rates are the emulator's",
                        comparison.arch
                    )
                } else {
                    String::new()
                };
                println!(
                    "{name}: {workload}; {} repetitions, pipeline {}; ran locally on {} ({}, {} CPUs; the spec's instanceType {} is not applied locally){emulated}\n",
                    benchmark.spec.repetitions,
                    benchmark.spec.pipeline,
                    comparison.host.hostname,
                    comparison.host.arch,
                    comparison.host.cpus,
                    comparison.instance_type
                );
            }
            println!("{}", comparison_table(&rows).render(format));
        }
        comparisons.push(comparison);
    }
    if args.output == ComparisonOutput::Html {
        print!(
            "{}",
            membench::html_report::render_page(
                &format!("membench run {}", args.spec.display()),
                &sections
            )
        );
    }
    if args.output == ComparisonOutput::Json {
        let value = if comparisons.len() == 1 {
            serde_json::to_value(&comparisons[0])
        } else {
            serde_json::to_value(&comparisons)
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&value.expect("comparisons serialize")).expect("json")
        );
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn run_operator(args: OperatorArgs) -> ExitCode {
    let in_cluster = std::env::var_os("KUBERNETES_SERVICE_HOST").is_some();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,kube=warn"));
    let json = args
        .log_format
        .map_or(in_cluster, |format| format == LogFormat::Json);
    if json {
        tracing_subscriber::fmt()
            .json()
            .with_env_filter(filter)
            .init();
    } else {
        tracing_subscriber::fmt().with_env_filter(filter).init();
    }
    let operator_pod_labels = match args
        .operator_pod_labels
        .iter()
        .map(|pair| {
            pair.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| format!("--operator-pod-labels: '{pair}' is not key=value"))
        })
        .collect::<Result<std::collections::BTreeMap<_, _>, _>>()
    {
        Ok(labels) => labels,
        Err(message) => return usage_error(&message),
    };
    let settings = membench::controller::Settings {
        pods: membench::controller::pods::PodSettings {
            client_image: args.client_image,
            ..Default::default()
        },
        policy: membench::controller::policy::Policy {
            allowed_images: args
                .allowed_images
                .map(|patterns| {
                    patterns
                        .into_iter()
                        .filter(|p| !p.trim().is_empty())
                        .collect()
                })
                .unwrap_or_else(|| membench::controller::policy::Policy::default().allowed_images),
            allow_open_engine_args: args.allow_open_engine_args,
            allow_tolerate_everything: args.allow_tolerate_everything,
        },
        network_policy: membench::controller::network_policy::NetworkPolicySettings {
            enabled: args.benchmark_network_policies,
            operator_namespace: args.operator_namespace.filter(|n| !n.is_empty()),
            operator_pod_labels,
        },
        scheduling_timeout: std::time::Duration::from_secs(args.scheduling_timeout_seconds),
        image_pull_timeout: std::time::Duration::from_secs(args.image_pull_timeout_seconds),
        ..Default::default()
    };
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let result = runtime.block_on(async move {
        let client = kube::Client::try_default().await?;
        let metrics = membench::metrics::Metrics::new();
        let ready = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let server = tokio::spawn(membench::metrics::serve(
            args.metrics_addr,
            metrics.clone(),
            ready.clone(),
        ));
        let scope = membench::controller::Scope {
            namespaces: args
                .namespace
                .into_iter()
                .filter(|n| !n.trim().is_empty())
                .collect(),
        };
        let result = if args.leader_election {
            let identity = args.leader_election_identity.unwrap_or_else(|| {
                let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
                    .map(|h| h.trim().to_string())
                    .unwrap_or_else(|_| "membench".into());
                format!("{host}-{}", std::process::id())
            });
            let election = membench::controller::Election {
                namespace: args.leader_election_namespace,
                lease_name: args.leader_election_lease,
                identity,
                timing: Default::default(),
            };
            membench::controller::run_elected(
                client,
                scope,
                settings,
                metrics,
                ready,
                election,
                shutdown_signal(),
            )
            .await
        } else {
            membench::controller::run(client, scope, settings, metrics, ready, shutdown_signal())
                .await
        };
        server.abort();
        result
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Resolves on SIGTERM (a pod being stopped) or Ctrl-C.
async fn shutdown_signal() {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("a SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}

fn run_report(args: ReportArgs) -> ExitCode {
    use kube::ResourceExt;
    use membench::crd::MemoryBenchmark;
    use membench::status_report::{comparison, finished, render};

    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let result: anyhow::Result<Vec<MemoryBenchmark>> = runtime.block_on(async {
        let client = kube::Client::try_default().await?;
        let api: kube::Api<MemoryBenchmark> = if args.all_namespaces {
            kube::Api::all(client)
        } else {
            let namespace = args
                .namespace
                .clone()
                .unwrap_or_else(|| client.default_namespace().to_string());
            kube::Api::namespaced(client, &namespace)
        };
        if args.names.is_empty() {
            let mut all = api.list(&Default::default()).await?.items;
            all.retain(|b| {
                let done = finished(b);
                if !done {
                    eprintln!(
                        "note: {} has not finished yet; name it to see its partial results",
                        b.name_any()
                    );
                }
                done
            });
            Ok(all)
        } else {
            let mut found = Vec::new();
            for name in &args.names {
                found.push(
                    api.get(name)
                        .await
                        .map_err(|e| anyhow::anyhow!("{name}: {e}"))?,
                );
            }
            Ok(found)
        }
    });
    match result {
        Ok(benchmarks) => {
            if benchmarks.is_empty() && args.output != ComparisonOutput::Json {
                eprintln!("no finished MemoryBenchmarks found");
                return ExitCode::SUCCESS;
            }
            match args.output.text() {
                Some(format) => {
                    let comparisons: Vec<_> = benchmarks.iter().map(comparison).collect();
                    print!("{}", render(&comparisons, format));
                }
                None => {
                    let sections: Vec<_> = benchmarks
                        .iter()
                        .map(membench::html_report::section_from_status)
                        .collect();
                    print!(
                        "{}",
                        membench::html_report::render_page("membench report", &sections)
                    );
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run_engines(args: EnginesArgs) -> ExitCode {
    use membench_enginestore::EngineStore;
    let store = match EngineStore::open_default() {
        Ok(store) => store,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    if store.builds().is_empty() {
        eprintln!(
            "error: the engine store at {} holds no builds: run hack/install-engines.sh (or set {} to where the store is)",
            store.root().display(),
            membench_enginestore::ROOT_ENV
        );
        return ExitCode::FAILURE;
    }
    if args.output == OutputFormat::Json {
        let listing = membench::engine_store::StoreListing {
            store: store.root(),
            builds: store.builds(),
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&listing).expect("builds serialize")
        );
        return ExitCode::SUCCESS;
    }
    let (table, notes) = membench::engine_store::engines_table(&store);
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

fn usage_error(message: &str) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(2)
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
