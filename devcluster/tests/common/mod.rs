//! Shared by the dev cluster's own tests: the cluster (started through `hack/dev-cluster.sh up`
//! with the node agent built for these tests), pods that meet the Pod Security Standard
//! `restricted` every test namespace enforces, and reading what a pod left.
#![allow(dead_code)]

use std::time::Duration;

use k8s_openapi::api::core::v1::{ContainerStateTerminated, ContainerStatus, Pod};
use kube::{Api, Client};
use membench_devcluster::pod_security::make_restricted;
use membench_devcluster::wait::{is_finished, is_running_and_ready, wait_for_pod};
use membench_devcluster::{DevCluster, EnsureOptions};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub const SCHEDULED: Duration = Duration::from_secs(30);
pub const READY: Duration = Duration::from_secs(60);

/// The uid and gid of the official redis and valkey images' user.
pub const ENGINE_USER: i64 = 999;

pub async fn cluster() -> anyhow::Result<Client> {
    DevCluster::ensure_with(&EnsureOptions {
        node_agent_bin: Some(env!("CARGO_BIN_EXE_membench-node-agent").into()),
        ..EnsureOptions::default()
    })
    .await
}

/// Fails the test, naming what is missing, when it runs against a cluster other than the dev
/// cluster (`MEMBENCH_TEST_KUBECONFIG` set): what it tests is the dev cluster's node agent, which
/// no other cluster has, so passing there would claim what was never run.
pub fn require_dev_cluster(test: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        DevCluster::is_dev_cluster(),
        "{test}: needs the dev cluster's node agent, which the cluster MEMBENCH_TEST_KUBECONFIG \
         names does not run; unset MEMBENCH_TEST_KUBECONFIG to run it on the dev cluster"
    );
    Ok(())
}

/// A pod from JSON, given the restricted security contexts (running as the engine images'
/// user) wherever it sets none of its own. A pod that chooses no node runs on the amd64 nodes:
/// the arm64 nodes run arm64 builds under qemu-user, which only the tests about arm64 want
/// (and the store has arm64 builds of a few versions only).
pub fn pod(value: serde_json::Value) -> Pod {
    let mut pod: Pod = serde_json::from_value(value).expect("a valid pod");
    make_restricted(&mut pod, ENGINE_USER);
    let spec = pod.spec.as_mut().expect("a pod has a spec");
    if spec.node_selector.is_none() && spec.node_name.is_none() && spec.affinity.is_none() {
        spec.node_selector = Some([("kubernetes.io/arch".to_string(), "amd64".to_string())].into());
    }
    pod
}

/// A Redis pod that stays up: persistence off, readiness by `redis-cli ping`.
pub fn redis_pod(name: &str, extra_spec: serde_json::Value) -> Pod {
    let mut spec = json!({
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 5,
        "containers": [{
            "name": "redis",
            "image": "redis:7.0.15",
            "args": ["--port", "6379", "--save", "", "--appendonly", "no"],
            "readinessProbe": {"exec": {"command": ["redis-cli", "ping"]}, "periodSeconds": 1},
        }],
    });
    for (k, v) in extra_spec.as_object().into_iter().flatten() {
        spec[k] = v.clone();
    }
    pod(json!({"metadata": {"name": name, "labels": {"app": name}}, "spec": spec}))
}

/// A shell container running `script` (through the redis image, whose `command` replaces the
/// entrypoint), with `extra` merged into it.
pub fn shell_container(name: &str, script: &str, extra: serde_json::Value) -> serde_json::Value {
    let mut container = json!({
        "name": name,
        "image": "redis:7.0.15",
        "command": ["sh", "-c", script],
    });
    for (k, v) in extra.as_object().into_iter().flatten() {
        container[k] = v.clone();
    }
    container
}

/// A pod running a shell command on this machine.
pub fn shell_pod(name: &str, script: &str, container_extra: serde_json::Value) -> Pod {
    pod(json!({
        "metadata": {"name": name},
        "spec": {"restartPolicy": "Never", "containers": [shell_container("main", script, container_extra)]},
    }))
}

/// Sends PING in the Redis protocol and returns the reply line.
pub async fn redis_ping(address: &str, port: u16) -> anyhow::Result<String> {
    let mut stream = TcpStream::connect((address, port)).await?;
    stream.write_all(b"*1\r\n$4\r\nPING\r\n").await?;
    let mut reply = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut reply)).await??;
    Ok(String::from_utf8_lossy(&reply[..n]).trim_end().to_string())
}

pub fn pod_ip(pod: &Pod) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .expect("a running pod has an IP")
}

/// How the pod's first container ended.
pub fn terminated(pod: &Pod) -> ContainerStateTerminated {
    terminated_container(pod, 0)
}

/// How the pod's `index`th container ended.
pub fn terminated_container(pod: &Pod, index: usize) -> ContainerStateTerminated {
    container_status(pod, index)
        .state
        .as_ref()
        .unwrap()
        .terminated
        .clone()
        .unwrap_or_else(|| panic!("container {index} terminated: {:#?}", pod.status))
}

/// The status of the pod's `index`th container.
pub fn container_status(pod: &Pod, index: usize) -> &ContainerStatus {
    &pod.status
        .as_ref()
        .unwrap()
        .container_statuses
        .as_ref()
        .unwrap()[index]
}

/// The message of the pod's first container's waiting state (empty without one).
pub fn waiting_message(pod: &Pod) -> String {
    container_status(pod, 0)
        .state
        .clone()
        .unwrap()
        .waiting
        .unwrap()
        .message
        .unwrap_or_default()
}

/// The process id of a container the node agent runs: its containerID is
/// `local-process://<pid>`.
pub fn local_pid(status: &ContainerStatus) -> &str {
    status
        .container_id
        .as_deref()
        .and_then(|id| id.strip_prefix("local-process://"))
        .expect("a local process")
}

/// Waits (up to [`READY`]) until the pod is running and ready.
pub async fn wait_ready(pods: &Api<Pod>, name: &str) -> anyhow::Result<Pod> {
    wait_for_pod(pods, name, READY, "running and ready", is_running_and_ready).await
}

/// Waits (up to [`READY`]) until the pod has finished (Succeeded or Failed).
pub async fn wait_finished(pods: &Api<Pod>, name: &str) -> anyhow::Result<Pod> {
    wait_for_pod(pods, name, READY, "finished", is_finished).await
}
