//! Faults the dev cluster injects for tests, seen from the API server: a node that a test adds
//! through the node agent's control directory registers Ready and runs pods; when it stops
//! reporting, the node lifecycle controller marks it unreachable, taints it and evicts its pods,
//! which no kubelet then confirms; removed, it is gone.

mod common;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::api::PostParams;
use kube::{Api, ResourceExt};
use membench_devcluster::faults::Faults;
use membench_devcluster::wait::{
    TestNamespace, is_running_and_ready, wait_for_pod, wait_for_pod_deleted,
};
use serde_json::json;

use common::{READY, cluster, redis_pod, require_dev_cluster};

/// Polls `node` until `check` holds, for at most `timeout`.
async fn wait_for_node(
    nodes: &Api<Node>,
    name: &str,
    timeout: Duration,
    what: &str,
    check: impl Fn(Option<&Node>) -> bool,
) -> anyhow::Result<Option<Node>> {
    let deadline = Instant::now() + timeout;
    loop {
        let node = nodes.get_opt(name).await?;
        if check(node.as_ref()) {
            return Ok(node);
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "node {name} not {what} within {timeout:?}: {:?}",
            node.and_then(|n| n.status).and_then(|s| s.conditions)
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn ready_status(node: &Node) -> Option<String> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.clone())
}

fn unreachable_no_execute(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|taints| {
            taints
                .iter()
                .any(|t| t.key == "node.kubernetes.io/unreachable" && t.effect == "NoExecute")
        })
}

#[tokio::test]
async fn a_node_added_runs_pods_and_once_silent_is_tainted_and_its_pods_evicted()
-> anyhow::Result<()> {
    require_dev_cluster("a_node_added_runs_pods_and_once_silent_is_tainted")?;
    let client = cluster().await?;
    let faults = Faults::of_dev_cluster().await?;
    let name = "faults-test-0";
    faults.add_node(name, "r8g.2xlarge")?;
    let nodes: Api<Node> = Api::all(client.clone());
    let result = async {
        let node = wait_for_node(&nodes, name, Duration::from_secs(30), "Ready", |n| {
            n.and_then(ready_status).as_deref() == Some("True")
        })
        .await?
        .unwrap();
        assert_eq!(node.labels()["node.kubernetes.io/instance-type"], "r8g.2xlarge");
        assert_eq!(node.labels()["kubernetes.io/arch"], "arm64");

        let ns = TestNamespace::create(&client, "faults-node").await?;
        let pods = ns.pods();
        // Evicted 1 s after the node turns unreachable.
        let pod = redis_pod(
            "on-late-node",
            json!({
                "nodeSelector": {"kubernetes.io/hostname": name},
                "tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 1}]
            }),
        );
        pods.create(&PostParams::default(), &pod).await?;
        wait_for_pod(&pods, "on-late-node", READY, "ready", is_running_and_ready).await?;
        // The same pod on a node that keeps reporting, deleted when the silent one is evicted:
        // its node confirms, so it goes, and shows what the silent node's pod would have done.
        let control = redis_pod(
            "on-live-node",
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": [name]}
                ]}]
            }}}}),
        );
        pods.create(&PostParams::default(), &control).await?;
        let control = wait_for_pod(&pods, "on-live-node", READY, "ready", is_running_and_ready).await?;

        faults.silence_node(name)?;
        let silenced = Instant::now();
        wait_for_node(&nodes, name, Duration::from_secs(60), "unreachable", |n| {
            n.is_some_and(|n| ready_status(n).as_deref() == Some("Unknown") && unreachable_no_execute(n))
        })
        .await?;
        eprintln!("unreachable and tainted {} s after it went silent", silenced.elapsed().as_secs());
        // Evicted, and nobody confirms it stopped: it stays, being deleted.
        let evicted = wait_for_pod(&pods, "on-late-node", Duration::from_secs(60), "evicted", |p| {
            p.metadata.deletion_timestamp.is_some()
        })
        .await?;
        let disruption = evicted
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "DisruptionTarget");
        assert_eq!(
            disruption.and_then(|c| c.reason).as_deref(),
            Some("DeletionByTaintManager")
        );
        pods.delete("on-live-node", &kube::api::DeleteParams::default())
            .await?;
        wait_for_pod_deleted(&pods, &control, Duration::from_secs(30)).await?;
        // And past the end of its grace period, when a kubelet would have removed it.
        let grace_ends = evicted.metadata.deletion_timestamp.clone().unwrap().0;
        let now_ms = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64)
        };
        while now_ms() <= grace_ends.as_millisecond() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert!(
            pods.get_opt("on-late-node").await?.is_some(),
            "a silent node's pod disappeared: something acted for its kubelet"
        );
        pods.delete(
            "on-late-node",
            &kube::api::DeleteParams {
                grace_period_seconds: Some(0),
                ..Default::default()
            },
        )
        .await?;
        ns.delete().await
    }
    .await;
    faults.resume_node(name)?;
    faults.remove_node(name)?;
    wait_for_node(&nodes, name, Duration::from_secs(30), "removed", |n| {
        n.is_none()
    })
    .await?;
    result
}
