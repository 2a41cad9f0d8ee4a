//! The engine password of a benchmark that names none (`spec.auth` absent): a Secret the
//! operator creates before the benchmark's first pod, with a random value, owned by the
//! benchmark (the garbage collector deletes it with it) and immutable. The pods take it by
//! `secretKeyRef` ([`crate::auth::effective_auth`]); the operator never reads it back (it has
//! `create` on `secrets` and nothing else), so the value exists only in the API server and in
//! the benchmark's own pods.
//!
//! Pure builder plus [`ensure`], the one API call.

use std::collections::BTreeMap;
use std::io::Read;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, PostParams};

use crate::auth::generated_password_secret;
use crate::crd::MemoryBenchmark;

use super::pods::benchmark_object_metadata;

/// Random bytes in a generated password (hex-encoded: twice as many characters).
const PASSWORD_BYTES: usize = 32;

/// Why the benchmark's password Secret could not be put in place.
#[derive(Debug, thiserror::Error)]
pub enum EnsureError {
    #[error("cannot read random bytes for the engine password from /dev/urandom: {0}")]
    Random(#[source] std::io::Error),
    #[error(transparent)]
    Api(#[from] kube::Error),
}

/// A fresh random password, hex-encoded (it goes on a server's command line as an argument
/// reference and into RESP `AUTH`, so plain characters).
pub fn random_password() -> Result<String, std::io::Error> {
    let mut bytes = [0u8; PASSWORD_BYTES];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The benchmark's password Secret holding `password`.
pub fn engine_password_secret(benchmark: &MemoryBenchmark, password: String) -> Secret {
    let reference = generated_password_secret(benchmark);
    Secret {
        metadata: benchmark_object_metadata(benchmark, reference.name),
        type_: Some("Opaque".into()),
        immutable: Some(true),
        string_data: Some(BTreeMap::from([(reference.key, password)])),
        ..Default::default()
    }
}

/// Creates the benchmark's password Secret unless it exists. Its name holds the benchmark's UID
/// (see [`generated_password_secret`]), so one that exists is this benchmark's own, made by an
/// earlier reconciliation: it is kept, never read.
pub async fn ensure(client: &kube::Client, benchmark: &MemoryBenchmark) -> Result<(), EnsureError> {
    let namespace = benchmark.namespace().unwrap_or_default();
    let api: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    let secret = engine_password_secret(benchmark, random_password().map_err(EnsureError::Random)?);
    match api.create(&PostParams::default(), &secret).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_already_exists() => Ok(()),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::pods::tests::benchmark;
    use super::super::pods::{LABEL_MANAGED_BY, MANAGER};
    use super::*;

    #[test]
    fn the_generated_secret_is_the_benchmarks_own_immutable_and_named_for_its_uid() {
        let b = benchmark("");
        let password = random_password().unwrap();
        let secret = engine_password_secret(&b, password.clone());
        assert_eq!(
            secret.metadata.name.as_deref(),
            Some("zset-engine-password-uid-1")
        );
        assert_eq!(secret.metadata.namespace.as_deref(), Some("bench"));
        let owner = &secret.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("MemoryBenchmark", "uid-1", Some(true))
        );
        assert_eq!(secret.immutable, Some(true));
        assert_eq!(secret.string_data.unwrap()["password"], password);
        assert_eq!(secret.metadata.labels.unwrap()[LABEL_MANAGED_BY], MANAGER);
    }

    #[test]
    fn each_generated_password_is_fresh_and_long() {
        let first = random_password().unwrap();
        let second = random_password().unwrap();
        assert_eq!(first.len(), 2 * PASSWORD_BYTES);
        assert!(first.bytes().all(|b| b.is_ascii_hexdigit()), "{first}");
        assert_ne!(first, second);
    }
}
