//! What an engine's pods need next: create the engine pod, wait for a node and for readiness,
//! hand over to its client ([`super::client_lifecycle`]), and fail the engine with a reason
//! when it cannot finish, keeping what its client measured (through [`super::step`]). Pods that an earlier benchmark of
//! the same name left are waited for, never taken as this one's; pods whose node stopped
//! reporting are given up. Called by [`super::plan`] for the engine being measured; pure like it.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use crate::client::phases::PhaseKind;
use crate::crd::{ConditionReason, EngineState};

use super::engine_run::EngineRun;
use super::observation::{LoadProbe, elapsed_since, pods_of, to_the_second};
use super::pod_state::{
    self, PodState, client_state, disruption, has_started, pod_state, stuck_deleting,
};
use super::pull_failure::{pull_failure_note, pull_secret_names};
use super::queue::{busy_nodes, nodes_busy, waiting_message};
use super::results::{absorb, tail};
use super::step::{KeptResult, NEVER_STARTED, Step, container_error_reason, never_started};
use crate::controller::build::pods::{self, Component, engine_index};

/// How an engine container ended, as its pod tells it.
pub(super) struct EngineEnd {
    exit_code: i32,
    /// The container's terminated reason (`OOMKilled`, `Error`, `Completed`).
    why: Option<String>,
    /// Its last words (the termination message, or its log's tail).
    message: Option<String>,
    /// The kubelet's message when it evicted the pod ([`pod_state::evicted`]).
    evicted: Option<String>,
}

impl Step<'_, '_> {
    /// Waits in the node pool's queue: nodes exist but run other engines. No deadline but the
    /// benchmark's own timeoutSeconds.
    pub(super) fn wait_for_free_node(&mut self, run: &mut EngineRun<'_>) {
        let instance_type = self.benchmark.spec.instance_type_of_run(run.index());
        let message = waiting_message(&instance_type, self.benchmarks_ahead(run.index()));
        self.wait(
            run,
            ConditionReason::WaitingForFreeNode,
            message,
            self.settings.poll_interval,
        );
    }

    /// The scheduler found every node of the pool that could take `run`'s engine busy.
    /// When this benchmark's own engines hold all of them and it asks for more at once
    /// (`spec.parallelism`), the pool is smaller than the parallelism: the run waits for one of
    /// them (no deadline but timeoutSeconds), saying how many nodes of the type there are.
    /// Otherwise it waits in the pool's queue behind other benchmarks' engines.
    pub(super) fn wait_for_busy_node(&mut self, run: &mut EngineRun<'_>, scheduler_message: &str) {
        let spec = &self.benchmark.spec;
        let instance_type = spec.instance_type_of_run(run.index());
        let own = self.own_engines_on_nodes(&instance_type);
        let busy = busy_nodes(scheduler_message);
        let shards = spec.engine_of_run(run.index()).shards.unwrap_or(1) as usize;
        match busy {
            Some(nodes) if shards > 1 && nodes <= own && nodes < shards => {
                let message = format!(
                    "spec.engines[{}].shards is {shards}: the run needs {shards} nodes of instance type {instance_type} at once, one per shard, and the pool has {nodes} {} that can take an engine, each running one of this benchmark's engines: the shards wait for more; add nodes of the type (at least {shards}) or lower shards (the scheduler: {})",
                    spec.entry_of_run(run.index()),
                    if nodes == 1 { "node" } else { "nodes" },
                    tail(scheduler_message, 300)
                );
                let after = self.settings.poll_interval;
                self.wait(run, ConditionReason::ShardsAboveNodes, message, after);
            }
            Some(nodes)
                if spec.parallelism > 1 && nodes <= own && nodes < spec.parallelism as usize =>
            {
                let message = format!(
                    "spec.parallelism is {}, but the pool of instance type {instance_type} has {nodes} {} that can take an engine, each running one of this benchmark's engines: this engine waits for one of them to finish; set parallelism to {nodes} or add nodes of the type (the scheduler: {})",
                    spec.parallelism,
                    if nodes == 1 { "node" } else { "nodes" },
                    tail(scheduler_message, 300)
                );
                let after = self.settings.poll_interval;
                self.wait(run, ConditionReason::ParallelismAboveNodes, message, after);
            }
            _ => self.wait_for_free_node(run),
        }
    }

