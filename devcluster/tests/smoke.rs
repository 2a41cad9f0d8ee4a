//! Smoke tests of the dev cluster itself, against the real control plane started through
//! `hack/dev-cluster.sh up` (the first run on a machine builds it: ~10 minutes). Each test has
//! its own namespace (enforcing Pod Security `restricted`), so they run in parallel. What the
//! node agent applies from a pod's security context and volumes is tested in
//! `security_context.rs` and `volumes.rs`.
//!
//! With `MEMBENCH_TEST_KUBECONFIG` set they run against that cluster instead; the tests that
//! rely on the node agent running pods on this machine then fail, saying the dev cluster is
//! what they need.

mod common;

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::{DeleteParams, LogParams, PostParams};
use kube::{Api, ResourceExt};
use membench_devcluster::wait::{
    TestNamespace, is_scheduled, node_name, wait_for_pod, wait_for_pod_deleted, waiting_reason,
};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use common::{
    READY, SCHEDULED, cluster, pod, pod_ip, redis_ping, redis_pod, require_dev_cluster,
    shell_container, shell_pod, terminated, wait_finished, wait_ready, waiting_message,
};

#[tokio::test]
async fn pod_selecting_r8g_instance_type_is_scheduled_on_an_r8g_node() -> anyhow::Result<()> {
    let client = cluster().await?;
    let ns = TestNamespace::create(&client, "select-r8g").await?;
    let pods = ns.pods();
    let p = redis_pod(
        "on-r8g",
        json!({"nodeSelector": {"node.kubernetes.io/instance-type": "r8g.4xlarge"}}),
    );
    pods.create(&PostParams::default(), &p).await?;

    let scheduled = wait_for_pod(&pods, "on-r8g", SCHEDULED, "scheduled", is_scheduled).await?;
    let node: Node = Api::all(client.clone())
        .get(node_name(&scheduled).unwrap())
        .await?;
    let labels = node.labels();
    assert_eq!(labels["node.kubernetes.io/instance-type"], "r8g.4xlarge");
    assert_eq!(labels["kubernetes.io/arch"], "arm64");
    ns.delete().await
}

#[tokio::test]
async fn pod_affinity_on_hostname_places_a_pod_next_to_its_target() -> anyhow::Result<()> {
    let client = cluster().await?;
    let ns = TestNamespace::create(&client, "affinity").await?;
    let pods = ns.pods();
    let target = redis_pod(
        "target",
        json!({"nodeSelector": {"node.kubernetes.io/instance-type": "r8g.4xlarge"}}),
    );
    pods.create(&PostParams::default(), &target).await?;
    let target = wait_for_pod(&pods, "target", SCHEDULED, "scheduled", is_scheduled).await?;

    // Several followers, so landing beside the target by chance (1 in 4 each) is ruled out.
    let affinity = json!({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {"app": "target"}},
        "topologyKey": "kubernetes.io/hostname",
    }]}}});
    for i in 0..3 {
        pods.create(
            &PostParams::default(),
            &redis_pod(&format!("follower-{i}"), affinity.clone()),
        )
        .await?;
    }
    for i in 0..3 {
        let follower = wait_for_pod(
            &pods,
            &format!("follower-{i}"),
            SCHEDULED,
            "scheduled",
            is_scheduled,
        )
        .await?;
        assert_eq!(
            node_name(&follower),
            node_name(&target),
            "follower-{i} is not on the target's node"
        );
    }
    ns.delete().await
}

#[tokio::test]
async fn redis_pod_becomes_ready_and_answers_ping_on_its_own_address() -> anyhow::Result<()> {
    require_dev_cluster("redis ping")?;
    let client = cluster().await?;
    let ns = TestNamespace::create(&client, "redis-ping").await?;
    let pods = ns.pods();
    pods.create(&PostParams::default(), &redis_pod("redis", json!({})))
        .await?;

    let ready = wait_ready(&pods, "redis").await?;
    let status = ready.status.as_ref().unwrap();
    let container = &status.container_statuses.as_ref().unwrap()[0];
    assert!(container.ready);
    assert_eq!(container.started, Some(true));
    assert!(
        container.image_id.contains("@7.0.15"),
        "imageID {}",
        container.image_id
    );
    assert!(status.start_time.is_some());
    assert_eq!(status.host_ip.as_deref(), Some("127.0.0.1"));
    let ip = pod_ip(&ready);
    assert!(ip.starts_with("127.") && ip != "127.0.0.1", "pod IP {ip}");
    assert_eq!(redis_ping(&ip, 6379).await?, "+PONG");
    ns.delete().await
}

