//! The node agent: plays the kubelet (and a container runtime) for the dev cluster's fake
//! nodes. It registers the nodes, keeps them Ready, watches the pods bound to them and runs each
//! pod's containers as local processes (see [`pod_worker`]).
//!
//! This is test infrastructure standing in for kubelet and a container runtime, so that the
//! operator can be tested against a real API server, scheduler and controllers on a machine
//! without containers. It is not something users deploy.

pub mod addresses;
pub mod image_ref;
pub mod images;
pub mod kubelet_server;
pub mod membench_image;
pub mod mount_namespace;
pub mod nodes;
pub mod oci_archive;
pub mod pod_worker;
pub mod podspec;
pub mod probes;
pub mod process;
pub mod security;
pub mod status;
pub mod volumes;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::Context;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use tokio::sync::mpsc;

use addresses::PodAddresses;
use images::ImageResolver;
use nodes::{AgentInfo, FakeNode};
use pod_worker::{PodEvent, PodWorker};

/// How the agent is configured (see the binary's flags).
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// Fake node pools, e.g. `r8g.4xlarge=2,r7i.4xlarge=2`.
    pub node_pools: String,
    /// Where pod directories (logs, termination messages, PID files) live.
    pub state_dir: PathBuf,
    /// The repository, whose `target/` holds the membench binary.
    pub repo_root: Option<PathBuf>,
    /// The membench binary to run for the membench image on nodes of its architecture.
    pub membench_bin: Option<PathBuf>,
    /// The membench image's OCI archive (default `<target>/image/membench-oci.tar`).
    pub image_archive: Option<PathBuf>,
    /// The engine store whose builds stand in for engine images (hack/install-engines.sh).
    pub engine_store: PathBuf,
    /// The kubelet endpoint serving container logs (`kubectl logs`); without it nodes
    /// advertise port 10250, where nothing answers.
    pub kubelet_tls: Option<kubelet_server::KubeletTls>,
    /// The second octet of node 0's pod addresses (see [`addresses`]).
    pub pod_address_octet: u8,
    /// Where each container's mount namespace mounts a private tmpfs for the program and
    /// working directory its user cannot reach otherwise (see [`mount_namespace`]).
    pub runtime_dir: PathBuf,
}

/// What every pod worker shares.
pub struct AgentContext {
    pub client: Client,
    pub resolver: ImageResolver,
    pub state_dir: PathBuf,
    pub use_mount_namespace: bool,
    pub runtime_dir: PathBuf,
    pub addresses: Mutex<PodAddresses>,
    /// The API server's host and port, for containers with service-account credentials.
    pub api_server: Option<(String, u16)>,
}

struct WorkerHandle {
    node: String,
    events: mpsc::UnboundedSender<PodEvent>,
}

/// Kills processes that an earlier agent started and did not stop (it was killed).
fn kill_leftover_processes(state_dir: &std::path::Path) {
    let Ok(pods) = std::fs::read_dir(state_dir.join("pods")) else {
        return;
    };
    for pod in pods.flatten() {
        let Ok(files) = std::fs::read_dir(pod.path()) else {
            continue;
        };
        for file in files.flatten() {
            if file.path().extension().is_some_and(|e| e == "pid") {
                tracing::info!(file = %file.path().display(), "stopping a process left by an earlier agent");
                process::kill_recorded_process(&file.path());
            }
        }
    }
}

