//! The chart's operator-wide settings for benchmark pods, rendered by the real `helm template`
//! (as `chart_helm.rs` renders the rest): what docs/src/getting-started/cluster.md tells a platform team to set
//! reaches the operator as its flags, the operator takes them, and the chart's default
//! tolerations tolerate the taint docs/src/getting-started/cluster.md's eksctl and Karpenter examples give the
//! benchmark nodes, so the unedited `manifests/examples/quick.yaml` schedules there.

mod observability;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use membench::controller::build::engine_registry::EngineRegistry;
use membench::controller::build::pod_defaults::{parse_node_selector, parse_tolerations};
use membench::controller::build::pods::{PodSettings, engine_pod};
use membench::validation::spec_file::parse_specs;
use observability::{helm, repo_root};

fn helm_or_fail() -> PathBuf {
    helm().unwrap_or_else(|| {
        observability::missing("no helm (run hack/build-tools.sh helm, or set MEMBENCH_HELM)")
    })
}

/// The operator container's arguments as `helm template` renders them with `values` files.
fn operator_args(helm: &Path, values: &[&Path]) -> Vec<String> {
    let mut command = Command::new(helm);
    command
        .args(["template", "membench"])
        .arg(repo_root().join("charts/membench"))
        .args(["--namespace", "membench-system"]);
    for file in values {
        command.arg("-f").arg(file);
    }
    let output = command.output().expect("helm runs");
    assert!(
        output.status.success(),
        "helm template failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let documents: Vec<Value> =
        serde_saphyr::from_str_multiple(&String::from_utf8(output.stdout).unwrap()).unwrap();
    let deployment = documents
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("a Deployment");
    deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    let prefix = format!("--{name}=");
    args.iter().find_map(|a| a.strip_prefix(&prefix))
}

/// The fenced ```yaml blocks of docs/src/getting-started/cluster.md.
fn cluster_page_yaml_blocks() -> Vec<String> {
    let text =
        std::fs::read_to_string(repo_root().join("docs/src/getting-started/cluster.md")).unwrap();
    text.split("```yaml\n")
        .skip(1)
        .map(|rest| rest.split("\n```").next().unwrap().to_string())
        .collect()
}

/// The taints docs/src/getting-started/cluster.md's eksctl node group and Karpenter NodePool give benchmark nodes.
fn documented_taints() -> Vec<Value> {
    let mut taints = Vec::new();
    for block in cluster_page_yaml_blocks() {
        let doc: Value = match serde_saphyr::from_str(&block) {
            Ok(doc) => doc,
            Err(_) => continue,
        };
        if doc["kind"] == "ClusterConfig" {
            for group in doc["managedNodeGroups"].as_array().unwrap() {
                taints.extend(group["taints"].as_array().cloned().unwrap_or_default());
            }
        }
        if doc["kind"] == "NodePool" {
            taints.extend(
                doc["spec"]["template"]["spec"]["taints"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default(),
            );
        }
    }
    taints
}

/// Whether a pod's toleration tolerates a node's taint, as the scheduler decides it.
fn tolerates(toleration: &k8s_openapi::api::core::v1::Toleration, taint: &Value) -> bool {
    let key = toleration.key.as_deref().unwrap_or_default();
    let exists = toleration.operator.as_deref() == Some("Exists");
    let effect = toleration.effect.as_deref().unwrap_or_default();
    (key == taint["key"] || (key.is_empty() && exists))
        && (effect.is_empty() || effect == taint["effect"])
        && (exists || toleration.value.as_deref().unwrap_or_default() == taint["value"])
}

/// The operator's pod settings from its rendered flags, parsed by the operator's own parsers.
fn settings_from(args: &[String]) -> PodSettings {
    PodSettings {
        tolerations: parse_tolerations(flag(args, "benchmark-tolerations").unwrap_or(""), false)
            .expect("the operator takes the chart's tolerations"),
        node_selector: parse_node_selector(
            &flag(args, "benchmark-node-selector")
                .unwrap_or("")
                .split(',')
                .map(String::from)
                .collect::<Vec<_>>(),
        )
        .expect("the operator takes the chart's node selector"),
        engine_registry: flag(args, "engine-registry").map(|r| {
            EngineRegistry::parse(r).expect("the operator takes the chart's engineRegistry")
        }),
        ..Default::default()
    }
}

#[test]
fn the_charts_default_tolerations_let_the_unedited_quick_examples_onto_the_documented_taint() {
    let helm = helm_or_fail();
    let args = operator_args(&helm, &[]);
    let settings = settings_from(&args);
    let taints = documented_taints();
    assert_eq!(
        taints.len(),
        2,
        "docs/src/getting-started/cluster.md's eksctl and Karpenter examples each taint the benchmark nodes: {taints:?}"
    );
    let quick = std::fs::read_to_string(repo_root().join("manifests/examples/quick.yaml")).unwrap();
    let benchmarks = parse_specs(&quick).unwrap();
    assert!(!benchmarks.is_empty());
    for mut benchmark in benchmarks {
        benchmark.metadata.namespace = Some("default".into());
        let name = benchmark.metadata.name.clone().unwrap();
        let pod = engine_pod(&benchmark, 0, 1 << 30, None, &settings);
        let tolerations = pod.spec.unwrap().tolerations.unwrap_or_default();
        for taint in &taints {
            assert!(
                tolerations.iter().any(|t| tolerates(t, taint)),
                "{name}'s engine pod does not tolerate {taint} with the chart's defaults ({args:?})"
            );
        }
    }
    // Defaults name no pool label and no mirror: a cluster without them runs as before.
    assert_eq!(flag(&args, "benchmark-node-selector"), None);
    assert_eq!(flag(&args, "engine-registry"), None);
}

#[test]
fn cluster_pages_values_reach_the_operator_as_its_flags_and_the_operator_takes_them() {
    let helm = helm_or_fail();
    let block = cluster_page_yaml_blocks()
        .into_iter()
        .find(|b| b.starts_with("# membench-values.yaml"))
        .expect("docs/src/getting-started/cluster.md has a ```yaml block starting with # membench-values.yaml");
    let dir = std::env::temp_dir().join(format!("membench-chart-values-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let values = dir.join("membench-values.yaml");
    std::fs::write(&values, &block).unwrap();
    let args = operator_args(&helm, &[&values]);
    let documented: Value = serde_saphyr::from_str(&block).unwrap();

    let tolerations: Value = serde_json::from_str(
        flag(&args, "benchmark-tolerations").expect("--benchmark-tolerations"),
    )
    .unwrap();
    assert_eq!(tolerations, documented["benchmarkPods"]["tolerations"]);
    assert_eq!(
        flag(&args, "benchmark-node-selector"),
        Some("membench.io/pool=benchmarks")
    );
    assert_eq!(
        flag(&args, "engine-registry"),
        documented["engineRegistry"].as_str()
    );
    let settings = settings_from(&args);
    assert_eq!(settings.node_selector["membench.io/pool"], "benchmarks");
    for taint in documented_taints() {
        assert!(
            settings
                .tolerations
                .iter()
                .any(|t| tolerates(&t.into(), &taint)),
            "install.md's values do not tolerate {taint}"
        );
    }

    // The membench binary itself accepts the rendered flags: it gets past them to the point
    // where it needs a cluster (exit 1, not the usage error's 2).
    let output = Command::new(env!("CARGO_BIN_EXE_membench"))
        .args(&args)
        .env("KUBECONFIG", dir.join("no-kubeconfig"))
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{args:?}: {err}");
    assert!(
        !err.contains("--benchmark-") && !err.contains("--engine-registry"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
