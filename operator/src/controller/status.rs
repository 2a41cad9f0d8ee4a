//! The decision of one reconciliation, as a pure function of what the operator observed: the
//! benchmark (spec and the status it wrote before), the benchmark's pods as the API server
//! lists them, the time, and a progress reading of the engine under load. It returns the new
//! status, the pods to create (before the status is written) and to delete (after it is
//! written, so a result is never lost with its pod), and when to look again.
//!
//! Everything the operator knows lives in the status and the pods, never in memory, so an
//! operator that restarts mid-run picks up where the last one stopped: a pod it created is
//! found by its deterministic name, a result already recorded is not measured again.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;

use crate::client_result::ClientResult;
use crate::crd::{
    CleanupPolicy, EngineStatus, MemoryBenchmark, MemoryBenchmarkStatus, Phase, Progress,
    RepetitionStatus, SpreadStatus, SummaryStatus,
};
use crate::stats::Spread;
use crate::workload::Workload;

use super::pods::{
    self, Component, PodSettings, PodState, client_attempt, component, engine_index, owned_by,
    pod_state,
};
use super::validate::validate;

/// Engine states, as in `status.engines[].state`.
pub mod state {
    pub const PENDING: &str = "Pending";
    pub const RUNNING: &str = "Running";
    pub const SUCCEEDED: &str = "Succeeded";
    pub const FAILED: &str = "Failed";
}

/// CamelCase reasons of conditions, engine states and events.
pub mod reason {
    pub const WAITING_FOR_NODE: &str = "WaitingForNode";
    pub const ENGINE_STARTING: &str = "EngineStarting";
    pub const CLIENT_STARTING: &str = "ClientStarting";
    pub const MEASURING: &str = "Measuring";
    pub const COMPLETED: &str = "Completed";
    pub const IN_PROGRESS: &str = "InProgress";
    pub const NO_FAILURE: &str = "NoFailure";
    pub const INVALID_SPEC: &str = "InvalidSpec";
    pub const UNSCHEDULABLE: &str = "Unschedulable";
    pub const IMAGE_PULL_FAILED: &str = "ImagePullFailed";
    pub const CLIENT_IMAGE_PULL_FAILED: &str = "ClientImagePullFailed";
    pub const ENGINE_OOM_KILLED: &str = "EngineOOMKilled";
    pub const ENGINE_CRASHED: &str = "EngineCrashed";
    pub const ENGINE_NOT_READY: &str = "EngineNotReady";
    pub const ENGINE_POD_LOST: &str = "EnginePodLost";
    pub const ENGINE_OUT_OF_MEMORY: &str = "EngineOutOfMemory";
    pub const CLIENT_FAILED: &str = "ClientFailed";
    pub const CLIENT_RETRY: &str = "ClientRetry";
    pub const TIMEOUT: &str = "Timeout";
    pub const NOT_RUN: &str = "NotRun";
}

/// Condition types.
pub const READY: &str = "Ready";
pub const PROGRESSING: &str = "Progressing";
pub const FAILED: &str = "Failed";

/// Operator settings the decision depends on.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    pub pods: PodSettings,
    /// How long a pod may wait for a node before the benchmark fails as Unschedulable.
    pub scheduling_timeout: Duration,
    /// How long a started engine may take to become ready.
    pub startup_timeout: Duration,
    /// Client pods started per engine at most (the first and its retries).
    pub client_attempts: u32,
    /// How long to wait for the client's partial result after its engine died.
    pub crash_grace: Duration,
    /// How long after a client lost its engine to wait for the engine pod's status to show
    /// whether the engine died (a crash is not a client failure to retry).
    pub connection_lost_grace: Duration,
    /// How often to look at a benchmark while it runs (progress is refreshed this often).
    pub poll_interval: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            pods: PodSettings::default(),
            scheduling_timeout: Duration::from_secs(600),
            startup_timeout: Duration::from_secs(300),
            client_attempts: 3,
            crash_grace: Duration::from_secs(30),
            connection_lost_grace: Duration::from_secs(5),
            poll_interval: Duration::from_secs(5),
        }
    }
}

