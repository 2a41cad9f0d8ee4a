//! `manifests/install.yaml` (the chart, rendered) against a real API server: accepted by a
//! server-side dry run, then applied for real; the operator's service account gets exactly the
//! access it needs and nothing more (`kubectl auth can-i --as=system:serviceaccount:...`: no
//! Secrets, no exec, no nodes); the restricted operator pod passes Pod Security admission and
//! is scheduled. Then the chart scoped to a list of namespaces, installed for real: its operator
//! may act in those namespaces and nowhere else.
//!
//! The cluster is a private dev cluster (`hack/dev-cluster.sh up` in a scratch state directory,
//! stopped afterwards), or the cluster `MEMBENCH_TEST_KUBECONFIG` names (kind, EKS), from which
//! the install is removed afterwards. Needs the kubectl `hack/build-tools.sh` builds, and for the
//! dev cluster its binaries and the node agent (`cargo build -p membench-devcluster`).

mod observability;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use observability::repo_root;

const NAMESPACE: &str = "membench-system";
const SERVICE_ACCOUNT: &str = "system:serviceaccount:membench-system:membench";

/// A cluster for this test, torn down (or cleaned) when dropped.
struct TestCluster {
    kubectl: PathBuf,
    kubeconfig: PathBuf,
    /// The dev cluster's state directory, when this test started one.
    dev_cluster_dir: Option<PathBuf>,
}

