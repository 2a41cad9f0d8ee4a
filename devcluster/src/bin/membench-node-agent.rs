//! `membench-node-agent`: the dev cluster's stand-in for kubelet and a container runtime. It
//! registers fake nodes and runs the pods bound to them as local processes. Started by
//! `hack/dev-cluster.sh up`; test infrastructure, not something users deploy.
#![forbid(unsafe_code)]

use std::path::PathBuf;

use clap::Parser;
use membench_devcluster::agent::{AgentConfig, run};

/// Plays the kubelet for the dev cluster's fake nodes (connects through KUBECONFIG).
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Fake node pools to register: instance type = count, comma separated.
    #[arg(
        long,
        env = "MEMBENCH_DEV_CLUSTER_NODES",
        default_value = "r8g.4xlarge=2,r7i.4xlarge=2"
    )]
    node_pools: String,

    /// Directory for pod logs, termination messages and PID files.
    #[arg(long)]
    state_dir: PathBuf,

    /// The membench repository (its target/ holds the membench binary for the membench image).
    #[arg(long)]
    repo_root: Option<PathBuf>,

    /// The membench binary to run for the membench image (default: newest target/*/membench).
    #[arg(long, env = "MEMBENCH_BIN")]
    membench_bin: Option<PathBuf>,

    /// Directories searched for engine programs (redis-server, valkey-server, dragonfly)
    /// before PATH; colon separated in the environment variable.
    #[arg(
        long = "engine-dir",
        env = "MEMBENCH_ENGINE_PATH",
        value_delimiter = ':'
    )]
    engine_dirs: Vec<PathBuf>,

    /// The port the fake nodes advertise as their kubelet endpoint.
    #[arg(long, default_value_t = 10250)]
    kubelet_port: i32,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let args = Args::parse();
    run(AgentConfig {
        node_pools: args.node_pools,
        state_dir: args.state_dir,
        repo_root: args.repo_root,
        membench_bin: args.membench_bin,
        engine_dirs: args.engine_dirs,
        kubelet_port: args.kubelet_port,
    })
    .await
}
