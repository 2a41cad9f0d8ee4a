//! What a pod's status says, as far as the operator cares: waiting for a node, an image that
//! cannot be pulled (for now or for good), a container that cannot start, starting, ready, a
//! readiness blip, terminated. Read the way the kubelet reports it; pure.

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// What a pod's status says, as far as the operator cares.
#[derive(Clone, Debug, PartialEq)]
pub enum PodState {
    /// Being deleted.
    Deleting,
    /// Not on a node yet; the scheduler's message when it found none.
    Unscheduled { message: Option<String> },
    /// Its image cannot be had (yet): the kubelet retries with back-off unless `permanent`.
    ImagePullFailed {
        reason: String,
        message: String,
        permanent: bool,
    },
    /// The container cannot be created or started (`CreateContainerError`,
    /// `RunContainerError`): the same pod would fail the same way again.
    ContainerError { reason: String, message: String },
    /// The container's configuration cannot be resolved yet (`CreateContainerConfigError`: a
    /// Secret or ConfigMap it names is missing). The kubelet retries: it may be created later.
    ConfigError { message: String },
    /// On a node, the container not started or not ready yet.
    Starting { since: Option<Timestamp> },
    /// Was ready, and its readiness probe fails now (since the pod's Ready condition flipped).
    Unready { since: Option<Timestamp> },
    /// Running and ready.
    Ready,
    /// The container exited.
    Terminated {
        exit_code: i32,
        reason: Option<String>,
        message: Option<String>,
        finished_at: Option<Timestamp>,
    },
}

/// Waiting reasons of a container whose image cannot be pulled. The kubelet retries these with
/// back-off (a registry may be down, or the image may be pushed in a moment).
const IMAGE_PULL_RETRIED: [&str; 3] = ["ErrImagePull", "ImagePullBackOff", "RegistryUnavailable"];
/// ... and these never succeed for this pod: the name is malformed, or pulls are forbidden.
const IMAGE_PULL_PERMANENT: [&str; 2] = ["InvalidImageName", "ErrImageNeverPull"];
/// Waiting reasons of a container that cannot be created or started.
const CONTAINER_ERRORS: [&str; 2] = ["CreateContainerError", "RunContainerError"];
/// The waiting reason of a container whose Secret or ConfigMap is missing (retried).
const CONFIG_ERROR: &str = "CreateContainerConfigError";

/// Reads a pod's status. A pod being deleted is `Deleting`, whatever its containers did: for
/// an engine, its deletion is what matters.
pub fn pod_state(pod: &Pod) -> PodState {
    if pod.metadata.deletion_timestamp.is_some() {
        return PodState::Deleting;
    }
    terminated_state(pod).unwrap_or_else(|| running_state(pod))
}

/// Reads a client pod's status: once its container has ended, its result is what matters, even
/// while the pod is being deleted (the result finalizer keeps such a pod readable).
pub fn client_state(pod: &Pod) -> PodState {
    terminated_state(pod).unwrap_or_else(|| pod_state(pod))
}

/// Whether the container ever started: only then can it hold anything measured.
pub fn has_started(pod: &Pod) -> bool {
    first_container(pod).is_some_and(|c| {
        c.started == Some(true)
            || c.state
                .as_ref()
                .is_some_and(|s| s.running.is_some() || s.terminated.is_some())
    })
}

/// A pod whose deletion deadline (its `deletionTimestamp`: the request plus the grace period)
/// passed `margin` ago while it still has not ended: no kubelet is acting on it, so its node
/// stopped reporting (a node that is gone, or cut off). Only a forced deletion removes it.
pub fn stuck_deleting(pod: &Pod, now: Timestamp, margin: std::time::Duration) -> bool {
    let Some(deadline) = pod.metadata.deletion_timestamp.as_ref() else {
        return false;
    };
    let margin = SignedDuration::from_secs(margin.as_secs() as i64);
    now >= deadline.0 + margin && terminated_state(pod).is_none()
}

