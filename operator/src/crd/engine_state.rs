//! What the status says of one engine entry as words an older or newer release also reads:
//! its state, and which engine it is. Serialized as the words earlier releases wrote; a word
//! this release does not know reads as `Unknown(word)`, never an error, and is written back as
//! read, so a status written by a newer operator neither stops this one from reading the
//! benchmark nor loses its words when this one writes the status back (`crate::words`).

use super::engine_spec::EngineKind;
use crate::words::Words;

crate::words::open_words! {
    /// Where one engine entry stands.
    pub enum EngineState {
        Pending = "Pending",
        Running = "Running",
        Succeeded = "Succeeded",
        Failed = "Failed",
    }
    unknown_meaning = "A state this release does not know, written by a newer operator.\n";
}

/// A new entry has not started.
impl Default for EngineState {
    fn default() -> Self {
        EngineState::Pending
    }
}

impl EngineState {
    /// Whether the entry is done: it will not run again. An unknown state is not: this release
    /// cannot tell, and the newer operator that wrote it decides.
    pub fn is_finished(&self) -> bool {
        matches!(self, EngineState::Succeeded | EngineState::Failed)
    }
}

/// The engine of a status entry: a kind this release knows, or one a newer operator wrote,
/// kept as its word. The spec's [`EngineKind`] has no unknown kind (a spec must name one
/// membench can start); the status, read back from the API server, must survive one.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum StatusEngineKind {
    Known(EngineKind),
    /// An engine this release does not know, kept as it was read.
    Unknown(String),
}

/// An entry not yet told its engine says `Unknown`, as earlier releases wrote.
impl Default for StatusEngineKind {
    fn default() -> Self {
        StatusEngineKind::Unknown("Unknown".to_string())
    }
}

impl Words for StatusEngineKind {
    const KNOWN: &'static [Self] = &[
        StatusEngineKind::Known(EngineKind::Redis),
        StatusEngineKind::Known(EngineKind::Valkey),
        StatusEngineKind::Known(EngineKind::Dragonfly),
    ];

    fn as_str(&self) -> &str {
        match self {
            StatusEngineKind::Known(kind) => kind.as_str(),
            StatusEngineKind::Unknown(word) => word,
        }
    }

    fn unknown(word: &str) -> Self {
        StatusEngineKind::Unknown(word.to_string())
    }

    fn is_known(&self) -> bool {
        matches!(self, StatusEngineKind::Known(_))
    }
}

crate::words::words_serde!(StatusEngineKind);

impl StatusEngineKind {
    /// The word, as serialized: the engine's name, or an unknown one as it was read.
    pub fn as_str(&self) -> &str {
        Words::as_str(self)
    }

    /// The engine, when this release knows it.
    pub fn known(&self) -> Option<EngineKind> {
        match self {
            StatusEngineKind::Known(kind) => Some(*kind),
            StatusEngineKind::Unknown(_) => None,
        }
    }
}

impl From<EngineKind> for StatusEngineKind {
    fn from(kind: EngineKind) -> Self {
        StatusEngineKind::Known(kind)
    }
}

impl PartialEq<EngineKind> for StatusEngineKind {
    fn eq(&self, kind: &EngineKind) -> bool {
        *self == StatusEngineKind::Known(*kind)
    }
}

#[cfg(test)]
mod tests {
    use super::{EngineState, StatusEngineKind};
    use crate::crd::EngineKind;
    use crate::words::Words;

    #[test]
    fn a_state_from_a_newer_operator_is_kept_and_is_not_finished() {
        let read: EngineState = serde_json::from_str("\"Hibernating\"").unwrap();
        assert_eq!(read, EngineState::Unknown("Hibernating".into()));
        assert!(!read.is_finished());
        assert_eq!(serde_json::to_string(&read).unwrap(), "\"Hibernating\"");
        for state in EngineState::KNOWN {
            let json = serde_json::to_string(state).unwrap();
            assert_eq!(json, format!("\"{}\"", state.as_str()));
            assert_eq!(&serde_json::from_str::<EngineState>(&json).unwrap(), state);
        }
    }

    #[test]
    fn the_status_knows_every_engine_kind_and_keeps_an_unknown_one() {
        assert_eq!(
            StatusEngineKind::KNOWN,
            EngineKind::ALL.map(StatusEngineKind::from),
            "StatusEngineKind::KNOWN lists the spec's engine kinds"
        );
        for kind in EngineKind::ALL {
            let json = serde_json::to_string(&StatusEngineKind::from(kind)).unwrap();
            assert_eq!(json, format!("\"{kind}\""));
            let read: StatusEngineKind = serde_json::from_str(&json).unwrap();
            assert_eq!(read, kind);
        }
        let read: StatusEngineKind = serde_json::from_str("\"keydb\"").unwrap();
        assert_eq!(read, StatusEngineKind::Unknown("keydb".into()));
        assert_eq!(read.known(), None);
        assert_eq!(serde_json::to_string(&read).unwrap(), "\"keydb\"");
    }
}
