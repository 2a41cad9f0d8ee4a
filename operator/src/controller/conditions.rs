//! Engine states, the CamelCase reasons of conditions, engine states and events, and how a
//! condition is set (its lastTransitionTime changes only when its status flips).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

pub mod state {
    pub const PENDING: &str = "Pending";
    pub const RUNNING: &str = "Running";
    pub const SUCCEEDED: &str = "Succeeded";
    pub const FAILED: &str = "Failed";
}

/// CamelCase reasons of conditions, engine states and events.
pub mod reason {
    pub const WAITING_FOR_NODE: &str = "WaitingForNode";
    /// Nodes of the pool exist, but each runs another benchmark's engine: wait in the queue.
    pub const WAITING_FOR_FREE_NODE: &str = "WaitingForFreeNode";
    /// More engines of the benchmark would run at once (`spec.parallelism`) than its instance
    /// type's pool has nodes: the engine waits for one of the benchmark's own to finish.
    pub const PARALLELISM_ABOVE_NODES: &str = "ParallelismAboveNodes";
    /// A sharded run (`engines[].shards`) needs a node of its instance type per shard at once,
    /// and the pool has fewer that can take an engine: its shards wait for more.
    pub const SHARDS_ABOVE_NODES: &str = "ShardsAboveNodes";
    /// The node cannot pull the image yet; the kubelet retries with back-off.
    pub const WAITING_FOR_IMAGE: &str = "WaitingForImage";
    /// The node cannot create the container yet: a Secret or ConfigMap it names is missing.
    pub const WAITING_FOR_CONFIG: &str = "WaitingForConfig";
    pub const ENGINE_STARTING: &str = "EngineStarting";
    pub const CLIENT_STARTING: &str = "ClientStarting";
    pub const MEASURING: &str = "Measuring";
    pub const COMPLETED: &str = "Completed";
    pub const IN_PROGRESS: &str = "InProgress";
    pub const NO_FAILURE: &str = "NoFailure";
    pub const INVALID_SPEC: &str = "InvalidSpec";
    pub const UNSCHEDULABLE: &str = "Unschedulable";
    pub const IMAGE_PULL_FAILED: &str = "ImagePullFailed";
    /// The API server refused to create a pod (Pod Security, a quota, a LimitRange, a webhook,
    /// or the pod API's own validation).
    pub const POD_REJECTED: &str = "PodRejected";
    /// The container could not be created or started (the kubelet's waiting reasons, and the
    /// runtime's `StartError`, which ends as `RunContainerError`).
    pub const CREATE_CONTAINER_ERROR: &str = "CreateContainerError";
    pub const RUN_CONTAINER_ERROR: &str = "RunContainerError";
    /// A Secret or ConfigMap the container names stayed missing for the startup timeout.
    pub const CREATE_CONTAINER_CONFIG_ERROR: &str = "CreateContainerConfigError";
    pub const CLIENT_IMAGE_PULL_FAILED: &str = "ClientImagePullFailed";
    pub const ENGINE_OOM_KILLED: &str = "EngineOOMKilled";
    pub const ENGINE_CRASHED: &str = "EngineCrashed";
    /// The kubelet evicted the engine's pod: node pressure (memory, disk) or a pod over its
    /// ephemeral-storage or emptyDir limits; the message is the kubelet's.
    pub const ENGINE_EVICTED: &str = "EngineEvicted";
    pub const ENGINE_NOT_READY: &str = "EngineNotReady";
    pub const ENGINE_POD_LOST: &str = "EnginePodLost";
    /// The node of the engine's pods stopped reporting: they were evicted and never confirmed
    /// stopping.
    pub const NODE_LOST: &str = "NodeLost";
    /// The engine must end (the reason is in the message) and its client was asked to stop, to
    /// keep what it measured.
    pub const STOPPING_CLIENT: &str = "StoppingClient";
    /// Pods of an earlier benchmark of the same name are still terminating.
    pub const WAITING_FOR_OLD_PODS: &str = "WaitingForOldPods";
    pub const ENGINE_OUT_OF_MEMORY: &str = "EngineOutOfMemory";
    pub const CLIENT_FAILED: &str = "ClientFailed";
    /// The client's termination message broke the bounds of a result (see
    /// `client::result::checked`): a broken or forged client, not retried.
    pub const INVALID_CLIENT_RESULT: &str = "InvalidClientResult";
    pub const CLIENT_RETRY: &str = "ClientRetry";
    pub const TIMEOUT: &str = "Timeout";
    pub const NOT_RUN: &str = "NotRun";
}

/// The engine's message once its pods are created, before the scheduler has said anything:
/// not worth an event of its own (`EngineCreated` says it).
pub const ENGINE_POD_CREATED: &str = "the engine pod was created";
pub const SHARD_PODS_CREATED: &str = "the engine pods were created, one per shard";

/// Condition types.
pub const READY: &str = "Ready";
pub const PROGRESSING: &str = "Progressing";
pub const FAILED: &str = "Failed";

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
pub(super) struct ConditionStamp {
    pub(super) generation: Option<i64>,
    pub(super) now: Timestamp,
}

impl ConditionStamp {
    pub(super) fn set(
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
