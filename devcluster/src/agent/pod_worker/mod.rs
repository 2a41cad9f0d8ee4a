//! One pod's life on a fake node, as the kubelet lives it: "pull" each image, start the
//! containers as local processes (init containers first, one at a time), run their probes,
//! enforce the memory limit, restart per `restartPolicy`, write the pod's status, and on
//! deletion stop the processes (SIGTERM, SIGKILL after the grace period) and remove the pod.
//!
//! A worker is a task fed with the pod's watch events; everything else it learns (process exits,
//! probe results) comes back to it over channels, so its state has a single owner.
//!
//! - `slot.rs`: a container as the worker keeps it, and its current run.
//! - `start.rs`: pulling, configuring and starting a container.
//! - `probes.rs`: when its probes are due and what their results do.
//! - `exits.rs`: how a run ends (the memory limit, exit reasons, termination messages) and the
//!   restart back-off.
//! - `stopping.rs`: deletion, the grace period, the agent's own shutdown.
//! - `status.rs`: writing the pod's status, and taking over one a previous agent wrote.

mod exits;
mod probes;
mod slot;
mod start;
mod status;
mod stopping;

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use k8s_openapi::jiff::Timestamp;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Api, Resource, ResourceExt};
use nix::sys::signal::Signal;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::AgentContext;
use super::nodes::NODE_IP;
use super::process::signal_group;
use super::status::Lifecycle;

use exits::Exit;
use probes::ProbeOutcome;
use slot::Slot;
use stopping::Stopping;

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
