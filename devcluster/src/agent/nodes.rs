//! The fake nodes: what they look like (labelled as a cloud labels its instances), registering
//! them, and keeping them Ready with heartbeats, as a kubelet does.
//!
//! Every fake node is this machine: its pods run here and its `InternalIP` is 127.0.0.1. The
//! node lifecycle controller marks a node NotReady, taints it and evicts its pods when neither
//! its Lease in `kube-node-lease` nor its Ready condition's heartbeat is renewed within the
//! grace period (20 s on the dev cluster, `hack/dev-cluster.sh`; 50 s by default), so the Lease
//! is renewed every 4 s. A node that a test silences ([`super::control`]) is left out of the
//! heartbeat, and goes NotReady within that grace period.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{
    DaemonEndpoint, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints, NodeSpec, NodeStatus,
    NodeSystemInfo,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};

/// The label that marks the node agent's nodes (and selects them).
pub const FAKE_NODE_LABEL: &str = "membench.io/fake-node";
/// The field manager of everything the agent writes.
pub const FIELD_MANAGER: &str = "membench-node-agent";
/// The address of every fake node: they are all this machine.
pub const NODE_IP: &str = "127.0.0.1";

const LEASE_DURATION_SECONDS: i32 = 20;
const LEASE_RENEW_INTERVAL: Duration = Duration::from_secs(4);
const STATUS_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(20);

/// An instance type the agent can impersonate.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceType {
    pub name: &'static str,
    pub arch: &'static str,
    pub cpus: u32,
    pub memory_gib: u32,
}

/// The instance types the dev cluster knows. r8g: Graviton4 (arm64); r7i: Intel (amd64).
pub const INSTANCE_TYPES: &[InstanceType] = &[
    InstanceType {
        name: "r8g.4xlarge",
        arch: "arm64",
        cpus: 16,
        memory_gib: 128,
    },
    InstanceType {
        name: "r8g.2xlarge",
        arch: "arm64",
        cpus: 8,
        memory_gib: 64,
    },
    InstanceType {
        name: "r8g.8xlarge",
        arch: "arm64",
        cpus: 32,
        memory_gib: 256,
    },
    InstanceType {
        name: "r7i.4xlarge",
        arch: "amd64",
        cpus: 16,
        memory_gib: 128,
    },
    // The dev cluster's real nodes' pool (hack/dev-cluster.sh, `r7i.xlarge=1:kubelet`): a
    // type no test of the agent's nodes asks for, so those never land on a real node.
    InstanceType {
        name: "r7i.xlarge",
        arch: "amd64",
        cpus: 4,
        memory_gib: 32,
    },
    InstanceType {
        name: "r7i.2xlarge",
        arch: "amd64",
        cpus: 8,
        memory_gib: 64,
    },
    InstanceType {
        name: "r7i.8xlarge",
        arch: "amd64",
        cpus: 32,
        memory_gib: 256,
    },
];

/// Zones the nodes of a pool are spread over, in turn.
pub const ZONES: &[&str] = &["us-east-1a", "us-east-1b", "us-east-1c"];
const REGION: &str = "us-east-1";
const MAX_PODS: u32 = 110;

/// What the agent reports about itself on every node: where its kubelet endpoint listens
/// and the version it claims (the API server's, so version-skew checks pass).
#[derive(Debug, Clone, PartialEq)]
pub struct AgentInfo {
    pub kubelet_port: i32,
    pub kubelet_version: String,
}

/// One fake node to register.
#[derive(Debug, Clone, PartialEq)]
pub struct FakeNode {
    pub name: String,
    pub instance: InstanceType,
    pub zone: &'static str,
    /// Position among all fake nodes; picks the node's range of pod addresses.
    pub index: u8,
}

/// Parses `r8g.4xlarge=2,r7i.4xlarge=2` into nodes named `r8g-4xlarge-0`, `r8g-4xlarge-1`, ...
pub fn parse_node_pools(spec: &str) -> anyhow::Result<Vec<FakeNode>> {
    let mut nodes = Vec::new();
    for pool in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, count) = pool.split_once('=').unwrap_or((pool, "1"));
        let instance = INSTANCE_TYPES
            .iter()
            .find(|t| t.name == name)
            .with_context(|| {
                let known: Vec<&str> = INSTANCE_TYPES.iter().map(|t| t.name).collect();
                format!(
                    "unknown instance type {name:?} (known: {})",
                    known.join(", ")
                )
            })?;
        let count: usize = count
            .parse()
            .with_context(|| format!("bad node count in {pool:?}"))?;
        for i in 0..count {
            let index = u8::try_from(nodes.len()).context("at most 255 fake nodes")?;
            nodes.push(FakeNode {
                name: format!("{}-{i}", name.replace('.', "-")),
                instance: instance.clone(),
                zone: ZONES[i % ZONES.len()],
                index,
            });
        }
    }
    anyhow::ensure!(!nodes.is_empty(), "no fake nodes in {spec:?}");
    Ok(nodes)
}

