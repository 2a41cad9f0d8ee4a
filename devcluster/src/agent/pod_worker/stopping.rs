//! Stopping the pod's processes: on deletion (SIGTERM, SIGKILL after the grace period, then
//! the final status and the pod object's removal), when the pod object is gone, and when the
//! agent itself stops.

use std::time::Duration;

use kube::ResourceExt;
use kube::api::{DeleteParams, Preconditions};
use nix::sys::signal::Signal;
use tokio::time::Instant;

use crate::agent::process::signal_group;

use super::PodWorker;

/// How long processes get to exit on SIGTERM when the agent itself stops.
pub(super) const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Why the worker is stopping its processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stopping {
    No,
    /// The pod is being deleted: stop, write the final status, remove the pod.
    Deletion,
    /// The agent is stopping.
    Shutdown,
}

impl PodWorker {
    /// The pod object is gone (force-deleted, or deleted by us): kill everything now.
    pub(super) fn deleted(&mut self) {
        for slot in &self.slots {
            if let Some(run) = &slot.run {
                signal_group(run.pid, Signal::SIGKILL);
            }
        }
        self.done = true;
    }

    pub(super) fn grace_period(&self) -> Duration {
        let seconds = self
            .pod
            .metadata
            .deletion_grace_period_seconds
            .or_else(|| {
                self.pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.termination_grace_period_seconds)
            })
            .unwrap_or(30);
        Duration::from_secs(seconds.max(0) as u64)
    }

    pub(super) fn begin_deletion(&mut self) {
        self.stopping = Stopping::Deletion;
        let deadline = Instant::now() + self.grace_period();
        for slot in &mut self.slots {
            if let Some(run) = &mut slot.run {
                signal_group(run.pid, Signal::SIGTERM);
                run.kill_deadline = Some(deadline);
            }
        }
    }

    pub(super) fn begin_shutdown(&mut self) {
        self.stopping = Stopping::Shutdown;
        self.shutdown_deadline = Some(Instant::now() + SHUTDOWN_GRACE);
        for slot in &self.slots {
            if let Some(run) = &slot.run {
                signal_group(run.pid, Signal::SIGTERM);
            }
        }
    }

    /// Every process stopped after the pod's deletion: write the final status and remove the
    /// pod object (grace 0, only this very pod), as the kubelet does.
    pub(super) async fn finish_deletion(&mut self) {
        if !self.adopted_terminal {
            self.write_status().await;
        }
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(self.uid.clone()),
                resource_version: None,
            }),
            ..Default::default()
        };
        match self.api.delete(&self.pod.name_any(), &params).await {
            Ok(_) => self.done = true,
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => self.done = true,
            Err(e) => {
                tracing::warn!(pod = %self.pod_label(), error = %e, "deleting pod failed; will retry");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}
