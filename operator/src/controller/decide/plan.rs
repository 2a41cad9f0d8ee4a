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

use crate::crd::{
    ConditionReason, EngineState, EngineStatus, MemoryBenchmark, MemoryBenchmarkStatus, Phase,
};

use super::conditions::{ConditionStamp, FAILED, PROGRESSING, READY};
use super::engine_run::EngineRun;
use super::observation::{
    EngineContainer, LoadProbe, Observation, Plan, ProbeTarget, Settings, current_engine,
    is_terminal, pods_of, to_the_second,
};
use super::pod_fit;
use super::pod_state::{self, PodState, client_state, pod_state, stuck_deleting};
use super::spec_error::SpecError;
use super::step::Step;
use super::summary::summarize;
use crate::controller::build::engine_registry::image_registry;
use crate::controller::build::pods::{
    self, Component, client_attempt, engine_index, holds_result, owned_by,
};
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

/// Whether any of the benchmark's pods was ever created: one exists, or an engine has started
/// or ended.
pub fn pods_created(observation: &Observation) -> bool {
    !owned(observation).is_empty()
        || observation
            .benchmark
            .status
            .as_ref()
            .is_some_and(MemoryBenchmarkStatus::any_engine_started)
}

/// Where to read progress from: the client pod loading an engine right now, if any.
pub fn probe_target(benchmark: &MemoryBenchmark, pods: &[Pod]) -> Option<ProbeTarget> {
    let status = benchmark.status.clone().unwrap_or_default();
    probe_target_of(benchmark, pods, current_engine(&status)?)
}

/// The clients of the other runs under way (`spec.parallelism` above 1), whose peak phases'
/// marks ([`crate::controller::read::container_reading`]) are answered as the probed client's are.
pub fn other_clients_under_way(benchmark: &MemoryBenchmark, pods: &[Pod]) -> Vec<ProbeTarget> {
    let status = benchmark.status.clone().unwrap_or_default();
    let probed = current_engine(&status);
    (0..status.engines.len())
        .filter(|&i| Some(i) != probed && !is_terminal(&status.engines[i]))
        .filter_map(|i| probe_target_of(benchmark, pods, i))
        .collect()
}

/// The client pod loading run `index`'s engine, if it runs.
fn probe_target_of(benchmark: &MemoryBenchmark, pods: &[Pod], index: usize) -> Option<ProbeTarget> {
    let observation = Observation::of_pods(benchmark, pods, Timestamp::UNIX_EPOCH);
    let owned = owned(&observation);
    // The engine the client loads, not a replica (spec.peak.replica) beside it.
    let engine = pods_of(&owned, index, Component::Engine)
        .into_iter()
        .find(|p| !pods::is_replica(p))?;
    if !matches!(
        pod_state(&engine),
        PodState::Ready | PodState::Unready { .. }
    ) {
        return None;
    }
    let client = pods_of(&owned, index, Component::Client)
        .into_iter()
        .find(|c| matches!(pod_state(c), PodState::Ready | PodState::Starting { .. }))?;
    let ip: std::net::IpAddr = pod_state::pod_ip(&client)?.parse().ok()?;
    let replica = pods_of(&owned, index, Component::Engine)
        .into_iter()
        .find(pods::is_replica);
    Some(ProbeTarget {
        address: std::net::SocketAddr::new(
            ip,
            crate::client::pod_io::progress_endpoint::PROGRESS_PORT,
        ),
        engine: EngineContainer::of(&engine),
        replica: replica.as_ref().and_then(EngineContainer::of),
    })
}

