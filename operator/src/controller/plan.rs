//! The decision of one reconciliation, as a pure function of what the operator observed: the
//! benchmark (spec and the status it wrote before), the benchmark's pods as the API server
//! lists them, the time, and a progress reading of the engine under load. It returns the new
//! status, the pods to create (before the status is written) and to delete (after it is
//! written, so a result is never lost with its pod), and when to look again. The very first
//! reconciliation creates nothing: it writes the status with `startedAt`, so `timeoutSeconds`
//! holds even when no pod can ever be created. Pods the API server refused come back in the
//! observation ([`PodRejection`]) and fail their engine; the other benchmarks the operator
//! watches decide the benchmark's place in its node pool's queue ([`super::queue`]).
//!
//! Everything the operator knows lives in the status and the pods, never in memory, so an
//! operator that restarts mid-run picks up where the last one stopped: a pod it created is
//! found by its deterministic name, a result already recorded is not measured again.
//!
//! The decision is split by what each part answers: this module walks the engines in order,
//! [`super::lifecycle`] decides what an engine's pods need next, [`super::results`] takes a
//! client's result into the status, [`super::summary`] derives phase, progress and conditions,
//! and [`super::events`] turns a status change into events.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;

use crate::crd::{EngineStatus, MemoryBenchmark, MemoryBenchmarkStatus, Phase};

use super::conditions::{ConditionStamp, FAILED, PROGRESSING, READY, reason, state};
use super::lifecycle::Step;
use super::network_policy::NetworkPolicySettings;
use super::pods::{
    self, Component, PodSettings, PodState, client_attempt, client_state, component, engine_index,
    holds_result, owned_by, pod_state, stuck_deleting,
};
use super::policy::Policy;
use super::queue::benchmarks_ahead;
use super::summary::summarize;
use crate::validation::validate;

/// Operator settings the decision depends on.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    pub pods: PodSettings,
    /// What a spec may ask for: images, server arguments, tolerations.
    pub policy: Policy,
    /// The NetworkPolicy each benchmark gets (created before its first pod).
    pub network_policy: NetworkPolicySettings,
    /// How long a pod may wait for a node before the benchmark fails as Unschedulable.
    pub scheduling_timeout: Duration,
    /// How long a started engine may take to become ready (and how long an engine that was
    /// ready may stay unready while no client runs against it).
    pub startup_timeout: Duration,
    /// How long a node may keep failing to pull an image (the kubelet retries with back-off)
    /// before the engine fails.
    pub image_pull_timeout: Duration,
    /// Client pods started per engine at most (the first and its retries).
    pub client_attempts: u32,
    /// How long to wait for the client's partial result after its engine died.
    pub crash_grace: Duration,
    /// How long after a client lost its engine to wait for the engine pod's status to show
    /// whether the engine died (a crash is not a client failure to retry).
    pub connection_lost_grace: Duration,
    /// How often to look at a benchmark while it runs (progress is refreshed this often).
    pub poll_interval: Duration,
    /// How long past its deletion deadline a pod may still not have stopped before its node
    /// counts as lost (a kubelet that is there stops a pod within its grace period).
    pub lost_pod_margin: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            pods: PodSettings::default(),
            policy: Policy::default(),
            network_policy: NetworkPolicySettings::default(),
            scheduling_timeout: Duration::from_secs(600),
            startup_timeout: Duration::from_secs(300),
            image_pull_timeout: Duration::from_secs(300),
            client_attempts: 3,
            crash_grace: Duration::from_secs(30),
            connection_lost_grace: Duration::from_secs(5),
            poll_interval: Duration::from_secs(5),
            lost_pod_margin: Duration::from_secs(15),
        }
    }
}

/// What the operator read from the client under way for progress.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadProbe {
    /// The repetition the client is in, from 1.
    pub repetitions_begun: Option<u32>,
    /// How much of that repetition's commands it has sent, in percent.
    pub loaded_percent: Option<u32>,
}

