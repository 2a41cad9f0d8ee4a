//! `spec.auth`: which Secret holds the password the engines require. Only the reference is part
//! of the spec; how each pod takes the value from the Secret is [`crate::auth`]'s.

use serde::{Deserialize, Serialize};

/// How the engines authenticate clients.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuthSpec {
    /// The key of a Secret in the benchmark's namespace that holds the password every engine
    /// of the spec requires (`requirepass`). The engine and client pods take it from the
    /// Secret themselves; the operator never reads it, and the value appears in no pod spec,
    /// status or event.
    pub password_secret_ref: SecretKeyRef,
}

/// A key of a Secret in the benchmark's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, schemars::JsonSchema)]
pub struct SecretKeyRef {
    /// The Secret's name.
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
    )]
    pub name: String,
    /// The key in the Secret's data that holds the password.
    #[schemars(length(min = 1, max = 253), regex(pattern = r"^[-._a-zA-Z0-9]+$"))]
    pub key: String,
}
