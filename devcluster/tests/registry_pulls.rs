//! The dev cluster's registry (CNCF distribution on 127.0.0.1, TLS from the cluster's CA,
//! htpasswd basic auth) and a real node pulling from it as a kubelet pulls for a user: through
//! containerd's registry configuration (hosts.toml and the CA), with the credentials of the
//! pod's imagePullSecret, a Secret of type kubernetes.io/dockerconfigjson. The image is one no
//! node has: the registry's own name for it, with `imagePullPolicy: Always`, so every run asks
//! the registry, and its log shows each request.
//!
//! Needs a real node and the registry: when either cannot start the tests fail, naming what is
//! missing.

mod common;

use std::time::Duration;

use common::{container_status, pod};
use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use membench_devcluster::EnsureOptions;
use membench_devcluster::real_nodes::{
    REAL_NODE_INSTANCE_TYPE, REAL_NODE_LABEL, REAL_NODE_TAINT_KEY, ensure_real_node, remove_images,
};
use membench_devcluster::registry::{REGISTRY_USER, Registry};
use membench_devcluster::wait::{TestNamespace, is_running_and_ready, wait_for_pod};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The smallest engine image the registry holds that every engine store has.
const OFFICIAL_IMAGE: &str = "redis:8.2.3";
/// Its repository in the registry.
const REPOSITORY: &str = "library/redis";

/// Both tests read the one registry's log for the same repository since their pod was
/// created: they run one at a time, or one's successful pull shows in the other's window.
static REGISTRY_LOG: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Nothing of the registry's copy of the image is left on the real nodes (an earlier test may
/// have pulled it), so the pod's pull is a pull.
async fn no_registry_image_on_the_nodes(registry: &Registry) -> anyhow::Result<()> {
    remove_images(&options(), &format!("{}/{REPOSITORY}", registry.host)).await?;
    Ok(())
}

fn options() -> EnsureOptions {
    EnsureOptions {
        node_agent_bin: Some(env!("CARGO_BIN_EXE_membench-node-agent").into()),
        ..EnsureOptions::default()
    }
}

