//! The dev cluster's real nodes, for tests whose behaviour is the node's (images, cgroups,
//! seccomp, pod networking): a kubelet with containerd and runc per node, started by
//! `hack/dev-cluster.sh` for a pool with `:kubelet` after its count. Tests ask for
//! [`REAL_NODE_POOL`], an instance type no test of the node agent's nodes uses, so those tests
//! never land on a real node and a real-node test never lands on a fake one.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use k8s_openapi::api::core::v1::Node;
use kube::api::ListParams;
use kube::{Api, Client, ResourceExt};

use crate::cluster::{DevCluster, EnsureOptions};

/// The instance type of the real nodes' pool.
pub const REAL_NODE_INSTANCE_TYPE: &str = "r7i.xlarge";

/// The pool tests add to the dev cluster: one real amd64 node.
pub const REAL_NODE_POOL: &str = "r7i.xlarge=1:kubelet";

/// The label `hack/dev-cluster.sh` gives a real node (a kubelet's, not the node agent's).
pub const REAL_NODE_LABEL: &str = "membench.io/real-node";

/// The key of the real nodes' taint (`membench.io/benchmark=true:NoSchedule`), the taint of the
/// benchmark node groups in docs/src/getting-started/cluster.md: only pods that tolerate it run
/// there, as on a dedicated benchmark node group. The chart's default benchmark pods tolerate it.
pub const REAL_NODE_TAINT_KEY: &str = "membench.io/benchmark";

/// A MemoryBenchmark's `placement` (YAML, indented for `spec:`) that tolerates the real nodes'
/// taint; more tolerations may follow as list items (`      - {key: ...}`).
pub const TOLERATE_REAL_NODES: &str = "  placement:\n    tolerations:\n      - {key: membench.io/benchmark, operator: Equal, value: \"true\", effect: NoSchedule}\n";

/// `options` with the real node's pool added: what [`ensure_real_node`] brings the cluster up
/// with, for a test that also needs its kubeconfig or its registry.
pub fn with_real_node(options: &EnsureOptions) -> EnsureOptions {
    let mut options = options.clone();
    options.extra_node_pools.push(REAL_NODE_POOL.to_string());
    options
}

/// A client for the dev cluster with its real node Ready (started, if the cluster runs
/// without one), and that node. The error names what is missing: a test that needs a real
/// node fails without one, it never passes by skipping.
pub async fn ensure_real_node(options: &EnsureOptions) -> anyhow::Result<(Client, Node)> {
    let options = with_real_node(options);
    let kubeconfig = DevCluster::kubeconfig_with(&options)
        .await
        .with_context(|| {
            format!(
                "bringing up the dev cluster with a real node ({REAL_NODE_POOL}); its logs are \
                 in the state directory's logs/ (real-<node>-kubelet.log, \
                 real-<node>-containerd.log)"
            )
        })?;
    let client = crate::cluster::client_for(&kubeconfig).await?;
    let node = ready_real_node(&client, Duration::from_secs(90)).await?;
    if let Some(pressure) = under_pressure(&node) {
        anyhow::bail!(
            "the real node {} reports {pressure}: its kubelet evicts pods below the evictionHard \
             thresholds of hack/dev-cluster-real-nodes.sh (memory.available, nodefs.available \
             of the file system under the state directory); free memory or disk (df -h) and run \
             the test again",
            node.name_any()
        );
    }
    Ok((client, node))
}

/// Removes every image of `repository` (`127.0.0.1:24000/library/redis`: its tags and digests)
/// from the containerd of each real node of the dev cluster brought up with `options`, so that
/// the next pod that names it pulls it (with `imagePullPolicy: IfNotPresent`, as the operator's
/// pods have it, a node that pulled it once would otherwise run it without asking the
/// registry, whatever pull Secret the pod has). Returns the names removed.
pub async fn remove_images(
    options: &EnsureOptions,
    repository: &str,
) -> anyhow::Result<Vec<String>> {
    let repository = repository.to_string();
    remove_images_named(options, move |name| {
        name.strip_prefix(repository.as_str())
            .is_some_and(|rest| rest.starts_with(':') || rest.starts_with('@'))
    })
    .await
}

