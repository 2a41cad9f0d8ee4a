//! The capacity plan in a cluster: the operator measures a small sorted set on the dev
//! cluster's r7i nodes with `spec.capacity`, and the status carries each engine's projection
//! at the planned size and the smallest instance type that holds it, which `kubectl get` shows
//! in the `Fits on` column, with the costs of the prices in the ConfigMap the spec names. The
//! same arithmetic as `membench capacity` (tests/capacity.rs).

mod common;

use std::process::Command;
use std::time::Duration;

use common::operator::*;
use membench::crd::Phase;
use membench_devcluster::DevCluster;
use membench_devcluster::cluster::EnsureOptions;

const PLANNED: u64 = 2_000_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_carries_the_plan_and_kubectl_shows_the_instance_type_that_fits()
-> anyhow::Result<()> {
    let harness = Harness::start("op-capacity", settings()).await?;
    let body = TWO_ENGINES
        .replace(
            "sortedSet: {members: 20000, sampleEvery: 0}",
            "sortedSet: {members: 200000, sampleEvery: 5000}",
        )
        .replace("repetitions: 3", "repetitions: 1")
        + &format!(
            "  capacity: {{items: {PLANNED}, instanceFamilies: [r7i, r8g], pricesConfigMapRef: {{name: node-prices}}}}\n"
        );
    // The user's prices, in the benchmark's namespace (placeholder figures).
    let config_maps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(harness.client.clone(), harness.namespace.name());
    config_maps
        .create(
            &kube::api::PostParams::default(),
            &serde_json::from_value(serde_json::json!({
                "metadata": {"name": "node-prices"},
                "data": {"prices.csv": "# placeholder figures\nr7i.large,0.5\nr8g.large,0.25\n"},
            }))?,
        )
        .await?;
    anyhow::ensure!(body.contains("sampleEvery: 5000"), "{body}");
    harness.create(&spec("zcap", &body)).await?;
    let done = harness.finished("zcap", Duration::from_secs(300)).await?;
    let status = done.status.clone().unwrap();
    assert_eq!(status.phase, Some(Phase::Succeeded), "{status:#?}");
    let capacity = status.capacity.clone().expect("status.capacity");
    assert_eq!(capacity.items, PLANNED);
    assert_eq!(capacity.instance_families, ["r7i", "r8g"]);
    assert_eq!(capacity.engines.len(), 2, "{capacity:#?}");
    for (engine, measured) in capacity.engines.iter().zip(&status.engines) {
        let used = measured.repetitions[0].used_memory;
        // Ten times the members: more than five times the memory, at most about ten times
        // (the empty server's share does not grow).
        assert!(
            engine.projected_used_memory > used * 5 && engine.projected_used_memory < used * 11,
            "{}: projected {} from {used}",
            engine.name,
            engine.projected_used_memory
        );
        assert!(engine.projected_used_memory_low <= engine.projected_used_memory);
        assert!(engine.projected_used_memory <= engine.projected_used_memory_high);
        assert!(engine.required_node_memory > engine.projected_rss);
        // 2M members need well under 16 GiB: the smallest size of r7i, listed first.
        assert_eq!(engine.smallest_instance_type.as_deref(), Some("r7i.large"));
        assert_ne!(engine.growth_rule, "unknown", "{engine:?}");
    }
    assert_eq!(
        capacity.smallest_instance_type.as_deref(),
        Some("r7i.large")
    );
    // Both fit r8g.large too, priced lower: the cheapest is there, at 730 hours a month.
    assert_eq!(capacity.message, None, "{capacity:#?}");
    assert_eq!(
        capacity.cheapest_instance_type.as_deref(),
        Some("r8g.large")
    );
    assert_eq!(capacity.cheapest_monthly_usd, Some(0.25 * 730.0));
    let cheapest = capacity.cheapest_engine.clone().expect("a cheapest engine");
    assert!(capacity.engines.iter().any(|e| e.name == cheapest));
    for engine in &capacity.engines {
        // The smallest type listed first (r7i.large, 16 GiB like r8g.large) with its price.
        assert_eq!(engine.monthly_usd, Some(0.5 * 730.0), "{engine:?}");
    }

    let kubeconfig = DevCluster::kubeconfig_with(&EnsureOptions::default()).await?;
    let kubectl = membench_devcluster::tools::kubectl()?;
    let out = Command::new(kubectl)
        .args(["get", "mb", "zcap", "-n", harness.namespace.name()])
        .env("KUBECONFIG", &kubeconfig)
        .output()?;
    let table = String::from_utf8_lossy(&out.stdout);
    anyhow::ensure!(
        out.status.success(),
        "kubectl get: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines = table.lines();
    let header = lines.next().unwrap_or_default();
    let row = lines.next().unwrap_or_default();
    let column = header.find("FITS ON").expect("a Fits on column");
    assert!(
        row[column..].starts_with("r7i.large"),
        "kubectl get shows the instance type that fits:\n{table}"
    );
    harness.finish().await;
    Ok(())
}
