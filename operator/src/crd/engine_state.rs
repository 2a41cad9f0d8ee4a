//! What the status says of one engine entry as words an older or newer release also reads:
//! its state, and which engine it is. Serialized as the words earlier releases wrote; a word
//! this release does not know reads as a named `Unknown`, never an error, so one status written
//! by a newer operator does not stop this one from reading the benchmark.

use serde::{Deserialize, Serialize};

use super::engine_spec::EngineKind;

/// Where one engine entry stands.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, schemars::JsonSchema,
)]
pub enum EngineState {
    #[default]
    Pending,
    Running,
    Succeeded,
    Failed,
    /// A state this release does not know (written by a newer operator).
    #[serde(other)]
    Unknown,
}

impl EngineState {
    /// The word, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            EngineState::Pending => "Pending",
            EngineState::Running => "Running",
            EngineState::Succeeded => "Succeeded",
            EngineState::Failed => "Failed",
            EngineState::Unknown => "Unknown",
        }
    }

    /// Whether the entry is done: it will not run again.
    pub fn is_finished(self) -> bool {
        matches!(self, EngineState::Succeeded | EngineState::Failed)
    }
}

/// The state a word names, [`EngineState::Unknown`] for a word this release does not know.
impl From<&str> for EngineState {
    fn from(word: &str) -> Self {
        [
            EngineState::Pending,
            EngineState::Running,
            EngineState::Succeeded,
            EngineState::Failed,
        ]
        .into_iter()
        .find(|state| state.as_str() == word)
        .unwrap_or(EngineState::Unknown)
    }
}

/// A state equals the word it serializes as (readers of the status compare with the word).
impl PartialEq<&str> for EngineState {
    fn eq(&self, word: &&str) -> bool {
        self.as_str() == *word
    }
}

impl std::fmt::Display for EngineState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The engine of a status entry: a kind this release knows, or `Unknown` for one a newer
/// operator wrote. The spec's [`EngineKind`] has no unknown kind (a spec must name one membench
/// can start); the status, read back from the API server, must survive one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum StatusEngineKind {
    Known(EngineKind),
    #[default]
    Unknown,
}

impl StatusEngineKind {
    /// The word, as serialized: the engine's name, or `Unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            StatusEngineKind::Known(kind) => kind.as_str(),
            StatusEngineKind::Unknown => "Unknown",
        }
    }

    /// The engine, when this release knows it.
    pub fn known(self) -> Option<EngineKind> {
        match self {
            StatusEngineKind::Known(kind) => Some(kind),
            StatusEngineKind::Unknown => None,
        }
    }
}

impl From<EngineKind> for StatusEngineKind {
    fn from(kind: EngineKind) -> Self {
        StatusEngineKind::Known(kind)
    }
}

/// The engine a word names, [`StatusEngineKind::Unknown`] for one this release does not know.
impl From<&str> for StatusEngineKind {
    fn from(word: &str) -> Self {
        word.parse::<EngineKind>()
            .map_or(StatusEngineKind::Unknown, StatusEngineKind::Known)
    }
}

impl PartialEq<EngineKind> for StatusEngineKind {
    fn eq(&self, kind: &EngineKind) -> bool {
        *self == StatusEngineKind::Known(*kind)
    }
}

/// An engine equals the word it serializes as (readers of the status compare with the word).
impl PartialEq<&str> for StatusEngineKind {
    fn eq(&self, word: &&str) -> bool {
        self.as_str() == *word
    }
}

impl std::fmt::Display for StatusEngineKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for StatusEngineKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for StatusEngineKind {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let word = String::deserialize(deserializer)?;
        Ok(StatusEngineKind::from(word.as_str()))
    }
}

/// The engine kinds' words and `Unknown`, so the CRD lists what the status may hold.
impl schemars::JsonSchema for StatusEngineKind {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "StatusEngineKind".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut words: Vec<&str> = EngineKind::ALL.iter().map(|k| k.as_str()).collect();
        words.push(StatusEngineKind::Unknown.as_str());
        schemars::json_schema!({ "type": "string", "enum": words })
    }
}

#[cfg(test)]
mod tests {
    use super::{EngineState, StatusEngineKind};
    use crate::crd::EngineKind;

    #[test]
    fn a_state_from_a_newer_operator_reads_as_unknown() {
        let read: EngineState = serde_json::from_str("\"Hibernating\"").unwrap();
        assert_eq!(read, EngineState::Unknown);
        for state in [
            EngineState::Pending,
            EngineState::Running,
            EngineState::Succeeded,
        ] {
            let json = serde_json::to_string(&state).unwrap();
            assert_eq!(json, format!("\"{}\"", state.as_str()));
        }
    }

    #[test]
    fn an_engine_kind_in_the_status_reads_back_and_an_unknown_one_is_named() {
        for kind in EngineKind::ALL {
            let json = serde_json::to_string(&StatusEngineKind::from(kind)).unwrap();
            assert_eq!(json, format!("\"{kind}\""));
            let read: StatusEngineKind = serde_json::from_str(&json).unwrap();
            assert_eq!(read, kind);
        }
        let read: StatusEngineKind = serde_json::from_str("\"keydb\"").unwrap();
        assert_eq!(read, StatusEngineKind::Unknown);
        assert_eq!(read.known(), None);
    }
}