    /// How many of this benchmark's engine pods are bound to a node of `instance_type`.
    pub(super) fn own_engines_on_nodes(&self, instance_type: &str) -> usize {
        let spec = &self.benchmark.spec;
        self.pods
            .iter()
            .filter(|p| pods::component(p) == Some(Component::Engine))
            .filter(|p| {
                engine_index(p).is_some_and(|i| spec.instance_type_of_run(i) == instance_type)
            })
            .filter(|p| pod_state::node_name(p).is_some())
            .count()
    }

    pub(super) fn engine(&mut self, run: &mut EngineRun<'_>, memory: u64, load: Option<LoadProbe>) {
        let engines = self.engine_pods(run.index());
        let sharded = self.several_engine_pods(run.index());
        let lost_shard = engines
            .iter()
            .find(|p| stuck_deleting(p, self.now, self.settings.lost_pod_margin))
            .filter(|_| sharded);
        if self.naming_shard(run, lost_shard, |step, run| step.node_lost(run)) {
            return;
        }
        self.record_shards(run, &engines);
        if let Some(missing) = self.missing_shard(run.index(), &engines) {
            if run.engine().started_at.is_some() {
                let lost = "the engine pod disappeared before the engine finished (deleted by someone else, or evicted)";
                let message = match missing.label {
                    Some(label) => format!("{label}: {lost}"),
                    None => lost.into(),
                };
                self.fail(run, ConditionReason::EnginePodLost, message, false);
            } else {
                self.create_engine_pods(run, memory, &engines);
            }
            return;
        }
        let Some(pod) = Self::followed_shard(&engines) else {
            return;
        };
        if let Some(node) = engines.first().and_then(pod_state::node_name) {
            run.engine_mut().node_name = Some(node);
        }
        let addresses = Self::shard_addresses(&engines);
        // The replica is named whenever it is followed; a shard, or the engine beside a
        // replica, while it is not ready.
        let named = (pods::is_replica(&pod) || sharded && pod_state(&pod) != PodState::Ready)
            .then_some(&pod);
        self.naming_shard(run, named, |step, run| {
            step.engine_pod(run, &pod, addresses, load)
        });
    }

