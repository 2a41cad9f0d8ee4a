//! The cluster quickstart as a reader runs it: the commands of the first shell block under
//! "## Quickstart" in docs/src/getting-started/cluster.md, read from the page (never a copy),
//! run by bash on the dev cluster with its real node: helm installs the chart as the page says
//! (the operator pod on a node agent's node, watching every namespace), and
//! `manifests/examples/quickstart.yaml` is applied unedited but for the instance type the page's
//! own command takes from the nodes labelled `membench.io/pool=benchmarks`. That is the real
//! node's, which is tainted as the page's benchmark nodes are: the engines and clients run there
//! in containers (containerd and runc) only because the chart's default tolerations let them.
//! The page's `kubectl wait` and `membench report` must succeed. Then the benchmark's status
//! holds both engines' results from the real node, and the operator's `/metrics` serves them.
//!
//! The images the chart names (`ghcr.io/membench/membench:<appVersion>` for the clients, the
//! official `redis:8.2.3` and `valkey/valkey:9.1.2`) are taken off the real node first, so its
//! containerd pulls them, through the dev cluster's registry, which mirrors docker.io and ghcr.io
//! for the real nodes (hack/dev-cluster-registry.sh): the registry's log must show the pulls.
//!
//! The chart's operator watches every namespace, so this file holds one test and leaves nothing
//! installed: test binaries run one at a time, and the next one meets no second operator.
//!
//! Needs the dev cluster with a real node (`real_nodes::ensure_real_node` starts it), its kubectl
//! and helm (`hack/build-tools.sh`), the membench image (`hack/build-image.sh`) and the engine
//! store's Redis 8.2.3 and Valkey 9.1.2, which the registry serves as the official images.

mod observability;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use membench::crd::{MemoryBenchmark, Phase};
use membench_devcluster::real_nodes::{
    REAL_NODE_INSTANCE_TYPE, ensure_real_node, remove_tags, with_real_node,
};
use membench_devcluster::registry::{MEMBENCH_REPOSITORY, REGISTRY_USER, Registry};
use membench_devcluster::{DevCluster, EnsureOptions};

use observability::{helm, http_get, repo_root};

const PAGE: &str = "docs/src/getting-started/cluster.md";

/// The lines of the first ```sh block after the heading `## Quickstart`, with the line number
/// of the block's first line.
fn quickstart_commands(page: &str) -> anyhow::Result<(usize, String)> {
    let mut lines = page.lines().enumerate();
    lines
        .by_ref()
        .find(|(_, line)| line.trim_end() == "## Quickstart")
        .context("no `## Quickstart` heading")?;
    let (start, _) = lines
        .by_ref()
        .find(|(_, line)| line.trim_end() == "```sh")
        .context("no ```sh block after `## Quickstart`")?;
    let mut block = String::new();
    for (_, line) in lines {
        if line.trim_end() == "```" {
            return Ok((start + 2, block));
        }
        block.push_str(line);
        block.push('\n');
    }
    anyhow::bail!("the block after `## Quickstart` never ends")
}

/// Takes away what the quickstart installs, ignoring what is not there: the benchmark, the
/// chart's release, its namespace.
fn uninstall(kubectl: &Path, helm: &Path, kubeconfig: &Path) {
    let quiet = |command: &mut Command| {
        let _ = command
            .env("KUBECONFIG", kubeconfig)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
    };
    quiet(Command::new(kubectl).args([
        "delete",
        "mb",
        "quickstart",
        "-n",
        "default",
        "--ignore-not-found",
        "--wait=true",
        "--timeout=60s",
    ]));
    quiet(Command::new(helm).args(["uninstall", "membench", "-n", "membench-system", "--wait"]));
    quiet(Command::new(kubectl).args([
        "delete",
        "namespace",
        "membench-system",
        "--ignore-not-found",
        "--wait=true",
        "--timeout=120s",
    ]));
}

/// What kubectl shows of the quickstart's pods and events and the operator's last log lines,
/// for a failure message.
fn cluster_state(kubectl: &Path, kubeconfig: &Path) -> String {
    let show = |args: &[&str]| -> String {
        match Command::new("timeout")
            .arg("30")
            .arg(kubectl)
            .args(args)
            .env("KUBECONFIG", kubeconfig)
            .output()
        {
            Ok(out) => {
                // The last 40 lines: events of earlier tests come first.
                let text = String::from_utf8_lossy(&out.stdout);
                let lines: Vec<&str> = text.lines().collect();
                format!(
                    "$ kubectl {}\n{}\n{}",
                    args.join(" "),
                    lines[lines.len().saturating_sub(40)..].join("\n"),
                    String::from_utf8_lossy(&out.stderr)
                )
            }
            Err(e) => format!("$ kubectl {}: {e}\n", args.join(" ")),
        }
    };
    [
        show(&["get", "nodes", "-L", "node.kubernetes.io/instance-type"]),
        show(&["get", "pods", "-A", "-o", "wide"]),
        show(&["get", "events", "-A", "--sort-by=.lastTimestamp"]),
        show(&[
            "-n",
            "membench-system",
            "logs",
            "deploy/membench",
            "--tail=60",
        ]),
    ]
    .join("\n")
}