/// Runs the agent until SIGTERM or Ctrl-C, then stops every pod process.
pub async fn run(config: AgentConfig) -> anyhow::Result<()> {
    let kube_config = kube::Config::infer()
        .await
        .context("reading the API server's address and credentials (KUBECONFIG)")?;
    // What containers get as KUBERNETES_SERVICE_HOST/PORT: the API server's own address, since
    // nothing routes the `kubernetes` Service's ClusterIP here.
    let api_server = kube_config
        .cluster_url
        .host()
        .zip(kube_config.cluster_url.port_u16())
        .map(|(host, port)| (host.trim_matches(['[', ']']).to_string(), port));
    let client = Client::try_from(kube_config).context("connecting to the API server")?;
    let nodes = nodes::parse_node_pools(&config.node_pools)?;
    std::fs::create_dir_all(config.state_dir.join("pods"))
        .with_context(|| format!("creating {}", config.state_dir.display()))?;
    kill_leftover_processes(&config.state_dir);

    let use_mount_namespace = process::mount_namespaces_work(&config.state_dir.join("scratch"));
    if use_mount_namespace {
        tracing::info!("termination messages and volumes: bind mounts in private mount namespaces");
    } else {
        tracing::warn!(
            "mount namespaces unavailable: containers get {} instead of their terminationMessagePath, and no volumes",
            process::TERMINATION_MESSAGE_ENV
        );
    }
    if process::user_switching_works() {
        tracing::info!("containers run as their securityContext's user and groups (setpriv)");
    } else {
        tracing::warn!(
            "cannot start processes as other users (not root, or no setpriv): a container with a runAsUser other than the agent's fails to start"
        );
    }

    let version = client
        .apiserver_version()
        .await
        .context("asking the API server its version")?;
    let kubelet_port = match &config.kubelet_tls {
        Some(tls) => {
            let tls = tls.clone();
            let state_dir = config.state_dir.clone();
            let port = tls.address.port();
            tokio::spawn(async move {
                if let Err(e) = kubelet_server::serve(tls, state_dir).await {
                    tracing::error!(error = %format!("{e:#}"), "kubelet endpoint failed; kubectl logs will not work");
                }
            });
            i32::from(port)
        }
        None => 10250,
    };
    let agent = AgentInfo {
        kubelet_port,
        kubelet_version: version.git_version.clone(),
    };
    for node in &nodes {
        nodes::register(&client, node, &agent).await?;
    }
    tokio::spawn(nodes::heartbeat(client.clone(), nodes.clone(), agent));

    let ctx = Arc::new(AgentContext {
        client: client.clone(),
        resolver: {
            let resolver = ImageResolver::new(
                config.engine_store.clone(),
                config.membench_bin.clone(),
                config.repo_root.clone(),
            );
            let archive = config
                .image_archive
                .clone()
                .or_else(|| resolver.image_archive().map(Path::to_path_buf));
            resolver.with_image_archive(archive, config.state_dir.join("images"))
        },
        state_dir: config.state_dir.clone(),
        use_mount_namespace,
        runtime_dir: config.runtime_dir.clone(),
        addresses: Mutex::new(PodAddresses::new(config.pod_address_octet)),
        api_server,
    });

    // One watch per node, narrowed by spec.nodeName like the kubelet's.
    let pods: Api<Pod> = Api::all(client.clone());
    let streams = nodes.iter().map(|node| {
        let name = node.name.clone();
        watcher(
            pods.clone(),
            watcher::Config::default().fields(&format!("spec.nodeName={}", node.name)),
        )
        .default_backoff()
        .map(move |event| (name.clone(), event))
        .boxed()
    });
    let mut events = futures::stream::select_all(streams);

    let mut workers: HashMap<String, WorkerHandle> = HashMap::new();
    let mut finished: HashSet<String> = HashSet::new();
    let mut listed: HashMap<String, HashSet<String>> = HashMap::new();
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<String>();
    let node_index: HashMap<String, (u8, &'static str)> = nodes
        .iter()
        .map(|n: &FakeNode| (n.name.clone(), (n.index, n.instance.arch)))
        .collect();

    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tracing::info!(nodes = ?nodes.iter().map(|n| &n.name).collect::<Vec<_>>(), "node agent running");

    loop {
        tokio::select! {
            _ = terminate.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
            Some(uid) = done_rx.recv() => {
                workers.remove(&uid);
                finished.insert(uid);
            }
            item = events.next() => {
                let Some((node, event)) = item else { break };
                let event = match event {
                    Ok(event) => event,
                    Err(e) => {
                        tracing::warn!(node, error = %e, "pod watch error");
                        continue;
                    }
                };
                match event {
                    watcher::Event::Init => {
                        listed.insert(node, HashSet::new());
                    }
                    watcher::Event::InitApply(pod) | watcher::Event::Apply(pod) => {
                        let uid = pod.uid().unwrap_or_default();
                        if let Some(set) = listed.get_mut(&node) {
                            set.insert(uid.clone());
                        }
                        if finished.contains(&uid) {
                            continue;
                        }
                        if let Some(worker) = workers.get(&uid) {
                            let _ = worker.events.send(PodEvent::Updated(Box::new(pod)));
                            continue;
                        }
                        let (tx, rx) = mpsc::unbounded_channel();
                        let (index, arch) = node_index[&node];
                        let worker = PodWorker::new(ctx.clone(), pod, index, arch);
                        let done = done_tx.clone();
                        let uid_done = uid.clone();
                        tokio::spawn(async move {
                            worker.run(rx).await;
                            let _ = done.send(uid_done);
                        });
                        workers.insert(uid, WorkerHandle { node: node.clone(), events: tx });
                    }
                    watcher::Event::Delete(pod) => {
                        let uid = pod.uid().unwrap_or_default();
                        if let Some(worker) = workers.get(&uid) {
                            let _ = worker.events.send(PodEvent::Deleted);
                        }
                    }
                    watcher::Event::InitDone => {
                        // Pods that vanished while the watch was down.
                        let seen = listed.remove(&node).unwrap_or_default();
                        for (uid, worker) in &workers {
                            if worker.node == node && !seen.contains(uid) {
                                let _ = worker.events.send(PodEvent::Deleted);
                            }
                        }
                    }
                }
            }
        }
    }

    tracing::info!(
        pods = workers.len(),
        "stopping: stopping every pod's processes"
    );
    for worker in workers.values() {
        let _ = worker.events.send(PodEvent::Shutdown);
    }
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while !workers.is_empty() {
        match tokio::time::timeout_at(deadline, done_rx.recv()).await {
            Ok(Some(uid)) => {
                workers.remove(&uid);
            }
            _ => break,
        }
    }
    Ok(())
}
