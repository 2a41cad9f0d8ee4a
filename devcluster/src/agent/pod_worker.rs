//! One pod's life on a fake node, as the kubelet lives it: "pull" each image, start the
//! containers as local processes (init containers first, one at a time), run their probes,
//! enforce the memory limit, restart per `restartPolicy`, write the pod's status, and on
//! deletion stop the processes (SIGTERM, SIGKILL after the grace period) and remove the pod.
//!
//! A worker is a task fed with the pod's watch events; everything else it learns (process exits,
//! probe results) comes back to it over channels, so its state has a single owner.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod, PodStatus, Probe};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Api, Resource, ResourceExt};
use nix::sys::signal::Signal;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::AgentContext;
use super::images::{PullError, PulledImage};
use super::mount_namespace::WorkingDir;
use super::nodes::{FIELD_MANAGER, NODE_IP};
use super::podspec::{container_env, expand, memory_limit_bytes};
use super::probes::{ExecContext, ProbeResult, ProbeTiming, run_probe};
use super::process::{
    ContainerProcess, LaunchSpec, exit_code, process_group_rss_bytes, read_termination_message,
    signal_group, tail_of_log,
};
use super::security::process_identity;
use super::status::{ContainerRecord, Lifecycle, PodRecord, Termination, pod_status, status_patch};
use super::volumes::{VolumeSources, mounts_service_account, prepare_volumes};

/// What the dispatcher tells a worker.
#[derive(Debug)]
pub enum PodEvent {
    /// The pod changed (or was listed again).
    Updated(Box<Pod>),
    /// The pod object is gone from the API server.
    Deleted,
    /// The agent is stopping: stop the processes, write nothing.
    Shutdown,
    /// The node stopped reporting (a test made it so): its processes die at once, as with a
    /// machine that lost power, and nothing more is written about the pod.
    NodeLost,
}

/// How often the worker checks memory, deadlines and due work.
const TICK: Duration = Duration::from_millis(250);
/// The kubelet's restart back-off: 10s doubling up to 5 minutes.
const INITIAL_BACKOFF: Duration = Duration::from_secs(10);
const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// A failed pull is reported as `ErrImagePull`, then as `ImagePullBackOff` until the retry.
const ERR_IMAGE_PULL_SHOWN_FOR: Duration = Duration::from_secs(2);
/// How long processes get to exit on SIGTERM when the agent itself stops.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ProbeKind {
    Startup,
    Readiness,
    Liveness,
}

struct ProbeState {
    probe: Probe,
    timing: ProbeTiming,
    next_at: Instant,
    successes: u32,
    failures: u32,
    in_flight: bool,
}

impl ProbeState {
    fn new(probe: &Option<Probe>, started: Instant) -> Option<ProbeState> {
        let probe = probe.clone()?;
        let timing = ProbeTiming::of(&probe);
        Some(ProbeState {
            next_at: started + timing.initial_delay,
            probe,
            timing,
            successes: 0,
            failures: 0,
            in_flight: false,
        })
    }
}

/// The current process of a container.
struct Run {
    id: u64,
    pid: i32,
    started_at: Timestamp,
    started_instant: Instant,
    env: BTreeMap<String, String>,
    oom_killed: bool,
    /// Set once the process was asked to stop: SIGKILL when it passes.
    kill_deadline: Option<Instant>,
    startup: Option<ProbeState>,
    readiness: Option<ProbeState>,
    liveness: Option<ProbeState>,
}

/// One container of the pod (init or regular).
struct Slot {
    spec: Container,
    init: bool,
    record: ContainerRecord,
    pulled: Option<PulledImage>,
    run: Option<Run>,
    /// When to try again: a pull, a config lookup, or a restart.
    retry_at: Option<Instant>,
    pull_failed_at: Option<Instant>,
    backoff: Duration,
    starts: u32,
    memory_limit: Option<u64>,
}

impl Slot {
    fn new(spec: &Container, init: bool) -> Slot {
        Slot {
            record: ContainerRecord::new(&spec.name, spec.image.as_deref().unwrap_or_default()),
            memory_limit: memory_limit_bytes(spec),
            spec: spec.clone(),
            init,
            pulled: None,
            run: None,
            retry_at: None,
            pull_failed_at: None,
            backoff: INITIAL_BACKOFF,
            starts: 0,
        }
    }

    fn terminated(&self) -> bool {
        matches!(self.record.lifecycle, Lifecycle::Terminated(_))
    }

    fn succeeded(&self) -> bool {
        matches!(&self.record.lifecycle, Lifecycle::Terminated(t) if t.exit_code == 0)
    }

