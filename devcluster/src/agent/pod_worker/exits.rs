//! How a container's run ends and what follows: the memory-limit kill, the exit's reason and
//! termination message, and the restart per `restartPolicy` after the kubelet's back-off.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::events::EventType;
use nix::sys::signal::Signal;
use tokio::time::Instant;

use crate::agent::process::{
    exit_code, process_group_rss_bytes, read_termination_message, signal_group, tail_of_log,
};
use crate::agent::status::{Lifecycle, Termination};

use super::PodWorker;
use super::stopping::Stopping;

/// The kubelet's restart back-off: 10s doubling up to 5 minutes.
pub(super) const INITIAL_BACKOFF: Duration = Duration::from_secs(10);
pub(super) const MAX_BACKOFF: Duration = Duration::from_secs(300);

pub(super) struct Exit {
    pub(super) slot: usize,
    pub(super) run_id: u64,
    pub(super) status: std::io::Result<std::process::ExitStatus>,
}

impl PodWorker {
    /// Kills a container whose resident memory exceeds its limit, as the kernel's cgroup OOM
    /// killer would (approximately: memory is sampled every 250ms, so a fast allocation can
    /// overshoot before the kill).
    pub(super) fn check_memory(&mut self, i: usize) {
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

    pub(super) async fn exited(&mut self, exit: Exit) {
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
    pub(super) fn finish_run(&mut self, i: usize, t: Termination) {
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
}