/// What the operator read from the engine under load for progress.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadProbe {
    /// `FLUSHALL` calls so far: the client flushes once at the start of each repetition.
    pub repetitions_begun: Option<u32>,
    /// Items in the engine now (ZCARD of the sorted set, or DBSIZE).
    pub items: Option<u64>,
}

/// What one reconciliation saw.
pub struct Observation<'a> {
    pub benchmark: &'a MemoryBenchmark,
    /// Pods carrying the benchmark's label; those it does not control are ignored.
    pub pods: &'a [Pod],
    pub now: Timestamp,
    pub load: Option<LoadProbe>,
}

/// What to do.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub status: MemoryBenchmarkStatus,
    /// Pods to create, before the status is written.
    pub create: Vec<Pod>,
    /// Pods to delete (by name), once the status is written.
    pub delete: Vec<String>,
    /// When to reconcile again without a watch event; `None` once the benchmark is finished.
    pub requeue: Option<Duration>,
}

/// Where to read progress from: the engine under load, when its client runs.
#[derive(Clone, Debug, PartialEq)]
pub struct ProbeTarget {
    pub address: String,
    /// The sorted set's key (ZCARD), or `None` to count keys (DBSIZE).
    pub sorted_set_key: Option<String>,
}

fn is_terminal(engine: &EngineStatus) -> bool {
    engine.state == state::SUCCEEDED || engine.state == state::FAILED
}

fn seconds(d: Duration) -> SignedDuration {
    SignedDuration::from_secs(d.as_secs() as i64)
}

fn elapsed_since(now: Timestamp, then: Timestamp) -> Duration {
    now.duration_since(then).unsigned_abs()
}

/// A timestamp to the second, as the API stores it, so that what is written reads back equal.
pub fn to_the_second(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

fn owned<'a>(observation: &Observation<'a>) -> Vec<&'a Pod> {
    observation
        .pods
        .iter()
        .filter(|p| owned_by(p, observation.benchmark))
        .collect()
}

fn pods_of(pods: &[&Pod], index: usize, which: Component) -> Vec<Pod> {
    pods.iter()
        .filter(|p| engine_index(p) == Some(index) && component(p) == Some(which))
        .map(|p| (*p).clone())
        .collect()
}

/// The engine currently being measured (the first not finished), if any.
fn current_engine(status: &MemoryBenchmarkStatus) -> Option<usize> {
    status.engines.iter().position(|e| !is_terminal(e))
}

/// Where to read progress from, if an engine is under load right now.
pub fn probe_target(benchmark: &MemoryBenchmark, pods: &[Pod]) -> Option<ProbeTarget> {
    let status = benchmark.status.clone().unwrap_or_default();
    let index = current_engine(&status)?;
    let observation = Observation {
        benchmark,
        pods,
        now: Timestamp::UNIX_EPOCH,
        load: None,
    };
    let owned = owned(&observation);
    let engine = pods_of(&owned, index, Component::Engine)
        .into_iter()
        .next()?;
    if pod_state(&engine) != PodState::Ready {
        return None;
    }
    let client_running = pods_of(&owned, index, Component::Client)
        .iter()
        .any(|c| matches!(pod_state(c), PodState::Ready | PodState::Starting { .. }));
    if !client_running {
        return None;
    }
    let sorted_set_key = match Workload::from_spec(&benchmark.spec.workload).ok()? {
        Workload::SortedSet { key, .. } => Some(key),
        _ => None,
    };
    Some(ProbeTarget {
        address: pods::engine_address(&pods::pod_ip(&engine)?),
        sorted_set_key,
    })
}