/// Removes the tags `references` (`docker.io/library/redis:8.2.3`), exactly, from each real
/// node, so that the next pod naming one pulls it. The node's other tags and its digest names
/// stay, and the image with them: later tests that name those still find them. Returns the
/// names removed.
pub async fn remove_tags(
    options: &EnsureOptions,
    references: &[&str],
) -> anyhow::Result<Vec<String>> {
    let references: Vec<String> = references.iter().map(|r| r.to_string()).collect();
    remove_images_named(options, move |name| references.iter().any(|r| r == name)).await
}

/// Removes, from the containerd of each real node, the images whose names `select` picks.
async fn remove_images_named(
    options: &EnsureOptions,
    select: impl Fn(&str) -> bool + Send + 'static,
) -> anyhow::Result<Vec<String>> {
    let kubeconfig = DevCluster::kubeconfig_with(options).await?;
    let nodes = kubeconfig
        .parent()
        .context("the kubeconfig is in the state directory")?
        .join("nodes");
    let ctr = crate::tools::ctr()?;
    tokio::task::spawn_blocking(move || {
        let mut removed = Vec::new();
        for node in std::fs::read_dir(&nodes)
            .with_context(|| format!("the real nodes' directories in {}", nodes.display()))?
        {
            let socket: PathBuf = node?.path().join("containerd.sock");
            if !socket.exists() {
                continue;
            }
            let run = |args: &[&str]| -> anyhow::Result<String> {
                let output = std::process::Command::new(&ctr)
                    .arg("--address")
                    .arg(&socket)
                    .args(["--namespace", "k8s.io"])
                    .args(args)
                    .output()
                    .with_context(|| format!("running {}", ctr.display()))?;
                anyhow::ensure!(
                    output.status.success(),
                    "ctr {} on {}: {}",
                    args.join(" "),
                    socket.display(),
                    String::from_utf8_lossy(&output.stderr)
                );
                Ok(String::from_utf8_lossy(&output.stdout).into_owned())
            };
            let names: Vec<String> = run(&["images", "ls", "-q"])?
                .lines()
                .filter(|name| select(name))
                .map(str::to_string)
                .collect();
            if names.is_empty() {
                continue;
            }
            let mut args = vec!["images", "rm", "--sync"];
            args.extend(names.iter().map(String::as_str));
            run(&args)?;
            removed.extend(names);
        }
        Ok(removed)
    })
    .await?
}

/// The first Ready node of [`REAL_NODE_INSTANCE_TYPE`] labelled a real node, waiting up to
/// `timeout` for one.
pub async fn ready_real_node(client: &Client, timeout: Duration) -> anyhow::Result<Node> {
    let nodes: Api<Node> = Api::all(client.clone());
    let selector = format!(
        "{REAL_NODE_LABEL}=true,node.kubernetes.io/instance-type={REAL_NODE_INSTANCE_TYPE}"
    );
    let deadline = Instant::now() + timeout;
    loop {
        let listed = nodes
            .list(&ListParams::default().labels(&selector))
            .await?
            .items;
        if let Some(node) = listed.iter().find(|n| is_ready(n)) {
            return Ok(node.clone());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "no Ready real node ({selector}) after {timeout:?}: {}; a real node needs the \
             kubelet and containerd (hack/build-tools.sh kubernetes containerd), runc and the \
             CNI plugins (hack/install-node-runtime.sh), root, and the pool {REAL_NODE_POOL} \
             (MEMBENCH_DEV_CLUSTER_EXTRA_NODES)",
            if listed.is_empty() {
                "none is registered".to_string()
            } else {
                listed
                    .iter()
                    .map(|n| format!("{} is not Ready", n.name_any()))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The node's pressure conditions that are on (`DiskPressure: kubelet has disk pressure`), if
/// any: under pressure the kubelet evicts running pods and the scheduler places none.
pub fn under_pressure(node: &Node) -> Option<String> {
    let conditions = node.status.as_ref()?.conditions.as_ref()?;
    let on: Vec<String> = conditions
        .iter()
        .filter(|c| c.type_.ends_with("Pressure") && c.status == "True")
        .map(|c| {
            format!(
                "{}: {}",
                c.type_,
                c.message.as_deref().unwrap_or("no message")
            )
        })
        .collect();
    (!on.is_empty()).then(|| on.join("; "))
}

fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        })
}
