//! The CamelCase reasons the operator writes: an engine's `reason` in the status, and the
//! `reason` of the benchmark's conditions. One enum, so every `match` on a reason is checked
//! by the compiler; serialized as the words earlier releases wrote, and a word this release
//! does not know (a newer operator's) reads as [`ConditionReason::Unknown`], never an error.

use serde::{Deserialize, Serialize};

/// Declares the reasons once: the enum, `ALL`, `as_str` and `meaning` cannot disagree. The
/// variants' doc comments go to `meaning` (the book's status page prints them) and not onto the
/// variants: a documented variant would turn the schema's `enum` into a `oneOf`, which the
/// CRD's structural schema does not want.
macro_rules! condition_reasons {
    ($($(#[doc = $doc:literal])* $name:ident,)*) => {
        /// Why the engine failed or waits, as a CamelCase reason (for example `Unschedulable`,
        /// `ImagePullFailed`, `EngineOOMKilled`, `ClientFailed`, `Timeout`; `Unknown`: a reason
        /// this release does not know). The benchmark's conditions use the same words.
        #[derive(
            Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, schemars::JsonSchema,
        )]
        pub enum ConditionReason {
            $($name,)*
            /// A reason this release does not know (written by a newer operator).
            #[serde(other)]
            Unknown,
        }

        impl ConditionReason {
            /// Every reason, in declaration order, [`ConditionReason::Unknown`] last.
            pub const ALL: &'static [ConditionReason] =
                &[$(ConditionReason::$name,)* ConditionReason::Unknown];

            /// The word, as serialized.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(ConditionReason::$name => stringify!($name),)*
                    ConditionReason::Unknown => "Unknown",
                }
            }

            /// What the reason means and what to do: the doc comment it is declared with, as
            /// written (its line breaks are the comment's own wrapping).
            pub fn meaning(self) -> &'static str {
                match self {
                    $(ConditionReason::$name => concat!($($doc, "\n",)*),)*
                    ConditionReason::Unknown => {
                        " A reason this release does not know, written by a newer operator.\n \
                         Upgrade membench (the CLI that reads the status) to the operator's version.\n"
                    }
                }
            }
        }
    };
}

