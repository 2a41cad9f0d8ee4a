//! Reads what the cluster's nodes of a benchmark's instance types give pods
//! (`status.allocatable`), for [`crate::controller::decide::pod_fit`], while none of its pods exists yet. An
//! operator that may not list nodes (a namespaced install has no ClusterRole) or an API error
//! leaves the instance-type table to stand in: the check is a courtesy before the scheduler,
//! which has the last word either way.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use tracing::debug;

use crate::controller::build::pods::INSTANCE_TYPE_LABEL;
use crate::controller::decide::pod_fit::{NodeAllocatable, parse_cpu_quantity};
use crate::crd::MemoryBenchmark;
use crate::validation::parse_memory_quantity;

/// The nodes of the benchmark's instance types, when no pod of it was created yet (empty
/// otherwise: the fit check does not run then).
pub async fn read_before_first_pod(
    client: &Client,
    benchmark: &MemoryBenchmark,
    pods: &[Pod],
) -> Vec<NodeAllocatable> {
    let status = benchmark.status.clone().unwrap_or_default();
    let started = !pods.is_empty() || status.engines.iter().any(|e| e.started_at.is_some());
    let types: Vec<String> = benchmark
        .spec
        .instance_types()
        .into_iter()
        .filter(|t| !t.is_empty())
        .collect();
    if started || types.is_empty() {
        return Vec::new();
    }
    let selector = format!("{INSTANCE_TYPE_LABEL} in ({})", types.join(","));
    match Api::<Node>::all(client.clone())
        .list(&ListParams::default().labels(&selector))
        .await
    {
        Ok(list) => list.items.iter().filter_map(allocatable).collect(),
        Err(e) => {
            debug!(error = %e, "cannot list nodes; the instance-type table stands in for the fit check");
            Vec::new()
        }
    }
}

/// A node's instance type and allocatable CPU and memory, when it reports them.
pub fn allocatable(node: &Node) -> Option<NodeAllocatable> {
    let amounts = node.status.as_ref()?.allocatable.as_ref()?;
    Some(NodeAllocatable {
        node: node.name_any(),
        instance_type: node.labels().get(INSTANCE_TYPE_LABEL)?.clone(),
        cpu_millis: parse_cpu_quantity(&amounts.get("cpu")?.0)?,
        memory_bytes: parse_memory_quantity(&amounts.get("memory")?.0)?,
    })
}