/// Who is disrupting the pod and why: the `DisruptionTarget` condition the taint manager, the
/// eviction API, the pod GC or the kubelet sets before it deletes a pod.
pub fn disruption(pod: &Pod) -> Option<String> {
    let condition = pod
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "DisruptionTarget" && c.status == "True")?;
    Some(match (&condition.reason, &condition.message) {
        (Some(reason), Some(message)) => format!("{reason}: {message}"),
        (Some(reason), None) => reason.clone(),
        (None, message) => message.clone().unwrap_or_default(),
    })
}

/// The kubelet's eviction of the pod (node pressure, or a pod over its ephemeral-storage or
/// emptyDir limits), as the kubelet words it ("The node was low on resource:
/// ephemeral-storage. ..."). The containers it stops end as on any SIGTERM (Redis and Valkey
/// exit 0, `Completed`), so the pod's own reason is the only record of why they ended.
pub fn evicted(pod: &Pod) -> Option<String> {
    let status = pod.status.as_ref()?;
    (status.reason.as_deref() == Some("Evicted")).then(|| {
        status
            .message
            .clone()
            .filter(|m| !m.trim().is_empty())
            .unwrap_or_else(|| "no reason given".into())
    })
}

fn first_container(pod: &Pod) -> Option<&ContainerStatus> {
    pod.status.as_ref()?.container_statuses.as_ref()?.first()
}

/// The pod's end, if it has ended.
fn terminated_state(pod: &Pod) -> Option<PodState> {
    let status = pod.status.clone().unwrap_or_default();
    if let Some(terminated) = first_container(pod)
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.terminated.clone())
    {
        return Some(PodState::Terminated {
            exit_code: terminated.exit_code,
            reason: terminated.reason,
            message: terminated.message,
            finished_at: terminated.finished_at.map(|t| t.0),
        });
    }
    if matches!(status.phase.as_deref(), Some("Failed") | Some("Succeeded")) {
        // Terminal without a container status (evicted, or the node rejected the pod).
        return Some(PodState::Terminated {
            exit_code: if status.phase.as_deref() == Some("Succeeded") {
                0
            } else {
                1
            },
            reason: status.reason.clone(),
            message: status.message.clone(),
            finished_at: None,
        });
    }
    None
}

/// What a pod that has not ended is doing.
fn running_state(pod: &Pod) -> PodState {
    let status = pod.status.clone().unwrap_or_default();
    let container = first_container(pod).cloned();
    if let Some(waiting) = container
        .as_ref()
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.waiting.clone())
        && let Some(reason) = waiting.reason.as_deref()
    {
        let message = waiting.message.clone().unwrap_or_default();
        if IMAGE_PULL_RETRIED.contains(&reason) || IMAGE_PULL_PERMANENT.contains(&reason) {
            return PodState::ImagePullFailed {
                reason: reason.to_string(),
                message,
                permanent: IMAGE_PULL_PERMANENT.contains(&reason),
            };
        }
        if reason == CONFIG_ERROR {
            return PodState::ConfigError { message };
        }
        if CONTAINER_ERRORS.contains(&reason) {
            return PodState::ContainerError {
                reason: reason.to_string(),
                message,
            };
        }
    }
    let scheduled = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_ref())
        .is_some();
    if !scheduled {
        let message = status
            .conditions
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "PodScheduled" && c.status == "False")
            .and_then(|c| c.message);
        return PodState::Unscheduled { message };
    }
    let ready = container.as_ref().is_some_and(|c| c.ready);
    if ready {
        return PodState::Ready;
    }
    let started_at = container
        .as_ref()
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.running.as_ref())
        .and_then(|r| r.started_at.as_ref())
        .map(|t| t.0);
    // A Ready condition that turned False after the container started means it was ready in
    // between: a readiness blip, not a slow start.
    let unready_since = condition_since(pod, "Ready", "False");
    match (started_at, unready_since) {
        (Some(started), Some(since)) if since > started => PodState::Unready { since: Some(since) },
        _ => PodState::Starting { since: started_at },
    }
}

