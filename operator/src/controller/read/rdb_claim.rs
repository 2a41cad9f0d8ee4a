//! An RDB file's `persistentVolumeClaim`: the operator looks the claim up before it decides
//! anything. A claim that is not in the benchmark's namespace makes the spec invalid, with a
//! message saying which and what to do, and nothing starts: without it the client pod would
//! wait for a node that can mount it until the scheduling timeout, its engine holding a node.
//! The file itself is read by the client pod, where the claim is mounted.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::Client;
use kube::api::Api;

use crate::crd::{MemoryBenchmark, RdbVolumeClaim};

/// Why the claim cannot be used, when it is absent.
pub fn claim_problem(
    claim: &RdbVolumeClaim,
    namespace: &str,
    found: Option<&PersistentVolumeClaim>,
) -> Option<String> {
    found.is_none().then(|| {
        format!(
            "spec.workload.rdb.persistentVolumeClaim: no PersistentVolumeClaim {} in namespace {namespace}: create the claim that holds the file (or name the one that does), then create the benchmark again",
            claim.claim_name
        )
    })
}

/// The benchmark with why its claim cannot be used, when it cannot. An API error other than
/// a refusal is returned, to be retried.
pub async fn resolve(
    client: &Client,
    mut benchmark: MemoryBenchmark,
) -> Result<MemoryBenchmark, kube::Error> {
    let Some(rdb) = &mut benchmark.spec.workload.rdb else {
        return Ok(benchmark);
    };
    let Some(claim) = &rdb.persistent_volume_claim else {
        return Ok(benchmark);
    };
    let namespace = benchmark.metadata.namespace.clone().unwrap_or_default();
    let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &namespace);
    rdb.unresolved = match api.get_opt(&claim.claim_name).await {
        Ok(found) => claim_problem(claim, &namespace, found.as_ref()),
        Err(kube::Error::Api(status)) if status.code == 403 => Some(format!(
            "spec.workload.rdb.persistentVolumeClaim: the operator may not read PersistentVolumeClaim {} in namespace {namespace} ({}): grant it get on persistentvolumeclaims (the chart's RBAC does)",
            claim.claim_name, status.message
        )),
        Err(e) => return Err(e),
    };
    Ok(benchmark)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_claim_is_named_with_its_namespace_and_what_to_do() {
        let claim = RdbVolumeClaim {
            claim_name: "prod-backups".into(),
        };
        assert_eq!(
            claim_problem(&claim, "bench", None).as_deref(),
            Some(
                "spec.workload.rdb.persistentVolumeClaim: no PersistentVolumeClaim prod-backups in namespace bench: create the claim that holds the file (or name the one that does), then create the benchmark again"
            )
        );
        assert_eq!(
            claim_problem(&claim, "bench", Some(&PersistentVolumeClaim::default())),
            None
        );
    }
}
