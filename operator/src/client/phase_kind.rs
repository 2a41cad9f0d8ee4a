//! Which phase a repetition was in: the word a result names a failed phase by
//! (`error.phase.name`), and the controller reads back.

/// A phase a repetition runs after its readings, serialized as its lowercase name (the words
/// earlier releases wrote in a result's `error.phase.name`); a name this release does not
/// know (a newer client's) reads as [`PhaseKind::Unknown`].
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum PhaseKind {
    Snapshot,
    Replica,
    Churn,
    Defrag,
    Eviction,
    /// A phase this release does not know.
    #[serde(other)]
    Unknown,
}

impl PhaseKind {
    /// The name, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            PhaseKind::Snapshot => "snapshot",
            PhaseKind::Replica => "replica",
            PhaseKind::Churn => "churn",
            PhaseKind::Defrag => "defrag",
            PhaseKind::Eviction => "eviction",
            PhaseKind::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for PhaseKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