    fn file(&self, dir: &std::path::Path, suffix: &str) -> PathBuf {
        dir.join(format!("{}.{suffix}", self.spec.name))
    }
}

struct Exit {
    slot: usize,
    run_id: u64,
    status: std::io::Result<std::process::ExitStatus>,
}

struct ProbeOutcome {
    slot: usize,
    run_id: u64,
    kind: ProbeKind,
    result: ProbeResult,
}

/// Why the worker is stopping its processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stopping {
    No,
    /// The pod is being deleted: stop, write the final status, remove the pod.
    Deletion,
    /// The agent is stopping.
    Shutdown,
}

pub struct PodWorker {
    ctx: Arc<AgentContext>,
    api: Api<Pod>,
    pod: Pod,
    uid: String,
    node_index: u8,
    /// The node's `kubernetes.io/arch`: which variant of each image it runs.
    node_arch: &'static str,
    dir: PathBuf,
    slots: Vec<Slot>,
    pod_ip: Option<Ipv4Addr>,
    start_time: Timestamp,
    last_written: Option<PodStatus>,
    recorder: Recorder,
    stopping: Stopping,
    shutdown_deadline: Option<Instant>,
    /// The pod was already finished (Succeeded/Failed) when this agent first saw it: leave it
    /// as it is until it is deleted.
    adopted_terminal: bool,
    next_run_id: u64,
    exits_tx: mpsc::UnboundedSender<Exit>,
    exits_rx: mpsc::UnboundedReceiver<Exit>,
    probes_tx: mpsc::UnboundedSender<ProbeOutcome>,
    probes_rx: mpsc::UnboundedReceiver<ProbeOutcome>,
    done: bool,
}

impl PodWorker {
    pub fn new(
        ctx: Arc<AgentContext>,
        pod: Pod,
        node_index: u8,
        node_arch: &'static str,
    ) -> PodWorker {
        let namespace = pod.namespace().unwrap_or_default();
        let uid = pod.uid().unwrap_or_default();
        let dir = ctx
            .state_dir
            .join("pods")
            .join(format!("{namespace}_{}_{uid}", pod.name_any()));
        let spec = pod.spec.clone().unwrap_or_default();
        let mut slots: Vec<Slot> = spec
            .init_containers
            .iter()
            .flatten()
            .map(|c| Slot::new(c, true))
            .collect();
        let has_init = !slots.is_empty();
        slots.extend(spec.containers.iter().map(|c| {
            let mut slot = Slot::new(c, false);
            if has_init {
                // What the kubelet reports for containers waiting on init containers.
                slot.record.lifecycle = Lifecycle::Waiting {
                    reason: "PodInitializing".into(),
                    message: None,
                };
            }
            slot
        }));
        let (exits_tx, exits_rx) = mpsc::unbounded_channel();
        let (probes_tx, probes_rx) = mpsc::unbounded_channel();
        let recorder = Recorder::new(
            ctx.client.clone(),
            Reporter {
                controller: "kubelet".into(),
                instance: spec.node_name.clone(),
            },
        );
        PodWorker {
            api: Api::namespaced(ctx.client.clone(), &namespace),
            ctx,
            uid,
            node_index,
            node_arch,
            dir,
            slots,
            pod_ip: None,
            start_time: Timestamp::now(),
            last_written: None,
            recorder,
            stopping: Stopping::No,
            shutdown_deadline: None,
            adopted_terminal: false,
            next_run_id: 0,
            exits_tx,
            exits_rx,
            probes_tx,
            probes_rx,
            done: false,
            pod,
        }
    }

    fn pod_label(&self) -> String {
        format!(
            "{}/{}",
            self.pod.namespace().unwrap_or_default(),
            self.pod.name_any()
        )
    }

    /// Runs the pod until it is gone (or the agent stops).
    pub async fn run(mut self, mut events: mpsc::UnboundedReceiver<PodEvent>) {
        self.adopt_existing_status();
        if let Err(e) = std::fs::create_dir_all(self.dir.join("work")) {
            tracing::error!(pod = %self.pod_label(), error = %e, "cannot create the pod directory");
        }
        if !self.adopted_terminal {
            self.assign_address();
        }
        if self.pod.metadata.deletion_timestamp.is_some() {
            self.begin_deletion();
        }
        while !self.done {
            self.advance().await;
            if self.done {
                break;
            }
            self.write_status().await;
            tokio::select! {
                event = events.recv() => match event {
                    Some(PodEvent::Updated(pod)) => self.updated(*pod),
                    Some(PodEvent::Deleted | PodEvent::NodeLost) => self.deleted(),
                    Some(PodEvent::Shutdown) | None => self.begin_shutdown(),
                },
                Some(exit) = self.exits_rx.recv() => self.exited(exit).await,
                Some(outcome) = self.probes_rx.recv() => self.probed(outcome).await,
                _ = tokio::time::sleep(TICK) => {}
            }
        }
        self.release();
    }