#[tokio::test]
async fn two_engines_listen_on_the_same_port_at_their_own_addresses() -> anyhow::Result<()> {
    require_dev_cluster("same port")?;
    let client = cluster().await?;
    let ns = TestNamespace::create(&client, "same-port").await?;
    let pods = ns.pods();
    let same_node = json!({"nodeName": "r7i-4xlarge-0"});
    pods.create(
        &PostParams::default(),
        &redis_pod("first", same_node.clone()),
    )
    .await?;
    pods.create(&PostParams::default(), &redis_pod("second", same_node))
        .await?;

    let first = wait_ready(&pods, "first").await?;
    let second = wait_ready(&pods, "second").await?;
    assert_ne!(pod_ip(&first), pod_ip(&second));
    assert_eq!(redis_ping(&pod_ip(&first), 6379).await?, "+PONG");
    assert_eq!(redis_ping(&pod_ip(&second), 6379).await?, "+PONG");
    ns.delete().await
}

#[tokio::test]
async fn deleting_a_pod_stops_its_process_and_removes_it() -> anyhow::Result<()> {
    require_dev_cluster("deletion")?;
    let client = cluster().await?;
    let ns = TestNamespace::create(&client, "delete").await?;
    let pods = ns.pods();
    pods.create(&PostParams::default(), &redis_pod("doomed", json!({})))
        .await?;
    let running = wait_ready(&pods, "doomed").await?;
    let ip = pod_ip(&running);

    pods.delete("doomed", &DeleteParams::default()).await?;
    // Redis exits on SIGTERM at once, well within the 5s grace period.
    wait_for_pod_deleted(&pods, &running, Duration::from_secs(20)).await?;
    assert!(
        redis_ping(&ip, 6379).await.is_err(),
        "redis still answers on {ip} after its pod was deleted"
    );
    ns.delete().await
}

#[tokio::test]
async fn pod_owned_by_a_configmap_is_garbage_collected_with_it() -> anyhow::Result<()> {
    let client = cluster().await?;
    let ns = TestNamespace::create(&client, "gc").await?;
    let pods = ns.pods();
    let config_maps: Api<ConfigMap> = ns.api();
    let owner = config_maps
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "owner"}}))?,
        )
        .await?;
    let mut owned = redis_pod("owned", json!({}));
    owned.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "owner".into(),
            uid: owner.uid().unwrap(),
            ..Default::default()
        },
    ]);
    let owned = pods.create(&PostParams::default(), &owned).await?;
    wait_for_pod(&pods, "owned", SCHEDULED, "scheduled", is_scheduled).await?;

    config_maps
        .delete("owner", &DeleteParams::default())
        .await?;
    wait_for_pod_deleted(&pods, &owned, Duration::from_secs(60)).await?;
    ns.delete().await
}

#[tokio::test]
async fn unmapped_image_fails_like_a_failed_pull_naming_the_image() -> anyhow::Result<()> {
    require_dev_cluster("unmapped image")?;
    let client = cluster().await?;
    let ns = TestNamespace::create(&client, "unmapped").await?;
    let pods = ns.pods();
    let p = pod(json!({
        "metadata": {"name": "nginx"},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "web", "image": "nginx:1.27"}]},
    }));
    pods.create(&PostParams::default(), &p).await?;

    let failing = wait_for_pod(&pods, "nginx", READY, "failing to pull", |p| {
        matches!(waiting_reason(p), Some("ErrImagePull" | "ImagePullBackOff"))
    })
    .await?;
    let status = failing.status.as_ref().unwrap();
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    let message = waiting_message(&failing);
    assert!(
        message.contains("nginx:1.27"),
        "message does not name the image: {message}"
    );

    // A known image of a version this machine lacks says which versions it has.
    let p = pod(json!({
        "metadata": {"name": "old-redis"},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "redis", "image": "redis:6.2.99"}]},
    }));
    pods.create(&PostParams::default(), &p).await?;
    let failing = wait_for_pod(&pods, "old-redis", READY, "failing to pull", |p| {
        waiting_reason(p).is_some_and(|r| r != "ContainerCreating")
    })
    .await?;
    let message = waiting_message(&failing);
    assert!(
        message.contains("redis:6.2.99") && message.contains("7.0.15"),
        "{message}"
    );
    ns.delete().await
}

