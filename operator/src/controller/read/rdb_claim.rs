//! An RDB file's `persistentVolumeClaim`: the operator looks the claim up before it decides
//! anything. A claim that is not in the benchmark's namespace makes the spec invalid, with a
//! message saying which and what to do, and nothing starts: without it the client pod would
//! wait for a node that can mount it until the scheduling timeout, its engine holding a node.
//! The file itself is read by the client pod, where the claim is mounted.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::Client;
use kube::api::Api;

use crate::crd::{MemoryBenchmark, MemoryBenchmarkStatus, RdbVolumeClaim};

/// Whether the claim is looked up: until something started for the benchmark (a pod of its
/// own, an engine past Pending). A spec refused for its claim stays refused at each decision;
/// once a run started, what it measured stands whatever becomes of the claim: a claim deleted
/// after a run must not turn it Failed. A client pod that then cannot mount it waits as any pod
/// that cannot start, and its wait is bounded.
pub fn looked_up(benchmark: &MemoryBenchmark, pods: &[Pod]) -> bool {
    let started = benchmark
        .status
        .as_ref()
        .is_some_and(MemoryBenchmarkStatus::any_engine_started);
    pods.is_empty() && !started
}

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
    use crate::crd::{EngineState, Phase};

    #[test]
    fn the_claim_is_looked_up_before_a_run_only() {
        let mut benchmark = crate::validation::spec_file::parse_specs(
            "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {name: b, namespace: bench}\nspec:\n  engines: [{engine: valkey, version: \"9.1.2\"}]\n  workload: {rdb: {path: dump.rdb, persistentVolumeClaim: {claimName: backups}}}\n",
        )
        .unwrap()
        .remove(0);
        assert!(looked_up(&benchmark, &[]), "a new benchmark");
        let mut status = crate::crd::MemoryBenchmarkStatus {
            phase: Some(Phase::Pending),
            ..Default::default()
        };
        benchmark.status = Some(status.clone());
        assert!(looked_up(&benchmark, &[]), "pending, no pod yet");
        assert!(
            !looked_up(&benchmark, &[Pod::default()]),
            "a pod of its own"
        );
        // The first status the operator writes: running, its engines pending.
        status.phase = Some(Phase::Running);
        status.engines = vec![crate::crd::EngineStatus::default()];
        benchmark.status = Some(status.clone());
        assert!(looked_up(&benchmark, &[]), "running, no engine started yet");
        // Refused before any engine started: refused again at each decision.
        status.phase = Some(Phase::Failed);
        benchmark.status = Some(status.clone());
        assert!(looked_up(&benchmark, &[]), "refused before a run");
        for state in [EngineState::Running, EngineState::Succeeded] {
            status.engines[0].state = state.clone();
            benchmark.status = Some(status.clone());
            assert!(!looked_up(&benchmark, &[]), "an engine {state:?}");
        }
    }

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