/// What one reconciliation saw.
pub struct Observation<'a> {
    pub benchmark: &'a MemoryBenchmark,
    /// Pods carrying the benchmark's label; those it does not control are ignored.
    pub pods: &'a [Pod],
    pub now: Timestamp,
    pub load: Option<LoadProbe>,
    /// Pods of this plan that the API server refused to create, in this reconciliation.
    pub rejected: &'a [PodRejection],
    /// The other benchmarks the operator watches, for the queue on a node pool.
    pub others: &'a [Arc<MemoryBenchmark>],
}

/// A pod the API server refused to create: admission (Pod Security, a ResourceQuota, a
/// LimitRange, a webhook or policy) or the pod API's own validation. Creating it again would
/// be refused again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodRejection {
    pub pod: String,
    /// The API server's message.
    pub message: String,
}

/// What to do.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub status: MemoryBenchmarkStatus,
    /// Pods to create, before the status is written.
    pub create: Vec<Pod>,
    /// Pods to delete (by name), once the status is written.
    pub delete: Vec<String>,
    /// Client pods whose result finalizer comes off once the status is written: what they
    /// measured is in it, or they have nothing (more) to give.
    pub release: Vec<String>,
    /// Pods to delete at once (grace period 0), once released: their node stopped reporting,
    /// so no kubelet will ever confirm they stopped.
    pub force_delete: Vec<String>,
    /// When to reconcile again without a watch event; `None` once the benchmark is finished.
    pub requeue: Option<Duration>,
}

/// Where to read progress from: the progress endpoint of the client under way
/// ([`crate::client::progress_endpoint`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ProbeTarget {
    pub address: std::net::SocketAddr,
}

pub(super) fn is_terminal(engine: &EngineStatus) -> bool {
    engine.state == state::SUCCEEDED || engine.state == state::FAILED
}

pub(super) fn seconds(d: Duration) -> SignedDuration {
    SignedDuration::from_secs(d.as_secs() as i64)
}

pub(super) fn elapsed_since(now: Timestamp, then: Timestamp) -> Duration {
    now.duration_since(then).unsigned_abs()
}

/// A timestamp to the second, as the API stores it, so that what is written reads back equal.
pub fn to_the_second(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

pub(super) fn owned<'a>(observation: &Observation<'a>) -> Vec<&'a Pod> {
    observation
        .pods
        .iter()
        .filter(|p| owned_by(p, observation.benchmark))
        .collect()
}

/// Pods with this benchmark's labels that an earlier benchmark of the same name left (another
/// controller UID, or none).
fn foreign<'a>(observation: &Observation<'a>) -> Vec<&'a Pod> {
    observation
        .pods
        .iter()
        .filter(|p| !owned_by(p, observation.benchmark))
        .collect()
}

/// Which result finalizers come off and which pods are given up, once the status is written:
/// - a client whose engine has ended (its result, if any, is in the status);
/// - a client attempt that ended and was followed by another (its result was taken then);
/// - a pod that an earlier benchmark of the same name left (its results have no home; it is
///   deleted if nobody has yet, and waited for);
/// - a pod whose node stopped reporting (deleted long ago, never stopped): given up, with a
///   forced deletion, since nothing else would ever remove it.
fn give_up_and_release(
    plan: &mut Plan,
    status: &MemoryBenchmarkStatus,
    pods: &[&Pod],
    foreign: &[&Pod],
    now: Timestamp,
    settings: &Settings,
) {
    for pod in pods {
        let name = pod.name_any();
        let engine = engine_index(pod).and_then(|i| status.engines.get(i));
        let lost = stuck_deleting(pod, now, settings.lost_pod_margin);
        let superseded = engine.is_some_and(|e| {
            client_attempt(pod).is_some_and(|a| a < e.client_attempts)
                && matches!(client_state(pod), PodState::Terminated { .. })
        });
        if holds_result(pod) && (lost || superseded || engine.is_none_or(is_terminal)) {
            plan.release.push(name.clone());
        }
        if lost {
            plan.force_delete.push(name);
        }
    }
    for pod in foreign {
        let name = pod.name_any();
        if holds_result(pod) {
            plan.release.push(name.clone());
        }
        if stuck_deleting(pod, now, settings.lost_pod_margin) {
            plan.force_delete.push(name);
        } else if pod.metadata.deletion_timestamp.is_none() {
            plan.delete.push(name);
        }
    }
}

