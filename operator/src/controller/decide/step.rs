//! The state one reconciliation works on ([`Step`]) and what every part of the decision does
//! with an engine run ([`EngineRun`]) through it: requeue, wait with a reason, fail the engine
//! (keeping what its client measured), succeed. [`super::lifecycle`] (the engine's pods) and
//! [`super::client_lifecycle`] (its client's pods) both end engines through these, and this
//! module imports neither of them. Pure.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use crate::client::measurement::measured::FailedPhase;
use crate::client::measurement::plan::RunPlan;
use crate::client::pod_io::result::{ClientResult, ReadError};
use crate::crd::{
    CleanupPolicy, ConditionReason, EngineState, MemoryBenchmark, MemoryBenchmarkStatus,
};

use super::engine_run::EngineRun;
use super::observation::{
    Plan, PodRejection, ServedResult, Settings, elapsed_since, is_terminal, pods_of, to_the_second,
};
use super::pod_state::{PodState, client_state, has_started, stuck_deleting};
use super::queue::benchmarks_ahead;
use super::results::{absorb, churn_status_bytes, listed_per_run, result_note, tail};
use crate::controller::build::pods::{Component, client_attempt, engine_index};

/// Terminated reasons of a container that never ran: the runtime could not start its program
/// (containerd's `StartError`, Docker's `ContainerCannotRun`).
pub(super) const NEVER_STARTED: [&str; 2] = ["StartError", "ContainerCannotRun"];

/// The message of a `container` ("engine" or "client") whose program never started: `why` is
/// one of [`NEVER_STARTED`], `message` the runtime's.
pub(super) fn never_started(container: &str, why: &str, message: Option<&str>) -> String {
    format!(
        "the {container} container could not be started ({why}): {}",
        tail(message.unwrap_or_default(), 600)
    )
}

/// The state one reconciliation works on.
pub(super) struct Step<'a, 'p> {
    pub(super) benchmark: &'a MemoryBenchmark,
    pub(super) settings: &'a Settings,
    pub(super) now: Timestamp,
    pub(super) pods: &'a [&'p Pod],
    pub(super) plan: &'a mut Plan,
    /// Each engine entry's run plan, which its client pods receive.
    pub(super) run_plans: &'a [RunPlan],
    /// Pods the API server refused to create in this reconciliation.
    pub(super) rejected: &'a [PodRejection],
    /// Whole results read from client pods in this reconciliation.
    pub(super) served: &'a [ServedResult],
    /// Pods with this benchmark's labels that an earlier benchmark of the same name (another
    /// UID) left behind: never this one's, and in the way of pods of the same name.
    pub(super) foreign: &'a [&'p Pod],
    /// The other benchmarks the operator watches, for the queue on each node pool.
    pub(super) others: &'a [Arc<MemoryBenchmark>],
}

impl Step<'_, '_> {
    /// Benchmarks that wait for a free node of run `index`'s pool and came first.
    pub(super) fn benchmarks_ahead(&self, index: usize) -> usize {
        let instance_type = self.benchmark.spec.instance_type_of_run(index);
        benchmarks_ahead(self.benchmark, &instance_type, self.others)
    }

    pub(super) fn requeue(&mut self, after: Duration) {
        self.plan.requeue = Some(self.plan.requeue.map_or(after, |r| r.min(after)));
    }

    /// The engine of `run` waits for something: its reason and message say what, and the operator
    /// looks again after `after`.
    pub(super) fn wait(
        &mut self,
        run: &mut EngineRun<'_>,
        why: ConditionReason,
        message: String,
        after: Duration,
    ) {
        let engine = run.engine_mut();
        engine.reason = Some(why);
        engine.message = Some(message);
        self.requeue(after);
    }

    /// A pod of `run`'s engine the scheduler has not placed: once it has `waited_out` the
    /// scheduling timeout, the engine fails `Unschedulable` with the message `late` builds;
    /// before, it waits for a node (`waiting` says what the scheduler said) and the operator
    /// looks again in 5 s.
    pub(super) fn not_placed(
        &mut self,
        run: &mut EngineRun<'_>,
        waited_out: bool,
        late: impl FnOnce() -> String,
        waiting: String,
    ) {
        if waited_out {
            self.fail(run, ConditionReason::Unschedulable, late(), true);
        } else {
            let after = Duration::from_secs(5);
            self.wait(run, ConditionReason::WaitingForNode, waiting, after);
        }
    }

    /// How many repetitions each run's status lists ([`listed_per_run`]).
    pub(super) fn listed(&self) -> u32 {
        listed_per_run(
            self.benchmark.spec.runs(),
            self.benchmark.spec.repetitions,
            churn_status_bytes(&self.benchmark.spec),
        )
    }

    /// The whole result the client pod `name` served in this reconciliation, if it was read.
    pub(super) fn served_by(&self, name: &str) -> Option<Result<ClientResult, ReadError>> {
        self.served
            .iter()
            .find(|s| s.pod == name)
            .map(|s| s.result.clone())
    }

