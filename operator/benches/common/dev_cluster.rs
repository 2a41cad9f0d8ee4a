//! What the benches on the dev cluster share (benches/operator_at_scale.rs and
//! benches/parallel_matrix.rs, through a `#[path]` include): a namespace of their own, the
//! verdict printed beside a figure, and the private dev cluster they run against,
//! `MEMBENCH_DEV_CLUSTER_DIR` (default `~/.cache/membench/<default_dir>`) with
//! `MEMBENCH_DEV_CLUSTER_NODES` (default the bench's own), started through `hack/dev-cluster.sh
//! up` when it is not up (a cluster already up keeps its nodes), and stopped when dropped if
//! this run started it.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::PostParams;
use kube::{Api, Client};

/// A figure's verdict: nothing fails on a figure, it is printed beside its target.
pub fn verdict(ok: bool) -> &'static str {
    if ok {
        "meets the target"
    } else {
        "MISSES the target"
    }
}

/// A namespace for the bench's benchmarks, enforcing Pod Security `restricted` as a platform
/// team's would.
pub async fn create_namespace(client: &Client, name: &str) -> anyhow::Result<()> {
    let namespace: Namespace = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": {"pod-security.kubernetes.io/enforce": "restricted"}},
    }))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await?;
    Ok(())
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// The private dev cluster of this run; stopped when dropped if this run started it.
pub struct Cluster {
    pub dir: PathBuf,
    /// The node pools asked for (a cluster that was already up may have others).
    pub nodes: String,
    started_here: bool,
}

impl Cluster {
    pub fn up(default_dir: &str, default_nodes: &str) -> anyhow::Result<Self> {
        let dir = std::env::var_os("MEMBENCH_DEV_CLUSTER_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                PathBuf::from(std::env::var("HOME").unwrap_or_default())
                    .join(".cache/membench")
                    .join(default_dir)
            });
        let nodes =
            std::env::var("MEMBENCH_DEV_CLUSTER_NODES").unwrap_or_else(|_| default_nodes.into());
        let script = repo_root().join("hack/dev-cluster.sh");
        let was_up = Command::new(&script)
            .arg("status")
            .env("MEMBENCH_DEV_CLUSTER_DIR", &dir)
            .output()
            .map(|o| o.status.success() && dir.join("kubeconfig").is_file())
            .unwrap_or(false);
        let status = Command::new(&script)
            .arg("up")
            .env("MEMBENCH_DEV_CLUSTER_DIR", &dir)
            .env("MEMBENCH_DEV_CLUSTER_NODES", &nodes)
            .env("MEMBENCH_BIN", env!("CARGO_BIN_EXE_membench"))
            .env_remove("MEMBENCH_DEV_CLUSTER_OPERATOR")
            .stdout(Stdio::null())
            .status()?;
        anyhow::ensure!(status.success(), "hack/dev-cluster.sh up failed");
        Ok(Self {
            dir,
            nodes,
            started_here: !was_up,
        })
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.started_here {
            let _ = Command::new(repo_root().join("hack/dev-cluster.sh"))
                .arg("down")
                .env("MEMBENCH_DEV_CLUSTER_DIR", &self.dir)
                .stdout(Stdio::null())
                .status();
        }
    }
}