    /// A pod this agent did not start but finds bound to its node (the agent restarted): a
    /// finished pod is left alone; containers it says were running are lost, and are reported
    /// like a kubelet reports containers it can no longer find.
    fn adopt_existing_status(&mut self) {
        let Some(status) = self.pod.status.clone() else {
            return;
        };
        if matches!(status.phase.as_deref(), Some("Succeeded" | "Failed")) {
            self.adopted_terminal = true;
            return;
        }
        if let Some(start) = &status.start_time {
            self.start_time = start.0;
        }
        if let Some(ip) = status.pod_ip.as_deref().and_then(|ip| ip.parse().ok()) {
            self.pod_ip = Some(ip);
        }
        let previous: Vec<_> = status
            .init_container_statuses
            .iter()
            .flatten()
            .chain(status.container_statuses.iter().flatten())
            .cloned()
            .collect();
        let mut lost = Vec::new();
        for (i, slot) in self.slots.iter_mut().enumerate() {
            let Some(old) = previous.iter().find(|s| s.name == slot.spec.name) else {
                continue;
            };
            let state = old.state.clone().unwrap_or_default();
            slot.record.restart_count = old.restart_count;
            slot.starts = u32::try_from(old.restart_count).unwrap_or(0);
            if let Some(t) = &state.terminated
                && slot.init
                && t.exit_code == 0
            {
                // A finished init container stays finished.
                slot.record.lifecycle = Lifecycle::Terminated(Termination {
                    exit_code: 0,
                    signal: t.signal,
                    reason: t.reason.clone().unwrap_or_else(|| "Completed".into()),
                    message: t.message.clone(),
                    started_at: t.started_at.as_ref().map(|s| s.0),
                    finished_at: t
                        .finished_at
                        .as_ref()
                        .map(|s| s.0)
                        .unwrap_or_else(Timestamp::now),
                    container_id: t.container_id.clone(),
                });
                continue;
            }
            if state.running.is_some() || old.started == Some(true) {
                slot.starts = slot.starts.max(1);
                lost.push((
                    i,
                    Termination {
                        exit_code: 137,
                        signal: None,
                        reason: "ContainerStatusUnknown".into(),
                        message: Some(
                            "The container could not be located when the node agent restarted"
                                .into(),
                        ),
                        started_at: state.running.and_then(|r| r.started_at).map(|s| s.0),
                        finished_at: Timestamp::now(),
                        container_id: old.container_id.clone(),
                    },
                ));
            }
        }
        for (i, termination) in lost {
            self.finish_run(i, termination);
        }
    }

    fn assign_address(&mut self) {
        let mut addresses = self.ctx.addresses.lock().unwrap();
        if let Some(ip) = self.pod_ip {
            addresses.reserve(ip);
            return;
        }
        let ip = if self.pod.spec.as_ref().and_then(|s| s.host_network) == Some(true) {
            Some(NODE_IP.parse().expect("a valid address"))
        } else {
            addresses.allocate(self.node_index)
        };
        self.pod_ip = ip;
        if ip.is_none() {
            tracing::error!(pod = %self.pod_label(), "no free pod address on this node");
        }
    }

    fn release(&mut self) {
        if let Some(ip) = self.pod_ip.take()
            && ip.to_string() != NODE_IP
        {
            self.ctx.addresses.lock().unwrap().release(ip);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }

    fn updated(&mut self, pod: Pod) {
        let deleting = pod.metadata.deletion_timestamp.is_some();
        self.pod = pod;
        if deleting && self.stopping == Stopping::No {
            self.begin_deletion();
        }
    }

    /// The pod object is gone (force-deleted, or deleted by us): kill everything now.
    fn deleted(&mut self) {
        for slot in &self.slots {
            if let Some(run) = &slot.run {
                signal_group(run.pid, Signal::SIGKILL);
            }
        }
        self.done = true;
    }

    fn grace_period(&self) -> Duration {
        let seconds = self
            .pod
            .metadata
            .deletion_grace_period_seconds
            .or_else(|| {
                self.pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.termination_grace_period_seconds)
            })
            .unwrap_or(30);
        Duration::from_secs(seconds.max(0) as u64)
    }

