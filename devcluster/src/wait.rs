//! Test helpers: a namespace per test (so tests run in parallel), and waiting for a pod to
//! reach a condition, with the pod's last status in the error when it does not.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::core::v1::{Event, Namespace, Node, Pod, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, Client, ResourceExt};

use crate::pod_security;

/// A short random-enough suffix for names (time, process and a counter).
pub fn unique_suffix() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut x = nanos
        ^ (u64::from(std::process::id()) << 32)
        ^ COUNTER
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    // A few rounds of xorshift so consecutive calls look unrelated.
    for _ in 0..3 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    let alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789";
    (0..6)
        .map(|i| alphabet[((x >> (i * 6)) % 36) as usize] as char)
        .collect()
}

/// A namespace of its own for one test.
pub struct TestNamespace {
    client: Client,
    name: String,
}

impl TestNamespace {
    /// Creates `<prefix>-<suffix>` labelled `membench.io/test=true` and enforcing the Pod
    /// Security Standard `restricted` (so the API server refuses a pod a platform team's
    /// cluster would refuse), and waits for its `default` service account (pods cannot be
    /// created before the controller manager made it).
    pub async fn create(client: &Client, prefix: &str) -> anyhow::Result<TestNamespace> {
        let name = format!("{prefix}-{}", unique_suffix());
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let labels = [
            ("membench.io/test", "true"),
            (pod_security::ENFORCE_LABEL, pod_security::RESTRICTED),
        ];
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some(
                    labels
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
            ..Default::default()
        };
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .with_context(|| format!("creating namespace {name}"))?;
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &name);
        let found = tokio::time::timeout(
            Duration::from_secs(60),
            await_condition(accounts, "default", |sa: Option<&ServiceAccount>| {
                sa.is_some()
            }),
        )
        .await;
        anyhow::ensure!(
            matches!(found, Ok(Ok(_))),
            "namespace {name}: no default service account after 60s"
        );
        Ok(TestNamespace {
            client: client.clone(),
            name,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The namespace's pods.
    pub fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.name)
    }

    /// Any namespaced resource in this namespace.
    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.name)
    }

    /// Deletes the namespace (and so everything in it), without waiting.
    pub async fn delete(self) -> anyhow::Result<()> {
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        namespaces
            .delete(&self.name, &DeleteParams::default())
            .await?;
        Ok(())
    }
}

/// Waits until `condition` holds for the pod, up to `timeout`; the error names `what` and shows
/// the pod's last status.
pub async fn wait_for_pod(
    pods: &Api<Pod>,
    name: &str,
    timeout: Duration,
    what: &str,
    condition: impl Fn(&Pod) -> bool,
) -> anyhow::Result<Pod> {
    let cond = move |pod: Option<&Pod>| pod.is_some_and(&condition);
    match tokio::time::timeout(timeout, await_condition(pods.clone(), name, cond)).await {
        Ok(Ok(Some(pod))) => Ok(pod),
        Ok(Ok(None)) => anyhow::bail!("pod {name} disappeared while waiting until {what}"),
        Ok(Err(e)) => Err(e).with_context(|| format!("watching pod {name}")),
        Err(_) => {
            let (status, node) = match pods.get_opt(name).await {
                Ok(Some(pod)) => (
                    serde_json::to_string_pretty(&pod.status).unwrap_or_default(),
                    pod.spec.and_then(|s| s.node_name),
                ),
                Ok(None) => ("pod not found".to_string(), None),
                Err(e) => (format!("cannot read the pod: {e}"), None),
            };
            let node = describe_node(pods, node.as_deref()).await;
            let events = pod_events(pods, name).await;
            anyhow::bail!(
                "pod {name} not {what} after {timeout:?}; {node}; its events: {events}; last \
                 status: {status}"
            )
        }
    }
}

/// The node a pod is bound to, whether it still exists and what its Ready condition says: a
/// pod that waits with nothing written about it was bound to a node nobody runs.
async fn describe_node(pods: &Api<Pod>, node: Option<&str>) -> String {
    let Some(node) = node else {
        return "bound to no node".to_string();
    };
    let nodes: Api<Node> = Api::all(pods.clone().into_client());
    match nodes.get_opt(node).await {
        Ok(Some(n)) => {
            let ready = n
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .into_iter()
                .find(|c| c.type_ == "Ready")
                .map(|c| {
                    format!(
                        "Ready={} since {:?} ({})",
                        c.status,
                        c.last_transition_time.map(|t| t.0.to_string()),
                        c.message.unwrap_or_default()
                    )
                })
                .unwrap_or_else(|| "no Ready condition".to_string());
            format!("bound to node {node}: {ready}")
        }
        Ok(None) => format!("bound to node {node}, which no longer exists"),
        Err(e) => format!("bound to node {node} (cannot read it: {e})"),
    }
}

/// The pod's events, oldest first, one line each (reason: message).
async fn pod_events(pods: &Api<Pod>, name: &str) -> String {
    let Some(namespace) = pods.namespace() else {
        return "(no namespace)".to_string();
    };
    let events: Api<Event> = Api::namespaced(pods.clone().into_client(), namespace);
    let params = ListParams::default().fields(&format!("involvedObject.name={name}"));
    match events.list(&params).await {
        Ok(list) if list.items.is_empty() => "none".to_string(),
        Ok(list) => list
            .items
            .iter()
            .map(|e| {
                format!(
                    "{}: {}",
                    e.reason.as_deref().unwrap_or("-"),
                    e.message.as_deref().unwrap_or("")
                )
            })
            .collect::<Vec<_>>()
            .join(" | "),
        Err(e) => format!("(cannot list them: {e})"),
    }
}

/// Waits until the pod with this UID is gone.
pub async fn wait_for_pod_deleted(
    pods: &Api<Pod>,
    pod: &Pod,
    timeout: Duration,
) -> anyhow::Result<()> {
    let name = pod.name_any();
    let uid = pod.uid().unwrap_or_default();
    match tokio::time::timeout(
        timeout,
        await_condition(pods.clone(), &name, conditions::is_deleted(&uid)),
    )
    .await
    {
        Ok(result) => result
            .map(|_| ())
            .with_context(|| format!("watching pod {name}")),
        Err(_) => {
            let left = pods.get_opt(&name).await.ok().flatten();
            anyhow::bail!(
                "pod {name} still exists after {timeout:?}; deletionTimestamp {:?}, status {}",
                left.as_ref()
                    .and_then(|p| p.metadata.deletion_timestamp.clone()),
                left.map(|p| serde_json::to_string_pretty(&p.status).unwrap_or_default())
                    .unwrap_or_default()
            )
        }
    }
}

/// The node a pod is bound to.
pub fn node_name(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref()?.node_name.as_deref()
}

/// The pod has been scheduled onto a node.
pub fn is_scheduled(pod: &Pod) -> bool {
    node_name(pod).is_some()
}

/// The pod is Running and its Ready condition is True.
pub fn is_running_and_ready(pod: &Pod) -> bool {
    let Some(status) = &pod.status else {
        return false;
    };
    status.phase.as_deref() == Some("Running")
        && status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// The pod reached Succeeded or Failed.
pub fn is_finished(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// The first container's waiting reason, if it is waiting.
pub fn waiting_reason(pod: &Pod) -> Option<&str> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .first()?
        .state
        .as_ref()?
        .waiting
        .as_ref()?
        .reason
        .as_deref()
}
