//! What an engine's client pod needs next: start it next to the ready engine, read its
//! result, retry a client that failed while its engine is fine, and, when the engine must end
//! (the deadline, its pod lost, its node lost), stop the client without losing what it
//! measured. Part of the pure decision: [`super::lifecycle`] hands over to it, and it ends engines
//! through [`super::step`].

use std::time::Duration;

use kube::ResourceExt;

use crate::client::pod_io::result::{ClientResult, ReadError};
use crate::crd::{CleanupPolicy, ConditionReason};

use super::engine_run::EngineRun;
use super::observation::{LoadProbe, elapsed_since, pods_of};
use super::pod_state::{self, PodState, client_state};
use super::pull_failure::{pull_failure_note, pull_secret_names};
use super::results::{absorb, result_note, tail};
use super::step::{NEVER_STARTED, Step, container_error_reason, never_started};
use crate::controller::build::pods::{self, Component};
use crate::error::ErrorCategory;

impl Step<'_, '_> {
    /// Whether a pod named `name`, left by an earlier benchmark of this name, is still in the
    /// way: its pods are never this benchmark's, so it waits for them to go (the plan deletes
    /// and releases them).
    pub(super) fn blocked_by_earlier_pod(&mut self, run: &mut EngineRun<'_>, name: &str) -> bool {
        if !self.foreign.iter().any(|p| p.name_any() == name) {
            return false;
        }
        let message = format!(
            "pod {name} of an earlier benchmark named {} is still terminating; waiting for it to go",
            self.benchmark.name_any()
        );
        let after = Duration::from_secs(1);
        self.wait(run, ConditionReason::WaitingForOldPods, message, after);
        true
    }

    fn start_client(&mut self, run: &mut EngineRun<'_>, engine_ips: &[String]) {
        let attempt = run.engine().client_attempts + 1;
        let name = pods::client_pod_name(&self.benchmark.name_any(), run.index(), attempt);
        if let Some(refusal) = self.rejection(&name) {
            let message = format!("the API server rejected the client pod {name}: {refusal}");
            self.fail(run, ConditionReason::PodRejected, message, false);
            return;
        }
        if self.blocked_by_earlier_pod(run, &name) {
            return;
        }
        let replica_ip = self.replica_ip(run.index());
        self.plan.create.push(pods::client_pod_of_shards(
            self.benchmark,
            run.index(),
            attempt,
            self.run_plans,
            engine_ips,
            replica_ip.as_deref(),
            &self.settings.pods,
        ));
        let engine = run.engine_mut();
        engine.client_attempts = attempt;
        engine.reason = Some(ConditionReason::ClientStarting);
        self.requeue(Duration::from_secs(2));
    }

