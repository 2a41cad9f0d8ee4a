//! Why a spec cannot run, typed by who refuses it, so the benchmark's `Failed` condition says
//! which: the spec's own validation (`InvalidSpec`), the operator's policy (`PolicyDenied`), or
//! the nodes of its instance type (`DoesNotFit`). Each names the field the user must change.

use crate::crd::ConditionReason;

/// A spec the operator will not run, and the field to change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpecError {
    /// The spec cannot run as written (`crate::validation`): its message starts with the field.
    Invalid(String),
    /// The operator's policy (its flags and chart values) refuses what `field` asks for.
    PolicyDenied { field: String, message: String },
    /// The pods `field` sizes do not fit a node of the instance type.
    DoesNotFit { field: String, message: String },
}

impl SpecError {
    /// The condition's reason for it.
    pub fn reason(&self) -> ConditionReason {
        match self {
            SpecError::Invalid(_) => ConditionReason::InvalidSpec,
            SpecError::PolicyDenied { .. } => ConditionReason::PolicyDenied,
            SpecError::DoesNotFit { .. } => ConditionReason::DoesNotFit,
        }
    }

    /// Whether a condition's reason is one a spec error sets (the benchmark waits for a new
    /// spec: nothing else is decided).
    pub fn is_spec_reason(reason: &str) -> bool {
        [
            ConditionReason::InvalidSpec,
            ConditionReason::PolicyDenied,
            ConditionReason::DoesNotFit,
        ]
        .iter()
        .any(|r| r.as_str() == reason)
    }
}

/// The spec's own validation says what is wrong in words that start with the field.
impl From<String> for SpecError {
    fn from(message: String) -> Self {
        SpecError::Invalid(message)
    }
}

/// The condition's message: the field, then what is wrong and what to do.
impl std::fmt::Display for SpecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpecError::Invalid(message) => f.write_str(message),
            SpecError::PolicyDenied { field, message }
            | SpecError::DoesNotFit { field, message } => {
                write!(f, "{field}: {message}")
            }
        }
    }
}
