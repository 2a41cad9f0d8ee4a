//! The operator end to end on a real node of the dev cluster: a kubelet with containerd and
//! runc (`hack/dev-cluster.sh`, pool `r7i.xlarge=1:kubelet`), so what only a real node decides
//! is the node's: the images' own config (entrypoint, user 999, working directory), cgroup
//! memory limits, the `RuntimeDefault` seccomp profile, the read-only root file system and
//! pod addresses from the CNI bridge plugin. The images are real images preloaded into the
//! node's containerd: the engine images built from the engine store's builds
//! (`hack/node-images.sh`), the membench image from `hack/build-image.sh`'s archive.
//!
//! An RDB file reaches the client pod from a PersistentVolumeClaim: a hostPath volume of the
//! real node, bound by the cluster's own controllers and mounted read-only by the kubelet.
//!
//! These tests need the real node: when it cannot start they fail, naming what is missing.

mod common;

use std::time::Duration;

use anyhow::Context as _;
use common::operator::*;
use common::real_node::assert_a_local_run_measures_the_same;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::Api;
use kube::ResourceExt;
use kube::api::{DeleteParams, PostParams};
use membench::crd::Phase;
use membench_devcluster::EnsureOptions;
use membench_devcluster::real_nodes::{
    REAL_NODE_INSTANCE_TYPE, TOLERATE_REAL_NODES, ensure_real_node,
};

