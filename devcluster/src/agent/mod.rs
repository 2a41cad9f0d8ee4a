//! The node agent: plays the kubelet (and a container runtime) for the dev cluster's fake
//! nodes. It registers the nodes, keeps them Ready, watches the pods bound to them and runs each
//! pod's containers as local processes (see [`pod_worker`]).
//!
//! This is test infrastructure standing in for kubelet and a container runtime, so that the
//! operator can be tested against a real API server, scheduler and controllers on a machine
//! without containers. It is not something users deploy.

pub mod addresses;
pub mod control;
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

use std::collections::{BTreeSet, HashMap, HashSet};
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

/// A pod watch event, with the node whose watch saw it.
type NodeEvent = (
    String,
    Result<watcher::Event<Pod>, kube::runtime::watcher::Error>,
);

/// The nodes the agent plays: those it started with, those tests added, and which of them have
/// fallen silent ([`control`]).
struct Fleet {
    /// The nodes of `--node-pools`: silenced, never removed.
    base: HashSet<String>,
    nodes: HashMap<String, FakeNode>,
    silent: HashSet<String>,
    watches: HashMap<String, tokio::task::JoinHandle<()>>,
    /// What the heartbeat keeps Ready.
    reporting: nodes::Reporting,
}

impl Fleet {
    fn watch(&mut self, pods: &Api<Pod>, node: &str, events: &mpsc::UnboundedSender<NodeEvent>) {
        let stream = watcher(
            pods.clone(),
            watcher::Config::default().fields(&format!("spec.nodeName={node}")),
        )
        .default_backoff();
        let (name, events) = (node.to_string(), events.clone());
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                if events.send((name.clone(), event)).is_err() {
                    return;
                }
            }
        });
        if let Some(old) = self.watches.insert(node.to_string(), task) {
            old.abort();
        }
    }

    fn unwatch(&mut self, node: &str) {
        if let Some(task) = self.watches.remove(node) {
            task.abort();
        }
    }

    /// Kills the processes of the node's pods at once, writing nothing about them.
    fn lose_pods(&self, node: &str, workers: &HashMap<String, WorkerHandle>) {
        for worker in workers.values().filter(|w| w.node == node) {
            let _ = worker.events.send(PodEvent::NodeLost);
        }
    }

    async fn publish_reporting(&self) {
        let mut reporting: Vec<FakeNode> = self
            .nodes
            .values()
            .filter(|n| !self.silent.contains(&n.name))
            .cloned()
            .collect();
        reporting.sort_by_key(|n| n.index);
        *self.reporting.lock().await = reporting;
    }

    /// Brings the fleet in line with the control directory's requests.
    #[allow(clippy::too_many_arguments)]
    async fn apply(
        &mut self,
        requests: &control::Requests,
        client: &Client,
        agent: &AgentInfo,
        pods: &Api<Pod>,
        events: &mpsc::UnboundedSender<NodeEvent>,
        workers: &HashMap<String, WorkerHandle>,
        finished: &mut HashMap<String, String>,
    ) {
        let mut changed = false;
        for (name, instance) in &requests.nodes {
            if self.nodes.contains_key(name) {
                continue;
            }
            let used: BTreeSet<u8> = self.nodes.values().map(|n| n.index).collect();
            let Some(index) = control::free_index(&used) else {
                tracing::error!(node = %name, "no free node index; not added");
                continue;
            };
            let node = FakeNode {
                name: name.clone(),
                instance: instance.clone(),
                zone: nodes::ZONES[usize::from(index) % nodes::ZONES.len()],
                index,
            };
            if let Err(e) = nodes::register(client, &node, agent).await {
                tracing::warn!(node = %name, error = %format!("{e:#}"), "adding a node failed; will retry");
                continue;
            }
            tracing::info!(node = %name, instance_type = %instance.name, "a node appeared (control directory)");
            self.nodes.insert(name.clone(), node);
            self.watch(pods, name, events);
            changed = true;
        }
        let gone: Vec<String> = self
            .nodes
            .keys()
            .filter(|n| !self.base.contains(*n) && !requests.nodes.contains_key(*n))
            .cloned()
            .collect();
        for name in gone {
            self.unwatch(&name);
            self.lose_pods(&name, workers);
            // Off the heartbeat's list before the Node is deleted (see nodes::beat_status).
            self.reporting.lock().await.retain(|n| n.name != name);
            if let Err(e) = nodes::deregister(client, &name).await {
                tracing::warn!(node = %name, error = %format!("{e:#}"), "removing a node failed; will retry");
                continue;
            }
            tracing::info!(node = %name, "a node was removed (control directory)");
            self.nodes.remove(&name);
            self.silent.remove(&name);
            changed = true;
        }
        for name in &requests.silent {
            if self.nodes.contains_key(name) && self.silent.insert(name.clone()) {
                tracing::warn!(node = %name, "the node stops reporting (control directory): its processes die, nothing more is written");
                self.unwatch(name);
                self.lose_pods(name, workers);
                self.reporting.lock().await.retain(|n| n.name != *name);
                changed = true;
            }
        }
        let resumed: Vec<String> = self
            .silent
            .iter()
            .filter(|n| !requests.silent.contains(*n))
            .cloned()
            .collect();
        for name in resumed {
            self.silent.remove(&name);
            // Like a kubelet that restarts: its pods are looked at afresh.
            finished.retain(|_, node| *node != name);
            if let Some(node) = self.nodes.get(&name)
                && let Err(e) = nodes::register(client, node, agent).await
            {
                tracing::warn!(node = %name, error = %format!("{e:#}"), "posting the status of a node that reports again failed");
            }
            tracing::info!(node = %name, "the node reports again (control directory)");
            self.watch(pods, &name, events);
            changed = true;
        }
        if changed {
            self.publish_reporting().await;
        }
    }
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
    for dir in [
        config.state_dir.join("pods"),
        security::seccomp_profiles_dir(&config.state_dir),
    ] {
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    }
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
    let reporting: nodes::Reporting = Arc::new(tokio::sync::Mutex::new(nodes.clone()));
    tokio::spawn(nodes::heartbeat(
        client.clone(),
        reporting.clone(),
        agent.clone(),
    ));

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

    // One watch per reporting node, narrowed by spec.nodeName like the kubelet's, each a task
    // feeding one channel, so nodes can come, go and fall silent while the agent runs.
    let pods: Api<Pod> = Api::all(client.clone());
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let mut fleet = Fleet {
        base: nodes.iter().map(|n| n.name.clone()).collect(),
        nodes: nodes.iter().map(|n| (n.name.clone(), n.clone())).collect(),
        silent: HashSet::new(),
        watches: HashMap::new(),
        reporting,
    };
    for node in &nodes {
        fleet.watch(&pods, &node.name, &events_tx);
    }

    let mut workers: HashMap<String, WorkerHandle> = HashMap::new();
    // Finished pods' UIDs, with their node: their later events are not news.
    let mut finished: HashMap<String, String> = HashMap::new();
    let mut listed: HashMap<String, HashSet<String>> = HashMap::new();
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<String>();
    let control_dir = config.state_dir.join("control");
    for sub in [control::NODES_DIR, control::SILENT_DIR] {
        std::fs::create_dir_all(control_dir.join(sub))
            .with_context(|| format!("creating {}", control_dir.join(sub).display()))?;
    }
    let mut control_tick = tokio::time::interval(std::time::Duration::from_secs(1));

    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tracing::info!(nodes = ?nodes.iter().map(|n| &n.name).collect::<Vec<_>>(), control = %control_dir.display(), "node agent running");

    loop {
        tokio::select! {
            _ = terminate.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
            _ = control_tick.tick() => {
                let requests = control::read(&control_dir);
                fleet.apply(&requests, &client, &agent, &pods, &events_tx, &workers, &mut finished).await;
            }
            Some(uid) = done_rx.recv() => {
                if let Some(worker) = workers.remove(&uid) {
                    finished.insert(uid, worker.node);
                }
            }
            Some((node, event)) = events.recv() => {
                if fleet.silent.contains(&node) || !fleet.nodes.contains_key(&node) {
                    // A watch event that was on its way when the node went quiet.
                    continue;
                }
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
                        if finished.contains_key(&uid) {
                            continue;
                        }
                        if let Some(worker) = workers.get(&uid) {
                            let _ = worker.events.send(PodEvent::Updated(Box::new(pod)));
                            continue;
                        }
                        let (tx, rx) = mpsc::unbounded_channel();
                        let node_of = &fleet.nodes[&node];
                        let worker =
                            PodWorker::new(ctx.clone(), pod, node_of.index, node_of.instance.arch);
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
