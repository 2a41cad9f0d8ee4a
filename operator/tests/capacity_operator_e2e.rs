//! The capacity plan in a cluster: the operator measures a small sorted set on the dev
//! cluster's r7i nodes with `spec.capacity`, and the status carries each engine's projection
//! at the planned size and the smallest instance type that holds it, which `kubectl get` shows
//! in the `Fits on` column (with `instanceType`, and with `instanceTypes`), with the costs of
//! the prices in the ConfigMap the spec names. That ConfigMap is created only after the
//! benchmark finished without prices, and changed after that: the operator's watch of
//! ConfigMaps brings both into the finished benchmark's status, from its saved results. The
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
    anyhow::ensure!(body.contains("sampleEvery: 5000"), "{body}");
    harness.create(&spec("zcap", &body)).await?;
    // The same engines with instanceTypes (one type here: the dev cluster's other pool is
    // arm64 under emulation), whose printer column reads the same status field.
    let several = body.replace("instanceType: r7i.4xlarge", "instanceTypes: [r7i.4xlarge]");
    anyhow::ensure!(several.contains("instanceTypes:"), "{several}");
    harness.create(&spec("zcap-types", &several)).await?;
    let done = harness.finished("zcap", Duration::from_secs(300)).await?;
    let status = done.status.clone().unwrap();
    assert_eq!(status.phase, Some(Phase::Succeeded), "{status:#?}");
    // No ConfigMap yet: the plan without prices, and the message says what to create.
    let unpriced = status.capacity.clone().expect("status.capacity");
    assert_eq!(unpriced.cheapest_monthly_usd, None, "{unpriced:#?}");
    let message = unpriced.message.clone().unwrap_or_default();
    assert!(
        message.contains("no prices: no ConfigMap") && message.contains("node-prices"),
        "{message}"
    );

    // The user's prices, in the benchmark's namespace (placeholder figures), created after the
    // benchmark finished: the watch reconciles it, and the costs come from the saved results.
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
    let priced = harness
        .wait_for("zcap", Duration::from_secs(30), "priced", |b| {
            b.status
                .as_ref()
                .and_then(|s| s.capacity.as_ref())
                .is_some_and(|c| c.cheapest_monthly_usd.is_some())
        })
        .await?;
    let status = priced.status.clone().unwrap();
    // Nothing measured again: the same results, the same finish.
    assert_eq!(status.engines, done.status.as_ref().unwrap().engines);
    assert_eq!(
        status.finished_at,
        done.status.as_ref().unwrap().finished_at
    );
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
    // Both engines land on r8g.large at the same price: a tie, and no engine is named the
    // cheapest.
    assert_eq!(capacity.cheapest_engine, None, "{capacity:#?}");
    let mut tie = capacity.cheapest_tie.clone();
    tie.sort();
    let mut expected: Vec<String> = capacity
        .engines
        .iter()
        .map(|e| format!("{} on r8g.large", e.name))
        .collect();
    expected.sort();
    assert_eq!(tie, expected, "{capacity:#?}");
    for engine in &capacity.engines {
        // The smallest type listed first (r7i.large, 16 GiB like r8g.large) with its price.
        assert_eq!(engine.monthly_usd, Some(0.5 * 730.0), "{engine:?}");
    }

    // A price changed later reaches the finished benchmark too.
    config_maps
        .patch(
            "node-prices",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({
                "data": {"prices.csv": "r7i.large,0.5\nr8g.large,0.125\n"},
            })),
        )
        .await?;
    harness
        .wait_for("zcap", Duration::from_secs(30), "repriced", |b| {
            b.status
                .as_ref()
                .and_then(|s| s.capacity.as_ref())
                .is_some_and(|c| c.cheapest_monthly_usd == Some(0.125 * 730.0))
        })
        .await?;

    let several = harness
        .finished("zcap-types", Duration::from_secs(300))
        .await?;
    let status = several.status.clone().unwrap();
    assert_eq!(status.phase, Some(Phase::Succeeded), "{status:#?}");
    let capacity = status.capacity.clone().expect("status.capacity");
    assert_eq!(
        capacity.smallest_instance_type.as_deref(),
        Some("r7i.large"),
        "{capacity:#?}"
    );

    // kubectl get shows the type that fits, and the instance types measured on, for both.
    for name in ["zcap", "zcap-types"] {
        let table = kubectl_get(harness.namespace.name(), name).await?;
        assert_eq!(
            column(&table, "FITS ON").as_deref(),
            Some("r7i.large"),
            "kubectl get shows the instance type that fits:\n{table}"
        );
        assert_eq!(
            column(&table, "INSTANCE TYPE").as_deref(),
            Some("r7i.4xlarge"),
            "kubectl get shows the instance type measured on:\n{table}"
        );
    }
    harness.finish().await;
    Ok(())
}

/// `kubectl get mb NAME`'s table.
async fn kubectl_get(namespace: &str, name: &str) -> anyhow::Result<String> {
    let kubeconfig = DevCluster::kubeconfig_with(&EnsureOptions::default()).await?;
    let kubectl = membench_devcluster::tools::kubectl()?;
    let out = Command::new(kubectl)
        .args(["get", "mb", name, "-n", namespace])
        .env("KUBECONFIG", &kubeconfig)
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "kubectl get: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The value under `header` in the first row of a `kubectl get` table (columns are aligned
/// at their headers' starts); `None` when the header is missing or the cell is empty.
fn column(table: &str, header: &str) -> Option<String> {
    let mut lines = table.lines();
    let head = lines.next()?;
    let row = lines.next()?;
    let start = head.find(header)?;
    let cell = row.get(start..)?.split_whitespace().next()?;
    // An empty cell leaves the next column's value under this header.
    let next_start = head[start + header.len()..]
        .find(|c: char| !c.is_whitespace())
        .map(|i| start + header.len() + i);
    let cell_start = start + row[start..].find(cell)?;
    if next_start.is_some_and(|n| cell_start >= n) {
        return None;
    }
    Some(cell.to_string())
}
