//! The operator's defaults for every benchmark pod on a real node of the dev cluster: the real
//! node pool is tainted (`membench.io/benchmark=true:NoSchedule`) as docs/src/getting-started/cluster.md's
//! benchmark pools are, and labelled (`membench.io/real-node=true`), and a spec that says
//! nothing about placement runs there because the operator gives its pods the pool's
//! toleration and label (`--benchmark-tolerations`, `--benchmark-node-selector`). The pods as
//! the API server stored them carry those and the autoscaler annotations.
//!
//! It needs the real node: when it cannot start the test fails, naming what is missing.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::operator::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::runtime::watcher::{self, Event};
use membench::controller::build::pod_defaults::{parse_node_selector, parse_tolerations};
use membench::crd::Phase;
use membench_devcluster::EnsureOptions;
use membench_devcluster::real_nodes::{REAL_NODE_LABEL, REAL_NODE_TAINT_KEY, ensure_real_node};

/// No `placement`: the unedited kind of spec a user applies.
const UNPLACED: &str = "  instanceType: r7i.xlarge\n  engines:\n    - {engine: valkey, version: \"9.1.2\"}\n  workload: {strings: {keys: 2000}}\n  repetitions: 1\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_without_placement_runs_on_the_tainted_pool_through_the_operators_defaults()
-> anyhow::Result<()> {
    let (_, node) = ensure_real_node(&EnsureOptions::default()).await?;
    let mut settings = real_node_settings();
    settings.pods.tolerations = parse_tolerations(
        &format!(
            r#"[{{"key":"{REAL_NODE_TAINT_KEY}","operator":"Equal","value":"true","effect":"NoSchedule"}}]"#
        ),
        false,
    )
    .map_err(anyhow::Error::msg)?;
    settings.pods.node_selector =
        parse_node_selector(&[format!("{REAL_NODE_LABEL}=true")]).map_err(anyhow::Error::msg)?;
    let harness = Harness::start("pool-defaults", settings).await?;

    // Every pod as the API server last showed it, before the operator deletes it.
    let stored: Arc<Mutex<BTreeMap<String, Pod>>> = Arc::default();
    let seen = stored.clone();
    let pods = harness.pods();
    let watch = tokio::spawn(async move {
        let mut events = std::pin::pin!(watcher::watcher(pods, watcher::Config::default()));
        while let Some(event) = events.next().await {
            if let Ok(Event::Apply(pod) | Event::InitApply(pod)) = event {
                seen.lock().unwrap().insert(pod.name_any(), pod);
            }
        }
    });
    harness.create(&spec("pool", UNPLACED)).await?;
    let done = harness.finished("pool", Duration::from_secs(300)).await?;
    watch.abort();
    let status = done.status.clone().unwrap_or_default();
    assert_eq!(status.phase, Some(Phase::Succeeded), "{status:#?}");
    assert_eq!(
        status.engines[0].node_name.as_deref(),
        Some(node.name_any().as_str())
    );

    let stored = std::mem::take(&mut *stored.lock().unwrap());
    for name in ["pool-0-engine", "pool-0-client"] {
        let pod = stored
            .get(name)
            .unwrap_or_else(|| panic!("the API server never showed {name}: {:?}", stored.keys()));
        let spec = pod.spec.clone().unwrap();
        assert_eq!(
            spec.node_name.as_deref(),
            Some(node.name_any().as_str()),
            "{name}"
        );
        assert_eq!(
            spec.node_selector
                .unwrap_or_default()
                .get(REAL_NODE_LABEL)
                .map(String::as_str),
            Some("true"),
            "{name}"
        );
        assert!(
            spec.tolerations.unwrap_or_default().iter().any(|t| {
                t.key.as_deref() == Some(REAL_NODE_TAINT_KEY)
                    && t.value.as_deref() == Some("true")
                    && t.effect.as_deref() == Some("NoSchedule")
            }),
            "{name} does not tolerate the pool's taint"
        );
        let annotations = pod.annotations();
        assert_eq!(
            annotations
                .get("karpenter.sh/do-not-disrupt")
                .map(String::as_str),
            Some("true"),
            "{name}"
        );
        assert_eq!(
            annotations
                .get("cluster-autoscaler.kubernetes.io/safe-to-evict")
                .map(String::as_str),
            Some("false"),
            "{name}"
        );
    }
    harness.finish().await;
    Ok(())
}
