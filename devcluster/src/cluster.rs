//! Getting a cluster to test against: the dev cluster, started through `hack/dev-cluster.sh up`
//! (the same code path as by hand), or an existing cluster (kind, EKS) named by
//! `MEMBENCH_TEST_KUBECONFIG`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::Context;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// Names a kubeconfig of an existing cluster to test against instead of the dev cluster.
pub const TEST_KUBECONFIG_ENV: &str = "MEMBENCH_TEST_KUBECONFIG";

/// The kubeconfig found by the first `ensure` of this process, and the extra node pools
/// brought up since; a later call reuses it unless it asks for a pool not brought up yet.
static KUBECONFIG: Mutex<Option<(PathBuf, BTreeSet<String>)>> = Mutex::new(None);

/// How to bring the dev cluster up.
#[derive(Debug, Clone, Default)]
pub struct EnsureOptions {
    /// The node agent binary to run (tests pass `env!("CARGO_BIN_EXE_membench-node-agent")`);
    /// by default the script builds it with cargo.
    pub node_agent_bin: Option<PathBuf>,
    /// Node pools added to the cluster's (`MEMBENCH_DEV_CLUSTER_EXTRA_NODES`), such as
    /// [`crate::real_nodes::REAL_NODE_POOL`]: on a cluster that is already up, `up` starts
    /// the real nodes among them that do not run yet.
    pub extra_node_pools: Vec<String>,
}

/// The cluster tests run against.
pub struct DevCluster;

impl DevCluster {
    /// A client for the test cluster: `MEMBENCH_TEST_KUBECONFIG`'s cluster if set, else the dev
    /// cluster, started if it is not up (the first time on a machine this builds the control
    /// plane, which takes about 10 minutes).
    pub async fn ensure() -> anyhow::Result<Client> {
        Self::ensure_with(&EnsureOptions::default()).await
    }

    /// [`DevCluster::ensure`] with options.
    pub async fn ensure_with(options: &EnsureOptions) -> anyhow::Result<Client> {
        let kubeconfig = Self::kubeconfig_with(options).await?;
        client_for(&kubeconfig).await
    }

    /// The kubeconfig of the test cluster (bringing the dev cluster up if needed), e.g. for
    /// running kubectl.
    pub async fn kubeconfig_with(options: &EnsureOptions) -> anyhow::Result<PathBuf> {
        let options = options.clone();
        tokio::task::spawn_blocking(move || {
            // Held while the script runs: tests of one process start it once.
            let mut known = KUBECONFIG.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((path, pools)) = known.as_ref() {
                let new_pool = options.extra_node_pools.iter().any(|p| !pools.contains(p));
                if !new_pool || std::env::var_os(TEST_KUBECONFIG_ENV).is_some() {
                    return Ok(path.clone());
                }
            }
            let path = match std::env::var_os(TEST_KUBECONFIG_ENV) {
                Some(path) => PathBuf::from(path),
                None => dev_cluster_up(&options)?,
            };
            let mut pools = known.take().map(|(_, pools)| pools).unwrap_or_default();
            pools.extend(options.extra_node_pools.iter().cloned());
            *known = Some((path.clone(), pools));
            Ok(path)
        })
        .await?
    }

    /// Whether tests run against the dev cluster (so they may rely on its fake nodes and node
    /// agent) rather than a cluster named by `MEMBENCH_TEST_KUBECONFIG`.
    pub fn is_dev_cluster() -> bool {
        std::env::var_os(TEST_KUBECONFIG_ENV).is_none()
    }
}

/// The repository root: `MEMBENCH_REPO_ROOT`, else where this crate was built from.
pub fn repo_root() -> PathBuf {
    std::env::var_os("MEMBENCH_REPO_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .parent()
                .expect("devcluster/ has a parent")
                .to_path_buf()
        })
}

/// Runs `hack/dev-cluster.sh up` and returns the kubeconfig it announces. Its progress goes to
/// our stderr, which shows the long first build as it happens.
fn dev_cluster_up(options: &EnsureOptions) -> anyhow::Result<PathBuf> {
    let script = repo_root().join("hack/dev-cluster.sh");
    let mut command = std::process::Command::new(&script);
    command.arg("up").stderr(std::process::Stdio::inherit());
    if let Some(bin) = &options.node_agent_bin {
        command.env("MEMBENCH_NODE_AGENT_BIN", bin);
    }
    if !options.extra_node_pools.is_empty() {
        // Beside any the caller's environment names already.
        let mut pools: Vec<String> = std::env::var("MEMBENCH_DEV_CLUSTER_EXTRA_NODES")
            .map(|v| v.split(',').map(str::to_string).collect())
            .unwrap_or_default();
        pools.extend(options.extra_node_pools.iter().cloned());
        command.env("MEMBENCH_DEV_CLUSTER_EXTRA_NODES", pools.join(","));
    }
    let output = command
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    anyhow::ensure!(
        output.status.success(),
        "{} up failed ({})",
        script.display(),
        output.status
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let path = stdout
        .lines()
        .find_map(|l| l.strip_prefix("export KUBECONFIG="))
        .with_context(|| {
            format!(
                "{} up printed no `export KUBECONFIG=` line: {stdout}",
                script.display()
            )
        })?;
    Ok(PathBuf::from(path.trim()))
}

/// A client for a kubeconfig file.
pub async fn client_for(kubeconfig: &Path) -> anyhow::Result<Client> {
    let file = Kubeconfig::read_from(kubeconfig)
        .with_context(|| format!("reading {}", kubeconfig.display()))?;
    let config = Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
        .await
        .with_context(|| format!("loading {}", kubeconfig.display()))?;
    Ok(Client::try_from(config)?)
}