/// Redis 8.2.3 and Valkey 9.1.2, the like-for-like pair of operator_e2e, on the real node's
/// instance type (its taint tolerated, [`TOLERATE_REAL_NODES`]). Small, so the node's 1750m
/// CPUs and 4Gi hold an engine and its client; 100,000 members, so the few kilobytes of client
/// buffers that differ between two runs stay well below the 0.5% compared (at 20,000 members
/// they moved Valkey's figure by 0.34%).
const TWO_ENGINES_ON_THE_REAL_NODE: &str = "  instanceType: r7i.xlarge\n  engines:\n    - {engine: redis, version: \"8.2.3\"}\n    - {engine: valkey, version: \"9.1.2\"}\n  workload: {sortedSet: {members: 100000, sampleEvery: 0}}\n  repetitions: 2\n  pipeline: 100\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_engine_comparison_on_a_real_node_measures_what_a_local_run_of_the_same_builds_does()
-> anyhow::Result<()> {
    assert_eq!(
        REAL_NODE_INSTANCE_TYPE, "r7i.xlarge",
        "the spec below names it"
    );
    let (_, node) = ensure_real_node(&EnsureOptions::default()).await?;
    let harness = Harness::start("real-zset", real_node_settings()).await?;
    let (recorder, history) = record_pods(harness.pods());
    let yaml = spec(
        "zset",
        &format!("{TWO_ENGINES_ON_THE_REAL_NODE}{TOLERATE_REAL_NODES}"),
    );
    harness.create(&yaml).await?;
    let done = harness.finished("zset", Duration::from_secs(300)).await?;
    recorder.abort();
    let status = done
        .status
        .clone()
        .context("a finished benchmark has a status")?;
    assert_eq!(status.phase, Some(Phase::Succeeded), "{status:#?}");

    // Pinned to the real node, each client beside its engine, one engine at a time.
    let history = std::mem::take(&mut *history.lock().unwrap());
    for i in 0..2 {
        for component in ["engine", "client"] {
            let pod = format!("zset-{i}-{component}");
            let ran_on = history
                .nodes
                .get(&pod)
                .with_context(|| format!("{pod} never scheduled: {history:?}"))?;
            assert_eq!(ran_on, &node.name_any(), "{pod} must run on the real node");
        }
        assert_eq!(
            status.engines[i].node_name.as_deref(),
            Some(node.name_any().as_str())
        );
    }
    assert_eq!(
        history.max_engines_at_once, 1,
        "engines must run one at a time"
    );

    let (redis, valkey) = (&status.engines[0], &status.engines[1]);
    assert_eq!(redis.version.as_deref(), Some("8.2.3"));
    assert_eq!(valkey.version.as_deref(), Some("9.1.2"));
    for (engine, repository) in [
        (redis, "docker.io/library/redis"),
        (valkey, "docker.io/valkey/valkey"),
    ] {
        assert_eq!(engine.state, "Succeeded", "{engine:#?}");
        assert_eq!(engine.repetitions.len(), 2, "{engine:#?}");
        assert!(engine.repetitions.iter().all(|r| r.items == 100_000));
        assert_eq!(
            engine.instance_type.as_deref(),
            Some(REAL_NODE_INSTANCE_TYPE)
        );
        // The runtime's imageID: the image's repository and digest, not the agent's local://.
        let image_id = engine.image_id.as_deref().unwrap_or_default();
        assert!(
            image_id.starts_with(&format!("{repository}@sha256:")),
            "{} ran as {image_id:?}, not a containerd image of {repository}",
            engine.name
        );
    }

    // The same builds run locally (membench run's own path) measure the same bytes per item:
    // the node adds nothing to what the engine itself accounts.
    let images = ["redis:8.2.3", "valkey/valkey:9.1.2"];
    assert_a_local_run_measures_the_same(&yaml, &images, &status.engines).await?;
    harness
        .pods_gone_within(Duration::from_secs(60))
        .await
        .context("after the benchmark finished")?;
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_over_its_cgroup_limit_is_oom_killed_by_the_kernel_keeping_earlier_repetitions()
-> anyhow::Result<()> {
    let (_, node) = ensure_real_node(&EnsureOptions::default()).await?;
    let harness = Harness::start("real-oom", real_node_settings()).await?;
    let body = "  instanceType: r7i.xlarge\n  engines:\n    - {engine: redis, version: \"8.2.3\", memory: 128Mi}\n  workload: {sortedSet: {members: 20000, sampleEvery: 0}}\n  repetitions: 10\n  settleSeconds: 3\n  cleanupPolicy: KeepFailed\n";
    harness
        .create(&spec("oom", &format!("{body}{TOLERATE_REAL_NODES}")))
        .await?;
    common::faults::wait_for_repetition(&harness, "oom", 0, 3).await?;
    // Something else fills the engine past its pod's memory limit (64 MiB at a time): the node's
    // memory cgroup stops it, there is no sampler on a real node.
    let engine_pod = harness.pods().get("oom-0-engine").await?;
    assert_eq!(
        engine_pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref()),
        Some(node.name_any().as_str())
    );
    let url = harness.engine_url("oom", "oom-0-engine").await?;
    common::faults::fill_with_ballast(url, Duration::from_secs(60)).await?;

    let done = harness.finished("oom", Duration::from_secs(120)).await?;
    let first = engine(&done, 0);
    assert_eq!(
        first.reason.as_ref().map(|r| r.as_str()),
        Some("EngineOOMKilled"),
        "{}",
        common::faults::status_of(&done)
    );
    assert!(
        first
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("128Mi"),
        "{:?}",
        first.message
    );
    assert!(
        (2..10).contains(&first.repetitions.len()),
        "the repetitions finished before the kill are kept: {first:#?}"
    );
    // The kubelet's record: the kernel's OOM kill (SIGKILL, 137).
    common::real_node::assert_oom_killed(&harness.pods(), "oom-0-engine").await?;
    harness.finish().await;
    Ok(())
}

