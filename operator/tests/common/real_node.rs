//! What real-node tests compare a benchmark on the dev cluster's real node with: the same
//! engine store builds the node's images hold (`hack/node-images.sh`), run locally by
//! `membench run`'s own path.

use anyhow::Context as _;
use membench::client::measurement::measure::BenchmarkReport;
use membench::crd::EngineStatus;
use membench_devcluster::agent::images::ImageResolver;
use membench_enginestore::EngineStore;

/// The engine store build the real node's image of `image` holds (hack/node-images.sh builds
/// each image from the build the node agent would run for it).
pub fn build_in_image(image: &str) -> anyhow::Result<String> {
    let resolver = ImageResolver::new(EngineStore::default_root(), None, None);
    let pulled = resolver
        .pull(image, "amd64")
        .with_context(|| format!("the engine store's build for {image}"))?;
    pulled.build.context("an engine image has a build")
}

/// Runs the MemoryBenchmark `yaml` locally, each engine on the build of the image at its
/// place in `images`; the engines' results in spec order.
pub async fn run_locally(yaml: &str, images: &[&str]) -> anyhow::Result<Vec<BenchmarkReport>> {
    let mut local_spec = membench::validation::spec_file::parse_specs(yaml)
        .map_err(anyhow::Error::msg)?
        .remove(0);
    anyhow::ensure!(
        local_spec.spec.engines.len() == images.len(),
        "one image per engine of the spec"
    );
    for (engine, image) in local_spec.spec.engines.iter_mut().zip(images) {
        engine.build = Some(build_in_image(image)?);
    }
    let local = tokio::task::spawn_blocking(move || {
        membench::local::runner::run_benchmark(
            &local_spec,
            Default::default(),
            &membench::client::connection::stop_request::StopRequest::new(),
            &mut |_| {},
            &mut |_| {},
        )
    })
    .await?
    .map_err(|e| anyhow::anyhow!("the local run: {e}"))?;
    Ok(local.engines)
}

/// The median bytes per item of an engine in a benchmark's status.
pub fn bytes_per_item(engine: &EngineStatus) -> anyhow::Result<f64> {
    Ok(engine
        .summary
        .as_ref()
        .with_context(|| format!("{} has no summary: {engine:#?}", engine.name))?
        .bytes_per_item
        .median)
}

/// Runs `yaml` locally on the builds of `images` ([`run_locally`]) and asserts that each engine
/// stores the bytes per item it did on the real node within 0.5%: the node adds nothing to what
/// the engine accounts. Returns the local results.
pub async fn assert_a_local_run_measures_the_same(
    yaml: &str,
    images: &[&str],
    in_cluster: &[EngineStatus],
) -> anyhow::Result<Vec<BenchmarkReport>> {
    let local = run_locally(yaml, images).await?;
    assert_same_bytes_per_item(in_cluster, &local, 0.005)?;
    Ok(local)
}

/// Asserts that each engine measured on the real node and locally stored the same bytes per
/// item within `within` (a fraction): the node adds nothing to what the engine accounts.
fn assert_same_bytes_per_item(
    in_cluster: &[EngineStatus],
    local: &[BenchmarkReport],
    within: f64,
) -> anyhow::Result<()> {
    for (in_cluster, local) in in_cluster.iter().zip(local) {
        let cluster_bytes = bytes_per_item(in_cluster)?;
        let local_bytes = local
            .summary
            .as_ref()
            .with_context(|| {
                format!(
                    "the local run of {} measured nothing: {:?}",
                    local.name, local.error
                )
            })?
            .bytes_per_item
            .median;
        eprintln!(
            "{}: {cluster_bytes:.2} B/item on the real node, {local_bytes:.2} locally ({})",
            in_cluster.name,
            local.engine.build.as_deref().unwrap_or("?")
        );
        let difference = (cluster_bytes - local_bytes).abs() / local_bytes;
        anyhow::ensure!(
            difference < within,
            "{}: {cluster_bytes:.2} B/item on the real node vs {local_bytes:.2} locally differ by {:.2}% (at most {:.2}%)",
            in_cluster.name,
            difference * 100.0,
            within * 100.0
        );
    }
    Ok(())
}

/// A process of a pod's container, as this machine sees it: a real node's containers are
/// processes of this machine's PID namespace, in the kubelet's cgroups.
#[derive(Debug)]
pub struct HostProcess {
    pub pid: u32,
    /// `/proc/<pid>/comm`: the program's name.
    pub comm: String,
    /// `/proc/<pid>/cmdline`, its arguments as anyone on the node can read them (`ps`).
    pub cmdline: Vec<String>,
    /// The real user id (`Uid:` of `/proc/<pid>/status`).
    pub uid: u32,
    /// Its v1 memory cgroup's directory, from `/proc/<pid>/cgroup`.
    pub memory_cgroup: std::path::PathBuf,
}

impl HostProcess {
    /// The container's root file system as the process sees it (`/proc/<pid>/root`).
    pub fn root(&self) -> std::path::PathBuf {
        std::path::PathBuf::from(format!("/proc/{}/root", self.pid))
    }
}

