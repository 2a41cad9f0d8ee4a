//! Creates a benchmark's engine password Secret ([`engine_password_secret`]) before its first
//! pod, with a fresh random value, unless it exists.

use std::io::Read;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, PostParams};

use crate::controller::build::engine_password::engine_password_secret;
use crate::crd::MemoryBenchmark;

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

/// Creates the benchmark's password Secret unless it exists. Its name holds the benchmark's UID
/// (see [`crate::auth::generated_password_secret`]), so one that exists is this benchmark's own, made by an
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
    use super::*;

    #[test]
    fn each_generated_password_is_fresh_and_long() {
        let first = random_password().unwrap();
        let second = random_password().unwrap();
        assert_eq!(first.len(), 2 * PASSWORD_BYTES);
        assert!(first.bytes().all(|b| b.is_ascii_hexdigit()), "{first}");
        assert_ne!(first, second);
    }
}