/// Decides what to do; see the module documentation.
pub fn plan(observation: &Observation, settings: &Settings) -> Plan {
    let benchmark = observation.benchmark;
    let spec = &benchmark.spec;
    let now = to_the_second(observation.now);
    let old = benchmark.status.clone().unwrap_or_default();
    let mut status = old.clone();
    status.observed_generation = benchmark.metadata.generation;
    let mut plan = Plan {
        status: MemoryBenchmarkStatus::default(),
        create: Vec::new(),
        delete: Vec::new(),
        requeue: None,
    };

    let valid = match validate(benchmark) {
        Ok(valid) => valid,
        Err(message) => {
            status.phase = Some(Phase::Failed);
            status.progress = None;
            let stamp = ConditionStamp {
                generation: benchmark.metadata.generation,
                now,
            };
            for (type_, value) in [(READY, "False"), (PROGRESSING, "False"), (FAILED, "True")] {
                stamp.set(
                    &mut status.conditions,
                    type_,
                    value,
                    reason::INVALID_SPEC,
                    &message,
                );
            }
            plan.status = status;
            return plan;
        }
    };
    status.workload = Some(valid.workload.describe());
    let fresh = initial_engines(benchmark);
    let same_entries = status.engines.len() == fresh.len()
        && status
            .engines
            .iter()
            .zip(&fresh)
            .all(|(a, b)| a.name == b.name);
    if !same_entries {
        status.engines = fresh;
    }

    let pods = owned(observation);
    let mut step = Step {
        benchmark,
        settings,
        now,
        pods: &pods,
        plan: &mut plan,
        workload: &valid.workload,
    };

    let finished = matches!(status.phase, Some(Phase::Succeeded | Phase::Failed))
        && status.engines.iter().all(is_terminal);
    if !finished {
        let started_at = status.started_at.get_or_insert_with(|| Time(now)).0;
        let deadline = started_at + seconds(Duration::from_secs(spec.timeout_seconds.into()));
        if now >= deadline
            && let Some(index) = current_engine(&status)
        {
            let message = format!(
                "the benchmark did not finish within timeoutSeconds ({} s)",
                spec.timeout_seconds
            );
            step.fail(&mut status, index, reason::TIMEOUT, message, true);
        }
        if let Some(index) = current_engine(&status) {
            // One engine at a time: the pods of the engines before must be gone (unless kept
            // for debugging) before the next engine starts.
            let (to_delete, waiting) = step.leftovers(&status, index);
            if waiting {
                step.plan.delete.extend(to_delete);
                step.requeue(Duration::from_secs(1));
            } else {
                let memory = valid.engine_memory[index];
                step.engine(&mut status, index, memory, observation.load);
            }
        }
    }
    // Finished benchmarks keep no pods but the kept ones (also after an operator restart).
    if current_engine(&status).is_none() {
        let (to_delete, _) = step.leftovers(&status, status.engines.len());
        step.plan.delete.extend(to_delete);
    }
    plan.delete.sort();
    plan.delete.dedup();

    summarize(&mut status, benchmark, now, observation.load, &old);
    if matches!(status.phase, Some(Phase::Succeeded | Phase::Failed)) {
        plan.requeue = None;
    } else if plan.requeue.is_none() {
        plan.requeue = Some(settings.poll_interval);
    }
    plan.status = status;
    plan
}

fn initial_engines(benchmark: &MemoryBenchmark) -> Vec<EngineStatus> {
    benchmark
        .spec
        .engines
        .iter()
        .map(|e| EngineStatus {
            name: e.display_name(),
            engine: e.engine.to_string(),
            requested_version: e.version.clone(),
            state: state::PENDING.into(),
            image: Some(e.image()),
            instance_type: Some(benchmark.spec.instance_type.clone()),
            ..Default::default()
        })
        .collect()
}

/// The state one reconciliation works on.
struct Step<'a, 'p> {
    benchmark: &'a MemoryBenchmark,
    settings: &'a Settings,
    now: Timestamp,
    pods: &'a [&'p Pod],
    plan: &'a mut Plan,
    workload: &'a Workload,
}

