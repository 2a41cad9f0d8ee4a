//! What an engine's pods need next: create the engine pod, wait for a node and for readiness,
//! start the client next to it, read the client's result, retry a failed client, and fail the
//! engine with a reason when it cannot finish. Called by [`super::plan`] for the engine being
//! measured; pure like it.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use crate::client_result::{ClientResult, ReadError};
use crate::crd::{CleanupPolicy, MemoryBenchmark, MemoryBenchmarkStatus};
use crate::workload::Workload;

use super::conditions::{reason, state};
use super::plan::{
    LoadProbe, Plan, PodRejection, Settings, elapsed_since, is_terminal, pods_of, to_the_second,
};
use super::pods::{self, Component, PodState, client_attempt, engine_index, pod_state};
use super::queue::{nodes_busy, waiting_message};
use super::results::{absorb, result_note, retryable, tail};

/// Terminated reasons of a container that never ran: the runtime could not start its program
/// (containerd's `StartError`, Docker's `ContainerCannotRun`).
const NEVER_STARTED: [&str; 2] = ["StartError", "ContainerCannotRun"];

/// The state one reconciliation works on.
pub(super) struct Step<'a, 'p> {
    pub(super) benchmark: &'a MemoryBenchmark,
    pub(super) settings: &'a Settings,
    pub(super) now: Timestamp,
    pub(super) pods: &'a [&'p Pod],
    pub(super) plan: &'a mut Plan,
    pub(super) workload: &'a Workload,
    /// Pods the API server refused to create in this reconciliation.
    pub(super) rejected: &'a [PodRejection],
    /// Benchmarks of the same node pool that wait for a free node and came first.
    pub(super) benchmarks_ahead: usize,
}

impl Step<'_, '_> {
    pub(super) fn requeue(&mut self, after: Duration) {
        self.plan.requeue = Some(self.plan.requeue.map_or(after, |r| r.min(after)));
    }

    /// What the API server said when it refused to create the pod `name`, if it did.
    fn rejection(&self, name: &str) -> Option<String> {
        self.rejected
            .iter()
            .find(|r| r.pod == name)
            .map(|r| r.message.clone())
    }

    /// Waits in the node pool's queue: nodes exist but run other engines. No deadline but the
    /// benchmark's own timeoutSeconds.
    fn wait_for_free_node(&mut self, status: &mut MemoryBenchmarkStatus, index: usize) {
        let engine = &mut status.engines[index];
        engine.reason = Some(reason::WAITING_FOR_FREE_NODE.into());
        engine.message = Some(waiting_message(
            &self.benchmark.spec.instance_type,
            self.benchmarks_ahead,
        ));
        self.requeue(self.settings.poll_interval);
    }

    fn keeps_pods_of(&self, status: &MemoryBenchmarkStatus, index: usize) -> bool {
        self.benchmark.spec.cleanup_policy == CleanupPolicy::KeepFailed
            && status
                .engines
                .get(index)
                .is_some_and(|e| e.state == state::FAILED)
    }

    /// Pods of engines before `index` that should be gone: those to delete now, and whether
    /// any is still there (deleting takes a moment).
    pub(super) fn leftovers(
        &self,
        status: &MemoryBenchmarkStatus,
        index: usize,
    ) -> (Vec<String>, bool) {
        let leftovers: Vec<&&Pod> = self
            .pods
            .iter()
            .filter(|p| {
                engine_index(p).is_some_and(|i| i < index && !self.keeps_pods_of(status, i))
            })
            .collect();
        let to_delete = leftovers
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(|p| p.name_any())
            .collect();
        (to_delete, !leftovers.is_empty())
    }

    fn delete_pods_of(&mut self, index: usize) {
        let names: Vec<String> = self
            .pods
            .iter()
            .filter(|p| engine_index(p) == Some(index) && p.metadata.deletion_timestamp.is_none())
            .map(|p| p.name_any())
            .collect();
        self.plan.delete.extend(names);
    }