    fn begin_deletion(&mut self) {
        self.stopping = Stopping::Deletion;
        let deadline = Instant::now() + self.grace_period();
        for slot in &mut self.slots {
            if let Some(run) = &mut slot.run {
                signal_group(run.pid, Signal::SIGTERM);
                run.kill_deadline = Some(deadline);
            }
        }
    }

    fn begin_shutdown(&mut self) {
        self.stopping = Stopping::Shutdown;
        self.shutdown_deadline = Some(Instant::now() + SHUTDOWN_GRACE);
        for slot in &self.slots {
            if let Some(run) = &slot.run {
                signal_group(run.pid, Signal::SIGTERM);
            }
        }
    }

    /// Does whatever is due: stopping, starting, restarting, probing, memory checks.
    async fn advance(&mut self) {
        let now = Instant::now();
        for slot in &mut self.slots {
            if let Some(run) = &mut slot.run
                && run.kill_deadline.is_some_and(|d| d <= now)
            {
                signal_group(run.pid, Signal::SIGKILL);
            }
        }
        let running = self.slots.iter().any(|s| s.run.is_some());
        match self.stopping {
            Stopping::Shutdown => {
                if !running {
                    self.done = true;
                } else if self.shutdown_deadline.is_some_and(|d| d <= now) {
                    for slot in &self.slots {
                        if let Some(run) = &slot.run {
                            signal_group(run.pid, Signal::SIGKILL);
                        }
                    }
                    self.done = true;
                }
                return;
            }
            Stopping::Deletion => {
                if !running {
                    self.finish_deletion().await;
                }
                return;
            }
            Stopping::No => {}
        }
        if self.adopted_terminal || self.pod_ip.is_none() {
            return;
        }

        // Init containers run one at a time, in order, each to success.
        let mut init_done = true;
        for i in 0..self.slots.len() {
            if !self.slots[i].init || self.slots[i].succeeded() {
                continue;
            }
            init_done = false;
            if !self.slots[i].terminated() {
                self.progress(i).await;
            }
            break;
        }
        if init_done {
            for i in 0..self.slots.len() {
                if !self.slots[i].init {
                    self.progress(i).await;
                }
            }
        }

        for i in 0..self.slots.len() {
            self.check_memory(i);
            self.schedule_probes(i);
        }
    }

    /// Moves a container that is not running towards running, when its retry time has come.
    async fn progress(&mut self, i: usize) {
        let now = Instant::now();
        let slot = &mut self.slots[i];
        if slot.run.is_some() || slot.terminated() {
            return;
        }
        if let Some(failed_at) = slot.pull_failed_at
            && now >= failed_at + ERR_IMAGE_PULL_SHOWN_FOR
            && let Lifecycle::Waiting { reason, message } = &mut slot.record.lifecycle
            && reason == "ErrImagePull"
        {
            *reason = "ImagePullBackOff".into();
            *message = Some(format!(
                "Back-off pulling image {:?}: ErrImagePull: {}",
                slot.record.image,
                message.clone().unwrap_or_default()
            ));
        }
        if slot.retry_at.is_some_and(|at| at > now) {
            return;
        }
        self.start(i).await;
    }

    /// The container's configuration cannot be built yet (a missing ConfigMap, a token the
    /// API server refused): wait and retry, as the kubelet does.
    async fn config_error(&mut self, i: usize, message: String) {
        let slot = &mut self.slots[i];
        slot.record.lifecycle = Lifecycle::Waiting {
            reason: "CreateContainerConfigError".into(),
            message: Some(message.clone()),
        };
        slot.retry_at = Some(Instant::now() + INITIAL_BACKOFF);
        self.event(
            EventType::Warning,
            "Failed",
            "Create",
            format!("Error: {message}"),
        )
        .await;
    }

    /// A volume cannot be set up yet (a missing Secret or ConfigMap): the container stays
    /// `ContainerCreating` and it is retried, with a `FailedMount` event as the kubelet records.
    async fn mount_error(&mut self, i: usize, message: String) {
        let slot = &mut self.slots[i];
        slot.record.lifecycle = Lifecycle::Waiting {
            reason: "ContainerCreating".into(),
            message: None,
        };
        slot.retry_at = Some(Instant::now() + INITIAL_BACKOFF);
        self.event(EventType::Warning, "FailedMount", "Mount", message)
            .await;
    }