/// The processes of `pod` named `comm`: those whose memory cgroup is below the pod's own
/// (`.../kubepods/pod<uid>/<container>` with the kubelet's cgroupfs driver).
pub fn host_processes(
    pod: &k8s_openapi::api::core::v1::Pod,
    comm: &str,
) -> anyhow::Result<Vec<HostProcess>> {
    let uid = pod
        .metadata
        .uid
        .as_deref()
        .context("a pod from the API has a UID")?;
    let marker = format!("/pod{uid}/");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc")? {
        let Ok(pid) = entry?.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let read = |file: &str| std::fs::read(format!("/proc/{pid}/{file}")).unwrap_or_default();
        let cgroups = String::from_utf8_lossy(&read("cgroup")).into_owned();
        let memory = cgroups
            .lines()
            .find_map(|line| line.split_once(":memory:"))
            .map(|(_, path)| path)
            .filter(|path| path.contains(&marker));
        let name = String::from_utf8_lossy(&read("comm")).trim().to_string();
        let Some(memory) = memory.filter(|_| name == comm) else {
            continue;
        };
        let memory_cgroup =
            std::path::Path::new("/sys/fs/cgroup/memory").join(memory.trim_start_matches('/'));
        let status = String::from_utf8_lossy(&read("status")).into_owned();
        let uid = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().next()?.parse().ok())
            .with_context(|| format!("the Uid line of /proc/{pid}/status"))?;
        let cmdline = read("cmdline")
            .split(|b| *b == 0)
            .filter(|arg| !arg.is_empty())
            .map(|arg| String::from_utf8_lossy(arg).into_owned())
            .collect();
        found.push(HostProcess {
            pid,
            comm: name,
            cmdline,
            uid,
            memory_cgroup,
        });
    }
    Ok(found)
}

/// How the first container of `pod` ended, as the kubelet recorded it (the pod must still
/// exist: `cleanupPolicy: KeepFailed`).
pub async fn terminated_state(
    pods: &kube::Api<k8s_openapi::api::core::v1::Pod>,
    pod: &str,
) -> anyhow::Result<k8s_openapi::api::core::v1::ContainerStateTerminated> {
    pods.get(pod)
        .await?
        .status
        .and_then(|s| s.container_statuses)
        .and_then(|c| c.into_iter().next())
        .and_then(|c| c.state)
        .and_then(|s| s.terminated)
        .with_context(|| {
            format!("the terminated state of {pod}'s container (cleanupPolicy KeepFailed)")
        })
}

/// Asserts the kubelet recorded `pod`'s container as killed by the kernel's OOM killer:
/// reason `OOMKilled`, exit code 137 (SIGKILL).
pub async fn assert_oom_killed(
    pods: &kube::Api<k8s_openapi::api::core::v1::Pod>,
    pod: &str,
) -> anyhow::Result<()> {
    let terminated = terminated_state(pods, pod).await?;
    assert_eq!(
        terminated.reason.as_deref(),
        Some("OOMKilled"),
        "{terminated:#?}"
    );
    assert_eq!(terminated.exit_code, 137, "{terminated:#?}");
    Ok(())
}

/// What the kernel counted for one engine container on this machine until it ended: the
/// memory cgroup's high-water mark (`memory.max_usage_in_bytes`, as last read) and the most
/// the fewest and most processes the cgroup held at once (`cgroup.procs`; a save that forks
/// adds its child for the save's length).
#[derive(Debug, Clone, Copy)]
pub struct ContainerWatch {
    pub high_water_bytes: u64,
    pub fewest_processes: usize,
    pub most_processes: usize,
}

/// Follows `pod`'s engine container (the process named `comm`) in its memory cgroup as this
/// machine sees it (a real node's containers are this machine's processes, in the kubelet's
/// cgroups, v1 here) until the cgroup ends, as the pod is deleted. Read every 50 ms: the mark
/// only rises, so the reads lose nothing of it; a save's fork lives for the save, hundreds of
/// milliseconds at least with the data these tests load, so it cannot fall between two reads.
pub fn watch_engine_cgroup(
    pods: kube::Api<k8s_openapi::api::core::v1::Pod>,
    pod: &str,
    comm: &'static str,
) -> tokio::task::JoinHandle<anyhow::Result<ContainerWatch>> {
    let pod = pod.to_string();
    tokio::spawn(async move {
        let started = std::time::Instant::now();
        let cgroup = loop {
            anyhow::ensure!(
                started.elapsed() < std::time::Duration::from_secs(120),
                "{pod}'s {comm} process never appeared on this machine"
            );
            if let Ok(found) = pods.get(&pod).await {
                let processes = host_processes(&found, comm)?;
                if let Some(process) = processes.into_iter().next() {
                    break process.memory_cgroup;
                }
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        };
        let mut high_water = None;
        let mut fewest_processes = usize::MAX;
        let mut most_processes = 0;
        while let Ok(text) = std::fs::read_to_string(cgroup.join("memory.max_usage_in_bytes")) {
            high_water = text.trim().parse::<u64>().ok().or(high_water);
            if let Ok(procs) = std::fs::read_to_string(cgroup.join("cgroup.procs")) {
                let count = procs.lines().count();
                // The last read may find the cgroup emptied as the container ends.
                if count > 0 {
                    fewest_processes = fewest_processes.min(count);
                    most_processes = most_processes.max(count);
                }
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let high_water_bytes =
            high_water.with_context(|| format!("no memory.max_usage_in_bytes in {cgroup:?}"))?;
        Ok(ContainerWatch {
            high_water_bytes,
            fewest_processes,
            most_processes,
        })
    })
}