    /// Marks engine `index` failed; with `abort`, the engines after it are not run either
    /// (their pods could not be placed or the benchmark ran out of time).
    pub(super) fn fail(
        &mut self,
        status: &mut MemoryBenchmarkStatus,
        index: usize,
        why: &str,
        message: String,
        abort: bool,
    ) {
        let now = self.now;
        let engine = &mut status.engines[index];
        engine.state = state::FAILED.into();
        engine.reason = Some(why.into());
        engine.message = Some(message);
        engine.finished_at = Some(Time(now));
        if !self.keeps_pods_of(status, index) {
            self.delete_pods_of(index);
        }
        if abort {
            let name = status.engines[index].name.clone();
            for later in status.engines.iter_mut().skip(index + 1) {
                if !is_terminal(later) {
                    later.state = state::FAILED.into();
                    later.reason = Some(reason::NOT_RUN.into());
                    later.message = Some(format!("not run: {name} failed with {why}"));
                }
            }
        }
        self.requeue(Duration::from_secs(1));
    }

    fn succeed(&mut self, status: &mut MemoryBenchmarkStatus, index: usize) {
        let engine = &mut status.engines[index];
        engine.state = state::SUCCEEDED.into();
        engine.reason = Some(reason::COMPLETED.into());
        engine.finished_at = Some(Time(self.now));
        self.delete_pods_of(index);
        self.requeue(Duration::from_secs(1));
    }

