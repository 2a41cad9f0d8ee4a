//! `membench operator` refuses bad operator-wide settings at start, before it talks to any
//! cluster, with exit code 2 and a message naming the flag and the chart value: the engine
//! mirror, the benchmark pods' default tolerations and node labels.

use std::process::Command;

fn operator(args: &[&str]) -> (Option<i32>, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_membench"))
        .arg("operator")
        .args(args)
        // Nowhere to connect: a flag that passed would fail later, not with exit 2.
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .expect("membench runs");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn an_engine_registry_that_is_not_a_registry_host_stops_the_operator_at_start() {
    for (value, why) in [
        ("https://mirror.example.com", "scheme"),
        ("mirror.example.com/redis:7.4", "names a tag"),
        ("Mirror.example.com", "uppercase"),
        ("mirror.example.com /hub", "spaces"),
    ] {
        let (code, err) = operator(&["--engine-registry", value]);
        assert_eq!(code, Some(2), "{value}: {err}");
        assert!(
            err.contains("--engine-registry (chart value engineRegistry)") && err.contains(why),
            "{value}: {err}"
        );
    }
}

#[test]
fn a_default_toleration_of_every_taint_stops_the_operator_unless_allowed() {
    let everything = r#"[{"operator":"Exists"}]"#;
    let (code, err) = operator(&["--benchmark-tolerations", everything]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("benchmarkPods.tolerations") && err.contains("allowTolerateEverything"),
        "{err}"
    );
    // Allowed, it passes the check and fails only where it needs a cluster.
    let (code, err) = operator(&[
        "--benchmark-tolerations",
        everything,
        "--allow-tolerate-everything",
    ]);
    assert_ne!(code, Some(2), "{err}");
}

#[test]
fn bad_default_node_labels_stop_the_operator_naming_the_setting() {
    let (code, err) = operator(&["--benchmark-node-selector", "membench.io/pool"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("benchmarkPods.nodeSelector") && err.contains("is not KEY=VALUE"),
        "{err}"
    );
}