impl Step<'_, '_> {
    fn requeue(&mut self, after: Duration) {
        self.plan.requeue = Some(self.plan.requeue.map_or(after, |r| r.min(after)));
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
    fn leftovers(&self, status: &MemoryBenchmarkStatus, index: usize) -> (Vec<String>, bool) {
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
    fn fail(
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

    fn engine(
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
            if status.engines[index].started_at.is_none() {
                let pod = pods::engine_pod(self.benchmark, index, memory, &self.settings.pods);
                self.plan.create.push(pod);
                let engine = &mut status.engines[index];
                engine.started_at = Some(Time(self.now));
                engine.reason = Some(reason::WAITING_FOR_NODE.into());
                engine.message = Some("the engine pod was created".into());
                self.requeue(Duration::from_secs(2));
            } else {
                self.fail(
                    status,
                    index,
                    reason::ENGINE_POD_LOST,
                    "the engine pod disappeared before the engine finished (deleted by someone else, or evicted)".into(),
                    false,
                );
            }
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
                if elapsed_since(self.now, created) >= self.settings.scheduling_timeout {
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
            } => {
                let image = status.engines[index].image.clone().unwrap_or_default();
                self.fail(
                    status,
                    index,
                    reason::IMAGE_PULL_FAILED,
                    format!("cannot pull the engine image {image}: {why}: {message}"),
                    false,
                );
            }
            PodState::Starting { since } => {
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
                exit_code,
                reason: why,
                message,
                finished_at,
            } => self.engine_exited(status, index, exit_code, why, message, finished_at),
        }
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
                && let Ok(result) = ClientResult::parse(message.as_deref().unwrap_or_default())
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
            } => {
                let message = format!(
                    "cannot pull the client image {}: {why}: {message}",
                    self.settings.pods.client_image
                );
                self.fail(
                    status,
                    index,
                    reason::CLIENT_IMAGE_PULL_FAILED,
                    message,
                    true,
                );
            }
            PodState::Starting { .. } | PodState::Ready => {
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
                let parsed = ClientResult::parse(message.as_deref().unwrap_or_default());
                let error = parsed.as_ref().ok().and_then(|r| r.error.clone());
                let repetitions = self.benchmark.spec.repetitions;
                match (&parsed, error) {
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

/// Client errors worth another client: the engine could not be reached or the connection
/// broke while the engine stayed up. An engine that refuses data (maxmemory, a failed count
/// check) would refuse it again.
fn retryable(category: &str) -> bool {
    matches!(
        category,
        "EngineUnreachable" | "ConnectionLost" | "ProtocolError"
    )
}

fn tail(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.len() <= max {
        return text.to_string();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &text[start..])
}

fn result_note(result: &ClientResult) -> Option<String> {
    let mut notes = Vec::new();
    if result.omitted > 0 {
        notes.push(format!(
            "{} repetitions not listed (the client's result must fit 4 KB); the summary covers all",
            result.omitted
        ));
    }
    notes.extend(result.warnings.iter().cloned());
    (!notes.is_empty()).then(|| notes.join("; "))
}

/// Takes a client's result into the engine's status: identity, repetitions and summary. A
/// partial result never replaces a fuller one already recorded.
pub fn absorb(engine: &mut EngineStatus, result: &ClientResult, repetitions_requested: u32) {
    let listed = result.decoded_repetitions();
    if !result.engine.version.is_empty() {
        engine.version = Some(result.engine.version.clone());
        engine.allocator = Some(result.engine.allocator.clone()).filter(|a| !a.is_empty());
        engine.arch = Some(result.engine.arch.clone()).filter(|a| !a.is_empty());
    }
    if listed.is_empty() || listed.len() < engine.repetitions.len() {
        return;
    }
    let commands = result.commands as f64;
    engine.repetitions = listed
        .iter()
        .take(repetitions_requested as usize)
        .map(|r| RepetitionStatus {
            baseline_used_memory: r.baseline_used_memory,
            used_memory: r.used_memory,
            used_memory_rss: r.used_memory_rss,
            items: r.items,
            bytes_per_item: r.bytes_per_item(),
            ops_per_sec: if r.seconds > 0.0 {
                commands / r.seconds
            } else {
                0.0
            },
            seconds: r.seconds,
            settled_bytes_per_item: r
                .settled_used_memory
                .map(|s| (s as f64 - r.baseline_used_memory as f64) / r.items as f64),
            used_memory_dataset: r.used_memory_dataset,
            mem_fragmentation_ratio: r.mem_fragmentation_ratio,
        })
        .collect();
    engine.summary = result.summary.as_ref().map(|s| SummaryStatus {
        items: s.items,
        used_memory: s.used_memory.median.round() as u64,
        bytes_per_item: spread(&s.bytes_per_item),
        ops_per_sec: spread(&s.ops_per_sec),
        unstable: s.unstable,
    });
}

fn spread(s: &Spread) -> SpreadStatus {
    SpreadStatus {
        median: s.median,
        min: s.min,
        max: s.max,
        cv: s.cv,
    }
}

/// Sets a condition; its lastTransitionTime changes only when its status flips.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    value: &str,
    why: &str,
    message: &str,
    generation: Option<i64>,
    now: Timestamp,
) {
    let transition = conditions
        .iter()
        .find(|c| c.type_ == type_ && c.status == value)
        .map_or(Time(now), |c| c.last_transition_time.clone());
    let condition = Condition {
        type_: type_.into(),
        status: value.into(),
        reason: why.into(),
        message: message.into(),
        observed_generation: generation,
        last_transition_time: transition,
    };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(existing) => *existing = condition,
        None => conditions.push(condition),
    }
}

/// What every condition written in one reconcile shares: the generation it describes and
/// the time of a transition.
struct ConditionStamp {
    generation: Option<i64>,
    now: Timestamp,
}

impl ConditionStamp {
    fn set(
        &self,
        conditions: &mut Vec<Condition>,
        type_: &str,
        value: &str,
        why: &str,
        message: &str,
    ) {
        set_condition(
            conditions,
            type_,
            value,
            why,
            message,
            self.generation,
            self.now,
        );
    }
}

/// Phase, progress, the best engine, changes against the first engine, and conditions, all
/// derived from the engines' states.
fn summarize(
    status: &mut MemoryBenchmarkStatus,
    benchmark: &MemoryBenchmark,
    now: Timestamp,
    load: Option<LoadProbe>,
    old: &MemoryBenchmarkStatus,
) {
    let spec = &benchmark.spec;
    let n = status.engines.len() as u32;
    let first = status
        .engines
        .first()
        .and_then(|e| e.summary.as_ref())
        .map(|s| s.bytes_per_item.median);
    for engine in &mut status.engines {
        let median = engine.summary.as_ref().map(|s| s.bytes_per_item.median);
        engine.change_vs_first_percent = crate::report::change_percent(median, first);
    }
    let best = status
        .engines
        .iter()
        .filter_map(|e| {
            e.summary
                .as_ref()
                .map(|s| (s.bytes_per_item.median, e.name.clone()))
        })
        .min_by(|a, b| a.0.total_cmp(&b.0));
    status.best_bytes_per_item = best.as_ref().map(|b| (b.0 * 10.0).round() / 10.0);
    status.best_engine = best.map(|b| b.1);

    let succeeded = status
        .engines
        .iter()
        .filter(|e| e.state == state::SUCCEEDED)
        .count() as u32;
    let stamp = ConditionStamp {
        generation: benchmark.metadata.generation,
        now,
    };
    match current_engine(status) {
        None => {
            let all_succeeded = succeeded == n;
            status.phase = Some(if all_succeeded {
                Phase::Succeeded
            } else {
                Phase::Failed
            });
            status.finished_at.get_or_insert(Time(now));
            status.progress = Some(Progress {
                engine: n,
                engines: n,
                repetition: spec.repetitions,
                repetitions: spec.repetitions,
                summary: if all_succeeded {
                    format!("done: {n}/{n} engines")
                } else {
                    format!("failed: {succeeded}/{n} engines measured")
                },
            });
            if all_succeeded {
                let message = format!("{n} of {n} engines measured");
                stamp.set(
                    &mut status.conditions,
                    READY,
                    "True",
                    reason::COMPLETED,
                    &message,
                );
                stamp.set(
                    &mut status.conditions,
                    PROGRESSING,
                    "False",
                    reason::COMPLETED,
                    &message,
                );
                stamp.set(
                    &mut status.conditions,
                    FAILED,
                    "False",
                    reason::NO_FAILURE,
                    "",
                );
            } else {
                let failures: Vec<&EngineStatus> = status
                    .engines
                    .iter()
                    .filter(|e| {
                        e.state == state::FAILED && e.reason.as_deref() != Some(reason::NOT_RUN)
                    })
                    .collect();
                let why = failures
                    .first()
                    .and_then(|e| e.reason.clone())
                    .unwrap_or_else(|| reason::NOT_RUN.into());
                let message = format!(
                    "{succeeded} of {n} engines measured; {}",
                    failures
                        .iter()
                        .map(|e| format!(
                            "{}: {}",
                            e.name,
                            e.message
                                .clone()
                                .unwrap_or_else(|| e.reason.clone().unwrap_or_default())
                        ))
                        .collect::<Vec<_>>()
                        .join("; ")
                );
                stamp.set(&mut status.conditions, READY, "False", &why, &message);
                stamp.set(&mut status.conditions, PROGRESSING, "False", &why, &message);
                stamp.set(&mut status.conditions, FAILED, "True", &why, &message);
            }
        }
        Some(index) => {
            let engine = &status.engines[index];
            let started = engine.state == state::RUNNING || index > 0;
            status.phase = Some(if started {
                Phase::Running
            } else {
                Phase::Pending
            });
            status.finished_at = None;
            let progress = running_progress(status, index, spec, load, old);
            let engine = &status.engines[index];
            let why = engine
                .reason
                .clone()
                .unwrap_or_else(|| reason::IN_PROGRESS.into());
            let node = engine
                .node_name
                .as_ref()
                .map(|n| format!(" on node {n}"))
                .unwrap_or_default();
            let message = match &engine.message {
                Some(m) => format!("engine {}/{n} ({}){node}: {m}", index + 1, engine.name),
                None => format!("engine {}/{n} ({}){node}", index + 1, engine.name),
            };
            status.progress = Some(progress);
            stamp.set(
                &mut status.conditions,
                READY,
                "False",
                reason::IN_PROGRESS,
                &format!("{succeeded} of {n} engines measured"),
            );
            stamp.set(&mut status.conditions, PROGRESSING, "True", &why, &message);
            stamp.set(
                &mut status.conditions,
                FAILED,
                "False",
                reason::NO_FAILURE,
                "",
            );
        }
    }
}

fn running_progress(
    status: &MemoryBenchmarkStatus,
    index: usize,
    spec: &crate::crd::MemoryBenchmarkSpec,
    load: Option<LoadProbe>,
    old: &MemoryBenchmarkStatus,
) -> Progress {
    let n = status.engines.len() as u32;
    let engine = &status.engines[index];
    let k = spec.repetitions;
    let head = format!("{}/{n} {}", index + 1, engine.name);
    let measuring = engine.reason.as_deref() == Some(reason::MEASURING);
    match (measuring, load) {
        (true, Some(probe)) => {
            let repetition = probe.repetitions_begun.unwrap_or(0).min(k);
            let intended = Workload::from_spec(&spec.workload)
                .ok()
                .and_then(|w| w.intended_items());
            let loaded = match (probe.items, intended) {
                (Some(items), Some(total)) if total > 0 => {
                    format!(", {}% loaded", (items.min(total) * 100) / total)
                }
                (Some(items), None) => format!(", {items} keys"),
                _ => String::new(),
            };
            Progress {
                engine: index as u32 + 1,
                engines: n,
                repetition,
                repetitions: k,
                summary: format!("{head}: rep {repetition}/{k}{loaded}"),
            }
        }
        (true, None) => match &old.progress {
            // No fresh reading: keep the last one rather than flap.
            Some(p) if p.engine == index as u32 + 1 => p.clone(),
            _ => Progress {
                engine: index as u32 + 1,
                engines: n,
                repetition: 0,
                repetitions: k,
                summary: format!("{head}: measuring"),
            },
        },
        (false, _) => {
            let what = match engine.reason.as_deref() {
                Some(reason::WAITING_FOR_NODE) => "waiting for a node",
                Some(reason::ENGINE_STARTING) => "engine starting",
                Some(reason::CLIENT_STARTING) => "client starting",
                _ => "starting",
            };
            Progress {
                engine: index as u32 + 1,
                engines: n,
                repetition: 0,
                repetitions: k,
                summary: format!("{head}: {what}"),
            }
        }
    }
}

/// An event to publish: what changed between the status read and the status written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transition {
    pub warning: bool,
    pub reason: String,
    pub note: String,
}

/// The events of a status change, in order.
pub fn transitions(old: &MemoryBenchmarkStatus, new: &MemoryBenchmarkStatus) -> Vec<Transition> {
    let mut events = Vec::new();
    let normal = |reason: &str, note: String| Transition {
        warning: false,
        reason: reason.into(),
        note,
    };
    let warning = |reason: &str, note: String| Transition {
        warning: true,
        reason: reason.into(),
        note,
    };
    let invalid = |s: &MemoryBenchmarkStatus| {
        s.conditions
            .iter()
            .any(|c| c.type_ == FAILED && c.reason == reason::INVALID_SPEC)
    };
    if invalid(new) {
        if !invalid(old) {
            let message = new
                .conditions
                .iter()
                .find(|c| c.type_ == FAILED)
                .map(|c| c.message.clone())
                .unwrap_or_default();
            events.push(warning(reason::INVALID_SPEC, message));
        }
        return events;
    }
    for (i, engine) in new.engines.iter().enumerate() {
        let before = old.engines.get(i).filter(|b| b.name == engine.name);
        let was = |f: &dyn Fn(&EngineStatus) -> bool| before.is_some_and(f);
        let n = new.engines.len();
        let who = format!("engine {}/{n} {}", i + 1, engine.name);
        if engine.started_at.is_some() && !was(&|b| b.started_at.is_some()) {
            events.push(normal(
                "EngineCreated",
                format!(
                    "{who}: created pod for {}",
                    engine.image.clone().unwrap_or_default()
                ),
            ));
        }
        if engine.reason.as_deref() == Some(reason::WAITING_FOR_NODE)
            && !was(&|b| b.reason.as_deref() == Some(reason::WAITING_FOR_NODE))
            && engine
                .message
                .as_deref()
                .is_some_and(|m| m != "the engine pod was created")
        {
            events.push(normal(
                reason::WAITING_FOR_NODE,
                format!("{who}: {}", engine.message.clone().unwrap_or_default()),
            ));
        }
        if engine.state == state::RUNNING && !was(&|b| b.state == state::RUNNING) {
            events.push(normal(
                "EngineReady",
                format!(
                    "{who} is ready on node {}",
                    engine.node_name.clone().unwrap_or_default()
                ),
            ));
        }
        if engine.client_attempts > 1 && !was(&|b| b.client_attempts >= engine.client_attempts) {
            events.push(warning(
                reason::CLIENT_RETRY,
                format!("{who}: {}", engine.message.clone().unwrap_or_default()),
            ));
        }
        if engine.state == state::SUCCEEDED && !was(&|b| b.state == state::SUCCEEDED) {
            let figures = engine.summary.as_ref().map_or_else(String::new, |s| {
                format!(
                    ": median {:.1} bytes per item over {} repetitions",
                    s.bytes_per_item.median,
                    engine.repetitions.len()
                )
            });
            events.push(normal("EngineSucceeded", format!("{who}{figures}")));
        }
        if engine.state == state::FAILED
            && engine.reason.as_deref() != Some(reason::NOT_RUN)
            && !was(&|b| b.state == state::FAILED)
        {
            events.push(warning(
                engine.reason.as_deref().unwrap_or("EngineFailed"),
                format!("{who}: {}", engine.message.clone().unwrap_or_default()),
            ));
        }
    }
    if new.phase != old.phase {
        match new.phase {
            Some(Phase::Succeeded) => events.push(normal(
                "BenchmarkSucceeded",
                new.progress
                    .as_ref()
                    .map(|p| p.summary.clone())
                    .unwrap_or_default(),
            )),
            Some(Phase::Failed) => events.push(warning(
                "BenchmarkFailed",
                new.conditions
                    .iter()
                    .find(|c| c.type_ == FAILED)
                    .map(|c| c.message.clone())
                    .unwrap_or_default(),
            )),
            _ => {}
        }
    }
    events
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;
