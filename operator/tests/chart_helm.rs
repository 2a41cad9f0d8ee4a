//! The Helm chart in `charts/membench/`, checked by the real `helm` (built from the Go module
//! `helm.sh/helm/v3` by `hack/build-tools.sh helm`): lint, render, and the generated copies
//! (CRD, dashboards, `manifests/install.yaml`) against their sources.
//!
//! `MEMBENCH_HELM` points at another helm binary. Without any helm the helm tests fail naming
//! it; the copy checks that need no helm always run.

mod observability;

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use observability::{helm, repo_root};

macro_rules! helm_or_fail {
    () => {
        match helm() {
            Some(helm) => helm,
            None => {
                observability::missing(
                    "no helm (run hack/build-tools.sh helm, or set MEMBENCH_HELM)",
                );
            }
        }
    };
}

fn run(command: &mut Command) -> String {
    let output = command.output().expect("command starts");
    assert!(
        output.status.success(),
        "{command:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// `helm template` of the chart with some `--set`s, as parsed documents.
fn render(helm: &PathBuf, sets: &[&str]) -> Vec<Value> {
    let mut command = Command::new(helm);
    command
        .args(["template", "membench"])
        .arg(repo_root().join("charts/membench"))
        .args(["--namespace", "membench-system"]);
    for set in sets {
        command.args(["--set", set]);
    }
    let text = run(&mut command);
    let documents: Vec<Value> = serde_saphyr::from_str_multiple(&text).expect("helm renders YAML");
    documents.into_iter().filter(|d| !d.is_null()).collect()
}

fn find<'a>(documents: &'a [Value], kind: &str) -> Vec<&'a Value> {
    documents.iter().filter(|d| d["kind"] == kind).collect()
}

/// The objects of a kind other than the leader-election Role and its binding,
/// which every scope has in the release namespace.
fn find_for_benchmarks<'a>(documents: &'a [Value], kind: &str) -> Vec<&'a Value> {
    find(documents, kind)
        .into_iter()
        .filter(|d| {
            !d["metadata"]["name"]
                .as_str()
                .unwrap_or("")
                .ends_with("-leader-election")
        })
        .collect()
}

/// What the operator's Deployment sets `MEMBENCH_WATCH_NAMESPACE` to.
fn watched_namespaces(documents: &[Value]) -> String {
    let container = &one(documents, "Deployment")["spec"]["template"]["spec"]["containers"][0];
    container["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "MEMBENCH_WATCH_NAMESPACE")
        .and_then(|e| e["value"].as_str())
        .expect("MEMBENCH_WATCH_NAMESPACE in the operator's env")
        .to_string()
}

/// The leader-election Role's rules, and nothing else.
fn lease_rules() -> Vec<(String, String, Vec<String>)> {
    vec![(
        "coordination.k8s.io".into(),
        "leases".into(),
        verbs(&["get", "create", "update"]),
    )]
}

fn one<'a>(documents: &'a [Value], kind: &str) -> &'a Value {
    let found = find(documents, kind);
    assert_eq!(found.len(), 1, "expected one {kind}, found {}", found.len());
    found[0]
}

/// `(apiGroup, resource) -> verbs` of a role's rules.
fn rules(role: &Value) -> Vec<(String, String, Vec<String>)> {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect()
    };
    let mut all = Vec::new();
    for rule in role["rules"].as_array().unwrap() {
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                all.push((group.clone(), resource, strings(&rule["verbs"])));
            }
        }
    }
    all.sort();
    all
}

fn verbs(list: &[&str]) -> Vec<String> {
    list.iter().map(|v| v.to_string()).collect()
}

#[test]
fn helm_lint_passes_with_defaults_and_with_every_option_on() {
    let helm = helm_or_fail!();
    let chart = repo_root().join("charts/membench");
    run(Command::new(&helm).arg("lint").arg("--strict").arg(&chart));
    run(Command::new(&helm)
        .arg("lint")
        .arg("--strict")
        .arg(&chart)
        .args([
            "--set",
            "rbac.scope=namespace",
            "--set",
            "serviceMonitor.enabled=true",
            "--set",
            "networkPolicy.enabled=true",
            "--set",
            "createNamespace=true",
        ]));
    // The PodMonitor instead of the ServiceMonitor (never both).
    run(Command::new(&helm)
        .arg("lint")
        .arg("--strict")
        .arg(&chart)
        .args(["--set", "podMonitor.enabled=true"]));
}