/// When the pod's condition `type_` last turned to `value`, if it has that value now.
pub fn condition_since(pod: &Pod, type_: &str, value: &str) -> Option<Timestamp> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_ && c.status == value)?
        .last_transition_time
        .as_ref()
        .map(|t| t.0)
}

/// When the scheduler bound the pod to a node (the creation time when the pod does not say).
pub fn scheduled_at(pod: &Pod) -> Option<Timestamp> {
    condition_since(pod, "PodScheduled", "True")
        .or_else(|| pod.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

/// The node a pod runs on.
pub fn node_name(pod: &Pod) -> Option<String> {
    pod.spec.as_ref().and_then(|s| s.node_name.clone())
}

/// The pod's IP address.
pub fn pod_ip(pod: &Pod) -> Option<String> {
    pod.status.as_ref().and_then(|s| s.pod_ip.clone())
}

/// The image ID its (first) container runs.
pub fn image_id(pod: &Pod) -> Option<String> {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .map(|c| c.image_id.clone())
        .filter(|id| !id.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::build::pods::{PodSettings, engine_pod};
    use crate::controller::decide::test_fixtures::benchmark;
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateTerminated, ContainerStateWaiting, ContainerStatus,
        PodCondition, PodStatus,
    };

    fn with_status(status: PodStatus, node: Option<&str>) -> Pod {
        let mut pod = engine_pod(&benchmark(""), 0, 1 << 30, None, &PodSettings::default());
        pod.spec.as_mut().unwrap().node_name = node.map(String::from);
        pod.status = Some(status);
        pod
    }

    fn container(state: ContainerState, ready: bool) -> Option<Vec<ContainerStatus>> {
        Some(vec![ContainerStatus {
            name: "engine".into(),
            ready,
            state: Some(state),
            ..Default::default()
        }])
    }

    #[test]
    fn pod_states_are_read_the_way_kubelet_reports_them() {
        let unscheduled = with_status(
            PodStatus {
                conditions: Some(vec![PodCondition {
                    type_: "PodScheduled".into(),
                    status: "False".into(),
                    reason: Some("Unschedulable".into()),
                    message: Some("0/4 nodes are available".into()),
                    ..Default::default()
                }]),
                ..Default::default()
            },
            None,
        );
        assert_eq!(
            pod_state(&unscheduled),
            PodState::Unscheduled {
                message: Some("0/4 nodes are available".into())
            }
        );
        let pulling = with_status(
            PodStatus {
                container_statuses: container(
                    ContainerState {
                        waiting: Some(ContainerStateWaiting {
                            reason: Some("ImagePullBackOff".into()),
                            message: Some("no such image".into()),
                        }),
                        ..Default::default()
                    },
                    false,
                ),
                ..Default::default()
            },
            Some("n1"),
        );
        assert!(matches!(
            pod_state(&pulling),
            PodState::ImagePullFailed { .. }
        ));
        let oom = with_status(
            PodStatus {
                phase: Some("Failed".into()),
                container_statuses: container(
                    ContainerState {
                        terminated: Some(ContainerStateTerminated {
                            exit_code: 137,
                            reason: Some("OOMKilled".into()),
                            ..Default::default()
                        }),
                        ..Default::default()
                    },
                    false,
                ),
                ..Default::default()
            },
            Some("n1"),
        );
        assert!(matches!(
            pod_state(&oom),
            PodState::Terminated { exit_code: 137, reason: Some(ref r), .. } if r == "OOMKilled"
        ));
        let ready = with_status(
            PodStatus {
                container_statuses: container(
                    ContainerState {
                        running: Some(Default::default()),
                        ..Default::default()
                    },
                    true,
                ),
                ..Default::default()
            },
            Some("n1"),
        );
        assert_eq!(pod_state(&ready), PodState::Ready);
    }
}