/// Deletes a node the agent no longer runs (a test removed it). Already gone is fine.
pub async fn deregister(client: &Client, name: &str) -> anyhow::Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    match api.delete(name, &Default::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e).with_context(|| format!("deleting node {name}")),
    }
}

fn quantity(s: impl Into<String>) -> Quantity {
    Quantity(s.into())
}

impl FakeNode {
    fn labels(&self) -> BTreeMap<String, String> {
        [
            ("kubernetes.io/hostname", self.name.as_str()),
            ("kubernetes.io/os", "linux"),
            ("kubernetes.io/arch", self.instance.arch),
            ("beta.kubernetes.io/os", "linux"),
            ("beta.kubernetes.io/arch", self.instance.arch),
            ("node.kubernetes.io/instance-type", self.instance.name),
            ("beta.kubernetes.io/instance-type", self.instance.name),
            ("topology.kubernetes.io/zone", self.zone),
            ("topology.kubernetes.io/region", REGION),
            (FAKE_NODE_LABEL, "true"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    /// Capacity, and allocatable after the reservations EKS makes: kube-reserved memory of
    /// 255Mi + 11Mi per pod plus a 100Mi eviction threshold, and kube-reserved CPU of 6% of the
    /// first core, 1% of the second, 0.5% of the next two and 0.25% of the rest.
    fn resources(&self) -> (BTreeMap<String, Quantity>, BTreeMap<String, Quantity>) {
        let memory_mib = u64::from(self.instance.memory_gib) * 1024;
        let reserved_mib = 255 + 11 * u64::from(MAX_PODS) + 100;
        let cpus = u64::from(self.instance.cpus);
        let reserved_millicpu = 60 + 10 + 10 + (cpus.saturating_sub(4) * 10) / 4;
        let capacity: BTreeMap<String, Quantity> = [
            ("cpu", quantity(cpus.to_string())),
            (
                "memory",
                quantity(format!("{}Gi", self.instance.memory_gib)),
            ),
            ("pods", quantity(MAX_PODS.to_string())),
            ("ephemeral-storage", quantity("100Gi")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let allocatable: BTreeMap<String, Quantity> = [
            (
                "cpu",
                quantity(format!("{}m", cpus * 1000 - reserved_millicpu)),
            ),
            (
                "memory",
                quantity(format!("{}Mi", memory_mib - reserved_mib)),
            ),
            ("pods", quantity(MAX_PODS.to_string())),
            ("ephemeral-storage", quantity("95Gi")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        (capacity, allocatable)
    }

    /// The node object as registered (labels, spec), without status.
    pub fn object(&self) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                labels: Some(self.labels()),
                annotations: Some(
                    [(
                        "membench.io/note".to_string(),
                        "fake node: its pods run as local processes of membench-node-agent"
                            .to_string(),
                    )]
                    .into(),
                ),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                provider_id: Some(format!("membench-fake:///{}/{}", self.zone, self.name)),
                ..Default::default()
            }),
            status: None,
        }
    }

    /// The node's status, with `now` as the heartbeat of its conditions.
    pub fn status(&self, agent: &AgentInfo, now: Timestamp, ready_since: Timestamp) -> NodeStatus {
        let (capacity, allocatable) = self.resources();
        let cond = |type_: &str, status: &str, reason: &str, message: &str| NodeCondition {
            type_: type_.into(),
            status: status.into(),
            reason: Some(reason.into()),
            message: Some(message.into()),
            last_heartbeat_time: Some(Time(now)),
            last_transition_time: Some(Time(ready_since)),
        };
        NodeStatus {
            capacity: Some(capacity),
            allocatable: Some(allocatable),
            conditions: Some(vec![
                cond(
                    "MemoryPressure",
                    "False",
                    "KubeletHasSufficientMemory",
                    "kubelet has sufficient memory available",
                ),
                cond(
                    "DiskPressure",
                    "False",
                    "KubeletHasNoDiskPressure",
                    "kubelet has no disk pressure",
                ),
                cond(
                    "PIDPressure",
                    "False",
                    "KubeletHasSufficientPID",
                    "kubelet has sufficient PID available",
                ),
                cond(
                    "Ready",
                    "True",
                    "KubeletReady",
                    "membench-node-agent is posting ready status",
                ),
            ]),
            addresses: Some(vec![
                NodeAddress {
                    type_: "InternalIP".into(),
                    address: NODE_IP.into(),
                },
                NodeAddress {
                    type_: "Hostname".into(),
                    address: self.name.clone(),
                },
            ]),
            daemon_endpoints: Some(NodeDaemonEndpoints {
                kubelet_endpoint: Some(DaemonEndpoint {
                    port: agent.kubelet_port,
                }),
            }),
            node_info: Some(NodeSystemInfo {
                architecture: self.instance.arch.into(),
                operating_system: "linux".into(),
                os_image: "membench dev cluster (local processes)".into(),
                kernel_version: kernel_version(),
                kubelet_version: agent.kubelet_version.clone(),
                kube_proxy_version: String::new(),
                container_runtime_version: concat!(
                    "membench-node-agent://",
                    env!("CARGO_PKG_VERSION")
                )
                .into(),
                machine_id: self.name.clone(),
                system_uuid: self.name.clone(),
                boot_id: self.name.clone(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }
}

fn kernel_version() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Creates the node if missing, or brings its labels up to date.
pub async fn register(client: &Client, node: &FakeNode, agent: &AgentInfo) -> anyhow::Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    let object = node.object();
    match api
        .create(
            &PostParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..Default::default()
            },
            &object,
        )
        .await
    {
        Ok(_) => tracing::info!(node = %node.name, "registered node"),
        Err(kube::Error::Api(e)) if e.code == 409 => {
            api.patch(
                &node.name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&object),
            )
            .await
            .with_context(|| format!("updating node {}", node.name))?;
            tracing::info!(node = %node.name, "node already registered; labels updated");
        }
        Err(e) => return Err(e).with_context(|| format!("creating node {}", node.name)),
    }
    let now = Timestamp::now();
    post_status(&api, node, agent, now, now).await
}

async fn post_status(
    api: &Api<Node>,
    node: &FakeNode,
    agent: &AgentInfo,
    now: Timestamp,
    ready_since: Timestamp,
) -> anyhow::Result<()> {
    let status = node.status(agent, now, ready_since);
    api.patch_status(
        &node.name,
        &PatchParams::default(),
        &Patch::Strategic(serde_json::json!({ "status": status })),
    )
    .await
    .with_context(|| format!("posting status of node {}", node.name))?;
    Ok(())
}

/// Renews the node's Lease, creating it (owned by the node, as the kubelet does) if missing.
async fn renew_lease(client: &Client, node: &FakeNode) -> anyhow::Result<()> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let nodes: Api<Node> = Api::all(client.clone());
    let now = MicroTime(Timestamp::now());
    if leases.get_opt(&node.name).await?.is_some() {
        let patch =
            serde_json::json!({ "spec": { "renewTime": now, "holderIdentity": node.name } });
        leases
            .patch(&node.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        return Ok(());
    }
    let owner = nodes.get(&node.name).await?;
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some(node.name.clone()),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Node".into(),
                name: node.name.clone(),
                uid: owner.uid().unwrap_or_default(),
                ..Default::default()
            }]),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(node.name.clone()),
            lease_duration_seconds: Some(LEASE_DURATION_SECONDS),
            renew_time: Some(now),
            ..Default::default()
        }),
    };
    leases.create(&PostParams::default(), &lease).await?;
    Ok(())
}