/// A dump of the engine store's Valkey 9.1 holding 20,000 strings of 100 B, 500 hashes of 10
/// fields and 200 sorted sets of 20 members (20,700 keys), saved into `dir`/backups/dump.rdb,
/// readable by all (the client pod runs as an unprivileged user).
fn valkey_dump_in(dir: &std::path::Path) -> anyhow::Result<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    let server = common::start(membench::crd::EngineKind::Valkey, &[]);
    let mut con = common::connect(&server.address);
    let mut pipe = redis::pipe();
    for i in 0..20_000 {
        pipe.cmd("SET")
            .arg(format!("session:{i}"))
            .arg(format!("{i:0>100}"))
            .ignore();
    }
    for i in 0..500 {
        let fields: Vec<(String, String)> = (0..10)
            .map(|f| (format!("field{f}"), format!("value-{i}-{f}")))
            .collect();
        pipe.cmd("HSET")
            .arg(format!("user:{i}"))
            .arg(fields)
            .ignore();
    }
    for i in 0..200 {
        let members: Vec<(u32, String)> = (0..20).map(|m| (m, format!("member-{m}"))).collect();
        pipe.cmd("ZADD")
            .arg(format!("board:{i}"))
            .arg(members)
            .ignore();
    }
    pipe.exec(&mut con)?;
    redis::cmd("SAVE").exec(&mut con)?;
    let saved: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("dir").query(&mut con)?;
    let saved = std::path::Path::new(&saved[1]).join("dump.rdb");
    let backups = dir.join("backups");
    std::fs::create_dir_all(&backups)?;
    let dump = backups.join("dump.rdb");
    std::fs::copy(&saved, &dump).with_context(|| format!("copying {}", saved.display()))?;
    drop(con);
    server.stop();
    for (path, mode) in [
        (dir, 0o755),
        (backups.as_path(), 0o755),
        (dump.as_path(), 0o644),
    ] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    }
    Ok(dump)
}

