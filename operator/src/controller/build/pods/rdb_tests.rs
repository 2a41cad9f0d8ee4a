//! An RDB file in a PersistentVolumeClaim: the operator plans it without reading it, mounts
//! the claim read-only into the client pod, and the client scans the file where the plan's
//! path points; what a cluster cannot do with `workload.rdb` is refused, naming the field.

use super::*;
use crate::client::plan::WorkloadPlan;
use crate::client::rdb_load::CLAIM_MOUNT_PATH;
use crate::validation::spec_file::parse_specs;

/// A MemoryBenchmark loading `rdb` (the workload's YAML map) into two engines with `memory`.
fn with_rdb(rdb: &str, memory: &str) -> MemoryBenchmark {
    try_rdb(rdb, memory).unwrap()
}

/// [`with_rdb`], or why the spec is refused as it is read.
fn try_rdb(rdb: &str, memory: &str) -> Result<MemoryBenchmark, String> {
    let yaml = format!(
        r#"apiVersion: membench.io/v1alpha1
kind: MemoryBenchmark
metadata: {{name: backup, namespace: bench}}
spec:
  instanceType: r8g.4xlarge
  engines:
  - {{engine: valkey, version: "9.1.2"{memory}}}
  - {{engine: redis, version: "8.6.3"{memory}}}
  workload:
    rdb: {rdb}
"#
    );
    let mut b = parse_specs(&yaml)?.remove(0);
    b.metadata.uid = Some("uid-1".into());
    Ok(b)
}

#[test]
fn an_rdb_file_in_a_claim_is_planned_unread_and_its_claim_mounted_read_only_in_the_client_pod() {
    let b = with_rdb(
        "{path: backups/dump.rdb, persistentVolumeClaim: {claimName: prod-backups}}",
        ", memory: 256Mi",
    );
    // The file exists nowhere here: validation must not read it.
    let valid = crate::validation::validate(&b).unwrap();
    assert_eq!(
        valid.workload.describe(),
        format!("rdb {CLAIM_MOUNT_PATH}/backups/dump.rdb in PersistentVolumeClaim prod-backups")
    );
    for (i, plan) in valid.plans.iter().enumerate() {
        assert_eq!(
            plan.workload,
            WorkloadPlan::Rdb {
                path: format!("{CLAIM_MOUNT_PATH}/backups/dump.rdb"),
                claim: Some("prod-backups".into()),
            },
            "entry {i}"
        );
    }
    let pod = client_pod(&b, 1, 1, &valid.plans, "127.1.0.5", &PodSettings::default());
    assert_eq!(plan_of_client_pod(&pod).unwrap().unwrap(), valid.plans[1]);
    let pod_spec = pod.spec.unwrap();
    let volumes = pod_spec.volumes.unwrap();
    assert_eq!(volumes.len(), 1, "{volumes:?}");
    let claim = volumes[0].persistent_volume_claim.as_ref().unwrap();
    assert_eq!(
        (claim.claim_name.as_str(), claim.read_only),
        ("prod-backups", Some(true))
    );
    let container = &pod_spec.containers[0];
    let mounts = container.volume_mounts.as_ref().unwrap();
    assert_eq!(
        (
            mounts[0].name.as_str(),
            mounts[0].mount_path.as_str(),
            mounts[0].read_only
        ),
        (volumes[0].name.as_str(), CLAIM_MOUNT_PATH, Some(true))
    );
    // The root file system stays read-only: the claim is the one thing mounted.
    assert_eq!(
        container
            .security_context
            .as_ref()
            .and_then(|s| s.read_only_root_filesystem),
        Some(true)
    );
}

#[test]
fn the_engine_pods_of_an_rdb_workload_get_the_claim_only_in_their_client() {
    let b = with_rdb(
        "{path: dump.rdb, persistentVolumeClaim: {claimName: prod-backups}}",
        ", memory: 256Mi",
    );
    let pod = engine_pod(&b, 0, 256 << 20, None, &PodSettings::default());
    let volumes = pod.spec.unwrap().volumes.unwrap_or_default();
    assert!(
        volumes.iter().all(|v| v.persistent_volume_claim.is_none()),
        "{volumes:?}"
    );
}

#[test]
fn what_a_cluster_cannot_do_with_an_rdb_file_is_refused_naming_the_field_and_what_to_do() {
    let cases = [
        (
            "{path: dump.rdb, persistentVolumeClaim: {claimName: prod-backups}}",
            "",
            "spec.engines[0].memory is not set: with workload.rdb in a cluster the operator cannot read the file in PersistentVolumeClaim prod-backups",
        ),
        (
            "{path: /backups/dump.rdb, persistentVolumeClaim: {claimName: prod-backups}}",
            ", memory: 256Mi",
            "spec.workload.rdb.path: is \"/backups/dump.rdb\", an absolute path: with persistentVolumeClaim the path is inside the claim",
        ),
        (
            "{path: backups/../../etc/passwd, persistentVolumeClaim: {claimName: prod-backups}}",
            ", memory: 256Mi",
            "cannot leave it with ..",
        ),
    ];
    // The operator found no such claim (controller/read/rdb_claim.rs).
    let mut absent = with_rdb(
        "{path: dump.rdb, persistentVolumeClaim: {claimName: prod-backups}}",
        ", memory: 256Mi",
    );
    absent.spec.workload.rdb.as_mut().unwrap().unresolved =
        Some("spec.workload.rdb.persistentVolumeClaim: no PersistentVolumeClaim".into());
    assert_eq!(
        crate::validation::validate(&absent).unwrap_err(),
        "spec.workload.rdb.persistentVolumeClaim: no PersistentVolumeClaim"
    );
    for (rdb, memory, expected) in cases {
        // Read as a spec file (membench run and apply's dry run), then as the operator does.
        let error = try_rdb(rdb, memory)
            .and_then(|b| crate::validation::validate(&b).map(|_| ()))
            .unwrap_err();
        assert!(error.contains(expected), "{rdb}: {error}");
    }
}
