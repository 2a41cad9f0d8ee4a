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
use membench_devcluster::real_nodes::{REAL_NODE_INSTANCE_TYPE, REAL_NODE_LABEL, ensure_real_node};
use membench_devcluster::registry::{REGISTRY_USER, Registry};
use membench_devcluster::wait::{TestNamespace, is_running_and_ready, wait_for_pod};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The smallest engine image the registry holds that every engine store has.
const OFFICIAL_IMAGE: &str = "redis:8.2.3";
/// Its repository in the registry.
const REPOSITORY: &str = "library/redis";

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
            "tolerations": [{"key": REAL_NODE_LABEL, "operator": "Equal", "value": "true", "effect": "NoSchedule"}],
            "imagePullSecrets": [{"name": pull_secret}],
            "containers": [{
                "name": "engine",
                "image": image,
                "imagePullPolicy": "Always",
                "args": ["--port", "6379", "--save", "", "--appendonly", "no"],
                "readinessProbe": {"tcpSocket": {"port": 6379}, "periodSeconds": 1},
            }],
        },
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_node_pulls_an_image_only_the_registry_has_with_the_pods_pull_secret()
-> anyhow::Result<()> {
    let (client, node) = ensure_real_node(&options()).await?;
    let registry = Registry::of_dev_cluster(&options()).await?;
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

    // The registry's own log: containerd resolved the tag with the Secret's credentials
    // (HEAD, then GET by digest) ...
    let manifest = format!("/v2/{REPOSITORY}/manifests/8.2.3");
    let digest = status.image_id.rsplit('@').next().unwrap();
    let served = registry.served_since(offset)?;
    let by_node = |uri: &str| {
        served.iter().any(|r| {
            r.uri == uri
                && r.status == 200
                && r.user == REGISTRY_USER
                && r.user_agent.starts_with("containerd/")
        })
    };
    assert!(
        by_node(&manifest),
        "the registry's log since the pod was created shows no request for {manifest} served \
         to {REGISTRY_USER} by containerd: {served:#?}"
    );
    // ... and the manifest's digest is the one the node reports.
    assert!(
        served
            .iter()
            .any(|r| r.uri == format!("/v2/{REPOSITORY}/manifests/{digest}") && r.status == 200),
        "the node never fetched the manifest {digest} it runs: {served:#?}"
    );
    // Its layers, which no node has under any digest (skopeo gzipped them on the push; the
    // nodes' preloaded images have them uncompressed), were served to containerd: on this
    // node's first pull of them (a later run of this test finds them in its content store).
    let blobs = format!("/v2/{REPOSITORY}/blobs/sha256:");
    let layers: Vec<_> = registry
        .served_since(0)?
        .into_iter()
        .filter(|r| {
            r.method == "GET"
                && r.uri.starts_with(&blobs)
                && r.status == 200
                && r.user_agent.starts_with("containerd/")
        })
        .collect();
    assert!(
        !layers.is_empty(),
        "the registry never served a blob of {REPOSITORY} to containerd"
    );

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
    let (client, _node) = ensure_real_node(&options()).await?;
    let registry = Registry::of_dev_cluster(&options()).await?;
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