    pub(super) fn engine(
        &mut self,
        status: &mut MemoryBenchmarkStatus,
        index: usize,
        memory: u64,
        load: Option<LoadProbe>,
    ) {
        let engine_pod = pods_of(self.pods, index, Component::Engine)
            .into_iter()
            .next();
        let Some(pod) = engine_pod else {
            if status.engines[index].started_at.is_some() {
                self.fail(
                    status,
                    index,
                    reason::ENGINE_POD_LOST,
                    "the engine pod disappeared before the engine finished (deleted by someone else, or evicted)".into(),
                    false,
                );
                return;
            }
            let name = pods::engine_pod_name(&self.benchmark.name_any(), index);
            if let Some(refusal) = self.rejection(&name) {
                let message = format!("the API server rejected the engine pod {name}: {refusal}");
                self.fail(status, index, reason::POD_REJECTED, message, false);
                return;
            }
            if self.benchmarks_ahead > 0 {
                self.wait_for_free_node(status, index);
                return;
            }
            // Later engines prefer the node the first one ran on, so their figures (items/s
            // above all) compare like with like.
            let first_node = status.engines[..index]
                .iter()
                .find_map(|e| e.node_name.clone());
            let pod = pods::engine_pod(
                self.benchmark,
                index,
                memory,
                first_node.as_deref(),
                &self.settings.pods,
            );
            self.plan.create.push(pod);
            let engine = &mut status.engines[index];
            engine.started_at = Some(Time(self.now));
            engine.reason = Some(reason::WAITING_FOR_NODE.into());
            engine.message = Some("the engine pod was created".into());
            self.requeue(Duration::from_secs(2));
            return;
        };
        let created = pod
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(self.now, |t| t.0);
        status.engines[index]
            .started_at
            .get_or_insert(Time(created));
        if let Some(node) = pods::node_name(&pod) {
            status.engines[index].node_name = Some(node);
        }
        match pod_state(&pod) {
            PodState::Deleting => self.fail(
                status,
                index,
                reason::ENGINE_POD_LOST,
                "the engine pod was deleted before the engine finished".into(),
                false,
            ),
            PodState::Unscheduled { message } => {
                let message = message.unwrap_or_else(|| "waiting for the scheduler".into());
                if nodes_busy(&message) {
                    self.wait_for_free_node(status, index);
                } else if elapsed_since(self.now, created) >= self.settings.scheduling_timeout {
                    let message = format!(
                        "no node of instance type {} took the engine pod within {} s: {message}",
                        self.benchmark.spec.instance_type,
                        self.settings.scheduling_timeout.as_secs()
                    );
                    self.fail(status, index, reason::UNSCHEDULABLE, message, true);
                } else {
                    let engine = &mut status.engines[index];
                    engine.reason = Some(reason::WAITING_FOR_NODE.into());
                    engine.message = Some(message);
                    self.requeue(Duration::from_secs(5));
                }
            }
            PodState::ImagePullFailed {
                reason: why,
                message,
                permanent,
            } => {
                let image = status.engines[index].image.clone().unwrap_or_default();
                let since = pods::scheduled_at(&pod).unwrap_or(created);
                match self.pull_verdict(since, permanent) {
                    Some(retried) => self.fail(
                        status,
                        index,
                        reason::IMAGE_PULL_FAILED,
                        format!("cannot pull the engine image {image}: {why}: {message}{retried}"),
                        false,
                    ),
                    None => {
                        let engine = &mut status.engines[index];
                        engine.reason = Some(reason::WAITING_FOR_IMAGE.into());
                        engine.message = Some(self.pull_wait_note(&image, &why, &message, since));
                        self.requeue(Duration::from_secs(5));
                    }
                }
            }
            PodState::ContainerError {
                reason: why,
                message,
            } => {
                let why = container_error_reason(&why);
                let message = format!("the engine container could not be started: {message}");
                self.fail(status, index, why, message, false);
            }
            PodState::Starting { since } if status.engines[index].state != state::RUNNING => {
                let engine = &mut status.engines[index];
                engine.reason = Some(reason::ENGINE_STARTING.into());
                engine.message = Some("the engine is starting".into());
                if since
                    .is_some_and(|s| elapsed_since(self.now, s) >= self.settings.startup_timeout)
                {
                    let message = format!(
                        "the engine did not become ready (accept connections on port 6379) within {} s",
                        self.settings.startup_timeout.as_secs()
                    );
                    self.fail(status, index, reason::ENGINE_NOT_READY, message, false);
                } else {
                    self.requeue(Duration::from_secs(2));
                }
            }
            // It was ready before (the status says so even when the pod's timestamps cannot):
            // a readiness blip, never a startup timeout.
            PodState::Starting { .. } => {
                let since = pods::condition_since(&pod, "Ready", "False");
                self.engine_unready(status, index, &pod, since, load);
            }
            PodState::Unready { since } => self.engine_unready(status, index, &pod, since, load),
            PodState::Ready => {
                let engine = &mut status.engines[index];
                engine.state = state::RUNNING.into();
                engine.image_id = pods::image_id(&pod);
                match pods::pod_ip(&pod) {
                    Some(ip) => self.client(status, index, &ip, load),
                    None => self.requeue(Duration::from_secs(2)),
                }
            }
            PodState::Terminated {
                reason: Some(why),
                message,
                ..
            } if NEVER_STARTED.contains(&why.as_str()) => {
                let message = format!(
                    "the engine container could not be started ({why}): {}",
                    tail(message.as_deref().unwrap_or_default(), 600)
                );
                self.fail(status, index, reason::RUN_CONTAINER_ERROR, message, false);
            }
            PodState::Terminated {
                exit_code,
                reason: why,
                message,
                finished_at,
            } => self.engine_exited(status, index, exit_code, why, message, finished_at),
        }
    }