    pub(super) fn client(
        &mut self,
        run: &mut EngineRun<'_>,
        engine_ips: &[String],
        load: Option<LoadProbe>,
    ) {
        let client = self.latest_client(run);
        let attempts = run.engine().client_attempts;
        let Some(client) = client else {
            if attempts == 0 {
                self.start_client(run, engine_ips);
            } else {
                let message = "the client pod disappeared before it finished".to_string();
                self.client_failed(run, engine_ips, message, None);
            }
            return;
        };
        let created = client
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(self.now, |t| t.0);
        match client_state(&client) {
            // Being deleted by someone else (an eviction, kubectl): it stops and leaves its
            // result, which counts as a failed attempt.
            PodState::Deleting => self.requeue(Duration::from_secs(2)),
            PodState::Unscheduled { message } => {
                let message = message.unwrap_or_else(|| "waiting for the scheduler".into());
                let timeout = self.settings.scheduling_timeout;
                let waited_out = elapsed_since(self.now, created) >= timeout;
                let late = || {
                    format!(
                        "the client pod could not be placed next to its engine within {} s: {message}",
                        timeout.as_secs()
                    )
                };
                let waiting = format!("client: {message}");
                self.not_placed(run, waited_out, late, waiting);
            }
            PodState::ImagePullFailed {
                reason: why,
                message,
                permanent,
            } => {
                let image = self.settings.pods.client_image.clone();
                let since = pod_state::scheduled_at(&client).unwrap_or(created);
                match self.pull_verdict(since, permanent) {
                    Some(retried) => {
                        let secrets = pull_secret_names(&client);
                        let namespace = client.namespace().unwrap_or_default();
                        let note = pull_failure_note(&image, &message, &secrets, &namespace);
                        let message = format!(
                            "cannot pull the client image {image}: {why}: {message}{retried}; {note}"
                        );
                        self.fail(run, ConditionReason::ClientImagePullFailed, message, true);
                    }
                    None => {
                        let note = self.pull_wait_note(&image, &why, &message, since);
                        let note = format!("client: {note}");
                        let after = Duration::from_secs(5);
                        self.wait(run, ConditionReason::WaitingForImage, note, after);
                    }
                }
            }
            PodState::ConfigError { message } => {
                let since = pod_state::scheduled_at(&client).unwrap_or(created);
                self.config_error(run, "client", &message, since, true);
            }
            // Every client pod runs the same image and command: the next would fail alike.
            PodState::ContainerError {
                reason: why,
                message,
            } => {
                let message = format!("the client container could not be started: {message}");
                self.fail(run, container_error_reason(&why), message, true);
            }
            PodState::Terminated {
                reason: Some(why),
                message,
                ..
            } if NEVER_STARTED.contains(&why.as_str()) => {
                let message = never_started("client", &why, message.as_deref());
                self.fail(run, ConditionReason::RunContainerError, message, true);
            }
            PodState::Starting { .. } | PodState::Unready { .. } | PodState::Ready => {
                if load.is_some_and(|l| l.done) && self.take_served(run, &client) {
                    return;
                }
                let engine = run.engine_mut();
                engine.reason = Some(ConditionReason::Measuring);
                engine.message = None;
                // Finishing: the result is taken within a second of the client being done.
                let after = if load.is_some_and(|l| l.finishing) {
                    Duration::from_secs(1).min(self.settings.poll_interval)
                } else {
                    self.settings.poll_interval
                };
                self.requeue(after);
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
                    // A broken or forged result: another attempt would read the same.
                    (Err(ReadError::Invalid(why)), _) => {
                        let message = format!("the client's result was refused: {why}");
                        self.mark_failed(run, ConditionReason::InvalidClientResult, message, false);
                    }
                    (Ok(result), None) if exit_code == 0 => {
                        absorb(run.engine_mut(), result, self.listed());
                        run.engine_mut().message = result_note(result, self.listed());
                        self.succeed(run);
                    }
                    (Ok(result), Some(error)) if !error.category.is_retryable() => {
                        absorb(run.engine_mut(), result, self.listed());
                        let done = run.engine().repetitions.len();
                        let why = ConditionReason::from(&error.category);
                        let message = format!(
                            "{} (after {done} of {repetitions} repetitions)",
                            error.message
                        );
                        self.mark_failed(run, why, message, false);
                    }
                    (_, error) => {
                        let lost = error
                            .as_ref()
                            .is_some_and(|e| e.category == ErrorCategory::ConnectionLost);
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
                        self.client_failed(run, engine_ips, message, parsed.as_ref().ok());
                    }
                }
            }
        }
    }

    /// A client that reported done while it still runs: the whole result it served, when it
    /// was read and holds, is taken into the status and the engine succeeds (its pod is then
    /// deleted, which ends the client's wait). A result that breaks the bounds fails the engine
    /// as a broken termination message does; one that could not be read, or that carries an
    /// error, is left to the termination message once the client leaves. Returns whether the
    /// engine ended.
    fn take_served(
        &mut self,
        run: &mut EngineRun<'_>,
        client: &k8s_openapi::api::core::v1::Pod,
    ) -> bool {
        match self.served_by(&client.name_any()) {
            // Done means every repetition: a result short of them (a reading of an earlier
            // client, a forged one) waits for the termination message.
            Some(Ok(result))
                if result.error.is_none()
                    && result
                        .summary
                        .as_ref()
                        .is_some_and(|s| s.repetitions == self.benchmark.spec.repetitions) =>
            {
                absorb(run.engine_mut(), &result, self.listed());
                run.engine_mut().message = result_note(&result, self.listed());
                self.succeed(run);
                true
            }
            Some(Err(ReadError::Invalid(why))) => {
                let message = format!("the client's result was refused: {why}");
                self.mark_failed(run, ConditionReason::InvalidClientResult, message, false);
                true
            }
            _ => false,
        }
    }

    /// A client failed while its engine is healthy: keep what it measured, and retry while
    /// attempts remain.
    fn client_failed(
        &mut self,
        run: &mut EngineRun<'_>,
        engine_ips: &[String],
        message: String,
        result: Option<&ClientResult>,
    ) {
        if let Some(result) = result {
            absorb(run.engine_mut(), result, self.listed());
        }
        let attempts = run.engine().client_attempts;
        if attempts < self.settings.client_attempts {
            if self.benchmark.spec.cleanup_policy != CleanupPolicy::KeepFailed {
                let names: Vec<String> = pods_of(self.pods, run.index(), Component::Client)
                    .iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .map(|p| p.name_any())
                    .collect();
                self.plan.delete.extend(names);
            }
            self.start_client(run, engine_ips);
            run.engine_mut().message = Some(format!(
                "client attempt {attempts} of {} failed: {}",
                self.settings.client_attempts,
                tail(&message, 600)
            ));
        } else {
            let message = format!(
                "the client failed {attempts} times; the last time: {}",
                tail(&message, 600)
            );
            self.fail(run, ConditionReason::ClientFailed, message, false);
        }
    }
}
