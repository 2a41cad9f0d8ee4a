//! The operator as the chart deploys it, for real, on the dev cluster: `helm template` output
//! applied with kubectl, the Deployment's pod (run by the node agent as the freshly built
//! membench binary, with the in-cluster service-account credentials the kubelet would give it)
//! becomes ready, runs a two-engine benchmark to Succeeded, and a real Prometheus scraping the
//! pod's metrics port sees the results.
//!
//! The chart is rendered with `rbac.scope=namespace` into a test namespace of its own, so this
//! operator acts only there, beside whatever other operators run on the shared dev cluster. Its
//! metrics listen on the pod's own address (`--metrics-addr=$(POD_IP):8080`) rather than the
//! chart's `0.0.0.0`, which on the node agent's shared network would take port 8080 for every
//! pod on the machine.
//!
//! With `replicaCount: 2`, both replicas are ready, the Lease names one as the leader, and when
//! its pod is deleted the standby takes over and runs the benchmark.
//!
//! Needs the dev cluster (the node agent, the engine store's Redis 7.0.15 and Valkey 9.1.2), the
//! dev cluster's helm and kubectl (`hack/build-tools.sh`) and `prometheus`.

mod observability;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, LogParams};
use kube::{Api, ResourceExt};
use membench::crd::{MemoryBenchmark, Phase};
use membench_devcluster::wait::{TestNamespace, is_running_and_ready};
use membench_devcluster::{DevCluster, EnsureOptions};

use observability::prometheus::{Prometheus, series_with_data};
use observability::{find_binary, helm, repo_root, run_until_finished};

const RELEASE: &str = "membench";

/// Values for the dev cluster: an image the node agent maps to the built membench binary, a
/// namespaced operator, and metrics on the pod address.
const VALUES: &str = r#"
image:
  repository: ghcr.io/membench/membench
  tag: dev
rbac:
  scope: namespace
logFormat: text
extraEnv:
  - name: POD_IP
    valueFrom:
      fieldRef:
        fieldPath: status.podIP
extraArgs:
  - --metrics-addr=$(POD_IP):8080
# The amd64 nodes: the dev cluster's arm64 nodes run the image's arm64 half under qemu-user,
# which is not what this test is about.
nodeSelector:
  kubernetes.io/arch: amd64
"#;

const BENCHMARK: &str = "
apiVersion: membench.io/v1alpha1
kind: MemoryBenchmark
metadata:
  name: two-engines
spec:
  instanceType: r7i.4xlarge
  engines:
    - engine: redis
      version: 7.0.15
    - engine: valkey
      version: 9.1.2
  workload:
    sortedSet:
      members: 50000
      sampleEvery: 0
  repetitions: 2
  timeoutSeconds: 600
";

fn run(command: &mut Command) -> String {
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{command:?} failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// The chart, rendered with VALUES (and `extra` helm arguments) into namespace `ns` and applied
/// for real (the CRD is already installed on the dev cluster; `helm template` leaves the
/// chart's crds/ out). `scratch` names the temporary directory of the rendered files.
fn apply_chart(
    helm: &Path,
    kubectl: &Path,
    kubeconfig: &Path,
    ns: &str,
    scratch: &str,
    extra: &[&str],
) -> std::io::Result<()> {
    let scratch = std::env::temp_dir().join(format!("membench-{scratch}-{ns}"));
    std::fs::create_dir_all(&scratch)?;
    let values = scratch.join("values.yaml");
    std::fs::write(&values, VALUES)?;
    let rendered = run(Command::new(helm)
        .args(["template", RELEASE])
        .arg(repo_root().join("charts/membench"))
        .args(["--namespace", ns])
        .args(extra)
        .arg("--values")
        .arg(&values));
    let manifest = scratch.join("rendered.yaml");
    std::fs::write(&manifest, &rendered)?;
    run(Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["apply", "--server-side", "-f"])
        .arg(&manifest));
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(())
}

