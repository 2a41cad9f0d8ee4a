//! The volumes the node agent mounts in a container's private mount namespace, on the dev
//! cluster: an emptyDir shared by two containers, the working directory, secret, configMap and
//! downwardAPI files, and a read-only mount that refuses a write. Every pod runs as a non-root
//! user, as the test namespaces' Pod Security `restricted` requires.

mod common;

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::PostParams;
use membench_devcluster::wait::TestNamespace;
use serde_json::json;

use common::{
    cluster, pod, require_dev_cluster, shell_container, shell_pod, terminated,
    terminated_container, wait_finished,
};

#[tokio::test]
async fn a_file_written_to_an_empty_dir_is_read_by_another_container() -> anyhow::Result<()> {
    require_dev_cluster("emptyDir")?;
    let client = cluster().await?;
    let ns = TestNamespace::create(&client, "empty-dir").await?;
    let pods = ns.pods();
    let mount = json!({"volumeMounts": [{"name": "shared", "mountPath": "/shared"}]});
    // Both run at once: the reader waits (at most 20 s) for what the writer leaves.
    let p = pod(json!({
        "metadata": {"name": "pair"},
        "spec": {
            "restartPolicy": "Never",
            "volumes": [{"name": "shared", "emptyDir": {}}],
            "containers": [
                shell_container("writer", "echo \"hello from $(id -u)\" > /shared/greeting", mount.clone()),
                shell_container(
                    "reader",
                    "for i in $(seq 200); do [ -s /shared/greeting ] && break; sleep 0.1; done; cat /shared/greeting > /dev/termination-log",
                    mount,
                ),
            ],
        },
    }));
    pods.create(&PostParams::default(), &p).await?;
    let done = wait_finished(&pods, "pair").await?;
    let read = terminated_container(&done, 1);
    assert_eq!(
        read.message.as_deref(),
        Some("hello from 999\n"),
        "{read:?}"
    );
    // Written into the volume, not into the machine's /shared.
    assert!(!std::path::Path::new("/shared/greeting").exists());
    ns.delete().await
}

#[tokio::test]
async fn the_process_starts_in_its_working_dir() -> anyhow::Result<()> {
    require_dev_cluster("workingDir")?;
    let client = cluster().await?;
    let ns = TestNamespace::create(&client, "working-dir").await?;
    let pods = ns.pods();
    let p = pod(json!({
        "metadata": {"name": "cwd"},
        "spec": {
            "restartPolicy": "Never",
            "volumes": [{"name": "data", "emptyDir": {}}],
            "containers": [shell_container(
                "main",
                "echo relative > written-here && printf '%s %s' \"$(pwd)\" \"$(cat /data/written-here)\" > /dev/termination-log",
                json!({"workingDir": "/data", "volumeMounts": [{"name": "data", "mountPath": "/data"}]}),
            )],
        },
    }));
    pods.create(&PostParams::default(), &p).await?;
    let done = wait_finished(&pods, "cwd").await?;
    let t = terminated(&done);
    assert_eq!(t.message.as_deref(), Some("/data relative"), "{t:?}");
    ns.delete().await
}

#[tokio::test]
async fn a_secret_volume_holds_the_secrets_keys_as_files() -> anyhow::Result<()> {
    require_dev_cluster("secret volume")?;
    let client = cluster().await?;
    let ns = TestNamespace::create(&client, "secret-volume").await?;
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some("creds".into()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            "password".to_string(),
            ByteString(b"s3cr3t".to_vec()),
        )])),
        ..Default::default()
    };
    ns.api::<Secret>()
        .create(&PostParams::default(), &secret)
        .await?;
    let pods = ns.pods();
    let p = pod(json!({
        "metadata": {"name": "reads-secret"},
        "spec": {
            "restartPolicy": "Never",
            "volumes": [{"name": "creds", "secret": {"secretName": "creds", "defaultMode": 0o440, "items": [{"key": "password", "path": "db/password"}]}}],
            "securityContext": {
                "runAsNonRoot": true, "runAsUser": 999, "runAsGroup": 999, "fsGroup": 2000,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [shell_container(
                "main",
                "printf '%s|%s' \"$(cat /etc/creds/db/password)\" \"$(stat -c '%a %g' /etc/creds/db/password)\" > /dev/termination-log",
                json!({"volumeMounts": [{"name": "creds", "mountPath": "/etc/creds"}]}),
            )],
        },
    }));
    pods.create(&PostParams::default(), &p).await?;
    let done = wait_finished(&pods, "reads-secret").await?;
    let t = terminated(&done);
    // Readable by uid 999 only through the fsGroup, as the kubelet sets it up.
    assert_eq!(t.message.as_deref(), Some("s3cr3t|440 2000"), "{t:?}");
    ns.delete().await
}

