//! `membench-node-agent`: the dev cluster's stand-in for kubelet and a container runtime. It
//! registers fake nodes and runs the pods bound to them as local processes. Started by
//! `hack/dev-cluster.sh up`; test infrastructure, not something users deploy.
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;
use membench_devcluster::agent::kubelet_server::KubeletTls;
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

    /// The membench binary to run for the membench image on nodes of its architecture
    /// (default: the image archive, else the newest membench build for the node's architecture).
    #[arg(long, env = "MEMBENCH_BIN")]
    membench_bin: Option<PathBuf>,

    /// The membench image's OCI archive, which hack/build-image.sh writes (default:
    /// <repo-root>/target/image/membench-oci.tar); unpacked for each node's platform.
    #[arg(long, env = "MEMBENCH_IMAGE_ARCHIVE")]
    image_archive: Option<PathBuf>,

    /// The engine store whose builds stand in for the redis, valkey and dragonfly images
    /// (installed by hack/install-engines.sh; `membench engines` lists it).
    #[arg(long, env = membench_enginestore::ROOT_ENV, default_value_os_t = membench_enginestore::EngineStore::default_root())]
    engine_store: PathBuf,

    /// Where to serve container logs for `kubectl logs` (the nodes' kubelet endpoint), e.g.
    /// 127.0.0.1:10250; needs the three TLS files below.
    #[arg(long, requires_all = ["kubelet_tls_cert", "kubelet_tls_key", "kubelet_client_ca"])]
    kubelet_address: Option<SocketAddr>,

    /// Serving certificate of the kubelet endpoint (PEM).
    #[arg(long)]
    kubelet_tls_cert: Option<PathBuf>,

    /// Its private key (PEM).
    #[arg(long)]
    kubelet_tls_key: Option<PathBuf>,

    /// The CA whose client certificates may read logs (the API server's kubelet client).
    #[arg(long)]
    kubelet_client_ca: Option<PathBuf>,

    /// The second octet of the first node's pod addresses (127.<octet>.y.z; node i uses
    /// octet + i). A private dev cluster gets its own, so two clusters never share addresses.
    #[arg(long, env = "MEMBENCH_POD_ADDRESS_OCTET", default_value_t = membench_devcluster::agent::addresses::DEFAULT_FIRST_OCTET, value_parser = clap::value_parser!(u8).range(1..))]
    pod_address_octet: u8,

    /// Where each container's private mount namespace mounts a tmpfs holding what its user
    /// cannot reach by name on this machine (a program or the pod's directory under /root).
    #[arg(long, default_value = membench_devcluster::agent::mount_namespace::DEFAULT_RUNTIME_DIR)]
    runtime_dir: PathBuf,
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
    let kubelet_tls = match (
        args.kubelet_address,
        args.kubelet_tls_cert,
        args.kubelet_tls_key,
        args.kubelet_client_ca,
    ) {
        (Some(address), Some(cert), Some(key), Some(client_ca)) => Some(KubeletTls {
            address,
            cert,
            key,
            client_ca,
        }),
        _ => None,
    };
    run(AgentConfig {
        node_pools: args.node_pools,
        state_dir: args.state_dir,
        repo_root: args.repo_root,
        membench_bin: args.membench_bin,
        image_archive: args.image_archive,
        engine_store: args.engine_store,
        kubelet_tls,
        pod_address_octet: args.pod_address_octet,
        runtime_dir: args.runtime_dir,
    })
    .await
}
