//! The pod's status: the one this agent writes (when it changed since the last write), and the
//! one a previous agent left, which a restarted agent takes over.

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};

use crate::agent::nodes::{FIELD_MANAGER, NODE_IP};
use crate::agent::status::{Lifecycle, PodRecord, Termination, pod_status, status_patch};

use super::PodWorker;
use super::stopping::Stopping;

impl PodWorker {
    /// A pod this agent did not start but finds bound to its node (the agent restarted): a
    /// finished pod is left alone; containers it says were running are lost, and are reported
    /// like a kubelet reports containers it can no longer find.
    pub(super) fn adopt_existing_status(&mut self) {
        let Some(status) = self.pod.status.clone() else {
            return;
        };
        if matches!(status.phase.as_deref(), Some("Succeeded" | "Failed")) {
            self.adopted_terminal = true;
            return;
        }
        if let Some(start) = &status.start_time {
            self.start_time = start.0;
        }
        if let Some(ip) = status.pod_ip.as_deref().and_then(|ip| ip.parse().ok()) {
            self.pod_ip = Some(ip);
        }
        let previous: Vec<_> = status
            .init_container_statuses
            .iter()
            .flatten()
            .chain(status.container_statuses.iter().flatten())
            .cloned()
            .collect();
        let mut lost = Vec::new();
        for (i, slot) in self.slots.iter_mut().enumerate() {
            let Some(old) = previous.iter().find(|s| s.name == slot.spec.name) else {
                continue;
            };
            let state = old.state.clone().unwrap_or_default();
            slot.record.restart_count = old.restart_count;
            slot.starts = u32::try_from(old.restart_count).unwrap_or(0);
            if let Some(t) = &state.terminated
                && slot.init
                && t.exit_code == 0
            {
                // A finished init container stays finished.
                slot.record.lifecycle = Lifecycle::Terminated(Termination {
                    exit_code: 0,
                    signal: t.signal,
                    reason: t.reason.clone().unwrap_or_else(|| "Completed".into()),
                    message: t.message.clone(),
                    started_at: t.started_at.as_ref().map(|s| s.0),
                    finished_at: t
                        .finished_at
                        .as_ref()
                        .map(|s| s.0)
                        .unwrap_or_else(Timestamp::now),
                    container_id: t.container_id.clone(),
                });
                continue;
            }
            if state.running.is_some() || old.started == Some(true) {
                slot.starts = slot.starts.max(1);
                lost.push((
                    i,
                    Termination {
                        exit_code: 137,
                        signal: None,
                        reason: "ContainerStatusUnknown".into(),
                        message: Some(
                            "The container could not be located when the node agent restarted"
                                .into(),
                        ),
                        started_at: state.running.and_then(|r| r.started_at).map(|s| s.0),
                        finished_at: Timestamp::now(),
                        container_id: old.container_id.clone(),
                    },
                ));
            }
        }
        for (i, termination) in lost {
            self.finish_run(i, termination);
        }
    }

    fn record(&self) -> PodRecord {
        let spec = self.pod.spec.as_ref();
        PodRecord {
            init_containers: self
                .slots
                .iter()
                .filter(|s| s.init)
                .map(|s| s.record.clone())
                .collect(),
            containers: self
                .slots
                .iter()
                .filter(|s| !s.init)
                .map(|s| s.record.clone())
                .collect(),
            pod_ip: self.pod_ip.map(|ip| ip.to_string()),
            host_ip: NODE_IP.into(),
            start_time: self.start_time,
            generation: self.pod.metadata.generation,
            readiness_gates: spec
                .and_then(|s| s.readiness_gates.as_ref())
                .map(|gates| gates.iter().map(|g| g.condition_type.clone()).collect())
                .unwrap_or_default(),
        }
    }

    /// Writes the pod's status when it changed since the last write.
    pub(super) async fn write_status(&mut self) {
        if self.adopted_terminal || self.stopping == Stopping::Shutdown || self.pod_ip.is_none() {
            return;
        }
        // Our own last write is the freshest record of our conditions' transition times; the
        // API server's copy adds conditions others own (readiness gates).
        let mut previous = self
            .last_written
            .clone()
            .or_else(|| self.pod.status.clone())
            .unwrap_or_default();
        let ours = [
            "PodReadyToStartContainers",
            "Initialized",
            "ContainersReady",
            "Ready",
        ];
        let others = self
            .pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default()
            .into_iter()
            .filter(|c| !ours.contains(&c.type_.as_str()));
        previous
            .conditions
            .get_or_insert_with(Vec::new)
            .extend(others);
        let status = pod_status(&self.record(), Some(&previous), Timestamp::now());
        if self.last_written.as_ref() == Some(&status) {
            return;
        }
        let result = self
            .api
            .patch_status(
                &self.pod.name_any(),
                &PatchParams::apply(FIELD_MANAGER),
                &Patch::Strategic(status_patch(&status)),
            )
            .await;
        match result {
            Ok(_) => self.last_written = Some(status),
            // Gone: the watch will say so.
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => {
                tracing::warn!(pod = %self.pod_label(), error = %e, "writing pod status failed; will retry")
            }
        }
    }
}
