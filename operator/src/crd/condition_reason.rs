//! The CamelCase reasons the operator writes: an engine's `reason` in the status, and the
//! `reason` of the benchmark's conditions. One enum, so every `match` on a reason is checked
//! by the compiler; serialized as the words earlier releases wrote, and a word this release
//! does not know (a newer operator's) reads as [`ConditionReason::Unknown`] with the word,
//! never an error, and is written back as read. A client's error category becomes the reason
//! of the same word (`From<&ErrorCategory>`).

use crate::error::ErrorCategory;

crate::words::open_words! {
    /// Why the engine failed or waits, as a CamelCase reason (for example `Unschedulable`,
    /// `ImagePullFailed`, `EngineOOMKilled`, `ClientFailed`, `Timeout`). The benchmark's
    /// conditions use the same words. A variant's doc comment is its `meaning`, which the
    /// book's status page prints.
    pub enum ConditionReason {
        /// Waiting: no node of the instance type can take the engine (or its client) yet; the
        /// message is the scheduler's. Karpenter or Cluster Autoscaler may be adding one. After
        /// the scheduling deadline (`--scheduling-timeout-seconds`) the engine fails as
        /// `Unschedulable`.
        WaitingForNode = "WaitingForNode",
        /// Waiting: nodes of the pool exist, but each runs another benchmark's engine; the engine
        /// waits in the queue, with no deadline but `spec.timeoutSeconds`.
        WaitingForFreeNode = "WaitingForFreeNode",
        /// Waiting: more engines of the benchmark would run at once (`spec.parallelism`) than its
        /// instance type's pool has nodes; the engine waits for one of the benchmark's own to
        /// finish. Lower `spec.parallelism` to the node count the message gives.
        ParallelismAboveNodes = "ParallelismAboveNodes",
        /// Waiting: a sharded run (`engines[].shards`) needs a node of its instance type per shard
        /// at once, and the pool has fewer that can take an engine; its shards wait for more.
        /// Add nodes, or ask for fewer shards.
        ShardsAboveNodes = "ShardsAboveNodes",
        /// Waiting: the node cannot pull the image yet and the kubelet retries with back-off, up
        /// to `--image-pull-timeout-seconds`; then the engine fails as `ImagePullFailed`.
        WaitingForImage = "WaitingForImage",
        /// Waiting: the node cannot create the container yet, because a Secret or ConfigMap it
        /// names is missing (the message names it). Create it and the run goes on.
        WaitingForConfig = "WaitingForConfig",
        /// Progressing: the engine pod was created and the engine is starting.
        EngineStarting = "EngineStarting",
        /// Progressing: the engine is ready and its client pod is starting.
        ClientStarting = "ClientStarting",
        /// Progressing: the client is loading and measuring the engine.
        Measuring = "Measuring",
        /// Done: every engine was measured (the `Ready` and `Progressing` conditions).
        Completed = "Completed",
        /// Progressing: the benchmark is still running (the `Ready` condition is False meanwhile).
        InProgress = "InProgress",
        /// No engine has failed (the `Failed` condition is False).
        NoFailure = "NoFailure",
        /// The spec cannot run as written (a field out of bounds, settings that do not go
        /// together, a field only `membench run` applies): the message names the field. Nothing
        /// was created. Fix the spec and create the benchmark again.
        InvalidSpec = "InvalidSpec",
        /// The operator's own policy (its flags: the images, instance types and sizes it allows)
        /// refuses the spec: the message names the field and the operator setting that would
        /// allow it.
        PolicyDenied = "PolicyDenied",
        /// The pods the spec asks for do not fit the nodes of its instance type (memory or CPU
        /// past what a node can give a pod): the message names the field and what a node gives.
        /// Ask for less, or a larger instance type.
        DoesNotFit = "DoesNotFit",
        /// No node of the instance type could take the engine within the scheduling deadline
        /// (`--scheduling-timeout-seconds`, default 600): the message is the scheduler's. The
        /// engines after it are `NotRun`. Check the instance type's node pool and its taints.
        Unschedulable = "Unschedulable",
        /// The engine image could not be pulled within `--image-pull-timeout-seconds` (or its
        /// name is invalid): the message names the registry and the pull Secrets the pod had.
        /// Mirror the image, or give a pull Secret. The next engine runs.
        ImagePullFailed = "ImagePullFailed",
        /// The API server refused to create a pod (Pod Security, a quota, a LimitRange, a webhook,
        /// or the pod API's own validation): the message is the API server's. The next engine
        /// runs.
        PodRejected = "PodRejected",
        /// The container could not be created (the kubelet's `CreateContainerError`): the message
        /// is the kubelet's, such as a seccomp profile the node lacks. The engine fails at once.
        CreateContainerError = "CreateContainerError",
        /// The container could not start (the runtime's `StartError`, or an entrypoint that cannot
        /// find or run the server): check the image and its command. The engine fails at once.
        RunContainerError = "RunContainerError",
        /// A Secret or ConfigMap the container names stayed missing for the startup timeout (for
        /// example `spec.auth.passwordSecretRef` in another namespace). Create it in the
        /// benchmark's namespace.
        CreateContainerConfigError = "CreateContainerConfigError",
        /// The client image could not be pulled: the rest of the benchmark fails, since every
        /// client uses that image. Check the operator's `--client-image` and its registry.
        ClientImagePullFailed = "ClientImagePullFailed",
        /// The kernel killed the engine at its memory limit: the finished repetitions are kept.
        /// Set `spec.engines[].memory` higher, as the message says.
        EngineOOMKilled = "EngineOOMKilled",
        /// The engine exited for another reason than its memory limit; the message has its exit
        /// code and last words. The finished repetitions are kept.
        EngineCrashed = "EngineCrashed",
        /// The kubelet evicted the engine's pod: node pressure (memory, disk) or a pod over its
        /// ephemeral-storage or emptyDir limits; the message is the kubelet's.
        EngineEvicted = "EngineEvicted",
        /// The engine did not become ready (accept connections on port 6379) within the startup
        /// timeout, or stayed unready that long without a client: check its image and settings.
        EngineNotReady = "EngineNotReady",
        /// The engine's pod was deleted or evicted by someone else before the engine finished;
        /// what the client measured is kept. Create the benchmark again to measure the rest.
        EnginePodLost = "EnginePodLost",
        /// The node of the engine's pods stopped reporting: they were evicted and never confirmed
        /// stopping. The message names the node; the next engine runs on another node.
        NodeLost = "NodeLost",
        /// The engine must end (the reason is in the message) and its client was asked to stop,
        /// to keep what it measured.
        StoppingClient = "StoppingClient",
        /// Pods of an earlier benchmark of the same name are still terminating; the new one waits
        /// for them.
        WaitingForOldPods = "WaitingForOldPods",
        /// The engine answered `OOM` (its maxmemory) during the load: not retried. Raise the
        /// engine's maxmemory or load less.
        EngineOutOfMemory = "EngineOutOfMemory",
        /// The client failed every attempt (`--client-attempts`) while the engine stayed healthy;
        /// the message has the last attempt's error. Partial results are kept.
        ClientFailed = "ClientFailed",
        /// The client's termination message broke the bounds of a result (see
        /// `client::pod_io::result::checked`): a broken or forged client, not retried. Check the client
        /// image is the operator's own version.
        InvalidClientResult = "InvalidClientResult",
        /// A client attempt failed (or its pod was deleted) and another client runs against the
        /// same engine (an event's reason).
        ClientRetry = "ClientRetry",
        /// `spec.timeoutSeconds` passed: a running client was stopped and what it measured is
        /// kept; the engines not begun are `NotRun`. Raise the timeout or measure less.
        Timeout = "Timeout",
        /// The engine never ran, because an earlier one ended the benchmark (a timeout, no node,
        /// the client image); the message names it.
        NotRun = "NotRun",
        /// The client refused its run plan: the operator is newer than the client image, or the
        /// plan does not parse. Give the operator a client image of its own version
        /// (`--client-image`).
        InvalidPlan = "InvalidPlan",
        /// The client could not reach the engine: check that nothing (a NetworkPolicy of the
        /// namespace) blocks the client pod from the engine pod's port 6379.
        EngineUnreachable = "EngineUnreachable",
        /// The engine asks for a password the client was not given: set `spec.auth`.
        AuthRequired = "AuthRequired",
        /// The engine refused the password: check the Secret `spec.auth.passwordSecretRef` names.
        AuthenticationFailed = "AuthenticationFailed",
        /// The engine already held data, which membench refuses to touch.
        ServerNotEmpty = "ServerNotEmpty",
        /// The engine refused a command with an error reply (the message quotes it): check the
        /// engine's settings in `spec.engines[].config` and `args`.
        EngineRejected = "EngineRejected",
        /// The engine closed the connection during a repetition; what was measured is kept.
        ConnectionLost = "ConnectionLost",
        /// A cluster-mode engine answered `MOVED` or `ASK`: the cluster's slots moved during the
        /// load (a resharding, a failover). Nothing else may reshard a benchmark's engines.
        SlotMoved = "SlotMoved",
        /// The count check failed: the engine held another count of items than the load gave it
        /// (keys evicted at maxmemory, say); the message gives both counts.
        CountMismatch = "CountMismatch",
        /// The workload's TTL is shorter than a repetition's load and readings, so its first keys
        /// could expire before the final reading: raise `ttlSeconds` well above that.
        TtlTooShort = "TtlTooShort",
        /// The client was stopped (SIGTERM or SIGINT) before it finished; what it measured is
        /// kept.
        Stopped = "Stopped",
        /// Other clients stayed connected to the engine before a memory reading, and their buffers
        /// would count as data: stop them (a monitoring agent, another benchmark).
        OtherClientsConnected = "OtherClientsConnected",
        /// The engine answered something that is not the protocol the client speaks.
        ProtocolError = "ProtocolError",
        /// The engine could not be started (a local run's program, or its settings).
        EngineStartFailed = "EngineStartFailed",
        /// The server of `spec.workload.rdb.url` failed for a while (a 5xx answer, a connection
        /// or download broken off): another client tries again; the message says what failed.
        SourceUnavailable = "SourceUnavailable",
    }
    unknown_meaning = " A reason this release does not know, written by a newer operator.\n \
        Upgrade membench (the CLI that reads the status) to the operator's version.\n";
}

