//! The decision of one reconciliation, as a pure function of what the operator observed: the
//! benchmark (spec and the status it wrote before), the benchmark's pods as the API server
//! lists them, the time, and a progress reading of the engine under load. It returns the new
//! status, the pods to create (before the status is written) and to delete (after it is
//! written, so a result is never lost with its pod), and when to look again. The very first
//! reconciliation creates nothing: it writes the status with `startedAt`, so `timeoutSeconds`
//! holds even when no pod can ever be created. Pods the API server refused come back in the
//! observation ([`super::observation::PodRejection`]) and fail their engine; the other benchmarks the operator
//! watches decide the benchmark's place in its node pool's queue ([`super::queue`]).
//!
//! Everything the operator knows lives in the status and the pods, never in memory, so an
//! operator that restarts mid-run picks up where the last one stopped: a pod it created is
//! found by its deterministic name, a result already recorded is not measured again.
//!
//! The decision is split by what each part answers, and runs one way: this module walks the
//! engines in order and calls the others, which read [`super::observation`] and never this
//! module; [`super::lifecycle`] decides what an engine's pods need next, [`super::results`] takes a
//! client's result into the status, [`super::summary`] derives phase, progress and conditions,
//! and [`super::events`] turns a status change into events.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;

use crate::crd::{EngineStatus, MemoryBenchmark, MemoryBenchmarkStatus, Phase};

use super::conditions::{ConditionStamp, FAILED, PROGRESSING, READY, reason, state};
use super::observation::{
    Observation, Plan, ProbeTarget, Settings, current_engine, is_terminal, pods_of, to_the_second,
};
use super::pods::{
    self, Component, PodState, client_attempt, client_state, engine_index, holds_result, owned_by,
    pod_state, stuck_deleting,
};
use super::queue::benchmarks_ahead;
use super::step::Step;
use super::summary::summarize;
use crate::validation::validate;

fn seconds(d: Duration) -> SignedDuration {
    SignedDuration::from_secs(d.as_secs() as i64)
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
        prices: None,
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

    summarize(
        &mut status,
        benchmark,
        now,
        observation.load,
        &old,
        observation.prices,
    );
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
