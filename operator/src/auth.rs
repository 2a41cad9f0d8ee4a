//! An engine password from a Secret (`spec.auth.passwordSecretRef`), and how each pod gets it
//! without its value ever being written into a pod spec, a status, an event or a log:
//!
//! - Redis and Valkey: the container's environment takes the key from the Secret
//!   (`valueFrom.secretKeyRef`) and the arguments say `--requirepass $(MEMBENCH_ENGINE_PASSWORD)`.
//!   The pod spec holds only that reference; the kubelet expands it when it starts the
//!   container, so the value is in the server's argv for the moment it starts, and the server
//!   then overwrites its argv with its process title (`redis-server 10.0.0.5:6379`), so
//!   `/proc/<pid>/cmdline` does not show it (tested). The official images' entrypoints read no
//!   password variable, and a config file would need a shell in the image to write it.
//! - Dragonfly reads any flag from `DFLY_<flag>`: `DFLY_requirepass` from the Secret, never in
//!   argv at all.
//! - The client: `MEMBENCH_PASSWORD` from the same Secret (`membench load` reads it).
//!
//! Without `spec.auth` every benchmark still gets a password: the operator creates a Secret of
//! its own ([`generated_password_secret`], `controller/engine_password.rs`) with a random value,
//! owned by the benchmark, and the pods take it by the same references. So no engine is ever
//! open, whether or not the cluster's network plugin enforces NetworkPolicy.
//!
//! The operator never reads a Secret: it may create its own (`create` on `secrets`, no `get`),
//! and its progress reading goes to the client's progress endpoint, not to the engine.

use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, SecretKeySelector};
use kube::ResourceExt;

use crate::crd::{AuthSpec, EngineKind, MemoryBenchmark, SecretKeyRef};

/// The key of the password in the Secret the operator generates.
pub const GENERATED_PASSWORD_KEY: &str = "password";

/// The variable the Redis and Valkey arguments expand.
pub const ENGINE_PASSWORD_ENV: &str = "MEMBENCH_ENGINE_PASSWORD";
/// Dragonfly's own variable for its `--requirepass` flag.
pub const DRAGONFLY_PASSWORD_ENV: &str = "DFLY_requirepass";
/// The variable `membench load` reads its password from.
pub const CLIENT_PASSWORD_ENV: &str = "MEMBENCH_PASSWORD";

/// The Secret the operator generates for a benchmark without `spec.auth`: named for the
/// benchmark and its UID, so a benchmark re-created under the same name never meets the earlier
/// one's (which the garbage collector may be about to delete) and an existing one of that name
/// can only be this benchmark's own, from an earlier reconciliation.
pub fn generated_password_secret(benchmark: &MemoryBenchmark) -> SecretKeyRef {
    let name = match benchmark.uid() {
        Some(uid) => format!("{}-engine-password-{uid}", benchmark.name_any()),
        None => format!("{}-engine-password", benchmark.name_any()),
    };
    SecretKeyRef {
        name,
        key: GENERATED_PASSWORD_KEY.into(),
    }
}

/// The password every engine of the benchmark requires: the spec's, else the generated one.
pub fn effective_auth(benchmark: &MemoryBenchmark) -> AuthSpec {
    benchmark.spec.auth.clone().unwrap_or_else(|| AuthSpec {
        password_secret_ref: generated_password_secret(benchmark),
    })
}

fn from_secret(name: &str, secret: &SecretKeyRef) -> EnvVar {
    EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.name.clone(),
                key: secret.key.clone(),
                optional: Some(false),
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The engine container's password variable, taken from the Secret.
pub fn engine_env(engine: EngineKind, auth: &AuthSpec) -> EnvVar {
    let name = match engine {
        EngineKind::Redis | EngineKind::Valkey => ENGINE_PASSWORD_ENV,
        EngineKind::Dragonfly => DRAGONFLY_PASSWORD_ENV,
    };
    from_secret(name, &auth.password_secret_ref)
}

/// The engine arguments that turn the password on: a reference the kubelet expands, never the
/// value (Dragonfly needs none: it reads its variable itself).
pub fn engine_args(engine: EngineKind) -> Vec<String> {
    match engine {
        EngineKind::Redis | EngineKind::Valkey => {
            vec!["--requirepass".into(), format!("$({ENGINE_PASSWORD_ENV})")]
        }
        EngineKind::Dragonfly => Vec::new(),
    }
}

/// The client container's password variable, taken from the same Secret.
pub fn client_env(auth: &AuthSpec) -> EnvVar {
    from_secret(CLIENT_PASSWORD_ENV, &auth.password_secret_ref)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth() -> AuthSpec {
        AuthSpec {
            password_secret_ref: SecretKeyRef {
                name: "engine-password".into(),
                key: "password".into(),
            },
        }
    }

    #[test]
    fn each_engine_takes_the_password_from_the_secret_and_args_only_reference_it() {
        for engine in EngineKind::ALL {
            let env = engine_env(engine, &auth());
            assert!(env.value.is_none(), "no literal value");
            let selector = env.value_from.unwrap().secret_key_ref.unwrap();
            assert_eq!(
                (selector.name.as_str(), selector.key.as_str()),
                ("engine-password", "password")
            );
        }
        assert_eq!(
            engine_args(EngineKind::Valkey),
            ["--requirepass", "$(MEMBENCH_ENGINE_PASSWORD)"]
        );
        assert!(engine_args(EngineKind::Dragonfly).is_empty());
        assert_eq!(
            engine_env(EngineKind::Dragonfly, &auth()).name,
            "DFLY_requirepass"
        );
        assert_eq!(client_env(&auth()).name, "MEMBENCH_PASSWORD");
    }
}