/// Keeps the reporting nodes Ready: renews their Leases every 4 s and their Ready heartbeat
/// every 20 s. The list is read at each tick, so nodes that appear, go or fall silent take
/// effect at once. Errors are logged and retried at the next tick (an API server restart must
/// not end it).
/// The nodes the heartbeat keeps Ready. The agent takes a node off this list before it deletes
/// the Node, under the same lock as [`beat_status`] holds, so a heartbeat never registers again
/// a node the agent has just removed.
pub type Reporting = std::sync::Arc<tokio::sync::Mutex<Vec<FakeNode>>>;

pub async fn heartbeat(client: Client, reporting: Reporting, agent: AgentInfo) {
    let api: Api<Node> = Api::all(client.clone());
    let ready_since = Timestamp::now();
    let mut lease_tick = tokio::time::interval(LEASE_RENEW_INTERVAL);
    let mut status_tick = tokio::time::interval(STATUS_HEARTBEAT_INTERVAL);
    loop {
        tokio::select! {
            _ = lease_tick.tick() => {
                let current = reporting.lock().await.clone();
                for node in &current {
                    if let Err(e) = renew_lease(&client, node).await {
                        tracing::warn!(node = %node.name, error = %format!("{e:#}"), "renewing lease failed");
                    }
                }
            }
            _ = status_tick.tick() => {
                let names: Vec<String> =
                    reporting.lock().await.iter().map(|n| n.name.clone()).collect();
                for name in names {
                    if let Err(e) = beat_status(&api, &reporting, &name, &agent, ready_since).await {
                        tracing::warn!(node = %name, error = %format!("{e:#}"), "node heartbeat failed");
                    }
                }
            }
        }
    }
}