#[tokio::test]
async fn exit_code_and_termination_message_are_reported() -> anyhow::Result<()> {
    require_dev_cluster("termination message")?;
    let client = cluster().await?;
    let ns = TestNamespace::create(&client, "exit").await?;
    let pods = ns.pods();
    pods.create(
        &PostParams::default(),
        &shell_pod(
            "fails",
            "printf 'loaded 42 keys' > /dev/termination-log; exit 3",
            json!({}),
        ),
    )
    .await?;
    pods.create(
        &PostParams::default(),
        &shell_pod("succeeds", "echo fine", json!({})),
    )
    .await?;

    let failed = wait_finished(&pods, "fails").await?;
    assert_eq!(
        failed.status.as_ref().unwrap().phase.as_deref(),
        Some("Failed")
    );
    let t = terminated(&failed);
    assert_eq!(t.exit_code, 3);
    assert_eq!(t.reason.as_deref(), Some("Error"));
    assert_eq!(t.message.as_deref(), Some("loaded 42 keys"));

    let succeeded = wait_finished(&pods, "succeeds").await?;
    assert_eq!(
        succeeded.status.as_ref().unwrap().phase.as_deref(),
        Some("Succeeded")
    );
    let t = terminated(&succeeded);
    assert_eq!(t.exit_code, 0);
    assert_eq!(t.reason.as_deref(), Some("Completed"));
    ns.delete().await
}

#[tokio::test]
async fn fallback_to_logs_on_error_reports_the_end_of_the_output() -> anyhow::Result<()> {
    require_dev_cluster("fallback to logs")?;
    let client = cluster().await?;
    let ns = TestNamespace::create(&client, "fallback").await?;
    let pods = ns.pods();
    let p = shell_pod(
        "crashes",
        "echo starting; echo 'fatal: no such key' >&2; exit 1",
        json!({"terminationMessagePolicy": "FallbackToLogsOnError"}),
    );
    pods.create(&PostParams::default(), &p).await?;
    let failed = wait_finished(&pods, "crashes").await?;
    let t = terminated(&failed);
    assert_eq!(t.exit_code, 1);
    assert_eq!(t.message.as_deref(), Some("starting\nfatal: no such key\n"));
    ns.delete().await
}

#[tokio::test]
async fn env_and_downward_api_reach_the_process() -> anyhow::Result<()> {
    require_dev_cluster("env")?;
    let client = cluster().await?;
    let ns = TestNamespace::create(&client, "env").await?;
    let pods = ns.pods();
    // `sh -c SCRIPT ARG`: the argument is $0 of the script.
    let p = shell_pod(
        "env",
        "printf '%s|%s|%s' \"$POD_IP\" \"$GREETING\" \"$0\" > /dev/termination-log",
        json!({
            "args": ["$(GREETING)"],
            "env": [
                {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "GREETING", "value": "hello from $(POD_IP)"},
            ],
        }),
    );
    pods.create(&PostParams::default(), &p).await?;
    let done = wait_finished(&pods, "env").await?;
    let ip = pod_ip(&done);
    let expected = format!("{ip}|hello from {ip}|hello from {ip}");
    assert_eq!(
        terminated(&done).message.as_deref(),
        Some(expected.as_str())
    );
    ns.delete().await
}