/// Which client pods to read a whole result from ([`crate::client::pod_io::progress_endpoint`]), by
/// pod name and address: the client of the engine being probed once its progress says done,
/// and the client of any run under way whose pods' node stopped reporting (before the run
/// fails NodeLost, so what the client finished there is kept). Its pod IP is where its
/// progress is read.
pub fn result_targets(
    benchmark: &MemoryBenchmark,
    pods: &[Pod],
    load: Option<LoadProbe>,
    now: Timestamp,
    settings: &Settings,
) -> Vec<(String, ProbeTarget)> {
    let status = benchmark.status.clone().unwrap_or_default();
    let observation = Observation::of_pods(benchmark, pods, now);
    let owned = owned(&observation);
    let probed = current_engine(&status);
    let mut targets = Vec::new();
    for (index, engine) in status.engines.iter().enumerate() {
        if is_terminal(engine) {
            continue;
        }
        let done = Some(index) == probed && load.is_some_and(|l| l.done);
        let lost = owned.iter().any(|p| {
            engine_index(p) == Some(index) && stuck_deleting(p, now, settings.lost_pod_margin)
        });
        if !done && !lost {
            continue;
        }
        let clients = pods_of(&owned, index, Component::Client);
        let Some(client) = clients.iter().max_by_key(|c| client_attempt(c)) else {
            continue;
        };
        let Some(ip) = pod_state::pod_ip(client).and_then(|ip| ip.parse().ok()) else {
            continue;
        };
        let address =
            std::net::SocketAddr::new(ip, crate::client::pod_io::progress_endpoint::PROGRESS_PORT);
        targets.push((
            client.name_any(),
            ProbeTarget {
                address,
                engine: None,
                replica: None,
            },
        ));
    }
    targets
}