/// The operator's pod, once it is Running and ready (its `/readyz` probe passes).
async fn ready_operator_pod(pods: &Api<Pod>, timeout: Duration) -> anyhow::Result<Pod> {
    let selector = format!(
        "app.kubernetes.io/name=membench,app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component=operator"
    );
    let deadline = Instant::now() + timeout;
    loop {
        let listed = pods.list(&ListParams::default().labels(&selector)).await?;
        if let Some(pod) = listed.items.iter().find(|p| is_running_and_ready(p)) {
            return Ok(pod.clone());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the operator pod was not ready within {timeout:?}: {:#?}",
            listed.items.iter().map(|p| &p.status).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The end of the operator container's log (`kubectl logs`, served by the node agent).
async fn operator_log(pods: &Api<Pod>, pod: &Pod) -> String {
    let params = LogParams {
        tail_lines: Some(40),
        ..LogParams::default()
    };
    pods.logs(&pod.name_any(), &params)
        .await
        .unwrap_or_else(|e| format!("(no log: {e})"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_charts_operator_runs_a_benchmark_on_the_dev_cluster_and_prometheus_scrapes_it()
-> anyhow::Result<()> {
    anyhow::ensure!(
        DevCluster::is_dev_cluster(),
        "the chart's image runs only on the dev cluster's node agent (unset MEMBENCH_TEST_KUBECONFIG)"
    );
    let kubectl = membench_devcluster::tools::kubectl()?;
    let Some(helm) = helm() else {
        observability::missing("no helm (hack/build-tools.sh helm)");
    };
    let Some(prometheus_bin) = find_binary(
        "MEMBENCH_PROMETHEUS",
        "prometheus",
        &["/usr/bin/prometheus"],
    ) else {
        observability::missing("no prometheus binary (Debian package `prometheus`)");
    };
    let started = Instant::now();
    let client = DevCluster::ensure().await?;
    let kubeconfig = DevCluster::kubeconfig_with(&EnsureOptions::default()).await?;
    let namespace = TestNamespace::create(&client, "chart-operator").await?;
    let ns = namespace.name().to_string();

    apply_chart(&helm, &kubectl, &kubeconfig, &ns, "chart-operator", &[])?;

    let pods = namespace.pods();
    let operator = ready_operator_pod(&pods, Duration::from_secs(90)).await?;
    let pod_ip = operator
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .expect("a ready pod has an address");
    println!(
        "operator pod {} ready at {pod_ip} after {:?}",
        operator.name_any(),
        started.elapsed()
    );

    let prometheus = Prometheus::start(&prometheus_bin, &format!("{pod_ip}:8080"));
    prometheus.wait_ready().await;

    let benchmarks: Api<MemoryBenchmark> = namespace.api();
    let done = match run_until_finished(&benchmarks, BENCHMARK, Duration::from_secs(300)).await {
        Ok(done) => done,
        Err(e) => anyhow::bail!(
            "{e:#}\noperator log:\n{}",
            operator_log(&pods, &operator).await
        ),
    };
    let status = done.status.clone().unwrap();
    assert_eq!(
        status.phase,
        Some(Phase::Succeeded),
        "{status:#?}\noperator log:\n{}",
        operator_log(&pods, &operator).await
    );
    let engines: Vec<&str> = status.engines.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(engines.len(), 2, "{status:#?}");
    for engine in &status.engines {
        let summary = engine
            .summary
            .as_ref()
            .unwrap_or_else(|| panic!("{}: no summary in {status:#?}", engine.name));
        assert!(
            summary.bytes_per_item.median > 0.0,
            "{}: {summary:?}",
            engine.name
        );
    }
    // This operator, and no other one on the shared cluster, ran it.
    let log = pods
        .logs(&operator.name_any(), &LogParams::default())
        .await?;
    assert!(
        log.contains("two-engines"),
        "the chart's operator never mentions the benchmark:\n{log}"
    );
    println!(
        "benchmark Succeeded after {:?}: {engines:?}",
        started.elapsed()
    );

    // Prometheus, scraping the pod, has both engines' results.
    let expr = "membench_memory_per_item_median_bytes{benchmark=\"two-engines\"}";
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let series = series_with_data(&prometheus.query(expr).await);
        if series.len() == 2 {
            for (labels, values) in &series {
                assert_eq!(labels.get("namespace"), Some(&ns), "{labels:?}");
                let engine = &status.engines.iter().find(|e| {
                    labels.get("entry") == Some(&e.name)
                        || labels.get("engine").is_some_and(|n| e.name.starts_with(n))
                });
                assert!(engine.is_some(), "{labels:?} is no engine of {engines:?}");
                assert!(values[0] > 0.0, "{labels:?}: {values:?}");
            }
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{expr}: {} series after 60 s ({series:?})\nPrometheus log:\n{}",
            series.len(),
            prometheus.log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    println!(
        "Prometheus scraped {pod_ip}:8080: both engines' results after {:?}",
        started.elapsed()
    );

    drop(prometheus);
    namespace.delete().await?;
    Ok(())
}

/// The chart's pods that are Running and ready.
async fn ready_operator_pods(pods: &Api<Pod>) -> anyhow::Result<Vec<Pod>> {
    let selector = format!(
        "app.kubernetes.io/name=membench,app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component=operator"
    );
    Ok(pods
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .into_iter()
        .filter(|p| is_running_and_ready(p) && p.metadata.deletion_timestamp.is_none())
        .collect())
}

async fn lease_holder(leases: &Api<Lease>) -> anyhow::Result<Option<String>> {
    Ok(leases
        .get_opt(RELEASE)
        .await?
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_chart_replicas_elect_one_leader_and_the_standby_takes_over_when_it_goes()
-> anyhow::Result<()> {
    anyhow::ensure!(
        DevCluster::is_dev_cluster(),
        "the chart's image runs only on the dev cluster's node agent (unset MEMBENCH_TEST_KUBECONFIG)"
    );
    let kubectl = membench_devcluster::tools::kubectl()?;
    let Some(helm) = helm() else {
        observability::missing("no helm (hack/build-tools.sh helm)");
    };
    let client = DevCluster::ensure().await?;
    let kubeconfig = DevCluster::kubeconfig_with(&EnsureOptions::default()).await?;
    let namespace = TestNamespace::create(&client, "chart-standby").await?;
    let ns = namespace.name().to_string();
    apply_chart(
        &helm,
        &kubectl,
        &kubeconfig,
        &ns,
        "chart-standby",
        &["--set", "replicaCount=2"],
    )?;

    // Both replicas are ready, leader and standby alike; the Lease names one of them.
    let pods = namespace.pods();
    let leases: Api<Lease> = namespace.api();
    let deadline = Instant::now() + Duration::from_secs(120);
    let (replicas, leader) = loop {
        let ready = ready_operator_pods(&pods).await?;
        let holder = lease_holder(&leases).await?;
        if ready.len() == 2
            && let Some(holder) = holder
        {
            break (ready, holder);
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "two ready replicas and a leader not within 120 s: {} ready, holder {holder:?}",
            ready.len()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let names: Vec<String> = replicas.iter().map(|p| p.name_any()).collect();
    assert!(names.contains(&leader), "{leader} is none of {names:?}");

    // The leader's pod is deleted (a node drain, a rolling update): it releases the Lease as it
    // stops, and the standby takes over.
    let gone = Instant::now();
    pods.delete(&leader, &Default::default()).await?;
    let standby = loop {
        if let Some(holder) = lease_holder(&leases).await?
            && holder != leader
        {
            break holder;
        }
        anyhow::ensure!(
            gone.elapsed() < Duration::from_secs(15),
            "the standby did not take the Lease within 15 s"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    // The standby, or the replica the Deployment started in place of the deleted one: whichever
    // tried first once the Lease was released.
    let selector =
        format!("app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component=operator");
    let now: Vec<String> = pods
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .iter()
        .map(|p| p.name_any())
        .collect();
    assert!(now.contains(&standby), "{standby} is none of {now:?}");
    println!(
        "{standby} took over {} ms after {leader} was deleted",
        gone.elapsed().as_millis()
    );

    let benchmarks: Api<MemoryBenchmark> = namespace.api();
    let done = run_until_finished(&benchmarks, BENCHMARK, Duration::from_secs(300)).await?;
    let status = done.status.clone().unwrap();
    assert_eq!(status.phase, Some(Phase::Succeeded), "{status:#?}");
    assert!(status.engines.iter().all(|e| e.client_attempts == 1));
    namespace.delete().await?;
    Ok(())
}