#[test]
fn the_chart_copies_of_the_crd_and_dashboards_equal_their_sources() {
    let root = repo_root();
    assert_eq!(
        std::fs::read_to_string(root.join("charts/membench/crds/memorybenchmark.yaml")).unwrap(),
        membench::crd_yaml(),
        "charts/membench/crds is stale: run hack/render-manifests.sh"
    );
    let names = |dir: &str| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(root.join(dir))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".json"))
            .collect();
        names.sort();
        names
    };
    assert_eq!(names("dashboards"), names("charts/membench/dashboards"));
    for name in names("dashboards") {
        assert_eq!(
            std::fs::read(root.join("dashboards").join(&name)).unwrap(),
            std::fs::read(root.join("charts/membench/dashboards").join(&name)).unwrap(),
            "charts/membench/dashboards/{name} is stale: run hack/render-manifests.sh"
        );
    }
}

#[test]
fn install_yaml_is_what_the_chart_renders_today() {
    let helm = helm_or_fail!();
    let output = Command::new(repo_root().join("hack/render-manifests.sh"))
        .arg("--check")
        .env("HELM", &helm)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn the_operator_runs_restricted_with_probes_and_knows_its_own_image() {
    let helm = helm_or_fail!();
    let documents = render(&helm, &[]);
    let deployment = one(&documents, "Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    let container = &pod["containers"][0];
    // Then the defaults of every benchmark pod (chart_benchmark_pods.rs).
    assert_eq!(
        container["args"].as_array().unwrap()[..2],
        [
            serde_json::json!("operator"),
            serde_json::json!("--leader-election-lease=membench")
        ]
    );
    let security = &container["securityContext"];
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(security["runAsNonRoot"], true);
    assert_eq!(security["capabilities"]["drop"], serde_json::json!(["ALL"]));
    assert!(container["resources"]["requests"]["memory"].is_string());
    assert!(container["resources"]["limits"]["memory"].is_string());

    let chart: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(repo_root().join("charts/membench/Chart.yaml")).unwrap(),
    )
    .unwrap();
    let image = format!(
        "ghcr.io/membench/membench:{}",
        chart["appVersion"].as_str().unwrap()
    );
    assert_eq!(
        container["image"],
        image.as_str(),
        "the tag defaults to appVersion"
    );
    let env = |name: &str| {
        container["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .unwrap_or_else(|| panic!("no env {name}"))["value"]
            .clone()
    };
    assert_eq!(env("MEMBENCH_CLIENT_IMAGE"), image.as_str());
    // Every IPv6 and IPv4 address of the pod (membench::metrics::serve::bind).
    assert_eq!(env("MEMBENCH_METRICS_ADDR"), "[::]:8080");
    assert_eq!(env("MEMBENCH_LEADER_ELECTION"), "true");

    let port = &container["ports"][0];
    assert_eq!(
        (port["name"].as_str(), port["containerPort"].as_u64()),
        (Some("metrics"), Some(8080))
    );
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(container["readinessProbe"]["httpGet"]["port"], "metrics");

    let service = one(&documents, "Service");
    assert_eq!(service["spec"]["ports"][0]["name"], "metrics");
    assert_eq!(
        service["spec"]["selector"],
        deployment["spec"]["selector"]["matchLabels"]
    );
    let account = one(&documents, "ServiceAccount");
    assert_eq!(pod["serviceAccountName"], account["metadata"]["name"]);
    assert!(find(&documents, "ServiceMonitor").is_empty());
    assert!(find(&documents, "Namespace").is_empty());

    let pinned = render(
        &helm,
        &[
            "image.digest=sha256:abc",
            "clientImage=mirror.example/membench:1",
        ],
    );
    let container = &one(&pinned, "Deployment")["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "ghcr.io/membench/membench@sha256:abc");
    assert!(
        container["env"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "MEMBENCH_CLIENT_IMAGE"
                && e["value"] == "mirror.example/membench:1")
    );
}

#[test]
fn cluster_scope_grants_exactly_what_the_operator_needs() {
    let helm = helm_or_fail!();
    let documents = render(&helm, &[]);
    let role = one(&documents, "ClusterRole");
    let binding = one(&documents, "ClusterRoleBinding");
    assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
    assert_eq!(binding["subjects"][0]["namespace"], "membench-system");
    // What docs/src/reference/operator-flags.md says the operator calls, and nothing else.
    let mut expected = vec![
        (
            "".into(),
            "pods".into(),
            verbs(&["list", "watch", "create", "delete", "patch"]),
        ),
        (
            "events.k8s.io".into(),
            "events".into(),
            verbs(&["create", "patch"]),
        ),
        ("".into(), "secrets".into(), verbs(&["create"])),
        (
            "".into(),
            "configmaps".into(),
            verbs(&["get", "list", "watch"]),
        ),
        ("".into(), "persistentvolumeclaims".into(), verbs(&["get"])),
        (
            "membench.io".into(),
            "memorybenchmarks".into(),
            verbs(&["get", "list", "watch"]),
        ),
        (
            "membench.io".into(),
            "memorybenchmarks/status".into(),
            verbs(&["patch"]),
        ),
        (
            "networking.k8s.io".into(),
            "networkpolicies".into(),
            verbs(&["create", "get", "delete"]),
        ),
        // Cluster scope only: the fit check reads the nodes of a benchmark's instance type.
        ("".into(), "nodes".into(), verbs(&["list"])),
        // And a peak phase's marks read the engine container's memory from the kubelet.
        ("".into(), "nodes/proxy".into(), verbs(&["get"])),
    ];
    expected.sort();
    assert_eq!(rules(role), expected);
    // The leader Lease: in the release namespace only.
    let lease_role = one(&documents, "Role");
    assert_eq!(lease_role["metadata"]["namespace"], "membench-system");
    assert_eq!(rules(lease_role), lease_rules());
    assert_eq!(
        one(&documents, "RoleBinding")["roleRef"]["name"],
        lease_role["metadata"]["name"]
    );
}

#[test]
fn two_replicas_elect_a_leader_with_a_lease_named_for_the_release_and_their_pod_names() {
    let helm = helm_or_fail!();
    let documents = render(&helm, &["replicaCount=2"]);
    let deployment = one(&documents, "Deployment");
    assert_eq!(deployment["spec"]["replicas"], 2);
    // A rolling update starts the new replica as a standby; nothing forces a Recreate.
    assert!(deployment["spec"]["strategy"]["type"] != "Recreate");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let env = container["env"].as_array().unwrap();
    let pod_name = env.iter().find(|e| e["name"] == "POD_NAME").unwrap();
    assert_eq!(
        pod_name["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.name"
    );
    let namespace = env
        .iter()
        .find(|e| e["name"] == "MEMBENCH_NAMESPACE")
        .unwrap();
    assert_eq!(
        namespace["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.namespace"
    );
    assert!(
        container["args"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!("--leader-election-lease=membench"))
    );
}

#[test]
fn namespace_scope_uses_a_role_and_nothing_cluster_wide() {
    let helm = helm_or_fail!();
    let documents = render(
        &helm,
        &[
            "rbac.scope=namespace",
            "rbac.extraRules[0].apiGroups[0]=coordination.k8s.io",
            "rbac.extraRules[0].resources[0]=leases",
            "rbac.extraRules[0].verbs[0]=get",
        ],
    );
    let roles = find_for_benchmarks(&documents, "Role");
    assert_eq!(roles.len(), 1, "one Role for the benchmarks' namespace");
    let role = roles[0];
    assert_eq!(role["metadata"]["namespace"], "membench-system");
    let bindings = find_for_benchmarks(&documents, "RoleBinding");
    assert_eq!(bindings.len(), 1);
    assert_eq!(bindings[0]["roleRef"]["name"], role["metadata"]["name"]);
    let role_rules = rules(role);
    assert!(role_rules.contains(&(
        "coordination.k8s.io".into(),
        "leases".into(),
        verbs(&["get"])
    )));
    assert!(role_rules.contains(&(
        "".into(),
        "pods".into(),
        verbs(&["list", "watch", "create", "delete", "patch"])
    )));
    // The leader Lease has its own Role in the release namespace.
    let lease_roles: Vec<_> = find(&documents, "Role")
        .into_iter()
        .filter(|r| r["metadata"]["name"] == "membench-leader-election")
        .collect();
    assert_eq!(lease_roles.len(), 1);
    assert_eq!(lease_roles[0]["metadata"]["namespace"], "membench-system");
    assert_eq!(rules(lease_roles[0]), lease_rules());
    assert!(find(&documents, "ClusterRole").is_empty());
    assert!(find(&documents, "ClusterRoleBinding").is_empty());
    assert_eq!(watched_namespaces(&documents), "membench-system");
}

#[test]
fn namespace_scope_over_a_list_of_namespaces_has_a_role_in_each_and_watches_them_all() {
    let helm = helm_or_fail!();
    let documents = render(
        &helm,
        &["rbac.scope=namespace", "rbac.namespaces={team-a,team-b}"],
    );
    let roles = find_for_benchmarks(&documents, "Role");
    let namespaces: Vec<&str> = roles
        .iter()
        .map(|r| r["metadata"]["namespace"].as_str().unwrap())
        .collect();
    assert_eq!(namespaces, ["team-a", "team-b"]);
    let bindings = find_for_benchmarks(&documents, "RoleBinding");
    assert_eq!(bindings.len(), 2);
    for binding in bindings {
        assert_eq!(binding["subjects"][0]["namespace"], "membench-system");
    }
    assert!(find(&documents, "ClusterRole").is_empty());
    assert_eq!(watched_namespaces(&documents), "team-a,team-b");
}

#[test]
fn the_operators_network_policy_is_on_by_default_and_opens_only_what_it_needs() {
    let helm = helm_or_fail!();
    let documents = render(&helm, &[]);
    let policy = one(&documents, "NetworkPolicy");
    let spec = &policy["spec"];
    assert_eq!(
        spec["policyTypes"],
        serde_json::json!(["Ingress", "Egress"])
    );
    // Metrics only, and only from the named scrapers.
    let ingress = spec["ingress"].as_array().unwrap();
    assert_eq!(ingress.len(), 1);
    assert_eq!(ingress[0]["ports"][0]["port"], "metrics");
    assert_eq!(
        ingress[0]["from"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/name"],
        "prometheus"
    );
    // Out: the API server's ports, and the benchmark clients' progress port.
    let egress = spec["egress"].as_array().unwrap();
    assert_eq!(egress[0]["ports"][0]["port"], 443);
    assert_eq!(egress[1]["ports"][0]["port"], 9121);
    assert_eq!(
        egress[1]["to"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"],
        "client"
    );
    // No scraper named: nothing may reach the metrics port.
    let closed = render(&helm, &["networkPolicy.metricsFrom=null"]);
    assert!(one(&closed, "NetworkPolicy")["spec"]["ingress"].is_null());
    let off = render(&helm, &["networkPolicy.enabled=false"]);
    assert!(find(&off, "NetworkPolicy").is_empty());
    // The operator knows its own pods' labels, for the benchmarks' policies.
    let container = &one(&documents, "Deployment")["spec"]["template"]["spec"]["containers"][0];
    let env = |name: &str| {
        container["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .map(|e| e["value"].clone())
    };
    assert_eq!(
        env("MEMBENCH_OPERATOR_POD_LABELS").unwrap(),
        "app.kubernetes.io/name=membench,app.kubernetes.io/instance=membench,app.kubernetes.io/component=operator"
    );
    assert_eq!(env("MEMBENCH_BENCHMARK_NETWORK_POLICIES").unwrap(), "true");
}

#[test]
fn service_monitor_appears_only_when_enabled() {
    let helm = helm_or_fail!();
    let documents = render(
        &helm,
        &[
            "serviceMonitor.enabled=true",
            "serviceMonitor.labels.release=kube-prometheus-stack",
        ],
    );
    let monitor = one(&documents, "ServiceMonitor");
    assert_eq!(
        monitor["metadata"]["labels"]["release"],
        "kube-prometheus-stack"
    );
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert_eq!(endpoint["port"], "metrics");
    assert_eq!(
        endpoint["honorLabels"], true,
        "results keep their own namespace label"
    );
}

#[test]
fn pod_monitor_scrapes_the_operator_pods_without_the_service_and_never_beside_the_service_monitor()
{
    let helm = helm_or_fail!();
    assert!(find(&render(&helm, &[]), "PodMonitor").is_empty());
    let documents = render(
        &helm,
        &[
            "podMonitor.enabled=true",
            "podMonitor.labels.release=kube-prometheus-stack",
            "metrics.service.enabled=false",
        ],
    );
    assert!(find(&documents, "ServiceMonitor").is_empty());
    assert!(find(&documents, "Service").is_empty());
    let monitor = one(&documents, "PodMonitor");
    assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(monitor["metadata"]["namespace"], "membench-system");
    assert_eq!(
        monitor["metadata"]["labels"]["release"],
        "kube-prometheus-stack"
    );
    // It selects exactly the operator's pods, by the Deployment's own selector...
    let deployment = one(&documents, "Deployment");
    assert_eq!(
        monitor["spec"]["selector"]["matchLabels"],
        deployment["spec"]["selector"]["matchLabels"]
    );
    assert_eq!(
        monitor["spec"]["namespaceSelector"]["matchNames"],
        serde_json::json!(["membench-system"])
    );
    // ...on the container's named metrics port, keeping the results' namespace label.
    let endpoint = &monitor["spec"]["podMetricsEndpoints"][0];
    let port = &deployment["spec"]["template"]["spec"]["containers"][0]["ports"][0];
    assert_eq!(port["name"], "metrics");
    assert_eq!(endpoint["port"], "metrics");
    assert_eq!(endpoint["path"], "/metrics");
    assert_eq!(endpoint["interval"], "30s");
    assert_eq!(endpoint["honorLabels"], true);
    // Both monitors would scrape every series twice: refused, saying so.
    let output = Command::new(&helm)
        .args(["template", "membench"])
        .arg(repo_root().join("charts/membench"))
        .args([
            "--set",
            "podMonitor.enabled=true",
            "--set",
            "serviceMonitor.enabled=true",
        ])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("podMonitor.enabled and serviceMonitor.enabled would both scrape"),
        "{stderr}"
    );
}

/// The `networkPolicy:` example of docs/src/how-to/dashboards.md's section on other scrapers.
fn dashboards_md_metrics_from_example() -> String {
    let text = std::fs::read_to_string(repo_root().join("docs/src/how-to/dashboards.md")).unwrap();
    let section = text
        .split("## Scrapers other than kube-prometheus-stack")
        .nth(1)
        .expect("docs/src/how-to/dashboards.md has a section on other scrapers");
    let block = section
        .split("```yaml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the section has a yaml example");
    assert!(
        block.starts_with("networkPolicy:\n  metricsFrom:"),
        "{block}"
    );
    block.to_string()
}

#[test]
fn docs_metrics_from_example_renders_into_the_operators_network_policy() {
    let helm = helm_or_fail!();
    let example = dashboards_md_metrics_from_example();
    let values =
        std::env::temp_dir().join(format!("membench-metrics-from-{}.yaml", std::process::id()));
    std::fs::write(&values, &example).unwrap();
    let text = run(Command::new(&helm)
        .args(["template", "membench"])
        .arg(repo_root().join("charts/membench"))
        .args(["--namespace", "membench-system", "--values"])
        .arg(&values));
    std::fs::remove_file(&values).unwrap();
    let documents: Vec<Value> = serde_saphyr::from_str_multiple(&text).unwrap();
    let policy = documents
        .iter()
        .find(|d| d["kind"] == "NetworkPolicy")
        .expect("a NetworkPolicy");
    let expected: Value = serde_saphyr::from_str(&example).unwrap();
    let from = &policy["spec"]["ingress"][0]["from"];
    assert_eq!(from, &expected["networkPolicy"]["metricsFrom"]);
    assert_eq!(from.as_array().unwrap().len(), 3);
    assert_eq!(policy["spec"]["ingress"][0]["ports"][0]["port"], "metrics");
}

#[test]
fn dashboards_ship_as_configmaps_for_the_grafana_sidecar() {
    let helm = helm_or_fail!();
    let documents = render(&helm, &[]);
    let configmaps = find(&documents, "ConfigMap");
    let dashboards_dir = repo_root().join("dashboards");
    let mut sources: Vec<_> = std::fs::read_dir(&dashboards_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    sources.sort();
    assert_eq!(configmaps.len(), sources.len());
    for source in sources {
        let stem = source.file_stem().unwrap().to_string_lossy().into_owned();
        let key = format!("membench-{stem}.json");
        let configmap = configmaps
            .iter()
            .find(|c| c["data"].get(&key).is_some())
            .unwrap_or_else(|| panic!("no ConfigMap holds {key}"));
        assert_eq!(configmap["metadata"]["labels"]["grafana_dashboard"], "1");
        let shipped: Value =
            serde_json::from_str(configmap["data"][&key].as_str().unwrap()).unwrap();
        let original: Value =
            serde_json::from_str(&std::fs::read_to_string(&source).unwrap()).unwrap();
        assert_eq!(shipped, original, "{key} differs from {}", source.display());
    }
    assert!(find(&render(&helm, &["dashboards.enabled=false"]), "ConfigMap").is_empty());
}

#[test]
fn benchmark_image_pull_secrets_reach_the_operator_and_not_its_own_pod() {
    let helm = helm_or_fail!();
    let env_of = |documents: &[Value]| {
        let deployment = one(documents, "Deployment");
        deployment["spec"]["template"]["spec"]["containers"][0]["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == "MEMBENCH_BENCHMARK_IMAGE_PULL_SECRETS")
            .map(|e| e["value"].clone())
    };
    assert_eq!(env_of(&render(&helm, &[])), None);
    let documents = render(
        &helm,
        &[
            "benchmarkImagePullSecrets[0].name=regcred",
            "benchmarkImagePullSecrets[1].name=mirror",
        ],
    );
    assert_eq!(env_of(&documents), Some(Value::from("regcred,mirror")));
    // The operator's own pod pulls with `imagePullSecrets` only.
    let deployment = one(&documents, "Deployment");
    assert!(deployment["spec"]["template"]["spec"]["imagePullSecrets"].is_null());
}