impl TestCluster {
    fn start(kubectl: PathBuf) -> Result<TestCluster, String> {
        if let Some(kubeconfig) = std::env::var_os("MEMBENCH_TEST_KUBECONFIG") {
            return Ok(TestCluster {
                kubectl,
                kubeconfig: kubeconfig.into(),
                dev_cluster_dir: None,
            });
        }
        let root = repo_root();
        let script = root.join("hack/dev-cluster.sh");
        if !script.is_file() {
            return Err(format!("{} does not exist", script.display()));
        }
        let bin_dir = Path::new(env!("CARGO_BIN_EXE_membench")).parent().unwrap();
        let agent = bin_dir.join("membench-node-agent");
        if !agent.is_file() {
            return Err(format!(
                "no node agent at {} (cargo build -p membench-devcluster)",
                agent.display()
            ));
        }
        let dir =
            std::env::temp_dir().join(format!("membench-chart-cluster-{}", std::process::id()));
        let output = Command::new(&script)
            .arg("up")
            .env("MEMBENCH_DEV_CLUSTER_DIR", &dir)
            .env("MEMBENCH_NODE_AGENT_BIN", &agent)
            .env("MEMBENCH_BIN", env!("CARGO_BIN_EXE_membench"))
            .env_remove("MEMBENCH_DEV_CLUSTER_OPERATOR")
            .output()
            .unwrap();
        let cluster = TestCluster {
            kubectl,
            kubeconfig: dir.join("kubeconfig"),
            dev_cluster_dir: Some(dir),
        };
        assert!(
            output.status.success(),
            "hack/dev-cluster.sh up failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        Ok(cluster)
    }

    fn kubectl(&self, args: &[&str]) -> Output {
        Command::new(&self.kubectl)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .output()
            .unwrap()
    }

    /// Runs kubectl and returns its stdout, failing the test with its stderr when it fails.
    fn ok(&self, args: &[&str]) -> String {
        let output = self.kubectl(args);
        assert!(
            output.status.success(),
            "kubectl {} failed:\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }

    /// Polls until the CRD's Established condition is True. A CRD just stored has no status
    /// yet, which counts as "not yet", never as an error.
    fn wait_established(&self, crd: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let output = self.kubectl(&[
                "get",
                crd,
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Established\")].status}",
            ]);
            if output.status.success() && String::from_utf8_lossy(&output.stdout).trim() == "True" {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{crd} not Established after {timeout:?}: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// `kubectl auth can-i` as the operator; `resource` may name a subresource as `pods/exec`.
    fn can_i(&self, verb: &str, resource: &str) -> bool {
        self.can_i_as(SERVICE_ACCOUNT, verb, resource, None)
    }

    /// `kubectl auth can-i --as=<account>` in one namespace, or in all of them (`-A`).
    fn can_i_as(&self, account: &str, verb: &str, resource: &str, namespace: Option<&str>) -> bool {
        let mut args = vec!["auth", "can-i", verb];
        match resource.split_once('/') {
            Some((resource, subresource)) => {
                args.extend([resource, "--subresource", subresource]);
            }
            None => args.push(resource),
        }
        args.extend(["--as", account]);
        match namespace {
            Some(namespace) => args.extend(["-n", namespace]),
            None => args.push("-A"),
        }
        let output = self.kubectl(&args);
        String::from_utf8_lossy(&output.stdout).trim() == "yes"
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        match &self.dev_cluster_dir {
            Some(dir) => {
                let _ = Command::new(repo_root().join("hack/dev-cluster.sh"))
                    .arg("down")
                    .env("MEMBENCH_DEV_CLUSTER_DIR", dir)
                    .output();
                let _ = std::fs::remove_file(dir.with_extension("lock"));
            }
            None => {
                let install = repo_root().join("manifests/install.yaml");
                let _ = self.kubectl(&[
                    "delete",
                    "--ignore-not-found",
                    "--wait=false",
                    "-f",
                    install.to_str().unwrap(),
                ]);
            }
        }
    }
}

#[test]
fn install_yaml_applies_to_a_real_api_server_with_least_privilege_and_a_restricted_pod() {
    let kubectl = membench_devcluster::tools::kubectl().expect("the control plane's kubectl");
    let cluster = match TestCluster::start(kubectl) {
        Ok(cluster) => cluster,
        Err(why) => {
            observability::missing(&format!("no dev cluster: {why}"));
        }
    };
    let install = repo_root().join("manifests/install.yaml");
    let install = install.to_str().unwrap();

    // A server-side dry run cannot create the namespace its namespaced objects go into.
    if cluster
        .kubectl(&["get", "namespace", NAMESPACE])
        .status
        .success()
    {
        panic!(
            "namespace {NAMESPACE} already exists in the test cluster; remove the old install first"
        );
    }
    cluster.ok(&["create", "namespace", NAMESPACE]);
    cluster.ok(&[
        "apply",
        "--server-side",
        "--force-conflicts",
        "--dry-run=server",
        "-f",
        install,
    ]);
    cluster.ok(&["apply", "--server-side", "--force-conflicts", "-f", install]);
    cluster.wait_established("crd/memorybenchmarks.membench.io", Duration::from_secs(60));

    // Exactly the access the operator needs (docs/src/reference/operator-flags.md, "RBAC") ...
    for (verb, resource) in [
        ("list", "memorybenchmarks.membench.io"),
        ("watch", "memorybenchmarks.membench.io"),
        ("patch", "memorybenchmarks.membench.io/status"),
        ("list", "pods"),
        ("watch", "pods"),
        ("create", "pods"),
        ("delete", "pods"),
        ("create", "events.events.k8s.io"),
        ("patch", "events.events.k8s.io"),
        ("create", "networkpolicies.networking.k8s.io"),
        // A stale policy of a benchmark's name is read and replaced (network_policy::ensure).
        ("get", "networkpolicies.networking.k8s.io"),
        ("delete", "networkpolicies.networking.k8s.io"),
        // Each benchmark's generated engine password, never read back.
        ("create", "secrets"),
        // Prices and profiles by name; prices ConfigMaps watched for later changes.
        ("get", "configmaps"),
        ("watch", "configmaps"),
        // An RDB workload's claim, looked up by name before anything starts.
        ("get", "persistentvolumeclaims"),
        // What the nodes of an instance type give pods, before a benchmark's first pod.
        ("list", "nodes"),
    ] {
        assert!(
            cluster.can_i(verb, resource),
            "the operator cannot {verb} {resource}"
        );
    }
    // ... and nothing that would let a benchmark operator read or take over the cluster.
    for (verb, resource) in [
        ("get", "secrets"),
        ("list", "secrets"),
        ("watch", "secrets"),
        ("get", "nodes"),
        ("watch", "nodes"),
        ("patch", "nodes"),
        ("update", "nodes"),
        ("delete", "nodes"),
        ("create", "pods/exec"),
        ("create", "pods/attach"),
        ("create", "pods/portforward"),
        ("create", "pods/eviction"),
        ("update", "networkpolicies.networking.k8s.io"),
        ("patch", "networkpolicies.networking.k8s.io"),
        ("get", "pods/log"),
        ("update", "pods"),
        ("create", "deployments.apps"),
        ("create", "memorybenchmarks.membench.io"),
        ("delete", "memorybenchmarks.membench.io"),
        ("update", "memorybenchmarks.membench.io"),
        ("update", "memorybenchmarks.membench.io/status"),
        ("create", "customresourcedefinitions.apiextensions.k8s.io"),
        // The claim is looked up, never listed, changed or mounted by the operator itself.
        ("list", "persistentvolumeclaims"),
        ("update", "persistentvolumeclaims"),
        ("delete", "persistentvolumeclaims"),
    ] {
        assert!(
            !cluster.can_i(verb, resource),
            "the operator may {verb} {resource}"
        );
    }

    let dashboards = cluster.ok(&[
        "get",
        "configmaps",
        "-n",
        NAMESPACE,
        "-l",
        "grafana_dashboard=1",
        "-o",
        "name",
    ]);
    assert_eq!(dashboards.lines().count(), 2, "{dashboards}");
    let service = cluster.ok(&[
        "get",
        "service",
        "membench-metrics",
        "-n",
        NAMESPACE,
        "-o",
        "jsonpath={.spec.ports[0].name}",
    ]);
    assert_eq!(service, "metrics");

    // The namespace enforces the restricted Pod Security Standard, so the ReplicaSet's pod
    // exists only if the operator's security context really meets it.
    let enforce = cluster.ok(&[
        "get",
        "namespace",
        NAMESPACE,
        "-o",
        "jsonpath={.metadata.labels.pod-security\\.kubernetes\\.io/enforce}",
    ]);
    assert_eq!(enforce, "restricted");
    let unrestricted = cluster.kubectl(&[
        "run",
        "unrestricted",
        "-n",
        NAMESPACE,
        "--image",
        "redis:7.0.15",
        "--dry-run=server",
    ]);
    assert!(
        String::from_utf8_lossy(&unrestricted.stderr).contains("violates PodSecurity"),
        "Pod Security admission is not enforcing in the test cluster, so this test proves nothing: {unrestricted:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let node = loop {
        let node = cluster.ok(&[
            "get",
            "pods",
            "-n",
            NAMESPACE,
            "-l",
            "app.kubernetes.io/name=membench",
            "-o",
            "jsonpath={.items[*].spec.nodeName}",
        ]);
        if !node.trim().is_empty() {
            break node;
        }
        if Instant::now() > deadline {
            let events = cluster.ok(&["get", "events", "-n", NAMESPACE]);
            panic!("the operator pod was never created and scheduled:\n{events}");
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    println!("operator pod scheduled on {node}");

    // The chart's other shape (namespace scope over a list of namespaces) installed for real:
    // the operator's rights reach exactly those namespaces.
    let Some(helm) = observability::helm() else {
        observability::missing("no helm (namespace scope only)");
    };
    let rendered = Command::new(helm)
        .args(["template", "membench-ns"])
        .arg(repo_root().join("charts/membench"))
        .args([
            "--namespace",
            "membench-ns",
            "--set",
            "rbac.scope=namespace",
            "--set",
            "rbac.namespaces={membench-ns,team-a}",
        ])
        .args(["--set", "dashboards.enabled=false", "--skip-crds"])
        .output()
        .unwrap();
    assert!(
        rendered.status.success(),
        "{}",
        String::from_utf8_lossy(&rendered.stderr)
    );
    let file = std::env::temp_dir().join(format!("membench-ns-{}.yaml", std::process::id()));
    std::fs::write(&file, &rendered.stdout).unwrap();
    for namespace in ["membench-ns", "team-a", "team-b"] {
        cluster.ok(&["create", "namespace", namespace]);
        // As every namespace of the tests, it enforces Pod Security restricted.
        cluster.ok(&[
            "label",
            "namespace",
            namespace,
            "pod-security.kubernetes.io/enforce=restricted",
        ]);
    }
    let applied = cluster.ok(&["apply", "--server-side", "-f", file.to_str().unwrap()]);
    let _ = std::fs::remove_file(&file);
    let account = "system:serviceaccount:membench-ns:membench-ns";
    for namespace in ["membench-ns", "team-a"] {
        for (verb, resource) in [
            ("list", "memorybenchmarks.membench.io"),
            ("watch", "memorybenchmarks.membench.io"),
            ("patch", "memorybenchmarks.membench.io/status"),
            ("create", "pods"),
            ("delete", "pods"),
            ("watch", "pods"),
            ("create", "networkpolicies.networking.k8s.io"),
            ("delete", "networkpolicies.networking.k8s.io"),
            ("create", "secrets"),
            ("create", "events.events.k8s.io"),
        ] {
            assert!(
                cluster.can_i_as(account, verb, resource, Some(namespace)),
                "the namespaced operator cannot {verb} {resource} in {namespace}"
            );
        }
        for (verb, resource) in [
            ("get", "secrets"),
            ("create", "pods/exec"),
            ("update", "pods"),
        ] {
            assert!(
                !cluster.can_i_as(account, verb, resource, Some(namespace)),
                "the namespaced operator may {verb} {resource} in {namespace}"
            );
        }
    }
    // Nothing outside its namespaces, and nothing cluster-wide.
    for (verb, resource) in [
        ("create", "pods"),
        ("list", "pods"),
        ("list", "memorybenchmarks.membench.io"),
    ] {
        assert!(
            !cluster.can_i_as(account, verb, resource, Some("team-b")),
            "the namespaced operator may {verb} {resource} in team-b, which it does not watch"
        );
        assert!(
            !cluster.can_i_as(account, verb, resource, None),
            "the namespaced operator may {verb} {resource} in every namespace"
        );
    }
    for (verb, resource) in [("list", "nodes"), ("patch", "nodes"), ("get", "secrets")] {
        assert!(
            !cluster.can_i_as(account, verb, resource, None),
            "the namespaced operator may {verb} {resource}"
        );
    }
    for kind in [
        "role.rbac",
        "rolebinding.rbac",
        "networkpolicy.networking.k8s.io",
        "deployment.apps",
    ] {
        assert!(
            applied.contains(kind),
            "{kind} missing from the install: {applied}"
        );
    }
    if cluster.dev_cluster_dir.is_none() {
        for namespace in ["membench-ns", "team-a", "team-b"] {
            cluster.ok(&["delete", "namespace", namespace, "--wait=false"]);
        }
    }
}