/// Uninstalls on drop, so a failing test leaves no cluster-wide operator behind.
struct Installed {
    kubectl: PathBuf,
    helm: PathBuf,
    kubeconfig: PathBuf,
}

impl Drop for Installed {
    fn drop(&mut self) {
        uninstall(&self.kubectl, &self.helm, &self.kubeconfig);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_quickstart_runs_as_written_on_the_dev_cluster() -> anyhow::Result<()> {
    anyhow::ensure!(
        DevCluster::is_dev_cluster(),
        "the quickstart installs a cluster-wide operator: only on the dev cluster (unset MEMBENCH_TEST_KUBECONFIG)"
    );
    let kubectl = membench_devcluster::tools::kubectl()?;
    let Some(helm) = helm() else {
        observability::missing("no helm (hack/build-tools.sh helm)");
    };
    // The page's benchmark node: the dev cluster's real node, labelled and tainted as the page's
    // node groups are.
    let (client, real_node) = ensure_real_node(&EnsureOptions::default()).await?;
    let with_real_node = with_real_node(&EnsureOptions::default());
    let kubeconfig = DevCluster::kubeconfig_with(&with_real_node).await?;
    // A run killed before its cleanup left it installed: start from nothing.
    uninstall(&kubectl, &helm, &kubeconfig);
    let installed = Installed {
        kubectl: kubectl.clone(),
        helm: helm.clone(),
        kubeconfig: kubeconfig.clone(),
    };

    // The images the chart and the example name, off the real node: its containerd pulls them
    // from the mirror. Their tags only: the node's digest names and the `:dev` tag the other
    // real-node tests' clients run stay.
    let registry = Registry::of_dev_cluster(&with_real_node).await?;
    // The chart's appVersion, which release.rs holds equal to the crate's version.
    let app_version = env!("CARGO_PKG_VERSION");
    let pulled = [
        (
            format!("ghcr.io/{MEMBENCH_REPOSITORY}:{app_version}"),
            format!("/v2/{MEMBENCH_REPOSITORY}/manifests/{app_version}"),
        ),
        (
            "docker.io/library/redis:8.2.3".to_string(),
            "/v2/library/redis/manifests/8.2.3".to_string(),
        ),
        (
            "docker.io/valkey/valkey:9.1.2".to_string(),
            "/v2/valkey/valkey/manifests/9.1.2".to_string(),
        ),
    ];
    let names: Vec<&str> = pulled.iter().map(|(name, _)| name.as_str()).collect();
    remove_tags(&with_real_node, &names).await?;
    let log_offset = registry.log_offset()?;

    let page = std::fs::read_to_string(repo_root().join(PAGE))?;
    let (line, commands) = quickstart_commands(&page)?;
    anyhow::ensure!(
        commands.contains("helm install")
            && commands.contains("manifests/examples/quickstart.yaml"),
        "{PAGE}:{line}: the quickstart no longer installs the chart and applies quickstart.yaml:\n{commands}"
    );
    // The page's commands, in the repository as a reader's checkout, with the dev cluster's
    // kubectl and helm and this build's membench first on PATH.
    let membench = PathBuf::from(env!("CARGO_BIN_EXE_membench"));
    let path = std::env::join_paths(
        [
            kubectl.parent().unwrap(),
            helm.parent().unwrap(),
            membench.parent().unwrap(),
        ]
        .into_iter()
        .map(Path::to_path_buf)
        .chain(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        )),
    )?;
    // Each command traced with the time it started, so that a failure says which one ran
    // long (stderr holds the trace; the page's commands are unchanged).
    let script = format!("PS4='+ $(date +%T) '\nset -euxo pipefail\n{commands}");
    let output = Command::new("timeout")
        .args(["--kill-after=10", "420", "bash", "-c", &script])
        .current_dir(repo_root())
        .env("KUBECONFIG", &kubeconfig)
        .env("PATH", path)
        .output()?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let benchmarks: Api<MemoryBenchmark> = Api::namespaced(client.clone(), "default");
    if !output.status.success() {
        // What the cluster shows first (a CI log keeps the start and the end of a long
        // message), then what the commands printed.
        let status = benchmarks
            .get_opt("quickstart")
            .await?
            .and_then(|b| b.status)
            .map(|s| serde_json::to_string(&s).unwrap_or_default());
        anyhow::bail!(
            "{PAGE}:{line}: the quickstart failed ({}).\nthe benchmark's status: {status:?}\n\
             the cluster:\n{}\nstderr:\n{stderr}\ncommands:\n{commands}\nstdout:\n{stdout}",
            output.status,
            cluster_state(&kubectl, &kubeconfig)
        );
    }

    // The API server took the spec without a warning (it warned of every `uint64` format in the
    // CRD's schema before crd::definition wrote them as int64).
    anyhow::ensure!(
        !stderr.contains("Warning:"),
        "the quickstart's commands printed warnings:\n{stderr}"
    );

    // The type the page's command took is the benchmark pool's, the real node's, and the pods
    // ran there.
    let nodes: Api<Node> = Api::all(client.clone());
    let pool = nodes
        .list(&ListParams::default().labels("membench.io/pool=benchmarks"))
        .await?
        .items;
    let pool_names: Vec<String> = pool.iter().map(|n| n.name_any()).collect();
    assert_eq!(
        pool_names,
        [real_node.name_any()],
        "only the real node is in the benchmark pool"
    );
    let pool_type = REAL_NODE_INSTANCE_TYPE;
    let done = benchmarks.get("quickstart").await?;
    assert_eq!(done.spec.instance_type, pool_type);
    let status = done.status.clone().context("a status")?;
    assert_eq!(status.phase, Some(Phase::Succeeded), "{status:#?}");
    let engines: Vec<&str> = status.engines.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(engines, ["redis-8.2.3", "valkey-9.1.2"], "{status:#?}");
    for engine in &status.engines {
        assert_eq!(
            engine.node_name.as_deref(),
            Some(real_node.name_any().as_str()),
            "{} ran elsewhere than on the real node",
            engine.name
        );
        let summary = engine
            .summary
            .as_ref()
            .with_context(|| format!("{}: no summary in {status:#?}", engine.name))?;
        // 20,000 strings of 100 bytes: each takes more than its value and less than 300 bytes
        // (the page prints about 170 for both engines).
        let bytes = summary.bytes_per_item.median;
        assert!(
            (100.0..300.0).contains(&bytes),
            "{}: {bytes} bytes per item",
            engine.name
        );
        assert_eq!(engine.repetitions.len(), 2, "{}", engine.name);
        // The report the page prints names the engine with its figure.
        assert!(
            stdout.contains(&format!("~{bytes:.1}")),
            "`membench report` does not print {}'s {bytes:.1} bytes per item:\n{stdout}",
            engine.name
        );
    }

    // The real node's containerd pulled every image from the mirror, with the mirror's own
    // credentials (the chart gives the pods no pull Secret).
    let served = registry.served_since(log_offset)?;
    for (image, manifest) in &pulled {
        assert!(
            served
                .iter()
                .any(|r| r.is_containerd_fetch_of(manifest, REGISTRY_USER)),
            "the registry's log shows no pull of {image} ({manifest}) by containerd since the \
             quickstart started (hack/dev-cluster.sh up pushes the images, the membench image \
             from hack/build-image.sh's archive): {served:#?}"
        );
    }

    // The operator's metrics serve both engines' results.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "membench-system");
    let operator = pods
        .list(&ListParams::default().labels("app.kubernetes.io/name=membench"))
        .await?
        .items
        .into_iter()
        .find(|p| p.status.as_ref().and_then(|s| s.pod_ip.as_ref()).is_some())
        .context("the chart's operator pod with an address")?;
    let ip = operator.status.unwrap().pod_ip.unwrap();
    // The operator records a status in its metrics just after writing it: a scrape right
    // after `kubectl wait` may come first (seen once: the median of the engine that finished
    // last missing, its min and max there, as the scrape overtook the update). Scraped until
    // every engine's median is there, within 30 s.
    let has_median = |metrics: &str, engine: &str| {
        metrics.lines().any(|l| {
            l.starts_with("membench_memory_per_item_median_bytes{")
                && l.contains("benchmark=\"quickstart\"")
                && l.contains(&format!("entry=\"{engine}\""))
        })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (code, metrics) = http_get(&format!("{ip}:8080"), "/metrics").await?;
        assert_eq!(code, 200, "{metrics}");
        let missing: Vec<&&str> = engines
            .iter()
            .filter(|engine| !has_median(&metrics, engine))
            .collect();
        if missing.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "/metrics has no median bytes per item of {missing:?} in quickstart 30 s after it Succeeded:\n{}",
            metrics
                .lines()
                .filter(|l| l.starts_with("membench_memory_per_item"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    println!(
        "the quickstart of {PAGE}:{line} ran as written on {pool_type}: {engines:?} Succeeded"
    );
    drop(installed);
    // Nothing is left: the next test binary meets no cluster-wide operator.
    let left = pods.list(&ListParams::default()).await?.items;
    anyhow::ensure!(
        left.is_empty(),
        "pods left in membench-system: {:?}",
        left.iter().map(|p| p.name_any()).collect::<Vec<_>>()
    );
    Ok(())
}