    /// "Pulls" the image, builds the environment and command, and starts the process.
    async fn start(&mut self, i: usize) {
        let pod_ip = self
            .pod_ip
            .expect("an address is assigned before starting")
            .to_string();
        let image = self.slots[i].record.image.clone();

        if self.slots[i].pulled.is_none() {
            match self.ctx.resolver.pull(&image, self.node_arch) {
                Ok(pulled) => {
                    let slot = &mut self.slots[i];
                    slot.record.image_id = Some(pulled.image_id.clone());
                    slot.pulled = Some(pulled.clone());
                    slot.pull_failed_at = None;
                    slot.backoff = INITIAL_BACKOFF;
                    let mut note = format!("Container image {image:?} runs as {}", pulled.image_id);
                    if let Some(why) = &pulled.note {
                        note.push_str(&format!(" ({why})"));
                    }
                    self.event(EventType::Normal, "Pulled", "Pull", note).await;
                }
                Err(PullError(message)) => {
                    let slot = &mut self.slots[i];
                    slot.record.lifecycle = Lifecycle::Waiting {
                        reason: "ErrImagePull".into(),
                        message: Some(message.clone()),
                    };
                    slot.pull_failed_at = Some(Instant::now());
                    slot.retry_at = Some(Instant::now() + slot.backoff);
                    slot.backoff = (slot.backoff * 2).min(MAX_BACKOFF);
                    let note = format!("Failed to pull image {image:?}: {message}");
                    self.event(EventType::Warning, "Failed", "Pull", note).await;
                    return;
                }
            }
        }

        let container = self.slots[i].spec.clone();
        let mut env =
            match container_env(&self.ctx.client, &self.pod, &container, &pod_ip, NODE_IP).await {
                Ok(env) => env,
                Err(e) => return self.config_error(i, e.to_string()).await,
            };
        if mounts_service_account(&container)
            && let Some((host, port)) = &self.ctx.api_server
        {
            env.entry("KUBERNETES_SERVICE_HOST".into())
                .or_insert_with(|| host.clone());
            env.entry("KUBERNETES_SERVICE_PORT".into())
                .or_insert_with(|| port.to_string());
        }
        let pulled = self.slots[i].pulled.clone().expect("pulled above");
        let identity = match process_identity(&self.pod, &container, &pulled) {
            Ok(identity) => identity,
            Err(e) => return self.config_error(i, e.0).await,
        };
        let sources = VolumeSources {
            client: &self.ctx.client,
            pod: &self.pod,
            pod_ip: &pod_ip,
            host_ip: NODE_IP,
        };
        let volume_mounts = match prepare_volumes(&sources, &container, &self.dir).await {
            Ok(mounts) => mounts,
            Err(e) => return self.mount_error(i, e.to_string()).await,
        };
        let command: Vec<String> = container
            .command
            .iter()
            .flatten()
            .map(|s| expand(s, &env))
            .collect();
        let args: Vec<String> = container
            .args
            .iter()
            .flatten()
            .map(|s| expand(s, &env))
            .collect();
        let started_at = Timestamp::now();
        let resolved = self
            .ctx
            .resolver
            .container_command(&pulled, &command, &args)
            .map_err(|e| e.0);
        let spawned = resolved.and_then(|mut cmd| {
            if cmd.is_engine_server {
                // The pod-address shim: engines listen only on their pod's address, as they
                // would in their own network namespace.
                cmd.args.extend(["--bind".to_string(), pod_ip.clone()]);
            }
            // What the image itself sets (its config's Env; LD_PRELOAD of jemalloc for a libc
            // engine build), under what the container sets.
            for (name, value) in &cmd.env {
                if name == "LD_PRELOAD" || !env.contains_key(name) {
                    env.insert(name.clone(), value.clone());
                }
            }
            let slot = &self.slots[i];
            if slot.starts > 0 {
                // Keep the previous run's output for `kubectl logs --previous`.
                let _ = std::fs::rename(
                    slot.file(&self.dir, "log"),
                    slot.file(&self.dir, "previous.log"),
                );
            }
            let launch = LaunchSpec {
                program: cmd.program,
                args: cmd.args,
                wrapper: cmd.wrapper,
                image_root: cmd.image_root,
                env: env.clone(),
                working_dir: container
                    .working_dir
                    .as_deref()
                    .filter(|d| !d.is_empty())
                    .map(|d| WorkingDir::Container(PathBuf::from(d)))
                    .unwrap_or_else(|| WorkingDir::Pod(self.dir.join("work"))),
                log_path: slot.file(&self.dir, "log"),
                termination_file: slot.file(&self.dir, "termination-log"),
                termination_path: container
                    .termination_message_path
                    .clone()
                    .unwrap_or_else(|| "/dev/termination-log".into()),
                start_error_file: slot.file(&self.dir, "start-error"),
                use_mount_namespace: self.ctx.use_mount_namespace,
                volume_mounts: volume_mounts.clone(),
                identity: identity.clone(),
                runtime_dir: self.ctx.runtime_dir.clone(),
                pid_file: slot.file(&self.dir, "pid"),
            };
            ContainerProcess::spawn(&launch)
                .map_err(|e| format!("failed to start {}: {e}", launch.program.display()))
        });

        let process = match spawned {
            Ok(process) => process,
            Err(message) => {
                self.event(
                    EventType::Warning,
                    "Failed",
                    "Start",
                    format!("Error: {message}"),
                )
                .await;
                let t = Termination {
                    exit_code: 128,
                    signal: None,
                    reason: "StartError".into(),
                    message: Some(message),
                    started_at: Some(started_at),
                    finished_at: Timestamp::now(),
                    container_id: None,
                };
                self.slots[i].starts += 1;
                self.finish_run(i, t);
                return;
            }
        };

        self.next_run_id += 1;
        let run_id = self.next_run_id;
        let pid = process.pid();
        let exits = self.exits_tx.clone();
        tokio::spawn(async move {
            let status = process.wait().await;
            let _ = exits.send(Exit {
                slot: i,
                run_id,
                status,
            });
        });
        let now = Instant::now();
        let slot = &mut self.slots[i];
        if slot.starts > 0 {
            slot.record.restart_count += 1;
        }
        slot.starts += 1;
        slot.retry_at = None;
        let startup = ProbeState::new(&slot.spec.startup_probe, now);
        slot.record.started = startup.is_none();
        slot.record.ready =
            slot.record.started && slot.spec.readiness_probe.is_none() && !slot.init;
        slot.record.container_id = Some(format!("local-process://{pid}"));
        slot.record.lifecycle = Lifecycle::Running { started_at };
        slot.run = Some(Run {
            id: run_id,
            pid,
            started_at,
            started_instant: now,
            env,
            oom_killed: false,
            kill_deadline: None,
            startup,
            readiness: if slot.init {
                None
            } else {
                ProbeState::new(&slot.spec.readiness_probe, now)
            },
            liveness: if slot.init {
                None
            } else {
                ProbeState::new(&slot.spec.liveness_probe, now)
            },
        });
        tracing::info!(pod = %self.pod_label(), container = %container.name, pid, ip = %pod_ip, "started container");
        let note = format!("Started container {} (pid {pid})", container.name);
        self.event(EventType::Normal, "Started", "Start", note)
            .await;
    }

