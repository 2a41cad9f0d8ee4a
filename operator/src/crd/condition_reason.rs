//! The CamelCase reasons the operator writes: an engine's `reason` in the status, and the
//! `reason` of the benchmark's conditions. One enum, so every `match` on a reason is checked
//! by the compiler; serialized as the words earlier releases wrote, and a word this release
//! does not know (a newer operator's) reads as [`ConditionReason::Unknown`], never an error.

use serde::{Deserialize, Serialize};

/// Declares the reasons once: the enum, `ALL` and `as_str` cannot disagree. Variants carry
/// `//` comments, not doc comments: a documented variant would turn the schema's `enum` into
/// a `oneOf`, which the CRD's structural schema does not want.
macro_rules! condition_reasons {
    ($($name:ident),* $(,)?) => {
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
        }
    };
}

condition_reasons! {
    WaitingForNode,
    // Nodes of the pool exist, but each runs another benchmark's engine: wait in the queue.
    WaitingForFreeNode,
    // More engines of the benchmark would run at once (`spec.parallelism`) than its instance
    // type's pool has nodes: the engine waits for one of the benchmark's own to finish.
    ParallelismAboveNodes,
    // A sharded run (`engines[].shards`) needs a node of its instance type per shard at once,
    // and the pool has fewer that can take an engine: its shards wait for more.
    ShardsAboveNodes,
    // The node cannot pull the image yet; the kubelet retries with back-off.
    WaitingForImage,
    // The node cannot create the container yet: a Secret or ConfigMap it names is missing.
    WaitingForConfig,
    EngineStarting,
    ClientStarting,
    Measuring,
    Completed,
    InProgress,
    NoFailure,
    // The spec cannot run as written (a field out of bounds, settings that do not go
    // together): the message names the field.
    InvalidSpec,
    // The operator's own policy (its flags: the images, instance types and sizes it allows)
    // refuses the spec: the message names the field and the operator setting.
    PolicyDenied,
    // The pods the spec asks for do not fit the nodes of its instance type (memory or CPU
    // past what a node can give a pod): the message names the field.
    DoesNotFit,
    Unschedulable,
    ImagePullFailed,
    // The API server refused to create a pod (Pod Security, a quota, a LimitRange, a webhook,
    // or the pod API's own validation).
    PodRejected,
    // The container could not be created or started (the kubelet's waiting reasons, and the
    // runtime's `StartError`, which ends as `RunContainerError`).
    CreateContainerError,
    RunContainerError,
    // A Secret or ConfigMap the container names stayed missing for the startup timeout.
    CreateContainerConfigError,
    ClientImagePullFailed,
    EngineOOMKilled,
    EngineCrashed,
    // The kubelet evicted the engine's pod: node pressure (memory, disk) or a pod over its
    // ephemeral-storage or emptyDir limits; the message is the kubelet's.
    EngineEvicted,
    EngineNotReady,
    EnginePodLost,
    // The node of the engine's pods stopped reporting: they were evicted and never confirmed
    // stopping.
    NodeLost,
    // The engine must end (the reason is in the message) and its client was asked to stop, to
    // keep what it measured.
    StoppingClient,
    // Pods of an earlier benchmark of the same name are still terminating.
    WaitingForOldPods,
    EngineOutOfMemory,
    ClientFailed,
    // The client's termination message broke the bounds of a result (see
    // `client::result::checked`): a broken or forged client, not retried.
    InvalidClientResult,
    ClientRetry,
    Timeout,
    NotRun,
    // A client's error category that ends its engine (not retried): the engine's reason is
    // the category's word (`error::ErrorCategory`; its `OutOfMemory` is `EngineOutOfMemory`).
    InvalidPlan,
    EngineUnreachable,
    AuthRequired,
    AuthenticationFailed,
    ServerNotEmpty,
    EngineRejected,
    ConnectionLost,
    SlotMoved,
    CountMismatch,
    TtlTooShort,
    Stopped,
    OtherClientsConnected,
    ProtocolError,
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