/// Posts the status of the node `name` if it still reports, registering it again if someone
/// deleted it (`kubectl delete node`); returns whether it did. The list is read under its lock,
/// held across the calls: a node the agent removed after the tick began is left alone. (With a
/// copy of the list taken at the tick, a node deleted meanwhile came back as a Ready node nobody
/// runs pods on; the scheduler bound pods to it and they waited, never started.)
pub async fn beat_status(
    api: &Api<Node>,
    reporting: &Reporting,
    name: &str,
    agent: &AgentInfo,
    ready_since: Timestamp,
) -> anyhow::Result<bool> {
    let current = reporting.lock().await;
    let Some(node) = current.iter().find(|n| n.name == name) else {
        return Ok(false);
    };
    match api.get_opt(&node.name).await? {
        Some(_) => post_status(api, node, agent, Timestamp::now(), ready_since).await?,
        None => register(&api.clone().into_client(), node, agent).await?,
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An API client whose every call fails at once (nothing listens on port 9 of loopback), so
    /// a call made at all shows as an error.
    fn unreachable_api() -> Api<Node> {
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        Api::all(Client::try_from(config).unwrap())
    }

    #[tokio::test]
    async fn a_heartbeat_leaves_alone_a_node_removed_after_its_tick_began() {
        let nodes = parse_node_pools("r7i.2xlarge=2").unwrap();
        let reporting: Reporting = std::sync::Arc::new(tokio::sync::Mutex::new(nodes.clone()));
        let agent = AgentInfo {
            kubelet_port: 10250,
            kubelet_version: "v1.37.2".into(),
        };
        let api = unreachable_api();
        // The tick's names were read; then the agent removes the first node, as it does before
        // deleting its Node object.
        let names: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
        reporting.lock().await.retain(|n| n.name != names[0]);
        let removed = beat_status(&api, &reporting, &names[0], &agent, Timestamp::now()).await;
        assert!(
            matches!(removed, Ok(false)),
            "the removed node was looked up or registered again: {removed:?}"
        );
        // A node still on the list is heartbeaten (here the unreachable server refuses it).
        let kept = beat_status(&api, &reporting, &names[1], &agent, Timestamp::now()).await;
        assert!(
            kept.is_err(),
            "the reporting node got no heartbeat: {kept:?}"
        );
    }

    #[test]
    fn pools_expand_into_named_nodes_across_zones() {
        let nodes = parse_node_pools("r8g.4xlarge=2,r7i.4xlarge=2").unwrap();
        let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "r8g-4xlarge-0",
                "r8g-4xlarge-1",
                "r7i-4xlarge-0",
                "r7i-4xlarge-1"
            ]
        );
        assert_eq!(nodes[0].zone, "us-east-1a");
        assert_eq!(nodes[1].zone, "us-east-1b");
        assert_eq!(nodes[3].index, 3);
        assert_eq!(nodes[0].instance.arch, "arm64");
        assert_eq!(nodes[2].instance.arch, "amd64");
    }

    #[test]
    fn unknown_instance_types_are_refused() {
        assert!(parse_node_pools("m5.large=1").is_err());
    }

    #[test]
    fn nodes_carry_cloud_labels_and_eks_like_allocatable() {
        let node = &parse_node_pools("r8g.4xlarge=1").unwrap()[0];
        let labels = node.labels();
        assert_eq!(labels["node.kubernetes.io/instance-type"], "r8g.4xlarge");
        assert_eq!(labels["kubernetes.io/arch"], "arm64");
        assert_eq!(labels["kubernetes.io/hostname"], "r8g-4xlarge-0");
        assert_eq!(labels["topology.kubernetes.io/zone"], "us-east-1a");
        let (capacity, allocatable) = node.resources();
        assert_eq!(capacity["cpu"].0, "16");
        assert_eq!(capacity["memory"].0, "128Gi");
        assert_eq!(capacity["pods"].0, "110");
        assert_eq!(allocatable["cpu"].0, "15890m");
        assert_eq!(allocatable["memory"].0, "129507Mi");
    }
}
