//! `membench operator`: the Kubernetes operator, its flags and its metrics server.

use membench::error::ExitStatus;
use std::process::ExitCode;

use clap::{Args, ValueEnum};

use super::cluster::ContextArgs;
use super::usage_error;

#[derive(Args)]
pub struct OperatorArgs {
    /// Watch only these namespaces, comma separated (default: every namespace). Namespaced
    /// watches need only Roles in those namespaces.
    #[arg(
        short = 'n',
        long,
        env = "MEMBENCH_WATCH_NAMESPACE",
        value_delimiter = ','
    )]
    namespace: Vec<String>,
    #[command(flatten)]
    context: ContextArgs,
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
    /// Where to serve /metrics, /healthz and /readyz. `[::]:PORT` listens on every IPv6 and
    /// IPv4 address (a dual-stack socket; IPv4 only where the kernel has no IPv6), `0.0.0.0:PORT`
    /// on IPv4 only.
    #[arg(long, env = "MEMBENCH_METRICS_ADDR", default_value = membench::metrics::serve::DEFAULT_ADDR)]
    metrics_addr: std::net::SocketAddr,
    /// The membench image client pods run.
    #[arg(long, env = "MEMBENCH_CLIENT_IMAGE", default_value_t = membench::controller::build::pods::default_client_image())]
    client_image: String,
    /// Secrets (in each benchmark's namespace) that every engine and client pod pulls its image
    /// with, comma-separated; a benchmark's `spec.imagePullSecrets` come after them.
    #[arg(
        long,
        env = "MEMBENCH_BENCHMARK_IMAGE_PULL_SECRETS",
        value_delimiter = ','
    )]
    benchmark_image_pull_secrets: Vec<String>,
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
    /// Accept any engine args, those that open an engine again included (--protected-mode,
    /// --enable-*-command, --loadmodule, --rename-command, --requirepass, --dir, Dragonfly's
    /// -requirepass=x, --admin_port, --memcached_port); without it, args take only the
    /// memory-relevant settings of engines[].config, and anything else is refused as PolicyDenied.
    #[arg(long, env = "MEMBENCH_ALLOW_OPEN_ENGINE_ARGS")]
    allow_open_engine_args: bool,
    /// Accept tolerations without a key (operator Exists), which tolerate every taint; without
    /// it they are PolicyDenied (in a spec) or refused at start (in --benchmark-tolerations).
    #[arg(long, env = "MEMBENCH_ALLOW_TOLERATE_EVERYTHING")]
    allow_tolerate_everything: bool,
    /// Tolerations every engine and client pod gets, as a JSON list of pod tolerations
    /// (`[{"key":"membench.io/benchmark","operator":"Equal","value":"true","effect":"NoSchedule"}]`);
    /// a spec's placement.tolerations of the same key replaces the operator's.
    #[arg(long, env = "MEMBENCH_BENCHMARK_TOLERATIONS", value_name = "JSON")]
    benchmark_tolerations: Option<String>,
    /// Node labels every engine and client pod requires, comma separated KEY=VALUE (for
    /// example `membench.io/pool=benchmarks`); a spec's placement.nodeSelector wins on a key.
    #[arg(
        long,
        env = "MEMBENCH_BENCHMARK_NODE_SELECTOR",
        value_delimiter = ',',
        value_name = "KEY=VALUE,..."
    )]
    benchmark_node_selector: Vec<String>,
    /// A registry that mirrors the official engine images under their Docker Hub names: an
    /// entry without its own image runs HOST[:PORT][/PATH]/library/redis:<v>,
    /// .../valkey/valkey:<v> or .../dragonflydb/dragonfly:v<v>, and the three repositories
    /// are added to --allowed-images.
    #[arg(
        long,
        env = "MEMBENCH_ENGINE_REGISTRY",
        value_name = "HOST[:PORT][/PATH]"
    )]
    engine_registry: Option<String>,
}

/// What `--benchmark-tolerations`, `--benchmark-node-selector` and `--engine-registry` say.
struct BenchmarkPodDefaults {
    tolerations: Vec<membench::crd::TolerationSpec>,
    node_selector: std::collections::BTreeMap<String, String>,
    engine_registry: Option<membench::controller::build::engine_registry::EngineRegistry>,
}

/// The operator's defaults for every benchmark pod, from its flags; the error says which flag
/// (and chart value) is wrong and how.
fn benchmark_pod_defaults(args: &OperatorArgs) -> Result<BenchmarkPodDefaults, String> {
    use membench::controller::build::pod_defaults::{parse_node_selector, parse_tolerations};
    let tolerations = parse_tolerations(
        args.benchmark_tolerations.as_deref().unwrap_or_default(),
        args.allow_tolerate_everything,
    )?;
    let node_selector = parse_node_selector(&args.benchmark_node_selector)?;
    let registry = args
        .engine_registry
        .as_deref()
        .filter(|r| !r.is_empty())
        .map(membench::controller::build::engine_registry::EngineRegistry::parse)
        .transpose()?;
    Ok(BenchmarkPodDefaults {
        tolerations,
        node_selector,
        engine_registry: registry,
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    Json,
    Text,
}

pub fn run_operator(args: OperatorArgs) -> ExitCode {
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
    let BenchmarkPodDefaults {
        tolerations,
        node_selector,
        engine_registry,
    } = match benchmark_pod_defaults(&args) {
        Ok(defaults) => defaults,
        Err(message) => return usage_error(&message),
    };
    let allowed_images = membench::controller::decide::policy::Policy::allowed_images_with(
        args.allowed_images,
        engine_registry.as_ref(),
    );
    let settings = membench::controller::Settings {
        pods: membench::controller::build::pods::PodSettings {
            client_image: args.client_image,
            image_pull_secrets: args
                .benchmark_image_pull_secrets
                .into_iter()
                .filter(|name| !name.is_empty())
                .collect(),
            tolerations,
            node_selector,
            engine_registry,
            ..Default::default()
        },
        policy: membench::controller::decide::policy::Policy {
            allowed_images,
            allow_open_engine_args: args.allow_open_engine_args,
            allow_tolerate_everything: args.allow_tolerate_everything,
        },
        network_policy: membench::controller::build::network_policy::NetworkPolicySettings {
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
        let client = args.context.client().await?;
        let metrics = membench::metrics::Metrics::new();
        let ready = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let server = tokio::spawn(membench::metrics::serve::serve(
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
            ExitStatus::Failed.into()
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