/// Decides what to do; see the module documentation.
pub fn plan(observation: &Observation, settings: &Settings) -> Plan {
    let benchmark = observation.benchmark;
    let spec = &benchmark.spec;
    let now = to_the_second(observation.now);
    let old = benchmark.status.clone().unwrap_or_default();
    let mut status = old.clone();
    status.observed_generation = benchmark.metadata.generation;
    status.instance_types = Some(spec.instance_types().join(", ")).filter(|t| !t.is_empty());
    let mut plan = Plan {
        status: MemoryBenchmarkStatus::default(),
        create: Vec::new(),
        delete: Vec::new(),
        release: Vec::new(),
        force_delete: Vec::new(),
        requeue: None,
    };

    let valid = match validate(benchmark)
        .map_err(SpecError::from)
        .and_then(|valid| {
            settings
                .policy
                .check_with(spec, settings.pods.engine_registry.as_ref())?;
            // Before the first pod only: a run under way keeps going whatever nodes come later.
            if !pods_created(observation) {
                let sizes = pods::pod_resources(benchmark, &settings.pods);
                pod_fit::check(benchmark, &valid.engine_memory, &sizes, observation.nodes)?;
            }
            Ok(valid)
        }) {
        Ok(valid) => valid,
        Err(refusal) => {
            let message = refusal.to_string();
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
                    refusal.reason(),
                    &message,
                );
            }
            plan.status = status;
            return plan;
        }
    };
    status.workload = Some(valid.workload.describe());
    let fresh = initial_engines(benchmark, settings);
    let same_entries = status.engines.len() == fresh.len()
        && status
            .engines
            .iter()
            .zip(&fresh)
            .all(|(a, b)| a.name == b.name && a.instance_type == b.instance_type);
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
        run_plans: &valid.plans,
        rejected: observation.rejected,
        served: observation.served,
        foreign: &foreign,
        others: observation.others,
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
        if now >= deadline {
            time_out(&mut step, &mut status);
        } else {
            let (to_delete, leftover_runs) = step.leftovers(&status);
            step.plan.delete.extend(to_delete);
            let probed = current_engine(&status);
            for index in runs_to_step(&status, spec, &pods, &leftover_runs) {
                let memory = valid.engine_memory[spec.entry_of_run(index)];
                let load = observation.load.filter(|_| Some(index) == probed);
                step.engine(&mut EngineRun::new(&mut status, index), memory, load);
            }
            if !leftover_runs.is_empty() {
                step.requeue(Duration::from_secs(1));
            }
        }
    }
    // Finished benchmarks keep no pods but the kept ones (also after an operator restart).
    if current_engine(&status).is_none() {
        let (to_delete, _) = step.leftovers(&status);
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

/// Whether run `index` has begun: its engine pod was created (the status says so, or a pod
/// created just before an operator restart does).
fn has_begun(status: &MemoryBenchmarkStatus, pods: &[&Pod], index: usize) -> bool {
    status.engines[index].started_at.is_some()
        || pods.iter().any(|p| engine_index(p) == Some(index))
}

/// The runs this reconciliation looks after, in order: every run under way, and on each
/// instance type the next ones that have not begun while fewer than `spec.parallelism` of that
/// type's runs hold a node (runs under way, and ended runs whose pods are still being
/// deleted). With parallelism 1 that is one run at a time, each after the pods of the one
/// before are gone. A run given its turn that cannot start yet (other benchmarks come first in
/// the pool's queue) keeps its slot, so no later run of the same type overtakes it.
fn runs_to_step(
    status: &MemoryBenchmarkStatus,
    spec: &crate::crd::MemoryBenchmarkSpec,
    pods: &[&Pod],
    leftover_runs: &[usize],
) -> Vec<usize> {
    let mut chosen = Vec::new();
    for instance_type in spec.instance_types() {
        let of_type: Vec<usize> = (0..status.engines.len())
            .filter(|&i| spec.instance_type_of_run(i) == instance_type)
            .collect();
        let under_way: Vec<usize> = of_type
            .iter()
            .copied()
            .filter(|&i| !is_terminal(&status.engines[i]) && has_begun(status, pods, i))
            .collect();
        let holding = under_way.len()
            + leftover_runs
                .iter()
                .filter(|&&i| spec.instance_type_of_run(i) == instance_type)
                .count();
        let free = (spec.parallelism as usize).saturating_sub(holding);
        let next = of_type
            .iter()
            .copied()
            .filter(|&i| !is_terminal(&status.engines[i]) && !has_begun(status, pods, i))
            .take(free);
        chosen.extend(under_way);
        chosen.extend(next);
    }
    chosen.sort();
    chosen
}

/// The benchmark ran out of time (timeoutSeconds): every run under way fails as Timeout,
/// keeping what its client measured (see `Step::fail`), and the runs that never began are not
/// run. When none had begun, the first run fails as Timeout and the rest are not run.
fn time_out(step: &mut Step, status: &mut MemoryBenchmarkStatus) {
    let message = format!(
        "the benchmark did not finish within timeoutSeconds ({} s)",
        step.benchmark.spec.timeout_seconds
    );
    let open: Vec<usize> = (0..status.engines.len())
        .filter(|&i| !is_terminal(&status.engines[i]))
        .collect();
    let begun: Vec<usize> = open
        .iter()
        .copied()
        .filter(|&i| has_begun(status, step.pods, i))
        .collect();
    let failing = if begun.is_empty() {
        open.first().copied().into_iter().collect()
    } else {
        begun
    };
    for &index in &failing {
        step.fail(
            &mut EngineRun::new(status, index),
            ConditionReason::Timeout,
            message.clone(),
            false,
        );
    }
    let cause = failing
        .first()
        .map(|&i| status.engines[i].name.clone())
        .unwrap_or_default();
    for index in open {
        let mut run = EngineRun::new(status, index);
        let engine = run.engine_mut();
        if !failing.contains(&index) && !is_terminal(engine) {
            engine.state = EngineState::Failed;
            engine.reason = Some(ConditionReason::NotRun);
            engine.message = Some(format!(
                "not run: {cause} ended with {}",
                ConditionReason::Timeout
            ));
        }
    }
}

/// One entry per run: every engine on every instance type (`spec.instanceTypes`), all engines
/// on the first type, then all on the next.
fn initial_engines(benchmark: &MemoryBenchmark, settings: &Settings) -> Vec<EngineStatus> {
    let spec = &benchmark.spec;
    (0..spec.runs())
        .map(|run| {
            let e = spec.engine_of_run(run);
            EngineStatus {
                name: e.display_name(),
                engine: e.engine.into(),
                requested_version: e.version.clone(),
                state: EngineState::Pending,
                image: Some(pods::engine_image(e, &settings.pods)),
                engine_registry: image_registry(e, settings.pods.engine_registry.as_ref())
                    .map(|r| r.as_str().to_string()),
                instance_type: Some(spec.instance_type_of_run(run)),
                ..Default::default()
            }
        })
        .collect()
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