#[tokio::test]
async fn exceeding_the_memory_limit_is_oom_killed() -> anyhow::Result<()> {
    require_dev_cluster("OOM")?;
    let client = cluster().await?;
    let ns = TestNamespace::create(&client, "oom").await?;
    let pods = ns.pods();
    let mut p = redis_pod("small", json!({}));
    let container = &mut p.spec.as_mut().unwrap().containers[0];
    container
        .args
        .as_mut()
        .unwrap()
        .extend(["--enable-debug-command".to_string(), "yes".to_string()]);
    container.resources = Some(serde_json::from_value(
        json!({"limits": {"memory": "48Mi"}}),
    )?);
    pods.create(&PostParams::default(), &p).await?;
    let ready = wait_ready(&pods, "small").await?;

    // About 100 MB of keys: well past the 48Mi limit.
    let mut stream = TcpStream::connect((pod_ip(&ready).as_str(), 6379)).await?;
    stream
        .write_all(b"*3\r\n$5\r\nDEBUG\r\n$8\r\nPOPULATE\r\n$7\r\n1000000\r\n")
        .await?;
    let mut reply = [0u8; 64];
    let _ = tokio::time::timeout(Duration::from_secs(20), stream.read(&mut reply)).await;

    let killed = wait_finished(&pods, "small").await?;
    assert_eq!(
        killed.status.as_ref().unwrap().phase.as_deref(),
        Some("Failed")
    );
    let t = terminated(&killed);
    assert_eq!(t.reason.as_deref(), Some("OOMKilled"));
    assert_eq!(t.exit_code, 137);
    ns.delete().await
}

#[tokio::test]
async fn pod_logs_are_served_through_the_api_server() -> anyhow::Result<()> {
    require_dev_cluster("logs")?;
    let client = cluster().await?;
    let ns = TestNamespace::create(&client, "logs").await?;
    let pods = ns.pods();
    pods.create(
        &PostParams::default(),
        &shell_pod(
            "chatty",
            "echo first; echo second >&2; echo third",
            json!({}),
        ),
    )
    .await?;
    wait_finished(&pods, "chatty").await?;

    // kubectl logs: API server -> the node's kubelet endpoint -> the node agent.
    assert_eq!(
        pods.logs("chatty", &LogParams::default()).await?,
        "first\nsecond\nthird\n"
    );
    let last = LogParams {
        tail_lines: Some(1),
        ..Default::default()
    };
    assert_eq!(pods.logs("chatty", &last).await?, "third\n");
    ns.delete().await
}

#[tokio::test]
async fn init_containers_run_first_and_each_container_reports_its_own_end() -> anyhow::Result<()> {
    require_dev_cluster("init containers")?;
    let client = cluster().await?;
    let ns = TestNamespace::create(&client, "multi").await?;
    let pods = ns.pods();
    let shared = json!({"volumeMounts": [{"name": "shared", "mountPath": "/shared"}]});
    let sh = |name: &str, script: &str| shell_container(name, script, shared.clone());
    let p = pod(json!({
        "metadata": {"name": "multi"},
        "spec": {
            "restartPolicy": "Never",
            "volumes": [{"name": "shared", "emptyDir": {}}],
            "initContainers": [sh("prepare", "echo prepared > /shared/marker")],
            "containers": [
                sh("reads", "cat /shared/marker > /dev/termination-log"),
                sh("fails", "printf second > /dev/termination-log; exit 2"),
            ],
        },
    }));
    pods.create(&PostParams::default(), &p).await?;
    let done = wait_finished(&pods, "multi").await?;
    let status = done.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    let init = status.init_container_statuses.unwrap()[0]
        .state
        .clone()
        .unwrap()
        .terminated
        .unwrap();
    assert_eq!(init.reason.as_deref(), Some("Completed"));
    let ended: Vec<(String, i32, Option<String>)> = status
        .container_statuses
        .unwrap()
        .into_iter()
        .map(|c| {
            let t = c.state.unwrap().terminated.unwrap();
            (c.name, t.exit_code, t.message)
        })
        .collect();
    assert_eq!(
        ended,
        [
            ("reads".to_string(), 0, Some("prepared\n".to_string())),
            ("fails".to_string(), 2, Some("second".to_string())),
        ]
    );
    ns.delete().await
}