/// A Redis pod on the real node, its image pulled from `image` every time with `pull_secret`.
fn registry_pod(name: &str, image: &str, pull_secret: &str) -> Pod {
    pod(json!({
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 5,
            "nodeSelector": {
                REAL_NODE_LABEL: "true",
                "node.kubernetes.io/instance-type": REAL_NODE_INSTANCE_TYPE,
            },
            "tolerations": [{"key": REAL_NODE_TAINT_KEY, "operator": "Equal", "value": "true", "effect": "NoSchedule"}],
            "imagePullSecrets": [{"name": pull_secret}],
            "containers": [{
                "name": "engine",
                "image": image,
                "imagePullPolicy": "Always",
                // Not protected mode: the test reaches it on its pod address, not loopback.
                "args": ["--port", "6379", "--save", "", "--appendonly", "no", "--protected-mode", "no"],
                "readinessProbe": {"tcpSocket": {"port": 6379}, "periodSeconds": 1},
            }],
        },
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_node_pulls_an_image_only_the_registry_has_with_the_pods_pull_secret()
-> anyhow::Result<()> {
    let _one_at_a_time = REGISTRY_LOG.lock().await;
    let (client, node) = ensure_real_node(&options()).await?;
    let registry = Registry::of_dev_cluster(&options()).await?;
    no_registry_image_on_the_nodes(&registry).await?;
    let ns = TestNamespace::create(&client, "registry-pull").await?;
    registry
        .create_pull_secret(&client, ns.name(), "registry-creds")
        .await?;
    let image = registry.engine_image(OFFICIAL_IMAGE);
    assert_eq!(image, format!("{}/{REPOSITORY}:8.2.3", registry.host));
    let offset = registry.log_offset()?;
    let pods = ns.pods();
    pods.create(
        &PostParams::default(),
        &registry_pod("redis", &image, "registry-creds"),
    )
    .await?;
    let ready = wait_for_pod(
        &pods,
        "redis",
        Duration::from_secs(120),
        "running and ready (pulled from the registry)",
        is_running_and_ready,
    )
    .await?;
    assert_eq!(
        ready.spec.as_ref().and_then(|s| s.node_name.as_deref()),
        Some(node.metadata.name.as_deref().unwrap())
    );
    let status = container_status(&ready, 0);
    // The runtime's record of the pull: the registry's repository and the manifest's digest.
    assert!(
        status
            .image_id
            .starts_with(&format!("{}/{REPOSITORY}@sha256:", registry.host)),
        "imageID {}",
        status.image_id
    );

    // The registry's own log: containerd resolved the tag at the registry with the Secret's
    // credentials, and the digest the node runs is the registry's.
    let manifest = format!("/v2/{REPOSITORY}/manifests/8.2.3");
    let digest = status.image_id.rsplit('@').next().unwrap();
    let served = registry.served_since(offset)?;
    assert!(
        served
            .iter()
            .any(|r| r.is_containerd_fetch_of(&manifest, REGISTRY_USER)),
        "the registry's log since the pod was created shows no request for {manifest} served \
         to {REGISTRY_USER} by containerd: {served:#?}"
    );
    assert_eq!(
        Some(digest.to_string()),
        registry.manifest_digest(REPOSITORY, "8.2.3")?,
        "the digest the node runs is not the registry's for {REPOSITORY}:8.2.3"
    );
    // The manifest and layers by digest are not checked: containerd fetches what its content
    // store lacks, and a real node keeps the content of an earlier pull (of this test, or of
    // operator/tests/real_node_registry.rs, whose pods may still be going away) after the
    // image is removed, while the registry's log starts again with each cluster.

    // It is the engine: it answers on its pod address.
    let ip = ready
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .unwrap();
    let mut stream = tokio::net::TcpStream::connect((ip.as_str(), 6379)).await?;
    stream.write_all(b"*1\r\n$4\r\nPING\r\n").await?;
    let mut reply = [0u8; 16];
    let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut reply)).await??;
    assert_eq!(&reply[..n], b"+PONG\r\n");
    ns.delete().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_pull_secret_is_refused_by_the_registry_and_the_pull_error_names_the_registry()
-> anyhow::Result<()> {
    let _one_at_a_time = REGISTRY_LOG.lock().await;
    let (client, _node) = ensure_real_node(&options()).await?;
    let registry = Registry::of_dev_cluster(&options()).await?;
    no_registry_image_on_the_nodes(&registry).await?;
    let ns = TestNamespace::create(&client, "registry-refused").await?;
    let secret =
        registry.pull_secret_with("wrong-registry-creds", REGISTRY_USER, "not-the-password");
    ns.api::<k8s_openapi::api::core::v1::Secret>()
        .create(&PostParams::default(), &secret)
        .await?;
    let image = registry.engine_image(OFFICIAL_IMAGE);
    let offset = registry.log_offset()?;
    let pods = ns.pods();
    pods.create(
        &PostParams::default(),
        &registry_pod("redis", &image, "wrong-registry-creds"),
    )
    .await?;
    let failing = wait_for_pod(
        &pods,
        "redis",
        Duration::from_secs(90),
        "failing to pull",
        |p| {
            p.status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|c| c.first()?.state.as_ref()?.waiting.as_ref()?.reason.clone())
                .is_some_and(|r| r == "ErrImagePull" || r == "ImagePullBackOff")
        },
    )
    .await?;
    let waiting = container_status(&failing, 0)
        .state
        .clone()
        .unwrap()
        .waiting
        .unwrap();
    let message = waiting.message.clone().unwrap_or_default();
    // The kubelet's message (containerd's error) names the image, so the registry host, and
    // says the registry refused the credentials.
    assert!(
        message.contains(&format!(
            "https://{}/v2/{REPOSITORY}/manifests/8.2.3",
            registry.host
        )) && message.contains("401 Unauthorized"),
        "{waiting:?}"
    );
    // The registry saw the attempt and refused it: 401 for the manifest, served to no one.
    let manifest = format!("/v2/{REPOSITORY}/manifests/8.2.3");
    let requests = registry.requests_since(offset)?;
    let attempts: Vec<_> = requests.iter().filter(|r| r.uri == manifest).collect();
    assert!(
        !attempts.is_empty()
            && attempts
                .iter()
                .all(|r| r.status == 401 && r.user_agent.starts_with("containerd/")),
        "the registry's access lines for {manifest} since the pod was created: {attempts:#?}"
    );
    let served = registry.served_since(offset)?;
    assert!(
        !served
            .iter()
            .any(|r| r.uri.starts_with(&format!("/v2/{REPOSITORY}/"))),
        "the registry served {REPOSITORY} with the wrong password: {served:#?}"
    );
    ns.delete().await
}