condition_reasons! {
    /// Waiting: no node of the instance type can take the engine (or its client) yet; the
    /// message is the scheduler's. Karpenter or Cluster Autoscaler may be adding one. After
    /// the scheduling deadline (`--scheduling-timeout-seconds`) the engine fails as
    /// `Unschedulable`.
    WaitingForNode,
    /// Waiting: nodes of the pool exist, but each runs another benchmark's engine; the engine
    /// waits in the queue, with no deadline but `spec.timeoutSeconds`.
    WaitingForFreeNode,
    /// Waiting: more engines of the benchmark would run at once (`spec.parallelism`) than its
    /// instance type's pool has nodes; the engine waits for one of the benchmark's own to
    /// finish. Lower `spec.parallelism` to the node count the message gives.
    ParallelismAboveNodes,
    /// Waiting: a sharded run (`engines[].shards`) needs a node of its instance type per shard
    /// at once, and the pool has fewer that can take an engine; its shards wait for more.
    /// Add nodes, or ask for fewer shards.
    ShardsAboveNodes,
    /// Waiting: the node cannot pull the image yet and the kubelet retries with back-off, up
    /// to `--image-pull-timeout-seconds`; then the engine fails as `ImagePullFailed`.
    WaitingForImage,
    /// Waiting: the node cannot create the container yet, because a Secret or ConfigMap it
    /// names is missing (the message names it). Create it and the run goes on.
    WaitingForConfig,
    /// Progressing: the engine pod was created and the engine is starting.
    EngineStarting,
    /// Progressing: the engine is ready and its client pod is starting.
    ClientStarting,
    /// Progressing: the client is loading and measuring the engine.
    Measuring,
    /// Done: every engine was measured (the `Ready` and `Progressing` conditions).
    Completed,
    /// Progressing: the benchmark is still running (the `Ready` condition is False meanwhile).
    InProgress,
    /// No engine has failed (the `Failed` condition is False).
    NoFailure,
    /// The spec cannot run as written (a field out of bounds, settings that do not go
    /// together, a field only `membench run` applies): the message names the field. Nothing
    /// was created. Fix the spec and create the benchmark again.
    InvalidSpec,
    /// The operator's own policy (its flags: the images, instance types and sizes it allows)
    /// refuses the spec: the message names the field and the operator setting that would
    /// allow it.
    PolicyDenied,
    /// The pods the spec asks for do not fit the nodes of its instance type (memory or CPU
    /// past what a node can give a pod): the message names the field and what a node gives.
    /// Ask for less, or a larger instance type.
    DoesNotFit,
    /// No node of the instance type could take the engine within the scheduling deadline
    /// (`--scheduling-timeout-seconds`, default 600): the message is the scheduler's. The
    /// engines after it are `NotRun`. Check the instance type's node pool and its taints.
    Unschedulable,
    /// The engine image could not be pulled within `--image-pull-timeout-seconds` (or its
    /// name is invalid): the message names the registry and the pull Secrets the pod had.
    /// Mirror the image, or give a pull Secret. The next engine runs.
    ImagePullFailed,
    /// The API server refused to create a pod (Pod Security, a quota, a LimitRange, a webhook,
    /// or the pod API's own validation): the message is the API server's. The next engine
    /// runs.
    PodRejected,
    /// The container could not be created (the kubelet's `CreateContainerError`): the message
    /// is the kubelet's, such as a seccomp profile the node lacks. The engine fails at once.
    CreateContainerError,
    /// The container could not start (the runtime's `StartError`, or an entrypoint that cannot
    /// find or run the server): check the image and its command. The engine fails at once.
    RunContainerError,
    /// A Secret or ConfigMap the container names stayed missing for the startup timeout (for
    /// example `spec.auth.passwordSecretRef` in another namespace). Create it in the
    /// benchmark's namespace.
    CreateContainerConfigError,
    /// The client image could not be pulled: the rest of the benchmark fails, since every
    /// client uses that image. Check the operator's `--client-image` and its registry.
    ClientImagePullFailed,
    /// The kernel killed the engine at its memory limit: the finished repetitions are kept.
    /// Set `spec.engines[].memory` higher, as the message says.
    EngineOOMKilled,
    /// The engine exited for another reason than its memory limit; the message has its exit
    /// code and last words. The finished repetitions are kept.
    EngineCrashed,
    /// The kubelet evicted the engine's pod: node pressure (memory, disk) or a pod over its
    /// ephemeral-storage or emptyDir limits; the message is the kubelet's.
    EngineEvicted,
    /// The engine did not become ready (accept connections on port 6379) within the startup
    /// timeout, or stayed unready that long without a client: check its image and settings.
    EngineNotReady,
    /// The engine's pod was deleted or evicted by someone else before the engine finished;
    /// what the client measured is kept. Create the benchmark again to measure the rest.
    EnginePodLost,
    /// The node of the engine's pods stopped reporting: they were evicted and never confirmed
    /// stopping. The message names the node; the next engine runs on another node.
    NodeLost,
    /// The engine must end (the reason is in the message) and its client was asked to stop,
    /// to keep what it measured.
    StoppingClient,
    /// Pods of an earlier benchmark of the same name are still terminating; the new one waits
    /// for them.
    WaitingForOldPods,
    /// The engine answered `OOM` (its maxmemory) during the load: not retried. Raise the
    /// engine's maxmemory or load less.
    EngineOutOfMemory,
    /// The client failed every attempt (`--client-attempts`) while the engine stayed healthy;
    /// the message has the last attempt's error. Partial results are kept.
    ClientFailed,
    /// The client's termination message broke the bounds of a result (see
    /// `client::result::checked`): a broken or forged client, not retried. Check the client
    /// image is the operator's own version.
    InvalidClientResult,
    /// A client attempt failed (or its pod was deleted) and another client runs against the
    /// same engine (an event's reason).
    ClientRetry,
    /// `spec.timeoutSeconds` passed: a running client was stopped and what it measured is
    /// kept; the engines not begun are `NotRun`. Raise the timeout or measure less.
    Timeout,
    /// The engine never ran, because an earlier one ended the benchmark (a timeout, no node,
    /// the client image); the message names it.
    NotRun,
    /// The client refused its run plan: the operator is newer than the client image, or the
    /// plan does not parse. Give the operator a client image of its own version
    /// (`--client-image`).
    InvalidPlan,
    /// The client could not reach the engine: check that nothing (a NetworkPolicy of the
    /// namespace) blocks the client pod from the engine pod's port 6379.
    EngineUnreachable,
    /// The engine asks for a password the client was not given: set `spec.auth`.
    AuthRequired,
    /// The engine refused the password: check the Secret `spec.auth.passwordSecretRef` names.
    AuthenticationFailed,
    /// The engine already held data, which membench refuses to touch.
    ServerNotEmpty,
    /// The engine refused a command with an error reply (the message quotes it): check the
    /// engine's settings in `spec.engines[].config` and `args`.
    EngineRejected,
    /// The engine closed the connection during a repetition; what was measured is kept.
    ConnectionLost,
    /// A cluster-mode engine answered `MOVED` or `ASK`: the cluster's slots moved during the
    /// load (a resharding, a failover). Nothing else may reshard a benchmark's engines.
    SlotMoved,
    /// The count check failed: the engine held another count of items than the load gave it
    /// (keys evicted at maxmemory, say); the message gives both counts.
    CountMismatch,
    /// The workload's TTL is shorter than a repetition's load and readings, so its first keys
    /// could expire before the final reading: raise `ttlSeconds` well above that.
    TtlTooShort,
    /// The client was stopped (SIGTERM or SIGINT) before it finished; what it measured is
    /// kept.
    Stopped,
    /// Other clients stayed connected to the engine before a memory reading, and their buffers
    /// would count as data: stop them (a monitoring agent, another benchmark).
    OtherClientsConnected,
    /// The engine answered something that is not the protocol the client speaks.
    ProtocolError,
    /// The engine could not be started (a local run's program, or its settings).
    EngineStartFailed,
}