    /// An engine that was ready and no longer passes its readiness probe (busy, or a network
    /// blip). A client that runs against it decides what happened; without one, the engine
    /// gets the startup timeout again, counted from the moment it turned unready.
    fn engine_unready(
        &mut self,
        status: &mut MemoryBenchmarkStatus,
        index: usize,
        pod: &Pod,
        since: Option<Timestamp>,
        load: Option<LoadProbe>,
    ) {
        let since_note = since
            .map(|t| format!(" since {}", to_the_second(t)))
            .unwrap_or_default();
        let has_client = !pods_of(self.pods, index, Component::Client).is_empty()
            || status.engines[index].client_attempts > 0;
        match pods::pod_ip(pod) {
            Some(ip) if has_client => {
                self.client(status, index, &ip, load);
                let engine = &mut status.engines[index];
                if engine.reason.as_deref() == Some(reason::MEASURING) {
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
                    self.fail(status, index, reason::ENGINE_NOT_READY, message, false);
                } else {
                    let engine = &mut status.engines[index];
                    engine.reason = Some(reason::ENGINE_STARTING.into());
                    engine.message = Some(format!(
                        "the engine fails its readiness probe{since_note}; waiting for it to recover"
                    ));
                    self.requeue(Duration::from_secs(2));
                }
            }
        }
    }

    /// Whether an image that cannot be pulled fails its engine now: `Some` (with a note on how
    /// long the kubelet retried) when the failure is permanent or the retries took too long.
    fn pull_verdict(&self, since: Timestamp, permanent: bool) -> Option<String> {
        if permanent {
            return Some(String::new());
        }
        let waited = elapsed_since(self.now, since);
        (waited >= self.settings.image_pull_timeout)
            .then(|| format!(" (the node retried for {} s)", waited.as_secs()))
    }

    fn pull_wait_note(&self, image: &str, why: &str, message: &str, since: Timestamp) -> String {
        format!(
            "the node cannot pull {image} yet ({why}: {}); it retries with back-off until {} s after the pod was scheduled ({})",
            tail(message, 300),
            self.settings.image_pull_timeout.as_secs(),
            to_the_second(since)
        )
    }