/// A backup in a PersistentVolumeClaim, loaded on the real node: the claim (bound to a
/// hostPath volume of the node) mounted read-only into the client pod, the file read there,
/// every key written with its type, and the bytes per key what a local run of the same build
/// measures loading the same file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rdb_file_in_a_persistent_volume_claim_loads_on_the_real_node_as_it_does_locally()
-> anyhow::Result<()> {
    let (_, node) = ensure_real_node(&EnsureOptions::default()).await?;
    let dir = std::env::temp_dir().join(format!("membench-rdb-claim-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let dump = valkey_dump_in(&dir)?;
    let harness = Harness::start("real-rdb", real_node_settings()).await?;
    let namespace = harness.namespace.name().to_string();

    // A claim the namespace does not have: refused before any pod starts.
    let absent = "  instanceType: r7i.xlarge\n  engines:\n    - {engine: valkey, version: \"9.1.2\", memory: 256Mi}\n  workload: {rdb: {path: dump.rdb, persistentVolumeClaim: {claimName: absent}}}\n";
    harness
        .create(&spec("absent", &format!("{absent}{TOLERATE_REAL_NODES}")))
        .await?;
    let refused = harness.finished("absent", Duration::from_secs(60)).await?;
    let message = invalid_spec_message(&refused, "absent");
    anyhow::ensure!(
        message.contains(&format!(
            "spec.workload.rdb.persistentVolumeClaim: no PersistentVolumeClaim absent in namespace {namespace}: create the claim that holds the file (or name the one that does), then create the benchmark again"
        )),
        "{message}"
    );
    anyhow::ensure!(
        harness
            .pods()
            .list(&Default::default())
            .await?
            .items
            .is_empty(),
        "pods started for a claim that does not exist"
    );

    // The volume and its claim, bound to each other by name, as an administrator pre-binds a
    // backup's volume; the cluster's persistent volume controller completes the binding.
    let volume_name = format!("membench-rdb-{namespace}");
    let volumes: Api<PersistentVolume> = Api::all(harness.client.clone());
    let volume: PersistentVolume = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": volume_name},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadOnlyMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "hostPath": {"path": dir.display().to_string(), "type": "Directory"},
            "claimRef": {"namespace": namespace, "name": "backups"},
        }
    }))?;
    volumes.create(&PostParams::default(), &volume).await?;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(harness.client.clone(), &namespace);
    let claim: PersistentVolumeClaim = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "backups"},
        "spec": {
            "accessModes": ["ReadOnlyMany"],
            "storageClassName": "",
            "volumeName": volume_name,
            "resources": {"requests": {"storage": "1Gi"}},
        }
    }))?;
    claims.create(&PostParams::default(), &claim).await?;

    let body = "  instanceType: r7i.xlarge\n  engines:\n    - {engine: valkey, version: \"9.1.2\", memory: 256Mi}\n  workload: {rdb: {path: backups/dump.rdb, persistentVolumeClaim: {claimName: backups}}}\n  repetitions: 2\n  pipeline: 100\n";
    harness
        .create(&spec("backup", &format!("{body}{TOLERATE_REAL_NODES}")))
        .await?;
    let done = harness.finished("backup", Duration::from_secs(300)).await;
    // A file the claim does not hold: the client's refusal is the benchmark's condition,
    // naming the claim and what to check.
    let missing = "  instanceType: r7i.xlarge\n  engines:\n    - {engine: valkey, version: \"9.1.2\", memory: 256Mi}\n  workload: {rdb: {path: backups/missing.rdb, persistentVolumeClaim: {claimName: backups}}}\n  repetitions: 1\n";
    let refused = match &done {
        Ok(_) => {
            harness
                .create(&spec("missing", &format!("{missing}{TOLERATE_REAL_NODES}")))
                .await?;
            Some(harness.finished("missing", Duration::from_secs(180)).await)
        }
        Err(_) => None,
    };
    let _ = volumes.delete(&volume_name, &DeleteParams::default()).await;
    let done = done?;
    let status = done
        .status
        .clone()
        .context("a finished benchmark has a status")?;
    assert_eq!(status.phase, Some(Phase::Succeeded), "{status:#?}");
    let valkey = &status.engines[0];
    assert_eq!(valkey.node_name.as_deref(), Some(node.name_any().as_str()));
    assert_eq!(valkey.repetitions.len(), 2, "{valkey:#?}");
    assert!(
        valkey.repetitions.iter().all(|r| r.items == 20_700),
        "every key of the file, in each repetition: {valkey:#?}"
    );
    let mut by_type: Vec<(&str, u64)> = valkey
        .summary
        .as_ref()
        .context("a summary")?
        .bytes_per_key_by_type
        .iter()
        .map(|t| (t.key_type.as_str(), t.keys))
        .collect();
    by_type.sort();
    assert_eq!(
        by_type,
        [("hash", 500), ("string", 20_000), ("zset", 200)],
        "{valkey:#?}"
    );

    let refused = refused.context("the missing file's benchmark")??;
    let refused_status = refused.status.clone().context("a status")?;
    assert_eq!(
        refused_status.phase,
        Some(Phase::Failed),
        "{refused_status:#?}"
    );
    let message = engine(&refused, 0).message.unwrap_or_default();
    for words in [
        "invalid workload.path: /var/lib/membench/rdb/backups/missing.rdb",
        "(in PersistentVolumeClaim backups, mounted read-only at /var/lib/membench/rdb; the client runs as an unprivileged user, so the file must be readable by all)",
    ] {
        assert!(message.contains(words), "{words:?} not in {message:?}");
    }

    // The claim deleted after the run: what the run measured stands, and the operator,
    // deciding again, does not look the claim up (it turned the benchmark Failed before).
    claims.delete("backups", &DeleteParams::default()).await?;
    // Gone, not only marked: its protection holds it while a pod still mounts it.
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    while claims.get_opt("backups").await?.is_some() {
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "claim backups still there 90 s after its deletion"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    harness
        .decided_again("backup", Duration::from_secs(30))
        .await?;
    let after = harness.benchmarks().get("backup").await?;
    let after_status = after.status.context("a status")?;
    assert_eq!(
        after_status.phase,
        Some(Phase::Succeeded),
        "with its claim deleted after the run: {after_status:#?}"
    );
    assert_eq!(after_status.engines[0].repetitions.len(), 2);

    // The same file, loaded locally by the build in the node's image: the claim changes
    // nothing of what is measured.
    let local = spec(
        "backup",
        &format!(
            "  instanceType: r7i.xlarge\n  engines:\n    - {{engine: valkey, version: \"9.1.2\"}}\n  workload: {{rdb: {{path: {}}}}}\n  repetitions: 2\n  pipeline: 100\n",
            dump.display()
        ),
    );
    assert_a_local_run_measures_the_same(&local, &["valkey/valkey:9.1.2"], &status.engines).await?;
    harness
        .pods_gone_within(Duration::from_secs(60))
        .await
        .context("after the benchmark finished")?;
    harness.finish().await;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