/// The reason a client's error becomes: the category's own word, so a new category needs no
/// second list here (a test fails when `ConditionReason` lacks one). `OutOfMemory` alone is
/// renamed, to say whose memory ran out.
impl From<&ErrorCategory> for ConditionReason {
    fn from(category: &ErrorCategory) -> Self {
        match category {
            ErrorCategory::OutOfMemory => ConditionReason::EngineOutOfMemory,
            other => ConditionReason::parse(other.as_str()),
        }
    }
}

/// A condition's reason (a `String` in `metav1.Condition`) equals the reason it was set from.
impl PartialEq<ConditionReason> for String {
    fn eq(&self, reason: &ConditionReason) -> bool {
        self == reason.as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::ConditionReason;
    use crate::error::ErrorCategory;

    #[test]
    fn every_reason_serializes_as_its_word_and_reads_back() {
        for reason in ConditionReason::KNOWN {
            let json = serde_json::to_string(reason).unwrap();
            assert_eq!(json, format!("\"{}\"", reason.as_str()));
            assert_eq!(
                &serde_json::from_str::<ConditionReason>(&json).unwrap(),
                reason
            );
        }
    }

    #[test]
    fn a_reason_from_a_newer_operator_is_kept_as_its_word() {
        let read: ConditionReason = serde_json::from_str("\"QuantumDecoherence\"").unwrap();
        assert_eq!(read, ConditionReason::Unknown("QuantumDecoherence".into()));
        assert!(!read.is_known());
        assert_eq!(
            serde_json::to_string(&read).unwrap(),
            "\"QuantumDecoherence\""
        );
    }

    #[test]
    fn every_error_category_becomes_a_reason_this_release_knows() {
        for category in ErrorCategory::KNOWN {
            let reason = ConditionReason::from(category);
            assert!(
                reason.is_known(),
                "ErrorCategory::{category} has no ConditionReason of its word: add `{category}` \
                 to ConditionReason, with what it means and what to do"
            );
            if *category != ErrorCategory::OutOfMemory {
                assert_eq!(reason.as_str(), category.as_str());
            }
        }
        assert_eq!(
            ConditionReason::from(&ErrorCategory::OutOfMemory),
            ConditionReason::EngineOutOfMemory
        );
        // A newer client's category is kept as the reason's word, and still unknown.
        let newer = ErrorCategory::parse("DiskFull");
        assert_eq!(
            ConditionReason::from(&newer),
            ConditionReason::Unknown("DiskFull".into())
        );
    }
}
