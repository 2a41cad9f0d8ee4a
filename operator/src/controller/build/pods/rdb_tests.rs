//! An RDB file in a PersistentVolumeClaim: the operator plans it without reading it, mounts
//! the claim read-only into the client pod, and the client scans the file where the plan's
//! path points; what a cluster cannot do with `workload.rdb` is refused, naming the field.

use super::*;
use crate::client::measurement::plan::WorkloadPlan;
use crate::client::workloads::rdb_load::CLAIM_MOUNT_PATH;
use crate::client::workloads::rdb_load::download::{CREDENTIALS_MOUNT_PATH, DOWNLOAD_MOUNT_PATH};
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
                url: None,
                credentials: None,
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
    for (rdb, memory, expected) in url_cases() {
        let error = try_rdb(rdb, memory)
            .and_then(|b| crate::validation::validate(&b).map(|_| ()))
            .unwrap_err();
        assert!(error.contains(expected), "{rdb}: {error}");
    }
    for (rdb, memory, expected) in cases {
        // Read as a spec file (membench run and apply's dry run), then as the operator does.
        let error = try_rdb(rdb, memory)
            .and_then(|b| crate::validation::validate(&b).map(|_| ()))
            .unwrap_err();
        assert!(error.contains(expected), "{rdb}: {error}");
    }
}

/// What a cluster refuses of an RDB file at a URL: the spec, the engines' memory, the reason.
fn url_cases() -> [(&'static str, &'static str, &'static str); 6] {
    [
        (
            "{url: \"https://backups.example/dump.rdb\"}",
            "",
            "spec.engines[0].memory is not set: with workload.rdb in a cluster the operator cannot read the file at spec.workload.rdb.url",
        ),
        (
            "{url: \"http://backups.example/dump.rdb\"}",
            ", memory: 256Mi",
            "invalid spec.workload.rdb.url: is http://backups.example/dump.rdb: membench fetches a backup over https only",
        ),
        (
            "{url: \"https://me:pw@backups.example/dump.rdb\"}",
            ", memory: 256Mi",
            "never in the URL",
        ),
        (
            "{url: \"https://backups.example/dump.rdb\", path: dump.rdb}",
            ", memory: 256Mi",
            "invalid spec.workload.rdb.url: and path (dump.rdb) are both set",
        ),
        (
            "{path: dump.rdb, credentialsSecret: {name: creds}, persistentVolumeClaim: {claimName: b}}",
            ", memory: 256Mi",
            "invalid spec.workload.rdb.credentialsSecret: names Secret creds without a url",
        ),
        (
            "{credentialsSecret: {name: creds}}",
            ", memory: 256Mi",
            "invalid spec.workload.rdb.credentialsSecret",
        ),
    ]
}

#[test]
fn an_rdb_file_at_a_url_is_planned_by_its_url_and_fetched_into_an_empty_dir_with_its_secret() {
    let url = "https://backups.example/prod/dump.rdb?X-Amz-Signature=secret";
    let b = with_rdb(
        &format!("{{url: \"{url}\", credentialsSecret: {{name: backup-creds}}}}"),
        ", memory: 256Mi",
    );
    // Nothing is fetched to plan it, and the description hides the presigned query.
    let valid = crate::validation::validate(&b).unwrap();
    assert_eq!(
        valid.workload.describe(),
        "rdb https://backups.example/prod/dump.rdb?…"
    );
    for plan in &valid.plans {
        assert_eq!(
            plan.workload,
            WorkloadPlan::Rdb {
                path: String::new(),
                claim: None,
                url: Some(url.into()),
                credentials: Some(CREDENTIALS_MOUNT_PATH.into()),
            }
        );
    }
    let pod = client_pod(&b, 0, 1, &valid.plans, "127.1.0.5", &PodSettings::default());
    assert_eq!(plan_of_client_pod(&pod).unwrap().unwrap(), valid.plans[0]);
    let pod_spec = pod.spec.unwrap();
    let volumes = pod_spec.volumes.unwrap();
    let container = &pod_spec.containers[0];
    let mounts = container.volume_mounts.clone().unwrap();
    let mount_of = |path: &str| {
        let mount = mounts
            .iter()
            .find(|m| m.mount_path == path)
            .unwrap_or_else(|| panic!("nothing mounted at {path}: {mounts:?}"));
        let volume = volumes.iter().find(|v| v.name == mount.name).unwrap();
        (volume.clone(), mount.read_only)
    };
    let (download, read_only) = mount_of(DOWNLOAD_MOUNT_PATH);
    assert!(download.empty_dir.is_some(), "{download:?}");
    assert_eq!(read_only, Some(false));
    let (secret, read_only) = mount_of(CREDENTIALS_MOUNT_PATH);
    assert_eq!(
        secret.secret.and_then(|s| s.secret_name).as_deref(),
        Some("backup-creds")
    );
    assert_eq!(read_only, Some(true));
    assert_eq!(volumes.len(), 2, "{volumes:?}");
    // The fetched copy goes to the emptyDir: the client's temporary directory.
    let env = container.env.clone().unwrap_or_default();
    assert!(
        env.iter()
            .any(|e| e.name == "TMPDIR" && e.value.as_deref() == Some(DOWNLOAD_MOUNT_PATH)),
        "{env:?}"
    );
}