    /// Kills a container whose resident memory exceeds its limit, as the kernel's cgroup OOM
    /// killer would (approximately: memory is sampled every 250ms, so a fast allocation can
    /// overshoot before the kill).
    fn check_memory(&mut self, i: usize) {
        let slot = &mut self.slots[i];
        let (Some(run), Some(limit)) = (&mut slot.run, slot.memory_limit) else {
            return;
        };
        if run.oom_killed {
            return;
        }
        let rss = process_group_rss_bytes(run.pid);
        if rss > limit {
            tracing::warn!(container = %slot.spec.name, rss, limit, "memory limit exceeded; killing the container");
            run.oom_killed = true;
            signal_group(run.pid, Signal::SIGKILL);
        }
    }

    async fn exited(&mut self, exit: Exit) {
        let pod_label = self.pod_label();
        let slot = &mut self.slots[exit.slot];
        let Some(run) = slot.run.take_if(|r| r.id == exit.run_id) else {
            return;
        };
        let code = match &exit.status {
            Ok(status) => exit_code(status),
            Err(_) => 128,
        };
        let signal = exit
            .status
            .as_ref()
            .ok()
            .and_then(std::os::unix::process::ExitStatusExt::signal);
        // What the mount shim left when it could not set the container up (its program never
        // ran): the runtime's StartError.
        let start_error = read_termination_message(&slot.file(&self.dir, "start-error"));
        let (exit_code, reason) = if !start_error.is_empty() {
            (128, "StartError")
        } else if run.oom_killed {
            (137, "OOMKilled")
        } else if code == 0 {
            (0, "Completed")
        } else {
            (code, "Error")
        };
        let mut message = if start_error.is_empty() {
            read_termination_message(&slot.file(&self.dir, "termination-log"))
        } else {
            start_error.clone()
        };
        let fallback =
            slot.spec.termination_message_policy.as_deref() == Some("FallbackToLogsOnError");
        if message.is_empty() && fallback && exit_code != 0 {
            message = tail_of_log(&slot.file(&self.dir, "log"));
        }
        tracing::info!(pod = %pod_label, container = %slot.spec.name, exit_code, reason, "container exited");
        // A container that ran long enough is considered healthy again (the kubelet resets
        // its back-off after twice the maximum).
        if run.started_instant.elapsed() > 2 * MAX_BACKOFF {
            slot.backoff = INITIAL_BACKOFF;
        }
        let t = Termination {
            exit_code,
            signal,
            reason: reason.into(),
            message: Some(message),
            started_at: Some(run.started_at),
            finished_at: Timestamp::now(),
            container_id: slot.record.container_id.clone(),
        };
        self.finish_run(exit.slot, t);
        if !start_error.is_empty() {
            let note = format!("Error: failed to start the container: {start_error}");
            self.event(EventType::Warning, "Failed", "Start", note)
                .await;
        }
    }

