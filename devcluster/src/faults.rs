//! Faults a test injects into the dev cluster: a node that appears, one that stops reporting,
//! a real node's kubelet that stops, and an API server that restarts. Nodes are changed through the running node agent's control
//! directory ([`crate::agent::control`]), the API server through `hack/dev-cluster.sh
//! restart-apiserver`. Only the dev cluster has them: a cluster named by
//! `MEMBENCH_TEST_KUBECONFIG` is refused with an error that says so.

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::agent::control::{NODES_DIR, SILENT_DIR};
use crate::cluster::{DevCluster, EnsureOptions, repo_root};

/// The dev cluster's fault switches.
pub struct Faults {
    /// The cluster's state directory (where its kubeconfig lives).
    state: PathBuf,
}

impl Faults {
    /// The switches of the dev cluster the tests run against (started if it is not up).
    pub async fn of_dev_cluster() -> anyhow::Result<Faults> {
        anyhow::ensure!(
            DevCluster::is_dev_cluster(),
            "fault injection needs the dev cluster's node agent and scripts; unset {} to run this test",
            crate::TEST_KUBECONFIG_ENV
        );
        let kubeconfig = DevCluster::kubeconfig_with(&EnsureOptions::default()).await?;
        let state = kubeconfig
            .parent()
            .context("the kubeconfig has a directory")?
            .to_path_buf();
        Ok(Faults { state })
    }

    fn control(&self, kind: &str) -> PathBuf {
        self.state.join("node-agent").join("control").join(kind)
    }

    /// Adds a node of `instance_type` (one the agent knows, such as `r7i.2xlarge`) named `name`;
    /// it registers within a second or two.
    pub fn add_node(&self, name: &str, instance_type: &str) -> anyhow::Result<()> {
        write_atomically(&self.control(NODES_DIR), name, instance_type)
    }

    /// Removes a node added by [`Faults::add_node`]: its processes stop and its Node object is
    /// deleted.
    pub fn remove_node(&self, name: &str) -> anyhow::Result<()> {
        remove_if_there(&self.control(NODES_DIR).join(name))
    }

    /// Makes a node stop reporting: no more heartbeats, its processes die, nothing more is
    /// written about its pods.
    pub fn silence_node(&self, name: &str) -> anyhow::Result<()> {
        write_atomically(&self.control(SILENT_DIR), name, "")
    }

    /// Lets a silenced node report again.
    pub fn resume_node(&self, name: &str) -> anyhow::Result<()> {
        remove_if_there(&self.control(SILENT_DIR).join(name))
    }

    /// Stops kube-apiserver and starts it again (bounded by the script's own waits); returns
    /// once it answers again.
    pub fn restart_apiserver(&self) -> anyhow::Result<()> {
        self.run_script(&["restart-apiserver"], &[])
    }

    /// Stops a real node's kubelet, as a kubelet that crashed or a machine cut off: its
    /// containers keep running, nothing reports for the node. [`Faults::restart_real_nodes`]
    /// starts it again.
    pub fn stop_kubelet(&self, node: &str) -> anyhow::Result<()> {
        self.run_script(&["stop-kubelet", node], &[])
    }

    /// Starts afresh every real node of [`crate::real_nodes::REAL_NODE_POOL`] whose kubelet or
    /// containerd does not run (`hack/dev-cluster.sh up`), and waits until it is Ready.
    pub fn restart_real_nodes(&self) -> anyhow::Result<()> {
        self.run_script(
            &["up"],
            &[(
                "MEMBENCH_DEV_CLUSTER_EXTRA_NODES",
                crate::real_nodes::REAL_NODE_POOL,
            )],
        )
    }

    /// Runs `hack/dev-cluster.sh ARGS` on this cluster's state directory.
    fn run_script(&self, args: &[&str], env: &[(&str, &str)]) -> anyhow::Result<()> {
        let script = repo_root().join("hack/dev-cluster.sh");
        let status = std::process::Command::new(&script)
            .args(args)
            .env("MEMBENCH_DEV_CLUSTER_DIR", &self.state)
            .envs(env.iter().copied())
            .stdout(std::process::Stdio::null())
            .status()
            .with_context(|| format!("running {}", script.display()))?;
        anyhow::ensure!(
            status.success(),
            "{} {} failed ({status})",
            script.display(),
            args.join(" ")
        );
        Ok(())
    }
}

/// Writes `dir/name` so that the agent never reads it half-written.
fn write_atomically(dir: &Path, name: &str, content: &str) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let scratch = dir.join(format!(".{name}.tmp"));
    std::fs::write(&scratch, content).with_context(|| format!("writing {}", scratch.display()))?;
    std::fs::rename(&scratch, dir.join(name))
        .with_context(|| format!("renaming {} into place", scratch.display()))
}

fn remove_if_there(path: &Path) -> anyhow::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("removing {}", path.display()))
        }
        _ => Ok(()),
    }
}