/// The reason a word names, [`ConditionReason::Unknown`] for a word this release does not
/// know.
impl From<&str> for ConditionReason {
    fn from(word: &str) -> Self {
        ConditionReason::ALL
            .iter()
            .copied()
            .find(|reason| reason.as_str() == word)
            .unwrap_or(ConditionReason::Unknown)
    }
}

/// A reason equals the word it serializes as (tests and readers of the status compare with
/// the word).
impl PartialEq<&str> for ConditionReason {
    fn eq(&self, word: &&str) -> bool {
        self.as_str() == *word
    }
}

/// A condition's reason (a `String` in `metav1.Condition`) equals the reason it was set from.
impl PartialEq<ConditionReason> for String {
    fn eq(&self, reason: &ConditionReason) -> bool {
        self == reason.as_str()
    }
}

impl std::fmt::Display for ConditionReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::ConditionReason;

    #[test]
    fn every_reason_serializes_as_its_word_and_reads_back() {
        for &reason in ConditionReason::ALL {
            let json = serde_json::to_string(&reason).unwrap();
            assert_eq!(json, format!("\"{}\"", reason.as_str()));
            assert_eq!(
                serde_json::from_str::<ConditionReason>(&json).unwrap(),
                reason
            );
        }
    }

    #[test]
    fn a_reason_from_a_newer_operator_reads_as_unknown() {
        let read: ConditionReason = serde_json::from_str("\"QuantumDecoherence\"").unwrap();
        assert_eq!(read, ConditionReason::Unknown);
    }
}