#[tokio::test]
async fn a_config_map_volume_holds_the_chosen_keys() -> anyhow::Result<()> {
    require_dev_cluster("configMap volume")?;
    let client = cluster().await?;
    let ns = TestNamespace::create(&client, "configmap-volume").await?;
    let config = ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some("settings".into()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([
            ("maxmemory".to_string(), "1gb".to_string()),
            ("unused".to_string(), "x".to_string()),
        ])),
        ..Default::default()
    };
    ns.api::<ConfigMap>()
        .create(&PostParams::default(), &config)
        .await?;
    let pods = ns.pods();
    let p = shell_pod(
        "reads-config",
        "printf '%s %s' \"$(cat /etc/settings/limit)\" \"$(ls /etc/settings)\" > /dev/termination-log",
        json!({"volumeMounts": [{"name": "settings", "mountPath": "/etc/settings"}]}),
    );
    let mut p = p;
    p.spec.as_mut().unwrap().volumes = Some(vec![serde_json::from_value(json!({
        "name": "settings",
        "configMap": {"name": "settings", "items": [{"key": "maxmemory", "path": "limit"}]},
    }))?]);
    pods.create(&PostParams::default(), &p).await?;
    let done = wait_finished(&pods, "reads-config").await?;
    assert_eq!(terminated(&done).message.as_deref(), Some("1gb limit"));
    ns.delete().await
}

#[tokio::test]
async fn a_downward_api_volume_holds_the_pods_fields() -> anyhow::Result<()> {
    require_dev_cluster("downwardAPI volume")?;
    let client = cluster().await?;
    let ns = TestNamespace::create(&client, "downward-volume").await?;
    let pods = ns.pods();
    let mut p = shell_pod(
        "reads-fields",
        "printf '%s|%s|%s' \"$(cat /etc/pod/name)\" \"$(cat /etc/pod/tier)\" \"$(cat /etc/pod/memory)\" > /dev/termination-log",
        json!({
            "volumeMounts": [{"name": "pod", "mountPath": "/etc/pod"}],
            "resources": {"limits": {"memory": "64Mi"}},
        }),
    );
    p.metadata.labels = Some(BTreeMap::from([("tier".to_string(), "bench".to_string())]));
    p.spec.as_mut().unwrap().volumes = Some(vec![serde_json::from_value(json!({
        "name": "pod",
        "downwardAPI": {"items": [
            {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
            {"path": "tier", "fieldRef": {"fieldPath": "metadata.labels['tier']"}},
            {"path": "memory", "resourceFieldRef": {"containerName": "main", "resource": "limits.memory", "divisor": "1Mi"}},
        ]},
    }))?]);
    pods.create(&PostParams::default(), &p).await?;
    let done = wait_finished(&pods, "reads-fields").await?;
    assert_eq!(
        terminated(&done).message.as_deref(),
        Some("reads-fields|bench|64")
    );
    ns.delete().await
}

#[tokio::test]
async fn a_read_only_mount_refuses_a_write() -> anyhow::Result<()> {
    require_dev_cluster("readOnly")?;
    let client = cluster().await?;
    let ns = TestNamespace::create(&client, "read-only").await?;
    let pods = ns.pods();
    let p = pod(json!({
        "metadata": {"name": "ro"},
        "spec": {
            "restartPolicy": "Never",
            "volumes": [{"name": "data", "emptyDir": {}}],
            "containers": [shell_container(
                "main",
                "echo lost > /data/file",
                json!({
                    "volumeMounts": [{"name": "data", "mountPath": "/data", "readOnly": true}],
                    "terminationMessagePolicy": "FallbackToLogsOnError",
                }),
            )],
        },
    }));
    pods.create(&PostParams::default(), &p).await?;
    let done = wait_finished(&pods, "ro").await?;
    let t = terminated(&done);
    assert_ne!(t.exit_code, 0, "{t:?}");
    let message = t.message.unwrap_or_default();
    assert!(message.contains("Read-only file system"), "{message}");
    ns.delete().await
}