    /// What `run` does about its engine pod `pod` (a sharded run's followed shard), with
    /// the addresses of all its engine pods once each has one.
    fn engine_pod(
        &mut self,
        run: &mut EngineRun<'_>,
        pod: &Pod,
        addresses: Option<Vec<String>>,
        load: Option<LoadProbe>,
    ) {
        let created = pod
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(self.now, |t| t.0);
        run.engine_mut().started_at.get_or_insert(Time(created));
        match pod_state(pod) {
            PodState::Deleting => self.fail(
                run,
                ConditionReason::EnginePodLost,
                "the engine pod was deleted before the engine finished".into(),
                false,
            ),
            PodState::Unscheduled { message } if pods::is_replica(pod) => {
                let message = message.unwrap_or_else(|| "waiting for the scheduler".into());
                self.replica_unscheduled(run, created, &message);
            }
            PodState::Unscheduled { message } => {
                let message = message.unwrap_or_else(|| "waiting for the scheduler".into());
                if nodes_busy(&message) {
                    self.wait_for_busy_node(run, &message);
                } else {
                    let timeout = self.settings.scheduling_timeout;
                    let waited_out = elapsed_since(self.now, created) >= timeout;
                    let instance_type = self.benchmark.spec.instance_type_of_run(run.index());
                    let late = || {
                        format!(
                            "no node of instance type {instance_type} took the engine pod within {} s: {message}",
                            timeout.as_secs()
                        )
                    };
                    self.not_placed(run, waited_out, late, message.clone());
                }
            }
            PodState::ImagePullFailed {
                reason: why,
                message,
                permanent,
            } => {
                let image = run.engine().image.clone().unwrap_or_default();
                let since = pod_state::scheduled_at(pod).unwrap_or(created);
                match self.pull_verdict(since, permanent) {
                    Some(retried) => {
                        let secrets = pull_secret_names(pod);
                        let namespace = pod.namespace().unwrap_or_default();
                        let note = pull_failure_note(&image, &message, &secrets, &namespace);
                        let message = format!(
                            "cannot pull the engine image {image}: {why}: {message}{retried}; {note}"
                        );
                        self.fail(run, ConditionReason::ImagePullFailed, message, false)
                    }
                    None => {
                        let note = self.pull_wait_note(&image, &why, &message, since);
                        let after = Duration::from_secs(5);
                        self.wait(run, ConditionReason::WaitingForImage, note, after);
                    }
                }
            }
            PodState::ContainerError {
                reason: why,
                message,
            } => {
                let why = container_error_reason(&why);
                let message = format!("the engine container could not be started: {message}");
                self.fail(run, why, message, false);
            }
            PodState::ConfigError { message } => {
                let since = pod_state::scheduled_at(pod).unwrap_or(created);
                self.config_error(run, "engine", &message, since, false);
            }
            PodState::Starting { since } if run.engine().state != EngineState::Running => {
                let engine = run.engine_mut();
                engine.reason = Some(ConditionReason::EngineStarting);
                engine.message = Some("the engine is starting".into());
                if since
                    .is_some_and(|s| elapsed_since(self.now, s) >= self.settings.startup_timeout)
                {
                    let message = format!(
                        "the engine did not become ready (accept connections on port 6379) within {} s",
                        self.settings.startup_timeout.as_secs()
                    );
                    self.fail(run, ConditionReason::EngineNotReady, message, false);
                } else {
                    self.requeue(Duration::from_secs(2));
                }
            }
            // It was ready before (the status says so even when the pod's timestamps cannot):
            // a readiness blip, never a startup timeout.
            PodState::Starting { .. } => {
                let since = pod_state::condition_since(pod, "Ready", "False");
                self.engine_unready(run, since, addresses.as_deref(), load);
            }
            PodState::Unready { since } => {
                self.engine_unready(run, since, addresses.as_deref(), load)
            }
            PodState::Ready => {
                let engine = run.engine_mut();
                engine.state = EngineState::Running;
                engine.image_id = pod_state::image_id(pod);
                match addresses {
                    Some(addresses) => self.client(run, &addresses, load),
                    None => self.requeue(Duration::from_secs(2)),
                }
            }
            PodState::Terminated {
                reason: Some(why),
                message,
                ..
            } if NEVER_STARTED.contains(&why.as_str()) => {
                let message = never_started("engine", &why, message.as_deref());
                self.fail(run, ConditionReason::RunContainerError, message, false);
            }
            PodState::Terminated {
                exit_code,
                reason: why,
                message,
                finished_at,
            } => {
                let end = EngineEnd {
                    exit_code,
                    why,
                    message,
                    evicted: pod_state::evicted(pod),
                };
                self.engine_exited(run, end, finished_at)
            }
        }
    }

    /// An engine that was ready and no longer passes its readiness probe (busy, or a network
    /// blip), its run's engines at `addresses` (once each pod has one). A client that runs against it decides what happened; without one, the engine
    /// gets the startup timeout again, counted from the moment it turned unready.
    fn engine_unready(
        &mut self,
        run: &mut EngineRun<'_>,
        since: Option<Timestamp>,
        addresses: Option<&[String]>,
        load: Option<LoadProbe>,
    ) {
        let since_note = since
            .map(|t| format!(" since {}", to_the_second(t)))
            .unwrap_or_default();
        let has_client = !pods_of(self.pods, run.index(), Component::Client).is_empty()
            || run.engine().client_attempts > 0;
        match addresses {
            Some(addresses) if has_client => {
                self.client(run, addresses, load);
                let engine = run.engine_mut();
                if engine.reason == Some(ConditionReason::Measuring) {
                    engine.message = Some(format!(
                        "the engine fails its readiness probe{since_note}; its client carries on"
                    ));
                }
            }
            _ => {
                let unready_for = since.map(|s| elapsed_since(self.now, s));
                if unready_for.is_some_and(|d| d >= self.settings.startup_timeout) {
                    let message = format!(
                        "the engine was ready, then stopped accepting connections on port 6379 for {} s",
                        self.settings.startup_timeout.as_secs()
                    );
                    self.fail(run, ConditionReason::EngineNotReady, message, false);
                } else {
                    let message = format!(
                        "the engine fails its readiness probe{since_note}; waiting for it to recover"
                    );
                    let after = Duration::from_secs(2);
                    self.wait(run, ConditionReason::EngineStarting, message, after);
                }
            }
        }
    }