    /// Records a container's end, and restarts it later if the restart policy says so.
    fn finish_run(&mut self, i: usize, t: Termination) {
        let policy = self
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.restart_policy.clone())
            .unwrap_or_else(|| "Always".into());
        let stopping = self.stopping != Stopping::No;
        let pod_name = self.pod.name_any();
        let slot = &mut self.slots[i];
        slot.record.ready = false;
        slot.record.started = false;
        // Init containers run to success: under Always they restart like OnFailure.
        let restart = !stopping
            && match policy.as_str() {
                "Never" => false,
                "OnFailure" => t.exit_code != 0,
                _ if slot.init => t.exit_code != 0,
                _ => true,
            };
        if restart {
            slot.record.lifecycle = Lifecycle::Waiting {
                reason: "CrashLoopBackOff".into(),
                message: Some(format!(
                    "back-off {}s restarting failed container={} pod={pod_name}",
                    slot.backoff.as_secs(),
                    slot.spec.name
                )),
            };
            slot.retry_at = Some(Instant::now() + slot.backoff);
            slot.backoff = (slot.backoff * 2).min(MAX_BACKOFF);
            slot.record.last_termination = Some(t);
        } else {
            slot.record.lifecycle = Lifecycle::Terminated(t);
        }
    }

    /// Starts the probes that are due, each in its own task.
    fn schedule_probes(&mut self, i: usize) {
        let now = Instant::now();
        let pod_ip = self.pod_ip.map(|ip| ip.to_string()).unwrap_or_default();
        let slot = &mut self.slots[i];
        let started = slot.record.started;
        let Some(run) = &mut slot.run else {
            return;
        };
        if run.kill_deadline.is_some() {
            return;
        }
        let kinds: [(ProbeKind, &mut Option<ProbeState>); 3] = [
            (ProbeKind::Startup, &mut run.startup),
            (ProbeKind::Readiness, &mut run.readiness),
            (ProbeKind::Liveness, &mut run.liveness),
        ];
        for (kind, state) in kinds {
            let Some(state) = state else { continue };
            // Readiness and liveness probes wait for the startup probe.
            if (kind != ProbeKind::Startup && !started) || state.in_flight || state.next_at > now {
                continue;
            }
            state.in_flight = true;
            let probe = state.probe.clone();
            let container = slot.spec.clone();
            let env = run.env.clone();
            let working_dir = self.dir.join("work");
            let ctx = self.ctx.clone();
            let tx = self.probes_tx.clone();
            let pod_ip = pod_ip.clone();
            let run_id = run.id;
            tokio::spawn(async move {
                let find = |name: &str| ctx.resolver.find_program(name);
                let exec = ExecContext {
                    env: &env,
                    working_dir: &working_dir,
                    find_program: &find,
                };
                let result = run_probe(&probe, &container, &pod_ip, &exec).await;
                let _ = tx.send(ProbeOutcome {
                    slot: i,
                    run_id,
                    kind,
                    result,
                });
            });
        }
    }

    async fn probed(&mut self, outcome: ProbeOutcome) {
        let grace = self.grace_period();
        let slot = &mut self.slots[outcome.slot];
        let Some(run) = slot.run.as_mut().filter(|r| r.id == outcome.run_id) else {
            return;
        };
        let state = match outcome.kind {
            ProbeKind::Startup => &mut run.startup,
            ProbeKind::Readiness => &mut run.readiness,
            ProbeKind::Liveness => &mut run.liveness,
        };
        let Some(state) = state.as_mut() else { return };
        state.in_flight = false;
        state.next_at = Instant::now() + state.timing.period;
        let failed_message = match &outcome.result {
            Ok(()) => {
                state.successes += 1;
                state.failures = 0;
                None
            }
            Err(e) => {
                state.failures += 1;
                state.successes = 0;
                Some(e.clone())
            }
        };
        let passed = state.successes >= state.timing.success_threshold;
        let gave_up = state.failures >= state.timing.failure_threshold;
        let mut kill = false;
        match outcome.kind {
            ProbeKind::Startup => {
                if passed {
                    slot.record.started = true;
                    slot.record.ready = slot.spec.readiness_probe.is_none();
                    run.startup = None;
                } else if gave_up {
                    kill = true;
                }
            }
            ProbeKind::Readiness => {
                if passed {
                    slot.record.ready = true;
                } else if gave_up {
                    slot.record.ready = false;
                }
            }
            ProbeKind::Liveness => kill = gave_up,
        }
        if kill {
            // As the kubelet does: the container is killed and restarted per restartPolicy.
            signal_group(run.pid, Signal::SIGTERM);
            run.kill_deadline = Some(Instant::now() + grace);
        }
        let name = slot.spec.name.clone();
        if let Some(message) = failed_message {
            let kind = format!("{:?}", outcome.kind);
            self.event(
                EventType::Warning,
                "Unhealthy",
                "Probe",
                format!("{kind} probe failed: {message}"),
            )
            .await;
            if kill {
                let note = format!(
                    "Container {name} failed its {} probe, will be restarted",
                    kind.to_lowercase()
                );
                self.event(EventType::Normal, "Killing", "Kill", note).await;
            }
        }
    }

    fn record(&self) -> PodRecord {
        let spec = self.pod.spec.as_ref();
        PodRecord {
            init_containers: self
                .slots
                .iter()
                .filter(|s| s.init)
                .map(|s| s.record.clone())
                .collect(),
            containers: self
                .slots
                .iter()
                .filter(|s| !s.init)
                .map(|s| s.record.clone())
                .collect(),
            pod_ip: self.pod_ip.map(|ip| ip.to_string()),
            host_ip: NODE_IP.into(),
            start_time: self.start_time,
            generation: self.pod.metadata.generation,
            readiness_gates: spec
                .and_then(|s| s.readiness_gates.as_ref())
                .map(|gates| gates.iter().map(|g| g.condition_type.clone()).collect())
                .unwrap_or_default(),
        }
    }

    /// Writes the pod's status when it changed since the last write.
    async fn write_status(&mut self) {
        if self.adopted_terminal || self.stopping == Stopping::Shutdown || self.pod_ip.is_none() {
            return;
        }
        // Our own last write is the freshest record of our conditions' transition times; the
        // API server's copy adds conditions others own (readiness gates).
        let mut previous = self
            .last_written
            .clone()
            .or_else(|| self.pod.status.clone())
            .unwrap_or_default();
        let ours = [
            "PodReadyToStartContainers",
            "Initialized",
            "ContainersReady",
            "Ready",
        ];
        let others = self
            .pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default()
            .into_iter()
            .filter(|c| !ours.contains(&c.type_.as_str()));
        previous
            .conditions
            .get_or_insert_with(Vec::new)
            .extend(others);
        let status = pod_status(&self.record(), Some(&previous), Timestamp::now());
        if self.last_written.as_ref() == Some(&status) {
            return;
        }
        let result = self
            .api
            .patch_status(
                &self.pod.name_any(),
                &PatchParams::apply(FIELD_MANAGER),
                &Patch::Strategic(status_patch(&status)),
            )
            .await;
        match result {
            Ok(_) => self.last_written = Some(status),
            // Gone: the watch will say so.
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => {
                tracing::warn!(pod = %self.pod_label(), error = %e, "writing pod status failed; will retry")
            }
        }
    }

    /// Every process stopped after the pod's deletion: write the final status and remove the
    /// pod object (grace 0, only this very pod), as the kubelet does.
    async fn finish_deletion(&mut self) {
        if !self.adopted_terminal {
            self.write_status().await;
        }
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(self.uid.clone()),
                resource_version: None,
            }),
            ..Default::default()
        };
        match self.api.delete(&self.pod.name_any(), &params).await {
            Ok(_) => self.done = true,
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => self.done = true,
            Err(e) => {
                tracing::warn!(pod = %self.pod_label(), error = %e, "deleting pod failed; will retry");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }

    async fn event(&self, type_: EventType, reason: &str, action: &str, note: String) {
        let event = Event {
            type_,
            reason: reason.into(),
            note: Some(note),
            action: action.into(),
            secondary: None,
        };
        let reference = self.pod.object_ref(&());
        if let Err(e) = self.recorder.publish(&event, &reference).await {
            tracing::debug!(error = %e, "publishing an event failed");
        }
    }
}