    /// What the API server said when it refused to create the pod `name`, if it did.
    pub(super) fn rejection(&self, name: &str) -> Option<String> {
        self.rejected
            .iter()
            .find(|r| r.pod == name)
            .map(|r| r.message.clone())
    }

    fn keeps_pods_of(&self, status: &MemoryBenchmarkStatus, index: usize) -> bool {
        self.benchmark.spec.cleanup_policy == CleanupPolicy::KeepFailed
            && status
                .engines
                .get(index)
                .is_some_and(|e| e.state == EngineState::Failed)
    }

    /// Pods of ended runs that should be gone (all but the ones kept for debugging): those to
    /// delete now, and the runs whose pods are still there (deleting takes a moment, and until
    /// the pods are gone their node is not free for the next engine).
    pub(super) fn leftovers(&self, status: &MemoryBenchmarkStatus) -> (Vec<String>, Vec<usize>) {
        let ended = |i: usize| {
            status.engines.get(i).is_some_and(is_terminal) && !self.keeps_pods_of(status, i)
        };
        let leftovers: Vec<&&Pod> = self
            .pods
            .iter()
            .filter(|p| engine_index(p).is_some_and(ended))
            .collect();
        let to_delete = leftovers
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(|p| p.name_any())
            .collect();
        let mut runs: Vec<usize> = leftovers.iter().filter_map(|p| engine_index(p)).collect();
        runs.sort();
        runs.dedup();
        (to_delete, runs)
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

    /// Fails `run`'s engine without losing what its client measured: a client that runs is
    /// asked to stop (its pod deleted: SIGTERM; the result finalizer keeps it readable) and
    /// waited for, and a client that ended has its result taken into the status first (a
    /// complete one makes the engine succeed after all). With `abort`, the engines after it are
    /// not run either (their pods could not be placed or the benchmark ran out of time).
    pub(super) fn fail(
        &mut self,
        run: &mut EngineRun<'_>,
        why: ConditionReason,
        message: String,
        abort: bool,
    ) {
        match self.keep_client_result(run) {
            KeptResult::Stopping => {
                let message =
                    format!("{why}: {message}; stopping the client to keep what it measured");
                self.wait(
                    run,
                    ConditionReason::StoppingClient,
                    message,
                    Duration::from_secs(1),
                );
            }
            KeptResult::Complete => {
                self.succeed(run);
                if abort {
                    self.not_run_after(run, why);
                }
            }
            KeptResult::Partial(_) | KeptResult::Nothing => {
                let done = run.engine().repetitions.len();
                let message = if done > 0 {
                    format!(
                        "{message}; the {done} of {} repetitions measured before are kept",
                        self.benchmark.spec.repetitions
                    )
                } else {
                    message
                };
                self.mark_failed(run, why, message, abort);
            }
        }
    }

    /// Marks `run`'s engine failed now (its client, if any, has ended and its result is in).
    pub(super) fn mark_failed(
        &mut self,
        run: &mut EngineRun<'_>,
        why: ConditionReason,
        message: String,
        abort: bool,
    ) {
        let now = self.now;
        let engine = run.engine_mut();
        engine.state = EngineState::Failed;
        engine.reason = Some(why.clone());
        engine.message = Some(message);
        engine.finished_at = Some(Time(now));
        if !self.keeps_pods_of(run.status(), run.index()) {
            self.delete_pods_of(run.index());
        }
        if abort {
            self.not_run_after(run, why);
        }
        self.requeue(Duration::from_secs(1));
    }

    /// The runs after `run` on its instance type that have not started will not run: `why`
    /// ended the benchmark there (its pods cannot be placed on that type). Runs already under
    /// way (`parallelism` above 1) go on, and end on their own.
    fn not_run_after(&mut self, run: &mut EngineRun<'_>, why: ConditionReason) {
        let index = run.index();
        let name = run.engine().name.clone();
        let spec = &self.benchmark.spec;
        let instance_type = spec.instance_type_of_run(index);
        let engines = &mut run.status_mut().engines;
        for (other, later) in engines.iter_mut().enumerate().skip(index + 1) {
            if !is_terminal(later)
                && later.started_at.is_none()
                && spec.instance_type_of_run(other) == instance_type
            {
                later.state = EngineState::Failed;
                later.reason = Some(ConditionReason::NotRun);
                later.message = Some(format!("not run: {name} ended with {why}"));
            }
        }
    }

    pub(super) fn succeed(&mut self, run: &mut EngineRun<'_>) {
        let engine = run.engine_mut();
        engine.state = EngineState::Succeeded;
        engine.reason = Some(ConditionReason::Completed);
        engine.finished_at = Some(Time(self.now));
        self.delete_pods_of(run.index());
        self.requeue(Duration::from_secs(1));
    }

    /// Whether an image that cannot be pulled fails its engine now: `Some` (with a note on how
    /// long the kubelet retried) when the failure is permanent or the retries took too long.
    pub(super) fn pull_verdict(&self, since: Timestamp, permanent: bool) -> Option<String> {
        if permanent {
            return Some(String::new());
        }
        let waited = elapsed_since(self.now, since);
        (waited >= self.settings.image_pull_timeout)
            .then(|| format!(" (the node retried for {} s)", waited.as_secs()))
    }

    /// A container whose Secret or ConfigMap is missing (`container` names it: engine or
    /// client): waits while the node retries, and fails once it has retried for the startup
    /// timeout (`abort`: the rest of the benchmark is not run either).
    pub(super) fn config_error(
        &mut self,
        run: &mut EngineRun<'_>,
        container: &str,
        message: &str,
        since: Timestamp,
        abort: bool,
    ) {
        let limit = self.settings.startup_timeout.as_secs();
        let message = tail(message, 300);
        let hint = match &self.benchmark.spec.auth {
            Some(auth) => format!(
                " (spec.auth.passwordSecretRef names Secret {:?}, key {:?}, in namespace {:?}: create it there)",
                auth.password_secret_ref.name,
                auth.password_secret_ref.key,
                self.benchmark
                    .metadata
                    .namespace
                    .as_deref()
                    .unwrap_or("default")
            ),
            None => format!(
                " (the engine password Secret {:?} that the operator made for this benchmark is gone: delete the benchmark and create it again)",
                crate::auth::generated_password_secret(self.benchmark).name
            ),
        };
        if elapsed_since(self.now, since) >= self.settings.startup_timeout {
            let message = format!(
                "the {container} container could not be created within {limit} s: {message}{hint}"
            );
            let why = ConditionReason::CreateContainerConfigError;
            self.fail(run, why, message, abort);
        } else {
            let note = format!(
                "the node cannot create the {container} container yet: {message}{hint}; it retries until {limit} s after the pod was scheduled ({})",
                to_the_second(since)
            );
            let after = Duration::from_secs(5);
            self.wait(run, ConditionReason::WaitingForConfig, note, after);
        }
    }

    pub(super) fn pull_wait_note(
        &self,
        image: &str,
        why: &str,
        message: &str,
        since: Timestamp,
    ) -> String {
        format!(
            "the node cannot pull {image} yet ({why}: {}); it retries with back-off until {} s after the pod was scheduled ({})",
            tail(message, 300),
            self.settings.image_pull_timeout.as_secs(),
            to_the_second(since)
        )
    }

    /// Takes what the latest client of `run`'s engine measured into the status, before the
    /// engine ends: a client that still runs is asked to stop (its pod deleted, so it gets
    /// SIGTERM and writes what it has; the result finalizer keeps the pod readable) and waited
    /// for. A client on a node that stopped reporting cannot answer, and is not waited for.
    pub(super) fn keep_client_result(&mut self, run: &mut EngineRun<'_>) -> KeptResult {
        let Some(client) = self.latest_client(run) else {
            return KeptResult::Nothing;
        };
        if stuck_deleting(&client, self.now, self.settings.lost_pod_margin) {
            return KeptResult::Nothing;
        }
        match client_state(&client) {
            PodState::Terminated {
                exit_code, message, ..
            } => {
                let Ok(result) = ClientResult::read(
                    message.as_deref().unwrap_or_default(),
                    self.benchmark.spec.repetitions,
                ) else {
                    return KeptResult::Nothing;
                };
                absorb(run.engine_mut(), &result, self.listed());
                if exit_code == 0 && result.error.is_none() {
                    run.engine_mut().message = result_note(&result, self.listed());
                    KeptResult::Complete
                } else {
                    KeptResult::Partial(result.error.and_then(|e| e.phase))
                }
            }
            _ if has_started(&client) => {
                if client.metadata.deletion_timestamp.is_none() {
                    self.plan.delete.push(client.name_any());
                }
                KeptResult::Stopping
            }
            _ => KeptResult::Nothing,
        }
    }

    /// The client pod of the latest attempt, and the attempt count (status and pods agree on
    /// the larger, so a pod created just before an operator restart is not created twice).
    pub(super) fn latest_client(&self, run: &mut EngineRun<'_>) -> Option<Pod> {
        let clients = pods_of(self.pods, run.index(), Component::Client);
        let attempts = clients
            .iter()
            .filter_map(client_attempt)
            .max()
            .unwrap_or(0)
            .max(run.engine().client_attempts);
        run.engine_mut().client_attempts = attempts;
        clients
            .into_iter()
            .find(|c| client_attempt(c) == Some(attempts))
    }
}

/// What became of the latest client's measurements when its engine must end.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum KeptResult {
    /// It still runs: it was asked to stop, and its result is waited for.
    Stopping,
    /// It had finished every repetition: its result is in the status.
    Complete,
    /// It ended early: what it measured is in the status, and the phase after a repetition's
    /// readings that was running when it ended, if one was.
    Partial(Option<FailedPhase>),
    /// There is nothing to keep (no client, one that never started or left no result, or one
    /// lost with its node).
    Nothing,
}

/// The engine reason of a container that could not be created or started: the kubelet's own.
pub(super) fn container_error_reason(waiting_reason: &str) -> ConditionReason {
    if waiting_reason == ConditionReason::CreateContainerError.as_str() {
        ConditionReason::CreateContainerError
    } else {
        ConditionReason::RunContainerError
    }
}
