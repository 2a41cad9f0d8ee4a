//! The engine password of a benchmark that names none (`spec.auth` absent): a Secret the
//! operator creates before the benchmark's first pod, with a random value, owned by the
//! benchmark (the garbage collector deletes it with it) and immutable. The pods take it by
//! `secretKeyRef` ([`crate::auth::effective_auth`]); the operator never reads it back (it has
//! `create` on `secrets` and nothing else), so the value exists only in the API server and in
//! the benchmark's own pods.
//!
//! The pure builder; `write::engine_password::ensure` makes the one API call.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;

use crate::auth::generated_password_secret;
use crate::crd::MemoryBenchmark;

use super::pods::benchmark_object_metadata;

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

#[cfg(test)]
mod tests {
    use super::super::pods::tests::benchmark;
    use super::super::pods::{LABEL_MANAGED_BY, MANAGER};
    use super::*;

    #[test]
    fn the_generated_secret_is_the_benchmarks_own_immutable_and_named_for_its_uid() {
        let b = benchmark("");
        let password = "c0ffee".to_string();
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
}