pub(super) fn pods_of(pods: &[&Pod], index: usize, which: Component) -> Vec<Pod> {
    pods.iter()
        .filter(|p| engine_index(p) == Some(index) && component(p) == Some(which))
        .map(|p| (*p).clone())
        .collect()
}

/// The engine currently being measured (the first not finished), if any.
pub(super) fn current_engine(status: &MemoryBenchmarkStatus) -> Option<usize> {
    status.engines.iter().position(|e| !is_terminal(e))
}

/// Where to read progress from: the client pod loading an engine right now, if any.
pub fn probe_target(benchmark: &MemoryBenchmark, pods: &[Pod]) -> Option<ProbeTarget> {
    let status = benchmark.status.clone().unwrap_or_default();
    let index = current_engine(&status)?;
    let observation = Observation {
        benchmark,
        pods,
        now: Timestamp::UNIX_EPOCH,
        load: None,
        rejected: &[],
        others: &[],
    };
    let owned = owned(&observation);
    let engine = pods_of(&owned, index, Component::Engine)
        .into_iter()
        .next()?;
    if !matches!(
        pod_state(&engine),
        PodState::Ready | PodState::Unready { .. }
    ) {
        return None;
    }
    let client = pods_of(&owned, index, Component::Client)
        .into_iter()
        .find(|c| matches!(pod_state(c), PodState::Ready | PodState::Starting { .. }))?;
    let ip: std::net::IpAddr = pods::pod_ip(&client)?.parse().ok()?;
    Some(ProbeTarget {
        address: std::net::SocketAddr::new(ip, crate::client::progress_endpoint::PROGRESS_PORT),
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
        release: Vec::new(),
        force_delete: Vec::new(),
        requeue: None,
    };

    let valid = match validate(benchmark).and_then(|valid| {
        settings.policy.check(spec)?;
        Ok(valid)
    }) {
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
    let foreign = foreign(observation);
    let mut step = Step {
        benchmark,
        settings,
        now,
        pods: &pods,
        plan: &mut plan,
        workload: &valid.workload,
        rejected: observation.rejected,
        foreign: &foreign,
        benchmarks_ahead: benchmarks_ahead(benchmark, observation.others),
    };

    let finished = matches!(status.phase, Some(Phase::Succeeded | Phase::Failed))
        && status.engines.iter().all(is_terminal);
    // The status (with startedAt) is written before the first pod is created: whatever happens
    // to the pods, timeoutSeconds counts from a time the API server holds.
    let first_write = old.started_at.is_none();
    if first_write && !finished {
        status.started_at = Some(Time(now));
        step.requeue(Duration::from_secs(1));
    } else if !finished {
        let started_at = status.started_at.get_or_insert(Time(now)).0;
        let deadline = started_at + seconds(Duration::from_secs(spec.timeout_seconds.into()));
        let timed_out = now >= deadline;
        if timed_out && let Some(index) = current_engine(&status) {
            // A client that finished before this look still counts; one that runs is stopped
            // and its partial result kept (see `Step::fail`).
            let message = format!(
                "the benchmark did not finish within timeoutSeconds ({} s)",
                spec.timeout_seconds
            );
            step.fail(&mut status, index, reason::TIMEOUT, message, true);
        } else if let Some(index) = current_engine(&status) {
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
    give_up_and_release(&mut plan, &status, &pods, &foreign, now, settings);
    for list in [&mut plan.delete, &mut plan.release, &mut plan.force_delete] {
        list.sort();
        list.dedup();
    }

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

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