    /// The engine exited before its results were complete: keep what its client measured.
    fn engine_exited(
        &mut self,
        status: &mut MemoryBenchmarkStatus,
        index: usize,
        exit_code: i32,
        why: Option<String>,
        message: Option<String>,
        finished_at: Option<Timestamp>,
    ) {
        let client = self.latest_client(status, index);
        if let Some(client) = &client {
            let client_done = matches!(pod_state(client), PodState::Terminated { .. });
            let recently =
                finished_at.is_none_or(|f| elapsed_since(self.now, f) < self.settings.crash_grace);
            if !client_done && recently {
                // The client notices within moments and leaves its partial result.
                self.requeue(Duration::from_secs(2));
                return;
            }
            if let PodState::Terminated { message, .. } = pod_state(client)
                && let Ok(result) = ClientResult::read(
                    message.as_deref().unwrap_or_default(),
                    self.benchmark.spec.repetitions,
                )
            {
                absorb(
                    &mut status.engines[index],
                    &result,
                    self.benchmark.spec.repetitions,
                );
            }
        }
        let done = status.engines[index].repetitions.len();
        let of = self.benchmark.spec.repetitions;
        let oom = why.as_deref() == Some("OOMKilled");
        let limit = self.engine_memory_limit(index);
        let mut text = if oom {
            format!(
                "the engine was OOMKilled (memory limit {limit}) after {done} of {of} repetitions; set spec.engines[{index}].memory higher"
            )
        } else {
            format!(
                "the engine exited with code {exit_code}{} after {done} of {of} repetitions",
                why.map(|w| format!(" ({w})")).unwrap_or_default()
            )
        };
        if let Some(last_words) = message.filter(|m| !m.trim().is_empty()) {
            text.push_str(": ");
            text.push_str(&tail(&last_words, 600));
        }
        let why = if oom {
            reason::ENGINE_OOM_KILLED
        } else {
            reason::ENGINE_CRASHED
        };
        self.fail(status, index, why, text, false);
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

    /// The client pod of the latest attempt, and the attempt count (status and pods agree on
    /// the larger, so a pod created just before an operator restart is not created twice).
    fn latest_client(&self, status: &mut MemoryBenchmarkStatus, index: usize) -> Option<Pod> {
        let clients = pods_of(self.pods, index, Component::Client);
        let attempts = clients
            .iter()
            .filter_map(client_attempt)
            .max()
            .unwrap_or(0)
            .max(status.engines[index].client_attempts);
        status.engines[index].client_attempts = attempts;
        clients
            .into_iter()
            .find(|c| client_attempt(c) == Some(attempts))
    }

    fn start_client(&mut self, status: &mut MemoryBenchmarkStatus, index: usize, engine_ip: &str) {
        let attempt = status.engines[index].client_attempts + 1;
        let name = pods::client_pod_name(&self.benchmark.name_any(), index, attempt);
        if let Some(refusal) = self.rejection(&name) {
            let message = format!("the API server rejected the client pod {name}: {refusal}");
            self.fail(status, index, reason::POD_REJECTED, message, false);
            return;
        }
        self.plan.create.push(pods::client_pod(
            self.benchmark,
            index,
            attempt,
            self.workload,
            engine_ip,
            &self.settings.pods,
        ));
        let engine = &mut status.engines[index];
        engine.client_attempts = attempt;
        engine.reason = Some(reason::CLIENT_STARTING.into());
        self.requeue(Duration::from_secs(2));
    }

    fn client(
        &mut self,
        status: &mut MemoryBenchmarkStatus,
        index: usize,
        engine_ip: &str,
        load: Option<LoadProbe>,
    ) {
        let client = self.latest_client(status, index);
        let attempts = status.engines[index].client_attempts;
        let Some(client) = client else {
            if attempts == 0 {
                self.start_client(status, index, engine_ip);
            } else {
                let message = "the client pod disappeared before it finished".to_string();
                self.client_failed(status, index, engine_ip, message, None);
            }
            return;
        };
        let created = client
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(self.now, |t| t.0);
        match pod_state(&client) {
            PodState::Deleting => self.requeue(Duration::from_secs(2)),
            PodState::Unscheduled { message } => {
                let message = message.unwrap_or_else(|| "waiting for the scheduler".into());
                if elapsed_since(self.now, created) >= self.settings.scheduling_timeout {
                    let message = format!(
                        "the client pod could not be placed next to its engine within {} s: {message}",
                        self.settings.scheduling_timeout.as_secs()
                    );
                    self.fail(status, index, reason::UNSCHEDULABLE, message, true);
                } else {
                    let engine = &mut status.engines[index];
                    engine.reason = Some(reason::WAITING_FOR_NODE.into());
                    engine.message = Some(format!("client: {message}"));
                    self.requeue(Duration::from_secs(5));
                }
            }
            PodState::ImagePullFailed {
                reason: why,
                message,
                permanent,
            } => {
                let image = self.settings.pods.client_image.clone();
                let since = pods::scheduled_at(&client).unwrap_or(created);
                match self.pull_verdict(since, permanent) {
                    Some(retried) => {
                        let message = format!(
                            "cannot pull the client image {image}: {why}: {message}{retried}"
                        );
                        self.fail(
                            status,
                            index,
                            reason::CLIENT_IMAGE_PULL_FAILED,
                            message,
                            true,
                        );
                    }
                    None => {
                        let note = self.pull_wait_note(&image, &why, &message, since);
                        let engine = &mut status.engines[index];
                        engine.reason = Some(reason::WAITING_FOR_IMAGE.into());
                        engine.message = Some(format!("client: {note}"));
                        self.requeue(Duration::from_secs(5));
                    }
                }
            }
            // Every client pod runs the same image and command: the next would fail alike.
            PodState::ContainerError {
                reason: why,
                message,
            } => {
                let message = format!("the client container could not be started: {message}");
                self.fail(status, index, container_error_reason(&why), message, true);
            }
            PodState::Terminated {
                reason: Some(why),
                message,
                ..
            } if NEVER_STARTED.contains(&why.as_str()) => {
                let message = format!(
                    "the client container could not be started ({why}): {}",
                    tail(message.as_deref().unwrap_or_default(), 600)
                );
                self.fail(status, index, reason::RUN_CONTAINER_ERROR, message, true);
            }
            PodState::Starting { .. } | PodState::Unready { .. } | PodState::Ready => {
                let engine = &mut status.engines[index];
                engine.reason = Some(reason::MEASURING.into());
                engine.message = None;
                let _ = load;
                self.requeue(self.settings.poll_interval);
            }
            PodState::Terminated {
                exit_code,
                message,
                finished_at,
                ..
            } => {
                let repetitions = self.benchmark.spec.repetitions;
                let parsed =
                    ClientResult::read(message.as_deref().unwrap_or_default(), repetitions);
                let error = parsed.as_ref().ok().and_then(|r| r.error.clone());
                match (&parsed, error) {
                    (Err(ReadError::Invalid(why)), _) => {
                        let message = format!("the client's result was refused: {why}");
                        self.fail(status, index, reason::INVALID_CLIENT_RESULT, message, false);
                    }
                    (Ok(result), None) if exit_code == 0 => {
                        absorb(&mut status.engines[index], result, repetitions);
                        status.engines[index].message = result_note(result);
                        self.succeed(status, index);
                    }
                    (Ok(result), Some(error)) if !retryable(&error.category) => {
                        absorb(&mut status.engines[index], result, repetitions);
                        let done = status.engines[index].repetitions.len();
                        let why = match error.category.as_str() {
                            "OutOfMemory" => reason::ENGINE_OUT_OF_MEMORY,
                            other => other,
                        };
                        let message = format!(
                            "{} (after {done} of {repetitions} repetitions)",
                            error.message
                        );
                        self.fail(status, index, why, message, false);
                    }
                    (_, error) => {
                        let lost = error
                            .as_ref()
                            .is_some_and(|e| e.category == "ConnectionLost");
                        let recently = finished_at.is_none_or(|f| {
                            elapsed_since(self.now, f) < self.settings.connection_lost_grace
                        });
                        if lost && recently {
                            // Did the engine die? Its pod's status may lag a moment behind.
                            self.requeue(Duration::from_secs(2));
                            return;
                        }
                        let message = match (&parsed, error) {
                            (_, Some(e)) => e.message,
                            (Ok(_), None) => format!("exit code {exit_code}"),
                            (Err(e), None) => format!("exit code {exit_code}: {e}"),
                        };
                        self.client_failed(status, index, engine_ip, message, parsed.as_ref().ok());
                    }
                }
            }
        }
    }

    /// A client failed while its engine is healthy: keep what it measured, and retry while
    /// attempts remain.
    fn client_failed(
        &mut self,
        status: &mut MemoryBenchmarkStatus,
        index: usize,
        engine_ip: &str,
        message: String,
        result: Option<&ClientResult>,
    ) {
        if let Some(result) = result {
            absorb(
                &mut status.engines[index],
                result,
                self.benchmark.spec.repetitions,
            );
        }
        let attempts = status.engines[index].client_attempts;
        if attempts < self.settings.client_attempts {
            if self.benchmark.spec.cleanup_policy != CleanupPolicy::KeepFailed {
                let names: Vec<String> = pods_of(self.pods, index, Component::Client)
                    .iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .map(|p| p.name_any())
                    .collect();
                self.plan.delete.extend(names);
            }
            self.start_client(status, index, engine_ip);
            status.engines[index].message = Some(format!(
                "client attempt {attempts} of {} failed: {}",
                self.settings.client_attempts,
                tail(&message, 600)
            ));
        } else {
            let message = format!(
                "the client failed {attempts} times; the last time: {}",
                tail(&message, 600)
            );
            self.fail(status, index, reason::CLIENT_FAILED, message, false);
        }
    }
}

/// The engine reason of a container that could not be created or started: the kubelet's own.
fn container_error_reason(waiting_reason: &str) -> &'static str {
    if waiting_reason == reason::CREATE_CONTAINER_ERROR {
        reason::CREATE_CONTAINER_ERROR
    } else {
        reason::RUN_CONTAINER_ERROR
    }
}