    /// The engine exited before its results were complete: keep what its client measured. The
    /// client notices within moments (its connection breaks) and leaves its partial result; one
    /// that has not after the grace period is asked to stop.
    fn engine_exited(
        &mut self,
        run: &mut EngineRun<'_>,
        end: EngineEnd,
        finished_at: Option<Timestamp>,
    ) {
        let EngineEnd {
            exit_code,
            why,
            message,
            evicted,
        } = end;
        let client_runs = self.latest_client(run).is_some_and(|c| {
            has_started(&c) && !matches!(client_state(&c), PodState::Terminated { .. })
        });
        let recently =
            finished_at.is_none_or(|f| elapsed_since(self.now, f) < self.settings.crash_grace);
        if client_runs && recently {
            self.requeue(Duration::from_secs(2));
            return;
        }
        let phase = match self.keep_client_result(run) {
            KeptResult::Stopping => {
                let message = format!(
                    "the engine exited with code {exit_code}; stopping the client to keep what it measured"
                );
                let after = Duration::from_secs(1);
                self.wait(run, ConditionReason::StoppingClient, message, after);
                return;
            }
            // Every repetition was measured before the engine went.
            KeptResult::Complete => {
                self.succeed(run);
                return;
            }
            KeptResult::Partial(phase) => phase,
            KeptResult::Nothing => None,
        };
        let done = run.engine().repetitions.len();
        let of = self.benchmark.spec.repetitions;
        let oom = why.as_deref() == Some("OOMKilled");
        let limit = self.engine_memory_limit(run.index());
        // The spec's entry this run is of (runs repeat the entries per instance type).
        let entry = self.benchmark.spec.entry_of_run(run.index());
        let never_ran = done == 0 && run.engine().state != EngineState::Running;
        // The phase the client was in when its connection broke: a kubelet's record says how
        // the container ended, never what it was doing.
        let during = phase
            .as_ref()
            .map(|p| format!("during repetition {}'s {} phase, ", p.repetition, p.name))
            .unwrap_or_default();
        let (why, mut text) = if let Some(kubelet_says) = evicted {
            // The kubelet stopped it (SIGTERM): its exit code says nothing, the eviction does.
            let node = run.engine().node_name.as_deref().unwrap_or("(unknown)");
            let text = format!(
                "the kubelet evicted the engine pod from node {node} after {done} of {of} repetitions: {kubelet_says}"
            );
            (ConditionReason::EngineEvicted, text)
        } else if never_ran && matches!(exit_code, 126 | 127) {
            // A shell's codes for a program it cannot find (127) or execute (126): the image's
            // entrypoint script ran, the server it starts did not. The same pod would fail the
            // same way, as a missing entrypoint does (StartError).
            let text = format!(
                "the engine image's entrypoint could not {} the server (exit {exit_code}); spec.engines[{entry}].image must start {} with the arguments it is given",
                if exit_code == 127 { "find" } else { "execute" },
                self.benchmark
                    .spec
                    .engine_of_run(run.index())
                    .engine
                    .server_binary()
            );
            (ConditionReason::RunContainerError, text)
        } else if oom {
            let text = format!(
                "the engine was OOMKilled (memory limit {limit}) {during}after {done} of {of} repetitions; set spec.engines[{entry}].memory higher{}",
                phase.map_or("", |p| forked_copy_note(
                    &p.name,
                    self.benchmark.spec.engines[entry].engine
                ))
            );
            (ConditionReason::EngineOOMKilled, text)
        } else {
            let text = format!(
                "the engine exited with code {exit_code}{} {during}after {done} of {of} repetitions",
                why.map(|w| format!(" ({w})")).unwrap_or_default()
            );
            (ConditionReason::EngineCrashed, text)
        };
        if let Some(last_words) = message.filter(|m| !m.trim().is_empty()) {
            text.push_str(": ");
            text.push_str(&tail(&last_words, 600));
        }
        self.mark_failed(run, why, text, false);
    }

    /// `run`'s engine pods whose node stopped reporting (see [`stuck_deleting`]): the engine
    /// fails as NodeLost with what is known, the repetitions already in its status and the last
    /// progress reading (what its client measured on that node is gone with it), and the next
    /// engine goes on; the plan gives the pods up (a forced deletion). Returns whether it did.
    fn node_lost(&mut self, run: &mut EngineRun<'_>) -> bool {
        let lost: Vec<&Pod> = self
            .pods
            .iter()
            .filter(|p| engine_index(p) == Some(run.index()))
            .filter(|p| stuck_deleting(p, self.now, self.settings.lost_pod_margin))
            .copied()
            .collect();
        if lost.is_empty() {
            return false;
        }
        let node = lost
            .iter()
            .find_map(|p| pod_state::node_name(p))
            .unwrap_or_else(|| "(unknown)".into());
        let names: Vec<String> = lost.iter().map(|p| p.name_any()).collect();
        let cause = lost
            .iter()
            .find_map(|p| disruption(p))
            .map(|d| format!(" ({d})"))
            .unwrap_or_default();
        let progress = run
            .status()
            .progress
            .as_ref()
            .filter(|p| p.engine == run.index() as u32 + 1)
            .map(|p| format!("; the last progress reading: {}", p.summary))
            .unwrap_or_default();
        // A sharded run's client runs on shard 0's node: another shard's node going loses
        // nothing the client measured, and the client is stopped to keep it.
        let client_lost = lost
            .iter()
            .any(|p| pods::component(p) == Some(Component::Client));
        // The client may still run there (only the kubelet stopped) and serve what it finished.
        let served = self
            .latest_client(run)
            .and_then(|c| match self.served_by(&c.name_any()) {
                Some(Ok(result)) => Some(result),
                _ => None,
            });
        let measured = match served {
            Some(result) => {
                absorb(run.engine_mut(), &result, self.listed());
                "; its client still answered on its pod address and served the repetitions it finished".into()
            }
            None if client_lost => ", so what the client measured there is lost".into(),
            None => String::new(),
        };
        let message = format!(
            "node {node} stopped reporting: {} deleted{cause} and the node had not confirmed it stopped {} s after the grace period ended{measured}{progress}",
            match names.as_slice() {
                [one] => format!("{one} was"),
                many => format!("{} were", many.join(" and ")),
            },
            self.settings.lost_pod_margin.as_secs(),
        );
        self.fail(run, ConditionReason::NodeLost, message, false);
        true
    }

    fn engine_memory_limit(&self, index: usize) -> String {
        pods_of(self.pods, index, Component::Engine)
            .first()
            .and_then(|p| p.spec.as_ref())
            .and_then(|s| s.containers.first())
            .and_then(|c| c.resources.as_ref())
            .and_then(|r| r.limits.as_ref())
            .and_then(|l| l.get("memory"))
            .map_or_else(|| "unknown".into(), |q| q.0.clone())
    }
}

/// What an OOM kill during `phase` says about the limit: a save and a replica's full sync fork
/// on Redis and Valkey, and every page written meanwhile is copied inside the same limit.
/// Dragonfly does not fork.
pub(crate) fn forked_copy_note(phase: &PhaseKind, engine: crate::crd::EngineKind) -> &'static str {
    match phase {
        PhaseKind::Snapshot if engine.capabilities().forks_to_save => {
            " (the save forks: the limit must hold the engine's memory and the pages its writes copied meanwhile)"
        }
        PhaseKind::Replica if engine.capabilities().forks_for_replica_sync => {
            " (the save forks: the limit must hold the engine's memory and the pages its writes copied meanwhile)"
        }
        _ => "",
    }
}
